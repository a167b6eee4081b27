/*
 * engine/cuda/backend.c: the CUDA backend, the engine's backend table
 * (engine/backend.h) filled with the device ops of engine/cuda. forward.c
 * drives it as it drives the CPU paths.
 *
 * - Activations are device memory (be->device).
 * - Weights are uploaded once, on first use, keyed by their host address,
 *   as stored: f32, f16, bf16 and the block types (Q8_0 ... Q6_K), which
 *   the device reads in place (eng_cuda_gemv_q; for a prefill GEMM
 *   dequantized to f32 into one reused buffer first). The f32 vectors
 *   (norms, biases, RoPE frequencies) the same way. A block-type
 *   embedding table is read on the host, its rows decoded and sent up.
 * - The KV cache: each page has a device copy (eng_page.dev, page_bytes,
 *   the host's layout) whose version (dev_gen) says whether it is current.
 *   kv_store stores keys and values on the device alone and marks the
 *   page ahead of its host data (dev_ahead), which the host pulls down
 *   when it reads it; index keys stay the host's truth and go up into
 *   current copies; attention brings any stale copy up whole, then reads
 *   device pages only.
 * - Which blocks a row attends is planned on the host (engine/attn_plan.c,
 *   tested against the reference), each (row, KV head)'s list cut into
 *   parts of about ENG_CUDA_ATT_PART_KEYS keys (by its own length only, so
 *   a row's arithmetic does not depend on its batch) that the device
 *   attends apart and merges by log-sum-exp; the lightning indexer chooses
 *   on the device from the pages' index keys (cu_index_select).
 * - The ops of the table return nothing: the first failure is kept, later
 *   ops do nothing, and forward.c reads it from `status`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cuda/cuda.h"

/* One uploaded host array: its device copy and the dtype kept there. */
typedef struct {
	const void *host;
	void *dev;
	int dtype;
} cu_map;

typedef struct {
	cu_map *map; /* open addressing on the host address */
	size_t map_cap, map_n;
	int err;
	char msg[512];
	eng_attn_plan plan;
	float *hq, *hk; /* host copies of queries (and embedding rows), a block's key sums */
	size_t hq_cap, hk_cap;
	void **dst;
	size_t dst_cap;
	void **pages; /* the device pages of the rows' sequences */
	size_t pages_cap;
	int *row_pages;
	size_t row_pages_cap;
	long *hpos;
	size_t hpos_cap;
	int *slot; /* kv_store: each row's slot in its page */
	size_t slot_cap;
	uint64_t weight_bytes; /* uploaded */
	/* attention parts: blocks a work item (0: ENG_CUDA_ATT_PART_KEYS keys'
	 * worth) */
	int part_blocks;
	float *deq; /* a block-type weight dequantized for a prefill GEMM */
	size_t deq_cap;
	/* MoE decode: per layer and projection (gate, up, down) the device
	 * array of its experts' device weights; the rows' routing and the
	 * experts' activations */
	void **moe_tab;
	unsigned char *moe_buf;
	size_t moe_cap;
} cu_ctx;

/* Keys a work item of the paged attention takes: a decode row's list of a
 * long context is cut into parts of about this many, enough items to fill
 * the device, each long enough to pay for its merge. */
#define ENG_CUDA_ATT_PART_KEYS 1024

static bool failed(eng_backend *be, int rc)
{
	cu_ctx *c = be->ctx;
	if (rc && !c->err) {
		c->err = rc;
		snprintf(c->msg, sizeof c->msg, "%s", ev_error_msg());
	}
	return c->err != 0;
}

/* EV_GROW (base/vec.h), out of memory named */
#define GROW(ptr, cap, need)                                                                                   \
	(EV_GROW(ptr, cap, (size_t)(need))                                                                     \
		 ? ev_error_set(EV_E_NOMEM, "cuda backend: out of host memory (%zu elements)", (size_t)(need))  \
		 : 0)

