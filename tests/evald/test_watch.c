/* evald watch end to end. A watched folder holds checkpoints served by
 * fixture servers (endpoint.json): a baseline (server A, right on suites X
 * and Y) and a candidate (server B, wrong on 16 of X's 20 samples, right on
 * Y), plus folders that are not complete yet (an index naming a missing
 * shard; a *.partial marker). `watch --once` evaluates the two complete ones
 * (baseline first), files a regression for X only, writes both reports, and
 * leaves the others alone until they are complete. A slow server then keeps
 * a run busy while the watcher is stopped with SIGTERM and killed with
 * SIGKILL; the next `watch --once` resumes the same run to the full count. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static tu_server srv_a, srv_b;
static char *dir, *db, *ck, *reports, *suite_x, *suite_y;

static void write_endpoint(const char *folder, const tu_server *s, const char *model)
{
	char *d = tu_path(ck, folder);
	mkdir(d, 0755);
	char *text = ev_asprintf("{\"url\":\"%s\",\"model\":\"%s\"}\n", s->url, model);
	free(tu_write(d, "endpoint.json", text));
	free(text);
	free(d);
}

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("watch");
	db = tu_path(dir, "evald.db");
	ck = tu_path(dir, "checkpoints");
	reports = tu_path(dir, "reports");
	mkdir(ck, 0755);
	ev_buf x = EV_BUF_INIT(1 << 20), y = EV_BUF_INIT(1 << 20), table = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 20; i++)
		ev_buf_printf(&x, "{\"id\":\"x%02d\",\"input\":\"Question X%02d: say tokX%02d.\",\"target\":\"tokX%02d\"}\n", i,
		              i, i, i);
	for (int i = 0; i < 10; i++)
		ev_buf_printf(&y, "{\"id\":\"y%02d\",\"input\":\"Question Y%02d: say tokY%02d.\",\"target\":\"tokY%02d\"}\n", i,
		              i, i, i);
	for (int i = 0; i < 16; i++)
		ev_buf_printf(&table, "{\"match\":\"Question X%02d:\",\"reply\":\"no idea\"}\n", i);
	suite_x = tu_write(dir, "X.jsonl", x.data);
	suite_y = tu_write(dir, "Y.jsonl", y.data);
	char *tpath = tu_write(dir, "wrong-on-x.jsonl", table.data);
	ev_buf_free(&x);
	ev_buf_free(&y);
	ev_buf_free(&table);
	const char *none[] = {NULL};
	const char *bad[] = {"--table", tpath, NULL};
	int rc = tu_server_start(&srv_a, none) || tu_server_start(&srv_b, bad) ? -1 : 0;
	free(tpath);
	return rc;
}

static int teardown(void **st)
{
	(void)st;
	tu_server_stop(&srv_a);
	tu_server_stop(&srv_b);
	free(suite_x);
	free(suite_y);
	free(reports);
	free(ck);
	free(db);
	free(dir);
	return 0;
}

/* ---- reading the tracker -------------------------------------------------------- */

static long query_long(const char *dbpath, const char *sql)
{
	sqlite3 *h = NULL;
	long n = -1;
	if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(h, 2000);
		sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
			n = sqlite3_column_int64(s, 0);
		sqlite3_finalize(s);
	}
	sqlite3_close(h);
	return n;
}

/* `evald watch --status --json`: the row of folder `name` (a copy), or NULL. */
static cJSON *status_of(const char *dbpath, const char *name)
{
	char *out = NULL;
	const char *argv[] = {tu_evald(), "--db", dbpath, "watch", "--status", "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, argv), 0);
	cJSON *j = cJSON_Parse(out ? out : ""), *found = NULL;
	if (!j)
		fail_msg("watch --status: not JSON: %s", out ? out : "");
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "checkpoints"))
	{
		const char *p = ev_json_str(r, "path", "");
		const char *slash = strrchr(p, '/');
		if (slash && !strcmp(slash + 1, name))
			found = cJSON_Duplicate(r, 1);
	}
	cJSON_Delete(j);
	free(out);
	return found;
}

static char *state_of(const char *dbpath, const char *name)
{
	cJSON *r = status_of(dbpath, name);
	char *s = ev_strdup(r ? ev_json_str(r, "state", "") : "(absent)");
	cJSON_Delete(r);
	return s;
}

static void assert_state(const char *dbpath, const char *name, const char *want)
{
	char *s = state_of(dbpath, name);
	if (strcmp(s, want))
		fail_msg("checkpoint %s: state %s, expected %s", name, s, want);
	free(s);
}

