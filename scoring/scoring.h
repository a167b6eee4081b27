/*
 * scoring: checkers that turn a model's answer into a score, and metrics.
 *
 * A checker is built from a JSON spec (the suite's "checker" object, or
 * one that the CLI builds from flags):
 *   {"type":"includes"}                                  target in answer, case-insensitive
 *   {"type":"exact","ignore_case":true,"ignore_punct":true,"ignore_space":true}
 *   {"type":"numeric","tolerance":1e-6,"relative":false}
 *   {"type":"choice"}                                    letter A-Z extracted from the answer
 *   {"type":"regex","patterns":["..."],"group":1,"match":"first"|"last","ignore_case":false,
 *    "compare":"exact"|"includes"|"none"}  extraction, then comparison with a target
 * Thinking text (<think>...</think>, also an unclosed <think>) is stripped
 * before any checker sees the answer; the stored response keeps it.
 */
#ifndef EV_SCORING_H
#define EV_SCORING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suites.h"

/* ev_reason, its names and ev_reason_is_error live with the result type
 * in suites/result.h. */

typedef struct ev_checker ev_checker;

/* Builds a checker from its JSON spec; errors name the field
 * ("checker.patterns[1]: ..."). Regexes are compiled here, so a bad
 * pattern fails at load time, not per sample. */
int ev_checker_new(ev_checker **out, const char *spec_json);
void ev_checker_free(ev_checker *c);
/* The normalised spec (for storing with a run). Borrowed. */
const char *ev_checker_spec(const ev_checker *c);

typedef struct {
	double score;     /* 0..1 */
	ev_reason reason;
	char *extracted;  /* malloc'd answer the checker compared, or NULL */
	char *detail;     /* malloc'd human-readable note, or NULL */
} ev_verdict;

/* Scores `response` (the raw model output) for `sample`. `truncated`
 * says the backend stopped at max_tokens. Thread-safe: one checker may
 * score from several threads. Fills *out (free with ev_verdict_clear). */
int ev_checker_score(const ev_checker *c, const ev_sample *sample, const char *response, bool truncated,
                     ev_verdict *out);
void ev_verdict_clear(ev_verdict *v);
/* The same for an answer that may carry OpenAI tool_calls (JSON array,
 * or NULL): tool-call checkers read the calls from there as well as from
 * the text; every other checker scores the text alone. */
int ev_checker_score_calls(const ev_checker *c, const ev_sample *sample, const char *response,
                           const char *tool_calls_json, bool truncated, ev_verdict *out);

/* The answer with thinking removed, malloc'd. *unclosed is set when a
 * <think> was never closed (everything after it is thinking). */
char *ev_strip_thinking(const char *response, bool *unclosed);

/* ---- metrics ------------------------------------------------------------- */

typedef struct {
	size_t n;
	double mean;
	double stderr_;   /* standard error of the mean */
	double ci_low;    /* bootstrap 95% percentile interval */
	double ci_high;
} ev_stats;

/* Mean, standard error and a seeded bootstrap 95% CI (n_boot resamples,
 * 1000 when 0). n == 0 gives zeros. */
int ev_stats_compute(ev_stats *out, const double *scores, size_t n, uint64_t seed, int n_boot);

/* Unbiased pass@k for n samples with c correct (1 - C(n-c,k)/C(n,k)).
 * 1 when n - c < k (and c > 0); NAN unless n >= 1, 0 <= c <= n, k >= 1. */
double ev_pass_at_k(int n, int c, int k);
/* pass^k: the chance that k draws without replacement are all correct
 * (C(c,k)/C(n,k)); 0 when k > c; NAN on the same bad counts. */
double ev_pass_hat_k(int n, int c, int k);

/* ---- tool-call checker (scoring/toolcall_*.c; owner: toolcall) ------------
 *
 * BFCL's AST semantics for function calls: see scoring/README.md, section
 * "Tool-call checker". Calls are read from OpenAI `tool_calls` JSON or out of
 * model text (JSON call objects, Python call syntax, fences, <tool_call>). */

