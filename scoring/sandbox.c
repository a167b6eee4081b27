/*
 * sandbox.c: ev_sandbox_run, one untrusted program in a sandbox: the
 * parent side (options, ids, the capture loop, verdicts, the probe of what
 * the kernel allows). The child's side is sandbox_child.c.
 *
 * The parent side (this thread of evald) prepares everything the child will
 * need in a `plan` before cloning, because the child of a multi-threaded
 * process may only make plain system calls until it execs: no malloc, no
 * locks, no glibc wrappers that talk to other threads (setresuid and
 * setgroups go through syscall() for that reason). The child:
 *   - is cloned straight into new user, PID, mount, network, IPC and UTS
 *     namespaces (those the probe found allowed), so it is PID 1 of its
 *     own PID namespace: when it exits or is killed, the kernel kills
 *     everything it started;
 *   - waits for the parent to write its uid/gid maps: inside uid 0 is the
 *     setup identity, inside uid 1000 the run identity, each mapped to a
 *     fresh host uid per run, so that RLIMIT_NPROC (counted per real uid)
 *     binds every run on its own, even when evald runs as root;
 *   - builds a new root on a tmpfs: /usr, /etc, /bin, /lib... bound
 *     read-only, /dev with null/zero/random/urandom, a fresh /proc, a
 *     size-capped tmpfs for the work folder (/sandbox) and another for
 *     /tmp; pivot_root into it and detaches the host's tree, so /root,
 *     /home, /work and the tracker are not there at all;
 *   - becomes the run identity (which drops every capability), sets
 *     no_new_privs, writes the files, wires stdin/stdout/stderr, applies
 *     the rlimits and execs with a minimal environment.
 * A setup fault is written to a report pipe (closed on exec), so the
 * parent tells "could not start" (sandbox error) from "ran and failed".
 *
 * Without a user namespace but as root, the same is done as real root and
 * the child then switches to the fresh host uid. Without a mount namespace
 * the work folder is a host mkdtemp folder owned by the run uid, removed
 * after. Without a PID namespace, leftovers are killed by process group
 * and, as root, by a helper that takes the run uid and kill(-1)s.
 */
#include "scoring/sandbox_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>

/* ---- what the kernel allows (probed once) ------------------------------ */

typedef struct {
	bool root;      /* euid 0 in the initial namespace */
	int ns_flags;   /* CLONE_NEW* that clone accepted */
	bool userns;
	bool mounts;    /* the private root can be built */
	bool proc;      /* a fresh /proc can be mounted */
	bool ro_root;   /* the new root can be made read-only */
	bool pidfd;
	bool filter;    /* the system-call filter (sandbox_seccomp.c) installs */
	struct sock_fprog seccomp;
	char describe[256];
} sb_state;

static sb_state g_state;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_uint g_counter;

/* ---- parent side ----------------------------------------------------------- */

/* pipe2 with both ends at fd 3 or above (0-2 may be closed in evald). */
static int fd_hi(int fd)
{
	if (fd < 0 || fd >= 3)
		return fd;
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return d;
}

static int pipe_hi(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fds[0] = fd_hi(fds[0]);
	fds[1] = fd_hi(fds[1]);
	return fds[0] < 0 || fds[1] < 0 ? -1 : 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	int e = w == (ssize_t)n ? 0 : (w < 0 ? errno : EIO);
	close(fd);
	return e;
}

/* Kills every process of host uid `uid` (root only): a helper takes the uid
 * and kill(-1)s, which reaches exactly that uid's processes, itself too. */
static void kill_uid(uid_t uid)
{
	pid_t h = fork();
	if (h == 0) {
		if (syscall(SYS_setgroups, 0, NULL) == 0 && syscall(SYS_setresgid, (gid_t)uid, (gid_t)uid, (gid_t)uid) == 0 &&
		    syscall(SYS_setresuid, uid, uid, uid) == 0)
			kill(-1, SIGKILL);
		_exit(0);
	}
	if (h > 0)
		while (waitpid(h, NULL, 0) < 0 && errno == EINTR) {
		}
}

