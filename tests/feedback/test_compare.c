/* feedback: comparing two stored runs sample by sample (pairs, epochs,
 * errors left out, flipped samples with fingerprints) and the noise floor
 * from a calibration. */
#include "tracker_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void put(ev_tracker *t, int64_t run, const char *suite, const char *id, int epoch, double score,
                const char *reason, const char *detail, const char *finish)
{
	ev_result r = {0};
	r.suite = suite;
	r.sample_id = id;
	r.epoch = epoch;
	r.response = "x";
	r.score = score;
	r.reason = reason;
	r.detail = detail;
	r.finish_reason = finish;
	if (ev_tracker_result_put(t, run, &r) != 0)
		fail_msg("put %s/%s: %s", suite, id, ev_error_msg());
}

static const ev_compare_suite *find(const ev_compare *c, const char *name)
{
	for (size_t i = 0; i < c->n_suites; i++)
		if (!strcmp(c->suites[i].name, name))
			return &c->suites[i];
	fail_msg("no suite %s", name);
	return NULL;
}

static const ev_flip *find_flip(const ev_flip *v, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].sample_id, id))
			return &v[i];
	return NULL;
}

static void fingerprint_names_the_failure_from_reason_detail_and_finish(void **st)
{
	(void)st;
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("wrong_answer", "expected 4", "stop")), "wrong_answer");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("no_answer", NULL, "stop")), "no_answer");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("truncated", NULL, "length")), "truncated");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("wrong_answer", NULL, "length")), "truncated");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("unclosed_thinking", NULL, "stop")),
	                    "unclosed_thinking");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("no_answer", "unparseable: no call found", "stop")),
	                    "tool_call_parse_error");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("timeout", NULL, NULL)), "timeout");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("wrong_answer", "timed out", "stop")), "timeout");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("wrong_answer", "sandbox error: no fork", "stop")),
	                    "sandbox_error");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of("backend_error", "HTTP 500", NULL)), "backend_error");
	assert_string_equal(ev_fingerprint_name(ev_fingerprint_of(NULL, NULL, NULL)), "wrong_answer");
	assert_string_equal(ev_fingerprint_name(EV_FP_COUNT), "unknown");
}

