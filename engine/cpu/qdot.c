/*
 * engine/cpu/qdot.c: block-quantized weights against 16-bit activations
 * (the definition is in qdot.h). The plain functions here are the
 * definition written out element by element; the vector kernels
 * (qdot_body.h) are compiled for AVX2 and for AVX512-VNNI with target
 * attributes whatever the build's -march, and the CPU picks a level at
 * run time. All levels give the same bits.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/backend.h"
#include "engine/cpu/qdot.h"
#include "engine/cpu/qsimd.h"
#include "engine/gguf/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QD_X86 1
#endif

/* Bytes a block of the 32-element types (Q8_0 .. Q5_1 and IQ4_NL, by
 * eng_dtype) and where its nibbles start */
static const int qd_bsz[ENG_DTYPE_COUNT] = {0, 0, 0, 34, 18, 20, 22, 24, 0, 0, 0, 0, 18, 0};
#if defined(__x86_64__) && defined(__GNUC__)
static const int qd_qs[ENG_DTYPE_COUNT] = {0, 0, 0, 2, 2, 4, 6, 8, 0, 0, 0, 0, 2, 0};
/* where the four rows' nibbles start in a block of a quad laid out four
 * rows together (qdot.h eng_qx4_pack) */
static const int qd_x4qs[ENG_DTYPE_COUNT] = {0, 0, 0, 0, 8, 16, 24, 32, 0, 0, 0, 0, 8, 0};
#endif

/* The grid types IQ2_XXS, IQ2_XS, IQ2_S: each group of eight values a
 * lookup */
static inline int qd_iq2(int t)
{
	return t >= ENG_IQ2_XXS && t <= ENG_IQ2_S;
}

/* A type of 256-element super-blocks (Q4_K, Q5_K, Q6_K, IQ4_XS, Q2_K,
 * Q3_K, the IQ2s); the others here are 32-element blocks (Q8_0 .. Q5_1,
 * IQ4_NL). */
static inline int qd_super(int t)
{
	return (t >= ENG_Q4_K && t <= ENG_IQ4_XS) || t == ENG_Q2_K || t == ENG_Q3_K || qd_iq2(t);
}

/* Whether the VNNI words kernel (kernr) takes calls of type t made
 * without the activations' bytes (Q8_0 .. Q5_1); the others then run the
 * AVX2 kernel, the same bits (production decode always brings the bytes
 * where it reaches these kernels) */
static inline int qd_words(int t)
{
	return t >= ENG_Q8_0 && t <= ENG_Q5_1;
}

/* Whether a block's two halves take their own scales (Q6_K, Q2_K, Q3_K,
 * IQ2_XS, IQ2_S) */
static inline int qd_two(int t)
{
	return t == ENG_Q6_K || t == ENG_Q2_K || t == ENG_Q3_K || t == ENG_IQ2_XS || t == ENG_IQ2_S;
}

static inline int qd_has_min(int t)
{
	return t == ENG_Q4_1 || t == ENG_Q5_1 || t == ENG_Q4_K || t == ENG_Q5_K;
}

/* ---- the definition, element by element ---------------------------------- */

void eng_qx_quantize_ref(eng_qxblk *out, const float *x, int n)
{
	for (int b = 0; b < n / 32; b++) {
		const float *v = x + (size_t)b * 32;
		float amax = 0.0f;
		for (int e = 0; e < 32; e++)
			amax = fabsf(v[e]) > amax ? fabsf(v[e]) : amax;
		float d = amax / 32767.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		int sum = 0;
		for (int e = 0; e < 32; e++) {
			int q = (int)nearbyintf(v[e] * id);
			out[b].q[e] = (int16_t)q;
			sum += q;
		}
		out[b].d = d;
		out[b].s = d * (float)sum;
	}
}

void eng_qx_bytes_ref(eng_qxbyt *out, const eng_qxblk *in, int nb)
{
	for (int b = 0; b < nb; b++) {
		int hs[2] = {0, 0}, hbs = 0;
		for (int e = 0; e < 32; e++) {
			int q = in[b].q[e];
			out[b].lb[e] = (uint8_t)(q & 255);
			out[b].hb[e] = (int8_t)((q - (q & 255)) / 256);
			hs[e / 16] += q;
			hbs += out[b].hb[e];
		}
		out[b].hs[0] = hs[0], out[b].hs[1] = hs[1];
		out[b].hbs = hbs;
	}
}

/* block b's integer values, its halves' scales and minimum coefficient
 * (m[0]; Q2_K: each half's, m[0] and m[1]; m[1] 0 for the others) */
