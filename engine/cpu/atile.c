/*
 * engine/cpu/atile.c: the AVX-512 kernels of atile.h. Registers: scores
 * keep three pairs of heads against eight keys (24 accumulators), values
 * six heads against 64 of a row's values (24 accumulators), so each key or
 * value load feeds several heads' FMAs where the one-head kernels feed one.
 */
#include "engine/cpu/atile.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define AT_ISA "avx2,fma,avx512f,avx512dq"
#define AT_FN static inline __attribute__((always_inline, target(AT_ISA)))

/* (libgcc fills in the CPU's features before main; each ask reads them,
 * so the workers calling this share no state of ours) */
bool eng_atile_ok(int hd)
{
	return hd > 0 && hd % 16 == 0 && hd <= ATILE_MAXHD && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* keys' elements off .. off + 8 in both halves, as f32 (16-bit widened exactly) */
AT_FN __m512 key8x2(const void *K, size_t off, int kind)
{
	if (kind == ATILE_F32)
		return _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)K + off));
	__m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)K + off)));
	if (kind == ATILE_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* values' elements off .. off + 16 as f32 */
AT_FN __m512 val16(const void *V, size_t off, int kind)
{
	if (kind == ATILE_F32)
		return _mm512_loadu_ps((const float *)V + off);
	__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)V + off));
	if (kind == ATILE_F16)
		return _mm512_cvtph_ps(h);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* _mm256_hadd_ps in each 256-bit half: per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3] */
AT_FN __m512 hadd2x(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* Scores of head pairs p0 .. p0 + np against keys t .. t + 8: accumulator
 * a[p][k] holds pair p's first head against key k in its low half and the
 * second head in its high half. The totals follow hsum8x8: pair sums,
 * quad sums, then each quad's two halves. */
AT_FN void score_block(float *const *out, int nq, int p0, int np, const float *pack, int nch, const void *K,
		       int kind, size_t stride, int t, float scale)
{
	__m512 a[3][8];
#pragma GCC unroll 3
	for (int p = 0; p < np; p++)
#pragma GCC unroll 8
		for (int k = 0; k < 8; k++)
			a[p][k] = _mm512_setzero_ps();
	for (int i = 0; i < nch; i++) {
		__m512 qv[3];
#pragma GCC unroll 3
		for (int p = 0; p < np; p++)
			qv[p] = _mm512_loadu_ps(pack + ((size_t)(p0 + p) * nch + i) * 16);
#pragma GCC unroll 8
		for (int k = 0; k < 8; k++) {
			__m512 kv = key8x2(K, (size_t)(t + k) * stride + (size_t)i * 8, kind);
#pragma GCC unroll 3
			for (int p = 0; p < np; p++)
				a[p][k] = _mm512_fmadd_ps(kv, qv[p], a[p][k]);
		}
	}
	__m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 3
	for (int p = 0; p < np; p++) {
		__m512 h01 = hadd2x(a[p][0], a[p][1]), h23 = hadd2x(a[p][2], a[p][3]);
		__m512 h45 = hadd2x(a[p][4], a[p][5]), h67 = hadd2x(a[p][6], a[p][7]);
		__m512 q03 = hadd2x(h01, h23), q47 = hadd2x(h45, h67);
		/* 128-bit lanes of q03: [first keys 0-3 lanes 0-3, ... lanes 4-7, second ..., ...] */
		__m512 lo = _mm512_shuffle_f32x4(q03, q47, _MM_SHUFFLE(2, 0, 2, 0));
		__m512 hi = _mm512_shuffle_f32x4(q03, q47, _MM_SHUFFLE(3, 1, 3, 1));
		__m512 r = _mm512_mul_ps(_mm512_add_ps(lo, hi), sv); /* [first 0-3, second 0-3, first 4-7, second 4-7] */
		r = _mm512_shuffle_f32x4(r, r, _MM_SHUFFLE(3, 1, 2, 0));
		int h = 2 * (p0 + p);
		_mm256_storeu_ps(out[h] + t, _mm512_castps512_ps256(r));
		if (h + 1 < nq)
			_mm256_storeu_ps(out[h + 1] + t, _mm512_extractf32x8_ps(r, 1));
	}
}

/* every pair of heads against keys t .. t + 8 */
AT_FN void score_keys(float *const *out, int nq, const float *pack, int nch, const void *K, int kind, size_t stride,
		      int t, float scale)
{
	int npair = (nq + 1) / 2, p0 = 0;
	for (; p0 + 3 <= npair; p0 += 3)
		score_block(out, nq, p0, 3, pack, nch, K, kind, stride, t, scale);
	if (npair - p0 == 2)
		score_block(out, nq, p0, 2, pack, nch, K, kind, stride, t, scale);
	else if (npair - p0 == 1)
		score_block(out, nq, p0, 1, pack, nch, K, kind, stride, t, scale);
}

/* Asks for rows t .. t + 8 of the next block's keys and values (rb bytes
 * a row, at a stride of sb bytes) into L2 */
AT_FN void ask8(const char *pk, const char *pv, size_t sb, size_t rb, int t)
{
	for (int k = 0; k < 8; k++)
		for (size_t c = 0; c < rb; c += 64) {
			__builtin_prefetch(pk + (size_t)(t + k) * sb + c, 0, 2);
			__builtin_prefetch(pv + (size_t)(t + k) * sb + c, 0, 2);
		}
}

/* the whole keys of a block, eight at a time, with the next block's rows
 * asked for eight at a time between them (pk, pv non-NULL); one copy for
 * each kind of key */
#define AT_SCORES(kind)                                                                                                \
	__attribute__((target(AT_ISA), noinline)) static void scores_##kind(                                          \
		float *const *out, int nq, const float *pack, int nch, const void *K, size_t stride, int cnt,         \
		float scale, const char *pk, const char *pv)                                                           \
	{                                                                                                              \
		size_t es = kind == ATILE_F32 ? 4 : 2;                                                                 \
		for (int t = 0; t + 8 <= cnt; t += 8) {                                                                \
			score_keys(out, nq, pack, nch, K, kind, stride, t, scale);                                     \
			if (pk)                                                                                        \
				ask8(pk, pv, stride * es, (size_t)nch * 8 * es, t);                                    \
		}                                                                                                      \
	}