static void compare_pairs_samples_averages_epochs_and_leaves_errors_out(void **st)
{
	(void)st;
	char *path = tf_db_path("compare-pairs");
	ev_tracker *t = tf_open(path);
	int64_t a = tf_run(t, "base"), b = tf_run(t, "cand");
	char id[16];
	/* alpha: 20 samples right in A; in B s00..s05 broken (various causes),
	 * s19 only an error (left out), s18 missing from B. */
	for (int i = 0; i < 20; i++) {
		snprintf(id, sizeof id, "s%02d", i);
		put(t, a, "alpha", id, 0, 1, "", NULL, "stop");
	}
	for (int i = 6; i < 18; i++) {
		snprintf(id, sizeof id, "s%02d", i);
		put(t, b, "alpha", id, 0, 1, "", NULL, "stop");
	}
	put(t, b, "alpha", "s00", 0, 0, "wrong_answer", "expected 4, got 5", "stop");
	put(t, b, "alpha", "s01", 0, 0, "truncated", "stopped at max_tokens", "length");
	put(t, b, "alpha", "s02", 0, 0, "no_answer", "unparseable: not JSON", "stop");
	put(t, b, "alpha", "s03", 0, 0, "unclosed_thinking", NULL, "stop");
	put(t, b, "alpha", "s04", 0, 0, "no_answer", NULL, "stop");
	put(t, b, "alpha", "s05", 0, 0, "wrong_answer", "sandbox error: cannot fork", "stop");
	put(t, b, "alpha", "s19", 0, 0, "backend_error", "HTTP 500", NULL);
	/* beta: two epochs; A = {1, 0} everywhere (0.5), B = {1, 1} (1.0) on
	 * b0..b3; an error epoch in B's b4 does not count. */
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof id, "b%d", i);
		put(t, a, "beta", id, 0, 1, "", NULL, "stop");
		put(t, a, "beta", id, 1, 0, "wrong_answer", NULL, "stop");
		put(t, b, "beta", id, 0, 1, "", NULL, "stop");
		if (i < 4)
			put(t, b, "beta", id, 1, 1, "", NULL, "stop");
		else
			put(t, b, "beta", id, 1, 0, "timeout", NULL, NULL);
	}

	ev_compare *c = NULL;
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	assert_int_equal(ev_compare_runs(&c, t, a, b, &opt), 0);
	assert_int_equal(c->n_suites, 2);
	assert_string_equal(c->model_a, "base");
	assert_string_equal(c->model_b, "cand");

	const ev_compare_suite *s = find(c, "alpha");
	assert_int_equal(s->n, 18); /* s00..s17 */
	assert_int_equal(s->only_a, 2); /* s18 missing, s19 an error in B */
	assert_int_equal(s->only_b, 0);
	assert_true(s->binary);
	assert_string_equal(s->test, "mcnemar_exact");
	assert_float_equal(s->score_a, 1.0, 1e-12);
	assert_float_equal(s->score_b, 12.0 / 18.0, 1e-12);
	assert_float_equal(s->delta, -6.0 / 18.0, 1e-12);
	assert_float_equal(s->p, ev_paired_mcnemar_p(6, 0), 1e-12);
	assert_true(s->ci_low <= s->delta && s->ci_high >= s->delta);
	assert_string_equal(s->mde_source, "observed");
	assert_int_equal(s->n_fixed, 0);
	assert_int_equal(s->n_broken, 6);
	const char *want[6][2] = {{"s00", "wrong_answer"}, {"s01", "truncated"}, {"s02", "tool_call_parse_error"},
	                          {"s03", "unclosed_thinking"}, {"s04", "no_answer"}, {"s05", "sandbox_error"}};
	for (int i = 0; i < 6; i++) {
		const ev_flip *f = find_flip(s->broken, s->n_broken, want[i][0]);
		assert_non_null(f);
		assert_string_equal(ev_fingerprint_name(f->fingerprint), want[i][1]);
	}
	assert_string_equal(find_flip(s->broken, s->n_broken, "s00")->detail, "expected 4, got 5");
	assert_true(ev_compare_is_regression(s));

	s = find(c, "beta");
	assert_int_equal(s->n, 5);
	assert_false(s->binary);
	assert_string_equal(s->test, "sign_flip_permutation");
	assert_float_equal(s->score_a, 0.5, 1e-12);
	assert_float_equal(s->score_b, 1.0, 1e-12); /* b4: the timeout epoch is left out */
	assert_int_equal(s->n_fixed, 5);
	assert_int_equal(s->n_broken, 0);
	/* five +0.5 differences: exact, 2 of 32 patterns */
	assert_float_equal(s->p, 0.0625, 1e-12);
	assert_false(ev_compare_is_regression(s));

	char *json = NULL;
	assert_int_equal(ev_compare_json(&json, c), 0);
	cJSON *j = cJSON_Parse(json);
	assert_non_null(j);
	cJSON *s0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_string_equal(ev_json_str(s0, "name", ""), "alpha");
	const char *keys[] = {"name", "n", "score_a", "score_b", "delta", "ci_low", "ci_high", "p", "mde", "fixed",
	                      "broken"};
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
		assert_non_null(cJSON_GetObjectItem(s0, keys[k]));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(s0, "broken")), 6);
	cJSON_Delete(j);
	free(json);
	ev_compare_free(c);

	/* Same seed, same figures; a missing run is NOTFOUND. */
	ev_compare *c2 = NULL, *c3 = NULL;
	assert_int_equal(ev_compare_runs(&c2, t, a, b, &opt), 0);
	assert_int_equal(ev_compare_runs(&c3, t, a, b, &opt), 0);
	assert_true(c2->suites[0].ci_low == c3->suites[0].ci_low && c2->suites[0].ci_high == c3->suites[0].ci_high);
	ev_compare_free(c2);
	ev_compare_free(c3);
	ev_compare *c4 = NULL;
	assert_int_equal(ev_compare_runs(&c4, t, a, 999, &opt), EV_E_NOTFOUND);
	assert_null(c4);

	ev_tracker_close(t);
	free(path);
}

