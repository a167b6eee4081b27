/* Shared pieces of the subcommands: tracker opening, checker flags,
 * the run summary and its printing. */
#include "evald/cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ev_cli_fail(const char *what)
{
	if (what && *what)
		fprintf(stderr, "evald: %s: %s\n", what, ev_error_msg());
	else
		fprintf(stderr, "evald: %s\n", ev_error_msg());
	return EV_EXIT_FAIL;
}

int ev_cli_open_tracker(const ev_cli *cli, ev_tracker **out)
{
	if (ev_tracker_open(out, cli->db_path) != 0) {
		ev_cli_fail("tracker");
		return EV_EXIT_FAIL;
	}
	return 0;
}

bool ev_cli_parse_id(const char *s, const char *what, int64_t *out)
{
	if (!s || !ev_parse_i64(s, out) || *out <= 0) {
		fprintf(stderr, "evald: %s id: '%s' is not a positive whole number\n", what, s ? s : "");
		return false;
	}
	return true;
}

bool ev_cli_parse_run_id(const char *s, int64_t *out) { return ev_cli_parse_id(s, "run", out); }

int ev_cli_subcommand(const ev_cli *cli, int argc, char **argv, const char *cmd, const char *usage,
		      const ev_subcommand *subs, size_t n)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EV_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(argv[1], subs[i].name))
			return subs[i].fn(cli, argc - 1, argv + 1);
	fprintf(stderr, "evald: %s: unknown subcommand '%s'\n", cmd, argv[1]);
	fputs(usage, stderr);
	return EV_EXIT_USAGE;
}

static const char *flag_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "evald: %s needs a value\n", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

int ev_checker_flags_parse(ev_checker_flags *f, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v;
	if (!strcmp(a, "--checker")) {
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		f->type = v;
	} else if (!strcmp(a, "--pattern")) {
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		if (f->n_patterns >= 16) {
			fprintf(stderr, "evald: at most 16 --pattern flags\n");
			return -1;
		}
		f->patterns[f->n_patterns++] = v;
		if (!f->type)
			f->type = "regex";
	} else if (!strcmp(a, "--group")) {
		int64_t g;
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		if (!ev_parse_i64(v, &g) || g < 0 || g > 99) {
			fprintf(stderr, "evald: --group: '%s' is not a group number\n", v);
			return -1;
		}
		f->group = (int)g;
	} else if (!strcmp(a, "--match")) {
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		if (strcmp(v, "first") && strcmp(v, "last")) {
			fprintf(stderr, "evald: --match takes first or last\n");
			return -1;
		}
		f->match = v;
	} else if (!strcmp(a, "--ignore-case")) {
		f->ignore_case = true;
	} else if (!strcmp(a, "--tolerance")) {
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		if (!ev_parse_f64(v, &f->tolerance) || f->tolerance < 0) {
			fprintf(stderr, "evald: --tolerance: '%s' is not a non-negative number\n", v);
			return -1;
		}
	} else if (!strcmp(a, "--compare")) {
		if (!(v = flag_value(argc, argv, i)))
			return -1;
		f->compare = v;
	} else {
		return 0;
	}
	return 1;
}

char *ev_checker_flags_spec(const ev_checker_flags *f)
{
	if (!f->type && !f->n_patterns && f->group < 0 && !f->match && !f->ignore_case && f->tolerance < 0 &&
	    !f->compare)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", f->type ? f->type : "includes");
	if (f->n_patterns) {
		cJSON *p = cJSON_AddArrayToObject(o, "patterns");
		for (int k = 0; k < f->n_patterns; k++)
			cJSON_AddItemToArray(p, cJSON_CreateString(f->patterns[k]));
	}
	if (f->group >= 0)
		cJSON_AddNumberToObject(o, "group", f->group);
	if (f->match)
		cJSON_AddStringToObject(o, "match", f->match);
	if (f->ignore_case)
		cJSON_AddTrueToObject(o, "ignore_case");
	if (f->tolerance >= 0)
		cJSON_AddNumberToObject(o, "tolerance", f->tolerance);
	if (f->compare)
		cJSON_AddStringToObject(o, "compare", f->compare);
	char *s = ev_json_print(o);
	cJSON_Delete(o);
	return s;
}

/* ---- the run summary ------------------------------------------------------ */

typedef struct {
	char *suite;
	char *sample_id;
	double sum;
	int n_scored;
	int n_pass; /* epochs with score >= 1 (for pass@k) */
} sample_acc;

