/*
 * scoring/summary.c: a suite's figures from its fold, the summary JSON that
 * carries them, and reading it back (scoring/summary.h).
 */
#include "scoring/scoring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int group_cmp(const void *a, const void *b)
{
	const ev_sample_fold *x = *(const ev_sample_fold *const *)a, *y = *(const ev_sample_fold *const *)b;
	return strcmp(x->group, y->group);
}

/* The circular score: groups of scored samples by their group key; a group
 * passes when each of its samples passed every scored epoch. */
static int circular(ev_suite_figures *out, const ev_suite_fold *f)
{
	size_t n = 0;
	for (size_t i = 0; i < f->samples.n; i++)
		n += f->samples.v[i].group && f->samples.v[i].n_scored;
	if (!n)
		return 0;
	const ev_sample_fold **v = malloc(n * sizeof *v);
	double *pass = malloc(n * sizeof *pass);
	if (!v || !pass) {
		free(v), free(pass);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	n = 0;
	for (size_t i = 0; i < f->samples.n; i++)
		if (f->samples.v[i].group && f->samples.v[i].n_scored)
			v[n++] = &f->samples.v[i];
	qsort(v, n, sizeof *v, group_cmp);
	size_t g = 0;
	for (size_t i = 0; i < n;) {
		bool ok = true;
		size_t j = i;
		for (; j < n && !strcmp(v[j]->group, v[i]->group); j++)
			ok = ok && v[j]->n_pass == v[j]->n_scored;
		pass[g++] = ok ? 1.0 : 0.0;
		i = j;
	}
	ev_stats st = {0};
	int rc = ev_stats_compute(&st, pass, g, EV_SUMMARY_SEED, EV_SUMMARY_BOOT);
	if (!rc) {
		out->circular_groups = (long)g;
		out->circular_score = st.mean, out->circular_ci_low = st.ci_low, out->circular_ci_high = st.ci_high;
	}
	free(v), free(pass);
	return rc;
}

int ev_suite_figures_compute(ev_suite_figures *out, const ev_suite_fold *f, const ev_summary_options *opt)
{
	memset(out, 0, sizeof *out);
	if (!f)
		return 0;
	out->errors = f->errors;
	double *means = malloc((f->samples.n ? f->samples.n : 1) * sizeof *means);
	if (!means)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	size_t cnt = 0;
	int min_n = 0;
	for (size_t i = 0; i < f->samples.n; i++) {
		const ev_sample_fold *s = &f->samples.v[i];
		if (!s->n_scored)
			continue;
		means[cnt++] = ev_sample_fold_mean(s);
		if (!min_n || s->n_scored < min_n)
			min_n = s->n_scored;
	}
	ev_stats st = {0};
	int rc = ev_stats_compute(&st, means, cnt, EV_SUMMARY_SEED, EV_SUMMARY_BOOT);
	free(means);
	if (rc)
		return rc;
	out->n = (long)cnt;
	out->score = st.mean;
	out->ci_low = st.ci_low;
	out->ci_high = st.ci_high;
	out->stderr_ = st.stderr_;
	/* pass@k only where every scored sample has k scored epochs: a sample
	 * with fewer has no unbiased estimate, and leaving it out would bias
	 * the mean towards the samples that had no errors. */
	for (int j = 0; opt && j < opt->n_ks && j < EV_SUMMARY_MAX_K && cnt; j++) {
		int k = opt->ks[j];
		if (k > min_n)
			continue;
		double pk = 0, ph = 0;
		for (size_t i = 0; i < f->samples.n; i++) {
			const ev_sample_fold *s = &f->samples.v[i];
			if (!s->n_scored)
				continue;
			pk += ev_pass_at_k(s->n_scored, s->n_pass, k);
			ph += ev_pass_hat_k(s->n_scored, s->n_pass, k);
		}
		out->k[out->n_k] = k;
		out->pass_at_k[out->n_k] = pk / (double)cnt;
		out->pass_hat_k[out->n_k] = ph / (double)cnt;
		out->n_k++;
	}
	return circular(out, f);
}

cJSON *ev_suite_figures_json(const char *name, const char *kind, const ev_suite_figures *fig,
                             const ev_suite_fold *f, const ev_summary_options *opt)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "name", name);
	if (kind)
		cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddNumberToObject(o, "n", (double)fig->n);
	cJSON_AddNumberToObject(o, "score", fig->score);
	cJSON_AddNumberToObject(o, "ci_low", fig->ci_low);
	cJSON_AddNumberToObject(o, "ci_high", fig->ci_high);
	cJSON_AddNumberToObject(o, "stderr", fig->stderr_);
	cJSON_AddNumberToObject(o, "errors", (double)fig->errors);
	cJSON *fail = cJSON_AddObjectToObject(o, "failures");
	for (size_t i = 0; f && fail && i < f->failures.n; i++)
		cJSON_AddNumberToObject(fail, f->failures.v[i].reason, (double)f->failures.v[i].count);
	if (opt && opt->n_ks && fig->n) {
		cJSON *a = cJSON_AddObjectToObject(o, "pass_at_k");
		cJSON *h = opt->pass_hat ? cJSON_AddObjectToObject(o, "pass_hat_k") : NULL;
		for (int j = 0; j < fig->n_k; j++) {
			char key[16];
			snprintf(key, sizeof key, "%d", fig->k[j]);
			cJSON_AddNumberToObject(a, key, fig->pass_at_k[j]);
			if (h)
				cJSON_AddNumberToObject(h, key, fig->pass_hat_k[j]);
		}
	}
	if (fig->circular_groups) {
		cJSON *c = cJSON_AddObjectToObject(o, "circular");
		cJSON_AddNumberToObject(c, "groups", (double)fig->circular_groups);
		cJSON_AddNumberToObject(c, "score", fig->circular_score);
		cJSON_AddNumberToObject(c, "ci_low", fig->circular_ci_low);
		cJSON_AddNumberToObject(c, "ci_high", fig->circular_ci_high);
	}
	return o;
}