static void resolve_options(ev_sandbox_options *o, const ev_sandbox_options *in)
{
	ev_sandbox_options d = EV_SANDBOX_OPTIONS_INIT;
	if (in) {
		if (in->timeout_s > 0)
			d.timeout_s = in->timeout_s > 86400 ? 86400 : in->timeout_s;
		if (in->cpu_s > 0)
			d.cpu_s = in->cpu_s;
		if (in->mem_bytes)
			d.mem_bytes = in->mem_bytes;
		if (in->max_procs > 0)
			d.max_procs = in->max_procs;
		if (in->max_file_bytes)
			d.max_file_bytes = in->max_file_bytes;
		if (in->max_open_files > 0)
			d.max_open_files = in->max_open_files;
		if (in->max_output_bytes)
			d.max_output_bytes = in->max_output_bytes;
		if (in->work_bytes)
			d.work_bytes = in->work_bytes;
		if (in->run_mem_bytes)
			d.run_mem_bytes = in->run_mem_bytes;
		d.tmp_dir = in->tmp_dir;
		d.ro_paths = in->ro_paths;
		d.stdin_name = in->stdin_name;
		d.discard_excess_output = in->discard_excess_output;
	}
	if (d.cpu_s <= 0)
		d.cpu_s = d.timeout_s + 1;
	*o = d;
}

int ev_sandbox_max_procs(const ev_sandbox_options *in)
{
	ev_sandbox_options o;
	resolve_options(&o, in);
	size_t by_memory = o.mem_bytes ? o.run_mem_bytes / o.mem_bytes : (size_t)o.max_procs;
	if (by_memory < 1)
		by_memory = 1;
	return by_memory < (size_t)o.max_procs ? (int)by_memory : o.max_procs;
}

static bool plain_name(const char *n)
{
	size_t len = n ? strlen(n) : 0;
	return len && len < 256 && !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..");
}

static bool safe_abs_path(const char *p)
{
	size_t n = p ? strlen(p) : 0;
	return n > 1 && n < PATH_MAX - 16 && p[0] == '/' && !strstr(p, "/../") && !ev_str_ends(p, "/..") &&
	       strcmp(p, "/") != 0;
}

static int add_bind(sb_plan *p, const char *path)
{
	if (!safe_abs_path(path))
		return ev_error_set(EV_E_INVALID, "sandbox: ro_paths: \"%.200s\" is not an absolute path below /", path);
	if (p->n_binds >= MAX_BINDS)
		return ev_error_set(EV_E_LIMIT, "sandbox: ro_paths: more than %d paths", MAX_BINDS - 8);
	p->binds[p->n_binds] = path;
	snprintf(p->bind_old[p->n_binds], PATH_MAX, "%s%s", OLDROOT, path);
	p->n_binds++;
	return 0;
}

/* Writes the files into a host work folder (no mount namespace). */
static int host_files(const char *dir, const ev_sandbox_file *files, size_t n, bool chown_to, uid_t uid)
{
	for (size_t i = 0; i < n; i++) {
		char *path = ev_asprintf("%s/%s", dir, files[i].name);
		if (!path)
			return ev_error_set(EV_E_NOMEM, "sandbox: out of memory");
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		int rc = 0;
		if (fd < 0) {
			rc = ev_error_set(EV_E_IO, "sandbox: %s: %s", path, strerror(errno));
		} else {
			size_t off = 0;
			while (!rc && off < files[i].len) {
				ssize_t w = write(fd, files[i].data + off, files[i].len - off);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					rc = ev_error_set(EV_E_IO, "sandbox: writing %s: %s", path, strerror(errno));
				else
					off += (size_t)w;
			}
			if (!rc && chown_to && fchown(fd, uid, (gid_t)uid) != 0)
				rc = ev_error_set(EV_E_IO, "sandbox: chown %s: %s", path, strerror(errno));
			close(fd);
		}
		free(path);
		if (rc)
			return rc;
	}
	return 0;
}

static bool mentions_oom(const char *s)
{
	return s && (strstr(s, "MemoryError") || strstr(s, "Cannot allocate memory") || strstr(s, "std::bad_alloc") ||
	             strstr(s, "out of memory"));
}

/* The running child, as the capture loop sees it. */
typedef struct {
	pid_t pid;
	int pidfd;
	bool pidns;
	bool sweep_uid; /* kill_uid(run_uid) may be used */
	uid_t host_run_uid;
	bool exited;
	bool lost; /* reaped by someone else: no status */
} sb_child;

