/*
 * The integer path for block-quantized weights (engine/cpu/qdot.h): the
 * activation quantizer and every block type's dot product, vector kernels
 * (each level the CPU has: AVX2, AVX512-VNNI) against the plain
 * definition bit for bit, and the definition against the exact dot of the
 * dequantized values within the error of 16-bit activations.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/quant.h"
#include "tests/engine/engine_testutil.h"

static void fill(float *v, size_t n, ev_rng *r, double scale)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((2 * ev_rng_uniform(r) - 1) * scale);
}

/* the quantizer: vector = definition; values within half a step; the
 * block's sum as defined; ties round to even */
static void activations_quantize_by_definition(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 3);
	int n = 32 * 40;
	float *x = malloc((size_t)n * 4);
	eng_qxblk *a = malloc((size_t)(n / 32) * sizeof *a), *b = malloc((size_t)(n / 32) * sizeof *b);
	fill(x, (size_t)n, &r, 3.0);
	for (int e = 0; e < 32; e++) /* a zero block */
		x[32 + e] = 0.0f;
	for (int e = 0; e < 32; e++) /* d = 16383.5 / 32767 = 0.5 exactly, then x / d = (e - 16) + 0.5: ties */
		x[64 + e] = e == 0 ? 16383.5f : (float)(e - 16) * 0.5f + 0.25f;
	eng_qx_quantize_ref(a, x, n);
	int top = eng_qdot_level();
	for (int l = 0; l <= top; l++) {
		eng_qdot_set_level(l);
		memset(b, 0x55, (size_t)(n / 32) * sizeof *b);
		eng_qx_quantize(b, x, n);
		if (memcmp(a, b, (size_t)(n / 32) * sizeof *a))
			fail_msg("quantized activations at level %s differ from the definition", eng_qdot_level_name(l));
	}
	eng_qdot_set_level(top);
	for (int k = 0; k < n / 32; k++) {
		int sum = 0;
		for (int e = 0; e < 32; e++) {
			float v = x[k * 32 + e];
			/* half a step, and the float product x / d rounds by a few ulp of 32767 */
			assert_true(fabs((double)v - (double)a[k].d * a[k].q[e]) <= 0.501 * a[k].d);
			sum += a[k].q[e];
		}
		assert_true(a[k].s == a[k].d * (float)sum);
	}
	assert_true(a[1].d == 0.0f && a[1].s == 0.0f);
	/* ties to even: 16383.5 / 0.5 = 32767, then -0.5 -> 0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 */
	assert_true(a[2].d == 0.5f);
	assert_int_equal(a[2].q[0], 32767);
	assert_int_equal(a[2].q[15], 0), assert_int_equal(a[2].q[16], 0);
	assert_int_equal(a[2].q[17], 2), assert_int_equal(a[2].q[18], 2);
	free(x), free(a), free(b);
}

/* a block's bytes: q = 256 hb + lb with lb in 0..255, and the halves'
 * sums, on random blocks and on the extremes (-32767, -256, -1, 0, 255,
 * 256, 32767, ...); the vector levels give the definition's bytes */
