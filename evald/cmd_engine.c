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
#include "engine/gguf/gguf.h"
#include "engine/vision/vision.h"
#include "base/base.h"
#include "engine/tokenizer/chat_template.h"
#ifdef EV_HAVE_CUDA
#include "engine/cuda/cuda.h"
#endif
#include "evald/cli.h"

#define MAX_TOKENS_ARG 1000000

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);    /* bench_engine.c */
int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv); /* bench_attention.c */
int ev_engine_preprocess_main(const ev_cli *cli, int argc, char **argv); /* cmd_preprocess.c */
int ev_engine_gguf_main(const ev_cli *cli, int argc, char **argv);       /* cmd_gguf.c */

typedef struct {
	const char *model, *tokens, *prompt, *prompt_tokens, *arch, *out, *dtype, *text;
	const char *messages, *tools, *template_name, *lines, *config, *embeds;
	const char *vars[32];
	int n_vars;
	const char *images[16];
	int n_images;
	bool json, reference, chat, print_tokens, last, no_specials, no_gen_prompt;
	long context, threads;
	eng_mkmodel_sizes sizes;
	eng_generate_options gen;
	uint64_t seed;
	ev_engine_flags engine; /* --attention, --msa-*, --kv-* */
} opts;

#define T opts
#define COMMON_OPTS                                                                                        \
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file (required)"), MODEL_USE_OPTS
#define MODEL_USE_OPTS                                                                                     \
	EV_O_INT("--threads", T, threads, 1, 1024, "N", "CPU threads (default: all cores)"),               \
	EV_O_FLAG("--reference", T, reference, "the plain reference path (slow; the oracle)"),             \
	EV_O_FLAG("--json", T, json, "as JSON"),                                                           \
	EV_ENGINE_OPTS(T, engine)

static const ev_opt info_opts[] = {
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file (or --config)"), MODEL_USE_OPTS,
	EV_O_INT("--context", T, context, 1, 1L << 30, "N", "the context the memory figure is for"),
	EV_O_STR("--config", T, config, "FILE", "a config.json alone: its parameters, no weights read"),
	EV_O_END,
};

static const ev_opt logits_opts[] = {
	COMMON_OPTS,
	EV_O_STR("--tokens", T, tokens, "1,2,3", "the token ids (required)"),
	EV_O_FLAG("--last", T, last, "only the last position's logits"),
	EV_O_STRS("--image", T, images, n_images, "FILE",
		  "an image (PNG/JPEG) for the tokens' image placeholders, in order (multimodal M3)"),
	EV_O_STR("--embeds", T, embeds, "FILE",
		 "raw f32 embedding rows (e.g. a video's, from engine preprocess --embed-out) for the placeholders "
		 "after the images'"),
	EV_O_END,
};

static const ev_opt generate_opts[] = {
	COMMON_OPTS,
	EV_O_STR("--prompt", T, prompt, "TEXT", "the prompt as text"),
	EV_O_STR("--prompt-tokens", T, prompt_tokens, "1,2,3", "the prompt as token ids"),
	EV_O_FLAG("--chat", T, chat, "render the prompt as a user turn with the chat template"),
	EV_O_INT("--max-tokens", T, gen.max_tokens, 0, 1 << 24, "N", "tokens to generate"),
	EV_O_NUM("--temperature", T, gen.sample.temperature, 0, 100, "T", "0: greedy"),
	EV_O_NUM("--top-p", T, gen.sample.top_p, 1e-9, 1, "P", "nucleus sampling"),
	EV_O_INT("--top-k", T, gen.sample.top_k, 0, 1 << 24, "K", "sample among the K likeliest (0: off)"),
	EV_O_NUM("--min-p", T, gen.sample.min_p, 0, 1, "P", "min-p sampling"),
	EV_O_NUM("--repetition-penalty", T, gen.sample.repetition_penalty, 1e-3, 100, "R", "HF's repetition penalty"),
	EV_O_INT("--seed", T, gen.sample.seed, 0, 9e15, "S", "sampling seed"),
	EV_O_FLAG("--print-tokens", T, print_tokens, "print token ids, one a line"),
	EV_O_STRS("--image", T, images, n_images, "FILE",
		  "an image for the prompt's next image marker " ENG_VISION_IMAGE_MARKER " (multimodal M3)"),
	EV_O_END,
};