static void unpack_ref(const uint8_t *row, int b, int t, int16_t q[32], float sc[2], float m[2])
{
	m[0] = m[1] = 0.0f;
	float d = 0.0f;
	if (t == ENG_IQ4_NL) {
		const uint8_t *p = row + (size_t)b * 18;
		sc[0] = sc[1] = eng_ggml_h2f(p);
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)eng_ggml_iq4_value(p + 2, e);
		return;
	}
	if (t <= ENG_Q5_1) {
		const uint8_t *p = row + (size_t)b * (size_t)qd_bsz[t];
		d = eng_ggml_h2f(p);
		sc[0] = sc[1] = d;
		if (t == ENG_Q8_0) {
			for (int e = 0; e < 32; e++)
				q[e] = (int8_t)p[2 + e];
			return;
		}
		uint32_t qh = 0;
		const uint8_t *qs = p + 2;
		if (t == ENG_Q4_1 || t == ENG_Q5_1)
			m[0] = eng_ggml_h2f(p + 2), qs += 2;
		if (t == ENG_Q5_0 || t == ENG_Q5_1)
			memcpy(&qh, qs, 4), qs += 4;
		for (int e = 0; e < 32; e++) {
			int v = e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
			v |= (int)((qh >> e) & 1) << 4;
			q[e] = (int16_t)(v - (t == ENG_Q4_0 ? 8 : t == ENG_Q5_0 ? 16 : 0));
		}
		return;
	}
	int j = b % 8;
	if (qd_iq2(t)) { /* the signed magnitudes, each half's scale d (1 + 2 ls) / 8 */
		uint32_t gt = eng_dtype_ggml((eng_dtype)t);
		const uint8_t *p = row + (size_t)(b / 8) * eng_dtype_bytes((eng_dtype)t, 256);
		d = eng_ggml_h2f(p);
		for (int h = 0; h < 2; h++)
			sc[h] = eng_ggml_iq2_scale(d, eng_ggml_iq2_ls(p, gt, 32 * j + 16 * h));
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)eng_ggml_iq2_value(p, gt, 32 * j + e);
		return;
	}
	if (t == ENG_Q2_K) { /* sub-blocks 2j and 2j + 1 of 16 */
		const uint8_t *p = row + (size_t)(b / 8) * 84;
		for (int h = 0; h < 2; h++) {
			int s = p[2 * j + h];
			sc[h] = eng_ggml_h2f(p + 80) * (float)(s & 0xF);
			m[h] = -(eng_ggml_h2f(p + 82) * (float)(s >> 4));
		}
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)eng_ggml_q2k_value(p, 32 * j + e);
		return;
	}
	if (t == ENG_Q3_K) { /* sub-blocks 2j and 2j + 1 of 16, each its signed scale */
		const uint8_t *p = row + (size_t)(b / 8) * 110;
		d = eng_ggml_h2f(p + 108);
		sc[0] = d * (float)eng_ggml_q3k_scale(2 * j, p + 96), sc[1] = d * (float)eng_ggml_q3k_scale(2 * j + 1, p + 96);
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)eng_ggml_q3k_value(p, 32 * j + e);
		return;
	}
	if (t == ENG_IQ4_XS) {
		const uint8_t *p = row + (size_t)(b / 8) * 136, *qs = p + 8 + 16 * j;
		sc[0] = sc[1] = eng_ggml_h2f(p) * (float)eng_ggml_iq4xs_scale(j, p);
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)eng_ggml_iq4_value(qs, e);
		return;
	}
	if (t == ENG_Q6_K) {
		const uint8_t *p = row + (size_t)(b / 8) * 210;
		int h = j / 4, k = j % 4;
		const uint8_t *ql = p + h * 64 + (k & 1) * 32, *qh = p + 128 + h * 32;
		const int8_t *s8 = (const int8_t *)(p + 192 + h * 8 + 2 * k);
		d = eng_ggml_h2f(p + 208);
		sc[0] = d * (float)s8[0], sc[1] = d * (float)s8[1];
		for (int e = 0; e < 32; e++)
			q[e] = (int16_t)(((k >= 2 ? ql[e] >> 4 : ql[e] & 0xF) | (((qh[e] >> (2 * k)) & 3) << 4)) - 32);
		return;
	}
	int five = t == ENG_Q5_K, s, mn;
	const uint8_t *p = row + (size_t)(b / 8) * (five ? 176 : 144);
	eng_ggml_kscale_min(j, p + 4, &s, &mn);
	sc[0] = sc[1] = eng_ggml_h2f(p) * (float)s;
	m[0] = -(eng_ggml_h2f(p + 2) * (float)mn);
	const uint8_t *qs = p + (five ? 48 : 16) + (j / 2) * 32;
	for (int e = 0; e < 32; e++) {
		int v = (qs[e] >> (4 * (j % 2))) & 0xF;
		if (five)
			v |= ((p[16 + e] >> j) & 1) << 4;
		q[e] = (int16_t)v;
	}
}

