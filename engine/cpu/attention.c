/*
 * engine/cpu/attention.c: attention on the fast CPU path, a task per
 * (row, KV head), per tile of prefill rows, or per segment of a long list
 * in decode: dense or MSA block-sparse, each attended block's keys and
 * values read once for all query heads of the group (f32 or 16-bit, in
 * place), the softmax kept online over a segment's blocks and the
 * segments folded in order (att_seg in cpu_int.h). The blocks MSA attends come from the
 * index search in engine/msa_index.c: per row in decode (split across the
 * workers when the context is long), per tile of rows in prefill. Where
 * the CPU has AVX-512, a block's scores and values for all the query heads
 * on it run in atile.c's kernels, with the one-head kernels' bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/atile.h"
#include "engine/cpu/cpu_int.h"
#include "engine/cpu/kernels.h"
#include "engine/msa_index.h"
#include "engine/msa_split.h"

typedef struct {
	cpu_ctx *cc;
	eng_model *m;
	float *out;
	const float *q;
	const eng_row *rows;
	int n, layer, nh;
	long window;
	/* prefill: block lists chosen beforehand for tiles of rows (NULL in
	 * decode); lists[(i * kvh + g) * nlist ..], nls[] < 0 for dense rows */
	int *lists, *nls, nlist;
	const int *tile0; /* att_tile_task's tiles: rows tile0[t] .. tile0[t + 1] - 1 */
} att_job;

/* Index branch for a tile of up to INDEX_TILE consecutive rows and one KV
 * head: rows of one sequence scan the same blocks, so each block's key sum
 * is loaded once for all of them (the same arithmetic as
 * eng_msa_select_fast, row by row, so the same choice). */
static void index_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	eng_model *m = j->m;
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	cpu_ctx *cc = j->cc;
	int g = task % p->kvh, i0 = task / p->kvh * INDEX_TILE, hd = p->hd, K = a->top_k, B = p->block;
	int i1 = i0 + INDEX_TILE < j->n ? i0 + INDEX_TILE : j->n, group = j->nh / p->kvh;
	float *qs = cc->tq[worker], *top = cc->ttop[worker], inv = 1.0f / (float)B;
	int *topi = cc->ttopi[worker], nt[INDEX_TILE], rows[INDEX_TILE], nr = 0;
	long maxlast = -1;
	const eng_seq *s = NULL;
	for (int i = i0; i < i1; i++) {
		int *nl = &j->nls[(size_t)i * p->kvh + g];
		long pos = j->rows[i].pos;
		*nl = -1;
		if (!eng_msa_sparse(m, j->layer, pos))
			continue;
		if (s && j->rows[i].seq != s) { /* another sequence: on its own */
			*nl = eng_msa_select_fast(m, j->rows[i].seq, j->layer, pos, g, j->q + (size_t)i * j->nh * hd,
						  j->lists + ((size_t)i * p->kvh + g) * j->nlist, cc->qsum[worker],
						  cc->top[worker], cc->topi[worker]);
			continue;
		}
		s = j->rows[i].seq;
		eng_msa_group_qsum(qs + (size_t)nr * hd, j->q + (size_t)i * j->nh * hd, g, group, hd);
		nt[nr] = 0;
		maxlast = pos / B - a->local > maxlast ? pos / B - a->local : maxlast;
		rows[nr++] = i;
	}
	for (long b = a->sink; b <= maxlast && K > 0; b += 4) {
		for (int r = 0; r < nr; r++) {
			long last = j->rows[rows[r]].pos / B - a->local;
			if (b > last)
				continue;
			float sc[4];
			int nb = eng_msa_block_scores4(sc, qs + (size_t)r * hd, s->kidx[j->layer], b, last, p->kvh, g, hd);
			for (int t = 0; t < nb; t++)
				eng_msa_topk_push(top + (size_t)r * K, topi + (size_t)r * K, &nt[r], K, sc[t] * inv, (int)(b + t));
		}
	}
	for (int r = 0; r < nr; r++) {
		int i = rows[r];
		j->nls[(size_t)i * p->kvh + g] = eng_msa_compose_list(a, j->rows[i].pos / B, topi + (size_t)r * K, nt[r],
							      j->lists + ((size_t)i * p->kvh + g) * j->nlist);
	}
}

/* The keys and values attend_block reads: f32 rows, or 16-bit rows
 * (BF16, F16) read in place by the _h kernels with the f32 kernels' bits
 * (KV_F32 for a block converted into a buffer first, where the _h kernels
 * do not apply: no AVX2, a head width not a multiple of 8). */
enum { KV_F32 = ATILE_F32, KV_BF16 = ATILE_BF16, KV_F16 = ATILE_F16 };

