/*
 * feedback/regress.c: regressions between a baseline run and candidate
 * runs: filing them from a comparison, their life (new -> ... -> fixed ->
 * regressed), their evidence (the broken samples with a failure
 * fingerprint each) and their history (regression_events).
 *
 * A regression is identified by (suite, baseline run): a later candidate
 * compared with the same baseline updates it, fixes it, or reopens it as
 * "regressed", keeping its id.
 */
#include "feedback/compare_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const statuses[] = {"new", "confirmed", "investigating", "fixed", "invalid", "wontfix", "regressed"};

bool ev_regression_status_valid(const char *status)
{
	for (size_t i = 0; status && i < sizeof statuses / sizeof statuses[0]; i++)
		if (!strcmp(statuses[i], status))
			return true;
	return false;
}

/* Still to be worked on: a later good candidate fixes these. */
static bool is_open(const char *status)
{
	return !strcmp(status, "new") || !strcmp(status, "confirmed") || !strcmp(status, "investigating") ||
	       !strcmp(status, "regressed");
}

/* Statements here run a few times per comparison, so they are prepared
 * privately (ev_tracker_prepare) rather than taking slots of the handle's
 * statement cache; `what` says what for in an error. */
static int prep(ev_tracker *t, sqlite3_stmt **st, const char *sql, const char *what)
{
	int rc = ev_tracker_prepare(t, st, sql);
	return rc ? ev_error_wrap(rc, "%s", what) : 0;
}

static int add_event(ev_tracker *t, int64_t id, const char *status, const char *model, int64_t run, const char *note)
{
	sqlite3_stmt *st = NULL;
	int rc = prep(t, &st,
	              "INSERT INTO regression_events(regression_id, status, model, run, note, at) "
	              "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
	              "recording a regression event");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	if (!(rc = ev_tracker_bind_text(t, st, 2, status, "event: status")) &&
	    !(rc = ev_tracker_bind_text(t, st, 3, model, "event: model")) &&
	    !(rc = ev_tracker_bind_text(t, st, 5, note, "event: note"))) {
		if (run > 0)
			sqlite3_bind_int64(st, 4, run);
		sqlite3_bind_double(st, 6, ev_wall_time());
		rc = ev_tracker_step_done(t, st, "recording a regression event");
	}
	sqlite3_finalize(st);
	return rc;
}

static int put_samples(ev_tracker *t, int64_t id, const ev_compare_suite *s)
{
	sqlite3_stmt *st = NULL;
	int rc = prep(t, &st, "DELETE FROM regression_samples WHERE regression_id = ?1", "replacing regression samples");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = ev_tracker_step_done(t, st, "replacing regression samples");
	sqlite3_finalize(st);
	st = NULL;
	if (rc || (rc = prep(t, &st,
	                     "INSERT OR REPLACE INTO regression_samples(regression_id, sample_id, fingerprint, detail) "
	                     "VALUES(?1, ?2, ?3, ?4)",
	                     "storing regression samples")))
		return rc;
	for (size_t k = 0; k < s->n_broken && !rc; k++) {
		const ev_flip *f = &s->broken[k];
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, id);
		if (!(rc = ev_tracker_bind_text(t, st, 2, f->sample_id, "regression sample: id")) &&
		    !(rc = ev_tracker_bind_text(t, st, 3, ev_fingerprint_name(f->fingerprint), "regression sample")) &&
		    !(rc = ev_tracker_bind_text(t, st, 4, f->detail, "regression sample: detail")))
			rc = ev_tracker_step_done(t, st, "storing regression samples");
	}
	sqlite3_finalize(st);
	return rc;
}

/* Writes the comparison's figures into regression `id` (0: a new one,
 * whose id goes to *id). */
