/*
 * engine/cpu/kernels.h: the CPU backend's vector kernels, shared by its
 * matmul, attention and element-wise ops and by the MSA index search
 * (engine/msa_index.c). Every output is one 8-lane FMA accumulator over
 * the row summed in one fixed order (hsum8), so a prompt fed at once, fed
 * token by token or batched with others gives the same bits. AVX2/FMA
 * where the build has them; SLEEF's vector exp when the build found it;
 * plain loops otherwise (the same order of operations per lane is not
 * promised there, only per build).
 */
#ifndef ENG_CPU_KERNELS_H
#define ENG_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/gguf/quant.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ENG_AVX2 1
#endif

#if defined(EV_HAVE_SLEEF) && defined(ENG_AVX2)
#include <sleef.h>
#define ENG_VEXP 1
#endif

static inline float dot(const float *a, const float *b, int n)
{
	int i = 0;
	float s = 0;
#ifdef ENG_AVX2
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	for (; i + 16 <= n; i += 16) {
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
		acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
	}
	for (; i + 8 <= n; i += 8)
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
	acc0 = _mm256_add_ps(acc0, acc1);
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	s = _mm_cvtss_f32(h);
#endif
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

#ifdef ENG_VEXP
/* SLEEF's 1-ulp exp of 8 floats; a short tail goes through a padded
 * vector, so a value's exp never depends on where it sits. */
static inline __m256 exp8(__m256 x)
{
	return Sleef_expf8_u10avx2(x);
}

static inline void exp_tail(float *y, const float *x, int n, float sub)
{
	float t[8] = {0};
	for (int i = 0; i < n; i++)
		t[i] = x[i] - sub;
	_mm256_storeu_ps(t, exp8(_mm256_loadu_ps(t)));
	memcpy(y, t, (size_t)n * sizeof(float));
}
#endif

/* y[i] = exp(x[i] - sub), i < n (y may be x) */
static inline void exp_shift(float *y, const float *x, float sub, int n)
{
	int i = 0;
#ifdef ENG_VEXP
	__m256 s = _mm256_set1_ps(sub);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
	if (i < n)
		exp_tail(y + i, x + i, n - i, sub);
#else
	for (; i < n; i++)
		y[i] = expf(x[i] - sub);
#endif
}

static inline void axpy1(float *y, float a, const float *x, int n)
{
	int i = 0;
#ifdef ENG_AVX2
	__m256 av = _mm256_set1_ps(a);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
	for (; i < n; i++)
		y[i] += a * x[i];
}

/* acc[d] = acc[d] * c + sum_t p[t] * V[t * stride + d], d < n: the
 * accumulator held in registers 64 floats at a time while the rows
 * stream past (no load and store of it a row). */
static inline void weighted_rows(float *acc, float c, const float *p, const float *V, size_t stride, int cnt, int n)
{
	int d = 0;
#ifdef ENG_AVX2
	__m256 cv = _mm256_set1_ps(c);
	for (; d + 64 <= n; d += 64) {
		__m256 a0 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d)), a1 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 8));
		__m256 a2 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 16)), a3 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 24));
		__m256 a4 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 32)), a5 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 40));
		__m256 a6 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 48)), a7 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 56));
		for (int t = 0; t < cnt; t++) {
			const float *v = V + (size_t)t * stride + d;
			__m256 pv = _mm256_broadcast_ss(p + t);
			a0 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v), a0);
			a1 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 8), a1);
			a2 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 16), a2);
			a3 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 24), a3);
			a4 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 32), a4);
			a5 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 40), a5);
			a6 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 48), a6);
			a7 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 56), a7);
		}
		_mm256_storeu_ps(acc + d, a0), _mm256_storeu_ps(acc + d + 8, a1);
		_mm256_storeu_ps(acc + d + 16, a2), _mm256_storeu_ps(acc + d + 24, a3);
		_mm256_storeu_ps(acc + d + 32, a4), _mm256_storeu_ps(acc + d + 40, a5);
		_mm256_storeu_ps(acc + d + 48, a6), _mm256_storeu_ps(acc + d + 56, a7);
	}
	for (; d + 8 <= n; d += 8) {
		__m256 a = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d));
		for (int t = 0; t < cnt; t++)
			a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), _mm256_loadu_ps(V + (size_t)t * stride + d), a);
		_mm256_storeu_ps(acc + d, a);
	}
