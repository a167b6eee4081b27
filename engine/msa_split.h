/*
 * engine/msa_split.h: the host-side plan of a split-K flash decode, the
 * plain C that a GPU decode kernel (issue: engine/cuda) follows and that is
 * tested here on the CPU against direct attention.
 *
 * One decode row and KV head attend a list of blocks (MSA's chosen ones,
 * or every block for dense attention). The list is cut into partitions of
 * consecutive list entries, each attended on its own (its own running max,
 * sum and weighted values: the online softmax of engine/cpu/attention.c),
 * then the partial states are merged in ascending partition order by
 * log-sum-exp. The plan is deterministic: the same list and limits give
 * the same partitions, and the merge order is fixed, so a GPU result is
 * reproducible run to run.
 */
#ifndef ENG_MSA_SPLIT_H
#define ENG_MSA_SPLIT_H

#include <stddef.h>

typedef struct {
	int first; /* index into the block list */
	int count; /* blocks, >= 1 */
} eng_split_part;

/* Cuts n_blocks list entries into at most max_parts partitions of at
 * least min_blocks each (the last may be what is left when n_blocks is
 * smaller), sizes differing by at most one, larger ones first. Returns the
 * number of partitions written to out (room for max_parts); 0 when
 * n_blocks is 0 or the limits are not positive. */
int eng_split_plan(int n_blocks, int max_parts, int min_blocks, eng_split_part *out);

/* A partial softmax state for `group` query heads of size hd: running max
 * m[h], sum of exp(score - m) l[h], and acc[h * hd + d] the weighted values
 * (not yet divided by l). m = -INFINITY and l = 0 for an empty state. */
typedef struct {
	float *m, *l, *acc;
} eng_split_state;

/* into = into (+) part: the log-sum-exp merge of two partial states. */
void eng_split_merge(eng_split_state *into, const eng_split_state *part, int group, int hd);

/* The attention output of a final state: acc / l per head (0 where l is 0). */
void eng_split_finish(float *out, const eng_split_state *s, int group, int hd);

#endif
