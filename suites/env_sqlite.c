/*
 * env_sqlite.c: the "sqlite" tool environment, an in-memory SQLite
 * database seeded by the task's SQL.
 *
 * Spec: {"type":"sqlite","setup":"CREATE TABLE ...; INSERT ...;",
 * "allow_write":false}. Tools: query(sql): one SELECT (or WITH ... SELECT),
 * rows as JSON objects, at most 100; execute(sql): one INSERT, UPDATE or
 * DELETE, only when the task grants allow_write. Permissions are enforced
 * by sqlite3_set_authorizer, not by reading the SQL: the query authorizer
 * allows reading only, the execute one adds row changes; schema changes,
 * ATTACH, PRAGMA, transactions and random() are refused for both. A
 * progress handler stops any statement after a bounded amount of work.
 * State: {"tables":{"name":[{"col":value,...},...]}} every table in name
 * order, rows in rowid order (primary key order for WITHOUT ROWID).
 */
#include "suites/env_int.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 100
#define MAX_STATE_ROWS 10000
#define MAX_SQL ((size_t)64 << 10)
#define MAX_SETUP ((size_t)4 << 20)
/* Progress handler: called every 1000 VM steps; stop past this many calls
 * (about 20 million steps, well under a second). */
#define MAX_PROGRESS_CALLS 20000

typedef enum { MODE_SETUP, MODE_READ, MODE_WRITE } mode;

typedef struct {
	sqlite3 *db;
	bool allow_write;
	mode mode;
	int progress;
	char denied[160];
} sq;

static int authorize(void *ud, int action, const char *a, const char *b, const char *c, const char *d)
{
	(void)b;
	(void)c;
	(void)d;
	sq *s = ud;
	if (s->mode == MODE_SETUP)
		return SQLITE_OK;
	switch (action) {
	case SQLITE_SELECT:
	case SQLITE_READ:
	case SQLITE_RECURSIVE:
		return SQLITE_OK;
	case SQLITE_FUNCTION:
		/* Answers must not depend on the run: no random numbers. */
		if (b && (!sqlite3_stricmp(b, "random") || !sqlite3_stricmp(b, "randomblob") ||
		          !sqlite3_stricmp(b, "load_extension"))) {
			snprintf(s->denied, sizeof s->denied, "function %s() is not allowed", b);
			return SQLITE_DENY;
		}
		return SQLITE_OK;
	case SQLITE_INSERT:
	case SQLITE_UPDATE:
	case SQLITE_DELETE:
		if (s->mode == MODE_WRITE && a && sqlite3_strnicmp(a, "sqlite_", 7))
			return SQLITE_OK;
		snprintf(s->denied, sizeof s->denied, "%s",
		         s->mode == MODE_WRITE ? "writing to a system table is not allowed"
		                               : "query is read-only: use execute to change data");
		return SQLITE_DENY;
	default:
		snprintf(s->denied, sizeof s->denied, "%s",
		         "only SELECT (query) and INSERT, UPDATE, DELETE (execute) are allowed");
		return SQLITE_DENY;
	}
}

static int on_progress(void *ud)
{
	sq *s = ud;
	return ++s->progress > MAX_PROGRESS_CALLS;
}

static void sq_destroy(void *self)
{
	sq *s = self;
	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}

static int sq_create(void **self, const cJSON *spec, const char *what)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, spec) {
		if (strcmp(f->string, "type") && strcmp(f->string, "setup") && strcmp(f->string, "allow_write"))
			return ev_error_set(EV_E_INVALID, "%s.%.64s: unknown field (setup, allow_write)", what, f->string);
	}
	const cJSON *aw = cJSON_GetObjectItemCaseSensitive(spec, "allow_write");
	if (aw && !cJSON_IsBool(aw))
		return ev_error_set(EV_E_INVALID, "%s.allow_write: expected true or false", what);
	const cJSON *setup = cJSON_GetObjectItemCaseSensitive(spec, "setup");
	if (setup && !cJSON_IsString(setup))
		return ev_error_set(EV_E_INVALID, "%s.setup: expected SQL text", what);
	if (setup && strlen(setup->valuestring) > MAX_SETUP)
		return ev_error_set(EV_E_LIMIT, "%s.setup: over %zu bytes", what, MAX_SETUP);
	sq *s = calloc(1, sizeof *s);
	if (!s)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	s->allow_write = cJSON_IsTrue(aw);
	int rc = 0;
	char *msg = NULL;
	if (sqlite3_open_v2(":memory:", &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		rc = ev_error_set(EV_E_NOMEM, "%s: cannot open an in-memory database", what);
		goto done;
	}
	sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, 1 << 20);
	sqlite3_limit(s->db, SQLITE_LIMIT_SQL_LENGTH, (int)MAX_SETUP);
	sqlite3_limit(s->db, SQLITE_LIMIT_ATTACHED, 0);
	sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
	sqlite3_progress_handler(s->db, 1000, on_progress, s);
	s->mode = MODE_SETUP;
	if (setup && sqlite3_exec(s->db, setup->valuestring, NULL, NULL, &msg) != SQLITE_OK) {
		rc = ev_error_set(EV_E_INVALID, "%s.setup: %s", what, msg ? msg : sqlite3_errmsg(s->db));
		goto done;
	}
	sqlite3_limit(s->db, SQLITE_LIMIT_SQL_LENGTH, (int)MAX_SQL);
	sqlite3_set_authorizer(s->db, authorize, s);
	s->mode = MODE_READ;
