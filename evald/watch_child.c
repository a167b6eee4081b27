/*
 * evald/watch_child.c: the watcher's evaluation, in a child process. The
 * child is a fork of the watcher (no exec: the parsed settings go along)
 * that opens its own tracker connection and calls ev_eval_run, so that a
 * crash in a backend takes the run with it and not the daemon, and SIGTERM
 * stops the run cleanly. It dies with the watcher (PR_SET_PDEATHSIG), which
 * leaves its run resumable rather than still writing behind the next
 * watcher. It reports through a status pipe, one JSON object a line:
 * {"run_id":N} once the run exists, {"run_id":N,"status":S,"error":E} at
 * its end; its stderr is the watcher's.
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

#define STOP_GRACE_S 30 /* seconds a run has to stop after SIGTERM */
#define MAX_LINE 4096

static volatile sig_atomic_t child_stop;

static void on_child_signal(int sig)
{
	(void)sig;
	child_stop = 1;
}

static void put_line(int fd, cJSON *o)
{
	char *s = ev_json_print(o);
	if (s) {
		size_t n = strlen(s);
		s[n] = '\n'; /* the printed text is followed by its NUL: room for the newline */
		for (size_t off = 0; off <= n;) {
			ssize_t w = write(fd, s + off, n + 1 - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	free(s);
	cJSON_Delete(o);
}

static void report_started(void *ctx, int64_t run_id)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "run_id", (double)run_id);
	put_line(*(int *)ctx, o);
}

/* The child: never returns. */
static void child_main(int fd, const char *db, ev_eval_config *c, int64_t resume)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_child_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int devnull = open("/dev/null", O_RDWR);
	if (devnull >= 0) {
		dup2(devnull, STDIN_FILENO);
		dup2(devnull, STDOUT_FILENO);
		close(devnull);
	}
	/* The watcher's tracker connection is not touched here: SQLite
	 * connections do not cross fork. */
	ev_tracker *t = NULL;
	ev_eval_outcome out = {0};
	ev_eval_options eo = {.resume = resume, .quiet = true, .stop = &child_stop, .on_started = report_started,
	                      .ctx = &fd};
	int rc = ev_tracker_open(&t, db);
	if (!rc)
		rc = ev_eval_run(t, c, &eo, &out);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "run_id", (double)out.run_id);
	cJSON_AddStringToObject(o, "status", rc ? (out.status ? out.status : "failed") : "finished");
	if (rc)
		cJSON_AddStringToObject(o, "error", ev_error_msg());
	put_line(fd, o);
	ev_tracker_close(t);
	_exit(rc ? 1 : 0);
}

/* One status line from the child. */
static void on_status(ev_watch_child_status *st, const char *line, void (*on_started)(void *, int64_t), void *ctx)
{
	cJSON *j = cJSON_Parse(line);
	double id = ev_json_num(j, "run_id", 0);
	const char *status = ev_json_str(j, "status", NULL);
	if (id >= 1 && id < 9e15 && !st->run_id) {
		st->run_id = (int64_t)id;
		if (on_started)
			on_started(ctx, st->run_id);
	}
	if (status) {
		snprintf(st->status, sizeof st->status, "%s", status);
		snprintf(st->error, sizeof st->error, "%s", ev_json_str(j, "error", ""));
	}
	cJSON_Delete(j);
}

int ev_watch_child_eval(const char *db, ev_eval_config *c, int64_t resume, const char *name,
                        volatile sig_atomic_t *stop, void (*on_started)(void *ctx, int64_t run_id), void *ctx,
                        ev_watch_child_status *st)
{
	memset(st, 0, sizeof *st);
	int fds[2];
	if (pipe(fds) != 0)
		return ev_error_set(EV_E_IO, "pipe: %s", strerror(errno)), -1;
	fflush(NULL);
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
		close(fds[0]);
		child_main(fds[1], db, c, resume);
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
				on_status(st, line, on_started, ctx);
				len = 0;
				if (buf[k] == '\n')
					continue;
			}
			line[len++] = buf[k];
		}
	}
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return ev_error_set(EV_E_IO, "waitpid: %s", strerror(errno)), -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}
