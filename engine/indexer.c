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
 * index_head_dim a position and layer; eng_page_ikey). This is the plain
 * definition, used by every path: O(context x index_head_dim) a query.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

void eng_index_store(eng_model *m, const eng_row *rows, int n, int layer, const float *ik)
{
	const eng_kv_pool *p = &m->kv;
	int D = p->idim;
	for (int i = 0; i < n; i++) {
		long pos = rows[i].pos;
		eng_page *pg = rows[i].seq->pages[pos / p->block];
		int slot = (int)(pos % p->block);
		const float *k = ik + (size_t)i * D;
		memcpy(eng_page_ikey(p, pg, layer, slot), k, (size_t)D * sizeof(float));
		float *mx = eng_page_ibox(p, pg, layer), *mn = mx + D;
		for (int j = 0; j < D; j++) { /* the page's first slot restarts the box */
			mx[j] = slot == 0 || k[j] > mx[j] ? k[j] : mx[j];
			mn[j] = slot == 0 || k[j] < mn[j] ? k[j] : mn[j];
		}
	}
}

/* A block's exact score as the definition computes it. */
static float block_score(const eng_kv_pool *p, const eng_seq *s, int layer, long b, long pos, const float *qv)
{
	int B = p->block, D = p->idim;
	float best = -INFINITY;
	long t1 = b * B + B - 1 < pos ? b * B + B - 1 : pos;
	for (long t = b * B; t <= t1; t++) {
		const float *kv = eng_page_ikey(p, s->pages[t / B], layer, (int)(t % B));
		float d = 0;
		for (int j = 0; j < D; j++)
			d += qv[j] * kv[j];
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

/* qsort by bound, descending (ties: lower block first) */
typedef struct {
	double ub;
	long b;
} cand;

static int by_bound(const void *x, const void *y)
{
	const cand *a = x, *c = y;
	if (a->ub != c->ub)
		return a->ub > c->ub ? -1 : 1;
	return a->b < c->b ? -1 : a->b > c->b;
}

int eng_index_select_bound(const eng_model *m, const eng_row *row, int layer, const float *qv, int *out, int nlist,
			   float *scratch)
{
	const eng_kv_pool *p = &m->kv;
	const eng_config *c = &m->c;
	int B = p->block, D = p->idim;
	const eng_seq *s = row->seq;
	long pos = row->pos, cur = pos / B;
	long want = c->index_topk < cur + 1 ? c->index_topk : cur + 1;
	want = want < nlist ? want : nlist;
	/* the forced (local) blocks first, as the definition's +inf scores */
	int k = 0;
	long forced[64];
	int nf = 0;
	for (int j = 0; j < c->index_local && nf < 64; j++) {
		long b = cur - j > 0 ? cur - j : 0;
		bool dup = false;
		for (int f = 0; f < nf; f++)
			dup |= forced[f] == b;
		if (!dup)
			forced[nf++] = b;
	}
	/* the definition takes the lowest forced blocks first when there are
	 * more of them than slots (equal +inf scores, lower block first) */
	for (int a = 1; a < nf; a++)
		for (int b2 = a; b2 > 0 && forced[b2 - 1] > forced[b2]; b2--) {
			long t = forced[b2];
			forced[b2] = forced[b2 - 1];
			forced[b2 - 1] = t;
		}
	for (int f = 0; f < nf && k < want; f++)
		out[k++] = (int)forced[f];
	long rest = want - k;
	if (rest > 0) {
		/* bounds of every other block: box . q plus the exact dot's rounding */
		cand *cs = (cand *)scratch;
		long nc = 0;
		double gamma = (double)D * 0x1p-24 / (1 - (double)D * 0x1p-24);
		for (long b = 0; b <= cur; b++) {
			bool isf = false;
			for (int f = 0; f < nf; f++)
				isf |= forced[f] == b;
			if (isf)
				continue;
			const float *mx = eng_page_ibox(p, s->pages[b], layer), *mn = mx + D;
			double ub = 0, mag = 0;
			for (int j = 0; j < D; j++) {
				double q = qv[j], hi = q * mx[j], lo = q * mn[j];
				ub += hi > lo ? hi : lo;
				double am = fabs(mx[j]) > fabs(mn[j]) ? fabs(mx[j]) : fabs(mn[j]);
				mag += fabs(q) * am;
			}
			cs[nc++] = (cand){ub + 2 * gamma * mag + 1e-30, b};
		}
		qsort(cs, (size_t)nc, sizeof *cs, by_bound);
		/* the best `rest` exact scores (higher score, then lower block) */
		float top[ENG_INDEX_MAX_TOPK];
		int topb[ENG_INDEX_MAX_TOPK], nt = 0;
		for (long i = 0; i < nc; i++) {
			if (nt == rest && cs[i].ub < (double)top[nt - 1])
				break; /* no block left can enter */
			float sc = block_score(p, s, layer, cs[i].b, pos, qv);
			int at = nt;
			while (at > 0 && (sc > top[at - 1] || (sc == top[at - 1] && cs[i].b < topb[at - 1])))
				at--;
			if (at >= rest)
				continue;
			if (nt < rest)
				nt++;
			for (int t = nt - 1; t > at; t--) {
				top[t] = top[t - 1];
				topb[t] = topb[t - 1];
			}
			top[at] = sc;
			topb[at] = (int)cs[i].b;
		}
		for (int t = 0; t < nt; t++)
			out[k++] = topb[t];
	}
	ascending(out, k);
	return k;
}

int eng_index_select_one(const eng_model *m, const eng_row *row, int layer, const float *qv, int *out, int nlist,
			 float *scores)
{
	const eng_kv_pool *p = &m->kv;
	const eng_config *c = &m->c;
	long pos = row->pos, cur = pos / p->block;
	for (long b = 0; b <= cur; b++)
		scores[b] = block_score(p, row->seq, layer, b, pos, qv);
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
		for (int g = 0; g < kvh; g++)
			nls[(size_t)i * kvh + g] = eng_index_select_one(m, &rows[i], layer, iq + ((size_t)i * kvh + g) * D,
								      lists + ((size_t)i * kvh + g) * nlist, nlist, scores);
	free(scores);
	return 0;
}
