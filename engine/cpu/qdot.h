/*
 * engine/cpu/qdot.h: block-quantized weight rows against activations
 * quantized to 16 bits, with integer dot products (the fast path for
 * Q8_0 .. Q6_K weights; engine/README.md "Quantized weights").
 *
 * An activation row is cut into blocks of 32: d = max|x| / 32767, q =
 * x / d rounded to nearest even, s = d * sum(q) (15 bits a block: the
 * rounding is 1/65534 of the block's largest value, where llama.cpp's
 * 8-bit activations round at 1/254 and change SmolLM2's greedy answers;
 * those are an option for K-quants, engine/cpu/q8k.h).
 * A weight block of 32 (a K-quant's sub-block) is its integer values q_w
 * (offsets folded in: Q4_0 - 8, Q5_0 - 16, Q6_K - 32, Q3_K - 4 where
 * hmask's bit is clear; IQ4_NL and IQ4_XS their table's values; the IQ2s
 * their grid entries' signed magnitudes, 8, 25, 43), a scale for its
 * first 16 elements and one for the last 16 (equal but for Q6_K, Q3_K,
 * Q2_K, IQ2_XS and IQ2_S; an IQ2's d (1 + 2 ls) / 8) and a minimum
 * coefficient m
 * (Q4_1, Q5_1: +m; Q4_K, Q5_K: -dmin * min; Q2_K one a half, m_lo and
 * m_hi: -dmin * min). With lo = sum of q_w[e] q_x[e] over e < 16 and hi
 * the same over the last 16, and h_lo, h_hi the sums of q_x over the two
 * halves (exact integers), an output is, over the row's blocks in order,
 *   one scale:    acc = fma((float)(lo + hi), sc * d, acc)
 *   Q6_K, Q3_K, Q2_K, IQ2_XS, IQ2_S:
 *                 acc = fma((float)lo, sc_lo * d, acc);
 *                 acc = fma((float)hi, sc_hi * d, acc)
 *   mins = fma(m, s, mins)
 *   Q2_K:         mins = fma(m_lo, d * (float)h_lo, mins);
 *                 mins = fma(m_hi, d * (float)h_hi, mins)
 * and then acc + mins. A block's integer sum is one number however it is
 * formed (its conversion to float rounds to nearest, as every kernel's
 * does), so the vector kernels (AVX2's madd, AVX512-VNNI's dpwssd, or its
 * dpbusd on the weights' bytes and the activations' high and low bytes in
 * decode of every type but Q8_0; chosen at run time) give the plain
 * definition's bits (eng_qdot_ref), on raw rows (decode) as on rows
 * unpacked a group of 16 at a time (prefill),
 * and a batch row gets the same bits whichever rows share its call.
 * (One integer sum a block, not partial sums kept in lanes, is what lets
 * prefill hold 16 weight rows in a register, one a lane.)
 */
#ifndef ENG_CPU_QDOT_H
#define ENG_CPU_QDOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
	float d;       /* the block's scale */
	float s;       /* d * the sum of q */
	int16_t q[32];
} eng_qxblk;

/* A block's q again as bytes, q = 256 * hb + lb (hb = q >> 8, lb = q &
 * 255), the sums of q over its elements 0-15 and 16-31, and the sum of
 * hb over the block: what the AVX512-VNNI decode kernels of every type
 * but Q8_0 form the exact block sums from, with 8-bit products
 * (engine/README.md "K-quant decode on bytes"; hbs for IQ4_XS, whose
 * signed values meet hb as value + 128). Kept apart from eng_qxblk so
 * that prefill, which does not use them, neither forms them nor carries
 * them through its caches. */
typedef struct {
	int8_t hb[32];
	uint8_t lb[32];
	int32_t hs[2];
	int32_t hbs;
} eng_qxbyt;