typedef struct {
	sample_acc *v;
	size_t n, cap;
	/* per suite: errors and reasons, as a cJSON object {suite: {"errors":n, "failures":{}}} */
	cJSON *per_suite;
} summary_acc;

static cJSON *suite_node(summary_acc *acc, const char *suite)
{
	cJSON *s = cJSON_GetObjectItemCaseSensitive(acc->per_suite, suite);
	if (!s) {
		s = cJSON_AddObjectToObject(acc->per_suite, suite);
		cJSON_AddNumberToObject(s, "errors", 0);
		cJSON_AddObjectToObject(s, "failures");
	}
	return s;
}

static void count_up(cJSON *obj, const char *key)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (c)
		cJSON_SetNumberValue(c, c->valuedouble + 1);
	else
		cJSON_AddNumberToObject(obj, key, 1);
}

static int on_result(void *ctx, const ev_result *r)
{
	summary_acc *acc = ctx;
	cJSON *s = suite_node(acc, r->suite);
	const char *reason = r->reason ? r->reason : "";
	if (*reason)
		count_up(cJSON_GetObjectItemCaseSensitive(s, "failures"), reason);
	ev_reason rr = ev_reason_parse(reason);
	bool is_error = *reason && rr != EV_REASON_COUNT && ev_reason_is_error(rr);
	if (is_error)
		count_up(s, "errors");
	/* results arrive ordered by suite, sample id, epoch */
	sample_acc *last = acc->n ? &acc->v[acc->n - 1] : NULL;
	if (!last || strcmp(last->suite, r->suite) || strcmp(last->sample_id, r->sample_id)) {
		if (acc->n == acc->cap) {
			size_t cap = acc->cap ? acc->cap * 2 : 256;
			sample_acc *v = realloc(acc->v, cap * sizeof *v);
			if (!v)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			acc->v = v;
			acc->cap = cap;
		}
		last = &acc->v[acc->n++];
		memset(last, 0, sizeof *last);
		last->suite = ev_strdup(r->suite);
		last->sample_id = ev_strdup(r->sample_id);
		if (!last->suite || !last->sample_id)
			return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!is_error) {
		last->sum += r->score;
		last->n_scored++;
		if (r->score >= 1.0)
			last->n_pass++;
	}
	return 0;
}

/* C(n-c, k) / C(n, k) and C(c, k) / C(n, k), in product form. */
static double pass_hat_k(int n, int c, int k)
{
	if (c < k)
		return 0.0;
	double p = 1.0;
	for (int i = 0; i < k; i++)
		p *= (double)(c - i) / (double)(n - i);
	return p;
}

static void add_suite_summary(cJSON *arr, summary_acc *acc, const char *name, const char *kind, int epochs)
{
	size_t cnt = 0, cap = 0;
	double *means = NULL;
	for (size_t i = 0; i < acc->n; i++)
		if (!strcmp(acc->v[i].suite, name) && acc->v[i].n_scored)
			cap++;
	means = calloc(cap ? cap : 1, sizeof *means);
	int ks[] = {1, 5, 10, 100};
	double pk[4] = {0}, phk[4] = {0};
	for (size_t i = 0; i < acc->n && means; i++) {
		sample_acc *s = &acc->v[i];
		if (strcmp(s->suite, name) || !s->n_scored)
			continue;
		means[cnt++] = s->sum / s->n_scored;
		for (int j = 0; j < 4; j++) {
			if (ks[j] > s->n_scored)
				continue;
			pk[j] += ev_pass_at_k(s->n_scored, s->n_pass, ks[j]);
			phk[j] += pass_hat_k(s->n_scored, s->n_pass, ks[j]);
		}
	}
	ev_stats st = {0};
	ev_stats_compute(&st, means, cnt, 0x5eed, 1000);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", name);
	if (kind)
		cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddNumberToObject(o, "n", (double)cnt);
	cJSON_AddNumberToObject(o, "score", st.mean);
	cJSON_AddNumberToObject(o, "ci_low", st.ci_low);
	cJSON_AddNumberToObject(o, "ci_high", st.ci_high);
	cJSON_AddNumberToObject(o, "stderr", st.stderr_);
	cJSON *node = cJSON_GetObjectItemCaseSensitive(acc->per_suite, name);
	cJSON_AddNumberToObject(o, "errors", node ? ev_json_num(node, "errors", 0) : 0);
	cJSON *fail = node ? cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(node, "failures"), 1) : NULL;
	cJSON_AddItemToObject(o, "failures", fail ? fail : cJSON_CreateObject());
	if (epochs > 1 && cnt) {
		cJSON *a = cJSON_AddObjectToObject(o, "pass_at_k");
		cJSON *h = cJSON_AddObjectToObject(o, "pass_hat_k");
		for (int j = 0; j < 4; j++) {
			if (ks[j] > epochs)
				continue;
			char key[8];
			snprintf(key, sizeof key, "%d", ks[j]);
			cJSON_AddNumberToObject(a, key, pk[j] / (double)cnt);
			cJSON_AddNumberToObject(h, key, phk[j] / (double)cnt);
		}
	}
	cJSON_AddItemToArray(arr, o);
	free(means);
}

