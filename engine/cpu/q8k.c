/*
 * engine/cpu/q8k.c: K-quant and IQ4_XS weights against 8-bit super-block activations
 * (the definition is in q8k.h). The plain functions are the definition
 * element by element; the AVX2 and AVX512-VNNI kernels are compiled with
 * target attributes whatever the build's -march and picked by qdot's
 * level (eng_qdot_level), so EVALD_CPU_KERNELS caps both alike. All levels
 * give the same bits.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/q8k.h"
#include "engine/cpu/qdot.h"
#include "engine/cpu/qsimd.h"
#include "engine/gguf/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QK_X86 1
#endif

int eng_q8k_type(int t)
{
	return t == ENG_Q4_K || t == ENG_Q5_K || t == ENG_Q6_K || t == ENG_IQ4_XS || t == ENG_Q3_K || t == ENG_Q2_K;
}

void eng_q8k_quantize_ref(eng_q8kblk *out, const float *x, int n)
{
	for (int b = 0; b < n / 256; b++) {
		const float *v = x + (size_t)b * 256;
		eng_q8kblk *o = out + b;
		float amax = 0.0f, max = 0.0f;
		int bad = 0;
		for (int e = 0; e < 256; e++) {
			float a = fabsf(v[e]);
			if (!(a <= FLT_MAX))
				bad = 1;
			else if (a > amax)
				amax = a, max = v[e];
		}
		memset(o->q, 0, sizeof o->q);
		memset(o->bsum, 0, sizeof o->bsum);
		float is = amax > 0.0f ? -127.0f / max : 0.0f;
		if (bad || !isfinite(is) || is == 0.0f) { /* NaN or infinity; zero; too small to scale */
			o->d = bad ? NAN : 0.0f;
			continue;
		}
		for (int e = 0; e < 256; e++) {
			float r = nearbyintf(v[e] * is);
			int q = r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
			o->q[e] = (int8_t)q;
			o->bsum[e / 16] = (int16_t)(o->bsum[e / 16] + q);
		}
		o->d = 1.0f / is;
	}
}

/* ---- groups of 16 rows for prefill (q8k.h) ---------------------------------- */

void eng_q8k_group_place(eng_q8kgroup *g, void *mem, int nsb)
{
	char *p = mem;
	g->q = (uint8_t *)p, p += (size_t)nsb * 4096;
	g->sc = (int32_t *)p, p += (size_t)nsb * 256 * 4;
	g->pr = (int32_t *)p, p += (size_t)nsb * 128 * 4;
	g->d = (float *)p, p += (size_t)nsb * 16 * 4;
	g->dmin = (float *)p;
}

