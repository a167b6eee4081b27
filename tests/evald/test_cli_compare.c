/* evald compare, regressions and calibrate end to end against two fixture
 * servers: a good one (echoes the prompt, so every answer holds its
 * target) and a bad one whose table answers 40 of suite A's 60 samples
 * wrongly (three kinds of failure) and suite B like the good one. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static tu_server good, bad;
static char *dir, *db, *suite_a, *suite_b;
static int n_runs;

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("cli-compare");
	db = tu_path(dir, "evald.db");
	ev_buf a = EV_BUF_INIT(1 << 20), b = EV_BUF_INIT(1 << 20), table = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 60; i++)
		ev_buf_printf(&a, "{\"id\":\"a%02d\",\"input\":\"Question A%02d: say tokA%02d.\",\"target\":\"tokA%02d\"}\n", i,
		              i, i, i);
	for (int i = 0; i < 30; i++)
		ev_buf_printf(&b, "{\"id\":\"b%02d\",\"input\":\"Question B%02d: say tokB%02d.\",\"target\":\"tokB%02d\"}\n", i,
		              i, i, i);
	/* a00..a29 plainly wrong, a30..a34 cut at max_tokens, a35..a39 lost in
	 * an unclosed <think>. */
	for (int i = 0; i < 40; i++) {
		if (i < 30)
			ev_buf_printf(&table, "{\"match\":\"Question A%02d:\",\"reply\":\"no idea\"}\n", i);
		else if (i < 35)
			ev_buf_printf(&table,
			              "{\"match\":\"Question A%02d:\",\"reply\":\"Let me see, the word\",\"finish_reason\":\"length\"}\n",
			              i);
		else
			ev_buf_printf(&table, "{\"match\":\"Question A%02d:\",\"reply\":\"<think>which token was it\"}\n", i);
	}
	suite_a = tu_write(dir, "A.jsonl", a.data);
	suite_b = tu_write(dir, "B.jsonl", b.data);
	char *tpath = tu_write(dir, "bad.jsonl", table.data);
	ev_buf_free(&a);
	ev_buf_free(&b);
	ev_buf_free(&table);
	const char *none[] = {NULL};
	const char *args[] = {"--table", tpath, NULL};
	int rc = tu_server_start(&good, none) || tu_server_start(&bad, args) ? -1 : 0;
	free(tpath);
	return rc;
}

static int teardown(void **st)
{
	(void)st;
	tu_server_stop(&good);
	tu_server_stop(&bad);
	free(suite_a);
	free(suite_b);
	free(db);
	free(dir);
	return 0;
}

static cJSON *parse_or_fail(const char *text)
{
	cJSON *j = cJSON_Parse(text ? text : "");
	if (!j)
		fail_msg("not JSON: %s", text ? text : "(null)");
	return j;
}

/* Runs `evald run` of `model` against `srv` on both suites; returns the run id. */
static int64_t run_model(const tu_server *srv, const char *model)
{
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "-q", "run", "--model", srv->url, "--model-name", model, "--suite",
	                      suite_a, "--suite", suite_b, "--concurrency", "16", "--no-cache", "--json", NULL};
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc != 0)
		fail_msg("run %s: exit %d: %s", model, rc, err);
	cJSON *j = parse_or_fail(out);
	int64_t id = (int64_t)ev_json_num(j, "run_id", 0);
	cJSON_Delete(j);
	free(out);
	free(err);
	n_runs++;
	return id;
}

/* Runs evald with the given arguments after --db; returns the exit code. */
static int evald(char **out, char **err, const char *const *args)
{
	const char *argv[24] = {tu_evald(), "--db", db};
	int n = 3;
	for (int i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return tu_run(out, err, NULL, argv);
}

static const cJSON *suite_of(const cJSON *j, const char *name)
{
	const cJSON *s;
	cJSON_ArrayForEach(s, cJSON_GetObjectItem(j, "suites")) if (!strcmp(ev_json_str(s, "name", ""), name)) return s;
	fail_msg("no suite %s", name);
	return NULL;
}

static const char *action_of(const cJSON *j, const char *suite)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItem(j, "regressions")) if (!strcmp(ev_json_str(a, "suite", ""), suite))
	    return ev_json_str(a, "action", NULL);
	return NULL;
}

static char rid[2][24];

