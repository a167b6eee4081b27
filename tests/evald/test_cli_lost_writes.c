/* No result is lost silently: when the disk fills mid-run (here, a file size
 * limit on evald that is lifted again later, so that later commits would
 * succeed), a commit that rolls back results stops the run with a clear
 * error and a status other than finished, and resume then redoes exactly
 * what was lost. Before, the rollback surfaced only as a cache warning and
 * the run ended finished with results missing. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 120

static void failed_commit_stops_the_run_and_resume_redoes_it(void **st)
{
	(void)st;
	tu_server srv;
	const char *args[] = {NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
	char *dir = tu_tmpdir("lost-writes");
	ev_buf b = EV_BUF_INIT(1 << 22);
	for (int i = 0; i < N; i++) {
		ev_buf_printf(&b, "{\"id\":\"s%03d\",\"input\":\"[[latency=100]] Echo:", i);
		for (int k = 0; k < 300; k++)
			ev_buf_printf(&b, " word%d", i);
		ev_buf_puts(&b, "\",\"target\":\"word\"}\n");
	}
	char *suite = tu_write(dir, "s.jsonl", b.data);
	ev_buf_free(&b);
	char *db = tu_path(dir, "t.db");
	/* the tracker exists before the limit */
	const char *mk[] = {tu_evald(), "--db", db, "runs", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);

	char *errp = tu_path(dir, "err.txt");
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = {300 * 1024, RLIM_INFINITY}; /* the WAL fills after a few commits */
		setrlimit(RLIMIT_FSIZE, &rl);
		execl(tu_evald(), "evald", "-q", "--db", db, "run", "--model", srv.url, "--model-name", "m", "--suite",
		      suite, "--concurrency", "4", (char *)NULL);
		_exit(127);
	}
	/* Space comes back: later commits would succeed. */
	usleep(1500 * 1000);
	struct rlimit up = {RLIM_INFINITY, RLIM_INFINITY};
	prlimit(pid, RLIMIT_FSIZE, &up, NULL);
	int status = 0;
	waitpid(pid, &status, 0);
	char *err = NULL;
	ev_file_read(&err, NULL, errp, 1 << 20);
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 0)
		fail_msg("the run ended well although results were lost; stderr:\n%s", err ? err : "");
	assert_non_null(strstr(err, "writes were lost"));
	char *out = NULL;
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT status FROM runs WHERE id = 1\"", db);
	assert_non_null(out);
	assert_null(strstr(out, "finished"));
	free(out);

	/* Resume redoes exactly what was lost: every sample once. */
	const char *resume[] = {tu_evald(), "-q", "--db", db, "run", "--resume", "1", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, resume), 0);
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT status, (SELECT count(*) FROM results WHERE run_id = 1), "
	                  "(SELECT count(DISTINCT sample_id) FROM results WHERE run_id = 1) FROM runs WHERE id = 1\"",
	      db);
	assert_string_equal(out, "finished|120|120\n");
	free(out);
	free(err);
	free(errp);
	free(db);
	free(suite);
	free(dir);
	tu_server_stop(&srv);
}

/* The last commit of a run (its summary) fails: the run is failed, not
 * left "running" forever, the command says so and exits non-zero, and
 * resume completes it once the tracker takes writes again. The failure is
 * a real SQLite error, from a trigger on the summary column. */
static void failed_final_commit_does_not_leave_the_run_running(void **st)
{
	(void)st;
	tu_server srv;
	assert_int_equal(tu_server_start(&srv, NULL), 0);
	char *dir = tu_tmpdir("final-commit");
	char *suite = tu_write(dir, "s.jsonl",
	                       "{\"id\":\"a\",\"input\":\"hello\",\"target\":\"hello\"}\n"
	                       "{\"id\":\"b\",\"input\":\"world\",\"target\":\"world\"}\n");
	char *db = tu_path(dir, "t.db");
	const char *mk[] = {tu_evald(), "--db", db, "runs", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	assert_int_equal(tu_sh(NULL, NULL,
	                       "sqlite3 '%s' \"CREATE TRIGGER full BEFORE UPDATE OF summary_json ON runs "
	                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END;\"",
	                       db),
	                 0);
	char *err = NULL, *out = NULL;
	const char *run[] = {tu_evald(), "-q", "--db", db, "run", "--model", srv.url, "--model-name", "m", "--suite",
	                     suite, NULL};
	int rc = tu_run(NULL, &err, NULL, run);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "disk is full (test)"));
	free(err);
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT status, (SELECT count(*) FROM results WHERE run_id = 1) FROM runs\"",
	      db);
	assert_string_equal(out, "failed|2\n");
	free(out);

	assert_int_equal(tu_sh(NULL, NULL, "sqlite3 '%s' \"DROP TRIGGER full\"", db), 0);
	const char *resume[] = {tu_evald(), "-q", "--db", db, "run", "--resume", "1", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, resume), 0);
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT status, summary_json IS NOT NULL FROM runs\"", db);
	assert_string_equal(out, "finished|1\n");
	free(out);
	free(db);
	free(suite);
	free(dir);
	tu_server_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(failed_final_commit_does_not_leave_the_run_running),
		cmocka_unit_test(failed_commit_stops_the_run_and_resume_redoes_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