static size_t slot_of(const cu_ctx *c, const void *host)
{
	size_t h = ((uintptr_t)host >> 4) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & (c->map_cap - 1);
}

static cu_map *map_find(cu_ctx *c, const void *host)
{
	for (size_t i = slot_of(c, host);; i = (i + 1) & (c->map_cap - 1)) {
		if (!c->map[i].host || c->map[i].host == host)
			return &c->map[i];
	}
}

static int map_grow(cu_ctx *c)
{
	if (c->map_cap && (c->map_n + 1) * 2 <= c->map_cap)
		return 0;
	cu_map *old = c->map;
	size_t oc = c->map_cap;
	c->map_cap = oc ? oc * 2 : 1024;
	if (!(c->map = calloc(c->map_cap, sizeof(cu_map)))) {
		c->map = old;
		c->map_cap = oc;
		return ev_error_set(EV_E_NOMEM, "cuda backend: out of host memory");
	}
	for (size_t i = 0; i < oc; i++)
		if (old[i].host)
			*map_find(c, old[i].host) = old[i];
	free(old);
	return 0;
}

/* The device copy of n elements of `dtype` at host, as stored (*dt: its
 * dtype; w: the weight at host, whose quads (eng_weight.x4, the fast CPU
 * path's layout) go up as rows as stored; NULL for vectors). NULL on
 * failure (kept). */
static void *upload(eng_backend *be, const void *host, eng_dtype dtype, size_t n, int *dt, const eng_weight *w)
{
	cu_ctx *c = be->ctx;
	if (c->err)
		return NULL;
	if (!host) { /* never skip an op quietly */
		failed(be, ev_error_set(EV_E_INVALID, "cuda backend: a weight of %zu elements without data", n));
		return NULL;
	}
	if (failed(be, map_grow(c)))
		return NULL;
	cu_map *e = map_find(c, host);
	if (e->host) {
		if (dt)
			*dt = e->dtype;
		return e->dev;
	}
	size_t bytes = eng_dtype_bytes(dtype, n);
	void *d = eng_cuda_malloc(bytes);
	if (!d) {
		failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of device memory for a weight of %zu bytes "
						    "(%.1f MiB uploaded so far)", bytes, c->weight_bytes / 1048576.0));
		return NULL;
	}
	uint8_t *rows = NULL;
	if (w && w->x4) {
		if (!(rows = malloc(bytes))) {
			eng_cuda_free(d);
			failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of host memory"));
			return NULL;
		}
		eng_weight_rows(rows, w);
	}
	int urc = eng_cuda_upload(d, rows ? rows : host, bytes);
	free(rows);
	if (failed(be, urc)) {
		eng_cuda_free(d);
		return NULL;
	}
	c->weight_bytes += bytes;
	e->host = host;
	e->dev = d;
	e->dtype = (int)dtype;
	c->map_n++;
	if (dt)
		*dt = e->dtype;
	return d;
}

static const float *vec(eng_backend *be, const float *host, size_t n)
{
	return upload(be, host, ENG_F32, n, NULL, NULL);
}

static void *cu_alloc(eng_backend *be, size_t bytes)
{
	(void)be;
	return eng_cuda_malloc(bytes);
}

static void cu_release(eng_backend *be, void *p)
{
	(void)be;
	eng_cuda_free(p);
}

static void cu_to_host(eng_backend *be, float *host, const float *src, size_t n)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_download(host, src, n * sizeof(float)));
}

static void cu_from_host(eng_backend *be, float *dst, const float *host, size_t n)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_upload(dst, host, n * sizeof(float)));
}

