/* evald submit slurm on a real Slurm: a one-node cluster (slurmctld, slurmd
 * and munged on this machine, started by scripts/slurm-local.sh and stopped
 * after; the test is skipped where it cannot start: no packages, not root).
 * An array of 4 shards against the fixture server, merged by the dependent
 * job, equals the unsharded run sample for sample; a shard cancelled while
 * it runs leaves the merge undone, and `--resume` submits that shard alone
 * and completes the run; --dry-run submits nothing; with --tracker URL the
 * shards stream to a team tracker and the merged run lands there, equal to
 * the unsharded run. */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *dir, *conf_dir;

static long q(const char *db, const char *sql)
{
	char *o = NULL, *e = NULL;
	if (tu_sh(&o, &e, "sqlite3 %s \"%s\"", db, sql))
		fail_msg("sqlite3: %s", e);
	long n = atol(o);
	free(o), free(e);
	return n;
}

/* submit status --json until cond holds (or 90 s) */
static cJSON *wait_status(const char *sub, const char *key, double at_least)
{
	for (int i = 0; i < 450; i++) {
		const char *st[] = {tu_evald(), "--json", "submit", "status", sub, NULL};
		char *out = NULL;
		if (tu_run(&out, NULL, NULL, st) == 0) {
			cJSON *j = cJSON_Parse(out);
			free(out);
			if (ev_json_num(j, key, -1) >= at_least)
				return j;
			cJSON_Delete(j);
		} else {
			free(out);
		}
		usleep(200 * 1000);
	}
	fail_msg("%s: %s never reached %g", sub, key, at_least);
	return NULL;
}

static char *suite(const char *name, int n, int latency)
{
	ev_buf s = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < n; i++)
		ev_buf_printf(&s, "{\"id\":\"%s%02d\",\"input\":\"[[latency=%d]] word%d %s\",\"target\":\"word%d\"}\n", name, i,
		              latency, i, i % 3 ? "x" : "y", i % 2 ? i : i + 1);
	char file[64];
	snprintf(file, sizeof file, "%s.jsonl", name);
	char *p = tu_write(dir, file, s.data);
	ev_buf_free(&s);
	return p;
}

