/*
 * engine/msa.c: MSA block-sparse attention (DESIGN.md, "MSA"): the
 * settings (config.json "msa" under the run's options under defaults),
 * the shared command-line flags, and the reference block selection, which
 * follows the definition word for word (block means re-read from the keys,
 * every candidate scored, top-k by repeated argmax). The fast selection
 * from the page key sums lives in msa_index.c, on the CPU kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

#define MSA_DEFAULT_BLOCK 64
#define MSA_DEFAULT_TOP_K 16
#define MSA_DEFAULT_SINK 1
#define MSA_DEFAULT_LOCAL 2
#define MSA_DEFAULT_DENSE_BELOW 8192

static long pick(long run, long cfg, long dflt)
{
	return run >= 0 ? run : cfg >= 0 ? cfg : dflt;
}

int eng_msa_setup(eng_model *m, const eng_attention_options *opt, int page_block, int *block)
{
	const eng_attention_options *cfg = &m->c.msa;
	eng_msa *a = &m->msa;
	memset(a, 0, sizeof(*a));
	if (opt->kind != ENG_ATTN_AUTO && opt->kind != ENG_ATTN_DENSE && opt->kind != ENG_ATTN_MSA)
		return ev_error_set(EV_E_INVALID, "attention: unknown kind %d", (int)opt->kind);
	a->on = opt->kind == ENG_ATTN_MSA || (opt->kind == ENG_ATTN_AUTO && m->c.has_msa);
	long b = pick(opt->block_size, cfg->block_size, page_block > 0 ? page_block : MSA_DEFAULT_BLOCK);
	if (page_block > 0 && b != page_block)
		return ev_error_set(EV_E_INVALID,
				    "attention: KV block_size %d differs from the MSA block_size %ld (one page is one block)",
				    page_block, b);
	a->block = (int)b;
	a->top_k = (int)pick(opt->top_k, cfg->top_k, MSA_DEFAULT_TOP_K);
	a->sink = (int)pick(opt->sink_blocks, cfg->sink_blocks, MSA_DEFAULT_SINK);
	a->local = (int)pick(opt->local_blocks, cfg->local_blocks, MSA_DEFAULT_LOCAL);
	a->dense_below = pick(opt->dense_below, cfg->dense_below, MSA_DEFAULT_DENSE_BELOW);
	if (a->block < 1 || a->block > 4096)
		return ev_error_set(EV_E_INVALID, "attention: msa block_size %d out of range [1, 4096]", a->block);
	if (a->top_k < 0 || a->sink < 0 || a->dense_below < 0)
		return ev_error_set(EV_E_INVALID, "attention: msa top_k, sink_blocks and dense_below must be >= 0");
	if (a->local < 1)
		return ev_error_set(EV_E_INVALID,
				    "attention: msa local_blocks must be >= 1 (the query's own block is a local block)");
	if (!(a->dense_layer = calloc((size_t)m->c.layers, sizeof(bool))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const eng_attention_options *dl = opt->n_dense_layers >= 0 ? opt : cfg;
	for (int i = 0; i < dl->n_dense_layers && i < ENG_MSA_MAX_DENSE_LAYERS; i++) {
		if (dl->dense_layers[i] < 0 || dl->dense_layers[i] >= m->c.layers)
			return ev_error_set(EV_E_INVALID, "attention: msa dense_layers: layer %d is not in [0, %d)",
					    dl->dense_layers[i], m->c.layers);
		a->dense_layer[dl->dense_layers[i]] = true;
	}
	*block = a->block;
	return 0;
}

void eng_msa_clear(eng_msa *a)
{
	if (!a)
		return;
	free(a->dense_layer);
	a->dense_layer = NULL;
}

bool eng_msa_sparse(const eng_model *m, int layer, long pos)
{
	const eng_msa *a = &m->msa;
	return a->on && !a->dense_layer[layer] && pos + 1 > a->dense_below;
}

void eng_model_get_attention(const eng_model *m, eng_attention_options *out)
{
	eng_attention_options d = ENG_ATTENTION_OPTIONS_INIT;
	*out = d;
	const eng_msa *a = &m->msa;
	out->kind = a->on || m->indexer ? ENG_ATTN_MSA : ENG_ATTN_DENSE;
	out->selector = m->indexer ? ENG_SEL_INDEXER : a->on ? ENG_SEL_MEAN : ENG_SEL_AUTO;
	out->block_size = a->block;
	out->top_k = a->top_k;
	out->sink_blocks = a->sink;
	out->local_blocks = a->local;
	out->dense_below = a->dense_below;
	out->n_dense_layers = 0;
	for (int l = 0; l < m->c.layers && out->n_dense_layers < ENG_MSA_MAX_DENSE_LAYERS; l++)
		if (a->dense_layer[l])
			out->dense_layers[out->n_dense_layers++] = l;
}

int eng_model_set_attention(eng_model *m, eng_attention_kind kind)
{
	if (kind != ENG_ATTN_DENSE && kind != ENG_ATTN_MSA)
		return ev_error_set(EV_E_INVALID, "set_attention: dense or msa");
	pthread_mutex_lock(&m->mu);
	if (m->kv.idim && !m->mean_selector) /* MiniMax-M3: MSA is its lightning indexer */
		m->indexer = kind == ENG_ATTN_MSA;
	else
		m->msa.on = kind == ENG_ATTN_MSA;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

