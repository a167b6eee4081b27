/*
 * engine/msa_index.h: the MSA index search's pieces that its callers (the
 * decode search in msa_index.c, the prefill tiles in cpu/attention.c)
 * share. Internal to the engine.
 */
#ifndef ENG_MSA_INDEX_H
#define ENG_MSA_INDEX_H

#include "engine/backend.h"
#include "engine/cpu/kernels.h"

/* sum over the group's query heads of q (the query side of a block score). */
void eng_msa_group_qsum(float *qsum, const float *q, int g, int group, int hd);
/* The attended blocks ascending: sinks, the selected (sorted in place), the
 * local window. Returns how many. */
int eng_msa_compose_list(const eng_msa *a, long cur, int *topi, int nt, int *blocks);
/* One layer's index of a sequence. */
eng_msa_index eng_msa_seq_index(const eng_seq *s, int layer);

/* Offers block b with score sc to the running top-k (descending; blocks
 * come in ascending order, so an equal score keeps the lower block). */
static inline void eng_msa_topk_push(float *top, int *topi, int *nt, int K, float sc, int b)
{
	if (*nt == K && !(sc > top[K - 1]))
		return;
	int i = *nt < K ? (*nt)++ : K - 1;
	while (i > 0 && top[i - 1] < sc) {
		top[i] = top[i - 1];
		topi[i] = topi[i - 1];
		i--;
	}
	top[i] = sc;
	topi[i] = b;
}

/* The index scores q . ksum of up to four consecutive blocks b.. (not past
 * `last`) of KV head g, four at a time because the horizontal sums are
 * what a block costs otherwise. Each score is computed the same way
 * whatever its place in the four (dot4's lanes are independent), so
 * prefill tiles and decode pick the same blocks. Returns how many. */
static inline int eng_msa_block_scores4(float sc[4], const float *q, const float *kidx, long b, long last, int kvh, int g, int hd)
{
	int nb = last - b + 1 < 4 ? (int)(last - b + 1) : 4;
	const float *k[4];
	for (int t = 0; t < 4; t++)
		k[t] = kidx + ((size_t)(b + (t < nb ? t : 0)) * (size_t)kvh + (size_t)g) * (size_t)hd;
	dot4(sc, q, k[0], k[1], k[2], k[3], hd);
	return nb;
}

#endif
