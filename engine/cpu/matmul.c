/*
 * engine/cpu/matmul.c: y = x W^T (+ bias) on the fast CPU path. The
 * weight's output rows are split over the thread pool. Prefill (4 or more
 * batch rows) takes tiles of 4 weight rows x 3 batch rows (dot3x4: 12
 * accumulators in registers), so each weight row streams from memory once
 * per call; decode reads 4 weight rows a quarter of the task apart (4
 * streams per worker). F16/BF16 rows are converted to f32 once per tile.
 * With EV_BLAS=1 and OpenBLAS present, chunks of many rows go to sgemm.
 */
#ifdef EV_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_int.h"
#include "engine/cpu/kernels.h"

typedef struct {
	cpu_ctx *cc;
	float *y;
	const float *x;
	int n;
	const eng_weight *w;
	const float *bias;
	int rows_per_task;
	const eng_qxblk *xq; /* the activations quantized, for the integer path */
	const uint16_t *xbf; /* or rounded to BF16 (rows of xbf_stride), for the BF16 path */
	int xbf_stride;
	const eng_q8kblk *xk; /* or to 8 bits a super-block, for K-quants with --activation-bits 8 */
	const eng_qxbyt *xqb; /* xq's bytes, for the raw-row kernels of all but Q8_0 (qdot.h), or NULL */
} mm_job;

static const float *wrow(const mm_job *j, int r, float *buf)
{
	const eng_weight *w = j->w;
	size_t off = (size_t)r * (size_t)w->cols;
	if (w->dtype == ENG_F32)
		return (const float *)w->data + off;
	if (w->x4) { /* a row of quads: block by block out of its quad */
		eng_weight_row_f32(buf, w, r);
		return buf;
	}
#ifdef ENG_QNATIVE
	if (eng_dtype_block(w->dtype) > 1) { /* blocks widened 32 at a time: the scalar reading's values */
		const uint8_t *row = (const uint8_t *)w->data + eng_dtype_bytes(w->dtype, off);
		for (int i = 0; i < w->cols; i += 32) {
			__m256 v[4];
			ld32_q(v, row, i, (int)w->dtype);
			for (int g = 0; g < 4; g++)
				_mm256_storeu_ps(buf + i + 8 * g, v[g]);
		}
		return buf;
	}
#endif
	eng_to_f32(buf, (const char *)w->data + eng_dtype_bytes(w->dtype, off), w->dtype, (size_t)w->cols);
	return buf;
}

/* Batch row i's outputs r .. r + nr from o, plus the bias (+0.0f without
 * one, as every path adds). The bias test stands outside the loops so
 * that they vectorize: the group paths' outputs, stored element by
 * element and reloading floats the kernel had just stored as one vector,
 * were 8.7% of the group kernel's samples in perf on a Q5_K_M prefill,
 * 2.9% as one vector. */
static inline void mm_put(const mm_job *j, int i, int r, int nr, const float *o)
{
	float *y = j->y + (size_t)i * j->w->rows + r;
	if (nr == 16) { /* a whole group, as one vector (GCC's extension) */
		typedef float v16 __attribute__((vector_size(64)));
		v16 v, b = {0};
		memcpy(&v, o, sizeof v);
		if (j->bias)
			memcpy(&b, j->bias + r, sizeof b);
		v += b;
		memcpy(y, &v, sizeof v);
		return;
	}
	if (j->bias) {
		const float *b = j->bias + r;
		for (int k = 0; k < nr; k++)
			y[k] = o[k] + b[k];
	} else {
		for (int k = 0; k < nr; k++)
			y[k] = o[k] + 0.0f;
	}
}

/* Prefill: weight rows four at a time against batch rows three at a time
 * (dot3x4; measured ~6% faster whole-process than 4 batch x 3 weight
 * rows, whose batch vectors came from L2 four a step instead of three),
 * the last batch rows one by one (dot4: the same sums). */