/* One head's online softmax over a block's scores sh[0 .. cnt): the
 * running max and sum of exps updated, the scores made their exps under
 * the new max in place; returns the factor the head's weighted values so
 * far are scaled by (0 on the first block). */
static inline float softmax_step(float *sh, int cnt, float *mx, float *sum)
{
	float bmax = max_of(sh, cnt), nm = bmax > *mx ? bmax : *mx, corr = expf(*mx - nm);
	*mx = nm;
	float bs = exp_shift_sum(sh, sh, nm, cnt);
	*sum = *sum * corr + bs;
	return corr;
}

/* One block's keys and values for one row and the query heads of a KV
 * group: the group's scores, four heads a key at once (each key loaded
 * once for them), then per head the online softmax (running max mx, sum,
 * weighted values acc rescaled as the max grows) and the values. Every
 * path attends a block through this, so a row's result does not depend on
 * the tile it was in, nor on its keys being read in place or converted. */
static void attend_block(const float *qg, const void *Kp, const void *Vp, int kind, size_t stride, int cnt, float *sc,
			 float *acc, float *mx, float *sum, int group, int hd, int B, float scale)
{
	const float *K = Kp, *V = Vp;
#ifdef ENG_AVX2
	const uint16_t *Kh = Kp, *Vh = Vp;
	int f16 = kind == KV_F16;
#endif
	int h = 0;
	for (; h + 4 <= group; h += 4)
		for (int t = 0; t < cnt; t++) {
			float o4[4];
			const float *q0 = qg + (size_t)h * hd, *q1 = q0 + hd, *q2 = q1 + hd, *q3 = q2 + hd;
#ifdef ENG_AVX2
			if (kind != KV_F32)
				dot4_kh(o4, Kh + (size_t)t * stride, q0, q1, q2, q3, hd, f16);
			else
#endif
				dot4(o4, K + (size_t)t * stride, q0, q1, q2, q3, hd);
			for (int u = 0; u < 4; u++)
				sc[(size_t)(h + u) * B + t] = o4[u] * scale;
		}
	for (; h < group; h++) {
		int t = 0;
		const float *qh = qg + (size_t)h * hd;
#ifdef ENG_AVX2
		/* eight keys a reduction (dot1x8: dot1's bits) */
		for (; hd % 8 == 0 && t + 8 <= cnt; t += 8)
			if (kind != KV_F32)
				dot1x8_h(sc + (size_t)h * B + t, Kh + (size_t)t * stride, stride, qh, hd, scale, f16);
			else
				dot1x8(sc + (size_t)h * B + t, K + (size_t)t * stride, stride, qh, hd, scale);
		for (; kind != KV_F32 && t < cnt; t++)
			sc[(size_t)h * B + t] = dot1_kh(Kh + (size_t)t * stride, qh, hd, f16) * scale;
#endif
		for (; t < cnt; t++)
			sc[(size_t)h * B + t] = dot1(K + (size_t)t * stride, qh, hd) * scale;
	}
	for (h = 0; h < group; h++) {
		float *sh = sc + (size_t)h * B, *ah = acc + (size_t)h * hd, corr = softmax_step(sh, cnt, &mx[h], &sum[h]);
#ifdef ENG_AVX2
		if (kind != KV_F32)
			weighted_rows_h(ah, corr, sh, Vh, stride, cnt, hd, f16);
		else
#endif
			weighted_rows(ah, corr, sh, V, stride, cnt, hd);
	}
}

#ifdef ENG_AVX2
/* attend_block for several rows that attend the same keys and values of
 * a block (a prefill tile's rows, or a decoding row alone; rows[] are
 * their indices, row r's query heads at q0 + r * qstride, its state at
 * acc/mx/sum + r * group heads): atile.h's kernels on all their query
 * heads at once, each key and value loaded once for them, with
 * attend_block's bits (atile.h gives dot1's and weighted_rows' order, a
 * 16-bit cache widened as ld8_h widens it). At most ATILE_MAXQ heads; sc
 * room for them all. */
static void attend_rows(const float *q0, size_t qstride, const int *rows, int nr, const void *K, const void *V,
			int kind, size_t stride, int cnt, float *sc, float *acc, float *mx, float *sum, int group, int hd, int B,
			float scale, float *pack, const void *nextK, const void *nextV)
{
	const float *qs[ATILE_MAXQ];
	float *out[ATILE_MAXQ], *as[ATILE_MAXQ], corr[ATILE_MAXQ];
	int nq = 0;
	for (int k = 0; k < nr; k++)
		for (int h = 0; h < group; h++, nq++) {
			qs[nq] = q0 + (size_t)rows[k] * qstride + (size_t)h * hd;
			out[nq] = sc + (size_t)nq * B;
			as[nq] = acc + ((size_t)rows[k] * group + h) * hd;
		}
	if (nq == 0)
		return;
	eng_atile_scores(out, qs, nq, K, kind, stride, cnt, hd, scale, pack, nextK, nextV);
	for (int k = 0, qi = 0; k < nr; k++)
		for (int h = 0; h < group; h++, qi++) {
			size_t sh = (size_t)rows[k] * group + h;
			corr[qi] = softmax_step(out[qi], cnt, &mx[sh], &sum[sh]);
		}
	eng_atile_values(as, corr, (const float *const *)out, nq, V, kind, stride, cnt, hd);
}

