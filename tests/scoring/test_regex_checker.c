/* The regex checker: patterns tried in order, first or last occurrence,
 * capture groups by number or name, ignore_case, the compare modes
 * (exact after normalisation, includes, none for assertions), and spec
 * errors that name the field. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

#define RX(body) "{\"type\":\"regex\"," body "}"

static const sc_case regex_cases[] = {
	/* group defaults to 1 when the pattern has one, else the whole match */
	{RX("\"pattern\":\"Answer: (\\\\w+)\""), "Paris", "Answer: Paris", 1, "", "Paris", false},
	{RX("\"pattern\":\"Answer: \\\\w+\""), "Answer Paris", "Answer: Paris", 1, "", "Answer: Paris", false},
	{RX("\"pattern\":\"Answer: (\\\\w+)\",\"group\":0"), "answer: paris", "Answer: Paris", 1, "", "Answer: Paris", false},
	/* first and last occurrence */
	{RX("\"pattern\":\"Answer: (\\\\w+)\""), "Rome", "Answer: Rome ... Answer: Paris", 1, "", "Rome", false},
	{RX("\"pattern\":\"Answer: (\\\\w+)\",\"match\":\"last\""), "Paris", "Answer: Rome ... Answer: Paris", 1, "", "Paris", false},
	{RX("\"pattern\":\"Answer: (\\\\w+)\",\"match\":\"first\""), "Paris", "Answer: Rome ... Answer: Paris", 0, "wrong_answer", "Rome", false},
	/* several patterns: the first that matches wins, even if a later one would match earlier in the text */
	{RX("\"patterns\":[\"FINAL=(\\\\d+)\",\"(\\\\d+)\"]"), "7", "3 then FINAL=7", 1, "", "7", false},
	{RX("\"patterns\":[\"FINAL=(\\\\d+)\",\"(\\\\d+)\"]"), "3", "3 then nothing", 1, "", "3", false},
	{RX("\"patterns\":[\"FINAL=(\\\\d+)\",\"FINAL: (\\\\d+)\"]"), "3", "no match", 0, "no_answer", NULL, false},
	/* ignore_case applies to the pattern */
	{RX("\"pattern\":\"answer: (\\\\w+)\""), "Paris", "ANSWER: Paris", 0, "no_answer", NULL, false},
	{RX("\"pattern\":\"answer: (\\\\w+)\",\"ignore_case\":true"), "Paris", "ANSWER: Paris", 1, "", "Paris", false},
	/* named groups */
	{RX("\"pattern\":\"(?<unit>km|mi) (?<n>\\\\d+)\",\"group\":\"n\""), "12", "mi 12", 1, "", "12", false},
	/* a group that did not take part is skipped */
	{RX("\"pattern\":\"x(\\\\d)|y\",\"match\":\"last\""), "4", "x4 y", 1, "", "4", false},
	/* compare exact normalises (case, punctuation, spaces) */
	{RX("\"pattern\":\"A: (.*)\""), "new york", "A:  New   York!", 1, "", NULL, false},
	{RX("\"pattern\":\"A: (.*)\",\"fold_case\":false"), "new york", "A: New York", 0, "wrong_answer", NULL, false},
	{RX("\"pattern\":\"A: (.*)\""), "York", "A: New York", 0, "wrong_answer", NULL, false},
	{RX("\"pattern\":\"A: (.*)\",\"compare\":\"includes\""), "York", "A: New York", 1, "", NULL, false},
	{RX("\"pattern\":\"A: (.*)\""), "Rome|York|new york", "A: New York", 1, "", NULL, false},
	/* compare none: the match alone scores (the default without a target) */
	{RX("\"pattern\":\"def \\\\w+\\\\(\""), NULL, "def f(x): return x", 1, "", "def f(", false},
	{RX("\"pattern\":\"def \\\\w+\\\\(\""), NULL, "lambda x: x", 0, "wrong_answer", NULL, false},
	{RX("\"pattern\":\"ok\",\"compare\":\"none\""), "ignored", "it is ok", 1, "", "ok", false},
	/* UTF-8 mode: . is a character, \\w is Unicode */
	{RX("\"pattern\":\"^(.)\""), "é", "été", 1, "", "é", false},
	{RX("\"pattern\":\"(\\\\w+)$\""), "город", "это город", 1, "", "город", false},
	/* empty matches advance */
	{RX("\"pattern\":\"z*\",\"match\":\"last\",\"compare\":\"none\""), NULL, "abc", 1, "", "", false},
};

static void regex_extracts_and_compares(void **state)
{
	(void)state;
	SC_RUN(regex_cases);
}

typedef struct {
	const char *spec;
	const char *needle; /* must appear in the error */
} spec_error;

