/*
 * engine/cpu/bfdot.c: BF16 weights against BF16-rounded activations (the
 * definition is in bfdot.h): the definition element by element, an AVX2
 * kernel that widens and does the fmas, and an AVX512-BF16 kernel on
 * vdpbf16ps, compiled with target attributes whatever the build's -march
 * and chosen at run time. All three give the same bits.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/bfdot.h"
#include "engine/cpu/qdot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF_X86 1
#endif

/* to nearest, ties to even, on the bits (NaN payloads are not kept) */
static inline uint16_t bf_round1(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void eng_bf_round_ref(uint16_t *out, const float *x, int n)
{
	int np = (n + 31) / 32 * 32;
	for (int i = 0; i < np; i++)
		out[i] = i < n ? bf_round1(x[i]) : 0;
}

float eng_bfdot_ref(const uint16_t *x, const uint16_t *w, int n)
{
	float lane[16] = {0};
	for (int c = 0; c < n; c += 32)
		for (int l = 0; l < 16; l++) {
			int e = c + 2 * l;
			float wo = e + 1 < n ? eng_bf16_to_f32(w[e + 1]) : 0.0f, we = e < n ? eng_bf16_to_f32(w[e]) : 0.0f;
			lane[l] = fmaf(eng_bf16_to_f32(x[e + 1]), wo, lane[l]);
			lane[l] = fmaf(eng_bf16_to_f32(x[e]), we, lane[l]);
		}
	float f[8];
	for (int k = 0; k < 8; k++)
		f[k] = lane[k] + lane[k + 8];
	return ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
}

static void bfdot_plain(float *o, const uint16_t *const *x, int nx, const uint16_t *const w[4], int n)
{
	for (int i = 0; i < nx; i++)
		for (int r = 0; r < 4; r++)
			o[i * 4 + r] = eng_bfdot_ref(x[i], w[r], n);
}

#ifdef BF_X86
#define BF_AVX2 __attribute__((target("avx2,fma")))
#define BF_512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

BF_AVX2 static inline float bf_hsum8(__m256 a)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, a), _mm256_hadd_ps(a, a));
	return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

BF_AVX2 static void bf_round_avx2(uint16_t *out, const float *x, int n)
{
	int i = 0;
	const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1);
	for (; i + 16 <= n; i += 16) {
		__m256i a = _mm256_castps_si256(_mm256_loadu_ps(x + i)), b = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8));
		a = _mm256_srli_epi32(_mm256_add_epi32(a, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(a, 16), one))), 16);
		b = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(b, 16), one))), 16);
		/* packus works within 128-bit halves: put the quarters back in order */
		_mm256_storeu_si256((__m256i *)(out + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8));
	}
	int np = (n + 31) / 32 * 32;
	for (; i < np; i++)
		out[i] = i < n ? bf_round1(x[i]) : 0;
}

/* 16 BF16 values as the f32 of their odd (high half of each 32-bit lane)
 * and even (low half) elements */
