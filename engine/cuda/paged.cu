// engine/cuda/paged.cu: what the CUDA backend (engine/cuda/backend.c) needs
// beside the ops of ops.cu: row gather, bias rows, the KV and index-key
// stores into device pages, and attention over the paged KV cache following a
// host-built plan (engine/attn_plan.c). Contracts in engine/cuda/cuda.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "base/base.h"
#include "engine/cuda/cuda.h"
#include "engine/msa_split.h"
}

#include "engine/cuda/cuda_int.h"

#define ATT_MAX_HD 256
#define ATT_WARPS 16
#define ATT_PER_LANE (ATT_MAX_HD / 32)

// ---- gather and bias ----------------------------------------------------------

__global__ void gather_kernel(float *dst, const float *src, const int *idx, int n, int width)
{
	size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (size_t)n * width)
		return;
	size_t i = k / width, j = k % width;
	dst[k] = src[(size_t)idx[i] * width + j];
}

extern "C" int eng_cuda_gather(float *d_dst, const float *d_src, const int *idx, int n, int width)
{
	if (n < 1 || width < 1)
		return n == 0 ? 0 : ev_error_set(EV_E_INVALID, "cuda gather: n %d, width %d", n, width);
	int *d_idx = (int *)eng_cuda_scratch(3, (size_t)n * sizeof(int));
	if (!d_idx)
		return ev_error_set(EV_E_NOMEM, "cuda gather: out of device memory");
	int rc = eng_cuda_upload(d_idx, idx, (size_t)n * sizeof(int));
	if (rc)
		return rc;
	size_t total = (size_t)n * width;
	gather_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_dst, d_src, d_idx, n, width);
	return launch_ok("gather");
}

__global__ void bias_kernel(float *y, const float *b, int n, int width)
{
	size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (k < (size_t)n * width)
		y[k] += b[k % width];
}

extern "C" int eng_cuda_add_bias(float *d_y, const float *d_b, int n, int width)
{
	if (n < 1 || width < 1)
		return 0;
	size_t total = (size_t)n * width;
	bias_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_y, d_b, n, width);
	return launch_ok("bias");
}

// y[rows[j], :] += a[j] * x[j, :], a thread an element (as axpy_kernel
// computes each one)
__global__ void axpy_rows_kernel(float *y, const float *x, const int *rows, const float *a, int n, int width)
{
	size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (size_t)n * width)
		return;
	size_t j = k / width, c = k % width;
	y[(size_t)rows[j] * width + c] += a[j] * x[k];
}

extern "C" int eng_cuda_axpy_rows(float *d_y, const float *d_x, const int *rows, const float *a, int n, int width)
{
	if (n < 1 || width < 1)
		return 0;
	unsigned char *d = (unsigned char *)eng_cuda_scratch(3, (size_t)n * (sizeof(int) + sizeof(float)));
	if (!d)
		return ev_error_set(EV_E_NOMEM, "cuda axpy_rows: out of device memory");
	int rc = eng_cuda_upload(d, rows, (size_t)n * sizeof(int));
	if (!rc)
		rc = eng_cuda_upload(d + (size_t)n * sizeof(int), a, (size_t)n * sizeof(float));
	if (rc)
		return rc;
	size_t total = (size_t)n * width;
	axpy_rows_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_y, d_x, (const int *)d,
	                                                           (const float *)(d + (size_t)n * sizeof(int)), n, width);
	return launch_ok("axpy_rows");
}

// ---- the KV store -------------------------------------------------------------