static const spec_error regex_spec_errors[] = {
	{RX("\"patterns\":[\"ok\",\"(abc\"]"), "checker.patterns[1]: missing closing parenthesis at offset 4"},
	{RX("\"pattern\":\"a{2,1}\""), "checker.pattern: "},
	{RX("\"pattern\":\"[z-a]\""), "checker.pattern: range out of order"},
	/* Compiles, but fails whenever it is matched: refused at load. */
	{RX("\"pattern\":\"(?R)\""), "checker.pattern: the pattern fails when matched (nested recursion"},
	{RX("\"patterns\":[\"ok\",\"(a|(?R))\"]"), "checker.patterns[1]: the pattern fails when matched"},
	{RX("\"pattern\":\"a((?1))\""), "checker.pattern: the pattern fails when matched"},
	{RX("\"patterns\":[\"ok\",7]"), "checker.patterns[1]: expected a string"},
	{RX("\"patterns\":[]"), "checker.patterns: expected a non-empty list"},
	{RX("\"patterns\":\"x\""), "checker.patterns: expected a non-empty list"},
	{RX("\"pattern\":\"x\",\"patterns\":[\"y\"]"), "not both"},
	{"{\"type\":\"regex\"}", "checker.patterns: missing"},
	{RX("\"pattern\":\"(a)\",\"group\":2"), "checker.group: 2, but checker.pattern has 1 group"},
	{RX("\"patterns\":[\"(a)(b)\",\"c\"],\"group\":2"), "checker.group: 2, but checker.patterns[1] has 0 groups"},
	{RX("\"pattern\":\"(a)\",\"group\":\"nope\""), "checker.group: no group named \"nope\""},
	{RX("\"pattern\":\"(a)\",\"group\":1.5"), "checker.group: expected a group number"},
	{RX("\"pattern\":\"(a)\",\"group\":-1"), "checker.group: expected a group number"},
	{RX("\"pattern\":\"a\",\"match\":\"middle\""), "checker.match: expected one of first, last"},
	{RX("\"pattern\":\"a\",\"compare\":\"fuzzy\""), "checker.compare: expected one of exact, includes, none"},
	{RX("\"pattern\":\"a\",\"ignore_case\":\"yes\""), "checker.ignore_case: expected true or false"},
	{RX("\"pattern\":\"a\",\"match_limit\":0"), "checker.match_limit: 0 is out of range"},
	{RX("\"pattern\":\"a\",\"depth_limit\":10.5"), "checker.depth_limit: expected a whole number"},
	{RX("\"pattern\":\"a\",\"pattrn\":\"b\""), "checker.pattrn: unknown field for type regex (known: pattern, patterns"},
	{RX("\"pattern\":\"\\\\C\""), "checker.pattern: "},
	{RX("\"pattern\":\"ok\xff(\""), "checker.pattern: UTF-8 error"},
};

static void regex_spec_errors_name_the_field(void **state)
{
	(void)state;
	int failures = 0;
	for (size_t i = 0; i < sizeof regex_spec_errors / sizeof regex_spec_errors[0]; i++) {
		ev_checker *c = NULL;
		int rc = ev_checker_new(&c, regex_spec_errors[i].spec);
		if (rc >= 0 || c || !strstr(ev_error_msg(), regex_spec_errors[i].needle)) {
			print_error("regex_spec_errors[%zu]: %s: rc %d, message \"%s\", want \"%s\"\n", i,
			            regex_spec_errors[i].spec, rc, ev_error_msg(), regex_spec_errors[i].needle);
			failures++;
		}
		ev_checker_free(c);
	}
	assert_int_equal(failures, 0);
}

static void regex_spec_is_normalised(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(RX("\"pattern\":\"a(b)\",\"match\":\"last\""));
	assert_string_equal(ev_checker_spec(c),
	                    "{\"type\":\"regex\",\"patterns\":[\"a(b)\"],\"match\":\"last\",\"ignore_case\":false,"
	                    "\"fold_case\":true,\"ignore_space\":true,\"ignore_punct\":true,\"match_limit\":1000000,"
	                    "\"depth_limit\":100000,\"match_budget\":20000000}");
	/* The normalised spec builds the same checker. */
	ev_checker *again = sc_checker(ev_checker_spec(c));
	assert_string_equal(ev_checker_spec(again), ev_checker_spec(c));
	ev_checker_free(again);
	ev_checker_free(c);
}

static void regex_compare_needs_a_target(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(RX("\"pattern\":\"(a)\",\"compare\":\"exact\""));
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, "a", false, &v), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "regex checker needs a target"));
	sc_sample_free(s);
	ev_checker_free(c);
}

/* A pattern that passes the load-time probe but fails on a rarer answer is
 * an error of that one answer's check, naming the pattern. */
static void regex_match_time_error_names_the_pattern(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(RX("\"pattern\":\"(?:(?R))*x\""));
	ev_sample *s = sc_sample_new(NULL);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, "no letter after w here", false, &v), 0);
	ev_verdict_clear(&v);
	assert_int_not_equal(ev_checker_score(c, s, "the answer is x", false, &v), 0);
	assert_non_null(strstr(ev_error_msg(), "checker.pattern: PCRE2: nested recursion"));
	sc_sample_free(s);
	ev_checker_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(regex_extracts_and_compares),
		cmocka_unit_test(regex_spec_errors_name_the_field),
		cmocka_unit_test(regex_spec_is_normalised),
		cmocka_unit_test(regex_compare_needs_a_target),
		cmocka_unit_test(regex_match_time_error_names_the_pattern),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
