/*
 * evald suites gen long-context: writes a long-context suite whose samples
 * are fitted to exact lengths in a checkpoint's tokens.
 *
 *   evald suites gen long-context --model PATH [--tokenizer DIR]
 *       [--tasks niah,multikey,multivalue,multiquery,vt,cwe,agent]
 *       [--lengths 4k,32k,128k,1m] [--depths 0,25,50,75,100]
 *       [--samples N] [--seed S] [--name NAME] [--template chatml|llama3|none]
 *       -o DIR [--json]
 *
 * The tokenizer is the checkpoint's tokenizer.json (--tokenizer overrides
 * the folder); the chat template family comes from its
 * tokenizer_config.json, so a sample's length is the length of the prompt
 * the model will see. With no recognisable template (or --template none)
 * the length is that of the message texts alone.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "evald/cli.h"

#define MAX_LIST 64

typedef struct {
	const char *model, *tokdir, *out, *name, *tmpl, *tasks, *lengths, *depths;
	int samples;
	int64_t seed;
	bool json;
} gen_opts;

#define T gen_opts
static const ev_opt gen_opts_table[] = {
	EV_O_STR("--model", T, model, "PATH", "the checkpoint (a folder or a GGUF file) whose tokens measure the lengths"),
	EV_O_STR("--tokenizer", T, tokdir, "DIR", "a folder with tokenizer.json instead of --model's"),
	{.name = "--out", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(T, out), .meta = "DIR",
	 .help = "the suite folder to write (required)"},
	EV_O_STR("--tasks", T, tasks, "LIST", "niah,multikey,multivalue,multiquery,vt,cwe,agent (default all)"),
	EV_O_STR("--lengths", T, lengths, "LIST", "prompt lengths in tokens (default 4k)"),
	EV_O_STR("--depths", T, depths, "LIST", "needle depths in percent (default 0,25,50,75,100)"),
	EV_O_INT("--samples", T, samples, 1, EV_LONGCTX_MAX_SAMPLES, "N", "samples per task, length and depth"),
	EV_O_INT("--seed", T, seed, 0, 9e15, "S", "generator seed"),
	EV_O_STR("--name", T, name, "NAME", "the suite's name"),
	EV_O_CHOICE("--template", T, tmpl, "chatml|llama3|none", "the chat template lengths count (default: the checkpoint's)"),
	EV_O_FLAG("--json", T, json, "print {\"dir\",\"template\",\"seconds\"}"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec gen_spec = {
	.name = "suites gen long-context",
	.synopsis = "--model PATH -o DIR [--tasks LIST] [--lengths LIST] [--depths LIST] [OPTIONS]",
	.about = "Writes a long-context suite whose samples are fitted to exact lengths in a checkpoint's\n"
	         "tokens, chat template included (RULER-style tasks and an agent-trace task).",
	.opts = gen_opts_table,
};

typedef struct {
	eng_tokenizer *tok;
	eng_chat_family family;
} tok_ctx;

static int count_cb(void *ctx, const char *text, size_t len, size_t *out)
{
	const tok_ctx *t = ctx;
	int32_t *ids = NULL;
	size_t n = 0;
	/* The rendered prompt carries the template's special tokens as text. */
	int rc = eng_tokenize(t->tok, text, len, true, &ids, &n);
	free(ids);
	*out = n;
	return rc;
}

static int render_cb(void *ctx, const ev_token_msg *msgs, size_t n, const char *tools, char **out, size_t *len)
{
	const tok_ctx *t = ctx;
	eng_chat_msg *m = calloc(n + 1, sizeof *m);
	if (!m)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		m[i].role = msgs[i].role;
		m[i].content = msgs[i].content;
		m[i].tool_calls_json = msgs[i].tool_calls_json;
		m[i].tool_call_id = msgs[i].tool_call_id;
		m[i].name = msgs[i].name;
	}
	int rc = eng_chat_render(out, len, t->family, m, n, tools, true);
	free(m);
	return rc;
}