typedef struct {
	const char *name;           /* as the model wrote it; owned by the list */
	const char *arguments_json; /* JSON object; floats keep a '.', tuples are arrays */
} ev_toolcall;

typedef struct ev_toolcalls ev_toolcalls;

/* Reads the calls of one answer. When `tool_calls_json` holds a non-empty
 * OpenAI tool_calls array it is used (each "arguments" a JSON string or an
 * object); otherwise the calls are found in `text` (may be NULL). Returns 0
 * with *out set (possibly zero calls: an empty answer or "[]"), or
 * EV_E_PARSE when there is text but no call can be read from it (the
 * message says why), EV_E_LIMIT past the caps. Free with ev_toolcalls_free. */
int ev_toolcalls_parse(ev_toolcalls **out, const char *tool_calls_json, const char *text);
void ev_toolcalls_free(ev_toolcalls *l);
size_t ev_toolcalls_count(const ev_toolcalls *l);
/* Borrowed; NULL past the end. */
const ev_toolcall *ev_toolcalls_get(const ev_toolcalls *l, size_t i);

typedef enum {
	EV_TOOLCALL_PASS = 0,
	EV_TOOLCALL_WRONG_FUNCTION,   /* "wrong_function" */
	EV_TOOLCALL_MISSING_REQUIRED, /* "missing_required" */
	EV_TOOLCALL_UNEXPECTED_PARAM, /* "unexpected_param" */
	EV_TOOLCALL_WRONG_TYPE,       /* "wrong_type" */
	EV_TOOLCALL_VALUE_MISMATCH,   /* "value_mismatch" */
	EV_TOOLCALL_WRONG_COUNT,      /* "wrong_count" */
	EV_TOOLCALL_UNPARSEABLE,      /* "unparseable" */
	EV_TOOLCALL_REASON_COUNT
} ev_toolcall_reason;

/* "" for EV_TOOLCALL_PASS. */
const char *ev_toolcall_reason_name(ev_toolcall_reason r);

typedef struct {
	bool pass;
	ev_toolcall_reason reason;
	char detail[512]; /* names the function and parameter; "" on a pass */
} ev_toolcall_verdict;

/* Checks `calls` (NULL: the answer was unparseable) against BFCL's
 * `functions_json` (the question's "function" array, BFCL types) and
 * `ground_truth_json` (the possible answer's "ground_truth" array; "[]" or
 * NULL for irrelevance). `category` picks the rule as BFCL does: containing
 * "irrelevance" = no call; "relevance" = at least one call; "parallel" =
 * the calls in any order; "multiple" = the one right call among several
 * functions; otherwise simple. Returns 0 with *out filled, or a negative
 * status when the functions or ground truth are malformed (not the
 * model's fault). */
int ev_toolcall_check(const char *functions_json, const char *ground_truth_json, const char *category,
                      const ev_toolcalls *calls, ev_toolcall_verdict *out);

/* Scores one answer of a sample imported by ev_import_bfcl (its "tests"
 * hold {"functions","ground_truth"}; the category comes from the sample's
 * checker override, else its metadata.category, else "simple"): score 1
 * or 0; reason no_answer when unparseable, wrong_answer otherwise; the
 * detail starts with the tool-call reason name ("value_mismatch: ...").
 * Returns a negative status when the sample's tests are malformed. Free
 * with ev_verdict_clear. */
int ev_toolcall_score(const ev_sample *s, const char *response_text, const char *tool_calls_json,
                      ev_verdict *out);

/* ==== sandbox and test execution (sandbox*.c, testexec*.c) ================
 *
 * ev_sandbox_run runs one untrusted program: its own process group and new
 * user, PID, mount, network, IPC and UTS namespaces where the kernel allows
 * them (what it does not allow is logged once per process, then skipped),
 * resource limits, an unprivileged identity, a private work folder as cwd,
 * a read-only view of the system folders, no network, stdin from /dev/null
 * (or a given file), stdout and stderr captured and capped, and a
 * wall-clock timeout after which everything it started is killed. See
 * scoring/README.md, "Sandbox". */

