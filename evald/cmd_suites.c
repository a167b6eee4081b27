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

static const ev_cmd_spec validate_spec = {
	.name = "suites validate",
	.synopsis = "PATH [--json]",
	.about = "Loads a suite (folder, archive or .jsonl) with every check `run` applies, builds its\n"
	         "checker, and prints what it holds, or the first error with file:line and field.",
	.opts = ev_json_only_opts,
	.positional = "PATH",
	.min_pos = 1,
	.max_pos = 1,
};

static int validate(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {cli->json};
	const char *pos[1];
	int prc = ev_opt_parse(&validate_spec, &jo, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
	const char *path = pos[0];
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
static char *data_dir(void) { return ev_cli_data_dir(); }

static const ev_cmd_spec list_spec = {
	.name = "suites list",
	.synopsis = "[--json]",
	.about = "Lists the bundled suites (suites/data): name, kind, samples.",
	.opts = ev_json_only_opts,
};

static int list(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {cli->json};
	int prc = ev_opt_parse(&list_spec, &jo, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	bool json = jo.json;
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

typedef struct {
	const char *out, *answers;
	bool circular;
} import_opts;

static const ev_opt import_opts_table[] = {
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(import_opts, out), .meta = "DIR",
	 .help = "the suite folder to write (required)"},
	EV_O_END,
};

static const ev_opt import_bfcl_opts[] = {
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(import_opts, out), .meta = "DIR",
	 .help = "the suite folder to write (required)"},
	EV_O_STR("--answers", import_opts, answers, "FILE", "BFCL's possible_answer file for the category"),
	EV_O_END,
};

static const ev_opt import_mm_opts[] = {
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(import_opts, out), .meta = "DIR",
	 .help = "the suite folder to write (required; its images/ replaced)"},
	EV_O_FLAG("--circular", import_opts, circular,
	          "a sample per rotation of each question's options; right only when every rotation is"),
	EV_O_END,
};

static const ev_cmd_spec import_specs[] = {
	{.name = "suites import humaneval", .synopsis = "HumanEval.jsonl[.gz] -o DIR",
	 .about = "Imports HumanEval as published (task_id, prompt, entry_point, canonical_solution, test).",
	 .opts = import_opts_table, .positional = "FILE", .min_pos = 1, .max_pos = 1},
	{.name = "suites import mbpp", .synopsis = "mbpp.jsonl -o DIR",
	 .about = "Imports MBPP as published (task_id, text, code, test_list).",
	 .opts = import_opts_table, .positional = "FILE", .min_pos = 1, .max_pos = 1},
	{.name = "suites import bfcl", .synopsis = "BFCL_v3_simple.json [--answers possible_answer/BFCL_v3_simple.json] -o DIR",
	 .about = "Imports a BFCL category (questions and functions), with its possible answers.",
	 .opts = import_bfcl_opts, .positional = "FILE", .min_pos = 1, .max_pos = 1},
	{.name = "suites import vlmevalkit", .synopsis = "MMBench_DEV_EN.tsv [--circular] -o DIR",
	 .about = "Imports a VLMEvalKit TSV (index, question, answer, base64 image, hint, options A, B, ...).",
	 .opts = import_mm_opts, .positional = "FILE", .min_pos = 1, .max_pos = 1},
	{.name = "suites import lmms", .synopsis = "questions.jsonl [--circular] -o DIR",
	 .about = "Imports lmms-eval-style JSON Lines (id, question, answer, options, images as paths or base64).",
	 .opts = import_mm_opts, .positional = "FILE", .min_pos = 1, .max_pos = 1},
};

static int import_one(const ev_cli *cli, int argc, char **argv, int which)
{
	import_opts io = {0};
	const char *pos[1];
	int prc = ev_opt_parse(&import_specs[which], &io, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!io.out) {
		fprintf(stderr, "evald %s: -o DIR is required\n", import_specs[which].name);
		return EV_EXIT_USAGE;
	}
	int rc = which == 0   ? ev_import_humaneval(pos[0], io.out)
	         : which == 1 ? ev_import_mbpp(pos[0], io.out)
	         : which == 2 ? ev_import_bfcl(pos[0], io.answers, io.out)
	         : which == 3 ? ev_import_vlmevalkit(pos[0], io.out, io.circular)
	                      : ev_import_lmms(pos[0], io.out, io.circular);
	if (rc)
		return ev_cli_fail("import");
	return report_written(cli, io.out, "samples");
}

static int import_humaneval(const ev_cli *cli, int argc, char **argv) { return import_one(cli, argc, argv, 0); }
static int import_mbpp(const ev_cli *cli, int argc, char **argv) { return import_one(cli, argc, argv, 1); }
static int import_bfcl(const ev_cli *cli, int argc, char **argv) { return import_one(cli, argc, argv, 2); }
static int import_vlmevalkit(const ev_cli *cli, int argc, char **argv) { return import_one(cli, argc, argv, 3); }
static int import_lmms(const ev_cli *cli, int argc, char **argv) { return import_one(cli, argc, argv, 4); }

static int import(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"humaneval", import_humaneval, "HumanEval (code, run against its tests in the sandbox)"},
		{"mbpp", import_mbpp, "MBPP (code, run against its asserts)"},
		{"bfcl", import_bfcl, "a BFCL category (tool calls, checked by BFCL's rules)"},
		{"vlmevalkit", import_vlmevalkit, "a VLMEvalKit TSV (MMBench and kin: images, options; --circular)"},
		{"lmms", import_lmms, "lmms-eval-style JSON Lines with images (--circular)"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"suites import", "Imports a published data set as a suite.", subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
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

typedef struct {
	const char *out, *lengths, *depths;
	int samples, distractors;
	int64_t seed;
} recall_opts;

#define T recall_opts
static const ev_opt recall_opts_table[] = {
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(T, out), .meta = "DIR",
	 .help = "the suite folder to write (required)"},
	EV_O_STR("--lengths", T, lengths, "LIST", "prompt lengths in tokens"),
	EV_O_STR("--depths", T, depths, "LIST", "needle depths in percent"),
	EV_O_INT("--samples", T, samples, 1, 1000000, "N", "samples per length and depth"),
	EV_O_INT("--distractors", T, distractors, 0, 1000000, "N", "other key-value pairs in the haystack"),
	EV_O_INT("--seed", T, seed, 0, 9e15, "S", "generator seed"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec recall_spec = {
	.name = "suites gen recall",
	.synopsis = "-o DIR [--lengths 1k,4k] [--depths 0,50,100] [--samples N] [--distractors N] [--seed S]",
	.about = "Writes the recall checkpoint's own suite (evald engine mkmodel --arch recall), in its\n"
	         "vocabulary: a filler haystack, the needle pair at each depth, the key asked at the end.",
	.opts = recall_opts_table,
};

static int gen_recall(const ev_cli *cli, int argc, char **argv)
{
	recall_opts r = {.lengths = "1k,4k", .depths = "0,25,50,75,100", .samples = 2, .seed = 1};
	int prc = ev_opt_parse(&recall_spec, &r, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	const char *out = r.out;
	size_t lens[32];
	long lengths[32];
	int depths[32], nl, nd;
	if (!out) {
		fprintf(stderr, "evald suites gen recall: -o DIR is required\n");
		return EV_EXIT_USAGE;
	}
	if ((nl = ev_cli_parse_lengths(lens, 32, r.lengths, "--lengths")) < 0 ||
	    (nd = ev_cli_parse_depths(depths, 32, r.depths, "--depths")) < 0)
		return ev_cli_fail("suites gen recall"), EV_EXIT_USAGE;
	for (int i = 0; i < nl; i++)
		lengths[i] = (long)lens[i];
	ev_recall_options ro = {.lengths = lengths, .nlengths = nl, .depths = depths, .ndepths = nd,
	                        .samples = r.samples, .distractors = r.distractors, .seed = (uint64_t)r.seed};
	if (ev_gen_recall(&ro, make_recall, NULL, out))
		return ev_cli_fail("gen recall");
	return report_written(cli, out, "recall samples");
}

/* evald suites gen multimodal -o DIR [--tasks LIST] [--samples N]
 *     [--size PX] [--seed S] [--name NAME]: pictures and videos drawn by
 * evald with exact answers (suites/gen_vision.c). */
typedef struct {
	const char *out, *tasks, *name;
	int samples, size;
	int64_t seed;
} mm_opts;

#define T mm_opts
static const ev_opt mm_opts_table[] = {
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(T, out), .meta = "DIR",
	 .help = "the suite folder to write (required; its images/ and videos/ are replaced)"},
	EV_O_STR("--tasks", T, tasks, "LIST",
	         "count,colour,position,digits,words,chart,compare,video-order,video-count (default all)"),
	EV_O_INT("--samples", T, samples, 1, EV_MULTIMODAL_MAX_SAMPLES, "N", "samples per task (default 4)"),
	EV_O_INT("--size", T, size, 112, 1024, "PX", "side of the square pictures (default 224)"),
	EV_O_INT("--seed", T, seed, 0, 9e15, "S", "generator seed"),
	EV_O_STR("--name", T, name, "NAME", "the suite's name (default multimodal)"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec mm_spec = {
	.name = "suites gen multimodal",
	.synopsis = "-o DIR [--tasks LIST] [--samples N] [--size PX] [--seed S] [--name NAME]",
	.about = "Writes a multimodal suite of pictures and videos drawn by evald (shapes to count, colours,\n"
	         "positions, digits, words, a bar chart, two images to compare, the order of events and\n"
	         "counting across frames), each answer exact and checked without a judge.",
	.opts = mm_opts_table,
};

static int gen_multimodal(const ev_cli *cli, int argc, char **argv)
{
	mm_opts m = {.samples = 4, .size = 224, .seed = 1};
	int prc = ev_opt_parse(&mm_spec, &m, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!m.out) {
		fprintf(stderr, "evald suites gen multimodal: -o DIR is required\n");
		return EV_EXIT_USAGE;
	}
	char buf[1024];
	const char *tasks[16];
	size_t nt = 0;
	if (m.tasks) {
		snprintf(buf, sizeof buf, "%s", m.tasks);
		for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
			if (nt == 16 || !ev_gen_multimodal_task_known(p)) {
				fprintf(stderr, "evald suites gen multimodal: --tasks: unknown task \"%s\"\n", p);
				return EV_EXIT_USAGE;
			}
			tasks[nt++] = p;
		}
	}
	ev_multimodal_options o = {.tasks = nt ? tasks : NULL, .n_tasks = nt, .samples = m.samples, .side = m.size,
	                           .seed = (uint64_t)m.seed, .name = m.name};
	if (ev_gen_multimodal(&o, m.out))
		return ev_cli_fail("suites gen multimodal");
	return report_written(cli, m.out, "samples");
}

static int gen(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"long-context", ev_cmd_suites_gen_longctx, "RULER-style tasks fitted to a checkpoint's tokens"},
		{"recall", gen_recall, "the recall checkpoint's own suite"},
		{"multimodal", gen_multimodal, "pictures and videos drawn by evald, with exact answers"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"suites gen", "Generates a suite.", subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}

int ev_cmd_suites(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"validate", validate, "load a suite with every check and say what it holds"},
		{"list", list, "the bundled suites"},
		{"import", import, "import HumanEval, MBPP or BFCL as published"},
		{"gen", gen, "generate a long-context, recall or multimodal suite"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"suites", "Suites: validate, list, import and generate.", subs, NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
