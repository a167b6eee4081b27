/* Ctrl-C on `evald run` while requests are in flight: the run stops within
 * a second or two (not at the next result, which here would take 30 s),
 * keeps what finished, is marked interrupted, and says how to resume. */
#include "testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void first_interrupt_stops_within_seconds(void **st)
{
	(void)st;
	tu_server srv;
	const char *args[] = {NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
	char *dir = tu_tmpdir("interrupt");
	char *suite = tu_write(dir, "s.jsonl",
	                       "{\"id\":\"fast\",\"input\":\"quick\",\"target\":\"quick\"}\n"
	                       "{\"id\":\"slow1\",\"input\":\"[[latency=30000]] one\",\"target\":\"one\"}\n"
	                       "{\"id\":\"slow2\",\"input\":\"[[latency=30000]] two\",\"target\":\"two\"}\n");
	char *db = tu_path(dir, "t.db"), *errp = tu_path(dir, "err.txt");
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 2);
		execl(tu_evald(), "evald", "--db", db, "run", "--model", srv.url, "--model-name", "m", "--suite", suite,
		      "--timeout", "120", (char *)NULL);
		_exit(127);
	}
	usleep(1500 * 1000);
	double t0 = ev_now();
	kill(pid, SIGINT);
	int status = 0;
	for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(100 * 1000);
	double took = ev_now() - t0;
	if (took >= 9.9) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("evald run did not stop within 10 s of Ctrl-C");
	}
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	char *err = NULL, *out = NULL;
	ev_file_read(&err, NULL, errp, 1 << 20);
	assert_non_null(strstr(err, "evald run --resume 1"));
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT status, (SELECT count(*) FROM results) FROM runs WHERE id = 1\"", db);
	assert_string_equal(out, "interrupted|1\n"); /* the fast one was kept */
	free(out);
	free(err);
	free(errp);
	free(db);
	free(suite);
	free(dir);
	tu_server_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_interrupt_stops_within_seconds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
