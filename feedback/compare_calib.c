/*
 * feedback/compare_calib.c: the noise floor. A calibration is the same
 * evaluation run several times; per suite it keeps the variance of the
 * suite score across the repeats and each sample's flip rate (how often its
 * outcome differs from its majority outcome). Comparisons take their
 * minimum detectable effect from the latest calibration of a suite.
 */
#include "feedback/compare_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Repeats one calibration may fold (each is a whole run). */
#define CALIB_MAX_RUNS 1000

void ev_calibration_row_clear(ev_calibration_row *c)
{
	if (!c)
		return;
	free(c->flip_rate_json);
	memset(c, 0, sizeof *c);
}

int ev_calibration_latest(ev_tracker *t, const char *suite, const char *suite_hash, ev_calibration_row *out)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;
	memset(out, 0, sizeof *out);
	/* A calibration of the same suite content first, then the newest of any
	 * version of the suite: an edited suite's noise is close to the old one's
	 * and far closer than none. */
	int src = ev_tracker_prepare(t, &st,
	                             "SELECT id, variance, n, repeats, flip_rate_json FROM calibrations WHERE suite = ?1 "
	                             "ORDER BY (suite_hash = ?2) DESC, created DESC, id DESC LIMIT 1");
	if (src)
		return ev_error_wrap(src, "reading the calibration of suite %s", suite);
	if ((rc = ev_tracker_bind_text(t, st, 1, suite, "calibration: suite")) ||
	    (rc = ev_tracker_bind_text(t, st, 2, suite_hash ? suite_hash : "", "calibration: suite_hash")))
		goto done;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		out->found = true;
		out->id = sqlite3_column_int64(st, 0);
		out->variance = sqlite3_column_double(st, 1);
		out->n = (long)sqlite3_column_int64(st, 2);
		out->repeats = sqlite3_column_int(st, 3);
		const char *f = (const char *)sqlite3_column_text(st, 4);
		if (f && !(out->flip_rate_json = ev_strdup(f)))
			rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
		if (!isfinite(out->variance) || out->variance < 0 || out->n < 0) {
			ev_log_warn("calibration %lld of suite %s has a bad variance or n: ignored", (long long)out->id, suite);
			ev_calibration_row_clear(out);
		}
	} else if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading the calibration of suite %s", suite);
	}
done:
	sqlite3_finalize(st);
	return rc;
}

/* ---- computing and storing ------------------------------------------------------- */

typedef struct {
	const ev_sample_score *s;
	size_t run; /* index into the repeats */
} tagged;

static int cmp_tagged(const void *x, const void *y)
{
	const tagged *a = x, *b = y;
	int c = ev_sample_score_cmp(a->s, b->s);
	return c ? c : (a->run > b->run) - (a->run < b->run);
}

typedef struct {
	double *sum;  /* per repeat: sum of per-sample scores of the suite */
	long *count;  /* per repeat: samples scored */
	cJSON *flaky; /* {id: rate} for rates > 0 */
	double flip_sum;
	long n_samples;
} suite_acc;

static void acc_reset(suite_acc *a, size_t n_runs)
{
	memset(a->sum, 0, n_runs * sizeof *a->sum);
	memset(a->count, 0, n_runs * sizeof *a->count);
	cJSON_Delete(a->flaky);
	a->flaky = cJSON_CreateObject();
	a->flip_sum = 0;
	a->n_samples = 0;
}