/* Blocks attended whatever the scores: sinks and the local window. */
static void mark_always(const eng_msa *a, long cur, unsigned char *att)
{
	for (long b = 0; b <= cur; b++)
		att[b] = b < a->sink || b > cur - a->local;
}

void eng_msa_select_ref(const eng_model *m, const eng_seq *s, int layer, long pos, int g, const float *q,
			unsigned char *att, float *scores)
{
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	int B = p->block, hd = p->hd, group = m->c.heads / m->c.kv_heads;
	long cur = pos / B;
	mark_always(a, cur, att);
	/* index branch: every other block b < cur, scored by the group's
	 * queries against the mean of its keys (re-read from the page) */
	for (long b = 0; b < cur; b++) {
		if (att[b])
			continue;
		float score = 0;
		for (int h = g * group; h < (g + 1) * group; h++) {
			float d = 0;
			for (int j = 0; j < hd; j++) {
				float sum = 0;
				for (int t = 0; t < B; t++) {
					const unsigned char *k = eng_page_kraw(p, s->pages[b], layer, t);
					float x;
					eng_kv_load(p, &x, k + ((size_t)g * hd + j) * p->esize, 1);
					sum += x;
				}
				d += q[(size_t)h * hd + j] * (sum / (float)B);
			}
			score += d;
		}
		scores[b] = score;
	}
	/* top_k highest, ties to the lower block index (first found) */
	for (int r = 0; r < a->top_k; r++) {
		long best = -1;
		for (long b = 0; b < cur; b++)
			if (!att[b] && (best < 0 || scores[b] > scores[best]))
				best = b;
		if (best < 0)
			break;
		att[best] = 2;
	}
	for (long b = 0; b <= cur; b++)
		att[b] = att[b] != 0;
}

void eng_msa_index_put(float *k, float *box, long b, const float *sum, int kvh, int hd)
{
	size_t kd = (size_t)kvh * hd;
	memcpy(k + (size_t)b * kd, sum, kd * sizeof(float));
	if (!box)
		return;
	float *mx = box + (size_t)(b / ENG_MSA_SUPER) * 2 * kd, *mn = mx + kd;
	bool first = b % ENG_MSA_SUPER == 0;
	for (size_t i = 0; i < kd; i++) {
		float v = sum[i];
		if (first || isnan(v) || isnan(mx[i])) { /* NaN poisons the box: never skipped */
			mx[i] = first ? v : NAN;
			mn[i] = first ? v : NAN;
		} else {
			mx[i] = v > mx[i] ? v : mx[i];
			mn[i] = v < mn[i] ? v : mn[i];
		}
	}
}

