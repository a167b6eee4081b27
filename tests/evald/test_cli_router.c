/* Routing live: `evald run --router ROUTES --model URL1 --model URL2` sends
 * each sample to the model its category routes to and stores which model
 * answered. Two fixture servers answer opposite halves of a suite right
 * (alpha the math samples, beta the text ones): each alone scores 0.5;
 * `evald route` over their runs saves the rule it learned (math to alpha,
 * text to beta), and the run routed by that file scores 1.0 with every
 * request at the right server under that server's model name; a spec
 * routing the other way scores 0; routing by a classifier's label (by=KEY)
 * works the same; the run stores the routing itself, not the file's path;
 * bad routes are refused before anything runs. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *dir, *db, *suite;

static char *run_json(const char *const *extra)
{
	const char *argv[32] = {tu_evald(), "--db", db, "-q", "run", "--suite", suite, "--no-cache", "--json"};
	int n = 9;
	for (int i = 0; extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	char *out = NULL, *err = NULL;
	if (tu_run(&out, &err, NULL, argv))
		fail_msg("run: %s", err);
	free(err);
	return out;
}

static double score_of(const char *out)
{
	cJSON *j = cJSON_Parse(out);
	double s = ev_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), "score", -1);
	cJSON_Delete(j);
	return s;
}

static long count(const char *where)
{
	char *o = NULL, *e = NULL;
	if (tu_sh(&o, &e, "sqlite3 %s \"SELECT count(*) FROM results WHERE %s\"", db, where))
		fail_msg("sqlite3: %s", e);
	long n = atol(o);
	free(o), free(e);
	return n;
}

static void routes_samples_between_models(void **state)
{
	(void)state;
	dir = tu_tmpdir("router");
	db = tu_path(dir, "evald.db");
	ev_buf s = EV_BUF_INIT(1 << 16), ta = EV_BUF_INIT(1 << 16), tb = EV_BUF_INIT(1 << 16);
	for (int i = 0; i < 8; i++) {
		bool math = i % 2 == 0;
		ev_buf_printf(&s,
		              "{\"id\":\"s%d\",\"input\":\"question %d\",\"target\":\"answer%d\","
		              "\"metadata\":{\"category\":\"%s\",\"label\":\"%s\"}}\n",
		              i, i, i, math ? "math" : "text", math ? "hard" : "easy");
	}
	/* alpha right on math, beta right on text; each wrong on the other */
	for (int i = 0; i < 8; i++) {
		bool math = i % 2 == 0;
		ev_buf_printf(&ta, "{\"match\":\"question %d\",\"reply\":\"%s%d\"}\n", i, math ? "answer" : "nothing", i);
		ev_buf_printf(&tb, "{\"match\":\"question %d\",\"reply\":\"%s%d\"}\n", i, math ? "nothing" : "answer", i);
	}
	suite = tu_write(dir, "mixed.jsonl", s.data);
	char *fa = tu_write(dir, "alpha.jsonl", ta.data), *fb = tu_write(dir, "beta.jsonl", tb.data);
	ev_buf_free(&s), ev_buf_free(&ta), ev_buf_free(&tb);
	tu_server a, b;
	const char *aa[] = {"--table", fa, "--model", "alpha", NULL}, *ba[] = {"--table", fb, "--model", "beta", NULL};
	assert_int_equal(tu_server_start(&a, aa), 0);
	assert_int_equal(tu_server_start(&b, ba), 0);

	/* each alone: half right */
	const char *ea[] = {"--model", a.url, NULL}, *eb[] = {"--model", b.url, NULL};
	char *out = run_json(ea);
	assert_true(score_of(out) == 0.5);
	free(out);
	out = run_json(eb);
	assert_true(score_of(out) == 0.5);
	free(out);

	/* the rule learned offline, saved, then applied live */
	char *rfile = tu_path(dir, "router.json");
	const char *route[] = {tu_evald(), "--db", db, "-q", "route", "1", "2", "--save-router", rfile, "--json", NULL};
	char *rout = NULL, *rerr = NULL;
	if (tu_run(&rout, &rerr, NULL, route))
		fail_msg("route: %s", rerr);
	free(rout), free(rerr);
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, rfile, 1 << 20), 0);
	cJSON *tj = cJSON_Parse(text);
	free(text);
	assert_true(ev_json_num(cJSON_GetObjectItem(tj, "routes"), "math", 0) == 1);
	assert_true(ev_json_num(cJSON_GetObjectItem(tj, "routes"), "text", 0) == 2);
	cJSON_Delete(tj);

	const char *er[] = {"--model", a.url, "--model", b.url, "--router", rfile, NULL};
	out = run_json(er);
	assert_true(score_of(out) == 1.0);
	cJSON *j = cJSON_Parse(out);
	const cJSON *rt = cJSON_GetObjectItem(j, "routing"), *m;
	assert_non_null(rt);
	int seen = 0;
	cJSON_ArrayForEach(m, cJSON_GetObjectItem(rt, "models"))
	{
		assert_true(ev_json_num(m, "answered", 0) == 4);
		assert_true(ev_json_num(m, "score", 0) == 1.0);
		seen++;
	}
	assert_int_equal(seen, 2);
	cJSON_Delete(j);
	free(out);
	/* which model answered, stored per result; each request named its server's model */
	assert_int_equal(count("run_id = 3 AND answered_by = 'alpha' AND metadata_json LIKE '%\\\"math\\\"%' AND "
	                       "request_json LIKE '%\\\"model\\\":\\\"alpha\\\"%'"),
	                 4);
	assert_int_equal(count("run_id = 3 AND answered_by = 'beta' AND metadata_json LIKE '%\\\"text\\\"%' AND "
	                       "request_json LIKE '%\\\"model\\\":\\\"beta\\\"%'"),
	                 4);
	/* the run keeps the routing itself (the file may go) */
	char *o2 = NULL, *e2 = NULL;
	assert_int_equal(tu_sh(&o2, &e2, "sqlite3 %s \"SELECT config_json FROM runs WHERE id = 3\"", db), 0);
	assert_non_null(strstr(o2, "\"router\":\"math=1,text=2,*="));
	free(o2), free(e2);

	/* routed the wrong way round: every answer wrong */
	const char *ew[] = {"--model", a.url, "--model", b.url, "--router", "math=2,*=1", NULL};
	out = run_json(ew);
	assert_true(score_of(out) == 0.0);
	free(out);
	/* by a classifier's label in the metadata */
	const char *el[] = {"--model", a.url, "--model", b.url, "--router", "by=label,hard=1,easy=2", NULL};
	out = run_json(el);
	assert_true(score_of(out) == 1.0);
	free(out);

	/* refused before anything runs */
	static const char *const bad[][2] = {
		{"math=3,*=1", "model 3"},
		{"math", "neither CATEGORY=N"},
		{"math=x", "whole number"},
		{"math=1,math=2", "routed twice"},
		{"/nonexistent/router.json", "router.json"},
	};
	long before = count("1");
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		const char *argv[] = {tu_evald(), "--db", db, "-q", "run", "--suite", suite, "--model", a.url, "--model",
		                      b.url, "--router", bad[i][0], NULL};
		char *err = NULL;
		assert_int_not_equal(tu_run(NULL, &err, NULL, argv), 0);
		if (!strstr(err, bad[i][1]))
			fail_msg("--router %s: expected '%s' in: %s", bad[i][0], bad[i][1], err);
		free(err);
	}
	const char *one[] = {tu_evald(), "--db", db, "-q", "run", "--suite", suite, "--model", a.url, "--router", "*=1", NULL};
	char *err = NULL;
	assert_int_not_equal(tu_run(NULL, &err, NULL, one), 0);
	assert_non_null(strstr(err, "2 to 16 --model"));
	free(err);
	assert_int_equal(count("1"), before);

	tu_server_stop(&a), tu_server_stop(&b);
	free(fa), free(fb), free(rfile), free(suite), free(db), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(routes_samples_between_models),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