static void compare_handles_runs_of_thousands_of_samples(void **st)
{
	(void)st;
	char *path = tf_db_path("compare-big");
	ev_tracker *t = tf_open(path);
	int64_t a = tf_run(t, "a"), b = tf_run(t, "b");
	char id[16];
	/* Two suites of 1500 samples; B breaks every 10th of alpha. */
	for (int i = 0; i < 3000; i++) {
		const char *suite = i < 1500 ? "alpha" : "beta";
		snprintf(id, sizeof id, "s%04d", i);
		tf_put(t, a, suite, id, 0, 1, "", NULL);
		bool broken = i < 1500 && i % 10 == 0;
		tf_put(t, b, suite, id, 0, broken ? 0 : 1, broken ? "wrong_answer" : "", NULL);
	}
	ev_compare *c = NULL;
	assert_int_equal(ev_compare_runs(&c, t, a, b, NULL), 0);
	assert_int_equal(c->n_suites, 2);
	assert_int_equal(find(c, "alpha")->n, 1500);
	assert_int_equal(find(c, "alpha")->n_broken, 150);
	assert_int_equal(find(c, "beta")->n, 1500);
	assert_int_equal(find(c, "beta")->n_broken, 0);
	assert_true(ev_compare_is_regression(find(c, "alpha")));
	ev_compare_free(c);
	ev_tracker_close(t);
	free(path);
}

static void calibration_stores_variance_and_flip_rates_and_sets_the_mde(void **st)
{
	(void)st;
	char *path = tf_db_path("compare-calib");
	ev_tracker *t = tf_open(path);
	int64_t r[3];
	char id[16];
	/* 10 samples; s0 flips in one of three repeats; suite score 1.0, 0.9, 1.0
	 * (s0 wrong in the second), then s1 wrong in the third: 1.0, 0.9, 0.9. */
	for (int k = 0; k < 3; k++) {
		r[k] = tf_run(t, "m");
		for (int i = 0; i < 10; i++) {
			snprintf(id, sizeof id, "s%d", i);
			double sc = (k == 1 && i == 0) || (k == 2 && i == 1) ? 0 : 1;
			tf_put(t, r[k], "alpha", id, 0, sc, sc ? "" : "wrong_answer", NULL);
		}
	}
	char *json = NULL;
	assert_int_equal(ev_calibration_store(t, "m", r, 1, NULL, &json), EV_E_INVALID);
	assert_int_equal(ev_calibration_store(t, "m", r, 3, NULL, &json), 0);
	cJSON *j = cJSON_Parse(json);
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "calibrations"), 0);
	assert_non_null(c0);
	assert_string_equal(ev_json_str(c0, "suite", ""), "alpha");
	assert_int_equal((int)ev_json_num(c0, "repeats", 0), 3);
	assert_int_equal((int)ev_json_num(c0, "n", 0), 10);
	/* scores 1.0, 0.9, 0.9: mean 0.9333, sample variance 0.003333 */
	assert_float_equal(ev_json_num(c0, "variance", -1), 0.01 / 3.0, 1e-12);
	cJSON *flaky = cJSON_GetObjectItem(c0, "flaky");
	assert_float_equal(ev_json_num(flaky, "s0", -1), 1.0 / 3.0, 1e-12);
	assert_float_equal(ev_json_num(flaky, "s1", -1), 1.0 / 3.0, 1e-12);
	assert_null(cJSON_GetObjectItem(flaky, "s2"));
	assert_float_equal(ev_json_num(c0, "mean_flip_rate", -1), (2.0 / 3.0) / 10.0, 1e-12);
	cJSON_Delete(j);
	free(json);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM calibrations"), 1);

	/* The comparison now takes its MDE from the calibration:
	 * 2.8 * sqrt(2 * var * n_cal / n) with n == n_cal. */
	ev_compare *c = NULL;
	assert_int_equal(ev_compare_runs(&c, t, r[0], r[1], NULL), 0);
	const ev_compare_suite *s = find(c, "alpha");
	assert_string_equal(s->mde_source, "calibration");
	assert_true(s->calibration_id > 0);
	assert_float_equal(s->mde, 2.8 * sqrt(2.0 * (0.01 / 3.0) * 10.0 / 10.0), 1e-9);
	assert_int_equal(s->n_broken, 1);
	assert_float_equal(s->broken[0].flip_rate, 1.0 / 3.0, 1e-12);
	ev_compare_free(c);

	/* Without the calibration: the observed paired variance. */
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	opt.use_calibration = false;
	assert_int_equal(ev_compare_runs(&c, t, r[0], r[1], &opt), 0);
	assert_string_equal(c->suites[0].mde_source, "observed");
	/* differences: one -1, nine 0: var = (0.81 + 9 * 0.01) / 9 = 0.1 */
	assert_float_equal(c->suites[0].mde, 2.8 * sqrt(0.1 / 10.0), 1e-9);
	ev_compare_free(c);

	assert_int_equal(ev_calibration_get_json(t, "alpha", &json), 0);
	assert_non_null(strstr(json, "\"repeats\":3"));
	free(json);
	assert_int_equal(ev_calibration_get_json(t, "nope", &json), EV_E_NOTFOUND);
	ev_tracker_close(t);
	free(path);
}