#endif
	for (; d < n; d++) {
		float a = acc[d] * c;
		for (int t = 0; t < cnt; t++)
			a += p[t] * V[(size_t)t * stride + d];
		acc[d] = a;
	}
}

#ifdef ENG_AVX2
/* The four accumulators' lane totals at once (dot4's order, which hsum8
 * follows for one) */
static inline __m128 hsum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
	__m256 t2 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}
#endif

/* out[j] = w_j . x for the 4 weight rows w0..w3 (length n) */
static inline void dot4(float out[4], const float *x, const float *w0, const float *w1, const float *w2, const float *w3,
		 int n)
{
	int i = 0;
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#ifdef ENG_AVX2
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + i), a0);
		a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w1 + i), a1);
		a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w2 + i), a2);
		a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w3 + i), a3);
	}
	float tmp[4];
	_mm_storeu_ps(tmp, hsum4x8(a0, a1, a2, a3));
	s0 = tmp[0], s1 = tmp[1], s2 = tmp[2], s3 = tmp[3];
#endif
	for (; i < n; i++) {
		s0 += x[i] * w0[i];
		s1 += x[i] * w1[i];
		s2 += x[i] * w2[i];
		s3 += x[i] * w3[i];
	}
	out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

#ifdef ENG_AVX2
/* The sum of one accumulator's lanes in dot4's order (see there), so that
 * every kernel gives an output the same bits whatever its tile. */
static inline float hsum8(__m256 a)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, a), _mm256_hadd_ps(a, a));
	return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

/* The greatest of x[0..n), or -INFINITY (NaNs passed over): the value a
 * running maximum gives, whatever the order (a maximum is exact; of +0
 * and -0 either may come out, and both shift the exps below alike). */
static inline float max_of(const float *x, int n)
{
	float m = -INFINITY;
	int i = 0;
#ifdef ENG_AVX2
	if (n >= 8) {
		__m256 a = _mm256_set1_ps(-INFINITY);
		for (; i + 8 <= n; i += 8)
			a = _mm256_max_ps(_mm256_loadu_ps(x + i), a); /* a NaN in x gives a back */
		float t[8];
		_mm256_storeu_ps(t, a);
		for (int k = 0; k < 8; k++)
			m = t[k] > m ? t[k] : m;
	}
#endif
	for (; i < n; i++)
		m = x[i] > m ? x[i] : m;
	return m;
}

/* exp_shift, returning the sum of the y: with the vector exp, eight
 * lanes of partial sums (a short tail in the first lanes of one more
 * vector) added in hsum8's order; plain loops add in order. */
