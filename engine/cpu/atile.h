/*
 * engine/cpu/atile.h: attention's scores and weighted values for many
 * query heads against one block of keys and values at once, in AVX-512
 * registers, for the rows of a prefill tile that attend the same block
 * (engine/cpu/attention.c). Each key row and value row is loaded once for
 * all the heads instead of once a head.
 *
 * Their bits are the AVX2 kernels' (kernels.h), which every other path
 * uses, so a row's result does not depend on which attended it:
 *   score(q, t) = hsum8(acc) * scale, acc the 8-lane FMA accumulator over
 *     q . K[t] in steps of 8 (dot1's order: lanes ((0+1)+(2+3))+((4+5)+(6+7)));
 *   acc[d] = acc[d] * c, then acc[d] = fma(p[t], V[t][d], acc[d]) for t
 *     in order (weighted_rows' order).
 * Two query heads share a 512-bit register, each in its own 256-bit half,
 * and the lane totals follow hsum8x8's tree half by half.
 *
 * Chosen at run time (the CPU has AVX-512F) and only where the head width
 * is a multiple of 16; compiled with target attributes whatever the
 * build's -march. eng_atile_ok() says whether they run here.
 */
#ifndef ENG_CPU_ATILE_H
#define ENG_CPU_ATILE_H

#include <stdbool.h>
#include <stddef.h>

/* the most query heads one call takes, and the widest head */
enum { ATILE_MAXQ = 64, ATILE_MAXHD = 512 };

/* how keys and values are stored: f32, or 16 bits widened exactly as read
 * (a 16-bit KV cache read in place, the bits of converting it first) */
enum { ATILE_F32, ATILE_BF16, ATILE_F16 };

/* whether the kernels run on this CPU for heads of width hd */
bool eng_atile_ok(int hd);

/* out[i][t] = score(q[i], K + t * stride) for i < nq, t < cnt (K of the
 * given kind, stride in elements); pack is scratch of (nq + 1) * hd floats
 * (the heads interleaved in pairs). With nextK and nextV (else NULL), the
 * first cnt / 8 * 8 rows of the block attended next, at the same stride,
 * are asked for into L2 eight rows at a time while these are scored. */
void eng_atile_scores(float *const *out, const float *const *q, int nq, const void *K, int kind, size_t stride,
		      int cnt, int hd, float scale, float *pack, const void *nextK, const void *nextV);

/* acc[i][d] = acc[i][d] * c[i] + sum over t < cnt of p[i][t] * V[t * stride + d],
 * in weighted_rows' order, for i < nq, d < hd */
void eng_atile_values(float *const *acc, const float *c, const float *const *p, int nq, const void *V, int kind,
		      size_t stride, int cnt, int hd);

#endif
