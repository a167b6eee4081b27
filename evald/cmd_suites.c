/*
 * evald suites validate PATH [--json]: loads a suite (folder, archive or
 * .jsonl) with every check `run` applies, builds its checker, and prints
 * what it holds, or the first error with file:line and field.
 * --json: {"name","version","kind","hash","n","checker","valid":true}
 *
 * evald suites list [--json]: the bundled suites (suites/data).
 * evald suites import humaneval|mbpp|bfcl ...: see the importers.
 * evald suites gen long-context ...: evald/cmd_gen.c.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "evald/cli.h"

static int validate(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!path)
			path = argv[i];
		else {
			fprintf(stderr, "usage: evald suites validate PATH [--json]\n");
			return EV_EXIT_USAGE;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: evald suites validate PATH [--json]\n");
		return EV_EXIT_USAGE;
	}
	ev_suite *s = NULL;
	ev_checker *c = NULL;
	int rc = ev_suite_load(&s, path, NULL);
	if (!rc && s->n_samples == 0)
		rc = ev_error_set(EV_E_INVALID, "%s: the suite has no samples", path);
	if (!rc)
		rc = ev_checker_new(&c, s->checker_json ? s->checker_json : "{\"type\":\"includes\"}");
	if (rc) {
		if (json) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddFalseToObject(o, "valid");
			cJSON_AddStringToObject(o, "error", ev_error_msg());
			char *t = ev_json_print(o);
			printf("%s\n", t);
			free(t);
			cJSON_Delete(o);
		}
		ev_cli_fail(NULL);
		ev_suite_free(s);
		return EV_EXIT_FAIL;
	}
	if (json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddTrueToObject(o, "valid");
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddStringToObject(o, "version", s->version ? s->version : "");
		cJSON_AddStringToObject(o, "kind", s->kind ? s->kind : "");
		cJSON_AddStringToObject(o, "hash", s->content_hash ? s->content_hash : "");
		cJSON_AddNumberToObject(o, "n", (double)s->n_samples);
		cJSON_AddNumberToObject(o, "epochs", s->gen.epochs);
		cJSON *spec = cJSON_Parse(ev_checker_spec(c));
		cJSON_AddItemToObject(o, "checker", spec ? spec : cJSON_CreateNull());
		char *t = ev_json_print(o);
		printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
	} else {
		printf("%s: valid\n  name     %s\n  version  %s\n  kind     %s\n  samples  %zu\n  checker  %s\n  sha256   %s\n",
		       path, s->name, s->version ? s->version : "-", s->kind ? s->kind : "-", s->n_samples,
		       ev_checker_spec(c), s->content_hash ? s->content_hash : "-");
	}
	ev_checker_free(c);
	ev_suite_free(s);
	return 0;
}

/* The bundled suites: suites/data in the source tree, or EVALD_DATA_DIR. */
static char *data_dir(void)
{
	const char *env = getenv("EVALD_DATA_DIR");
	if (env)
		return ev_strdup(env);
	return ev_strdup(EVALD_SOURCE_DIR "/suites/data");
}

static int list(const ev_cli *cli, int argc, char **argv)
{
	bool json = cli->json;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--json"))
			json = true;
	char *dir = data_dir();
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d) {
		ev_error_set(EV_E_NOTFOUND, "%s: no bundled suites there (set EVALD_DATA_DIR)", dir ? dir : "?");
		free(dir);
		return ev_cli_fail("suites list");
	}
	char *names[256];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 256)
		if (e->d_name[0] != '.')
			names[n++] = ev_strdup(e->d_name);
	closedir(d);
	qsort(names, (size_t)n, sizeof *names, (int (*)(const void *, const void *))strcmp);
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		char *p = ev_asprintf("%s/%s", dir, names[i]);
		struct stat st;
		ev_suite *s = NULL;
		if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && ev_suite_load(&s, p, NULL) == 0) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "name", s->name);
			cJSON_AddStringToObject(o, "kind", s->kind ? s->kind : "");
			cJSON_AddNumberToObject(o, "n", (double)s->n_samples);
			cJSON_AddStringToObject(o, "path", p);
			cJSON_AddItemToArray(arr, o);
		} else if (p && S_ISDIR(st.st_mode)) {
			ev_log_warn("%s: %s", p, ev_error_msg());
		}
		ev_suite_free(s);
		free(p);
		free(names[i]);
	}
	free(dir);
	if (json) {
		cJSON *root = cJSON_CreateObject();
		cJSON_AddItemToObject(root, "suites", arr);
		char *t = ev_json_print(root);
		printf("%s\n", t);
		free(t);
		cJSON_Delete(root);
	} else {
		const cJSON *o;
		printf("%-24s %-14s %6s  %s\n", "name", "kind", "n", "path");
		cJSON_ArrayForEach(o, arr)
			printf("%-24s %-14s %6.0f  %s\n", ev_json_str(o, "name", ""), ev_json_str(o, "kind", ""),
			       ev_json_num(o, "n", 0), ev_json_str(o, "path", ""));
		cJSON_Delete(arr);
	}
	return 0;
}

/* Loads a suite just written (it must load as any suite does) and says
 * what it holds. */
static int report_written(const ev_cli *cli, const char *dir, const char *what)
{
	ev_suite *s = NULL;
	if (ev_suite_load(&s, dir, NULL))
		return ev_cli_fail(dir);
	if (cli->json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddNumberToObject(o, "n", (double)s->n_samples);
		cJSON_AddStringToObject(o, "path", dir);
		char *t = ev_json_print(o);
		printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
	} else {
		printf("%s: %zu %s written to %s\n", s->name, s->n_samples, what, dir);
	}
	ev_suite_free(s);
	return 0;
}

