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

static const char usage_text[] =
	"usage: evald proposal new (--from-cluster C | --from-regression R | --title T) [--body B] [--issue N]... [--json]\n"
	"       evald proposal join P --who NAME\n"
	"       evald proposal status P proposed|investigating|experimenting|accepted|shipped|dropped\n"
	"       evald proposal show P [--json]\n"
	"       evald proposal list [--json]\n"
	"       evald proposal export P -o data.jsonl\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return EV_EXIT_USAGE;
}

static int cmd_new(const ev_cli *cli, int argc, char **argv)
{
	const char *title = NULL, *body = NULL;
	int64_t cluster = 0, regression = 0, issues[64];
	size_t n_issues = 0;
	bool json = cli->json;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (i + 1 >= argc)
			return usage();
		const char *v = argv[++i];
		if (!strcmp(a, "--title"))
			title = v;
		else if (!strcmp(a, "--body"))
			body = v;
		else if (!strcmp(a, "--from-cluster")) {
			if (!ev_cli_parse_id(v, "cluster", &cluster))
				return EV_EXIT_USAGE;
		} else if (!strcmp(a, "--from-regression")) {
			if (!ev_cli_parse_id(v, "regression", &regression))
				return EV_EXIT_USAGE;
		} else if (!strcmp(a, "--issue")) {
			if (n_issues >= 64 || !ev_cli_parse_id(v, "issue", &issues[n_issues++]))
				return EV_EXIT_USAGE;
		} else {
			return usage();
		}
	}
	if (!title && !cluster && !regression) {
		fprintf(stderr, "evald: proposal new: give --from-cluster, --from-regression or --title\n");
		return usage();
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

static int cmd_join(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	if (argc != 4 || strcmp(argv[2], "--who"))
		return usage();
	if (!ev_cli_parse_id(argv[1], "proposal", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_proposal_join(t, id, argv[3]);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal join");
	if (!cli->quiet)
		printf("%s joined proposal %lld\n", argv[3], (long long)id);
	return 0;
}

static int cmd_status(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	if (argc != 3)
		return usage();
	if (!ev_cli_parse_id(argv[1], "proposal", &id))
		return EV_EXIT_USAGE;
	if (!ev_proposal_status_valid(argv[2])) {
		fprintf(stderr, "evald: proposal status: '%s' is not one of proposed, investigating, experimenting, "
		                "accepted, shipped, dropped\n",
		        argv[2]);
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_proposal_set_status(t, id, argv[2]);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("proposal status");
	if (!cli->quiet)
		printf("proposal %lld: %s\n", (long long)id, argv[2]);
	return 0;
}

static void print_show(const char *out)
{
	cJSON *j = cJSON_Parse(out), *x;
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

static int cmd_show(const ev_cli *cli, int argc, char **argv, bool list)
{
	bool json = cli->json;
	const char *ids = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!list && !ids)
			ids = argv[i];
		else
			return usage();
	}
	int64_t id = 0;
	if (!list && (!ids || !ev_cli_parse_id(ids, "proposal", &id)))
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
		cJSON *j = cJSON_Parse(out), *x;
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

static int cmd_export(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	const char *out = NULL, *ids = NULL;
	for (int i = 1; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
			out = argv[++i];
		else if (!ids)
			ids = argv[i];
		else
			return usage();
	}
	if (!ids || !out)
		return usage();
	if (!ev_cli_parse_id(ids, "proposal", &id))
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
	static const ev_subcommand subs[] = {{"new", cmd_new},	     {"join", cmd_join}, {"status", cmd_status},
					     {"show", cmd_show_one}, {"list", cmd_list}, {"export", cmd_export}};
	return ev_cli_subcommand(cli, argc, argv, "proposal", usage_text, subs, sizeof(subs) / sizeof(subs[0]));
}