AT_SCORES(ATILE_F32)
AT_SCORES(ATILE_BF16)
AT_SCORES(ATILE_F16)

__attribute__((target(AT_ISA))) void eng_atile_scores(float *const *out, const float *const *q, int nq, const void *K,
						       int kind, size_t stride, int cnt, int hd, float scale, float *pack,
						       const void *nextK, const void *nextV)
{
	int nch = hd / 8;
	/* pack: pair p's chunk i is 16 floats, the first head's 8 then the second's (zeros past nq) */
	for (int h = 0; h < nq + (nq & 1); h++)
		for (int i = 0; i < nch; i++)
			if (h < nq)
				memcpy(pack + (((size_t)(h / 2) * nch + i) * 16 + (size_t)(h & 1) * 8), q[h] + (size_t)i * 8,
				       8 * sizeof(float));
			else
				memset(pack + (((size_t)(h / 2) * nch + i) * 16 + 8), 0, 8 * sizeof(float));
	const char *pk = nextK && nextV ? nextK : NULL, *pv = nextV;
	if (kind == ATILE_F16)
		scores_ATILE_F16(out, nq, pack, nch, K, stride, cnt, scale, pk, pv);
	else if (kind == ATILE_BF16)
		scores_ATILE_BF16(out, nq, pack, nch, K, stride, cnt, scale, pk, pv);
	else
		scores_ATILE_F32(out, nq, pack, nch, K, stride, cnt, scale, pk, pv);
	int t = cnt / 8 * 8;
	if (t < cnt) { /* the last keys as f32, padded with zero keys to eight, their scores dropped */
		float kpad[8 * ATILE_MAXHD], tmp[ATILE_MAXQ * 8];
		float *tout[ATILE_MAXQ];
		int r = cnt - t;
		memset(kpad, 0, (size_t)8 * hd * sizeof(float));
		for (int k = 0; k < r; k++)
			for (int i = 0; i < hd; i += 16)
				_mm512_storeu_ps(kpad + (size_t)k * hd + i, val16(K, (size_t)(t + k) * stride + (size_t)i, kind));
		for (int h = 0; h < nq; h++)
			tout[h] = tmp + (size_t)h * 8;
		score_keys(tout, nq, pack, nch, kpad, ATILE_F32, (size_t)hd, 0, scale);
		for (int h = 0; h < nq; h++)
			memcpy(out[h] + t, tout[h], (size_t)r * sizeof(float));
	}
}

