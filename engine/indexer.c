/*
 * engine/indexer.c: MiniMax-M3's lightning indexer, as transformers'
 * MiniMaxM3VLIndexer defines it. A sparse layer scores, per index head
 * (one a KV group), every earlier key by the dot product of the query's
 * index vector with the key's index vector; a block of index_block_size
 * keys scores the max over its keys that are not in the query's future;
 * the index_local blocks ending at the query's own block are always kept;
 * the rest of the index_topk slots go to the best-scoring blocks. The KV
 * group then attends exactly the keys of its head's blocks, causally.
 *
 * Index keys live in the KV pages beside K and V (one f32 vector of
 * index_head_dim a position and layer; eng_page_ikey), with the box of
 * each page's keys. eng_index_select_one is the plain definition, O(context
 * x index_head_dim) a query; eng_index_scan is the fast path's choice, the
 * same blocks bit for bit (README "The lightning indexer").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/kernels.h"

/* Values below this magnitude are stored and compared as 0, in keys and
 * queries alike, so that no product of two index values is subnormal and
 * the rounding bound of a dot product (Higham's gamma) holds without an
 * absolute term. Far below anything a normed vector carries. */
#define INDEX_FLUSH 0x1p-60f

/* pages a superblock, whose box (the sequence's ibox) is bounded first */
#define INDEX_SUPER ENG_MSA_SUPER

static void flush_tiny(float *dst, const float *src, int n)
{
	for (int j = 0; j < n; j++)
		dst[j] = fabsf(src[j]) < INDEX_FLUSH ? 0.0f : src[j];
}

/* A box (max, min of D floats) joined with the box [hi, lo] (a key: the
 * key twice); restart: that box alone */
static void box_join(float *mx, float *mn, const float *hi, const float *lo, int D, bool restart)
{
	for (int j = 0; j < D; j++) {
		mx[j] = restart || hi[j] > mx[j] ? hi[j] : mx[j];
		mn[j] = restart || lo[j] < mn[j] ? lo[j] : mn[j];
	}
}

void eng_index_store(eng_model *m, const eng_row *rows, int n, int layer, const float *ik)
{
	const eng_kv_pool *p = &m->kv;
	int D = p->idim;
	for (int i = 0; i < n; i++) {
		long pos = rows[i].pos;
		eng_page *pg = rows[i].seq->pages[pos / p->block];
		int slot = (int)(pos % p->block);
		float *k = eng_page_ikey(p, pg, layer, slot);
		flush_tiny(k, ik + (size_t)i * D, D);
		float *mx = eng_page_ibox(p, pg, layer);
		box_join(mx, mx + D, k, k, D, slot == 0); /* the page's first slot restarts the box */
		/* and the superblock's box, restarted by its first slot */
		float *sx = rows[i].seq->ibox[layer] + (size_t)(pos / p->block / ENG_MSA_SUPER) * 2 * D;
		box_join(sx, sx + D, k, k, D, pos % ((long)ENG_MSA_SUPER * p->block) == 0);
	}
}

void eng_index_page_boxes(const eng_kv_pool *p, eng_page *pg)
{
	int D = p->idim;
	for (int l = 0; D && pg->ntok > 0 && l < p->layers; l++) {
		float *mx = eng_page_ibox(p, pg, l);
		for (int t = 0; t < pg->ntok; t++) {
			const float *k = eng_page_ikey(p, pg, l, t);
			box_join(mx, mx + D, k, k, D, t == 0);
		}
	}
}

void eng_index_seq_boxes(eng_seq *s)
{
	const eng_kv_pool *p = &s->m->kv;
	int D = p->idim;
	for (int l = 0; D && s->ibox && l < p->layers; l++)
		for (int b = 0; b < s->npages; b++) {
			eng_page *pg = s->pages[b];
			if (pg->ntok <= 0)
				continue;
			const float *px = eng_page_ibox(p, pg, l);
			float *sx = s->ibox[l] + (size_t)(b / ENG_MSA_SUPER) * 2 * D;
			box_join(sx, sx + D, px, px + D, D, b % ENG_MSA_SUPER == 0);
		}
}

/* A block's exact score as every path computes it: the max over the
 * block's keys up to pos of dot(q, key), q already flushed. */
