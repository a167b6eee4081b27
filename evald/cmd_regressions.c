/*
 * evald regressions: the regressions filed between a baseline and its
 * candidates (`evald compare --file-regressions`).
 *   list [--status S]           id, suite, models, delta, status
 *   show N                      all evidence: figures, broken samples with
 *                               fingerprints, history
 *   status N STATE [--assignee WHO]
 * --json prints the tracker's JSON (see feedback/feedback.h).
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

static void usage(void)
{
	fprintf(stderr, "usage: evald regressions [list] [--status S] [--json]\n"
	                "       evald regressions show N [--json]\n"
	                "       evald regressions status N STATE [--assignee WHO] [--json]\n"
	                "STATE: new, confirmed, investigating, fixed, invalid, wontfix, regressed\n");
}

static void print_list(const cJSON *j)
{
	printf("%5s  %-16s %-16s %-16s %8s %5s  %-13s %s\n", "id", "suite", "baseline", "candidate", "delta", "broken",
	       "status", "assignee");
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "regressions"))
	{
		const char *fixed_in = ev_json_str(r, "fixed_in", NULL);
		printf("%5.0f  %-16.16s %-16.16s %-16.16s %+8.3f %5.0f   %-13s %s%s%s\n", ev_json_num(r, "id", 0),
		       ev_json_str(r, "suite", ""), ev_json_str(r, "baseline_model", ""),
		       ev_json_str(r, "candidate_model", ""), ev_json_num(r, "delta", 0), ev_json_num(r, "n_broken", 0),
		       ev_json_str(r, "status", ""), ev_json_str(r, "assignee", "-"), fixed_in ? "  fixed in " : "",
		       fixed_in ? fixed_in : "");
	}
}

static void print_show(const cJSON *r)
{
	printf("regression %.0f: %s\n", ev_json_num(r, "id", 0), ev_json_str(r, "suite", ""));
	printf("  status      %s%s%s\n", ev_json_str(r, "status", ""),
	       ev_json_str(r, "fixed_in", NULL) ? ", fixed in " : "", ev_json_str(r, "fixed_in", ""));
	printf("  assignee    %s\n", ev_json_str(r, "assignee", "-"));
	printf("  baseline    run %.0f (%s)\n", ev_json_num(r, "baseline_run", 0), ev_json_str(r, "baseline_model", ""));
	printf("  candidate   run %.0f (%s)\n", ev_json_num(r, "candidate_run", 0), ev_json_str(r, "candidate_model", ""));
	printf("  delta       %+.4f  95%% CI [%+.4f, %+.4f]  p %.3g  MDE %.4f  n %.0f\n", ev_json_num(r, "delta", 0),
	       ev_json_num(r, "ci_low", 0), ev_json_num(r, "ci_high", 0), ev_json_num(r, "p", 1), ev_json_num(r, "mde", 0),
	       ev_json_num(r, "n", 0));
	printf("  created     %s, updated %s\n", ev_json_str(r, "created", ""), ev_json_str(r, "updated", ""));
	const cJSON *s, *samples = cJSON_GetObjectItemCaseSensitive(r, "samples");
	printf("  broken samples (%d):\n", cJSON_GetArraySize(samples));
	cJSON_ArrayForEach(s, samples)
	{
		const char *d = ev_json_str(s, "detail", NULL);
		printf("    %-24s %-22s %.100s\n", ev_json_str(s, "sample_id", ""), ev_json_str(s, "fingerprint", ""),
		       d ? d : "");
	}
	printf("  history:\n");
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(r, "events"))
	{
		const cJSON *run = cJSON_GetObjectItemCaseSensitive(s, "run");
		printf("    %s  %-13s %s", ev_json_str(s, "at", ""), ev_json_str(s, "status", ""), ev_json_str(s, "model", ""));
		if (cJSON_IsNumber(run))
			printf(" (run %.0f)", run->valuedouble);
		printf("%s%s\n", ev_json_str(s, "note", NULL) ? "  " : "", ev_json_str(s, "note", ""));
	}
}

int ev_cmd_regressions(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	const char *verb = "list", *status = NULL, *assignee = NULL, *state = NULL;
	const char *pos[3] = {NULL};
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = true;
		} else if ((!strcmp(a, "--status") || !strcmp(a, "--assignee")) && i + 1 < argc) {
			if (!strcmp(a, "--status"))
				status = argv[++i];
			else
				assignee = argv[++i];
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 0;
		} else if (a[0] != '-' && n_pos < 3) {
			pos[n_pos++] = a;
		} else {
			fprintf(stderr, "evald regressions: unexpected argument '%s'\n", a);
			usage();
			return EV_EXIT_USAGE;
		}
	}
	if (n_pos > 0)
		verb = pos[0];
	int64_t id = 0;
	if (!strcmp(verb, "list")) {
		if (n_pos > 1 || assignee) {
			usage();
			return EV_EXIT_USAGE;
		}
		if (status && !ev_regression_status_valid(status)) {
			fprintf(stderr, "evald regressions: --status: unknown status '%s'\n", status);
			usage();
			return EV_EXIT_USAGE;
		}
	} else if (!strcmp(verb, "show")) {
		if (n_pos != 2 || status || assignee) {
			usage();
			return EV_EXIT_USAGE;
		}
		if (!ev_cli_parse_id(pos[1], "regression", &id))
			return EV_EXIT_USAGE;
	} else if (!strcmp(verb, "status")) {
		if (n_pos != 3 || status) {
			usage();
			return EV_EXIT_USAGE;
		}
		if (!ev_cli_parse_id(pos[1], "regression", &id))
			return EV_EXIT_USAGE;
		state = pos[2];
		if (!ev_regression_status_valid(state)) {
			fprintf(stderr, "evald regressions: unknown status '%s'\n", state);
			usage();
			return EV_EXIT_USAGE;
		}
	} else {
		fprintf(stderr, "evald regressions: unknown action '%s'\n", verb);
		usage();
		return EV_EXIT_USAGE;
	}

	ev_tracker *t = NULL;
	char *out = NULL;
	int rc = EV_EXIT_FAIL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	if (!strcmp(verb, "list")) {
		if (ev_regressions_list_json(t, status, &out)) {
			ev_cli_fail("regressions");
			goto done;
		}
	} else {
		if (state && ev_regression_set_status(t, id, state, assignee)) {
			ev_cli_fail("regressions");
			goto done;
		}
		if (ev_regression_show_json(t, id, &out)) {
			ev_cli_fail("regressions");
			goto done;
		}
	}
	cJSON *j = NULL;
	if (json) {
		printf("%s\n", out);
	} else if (ev_json_parse(&j, out, strlen(out), "regressions") == 0) {
		if (!strcmp(verb, "list"))
			print_list(j);
		else
			print_show(j);
		cJSON_Delete(j);
	} else {
		ev_cli_fail("regressions");
		goto done;
	}
	rc = 0;
done:
	free(out);
	ev_tracker_close(t);
	return rc;
}