/* Rows a call of attend_rows takes for groups of this size: whole rows of
 * up to ATILE_MAXQ heads, at most a tile; 0 where atile.h's kernels do not
 * run (attend_block then, row by row). */
static int atile_rows(int hd, int group)
{
	if (eng_atile_ok(hd) && group <= ATILE_MAXQ)
		return ATILE_MAXQ / group < ATT_TILE ? ATILE_MAXQ / group : ATT_TILE;
	return 0;
}
#endif

/* How a pool's blocks reach attend_block: in place when they are f32, or
 * 16-bit with the _h kernels at hand (AVX2, F16C for F16, whole vectors a
 * head); else converted into the worker's buffer (KV_F32 on it). */
static int kv_kind(const eng_kv_pool *p)
{
	if (p->dtype == ENG_F32)
		return KV_F32;
#ifdef ENG_AVX2
	if (p->hd % 8 == 0 && (p->dtype == ENG_BF16 || p->dtype == ENG_F16) && h_native(p->dtype == ENG_F16))
		return p->dtype == ENG_F16 ? KV_F16 : KV_BF16;
#endif
	return -1;
}

/* KV head g's key (kv_k) or value (kv_v) at a slot of a page's layer */
static inline const char *kv_k(const eng_kv_pool *p, eng_page *pg, int layer, int slot, int g)
{
	return (const char *)eng_page_kraw(p, pg, layer, slot) + (size_t)g * p->hd * p->esize;
}
static inline const char *kv_v(const eng_kv_pool *p, eng_page *pg, int layer, int slot, int g)
{
	return (const char *)eng_page_vraw(p, pg, layer, slot) + (size_t)g * p->hd * p->esize;
}

/* Asks for KV head g's keys and values of one layer in a page, the
 * block attended next, while this one is worked on (with the pages huge:
 * see kvcache.c's page_mem; with small pages it measured no gain). */
static void prefetch_block(const eng_kv_pool *p, eng_page *pg, int layer, int g)
{
	size_t row = (size_t)p->hd * p->esize;
	for (int t = 0; t < p->block; t++) {
		const char *k = kv_k(p, pg, layer, t, g), *v = kv_v(p, pg, layer, t, g);
		for (size_t c = 0; c < row; c += 64) {
			__builtin_prefetch(k + c, 0, 2);
			__builtin_prefetch(v + c, 0, 2);
		}
	}
}

/* A softmax state of `group` query heads: running maxima, sums of exps,
 * weighted values not yet divided. */
static void state_clear(float *acc, float *mx, float *sum, int group, int hd)
{
	for (int h = 0; h < group; h++) {
		mx[h] = -INFINITY;
		sum[h] = 0;
	}
	memset(acc, 0, (size_t)group * hd * sizeof(float));
}

/* The segments' fold (att_seg): the total takes the first segment's state
 * as it is, and each later one by msa_split's log-sum-exp merge. */
static void state_fold(float *tacc, float *tmx, float *tsum, const float *acc, const float *mx, const float *sum,
		       bool first, int group, int hd)
{
	if (first) {
		memcpy(tacc, acc, (size_t)group * hd * sizeof(float));
		memcpy(tmx, mx, (size_t)group * sizeof(float));
		memcpy(tsum, sum, (size_t)group * sizeof(float));
		return;
	}
	eng_split_state into = {tmx, tsum, tacc}, part = {(float *)mx, (float *)sum, (float *)acc};
	eng_split_merge(&into, &part, group, hd);
}

/* The blocks one (row, KV head) attends: list[0 .. nblocks) when nb >= 0
 * (MSA's choice), else every block from the window's first (dense). */
typedef struct {
	eng_seq *s;
	long pos, lo, nblocks;
	const int *list;
	int nb;
} att_list;

/* Row i's list for KV head g: given (j->lists), chosen here by MSA's
 * index (into the worker's scratch), or dense. */
