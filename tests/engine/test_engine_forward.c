/*
 * The forward pass: the fast CPU path against the reference oracle on a
 * random checkpoint of every architecture and weight dtype, a prompt fed
 * at once against the same prompt fed one token at a time, a batch of
 * sequences against each sequence alone, and the KV pages' key sums.
 */
#include <pthread.h>
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

static const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe", "minimax_m3"};

/* fast vs reference, prefill and step by step, for one arch, its sizes
 * and a dtype */
static void check_model(const char *arch, eng_mkmodel_sizes z, const char *dtype, double tol)
{
	char *dir = et_mkmodel("fwd", arch, &z, dtype, 7);
	/* MiniMax-M3's page is its index block (16 here) */
	int block = strcmp(arch, "minimax_m3") ? 8 : 0;
	eng_model *fast = et_load(dir, ENG_BACKEND_CPU, block), *ref = et_load(dir, ENG_BACKEND_REF, block);
	int n = 21; /* crosses two page boundaries at block 8 */
	int32_t *t = et_tokens(n, z.vocab, 3);
	size_t nv = (size_t)n * z.vocab;
	float *rp = et_logits(ref, t, n, 0), *rs = et_logits(ref, t, n, 1);
	float *fp = et_logits(fast, t, n, 0), *fs = et_logits(fast, t, n, 1), *f5 = et_logits(fast, t, n, 5);
	double e1 = et_rel_err(fp, rp, nv), e2 = et_rel_err(rs, rp, nv), e3 = et_rel_err(fs, rp, nv),
	       e4 = et_rel_err(f5, fp, nv);
	print_message("%-10s %-5s fast/ref %.2e  ref step/prefill %.2e  fast step/ref %.2e  fast 5-chunks %.2e\n", arch,
		      dtype, e1, e2, e3, e4);
	if (e1 > tol || e2 > tol || e3 > tol || e4 > tol)
		fail_msg("%s %s: relative error over %.1e", arch, dtype, tol);
	/* the fast path: step by step and in chunks, the bits of the prompt at once */
	assert_memory_equal(fs, fp, nv * sizeof(float));
	assert_memory_equal(f5, fp, nv * sizeof(float));
	/* the logits are not degenerate: positions differ and values spread */
	double sd = 0;
	for (int j = 0; j < z.vocab; j++)
		sd += (double)rp[j] * rp[j];
	assert_true(sqrt(sd / z.vocab) > 0.05);
	assert_true(et_rel_err(rp, rp + z.vocab, (size_t)z.vocab) > 0.01);
	free(rp), free(rs), free(fp), free(fs), free(f5), free(t);
	eng_model_free(fast);
	eng_model_free(ref);
	free(dir);
}

static void check_arch(const char *arch, const char *dtype, double tol)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	check_model(arch, z, dtype, tol);
}

static void fast_equals_reference_f32_every_arch(void **state)
{
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		check_arch(archs[i], "f32", 1e-5);
}

static void fast_equals_reference_half_weights(void **state)
{
	/* BF16 weights meet activations rounded to BF16 on the fast path
	 * (engine/cpu/bfdot.h), the reference keeps them f32: within that
	 * rounding; F16 weights meet f32 activations on both */
	check_arch("llama", "bf16", 1.5e-2);
	check_arch("qwen3_moe", "bf16", 1.5e-2);
	check_arch("qwen2", "f16", 1e-4);
	check_arch("mixtral", "f16", 1e-4);
	check_arch("minimax_m3", "bf16", 1.5e-2);
}

/* MiniMax-M3 past the indexer's top-k x block (4 x 16 here): the blocks
 * it chooses are the same on every path (reference and fast, all at once,
 * token by token, in chunks), and attending every key is another result. */