/* one block of the definition (qdot.h): its halves' integer sums into
 * the chain acc */
static float block_add(float acc, const int16_t *q, const float sc[2], const eng_qxblk *xb, int t)
{
	int lo = 0, hi = 0;
	for (int e = 0; e < 16; e++) {
		lo += q[e] * xb->q[e];
		hi += q[16 + e] * xb->q[16 + e];
	}
	if (qd_two(t))
		return fmaf((float)hi, sc[1] * xb->d, fmaf((float)lo, sc[0] * xb->d, acc));
	return fmaf((float)(lo + hi), sc[0] * xb->d, acc);
}

/* one block's minima into the chain mins: m[0] * s, or Q2_K's halves' */
static float block_mins(float mins, const float m[2], const eng_qxblk *xb, int t)
{
	if (t == ENG_Q2_K) {
		int h[2] = {0, 0};
		for (int e = 0; e < 32; e++)
			h[e / 16] += xb->q[e];
		return fmaf(m[1], xb->d * (float)h[1], fmaf(m[0], xb->d * (float)h[0], mins));
	}
	return qd_has_min(t) ? fmaf(m[0], xb->s, mins) : mins;
}

float eng_qdot_ref(const eng_qxblk *x, const uint8_t *w, int nb, int t)
{
	float acc = 0.0f, mins = 0.0f;
	for (int b = 0; b < nb; b++) {
		int16_t q[32];
		float sc[2], m[2];
		unpack_ref(w, b, t, q, sc, m);
		acc = block_add(acc, q, sc, &x[b], t);
		mins = block_mins(mins, m, &x[b], t);
	}
	return acc + mins;
}

static void qdot_plain(float *o, const eng_qxblk *const *x, int nx, const uint8_t *const w[4], int nb, int t)
{
	for (int i = 0; i < nx; i++)
		for (int r = 0; r < 4; r++)
			o[i * 4 + r] = eng_qdot_ref(x[i], w[r], nb, t);
}

static void group_unpack_plain(eng_qgroup *g, const uint8_t *const w[ENG_QGROUP_ROWS], int nb, int t)
{
	for (int r = 0; r < ENG_QGROUP_ROWS; r++)
		for (int b = 0; b < nb; b++) {
			int16_t q[32];
			float sc[2], m[2];
			unpack_ref(w[r], b, t, q, sc, m);
			g->m[b * 16 + r] = m[0], g->m2[b * 16 + r] = m[1];
			for (int k = 0; k < 16; k++) {
				g->q[((size_t)(b * 16 + k) * 16 + r) * 2] = q[2 * k];
				g->q[((size_t)(b * 16 + k) * 16 + r) * 2 + 1] = q[2 * k + 1];
			}
			g->sc[(b * 2) * 16 + r] = sc[0];
			g->sc[(b * 2 + 1) * 16 + r] = sc[1];
		}
}

/* the definition on a group's row r */
static float qdot_group_ref(const eng_qxblk *x, const eng_qgroup *g, int r, int nb, int t)
{
	float acc = 0.0f, mins = 0.0f;
	for (int b = 0; b < nb; b++) {
		int16_t q[32];
		for (int k = 0; k < 16; k++) {
			q[2 * k] = g->q[((size_t)(b * 16 + k) * 16 + r) * 2];
			q[2 * k + 1] = g->q[((size_t)(b * 16 + k) * 16 + r) * 2 + 1];
		}
		float sc[2] = {g->sc[(b * 2) * 16 + r], g->sc[(b * 2 + 1) * 16 + r]}, m[2] = {g->m[b * 16 + r], g->m2[b * 16 + r]};
		acc = block_add(acc, q, sc, &x[b], t);
		mins = block_mins(mins, m, &x[b], t);
	}
	return acc + mins;
}

static void qdot_group_plain(float *o, const eng_qxblk *const *x, int nx, const eng_qgroup *g, int nb, int t)
{
	for (int i = 0; i < nx; i++)
		for (int r = 0; r < ENG_QGROUP_ROWS; r++)
			o[i * 16 + r] = qdot_group_ref(x[i], g, r, nb, t);
}

/* ---- vector kernels, chosen at run time ------------------------------------ */