static void kill_all(const sb_child *c)
{
	if (!c->exited)
		kill(c->pid, SIGKILL);
	kill(-c->pid, SIGKILL);
	if (!c->pidns && c->sweep_uid)
		kill_uid(c->host_run_uid);
}

/* Appends what fits; returns false when the cap was reached. */
static bool capture(ev_buf *b, const char *data, size_t n, bool *truncated)
{
	size_t room = b->max > b->len ? b->max - b->len : 0;
	if (n > room) {
		if (room)
			(void)ev_buf_append(b, data, room);
		*truncated = true;
		return false;
	}
	if (n)
		(void)ev_buf_append(b, data, n);
	return true;
}

/* The kept end of a stream past its cap (discard_excess_output). */
#define TAIL_KEEP ((size_t)64 << 10)

typedef struct {
	char *data; /* at most 2 * TAIL_KEEP; the last TAIL_KEEP bytes are what counts */
	size_t len;
	uint64_t excess; /* bytes past the head, tail included */
} sb_tail;

static void tail_push(sb_tail *t, const char *d, size_t n)
{
	t->excess += n;
	if (!t->data && !(t->data = malloc(2 * TAIL_KEEP)))
		return;
	if (n >= TAIL_KEEP) {
		memcpy(t->data, d + n - TAIL_KEEP, TAIL_KEEP);
		t->len = TAIL_KEEP;
		return;
	}
	if (t->len + n > 2 * TAIL_KEEP) {
		memmove(t->data, t->data + t->len - TAIL_KEEP, TAIL_KEEP);
		t->len = TAIL_KEEP;
	}
	memcpy(t->data + t->len, d, n);
	t->len += n;
}

/* head + "[N bytes dropped]" + tail, into the head's buffer. */
static void tail_join(sb_tail *t, ev_buf *head)
{
	if (!t->excess)
		return;
	size_t keep = t->len < TAIL_KEEP ? t->len : TAIL_KEEP;
	char line[96];
	int n = snprintf(line, sizeof line, "\n[evald: %llu bytes of output dropped]\n",
	                 (unsigned long long)(t->excess - keep));
	head->max = head->len + (size_t)n + keep + 1;
	(void)ev_buf_append(head, line, (size_t)n);
	if (keep)
		(void)ev_buf_append(head, t->data + t->len - keep, keep);
	free(t->data);
	t->data = NULL;
}

/* Reads both streams until the child has exited and they are closed, the
 * timeout or the output cap killing it on the way. */
