/* feedback: results (put, iterate, replace, rescore), the group commit as
 * another connection sees it, and the response cache. */
#include "tracker_fixture.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	int n;
	char seen[16][64];
	ev_result first; /* copied scalars of the first result */
	char first_texts[8][64];
	int stop_at;
} collect;

static int collect_cb(void *ctx, const ev_result *r)
{
	collect *c = ctx;
	if (c->n < 16)
		snprintf(c->seen[c->n], sizeof c->seen[0], "%s/%s/%d=%.2f:%s", r->suite, r->sample_id, r->epoch, r->score,
		         r->reason);
	if (c->n == 0) {
		c->first = *r;
		const char *texts[8] = {r->request_hash, r->request_json, r->response, r->tool_calls_json,
		                        r->extracted,    r->detail,       r->finish_reason, r->reason};
		for (int i = 0; i < 8; i++)
			snprintf(c->first_texts[i], sizeof c->first_texts[0], "%s", texts[i] ? texts[i] : "(null)");
	}
	c->n++;
	return c->stop_at && c->n == c->stop_at ? 42 : 0;
}

static void results_are_stored_ordered_and_replaced(void **state)
{
	(void)state;
	char *path = tf_db_path("results-each");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m");
	int64_t other = tf_run(t, "m");

	ev_result full = {0};
	full.suite = "alpha";
	full.sample_id = "a";
	full.epoch = 0;
	full.request_hash = "abc123";
	full.request_json = "{\"model\":\"m\"}";
	full.response = "<think>hm</think>The answer is 42";
	full.tool_calls_json = "[]";
	full.extracted = "42";
	full.score = 1.0;
	full.reason = NULL; /* stored as "" */
	full.detail = "exact";
	full.finish_reason = "stop";
	full.prompt_tokens = 123;
	full.completion_tokens = 45;
	full.latency_s = 1.5;
	full.attempts = 2;
	full.cached = true;
	/* Out of order on purpose; one result of another run. */
	tf_put(t, run, "beta", "b", 1, 0.0, "no_answer", NULL);
	tf_put(t, run, "beta", "b", 0, 0.5, "", "x");
	tf_put(t, run, "alpha", "c", 0, 0.0, "wrong_answer", "7");
	assert_int_equal(ev_tracker_result_put(t, run, &full), 0);
	tf_put(t, other, "alpha", "a", 0, 0.0, "wrong_answer", "0");
	tf_put(t, run, "alpha", "c", 0, 1.0, "", "8"); /* replaces alpha/c/0 */

	collect c = {0};
	assert_int_equal(ev_tracker_results_each(t, run, collect_cb, &c), 0);
	assert_int_equal(c.n, 4);
	assert_string_equal(c.seen[0], "alpha/a/0=1.00:");
	assert_string_equal(c.seen[1], "alpha/c/0=1.00:");
	assert_string_equal(c.seen[2], "beta/b/0=0.50:");
	assert_string_equal(c.seen[3], "beta/b/1=0.00:no_answer");
	assert_string_equal(c.first_texts[0], "abc123");
	assert_string_equal(c.first_texts[1], "{\"model\":\"m\"}");
	assert_string_equal(c.first_texts[2], "<think>hm</think>The answer is 42");
	assert_string_equal(c.first_texts[3], "[]");
	assert_string_equal(c.first_texts[4], "42");
	assert_string_equal(c.first_texts[5], "exact");
	assert_string_equal(c.first_texts[6], "stop");
	assert_string_equal(c.first_texts[7], "");
	assert_int_equal(c.first.prompt_tokens, 123);
	assert_int_equal(c.first.completion_tokens, 45);
	assert_true(fabs(c.first.latency_s - 1.5) < 1e-9);
	assert_int_equal(c.first.attempts, 2);
	assert_true(c.first.cached);

	/* A non-zero return stops the walk and is returned. */
	collect s = {.stop_at = 2};
	assert_int_equal(ev_tracker_results_each(t, run, collect_cb, &s), 42);
	assert_int_equal(s.n, 2);
	/* No results: no calls. */
	collect e = {0};
	assert_int_equal(ev_tracker_results_each(t, run + 100, collect_cb, &e), 0);
	assert_int_equal(e.n, 0);
	ev_tracker_close(t);
	free(path);
}