static void mm_task_tiles(mm_job *j, int r0, int r1, int worker)
{
	int K = j->w->cols;
	float *buf = j->cc->wconv[worker];
	for (int r = r0; r < r1; r += 4) {
		int nr = r1 - r < 4 ? r1 - r : 4;
		const float *wr[4];
		for (int k = 0; k < 4; k++)
			wr[k] = wrow(j, r + (k < nr ? k : 0), buf + (size_t)k * K);
		int i = 0;
		for (; i + 3 <= j->n; i += 3) {
			const float *xr[3] = {j->x + (size_t)i * K, j->x + (size_t)(i + 1) * K, j->x + (size_t)(i + 2) * K};
			float o[3][4];
			dot3x4(o, xr, wr, K);
			for (int t = 0; t < 3; t++)
				mm_put(j, i + t, r, nr, o[t]);
		}
		for (; i < j->n; i++) {
			float o[4];
			dot4(o, j->x + (size_t)i * K, wr[0], wr[1], wr[2], wr[3], K);
			mm_put(j, i, r, nr, o);
		}
	}
}

/* Tasks a worker for decode's matmuls: one, so that each worker reads one
 * run of the weight's bytes. Measured on SmolLM2-135M-Instruct (bench
 * engine --batch 1, 2 threads, interleaved rounds): with rows as stored,
 * decode tok/s with 2 tasks a worker against 8: BF16 116-117 against
 * 108-113, Q4_K_M 169-193 against 158-165, Q8_0 158-208 against 148-173
 * (4 between them, 1 no better than 2); with quads (2026-12-05), 1 against
 * 2: Q4_1 292-303 against 273-290, Q4_K_M 270-277 against 260-262, BF16
 * 125-126 against 122-125, Q8_0 211-219 against 209-218. */
#define ENG_CPU_DECODE_TASKS 1

/* The next group's rows (consecutive, so one span of bytes) asked for
 * into L2 a share at a time while the kernel works on this group's, so
 * that its unpacking finds them there instead of waiting on memory: the
 * unpacking had been 17% of the group kernel's time on a Q6_K prefill. */
typedef struct {
	const char *at, *end;
	size_t step; /* bytes a kernel pass */
} mm_prefetch;

static mm_prefetch mm_prefetch_next(const eng_weight *w, int r, int r1, int rows, int n, int per_pass)
{
	mm_prefetch p = {NULL, NULL, 0};
	if (r >= r1)
		return p;
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)w->cols);
	int nr = r1 - r < rows ? r1 - r : rows, passes = (n + per_pass - 1) / per_pass;
	p.at = (const char *)w->data + (size_t)r * rb;
	p.end = p.at + (size_t)nr * rb;
	p.step = ((size_t)nr * rb / (size_t)passes + 63) / 64 * 64;
	return p;
}

static inline void mm_prefetch_step(mm_prefetch *p)
{
	const char *stop = p->at + p->step < p->end ? p->at + p->step : p->end;
	for (; p->at < stop; p->at += 64)
		__builtin_prefetch(p->at, 0, 2);
}

/* With ENG_CPU_UNPACK_ROWS batch rows or more: block-quantized rows a
 * group of 16 at a time, unpacked once into the worker's buffer
 * (eng_qgroup) and met by the batch rows six at a time; the rows left
 * over as a group of fewer (its lanes repeat the first row). */
static void mm_task_group(mm_job *j, int r0, int r1, int worker)
{
	const eng_weight *w = j->w;
	int K = w->cols, nb = K / 32, t = (int)w->dtype;
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)K);
	eng_qgroup *g = &j->cc->qgrp[worker];
	for (int r = r0; r < r1; r += ENG_QGROUP_ROWS) {
		int nr = r1 - r < ENG_QGROUP_ROWS ? r1 - r : ENG_QGROUP_ROWS;
		const uint8_t *wr[ENG_QGROUP_ROWS], *quads[4];
		for (int q = 0; q < 4 && w->x4; q++) /* (a weight of quads has rows a multiple of 4) */
			quads[q] = (const uint8_t *)w->data + (size_t)(r + (4 * q < nr ? 4 * q : 0)) * rb;
		if (!w->x4 || !eng_qgroup_unpack_x4(g, quads, nb, t)) {
			for (int u = 0; u < ENG_QGROUP_ROWS; u++) /* quads: the rows as stored in the worker's scratch */
				wr[u] = u < nr ? eng_weight_row(w, r + u, j->cc->x4rows[worker] + (size_t)u * rb) : wr[0];
			eng_qgroup_unpack(g, wr, nb, t);
		}
		mm_prefetch next = mm_prefetch_next(w, r + ENG_QGROUP_ROWS, r1, ENG_QGROUP_ROWS, j->n, ENG_QGROUP_X);
		for (int i = 0; i < j->n; i += ENG_QGROUP_X) {
			int nx = j->n - i < ENG_QGROUP_X ? j->n - i : ENG_QGROUP_X;
			mm_prefetch_step(&next);
			const eng_qxblk *xr[ENG_QGROUP_X];
			float o[ENG_QGROUP_X * ENG_QGROUP_ROWS];
			for (int k = 0; k < nx; k++)
				xr[k] = j->xq + (size_t)(i + k) * (size_t)nb;
			eng_qdot_group(o, xr, nx, g, nb, t);
			for (int k = 0; k < nx; k++)
				mm_put(j, i + k, r, nr, o + k * ENG_QGROUP_ROWS);
		}
	}
}

