/*
 * evald runs: list the runs in the tracker, newest first.
 * --json prints {"runs":[{"id","model","status","created","finished",
 * "n_planned","n_results","suites":[{"name","score","n"}]}]}; a suite's
 * score is null until the run has a summary.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

typedef struct {
	int limit;
	bool json;
} runs_opts;

static const ev_opt runs_opts_table[] = {
	EV_O_INT("--limit", runs_opts, limit, 1, 1000000, "N", "the newest N runs"),
	EV_O_FLAG("--json", runs_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_cmd_spec runs_spec = {
	.name = "runs",
	.synopsis = "[--limit N] [--json]",
	.about = "Lists the runs in the tracker, newest first: id, model, status, results, per-suite scores.",
	.opts = runs_opts_table,
};

int ev_cmd_runs(const ev_cli *cli, int argc, char **argv)
{
	runs_opts ro = {.limit = 50, .json = cli->json};
	int prc = ev_opt_parse(&runs_spec, &ro, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = ro.json;
	int limit = ro.limit;
	ev_tracker *t;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	ev_run_row *rows = NULL;
	size_t n = 0;
	if (ev_tracker_runs_list(t, &rows, &n, (int)limit)) {
		ev_tracker_close(t);
		return ev_cli_fail("runs");
	}
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		ev_run_row *r = &rows[i];
		cJSON *o = cJSON_CreateObject();
		char created[32], finished[32] = "";
		ev_iso8601(created, r->created);
		if (r->finished > 0)
			ev_iso8601(finished, r->finished);
		cJSON_AddNumberToObject(o, "id", (double)r->id);
		cJSON_AddStringToObject(o, "model", r->model ? r->model : "");
		cJSON_AddStringToObject(o, "status", r->status ? r->status : "");
		cJSON_AddStringToObject(o, "created", created);
		if (*finished)
			cJSON_AddStringToObject(o, "finished", finished);
		else
			cJSON_AddNullToObject(o, "finished");
		cJSON_AddNumberToObject(o, "n_planned", (double)r->n_planned);
		cJSON_AddNumberToObject(o, "n_results", (double)r->n_results);
		cJSON *suites = cJSON_AddArrayToObject(o, "suites");
		cJSON *info = r->suites_json ? cJSON_Parse(r->suites_json) : NULL;
		cJSON *sum = r->summary_json ? cJSON_Parse(r->summary_json) : NULL;
		const cJSON *s;
		cJSON_ArrayForEach(s, info)
		{
			const char *name = ev_json_str(s, "name", "?");
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", name);
			const cJSON *x, *found = NULL;
			cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(sum, "suites")) if (!strcmp(
			    ev_json_str(x, "name", ""), name)) found = x;
			if (found) {
				cJSON_AddNumberToObject(e, "score", ev_json_num(found, "score", 0));
				cJSON_AddNumberToObject(e, "n", ev_json_num(found, "n", 0));
			} else {
				cJSON_AddNullToObject(e, "score");
				cJSON_AddNumberToObject(e, "n", ev_json_num(s, "n", 0));
			}
			cJSON_AddItemToArray(suites, e);
		}
		cJSON_Delete(info);
		cJSON_Delete(sum);
		cJSON_AddItemToArray(arr, o);
	}
	if (json) {
		cJSON *root = cJSON_CreateObject();
		cJSON_AddItemToObject(root, "runs", arr);
		char *s = ev_json_print(root);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(root);
	} else {
		ev_json_term_clean(arr);
		printf("%5s  %-20s %-11s %-20s %9s  %s\n", "id", "model", "status", "created", "results", "suites");
		const cJSON *o;
		cJSON_ArrayForEach(o, arr)
		{
			printf("%5.0f  %-20.20s %-11s %-20s %4.0f/%-4.0f ", ev_json_num(o, "id", 0), ev_json_str(o, "model", ""),
			       ev_json_str(o, "status", ""), ev_json_str(o, "created", ""), ev_json_num(o, "n_results", 0),
			       ev_json_num(o, "n_planned", 0));
			const cJSON *s;
			cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(o, "suites"))
			{
				const cJSON *sc = cJSON_GetObjectItemCaseSensitive(s, "score");
				if (cJSON_IsNumber(sc))
					printf(" %s=%.3f", ev_json_str(s, "name", ""), sc->valuedouble);
				else
					printf(" %s=-", ev_json_str(s, "name", ""));
			}
			printf("\n");
		}
		cJSON_Delete(arr);
	}
	ev_run_rows_free(rows, n);
	ev_tracker_close(t);
	return 0;
}