static void att_list_of(att_job *j, int i, int g, int worker, att_list *L)
{
	eng_model *m = j->m;
	eng_kv_pool *p = &m->kv;
	cpu_ctx *cc = j->cc;
	int B = p->block, rg = i * p->kvh + g;
	L->s = j->rows[i].seq;
	L->pos = j->rows[i].pos;
	L->lo = j->window > 0 && L->pos - j->window + 1 > 0 ? L->pos - j->window + 1 : 0;
	L->list = NULL;
	L->nb = -1;
	if (j->lists) {
		L->list = j->lists + (size_t)rg * j->nlist;
		L->nb = j->nls[rg];
	} else if (eng_msa_sparse(m, j->layer, L->pos)) {
		int *buf = cc->blocks[worker];
		L->nb = eng_msa_select_fast(m, L->s, j->layer, L->pos, g, j->q + (size_t)i * j->nh * p->hd, buf, cc->qsum[worker],
					    cc->top[worker], cc->topi[worker]);
		L->list = buf;
	}
	L->nblocks = L->nb >= 0 ? L->nb : L->pos / B + 1 - L->lo / B;
}

/* Entries [e0, e1) of L into a fresh state (acc, mx, sum) for row i and
 * KV head g: each block's keys and values read once for all query heads
 * of the group, softmax kept online, the scratch one block whatever the
 * context. */
static void att_entries(att_job *j, int i, int g, const att_list *L, long e0, long e1, int worker, float *acc,
			float *mx, float *sum)
{
	eng_kv_pool *p = &j->m->kv;
	cpu_ctx *cc = j->cc;
	int hd = p->hd, group = j->nh / p->kvh, B = p->block;
	const float *qg = j->q + ((size_t)i * j->nh + (size_t)g * group) * hd;
	float *kb = cc->kbuf[worker], *vb = cc->vbuf[worker], *sc = cc->sc[worker], scale = 1.0f / sqrtf((float)hd);
	size_t kd = (size_t)p->kvh * hd;
	const int in_place = kv_kind(p);
#ifdef ENG_AVX2
	const bool tiled = atile_rows(hd, group) > 0;
#endif
	state_clear(acc, mx, sum, group, hd);
	for (long bi = e0; bi < e1; bi++) {
		long b = L->nb >= 0 ? L->list[bi] : L->lo / B + bi;
		long t0 = b * B > L->lo ? b * B : L->lo, t1 = b * B + B - 1 < L->pos ? b * B + B - 1 : L->pos;
		if (t0 > t1)
			continue;
		int cnt = (int)(t1 - t0 + 1), s0 = (int)(t0 - b * B);
		eng_page *pg = L->s->pages[b];
		const void *K, *V;
		size_t stride;
		int kind = in_place;
		if (kind >= 0) { /* in place */
			K = kv_k(p, pg, j->layer, s0, g), V = kv_v(p, pg, j->layer, s0, g);
			stride = kd;
		} else {
			kind = KV_F32;
			for (int t = 0; t < cnt; t++) {
				eng_kv_load(p, kb + (size_t)t * hd, kv_k(p, pg, j->layer, s0 + t, g), (size_t)hd);
				eng_kv_load(p, vb + (size_t)t * hd, kv_v(p, pg, j->layer, s0 + t, g), (size_t)hd);
			}
			K = kb, V = vb, stride = (size_t)hd;
		}
		eng_page *next = bi + 1 < e1 ? L->s->pages[L->nb >= 0 ? L->list[bi + 1] : L->lo / B + bi + 1] : NULL;
#ifdef ENG_AVX2
		if (tiled) { /* the next block's slice asked for while this one is scored */
			static const int row0 = 0;
			const void *nk = NULL, *nv = NULL;
			if (next && kind == in_place) { /* (converted blocks: the buffer is read, not the page) */
				nk = kv_k(p, next, j->layer, 0, g), nv = kv_v(p, next, j->layer, 0, g);
			}
			attend_rows(qg, 0, &row0, 1, K, V, kind, stride, cnt, sc, acc, mx, sum, group, hd, B, scale,
				    cc->qpack[worker], nk, nv);
			continue;
		}
#endif
		if (next)
			prefetch_block(p, next, j->layer, g);
		attend_block(qg, K, V, kind, stride, cnt, sc, acc, mx, sum, group, hd, B, scale);
	}
}

/* Row i's output for KV head g's query heads from a final state */
static void att_out(att_job *j, int i, int g, const float *acc, const float *sum)
{
	int hd = j->m->kv.hd, group = j->nh / j->m->kv.kvh;
	for (int h = 0; h < group; h++) {
		float *oh = j->out + ((size_t)i * j->nh + (size_t)g * group + h) * hd, inv = 1.0f / sum[h];
		for (int d = 0; d < hd; d++)
			oh[d] = acc[(size_t)h * hd + d] * inv;
	}
}

/* Segments of a list of n entries (an empty list is one, empty) */
static long att_nseg(long n)
{
	long s = att_seg(n);
	return n > s ? (n + s - 1) / s : 1;
}