typedef enum {
	EV_SANDBOX_PASSED = 0, /* exited 0 */
	EV_SANDBOX_FAILED,     /* exited non-zero, or broke the output cap */
	EV_SANDBOX_TIMEOUT,    /* wall clock or CPU time ran out */
	EV_SANDBOX_OOM,        /* MemoryError, or killed under the memory cap */
	EV_SANDBOX_CRASHED,    /* killed by a signal */
	EV_SANDBOX_ERROR       /* the sandbox could not be set up: not the program's fault */
} ev_sandbox_verdict;

/* "passed", "failed", "timed out", "out of memory", "crashed", "sandbox error". */
const char *ev_sandbox_verdict_name(ev_sandbox_verdict v);

typedef struct {
	double timeout_s;         /* wall clock (default 10) */
	double cpu_s;             /* RLIMIT_CPU; 0: timeout_s + 1 */
	size_t mem_bytes;         /* RLIMIT_AS (default 1 GiB) */
	int max_procs;            /* RLIMIT_NPROC (default 64) */
	size_t max_file_bytes;    /* RLIMIT_FSIZE (default 16 MiB) */
	int max_open_files;       /* RLIMIT_NOFILE (default 64) */
	size_t max_output_bytes;  /* per stream; past it the program is killed (default 1 MiB) */
	size_t work_bytes;        /* size of the private work folder and /tmp (default 64 MiB) */
	const char *tmp_dir;      /* host folder for the work folder when there is no
	                           * mount namespace (default $TMPDIR or /tmp) */
	const char *const *ro_paths; /* more host paths shown read-only (NULL-terminated) */
	const char *stdin_name;   /* one of the files, fed as stdin; NULL: /dev/null */
} ev_sandbox_options;

#define EV_SANDBOX_OPTIONS_INIT {10.0, 0.0, (size_t)1 << 30, 64, (size_t)16 << 20, 64, (size_t)1 << 20, \
                                 (size_t)64 << 20, NULL, NULL, NULL}

/* A file written into the work folder before the program starts. `name`
 * is a plain file name (no '/', not "." or ".."). */
typedef struct {
	const char *name;
	const char *data;
	size_t len;
} ev_sandbox_file;

typedef struct {
	ev_sandbox_verdict verdict;
	int exit_code;      /* when it exited, else -1 */
	int signal;         /* the signal that ended it, else 0 */
	double wall_s;
	double cpu_s;       /* user + system time of the program and its children */
	char *out;          /* captured stdout (malloc'd, NUL-terminated) */
	size_t out_len;
	char *err;          /* captured stderr */
	size_t err_len;
	bool out_truncated; /* a stream reached max_output_bytes */
	bool err_truncated;
	char *detail;       /* malloc'd: the first failing assertion or last traceback
	                     * line, "signal 11", the setup fault; NULL when passed */
} ev_sandbox_result;

void ev_sandbox_result_clear(ev_sandbox_result *r);
/* "passed", "failed: <detail>", "timed out", "out of memory",
 * "crashed: signal N", "sandbox error: <detail>"; malloc'd. */
char *ev_sandbox_result_text(const ev_sandbox_result *r);

/* Runs argv (argv[0] an absolute path, seen from inside the sandbox) with
 * `files` written into its work folder. Returns 0 with *out filled (a setup
 * fault is the verdict EV_SANDBOX_ERROR, with the reason in detail), or a
 * negative status for bad arguments or no memory (*out then holds
 * EV_SANDBOX_ERROR too). Thread-safe; free *out with ev_sandbox_result_clear. */
int ev_sandbox_run(const ev_sandbox_options *opt, const char *const argv[], const ev_sandbox_file *files,
                   size_t n_files, ev_sandbox_result *out);

/* What this process's sandboxes get, as a short text ("user,pid,mount,net,
 * ipc,uts namespaces; uid per run; read-only root"). Borrowed. */
const char *ev_sandbox_describe(void);

/* Calls fn(ctx, i) for i in [0, n) on `jobs` threads (<= 0: one). The
 * calls for different i run concurrently; fn must be thread-safe. */