static void capture_loop(sb_child *c, int *fd_out, int *fd_err, const ev_sandbox_options *o, ev_buf *bo, ev_buf *be,
                         ev_sandbox_result *r, bool *timed_out, bool *capped, int *status, struct rusage *ru)
{
	double t0 = ev_now(), deadline = t0 + o->timeout_s, grace = 0, kill_time = 0;
	bool killed = false;
	char chunk[65536];
	sb_tail tails[2] = {{0}};
	for (;;) {
		double now = ev_now();
		if (!killed && !c->exited && now >= deadline) {
			kill_all(c);
			killed = *timed_out = true;
			kill_time = now;
		}
		if (c->exited && *fd_out < 0 && *fd_err < 0)
			break;
		if (c->exited && now >= grace)
			break; /* a leftover holds a pipe open: stop listening */
		double wait = 0.05;
		if (c->exited)
			wait = grace - now;
		else if (!killed)
			wait = deadline - now;
		if (!c->exited && c->pidfd < 0 && wait > 0.01)
			wait = 0.01;
		if (killed && !c->exited && now - kill_time > 1.0)
			kill_all(c); /* e.g. a stopped process: keep at it */
		struct pollfd fds[3];
		int n = 0, i_out = -1, i_err = -1, i_pid = -1;
		if (*fd_out >= 0)
			fds[i_out = n++] = (struct pollfd){*fd_out, POLLIN, 0};
		if (*fd_err >= 0)
			fds[i_err = n++] = (struct pollfd){*fd_err, POLLIN, 0};
		if (!c->exited && c->pidfd >= 0)
			fds[i_pid = n++] = (struct pollfd){c->pidfd, POLLIN, 0};
		int ms = wait <= 0 ? 0 : (int)(wait * 1000.0) + 1;
		int pr = poll(fds, (nfds_t)n, ms);
		if (pr < 0 && errno != EINTR)
			ev_sleep(0.01);
		for (int k = 0; k < 2 && pr > 0; k++) {
			int idx = k ? i_err : i_out;
			int *fd = k ? fd_err : fd_out;
			if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t got = read(*fd, chunk, sizeof chunk);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				close_fd(fd);
				continue;
			}
			bool *trunc = k ? &r->err_truncated : &r->out_truncated;
			ev_buf *b = k ? be : bo;
			if (o->discard_excess_output && (*trunc || b->len + (size_t)got > b->max)) {
				size_t room = b->max > b->len ? b->max - b->len : 0;
				if (room && !*trunc)
					(void)ev_buf_append(b, chunk, room);
				else
					room = 0;
				*trunc = true;
				tail_push(&tails[k], chunk + room, (size_t)got - room);
				continue;
			}
			if (!capture(b, chunk, (size_t)got, trunc) && !killed && !c->exited) {
				kill_all(c);
				killed = *capped = true;
				kill_time = ev_now();
			}
		}
		if (!c->exited && (c->pidfd < 0 || (i_pid >= 0 && fds[i_pid].revents))) {
			pid_t w = wait4(c->pid, status, WNOHANG, ru);
			if (w < 0 && errno == ECHILD) {
				/* someone else reaped it (SIGCHLD ignored, a waitpid(-1)) */
				c->exited = c->lost = true;
				grace = ev_now();
				kill(-c->pid, SIGKILL);
			} else if (w == c->pid) {
				c->exited = true;
				grace = ev_now() + (c->pidns ? 0.2 : 0.5);
				if (!c->pidns) /* what it started is not bound to it */
					kill_all(c);
			}
		}
	}
	r->wall_s = ev_now() - t0;
	tail_join(&tails[0], bo);
	tail_join(&tails[1], be);
}

static void classify(ev_sandbox_result *r, int status, bool timed_out, bool capped, const ev_sandbox_options *o,
                     const ev_buf *be)
{
	const char *err = be->data ? be->data : "";
	if (WIFSIGNALED(status))
		r->signal = WTERMSIG(status);
	if (timed_out) {
		r->verdict = EV_SANDBOX_TIMEOUT;
		r->detail = ev_asprintf("wall clock %.3g s", o->timeout_s);
		return;
	}
	if (capped) {
		r->verdict = EV_SANDBOX_FAILED;
		r->detail = ev_asprintf("output exceeded %zu bytes", o->max_output_bytes);
		return;
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		r->signal = sig;
		if (sig == SIGXCPU || (sig == SIGKILL && r->cpu_s >= floor(o->cpu_s) - 0.05)) {
			r->verdict = EV_SANDBOX_TIMEOUT;
			r->detail = ev_asprintf("cpu time %.3g s", o->cpu_s);
		} else if (sig == SIGXFSZ) {
			r->verdict = EV_SANDBOX_FAILED;
			r->detail = ev_asprintf("file size limit %zu bytes exceeded", o->max_file_bytes);
		} else if (sig == SIGKILL || mentions_oom(err)) {
			/* Nobody here sent that SIGKILL: the kernel's OOM killer did. */
			r->verdict = EV_SANDBOX_OOM;
			r->detail = ev_asprintf("signal %d", sig);
		} else {
			r->verdict = EV_SANDBOX_CRASHED;
			r->detail = ev_asprintf("signal %d", sig);
		}
		return;
	}
	r->exit_code = WEXITSTATUS(status);
	if (r->exit_code == 0) {
		r->verdict = EV_SANDBOX_PASSED;
		return;
	}
	char *line = ev_sandbox_failure_line(err, be->len);
	if (line && mentions_oom(line)) {
		r->verdict = EV_SANDBOX_OOM;
		r->detail = line;
		return;
	}
	r->verdict = EV_SANDBOX_FAILED;
	r->detail = line ? line : ev_asprintf("exit status %d", r->exit_code);
}

static int fail_result(ev_sandbox_result *out, int rc)
{
	out->verdict = EV_SANDBOX_ERROR;
	if (!out->detail)
		out->detail = ev_strdup(ev_error_msg());
	return rc;
}