/* K-quants against 8-bit activations with ENG_CPU_UNPACK_ROWS batch rows
 * or more (where the CPU has the group kernel, q8k.h): rows a group of 16
 * at a time, unpacked once into the worker's buffer and met by the batch
 * rows four at a time; a group of fewer repeats its first row. */
static void mm_task_kgroup(mm_job *j, int r0, int r1, int worker)
{
	const eng_weight *w = j->w;
	int K = w->cols, nsb = K / 256, t = (int)w->dtype;
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)K);
	eng_q8kgroup g;
	eng_q8k_group_place(&g, j->cc->qmem[worker], nsb);
	for (int r = r0; r < r1; r += ENG_Q8K_GROUP_ROWS) {
		int nr = r1 - r < ENG_Q8K_GROUP_ROWS ? r1 - r : ENG_Q8K_GROUP_ROWS;
		const uint8_t *wr[ENG_Q8K_GROUP_ROWS];
		for (int u = 0; u < ENG_Q8K_GROUP_ROWS; u++)
			wr[u] = u < nr ? eng_weight_row(w, r + u, j->cc->x4rows[worker] + (size_t)u * rb) : wr[0];
		eng_q8k_group_unpack(&g, wr, nsb, t);
		mm_prefetch next = mm_prefetch_next(w, r + ENG_Q8K_GROUP_ROWS, r1, ENG_Q8K_GROUP_ROWS, j->n, ENG_Q8K_GROUP_X);
		for (int i = 0; i < j->n; i += ENG_Q8K_GROUP_X) {
			int nx = j->n - i < ENG_Q8K_GROUP_X ? j->n - i : ENG_Q8K_GROUP_X;
			mm_prefetch_step(&next);
			const eng_q8kblk *xr[ENG_Q8K_GROUP_X];
			float o[ENG_Q8K_GROUP_X * ENG_Q8K_GROUP_ROWS];
			for (int k = 0; k < nx; k++)
				xr[k] = j->xk + (size_t)(i + k) * (size_t)nsb;
			eng_q8k_group_dot(o, xr, nx, &g, nsb, t);
			for (int k = 0; k < nx; k++)
				mm_put(j, i + k, r, nr, o + k * ENG_Q8K_GROUP_ROWS);
		}
	}
}

/* Block-quantized weights against 16-bit activations (qdot.h), K-quants
 * against 8-bit ones (q8k.h), or BF16 weights against BF16 activations
 * (bfdot.h): four weight rows a quarter of the task apart (as decode
 * below), each group against the batch rows six at a time (8-bit: four;
 * BF16: six, or three below six rows); the rows left over as a group of
 * fewer.
 * Every output is the same sum whatever the group or width, and the
 * same as mm_task_group's. */
