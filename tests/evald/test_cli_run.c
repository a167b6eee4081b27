/* The evald program end to end against the fixture server: run, runs,
 * report, rescore, suites validate, and the error paths a user meets. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tu_server srv;
static char *dir;
static char *db;

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("cli-run");
	db = tu_path(dir, "evald.db");
	char *table = tu_write(dir, "table.jsonl",
	                       "{\"match\":\"capital of France\",\"reply\":\"It is Paris.\"}\n"
	                       "{\"match\":\"2+2\",\"reply\":\"<think>2+2 is 4</think>The answer is 4.\"}\n"
	                       "{\"match\":\"color of the sky\",\"reply\":\"Green, obviously.\"}\n"
	                       "{\"match\":\"pick a letter\",\"reply\":\"Answer: B\"}\n");
	const char *args[] = {"--table", table, NULL};
	if (tu_server_start(&srv, args) != 0)
		return -1;
	free(table);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	tu_server_stop(&srv);
	free(db);
	free(dir);
	return 0;
}

static cJSON *parse_or_fail(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	if (!j)
		fail_msg("not JSON: %s", text);
	return j;
}

static const char *SUITE = "{\"id\":\"q1\",\"input\":\"What is the capital of France?\",\"target\":\"Paris\"}\n"
                           "{\"id\":\"q2\",\"input\":\"What is 2+2?\",\"target\":\"4\"}\n"
                           "{\"id\":\"q3\",\"input\":\"What is the color of the sky?\",\"target\":\"blue\"}\n"
                           "{\"id\":\"q4\",\"input\":\"Please pick a letter [[status=500 times=1000]]\",\"target\":\"B\"}\n";

static void run_json_summary_scores_and_excludes_backend_errors(void **st)
{
	(void)st;
	char *suite = tu_write(dir, "evals.jsonl", SUITE);
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "run", "--model", srv.url, "--model-name", "ckpt-a", "--suite",
	                      suite, "--retries", "1", "--json", NULL};
	int rc = tu_run(&out, &err, NULL, argv);
	/* one request failed: the run is complete with errors, and says so */
	assert_int_equal(rc, 1);
	assert_non_null(strstr(err, "finished with errors: 1 results"));
	cJSON *j = parse_or_fail(out);
	assert_true(ev_json_num(j, "run_id", 0) >= 1);
	assert_string_equal(ev_json_str(j, "model", ""), "ckpt-a");
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_non_null(s);
	assert_string_equal(ev_json_str(s, "name", ""), "evals");
	/* q4 is a backend error: counted, not scored. q1 and q2 right, q3 wrong. */
	assert_int_equal((int)ev_json_num(s, "n", -1), 3);
	assert_int_equal((int)ev_json_num(s, "errors", -1), 1);
	assert_true(ev_json_num(s, "score", -1) > 0.66 && ev_json_num(s, "score", -1) < 0.67);
	assert_true(ev_json_num(s, "ci_low", -1) <= ev_json_num(s, "score", -1));
	assert_true(ev_json_num(s, "ci_high", -1) >= ev_json_num(s, "score", -1));
	cJSON *f = cJSON_GetObjectItem(s, "failures");
	assert_int_equal((int)ev_json_num(f, "backend_error", 0), 1);
	assert_int_equal((int)ev_json_num(f, "wrong_answer", 0), 1);
	cJSON_Delete(j);
	free(out);
	free(err);

	/* runs --json lists it, finished with errors, with the score. */
	const char *argv2[] = {tu_evald(), "--db", db, "runs", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv2), 0);
	j = parse_or_fail(out);
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "runs"), 0);
	assert_string_equal(ev_json_str(r, "status", ""), "finished_with_errors");
	assert_int_equal((int)ev_json_num(r, "n_results", 0), 4);
	cJSON_Delete(j);
	free(out);
	free(err);
	free(suite);
}

/* A run where every request failed is failed, says why naming the first
 * error, and exits non-zero; before, it ended "finished" with score 0 and
 * exit 0. A dead endpoint fails at once, naming the URL, and no run is
 * made (before: every request retried for half a minute, silently). */