static int watch_once(char **err, const char *dbpath, const char *folder, const char *baseline, const char *suites,
                      const char *extra)
{
	char *out = NULL;
	const char *argv[24] = {tu_evald(), "--db", dbpath, "watch", folder, "--suites", suites, "--baseline", baseline,
	                        "--once", "--settle", "0.2", "--reports", reports, "--no-cache"};
	int n = 15;
	if (extra) {
		argv[n++] = "--concurrency";
		argv[n++] = extra;
	}
	argv[n] = NULL;
	int rc = tu_run(&out, err, NULL, argv);
	free(out);
	return rc;
}

static bool file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static char *suites_arg(void) { return ev_asprintf("%s,%s", suite_x, suite_y); }

/* ---- the tests ------------------------------------------------------------------- */

static void once_evaluates_complete_checkpoints_and_files_regression_for_x_only(void **st)
{
	(void)st;
	write_endpoint("ckpt-base", &srv_a, "ckpt-base");
	write_endpoint("ckpt-0200", &srv_b, "ckpt-0200");
	/* Not complete: an index naming a shard that is not there yet ... */
	char *half = tu_path(ck, "ckpt-0300");
	mkdir(half, 0755);
	free(tu_write(half, "config.json", "{\"model_type\":\"llama\"}"));
	free(tu_write(half, "model.safetensors.index.json",
	              "{\"metadata\":{},\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
	              "\"b.weight\":\"model-00002-of-00002.safetensors\"}}"));
	free(tu_write(half, "model-00001-of-00002.safetensors", "x"));
	/* ... and a served one still being copied. */
	write_endpoint("ckpt-0400", &srv_a, "ckpt-0400");
	char *d400 = tu_path(ck, "ckpt-0400");
	free(tu_write(d400, "notes.txt.partial", "half"));

	char *err = NULL, *suites = suites_arg();
	int rc = watch_once(&err, db, ck, "ckpt-base", suites, NULL);
	if (rc != 0)
		fail_msg("watch exit %d: %s", rc, err);
	/* The baseline went first, and each step was logged. */
	char *b = strstr(err, "ckpt-base: evaluating"), *c = strstr(err, "ckpt-0200: evaluating");
	assert_non_null(b);
	assert_non_null(c);
	assert_true(b < c);
	assert_non_null(strstr(err, "ckpt-0200: comparing run"));
	assert_non_null(strstr(err, "ckpt-0300: not complete yet: shard model-00002-of-00002.safetensors"));
	assert_non_null(strstr(err, "ckpt-0400: not complete yet: notes.txt.partial"));
	free(err);

	assert_state(db, "ckpt-base", "evaluated");
	assert_state(db, "ckpt-0200", "evaluated");
	assert_state(db, "ckpt-0300", "seen");
	assert_state(db, "ckpt-0400", "seen");
	assert_int_equal(query_long(db, "SELECT count(*) FROM runs"), 2);
	assert_int_equal(query_long(db, "SELECT count(*) FROM results"), 60);

	/* One regression, for X, candidate ckpt-0200 against ckpt-base. */
	char *out = NULL;
	const char *list[] = {tu_evald(), "--db", db, "regressions", "list", "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, list), 0);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	const cJSON *regs = cJSON_GetObjectItem(j, "regressions");
	assert_int_equal(cJSON_GetArraySize(regs), 1);
	const cJSON *r = cJSON_GetArrayItem(regs, 0);
	assert_string_equal(ev_json_str(r, "suite", ""), "X");
	assert_string_equal(ev_json_str(r, "baseline_model", ""), "ckpt-base");
	assert_string_equal(ev_json_str(r, "candidate_model", ""), "ckpt-0200");
	assert_int_equal((int)ev_json_num(r, "n_broken", 0), 16);
	assert_float_equal(ev_json_num(r, "delta", 0), -16.0 / 20.0, 1e-9);
	cJSON_Delete(j);
	free(out);

	/* The stored comparison and the reports. */
	cJSON *row = status_of(db, "ckpt-0200");
	const cJSON *cmp = cJSON_GetObjectItem(row, "compare");
	assert_non_null(cmp);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cmp, "suites")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cmp, "regressions")), 1);
	cJSON_Delete(row);
	char *rb = tu_path(reports, "ckpt-base.md"), *rc2 = tu_path(reports, "ckpt-0200.md"),
	     *r3 = tu_path(reports, "ckpt-0300.md");
	char *text = NULL;
	assert_int_equal(ev_file_read(&text, NULL, rc2, 1 << 20), 0);
	assert_non_null(strstr(text, "## Compared with the baseline"));
	assert_non_null(strstr(text, "| X | 20 | 1.000 | 0.200 | -0.800 |"));
	assert_non_null(strstr(text, "#1 filed"));
	free(text);
	assert_true(file_exists(rb));
	assert_false(file_exists(r3));

	/* A second pass changes nothing: nothing is evaluated twice. */
	assert_int_equal(watch_once(NULL, db, ck, "ckpt-base", suites, NULL), 0);
	assert_int_equal(query_long(db, "SELECT count(*) FROM runs"), 2);

	free(rb);
	free(rc2);
	free(r3);
	free(suites);
	free(half);
	free(d400);
}

