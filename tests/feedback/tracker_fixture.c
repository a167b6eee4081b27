/* Shared helpers of the feedback and reports tests (see tracker_fixture.h). */
#include "tracker_fixture.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

char *tf_db_path(const char *tag)
{
	char *dir = tu_tmpdir(tag);
	char *p = tu_path(dir, "evald.db");
	free(dir);
	return p;
}

ev_tracker *tf_open(const char *path)
{
	ev_tracker *t = NULL;
	if (ev_tracker_open(&t, path) != 0)
		fail_msg("open %s: %s", path, ev_error_msg());
	return t;
}

int64_t tf_run(ev_tracker *t, const char *model)
{
	ev_run_info info = {model, "/ckpt/" , "[{\"name\":\"alpha\"},{\"name\":\"beta\"}]", "{\"temperature\":0}", 1, 10, 0, NULL};
	int64_t id = 0;
	if (ev_tracker_run_create(t, &info, &id) != 0)
		fail_msg("run_create: %s", ev_error_msg());
	return id;
}

void tf_put(ev_tracker *t, int64_t run, const char *suite, const char *id, int epoch, double score,
            const char *reason, const char *extracted)
{
	ev_result r = {0};
	r.suite = suite;
	r.sample_id = id;
	r.epoch = epoch;
	r.request_hash = "00ff";
	r.response = extracted ? extracted : "";
	r.extracted = extracted;
	r.score = score;
	r.reason = reason;
	r.finish_reason = "stop";
	r.prompt_tokens = 10;
	r.completion_tokens = 5;
	r.latency_s = 0.25;
	r.attempts = 1;
	if (ev_tracker_result_put(t, run, &r) != 0)
		fail_msg("result_put %s/%s: %s", suite, id, ev_error_msg());
}

static sqlite3_stmt *query(sqlite3 **db, const char *path, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_busy_timeout(*db, 5000);
	if (sqlite3_prepare_v2(*db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

long tf_query_long(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = query(&db, path, sql);
	long v = st ? (long)sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

char *tf_query_text(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = query(&db, path, sql);
	char *v = st ? ev_strdup((const char *)sqlite3_column_text(st, 0)) : NULL;
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

void tf_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *err = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", err ? err : sqlite3_errmsg(db));
		sqlite3_free(err);
		sqlite3_close(db);
		fail_msg("%s: %s: %s", path, sql, msg);
	}
	sqlite3_close(db);
}