static void a_run_that_scored_nothing_is_failed(void **st)
{
	(void)st;
	char *suite = tu_write(dir, "dead.jsonl", "{\"id\":\"a\",\"input\":\"x [[status=500 times=1000]]\",\"target\":\"x\"}\n");
	char *dead_db = tu_path(dir, "dead.db");
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", dead_db, "run", "--model", srv.url, "--model-name", "m",
	                      "--suite", suite, "--retries", "0", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 1);
	assert_non_null(strstr(err, "every request failed"));
	assert_non_null(strstr(err, "backend_error"));
	free(out), free(err);
	const char *runs[] = {tu_evald(), "--db", dead_db, "runs", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, runs), 0);
	assert_non_null(strstr(out, "\"status\":\"failed\""));
	free(out), free(err);

	char *gone_db = tu_path(dir, "gone.db");
	const char *gone[] = {tu_evald(), "--db", gone_db, "run", "--model", "http://user:pw@127.0.0.1:9/v1",
	                      "--model-name", "m", "--suite", suite, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, gone), 1);
	assert_non_null(strstr(err, "cannot reach the server"));
	assert_non_null(strstr(err, "http://[redacted]@127.0.0.1:9/v1"));
	assert_null(strstr(err, "pw"));
	free(out), free(err);
	const char *runs2[] = {tu_evald(), "--db", gone_db, "runs", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, runs2), 0);
	assert_non_null(strstr(out, "\"runs\":[]"));
	free(out), free(err), free(gone_db), free(dead_db), free(suite);
}

/* The cache answers only for the same model behind the same server: the
 * same --model-name on another server asks again (before: every row came
 * from the first server's cache, silently), the same server is cached, and
 * the console says how many answers came from the cache. */
static void the_cache_never_answers_for_another_server(void **st)
{
	(void)st;
	tu_server other;
	const char *args[] = {NULL};
	assert_int_equal(tu_server_start(&other, args), 0);
	char *suite = tu_write(dir, "cache.jsonl", "{\"id\":\"c1\",\"input\":\"capital of France\",\"target\":\"Paris\"}\n"
	                                           "{\"id\":\"c2\",\"input\":\"hello there\",\"target\":\"x\"}\n");
	char *cdb = tu_path(dir, "cache.db");
	char *out = NULL, *err = NULL;
	/* greedy: the same request has one answer, which the cache may give */
	const char *a[] = {tu_evald(), "--db", cdb, "run", "--model", srv.url, "--model-name", "same", "--suite", suite,
	                   "--temperature", "0", NULL};
	const char *b[] = {tu_evald(), "--db", cdb, "run", "--model", other.url, "--model-name", "same", "--suite", suite,
	                   "--temperature", "0", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, a), 0);
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, b), 0); /* another server: asked again */
	assert_null(strstr(err, "from the cache"));
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, a), 0); /* the first server again: cached */
	assert_non_null(strstr(err, "2 of 2 answers came from the cache"));
	free(out), free(err);
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT run_id, sum(cached) FROM results GROUP BY run_id ORDER BY run_id\"", cdb);
	assert_string_equal(out, "1|0\n2|0\n3|2\n");
	free(out), free(cdb), free(suite);
	tu_server_stop(&other);
}

/* export writes a run's rows: JSONL that parses back, CSV with quoted
 * fields where the text needs them. */
static void export_writes_rows(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *jl[] = {tu_evald(), "--db", db, "export", "1", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, jl), 0);
	int lines = 0;
	for (char *p = out, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		cJSON *j = cJSON_ParseWithLength(p, (size_t)(nl - p));
		assert_non_null(j);
		assert_string_equal(ev_json_str(j, "suite", ""), "evals");
		assert_non_null(cJSON_GetObjectItem(j, "score"));
		if (!strcmp(ev_json_str(j, "sample_id", ""), "q1")) {
			assert_string_equal(ev_json_str(j, "input", ""), "What is the capital of France?");
			assert_string_equal(ev_json_str(j, "response", ""), "It is Paris.");
		}
		cJSON_Delete(j);
		lines++;
	}
	assert_int_equal(lines, 4);
	free(out), free(err);
	char *csv = tu_path(dir, "rows.csv");
	const char *cv[] = {tu_evald(), "--db", db, "export", "1", "--format", "csv", "-o", csv, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, cv), 0);
	free(out), free(err);
	char *text = NULL;
	assert_int_equal(ev_file_read(&text, NULL, csv, 1 << 20), 0);
	assert_true(ev_str_starts(text, "suite,sample_id,epoch,input,response,"));
	assert_non_null(strstr(text, "evals,q1,0,What is the capital of France?,It is Paris.,"));
	free(text), free(csv);
	const char *bad[] = {tu_evald(), "--db", db, "export", "99", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, bad), 1);
	free(out), free(err);
}