static int put_regression(ev_tracker *t, int64_t *id, const ev_compare *c, const ev_compare_suite *s,
                          const char *status)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if (*id == 0)
		rc = prep(t, &st,
		          "INSERT INTO regressions(suite, baseline_run, candidate_run, last_run, baseline_model, "
		          "candidate_model, n, delta, ci_low, ci_high, p, mde, status, created, updated) "
		          "VALUES(?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
		          "filing a regression");
	else
		rc = prep(t, &st,
		          "UPDATE regressions SET suite = ?1, baseline_run = ?2, candidate_run = ?3, last_run = ?3, "
		          "baseline_model = ?4, "
		          "candidate_model = ?5, n = ?6, delta = ?7, ci_low = ?8, ci_high = ?9, p = ?10, mde = ?11, "
		          "status = ?12, updated = ?13 WHERE id = ?14",
		          "updating a regression");
	if (rc)
		return rc;
	if (!(rc = ev_tracker_bind_text(t, st, 1, s->name, "regression: suite")) &&
	    !(rc = ev_tracker_bind_text(t, st, 4, c->model_a, "regression: baseline_model")) &&
	    !(rc = ev_tracker_bind_text(t, st, 5, c->model_b, "regression: candidate_model")) &&
	    !(rc = ev_tracker_bind_text(t, st, 12, status, "regression: status"))) {
		sqlite3_bind_int64(st, 2, c->run_a);
		sqlite3_bind_int64(st, 3, c->run_b);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)s->n);
		sqlite3_bind_double(st, 7, s->delta);
		sqlite3_bind_double(st, 8, s->ci_low);
		sqlite3_bind_double(st, 9, s->ci_high);
		sqlite3_bind_double(st, 10, s->p);
		sqlite3_bind_double(st, 11, s->mde);
		sqlite3_bind_double(st, 13, ev_wall_time());
		if (*id)
			sqlite3_bind_int64(st, 14, *id);
		if (!(rc = ev_tracker_step_done(t, st, *id ? "updating a regression" : "filing a regression")) && !*id)
			*id = sqlite3_last_insert_rowid(t->db);
	}
	sqlite3_finalize(st);
	return rc;
}

/* The evidence (candidate_run, figures, samples) stays the drop's; last_run
 * records the candidate that fixed it, so older candidates are stale. */
static int mark_fixed(ev_tracker *t, int64_t id, const char *model, int64_t run)
{
	sqlite3_stmt *st = NULL;
	int rc = prep(t, &st,
	              "UPDATE regressions SET status = 'fixed', fixed_in = ?1, last_run = ?4, updated = ?2 WHERE id = ?3",
	              "marking a regression fixed");
	if (rc)
		return rc;
	if (!(rc = ev_tracker_bind_text(t, st, 1, model, "regression: fixed_in"))) {
		sqlite3_bind_double(st, 2, ev_wall_time());
		sqlite3_bind_int64(st, 3, id);
		sqlite3_bind_int64(st, 4, run);
		rc = ev_tracker_step_done(t, st, "marking a regression fixed");
	}
	sqlite3_finalize(st);
	return rc;
}

static void add_action(cJSON *arr, const char *suite, int64_t id, const char *action)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "suite", suite);
	if (id)
		cJSON_AddNumberToObject(o, "regression_id", (double)id);
	else
		cJSON_AddNullToObject(o, "regression_id");
	cJSON_AddStringToObject(o, "action", action);
	cJSON_AddItemToArray(arr, o);
}