static inline float exp_shift_sum(float *y, const float *x, float sub, int n)
{
	int i = 0;
#ifdef ENG_VEXP
	__m256 s = _mm256_set1_ps(sub), acc = _mm256_setzero_ps();
	for (; i + 8 <= n; i += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
		_mm256_storeu_ps(y + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	if (i < n) {
		float t[8] = {0};
		exp_tail(y + i, x + i, n - i, sub);
		memcpy(t, y + i, (size_t)(n - i) * sizeof(float));
		acc = _mm256_add_ps(acc, _mm256_loadu_ps(t));
	}
	return hsum8(acc);
#else
	float sum = 0;
	for (; i < n; i++)
		sum += y[i] = expf(x[i] - sub);
	return sum;
#endif
}

/* ---- 16-bit weight rows (BF16, F16) read in place ------------------------- */

/* Eight 16-bit weights as f32, exactly: BF16 by a shift into the high
 * half, F16 by F16C's conversion. Kernels on them give the bits of the
 * f32 kernels on converted rows (the same products summed in the same
 * order), without the round trip through a buffer. */
#ifdef ENG_AVX2
static inline __m256 ld8_h(const uint16_t *p, int f16)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);
#ifdef __F16C__
	if (f16)
		return _mm256_cvtph_ps(h);
#endif
	(void)f16;
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

/* Whether ld8_h reads this dtype (f16 needs F16C). */
static inline int h_native(int f16)
{
#if defined(ENG_AVX2) && defined(__F16C__)
	return 1;
#elif defined(ENG_AVX2)
	return !f16;
#else
	(void)f16;
	return 0;
#endif
}

/* dot4 with 16-bit weight rows (f16 != 0: F16, else BF16); only where
 * h_native(f16). conv converts the tail's elements (below 8) one by one. */
static inline void dot4_h(float out[4], const float *x, const uint16_t *w0, const uint16_t *w1, const uint16_t *w2,
			  const uint16_t *w3, int n, int f16, float (*conv)(uint16_t))
{
	int i = 0;
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#ifdef ENG_AVX2
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		a0 = _mm256_fmadd_ps(xv, ld8_h(w0 + i, f16), a0);
		a1 = _mm256_fmadd_ps(xv, ld8_h(w1 + i, f16), a1);
		a2 = _mm256_fmadd_ps(xv, ld8_h(w2 + i, f16), a2);
		a3 = _mm256_fmadd_ps(xv, ld8_h(w3 + i, f16), a3);
	}
	__m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	__m128 r = _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
	float tmp[4];
	_mm_storeu_ps(tmp, r);
	s0 = tmp[0], s1 = tmp[1], s2 = tmp[2], s3 = tmp[3];
#endif
	(void)f16;
	for (; i < n; i++) {
		s0 += x[i] * conv(w0[i]);
		s1 += x[i] * conv(w1[i]);
		s2 += x[i] * conv(w2[i]);
		s3 += x[i] * conv(w3[i]);
	}
	out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* ---- block-quantized weight rows (ggml's block types) read in place -------- */

/* Elements of a row of blocks as f32 (ld32_q: 32 at a time), each the
 * value the format's definition computes (engine/gguf/quant.c: q * d,
 * (q - 8) * d, q * d + m; for the K-quants (d * sc) * q - dmin * m and
 * (d * sc) * (q - 32): the scalar products first, then one multiply and
 * one subtract a lane, never fused), so kernels on them give the bits of
 * the f32 kernels on the dequantized row. t: an eng_dtype block type. */
#if defined(ENG_AVX2) && defined(__F16C__)
static inline float q_h2f(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

/* 8 bytes at p widened to 32-bit lanes */
static inline __m256i q_u8x8(const uint8_t *p)
{
	return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* lane k: bit k of `bits` (the low 8 used), as 0 or 16 */
static inline __m256i q_bit16(uint32_t bits)
{
	__m256i b = _mm256_srlv_epi32(_mm256_set1_epi32((int)bits), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	return _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(1)), 4);
}

/* Lane k of the result: the byte p[k] as a 32-bit integer, its low nibble
 * (hi 0) or high nibble (hi 1). */
static inline __m256i q_nib8(const uint8_t *p, int hi)
{
	__m256i v = q_u8x8(p);
	return hi ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(0xF));
}

/* A block of 32 IQ4_NL nibbles qs[16] (the low nibbles the first 16
 * elements) as four vectors of eight: scale * the table's values */
static inline __attribute__((always_inline)) void ld32_iq4(__m256 v[4], const uint8_t *qs, float scale)
{
	const __m128i tab = _mm_loadu_si128((const __m128i *)eng_ggml_iq4nl_values), m4 = _mm_set1_epi8(0x0F);
	__m128i raw = _mm_loadu_si128((const __m128i *)qs);
	__m128i val[2] = {_mm_shuffle_epi8(tab, _mm_and_si128(raw, m4)),
	                  _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(raw, 4), m4))};
	__m256 d = _mm256_set1_ps(scale);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		__m128i e = g & 1 ? _mm_srli_si128(val[g / 2], 8) : val[g / 2];
		v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e)), d);
	}
}