int eng_msa_debug_blocks(eng_seq *s, int layer, long pos, int kv_head, const float *q, int *out, int cap, int *n)
{
	eng_model *m = s ? s->m : NULL;
	*n = 0;
	if (!m || layer < 0 || layer >= m->c.layers || pos < 0 || pos >= s->len || kv_head < 0 ||
	    kv_head >= m->c.kv_heads || !q)
		return ev_error_set(EV_E_INVALID, "msa_debug_blocks: bad arguments");
	long cur = pos / m->kv.block;
	int rc = 0, K = m->msa.top_k > 0 ? m->msa.top_k : 1;
	int *list = malloc(((size_t)cur + 1) * sizeof(int));
	unsigned char *att = malloc((size_t)cur + 1);
	float *sc = malloc(((size_t)cur + 1) * sizeof(float)), *qsum = malloc((size_t)m->kv.hd * sizeof(float));
	float *top = malloc((size_t)K * sizeof(float));
	int *topi = malloc((size_t)K * sizeof(int));
	if (!list || !att || !sc || !qsum || !top || !topi) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	pthread_mutex_lock(&m->mu);
	if (!eng_msa_sparse(m, layer, pos))
		memset(att, 1, (size_t)cur + 1);
	else if (m->be == &m->ref)
		eng_msa_select_ref(m, s, layer, pos, kv_head, q, att, sc);
	else {
		int nl = eng_msa_select_fast(m, s, layer, pos, kv_head, q, list, qsum, top, topi);
		memset(att, 0, (size_t)cur + 1);
		for (int i = 0; i < nl; i++)
			att[list[i]] = 1;
	}
	pthread_mutex_unlock(&m->mu);
	for (long b = 0; b <= cur; b++)
		if (att[b]) {
			if (*n == cap) {
				rc = ev_error_set(EV_E_LIMIT, "msa_debug_blocks: more than %d blocks", cap);
				goto done;
			}
			out[(*n)++] = (int)b;
		}
done:
	free(list), free(att), free(sc), free(qsum), free(top), free(topi);
	return rc;
}

/* ---- shared command-line flags ------------------------------------------ */

static int flag_long(long *out, const char *flag, const char *v, long lo, long hi)
{
	int64_t x;
	if (!v || !ev_parse_i64(v, &x) || x < lo || x > hi)
		return ev_error_set(EV_E_INVALID, "%s needs an integer in [%ld, %ld]", flag, lo, hi);
	*out = (long)x;
	return 0;
}

static int parse_layers(eng_attention_options *a, const char *flag, const char *v)
{
	a->n_dense_layers = 0;
	if (!v)
		return ev_error_set(EV_E_INVALID, "%s needs a value (e.g. 0,1; \"\" for none)", flag);
	const char *p = v;
	while (*p) {
		char *end;
		long x = strtol(p, &end, 10);
		if (end == p || x < 0 || x > 4096 || (*end && *end != ','))
			return ev_error_set(EV_E_INVALID, "%s: expected comma-separated layer indices, at '%s'", flag, p);
		if (a->n_dense_layers == ENG_MSA_MAX_DENSE_LAYERS)
			return ev_error_set(EV_E_LIMIT, "%s: more than %d layers", flag, ENG_MSA_MAX_DENSE_LAYERS);
		a->dense_layers[a->n_dense_layers++] = (int)x;
		p = *end ? end + 1 : end;
	}
	return 0;
}

static int parse_bytes(uint64_t *out, const char *flag, const char *v)
{
	char *end;
	if (!v || !*v)
		return ev_error_set(EV_E_INVALID, "%s needs a byte count (e.g. 512m, 8g)", flag);
	double x = strtod(v, &end);
	double mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1024.0, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1048576.0, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1073741824.0, end++;
	if (*end || !(x > 0) || x * mul > 1e18)
		return ev_error_set(EV_E_INVALID, "%s: '%s' is not a byte count (e.g. 512m, 8g)", flag, v);
	*out = (uint64_t)(x * mul);
	return 0;
}

