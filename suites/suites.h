/*
 * suites: the suite format and its loading.
 *
 * A suite is a folder or an archive (.tar, .tar.gz, .tar.zst, .zip) holding
 * suite.json and samples.jsonl with attachments beside them, or a bare
 * .jsonl file of {"id","input","target"} lines. Loading validates every
 * line and names file:line and the field in its errors. Archives are
 * extracted into a private temporary folder with no absolute paths, no
 * "..", no links leaving the bundle, and caps on entry count and size.
 *
 * The sample and message types below are plain data shared with scoring
 * and runners (read-only for them); the suite owns all their memory.
 */
#ifndef EV_SUITES_H
#define EV_SUITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/result.h"

/* ---- the message model ------------------------------------------------- */

typedef enum {
	EV_PART_TEXT,
	EV_PART_IMAGE,
	EV_PART_VIDEO,
	EV_PART_DOCUMENT
} ev_part_kind;

/* One content part. Text parts carry `text`; attachments carry `path`
 * (absolute, inside the suite's root, checked at load) or `url`, and a MIME
 * type when known. */
typedef struct {
	ev_part_kind kind;
	char *text;
	char *path;
	char *url;
	char *mime;
} ev_part;

/* One chat message: role is "system", "user", "assistant" or "tool".
 * tool_calls_json is the OpenAI `tool_calls` array as JSON text (assistant
 * messages); tool_call_id and name belong to tool messages. */
typedef struct {
	char *role;
	ev_part *parts;
	size_t n_parts;
	char *tool_calls_json;
	char *tool_call_id;
	char *name;
} ev_message;

/* Generation settings. Unset fields keep the backend's defaults:
 * max_tokens 0, temperature/top_p < 0, has_seed false. */
typedef struct {
	int max_tokens;
	double temperature;
	double top_p;
	bool has_seed;
	int64_t seed;
	char **stop;
	size_t n_stop;
	int epochs; /* >= 1 */
} ev_gen;

#define EV_GEN_INIT {0, -1.0, -1.0, false, 0, NULL, 0, 1}

typedef struct {
	char *id;
	ev_message *messages; /* after the prompt template was applied */
	size_t n_messages;
	char **targets;       /* acceptable answers (a string target is one) */
	size_t n_targets;
	char *target_json;    /* the target as written (string, number, list, object) */
	char *tests_json;     /* "tests" as JSON text, or NULL */
	char *tools_json;     /* OpenAI tool definitions array as JSON, or NULL */
	char *metadata_json;  /* "metadata" object as JSON text, or NULL */
	char *checker_json;   /* a per-sample checker override, or NULL */
	size_t line;          /* line in samples.jsonl (1-based) */
} ev_sample;

/* ---- suites -------------------------------------------------------------- */

typedef struct {
	char *name;
	char *version;
	char *kind;            /* "qa", "coding", "tool-use", "long-context", ... */
	char *root;            /* folder the samples and attachments are in */
	char *content_hash;    /* sha256 over suite.json and samples.jsonl */
	char *system_prompt;   /* optional, prepended as a system message */
	char *prompt_template; /* "{input}"-style template, or NULL */
	char *checker_json;    /* the suite's checker spec (scoring parses it) */
	ev_gen gen;
	ev_sample *samples;
	size_t n_samples;
	/* private */
	char *extracted_dir;   /* removed by ev_suite_free when set */
} ev_suite;

typedef struct {
	size_t max_archive_bytes;  /* total uncompressed bytes of an archive */
	size_t max_entries;        /* entries in an archive */
	size_t max_file_bytes;     /* one samples.jsonl or suite.json */
	size_t max_samples;
	const char *tmp_dir;       /* where archives are extracted (TMPDIR) */
} ev_suite_options;

#define EV_SUITE_OPTIONS_INIT {(size_t)4 << 30, 100000, (size_t)2 << 30, 10000000, NULL}

/* ---- results: suites/result.h (the result type, reasons, the fold) ---- */