static int add_suite(cJSON *arr, const char *name, const char *kind, const ev_suite_fold *f,
                     const ev_summary_options *opt)
{
	ev_suite_figures fig;
	int rc = ev_suite_figures_compute(&fig, f, opt);
	if (rc)
		return rc;
	cJSON *o = ev_suite_figures_json(name, kind, &fig, f, opt);
	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

int ev_summary_json(char **out, int64_t run_id, const char *model, const ev_run_fold *fold, const cJSON *planned,
                    const ev_summary_options *opt)
{
	*out = NULL;
	int rc = 0;
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (run_id >= 0)
		cJSON_AddNumberToObject(root, "run_id", (double)run_id);
	else
		cJSON_AddNullToObject(root, "run_id");
	if (model)
		cJSON_AddStringToObject(root, "model", model);
	else
		cJSON_AddNullToObject(root, "model");
	cJSON *arr = cJSON_AddArrayToObject(root, "suites");
	if (planned) {
		const cJSON *s;
		cJSON_ArrayForEach(s, planned) {
			const char *name = ev_json_str(s, "name", NULL);
			if (name && !rc)
				rc = add_suite(arr, name, ev_json_str(s, "kind", NULL),
				               ev_run_fold_find((ev_run_fold *)fold, name), opt);
		}
	} else {
		for (size_t i = 0; fold && i < fold->suites.n && !rc; i++)
			rc = add_suite(arr, fold->suites.v[i].name, NULL, &fold->suites.v[i], opt);
	}
	if (!rc && !(*out = ev_json_print(root)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(root);
	return rc;
}

static long count_of(const cJSON *o, const char *key)
{
	double v = ev_json_num(o, key, 0);
	if (!(v >= 0))
		return 0;
	return v > 1e15 ? (long)1e15 : (long)v;
}

int ev_summary_parse(ev_summary *out, const char *json, const char *what)
{
	memset(out, 0, sizeof *out);
	cJSON *j = NULL;
	int rc = ev_json_parse(&j, json, strlen(json), what);
	if (rc)
		return rc;
	const cJSON *suites = cJSON_GetObjectItemCaseSensitive(j, "suites");
	if (!cJSON_IsArray(suites)) {
		rc = ev_error_set(EV_E_INVALID, "%s: suites: expected an array", what);
		goto done;
	}
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, suites) {
		const char *name = ev_json_str(e, "name", NULL);
		if (!name) {
			rc = ev_error_set(EV_E_INVALID, "%s: suites[%d].name: missing", what, i);
			goto done;
		}
		ev_summary_suite *s = ev_vec_add(&out->suites);
		if (!s || !(s->name = ev_strdup(name)) || !(s->failures = cJSON_CreateObject())) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		const cJSON *v, *lo, *hi;
		s->n = count_of(e, "n");
		s->errors = count_of(e, "errors");
		if ((s->has_score = cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(e, "score"))))
			s->score = v->valuedouble;
		lo = cJSON_GetObjectItemCaseSensitive(e, "ci_low");
		hi = cJSON_GetObjectItemCaseSensitive(e, "ci_high");
		if ((s->has_ci = cJSON_IsNumber(lo) && cJSON_IsNumber(hi))) {
			s->ci_low = lo->valuedouble;
			s->ci_high = hi->valuedouble;
		}
		if ((s->has_stderr = cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(e, "stderr"))))
			s->stderr_ = v->valuedouble;
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "failures"), *fe;
		if (!cJSON_IsObject(f))
			f = NULL;
		cJSON_ArrayForEach(fe, f) {
			if (fe->string && cJSON_IsNumber(fe))
				cJSON_AddNumberToObject(s->failures, fe->string, fe->valuedouble);
		}
		const cJSON *pk = cJSON_GetObjectItemCaseSensitive(e, "pass_at_k");
		if (cJSON_IsObject(pk))
			s->pass_at_k = cJSON_Duplicate(pk, 1);
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "pass_hat_k");
		if (cJSON_IsObject(ph))
			s->pass_hat_k = cJSON_Duplicate(ph, 1);
		i++;
	}