#ifdef QD_X86
#define QD_SFX _avx2
#define QD_TARGET "avx2,fma,f16c"
#define QD_VNNI 0
#include "engine/cpu/qdot_body.h"
#undef QD_SFX
#undef QD_TARGET
#undef QD_VNNI

#define QD_SFX _vnni
#define QD_TARGET "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
#define QD_VNNI 1
#include "engine/cpu/qdot_body.h"
#undef QD_SFX
#undef QD_TARGET
#undef QD_VNNI

__attribute__((target("avx2,fma"))) static void qx_quantize_avx2(eng_qxblk *out, const float *x, int n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	for (int b = 0; b < n / 32; b++) {
		const float *v = x + (size_t)b * 32;
		__m256 x0 = _mm256_loadu_ps(v), x1 = _mm256_loadu_ps(v + 8), x2 = _mm256_loadu_ps(v + 16),
		       x3 = _mm256_loadu_ps(v + 24);
		__m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, x0), _mm256_andnot_ps(sign, x1)),
		                          _mm256_max_ps(_mm256_andnot_ps(sign, x2), _mm256_andnot_ps(sign, x3)));
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		float amax = _mm_cvtss_f32(h);
		float d = amax / 32767.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
		__m256 iv = _mm256_set1_ps(id);
		/* round to nearest even (the default rounding mode), as nearbyintf */
		__m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(x0, iv)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(x1, iv));
		__m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(x2, iv)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(x3, iv));
		__m256i s = _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3));
		__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
		/* packs works within 128-bit halves: put the quarters back in order */
		_mm256_storeu_si256((__m256i *)out[b].q, _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8));
		_mm256_storeu_si256((__m256i *)(out[b].q + 16), _mm256_permute4x64_epi64(_mm256_packs_epi32(q2, q3), 0xD8));
		out[b].d = d;
		out[b].s = d * (float)_mm_cvtsi128_si32(s4);
	}
}

__attribute__((target("avx2"))) static void qx_bytes_avx2(eng_qxbyt *out, const eng_qxblk *in, int nb)
{
	const __m256i ff = _mm256_set1_epi16(0xFF), one = _mm256_set1_epi16(1);
	for (int b = 0; b < nb; b++) {
		__m256i w0 = _mm256_loadu_si256((const __m256i *)in[b].q), w1 = _mm256_loadu_si256((const __m256i *)(in[b].q + 16));
		__m256i h0 = _mm256_srai_epi16(w0, 8), h1 = _mm256_srai_epi16(w1, 8);
		/* packs works within 128-bit halves: put the quarters back in order */
		_mm256_storeu_si256((__m256i *)out[b].hb, _mm256_permute4x64_epi64(_mm256_packs_epi16(h0, h1), 0xD8));
		__m256i hh = _mm256_add_epi32(_mm256_madd_epi16(h0, one), _mm256_madd_epi16(h1, one));
		__m128i hh4 = _mm_add_epi32(_mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1));
		hh4 = _mm_add_epi32(hh4, _mm_shuffle_epi32(hh4, 0x4E));
		hh4 = _mm_add_epi32(hh4, _mm_shuffle_epi32(hh4, 0xB1));
		out[b].hbs = _mm_cvtsi128_si32(hh4);
		_mm256_storeu_si256((__m256i *)out[b].lb,
		                    _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_and_si256(w0, ff), _mm256_and_si256(w1, ff)), 0xD8));
		/* the halves' sums: w0's pairs in lanes 0-1 and 4-5, w1's in 2-3 and 6-7, then each total in lanes 0 and 2 */
		__m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(w0, one), _mm256_madd_epi16(w1, one));
		__m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
		h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0xB1));
		out[b].hs[0] = _mm_cvtsi128_si32(h4), out[b].hs[1] = _mm_extract_epi32(h4, 2);
	}
}
#endif

static int qd_cpu_level(void)
{
#ifdef QD_X86
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c"))
		return 0;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
		return 2;
	return 1;
#else
	return 0;
#endif
}

static int level = -1;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

int eng_cpu_kernels_cap(int l)
{
	static atomic_int warned;
	const char *e = getenv("EVALD_CPU_KERNELS");
	if (!e || !*e || !strcmp(e, "auto"))
		return l;
	if (!strcmp(e, "plain"))
		return 0;
	if (!strcmp(e, "avx2"))
		return l > 1 ? 1 : l;
	if (!atomic_exchange(&warned, 1))
		ev_log_warn("EVALD_CPU_KERNELS=%s is not one of plain, avx2, auto; the CPU's best kernels are used", e);
	return l;
}

