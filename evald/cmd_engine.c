/*
 * evald engine: the bundled inference engine from the command line.
 *   info      what a checkpoint is: sizes, parameters, memory
 *   logits    the logits of a token list (JSON), fast or reference path
 *   generate  sample a continuation of a prompt (text or token ids)
 *   mkmodel   write a random-weight checkpoint for tests and benchmarks
 *   bench     prefill and decode speed (evald/bench_engine.c)
 *   bench-attention  dense vs MSA by context length (evald/bench_attention.c)
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "base/base.h"
#include "evald/commands.h"

#define MAX_TOKENS_ARG 1000000

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);    /* bench_engine.c */
int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv); /* bench_attention.c */

static int usage(FILE *to, int rc)
{
	fprintf(to,
		"usage: evald engine info --model DIR [--json] [--context N]\n"
		"       evald engine logits --model DIR --tokens 1,2,3 [--json] [--reference] [--last]\n"
		"       evald engine generate --model DIR (--prompt TEXT | --prompt-tokens 1,2,3) [--chat]\n"
		"              [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--min-p P]\n"
		"              [--repetition-penalty R] [--seed S] [--print-tokens] [--reference] [--json]\n"
		"       evald engine mkmodel --arch llama|mistral|qwen2|qwen3|mixtral|qwen3_moe|recall --out DIR\n"
		"              [--hidden N --layers N --heads N --kv-heads N --head-dim N --intermediate N\n"
		"               --vocab N --experts N --top-k N --max-position N] [--dtype f32|f16|bf16] [--seed S]\n"
		"       evald engine bench --model DIR [--prompt N] [--decode N] [--reference] [--json]\n"
		"       evald engine bench-attention --model DIR [--lengths 4k,32k,128k,1m] [--json] (= evald bench attention)\n"
		"common: [--threads N]\n"
		"logits, generate: %s",
		eng_options_usage());
	return rc;
}

typedef struct {
	const char *model, *tokens, *prompt, *prompt_tokens, *arch, *out, *dtype;
	bool json, reference, chat, print_tokens, last;
	long context, threads;
	eng_mkmodel_sizes sizes;
	eng_generate_options gen;
	uint64_t seed;
	eng_model_options mo; /* attention and KV flags (eng_options_parse_flag) */
} opts;

static int need_long(const char *flag, const char *v, long lo, long hi, long *out)
{
	int64_t x;
	if (!v || !ev_parse_i64(v, &x) || x < lo || x > hi) {
		fprintf(stderr, "evald engine: %s needs an integer in [%ld, %ld]\n", flag, lo, hi);
		return -1;
	}
	*out = (long)x;
	return 0;
}

static int need_double(const char *flag, const char *v, double lo, double hi, double *out)
{
	double x;
	if (!v || !ev_parse_f64(v, &x) || !(x >= lo && x <= hi)) {
		fprintf(stderr, "evald engine: %s needs a number in [%g, %g]\n", flag, lo, hi);
		return -1;
	}
	*out = x;
	return 0;
}

