/* The numeric checker: the last number of the answer (or of its last
 * \boxed{}), in the formats models write, compared with an absolute or
 * relative tolerance; targets that are not numbers are a suite error. */
#include "cases.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scoring/scoring_int.h"

#define NUM "{\"type\":\"numeric\"}"
#define REL "{\"type\":\"numeric\",\"relative\":true,\"tolerance\":0.01}"
#define ABS "{\"type\":\"numeric\",\"tolerance\":0.5}"

static const sc_case numeric_cases[] = {
	{NUM, "42", "42", 1, "", "42", false},
	{NUM, "42", "The answer is 42.", 1, "", "42", false},
	{NUM, "42", "First 7, then 12, finally 42", 1, "", "42", false},
	{NUM, "42", "42 apples, then 41", 0, "wrong_answer", "41", false},
	{NUM, "1234.5", "Total: 1,234.5", 1, "", "1,234.5", false},
	{NUM, "1234567", "1,234,567 people", 1, "", "1,234,567", false},
	{NUM, "3", "The list is 1,2,3", 1, "", "3", false},
	{NUM, "-3", "x = -3", 1, "", "-3", false},
	{NUM, "3", "5-3 is easy: 5 minus 3", 1, "", "3", false},
	{NUM, "2", "it equals 5-3... no, 2", 1, "", "2", false},
	{NUM, "-3", "x = \xe2\x88\x92" "3", 1, "", NULL, false}, /* U+2212 minus */
	{NUM, "0.001", "1e-3", 1, "", "1e-3", false},
	{NUM, "1500", "about 1.5E3 metres", 1, "", "1.5E3", false},
	{NUM, "3", "3eggs", 1, "", "3", false},
	{NUM, "12", "It costs $12.", 1, "", "$12", false},
	{NUM, "-12", "a loss of -$12", 1, "", "-$12", false},
	{NUM, "45", "45%", 1, "", "45%", false},
	{NUM, "45%", "I'd say 45", 1, "", NULL, false},
	{NUM, "$1,000", "1000", 1, "", NULL, false},
	{NUM, "0.5", "half is .5", 1, "", ".5", false},
	{NUM, "3", "version 1.2.3", 1, "", "3", false},
	{NUM, "7", "\\boxed{7} and then I check: 7 + 1 = 8", 1, "", "7", false},
	{NUM, "7", "so $\\boxed{\\frac{14}{2} = 7}$ done 99", 1, "", "7", false},
	{NUM, "8", "no box here: 7 + 1 = 8", 1, "", "8", false},
	{NUM, "42", "forty-two", 0, "no_answer", NULL, false},
	{NUM, "42", "no digits at all.", 0, "no_answer", NULL, false},
	{NUM, "1|2|42", "it is 42", 1, "", NULL, false},
	{NUM, "0.1", "0.1000000001", 1, "", NULL, false},
	{NUM, "0.1", "0.1001", 0, "wrong_answer", NULL, false},
	{ABS, "10", "10.4", 1, "", NULL, false},
	{ABS, "10", "10.6", 0, "wrong_answer", NULL, false},
	{REL, "1000", "1009", 1, "", NULL, false},
	{REL, "1000", "1011", 0, "wrong_answer", NULL, false},
	{REL, "0", "0.005", 1, "", NULL, false}, /* relative at 0 falls back to absolute */
};

static void numeric_reads_number_formats(void **state)
{
	(void)state;
	SC_RUN(numeric_cases);
}

static void non_numeric_target_is_an_error(void **state)
{
	(void)state;
	const char *bad[] = {"forty-two", "42 apples", "", "1e400"};
	ev_checker *c = sc_checker(NUM);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ev_sample *s = sc_sample_new(bad[i]);
		ev_verdict v;
		assert_int_equal(ev_checker_score(c, s, "42", false, &v), EV_E_INVALID);
		assert_non_null(strstr(ev_error_msg(), "is not a number"));
		sc_sample_free(s);
	}
	ev_checker_free(c);
}

static void scanner_finds_each_number_once(void **state)
{
	(void)state;
	const char *text = "a 1,234 b -5 c 6.5e2% d 7,8 e 1.2.3";
	const double want[] = {1234, -5, 650, 7, 8, 1.2, 3};
	size_t pos = 0, st, en, k = 0, len = strlen(text);
	double v;
	while (ev_num_scan(text, len, &pos, &v, &st, &en)) {
		assert_true(k < sizeof want / sizeof want[0]);
		assert_true(fabs(v - want[k]) < 1e-9);
		k++;
	}
	assert_int_equal(k, sizeof want / sizeof want[0]);
	double w;
	assert_true(ev_num_parse_whole("  $1,000.25 ", &w) && fabs(w - 1000.25) < 1e-12);
	assert_false(ev_num_parse_whole("1,00", &w));
	assert_false(ev_num_parse_whole("--1", &w));
}

static void numeric_spec_is_validated(void **state)
{
	(void)state;
	ev_checker *c = NULL;
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"numeric\",\"tolerance\":-1}"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "checker.tolerance"));
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"numeric\",\"relative\":\"yes\"}"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "checker.relative"));
	assert_null(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(numeric_reads_number_formats),
		cmocka_unit_test(non_numeric_target_is_an_error),
		cmocka_unit_test(scanner_finds_each_number_once),
		cmocka_unit_test(numeric_spec_is_validated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