static const ev_opt tokenize_opts[] = {
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file, or a folder with tokenizer.json (required)"),
	EV_O_STR("--text", T, text, "TEXT", "the text to encode"),
	EV_O_STR("--lines", T, lines, "FILE", "many texts: one JSON string a line in, one JSON array of ids a line out"),
	EV_O_FLAG("--no-special-tokens", T, no_specials,
	          "leave out what the post-processor adds (HF's add_special_tokens=False, as for chat templates)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};

static const ev_opt render_opts[] = {
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file (its chat template) (required)"),
	EV_O_STR("--messages", T, messages, "FILE", "a JSON array of messages, or {\"messages\": [...], \"tools\": [...]}"),
	EV_O_STR("--tools", T, tools, "FILE", "a JSON array of tool schemas"),
	EV_O_STRS("--var", T, vars, n_vars, "K=V", "a template variable (V read as JSON when it is, else a string)"),
	EV_O_STR("--template", T, template_name, "NAME", "the named template (tool_use, ...) when there are several"),
	EV_O_FLAG("--no-generation-prompt", T, no_gen_prompt, "add_generation_prompt=False"),
	EV_O_FLAG("--json", T, json, "print {\"prompt\": ...}"),
	EV_O_END,
};

static const ev_opt mkmodel_opts[] = {
	EV_O_STR("--arch", T, arch, "ARCH", "llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, qwen2_moe, minimax_m3, minimax_m3_vl, recall or recall_m3 (required)"),
	EV_O_STR("--out", T, out, "DIR", "the folder to write (required)"),
	EV_O_CHOICE("--dtype", T, dtype, "f32|f16|bf16", "weight dtype (default f32)"),
	EV_O_INT("--seed", T, seed, 0, 9e15, "S", "weight seed"),
	EV_O_INT("--hidden", T, sizes.hidden, 1, 1 << 20, "N", "hidden size"),
	EV_O_INT("--layers", T, sizes.layers, 1, 1 << 20, "N", "decoder layers"),
	EV_O_INT("--heads", T, sizes.heads, 1, 1 << 20, "N", "query heads"),
	EV_O_INT("--kv-heads", T, sizes.kv_heads, 1, 1 << 20, "N", "KV heads"),
	EV_O_INT("--head-dim", T, sizes.head_dim, 1, 1 << 20, "N", "head size (default hidden / heads)"),
	EV_O_INT("--intermediate", T, sizes.intermediate, 1, 1 << 20, "N", "MLP size"),
	EV_O_INT("--vocab", T, sizes.vocab, 1, 1 << 20, "N", "vocabulary size"),
	EV_O_INT("--experts", T, sizes.experts, 1, 1 << 20, "N", "experts (MoE architectures)"),
	EV_O_INT("--top-k", T, sizes.top_k, 1, 1 << 20, "K", "experts per token (MoE architectures)"),
	EV_O_INT("--max-position", T, sizes.max_position, 1, 1L << 30, "N", "max_position_embeddings"),
	EV_O_INT("--index-block-size", T, sizes.index_block, 1, 4096, "B", "minimax_m3's index block (16)"),
	EV_O_INT("--index-top-k", T, sizes.index_topk, 1, 1 << 20, "K", "minimax_m3's blocks chosen a query (4)"),
	EV_O_INT("--vision-hidden", T, sizes.vision_hidden, 1, 1 << 16, "N", "minimax_m3_vl's vision tower width (32)"),
	EV_O_INT("--vision-intermediate", T, sizes.vision_inter, 1, 1 << 18, "N", "its MLP size (64)"),
	EV_O_INT("--vision-layers", T, sizes.vision_layers, 1, 256, "N", "its layers (2)"),
	EV_O_INT("--vision-heads", T, sizes.vision_heads, 1, 256, "N", "its heads (2)"),
	EV_O_FLAG("--thinking", T, sizes.thinking,
		  "add <think> and </think> tokens and a chat template that opens a think block (as DeepSeek-R1's)"),
	EV_O_CHOICE("--sparse-layers", T, sizes.sparse_layers, "odd|all|none",
		    "minimax_m3's layers with sparse attention and an indexer (default odd)"),
	EV_O_FLAG("--json", T, json, "print {\"out\",\"arch\"}"),
	EV_O_END,
};
#undef COMMON_OPTS
#undef T

static const ev_cmd_spec info_spec = {
	.name = "engine info", .synopsis = "(--model PATH [--context N] | --config FILE) [--json]",
	.about = "What a checkpoint is: architecture, sizes, parameters in total and active per token,\n"
	         "weight bytes (by stored type) and KV bytes, memory at a context.",
	.opts = info_opts};
static const ev_cmd_spec logits_spec = {
	.name = "engine logits", .synopsis = "--model PATH --tokens 1,2,3 [--last] [--reference]",
	.about = "The logits of a token list, as JSON (one array a position).", .opts = logits_opts};
static const ev_cmd_spec generate_spec = {
	.name = "engine generate", .synopsis = "--model PATH (--prompt TEXT | --prompt-tokens 1,2,3) [--chat] [OPTIONS]",
	.about = "Samples a continuation of a prompt (greedy by default).", .opts = generate_opts};
static const ev_cmd_spec tokenize_spec = {
	.name = "engine tokenize", .synopsis = "--model PATH (--text TEXT | --lines FILE) [--no-special-tokens] [--json]",
	.about = "Encodes text with the checkpoint's tokenizer as HF's tokenizers do (normalizer, pre-tokenizer,\n"
	         "BPE, and the post-processor's special tokens unless --no-special-tokens): one id and its piece\n"
	         "(as the vocab writes it, HF's convert_ids_to_tokens) a line, or {\"ids\":[...],\"pieces\":[...]}.",
	.opts = tokenize_opts};
static const ev_cmd_spec render_spec = {
	.name = "engine render", .synopsis = "--model PATH --messages FILE [--tools FILE] [--var K=V]... [--template NAME]",
	.about = "Renders the checkpoint's chat template (tokenizer_config.json's chat_template or\n"
	         "chat_template.jinja) as transformers' apply_chat_template does, and prints the prompt.\n"
	         "  evald engine render --model ckpt --messages chat.json --var enable_thinking=false",
	.opts = render_opts};
static const ev_cmd_spec mkmodel_spec = {
	.name = "engine mkmodel", .synopsis = "--arch ARCH --out DIR [SIZES] [--dtype f32|f16|bf16] [--seed S]",
	.about = "Writes a random-weight checkpoint (any size) for tests and benchmarks; --arch recall writes\n"
	         "the constructed recall checkpoint, whose weights answer key-value recall at any distance\n"
	         "(recall_m3: the same in MiniMax-M3's shape, its lightning indexer choosing the needle).",
	.opts = mkmodel_opts};

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
	eng_model_options mo = o->engine.mo;
	if (o->reference)
		mo.backend = ENG_BACKEND_REF;
	mo.threads = (int)o->threads;
	return eng_model_load(m, o->model, &mo);
}

/* What runs the model here (the backend in use), and what the CUDA build
 * sees. */
static void device_line(char *buf, size_t cap, const char *backend)
{
#ifdef EV_HAVE_CUDA
	eng_cuda_info ci;
	if (eng_cuda_probe(&ci) == 0)
		snprintf(buf, cap, "%s; CUDA device %s (compute %d.%d, %d SMs, %.1f GiB)%s", backend, ci.name, ci.cc_major,
		         ci.cc_minor, ci.sms, (double)ci.mem_bytes / (1 << 30),
		         strcmp(backend, "cuda") ? ": --backend cuda runs on it" : "");
	else
		snprintf(buf, cap, "%s; CUDA built, %s", backend, ev_error_msg());
	ev_error_clear();
#else
	snprintf(buf, cap, "%s; CUDA not built (no toolkit when configured)", backend);
#endif
	for (char *p = buf; *p; p++) /* printed in JSON as is */
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			*p = '\'';
}

static int cmd_info(const opts *o)
{
	if (o->config) { /* a config alone, e.g. a released model's too big to fetch */
		uint64_t total = 0, active = 0;
		if (eng_config_params(o->config, &total, &active))
			return fail("info");
		if (o->json)
			printf("{\"params_total\":%llu,\"params_active\":%llu}\n", (unsigned long long)total,
			       (unsigned long long)active);
		else
			printf("parameters        %.3f B total, %.3f B active per token (from %s alone)\n", total / 1e9,
			       active / 1e9, o->config);
		return 0;
	}
	eng_model *m = NULL;
	if (load(&m, o))
		return fail("info");
	eng_model_info in;
	eng_model_get_info(m, &in);
	char device[400], kernels[200];
	device_line(device, sizeof device, in.backend);
	eng_cpu_kernels(kernels, sizeof kernels, in.activation_bits);
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
		       "\"kv_bytes_per_token\":%llu,\"context\":%ld,\"memory_bytes\":%llu,\"sliding_window\":%ld,"
		       "\"config_defaults\":\"%s\",\"device\":\"%s\",\"kernels\":\"%s\",\"weight_pages\":\"%s\","
		       "\"weight_quad_bytes\":%llu,\"decode_weight_bytes\":%llu,\"weight_types\":[",
		       (unsigned long long)in.params_total, (unsigned long long)in.params_active, in.dtypes,
		       (unsigned long long)in.weight_bytes, (unsigned long long)in.kv_bytes_per_token, ctx,
		       (unsigned long long)need, in.sliding_window, in.config_defaults ? in.config_defaults : "", device,
		       kernels, in.weights_huge ? "huge" : "file", (unsigned long long)in.quad_bytes,
		       (unsigned long long)in.decode_weight_bytes);
		for (int i = 0; i < in.n_weight_types; i++)
			printf("%s{\"dtype\":\"%s\",\"bytes\":%llu,\"elements\":%llu}", i ? "," : "", in.weight_types[i].dtype,
			       (unsigned long long)in.weight_types[i].bytes, (unsigned long long)in.weight_types[i].elems);
		printf("]}\n");
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
		printf("weights           %s, %.2f MiB, %s\n", in.dtypes, in.weight_bytes / 1048576.0,
		       in.weights_huge ? "read into huge pages" : "mmapped");
		if (in.n_weight_types > 1) {
			printf("  by type        ");
			for (int i = 0; i < in.n_weight_types; i++)
				printf("%s %s %.2f MiB (%.3f M)", i ? "," : "", in.weight_types[i].dtype,
				       in.weight_types[i].bytes / 1048576.0, in.weight_types[i].elems / 1e6);
			printf("\n");
		}
		if (in.decode_weight_bytes != in.weight_bytes)
			printf("  a token reads   %.2f MiB of them (%s)\n", in.decode_weight_bytes / 1048576.0,
			       in.experts && !in.tied_embeddings ? "the chosen experts, one row of the embedding table"
			       : in.experts                      ? "the chosen experts"
			                                         : "one row of the embedding table, which is not the head");
		if (in.quad_bytes)
			printf("  layout          %.2f MiB as quads of four rows (the CPU's decode reads them a block of four rows "
			       "at once)\n", in.quad_bytes / 1048576.0);
		printf("KV cache          %llu bytes per token\n", (unsigned long long)in.kv_bytes_per_token);
		printf("memory at %ld tokens: %.2f MiB\n", ctx, need / 1048576.0);
		printf("device            %s\n", device);
		printf("kernels           %s\n", kernels);
		if (in.sliding_window)
			printf("attention         sliding window of %ld tokens\n", in.sliding_window);
		if (in.config_defaults && *in.config_defaults)
			printf("config defaults   %s (not in config.json: transformers' defaults for %s)\n",
			       in.config_defaults, in.architecture);
	}
	eng_model_free(m);
	return 0;
}

