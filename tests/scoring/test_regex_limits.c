/* regex_checker_rejects_catastrophic_pattern: a pattern that backtracks
 * exponentially ends, quickly, with score 0 and reason match_limit and a
 * detail naming the pattern, under the default limits, under a tighter
 * match_limit from the spec, and from several threads at once; a safe
 * pattern on the same answer is unaffected. */
#include "cases.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static char *evil_answer(size_t n_a)
{
	char *s = malloc(n_a + 2);
	memset(s, 'a', n_a);
	s[n_a] = 'b';
	s[n_a + 1] = '\0';
	return s;
}

static void expect_limit(const char *spec, const char *answer, const char *field)
{
	ev_checker *c = sc_checker(spec);
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	double t0 = ev_now();
	assert_int_equal(ev_checker_score(c, s, answer, false, &v), 0);
	double dt = ev_now() - t0;
	print_message("%s on %zu bytes: %.3f s, detail: %s\n", spec, strlen(answer), dt, v.detail ? v.detail : "");
	assert_true(dt < 5.0);
	assert_true(v.score == 0.0);
	assert_int_equal(v.reason, EV_REASON_MATCH_LIMIT);
	assert_string_equal(ev_reason_name(v.reason), "match_limit");
	assert_non_null(v.detail);
	assert_non_null(strstr(v.detail, field));
	assert_non_null(strstr(v.detail, "limit"));
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
}

static void regex_checker_rejects_catastrophic_pattern(void **state)
{
	(void)state;
	char *a = evil_answer(30);
	expect_limit("{\"type\":\"regex\",\"pattern\":\"(a+)+$\"}", a, "checker.pattern");
	expect_limit("{\"type\":\"regex\",\"patterns\":[\"zzz\",\"^(a|aa)*$\"]}", a, "checker.patterns[1]");
	expect_limit("{\"type\":\"regex\",\"pattern\":\"(a+)+$\",\"match_limit\":1000}", a, "match_limit 1000");
	free(a);
	/* A longer answer does not make it slower: the limit is per match. */
	a = evil_answer(5000);
	expect_limit("{\"type\":\"regex\",\"pattern\":\"(a+)+$\"}", a, "checker.pattern");
	free(a);
}

static char *ab_answer(size_t n, char last)
{
	char *a = malloc(n + 2);
	for (size_t i = 0; i < n; i++)
		a[i] = i % 2 ? 'b' : 'a';
	a[n] = last;
	a[n + 1] = '\0';
	return a;
}

static void deep_backtracking_hits_depth_limit(void **state)
{
	(void)state;
	/* A group repeated once a character keeps one backtracking frame a
	 * repetition: a tight depth_limit stops it, naming that limit. */
	char *a = ab_answer(200000, 'c');
	ev_checker *c = sc_checker("{\"type\":\"regex\",\"pattern\":\"^(?:(a)|b)*\\\\d\",\"depth_limit\":100}");
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	double t0 = ev_now();
	assert_int_equal(ev_checker_score(c, s, a, false, &v), 0);
	assert_true(ev_now() - t0 < 5.0);
	assert_true(v.score == 0.0);
	assert_int_equal(v.reason, EV_REASON_MATCH_LIMIT);
	assert_non_null(strstr(v.detail, "depth limit"));
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(a);
}

/* The bound is per answer, over every match call: a pattern that scans a
 * 256 KB answer once per start position (no backtracking limit is hit in
 * any one call: it took 80 s before) stops on the answer's match budget. */
static void regex_total_match_work_is_bounded_per_answer(void **state)
{
	(void)state;
	size_t n = 256 * 1024;
	char *answer = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		answer[i] = "ab"[i % 2];
	answer[n] = 0;
	ev_checker *c = sc_checker("{\"type\":\"regex\",\"pattern\":\"(\\\\w+)\\\\s\",\"match\":\"last\",\"compare\":\"none\"}");
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, answer, false, &v), 0);
	assert_int_equal(v.reason, EV_REASON_MATCH_LIMIT);
	assert_non_null(strstr(v.detail, "match budget"));
	assert_non_null(strstr(v.detail, "checker.pattern"));
	ev_verdict_clear(&v);
	/* a tighter budget from the spec ends sooner, with the same reason */
	ev_checker_free(c);
	c = sc_checker("{\"type\":\"regex\",\"pattern\":\"(x)?a\",\"group\":1,\"compare\":\"none\",\"match_budget\":1000}");
	assert_int_equal(ev_checker_score(c, s, answer, false, &v), 0);
	assert_int_equal(v.reason, EV_REASON_MATCH_LIMIT);
	assert_non_null(strstr(v.detail, "match_budget 1000"));
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(answer);
}

static void honest_pattern_on_a_long_answer_passes(void **state)
{
	(void)state;
	/* The default limits leave room for a repeated group over some 50 KB. */
	char *a = ab_answer(50000, 'c');
	ev_checker *c = sc_checker("{\"type\":\"regex\",\"pattern\":\"^(?:a|b)*c$\"}");
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, a, false, &v), 0);
	assert_true(v.score == 1.0);
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(a);
}

static void safe_pattern_on_the_same_answer_matches(void **state)
{
	(void)state;
	char *a = evil_answer(30);
	ev_checker *c = sc_checker("{\"type\":\"regex\",\"pattern\":\"a+b$\"}");
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, a, false, &v), 0);
	assert_true(v.score == 1.0);
	assert_int_equal(v.reason, EV_REASON_NONE);
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(a);
}

typedef struct {
	const ev_checker *c;
	int limits, passes;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	char *bad = evil_answer(28);
	ev_sample *s = sc_sample_new("C");
	for (int i = 0; i < 20; i++) {
		ev_verdict v;
		const char *answer = i % 2 ? bad : "x aab Answer: C";
		if (ev_checker_score(w->c, s, answer, false, &v) == 0) {
			w->limits += v.reason == EV_REASON_MATCH_LIMIT;
			w->passes += v.score == 1.0;
		}
		ev_verdict_clear(&v);
	}
	sc_sample_free(s);
	free(bad);
	return NULL;
}

static void one_checker_scores_from_many_threads(void **state)
{
	(void)state;
	ev_checker *c = sc_checker("{\"type\":\"regex\",\"patterns\":[\"(a+)+$\",\"Answer: (\\\\w)\"],\"compare\":\"exact\"}");
	pthread_t t[4];
	worker w[4] = {{0}};
	for (int i = 0; i < 4; i++) {
		w[i].c = c;
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].limits, 10);
		assert_int_equal(w[i].passes, 10);
	}
	ev_checker_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(regex_checker_rejects_catastrophic_pattern),
		cmocka_unit_test(deep_backtracking_hits_depth_limit),
		cmocka_unit_test(regex_total_match_work_is_bounded_per_answer),
		cmocka_unit_test(honest_pattern_on_a_long_answer_passes),
		cmocka_unit_test(safe_pattern_on_the_same_answer_matches),
		cmocka_unit_test(one_checker_scores_from_many_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