static void incomplete_folders_are_evaluated_once_complete(void **st)
{
	(void)st;
	char *half = tu_path(ck, "ckpt-0300"), *d400 = tu_path(ck, "ckpt-0400");
	char *marker = tu_path(d400, "notes.txt.partial");
	free(tu_write(half, "model-00002-of-00002.safetensors", "y"));
	assert_int_equal(unlink(marker), 0);

	char *err = NULL, *suites = suites_arg();
	assert_int_equal(watch_once(&err, db, ck, "ckpt-base", suites, NULL), 0);
	/* The served one is now evaluated and compared (no drop: no regression). */
	assert_state(db, "ckpt-0400", "evaluated");
	assert_int_equal(query_long(db, "SELECT count(*) FROM regressions"), 1);
	/* The weights folder is complete now, so it was tried: its run starts
	 * (and fails while these weights are not a real model), it no longer
	 * waits in "seen". */
	char *s = state_of(db, "ckpt-0300");
	if (strcmp(s, "evaluated") && strcmp(s, "failed"))
		fail_msg("ckpt-0300: state %s after its last shard arrived: %s", s, err);
	assert_non_null(strstr(err, "ckpt-0300: complete"));
	free(s);
	free(err);
	free(suites);
	free(marker);
	free(half);
	free(d400);
}

