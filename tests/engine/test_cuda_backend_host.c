/*
 * The CUDA backend's own code (engine/cuda/backend.c, compiled in here)
 * over host stand-ins of the device ops: everything the backend does on
 * the host (weights uploaded once and found again, the device copies of
 * KV pages kept current through stores, forks, copies, truncation and
 * reuse, the attention plan turned into page tables, the indexer's keys
 * read back, failures kept and reported) runs here without a GPU, with
 * the same end-to-end cases the device test runs (cuda_backend_cases.h).
 *
 * The stand-ins compute what each op's contract in engine/cuda/cuda.h
 * says, on "device memory" that is host memory they hand out and track:
 * every pointer an op is given as device memory must lie inside a block
 * they handed out, so passing a host pointer where the device's is due
 * fails the test (that mistake would crash or read garbage on a GPU).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/cpu/qdot.h"
#include "engine/cuda/cuda.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"
#include "engine/cpu/kernels.h"
#include "tests/engine/attn_walk.h"
#include "tests/engine/kv_store_def.h"
#include "tests/engine/engine_testutil.h"

/* ---- device memory: tracked host blocks ---------------------------------- */

typedef struct {
	unsigned char *p;
	size_t n;
} blk;
static blk g_blk[1 << 16];
static int g_nblk;
static long g_live_bytes, g_uploads, g_gemms, g_index_calls, g_axpy_rows;

static void *h_malloc(size_t bytes)
{
	if (g_nblk == (int)(sizeof g_blk / sizeof g_blk[0]))
		fail_msg("stand-in: more than %d device blocks", g_nblk);
	unsigned char *p = malloc(bytes ? bytes : 1);
	assert_non_null(p);
	memset(p, 0xA5, bytes); /* device memory is not zeroed */
	g_blk[g_nblk++] = (blk){p, bytes};
	g_live_bytes += (long)bytes;
	return p;
}

static void h_free(void *d)
{
	if (!d)
		return;
	for (int i = 0; i < g_nblk; i++)
		if (g_blk[i].p == d) {
			g_live_bytes -= (long)g_blk[i].n;
			free(d);
			g_blk[i] = g_blk[--g_nblk];
			return;
		}
	fail_msg("stand-in: freeing %p, which is not device memory", d);
}

/* d .. d + bytes inside one device block */
static void dev(const void *d, size_t bytes, const char *what)
{
	const unsigned char *q = d;
	for (int i = 0; i < g_nblk; i++)
		if (q >= g_blk[i].p && q + bytes <= g_blk[i].p + g_blk[i].n)
			return;
	fail_msg("stand-in: %s: %p (+%zu bytes) is not device memory", what, d, bytes);
}

static int h_probe(eng_cuda_info *out)
{
	memset(out, 0, sizeof *out);
	out->devices = 1;
	snprintf(out->name, sizeof out->name, "host stand-in");
	return 0;
}

static bool g_fail_upload; /* the next upload fails, as a device's might */

static int h_upload(void *d_dst, const void *src, size_t bytes)
{
	if (g_fail_upload) {
		g_fail_upload = false;
		return ev_error_set(EV_E_IO, "cuda: upload: an unspecified launch failure (stand-in)");
	}
	dev(d_dst, bytes, "upload");
	memcpy(d_dst, src, bytes);
	g_uploads++;
	return 0;
}

static long g_downloads;
static int h_download(void *dst, const void *d_src, size_t bytes)
{
	dev(d_src, bytes, "download");
	memcpy(dst, d_src, bytes);
	g_downloads++;
	return 0;
}

static int h_sync(void)
{
	return 0;
}


static int h_gemv(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	if (n < 1 || rows < 1 || cols < 1 || (dtype != ENG_F32 && dtype != ENG_F16 && dtype != ENG_BF16))
		return ev_error_set(EV_E_INVALID, "cuda gemv: n %d, [%d, %d] of dtype %d", n, rows, cols, dtype);
	assert_true(n < ENG_CUDA_GEMM_ROWS);
	dev(d_w, (size_t)rows * cols * eng_dtype_size(dtype), "gemv weight");
	dev(d_x, (size_t)n * cols * sizeof(float), "gemv x");
	dev(d_y, (size_t)n * rows * sizeof(float), "gemv y");
	for (int b = 0; b < n; b++)
		for (int r = 0; r < rows; r++) {
			float acc = 0;
			for (int c = 0; c < cols; c++)
				acc += walk_elem(d_w, dtype, (size_t)r * cols + c) * d_x[(size_t)b * cols + c];
			d_y[(size_t)b * rows + r] = acc;
		}
	return 0;
}

/* block-type weights read in place: each row decoded by the definition */
static int h_gemv_q(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	int B = eng_dtype_block((eng_dtype)dtype);
	if (B < 32 || n < 1 || rows < 1 || cols < B || cols % B)
		return ev_error_set(EV_E_INVALID, "cuda gemv: n %d, [%d, %d] of block type %d", n, rows, cols, dtype);
	assert_true(n < ENG_CUDA_GEMM_ROWS);
	size_t rb = eng_dtype_bytes((eng_dtype)dtype, (size_t)cols);
	dev(d_w, rb * rows, "gemv block weight");
	dev(d_x, (size_t)n * cols * sizeof(float), "gemv x");
	dev(d_y, (size_t)n * rows * sizeof(float), "gemv y");
	float *w = malloc((size_t)cols * sizeof(float));
	for (int r = 0; r < rows; r++) {
		eng_to_f32(w, (const char *)d_w + rb * r, (eng_dtype)dtype, (size_t)cols);
		for (int b = 0; b < n; b++) {
			float acc = 0;
			for (int c = 0; c < cols; c++)
				acc += w[c] * d_x[(size_t)b * cols + c];
			d_y[(size_t)b * rows + r] = acc;
		}
	}
	free(w);
	return 0;
}

