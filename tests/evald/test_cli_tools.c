/* A tool-use suite end to end: BFCL-format files imported with
 * `evald suites import bfcl`, run against the fixture server answering with
 * native OpenAI tool_calls (and once with a call written as text), scored
 * by the tool-call checker. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static const char *QUESTIONS =
	"{\"id\":\"simple_0\",\"question\":[[{\"role\":\"user\",\"content\":\"Area of a triangle, base 10 and height 5?\"}]],"
	"\"function\":[{\"name\":\"calc_area\",\"description\":\"area\",\"parameters\":{\"type\":\"dict\",\"properties\":"
	"{\"base\":{\"type\":\"integer\"},\"height\":{\"type\":\"integer\"},\"unit\":{\"type\":\"string\"}},"
	"\"required\":[\"base\",\"height\"]}}]}\n"
	"{\"id\":\"simple_1\",\"question\":[[{\"role\":\"user\",\"content\":\"Area of a triangle, base 7 and height 2?\"}]],"
	"\"function\":[{\"name\":\"calc_area\",\"description\":\"area\",\"parameters\":{\"type\":\"dict\",\"properties\":"
	"{\"base\":{\"type\":\"integer\"},\"height\":{\"type\":\"integer\"},\"unit\":{\"type\":\"string\"}},"
	"\"required\":[\"base\",\"height\"]}}]}\n"
	"{\"id\":\"simple_2\",\"question\":[[{\"role\":\"user\",\"content\":\"Area of a triangle, base 3 and height 9?\"}]],"
	"\"function\":[{\"name\":\"calc_area\",\"description\":\"area\",\"parameters\":{\"type\":\"dict\",\"properties\":"
	"{\"base\":{\"type\":\"integer\"},\"height\":{\"type\":\"integer\"},\"unit\":{\"type\":\"string\"}},"
	"\"required\":[\"base\",\"height\"]}}]}\n";

static const char *ANSWERS =
	"{\"id\":\"simple_0\",\"ground_truth\":[{\"calc_area\":{\"base\":[10],\"height\":[5],\"unit\":[\"units\",\"\"]}}]}\n"
	"{\"id\":\"simple_1\",\"ground_truth\":[{\"calc_area\":{\"base\":[7],\"height\":[2],\"unit\":[\"units\",\"\"]}}]}\n"
	"{\"id\":\"simple_2\",\"ground_truth\":[{\"calc_area\":{\"base\":[3],\"height\":[9],\"unit\":[\"units\",\"\"]}}]}\n";

/* simple_0: a right native call; simple_1: a native call with a wrong
 * value; simple_2: the right call written as Python text. */
static const char *TABLE =
	"{\"match\":\"base 10\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"calc_area\","
	"\"arguments\":\"{\\\"base\\\": 10, \\\"height\\\": 5}\"}}]}\n"
	"{\"match\":\"base 7\",\"tool_calls\":[{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"calc_area\","
	"\"arguments\":\"{\\\"base\\\": 7, \\\"height\\\": 3}\"}}]}\n"
	"{\"match\":\"base 3\",\"reply\":\"calc_area(base=3, height=9)\"}\n";

static void imported_bfcl_suite_scores_native_and_text_calls(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-tools");
	char *q = tu_write(dir, "BFCL_v3_simple.json", QUESTIONS);
	char *a = tu_write(dir, "answers.json", ANSWERS);
	char *table = tu_write(dir, "table.jsonl", TABLE);
	char *suite = tu_path(dir, "suite");
	char *db = tu_path(dir, "evald.db");
	char *out = NULL, *err = NULL;
	const char *imp[] = {tu_evald(), "suites", "import", "bfcl", q, "--answers", a, "-o", suite, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, imp), 0);
	free(out);
	free(err);

	tu_server srv;
	const char *args[] = {"--table", table, NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", srv.url, "--suite", suite, "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, run), 0);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_int_equal((int)ev_json_num(s, "n", 0), 3);
	assert_true(ev_json_num(s, "score", -1) > 0.66 && ev_json_num(s, "score", -1) < 0.67);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(s, "failures"), "wrong_answer", 0), 1);
	cJSON_Delete(j);
	free(out);
	free(err);

	/* The report names the failing sample and the BFCL reason. */
	const char *rep[] = {tu_evald(), "--db", db, "report", "1", "--format", "json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, rep), 0);
	assert_non_null(strstr(out, "simple_1"));
	free(out);
	free(err);
	tu_server_stop(&srv);
	free(q), free(a), free(table), free(suite), free(db), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(imported_bfcl_suite_scores_native_and_text_calls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