// A block a page (group g): its rows rows[goff[g] .. goff[g + 1]) in the
// batch's order, each row's key and value converted and stored in its
// slot, the stored key added to the page's sum (a thread a channel, the
// sum kept in a register between rows: the host's order of additions).
__global__ void kv_store_kernel(unsigned char *const *page, const int *goff, const int *rows, const int *slot,
                                const float *k, const float *v, int kd, int dtype, size_t kbase, size_t vbase,
                                size_t sbase)
{
	unsigned char *pg = page[blockIdx.x];
	int r0 = goff[blockIdx.x], r1 = goff[blockIdx.x + 1];
	float *sum = (float *)(pg + sbase);
	for (int j = threadIdx.x; j < kd; j += blockDim.x) {
		float acc = sum[j];
		for (int r = r0; r < r1; r++) {
			int i = rows[r];
			size_t at = (size_t)slot[i] * kd + j;
			float kx = k[(size_t)i * kd + j], vx = v[(size_t)i * kd + j];
			if (dtype == DT_F32) {
				((float *)(pg + kbase))[at] = kx;
				((float *)(pg + vbase))[at] = vx;
				acc += kx;
			} else {
				uint16_t kq = dtype == DT_BF16 ? f32_to_bf16_bits(kx) : f32_to_f16_bits(kx);
				uint16_t vq = dtype == DT_BF16 ? f32_to_bf16_bits(vx) : f32_to_f16_bits(vx);
				((uint16_t *)(pg + kbase))[at] = kq;
				((uint16_t *)(pg + vbase))[at] = vq;
				acc += dtype == DT_BF16 ? bf16_to_f32(kq) : f16_to_f32(kq);
			}
		}
		sum[j] = acc;
	}
}

extern "C" int eng_cuda_kv_store(void *const *page, const int *slot, int n, const float *d_k, const float *d_v, int kd,
                                 int dtype, size_t kbase, size_t vbase, size_t sbase)
{
	if (n < 1)
		return 0;
	if (kd < 1 || (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16))
		return ev_error_set(EV_E_INVALID, "cuda kv store: %d channels of dtype %d", kd, dtype);
	// the rows grouped by page, each group in the rows' order
	size_t o_goff = align16((size_t)n * sizeof(void *)), o_rows = align16(o_goff + (size_t)(n + 1) * sizeof(int)),
	       o_slot = align16(o_rows + (size_t)n * sizeof(int)), total = o_slot + (size_t)n * sizeof(int);
	unsigned char *h = (unsigned char *)calloc(1, total); // padding zeroed: tables compare whole
	int *gof = (int *)malloc((size_t)n * sizeof(int)); // a row's group
	if (!h || !gof) {
		free(h), free(gof);
		return ev_error_set(EV_E_NOMEM, "cuda kv store: out of memory for its table of %d rows", n);
	}
	void **gp = (void **)h;
	int *goff = (int *)(h + o_goff), *grows = (int *)(h + o_rows), G = 0;
	for (int i = 0; i < n; i++) {
		int g = 0;
		while (g < G && gp[g] != page[i])
			g++;
		if (g == G)
			gp[G++] = page[i];
		gof[i] = g;
	}
	memset(goff, 0, (size_t)(G + 1) * sizeof(int)); // counts, then offsets
	for (int i = 0; i < n; i++)
		goff[gof[i] + 1]++;
	for (int g = 0; g < G; g++)
		goff[g + 1] += goff[g];
	int *fill = (int *)calloc((size_t)G, sizeof(int));
	if (!fill) {
		free(h), free(gof);
		return ev_error_set(EV_E_NOMEM, "cuda kv store: out of memory");
	}
	for (int i = 0; i < n; i++)
		grows[goff[gof[i]] + fill[gof[i]]++] = i;
	memcpy(h + o_slot, slot, (size_t)n * sizeof(int));
	free(fill), free(gof);
	int rc;
	unsigned char *d = (unsigned char *)eng_cuda_scratch_upload(8, h, total, &rc); // a step's layers: the same table
	free(h);
	if (!d)
		return rc;
	kv_store_kernel<<<(unsigned)G, 128>>>((unsigned char *const *)d, (const int *)(d + o_goff),
	                                      (const int *)(d + o_rows), (const int *)(d + o_slot), d_k, d_v, kd, dtype,
	                                      kbase, vbase, sbase);
	return launch_ok("kv store");
}