static int h_dequantize(float *d_out, const void *d_w, int dtype, size_t n)
{
	int B = eng_dtype_block((eng_dtype)dtype);
	if (B < 32 || !n || n % B)
		return ev_error_set(EV_E_INVALID, "cuda dequantize: %zu elements of block type %d", n, dtype);
	dev(d_w, eng_dtype_bytes((eng_dtype)dtype, n), "dequantize weight");
	dev(d_out, n * sizeof(float), "dequantize out");
	eng_to_f32(d_out, d_w, (eng_dtype)dtype, n);
	return 0;
}

/* cuBLASLt's GEMM as its contract states it: 16-bit weights multiply the
 * rows rounded to their type */
static int h_gemm(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	if (n < 1 || rows < 1 || cols < 1 || (dtype != ENG_F32 && dtype != ENG_F16 && dtype != ENG_BF16))
		return ev_error_set(EV_E_INVALID, "cuda gemm: n %d, [%d, %d] of dtype %d", n, rows, cols, dtype);
	assert_true(n >= ENG_CUDA_GEMM_ROWS);
	dev(d_w, (size_t)rows * cols * eng_dtype_size(dtype), "gemm weight");
	dev(d_x, (size_t)n * cols * sizeof(float), "gemm x");
	dev(d_y, (size_t)n * rows * sizeof(float), "gemm y");
	g_gemms++;
	for (int b = 0; b < n; b++)
		for (int r = 0; r < rows; r++) {
			float acc = 0;
			for (int c = 0; c < cols; c++) {
				float x = d_x[(size_t)b * cols + c];
				if (dtype == ENG_BF16)
					x = eng_bf16_to_f32(eng_f32_to_bf16(x));
				else if (dtype == ENG_F16)
					x = eng_f16_to_f32(eng_f32_to_f16(x));
				acc += walk_elem(d_w, dtype, (size_t)r * cols + c) * x;
			}
			d_y[(size_t)b * rows + r] = acc;
		}
	return 0;
}

static int h_rmsnorm(float *d_y, const float *d_x, const float *d_g, int n, int d, float eps)
{
	dev(d_x, (size_t)n * d * sizeof(float), "rmsnorm x");
	dev(d_y, (size_t)n * d * sizeof(float), "rmsnorm y");
	dev(d_g, (size_t)d * sizeof(float), "rmsnorm weight");
	eng_cpu_rmsnorm(NULL, d_y, d_x, d_g, n, d, eps);
	return 0;
}

static int h_rope(float *d_x, int n, int nh, int hd, int rd, const long *pos, const float *d_inv_freq)
{
	dev(d_x, (size_t)n * nh * hd * sizeof(float), "rope x");
	dev(d_inv_freq, (size_t)rd / 2 * sizeof(float), "rope frequencies");
	eng_cpu_rope(NULL, d_x, n, nh, hd, rd, pos, d_inv_freq);
	return 0;
}

static int h_swiglu(float *d_g, const float *d_u, size_t n)
{
	dev(d_g, n * sizeof(float), "swiglu g");
	dev(d_u, n * sizeof(float), "swiglu u");
	eng_cpu_swiglu(NULL, d_g, d_u, n);
	return 0;
}

static int h_swiglu_oai(float *d_g, const float *d_u, size_t n, float alpha, float limit)
{
	dev(d_g, n * sizeof(float), "swiglu_oai g");
	dev(d_u, n * sizeof(float), "swiglu_oai u");
	eng_cpu_swiglu_oai(NULL, d_g, d_u, n, alpha, limit);
	return 0;
}

static int h_axpy(float *d_y, const float *d_x, float a, size_t n)
{
	dev(d_y, n * sizeof(float), "axpy y");
	dev(d_x, n * sizeof(float), "axpy x");
	for (size_t i = 0; i < n; i++)
		d_y[i] += a * d_x[i];
	return 0;
}

static int h_axpy_rows(float *d_y, const float *d_x, const int *rows, const float *a, int n, int width)
{
	dev(d_x, (size_t)n * width * sizeof(float), "axpy_rows x");
	for (int j = 0; j < n; j++) {
		dev(d_y + (size_t)rows[j] * width, (size_t)width * sizeof(float), "axpy_rows y");
		for (int c = 0; c < width; c++)
			d_y[(size_t)rows[j] * width + c] += a[j] * d_x[(size_t)j * width + c];
	}
	g_axpy_rows++;
	return 0;
}

/* The routing as eng_moe_route gives it (the host's exp: the stand-in is
 * the contract), then ascending expert order and the weights times scale. */
