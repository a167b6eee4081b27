/* feedback: run rows: create, get, list (newest first), status changes,
 * summaries, and the models they name. */
#include "tracker_fixture.h"

#include <stdlib.h>
#include <string.h>

static void run_create_and_get_round_trip(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-get");
	ev_tracker *t = tf_open(path);
	ev_run_info info = {"ckpt-7", "/models/ckpt-7", "[{\"name\":\"gsm8k\",\"n\":3}]", "{\"seed\":1}", 2, 6, 0, NULL};
	int64_t id = 0;
	double before = ev_wall_time();
	assert_int_equal(ev_tracker_run_create(t, &info, &id), 0);
	assert_true(id > 0);

	ev_run_row r;
	assert_int_equal(ev_tracker_run_get(t, id, &r), 0);
	assert_int_equal(r.id, id);
	assert_string_equal(r.model, "ckpt-7");
	assert_string_equal(r.model_source, "/models/ckpt-7");
	assert_string_equal(r.suites_json, info.suites_json);
	assert_string_equal(r.config_json, info.config_json);
	assert_string_equal(r.status, "running");
	assert_null(r.summary_json);
	assert_true(r.created >= before - 1 && r.created <= ev_wall_time() + 1);
	assert_true(r.finished == 0);
	assert_int_equal(r.epochs, 2);
	assert_int_equal(r.n_planned, 6);
	assert_int_equal(r.n_results, 0);
	ev_run_row_clear(&r);
	assert_null(r.model);
	ev_run_row_clear(NULL);

	assert_int_equal(ev_tracker_run_get(t, id + 100, &r), EV_E_NOTFOUND);
	ev_tracker_close(t);
	free(path);
}

static void runs_list_is_newest_first_and_shares_models(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-list");
	ev_tracker *t = tf_open(path);
	int64_t a = tf_run(t, "m1");
	int64_t b = tf_run(t, "m2");
	int64_t c = tf_run(t, "m1");

	ev_run_row *rows = NULL;
	size_t n = 0;
	assert_int_equal(ev_tracker_runs_list(t, &rows, &n, 0), 0);
	assert_int_equal(n, 3);
	assert_int_equal(rows[0].id, c);
	assert_int_equal(rows[1].id, b);
	assert_int_equal(rows[2].id, a);
	assert_string_equal(rows[0].model, "m1");
	assert_string_equal(rows[1].model, "m2");
	ev_run_rows_free(rows, n);

	assert_int_equal(ev_tracker_runs_list(t, &rows, &n, 1), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].id, c);
	ev_run_rows_free(rows, n);
	ev_run_rows_free(NULL, 0);

	/* Run rows are durable at once: another connection sees them. */
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM runs"), 3);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM models"), 2);
	ev_tracker_close(t);
	free(path);
}

static void status_changes_stamp_and_clear_finished(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-status");
	ev_tracker *t = tf_open(path);
	int64_t id = tf_run(t, "m");
	ev_run_row r;

	assert_int_equal(ev_tracker_run_set_status(t, id, "interrupted"), 0);
	assert_int_equal(ev_tracker_run_get(t, id, &r), 0);
	assert_string_equal(r.status, "interrupted");
	assert_true(r.finished > 0);
	ev_run_row_clear(&r);

	assert_int_equal(ev_tracker_run_set_status(t, id, "running"), 0); /* resumed */
	assert_int_equal(ev_tracker_run_get(t, id, &r), 0);
	assert_string_equal(r.status, "running");
	assert_true(r.finished == 0);
	ev_run_row_clear(&r);

	assert_int_equal(ev_tracker_run_set_status(t, id, "finished"), 0);
	char *st = tf_query_text(path, "SELECT status FROM runs");
	assert_string_equal(st, "finished");
	free(st);

	assert_int_equal(ev_tracker_run_set_status(t, id, "done"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "done"));
	assert_int_equal(ev_tracker_run_set_status(t, id, NULL), EV_E_INVALID);
	assert_int_equal(ev_tracker_run_set_status(t, id + 1, "failed"), EV_E_NOTFOUND);
	ev_tracker_close(t);
	free(path);
}

static void summary_is_validated_and_stored(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-summary");
	ev_tracker *t = tf_open(path);
	int64_t id = tf_run(t, "m");
	assert_int_equal(ev_tracker_run_set_summary(t, id, "{\"suites\": ["), EV_E_PARSE);
	assert_int_equal(ev_tracker_run_set_summary(t, id, "{\"suites\":[]}"), 0);
	ev_run_row r;
	assert_int_equal(ev_tracker_run_get(t, id, &r), 0);
	assert_string_equal(r.summary_json, "{\"suites\":[]}");
	ev_run_row_clear(&r);
	assert_int_equal(ev_tracker_run_set_summary(t, id + 9, "{}"), EV_E_NOTFOUND);
	ev_tracker_close(t);
	free(path);
}

static void run_create_rejects_bad_info(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-bad");
	ev_tracker *t = tf_open(path);
	int64_t id = 0;
	ev_run_info none = {NULL, NULL, NULL, NULL, 1, 0, 0, NULL};
	assert_int_equal(ev_tracker_run_create(t, &none, &id), EV_E_INVALID);
	ev_run_info bad_json = {"m", NULL, "[{", NULL, 1, 0, 0, NULL};
	assert_int_equal(ev_tracker_run_create(t, &bad_json, &id), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "suites_json"));
	ev_run_info neg = {"m", NULL, NULL, NULL, -1, 0, 0, NULL};
	assert_int_equal(ev_tracker_run_create(t, &neg, &id), EV_E_INVALID);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM runs"), 0);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM models"), 0);
	ev_tracker_close(t);
	free(path);
}

static void n_results_counts_pending_results(void **state)
{
	(void)state;
	char *path = tf_db_path("runs-count");
	ev_tracker *t = tf_open(path);
	int64_t id = tf_run(t, "m");
	tf_put(t, id, "alpha", "1", 0, 1, "", "x");
	tf_put(t, id, "alpha", "2", 0, 1, "", "x");
	tf_put(t, id, "alpha", "2", 0, 0, "wrong_answer", "y"); /* replaces */
	ev_run_row r;
	assert_int_equal(ev_tracker_run_get(t, id, &r), 0);
	assert_int_equal(r.n_results, 2);
	ev_run_row_clear(&r);
	/* Reading the run committed them. */
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM results"), 2);
	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(run_create_and_get_round_trip),
		cmocka_unit_test(runs_list_is_newest_first_and_shares_models),
		cmocka_unit_test(status_changes_stamp_and_clear_finished),
		cmocka_unit_test(summary_is_validated_and_stored),
		cmocka_unit_test(run_create_rejects_bad_info),
		cmocka_unit_test(n_results_counts_pending_results),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