static float block_score(const eng_kv_pool *p, const eng_seq *s, int layer, long b, long pos, const float *qv)
{
	int B = p->block, D = p->idim;
	long t1 = b * B + B - 1 < pos ? b * B + B - 1 : pos;
	if (t1 < b * B)
		return -INFINITY;
	const float *k = eng_page_ikey(p, s->pages[b], layer, 0);
	float best = -INFINITY;
	for (int t = 0; t <= (int)(t1 - b * B); t++) {
		float d = dot(qv, k + (size_t)t * D, D);
		best = d > best ? d : best;
	}
	return best;
}

/* Insertion sort, ascending: the lists are short (at most top-k). */
static void ascending(int *v, int n)
{
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
			int t = v[b];
			v[b] = v[b - 1];
			v[b - 1] = t;
		}
}

/* What a row's choice is made of: `want` blocks in all, the forced (local)
 * ones first (the lowest of them if they outnumber the slots: equal +inf
 * scores, lower block first), then `rest` chosen among blocks 0..last. */
typedef struct {
	int want, nforced, rest;
	long last;
	int forced[64];
} row_plan;

static row_plan plan_row(const eng_model *m, const eng_row *row, int nlist)
{
	const eng_config *c = &m->c;
	long cur = row->pos / m->kv.block;
	row_plan r = {0};
	long want = c->index_topk < cur + 1 ? c->index_topk : cur + 1;
	r.want = (int)(want < nlist ? want : nlist);
	/* forced blocks are cur, cur-1, ... clamped at 0: the run
	 * max(cur - local + 1, 0) .. cur, ascending */
	long f0 = cur - c->index_local + 1 > 0 ? cur - c->index_local + 1 : 0;
	for (long b = f0; b <= cur && c->index_local > 0 && r.nforced < r.want; b++)
		r.forced[r.nforced++] = (int)b;
	r.rest = r.want - r.nforced;
	r.last = c->index_local > 0 ? f0 - 1 : cur;
	return r;
}

int eng_index_select_one(const eng_model *m, const eng_row *row, int layer, const float *qv, int *out, int nlist,
			 float *scores)
{
	const eng_kv_pool *p = &m->kv;
	const eng_config *c = &m->c;
	long pos = row->pos, cur = pos / p->block;
	float *q = malloc((size_t)p->idim * sizeof *q);
	if (!q)
		return -1;
	flush_tiny(q, qv, p->idim);
	for (long b = 0; b <= cur; b++)
		scores[b] = block_score(p, row->seq, layer, b, pos, q);
	free(q);
	for (int j = 0; j < c->index_local; j++) /* the local blocks win their slots */
		scores[cur - j > 0 ? cur - j : 0] = INFINITY;
	long want = c->index_topk < cur + 1 ? c->index_topk : cur + 1;
	want = want < nlist ? want : nlist;
	int k = 0;
	/* take the best `want` (higher score, then lower block) */
	for (; k < want; k++) {
		long pick = -1;
		for (long b = 0; b <= cur; b++)
			if (scores[b] != -INFINITY && (pick < 0 || scores[b] > scores[pick]))
				pick = b;
		if (pick < 0)
			break;
		out[k] = (int)pick;
		scores[pick] = -INFINITY;
	}
	ascending(out, k); /* the attention's fixed order */
	return k;
}

int eng_index_select(eng_backend *be, const eng_row *rows, int n, int layer, const float *iq, int *lists, int *nls,
		     int nlist)
{
	const eng_model *m = be->m;
	int kvh = m->kv.kvh, D = m->kv.idim;
	long longest = 0;
	for (int i = 0; i < n; i++)
		longest = rows[i].pos > longest ? rows[i].pos : longest;
	float *scores = malloc((size_t)(longest / m->kv.block + 1) * sizeof(float));
	if (!scores)
		return ev_error_set(EV_E_NOMEM, "out of memory for the indexer's block scores");
	for (int i = 0; i < n; i++)
		for (int g = 0; g < kvh; g++) {
			int k = eng_index_select_one(m, &rows[i], layer, iq + ((size_t)i * kvh + g) * D,
						     lists + ((size_t)i * kvh + g) * nlist, nlist, scores);
			if (k < 0) {
				free(scores);
				return ev_error_set(EV_E_NOMEM, "out of memory for the indexer's query");
			}
			nls[(size_t)i * kvh + g] = k;
		}
	free(scores);
	return 0;
}

