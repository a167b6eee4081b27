/* The judge checker end to end: a model server answers, a second server is
 * the judge. The judge gets the question, the reference answer, the
 * rubric and the answer (its table matches the whole prompt it must see);
 * GRADE: C scores 1, GRADE: I 0; a judge reply without a grade leaves the
 * sample out as an error, never a quiet 0. The run says on the console
 * which judge grades and stores its model and identity with the suite; a
 * judge that cannot be reached stops the run before any sample. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

static char *dir, *suite;
static tu_server model, judge;

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("judge");
	char *mt = tu_write(dir, "model.jsonl",
	                    "{\"match\":\"capital of France\",\"reply\":\"Paris\"}\n"
	                    "{\"match\":\"largest planet\",\"reply\":\"Saturn\"}\n"
	                    "{\"match\":\"colour of the sky\",\"reply\":\"Blue, mostly\"}\n");
	char *jt = tu_write(dir, "judge.jsonl",
	                    "{\"match\":\"QUESTION:\\nWhat is the capital of France?\\n\\nREFERENCE ANSWER:\\nParis\\n\\n"
	                    "RUBRIC:\\nThe city, nothing else.\\n\\nSUBMITTED ANSWER:\\nParis\\n\\nGrade the submitted "
	                    "answer.\",\"reply\":\"It names the city.\\nGRADE: C\"}\n"
	                    "{\"match\":\"SUBMITTED ANSWER:\\nSaturn\",\"reply\":\"Jupiter is larger.\\nGRADE: I\"}\n"
	                    "{\"match\":\"SUBMITTED ANSWER:\\nBlue\",\"reply\":\"I cannot tell.\"}\n");
	const char *ma[] = {"--table", mt, NULL};
	const char *ja[] = {"--table", jt, "--model", "judge-1", NULL};
	if (tu_server_start(&model, ma) || tu_server_start(&judge, ja))
		return -1;
	free(mt);
	free(jt);
	suite = tu_path(dir, "suite");
	char *cmd = ev_asprintf("mkdir -p '%s'", suite);
	if (system(cmd))
		return -1;
	free(cmd);
	char *sj = ev_asprintf("{\"name\":\"open\",\"checker\":{\"type\":\"judge\",\"model\":\"%s\","
	                       "\"rubric\":\"The city, nothing else.\"}}",
	                       judge.url);
	free(tu_write(suite, "suite.json", sj));
	free(sj);
	free(tu_write(suite, "samples.jsonl",
	              "{\"id\":\"a\",\"input\":\"What is the capital of France?\",\"target\":\"Paris\"}\n"
	              "{\"id\":\"b\",\"input\":\"Which is the largest planet?\",\"target\":\"Jupiter\"}\n"
	              "{\"id\":\"c\",\"input\":\"What is the colour of the sky?\"}\n"));
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	tu_server_stop(&model);
	tu_server_stop(&judge);
	free(suite);
	free(dir);
	return 0;
}

static char *query(const char *db, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *q = NULL;
	char *out = NULL;
	if (sqlite3_open(db, &h) == SQLITE_OK && sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
		out = ev_strdup((const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	sqlite3_close(h);
	return out;
}

static void the_judge_grades_and_is_named(void **st)
{
	(void)st;
	char *db = tu_path(dir, "t.db"), *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", model.url, "--model-name", "m", "--suite", suite,
	                     NULL};
	int rc = tu_run(&out, &err, NULL, run);
	assert_int_equal(rc, 1); /* one sample could not be graded: finished with errors */
	assert_non_null(strstr(err, "judge: judge-1 at "));
	char *v = query(db, "SELECT score || '/' || reason FROM results WHERE sample_id = 'a'");
	assert_string_equal(v, "1.0/");
	free(v);
	v = query(db, "SELECT score || '/' || reason FROM results WHERE sample_id = 'b'");
	assert_string_equal(v, "0.0/wrong_answer");
	free(v);
	v = query(db, "SELECT reason || ': ' || detail FROM results WHERE sample_id = 'c'");
	assert_non_null(strstr(v, "backend_error"));
	assert_non_null(strstr(v, "gave no grade"));
	free(v);
	v = query(db, "SELECT detail FROM results WHERE sample_id = 'b'");
	assert_string_equal(v, "judge judge-1: Jupiter is larger.\nGRADE: I");
	free(v);
	v = query(db, "SELECT suites_json FROM runs WHERE id = 1");
	assert_non_null(strstr(v, "\"judge_model\":\"judge-1\""));
	assert_non_null(strstr(v, "\"judge_identity\":\""));
	free(v);
	free(out), free(err);

	/* a judge nobody answers for: the run stops before any sample */
	char *db2 = tu_path(dir, "dead.db"), *bad = tu_path(dir, "dead");
	char *cmd = ev_asprintf("mkdir -p '%s' && cp '%s/samples.jsonl' '%s/'", bad, suite, bad);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(tu_write(bad, "suite.json",
	              "{\"name\":\"dead\",\"checker\":{\"type\":\"judge\",\"model\":\"http://127.0.0.1:9/v1\"}}"));
	const char *run2[] = {tu_evald(), "--db", db2, "run", "--model", model.url, "--model-name", "m", "--suite", bad,
	                      NULL};
	rc = tu_run(&out, &err, NULL, run2);
	assert_true(rc != 0);
	assert_non_null(strstr(err, "checker.model: judge at http://127.0.0.1:9/v1"));
	char *n = query(db2, "SELECT count(*) FROM results");
	assert_true(!n || !strcmp(n, "0"));
	free(n);
	free(out), free(err);
	free(db2), free(bad);
	free(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_judge_grades_and_is_named),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