void ev_sandbox_parallel(size_t n, int jobs, void (*fn)(void *ctx, size_t i), void *ctx);

/* One job of ev_sandbox_run_many. `opt` NULL takes the pool's options. */
typedef struct {
	const ev_sandbox_options *opt;
	const char *const *argv;
	const ev_sandbox_file *files;
	size_t n_files;
	int status;               /* ev_sandbox_run's return */
	ev_sandbox_result result;
} ev_sandbox_job;

/* Runs the jobs with `jobs` running at a time. */
void ev_sandbox_run_many(const ev_sandbox_options *opt, ev_sandbox_job *jobs, size_t n, int concurrency);

/* From a Python program's stderr: "AssertionError: assert f(1) == 2" (the
 * failing assert statement when the exception has no message) or the last
 * traceback line ("NameError: name 'x' is not defined"); for other text the
 * last non-empty line. NULL when the text is empty. malloc'd. */
char *ev_sandbox_failure_line(const char *err, size_t len);

/* ---- test execution ------------------------------------------------------
 * A sample's "tests" object says how to check a completion:
 *   {"style":"humaneval","prompt":P,"test":T,"entry_point":F}
 *       runs P + completion + "\n" + T + "\ncheck(F)\n"
 *   {"style":"mbpp","test_list":[...],"test_setup_code":S,"challenge_test_list":[...]}
 *       runs S + "\n" + completion + "\n" + the asserts (challenge ones with
 *       "challenge":true)
 *   {"language":"python"|"c","cases":[{"stdin":I,"stdout":O},...]}
 *       runs the completion once a case, stdin I, stdout compared with O
 *       (trailing spaces of each line and trailing newlines ignored)
 *   {"language":"python"|"c","script":S}
 *       runs completion + "\n" + S (for C, S usually holds main)
 * Any of them may add "timeout" (seconds) and, for Python, "site": true.
 * Python runs as `python -I -S prog.py` (isolated, no site) unless site is
 * asked for. C is compiled inside the sandbox with cc, under the same
 * limits. */

typedef struct {
	ev_sandbox_options sandbox;
	const char *python;   /* NULL: $EVALD_PYTHON, else /usr/bin/python3 */
	const char *cc;       /* NULL: /usr/bin/cc */
	bool extract_code;    /* the completion is a chat answer: take its code
	                       * with ev_testexec_extract_code first */
	bool python_site;     /* import site (site-packages such as numpy): off by
	                       * default (-S), which halves the interpreter's start;
	                       * a tests object's "site": true turns it on too */
} ev_testexec_options;

#define EV_TESTEXEC_OPTIONS_INIT {EV_SANDBOX_OPTIONS_INIT, NULL, NULL, false, false}

/* Runs `completion` against `tests_json`; fills *out with the first run
 * that did not pass, else the last (passed). Returns a negative status only
 * when the tests object is malformed (message names the field) or memory
 * ran out; *out is then EV_SANDBOX_ERROR. */
int ev_testexec_run(const ev_testexec_options *opt, const char *tests_json, const char *completion,
                    ev_sandbox_result *out);

typedef struct {
	const char *tests_json;
	const char *completion;
	int status;
	ev_sandbox_result result;
} ev_testexec_item;

/* ev_testexec_run over items, `jobs` at a time; `done` (may be NULL) is
 * called after each item, one call at a time. */
void ev_testexec_run_many(const ev_testexec_options *opt, ev_testexec_item *items, size_t n, int jobs,
                          void (*done)(void *ctx, size_t i), void *ctx);

/* The code of a chat answer: the first fenced block (```python, ```c or
 * bare) when there is one, else the whole answer. *standalone (may be
 * NULL) is set when the code defines `entry_point` (may be NULL) itself,
 * so that a humaneval prompt's stub must not precede it: the prompt's
 * lines above its own definition (imports, helpers) are used instead.
 * malloc'd; NULL only when memory ran out. */
char *ev_testexec_extract_code(const char *answer, const char *entry_point, bool *standalone);

/* ==== end of sandbox and test execution ================================== */

#include "scoring/summary.h"

#endif