static void activation_bytes_by_definition(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 4);
	enum { NB = 24 };
	eng_qxblk q[NB];
	eng_qxbyt y[NB];
	memset(q, 0, sizeof q);
	const int edge[] = {-32767, -200, -256, -255, -129, -128, -1, 0, 1, 127, 128, 255, 256, 32767};
	for (int b = 0; b < NB; b++)
		for (int e = 0; e < 32; e++)
			q[b].q[e] = (int16_t)(b == 0 ? edge[e % (int)(sizeof edge / sizeof edge[0])]
			                             : (int)(ev_rng_uniform(&r) * 65535) - 32767);
	memset(y, 0x55, sizeof y);
	eng_qx_bytes_ref(y, q, NB);
	int top = eng_qdot_level();
	for (int l = 0; l <= top; l++) { /* each level's bytes are the definition's */
		eng_qxbyt v[NB];
		eng_qdot_set_level(l);
		memset(v, 0xAA, sizeof v);
		eng_qx_bytes(v, q, NB);
		if (memcmp(v, y, sizeof v))
			fail_msg("activation bytes at level %s differ from the definition", eng_qdot_level_name(l));
	}
	eng_qdot_set_level(top);
	for (int b = 0; b < NB; b++) {
		int hs[2] = {0, 0}, hbs = 0;
		for (int e = 0; e < 32; e++) {
			assert_int_equal(256 * y[b].hb[e] + y[b].lb[e], q[b].q[e]);
			hs[e / 16] += q[b].q[e];
			hbs += y[b].hb[e];
		}
		assert_int_equal(y[b].hs[0], hs[0]);
		assert_int_equal(y[b].hs[1], hs[1]);
		assert_int_equal(y[b].hbs, hbs);
	}
	assert_int_equal(y[0].hb[0], -128), assert_int_equal(y[0].lb[0], 1);  /* -32767 */
	assert_int_equal(y[0].hb[6], -1), assert_int_equal(y[0].lb[6], 255);  /* -1 */
	assert_int_equal(y[0].hb[13], 127), assert_int_equal(y[0].lb[13], 255); /* 32767 */
}

/* every block type: the kernel at each level, at batch widths 1..6 on raw
 * rows (four at a time) and 1..6 on a group of 16 unpacked rows (whole,
 * and a partial group whose lanes repeat a row), equals the definition
 * bit for bit, and the definition is within the error of 16-bit
 * activations of the exact dot of the dequantized row */