static int32_t qk_pair16(int lo, int hi)
{
	return (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
}

/* Row super-block p's block scales (Q4_K/Q5_K: 8 of 32 elements, the
 * rest 0; IQ4_XS: 8 signed ones of 32; Q6_K, Q3_K, Q2_K: 16 of 16), its
 * minima (Q4_K/Q5_K: 8 of 32; Q2_K: 16 of 16; else 0) and its f16 scales
 * as floats: the layouts of engine/gguf/quant.c. */
static void qk_row_scales(const uint8_t *p, int t, int sc[16], int m[16], float *d, float *dmin)
{
	memset(sc, 0, 16 * sizeof *sc);
	memset(m, 0, 16 * sizeof *m);
	if (t == ENG_Q2_K) {
		for (int g = 0; g < 16; g++)
			sc[g] = p[g] & 0xF, m[g] = p[g] >> 4;
		*d = eng_ggml_h2f(p + 80), *dmin = eng_ggml_h2f(p + 82);
		return;
	}
	if (t == ENG_IQ4_XS) {
		for (int j = 0; j < 8; j++)
			sc[j] = eng_ggml_iq4xs_scale(j, p);
		*d = eng_ggml_h2f(p), *dmin = 0.0f;
		return;
	}
	if (t == ENG_Q6_K) {
		for (int g = 0; g < 16; g++)
			sc[g] = (int8_t)p[192 + g];
		*d = eng_ggml_h2f(p + 208), *dmin = 0.0f;
		return;
	}
	if (t == ENG_Q3_K) {
		for (int g = 0; g < 16; g++)
			sc[g] = eng_ggml_q3k_scale(g, p + 96);
		*d = eng_ggml_h2f(p + 108), *dmin = 0.0f;
		return;
	}
	for (int j = 0; j < 8; j++)
		eng_ggml_kscale_min(j, p + 4, &sc[j], &m[j]);
	*d = eng_ggml_h2f(p), *dmin = eng_ggml_h2f(p + 2);
}

/* The same and the super-block's values in element order as unsigned
 * bytes (Q6_K's without the - 32, Q3_K's + 4, IQ4_XS's table values +
 * 128), element by element. */
static void qk_row_values(const uint8_t *p, int t, uint8_t v[256], int sc[16], int m[16], float *d, float *dmin)
{
	qk_row_scales(p, t, sc, m, d, dmin);
	if (t == ENG_Q2_K) {
		for (int e = 0; e < 256; e++)
			v[e] = (uint8_t)eng_ggml_q2k_value(p, e);
		return;
	}
	if (t == ENG_IQ4_XS) {
		for (int j = 0; j < 8; j++)
			for (int e = 0; e < 32; e++)
				v[32 * j + e] = (uint8_t)(eng_ggml_iq4_value(p + 8 + 16 * j, e) + 128);
		return;
	}
	if (t == ENG_Q3_K) {
		for (int e = 0; e < 256; e++)
			v[e] = (uint8_t)(eng_ggml_q3k_value(p, e) + 4);
		return;
	}
	if (t == ENG_Q6_K) {
		for (int j = 0; j < 8; j++) { /* elements 128h + 32k + e */
			int h = j / 4, k = j % 4;
			const uint8_t *ql = p + h * 64 + (k & 1) * 32, *qh = p + 128 + h * 32;
			for (int e = 0; e < 32; e++)
				v[32 * j + e] = (uint8_t)((k >= 2 ? ql[e] >> 4 : ql[e] & 0xF) | (((qh[e] >> (2 * k)) & 3) << 4));
		}
		return;
	}
	int five = t == ENG_Q5_K;
	for (int j = 0; j < 8; j++) {
		const uint8_t *qs = p + (five ? 48 : 16) + (j / 2) * 32;
		for (int e = 0; e < 32; e++) {
			int x = (qs[e] >> (4 * (j % 2))) & 0xF;
			if (five)
				x |= ((p[16 + e] >> j) & 1) << 4;
			v[32 * j + e] = (uint8_t)x;
		}
	}
}

/* Row r of a group's super-block s: its scales and 16-bit pairs (Q6_K,
 * Q3_K: scale pairs; Q2_K: minimum pairs, 8 of 16; IQ4_XS: each block's scale twice, one for each of its
 * sums of 16; Q4_K/Q5_K: minimum pairs, 4 of 8) in q8k.h's layout */
static void qk_group_scales(eng_q8kgroup *g, int s, int r, int t, const int sc[16], const int m[16])
{
	for (int j = 0; j < 16; j++)
		g->sc[((size_t)s * 16 + j) * 16 + r] = sc[j];
	for (int k = 0; k < 8; k++)
		g->pr[((size_t)s * 8 + k) * 16 + r] = t == ENG_Q6_K || t == ENG_Q3_K ? qk_pair16(sc[2 * k], sc[2 * k + 1])
		                                      : t == ENG_Q2_K ? qk_pair16(m[2 * k], m[2 * k + 1])
		                                      : t == ENG_IQ4_XS ? qk_pair16(sc[k], sc[k])
		                                      : k < 4           ? qk_pair16(m[2 * k], m[2 * k + 1])
		                                                        : 0;
}

static size_t qk_bytes(int t)
{
	return eng_dtype_bytes((eng_dtype)t, 256);
}

float eng_q8k_dot_ref(const eng_q8kblk *x, const uint8_t *w, int nsb, int t)
{
	float acc = 0.0f, mins = 0.0f;
	for (int s = 0; s < nsb; s++) {
		const eng_q8kblk *xb = x + s;
		uint8_t v[256];
		int sc[16], m[16], isum = 0, msum = 0;
		float d, dmin;
		qk_row_values(w + (size_t)s * qk_bytes(t), t, v, sc, m, &d, &dmin);
		if (t == ENG_IQ4_XS) {
			for (int j = 0; j < 8; j++) {
				int sub = 0;
				for (int e = 32 * j; e < 32 * j + 32; e++)
					sub += (v[e] - 128) * xb->q[e];
				isum += sc[j] * sub;
			}
			acc = fmaf((float)isum, d * xb->d, acc);
			continue;
		}
		if (t == ENG_Q2_K) {
			for (int g = 0; g < 16; g++) {
				int sub = 0;
				for (int e = 16 * g; e < 16 * g + 16; e++)
					sub += v[e] * xb->q[e];
				isum += sc[g] * sub;
				msum += m[g] * xb->bsum[g];
			}
			acc = fmaf((float)isum, d * xb->d, acc);
			mins = fmaf((float)msum, dmin * xb->d, mins);
			continue;
		}
		if (t == ENG_Q6_K || t == ENG_Q3_K) {
			int off = t == ENG_Q6_K ? 32 : 4;
			for (int g = 0; g < 16; g++) {
				int sub = 0;
				for (int e = 16 * g; e < 16 * g + 16; e++)
					sub += (v[e] - off) * xb->q[e];
				isum += sc[g] * sub;
			}
			acc = fmaf((float)isum, d * xb->d, acc);
			continue;
		}
		for (int j = 0; j < 8; j++) {
			int sub = 0;
			for (int e = 32 * j; e < 32 * j + 32; e++)
				sub += v[e] * xb->q[e];
			isum += sc[j] * sub;
			msum += m[j] * (xb->bsum[2 * j] + xb->bsum[2 * j + 1]);
		}
		acc = fmaf((float)isum, d * xb->d, acc);
		mins = fmaf((float)msum, dmin * xb->d, mins);
	}
	return acc - mins;
}

static void q8k_plain(float *o, const eng_q8kblk *const *x, int nx, const uint8_t *const w[4], int nsb, int t)
{
	for (int i = 0; i < nx; i++)
		for (int r = 0; r < 4; r++)
			o[i * 4 + r] = eng_q8k_dot_ref(x[i], w[r], nsb, t);
}

#ifdef QK_X86
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"))) static void
q8k_group_unpack_vnni(eng_q8kgroup *g, const uint8_t *const w[16], int nsb, int t);
#endif

void eng_q8k_group_unpack(eng_q8kgroup *g, const uint8_t *const w[ENG_Q8K_GROUP_ROWS], int nsb, int t)
{
#ifdef QK_X86
	if (eng_qdot_level() == 2) {
		q8k_group_unpack_vnni(g, w, nsb, t);
		return;
	}
#endif
	for (int r = 0; r < ENG_Q8K_GROUP_ROWS; r++)
		for (int s = 0; s < nsb; s++) {
			uint8_t v[256];
			int sc[16], m[16];
			qk_row_values(w[r] + (size_t)s * qk_bytes(t), t, v, sc, m, &g->d[s * 16 + r], &g->dmin[s * 16 + r]);
			for (int k = 0; k < 64; k++)
				memcpy(g->q + (((size_t)s * 64 + k) * 16 + r) * 4, v + 4 * k, 4);
			qk_group_scales(g, s, r, t, sc, m);
		}
}

#ifdef QK_X86
#define QK_AVX2 "avx2,fma,f16c"
#define QK_VNNI "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"
#define QK_FN(isa) static inline __attribute__((always_inline, target(isa)))

/* The 8 scale bytes (sc) and 8 minimum bytes (mn) of a Q4_K/Q5_K
 * super-block's packed 12 (eng_ggml_kscale_min for all j at once) */
static inline void qk_scales8(const uint8_t *q, uint64_t *sc, uint64_t *mn)
{
	uint32_t u0, u1, u2;
	memcpy(&u0, q, 4), memcpy(&u1, q + 4, 4), memcpy(&u2, q + 8, 4);
	uint32_t s_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;
	uint32_t s_hi = (u2 & 0x0F0F0F0Fu) | ((u0 >> 2) & 0x30303030u);
	uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | ((u1 >> 2) & 0x30303030u);
	*sc = s_lo | (uint64_t)s_hi << 32;
	*mn = m_lo | (uint64_t)m_hi << 32;
}

/* An IQ4_XS super-block's eight signed block scales (eng_ggml_iq4xs_scale)
 * as 32-bit lanes: each lane's nibble of scales_l and two bits of
 * scales_h by per-lane shifts */
QK_FN(QK_AVX2) __m256i qk_iq4xs_scales(const uint8_t *p)
{
	uint32_t l32;
	uint16_t h16;
	memcpy(&l32, p + 4, 4), memcpy(&h16, p + 2, 2);
	__m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)l32), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
	                              _mm256_set1_epi32(0xF));
	__m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(h16), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
	                              _mm256_set1_epi32(3));
	return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

