/*
 * engine/cpu/qdot.h: block-quantized weight rows against activations
 * quantized to 16 bits, with integer dot products (the fast path for
 * Q8_0 .. Q6_K weights; engine/README.md "Quantized weights").
 *
 * An activation row is cut into blocks of 32: d = max|x| / 32767, q =
 * x / d rounded to nearest even, s = d * sum(q) (15 bits a block: the
 * rounding is 1/65534 of the block's largest value, where llama.cpp's
 * 8-bit activations round at 1/254 and change SmolLM2's greedy answers).
 * A weight block of 32 (a K-quant's sub-block) is its integer values q_w
 * (offsets folded in: Q4_0 - 8, Q5_0 - 16, Q6_K - 32), a scale for its
 * first 16 elements and one for the last 16 (equal but for Q6_K) and a
 * minimum coefficient m (Q4_1, Q5_1: +m; Q4_K, Q5_K: -dmin * min). With
 * lo_k = q_w[2k] q_x[2k] + q_w[2k+1] q_x[2k+1] and hi_k the same 16
 * elements on, an output is, over the row's blocks in order, per lane k < 8
 *   one scale:  lane[k] = fma((float)(lo_k + hi_k), sc * d, lane[k])
 *   Q6_K:       lane[k] = fma((float)lo_k, sc_lo * d, lane[k]);
 *               lane[k] = fma((float)hi_k, sc_hi * d, lane[k])
 *   mins = fma(m, s, mins)
 * then the 8 lanes summed in the order of hsum8 (engine/cpu/kernels.h)
 * plus mins. Integer sums are exact (below 2^24, so their floats too),
 * so the vector kernels (AVX2's madd, AVX512-VNNI's dpwssd, chosen at
 * run time) give the plain definition's bits (eng_qdot_ref), and a batch
 * row gives the same bits whichever rows share its call.
 */
#ifndef ENG_CPU_QDOT_H
#define ENG_CPU_QDOT_H

#include <stdint.h>

typedef struct {
	float d;       /* the block's scale */
	float s;       /* d * the sum of q */
	int16_t q[32];
} eng_qxblk;

/* A weight row unpacked for many activation rows (prefill): nb blocks'
 * integer values, their two scales and minimum coefficients. */
typedef struct {
	int16_t *q;   /* nb * 32 */
	float *sc;    /* nb * 2 */
	float *m;     /* nb */
} eng_qrow;

/* Quantizes x[0..n) (n a multiple of 32) into n/32 blocks. */
void eng_qx_quantize(eng_qxblk *out, const float *x, int n);
/* The same by the definition, one element at a time (the oracle). */
void eng_qx_quantize_ref(eng_qxblk *out, const float *x, int n);

/* o[i*4 + r] = weight row w[r] . activation row x[i], i < nx (at most 3),
 * r < 4, over nb blocks of 32; t an eng_dtype block type. */
void eng_qdot(float *o, const eng_qxblk *const *x, int nx, const uint8_t *const w[4], int nb, int t);
/* Unpacks a row's nb blocks into dst (whose arrays have room). */
void eng_qrow_unpack(eng_qrow *dst, const uint8_t *w, int nb, int t);
/* eng_qdot on unpacked rows, for up to ENG_QDOT_UNPACKED_X activation
 * rows (o[i*4 + r], i < nx): the same bits. */
#define ENG_QDOT_UNPACKED_X 6
void eng_qdot_unpacked(float *o, const eng_qxblk *const *x, int nx, const eng_qrow *const w[4], int nb, int t);
/* One output by the definition, scalar (the oracle). */
float eng_qdot_ref(const eng_qxblk *x, const uint8_t *w, int nb, int t);

/* The kernel eng_qdot uses: 0 plain C, 1 AVX2, 2 AVX512-VNNI; chosen
 * once from the CPU (EVALD_CPU_KERNELS=plain|avx2 caps it). */
int eng_qdot_level(void);
/* Sets the level (capped at what the CPU has); returns the level set.
 * For tests and benchmarks that compare the kernels. */
int eng_qdot_set_level(int level);
const char *eng_qdot_level_name(int level);
/* A CPU's kernel level (0 plain, 1 AVX2, 2 the AVX-512 extension) capped
 * as EVALD_CPU_KERNELS=plain|avx2 asks: qdot's and bfdot's choice. */
int eng_cpu_kernels_cap(int level);

#endif