static void compare_files_a_regression_with_exactly_the_broken_samples(void **st)
{
	(void)st;
	int64_t base = run_model(&good, "ckpt-100");
	int64_t cand = run_model(&bad, "ckpt-200");
	snprintf(rid[0], sizeof rid[0], "%lld", (long long)base);
	snprintf(rid[1], sizeof rid[1], "%lld", (long long)cand);

	char *out = NULL, *err = NULL;
	const char *args[] = {"compare", rid[0], rid[1], "--json", "--file-regressions", NULL};
	assert_int_equal(evald(&out, &err, args), 0);
	cJSON *j = parse_or_fail(out);
	const cJSON *a = suite_of(j, "A"), *b = suite_of(j, "B");
	assert_int_equal((int)ev_json_num(a, "n", 0), 60);
	assert_float_equal(ev_json_num(a, "score_a", 0), 1.0, 1e-12);
	assert_float_equal(ev_json_num(a, "delta", 0), -40.0 / 60.0, 1e-12);
	assert_true(ev_json_num(a, "ci_high", 0) < 0);
	assert_true(ev_json_num(a, "ci_low", 0) <= -40.0 / 60.0);
	assert_true(ev_json_num(a, "p", 1) < 1e-9);
	assert_true(ev_json_num(a, "mde", 1) < 40.0 / 60.0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(a, "fixed")), 0);
	const cJSON *broken = cJSON_GetObjectItem(a, "broken");
	assert_int_equal(cJSON_GetArraySize(broken), 40);
	for (int i = 0; i < 40; i++) {
		char id[8];
		snprintf(id, sizeof id, "a%02d", i);
		assert_string_equal(cJSON_GetArrayItem(broken, i)->valuestring, id);
	}
	assert_int_equal((int)ev_json_num(b, "n", 0), 30);
	assert_float_equal(ev_json_num(b, "delta", 1), 0, 0);
	assert_float_equal(ev_json_num(b, "p", 0), 1, 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b, "broken")), 0);
	assert_string_equal(action_of(j, "A"), "filed");
	assert_null(action_of(j, "B"));
	cJSON_Delete(j);
	free(out);
	free(err);

	/* The evidence: every broken sample with its fingerprint. */
	const char *show[] = {"regressions", "show", "1", "--json", NULL};
	assert_int_equal(evald(&out, &err, show), 0);
	j = parse_or_fail(out);
	assert_string_equal(ev_json_str(j, "suite", ""), "A");
	assert_string_equal(ev_json_str(j, "status", ""), "new");
	assert_string_equal(ev_json_str(j, "candidate_model", ""), "ckpt-200");
	const cJSON *samples = cJSON_GetObjectItem(j, "samples");
	assert_int_equal(cJSON_GetArraySize(samples), 40);
	for (int i = 0; i < 40; i++) {
		const cJSON *s = cJSON_GetArrayItem(samples, i);
		const char *want = i < 30 ? "wrong_answer" : i < 35 ? "truncated" : "unclosed_thinking";
		char id[8];
		snprintf(id, sizeof id, "a%02d", i);
		assert_string_equal(ev_json_str(s, "sample_id", ""), id);
		if (strcmp(ev_json_str(s, "fingerprint", ""), want))
			fail_msg("%s: fingerprint %s, expected %s", id, ev_json_str(s, "fingerprint", ""), want);
	}
	cJSON_Delete(j);
	free(out);
	free(err);

	/* The human table names the drop and the flipped ids. */
	const char *human[] = {"compare", rid[0], rid[1], NULL};
	assert_int_equal(evald(&out, &err, human), 0);
	assert_non_null(strstr(out, "DROP"));
	assert_non_null(strstr(out, "broken (40): a00[wrong_answer]"));
	assert_non_null(strstr(out, "a30[truncated]"));
	free(out);
	free(err);
}

static void later_good_candidate_fixes_and_still_later_bad_one_regresses(void **st)
{
	(void)st;
	char id[24];
	char *out = NULL, *err = NULL;
	snprintf(id, sizeof id, "%lld", (long long)run_model(&good, "ckpt-300"));
	const char *args[] = {"compare", rid[0], id, "--json", "--file-regressions", NULL};
	assert_int_equal(evald(&out, &err, args), 0);
	cJSON *j = parse_or_fail(out);
	assert_string_equal(action_of(j, "A"), "fixed");
	assert_null(action_of(j, "B"));
	cJSON_Delete(j);
	free(out);
	free(err);
	const char *show[] = {"regressions", "show", "1", "--json", NULL};
	assert_int_equal(evald(&out, &err, show), 0);
	j = parse_or_fail(out);
	assert_string_equal(ev_json_str(j, "status", ""), "fixed");
	assert_string_equal(ev_json_str(j, "fixed_in", ""), "ckpt-300");
	cJSON_Delete(j);
	free(out);
	free(err);

	snprintf(id, sizeof id, "%lld", (long long)run_model(&bad, "ckpt-400"));
	const char *args2[] = {"compare", rid[0], id, "--json", "--file-regressions", NULL};
	assert_int_equal(evald(&out, &err, args2), 0);
	j = parse_or_fail(out);
	assert_string_equal(action_of(j, "A"), "regressed");
	cJSON_Delete(j);
	free(out);
	free(err);

	const char *list[] = {"regressions", "list", "--json", NULL};
	assert_int_equal(evald(&out, &err, list), 0);
	j = parse_or_fail(out);
	const cJSON *regs = cJSON_GetObjectItem(j, "regressions");
	assert_int_equal(cJSON_GetArraySize(regs), 1); /* same id throughout */
	assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(regs, 0), "id", 0), 1);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(regs, 0), "status", ""), "regressed");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(regs, 0), "candidate_model", ""), "ckpt-400");
	cJSON_Delete(j);
	free(out);
	free(err);

	assert_int_equal(evald(&out, &err, show), 0);
	j = parse_or_fail(out);
	const cJSON *ev = cJSON_GetObjectItem(j, "events");
	assert_int_equal(cJSON_GetArraySize(ev), 3);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 0), "status", ""), "new");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 1), "status", ""), "fixed");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ev, 2), "status", ""), "regressed");
	cJSON_Delete(j);
	free(out);
	free(err);
}