static void mm_task_q(mm_job *j, int r0, int r1, int worker)
{
	if (j->xq && j->n >= ENG_CPU_UNPACK_ROWS) {
		mm_task_group(j, r0, r1, worker);
		return;
	}
	if (j->xk && j->n >= ENG_CPU_UNPACK_ROWS && eng_q8k_group_level()) {
		mm_task_kgroup(j, r0, r1, worker);
		return;
	}
	const eng_weight *w = j->w;
	int K = w->cols, R = w->rows, nb = K / 32, t = (int)w->dtype;
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)K);
	const uint8_t *W = w->data;
	int q4 = (r1 - r0) / 4, r = r0;
	uint8_t *scratch = j->cc->x4rows[worker];
	if (j->n == 1 && j->xq) {
		/* batch-1 decode: the quads in one call (eng_qdot_rows; a weight
		 * of quads, eng_qdot_rows_x4 on all its rows, r0 and r1 multiples
		 * of 4), then the bias (+0.0f without one, as below) over their rows */
		if (w->x4)
			eng_qdot_rows_x4(j->y, j->xq, j->xqb, W, rb, r0, q4, nb, t, scratch);
		else
			eng_qdot_rows(j->y, j->xq, j->xqb, W, rb, r0, q4, q4, nb, t);
		if (j->bias)
			for (int k = r0; k < r0 + 4 * q4; k++)
				j->y[k] = j->y[k] + j->bias[k];
		else
			for (int k = r0; k < r0 + 4 * q4; k++)
				j->y[k] = j->y[k] + 0.0f;
		r = r0 + 4 * q4;
	}
	while (r < r1) {
		int rr[4], nr;
		if (w->x4) { /* a weight of quads: one quad's rows as stored, into the worker's scratch */
			for (int u = 0; u < 4; u++)
				rr[u] = r + u;
			nr = 4, r += 4;
		} else if (r < r0 + q4) {
			for (int u = 0; u < 4; u++)
				rr[u] = r + u * q4;
			nr = 4, r++;
			if (r == r0 + q4)
				r = r0 + 4 * q4;
		} else {
			nr = r1 - r;
			for (int u = 0; u < 4; u++)
				rr[u] = r + (u < nr ? u : 0);
			r = r1;
		}
		/* a quad's rows as stored once a kernel asks for them (eng_qdot_x4
		 * reads the quad itself where the level has it) */
		const uint8_t *wr[4] = {NULL, NULL, NULL, NULL};
		for (int u = 0; u < 4 && !w->x4; u++)
			wr[u] = W + (size_t)rr[u] * rb;
		int step = j->xk ? ENG_Q8K_X : !j->xbf ? ENG_QDOT_X : j->n >= ENG_BFDOT_X ? ENG_BFDOT_X : 3;
		for (int i = 0; i < j->n; i += step) {
			int nx = j->n - i < step ? j->n - i : step;
			float o[(ENG_BFDOT_X > ENG_QDOT_X ? ENG_BFDOT_X : ENG_QDOT_X) * 4];
			if (j->xbf) { /* BF16 rows, read as they are */
				const uint16_t *xr[ENG_BFDOT_X], *wb[4] = {(const uint16_t *)wr[0], (const uint16_t *)wr[1],
				                                           (const uint16_t *)wr[2], (const uint16_t *)wr[3]};
				for (int k = 0; k < step; k++)
					xr[k] = j->xbf + (size_t)(i + (k < nx ? k : 0)) * (size_t)j->xbf_stride;
				eng_bfdot(o, xr, nx, wb, K);
			} else if (j->xk) {
				const eng_q8kblk *xr[ENG_Q8K_X];
				for (int u = 0; u < 4 && !wr[u]; u++) /* (a model for 8-bit activations keeps K-quant rows) */
					wr[u] = eng_weight_row(w, rr[u], scratch + (size_t)u * rb);
				for (int k = 0; k < step; k++)
					xr[k] = j->xk + (size_t)(i + (k < nx ? k : 0)) * (size_t)(K / 256);
				eng_q8k_dot(o, xr, nx, wr, K / 256, t);
			} else {
				const eng_qxblk *xr[ENG_QDOT_X];
				const eng_qxbyt *xy[ENG_QDOT_X];
				for (int k = 0; k < step; k++) {
					xr[k] = j->xq + (size_t)(i + (k < nx ? k : 0)) * (size_t)nb;
					xy[k] = j->xqb ? j->xqb + (size_t)(i + (k < nx ? k : 0)) * (size_t)nb : NULL;
				}
				if (!w->x4 || !eng_qdot_x4(o, xr, j->xqb ? xy : NULL, nx, W + (size_t)rr[0] * rb, nb, t)) {
					for (int u = 0; u < 4 && !wr[u]; u++)
						wr[u] = eng_weight_row(w, rr[u], scratch + (size_t)u * rb);
					eng_qdot(o, xr, j->xqb ? xy : NULL, nx, wr, nb, t);
				}
			}
			for (int k = 0; k < nx; k++)
				for (int u = 0; u < nr; u++)
					j->y[(size_t)(i + k) * R + rr[u]] = o[k * 4 + u] + (j->bias ? j->bias[rr[u]] : 0.0f);
		}
	}
}

