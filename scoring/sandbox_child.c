/*
 * sandbox_child.c: the sandbox's child, from clone to exec.
 *
 * It runs in the child of a possibly multi-threaded evald, so it makes
 * plain system calls only: no malloc, no locks, no stdio, and no glibc
 * wrapper that talks to other threads (setresuid, setgroups go through
 * syscall()). Everything it needs was prepared in the plan before clone;
 * see sandbox.c for the whole design.
 */
#include "scoring/sandbox_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

const char *const ev_sb_step_names[STEP_COUNT] = {
	"?", "sync with parent", "set ids", "make mounts private", "mount the new root", "pivot_root",
	"bind a system folder", "populate /dev", "mount /proc", "mount the work folder", "mount /tmp",
	"detach the host root", "make the root read-only", "enter the work folder", "drop privileges",
	"write the files", "wire stdio", "set limits", "install the system-call filter", "exec",
};

/* ---- the child: system calls only --------------------------------------- */

static size_t cstrlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

static __attribute__((noreturn)) void child_fail(const sb_plan *p, int step, int err, const char *what)
{
	sb_report r;
	memset(&r, 0, sizeof r);
	r.step = step;
	r.err = err;
	if (what) {
		size_t n = cstrlen(what);
		if (n >= sizeof r.what)
			n = sizeof r.what - 1;
		memcpy(r.what, what, n);
	}
	ssize_t w = write(p->fd_report, &r, sizeof r);
	(void)w;
	_exit(127);
}

/* mkdir -p of an absolute path (the last component too). */
static int mkdir_p(const char *path, mode_t mode)
{
	char b[PATH_MAX];
	size_t n = cstrlen(path);
	if (n >= sizeof b)
		return ENAMETOOLONG;
	memcpy(b, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (b[i] != '/' && b[i] != '\0')
			continue;
		char c = b[i];
		b[i] = '\0';
		if (mkdir(b, mode) != 0 && errno != EEXIST)
			return errno;
		b[i] = c;
	}
	return 0;
}

static int parent_dir(const char *path)
{
	char b[PATH_MAX];
	size_t n = cstrlen(path);
	if (n >= sizeof b)
		return ENAMETOOLONG;
	memcpy(b, path, n + 1);
	while (n > 1 && b[n - 1] != '/')
		n--;
	if (n <= 1)
		return 0;
	b[n - 1] = '\0';
	return mkdir_p(b, 0755);
}

/* Mount flags a bind remount must keep (the kernel refuses to clear the
 * ones the original mount had when we are not its owner). */
