/*
 * evald engine gguf: what a GGUF file holds, read and validated as the
 * engine reads it (engine/gguf): version, alignment, metadata, tensors;
 * one tensor's values as raw little-endian f32 (the plain dequantization).
 *   evald engine gguf FILE [--json]
 *   evald engine gguf FILE --tensor NAME --out FILE
 *   evald engine gguf FILE --quantize TYPE --out FILE.gguf
 *   evald engine gguf FOLDER --out FILE.gguf [--quantize TYPE]
 *   evald engine gguf --pre-tokenizers [--json]
 */
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/fs.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"
#include "evald/cli.h"

int ev_engine_gguf_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *tensor, *out, *quantize;
	bool json, pre_tokenizers;
} gguf_opts;

#define T gguf_opts
static const ev_opt gguf_table[] = {
	EV_O_STR("--tensor", T, tensor, "NAME", "one tensor's values (with --out)"),
	EV_O_STR("--out", T, out, "FILE",
	         "write them there as raw little-endian f32 (with --tensor), or the new GGUF file (with --quantize, or from "
	         "a folder)"),
	EV_O_STR("--quantize", T, quantize, "TYPE",
	         "the weights in TYPE: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
	         "IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, or the mixes Q4_K_M, Q5_K_M (from a folder: as "
	         "stored when not given)"),
	EV_O_FLAG("--pre-tokenizers", T, pre_tokenizers,
	          "the tokenizer.ggml.pre names evald reads and writes, each with the tokenizer.json pre_tokenizer it "
	          "stands for (no FILE)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec gguf_spec = {
	.name = "engine gguf",
	.synopsis = "FILE [--json]  |  FILE --tensor NAME --out FILE  |  FILE --quantize TYPE --out FILE.gguf\n"
	            "       evald engine gguf FOLDER --out FILE.gguf [--quantize TYPE]\n"
	            "       evald engine gguf --pre-tokenizers [--json]",
	.about = "What a GGUF file holds (version, alignment, metadata, tensors), validated as the engine\n"
	         "reads it; --tensor NAME --out FILE writes one tensor dequantized to f32; --quantize TYPE\n"
	         "--out FILE writes the file again with its weights dequantized and quantized to TYPE (rows\n"
	         "that are not whole super-blocks fall back as llama.cpp's quantize does; norms as stored).\n"
	         "Given a checkpoint folder, --out FILE.gguf writes it as one GGUF file as llama.cpp's\n"
	         "converter would (llama, Mistral, Mixtral, Qwen2, Qwen3 and their MoE forms; a byte-level\n"
	         "BPE or SentencePiece's BPE tokenizer), its weights as stored or in --quantize TYPE, for\n"
	         "llama.cpp or for evald itself (evaluate a quantized checkpoint: evald run --model\n"
	         "FILE.gguf). --pre-tokenizers lists the tokenizer.ggml.pre names it reads and writes.",
	.opts = gguf_table,
	.positional = "FILE",
	.min_pos = 0,
	.max_pos = 1,
};

/* --pre-tokenizers: one line a pre-tokenizer (its names, whether words
 * that are whole tokens are taken whole, its pre_tokenizer), or the JSON */
static int list_pre_tokenizers(bool json)
{
	char *text = eng_gguf_pre_tokenizers_json();
	cJSON *all = text ? cJSON_Parse(text) : NULL;
	if (!all) {
		free(text);
		fprintf(stderr, "evald engine gguf: out of memory\n");
		return 1;
	}
	if (json)
		printf("%s\n", text);
	const cJSON *p, *list = json ? NULL : all;
	cJSON_ArrayForEach(p, list)
	{
		const cJSON *n;
		int k = 0;
		cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(p, "names")) printf("%s%s", k++ ? ", " : "", n->valuestring);
		char *pt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(p, "pre_tokenizer"));
		printf("%s\n  %s\n", ev_json_bool(p, "ignore_merges", false) ? " (whole-token words kept whole)" : "",
		       pt ? pt : "?");
		free(pt);
	}
	cJSON_Delete(all);
	free(text);
	return 0;
}

