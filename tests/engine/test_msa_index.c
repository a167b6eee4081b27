/*
 * The MSA index scan's superblock bound (eng_msa_index_topk): skipping a
 * superblock whose box of key sums proves none of its blocks can be
 * chosen must choose exactly what the plain scan chooses, scores bit for
 * bit: on random sums, on near and exact ties (the lower block wins), on
 * a block one float step above the k-th (only the rounding margin keeps
 * it), on the recall checkpoint's shape (scores exactly 0 but for a few
 * needles: whole superblocks skipped), on NaN, infinity and huge sums,
 * and on ranges that start and end inside superblocks.
 */
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

typedef struct {
	float *k, *box;
	eng_msa_index ix;
} idx;

static void idx_init(idx *x, long nb, int kvh, int hd)
{
	size_t kd = (size_t)kvh * hd;
	x->k = calloc((size_t)nb * kd, sizeof(float));
	x->box = calloc(((size_t)nb + ENG_MSA_SUPER) / ENG_MSA_SUPER * 2 * kd, sizeof(float));
	assert_non_null(x->k), assert_non_null(x->box);
	x->ix = (eng_msa_index){x->k, x->box, kvh, hd, 64};
}

static void idx_free(idx *x)
{
	free(x->k), free(x->box);
}

/* Both scans over [b0, b1] for KV head g must agree exactly; returns the
 * count chosen, the choice in topi. */
static int both_agree(const idx *x, int g, const float *q, long b0, long b1, int K, int *topi)
{
	float *tf = calloc((size_t)K, sizeof(float)), *te = calloc((size_t)K, sizeof(float));
	int *je = calloc((size_t)K, sizeof(int));
	int nf = eng_msa_index_topk(&x->ix, g, q, b0, b1, K, true, tf, topi);
	int ne = eng_msa_index_topk(&x->ix, g, q, b0, b1, K, false, te, je);
	assert_int_equal(nf, ne);
	assert_memory_equal(topi, je, (size_t)ne * sizeof(int));
	assert_memory_equal(tf, te, (size_t)ne * sizeof(float));
	free(tf), free(te), free(je);
	return ne;
}

static void put_all(idx *x, long nb, const float *sums)
{
	size_t kd = (size_t)x->ix.kvh * x->ix.hd;
	for (long b = 0; b < nb; b++)
		eng_msa_index_put(x->k, x->box, b, sums + (size_t)b * kd, x->ix.kvh, x->ix.hd);
}

static void bound_equals_exact_on_random_sums(void **state)
{
	ev_rng r;
	ev_rng_seed(&r, 5);
	int hds[] = {64, 72, 5}, Ks[] = {1, 4, 16, 64}, topi[64];
	for (int h = 0; h < 3; h++) {
		int hd = hds[h], kvh = 2;
		long nb = 3000;
		size_t kd = (size_t)kvh * hd;
		float *s = malloc((size_t)nb * kd * sizeof(float)), *q = malloc((size_t)hd * sizeof(float));
		for (size_t i = 0; i < (size_t)nb * kd; i++)
			s[i] = (float)(ev_rng_uniform(&r) * 8 - 4);
		/* a drifting mean, as real keys have: some superblocks lose */
		for (long b = 0; b < nb; b++)
			for (size_t i = 0; i < kd; i++)
				s[(size_t)b * kd + i] += (float)((b / 300) % 5) * (i % 2 ? 1.5f : -1.0f);
		idx x;
		idx_init(&x, nb, kvh, hd);
		put_all(&x, nb, s);
		for (int trial = 0; trial < 40; trial++) {
			for (int d = 0; d < hd; d++)
				q[d] = (float)(ev_rng_uniform(&r) * 2 - 1);
			int K = Ks[trial % 4], g = trial % 2;
			long b0 = (long)ev_rng_below(&r, 50), b1 = nb - 1 - (long)ev_rng_below(&r, 50);
			assert_int_equal(both_agree(&x, g, q, b0, b1, K, topi), K);
			/* shorter than k: every block */
			assert_int_equal(both_agree(&x, g, q, 10, 10 + K / 2, K, topi), K / 2 + 1);
		}
		idx_free(&x);
		free(s), free(q);
	}
}

/* Near ties, exact ties, and one late block a few float steps above the
 * rest in one dimension: only the bound's rounding margin keeps its
 * superblock from a skip. */
