/* feedback: regressions filed from comparisons: new with the broken
 * samples, fixed by a later good candidate, regressed when the drop comes
 * back (same id, history kept), stale candidates ignored, decisions made
 * by people kept, and the noise floor holding back a drop inside it. */
#include "tracker_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A run of `model` on suite `suite` with n samples s000..; the samples
 * whose index is < n_wrong score 0 (reason wrong_answer). */
static int64_t run_with(ev_tracker *t, const char *model, const char *suite, int n, int n_wrong)
{
	int64_t r = tf_run(t, model);
	char id[16];
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof id, "s%03d", i);
		tf_put(t, r, suite, id, 0, i < n_wrong ? 0 : 1, i < n_wrong ? "wrong_answer" : "", NULL);
	}
	return r;
}

static cJSON *file(ev_tracker *t, int64_t base, int64_t cand)
{
	char *json = NULL;
	if (ev_regressions_file(t, base, cand, NULL, &json) != 0)
		fail_msg("file: %s", ev_error_msg());
	cJSON *j = cJSON_Parse(json);
	free(json);
	return j;
}

/* The action for `suite` in a filing answer, or NULL. */
static const char *action(const cJSON *j, const char *suite, int64_t *id)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItem(j, "actions")) if (!strcmp(ev_json_str(a, "suite", ""), suite))
	{
		if (id)
			*id = (int64_t)ev_json_num(a, "regression_id", 0);
		return ev_json_str(a, "action", NULL);
	}
	return NULL;
}

static cJSON *show(ev_tracker *t, int64_t id)
{
	char *json = NULL;
	if (ev_regression_show_json(t, id, &json) != 0)
		fail_msg("show: %s", ev_error_msg());
	cJSON *j = cJSON_Parse(json);
	free(json);
	return j;
}

static void regression_is_filed_fixed_and_regressed_with_one_id(void **st)
{
	(void)st;
	char *path = tf_db_path("regress-life");
	ev_tracker *t = tf_open(path);
	int64_t base = run_with(t, "ckpt-100", "alpha", 40, 0);
	int64_t bad = run_with(t, "ckpt-200", "alpha", 40, 20);

	cJSON *j = file(t, base, bad);
	int64_t id = 0;
	assert_string_equal(action(j, "alpha", &id), "filed");
	assert_true(id > 0);
	cJSON_Delete(j);

	j = show(t, id);
	assert_string_equal(ev_json_str(j, "status", ""), "new");
	assert_string_equal(ev_json_str(j, "baseline_model", ""), "ckpt-100");
	assert_string_equal(ev_json_str(j, "candidate_model", ""), "ckpt-200");
	assert_float_equal(ev_json_num(j, "delta", 0), -0.5, 1e-12);
	assert_true(ev_json_num(j, "ci_high", 0) < 0);
	assert_true(ev_json_num(j, "p", 1) < 0.05);
	cJSON *samples = cJSON_GetObjectItem(j, "samples");
	assert_int_equal(cJSON_GetArraySize(samples), 20);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(samples, 0), "sample_id", ""), "s000");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(samples, 19), "sample_id", ""), "s019");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(samples, 0), "fingerprint", ""), "wrong_answer");
	cJSON_Delete(j);

	/* Filing the same pair again changes nothing but the figures. */
	j = file(t, base, bad);
	assert_string_equal(action(j, "alpha", NULL), "updated");
	cJSON_Delete(j);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM regressions"), 1);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM regression_events"), 1);

	/* A later good candidate fixes it. */
	int64_t good = run_with(t, "ckpt-300", "alpha", 40, 0);
	j = file(t, base, good);
	assert_string_equal(action(j, "alpha", NULL), "fixed");
	cJSON_Delete(j);
	j = show(t, id);
	assert_string_equal(ev_json_str(j, "status", ""), "fixed");
	assert_string_equal(ev_json_str(j, "fixed_in", ""), "ckpt-300");
	cJSON_Delete(j);

	/* The old bad candidate compared again is stale: nothing moves. */
	j = file(t, base, bad);
	assert_string_equal(action(j, "alpha", NULL), "kept");
	cJSON_Delete(j);

	/* A still later bad one: regressed, same id, broken samples renewed. */
	int64_t worse = run_with(t, "ckpt-400", "alpha", 40, 25);
	j = file(t, base, worse);
	int64_t id2 = 0;
	assert_string_equal(action(j, "alpha", &id2), "regressed");
	assert_int_equal(id2, id);
	cJSON_Delete(j);
	j = show(t, id);
	assert_string_equal(ev_json_str(j, "status", ""), "regressed");
	assert_string_equal(ev_json_str(j, "candidate_model", ""), "ckpt-400");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "samples")), 25);
	cJSON *ev = cJSON_GetObjectItem(j, "events");
	assert_int_equal(cJSON_GetArraySize(ev), 3);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 0), "status", ""), "new");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 1), "status", ""), "fixed");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 1), "model", ""), "ckpt-300");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 2), "status", ""), "regressed");
	cJSON_Delete(j);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM regressions"), 1);

	ev_tracker_close(t);
	free(path);
}