/* The generator's options from the command line's (0, or an exit code). */
static int longctx_options(ev_longctx_options *o, const gen_opts *g, char *tasks_buf, const char **tasks,
                           size_t *lens, int *depths)
{
	if (g->tasks) {
		snprintf(tasks_buf, 1024, "%s", g->tasks);
		for (char *save = NULL, *p = strtok_r(tasks_buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
			if (o->n_tasks == MAX_LIST || !ev_longctx_task_known(p)) {
				fprintf(stderr, "evald suites gen long-context: --tasks: unknown task \"%s\"\n", p);
				return EV_EXIT_USAGE;
			}
			tasks[o->n_tasks++] = p;
		}
		o->tasks = tasks;
	}
	int n;
	if (g->lengths) {
		if ((n = ev_cli_parse_lengths(lens, MAX_LIST, g->lengths, "--lengths")) < 0)
			return ev_cli_fail("suites gen long-context"), EV_EXIT_USAGE;
		o->lengths = lens;
		o->n_lengths = (size_t)n;
	}
	if (g->depths) {
		if ((n = ev_cli_parse_depths(depths, MAX_LIST, g->depths, "--depths")) < 0)
			return ev_cli_fail("suites gen long-context"), EV_EXIT_USAGE;
		o->depths = depths;
		o->n_depths = (size_t)n;
	}
	o->samples = g->samples;
	o->seed = (uint64_t)g->seed;
	return 0;
}

static int gen_longctx(const ev_cli *cli, int argc, char **argv)
{
	gen_opts g = {.samples = 1, .json = cli->json};
	int prc = ev_opt_parse(&gen_spec, &g, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if ((!g.model && !g.tokdir) || !g.out) {
		fprintf(stderr, "evald suites gen long-context: --model (or --tokenizer) and -o DIR are required\n");
		ev_opt_usage(&gen_spec, stderr);
		return EV_EXIT_USAGE;
	}
	const char *model = g.model, *tokdir = g.tokdir, *out = g.out, *name = g.name, *tmpl = g.tmpl;
	bool json = g.json;
	ev_longctx_options o = EV_LONGCTX_OPTIONS_INIT;
	char tasks_buf[1024];
	const char *tasks[MAX_LIST];
	size_t lens[MAX_LIST];
	int depths[MAX_LIST];
	int rc = longctx_options(&o, &g, tasks_buf, tasks, lens, depths);
	if (rc)
		return rc;
	o.name = name;
	o.quiet = cli->quiet || json;

	char *model_dir = NULL; /* a GGUF file: its converted folder */
	if (model && eng_model_path_resolve(model, &model_dir))
		return ev_cli_fail("suites gen long-context");
	tok_ctx t = {NULL, ENG_CHAT_UNKNOWN};
	const char *dir = tokdir ? tokdir : model_dir, *shown = tokdir ? tokdir : model; /* read; named */
	if ((rc = eng_tokenizer_load(&t.tok, dir))) {
		free(model_dir);
		return ev_cli_fail("tokenizer");
	}
	if (tmpl && strcmp(tmpl, "none")) {
		t.family = eng_chat_family_from_name(tmpl);
		if (t.family == ENG_CHAT_UNKNOWN) {
			eng_tokenizer_free(t.tok);
			free(model_dir);
			fprintf(stderr, "evald: --template: \"%s\" is not chatml, llama3 or none\n", tmpl);
			return EV_EXIT_USAGE;
		}
	} else if (!tmpl && (rc = eng_chat_family_detect(&t.family, dir))) {
		/* A tokenizer without a config is fine: no template then. */
		ev_log_warn("%s: %s; lengths count the message texts only", shown, ev_error_msg());
		t.family = ENG_CHAT_UNKNOWN;
	}
	if (!tmpl && t.family == ENG_CHAT_UNKNOWN)
		ev_log_warn("%s: no known chat template; lengths count the message texts only", shown);
	ev_token_counter tc = {count_cb, t.family != ENG_CHAT_UNKNOWN ? render_cb : NULL, &t};
	/* A length past the model's context makes samples it cannot read (they
	 * score 0 as context_overflow): say so now, not after the run. */
	if (model) {
		eng_config cfg;
		if (eng_config_load(&cfg, model_dir) == 0) {
			for (size_t i = 0; i < o.n_lengths; i++)
				if ((long)o.lengths[i] > cfg.max_position)
					ev_log_warn("--lengths: %zu tokens pass %s's context of %ld tokens (max_position_embeddings): "
					            "those samples will score 0 as context_overflow",
					            o.lengths[i], model, cfg.max_position);
			eng_config_clear(&cfg);
		}
		ev_error_clear();
	}
	double t0 = ev_now();
	rc = ev_gen_longctx(&o, &tc, out);
	double secs = ev_now() - t0;
	eng_tokenizer_free(t.tok);
	free(model_dir);
	if (rc)
		return ev_cli_fail("suites gen long-context");
	if (json) {
		printf("{\"dir\":");
		ev_buf b = EV_BUF_INIT(1 << 16);
		if (!ev_json_buf_str(&b, out))
			printf("%s", b.data);
		ev_buf_free(&b);
		printf(",\"template\":\"%s\",\"seconds\":%.3f}\n",
		       t.family != ENG_CHAT_UNKNOWN ? eng_chat_family_name(t.family) : "none", secs);
	} else if (!cli->quiet) {
		printf("wrote %s (%.2f s, template %s)\n", out, secs,
		       t.family != ENG_CHAT_UNKNOWN ? eng_chat_family_name(t.family) : "none");
	}
	return 0;
}

int ev_cmd_suites_gen_longctx(const ev_cli *cli, int argc, char **argv) { return gen_longctx(cli, argc, argv); }
