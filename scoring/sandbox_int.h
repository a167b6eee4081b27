/*
 * sandbox_int.h: what sandbox.c (the parent side: options, ids, capture,
 * verdicts, the probe) and sandbox_child.c (the cloned child's setup,
 * plain system calls only) share, and nothing else may use.
 */
#ifndef EV_SANDBOX_INT_H
#define EV_SANDBOX_INT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "scoring/scoring.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define MAX_BINDS 24
#define MAX_FILES 64
#define INNER_RUN_ID 1000
/* Fresh host ids: two a run (setup and run identity), spread by pid. */
#define UID_BASE 0x20000000u
#define NEWROOT "/tmp"          /* mount point of the new root before pivot */
#define OLDROOT "/.oldroot"     /* the host root after pivot_root */
#define WORKDIR "/sandbox"
#define ENV_PATH "PATH=/usr/local/bin:/usr/bin:/bin"

/* ---- the plan: everything the child needs, built before clone ---------- */

enum {
	STEP_SYNC = 1, STEP_IDS, STEP_MOUNT_PRIVATE, STEP_MOUNT_ROOT, STEP_PIVOT, STEP_BIND, STEP_DEV, STEP_PROC,
	STEP_WORK, STEP_TMP, STEP_UMOUNT_OLD, STEP_RO_ROOT, STEP_CHDIR, STEP_DROP, STEP_FILES, STEP_STDIO,
	STEP_RLIMIT, STEP_SECCOMP, STEP_EXEC, STEP_COUNT
};


typedef struct {
	int step;
	int err;
	char what[120];
} sb_report;

typedef struct {
	int flags;
	bool userns, mounts, proc, ro_root, probe;
	bool setup_as_root;  /* userns: become inside uid 0 first */
	bool switch_id;      /* then switch to run_uid/run_gid */
	bool drop_groups;
	bool drop_caps;      /* stays inside uid 0 (unprivileged userns): drop caps */
	uid_t run_uid;       /* as seen after the switch (inside the ns when userns) */
	gid_t run_gid;
	const char *workdir;
	char root_opts[64], work_opts[128], tmp_opts[128];
	const char *binds[MAX_BINDS];       /* host paths, absolute */
	char bind_old[MAX_BINDS][PATH_MAX]; /* the same under OLDROOT */
	size_t n_binds;
	const ev_sandbox_file *files;       /* written by the child (mounts) */
	size_t n_files;
	const char *stdin_name;
	struct rlimit lim_cpu, lim_as, lim_nproc, lim_fsize, lim_nofile;
	const char *path;
	char *const *argv;
	char *const *envp;
	int fd_out, fd_err, fd_sync, fd_report, fd_null;
	const struct sock_fprog *seccomp; /* installed last before exec; NULL: none */
} sb_plan;

extern const char *const ev_sb_step_names[STEP_COUNT];

struct sock_fprog;
/* Compiles the sandbox's system-call filter (sandbox_seccomp.c says what
 * it denies) into out->filter (malloc'd, kept for the process's life). */
int ev_sb_seccomp_build(struct sock_fprog *out);

/* The child's whole life after clone: setup as the plan says, then exec.
 * Never returns; a setup fault is written to fd_report and exits 127. */
__attribute__((noreturn)) void ev_sb_child_main(const sb_plan *p);

/* fork() with namespaces; *pidfd gets a pidfd when the kernel gives one. */
pid_t ev_sb_clone(int flags, int *pidfd, bool want_pidfd);

#endif
