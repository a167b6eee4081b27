/* Thinking and the common verdict path: <think> blocks are removed
 * (several, multiline, unclosed, a lone </think>), an answer lost to an
 * unclosed block is unclosed_thinking, a wrong or missing answer of a
 * response cut at max_tokens is truncated, and reason names are stable. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *in;
	const char *out;
	bool unclosed;
} strip_case;

static const strip_case strip_cases[] = {
	{"plain answer", "plain answer", false},
	{"<think>hmm</think>B", "B", false},
	{"<think>\nline 1\nline 2\n</think>\n\nThe answer is B.\n", "The answer is B.", false},
	{"<think>a</think>X<think>b</think>Y", "XY", false},
	{"<think>a</think> X <think>b\n</think> Y ", "X  Y", false},
	{"<think>never closed, ran out of tokens", "", true},
	{"Answer first <think>then thinking forever", "Answer first", true},
	{"<think>a</think>B<think>c", "B", true},
	{"reasoning without an opening tag</think>\nC", "C", false},
	{"</think>C", "C", false},
	{"<think>a<think>b</think>c</think>D", "D", false},
	{"no tags </thinker> <thinking>", "no tags </thinker> <thinking>", false},
	{"", "", false},
	{"<think></think>", "", false},
};

static void thinking_blocks_are_stripped(void **state)
{
	(void)state;
	int failures = 0;
	for (size_t i = 0; i < sizeof strip_cases / sizeof strip_cases[0]; i++) {
		bool unclosed = !strip_cases[i].unclosed;
		char *s = ev_strip_thinking(strip_cases[i].in, &unclosed);
		assert_non_null(s);
		if (strcmp(s, strip_cases[i].out) != 0 || unclosed != strip_cases[i].unclosed) {
			print_error("strip_cases[%zu]: \"%s\" -> \"%s\" unclosed %d; want \"%s\" unclosed %d\n", i,
			            strip_cases[i].in, s, unclosed, strip_cases[i].out, strip_cases[i].unclosed);
			failures++;
		}
		free(s);
	}
	assert_int_equal(failures, 0);
	char *s = ev_strip_thinking(NULL, NULL);
	assert_string_equal(s, "");
	free(s);
}

static char *repeat(const char *unit, size_t times, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail);
	char *s = malloc(u * times + t + 1);
	for (size_t i = 0; i < times; i++)
		memcpy(s + i * u, unit, u);
	memcpy(s + u * times, tail, t + 1);
	return s;
}

static void stripping_stays_linear_on_many_tags(void **state)
{
	(void)state;
	/* 200k stray closes, then 200k tiny blocks: quadratic rescanning
	 * would take minutes. */
	const char *units[] = {"x</think>", "<think>t</think>y"};
	const char *want[] = {"B", NULL};
	for (int k = 0; k < 2; k++) {
		char *in = repeat(units[k], 200000, "B");
		bool unclosed = true;
		double t0 = ev_now();
		char *out = ev_strip_thinking(in, &unclosed);
		double dt = ev_now() - t0;
		print_message("%s x 200000: %.3f s\n", units[k], dt);
		assert_true(dt < 2.0);
		assert_false(unclosed);
		if (want[k])
			assert_string_equal(out, want[k]);
		else
			assert_int_equal(strlen(out), 200001);
		free(out);
		free(in);
	}
}

#define CH "{\"type\":\"choice\"}"
#define RXNONE "{\"type\":\"regex\",\"pattern\":\"ok\"}"

static const sc_case verdict_cases[] = {
	/* checkers see the answer without thinking */
	{CH, "B", "<think>maybe the answer is C</think>Answer: B", 1, "", "B", false},
	{CH, "C", "<think>maybe the answer is C</think>Answer: B", 0, "wrong_answer", "B", false},
	{"{\"type\":\"includes\"}", "Paris", "<think>Paris? or Lyon</think>Lyon", 0, "wrong_answer", NULL, false},
	/* unclosed thinking */
	{CH, "B", "<think>the answer is B but let me", 0, "unclosed_thinking", NULL, false},
	{CH, "B", "Answer: B <think>hmm", 1, "", "B", false},
	{CH, "B", "Answer: C <think>hmm", 0, "wrong_answer", "C", false},
	/* truncated wins over wrong, missing and unclosed */
	{CH, "B", "<think>the answer is B but let me", 0, "truncated", NULL, true},
	{CH, "B", "Answer: C and", 0, "truncated", "C", true},
	{CH, "B", "I am still", 0, "truncated", NULL, true},
	{CH, "B", "", 0, "truncated", NULL, true},
	{CH, "B", "Answer: B", 1, "", "B", true}, /* a right answer stays right */
	{"{\"type\":\"regex\",\"pattern\":\"(a+)+$\"}", NULL, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", 0, "match_limit", NULL, true},
	{RXNONE, NULL, "not here", 0, "truncated", NULL, true},
	/* empty answers */
	{CH, "B", "", 0, "no_answer", NULL, false},
	{CH, "B", "<think>x</think>   \n", 0, "no_answer", NULL, false},
	{RXNONE, NULL, "<think>ok</think>", 0, "no_answer", NULL, false},
};

static void verdict_reasons_follow_the_answer(void **state)
{
	(void)state;
	SC_RUN(verdict_cases);
}

static void verdict_details_say_why(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(CH);
	ev_sample *s = sc_sample_new("B");
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, "Answer: C", true, &v), 0);
	assert_non_null(strstr(v.detail, "max_tokens"));
	assert_non_null(strstr(v.detail, "expected \"B\", got \"C\""));
	ev_verdict_clear(&v);
	assert_int_equal(ev_checker_score(c, s, "<think>long", false, &v), 0);
	assert_non_null(strstr(v.detail, "never closed"));
	ev_verdict_clear(&v);
	ev_verdict_clear(NULL);
	assert_int_equal(ev_checker_score(NULL, s, "x", false, &v), EV_E_INVALID);
	assert_int_equal(ev_checker_score(c, s, "x", false, NULL), EV_E_INVALID);
	/* A NULL response is an empty one. */
	assert_int_equal(ev_checker_score(c, s, NULL, false, &v), 0);
	assert_int_equal(v.reason, EV_REASON_NO_ANSWER);
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	ev_checker_free(NULL);
}

static void reason_names_are_stable(void **state)
{
	(void)state;
	const char *names[EV_REASON_COUNT] = {"", "wrong_answer", "no_answer", "truncated", "backend_error",
	                                      "timeout", "match_limit", "unclosed_thinking", "context_overflow"};
	for (int r = 0; r < EV_REASON_COUNT; r++) {
		assert_string_equal(ev_reason_name((ev_reason)r), names[r]);
		assert_int_equal(ev_reason_parse(names[r]), r);
		assert_int_equal(ev_reason_is_error((ev_reason)r), r == EV_REASON_BACKEND_ERROR || r == EV_REASON_TIMEOUT);
	}
	assert_int_equal(ev_reason_parse("bogus"), EV_REASON_COUNT);
	assert_int_equal(ev_reason_parse(NULL), EV_REASON_COUNT);
	assert_string_equal(ev_reason_name(EV_REASON_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(thinking_blocks_are_stripped),
		cmocka_unit_test(stripping_stays_linear_on_many_tags),
		cmocka_unit_test(verdict_reasons_follow_the_answer),
		cmocka_unit_test(verdict_details_say_why),
		cmocka_unit_test(reason_names_are_stable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