/* Weight rows unpacked a group of ENG_QGROUP_ROWS for many activation
 * rows (prefill), one row a lane: for block b, pair k < 16 (elements 2k,
 * 2k + 1) and row r, q[((b * 16 + k) * 16 + r) * 2 + {0, 1}]; the
 * halves' scales sc[(b * 2 + h) * 16 + r]; minimum coefficients
 * m[b * 16 + r] (Q2_K: its first halves'), m2[b * 16 + r] (Q2_K's second
 * halves'; unused by the other types). */
#define ENG_QGROUP_ROWS 16
typedef struct {
	int16_t *q;   /* nb * 512 */
	float *sc;    /* nb * 32 */
	float *m;     /* nb * 16 */
	float *m2;    /* nb * 16 */
} eng_qgroup;

/* Bytes eng_qgroup needs for nb blocks (q, then sc, m and m2). */
#define ENG_QGROUP_BYTES(nb) ((size_t)(nb) * (512 * sizeof(int16_t) + 64 * sizeof(float)))
/* Lays a group for nb blocks out in mem (ENG_QGROUP_BYTES(nb) of them). */
static inline void eng_qgroup_place(eng_qgroup *g, void *mem, int nb)
{
	g->q = (int16_t *)mem;
	g->sc = (float *)((char *)mem + (size_t)nb * 512 * sizeof(int16_t));
	g->m = g->sc + (size_t)nb * 32;
	g->m2 = g->m + (size_t)nb * 16;
}

/* Quantizes x[0..n) (n a multiple of 32) into n/32 blocks. */
void eng_qx_quantize(eng_qxblk *out, const float *x, int n);
/* The same by the definition, one element at a time (the oracle). */
void eng_qx_quantize_ref(eng_qxblk *out, const float *x, int n);

/* The bytes of nb quantized blocks (eng_qxbyt). */
void eng_qx_bytes(eng_qxbyt *out, const eng_qxblk *in, int nb);
/* The same element by element (the oracle). */
void eng_qx_bytes_ref(eng_qxbyt *out, const eng_qxblk *in, int nb);

/* o[i*4 + r] = weight row w[r] . activation row x[i], i < nx (at most
 * ENG_QDOT_X), r < 4, over nb blocks of 32; t an eng_dtype block type.
 * xy[i] is x[i]'s bytes (eng_qx_bytes), which the AVX512-VNNI kernels of
 * every type but Q8_0 read; xy may be NULL, and those calls then take
 * other kernels with the same bits (K-quants the AVX2 one, the
 * 32-element types the VNNI one on words). */
#define ENG_QDOT_X 6
void eng_qdot(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx, const uint8_t *const w[4],
              int nb, int t);
/* Decode's run of quads: for k < nq, the rows r = r0 + k + u * q4 (u < 4)
 * of W (rb bytes a row) against the one activation row x (xy its bytes,
 * or NULL), y[r] = eng_qdot's output for that quad, bit for bit; with the
 * bytes at the AVX512-VNNI level the type is chosen once for the run. */
void eng_qdot_rows(float *y, const eng_qxblk *x, const eng_qxbyt *xy, const uint8_t *W, size_t rb, int r0, int q4,
                   int nq, int nb, int t);
