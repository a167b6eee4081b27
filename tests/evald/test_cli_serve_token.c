/* `evald serve --token T` does not leave T in its command line, where ps
 * and /proc/PID/cmdline would show it to every user. */
#include "testutil.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void token_is_wiped_from_the_command_line(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("serve-token");
	char *db = tu_path(dir, "t.db");
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(tu_evald(), "evald", "-q", "--db", db, "serve", "--port", "0", "--print-port", "--token",
		      "tok-SECRET-789", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[64] = {0};
	ssize_t n = read(fds[0], line, sizeof line - 1); /* the port: it is listening */
	assert_true(n > 0);
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t got = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	for (size_t i = 0; i < got; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[got] = 0;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	close(fds[0]);
	assert_non_null(strstr(buf, "--token"));
	if (strstr(buf, "SECRET"))
		fail_msg("the token is in the command line: %s", buf);
	free(db);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(token_is_wiped_from_the_command_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
