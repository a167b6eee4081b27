/* feedback: opening, creating and reopening the tracker; its pragmas; and
 * clear errors for files that are not trackers. */
#include "tracker_fixture.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feedback/feedback_int.h"

static long pragma_long(ev_tracker *t, const char *sql)
{
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(ev_tracker_db(t), sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	long v = (long)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void open_creates_file_in_wal_mode_with_pragmas(void **state)
{
	(void)state;
	char *path = tf_db_path("open-create");
	struct stat sb;
	assert_int_not_equal(stat(path, &sb), 0);
	ev_tracker *t = tf_open(path);
	assert_int_equal(stat(path, &sb), 0);

	char *mode = tf_query_text(path, "PRAGMA journal_mode");
	assert_non_null(mode);
	assert_string_equal(mode, "wal");
	free(mode);
	assert_int_equal(pragma_long(t, "PRAGMA foreign_keys"), 1);
	assert_int_equal(pragma_long(t, "PRAGMA synchronous"), 1); /* NORMAL */
	assert_int_equal(pragma_long(t, "PRAGMA busy_timeout"), 5000);

	assert_int_equal(ev_tracker_schema_version(t), ev_schema_latest());
	assert_true(ev_schema_latest() >= 1);
	assert_int_equal(tf_query_long(path, "PRAGMA user_version"), ev_schema_latest());
	ev_tracker_close(t);
	free(path);
}

static void reopen_keeps_runs_and_results(void **state)
{
	(void)state;
	char *path = tf_db_path("open-reopen");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-a");
	tf_put(t, run, "alpha", "s1", 0, 1.0, "", "42");
	tf_put(t, run, "alpha", "s2", 0, 0.0, "wrong_answer", "41");
	ev_tracker_close(t); /* commits the pending results */

	t = tf_open(path);
	assert_int_equal(ev_tracker_schema_version(t), ev_schema_latest());
	ev_run_row row;
	assert_int_equal(ev_tracker_run_get(t, run, &row), 0);
	assert_string_equal(row.model, "model-a");
	assert_int_equal(row.n_results, 2);
	ev_run_row_clear(&row);
	ev_tracker_close(t);
	free(path);
}

static void random_bytes_file_gives_clear_error(void **state)
{
	(void)state;
	char *path = tf_db_path("open-garbage");
	ev_rng rng;
	ev_rng_seed(&rng, 7);
	char junk[65536];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (char)ev_rng_next(&rng);
	assert_int_equal(ev_file_write(path, junk, sizeof junk), 0);

	ev_tracker *t = (ev_tracker *)0x1;
	int rc = ev_tracker_open(&t, path);
	assert_int_equal(rc, EV_E_DB);
	assert_null(t);
	assert_non_null(strstr(ev_error_msg(), path));
	assert_non_null(strstr(ev_error_msg(), "not a database"));
	free(path);
}

static void corrupted_schema_page_gives_clear_error(void **state)
{
	(void)state;
	char *path = tf_db_path("open-corrupt");
	ev_tracker *t = tf_open(path);
	tf_run(t, "model-a");
	ev_tracker_close(t);
	/* Fold the WAL into the file, then overwrite page 1 after its 100-byte
	 * header: the header still says "SQLite", the schema is garbage. */
	tf_exec(path, "PRAGMA wal_checkpoint(TRUNCATE)");
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&data, &len, path, 1 << 24), 0);
	assert_true(len >= 4096);
	ev_rng rng;
	ev_rng_seed(&rng, 11);
	for (size_t i = 100; i < 4096; i++)
		data[i] = (char)ev_rng_next(&rng);
	assert_int_equal(ev_file_write(path, data, len), 0);
	free(data);
	char *wal = ev_asprintf("%s-wal", path);
	unlink(wal);
	free(wal);

	t = NULL;
	int rc = ev_tracker_open(&t, path);
	assert_int_not_equal(rc, 0);
	assert_null(t);
	assert_non_null(strstr(ev_error_msg(), path));
	print_message("corrupted file: %s\n", ev_error_msg());
	free(path);
}

static void missing_folder_and_empty_path_are_errors(void **state)
{
	(void)state;
	ev_tracker *t = NULL;
	const char *p = "/nonexistent-evald-dir/sub/evald.db";
	assert_int_equal(ev_tracker_open(&t, p), EV_E_DB);
	assert_null(t);
	assert_non_null(strstr(ev_error_msg(), p));
	assert_int_equal(ev_tracker_open(&t, ""), EV_E_INVALID);
	assert_null(t);
	ev_tracker_close(NULL); /* accepts NULL */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(open_creates_file_in_wal_mode_with_pragmas),
		cmocka_unit_test(reopen_keeps_runs_and_results),
		cmocka_unit_test(random_bytes_file_gives_clear_error),
		cmocka_unit_test(corrupted_schema_page_gives_clear_error),
		cmocka_unit_test(missing_folder_and_empty_path_are_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
