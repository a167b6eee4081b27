/*
 * engine/cuda/cuda.h: the engine's CUDA ops (the .cu files of engine/cuda), callable
 * from C. Built when CMake finds the toolkit (EV_HAVE_CUDA); every call
 * returns 0 or an EV_E_* status with the CUDA error in ev_error_msg().
 *
 * Pointers named d_* are device memory (eng_cuda_malloc); everything else
 * is host memory. Activations are f32 row-major as on the CPU; weights are
 * kept in their stored dtype (eng_dtype numbers: f32, f16, bf16). Each op
 * computes what the CPU reference op of the same name computes (engine/
 * cpu/ref.c, engine/indexer.c, engine/msa_split.c); tests/engine/
 * test_cuda_ops.c checks them against it on a device (ctest label gpu).
 */
#ifndef ENG_CUDA_H
#define ENG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/msa_split.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
	int devices;          /* CUDA devices visible */
	char name[256];       /* device 0 */
	int cc_major, cc_minor;
	size_t mem_bytes;
	int sms;
	int mem_clock_khz, bus_width_bits; /* the peak bandwidth: 2 * clock * width / 8 */
	int driver, runtime;  /* versions, as 13000 */
} eng_cuda_info;

/* What the machine has: 0 with *out filled when a device is usable;
 * EV_E_UNSUPPORTED when there is none (the message says why: no driver, no
 * device), out->devices 0. */
int eng_cuda_probe(eng_cuda_info *out);

/* Copies between host and device since the process started: uploads and
 * downloads made (each a synchronous copy), and uploads of a table that
 * the device held already and so were not made. */
typedef struct {
	long uploads, downloads, skipped;
} eng_cuda_counts;
void eng_cuda_counts_get(eng_cuda_counts *out);

void *eng_cuda_malloc(size_t bytes); /* NULL when out of device memory */
void eng_cuda_free(void *d);
int eng_cuda_upload(void *d_dst, const void *src, size_t bytes);
int eng_cuda_download(void *dst, const void *d_src, size_t bytes);
/* Waits for the work queued so far; reports a kernel's failure. */
int eng_cuda_sync(void);

/* ---- the decoder's ops ---------------------------------------------------- */

/* y[n, rows] = x[n, cols] . w^T for a weight [rows, cols] in dtype (f32,
 * f16, bf16): the decode GEMV (n small: every row of w read once for all
 * n in groups of 8, 16-byte loads, a warp a row; rows whose length is not
 * a multiple of 8 take a plain kernel). A row's arithmetic does not depend
 * on n: a batch gives each row what it gives alone. */
int eng_cuda_gemv(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols);
/* The GEMV over a weight of a block type (eng_dtype Q8_0 ... Q6_K, kept
 * as stored; cols a multiple of its block): every element the value the
 * format's definition gives (engine/gguf/quant.c), then as eng_cuda_gemv. */
int eng_cuda_gemv_q(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols);
/* n elements of a block type to f32 (the definition's values; for the
 * prefill GEMM of a block-type weight). */
int eng_cuda_dequantize(float *d_out, const void *d_w, int dtype, size_t n);
/* The same product for prefill, through cuBLASLt (n rows at once): f32
 * weights with the rows as they are (f32 products and sums, no TF32);
 * f16 and bf16 weights with the rows rounded to the weight's type (to
 * nearest, ties to even) and f32 accumulation. The backend takes it from
 * ENG_CUDA_GEMM_ROWS rows on. */
#define ENG_CUDA_GEMM_ROWS 16
int eng_cuda_gemm(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols);
/* The GEMV of pairs: y[j] = W_{sel[j]} . x[j / xdiv] for j < pairs, the
 * weight picked from d_wtab (a device array of device weight pointers,
 * each [rows, cols] of dtype: f32, f16, bf16 or a block type) by the pair's
 * entry of d_sel (device); each row's arithmetic that of eng_cuda_gemv /
 * eng_cuda_gemv_q for one row (an MoE decode's experts: no host between
 * the router and them). */
int eng_cuda_gemv_sel(float *d_y, const float *d_x, int xdiv, const int *d_sel, int pairs, void *const *d_wtab,
                      int dtype, int rows, int cols);