/* a metadata value in short: scalars, strings cut at 60 bytes, arrays by type and count */
static void show_value(ev_buf *b, const eng_gguf_value *v)
{
	switch (v->type) {
	case ENG_GGUF_STRING:
		ev_json_buf_strn(b, v->s.p, v->s.n < 60 ? v->s.n : 60);
		return;
	case ENG_GGUF_ARRAY:
		ev_buf_printf(b, "\"[%llu of type %u]\"", (unsigned long long)v->count, v->elem_type);
		return;
	case ENG_GGUF_F32:
	case ENG_GGUF_F64:
		ev_buf_printf(b, "%.9g", v->v.f);
		return;
	case ENG_GGUF_BOOL:
		ev_buf_puts(b, v->v.u ? "true" : "false");
		return;
	case ENG_GGUF_I8:
	case ENG_GGUF_I16:
	case ENG_GGUF_I32:
	case ENG_GGUF_I64:
		ev_buf_printf(b, "%lld", (long long)v->v.i);
		return;
	default:
		ev_buf_printf(b, "%llu", (unsigned long long)v->v.u);
	}
}

int ev_engine_gguf_main(const ev_cli *cli, int argc, char **argv)
{
	gguf_opts o = {.json = cli->json};
	const char *pos[1];
	int npos = 0;
	int prc = ev_opt_parse(&gguf_spec, &o, argc, argv, pos, &npos);
	if (prc)
		return ev_opt_exit(prc);
	if (o.pre_tokenizers) {
		if (npos || o.out || o.tensor || o.quantize) {
			fprintf(stderr, "evald engine gguf: --pre-tokenizers takes no FILE and no other option but --json\n");
			return EV_EXIT_USAGE;
		}
		return list_pre_tokenizers(o.json);
	}
	if (!npos) {
		fprintf(stderr, "evald engine gguf: a FILE (or FOLDER) is needed; see --help\n");
		return EV_EXIT_USAGE;
	}
	struct stat sb;
	if (stat(pos[0], &sb) == 0 && S_ISDIR(sb.st_mode)) { /* a checkpoint folder, written as a GGUF file */
		if (!o.out || o.tensor) {
			fprintf(stderr, "evald engine gguf: a folder takes --out FILE.gguf (and --quantize TYPE), not --tensor\n");
			return EV_EXIT_USAGE;
		}
		eng_gguf_export_opts eo = {.type = o.quantize};
		eng_gguf_export_stats st;
		if (eng_gguf_export(pos[0], o.out, &eo, &st))
			return ev_cli_fail("engine gguf"), 1;
		if (o.json) {
			ev_buf j = EV_BUF_INIT(1 << 16);
			ev_buf_puts(&j, "{\"out\":");
			ev_json_buf_str(&j, o.out);
			ev_buf_puts(&j, ",\"type\":");
			ev_json_buf_str(&j, o.quantize ? o.quantize : "as stored");
			ev_buf_puts(&j, ",\"architecture\":");
			ev_json_buf_str(&j, st.arch);
			ev_buf_puts(&j, ",\"pre_tokenizer\":");
			if (st.pre[0])
				ev_json_buf_str(&j, st.pre);
			else
				ev_buf_puts(&j, "null"); /* SentencePiece's */
			ev_buf_printf(&j, ",\"tensors\":%zu,\"converted\":%zu,\"fallbacks\":%zu,\"bytes_in\":%llu,"
			                  "\"bytes_out\":%llu}",
			              st.tensors, st.quantized, st.fallbacks, (unsigned long long)st.bytes_in,
			              (unsigned long long)st.bytes_out);
			printf("%s\n", j.data ? j.data : "{}");
			ev_buf_free(&j);
		} else
			printf("%s: %s (%s, %s%s), %zu tensors, %zu converted to another type (%zu in a fallback "
			       "type); tensor bytes %.1f MiB -> %.1f MiB\n",
			       o.out, o.quantize ? o.quantize : "weights as stored", st.arch,
			       st.pre[0] ? "pre-tokenizer " : "SentencePiece tokenizer", st.pre, st.tensors, st.quantized,
			       st.fallbacks, st.bytes_in / 1048576.0, st.bytes_out / 1048576.0);
		return 0;
	}
	if ((o.tensor || o.quantize) != !!o.out || (o.tensor && o.quantize)) {
		fprintf(stderr, "evald engine gguf: --out goes with one of --tensor or --quantize\n");
		return EV_EXIT_USAGE;
	}
	if (o.quantize) {
		eng_gguf_requant_stats st;
		if (eng_gguf_requantize(pos[0], o.out, o.quantize, &st))
			return ev_cli_fail("engine gguf"), 1;
		if (o.json) {
			ev_buf j = EV_BUF_INIT(1 << 16);
			ev_buf_puts(&j, "{\"out\":");
			ev_json_buf_str(&j, o.out);
			ev_buf_puts(&j, ",\"type\":");
			ev_json_buf_str(&j, o.quantize);
			ev_buf_printf(&j, ",\"converted\":%zu,\"kept\":%zu,\"fallbacks\":%zu,\"bytes_in\":%llu,\"bytes_out\":%llu}",
			              st.converted, st.kept, st.fallbacks, (unsigned long long)st.bytes_in,
			              (unsigned long long)st.bytes_out);
			printf("%s\n", j.data ? j.data : "{}");
			ev_buf_free(&j);
		} else
			printf("%s: %s, %zu tensors quantized (%zu in a fallback type), %zu kept as stored; tensor bytes "
			       "%.1f MiB -> %.1f MiB\n",
			       o.out, o.quantize, st.converted, st.fallbacks, st.kept, st.bytes_in / 1048576.0,
			       st.bytes_out / 1048576.0);
		return 0;
	}
	eng_gguf *g = NULL;
	if (eng_gguf_open(&g, pos[0]))
		return ev_cli_fail("engine gguf"), 1;
	int rc = 0;
	if (o.tensor) {
		const eng_gguf_tensor *t = eng_gguf_find_tensor(g, o.tensor);
		float *y = t ? malloc(t->elements * sizeof(float)) : NULL;
		if (!t)
			rc = ev_error_set(EV_E_NOTFOUND, "%s: no tensor '%s'", pos[0], o.tensor);
		else if (!y)
			rc = ev_error_set(EV_E_NOMEM, "out of memory for %llu values", (unsigned long long)t->elements);
		if (!rc) {
			eng_ggml_dequantize(y, t->data, t->type, t->elements);
			rc = ev_file_write(o.out, y, t->elements * sizeof(float));
		}
		free(y);
		eng_gguf_close(g);
		return rc ? (ev_cli_fail("engine gguf"), 1) : 0;
	}
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	ev_buf_printf(&b, "{\"version\":%u,\"alignment\":%llu,\"metadata\":{", g->version,
	              (unsigned long long)g->alignment);
	for (size_t i = 0; i < g->n_kv; i++) {
		ev_buf_puts(&b, i ? "," : "");
		ev_json_buf_strn(&b, g->kv[i].key.p, g->kv[i].key.n);
		ev_buf_putc(&b, ':');
		show_value(&b, &g->kv[i]);
	}
	ev_buf_puts(&b, "},\"tensors\":[");
	uint64_t bytes = 0, elems = 0;
	for (size_t i = 0; i < g->n_t; i++) {
		const eng_gguf_tensor *t = &g->t[i];
		ev_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
		ev_json_buf_strn(&b, t->name.p, t->name.n);
		ev_buf_printf(&b, ",\"type\":\"%s\",\"dims\":[", eng_ggml_type_name(t->type));
		for (int d = 0; d < t->ndim; d++)
			ev_buf_printf(&b, "%s%llu", d ? "," : "", (unsigned long long)t->dims[d]);
		ev_buf_printf(&b, "],\"bytes\":%llu}", (unsigned long long)t->bytes);
		bytes += t->bytes, elems += t->elements;
	}
	ev_buf_printf(&b, "],\"tensor_bytes\":%llu,\"elements\":%llu}", (unsigned long long)bytes,
	              (unsigned long long)elems);
	if (o.json) {
		printf("%s\n", b.data);
	} else {
		printf("%s: GGUF version %u, alignment %llu, %zu metadata keys, %zu tensors, %.1f M values in %.1f MiB "
		       "(%.2f bits a value)\n",
		       pos[0], g->version, (unsigned long long)g->alignment, g->n_kv, g->n_t, elems / 1e6, bytes / 1048576.0,
		       elems ? 8.0 * (double)bytes / (double)elems : 0.0);
		int counts[64] = {0};
		for (size_t i = 0; i < g->n_t; i++)
			if (g->t[i].type < 64)
				counts[g->t[i].type]++;
		printf("tensor types:");
		for (int k = 0; k < 64; k++)
			if (counts[k])
				printf(" %s x %d", eng_ggml_type_name((uint32_t)k), counts[k]);
		printf("\n");
		for (size_t i = 0; i < g->n_kv; i++) {
			ev_buf v = EV_BUF_INIT(1 << 12);
			show_value(&v, &g->kv[i]);
			printf("  %.*s = %s\n", (int)g->kv[i].key.n, g->kv[i].key.p, v.data ? v.data : "");
			ev_buf_free(&v);
		}
	}
	ev_buf_free(&b);
	eng_gguf_close(g);
	return 0;
}