/* heads q0 .. q0 + nh (up to 6) over values d .. d + 16 nv (nv up to 4) */
AT_FN void value_block(float *const *acc, const float *c, const float *const *p, int q0, int nh, const void *V,
		       int kind, size_t stride, int cnt, int d, int nv)
{
	__m512 a[6][4];
#pragma GCC unroll 6
	for (int j = 0; j < nh; j++) {
		__m512 cv = _mm512_set1_ps(c[q0 + j]);
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			a[j][v] = _mm512_mul_ps(cv, _mm512_loadu_ps(acc[q0 + j] + d + 16 * v));
	}
	for (int t = 0; t < cnt; t++) {
		__m512 vv[4];
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			vv[v] = val16(V, (size_t)t * stride + (size_t)d + 16 * (size_t)v, kind);
#pragma GCC unroll 6
		for (int j = 0; j < nh; j++) {
			__m512 pb = _mm512_set1_ps(p[q0 + j][t]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				a[j][v] = _mm512_fmadd_ps(pb, vv[v], a[j][v]);
		}
	}
#pragma GCC unroll 6
	for (int j = 0; j < nh; j++)
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			_mm512_storeu_ps(acc[q0 + j] + d + 16 * v, a[j][v]);
}

/* every head over values d .. d + 16 nv, six heads a pass, a copy for
 * each kind of value and nv */
#define AT_VALUES(kind, nv)                                                                                            \
	__attribute__((target(AT_ISA), noinline)) static void values_##kind##_##nv(                                   \
		float *const *acc, const float *c, const float *const *p, int nq, const void *V, size_t stride,       \
		int cnt, int d)                                                                                        \
	{                                                                                                              \
		int q0 = 0;                                                                                            \
		for (; q0 + 6 <= nq; q0 += 6)                                                                          \
			value_block(acc, c, p, q0, 6, V, kind, stride, cnt, d, nv);                                    \
		switch (nq - q0) {                                                                                     \
		case 5: value_block(acc, c, p, q0, 5, V, kind, stride, cnt, d, nv); break;                             \
		case 4: value_block(acc, c, p, q0, 4, V, kind, stride, cnt, d, nv); break;                             \
		case 3: value_block(acc, c, p, q0, 3, V, kind, stride, cnt, d, nv); break;                             \
		case 2: value_block(acc, c, p, q0, 2, V, kind, stride, cnt, d, nv); break;                             \
		case 1: value_block(acc, c, p, q0, 1, V, kind, stride, cnt, d, nv); break;                             \
		default: break;                                                                                        \
		}                                                                                                      \
	}
AT_VALUES(ATILE_F32, 4)
AT_VALUES(ATILE_F32, 1)
AT_VALUES(ATILE_BF16, 4)
AT_VALUES(ATILE_BF16, 1)
AT_VALUES(ATILE_F16, 4)
AT_VALUES(ATILE_F16, 1)

void eng_atile_values(float *const *acc, const float *c, const float *const *p, int nq, const void *V, int kind,
		      size_t stride, int cnt, int hd)
{
	void (*v4)(float *const *, const float *, const float *const *, int, const void *, size_t, int, int) =
		kind == ATILE_F16 ? values_ATILE_F16_4 : kind == ATILE_BF16 ? values_ATILE_BF16_4 : values_ATILE_F32_4;
	void (*v1)(float *const *, const float *, const float *const *, int, const void *, size_t, int, int) =
		kind == ATILE_F16 ? values_ATILE_F16_1 : kind == ATILE_BF16 ? values_ATILE_BF16_1 : values_ATILE_F32_1;
	int d = 0;
	for (; d + 64 <= hd; d += 64)
		v4(acc, c, p, nq, V, stride, cnt, d);
	for (; d < hd; d += 16)
		v1(acc, c, p, nq, V, stride, cnt, d);
}
