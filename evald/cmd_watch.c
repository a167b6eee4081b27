/*
 * evald watch DIR: the checkpoint watcher. It notices each new checkpoint
 * folder in DIR once the folder is complete (watch_scan.c), evaluates it on
 * the chosen suites (ev_eval_run in a child process, watch_child.c),
 * compares the run with the baseline's, files regressions, and writes the
 * Markdown report. Its state lives in the tracker (watch_checkpoints,
 * feedback/watch.c), so a watcher that is killed or restarted picks up where
 * it stopped: a checkpoint left `running` with a run id is resumed, one
 * without is started again. The run's settings are the run command's
 * options (ev_eval_opts), checked when the watcher starts.
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "evald/cli.h"
#include "evald/watch.h"

#define MAX_SUITES EV_EVAL_MAX_LIST

typedef struct {
	ev_eval_config eval; /* first: ev_eval_opts' offsets are its own; suites in eval.suites */
	const char *db;
	const char *dir_arg;
	char *dir;         /* the watched folder, absolute (owned) */
	const char *reports_arg;
	char *reports;     /* the reports folder (owned) */
	const char *baseline;
	char *suites_buf;  /* --suites copy that eval.suites point into (owned) */
	double interval, settle;
	bool once, status, json;
} watch_opts;

/* The previous scan's fingerprint of each folder (stability over two scans). */
typedef struct {
	char *path;
	char fp[EV_SHA256_HEX];
} seen_fp;

typedef struct {
	seen_fp *v;
	size_t n;
} fp_set;

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* ---- arguments ------------------------------------------------------------------ */

/* --suites S1,S2 (the suites are those of the evaluation settings) */
static int suites_fn(void *opts, const ev_opt *opt, const char *name, const char *v)
{
	watch_opts *o = opts;
	char *buf = ev_strdup(v);
	if (!buf)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	free(o->suites_buf);
	o->suites_buf = buf;
	for (char *save = NULL, *x = strtok_r(buf, ",", &save); x; x = strtok_r(NULL, ",", &save)) {
		if (o->eval.n_suites == MAX_SUITES)
			return ev_error_set(EV_E_LIMIT, "%s: at most %d suites", name, MAX_SUITES);
		o->eval.suites[o->eval.n_suites++] = x;
	}
	return 0;
}

#define T watch_opts
static const ev_opt watch_own_opts[] = {
	EV_O_FN("--suites", EV_OPT_VALUE, "S1,S2", "the suites each checkpoint is evaluated on (or --suite each)",
	        suites_fn),
	EV_O_STR("--baseline", T, baseline, "NAME", "the checkpoint (folder or file name) or model name compared against"),
	EV_O_NUM("--interval", T, interval, 0.05, 86400, "S", "seconds between scans"),
	EV_O_NUM("--settle", T, settle, 0, 86400, "S", "seconds a folder must stay unchanged (default min(interval, 2))"),
	EV_O_STR("--reports", T, reports_arg, "DIR", "where reports go (default: reports/ beside the tracker)"),
	EV_O_FLAG("--once", T, once, "scan, process everything complete, and exit"),
	EV_O_FLAG("--status", T, status, "print the watched checkpoints' states and exit"),
	EV_O_FLAG("--json", T, json, "--status as JSON"),
	EV_O_END,
};
#undef T

static const ev_opt *const watch_groups[] = {ev_eval_opts, NULL};

static const ev_cmd_spec watch_spec = {
	.name = "watch",
	.synopsis = "DIR --suites S1,S2 --baseline NAME [--once] [OPTIONS]   |   evald watch --status [--json]",
	.about = "Each complete checkpoint in DIR (a folder with config.json and its weights, or with an\n"
	         "endpoint.json {\"url\",\"model\"}, or a GGUF file NAME.gguf; unchanged over two scans\n"
	         "--settle seconds apart) is evaluated once, compared with the baseline NAME's latest finished\n"
	         "run on the same suites (regressions filed), and reported to --reports DIR/<name>.md.\n"
	         "SIGTERM/SIGINT stop between steps; a stopped run resumes on the next start. The run options\n"
	         "below set each evaluation.",
	.opts = watch_own_opts,
	.groups = watch_groups,
	.positional = "DIR",
	.max_pos = 1,
};

