/*
 * feedback/tracker.c: opening and closing the tracker, SQLite error
 * translation, the prepared-statement cache and the group commit.
 *
 * Group commit: writes that arrive in bulk (results, cache entries, rescores)
 * join one open IMMEDIATE transaction, committed at the 512th write, when the
 * oldest is older than EV_TRACKER_COMMIT_S (checked on each such write and on
 * ev_tracker_tick), before anything reads results or changes a run row, and at
 * flush/close. WAL with synchronous=NORMAL keeps the file consistent if the
 * process dies: only the open transaction is lost.
 */
#include "feedback/feedback_int.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ev_tracker_sqlerr(ev_tracker *t, int sqlite_rc, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	int code = EV_E_DB;
	if (sqlite_rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		code = EV_E_NOTFOUND;
	else if ((sqlite_rc & 0xff) == SQLITE_TOOBIG)
		code = EV_E_LIMIT;
	const char *msg = t && t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(sqlite_rc);
	if (t && t->readonly && (sqlite_rc & 0xff) == SQLITE_READONLY)
		msg = "the tracker is read-only for this process (its file, folder or file system): nothing was written";
	return ev_error_set(code, "%s: %s: %s", t && t->path ? t->path : "tracker", what, msg);
}

int ev_tracker_exec(ev_tracker *t, const char *sql, const char *what)
{
	int rc = sqlite3_exec(t->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : ev_tracker_sqlerr(t, rc, "%s", what);
}

int ev_tracker_stmt(ev_tracker *t, sqlite3_stmt **out, const char *sql)
{
	*out = NULL;
	for (size_t i = 0; i < t->n_stmts; i++) {
		if (t->stmts[i].sql == sql || strcmp(t->stmts[i].sql, sql) == 0) {
			*out = t->stmts[i].stmt;
			return 0;
		}
	}
	if (t->n_stmts == EV_TRACKER_STMT_MAX)
		return ev_error_set(EV_E_INTERNAL, "tracker: more than %d cached statements", EV_TRACKER_STMT_MAX);
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v3(t->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
	if (rc != SQLITE_OK)
		return ev_tracker_sqlerr(t, rc, "preparing \"%.60s\"", sql);
	t->stmts[t->n_stmts].sql = sql;
	t->stmts[t->n_stmts].stmt = st;
	t->n_stmts++;
	*out = st;
	return 0;
}

void ev_tracker_stmt_done(sqlite3_stmt *st)
{
	if (!st)
		return;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

int ev_tracker_bind_text(ev_tracker *t, sqlite3_stmt *st, int idx, const char *s, const char *field)
{
	int rc;
	if (!s) {
		rc = sqlite3_bind_null(st, idx);
	} else {
		size_t n = strlen(s);
		if (n > EV_TRACKER_MAX_TEXT)
			return ev_error_set(EV_E_LIMIT, "%s: %s: %zu bytes, over the %zu-byte limit", t->path, field, n,
			                    EV_TRACKER_MAX_TEXT);
		rc = sqlite3_bind_text(st, idx, s, (int)n, SQLITE_STATIC);
	}
	return rc == SQLITE_OK ? 0 : ev_tracker_sqlerr(t, rc, "binding %s", field);
}

/* ---- group commit ---------------------------------------------------------- */

int ev_tracker_group_write(ev_tracker *t)
{
	if (!t->in_tx) {
		int rc = ev_tracker_exec(t, "BEGIN IMMEDIATE", "starting a write transaction");
		if (rc)
			return rc;
		t->in_tx = true;
		t->pending = 0;
		t->oldest = ev_now();
	}
	t->pending++;
	return 0;
}

int ev_tracker_group_after(ev_tracker *t)
{
	if (!t->in_tx)
		return 0;
	if (t->pending >= EV_TRACKER_GROUP_MAX || ev_now() - t->oldest >= EV_TRACKER_COMMIT_S)
		return ev_tracker_flush(t);
	return 0;
}

int ev_tracker_flush(ev_tracker *t)
{
	if (!t || !t->in_tx)
		return 0;
	int rc = sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
	if (rc == SQLITE_OK) {
		t->in_tx = false;
		t->pending = 0;
		return 0;
	}
	int err = ev_tracker_sqlerr(t, rc, "committing %ld pending writes", t->pending);
	if (sqlite3_get_autocommit(t->db)) {
		/* SQLite rolled the transaction back itself (disk full, I/O):
		 * remembered, so that no caller can go on as if they were kept. */
		t->lost += t->pending;
		snprintf(t->lost_why, sizeof t->lost_why, "%s", ev_error_msg());
		t->in_tx = false;
		t->pending = 0;
		ev_error_wrap(err, "the pending writes were lost");
	}
	/* Otherwise (busy) the transaction stays open and the next flush retries. */
	return err;
}

long ev_tracker_lost_writes(ev_tracker *t, const char **why)
{
	if (why)
		*why = t && t->lost ? t->lost_why : "";
	return t ? t->lost : 0;
}

int ev_tracker_tick(ev_tracker *t)
{
	if (!t)
		return 0;
	return ev_tracker_group_after(t);
}

/* ---- open and close ---------------------------------------------------------- */

/* Runs a one-value statement into out; errors say "cannot open tracker (what)". */
static int query_text(ev_tracker *t, const char *sql, const char *what, char *out, size_t outsz)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(t->db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, rc, "cannot open tracker (%s)", what);
		sqlite3_finalize(st);
		return rc;
	}
	out[0] = 0;
	if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(out, outsz, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return 0;
}

/* A SQLite failure that says this process cannot write the file. */
static bool write_refused(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_READONLY || rc == SQLITE_CANTOPEN || rc == SQLITE_PERM || rc == SQLITE_AUTH;
}

/* The read-only way in: plainly, or, for a WAL database whose folder does
 * not let SQLite make or open its -shm file (SQLITE_READONLY_CANTINIT,
 * CANTOPEN), as an immutable file: nothing writes a file nobody may write.
 * Reads the schema to prove it works. */
static int open_readonly(ev_tracker *t)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (t->db) {
			sqlite3_close(t->db);
			t->db = NULL;
		}
		int src;
		if (attempt == 0) {
			src = sqlite3_open_v2(t->path, &t->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
		} else {
			ev_buf uri = EV_BUF_INIT(16 * 1024);
			ev_buf_puts(&uri, "file:");
			for (const unsigned char *c = (const unsigned char *)t->path; *c; c++) {
				if (*c == '%' || *c == '?' || *c == '#' || *c <= ' ' || *c >= 0x7f)
					ev_buf_printf(&uri, "%%%02X", *c);
				else
					ev_buf_append(&uri, c, 1);
			}
			ev_buf_puts(&uri, "?immutable=1");
			src = uri.data ? sqlite3_open_v2(uri.data, &t->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
			                                 NULL)
			               : SQLITE_NOMEM;
			ev_buf_free(&uri);
		}
		char n[32];
		if (src == SQLITE_OK) {
			sqlite3_extended_result_codes(t->db, 1);
			sqlite3_busy_timeout(t->db, 5000);
			if (query_text(t, "SELECT count(*) FROM sqlite_schema", "reading the schema", n, sizeof n) == 0)
				return 0;
			src = sqlite3_errcode(t->db);
		}
		if (attempt == 1) {
			t->readonly = false; /* the message names SQLite's reason, not ours */
			return ev_tracker_sqlerr(t, src, "cannot open tracker (read-only)");
		}
	}
	return 0;
}

bool ev_tracker_readonly(const ev_tracker *t) { return t && t->readonly; }

int ev_tracker_open(ev_tracker **out, const char *path)
{
	ev_tracker *t = NULL;
	char mode[32];
	int rc = 0;

	*out = NULL;
	if (!path || !*path)
		return ev_error_set(EV_E_INVALID, "tracker: empty database path");
	t = calloc(1, sizeof *t);
	if (!t || !(t->path = ev_strdup(path))) {
		rc = ev_error_set(EV_E_NOMEM, "tracker: out of memory");
		goto done;
	}
	/* A new tracker is the user's alone (0600): it holds prompts, answers
	 * and reports. SQLite gives its -wal and -shm files the same mode. */
	if (strcmp(path, ":memory:") != 0 && !ev_str_starts(path, "file:")) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0)
			close(fd);
	}
	int src = sqlite3_open_v2(path, &t->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	bool file_exists = strcmp(path, ":memory:") != 0 && !ev_str_starts(path, "file:") && access(path, F_OK) == 0;
	if (src != SQLITE_OK && !(file_exists && write_refused(src))) {
		rc = ev_tracker_sqlerr(t, src, "cannot open tracker");
		goto done;
	}
	if (src == SQLITE_OK) {
		sqlite3_extended_result_codes(t->db, 1);
		sqlite3_busy_timeout(t->db, 5000);
		/* The first statement reads the header: a file that is not a database fails here. */
		rc = query_text(t, "PRAGMA journal_mode=WAL", "journal_mode", mode, sizeof mode);
		src = rc ? sqlite3_extended_errcode(t->db) : SQLITE_OK;
		if (rc && !(file_exists && write_refused(src)))
			goto done;
	}
	if (src != SQLITE_OK) {
		/* A tracker this process may read but not write: read it. */
		ev_error_clear();
		t->readonly = true;
		if ((rc = open_readonly(t)))
			goto done;
		int version = 0;
		if ((rc = ev_schema_version(t->db, path, &version)))
			goto done;
		if (version != ev_schema_latest()) {
			rc = version > ev_schema_latest()
			         ? ev_error_set(EV_E_UNSUPPORTED,
			                        "%s: tracker schema version %d is newer than this evald knows (%d): use a newer evald",
			                        path, version, ev_schema_latest())
			         : ev_error_set(EV_E_UNSAFE,
			                        "%s: the tracker is read-only here and at schema version %d, older than this "
			                        "evald's %d: open it once where it can be written to upgrade it",
			                        path, version, ev_schema_latest());
			goto done;
		}
		t->schema_version = version;
		ev_log_debug("%s: opened read-only (this process cannot write it)", path);
		*out = t;
		return 0;
	}
	if (strcmp(mode, "wal") != 0 && strcmp(path, ":memory:") != 0 && !ev_str_starts(path, "file::memory:"))
		ev_log_warn("%s: journal mode is %s, not wal (the file system may not support WAL)", path, mode);
	if ((rc = ev_tracker_exec(t, "PRAGMA synchronous=NORMAL", "cannot open tracker (synchronous)")) ||
	    (rc = ev_tracker_exec(t, "PRAGMA foreign_keys=ON", "cannot open tracker (foreign_keys)")) ||
	    (rc = ev_tracker_exec(t, "PRAGMA cache_size=-16384", "cannot open tracker (cache_size)")) ||
	    /* Checkpoint every 32 MiB of WAL instead of 4: a fifth of the fsyncs
	     * during bulk ingest; the file is cut back to 64 MiB after each. */
	    (rc = ev_tracker_exec(t, "PRAGMA wal_autocheckpoint=8192", "cannot open tracker (wal_autocheckpoint)")) ||
	    (rc = ev_tracker_exec(t, "PRAGMA journal_size_limit=67108864", "cannot open tracker (journal_size_limit)")))
		goto done;
	/* Reads the whole schema: a damaged first page fails here, clearly, rather
	 * than at the first query. (user_version lives in the header, so the
	 * migration check alone would not notice.) */
	if ((rc = query_text(t, "SELECT count(*) FROM sqlite_schema", "reading the schema", mode, sizeof mode)))
		goto done;
	if ((rc = ev_schema_migrate(t->db, path, &t->schema_version)))
		goto done;
	*out = t;
	t = NULL;
done:
	ev_tracker_close(t);
	return rc;
}

void ev_tracker_close(ev_tracker *t)
{
	if (!t)
		return;
	if (t->in_tx && ev_tracker_flush(t) != 0)
		ev_log_error("%s", ev_error_msg());
	for (size_t i = 0; i < t->n_stmts; i++)
		sqlite3_finalize(t->stmts[i].stmt);
	if (t->db && sqlite3_close(t->db) != SQLITE_OK)
		ev_log_warn("%s: close: %s", t->path, sqlite3_errmsg(t->db));
	free(t->path);
	free(t);
}

int ev_tracker_schema_version(ev_tracker *t) { return t ? t->schema_version : 0; }

struct sqlite3 *ev_tracker_db(ev_tracker *t) { return t ? t->db : NULL; }

int ev_tracker_prepare(ev_tracker *t, sqlite3_stmt **out, const char *sql)
{
	*out = NULL;
	int rc = sqlite3_prepare_v2(t->db, sql, -1, out, NULL);
	return rc == SQLITE_OK ? 0 : ev_tracker_sqlerr(t, rc, "preparing \"%.60s\"", sql);
}

int ev_tracker_step_done(ev_tracker *t, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	return ev_tracker_sqlerr(t, rc, "%s", what);
}