/* Encodes each --image with the checkpoint's vision tower and queues its
 * rows for the sequence's image placeholders; counts[i] (when not NULL)
 * the rows of image i. */
static int attach_images(const opts *o, eng_seq *s, int *counts)
{
	if (!o->n_images)
		return 0;
	eng_vision_model *vm = NULL;
	int rc = eng_vision_model_load(&vm, o->model);
	for (int i = 0; i < o->n_images && !rc; i++) {
		eng_image im;
		float *rows = NULL;
		int nrows = 0;
		if (!(rc = eng_image_load(&im, o->images[i], NULL))) {
			if (!(rc = eng_vision_encode_image(vm, &im, &rows, &nrows)))
				rc = eng_seq_add_embeddings(s, rows, nrows);
			eng_image_free(&im);
		}
		if (counts)
			counts[i] = nrows;
		free(rows);
	}
	eng_vision_model_free(vm);
	return rc;
}

/* --embeds: rows of the model's width read from a raw f32 file and queued */
static int attach_embeds(const opts *o, eng_model *m, eng_seq *s)
{
	if (!o->embeds)
		return 0;
	char *data = NULL;
	size_t len = 0;
	eng_model_info in;
	eng_model_get_info(m, &in);
	size_t row = (size_t)in.hidden * sizeof(float);
	int rc = ev_file_read(&data, &len, o->embeds, (size_t)1 << 32);
	if (!rc && (len == 0 || len % row))
		rc = ev_error_set(EV_E_INVALID, "--embeds: %s holds %zu bytes, not whole rows of %d floats", o->embeds, len,
				  in.hidden);
	if (!rc)
		rc = eng_seq_add_embeddings(s, (const float *)data, (int)(len / row));
	free(data);
	return rc;
}

