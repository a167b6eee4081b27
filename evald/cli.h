/*
 * Shared pieces of the evald subcommands: opening the tracker, building a
 * checker spec from flags, the run summary, printing helpers.
 */
#ifndef EV_CLI_H
#define EV_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"
#include "evald/commands.h"
#include "evald/opt.h"
#include "feedback/feedback.h"
#include "scoring/scoring.h"
#include "suites/suites.h"

/* Prints "evald: <msg>" for the current error and returns EV_EXIT_FAIL. */
int ev_cli_fail(const char *what);
/* Parses tracker JSON that a command is about to print as text, with every
 * string made safe for a terminal (ev_json_term_clean): titles, answers and
 * ids are untrusted. NULL when not JSON; free with cJSON_Delete. */
cJSON *ev_cli_text_json(const char *json);
/* Opens cli->db_path; prints the error on failure. */
int ev_cli_open_tracker(const ev_cli *cli, ev_tracker **out);
/* Parses an id argument ("12") of a `what` ("run", "issue", ...); prints
 * a usage error naming it when bad. */
bool ev_cli_parse_id(const char *s, const char *what, int64_t *out);
bool ev_cli_parse_run_id(const char *s, int64_t *out);

/* Comma lists of lengths ("4k,32k,1m", ev_longctx_parse_length) and of
 * depths (percentages 0..100), at most `max` items: the count, or -1 with
 * the message set naming `flag`. */
int ev_cli_parse_lengths(size_t *out, int max, const char *list, const char *flag);
int ev_cli_parse_depths(int *out, int max, const char *list, const char *flag);

/* The options of commands whose only option is --json (an ev_json_opts). */
typedef struct {
	bool json;
} ev_json_opts;
extern const ev_opt ev_json_only_opts[];

/* A subcommand of a command with subcommands ("issue add"); each parses
 * its own arguments (argv[0] is its name) from its own ev_cmd_spec. */
typedef struct {
	const char *name;
	ev_cmd_fn fn;
	const char *summary;
} ev_subcommand;

typedef struct {
	const char *name;          /* "issue" */
	const char *about;
	const ev_subcommand *subs; /* ends with {NULL} */
	const char *dflt;          /* run when no subcommand is named (an option comes first), or NULL */
} ev_subcommand_set;

/* Runs the subcommand argv[1] with argv shifted by one. --help/-h prints
 * the list of subcommands to stdout (exit 0); a missing one (without a
 * default) or an unknown one prints it to stderr (exit usage). */
int ev_cli_subcommand(const ev_cli *cli, int argc, char **argv, const ev_subcommand_set *set);

/* Checker flags as given on the command line (rows: EV_CHECKER_OPTS). */
typedef struct {
	const char *type;
	const char *patterns[16];
	int n_patterns;
	int group;          /* -1: unset */
	const char *match;
	bool ignore_case;
	double tolerance;   /* < 0: unset */
	const char *compare;
	const char *metric; /* the loglikelihood checker's acc | acc_norm */
} ev_checker_flags;

#define EV_CHECKER_FLAGS_INIT {.group = -1, .tolerance = -1.0}

/* The option rows of an ev_checker_flags member `m` of options struct T. */
#define EV_CHECKER_OPTS(T, m)                                                                               	EV_O_STR("--checker", T, m.type, "TYPE",                                                            	         "includes, exact, numeric, choice, regex, humaneval, mbpp, tests, toolcall, loglikelihood or judge"),            	EV_O_STRS("--pattern", T, m.patterns, m.n_patterns, "REGEX", "the regex checker's pattern"),      	EV_O_INT("--group", T, m.group, 0, 99, "N", "the capture group the regex checker compares"),        	EV_O_CHOICE("--match", T, m.match, "first|last", "which regex match counts"),                     	EV_O_FLAG("--ignore-case", T, m.ignore_case, "compare without case"),                              	EV_O_NUM("--tolerance", T, m.tolerance, 0, 1e300, "X", "the numeric checker's tolerance"),          	EV_O_CHOICE("--compare", T, m.compare, "exact|includes|none", "how the regex capture is compared"),       \
	EV_O_CHOICE("--metric", T, m.metric, "acc|acc_norm", "the loglikelihood checker's pick: most likely choice, or per character")

/* The engine's own settings as given on the command line (--attention,
 * --msa-*, --kv-*; rows: EV_ENGINE_OPTS): validated by the engine's parser
 * as they are read, kept as given for storing with a run. */