static void rescore_updates_score_fields_only(void **state)
{
	(void)state;
	char *path = tf_db_path("results-rescore");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m");
	tf_put(t, run, "alpha", "a", 0, 0.0, "wrong_answer", "41");
	assert_int_equal(ev_tracker_result_rescore(t, run, "alpha", "a", 0, 1.0, "", "42", "rescored"), 0);
	assert_int_equal(ev_tracker_flush(t), 0);
	char *row = tf_query_text(path, "SELECT score || '|' || reason || '|' || extracted || '|' || detail || '|' || "
	                                "response FROM results");
	assert_non_null(row);
	assert_string_equal(row, "1.0||42|rescored|41");
	free(row);
	assert_int_equal(ev_tracker_result_rescore(t, run, "alpha", "zz", 0, 1.0, "", NULL, NULL), EV_E_NOTFOUND);
	assert_int_equal(ev_tracker_result_rescore(t, run, "alpha", "a", 0, NAN, "", NULL, NULL), EV_E_INVALID);
	ev_tracker_close(t);
	free(path);
}

static long committed(const char *path) { return tf_query_long(path, "SELECT count(*) FROM results"); }

static void group_commit_is_visible_after_tick(void **state)
{
	(void)state;
	char *path = tf_db_path("results-group");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m");

	tf_put(t, run, "alpha", "a", 0, 1.0, "", "x");
	assert_int_equal(committed(path), 0);          /* pending, in the open transaction */
	assert_int_equal(ev_tracker_tick(t), 0);        /* too young to commit */
	ev_sleep(EV_TRACKER_COMMIT_S * 1.5);
	assert_int_equal(committed(path), 0);          /* nothing commits by itself */
	assert_int_equal(ev_tracker_tick(t), 0);
	assert_int_equal(committed(path), 1);

	/* The 512th pending result commits the batch without a tick (exactly
	 * checkable only when no batch got old meanwhile: see the next test). */
	double t0 = ev_now();
	char id[32];
	for (int i = 0; i < 511; i++) {
		snprintf(id, sizeof id, "g%04d", i);
		tf_put(t, run, "alpha", id, 0, 1.0, "", "x");
	}
	bool fast = ev_now() - t0 < EV_TRACKER_COMMIT_S;
	if (fast)
		assert_int_equal(committed(path), 1);
	tf_put(t, run, "alpha", "g0511", 0, 1.0, "", "x");
	if (fast)
		assert_int_equal(committed(path), 513);
	else
		print_message("slow machine: 511 puts took over %.1f s, exact batch check skipped\n", EV_TRACKER_COMMIT_S);
	assert_int_equal(ev_tracker_flush(t), 0);
	assert_int_equal(committed(path), 513);

	/* Flush commits; close commits. */
	tf_put(t, run, "alpha", "z1", 0, 1.0, "", "x");
	assert_int_equal(ev_tracker_flush(t), 0);
	assert_int_equal(committed(path), 514);
	tf_put(t, run, "alpha", "z2", 0, 1.0, "", "x");
	ev_tracker_close(t);
	assert_int_equal(committed(path), 515);
	free(path);
}

/* Whatever the timing, no more than 511 results are ever pending. */
static void pending_results_never_exceed_the_batch(void **state)
{
	(void)state;
	char *path = tf_db_path("results-batch");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m");
	sqlite3 *ro = NULL;
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_open_v2(path, &ro, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(ro, "SELECT count(*) FROM results", -1, &st, NULL), SQLITE_OK);
	char id[32];
	long max_pending = 0;
	for (long i = 1; i <= 1300; i++) {
		snprintf(id, sizeof id, "p%05ld", i);
		tf_put(t, run, "alpha", id, 0, 0.0, "wrong_answer", "x");
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		long pending = i - (long)sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		if (pending > max_pending)
			max_pending = pending;
	}
	print_message("most results pending at once: %ld\n", max_pending);
	assert_true(max_pending <= 511);
	assert_true(max_pending > 0);
	sqlite3_finalize(st);
	sqlite3_close(ro);
	ev_tracker_close(t);
	free(path);
}