static void minimax_m3_indexer_paths_agree(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	z.layers = 3;
	char *dir = et_mkmodel("m3idx", "minimax_m3", &z, "f32", 5);
	eng_model *fast = et_load(dir, ENG_BACKEND_CPU, 0), *ref = et_load(dir, ENG_BACKEND_REF, 0);
	eng_model_info info;
	eng_model_get_info(fast, &info);
	assert_int_equal(info.block_size, 16); /* a page is one of the indexer's blocks */
	int n = 150;
	int32_t *t = et_tokens(n, z.vocab, 8);
	size_t nv = (size_t)n * z.vocab;
	float *rp = et_logits(ref, t, n, 0), *fp = et_logits(fast, t, n, 0), *fs = et_logits(fast, t, n, 1),
	      *f7 = et_logits(fast, t, n, 7);
	double e1 = et_rel_err(fp, rp, nv), e2 = et_rel_err(fs, rp, nv), e3 = et_rel_err(f7, rp, nv);
	print_message("minimax_m3 indexer, 150 tokens: fast/ref %.2e  step/ref %.2e  7-chunks/ref %.2e\n", e1, e2, e3);
	assert_true(e1 <= 1e-5 && e2 <= 1e-5 && e3 <= 1e-5);
	assert_int_equal(eng_model_set_attention(fast, ENG_ATTN_DENSE), 0);
	float *dense = et_logits(fast, t, n, 0);
	size_t early = (size_t)60 * z.vocab; /* within 4 blocks: the same */
	assert_true(et_rel_err(dense, rp, early) <= 1e-5);
	assert_true(et_rel_err(dense + nv - z.vocab, rp + nv - z.vocab, (size_t)z.vocab) > 1e-3);
	free(rp), free(fp), free(fs), free(f7), free(dense), free(t);
	eng_model_free(fast);
	eng_model_free(ref);
	free(dir);
}

/* MSA's other selector on an M3 checkpoint: --msa-selector mean gives its
 * sparse layers the mean selector's blocks (reference = fast), which
 * attends every key when top_k covers every block, and differs from the
 * indexer's choice when it does not; a Llama has no indexer to select. */
static void minimax_m3_mean_selector(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	z.layers = 3;
	char *dir = et_mkmodel("m3mean", "minimax_m3", &z, "f32", 5);
	int n = 150;
	int32_t *t = et_tokens(n, z.vocab, 8);
	size_t nv = (size_t)n * z.vocab;
	float *lg[5];
	for (int k = 0; k < 5; k++) {
		eng_model_options o = ENG_MODEL_OPTIONS_INIT;
		o.threads = 2;
		o.backend = k == 1 ? ENG_BACKEND_REF : ENG_BACKEND_CPU;
		o.attention.selector = k <= 2 ? ENG_SEL_MEAN : ENG_SEL_INDEXER;
		o.attention.dense_below = 0;
		o.attention.top_k = k == 2 ? 64 : 2;
		o.attention.kind = k == 4 ? ENG_ATTN_DENSE : ENG_ATTN_AUTO;
		eng_model *m = NULL;
		if (eng_model_load(&m, dir, &o) != 0)
			fail_msg("load: %s", ev_error_msg());
		eng_attention_options at;
		eng_model_get_attention(m, &at);
		assert_int_equal(at.kind, k == 4 ? ENG_ATTN_DENSE : ENG_ATTN_MSA);
		lg[k] = et_logits(m, t, n, 0);
		eng_model_free(m);
	}
	double fr = et_rel_err(lg[0], lg[1], nv), all = et_rel_err(lg[2], lg[4], nv), vs = et_rel_err(lg[0], lg[3], nv);
	print_message("m3 mean selector: fast/ref %.2e, top-k over every block/dense %.2e, mean/indexer %.2e\n", fr, all, vs);
	assert_true(fr <= 1e-5 && all <= 1e-5 && vs > 1e-3);
	for (int k = 0; k < 5; k++)
		free(lg[k]);
	free(t);
	free(dir);
	z.layers = 2;
	dir = et_mkmodel("llamasel", "llama", &z, "f32", 5);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.attention.selector = ENG_SEL_INDEXER;
	eng_model *m = NULL;
	assert_int_not_equal(eng_model_load(&m, dir, &o), 0);
	assert_non_null(strstr(ev_error_msg(), "--msa-selector indexer"));
	free(dir);
}

/* The fast path's choice (eng_index_scan over ranges, merged by
 * eng_index_compose) for a tile of rows and every index head. */