/* The prompt's image markers (the placeholder id) each become the start
 * marker, one placeholder a row of that image's encoding, the end marker
 * (the markers the tokenizer has), as M3's processor expands them; the
 * rows are queued for the placeholders. *ids is replaced. */
static int expand_images(const opts *o, const eng_tokenizer *tok, eng_model *m, eng_seq *s, int32_t **ids, int *n)
{
	int img = eng_model_image_token(m);
	if (img < 0)
		return ev_error_set(EV_E_UNSUPPORTED, "--image: %s is not a multimodal checkpoint (no image placeholder id)",
				    o->model);
	int counts[16];
	int rc = attach_images(o, s, counts);
	int32_t *out = NULL;
	int nout = 0;
	if (!rc && !(rc = eng_vision_expand_markers(*ids, *n, img, tok ? eng_token_id(tok, ENG_VISION_START_MARKER) : -1,
						     tok ? eng_token_id(tok, ENG_VISION_END_MARKER) : -1, counts,
						     o->n_images, &out, &nout))) {
		free(*ids);
		*ids = out, *n = nout;
	}
	return rc;
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
	if (parse_ids(&ids, &n, o->tokens, "--tokens") || load(&m, o) || eng_seq_new(&s, m) || attach_images(o, s, NULL) ||
	    attach_embeds(o, m, s)) {
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
	if (eng_seq_pending_embeddings(s) > 0) {
		ev_error_set(EV_E_INVALID, "the images give %ld more embedding rows than the tokens hold image placeholders (id %d)",
			     eng_seq_pending_embeddings(s), eng_model_image_token(m));
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
			/* the checkpoint's template as transformers renders it; the
			 * built-in family renderer only where there is none */
			eng_chat_template *tmpl = NULL;
			int trc = eng_chat_template_load(&tmpl, o->model, NULL);
			if (trc && trc != EV_E_NOTFOUND)
				goto fail;
			ev_error_clear();
			if (tmpl) {
				cJSON *msgs = cJSON_CreateArray(), *um = cJSON_CreateObject();
				cJSON_AddStringToObject(um, "role", "user");
				cJSON_AddStringToObject(um, "content", o->prompt);
				cJSON_AddItemToArray(msgs, um);
				trc = eng_chat_template_render(tmpl, msgs, NULL, true, NULL, &prompt, NULL);
				cJSON_Delete(msgs);
				eng_chat_template_free(tmpl);
				if (trc)
					goto fail;
			} else if (fam == ENG_CHAT_UNKNOWN) {
				ev_error_set(EV_E_UNSUPPORTED, "%s: no chat template", o->model);
				goto fail;
			} else {
				eng_chat_msg msg = {"user", o->prompt, NULL, NULL, NULL};
				if (eng_chat_render(&prompt, NULL, fam, &msg, 1, NULL, true))
					goto fail;
			}
			text = prompt;
			size_t ns = eng_chat_stop_ids(g.tok, fam, stop, 16);
			if (ns) {
				go.stop_ids = stop;
				go.n_stop = (int)ns;
			}
		}
		/* a template writes its special tokens; plain text gets the
		 * post-processor's (HF's add_special_tokens=True) */
		if (o->chat ? eng_tokenize(g.tok, text, strlen(text), true, &ids, &nids)
		            : eng_tokenize_with_specials(g.tok, text, strlen(text), &ids, &nids))
			goto fail;
		if (!nids) {
			ev_error_set(EV_E_INVALID, "the prompt encodes to no tokens");
			goto fail;
		}
		n = (int)nids;
	} else if (parse_ids(&ids, &n, o->prompt_tokens, "--prompt-tokens")) {
		goto fail;
	}
	if (o->n_images && expand_images(o, g.tok, m, s, &ids, &n))
		goto fail;
	int32_t stop_token = -1;
	go.stop_token_out = &stop_token;
	if (eng_generate(s, ids, n, &go, on_token, &g, NULL, 0, &nout, &why))
		goto fail;
	if (g.ds)
		eng_detok_stream_flush(g.ds, &g.text);
	if (o->json) {
		ev_buf j = EV_BUF_INIT(200u << 20);
		ev_buf_printf(&j, "{\"prompt_tokens\":%d,\"tokens\":[%s],\"text\":", n, g.ids.data ? g.ids.data : "");
		if (g.ds) /* no tokenizer: ids only, and the text is null */
			ev_json_buf_str(&j, g.text.data ? g.text.data : "");
		else
			ev_buf_puts(&j, "null");
		ev_buf_printf(&j, ",\"logprob\":%.9g,\"finish_reason\":\"%s\"", g.logprob,
			      why == ENG_STOP_EOS ? "stop" : why == ENG_STOP_LENGTH ? "length" : "callback");
		if (stop_token >= 0) /* the end-of-sequence id it stopped on (not among the tokens) */
			ev_buf_printf(&j, ",\"stop_token\":%d", stop_token);
		ev_buf_puts(&j, "}\n");
		fputs(j.data ? j.data : "", stdout);
		ev_buf_free(&j);
	} else {
		if (!o->print_tokens && g.ds)
			putchar('\n');
		fflush(stdout); /* the text before the note on stderr */
		if (stop_token >= 0)
			fprintf(stderr, "evald: stopped on end-of-sequence token %d\n", stop_token);
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
	if (!strcmp(o->arch, "recall")	      ? eng_mkrecall(o->out)
	    : !strcmp(o->arch, "recall_m3") ? eng_mkrecall_m3(o->out)
					      : eng_mkmodel(o->out, o->arch, &o->sizes, o->dtype ? o->dtype : "f32", o->seed))
		return fail("mkmodel");
	if (!o->json)
		printf("wrote %s (%s)\n", o->out, o->arch);
	else
		printf("{\"out\":\"%s\",\"arch\":\"%s\"}\n", o->out, o->arch);
	return 0;
}

/* --lines: a JSON string a line in, its ids a line out (for comparisons
 * over a corpus; a line that is not a JSON string is an error naming it). */
static int tokenize_lines(const opts *o, const eng_tokenizer *tok)
{
	char *text = NULL;
	size_t len = 0;
	int rc = ev_file_read(&text, &len, o->lines, (size_t)1 << 30);
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	size_t lineno = 0;
	for (char *p = text, *nl; !rc && p && p < text + len; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(text + len - p));
		if (!nl)
			nl = text + len;
		lineno++;
		if (nl == p)
			continue;
		char what[64];
		snprintf(what, sizeof what, "line %zu", lineno);
		cJSON *j = NULL;
		if ((rc = ev_json_parse(&j, p, (size_t)(nl - p), what)))
			break;
		if (!cJSON_IsString(j)) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: expected a JSON string", o->lines, what);
			cJSON_Delete(j);
			break;
		}
		int32_t *ids = NULL;
		size_t n = 0;
		size_t tl = strlen(j->valuestring);
		rc = o->no_specials ? eng_tokenize(tok, j->valuestring, tl, true, &ids, &n)
		                    : eng_tokenize_with_specials(tok, j->valuestring, tl, &ids, &n);
		for (size_t i = 0; !rc && i < n; i++)
			ev_buf_printf(&b, "%s%d", i ? "," : "[", ids[i]);
		if (!rc)
			ev_buf_puts(&b, n ? "]\n" : "[]\n");
		free(ids);
		cJSON_Delete(j);
	}
	if (!rc)
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
	ev_buf_free(&b);
	free(text);
	return rc;
}

