/*
 * engine/attn_plan.c: which blocks each (row, KV head) of an attention op
 * reads, as lists a device kernel can follow (contract in backend.h). The
 * choice is the CPU's: dense blocks from the window's start, the
 * indexer's lists as given, MSA's block-mean choice by the same function
 * the fast CPU path calls.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

/* EV_GROW (base/vec.h), out of memory named */
#define PLAN_GROW(ptr, cap, need)                                                                              \
	(EV_GROW(ptr, cap, (size_t)(need))                                                                     \
		 ? ev_error_set(EV_E_NOMEM, "out of memory for an attention plan (%zu entries)", (size_t)(need)) \
		 : 0)

/* A row takes the block-mean choice where it is sparse and has no list
 * from the indexer (nls < 0: none for that head). */
static bool row_uses_mean(const eng_model *m, const eng_row *r, int i, int layer, const int *lists, const int *nls)
{
	if (lists) {
		for (int g = 0; g < m->kv.kvh; g++)
			if (nls[(size_t)i * m->kv.kvh + g] < 0 && eng_msa_sparse(m, layer, r->pos))
				return true;
		return false;
	}
	return eng_msa_sparse(m, layer, r->pos);
}

bool eng_attn_plan_needs_q(const eng_model *m, const eng_row *rows, int n, int layer, const int *lists, const int *nls)
{
	for (int i = 0; i < n; i++)
		if (row_uses_mean(m, &rows[i], i, layer, lists, nls))
			return true;
	return false;
}

int eng_attn_plan_build(eng_attn_plan *pl, eng_model *m, const eng_row *rows, int n, int layer, long window,
			const int *lists, const int *nls, int nlist, const float *q, int nh)
{
	eng_kv_pool *p = &m->kv;
	int kvh = p->kvh, B = p->block, hd = p->hd;
	int K = m->msa.top_k > 0 ? m->msa.top_k : 1;
	int room = m->msa.sink + m->msa.local + K + 1;
	int rc;
	if ((rc = PLAN_GROW(pl->lo, pl->lo_cap, n)) ||
	    (rc = PLAN_GROW(pl->off, pl->off_cap, (long)n * kvh + 1)) ||
	    (rc = PLAN_GROW(pl->cnt, pl->cnt_cap, (long)n * kvh)) ||
	    (rc = PLAN_GROW(pl->first, pl->first_cap, (long)n * kvh)) ||
	    (rc = PLAN_GROW(pl->sel, pl->sel_cap, room)))
		return rc;
	if (!pl->qsum && (!(pl->qsum = malloc((size_t)hd * sizeof(float))) ||
			  !(pl->top = malloc((size_t)K * sizeof(float))) || !(pl->topi = malloc((size_t)K * sizeof(int)))))
		return ev_error_set(EV_E_NOMEM, "out of memory for an attention plan");
	pl->n = n;
	pl->kvh = kvh;
	long at = 0;
	for (int i = 0; i < n; i++) {
		long pos = rows[i].pos, lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
		long cur = pos / B;
		pl->lo[i] = lo;
		for (int g = 0; g < kvh; g++) {
			size_t task = (size_t)i * kvh + g;
			const int *src = NULL;
			long cnt;
			int nb = lists ? nls[task] : -1;
			if (nb >= 0) {
				src = lists + task * (size_t)nlist;
				cnt = nb;
			} else if (eng_msa_sparse(m, layer, pos)) {
				if (!q)
					return ev_error_set(EV_E_INVALID, "attention plan: MSA's choice needs the queries");
				cnt = eng_msa_select_fast(m, rows[i].seq, layer, pos, g, q + (size_t)i * nh * hd, pl->sel,
							  pl->qsum, pl->top, pl->topi);
				src = pl->sel;
			} else {
				cnt = cur + 1 - lo / B;
			}
			pl->off[task] = (int)at;
			pl->cnt[task] = (int)cnt;
			pl->first[task] = src ? -1 : (int)(lo / B);
			if (!src)
				continue; /* a range: nothing stored */
			if ((rc = PLAN_GROW(pl->blocks, pl->blocks_cap, at + cnt)))
				return rc;
			memcpy(pl->blocks + at, src, (size_t)cnt * sizeof(int));
			at += cnt;
		}
	}
	pl->off[(size_t)n * kvh] = (int)at;
	return 0;
}

int eng_attn_plan_split(eng_attn_plan *pl, int part_blocks)
{
	long tasks = (long)pl->n * pl->kvh, longest = 1;
	int rc;
	if (part_blocks < 1)
		return ev_error_set(EV_E_INVALID, "attention plan: parts of %d blocks", part_blocks);
	for (long t = 0; t < tasks; t++)
		longest = pl->cnt[t] > longest ? pl->cnt[t] : longest;
	if ((rc = PLAN_GROW(pl->ifirst, pl->ifirst_cap, tasks)) ||
	    (rc = PLAN_GROW(pl->icount, pl->icount_cap, tasks)) ||
	    (rc = PLAN_GROW(pl->parts, pl->parts_cap, longest)))
		return rc;
	int n = 0;
	for (long t = 0; t < tasks; t++) {
		int nb = pl->cnt[t];
		int k = eng_split_plan(nb, nb > 0 ? nb : 1, part_blocks, pl->parts);
		if ((rc = PLAN_GROW(pl->items, pl->items_cap, (long)n + k)))
			return rc;
		pl->ifirst[t] = n;
		pl->icount[t] = k;
		for (int p = 0; p < k; p++, n++)
			pl->items[n] = (eng_split_item){(int)(t / pl->kvh), (int)(t % pl->kvh), pl->parts[p].first,
							pl->parts[p].count, n};
	}
	pl->nitems = n;
	return 0;
}

void eng_attn_plan_free(eng_attn_plan *pl)
{
	if (!pl)
		return;
	free(pl->lo), free(pl->off), free(pl->blocks), free(pl->cnt), free(pl->first), free(pl->qsum), free(pl->top), free(pl->topi), free(pl->sel);
	free(pl->items), free(pl->ifirst), free(pl->icount), free(pl->parts);
	memset(pl, 0, sizeof(*pl));
}
