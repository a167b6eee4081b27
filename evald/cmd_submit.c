/*
 * evald submit: evaluations as Slurm jobs.
 *
 *   evald submit slurm --shards N [--dir DIR] [--baseline RUN] [--sbatch ARG]... [--dry-run] -- run ARGS...
 *   evald submit slurm --resume DIR      submit again only the shards without a finished run
 *   evald submit status DIR [--json]     the jobs (squeue, sacct where accounting is on) and the shards
 *   evald submit task DIR                an array task's body: shard $SLURM_ARRAY_TASK_ID of the run
 *   evald submit merge DIR               the dependent job's body: merge, compare, report
 *
 * A submission is a folder: submission.json (what was asked, the jobs
 * submitted), shard.sh and merge.sh (the job scripts), one tracker a shard
 * (shard-K.db), logs/, and at the end evald.db (the merged run, or the
 * --db given) and report.md / report.html (and compare.md against the
 * baseline). A task whose shard tracker holds a finished run does nothing;
 * one whose run is unfinished resumes it; so a submission resumed after a
 * failure redoes only what is missing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "evald/cli.h"
#include "evald/remote.h"

extern char **environ;

#define MAX_SHARDS 10000
#define MAX_ARGS 256

typedef struct {
	int64_t shards, baseline;
	const char *dir, *resume, *db;
	const char *sbatch[64];
	int n_sbatch;
	bool dry_run, json;
} submit_opts;

static const ev_opt slurm_table[] = {
	EV_O_INT("--shards", submit_opts, shards, 1, MAX_SHARDS, "N", "array tasks, one a shard (run --shard K/N)"),
	EV_O_STR("--dir", submit_opts, dir, "DIR", "the submission's folder (default evald-submit-TIME)"),
	EV_O_STR("--db", submit_opts, db, "FILE", "where the merged run goes (default DIR/evald.db)"),
	EV_O_ID("--baseline", submit_opts, baseline, "RUN", "a run in that tracker to compare the merged run with"),
	{.name = "--sbatch", .kind = EV_OPT_STRS, .off = offsetof(submit_opts, sbatch), .size = sizeof(((submit_opts *)0)->sbatch),
	 .count_off = offsetof(submit_opts, n_sbatch), .meta = "ARG",
	 .help = "an sbatch option for the shard jobs, e.g. --sbatch=--partition=cpu --sbatch=--time=2:00:00"},
	EV_O_FLAG("--dry-run", submit_opts, dry_run, "write and print the scripts and the sbatch lines; submit nothing"),
	EV_O_STR("--resume", submit_opts, resume, "DIR", "submit again the shards of DIR without a finished run"),
	EV_O_FLAG("--json", submit_opts, json, "print {\"dir\",\"array_job\",\"merge_job\",\"shards\"}"),
	EV_O_END,
};

static const ev_cmd_spec slurm_spec = {
	.name = "submit slurm",
	.synopsis = "--shards N [--dir DIR] [--baseline RUN] [--sbatch ARG]... [--dry-run] -- run ARGS...",
	.about = "Submits an evaluation as one Slurm array job (a task a shard, each into its own tracker) and\n"
	         "a job that runs after it succeeds: merge, compare with the baseline, report.",
	.opts = slurm_table,
	.more = "Example:\n"
	        "  evald submit slurm --shards 8 --sbatch=--partition=cpu -- run --model http://gpu3:8000/v1 --suite S\n"
	        "  evald submit status evald-submit-20261203-101500\n"
	        "  evald submit slurm --resume evald-submit-20261203-101500",
};

static const ev_opt dir_table[] = {
	EV_O_FLAG("--json", ev_json_opts, json, "as JSON"),
	EV_O_END,
};
static const ev_opt none_table[] = {EV_O_END};

static const ev_cmd_spec status_spec = {
	.name = "submit status", .synopsis = "DIR [--json]",
	.about = "A submission's jobs as Slurm sees them (squeue; sacct where accounting is on) and its shards'\n"
	         "runs (finished, started, not started), and the merged run once there is one.",
	.opts = dir_table, .positional = "DIR", .min_pos = 1, .max_pos = 1};
static const ev_cmd_spec task_spec = {
	.name = "submit task", .synopsis = "DIR",
	.about = "An array task's body (shard.sh runs it): shard $SLURM_ARRAY_TASK_ID of the submission's run,\n"
	         "resumed when its tracker holds an unfinished run, nothing when a finished one.",
	.opts = none_table, .positional = "DIR", .min_pos = 1, .max_pos = 1};
static const ev_cmd_spec merge_job_spec = {
	.name = "submit merge", .synopsis = "DIR",
	.about = "The merge job's body (merge.sh runs it): the shards' runs into the final tracker, merged,\n"
	         "compared with the baseline, reported (report.md, report.html, compare.md).",
	.opts = none_table, .positional = "DIR", .min_pos = 1, .max_pos = 1};

/* ---- small helpers --------------------------------------------------------------- */