static int cmd_tokenize(const opts *o)
{
	if (!o->text == !o->lines) {
		fprintf(stderr, "evald engine tokenize: give one of --text or --lines\n");
		return EV_EXIT_USAGE;
	}
	if (o->lines) {
		eng_tokenizer *tok = NULL;
		int rc = eng_tokenizer_load(&tok, o->model);
		if (!rc)
			rc = tokenize_lines(o, tok);
		eng_tokenizer_free(tok);
		return rc ? fail("tokenize") : 0;
	}
	eng_tokenizer *tok = NULL;
	int32_t *ids = NULL;
	size_t n = 0;
	size_t len = strlen(o->text);
	if (eng_tokenizer_load(&tok, o->model) ||
	    (o->no_specials ? eng_tokenize(tok, o->text, len, true, &ids, &n)
	                    : eng_tokenize_with_specials(tok, o->text, len, &ids, &n))) {
		eng_tokenizer_free(tok);
		return fail("tokenize");
	}
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	if (o->json) {
		ev_buf_puts(&b, "{\"ids\":[");
		for (size_t i = 0; i < n; i++)
			ev_buf_printf(&b, "%s%d", i ? "," : "", ids[i]);
		ev_buf_puts(&b, "],\"pieces\":[");
	}
	ev_buf piece = EV_BUF_INIT(1 << 20);
	for (size_t i = 0; i < n; i++) {
		ev_buf_reset(&piece);
		(void)eng_token_piece(tok, ids[i], &piece);
		if (o->json) {
			if (i)
				ev_buf_putc(&b, ',');
		} else {
			ev_buf_printf(&b, "%d\t", ids[i]);
		}
		/* as a JSON string either way: spaces, newlines and controls visible */
		ev_json_buf_strn(&b, piece.data ? piece.data : "", piece.len);
		if (!o->json)
			ev_buf_putc(&b, '\n');
	}
	ev_buf_free(&piece);
	if (o->json)
		ev_buf_puts(&b, "]}\n");
	fwrite(b.data ? b.data : "", 1, b.len, stdout);
	ev_buf_free(&b);
	free(ids);
	eng_tokenizer_free(tok);
	return 0;
}