/* MoE routing of n rows on the device, eng_moe_route's arithmetic (the
 * device's exp): from logits[i, E], kind 0 softmax, 1 softmax renormalised
 * over the chosen, 2 sigmoid scores chosen on score + bias (d_bias, E
 * floats, or NULL) and renormalised; the K chosen (ties to the lower
 * expert) written in ascending expert order to sel[i, K] (device), their
 * weights times scale (a float product) beside them in w[i, K]. E <= 4096,
 * K <= 64. */
int eng_cuda_moe_route(int *d_sel, float *d_w, const float *d_logits, int n, int E, int K, int kind, const float *d_bias,
                       float scale);
/* x[i] += a_i * eo[i] for rows of width floats, a_i = (float)(1 / (1 +
 * exp(-(double)g[i]))) (Qwen2-MoE's shared expert gate, as the forward
 * takes it on the host), each addition as eng_cuda_axpy makes it. */
int eng_cuda_gate_add(float *d_x, const float *d_eo, const float *d_g, int n, int width);
/* x[i] += w[i, k] * eo[i * K + k] for k = 0 .. K - 1 in that order, rows
 * of width floats, each addition as eng_cuda_axpy makes it. */
int eng_cuda_moe_mix(float *d_x, const float *d_eo, const float *d_w, int n, int K, int width);
/* y[n, d] = x / rms(x) * g */
int eng_cuda_rmsnorm(float *d_y, const float *d_x, const float *d_g, int n, int d, float eps);
/* rotate-half RoPE in place on the first rd channels of each head of
 * x[n, nh, hd]; row i at position pos[i] (host array, n entries) */
int eng_cuda_rope(float *d_x, int n, int nh, int hd, int rd, const long *pos, const float *d_inv_freq);
/* g = silu(g) * u; and SwiGLU-OAI as eng_cpu_swiglu_oai */
int eng_cuda_swiglu(float *d_g, const float *d_u, size_t n);
int eng_cuda_swiglu_oai(float *d_g, const float *d_u, size_t n, float alpha, float limit);
/* y += a * x */
int eng_cuda_axpy(float *d_y, const float *d_x, float a, size_t n);
/* x[i] = row tok[i] of table[vocab, width] (dtype), as f32; tok on the host */
int eng_cuda_embed(float *d_x, const void *d_table, int dtype, int vocab, int width, const int32_t *tok, int n);

/* dst[i] = src[idx[i]], rows of width floats (idx on the host) */
int eng_cuda_gather(float *d_dst, const float *d_src, const int *idx, int n, int width);
/* for j < n: row rows[j] of y += a[j] * row j of x (rows of width floats;
 * rows and a on the host; rows distinct), each element as eng_cuda_axpy */
int eng_cuda_axpy_rows(float *d_y, const float *d_x, const int *rows, const float *a, int n, int width);
/* y[i] += b, for each of n rows of width floats */
int eng_cuda_add_bias(float *d_y, const float *d_b, int n, int width);

/* Index keys of n rows (ik: [n, idim] f32 on the device) into device page
 * copies, each flushed as eng_index_store flushes it (|x| < 2^-60 to 0):
 * row i to the idim floats at page[i] + ik_off + slot[i] * idim * 4
 * (host arrays). */
int eng_cuda_index_store(void *const *page, const int *slot, int n, const float *d_ik, int idim, size_t ik_off);

/* Keys and values of n rows into device page copies, as eng_cpu_kv_store
 * stores them into host pages: row i (k, v: [n, kd] f32 on the device)
 * goes to slot slot[i] of the page at device address page[i] (host
 * arrays), converted to dtype (f32, or f16/bf16 rounded as eng_f32_to_f16
 * and eng_f32_to_bf16 round, NaN and overflow alike), keys at kbase +
 * slot * kd * esize, values at vbase + ..., and each stored key (as
 * stored, read back as f32) added to the page's f32 sums at sbase, the
 * rows of one page in their order. */
int eng_cuda_kv_store(void *const *page, const int *slot, int n, const float *d_k, const float *d_v, int kd,
                      int dtype, size_t kbase, size_t vbase, size_t sbase);