/* Starts `evald watch` on the slow folder in the background. */
static pid_t start_watch(const char *dbpath, const char *folder, const char *suite, bool once)
{
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execl(tu_evald(), tu_evald(), "--db", dbpath, "watch", folder, "--suites", suite, "--baseline", "slow",
		      "--settle", "0.1", "--interval", "0.2", "--reports", reports, "--concurrency", "1", "--no-cache",
		      once ? "--once" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static long wait_results(const char *dbpath, long want)
{
	long n = 0;
	for (int i = 0; i < 300 && n < want; i++) {
		ev_sleep(0.05);
		n = query_long(dbpath, "SELECT count(*) FROM results");
	}
	return n;
}

static void restart_resumes_the_interrupted_run_to_the_full_count(void **st)
{
	(void)st;
	enum { N = 12 };
	tu_server slow;
	const char *none[] = {NULL};
	assert_int_equal(tu_server_start(&slow, none), 0);
	char *sdir = tu_path(dir, "slow-watch"), *sdb = tu_path(dir, "slow.db");
	mkdir(sdir, 0755);
	ev_buf b = EV_BUF_INIT(1 << 16);
	for (int i = 0; i < N; i++)
		ev_buf_printf(&b, "{\"id\":\"z%02d\",\"input\":\"Slow Z%02d [[latency=300]]\",\"target\":\"Z%02d\"}\n", i, i,
		              i);
	char *suite = tu_write(dir, "Z.jsonl", b.data);
	ev_buf_free(&b);
	char *folder = tu_path(sdir, "slow");
	mkdir(folder, 0755);
	char *ep = ev_asprintf("{\"url\":\"%s\",\"model\":\"slow\"}", slow.url);
	free(tu_write(folder, "endpoint.json", ep));
	free(ep);

	/* 1. SIGTERM stops the daemon cleanly between steps: exit 0, the run
	 * marked interrupted, the checkpoint still `running` with its run id. */
	pid_t pid = start_watch(sdb, sdir, suite, false);
	assert_true(wait_results(sdb, 2) >= 2);
	kill(pid, SIGTERM);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_state(sdb, "slow", "running");
	assert_int_equal(query_long(sdb, "SELECT run_id FROM watch_checkpoints"), 1);
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM runs WHERE id = 1 AND status = 'interrupted'"), 1);
	long after_term = query_long(sdb, "SELECT count(*) FROM results");
	assert_true(after_term < N);

	/* 2. A crash: SIGKILL to a watcher that resumed the run. Its child run
	 * dies with it, so nothing keeps writing behind the next watcher. */
	pid = start_watch(sdb, sdir, suite, true);
	assert_true(wait_results(sdb, after_term + 2) >= after_term + 2);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	ev_sleep(0.3);
	long after_kill = query_long(sdb, "SELECT count(*) FROM results");
	assert_true(after_kill < N);
	ev_sleep(0.7);
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM results"), after_kill);
	assert_state(sdb, "slow", "running");

	/* 3. The next watcher finishes the same run to the full count. */
	char *err = NULL, *out = NULL;
	const char *argv[] = {tu_evald(), "--db", sdb, "watch", sdir, "--suites", suite, "--baseline", "slow", "--once",
	                      "--settle", "0.1", "--reports", reports, "--concurrency", "4", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	assert_non_null(strstr(err, "slow: resuming run 1"));
	assert_state(sdb, "slow", "evaluated");
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM runs"), 1);
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM results WHERE run_id = 1"), N);
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
	char *rep = tu_path(reports, "slow.md");
	assert_true(file_exists(rep));
	free(rep);
	free(out);
	free(err);

	/* 4. A crash before the run said its id: `running` without a run is
	 * started again from scratch. */
	char *again = tu_path(sdir, "again");
	mkdir(again, 0755);
	ep = ev_asprintf("{\"url\":\"%s\",\"model\":\"again\"}", slow.url);
	free(tu_write(again, "endpoint.json", ep));
	free(ep);
	sqlite3 *h = NULL;
	assert_int_equal(sqlite3_open(sdb, &h), SQLITE_OK);
	char *sql = sqlite3_mprintf("INSERT INTO watch_checkpoints(path, name, state, created, updated) "
	                            "VALUES(%Q, 'again', 'running', 1, 1)", again);
	assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(sql);
	sqlite3_close(h);
	const char *argv2[] = {tu_evald(), "--db", sdb, "watch", sdir, "--suites", suite, "--baseline", "slow", "--once",
	                       "--settle", "0.1", "--reports", reports, "--concurrency", "4", "--limit", "2", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv2), 0);
	assert_non_null(strstr(err, "again: evaluating"));
	assert_non_null(strstr(err, "again: comparing run 2 with baseline run 1"));
	assert_state(sdb, "again", "evaluated");
	assert_int_equal(query_long(sdb, "SELECT count(*) FROM results WHERE run_id = 2"), 2);
	assert_int_equal(query_long(sdb, "SELECT run_id FROM watch_checkpoints WHERE name = 'again'"), 2);
	free(out);
	free(err);
	free(again);

	tu_server_stop(&slow);
	free(folder);
	free(suite);
	free(sdb);
	free(sdir);
}

static void candidates_wait_for_a_baseline_folder_still_being_written(void **st)
{
	(void)st;
	char *wdir = tu_path(dir, "wait-watch"), *wdb = tu_path(dir, "wait.db"), *suites = suites_arg();
	char *save = ck;
	mkdir(wdir, 0755);
	ck = wdir;
	write_endpoint("b0", &srv_a, "b0");
	write_endpoint("c1", &srv_b, "c1");
	char *b0 = tu_path(wdir, "b0"), *marker = tu_path(b0, "copy.tmp");
	free(tu_write(b0, "copy.tmp", ""));
	char *err = NULL;
	assert_int_equal(watch_once(&err, wdb, wdir, "b0", suites, NULL), 0);
	assert_non_null(strstr(err, "c1: waiting for the baseline b0"));
	assert_state(wdb, "c1", "complete");
	assert_int_equal(query_long(wdb, "SELECT count(*) FROM runs"), 0);
	free(err);
	assert_int_equal(unlink(marker), 0);
	assert_int_equal(watch_once(&err, wdb, wdir, "b0", suites, NULL), 0);
	assert_state(wdb, "b0", "evaluated");
	assert_state(wdb, "c1", "evaluated");
	assert_non_null(strstr(err, "c1: comparing run 2 with baseline run 1"));
	assert_int_equal(query_long(wdb, "SELECT count(*) FROM regressions WHERE suite = 'X'"), 1);
	free(err);
	ck = save;
	free(marker);
	free(b0);
	free(suites);
	free(wdb);
	free(wdir);
}

static void bad_arguments_are_usage_errors(void **st)
{
	(void)st;
	const char *no_baseline[] = {tu_evald(), "--db", db, "watch", ck, "--suites", suite_x, "--once", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, no_baseline), 2);
	const char *not_dir[] = {tu_evald(), "--db", db, "watch", suite_x, "--suites", suite_x, "--baseline", "b", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, not_dir), 2);
	const char *bad_interval[] = {tu_evald(), "--db", db, "watch", ck, "--suites", suite_x, "--baseline", "b",
	                              "--interval", "-1", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, bad_interval), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(once_evaluates_complete_checkpoints_and_files_regression_for_x_only),
		cmocka_unit_test(incomplete_folders_are_evaluated_once_complete),
		cmocka_unit_test(restart_resumes_the_interrupted_run_to_the_full_count),
		cmocka_unit_test(candidates_wait_for_a_baseline_folder_still_being_written),
		cmocka_unit_test(bad_arguments_are_usage_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