/* The whole run with the given capabilities `s`; `probe_only` stops the
 * child right before exec (the probe's dry run). */
static int sandbox_exec(const sb_state *s, const ev_sandbox_options *opt, const char *const argv[],
                        const ev_sandbox_file *files, size_t n_files, bool probe_only, ev_sandbox_result *out,
                        sb_report *rep)
{
	ev_sandbox_options o;
	resolve_options(&o, opt);
	memset(out, 0, sizeof *out);
	memset(rep, 0, sizeof *rep);
	out->exit_code = -1;
	if (!argv || !argv[0] || argv[0][0] != '/')
		return fail_result(out, ev_error_set(EV_E_INVALID, "sandbox: argv[0] must be an absolute path"));
	if (n_files > MAX_FILES || (n_files && !files))
		return fail_result(out, ev_error_set(EV_E_INVALID, "sandbox: %zu files (at most %d)", n_files, MAX_FILES));
	for (size_t i = 0; i < n_files; i++)
		if (!plain_name(files[i].name) || (files[i].len && !files[i].data))
			return fail_result(out, ev_error_set(EV_E_INVALID, "sandbox: file %zu: \"%.100s\" is not a plain file name",
			                                     i, files[i].name ? files[i].name : "(null)"));
	if (o.stdin_name && !plain_name(o.stdin_name))
		return fail_result(out, ev_error_set(EV_E_INVALID, "sandbox: stdin_name: not a plain file name"));

	int rc = 0;
	sb_plan *p = calloc(1, sizeof *p);
	char *host_dir = NULL, *env_home = NULL, *env[4] = {NULL};
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, pr[2] = {-1, -1}, sync_fd[2] = {-1, -1};
	int fd_null = -1;
	sb_child c = {-1, -1, false, false, 0, false, false};
	ev_buf bo = EV_BUF_INIT(o.max_output_bytes), be = EV_BUF_INIT(o.max_output_bytes);
	if (!p) {
		rc = ev_error_set(EV_E_NOMEM, "sandbox: out of memory");
		goto done;
	}

	/* Ids: two fresh host uids a run, so no two runs share a process count. */
	unsigned slot = (((unsigned)getpid() & 0xFFFu) << 16) | (atomic_fetch_add(&g_counter, 1u) & 0xFFFFu);
	uid_t host_setup = UID_BASE + 2 * slot, host_run = host_setup + 1;
	p->flags = s->ns_flags;
	p->userns = s->userns;
	p->mounts = s->mounts;
	p->proc = s->proc;
	p->ro_root = s->ro_root;
	p->probe = probe_only;
	if (s->userns) {
		p->setup_as_root = true;
		p->drop_groups = s->root;
		p->switch_id = s->root;
		p->drop_caps = !s->root;
		p->run_uid = s->root ? INNER_RUN_ID : 0;
		p->run_gid = p->run_uid;
	} else if (s->root) {
		p->switch_id = p->drop_groups = true;
		p->run_uid = host_run;
		p->run_gid = (gid_t)host_run;
	} else {
		p->run_uid = geteuid();
		p->run_gid = getegid();
	}
	c.pidns = (s->ns_flags & CLONE_NEWPID) != 0;
	c.host_run_uid = host_run;
	c.sweep_uid = s->root && (s->userns || p->switch_id);

	if (p->mounts) {
		static const char *const sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"};
		for (size_t i = 0; i < sizeof sys / sizeof sys[0] && !rc; i++)
			rc = add_bind(p, sys[i]);
		for (size_t i = 0; o.ro_paths && o.ro_paths[i] && !rc; i++)
			rc = add_bind(p, o.ro_paths[i]);
		if (rc)
			goto done;
		snprintf(p->root_opts, sizeof p->root_opts, "size=4m,nr_inodes=4096,mode=0755");
		snprintf(p->work_opts, sizeof p->work_opts, "size=%zu,nr_inodes=16384,mode=0700,uid=%u,gid=%u", o.work_bytes,
		         (unsigned)p->run_uid, (unsigned)p->run_gid);
		snprintf(p->tmp_opts, sizeof p->tmp_opts, "size=%zu,nr_inodes=16384,mode=1777", o.work_bytes);
		p->workdir = WORKDIR;
		p->files = files;
		p->n_files = n_files;
	} else {
		if ((rc = ev_mkdtemp(&host_dir, o.tmp_dir, "sbx"))) {
			rc = ev_error_wrap(rc, "sandbox");
			goto done;
		}
		if ((rc = host_files(host_dir, files, n_files, p->switch_id, host_run)))
			goto done;
		if (p->switch_id && chown(host_dir, host_run, (gid_t)host_run) != 0) {
			rc = ev_error_set(EV_E_IO, "sandbox: chown %s: %s", host_dir, strerror(errno));
			goto done;
		}
		p->workdir = host_dir;
	}
	p->stdin_name = o.stdin_name;
	double cpu = ceil(o.cpu_s);
	p->lim_cpu = (struct rlimit){(rlim_t)cpu, (rlim_t)cpu + 1};
	p->lim_as = (struct rlimit){(rlim_t)o.mem_bytes, (rlim_t)o.mem_bytes};
	/* processes x RLIMIT_AS: the run's memory bound (ev_sandbox_max_procs) */
	rlim_t nproc = (rlim_t)ev_sandbox_max_procs(&o);
	p->lim_nproc = (struct rlimit){nproc, nproc};
	p->lim_fsize = (struct rlimit){(rlim_t)o.max_file_bytes, (rlim_t)o.max_file_bytes};
	p->lim_nofile = (struct rlimit){(rlim_t)o.max_open_files, (rlim_t)o.max_open_files};
	env_home = ev_asprintf("HOME=%s", p->workdir);
	env[0] = ENV_PATH;
	env[1] = env_home;
	env[2] = "LANG=C.UTF-8";
	p->path = argv[0];
	p->argv = (char *const *)argv;
	p->envp = env;
	if (!env_home) {
		rc = ev_error_set(EV_E_NOMEM, "sandbox: out of memory");
		goto done;
	}

	if (pipe_hi(po) || pipe_hi(pe) || pipe_hi(pr) ||
	    (s->userns && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync_fd) != 0) ||
	    (sync_fd[0] = fd_hi(sync_fd[0])) < -1 || (sync_fd[1] = fd_hi(sync_fd[1])) < -1 ||
	    (fd_null = fd_hi(open("/dev/null", O_RDONLY | O_CLOEXEC))) < 0) {
		rc = ev_error_set(EV_E_IO, "sandbox: pipes: %s", strerror(errno));
		goto done;
	}
	p->fd_out = po[1];
	p->fd_err = pe[1];
	p->fd_report = pr[1];
	p->fd_sync = sync_fd[0];
	p->fd_null = fd_null;
	p->seccomp = s->filter ? &s->seccomp : NULL;

	c.pid = ev_sb_clone(p->flags, &c.pidfd, s->pidfd);
	if (c.pid == 0)
		ev_sb_child_main(p);
	if (c.pid < 0) {
		rc = ev_error_set(EV_E_IO, "sandbox: clone: %s", strerror(errno));
		goto done;
	}
	close_fd(&po[1]);
	close_fd(&pe[1]);
	close_fd(&pr[1]);
	close_fd(&sync_fd[0]);

	if (s->userns) {
		char map[96], path[64];
		int e = 0;
		if (s->root) {
			snprintf(map, sizeof map, "0 %u 1\n%u %u 1\n", (unsigned)host_setup, INNER_RUN_ID, (unsigned)host_run);
		} else {
			snprintf(map, sizeof map, "0 %u 1\n", (unsigned)geteuid());
			snprintf(path, sizeof path, "/proc/%d/setgroups", (int)c.pid);
			e = write_text(path, "deny");
		}
		snprintf(path, sizeof path, "/proc/%d/uid_map", (int)c.pid);
		if (!e)
			e = write_text(path, map);
		if (!s->root)
			snprintf(map, sizeof map, "0 %u 1\n", (unsigned)getegid());
		snprintf(path, sizeof path, "/proc/%d/gid_map", (int)c.pid);
		if (!e)
			e = write_text(path, map);
		if (e) {
			rep->step = STEP_IDS;
			rep->err = e;
			snprintf(rep->what, sizeof rep->what, "writing the id maps");
		} else if (send(sync_fd[1], "g", 1, MSG_NOSIGNAL) != 1) {
			rep->step = STEP_SYNC;
			rep->err = errno;
		}
		close_fd(&sync_fd[1]);
	}

	/* The report pipe closes on exec; a setup fault writes to it first. */
	if (!rep->step) {
		struct pollfd pf = {pr[0], POLLIN, 0};
		int pr_rc = poll(&pf, 1, (int)(o.timeout_s * 1000) + 1000);
		ssize_t got = pr_rc > 0 ? read(pr[0], rep, sizeof *rep) : -1;
		if (pr_rc == 0) {
			rep->step = STEP_EXEC;
			rep->err = ETIMEDOUT;
			snprintf(rep->what, sizeof rep->what, "setup did not finish");
		} else if (got != 0 && got != (ssize_t)sizeof *rep) {
			memset(rep, 0, sizeof *rep);
			rep->step = STEP_SYNC;
			rep->err = got < 0 ? errno : EPROTO;
		}
	}
	bool timed_out = false, capped = false;
	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof ru);
	if (rep->step) {
		kill_all(&c);
		while (wait4(c.pid, &status, 0, &ru) < 0 && errno == EINTR) {
		}
		c.exited = true;
		out->verdict = EV_SANDBOX_ERROR;
		out->detail = ev_asprintf("%s%s%s: %s", rep->step < STEP_COUNT ? ev_sb_step_names[rep->step] : "setup",
		                          rep->what[0] ? " " : "", rep->what, strerror(rep->err));
		goto done;
	}
	capture_loop(&c, &po[0], &pe[0], &o, &bo, &be, out, &timed_out, &capped, &status, &ru);
	if (!c.exited) {
		kill_all(&c);
		while (wait4(c.pid, &status, 0, &ru) < 0 && errno == EINTR) {
		}
		c.exited = true;
	}
	out->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	             ru.ru_stime.tv_usec / 1e6;
	if (c.lost) {
		out->verdict = EV_SANDBOX_ERROR;
		out->detail = ev_strdup("lost the child's exit status (reaped elsewhere: is SIGCHLD ignored?)");
	} else {
		classify(out, status, timed_out, capped, &o, &be);
	}