/* Thirty-two elements (i a multiple of 32) as four vectors of eight: the
 * block's or sub-block's scales decoded once for all four. */
static inline __attribute__((always_inline)) void ld32_q(__m256 v[4], const uint8_t *row, int i, int t)
{
	if (t == 3) { /* Q8_0 {f16 d; i8 qs[32]} */
		const uint8_t *b = row + (size_t)(i / 32) * 34;
		__m256 d = _mm256_set1_ps(q_h2f(b));
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++)
			v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * g)))),
			                     d);
		return;
	}
	if (t == 12) { /* IQ4_NL {f16 d; qs[16]}: d * the table's values */
		const uint8_t *b = row + (size_t)(i / 32) * 18;
		ld32_iq4(v, b + 2, q_h2f(b));
		return;
	}
	if (t <= 7) { /* Q4_0, Q4_1, Q5_0, Q5_1: low nibbles the first 16 elements */
		static const uint8_t bsz[8] = {0, 0, 0, 34, 18, 20, 22, 24}, qso[8] = {0, 0, 0, 0, 2, 4, 6, 8};
		const uint8_t *b = row + (size_t)(i / 32) * bsz[t];
		__m256 d = _mm256_set1_ps(q_h2f(b));
		uint32_t qh = 0;
		if (t >= 6) /* the fifth bit of element e is bit e of qh */
			memcpy(&qh, b + (t == 6 ? 2 : 4), 4);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
			__m256i q = q_nib8(b + qso[t] + (g & 1) * 8, g >= 2);
			if (t >= 6)
				q = _mm256_or_si256(q, q_bit16(qh >> (8 * g)));
			if (t == 4 || t == 6)
				v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(t == 4 ? 8 : 16))), d);
			else
				v[g] = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), d), _mm256_set1_ps(q_h2f(b + 2)));
		}
		return;
	}
	int j = (i % 256) / 32; /* the sub-block */
	if (t >= 15) { /* the IQ2s: each half's scale d (1 + 2 ls) / 8 * the signed magnitudes (grid lookups) */
		uint32_t gt = eng_dtype_ggml((eng_dtype)t);
		const uint8_t *b = row + (size_t)(i / 256) * eng_ggml_type_size(gt);
		float d = q_h2f(b), f[32];
		for (int e = 0; e < 32; e++)
			f[e] = (float)eng_ggml_iq2_value(b, gt, 32 * j + e);
#pragma GCC unroll 4
		for (int g = 0; g < 4; g++)
			v[g] = _mm256_mul_ps(_mm256_loadu_ps(f + 8 * g),
			                     _mm256_set1_ps(eng_ggml_iq2_scale(d, eng_ggml_iq2_ls(b, gt, 32 * j + 8 * g))));
		return;
	}
	if (t == 13) { /* Q2_K {scales[16]; qs[64]; f16 d, dmin}: d * sc * q - dmin * min, a scale and minimum a 16 */
		const uint8_t *b = row + (size_t)(i / 256) * 84, *qs = b + 16 + 32 * (j / 4);
		float d = q_h2f(b + 80), dm = q_h2f(b + 82);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
			int s = b[2 * j + g / 2];
			__m256i q = _mm256_and_si256(_mm256_srli_epi32(q_u8x8(qs + 8 * g), 2 * (j % 4)), _mm256_set1_epi32(3));
			v[g] = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(d * (float)(s & 0xF))),
			                     _mm256_set1_ps(dm * (float)(s >> 4)));
		}
		return;
	}
	if (t == 14) { /* Q3_K {hmask[32]; qs[64]; scales[12]; f16 d}: d * scale * value, a signed scale a 16 */
		const uint8_t *b = row + (size_t)(i / 256) * 110, *qs = b + 32 + 32 * (j / 4);
		float d = q_h2f(b + 108);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
			__m256i q = _mm256_and_si256(_mm256_srli_epi32(q_u8x8(qs + 8 * g), 2 * (j % 4)), _mm256_set1_epi32(3));
			__m256i h = _mm256_and_si256(_mm256_srli_epi32(q_u8x8(b + 8 * g), j), _mm256_set1_epi32(1));
			q = _mm256_sub_epi32(_mm256_or_si256(q, _mm256_slli_epi32(h, 2)), _mm256_set1_epi32(4));
			v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(d * (float)eng_ggml_q3k_scale(2 * j + g / 2, b + 96)));
		}
		return;
	}
	if (t == 11) { /* IQ4_XS {f16 d; u16 scales_h; scales_l[4]; qs[128]}: d * the block's scale * the table's values */
		const uint8_t *b = row + (size_t)(i / 256) * 136;
		ld32_iq4(v, b + 8 + 16 * j, q_h2f(b) * (float)eng_ggml_iq4xs_scale(j, b));
		return;
	}
	if (t == 10) { /* Q6_K: {ql[128], qh[64], i8 scales[16], f16 d} */
		const uint8_t *b = row + (size_t)(i / 256) * 210;
		int h = j / 4, k = j % 4;
		const uint8_t *ql = b + h * 64 + (k & 1) * 32, *qh = b + 128 + h * 32;
		float d = q_h2f(b + 208);
		const int8_t *sc = (const int8_t *)(b + 192 + h * 8 + 2 * k);
		__m256 s0 = _mm256_set1_ps(d * (float)sc[0]), s1 = _mm256_set1_ps(d * (float)sc[1]);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
			__m256i hi = _mm256_and_si256(_mm256_srli_epi32(q_u8x8(qh + 8 * g), 2 * k), _mm256_set1_epi32(3));
			__m256i q = _mm256_or_si256(q_nib8(ql + 8 * g, k >= 2), _mm256_slli_epi32(hi, 4));
			q = _mm256_sub_epi32(q, _mm256_set1_epi32(32));
			v[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), g < 2 ? s0 : s1);
		}
		return;
	}
	/* Q4_K {f16 d, dmin; scales[12]; qs[128]}, Q5_K {..., qh[32], qs[128]} */
	int five = t == 9, c = j / 2, half = j % 2, sc, m;
	const uint8_t *b = row + (size_t)(i / 256) * (five ? 176 : 144);
	eng_ggml_kscale_min(j, b + 4, &sc, &m);
	__m256 ds = _mm256_set1_ps(q_h2f(b) * (float)sc), dm = _mm256_set1_ps(q_h2f(b + 2) * (float)m);
	const uint8_t *qs = b + (five ? 48 : 16) + c * 32;
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		__m256i q = q_nib8(qs + 8 * g, half);
		if (five) {
			__m256i hb = _mm256_and_si256(_mm256_srli_epi32(q_u8x8(b + 16 + 8 * g), j), _mm256_set1_epi32(1));
			q = _mm256_or_si256(q, _mm256_slli_epi32(hb, 4));
		}
		v[g] = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), ds), dm);
	}
}
#define ENG_QNATIVE 1
#endif

