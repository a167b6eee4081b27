/* `evald score`: completions made elsewhere are scored by their tests; the
 * summary has run's shape plus pass@k; --details has one line a
 * completion; bad sample files fail naming file:line. */
#include "tests/common/testutil.h"

#include <math.h>
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

/* The suite's checker decides: a BFCL-style tool-call suite scores BFCL's
 * own result lines (prompted text and function-calling lists, arguments as
 * objects or JSON strings) and evald's {"id","response","tool_calls"}; a
 * text suite scores with its text checker; an answer that cannot be scored
 * (a sandbox that cannot start the interpreter) makes the command exit 1
 * after printing the summary. Before, every non-code suite failed each
 * answer with "tests: needs style humaneval or mbpp" and exited 0. */
static void score_dispatches_on_the_checker_and_reads_bfcl_results(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("score-dispatch");
	char *tsuite = tu_path(dir, "tools");
	assert_int_equal(tu_sh(NULL, NULL, "mkdir -p '%s'", tsuite), 0);
	free(tu_write(tsuite, "suite.json",
	              "{\"name\":\"tools\",\"version\":\"1\",\"kind\":\"tool_use\",\"checker\":{\"type\":\"toolcall\","
	              "\"category\":\"simple\"}}"));
	static const char FN[] = "[{\"name\":\"geo.area\",\"parameters\":{\"type\":\"dict\",\"properties\":{"
	                         "\"base\":{\"type\":\"integer\"},\"height\":{\"type\":\"float\"}},"
	                         "\"required\":[\"base\",\"height\"]}}]";
	char *samples = ev_asprintf("{\"id\":\"simple_0\",\"input\":\"area?\",\"tests\":{\"functions\":%s,"
	                            "\"ground_truth\":[{\"geo.area\":{\"base\":[10],\"height\":[5.0]}}]}}\n"
	                            "{\"id\":\"simple_1\",\"input\":\"area?\",\"tests\":{\"functions\":%s,"
	                            "\"ground_truth\":[{\"geo.area\":{\"base\":[3],\"height\":[2.5]}}]}}\n",
	                            FN, FN);
	free(tu_write(tsuite, "samples.jsonl", samples));
	free(samples);
	/* BFCL's result file: prompted text (right, then a wrong name), then
	 * function calling (arguments as a JSON string, then as an object) */
	char *results = tu_write(dir, "bfcl_result.json",
	                         "{\"id\":\"simple_0\",\"result\":\"[geo.area(base=10, height=5.0)]\"}\n"
	                         "{\"id\":\"simple_0\",\"result\":\"[geo_area(base=10, height=5.0)]\"}\n"
	                         "{\"id\":\"simple_1\",\"result\":[{\"geo_area\":\"{\\\"base\\\": 3, \\\"height\\\": 2.5}\"}]}\n"
	                         "{\"id\":\"simple_1\",\"result\":[{\"geo_area\":{\"base\":3,\"height\":2}}]}\n"
	                         "{\"id\":\"simple_1\",\"response\":\"\",\"tool_calls\":[{\"type\":\"function\","
	                         "\"function\":{\"name\":\"geo_area\",\"arguments\":\"{\\\"base\\\": 3, \\\"height\\\": 2.5}\"}}]}\n");
	char *details = tu_path(dir, "details.jsonl");
	char *out = NULL, *err = NULL, *d = NULL;
	const char *argv[] = {tu_evald(), "--json", "-q", "score", "--suite", tsuite, "--samples", results, "--details",
	                      details, NULL};
	int st = tu_run(&out, &err, NULL, argv);
	if (st)
		fail_msg("exit %d: %s", st, err);
	cJSON *j = cJSON_Parse(out);
	const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	/* simple_0: 1 of 2 (a prompted answer names the function exactly);
	 * simple_1: 2 of 3 (the channel's names are the OpenAI-safe ones) */
	assert_true(fabs(ev_json_num(s, "score", -1) - (0.5 + 2.0 / 3.0) / 2) < 1e-9);
	assert_true(ev_json_num(s, "errors", -1) == 0);
	cJSON_Delete(j);
	assert_int_equal(ev_file_read(&d, NULL, details, 1 << 20), 0);
	assert_non_null(strstr(d, "wrong_function"));
	assert_non_null(strstr(d, "value_mismatch"));
	assert_null(strstr(d, "needs style"));
	free(d), free(out), free(err);

	/* a text suite scores with its text checker */
	char *qsuite = tu_path(dir, "qa");
	assert_int_equal(tu_sh(NULL, NULL, "mkdir -p '%s'", qsuite), 0);
	free(tu_write(qsuite, "suite.json", "{\"name\":\"qa\",\"version\":\"1\",\"checker\":{\"type\":\"exact\"}}"));
	free(tu_write(qsuite, "samples.jsonl", "{\"id\":\"q1\",\"input\":\"2+2?\",\"target\":\"4\"}\n"));
	char *answers = tu_write(dir, "qa.jsonl", "{\"id\":\"q1\",\"response\":\"4\"}\n{\"id\":\"q1\",\"response\":\"5\"}\n");
	const char *qargv[] = {tu_evald(), "--json", "-q", "score", "--suite", qsuite, "--samples", answers, NULL};
	st = tu_run(&out, &err, NULL, qargv);
	if (st)
		fail_msg("exit %d: %s", st, err);
	assert_non_null(strstr(out, "\"score\":0.5"));
	free(out), free(err);

	/* answers that cannot be scored: the summary, then exit 1 */
	char *problems = tu_write(dir, "problems.jsonl", PROBLEMS);
	char *comp = tu_write(dir, "comp.jsonl", "{\"task_id\":\"T/0\",\"completion\":\"    return a + b\\n\"}\n");
	const char *eargv[] = {tu_evald(), "--json", "-q", "score", "--problems", problems, "--samples", comp, "--python",
	                       "/nonexistent/python3", NULL};
	st = tu_run(&out, &err, NULL, eargv);
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "\"errors\":1"));
	assert_non_null(strstr(err, "could not be scored"));
	free(out), free(err);
	free(problems), free(comp), free(answers), free(qsuite), free(details), free(results), free(tsuite), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(score_prints_summary_and_details),
		cmocka_unit_test(score_dispatches_on_the_checker_and_reads_bfcl_results),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
