/*
 * reports/report_json.c: a run's report as JSON (the shape is in
 * reports/README.md). Every string is made valid UTF-8 first, so the output
 * parses whatever the stored results hold.
 */
#include "reports/reports_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Adds s (NULL adds null) as valid UTF-8; false when out of memory. */
static bool add_str(cJSON *obj, const char *key, const char *s)
{
	if (!s)
		return cJSON_AddNullToObject(obj, key) != NULL;
	char *clean = ev_report_text(s, SIZE_MAX);
	bool ok = clean && cJSON_AddStringToObject(obj, key, clean);
	free(clean);
	return ok;
}

static bool add_num(cJSON *obj, const char *key, bool has, double v)
{
	return (has ? cJSON_AddNumberToObject(obj, key, v) : cJSON_AddNullToObject(obj, key)) != NULL;
}

static bool add_time(cJSON *obj, const char *key, double wall)
{
	char iso[32];
	if (wall <= 0)
		return cJSON_AddNullToObject(obj, key) != NULL;
	ev_iso8601(iso, wall);
	return cJSON_AddStringToObject(obj, key, iso) != NULL;
}

static cJSON *failures_json(const cJSON *failures)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *e;
	const cJSON *from = o ? failures : NULL;
	cJSON_ArrayForEach(e, from) {
		char *key = ev_report_text(e->string, SIZE_MAX);
		bool ok = key && cJSON_AddNumberToObject(o, key, e->valuedouble);
		free(key);
		if (!ok) {
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

static cJSON *suite_json(const ev_report_suite *s)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *f = NULL, *list = NULL;
	bool ok = o && add_str(o, "name", s->name) && cJSON_AddNumberToObject(o, "n", (double)s->n) &&
	          add_num(o, "score", s->has_score, s->score) && add_num(o, "ci_low", s->has_ci, s->ci_low) &&
	          add_num(o, "ci_high", s->has_ci, s->ci_high) && add_num(o, "stderr", s->has_stderr, s->stderr_) &&
	          cJSON_AddNumberToObject(o, "errors", (double)s->errors);
	if (ok && (ok = (f = failures_json(s->failures)) != NULL))
		cJSON_AddItemToObject(o, "failures", f);
	if (ok && (ok = (list = cJSON_AddArrayToObject(o, "most_failed")) != NULL)) {
		for (size_t i = 0; ok && i < s->n_failed; i++) {
			const ev_report_failed *x = &s->failed[i];
			cJSON *e = cJSON_CreateObject();
			ok = e && cJSON_AddItemToArray(list, e) && add_str(e, "id", x->id) &&
			     cJSON_AddNumberToObject(e, "score", x->score) && add_str(e, "reason", x->reason) &&
			     add_str(e, "answer", x->answer);
		}
	}
	if (ok && s->grid) {
		cJSON *g = ev_report_grid_json(s->grid);
		ok = g && cJSON_AddItemToObject(o, "grid", g);
	}
	if (ok && s->pass_at_k)
		ok = cJSON_AddItemToObject(o, "pass_at_k", cJSON_Duplicate(s->pass_at_k, 1));
	if (ok && s->pass_hat_k)
		ok = cJSON_AddItemToObject(o, "pass_hat_k", cJSON_Duplicate(s->pass_hat_k, 1));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int ev_report_json(ev_buf *b, const ev_report_data *d)
{
	const ev_run_row *r = &d->run;
	cJSON *o = cJSON_CreateObject();
	cJSON *suites = NULL;
	char *text = NULL;
	int rc = 0;

	bool ok = o && cJSON_AddNumberToObject(o, "run_id", (double)r->id) && add_str(o, "model", r->model) &&
	          add_str(o, "model_source", r->model_source) && add_str(o, "status", r->status) &&
	          add_time(o, "created", r->created) && add_time(o, "finished", r->finished) &&
	          cJSON_AddBoolToObject(o, "complete", d->complete) &&
	          cJSON_AddNumberToObject(o, "epochs", r->epochs) &&
	          cJSON_AddNumberToObject(o, "n_planned", (double)r->n_planned) &&
	          cJSON_AddNumberToObject(o, "n_results", (double)r->n_results);
	if (ok) {
		cJSON *config = d->config ? cJSON_Duplicate(d->config, 1) : cJSON_CreateNull();
		ok = config && cJSON_AddItemToObject(o, "config", config);
		if (!ok)
			cJSON_Delete(config);
	}
	if (ok && d->effort)
		ok = cJSON_AddItemToObject(o, "effort", cJSON_Duplicate(d->effort, 1));
	if (ok)
		ok = (suites = cJSON_AddArrayToObject(o, "suites")) != NULL;
	for (size_t i = 0; ok && i < d->n_suites; i++) {
		cJSON *s = suite_json(&d->suites[i]);
		ok = s && cJSON_AddItemToArray(suites, s);
		if (!ok)
			cJSON_Delete(s);
	}
	if (ok)
		ok = (text = ev_json_print(o)) != NULL; /* numbers that read back exactly */
	if (!ok)
		rc = ev_error_set(EV_E_NOMEM, "report: out of memory building JSON");
	else if (!(rc = ev_buf_puts(b, text)))
		rc = ev_buf_putc(b, '\n');
	free(text);
	cJSON_Delete(o);
	return rc;
}