// ---- index keys ------------------------------------------------------------------

// A block a row: its index key flushed into its page's slot.
__global__ void index_store_kernel(unsigned char *const *page, const int *slot, const float *ik, int idim, size_t ik_off)
{
	int i = blockIdx.x;
	float *dst = (float *)(page[i] + ik_off) + (size_t)slot[i] * idim;
	for (int j = threadIdx.x; j < idim; j += blockDim.x) {
		float x = ik[(size_t)i * idim + j];
		dst[j] = fabsf(x) < 0x1p-60f ? 0.0f : x;
	}
}

extern "C" int eng_cuda_index_store(void *const *page, const int *slot, int n, const float *d_ik, int idim,
                                    size_t ik_off)
{
	if (n < 1)
		return 0;
	if (idim < 1 || n > 65535)
		return ev_error_set(EV_E_INVALID, "cuda index store: %d rows of %d", n, idim);
	size_t o_slot = align16((size_t)n * sizeof(void *)), total = o_slot + (size_t)n * sizeof(int);
	unsigned char *h = (unsigned char *)calloc(1, total);
	if (!h)
		return ev_error_set(EV_E_NOMEM, "cuda index store: out of memory");
	memcpy(h, page, (size_t)n * sizeof(void *));
	memcpy(h + o_slot, slot, (size_t)n * sizeof(int));
	int rc;
	unsigned char *d = (unsigned char *)eng_cuda_scratch_upload(11, h, total, &rc); // a step's layers: one table
	free(h);
	if (!d)
		return rc;
	index_store_kernel<<<(unsigned)n, 128>>>((unsigned char *const *)d, (const int *)(d + o_slot), d_ik, idim, ik_off);
	return launch_ok("index store");
}

// ---- attention over pages -------------------------------------------------------


// One work item (a part of one (row, KV head)'s block list, engine/
// attn_plan.c): a warp a query head of the group, each position of the
// part's blocks in [lo, pos] scored (the warp's sum of q . k, times the
// scale) and folded into an online softmax (running max, sum, weighted
// values rescaled as the max grows); the partial state goes to the item's
// slot. A lane holds head channels lane, lane + 32, ... At most ATT_WARPS
// warps a block, each taking heads warp, warp + ATT_WARPS, ... of the group
// (the launch bounds hold registers to what that many threads may have;
// the spill check keeps it honest).
__global__ void __launch_bounds__(ATT_WARPS * 32, 1) paged_part_kernel(float *part_m, float *part_l, float *part_acc, const float *q, int nh, int kvh,
                                  int hd, int dtype, size_t esize, const unsigned char *const *pages,
                                  const int *row_pages, size_t kbase, size_t vbase, int block, const long long *pos,
                                  const long long *lo, const int *first, const int *boff, const int *blocks,
                                  const eng_split_item *items, float scale)
{
	const eng_split_item it = items[blockIdx.x];
	int group = nh / kvh, lane = threadIdx.x % 32;
	for (int warp = threadIdx.x / 32; warp < group; warp += blockDim.x / 32) {
		int i = it.row, g = it.kv_head, h = g * group + warp;
		size_t task = (size_t)i * kvh + g, rowb = (size_t)kvh * hd * esize, headb = (size_t)g * hd * esize;
		const float *qh = q + ((size_t)i * nh + h) * hd;
		float qv[ATT_PER_LANE], acc[ATT_PER_LANE];
#pragma unroll
		for (int u = 0; u < ATT_PER_LANE; u++) {
			int j = lane + 32 * u;
			qv[u] = j < hd ? qh[j] : 0.0f;
			acc[u] = 0.0f;
		}
		float mx = -INFINITY, sum = 0.0f;
		long long p = pos[i], l0 = lo[i];
		const unsigned char *const *pg = pages + row_pages[i];
		const int *list = blocks + boff[task], f = first[task];
		for (int k = it.first; k < it.first + it.count; k++) {
			long long b = f >= 0 ? f + k : list[k], t0 = b * block > l0 ? b * block : l0;
			long long t1 = b * block + block - 1 < p ? b * block + block - 1 : p;
			const unsigned char *page = pg[b];
			for (long long t = t0; t <= t1; t++) {
				size_t slot = (size_t)(t - b * block);
				const unsigned char *kp = page + kbase + slot * rowb + headb, *vp = page + vbase + slot * rowb + headb;
				float d = 0.0f;
#pragma unroll
				for (int u = 0; u < ATT_PER_LANE; u++) {
					int j = lane + 32 * u;
					if (j < hd)
						d += qv[u] * dev_elem(kp, j, dtype);
				}
				float s = warp_sum(d) * scale, nm = s > mx ? s : mx;
				float corr = expf(mx - nm), w = expf(s - nm);
				sum = sum * corr + w;
#pragma unroll
				for (int u = 0; u < ATT_PER_LANE; u++) {
					int j = lane + 32 * u;
					if (j < hd)
						acc[u] = acc[u] * corr + w * dev_elem(vp, j, dtype);
				}
				mx = nm;
			}
		}
		size_t at = (size_t)it.slot * group + warp;
		if (lane == 0) {
			part_m[at] = mx;
			part_l[at] = sum;
		}
#pragma unroll
		for (int u = 0; u < ATT_PER_LANE; u++) {
			int j = lane + 32 * u;
			if (j < hd)
				part_acc[at * hd + j] = acc[u];
		}
	}
}