static void mm_task(void *ctx, int task, int worker)
{
	mm_job *j = ctx;
	if (j->xq || j->xbf || j->xk) {
		int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
		mm_task_q(j, r0, r1 < j->w->rows ? r1 : j->w->rows, worker);
		return;
	}
	if (j->n >= 4) {
		int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
		mm_task_tiles(j, r0, r1 < j->w->rows ? r1 : j->w->rows, worker);
		return;
	}
	/* decode: four weight rows at once, a quarter of the task's range
	 * apart, so that each worker streams four separate runs of memory
	 * (measured whole-process against the alternatives on a 125M f32
	 * model: 4 far-apart rows ~12% faster than 2, 2 ~10% faster than 2
	 * adjacent ones, which beat 1 by ~5%; 1 beat 4 adjacent ones, the
	 * first kernel, by ~25%; 8 no better). dot4 and dot1 sum each output
	 * as the prefill tiles do, so the bits match. */
	const eng_weight *w = j->w;
	int K = w->cols, R = w->rows;
	int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
	if (r1 > R)
		r1 = R;
#ifdef ENG_QNATIVE
	if (eng_dtype_block(w->dtype) > 1 && !w->x4) {
		/* block rows read in place: the bits of dot4 / dot1 on dequantized rows */
		const uint8_t *W = w->data;
		size_t rb = eng_dtype_bytes(w->dtype, (size_t)K);
		int t = (int)w->dtype, q4 = (r1 - r0) / 4, r = r0;
		for (; r < r0 + q4; r++)
			for (int i = 0; i < j->n; i++) {
				float o[4];
				dot4_q(o, j->x + (size_t)i * K, W + (size_t)r * rb, W + (size_t)(r + q4) * rb,
				       W + (size_t)(r + 2 * q4) * rb, W + (size_t)(r + 3 * q4) * rb, K, t);
				for (int u = 0; u < 4; u++)
					j->y[(size_t)i * R + r + u * q4] = o[u] + (j->bias ? j->bias[r + u * q4] : 0.0f);
			}
		for (r = r0 + 4 * q4; r < r1; r++)
			for (int i = 0; i < j->n; i++)
				j->y[(size_t)i * R + r] = dot1_q(j->x + (size_t)i * K, W + (size_t)r * rb, K, t) +
							  (j->bias ? j->bias[r] : 0.0f);
		return;
	}
#endif
	int f16 = w->dtype == ENG_F16;
	if ((w->dtype == ENG_F16 || w->dtype == ENG_BF16) && h_native(f16)) {
		/* 16-bit rows read in place: the bits of dot4 / dot1 on converted rows */
		float (*conv)(uint16_t) = f16 ? eng_f16_to_f32 : eng_bf16_to_f32;
		const uint16_t *W = w->data;
		int q4 = (r1 - r0) / 4, r = r0;
		for (; r < r0 + q4; r++)
			for (int i = 0; i < j->n; i++) {
				float o[4];
				dot4_h(o, j->x + (size_t)i * K, W + (size_t)r * K, W + (size_t)(r + q4) * K,
				       W + (size_t)(r + 2 * q4) * K, W + (size_t)(r + 3 * q4) * K, K, f16, conv);
				for (int t = 0; t < 4; t++)
					j->y[(size_t)i * R + r + t * q4] = o[t] + (j->bias ? j->bias[r + t * q4] : 0.0f);
			}
		for (r = r0 + 4 * q4; r < r1; r++)
			for (int i = 0; i < j->n; i++)
				j->y[(size_t)i * R + r] = dot1_h(j->x + (size_t)i * K, W + (size_t)r * K, K, f16, conv) +
							  (j->bias ? j->bias[r] : 0.0f);
		return;
	}
	float *buf = j->cc->wconv[worker];
	int q4 = (r1 - r0) / 4, r = r0;
	for (; r < r0 + q4; r++) {
		const float *w0 = wrow(j, r, buf), *w1 = wrow(j, r + q4, buf + K), *w2 = wrow(j, r + 2 * q4, buf + 2 * K),
			    *w3 = wrow(j, r + 3 * q4, buf + 3 * K);
		for (int i = 0; i < j->n; i++) {
			float o[4];
			dot4(o, j->x + (size_t)i * K, w0, w1, w2, w3, K);
			for (int t = 0; t < 4; t++)
				j->y[(size_t)i * R + r + t * q4] = o[t] + (j->bias ? j->bias[r + t * q4] : 0.0f);
		}
	}
	r = r0 + 4 * q4;
	for (; r < r1; r++) {
		const float *wr = wrow(j, r, buf);
		for (int i = 0; i < j->n; i++) {
			float o = dot1(j->x + (size_t)i * K, wr, K);
			j->y[(size_t)i * R + r] = o + (j->bias ? j->bias[r] : 0.0f);
		}
	}
}