static void cu_embed(eng_backend *be, float *x, const int32_t *tok, int n)
{
	cu_ctx *c = be->ctx;
	const eng_weight *e = &be->m->embed;
	if (c->err)
		return;
	if (eng_dtype_block(e->dtype) > 1) { /* a block-type table: the rows decoded here, then up */
		size_t w = (size_t)e->cols;
		if (failed(be, GROW(c->hq, c->hq_cap, (size_t)n * w)))
			return;
		for (int i = 0; i < n; i++)
			eng_weight_row_f32(c->hq + (size_t)i * w, e, tok[i]);
		failed(be, eng_cuda_upload(x, c->hq, (size_t)n * w * sizeof(float)));
		return;
	}
	int dt = 0;
	void *d = upload(be, e->data, e->dtype, (size_t)e->rows * e->cols, &dt, e);
	if (d)
		failed(be, eng_cuda_embed(x, d, dt, e->rows, e->cols, tok, n));
}

static void cu_gather(eng_backend *be, float *dst, const float *src, const int *idx, int n, int width)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_gather(dst, src, idx, n, width));
}

static void cu_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	cu_ctx *c = be->ctx;
	int dt = 0;
	size_t count = (size_t)w->rows * w->cols;
	void *d = upload(be, w->data, w->dtype, count, &dt, w);
	if (!d)
		return;
	bool block = eng_dtype_block((eng_dtype)dt) > 1;
	int rc;
	if (n < ENG_CUDA_GEMM_ROWS) {
		rc = block ? eng_cuda_gemv_q(y, x, n, d, dt, w->rows, w->cols) : eng_cuda_gemv(y, x, n, d, dt, w->rows, w->cols);
	} else if (block) { /* prefill: the weight's values in f32, then the f32 GEMM */
		if (count > c->deq_cap) {
			eng_cuda_free(c->deq);
			c->deq_cap = 0;
			if (!(c->deq = eng_cuda_malloc(count * sizeof(float)))) {
				failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of device memory to dequantize a [%d, %d] "
								    "weight", w->rows, w->cols));
				return;
			}
			c->deq_cap = count;
		}
		rc = eng_cuda_dequantize(c->deq, d, dt, count);
		if (!rc)
			rc = eng_cuda_gemm(y, x, n, c->deq, ENG_F32, w->rows, w->cols);
	} else {
		rc = eng_cuda_gemm(y, x, n, d, dt, w->rows, w->cols);
	}
	if (failed(be, rc))
		return;
	if (bias) {
		const float *b = vec(be, bias, (size_t)w->rows);
		if (b)
			failed(be, eng_cuda_add_bias(y, b, n, w->rows));
	}
}

static void cu_rmsnorm(eng_backend *be, float *y, const float *x, const float *g, int n, int d, float eps)
{
	const float *dg = vec(be, g, (size_t)d);
	if (dg)
		failed(be, eng_cuda_rmsnorm(y, x, dg, n, d, eps));
}

static void cu_rope(eng_backend *be, float *x, int n, int nh, int hd, int rd, const long *pos, const float *inv_freq)
{
	const float *f = vec(be, inv_freq, (size_t)be->m->c.head_dim / 2);
	if (f)
		failed(be, eng_cuda_rope(x, n, nh, hd, rd, pos, f));
}

static void cu_swiglu(eng_backend *be, float *g, const float *u, size_t n)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_swiglu(g, u, n));
}

static void cu_swiglu_oai(eng_backend *be, float *g, const float *u, size_t n, float alpha, float limit)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_swiglu_oai(g, u, n, alpha, limit));
}

static void cu_axpy(eng_backend *be, float *y, const float *x, float a, size_t n)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_axpy(y, x, a, n));
}

static void cu_axpy_rows(eng_backend *be, float *y, const float *x, const int *rows, const float *a, int n, int width)
{
	if (!((cu_ctx *)be->ctx)->err)
		failed(be, eng_cuda_axpy_rows(y, x, rows, a, n, width));
}

/* A page's device copy, brought up to date whole when stale. */
static void *page_dev(eng_backend *be, eng_page *pg)
{
	eng_kv_pool *p = &be->m->kv;
	if (!pg->dev && !(pg->dev = eng_cuda_malloc(p->page_bytes))) {
		failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of device memory for a KV page (%zu bytes)",
					p->page_bytes));
		return NULL;
	}
	if (pg->dev_gen != pg->gen) {
		if (failed(be, eng_cuda_upload(pg->dev, pg->data, p->page_bytes)))
			return NULL;
		pg->dev_gen = pg->gen;
	}
	return pg->dev;
}

