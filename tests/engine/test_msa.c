/*
 * MSA block-sparse attention (DESIGN.md "MSA"): with top_k at least the
 * number of blocks it equals dense attention; a prompt fed at once equals
 * it fed token by token; the fast path picks the blocks the reference
 * picks and gives its logits; dense_below, dense_layers and config.json's
 * "msa" are respected; bad settings are refused.
 */
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

#define BLK 16

static char *g_dir;
static eng_mkmodel_sizes g_z;

static eng_model *load_msa(eng_backend_kind be, eng_attention_kind kind, int top_k, long dense_below,
			   const char *dense_layers)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = be;
	o.threads = 2;
	o.attention.kind = kind;
	o.attention.block_size = BLK;
	o.attention.top_k = top_k;
	o.attention.sink_blocks = 1;
	o.attention.local_blocks = 2;
	o.attention.dense_below = dense_below;
	if (dense_layers)
		assert_int_equal(eng_options_parse_flag(&o, "--msa-dense-layers", dense_layers), 1);
	eng_model *m = NULL;
	if (eng_model_load(&m, g_dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	return m;
}

static int setup(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.heads = 4;
	z.kv_heads = 2;
	g_z = z;
	g_dir = tu_tmpdir("msa");
	if (eng_mkmodel(g_dir, "llama", &z, "f32", 11) != 0)
		return -1;
	return 0;
}

static void msa_with_topk_over_blocks_equals_dense(void **state)
{
	int n = 200; /* 13 blocks of 16 */
	int32_t *t = et_tokens(n, g_z.vocab, 5);
	size_t nv = (size_t)n * g_z.vocab;
	for (int be = 0; be < 2; be++) {
		eng_backend_kind k = be ? ENG_BACKEND_REF : ENG_BACKEND_CPU;
		eng_model *d = load_msa(k, ENG_ATTN_DENSE, 16, 0, NULL), *s = load_msa(k, ENG_ATTN_MSA, 13, 0, NULL);
		float *ld = et_logits(d, t, n, 0), *ls = et_logits(s, t, n, 0);
		/* the same blocks in the same order: bitwise equal on each path */
		assert_memory_equal(ld, ls, nv * sizeof(float));
		eng_model_free(d), eng_model_free(s);
		free(ld), free(ls);
	}
	free(t);
}

static void msa_prefill_equals_token_by_token_and_fast_equals_reference(void **state)
{
	int n = 180;
	int32_t *t = et_tokens(n, g_z.vocab, 9);
	size_t nv = (size_t)n * g_z.vocab;
	eng_model *f = load_msa(ENG_BACKEND_CPU, ENG_ATTN_MSA, 2, 0, NULL);
	eng_model *r = load_msa(ENG_BACKEND_REF, ENG_ATTN_MSA, 2, 0, NULL);
	eng_model *d = load_msa(ENG_BACKEND_CPU, ENG_ATTN_DENSE, 2, 0, NULL);
	float *fp = et_logits(f, t, n, 0), *f1 = et_logits(f, t, n, 1), *f7 = et_logits(f, t, n, 7);
	float *rp = et_logits(r, t, n, 0), *r1 = et_logits(r, t, n, 1), *dp = et_logits(d, t, n, 0);
	assert_memory_equal(fp, f1, nv * sizeof(float));
	assert_memory_equal(fp, f7, nv * sizeof(float));
	assert_memory_equal(rp, r1, nv * sizeof(float));
	double e = et_rel_err(fp, rp, nv), ed = et_rel_err(fp, dp, nv);
	print_message("msa fast/ref %.2e, msa/dense %.2e\n", e, ed);
	assert_true(e < 1e-4);
	/* and sparse really is sparse: 5 of up to 12 blocks differ from dense */
	assert_true(ed > 1e-3);
	/* positions in the first 3 blocks (sink + 2 local) see everything */
	assert_memory_equal(fp, dp, (size_t)3 * BLK * g_z.vocab * sizeof(float));
	free(fp), free(f1), free(f7), free(rp), free(r1), free(dp), free(t);
	eng_model_free(f), eng_model_free(r), eng_model_free(d);
}

/* Decoding one row over more than 1024 blocks splits each index scan across
 * the workers and merges their top-k lists (engine/cpu/attention.c): the logits
 * must be those of the prefill, whose tiles scan in one piece. */
static void msa_split_decode_scan_equals_prefill(void **state)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 4; /* more workers than (rows x KV heads) in decode */
	o.attention.kind = ENG_ATTN_MSA;
	o.attention.block_size = 2;
	o.attention.top_k = 3;
	o.attention.sink_blocks = 1;
	o.attention.local_blocks = 1;
	o.attention.dense_below = 0;
	eng_model *m = NULL;
	if (eng_model_load(&m, g_dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	int n = 4096; /* positions past 2048 are past 1024 blocks of 2 */
	int32_t *t = et_tokens(n, g_z.vocab, 21);
	float *pre = et_logits(m, t, n, 0), *one = et_logits(m, t, n, 1);
	assert_memory_equal(pre, one, (size_t)n * g_z.vocab * sizeof(float));
	free(pre), free(one), free(t);
	eng_model_free(m);
}

static void msa_fast_block_choice_equals_reference_on_random_queries(void **state)
{
	int n = 400; /* 25 blocks */
	int32_t *t = et_tokens(n, g_z.vocab, 13);
	eng_model *m = load_msa(ENG_BACKEND_CPU, ENG_ATTN_MSA, 4, 0, NULL);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, n, NULL), 0);
	int hd = m->c.head_dim, nh = m->c.heads;
	float *q = malloc((size_t)nh * hd * sizeof(float));
	ev_rng r;
	ev_rng_seed(&r, 77);
	int fb[64], rb[64], nf = 0, nr = 0, checked = 0, differ_from_local = 0;
	for (int trial = 0; trial < 200; trial++) {
		for (int i = 0; i < nh * hd; i++)
			q[i] = (float)(ev_rng_uniform(&r) * 2 - 1);
		long pos = (long)ev_rng_below(&r, (uint64_t)n);
		int layer = (int)ev_rng_below(&r, (uint64_t)m->c.layers), g = (int)ev_rng_below(&r, 2);
		assert_int_equal(eng_model_set_backend(m, ENG_BACKEND_CPU), 0);
		assert_int_equal(eng_msa_debug_blocks(s, layer, pos, g, q, fb, 64, &nf), 0);
		assert_int_equal(eng_model_set_backend(m, ENG_BACKEND_REF), 0);
		assert_int_equal(eng_msa_debug_blocks(s, layer, pos, g, q, rb, 64, &nr), 0);
		assert_int_equal(nf, nr);
		assert_memory_equal(fb, rb, (size_t)nf * sizeof(int));
		long cur = pos / BLK;
		int want = (int)(cur + 1 < 1 + 2 + 4 ? cur + 1 : 1 + 2 + 4);
		assert_int_equal(nf, want);
		checked++;
		differ_from_local += cur >= 8 && fb[1] != 1; /* a selected block beyond the sink */
	}
	print_message("%d random queries, same blocks; %d chose far blocks\n", checked, differ_from_local);
	assert_true(differ_from_local > 10);
	/* ties go to the lower index: a zero query scores every block 0 */
	memset(q, 0, (size_t)nh * hd * sizeof(float));
	for (int be = 0; be < 2; be++) {
		assert_int_equal(eng_model_set_backend(m, be ? ENG_BACKEND_REF : ENG_BACKEND_CPU), 0);
		assert_int_equal(eng_msa_debug_blocks(s, 0, 399, 0, q, fb, 64, &nf), 0);
		int expect[] = {0, 1, 2, 3, 4, 23, 24};
		assert_int_equal(nf, 7);
		assert_memory_equal(fb, expect, sizeof(expect));
	}
	free(q), free(t);
	eng_seq_free(s);
	eng_model_free(m);
}