/* One (row, KV head) task: its attended blocks in ascending order, a
 * segment (att_seg) at a time, the segments folded in order. */
static void att_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	cpu_ctx *cc = j->cc;
	int kvh = j->m->kv.kvh, i = task / kvh, g = task % kvh, hd = j->m->kv.hd, group = j->nh / kvh;
	att_list L;
	att_list_of(j, i, g, worker, &L);
	float *ta = cc->tacc[worker], *tm = cc->tmx[worker], *ts = cc->tsum[worker];
	long S = att_seg(L.nblocks);
	att_entries(j, i, g, &L, 0, L.nblocks < S ? L.nblocks : S, worker, ta, tm, ts);
	for (long e0 = S; e0 < L.nblocks; e0 += S) {
		att_entries(j, i, g, &L, e0, e0 + S < L.nblocks ? e0 + S : L.nblocks, worker, cc->acc[worker], cc->mx[worker],
			    cc->sum[worker]);
		state_fold(ta, tm, ts, cc->acc[worker], cc->mx[worker], cc->sum[worker], false, group, hd);
	}
	att_out(j, i, g, ta, ts);
}

/* Decode of few (row, KV head) lists, some longer than a segment: a task
 * a segment, each state to its own slot, folded in order after (the bits
 * of att_task, which folds the same states in the same order). The lists
 * must be known without choosing (dense rows, or j->lists). */
typedef struct {
	att_job *j;
	int *rg, *seg;  /* item t: (row * kvh + KV head), segment */
	float *slots;   /* item t's state: acc [group * hd], mx [group], sum [group] */
	size_t per;     /* floats a slot */
} seg_job;

/* Item t's state in its slot */
static float *seg_slot(const seg_job *sj, int t, int group, int hd, float **mx, float **sum)
{
	float *acc = sj->slots + (size_t)t * sj->per;
	*mx = acc + (size_t)group * hd;
	*sum = *mx + group;
	return acc;
}

static void seg_task(void *ctx, int t, int worker)
{
	seg_job *sj = ctx;
	att_job *j = sj->j;
	int kvh = j->m->kv.kvh, i = sj->rg[t] / kvh, g = sj->rg[t] % kvh, group = j->nh / kvh, hd = j->m->kv.hd;
	att_list L;
	att_list_of(j, i, g, worker, &L);
	long S = att_seg(L.nblocks), e0 = (long)sj->seg[t] * S, e1 = e0 + S < L.nblocks ? e0 + S : L.nblocks;
	float *mx, *sum, *acc = seg_slot(sj, t, group, hd, &mx, &sum);
	att_entries(j, i, g, &L, e0, e1, worker, acc, mx, sum);
}

/* True when it ran the attention split into segments: a worker would
 * otherwise sit idle (fewer rows x KV heads than twice the workers) and
 * some list has more than one segment. */
static bool run_segments(cpu_ctx *cc, att_job *j)
{
	eng_kv_pool *p = &j->m->kv;
	int kvh = p->kvh, nrg = j->n * kvh, group = j->nh / kvh, hd = p->hd;
	if (cc->nw < 2 || nrg >= 2 * cc->nw)
		return false;
	long items = 0;
	for (int rg = 0; rg < nrg; rg++) {
		att_list L;
		att_list_of(j, rg / kvh, rg % kvh, 0, &L); /* dense or given: no choosing here */
		items += att_nseg(L.nblocks);
	}
	if (items <= nrg || items > INT32_MAX / 2)
		return false;
	seg_job sj = {j, malloc((size_t)items * sizeof(int)), malloc((size_t)items * sizeof(int)), NULL,
		      (size_t)group * hd + 2 * (size_t)group};
	sj.slots = malloc((size_t)items * sj.per * sizeof(float));
	if (!sj.rg || !sj.seg || !sj.slots) {
		free(sj.rg), free(sj.seg), free(sj.slots);
		return false; /* a task a list instead: the same bits */
	}
	int t = 0;
	for (int rg = 0; rg < nrg; rg++) {
		att_list L;
		att_list_of(j, rg / kvh, rg % kvh, 0, &L);
		for (long k = 0, ns = att_nseg(L.nblocks); k < ns; k++)
			sj.rg[t] = rg, sj.seg[t++] = (int)k;
	}
	eng_pool_run(cc->pool, seg_task, &sj, t);
	for (int k = 0; k < t;) { /* each list's first slot takes the later ones, in order */
		int rg = sj.rg[k];
		float *tm, *ts, *ta = seg_slot(&sj, k, group, hd, &tm, &ts);
		for (k++; k < t && sj.rg[k] == rg; k++) {
			float *mx, *sum, *acc = seg_slot(&sj, k, group, hd, &mx, &sum);
			state_fold(ta, tm, ts, acc, mx, sum, false, group, hd);
		}
		att_out(j, rg / kvh, rg % kvh, ta, ts);
	}
	free(sj.rg), free(sj.seg), free(sj.slots);
	return true;
}

