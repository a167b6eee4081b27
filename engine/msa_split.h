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

/* ---- a decode batch's work list ---------------------------------------------- */

/* One unit of GPU work: a partition of one (row, KV head)'s block list. */
typedef struct {
	int row, kv_head;
	int first, count; /* into that (row, KV head)'s block list */
	int slot;         /* where its partial state goes (unique, dense from 0) */
} eng_split_item;

/* The work of a decode batch: rows x KV heads block lists (lengths
 * n_blocks[row * kv_heads + g]) split so that there are about `target`
 * items in all (the device's parallel units: few rows split more, many
 * rows not at all), each partition at least min_blocks. Items come row by
 * row, KV head by KV head, partitions in list order, so the merge of a
 * (row, KV head) is its items in order. Returns the number of items (at
 * most cap; EV-style -1 when cap is too small). */
int eng_split_worklist(const int *n_blocks, int rows, int kv_heads, int target, int min_blocks, eng_split_item *out,
                       int cap);

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