static long g_moe_routes;
static int h_moe_route(int *d_sel, float *d_w, const float *d_logits, int n, int E, int K, int kind, const float *d_bias,
		       float scale)
{
	if (E < 1 || E > 4096 || K < 1 || K > E || K > 64 || kind < 0 || kind > 2)
		return ev_error_set(EV_E_INVALID, "cuda moe_route: %d experts, top %d, kind %d", E, K, kind);
	dev(d_logits, (size_t)n * E * sizeof(float), "moe router logits");
	dev(d_sel, (size_t)n * K * sizeof(int), "moe choice");
	dev(d_w, (size_t)n * K * sizeof(float), "moe weights");
	if (d_bias)
		dev(d_bias, (size_t)E * sizeof(float), "moe router bias");
	eng_config c;
	memset(&c, 0, sizeof c);
	c.experts = E, c.top_k = K, c.sigmoid_router = kind == 2, c.norm_topk = kind == 1;
	for (int i = 0; i < n; i++) {
		int *s = d_sel + (size_t)i * K;
		float *w = d_w + (size_t)i * K;
		eng_moe_route(&c, d_logits + (size_t)i * E, d_bias, s, w);
		for (int a = 1; a < K; a++)
			for (int b = a; b > 0 && s[b - 1] > s[b]; b--) {
				int te = s[b];
				float tw = w[b];
				s[b] = s[b - 1], w[b] = w[b - 1];
				s[b - 1] = te, w[b - 1] = tw;
			}
		for (int k = 0; k < K; k++)
			w[k] *= scale;
	}
	g_moe_routes++;
	return 0;
}

static int h_gemv_sel(float *d_y, const float *d_x, int xdiv, const int *d_sel, int pairs, void *const *d_wtab,
		      int dtype, int rows, int cols)
{
	if (xdiv < 1 || pairs % xdiv)
		return ev_error_set(EV_E_INVALID, "cuda gemv_sel: %d pairs (x a row each %d)", pairs, xdiv);
	dev(d_sel, (size_t)pairs * sizeof(int), "gemv_sel choice");
	for (int j = 0; j < pairs; j++) {
		dev(d_wtab + d_sel[j], sizeof(void *), "gemv_sel weight table");
		const float *x = d_x + (size_t)(j / xdiv) * cols;
		float *y = d_y + (size_t)j * rows;
		int rc = dtype > ENG_BF16 ? h_gemv_q(y, x, 1, d_wtab[d_sel[j]], dtype, rows, cols)
					  : h_gemv(y, x, 1, d_wtab[d_sel[j]], dtype, rows, cols);
		if (rc)
			return rc;
	}
	return 0;
}

static int h_gate_add(float *d_x, const float *d_eo, const float *d_g, int n, int width)
{
	dev(d_x, (size_t)n * width * sizeof(float), "gate_add x");
	dev(d_eo, (size_t)n * width * sizeof(float), "gate_add outputs");
	dev(d_g, (size_t)n * sizeof(float), "gate_add gates");
	for (int i = 0; i < n; i++) {
		float a = (float)(1.0 / (1.0 + exp(-(double)d_g[i])));
		for (int c = 0; c < width; c++)
			d_x[(size_t)i * width + c] += a * d_eo[(size_t)i * width + c];
	}
	return 0;
}

static int h_moe_mix(float *d_x, const float *d_eo, const float *d_w, int n, int K, int width)
{
	dev(d_x, (size_t)n * width * sizeof(float), "moe_mix x");
	dev(d_eo, (size_t)n * K * width * sizeof(float), "moe_mix outputs");
	dev(d_w, (size_t)n * K * sizeof(float), "moe_mix weights");
	for (int i = 0; i < n; i++)
		for (int k = 0; k < K; k++)
			for (int c = 0; c < width; c++)
				d_x[(size_t)i * width + c] += d_w[i * K + k] * d_eo[((size_t)i * K + k) * width + c];
	return 0;
}

static int h_embed(float *d_x, const void *d_table, int dtype, int vocab, int width, const int32_t *tok, int n)
{
	dev(d_table, (size_t)vocab * width * eng_dtype_size(dtype), "embedding table");
	dev(d_x, (size_t)n * width * sizeof(float), "embed x");
	for (int i = 0; i < n; i++) {
		assert_true(tok[i] >= 0 && tok[i] < vocab);
		for (int j = 0; j < width; j++)
			d_x[(size_t)i * width + j] = walk_elem(d_table, dtype, (size_t)tok[i] * width + j);
	}
	return 0;
}

static int h_gather(float *d_dst, const float *d_src, const int *idx, int n, int width)
{
	dev(d_dst, (size_t)n * width * sizeof(float), "gather dst");
	for (int i = 0; i < n; i++) {
		dev(d_src + (size_t)idx[i] * width, (size_t)width * sizeof(float), "gather src");
		memcpy(d_dst + (size_t)i * width, d_src + (size_t)idx[i] * width, (size_t)width * sizeof(float));
	}
	return 0;
}

static int h_add_bias(float *d_y, const float *d_b, int n, int width)
{
	dev(d_y, (size_t)n * width * sizeof(float), "bias y");
	dev(d_b, (size_t)width * sizeof(float), "bias");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < width; j++)
			d_y[(size_t)i * width + j] += d_b[j];
	return 0;
}

static long g_index_stores;
static int h_index_store(void *const *page, const int *slot, int n, const float *d_ik, int idim, size_t ik_off)
{
	dev(d_ik, (size_t)n * idim * sizeof(float), "index store keys");
	for (int i = 0; i < n; i++) {
		float *dst = (float *)((unsigned char *)page[i] + ik_off) + (size_t)slot[i] * idim;
		dev(dst, (size_t)idim * sizeof(float), "index store slot");
		for (int j = 0; j < idim; j++) {
			float x = d_ik[(size_t)i * idim + j];
			dst[j] = fabsf(x) < 0x1p-60f ? 0.0f : x;
		}
	}
	g_index_stores++;
	return 0;
}