int ev_summary_compute(char **out, ev_tracker *t, int64_t run_id)
{
	*out = NULL;
	ev_run_row run = {0};
	summary_acc acc = {0};
	cJSON *suites = NULL, *root = NULL;
	int rc = ev_tracker_run_get(t, run_id, &run);
	if (rc)
		goto done;
	acc.per_suite = cJSON_CreateObject();
	if ((rc = ev_tracker_results_each(t, run_id, on_result, &acc)))
		goto done;
	root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "run_id", (double)run_id);
	cJSON_AddStringToObject(root, "model", run.model ? run.model : "");
	cJSON *arr = cJSON_AddArrayToObject(root, "suites");
	if (run.suites_json)
		ev_json_parse(&suites, run.suites_json, strlen(run.suites_json), "run suites");
	const cJSON *s;
	cJSON_ArrayForEach(s, suites)
	{
		const char *name = ev_json_str(s, "name", NULL);
		if (name)
			add_suite_summary(arr, &acc, name, ev_json_str(s, "kind", NULL), run.epochs);
	}
	*out = ev_json_print(root);
	rc = *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
done:
	for (size_t i = 0; i < acc.n; i++) {
		free(acc.v[i].suite);
		free(acc.v[i].sample_id);
	}
	free(acc.v);
	cJSON_Delete(acc.per_suite);
	cJSON_Delete(suites);
	cJSON_Delete(root);
	ev_run_row_clear(&run);
	return rc;
}

void ev_summary_print(FILE *to, const char *summary_json)
{
	cJSON *j = NULL;
	if (ev_json_parse(&j, summary_json, strlen(summary_json), "summary"))
		return;
	fprintf(to, "run %.0f  model %s\n", ev_json_num(j, "run_id", 0), ev_json_str(j, "model", ""));
	fprintf(to, "%-28s %6s %8s %19s %7s\n", "suite", "n", "score", "95% CI", "errors");
	const cJSON *s;
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "suites"))
	{
		fprintf(to, "%-28s %6.0f %8.4f   [%.4f, %.4f] %7.0f\n", ev_json_str(s, "name", "?"), ev_json_num(s, "n", 0),
		        ev_json_num(s, "score", 0), ev_json_num(s, "ci_low", 0), ev_json_num(s, "ci_high", 0),
		        ev_json_num(s, "errors", 0));
		const cJSON *f;
		cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(s, "failures"))
			fprintf(to, "    %-24s %.0f\n", f->string, f->valuedouble);
		const cJSON *pk;
		cJSON_ArrayForEach(pk, cJSON_GetObjectItemCaseSensitive(s, "pass_at_k"))
			fprintf(to, "    pass@%-19s %.4f\n", pk->string, pk->valuedouble);
	}
	cJSON_Delete(j);
}

int ev_cli_suite_load(ev_suite **out, const char *path, char **tmpdir)
{
	char *default_path = NULL;
	if (!strcmp(path, "@default")) {
		char tmpl[] = "/tmp/evald-default-XXXXXX";
		if (!*tmpdir && (!mkdtemp(tmpl) || !(*tmpdir = ev_strdup(tmpl))))
			return ev_error_set(EV_E_IO, "default suite: cannot make a temporary folder");
		int rc = ev_default_suite_write(&default_path, *tmpdir);
		if (rc)
			return rc;
		path = default_path;
	}
	int rc = ev_suite_load(out, path, NULL);
	free(default_path);
	return rc;
}

void ev_cli_tmpdir_remove(char *tmpdir)
{
	if (!tmpdir)
		return;
	if (ev_rmtree(tmpdir, 0))
		ev_log_warn("%s", ev_error_msg());
	free(tmpdir);
}