done:
	sqlite3_free(msg);
	if (rc) {
		sq_destroy(s);
		return rc;
	}
	*self = s;
	return 0;
}

static cJSON *sq_tools(const void *self)
{
	(void)self;
	cJSON *a = cJSON_CreateArray();
	const char *sql = "{\"sql\":{\"type\":\"string\",\"description\":\"one SQL statement\"}}";
	if (!a ||
	    !ev_env_tool_add(a, "query", "Run one read-only SQL SELECT and return up to 100 rows as objects.", sql,
	                     "[\"sql\"]") ||
	    !ev_env_tool_add(a, "execute",
	                     "Run one SQL INSERT, UPDATE or DELETE (only when the task allows writing); returns the "
	                     "number of rows changed.",
	                     sql, "[\"sql\"]")) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

/* One column value as JSON; NULL on no memory. */
static cJSON *column(sqlite3_stmt *st, int i)
{
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER: {
		sqlite3_int64 v = sqlite3_column_int64(st, i);
		/* Past 2^53 a double loses digits: keep those as text. */
		if (v > 9007199254740992LL || v < -9007199254740992LL) {
			char buf[32];
			snprintf(buf, sizeof buf, "%lld", (long long)v);
			return cJSON_CreateString(buf);
		}
		return cJSON_CreateNumber((double)v);
	}
	case SQLITE_FLOAT:
		return cJSON_CreateNumber(sqlite3_column_double(st, i));
	case SQLITE_TEXT:
		return cJSON_CreateString((const char *)sqlite3_column_text(st, i));
	case SQLITE_BLOB: {
		static const char hex[] = "0123456789abcdef";
		int n = sqlite3_column_bytes(st, i);
		const unsigned char *p = sqlite3_column_blob(st, i);
		char *t = malloc((size_t)n * 2 + 1);
		if (!t)
			return NULL;
		for (int k = 0; k < n; k++) {
			t[2 * k] = hex[p[k] >> 4];
			t[2 * k + 1] = hex[p[k] & 15];
		}
		t[2 * n] = 0;
		cJSON *s = cJSON_CreateString(t);
		free(t);
		return s;
	}
	default:
		return cJSON_CreateNull();
	}
}

/* Steps a prepared statement, collecting up to max_rows rows into *rows.
 * Returns the sqlite result (SQLITE_DONE on success); *more is set when
 * rows were left out; -1 on no memory. */
static int collect(sqlite3_stmt *st, cJSON *rows, int max_rows, bool *more)
{
	int n = 0, rc;
	*more = false;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n++ >= max_rows) {
			*more = true;
			return SQLITE_DONE;
		}
		cJSON *row = cJSON_CreateObject();
		if (!row)
			return -1;
		cJSON_AddItemToArray(rows, row);
		int nc = sqlite3_column_count(st);
		for (int i = 0; i < nc; i++) {
			cJSON *v = column(st, i);
			const char *name = sqlite3_column_name(st, i);
			if (!v || !name) {
				cJSON_Delete(v);
				return -1;
			}
			/* Duplicate column names (a join): the first one wins. */
			if (cJSON_GetObjectItemCaseSensitive(row, name))
				cJSON_Delete(v);
			else
				cJSON_AddItemToObject(row, name, v);
		}
	}
	return rc;
}