/* Runs argv, its stdout into *out (malloc'd, may be NULL), its stderr
 * dropped when quiet; the exit status. */
static int spawn_quiet(const char *const *argv, char **out, bool quiet)
{
	int po[2];
	if (out)
		*out = NULL;
	if (pipe(po))
		return ev_error_set(EV_E_IO, "pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_addclose(&fa, po[0]);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	if (e) {
		close(po[0]);
		return ev_error_set(EV_E_IO, "%s: %s", argv[0], strerror(e));
	}
	ev_buf b = EV_BUF_INIT(1 << 20);
	char chunk[4096];
	ssize_t n;
	while ((n = read(po[0], chunk, sizeof chunk)) > 0)
		ev_buf_append(&b, chunk, (size_t)n);
	close(po[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (out)
		*out = ev_buf_detach(&b, NULL);
	else
		ev_buf_free(&b);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int spawn_capture(const char *const *argv, char **out)
{
	return spawn_quiet(argv, out, false);
}

static char *self_path(void)
{
	char p[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", p, sizeof p - 1);
	if (n <= 0)
		return NULL;
	p[n] = 0;
	return ev_strdup(p);
}

/* 'text' for a shell script, single quotes escaped. */
static void sh_quote(ev_buf *b, const char *s)
{
	ev_buf_putc(b, '\'');
	for (; *s; s++)
		if (*s == '\'')
			ev_buf_puts(b, "'\\''");
		else
			ev_buf_putc(b, *s);
	ev_buf_putc(b, '\'');
}

static char *in_dir(const char *dir, const char *name)
{
	return ev_asprintf("%s/%s", dir, name);
}

static int load_submission(cJSON **out, const char *dir)
{
	char *p = in_dir(dir, "submission.json"), *text = NULL;
	size_t len = 0;
	int rc = p ? ev_file_read(&text, &len, p, (size_t)1 << 24) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = ev_json_parse(out, text, len, p);
	free(p), free(text);
	return rc;
}

static int save_submission(const cJSON *s, const char *dir)
{
	char *p = in_dir(dir, "submission.json"), *text = ev_json_print(s);
	int rc = p && text ? ev_file_write(p, text, strlen(text)) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(p), free(text);
	return rc;
}

static int shard_state_local(const char *dir, int k, int64_t *run, long *results);

/* The run id a shard's task reported on its status file (--status-fd), or 0. */
static int64_t status_run(const char *dir, int k)
{
	char name[40];
	snprintf(name, sizeof name, "shard-%d.status", k);
	char *p = in_dir(dir, name), *text = NULL;
	size_t len = 0;
	int64_t id = 0;
	if (p && ev_file_read(&text, &len, p, 1 << 20) == 0) {
		cJSON *j = cJSON_Parse(text); /* the first line: {"run_id":N} */
		char *nl = strchr(text, '\n');
		if (!j && nl) {
			*nl = 0;
			j = cJSON_Parse(text);
		}
		id = (int64_t)ev_json_num(j, "run_id", 0);
		cJSON_Delete(j);
	}
	ev_error_clear();
	free(p), free(text);
	return id;
}

/* A shard's state: 2 its run finished, 1 a run not finished (*run its id),
 * 0 none; in the shard's tracker, or with a team tracker on the server. */
static int shard_state(const cJSON *s, const char *dir, int k, int64_t *run, long *results)
{
	const char *url = ev_json_str(s, "tracker", NULL);
	if (!url)
		return shard_state_local(dir, k, run, results);
	*run = status_run(dir, k), *results = 0;
	if (!*run)
		return 0;
	ev_remote *r = NULL;
	char st[32] = "";
	int rc = ev_remote_open(&r, url, ev_json_str(s, "tracker_token_env", NULL));
	if (!rc)
		rc = ev_remote_run_status(r, *run, st, results);
	ev_remote_free(r);
	ev_error_clear();
	return rc ? 0 : ev_str_starts(st, "finished") ? 2 : 1;
}

static int shard_state_local(const char *dir, int k, int64_t *run, long *results)
{
	char name[32];
	snprintf(name, sizeof name, "shard-%d.db", k);
	char *p = in_dir(dir, name);
	struct stat st;
	int state = 0;
	*run = 0, *results = 0;
	ev_tracker *t = NULL;
	if (p && stat(p, &st) == 0 && ev_tracker_open(&t, p) == 0) {
		ev_run_row *rows = NULL;
		size_t n = 0;
		if (ev_tracker_runs_list(t, &rows, &n, 1) == 0 && n) {
			*run = rows[0].id;
			*results = rows[0].n_results;
			state = rows[0].status && ev_str_starts(rows[0].status, "finished") ? 2 : 1;
		}
		ev_run_rows_free(rows, n);
	}
	ev_error_clear();
	ev_tracker_close(t);
	free(p);
	return state;
}

/* ---- submitting ------------------------------------------------------------------------ */

/* sbatch's arguments for the shard array over `list` ("0-7" or "1,5"). */
static int sbatch_lines(const cJSON *s, const char *dir, const char *list, const char *array_job, const char **argv,
                        int *argc)
{
	int n = 0;
	argv[n++] = "sbatch";
	argv[n++] = "--parsable";
	if (!array_job) {
		static char arr[64 + 4096];
		snprintf(arr, sizeof arr, "--array=%s", list);
		argv[n++] = arr;
		argv[n++] = "--job-name=evald-shards";
		static char o1[4200];
		snprintf(o1, sizeof o1, "--output=%s/logs/shard-%%a.out", dir);
		argv[n++] = o1;
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(s, "sbatch")) if (n < MAX_ARGS - 4) argv[n++] = x->valuestring;
		static char sh[4200];
		snprintf(sh, sizeof sh, "%s/shard.sh", dir);
		argv[n++] = sh;
	} else {
		static char dep[96], o2[4200], sh2[4200];
		snprintf(dep, sizeof dep, "--dependency=afterok:%s", array_job);
		snprintf(o2, sizeof o2, "--output=%s/logs/merge.out", dir);
		snprintf(sh2, sizeof sh2, "%s/merge.sh", dir);
		argv[n++] = dep;
		argv[n++] = "--kill-on-invalid-dep=yes";
		argv[n++] = "--job-name=evald-merge";
		argv[n++] = o2;
		argv[n++] = sh2;
	}
	argv[n] = NULL;
	*argc = n;
	return 0;
}

static void print_argv(const char *const *argv)
{
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; argv[i]; i++) {
		if (i)
			ev_buf_putc(&b, ' ');
		sh_quote(&b, argv[i]);
	}
	printf("%s\n", b.data ? b.data : "");
	ev_buf_free(&b);
}

/* Submits the array over `list` and the merge job after it; records both. */
static int submit(cJSON *s, const char *dir, const char *list, bool dry, bool json)
{
	const char *argv[MAX_ARGS];
	int argc;
	sbatch_lines(s, dir, list, NULL, argv, &argc);
	if (dry) {
		print_argv(argv);
		const char *m[MAX_ARGS];
		sbatch_lines(s, dir, list, "$ARRAY_JOB", m, &argc);
		print_argv(m);
		return 0;
	}
	char *out = NULL;
	int st = spawn_capture(argv, &out);
	char array_job[64] = "";
	if (st == 0 && out)
		snprintf(array_job, sizeof array_job, "%.*s", (int)strcspn(out, ";\n"), out);
	free(out);
	if (st || !array_job[0])
		return ev_error_set(EV_E_BACKEND, "sbatch of the shard array failed (exit %d)", st);
	const char *m[MAX_ARGS];
	sbatch_lines(s, dir, list, array_job, m, &argc);
	st = spawn_capture(m, &out);
	char merge_job[64] = "";
	if (st == 0 && out)
		snprintf(merge_job, sizeof merge_job, "%.*s", (int)strcspn(out, ";\n"), out);
	free(out);
	if (st || !merge_job[0])
		return ev_error_set(EV_E_BACKEND, "sbatch of the merge job failed (exit %d; the array %s runs)", st, array_job);
	cJSON *jobs = cJSON_GetObjectItem(s, "jobs"), *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "array", array_job);
	cJSON_AddStringToObject(j, "merge", merge_job);
	cJSON_AddStringToObject(j, "shards", list);
	cJSON_AddNumberToObject(j, "submitted", ev_wall_time());
	cJSON_AddItemToArray(jobs, j);
	int rc = save_submission(s, dir);
	if (!rc && json)
		printf("{\"dir\":\"%s\",\"array_job\":\"%s\",\"merge_job\":\"%s\",\"shards\":\"%s\"}\n", dir, array_job,
		       merge_job, list);
	else if (!rc)
		printf("submitted shards %s as job %s, the merge as job %s (evald submit status %s)\n", list, array_job,
		       merge_job, dir);
	return rc;
}

static int write_scripts(const char *dir, const char *evald)
{
	ev_buf b = EV_BUF_INIT(1 << 20);
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) {
		ev_buf_reset(&b);
		ev_buf_puts(&b, "#!/bin/bash\n# written by evald submit slurm: ");
		ev_buf_puts(&b, k ? "the merge, after every shard succeeded\n" : "one shard of the evaluation a task\n");
		ev_buf_puts(&b, "exec ");
		sh_quote(&b, evald);
		ev_buf_puts(&b, k ? " submit merge " : " submit task ");
		sh_quote(&b, dir);
		ev_buf_putc(&b, '\n');
		char *p = in_dir(dir, k ? "merge.sh" : "shard.sh");
		rc = p ? ev_file_write(p, b.data, b.len) : ev_error_set(EV_E_NOMEM, "out of memory");
		if (!rc && chmod(p, 0755))
			rc = ev_error_set(EV_E_IO, "%s: %s", p, strerror(errno));
		free(p);
	}
	ev_buf_free(&b);
	return rc;
}