static void level_init(void)
{
	level = eng_cpu_kernels_cap(qd_cpu_level());
}

int eng_qdot_level(void)
{
	pthread_once(&level_once, level_init);
	return level;
}

int eng_qdot_set_level(int l)
{
	int cpu = qd_cpu_level();
	pthread_once(&level_once, level_init);
	level = l < 0 ? 0 : l > cpu ? cpu : l;
	return level;
}

const char *eng_qdot_level_name(int l)
{
	return l == 2 ? "avx512-vnni" : l == 1 ? "avx2" : "plain";
}

void eng_qx_quantize(eng_qxblk *out, const float *x, int n)
{
#ifdef QD_X86
	if (eng_qdot_level() > 0) {
		qx_quantize_avx2(out, x, n);
		return;
	}
#endif
	eng_qx_quantize_ref(out, x, n);
}

void eng_qx_bytes(eng_qxbyt *out, const eng_qxblk *in, int nb)
{
#ifdef QD_X86
	if (eng_qdot_level() > 0) {
		qx_bytes_avx2(out, in, nb);
		return;
	}
#endif
	eng_qx_bytes_ref(out, in, nb);
}

void eng_qdot(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx, const uint8_t *const w[4],
              int nb, int t)
{
	int l = eng_qdot_level();
	if (l == 2 && !xy && !qd_words(t))
		l = 1; /* no bytes: the AVX2 kernel, the same bits */
	switch (l) {
#ifdef QD_X86
	case 2: qdotr_vnni(o, x, xy, nx, w, nb, t); return;
	case 1: /* three activation rows at a time */
		for (int i = 0; i < nx; i += 3)
			qdot_avx2(o + i * 4, x + i, nx - i < 3 ? nx - i : 3, w, nb, t);
		return;
#endif
	default: qdot_plain(o, x, nx, w, nb, t); return;
	}
}

void eng_qdot_rows(float *y, const eng_qxblk *x, const eng_qxbyt *xy, const uint8_t *W, size_t rb, int r0, int q4,
                   int nq, int nb, int t)
{
#ifdef QD_X86
	if ((xy || qd_words(t)) && eng_qdot_level() == 2) {
		rows_vnni(y, x, xy, W, rb, r0, q4, nq, nb, t);
		return;
	}
#endif
	for (int k = 0; k < nq; k++) {
		const uint8_t *w[4];
		float o[4];
		for (int u = 0; u < 4; u++)
			w[u] = W + (size_t)(r0 + k + u * q4) * rb;
		eng_qdot(o, &x, xy ? &xy : NULL, 1, w, nb, t);
		for (int u = 0; u < 4; u++)
			y[r0 + k + u * q4] = o[u];
	}
}

/* ---- quads laid out four rows together (qdot.h) ----------------------------- */

bool eng_qx4_type(int t)
{
	return t >= ENG_Q8_0 && t <= ENG_Q3_K;
}

/* Block b of a Q8_0 quad to (pack) or from row u's block (at 34 bytes): its
 * d at 2 u, its halves of 16 at 8 + 64 (u / 2) + 32 e + 16 (u % 2). */
static inline void q8_quad(uint8_t *quad, uint8_t *row, int u, bool pack)
{
	uint8_t *h = quad + 8 + 64 * (u / 2) + 16 * (u % 2);
	if (pack) {
		memcpy(quad + 2 * u, row, 2);
		memcpy(h, row + 2, 16);
		memcpy(h + 32, row + 18, 16);
	} else {
		memcpy(row, quad + 2 * u, 2);
		memcpy(row + 2, h, 16);
		memcpy(row + 18, h + 32, 16);
	}
}

/* One Q6_K super-block of four rows to (pack) or from a quad's: for each
 * half h and pair of rows p, the pair's 32-byte runs side by side (ql's
 * first 32 of the half, its second 32, qh's 32: at 384 h + 192 p + 64 k +
 * 32 (r % 2)); then the 16 int8 scales transposed (scale i of row r at
 * 768 + 4 i + r) and the four f16 d (at 832 + 2 r). */
static void q6_quad(uint8_t *quad, uint8_t *const row[4], bool pack)
{
	for (int r = 0; r < 4; r++) {
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < 3; k++) {
				uint8_t *q = quad + 384 * h + 192 * (r / 2) + 64 * k + 32 * (r % 2);
				uint8_t *p = row[r] + (k < 2 ? 64 * h + 32 * k : 128 + 32 * h);
				if (pack)
					memcpy(q, p, 32);
				else
					memcpy(p, q, 32);
			}
		for (int i = 0; i < 16; i++)
			if (pack)
				quad[768 + 4 * i + r] = row[r][192 + i];
			else
				row[r][192 + i] = quad[768 + 4 * i + r];
		if (pack)
			memcpy(quad + 832 + 2 * r, row[r] + 208, 2);
		else
			memcpy(row[r] + 208, quad + 832 + 2 * r, 2);
	}
}

