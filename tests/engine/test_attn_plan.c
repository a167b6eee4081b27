/*
 * Attention plans (engine/attn_plan.c), the lists a device kernel follows:
 * attention computed over exactly the plan's blocks and positions, in the
 * reference's order, equals the reference attention op on dense, windowed,
 * MSA block-mean and indexer-list attention, with f32 and f16 KV pages.
 * The walk over the plan below is what the CUDA attention kernel does.
 */
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/attn_walk.h"
#include "tests/engine/engine_testutil.h"

#define BLK 16

static char *g_dir;
static eng_mkmodel_sizes g_z;

static int setup(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.heads = 4;
	z.kv_heads = 2;
	g_z = z;
	g_dir = tu_tmpdir("attn_plan");
	return eng_mkmodel(g_dir, "llama", &z, "f32", 5) == 0 ? 0 : -1;
}

/* Softmax attention of row i, head h over the plan: the reference's
 * arithmetic in the reference's order (positions ascending). */
static void plan_attend(eng_model *m, const eng_attn_plan *pl, const eng_row *rows, int i, int layer, int nh,
			const float *q, float *out)
{
	eng_kv_pool *p = &m->kv;
	int hd = p->hd, group = nh / p->kvh, B = p->block;
	float scale = 1.0f / sqrtf((float)hd);
	long pos = rows[i].pos, lo = pl->lo[i];
	eng_seq *s = rows[i].seq;
	float *sc = malloc(((size_t)pos + 1) * sizeof(float));
	for (int h = 0; h < nh; h++) {
		int g = h / group;
		size_t task = (size_t)i * p->kvh + g;
		int nb = pl->cnt[task], bl[4096];
		assert_true(nb <= 4096);
		for (int k = 0; k < nb; k++)
			bl[k] = eng_attn_plan_block(pl, (long)task, k);
		const float *qh = q + ((size_t)i * nh + h) * hd;
		float *oh = out + ((size_t)i * nh + h) * hd, mx = -INFINITY, sum = 0;
		for (int k = 0; k < nb; k++)
			for (long t = (long)bl[k] * B; t < (long)bl[k] * B + B; t++) {
				if (t < lo || t > pos)
					continue;
				float d = 0, kj;
				for (int j = 0; j < hd; j++) {
					eng_kv_load(p, &kj, (unsigned char *)eng_page_kraw(p, s->pages[t / B], layer, (int)(t % B)) +
								    ((size_t)g * hd + j) * p->esize, 1);
					d += qh[j] * kj;
				}
				sc[t] = d * scale;
				mx = sc[t] > mx ? sc[t] : mx;
			}
		for (int k = 0; k < nb; k++)
			for (long t = (long)bl[k] * B; t < (long)bl[k] * B + B; t++)
				if (t >= lo && t <= pos) {
					sc[t] = expf(sc[t] - mx);
					sum += sc[t];
				}
		memset(oh, 0, (size_t)hd * sizeof(float));
		for (int k = 0; k < nb; k++)
			for (long t = (long)bl[k] * B; t < (long)bl[k] * B + B; t++) {
				if (t < lo || t > pos)
					continue;
				float w = sc[t] / sum, vj;
				for (int j = 0; j < hd; j++) {
					eng_kv_load(p, &vj, (unsigned char *)eng_page_vraw(p, s->pages[t / B], layer, (int)(t % B)) +
								    ((size_t)g * hd + j) * p->esize, 1);
					oh[j] += w * vj;
				}
			}
	}
	free(sc);
}

static const unsigned char *host_page(void *ctx, int row, long block)
{
	const eng_row *rows = ctx;
	return rows[row].seq->pages[block]->data;
}

/* One model setting: a 300-token sequence, 12 query rows at random
 * positions (one at the last), each case's plan walked and compared. */