/* A tile of up to ATT_TILE consecutive rows of one sequence and one KV
 * head (prefill): the union of the rows' blocks in ascending order, each
 * block's keys and values brought in once for every row that attends it
 * (the rows of a prompt chunk mostly share theirs), each row's softmax
 * kept apart; the rows on the same slots of a block go through
 * attend_rows together (atile.h). A row sees its own blocks in the same
 * order with attend_block's bits, as in att_task, its segments (att_seg)
 * folded at the same entries, so the tile changes no bit of it. */
static void att_tile_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	eng_model *m = j->m;
	eng_kv_pool *p = &m->kv;
	cpu_ctx *cc = j->cc;
	int t = task / p->kvh, g = task % p->kvh, hd = p->hd, group = j->nh / p->kvh, B = p->block;
	int i0 = j->tile0[t], nr = j->tile0[t + 1] - i0;
	eng_seq *s = j->rows[i0].seq;
	float *kb = cc->kbuf[worker], *vb = cc->vbuf[worker], *sc = cc->sc[worker], *acc = cc->acc[worker];
	float *mx = cc->mx[worker], *sum = cc->sum[worker], scale = 1.0f / sqrtf((float)hd);
	float *tacc = cc->tacc[worker], *tmx = cc->tmx[worker], *tsum = cc->tsum[worker];
	bool folded[ATT_TILE] = {false}; /* a row's total holds a segment */
#ifdef ENG_AVX2
	const int tiled = atile_rows(hd, group); /* rows a call of attend_rows takes */
#endif
	size_t kd = (size_t)p->kvh * hd;
	long lo[ATT_TILE], nblk[ATT_TILE], at[ATT_TILE], seg[ATT_TILE];
	const int *list[ATT_TILE];
	for (int r = 0; r < nr; r++) {
		long pos = j->rows[i0 + r].pos;
		lo[r] = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
		int nb = j->lists ? j->nls[(size_t)(i0 + r) * p->kvh + g] : -1;
		list[r] = nb >= 0 ? j->lists + ((size_t)(i0 + r) * p->kvh + g) * j->nlist : NULL;
		nblk[r] = nb >= 0 ? nb : pos / B + 1 - lo[r] / B;
		seg[r] = att_seg(nblk[r]);
		at[r] = 0;
	}
	for (int h = 0; h < nr * group; h++) {
		mx[h] = -INFINITY;
		sum[h] = 0;
	}
	memset(acc, 0, (size_t)nr * group * hd * sizeof(float));
	for (;;) {
		long b = -1; /* the lowest next block of any row */
		for (int r = 0; r < nr; r++)
			if (at[r] < nblk[r]) {
				long nb = list[r] ? list[r][at[r]] : lo[r] / B + at[r];
				b = b < 0 || nb < b ? nb : b;
			}
		if (b < 0)
			break;
		eng_page *pg = s->pages[b];
		int br[ATT_TILE], bs0[ATT_TILE], bcnt[ATT_TILE], nb = 0, need = 0; /* the rows on b, their slots */
		for (int r = 0; r < nr; r++) {
			if (at[r] >= nblk[r] || (list[r] ? list[r][at[r]] : lo[r] / B + at[r]) != b)
				continue;
			if (at[r] > 0 && at[r] % seg[r] == 0) { /* a segment ends: fold it, start the next afresh */
				float *ra = acc + (size_t)r * group * hd, *rm = mx + (size_t)r * group, *rs = sum + (size_t)r * group;
				state_fold(tacc + (size_t)r * group * hd, tmx + (size_t)r * group, tsum + (size_t)r * group, ra, rm,
					   rs, !folded[r], group, hd);
				folded[r] = true;
				state_clear(ra, rm, rs, group, hd);
			}
			at[r]++;
			long pos = j->rows[i0 + r].pos;
			long t0 = b * B > lo[r] ? b * B : lo[r], t1 = b * B + B - 1 < pos ? b * B + B - 1 : pos;
			if (t0 > t1)
				continue;
			br[nb] = r, bcnt[nb] = (int)(t1 - t0 + 1), bs0[nb] = (int)(t0 - b * B);
			need = bs0[nb] + bcnt[nb] > need ? bs0[nb] + bcnt[nb] : need;
			nb++;
		}
		/* f32 in place; 16-bit blocks converted once for the tile's rows
		 * (read in place, each row converted them again: prefill of 2048
		 * tokens on one core 329-335 -> 306-307 tok/s) */
		bool in_place = p->dtype == ENG_F32;
		for (int sl = 0; !in_place && sl < need; sl++) {
			eng_kv_load(p, kb + (size_t)sl * hd, kv_k(p, pg, j->layer, sl, g), (size_t)hd);
			eng_kv_load(p, vb + (size_t)sl * hd, kv_v(p, pg, j->layer, sl, g), (size_t)hd);
		}
		size_t stride = in_place ? kd : (size_t)hd;
		const float *qrow = j->q + ((size_t)i0 * j->nh + (size_t)g * group) * hd;
		for (int k = 0; k < nb; k++) {
			if (br[k] < 0)
				continue;
			int s0 = bs0[k], cnt = bcnt[k];
			const float *K = in_place ? (const float *)kv_k(p, pg, j->layer, s0, g) : kb + (size_t)s0 * hd;
			const float *V = in_place ? (const float *)kv_v(p, pg, j->layer, s0, g) : vb + (size_t)s0 * hd;
#ifdef ENG_AVX2
			if (tiled) { /* with it every later row on the same slots, up to ATILE_MAXQ heads */
				int sel[ATT_TILE], ns = 0;
				for (int l = k; l < nb && ns < tiled; l++)
					if (br[l] >= 0 && bs0[l] == s0 && bcnt[l] == cnt)
						sel[ns++] = br[l], br[l] = -1;
				attend_rows(qrow, (size_t)j->nh * hd, sel, ns, K, V, KV_F32, stride, cnt, sc, acc, mx, sum, group,
					    hd, B, scale, cc->qpack[worker], NULL, NULL);
				continue;
			}
#endif
			int r = br[k];
			attend_block(qrow + (size_t)r * j->nh * hd, K, V, KV_F32, stride, cnt, sc, acc + (size_t)r * group * hd,
				     mx + (size_t)r * group, sum + (size_t)r * group, group, hd, B, scale);
		}
	}
	for (int r = 0; r < nr; r++) {
		float *ra = acc + (size_t)r * group * hd, *rm = mx + (size_t)r * group, *rs = sum + (size_t)r * group;
		if (folded[r]) { /* the last segment, then the total */
			ra = tacc + (size_t)r * group * hd, rs = tsum + (size_t)r * group;
			state_fold(ra, tmx + (size_t)r * group, rs, acc + (size_t)r * group * hd, rm, sum + (size_t)r * group,
				   false, group, hd);
		}
		att_out(j, i0 + r, g, ra, rs);
	}
}

