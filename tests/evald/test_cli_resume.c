/* A run killed with SIGKILL mid-way loses no committed result, and
 * `evald run --resume` finishes the rest with the same final scores as an
 * uninterrupted run of the same suite. */
#include "testutil.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#define N 240

static long count_results(const char *db)
{
	sqlite3 *h = NULL;
	long n = -1;
	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(h, 2000);
		sqlite3_stmt *st = NULL;
		if (sqlite3_prepare_v2(h, "SELECT count(*) FROM results", -1, &st, NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
	return n;
}

static char *integrity(const char *db)
{
	char *out = NULL;
	tu_sh(&out, NULL, "sqlite3 '%s' 'PRAGMA integrity_check'", db);
	return out;
}

static void killed_run_resumes_to_identical_scores(void **st)
{
	(void)st;
	tu_server srv;
	const char *args[] = {"--threads", "4", NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
	char *dir = tu_tmpdir("cli-resume");
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < N; i++)
		ev_buf_printf(&b, "{\"id\":\"s%03d\",\"input\":\"item %d [[latency=25]]\",\"target\":\"%s\"}\n", i, i,
		              i % 3 ? "item" : "nope");
	char *suite = tu_write(dir, "long.jsonl", b.data);
	ev_buf_free(&b);
	char *db1 = tu_path(dir, "killed.db"), *db2 = tu_path(dir, "whole.db");

	/* The reference: one uninterrupted run. */
	char *whole = NULL;
	const char *ref[] = {tu_evald(), "--db", db2, "run", "--model", srv.url, "--suite", suite, "--concurrency", "4",
	                     "--json", NULL};
	assert_int_equal(tu_run(&whole, NULL, NULL, ref), 0);

	/* The same run, killed once some results are in. */
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", 1);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execl(tu_evald(), tu_evald(), "--db", db1, "run", "--model", srv.url, "--suite", suite, "--concurrency", "4",
		      (char *)NULL);
		_exit(127);
	}
	long seen = 0;
	for (int i = 0; i < 400 && seen < N / 3; i++) {
		ev_sleep(0.05);
		seen = count_results(db1);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	long kept = count_results(db1);
	assert_true(kept >= N / 3);
	assert_true(kept < N);
	char *ic = integrity(db1);
	assert_non_null(strstr(ic, "ok"));
	free(ic);

	/* The killed run is still marked running, and resume finishes it. */
	char *out = NULL, *err = NULL;
	const char *runs[] = {tu_evald(), "--db", db1, "runs", "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, runs), 0);
	assert_non_null(strstr(out, "\"running\""));
	free(out);
	const char *res[] = {tu_evald(), "--db", db1, "run", "--resume", "1", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, res), 0);
	assert_int_equal(count_results(db1), N);

	cJSON *a = cJSON_Parse(whole), *c = cJSON_Parse(out);
	assert_non_null(a);
	assert_non_null(c);
	cJSON *sa = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "suites"), 0);
	cJSON *sc = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "suites"), 0);
	assert_int_equal((int)ev_json_num(sa, "n", 0), N);
	assert_int_equal((int)ev_json_num(sc, "n", 0), N);
	assert_true(ev_json_num(sa, "score", -1) == ev_json_num(sc, "score", -2));
	assert_true(ev_json_num(sa, "ci_low", -1) == ev_json_num(sc, "ci_low", -2));
	assert_true(ev_json_num(sa, "ci_high", -1) == ev_json_num(sc, "ci_high", -2));
	assert_true(ev_json_num(sa, "score", -1) > 0.66 && ev_json_num(sa, "score", -1) < 0.67);
	cJSON_Delete(a);
	cJSON_Delete(c);
	free(out);
	free(err);
	free(whole);
	free(db1);
	free(db2);
	free(suite);
	free(dir);
	tu_server_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(killed_run_resumes_to_identical_scores),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