/* c->dst[i], c->slot[i]: row i's page copy (made current) and its slot
 * there. 0, or -1 on failure (kept). */
static int rows_pages(eng_backend *be, const eng_row *rows, int n)
{
	cu_ctx *c = be->ctx;
	eng_kv_pool *p = &be->m->kv;
	if (c->err || failed(be, GROW(c->dst, c->dst_cap, (size_t)n)) || failed(be, GROW(c->slot, c->slot_cap, (size_t)n)))
		return -1;
	for (int i = 0; i < n; i++) {
		if (!(c->dst[i] = page_dev(be, rows[i].seq->pages[rows[i].pos / p->block])))
			return -1;
		c->slot[i] = (int)(rows[i].pos % p->block);
	}
	return 0;
}

/* The pages of rows just stored into on the device: their slots filled,
 * a new version the copy holds, ahead of the host's data. */
static void rows_stored(eng_backend *be, const eng_row *rows, int n)
{
	cu_ctx *c = be->ctx;
	eng_kv_pool *p = &be->m->kv;
	for (int i = 0; i < n; i++) {
		eng_page *pg = rows[i].seq->pages[rows[i].pos / p->block];
		if (c->slot[i] + 1 > pg->ntok)
			pg->ntok = c->slot[i] + 1;
		pg->gen = ++p->gen;
		pg->dev_gen = pg->gen;
		pg->dev_ahead = true;
	}
}

/* Keys and values go into the device copies alone: each row's page copy
 * is made current first (a fresh or stale page goes up whole), the device
 * stores them as the host would (eng_cuda_kv_store: the same conversions
 * and key sums), and the page is marked ahead of its host data, which
 * eng_page_pull brings down when the host reads it (a fork's copy, a
 * truncation, a host backend). The host keeps what it reads itself: the
 * slots filled, the versions, and at a block's last slot that layer's key
 * sums for the MSA index. */
static void cu_kv_store(eng_backend *be, const eng_row *rows, int n, int layer, const float *k, const float *v)
{
	cu_ctx *c = be->ctx;
	eng_kv_pool *p = &be->m->kv;
	size_t kd = (size_t)p->kvh * p->hd;
	if (rows_pages(be, rows, n) || failed(be, GROW(c->hk, c->hk_cap, kd)))
		return;
	size_t kbase = (size_t)layer * p->layer_bytes, vbase = kbase + (size_t)p->block * kd * p->esize,
	       sbase = vbase + (size_t)p->block * kd * p->esize;
	if (failed(be, eng_cuda_kv_store(c->dst, c->slot, n, k, v, (int)kd, (int)p->dtype, kbase, vbase, sbase)))
		return;
	rows_stored(be, rows, n);
	for (int i = 0; i < n; i++) {
		eng_seq *s = rows[i].seq;
		eng_page *pg = s->pages[rows[i].pos / p->block];
		if (c->slot[i] == p->block - 1) { /* the block is complete: its sums into the index */
			if (failed(be, eng_cuda_download(c->hk, (unsigned char *)pg->dev + sbase, kd * sizeof(float))))
				return;
			eng_msa_index_put(s->kidx[layer], s->kbox[layer], rows[i].pos / p->block, c->hk, p->kvh, p->hd);
		}
	}
}

/* The pool's dev_pull: every layer's keys, values, key sums and index
 * keys of the device copy down into the host page (the index keys' boxes
 * are the host's: eng_page_pull rebuilds them). */