static int parse_opts(opts *o, int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		long n = 0;
		double d = 0;
		int *size = NULL;
		long lo = 1, hi = 1 << 20;
		int took = eng_options_parse_flag(&o->mo, a, v);
		if (took < 0) {
			fprintf(stderr, "evald engine: %s\n", ev_error_msg());
			return -1;
		}
		if (took) {
			i++;
			continue;
		}
#define TAKE_STR(flag, field)                                                                  \
	if (!strcmp(a, flag)) {                                                                \
		if (!v) {                                                                      \
			fprintf(stderr, "evald engine: %s needs a value\n", flag);            \
			return -1;                                                             \
		}                                                                              \
		o->field = v;                                                                  \
		i++;                                                                           \
		continue;                                                                      \
	}
		TAKE_STR("--model", model)
		TAKE_STR("--tokens", tokens)
		TAKE_STR("--prompt", prompt)
		TAKE_STR("--prompt-tokens", prompt_tokens)
		TAKE_STR("--arch", arch)
		TAKE_STR("--out", out)
		TAKE_STR("--dtype", dtype)
#undef TAKE_STR
		if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--reference")) {
			o->reference = true;
		} else if (!strcmp(a, "--chat")) {
			o->chat = true;
		} else if (!strcmp(a, "--print-tokens")) {
			o->print_tokens = true;
		} else if (!strcmp(a, "--last")) {
			o->last = true;
		} else if (!strcmp(a, "--context")) {
			if (need_long(a, v, 1, 1L << 30, &o->context))
				return -1;
			i++;
		} else if (!strcmp(a, "--threads")) {
			if (need_long(a, v, 1, 1024, &o->threads))
				return -1;
			i++;
		} else if (!strcmp(a, "--max-tokens")) {
			if (need_long(a, v, 0, 1 << 24, &n))
				return -1;
			o->gen.max_tokens = (int)n;
			i++;
		} else if (!strcmp(a, "--seed")) {
			if (need_long(a, v, 0, LONG_MAX, &n))
				return -1;
			o->seed = (uint64_t)n;
			o->gen.sample.seed = (uint64_t)n;
			i++;
		} else if (!strcmp(a, "--temperature")) {
			if (need_double(a, v, 0, 100, &d))
				return -1;
			o->gen.sample.temperature = d;
			i++;
		} else if (!strcmp(a, "--top-p")) {
			if (need_double(a, v, 1e-9, 1, &d))
				return -1;
			o->gen.sample.top_p = d;
			i++;
		} else if (!strcmp(a, "--min-p")) {
			if (need_double(a, v, 0, 1, &d))
				return -1;
			o->gen.sample.min_p = d;
			i++;
		} else if (!strcmp(a, "--repetition-penalty")) {
			if (need_double(a, v, 1e-3, 100, &d))
				return -1;
			o->gen.sample.repetition_penalty = d;
			i++;
		} else if (!strcmp(a, "--top-k")) {
			/* sampling top-k for generate, experts per token for mkmodel */
			if (need_long(a, v, 0, 1 << 24, &n))
				return -1;
			o->gen.sample.top_k = (int)n;
			o->sizes.top_k = (int)n;
			i++;
		} else {
			if (!strcmp(a, "--hidden"))
				size = &o->sizes.hidden;
			else if (!strcmp(a, "--layers"))
				size = &o->sizes.layers;
			else if (!strcmp(a, "--heads"))
				size = &o->sizes.heads;
			else if (!strcmp(a, "--kv-heads"))
				size = &o->sizes.kv_heads;
			else if (!strcmp(a, "--head-dim"))
				size = &o->sizes.head_dim;
			else if (!strcmp(a, "--intermediate"))
				size = &o->sizes.intermediate;
			else if (!strcmp(a, "--vocab"))
				size = &o->sizes.vocab;
			else if (!strcmp(a, "--experts"))
				size = &o->sizes.experts;
			else if (!strcmp(a, "--max-position")) {
				if (need_long(a, v, 1, 1L << 30, &o->sizes.max_position))
					return -1;
				i++;
				continue;
			} else {
				fprintf(stderr, "evald engine: unknown option '%s'\n", a);
				return -1;
			}
			if (need_long(a, v, lo, hi, &n))
				return -1;
			*size = (int)n;
			i++;
		}
	}
	return 0;
}

/* "1,2,3" into a malloc'd id array. */
static int parse_ids(int32_t **out, int *n_out, const char *s, const char *flag)
{
	int cap = 16, n = 0;
	int32_t *v = malloc((size_t)cap * sizeof(*v));
	if (!v)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const char *p = s;
	while (*p) {
		char *end;
		long x = strtol(p, &end, 10);
		if (end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
			free(v);
			return ev_error_set(EV_E_INVALID, "%s: expected comma-separated token ids, at '%s'", flag, p);
		}
		if (n == MAX_TOKENS_ARG) {
			free(v);
			return ev_error_set(EV_E_LIMIT, "%s: more than %d ids", flag, MAX_TOKENS_ARG);
		}
		if (n == cap) {
			int32_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof(*nv));
			if (!nv) {
				free(v);
				return ev_error_set(EV_E_NOMEM, "out of memory");
			}
			v = nv;
		}
		v[n++] = (int32_t)x;
		p = *end ? end + 1 : end;
	}
	if (!n) {
		free(v);
		return ev_error_set(EV_E_INVALID, "%s: no token ids", flag);
	}
	*out = v;
	*n_out = n;
	return 0;
}