/* A Q3_K super-block's 16 signed scales (eng_ggml_q3k_scale for each) as the
 * int8 lanes of one vector, taken apart in registers: its bytes 94-109
 * (the 12 of scales at 2-13, all within the super-block) moved to the
 * bottom, the low nibbles of dwords {0, 1} and the high ones, each byte
 * with bits 2k, 2k + 1 of dword 2's on top, less 32 */
QK_FN(QK_AVX2) __m128i qk_q3k_scales(const uint8_t *p)
{
	__m128i x = _mm_srli_si128(_mm_loadu_si128((const __m128i *)(p + 94)), 2);
	__m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(x, 0x44), _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0x0F));
	__m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(x, 0xAA), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
	return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

/* the float step of the definition for four rows against activation
 * super-block xb: acc += isum * (d_w * d), mins += msum * (dmin * d) */
QK_FN(QK_AVX2) void qk_step(__m128 *acc, __m128 *mn, __m128i isum, __m128i msum, __m128 dw, __m128 dmin,
                            const eng_q8kblk *xb, int mins)
{
	__m128 xd = _mm_set1_ps(xb->d);
	*acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(dw, xd), *acc);
	if (mins)
		*mn = _mm_fmadd_ps(_mm_cvtepi32_ps(msum), _mm_mul_ps(dmin, xd), *mn);
}

/* The quantizer with vectors: the largest magnitude and any infinity or
 * NaN in one pass, the first element of that magnitude found by compare
 * masks, then x * iscale rounded by cvtps (nearest even, as nearbyintf),
 * capped, and packed to bytes; the sums of 16 from the 32-bit values. */
__attribute__((target(QK_AVX2))) static void q8k_quantize_avx2(eng_q8kblk *out, const float *x, int n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256i expo = _mm256_set1_epi32(0x7F800000), hi = _mm256_set1_epi32(127), lo = _mm256_set1_epi32(-127);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int b = 0; b < n / 256; b++) {
		const float *v = x + (size_t)b * 256;
		eng_q8kblk *o = out + b;
		__m256 mx = _mm256_setzero_ps();
		__m256i bad = _mm256_setzero_si256();
		for (int i = 0; i < 256; i += 8) {
			__m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + i));
			mx = _mm256_max_ps(mx, a);
			bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(a), expo), expo));
		}
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		float amax = _mm_cvtss_f32(h), max = 0.0f;
		int nonfinite = !_mm256_testz_si256(bad, bad);
		if (!nonfinite && amax > 0.0f) {
			__m256 am = _mm256_set1_ps(amax);
			for (int i = 0; i < 256; i += 8) {
				int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v + i)), am, _CMP_EQ_OQ));
				if (m) {
					max = v[i + __builtin_ctz((unsigned)m)];
					break;
				}
			}
		}
		float is = amax > 0.0f ? -127.0f / max : 0.0f;
		if (nonfinite || !isfinite(is) || is == 0.0f) {
			memset(o->q, 0, sizeof o->q);
			memset(o->bsum, 0, sizeof o->bsum);
			o->d = nonfinite ? NAN : 0.0f;
			continue;
		}
		__m256 iv = _mm256_set1_ps(is);
		for (int i = 0; i < 256; i += 32) {
			__m256i q[4];
			for (int k = 0; k < 4; k++)
				q[k] = _mm256_max_epi32(lo, _mm256_min_epi32(hi, _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + i + 8 * k), iv))));
			__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
			_mm256_storeu_si256((__m256i *)(o->q + i), _mm256_permutevar8x32_epi32(p, order));
			/* lanes 0 and 1 after the two hadds and the halves' add: the sums of 16 */
			__m256i s = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
			s = _mm256_hadd_epi32(s, s);
			__m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
			o->bsum[i / 16] = (int16_t)_mm_cvtsi128_si32(t);
			o->bsum[i / 16 + 1] = (int16_t)_mm_extract_epi32(t, 1);
		}
		o->d = 1.0f / is;
	}
}

/* ---- AVX2: a block of 32 to a register ------------------------------------- */

/* Four weight rows against NX (at most 2) activation rows: maddubs forms
 * a block's products two to a 16-bit lane (at most 2 * 63 * 127), madd
 * multiplies them by the block's scale (Q6_K: each half's) into the row's
 * super-block total; Q6_K's offset as in the VNNI kernel below. */
QK_FN(QK_AVX2) void qk_kern_avx2(float *o, const eng_q8kblk *const *x, int NX, const uint8_t *const w[4], int nsb,
                                 int t)
{
	/* (Q3_K takes Q6_K's road: 16 signed scales, values stored + 4 where Q6_K's are + 32; Q2_K
	 * its own: 16 scales and 16 minima) */
	const int three = t == ENG_Q3_K, six = t == ENG_Q6_K || three, two = t == ENG_Q2_K, five = t == ENG_Q5_K,
	          iq = t == ENG_IQ4_XS, mins = !six && !iq;
	const size_t bs = qk_bytes(t);
	const __m256i lo4 = _mm256_set1_epi8(0x0F), lo2 = _mm256_set1_epi8(0x03), one = _mm256_set1_epi8(1);
	const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)eng_ggml_iq4nl_values));
	__m128 acc[2], mn[2];
	for (int a = 0; a < NX; a++)
		acc[a] = mn[a] = _mm_setzero_ps();
	for (int s = 0; s < nsb; s++) {
		__m256i T[4][2], MS[4][2];
		for (int r = 0; r < 4; r++) {
			const uint8_t *p = w[r] + (size_t)s * bs;
#pragma GCC unroll 2
			for (int a = 0; a < NX; a++)
				T[r][a] = MS[r][a] = _mm256_setzero_si256();
			if (iq) { /* the table's signed values w: maddubs on |w| and q with w's sign (at most 2 * 127 * 127) */
#pragma GCC unroll 8
				for (int j = 0; j < 8; j++) {
					__m128i raw = _mm_loadu_si128((const __m128i *)(p + 8 + 16 * j));
					__m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm256_castsi256_si128(lo4)),
					                               _mm_and_si128(raw, _mm256_castsi256_si128(lo4)));
					__m256i wv = _mm256_shuffle_epi8(tab, nib), aw = _mm256_abs_epi8(wv);
					__m256i S = _mm256_set1_epi16((short)eng_ggml_iq4xs_scale(j, p));
#pragma GCC unroll 2
					for (int a = 0; a < NX; a++) {
						__m256i xq = _mm256_loadu_si256((const __m256i *)(x[a][s].q + 32 * j));
						T[r][a] = _mm256_add_epi32(T[r][a], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, wv)), S));
					}
				}
				continue;
			}
			if (two) { /* blocks of 16: scale and minimum the low and high nibbles of byte g */
				__m128i raw = _mm_loadu_si128((const __m128i *)p);
				uint8_t sc[16];
				_mm_storeu_si128((__m128i *)sc, _mm_and_si128(raw, _mm256_castsi256_si128(lo4)));
				__m256i M16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm256_castsi256_si128(lo4)));