#ifdef EV_HAVE_OPENBLAS
/* Opt-in (EVALD_BLAS=1): prefill chunks of 32 rows or more of f32
 * activations against f32 weights go to OpenBLAS's sgemm, which measured
 * up to ~1.5x faster than the blocked kernel below on this machine's two
 * cores (engine/README.md). It is off by default because sgemm sums in
 * another order: a prompt fed at once would then no longer give bit for
 * bit the logits of the same prompt fed token by token, and a sample's
 * greedy answer could depend on what else shared its batch, which an
 * evaluation harness must not allow. */
static bool blas_gemm(cpu_ctx *cc, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	static int enabled = -1;
	if (enabled < 0) {
		const char *e = getenv("EVALD_BLAS");
		enabled = e && !strcmp(e, "1");
	}
	if (!enabled || w->dtype != ENG_F32 || n < 32)
		return false;
	openblas_set_num_threads(cc->nw);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w->rows, w->cols, 1.0f, x, w->cols,
	            (const float *)w->data, w->cols, 0.0f, y, w->rows);
	if (bias)
		for (int i = 0; i < n; i++)
			axpy1(y + (size_t)i * w->rows, 1.0f, bias, w->rows);
	return true;
}
#endif

/* How a weight takes its activations on the fast path: f32 (the tiles
 * above, or OpenBLAS), rounded to BF16, quantized to 16 bits a block of
 * 32 (qdot.h), or to 8 bits a super-block (K-quants with
 * --activation-bits 8, q8k.h). A row wider than the buffers were made for
 * takes the f32 kernels. */
enum { MM_F32, MM_BF16, MM_Q16, MM_Q8K };

static int mm_form(const cpu_ctx *cc, const eng_weight *w)
{
	bool bf = w->dtype == ENG_BF16, blocks = eng_dtype_block(w->dtype) > 1;
	int stride = (w->cols + 31) / 32 * 32;
	if (!cc->qdot || !(bf || blocks) || stride > (int)((cc->maxcols + 31) / 32 * 32))
		return MM_F32;
	if (bf)
		return MM_BF16;
	return cc->act8 && eng_q8k_type((int)w->dtype) && w->cols % 256 == 0 ? MM_Q8K : MM_Q16;
}

/* Rows a task: decode (fewer than 4 batch rows) reads each weight byte for
 * one or two outputs and is bound by memory, and fewer, longer tasks give
 * each of a worker's four streams longer runs of memory (measured:
 * ENG_CPU_DECODE_TASKS above); more batch rows take 8 a worker, so that
 * uneven workers even out. */
static int mm_rows_per_task(const cpu_ctx *cc, int n, int rows)
{
	int tasks_wanted = cc->nw * (n < 4 ? ENG_CPU_DECODE_TASKS : 8);
	int per = (rows + tasks_wanted - 1) / tasks_wanted;
	per = (per + 3) / 4 * 4; /* whole tiles of 4 rows, and quarters for decode */
	return per < 8 ? 8 : per;
}

/* Several weights on the same activations as one job: task t is job k's
 * task t - first[k]. */
#define MM_MANY 8
typedef struct {
	mm_job j[MM_MANY];
	int first[MM_MANY + 1];
	int nw;
} mm_many_job;

static void mm_many_task(void *ctx, int task, int worker)
{
	mm_many_job *mj = ctx;
	int k = 0;
	while (task >= mj->first[k + 1])
		k++;
	mm_task(&mj->j[k], task - mj->first[k], worker);
}

/* nw (at most MM_MANY) weights of one form other than MM_F32 and of equal
 * columns against x: the activations rounded or quantized once a chunk of
 * ENG_CPU_QROWS rows, every weight's tasks in one job. */