static int fail(const char *what)
{
	fprintf(stderr, "evald engine %s: %s\n", what, ev_error_msg());
	return EV_EXIT_FAIL;
}

static int load(eng_model **m, const opts *o)
{
	eng_model_options mo = o->mo;
	mo.backend = o->reference ? ENG_BACKEND_REF : ENG_BACKEND_CPU;
	mo.threads = (int)o->threads;
	return eng_model_load(m, o->model, &mo);
}

static int cmd_info(const opts *o)
{
	eng_model *m = NULL;
	if (load(&m, o))
		return fail("info");
	eng_model_info in;
	eng_model_get_info(m, &in);
	long ctx = o->context ? o->context : in.max_context;
	uint64_t need = in.weight_bytes + in.kv_bytes_per_token * (uint64_t)ctx;
	if (o->json) {
		printf("{\"architecture\":\"%s\",\"family\":\"%s\",\"layers\":%d,\"hidden\":%d,\"heads\":%d,"
		       "\"kv_heads\":%d,\"head_dim\":%d,\"intermediate\":%d,\"vocab\":%d,\"experts\":%d,"
		       "\"experts_per_token\":%d,\"moe_layers\":%d,\"max_position\":%ld,\"rope_theta\":%.9g,"
		       "\"tied_embeddings\":%s,\"bos_id\":%d,\"eos_ids\":[",
		       in.architecture, in.family, in.layers, in.hidden, in.heads, in.kv_heads, in.head_dim,
		       in.intermediate, in.vocab, in.experts, in.experts_per_token, in.moe_layers, in.max_position,
		       in.rope_theta, in.tied_embeddings ? "true" : "false", in.bos_id);
		for (int i = 0; i < in.n_eos; i++)
			printf("%s%d", i ? "," : "", in.eos_ids[i]);
		printf("],\"params_total\":%llu,\"params_active\":%llu,\"dtypes\":\"%s\",\"weight_bytes\":%llu,"
		       "\"kv_bytes_per_token\":%llu,\"context\":%ld,\"memory_bytes\":%llu}\n",
		       (unsigned long long)in.params_total, (unsigned long long)in.params_active, in.dtypes,
		       (unsigned long long)in.weight_bytes, (unsigned long long)in.kv_bytes_per_token, ctx,
		       (unsigned long long)need);
	} else {
		printf("architecture      %s (%s)\n", in.architecture, in.family);
		printf("layers            %d\nhidden            %d\nheads             %d (kv %d, head_dim %d)\n",
		       in.layers, in.hidden, in.heads, in.kv_heads, in.head_dim);
		printf("intermediate      %d\nvocab             %d\n", in.intermediate, in.vocab);
		if (in.experts)
			printf("experts           %d, %d per token, %d MoE layers\n", in.experts, in.experts_per_token,
			       in.moe_layers);
		printf("parameters        %.3f M total, %.3f M active per token\n", in.params_total / 1e6,
		       in.params_active / 1e6);
		printf("weights           %s, %.2f MiB\n", in.dtypes, in.weight_bytes / 1048576.0);
		printf("KV cache          %llu bytes per token\n", (unsigned long long)in.kv_bytes_per_token);
		printf("memory at %ld tokens: %.2f MiB\n", ctx, need / 1048576.0);
	}
	eng_model_free(m);
	return 0;
}