static int read_json_file(cJSON **out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc = ev_file_read(&text, &len, path, (size_t)64 << 20);
	if (!rc)
		rc = ev_json_parse(out, text, len, path);
	free(text);
	return rc;
}

static int cmd_render(const opts *o)
{
	if (!o->messages) {
		fprintf(stderr, "evald engine render: --messages is required\n");
		return EV_EXIT_USAGE;
	}
	cJSON *msgs = NULL, *tools = NULL, *extra = cJSON_CreateObject();
	eng_chat_template *t = NULL;
	char *prompt = NULL;
	size_t len = 0;
	int rc = extra ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = read_json_file(&msgs, o->messages);
	const cJSON *m = msgs, *tl = NULL;
	if (!rc && cJSON_IsObject(msgs)) { /* {"messages": [...], "tools": [...]} */
		m = cJSON_GetObjectItemCaseSensitive(msgs, "messages");
		tl = cJSON_GetObjectItemCaseSensitive(msgs, "tools");
	}
	if (!rc && !cJSON_IsArray(m))
		rc = ev_error_set(EV_E_INVALID, "%s: expected a JSON array of messages (or {\"messages\": [...]})", o->messages);
	if (!rc && o->tools) {
		if (!(rc = read_json_file(&tools, o->tools)) && !cJSON_IsArray(tools))
			rc = ev_error_set(EV_E_INVALID, "%s: expected a JSON array of tools", o->tools);
		tl = tools;
	}
	for (int i = 0; !rc && i < o->n_vars; i++) {
		const char *eq = strchr(o->vars[i], '=');
		if (!eq || eq == o->vars[i]) {
			rc = ev_error_set(EV_E_INVALID, "--var: \"%s\" is not K=V", o->vars[i]);
			break;
		}
		char *key = ev_strndup(o->vars[i], (size_t)(eq - o->vars[i]));
		cJSON *v = NULL;
		if (ev_json_parse(&v, eq + 1, strlen(eq + 1), "--var"))
			v = cJSON_CreateString(eq + 1); /* not JSON: a string */
		ev_error_clear();
		/* Python spellings of the constants, as a user would write them */
		if (cJSON_IsString(v) && (!strcmp(v->valuestring, "True") || !strcmp(v->valuestring, "False"))) {
			bool b = v->valuestring[0] == 'T';
			cJSON_Delete(v);
			v = cJSON_CreateBool(b);
		} else if (cJSON_IsString(v) && !strcmp(v->valuestring, "None")) {
			cJSON_Delete(v);
			v = cJSON_CreateNull();
		}
		if (!key || !v)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		else {
			cJSON_DeleteItemFromObjectCaseSensitive(extra, key);
			cJSON_AddItemToObject(extra, key, v);
			v = NULL;
		}
		cJSON_Delete(v);
		free(key);
	}
	if (!rc)
		rc = eng_chat_template_load(&t, o->model, o->template_name);
	if (!rc)
		rc = eng_chat_template_render(t, m, tl && !cJSON_IsNull(tl) ? tl : NULL, !o->no_gen_prompt, extra, &prompt,
					      &len);
	if (!rc) {
		if (o->json) {
			ev_buf b = EV_BUF_INIT((size_t)1 << 30);
			ev_buf_puts(&b, "{\"prompt\":");
			ev_json_buf_strn(&b, prompt, len);
			ev_buf_puts(&b, "}\n");
			fwrite(b.data ? b.data : "", 1, b.len, stdout);
			ev_buf_free(&b);
		} else {
			fwrite(prompt, 1, len, stdout);
		}
	}
	free(prompt);
	eng_chat_template_free(t);
	cJSON_Delete(msgs);
	cJSON_Delete(tools);
	cJSON_Delete(extra);
	return rc ? fail("render") : 0;
}

