/* reports: Markdown and JSON reports of runs held in a tracker that the test
 * fills: figures from the stored summary, or computed for an unfinished
 * run; failure reasons; most failed samples (ranked, truncated, escaped). */
#include "tracker_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/reports.h"

static const char *SUMMARY =
	"{\"run_id\":1,\"model\":\"model-x\",\"suites\":["
	"{\"name\":\"alpha\",\"n\":10,\"score\":0.6,\"ci_low\":0.4,\"ci_high\":0.8,\"stderr\":0.1,\"errors\":1,"
	"\"failures\":{\"wrong_answer\":3,\"timeout\":1}},"
	"{\"name\":\"beta\",\"n\":1,\"score\":1,\"ci_low\":1,\"ci_high\":1,\"stderr\":0,\"errors\":0,\"failures\":{}}]}";

/* alpha: a1 passes; a2 fails one epoch of two (answer with | and a newline);
 * a3 fails both (a 300-character answer); a4 times out twice; a5 scores
 * 0.5 then 1. beta: b1 passes. */
static void fill(ev_tracker *t, int64_t run)
{
	char longans[301];
	memset(longans, 'y', 300);
	longans[300] = 0;
	tf_put(t, run, "alpha", "a1", 0, 1, "", "ok");
	tf_put(t, run, "alpha", "a1", 1, 1, "", "ok");
	tf_put(t, run, "alpha", "a2", 0, 0, "wrong_answer", "x|y\nz");
	tf_put(t, run, "alpha", "a2", 1, 1, "", "ok");
	tf_put(t, run, "alpha", "a3", 0, 0, "wrong_answer", longans);
	tf_put(t, run, "alpha", "a3", 1, 0, "wrong_answer", "\xff\xfe bad bytes");
	ev_result r = {.suite = "alpha", .sample_id = "a4", .epoch = 0, .score = 0, .reason = "timeout",
	               .detail = "deadline of 60 s passed"};
	assert_int_equal(ev_tracker_result_put(t, run, &r), 0);
	r.epoch = 1;
	assert_int_equal(ev_tracker_result_put(t, run, &r), 0);
	tf_put(t, run, "alpha", "a5", 0, 0.5, "", "half");
	tf_put(t, run, "alpha", "a5", 1, 1, "", "ok");
	tf_put(t, run, "beta", "b1", 0, 1, "", "ok");
}

/* Writes the report into a string (malloc'd). */
static char *report(ev_tracker *t, int64_t run, ev_report_format fmt, int max_failed, int *rc_out)
{
	ev_report_options opt = EV_REPORT_OPTIONS_INIT;
	opt.format = fmt;
	opt.max_failed = max_failed;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	*rc_out = ev_report_write(t, run, &opt, f);
	fclose(f);
	return buf;
}

static cJSON *suite_named(const cJSON *root, const char *name)
{
	const cJSON *s;
	cJSON_ArrayForEach(s, cJSON_GetObjectItem(root, "suites")) {
		if (strcmp(ev_json_str(s, "name", ""), name) == 0)
			return (cJSON *)s;
	}
	fail_msg("no suite %s in the report", name);
	return NULL;
}