/* Loads a suite from a folder, an archive, or a bare .jsonl file. The
 * suite's name defaults to the file or folder name without extension.
 * On failure *out is NULL and the message names file:line and field. */
int ev_suite_load(ev_suite **out, const char *path, const ev_suite_options *opt);
void ev_suite_free(ev_suite *s);

/* Substitutes {field} references in a template with the sample's fields
 * ("input", and any string/number field of the sample line or its
 * metadata); "{{" and "}}" are literal braces. An unknown field is an
 * error naming it. The result is malloc'd. */
int ev_template_render(char **out, const char *tmpl, const cJSON *fields, const char *what);

/* The text of a message: its text parts joined (borrowed pointers copied
 * into a malloc'd string). */
char *ev_message_text(const ev_message *m);

/* Extracts an archive into `dest` under the safety rules above. */
int ev_archive_extract(const char *archive, const char *dest, const ev_suite_options *opt);

/* ---- BFCL importer (suites/import_bfcl.c; owner: toolcall) ---------------- */

/* Turns a Berkeley Function Calling Leaderboard file (one JSON object a
 * line: id, question, function) and its possible answers (id,
 * ground_truth; NULL for irrelevance) into a suite folder `out_dir`
 * (created if absent): suite.json (name from the file, "BFCL_v3_simple.json"
 * -> "bfcl_v3_simple"; kind "tool-use"; checker {"type":"toolcall",
 * "category":"simple"}) and samples.jsonl: id, messages (the question's
 * first turn), tools (OpenAI format: dots in names become '_', BFCL types
 * become JSON Schema), tests {"functions", "ground_truth"} (BFCL's own,
 * for the checker) and metadata {"category", "source"}. Every question
 * needs an answer when `answers` is given. Errors name file:line and the
 * field; nothing is written then. */
int ev_import_bfcl(const char *questions, const char *answers, const char *out_dir);

/* ---- HumanEval and MBPP importers (suites/import_humaneval.c,
 * suites/import_mbpp.c; owner: sandbox) ------------------------------------ */

/* Turns the published HumanEval file (HumanEval.jsonl.gz, or the same
 * uncompressed: task_id, prompt, entry_point, canonical_solution, test)
 * into a suite folder `out_dir` (created if absent): suite.json (name
 * "humaneval", kind "coding", checker {"type":"humaneval"}) and
 * samples.jsonl: id = task_id, input = prompt, tests {"style":"humaneval",
 * "prompt","test","entry_point"}, metadata {"canonical_solution",
 * "entry_point"}. Errors name file:line and the field; nothing is written
 * then. */
int ev_import_humaneval(const char *jsonl_or_gz, const char *out_dir);

/* The same for MBPP (mbpp.jsonl, plain or compressed: task_id, text or
 * prompt, code, test_list, test_setup_code or test_imports,
 * challenge_test_list): name "mbpp", checker {"type":"mbpp"}; id = the
 * task_id as text; input = the text and the tests it must pass; tests
 * {"style":"mbpp","test_list","test_setup_code","challenge_test_list"};
 * metadata {"code"}. */
int ev_import_mbpp(const char *jsonl_or_gz, const char *out_dir);

/* Reads a whole file that may be compressed (gzip, zstd, xz, bzip2:
 * whatever libarchive's filters know; plain text passes through), at most
 * `max` bytes once decompressed (EV_E_LIMIT past that). *out is
 * NUL-terminated; free it with free(). */
int ev_import_read(char **out, size_t *len_out, const char *path, size_t max);

/* Calls fn for each non-blank line of a JSON Lines text with the parsed
 * object and "file:line" for errors; stops at the first non-zero return.
 * A line that is not a JSON object is an error naming file:line. */
int ev_import_each_object(const char *text, size_t len, const char *file,
                          int (*fn)(void *ctx, const cJSON *obj, const char *where), void *ctx);

