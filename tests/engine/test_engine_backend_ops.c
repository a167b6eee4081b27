/*
 * Each backend op on random inputs, fast CPU path against the reference
 * oracle, compared by normalised error: matmul over odd shapes, every
 * weight dtype, with and without bias and batch rows, and the F16/BF16
 * conversions against known values.
 */
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/atile.h"
#include "engine/cpu/bfdot.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/quant.h"
#include "tests/engine/engine_testutil.h"

static void fill(float *v, size_t n, ev_rng *r)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(2 * ev_rng_uniform(r) - 1);
}

static void matmul_fast_equals_reference(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.layers = 1;
	char *dir = et_mkmodel("ops", "llama", &z, "f32", 1);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 4; /* more workers than tasks at times */
	eng_model *m = NULL;
	assert_int_equal(eng_model_load(&m, dir, &o), 0);
	ev_rng r;
	ev_rng_seed(&r, 9);
	int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {1, 37, 64}, {9, 64, 77}, {4, 130, 33}, {2, 8, 128}, {17, 100, 16}};
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		for (int dt = 0; dt < 3; dt++)
			for (int bias = 0; bias < 2; bias++) {
				int n = shapes[si][0], rows = shapes[si][1], cols = shapes[si][2];
				float *x = malloc((size_t)n * cols * 4), *wf = malloc((size_t)rows * cols * 4);
				float *b = malloc((size_t)rows * 4), *y1 = malloc((size_t)n * rows * 4), *y2 = malloc((size_t)n * rows * 4);
				uint16_t *wh = malloc((size_t)rows * cols * 2);
				fill(x, (size_t)n * cols, &r);
				fill(wf, (size_t)rows * cols, &r);
				fill(b, (size_t)rows, &r);
				for (size_t i = 0; i < (size_t)rows * cols; i++)
					wh[i] = dt == ENG_F16 ? eng_f32_to_f16(wf[i]) : eng_f32_to_bf16(wf[i]);
				eng_weight w = {dt == ENG_F32 ? (const void *)wf : (const void *)wh, (eng_dtype)dt, rows, cols, false};
				m->ref.matmul(&m->ref, y1, x, n, &w, bias ? b : NULL);
				m->cpu.matmul(&m->cpu, y2, x, n, &w, bias ? b : NULL);
				double e = et_rel_err(y2, y1, (size_t)n * rows);
				/* BF16 weights meet BF16-rounded activations on the fast path (engine/cpu/bfdot.h) */
				if (e > (dt == ENG_BF16 ? 4e-3 : 1e-6))
					fail_msg("matmul n=%d rows=%d cols=%d dtype=%d bias=%d: error %.2e", n, rows, cols, dt, bias, e);
				if (dt == ENG_BF16) { /* and each output is the BF16 definition's bits, plus the bias */
					int np = (cols + 31) / 32 * 32;
					uint16_t *xb = malloc((size_t)np * 2);
					for (int i = 0; i < n; i++) {
						eng_bf_round_ref(xb, x + (size_t)i * cols, cols);
						for (int k = 0; k < rows; k++) {
							float want = eng_bfdot_ref(xb, wh + (size_t)k * cols, cols) + (bias ? b[k] : 0.0f);
							if (memcmp(&want, &y2[(size_t)i * rows + k], 4))
								fail_msg("matmul n=%d rows=%d cols=%d bf16: output %d,%d %.9g is not the BF16 "
								         "path's %.9g", n, rows, cols, i, k, y2[(size_t)i * rows + k], want);
						}
					}
					free(xb);
				}
				free(x), free(wf), free(b), free(y1), free(y2), free(wh);
			}
	eng_model_free(m);
	free(dir);
}