done:
	cJSON_Delete(j);
	if (rc)
		ev_summary_clear(out);
	return rc;
}

void ev_summary_clear(ev_summary *s)
{
	for (size_t i = 0; i < s->suites.n; i++) {
		free(s->suites.v[i].name);
		cJSON_Delete(s->suites.v[i].failures);
		cJSON_Delete(s->suites.v[i].pass_at_k);
		cJSON_Delete(s->suites.v[i].pass_hat_k);
	}
	ev_vec_free(&s->suites);
}

void ev_summary_print(FILE *to, const char *summary_json)
{
	cJSON *j = NULL;
	ev_summary s;
	if (ev_json_parse(&j, summary_json, strlen(summary_json), "summary") ||
	    ev_summary_parse(&s, summary_json, "summary")) {
		cJSON_Delete(j);
		return;
	}
	fprintf(to, "run %.0f  model %s\n", ev_json_num(j, "run_id", 0), ev_json_str(j, "model", ""));
	fprintf(to, "%-28s %6s %8s %19s %7s\n", "suite", "n", "score", "95% CI", "errors");
	for (size_t i = 0; i < s.suites.n; i++) {
		const ev_summary_suite *e = &s.suites.v[i];
		fprintf(to, "%-28s %6ld %8.4f   [%.4f, %.4f] %7ld\n", e->name, e->n, e->score, e->ci_low, e->ci_high,
		        e->errors);
		const cJSON *f;
		cJSON_ArrayForEach(f, e->failures)
			fprintf(to, "    %-24s %.0f\n", f->string, f->valuedouble);
		cJSON_ArrayForEach(f, e->pass_at_k)
			fprintf(to, "    pass@%-19s %.4f\n", f->string, f->valuedouble);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "suites"),
		                                                                     (int)i),
		                                                  "circular");
		if (c)
			fprintf(to, "    circular (%.0f questions, every rotation right) %.4f   [%.4f, %.4f]\n",
			        ev_json_num(c, "groups", 0), ev_json_num(c, "score", 0), ev_json_num(c, "ci_low", 0),
			        ev_json_num(c, "ci_high", 0));
	}
	ev_summary_clear(&s);
	cJSON_Delete(j);
}
