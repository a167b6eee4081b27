/*
 * Shared pieces of the evald subcommands: opening the tracker, building a
 * checker spec from flags, the run summary, printing helpers.
 */
#ifndef EV_CLI_H
#define EV_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "evald/commands.h"
#include "feedback/feedback.h"
#include "scoring/scoring.h"
#include "suites/suites.h"

/* Prints "evald: <msg>" for the current error and returns EV_EXIT_FAIL. */
int ev_cli_fail(const char *what);
/* Opens cli->db_path; prints the error on failure. */
int ev_cli_open_tracker(const ev_cli *cli, ev_tracker **out);
/* Parses an id argument ("12") of a `what` ("run", "issue", ...); prints
 * a usage error naming it when bad. */
bool ev_cli_parse_id(const char *s, const char *what, int64_t *out);
bool ev_cli_parse_run_id(const char *s, int64_t *out);

/* A subcommand of a command with subcommands ("issue add"). */
typedef struct {
	const char *name;
	ev_cmd_fn fn;
} ev_subcommand;

/* Runs the subcommand argv[1] of `cmd` from subs[0..n) with argv shifted
 * by one; no subcommand prints usage to stderr (exit usage), --help/-h to
 * stdout (exit 0); an unknown one is named before the usage. */
int ev_cli_subcommand(const ev_cli *cli, int argc, char **argv, const char *cmd, const char *usage,
		      const ev_subcommand *subs, size_t n);

/* Checker flags as given on the command line: --checker T, --pattern P
 * (repeatable), --group N, --match first|last, --ignore-case,
 * --tolerance X, --compare exact|includes|none. */
typedef struct {
	const char *type;
	const char *patterns[16];
	int n_patterns;
	int group;          /* -1: unset */
	const char *match;
	bool ignore_case;
	double tolerance;   /* < 0: unset */
	const char *compare;
} ev_checker_flags;

#define EV_CHECKER_FLAGS_INIT {NULL, {0}, 0, -1, NULL, false, -1.0, NULL}

/* Handles one checker flag at argv[*i] (advancing *i past its value).
 * Returns 1 when the flag was a checker flag, 0 when not, -1 on error. */
int ev_checker_flags_parse(ev_checker_flags *f, int argc, char **argv, int *i);
/* The spec JSON for the flags (malloc'd), or NULL when no flag was given. */
char *ev_checker_flags_spec(const ev_checker_flags *f);

/* The run's summary JSON (scoring/summary.h) from its stored results, its
 * planned suites in order; pass@k and pass^k when it ran several epochs. */
int ev_summary_compute(char **out, ev_tracker *t, int64_t run_id);

/* Loads a suite path as `run` stores it: "@default" is the embedded
 * suite, written into a temporary folder made on first use (*tmpdir). */
int ev_cli_suite_load(ev_suite **out, const char *path, char **tmpdir);
/* Removes a folder made by ev_cli_suite_load and frees the name. */
void ev_cli_tmpdir_remove(char *tmpdir);

/* The embedded default suite (written to a temp file and loaded): the
 * path of a .jsonl file under `dir`. */
int ev_default_suite_write(char **out_path, const char *dir);



/* evald suites gen long-context ... (evald/cmd_gen.c; owner: longctx):
 * argv[0] is "gen" or the generator's name. */
int ev_cmd_suites_gen(const ev_cli *cli, int argc, char **argv);

#endif
