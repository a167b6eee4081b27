/*
 * feedback/watch.c: the checkpoint watcher's state (table watch_checkpoints,
 * schema step 5), and the baseline lookup it needs.
 *
 * Every write is durable on its own (the pending result group is committed
 * first, then autocommit), because the watcher's restart logic trusts what
 * this table says after a crash.
 */
#include "feedback/feedback_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const STATES[] = {"seen", "complete", "running", "evaluated", "failed"};

/* Longest path and name stored: bounded like any other input. */
#define WATCH_MAX_PATH 4096
#define WATCH_MAX_DETAIL 4096

bool ev_watch_state_valid(const char *state)
{
	for (size_t i = 0; i < sizeof STATES / sizeof STATES[0]; i++)
		if (state && !strcmp(state, STATES[i]))
			return true;
	return false;
}

static int check_path(const char *path, const char *name)
{
	if (!path || !*path || strlen(path) > WATCH_MAX_PATH)
		return ev_error_set(EV_E_INVALID, "watch: path: missing or longer than %d bytes", WATCH_MAX_PATH);
	if (name && (!*name || strlen(name) > WATCH_MAX_PATH))
		return ev_error_set(EV_E_INVALID, "watch: %s: name: empty or longer than %d bytes", path, WATCH_MAX_PATH);
	return 0;
}

int ev_watch_note(ev_tracker *t, const char *path, const char *name, bool *out_new)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if (out_new)
		*out_new = false;
	if ((rc = check_path(path, name ? name : "")))
		return rc;
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "INSERT INTO watch_checkpoints(path, name, state, created, updated) "
	                                  "VALUES(?1, ?2, 'seen', ?3, ?3) ON CONFLICT(path) DO NOTHING")))
		return rc;
	sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, ev_wall_time());
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "recording checkpoint %s", path);
	else if (out_new)
		*out_new = sqlite3_changes(t->db) > 0;
	ev_tracker_stmt_done(st);
	return rc;
}

int ev_watch_set(ev_tracker *t, const char *path, const char *state, int64_t run_id, const char *detail)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if ((rc = check_path(path, NULL)))
		return rc;
	if (!ev_watch_state_valid(state))
		return ev_error_set(EV_E_INVALID,
		                    "watch: %s: state \"%s\": expected seen, complete, running, evaluated or failed", path,
		                    state ? state : "(null)");
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE watch_checkpoints SET state = ?1, "
	                                  "run_id = CASE WHEN ?2 > 0 THEN ?2 WHEN ?2 < 0 THEN NULL ELSE run_id END, "
	                                  "detail = ?3, updated = ?4 WHERE path = ?5")))
		return rc;
	/* A detail is a log line, not data: cut it rather than refuse it. */
	char *cut = detail && strlen(detail) > WATCH_MAX_DETAIL ? ev_strndup(detail, WATCH_MAX_DETAIL) : NULL;
	sqlite3_bind_text(st, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, run_id);
	sqlite3_bind_text(st, 3, cut ? cut : detail, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 4, ev_wall_time());
	sqlite3_bind_text(st, 5, path, -1, SQLITE_STATIC);
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "setting checkpoint %s to %s", path, state);
	else if (sqlite3_changes(t->db) == 0)
		rc = ev_error_set(EV_E_NOTFOUND, "watch: no checkpoint %s in the tracker", path);
	ev_tracker_stmt_done(st);
	free(cut);
	return rc;
}

int ev_watch_set_compare(ev_tracker *t, const char *path, const char *compare_json)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if ((rc = check_path(path, NULL)))
		return rc;
	if (compare_json) {
		cJSON *j = NULL;
		if (strlen(compare_json) > EV_TRACKER_MAX_TEXT)
			return ev_error_set(EV_E_LIMIT, "watch: %s: compare_json over %zu bytes", path, EV_TRACKER_MAX_TEXT);
		if ((rc = ev_json_parse(&j, compare_json, strlen(compare_json), "watch: compare_json")))
			return rc;
		cJSON_Delete(j);
	}
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE watch_checkpoints SET compare_json = ?1, updated = ?2 WHERE path = ?3")))
		return rc;
	sqlite3_bind_text(st, 1, compare_json, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 2, ev_wall_time());
	sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "storing the comparison of %s", path);
	else if (sqlite3_changes(t->db) == 0)
		rc = ev_error_set(EV_E_NOTFOUND, "watch: no checkpoint %s in the tracker", path);
	ev_tracker_stmt_done(st);
	return rc;
}

void ev_watch_row_clear(ev_watch_row *r)
{
	if (!r)
		return;
	free(r->path);
	free(r->name);
	free(r->state);
	free(r->compare_json);
	free(r->detail);
	memset(r, 0, sizeof *r);
}

void ev_watch_rows_free(ev_watch_row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++)
		ev_watch_row_clear(&rows[i]);
	free(rows);
}

static char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);
	return s ? ev_strdup((const char *)s) : NULL;
}

#define ROW_COLUMNS "path, name, state, COALESCE(run_id, 0), compare_json, detail, created, updated"