#ifdef ENG_QNATIVE
/* acc += x[i..i+32) . the row's 32 elements there, eight lanes at a time
 * (the same order of sums as eight elements a step) */
static inline __attribute__((always_inline)) __m256 fma32_q(__m256 acc, const __m256 xv[4], const uint8_t *row, int i,
                                                             int t)
{
	__m256 v[4];
	ld32_q(v, row, i, t);
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++)
		acc = _mm256_fmadd_ps(xv[g], v[g], acc);
	return acc;
}

/* dot4_q for one type known at compile time (t a constant after inlining,
 * so the layout's branches fold away) */
static inline __attribute__((always_inline)) void dot4_q_t(__m256 acc[4], const float *x, const uint8_t *const w[4],
                                                            int n, int t)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (int i = 0; i + 32 <= n; i += 32) {
		__m256 xv[4] = {_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(x + i + 16),
		                _mm256_loadu_ps(x + i + 24)};
		a0 = fma32_q(a0, xv, w[0], i, t);
		a1 = fma32_q(a1, xv, w[1], i, t);
		a2 = fma32_q(a2, xv, w[2], i, t);
		a3 = fma32_q(a3, xv, w[3], i, t);
	}
	acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}
#endif

/* dot4 with rows of blocks (n a multiple of the block; only where
 * ENG_QNATIVE): the same sums as dot4 on the dequantized rows. */