static int cmd_logits(const opts *o)
{
	int32_t *ids = NULL;
	int n = 0, rc = EV_EXIT_FAIL;
	eng_model *m = NULL;
	eng_seq *s = NULL;
	float *lg = NULL;
	if (!o->tokens) {
		fprintf(stderr, "evald engine logits: --tokens is required\n");
		return EV_EXIT_USAGE;
	}
	if (parse_ids(&ids, &n, o->tokens, "--tokens") || load(&m, o) || eng_seq_new(&s, m)) {
		rc = fail("logits");
		goto done;
	}
	eng_model_info in;
	eng_model_get_info(m, &in);
	if (n > in.max_context) {
		ev_error_set(EV_E_LIMIT, "%d tokens pass the context limit of %ld", n, in.max_context);
		rc = fail("logits");
		goto done;
	}
	if (!(lg = malloc((size_t)n * (size_t)in.vocab * sizeof(float)))) {
		fprintf(stderr, "evald engine logits: out of memory\n");
		goto done;
	}
	if (eng_forward(s, ids, n, lg)) {
		rc = fail("logits");
		goto done;
	}
	/* always JSON: one array a position (the last only with --last) */
	putchar('[');
	for (int i = o->last ? n - 1 : 0; i < n; i++) {
		printf("%s[", i > (o->last ? n - 1 : 0) ? "," : "");
		for (int j = 0; j < in.vocab; j++) {
			float v = lg[(size_t)i * in.vocab + j];
			if (isfinite(v)) /* JSON has no NaN or infinity */
				printf("%s%.9g", j ? "," : "", v);
			else
				printf("%snull", j ? "," : "");
		}
		putchar(']');
	}
	printf("]\n");
	rc = 0;
done:
	free(lg);
	free(ids);
	eng_seq_free(s);
	eng_model_free(m);
	return rc;
}

typedef struct {
	const opts *o;
	eng_tokenizer *tok;
	eng_detok_stream *ds;
	ev_buf text;
	ev_buf ids;
	double logprob;
} gen_ctx;

static int on_token(void *ctx, int32_t t, double lp)
{
	gen_ctx *g = ctx;
	g->logprob += lp;
	ev_buf_printf(&g->ids, "%s%d", g->ids.len ? "," : "", t);
	if (g->ds) {
		size_t before = g->text.len;
		eng_detok_stream_push(g->ds, t, &g->text);
		if (!g->o->json && !g->o->print_tokens) {
			fwrite(g->text.data + before, 1, g->text.len - before, stdout);
			fflush(stdout);
		}
	}
	if ((g->o->print_tokens || !g->ds) && !g->o->json) { /* ids when there is no tokenizer */
		printf("%d\n", t);
		fflush(stdout);
	}
	return 0;
}