static int cmd_slurm(const ev_cli *cli, int argc, char **argv)
{
	int dd = argc;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dd = i;
			break;
		}
	submit_opts o = {.json = cli->json};
	int prc = ev_opt_parse(&slurm_spec, &o, dd, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (o.resume) { /* the shards of DIR without a finished run */
		cJSON *s = NULL;
		if (load_submission(&s, o.resume))
			return ev_cli_fail("submit slurm --resume");
		int n = (int)ev_json_num(s, "shards", 0);
		ev_buf list = EV_BUF_INIT(1 << 20);
		for (int k = 0; k < n; k++) {
			int64_t run;
			long res;
			if (shard_state(s, o.resume, k, &run, &res) != 2)
				ev_buf_printf(&list, "%s%d", list.len ? "," : "", k);
		}
		int rc = 0;
		if (!list.len) {
			printf("every shard of %s has a finished run; submitting the merge alone is `%s`\n", o.resume,
			       "sbatch merge.sh");
		} else {
			rc = submit(s, o.resume, list.data, o.dry_run, o.json);
		}
		ev_buf_free(&list);
		cJSON_Delete(s);
		return rc ? ev_cli_fail("submit slurm --resume") : 0;
	}
	if (dd >= argc - 1 || strcmp(argv[dd + 1], "run")) {
		fprintf(stderr, "evald submit slurm: give the run after --: -- run --model URL --suite S ...\n");
		return EV_EXIT_USAGE;
	}
	if (!o.shards) {
		fprintf(stderr, "evald submit slurm: --shards N is required\n");
		return EV_EXIT_USAGE;
	}
	for (int i = dd + 2; i < argc; i++)
		if (!strcmp(argv[i], "--shard") || ev_str_starts(argv[i], "--shard=") || !strcmp(argv[i], "--resume")) {
			fprintf(stderr, "evald submit slurm: %s is the submission's to set\n", argv[i]);
			return EV_EXIT_USAGE;
		} else if (!strcmp(argv[i], "--tracker") || !strcmp(argv[i], "--db")) {
			fprintf(stderr, "evald submit slurm: %s belongs before the --: each shard writes its own tracker in the "
			                "submission's folder, merged into --db at the end, or with --tracker URL streams to "
			                "that team tracker, where the merged run goes too\n",
			        argv[i]);
			return EV_EXIT_USAGE;
		}
	char dir[4096];
	if (o.dir) {
		snprintf(dir, sizeof dir, "%s", o.dir);
	} else {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(dir, sizeof dir, "evald-submit-%Y%m%d-%H%M%S", &tm);
	}
	char *evald = self_path(), abs[PATH_MAX];
	int rc = evald ? ev_mkdir_p(dir) : ev_error_set(EV_E_IO, "cannot tell where this evald is");
	if (!rc && !realpath(dir, abs))
		rc = ev_error_set(EV_E_IO, "%s: %s", dir, strerror(errno));
	char *logs = rc ? NULL : in_dir(abs, "logs");
	if (!rc)
		rc = logs ? ev_mkdir_p(logs) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(logs);
	cJSON *s = rc ? NULL : cJSON_CreateObject();
	if (s) {
		cJSON_AddNumberToObject(s, "shards", (double)o.shards);
		cJSON_AddStringToObject(s, "evald", evald);
		char *db = o.db ? NULL : in_dir(abs, "evald.db");
		char dbabs[PATH_MAX];
		if (o.db && !realpath(o.db, dbabs)) /* not there yet: as given, from here */
			snprintf(dbabs, sizeof dbabs, "%s", o.db);
		cJSON_AddStringToObject(s, "db", db ? db : dbabs);
		free(db);
		cJSON_AddNumberToObject(s, "baseline", (double)o.baseline);
		if (cli->tracker_url) { /* shards stream to the team tracker; the merge goes there */
			cJSON_AddStringToObject(s, "tracker", cli->tracker_url);
			if (cli->tracker_token_env)
				cJSON_AddStringToObject(s, "tracker_token_env", cli->tracker_token_env);
		}
		cJSON *run = cJSON_AddArrayToObject(s, "run"), *sb = cJSON_AddArrayToObject(s, "sbatch");
		for (int i = dd + 1; i < argc; i++)
			cJSON_AddItemToArray(run, cJSON_CreateString(argv[i]));
		for (int i = 0; i < o.n_sbatch; i++)
			cJSON_AddItemToArray(sb, cJSON_CreateString(o.sbatch[i]));
		cJSON_AddArrayToObject(s, "jobs");
		rc = save_submission(s, abs);
	}
	if (!rc)
		rc = write_scripts(abs, evald);
	if (!rc && o.dry_run) {
		for (int k = 0; k < 2; k++) {
			char *p = in_dir(abs, k ? "merge.sh" : "shard.sh"), *text = NULL;
			size_t len = 0;
			if (p && ev_file_read(&text, &len, p, 1 << 20) == 0)
				printf("==> %s\n%s", p, text);
			free(p), free(text);
		}
		printf("==> sbatch\n");
	}
	if (!rc) {
		char list[64];
		snprintf(list, sizeof list, "0-%lld", (long long)(o.shards - 1));
		rc = submit(s, abs, list, o.dry_run, o.json);
	}
	cJSON_Delete(s);
	free(evald);
	return rc ? ev_cli_fail("submit slurm") : 0;
}

