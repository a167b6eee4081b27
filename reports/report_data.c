/*
 * reports/report_data.c: gathers what a report shows from the tracker, and
 * ev_report_write, which hands it to the Markdown or JSON writer.
 *
 * Per-suite figures come from the run's summary_json when it has one. A run
 * without one (still running, killed) gets n, mean, errors and failure
 * counts computed here from its results, with no CI, and is marked
 * incomplete. The most failed samples are found in one pass over the
 * results, which arrive ordered by suite, sample and epoch: each sample's
 * epochs are contiguous, so only the current sample and the kept list of
 * each suite are in memory, however large the run.
 */
#include "reports/reports_int.h"

#include <stdlib.h>
#include <string.h>

char *ev_report_text(const char *s, size_t max_chars)
{
	ev_buf b = EV_BUF_INIT((size_t)-1);
	const char *p = s ? s : "";
	size_t left = strlen(p), chars = 0;
	int rc = ev_buf_puts(&b, "");
	while (left && !rc) {
		if (chars == max_chars) {
			rc = ev_buf_puts(&b, "...");
			break;
		}
		uint32_t cp;
		size_t k = ev_utf8_next(p, left, &cp);
		rc = k ? ev_buf_append(&b, p, k) : ev_buf_puts(&b, "\xEF\xBF\xBD");
		k = k ? k : 1;
		p += k;
		left -= k;
		chars++;
	}
	if (rc) {
		ev_buf_free(&b);
		return NULL;
	}
	return ev_buf_detach(&b, NULL);
}

/* ---- suites ---------------------------------------------------------------- */

static int suite_find(ev_report_data *d, const char *name, bool add, size_t *out)
{
	for (size_t i = 0; i < d->n_suites; i++) {
		if (strcmp(d->suites[i].name, name) == 0) {
			*out = i;
			return 0;
		}
	}
	if (!add)
		return EV_E_NOTFOUND;
	if (d->n_suites == d->cap_suites) {
		size_t ncap = d->cap_suites ? d->cap_suites * 2 : 8;
		ev_report_suite *ns = realloc(d->suites, ncap * sizeof *ns);
		if (!ns)
			return ev_error_set(EV_E_NOMEM, "report: out of memory");
		d->suites = ns;
		d->cap_suites = ncap;
	}
	ev_report_suite *s = &d->suites[d->n_suites];
	memset(s, 0, sizeof *s);
	s->name = ev_strdup(name);
	s->failures = cJSON_CreateObject();
	s->failed = d->max_failed > 0 ? calloc((size_t)d->max_failed, sizeof *s->failed) : NULL;
	if (!s->name || !s->failures || (d->max_failed > 0 && !s->failed)) {
		free(s->name);
		cJSON_Delete(s->failures);
		free(s->failed);
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	}
	*out = d->n_suites++;
	return 0;
}

/* Reads the per-suite figures of a run's summary_json. */
static int read_summary(ev_report_data *d)
{
	char what[64];
	ev_summary sum;
	snprintf(what, sizeof what, "run %lld: summary_json", (long long)d->run.id);
	int rc = ev_summary_parse(&sum, d->run.summary_json, what);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < sum.suites.n; i++) {
		ev_summary_suite *e = &sum.suites.v[i];
		size_t k;
		if ((rc = suite_find(d, e->name, true, &k)))
			break;
		ev_report_suite *s = &d->suites[k];
		s->from_summary = true;
		s->n = e->n;
		s->errors = e->errors;
		s->has_score = e->has_score;
		s->score = e->score;
		s->has_ci = e->has_ci;
		s->ci_low = e->ci_low;
		s->ci_high = e->ci_high;
		s->has_stderr = e->has_stderr;
		s->stderr_ = e->stderr_;
		cJSON_Delete(s->failures);
		s->failures = e->failures;
		e->failures = NULL;
		cJSON_Delete(s->pass_at_k), cJSON_Delete(s->pass_hat_k);
		s->pass_at_k = e->pass_at_k, s->pass_hat_k = e->pass_hat_k;
		e->pass_at_k = e->pass_hat_k = NULL;
	}
	ev_summary_clear(&sum);
	return rc;
}

/* Suites the run planned, so that an unfinished run shows those it has not
 * reached. A malformed suites_json only loses that list. */
static int planned_suites(ev_report_data *d)
{
	cJSON *j = NULL;
	const char *text = d->run.suites_json;
	if (!text || ev_json_parse(&j, text, strlen(text), "suites_json") != 0) {
		ev_error_clear();
		return 0;
	}
	int rc = 0;
	const cJSON *e;
	const cJSON *list = cJSON_IsArray(j) ? j : NULL;
	cJSON_ArrayForEach(e, list) {
		const char *name = ev_json_str(e, "name", NULL);
		size_t k;
		if (name && *name && (rc = suite_find(d, name, true, &k)))
			break;
	}
	cJSON_Delete(j);
	return rc;
}