static int cmd_generate(const opts *o)
{
	int32_t *ids = NULL;
	size_t nids = 0;
	int n = 0, rc = EV_EXIT_FAIL, nout = 0;
	eng_model *m = NULL;
	eng_seq *s = NULL;
	char *prompt = NULL;
	int32_t stop[16];
	gen_ctx g = {o, NULL, NULL, EV_BUF_INIT(64u << 20), EV_BUF_INIT(64u << 20), 0};
	eng_generate_options go = o->gen;
	eng_stop_reason why = ENG_STOP_LENGTH;
	if (!o->prompt == !o->prompt_tokens) {
		fprintf(stderr, "evald engine generate: give one of --prompt or --prompt-tokens\n");
		return EV_EXIT_USAGE;
	}
	if (load(&m, o) || eng_seq_new(&s, m))
		goto fail;
	if (o->prompt || o->chat || !o->print_tokens) {
		/* text needs the tokenizer; token prompts use it only to print */
		int trc = eng_tokenizer_load(&g.tok, o->model);
		if (trc && (o->prompt || o->chat))
			goto fail;
		if (!trc && eng_detok_stream_new(&g.ds, g.tok, true))
			goto fail;
		ev_error_clear();
	}
	if (o->prompt) {
		eng_chat_family fam = ENG_CHAT_UNKNOWN;
		const char *text = o->prompt;
		if (o->chat) {
			if (eng_chat_family_detect(&fam, o->model))
				goto fail;
			if (fam == ENG_CHAT_UNKNOWN) {
				ev_error_set(EV_E_UNSUPPORTED, "%s: no recognised chat template", o->model);
				goto fail;
			}
			eng_chat_msg msg = {"user", o->prompt, NULL, NULL, NULL};
			if (eng_chat_render(&prompt, NULL, fam, &msg, 1, NULL, true))
				goto fail;
			text = prompt;
			size_t ns = eng_chat_stop_ids(g.tok, fam, stop, 16);
			if (ns) {
				go.stop_ids = stop;
				go.n_stop = (int)ns;
			}
		}
		if (eng_tokenize(g.tok, text, strlen(text), o->chat, &ids, &nids))
			goto fail;
		if (!nids) {
			ev_error_set(EV_E_INVALID, "the prompt encodes to no tokens");
			goto fail;
		}
		n = (int)nids;
	} else if (parse_ids(&ids, &n, o->prompt_tokens, "--prompt-tokens")) {
		goto fail;
	}
	if (eng_generate(s, ids, n, &go, on_token, &g, NULL, 0, &nout, &why))
		goto fail;
	if (g.ds)
		eng_detok_stream_flush(g.ds, &g.text);
	if (o->json) {
		ev_buf j = EV_BUF_INIT(200u << 20);
		ev_buf_printf(&j, "{\"prompt_tokens\":%d,\"tokens\":[%s],\"text\":", n, g.ids.data ? g.ids.data : "");
		ev_json_buf_str(&j, g.ds ? (g.text.data ? g.text.data : "") : NULL);
		ev_buf_printf(&j, ",\"logprob\":%.9g,\"finish_reason\":\"%s\"}\n", g.logprob,
			      why == ENG_STOP_EOS ? "stop" : why == ENG_STOP_LENGTH ? "length" : "callback");
		fputs(j.data ? j.data : "", stdout);
		ev_buf_free(&j);
	} else if (!o->print_tokens && g.ds) {
		putchar('\n');
	}
	rc = 0;
	goto done;
fail:
	rc = fail("generate");
done:
	free(prompt);
	free(ids);
	eng_detok_stream_free(g.ds);
	eng_tokenizer_free(g.tok);
	ev_buf_free(&g.text);
	ev_buf_free(&g.ids);
	eng_seq_free(s);
	eng_model_free(m);
	return rc;
}

static int cmd_mkmodel(const opts *o)
{
	if (!o->arch || !o->out) {
		fprintf(stderr, "evald engine mkmodel: --arch and --out are required\n");
		return EV_EXIT_USAGE;
	}
	if (!strcmp(o->arch, "recall") ? eng_mkrecall(o->out)
				       : eng_mkmodel(o->out, o->arch, &o->sizes, o->dtype ? o->dtype : "f32", o->seed))
		return fail("mkmodel");
	if (!o->json)
		printf("wrote %s (%s)\n", o->out, o->arch);
	else
		printf("{\"out\":\"%s\",\"arch\":\"%s\"}\n", o->out, o->arch);
	return 0;
}

int ev_cmd_engine(const ev_cli *cli, int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "bench")) /* the same as `evald bench engine` */
		return ev_bench_engine_main(cli, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "bench-attention")) /* the same as `evald bench attention` */
		return ev_bench_attention_main(cli, argc - 1, argv + 1);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(argc < 2 ? stderr : stdout, argc < 2 ? EV_EXIT_USAGE : 0);
	opts o;
	memset(&o, 0, sizeof(o));
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	o.mo = mo;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	o.sizes = z;
	o.gen = g;
	o.json = cli->json;
	if (parse_opts(&o, argc, argv))
		return usage(stderr, EV_EXIT_USAGE);
	const char *sub = argv[1];
	if (strcmp(sub, "mkmodel") && !o.model) {
		fprintf(stderr, "evald engine %s: --model is required\n", sub);
		return EV_EXIT_USAGE;
	}
	if (!strcmp(sub, "info"))
		return cmd_info(&o);
	if (!strcmp(sub, "logits"))
		return cmd_logits(&o);
	if (!strcmp(sub, "generate"))
		return cmd_generate(&o);
	if (!strcmp(sub, "mkmodel"))
		return cmd_mkmodel(&o);
	fprintf(stderr, "evald engine: unknown subcommand '%s'\n", sub);
	return usage(stderr, EV_EXIT_USAGE);
}