static void fast_choice(eng_model *m, const eng_row *rows, int nr, const float *iq, int nsplit, int *lists, int *nls)
{
	int kvh = m->kv.kvh, cap = m->c.index_topk;
	long span = 0;
	for (int r = 0; r < nr; r++)
		span = rows[r].pos / m->kv.block + 1 > span ? rows[r].pos / m->kv.block + 1 : span;
	eng_index_hit *hits = malloc((size_t)nsplit * nr * kvh * cap * sizeof *hits);
	int *nh = malloc((size_t)nsplit * nr * kvh * sizeof *nh);
	for (int part = 0; part < nsplit; part++)
		assert_int_equal(eng_index_scan(m, rows, nr, 1, iq, span * part / nsplit, span * (part + 1) / nsplit,
						hits + (size_t)part * nr * kvh * cap, nh + (size_t)part * nr * kvh, cap, NULL),
				 0);
	for (int q = 0; q < nr * kvh; q++) {
		const eng_index_hit *parts[64];
		int np[64];
		for (int part = 0; part < nsplit; part++) {
			parts[part] = hits + ((size_t)part * nr * kvh + q) * cap;
			np[part] = nh[(size_t)part * nr * kvh + q];
		}
		nls[q] = eng_index_compose(m, &rows[q / kvh], parts, np, nsplit, lists + (size_t)q * cap, cap);
	}
	free(hits), free(nh);
}

/* Compares the fast choice of random tiles with the definition's, row by
 * row and head by head; returns the queries compared. */
static int compare_choices(eng_model *m, eng_seq *s, int n, ev_rng *r, int trials, double zero_share)
{
	int D = m->kv.idim, kvh = m->kv.kvh, cap = m->c.index_topk, compared = 0;
	float *iq = malloc((size_t)ENG_INDEX_TILE * kvh * D * sizeof *iq);
	float *scores = malloc((size_t)(n / m->kv.block + 1) * sizeof(float));
	int *la = malloc((size_t)ENG_INDEX_TILE * kvh * cap * sizeof(int)), *lb = malloc((size_t)ENG_INDEX_TILE * kvh * cap * sizeof(int));
	int na[ENG_INDEX_TILE * 8], nb[ENG_INDEX_TILE * 8];
	for (int trial = 0; trial < trials; trial++) {
		int nr = 1 + (int)(ev_rng_uniform(r) * ENG_INDEX_TILE) % ENG_INDEX_TILE;
		eng_row rows[ENG_INDEX_TILE];
		for (int i = 0; i < nr; i++) {
			rows[i] = (eng_row){s, (long)(ev_rng_uniform(r) * n)};
			rows[i].pos = rows[i].pos >= n ? n - 1 : rows[i].pos;
		}
		double scale = trial % 7 == 0 ? 1e3 : 1.0;
		for (int j = 0; j < nr * kvh * D; j++)
			iq[j] = trial == 0 || ev_rng_uniform(r) < zero_share ? 0.0f : (float)((2 * ev_rng_uniform(r) - 1) * scale);
		int nsplit = 1 + trial % 5;
		fast_choice(m, rows, nr, iq, nsplit, lb, nb);
		for (int q = 0; q < nr * kvh; q++) {
			na[q] = eng_index_select_one(m, &rows[q / kvh], 1, iq + (size_t)q * D, la + (size_t)q * cap, cap, scores);
			assert_int_equal(na[q], nb[q]);
			for (int k = 0; k < na[q]; k++)
				if (la[(size_t)q * cap + k] != lb[(size_t)q * cap + k])
					fail_msg("trial %d pos %ld head %d split %d: block %d of the definition, %d of the fast scan",
						 trial, rows[q / kvh].pos, q % kvh, nsplit, la[(size_t)q * cap + k],
						 lb[(size_t)q * cap + k]);
			compared++;
		}
	}
	free(iq), free(scores), free(la), free(lb);
	return compared;
}

/* The fast path's bounded scan chooses exactly the definition's blocks:
 * tiles of random rows and queries (some huge, one zero: every score
 * ties), split into 1 to 5 ranges; then over keys written to tie: blocks
 * of zero keys (the recall checkpoint's fillers), copies of one block,
 * and a block one float step above another. */