// A (row, KV head)'s parts merged in item order by log-sum-exp (eng_split_
// merge's arithmetic), then divided by the sum; zeros where nothing was
// attended. A warp a query head of the group.
__global__ void __launch_bounds__(ATT_WARPS * 32, 1) paged_merge_kernel(float *out, const float *part_m, const float *part_l, const float *part_acc,
                                   const int *ifirst, const int *icount, int nh, int kvh, int hd)
{
	int task = blockIdx.x, group = nh / kvh, lane = threadIdx.x % 32;
	for (int warp = threadIdx.x / 32; warp < group; warp += blockDim.x / 32) {
		int i = task / kvh, g = task % kvh;
		float m = -INFINITY, l = 0.0f, acc[ATT_PER_LANE];
#pragma unroll
		for (int u = 0; u < ATT_PER_LANE; u++)
			acc[u] = 0.0f;
		for (int it = ifirst[task]; it < ifirst[task] + icount[task]; it++) {
			size_t at = (size_t)it * group + warp;
			float mb = part_m[at];
			if (mb == -INFINITY)
				continue;
			float nm = m > mb ? m : mb, ca = m == -INFINITY ? 0.0f : expf(m - nm), cb = expf(mb - nm);
			l = l * ca + part_l[at] * cb;
#pragma unroll
			for (int u = 0; u < ATT_PER_LANE; u++) {
				int j = lane + 32 * u;
				if (j < hd)
					acc[u] = acc[u] * ca + part_acc[at * hd + j] * cb;
			}
			m = nm;
		}
		float *oh = out + ((size_t)i * nh + (size_t)g * group + warp) * hd;
#pragma unroll
		for (int u = 0; u < ATT_PER_LANE; u++) {
			int j = lane + 32 * u;
			if (j < hd)
				oh[j] = l > 0.0f ? acc[u] / l : 0.0f;
		}
	}
}


