/* `evald score`: completions made elsewhere are scored by their tests; the
 * summary has run's shape plus pass@k; --details has one line a
 * completion; bad sample files fail naming file:line. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

#include "suites/suites.h"

static const char PROBLEMS[] =
	"{\"task_id\":\"T/0\",\"prompt\":\"def add(a, b):\\n\",\"entry_point\":\"add\","
	"\"canonical_solution\":\"    return a + b\\n\",\"test\":\"def check(candidate):\\n    assert candidate(2, 2) == 4\\n\"}\n"
	"{\"task_id\":\"T/1\",\"prompt\":\"def neg(x):\\n\",\"entry_point\":\"neg\","
	"\"canonical_solution\":\"    return -x\\n\",\"test\":\"def check(candidate):\\n    assert candidate(3) == -3\\n\"}\n";

static void score_prints_summary_and_details(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("score-cli");
	char *problems = tu_write(dir, "problems.jsonl", PROBLEMS);
	char *suite = tu_path(dir, "suite");
	assert_int_equal(ev_import_humaneval(problems, suite), 0);
	/* T/0: one of two passes; T/1: both pass; in the file's order */
	char *samples = tu_write(dir, "samples.jsonl",
	                         "{\"task_id\":\"T/0\",\"completion\":\"    return a + b\\n\"}\n"
	                         "{\"task_id\":\"T/1\",\"completion\":\"    return -x\\n\"}\n"
	                         "{\"task_id\":\"T/0\",\"completion\":\"    return a * 3\\n\"}\n"
	                         "{\"task_id\":\"T/1\",\"completion\":\"    return 0 - x\\n\"}\n");
	char *details = tu_path(dir, "details.jsonl");
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--json", "-q", "score", "--suite", suite, "--samples", samples,
	                      "--details", details, "--jobs", "2", "--k", "1,2,10", NULL};
	int st = tu_run(&out, &err, NULL, argv);
	if (st != 0)
		fail_msg("exit %d: %s", st, err);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "run_id")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "model")));
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_string_equal(ev_json_str(s, "name", ""), "humaneval");
	assert_int_equal((int)ev_json_num(s, "n", 0), 2);
	assert_true(ev_json_num(s, "score", 0) == 0.75); /* mean of 1/2 and 2/2 */
	assert_int_equal((int)ev_json_num(s, "errors", -1), 0);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(s, "failures"), "failed", 0), 1);
	cJSON *pk = cJSON_GetObjectItem(j, "pass_at_k");
	assert_true(ev_json_num(pk, "1", 0) == 0.75);
	assert_true(ev_json_num(pk, "2", 0) == 1.0);
	assert_null(cJSON_GetObjectItem(pk, "10")); /* fewer than 10 completions a task */
	cJSON_Delete(j);

	char *d = NULL;
	assert_int_equal(ev_file_read(&d, NULL, details, 1 << 20), 0);
	assert_non_null(strstr(d, "{\"task_id\":\"T/0\",\"completion_id\":0,\"passed\":true,\"result\":\"passed\"}\n"));
	assert_non_null(strstr(d, "{\"task_id\":\"T/0\",\"completion_id\":1,\"passed\":false,"
	                          "\"result\":\"failed: AssertionError: assert candidate(2, 2) == 4\"}\n"));
	assert_non_null(strstr(d, "{\"task_id\":\"T/1\",\"completion_id\":1,\"passed\":true,\"result\":\"passed\"}\n"));
	free(d);
	free(out);
	free(err);

	/* Forged: a completion that exits 0 before the checks run fails through
	 * `evald score` too, saying why. */
	char *forged = tu_write(dir, "forged.jsonl",
	                        "{\"task_id\":\"T/0\",\"completion\":\"    import os; os._exit(0)\\n\"}\n"
	                        "{\"task_id\":\"T/1\",\"completion\":\"    raise SystemExit(0)\\n\"}\n");
	const char *fargv[] = {tu_evald(), "--json", "-q", "score", "--suite", suite, "--samples", forged,
	                       "--details", details, NULL};
	st = tu_run(&out, &err, NULL, fargv);
	assert_int_equal(st, 0);
	j = cJSON_Parse(out);
	s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_true(ev_json_num(s, "score", -1) == 0.0);
	cJSON_Delete(j);
	assert_int_equal(ev_file_read(&d, NULL, details, 1 << 20), 0);
	assert_non_null(strstr(d, "the tests did not complete"));
	free(d);
	free(forged);
	free(out);
	free(err);

	/* --problems takes the published file directly */
	const char *argv2[] = {tu_evald(), "-q", "score", "--problems", problems, "--samples", samples, "--json", NULL};
	st = tu_run(&out, &err, NULL, argv2);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "\"score\":0.75"));
	free(out);
	free(err);

	/* an unknown task names file:line */
	char *bad = tu_write(dir, "bad.jsonl", "{\"task_id\":\"T/0\",\"completion\":\"x\"}\n\n{\"task_id\":\"T/9\",\"completion\":\"x\"}\n");
	const char *argv3[] = {tu_evald(), "score", "--suite", suite, "--samples", bad, NULL};
	st = tu_run(&out, &err, NULL, argv3);
	assert_int_equal(st, 1);
	assert_non_null(strstr(err, "bad.jsonl:3"));
	assert_non_null(strstr(err, "T/9"));
	free(out);
	free(err);
	const char *argv4[] = {tu_evald(), "score", "--samples", bad, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv4), 2);
	free(out);
	free(err);

	free(bad);
	free(details);
	free(samples);
	free(suite);
	free(problems);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(score_prints_summary_and_details),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