/* One IQ4_XS super-block of four rows to (pack) or from a quad's: the
 * rows' 8-byte heads {d, scales_h, scales_l} side by side (8 r), then for
 * each pair of blocks p the four rows' 16 bytes of block 2p (at 32 + 128 p
 * + 16 r), then of block 2p + 1 (64 bytes on). */
static void iq4x_quad(uint8_t *quad, uint8_t *const row[4], bool pack)
{
	for (int r = 0; r < 4; r++) {
		if (pack)
			memcpy(quad + 8 * r, row[r], 8);
		else
			memcpy(row[r], quad + 8 * r, 8);
		for (int j = 0; j < 8; j++) {
			uint8_t *q = quad + 32 + 128 * (j / 2) + 64 * (j % 2) + 16 * r, *p = row[r] + 8 + 16 * j;
			if (pack)
				memcpy(q, p, 16);
			else
				memcpy(p, q, 16);
		}
	}
}

/* One Q2_K super-block of four rows to (pack) or from a quad's: the rows'
 * 16 scale bytes transposed (byte i of row r at 4 i + r), their f16 d (at
 * 64 + 2 r) and dmin (72 + 2 r), then for each half of 128 elements h and
 * pair of rows p the pair's 32 bytes of 2-bit values side by side (at 80
 * + 128 h + 64 p + 32 (r % 2)). */
static void q2_quad(uint8_t *quad, uint8_t *const row[4], bool pack)
{
	for (int r = 0; r < 4; r++) {
		for (int i = 0; i < 16; i++)
			if (pack)
				quad[4 * i + r] = row[r][i];
			else
				row[r][i] = quad[4 * i + r];
		for (int f = 0; f < 2; f++)
			if (pack)
				memcpy(quad + 64 + 8 * f + 2 * r, row[r] + 80 + 2 * f, 2);
			else
				memcpy(row[r] + 80 + 2 * f, quad + 64 + 8 * f + 2 * r, 2);
		for (int h = 0; h < 2; h++) {
			uint8_t *q = quad + 80 + 128 * h + 64 * (r / 2) + 32 * (r % 2), *p = row[r] + 16 + 32 * h;
			if (pack)
				memcpy(q, p, 32);
			else
				memcpy(p, q, 32);
		}
	}
}

/* One Q3_K super-block of four rows to (pack) or from a quad's: for each
 * half of 128 elements h and pair of rows p, the pair's 32 bytes of 2-bit
 * values side by side (at 128 h + 64 p + 32 (r % 2)); each pair's 32
 * bytes of hmask side by side (256 + 64 p + 32 (r % 2)); the 12 bytes of
 * scales as three dwords, transposed (dword k of row r at 384 + 16 k + 4
 * r); the four f16 d (432 + 2 r). */
static void q3_quad(uint8_t *quad, uint8_t *const row[4], bool pack)
{
	for (int r = 0; r < 4; r++) {
		int pair = 64 * (r / 2) + 32 * (r % 2); /* row r's place in its pair's 64 bytes */
		struct {
			int q, w, n; /* at q in the quad, w in the row, n bytes */
		} part[] = {{pair, 32, 32},        {128 + pair, 64, 32}, {256 + pair, 0, 32}, {384 + 4 * r, 96, 4},
		            {400 + 4 * r, 100, 4}, {416 + 4 * r, 104, 4}, {432 + 2 * r, 108, 2}};
		for (size_t k = 0; k < sizeof part / sizeof part[0]; k++)
			if (pack)
				memcpy(quad + part[k].q, row[r] + part[k].w, (size_t)part[k].n);
			else
				memcpy(row[r] + part[k].w, quad + part[k].q, (size_t)part[k].n);
	}
}

/* Q4_K, Q5_K: a super-block's runs of 32 bytes (qh, then qs) as
 * {offset in the row's super-block, runs, offset in the quad's} */
static int k_runs(int t, int run[2][3])
{
	if (t == ENG_Q4_K) {
		run[0][0] = 16, run[0][1] = 4, run[0][2] = 64;
		return 1;
	}
	run[0][0] = 16, run[0][1] = 1, run[0][2] = 64;
	run[1][0] = 48, run[1][1] = 4, run[1][2] = 192;
	return 2;
}