static void half_conversions_round_correctly(void **state)
{
	assert_int_equal(eng_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(eng_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(eng_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(eng_f32_to_f16(1e6f), 0x7c00);
	assert_int_equal(eng_f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
	assert_true(eng_f16_to_f32(0x0001) == 5.9604645e-8f);
	assert_true(eng_f16_to_f32(0x3555) > 0.333f && eng_f16_to_f32(0x3555) < 0.3334f);
	assert_int_equal(eng_f32_to_bf16(1.0f), 0x3f80);
	assert_true(eng_bf16_to_f32(0x4049) == 3.140625f);
	/* every finite half survives a round trip */
	for (uint32_t h = 0; h < 0x7c00; h++)
		assert_int_equal(eng_f32_to_f16(eng_f16_to_f32((uint16_t)h)), h);
}

/* 16-bit weights: the vector conversion equals the scalar one on every
 * value (NaNs aside), and the matmul reading BF16/F16 rows in place gives
 * the bits of the f32 matmul on the converted rows, at decode (1-3 rows)
 * and prefill (4+ rows) widths, tails of odd lengths included. */
static void half_rows_read_in_place_equal_converted(void **state)
{
	(void)state;
	uint16_t all[65536];
	float got[65536];
	for (uint32_t h = 0; h < 65536; h++)
		all[h] = (uint16_t)h;
	for (int f16 = 0; f16 < 2; f16++) {
		eng_to_f32(got, all, f16 ? ENG_F16 : ENG_BF16, 65536);
		for (uint32_t h = 0; h < 65536; h++) {
			float want = f16 ? eng_f16_to_f32((uint16_t)h) : eng_bf16_to_f32((uint16_t)h);
			if (isnan(want))
				assert_true(isnan(got[h]));
			else
				assert_memory_equal(&got[h], &want, 4);
		}
	}
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	z.layers = 1;
	z.intermediate = 256; /* rows of one 256-element super-block fit the conversion buffers */
	char *dir = et_mkmodel("opsh", "llama", &z, "f32", 1);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 2;
	eng_model *m = NULL, *mq = NULL, *m8 = NULL;
	/* m: the f32 kernels on exactly dequantized blocks; mq: the integer path (the default) */
	setenv("EVALD_QUANT_DOT", "f32", 1);
	assert_int_equal(eng_model_load(&m, dir, &o), 0);
	unsetenv("EVALD_QUANT_DOT");
	assert_int_equal(eng_model_load(&mq, dir, &o), 0);
	eng_model_options o8 = o; /* K-quants against 8-bit activations (cpu/q8k.h) */
	o8.activation_bits = 8;
	assert_int_equal(eng_model_load(&m8, dir, &o8), 0);
	ev_rng r;
	ev_rng_seed(&r, 11);
	/* cols within the model's widest row: the plain build converts rows into its buffers;
	 * 37 rows: past ENG_CPU_UNPACK_ROWS, where block rows are unpacked */
	int shapes[][3] = {{1, 37, 64}, {2, 130, 77}, {3, 9, 5}, {1, 576, 128}, {5, 64, 83}, {37, 12, 96}};
	for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
		for (int dt = 1; dt < 3; dt++) {
			int n = shapes[si][0], rows = shapes[si][1], cols = shapes[si][2];
			float *x = malloc((size_t)n * cols * 4), *wf = malloc((size_t)rows * cols * 4);
			float *y1 = malloc((size_t)n * rows * 4), *y2 = malloc((size_t)n * rows * 4);
			uint16_t *wh = malloc((size_t)rows * cols * 2);
			fill(x, (size_t)n * cols, &r);
			fill(wf, (size_t)rows * cols, &r);
			for (size_t i = 0; i < (size_t)rows * cols; i++)
				wh[i] = dt == ENG_F16 ? eng_f32_to_f16(wf[i]) : eng_f32_to_bf16(wf[i]);
			eng_to_f32(wf, wh, (eng_dtype)dt, (size_t)rows * cols);
			eng_weight wq = {wh, (eng_dtype)dt, rows, cols, false}, w32 = {wf, ENG_F32, rows, cols, false};
			m->cpu.matmul(&m->cpu, y1, x, n, &wq, NULL);
			m->cpu.matmul(&m->cpu, y2, x, n, &w32, NULL);
			if (memcmp(y1, y2, (size_t)n * rows * 4))
				fail_msg("matmul n=%d rows=%d cols=%d dtype=%d: 16-bit rows differ from converted ones", n, rows,
					 cols, dt);
			free(x), free(wf), free(y1), free(y2), free(wh);
		}
	/* every block type read in place: the bits of the dequantized rows, at
	 * decode and prefill widths (columns rounded up to whole blocks) */
	for (int dt = ENG_Q8_0; dt < ENG_DTYPE_COUNT; dt++)
		for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
			int B = eng_dtype_block((eng_dtype)dt);
			int n = shapes[si][0], rows = shapes[si][1], cols = (shapes[si][2] + B - 1) / B * B;
			float *x = malloc((size_t)n * cols * 4), *wf = malloc((size_t)rows * cols * 4);
			float *y1 = malloc((size_t)n * rows * 4), *y2 = malloc((size_t)n * rows * 4);
			uint8_t *wq = malloc(eng_dtype_bytes((eng_dtype)dt, (size_t)rows * cols));
			fill(x, (size_t)n * cols, &r);
			fill(wf, (size_t)rows * cols, &r);
			eng_ggml_quantize(wq, wf, eng_dtype_ggml((eng_dtype)dt), (size_t)rows * cols);
			eng_to_f32(wf, wq, (eng_dtype)dt, (size_t)rows * cols);
			eng_weight wb = {wq, (eng_dtype)dt, rows, cols, false}, w32 = {wf, ENG_F32, rows, cols, false};
			m->cpu.matmul(&m->cpu, y1, x, n, &wb, NULL);
			m->cpu.matmul(&m->cpu, y2, x, n, &w32, NULL);
			if (memcmp(y1, y2, (size_t)n * rows * 4))
				fail_msg("matmul n=%d rows=%d cols=%d %s: block rows differ from dequantized ones", n, rows, cols,
					 eng_dtype_name((eng_dtype)dt));
			m->ref.matmul(&m->ref, y1, x, n, &wb, NULL);
			double e = et_rel_err(y2, y1, (size_t)n * rows);
			if (e > 1e-6)
				fail_msg("matmul %s: the reference path differs by %.2e", eng_dtype_name((eng_dtype)dt), e);
			/* the integer path: each output the definition's bits (16-bit
			 * activations, engine/cpu/qdot.h), within their rounding of the f32 */
			mq->cpu.matmul(&mq->cpu, y1, x, n, &wb, NULL);
			int nb = cols / 32;
			eng_qxblk *xq = malloc((size_t)nb * sizeof *xq);
			size_t rb = eng_dtype_bytes((eng_dtype)dt, (size_t)cols);
			for (int i = 0; i < n; i++) {
				eng_qx_quantize_ref(xq, x + (size_t)i * cols, cols);
				for (int k = 0; k < rows; k++) {
					float want = eng_qdot_ref(xq, wq + (size_t)k * rb, nb, dt);
					if (memcmp(&want, &y1[(size_t)i * rows + k], 4))
						fail_msg("matmul n=%d rows=%d cols=%d %s: output %d,%d %.9g is not the integer "
						         "path's %.9g",
						         n, rows, cols, eng_dtype_name((eng_dtype)dt), i, k, y1[(size_t)i * rows + k], want);
				}
			}
			e = et_rel_err(y2, y1, (size_t)n * rows);
			if (e > 1e-3)
				fail_msg("matmul %s: the integer path differs from f32 by %.2e", eng_dtype_name((eng_dtype)dt), e);
			/* the same rows as quads of four (eng_weight.x4, as the fast
			 * path lays out Q4_0 .. Q5_1): every path's bits as on the rows
			 * as stored (the integer path's decode, small batches and
			 * groups; the f32 kernels; the reference) */
			if (eng_qx4_type(dt) && rows % 4 == 0) {
				size_t wbytes = (size_t)rows * rb;
				uint8_t *w4 = malloc(wbytes);
				float *y3 = malloc((size_t)n * rows * 4);
				eng_qx4_pack_rows(w4, wq, rows, nb, dt);
				eng_weight wx = {w4, (eng_dtype)dt, rows, cols, true};
				const char *tn = eng_dtype_name((eng_dtype)dt);
				eng_model *ms[3] = {mq, m, m8};
				for (int k = 0; k < 3; k++) {
					ms[k]->cpu.matmul(&ms[k]->cpu, y1, x, n, &wb, NULL);
					memset(y3, 0x55, (size_t)n * rows * 4);
					ms[k]->cpu.matmul(&ms[k]->cpu, y3, x, n, &wx, NULL);
					if (memcmp(y1, y3, (size_t)n * rows * 4))
						fail_msg("matmul n=%d rows=%d cols=%d %s as quads (%s path): not the rows' bits", n,
						         rows, cols, tn, k == 2 ? "8-bit" : k ? "f32" : "integer");
				}
				if (n * rows * cols <= 64 * 64 * 96) { /* the reference, element by element */
					m->ref.matmul(&m->ref, y1, x, n, &wb, NULL);
					m->ref.matmul(&m->ref, y3, x, n, &wx, NULL);
					if (memcmp(y1, y3, (size_t)n * rows * 4))
						fail_msg("matmul %s as quads: the reference's bits differ", tn);
				}
				uint8_t *back = malloc(wbytes);
				eng_weight_rows(back, &wx);
				if (memcmp(back, wq, wbytes))
					fail_msg("%s: the quads' rows as stored are not the rows", tn);
				free(w4), free(y3), free(back);
			}
			free(xq);
			free(x), free(wf), free(y1), free(y2), free(wq);
		}
	/* the dtype table: names and ggml numbers round-trip */
	for (int dt = 0; dt < ENG_DTYPE_COUNT; dt++) {
		assert_int_equal(eng_dtype_parse(eng_dtype_name((eng_dtype)dt)), dt);
		assert_int_equal(eng_dtype_from_ggml(eng_dtype_ggml((eng_dtype)dt)), dt);
		assert_int_equal(eng_dtype_bytes((eng_dtype)dt, 256) / (256 / eng_dtype_block((eng_dtype)dt)),
				 eng_ggml_type_size(eng_dtype_ggml((eng_dtype)dt)));
	}
	assert_int_equal(eng_dtype_parse("Q8_K"), -1);
	eng_model_free(m);
	eng_model_free(mq);
	eng_model_free(m8);
	free(dir);
}

/* Attention's eight-keys-at-once scores (dot1x8) are dot1's bits times the
 * scale, key by key: head widths 8 to 256, keys a row apart or further,
 * values of one magnitude and of many (where a different order of the
 * lanes' sums would show). */
static void eight_key_scores_equal_dot1(void **state)
{
	(void)state;
#ifdef ENG_AVX2
	ev_rng r;
	ev_rng_seed(&r, 17);
	const int widths[] = {8, 16, 24, 64, 128, 256};
	float out[8];
	for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
		for (int spread = 0; spread < 2; spread++) {
			int n = widths[wi];
			size_t stride = (size_t)n + (size_t)(wi % 3) * 8;
			float *x = malloc(8 * stride * sizeof *x), *w = malloc((size_t)n * sizeof *w);
			fill(x, 8 * stride, &r);
			fill(w, (size_t)n, &r);
			if (spread) /* magnitudes from 1e-6 to 1e6 */
				for (size_t i = 0; i < 8 * stride; i++)
					x[i] *= powf(10.0f, (float)(12 * ev_rng_uniform(&r) - 6));
			dot1x8(out, x, stride, w, n, 0.125f);
			for (int t = 0; t < 8; t++) {
				float want = dot1(x + (size_t)t * stride, w, n) * 0.125f;
				if (memcmp(&want, &out[t], 4))
					fail_msg("dot1x8 width %d key %d: %.9g, dot1 %.9g", n, t, out[t], want);
			}
			free(x), free(w);
		}
#else
	skip(); /* (no AVX2 in this build: attention scores a key at a time) */
#endif
}

/* Keys and values kept in 16 bits and read in place (--kv-dtype bf16|f16):
 * dot1x8_h, dot4_kh, dot1_kh and weighted_rows_h give the bits of their
 * f32 namesakes on the rows converted first, for head widths 8 to 128,
 * rows a stride apart, both kinds, blocks with a partial tail. */
static void half_keys_read_in_place_equal_converted(void **state)
{
	(void)state;
#ifdef ENG_AVX2
	ev_rng r;
	ev_rng_seed(&r, 29);
	const int widths[] = {8, 16, 64, 128};
	for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
		for (int f16 = 0; f16 < 2; f16++) {
			if (!h_native(f16))
				continue;
			int n = widths[wi], cnt = 13;
			size_t stride = (size_t)n * 3;
			float *kf = malloc(cnt * stride * sizeof *kf), *q = malloc(4 * (size_t)n * sizeof *q), p[13];
			uint16_t *kh = malloc(cnt * stride * sizeof *kh);
			fill(kf, cnt * stride, &r);
			fill(q, 4 * (size_t)n, &r);
			for (int t = 0; t < cnt; t++)
				p[t] = (float)ev_rng_uniform(&r);
			for (size_t i = 0; i < cnt * stride; i++) { /* the values a 16-bit cache holds */
				kh[i] = f16 ? eng_f32_to_f16(kf[i]) : eng_f32_to_bf16(kf[i]);
				kf[i] = f16 ? eng_f16_to_f32(kh[i]) : eng_bf16_to_f32(kh[i]);
			}
			float a[8], b[8], a4[4], b4[4];
			dot1x8(a, kf, stride, q, n, 0.125f);
			dot1x8_h(b, kh, stride, q, n, 0.125f, f16);
			if (memcmp(a, b, sizeof a))
				fail_msg("dot1x8_h, width %d, %s: differs from dot1x8 on converted keys", n, f16 ? "f16" : "bf16");
			for (int t = 0; t < cnt; t++) {
				float x = dot1(kf + t * stride, q, n), y = dot1_kh(kh + t * stride, q, n, f16);
				if (memcmp(&x, &y, 4))
					fail_msg("dot1_kh, width %d, key %d: %.9g against %.9g", n, t, y, x);
				dot4(a4, kf + t * stride, q, q + n, q + 2 * n, q + 3 * n, n);
				dot4_kh(b4, kh + t * stride, q, q + n, q + 2 * n, q + 3 * n, n, f16);
				if (memcmp(a4, b4, sizeof a4))
					fail_msg("dot4_kh, width %d, key %d: differs from dot4", n, t);
			}
			float *acc1 = malloc((size_t)n * sizeof *acc1), *acc2 = malloc((size_t)n * sizeof *acc2);
			fill(acc1, (size_t)n, &r);
			memcpy(acc2, acc1, (size_t)n * sizeof *acc1);
			weighted_rows(acc1, 0.75f, p, kf, stride, cnt, n);
			weighted_rows_h(acc2, 0.75f, p, kh, stride, cnt, n, f16);
			if (memcmp(acc1, acc2, (size_t)n * sizeof *acc1))
				fail_msg("weighted_rows_h, width %d, %s: differs from weighted_rows", n, f16 ? "f16" : "bf16");
			free(kf), free(q), free(kh), free(acc1), free(acc2);
		}
#else
	skip(); /* (no AVX2 in this build: a 16-bit cache's blocks are converted into a buffer) */
#endif
}

/* score(q, k) by its definition (atile.h): eight lanes of fmas over the
 * width in steps of 8, summed ((0+1)+(2+3))+((4+5)+(6+7)), times scale */
static float score_def(const float *q, const float *k, int n, float scale)
{
	float l[8] = {0};
	for (int i = 0; i < n; i++)
		l[i % 8] = fmaf(q[i], k[i], l[i % 8]);
	return (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) * scale;
}

/* The keys or values a cache of this kind holds for f32 values x (x
 * becomes them widened back, h the stored 16 bits) */
static void as_stored(float *x, uint16_t *h, size_t n, int kind)
{
	for (size_t i = 0; i < n && kind != ATILE_F32; i++) {
		h[i] = kind == ATILE_F16 ? eng_f32_to_f16(x[i]) : eng_f32_to_bf16(x[i]);
		x[i] = kind == ATILE_F16 ? eng_f16_to_f32(h[i]) : eng_bf16_to_f32(h[i]);
	}
}

/* atile.h's many-head kernels (prefill tiles, decode's KV group) against
 * the definition, and in an AVX2 build against dot1 and weighted_rows,
 * which attend_block runs: head counts around the pairs and the six-head
 * passes (1 .. 13, 48, 64), widths 16 .. 512, key counts with and
 * without a tail of fewer than eight, keys at a stride, magnitudes of one
 * size and of many; keys and values in f32 and read in place in BF16 and
 * F16 (the bits of the widened values). */
static void many_head_kernels_equal_one_head(void **state)
{
	(void)state;
	if (!eng_atile_ok(64))
		skip(); /* (no AVX-512 on this CPU: attention runs a head at a time) */
	ev_rng r;
	ev_rng_seed(&r, 29);
	const int heads[] = {1, 2, 3, 4, 5, 6, 7, 12, 13, 48, 64}, widths[] = {16, 48, 64, 80, 128, 512};
	const int counts[] = {1, 7, 8, 13, 64};
	const char *kinds[] = {"f32", "bf16", "f16"};
	for (int kind = ATILE_F32; kind <= ATILE_F16; kind++)
		for (size_t hi = 0; hi < sizeof heads / sizeof heads[0]; hi++)
			for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
				int nq = heads[hi], hd = widths[wi], cnt = counts[(hi + wi + (size_t)kind) % 5];
				int spread = (int)(hi + wi) % 2;
				size_t stride = (size_t)hd + (size_t)(wi % 3) * 16, nkv = (size_t)cnt * stride;
				float *K = malloc(nkv * 4), *V = malloc(nkv * 4), *Q = malloc((size_t)nq * hd * 4);
				float *S = malloc((size_t)nq * cnt * 4), *A = malloc((size_t)nq * hd * 4);
				float *A0 = malloc((size_t)nq * hd * 4), *pack = malloc((size_t)(nq + 1) * hd * 4), c[64];
				uint16_t *Kh = malloc(nkv * 2), *Vh = malloc(nkv * 2);
				const float *qs[64];
				float *out[64], *as[64];
				fill(K, nkv, &r), fill(V, nkv, &r), fill(Q, (size_t)nq * hd, &r), fill(A0, (size_t)nq * hd, &r);
				if (spread) /* magnitudes from 1e-6 to 1e6 */
					for (size_t i = 0; i < nkv; i++)
						K[i] *= powf(10.0f, (float)(12 * ev_rng_uniform(&r) - 6));
				as_stored(K, Kh, nkv, kind), as_stored(V, Vh, nkv, kind);
				const void *Kin = kind == ATILE_F32 ? (const void *)K : Kh, *Vin = kind == ATILE_F32 ? (const void *)V : Vh;
				for (int h = 0; h < nq; h++)
					qs[h] = Q + (size_t)h * hd, out[h] = S + (size_t)h * cnt, as[h] = A + (size_t)h * hd,
					c[h] = (float)ev_rng_uniform(&r);
				/* (half the calls ask for a next block: the same numbers) */
				eng_atile_scores(out, qs, nq, Kin, kind, stride, cnt, hd, 0.125f, pack, hi % 2 ? Kin : NULL,
						 hi % 2 ? Vin : NULL);
				for (int h = 0; h < nq; h++)
					for (int t = 0; t < cnt; t++) {
						float want = score_def(qs[h], K + (size_t)t * stride, hd, 0.125f);
						if (memcmp(&want, &out[h][t], 4))
							fail_msg("scores (%s): %d heads width %d: head %d key %d is %.9g, its definition %.9g",
								 kinds[kind], nq, hd, h, t, out[h][t], want);
#ifdef ENG_AVX2
						want = dot1(K + (size_t)t * stride, qs[h], hd) * 0.125f;
						if (memcmp(&want, &out[h][t], 4))
							fail_msg("scores (%s): %d heads width %d: head %d key %d is %.9g, dot1 %.9g",
								 kinds[kind], nq, hd, h, t, out[h][t], want);
#endif
					}
				memcpy(A, A0, (size_t)nq * hd * 4);
				eng_atile_values(as, c, (const float *const *)out, nq, Vin, kind, stride, cnt, hd);
				for (int h = 0; h < nq; h++) {
					float w[512];
					for (int d = 0; d < hd; d++) {
						float a = A0[(size_t)h * hd + d] * c[h];
						for (int t = 0; t < cnt; t++)
							a = fmaf(out[h][t], V[(size_t)t * stride + d], a);
						w[d] = a;
					}
#ifdef ENG_AVX2
					float w2[512];
					memcpy(w2, A0 + (size_t)h * hd, (size_t)hd * 4);
					weighted_rows(w2, c[h], out[h], V, stride, cnt, hd);
					if (memcmp(w2, w, (size_t)hd * 4))
						fail_msg("the definition of the values differs from weighted_rows (width %d)", hd);
#endif
					for (int d = 0; d < hd; d++)
						if (memcmp(&w[d], &as[h][d], 4))
							fail_msg("values (%s): %d heads width %d: head %d value %d is %.9g, its definition "
								 "%.9g", kinds[kind], nq, hd, h, d, as[h][d], w[d]);
				}
				free(K), free(V), free(Q), free(S), free(A), free(A0), free(pack), free(Kh), free(Vh);
			}
}

/* A block's softmax pieces in attention (attend_block): max_of is the
 * running maximum's value, and exp_shift_sum gives exp_shift's values and
 * their sum in its stated order (eight lanes in hsum8's order with the
 * vector exp, else one after another), for block lengths with and
 * without a tail, scores of one magnitude and of many. */
static void block_max_and_exp_sum_by_definition(void **state)
{
	(void)state;
	ev_rng r;
	ev_rng_seed(&r, 23);
	float x[72], y[72], want[72];
	for (int n = 1; n <= 72; n++)
		for (int spread = 0; spread < 2; spread++) {
			for (int i = 0; i < n; i++)
				x[i] = (float)(ev_rng_uniform(&r) - 0.5) * (spread ? 60.0f : 4.0f);
			float m = -INFINITY;
			for (int i = 0; i < n; i++)
				m = x[i] > m ? x[i] : m;
			float got = max_of(x, n);
			if (memcmp(&got, &m, 4))
				fail_msg("max_of over %d: %.9g, the running maximum %.9g", n, got, m);
			exp_shift(want, x, m, n);
			float sum = exp_shift_sum(y, x, m, n);
			if (memcmp(y, want, (size_t)n * sizeof(float)))
				fail_msg("exp_shift_sum over %d: the values differ from exp_shift's", n);
			float def = 0;
#ifdef ENG_VEXP
			float lane[8] = {0};
			for (int i = 0; i < n; i++)
				lane[i % 8] += want[i];
			def = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
#else
			for (int i = 0; i < n; i++)
				def += want[i];
#endif
			if (memcmp(&sum, &def, 4))
				fail_msg("exp_shift_sum over %d: sum %.9g, its definition %.9g", n, sum, def);
		}
}

/* matmul_many (several weights on the same activations, as forward.c runs
 * q, k and v, and gate and up) gives every output the bits of a matmul
 * call of its own: weights of one form as one job (16-bit activations
 * over mixed block types, BF16, 8-bit super-blocks), mixed forms and f32
 * as a call each; decode, batch rows below and above the group threshold,
 * and more rows than one quantized chunk; biases on some weights. */
static void matmul_many_equals_a_call_each(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300, z.layers = 1, z.hidden = 256, z.intermediate = 512, z.heads = 4, z.kv_heads = 2;
	char *dir = et_mkmodel("many", "llama", &z, "f32", 2);
	ev_rng r;
	ev_rng_seed(&r, 13);
	enum { COLS = 256, MAXN = 300 };
	const struct {
		int bits, nw;
		eng_dtype dt[3];
		int rows[3];
	} sets[] = {
	        {16, 3, {ENG_Q4_K, ENG_Q6_K, ENG_Q5_0}, {40, 24, 17}}, /* one job, 16-bit blocks */
	        {16, 2, {ENG_Q8_0, ENG_Q4_1}, {16, 20}},                /* Q8_0 without bytes beside one with */
	        {16, 2, {ENG_BF16, ENG_BF16}, {33, 8}},                  /* one job, BF16 */
	        {16, 2, {ENG_BF16, ENG_Q8_0}, {12, 16}},                 /* two forms: a call each */
	        {16, 2, {ENG_F32, ENG_F32}, {9, 30}},                    /* f32: a call each */
	        {8, 2, {ENG_Q4_K, ENG_Q6_K}, {36, 20}},                  /* one job, 8-bit super-blocks */
	        {8, 2, {ENG_Q4_K, ENG_Q5_0}, {16, 16}},                  /* 8 bits beside 16: a call each */
	};
	const int ns[] = {1, 2, 5, 20, MAXN};
	float *x = malloc((size_t)MAXN * COLS * 4), *wf = malloc((size_t)64 * COLS * 4), *b = malloc(64 * 4);
	fill(x, (size_t)MAXN * COLS, &r);
	fill(b, 64, &r);
	for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
		eng_model_options o = ENG_MODEL_OPTIONS_INIT;
		o.threads = 3, o.activation_bits = sets[si].bits;
		eng_model *m = NULL;
		assert_int_equal(eng_model_load(&m, dir, &o), 0);
		assert_non_null(m->cpu.matmul_many);
		eng_weight w[3];
		void *data[3];
		float *ys[3], *want[3];
		const float *bs[3];
		const eng_weight *ws[3];
		int nw = sets[si].nw;
		for (int k = 0; k < nw; k++) {
			eng_dtype dt = sets[si].dt[k];
			int rows = sets[si].rows[k];
			fill(wf, (size_t)rows * COLS, &r);
			size_t bytes = eng_dtype_bytes(dt, (size_t)rows * COLS);
			data[k] = malloc(bytes);
			if (dt == ENG_F32)
				memcpy(data[k], wf, bytes);
			else if (dt == ENG_BF16)
				for (size_t i = 0; i < (size_t)rows * COLS; i++)
					((uint16_t *)data[k])[i] = eng_f32_to_bf16(wf[i]);
			else
				eng_ggml_quantize(data[k], wf, eng_dtype_ggml(dt), (size_t)rows * COLS);
			w[k] = (eng_weight){data[k], dt, rows, COLS, false};
			ws[k] = &w[k];
			bs[k] = k % 2 ? NULL : b;
			ys[k] = malloc((size_t)MAXN * rows * 4);
			want[k] = malloc((size_t)MAXN * rows * 4);
		}
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
			int n = ns[ni];
			for (int k = 0; k < nw; k++) {
				memset(ys[k], 0x55, (size_t)n * w[k].rows * 4);
				m->cpu.matmul(&m->cpu, want[k], x, n, &w[k], bs[k]);
			}
			m->cpu.matmul_many(&m->cpu, nw, ys, x, n, ws, bs);
			for (int k = 0; k < nw; k++)
				for (size_t e = 0; e < (size_t)n * w[k].rows; e++)
					if (memcmp(&ys[k][e], &want[k][e], 4))
						fail_msg("set %zu (%d-bit), n %d: weight %d (%s) output %zu is %.9g, a call of its "
						         "own gives %.9g", si, sets[si].bits, n, k, eng_dtype_name(w[k].dtype), e,
						         ys[k][e], want[k][e]);
		}
		for (int k = 0; k < nw; k++)
			free(data[k]), free(ys[k]), free(want[k]);
		eng_model_free(m);
	}
	free(x), free(wf), free(b), free(dir);
}