/* One suite of the comparison; appends what it did to `actions`. */
static int apply_suite(ev_tracker *t, const ev_compare *c, const ev_compare_suite *s, cJSON *actions)
{
	sqlite3_stmt *st = NULL;
	int64_t id = 0, seen_run = 0;
	char status[32] = "";
	bool sig = ev_compare_is_regression(s);
	int rc = prep(t, &st,
	              "SELECT id, status, last_run FROM regressions WHERE suite = ?1 AND baseline_run = ?2 "
	              "ORDER BY id DESC LIMIT 1",
	              "finding a regression");
	if (rc)
		return rc;
	if ((rc = ev_tracker_bind_text(t, st, 1, s->name, "regression: suite")))
		goto done;
	sqlite3_bind_int64(st, 2, c->run_a);
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		id = sqlite3_column_int64(st, 0);
		snprintf(status, sizeof status, "%s", (const char *)sqlite3_column_text(st, 1));
		seen_run = sqlite3_column_int64(st, 2);
	} else if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "finding a regression of suite %s", s->name);
		goto done;
	}
	sqlite3_finalize(st);
	st = NULL;

	if (id && c->run_b < seen_run) {
		/* An older candidate than the one the regression last saw: it says
		 * nothing about the state of things now. */
		add_action(actions, s->name, id, "kept");
		goto done;
	}
	if (sig) {
		if (!id) {
			if ((rc = put_regression(t, &id, c, s, "new")) || (rc = put_samples(t, id, s)) ||
			    (rc = add_event(t, id, "new", c->model_b, c->run_b, "filed")))
				goto done;
			add_action(actions, s->name, id, "filed");
		} else if (!strcmp(status, "fixed")) {
			if ((rc = put_regression(t, &id, c, s, "regressed")) || (rc = put_samples(t, id, s)) ||
			    (rc = add_event(t, id, "regressed", c->model_b, c->run_b, "significant drop again")))
				goto done;
			add_action(actions, s->name, id, "regressed");
		} else if (is_open(status)) {
			if ((rc = put_regression(t, &id, c, s, status)) || (rc = put_samples(t, id, s)))
				goto done;
			if (c->run_b != seen_run &&
			    (rc = add_event(t, id, status, c->model_b, c->run_b, "still a significant drop")))
				goto done;
			add_action(actions, s->name, id, "updated");
		} else {
			add_action(actions, s->name, id, "kept"); /* invalid, wontfix: a person decided */
		}
	} else if (id && is_open(status) && c->run_b > seen_run) {
		if ((rc = mark_fixed(t, id, c->model_b, c->run_b)) ||
		    (rc = add_event(t, id, "fixed", c->model_b, c->run_b, "no longer a significant drop")))
			goto done;
		add_action(actions, s->name, id, "fixed");
	}
done:
	sqlite3_finalize(st);
	return rc;
}

int ev_regressions_apply(ev_tracker *t, const ev_compare *cmp, char **out_json)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *actions = root ? cJSON_AddArrayToObject(root, "actions") : NULL;
	bool in_tx = false;
	int rc = 0;
	if (out_json)
		*out_json = NULL;
	if (!actions) {
		rc = ev_error_set(EV_E_NOMEM, "regressions: out of memory");
		goto done;
	}
	if (cmp->run_a == cmp->run_b) {
		rc = ev_error_set(EV_E_INVALID, "regressions: baseline and candidate are the same run (%lld)",
		                  (long long)cmp->run_a);
		goto done;
	}
	if ((rc = ev_tracker_flush(t)) || (rc = ev_tracker_exec(t, "BEGIN IMMEDIATE", "filing regressions")))
		goto done;
	in_tx = true;
	for (size_t i = 0; i < cmp->n_suites; i++) {
		if (cmp->suites[i].n == 0)
			continue; /* nothing compared: no evidence either way */
		if ((rc = apply_suite(t, cmp, &cmp->suites[i], actions)))
			goto done;
	}
	if ((rc = ev_tracker_exec(t, "COMMIT", "filing regressions")))
		goto done;
	in_tx = false;
	if (out_json && !(*out_json = ev_json_print(root)))
		rc = ev_error_set(EV_E_NOMEM, "regressions: out of memory");
done:
	if (in_tx)
		ev_tracker_exec(t, "ROLLBACK", "rolling back regressions");
	cJSON_Delete(root);
	return rc;
}

