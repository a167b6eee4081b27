/*
 * evald triage [--rules FILE] [--threshold J] [--dry-run] [--json]: groups
 * near-duplicate open issue reports into clusters (MinHash over word
 * 3-shingles, shared attachments), adds labels from the rules and the
 * attachments' modality, and lists the clusters by size, new ones first.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

typedef struct {
	ev_triage_options t;
	bool json;
} triage_opts;

static const ev_opt triage_opts_table[] = {
	EV_O_STR("--rules", triage_opts, t.rules_path, "FILE",
	         "lines 'label<TAB>PCRE2 pattern' (case-insensitive; replaces the built-in set)"),
	EV_O_NUM("--threshold", triage_opts, t.threshold, 0.001, 1, "J",
	         "estimated Jaccard of word 3-shingles that joins two reports"),
	EV_O_FLAG("--dry-run", triage_opts, t.dry_run, "show the clusters without storing them"),
	EV_O_FLAG("--json", triage_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_cmd_spec triage_spec = {
	.name = "triage",
	.synopsis = "[--rules FILE] [--threshold J] [--dry-run] [--json]",
	.about = "Groups near-duplicate open issue reports into clusters (MinHash over word 3-shingles,\n"
	         "shared attachments), labels them from the rules and the attachments' modality, and lists\n"
	         "the clusters by size, new ones first.",
	.opts = triage_opts_table,
};

int ev_cmd_triage(const ev_cli *cli, int argc, char **argv)
{
	triage_opts to = {.t = EV_TRIAGE_OPTIONS_INIT, .json = cli->json};
	int prc = ev_opt_parse(&triage_spec, &to, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	ev_triage_options opt = to.t;
	bool json = to.json;
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_triage_run(t, &opt, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("triage");
	if (json) {
		printf("%s\n", out);
	} else {
		cJSON *j = ev_cli_text_json(out), *c;
		cJSON *cl = cJSON_GetObjectItemCaseSensitive(j, "clusters");
		printf("%lld open issues, %d clusters, %lld labels added%s\n", (long long)ev_json_num(j, "issues", 0),
		       cJSON_GetArraySize(cl), (long long)ev_json_num(j, "labeled", 0), opt.dry_run ? " (dry run)" : "");
		cJSON_ArrayForEach(c, cl)
		{
			const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
			printf("cluster %s%lld  size %lld%s\n", cJSON_IsNumber(id) ? "" : "(new) ",
			       cJSON_IsNumber(id) ? (long long)id->valuedouble : 0LL, (long long)ev_json_num(c, "size", 0),
			       ev_json_bool(c, "new", false) ? "  new" : "");
			cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "issues");
			cJSON *titles = cJSON_GetObjectItemCaseSensitive(c, "titles");
			for (int k = 0; k < cJSON_GetArraySize(ids); k++)
				printf("  #%-5lld %s\n", (long long)cJSON_GetArrayItem(ids, k)->valuedouble,
				       cJSON_GetArrayItem(titles, k) ? cJSON_GetArrayItem(titles, k)->valuestring : "");
		}
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}
