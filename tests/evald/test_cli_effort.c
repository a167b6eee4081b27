/* evald run --effort: thinking effort as a run dimension against the
 * fixture server (which thinks longer at higher reasoning_effort, or, with
 * --ignore-effort, ignores it): each suite runs once a level as its own
 * suite "NAME@effort=LEVEL", each request carries its level, the summary's
 * "effort" has every level's score and completion tokens and says whether
 * token use rises; a backend that ignores the setting is flagged; bad
 * levels are refused before anything runs. */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* One row per result of a suite: thinking, completion tokens, response. */
typedef struct {
	int think, completion;
	char response[4096];
} row_t;

static int rows_of(const char *db, const char *suite, row_t *rows, int max)
{
	char *out = NULL, *err = NULL;
	/* the response's newlines and separators out of the way of the split */
	if (tu_sh(&out, &err,
	          "sqlite3 -separator '\t' %s \"SELECT thinking_tokens, completion_tokens, "
	          "replace(replace(response, char(10), ' '), char(9), ' ') FROM results WHERE suite = '%s' ORDER BY run_id, sample_id\"",
	          db, suite))
		fail_msg("sqlite3: %s", err);
	int n = 0;
	for (char *line = strtok(out, "\n"); line && n < max; line = strtok(NULL, "\n"), n++) {
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		assert_non_null(t2);
		rows[n].think = atoi(line);
		rows[n].completion = atoi(t1 + 1);
		snprintf(rows[n].response, sizeof rows[n].response, "%s", t2 + 1);
	}
	free(out), free(err);
	return n;
}

/* The bundled engine enforces a thinking budget: on a checkpoint whose
 * template opens a <think> block (a random model never closes it itself,
 * or closes it early), every answer at budget B has at most B thinking
 * tokens and a closed block; at least one reaches the budget exactly;
 * "none" renders the template with enable_thinking false (the block closed
 * in the prompt: no thinking); the summary's levels rise in thinking
 * tokens and carry paired comparisons. Through `evald serve` as an
 * OpenAI-compatible server the budgets go as thinking_budget and the
 * thinking tokens come back in usage, equal to the engine's own. */