#pragma GCC unroll 8
				for (int j = 0; j < 8; j++) { /* block of 32 j: bits 2 (j % 4) of its half's 32 bytes */
					__m256i q2 = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * (j / 4)));
					__m256i wv = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * (j % 4)), lo2);
					__m256i S = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1]), _mm_set1_epi16(sc[2 * j]));
#pragma GCC unroll 2
					for (int a = 0; a < NX; a++) {
						__m256i xq = _mm256_loadu_si256((const __m256i *)(x[a][s].q + 32 * j));
						T[r][a] = _mm256_add_epi32(T[r][a], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xq), S));
					}
				}
#pragma GCC unroll 2
				for (int a = 0; a < NX; a++)
					MS[r][a] = _mm256_madd_epi16(M16, _mm256_loadu_si256((const __m256i *)x[a][s].bsum));
				continue;
			}
			if (six) {
				int8_t q3s[16];
				__m128i sc8 = three ? qk_q3k_scales(p) : _mm_loadu_si128((const __m128i *)(p + 192));
				if (three)
					_mm_storeu_si128((__m128i *)q3s, sc8);
				const int8_t *sc = three ? q3s : (const int8_t *)(p + 192);
				__m256i sc16 = _mm256_cvtepi8_epi16(sc8);
#pragma GCC unroll 8
				for (int j = 0; j < 8; j++) { /* block of 32 j = 4h + k */
					int h = j / 4, k = j % 4;
					__m256i wv;
					if (three) { /* Q2_K's 2-bit fields (at 32) and hmask's bit j as 4 */
						__m256i q2 = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h)), hm = _mm256_loadu_si256((const __m256i *)p);
						wv = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 2 * k), lo2),
						                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, j), one), 2));
					} else {
						__m256i lq = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32 * (k & 1)));
						__m256i hq = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
						wv = _mm256_or_si256(_mm256_and_si256(k >= 2 ? _mm256_srli_epi16(lq, 4) : lq, lo4),
						                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hq, 2 * k), lo2), 4));
					}
					__m256i S = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1]), _mm_set1_epi16(sc[2 * j]));
#pragma GCC unroll 2
					for (int a = 0; a < NX; a++) {
						__m256i xq = _mm256_loadu_si256((const __m256i *)(x[a][s].q + 32 * j));
						T[r][a] = _mm256_add_epi32(T[r][a], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xq), S));
					}
				}
#pragma GCC unroll 2
				for (int a = 0; a < NX; a++) {
					__m256i c = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)x[a][s].bsum));
					T[r][a] = _mm256_sub_epi32(T[r][a], _mm256_slli_epi32(c, three ? 2 : 5));
				}
				continue;
			}
			uint64_t sc, mnb;
			qk_scales8(p + 4, &sc, &mnb);
			__m128i m8 = _mm_cvtsi64_si128((long long)mnb);
			__m256i M = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m_j for bsum 2j and 2j + 1 */
			const uint8_t *qs = p + (five ? 48 : 16);
			__m256i qh = five ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 8
			for (int j = 0; j < 8; j++) {
				__m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * (j / 2)));
				__m256i wv = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(raw, 4) : raw, lo4);
				if (five)
					wv = _mm256_or_si256(wv, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, j), one), 4));
				__m256i S = _mm256_set1_epi16((short)((sc >> (8 * j)) & 0xFF));
#pragma GCC unroll 2
				for (int a = 0; a < NX; a++) {
					__m256i xq = _mm256_loadu_si256((const __m256i *)(x[a][s].q + 32 * j));
					T[r][a] = _mm256_add_epi32(T[r][a], _mm256_madd_epi16(_mm256_maddubs_epi16(wv, xq), S));
				}
			}
#pragma GCC unroll 2
			for (int a = 0; a < NX; a++)
				MS[r][a] = _mm256_madd_epi16(M, _mm256_loadu_si256((const __m256i *)x[a][s].bsum));
		}
		size_t at = (size_t)s * bs;
		__m128 dw = eng_qs_f16x4(w, three ? at + 108 : six ? at + 208 : two ? at + 80 : at);
		__m128 dmin = mins ? eng_qs_f16x4(w, two ? at + 82 : at + 2) : _mm_setzero_ps();
#pragma GCC unroll 2
		for (int a = 0; a < NX; a++) {
			__m128i is = eng_qs_isum4(T[0][a], T[1][a], T[2][a], T[3][a]);
			__m128i ms = mins ? eng_qs_isum4(MS[0][a], MS[1][a], MS[2][a], MS[3][a]) : _mm_setzero_si128();
			qk_step(&acc[a], &mn[a], is, ms, dw, dmin, x[a] + s, mins);
		}
	}
	for (int a = 0; a < NX; a++)
		_mm_storeu_ps(o + a * 4, _mm_sub_ps(acc[a], mn[a]));
}

__attribute__((target(QK_AVX2))) static void q8k_avx2(float *o, const eng_q8kblk *const *x, int nx,
                                                      const uint8_t *const w[4], int nsb, int t)
{
	for (int i = 0; i < nx; i += 2) { /* two activation rows at a time */
		int n = nx - i < 2 ? nx - i : 2;
#define QK_A(T)                                                                                                       \
	case T:                                                                                                       \
		if (n == 1)                                                                                           \
			qk_kern_avx2(o + 4 * i, x + i, 1, w, nsb, T);                                                 \
		else                                                                                                  \
			qk_kern_avx2(o + 4 * i, x + i, 2, w, nsb, T);                                                 \
		break;
		switch (t) {
			QK_A(ENG_Q4_K)
			QK_A(ENG_Q5_K)
			QK_A(ENG_IQ4_XS)
			QK_A(ENG_Q3_K)
			QK_A(ENG_Q2_K)
		default:
			QK_A(ENG_Q6_K)
		}
#undef QK_A
	}
}

/* ---- AVX512-VNNI: a pair of blocks of 32 to a register --------------------- */

/* IQ4_NL's table + 128 (unsigned: the values' top bit flipped) in each
 * 128 bits, for a byte shuffle by nibble */