/* ---- the job bodies ---------------------------------------------------------------------- */

static int cmd_task(const ev_cli *cli, int argc, char **argv)
{
	(void)cli;
	const char *pos[1] = {NULL};
	int npos = 0, prc = ev_opt_parse(&task_spec, NULL, argc, argv, pos, &npos);
	if (prc)
		return ev_opt_exit(prc);
	argv[1] = (char *)pos[0];
	const char *task = getenv("SLURM_ARRAY_TASK_ID");
	int64_t k;
	if (!task || !ev_parse_i64(task, &k) || k < 0) {
		fprintf(stderr, "evald submit task DIR: an array task's body ($SLURM_ARRAY_TASK_ID set by Slurm)\n");
		return EV_EXIT_USAGE;
	}
	cJSON *s = NULL;
	if (load_submission(&s, argv[1]))
		return ev_cli_fail("submit task");
	int n = (int)ev_json_num(s, "shards", 0);
	if (k >= n) {
		cJSON_Delete(s);
		fprintf(stderr, "evald submit task: task %lld of %d shards\n", (long long)k, n);
		return EV_EXIT_USAGE;
	}
	int64_t run;
	long res;
	int state = shard_state(s, argv[1], (int)k, &run, &res);
	if (state == 2) {
		printf("shard %lld: run %lld finished already (%ld results)\n", (long long)k, (long long)run, res);
		cJSON_Delete(s);
		return 0;
	}
	char name[32], shard[64], id[32];
	snprintf(name, sizeof name, "shard-%lld.db", (long long)k);
	snprintf(shard, sizeof shard, "%lld/%d", (long long)k, n);
	snprintf(id, sizeof id, "%lld", (long long)run);
	char *db = in_dir(argv[1], name);
	const char *av[MAX_ARGS];
	int c = 0;
	av[c++] = ev_json_str(s, "evald", "evald");
	const char *url = ev_json_str(s, "tracker", NULL);
	if (url) { /* the team tracker; the run's id reported on shard-K.status (descriptor 3) */
		av[c++] = "--tracker";
		av[c++] = url;
		if (ev_json_str(s, "tracker_token_env", NULL)) {
			av[c++] = "--tracker-token-env";
			av[c++] = ev_json_str(s, "tracker_token_env", NULL);
		}
		char sname[40];
		snprintf(sname, sizeof sname, "shard-%lld.status", (long long)k);
		char *sp = in_dir(argv[1], sname);
		int fd = sp ? open(sp, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1; /* kept across exec */
		free(sp);
		if (fd < 0 || (fd != 3 && (dup2(fd, 3) < 0 || close(fd)))) {
			fprintf(stderr, "evald submit task: shard-%lld.status: %s\n", (long long)k, strerror(errno));
			cJSON_Delete(s);
			return EV_EXIT_FAIL;
		}
	} else {
		av[c++] = "--db";
		av[c++] = db;
	}
	if (state == 1) { /* its run began before: finish it */
		av[c++] = "run";
		av[c++] = "--resume";
		av[c++] = id;
	} else {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(s, "run")) if (c < MAX_ARGS - 4) av[c++] = x->valuestring;
		av[c++] = "--shard";
		av[c++] = shard;
		if (url) {
			av[c++] = "--status-fd";
			av[c++] = "3";
		}
	}
	av[c] = NULL;
	fflush(NULL);
	execv(av[0], (char *const *)av);
	fprintf(stderr, "evald submit task: %s: %s\n", av[0], strerror(errno));
	free(db);
	cJSON_Delete(s);
	return EV_EXIT_FAIL;
}

