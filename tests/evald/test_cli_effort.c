/* evald run --effort: thinking effort as a run dimension against the
 * fixture server (which thinks longer at higher reasoning_effort, or, with
 * --ignore-effort, ignores it): each suite runs once a level as its own
 * suite "NAME@effort=LEVEL", each request carries its level, the summary's
 * "effort" has every level's score and completion tokens and says whether
 * token use rises; a backend that ignores the setting is flagged; bad
 * levels are refused before anything runs. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *run_effort(const tu_server *srv, const char *db, const char *suite, const char *levels, char **err)
{
	char *out = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "-q", "run", "--model", srv->url, "--model-name", "fx",
	                      "--suite", suite, "--effort", levels, "--no-cache", "--json", NULL};
	int rc = tu_run(&out, err, NULL, argv);
	if (rc != 0)
		fail_msg("run: %d\n%s", rc, *err);
	return out;
}

static void effort_levels(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("effort"), *db = tu_path(dir, "evald.db");
	ev_buf s = EV_BUF_INIT(1 << 16);
	for (int i = 0; i < 6; i++)
		ev_buf_printf(&s, "{\"id\":\"q%d\",\"input\":\"say tok%d\",\"target\":\"tok%d\"}\n", i, i, i);
	char *suite = tu_write(dir, "eff.jsonl", s.data);
	ev_buf_free(&s);
	tu_server srv, deaf;
	const char *none[] = {NULL}, *ignore[] = {"--ignore-effort", NULL};
	assert_int_equal(tu_server_start(&srv, none), 0);
	assert_int_equal(tu_server_start(&deaf, ignore), 0);

	char *err = NULL, *out = run_effort(&srv, db, suite, "none,low,medium,high", &err);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	const cJSON *eff = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), "effort");
	if (!eff)
		eff = cJSON_GetObjectItem(j, "effort");
	assert_non_null(eff);
	const cJSON *su = cJSON_GetArrayItem(cJSON_GetObjectItem(eff, "suites"), 0);
	assert_string_equal(ev_json_str(su, "name", ""), "eff");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(su, "tokens_rise")));
	const cJSON *lv = cJSON_GetObjectItem(su, "levels");
	assert_int_equal(cJSON_GetArraySize(lv), 4);
	static const char *const want[4] = {"none", "low", "medium", "high"};
	double prev = -1;
	for (int k = 0; k < 4; k++) {
		const cJSON *p = cJSON_GetArrayItem(lv, k);
		assert_string_equal(ev_json_str(p, "level", ""), want[k]);
		assert_true(ev_json_num(p, "n", 0) == 6);
		assert_true(ev_json_num(p, "completion_tokens", 0) > prev);
		prev = ev_json_num(p, "completion_tokens", 0);
	}
	assert_null(strstr(err, "may ignore"));
	cJSON_Delete(j);
	free(out), free(err);
	/* the reports: a table of levels (text), a chart of accuracy against tokens (HTML) */
	const char *md[] = {tu_evald(), "--db", db, "report", "1", NULL};
	const char *html[] = {tu_evald(), "--db", db, "report", "1", "--format", "html", NULL};
	char *page = NULL;
	assert_int_equal(tu_run(&page, NULL, NULL, md), 0);
	assert_non_null(strstr(page, "## Thinking effort"));
	assert_non_null(strstr(page, "| medium | 1.000 |"));
	free(page);
	assert_int_equal(tu_run(&page, NULL, NULL, html), 0);
	assert_non_null(strstr(page, "<svg class=\"chart effort\""));
	assert_non_null(strstr(page, "<g class=\"level\" data-level=\"high\""));
	free(page);
	/* each request carries its level */
	char *o2 = NULL, *e2 = NULL;
	assert_int_equal(tu_sh(&o2, &e2, "sqlite3 %s \"SELECT count(*) FROM results WHERE suite = 'eff@effort=medium' AND "
	                                 "request_json LIKE '%%\\\"reasoning_effort\\\":\\\"medium\\\"%%'\"",
	                       db),
	                 0);
	assert_int_equal(atoi(o2), 6);
	free(o2), free(e2);

	/* a backend that ignores the setting is flagged */
	err = NULL;
	out = run_effort(&deaf, db, suite, "low,high", &err);
	assert_non_null(strstr(err, "do not rise with --effort"));
	j = cJSON_Parse(out);
	eff = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), "effort");
	if (!eff)
		eff = cJSON_GetObjectItem(j, "effort");
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(eff, "suites"), 0), "tokens_rise")));
	cJSON_Delete(j);
	free(out), free(err);

	/* bad levels: refused, nothing run */
	const char *bad[] = {tu_evald(), "--db", db, "-q", "run", "--model", srv.url, "--suite", suite, "--effort",
	                     "low,,high", NULL};
	err = NULL;
	assert_int_not_equal(tu_run(NULL, &err, NULL, bad), 0);
	assert_non_null(strstr(err, "--effort"));
	free(err);
	tu_server_stop(&srv), tu_server_stop(&deaf);
	free(suite), free(db), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(effort_levels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
