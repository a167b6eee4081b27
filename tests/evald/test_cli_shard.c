/* Shards: `run --shard K/N` runs split a suite disjointly, and
 * `evald merge` joins them into a run with the same scores as one
 * unsharded run; merging overlapping runs is refused. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static cJSON *run_json(const char *db, const char *url, const char *suite, const char *shard)
{
	char *out = NULL;
	const char *with[] = {tu_evald(), "--db", db, "run", "--model", url, "--suite", suite, "--shard", shard, "--json",
	                      NULL};
	const char *without[] = {tu_evald(), "--db", db, "run", "--model", url, "--suite", suite, "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, shard ? with : without), 0);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	free(out);
	return j;
}

static double suite_num(const cJSON *j, const char *key)
{
	return ev_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), key, -1);
}

static void shards_are_disjoint_and_merge_to_the_whole(void **st)
{
	(void)st;
	tu_server srv;
	assert_int_equal(tu_server_start(&srv, NULL), 0);
	char *dir = tu_tmpdir("cli-shard");
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 60; i++)
		ev_buf_printf(&b, "{\"id\":\"t%02d\",\"input\":\"token %d\",\"target\":\"%s\"}\n", i, i, i % 4 ? "token" : "x");
	char *suite = tu_write(dir, "s.jsonl", b.data);
	ev_buf_free(&b);
	char *db = tu_path(dir, "evald.db");

	cJSON *whole = run_json(db, srv.url, suite, NULL);
	cJSON *a = run_json(db, srv.url, suite, "0/2");
	cJSON *c = run_json(db, srv.url, suite, "1/2");
	int na = (int)suite_num(a, "n"), nc = (int)suite_num(c, "n");
	assert_int_equal(na + nc, 60);
	assert_true(na > 10 && nc > 10);

	char *out = NULL, *err = NULL;
	const char *merge[] = {tu_evald(), "--db", db, "merge", "2", "3", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, merge), 0);
	cJSON *m = cJSON_Parse(out);
	assert_non_null(m);
	assert_int_equal((int)suite_num(m, "n"), 60);
	assert_true(suite_num(m, "score") == suite_num(whole, "score"));
	assert_true(suite_num(m, "ci_low") == suite_num(whole, "ci_low"));
	assert_true(suite_num(m, "ci_high") == suite_num(whole, "ci_high"));
	free(out);
	free(err);

	/* A run merged with itself is not a set of disjoint shards. */
	const char *bad[] = {tu_evald(), "--db", db, "merge", "2", "2", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, bad), 1);
	assert_non_null(strstr(err, "disjoint"));
	free(err);

	cJSON_Delete(whole), cJSON_Delete(a), cJSON_Delete(c), cJSON_Delete(m);
	free(suite), free(db), free(dir);
	tu_server_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shards_are_disjoint_and_merge_to_the_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