/* ---- the fast path's scan ------------------------------------------------ */

/* (a beats b): higher score, then lower block */
static bool hit_before(float sa, int ba, float sb, int bb)
{
	return sa > sb || (sa == sb && ba < bb);
}

/* Inserts (s, b) into the sorted list h[0..*n) of at most cap hits. */
static void hit_push(eng_index_hit *h, int *n, int cap, float s, int b)
{
	int at = *n;
	while (at > 0 && hit_before(s, b, h[at - 1].score, h[at - 1].block))
		at--;
	if (at >= cap)
		return;
	if (*n < cap)
		(*n)++;
	memmove(h + at + 1, h + at, (size_t)(*n - 1 - at) * sizeof *h);
	h[at] = (eng_index_hit){s, b};
}

/* The box bound of one query against one page: ub = sum_j max(q_j mx_j,
 * q_j mn_j) (as qp . mx + qn . mn, qp = max(q, 0), qn = min(q, 0)) and
 * mag = |q| . max(|mx|, |mn|), both in f32, any order. */
static void box_bound(const float *qp, const float *qn, const float *qa, const float *mx, const float *mn, int D,
		      float *ub, float *mag)
{
	int j = 0;
	float u = 0, g = 0;
#ifdef ENG_AVX2
	__m256 u0 = _mm256_setzero_ps(), u1 = u0, g0 = u0, sign = _mm256_set1_ps(-0.0f);
	for (; j + 8 <= D; j += 8) {
		__m256 hi = _mm256_loadu_ps(mx + j), lo = _mm256_loadu_ps(mn + j);
		u0 = _mm256_fmadd_ps(_mm256_loadu_ps(qp + j), hi, u0);
		u1 = _mm256_fmadd_ps(_mm256_loadu_ps(qn + j), lo, u1);
		__m256 am = _mm256_max_ps(_mm256_andnot_ps(sign, hi), _mm256_andnot_ps(sign, lo));
		g0 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + j), am, g0);
	}
	u = hsum8(_mm256_add_ps(u0, u1));
	g = hsum8(g0);
#endif
	for (; j < D; j++) {
		u += qp[j] * mx[j] + qn[j] * mn[j];
		float am = fabsf(mx[j]) > fabsf(mn[j]) ? fabsf(mx[j]) : fabsf(mn[j]);
		g += qa[j] * am;
	}
	*ub = u;
	*mag = g;
}

/* A query's bound over a box: the box's best dot product plus the
 * rounding margin times the magnitude (f = the flushed query, then its
 * positive, negative and absolute parts). */
static double query_bound(const float *f, const float *mx, const float *mn, int D, double margin)
{
	float bu, mag;
	box_bound(f + D, f + 2 * D, f + 3 * D, mx, mn, D, &bu, &mag);
	return (double)bu + margin * (double)mag;
}

typedef struct {
	const eng_kv_pool *p;
	const eng_seq *s;
	int layer, kvh, D;
	long b0, len;
	double margin;
	const float *qs;
	double *ub; /* [query][block - b0]: NaN not bounded yet, -inf not a candidate, +inf scored */
	const row_plan *pl;
} scan_ctx;

/* Query q's bound on block b, computed once. */
static double page_bound(scan_ctx *c, int q, long b)
{
	double *o = c->ub + (size_t)q * c->len + (b - c->b0);
	if (isnan(*o)) {
		const float *pm = eng_page_ibox(c->p, c->s->pages[b], c->layer);
		*o = b > c->pl[q / c->kvh].last ? -INFINITY
						: query_bound(c->qs + (size_t)q * 4 * c->D, pm, pm + c->D, c->D, c->margin);
	}
	return *o;
}