static void minimax_m3_bounded_choice_equals_the_definition(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	z.layers = 2;
	char *dir = et_mkmodel("m3bound", "minimax_m3", &z, "f32", 9);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 0);
	int n = 400, D = m->kv.idim, B = m->kv.block;
	int32_t *t = et_tokens(n, z.vocab, 4);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, n, NULL), 0);
	ev_rng r;
	ev_rng_seed(&r, 3);
	int compared = compare_choices(m, s, n, &r, 200, 0.0);
	/* keys that tie: blocks 0-9 zero, 10-12 copies of one random block,
	 * block 13 the same with one value a float step up, the rest random */
	float *k = malloc((size_t)n * D * sizeof *k), proto[512];
	for (int j = 0; j < B * D; j++)
		proto[j % 512] = (float)(2 * ev_rng_uniform(&r) - 1);
	for (int p = 0; p < n; p++) {
		long b = p / B;
		for (int j = 0; j < D; j++) {
			float v = (float)(2 * ev_rng_uniform(&r) - 1);
			if (b < 10)
				v = 0;
			else if (b <= 13)
				v = proto[((p % B) * D + j) % 512];
			if (b == 13 && p % B == 3 && j == 0)
				v = nextafterf(v, 2.0f);
			k[(size_t)p * D + j] = v;
		}
	}
	eng_row *rows = malloc((size_t)n * sizeof *rows);
	for (int p = 0; p < n; p++)
		rows[p] = (eng_row){s, p};
	eng_index_store(m, rows, n, 1, k);
	compared += compare_choices(m, s, n, &r, 200, 0.5);
	/* near ties decided by rounding: for one query, blocks whose keys are
	 * all one vector (a box of one point, so the bound is the score up to
	 * rounding) scoring above the wide random blocks' scores but below their
	 * bounds, each a few float steps apart; the bound must keep them */
	float *iq = malloc((size_t)ENG_INDEX_TILE * m->kv.kvh * D * sizeof *iq);
	float *scores = malloc((size_t)(n / B + 1) * sizeof(float));
	int cap = m->c.index_topk, kvh = m->kv.kvh, *la = malloc((size_t)kvh * cap * sizeof(int)),
	    *lb = malloc((size_t)kvh * cap * sizeof(int)), nb[8];
	int near = 0;
	for (int trial = 0; trial < 300; trial++) {
		double qq = 0;
		for (int j = 0; j < D; j++) {
			iq[j] = (float)(2 * ev_rng_uniform(&r) - 1);
			qq += (double)iq[j] * iq[j];
		}
		for (int g = 1; g < kvh; g++)
			memcpy(iq + (size_t)g * D, iq, (size_t)D * sizeof *iq);
		for (int p = 0; p < n; p++) {
			long b = p / B;
			for (int j = 0; j < D; j++) {
				float v = (float)(2 * ev_rng_uniform(&r) - 1);
				if (b >= 14 && b < 22) { /* one vector a block: q * 4 / |q|^2, nudged */
					v = (float)(iq[j] * 4.0 / qq);
					for (int u = 0; u < (int)(b - 14) % 3 && j == (int)(b % D); u++)
						v = nextafterf(v, iq[j] > 0 ? 9.0f : -9.0f);
				}
				k[(size_t)p * D + j] = v;
			}
		}
		eng_index_store(m, rows, n, 1, k);
		eng_row row = {s, n - 1};
		fast_choice(m, &row, 1, iq, 1 + trial % 3, lb, nb);
		for (int g = 0; g < kvh; g++) {
			int na = eng_index_select_one(m, &row, 1, iq + (size_t)g * D, la, cap, scores);
			assert_int_equal(na, nb[g]);
			for (int i = 0; i < na; i++) {
				if (la[i] != lb[(size_t)g * cap + i])
					fail_msg("near ties, trial %d head %d: block %d of the definition, %d of the fast scan", trial,
						 g, la[i], lb[(size_t)g * cap + i]);
				near += la[i] >= 14 && la[i] < 22;
			}
		}
		compared += kvh;
	}
	assert_true(near > 0); /* the near-tie blocks were chosen */
	free(iq), free(scores), free(la), free(lb);
	print_message("bounded index scan: %d random queries choose the definition's blocks\n", compared);
	eng_seq_free(s);
	free(k), free(rows), free(t);
	eng_model_free(m);
	free(dir);
}