/* Provenance: two runs of the same 40 samples where B's chat template
 * changed (its settings say so) and with it the rendered prompt of the
 * samples 0..19; of those, 0..9 break. Samples 20..29 break with the same
 * request (the model's doing). Each flipped sample is labelled with what
 * differed (prompt and chat_template for the first ten, chat_template only
 * for the others); the changed-prompt samples carry 10 of the 20 lost
 * points (half the delta), and since the settings changed, all of the
 * delta coincides with a change other than the model. */
static void compare_labels_flips_with_what_differed(void **state)
{
	(void)state;
	char *path = tf_db_path("provenance");
	ev_tracker *t = tf_open(path);
	int64_t run[2];
	for (int k = 0; k < 2; k++) {
		char cfg[128];
		snprintf(cfg, sizeof cfg, "{\"models\":[\"m%d\"],\"chat_template\":%s,\"seed\":%d,\"max_tokens\":64}", k,
		         k ? "\"llama3\"" : "null", 7 + k);
		ev_run_info info = {k ? "ckpt-b" : "ckpt-a", "/ckpt/", "[{\"name\":\"alpha\"}]", cfg, 1, 40, 0, NULL};
		assert_int_equal(ev_tracker_run_create(t, &info, &run[k]), 0);
		for (int i = 0; i < 40; i++) {
			char id[16], req[256];
			snprintf(id, sizeof id, "s%02d", i);
			bool rendered_differently = k == 1 && i < 20;
			snprintf(req, sizeof req,
			         "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"%sQ%d\"}],"
			         "\"max_tokens\":64,\"temperature\":0}",
			         k ? "ckpt-b" : "ckpt-a", rendered_differently ? "<|start|>" : "", i);
			bool pass = !(k == 1 && i < 30 && i % 20 < 10);
			ev_result r = {.suite = "alpha", .sample_id = id, .request_hash = "00", .request_json = req,
			               .response = pass ? "ok" : "no", .score = pass, .reason = pass ? "" : "wrong_answer",
			               .finish_reason = "stop", .attempts = 1};
			assert_int_equal(ev_tracker_result_put(t, run[k], &r), 0);
		}
	}
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	ev_compare *c = NULL;
	assert_int_equal(ev_compare_runs(&c, t, run[0], run[1], &opt), 0);
	assert_int_equal(c->n_suites, 1);
	const ev_compare_suite *s = &c->suites[0];
	assert_int_equal(s->n_broken, 20);
	assert_int_equal(s->n_changed, 20);
	assert_true(fabs(s->delta - (-0.5)) < 1e-12);
	assert_true(fabs(s->delta_changed - (-0.25)) < 1e-12);
	/* the settings: chat_template differs; seed and the model's own keys are not counted */
	assert_int_equal(c->n_config, 1);
	assert_string_equal(c->config[0].key, "chat_template");
	char *js = NULL;
	assert_int_equal(ev_compare_json(&js, c), 0);
	cJSON *j = cJSON_Parse(js);
	const cJSON *su = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	const cJSON *pv = cJSON_GetObjectItem(su, "provenance");
	assert_true(fabs(ev_json_num(pv, "delta_from_changed_requests", 0) / s->delta - 0.5) < 1e-12);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(pv, "settings_changed")));
	/* the settings changed: all of the delta coincides with a change other than the model */
	assert_true(ev_json_num(pv, "share_of_delta_with_other_change", 0) == 1.0);
	const cJSON *b;
	int with_prompt = 0;
	cJSON_ArrayForEach(b, cJSON_GetObjectItem(su, "broken_samples"))
	{
		char *ch = cJSON_PrintUnformatted(cJSON_GetObjectItem(b, "changed"));
		int i = atoi(ev_json_str(b, "id", "s99") + 1);
		if (i < 10)
			assert_string_equal(ch, "[\"prompt\",\"chat_template\"]");
		else
			assert_string_equal(ch, "[\"chat_template\"]");
		with_prompt += i < 10;
		free(ch);
	}
	assert_int_equal(with_prompt, 10);
	cJSON_Delete(j);
	free(js);
	ev_compare_free(c);
	ev_tracker_close(t);
	free(path);
}

