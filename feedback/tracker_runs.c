/*
 * feedback/tracker_runs.c: run rows (and the models they name).
 *
 * Run rows change rarely and must be durable on their own, so each change
 * first commits the pending group (see tracker.c) and then runs in autocommit
 * mode. Reading a run also commits first, so that n_results counts every
 * result handed to the tracker.
 */
#include "feedback/feedback_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const STATUSES[] = {"running", "finished", "finished_with_errors", "failed", "interrupted"};

bool ev_run_status_complete(const char *status)
{
	return status && (!strcmp(status, "finished") || !strcmp(status, "finished_with_errors"));
}

static bool status_known(const char *s)
{
	for (size_t i = 0; i < sizeof STATUSES / sizeof STATUSES[0]; i++)
		if (s && strcmp(s, STATUSES[i]) == 0)
			return true;
	return false;
}

/* Checks that text meant to be JSON is JSON (NULL is allowed). */
static int check_json(ev_tracker *t, const char *text, const char *field)
{
	if (!text)
		return 0;
	size_t n = strlen(text);
	if (n > EV_TRACKER_MAX_TEXT)
		return ev_error_set(EV_E_LIMIT, "%s: %s: %zu bytes, over the %zu-byte limit", t->path, field, n,
		                    EV_TRACKER_MAX_TEXT);
	cJSON *j = NULL;
	int rc = ev_json_parse(&j, text, n, field);
	cJSON_Delete(j);
	return rc;
}

static int model_id(ev_tracker *t, const char *name, const char *source, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_stmt(t, &st, "INSERT INTO models(name, source, created) VALUES(?1, ?2, ?3) "
	                                 "ON CONFLICT(name) DO NOTHING");
	if (rc)
		return rc;
	if (!(rc = ev_tracker_bind_text(t, st, 1, name, "model")) &&
	    !(rc = ev_tracker_bind_text(t, st, 2, source, "model_source"))) {
		sqlite3_bind_double(st, 3, ev_wall_time());
		int src = sqlite3_step(st);
		if (src != SQLITE_DONE)
			rc = ev_tracker_sqlerr(t, src, "adding model %s", name);
	}
	ev_tracker_stmt_done(st);
	if (rc)
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "SELECT id FROM models WHERE name = ?1")))
		return rc;
	if (!(rc = ev_tracker_bind_text(t, st, 1, name, "model"))) {
		int src = sqlite3_step(st);
		if (src == SQLITE_ROW)
			*out = sqlite3_column_int64(st, 0);
		else
			rc = ev_tracker_sqlerr(t, src, "looking model %s up", name);
	}
	ev_tracker_stmt_done(st);
	return rc;
}