QK_FN(QK_VNNI) __m512i qk_iq4tabu(void)
{
	return _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)eng_ggml_iq4nl_values),
	                                            _mm_set1_epi8((char)0x80)));
}

/* IQ4_XS blocks 2i and 2i + 1 of the super-block at p as 64 unsigned bytes
 * of values + 128 in element order (block 2i's low nibbles, its high ones,
 * block 2i + 1's), through tabu (qk_iq4tabu) */
QK_FN(QK_VNNI) __m512i qk_iq4xs_pair(const uint8_t *p, int i, __m512i tabu)
{
	__m512i X = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 8 + 32 * i)));
	__m512i R = _mm512_shuffle_i64x2(X, X, 0x50);
	return _mm512_shuffle_epi8(tabu, _mm512_and_si512(_mm512_srlv_epi64(R, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
	                                                  _mm512_set1_epi8(0x0F)));
}

/* four rows' 16-lane sums as one vector of their totals, row r in lane r */
QK_FN(QK_VNNI) __m128i qk_sum4_512(__m512i a, __m512i b, __m512i c, __m512i d)
{
	__m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
	__m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
	__m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
	__m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* The scales of the blocks of 16 of a quarter super-block p (groups 4p ..
 * 4p + 3 of the 16 in scv), each four times: a register of 64 elements'
 * sums of four meets them lane by lane in dpwssd */
QK_FN(QK_VNNI) __m512i qk_scales16(__m512i scv, int p)
{
	return _mm512_permutexvar_epi32(_mm512_setr_epi32(4 * p, 4 * p, 4 * p, 4 * p, 4 * p + 1, 4 * p + 1, 4 * p + 1,
	                                                  4 * p + 1, 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 3,
	                                                  4 * p + 3, 4 * p + 3, 4 * p + 3),
	                                scv);
}

/* Four weight rows against NX activation rows. A register holds two
 * blocks of 32 (Q6_K: four of 16) of one row as unsigned bytes; dpbusd
 * forms their products with the activations four to a lane (at most
 * 4 * 63 * 127, so a lane fits 16 bits) and dpwssd multiplies each lane
 * by its block's scale into the row's super-block total. Q6_K's offset of
 * 32 is taken off at the end as 32 * sum_g sc_g bsum[g]. */
QK_FN(QK_VNNI) void qk_kern_vnni(float *o, const eng_q8kblk *const *x, int NX, const uint8_t *const w[4], int nsb,
                                 int t)
{
	/* (Q3_K takes Q6_K's road: 16 signed scales, values stored + 4 where Q6_K's are + 32; Q2_K
	 * its pairs of blocks of 16 too, with 16 minima) */
	const int three = t == ENG_Q3_K, six = t == ENG_Q6_K || three, two = t == ENG_Q2_K, five = t == ENG_Q5_K,
	          iq = t == ENG_IQ4_XS, mins = !six && !iq;
	const size_t bs = qk_bytes(t);
	const __m512i lo4 = _mm512_set1_epi8(0x0F), lo2 = _mm512_set1_epi8(0x03), low16 = _mm512_set1_epi32(0xFFFF);
	const __m512i tabu = qk_iq4tabu();
	/* Q4_K/Q5_K pair i: the low nibbles in the low 256 bits, the high ones above */
	const __m512i nsh = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
	__m128 acc[ENG_Q8K_X], mn[ENG_Q8K_X];
	#pragma GCC unroll 4
	for (int a = 0; a < NX; a++)
		acc[a] = mn[a] = _mm_setzero_ps();
	for (int s = 0; s < nsb; s++) {
		__m512i T[4][ENG_Q8K_X];
		__m256i M[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			const uint8_t *p = w[r] + (size_t)s * bs;
			#pragma GCC unroll 4
			for (int a = 0; a < NX; a++)
				T[r][a] = _mm512_setzero_si512();
			if (iq) {
				/* a pair of blocks as 64 bytes of values + 128 (block 2i's low nibbles, its high
				 * ones, block 2i + 1's); their sums of four (at most 4 * 241 * 127) times the
				 * block's signed scale by vpmulld; the offset's 128 * sum_j sc_j (bsum 2j +
				 * bsum 2j + 1) comes off after, through M as Q4_K's minima do */
				__m512i scv = _mm512_zextsi256_si512(qk_iq4xs_scales(p));
				__m128i s16 = _mm_packs_epi32(_mm512_castsi512_si128(scv), _mm512_extracti32x4_epi32(scv, 1));
				M[r] = _mm256_set_m128i(_mm_unpackhi_epi16(s16, s16), _mm_unpacklo_epi16(s16, s16));
#pragma GCC unroll 4
				for (int i = 0; i < 4; i++) {
					__m512i wv = qk_iq4xs_pair(p, i, tabu);
					__m512i S = _mm512_permutexvar_epi32(_mm512_setr_epi32(2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i,
						2 * i, 2 * i, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1,
						2 * i + 1), scv);
					#pragma GCC unroll 4
					for (int a = 0; a < NX; a++) {
						__m512i P = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv,
						                                _mm512_loadu_si512((const void *)(x[a][s].q + 64 * i)));
						T[r][a] = _mm512_add_epi32(T[r][a], _mm512_mullo_epi32(P, S));
					}
				}
				continue;
			}
			if (two) {
				/* blocks of 16: the scales (low nibbles, under 16, so a lane's high 16 bits are 0
				 * for dpwssd) and the minima (high nibbles, meeting bsum through M) */
				__m128i raw = _mm_loadu_si128((const __m128i *)p);
				__m512i scv = _mm512_cvtepu8_epi32(_mm_and_si128(raw, _mm_set1_epi8(0x0F)));
				M[r] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					/* blocks 4h, 4h + 1 (A) and 4h + 2, 4h + 3 (B): bits 2k of the half's 32 bytes */
					__m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h)));
					__m512i wA = _mm512_and_si512(_mm512_srlv_epi64(Q, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2)), lo2);
					__m512i wB = _mm512_and_si512(_mm512_srlv_epi64(Q, _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6)), lo2);
					__m512i SA = qk_scales16(scv, 2 * h), SB = qk_scales16(scv, 2 * h + 1);
					#pragma GCC unroll 4
					for (int a = 0; a < NX; a++) {
						const int8_t *xq = x[a][s].q + 128 * h;
						__m512i PA = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wA, _mm512_loadu_si512((const void *)xq));
						__m512i PB = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wB,
						                                 _mm512_loadu_si512((const void *)(xq + 64)));
						T[r][a] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(T[r][a], PA, SA), PB, SB);
					}
				}
				continue;
			}
			if (six) {
				__m128i sc8 = three ? qk_q3k_scales(p) : _mm_loadu_si128((const __m128i *)(p + 192));
				__m512i scv = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), low16);
				__m256i sc16 = _mm256_cvtepi8_epi16(sc8);
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					/* pairs (k 0, 1) and (k 2, 3) of half h: 64 elements each */
					__m512i wA, wB;
					if (three) { /* the half's 2-bit fields k at bits 2k, + 4 where hmask's bit 4h + k is set */
						__m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h)));
						__m512i HM = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
						wA = _mm512_and_si512(_mm512_srlv_epi64(Q, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2)), lo2);
						wB = _mm512_and_si512(_mm512_srlv_epi64(Q, _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6)), lo2);
						__m512i sA = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))), _mm256_set1_epi8((char)(2 << (4 * h))), 1);
						__m512i sB = _mm512_inserti64x4(_mm512_set1_epi8((char)(4 << (4 * h))), _mm256_set1_epi8((char)(8 << (4 * h))), 1);
						wA = _mm512_mask_add_epi8(wA, _mm512_test_epi8_mask(HM, sA), wA, _mm512_set1_epi8(4));
						wB = _mm512_mask_add_epi8(wB, _mm512_test_epi8_mask(HM, sB), wB, _mm512_set1_epi8(4));
					} else {
						__m512i L = _mm512_loadu_si512((const void *)(p + 64 * h));
						__m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
						wA = _mm512_or_si512(_mm512_and_si512(L, lo4),
						                     _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(H,
						                         _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2)), lo2), 4));
						wB = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), lo4),
						                     _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(H,
						                         _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6)), lo2), 4));
					}
					__m512i SA = qk_scales16(scv, 2 * h), SB = qk_scales16(scv, 2 * h + 1);
					#pragma GCC unroll 4
					for (int a = 0; a < NX; a++) {
						const int8_t *xq = x[a][s].q + 128 * h;
						__m512i PA = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wA, _mm512_loadu_si512((const void *)xq));
						__m512i PB = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wB,
						                                 _mm512_loadu_si512((const void *)(xq + 64)));
						T[r][a] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(T[r][a], PA, SA), PB, SB);
					}
				}
				#pragma GCC unroll 4
				for (int a = 0; a < NX; a++) {
					__m256i c = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)x[a][s].bsum));
					T[r][a] = _mm512_sub_epi32(T[r][a], _mm512_zextsi256_si512(_mm256_slli_epi32(c, three ? 2 : 5)));
				}
				continue;
			}
			uint64_t sc, mnb;
			qk_scales8(p + 4, &sc, &mnb);
			__m512i scv = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc));
			__m128i m8 = _mm_cvtsi64_si128((long long)mnb);
			M[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m_j for bsum 2j and 2j + 1 */
			const uint8_t *qs = p + (five ? 48 : 16);
			__m512i qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)))
			                  : _mm512_setzero_si512();
