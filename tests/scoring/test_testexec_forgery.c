/* A verdict cannot be forged by ending the process well: a program passes
 * only when its checks ran to their end. Each case of the hostile-code
 * corpus below ends with status 0 without the checks having returned (or
 * after they failed), in the humaneval, mbpp, script and C styles, and must
 * be judged failed with a detail saying the tests did not complete; the
 * honest solutions beside them still pass. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"

static ev_sandbox_verdict run(const char *tests, const char *completion, char **detail)
{
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	ev_sandbox_result r;
	if (ev_testexec_run(&o, tests, completion, &r))
		fail_msg("ev_testexec_run: %s", ev_error_msg());
	ev_sandbox_verdict v = r.verdict;
	if (detail)
		*detail = r.detail ? ev_strdup(r.detail) : NULL;
	ev_sandbox_result_clear(&r);
	return v;
}

static const char HE[] = "{\"style\":\"humaneval\",\"entry_point\":\"add\","
                         "\"prompt\":\"def add(a, b):\\n    \\\"\\\"\\\"Add.\\\"\\\"\\\"\\n\","
                         "\"test\":\"def check(candidate):\\n    assert candidate(1, 2) == 3\\n"
                         "    assert candidate(5, 5) == 10\\n\"}";
static const char MBPP[] = "{\"style\":\"mbpp\",\"test_list\":[\"assert add(1, 2) == 3\",\"assert add(5, 5) == 10\"]}";
static const char SCRIPT[] = "{\"style\":\"script\",\"script\":\"assert add(1, 2) == 3\\nassert add(5, 5) == 10\\n\"}";
static const char CSCRIPT[] = "{\"language\":\"c\",\"script\":\"#include <assert.h>\\n"
                              "int main(void){ assert(add(1, 2) == 3); assert(add(5, 5) == 10); return 0; }\\n\"}";

/* Python completions that end with status 0 without the checks passing.
 * In humaneval style the body follows the prompt's `def add(a, b):`. */
static const char *const py_forgeries[] = {
	/* exit before the tests run */
	"import os\nos._exit(0)\n",
	"import sys\nsys.exit(0)\n",
	"raise SystemExit(0)\n",
	/* exit from inside the checked function, while the tests run */
	"def add(a, b):\n    import os\n    os._exit(0)\n",
	"def add(a, b):\n    raise SystemExit(0)\n",
	"def add(a, b):\n    import sys\n    sys.exit()\n",
	/* a wrong answer whose failed assert is covered by an exit at exit time */
	"import atexit, os\natexit.register(lambda: os._exit(0))\ndef add(a, b):\n    return a - b\n",
	/* the same from a finally of the failing test, and through sys.excepthook */
	"import sys, os\nsys.excepthook = lambda *a: os._exit(0)\ndef add(a, b):\n    return 0\n",
	/* stdout closed and reopened so that nothing after it is seen */
	"import os\nos.close(1)\ndef add(a, b):\n    return a * b\n",
	NULL,
};

static const char HONEST_PY[] = "def add(a, b):\n    return a + b\n";

static void python_forgeries_fail_in_every_style(void **st)
{
	(void)st;
	const char *styles[] = {HE, MBPP, SCRIPT};
	const char *names[] = {"humaneval", "mbpp", "script"};
	for (int s = 0; s < 3; s++) {
		char *d = NULL;
		assert_int_equal(run(styles[s], HONEST_PY, &d), EV_SANDBOX_PASSED);
		free(d);
		for (int i = 0; py_forgeries[i]; i++) {
			/* humaneval: the completion is the function's body after the
			 * prompt's header; a whole definition replaces it */
			ev_sandbox_verdict v = run(styles[s], py_forgeries[i], &d);
			if (v == EV_SANDBOX_PASSED)
				fail_msg("%s style: forgery %d passed:\n%s", names[s], i, py_forgeries[i]);
			free(d);
		}
	}
	/* the detail says why */
	char *d = NULL;
	assert_int_equal(run(MBPP, "import os\nos._exit(0)\n", &d), EV_SANDBOX_FAILED);
	assert_non_null(d);
	assert_non_null(strstr(d, "the tests did not complete"));
	free(d);
}

static void c_forgeries_fail(void **st)
{
	(void)st;
	char *d = NULL;
	assert_int_equal(run(CSCRIPT, "int add(int a, int b) { return a + b; }\n", &d), EV_SANDBOX_PASSED);
	free(d);
	static const char *const forgeries[] = {
		/* a constructor that exits before main runs the tests */
		"#include <unistd.h>\n__attribute__((constructor)) static void f(void) { _exit(0); }\n"
		"int add(int a, int b) { return a - b; }\n",
		/* exiting from the checked function */
		"#include <stdlib.h>\nint add(int a, int b) { exit(0); }\n",
		/* an atexit handler that turns the failed assert's abort into 0 is
		 * not possible (abort skips atexit), but a handler after a wrong
		 * answer that exits early is */
		"#include <stdlib.h>\n#include <unistd.h>\nstatic void bye(void) { _exit(0); }\n"
		"__attribute__((constructor)) static void reg(void) { atexit(bye); exit(0); }\n"
		"int add(int a, int b) { return 0; }\n",
		NULL,
	};
	for (int i = 0; forgeries[i]; i++) {
		ev_sandbox_verdict v = run(CSCRIPT, forgeries[i], &d);
		if (v == EV_SANDBOX_PASSED)
			fail_msg("C forgery %d passed:\n%s", i, forgeries[i]);
		free(d);
	}
}

/* What honest programs do still works: output, reading their own stdin
 * (none: /dev/null), __name__ == "__main__", and tracebacks that name
 * prog.py. */
static void honest_programs_are_unchanged(void **st)
{
	(void)st;
	static const char S[] = "{\"style\":\"script\",\"script\":\"import sys\\n"
	                        "assert __name__ == '__main__'\\nassert sys.stdin.read() == ''\\nprint('done')\\n\"}";
	char *d = NULL;
	assert_int_equal(run(S, "x = 1\n", &d), EV_SANDBOX_PASSED);
	free(d);
	assert_int_equal(run(SCRIPT, "def add(a, b):\n    return a - b\n", &d), EV_SANDBOX_FAILED);
	assert_non_null(strstr(d, "AssertionError"));
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(python_forgeries_fail_in_every_style),
		cmocka_unit_test(c_forgeries_fail),
		cmocka_unit_test(honest_programs_are_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
