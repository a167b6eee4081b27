/* The includes and exact checkers: case-insensitive containment, exact
 * match after normalisation (case, whitespace, punctuation, each a
 * toggle), several targets, Unicode folding, and samples without targets. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

#define INC "{\"type\":\"includes\"}"
#define EXACT "{\"type\":\"exact\"}"

static const sc_case includes_cases[] = {
	{INC, "Paris", "The capital is Paris.", 1, "", NULL, false},
	{INC, "Paris", "the capital is PARIS", 1, "", NULL, false},
	{INC, "Paris", "The capital is Lyon.", 0, "wrong_answer", NULL, false},
	{INC, "Rome|Paris", "It is Paris", 1, "", NULL, false},
	{INC, "Rome|Milan", "It is Paris", 0, "wrong_answer", NULL, false},
	{"{}", "paris", "PARIS!", 1, "", NULL, false}, /* includes is the default */
	{"", "paris", "PARIS!", 1, "", NULL, false},
	{"\"includes\"", "paris", "PARIS!", 1, "", NULL, false},
	{"{\"type\":\"includes\",\"ignore_case\":false}", "Paris", "paris", 0, "wrong_answer", NULL, false},
	{"{\"type\":\"includes\",\"ignore_space\":true}", "new york", "I love New\n  York", 1, "", NULL, false},
	{INC, "new york", "I love New\n  York", 0, "wrong_answer", NULL, false},
	{INC, "ÉCOLE", "une école", 1, "", NULL, false},
	{INC, "Москва", "столица — МОСКВА", 1, "", NULL, false},
	{INC, "Ωμέγα", "ωμέγα", 1, "", NULL, false},
	{INC, "x", "   ", 0, "no_answer", NULL, false},
	{INC, "x", "", 0, "no_answer", NULL, false},
};

static const sc_case exact_cases[] = {
	{EXACT, "Paris", "Paris", 1, "", "paris", false},
	{EXACT, "Paris", "  paris.  ", 1, "", "paris", false},
	{EXACT, "New York", "new   york!", 1, "", "new york", false},
	{EXACT, "New York", "\"New\tYork\"", 1, "", NULL, false},
	{EXACT, "Paris", "The answer is Paris", 0, "wrong_answer", NULL, false},
	{EXACT, "rock-and-roll", "rock and roll", 0, "wrong_answer", NULL, false}, /* punctuation is removed, not spaced */
	{EXACT, "rockandroll", "rock-and-roll", 1, "", NULL, false},
	{EXACT, "a|b|Paris", "paris", 1, "", NULL, false},
	{EXACT, "«Paris»", "paris…", 1, "", NULL, false},
	{"{\"type\":\"exact\",\"ignore_case\":false}", "Paris", "paris", 0, "wrong_answer", NULL, false},
	{"{\"type\":\"exact\",\"ignore_case\":false}", "Paris", " Paris ", 1, "", NULL, false},
	{"{\"type\":\"exact\",\"ignore_punct\":false}", "Paris", "Paris.", 0, "wrong_answer", NULL, false},
	{"{\"type\":\"exact\",\"ignore_punct\":false}", "Paris.", "paris.", 1, "", NULL, false},
	{"{\"type\":\"exact\",\"ignore_space\":false}", "new york", "new  york", 0, "wrong_answer", NULL, false},
	{"{\"type\":\"exact\",\"ignore_space\":false}", "new york", "new york", 1, "", NULL, false},
	{EXACT, "straße", "STRAßE", 1, "", NULL, false},
	{EXACT, "x", "\n\t", 0, "no_answer", NULL, false},
};

static void includes_matches_case_insensitively(void **state)
{
	(void)state;
	SC_RUN(includes_cases);
}

static void exact_matches_after_normalisation(void **state)
{
	(void)state;
	SC_RUN(exact_cases);
}

static void text_checkers_need_a_target(void **state)
{
	(void)state;
	const char *specs[] = {INC, EXACT};
	for (size_t i = 0; i < 2; i++) {
		ev_checker *c = sc_checker(specs[i]);
		ev_sample *s = sc_sample_new(NULL);
		ev_verdict v;
		assert_int_equal(ev_checker_score(c, s, "anything", false, &v), EV_E_INVALID);
		assert_non_null(strstr(ev_error_msg(), "needs a target"));
		assert_non_null(strstr(ev_error_msg(), "sample case (line 1)"));
		assert_null(v.extracted);
		sc_sample_free(s);
		/* A target that normalises to nothing cannot be matched. */
		s = sc_sample_new("...");
		assert_int_equal(ev_checker_score(c, s, "anything", false, &v), i == 0 ? 0 : EV_E_INVALID);
		ev_verdict_clear(&v);
		sc_sample_free(s);
		ev_checker_free(c);
	}
}

static void invalid_utf8_in_answer_is_tolerated(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(INC);
	ev_sample *s = sc_sample_new("paris");
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, "bad \xff\xfe bytes then Paris \xc3", false, &v), 0);
	assert_true(v.score == 1.0);
	assert_true(ev_utf8_valid(v.extracted, strlen(v.extracted)));
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
}

static void long_answers_are_clipped_in_extracted(void **state)
{
	(void)state;
	size_t n = 100000;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		big[i] = "abcé"[i % 4];
	big[n] = '\0';
	ev_checker *c = sc_checker(INC);
	ev_sample *s = sc_sample_new("zzz");
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, big, false, &v), 0);
	assert_true(v.score == 0.0);
	assert_true(strlen(v.extracted) <= 4096 + 3);
	assert_true(ev_utf8_valid(v.extracted, strlen(v.extracted)));
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(includes_matches_case_insensitively),
		cmocka_unit_test(exact_matches_after_normalisation),
		cmocka_unit_test(text_checkers_need_a_target),
		cmocka_unit_test(invalid_utf8_in_answer_is_tolerated),
		cmocka_unit_test(long_answers_are_clipped_in_extracted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