static int usage_error(const char *msg)
{
	fprintf(stderr, "evald watch: %s\n", msg);
	ev_opt_usage(&watch_spec, stderr);
	return EV_EXIT_USAGE;
}

/* 0, or an exit code (help printed, or a usage error). */
static int parse_args(watch_opts *o, int argc, char **argv)
{
	const char *pos[1] = {NULL};
	int np = 0, prc = ev_opt_parse(&watch_spec, o, argc, argv, pos, &np);
	if (prc)
		return ev_opt_exit(prc) ? EV_EXIT_USAGE : -1;
	if (o->status)
		return 0;
	if (o->eval.n_models || o->eval.model_name)
		return usage_error("--model and --model-name come from each checkpoint folder, not the command line");
	if (!np || !o->eval.n_suites || !o->baseline)
		return usage_error("DIR, --suites and --baseline are required");
	if (!*o->baseline || strlen(o->baseline) > 256)
		return usage_error("--baseline takes a checkpoint or model name");
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(pos[0], real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "evald watch: %s: not a folder\n", pos[0]);
		return EV_EXIT_USAGE;
	}
	o->dir = ev_strdup(real);
	if (o->reports_arg) {
		o->reports = ev_strdup(o->reports_arg);
	} else {
		char *db = ev_strdup(o->db);
		o->reports = db ? ev_asprintf("%s/reports", dirname(db)) : NULL;
		free(db);
	}
	return o->dir && o->reports ? 0 : EV_EXIT_FAIL;
}

/* ---- the child `evald run` ----------------------------------------------------- */

static void sleep_unless_stopped(double seconds)
{
	double end = ev_now() + seconds;
	while (!g_stop && ev_now() < end) {
		double left = end - ev_now();
		ev_sleep(left < 0.1 ? left : 0.1);
	}
}

typedef struct {
	ev_tracker *t;
	const char *path; /* the checkpoint's row */
	const char *name;
} child_ctx;

/* The child's run exists: stored now, not at the end, so that a crash from
 * here on resumes this run. */
static void child_started(void *ctx, int64_t id)
{
	child_ctx *c = ctx;
	if (ev_watch_set(c->t, c->path, "running", id, NULL))
		ev_log_warn("watch: %s: cannot store run %lld: %s", c->name, (long long)id, ev_error_msg());
	else
		ev_log_info("watch: %s: run %lld started", c->name, (long long)id);
}

/* ---- one checkpoint: run, compare, report ---------------------------------------- */

/* The suite names of a stored run, into names[] (pointing into *keep). */
static size_t run_suite_names(cJSON **keep, const ev_run_row *r, const char **names, size_t max)
{
	size_t n = 0;
	*keep = r->suites_json ? cJSON_Parse(r->suites_json) : NULL;
	const cJSON *s;
	cJSON_ArrayForEach(s, *keep) if (n < max && ev_json_str(s, "name", NULL)) names[n++] = ev_json_str(s, "name", "");
	return n;
}

/* The baseline run: the evaluated run of the baseline's folder when the
 * watcher has one, else the newest finished run of a model of that name on
 * the same suites. 0 when there is none yet. */