static inline void dot4_q(float out[4], const float *x, const uint8_t *w0, const uint8_t *w1, const uint8_t *w2,
			  const uint8_t *w3, int n, int t)
{
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#ifdef ENG_QNATIVE
	const uint8_t *const w[4] = {w0, w1, w2, w3};
	__m256 a[4];
	switch (t) {
	case 3: dot4_q_t(a, x, w, n, 3); break;
	case 4: dot4_q_t(a, x, w, n, 4); break;
	case 5: dot4_q_t(a, x, w, n, 5); break;
	case 6: dot4_q_t(a, x, w, n, 6); break;
	case 7: dot4_q_t(a, x, w, n, 7); break;
	case 8: dot4_q_t(a, x, w, n, 8); break;
	case 9: dot4_q_t(a, x, w, n, 9); break;
	case 11: dot4_q_t(a, x, w, n, 11); break;
	case 12: dot4_q_t(a, x, w, n, 12); break;
	case 13: dot4_q_t(a, x, w, n, 13); break;
	case 14: dot4_q_t(a, x, w, n, 14); break;
	case 15: dot4_q_t(a, x, w, n, 15); break;
	case 16: dot4_q_t(a, x, w, n, 16); break;
	case 17: dot4_q_t(a, x, w, n, 17); break;
	default: dot4_q_t(a, x, w, n, 10); break;
	}
	__m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	__m128 r = _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
	float tmp[4];
	_mm_storeu_ps(tmp, r);
	s0 = tmp[0], s1 = tmp[1], s2 = tmp[2], s3 = tmp[3];
#else
	(void)x, (void)w0, (void)w1, (void)w2, (void)w3, (void)n, (void)t;
#endif
	out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* w . x with one accumulator, its lanes summed as dot4 sums them: the
 * same bits as any of dot4's outputs. */
static inline float dot1(const float *x, const float *w, int n)
{
	int i = 0;
	float s = 0;
#ifdef ENG_AVX2
	__m256 a = _mm256_setzero_ps();
	for (; i + 8 <= n; i += 8)
		a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), a);
	s = hsum8(a);
#endif
	for (; i < n; i++)
		s += x[i] * w[i];
	return s;
}

#ifdef ENG_AVX2
/* out[t] = the lanes of a[t] summed, times scale, for t < 8: a transposing
 * tree whose every sum is one of hsum8's ((a0 + a1) + (a2 + a3)) + ((a4 +
 * a5) + (a6 + a7)) ([t0: 01 23 | 45 67, t1: ...] pairs, then quads, then
 * halves), eight totals for the price of one reduction */
static inline void hsum8x8(float *out, const __m256 a[8], float scale)
{
	__m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
	__m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
	__m256 q03 = _mm256_hadd_ps(h01, h23), q47 = _mm256_hadd_ps(h45, h67);
	__m256 r = _mm256_add_ps(_mm256_permute2f128_ps(q03, q47, 0x20), _mm256_permute2f128_ps(q03, q47, 0x31));
	_mm256_storeu_ps(out, _mm256_mul_ps(r, _mm256_set1_ps(scale)));
}