/* Groups of 2, 3 and 8 query heads on 1 or 3 KV heads (SmolLM2 has 9 on
 * 3), decoded on 2 workers that cannot share the KV heads evenly: token by
 * token gives the bits of the prompt at once and the reference's values
 * (the scores of groups under 4 go eight keys a reduction, dot1x8). */
static void uneven_kv_heads_decode_equals_prefill(void **state)
{
	(void)state;
	const int shapes[][2] = {{6, 3}, {9, 3}, {3, 1}, {2, 1}, {8, 1}};
	for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.vocab = 320;
		z.heads = shapes[c][0], z.kv_heads = shapes[c][1], z.head_dim = 16, z.hidden = 16 * shapes[c][0];
		check_model("llama", z, "f32", 1e-5);
	}
}

/* A long prompt spans several forward chunks and many pages. */
static void long_prompt_at_once_equals_token_by_token(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.hidden = 32;
	z.heads = 4;
	z.kv_heads = 1;
	z.intermediate = 48;
	char *dir = et_mkmodel("long", "qwen3", &z, "f32", 11);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 64);
	int n = 600;
	int32_t *t = et_tokens(n, z.vocab, 5);
	float *a = et_logits(m, t, n, 0), *b = et_logits(m, t, n, 1);
	double e = et_rel_err(a, b, (size_t)n * z.vocab);
	print_message("600 tokens: prefill vs step %.2e\n", e);
	assert_true(e <= 1e-5);
	free(a), free(b), free(t);
	eng_model_free(m);
	free(dir);
}

/* Contexts of more than one segment (att_seg) are attended a segment at a time,
 * the segments folded in order: a prompt at once (prefill tiles), fed
 * token by token on 2 workers (decode split a task a segment), on one
 * worker (a task folding its segments) and in chunks of 7 give the same
 * bits, on 3 KV heads and on 1, dense and within a sliding window. */
static void long_context_segments_equal_on_every_path(void **state)
{
	(void)state;
	for (int c = 0; c < 3; c++) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.vocab = 300;
		z.heads = 6, z.kv_heads = c == 1 ? 1 : 3, z.head_dim = 16, z.hidden = 96, z.intermediate = 48;
		char *dir = et_mkmodel("segments", c == 2 ? "mistral" : "llama", &z, "f32", 13 + c);
		if (c == 2) { /* a window of 300: 19 or 20 blocks attended, two segments */
			char *cfg = tu_path(dir, "config.json"), *text = NULL, *p;
			size_t len;
			assert_int_equal(ev_file_read(&text, &len, cfg, 1 << 20), 0);
			assert_non_null(p = strstr(text, "\"sliding_window\":null"));
			memcpy(p, "\"sliding_window\":300 ", 21);
			assert_int_equal(ev_file_write(cfg, text, len), 0);
			free(text), free(cfg);
		}
		eng_model *m2 = et_load(dir, ENG_BACKEND_CPU, 16), *m1 = NULL;
		eng_model_options o = ENG_MODEL_OPTIONS_INIT;
		o.backend = ENG_BACKEND_CPU;
		o.block_size = 16;
		o.threads = 1;
		if (eng_model_load(&m1, dir, &o) != 0)
			fail_msg("load: %s", ev_error_msg());
		int n = 560; /* 35 blocks of 16: segments of 16, 16 and 3 at once; token by token, every size 1-16 */
		int32_t *t = et_tokens(n, z.vocab, 7 + c);
		float *at_once = et_logits(m2, t, n, 0), *split = et_logits(m2, t, n, 1), *one = et_logits(m1, t, n, 1),
		      *chunks = et_logits(m2, t, n, 7);
		size_t bytes = (size_t)n * z.vocab * sizeof(float);
		const char *what[] = {"token by token on 2 workers", "token by token on 1", "in chunks of 7"};
		float *got[] = {split, one, chunks};
		for (int k = 0; k < 3; k++)
			for (size_t i = 0; memcmp(at_once, got[k], bytes) && i < (size_t)n * z.vocab; i++)
				if (memcmp(&at_once[i], &got[k][i], 4))
					fail_msg("case %d, %s: position %zu logit %zu is %.9g, at once %.9g", c, what[k], i / z.vocab,
						 i % z.vocab, got[k][i], at_once[i]);
		free(at_once), free(split), free(one), free(chunks), free(t);
		eng_model_free(m1);
		eng_model_free(m2);
		free(dir);
	}
}