static void engine_enforces_thinking_budgets(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("effort-engine"), *db = tu_path(dir, "evald.db"), *ckpt = tu_path(dir, "ckpt");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "llama", "--out", ckpt, "--thinking", "--vocab",
	                    "600", "--seed", "11", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	char *suite = tu_write(dir, "think.jsonl",
	                       "{\"id\":\"a\",\"input\":\"what is two and two\",\"target\":\"4\"}\n"
	                       "{\"id\":\"b\",\"input\":\"name a colour\",\"target\":\"red\"}\n"
	                       "{\"id\":\"c\",\"input\":\"count to three\",\"target\":\"3\"}\n"
	                       "{\"id\":\"d\",\"input\":\"the capital of France\",\"target\":\"Paris\"}\n");
	const char *run[] = {tu_evald(), "--db", db, "-q", "run", "--model", ckpt, "--suite", suite, "--effort",
	                     "none,4,16,low", "--max-tokens", "8", "--json", NULL};
	char *out = NULL, *err = NULL;
	if (tu_run(&out, &err, NULL, run))
		fail_msg("run: %s", err);
	static const char *const lv[] = {"none", "4", "16", "low"};
	static const int budget[] = {0, 4, 16, 256};
	row_t rows[8];
	for (int k = 0; k < 4; k++) {
		char name[64];
		snprintf(name, sizeof name, "think@effort=%s", lv[k]);
		int n = rows_of(db, name, rows, 8), at_budget = 0;
		assert_int_equal(n, 4);
		for (int i = 0; i < n; i++) {
			if (rows[i].think > budget[k] || rows[i].completion > 8 + budget[k] + 1)
				fail_msg("%s: %d thinking, %d completion tokens over budget %d", name, rows[i].think,
				         rows[i].completion, budget[k]);
			at_budget += rows[i].think == budget[k];
			if (budget[k] > 0 && budget[k] < 256 && !strstr(rows[i].response, "</think>"))
				fail_msg("%s: the block was never closed: %s", name, rows[i].response);
		}
		if (k < 3)
			assert_true(at_budget >= 1); /* the random model thinks on: the budget closes it */
	}
	cJSON *j = cJSON_Parse(out);
	const cJSON *su = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "effort"), "suites"), 0);
	assert_non_null(su);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(su, "tokens_rise")));
	double prev = -1;
	for (int k = 0; k < 4; k++) {
		const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(su, "levels"), k);
		double th = ev_json_num(p, "thinking_tokens", -1);
		assert_true(th >= prev && th <= budget[k]);
		prev = th;
		assert_true(ev_json_num(p, "answer_tokens", -1) >= 0);
		const cJSON *vs = cJSON_GetObjectItem(p, "vs_previous");
		if (k) {
			assert_non_null(vs);
			assert_string_equal(ev_json_str(vs, "level", ""), lv[k - 1]);
			assert_true(ev_json_num(vs, "n", 0) == 4);
		} else {
			assert_null(vs);
		}
	}
	cJSON_Delete(j);
	free(out), free(err);

	/* a level the engine does not know: every result an error naming it */
	const char *bad[] = {tu_evald(), "--db", db, "-q", "run", "--model", ckpt, "--suite", suite, "--effort", "extreme",
	                     "--max-tokens", "4", NULL};
	err = NULL;
	assert_int_not_equal(tu_run(NULL, &err, NULL, bad), 0);
	char *o2 = NULL, *e2 = NULL;
	assert_int_equal(tu_sh(&o2, &e2, "sqlite3 %s \"SELECT count(*) FROM results WHERE suite = 'think@effort=extreme' "
	                                 "AND detail LIKE '%%reasoning_effort ''extreme''%%'\"", db), 0);
	assert_int_equal(atoi(o2), 4);
	free(o2), free(e2), free(err);

	/* through evald serve: budgets as thinking_budget, thinking counted in usage */
	char *sdb = tu_path(dir, "serve.db");
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(tu_evald(), tu_evald(), "-q", "--db", sdb, "serve", "--model", ckpt, "--port", "0", "--print-port",
		      (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	int port = 0;
	assert_true(f && fscanf(f, "%d", &port) == 1);
	fclose(f);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
	const char *via[] = {tu_evald(), "--db", db, "-q", "run", "--model", url, "--suite", suite, "--effort", "4,16",
	                     "--max-tokens", "8", "--temperature", "0", "--no-cache", NULL};
	err = NULL;
	int rc = tu_run(NULL, &err, NULL, via);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	if (rc)
		fail_msg("run through serve: %s", err);
	free(err);
	for (int k = 1; k < 3; k++) {
		char q[256];
		snprintf(q, sizeof q,
		         "sqlite3 %s \"SELECT group_concat(thinking_tokens) FROM (SELECT thinking_tokens FROM results WHERE "
		         "suite = 'think@effort=%s' ORDER BY run_id, sample_id)\"",
		         db, lv[k]);
		o2 = e2 = NULL;
		assert_int_equal(tu_sh(&o2, &e2, "%s", q), 0);
		/* the engine run (run 1) and the served one (run 3): the same counts */
		char *comma = o2;
		for (int c = 0; c < 4 && comma; c++)
			comma = strchr(comma + 1, ',');
		assert_non_null(comma);
		*comma = 0;
		assert_int_equal(strncmp(o2, comma + 1, strlen(o2)), 0);
		free(o2), free(e2);
	}
	o2 = e2 = NULL;
	assert_int_equal(tu_sh(&o2, &e2, "sqlite3 %s \"SELECT count(*) FROM results WHERE run_id = 3 AND "
	                                 "request_json LIKE '%%\\\"thinking_budget\\\":16%%'\"", db), 0);
	assert_int_equal(atoi(o2), 4);
	free(o2), free(e2);
	free(sdb), free(suite), free(ckpt), free(db), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(effort_levels),
		cmocka_unit_test(engine_enforces_thinking_budgets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
