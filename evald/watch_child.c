/*
 * evald/watch_child.c: the watcher's child process, `evald run` started from
 * this very program (/proc/self/exe).
 *
 * The child dies with the watcher (PR_SET_PDEATHSIG), so a killed watcher
 * leaves a run to resume rather than one still writing behind the next
 * watcher. Its stdout is discarded (the report has the figures); its stderr
 * comes back line by line, because the first line names the run.
 */
#include "evald/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LINE 4096
#define STOP_GRACE_S 30 /* seconds a run has to stop after SIGTERM */

/* Parses "evald: run N: ..." (what `evald run` prints first on stderr). */
int64_t ev_watch_run_id_of_line(const char *line)
{
	if (!ev_str_starts(line, "evald: run "))
		return 0;
	char *end = NULL;
	long long id = strtoll(line + 11, &end, 10);
	return end && *end == ':' && id > 0 ? (int64_t)id : 0;
}

int ev_watch_child_run(const char *const *argv, const char *name, volatile sig_atomic_t *stop,
                       ev_watch_line_fn on_line, void *ctx)
{
	int fds[2];
	if (pipe(fds) != 0) {
		ev_error_set(EV_E_IO, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		ev_error_set(EV_E_IO, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, STDIN_FILENO);
			dup2(devnull, STDOUT_FILENO);
			close(devnull);
		}
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		execv("/proc/self/exe", (char *const *)argv);
		fprintf(stderr, "evald watch: cannot run /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	char line[MAX_LINE];
	size_t len = 0;
	bool forwarded = false, killed = false;
	double forwarded_at = 0;
	for (;;) {
		if (*stop && !forwarded) {
			ev_log_info("watch: %s: stopping: SIGTERM to the run (pid %d)", name, (int)pid);
			kill(pid, SIGTERM);
			forwarded = true;
			forwarded_at = ev_now();
		} else if (forwarded && !killed && ev_now() - forwarded_at > STOP_GRACE_S) {
			/* Its committed results are kept; the run resumes on the next start. */
			ev_log_warn("watch: %s: the run did not stop within %d s: SIGKILL", name, STOP_GRACE_S);
			kill(pid, SIGKILL);
			killed = true;
		}
		struct pollfd p = {fds[0], POLLIN, 0};
		int pr = poll(&p, 1, 200);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		char buf[4096];
		ssize_t n = read(fds[0], buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++) {
			if (buf[k] == '\n' || len == sizeof line - 1) {
				line[len] = 0;
				on_line(ctx, line);
				len = 0;
				if (buf[k] == '\n')
					continue;
			}
			line[len++] = buf[k];
		}
	}
	if (len) {
		line[len] = 0;
		on_line(ctx, line);
	}
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

