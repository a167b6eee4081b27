/*
 * evald issue: community issue reports in the tracker.
 *   add --title T [--body B] [--attach FILE]... [--model M] [--prompt P]
 *       [--output O] [--expected E] [--label L]... [--max-attachment BYTES] [--json]
 *   list [--status open|closed] [--label L] [--json]
 *   show N [--json]     close N     import github-issues.json [--json]
 *   repro N [--regex P | --target T] [--suite-dir DIR] [--json]
 */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

static const char usage_text[] =
	"usage: evald issue add --title T [--body B] [--attach FILE]... [--model M] [--prompt P]\n"
	"                       [--output O] [--expected E] [--label L]... [--max-attachment BYTES] [--json]\n"
	"       evald issue list [--status open|closed] [--label L] [--json]\n"
	"       evald issue show N [--json]\n"
	"       evald issue close N\n"
	"       evald issue import github-issues.json [--json]\n"
	"       evald issue repro N [--regex P | --target T] [--suite-dir DIR] [--json]\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return EV_EXIT_USAGE;
}

static const char *value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "evald: %s needs a value\n", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

static void print_json_line(const char *json)
{
	printf("%s\n", json);
}

static int cmd_add(const ev_cli *cli, int argc, char **argv)
{
	ev_issue_info info = {0};
	const char *labels[EV_ISSUE_MAX_LABELS];
	const char *files[EV_ISSUE_MAX_ATTACHMENTS];
	ev_issue_attachment atts[EV_ISSUE_MAX_ATTACHMENTS];
	char *data[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	char *names[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	size_t n_files = 0;
	bool json = cli->json;
	ev_tracker *t = NULL;
	int ret = EV_EXIT_FAIL;
	const char *v;

	info.source = "cli";
	info.labels = labels;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (!(v = value(argc, argv, &i)))
			return EV_EXIT_USAGE;
		if (!strcmp(a, "--title"))
			info.title = v;
		else if (!strcmp(a, "--body"))
			info.body = v;
		else if (!strcmp(a, "--model"))
			info.model = v;
		else if (!strcmp(a, "--prompt"))
			info.prompt = v;
		else if (!strcmp(a, "--output"))
			info.output = v;
		else if (!strcmp(a, "--expected"))
			info.expected = v;
		else if (!strcmp(a, "--author"))
			info.author = v;
		else if (!strcmp(a, "--label")) {
			if (info.n_labels >= EV_ISSUE_MAX_LABELS) {
				fprintf(stderr, "evald: at most %d --label flags\n", EV_ISSUE_MAX_LABELS);
				return EV_EXIT_USAGE;
			}
			labels[info.n_labels++] = v;
		} else if (!strcmp(a, "--attach")) {
			if (n_files >= EV_ISSUE_MAX_ATTACHMENTS) {
				fprintf(stderr, "evald: at most %d --attach flags\n", EV_ISSUE_MAX_ATTACHMENTS);
				return EV_EXIT_USAGE;
			}
			files[n_files++] = v;
		} else if (!strcmp(a, "--max-attachment")) {
			int64_t m;
			if (!ev_parse_i64(v, &m) || m <= 0) {
				fprintf(stderr, "evald: --max-attachment: '%s' is not a positive byte count\n", v);
				return EV_EXIT_USAGE;
			}
			info.max_attachment_bytes = (size_t)m;
		} else {
			fprintf(stderr, "evald: issue add: unknown option %s\n", a);
			return usage();
		}
	}
	if (!info.title) {
		fprintf(stderr, "evald: issue add: --title is required\n");
		return usage();
	}
	size_t max = info.max_attachment_bytes ? info.max_attachment_bytes : EV_ATTACH_MAX_DEFAULT;
	for (size_t k = 0; k < n_files; k++) {
		size_t len = 0;
		if (ev_file_read(&data[k], &len, files[k], max) != 0) {
			ev_cli_fail("--attach");
			goto done;
		}
		char *copy = ev_strdup(files[k]);
		names[k] = copy ? ev_strdup(basename(copy)) : NULL;
		free(copy);
		atts[k] = (ev_issue_attachment){names[k], NULL, data[k], len};
	}
	info.attachments = atts;
	info.n_attachments = n_files;
	if (ev_cli_open_tracker(cli, &t))
		goto done;
	int64_t id = 0;
	if (ev_issue_add(t, &info, &id) != 0) {
		ev_cli_fail("issue add");
		goto done;
	}
	if (json)
		printf("{\"id\":%lld}\n", (long long)id);
	else
		printf("%lld\n", (long long)id);
	ret = 0;
done:
	ev_tracker_close(t);
	for (size_t k = 0; k < n_files; k++) {
		free(data[k]);
		free(names[k]);
	}
	return ret;
}

static int cmd_list(const ev_cli *cli, int argc, char **argv)
{
	const char *status = NULL, *label = NULL;
	bool json = cli->json;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--status") && i + 1 < argc)
			status = argv[++i];
		else if (!strcmp(argv[i], "--label") && i + 1 < argc)
			label = argv[++i];
		else
			return usage();
	}
	if (status && strcmp(status, "open") && strcmp(status, "closed")) {
		fprintf(stderr, "evald: --status takes open or closed\n");
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_issues_list_json(t, status, label, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("issue list");
	if (json) {
		print_json_line(out);
	} else {
		cJSON *j = cJSON_Parse(out), *it;
		printf("%5s  %-6s  %-8s  %-7s  %-24s  %s\n", "id", "status", "modality", "cluster", "labels", "title");
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "issues"))
		{
			ev_buf lb = EV_BUF_INIT(4096);
			cJSON *l;
			cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(it, "labels"))
			{
				if (lb.len)
					ev_buf_putc(&lb, ',');
				ev_buf_puts(&lb, l->valuestring);
			}
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "cluster_id");
			char cl[24] = "-";
			if (cJSON_IsNumber(c))
				snprintf(cl, sizeof cl, "%lld", (long long)c->valuedouble);
			printf("%5lld  %-6s  %-8s  %-7s  %-24s  %s\n", (long long)ev_json_num(it, "id", 0),
			       ev_json_str(it, "status", ""), ev_json_str(it, "modality", ""), cl, lb.len ? lb.data : "-",
			       ev_json_str(it, "title", ""));
			ev_buf_free(&lb);
		}
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