static int64_t find_baseline(ev_tracker *t, const watch_opts *o, const ev_run_row *cand)
{
	ev_watch_row *rows = NULL;
	size_t n = 0;
	int64_t id = 0;
	cJSON *keep = NULL;
	const char *names[MAX_SUITES];
	size_t nn = run_suite_names(&keep, cand, names, MAX_SUITES);
	if (!ev_watch_list(t, &rows, &n)) {
		for (size_t i = 0; i < n && !id; i++) {
			char *p = ev_strdup(rows[i].path);
			bool is_base = p && !strcmp(basename(p), o->baseline);
			free(p);
			ev_run_row r = {0};
			if (is_base && !strcmp(rows[i].state, "evaluated") && rows[i].run_id &&
			    !ev_tracker_run_get(t, rows[i].run_id, &r) && ev_run_status_complete(r.status))
				id = rows[i].run_id;
			ev_run_row_clear(&r);
		}
	}
	ev_watch_rows_free(rows, n);
	if (!id) {
		/* By model name: the folder's run is stored under its served name. */
		if (ev_watch_baseline_run(t, o->baseline, names, nn, cand->id, &id))
			id = 0;
	}
	cJSON_Delete(keep);
	ev_error_clear();
	return id;
}

static bool is_baseline_row(const watch_opts *o, const ev_watch_row *r)
{
	char *p = ev_strdup(r->path);
	bool yes = p && (!strcmp(basename(p), o->baseline) || !strcmp(r->name, o->baseline));
	free(p);
	return yes;
}

/* Marks the row failed with the current error (or `why`) and logs it. */
static void fail_row(ev_tracker *t, const ev_watch_row *r, const char *step, const char *why)
{
	char detail[1024];
	snprintf(detail, sizeof detail, "%s: %s", step, why ? why : ev_error_msg());
	ev_log_error("watch: %s: failed: %s", r->name, detail);
	if (ev_watch_set(t, r->path, "failed", 0, detail))
		ev_log_error("watch: %s: %s", r->name, ev_error_msg());
}

/* The evaluation of one checkpoint (or the resumption of its run), in a
 * child. Returns 0 with *run_id set, 1 when stopped by a signal, 2 when it
 * cannot go on now (row marked failed, or waiting). */
static int evaluate_row(ev_tracker *t, const watch_opts *o, const ev_watch_row *row, int64_t *run_id)
{
	ev_watch_folder wf = {0};
	child_ctx cc = {t, row->path, row->name};
	ev_watch_child_status cs;
	int ret = 2;
	/* The watcher's settings with this checkpoint as the model (the child
	 * gets its own copy). */
	ev_eval_config c = o->eval;
	if (row->run_id) {
		ev_log_info("watch: %s: resuming run %lld", row->name, (long long)row->run_id);
	} else {
		/* Looked at again: a row left `complete` by an earlier watcher may have changed since. */
		if (ev_watch_folder_check(&wf, row->path)) {
			fail_row(t, row, "scan", NULL);
			goto done;
		}
		if (!wf.ready) {
			ev_log_info("watch: %s: no longer complete (%s); waiting", row->name, wf.why);
			if (ev_watch_set(t, row->path, "seen", 0, wf.why))
				ev_log_error("watch: %s", ev_error_msg());
			goto done;
		}
		c.models[0] = wf.endpoint_url ? wf.endpoint_url : row->path;
		c.n_models = 1;
		c.model_name = wf.endpoint_model ? wf.endpoint_model : row->name;
		ev_log_info("watch: %s: evaluating %s on %d suite(s)", row->name, c.models[0], c.n_suites);
	}
	if (ev_watch_set(t, row->path, "running", 0, NULL)) {
		ev_log_error("watch: %s: %s", row->name, ev_error_msg());
		goto done;
	}
	int rc = ev_watch_child_eval(o->db, &c, row->run_id, row->name, &g_stop, child_started, &cc, &cs);
	*run_id = cs.run_id ? cs.run_id : row->run_id;
	if (g_stop && rc != 0) {
		ev_log_info("watch: %s: stopped; run %lld resumes on the next start", row->name, (long long)*run_id);
		ret = 1;
	} else if (rc != 0) {
		char why[700];
		if (rc < 0)
			snprintf(why, sizeof why, "%s", ev_error_msg());
		else
			snprintf(why, sizeof why, "the evaluation ended %s (exit %d): %s",
			         *cs.status ? cs.status : "without a word", rc, cs.error);
		fail_row(t, row, "run", why);
	} else if (!*run_id) {
		fail_row(t, row, "run", "the evaluation did not say which run it made");
	} else {
		ret = 0;
	}
done:
	ev_watch_folder_clear(&wf);
	return ret;
}