/* out[t] = dot1(x + t * stride, w, n) * scale for t < 8, n a multiple of
 * 8, bit for bit: the eight accumulators' lanes summed together by
 * hsum8x8, so eight scores cost one reduction instead of eight
 * (attention's keys against one query head). */
static inline void dot1x8(float *out, const float *x, size_t stride, const float *w, int n, float scale)
{
	__m256 a[8]; /* (unrolled, so that they stay in registers) */
#pragma GCC unroll 8
	for (int t = 0; t < 8; t++)
		a[t] = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8) {
		__m256 wv = _mm256_loadu_ps(w + i);
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++)
			a[t] = _mm256_fmadd_ps(_mm256_loadu_ps(x + (size_t)t * stride + i), wv, a[t]);
	}
	hsum8x8(out, a, scale);
}

/* ---- keys and values kept in 16 bits (--kv-dtype bf16|f16), read in place --

 * Each is its f32 namesake on the row converted exactly as read (ld8_h):
 * the same products summed in the same order, so the bits of converting a
 * block into a buffer first, without the buffer. n a multiple of 8. */
static inline void dot1x8_h(float *out, const uint16_t *x, size_t stride, const float *w, int n, float scale, int f16)
{
	__m256 a[8];
#pragma GCC unroll 8
	for (int t = 0; t < 8; t++)
		a[t] = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8) {
		__m256 wv = _mm256_loadu_ps(w + i);
#pragma GCC unroll 8
		for (int t = 0; t < 8; t++)
			a[t] = _mm256_fmadd_ps(ld8_h(x + (size_t)t * stride + i, f16), wv, a[t]);
	}
	hsum8x8(out, a, scale);
}

static inline float dot1_kh(const uint16_t *x, const float *w, int n, int f16)
{
	__m256 a = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8)
		a = _mm256_fmadd_ps(ld8_h(x + i, f16), _mm256_loadu_ps(w + i), a);
	return hsum8(a);
}

static inline void dot4_kh(float out[4], const uint16_t *x, const float *w0, const float *w1, const float *w2,
			   const float *w3, int n, int f16)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (int i = 0; i < n; i += 8) {
		__m256 xv = ld8_h(x + i, f16);
		a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + i), a0);
		a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w1 + i), a1);
		a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w2 + i), a2);
		a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w3 + i), a3);
	}
	_mm_storeu_ps(out, hsum4x8(a0, a1, a2, a3));
}

static inline void weighted_rows_h(float *acc, float c, const float *p, const uint16_t *V, size_t stride, int cnt, int n,
				   int f16)
{
	__m256 cv = _mm256_set1_ps(c);
	int d = 0;
	for (; d + 32 <= n; d += 32) {
		__m256 a0 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d)), a1 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 8));
		__m256 a2 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 16)), a3 = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d + 24));
		for (int t = 0; t < cnt; t++) {
			const uint16_t *v = V + (size_t)t * stride + d;
			__m256 pv = _mm256_broadcast_ss(p + t);
			a0 = _mm256_fmadd_ps(pv, ld8_h(v, f16), a0);
			a1 = _mm256_fmadd_ps(pv, ld8_h(v + 8, f16), a1);
			a2 = _mm256_fmadd_ps(pv, ld8_h(v + 16, f16), a2);
			a3 = _mm256_fmadd_ps(pv, ld8_h(v + 24, f16), a3);
		}
		_mm256_storeu_ps(acc + d, a0), _mm256_storeu_ps(acc + d + 8, a1);
		_mm256_storeu_ps(acc + d + 16, a2), _mm256_storeu_ps(acc + d + 24, a3);
	}
	for (; d < n; d += 8) {
		__m256 a = _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d));
		for (int t = 0; t < cnt; t++)
			a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), ld8_h(V + (size_t)t * stride + d, f16), a);
		_mm256_storeu_ps(acc + d, a);
	}
}
#endif

