/*
 * engine/cpu/cpu_int.h: what the fast CPU backend's files share: its
 * context (the pool and per-worker scratch) and the ops that live in
 * their own files.
 */
#ifndef ENG_CPU_INT_H
#define ENG_CPU_INT_H

#include "engine/backend.h"
#include "engine/cpu/bfdot.h"
#include "engine/cpu/q8k.h"
#include "engine/cpu/qdot.h"

typedef struct {
	eng_pool *pool;
	int nw;
	float **wconv;   /* per worker: 4 rows of converted weights */
	/* per worker attention scratch, O(block) whatever the context: one
	 * block of converted keys and values, its scores, the group's running
	 * softmax state, and MSA's top-k and block list */
	float **kbuf, **vbuf, **sc, **acc, **mx, **sum, **qsum, **top;
	float **tacc, **tmx, **tsum; /* attention: the totals of segments folded so far (ATT_SEG) */
	float **qpack;               /* attention: a tile's query heads paired for atile.h (sc: their scores) */
	int **topi, **blocks;
	int nlist; /* room in a block list: sink + local + top_k + 1 */
	/* per worker, the index branch of a tile of prefill rows */
	float **tq, **ttop;
	int **ttopi;
	size_t maxcols;
	/* block-quantized weights: activations quantized to 16 bits and
	 * integer dot products (engine/cpu/qdot.h); BF16 weights: activations
	 * rounded to BF16 and BF16 dot products (engine/cpu/bfdot.h); unless
	 * EVALD_QUANT_DOT=f32 asks for the f32 kernels on exactly converted
	 * values for both */
	int qdot;
	uint16_t *xbf;  /* a call's activations rounded to BF16 (ENG_CPU_QROWS rows of the widest, padded) */
	eng_qxblk *xq; /* a call's activations, quantized (ENG_CPU_QROWS rows of the widest) */
	eng_qxbyt *xqb; /* their bytes, for decode of all but Q8_0 (ENG_CPU_UNPACK_ROWS rows of the widest) */
	int act8;       /* K-quant weights meet 8-bit super-block activations (q8k.h) */
	eng_q8kblk *xk; /* then a call's activations for them (ENG_CPU_QROWS rows of the widest) */
	eng_qgroup *qgrp; /* per worker: a group of 16 weight rows unpacked (prefill) */
	void **qmem;      /* their storage */
	/* per worker: 16 rows of quads (eng_weight.x4) as stored, for the
	 * kernels that read rows (ENG_QGROUP_ROWS rows of the widest) */
	uint8_t **x4rows;
	/* RoPE's cos and sin of the last call's positions (cpu_rope): a
	 * forward step turns q and k of every layer at the same positions */
	float *rope_cs, *rope_sn; /* [rope_n * rope_half] */
	long *rope_pos;           /* [rope_n] */
	float *rope_freq;         /* [rope_half]: the frequencies they were made of */
	int rope_n, rope_half, rope_fcap;
	bool rope_ok;    /* the four above hold a call's angles */
	size_t rope_cap; /* room in rope_cs, rope_sn (floats) and rope_pos (rows) */
} cpu_ctx;

/* Rows of one sequence whose index branch one prefill task scans together. */
#define INDEX_TILE 16
/* Batch rows from which unpacking a group of weight rows once pays:
 * below it the raw-row kernel, which widens each block in registers for
 * every three batch rows. Measured on SmolLM2 Q4_1, 2 threads, two
 * interleaved rounds (bench engine --prompt 64 --decode 32): decode of 8
 * sequences 331-339 tok/s raw against 312-336 unpacked from 16 rows and
 * 256-291 from 8; of 16 sequences 404-421 unpacked against 317-330 raw. */
#define ENG_CPU_UNPACK_ROWS 16
/* rows of activations quantized at a time (a prefill chunk's) */
#define ENG_CPU_QROWS 256
#define ATT_TILE 16 /* rows of one sequence attended together in prefill */
/* Attended blocks a segment: a (row, KV head)'s list is attended a
 * segment at a time, each with its own softmax state, and the segments'
 * states folded in order (engine/msa_split.h's merge), on every path, so
 * that decode may run a list's segments in parallel and still give the
 * bits prefill gives. A list of n entries has segments of att_seg(n):
 * half of it rounded up, at most ATT_SEG, so that a short context's few
 * KV heads split over the workers too (SmolLM2's three on two) while a
 * task still reads as many blocks in a row as it can. */
#define ATT_SEG 16
static inline long att_seg(long n)
{
	long s = (n + 1) / 2;
	return s < 1 ? 1 : s > ATT_SEG ? ATT_SEG : s;
}

/* layout.c: where the CPU has AVX512-VNNI, the model's Q8_0 .. Q5_1
 * weights, the embedding table's too (and Q4_K, Q5_K, Q6_K with kquants: not
 * where they meet 8-bit activations, whose kernels read rows) laid out in
 * place as quads of four rows (eng_weight.x4), unless
 * EVALD_WEIGHT_LAYOUT=rows. */
int eng_cpu_lay_out_quads(eng_model *m, bool kquants);
/* matmul.c */
void eng_cpu_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias);
void eng_cpu_matmul_many(eng_backend *be, int nw, float *const *ys, const float *x, int n, const eng_weight *const *ws,
                         const float *const *biases);
/* attention.c */
void eng_cpu_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer, int nh,
		       long window, const int *lists, const int *nls, int nlist);

#endif