/* Fails naming both lines ("file:12: task_id: duplicate \"x\" (first on
 * line 3)") when two of the n ids are equal; lines[i] is ids[i]'s line. */
int ev_import_unique_ids(const char *const *ids, const size_t *lines, size_t n, const char *file);

/* What an importer's record function builds: the samples.jsonl text and
 * every id with its line, for the duplicate check. */
typedef struct {
	ev_buf out;
	char **ids;
	size_t *lines;
	size_t n, cap;
} ev_import_ctx;

/* Keeps a copy of `id` and the line of `where` ("file:12"). */
int ev_import_keep_id(ev_import_ctx *c, const char *id, const char *where);
void ev_import_ctx_clear(ev_import_ctx *c);

/* An importer of a JSON Lines file: reads `path` (compressed or not, at
 * most max_file bytes), hands each object to record(ctx = an
 * ev_import_ctx, obj, "file:line"), checks the ids are unique and that
 * there was at least one, then writes suite_json and the samples into
 * out_dir. Nothing is written on failure. */
int ev_import_jsonl(const char *path, size_t max_file, int (*record)(void *ctx, const cJSON *obj, const char *where),
                    const char *suite_json, const char *out_dir);

/* Writes suite.json and samples.jsonl into `out_dir` (created if absent;
 * its parent must exist), each atomically. */
int ev_import_write_suite(const char *out_dir, const char *suite_json, const char *samples, size_t samples_len);


/* ---- long-context generators (suites/gen_longctx*.c; owner: longctx) ------ */

/* One chat message for counting, borrowed strings (as engine's eng_chat_msg:
 * suites may not use the engine, so the caller adapts). */
typedef struct {
	const char *role;
	const char *content;
	const char *tool_calls_json;
	const char *tool_call_id;
	const char *name;
} ev_token_msg;

/* How the generators measure text in the model's tokens. `count` is
 * required: the number of tokens of `len` bytes of plain text. `render`
 * is optional: the full prompt text the model would see for `msgs` (chat
 * template applied, generation prompt added, malloc'd into *out); when it
 * is NULL the prompt is the message contents joined by newlines. Both
 * return 0 or a negative EV_E_* with the message set. */
typedef struct {
	int (*count)(void *ctx, const char *text, size_t len, size_t *out_tokens);
	int (*render)(void *ctx, const ev_token_msg *msgs, size_t n, const char *tools_json, char **out,
	              size_t *out_len);
	void *ctx;
} ev_token_counter;

#define EV_LONGCTX_MAX_LENGTH ((size_t)8 << 20) /* tokens of one sample */
#define EV_LONGCTX_MAX_SAMPLES 100000           /* samples of one suite */

/* What to generate: every task x length x depth, `samples` times each
 * (vt and cwe have no needle depth: they take the lengths only). NULL /
 * zero-count lists take the defaults (all tasks; 4k; depths 0,25,50,75,100).
 * Depths are percent, 0..100. */
typedef struct {
	const char *const *tasks; /* "niah","multikey","multivalue","multiquery","vt","cwe","agent" */
	size_t n_tasks;
	const size_t *lengths;    /* target prompt lengths in tokens */
	size_t n_lengths;
	const int *depths;
	size_t n_depths;
	int samples;              /* >= 1 */
	uint64_t seed;
	const char *name;         /* suite name, default "longctx" */
	bool quiet;               /* no progress line */
} ev_longctx_options;

#define EV_LONGCTX_OPTIONS_INIT {NULL, 0, NULL, 0, NULL, 0, 1, 0, NULL, true}

/* Parses a length ("4096", "4k" = 4096, "128k", "1m" = 1048576) into
 * tokens; EV_E_INVALID naming the text when bad or over the cap. */
int ev_longctx_parse_length(size_t *out, const char *text);
/* True when `name` is one of the task names above. */
bool ev_longctx_task_known(const char *name);