#define EV_ENGINE_MAX_FLAGS 17
typedef struct {
	const char *names[EV_ENGINE_MAX_FLAGS]; /* static: the row's name */
	const char *values[EV_ENGINE_MAX_FLAGS];
	int n;
	eng_model_options mo; /* attention and KV fields as parsed */
} ev_engine_flags;

void ev_engine_flags_init(ev_engine_flags *f);
int ev_engine_flag_fn(void *opts, const ev_opt *o, const char *name, const char *value);
/* {"attention":"msa","msa-top-k":"4"} (names without dashes), or NULL
 * when none was given; and back (values point into `j`). */
cJSON *ev_engine_flags_json(const ev_engine_flags *f);
int ev_engine_flags_from_json(ev_engine_flags *f, const cJSON *j);

#define EV_ENGINE_ROW(nm, T, m, mt, hlp) \
	{.name = (nm), .kind = EV_OPT_FN, .off = offsetof(T, m), .meta = (mt), .help = (hlp), .fn = ev_engine_flag_fn, .flags = EV_OPT_VALUE}
#define EV_ENGINE_OPTS(T, m)                                                                                \
	EV_ENGINE_ROW("--backend", T, m, "cpu|cuda", "where the bundled engine runs (cpu; cuda: the GPU, in a build with the toolkit)"), \
	EV_ENGINE_ROW("--attention", T, m, "dense|msa", "attention on a checkpoint (default: MSA when its config has msa)"), \
	EV_ENGINE_ROW("--msa-selector", T, m, "indexer|mean", "MSA's block choice: M3's lightning indexer, or block means (default: the indexer where the checkpoint has one)"), \
	EV_ENGINE_ROW("--msa-block-size", T, m, "B", "MSA block = KV page, in tokens (64)"),                  \
	EV_ENGINE_ROW("--msa-top-k", T, m, "K", "MSA blocks chosen per KV head (16)"),                         \
	EV_ENGINE_ROW("--msa-sink-blocks", T, m, "S", "MSA blocks always attended at the start (1)"),          \
	EV_ENGINE_ROW("--msa-local-blocks", T, m, "L", "MSA blocks always attended at the end (2)"),           \
	EV_ENGINE_ROW("--msa-dense-below", T, m, "N", "dense attention below N tokens (8192)"),                \
	EV_ENGINE_ROW("--msa-dense-layers", T, m, "0,1", "layers that always attend densely"),                 \
	EV_ENGINE_ROW("--kv-dtype", T, m, "f32|f16|bf16", "how the KV cache stores keys and values (f32)"),    \
	EV_ENGINE_ROW("--kv-max-bytes", T, m, "N[k|m|g]", "bound on the KV cache's bytes"),                    \
	EV_ENGINE_ROW("--activation-bits", T, m, "16|8", "CPU: K-quant and IQ4_XS weights (Q4_K, Q5_K, Q6_K, IQ4_XS) against 16-bit activations (16), or 8-bit super-blocks as llama.cpp: faster, less precise")

/* The spec JSON for the flags (malloc'd), or NULL when no flag was given.
 * --pattern without --checker means the regex checker. */
char *ev_checker_flags_spec(const ev_checker_flags *f);

/* The run's summary JSON (scoring/summary.h) from its stored results, its
 * planned suites in order; pass@k and pass^k when it ran several epochs. */
int ev_summary_compute(char **out, ev_tracker *t, int64_t run_id);

/* The bundled suites' folder: $EVALD_DATA_DIR, else suites/data in the
 * source tree. Malloc'd. */
char *ev_cli_data_dir(void);
/* Loads a suite path as `run` stores it: "@default" is the embedded
 * suite, written into a temporary folder made on first use (*tmpdir); a
 * bare name that is not a path is a bundled suite ("coding"). */
int ev_cli_suite_load(ev_suite **out, const char *path, char **tmpdir);
/* Removes a folder made by ev_cli_suite_load and frees the name. */
void ev_cli_tmpdir_remove(char *tmpdir);

/* The embedded default suite (written to a temp file and loaded): the
 * path of a .jsonl file under `dir`. */
int ev_default_suite_write(char **out_path, const char *dir);



/* evald suites gen long-context ... (evald/cmd_gen.c); argv[0] is
 * "long-context". */
int ev_cmd_suites_gen_longctx(const ev_cli *cli, int argc, char **argv);

#endif