#pragma GCC unroll 4
			for (int i = 0; i < 4; i++) {
				__m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * i)));
				__m512i wv = _mm512_and_si512(_mm512_srlv_epi64(raw, nsh), lo4);
				if (five) { /* bit 2i of qh's bytes for the low block, 2i + 1 for the high */
					__m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * i))),
					                                 _mm256_set1_epi8((char)(1 << (2 * i + 1))), 1);
					wv = _mm512_mask_add_epi8(wv, _mm512_test_epi8_mask(qh, sel), wv, _mm512_set1_epi8(16));
				}
				__m512i S = _mm512_permutexvar_epi32(_mm512_setr_epi32(2 * i, 2 * i, 2 * i, 2 * i, 2 * i, 2 * i,
					2 * i, 2 * i, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1,
					2 * i + 1), scv);
				#pragma GCC unroll 4
				for (int a = 0; a < NX; a++) {
					__m512i P = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv,
					                                _mm512_loadu_si512((const void *)(x[a][s].q + 64 * i)));
					T[r][a] = _mm512_dpwssd_epi32(T[r][a], P, S);
				}
			}
		}
		size_t at = (size_t)s * bs;
		__m128 dw = eng_qs_f16x4(w, three ? at + 108 : six ? at + 208 : two ? at + 80 : at);
		__m128 dmin = mins ? eng_qs_f16x4(w, two ? at + 82 : at + 2) : _mm_setzero_ps();
		#pragma GCC unroll 4
		for (int a = 0; a < NX; a++) {
			__m128i is = qk_sum4_512(T[0][a], T[1][a], T[2][a], T[3][a]), ms = _mm_setzero_si128();
			if (mins || iq) {
				__m256i b16 = _mm256_loadu_si256((const __m256i *)x[a][s].bsum);
				ms = eng_qs_isum4(_mm256_madd_epi16(M[0], b16), _mm256_madd_epi16(M[1], b16),
				                 _mm256_madd_epi16(M[2], b16), _mm256_madd_epi16(M[3], b16));
			}
			if (iq) /* the values' offset: 128 * sum_j sc_j (bsum 2j + bsum 2j + 1) */
				is = _mm_sub_epi32(is, _mm_slli_epi32(ms, 7));
			qk_step(&acc[a], &mn[a], is, ms, dw, dmin, x[a] + s, mins);
		}
	}
	#pragma GCC unroll 4
	for (int a = 0; a < NX; a++)
		_mm_storeu_ps(o + a * 4, _mm_sub_ps(acc[a], mn[a]));
}

__attribute__((target(QK_VNNI))) static void q8k_vnni(float *o, const eng_q8kblk *const *x, int nx,
                                                      const uint8_t *const w[4], int nsb, int t)
{
#define QK_V(T)                                                                                                       \
	case T:                                                                                                       \
		switch (nx) {                                                                                         \
		case 1: qk_kern_vnni(o, x, 1, w, nsb, T); break;                                                      \
		case 2: qk_kern_vnni(o, x, 2, w, nsb, T); break;                                                      \
		case 3: qk_kern_vnni(o, x, 3, w, nsb, T); break;                                                      \
		default: qk_kern_vnni(o, x, 4, w, nsb, T); break;                                                     \
		}                                                                                                     \
		break;
	switch (t) {
		QK_V(ENG_Q4_K)
		QK_V(ENG_Q5_K)
		QK_V(ENG_IQ4_XS)
		QK_V(ENG_Q3_K)
		QK_V(ENG_Q2_K)
	default:
		QK_V(ENG_Q6_K)
	}
#undef QK_V
}