static int run_evald(const cJSON *s, const char *db, const char *const *args, const char *out_file)
{
	const char *av[32];
	int c = 0;
	av[c++] = ev_json_str(s, "evald", "evald");
	if (ev_json_str(s, "tracker", NULL)) {
		av[c++] = "--tracker";
		av[c++] = ev_json_str(s, "tracker", NULL);
		if (ev_json_str(s, "tracker_token_env", NULL)) {
			av[c++] = "--tracker-token-env";
			av[c++] = ev_json_str(s, "tracker_token_env", NULL);
		}
	} else {
		av[c++] = "--db";
		av[c++] = db;
	}
	for (int i = 0; args[i] && c < 30; i++)
		av[c++] = args[i];
	av[c] = NULL;
	char *out = NULL;
	int st = spawn_capture(av, &out);
	if (out_file && out)
		ev_file_write(out_file, out, strlen(out));
	free(out);
	return st;
}

/* Shard k's finished run copied into t (a new run there): its id. */
static int copy_shard(ev_tracker *t, const char *dir, int k, int64_t *to)
{
	int64_t run;
	long res;
	if (shard_state_local(dir, k, &run, &res) != 2)
		return ev_error_set(EV_E_INVALID, "shard %d has no finished run: evald submit slurm --resume %s", k, dir);
	char name[32];
	snprintf(name, sizeof name, "shard-%d.db", k);
	char *p = in_dir(dir, name);
	ev_tracker *st = NULL;
	ev_run_row row = {0};
	int rc = p ? ev_tracker_open(&st, p) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = ev_tracker_run_get(st, run, &row);
	if (!rc) {
		ev_run_info info = {row.model, row.model_source, row.suites_json, row.config_json, row.epochs, row.n_planned,
		                    0, NULL};
		rc = ev_tracker_run_create(t, &info, to);
	}
	if (!rc)
		rc = ev_tracker_results_copy(st, run, t, *to, NULL);
	if (!rc && row.summary_json)
		rc = ev_tracker_run_set_summary(t, *to, row.summary_json);
	if (!rc)
		rc = ev_tracker_run_set_status(t, *to, row.status);
	if (!rc)
		rc = ev_tracker_flush(t);
	ev_run_row_clear(&row);
	ev_tracker_close(st);
	free(p);
	return rc;
}

