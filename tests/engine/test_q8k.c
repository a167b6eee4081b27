/*
 * K-quant weights against 8-bit super-block activations (engine/cpu/q8k.h):
 * the quantizer's values, each vector level against the plain definition
 * bit for bit (real blocks from the test quantizer and random bytes, which
 * reach every scale and bit pattern), and the definition against the exact
 * dot of the dequantized values within the activations' rounding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/q8k.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/quant.h"
#include "tests/engine/engine_testutil.h"

static void fill(float *v, size_t n, ev_rng *r, double scale)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((2 * ev_rng_uniform(r) - 1) * scale);
}

static void activations_quantize_as_defined(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 11);
	enum { N = 256 * 24 }; /* blocks 7 and up: random, at scales from 1e-3 to 1e3 */
	float *x = malloc(N * sizeof *x);
	eng_q8kblk *q = malloc((N / 256) * sizeof *q);
	fill(x, N, &r, 4.0);
	for (int b = 7; b < N / 256; b++)
		for (int e = 0; e < 256; e++)
			x[b * 256 + e] *= (float)pow(10.0, (b % 7) - 3);
	x[100] = 9.0f, x[101] = -9.0f; /* block 0: the first of equal magnitudes is max */
	for (int e = 0; e < 256; e++) /* block 1: zero */
		x[256 + e] = 0.0f;
	for (int e = 0; e < 256; e++) /* block 2: max 127, iscale -1: ties to even */
		x[512 + e] = e == 0 ? 127.0f : (float)((e % 8) - 4) + 0.5f;
	x[768 + 7] = NAN;          /* block 3: NaN */
	x[1024 + 9] = -INFINITY;   /* block 4: infinity */
	for (int e = 0; e < 256; e++) /* block 5: tiny, a negative max */
		x[1280 + e] = (float)(e % 5) * 1e-32f;
	x[1280 + 3] = -1e-30f;
	for (int e = 0; e < 256; e++) /* block 6: too small for -127 / max to be finite: zero */
		x[1536 + e] = e == 9 ? 1e-38f : 0.0f;
	eng_q8k_quantize_ref(q, x, N);
	/* the vector quantizer at each level: the definition's bytes */
	eng_q8kblk *vq = malloc((N / 256) * sizeof *vq);
	int top = eng_qdot_level();
	for (int l = 0; l <= top; l++) {
		eng_qdot_set_level(l);
		memset(vq, 0x55, (N / 256) * sizeof *vq);
		eng_q8k_quantize(vq, x, N);
		for (int b = 0; b < N / 256; b++)
			if (memcmp(&vq[b].q, &q[b].q, sizeof vq[b].q) || memcmp(vq[b].bsum, q[b].bsum, sizeof vq[b].bsum) ||
			    (memcmp(&vq[b].d, &q[b].d, 4) && !(isnan(vq[b].d) && isnan(q[b].d))))
				fail_msg("super-block %d quantized at level %s differs from the definition", b, eng_qdot_level_name(l));
	}
	eng_qdot_set_level(top);
	free(vq);
	for (int b = 0; b < N / 256; b++) {
		if (b == 1 || b == 3 || b == 4 || b == 6)
			continue;
		int sums[16] = {0};
		for (int e = 0; e < 256; e++) {
			float v = x[b * 256 + e];
			assert_true(fabs((double)v - (double)q[b].d * q[b].q[e]) <= 0.5001 * fabs(q[b].d));
			sums[e / 16] += q[b].q[e];
		}
		for (int k = 0; k < 16; k++)
			assert_int_equal(q[b].bsum[k], sums[k]);
	}
	/* the first largest magnitude, +9, maps to -127 and -9 to +127 */
	assert_int_equal(q[0].q[100], -127), assert_int_equal(q[0].q[101], 127);
	assert_true(q[0].d == 1.0f / (-127.0f / 9.0f));
	assert_true(q[1].d == 0.0f && q[6].d == 0.0f && q[6].q[9] == 0 && q[6].bsum[0] == 0);
	for (int e = 0; e < 256; e++)
		assert_int_equal(q[1].q[e], 0);
	assert_true(q[2].d == -1.0f);
	/* -(k + 0.5) to the even neighbour: e % 8 = 1 -> x = -2.5 -> 2; 2 -> -1.5 -> 2; 5 -> 1.5 -> -2; 6 -> 2.5 -> -2 */
	assert_int_equal(q[2].q[1], 2), assert_int_equal(q[2].q[2], 2);
	assert_int_equal(q[2].q[5], -2), assert_int_equal(q[2].q[6], -2);
	assert_true(isnan(q[3].d) && isnan(q[4].d));
	for (int e = 0; e < 256; e++)
		assert_int_equal(q[3].q[e] | q[4].q[e], 0);
	assert_true(q[5].d > 0.0f && q[5].q[3] == -127); /* the max always maps to -127 */
	free(x), free(q);
}