/* Attention over the paged KV cache following a split plan (engine/
 * attn_plan.c): out[n, nh, hd] for queries q[n, nh, hd]. Row i's pages are
 * pages[row_pages[i] + b] (device addresses of page copies laid out as the
 * host's eng_page: a layer's keys at kbase, values at vbase, [block][kvh]
 * [hd] of dtype f32/f16/bf16 each); task t = (row i, KV head g) attends
 * its list's blocks (block k: first[t] + k where first[t] >= 0, else
 * blocks[boff[t] + k]), each at its positions in [lo[i], pos[i]], in the
 * parts `items` cut the list into (its items at ifirst[t], icount[t] of
 * them, in list order): each part with its own online softmax, then the
 * parts merged in order by log-sum-exp (eng_split_merge). Host arrays
 * (boff: n * kvh + 1 entries); hd at most 256, at most 32 query heads a KV
 * head. A (row, head) with nothing to attend gives zeros. */
int eng_cuda_paged_attention(float *d_out, const float *d_q, int n, int nh, int kvh, int hd, int dtype,
                             void *const *pages, const int *row_pages, int npages, size_t kbase, size_t vbase,
                             int block, const long *pos, const long *lo, const int *first, const int *boff,
                             const int *blocks, const eng_split_item *items, int nitems, const int *ifirst,
                             const int *icount, float scale);

/* ---- MSA: the lightning indexer's choice and sparse decode ------------------
 *
 * The cache of one sequence and layer, as the ops see it: keys and values
 * k[t, kvh, hd], v[t, kvh, hd] and index keys ik[t, idim] (one a position,
 * shared by the index heads; stored flushed as eng_index_store stores
 * them) for positions t < len, in blocks of `block` positions (the KV
 * page). */

/* For query rows of one sequence, each row i (position pos[i], host) and
 * KV head g: the scores of blocks 0 .. pos[i] / block, a block's the max
 * over its keys <= pos of iq[i, g] . ik[t] (in the CPU's order of
 * operations: the same bits); then the index_local blocks ending at the
 * query's own always kept, then the best (higher score, lower block on
 * ties) up to min(topk, blocks so far); written ascending to lists + (i *
 * kvh + g) * nlist, their count at nls[i * kvh + g] (host arrays). Exactly
 * eng_index_select_one's choice. The keys are read where they lie, in the
 * sequence's pages: ik[t] is idim floats at pages[t / block] + ik_off +
 * (t % block) * idim * 4 bytes (pages: npages device addresses on the host,
 * at least the last row's block + 1). */
int eng_cuda_index_select(int *lists, int *nls, int nlist, const float *d_iq, void *const *pages, int npages,
                          size_t ik_off, int n, int kvh, int idim, const long *pos, int block, int topk, int local);

/* Decode attention over chosen blocks, split-K: out[n, nh, hd] for query
 * rows q[n, nh, hd] (GQA: nh / kvh query heads a KV head), row i and KV
 * head g attending its nls blocks at lists (host, as above; nls < 0: every
 * block up to its position), each block's keys <= pos[i]. The blocks of a
 * (row, head) are cut by eng_split_worklist into about `target` items in
 * all, each attended on its own (online softmax), then merged in order by
 * log-sum-exp on the device. scale = 1 / sqrt(hd) unless given (> 0). */
int eng_cuda_sparse_decode(float *d_out, const float *d_q, const float *d_k, const float *d_v, int n, int nh,
                           int kvh, int hd, const long *pos, int block, const int *lists, const int *nls, int nlist,
                           int target, float scale);

/* ---- measuring ---------------------------------------------------------------- */

/* Device-to-device copy bandwidth of `bytes` (best of reps), GB/s. */
int eng_cuda_copy_bandwidth(double *gbps, size_t bytes, int reps);
/* The prefill GEMM's rate on a [rows, cols] weight of dtype and n rows
 * (the rounding of the rows included; best of reps), TFLOP/s. */
int eng_cuda_gemm_tflops(double *tflops, double *us, int rows, int cols, int dtype, int n, int reps);
/* The GEMV's read bandwidth on a random [rows, cols] weight of dtype with
 * n rows of x (best of reps), GB/s of weight bytes. */
int eng_cuda_gemv_bandwidth(double *gbps, double *us, int rows, int cols, int dtype, int n, int reps);

#ifdef __cplusplus
}
#endif

#endif
