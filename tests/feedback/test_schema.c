/* feedback: schema versions and forward migrations: an older file is
 * upgraded step by step in one transaction, a failed step leaves it as it
 * was, and a newer file is refused. */
#include "tracker_fixture.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "feedback/feedback_int.h"

static void version0_file_is_migrated_and_keeps_its_data(void **state)
{
	(void)state;
	char *path = tf_db_path("schema-v0");
	/* A "v0" file: user_version 0, none of the tracker's tables. */
	tf_exec(path, "CREATE TABLE notes(x TEXT); INSERT INTO notes VALUES('kept'); PRAGMA user_version = 0;");
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), 0);

	ev_tracker *t = tf_open(path);
	assert_int_equal(ev_tracker_schema_version(t), ev_schema_latest());
	ev_tracker_close(t);
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), ev_schema_latest());
	const char *tables[] = {"models", "runs", "results", "cache"};
	for (size_t i = 0; i < 4; i++) {
		char *q = ev_asprintf("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '%s'", tables[i]);
		assert_int_equal(tf_query_long(path, q), 1);
		free(q);
	}
	char *kept = tf_query_text(path, "SELECT x FROM notes");
	assert_non_null(kept);
	assert_string_equal(kept, "kept");
	free(kept);
	free(path);
}

static void newer_version_is_refused_and_left_alone(void **state)
{
	(void)state;
	char *path = tf_db_path("schema-future");
	int future = ev_schema_latest() + 1;
	char *sql = ev_asprintf("CREATE TABLE x(y); PRAGMA user_version = %d;", future);
	tf_exec(path, sql);
	free(sql);

	ev_tracker *t = NULL;
	assert_int_equal(ev_tracker_open(&t, path), EV_E_UNSUPPORTED);
	assert_null(t);
	assert_non_null(strstr(ev_error_msg(), path));
	assert_non_null(strstr(ev_error_msg(), "newer"));
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), future);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'runs'"), 0);
	free(path);
}

static const ev_migration steps_ok[] = {
	{1, "one", "CREATE TABLE a(x);"},
	{2, "two", "CREATE TABLE b(x); INSERT INTO b VALUES(2);"},
	{3, "three", "ALTER TABLE a ADD COLUMN y DEFAULT 3;"},
};

static const ev_migration steps_bad[] = {
	{1, "one", "CREATE TABLE a(x);"},
	{2, "two", "CREATE TABLE b(x);"},
	{3, "broken", "CREATE TABLE c(x); THIS IS NOT SQL;"},
};

static sqlite3 *raw_open(const char *path)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	return db;
}

static void older_version_upgrades_step_by_step(void **state)
{
	(void)state;
	char *path = tf_db_path("schema-steps");
	sqlite3 *db = raw_open(path);
	int v = -1;
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_ok, 1, &v), 0);
	assert_int_equal(v, 1);
	/* From 1 to 3: step 1 is not run again (it would fail: table a exists). */
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_ok, 3, &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), 3);
	assert_int_equal(tf_query_long(path, "SELECT x FROM b"), 2);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM pragma_table_info('a') WHERE name = 'y'"), 1);
	/* Up to date: nothing happens. */
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_ok, 3, &v), 0);
	assert_int_equal(v, 3);
	/* The code knows only 2 steps now: the file is newer. */
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_ok, 2, &v), EV_E_UNSUPPORTED);
	sqlite3_close(db);
	free(path);
}

static void failed_step_rolls_back_every_step(void **state)
{
	(void)state;
	char *path = tf_db_path("schema-rollback");
	sqlite3 *db = raw_open(path);
	int v = -1;
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_bad, 1, &v), 0);
	assert_int_equal(ev_schema_migrate_steps(db, path, steps_bad, 3, &v), EV_E_DB);
	assert_non_null(strstr(ev_error_msg(), "migration 3"));
	assert_non_null(strstr(ev_error_msg(), "broken"));
	assert_non_null(strstr(ev_error_msg(), path));
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), 1);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM sqlite_schema WHERE name IN ('b', 'c')"), 0);
	assert_true(sqlite3_get_autocommit(db)); /* no transaction left open */
	sqlite3_close(db);
	free(path);
}

static void misnumbered_steps_are_an_internal_error(void **state)
{
	(void)state;
	static const ev_migration gap[] = {{1, "one", "SELECT 1;"}, {3, "three", "SELECT 1;"}};
	char *path = tf_db_path("schema-gap");
	sqlite3 *db = raw_open(path);
	int v = -1;
	assert_int_equal(ev_schema_migrate_steps(db, path, gap, 2, &v), EV_E_INTERNAL);
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), 0);
	sqlite3_close(db);
	free(path);
}

static void results_table_has_the_current_columns(void **state)
{
	(void)state;
	char *path = tf_db_path("schema-columns");
	ev_tracker_close(tf_open(path));
	const char *want = "run_id,suite,sample_id,epoch,request_hash,request_json,response,tool_calls_json,extracted,"
	                   "score,reason,detail,finish_reason,prompt_tokens,completion_tokens,latency_s,attempts,"
	                   "cached,created,metadata_json,target_json,prompt_hash,thinking_tokens,answered_by,agents_json"; /* 4, 6-10 */
	char *got = tf_query_text(path, "SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_table_info("
	                                "'results') ORDER BY cid)");
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
	/* The key is (run_id, suite, sample_id, epoch). */
	got = tf_query_text(path, "SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_table_info('results') "
	                          "WHERE pk > 0 ORDER BY pk)");
	assert_non_null(got);
	assert_string_equal(got, "run_id,suite,sample_id,epoch");
	free(got);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(version0_file_is_migrated_and_keeps_its_data),
		cmocka_unit_test(newer_version_is_refused_and_left_alone),
		cmocka_unit_test(older_version_upgrades_step_by_step),
		cmocka_unit_test(failed_step_rolls_back_every_step),
		cmocka_unit_test(misnumbered_steps_are_an_internal_error),
		cmocka_unit_test(results_table_has_the_current_columns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
