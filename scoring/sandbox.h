/*
 * scoring/sandbox.h: the sandbox and test execution (sandbox*.c, testexec*.c).
 *
 * ev_sandbox_run runs one untrusted program: its own process group and new
 * user, PID, mount, network, IPC and UTS namespaces where the kernel allows
 * them (what it does not allow is logged once per process, then skipped),
 * resource limits, an unprivileged identity, a private work folder as cwd,
 * a read-only view of the system folders, no network, stdin from /dev/null
 * (or a given file), stdout and stderr captured and capped, and a
 * wall-clock timeout after which everything it started is killed. See
 * scoring/README.md, "Sandbox". */
#ifndef EV_SCORING_SANDBOX_H
#define EV_SCORING_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "scoring/checker.h"
#include "suites/suites.h"

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
	/* Instead of killing past max_output_bytes: the program runs on, and a
	 * stream keeps its first max_output_bytes and its last 64 KiB, joined
	 * by a line saying how many bytes were dropped (out_truncated says so
	 * too). For programs judged by their exit status, whose output is
	 * noise (HumanEval's executor swallows it). */
	bool discard_excess_output;
	size_t work_bytes;        /* size of the private work folder and /tmp (default 64 MiB) */
	const char *tmp_dir;      /* host folder for the work folder when there is no
	                           * mount namespace (default $TMPDIR or /tmp) */
	const char *const *ro_paths; /* more host paths shown read-only (NULL-terminated) */
	const char *stdin_name;   /* one of the files, fed as stdin; NULL: /dev/null */
	/* The bound on a whole run's memory (default 8 GiB): every process of a
	 * run has its own RLIMIT_AS (mem_bytes) and the run has its own user
	 * id, so RLIMIT_NPROC is set to at most run_mem_bytes / mem_bytes
	 * processes, and their product is the bound (no cgroup is needed). */
	size_t run_mem_bytes;
} ev_sandbox_options;

/* The number of processes a run may have under `o` (its RLIMIT_NPROC). */
int ev_sandbox_max_procs(const ev_sandbox_options *o);

#define EV_SANDBOX_OPTIONS_INIT                                                                         \
	{.timeout_s = 10.0, .mem_bytes = (size_t)1 << 30, .max_procs = 64, .max_file_bytes = (size_t)16 << 20,    \
	 .max_open_files = 64, .max_output_bytes = (size_t)1 << 20, .work_bytes = (size_t)64 << 20,               \
	 .run_mem_bytes = (size_t)8 << 30}

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

#define EV_TESTEXEC_OPTIONS_INIT {.sandbox = EV_SANDBOX_OPTIONS_INIT}

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

#endif
