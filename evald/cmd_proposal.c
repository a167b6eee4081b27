/*
 * evald proposal: training proposals that grow out of confirmed weaknesses.
 *   new (--from-cluster C | --from-regression R | --title T) [--body B] [--issue N]... [--json]
 *   join P --who NAME      status P STATE      show P [--json]      list [--json]
 *   export P -o data.jsonl
 * STATE: proposed, investigating, experimenting, accepted (for the training
 * run), shipped, dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

typedef struct {
	const char *title, *body;
	int64_t cluster, regression;
	const char *issues[64];
	int n_issues;
	bool json;
} new_opts;

#define T new_opts
static const ev_opt new_opts_table[] = {
	EV_O_ID("--from-cluster", T, cluster, "C", "a triage cluster: its issues become the evidence"),
	EV_O_ID("--from-regression", T, regression, "R", "a regression: its broken samples become the evidence"),
	EV_O_STR("--title", T, title, "TEXT", "the proposal's title (default: from the cluster or regression)"),
	EV_O_STR("--body", T, body, "TEXT", "what the proposal is about"),
	EV_O_STRS("--issue", T, issues, n_issues, "N", "an issue as further evidence"),
	EV_O_FLAG("--json", T, json, "print {\"id\"}"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec new_spec = {
	.name = "proposal new",
	.synopsis = "(--from-cluster C | --from-regression R | --title T) [--body B] [--issue N]... [--json]",
	.about = "Opens a training proposal from a cluster of reports, a regression, or a title.",
	.opts = new_opts_table,
};

static int cmd_new(const ev_cli *cli, int argc, char **argv)
{
	new_opts no = {.json = cli->json};
	int prc = ev_opt_parse(&new_spec, &no, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	const char *title = no.title, *body = no.body;
	int64_t cluster = no.cluster, regression = no.regression, issues[64];
	size_t n_issues = (size_t)no.n_issues;
	bool json = no.json;
	for (size_t k = 0; k < n_issues; k++)
		if (!ev_cli_parse_id(no.issues[k], "issue", &issues[k]))
			return EV_EXIT_USAGE;
	if (!title && !cluster && !regression) {
		fprintf(stderr, "evald proposal new: give --from-cluster, --from-regression or --title\n");
		ev_opt_usage(&new_spec, stderr);
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int64_t id = 0;
	int rc = ev_proposal_new(t, title, body, cluster, regression, &id);
	for (size_t k = 0; !rc && k < n_issues; k++) {
		char ref[32];
		snprintf(ref, sizeof ref, "%lld", (long long)issues[k]);
		rc = ev_proposal_add_evidence(t, id, "issue", ref, NULL);
	}
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal new");
	if (json)
		printf("{\"id\":%lld}\n", (long long)id);
	else
		printf("%lld\n", (long long)id);
	return 0;
}

typedef struct {
	const char *who;
} join_opts;

static const ev_opt join_opts_table[] = {
	EV_O_STR("--who", join_opts, who, "NAME", "who joins (required)"),
	EV_O_END,
};

static const ev_cmd_spec join_spec = {
	.name = "proposal join",
	.synopsis = "P --who NAME",
	.about = "Adds a member to a proposal.",
	.opts = join_opts_table,
	.positional = "P",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_join(const ev_cli *cli, int argc, char **argv)
{
	join_opts jo = {0};
	const char *pos[1];
	int64_t id;
	int prc = ev_opt_parse(&join_spec, &jo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!jo.who) {
		fprintf(stderr, "evald proposal join: --who is required\n");
		return EV_EXIT_USAGE;
	}
	if (!ev_cli_parse_id(pos[0], "proposal", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_proposal_join(t, id, jo.who);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal join");
	if (!cli->quiet)
		printf("%s joined proposal %lld\n", jo.who, (long long)id);
	return 0;
}

static const ev_cmd_spec status_spec = {
	.name = "proposal status",
	.synopsis = "P proposed|investigating|experimenting|accepted|shipped|dropped",
	.about = "Moves a proposal to a new state.",
	.positional = "P STATE",
	.min_pos = 2,
	.max_pos = 2,
};

static int cmd_status(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	const char *pos[2];
	int prc = ev_opt_parse(&status_spec, NULL, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	const char *state = pos[1];
	if (!ev_cli_parse_id(pos[0], "proposal", &id))
		return EV_EXIT_USAGE;
	if (!ev_proposal_status_valid(state)) {
		fprintf(stderr, "evald: proposal status: '%s' is not one of proposed, investigating, experimenting, "
		                "accepted, shipped, dropped\n",
		        state);
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_proposal_set_status(t, id, state);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal status");
	if (!cli->quiet)
		printf("proposal %lld: %s\n", (long long)id, state);
	return 0;
}

static void print_show(const char *out)
{
	cJSON *j = ev_cli_text_json(out), *x;
	printf("proposal %lld: %s\n  status   %s\n  created  %s\n  updated  %s\n", (long long)ev_json_num(j, "id", 0),
	       ev_json_str(j, "title", ""), ev_json_str(j, "status", ""), ev_json_str(j, "created", "-"),
	       ev_json_str(j, "updated", "-"));
	printf("  members ");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "members"))
	printf(" %s", ev_json_str(x, "who", ""));
	printf("\n  evidence\n");
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "evidence"))
	printf("    %-10s %-24s %s%s%s\n", ev_json_str(x, "kind", ""), ev_json_str(x, "ref", ""),
	       ev_json_str(x, "title", ""), ev_json_str(x, "note", NULL) ? "  — " : "", ev_json_str(x, "note", ""));
	cJSON *rep = cJSON_GetObjectItemCaseSensitive(j, "repro");
	cJSON *runs = cJSON_GetObjectItemCaseSensitive(rep, "runs");
	printf("  repro cases in the community suite: %d linked samples, %d runs scored them\n",
	       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rep, "samples")), cJSON_GetArraySize(runs));
	cJSON_ArrayForEach(x, runs)
	printf("    run %-5lld %-24s %s  %lld/%lld passed (%.0f%%)\n", (long long)ev_json_num(x, "run", 0),
	       ev_json_str(x, "model", ""), ev_json_str(x, "created", ""), (long long)ev_json_num(x, "passed", 0),
	       (long long)ev_json_num(x, "n", 0), 100 * ev_json_num(x, "pass_rate", 0));
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(rep, "models"))
	printf("    model %-24s %lld runs, pass rate %.0f%% -> %.0f%%%s\n", ev_json_str(x, "model", ""),
	       (long long)ev_json_num(x, "runs", 0), 100 * ev_json_num(x, "first_pass_rate", 0),
	       100 * ev_json_num(x, "last_pass_rate", 0), ev_json_bool(x, "improved", false) ? " (better)" : "");
	const char *body = ev_json_str(j, "body", "");
	if (*body)
		printf("\n%s\n", body);
	cJSON_Delete(j);
}

static const ev_cmd_spec show_spec = {
	.name = "proposal show",
	.synopsis = "P [--json]",
	.about = "One proposal: members, evidence, and how its repro cases fared run by run.",
	.opts = ev_json_only_opts,
	.positional = "P",
	.min_pos = 1,
	.max_pos = 1,
};

static const ev_cmd_spec list_spec = {
	.name = "proposal list",
	.synopsis = "[--json]",
	.about = "Lists the proposals.",
	.opts = ev_json_only_opts,
};

static int cmd_show(const ev_cli *cli, int argc, char **argv, bool list)
{
	ev_json_opts jo = {cli->json};
	const char *pos[1] = {NULL};
	int prc = ev_opt_parse(list ? &list_spec : &show_spec, &jo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
	int64_t id = 0;
	if (!list && !ev_cli_parse_id(pos[0], "proposal", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = list ? ev_proposals_list_json(t, &out) : ev_proposal_show_json(t, id, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail(list ? "proposal list" : "proposal show");
	if (json) {
		printf("%s\n", out);
	} else if (list) {
		cJSON *j = ev_cli_text_json(out), *x;
		printf("%5s  %-13s  %7s  %8s  %s\n", "id", "status", "members", "evidence", "title");
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "proposals"))
		printf("%5lld  %-13s  %7lld  %8lld  %s\n", (long long)ev_json_num(x, "id", 0), ev_json_str(x, "status", ""),
		       (long long)ev_json_num(x, "members", 0), (long long)ev_json_num(x, "n_evidence", 0),
		       ev_json_str(x, "title", ""));
		cJSON_Delete(j);
	} else {
		print_show(out);
	}
	free(out);
	return 0;
}

typedef struct {
	const char *out;
} export_opts;

static const ev_opt export_opts_table[] = {
	{.name = "--output", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(export_opts, out), .meta = "FILE",
	 .help = "where the cases go, JSON Lines (required)"},
	EV_O_END,
};

static const ev_cmd_spec export_spec = {
	.name = "proposal export",
	.synopsis = "P -o data.jsonl",
	.about = "Writes a proposal's cases (its evidence with prompts and expected answers) as JSON Lines.",
	.opts = export_opts_table,
	.positional = "P",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_export(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	export_opts eo = {0};
	const char *pos[1];
	int prc = ev_opt_parse(&export_spec, &eo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	const char *out = eo.out;
	if (!out) {
		fprintf(stderr, "evald proposal export: -o FILE is required\n");
		return EV_EXIT_USAGE;
	}
	if (!ev_cli_parse_id(pos[0], "proposal", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	size_t n = 0;
	int rc = ev_proposal_export(t, id, out, &n);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal export");
	if (!cli->quiet)
		printf("%zu cases written to %s\n", n, out);
	return 0;
}

static int cmd_show_one(const ev_cli *cli, int argc, char **argv)
{
	return cmd_show(cli, argc, argv, false);
}

static int cmd_list(const ev_cli *cli, int argc, char **argv)
{
	return cmd_show(cli, argc, argv, true);
}

int ev_cmd_proposal(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"new", cmd_new, "open a proposal from a cluster, a regression or a title"},
		{"join", cmd_join, "join a proposal"},
		{"status", cmd_status, "move a proposal to a new state"},
		{"show", cmd_show_one, "one proposal with its evidence"},
		{"list", cmd_list, "list proposals"},
		{"export", cmd_export, "write a proposal's cases as JSON Lines"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"proposal", "Training proposals that grow out of confirmed weaknesses.",
	                                      subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