/* Takes one checkpoint (state complete or running) through to evaluated.
 * Returns 1 when stopped by a signal (the row stays resumable). */
static int process(ev_tracker *t, const watch_opts *o, const ev_watch_row *row)
{
	char *folder = ev_strdup(row->path), *report = NULL, *compare_json = NULL;
	const char *base = folder ? basename(folder) : row->name;
	ev_run_row run = {0};
	ev_compare *cmp = NULL;
	int64_t cand = row->run_id;
	int stopped = 0;

	if (!folder) {
		fail_row(t, row, "memory", "out of memory");
		return 0;
	}
	bool finished = row->run_id && !ev_tracker_run_get(t, row->run_id, &run) && ev_run_status_complete(run.status);
	ev_run_row_clear(&run);
	if (!finished) {
		int er = evaluate_row(t, o, row, &cand);
		if (er) {
			stopped = er == 1;
			goto done;
		}
	}
	if (g_stop) {
		stopped = 1;
		goto done;
	}

	/* Compare with the baseline (not for the baseline itself). */
	bool is_base = is_baseline_row(o, row);
	if (ev_tracker_run_get(t, cand, &run)) {
		fail_row(t, row, "run", NULL);
		goto done;
	}
	int64_t base_run = is_base ? 0 : find_baseline(t, o, &run);
	if (!is_base && !base_run) {
		ev_log_warn("watch: %s: baseline %s has no finished run on these suites yet: not compared", row->name,
		            o->baseline);
	} else if (base_run) {
		ev_log_info("watch: %s: comparing run %lld with baseline run %lld", row->name, (long long)cand,
		            (long long)base_run);
		if (ev_watch_compare_and_file(t, row->name, base_run, cand, &compare_json, &cmp) ||
		    ev_watch_set_compare(t, row->path, compare_json)) {
			fail_row(t, row, "compare", NULL);
			goto done;
		}
	}
	if (g_stop) {
		stopped = 1;
		goto done;
	}
	if (ev_watch_report_write(t, o->reports, base, is_base ? o->baseline : NULL, cand, cmp, compare_json, &report)) {
		fail_row(t, row, "report", NULL);
		goto done;
	}
	ev_log_info("watch: %s: report written to %s", row->name, report);
	if (ev_watch_set(t, row->path, "evaluated", 0,
	                 !is_base && !base_run ? "not compared: the baseline had no finished run" : NULL)) {
		ev_log_error("watch: %s: %s", row->name, ev_error_msg());
		goto done;
	}
	ev_log_info("watch: %s: evaluated (run %lld)", row->name, (long long)cand);
done:
	ev_compare_free(cmp);
	ev_run_row_clear(&run);
	free(compare_json);
	free(report);
	free(folder);
	return stopped;
}

/* ---- scanning ----------------------------------------------------------------------- */

static const char *fp_get(const fp_set *s, const char *path)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].path, path))
			return s->v[i].fp;
	return NULL;
}

static void fp_free(fp_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].path);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* One look at DIR: notes new folders ("seen"), and marks "complete" those
 * that are ready and unchanged since the previous scan (`prev`). */