/* Mistral's sliding window, set small, agrees on every path. */
static void sliding_window_paths_agree(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	char *dir = et_mkmodel("sw", "mistral", &z, "f32", 4);
	char *cfg = tu_path(dir, "config.json"), *text = NULL;
	size_t len;
	assert_int_equal(ev_file_read(&text, &len, cfg, 1 << 20), 0);
	char *p = strstr(text, "\"sliding_window\":null");
	assert_non_null(p);
	memcpy(p, "\"sliding_window\":6   ", 21);
	assert_int_equal(ev_file_write(cfg, text, len), 0);
	eng_model *fast = et_load(dir, ENG_BACKEND_CPU, 4), *ref = et_load(dir, ENG_BACKEND_REF, 4);
	int n = 17;
	int32_t *t = et_tokens(n, z.vocab, 9);
	float *rp = et_logits(ref, t, n, 0), *fs = et_logits(fast, t, n, 1);
	assert_true(et_rel_err(fs, rp, (size_t)n * z.vocab) <= 1e-5);
	/* and the window matters: the full-attention model differs late */
	eng_model_free(fast);
	memcpy(p, "\"sliding_window\":null", 21);
	assert_int_equal(ev_file_write(cfg, text, len), 0);
	fast = et_load(dir, ENG_BACKEND_CPU, 4);
	float *full = et_logits(fast, t, n, 0);
	size_t last = (size_t)(n - 1) * z.vocab;
	assert_true(et_rel_err(full + last, rp + last, (size_t)z.vocab) > 1e-3);
	assert_true(et_rel_err(full, rp, (size_t)z.vocab) <= 1e-5); /* position 0 is the same */
	free(rp), free(fs), free(full), free(t), free(text), free(cfg);
	eng_model_free(fast);
	eng_model_free(ref);
	free(dir);
}

/* Three sequences of different lengths in one batched forward give the
 * logits each gets alone. */
static void batch_of_sequences_equals_each_alone(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	char *dir = et_mkmodel("batch", "mixtral", &z, "f32", 21);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 8);
	int lens[3] = {5, 12, 1};
	int32_t *toks[3];
	eng_seq *seqs[3];
	for (int i = 0; i < 3; i++) {
		toks[i] = et_tokens(lens[i] + 1, z.vocab, 100 + i);
		assert_int_equal(eng_seq_new(&seqs[i], m), 0);
	}
	/* prefill all three together, then one decode step together */
	assert_int_equal(eng_forward_batch(m, seqs, (const int32_t *const *)toks, lens, 3), 0);
	const int32_t *next[3] = {toks[0] + lens[0], toks[1] + lens[1], toks[2] + lens[2]};
	int ones[3] = {1, 1, 1};
	assert_int_equal(eng_forward_batch(m, seqs, next, ones, 3), 0);
	for (int i = 0; i < 3; i++) {
		float *alone = et_logits(m, toks[i], lens[i] + 1, 0);
		double e = et_rel_err(eng_seq_logits(seqs[i]), alone + (size_t)lens[i] * z.vocab, (size_t)z.vocab);
		assert_true(e <= 1e-5);
		assert_int_equal(eng_seq_len(seqs[i]), lens[i] + 1);
		free(alone);
		free(toks[i]);
		eng_seq_free(seqs[i]);
	}
	/* the same sequence twice in one batch is refused */
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	eng_seq *two[2] = {s, s};
	int32_t one = 1;
	const int32_t *tt[2] = {&one, &one};
	int n1[2] = {1, 1};
	assert_int_equal(eng_forward_batch(m, two, tt, n1, 2), EV_E_INVALID);
	eng_seq_free(s);
	eng_model_free(m);
	free(dir);
}

/* Each page keeps the sum of its post-RoPE keys, also after truncation;
 * out-of-vocabulary tokens and context overflow are refused. */