/* rows of type dt: n super-blocks each, either quantized from random
 * values or random bytes whose f16 fields are finite */
static void make_rows(uint8_t *wq, float *wf, int rows, int cols, int dt, int random_bytes, ev_rng *r)
{
	size_t rb = eng_dtype_bytes((eng_dtype)dt, (size_t)cols);
	if (!random_bytes) {
		fill(wf, (size_t)rows * cols, r, 1.0);
		eng_ggml_quantize(wq, wf, eng_dtype_ggml((eng_dtype)dt), (size_t)rows * cols);
		return;
	}
	for (size_t i = 0; i < rb * rows; i++)
		wq[i] = (uint8_t)(ev_rng_next(r) >> 24);
	size_t sb = eng_dtype_bytes((eng_dtype)dt, 256);
	for (size_t s = 0; s < rb * rows / sb; s++) {
		uint8_t *p = wq + s * sb;
		/* f16 in [2^-8, 2^0): exponent 7 .. 14 */
		int nf = dt == ENG_Q6_K || dt == ENG_IQ4_XS || dt == ENG_Q3_K ? 1 : 2;
		for (int f = 0; f < nf; f++) {
			uint16_t h = (uint16_t)((ev_rng_next(r) & 0x83FF) | ((7 + ev_rng_next(r) % 8) << 10));
			memcpy(p + (dt == ENG_Q6_K ? 208 : dt == ENG_Q3_K ? 108 : dt == ENG_Q2_K ? 80 + 2 * f : 2 * f), &h, 2);
		}
	}
}