static int scan(ev_tracker *t, const watch_opts *o, fp_set *prev)
{
	char *names[EV_WATCH_MAX_FOLDERS];
	size_t n = 0;
	fp_set next = {0};
	int rc = 0;
	DIR *d = opendir(o->dir);
	if (!d)
		return ev_error_set(EV_E_IO, "%s: %s", o->dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == EV_WATCH_MAX_FOLDERS) {
			ev_log_warn("watch: %s: more than %d entries; the rest wait for a later scan", o->dir,
			            EV_WATCH_MAX_FOLDERS);
			break;
		}
		if (!(names[n] = ev_strdup(e->d_name))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_name);
	if (!rc && !(next.v = calloc(n ? n : 1, sizeof *next.v)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n && !rc && !g_stop; i++) {
		char *path = ev_asprintf("%s/%s", o->dir, names[i]);
		struct stat st;
		ev_watch_folder wf = {0};
		ev_watch_row row = {0};
		bool fresh = false;
		if (!path) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		/* checkpoint folders, and GGUF files on their own */
		if (stat(path, &st) != 0 || !(S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && ev_str_ends(names[i], ".gguf")))) {
			free(path);
			continue;
		}
		if ((rc = ev_watch_note(t, path, names[i], &fresh)) || (rc = ev_watch_get(t, path, &row))) {
			free(path);
			break;
		}
		/* An evaluated checkpoint is done with: no need to walk it again. */
		if (!strcmp(row.state, "evaluated") || (rc = ev_watch_folder_check(&wf, path))) {
			free(path);
			ev_watch_row_clear(&row);
			continue;
		}
		if (fresh)
			ev_log_info("watch: %s: new checkpoint %s", names[i], S_ISDIR(st.st_mode) ? "folder" : "file");
		const char *was = fp_get(prev, path);
		bool stable = was && !strcmp(was, wf.fingerprint);
		if (!strcmp(row.state, "failed") && was && !stable) {
			/* Rewritten since it failed (a fixed copy, say): start over with it. */
			ev_log_info("watch: %s: changed since it failed; looking at it again", names[i]);
			rc = ev_watch_set(t, path, "seen", -1, "changed since it failed");
		} else if (!strcmp(row.state, "seen")) {
			const char *why = !wf.ready ? wf.why : !was ? "waiting for a second look" : !stable ? "files still changing"
			                                                                                   : NULL;
			if (!why) {
				ev_log_info("watch: %s: complete", names[i]);
				rc = ev_watch_set(t, path, "complete", 0, NULL);
			} else if (!was && wf.ready) {
				/* Ready at first sight: the next scan decides; nothing to say yet. */
			} else if (!row.detail || strcmp(row.detail, why)) {
				ev_log_info("watch: %s: not complete yet: %s", names[i], why);
				rc = ev_watch_set(t, path, "seen", 0, why);
			}
		}
		next.v[next.n].path = path;
		memcpy(next.v[next.n].fp, wf.fingerprint, EV_SHA256_HEX);
		next.n++;
		ev_watch_folder_clear(&wf);
		ev_watch_row_clear(&row);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	fp_free(prev);
	*prev = next;
	return rc;
}

/* Rows to process, baseline first, then in the folders' name order. */
static int cmp_rows(const void *a, const void *b, void *ctx)
{
	const watch_opts *o = ctx;
	const ev_watch_row *x = a, *y = b;
	bool bx = is_baseline_row(o, x), by = is_baseline_row(o, y);
	if (bx != by)
		return bx ? -1 : 1;
	return strverscmp(x->path, y->path);
}

/* Processes every row left complete or running. Returns 1 when stopped. */
static int process_all(ev_tracker *t, const watch_opts *o)
{
	ev_watch_row *rows = NULL;
	size_t n = 0;
	if (ev_watch_list(t, &rows, &n)) {
		ev_log_error("watch: %s", ev_error_msg());
		return 0;
	}
	/* Only rows of this DIR: one tracker may serve several watchers. */
	size_t k = 0;
	size_t dl = strlen(o->dir);
	bool base_waiting = false;
	for (size_t i = 0; i < n; i++) {
		bool mine = !strncmp(rows[i].path, o->dir, dl) && rows[i].path[dl] == '/' &&
		            !strchr(rows[i].path + dl + 1, '/');
		if (mine && !strcmp(rows[i].state, "seen") && is_baseline_row(o, &rows[i]))
			base_waiting = true;
		bool todo = !strcmp(rows[i].state, "complete") || !strcmp(rows[i].state, "running");
		if (mine && todo) {
			if (k != i) {
				rows[k] = rows[i];
				memset(&rows[i], 0, sizeof rows[i]);
			}
			k++;
		} else {
			ev_watch_row_clear(&rows[i]);
		}
	}
	if (k)
		qsort_r(rows, k, sizeof *rows, cmp_rows, (void *)o);
	/* The baseline's folder, when it is here but not complete yet, goes
	 * first: candidates wait for it rather than go uncompared. */
	int stopped = 0;
	for (size_t i = 0; i < k && !stopped && !g_stop; i++) {
		if (base_waiting && !is_baseline_row(o, &rows[i])) {
			ev_log_info("watch: %s: waiting for the baseline %s to be complete", rows[i].name, o->baseline);
			continue;
		}
		stopped = process(t, o, &rows[i]);
	}
	ev_watch_rows_free(rows, n);
	return stopped || g_stop;
}

static int print_status(const ev_cli *cli, bool json)
{
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_watch_list_json(t, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("watch");
	if (json) {
		printf("%s\n", out);
	} else {
		cJSON *j = ev_cli_text_json(out);
		const cJSON *r;
		printf("%-10s %6s  %-20s %s\n", "state", "run", "updated", "checkpoint");
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "checkpoints"))
		{
			const char *detail = ev_json_str(r, "detail", NULL);
			printf("%-10s %6.0f  %-20s %s%s%s\n", ev_json_str(r, "state", ""), ev_json_num(r, "run_id", 0),
			       ev_json_str(r, "updated", ""), ev_json_str(r, "path", ""), detail ? "  -- " : "",
			       detail ? detail : "");
		}
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

int ev_cmd_watch(const ev_cli *cli, int argc, char **argv)
{
	watch_opts o = {.db = cli->db_path, .interval = 30, .settle = -1, .json = cli->json};
	ev_eval_config_init(&o.eval);
	ev_tracker *t = NULL;
	fp_set prev = {0};
	int rc = parse_args(&o, argc, argv);
	if (rc) {
		rc = rc < 0 ? 0 : rc; /* -1: help was printed */
		goto done;
	}
	rc = EV_EXIT_FAIL;
	if (o.status) {
		rc = print_status(cli, o.json);
		goto done;
	}
	if (o.settle < 0)
		o.settle = o.interval < 2 ? o.interval : 2;
	if (ev_cli_open_tracker(cli, &t))
		goto done;

	struct sigaction sa = {0};
	sa.sa_handler = on_signal; /* no SA_RESTART: waits wake up to look at g_stop */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ev_log_info("watch: watching %s (suites %d, baseline %s, reports %s)%s", o.dir, o.eval.n_suites, o.baseline,
	            o.reports, o.once ? ", once" : "");
	/* A first look, so that the next one can tell which folders are still changing. */
	if (scan(t, &o, &prev)) {
		ev_cli_fail("watch");
		goto done;
	}
	sleep_unless_stopped(o.settle);
	while (!g_stop) {
		if (scan(t, &o, &prev))
			ev_log_error("watch: scan: %s", ev_error_msg());
		if (process_all(t, &o) || o.once)
			break;
		sleep_unless_stopped(o.interval);
	}
	if (g_stop)
		ev_log_info("watch: stopped");
	rc = 0;
done:
	fp_free(&prev);
	ev_tracker_close(t);
	free(o.dir);
	free(o.reports);
	free(o.suites_buf);
	ev_eval_config_clear(&o.eval);
	return rc;
}