/* The contract (kv_store_def.h) on tracked blocks. */
static long g_kv_stores;
static int h_kv_store(void *const *page, const int *slot, int n, const float *d_k, const float *d_v, int kd, int dtype,
		      size_t kbase, size_t vbase, size_t sbase)
{
	if (kd < 1 || (dtype != ENG_F32 && dtype != ENG_F16 && dtype != ENG_BF16))
		return ev_error_set(EV_E_INVALID, "cuda kv store: %d channels of dtype %d", kd, dtype);
	size_t es = eng_dtype_size(dtype);
	dev(d_k, (size_t)n * kd * sizeof(float), "kv store keys");
	dev(d_v, (size_t)n * kd * sizeof(float), "kv store values");
	for (int i = 0; i < n; i++) {
		unsigned char *pg = page[i];
		dev(pg + kbase + (size_t)slot[i] * kd * es, kd * es, "kv store key slot");
		dev(pg + vbase + (size_t)slot[i] * kd * es, kd * es, "kv store value slot");
		dev(pg + sbase, kd * sizeof(float), "kv store key sums");
	}
	kv_store_def(page, slot, n, d_k, d_v, kd, dtype, kbase, vbase, sbase);
	g_kv_stores++;
	return 0;
}


/* The indexer's choice on keys in pages, as eng_cuda_index_select's
 * contract states it: eng_index_select_one's definition (flushed query,
 * the CPU's dot product, a block's score the max over its keys <= pos, the
 * local blocks first, then the best, ties to the lower block, ascending). */
static int h_index_select(int *lists, int *nls, int nlist, const float *d_iq, void *const *pages, int npages,
			  size_t ik_off, int n, int kvh, int idim, const long *pos, int block, int topk, int local)
{
	long last = 0;
	for (int i = 0; i < n; i++)
		last = pos[i] > last ? pos[i] : last;
	dev(d_iq, (size_t)n * kvh * idim * sizeof(float), "indexer queries");
	assert_true(npages >= last / block + 1);
	for (long b = 0; b <= last / block; b++)
		dev((unsigned char *)pages[b] + ik_off, (size_t)block * idim * sizeof(float), "indexer keys of a page");
	float *sc = malloc(((size_t)last / block + 1) * sizeof(float)), *q = malloc((size_t)idim * sizeof(float));
	for (int i = 0; i < n; i++)
		for (int g = 0; g < kvh; g++) {
			const float *qv = d_iq + ((size_t)i * kvh + g) * idim;
			for (int j = 0; j < idim; j++)
				q[j] = fabsf(qv[j]) < 0x1p-60f ? 0.0f : qv[j];
			long cur = pos[i] / block;
			for (long b = 0; b <= cur; b++) {
				float best = -INFINITY;
				for (long t = b * block; t <= b * block + block - 1 && t <= pos[i]; t++) {
					const float *k = (const float *)((unsigned char *)pages[b] + ik_off) + (size_t)(t - b * block) * idim;
					float d = dot(q, k, idim);
					best = d > best ? d : best;
				}
				sc[b] = best;
			}
			for (int j = 0; j < local; j++)
				sc[cur - j > 0 ? cur - j : 0] = INFINITY;
			long want = topk < cur + 1 ? topk : cur + 1;
			want = want < nlist ? want : nlist;
			int *out = lists + ((size_t)i * kvh + g) * nlist, k = 0;
			for (; k < want; k++) {
				long pick = -1;
				for (long b = 0; b <= cur; b++)
					if (sc[b] != -INFINITY && (pick < 0 || sc[b] > sc[pick]))
						pick = b;
				if (pick < 0)
					break;
				out[k] = (int)pick;
				sc[pick] = -INFINITY;
			}
			for (int a = 1; a < k; a++)
				for (int c = a; c > 0 && out[c - 1] > out[c]; c--) {
					int x = out[c];
					out[c] = out[c - 1];
					out[c - 1] = x;
				}
			nls[(size_t)i * kvh + g] = k;
			g_index_calls++;
		}
	free(sc), free(q);
	return 0;
}

/* The kernels' walk (engine/cuda/paged.cu): parts, then their merge. */
typedef struct {
	void *const *pages;
	const int *row_pages;
	int npages;
	size_t bytes; /* a page's */
} page_table;

static const unsigned char *table_page(void *ctx, int row, long block)
{
	const page_table *t = ctx;
	assert_true(t->row_pages[row] + block < t->npages);
	const unsigned char *p = t->pages[t->row_pages[row] + block];
	dev(p, t->bytes, "attention page");
	return p;
}

static size_t g_page_bytes;
static long g_items_merged;