/* Decode with few rows: one row's index scan over a long context is most
 * of its cost, so the scan of each (row, KV head) is split into block
 * ranges across the workers, each keeping its own top-k, merged after.
 * The top-k is the k greatest under (score descending, block ascending),
 * a total order, so the merged choice is the one a single scan makes. */
typedef struct {
	att_job *j;
	int splits;
	float *ptop; /* [task][top_k] */
	int *ptopi, *pn;
} split_job;

static void split_index_task(void *ctx, int task, int worker)
{
	split_job *sj = ctx;
	att_job *j = sj->j;
	eng_model *m = j->m;
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	int S = sj->splits, K = a->top_k, hd = p->hd, B = p->block;
	int part = task % S, rg = task / S, i = rg / p->kvh, g = rg % p->kvh;
	long pos = j->rows[i].pos, first = a->sink, last = pos / B - a->local;
	float *top = sj->ptop + (size_t)task * K;
	int *topi = sj->ptopi + (size_t)task * K, nt = 0;
	sj->pn[task] = 0;
	if (!eng_msa_sparse(m, j->layer, pos) || last < first || K <= 0)
		return;
	long per = (last - first + S) / S;
	long b0 = first + part * per, b1 = b0 + per - 1 < last ? b0 + per - 1 : last;
	float *qsum = j->cc->qsum[worker];
	eng_msa_group_qsum(qsum, j->q + (size_t)i * j->nh * hd, g, j->nh / p->kvh, hd);
	eng_msa_index ix = eng_msa_seq_index(j->rows[i].seq, j->layer);
	nt = eng_msa_index_topk(&ix, g, qsum, b0, b1, K, true, top, topi);
	sj->pn[task] = nt;
}

/* Merges the splits' top-k lists into the block list of each (row, KV
 * head). Returns false when scratch could not be had (the caller then
 * lets each attention task choose its own blocks: the same result). */