/* evald --db DB --json merge ID... : the merged run's id in DB. */
static int merge_in(const cJSON *s, const char *db, char (*ids)[24], int n, int64_t *merged)
{
	if (n == 1) { /* one shard: its run is the evaluation */
		*merged = atoll(ids[0]);
		return 0;
	}
	const char **av = calloc((size_t)n + 8, sizeof *av);
	if (!av)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int c = 0;
	av[c++] = ev_json_str(s, "evald", "evald");
	av[c++] = "--db";
	av[c++] = db;
	av[c++] = "--json";
	av[c++] = "merge";
	for (int k = 0; k < n; k++)
		av[c++] = ids[k];
	av[c] = NULL;
	char *out = NULL;
	int st = spawn_capture(av, &out);
	cJSON *j = out ? cJSON_Parse(out) : NULL;
	*merged = (int64_t)ev_json_num(j, "run_id", 0);
	cJSON_Delete(j);
	free(out);
	free(av);
	return st || *merged <= 0 ? ev_error_set(EV_E_INVALID, "evald merge of the shards failed (exit %d)", st) : 0;
}

/* Local shards: each shard's run copied into the final tracker and merged there. */
static int merge_local(const cJSON *s, const char *dir, int n, char (*ids)[24], int64_t *merged)
{
	const char *db = ev_json_str(s, "db", "evald.db");
	ev_tracker *t = NULL;
	int rc = ev_tracker_open(&t, db);
	for (int k = 0; !rc && k < n; k++) {
		int64_t to = 0;
		if (!(rc = copy_shard(t, dir, k, &to)))
			snprintf(ids[k], sizeof ids[k], "%lld", (long long)to);
	}
	ev_tracker_close(t);
	return rc ? rc : merge_in(s, db, ids, n, merged);
}