/* One super-block of four rows to (pack) or from a quad's: the heads'
 * four dwords transposed (16 * k + 4 * r), each run of 32 bytes as its
 * halves, row 0's first (128 * c + 64 * half + 16 * r). */
static void k_quad(uint8_t *quad, uint8_t *const row[4], int t, bool pack)
{
	int run[2][3], nr = k_runs(t, run);
	for (int r = 0; r < 4; r++) {
		for (int k = 0; k < 4; k++)
			if (pack)
				memcpy(quad + 16 * k + 4 * r, row[r] + 4 * k, 4);
			else
				memcpy(row[r] + 4 * k, quad + 16 * k + 4 * r, 4);
		for (int i = 0; i < nr; i++)
			for (int c = 0; c < run[i][1]; c++)
				for (int h = 0; h < 2; h++) {
					uint8_t *q = quad + run[i][2] + 128 * c + 64 * h + 16 * r, *p = row[r] + run[i][0] + 32 * c + 16 * h;
					if (pack)
						memcpy(q, p, 16);
					else
						memcpy(p, q, 16);
				}
	}
}

/* A block's fields: the scale at 0, the minimum coefficient at 2 (Q4_1,
 * Q5_1), qh after them (Q5_0, Q5_1), then the 16 bytes of nibbles. */
static void x4_fields(int t, int *nh, int *qh)
{
	*nh = t == ENG_Q4_1 || t == ENG_Q5_1 ? 2 : 1; /* f16 halves before qh */
	*qh = t == ENG_Q5_0 || t == ENG_Q5_1;
}

void eng_qx4_pack(uint8_t *dst, const uint8_t *const src[4], int nb, int t)
{
	if (qd_super(t)) {
		size_t sbz = eng_dtype_bytes((eng_dtype)t, 256); /* a super-block's bytes */
		for (int s = 0; s < nb / 8; s++) {
			uint8_t *row[4];
			for (int r = 0; r < 4; r++)
				row[r] = (uint8_t *)(uintptr_t)(src[r] + (size_t)s * sbz);
			if (t == ENG_IQ4_XS)
				iq4x_quad(dst + (size_t)s * 4 * sbz, row, true);
			else if (t == ENG_Q2_K)
				q2_quad(dst + (size_t)s * 4 * sbz, row, true);
			else if (t == ENG_Q3_K)
				q3_quad(dst + (size_t)s * 4 * sbz, row, true);
			else if (t == ENG_Q6_K)
				q6_quad(dst + (size_t)s * 4 * sbz, row, true);
			else
				k_quad(dst + (size_t)s * 4 * sbz, row, t, true);
		}
		return;
	}
	int bsz = qd_bsz[t], nh, qh;
	if (t == ENG_Q8_0) {
		for (int b = 0; b < nb; b++)
			for (int r = 0; r < 4; r++)
				q8_quad(dst + (size_t)b * 4 * 34, (uint8_t *)(uintptr_t)(src[r] + (size_t)b * 34), r, true);
		return;
	}
	x4_fields(t, &nh, &qh);
	for (int b = 0; b < nb; b++) {
		uint8_t *o = dst + (size_t)b * 4 * (size_t)bsz;
		for (int r = 0; r < 4; r++) {
			const uint8_t *p = src[r] + (size_t)b * (size_t)bsz;
			for (int h = 0; h < nh; h++)
				memcpy(o + 8 * h + 2 * r, p + 2 * h, 2);
			if (qh) { /* the fifth bits of elements 0-15, then of 16-31 */
				memcpy(o + 8 * nh + 2 * r, p + 2 * nh, 2);
				memcpy(o + 8 * nh + 8 + 2 * r, p + 2 * nh + 2, 2);
			}
			memcpy(o + 8 * nh + 16 * qh + 16 * r, p + 2 * nh + 4 * qh, 16);
		}
	}
}

void eng_qx4_pack_rows(uint8_t *dst, const uint8_t *src, int rows, int nb, int t)
{
	size_t rb = eng_dtype_bytes((eng_dtype)t, (size_t)nb * 32);
	for (int q = 0; q < rows / 4; q++) {
		const uint8_t *r0 = src + (size_t)4 * q * rb, *four[4] = {r0, r0 + rb, r0 + 2 * rb, r0 + 3 * rb};
		eng_qx4_pack(dst + (size_t)4 * q * rb, four, nb, t);
	}
}