static void msa_respects_dense_below_and_dense_layers(void **state)
{
	int n = 160, below = 100;
	int32_t *t = et_tokens(n, g_z.vocab, 21);
	size_t V = (size_t)g_z.vocab;
	eng_model *d = load_msa(ENG_BACKEND_CPU, ENG_ATTN_DENSE, 1, 0, NULL);
	eng_model *b = load_msa(ENG_BACKEND_CPU, ENG_ATTN_MSA, 1, below, NULL);
	eng_model *all = load_msa(ENG_BACKEND_CPU, ENG_ATTN_MSA, 1, 0, "0,1");
	eng_model *one = load_msa(ENG_BACKEND_CPU, ENG_ATTN_MSA, 1, 0, "1");
	float *ld = et_logits(d, t, n, 0), *lb = et_logits(b, t, n, 0), *la = et_logits(all, t, n, 0);
	float *lo = et_logits(one, t, n, 0);
	/* positions t with t + 1 <= dense_below are dense */
	assert_memory_equal(ld, lb, (size_t)below * V * sizeof(float));
	assert_true(et_rel_err(lb + (size_t)(n - 1) * V, ld + (size_t)(n - 1) * V, V) > 1e-4);
	assert_memory_equal(ld, la, (size_t)n * V * sizeof(float));
	assert_true(et_rel_err(lo + (size_t)(n - 1) * V, ld + (size_t)(n - 1) * V, V) > 1e-4);
	/* the debug listing agrees: layer 1 dense, layer 0 sparse */
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, one), 0);
	assert_int_equal(eng_forward(s, t, n, NULL), 0);
	float q[256] = {0};
	int blocks[32], nb = 0;
	assert_int_equal(eng_msa_debug_blocks(s, 1, n - 1, 0, q, blocks, 32, &nb), 0);
	assert_int_equal(nb, (n - 1) / BLK + 1);
	assert_int_equal(eng_msa_debug_blocks(s, 0, n - 1, 0, q, blocks, 32, &nb), 0);
	assert_int_equal(nb, 1 + 1 + 2);
	/* the keys and values a decode step reads (bench engine's bound) are
	 * the positions of the blocks listed, layer by layer, up to the query */
	size_t per = 2 * (size_t)g_z.kv_heads * (size_t)(g_z.hidden / g_z.heads) * sizeof(float);
	eng_model *ms[2] = {one, b};
	for (int k = 0; k < 2; k++)
		for (long ctx = 1; ctx <= n; ctx += ctx < 40 ? 13 : 7) {
			eng_seq *sk = NULL;
			assert_int_equal(eng_seq_new(&sk, ms[k]), 0);
			assert_int_equal(eng_forward(sk, t, (int)ctx, NULL), 0);
			uint64_t want = 0;
			for (int l = 0; l < g_z.layers; l++) {
				assert_int_equal(eng_msa_debug_blocks(sk, l, ctx - 1, 0, q, blocks, 32, &nb), 0);
				for (int e = 0; e < nb; e++)
					want += (uint64_t)((long)(blocks[e] + 1) * BLK < ctx ? BLK : ctx - (long)blocks[e] * BLK) * per;
			}
			bool exact = false;
			assert_int_equal(eng_model_kv_read_bytes(ms[k], ctx, &exact), want);
			assert_true(exact);
			eng_seq_free(sk);
		}
	assert_int_equal(eng_model_kv_read_bytes(one, 0, NULL), 0);
	assert_int_equal(eng_model_kv_read_bytes(one, -5, NULL), 0);
	eng_seq_free(s);
	eng_attention_options a;
	eng_model_get_attention(one, &a);
	assert_int_equal(a.kind, ENG_ATTN_MSA);
	assert_int_equal(a.n_dense_layers, 1);
	assert_int_equal(a.dense_layers[0], 1);
	free(ld), free(lb), free(la), free(lo), free(t);
	eng_model_free(d), eng_model_free(b), eng_model_free(all), eng_model_free(one);
}

