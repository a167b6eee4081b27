/*
 * engine/cpu/bfdot.h: BF16 weight rows against activations rounded to
 * BF16, with AVX512-BF16's dot-product instruction (vdpbf16ps) where the
 * CPU has it (engine/README.md "BF16 weights").
 *
 * An activation row is rounded to BF16 (to nearest, ties to even) and
 * padded with zeros to a multiple of 32. An output has 16 lanes: chunk c
 * of 32 elements gives lane l the pair e = 32c + 2l, e + 1, as vdpbf16ps
 * does it (Intel's definition, and this CPU's, checked bit for bit):
 *   lane[l] = fma(x[e+1], w[e+1], lane[l]); lane[l] = fma(x[e], w[e], lane[l])
 * (each product of two BF16 values is exact in f32, so each step rounds
 * once), a row's last partial chunk as if padded with zeros; then lane[k]
 * + lane[k + 8] for k < 8, those 8 summed in the order of hsum8
 * (engine/cpu/kernels.h). The AVX2 kernel does those fmas itself, so both
 * give the plain definition's bits (eng_bfdot_ref), and a batch row gives
 * the same bits whichever rows share its call. (vdpbf16ps treats BF16
 * subnormals, below 1.2e-38, as zero; the AVX2 kernel and the definition
 * do not: the one place where they may differ.)
 */
#ifndef ENG_CPU_BFDOT_H
#define ENG_CPU_BFDOT_H

#include <stdint.h>

/* x[0..n) rounded to BF16 into out[0..round32(n)), zeros after n. */
void eng_bf_round(uint16_t *out, const float *x, int n);
void eng_bf_round_ref(uint16_t *out, const float *x, int n);

/* o[i*4 + r] = weight row w[r] (n BF16 values) . activation row x[i]
 * (rounded and padded by eng_bf_round), i < nx (at most ENG_BFDOT_X), r < 4. */
#define ENG_BFDOT_X 6
void eng_bfdot(float *o, const uint16_t *const *x, int nx, const uint16_t *const w[4], int n);
/* One output by the definition, scalar (the oracle). */
float eng_bfdot_ref(const uint16_t *x, const uint16_t *w, int n);

/* The kernel eng_bfdot uses: 0 plain C, 1 AVX2, 2 AVX512-BF16; chosen
 * once from the CPU (EVALD_CPU_KERNELS=plain|avx2 caps it). */
int eng_bfdot_level(void);
int eng_bfdot_set_level(int level);

#endif