int eng_index_scan(const eng_model *m, const eng_row *rows, int nr, int layer, const float *iq, long b0, long b1,
		   eng_index_hit *hits, int *nhits, int cap, eng_index_stats *st)
{
	const eng_kv_pool *p = &m->kv;
	int kvh = p->kvh, D = p->idim, nq = nr * kvh;
	const eng_seq *s = rows[0].seq;
	long hi = -1; /* the range's last candidate of any row */
	row_plan pl[ENG_INDEX_TILE];
	for (int r = 0; r < nr; r++) {
		pl[r] = plan_row(m, &rows[r], m->c.index_topk);
		long l = pl[r].last < b1 - 1 ? pl[r].last : b1 - 1;
		hi = l > hi ? l : hi;
	}
	for (int q = 0; q < nq; q++)
		nhits[q] = 0;
	long len = hi - b0 + 1;
	if (len <= 0)
		return 0;
	/* flushed queries and their signed parts */
	/* the range's superblocks: k covers blocks sb_first(k) .. sb_last(k) of
	 * absolute superblock s0 + k (the first and last may be partial) */
	long s0 = b0 / INDEX_SUPER, nsup = hi / INDEX_SUPER - s0 + 1;
#define SB_FIRST(k) ((s0 + (k)) * INDEX_SUPER > b0 ? (s0 + (k)) * INDEX_SUPER : b0)
#define SB_LAST(k) ((s0 + (k)) * INDEX_SUPER + INDEX_SUPER - 1 < hi ? (s0 + (k)) * INDEX_SUPER + INDEX_SUPER - 1 : hi)
	float *qs = malloc((size_t)nq * 4 * D * sizeof(float));
	double *ub = malloc((size_t)nq * len * sizeof(double)), *sub = malloc((size_t)nq * nsup * sizeof(double));
	if (!qs || !ub || !sub) {
		free(qs), free(ub), free(sub);
		return -1;
	}
	for (int q = 0; q < nq; q++) {
		float *f = qs + (size_t)q * 4 * D, *qp = f + D, *qn = qp + D, *qa = qn + D;
		flush_tiny(f, iq + (size_t)q * D, D);
		for (int j = 0; j < D; j++) {
			qp[j] = f[j] > 0 ? f[j] : 0;
			qn[j] = f[j] < 0 ? f[j] : 0;
			qa[j] = fabsf(f[j]);
		}
	}
	/* the bound is the box's best dot plus what rounding may add to an
	 * exact score (gamma_D) and to the bound itself (gamma_2D), both
	 * times the true magnitude, which the computed one underestimates by
	 * at most gamma_D (no subnormal products: INDEX_FLUSH) */
	double u = 0x1p-24, gD = D * u / (1 - D * u), g2D = 2 * D * u / (1 - 2 * D * u);
	double margin = 1.01 * (gD + g2D) / (1 - gD); /* 1% over for the double arithmetic */
	/* superblocks first: the sequence's box of each bounds every block in
	 * it, so a superblock that cannot enter is skipped whole (its pages are
	 * never bounded one by one) */
	for (long k = 0; k < nsup; k++) {
		const float *mx = s->ibox[layer] + (size_t)(s0 + k) * 2 * D;
		for (int q = 0; q < nq; q++)
			sub[(size_t)q * nsup + k] = SB_FIRST(k) > pl[q / kvh].last || pl[q / kvh].rest == 0
							    ? -INFINITY
							    : query_bound(qs + (size_t)q * 4 * D, mx, mx + D, D, margin);
	}
	for (size_t i = 0; i < (size_t)nq * len; i++)
		ub[i] = NAN; /* not bounded yet */
	scan_ctx sc = {p, s, layer, kvh, D, b0, len, margin, qs, ub, pl};
	long cands = 0;
	for (int q = 0; q < nq; q++) {
		long l = pl[q / kvh].rest ? (pl[q / kvh].last < hi ? pl[q / kvh].last : hi) - b0 + 1 : 0;
		cands += l > 0 ? l : 0;
	}
	/* a page's bound, computed once; -inf: not a candidate of the row;
	 * +inf afterwards: scored already */
	/* each query's threshold: the best pages by bound within its best
	 * superblocks, scored exactly */
	for (int q = 0; q < nq; q++) {
		int rest = pl[q / kvh].rest < cap ? pl[q / kvh].rest : cap;
		eng_index_hit *h = hits + (size_t)q * cap, pick[ENG_INDEX_MAX_TOPK];
		double pb[ENG_INDEX_MAX_TOPK];
		int np = 0;
		double *sq = sub + (size_t)q * nsup;
		unsigned char *taken = calloc((size_t)nsup, 1);
		if (!taken) {
			free(qs), free(ub), free(sub);
			return -1;
		}
		for (long visits = 0; visits < nsup; visits++) {
			long best = -1; /* the best superblock not visited yet (lower first on ties) */
			for (long S = 0; S < nsup; S++)
				if (!taken[S] && sq[S] != -INFINITY && (best < 0 || sq[S] > sq[best]))
					best = S;
			/* on until the picks are the best `rest` pages by (bound,
			 * lower block): a superblock that cannot hold a better one ends it */
			if (best < 0 || (np == rest && (sq[best] < pb[rest - 1] ||
							(sq[best] == pb[rest - 1] && SB_FIRST(best) > pick[rest - 1].block))))
				break;
			taken[best] = 1;
			for (long b = SB_FIRST(best); b <= SB_LAST(best); b++) {
				double bu = page_bound(&sc, q, b);
				if (bu == -INFINITY)
					continue;
				int at = np; /* by bound descending, lower block first */
				while (at > 0 && (bu > pb[at - 1] || (bu == pb[at - 1] && b < pick[at - 1].block)))
					at--;
				if (at >= rest)
					continue;
				if (np < rest)
					np++;
				memmove(pick + at + 1, pick + at, (size_t)(np - 1 - at) * sizeof *pick);
				memmove(pb + at + 1, pb + at, (size_t)(np - 1 - at) * sizeof *pb);
				pick[at] = (eng_index_hit){0, (int)b};
				pb[at] = bu;
			}
		}
		free(taken);
		const float *f = qs + (size_t)q * 4 * D;
		for (int i = 0; i < np; i++) {
			hit_push(h, &nhits[q], rest, block_score(p, s, layer, pick[i].block, rows[q / kvh].pos, f),
				 pick[i].block);
			ub[(size_t)q * len + (pick[i].block - b0)] = INFINITY; /* scored */
		}
		if (st)
			st->scored += np;
	}
	/* then every superblock, once for all queries: skipped by a query
	 * whose k-th it cannot beat (or tie from a lower block), else its
	 * pages, each scored where its own bound can still enter */
	for (long S = 0; S < nsup; S++) {
		long first = SB_FIRST(S), e = SB_LAST(S);
		for (long b = first; b <= e; b++)
			for (int q = 0; q < nq; q++) {
				int rest = pl[q / kvh].rest < cap ? pl[q / kvh].rest : cap;
				eng_index_hit *h = hits + (size_t)q * cap;
				double su = sub[(size_t)q * nsup + S];
				if (su == -INFINITY)
					continue;
				if (nhits[q] == rest) {
					double kth = h[rest - 1].score;
					if (su < kth || (su == kth && first > h[rest - 1].block))
						continue;
				}
				double bu = page_bound(&sc, q, b);
				if (bu == -INFINITY || bu == INFINITY)
					continue;
				if (nhits[q] == rest) {
					double kth = h[rest - 1].score;
					if (bu < kth || (bu == kth && b > h[rest - 1].block))
						continue;
				}
				hit_push(h, &nhits[q], rest,
					 block_score(p, s, layer, b, rows[q / kvh].pos, qs + (size_t)q * 4 * D), (int)b);
				ub[(size_t)q * len + (b - b0)] = INFINITY;
				if (st)
					st->scored++;
			}
	}
	if (st)
		st->candidates += cands;
#undef SB_FIRST
#undef SB_LAST
	free(qs), free(ub), free(sub);
	return 0;
}

int eng_index_compose(const eng_model *m, const eng_row *row, const eng_index_hit *const *parts, const int *nparts,
		      int nparts_n, int *out, int nlist)
{
	row_plan pl = plan_row(m, row, nlist);
	int k = 0;
	for (int f = 0; f < pl.nforced; f++)
		out[k++] = pl.forced[f];
	/* merge the parts' sorted lists under the same order */
	int at[64] = {0};
	for (int t = 0; t < pl.rest; t++) {
		int best = -1;
		for (int i = 0; i < nparts_n; i++)
			if (at[i] < nparts[i] &&
			    (best < 0 || hit_before(parts[i][at[i]].score, parts[i][at[i]].block, parts[best][at[best]].score,
						    parts[best][at[best]].block)))
				best = i;
		if (best < 0)
			break;
		out[k++] = parts[best][at[best]++].block;
	}
	ascending(out, k);
	return k;
}