/* Without --model-name a URL run is filed under the name the server gives
 * its one model (/v1/models), not under the URL. */
static void the_served_model_names_the_run(void **st)
{
	(void)st;
	char *suite = tu_write(dir, "named.jsonl", "{\"id\":\"n1\",\"input\":\"hi\",\"target\":\"hi\"}\n");
	char *ndb = tu_path(dir, "named.db");
	char *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "-q", "--db", ndb, "run", "--model", srv.url, "--suite", suite, "--json", NULL};
	int rc = tu_run(&out, &err, NULL, run);
	if (rc)
		fail_msg("exit %d: %s", rc, err);
	cJSON *j = cJSON_Parse(out);
	const char *model = ev_json_str(j, "model", "");
	assert_null(strstr(model, "http"));
	assert_true(*model);
	cJSON_Delete(j);
	free(out), free(err), free(ndb), free(suite);
}

/* A bundled suite is found by its name, as `evald suites list` shows it. */
static void bundled_suites_by_name(void **st)
{
	(void)st;
	char *bdb = tu_path(dir, "bundled.db");
	char *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "-q", "--db", bdb, "run", "--model", srv.url, "--model-name", "m", "--suite",
	                     "tool-use-simple", "--limit", "2", "--json", NULL};
	int rc = tu_run(&out, &err, NULL, run);
	if (rc != 0 && rc != 1) /* 1: the fixture's answers may not be calls; the suite loaded */
		fail_msg("exit %d: %s", rc, err);
	assert_non_null(strstr(out, "\"name\":\"tool-use-simple\""));
	free(out), free(err), free(bdb);
}

/* For CI: --fail-under fails a run whose suite scores below the bar,
 * --max-error-rate tolerates a share of error results, --junit writes the
 * samples as JUnit XML (failures and errors apart). */
static void ci_gates_and_junit(void **st)
{
	(void)st;
	char *suite = tu_write(dir, "ci.jsonl", SUITE); /* 2 right, 1 wrong, 1 backend error */
	char *cdb = tu_path(dir, "ci.db"), *xml = tu_path(dir, "ci.xml");
	char *out = NULL, *err = NULL;
	const char *tolerant[] = {tu_evald(), "-q", "--db", cdb, "run", "--model", srv.url, "--model-name", "m", "--suite",
	                          suite, "--retries", "0", "--max-error-rate", "0.3", "--fail-under", "0.6", "--junit", xml,
	                          NULL};
	int rc = tu_run(&out, &err, NULL, tolerant);
	if (rc)
		fail_msg("exit %d: %s", rc, err);
	free(out), free(err);
	char *x = NULL;
	assert_int_equal(ev_file_read(&x, NULL, xml, 1 << 20), 0);
	assert_non_null(strstr(x, "<testsuite name=\"ci\" tests=\"4\" failures=\"1\" errors=\"1\">"));
	assert_non_null(strstr(x, "<testcase classname=\"ci\" name=\"q1\""));
	assert_non_null(strstr(x, "<error type=\"backend_error\""));
	assert_non_null(strstr(x, "<failure type=\"wrong_answer\""));
	free(x);
	const char *strict[] = {tu_evald(), "-q", "--db", cdb, "run", "--model", srv.url, "--model-name", "m", "--suite",
	                        suite, "--retries", "0", "--max-error-rate", "0.3", "--fail-under", "0.7", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, strict), 1);
	assert_non_null(strstr(err, "under --fail-under"));
	free(out), free(err), free(xml), free(cdb), free(suite);
}