/* Routing offline: three models on 200 samples of two categories. "big"
 * passes 90% of both at cost 100; "small" passes 95% of "easy" and 10% of
 * "hard" at cost 10; "mid" passes 60% of both at cost 50. The category
 * router learns small for easy and big for hard: big's score or better at
 * about half its cost; the cost router (within 0.05) does the same here;
 * the oracle is at least every model and router; the hull is small, then
 * big (mid lies under the chord); fewer than two runs, or runs sharing no
 * samples, are refused. */
static void route_scores_models_routers_and_the_oracle(void **state)
{
	(void)state;
	char *path = tf_db_path("route");
	ev_tracker *t = tf_open(path);
	const char *names[3] = {"big", "small", "mid"};
	const int cost[3] = {100, 10, 50};
	int64_t run[3];
	for (int k = 0; k < 3; k++) {
		ev_run_info info = {names[k], "/m/", "[{\"name\":\"mix\"}]", "{}", 1, 200, 0, NULL};
		assert_int_equal(ev_tracker_run_create(t, &info, &run[k]), 0);
		for (int i = 0; i < 200; i++) {
			char id[16], meta[64];
			snprintf(id, sizeof id, "x%03d", i);
			bool hard = i % 2;
			snprintf(meta, sizeof meta, "{\"category\":\"%s\"}", hard ? "hard" : "easy");
			int pct = k == 0 ? 90 : k == 2 ? 60 : hard ? 10 : 95;
			bool pass = (i * 37 + k * 11) % 100 < pct;
			ev_result r = {.suite = "mix", .sample_id = id, .request_hash = "00", .response = "a", .score = pass,
			               .reason = pass ? "" : "wrong_answer", .finish_reason = "stop", .attempts = 1,
			               .prompt_tokens = cost[k] / 2, .completion_tokens = cost[k] - cost[k] / 2,
			               .metadata_json = meta};
			assert_int_equal(ev_tracker_result_put(t, run[k], &r), 0);
		}
	}
	ev_route_options opt = EV_ROUTE_OPTIONS_INIT;
	char *js = NULL;
	assert_int_equal(ev_route_eval(t, run, 3, &opt, &js), 0);
	cJSON *j = cJSON_Parse(js);
	print_message("%s\n", js);
	assert_true(ev_json_num(j, "samples", 0) == 200);
	const cJSON *m = cJSON_GetObjectItem(j, "models"), *r = cJSON_GetObjectItem(j, "routers");
	double big = ev_json_num(cJSON_GetArrayItem(m, 0), "score", 0);
	const cJSON *cat = cJSON_GetArrayItem(r, 0), *oracle = cJSON_GetArrayItem(r, 2);
	assert_string_equal(ev_json_str(cat, "name", ""), "category");
	assert_true(ev_json_num(cat, "score", 0) >= big - 0.05);
	assert_true(ev_json_num(cat, "cost", 0) < 0.7 * ev_json_num(cJSON_GetArrayItem(m, 0), "cost", 0));
	assert_true(ev_json_num(cat, "ci_low", 1) < ev_json_num(cat, "score", 0));
	assert_true(ev_json_num(cat, "ci_high", 0) > ev_json_num(cat, "score", 1));
	const cJSON *x;
	cJSON_ArrayForEach(x, m) assert_true(ev_json_num(oracle, "score", 0) >= ev_json_num(x, "score", 1));
	cJSON_ArrayForEach(x, r) assert_true(ev_json_num(oracle, "score", 0) >= ev_json_num(x, "score", 1));
	const cJSON *h = cJSON_GetObjectItem(j, "hull");
	assert_int_equal(cJSON_GetArraySize(h), 2);
	assert_non_null(strstr(cJSON_GetArrayItem(h, 0)->valuestring, "small"));
	assert_non_null(strstr(cJSON_GetArrayItem(h, 1)->valuestring, "big"));
	double area = ev_json_num(j, "hull_area", -1);
	assert_true(area > 0 && area <= 1);
	cJSON_Delete(j);
	free(js);
	assert_int_not_equal(ev_route_eval(t, run, 1, &opt, &js), 0);
	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fingerprint_names_the_failure_from_reason_detail_and_finish),
		cmocka_unit_test(compare_pairs_samples_averages_epochs_and_leaves_errors_out),
		cmocka_unit_test(compare_handles_runs_of_thousands_of_samples),
		cmocka_unit_test(calibration_stores_variance_and_flip_rates_and_sets_the_mde),
		cmocka_unit_test(compare_labels_flips_with_what_differed),
		cmocka_unit_test(route_scores_models_routers_and_the_oracle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