static void pages_keep_key_sums_and_limits_hold(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.max_position = 40;
	char *dir = et_mkmodel("pages", "llama", &z, "f32", 2);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 16);
	int n = 37;
	int32_t *t = et_tokens(n, z.vocab, 1);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, n, NULL), 0);
	assert_int_equal(s->npages, 3);
	eng_kv_pool *p = &m->kv;
	size_t kd = (size_t)p->kvh * p->hd;
	for (int round = 0; round < 2; round++) {
		for (int pg = 0; pg < s->npages; pg++)
			for (int l = 0; l < z.layers; l++) {
				const float *sum = eng_page_ksum(p, s->pages[pg], l);
				for (size_t j = 0; j < kd; j++) {
					double acc = 0;
					for (int slot = 0; slot < s->pages[pg]->ntok; slot++)
						acc += eng_page_k(p, s->pages[pg], l, slot)[j];
					assert_true(fabs(acc - sum[j]) <= 1e-4 * (1 + fabs(acc)));
				}
			}
		assert_int_equal(eng_seq_truncate(s, 20), 0); /* second round: after truncation */
		assert_int_equal(s->npages, 2);
		assert_int_equal(s->pages[1]->ntok, 4);
	}
	/* refeeding after truncation gives the same logits as before */
	float *all = et_logits(m, t, n, 0);
	assert_int_equal(eng_forward(s, t + 20, n - 20, NULL), 0);
	assert_true(et_rel_err(eng_seq_logits(s), all + (size_t)(n - 1) * z.vocab, (size_t)z.vocab) <= 1e-5);
	int32_t bad = z.vocab;
	assert_int_equal(eng_forward(s, &bad, 1, NULL), EV_E_INVALID);
	assert_int_equal(eng_forward(s, t, 4, NULL), EV_E_LIMIT); /* 37 + 4 > 40 */
	assert_int_equal(eng_seq_len(s), n);
	free(all);
	free(t);
	eng_seq_free(s);
	eng_model_free(m);
	free(dir);
}

typedef struct {
	eng_model *m;
	const int32_t *t;
	int n;
	float *last;
	int rc;
} thread_job;

static void *thread_run(void *arg)
{
	thread_job *j = arg;
	eng_seq *s = NULL;
	j->rc = eng_seq_new(&s, j->m);
	for (int i = 0; !j->rc && i < j->n; i++)
		j->rc = eng_forward(s, j->t + i, 1, NULL);
	if (!j->rc)
		memcpy(j->last, eng_seq_logits(s), 300 * sizeof(float));
	eng_seq_free(s);
	return NULL;
}

/* Threads sharing one model, each with its own sequence, get the logits
 * they would get alone (forwards serialise on the model). */
static void threads_sharing_a_model_get_solo_results(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	char *dir = et_mkmodel("thr", "qwen2", &z, "f32", 8);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 4);
	enum { NT = 4, N = 12 };
	pthread_t th[NT];
	thread_job jobs[NT];
	int32_t *toks[NT];
	for (int i = 0; i < NT; i++) {
		toks[i] = et_tokens(N, z.vocab, 50 + i);
		jobs[i] = (thread_job){m, toks[i], N, malloc(300 * sizeof(float)), 0};
		assert_int_equal(pthread_create(&th[i], NULL, thread_run, &jobs[i]), 0);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rc, 0);
		float *alone = et_logits(m, toks[i], N, 0);
		assert_true(et_rel_err(jobs[i].last, alone + (size_t)(N - 1) * z.vocab, 300) <= 1e-6);
		free(alone), free(jobs[i].last), free(toks[i]);
	}
	eng_model_free(m);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fast_equals_reference_f32_every_arch),
		cmocka_unit_test(fast_equals_reference_half_weights),
		cmocka_unit_test(long_prompt_at_once_equals_token_by_token),
		cmocka_unit_test(uneven_kv_heads_decode_equals_prefill),
		cmocka_unit_test(minimax_m3_indexer_paths_agree),
		cmocka_unit_test(minimax_m3_bounded_choice_equals_the_definition),
		cmocka_unit_test(minimax_m3_mean_selector),
		cmocka_unit_test(sliding_window_paths_agree),
		cmocka_unit_test(batch_of_sequences_equals_each_alone),
		cmocka_unit_test(pages_keep_key_sums_and_limits_hold),
		cmocka_unit_test(threads_sharing_a_model_get_solo_results),
		cmocka_unit_test(long_context_segments_equal_on_every_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