/* Quads laid out four rows together, for decode of Q8_0 .. Q5_1, Q4_K,
 * Q5_K, Q6_K, IQ4_XS, IQ4_NL, Q2_K and Q3_K (eng_qx4_type; the layouts of
 * the last four are in qdot.c, q2_quad and q3_quad's comments): the rows 4k .. 4k + 3 of a weight keep their
 * 4 * rb bytes, but block b of the four (super-block for the K-quants;
 * 4 * its bytes from 4 * b times them) holds the four rows' parts side
 * by side, row 0's first.
 *   Q8_0: the four f16 d; then for each pair of rows p and half e of
 *     the block (elements 0-15, 16-31), the pair's 16 bytes side by side
 *     (at 8 + 64 p + 32 e + 16 (r % 2)).
 *   Q4_0 .. Q5_1: the four f16 scales; the four f16 minimum coefficients
 *     (Q4_1, Q5_1); the fifth bits (Q5_0, Q5_1) as two 64-bit masks, the
 *     four rows' bits of elements 0-15 (row r's 16 at bit 16 r) then of
 *     16-31; the four rows' 16 bytes of nibbles.
 *   Q4_K, Q5_K: the 16-byte heads {d, dmin, scales[12]} as four dwords
 *     each, transposed (dword k of row r at 16 k + 4 r); then each run of
 *     32 bytes (Q5_K: qh, then qs; Q4_K: qs) four rows at once, its
 *     first halves then its second (at 128 c + 64 h + 16 r).
 *   Q6_K: for each half h and pair of rows p, the pair's 32-byte runs
 *     side by side (ql's first 32 of the half, its second 32, qh's 32:
 *     at 384 h + 192 p + 64 k + 32 (r % 2)); then the 16 int8 scales
 *     transposed (scale i of row r at 768 + 4 i + r), the four f16 d
 *     (at 832 + 2 r).
 * So a block's four rows are one 64-byte load (two for a K-quant block
 * pair) where rows as stored are four, with no shuffles to put them side
 * by side (engine/README.md "Quads laid out four rows together"). */
bool eng_qx4_type(int t);
/* dst (4 rows' bytes) = the rows src[0..4) (nb blocks of 32 of type t) as a quad. */
void eng_qx4_pack(uint8_t *dst, const uint8_t *const src[4], int nb, int t);
/* dst = the rows (a multiple of 4) at src, as stored, as quads (dst and src apart). */
void eng_qx4_pack_rows(uint8_t *dst, const uint8_t *src, int rows, int nb, int t);
/* dst (a row's bytes) = row u (< 4) of a quad as stored. */
void eng_qx4_row(uint8_t *dst, const uint8_t *quad, int u, int nb, int t);
/* Decode on quads: for k < nq, y[r0 + 4k + u] = eng_qdot's output for the
 * rows r0 + 4k + u (u < 4, r0 a multiple of 4) of W as quads (rb bytes a
 * row), bit for bit; scratch holds 4 * rb bytes, for the levels that read
 * the quad's rows as stored. */
void eng_qdot_rows_x4(float *y, const eng_qxblk *x, const eng_qxbyt *xy, const uint8_t *W, size_t rb, int r0, int nq,
                      int nb, int t, uint8_t *scratch);
/* eng_qdot on one quad (4 rows of W as quads from a multiple of 4) where
 * the level reads quads (AVX512-VNNI, with the bytes xy): true, o as
 * eng_qdot's, bit for bit; otherwise false and o untouched (the caller
 * takes the rows as stored, eng_qx4_row, to eng_qdot). */
bool eng_qdot_x4(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx, const uint8_t *quad, int nb,
                 int t);
/* Unpacks the rows w[0..16) (repeat a row to fill a group) into dst. */
void eng_qgroup_unpack(eng_qgroup *dst, const uint8_t *const w[ENG_QGROUP_ROWS], int nb, int t);
/* The same from four quads laid out four rows together (rows 4q .. 4q + 3
 * of the group at quads[q]; repeat a quad to fill a group), where the
 * level reads quads (AVX512-VNNI) and t is a type laid out as quads
 * (eng_qx4_type): true, dst as
 * eng_qgroup_unpack makes it of the rows as stored; otherwise false and
 * dst untouched (the caller takes the rows out, eng_qx4_row). */
bool eng_qgroup_unpack_x4(eng_qgroup *dst, const uint8_t *const quads[4], int nb, int t);
/* o[i * 16 + r] = row r of the group . activation row x[i], i < nx (at
 * most ENG_QGROUP_X): the bits of eng_qdot. */
#define ENG_QGROUP_X 6
void eng_qdot_group(float *o, const eng_qxblk *const *x, int nx, const eng_qgroup *g, int nb, int t);
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