/* A group's 16 rows (one a lane) against NX activation rows: dpbusd takes
 * four of a row's values against four activation bytes broadcast, a
 * block's lanes are its rows' exact block sums, which vpmulld scales into
 * each row's super-block total; the minima (Q6_K: the offset's scales)
 * meet the activations' 16-bit sums in dpwssd. No horizontal sums. */
QK_FN(QK_VNNI) void qk_gkern_vnni(float *o, const eng_q8kblk *const *x, int NX, const eng_q8kgroup *g, int nsb, int t)
{
	const int three = t == ENG_Q3_K, six = t == ENG_Q6_K || three, two = t == ENG_Q2_K, iq = t == ENG_IQ4_XS;
	__m512 acc[ENG_Q8K_GROUP_X], mn[ENG_Q8K_GROUP_X];
#pragma GCC unroll 4
	for (int a = 0; a < NX; a++)
		acc[a] = mn[a] = _mm512_setzero_ps();
	for (int s = 0; s < nsb; s++) {
		const uint8_t *q = g->q + (size_t)s * 4096;
		const int32_t *sc = g->sc + (size_t)s * 256, *pr = g->pr + (size_t)s * 128;
		__m512i T[ENG_Q8K_GROUP_X], M[ENG_Q8K_GROUP_X];
#pragma GCC unroll 4
		for (int a = 0; a < NX; a++)
			T[a] = M[a] = _mm512_setzero_si512();
		/* blocks of 32 (Q6_K: 16) elements: 8 (4) dpbusd steps of four */
		const int nblk = six || two ? 16 : 8, steps = six || two ? 4 : 8;
		for (int j = 0; j < nblk; j++) {
			__m512i P[ENG_Q8K_GROUP_X];
#pragma GCC unroll 4
			for (int a = 0; a < NX; a++)
				P[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
			for (int e = 0; e < steps; e++) {
				int k = j * steps + e;
				__m512i W = _mm512_loadu_si512((const void *)(q + (size_t)k * 64));
#pragma GCC unroll 4
				for (int a = 0; a < NX; a++) {
					int32_t xv;
					memcpy(&xv, x[a][s].q + 4 * k, 4);
					P[a] = _mm512_dpbusd_epi32(P[a], W, _mm512_set1_epi32(xv));
				}
			}
			__m512i S = _mm512_loadu_si512((const void *)(sc + j * 16));
#pragma GCC unroll 4
			for (int a = 0; a < NX; a++)
				T[a] = _mm512_add_epi32(T[a], _mm512_mullo_epi32(P[a], S));
		}
#pragma GCC unroll 4
		for (int a = 0; a < NX; a++) {
			const int16_t *bs = x[a][s].bsum;
			if (six || iq) { /* T -= 32 * sum_g sc_g bsum_g (Q3_K: 4 *; IQ4_XS: 128 *, sc_g its block's) */
				__m512i C = _mm512_setzero_si512();
#pragma GCC unroll 8
				for (int k = 0; k < 8; k++)
					C = _mm512_dpwssd_epi32(C, _mm512_loadu_si512((const void *)(pr + k * 16)),
					                        _mm512_set1_epi32(qk_pair16(bs[2 * k], bs[2 * k + 1])));
				T[a] = _mm512_sub_epi32(T[a], _mm512_slli_epi32(C, three ? 2 : six ? 5 : 7));
			} else if (two) { /* msum = sum_g m_g bsum_g */
#pragma GCC unroll 8
				for (int k = 0; k < 8; k++)
					M[a] = _mm512_dpwssd_epi32(M[a], _mm512_loadu_si512((const void *)(pr + k * 16)),
					                           _mm512_set1_epi32(qk_pair16(bs[2 * k], bs[2 * k + 1])));
			} else { /* msum = sum_j m_j (bsum 2j + bsum 2j + 1) */
#pragma GCC unroll 4
				for (int k = 0; k < 4; k++)
					M[a] = _mm512_dpwssd_epi32(M[a], _mm512_loadu_si512((const void *)(pr + k * 16)),
					                           _mm512_set1_epi32(qk_pair16(bs[4 * k] + bs[4 * k + 1],
					                                                       bs[4 * k + 2] + bs[4 * k + 3])));
			}
		}
		__m512 dw = _mm512_loadu_ps(g->d + (size_t)s * 16), dmin = _mm512_loadu_ps(g->dmin + (size_t)s * 16);
#pragma GCC unroll 4
		for (int a = 0; a < NX; a++) {
			__m512 xd = _mm512_set1_ps(x[a][s].d);
			acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(T[a]), _mm512_mul_ps(dw, xd), acc[a]);
			if (!six && !iq)
				mn[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(M[a]), _mm512_mul_ps(dmin, xd), mn[a]);
		}
	}
#pragma GCC unroll 4
	for (int a = 0; a < NX; a++)
		_mm512_storeu_ps(o + a * 16, _mm512_sub_ps(acc[a], mn[a]));
}

/* v[r] = dword r's column of the 16 x 16 dwords v (a transpose) */
QK_FN(QK_VNNI) void qk_transpose16(__m512i v[16])
{
	__m512i t[16];
#pragma GCC unroll 8
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
	}
#pragma GCC unroll 4
	for (int i = 0; i < 16; i += 4) {
		v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
		v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
		v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
		v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	/* now v[4q + c] holds, in 128-bit lane L, dword c of rows 4q .. 4q + 3 at
	 * columns 4L + c's position: gather the lanes */
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		t[i] = _mm512_shuffle_i32x4(v[i], v[4 + i], 0x44);
		t[4 + i] = _mm512_shuffle_i32x4(v[i], v[4 + i], 0xEE);
		t[8 + i] = _mm512_shuffle_i32x4(v[8 + i], v[12 + i], 0x44);
		t[12 + i] = _mm512_shuffle_i32x4(v[8 + i], v[12 + i], 0xEE);
	}
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		v[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);
		v[4 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xDD);
		v[8 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0x88);
		v[12 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0xDD);
	}
}

/* The group's values with vector loads: a row's 64 values of quarter kb
 * (the decode kernel's pairs) for the 16 rows, transposed to one row a
 * dword lane; the scales as the plain unpacking takes them. */