static int row_read(sqlite3_stmt *st, ev_watch_row *r)
{
	memset(r, 0, sizeof *r);
	r->path = col_text(st, 0);
	r->name = col_text(st, 1);
	r->state = col_text(st, 2);
	r->run_id = sqlite3_column_int64(st, 3);
	r->compare_json = col_text(st, 4);
	r->detail = col_text(st, 5);
	r->created = sqlite3_column_double(st, 6);
	r->updated = sqlite3_column_double(st, 7);
	if (!r->path || !r->name || !r->state ||
	    (sqlite3_column_type(st, 4) != SQLITE_NULL && !r->compare_json) ||
	    (sqlite3_column_type(st, 5) != SQLITE_NULL && !r->detail)) {
		ev_watch_row_clear(r);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

int ev_watch_get(ev_tracker *t, const char *path, ev_watch_row *out)
{
	sqlite3_stmt *st = NULL;
	int rc;
	memset(out, 0, sizeof *out);
	if ((rc = check_path(path, NULL)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "SELECT " ROW_COLUMNS " FROM watch_checkpoints WHERE path = ?1")))
		return rc;
	sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		rc = row_read(st, out);
	else if (src == SQLITE_DONE)
		rc = ev_error_set(EV_E_NOTFOUND, "watch: no checkpoint %s in the tracker", path);
	else
		rc = ev_tracker_sqlerr(t, src, "reading checkpoint %s", path);
	ev_tracker_stmt_done(st);
	return rc;
}

int ev_watch_list(ev_tracker *t, ev_watch_row **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	ev_watch_row *rows = NULL;
	size_t len = 0, cap = 0;
	int rc;
	*out = NULL;
	*n = 0;
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "SELECT " ROW_COLUMNS " FROM watch_checkpoints ORDER BY created, path")))
		return rc;
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (EV_GROW(rows, cap, len + 1)) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if ((rc = row_read(st, &rows[len])))
			goto done;
		len++;
	}
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "listing checkpoints");
done:
	ev_tracker_stmt_done(st);
	if (rc) {
		ev_watch_rows_free(rows, len);
		return rc;
	}
	*out = rows;
	*n = len;
	return 0;
}

int ev_watch_list_json(ev_tracker *t, char **out_json)
{
	ev_watch_row *rows = NULL;
	size_t n = 0;
	int rc;
	*out_json = NULL;
	if ((rc = ev_watch_list(t, &rows, &n)))
		return rc;
	cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "checkpoints");
	for (size_t i = 0; i < n && arr; i++) {
		const ev_watch_row *r = &rows[i];
		cJSON *o = cJSON_CreateObject();
		char c[32], u[32];
		ev_iso8601(c, r->created);
		ev_iso8601(u, r->updated);
		cJSON_AddStringToObject(o, "path", r->path);
		cJSON_AddStringToObject(o, "name", r->name);
		cJSON_AddStringToObject(o, "state", r->state);
		cJSON_AddNumberToObject(o, "run_id", (double)r->run_id);
		cJSON *cmp = r->compare_json ? cJSON_Parse(r->compare_json) : NULL;
		cJSON_AddItemToObject(o, "compare", cmp ? cmp : cJSON_CreateNull());
		if (r->detail)
			cJSON_AddStringToObject(o, "detail", r->detail);
		else
			cJSON_AddNullToObject(o, "detail");
		cJSON_AddStringToObject(o, "created", c);
		cJSON_AddStringToObject(o, "updated", u);
		cJSON_AddItemToArray(arr, o);
	}
	*out_json = ev_json_print(root);
	cJSON_Delete(root);
	ev_watch_rows_free(rows, n);
	return *out_json ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* True when the run's suites_json names exactly the suites given (as sets). */
static bool same_suites(const char *suites_json, const char *const *suites, size_t n)
{
	cJSON *j = suites_json ? cJSON_Parse(suites_json) : NULL;
	bool ok = cJSON_IsArray(j) && (size_t)cJSON_GetArraySize(j) == n;
	for (size_t i = 0; ok && i < n; i++) {
		bool found = false;
		const cJSON *s;
		cJSON_ArrayForEach(s, j) if (!strcmp(ev_json_str(s, "name", ""), suites[i])) found = true;
		ok = found;
	}
	/* And each of the run's suites is among those given (duplicates aside). */
	const cJSON *s;
	const cJSON *each = ok ? j : NULL;
	cJSON_ArrayForEach(s, each)
	{
		bool found = false;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(ev_json_str(s, "name", ""), suites[i]))
				found = true;
		ok = ok && found;
	}
	cJSON_Delete(j);
	return ok;
}

int ev_watch_baseline_run(ev_tracker *t, const char *model, const char *const *suites, size_t n_suites,
                          int64_t exclude, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc;
	*out = 0;
	if (!model || !*model)
		return ev_error_set(EV_E_INVALID, "watch: baseline: no model name");
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "SELECT runs.id, runs.suites_json FROM runs JOIN models ON models.id = "
	                                  "runs.model_id WHERE models.name = ?1 AND runs.status = 'finished' "
	                                  "ORDER BY runs.created DESC, runs.id DESC")))
		return rc;
	sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (sqlite3_column_int64(st, 0) == exclude)
			continue; /* the candidate itself, served under the baseline's name */
		if (same_suites((const char *)sqlite3_column_text(st, 1), suites, n_suites)) {
			*out = sqlite3_column_int64(st, 0);
			break;
		}
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "looking up the baseline runs of %s", model);
	else if (!*out)
		rc = ev_error_set(EV_E_NOTFOUND, "watch: model %s has no finished run on the same suites", model);
	ev_tracker_stmt_done(st);
	return rc;
}