/* Generates the suite folder `out_dir` (created if absent; parent must
 * exist): suite.json (kind "long-context") and samples.jsonl, each sample
 * fitted to its target length in the tokens of `tc` (the rendered prompt
 * is at most the target and within max(16, 0.5%) of it), deterministic
 * from opt->seed: the same options and counter give the same bytes.
 * Each sample's metadata: task, length, tokens, depth (or null), needle_token
 * (token position of the first needle in the prompt, or -1), haystack kinds;
 * single answers use the includes checker, several answers a per-sample
 * regex checker that needs all of them. */
int ev_gen_longctx(const ev_longctx_options *opt, const ev_token_counter *tc, const char *out_dir);

/* The recall suite (suites/gen_recall.c): key-value recall prompts for a
 * model built to answer them (the engine's constructed recall checkpoint).
 * `make` renders one prompt of `length` tokens with the needle at `depth`
 * percent and `distractors` other pairs, from `seed`: the text malloc'd
 * into *text and the expected value into answer. For each length x depth x
 * sample, one sample {"id":"len<L>-depth<D>-<s>","input","target",
 * "metadata":{"task":"recall","length","depth","distractors"}}; suite.json
 * names the suite "recall" (kind long-context, includes checker, greedy,
 * 4 tokens). Written atomically into out_dir. */
typedef int (*ev_recall_make_fn)(void *ctx, char **text, char answer[16], long length, int depth, int distractors,
                                 uint64_t seed);
typedef struct {
	const long *lengths; /* tokens, each in [4, 2^21] */
	int nlengths;
	const int *depths; /* percent */
	int ndepths;
	int samples, distractors;
	uint64_t seed;
} ev_recall_options;
int ev_gen_recall(const ev_recall_options *opt, ev_recall_make_fn make, void *ctx, const char *out_dir);


/* ==== tool environments (suites/env*.c; owner: agent) ======================
 *
 * Deterministic in-memory worlds that a tool-use agent acts on, built from
 * a sample's metadata.environment (or tests.environment): one object
 * {"type":"fs"|"kv"|"sqlite"|"calculator", ...} or an array of them with
 * distinct types. Each exposes OpenAI tool definitions and executes calls;
 * a bad call (unknown tool, bad arguments, refused permission, path escape)
 * is a tool result {"error":"..."}, never a failure. See suites/README.md,
 * "Tool environments", for each type's spec fields, tools and state. */

typedef struct ev_env ev_env;

/* Builds the environments a spec describes (JSON text). `what` names the
 * source in errors ("samples.jsonl:3: metadata.environment"). */
int ev_env_new(ev_env **out, const char *spec_json, const char *what);
void ev_env_free(ev_env *e);
/* The OpenAI tools array of every environment, as JSON text. Borrowed. */
const char *ev_env_tools_json(const ev_env *e);
/* True when one of the environments implements tool `name`. */
bool ev_env_has_tool(const ev_env *e, const char *name);
/* Executes one call; *result_json (malloc'd) is the tool's JSON answer,
 * {"error":"..."} for anything the model did wrong. Returns a negative
 * status only when memory ran out. */
int ev_env_execute(ev_env *e, const char *name, const char *arguments_json, char **result_json);
/* The canonical end state, {"<type>":{...}, ...}, malloc'd JSON text. */
int ev_env_state_json(const ev_env *e, char **out);

/* Compares a state with an expected one: objects by subset (every expected
 * key present and matching), arrays element by element with equal length,
 * numbers within 1e-9 relative, other values exactly. *match is set; when
 * false, *detail (malloc'd, may be NULL on no memory) names the first path
 * that differs ("fs.files./notes.txt: expected \"hi\", got \"ho\""). */
int ev_env_state_match(bool *match, char **detail, const char *state_json, const char *expected_json);

/* Evaluates an arithmetic expression (+ - * / ^ or **, parentheses, unary
 * minus, sqrt abs round, pi e). On a bad expression returns EV_E_INVALID
 * with the message saying why and where. */
int ev_env_calc(double *out, const char *expr);

/* ==== end of tool environments ============================================= */

#endif
