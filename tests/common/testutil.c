/* Shared test helpers: scratch folders, child processes, the fixture server. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CAP ((size_t)64 << 20)

char *tu_path(const char *dir, const char *name) { return ev_asprintf("%s/%s", dir, name); }

/* The scratch folders this process made, removed when it exits (a
 * child forked from it leaves them alone), unless EV_TEST_KEEP=1 asks to
 * keep them for a look after a failure: left behind, a test run's folders
 * had grown build/test-tmp to 63 GB over many local runs. */
#define TU_MAX_TMP 256
static char *tmp_made[TU_MAX_TMP];
static int tmp_count;
static pid_t tmp_owner;

static void tmp_remove(void)
{
	if (getpid() != tmp_owner)
		return;
	const char *keep = getenv("EV_TEST_KEEP");
	for (int i = 0; i < tmp_count; i++) {
		if (!keep || strcmp(keep, "1"))
			ev_rmtree(tmp_made[i], 0);
		free(tmp_made[i]);
	}
	tmp_count = 0;
}

char *tu_tmpdir(const char *tag)
{
	const char *base = getenv("EV_TEST_TMP");
	if (!base)
		base = "/tmp";
	static int counter;
	char *d = ev_asprintf("%s/%s-%ld-%d", base, tag, (long)getpid(), counter++);
	char *cmd = ev_asprintf("rm -rf '%s' && mkdir -p '%s'", d, d);
	if (system(cmd) != 0)
		fail_msg("cannot make %s", d);
	free(cmd);
	if (tmp_owner != getpid()) { /* the first folder of this process */
		tmp_owner = getpid(), tmp_count = 0;
		atexit(tmp_remove);
	}
	if (tmp_count < TU_MAX_TMP)
		tmp_made[tmp_count++] = ev_strdup(d);
	return d;
}

char *tu_write(const char *dir, const char *name, const char *text)
{
	char *p = tu_path(dir, name);
	if (ev_file_write(p, text, strlen(text)) != 0)
		fail_msg("write %s: %s", p, ev_error_msg());
	return p;
}

char *tu_shared(const char *rel)
{
	const char *base = getenv("EV_SHARED_DIR");
	if (!base)
		return NULL;
	char *p = ev_asprintf("%s/data/%s", base, rel);
	if (access(p, R_OK) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

const char *tu_evald(void)
{
	const char *p = getenv("EVALD_BIN");
	return p ? p : "evald";
}

/* Reads what is there; returns false at end of file. */
static bool drain(int fd, ev_buf *b)
{
	char tmp[65536];
	ssize_t n = read(fd, tmp, sizeof tmp);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n > 0 && b->len + (size_t)n <= b->max)
		ev_buf_append(b, tmp, (size_t)n);
	return n > 0;
}

int tu_run(char **out, char **err, const char *stdin_text, const char *const argv[])
{
	int po[2], pe[2], pi[2];
	if (pipe(po) || pipe(pe) || pipe(pi))
		fail_msg("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pi[0], 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]), close(pe[0]), close(pi[1]);
		/* and the pipes' own numbers: a daemon the command starts must not
		 * keep them open (the reader would wait for it) */
		close(po[1]), close(pe[1]), close(pi[0]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(po[1]), close(pe[1]), close(pi[0]);
	if (stdin_text) {
		signal(SIGPIPE, SIG_IGN);
		size_t left = strlen(stdin_text);
		const char *p = stdin_text;
		while (left) {
			ssize_t n = write(pi[1], p, left);
			if (n <= 0)
				break;
			p += n, left -= (size_t)n;
		}
	}
	close(pi[1]);
	ev_buf bo = EV_BUF_INIT(CAP), be = EV_BUF_INIT(CAP);
	struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_fds = 2;
	while (open_fds) {
		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (!drain(fds[i].fd, i ? &be : &bo)) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			}
		}
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (out)
		*out = ev_buf_detach(&bo, NULL);
	else
		ev_buf_free(&bo);
	if (err)
		*err = ev_buf_detach(&be, NULL);
	else
		ev_buf_free(&be);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tu_sh(char **out, char **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char cmd[16384];
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	return tu_run(out, err, NULL, argv);
}

int tu_server_start(tu_server *s, const char *const extra_args[])
{
	const char *bin = getenv("EV_FIXTURE_SERVER");
	if (!bin)
		bin = "evald-fixture-server";
	const char *argv[32] = {bin, "--port", "0", "--print-port"};
	int n = 4;
	for (int i = 0; extra_args && extra_args[i] && n < 31; i++)
		argv[n++] = extra_args[i];
	argv[n] = NULL;
	int po[2];
	if (pipe(po))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		close(po[0]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	char line[64] = {0};
	size_t got = 0;
	struct pollfd pf = {po[0], POLLIN, 0};
	while (got < sizeof line - 1 && !memchr(line, '\n', got)) {
		if (poll(&pf, 1, 10000) <= 0)
			break;
		ssize_t r = read(po[0], line + got, sizeof line - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(po[0]);
	s->pid = pid;
	s->port = atoi(line);
	if (s->port <= 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/v1", s->port);
	return 0;
}

void tu_server_stop(tu_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}