/* RoPE on the fast path (its angles kept from call to call while the
 * positions stay) gives the reference's bits: calls at new positions, at
 * the same ones again (q then k of a layer), with another number of heads
 * and head size (the indexer's), a partial rotary width, other
 * frequencies in the same place, fewer rows, a single row again, and a
 * prefill's rows split over the workers. */
static void rope_fast_equals_reference_call_after_call(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300, z.layers = 1;
	char *dir = et_mkmodel("rope", "llama", &z, "f32", 3);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 2;
	eng_model *m = NULL;
	assert_int_equal(eng_model_load(&m, dir, &o), 0);
	ev_rng r;
	ev_rng_seed(&r, 21);
	float freq[32];
	for (int j = 0; j < 32; j++)
		freq[j] = powf(10000.0f, -(float)j / 32.0f);
	enum { NP = 45 };
	long pos[NP];
	for (int i = 0; i < NP; i++)
		pos[i] = i;
	const struct {
		int n, nh, hd, rd, shift, newfreq;
	} calls[] = {{7, 4, 64, 64, 0, 0}, {7, 2, 64, 64, 0, 0}, {7, 1, 32, 32, 0, 0}, {7, 3, 64, 40, 0, 0},
	             {7, 3, 64, 64, 5, 0}, {7, 3, 64, 64, 0, 1}, {1, 4, 64, 64, 9, 0}, {1, 4, 64, 64, 9, 0},
	             {1, 4, 64, 64, 10, 0}, {3, 2, 64, 64, 100000, 0},
	             {NP, 4, 64, 64, 3, 0}, {NP, 1, 64, 64, 0, 0}}; /* a prefill's rows, over the workers */
	float *a = malloc((size_t)NP * 4 * 64 * 4), *b = malloc((size_t)NP * 4 * 64 * 4);
	for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
		for (int i = 0; i < NP; i++)
			pos[i] += calls[c].shift;
		if (calls[c].newfreq) /* other values in the same array */
			for (int j = 0; j < 32; j++)
				freq[j] *= 1.5f;
		size_t len = (size_t)calls[c].n * calls[c].nh * calls[c].hd;
		fill(a, len, &r);
		memcpy(b, a, len * 4);
		m->ref.rope(&m->ref, a, calls[c].n, calls[c].nh, calls[c].hd, calls[c].rd, pos, freq);
		m->cpu.rope(&m->cpu, b, calls[c].n, calls[c].nh, calls[c].hd, calls[c].rd, pos, freq);
		for (size_t e = 0; e < len; e++)
			if (memcmp(&a[e], &b[e], 4))
				fail_msg("call %zu: element %zu is %.9g, the reference's %.9g", c, e, b[e], a[e]);
	}
	free(a), free(b);
	eng_model_free(m);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rope_fast_equals_reference_call_after_call),
		cmocka_unit_test(matmul_fast_equals_reference),
		cmocka_unit_test(matmul_many_equals_a_call_each),
		cmocka_unit_test(half_conversions_round_correctly),
		cmocka_unit_test(half_rows_read_in_place_equal_converted),
		cmocka_unit_test(eight_key_scores_equal_dot1),
		cmocka_unit_test(block_max_and_exp_sum_by_definition),
		cmocka_unit_test(many_head_kernels_equal_one_head),
		cmocka_unit_test(half_keys_read_in_place_equal_converted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