int ev_regressions_file(ev_tracker *t, int64_t baseline_run, int64_t candidate_run, const ev_compare_options *opt,
                        char **out_json)
{
	ev_compare *c = NULL;
	int rc = ev_compare_runs(&c, t, baseline_run, candidate_run, opt);
	if (!rc)
		rc = ev_regressions_apply(t, c, out_json);
	ev_compare_free(c);
	return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

#define REG_COLUMNS                                                                                    \
	"r.id, r.suite, r.baseline_run, r.candidate_run, r.baseline_model, r.candidate_model, r.delta, " \
	"r.ci_low, r.ci_high, r.p, r.mde, r.n, r.status, r.assignee, r.fixed_in, r.created, r.updated, " \
	"r.last_run, "                                                                                 \
	"(SELECT count(*) FROM regression_samples s WHERE s.regression_id = r.id)"

static void add_text_or_null(cJSON *o, const char *key, const unsigned char *v)
{
	if (v)
		cJSON_AddStringToObject(o, key, (const char *)v);
	else
		cJSON_AddNullToObject(o, key);
}

static void add_time(cJSON *o, const char *key, double wall)
{
	char s[32];
	ev_iso8601(s, wall);
	cJSON_AddStringToObject(o, key, s);
}

static cJSON *row_json(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
	add_text_or_null(o, "suite", sqlite3_column_text(st, 1));
	cJSON_AddNumberToObject(o, "baseline_run", (double)sqlite3_column_int64(st, 2));
	cJSON_AddNumberToObject(o, "candidate_run", (double)sqlite3_column_int64(st, 3));
	add_text_or_null(o, "baseline_model", sqlite3_column_text(st, 4));
	add_text_or_null(o, "candidate_model", sqlite3_column_text(st, 5));
	cJSON_AddNumberToObject(o, "delta", sqlite3_column_double(st, 6));
	cJSON_AddNumberToObject(o, "ci_low", sqlite3_column_double(st, 7));
	cJSON_AddNumberToObject(o, "ci_high", sqlite3_column_double(st, 8));
	cJSON_AddNumberToObject(o, "p", sqlite3_column_double(st, 9));
	cJSON_AddNumberToObject(o, "mde", sqlite3_column_double(st, 10));
	cJSON_AddNumberToObject(o, "n", (double)sqlite3_column_int64(st, 11));
	add_text_or_null(o, "status", sqlite3_column_text(st, 12));
	add_text_or_null(o, "assignee", sqlite3_column_text(st, 13));
	add_text_or_null(o, "fixed_in", sqlite3_column_text(st, 14));
	add_time(o, "created", sqlite3_column_double(st, 15));
	add_time(o, "updated", sqlite3_column_double(st, 16));
	cJSON_AddNumberToObject(o, "last_run", (double)sqlite3_column_int64(st, 17));
	cJSON_AddNumberToObject(o, "n_broken", (double)sqlite3_column_int64(st, 18));
	return o;
}

static int finish_json(char **out, cJSON *root)
{
	*out = ev_json_print(root);
	cJSON_Delete(root);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "regressions: out of memory");
}

int ev_regressions_list_json(ev_tracker *t, const char *status, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *root = NULL;
	int rc;
	*out_json = NULL;
	if (status && !ev_regression_status_valid(status))
		return ev_error_set(EV_E_INVALID, "regressions: unknown status '%s'", status);
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = prep(t, &st,
	               "SELECT " REG_COLUMNS " FROM regressions r WHERE ?1 IS NULL OR r.status = ?1 ORDER BY r.id DESC",
	               "listing regressions")))
		return rc;
	root = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(root, "regressions");
	if ((rc = ev_tracker_bind_text(t, st, 1, status, "status")))
		goto done;
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(arr, row_json(st));
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "listing regressions");
		goto done;
	}
	rc = finish_json(out_json, root);
	root = NULL;
done:
	cJSON_Delete(root);
	sqlite3_finalize(st);
	return rc;
}

