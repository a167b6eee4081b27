/*
 * evald merge RUN RUN... [--json]: joins the results of runs that split one
 * evaluation (`run --shard K/N` on one or several machines, their trackers
 * brought together with --db) into a new finished run with its own
 * summary. The runs must be of the same model and the same suites (same
 * content hashes); a sample present in several of them is an error, since
 * shards are disjoint by construction.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

/* The suites list with names and hashes only, for comparing runs. */
static char *suites_key(const char *suites_json)
{
	cJSON *j = suites_json ? cJSON_Parse(suites_json) : NULL;
	ev_buf b = EV_BUF_INIT(1 << 20);
	const cJSON *s;
	cJSON_ArrayForEach(s, j) ev_buf_printf(&b, "%s@%s;", ev_json_str(s, "name", ""), ev_json_str(s, "hash", ""));
	cJSON_Delete(j);
	return ev_buf_detach(&b, NULL);
}

typedef struct {
	bool json;
} merge_opts;

static const ev_opt merge_opts_table[] = {
	EV_O_FLAG("--json", merge_opts, json, "print the merged run's summary as JSON"),
	EV_O_END,
};

static const ev_cmd_spec merge_spec = {
	.name = "merge",
	.synopsis = "RUN RUN... [--json]",
	.about = "Joins the runs of one evaluation's shards (run --shard K/N) into a new finished run with\n"
	         "its own summary. The runs must be of one model and the same suites (content hashes).",
	.opts = merge_opts_table,
	.positional = "RUN RUN...",
	.min_pos = 2,
	.max_pos = EV_OPT_MAX_POS,
};

int ev_cmd_merge(const ev_cli *cli, int argc, char **argv)
{
	merge_opts mo = {.json = cli->json};
	const char *pos[EV_OPT_MAX_POS];
	int n = 0;
	int prc = ev_opt_parse(&merge_spec, &mo, argc, argv, pos, &n);
	if (prc)
		return ev_opt_exit(prc);
	bool json = mo.json;
	int64_t ids[EV_OPT_MAX_POS];
	for (int i = 0; i < n; i++)
		if (!ev_cli_parse_run_id(pos[i], &ids[i]))
			return EV_EXIT_USAGE;
	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	ev_run_row rows[EV_OPT_MAX_POS];
	memset(rows, 0, sizeof rows);
	char *key0 = NULL, *summary = NULL, *config = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	long planned = 0;
	for (int i = 0; i < n; i++) {
		if (ev_tracker_run_get(t, ids[i], &rows[i])) {
			ev_cli_fail("merge");
			goto done;
		}
		char *key = suites_key(rows[i].suites_json);
		if (i == 0) {
			key0 = key;
		} else {
			bool same = key && key0 && !strcmp(key, key0) && !strcmp(rows[i].model ? rows[i].model : "",
			                                                          rows[0].model ? rows[0].model : "");
			free(key);
			if (!same) {
				ev_error_set(EV_E_INVALID, "run %lld is not of the same model and suites as run %lld",
				             (long long)ids[i], (long long)ids[0]);
				ev_cli_fail("merge");
				goto done;
			}
		}
		if (!ev_run_status_complete(rows[i].status))
			ev_log_warn("run %lld is %s: merging what it has", (long long)ids[i], rows[i].status);
		planned += rows[i].n_planned;
	}
	{
		ev_buf b = EV_BUF_INIT(1 << 20);
		ev_buf_puts(&b, "{\"merged_from\":[");
		for (int i = 0; i < n; i++)
			ev_buf_printf(&b, "%s%lld", i ? "," : "", (long long)ids[i]);
		ev_buf_puts(&b, "]}");
		config = ev_buf_detach(&b, NULL);
	}
	ev_run_info info = {rows[0].model, rows[0].model_source, rows[0].suites_json, config, rows[0].epochs, planned, 0, NULL};
	int64_t merged;
	if (ev_tracker_run_create(t, &info, &merged)) {
		ev_cli_fail("merge");
		goto done;
	}
	long copied = 0;
	for (int i = 0; i < n; i++) {
		long k = 0;
		int crc = ev_tracker_results_copy(t, ids[i], t, merged, &k);
		copied += k;
		if (crc) {
			ev_cli_fail("merge");
			ev_tracker_run_set_status(t, merged, "failed");
			goto done;
		}
	}
	if (ev_tracker_flush(t)) {
		ev_cli_fail("merge");
		goto done;
	}
	ev_run_row m = {0};
	if (ev_tracker_run_get(t, merged, &m) == 0 && m.n_results != copied) {
		ev_error_set(EV_E_INVALID, "the runs share samples (%ld results copied, %ld distinct): not disjoint shards",
		             copied, m.n_results);
		ev_run_row_clear(&m);
		ev_tracker_run_set_status(t, merged, "failed");
		ev_cli_fail("merge");
		goto done;
	}
	ev_run_row_clear(&m);
	if (ev_summary_compute(&summary, t, merged) || ev_tracker_run_set_summary(t, merged, summary) ||
	    ev_tracker_run_set_status(t, merged, "finished")) {
		ev_cli_fail("merge");
		goto done;
	}
	if (json)
		printf("%s\n", summary);
	else {
		fprintf(stderr, "evald: run %lld merges %d runs (%ld results)\n", (long long)merged, n, copied);
		ev_summary_print(stdout, summary);
	}
	rc = 0;
done:
	for (int i = 0; i < n; i++)
		ev_run_row_clear(&rows[i]);
	free(key0);
	free(config);
	free(summary);
	ev_tracker_close(t);
	return rc;
}
