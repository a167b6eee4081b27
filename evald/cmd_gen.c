/*
 * evald suites gen long-context: writes a long-context suite whose samples
 * are fitted to exact lengths in a checkpoint's tokens.
 *
 *   evald suites gen long-context --model DIR [--tokenizer DIR]
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

#include "engine/tokenizer/tokenizer.h"
#include "evald/cli.h"

#define MAX_LIST 64

static const char USAGE[] =
	"usage: evald suites gen long-context --model DIR [--tokenizer DIR] -o DIR\n"
	"         [--tasks niah,multikey,multivalue,multiquery,vt,cwe,agent] [--lengths 4k,32k,128k,1m]\n"
	"         [--depths 0,25,50,75,100] [--samples N] [--seed S] [--name NAME]\n"
	"         [--template chatml|llama3|none] [--json]\n";

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

/* Splits a comma list in place into at most MAX_LIST items. */
static int split(char *s, char **items, size_t *n, const char *flag)
{
	*n = 0;
	for (char *save = NULL, *p = strtok_r(s, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_LIST)
			return ev_error_set(EV_E_LIMIT, "%s: more than %d items", flag, MAX_LIST);
		items[(*n)++] = p;
	}
	if (!*n)
		return ev_error_set(EV_E_INVALID, "%s: empty list", flag);
	return 0;
}

static int gen_longctx(const ev_cli *cli, int argc, char **argv)
{
	const char *model = NULL, *tokdir = NULL, *out = NULL, *name = NULL, *tmpl = NULL;
	char *tasks_s = NULL, *lens_s = NULL, *depths_s = NULL;
	const char *samples_s = "1", *seed_s = "0";
	bool json = cli->json;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "evald: %s: needs a value\n%s", a, USAGE);
			return EV_EXIT_USAGE;
		}
		if (!strcmp(a, "--model"))
			model = v;
		else if (!strcmp(a, "--tokenizer"))
			tokdir = v;
		else if (!strcmp(a, "-o") || !strcmp(a, "--out"))
			out = v;
		else if (!strcmp(a, "--tasks"))
			tasks_s = argv[i + 1];
		else if (!strcmp(a, "--lengths"))
			lens_s = argv[i + 1];
		else if (!strcmp(a, "--depths"))
			depths_s = argv[i + 1];
		else if (!strcmp(a, "--samples"))
			samples_s = v;
		else if (!strcmp(a, "--seed"))
			seed_s = v;
		else if (!strcmp(a, "--name"))
			name = v;
		else if (!strcmp(a, "--template"))
			tmpl = v;
		else {
			fprintf(stderr, "evald: unknown option %s\n%s", a, USAGE);
			return EV_EXIT_USAGE;
		}
		i++;
	}
	if ((!model && !tokdir) || !out) {
		fprintf(stderr, "%s", USAGE);
		return EV_EXIT_USAGE;
	}
	ev_longctx_options o = EV_LONGCTX_OPTIONS_INIT;
	char *tasks[MAX_LIST], *lens_txt[MAX_LIST], *depth_txt[MAX_LIST];
	size_t lens[MAX_LIST];
	int depths[MAX_LIST];
	size_t n = 0;
	int64_t v = 0;
	int rc = 0;
	if (tasks_s) {
		if (split(tasks_s, tasks, &o.n_tasks, "--tasks"))
			{
			ev_cli_fail(NULL);
			return EV_EXIT_USAGE;
		}
		for (size_t i = 0; i < o.n_tasks; i++)
			if (!ev_longctx_task_known(tasks[i])) {
				fprintf(stderr, "evald: --tasks: unknown task \"%s\"\n%s", tasks[i], USAGE);
				return EV_EXIT_USAGE;
			}
		o.tasks = (const char *const *)tasks;
	}
	if (lens_s) {
		if (split(lens_s, lens_txt, &n, "--lengths"))
			{
			ev_cli_fail(NULL);
			return EV_EXIT_USAGE;
		}
		for (size_t i = 0; i < n; i++)
			if (ev_longctx_parse_length(&lens[i], lens_txt[i])) {
				ev_cli_fail("--lengths");
				return EV_EXIT_USAGE;
			}
		o.lengths = lens;
		o.n_lengths = n;
	}
	if (depths_s) {
		if (split(depths_s, depth_txt, &n, "--depths"))
			{
			ev_cli_fail(NULL);
			return EV_EXIT_USAGE;
		}
		for (size_t i = 0; i < n; i++) {
			if (!ev_parse_i64(depth_txt[i], &v) || v < 0 || v > 100) {
				fprintf(stderr, "evald: --depths: \"%s\" is not a percent 0..100\n", depth_txt[i]);
				return EV_EXIT_USAGE;
			}
			depths[i] = (int)v;
		}
		o.depths = depths;
		o.n_depths = n;
	}
	if (!ev_parse_i64(samples_s, &v) || v < 1 || v > EV_LONGCTX_MAX_SAMPLES) {
		fprintf(stderr, "evald: --samples: \"%s\" is not a count 1..%d\n", samples_s, EV_LONGCTX_MAX_SAMPLES);
		return EV_EXIT_USAGE;
	}
	o.samples = (int)v;
	if (!ev_parse_i64(seed_s, &v) || v < 0) {
		fprintf(stderr, "evald: --seed: \"%s\" is not a non-negative integer\n", seed_s);
		return EV_EXIT_USAGE;
	}
	o.seed = (uint64_t)v;
	o.name = name;
	o.quiet = cli->quiet || json;

	tok_ctx t = {NULL, ENG_CHAT_UNKNOWN};
	const char *dir = tokdir ? tokdir : model;
	if ((rc = eng_tokenizer_load(&t.tok, dir)))
		return ev_cli_fail("tokenizer");
	if (tmpl && strcmp(tmpl, "none")) {
		t.family = eng_chat_family_from_name(tmpl);
		if (t.family == ENG_CHAT_UNKNOWN) {
			eng_tokenizer_free(t.tok);
			fprintf(stderr, "evald: --template: \"%s\" is not chatml, llama3 or none\n", tmpl);
			return EV_EXIT_USAGE;
		}
	} else if (!tmpl && (rc = eng_chat_family_detect(&t.family, dir))) {
		/* A tokenizer without a config is fine: no template then. */
		ev_log_warn("%s: %s; lengths count the message texts only", dir, ev_error_msg());
		t.family = ENG_CHAT_UNKNOWN;
	}
	if (!tmpl && t.family == ENG_CHAT_UNKNOWN)
		ev_log_warn("%s: no known chat template; lengths count the message texts only", dir);
	ev_token_counter tc = {count_cb, t.family != ENG_CHAT_UNKNOWN ? render_cb : NULL, &t};
	double t0 = ev_now();
	rc = ev_gen_longctx(&o, &tc, out);
	double secs = ev_now() - t0;
	eng_tokenizer_free(t.tok);
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

int ev_cmd_suites_gen(const ev_cli *cli, int argc, char **argv)
{
	/* Called with argv[0] = "gen" (from `suites`) or the generator name. */
	if (argc > 0 && !strcmp(argv[0], "gen")) {
		argc--;
		argv++;
	}
	if (argc < 1 || strcmp(argv[0], "long-context")) {
		fprintf(stderr, "%s", USAGE);
		return EV_EXIT_USAGE;
	}
	return gen_longctx(cli, argc, argv);
}
