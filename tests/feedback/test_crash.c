/* feedback: a writer killed mid-run (SIGKILL, or _exit without close)
 * loses only its uncommitted results: every flushed result is there after
 * reopening, and the file passes PRAGMA integrity_check. */
#include "tracker_fixture.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_FLUSHED 1000 /* committed by flushes */
#define N_TICKED 100   /* then committed by a tick once old enough */
#define N_EXTRA 200    /* then never committed */
#define N_ALL (N_FLUSHED + N_TICKED + N_EXTRA)

/* The child: puts N_FLUSHED results with ticks, flushing every 100; then
 * N_TICKED that a late tick commits; then N_EXTRA that nothing commits;
 * then dies without closing. It reports each committed count on `fd`. */
static void writer(const char *path, int fd, bool sigkill)
{
	ev_tracker *t = NULL;
	if (ev_tracker_open(&t, path) != 0)
		_exit(3);
	ev_run_info info = {"m", NULL, NULL, NULL, 1, N_ALL, 0, NULL};
	int64_t run = 0;
	if (ev_tracker_run_create(t, &info, &run) != 0)
		_exit(4);
	char id[32];
	for (long i = 0; i < N_ALL; i++) {
		snprintf(id, sizeof id, "s%05ld", i);
		ev_result r = {.suite = "alpha", .sample_id = id, .score = (double)(i % 2), .reason = "",
		               .response = "some answer text", .attempts = 1};
		if (ev_tracker_result_put(t, run, &r) != 0)
			_exit(5);
		if (i % 10 == 9 && ev_tracker_tick(t) != 0)
			_exit(6);
		if (i < N_FLUSHED && i % 100 == 99) {
			if (ev_tracker_flush(t) != 0)
				_exit(7);
			long done = i + 1;
			if (write(fd, &done, sizeof done) != sizeof done)
				_exit(8);
		}
		if (i == N_FLUSHED + N_TICKED - 1) {
			ev_sleep(EV_TRACKER_COMMIT_S * 1.5);
			if (ev_tracker_tick(t) != 0)
				_exit(9);
			long done = i + 1;
			if (write(fd, &done, sizeof done) != sizeof done)
				_exit(8);
		}
	}
	if (sigkill)
		raise(SIGKILL);
	_exit(0); /* no close: whatever is pending is lost */
}

static void killed_writer_keeps_every_flushed_result(bool sigkill)
{
	char *path = tf_db_path(sigkill ? "crash-kill" : "crash-exit");
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		writer(path, fds[1], sigkill);
	}
	close(fds[1]);
	long flushed = 0, v;
	while (read(fds[0], &v, sizeof v) == (ssize_t)sizeof v)
		flushed = v;
	close(fds[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (sigkill) {
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGKILL);
	} else {
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(flushed, N_FLUSHED + N_TICKED);

	ev_tracker *t = tf_open(path);
	ev_tracker_close(t);
	char *ok = tf_query_text(path, "PRAGMA integrity_check");
	assert_non_null(ok);
	assert_string_equal(ok, "ok");
	free(ok);
	long n = tf_query_long(path, "SELECT count(*) FROM results");
	print_message("%s: %ld committed, %ld found after reopening (of %d put)\n", sigkill ? "SIGKILL" : "_exit",
	              flushed, n, N_ALL);
	assert_true(n >= flushed && n <= N_ALL);
	/* Every committed one is there, by id, and nothing else is half-written. */
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM results WHERE sample_id < 's01100'"),
	                 N_FLUSHED + N_TICKED);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM results WHERE response <> 'some answer text'"), 0);
	assert_int_equal(tf_query_long(path, "SELECT count(*) FROM runs"), 1);
	free(path);
}

static void sigkilled_writer_keeps_every_flushed_result(void **state)
{
	(void)state;
	killed_writer_keeps_every_flushed_result(true);
}

static void writer_exiting_without_close_keeps_every_flushed_result(void **state)
{
	(void)state;
	killed_writer_keeps_every_flushed_result(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sigkilled_writer_keeps_every_flushed_result),
		cmocka_unit_test(writer_exiting_without_close_keeps_every_flushed_result),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