int ev_tracker_run_create(ev_tracker *t, const ev_run_info *info, int64_t *out_id)
{
	sqlite3_stmt *st = NULL;
	int64_t mid = 0;
	int rc;

	if (!info || !info->model || !*info->model)
		return ev_error_set(EV_E_INVALID, "run: model: missing");
	if (info->epochs < 0 || info->n_planned < 0)
		return ev_error_set(EV_E_INVALID, "run: epochs (%d) and n_planned (%ld) must not be negative",
		                    info->epochs, info->n_planned);
	if ((rc = check_json(t, info->suites_json, "run: suites_json")) ||
	    (rc = check_json(t, info->config_json, "run: config_json")))
		return rc;
	if (info->id < 0 || (info->client_key && (!*info->client_key || strlen(info->client_key) > 128)))
		return ev_error_set(EV_E_INVALID, "run: id %lld or client key (1 to 128 bytes)", (long long)info->id);
	if ((rc = ev_tracker_flush(t)))
		return rc;
	/* Model and run together, so a failure leaves no orphan model. */
	if ((rc = ev_tracker_exec(t, "BEGIN IMMEDIATE", "creating a run")))
		return rc;
	if (info->client_key) { /* created before under this key: that run */
		if ((rc = ev_tracker_stmt(t, &st, "SELECT id FROM runs WHERE client_key = ?1")))
			goto done;
		sqlite3_bind_text(st, 1, info->client_key, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW) {
			if (out_id)
				*out_id = sqlite3_column_int64(st, 0);
			ev_tracker_stmt_done(st);
			st = NULL;
			ev_tracker_exec(t, "COMMIT", "creating a run");
			return 0;
		}
		ev_tracker_stmt_done(st);
		st = NULL;
	}
	if ((rc = model_id(t, info->model, info->model_source, &mid)))
		goto done;
	if ((rc = ev_tracker_stmt(t, &st, "INSERT INTO runs(model_id, model_source, suites_json, config_json, status, "
	                                  "created, epochs, n_planned, id, client_key) "
	                                  "VALUES(?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9)")))
		goto done;
	if (info->id > 0)
		sqlite3_bind_int64(st, 8, info->id);
	else
		sqlite3_bind_null(st, 8);
	if (info->client_key)
		sqlite3_bind_text(st, 9, info->client_key, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 9);
	sqlite3_bind_int64(st, 1, mid);
	if ((rc = ev_tracker_bind_text(t, st, 2, info->model_source, "run: model_source")) ||
	    (rc = ev_tracker_bind_text(t, st, 3, info->suites_json, "run: suites_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 4, info->config_json, "run: config_json")))
		goto done;
	sqlite3_bind_double(st, 5, ev_wall_time());
	sqlite3_bind_int(st, 6, info->epochs > 0 ? info->epochs : 1);
	sqlite3_bind_int64(st, 7, info->n_planned);
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "creating a run of %s", info->model);
		goto done;
	}
	if (out_id)
		*out_id = sqlite3_last_insert_rowid(t->db);
	rc = ev_tracker_exec(t, "COMMIT", "creating a run");
done:
	ev_tracker_stmt_done(st);
	if (rc && !sqlite3_get_autocommit(t->db))
		sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Runs a one-row UPDATE of run `run_id`; EV_E_NOTFOUND when no row changed. */
static int run_update(ev_tracker *t, int64_t run_id, sqlite3_stmt *st, const char *what)
{
	int src = sqlite3_step(st);
	int rc = 0;
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "run %lld: %s", (long long)run_id, what);
	else if (sqlite3_changes(t->db) == 0)
		rc = ev_error_set(EV_E_NOTFOUND, "%s: run %lld: no such run", t->path, (long long)run_id);
	ev_tracker_stmt_done(st);
	return rc;
}

int ev_tracker_run_set_status(ev_tracker *t, int64_t run_id, const char *status)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if (!status_known(status))
		return ev_error_set(EV_E_INVALID, "run %lld: status \"%s\": expected running, finished, finished_with_errors, failed or interrupted",
		                    (long long)run_id, status ? status : "(null)");
	if ((rc = ev_tracker_flush(t)))
		return rc;
	/* Leaving "running" stamps the end time; going back (resume) clears it. */
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE runs SET status = ?1, "
	                                  "finished = CASE WHEN ?1 = 'running' THEN 0 ELSE ?2 END WHERE id = ?3")))
		return rc;
	sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 2, ev_wall_time());
	sqlite3_bind_int64(st, 3, run_id);
	return run_update(t, run_id, st, "setting status");
}

int ev_tracker_run_set_summary(ev_tracker *t, int64_t run_id, const char *summary_json)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if ((rc = check_json(t, summary_json, "run: summary_json")))
		return rc;
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE runs SET summary_json = ?1 WHERE id = ?2")))
		return rc;
	if ((rc = ev_tracker_bind_text(t, st, 1, summary_json, "run: summary_json"))) {
		ev_tracker_stmt_done(st);
		return rc;
	}
	sqlite3_bind_int64(st, 2, run_id);
	return run_update(t, run_id, st, "setting the summary");
}