static void status_set_by_hand_is_validated_recorded_and_kept_by_filing(void **st)
{
	(void)st;
	char *path = tf_db_path("regress-status");
	ev_tracker *t = tf_open(path);
	int64_t base = run_with(t, "b", "alpha", 40, 0);
	int64_t bad = run_with(t, "c1", "alpha", 40, 20);
	cJSON *j = file(t, base, bad);
	int64_t id = 0;
	action(j, "alpha", &id);
	cJSON_Delete(j);

	assert_int_equal(ev_regression_set_status(t, id, "confirmed", "alice"), 0);
	assert_int_equal(ev_regression_set_status(t, id, "done", NULL), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "done"));
	assert_int_equal(ev_regression_set_status(t, 999, "fixed", NULL), EV_E_NOTFOUND);
	j = show(t, id);
	assert_string_equal(ev_json_str(j, "status", ""), "confirmed");
	assert_string_equal(ev_json_str(j, "assignee", ""), "alice");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "events")), 2);
	cJSON_Delete(j);

	/* wontfix: a later drop does not reopen it. */
	assert_int_equal(ev_regression_set_status(t, id, "wontfix", NULL), 0);
	int64_t bad2 = run_with(t, "c2", "alpha", 40, 22);
	j = file(t, base, bad2);
	assert_string_equal(action(j, "alpha", NULL), "kept");
	cJSON_Delete(j);
	j = show(t, id);
	assert_string_equal(ev_json_str(j, "status", ""), "wontfix");
	assert_string_equal(ev_json_str(j, "assignee", ""), "alice"); /* kept when not given */
	cJSON_Delete(j);

	char *list = NULL;
	assert_int_equal(ev_regressions_list_json(t, "wontfix", &list), 0);
	assert_non_null(strstr(list, "\"suite\":\"alpha\""));
	free(list);
	assert_int_equal(ev_regressions_list_json(t, "new", &list), 0);
	assert_null(strstr(list, "alpha"));
	free(list);
	assert_int_equal(ev_regressions_list_json(t, "bogus", &list), EV_E_INVALID);
	assert_int_equal(ev_regression_show_json(t, 12345, &list), EV_E_NOTFOUND);

	/* the same run on both sides is refused */
	assert_int_equal(ev_regressions_file(t, base, base, NULL, NULL), EV_E_INVALID);
	ev_tracker_close(t);
	free(path);
}

static void drop_inside_the_noise_floor_is_not_filed(void **st)
{
	(void)st;
	char *path = tf_db_path("regress-noise");
	ev_tracker *t = tf_open(path);
	/* 12 of 100 broken: p = 2^-11, CI below 0, and the observed MDE
	 * (2.8 * sqrt(0.1067 / 100) = 0.091) is under |delta| = 0.12: filed. */
	int64_t base = run_with(t, "b", "delta", 100, 0);
	int64_t cand = run_with(t, "c", "delta", 100, 12);
	ev_compare *c = NULL;
	assert_int_equal(ev_compare_runs(&c, t, base, cand, NULL), 0);
	assert_true(c->suites[0].mde < 0.12);
	assert_true(ev_compare_is_regression(&c->suites[0]));
	ev_compare_free(c);

	/* A calibration says this suite's score moves by sd 0.07 between
	 * identical runs: MDE = 2.8 * sqrt(2 * 0.005 * 100 / 100) = 0.28. */
	assert_int_equal(ev_tracker_flush(t), 0);
	tf_exec(path, "INSERT INTO calibrations(model, suite, suite_hash, repeats, n, variance, flip_rate_json, "
	              "run_ids, created) VALUES('b', 'delta', '', 5, 100, 0.005, NULL, '[]', 1.0)");
	cJSON *j = file(t, base, cand);
	assert_null(action(j, "delta", NULL));
	cJSON_Delete(j);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM regressions"), 0);
	assert_int_equal(ev_compare_runs(&c, t, base, cand, NULL), 0);
	assert_string_equal(c->suites[0].mde_source, "calibration");
	assert_float_equal(c->suites[0].mde, 0.28, 1e-9);
	ev_compare_free(c);
	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(regression_is_filed_fixed_and_regressed_with_one_id),
		cmocka_unit_test(status_set_by_hand_is_validated_recorded_and_kept_by_filing),
		cmocka_unit_test(drop_inside_the_noise_floor_is_not_filed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