static bool split_index(cpu_ctx *cc, att_job *j)
{
	eng_model *m = j->m;
	const eng_msa *a = &m->msa;
	int kvh = m->kv.kvh, S = cc->nw, K = a->top_k > 0 ? a->top_k : 1, nrg = j->n * kvh;
	split_job sj = {j, S, malloc((size_t)nrg * S * K * sizeof(float)), malloc((size_t)nrg * S * K * sizeof(int)),
			malloc((size_t)nrg * S * sizeof(int))};
	int *merged = malloc((size_t)K * sizeof(int));
	j->lists = malloc((size_t)nrg * j->nlist * sizeof(int));
	j->nls = malloc((size_t)nrg * sizeof(int));
	bool ok = sj.ptop && sj.ptopi && sj.pn && merged && j->lists && j->nls;
	if (ok) {
		eng_pool_run(cc->pool, split_index_task, &sj, nrg * S);
		for (int rg = 0; rg < nrg; rg++) {
			long pos = j->rows[rg / kvh].pos;
			if (!eng_msa_sparse(m, j->layer, pos)) {
				j->nls[rg] = -1;
				continue;
			}
			int at[64] = {0}, nt = 0; /* S <= 64: the pool's worker count */
			while (nt < a->top_k) {
				int best = -1;
				for (int sp = 0; sp < S && sp < 64; sp++) {
					int t = rg * S + sp;
					if (at[sp] >= sj.pn[t])
						continue;
					float sc = sj.ptop[(size_t)t * K + at[sp]];
					int bi = sj.ptopi[(size_t)t * K + at[sp]];
					if (best < 0)
						best = sp;
					else {
						int tb = rg * S + best;
						float bsc = sj.ptop[(size_t)tb * K + at[best]];
						int bbi = sj.ptopi[(size_t)tb * K + at[best]];
						if (sc > bsc || (sc == bsc && bi < bbi))
							best = sp;
					}
				}
				if (best < 0)
					break;
				merged[nt++] = sj.ptopi[(size_t)(rg * S + best) * K + at[best]++];
			}
			j->nls[rg] = eng_msa_compose_list(a, pos / m->kv.block, merged, nt, j->lists + (size_t)rg * j->nlist);
		}
	}
	free(sj.ptop);
	free(sj.ptopi);
	free(sj.pn);
	free(merged);
	if (!ok) {
		free(j->lists);
		free(j->nls);
		j->lists = NULL;
		j->nls = NULL;
	}
	return ok;
}

/* Rows whose blocks are known (lists, or dense): a task a segment when
 * few long lists would leave workers idle (decode), else tiles of
 * consecutive rows of one sequence when there are several (prefill), else
 * one task a row. */
static void run_attention(cpu_ctx *cc, att_job *j)
{
	if (run_segments(cc, j))
		return;
	int kvh = j->m->kv.kvh, nt = 0;
	int *tile0 = j->n > 1 ? malloc((size_t)(j->n + 1) * sizeof *tile0) : NULL;
	if (!tile0) {
		eng_pool_run(cc->pool, att_task, j, j->n * kvh);
		return;
	}
	for (int i = 0; i < j->n; i++)
		if (i == 0 || j->rows[i].seq != j->rows[i - 1].seq || i - tile0[nt - 1] == ATT_TILE)
			tile0[nt++] = i;
	tile0[nt] = j->n;
	j->tile0 = tile0;
	eng_pool_run(cc->pool, att_tile_task, j, nt * kvh);
	j->tile0 = NULL;
	free(tile0);
}

void eng_cpu_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer,
			  int nh, long window, const int *lists, const int *nls, int nlist)
{
	cpu_ctx *cc = be->ctx;
	eng_model *m = be->m;
	int kvh = m->kv.kvh;
	att_job j = {cc, m, out, q, rows, n, layer, nh, window, NULL, NULL, cc->nlist, NULL};
	if (lists) { /* the lightning indexer chose already */
		j.lists = (int *)lists;
		j.nls = (int *)nls;
		j.nlist = nlist;
		run_attention(cc, &j);
		return;
	}
	bool sparse = false;
	for (int i = 0; i < n && !sparse; i++)
		sparse = eng_msa_sparse(m, layer, rows[i].pos);
	/* several sparse rows: choose their blocks tile by tile first (when
	 * the lists cannot be had, each task chooses its own: same result) */
	long longest = 0;
	for (int i = 0; i < n; i++)
		longest = rows[i].pos > longest ? rows[i].pos : longest;
	if (sparse && n * kvh < cc->nw && cc->nw > 1 && cc->nw <= 64 && longest / m->kv.block >= 1024) {
		split_index(cc, &j);
	} else if (sparse && n > 1 && (j.lists = malloc((size_t)n * kvh * j.nlist * sizeof(int))) &&
	           (j.nls = malloc((size_t)n * kvh * sizeof(int)))) {
		eng_pool_run(cc->pool, index_task, &j, (n + INDEX_TILE - 1) / INDEX_TILE * kvh);
	} else {
		free(j.lists);
		j.lists = NULL;
	}
	if (j.lists || !sparse)
		run_attention(cc, &j);
	else
		eng_pool_run(cc->pool, att_task, &j, n * kvh);
	free(j.lists);
	free(j.nls);
}