#define NRW 8
static void kernels_give_the_definitions_bits(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 12);
	int top = eng_qdot_level();
	print_message("vector level on this CPU: %s\n", eng_qdot_level_name(top));
	const int types[] = {ENG_Q4_K, ENG_Q5_K, ENG_Q6_K, ENG_IQ4_XS, ENG_Q3_K, ENG_Q2_K};
	for (int ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
		int dt = types[ti], cols = 768, nsb = cols / 256;
		assert_true(eng_q8k_type(dt));
		size_t rb = eng_dtype_bytes((eng_dtype)dt, (size_t)cols);
		float *wf = malloc((size_t)NRW * cols * 4), *wd = malloc((size_t)NRW * cols * 4), *x = malloc((size_t)ENG_Q8K_X * cols * 4);
		uint8_t *wq = malloc(NRW * rb);
		eng_q8kblk *xq = malloc((size_t)ENG_Q8K_X * nsb * sizeof *xq);
		double worst = 0;
		for (int trial = 0; trial < 16; trial++) {
			int rnd = trial % 2;
			make_rows(wq, wf, NRW, cols, dt, rnd, &r);
			eng_to_f32(wd, wq, (eng_dtype)dt, (size_t)NRW * cols);
			fill(x, (size_t)ENG_Q8K_X * cols, &r, trial % 4 < 2 ? 3.0 : 0.05);
			for (int i = 0; i < ENG_Q8K_X * cols; i += 41) /* outliers */
				x[i] *= 30.0f;
			if (trial % 4 == 3) /* the widest activations: every q at +-127 */
				for (int i = 0; i < ENG_Q8K_X * cols; i++)
					x[i] = i % 3 ? 1.0f : -1.0f;
			const eng_q8kblk *xs[ENG_Q8K_X];
			for (int i = 0; i < ENG_Q8K_X; i++) {
				eng_q8k_quantize(xq + (size_t)i * nsb, x + (size_t)i * cols, cols);
				xs[i] = xq + (size_t)i * nsb;
			}
			const uint8_t *w[NRW];
			for (int k = 0; k < NRW; k++)
				w[k] = wq + (size_t)k * rb;
			float want[ENG_Q8K_X * NRW];
			for (int i = 0; i < ENG_Q8K_X; i++)
				for (int k = 0; k < NRW; k++) {
					float v = want[i * NRW + k] = eng_q8k_dot_ref(xs[i], w[k], nsb, dt);
					double exact = 0, bound = 0;
					for (int e = 0; e < cols; e++) {
						exact += (double)x[i * cols + e] * wd[k * cols + e];
						bound += 0.5 * fabs(xq[i * nsb + e / 256].d) * fabs(wd[k * cols + e]);
					}
					double err = fabs(v - exact);
					if (err > bound * 1.01 + 1e-5 * (fabs(exact) + bound))
						fail_msg("%s: q8 dot %.6g vs exact %.6g, beyond the rounding bound %.3g",
						         eng_dtype_name((eng_dtype)dt), v, exact, bound);
					double rel = err / (fabs(exact) + bound + 1e-30);
					worst = rel > worst ? rel : worst;
				}
			for (int l = 0; l <= top; l++) {
				eng_qdot_set_level(l);
				for (int nx = 1; nx <= ENG_Q8K_X; nx++)
					for (int q = 0; q < NRW / 4; q++) {
						float got[ENG_Q8K_X * 4];
						memset(got, 0x55, sizeof got);
						eng_q8k_dot(got, xs, nx, w + 4 * q, nsb, dt);
						for (int i = 0; i < nx; i++)
							for (int k = 0; k < 4; k++)
								if (memcmp(&got[i * 4 + k], &want[i * NRW + 4 * q + k], 4))
									fail_msg("%s (%s rows) at level %s, width %d: row %d, weight row %d "
									         "differs from the definition (%.9g vs %.9g)",
									         eng_dtype_name((eng_dtype)dt), rnd ? "random-byte" : "quantized",
									         eng_qdot_level_name(l), nx, i, 4 * q + k, got[i * 4 + k],
									         want[i * NRW + 4 * q + k]);
					}
			}
			eng_qdot_set_level(top);
			if (eng_q8k_group_level()) { /* a group of 16: the 8 rows twice, in another order */
				const uint8_t *gw[ENG_Q8K_GROUP_ROWS];
				for (int k = 0; k < ENG_Q8K_GROUP_ROWS; k++)
					gw[k] = w[(k * 5 + trial) % NRW];
				void *gmem = malloc(ENG_Q8K_GROUP_BYTES(nsb));
				eng_q8kgroup g;
				eng_q8k_group_place(&g, gmem, nsb);
				memset(gmem, 0x55, ENG_Q8K_GROUP_BYTES(nsb));
				eng_q8k_group_unpack(&g, gw, nsb, dt);
				/* the vector unpacking lays out the plain one's bytes */
				void *pmem = malloc(ENG_Q8K_GROUP_BYTES(nsb));
				eng_q8kgroup pg;
				eng_q8k_group_place(&pg, pmem, nsb);
				memset(pmem, 0x55, ENG_Q8K_GROUP_BYTES(nsb));
				eng_qdot_set_level(0);
				eng_q8k_group_unpack(&pg, gw, nsb, dt);
				eng_qdot_set_level(top);
				if (memcmp(pmem, gmem, ENG_Q8K_GROUP_BYTES(nsb)))
					fail_msg("%s: the group unpacked at level %s differs from the plain unpacking",
					         eng_dtype_name((eng_dtype)dt), eng_qdot_level_name(top));
				free(pmem);
				for (int nx = 1; nx <= ENG_Q8K_GROUP_X; nx++) {
					float got[ENG_Q8K_GROUP_X * ENG_Q8K_GROUP_ROWS];
					memset(got, 0x55, sizeof got);
					eng_q8k_group_dot(got, xs, nx, &g, nsb, dt);
					for (int i = 0; i < nx; i++)
						for (int k = 0; k < ENG_Q8K_GROUP_ROWS; k++) {
							float wv = want[i * NRW + (k * 5 + trial) % NRW];
							if (memcmp(&got[i * 16 + k], &wv, 4))
								fail_msg("%s (%s rows) group, width %d: row %d, lane %d differs from the "
								         "definition (%.9g vs %.9g)",
								         eng_dtype_name((eng_dtype)dt), rnd ? "random-byte" : "quantized", nx, i,
								         k, got[i * 16 + k], wv);
						}
				}
				free(gmem);
			}
		}
		print_message("%-5s error against the dequantized dot, relative to |exact| + bound: at most %.3g\n",
		              eng_dtype_name((eng_dtype)dt), worst);
		free(wf), free(wd), free(x), free(wq), free(xq);
	}
	assert_false(eng_q8k_type(ENG_Q8_0) || eng_q8k_type(ENG_Q4_1) || eng_q8k_type(ENG_BF16));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(activations_quantize_as_defined),
		cmocka_unit_test(kernels_give_the_definitions_bits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