static int h_paged_attention(float *d_out, const float *d_q, int n, int nh, int kvh, int hd, int dtype,
			     void *const *pages, const int *row_pages, int npages, size_t kbase, size_t vbase, int block,
			     const long *pos, const long *lo, const int *first, const int *boff, const int *blocks,
			     const eng_split_item *items, int nitems, const int *ifirst, const int *icount, float scale)
{
	dev(d_out, (size_t)n * nh * hd * sizeof(float), "attention out");
	dev(d_q, (size_t)n * nh * hd * sizeof(float), "attention q");
	assert_true(nitems >= 0);
	for (int t = 0; t < n * kvh; t++)
		g_items_merged += icount[t] > 1 ? icount[t] : 0;
	page_table pt = {pages, row_pages, npages, g_page_bytes};
	/* the lists as the device gets them: ranges and stored entries */
	eng_attn_plan pl = {.n = n, .kvh = kvh, .off = (int *)boff, .blocks = (int *)blocks, .first = (int *)first};
	attn_walk(d_out, d_q, n, nh, kvh, hd, dtype, kbase, vbase, block, pos, lo, &pl, items, ifirst, icount, scale,
		  table_page, &pt);
	return 0;
}

/* the backend itself, its calls to the device ops going to the stand-ins */
#define eng_cuda_probe h_probe
#define eng_cuda_malloc h_malloc
#define eng_cuda_free h_free
#define eng_cuda_upload h_upload
#define eng_cuda_download h_download
#define eng_cuda_sync h_sync
#define eng_cuda_gemv h_gemv
#define eng_cuda_gemm h_gemm
#define eng_cuda_gemv_q h_gemv_q
#define eng_cuda_dequantize h_dequantize
#define eng_cuda_rmsnorm h_rmsnorm
#define eng_cuda_rope h_rope
#define eng_cuda_swiglu h_swiglu
#define eng_cuda_swiglu_oai h_swiglu_oai
#define eng_cuda_axpy h_axpy
#define eng_cuda_axpy_rows h_axpy_rows
#define eng_cuda_embed h_embed
#define eng_cuda_gather h_gather
#define eng_cuda_add_bias h_add_bias
#define eng_cuda_index_store h_index_store
#define eng_cuda_kv_store h_kv_store
#define eng_cuda_moe_route h_moe_route
#define eng_cuda_gemv_sel h_gemv_sel
#define eng_cuda_moe_mix h_moe_mix
#define eng_cuda_gate_add h_gate_add
#define eng_cuda_paged_attention h_paged_attention
#define eng_cuda_index_select h_index_select
#define eng_backend_cuda_init host_backend_init
#define eng_backend_cuda_free host_backend_free
#define eng_backend_cuda_uploaded host_backend_uploaded
#include "engine/cuda/backend.c"

#include "tests/engine/cuda_backend_cases.h"

static eng_model *load_dev(const char *dir, eng_model_options *o)
{
	o->backend = ENG_BACKEND_CPU;
	eng_model *m = NULL;
	if (eng_model_load(&m, dir, o) != 0)
		fail_msg("load %s: %s", dir, ev_error_msg());
	assert_int_equal(host_backend_init(&m->cuda, m), 0);
	m->be = &m->cuda;
	/* parts of two blocks: lists are cut and merged at these lengths */
	((cu_ctx *)m->cuda.ctx)->part_blocks = 2;
	g_page_bytes = m->kv.page_bytes;
	return m;
}

static void read_dev(void *host, const void *d, size_t bytes)
{
	dev(d, bytes, "read back");
	memcpy(host, d, bytes);
}

static void free_dev(eng_model *m)
{
	uint64_t up = host_backend_uploaded(&m->cuda);
	assert_true(up > 0);
	host_backend_free(&m->cuda); /* its weights; the pages go with the pool */
	eng_model_free(m);
}

/* Weights go up once: a second forward uploads no weight again, and a
 * decode step uploads only what changed (no whole page while current). */
static void weights_go_up_once_and_pages_stay_current(void **state)
{
	(void)state;
	setting st = {"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("cuda_host_once", "llama", &z, "f32", 3);
	eng_model *m = load(dir, ENG_BACKEND_CUDA, &st);
	int32_t *t = et_tokens(40, z.vocab, 5);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, 28, NULL), 0);
	uint64_t up = host_backend_uploaded(&m->cuda);
	long up0 = g_uploads, down0 = g_downloads, st0 = g_kv_stores;
	assert_int_equal(eng_forward(s, t + 28, 1, NULL), 0);
	assert_int_equal(host_backend_uploaded(&m->cuda), up);
	/* a decode step's copies between host and device: keys and values
	 * are stored on the device (one table up a layer), nothing comes
	 * down but the logits (no block completes at position 28) */
	long ups = g_uploads - up0, downs = g_downloads - down0;
	print_message("a decode step of %d layers: %ld uploads, %ld downloads, %ld device KV stores\n", m->c.layers, ups,
		      downs, g_kv_stores - st0);
	assert_int_equal(g_kv_stores - st0, m->c.layers);
	assert_int_equal(downs, 1);
	/* the two pages of the sequence are current on the device, the
	 * second one ahead of the host's data (keys stored there alone) */
	for (int b = 0; b < 2; b++)
		assert_true(s->pages[b]->dev && s->pages[b]->dev_gen == s->pages[b]->gen);
	assert_true(s->pages[1]->dev_ahead);
	assert_int_equal(pages_match(s), 2);
	/* pulled down, the host holds the device's keys, values and sums,
	 * and the copy stays current */
	{
		eng_kv_pool *p = &m->kv;
		eng_page *pg = s->pages[1];
		unsigned char *buf = malloc(p->page_bytes);
		assert_non_null(buf);
		read_dev(buf, pg->dev, p->page_bytes);
		assert_int_equal(eng_page_pull(p, pg), 0);
		assert_false(pg->dev_ahead);
		assert_true(pg->dev_gen == pg->gen);
		size_t kv = (size_t)2 * p->block * p->kvh * p->hd * p->esize + (size_t)p->kvh * p->hd * sizeof(float);
		for (int l = 0; l < p->layers; l++)
			assert_memory_equal(pg->data + (size_t)l * p->layer_bytes, buf + (size_t)l * p->layer_bytes, kv);
		free(buf);
		assert_int_equal(pages_match(s), 2);
	}
	/* a host-side write (a store by the CPU path) makes the copy stale;
	 * the next device store into the same page must not mark it current
	 * without bringing the rest up, and attention brings it up whole */
	assert_int_equal(eng_model_set_backend(m, ENG_BACKEND_CPU), 0);
	assert_int_equal(eng_forward(s, t + 29, 1, NULL), 0);
	assert_true(s->pages[1]->dev_gen != s->pages[1]->gen);
	m->be = &m->cuda;
	assert_int_equal(eng_forward(s, t + 30, 1, NULL), 0);
	assert_true(s->pages[1]->dev_gen == s->pages[1]->gen);
	assert_int_equal(pages_match(s), 2); /* it holds what the CPU path stored */
	eng_model *ref = load(dir, ENG_BACKEND_REF, &st);
	float *a = et_logits(ref, t, 31, 0);
	assert_true(et_rel_err(eng_seq_logits(s), a + (size_t)30 * z.vocab, (size_t)z.vocab) < 1e-5);
	free(a);
	eng_model_free(ref);
	print_message("weights uploaded: %llu bytes, once\n", (unsigned long long)up);
	free(t);
	eng_seq_free(s);
	free_dev(m);
	free(dir);
}

