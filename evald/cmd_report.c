/* evald report RUN --format md|json [-o FILE]: a run's report. */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"
#include "reports/reports.h"

int ev_cmd_report(const ev_cli *cli, int argc, char **argv)
{
	ev_report_options opt = EV_REPORT_OPTIONS_INIT;
	const char *out_path = NULL, *run = NULL;
	if (cli->json)
		opt.format = EV_REPORT_JSON;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			const char *f = argv[++i];
			if (!strcmp(f, "md") || !strcmp(f, "markdown"))
				opt.format = EV_REPORT_MD;
			else if (!strcmp(f, "json"))
				opt.format = EV_REPORT_JSON;
			else {
				fprintf(stderr, "evald report: --format takes md or json\n");
				return EV_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--json")) {
			opt.format = EV_REPORT_JSON;
		} else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
			out_path = argv[++i];
		} else if (argv[i][0] != '-' && !run) {
			run = argv[i];
		} else {
			fprintf(stderr, "usage: evald report RUN [--format md|json] [-o FILE]\n");
			return EV_EXIT_USAGE;
		}
	}
	int64_t run_id;
	if (!ev_cli_parse_run_id(run, &run_id))
		return EV_EXIT_USAGE;
	ev_tracker *t;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = 0;
	if (out_path) {
		/* Written beside the target, then renamed, so a failure leaves no half report. */
		char *tmp = ev_asprintf("%s.tmp", out_path);
		FILE *f = tmp ? fopen(tmp, "w") : NULL;
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
