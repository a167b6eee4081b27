/*
 * evald watch DIR: the checkpoint watcher. It notices each new checkpoint
 * folder in DIR once the folder is complete (watch_scan.c), evaluates it on
 * the chosen suites by running this program (`evald run`) as a child,
 * compares the run with the baseline's, files regressions, and writes the
 * Markdown report. Its state lives in the tracker (watch_checkpoints,
 * feedback/watch.c), so a watcher that is killed or restarted picks up where
 * it stopped: a checkpoint left `running` with a run id is finished with
 * `evald run --resume`, one without is started again.
 *
 * The run is a child process (not a call) so that a crash in a backend takes
 * the run with it and not the daemon, and so that SIGTERM can stop the run
 * cleanly; the child dies with the watcher (PR_SET_PDEATHSIG), which leaves
 * its run resumable instead of orphaned and racing the next watcher.
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

#define MAX_SUITES 64
#define MAX_PASS 96

typedef struct {
	const char *db;
	char *dir;         /* the watched folder, absolute (owned) */
	char *reports;     /* the reports folder (owned) */
	const char *baseline;
	const char *suites[MAX_SUITES];
	int n_suites;
	char *suites_buf;  /* --suites copy that suites[] point into (owned) */
	const char *pass[MAX_PASS]; /* flags handed to `evald run` */
	int n_pass;
	const char *concurrency; /* also handed to `run --resume` */
	double interval, settle;
	bool once;
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

static void usage(void)
{
	fprintf(stderr,
	        "usage: evald watch DIR --suites S1,S2 --baseline NAME [--interval SECONDS] [--settle SECONDS]\n"
	        "                   [--once] [--reports DIR] [run flags: --concurrency N --limit N --epochs K\n"
	        "                   --timeout S --retries N --max-tokens N --temperature T --top-p P --seed S\n"
	        "                   --header 'K: V' --api-key-env VAR --no-cache, checker flags]\n"
	        "       evald watch --status [--json]\n"
	        "Each complete checkpoint folder in DIR (config.json and its weights, or an endpoint.json\n"
	        "{\"url\",\"model\"}; unchanged over two scans --settle seconds apart) is evaluated once,\n"
	        "compared with the baseline NAME's latest finished run on the same suites (regressions\n"
	        "filed), and reported to --reports DIR/<folder>.md (default: reports/ beside the tracker).\n"
	        "--once scans, processes everything complete and exits; SIGTERM/SIGINT stop between steps.\n");
}

/* ---- arguments ------------------------------------------------------------------ */

static bool parse_seconds(const char *flag, const char *v, double lo, double *out)
{
	if (!v || !ev_parse_f64(v, out) || *out < lo || *out > 86400) {
		fprintf(stderr, "evald watch: %s: '%s' is not a number of seconds in [%g, 86400]\n", flag, v ? v : "", lo);
		return false;
	}
	return true;
}