static void json_report_of_finished_run(void **state)
{
	(void)state;
	char *path = tf_db_path("report-json");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-x");
	fill(t, run);
	assert_int_equal(ev_tracker_run_set_summary(t, run, SUMMARY), 0);
	assert_int_equal(ev_tracker_run_set_status(t, run, "finished"), 0);

	int rc;
	char *text = report(t, run, EV_REPORT_JSON, 3, &rc);
	assert_int_equal(rc, 0);
	assert_true(ev_utf8_valid(text, strlen(text)));
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, text, strlen(text), "report"), 0);
	assert_int_equal((int64_t)ev_json_num(j, "run_id", -1), run);
	assert_string_equal(ev_json_str(j, "model", ""), "model-x");
	assert_string_equal(ev_json_str(j, "status", ""), "finished");
	assert_true(ev_str_ends(ev_json_str(j, "created", ""), "Z"));
	assert_true(ev_str_ends(ev_json_str(j, "finished", ""), "Z"));
	assert_true(ev_json_bool(j, "complete", false));
	const cJSON *config = cJSON_GetObjectItem(j, "config");
	assert_true(cJSON_IsObject(config));
	assert_true(ev_json_num(config, "temperature", -1) == 0);

	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "suites")), 2);
	const cJSON *a = suite_named(j, "alpha");
	assert_true(fabs(ev_json_num(a, "score", -1) - 0.6) < 1e-9);
	assert_true(fabs(ev_json_num(a, "ci_low", -1) - 0.4) < 1e-9);
	assert_true(fabs(ev_json_num(a, "ci_high", -1) - 0.8) < 1e-9);
	assert_true(fabs(ev_json_num(a, "stderr", -1) - 0.1) < 1e-9);
	assert_true(ev_json_num(a, "n", -1) == 10);
	assert_true(ev_json_num(a, "errors", -1) == 1);
	assert_true(ev_json_num(cJSON_GetObjectItem(a, "failures"), "wrong_answer", -1) == 3);

	/* Lowest mean first, ties by id, at most 3; a1 (all passed) never listed. */
	const cJSON *mf = cJSON_GetObjectItem(a, "most_failed");
	assert_int_equal(cJSON_GetArraySize(mf), 3);
	const cJSON *f0 = cJSON_GetArrayItem(mf, 0), *f1 = cJSON_GetArrayItem(mf, 1), *f2 = cJSON_GetArrayItem(mf, 2);
	assert_string_equal(ev_json_str(f0, "id", ""), "a3");
	assert_string_equal(ev_json_str(f1, "id", ""), "a4");
	assert_string_equal(ev_json_str(f2, "id", ""), "a2");
	assert_true(ev_json_num(f0, "score", -1) == 0);
	assert_true(ev_json_num(f2, "score", -1) == 0.5);
	assert_string_equal(ev_json_str(f0, "reason", ""), "wrong_answer");
	assert_string_equal(ev_json_str(f1, "reason", ""), "timeout");
	assert_string_equal(ev_json_str(f1, "answer", ""), "deadline of 60 s passed");
	assert_string_equal(ev_json_str(f2, "answer", ""), "x|y\nz");
	const char *ans = ev_json_str(f0, "answer", "");
	assert_int_equal(strlen(ans), 203); /* 200 characters and "..." */
	assert_true(ev_str_ends(ans, "y..."));

	const cJSON *b = suite_named(j, "beta");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(b, "most_failed")), 0);
	cJSON_Delete(j);
	free(text);

	/* Defaults (10 listed) include a5 too. */
	text = report(t, run, EV_REPORT_JSON, 10, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(ev_json_parse(&j, text, strlen(text), "report"), 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(suite_named(j, "alpha"), "most_failed")), 4);
	cJSON_Delete(j);
	free(text);
	ev_tracker_close(t);
	free(path);
}

static void markdown_report_has_tables_and_escapes_cells(void **state)
{
	(void)state;
	char *path = tf_db_path("report-md");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-x");
	fill(t, run);
	assert_int_equal(ev_tracker_run_set_summary(t, run, SUMMARY), 0);
	assert_int_equal(ev_tracker_run_set_status(t, run, "finished"), 0);

	int rc;
	char *md = report(t, run, EV_REPORT_MD, 10, &rc);
	assert_int_equal(rc, 0);
	print_message("%s", md);
	char *title = ev_asprintf("# Run %lld: model-x\n", (long long)run);
	assert_true(ev_str_starts(md, title));
	free(title);
	assert_non_null(strstr(md, "- Status: finished\n"));
	assert_non_null(strstr(md, "- Created: 20"));
	assert_non_null(strstr(md, "| suite | score | 95% CI | n | errors |"));
	assert_non_null(strstr(md, "| alpha | 0.600 | [0.400, 0.800] | 10 | 1 |\n"));
	assert_non_null(strstr(md, "| beta | 1.000 | [1.000, 1.000] | 1 | 0 |\n"));
	assert_non_null(strstr(md, "| wrong_answer | 3 |\n"));
	assert_non_null(strstr(md, "| timeout | 1 |\n"));
	assert_non_null(strstr(md, "| a3 | 0.000 | wrong_answer | yyyy"));
	assert_non_null(strstr(md, "| a2 | 0.500 | wrong_answer | x\\|y<br>z |\n"));
	assert_non_null(strstr(md, "| a5 | 0.750 |  | half |\n"));
	assert_null(strstr(md, "| a1 |"));
	assert_null(strstr(md, "Complete: no"));
	/* a3's answer is cut: no line holds 201 y's. */
	char ys[202];
	memset(ys, 'y', 201);
	ys[201] = 0;
	assert_null(strstr(md, ys));
	free(md);
	ev_tracker_close(t);
	free(path);
}

/* evald report prints Markdown to the terminal: names and answers from the
 * tracker keep their text but lose their terminal controls. */
