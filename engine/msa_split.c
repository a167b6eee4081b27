/*
 * engine/msa_split.c: the split-K decode plan and its log-sum-exp merge
 * (msa_split.h).
 */
#include "engine/msa_split.h"

#include <math.h>
#include <string.h>

int eng_split_plan(int n_blocks, int max_parts, int min_blocks, eng_split_part *out)
{
	if (n_blocks <= 0 || max_parts <= 0 || min_blocks <= 0)
		return 0;
	int parts = n_blocks / min_blocks;
	if (parts < 1)
		parts = 1;
	if (parts > max_parts)
		parts = max_parts;
	int base = n_blocks / parts, extra = n_blocks % parts, at = 0;
	for (int p = 0; p < parts; p++) {
		int c = base + (p < extra);
		out[p] = (eng_split_part){at, c};
		at += c;
	}
	return parts;
}

void eng_split_merge(eng_split_state *into, const eng_split_state *part, int group, int hd)
{
	for (int h = 0; h < group; h++) {
		float ma = into->m[h], mb = part->m[h];
		if (mb == -INFINITY)
			continue; /* nothing attended in the part */
		float m = ma > mb ? ma : mb;
		float ca = ma == -INFINITY ? 0.0f : expf(ma - m), cb = expf(mb - m);
		into->l[h] = into->l[h] * ca + part->l[h] * cb;
		float *a = into->acc + (size_t)h * hd;
		const float *b = part->acc + (size_t)h * hd;
		for (int d = 0; d < hd; d++)
			a[d] = a[d] * ca + b[d] * cb;
		into->m[h] = m;
	}
}

void eng_split_finish(float *out, const eng_split_state *s, int group, int hd)
{
	for (int h = 0; h < group; h++) {
		float inv = s->l[h] > 0 ? 1.0f / s->l[h] : 0.0f;
		for (int d = 0; d < hd; d++)
			out[(size_t)h * hd + d] = s->acc[(size_t)h * hd + d] * inv;
	}
}

int eng_split_worklist(const int *n_blocks, int rows, int kv_heads, int target, int min_blocks, eng_split_item *out,
                       int cap)
{
	int tasks = rows * kv_heads, n = 0;
	if (tasks <= 0 || min_blocks <= 0)
		return 0;
	/* partitions a task: enough for `target` items over all tasks, at
	 * most 64 (one task's merge stays short) */
	int per = target > tasks ? (target + tasks - 1) / tasks : 1;
	if (per > 64)
		per = 64;
	eng_split_part parts[64];
	for (int r = 0; r < rows; r++)
		for (int g = 0; g < kv_heads; g++) {
			int k = eng_split_plan(n_blocks[r * kv_heads + g], per, min_blocks, parts);
			for (int p = 0; p < k; p++) {
				if (n == cap)
					return -1;
				out[n] = (eng_split_item){r, g, parts[p].first, parts[p].count, n};
				n++;
			}
		}
	return n;
}