static int split_suites(watch_opts *o, const char *v)
{
	free(o->suites_buf);
	o->suites_buf = ev_strdup(v);
	o->n_suites = 0;
	if (!o->suites_buf)
		return -1;
	for (char *save = NULL, *s = strtok_r(o->suites_buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
		if (o->n_suites == MAX_SUITES) {
			fprintf(stderr, "evald watch: --suites: at most %d suites\n", MAX_SUITES);
			return -1;
		}
		o->suites[o->n_suites++] = s;
	}
	if (!o->n_suites) {
		fprintf(stderr, "evald watch: --suites: no suite named\n");
		return -1;
	}
	return 0;
}

static int add_pass(watch_opts *o, char **argv, int from, int to)
{
	for (int k = from; k <= to; k++) {
		if (o->n_pass == MAX_PASS) {
			fprintf(stderr, "evald watch: too many run flags\n");
			return -1;
		}
		o->pass[o->n_pass++] = argv[k];
	}
	return 0;
}

static int parse_args(watch_opts *o, bool *status, bool *json, int argc, char **argv)
{
	static const char *const run_value_flags[] = {"--concurrency", "--limit",       "--epochs", "--timeout",
	                                              "--retries",     "--max-tokens",  "--temperature",
	                                              "--top-p",       "--seed",        "--header", "--api-key-env",
	                                              NULL};
	const char *dir = NULL, *reports = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		ev_checker_flags cf = EV_CHECKER_FLAGS_INIT;
		int from = i;
		int r = ev_checker_flags_parse(&cf, argc, argv, &i);
		if (r < 0)
			return -1;
		if (r > 0) {
			if (add_pass(o, argv, from, i))
				return -1;
			continue;
		}
		bool run_flag = false;
		for (int k = 0; run_value_flags[k]; k++)
			if (!strcmp(a, run_value_flags[k]))
				run_flag = true;
		if (run_flag) {
			if (!v) {
				fprintf(stderr, "evald watch: %s needs a value\n", a);
				return -1;
			}
			if (!strcmp(a, "--concurrency"))
				o->concurrency = v;
			if (add_pass(o, argv, i, i + 1))
				return -1;
			i++;
		} else if (!strcmp(a, "--no-cache")) {
			if (add_pass(o, argv, i, i))
				return -1;
		} else if (!strcmp(a, "--suites") || !strcmp(a, "--suite")) {
			if (!v || split_suites(o, v))
				return -1;
			i++;
		} else if (!strcmp(a, "--baseline")) {
			if (!v || !*v || strlen(v) > 256) {
				fprintf(stderr, "evald watch: --baseline takes a checkpoint or model name\n");
				return -1;
			}
			o->baseline = v;
			i++;
		} else if (!strcmp(a, "--interval")) {
			if (!parse_seconds(a, v, 0.05, &o->interval))
				return -1;
			i++;
		} else if (!strcmp(a, "--settle")) {
			if (!parse_seconds(a, v, 0, &o->settle))
				return -1;
			i++;
		} else if (!strcmp(a, "--reports")) {
			if (!v)
				return -1;
			reports = v;
			i++;
		} else if (!strcmp(a, "--once")) {
			o->once = true;
		} else if (!strcmp(a, "--status")) {
			*status = true;
		} else if (!strcmp(a, "--json")) {
			*json = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		} else if (a[0] != '-' && !dir) {
			dir = a;
		} else {
			fprintf(stderr, "evald watch: unexpected argument '%s'\n", a);
			return -1;
		}
	}
	if (*status)
		return 0;
	if (!dir || !o->n_suites || !o->baseline) {
		fprintf(stderr, "evald watch: DIR, --suites and --baseline are required\n");
		return -1;
	}
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(dir, real) || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "evald watch: %s: not a folder\n", dir);
		return -1;
	}
	o->dir = ev_strdup(real);
	if (reports) {
		o->reports = ev_strdup(reports);
	} else {
		char *db = ev_strdup(o->db);
		o->reports = db ? ev_asprintf("%s/reports", dirname(db)) : NULL;
		free(db);
	}
	return o->dir && o->reports ? 0 : -1;
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
	int64_t run_id;   /* from the child's first line */
	char last[512];   /* the child's last stderr line, for the failure detail */
} child_ctx;

