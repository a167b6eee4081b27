/* The loglikelihood checker (scoring/checker_loglik.c): acc picks the most
 * likely choice, acc_norm the most likely per character (lm-eval's two
 * figures), the first on ties; the target is an index, a choice's text or
 * a letter; an answer that is not a scoring answer scores 0 as no_answer;
 * a sample without choices or with a target naming none is a fault, not a
 * wrong answer. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

static ev_sample *mc_sample(const char *target, const char *const *choices, size_t n)
{
	ev_sample *s = sc_sample_new(target);
	s->choices = calloc(n, sizeof *s->choices);
	for (size_t i = 0; i < n; i++)
		s->choices[i] = ev_strdup(choices[i]);
	s->n_choices = n;
	return s;
}

static void mc_free(ev_sample *s)
{
	for (size_t i = 0; i < s->n_choices; i++)
		free(s->choices[i]);
	free(s->choices);
	s->choices = NULL;
	s->n_choices = 0;
	sc_sample_free(s);
}

static void score(const char *spec, ev_sample *s, const char *answer, double want, const char *extracted)
{
	ev_checker *c = sc_checker(spec);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, s, answer, false, &v), 0);
	if (v.score != want || (extracted && (!v.extracted || strcmp(v.extracted, extracted))))
		fail_msg("%s on %s: score %g extracted %s, want %g %s", spec, answer, v.score,
		         v.extracted ? v.extracted : "(none)", want, extracted ? extracted : "");
	ev_verdict_clear(&v);
	ev_checker_free(c);
}

static void acc_and_acc_norm_pick_as_lm_eval_does(void **st)
{
	(void)st;
	/* "a" is likelier in all, "abcdefghij" per character (-5/10 > -2/1) */
	static const char *const ch[] = {"a", "abcdefghij", "xyz"};
	static const char ans[] = "{\"logprobs\":[-2,-5,-9],\"tokens\":[1,3,2],\"greedy\":[false,false,false]}";
	ev_sample *s = mc_sample("0", ch, 3);
	score("{\"type\":\"loglikelihood\"}", s, ans, 1, "a");
	score("{\"type\":\"loglikelihood\",\"metric\":\"acc_norm\"}", s, ans, 0, "abcdefghij");
	mc_free(s);
	s = mc_sample("abcdefghij", ch, 3); /* the target as the choice's text */
	score("{\"type\":\"loglikelihood\"}", s, ans, 0, "a");
	score("{\"type\":\"loglikelihood\",\"metric\":\"acc_norm\"}", s, ans, 1, NULL);
	mc_free(s);
	s = mc_sample("C", ch, 3); /* a letter */
	score("{\"type\":\"loglikelihood\"}", s,
	      "{\"logprobs\":[-4,-4,-1],\"tokens\":[1,1,1],\"greedy\":[false,false,true]}", 1, "xyz");
	/* ties: the first choice */
	score("{\"type\":\"loglikelihood\"}", s,
	      "{\"logprobs\":[-1,-4,-1],\"tokens\":[1,1,1],\"greedy\":[false,false,true]}", 0, "a");
	mc_free(s);
	/* characters, not bytes: "été" is 3 characters (5 bytes) */
	static const char *const fr[] = {"été", "ete!"};
	s = mc_sample("1", fr, 2);
	/* per character: -3.3/3 = -1.1 against -4.0/4 = -1.0: the second */
	score("{\"type\":\"loglikelihood\",\"metric\":\"acc_norm\"}", s,
	      "{\"logprobs\":[-3.3,-4.0],\"tokens\":[2,2],\"greedy\":[true,true]}", 1, "ete!");
	mc_free(s);
}

static void answers_and_samples_that_do_not_fit(void **st)
{
	(void)st;
	static const char *const ch[] = {"yes", "no"};
	ev_checker *c = sc_checker("{\"type\":\"loglikelihood\"}");
	ev_verdict v;
	ev_sample *s = mc_sample("1", ch, 2);
	/* a generated answer reached it: nothing to pick from */
	assert_int_equal(ev_checker_score(c, s, "no", false, &v), 0);
	assert_true(v.score == 0 && v.reason == EV_REASON_NO_ANSWER);
	ev_verdict_clear(&v);
	/* the wrong number of choices */
	assert_int_equal(ev_checker_score(c, s, "{\"logprobs\":[-1,-2,-3]}", false, &v), 0);
	assert_true(v.score == 0 && v.reason == EV_REASON_NO_ANSWER);
	ev_verdict_clear(&v);
	mc_free(s);
	/* a target naming no choice, a sample without choices: the suite's fault */
	s = mc_sample("7", ch, 2);
	assert_true(ev_checker_score(c, s, "{\"logprobs\":[-1,-2]}", false, &v) < 0);
	assert_non_null(strstr(ev_error_msg(), "is not one of its 2 choices"));
	mc_free(s);
	s = sc_sample_new("0");
	assert_true(ev_checker_score(c, s, "{\"logprobs\":[-1,-2]}", false, &v) < 0);
	assert_non_null(strstr(ev_error_msg(), "needs \"choices\""));
	sc_sample_free(s);
	ev_checker_free(c);
	/* spec errors name the field */
	ev_checker *bad = NULL;
	assert_true(ev_checker_new(&bad, "{\"type\":\"loglikelihood\",\"metric\":\"f1\"}") < 0);
	assert_non_null(strstr(ev_error_msg(), "checker.metric"));
	assert_true(ev_checker_new(&bad, "{\"type\":\"loglikelihood\",\"delimiter\":3}") < 0);
	assert_non_null(strstr(ev_error_msg(), "checker.delimiter"));
	/* only this kind makes the runner score instead of generate */
	c = sc_checker("{\"type\":\"loglikelihood\",\"delimiter\":\"\\n\"}");
	assert_string_equal(ev_checker_loglik_delimiter(c), "\n");
	ev_checker_free(c);
	c = sc_checker("{\"type\":\"exact\"}");
	assert_null(ev_checker_loglik_delimiter(c));
	ev_checker_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(acc_and_acc_norm_pick_as_lm_eval_does),
		cmocka_unit_test(answers_and_samples_that_do_not_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