/* dot1 with a 16-bit weight row (as dot4_h). */
static inline float dot1_h(const float *x, const uint16_t *w, int n, int f16, float (*conv)(uint16_t))
{
	int i = 0;
	float s = 0;
#ifdef ENG_AVX2
	__m256 a = _mm256_setzero_ps();
	for (; i + 8 <= n; i += 8)
		a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), ld8_h(w + i, f16), a);
	s = hsum8(a);
#endif
	(void)f16;
	for (; i < n; i++)
		s += x[i] * conv(w[i]);
	return s;
}

/* dot1 with a row of blocks (as dot4_q). */
static inline float dot1_q(const float *x, const uint8_t *w, int n, int t)
{
	float s = 0;
#ifdef ENG_QNATIVE
	__m256 a = _mm256_setzero_ps();
	for (int i = 0; i + 32 <= n; i += 32) {
		__m256 xv[4] = {_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(x + i + 16),
		                _mm256_loadu_ps(x + i + 24)};
		a = fma32_q(a, xv, w, i, t);
	}
	s = hsum8(a);
#else
	(void)x, (void)w, (void)n, (void)t;
#endif
	return s;
}

/* o[i][j] = w_j . x_i for 3 batch rows and 4 weight rows: the batch
 * vectors (from L2) held in registers, each weight vector (from L1)
 * loaded once into the 16th register and used three times. */
static inline void dot3x4(float o[3][4], const float *const x[3], const float *const w[4], int n)
{
	int i = 0;
	float s[3][4] = {{0}};
#ifdef ENG_AVX2
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00;
	__m256 c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
	const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
	for (; i + 8 <= n; i += 8) {
		__m256 a0 = _mm256_loadu_ps(x0 + i), a1 = _mm256_loadu_ps(x1 + i), a2 = _mm256_loadu_ps(x2 + i), v;
		__asm__("" : "+x"(a0), "+x"(a1), "+x"(a2));
		v = _mm256_loadu_ps(w0 + i);
		__asm__("" : "+x"(v));
		c00 = _mm256_fmadd_ps(a0, v, c00);
		c10 = _mm256_fmadd_ps(a1, v, c10);
		c20 = _mm256_fmadd_ps(a2, v, c20);
		v = _mm256_loadu_ps(w1 + i);
		__asm__("" : "+x"(v));
		c01 = _mm256_fmadd_ps(a0, v, c01);
		c11 = _mm256_fmadd_ps(a1, v, c11);
		c21 = _mm256_fmadd_ps(a2, v, c21);
		v = _mm256_loadu_ps(w2 + i);
		__asm__("" : "+x"(v));
		c02 = _mm256_fmadd_ps(a0, v, c02);
		c12 = _mm256_fmadd_ps(a1, v, c12);
		c22 = _mm256_fmadd_ps(a2, v, c22);
		v = _mm256_loadu_ps(w3 + i);
		__asm__("" : "+x"(v));
		c03 = _mm256_fmadd_ps(a0, v, c03);
		c13 = _mm256_fmadd_ps(a1, v, c13);
		c23 = _mm256_fmadd_ps(a2, v, c23);
	}
	s[0][0] = hsum8(c00), s[0][1] = hsum8(c01), s[0][2] = hsum8(c02), s[0][3] = hsum8(c03);
	s[1][0] = hsum8(c10), s[1][1] = hsum8(c11), s[1][2] = hsum8(c12), s[1][3] = hsum8(c13);
	s[2][0] = hsum8(c20), s[2][1] = hsum8(c21), s[2][2] = hsum8(c22), s[2][3] = hsum8(c23);
#endif
	for (; i < n; i++)
		for (int r = 0; r < 3; r++)
			for (int k = 0; k < 4; k++)
				s[r][k] += x[r][i] * w[k][i];
	memcpy(o, s, sizeof(s));
}

#endif