static int page_pull(const eng_kv_pool *p, eng_page *pg)
{
	size_t kv = (size_t)2 * p->block * p->kvh * p->hd * p->esize + (size_t)p->kvh * p->hd * sizeof(float) +
		    (size_t)p->block * p->idim * sizeof(float);
	for (int l = 0; l < p->layers; l++) {
		size_t at = (size_t)l * p->layer_bytes;
		int rc = eng_cuda_download(pg->data + at, (unsigned char *)pg->dev + at, kv);
		if (rc)
			return rc;
	}
	return 0;
}

static void cu_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer, int nh,
			 long window, const int *lists, const int *nls, int nlist)
{
	cu_ctx *c = be->ctx;
	eng_model *m = be->m;
	eng_kv_pool *p = &m->kv;
	int hd = p->hd;
	if (c->err)
		return;
	const float *hq = NULL;
	if (eng_attn_plan_needs_q(m, rows, n, layer, lists, nls)) {
		if (failed(be, GROW(c->hq, c->hq_cap, (size_t)n * nh * hd)) ||
		    failed(be, eng_cuda_download(c->hq, q, (size_t)n * nh * hd * sizeof(float))))
			return;
		hq = c->hq;
	}
	if (failed(be, eng_attn_plan_build(&c->plan, m, rows, n, layer, window, lists, nls, nlist, hq, nh)) ||
	    failed(be, GROW(c->row_pages, c->row_pages_cap, (size_t)n)) ||
	    failed(be, GROW(c->hpos, c->hpos_cap, (size_t)n)))
		return;
	/* the rows' pages: one table a run of rows of the same sequence, as
	 * long as the run's furthest row needs */
	size_t np = 0, tstart = 0;
	long tlen = 0;
	const eng_seq *ts = NULL;
	for (int i = 0; i < n; i++) {
		eng_seq *s = rows[i].seq;
		long need = rows[i].pos / p->block + 1;
		if (s != ts) {
			ts = s;
			tstart = np;
			tlen = 0;
		}
		if (need > tlen) {
			if (failed(be, GROW(c->pages, c->pages_cap, np + (size_t)(need - tlen))))
				return;
			for (long b = tlen; b < need; b++)
				if (!(c->pages[np++] = page_dev(be, s->pages[b])))
					return;
			tlen = need;
		}
		c->row_pages[i] = (int)tstart;
		c->hpos[i] = rows[i].pos;
	}
	int part = c->part_blocks > 0 ? c->part_blocks : ENG_CUDA_ATT_PART_KEYS / p->block;
	if (failed(be, eng_attn_plan_split(&c->plan, part > 0 ? part : 1)))
		return;
	size_t kbase = (size_t)layer * p->layer_bytes, vbase = kbase + (size_t)p->block * p->kvh * hd * p->esize;
	failed(be, eng_cuda_paged_attention(out, q, n, nh, p->kvh, hd, (int)p->dtype, c->pages, c->row_pages, (int)np,
					    kbase, vbase, p->block, c->hpos, c->plan.lo, c->plan.first, c->plan.off, c->plan.blocks,
					    c->plan.items, c->plan.nitems, c->plan.ifirst, c->plan.icount,
					    1.0f / sqrtf((float)hd)));
}

static int cu_status(eng_backend *be)
{
	cu_ctx *c = be->ctx;
	if (!c->err && eng_cuda_sync())
		failed(be, ev_error_code() ? ev_error_code() : EV_E_IO);
	if (!c->err)
		return 0;
	int rc = ev_error_set(c->err, "%s", c->msg);
	c->err = 0; /* the next forward starts clean (the failed one's sequences are unknown) */
	return rc;
}

/* The rows' index keys into their pages' device copies alone: each page's
 * copy made current first, then the device flushes and stores them
 * (eng_cuda_index_store, one table a step) and the page is marked ahead
 * of its host data, as after a KV store; the host rebuilds the keys'
 * boxes when it pulls them (the forward marks the sequences' boxes
 * stale). */