static int sq_exec(void *self, const char *name, const cJSON *args, cJSON **result)
{
	sq *s = self;
	static const char *const known[] = {"sql", NULL};
	cJSON *err = ev_env_check_args(args, known);
	const char *sql = err ? NULL : ev_env_arg_str(args, "sql", true, &err);
	if (err) {
		*result = err;
		return 0;
	}
	bool write = !strcmp(name, "execute");
	if (write && !s->allow_write) {
		*result = ev_env_error("permission denied: this task does not allow changing the database");
		return 0;
	}
	if (strlen(sql) > MAX_SQL) {
		*result = ev_env_error("sql: longer than %zu bytes", MAX_SQL);
		return 0;
	}
	s->mode = write ? MODE_WRITE : MODE_READ;
	s->denied[0] = 0;
	s->progress = 0;
	sqlite3_stmt *st = NULL;
	const char *tail = NULL;
	cJSON *o = NULL, *rows = NULL;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, &tail);
	if (rc != SQLITE_OK) {
		*result = s->denied[0] ? ev_env_error("refused: %s", s->denied) : ev_env_error("%s", sqlite3_errmsg(s->db));
		goto done;
	}
	if (!st) {
		*result = ev_env_error("sql: no statement");
		goto done;
	}
	while (tail && (*tail == ' ' || *tail == ';' || *tail == '\n' || *tail == '\t' || *tail == '\r'))
		tail++;
	if (tail && *tail) {
		*result = ev_env_error("sql: one statement at a time");
		goto done;
	}
	if (!write && !sqlite3_stmt_readonly(st)) {
		*result = ev_env_error("refused: query is read-only: use execute to change data");
		goto done;
	}
	if (write && sqlite3_stmt_readonly(st)) {
		*result = ev_env_error("execute changes data: use query for a SELECT");
		goto done;
	}
	if (!(o = cJSON_CreateObject()) || !(rows = cJSON_CreateArray()))
		goto nomem;
	bool more = false;
	rc = collect(st, rows, write ? 0 : MAX_ROWS, &more);
	if (rc < 0)
		goto nomem;
	if (rc != SQLITE_DONE) {
		*result = rc == SQLITE_INTERRUPT ? ev_env_error("the statement ran too long and was stopped")
		                                 : ev_env_error("%s", sqlite3_errmsg(s->db));
		goto done;
	}
	if (write) {
		if (!cJSON_AddNumberToObject(o, "changes", sqlite3_changes(s->db)))
			goto nomem;
	} else {
		int n = cJSON_GetArraySize(rows);
		cJSON_AddItemToObject(o, "rows", rows);
		rows = NULL;
		if (!cJSON_AddNumberToObject(o, "row_count", n) || !cJSON_AddBoolToObject(o, "truncated", more))
			goto nomem;
	}
	*result = o;
	o = NULL;
	goto done;
nomem:
	sqlite3_finalize(st);
	cJSON_Delete(o);
	cJSON_Delete(rows);
	s->mode = MODE_READ;
	return ev_error_set(EV_E_NOMEM, "out of memory");
done:
	sqlite3_finalize(st);
	cJSON_Delete(o);
	cJSON_Delete(rows);
	s->mode = MODE_READ;
	return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static cJSON *sq_state(const void *self)
{
	sq *s = (sq *)self; /* the mode changes for the duration of the call */
	cJSON *out = cJSON_CreateObject(), *tables = out ? cJSON_AddObjectToObject(out, "tables") : NULL;
	sqlite3_stmt *names = NULL;
	if (!tables)
		goto fail;
	s->mode = MODE_SETUP;
	if (sqlite3_prepare_v2(s->db,
	                       "SELECT name, sql LIKE '%WITHOUT ROWID%' FROM sqlite_master "
	                       "WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
	                       -1, &names, NULL) != SQLITE_OK)
		goto fail;
	while (sqlite3_step(names) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(names, 0);
		bool no_rowid = sqlite3_column_int(names, 1) != 0;
		cJSON *rows = cJSON_AddArrayToObject(tables, t);
		/* The name comes from the schema; quote it as an identifier. */
		char *q = sqlite3_mprintf(no_rowid ? "SELECT * FROM \"%w\"" : "SELECT * FROM \"%w\" ORDER BY rowid", t);
		sqlite3_stmt *st = NULL;
		bool more;
		s->progress = 0;
		int rc = q && rows ? sqlite3_prepare_v2(s->db, q, -1, &st, NULL) : SQLITE_NOMEM;
		sqlite3_free(q);
		if (rc == SQLITE_OK)
			rc = collect(st, rows, MAX_STATE_ROWS, &more);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			goto fail;
	}
	sqlite3_finalize(names);
	s->mode = MODE_READ;
	return out;
fail:
	sqlite3_finalize(names);
	s->mode = MODE_READ;
	cJSON_Delete(out);
	return NULL;
}

const ev_env_kind ev_env_kind_sqlite = {"sqlite", sq_create, sq_tools, sq_exec, sq_state, sq_destroy};