int ev_regression_show_json(ev_tracker *t, int64_t id, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *o = NULL;
	int rc, src;
	*out_json = NULL;
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = prep(t, &st, "SELECT " REG_COLUMNS " FROM regressions r WHERE r.id = ?1", "reading a regression")))
		return rc;
	sqlite3_bind_int64(st, 1, id);
	src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "no regression %lld", (long long)id);
		goto done;
	}
	if (src != SQLITE_ROW) {
		rc = ev_tracker_sqlerr(t, src, "reading regression %lld", (long long)id);
		goto done;
	}
	o = row_json(st);
	sqlite3_finalize(st);
	st = NULL;

	cJSON *samples = cJSON_AddArrayToObject(o, "samples");
	if ((rc = prep(t, &st,
	               "SELECT sample_id, fingerprint, detail FROM regression_samples WHERE regression_id = ?1 "
	               "ORDER BY sample_id",
	               "reading regression samples")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *s = cJSON_CreateObject();
		add_text_or_null(s, "sample_id", sqlite3_column_text(st, 0));
		add_text_or_null(s, "fingerprint", sqlite3_column_text(st, 1));
		add_text_or_null(s, "detail", sqlite3_column_text(st, 2));
		cJSON_AddItemToArray(samples, s);
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading regression samples");
		goto done;
	}
	sqlite3_finalize(st);
	st = NULL;

	cJSON *events = cJSON_AddArrayToObject(o, "events");
	if ((rc = prep(t, &st,
	               "SELECT status, model, run, note, at FROM regression_events WHERE regression_id = ?1 ORDER BY id",
	               "reading regression events")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *e = cJSON_CreateObject();
		add_text_or_null(e, "status", sqlite3_column_text(st, 0));
		add_text_or_null(e, "model", sqlite3_column_text(st, 1));
		if (sqlite3_column_type(st, 2) == SQLITE_NULL)
			cJSON_AddNullToObject(e, "run");
		else
			cJSON_AddNumberToObject(e, "run", (double)sqlite3_column_int64(st, 2));
		add_text_or_null(e, "note", sqlite3_column_text(st, 3));
		add_time(e, "at", sqlite3_column_double(st, 4));
		cJSON_AddItemToArray(events, e);
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading regression events");
		goto done;
	}
	rc = finish_json(out_json, o);
	o = NULL;
done:
	cJSON_Delete(o);
	sqlite3_finalize(st);
	return rc;
}

int ev_regression_set_status(ev_tracker *t, int64_t id, const char *status, const char *assignee)
{
	sqlite3_stmt *st = NULL;
	bool in_tx = false;
	int rc;
	if (!ev_regression_status_valid(status))
		return ev_error_set(EV_E_INVALID,
		                    "regressions: unknown status '%s' (new, confirmed, investigating, fixed, invalid, "
		                    "wontfix, regressed)",
		                    status ? status : "");
	if (assignee && strlen(assignee) > 256)
		return ev_error_set(EV_E_LIMIT, "regressions: assignee: longer than 256 bytes");
	if ((rc = ev_tracker_flush(t)) || (rc = ev_tracker_exec(t, "BEGIN IMMEDIATE", "setting a regression status")))
		return rc;
	in_tx = true;
	if ((rc = prep(t, &st,
	               "UPDATE regressions SET status = ?1, assignee = coalesce(?2, assignee), updated = ?3 WHERE id = ?4",
	               "setting a regression status")))
		goto done;
	if ((rc = ev_tracker_bind_text(t, st, 1, status, "status")) ||
	    (rc = ev_tracker_bind_text(t, st, 2, assignee, "assignee")))
		goto done;
	sqlite3_bind_double(st, 3, ev_wall_time());
	sqlite3_bind_int64(st, 4, id);
	if ((rc = ev_tracker_step_done(t, st, "setting a regression status")))
		goto done;
	if (sqlite3_changes(t->db) == 0) {
		rc = ev_error_set(EV_E_NOTFOUND, "no regression %lld", (long long)id);
		goto done;
	}
	char *note = assignee ? ev_asprintf("set by hand; assignee %s", assignee) : NULL;
	rc = add_event(t, id, status, NULL, 0, note ? note : "set by hand");
	free(note);
	if (rc || (rc = ev_tracker_exec(t, "COMMIT", "setting a regression status")))
		goto done;
	in_tx = false;
done:
	sqlite3_finalize(st);
	if (in_tx)
		ev_tracker_exec(t, "ROLLBACK", "rolling back a regression status");
	return rc;
}