__attribute__((target(QK_VNNI))) static void q8k_group_unpack_vnni(eng_q8kgroup *g, const uint8_t *const w[16], int nsb,
                                                                   int t)
{
	const int three = t == ENG_Q3_K, two = t == ENG_Q2_K, six = t == ENG_Q6_K, five = t == ENG_Q5_K, iq = t == ENG_IQ4_XS;
	const size_t bs = qk_bytes(t);
	const __m512i lo4 = _mm512_set1_epi8(0x0F), lo2 = _mm512_set1_epi8(0x03);
	const __m512i tabu = qk_iq4tabu();
	for (int s = 0; s < nsb; s++) {
		for (int kb = 0; kb < 4; kb++) {
			__m512i v[16];
			for (int r = 0; r < 16; r++) {
				const uint8_t *p = w[r] + (size_t)s * bs;
				if (iq) { /* blocks 2kb and 2kb + 1: each one's low nibbles, then its high ones, through the table */
					v[r] = qk_iq4xs_pair(p, kb, tabu);
				} else if (two) { /* blocks 2kb and 2kb + 1: the 2-bit fields of half kb / 2 */
					int h = kb / 2, k0 = 2 * (kb % 2);
					__m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h)));
					__m512i sh = _mm512_setr_epi64(2 * k0, 2 * k0, 2 * k0, 2 * k0, 2 * k0 + 2, 2 * k0 + 2, 2 * k0 + 2, 2 * k0 + 2);
					v[r] = _mm512_and_si512(_mm512_srlv_epi64(Q, sh), lo2);
				} else if (three) { /* blocks 2kb and 2kb + 1: 2-bit fields of half kb / 2, + 4 where hmask says */
					int h = kb / 2, k0 = 2 * (kb % 2);
					__m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h)));
					__m512i HM = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
					__m512i sh = _mm512_setr_epi64(2 * k0, 2 * k0, 2 * k0, 2 * k0, 2 * k0 + 2, 2 * k0 + 2, 2 * k0 + 2, 2 * k0 + 2);
					__m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * kb))), _mm256_set1_epi8((char)(1 << (2 * kb + 1))), 1);
					v[r] = _mm512_and_si512(_mm512_srlv_epi64(Q, sh), lo2);
					v[r] = _mm512_mask_add_epi8(v[r], _mm512_test_epi8_mask(HM, sel), v[r], _mm512_set1_epi8(4));
				} else if (six) {
					int h = kb / 2, hi = kb % 2;
					__m512i L = _mm512_loadu_si512((const void *)(p + 64 * h));
					__m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
					__m512i sh = hi ? _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6) : _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
					__m512i lw = _mm512_and_si512(hi ? _mm512_srli_epi16(L, 4) : L, lo4);
					v[r] = _mm512_or_si512(lw, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(H, sh), lo2), 4));
				} else {
					const uint8_t *qs = p + (five ? 48 : 16);
					__m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * kb)));
					v[r] = _mm512_and_si512(_mm512_srlv_epi64(raw, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4)), lo4);
					if (five) {
						__m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
						__m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * kb))),
						                                 _mm256_set1_epi8((char)(1 << (2 * kb + 1))), 1);
						v[r] = _mm512_mask_add_epi8(v[r], _mm512_test_epi8_mask(qh, sel), v[r], _mm512_set1_epi8(16));
					}
				}
			}
			qk_transpose16(v);
			for (int k = 0; k < 16; k++)
				_mm512_storeu_si512((void *)(g->q + ((size_t)s * 64 + kb * 16 + k) * 64), v[k]);
		}
		for (int r = 0; r < 16; r++) { /* qk_row_scales' values (Q4_K/Q5_K's 6-bit ones taken apart at once) */
			const uint8_t *p = w[r] + (size_t)s * bs;
			int sc[16] = {0}, m[16] = {0};
			if (iq || two || three || six) {
				qk_row_scales(p, t, sc, m, &g->d[s * 16 + r], &g->dmin[s * 16 + r]);
			} else {
				uint64_t scb, mnb;
				qk_scales8(p + 4, &scb, &mnb);
				for (int j = 0; j < 8; j++)
					sc[j] = (int)((scb >> (8 * j)) & 0xFF), m[j] = (int)((mnb >> (8 * j)) & 0xFF);
				g->d[s * 16 + r] = eng_qs_h2f(p), g->dmin[s * 16 + r] = eng_qs_h2f(p + 2);
			}
			qk_group_scales(g, s, r, t, sc, m);
		}
	}
}

__attribute__((target(QK_VNNI))) static void q8k_group_vnni(float *o, const eng_q8kblk *const *x, int nx,
                                                            const eng_q8kgroup *g, int nsb, int t)
{
#define QK_G(T)                                                                                                       \
	case T:                                                                                                       \
		switch (nx) {                                                                                         \
		case 1: qk_gkern_vnni(o, x, 1, g, nsb, T); break;                                                     \
		case 2: qk_gkern_vnni(o, x, 2, g, nsb, T); break;                                                     \
		case 3: qk_gkern_vnni(o, x, 3, g, nsb, T); break;                                                     \
		default: qk_gkern_vnni(o, x, 4, g, nsb, T); break;                                                    \
		}                                                                                                     \
		break;
	switch (t) {
		QK_G(ENG_Q4_K)
		QK_G(ENG_Q5_K)
		QK_G(ENG_IQ4_XS)
		QK_G(ENG_Q3_K)
		QK_G(ENG_Q2_K)
	default:
		QK_G(ENG_Q6_K)
	}
#undef QK_G
}
#endif

int eng_q8k_group_level(void)
{
	return eng_qdot_level() == 2;
}

void eng_q8k_group_dot(float *o, const eng_q8kblk *const *x, int nx, const eng_q8kgroup *g, int nsb, int t)
{
#ifdef QK_X86
	if (eng_qdot_level() == 2) {
		q8k_group_vnni(o, x, nx, g, nsb, t);
		return;
	}
#endif
	(void)o, (void)x, (void)nx, (void)g, (void)nsb, (void)t;
	abort(); /* callers ask eng_q8k_group_level first */
}

void eng_q8k_quantize(eng_q8kblk *out, const float *x, int n)
{
#ifdef QK_X86
	if (eng_qdot_level() > 0) {
		q8k_quantize_avx2(out, x, n);
		return;
	}
#endif
	eng_q8k_quantize_ref(out, x, n);
}

void eng_q8k_dot(float *o, const eng_q8kblk *const *x, int nx, const uint8_t *const w[4], int nsb, int t)
{
	switch (eng_qdot_level()) {
#ifdef QK_X86
	case 2: q8k_vnni(o, x, nx, w, nsb, t); return;
	case 1: q8k_avx2(o, x, nx, w, nsb, t); return;
#endif
	default: q8k_plain(o, x, nx, w, nsb, t); return;
	}
}