static int cmd_show(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	const char *ids = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!ids)
			ids = argv[i];
		else
			return usage();
	}
	int64_t id;
	if (!ids)
		return usage();
	if (!ev_cli_parse_id(ids, "issue", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_issue_show_json(t, id, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("issue show");
	if (json) {
		print_json_line(out);
	} else {
		cJSON *j = cJSON_Parse(out);
		static const char *const keys[] = {"title", "status", "source", "modality", "model", "author",
		                                   "external_id", "created", "closed", NULL};
		printf("issue %lld\n", (long long)id);
		for (const char *const *k = keys; *k; k++) {
			const char *s = ev_json_str(j, *k, NULL);
			if (s)
				printf("  %-12s %s\n", *k, s);
		}
		cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cluster_id");
		if (cJSON_IsNumber(c))
			printf("  %-12s %lld\n", "cluster", (long long)c->valuedouble);
		cJSON *l;
		printf("  %-12s", "labels");
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(j, "labels"))
		printf(" %s", l->valuestring);
		printf("\n");
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(j, "attachments"))
		printf("  attachment   %s %s %lld bytes (%s)\n", ev_json_str(l, "sha256", ""), ev_json_str(l, "mime", ""),
		       (long long)ev_json_num(l, "size", 0), ev_json_str(l, "name", "-"));
		cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(j, "links"))
		printf("  link         %s\n", l->valuestring);
		static const char *const texts[] = {"body", "prompt", "output", "expected", NULL};
		for (const char *const *k = texts; *k; k++) {
			const char *s = ev_json_str(j, *k, NULL);
			if (s && *s)
				printf("\n%s:\n%s\n", *k, s);
		}
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

static int cmd_close(const ev_cli *cli, int argc, char **argv)
{
	int64_t id;
	if (argc != 2)
		return usage();
	if (!ev_cli_parse_id(argv[1], "issue", &id))
		return EV_EXIT_USAGE;
	ev_tracker *t = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_issue_close(t, id);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("issue close");
	if (!cli->quiet)
		printf("issue %lld closed\n", (long long)id);
	return 0;
}

static int cmd_import(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!path)
			path = argv[i];
		else
			return usage();
	}
	if (!path)
		return usage();
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_issues_import_github(t, path, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("issue import");
	if (json) {
		print_json_line(out);
	} else {
		cJSON *j = cJSON_Parse(out);
		printf("imported %lld issues (%lld already there, %lld pull requests skipped)\n",
		       (long long)ev_json_num(j, "imported", 0), (long long)ev_json_num(j, "skipped_existing", 0),
		       (long long)ev_json_num(j, "skipped_pull_requests", 0));
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

static int cmd_repro(const ev_cli *cli, int argc, char **argv)
{
	ev_repro_options opt = EV_REPRO_OPTIONS_INIT;
	bool json = cli->json;
	const char *ids = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--regex") && i + 1 < argc)
			opt.regex = argv[++i];
		else if (!strcmp(argv[i], "--target") && i + 1 < argc)
			opt.target = argv[++i];
		else if (!strcmp(argv[i], "--suite-dir") && i + 1 < argc)
			opt.suite_dir = argv[++i];
		else if (!ids && argv[i][0] != '-')
			ids = argv[i];
		else
			return usage();
	}
	int64_t id;
	if (!ids)
		return usage();
	if (!ev_cli_parse_id(ids, "issue", &id))
		return EV_EXIT_USAGE;
	if (opt.regex && opt.target) {
		fprintf(stderr, "evald: issue repro: give --regex or --target, not both\n");
		return EV_EXIT_USAGE;
	}
	ev_tracker *t = NULL;
	char *out = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	int rc = ev_issue_repro(t, id, &opt, &out);
	ev_tracker_close(t);
	if (rc)
		return ev_cli_fail("issue repro");
	if (json) {
		print_json_line(out);
	} else {
		cJSON *j = cJSON_Parse(out);
		printf("%s %s in %s (%lld samples)\n", ev_json_str(j, "sample_id", ""),
		       ev_json_bool(j, "replaced", false) ? "updated" : "added", ev_json_str(j, "suite_dir", ""),
		       (long long)ev_json_num(j, "n_samples", 0));
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

int ev_cmd_issue(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {{"add", cmd_add},	   {"list", cmd_list},	   {"show", cmd_show},
					     {"close", cmd_close}, {"import", cmd_import}, {"repro", cmd_repro}};
	return ev_cli_subcommand(cli, argc, argv, "issue", usage_text, subs, sizeof(subs) / sizeof(subs[0]));
}
