/*
 * evald run: evaluate a model on one or more suites (evald/eval.c does the
 * work), storing every scored result in the tracker as it arrives, then
 * print the run's summary.
 *
 * Every setting of a run is stored with it, so that `evald run --resume
 * RUN` rebuilds the same plan and runs only what is missing (results with
 * a backend error are tried again). --status-fd N writes the run's id and
 * its end as JSON lines to descriptor N, for a parent that started it
 * (evald watch).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evald/eval.h"
#include "evald/remote.h"

int ev_cmd_run(const ev_cli *cli, int argc, char **argv);

typedef struct {
	ev_eval_config eval;
	int64_t resume;
	bool json;
	int status_fd;
	double fail_under;     /* < 0: not given */
	double max_error_rate; /* the share of error results tolerated (0) */
	const char *junit;
} run_opts;

static const ev_opt run_own_opts[] = {
	EV_O_ID("--resume", run_opts, resume, "RUN", "finish an interrupted run with its stored settings"),
	EV_O_FLAG("--json", run_opts, json, "print the summary as JSON"),
	EV_O_NUM("--fail-under", run_opts, fail_under, 0, 1, "SCORE", "exit 1 when a suite scores below SCORE (for CI)"),
	EV_O_NUM("--max-error-rate", run_opts, max_error_rate, 0, 1, "R",
	         "exit 1 only when more than this share of results are errors (default 0)"),
	EV_O_STR("--junit", run_opts, junit, "FILE", "write the samples as JUnit XML (a suite a testsuite, a sample a testcase)"),
	{.name = "--status-fd", .kind = EV_OPT_INT, .off = offsetof(run_opts, status_fd), .size = sizeof(int), .lo = 3,
	 .hi = 1023, .meta = "FD",
	 .help = "write {\"run_id\"} when the run exists and {\"run_id\",\"status\"} at its end to FD"},
	EV_O_END,
};

/* ev_eval_opts write into the embedded ev_eval_config, which is the first
 * member: its offsets are those of run_opts too. */
static const ev_opt *const run_groups[] = {ev_eval_opts, NULL};

static const ev_cmd_spec run_spec = {
	.name = "run",
	.synopsis = "--model URL|PATH [--suite PATH]... [OPTIONS]   |   evald run --resume RUN",
	.about = "Evaluates a model on suites and stores every scored answer in the tracker as it arrives;\n"
	         "prints the summary (per suite: n, score, 95% CI, errors, failure reasons, pass@k).",
	.opts = run_own_opts,
	.groups = run_groups,
	.more = "Without --suite the embedded default suite is run. The engine options apply to a checkpoint\n"
	        "(a folder or a GGUF file). Examples:\n"
	        "  evald run --model http://127.0.0.1:8000/v1 --model-name ckpt-a --suite evals.jsonl\n"
	        "  evald run --model ./checkpoint --suite longctx/ --attention msa --msa-top-k 16\n"
	        "  evald run --resume 12",
};

static volatile sig_atomic_t g_stop;

/* ---- CI outputs --------------------------------------------------------------------- */

static void xml_text(ev_buf *b, const char *s)
{
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '&')
			ev_buf_puts(b, "&amp;");
		else if (c == '<')
			ev_buf_puts(b, "&lt;");
		else if (c == '>')
			ev_buf_puts(b, "&gt;");
		else if (c == '"')
			ev_buf_puts(b, "&quot;");
		else if (c < 0x20 && c != '\n' && c != '\t')
			ev_buf_putc(b, '?'); /* not allowed in XML 1.0 */
		else
			ev_buf_putc(b, (char)c);
	}
}

typedef struct {
	ev_buf cases;
	char suite[256];
	long n, failures, errors;
	ev_buf out;
} junit_ctx;

static void junit_flush(junit_ctx *j)
{
	if (!j->suite[0])
		return;
	ev_buf_puts(&j->out, "  <testsuite name=\"");
	xml_text(&j->out, j->suite);
	ev_buf_printf(&j->out, "\" tests=\"%ld\" failures=\"%ld\" errors=\"%ld\">\n", j->n, j->failures, j->errors);
	ev_buf_append(&j->out, j->cases.data ? j->cases.data : "", j->cases.len);
	ev_buf_puts(&j->out, "  </testsuite>\n");
	ev_buf_reset(&j->cases);
	j->n = j->failures = j->errors = 0;
}