static void regressions_status_sets_state_and_assignee_and_rejects_bad_input(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *set[] = {"regressions", "status", "1", "investigating", "--assignee", "bob", "--json", NULL};
	assert_int_equal(evald(&out, &err, set), 0);
	cJSON *j = parse_or_fail(out);
	assert_string_equal(ev_json_str(j, "status", ""), "investigating");
	assert_string_equal(ev_json_str(j, "assignee", ""), "bob");
	cJSON_Delete(j);
	free(out);
	free(err);

	const char *bad_state[] = {"regressions", "status", "1", "closed", NULL};
	assert_int_equal(evald(&out, &err, bad_state), 2);
	assert_non_null(strstr(err, "closed"));
	free(out);
	free(err);
	const char *missing[] = {"regressions", "show", "77", NULL};
	assert_int_equal(evald(&out, &err, missing), 1);
	assert_non_null(strstr(err, "77"));
	free(out);
	free(err);
	const char *human[] = {"regressions", NULL};
	assert_int_equal(evald(&out, &err, human), 0);
	assert_non_null(strstr(out, "investigating"));
	assert_non_null(strstr(out, "ckpt-400"));
	free(out);
	free(err);
}

static void compare_rejects_bad_arguments_and_missing_runs(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *one[] = {"compare", "1", NULL};
	assert_int_equal(evald(&out, &err, one), 2);
	free(out);
	free(err);
	const char *word[] = {"compare", "1", "x", NULL};
	assert_int_equal(evald(&out, &err, word), 2);
	free(out);
	free(err);
	const char *missing[] = {"compare", "1", "999", NULL};
	assert_int_equal(evald(&out, &err, missing), 1);
	assert_non_null(strstr(err, "999"));
	free(out);
	free(err);
}

static void calibrate_stores_a_noise_floor_that_compare_then_uses(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *args[] = {"calibrate", "--model", good.url, "--model-name", "ckpt-100", "--suite", suite_a, "--suite",
	                      suite_b, "--concurrency", "16", "--repeats", "2", "--json", NULL};
	assert_int_equal(evald(&out, &err, args), 0);
	cJSON *j = parse_or_fail(out);
	const cJSON *cals = cJSON_GetObjectItem(j, "calibrations");
	assert_int_equal(cJSON_GetArraySize(cals), 2);
	const cJSON *c;
	cJSON_ArrayForEach(c, cals)
	{
		assert_int_equal((int)ev_json_num(c, "repeats", 0), 2);
		assert_float_equal(ev_json_num(c, "variance", -1), 0, 0); /* the fixture is deterministic */
		assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(c, "run_ids")), 2);
		assert_string_equal(ev_json_str(c, "model", ""), "ckpt-100");
	}
	cJSON_Delete(j);
	free(out);
	free(err);

	const char *cmp[] = {"compare", rid[0], rid[1], "--json", NULL};
	assert_int_equal(evald(&out, &err, cmp), 0);
	j = parse_or_fail(out);
	assert_string_equal(ev_json_str(suite_of(j, "A"), "mde_source", ""), "calibration");
	assert_true(ev_json_num(suite_of(j, "A"), "calibration_id", 0) >= 1);
	cJSON_Delete(j);
	free(out);
	free(err);

	const char *no_repeats[] = {"calibrate", "--model", good.url, NULL};
	assert_int_equal(evald(&out, &err, no_repeats), 2);
	free(out);
	free(err);
	/* A bad run flag is the run's usage error, passed on. */
	const char *bad_flag[] = {"calibrate", "--model", good.url, "--repeats", "2", "--bogus", NULL};
	assert_int_equal(evald(&out, &err, bad_flag), 2);
	assert_non_null(strstr(err, "--bogus"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(compare_files_a_regression_with_exactly_the_broken_samples),
		cmocka_unit_test(later_good_candidate_fixes_and_still_later_bad_one_regresses),
		cmocka_unit_test(regressions_status_sets_state_and_assignee_and_rejects_bad_input),
		cmocka_unit_test(compare_rejects_bad_arguments_and_missing_runs),
		cmocka_unit_test(calibrate_stores_a_noise_floor_that_compare_then_uses),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
