/*
 * engine/cpu/qsimd.h: x86 helpers the integer kernels share (both copies
 * of qdot_body.h, and q8k.c). Compiled for AVX2 and inlined into the
 * AVX-512 kernels too (a callee's target may be a subset of its caller's).
 */
#ifndef ENG_CPU_QSIMD_H
#define ENG_CPU_QSIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ENG_QS_FN static inline __attribute__((always_inline, target("avx2,fma,f16c")))

ENG_QS_FN uint64_t eng_qs_u16at(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return h;
}

/* The f16 at p as a float (eng_ggml_h2f's value, in one instruction) */
ENG_QS_FN float eng_qs_h2f(const uint8_t *p)
{
	return _cvtsh_ss((unsigned short)eng_qs_u16at(p));
}

/* The four rows' f16 values at byte offset `at`, as floats, lane r row r:
 * the bits gathered in a general register, converted in one instruction
 * (each the same float as eng_ggml_h2f of it). */
ENG_QS_FN __m128 eng_qs_f16x4(const uint8_t *const w[4], size_t at)
{
	uint64_t v = eng_qs_u16at(w[0] + at) | eng_qs_u16at(w[1] + at) << 16 | eng_qs_u16at(w[2] + at) << 32 |
	             eng_qs_u16at(w[3] + at) << 48;
	return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

/* Four rows' 8-lane integer sums (a, b, c, d) as one 4-lane vector of
 * their totals, row r in lane r. */
ENG_QS_FN __m128i eng_qs_isum4(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
	return _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
#endif

#endif