static int junit_case(void *ctx, const ev_result *r)
{
	junit_ctx *j = ctx;
	if (strcmp(j->suite, r->suite ? r->suite : "")) {
		junit_flush(j);
		snprintf(j->suite, sizeof j->suite, "%s", r->suite ? r->suite : "");
	}
	j->n++;
	ev_buf_puts(&j->cases, "    <testcase classname=\"");
	xml_text(&j->cases, r->suite);
	ev_buf_puts(&j->cases, "\" name=\"");
	xml_text(&j->cases, r->sample_id);
	if (r->epoch)
		ev_buf_printf(&j->cases, "#%d", r->epoch);
	ev_buf_printf(&j->cases, "\" time=\"%.3f\"", r->latency_s);
	bool error = ev_result_is_error(r), failed = !error && r->score < 1.0;
	if (!error && !failed) {
		ev_buf_puts(&j->cases, "/>\n");
		return 0;
	}
	j->errors += error;
	j->failures += failed;
	ev_buf_printf(&j->cases, ">\n      <%s type=\"", error ? "error" : "failure");
	xml_text(&j->cases, r->reason);
	ev_buf_printf(&j->cases, "\" message=\"score %.4g: ", r->score);
	xml_text(&j->cases, r->reason);
	ev_buf_puts(&j->cases, "\">");
	xml_text(&j->cases, r->detail);
	ev_buf_printf(&j->cases, "</%s>\n    </testcase>\n", error ? "error" : "failure");
	return 0;
}

static int write_junit(ev_tracker *t, int64_t run_id, const char *path)
{
	junit_ctx j = {EV_BUF_INIT((size_t)1 << 30), "", 0, 0, 0, EV_BUF_INIT((size_t)1 << 30)};
	ev_buf_printf(&j.out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"evald run %lld\">\n",
	              (long long)run_id);
	int rc = ev_tracker_results_each(t, run_id, junit_case, &j);
	if (!rc) {
		junit_flush(&j);
		ev_buf_puts(&j.out, "</testsuites>\n");
		rc = ev_file_write(path, j.out.data, j.out.len);
	}
	ev_buf_free(&j.cases);
	ev_buf_free(&j.out);
	return rc;
}

/* The lowest suite score of a summary (2 when it has none). */
static double lowest_score(const char *summary_json)
{
	ev_summary sum = {0};
	double low = 2;
	if (summary_json && !ev_summary_parse(&sum, summary_json, "summary"))
		for (size_t i = 0; i < sum.suites.n; i++)
			if (sum.suites.v[i].n > 0 && sum.suites.v[i].has_score && sum.suites.v[i].score < low)
				low = sum.suites.v[i].score;
	ev_summary_clear(&sum);
	ev_error_clear();
	return low;
}

/* The first Ctrl-C (or SIGTERM) stops the run: no new request, what
 * finished is committed, the resume command is printed. A second one
 * quits at once (what was committed stays; resume redoes the rest). */
static void on_signal(int sig)
{
	(void)sig;
	if (g_stop)
		_exit(130);
	g_stop = 1;
	static const char msg[] = "\nevald: stopping: committing what finished (again to quit at once)\n";
	(void)!write(2, msg, sizeof msg - 1);
}

static void status_line(int fd, const char *json)
{
	if (fd <= 0)
		return;
	size_t n = strlen(json);
	while (n) {
		ssize_t w = write(fd, json, n);
		if (w <= 0)
			return;
		json += w, n -= (size_t)w;
	}
}

static void on_started(void *ctx, int64_t run_id)
{
	char line[64];
	snprintf(line, sizeof line, "{\"run_id\":%lld}\n", (long long)run_id);
	status_line(*(int *)ctx, line);
}