/* Parses a subcommand's options; 0 or an exit code (+1 so that help's 0 is told apart). */
static int parse(opts *o, const ev_cli *cli, const ev_cmd_spec *spec, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->sizes = (eng_mkmodel_sizes)ENG_MKMODEL_SIZES_INIT;
	o->gen = (eng_generate_options)ENG_GENERATE_OPTIONS_INIT;
	o->json = cli->json;
	ev_engine_flags_init(&o->engine);
	int prc = ev_opt_parse(spec, o, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc) + 1;
	if (spec != &mkmodel_spec && !o->model && !(spec == &info_spec && o->config)) {
		fprintf(stderr, "evald %s: --model is required%s\n", spec->name, spec == &info_spec ? " (or --config FILE)" : "");
		return EV_EXIT_USAGE + 1;
	}
	return 0;
}

/* A GGUF file given as --model stands for its converted folder. */
static int resolve_model(opts *o, char **owned)
{
	*owned = NULL;
	if (!o->model)
		return 0;
	if (eng_model_path_resolve(o->model, owned)) {
		fprintf(stderr, "evald engine: %s\n", ev_error_msg());
		return EV_EXIT_FAIL;
	}
	o->model = *owned;
	return 0;
}

#define ENGINE_SUB(fn, spec)                                                                                \
	static int sub_##fn(const ev_cli *cli, int argc, char **argv)                                      \
	{                                                                                                   \
		opts o;                                                                                     \
		char *owned = NULL;                                                                         \
		int rc = parse(&o, cli, &spec, argc, argv);                                                 \
		if (rc)                                                                                     \
			return rc - 1;                                                                      \
		if (&spec != &mkmodel_spec && (rc = resolve_model(&o, &owned)))                             \
			return rc;                                                                          \
		rc = cmd_##fn(&o);                                                                          \
		free(owned);                                                                                \
		return rc;                                                                                  \
	}
