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

#define STATES "new, confirmed, investigating, fixed, invalid, wontfix, regressed"

typedef struct {
	const char *status, *assignee;
	bool json;
} reg_opts;

static const ev_opt list_opts[] = {
	EV_O_STR("--status", reg_opts, status, "STATE", "only regressions in this state (" STATES ")"),
	EV_O_FLAG("--json", reg_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_opt show_opts[] = {
	EV_O_FLAG("--json", reg_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_opt status_opts[] = {
	EV_O_STR("--assignee", reg_opts, assignee, "WHO", "who looks into it"),
	EV_O_FLAG("--json", reg_opts, json, "print the regression as JSON"),
	EV_O_END,
};

static const ev_cmd_spec list_spec = {
	.name = "regressions list",
	.synopsis = "[--status STATE] [--json]",
	.about = "Lists regressions: id, suite, models, delta, broken samples, status.",
	.opts = list_opts,
};

static const ev_cmd_spec show_spec = {
	.name = "regressions show",
	.synopsis = "N [--json]",
	.about = "One regression with all its evidence: figures, broken samples with fingerprints, history.",
	.opts = show_opts,
	.positional = "N",
	.min_pos = 1,
	.max_pos = 1,
};

static const ev_cmd_spec status_spec = {
	.name = "regressions status",
	.synopsis = "N STATE [--assignee WHO] [--json]",
	.about = "Moves a regression to STATE (" STATES ").",
	.opts = status_opts,
	.positional = "N STATE",
	.min_pos = 2,
	.max_pos = 2,
};

static int print_out(const char *out, bool json, bool list)
{
	cJSON *j = NULL;
	if (json) {
		printf("%s\n", out);
		return 0;
	}
	if (ev_json_parse(&j, out, strlen(out), "regressions"))
		return ev_cli_fail("regressions");
	ev_json_term_clean(j);
	if (list)
		print_list(j);
	else
		print_show(j);
	cJSON_Delete(j);
	return 0;
}

static int cmd_list(const ev_cli *cli, int argc, char **argv)
{
	reg_opts ro = {.json = cli->json};
	int prc = ev_opt_parse(&list_spec, &ro, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (ro.status && !ev_regression_status_valid(ro.status)) {
		fprintf(stderr, "evald regressions list: --status: unknown status '%s' (" STATES ")\n", ro.status);
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_regressions_list_json(t, ro.status, &out) ? ev_cli_fail("regressions") : print_out(out, ro.json, true);
	free(out);
	ev_tracker_close(t);
	return rc;
}

/* show N, and status N STATE (which shows the regression after the change). */
static int show_or_set(const ev_cli *cli, int argc, char **argv, const ev_cmd_spec *spec)
{
	reg_opts ro = {.json = cli->json};
	const char *pos[2] = {NULL, NULL};
	int64_t id;
	int prc = ev_opt_parse(spec, &ro, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!ev_cli_parse_id(pos[0], "regression", &id))
		return EV_EXIT_USAGE;
	const char *state = pos[1];
	if (state && !ev_regression_status_valid(state)) {
		fprintf(stderr, "evald regressions status: unknown status '%s' (" STATES ")\n", state);
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = (state && ev_regression_set_status(t, id, state, ro.assignee)) || ev_regression_show_json(t, id, &out)
	                 ? ev_cli_fail("regressions")
	                 : print_out(out, ro.json, false);
	free(out);
	ev_tracker_close(t);
	return rc;
}

static int cmd_show(const ev_cli *cli, int argc, char **argv) { return show_or_set(cli, argc, argv, &show_spec); }
static int cmd_status(const ev_cli *cli, int argc, char **argv) { return show_or_set(cli, argc, argv, &status_spec); }

int ev_cmd_regressions(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"list", cmd_list, "list regressions"},
		{"show", cmd_show, "one regression with its evidence"},
		{"status", cmd_status, "move a regression to a new state (confirmed, fixed, ...)"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {
		"regressions", "The regressions filed between a baseline and its candidates (compare --file-regressions).",
		subs, "list"};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