/* A team tracker: the shards' runs copied from it into a temporary file,
 * merged there, the merged run sent back as a run of its own. */
static int merge_remote(const cJSON *s, const char *dir, int n, char (*ids)[24], int64_t *merged)
{
	ev_remote *r = NULL;
	int64_t *runs = calloc((size_t)n + 1, sizeof *runs);
	int rc = runs ? ev_remote_open(&r, ev_json_str(s, "tracker", ""), ev_json_str(s, "tracker_token_env", NULL))
	              : ev_error_set(EV_E_NOMEM, "out of memory");
	for (int k = 0; !rc && k < n; k++) {
		long res;
		if (shard_state(s, dir, k, &runs[k], &res) != 2)
			rc = ev_error_set(EV_E_INVALID, "shard %d has no finished run: evald submit slurm --resume %s", k, dir);
		else
			snprintf(ids[k], sizeof ids[k], "%lld", (long long)runs[k]);
	}
	if (!rc && n == 1) {
		*merged = runs[0];
	} else if (!rc) {
		char *tmp = in_dir(dir, "merge-mirror.db");
		ev_tracker *t = NULL;
		int64_t local = 0;
		ev_remote_mirror_remove(tmp); /* a stale one from an earlier try */
		if (!(rc = ev_tracker_open(&t, tmp)))
			rc = ev_remote_mirror(r, t, runs, (size_t)n);
		ev_tracker_close(t);
		t = NULL;
		if (!rc)
			rc = merge_in(s, tmp, ids, n, &local);
		if (!rc && !(rc = ev_tracker_open(&t, tmp)))
			rc = ev_remote_push_run(r, t, local, merged);
		ev_tracker_close(t);
		ev_remote_mirror_remove(tmp);
		free(tmp);
	}
	ev_remote_free(r);
	free(runs);
	return rc;
}

/* The merge job: the shards' runs merged (in the final tracker, or on the
 * team tracker), compared with the baseline, reported. */
static int cmd_merge_job(const ev_cli *cli, int argc, char **argv)
{
	(void)cli;
	const char *pos[1] = {NULL};
	int npos = 0, prc = ev_opt_parse(&merge_job_spec, NULL, argc, argv, pos, &npos);
	if (prc)
		return ev_opt_exit(prc);
	const char *dir = pos[0];
	cJSON *s = NULL;
	if (load_submission(&s, dir))
		return ev_cli_fail("submit merge");
	int n = (int)ev_json_num(s, "shards", 0), rc = 0;
	const char *db = ev_json_str(s, "db", "evald.db");
	char (*ids)[24] = calloc((size_t)(n > 0 ? n : 1), sizeof *ids);
	int64_t merged = 0;
	if (!ids)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	else if (ev_json_str(s, "tracker", NULL))
		rc = merge_remote(s, dir, n, ids, &merged);
	else
		rc = merge_local(s, dir, n, ids, &merged);
	if (!rc) {
		char mid[24], base[24];
		snprintf(mid, sizeof mid, "%lld", (long long)merged);
		char *md = in_dir(dir, "report.md"), *html = in_dir(dir, "report.html"), *cmp = in_dir(dir, "compare.md");
		const char *rep[] = {"report", mid, NULL};
		const char *reph[] = {"report", mid, "--format", "html", "-o", html, NULL};
		if (run_evald(s, db, rep, md) || run_evald(s, db, reph, NULL))
			ev_log_warn("submit merge: the report of run %s could not be written", mid);
		int64_t b = (int64_t)ev_json_num(s, "baseline", 0);
		if (b > 0) {
			snprintf(base, sizeof base, "%lld", (long long)b);
			const char *c[] = {"compare", base, mid, NULL};
			int st = run_evald(s, db, c, cmp);
			if (st && st != 1) /* 1: a regression found, which is news, not a failure */
				ev_log_warn("submit merge: compare %s %s exited %d", base, mid, st);
		}
		cJSON_DeleteItemFromObject(s, "merged_run");
		cJSON_AddNumberToObject(s, "merged_run", (double)merged);
		rc = save_submission(s, dir);
		if (!rc)
			printf("merged run %s in %s; report %s\n", mid, ev_json_str(s, "tracker", db), md);
		free(md), free(html), free(cmp);
	}
	free(ids);
	cJSON_Delete(s);
	return rc ? ev_cli_fail("submit merge") : 0;
}