static void cu_index_store(eng_backend *be, const eng_row *rows, int n, int layer, const float *ik)
{
	cu_ctx *c = be->ctx;
	eng_kv_pool *p = &be->m->kv;
	if (rows_pages(be, rows, n))
		return;
	size_t ik_off = (size_t)((unsigned char *)eng_page_ikey(p, rows[0].seq->pages[0], layer, 0) - rows[0].seq->pages[0]->data);
	if (!failed(be, eng_cuda_index_store(c->dst, c->slot, n, ik, p->idim, ik_off)))
		rows_stored(be, rows, n);
}

/* The lightning indexer on the device: its keys are in the pages' device
 * copies (cu_index_store); for each run of rows of one sequence
 * eng_cuda_index_select scores every block where its keys lie, in the
 * sequence's device pages (the CPU's dot product order: the same scores),
 * and takes the same top-k, ties to the lower block, as
 * eng_index_select_one. */
static int cu_index_select(eng_backend *be, const eng_row *rows, int n, int layer, const float *iq, int *lists,
			   int *nls, int nlist)
{
	cu_ctx *c = be->ctx;
	eng_model *m = be->m;
	eng_kv_pool *p = &m->kv;
	size_t D = (size_t)p->idim;
	if (c->err || failed(be, GROW(c->hpos, c->hpos_cap, (size_t)n)))
		return cu_status(be);
	for (int i = 0; i < n; i++)
		c->hpos[i] = rows[i].pos;
	size_t ik_off = (unsigned char *)eng_page_ikey(p, rows[0].seq->pages[0], layer, 0) - rows[0].seq->pages[0]->data;
	for (int i0 = 0, i1; i0 < n; i0 = i1) {
		eng_seq *s = rows[i0].seq;
		long last = rows[i0].pos;
		for (i1 = i0 + 1; i1 < n && rows[i1].seq == s; i1++)
			last = rows[i1].pos > last ? rows[i1].pos : last;
		long npg = last / p->block + 1;
		if (failed(be, GROW(c->pages, c->pages_cap, (size_t)npg)))
			return cu_status(be);
		for (long b = 0; b < npg; b++)
			if (!(c->pages[b] = page_dev(be, s->pages[b])))
				return cu_status(be);
		size_t kvh = (size_t)p->kvh;
		if (failed(be, eng_cuda_index_select(lists + (size_t)i0 * kvh * nlist, nls + (size_t)i0 * kvh, nlist,
						     iq + (size_t)i0 * kvh * D, c->pages, (int)npg, ik_off, i1 - i0, (int)kvh,
						     (int)D, c->hpos + i0, p->block, m->c.index_topk, m->c.index_local)))
			return cu_status(be);
	}
	return 0;
}

/* Layer l's experts' weights of one projection (0 gate, 1 up, 2 down) as
 * a device array of device pointers, made on first use; NULL when they do
 * not share one dtype and shape (the host loop takes them), or on failure
 * (kept). */
static void *const *moe_table(eng_backend *be, int l, int proj, int *dt)
{
	cu_ctx *c = be->ctx;
	eng_model *m = be->m;
	int E = m->c.experts;
	if (!c->moe_tab && !(c->moe_tab = calloc((size_t)m->c.layers * 3, sizeof(void *)))) {
		failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of host memory"));
		return NULL;
	}
	const eng_ffn *ex = m->layers[l].experts;
	const eng_weight *w0 = proj == 0 ? &ex[0].gate : proj == 1 ? &ex[0].up : &ex[0].down;
	void **slot = &c->moe_tab[(size_t)l * 3 + proj];
	if (*slot) /* made before: the dtype kept with the first expert's weight */
		return upload(be, w0->data, w0->dtype, (size_t)w0->rows * w0->cols, dt, w0) ? *slot : NULL;
	void **host = malloc((size_t)E * sizeof(void *));
	if (!host) {
		failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of host memory"));
		return NULL;
	}
	for (int e = 0; e < E; e++) {
		const eng_weight *w = proj == 0 ? &ex[e].gate : proj == 1 ? &ex[e].up : &ex[e].down;
		if (w->dtype != w0->dtype || w->rows != w0->rows || w->cols != w0->cols ||
		    !(host[e] = upload(be, w->data, w->dtype, (size_t)w->rows * w->cols, dt, w))) {
			free(host);
			return NULL;
		}
	}
	if (!(*slot = eng_cuda_malloc((size_t)E * sizeof(void *)))) {
		failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of device memory for an expert table"));
	} else if (failed(be, eng_cuda_upload(*slot, host, (size_t)E * sizeof(void *)))) {
		eng_cuda_free(*slot);
		*slot = NULL;
	}
	free(host);
	return *slot;
}