static void array_of_shards_equals_the_unsharded_run(void **state)
{
	(void)state;
	tu_server fx;
	const char *none[] = {NULL};
	assert_int_equal(tu_server_start(&fx, none), 0);
	char *s20 = suite("s", 20, 5), *ref = tu_path(dir, "ref.db"), *sub = tu_path(dir, "sub");
	/* the unsharded run */
	const char *run[] = {tu_evald(), "-q", "--db", ref, "run", "--model", fx.url, "--model-name", "fx", "--suite", s20,
	                     "--no-cache", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, run), 0);
	/* dry run: scripts and sbatch lines, nothing submitted */
	char *dry = tu_path(dir, "dry");
	const char *d[] = {tu_evald(), "submit", "slurm", "--shards", "4", "--dir", dry, "--dry-run", "--", "run", "--model",
	                   fx.url, "--suite", s20, NULL};
	char *out = NULL;
	assert_int_equal(tu_run(&out, NULL, NULL, d), 0);
	assert_non_null(strstr(out, "'--array=0-3'"));
	assert_non_null(strstr(out, "--dependency=afterok:"));
	free(out);
	assert_int_equal(q(ref, "SELECT 0"), 0);

	const char *sb[] = {tu_evald(), "submit", "slurm", "--shards", "4", "--dir", sub, "--", "run", "--model", fx.url,
	                    "--model-name", "fx", "--suite", s20, "--no-cache", NULL};
	char *err = NULL;
	if (tu_run(&out, &err, NULL, sb))
		fail_msg("submit: %s", err);
	free(out), free(err);
	cJSON *st = wait_status(sub, "merged_run", 1);
	long merged = (long)ev_json_num(st, "merged_run", 0);
	assert_true(ev_json_num(st, "finished_shards", 0) == 4);
	cJSON_Delete(st);
	char *db = tu_path(sub, "evald.db"), sql[512];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM results WHERE run_id = %ld", merged);
	assert_int_equal(q(db, sql), 20);
	/* sample for sample what the unsharded run got */
	snprintf(sql, sizeof sql,
	         "ATTACH '%s' AS r; SELECT count(*) FROM results m JOIN r.results u ON m.sample_id = u.sample_id AND "
	         "m.epoch = u.epoch WHERE m.run_id = %ld AND u.run_id = 1 AND m.score = u.score AND m.response = u.response",
	         ref, merged);
	assert_int_equal(q(db, sql), 20);
	/* each shard ran in its own task (its own tracker and log), the samples split between them */
	long sum = 0;
	for (int k = 0; k < 4; k++) {
		char name[32], log[32];
		snprintf(name, sizeof name, "shard-%d.db", k);
		snprintf(log, sizeof log, "logs/shard-%d.out", k);
		char *p = tu_path(sub, name), *l = tu_path(sub, log);
		sum += q(p, "SELECT count(*) FROM results");
		assert_int_equal(access(l, F_OK), 0);
		free(p), free(l);
	}
	assert_int_equal(sum, 20);
	char *rep = tu_path(sub, "report.md"), *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, rep, 1 << 20), 0);
	assert_non_null(strstr(text, "# Run"));
	free(text), free(rep);

	/* a shard cancelled mid-run: no merge; --resume submits it alone */
	char *slow = suite("t", 8, 900), *sub2 = tu_path(dir, "sub2");
	const char *sb2[] = {tu_evald(), "--json", "submit", "slurm", "--shards", "2", "--dir", sub2, "--", "run", "--model",
	                     fx.url, "--model-name", "fx", "--suite", slow, "--no-cache", "--concurrency", "1", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, sb2), 0);
	cJSON *j = cJSON_Parse(out);
	free(out);
	char cancel[64];
	snprintf(cancel, sizeof cancel, "%s_1", ev_json_str(j, "array_job", "?"));
	cJSON_Delete(j);
	char *shard1 = tu_path(sub2, "shard-1.db");
	for (int i = 0; i < 100 && access(shard1, F_OK); i++)
		usleep(100 * 1000);
	usleep(1200 * 1000); /* a result or two in */
	assert_int_equal(tu_sh(NULL, NULL, "SLURM_CONF=%s/slurm.conf scancel %s", conf_dir, cancel), 0);
	st = wait_status(sub2, "finished_shards", 1);
	cJSON_Delete(st);
	sleep(2);
	st = wait_status(sub2, "total_shards", 2);
	assert_true(ev_json_num(st, "merged_run", 0) == 0); /* the merge waited on a shard that failed */
	cJSON_Delete(st);
	const char *again[] = {tu_evald(), "--json", "submit", "slurm", "--resume", sub2, NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, again), 0);
	assert_non_null(strstr(out, "\"shards\":\"1\"")); /* shard 1 alone */
	free(out);
	st = wait_status(sub2, "merged_run", 1);
	merged = (long)ev_json_num(st, "merged_run", 0);
	cJSON_Delete(st);
	char *db2 = tu_path(sub2, "evald.db");
	snprintf(sql, sizeof sql, "SELECT count(*) FROM results WHERE run_id = %ld", merged);
	assert_int_equal(q(db2, sql), 8);

	/* shards streaming to a team tracker; the merged run goes there too */
	char *team = tu_path(dir, "team.db"), *sub3 = tu_path(dir, "sub3");
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	pid_t srv = fork();
	if (srv == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		setenv("EVALD_API_TOKEN", "slurm-team", 1);
		execl(tu_evald(), tu_evald(), "-q", "--db", team, "serve", "--port", "0", "--print-port", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	int port = 0;
	assert_true(f && fscanf(f, "%d", &port) == 1);
	fclose(f);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
	setenv("EVALD_API_TOKEN", "slurm-team", 1); /* sbatch hands the environment to the jobs */
	const char *sb3[] = {tu_evald(), "submit", "slurm", "--shards", "3", "--tracker", url, "--dir", sub3, "--", "run",
	                     "--model", fx.url, "--model-name", "fx", "--suite", s20, "--no-cache", NULL};
	err = NULL;
	if (tu_run(&out, &err, NULL, sb3))
		fail_msg("submit --tracker: %s", err);
	free(out), free(err);
	st = wait_status(sub3, "merged_run", 1);
	merged = (long)ev_json_num(st, "merged_run", 0);
	assert_true(ev_json_num(st, "finished_shards", 0) == 3);
	cJSON_Delete(st);
	snprintf(sql, sizeof sql,
	         "ATTACH '%s' AS r; SELECT count(*) FROM results m JOIN r.results u ON m.sample_id = u.sample_id AND "
	         "m.epoch = u.epoch WHERE m.run_id = %ld AND u.run_id = 1 AND m.score = u.score AND m.response = u.response",
	         ref, merged);
	assert_int_equal(q(team, sql), 20);
	/* three shard runs and the merged one, all on the server; nothing in the folder's trackers */
	assert_int_equal(q(team, "SELECT count(*) FROM runs"), 4);
	char *local3 = tu_path(sub3, "shard-0.db");
	assert_int_not_equal(access(local3, F_OK), 0);
	unsetenv("EVALD_API_TOKEN");
	kill(srv, SIGTERM);
	waitpid(srv, NULL, 0);
	free(team), free(sub3), free(local3);

	tu_server_stop(&fx);
	free(s20), free(ref), free(sub), free(dry), free(db), free(slow), free(sub2), free(shard1), free(db2);
}

int main(void)
{
	dir = tu_tmpdir("slurm");
	conf_dir = tu_path(dir, "cluster");
	const char *src = getenv("EV_SOURCE_DIR");
	char *out = NULL;
	int rc = tu_sh(&out, NULL, "bash %s/scripts/slurm-local.sh start %s", src ? src : ".", conf_dir);
	if (rc) {
		printf("skipped: a one-node Slurm cluster cannot start here (exit %d): %s\n", rc, out ? out : "");
		free(out);
		return 77;
	}
	free(out);
	char *conf = tu_path(conf_dir, "slurm.conf");
	setenv("SLURM_CONF", conf, 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(array_of_shards_equals_the_unsharded_run),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	tu_sh(NULL, NULL, "bash %s/scripts/slurm-local.sh stop %s", src ? src : ".", conf_dir);
	free(conf);
	return failed;
}
