/*
 * sandbox_seccomp.c: the system-call filter every sandboxed program runs
 * under (libseccomp builds it once in the parent; the child installs the
 * compiled program with one prctl, right before exec).
 *
 * The namespaces already keep a program from the host; the filter takes
 * away what a program could use to build a sandbox of its own inside ours
 * or to reach the kernel's rarer attack surface:
 *   - new namespaces: unshare, setns, and clone with any CLONE_NEW* flag
 *     (clone3 answers ENOSYS, so that libc falls back to clone, whose
 *     flags the filter can read);
 *   - mounts: mount, umount2, pivot_root, chroot and the new mount API;
 *   - tracing and other processes' memory: ptrace, process_vm_readv/writev,
 *     perf_event_open;
 *   - bpf, userfaultfd, the keyrings (keyctl, add_key, request_key);
 *   - kernel modules and kexec, reboot, swap, accounting, quotas, syslog,
 *     port I/O.
 * Each answers EPERM (a program sees an ordinary "operation not
 * permitted"); everything else is allowed. A system call of another ABI
 * (x32, i386 through int 0x80) kills the program.
 */
#include "scoring/sandbox_int.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/filter.h>

#include <seccomp.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const char *const denied[] = {
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev",
	"perf_event_open", "bpf", "userfaultfd", "keyctl", "add_key", "request_key", "init_module",
	"finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
	"quotactl", "syslog", "iopl", "ioperm", "open_by_handle_at", "lookup_dcookie", "nfsservctl",
};

static const unsigned long clone_ns[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
                                         CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP, CLONE_NEWTIME};

int ev_sb_seccomp_build(struct sock_fprog *out)
{
	memset(out, 0, sizeof *out);
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return ev_error_set(EV_E_NOMEM, "sandbox: cannot start a system-call filter");
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	/* the child sets no_new_privs itself, before it installs the program */
	if (!rc)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	const char *what = "attributes";
	for (size_t i = 0; !rc && i < sizeof denied / sizeof denied[0]; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not a system call on this architecture */
		what = denied[i];
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	for (size_t i = 0; !rc && i < sizeof clone_ns / sizeof clone_ns[0]; i++) {
		what = "clone";
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns[i], clone_ns[i]));
	}
	if (!rc) {
		what = "clone3";
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	}
	/* compile: libseccomp writes the BPF program to a file descriptor */
	int fd = -1;
	if (!rc) {
		what = "compiling";
		fd = memfd_create("evald-seccomp", MFD_CLOEXEC);
		rc = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
	}
	seccomp_release(ctx);
	struct sock_filter *prog = NULL;
	off_t size = 0;
	if (!rc) {
		size = lseek(fd, 0, SEEK_END);
		if (size <= 0 || size % (off_t)sizeof *prog || size / (off_t)sizeof *prog > BPF_MAXINSNS)
			rc = -EINVAL;
		else if (!(prog = malloc((size_t)size)))
			rc = -ENOMEM;
		else if (pread(fd, prog, (size_t)size, 0) != size)
			rc = -EIO;
	}
	if (fd >= 0)
		close(fd);
	if (rc) {
		free(prog);
		return ev_error_set(EV_E_INTERNAL, "sandbox: system-call filter (%s): %s", what, strerror(-rc));
	}
	out->filter = prog;
	out->len = (unsigned short)(size / (off_t)sizeof *prog);
	return 0;
}