int eng_options_parse_flag(eng_model_options *o, const char *flag, const char *v)
{
	eng_attention_options *a = &o->attention;
	long x = 0;
	int rc = 0;
	if (!strcmp(flag, "--attention")) {
		if (v && !strcmp(v, "dense"))
			a->kind = ENG_ATTN_DENSE;
		else if (v && !strcmp(v, "msa"))
			a->kind = ENG_ATTN_MSA;
		else
			return ev_error_set(EV_E_INVALID, "--attention needs dense or msa");
		return 1;
	}
	if (!strcmp(flag, "--backend")) {
		if (v && !strcmp(v, "cpu"))
			o->backend = ENG_BACKEND_CPU;
		else if (v && !strcmp(v, "cuda"))
			o->backend = ENG_BACKEND_CUDA;
		else
			return ev_error_set(EV_E_INVALID, "--backend needs cpu or cuda");
		return 1;
	}
	if (!strcmp(flag, "--msa-selector")) {
		if (v && !strcmp(v, "indexer"))
			a->selector = ENG_SEL_INDEXER;
		else if (v && !strcmp(v, "mean"))
			a->selector = ENG_SEL_MEAN;
		else
			return ev_error_set(EV_E_INVALID, "--msa-selector needs indexer or mean");
		return 1;
	}
	if (!strcmp(flag, "--kv-dtype")) {
		if (v && !strcmp(v, "f32"))
			o->kv_dtype = ENG_KV_F32;
		else if (v && !strcmp(v, "f16"))
			o->kv_dtype = ENG_KV_F16;
		else if (v && !strcmp(v, "bf16"))
			o->kv_dtype = ENG_KV_BF16;
		else
			return ev_error_set(EV_E_INVALID, "--kv-dtype needs f32, f16 or bf16");
		return 1;
	}
	if (!strcmp(flag, "--activation-bits")) {
		if (v && !strcmp(v, "16"))
			o->activation_bits = 16;
		else if (v && !strcmp(v, "8"))
			o->activation_bits = 8;
		else
			return ev_error_set(EV_E_INVALID, "--activation-bits needs 16 or 8");
		return 1;
	}
	if (!strcmp(flag, "--kv-max-bytes"))
		return (rc = parse_bytes(&o->kv_max_bytes, flag, v)) ? rc : 1;
	if (!strcmp(flag, "--msa-dense-layers"))
		return (rc = parse_layers(a, flag, v)) ? rc : 1;
	static const struct {
		const char *flag;
		long lo, hi;
	} nums[] = {{"--msa-block-size", 1, 4096},   {"--msa-top-k", 0, 1L << 20},
		    {"--msa-sink-blocks", 0, 1L << 20}, {"--msa-local-blocks", 1, 1L << 20},
		    {"--msa-dense-below", 0, 1L << 30}};
	for (int i = 0; i < (int)(sizeof(nums) / sizeof(nums[0])); i++) {
		if (strcmp(flag, nums[i].flag))
			continue;
		if ((rc = flag_long(&x, flag, v, nums[i].lo, nums[i].hi)))
			return rc;
		switch (i) {
		case 0: a->block_size = (int)x; break;
		case 1: a->top_k = (int)x; break;
		case 2: a->sink_blocks = (int)x; break;
		case 3: a->local_blocks = (int)x; break;
		default: a->dense_below = x; break;
		}
		return 1;
	}
	return 0;
}

const char *eng_options_usage(void)
{
	return "attention: [--attention dense|msa] [--msa-selector indexer|mean] [--msa-block-size B] [--msa-top-k K] [--msa-sink-blocks S]\n"
	       "           [--msa-local-blocks L] [--msa-dense-below N] [--msa-dense-layers 0,1]\n"
	       "KV cache:  [--kv-dtype f32|f16|bf16] [--kv-max-bytes N[k|m|g]]\n"
	       "CPU:       [--activation-bits 16|8] (K-quant and IQ4_XS weights against 16-bit activations, or 8-bit ones\n"
	       "           as llama.cpp: faster, less precise)\n";
}
