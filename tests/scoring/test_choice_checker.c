/* The choice checker: the letter is taken from an explicit "answer"
 * (the last one wins), a lone letter, an option label opening the answer,
 * or the last formatted letter; `letters` narrows the set; targets may be
 * formatted and compare case-insensitively. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

#define CH "{\"type\":\"choice\"}"
#define ABCD "{\"type\":\"choice\",\"letters\":\"abcd\"}"

static const sc_case choice_cases[] = {
	/* lone letters */
	{CH, "C", "C", 1, "", "C", false},
	{CH, "C", "c", 1, "", "C", false},
	{CH, "C", "(C)", 1, "", "C", false},
	{CH, "C", "**C**.", 1, "", "C", false},
	{CH, "C", "  C.\n", 1, "", "C", false},
	{CH, "C", "B", 0, "wrong_answer", "B", false},
	/* explicit answers */
	{CH, "C", "Answer: C", 1, "", "C", false},
	{CH, "C", "The answer is C.", 1, "", "C", false},
	{CH, "C", "The correct answer is (C) because of X.", 1, "", "C", false},
	{CH, "C", "The answer is (c)", 1, "", "C", false},
	{CH, "C", "**Final Answer:** C", 1, "", "C", false},
	{CH, "C", "Final answer: **C**", 1, "", "C", false},
	{CH, "C", "Answer: $\\boxed{C}$", 1, "", "C", false},
	{CH, "C", "ANSWER IS OPTION C", 1, "", "C", false},
	{CH, "C", "I first thought the answer is B, but on reflection the answer is C.", 1, "", "C", false},
	{CH, "C", "Answer: C. Wait, no. Answer: D", 0, "wrong_answer", "D", false},
	{CH, "C", "The answer is (B), clearly (C) is wrong", 0, "wrong_answer", "B", false},
	{CH, "C", "the answer is a cat", 0, "no_answer", NULL, false},
	{CH, "C", "Answer: Clearly not sure", 0, "no_answer", NULL, false},
	/* option labels at the start */
	{CH, "C", "C) Paris, since the others are wrong", 1, "", "C", false},
	{CH, "C", "(C) Paris", 1, "", "C", false},
	{CH, "C", "C. Paris", 1, "", "C", false},
	{CH, "C", "**C:** Paris", 1, "", "C", false},
	/* formatted letters anywhere: the last wins */
	{CH, "C", "Looking at the options, (C) fits best.", 1, "", "C", false},
	{CH, "C", "Not (A), not [B]; I pick **C**", 1, "", "C", false},
	{CH, "C", "so the pick is C) here", 1, "", "C", false},
	{CH, "C", "hence \\boxed{C}", 1, "", "C", false},
	{CH, "C", "the item(s) listed", 0, "no_answer", NULL, false},
	{CH, "C", "I am not sure about this one.", 0, "no_answer", NULL, false},
	/* letters narrows the set */
	{ABCD, "C", "Answer: E", 0, "no_answer", NULL, false},
	{ABCD, "C", "I think (E)... no: (C)", 1, "", "C", false},
	{ABCD, "D", "D", 1, "", "D", false},
	/* targets: formatted, lower case, several */
	{CH, "(c)", "Answer: C", 1, "", "C", false},
	{CH, "A|C", "Answer: C", 1, "", "C", false},
	{CH, "b", "**B**", 1, "", "B", false},
};

static void choice_extracts_letter_variants(void **state)
{
	(void)state;
	SC_RUN(choice_cases);
}

static void choice_target_must_be_a_letter(void **state)
{
	(void)state;
	ev_checker *c = sc_checker(ABCD);
	const char *bad[] = {"Paris", "E", "", "AB"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ev_sample *s = sc_sample_new(bad[i]);
		ev_verdict v;
		assert_int_equal(ev_checker_score(c, s, "A", false, &v), EV_E_INVALID);
		assert_non_null(strstr(ev_error_msg(), "is not one of the letters ABCD"));
		sc_sample_free(s);
	}
	ev_checker_free(c);
}

static void choice_letters_field_is_validated(void **state)
{
	(void)state;
	ev_checker *c = NULL;
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"choice\",\"letters\":\"AB1\"}"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "checker.letters"));
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"choice\",\"letters\":\"\"}"), EV_E_INVALID);
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"choice\",\"letters\":4}"), EV_E_INVALID);
	c = sc_checker("{\"type\":\"choice\",\"letters\":\"dcba\"}");
	assert_string_equal(ev_checker_spec(c), "{\"type\":\"choice\",\"letters\":\"ABCD\"}");
	ev_checker_free(c);
}

static void choice_handles_long_answers_quickly(void **state)
{
	(void)state;
	/* Many near-misses for every rule must stay linear. */
	size_t n = 200000;
	char *big = malloc(n + 32);
	for (size_t i = 0; i < n; i++)
		big[i] = "answer is ** (x "[i % 16];
	strcpy(big + n, " Answer: B");
	ev_checker *c = sc_checker(CH);
	ev_sample *s = sc_sample_new("B");
	ev_verdict v;
	double t0 = ev_now();
	assert_int_equal(ev_checker_score(c, s, big, false, &v), 0);
	assert_true(ev_now() - t0 < 5.0);
	assert_true(v.score == 1.0);
	ev_verdict_clear(&v);
	sc_sample_free(s);
	ev_checker_free(c);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(choice_extracts_letter_variants),
		cmocka_unit_test(choice_target_must_be_a_letter),
		cmocka_unit_test(choice_letters_field_is_validated),
		cmocka_unit_test(choice_handles_long_answers_quickly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