static void bad_results_are_refused_and_the_group_goes_on(void **state)
{
	(void)state;
	char *path = tf_db_path("results-bad");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m");
	ev_result r = {0};
	r.suite = "alpha";
	r.sample_id = "a";
	r.score = NAN;
	assert_int_equal(ev_tracker_result_put(t, run, &r), EV_E_INVALID);
	r.score = 1.5;
	assert_int_equal(ev_tracker_result_put(t, run, &r), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "alpha/a"));
	r.score = 1;
	r.epoch = -1;
	assert_int_equal(ev_tracker_result_put(t, run, &r), EV_E_INVALID);
	r.epoch = 0;
	r.sample_id = "";
	assert_int_equal(ev_tracker_result_put(t, run, &r), EV_E_INVALID);
	r.sample_id = "a";
	r.suite = NULL;
	assert_int_equal(ev_tracker_result_put(t, run, &r), EV_E_INVALID);
	assert_int_equal(ev_tracker_result_put(t, run, NULL), EV_E_INVALID);
	r.suite = "alpha";
	/* A run that does not exist: the foreign key refuses it. */
	assert_int_equal(ev_tracker_result_put(t, run + 7, &r), EV_E_NOTFOUND);
	assert_non_null(strstr(ev_error_msg(), "does not exist"));
	/* The open batch is unharmed. */
	assert_int_equal(ev_tracker_result_put(t, run, &r), 0);
	assert_int_equal(ev_tracker_flush(t), 0);
	assert_int_equal(committed(path), 1);
	ev_tracker_close(t);
	free(path);
}

static void cache_misses_then_hits_and_counts(void **state)
{
	(void)state;
	char *path = tf_db_path("results-cache");
	ev_tracker *t = tf_open(path);
	char *got = (char *)0x1;
	assert_int_equal(ev_tracker_cache_get(t, "k1", &got), EV_E_NOTFOUND);
	assert_null(got);
	assert_int_equal(ev_tracker_cache_put(t, "k1", "{\"text\":\"hello\"}"), 0);
	assert_int_equal(ev_tracker_cache_get(t, "k1", &got), 0);
	assert_string_equal(got, "{\"text\":\"hello\"}");
	free(got);
	assert_int_equal(ev_tracker_cache_get(t, "k1", &got), 0);
	free(got);
	assert_int_equal(ev_tracker_flush(t), 0);
	assert_int_equal(tf_query_long(path, "SELECT hits FROM cache WHERE key = 'k1'"), 2);

	assert_int_equal(ev_tracker_cache_put(t, "k1", "{\"text\":\"new\"}"), 0); /* replaces */
	assert_int_equal(ev_tracker_cache_get(t, "k1", &got), 0);
	assert_string_equal(got, "{\"text\":\"new\"}");
	free(got);
	assert_int_equal(ev_tracker_cache_get(t, "k2", &got), EV_E_NOTFOUND);
	assert_int_equal(ev_tracker_cache_get(t, "", &got), EV_E_INVALID);
	assert_int_equal(ev_tracker_cache_put(t, "k3", NULL), EV_E_INVALID);
	ev_tracker_close(t);
	assert_int_equal(tf_query_long(path, "SELECT hits FROM cache WHERE key = 'k1'"), 1);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM cache"), 1);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(results_are_stored_ordered_and_replaced),
		cmocka_unit_test(rescore_updates_score_fields_only),
		cmocka_unit_test(group_commit_is_visible_after_tick),
		cmocka_unit_test(pending_results_never_exceed_the_batch),
		cmocka_unit_test(bad_results_are_refused_and_the_group_goes_on),
		cmocka_unit_test(cache_misses_then_hits_and_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