/* Stores one suite's record and appends it to `out_arr`. */
static int store_suite(ev_tracker *t, const char *model, const char *suite, const char *hash, const int64_t *run_ids,
                       size_t n_runs, suite_acc *a, cJSON *out_arr)
{
	sqlite3_stmt *st = NULL;
	char *flips = NULL, *ids = NULL;
	int rc = 0;
	double mean = 0, ss = 0;
	size_t k = 0;
	long n_total = 0;
	cJSON *idarr = cJSON_CreateArray(), *fj = cJSON_CreateObject();
	for (size_t r = 0; r < n_runs; r++) {
		if (!a->count[r])
			continue;
		cJSON_AddItemToArray(idarr, cJSON_CreateNumber((double)run_ids[r]));
		double x = a->sum[r] / (double)a->count[r];
		k++;
		n_total += a->count[r];
		/* Welford's update: stable for scores that barely move. */
		double d = x - mean;
		mean += d / (double)k;
		ss += d * (x - mean);
	}
	if (k < 2) {
		ev_log_warn("calibration: suite %s was scored in %zu of the repeats: no record stored", suite, k);
		goto done;
	}
	double variance = ss / (double)(k - 1);
	long n = (long)llround((double)n_total / (double)k);
	double mean_flip = a->n_samples ? a->flip_sum / (double)a->n_samples : 0;
	cJSON_AddNumberToObject(fj, "n", (double)a->n_samples);
	cJSON_AddNumberToObject(fj, "mean", mean_flip);
	cJSON_AddItemReferenceToObject(fj, "flaky", a->flaky);
	flips = ev_json_print(fj);
	ids = ev_json_print(idarr);
	if (!flips || !ids) {
		rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
		goto done;
	}
	int src = ev_tracker_prepare(t, &st,
	                             "INSERT INTO calibrations(model, suite, suite_hash, repeats, n, variance, "
	                             "flip_rate_json, run_ids, created) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
	if (src) {
		rc = ev_error_wrap(src, "storing the calibration of suite %s", suite);
		goto done;
	}
	if ((rc = ev_tracker_bind_text(t, st, 1, model, "calibration: model")) ||
	    (rc = ev_tracker_bind_text(t, st, 2, suite, "calibration: suite")) ||
	    (rc = ev_tracker_bind_text(t, st, 3, hash ? hash : "", "calibration: suite_hash")) ||
	    (rc = ev_tracker_bind_text(t, st, 7, flips, "calibration: flip_rate_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 8, ids, "calibration: run_ids")))
		goto done;
	sqlite3_bind_int(st, 4, (int)k);
	sqlite3_bind_int64(st, 5, n);
	sqlite3_bind_double(st, 6, variance);
	sqlite3_bind_double(st, 9, ev_wall_time());
	if ((src = sqlite3_step(st)) != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "storing the calibration of suite %s", suite);
		goto done;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_last_insert_rowid(t->db));
	cJSON_AddStringToObject(o, "model", model);
	cJSON_AddStringToObject(o, "suite", suite);
	cJSON_AddStringToObject(o, "suite_hash", hash ? hash : "");
	cJSON_AddNumberToObject(o, "repeats", (double)k);
	cJSON_AddNumberToObject(o, "n", (double)n);
	cJSON_AddNumberToObject(o, "mean_score", mean);
	cJSON_AddNumberToObject(o, "variance", variance);
	cJSON_AddNumberToObject(o, "mean_flip_rate", mean_flip);
	cJSON_AddItemToObject(o, "flaky", cJSON_Duplicate(a->flaky, true));
	cJSON_AddItemToObject(o, "run_ids", cJSON_Duplicate(idarr, true));
	cJSON_AddItemToArray(out_arr, o);
done:
	sqlite3_finalize(st);
	cJSON_Delete(fj);
	cJSON_Delete(idarr);
	free(flips);
	free(ids);
	return rc;
}

/* One sample's outcomes across the repeats: tags [lo, hi). */
static void fold_sample(suite_acc *a, const tagged *v, size_t lo, size_t hi)
{
	long present = 0, passes = 0;
	for (size_t k = lo; k < hi; k++) {
		if (!v[k].s->n_scored)
			continue;
		a->sum[v[k].run] += v[k].s->score;
		a->count[v[k].run]++;
		present++;
		passes += v[k].s->score >= 1.0;
	}
	if (!present)
		return;
	long minority = passes < present - passes ? passes : present - passes;
	double rate = (double)minority / (double)present;
	a->n_samples++;
	a->flip_sum += rate;
	if (rate > 0)
		cJSON_AddNumberToObject(a->flaky, v[lo].s->id, rate);
}

int ev_calibration_store(ev_tracker *t, const char *model, const int64_t *run_ids, size_t n_runs,
                         const ev_compare_options *opt, char **out_json)
{
	ev_run_scores *runs = NULL;
	ev_run_row first = {0};
	tagged *v = NULL;
	suite_acc acc = {0};
	cJSON *root = NULL, *arr = NULL;
	char *hash = NULL;
	bool in_tx = false;
	int rc = 0;
	size_t n_tags = 0;

	if (out_json)
		*out_json = NULL;
	if (n_runs < 2)
		return ev_error_set(EV_E_INVALID, "calibration: needs at least 2 runs (got %zu)", n_runs);
	if (n_runs > CALIB_MAX_RUNS)
		return ev_error_set(EV_E_LIMIT, "calibration: %zu runs (at most %d)", n_runs, CALIB_MAX_RUNS);
	if (!model || !*model)
		return ev_error_set(EV_E_INVALID, "calibration: model: missing");
	runs = calloc(n_runs, sizeof *runs);
	acc.sum = calloc(n_runs, sizeof *acc.sum);
	acc.count = calloc(n_runs, sizeof *acc.count);
	root = cJSON_CreateObject();
	if (!runs || !acc.sum || !acc.count || !root) {
		rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
		goto done;
	}
	arr = cJSON_AddArrayToObject(root, "calibrations");
	if ((rc = ev_tracker_run_get(t, run_ids[0], &first)))
		goto done;
	for (size_t r = 0; r < n_runs; r++) {
		ev_run_row row = {0};
		if ((rc = ev_tracker_run_get(t, run_ids[r], &row)))
			goto done;
		ev_run_row_clear(&row);
		if ((rc = ev_run_scores_load(&runs[r], t, run_ids[r])))
			goto done;
		n_tags += runs[r].n;
	}
	v = malloc((n_tags ? n_tags : 1) * sizeof *v);
	if (!v) {
		rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
		goto done;
	}
	size_t m = 0;
	for (size_t r = 0; r < n_runs; r++)
		for (size_t k = 0; k < runs[r].n; k++)
			v[m++] = (tagged){&runs[r].v[k], r};
	qsort(v, m, sizeof *v, cmp_tagged);

	if ((rc = ev_tracker_flush(t)) || (rc = ev_tracker_exec(t, "BEGIN IMMEDIATE", "storing a calibration")))
		goto done;
	in_tx = true;
	size_t i = 0;
	while (i < m) {
		const char *suite = v[i].s->suite;
		acc_reset(&acc, n_runs);
		if (!acc.flaky) {
			rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
			goto done;
		}
		while (i < m && !strcmp(v[i].s->suite, suite)) {
			size_t lo = i;
			while (i < m && !strcmp(v[i].s->suite, suite) && !strcmp(v[i].s->id, v[lo].s->id))
				i++;
			fold_sample(&acc, v, lo, i);
		}
		free(hash);
		hash = ev_run_suite_hash(&first, suite);
		if ((rc = store_suite(t, model, suite, hash, run_ids, n_runs, &acc, arr)))
			goto done;
	}
	if ((rc = ev_tracker_exec(t, "COMMIT", "storing a calibration")))
		goto done;
	in_tx = false;
	if (out_json && !(*out_json = ev_json_print(root)))
		rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
done:
	if (in_tx)
		ev_tracker_exec(t, "ROLLBACK", "rolling back a calibration");
	for (size_t r = 0; runs && r < n_runs; r++)
		ev_run_scores_clear(&runs[r]);
	free(runs);
	free(v);
	free(acc.sum);
	free(acc.count);
	cJSON_Delete(acc.flaky);
	cJSON_Delete(root);
	free(hash);
	ev_run_row_clear(&first);
	return rc;
}

int ev_calibration_get_json(ev_tracker *t, const char *suite, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *o = NULL;
	int rc = 0;
	*out_json = NULL;
	int src = ev_tracker_prepare(t, &st,
	                             "SELECT id, model, suite, suite_hash, repeats, n, variance, flip_rate_json, run_ids, "
	                             "created FROM calibrations WHERE suite = ?1 ORDER BY created DESC, id DESC LIMIT 1");
	if (src)
		return ev_error_wrap(src, "reading the calibration of suite %s", suite);
	if ((rc = ev_tracker_bind_text(t, st, 1, suite, "calibration: suite")))
		goto done;
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "no calibration of suite %s", suite);
		goto done;
	}
	if (src != SQLITE_ROW) {
		rc = ev_tracker_sqlerr(t, src, "reading the calibration of suite %s", suite);
		goto done;
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	cJSON_AddStringToObject(o, "model", (const char *)sqlite3_column_text(st, 1));
	cJSON_AddStringToObject(o, "suite", (const char *)sqlite3_column_text(st, 2));
	cJSON_AddStringToObject(o, "suite_hash", (const char *)sqlite3_column_text(st, 3));
	cJSON_AddNumberToObject(o, "repeats", sqlite3_column_int(st, 4));
	cJSON_AddNumberToObject(o, "n", (double)sqlite3_column_int64(st, 5));
	cJSON_AddNumberToObject(o, "variance", sqlite3_column_double(st, 6));
	const char *f = (const char *)sqlite3_column_text(st, 7);
	cJSON *fj = f ? cJSON_Parse(f) : NULL;
	cJSON_AddNumberToObject(o, "mean_flip_rate", ev_json_num(fj, "mean", 0));
	cJSON *flaky = cJSON_DetachItemFromObjectCaseSensitive(fj, "flaky");
	cJSON_AddItemToObject(o, "flaky", flaky ? flaky : cJSON_CreateObject());
	cJSON_Delete(fj);
	const char *ids = (const char *)sqlite3_column_text(st, 8);
	cJSON *ij = ids ? cJSON_Parse(ids) : NULL;
	cJSON_AddItemToObject(o, "run_ids", ij ? ij : cJSON_CreateArray());
	char created[32];
	ev_iso8601(created, sqlite3_column_double(st, 9));
	cJSON_AddStringToObject(o, "created", created);
	if (!(*out_json = ev_json_print(o)))
		rc = ev_error_set(EV_E_NOMEM, "calibration: out of memory");
done:
	cJSON_Delete(o);
	sqlite3_finalize(st);
	return rc;
}
