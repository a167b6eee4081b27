/*
 * evald route RUN RUN [RUN...]: routing between models evaluated offline
 * over their stored runs on the same suites (feedback/route.c): each model
 * alone, a router by category, a router by cost, the oracle, each with its
 * score (95% bootstrap interval) and mean cost, and the models' cost-quality
 * hull with the area under it. --save-router writes the rule learned on
 * every sample for `evald run --router` to apply live.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

typedef struct {
	bool json, latency, save_cost;
	double threshold;
	int64_t seed;
	const char *by, *save;
} route_opts;

static const ev_opt route_table[] = {
	EV_O_FLAG("--json", route_opts, json, "as JSON"),
	EV_O_FLAG("--latency", route_opts, latency, "cost in seconds (default: prompt + completion tokens)"),
	EV_O_NUM("--threshold", route_opts, threshold, 0, 1, "T",
	         "the cost router: the cheapest model within T of the best in a category (0.05)"),
	EV_O_INT("--seed", route_opts, seed, 0, 9e15, "S", "bootstrap seed"),
	EV_O_STR("--by", route_opts, by, "KEY",
	         "categories from the samples' metadata KEY (a classifier's label) instead of category/task/suite"),
	EV_O_STR("--save-router", route_opts, save, "FILE",
	         "write the category rule learned on every sample for evald run --router FILE (the --model in the "
	         "order of the runs given)"),
	EV_O_FLAG("--save-cost-router", route_opts, save_cost, "with --save-router: the cost rule instead"),
	EV_O_END,
};

static const ev_cmd_spec route_spec = {
	.name = "route",
	.synopsis = "RUN RUN [RUN...] [--latency] [--threshold T] [--seed S] [--json]",
	.about = "Routing evaluated offline: runs of several models on the same suites; each model alone, a\n"
	         "router by category (the best model of each category, learned on half the samples and scored\n"
	         "on the other half), a router by cost (the cheapest within T of the best), and the oracle (the\n"
	         "cheapest model that scored best on each sample): score with a 95% CI, mean cost, and the\n"
	         "models' cost-quality hull with the area under it.",
	.opts = route_table,
	.positional = "RUN...",
	.min_pos = 2,
	.max_pos = 64,
};

int ev_cmd_route(const ev_cli *cli, int argc, char **argv)
{
	route_opts o = {.json = cli->json, .threshold = 0.05, .seed = 1};
	const char *pos[64] = {NULL};
	int npos = 0;
	int prc = ev_opt_parse(&route_spec, &o, argc, argv, pos, &npos);
	if (prc)
		return ev_opt_exit(prc);
	int64_t runs[64];
	for (int i = 0; i < npos; i++)
		if (!ev_cli_parse_run_id(pos[i], &runs[i]))
			return EV_EXIT_USAGE;
	ev_tracker *t;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	ev_route_options ro = EV_ROUTE_OPTIONS_INIT;
	ro.latency = o.latency, ro.threshold = o.threshold, ro.seed = (uint64_t)o.seed, ro.by = o.by;
	if (o.by && (!*o.by || strlen(o.by) > 128)) {
		fprintf(stderr, "evald route: --by: a metadata key of 1 to 128 bytes\n");
		ev_tracker_close(t);
		return EV_EXIT_USAGE;
	}
	char *out = NULL;
	int rc = ev_route_eval(t, runs, (size_t)npos, &ro, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("route");
	if (o.save) {
		cJSON *j = cJSON_Parse(out);
		char *table = ev_json_print(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tables"), o.save_cost ? "cost" : "category"));
		cJSON_Delete(j);
		int wrc = table ? ev_file_write(o.save, table, strlen(table)) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(table);
		if (wrc) {
			free(out);
			return ev_cli_fail("route --save-router");
		}
		if (!cli->quiet)
			fprintf(stderr, "evald: wrote %s (evald run --router %s with the --model in the order of the runs)\n",
			        o.save, o.save);
	}
	if (o.json) {
		printf("%s\n", out);
	} else {
		cJSON *j = cJSON_Parse(out);
		printf("routing over %.0f samples every run scored; cost in %s\n", ev_json_num(j, "samples", 0),
		       ev_json_str(j, "cost", ""));
		printf("%-40s %8s %18s %12s\n", "", "score", "95% CI", "cost");
		const char *groups[2] = {"models", "routers"};
		for (int g = 0; g < 2; g++) {
			const cJSON *p;
			cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, groups[g]))
			{
				char name[64];
				snprintf(name, sizeof name, "%s", ev_json_str(p, "name", ""));
				ev_term_clean(name);
				printf("%-40.40s %8.3f   [%.3f, %.3f] %12.1f\n", name, ev_json_num(p, "score", 0),
				       ev_json_num(p, "ci_low", 0), ev_json_num(p, "ci_high", 0), ev_json_num(p, "cost", 0));
			}
		}
		printf("hull:");
		const cJSON *h;
		cJSON_ArrayForEach(h, cJSON_GetObjectItem(j, "hull"))
		{
			char name[64];
			snprintf(name, sizeof name, "%s", cJSON_IsString(h) ? h->valuestring : "");
			ev_term_clean(name);
			printf(" %s", name);
		}
		printf("; area under it %.3f\n", ev_json_num(j, "hull_area", 0));
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}