void eng_qx4_row(uint8_t *dst, const uint8_t *quad, int u, int nb, int t)
{
	if (qd_super(t)) { /* the other rows' parts into a scratch row */
		size_t sbz = eng_dtype_bytes((eng_dtype)t, 256); /* a super-block's bytes */
		uint8_t other[210]; /* the widest super-block (Q6_K) */
		for (int s = 0; s < nb / 8; s++) {
			uint8_t *row[4] = {other, other, other, other};
			row[u] = dst + (size_t)s * sbz;
			uint8_t *q = (uint8_t *)(uintptr_t)(quad + (size_t)s * 4 * sbz);
			if (t == ENG_IQ4_XS)
				iq4x_quad(q, row, false);
			else if (t == ENG_Q2_K)
				q2_quad(q, row, false);
			else if (t == ENG_Q3_K)
				q3_quad(q, row, false);
			else if (t == ENG_Q6_K)
				q6_quad(q, row, false);
			else
				k_quad(q, row, t, false);
		}
		return;
	}
	int bsz = qd_bsz[t], nh, qh;
	if (t == ENG_Q8_0) {
		for (int b = 0; b < nb; b++)
			q8_quad((uint8_t *)(uintptr_t)(quad + (size_t)b * 4 * 34), dst + (size_t)b * 34, u, false);
		return;
	}
	x4_fields(t, &nh, &qh);
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = quad + (size_t)b * 4 * (size_t)bsz;
		uint8_t *o = dst + (size_t)b * (size_t)bsz;
		for (int h = 0; h < nh; h++)
			memcpy(o + 2 * h, p + 8 * h + 2 * u, 2);
		if (qh) {
			memcpy(o + 2 * nh, p + 8 * nh + 2 * u, 2);
			memcpy(o + 2 * nh + 2, p + 8 * nh + 8 + 2 * u, 2);
		}
		memcpy(o + 2 * nh + 4 * qh, p + 8 * nh + 16 * qh + 16 * u, 16);
	}
}

void eng_qdot_rows_x4(float *y, const eng_qxblk *x, const eng_qxbyt *xy, const uint8_t *W, size_t rb, int r0, int nq,
                      int nb, int t, uint8_t *scratch)
{
#ifdef QD_X86
	if ((xy || t == ENG_Q8_0) && eng_qdot_level() == 2) { /* (Q8_0's kernel reads no bytes) */
		rows4_vnni(y, x, xy, W, rb, r0, nq, nb, t);
		return;
	}
#endif
	for (int k = 0; k < nq; k++) { /* the quad's rows as stored, then eng_qdot */
		const uint8_t *w[4];
		for (int u = 0; u < 4; u++) {
			eng_qx4_row(scratch + (size_t)u * rb, W + (size_t)(r0 + 4 * k) * rb, u, nb, t);
			w[u] = scratch + (size_t)u * rb;
		}
		eng_qdot(y + r0 + 4 * k, &x, xy ? &xy : NULL, 1, w, nb, t);
	}
}

bool eng_qdot_x4(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx, const uint8_t *quad, int nb,
                 int t)
{
#ifdef QD_X86
	if ((xy || t == ENG_Q8_0) && eng_qdot_level() == 2) {
		quad4_vnni(o, x, xy, nx, quad, nb, t);
		return true;
	}
#endif
	(void)o, (void)x, (void)nx, (void)quad, (void)nb, (void)t;
	return false;
}

void eng_qdot_group(float *o, const eng_qxblk *const *x, int nx, const eng_qgroup *g, int nb, int t)
{
	switch (eng_qdot_level()) {
#ifdef QD_X86
	case 2: group_vnni(o, x, nx, g, nb, t); return;
	case 1: group_avx2(o, x, nx, g, nb, t); return;
#endif
	default: qdot_group_plain(o, x, nx, g, nb, t); return;
	}
}

bool eng_qgroup_unpack_x4(eng_qgroup *dst, const uint8_t *const quads[4], int nb, int t)
{
#ifdef QD_X86
	if (eng_qx4_type(t) && eng_qdot_level() == 2) {
		group_unpack4_vnni(dst, quads, nb, t);
		return true;
	}
#endif
	(void)dst, (void)quads, (void)nb, (void)t;
	return false;
}

void eng_qgroup_unpack(eng_qgroup *dst, const uint8_t *const w[ENG_QGROUP_ROWS], int nb, int t)
{
	switch (eng_qdot_level()) {
#ifdef QD_X86
	case 2: group_unpack_vnni(dst, w, nb, t); return;
	case 1: group_unpack_avx2(dst, w, nb, t); return;
#endif
	default: group_unpack_plain(dst, w, nb, t); return;
	}
}
