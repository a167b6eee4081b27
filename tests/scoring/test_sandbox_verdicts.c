/* The sandbox's verdicts: how a run ended is named right, with the right
 * detail, and what the program sees (cwd, environment, stdin) is minimal. */
#include "tests/common/testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"

#define PY "/usr/bin/python3"

static int run_py(ev_sandbox_result *r, const ev_sandbox_options *o, const char *code)
{
	ev_sandbox_file f = {"prog.py", code, strlen(code)};
	const char *argv[] = {PY, "-I", "-S", "prog.py", NULL};
	int rc = ev_sandbox_run(o, argv, &f, 1, r);
	if (rc)
		print_message("ev_sandbox_run: %s\n", ev_error_msg());
	return rc;
}

static void passed_captures_stdout(void **state)
{
	(void)state;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, NULL, "import sys\nprint('hi')\nprint('err', file=sys.stderr)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out, "hi\n");
	assert_string_equal(r.err, "err\n");
	assert_null(r.detail);
	char *t = ev_sandbox_result_text(&r);
	assert_string_equal(t, "passed");
	free(t);
	ev_sandbox_result_clear(&r);
}

static void failed_names_the_assertion(void **state)
{
	(void)state;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, NULL, "def check(f):\n    assert f(1) == 3\n\ncheck(lambda x: x)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_FAILED);
	assert_int_equal(r.exit_code, 1);
	assert_string_equal(r.detail, "AssertionError: assert f(1) == 3");
	char *t = ev_sandbox_result_text(&r);
	assert_string_equal(t, "failed: AssertionError: assert f(1) == 3");
	free(t);
	ev_sandbox_result_clear(&r);

	assert_int_equal(run_py(&r, NULL, "raise ValueError('bad input')\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_FAILED);
	assert_string_equal(r.detail, "ValueError: bad input");
	ev_sandbox_result_clear(&r);

	assert_int_equal(run_py(&r, NULL, "import sys\nsys.exit(3)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_FAILED);
	assert_int_equal(r.exit_code, 3);
	assert_string_equal(r.detail, "exit status 3");
	ev_sandbox_result_clear(&r);
}

static void timeout_kills_at_the_wall_clock(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.timeout_s = 0.5;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, &o, "import time\ntime.sleep(30)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_TIMEOUT);
	assert_true(r.wall_s >= 0.45 && r.wall_s < 3.0);
	char *t = ev_sandbox_result_text(&r);
	assert_string_equal(t, "timed out");
	free(t);
	ev_sandbox_result_clear(&r);
}

static void cpu_limit_is_a_timeout(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.timeout_s = 30;
	o.cpu_s = 1;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, &o, "while True:\n    pass\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_TIMEOUT);
	assert_true(r.wall_s < 15.0);
	assert_true(r.signal == SIGXCPU || r.signal == SIGKILL);
	ev_sandbox_result_clear(&r);
}

static void memory_error_is_out_of_memory(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.mem_bytes = (size_t)256 << 20;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, &o, "x = bytearray(2 << 30)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_OOM);
	char *t = ev_sandbox_result_text(&r);
	assert_string_equal(t, "out of memory");
	free(t);
	ev_sandbox_result_clear(&r);
}

static void segfault_is_a_crash(void **state)
{
	(void)state;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, NULL, "import ctypes\nctypes.string_at(0)\n"), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_CRASHED);
	assert_int_equal(r.signal, SIGSEGV);
	char *t = ev_sandbox_result_text(&r);
	assert_string_equal(t, "crashed: signal 11");
	free(t);
	ev_sandbox_result_clear(&r);
}

static void setup_fault_is_a_sandbox_error(void **state)
{
	(void)state;
	ev_sandbox_result r;
	const char *argv[] = {"/nonexistent/python3", "prog.py", NULL};
	assert_int_equal(ev_sandbox_run(NULL, argv, NULL, 0, &r), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_ERROR);
	assert_non_null(strstr(r.detail, "exec"));
	char *t = ev_sandbox_result_text(&r);
	assert_true(ev_str_starts(t, "sandbox error: "));
	free(t);
	ev_sandbox_result_clear(&r);

	/* bad arguments are refused before anything runs */
	ev_sandbox_file bad = {"../escape.py", "x", 1};
	const char *py[] = {PY, "prog.py", NULL};
	assert_int_equal(ev_sandbox_run(NULL, py, &bad, 1, &r), EV_E_INVALID);
	assert_int_equal(r.verdict, EV_SANDBOX_ERROR);
	ev_sandbox_result_clear(&r);
	const char *rel[] = {"python3", NULL};
	assert_int_equal(ev_sandbox_run(NULL, rel, NULL, 0, &r), EV_E_INVALID);
	ev_sandbox_result_clear(&r);
}

static void program_sees_a_minimal_world(void **state)
{
	(void)state;
	ev_sandbox_result r;
	assert_int_equal(run_py(&r, NULL,
	                        "import os, sys\n"
	                        "print(sorted(k for k in os.environ if k != 'LC_CTYPE'))\n"
	                        "print(os.environ['HOME'] == os.getcwd())\n"
	                        "print(sorted(os.listdir('.')))\n"
	                        "print(repr(sys.stdin.read()))\n"
	                        "print(os.getuid() != 0)\n"),
	                 0);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_string_equal(r.out, "['HOME', 'LANG', 'PATH']\nTrue\n['prog.py']\n''\nTrue\n");
	ev_sandbox_result_clear(&r);

	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.stdin_name = "in.txt";
	ev_sandbox_file files[] = {{"prog.py", "print(int(input()) * 2)\n", 24}, {"in.txt", "21\n", 3}};
	const char *argv[] = {PY, "-I", "-S", "prog.py", NULL};
	assert_int_equal(ev_sandbox_run(&o, argv, files, 2, &r), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_string_equal(r.out, "42\n");
	ev_sandbox_result_clear(&r);
}

static void many_jobs_run_concurrently(void **state)
{
	(void)state;
	enum { N = 8 };
	ev_sandbox_job jobs[N];
	char code[N][64];
	ev_sandbox_file files[N];
	const char *argv[] = {PY, "-I", "-S", "prog.py", NULL};
	memset(jobs, 0, sizeof jobs);
	for (int i = 0; i < N; i++) {
		snprintf(code[i], sizeof code[i], "print(%d * 3)\n", i);
		files[i] = (ev_sandbox_file){"prog.py", code[i], strlen(code[i])};
		jobs[i].argv = argv;
		jobs[i].files = &files[i];
		jobs[i].n_files = 1;
	}
	ev_sandbox_run_many(NULL, jobs, N, 4);
	for (int i = 0; i < N; i++) {
		char want[16];
		snprintf(want, sizeof want, "%d\n", i * 3);
		assert_int_equal(jobs[i].status, 0);
		assert_int_equal(jobs[i].result.verdict, EV_SANDBOX_PASSED);
		assert_string_equal(jobs[i].result.out, want);
		ev_sandbox_result_clear(&jobs[i].result);
	}
}

static void failure_line_reads_tracebacks(void **state)
{
	(void)state;
	static const char tb[] = "Traceback (most recent call last):\n"
	                         "  File \"/sandbox/prog.py\", line 9, in <module>\n"
	                         "    check(f)\n"
	                         "  File \"/sandbox/prog.py\", line 4, in check\n"
	                         "    assert candidate([1, 2]) == [2, 1]\n"
	                         "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
	                         "AssertionError\n";
	char *s = ev_sandbox_failure_line(tb, strlen(tb));
	assert_string_equal(s, "AssertionError: assert candidate([1, 2]) == [2, 1]");
	free(s);
	static const char two[] = "Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 1\n\n"
	                          "During handling of the above exception, another exception occurred:\n\n"
	                          "Traceback (most recent call last):\n  File \"x\", line 3\n    f()\n"
	                          "TypeError: f() missing 1 required positional argument: 'a'\n";
	s = ev_sandbox_failure_line(two, strlen(two));
	assert_string_equal(s, "TypeError: f() missing 1 required positional argument: 'a'");
	free(s);
	s = ev_sandbox_failure_line("warning\nprog.c:3: error: x\n\n", 28);
	assert_string_equal(s, "prog.c:3: error: x");
	free(s);
	assert_null(ev_sandbox_failure_line("", 0));
	assert_null(ev_sandbox_failure_line("\n \n", 3));
	/* control bytes never reach a report */
	s = ev_sandbox_failure_line("bad\x01\x1b[31mline\n", 15);
	assert_null(strchr(s, '\x1b'));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(passed_captures_stdout),
		cmocka_unit_test(failed_names_the_assertion),
		cmocka_unit_test(timeout_kills_at_the_wall_clock),
		cmocka_unit_test(cpu_limit_is_a_timeout),
		cmocka_unit_test(memory_error_is_out_of_memory),
		cmocka_unit_test(segfault_is_a_crash),
		cmocka_unit_test(setup_fault_is_a_sandbox_error),
		cmocka_unit_test(program_sees_a_minimal_world),
		cmocka_unit_test(many_jobs_run_concurrently),
		cmocka_unit_test(failure_line_reads_tracebacks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
