/*
 * engine/cpu/q8k.h: K-quant and IQ4_XS weight rows (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS) against
 * activations quantized to 8 bits a super-block of 256, in integers a
 * super-block at a time: the arithmetic llama.cpp uses for these types,
 * offered as an option (`--activation-bits 8`, eng_model_options) beside
 * evald's 16-bit default (qdot.h). It buys speed (64 products an
 * instruction, no widening of the weights, one float step a super-block
 * instead of one a block of 32) at the price of the activations'
 * precision: a step of 1/254 of a super-block's largest value instead
 * of 1/65534 of a block's.
 *
 * An activation super-block of 256 (eng_q8kblk): max = the first element
 * of the largest magnitude (signed); when it is 0 every q is 0 and d = 0;
 * otherwise iscale = -127 / max (float), q[e] = x[e] * iscale rounded to
 * nearest even, capped at 127, d = 1 / iscale (float; so d * q ~ x), and
 * bsum[k] = the sum of q over elements 16k .. 16k + 15. (These are
 * llama.cpp's Q8_K values, so both engines round the same activations
 * alike.) A super-block holding an infinity or a NaN gets d = NaN and
 * q = 0: its outputs are NaN, as the f32 path's would be; one whose
 * largest magnitude is too small for -127 / max to be finite (below about
 * 3.7e-37) counts as zero.
 *
 * A weight super-block's elements in order (engine/gguf/quant.c's
 * layouts): Q4_K/Q5_K 8 blocks of 32, block j with an unsigned value
 * q_w (4 or 5 bits), a 6-bit scale sc_j and a 6-bit minimum m_j, the
 * super-block's d_w and dmin (f16); Q6_K 16 blocks of 16, block g with a
 * 6-bit value q_w - 32 and an int8 scale sc_g, and d_w; Q3_K the same
 * with a 3-bit value q_w - 4 (kept as q_w, 0 .. 7) and a signed 6-bit
 * scale; Q2_K 16 blocks of 16, block g with a 2-bit value q_w, a 4-bit
 * scale sc_g and a 4-bit minimum m_g, and d_w, dmin; IQ4_XS 8 blocks
 * of 32, block j with IQ4_NL's table values v (-127 .. 113; kept as v +
 * 128, unsigned, in a group), a signed 6-bit scale sc_j = ls_j - 32, and
 * d_w. With exact integers
 *   Q4_K, Q5_K:  isum = sum_j sc_j * sum_{e in j} q_w[e] q[e]
 *                msum = sum_j m_j * (bsum[2j] + bsum[2j + 1])
 *   Q6_K:        isum = sum_g sc_g * sum_{e in g} (q_w[e] - 32) q[e]
 *   Q3_K:        isum = sum_g sc_g * sum_{e in g} (q_w[e] - 4) q[e]
 *   Q2_K:        isum = sum_g sc_g * sum_{e in g} q_w[e] q[e]
 *                msum = sum_g m_g * bsum[g]
 *   IQ4_XS:      isum = sum_j sc_j * sum_{e in j} v[e] q[e]
 * (all within 2^31), an output is, over the row's super-blocks in order,
 *   acc  = fma((float)isum, d_w * d, acc)
 *   mins = fma((float)msum, dmin * d, mins)      (Q4_K, Q5_K, Q2_K)
 * and then acc - mins. The integer sums are one number however a kernel
 * forms them, so the vector kernels (AVX2's maddubs, AVX512-VNNI's
 * dpbusd) give the plain definition's bits (eng_q8k_dot_ref), and an
 * output's bits do not depend on the other rows of its call.
 */
#ifndef ENG_CPU_Q8K_H
#define ENG_CPU_Q8K_H

#include <stdint.h>

typedef struct {
	int8_t q[256];
	int16_t bsum[16];
	float d;
} eng_q8kblk;

/* Quantizes x[0..n) (n a multiple of 256) into n/256 super-blocks: with
 * vectors where the CPU has AVX2 (qdot's level), the definition's bytes. */
void eng_q8k_quantize(eng_q8kblk *out, const float *x, int n);
/* The same by the definition, one element at a time (the oracle). */
void eng_q8k_quantize_ref(eng_q8kblk *out, const float *x, int n);

/* Whether eng_dtype t has a kernel here (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS). */
int eng_q8k_type(int t);

/* o[i*4 + r] = weight row w[r] . activation row x[i], i < nx (at most
 * ENG_Q8K_X), r < 4, over nsb super-blocks; t a type eng_q8k_type takes. */
#define ENG_Q8K_X 4
void eng_q8k_dot(float *o, const eng_q8kblk *const *x, int nx, const uint8_t *const w[4], int nsb, int t);
/* One output by the definition, element by element (the oracle). */
float eng_q8k_dot_ref(const eng_q8kblk *x, const uint8_t *w, int nsb, int t);

/* Prefill (AVX512-VNNI only; eng_q8k_group_level says): 16 weight rows
 * unpacked once, one row a 32-bit lane, for many activation rows. For
 * super-block s: q[((s * 64 + k) * 16 + r) * 4 + i] = row r's unsigned
 * value of element 4k + i (Q6_K: q_w, without the - 32); sc[(s * 16 + g)
 * * 16 + r] its block scales (Q4_K/Q5_K: g < 8, blocks of 32; Q6_K: g <
 * 16, blocks of 16); pr[(s * 8 + k) * 16 + r] two 16-bit halves, low and
 * high: Q4_K/Q5_K minima m_2k, m_2k+1 (k < 4), Q6_K scales sc_2k, sc_2k+1
 * (k < 8); d[s * 16 + r], dmin[s * 16 + r] the super-block's f16 as
 * floats. The integer sums and the float steps are the definition's, so
 * the group gives eng_q8k_dot's bits. */
#define ENG_Q8K_GROUP_ROWS 16
#define ENG_Q8K_GROUP_X 4
typedef struct {
	uint8_t *q;
	int32_t *sc, *pr;
	float *d, *dmin;
} eng_q8kgroup;
#define ENG_Q8K_GROUP_BYTES(nsb) ((size_t)(nsb) * (4096 + (256 + 128 + 32) * 4))
/* Lays a group for nsb super-blocks out in mem (ENG_Q8K_GROUP_BYTES(nsb),
 * 64-byte aligned for the values' rows). */
void eng_q8k_group_place(eng_q8kgroup *g, void *mem, int nsb);
/* Whether this process runs the group kernels (the AVX512-VNNI level). */
int eng_q8k_group_level(void);
/* Unpacks rows w[0..16) (repeat a row to fill a group). */
void eng_q8k_group_unpack(eng_q8kgroup *g, const uint8_t *const w[ENG_Q8K_GROUP_ROWS], int nsb, int t);
/* o[i * 16 + r] = group row r . activation row x[i], i < nx (at most
 * ENG_Q8K_GROUP_X); only where eng_q8k_group_level() is true. */
void eng_q8k_group_dot(float *o, const eng_q8kblk *const *x, int nx, const eng_q8kgroup *g, int nsb, int t);

#endif