static void bound_equals_exact_on_ties_and_float_steps(void **state)
{
	ev_rng r;
	ev_rng_seed(&r, 9);
	int hd = 64, kvh = 1, topi[64];
	long nb = 2048;
	float *base = malloc((size_t)hd * sizeof(float)), *s = malloc((size_t)nb * hd * sizeof(float));
	float q[64];
	idx x;
	idx_init(&x, nb, kvh, hd);
	for (int trial = 0; trial < 300; trial++) {
		for (int d = 0; d < hd; d++) {
			base[d] = (float)(ev_rng_uniform(&r) * 2 - 1);
			q[d] = (float)(ev_rng_uniform(&r) * 2 - 1);
		}
		int mode = trial < 3 ? trial : 3;
		long late = 1000 + (long)ev_rng_below(&r, 1000);
		int dim = (int)ev_rng_below(&r, (uint64_t)hd), steps = 1 + (int)ev_rng_below(&r, 4);
		for (long b = 0; b < nb; b++)
			for (int d = 0; d < hd; d++) {
				float v = base[d];
				if (mode == 0)
					v *= 1 + (float)(ev_rng_uniform(&r) - 0.5) * 1e-5f; /* near ties */
				else if (mode == 2 && b % 3 == 0)
					v *= 1 + 1e-6f; /* ties in groups */
				else if (mode == 3 && b == late && d == dim) /* a few float steps up */
					for (int st = 0; st < steps; st++)
						v = nextafterf(v, q[d] > 0 ? INFINITY : -INFINITY);
				s[(size_t)b * hd + d] = v;
			}
		put_all(&x, nb, s);
		int K = mode == 3 ? 4 : 1 << (2 * (trial % 4));
		assert_int_equal(both_agree(&x, 0, q, 3, nb - 1, K, topi), K);
		if (mode == 1) /* all equal: the lowest blocks, ascending */
			for (int i = 0; i < K; i++)
				assert_int_equal(topi[i], 3 + i);
	}
	idx_free(&x);
	free(base), free(s);
}

/* The recall checkpoint's shape: the query and most blocks' sums on
 * disjoint dimensions (scores exactly 0, the lowest such blocks fill the
 * places the needles leave), a few needle blocks overlapping. */
static void bound_keeps_needles_among_exact_zero_ties(void **state)
{
	ev_rng r;
	ev_rng_seed(&r, 11);
	int hd = 64, topi[8];
	long nb = 4096;
	float *s = malloc((size_t)nb * hd * sizeof(float)), q[64];
	idx x;
	idx_init(&x, nb, 1, hd);
	for (int d = 0; d < hd; d++)
		q[d] = d < hd / 2 ? (float)(ev_rng_uniform(&r) + 0.5) : 0;
	for (long b = 0; b < nb; b++)
		for (int d = 0; d < hd; d++)
			s[(size_t)b * hd + d] = d >= hd / 2			   ? (float)(ev_rng_uniform(&r) * 2 - 1)
						: (b == 3500 || b == 77) && d == 3 ? 0.25f
										   : 0;
	put_all(&x, nb, s);
	assert_int_equal(both_agree(&x, 0, q, 3, nb - 1, 8, topi), 8);
	int want[8] = {77, 3500, 3, 4, 5, 6, 7, 8};
	assert_memory_equal(topi, want, sizeof(want));
	/* the bound is 0 for every superblock without a needle: equal to
	 * the k-th score, so skipped; one with a needle is not */
	float top[8];
	assert_int_equal(eng_msa_index_topk(&x.ix, 0, q, 3, nb - 1, 8, true, top, topi), 8);
	assert_true(top[7] == 0.0f);
	idx_free(&x);
	free(s);
}

/* NaN, infinity and sums near float's range, in the keys and the query. */
static void bound_equals_exact_on_extreme_sums(void **state)
{
	ev_rng r;
	ev_rng_seed(&r, 13);
	int hd = 64, topi[8];
	long nb = 1500;
	float *s = malloc((size_t)nb * hd * sizeof(float)), q[64];
	idx x;
	idx_init(&x, nb, 1, hd);
	for (int mode = 0; mode < 5; mode++) {
		for (size_t i = 0; i < (size_t)nb * hd; i++) {
			float v = (float)(ev_rng_uniform(&r) * 2 - 1);
			s[i] = mode == 0 ? v * 1e30f : mode == 4 ? v * 1e-30f : v;
		}
		if (mode == 1)
			s[700 * hd + 3] = NAN;
		if (mode == 2)
			s[40 * hd + 5] = INFINITY, s[900 * hd + 6] = -INFINITY;
		if (mode == 3)
			for (int d = 0; d < hd; d++)
				s[1200 * hd + d] = 3e38f;
		put_all(&x, nb, s);
		for (int trial = 0; trial < 10; trial++) {
			for (int d = 0; d < hd; d++)
				q[d] = (float)(ev_rng_uniform(&r) * 2 - 1) * (trial == 9 ? 1e30f : 1);
			if (trial == 8)
				q[7] = 0; /* 0 times an infinite key */
			both_agree(&x, 0, q, 1, nb - 1, 8, topi);
		}
	}
	idx_free(&x);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bound_equals_exact_on_random_sums),
		cmocka_unit_test(bound_equals_exact_on_ties_and_float_steps),
		cmocka_unit_test(bound_keeps_needles_among_exact_zero_ties),
		cmocka_unit_test(bound_equals_exact_on_extreme_sums),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