BF_AVX2 static inline void bf_split(const uint16_t *p, __m256 *odd, __m256 *even)
{
	__m256i v = _mm256_loadu_si256((const __m256i *)p);
	*odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
	*even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

BF_AVX2 static inline __attribute__((always_inline)) void bf_kern_avx2(float *o, const uint16_t *const *x, int nx,
                                                                     const uint16_t *const w[4], int n)
{
	__m256 acc[3][4][2];
	for (int i = 0; i < 3; i++)
		for (int r = 0; r < 4; r++)
			acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
	uint16_t tail[4][32];
	for (int c = 0; c < n; c += 32) {
		const uint16_t *wr[4];
		for (int r = 0; r < 4; r++) {
			wr[r] = w[r] + c;
			if (n - c < 32) { /* the row's last partial chunk, padded with zeros */
				memset(tail[r], 0, sizeof tail[r]);
				memcpy(tail[r], w[r] + c, (size_t)(n - c) * 2);
				wr[r] = tail[r];
			}
		}
		for (int h = 0; h < 2; h++) {
			__m256 wo[4], we[4];
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				bf_split(wr[r] + 16 * h, &wo[r], &we[r]);
#pragma GCC unroll 3
			for (int i = 0; i < nx; i++) {
				__m256 xo, xe;
				bf_split(x[i] + c + 16 * h, &xo, &xe);
#pragma GCC unroll 4
				for (int r = 0; r < 4; r++)
					acc[i][r][h] = _mm256_fmadd_ps(xe, we[r], _mm256_fmadd_ps(xo, wo[r], acc[i][r][h]));
			}
		}
	}
	for (int i = 0; i < nx; i++)
		for (int r = 0; r < 4; r++)
			o[i * 4 + r] = bf_hsum8(_mm256_add_ps(acc[i][r][0], acc[i][r][1]));
}

BF_AVX2 static void bfdot_avx2(float *o, const uint16_t *const *x, int nx, const uint16_t *const w[4], int n)
{
	if (nx == 1)
		bf_kern_avx2(o, x, 1, w, n);
	else if (nx == 2)
		bf_kern_avx2(o, x, 2, w, n);
	else
		bf_kern_avx2(o, x, 3, w, n);
}

/* _mm256_hadd_ps in each 256-bit half of a and b: per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3] */
BF_512 static inline __m512 bf_hadd2x(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* The totals of eight accumulators (the definition's, bfdot.h: f = lanes
 * 0-7 + lanes 8-15, then hsum8's pairs, quads and halves), formed for all
 * eight at once: two outputs a register, then four a register, as
 * [a c e g | b d f h] put back in order; the first n of them stored.
 * (Each had taken its own extract, add and two hadds: a tenth of a
 * prefill tile's time at 1024 columns.) */
BF_512 static inline __attribute__((always_inline)) void bf_finish8(float *o, __m512 a, __m512 b, __m512 c, __m512 d,
                                                                   __m512 e, __m512 f, __m512 g, __m512 h, int n)
{
	/* [fa | fb]: a's lanes 0-7 + 8-15, then b's */
	__m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
	__m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
	__m512 ef = _mm512_add_ps(_mm512_shuffle_f32x4(e, f, 0x44), _mm512_shuffle_f32x4(e, f, 0xEE));
	__m512 gh = _mm512_add_ps(_mm512_shuffle_f32x4(g, h, 0x44), _mm512_shuffle_f32x4(g, h, 0xEE));
	/* 128-bit lane j: [x's pair sums | y's] of the quarter j of [fa | fb] (x = a or b ...) */
	__m512 q = bf_hadd2x(bf_hadd2x(ab, cd), bf_hadd2x(ef, gh));
	/* lanes 0 and 1: a, c, e, g's first and last four; 2 and 3: b, d, f, h's */
	__m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(q, q, 0x88), _mm512_shuffle_f32x4(q, q, 0xDD));
	__m256 r = _mm256_permutevar8x32_ps(_mm512_castps512_ps256(t), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	if (n == 8)
		_mm256_storeu_ps(o, r);
	else
		_mm_storeu_ps(o, _mm256_castps256_ps128(r));
}

BF_512 static inline __attribute__((always_inline)) void bf_kern_512(float *o, const uint16_t *const *x, int nx,
                                                                    const uint16_t *const w[4], int n)
{
	__m512 acc[6][4];
#pragma GCC unroll 6
	for (int i = 0; i < 6; i++)
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			acc[i][r] = _mm512_setzero_ps();
	for (int c = 0; c < n; c += 32) {
		/* plain loads while whole chunks last; the last partial chunk read
		 * under a mask: zeros past the row */
		__m512i wv[4];
		if (n - c >= 32) {
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				wv[r] = _mm512_loadu_si512((const void *)(w[r] + c));
		} else {
			__mmask32 mk = (__mmask32)((1u << (n - c)) - 1u);
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				wv[r] = _mm512_maskz_loadu_epi16(mk, w[r] + c);
		}
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			__m512i xv = _mm512_loadu_si512((const void *)(x[i] + c));
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				acc[i][r] = _mm512_dpbf16_ps(acc[i][r], (__m512bh)xv, (__m512bh)wv[r]);
		}
	}
	/* the outputs eight at a time: two activation rows' four */
#pragma GCC unroll 3
	for (int i = 0; i < nx; i += 2) {
		const __m512 z = _mm512_setzero_ps();
		bf_finish8(o + i * 4, acc[i][0], acc[i][1], acc[i][2], acc[i][3], i + 1 < nx ? acc[i + 1][0] : z,
		           i + 1 < nx ? acc[i + 1][1] : z, i + 1 < nx ? acc[i + 1][2] : z, i + 1 < nx ? acc[i + 1][3] : z,
		           i + 1 < nx ? 8 : 4);
	}
}

BF_512 static void bfdot_512(float *o, const uint16_t *const *x, int nx, const uint16_t *const w[4], int n)
{
	switch (nx) {
	case 1: bf_kern_512(o, x, 1, w, n); break;
	case 2: bf_kern_512(o, x, 2, w, n); break;
	case 3: bf_kern_512(o, x, 3, w, n); break;
	case 4: bf_kern_512(o, x, 4, w, n); break;
	case 5: bf_kern_512(o, x, 5, w, n); break;
	default: bf_kern_512(o, x, 6, w, n); break;
	}
}
#endif

static int bf_cpu_level(void)
{
#ifdef BF_X86
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		return 0;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512bf16"))
		return 2;
	return 1;
#else
	return 0;
#endif
}

static int level = -1;
static pthread_once_t level_once = PTHREAD_ONCE_INIT;

static void level_init(void)
{
	level = eng_cpu_kernels_cap(bf_cpu_level());
}

int eng_bfdot_level(void)
{
	pthread_once(&level_once, level_init);
	return level;
}

int eng_bfdot_set_level(int l)
{
	int cpu = bf_cpu_level();
	pthread_once(&level_once, level_init);
	level = l < 0 ? 0 : l > cpu ? cpu : l;
	return level;
}

void eng_bf_round(uint16_t *out, const float *x, int n)
{
#ifdef BF_X86
	if (eng_bfdot_level() > 0) {
		bf_round_avx2(out, x, n);
		return;
	}
#endif
	eng_bf_round_ref(out, x, n);
}

void eng_bfdot(float *o, const uint16_t *const *x, int nx, const uint16_t *const w[4], int n)
{
	switch (eng_bfdot_level()) {
#ifdef BF_X86
	case 2: bfdot_512(o, x, nx, w, n); return;
	case 1:
		for (int i = 0; i < nx; i += 3)
			bfdot_avx2(o + 4 * i, x + i, nx - i < 3 ? nx - i : 3, w, n);
		return;
#endif
	default: bfdot_plain(o, x, nx, w, n); return;
	}
}