/* ---- the pass over the results -------------------------------------------------- */

typedef struct {
	ev_report_data *d;
	bool in_sample;
	size_t suite;        /* index into d->suites */
	char *sample_id;
	ev_sample_fold fold; /* the current sample's epochs */
	ev_run_fold all;     /* every result, for suites without a summary */
	bool have_worst;
	double worst;
	char *worst_reason, *worst_answer;
	char *err_reason, *err_answer; /* of the first error epoch */
} gather_state;

static void sample_reset(gather_state *g)
{
	free(g->sample_id);
	free(g->worst_reason);
	free(g->worst_answer);
	free(g->err_reason);
	free(g->err_answer);
	g->sample_id = g->worst_reason = g->worst_answer = g->err_reason = g->err_answer = NULL;
	g->in_sample = false;
	g->fold = (ev_sample_fold){0};
	g->have_worst = false;
}

static void failed_clear(ev_report_failed *f)
{
	free(f->id);
	free(f->reason);
	free(f->answer);
	memset(f, 0, sizeof *f);
}

/* Closes the current sample: keeps it in its suite's list when it failed
 * and ranks among the lowest. */
static void sample_finish(gather_state *g)
{
	if (!g->in_sample)
		return;
	ev_report_suite *s = &g->d->suites[g->suite];
	size_t max = (size_t)g->d->max_failed;
	double mean = ev_sample_fold_mean(&g->fold);
	if (mean >= 1.0 || max == 0) {
		sample_reset(g);
		return;
	}
	size_t pos = s->n_failed;
	while (pos > 0) {
		const ev_report_failed *p = &s->failed[pos - 1];
		if (p->score < mean || (p->score == mean && strcmp(p->id, g->sample_id) < 0))
			break;
		pos--;
	}
	if (pos >= max) {
		sample_reset(g);
		return;
	}
	if (s->n_failed == max)
		failed_clear(&s->failed[--s->n_failed]);
	memmove(&s->failed[pos + 1], &s->failed[pos], (s->n_failed - pos) * sizeof *s->failed);
	ev_report_failed *f = &s->failed[pos];
	f->id = g->sample_id;
	f->score = mean;
	if (g->fold.n_scored > 0) {
		f->reason = g->worst_reason;
		f->answer = g->worst_answer;
		g->worst_reason = g->worst_answer = NULL;
	} else {
		f->reason = g->err_reason;
		f->answer = g->err_answer;
		g->err_reason = g->err_answer = NULL;
	}
	s->n_failed++;
	g->sample_id = NULL;
	sample_reset(g);
}

static const char *answer_of(const ev_result *r)
{
	if (r->extracted && *r->extracted)
		return r->extracted;
	if (r->response && *r->response)
		return r->response;
	return r->detail ? r->detail : "";
}

static int gather_cb(void *ctx, const ev_result *r)
{
	gather_state *g = ctx;
	ev_report_data *d = g->d;
	int rc;

	bool new_suite = !g->in_sample || strcmp(d->suites[g->suite].name, r->suite) != 0;
	if (new_suite || strcmp(g->sample_id, r->sample_id) != 0) {
		sample_finish(g);
		if (new_suite && (rc = suite_find(d, r->suite, true, &g->suite)))
			return rc;
		if (!(g->sample_id = ev_strdup(r->sample_id)))
			return ev_error_set(EV_E_NOMEM, "report: out of memory");
		g->in_sample = true;
	}
	ev_report_suite *s = &d->suites[g->suite];
	bool is_err = ev_result_is_error(r);
	ev_sample_fold_add(&g->fold, r);
	if (!s->from_summary && (rc = ev_run_fold_add(&g->all, r)))
		return rc;
	if (!is_err && (rc = ev_report_grid_add(&s->grid, r)))
		return rc;
	char **reason_slot, **answer_slot;
	if (is_err) {
		if (g->err_reason)
			return 0;
		reason_slot = &g->err_reason;
		answer_slot = &g->err_answer;
	} else {
		if (g->have_worst && r->score >= g->worst)
			return 0;
		g->have_worst = true;
		g->worst = r->score;
		reason_slot = &g->worst_reason;
		answer_slot = &g->worst_answer;
	}
	free(*reason_slot);
	free(*answer_slot);
	*reason_slot = ev_strdup(r->reason ? r->reason : "");
	*answer_slot = ev_report_text(answer_of(r), EV_REPORT_ANSWER_CHARS);
	if (!*reason_slot || !*answer_slot)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	return 0;
}