int ev_cmd_run(const ev_cli *cli, int argc, char **argv)
{
	run_opts ro = {.json = cli->json, .fail_under = -1};
	ev_eval_config_init(&ro.eval);
	int prc = ev_opt_parse(&run_spec, &ro, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!ro.resume && !ro.eval.n_models) {
		fprintf(stderr, "evald run: --model is required\n");
		ev_opt_usage(&run_spec, stderr);
		return EV_EXIT_USAGE;
	}
	/* A team tracker: the run goes there, through a local mirror file. */
	ev_remote *remote = NULL;
	char mirror[4096] = "";
	ev_cli local = *cli;
	if (cli->tracker_url) {
		if (ev_remote_mirror_path(mirror, sizeof mirror, "run") ||
		    ev_remote_open(&remote, cli->tracker_url, cli->tracker_token_env)) {
			mirror[0] = 0;
			return ev_cli_fail("run --tracker");
		}
		local.db_path = mirror;
	}
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(&local, &t)) {
		ev_remote_free(remote);
		ev_remote_mirror_remove(mirror);
		return EV_EXIT_FAIL;
	}
	if (remote && ro.resume && ev_remote_mirror(remote, t, &ro.resume, 1)) { /* its results so far */
		ev_remote_free(remote);
		ev_tracker_close(t);
		ev_remote_mirror_remove(mirror);
		return ev_cli_fail("run --resume --tracker");
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ev_eval_options eo = {.resume = ro.resume, .quiet = cli->quiet || ro.json, .stop = &g_stop,
	                      .on_started = on_started, .ctx = &ro.status_fd, .remote = remote};
	ev_eval_outcome out;
	int rc = ev_eval_run(t, &ro.eval, &eo, &out);
	char line[96];
	snprintf(line, sizeof line, "{\"run_id\":%lld,\"status\":\"%s\"}\n", (long long)out.run_id, out.status);
	status_line(ro.status_fd, line);
	if (rc) {
		if (!g_stop)
			ev_cli_fail("run");
		if (out.run_id)
			fprintf(stderr, "evald: run %lld %s; finish it with: evald run --resume %lld\n",
			        (long long)out.run_id, out.status, (long long)out.run_id);
	} else if (ro.json) {
		printf("%s\n", out.summary_json);
	} else {
		ev_summary_print(stdout, out.summary_json);
	}
	/* Some requests failed: the score leaves them out, and the exit status
	 * says so (resume retries them). */
	if (!rc && out.cached && !cli->quiet)
		fprintf(stderr, "evald: %ld of %ld answers came from the cache (the same request to the same model and "
		                "server); --no-cache asks again\n",
		        out.cached, out.answered);
	long results = out.scored + out.errors;
	bool partial = !rc && out.errors > 0 &&
	               (double)out.errors > ro.max_error_rate * (double)(results > 0 ? results : 1);
	if (!rc && out.errors > 0 && !partial)
		fprintf(stderr, "evald: run %lld: %ld error results, within --max-error-rate %g\n", (long long)out.run_id,
		        out.errors, ro.max_error_rate);
	if (partial)
		fprintf(stderr, "evald: run %lld finished with errors: %ld results could not be had (left out of the "
		                "score; see evald report %lld); retry them with: evald run --resume %lld\n",
		        (long long)out.run_id, out.errors, (long long)out.run_id, (long long)out.run_id);
	bool under = false;
	if (!rc && ro.fail_under >= 0) {
		double low = lowest_score(out.summary_json);
		under = low < ro.fail_under;
		if (under)
			fprintf(stderr, "evald: run %lld: a suite scored %.4f, under --fail-under %.4f\n", (long long)out.run_id,
			        low, ro.fail_under);
	}
	bool junit_failed = false;
	if (ro.junit && out.run_id && write_junit(t, out.run_id, ro.junit)) {
		ev_cli_fail("run --junit");
		junit_failed = true;
	}
	ev_eval_outcome_clear(&out);
	ev_eval_config_clear(&ro.eval);
	ev_tracker_close(t);
	ev_remote_free(remote);
	ev_remote_mirror_remove(mirror); /* the server has what the mirror has (or resume will send it) */
	return rc || partial || under || junit_failed ? EV_EXIT_FAIL : 0;
}