/* The MoE block of a decode step on the device: the shared expert first
 * (its FFN by the table's own ops, its output added as it is or times
 * sigmoid of its gate: eng_cuda_gate_add), then the rows routed there
 * (eng_cuda_moe_route), each row's experts' gate and up projections as
 * GEMVs over (row, expert) pairs picking their weights from the layer's
 * tables, the activation, the down projection likewise, and the outputs
 * added into the residual in ascending expert order (eng_cuda_moe_mix):
 * no copy to or from the host. Prefill chunks (GEMM rows) stay with the
 * forward's host loop. */
static int cu_moe(eng_backend *be, float *x, const float *xb, const float *router, int n, int layer, float scale)
{
	cu_ctx *c = be->ctx;
	eng_model *m = be->m;
	const eng_config *cf = &m->c;
	const eng_layer *L = &m->layers[layer];
	int E = cf->experts, K = cf->top_k, H = cf->hidden;
	if (c->err)
		return 0; /* the forward reads the failure at the chunk's end */
	if (n >= ENG_CUDA_GEMM_ROWS || K > 64 || E > 4096)
		return 1;
	int dg = 0, du = 0, dd = 0;
	void *const *tg = moe_table(be, layer, 0, &dg), *const *tu = moe_table(be, layer, 1, &du),
		    *const *td = moe_table(be, layer, 2, &dd);
	if (c->err)
		return 0;
	if (!tg || !tu || !td)
		return 1;
	const float *bias = L->router_bias ? vec(be, L->router_bias, (size_t)E) : NULL;
	size_t P = (size_t)n * K, I = (size_t)L->experts[0].gate.rows;
	size_t SI = L->shared.down.data ? (size_t)L->shared.gate.rows : 0; /* the shared expert's width */
	size_t need = P * (sizeof(int) + sizeof(float)) + P * (2 * I + (size_t)H) * sizeof(float) +
		      (size_t)n * (2 * SI + (size_t)H + 1) * sizeof(float);
	if (need > c->moe_cap) {
		eng_cuda_free(c->moe_buf);
		c->moe_cap = 0;
		if (!(c->moe_buf = eng_cuda_malloc(need))) {
			failed(be, ev_error_set(EV_E_NOMEM, "cuda backend: out of device memory for %zu experts' rows", P));
			return 0;
		}
		c->moe_cap = need;
	}
	int *sel = (int *)c->moe_buf;
	float *w = (float *)(sel + P), *g = w + P, *u = g + P * I, *o = u + P * I;
	if (SI) { /* the shared expert, as the forward's ffn() and its mixing */
		float *sg = o + P * H, *su = sg + (size_t)n * SI, *so = su + (size_t)n * SI, *gate = so + (size_t)n * H;
		size_t N = (size_t)n * SI;
		cu_matmul(be, sg, xb, n, &L->shared.gate, NULL);
		cu_matmul(be, su, xb, n, &L->shared.up, NULL);
		if (cf->oai_swiglu)
			cu_swiglu_oai(be, sg, su, N, (float)cf->swiglu_alpha, (float)cf->swiglu_limit);
		else
			cu_swiglu(be, sg, su, N);
		cu_matmul(be, so, sg, n, &L->shared.down, NULL);
		if (L->shared_gate.data) {
			cu_matmul(be, gate, xb, n, &L->shared_gate, NULL);
			if (!c->err)
				failed(be, eng_cuda_gate_add(x, so, gate, n, H));
		} else {
			cu_axpy(be, x, so, 1.0f, (size_t)n * H);
		}
		if (c->err)
			return 0;
	}
	int kind = cf->sigmoid_router ? 2 : cf->norm_topk ? 1 : 0;
	if (failed(be, eng_cuda_moe_route(sel, w, router, n, E, K, kind, bias, scale)) ||
	    failed(be, eng_cuda_gemv_sel(g, xb, K, sel, (int)P, tg, dg, (int)I, H)) ||
	    failed(be, eng_cuda_gemv_sel(u, xb, K, sel, (int)P, tu, du, (int)I, H)))
		return 0;
	int rc = cf->oai_swiglu ? eng_cuda_swiglu_oai(g, u, P * I, (float)cf->swiglu_alpha, (float)cf->swiglu_limit)
				: eng_cuda_swiglu(g, u, P * I);
	if (failed(be, rc) || failed(be, eng_cuda_gemv_sel(o, g, 1, sel, (int)P, td, dd, H, (int)I)))
		return 0;
	failed(be, eng_cuda_moe_mix(x, o, w, n, K, H));
	return 0;
}