static void child_line(void *ctx, const char *line)
{
	child_ctx *c = ctx;
	if (ev_log_get_level() >= EV_LOG_INFO)
		fprintf(stderr, "  [%s] %s\n", c->name, line);
	snprintf(c->last, sizeof c->last, "%s", line);
	int64_t id = c->run_id ? 0 : ev_watch_run_id_of_line(line);
	if (id) {
		/* Stored now, not at the end: a crash from here on resumes this run. */
		c->run_id = id;
		if (ev_watch_set(c->t, c->path, "running", id, NULL))
			ev_log_warn("watch: %s: cannot store run %lld: %s", c->name, (long long)id, ev_error_msg());
		else
			ev_log_info("watch: %s: run %lld started", c->name, (long long)id);
	}
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
			    !ev_tracker_run_get(t, rows[i].run_id, &r) && !strcmp(r.status, "finished"))
				id = rows[i].run_id;
			ev_run_row_clear(&r);
		}
	}
	ev_watch_rows_free(rows, n);
	if (!id) {
		/* By model name: the folder's run is stored under its served name. */
		if (ev_watch_baseline_run(t, o->baseline, names, nn, &id))
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

/* Takes one checkpoint (state complete or running) through to evaluated.
 * Returns 1 when stopped by a signal (the row stays resumable). */
static int process(ev_tracker *t, const watch_opts *o, const ev_watch_row *row)
{
	char *folder = ev_strdup(row->path), *report = NULL, *compare_json = NULL;
	const char *base = folder ? basename(folder) : row->name;
	ev_watch_folder wf = {0};
	ev_run_row run = {0};
	ev_compare *cmp = NULL;
	child_ctx cc = {t, row->path, row->name, row->run_id, ""};
	int stopped = 0;
	char idbuf[24];

	if (!folder) {
		fail_row(t, row, "memory", "out of memory");
		return 0;
	}
	bool finished = row->run_id && !ev_tracker_run_get(t, row->run_id, &run) && !strcmp(run.status, "finished");
	ev_run_row_clear(&run);
	if (!finished) {
		const char *argv[24 + 2 * MAX_SUITES + MAX_PASS];
		int n = 0;
		argv[n++] = "evald";
		argv[n++] = "--db";
		argv[n++] = o->db;
		argv[n++] = "run";
		if (row->run_id) {
			snprintf(idbuf, sizeof idbuf, "%lld", (long long)row->run_id);
			argv[n++] = "--resume";
			argv[n++] = idbuf;
			if (o->concurrency) {
				argv[n++] = "--concurrency";
				argv[n++] = o->concurrency;
			}
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
			argv[n++] = "--model";
			argv[n++] = wf.endpoint_url ? wf.endpoint_url : row->path;
			argv[n++] = "--model-name";
			argv[n++] = wf.endpoint_model ? wf.endpoint_model : row->name;
			for (int i = 0; i < o->n_suites; i++) {
				argv[n++] = "--suite";
				argv[n++] = o->suites[i];
			}
			for (int i = 0; i < o->n_pass; i++)
				argv[n++] = o->pass[i];
			ev_log_info("watch: %s: evaluating %s on %d suite(s)", row->name,
			            wf.endpoint_url ? wf.endpoint_url : row->path, o->n_suites);
		}
		argv[n] = NULL;
		if (ev_watch_set(t, row->path, "running", 0, NULL)) {
			ev_log_error("watch: %s: %s", row->name, ev_error_msg());
			goto done;
		}
		int rc = ev_watch_child_run(argv, row->name, &g_stop, child_line, &cc);
		if (g_stop && rc != 0) {
			ev_log_info("watch: %s: stopped; run %lld resumes on the next start", row->name, (long long)cc.run_id);
			stopped = 1;
			goto done;
		}
		if (rc != 0) {
			char why[700];
			if (rc < 0)
				snprintf(why, sizeof why, "%s", ev_error_msg());
			else
				snprintf(why, sizeof why, "evald run exited with %d: %s", rc, cc.last);
			fail_row(t, row, "run", why);
			goto done;
		}
		if (!cc.run_id) {
			fail_row(t, row, "run", "evald run did not say which run it made");
			goto done;
		}
	}
	if (g_stop) {
		stopped = 1;
		goto done;
	}

	/* Compare with the baseline (not for the baseline itself). */
	int64_t cand = cc.run_id;
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
	ev_watch_folder_clear(&wf);
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
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
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
			ev_log_info("watch: %s: new checkpoint folder", names[i]);
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
		cJSON *j = cJSON_Parse(out);
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
	watch_opts o = {.db = cli->db_path, .interval = 30, .settle = -1};
	bool status = false, json = cli->json;
	ev_tracker *t = NULL;
	fp_set prev = {0};
	int rc = EV_EXIT_FAIL;

	if (parse_args(&o, &status, &json, argc, argv) != 0) {
		usage();
		rc = EV_EXIT_USAGE;
		goto done;
	}
	if (status) {
		rc = print_status(cli, json);
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

	ev_log_info("watch: watching %s (suites %d, baseline %s, reports %s)%s", o.dir, o.n_suites, o.baseline,
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
	return rc;
}