static void markdown_report_has_no_terminal_controls(void **state)
{
	(void)state;
	char *path = tf_db_path("report-md-controls");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "m\x1b[2Jx");
	tf_put(t, run, "alpha", "s\x9b" "1", 0, 0.0, "wrong_answer", "a\x1b]0;pwned\x07" "b\rc");
	int rc;
	char *md = report(t, run, EV_REPORT_MD, 10, &rc);
	assert_int_equal(rc, 0);
	for (const unsigned char *p = (const unsigned char *)md; *p; p++)
		if ((*p < 0x20 && *p != '\n') || *p == 0x7f || (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
			fail_msg("control byte 0x%02x at %td", *p, (const char *)p - md);
	assert_non_null(strstr(md, "# Run "));
	assert_non_null(strstr(md, ": m?[2Jx\n"));
	assert_non_null(strstr(md, "a?]0;pwned?bc"));
	free(md);
	ev_tracker_close(t);
	free(path);
}

static void unfinished_run_figures_are_computed_without_ci(void **state)
{
	(void)state;
	char *path = tf_db_path("report-partial");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-x");
	fill(t, run);
	/* gamma is not among the planned suites: it comes from the results. */
	tf_put(t, run, "gamma", "g1", 0, 0, "no_answer", NULL);

	int rc;
	char *text = report(t, run, EV_REPORT_JSON, 10, &rc);
	assert_int_equal(rc, 0);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, text, strlen(text), "report"), 0);
	assert_false(ev_json_bool(j, "complete", true));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "finished")));
	const cJSON *a = suite_named(j, "alpha");
	assert_true(ev_json_num(a, "n", -1) == 10);
	assert_true(ev_json_num(a, "errors", -1) == 2);
	assert_true(fabs(ev_json_num(a, "score", -1) - 4.5 / 8) < 1e-9); /* errors excluded */
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(a, "ci_low")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(a, "ci_high")));
	const cJSON *fail = cJSON_GetObjectItem(a, "failures");
	assert_true(ev_json_num(fail, "wrong_answer", -1) == 3);
	assert_true(ev_json_num(fail, "timeout", -1) == 2);
	const cJSON *g = suite_named(j, "gamma");
	assert_true(ev_json_num(g, "n", -1) == 1);
	assert_true(ev_json_num(g, "score", -1) == 0);
	cJSON_Delete(j);
	free(text);

	char *md = report(t, run, EV_REPORT_MD, 10, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(md, "Complete: no"));
	assert_non_null(strstr(md, "| alpha | 0.562 | - | 10 | 2 |\n"));
	assert_non_null(strstr(md, "| gamma | 0.000 | - | 1 | 0 |\n"));
	free(md);
	ev_tracker_close(t);
	free(path);
}

static void planned_suite_without_results_is_listed(void **state)
{
	(void)state;
	char *path = tf_db_path("report-planned");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-x"); /* plans alpha and beta */
	tf_put(t, run, "alpha", "a1", 0, 1, "", "ok");
	int rc;
	char *text = report(t, run, EV_REPORT_JSON, 10, &rc);
	assert_int_equal(rc, 0);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, text, strlen(text), "report"), 0);
	const cJSON *b = suite_named(j, "beta");
	assert_true(ev_json_num(b, "n", -1) == 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "score")));
	cJSON_Delete(j);
	free(text);
	ev_tracker_close(t);
	free(path);
}

static void bad_requests_and_bad_summaries_are_clear_errors(void **state)
{
	(void)state;
	char *path = tf_db_path("report-bad");
	ev_tracker *t = tf_open(path);
	int64_t run = tf_run(t, "model-x");
	int rc;
	char *text = report(t, run + 5, EV_REPORT_MD, 10, &rc);
	assert_int_equal(rc, EV_E_NOTFOUND);
	free(text);
	text = report(t, run, EV_REPORT_MD, -1, &rc);
	assert_int_equal(rc, EV_E_INVALID);
	free(text);
	/* A summary damaged behind the tracker's back. */
	tf_exec(path, "UPDATE runs SET summary_json = '{\"suites\": [' ");
	text = report(t, run, EV_REPORT_JSON, 10, &rc);
	assert_int_equal(rc, EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "summary_json"));
	free(text);
	tf_exec(path, "UPDATE runs SET summary_json = '{\"suites\": {}}' ");
	text = report(t, run, EV_REPORT_JSON, 10, &rc);
	assert_int_equal(rc, EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "suites"));
	free(text);
	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_report_of_finished_run),
		cmocka_unit_test(markdown_report_has_tables_and_escapes_cells),
		cmocka_unit_test(markdown_report_has_no_terminal_controls),
		cmocka_unit_test(unfinished_run_figures_are_computed_without_ci),
		cmocka_unit_test(planned_suite_without_results_is_listed),
		cmocka_unit_test(bad_requests_and_bad_summaries_are_clear_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