static unsigned long locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;
	if (statvfs(path, &sv) != 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/* Shows host path `old` read-only at `dst` in the new root. */
static void bind_ro(const sb_plan *p, const char *old, const char *dst)
{
	struct stat st;
	if (lstat(old, &st) != 0)
		return; /* not on this system: nothing to show */
	int e;
	if (S_ISLNK(st.st_mode)) {
		char t[PATH_MAX];
		ssize_t n = readlink(old, t, sizeof t - 1);
		if (n < 0)
			child_fail(p, STEP_BIND, errno, dst);
		t[n] = '\0';
		if ((e = parent_dir(dst)) != 0)
			child_fail(p, STEP_BIND, e, dst);
		if (symlink(t, dst) != 0 && errno != EEXIST)
			child_fail(p, STEP_BIND, errno, dst);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if ((e = mkdir_p(dst, 0755)) != 0)
			child_fail(p, STEP_BIND, e, dst);
	} else {
		if ((e = parent_dir(dst)) != 0)
			child_fail(p, STEP_BIND, e, dst);
		int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			child_fail(p, STEP_BIND, errno, dst);
		close(fd);
	}
	if (mount(old, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
		child_fail(p, STEP_BIND, errno, dst);
	unsigned long f = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(old);
	if (mount(NULL, dst, NULL, f, NULL) != 0)
		child_fail(p, STEP_BIND, errno, dst);
}

static void setup_dev(const sb_plan *p)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
	if (mkdir("/dev", 0755) != 0 && errno != EEXIST)
		child_fail(p, STEP_DEV, errno, "/dev");
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		char src[64] = OLDROOT "/dev/", dst[32] = "/dev/";
		memcpy(src + cstrlen(src), nodes[i], cstrlen(nodes[i]) + 1);
		memcpy(dst + cstrlen(dst), nodes[i], cstrlen(nodes[i]) + 1);
		int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			child_fail(p, STEP_DEV, errno, dst);
		close(fd);
		if (mount(src, dst, NULL, MS_BIND, NULL) != 0)
			child_fail(p, STEP_DEV, errno, dst);
	}
	if (symlink("/proc/self/fd", "/dev/fd") != 0 || symlink("/proc/self/fd/0", "/dev/stdin") != 0 ||
	    symlink("/proc/self/fd/1", "/dev/stdout") != 0 || symlink("/proc/self/fd/2", "/dev/stderr") != 0)
		child_fail(p, STEP_DEV, errno, "/dev links");
	if (mkdir("/dev/shm", 01777) != 0 || chmod("/dev/shm", 01777) != 0)
		child_fail(p, STEP_DEV, errno, "/dev/shm");
}

/* The private root: see the file comment. */
static void setup_fs(const sb_plan *p)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		child_fail(p, STEP_MOUNT_PRIVATE, errno, "/");
	if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, p->root_opts) != 0)
		child_fail(p, STEP_MOUNT_ROOT, errno, NEWROOT);
	if (mkdir(NEWROOT "/.oldroot", 0700) != 0)
		child_fail(p, STEP_MOUNT_ROOT, errno, NEWROOT "/.oldroot");
	/* The new root was mounted over the host's /tmp, so after the pivot
	 * the host tree (its /tmp included) sits at OLDROOT unobscured. */
	if (syscall(SYS_pivot_root, NEWROOT, NEWROOT "/.oldroot") != 0)
		child_fail(p, STEP_PIVOT, errno, NEWROOT);
	if (chdir("/") != 0)
		child_fail(p, STEP_PIVOT, errno, "/");
	for (size_t i = 0; i < p->n_binds; i++)
		bind_ro(p, p->bind_old[i], p->binds[i]);
	setup_dev(p);
	if (p->proc) {
		if (mkdir("/proc", 0555) != 0 || mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
			child_fail(p, STEP_PROC, errno, "/proc");
	}
	if (mkdir(WORKDIR, 0700) != 0 || mount("tmpfs", WORKDIR, "tmpfs", MS_NOSUID | MS_NODEV, p->work_opts) != 0)
		child_fail(p, STEP_WORK, errno, WORKDIR);
	if (mkdir("/tmp", 01777) != 0 || mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p->tmp_opts) != 0)
		child_fail(p, STEP_TMP, errno, "/tmp");
	if (umount2(OLDROOT, MNT_DETACH) != 0 || rmdir(OLDROOT) != 0)
		child_fail(p, STEP_UMOUNT_OLD, errno, OLDROOT);
	if (p->ro_root && mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, p->root_opts) != 0)
		child_fail(p, STEP_RO_ROOT, errno, "/");
}

static void write_files(const sb_plan *p)
{
	for (size_t i = 0; i < p->n_files; i++) {
		const ev_sandbox_file *f = &p->files[i];
		int fd = open(f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			child_fail(p, STEP_FILES, errno, f->name);
		size_t off = 0;
		while (off < f->len) {
			ssize_t w = write(fd, f->data + off, f->len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				child_fail(p, STEP_FILES, w < 0 ? errno : EIO, f->name);
			off += (size_t)w;
		}
		close(fd);
	}
}

static void set_ids(const sb_plan *p, uid_t uid, gid_t gid, bool groups)
{
	if (groups && syscall(SYS_setgroups, 0, NULL) != 0)
		child_fail(p, STEP_IDS, errno, "setgroups");
	if (syscall(SYS_setresgid, gid, gid, gid) != 0)
		child_fail(p, STEP_IDS, errno, "setresgid");
	if (syscall(SYS_setresuid, uid, uid, uid) != 0)
		child_fail(p, STEP_IDS, errno, "setresuid");
}

/* Inside uid 0 of a user namespace keeps every capability there, and exec
 * as uid 0 would give them back: empty the bounding set, then the sets. */
static void drop_caps(const sb_plan *p)
{
	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			child_fail(p, STEP_DROP, errno, "capability bounding set");
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) != 0)
		child_fail(p, STEP_DROP, errno, "capset");
}