#define RUN_COLUMNS                                                                                                    \
	"SELECT r.id, m.name, r.model_source, r.suites_json, r.config_json, r.status, r.summary_json, r.created, "         \
	"r.finished, r.epochs, r.n_planned, (SELECT count(*) FROM results x WHERE x.run_id = r.id) "                   \
	"FROM runs r JOIN models m ON m.id = r.model_id "

/* A copy of text column i (NULL for SQL NULL); sets *oom when a copy fails. */
static char *col_dup(sqlite3_stmt *st, int i, bool *oom)
{
	const unsigned char *s = sqlite3_column_text(st, i);
	if (!s)
		return NULL;
	char *d = ev_strdup((const char *)s);
	if (!d)
		*oom = true;
	return d;
}

static int row_read(sqlite3_stmt *st, ev_run_row *r)
{
	bool oom = false;
	memset(r, 0, sizeof *r);
	r->id = sqlite3_column_int64(st, 0);
	r->model = col_dup(st, 1, &oom);
	r->model_source = col_dup(st, 2, &oom);
	r->suites_json = col_dup(st, 3, &oom);
	r->config_json = col_dup(st, 4, &oom);
	r->status = col_dup(st, 5, &oom);
	r->summary_json = col_dup(st, 6, &oom);
	r->created = sqlite3_column_double(st, 7);
	r->finished = sqlite3_column_double(st, 8);
	r->epochs = sqlite3_column_int(st, 9);
	r->n_planned = (long)sqlite3_column_int64(st, 10);
	r->n_results = (long)sqlite3_column_int64(st, 11);
	/* Callers may rely on these two being set, even in a hand-edited file. */
	if (!oom && !r->model)
		oom = !(r->model = ev_strdup(""));
	if (!oom && !r->status)
		oom = !(r->status = ev_strdup(""));
	if (oom) {
		ev_run_row_clear(r);
		return ev_error_set(EV_E_NOMEM, "run row: out of memory");
	}
	return 0;
}

int ev_tracker_run_get(ev_tracker *t, int64_t run_id, ev_run_row *out)
{
	sqlite3_stmt *st = NULL;
	int rc;
	memset(out, 0, sizeof *out);
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, RUN_COLUMNS "WHERE r.id = ?1")))
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		rc = row_read(st, out);
	else if (src == SQLITE_DONE)
		rc = ev_error_set(EV_E_NOTFOUND, "%s: run %lld: no such run", t->path, (long long)run_id);
	else
		rc = ev_tracker_sqlerr(t, src, "reading run %lld", (long long)run_id);
	ev_tracker_stmt_done(st);
	return rc;
}

int ev_tracker_runs_list(ev_tracker *t, ev_run_row **out, size_t *n, int limit)
{
	sqlite3_stmt *st = NULL;
	ev_run_row *rows = NULL;
	size_t len = 0, cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, RUN_COLUMNS "ORDER BY r.created DESC, r.id DESC LIMIT ?1")))
		return rc;
	sqlite3_bind_int64(st, 1, limit > 0 ? limit : -1);
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (EV_GROW(rows, cap, len + 1)) {
			rc = ev_error_set(EV_E_NOMEM, "listing runs: out of memory");
			goto done;
		}
		if ((rc = row_read(st, &rows[len])))
			goto done;
		len++;
	}
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "listing runs");
done:
	ev_tracker_stmt_done(st);
	if (rc) {
		ev_run_rows_free(rows, len);
		return rc;
	}
	*out = rows;
	*n = len;
	return 0;
}

void ev_run_row_clear(ev_run_row *r)
{
	if (!r)
		return;
	free(r->model);
	free(r->model_source);
	free(r->suites_json);
	free(r->config_json);
	free(r->status);
	free(r->summary_json);
	memset(r, 0, sizeof *r);
}

void ev_run_rows_free(ev_run_row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++)
		ev_run_row_clear(&rows[i]);
	free(rows);
}