static void check(eng_attention_kind kind, eng_kv_dtype kvd, long window, bool with_lists)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = ENG_BACKEND_REF;
	o.threads = 1;
	o.kv_dtype = kvd;
	o.attention.kind = kind;
	o.attention.block_size = BLK;
	o.attention.top_k = 3;
	o.attention.sink_blocks = 1;
	o.attention.local_blocks = 1;
	o.attention.dense_below = 0;
	eng_model *m = NULL;
	if (eng_model_load(&m, g_dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	int len = 300, n = 12, nh = m->c.heads, hd = m->c.head_dim, kvh = m->c.kv_heads, nlist = 6;
	int32_t *t = et_tokens(len, g_z.vocab, 21);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, len, NULL), 0);
	ev_rng r;
	ev_rng_seed(&r, 99 + (uint64_t)kind * 7 + (uint64_t)window);
	eng_row rows[12];
	float *q = malloc((size_t)n * nh * hd * sizeof(float)), *ref = malloc((size_t)n * nh * hd * sizeof(float));
	float *got = malloc((size_t)n * nh * hd * sizeof(float));
	int *lists = malloc((size_t)n * kvh * nlist * sizeof(int)), *nls = malloc((size_t)n * kvh * sizeof(int));
	for (int i = 0; i < n; i++) {
		rows[i].seq = s;
		rows[i].pos = i == n - 1 ? len - 1 : (long)ev_rng_below(&r, (uint64_t)len);
		for (int g = 0; g < kvh; g++) {
			/* ascending distinct blocks up to the row's own; now and then
			 * none given (-1: the row's own choice) */
			long cur = rows[i].pos / BLK;
			int c = 0;
			for (long b = 0; b <= cur && c < nlist; b++)
				if (b == cur || ev_rng_below(&r, 3) == 0)
					lists[((size_t)i * kvh + g) * nlist + c++] = (int)b;
			nls[(size_t)i * kvh + g] = ev_rng_below(&r, 5) == 0 ? -1 : c;
		}
	}
	for (size_t k = 0; k < (size_t)n * nh * hd; k++)
		q[k] = (float)(ev_rng_uniform(&r) * 2 - 1);
	int layer = m->c.layers - 1;
	assert_int_equal(m->ref.reserve(&m->ref, len), 0);
	m->ref.attention(&m->ref, ref, q, rows, n, layer, nh, window, with_lists ? lists : NULL, nls, nlist);
	eng_attn_plan pl = {0};
	bool needs = eng_attn_plan_needs_q(m, rows, n, layer, with_lists ? lists : NULL, nls);
	if (kind == ENG_ATTN_DENSE || !with_lists) /* the queries are read for MSA's own choice only */
		assert_int_equal(needs, kind == ENG_ATTN_MSA);
	assert_int_equal(eng_attn_plan_build(&pl, m, rows, n, layer, window, with_lists ? lists : NULL, nls, nlist,
					     needs ? q : NULL, nh),
			 0);
	long listed = 0;
	for (int i = 0; i < n; i++) {
		plan_attend(m, &pl, rows, i, layer, nh, q, got);
		for (int g = 0; g < kvh; g++)
			listed += pl.cnt[(size_t)i * kvh + g];
	}
	double err = et_rel_err(got, ref, (size_t)n * nh * hd);
	print_message("attention %s, kv %s, window %ld, lists %s: %ld blocks listed, error %.3g\n",
		      kind == ENG_ATTN_MSA ? "msa" : "dense", kvd == ENG_KV_F16 ? "f16" : "f32", window,
		      with_lists ? "yes" : "no", listed, err);
	assert_true(err == 0.0);
	/* split into parts and merged (what the device kernel does): the
	 * reference's answer up to the online softmax's rounding, for parts of
	 * one block, three, and more than any list holds; every list covered
	 * once, in order */
	int parts_of[] = {1, 3, 1000};
	for (int k = 0; k < 3; k++) {
		assert_int_equal(eng_attn_plan_split(&pl, parts_of[k]), 0);
		for (int task = 0; task < n * kvh; task++) {
			int at = 0;
			for (int it = pl.ifirst[task]; it < pl.ifirst[task] + pl.icount[task]; it++) {
				assert_int_equal(pl.items[it].first, at);
				assert_true(pl.items[it].count >= (parts_of[k] < pl.cnt[task] ? parts_of[k] : 1));
				at += pl.items[it].count;
			}
			assert_int_equal(at, pl.cnt[task]);
		}
		long posv[12];
		for (int i = 0; i < n; i++)
			posv[i] = rows[i].pos;
		memset(got, 0, (size_t)n * nh * hd * sizeof(float));
		attn_walk(got, q, n, nh, kvh, hd, (int)m->kv.dtype, (size_t)layer * m->kv.layer_bytes,
			  (size_t)layer * m->kv.layer_bytes + (size_t)BLK * kvh * hd * m->kv.esize, BLK, posv, pl.lo, &pl,
			  pl.items, pl.ifirst, pl.icount, 1.0f / sqrtf((float)hd), host_page, rows);
		double es = et_rel_err(got, ref, (size_t)n * nh * hd);
		print_message("  split into parts of %d blocks: %d items, error %.3g\n", parts_of[k], pl.nitems, es);
		assert_true(es < 1e-6);
	}
	/* the plan lists no block that is not read: each holds a position in
	 * [lo, pos] */
	for (int i = 0; i < n; i++)
		for (int g = 0; g < kvh; g++) {
			long task = (long)i * kvh + g;
			for (int k = 0; k < pl.cnt[task]; k++) {
				long b = eng_attn_plan_block(&pl, task, k);
				assert_true(b * BLK + BLK - 1 >= pl.lo[i] || with_lists);
				assert_true(b * BLK <= rows[i].pos);
			}
			/* dense lists are ranges: nothing stored for them */
			if (kind == ENG_ATTN_DENSE && !with_lists)
				assert_int_equal(pl.first[task], pl.lo[i] / BLK);
		}
	if (kind == ENG_ATTN_DENSE && !with_lists)
		assert_int_equal(pl.off[(size_t)n * kvh], 0);
	eng_attn_plan_free(&pl);
	free(q), free(ref), free(got), free(lists), free(nls), free(t);
	eng_seq_free(s);
	eng_model_free(m);
}

static void plan_equals_reference_dense(void **state)
{
	(void)state;
	check(ENG_ATTN_DENSE, ENG_KV_F32, 0, false);
	check(ENG_ATTN_DENSE, ENG_KV_F16, 0, false);
}

static void plan_equals_reference_windowed(void **state)
{
	(void)state;
	check(ENG_ATTN_DENSE, ENG_KV_F32, 37, false);
	check(ENG_ATTN_DENSE, ENG_KV_F32, 16, false);
}

static void plan_equals_reference_msa_block_means(void **state)
{
	(void)state;
	check(ENG_ATTN_MSA, ENG_KV_F32, 0, false);
	check(ENG_ATTN_MSA, ENG_KV_F16, 0, false);
}

static void plan_equals_reference_indexer_lists(void **state)
{
	(void)state;
	check(ENG_ATTN_DENSE, ENG_KV_F32, 0, true);
	check(ENG_ATTN_MSA, ENG_KV_F32, 0, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_equals_reference_dense),
		cmocka_unit_test(plan_equals_reference_windowed),
		cmocka_unit_test(plan_equals_reference_msa_block_means),
		cmocka_unit_test(plan_equals_reference_indexer_lists),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