static void mm_run_quant(cpu_ctx *cc, int nw, float *const *ys, const float *x, int n, const eng_weight *const *ws,
                         const float *const *biases, int form)
{
	int cols = ws[0]->cols, stride = (cols + 31) / 32 * 32, nb = cols / 32;
	bool bf = form == MM_BF16, k8 = form == MM_Q8K;
	for (int i0 = 0; i0 < n; i0 += ENG_CPU_QROWS) {
		int m = n - i0 < ENG_CPU_QROWS ? n - i0 : ENG_CPU_QROWS;
		for (int i = 0; i < m; i++) {
			const float *xi = x + (size_t)(i0 + i) * cols;
			if (bf)
				eng_bf_round(cc->xbf + (size_t)i * (size_t)stride, xi, cols);
			else if (k8)
				eng_q8k_quantize(cc->xk + (size_t)i * (size_t)(cols / 256), xi, cols);
			else
				eng_qx_quantize(cc->xq + (size_t)i * (size_t)nb, xi, cols);
		}
		/* unpacked groups: tasks of whole groups of 16 rows */
		bool groups = m >= ENG_CPU_UNPACK_ROWS && (k8 ? eng_q8k_group_level() : !bf);
		/* raw rows (decode) of every type but Q8_0 also read the
		 * activations as bytes, where the AVX512-VNNI kernels run */
		bool bytes = !bf && !k8 && m < ENG_CPU_UNPACK_ROWS && eng_qdot_level() == 2, made = false;
		mm_many_job mj;
		mj.nw = nw;
		mj.first[0] = 0;
		for (int k = 0; k < nw; k++) {
			const eng_weight *w = ws[k];
			int per = mm_rows_per_task(cc, n, w->rows);
			int qper = groups ? (per + ENG_QGROUP_ROWS - 1) / ENG_QGROUP_ROWS * ENG_QGROUP_ROWS : per;
			mm_job sj = {cc, ys[k] + (size_t)i0 * w->rows, NULL, m, w, biases ? biases[k] : NULL, qper,
			             bf || k8 ? NULL : cc->xq, bf ? cc->xbf : NULL, stride, k8 ? cc->xk : NULL, NULL};
			if (bytes && w->dtype != ENG_Q8_0) {
				if (!made)
					eng_qx_bytes(cc->xqb, cc->xq, m * nb), made = true;
				sj.xqb = cc->xqb;
			}
			mj.j[k] = sj;
			mj.first[k + 1] = mj.first[k] + (w->rows + qper - 1) / qper;
		}
		if (nw == 1)
			eng_pool_run(cc->pool, mm_task, &mj.j[0], mj.first[1]);
		else
			eng_pool_run(cc->pool, mm_many_task, &mj, mj.first[nw]);
	}
}

void eng_cpu_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	cpu_ctx *cc = be->ctx;
#ifdef EV_HAVE_OPENBLAS
	if (blas_gemm(cc, y, x, n, w, bias))
		return;
#endif
	int form = mm_form(cc, w);
	if (form != MM_F32) {
		mm_run_quant(cc, 1, &y, x, n, &w, &bias, form);
		return;
	}
	int per = mm_rows_per_task(cc, n, w->rows);
	mm_job j = {cc, y, x, n, w, bias, per, NULL, NULL, 0, NULL, NULL};
	eng_pool_run(cc->pool, mm_task, &j, (w->rows + per - 1) / per);
}

/* The weights as one job where they take their activations in the same
 * form (q, k and v; gate and up): one quantization of x and one wait for
 * the workers instead of one each; otherwise a call each. The same bits
 * either way: an output depends on its row and x alone. */
void eng_cpu_matmul_many(eng_backend *be, int nw, float *const *ys, const float *x, int n, const eng_weight *const *ws,
                         const float *const *biases)
{
	cpu_ctx *cc = be->ctx;
	int form = mm_form(cc, ws[0]);
	bool one = form != MM_F32 && nw <= MM_MANY;
	for (int k = 1; k < nw && one; k++)
		one = mm_form(cc, ws[k]) == form && ws[k]->cols == ws[0]->cols;
	if (one) {
		mm_run_quant(cc, nw, ys, x, n, ws, biases, form);
		return;
	}
	for (int k = 0; k < nw; k++)
		eng_cpu_matmul(be, ys[k], x, n, ws[k], biases ? biases[k] : NULL);
}