__attribute__((noreturn)) void ev_sb_child_main(const sb_plan *p)
{
	umask(022);
	if (p->fd_sync >= 0) {
		char c;
		ssize_t r;
		do
			r = read(p->fd_sync, &c, 1);
		while (r < 0 && errno == EINTR);
		if (r != 1)
			child_fail(p, STEP_SYNC, r < 0 ? errno : EPIPE, "no go from the parent");
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setsid();
	if (p->setup_as_root)
		set_ids(p, 0, 0, p->drop_groups);
	if (p->flags & CLONE_NEWUTS)
		(void)sethostname("sandbox", 7);
	if (p->mounts)
		setup_fs(p);
	if (chdir(p->workdir) != 0)
		child_fail(p, STEP_CHDIR, errno, p->workdir);
	if (p->switch_id)
		set_ids(p, p->run_uid, p->run_gid, !p->setup_as_root && p->drop_groups);
	if (p->drop_caps)
		drop_caps(p);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		child_fail(p, STEP_DROP, errno, "no_new_privs");
	if (p->mounts)
		write_files(p);

	int in = p->fd_null;
	if (p->stdin_name && (in = open(p->stdin_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		child_fail(p, STEP_STDIO, errno, p->stdin_name);
	if (dup2(in, 0) < 0 || dup2(p->fd_out, 1) < 0 || dup2(p->fd_err, 2) < 0)
		child_fail(p, STEP_STDIO, errno, "dup2");
	/* Other threads' pipes may have leaked into this child: none survive exec. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		for (int fd = 3; fd < 4096; fd++)
			if (fd != p->fd_report)
				(void)fcntl(fd, F_SETFD, FD_CLOEXEC);

	if (setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0}) != 0 || setrlimit(RLIMIT_CPU, &p->lim_cpu) != 0 ||
	    setrlimit(RLIMIT_AS, &p->lim_as) != 0 || setrlimit(RLIMIT_NPROC, &p->lim_nproc) != 0 ||
	    setrlimit(RLIMIT_FSIZE, &p->lim_fsize) != 0 || setrlimit(RLIMIT_NOFILE, &p->lim_nofile) != 0)
		child_fail(p, STEP_RLIMIT, errno, "setrlimit");
	/* The parent-death signal set at the start is cleared by every change
	 * of credentials since (setresuid, capset): set it again last, then
	 * make sure the parent did not die before it was set (its end of the
	 * report pipe would be gone: POLLERR on ours). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* last: the filter denies nothing the steps above need, but fewer
	 * calls run under it the fewer can surprise it */
	if (p->seccomp && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p->seccomp, 0, 0) != 0)
		child_fail(p, STEP_SECCOMP, errno, "seccomp");
	struct pollfd alive = {p->fd_report, POLLOUT, 0};
	if (poll(&alive, 1, 0) == 1 && (alive.revents & POLLERR))
		_exit(127);
	if (p->probe)
		_exit(0);
	execve(p->path, p->argv, p->envp);
	child_fail(p, STEP_EXEC, errno, p->path);
}

pid_t ev_sb_clone(int flags, int *pidfd, bool want_pidfd)
{
	*pidfd = -1;
	if (want_pidfd) {
		long r = syscall(SYS_clone, (unsigned long)flags | CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, 0UL);
		if (r >= 0 || errno != EINVAL)
			return (pid_t)r;
		*pidfd = -1;
	}
	return (pid_t)syscall(SYS_clone, (unsigned long)flags | SIGCHLD, NULL, NULL, NULL, 0UL);
}