ENGINE_SUB(info, info_spec)
ENGINE_SUB(logits, logits_spec)
ENGINE_SUB(generate, generate_spec)
ENGINE_SUB(mkmodel, mkmodel_spec)
ENGINE_SUB(tokenize, tokenize_spec)
ENGINE_SUB(render, render_spec)
#undef ENGINE_SUB

int ev_cmd_engine(const ev_cli *cli, int argc, char **argv)
{
	static const ev_subcommand subs[] = {
		{"info", sub_info, "what a checkpoint is: sizes, parameters, memory"},
		{"logits", sub_logits, "the logits of a token list (JSON), fast or reference path"},
		{"generate", sub_generate, "sample a continuation of a prompt"},
		{"mkmodel", sub_mkmodel, "write a random-weight (or the recall) checkpoint"},
		{"tokenize", sub_tokenize, "ids and pieces of a text, as HF's tokenizers encode it"},
		{"render", sub_render, "the chat template rendered as transformers renders it"},
		{"preprocess", ev_engine_preprocess_main, "an image as MiniMax-M3's processor makes it: sizes, patches"},
		{"gguf", ev_engine_gguf_main, "what a GGUF file holds (validated); one tensor dequantized"},
		{"bench", ev_bench_engine_main, "prefill and decode speed (= evald bench engine)"},
		{"bench-attention", ev_bench_attention_main, "dense vs MSA by context length (= evald bench attention)"},
		{NULL, NULL, NULL},
	};
	static const ev_subcommand_set set = {"engine", "The bundled inference engine from the command line.", subs,
	                                      NULL};
	return ev_cli_subcommand(cli, argc, argv, &set);
}
