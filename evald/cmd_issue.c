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

static void print_json_line(const char *json)
{
	printf("%s\n", json);
}

typedef struct {
	ev_issue_info info;
	const char *labels[EV_ISSUE_MAX_LABELS];
	int n_labels;
	const char *files[EV_ISSUE_MAX_ATTACHMENTS];
	int n_files;
	int64_t max_attachment;
	bool json;
} add_opts;

#define T add_opts
static const ev_opt add_opts_table[] = {
	EV_O_STR("--title", T, info.title, "TEXT", "the report's title (required)"),
	EV_O_STR("--body", T, info.body, "TEXT", "what happened"),
	EV_O_STRS("--attach", T, files, n_files, "FILE", "an image, video or document"),
	EV_O_STR("--model", T, info.model, "NAME", "the model it happened with"),
	EV_O_STR("--prompt", T, info.prompt, "TEXT", "the prompt given"),
	EV_O_STR("--output", T, info.output, "TEXT", "what the model answered"),
	EV_O_STR("--expected", T, info.expected, "TEXT", "what it should have answered"),
	EV_O_STR("--author", T, info.author, "WHO", "who reported it"),
	EV_O_STRS("--label", T, labels, n_labels, "LABEL", "a label"),
	EV_O_INT("--max-attachment", T, max_attachment, 1, 1e12, "BYTES", "cap on one attachment"),
	EV_O_FLAG("--json", T, json, "print {\"id\"}"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec add_spec = {
	.name = "issue add",
	.synopsis = "--title T [--body B] [--attach FILE]... [--prompt P --output O --expected E] [OPTIONS]",
	.about = "Files a community issue report with its attachments (type checked, stored by content hash).",
	.opts = add_opts_table,
};

static int cmd_add(const ev_cli *cli, int argc, char **argv)
{
	add_opts ao = {.json = cli->json};
	int prc = ev_opt_parse(&add_spec, &ao, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	ev_issue_info info = ao.info;
	const char *const *files = ao.files;
	ev_issue_attachment atts[EV_ISSUE_MAX_ATTACHMENTS];
	char *data[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	char *names[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	size_t n_files = (size_t)ao.n_files;
	bool json = ao.json;
	ev_tracker *t = NULL;
	int ret = EV_EXIT_FAIL;

	info.source = "cli";
	info.labels = ao.labels;
	info.n_labels = (size_t)ao.n_labels;
	info.max_attachment_bytes = (size_t)ao.max_attachment;
	if (!info.title) {
		fprintf(stderr, "evald issue add: --title is required\n");
		ev_opt_usage(&add_spec, stderr);
		return EV_EXIT_USAGE;
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

typedef struct {
	const char *status, *label;
	bool json;
} list_opts;

static const ev_opt list_opts_table[] = {
	EV_O_CHOICE("--status", list_opts, status, "open|closed", "only issues in this state"),
	EV_O_STR("--label", list_opts, label, "LABEL", "only issues with this label"),
	EV_O_FLAG("--json", list_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_cmd_spec list_spec = {
	.name = "issue list",
	.synopsis = "[--status open|closed] [--label L] [--json]",
	.about = "Lists issue reports, newest first.",
	.opts = list_opts_table,
};

static int cmd_list(const ev_cli *cli, int argc, char **argv)
{
	list_opts lo = {.json = cli->json};
	int prc = ev_opt_parse(&list_spec, &lo, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	const char *status = lo.status, *label = lo.label;
	bool json = lo.json;
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
		cJSON *j = ev_cli_text_json(out), *it;
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

static const ev_cmd_spec show_spec = {
	.name = "issue show",
	.synopsis = "N [--json]",
	.about = "One issue with every field, its attachments and links.",
	.opts = ev_json_only_opts,
	.positional = "N",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_show(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {cli->json};
	const char *pos[1];
	int prc = ev_opt_parse(&show_spec, &jo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
	int64_t id;
	if (!ev_cli_parse_id(pos[0], "issue", &id))
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
		cJSON *j = ev_cli_text_json(out);
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

static const ev_cmd_spec close_spec = {
	.name = "issue close",
	.synopsis = "N",
	.about = "Closes an issue.",
	.positional = "N",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_close(const ev_cli *cli, int argc, char **argv)
{
	const char *pos[1];
	int64_t id;
	int prc = ev_opt_parse(&close_spec, NULL, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!ev_cli_parse_id(pos[0], "issue", &id))
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

static const ev_cmd_spec import_spec = {
	.name = "issue import",
	.synopsis = "github-issues.json [--json]",
	.about = "Imports GitHub's REST issues array (pull requests and issues already imported are skipped;\n"
	         "image links are recorded, never fetched). All or nothing.",
	.opts = ev_json_only_opts,
	.positional = "FILE",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_import(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {cli->json};
	const char *pos[1];
	int prc = ev_opt_parse(&import_spec, &jo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
	const char *path = pos[0];
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
		cJSON *j = ev_cli_text_json(out);
		printf("imported %lld issues (%lld already there, %lld pull requests skipped)\n",
		       (long long)ev_json_num(j, "imported", 0), (long long)ev_json_num(j, "skipped_existing", 0),
		       (long long)ev_json_num(j, "skipped_pull_requests", 0));
		cJSON_Delete(j);
	}
	free(out);
	return 0;
}

typedef struct {
	ev_repro_options r;
	bool json;
} repro_opts;

static const ev_opt repro_opts_table[] = {
	EV_O_STR("--regex", repro_opts, r.regex, "PATTERN", "the case passes when the answer matches"),
	EV_O_STR("--target", repro_opts, r.target, "TEXT", "the case passes when the answer includes it"),
	EV_O_STR("--suite-dir", repro_opts, r.suite_dir, "DIR", "the community suite (default: beside the tracker)"),
	EV_O_FLAG("--json", repro_opts, json, "as JSON"),
	EV_O_END,
};

static const ev_cmd_spec repro_spec = {
	.name = "issue repro",
	.synopsis = "N [--regex P | --target T] [--suite-dir DIR] [--json]",
	.about = "Turns a report into a case of the community suite, so that every later checkpoint is\n"
	         "checked against it.",
	.opts = repro_opts_table,
	.positional = "N",
	.min_pos = 1,
	.max_pos = 1,
};

static int cmd_repro(const ev_cli *cli, int argc, char **argv)
{
	repro_opts ro = {.r = EV_REPRO_OPTIONS_INIT, .json = cli->json};
	const char *pos[1];
	int prc = ev_opt_parse(&repro_spec, &ro, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	ev_repro_options opt = ro.r;
	bool json = ro.json;
	int64_t id;
	if (!ev_cli_parse_id(pos[0], "issue", &id))
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
		cJSON *j = ev_cli_text_json(out);
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
	static const ev_subcommand subs[] = {
		{"add", cmd_add, "file a report (title, body, attachments, prompt and answers)"},
		{"list", cmd_list, "list reports"},
		{"show", cmd_show, "one report in full"},
		{"close", cmd_close, "close a report"},
		{"import", cmd_import, "import GitHub's issues JSON"},
		{"repro", cmd_repro, "turn a report into a case of the community suite"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"issue", "Community issue reports in the tracker.", subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
