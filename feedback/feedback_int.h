/*
 * feedback/feedback_int.h: what the files of feedback/ share.
 *
 * The tracker handle, the prepared-statement cache, the group transaction,
 * translation of SQLite errors, and the schema migration list. Not for use
 * outside feedback/ (and its tests).
 */
#ifndef EV_FEEDBACK_INT_H
#define EV_FEEDBACK_INT_H

#include <sqlite3.h>

#include "feedback/feedback.h"

/* Pending results that force a commit without waiting for a tick. */
#define EV_TRACKER_GROUP_MAX 512
/* Prepared statements kept on one handle. */
#define EV_TRACKER_STMT_MAX 64
/* Largest text field stored (a response, a request body, a summary). */
#define EV_TRACKER_MAX_TEXT ((size_t)64 << 20)

typedef struct {
	const char *sql; /* the caller's string (a literal): compared by pointer, then text */
	sqlite3_stmt *stmt;
} ev_tracker_stmt_slot;

struct ev_tracker {
	sqlite3 *db;
	char *path;
	int schema_version;
	/* group commit: a write transaction is open while in_tx */
	bool in_tx;
	long pending;  /* writes in the open transaction */
	double oldest; /* ev_now() of the first of them */
	ev_tracker_stmt_slot stmts[EV_TRACKER_STMT_MAX];
	size_t n_stmts;
	/* writes rolled back by failed commits (disk full, I/O), and why */
	long lost;
	char lost_why[256];
	bool readonly; /* opened read-only: this process cannot write the file */
};

/* Translates a SQLite failure into EV_E_DB (EV_E_NOTFOUND for a foreign key
 * violation, EV_E_LIMIT for SQLITE_TOOBIG), with the tracker's path, what was
 * being done, and SQLite's own message. Returns the ev_status. */
int ev_tracker_sqlerr(ev_tracker *t, int sqlite_rc, const char *fmt, ...) EV_PRINTF(3, 4);

/* A prepared statement for `sql`, kept on the handle and reused; it comes
 * back reset with no bindings. The caller steps it and must call
 * ev_tracker_stmt_done when finished with it (even on error), so that no
 * read snapshot is held. `sql` should be a string literal: its address is the
 * fast key. Statements that a callback could re-enter (iteration) should be
 * prepared privately instead. */
int ev_tracker_stmt(ev_tracker *t, sqlite3_stmt **out, const char *sql);
void ev_tracker_stmt_done(sqlite3_stmt *st);
/* Binds text (NULL binds SQL NULL) without copying; fails with EV_E_LIMIT
 * past EV_TRACKER_MAX_TEXT, naming `field`. */
int ev_tracker_bind_text(ev_tracker *t, sqlite3_stmt *st, int idx, const char *s, const char *field);

/* The group transaction. ev_tracker_group_write opens it when needed and
 * counts one pending write; the write itself is then done by the caller,
 * which calls ev_tracker_group_after to commit when the batch is full or old.
 * Writes that must be durable on their own (run rows, status) call
 * ev_tracker_flush first and run in autocommit mode. */
int ev_tracker_group_write(ev_tracker *t);
int ev_tracker_group_after(ev_tracker *t);

/* The one way to a statement that is not cached on the handle (statements
 * a callback could re-enter, or run a few times per command): prepared
 * privately and finalised by the caller. Errors name the SQL. */
int ev_tracker_prepare(ev_tracker *t, sqlite3_stmt **out, const char *sql);
/* Steps a statement that returns no rows (or whose rows are not wanted):
 * 0, or the error naming `what`. */
int ev_tracker_step_done(ev_tracker *t, sqlite3_stmt *st, const char *what);
/* The underlying connection (tests of feedback/ only). */
struct sqlite3 *ev_tracker_db(ev_tracker *t);

/* Runs SQL without results (BEGIN, COMMIT, PRAGMA ... = ...). */
int ev_tracker_exec(ev_tracker *t, const char *sql, const char *what);

/* ---- schema (schema.c) ---------------------------------------------------- */

/* One forward migration: the SQL that takes the schema from version - 1 to
 * `version`. The list is in schema.c; steps are only ever appended. */
typedef struct {
	int version;
	const char *name;
	const char *sql;
} ev_migration;

/* The version the code knows: the last step's. */
int ev_schema_latest(void);

/* Brings the database at `path` (for messages) to the latest version:
 * reads PRAGMA user_version, refuses a newer one (EV_E_UNSUPPORTED), and
 * applies the missing steps in order inside one IMMEDIATE transaction,
 * setting user_version after each; any failure rolls everything back and
 * names the step. *out_version is the version after. */
int ev_schema_migrate(sqlite3 *db, const char *path, int *out_version);
/* The file's schema version (PRAGMA user_version), changing nothing. */
int ev_schema_version(sqlite3 *db, const char *path, int *out);
/* The same with a given list (tests use it to pin the mechanism). */
int ev_schema_migrate_steps(sqlite3 *db, const char *path, const ev_migration *steps, size_t n_steps,
                            int *out_version);

#endif