int ev_report_gather(ev_report_data *d, ev_tracker *t, int64_t run_id, int max_failed)
{
	gather_state g;
	int rc;

	memset(d, 0, sizeof *d);
	memset(&g, 0, sizeof g);
	if (max_failed < 0 || max_failed > EV_REPORT_MAX_FAILED)
		return ev_error_set(EV_E_INVALID, "report: max_failed %d: expected 0 to %d", max_failed,
		                    EV_REPORT_MAX_FAILED);
	d->max_failed = max_failed;
	if ((rc = ev_tracker_run_get(t, run_id, &d->run)))
		return rc;
	if (d->run.config_json && ev_json_parse(&d->config, d->run.config_json, strlen(d->run.config_json),
	                                        "config_json") != 0) {
		d->config = NULL;
		ev_error_clear();
	}
	d->complete = d->run.summary_json != NULL;
	if (d->complete) { /* the effort sweep's figures, as the run summarized them */
		cJSON *sj = cJSON_Parse(d->run.summary_json);
		cJSON *e = sj ? cJSON_DetachItemFromObjectCaseSensitive(sj, "effort") : NULL;
		d->effort = cJSON_IsObject(e) ? e : NULL;
		if (!d->effort)
			cJSON_Delete(e);
		cJSON_Delete(sj);
	}
	if (d->complete)
		rc = read_summary(d);
	else
		rc = planned_suites(d);
	if (rc)
		goto done;
	g.d = d;
	if ((rc = ev_tracker_results_each(t, run_id, gather_cb, &g)))
		goto done;
	sample_finish(&g);
	for (size_t i = 0; i < d->n_suites; i++) {
		ev_report_suite *s = &d->suites[i];
		const ev_suite_fold *f = s->from_summary ? NULL : ev_run_fold_find(&g.all, s->name);
		if (!f)
			continue;
		/* A run without a summary: its figures so far, per result, no CI. */
		s->n = f->n_results;
		s->errors = f->errors;
		if (f->scored_results > 0) {
			s->has_score = true;
			s->score = f->scored_sum / (double)f->scored_results;
		}
		for (size_t k = 0; k < f->failures.n; k++)
			cJSON_AddNumberToObject(s->failures, f->failures.v[k].reason, (double)f->failures.v[k].count);
	}
done:
	sample_reset(&g);
	ev_run_fold_clear(&g.all);
	if (rc)
		ev_report_data_clear(d);
	return rc;
}

void ev_report_data_clear(ev_report_data *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_suites; i++) {
		ev_report_suite *s = &d->suites[i];
		for (size_t k = 0; k < s->n_failed; k++)
			failed_clear(&s->failed[k]);
		free(s->failed);
		free(s->name);
		cJSON_Delete(s->failures);
		cJSON_Delete(s->grid);
		cJSON_Delete(s->pass_at_k), cJSON_Delete(s->pass_hat_k);
	}
	free(d->suites);
	cJSON_Delete(d->config);
	cJSON_Delete(d->effort);
	ev_run_row_clear(&d->run);
	memset(d, 0, sizeof *d);
}

int ev_report_write(ev_tracker *t, int64_t run_id, const ev_report_options *opt, FILE *out)
{
	ev_report_options dflt = EV_REPORT_OPTIONS_INIT;
	ev_report_data d;
	ev_buf b = EV_BUF_INIT(EV_REPORT_MAX_BYTES);
	int rc;

	if (!opt)
		opt = &dflt;
	if (!t || !out)
		return ev_error_set(EV_E_INVALID, "report: no tracker or no output");
	if (opt->format != EV_REPORT_MD && opt->format != EV_REPORT_JSON && opt->format != EV_REPORT_HTML)
		return ev_error_set(EV_E_INVALID, "report: unknown format %d", (int)opt->format);
	if ((rc = ev_report_gather(&d, t, run_id, opt->max_failed)))
		return rc;
	rc = opt->format == EV_REPORT_JSON   ? ev_report_json(&b, &d)
	     : opt->format == EV_REPORT_HTML ? ev_report_html(&b, &d, t)
	                                     : ev_report_md(&b, &d);
	if (rc)
		ev_error_wrap(rc, "report of run %lld", (long long)run_id);
	else if ((b.len && fwrite(b.data, 1, b.len, out) != b.len) || fflush(out) != 0)
		rc = ev_error_set(EV_E_IO, "report of run %lld: write failed", (long long)run_id);
	ev_buf_free(&b);
	ev_report_data_clear(&d);
	return rc;
}