static void page_dev_free(void *dev)
{
	eng_cuda_free(dev);
}

int eng_backend_cuda_init(eng_backend *be, eng_model *m)
{
	memset(be, 0, sizeof(*be));
	eng_cuda_info ci;
	int rc = eng_cuda_probe(&ci);
	if (rc) {
		char why[400];
		snprintf(why, sizeof why, "%s", ev_error_msg());
		return ev_error_set(rc, "--backend cuda: %s", why);
	}
	if (m->kv.hd > 256 || m->c.heads / m->c.kv_heads > 32)
		return ev_error_set(EV_E_UNSUPPORTED, "--backend cuda: head_dim %d, %d query heads a KV head (the device "
						      "attention takes up to 256 and 32)", m->kv.hd, m->c.heads / m->c.kv_heads);
	be->name = "cuda";
	be->device = true;
	be->m = m;
	if (!(be->ctx = calloc(1, sizeof(cu_ctx))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	be->alloc = cu_alloc;
	be->release = cu_release;
	be->to_host = cu_to_host;
	be->from_host = cu_from_host;
	be->embed = cu_embed;
	be->gather = cu_gather;
	be->matmul = cu_matmul;
	be->rmsnorm = cu_rmsnorm;
	be->rope = cu_rope;
	be->swiglu = cu_swiglu;
	be->swiglu_oai = cu_swiglu_oai;
	be->axpy = cu_axpy;
	be->axpy_rows = cu_axpy_rows;
	be->kv_store = cu_kv_store;
	be->attention = cu_attention;
	be->index_store = cu_index_store;
	be->index_select = cu_index_select;
	be->moe = cu_moe;
	be->status = cu_status;
	m->kv.dev_free = page_dev_free;
	m->kv.dev_pull = page_pull;
	return 0;
}

uint64_t eng_backend_cuda_uploaded(const eng_backend *be)
{
	const cu_ctx *c = be ? be->ctx : NULL;
	return c ? c->weight_bytes : 0;
}

void eng_backend_cuda_free(eng_backend *be)
{
	cu_ctx *c = be ? be->ctx : NULL;
	if (!c)
		return;
	for (size_t i = 0; i < c->map_cap; i++)
		if (c->map[i].host)
			eng_cuda_free(c->map[i].dev);
	free(c->map);
	eng_cuda_free(c->deq);
	eng_cuda_free(c->moe_buf);
	for (size_t i = 0; c->moe_tab && i < (size_t)be->m->c.layers * 3; i++)
		eng_cuda_free(c->moe_tab[i]);
	free(c->moe_tab);
	eng_attn_plan_free(&c->plan);
	free(c->hq), free(c->hk), free(c->dst), free(c->pages), free(c->row_pages);
	free(c->hpos), free(c->slot);
	free(c);
	be->ctx = NULL;
}
