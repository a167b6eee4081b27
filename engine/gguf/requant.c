/*
 * engine/gguf/requant.c: a GGUF file written again with its weights in
 * another type (what llama.cpp's quantize tool does), so that a user with
 * an F16 or Q8_0 file can make the Q4_K_M one people run, and so that
 * benchmarks can compare the types on one model. Each weight is
 * dequantized to f32 by the plain path and quantized again by
 * eng_ggml_quantize (round to nearest per block, not llama.cpp's search).
 */
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_int.h"
#include "engine/gguf/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* The mixes llama.cpp names (its rules, as published in llama-quant.cpp):
 * Q4_K_M / Q5_K_M put output.weight in Q6_K, attn_v and ffn_down in Q6_K
 * in the layers that "use more bits" (the first and last eighth, and
 * every third in between), the rest in Q4_K / Q5_K. */
static bool more_bits(int layer, int n)
{
	return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
}

static int layer_of(const char *name)
{
	int l = -1;
	return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* A type for a row too short or long for its super-blocks (llama.cpp's
 * fallbacks, src/llama-quant.cpp): Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K ->
 * Q5_1, Q6_K -> Q8_0, the IQ types (IQ4_XS, IQ3, IQ2, IQ1) -> IQ4_NL. */
static uint32_t fallback(uint32_t t)
{
	return t == ENG_GGML_Q3_K || t == ENG_GGML_Q2_K ? ENG_GGML_Q4_0
	       : !strncmp(eng_ggml_type_name(t), "IQ", 2) ? ENG_GGML_IQ4_NL /* every IQ type */
	       : t == ENG_GGML_Q4_K ? ENG_GGML_Q5_0
	       : t == ENG_GGML_Q5_K ? ENG_GGML_Q5_1
	                            : ENG_GGML_Q8_0;
}

int eng_gguf_quant_target(const char *name, uint32_t *type, int *mix)
{
	*mix = 0;
	if (!strcmp(name, "Q4_K_M") || !strcmp(name, "Q5_K_M")) {
		*type = name[1] == '4' ? ENG_GGML_Q4_K : ENG_GGML_Q5_K;
		*mix = 1;
		return 0;
	}
	if (eng_ggml_type_from_name(name, type)) /* every type evald reads it also writes */
		return 0;
	char known[256];
	eng_ggml_type_names(known, sizeof known);
	return ev_error_set(EV_E_INVALID, "quantization type '%s' unknown (%s, Q4_K_M, Q5_K_M)", name, known);
}

/* general.file_type for a target: llama.cpp's llama_ftype numbers
 * (include/llama.h); a K-quant that is not a mix takes its "_S" value
 * (mostly that type), as llama.cpp has no all-Q4_K or all-Q5_K file type. */
uint32_t eng_gguf_file_type(uint32_t target, int mix)
{
	switch (target) {
	case ENG_GGML_F32: return 0;
	case ENG_GGML_F16: return 1;
	case ENG_GGML_Q4_0: return 2;
	case ENG_GGML_Q4_1: return 3;
	case ENG_GGML_Q8_0: return 7;
	case ENG_GGML_Q5_0: return 8;
	case ENG_GGML_Q5_1: return 9;
	case ENG_GGML_Q2_K: return 10;
	case ENG_GGML_Q3_K: return 11;
	case ENG_GGML_IQ4_NL: return 25;
	case ENG_GGML_IQ3_XXS: return 23;
	case ENG_GGML_IQ3_S: return 26;
	case ENG_GGML_IQ1_S: return 24;
	case ENG_GGML_IQ1_M: return 31;
	case ENG_GGML_IQ2_XXS: return 19;
	case ENG_GGML_IQ2_XS: return 20;
	case ENG_GGML_IQ2_S: return 28;
	case ENG_GGML_IQ4_XS: return 30;
	case ENG_GGML_Q4_K: return mix ? 15 : 14;
	case ENG_GGML_Q5_K: return mix ? 17 : 16;
	case ENG_GGML_Q6_K: return 18;
	default: return 32; /* BF16 */
	}
}

uint32_t eng_gguf_weight_type(const char *name, int ndim, uint64_t row, uint32_t stored, uint32_t target, int mix,
                              int layers, bool has_output)
{
	/* (a 3-D tensor is a MoE layer's experts stacked, matrices too) */
	if ((ndim != 2 && ndim != 3) || strlen(name) < 7 || strcmp(name + strlen(name) - 7, ".weight"))
		return stored;
	uint32_t want = target;
	if (mix) {
		int l = layer_of(name);
		/* the output matrix (the embedding when they are tied) */
		if (!strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight")))
			want = ENG_GGML_Q6_K;
		else if (l >= 0 && (strstr(name, ".attn_v.") || strstr(name, ".ffn_down")) && more_bits(l, layers))
			want = ENG_GGML_Q6_K;
	}
	if (row % (uint64_t)eng_ggml_type_block(want))
		want = fallback(want);
	if (row % (uint64_t)eng_ggml_type_block(want))
		want = ENG_GGML_F16; /* not whole 32-element blocks either */
	return want;
}

/* A file's tensors as the copy writes them: each one's type, made in turn */
typedef struct {
	const eng_gguf *g;
	uint32_t *to;   /* [n_t] */
	float *f;       /* scratch: a tensor's values */
	size_t cap;
} rq_job;

/* Tensor i's bytes: copied as stored, or dequantized (plain path) and quantized to its type */
static int rq_fill(void *ctx, size_t i, void *buf, size_t bytes)
{
	rq_job *j = ctx;
	const eng_gguf_tensor *t = &j->g->t[i];
	if (j->to[i] == t->type) {
		memcpy(buf, t->data, bytes);
		return 0;
	}
	if (t->elements > j->cap) {
		free(j->f);
		if (!(j->f = malloc(t->elements * sizeof *j->f))) {
			j->cap = 0;
			return ev_error_set(EV_E_NOMEM, "out of memory (tensor '%.*s', %llu elements)", (int)t->name.n, t->name.p,
			                    (unsigned long long)t->elements);
		}
		j->cap = t->elements;
	}
	eng_ggml_dequantize(j->f, t->data, t->type, t->elements);
	eng_ggml_quantize(buf, j->f, j->to[i], t->elements);
	return 0;
}

int eng_gguf_requantize(const char *in, const char *out, const char *type_name, eng_gguf_requant_stats *st)
{
	uint32_t target;
	int mix;
	int rc = eng_gguf_quant_target(type_name, &target, &mix);
	if (rc)
		return rc;
	eng_gguf *g = NULL;
	if ((rc = eng_gguf_open(&g, in)))
		return rc;
	memset(st, 0, sizeof *st);
	int layers = 0;
	for (size_t i = 0; i < g->n_t; i++) {
		char nm[256];
		snprintf(nm, sizeof nm, "%.*s", (int)g->t[i].name.n, g->t[i].name.p);
		int l = layer_of(nm);
		layers = l + 1 > layers ? l + 1 : layers;
	}
	eng_gguf_writer *w = NULL;
	rc = eng_gguf_writer_new(&w);
	/* metadata copied as stored, but for the alignment (the writer's own)
	 * and the file type, which names the new one (added if it was absent) */
	bool typed = false;
	for (size_t i = 0; i < g->n_kv && !rc; i++) {
		const eng_gguf_value *v = &g->kv[i];
		if (v->key.n == 17 && !memcmp(v->key.p, "general.alignment", 17))
			continue;
		if (v->key.n == 17 && !memcmp(v->key.p, "general.file_type", 17)) {
			rc = eng_gguf_put_u32(w, "general.file_type", eng_gguf_file_type(target, mix));
			typed = true;
			continue;
		}
		char *k = ev_strndup(v->key.p, v->key.n);
		rc = k ? eng_gguf_put_raw(w, k, v->type, v->raw, v->raw_len) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(k);
	}
	if (!rc && !typed)
		rc = eng_gguf_put_u32(w, "general.file_type", eng_gguf_file_type(target, mix));
	/* every tensor's entry first, then the file with each made in turn (one in memory) */
	rq_job j = {g, NULL, NULL, 0};
	if (!rc && !(j.to = malloc((g->n_t ? g->n_t : 1) * sizeof *j.to)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < g->n_t && !rc; i++) {
		const eng_gguf_tensor *t = &g->t[i];
		char nm[256];
		snprintf(nm, sizeof nm, "%.*s", (int)t->name.n, t->name.p);
		uint32_t to = eng_gguf_weight_type(nm, t->ndim, t->dims[0], t->type, target, mix, layers,
		                                   eng_gguf_find_tensor(g, "output.weight") != NULL);
		size_t bytes = to == t->type ? t->bytes : eng_ggml_bytes(to, t->elements);
		j.to[i] = to;
		st->bytes_in += t->bytes;
		st->bytes_out += bytes;
		if (to == t->type)
			st->kept++;
		else {
			st->converted++;
			if (to != target && !(mix && to == ENG_GGML_Q6_K))
				st->fallbacks++;
		}
		rc = eng_gguf_put_tensor_later(w, nm, to, t->dims, t->ndim, bytes);
	}
	if (!rc)
		rc = eng_gguf_write_with(w, out, rq_fill, &j);
	free(j.f), free(j.to);
	eng_gguf_writer_free(w);
	eng_gguf_close(g);
	return rc;
}