done:
	close_fd(&po[0]);
	close_fd(&po[1]);
	close_fd(&pe[0]);
	close_fd(&pe[1]);
	close_fd(&pr[0]);
	close_fd(&pr[1]);
	close_fd(&sync_fd[0]);
	close_fd(&sync_fd[1]);
	close_fd(&fd_null);
	close_fd(&c.pidfd);
	if (host_dir) {
		if (ev_rmtree(host_dir, EV_RMTREE_FORCE))
			ev_log_warn("sandbox: %s", ev_error_msg());
		free(host_dir);
	}
	out->out = ev_buf_detach(&bo, &out->out_len);
	out->err = ev_buf_detach(&be, &out->err_len);
	if (!out->out)
		out->out = ev_strdup("");
	if (!out->err)
		out->err = ev_strdup("");
	free(env_home);
	free(p);
	if (rc)
		return fail_result(out, rc);
	return 0;
}

/* ---- the probe ------------------------------------------------------------ */

static bool try_clone(int flags)
{
	int pfd;
	pid_t pid = ev_sb_clone(flags, &pfd, false);
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return false;
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void note(ev_buf *b, const char *what, const char *why)
{
	(void)ev_buf_printf(b, "%s%s%s%s%s", b->len ? ", " : "", what, why ? " (" : "", why ? why : "", why ? ")" : "");
}

/* Finds what this kernel and these privileges allow: each namespace alone,
 * then dry runs of the whole setup, giving up one feature a failure. */
static void probe(void)
{
	sb_state *s = &g_state;
	static const struct {
		int flag;
		const char *name;
	} ns[] = {{CLONE_NEWPID, "pid"}, {CLONE_NEWNS, "mount"}, {CLONE_NEWNET, "network"},
	          {CLONE_NEWIPC, "ipc"}, {CLONE_NEWUTS, "uts"}};
	ev_buf missing = EV_BUF_INIT(2048);
	s->root = geteuid() == 0;
	s->pidfd = true;
	s->userns = try_clone(CLONE_NEWUSER);
	if (!s->userns)
		note(&missing, "a user namespace", NULL);
	int base = s->userns ? CLONE_NEWUSER : 0;
	s->ns_flags = base;
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		if ((s->userns || s->root) && try_clone(base | ns[i].flag))
			s->ns_flags |= ns[i].flag;
		else
			(void)ev_buf_printf(&missing, "%sa %s namespace", missing.len ? ", " : "", ns[i].name);
	}
	s->mounts = (s->ns_flags & CLONE_NEWNS) != 0;
	s->proc = s->mounts && (s->ns_flags & CLONE_NEWPID);
	s->ro_root = s->mounts;
	s->filter = ev_sb_seccomp_build(&s->seccomp) == 0;
	if (!s->filter)
		note(&missing, "a system-call filter", ev_error_msg());

	const char *argv[] = {"/bin/true", NULL};
	for (int tries = 0; tries < 8; tries++) {
		ev_sandbox_result r;
		sb_report rep;
		int rc = sandbox_exec(s, NULL, argv, NULL, 0, true, &r, &rep);
		bool ok = !rc && r.verdict == EV_SANDBOX_PASSED;
		char why[300];
		snprintf(why, sizeof why, "%s", r.detail ? r.detail : ev_error_msg());
		ev_sandbox_result_clear(&r);
		if (ok)
			break;
		int step = rep.step;
		if (step == STEP_SECCOMP && s->filter) {
			s->filter = false;
			note(&missing, "a system-call filter", why);
		} else if (step == STEP_PROC && s->proc) {
			s->proc = false;
			note(&missing, "a fresh /proc", why);
		} else if (step == STEP_RO_ROOT && s->ro_root) {
			s->ro_root = false;
			note(&missing, "a read-only root", why);
		} else if (s->mounts && step >= STEP_MOUNT_PRIVATE && step <= STEP_UMOUNT_OLD) {
			s->mounts = s->proc = s->ro_root = false;
			note(&missing, "a private root", why);
		} else if (s->userns && (step == STEP_IDS || step == STEP_SYNC)) {
			s->userns = false;
			s->ns_flags &= ~CLONE_NEWUSER;
			if (!s->root)
				s->ns_flags = 0, s->mounts = s->proc = s->ro_root = false;
			note(&missing, "user namespace ids", why);
		} else if (s->ns_flags) {
			s->ns_flags = 0;
			s->userns = s->mounts = s->proc = s->ro_root = false;
			note(&missing, "any namespace", why);
		} else {
			note(&missing, "a working dry run, so every run is a sandbox error", why);
			break;
		}
	}
	if (!s->userns && !s->root) {
		(void)ev_buf_printf(&missing, "%sa uid of its own (RLIMIT_NPROC counts every process of uid %u)",
		                    missing.len ? ", " : "", (unsigned)geteuid());
	}
	if (missing.len)
		ev_log_warn("sandbox: running without %s", missing.data);
	snprintf(s->describe, sizeof s->describe, "namespaces:%s%s%s%s%s%s; %s; %s%s%s%s",
	         s->userns ? " user" : "", s->ns_flags & CLONE_NEWPID ? " pid" : "",
	         s->ns_flags & CLONE_NEWNS ? " mount" : "", s->ns_flags & CLONE_NEWNET ? " net" : "",
	         s->ns_flags & CLONE_NEWIPC ? " ipc" : "", s->ns_flags & CLONE_NEWUTS ? " uts" : "",
	         s->userns || s->root ? "own uid per run" : "shared uid", s->mounts ? "private root" : "host root",
	         s->mounts && s->ro_root ? " (read-only)" : "", s->proc ? ", own /proc" : "",
	         s->filter ? "; system-call filter" : "");
	ev_buf_free(&missing);
}

static const sb_state *state(void)
{
	pthread_once(&g_once, probe);
	return &g_state;
}

const char *ev_sandbox_describe(void) { return state()->describe; }

int ev_sandbox_run(const ev_sandbox_options *opt, const char *const argv[], const ev_sandbox_file *files,
                   size_t n_files, ev_sandbox_result *out)
{
	sb_report rep;
	if (!out)
		return ev_error_set(EV_E_INVALID, "ev_sandbox_run: out is NULL");
	return sandbox_exec(state(), opt, argv, files, n_files, false, out, &rep);
}