#define NR ENG_QGROUP_ROWS
#define NXU ENG_QGROUP_X
static void block_types_dot_by_definition(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 5);
	int top = eng_qdot_level();
	print_message("vector level on this CPU: %s\n", eng_qdot_level_name(top));
	for (int dt = ENG_Q8_0; dt < ENG_DTYPE_COUNT; dt++) {
		/* the 32-element types on an odd count of blocks (their decode
		 * kernel takes blocks two at a time), K-quants on whole super-blocks */
		int cols = eng_dtype_block((eng_dtype)dt) == 256 ? 512 : 544, nb = cols / 32;
		float *wf = malloc((size_t)NR * cols * 4), *x = malloc((size_t)NXU * cols * 4), *wd = malloc((size_t)NR * cols * 4);
		size_t rb = eng_dtype_bytes((eng_dtype)dt, (size_t)cols);
		uint8_t *wq = malloc(NR * rb);
		eng_qxblk *xq = malloc((size_t)NXU * nb * sizeof *xq);
		eng_qxbyt *xy = malloc((size_t)NXU * nb * sizeof *xy);
		char *gmem = malloc(ENG_QGROUP_BYTES(nb));
		eng_qgroup g;
		eng_qgroup_place(&g, gmem, nb);
		double worst = 0;
		for (int trial = 0; trial < 12; trial++) {
			fill(wf, (size_t)NR * cols, &r, 1.0);
			fill(x, (size_t)NXU * cols, &r, trial % 2 ? 10.0 : 0.1);
			for (int i = 0; i < cols; i += 37) /* outliers in some blocks */
				x[i] *= 20.0f;
			eng_ggml_quantize(wq, wf, eng_dtype_ggml((eng_dtype)dt), (size_t)NR * cols);
			eng_to_f32(wd, wq, (eng_dtype)dt, (size_t)NR * cols);
			for (int i = 0; i < NXU; i++)
				eng_qx_quantize_ref(xq + (size_t)i * nb, x + (size_t)i * cols, cols);
			eng_qx_bytes(xy, xq, NXU * nb);
			const uint8_t *w[NR];
			for (int k = 0; k < NR; k++)
				w[k] = wq + (size_t)k * rb;
			const eng_qxblk *xs[NXU];
			const eng_qxbyt *ys[NXU];
			for (int i = 0; i < NXU; i++)
				xs[i] = xq + (size_t)i * nb, ys[i] = xy + (size_t)i * nb;
			float want[NXU * NR];
			for (int i = 0; i < NXU; i++)
				for (int k = 0; k < NR; k++) {
					want[i * NR + k] = eng_qdot_ref(xs[i], w[k], nb, dt);
					/* against the exact dot of the dequantized values: the
					 * activations' rounding is at most d/2 an element */
					double exact = 0, bound = 0;
					for (int e = 0; e < cols; e++) {
						exact += (double)x[i * cols + e] * wd[k * cols + e];
						bound += 0.5 * xq[i * nb + e / 32].d * fabs(wd[k * cols + e]);
					}
					double err = fabs(want[i * NR + k] - exact);
					if (err > bound * 1.01 + 1e-4 * fabs(exact))
						fail_msg("%s: q16 dot %.6g vs exact %.6g, beyond the rounding bound %.3g",
						         eng_dtype_name((eng_dtype)dt), want[i * NR + k], exact, bound);
					double rel = err / (fabs(exact) + bound + 1e-30);
					worst = rel > worst ? rel : worst;
				}
			for (int l = 0; l <= top; l++) {
				eng_qdot_set_level(l);
				const char *ln = eng_qdot_level_name(l), *tn = eng_dtype_name((eng_dtype)dt);
				/* with the activations' bytes, and without (the K-quants then
				 * take another kernel) */
				for (int nx = 1; nx <= ENG_QDOT_X; nx++)
					for (int q = 0; q < NR / 4; q++)
						for (int by = 0; by < 2; by++) {
							float got[ENG_QDOT_X * 4];
							eng_qdot(got, xs, by ? ys : NULL, nx, w + 4 * q, nb, dt);
							for (int i = 0; i < nx; i++)
								for (int k = 0; k < 4; k++)
									if (memcmp(&got[i * 4 + k], &want[i * NR + 4 * q + k], 4))
										fail_msg("%s at level %s, width %d%s: row %d, weight row %d "
										         "differs from the definition (%.9g vs %.9g)",
										         tn, ln, nx, by ? "" : " (no bytes)", i, 4 * q + k,
										         got[i * 4 + k], want[i * NR + 4 * q + k]);
						}
				/* decode's runs of quads (eng_qdot_rows): all 16 rows as four
				 * quads a quarter apart, then two quads from row 2, three apart;
				 * the rows outside them untouched */
				for (int run = 0; run < 2; run++)
					for (int by = 0; by < 2; by++) {
						int r0 = run ? 2 : 0, q4 = run ? 3 : NR / 4, nq = run ? 2 : NR / 4;
						float y[NR];
						memset(y, 0x55, sizeof y);
						eng_qdot_rows(y, xs[0], by ? ys[0] : NULL, wq, rb, r0, q4, nq, nb, dt);
						for (int k = 0; k < NR; k++) {
							bool in = k >= r0 && (k - r0) % q4 < nq && (k - r0) / q4 < 4;
							float sentinel;
							memset(&sentinel, 0x55, 4);
							if (memcmp(&y[k], in ? &want[k] : &sentinel, 4))
								fail_msg("%s at level %s, rows from %d a quad %d apart%s: row %d is %.9g, "
								         "expected %.9g", tn, ln, r0, q4, by ? "" : " (no bytes)", k, y[k],
								         in ? want[k] : sentinel);
						}
					}
				/* the rows as quads laid out four rows together
				 * (eng_qx4_pack): each row back as stored (eng_qx4_row);
				 * decode on them (eng_qdot_rows_x4) from row 0 and from
				 * row 4, with the bytes and without, the definition's bits */
				if (eng_qx4_type(dt)) {
					uint8_t *x4 = malloc(NR * rb), *back = malloc(rb), *scratch = malloc(4 * rb);
					eng_qx4_pack_rows(x4, wq, NR, nb, dt);
					assert_true(memcmp(x4, wq, NR * rb) != 0);
					for (int k = 0; k < NR; k++) {
						eng_qx4_row(back, x4 + (size_t)(k / 4) * 4 * rb, k % 4, nb, dt);
						if (memcmp(back, w[k], rb))
							fail_msg("%s: row %d of its quad does not come back as stored", tn, k);
					}
					for (int run = 0; run < 2; run++)
						for (int by = 0; by < 2; by++) {
							int r0 = run ? 4 : 0, nq = run ? 2 : NR / 4;
							float y[NR], sentinel;
							memset(y, 0x55, sizeof y);
							memset(&sentinel, 0x55, 4);
							eng_qdot_rows_x4(y, xs[0], by ? ys[0] : NULL, x4, rb, r0, nq, nb, dt, scratch);
							for (int k = 0; k < NR; k++) {
								bool in = k >= r0 && k < r0 + 4 * nq;
								if (memcmp(&y[k], in ? &want[k] : &sentinel, 4))
									fail_msg("%s at level %s, quads of four rows from %d%s: row %d is "
									         "%.9g, expected %.9g", tn, ln, r0, by ? "" : " (no bytes)", k,
									         y[k], in ? want[k] : sentinel);
							}
						}
					/* a group unpacked from the four quads (where the level has
					 * it) is the group unpacked from the rows as stored */
					char *g4mem = malloc(ENG_QGROUP_BYTES(nb));
					eng_qgroup g4;
					eng_qgroup_place(&g4, g4mem, nb);
					const uint8_t *quads[4] = {x4, x4 + 4 * rb, x4 + 8 * rb, x4 + 12 * rb};
					memset(g4mem, 0x55, ENG_QGROUP_BYTES(nb));
					if (eng_qgroup_unpack_x4(&g4, quads, nb, dt)) {
						memset(gmem, 0x55, ENG_QGROUP_BYTES(nb));
						eng_qgroup_unpack(&g, w, nb, dt);
						if (memcmp(g4mem, gmem, ENG_QGROUP_BYTES(nb)))
							fail_msg("%s at level %s: the group unpacked from quads is not the one from the rows",
							         tn, ln);
					}
					free(g4mem);
					free(x4), free(back), free(scratch);
				}
				/* a whole group, then one of 5 rows (the rest repeat row 3) */
				for (int part = 0; part < 2; part++) {
					const uint8_t *gw[NR];
					for (int k = 0; k < NR; k++)
						gw[k] = w[part && k >= 5 ? 3 : k];
					memset(gmem, 0x55, ENG_QGROUP_BYTES(nb));
					eng_qgroup_unpack(&g, gw, nb, dt);
					for (int nx = 1; nx <= NXU; nx++) {
						float got[NXU * NR];
						memset(got, 0x55, sizeof got);
						eng_qdot_group(got, xs, nx, &g, nb, dt);
						for (int i = 0; i < nx; i++)
							for (int k = 0; k < (part ? 5 : NR); k++)
								if (memcmp(&got[i * NR + k], &want[i * NR + k], 4))
									fail_msg("%s at level %s, group%s, width %d: row %d, weight row %d "
									         "differs from the definition (%.9g vs %.9g)",
									         tn, ln, part ? " of 5" : "", nx, i, k, got[i * NR + k],
									         want[i * NR + k]);
					}
				}
			}
			eng_qdot_set_level(top);
		}
		print_message("%-5s error against the dequantized dot, relative to |exact| + bound: at most %.3g\n",
		              eng_dtype_name((eng_dtype)dt), worst);
		free(wf), free(x), free(wd), free(wq), free(xq), free(xy), free(gmem);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(activations_quantize_by_definition),
		cmocka_unit_test(activation_bytes_by_definition),
		cmocka_unit_test(block_types_dot_by_definition),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