/* ---- status ------------------------------------------------------------------------------ */

static int cmd_status(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {.json = cli->json};
	const char *pos[1] = {NULL};
	int npos = 0, prc = ev_opt_parse(&status_spec, &jo, argc, argv, pos, &npos);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
	const char *dir = pos[0];
	cJSON *s = NULL;
	if (load_submission(&s, dir))
		return ev_cli_fail("submit status");
	cJSON *o = cJSON_CreateObject(), *shards = cJSON_AddArrayToObject(o, "shards"), *jobs = cJSON_AddArrayToObject(o, "jobs");
	int n = (int)ev_json_num(s, "shards", 0), done = 0;
	for (int k = 0; k < n; k++) {
		int64_t run;
		long res;
		int st = shard_state(s, dir, k, &run, &res);
		done += st == 2;
		cJSON *x = cJSON_CreateObject();
		cJSON_AddNumberToObject(x, "shard", k);
		cJSON_AddStringToObject(x, "state", st == 2 ? "finished" : st == 1 ? "started" : "not started");
		cJSON_AddNumberToObject(x, "results", (double)res);
		cJSON_AddItemToArray(shards, x);
	}
	/* each submission's jobs as Slurm sees them: queued or running (squeue),
	 * else what accounting says (sacct, where it is on), else gone */
	const cJSON *j;
	cJSON_ArrayForEach(j, cJSON_GetObjectItem(s, "jobs"))
	{
		const char *keys[] = {"array", "merge"};
		for (int i = 0; i < 2; i++) {
			const char *id = ev_json_str(j, keys[i], "");
			char *out = NULL;
			const char *sq[] = {"squeue", "-h", "-j", id, "-o", "%i %T", NULL};
			int st = spawn_quiet(sq, &out, true);
			cJSON *x = cJSON_CreateObject();
			cJSON_AddStringToObject(x, "job", id);
			cJSON_AddStringToObject(x, "kind", keys[i]);
			ev_buf states = EV_BUF_INIT(1 << 16);
			for (char *line = out && !st ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
				char *sp = strchr(line, ' ');
				if (sp)
					ev_buf_printf(&states, "%s%s", states.len ? " " : "", sp + 1);
			}
			free(out);
			if (!states.len) {
				const char *sa[] = {"sacct", "-n", "-X", "-j", id, "-o", "State", NULL};
				if (spawn_quiet(sa, &out, true) == 0 && out && *out) {
					for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
						char w[64];
						if (sscanf(line, "%63s", w) == 1)
							ev_buf_printf(&states, "%s%s", states.len ? " " : "", w);
					}
				}
				free(out);
			}
			cJSON_AddStringToObject(x, "state", states.len ? states.data : "not in the queue (done or cancelled)");
			ev_buf_free(&states);
			cJSON_AddItemToArray(jobs, x);
		}
	}
	cJSON_AddNumberToObject(o, "finished_shards", done);
	cJSON_AddNumberToObject(o, "total_shards", n);
	double merged = ev_json_num(s, "merged_run", 0);
	if (merged > 0)
		cJSON_AddNumberToObject(o, "merged_run", merged);
	if (json) {
		char *t = ev_json_print(o);
		printf("%s\n", t ? t : "{}");
		free(t);
	} else {
		printf("%d of %d shards finished%s\n", done, n, merged > 0 ? "; merged" : "");
		cJSON_ArrayForEach(j, jobs) printf("  job %-12s %-6s %s\n", ev_json_str(j, "job", ""), ev_json_str(j, "kind", ""),
		                                   ev_json_str(j, "state", ""));
		cJSON_ArrayForEach(j, shards) if (strcmp(ev_json_str(j, "state", ""), "finished"))
			printf("  shard %d: %s (%.0f results)\n", (int)ev_json_num(j, "shard", 0), ev_json_str(j, "state", ""),
			       ev_json_num(j, "results", 0));
		if (merged > 0)
			printf("  merged run %.0f in %s\n", merged, ev_json_str(s, "tracker", ev_json_str(s, "db", "")));
	}
	cJSON_Delete(o);
	cJSON_Delete(s);
	return 0;
}

int ev_cmd_submit(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"slurm", cmd_slurm, "an evaluation as a Slurm array job of shards and a merge job after it"},
		{"status", cmd_status, "a submission's jobs (squeue, sacct) and shards"},
		{"task", cmd_task, "an array task's body (shard $SLURM_ARRAY_TASK_ID)"},
		{"merge", cmd_merge_job, "the merge job's body: merge, compare, report"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"submit", "Evaluations as jobs of a scheduler (Slurm).", subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
