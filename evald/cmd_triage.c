/*
 * evald triage [--rules FILE] [--threshold J] [--dry-run] [--json]: groups
 * near-duplicate open issue reports into clusters (MinHash over word
 * 3-shingles, shared attachments), adds labels from the rules and the
 * attachments' modality, and lists the clusters by size, new ones first.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

static int usage(void)
{
	fprintf(stderr, "usage: evald triage [--rules FILE] [--threshold J] [--dry-run] [--json]\n"
	                "  rules: lines 'label<TAB>PCRE2 pattern' (case-insensitive; replaces the built-in set)\n"
	                "  threshold: estimated Jaccard of word 3-shingles to join two reports (default 0.45)\n");
	return EV_EXIT_USAGE;
}

int ev_cmd_triage(const ev_cli *cli, int argc, char **argv)
{
	ev_triage_options opt = EV_TRIAGE_OPTIONS_INIT;
	bool json = cli->json;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--dry-run"))
			opt.dry_run = true;
		else if (!strcmp(argv[i], "--rules") && i + 1 < argc)
			opt.rules_path = argv[++i];
		else if (!strcmp(argv[i], "--threshold") && i + 1 < argc) {
			if (!ev_parse_f64(argv[++i], &opt.threshold) || !(opt.threshold > 0 && opt.threshold <= 1)) {
				fprintf(stderr, "evald: --threshold: '%s' is not a number in (0, 1]\n", argv[i]);
				return EV_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			return 0;
		} else {
			return usage();
		}
	}
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
		cJSON *j = cJSON_Parse(out), *c;
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