/* evald suites import humaneval FILE -o DIR | mbpp FILE -o DIR |
 *                      bfcl FILE [--answers FILE] -o DIR */
static int import(const ev_cli *cli, int argc, char **argv)
{
	const char *kind = argc >= 2 ? argv[1] : NULL, *in = NULL, *out = NULL, *answers = NULL;
	for (int i = 2; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--answers") && i + 1 < argc)
			answers = argv[++i];
		else if (argv[i][0] != '-' && !in)
			in = argv[i];
		else
			in = NULL, i = argc;
	}
	if (!kind || !in || !out || (answers && strcmp(kind, "bfcl"))) {
		fprintf(stderr, "usage: evald suites import humaneval HumanEval.jsonl.gz -o DIR\n"
		                "       evald suites import mbpp mbpp.jsonl -o DIR\n"
		                "       evald suites import bfcl BFCL_v3_simple.json [--answers possible_answer/BFCL_v3_simple.json] -o DIR\n");
		return EV_EXIT_USAGE;
	}
	int rc;
	if (!strcmp(kind, "humaneval"))
		rc = ev_import_humaneval(in, out);
	else if (!strcmp(kind, "mbpp"))
		rc = ev_import_mbpp(in, out);
	else if (!strcmp(kind, "bfcl"))
		rc = ev_import_bfcl(in, answers, out);
	else {
		fprintf(stderr, "evald suites import: unknown kind '%s' (humaneval, mbpp, bfcl)\n", kind);
		return EV_EXIT_USAGE;
	}
	if (rc)
		return ev_cli_fail("import");
	return report_written(cli, out, "samples");
}

/* evald suites gen recall -o DIR [--lengths 1k,4k] [--depths 0,50,100]
 *     [--samples N] [--distractors N] [--seed S]: the recall checkpoint's
 * own suite (engine/mkrecall.c), in its vocabulary. */
/* The recall checkpoint's prompts come from the engine, which knows its
 * vocabulary; the suite around them from suites/. */
static int make_recall(void *ctx, char **text, char answer[16], long length, int depth, int distractors,
                       uint64_t seed)
{
	(void)ctx;
	return eng_recall_text(text, answer, length, depth, distractors, seed);
}

static int gen_recall(const ev_cli *cli, int argc, char **argv)
{
	const char *out = NULL, *lens = "1k,4k", *deps = "0,25,50,75,100";
	int64_t samples = 2, distractors = 0, seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t *num = !strcmp(a, "--samples") ? &samples : !strcmp(a, "--distractors") ? &distractors
		               : !strcmp(a, "--seed")  ? &seed : NULL;
		if (!v)
			num = NULL, a = "";
		if ((!strcmp(a, "-o") || !strcmp(a, "--out")))
			out = argv[++i];
		else if (!strcmp(a, "--lengths"))
			lens = argv[++i];
		else if (!strcmp(a, "--depths"))
			deps = argv[++i];
		else if (num && ev_parse_i64(v, num) && *num >= 0 && *num <= 1000000)
			i++;
		else {
			fprintf(stderr, "usage: evald suites gen recall -o DIR [--lengths 1k,4k] [--depths 0,50,100]\n"
			                "                                [--samples N] [--distractors N] [--seed S]\n");
			return EV_EXIT_USAGE;
		}
	}
	long lengths[32];
	int depths[32], nl = 0, nd = 0;
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", lens);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t n;
		if (nl == 32 || ev_longctx_parse_length(&n, t)) {
			fprintf(stderr, "evald suites gen recall: --lengths: '%s' is not a length (4k, 32k, 1m, 2000)\n", t);
			return EV_EXIT_USAGE;
		}
		lengths[nl++] = (long)n;
	}
	snprintf(buf, sizeof buf, "%s", deps);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int64_t d;
		if (nd == 32 || !ev_parse_i64(t, &d) || d < 0 || d > 100) {
			fprintf(stderr, "evald suites gen recall: --depths: '%s' is not a percentage\n", t);
			return EV_EXIT_USAGE;
		}
		depths[nd++] = (int)d;
	}
	if (!out || !nl || !nd || samples < 1) {
		fprintf(stderr, "evald suites gen recall: -o DIR, --lengths, --depths and --samples >= 1 are needed\n");
		return EV_EXIT_USAGE;
	}
	ev_recall_options ro = {.lengths = lengths, .nlengths = nl, .depths = depths, .ndepths = nd,
	                        .samples = (int)samples, .distractors = (int)distractors, .seed = (uint64_t)seed};
	if (ev_gen_recall(&ro, make_recall, NULL, out))
		return ev_cli_fail("gen recall");
	return report_written(cli, out, "recall samples");
}

int ev_cmd_suites(const ev_cli *cli, int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "gen") && !strcmp(argv[2], "recall"))
		return gen_recall(cli, argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "import"))
		return import(cli, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "gen"))
		return ev_cmd_suites_gen(cli, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "validate"))
		return validate(cli, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "list"))
		return list(cli, argc - 1, argv + 1);
	fprintf(stderr, "usage: evald suites validate PATH [--json]\n"
	                "       evald suites list [--json]\n"
	                "       evald suites import humaneval|mbpp|bfcl FILE [--answers FILE] -o DIR\n"
	                "       evald suites gen long-context --model DIR --tasks ... --lengths ... -o DIR\n"
	                "       evald suites gen recall -o DIR [--lengths 1k,4k] [--depths ...] [--samples N]\n");
	return EV_EXIT_USAGE;
}