static void report_json_and_markdown_show_the_run(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "report", "1", "--format", "json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	cJSON *j = parse_or_fail(out);
	assert_int_equal((int)ev_json_num(j, "run_id", 0), 1);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_non_null(cJSON_GetObjectItem(s, "most_failed"));
	cJSON_Delete(j);
	free(out);
	free(err);
	char *md = tu_path(dir, "r.md");
	/* A link planted where a temporary file used to go is not followed. */
	char *victim = tu_write(dir, "victim.txt", "untouched\n");
	char *planted = ev_asprintf("%s.tmp", md);
	unlink(planted);
	assert_int_equal(symlink(victim, planted), 0);
	const char *argv2[] = {tu_evald(), "--db", db, "report", "1", "--format", "md", "-o", md, NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, argv2), 0);
	char *v = NULL;
	assert_int_equal(ev_file_read(&v, NULL, victim, 1 << 20), 0);
	assert_string_equal(v, "untouched\n");
	free(v);
	unlink(planted);
	free(planted);
	free(victim);
	char *text;
	size_t n;
	assert_int_equal(ev_file_read(&text, &n, md, 1 << 20), 0);
	assert_non_null(strstr(text, "evals"));
	assert_non_null(strstr(text, "q3"));
	free(text);
	free(md);
}

static void rescore_applies_a_new_checker_without_the_model(void **st)
{
	(void)st;
	/* Stop the server: rescoring must not need it. */
	tu_server_stop(&srv);
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "rescore", "1", "--checker", "regex", "--pattern", "(Green|Paris)",
	                      "--compare", "none", "--json", NULL};
	int rc = tu_run(&out, &err, NULL, argv);
	assert_int_equal(rc, 0);
	cJSON *j = parse_or_fail(out);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	/* q1 (Paris) and q3 (Green) match; q2 does not; q4 stays an error. */
	assert_true(ev_json_num(s, "score", -1) > 0.66 && ev_json_num(s, "score", -1) < 0.67);
	assert_int_equal((int)ev_json_num(s, "errors", -1), 1);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(s, "failures"), "wrong_answer", 0), 1);
	cJSON_Delete(j);
	free(out);
	free(err);
	const char *args[] = {NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
}

static void validate_names_line_and_field_of_a_bad_suite(void **st)
{
	(void)st;
	char *bad = tu_write(dir, "bad.jsonl", "{\"id\":\"a\",\"input\":\"x\",\"target\":\"y\"}\n{\"input\":\"no id\"}\n");
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "suites", "validate", bad, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 1);
	assert_non_null(strstr(err, ":2"));
	assert_non_null(strstr(err, "id"));
	free(out);
	free(err);
	char *good = tu_write(dir, "good.jsonl", SUITE);
	const char *argv2[] = {tu_evald(), "suites", "validate", good, "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv2), 0);
	cJSON *j = parse_or_fail(out);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "valid")));
	assert_int_equal((int)ev_json_num(j, "n", 0), 4);
	cJSON_Delete(j);
	free(out);
	free(err);
	free(bad);
	free(good);
}

static void bad_regex_flag_fails_before_any_request(void **st)
{
	(void)st;
	char *suite = tu_write(dir, "evals2.jsonl", SUITE);
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "run", "--model", srv.url, "--suite", suite, "--pattern", "(unclosed",
	                      NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 1);
	assert_non_null(strstr(err, "pattern"));
	free(out);
	free(err);
	free(suite);
}

static void default_suite_runs_without_a_suite_flag(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "run", "--model", srv.url, "--json", "--limit", "5", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	cJSON *j = parse_or_fail(out);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_string_equal(ev_json_str(s, "name", ""), "default");
	assert_int_equal((int)ev_json_num(s, "n", 0), 5);
	cJSON_Delete(j);
	free(out);
	free(err);
}

static void missing_model_is_a_usage_error(void **st)
{
	(void)st;
	const char *argv[] = {tu_evald(), "--db", db, "run", NULL};
	char *err = NULL;
	assert_int_equal(tu_run(NULL, &err, NULL, argv), 2);
	assert_non_null(strstr(err, "--model"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(run_json_summary_scores_and_excludes_backend_errors),
		cmocka_unit_test(a_run_that_scored_nothing_is_failed),
		cmocka_unit_test(the_cache_never_answers_for_another_server),
		cmocka_unit_test(bundled_suites_by_name),
		cmocka_unit_test(export_writes_rows),
		cmocka_unit_test(the_served_model_names_the_run),
		cmocka_unit_test(ci_gates_and_junit),
		cmocka_unit_test(report_json_and_markdown_show_the_run),
		cmocka_unit_test(rescore_applies_a_new_checker_without_the_model),
		cmocka_unit_test(validate_names_line_and_field_of_a_bad_suite),
		cmocka_unit_test(bad_regex_flag_fails_before_any_request),
		cmocka_unit_test(default_suite_runs_without_a_suite_flag),
		cmocka_unit_test(missing_model_is_a_usage_error),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
