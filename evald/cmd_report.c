/* evald report RUN --format md|json|html [-o FILE]: a run's report. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "evald/cli.h"
#include "reports/reports.h"

typedef struct {
	const char *format, *out, *series;
	bool json;
} report_opts;

static const ev_opt report_opts_table[] = {
	EV_O_CHOICE("--format", report_opts, format, "md|markdown|json|html",
	            "the report's format (default md; html: one self-contained page with charts)"),
	EV_O_FLAG("--json", report_opts, json, "the same as --format json"),
	EV_O_STR("--series", report_opts, series, "M1,M2,...",
	         "a checkpoint series instead of one run: each model's latest finished run, trends, change points, "
	         "regressions"),
	{.name = "--output", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(report_opts, out), .meta = "FILE",
	 .help = "write to FILE (atomically) instead of stdout"},
	EV_O_END,
};

static const ev_cmd_spec report_spec = {
	.name = "report",
	.synopsis = "RUN [--format md|json|html] [-o FILE]  |  --series M1,M2,... [--format md|json|html] [-o FILE]",
	.about = "A run's report: per suite the score with its 95% CI, n, errors, failure reasons, the most\n"
	         "failed samples, and for long-context suites the length x depth grid.",
	.opts = report_opts_table,
	.positional = "RUN",
	.min_pos = 0,
	.max_pos = 1,
};

/* --series M1,M2,...: the checkpoint series report */
static int report_series(const ev_cli *cli, const char *list, ev_report_format fmt, const char *out_path)
{
	char *copy = ev_strdup(list);
	const char *models[256];
	size_t n = 0;
	for (char *save = NULL, *m = copy ? strtok_r(copy, ",", &save) : NULL; m; m = strtok_r(NULL, ",", &save)) {
		if (n == 256) {
			fprintf(stderr, "evald report: at most 256 models in a series\n");
			free(copy);
			return EV_EXIT_USAGE;
		}
		models[n++] = m;
	}
	if (!n) {
		free(copy);
		fprintf(stderr, "evald report: --series needs model names, comma-separated\n");
		return EV_EXIT_USAGE;
	}
	ev_tracker *t;
	if (ev_cli_open_tracker(cli, &t)) {
		free(copy);
		return EV_EXIT_FAIL;
	}
	ev_buf b = EV_BUF_INIT((size_t)256 << 20);
	int rc = ev_report_series(t, models, n, fmt, &b);
	if (!rc)
		rc = out_path ? ev_file_write(out_path, b.data, b.len) : (fwrite(b.data, 1, b.len, stdout) == b.len ? 0 : EV_E_IO);
	ev_buf_free(&b);
	ev_tracker_close(t);
	free(copy);
	return rc ? ev_cli_fail("report") : 0;
}

int ev_cmd_report(const ev_cli *cli, int argc, char **argv)
{
	ev_report_options opt = EV_REPORT_OPTIONS_INIT;
	report_opts ro = {.json = cli->json};
	const char *pos[1] = {NULL};
	int prc = ev_opt_parse(&report_spec, &ro, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (ro.json || (ro.format && !strcmp(ro.format, "json")))
		opt.format = EV_REPORT_JSON;
	else if (ro.format && !strcmp(ro.format, "html"))
		opt.format = EV_REPORT_HTML;
	const char *out_path = ro.out;
	if (ro.series) {
		if (pos[0]) {
			fprintf(stderr, "evald report: give a RUN or --series, not both\n");
			return EV_EXIT_USAGE;
		}
		return report_series(cli, ro.series, opt.format, out_path);
	}
	int64_t run_id;
	if (!pos[0]) {
		fprintf(stderr, "evald report: which run? (evald runs lists them)\n");
		return EV_EXIT_USAGE;
	}
	if (!ev_cli_parse_run_id(pos[0], &run_id))
		return EV_EXIT_USAGE;
	ev_tracker *t;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = 0;
	if (out_path) {
		/* Written beside the target under a name of its own (O_EXCL through
		 * mkstemp), then renamed: a failure leaves no half report, and a link
		 * planted at a guessable name is never followed. */
		char *tmp = ev_asprintf("%s.XXXXXX", out_path);
		int fd = tmp ? mkstemp(tmp) : -1;
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (fd >= 0 && !f)
			close(fd);
		if (!f) {
			ev_error_set(EV_E_IO, "cannot write %s", out_path);
			rc = ev_cli_fail("report");
		} else {
			int r = ev_report_write(t, run_id, &opt, f);
			if (fclose(f) != 0 && !r)
				r = ev_error_set(EV_E_IO, "cannot write %s", out_path);
			if (r || rename(tmp, out_path) != 0) {
				remove(tmp);
				rc = ev_cli_fail("report");
			}
		}
		free(tmp);
	} else if (ev_report_write(t, run_id, &opt, stdout)) {
		rc = ev_cli_fail("report");
	}
	ev_tracker_close(t);
	return rc;
}
