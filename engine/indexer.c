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
	for (int i = 0; i < n; i++) {
		long pos = rows[i].pos;
		memcpy(eng_page_ikey(p, rows[i].seq->pages[pos / p->block], layer, (int)(pos % p->block)),
		       ik + (size_t)i * p->idim, (size_t)p->idim * sizeof(float));
	}
}

int eng_index_select_one(const eng_model *m, const eng_row *row, int layer, int g, const float *qv, int *out,
			 int nlist, float *scores)
{
	const eng_kv_pool *p = &m->kv;
	const eng_config *c = &m->c;
	int B = p->block, D = p->idim;
	const eng_seq *s = row->seq;
	long pos = row->pos, cur = pos / B;
	(void)g;
	for (long b = 0; b <= cur; b++) {
		float best = -INFINITY;
		long t1 = b * B + B - 1 < pos ? b * B + B - 1 : pos;
		for (long t = b * B; t <= t1; t++) {
			const float *kv = eng_page_ikey(p, s->pages[t / B], layer, (int)(t % B));
			float d = 0;
			for (int j = 0; j < D; j++)
				d += qv[j] * kv[j];
			best = d > best ? d : best;
		}
		scores[b] = best;
	}
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
	/* ascending, for the attention's fixed order */
	for (int a = 1; a < k; a++)
		for (int b2 = a; b2 > 0 && out[b2 - 1] > out[b2]; b2--) {
			int t = out[b2];
			out[b2] = out[b2 - 1];
			out[b2 - 1] = t;
		}
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
			nls[(size_t)i * kvh + g] = eng_index_select_one(m, &rows[i], layer, g, iq + ((size_t)i * kvh + g) * D,
								      lists + ((size_t)i * kvh + g) * nlist, nlist, scores);
	free(scores);
	return 0;
}