extern "C" int eng_cuda_paged_attention(float *d_out, const float *d_q, int n, int nh, int kvh, int hd, int dtype,
                                        void *const *pages, const int *row_pages, int npages, size_t kbase,
                                        size_t vbase, int block, const long *pos, const long *lo, const int *first,
                                        const int *boff, const int *blocks, const eng_split_item *items, int nitems,
                                        const int *ifirst, const int *icount, float scale)
{
	if (n < 1 || kvh < 1 || nh % kvh || nh / kvh > 32 || hd < 1 || hd > ATT_MAX_HD || block < 1 || nitems < 0 ||
	    (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16))
		return ev_error_set(EV_E_INVALID, "cuda paged attention: n %d, heads %d/%d (at most 32 a KV head), head %d "
		                                  "(at most %d), block %d, dtype %d", n, nh, kvh, hd, ATT_MAX_HD, block, dtype);
	size_t tasks = (size_t)n * kvh, nb = (size_t)boff[tasks], group = (size_t)(nh / kvh);
	size_t o_pages = 0, o_rows = align16(o_pages + (size_t)npages * sizeof(void *)),
	       o_pos = align16(o_rows + (size_t)n * sizeof(int)), o_lo = align16(o_pos + (size_t)n * sizeof(long long)),
	       o_boff = align16(o_lo + (size_t)n * sizeof(long long)), o_blocks = align16(o_boff + (tasks + 1) * sizeof(int)),
	       o_items = align16(o_blocks + (nb ? nb : 1) * sizeof(int)),
	       o_first = align16(o_items + (size_t)(nitems ? nitems : 1) * sizeof(eng_split_item)),
	       o_count = align16(o_first + tasks * sizeof(int)), o_range = align16(o_count + tasks * sizeof(int)),
	       total = o_range + tasks * sizeof(int);
	size_t parts = (size_t)(nitems ? nitems : 1) * group;
	unsigned char *h = (unsigned char *)calloc(1, total); // padding zeroed: tables compare whole
	float *part = (float *)eng_cuda_scratch(7, parts * (2 + (size_t)hd) * sizeof(float));
	if (!h || !part) {
		free(h);
		return ev_error_set(EV_E_NOMEM, "cuda paged attention: out of memory for its tables (%zu bytes) and %d parts",
		                    total, nitems);
	}
	memcpy(h + o_pages, pages, (size_t)npages * sizeof(void *));
	memcpy(h + o_rows, row_pages, (size_t)n * sizeof(int));
	for (int i = 0; i < n; i++) {
		((long long *)(h + o_pos))[i] = pos[i];
		((long long *)(h + o_lo))[i] = lo[i];
	}
	memcpy(h + o_boff, boff, (tasks + 1) * sizeof(int));
	memcpy(h + o_blocks, blocks, nb * sizeof(int));
	memcpy(h + o_items, items, (size_t)nitems * sizeof(eng_split_item));
	memcpy(h + o_first, ifirst, tasks * sizeof(int));
	memcpy(h + o_count, icount, tasks * sizeof(int));
	memcpy(h + o_range, first, tasks * sizeof(int));
	int rc;
	// a decode step's dense layers plan the same pages and lists: one upload
	unsigned char *d = (unsigned char *)eng_cuda_scratch_upload(4, h, total, &rc);
	free(h);
	if (!d)
		return rc;
	size_t esize = dtype == DT_F32 ? 4 : 2;
	float *pm = part, *pl = pm + parts, *pacc = pl + parts;
	unsigned threads = (unsigned)(group < ATT_WARPS ? group : ATT_WARPS) * 32;
	if (nitems > 0)
		paged_part_kernel<<<nitems, threads>>>(pm, pl, pacc, d_q, nh, kvh, hd, dtype, esize,
		                                       (const unsigned char *const *)(d + o_pages), (const int *)(d + o_rows),
		                                       kbase, vbase, block, (const long long *)(d + o_pos),
		                                       (const long long *)(d + o_lo), (const int *)(d + o_range),
		                                       (const int *)(d + o_boff),
		                                       (const int *)(d + o_blocks), (const eng_split_item *)(d + o_items), scale);
	if ((rc = launch_ok("paged attention parts")))
		return rc;
	paged_merge_kernel<<<(unsigned)tasks, threads>>>(d_out, pm, pl, pacc, (const int *)(d + o_first),
	                                                 (const int *)(d + o_count), nh, kvh, hd);
	return launch_ok("paged attention merge");
}