static void msa_settings_come_from_config_and_bad_ones_are_refused(void **state)
{
	char *dir = tu_tmpdir("msacfg");
	assert_int_equal(eng_mkmodel(dir, "llama", &g_z, "f32", 3), 0);
	char *path = tu_path(dir, "config.json"), *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, path, 1 << 20), 0);
	char *brace = strrchr(text, '}');
	assert_non_null(brace);
	*brace = 0;
	ev_buf b = EV_BUF_INIT(1 << 20);
	ev_buf_printf(&b, "%s, \"msa\": {\"block_size\": 32, \"top_k\": 3, \"sink_blocks\": 0, \"local_blocks\": 1, "
			  "\"dense_below\": 500, \"dense_layers\": [1]}}",
		      text);
	assert_int_equal(ev_file_write(path, b.data, b.len), 0);
	eng_model *m = NULL;
	assert_int_equal(eng_model_load(&m, dir, NULL), 0);
	eng_attention_options a;
	eng_model_get_attention(m, &a);
	assert_int_equal(a.kind, ENG_ATTN_MSA);
	assert_int_equal(a.block_size, 32);
	assert_int_equal(a.top_k, 3);
	assert_int_equal(a.sink_blocks, 0);
	assert_int_equal(a.local_blocks, 1);
	assert_int_equal(a.dense_below, 500);
	assert_int_equal(a.n_dense_layers, 1);
	eng_model_info in;
	eng_model_get_info(m, &in);
	assert_int_equal(in.block_size, 32);
	eng_model_free(m);
	/* options win over config.json; --attention dense turns it off */
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	assert_int_equal(eng_options_parse_flag(&o, "--msa-top-k", "9"), 1);
	assert_int_equal(eng_options_parse_flag(&o, "--attention", "dense"), 1);
	assert_int_equal(eng_options_parse_flag(&o, "--threads", "2"), 0);
	assert_true(eng_options_parse_flag(&o, "--msa-top-k", "x") < 0);
	assert_true(eng_options_parse_flag(&o, "--attention", "sparse") < 0);
	assert_true(eng_options_parse_flag(&o, "--msa-local-blocks", "0") < 0);
	assert_int_equal(eng_model_load(&m, dir, &o), 0);
	eng_model_get_attention(m, &a);
	assert_int_equal(a.kind, ENG_ATTN_DENSE);
	assert_int_equal(a.top_k, 9);
	eng_model_free(m);
	/* a page size other than the MSA block is refused, and so is a bad config */
	o.block_size = 64;
	assert_true(eng_model_load(&m, dir, &o) < 0);
	assert_non_null(strstr(ev_error_msg(), "block_size"));
	ev_buf_reset(&b);
	ev_buf_printf(&b, "%s, \"msa\": {\"local_blocks\": 0}}", text);
	assert_int_equal(ev_file_write(path, b.data, b.len), 0);
	assert_true(eng_model_load(&m, dir, NULL) < 0);
	print_message("%s\n", ev_error_msg());
	assert_non_null(strstr(ev_error_msg(), "local_blocks"));
	ev_buf_reset(&b);
	ev_buf_printf(&b, "%s, \"msa\": {\"dense_layers\": [7]}}", text);
	assert_int_equal(ev_file_write(path, b.data, b.len), 0);
	assert_true(eng_model_load(&m, dir, NULL) < 0);
	assert_non_null(strstr(ev_error_msg(), "dense_layers"));
	ev_buf_free(&b);
	free(text), free(path), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(msa_with_topk_over_blocks_equals_dense),
		cmocka_unit_test(msa_prefill_equals_token_by_token_and_fast_equals_reference),
		cmocka_unit_test(msa_fast_block_choice_equals_reference_on_random_queries),
		cmocka_unit_test(msa_split_decode_scan_equals_prefill),
		cmocka_unit_test(msa_respects_dense_below_and_dense_layers),
		cmocka_unit_test(msa_settings_come_from_config_and_bad_ones_are_refused),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
