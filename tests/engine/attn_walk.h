/*
 * The walk a device attention kernel makes over a split plan, in plain C
 * over the host's pages (engine/attn_plan.c, engine/msa_split.h): each
 * work item attends its part of a (row, KV head)'s block list, positions
 * in [lo, pos] only, for every query head of the group with an online
 * softmax (running max, sum, weighted values); the parts of a (row, KV
 * head) are then merged in item order by log-sum-exp and finished. Tests
 * hold it against the reference attention op (test_attn_plan.c) and use it
 * as the host stand-in of the CUDA kernel (test_cuda_backend_host.c).
 * `page(ctx, row, block)` gives the bytes of the page holding the block.
 */
#ifndef ATTN_WALK_H
#define ATTN_WALK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

typedef const unsigned char *(*walk_page_fn)(void *ctx, int row, long block);

/* element j of an f32, f16 or bf16 array */
static inline float walk_elem(const void *p, int dtype, size_t j)
{
	return dtype == ENG_F32    ? ((const float *)p)[j]
	       : dtype == ENG_BF16 ? eng_bf16_to_f32(((const uint16_t *)p)[j])
	                           : eng_f16_to_f32(((const uint16_t *)p)[j]);
}

/* out[n, nh, hd] for q[n, nh, hd] */
static inline void attn_walk(float *out, const float *q, int n, int nh, int kvh, int hd, int dtype, size_t kbase,
			     size_t vbase, int block, const long *pos, const long *lo, const eng_attn_plan *pl,
			     const eng_split_item *items, const int *ifirst, const int *icount, float scale,
			     walk_page_fn page, void *ctx)
{
	int group = nh / kvh;
	size_t es = eng_dtype_size((eng_dtype)dtype), rowb = (size_t)kvh * hd * es;
	float *m = malloc(2 * (size_t)group * sizeof(float)), *l = malloc(2 * (size_t)group * sizeof(float));
	float *acc = malloc(2 * (size_t)group * hd * sizeof(float));
	for (int i = 0; i < n; i++)
		for (int g = 0; g < kvh; g++) {
			size_t task = (size_t)i * kvh + g;
			eng_split_state all = {m, l, acc}, part = {m + group, l + group, acc + (size_t)group * hd};
			for (int h = 0; h < group; h++)
				all.m[h] = -INFINITY, all.l[h] = 0;
			memset(all.acc, 0, (size_t)group * hd * sizeof(float));
			for (int it = ifirst[task]; it < ifirst[task] + icount[task]; it++) {
				const eng_split_item *e = &items[it];
				for (int h = 0; h < group; h++) {
					const float *qh = q + ((size_t)i * nh + g * group + h) * hd;
					float mx = -INFINITY, sum = 0, *a = part.acc + (size_t)h * hd;
					memset(a, 0, (size_t)hd * sizeof(float));
					for (int k = e->first; k < e->first + e->count; k++) {
						long b = eng_attn_plan_block(pl, (long)task, k), t0 = b * block > lo[i] ? b * block : lo[i];
						long t1 = b * block + block - 1 < pos[i] ? b * block + block - 1 : pos[i];
						const unsigned char *pg = page(ctx, i, b);
						for (long t = t0; t <= t1; t++) {
							const unsigned char *kp = pg + kbase + (size_t)(t - b * block) * rowb + (size_t)g * hd * es;
							const unsigned char *vp = pg + vbase + (size_t)(t - b * block) * rowb + (size_t)g * hd * es;
							float d = 0;
							for (int j = 0; j < hd; j++)
								d += qh[j] * walk_elem(kp, dtype, j);
							float s = d * scale, nm = s > mx ? s : mx, corr = expf(mx - nm), w = expf(s - nm);
							sum = sum * corr + w;
							for (int j = 0; j < hd; j++)
								a[j] = a[j] * corr + w * walk_elem(vp, dtype, j);
							mx = nm;
						}
					}
					part.m[h] = mx;
					part.l[h] = sum;
				}
				eng_split_merge(&all, &part, group, hd);
			}
			eng_split_finish(out + ((size_t)i * nh + (size_t)g * group) * hd, &all, group, hd);
		}
	free(m), free(l), free(acc);
}

#endif