/* A failure of a device op comes back from the forward as its error, and
 * the backend works again after (the weight that failed goes up then). */
static void failures_come_back_from_the_forward(void **state)
{
	(void)state;
	setting st = {"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("cuda_host_fail", "llama", &z, "f32", 3);
	eng_model *m = load(dir, ENG_BACKEND_CUDA, &st), *ref = load(dir, ENG_BACKEND_REF, &st);
	int32_t *t = et_tokens(8, z.vocab, 5);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	g_fail_upload = true;
	int rc = eng_forward(s, t, 8, NULL);
	assert_int_equal(rc, EV_E_IO);
	print_message("a failing upload: %s\n", ev_error_msg());
	assert_non_null(strstr(ev_error_msg(), "launch failure"));
	eng_seq_free(s);
	assert_int_equal(eng_seq_new(&s, m), 0);
	float *a = et_logits(ref, t, 8, 0), *b = malloc((size_t)8 * z.vocab * sizeof(float));
	assert_int_equal(eng_forward(s, t, 8, b), 0);
	assert_true(et_rel_err(b, a, (size_t)8 * z.vocab) < 1e-5);
	free(a), free(b), free(t);
	eng_seq_free(s);
	eng_model_free(ref);
	free_dev(m);
	free(dir);
}

/* Block-type weights (here Q8_0 attention and Q4_1 MLP projections, put
 * in place of a model's f32 ones on both sides) go up as stored and are
 * read in place (decode) or decoded for the prefill GEMM, each element by
 * the format's definition: the device's logits are the reference's. */
static void block_weights_go_up_as_stored(void **state)
{
	(void)state;
	setting st = {"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("cuda_host_q", "llama", &z, "f32", 23);
	eng_model *ref = load(dir, ENG_BACKEND_REF, &st), *m = load(dir, ENG_BACKEND_CUDA, &st);
	void *blocks[64];
	int nb = 0;
	for (int l = 0; l < ref->c.layers; l++) {
		eng_weight *wr[] = {&ref->layers[l].wq, &ref->layers[l].wk, &ref->layers[l].wv, &ref->layers[l].wo,
				    &ref->layers[l].ffn.gate, &ref->layers[l].ffn.up};
		eng_weight *wd[] = {&m->layers[l].wq, &m->layers[l].wk, &m->layers[l].wv, &m->layers[l].wo,
				    &m->layers[l].ffn.gate, &m->layers[l].ffn.up};
		for (int k = 0; k < 6; k++) {
			eng_dtype t = k < 4 ? ENG_Q8_0 : ENG_Q4_1;
			size_t n = (size_t)wr[k]->rows * wr[k]->cols;
			assert_int_equal(wr[k]->dtype, ENG_F32);
			void *q = malloc(eng_dtype_bytes(t, n));
			assert_non_null(q);
			eng_ggml_quantize(q, wr[k]->data, eng_dtype_ggml(t), n);
			wr[k]->data = wd[k]->data = q;
			wr[k]->dtype = wd[k]->dtype = t;
			blocks[nb++] = q;
			if (t == ENG_Q4_1 && wd[k]->rows % 4 == 0) {
				/* the device model's Q4_1 rows as quads (as the fast CPU
				 * path lays them out): they go up as rows as stored */
				uint8_t *q4 = malloc(eng_dtype_bytes(t, n));
				assert_non_null(q4);
				eng_qx4_pack_rows(q4, q, wd[k]->rows, wd[k]->cols / 32, t);
				wd[k]->data = q4;
				wd[k]->x4 = true;
				blocks[nb++] = q4;
			}
		}
	}
	int32_t *t = et_tokens(40, z.vocab, 29);
	float *a = et_logits(ref, t, 40, 0), *b = et_logits(m, t, 40, 0), *c = et_logits(m, t, 40, 1);
	double e = et_rel_err(b, a, (size_t)40 * z.vocab), e1 = et_rel_err(c, a, (size_t)40 * z.vocab);
	print_message("Q8_0 and Q4_1 weights (the device's Q4_1 as quads): device vs reference %.3g (at once), %.3g "
		      "(token by token); %llu bytes up\n",
		      e, e1, (unsigned long long)host_backend_uploaded(&m->cuda));
	assert_true(e < 1e-4 && e1 < 1e-4);
	/* as stored: against the same model's f32 upload, exactly the bytes
	 * the quantized projections save */
	eng_model *m32 = load(dir, ENG_BACKEND_CUDA, &st);
	float *d = et_logits(m32, t, 40, 0);
	uint64_t saved = 0;
	for (int l = 0; l < m->c.layers; l++) {
		const eng_layer *L = &m->layers[l];
		const eng_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn.gate, &L->ffn.up};
		for (int k = 0; k < 6; k++)
			saved += (uint64_t)ws[k]->rows * ws[k]->cols * 4 -
				 eng_dtype_bytes(ws[k]->dtype, (size_t)ws[k]->rows * ws[k]->cols);
	}
	assert_int_equal(host_backend_uploaded(&m32->cuda) - host_backend_uploaded(&m->cuda), saved);
	free(d);
	free_dev(m32);
	free(a), free(b), free(c), free(t);
	free_dev(m);
	eng_model_free(ref);
	for (int i = 0; i < nb; i++)
		free(blocks[i]);
	free(dir);
}

/* MiniMax-M3's index keys stored on the device alone come down when the
 * host needs them: after device prefill and decode steps, a fork mid-page
 * and a switch to the CPU path, the CPU's fast indexer (which prunes by
 * the keys' boxes, rebuilt from the pulled keys) gives the reference's
 * logits, for the sequence and its fork; the backend downloads no index
 * key on the device's steps. */
static void m3_index_keys_come_down_for_the_cpu(void **state)
{
	(void)state;
	setting st = {"minimax_m3", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 384;
	char *dir = et_mkmodel("cuda_host_m3", "minimax_m3", &z, "f32", 61);
	eng_model *ref = load(dir, ENG_BACKEND_REF, &st), *dev = load(dir, ENG_BACKEND_CUDA, &st);
	int32_t *t = et_tokens(700, z.vocab, 62);
	eng_seq *r = NULL, *d = NULL, *rf = NULL, *df = NULL;
	assert_int_equal(eng_seq_new(&r, ref), 0);
	assert_int_equal(eng_seq_new(&d, dev), 0);
	long d0 = g_downloads;
	assert_int_equal(eng_forward(r, t, 600, NULL), 0);
	assert_int_equal(eng_forward(d, t, 600, NULL), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(eng_forward(r, t + 600 + i, 1, NULL), 0);
		assert_int_equal(eng_forward(d, t + 600 + i, 1, NULL), 0);
	}
	/* what the backend brings down on the device's 6 forwards: each one's
	 * logits, the prefill's router logits for the host's MoE loop (a
	 * chunk of up to 256 rows at a time), a completed block's key sums a
	 * layer; no index keys (they would add one a sparse layer a forward).
	 * (The indexer op's own copy of its lists is inside the op, not
	 * counted here.) */
	long downs = g_downloads - d0, moe_layers = 0, sparse = 0;
	for (int l = 0; l < dev->c.layers; l++)
		moe_layers += dev->layers[l].moe, sparse += dev->c.sparse_layer[l] != 0;
	long want = 6 + 3 * moe_layers + 605 / dev->kv.block * dev->c.layers;
	assert_true(sparse > 0);
	double worst = et_rel_err(eng_seq_logits(d), eng_seq_logits(r), (size_t)z.vocab);
	assert_int_equal(eng_seq_fork(&rf, r, 300), 0);
	assert_int_equal(eng_seq_fork(&df, d, 300), 0);
	assert_int_equal(eng_model_set_backend(dev, ENG_BACKEND_CPU), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(eng_forward(r, t + 605 + i, 1, NULL), 0);
		assert_int_equal(eng_forward(d, t + 605 + i, 1, NULL), 0);
		double e = et_rel_err(eng_seq_logits(d), eng_seq_logits(r), (size_t)z.vocab);
		worst = e > worst ? e : worst;
	}
	assert_int_equal(eng_forward(rf, t + 650, 12, NULL), 0);
	assert_int_equal(eng_forward(df, t + 650, 12, NULL), 0);
	double ef = et_rel_err(eng_seq_logits(df), eng_seq_logits(rf), (size_t)z.vocab);
	worst = ef > worst ? ef : worst;
	print_message("m3: device steps, then a fork and the CPU path: worst error against the reference %.3g; %ld downloads "
		      "on the device's 6 forwards (%ld expected; the index keys would add %ld)\n", worst, downs, want, 6 * sparse);
	assert_true(worst < 1e-5);
	assert_int_equal(downs, want);
	eng_seq_free(r), eng_seq_free(d), eng_seq_free(rf), eng_seq_free(df);
	free(t);
	eng_model_free(ref);
	free_dev(dev);
	free(dir);
}

/* Decode steps' MoE blocks run on the device (the backend's moe op: the
 * shared expert, the routing, the experts) give the bits of the forward's
 * host loop over the same device ops, for softmax routers with and
 * without a shared expert's gate (Qwen3-MoE, Qwen2-MoE) and MiniMax-M3's
 * sigmoid router with its bias and ungated shared expert; and every step
 * takes the device's way (nothing comes down but the logits). */
static void moe_decode_on_the_device_equals_host_routing(void **state)
{
	(void)state;
	static const struct {
		const char *arch, *dtype;
		bool q8; /* the experts' weights made Q8_0 */
	} ms[] = {{"qwen3_moe", "f32", false}, {"qwen2_moe", "bf16", false}, {"minimax_m3", "f32", false},
		  {"qwen3_moe", "f32", true}};
	for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++) {
		setting st = {ms[a].arch, ms[a].dtype, ENG_KV_F32, ENG_ATTN_AUTO, 16};
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.vocab = 384;
		char *dir = et_mkmodel("cuda_host_moe", ms[a].arch, &z, ms[a].dtype, 41 + a);
		eng_model *m = load(dir, ENG_BACKEND_CUDA, &st);
		void *q8[256];
		int nq = 0;
		for (int l = 0; ms[a].q8 && l < m->c.layers; l++)
			for (int e = 0; m->layers[l].moe && e < m->c.experts; e++) {
				eng_weight *ws[] = {&m->layers[l].experts[e].gate, &m->layers[l].experts[e].up,
						    &m->layers[l].experts[e].down};
				for (int k = 0; k < 3; k++) {
					size_t cnt = (size_t)ws[k]->rows * ws[k]->cols;
					assert_true(nq < 256 && ws[k]->dtype == ENG_F32 && ws[k]->cols % 32 == 0);
					q8[nq] = malloc(eng_dtype_bytes(ENG_Q8_0, cnt));
					eng_ggml_quantize(q8[nq], ws[k]->data, eng_dtype_ggml(ENG_Q8_0), cnt);
					ws[k]->data = q8[nq++];
					ws[k]->dtype = ENG_Q8_0;
				}
			}
		int32_t *t = et_tokens(30, z.vocab, 43);
		float *lg[2];
		long routes = 0, downs = 0;
		for (int way = 0; way < 2; way++) { /* 0: the device's moe op; 1: the host's loop */
			m->cuda.moe = way ? NULL : cu_moe;
			eng_seq *s = NULL;
			assert_int_equal(eng_seq_new(&s, m), 0);
			/* one token first (the experts' tables made), then a prefill
			 * (block-type weights dequantized for GEMMs), then decode */
			assert_int_equal(eng_forward(s, t, 1, NULL), 0);
			assert_int_equal(eng_forward(s, t + 1, 23, NULL), 0);
			lg[way] = malloc((size_t)6 * z.vocab * sizeof(float));
			long r0 = g_moe_routes, d0 = g_downloads;
			for (int i = 0; i < 6; i++) {
				assert_int_equal(eng_forward(s, t + 24 + i, 1, NULL), 0);
				memcpy(lg[way] + (size_t)i * z.vocab, eng_seq_logits(s), (size_t)z.vocab * sizeof(float));
			}
			if (!way)
				routes = g_moe_routes - r0, downs = g_downloads - d0;
			eng_seq_free(s);
		}
		print_message("moe decode on the device: %s %s%s, 6 steps: %ld routings on the device, %ld downloads; logits %s "
			      "the host loop's\n", ms[a].arch, ms[a].dtype, ms[a].q8 ? " (Q8_0 experts)" : "", routes, downs,
			      memcmp(lg[0], lg[1], (size_t)6 * z.vocab * sizeof(float)) ? "DIFFER from" : "equal to");
		long moe_layers = 0;
		for (int l = 0; l < m->c.layers; l++)
			moe_layers += m->layers[l].moe;
		assert_true(moe_layers > 0);
		assert_int_equal(routes, 6 * moe_layers);
		free_dev(m);
		for (int i = 0; i < nq; i++)
			free(q8[i]);
		m = NULL;
		assert_int_equal(downs, 6); /* the logits alone: no router logits, no shared gate, no index keys */
		assert_memory_equal(lg[0], lg[1], (size_t)6 * z.vocab * sizeof(float));
		free(lg[0]), free(lg[1]), free(t);
		free(dir);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CUDA_BACKEND_TESTS,
		cmocka_unit_test(weights_go_up_once_and_pages_stay_current),
		cmocka_unit_test(failures_come_back_from_the_forward),
		cmocka_unit_test(block_weights_go_up_as_stored),
		cmocka_unit_test(moe_decode_on_the_device_equals_host_routing),
		cmocka_unit_test(m3_index_keys_come_down_for_the_cpu),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	/* every model freed: no device memory is left behind (weights, page
	 * copies, forward scratch, the dequantization buffer) */
	printf("%ld prefill GEMMs ran; %ld attention lists were cut into parts and merged; %ld indexer choices made on "
	       "the device; %ld experts' rows mixed in one call each; %ld uploads; %ld device bytes in %d blocks left at "
	       "the end\n", g_gemms, g_items_merged, g_index_calls, g_axpy_rows, g_uploads, g_live_bytes, g_nblk);
	if (!rc && (g_gemms == 0 || g_items_merged == 0 || g_index_calls == 0 || g_axpy_rows == 0 || g_live_bytes != 0 ||
		    g_nblk != 0))
		return 1;
	return rc;
}
