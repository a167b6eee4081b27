/*
 * engine/cpu/ref.c: the reference backend. Plain loops, one thread, f32
 * arithmetic in the obvious order: the oracle every other path is tested
 * against. Its rope and kv_store are shared with the fast CPU path (they
 * are cheap and exact); everything else there is rewritten for speed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/qdot.h"

static float wget(const eng_weight *w, size_t r, size_t c)
{
	size_t i = r * (size_t)w->cols + c;
	switch (w->dtype) {
	case ENG_F32: return ((const float *)w->data)[i];
	case ENG_F16: return eng_f16_to_f32(((const uint16_t *)w->data)[i]);
	case ENG_BF16: return eng_bf16_to_f32(((const uint16_t *)w->data)[i]);
	default: { /* the element's block, decoded as the format defines it */
		float blk[256];
		size_t B = (size_t)eng_dtype_block(w->dtype);
		if (w->x4) { /* block c / B of the row's quad, row r % 4 of it */
			size_t bsz = eng_dtype_bytes(w->dtype, B), rb = bsz * ((size_t)w->cols / B);
			uint8_t one[256];
			eng_qx4_row(one, (const uint8_t *)w->data + (r - r % 4) * rb + c / B * 4 * bsz, (int)(r % 4),
			            (int)B / 32, (int)w->dtype);
			eng_to_f32(blk, one, w->dtype, B);
			return blk[c % B];
		}
		eng_to_f32(blk, (const char *)w->data + eng_dtype_bytes(w->dtype, i / B * B), w->dtype, B);
		return blk[i % B];
	}
	}
}

static void ref_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	for (int i = 0; i < n; i++)
		for (int r = 0; r < w->rows; r++) {
			float acc = 0;
			for (int c = 0; c < w->cols; c++)
				acc += x[(size_t)i * w->cols + c] * wget(w, (size_t)r, (size_t)c);
			y[(size_t)i * w->rows + r] = acc + (bias ? bias[r] : 0.0f);
		}
}

void eng_cpu_rmsnorm(eng_backend *be, float *y, const float *x, const float *g, int n, int d, float eps)
{
	for (int i = 0; i < n; i++) {
		const float *xi = x + (size_t)i * d;
		float *yi = y + (size_t)i * d;
		float ss = 0;
		for (int j = 0; j < d; j++)
			ss += xi[j] * xi[j];
		float r = 1.0f / sqrtf(ss / (float)d + eps);
		for (int j = 0; j < d; j++)
			yi[j] = xi[j] * r * g[j];
	}
}

void eng_cpu_rope(eng_backend *be, float *x, int n, int nh, int hd, int rd, const long *pos, const float *inv_freq)
{
	int half = rd / 2; /* the first rd channels turn; the rest pass through */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < half; j++) {
			double a = (double)pos[i] * (double)inv_freq[j];
			float cs = (float)cos(a), sn = (float)sin(a);
			for (int h = 0; h < nh; h++) {
				float *v = x + ((size_t)i * nh + h) * hd;
				float x1 = v[j], x2 = v[j + half];
				v[j] = x1 * cs - x2 * sn;
				v[j + half] = x2 * cs + x1 * sn;
			}
		}
}

void eng_cpu_kv_store(eng_backend *be, const eng_row *rows, int n, int layer, const float *k, const float *v)
{
	eng_kv_pool *p = &be->m->kv;
	size_t kd = (size_t)p->kvh * p->hd;
	for (int i = 0; i < n; i++) {
		eng_seq *s = rows[i].seq;
		long pos = rows[i].pos;
		eng_page *pg = s->pages[pos / p->block];
		int slot = (int)(pos % p->block);
		const float *ki = k + (size_t)i * kd, *vi = v + (size_t)i * kd;
		float *sum = eng_page_ksum(p, pg, layer);
		if (p->dtype == ENG_F32) {
			memcpy(eng_page_k(p, pg, layer, slot), ki, kd * sizeof(float));
			memcpy(eng_page_v(p, pg, layer, slot), vi, kd * sizeof(float));
			for (size_t j = 0; j < kd; j++)
				sum[j] += ki[j];
		} else {
			/* the sum adds the key as stored, so that it equals a
			 * re-summing of the page's keys */
			uint16_t *kq = eng_page_kraw(p, pg, layer, slot), *vq = eng_page_vraw(p, pg, layer, slot);
			bool half = p->dtype == ENG_F16;
			for (size_t j = 0; j < kd; j++) {
				kq[j] = half ? eng_f32_to_f16(ki[j]) : eng_f32_to_bf16(ki[j]);
				vq[j] = half ? eng_f32_to_f16(vi[j]) : eng_f32_to_bf16(vi[j]);
				sum[j] += half ? eng_f16_to_f32(kq[j]) : eng_bf16_to_f32(kq[j]);
			}
		}
		if (slot + 1 > pg->ntok)
			pg->ntok = slot + 1;
		pg->gen = ++p->gen;
		if (slot == p->block - 1) /* the block is complete: into the index */
			eng_msa_index_put(s->kidx[layer], s->kbox[layer], pos / p->block, sum,
					  p->kvh, p->hd);
	}
}

/* Reference scratch: grows with the longest sequence seen (scores of
 * every position, block flags and block scores), one thread. */
typedef struct {
	long cap;
	float *sc, *bsc;
	unsigned char *att;
} ref_ctx;

static int ref_reserve(eng_backend *be, long max_len)
{
	ref_ctx *rc = be->ctx;
	if (max_len <= rc->cap)
		return 0;
	long cap = rc->cap ? rc->cap : 1024;
	while (cap < max_len)
		cap *= 2;
	long nb = cap / be->m->kv.block + 2;
	float *sc = realloc(rc->sc, (size_t)cap * sizeof(float));
	if (sc)
		rc->sc = sc;
	float *bsc = realloc(rc->bsc, (size_t)nb * sizeof(float));
	if (bsc)
		rc->bsc = bsc;
	unsigned char *att = realloc(rc->att, (size_t)nb);
	if (att)
		rc->att = att;
	if (!sc || !bsc || !att)
		return ev_error_set(EV_E_NOMEM, "out of memory for reference attention scratch (%ld positions)", cap);
	rc->cap = cap;
	return 0;
}

/* The definition, plainly: per row and KV head, the attended blocks (all of
 * them, or MSA's choice); per query head, softmax over exactly the
 * positions s <= pos in those blocks (and inside the window). */
static void ref_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer,
			  int nh, long window, const int *lists, const int *nls, int nlist)
{
	eng_model *m = be->m;
	eng_kv_pool *p = &m->kv;
	ref_ctx *rc = be->ctx;
	int hd = p->hd, group = nh / p->kvh, B = p->block;
	float scale = 1.0f / sqrtf((float)hd);
	for (int i = 0; i < n; i++) {
		eng_seq *s = rows[i].seq;
		long pos = rows[i].pos, lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
		long cur = pos / B;
		float *sc = rc->sc;
		const float *qi = q + (size_t)i * nh * hd;
		for (int g = 0; g < p->kvh; g++) {
			int nl = lists ? nls[(size_t)i * p->kvh + g] : -1;
			if (nl >= 0) { /* the indexer's blocks */
				memset(rc->att, 0, (size_t)cur + 1);
				for (int k = 0; k < nl; k++)
					rc->att[lists[((size_t)i * p->kvh + g) * nlist + k]] = 1;
			} else if (eng_msa_sparse(m, layer, pos)) {
				eng_msa_select_ref(m, s, layer, pos, g, qi, rc->att, rc->bsc);
			} else {
				memset(rc->att, 1, (size_t)cur + 1);
			}
			for (int h = g * group; h < (g + 1) * group; h++) {
				const float *qh = qi + (size_t)h * hd;
				float *oh = out + ((size_t)i * nh + h) * hd;
				float mx = -INFINITY;
				for (long t = lo; t <= pos; t++) {
					if (!rc->att[t / B])
						continue;
					float d = 0;
					for (int j = 0; j < hd; j++) {
						float kj;
						eng_kv_load(p, &kj,
							    (unsigned char *)eng_page_kraw(p, s->pages[t / B], layer, (int)(t % B)) +
								    ((size_t)g * hd + j) * p->esize,
							    1);
						d += qh[j] * kj;
					}
					sc[t] = d * scale;
					mx = sc[t] > mx ? sc[t] : mx;
				}
				float sum = 0;
				for (long t = lo; t <= pos; t++)
					if (rc->att[t / B]) {
						sc[t] = expf(sc[t] - mx);
						sum += sc[t];
					}
				for (int j = 0; j < hd; j++)
					oh[j] = 0;
				for (long t = lo; t <= pos; t++) {
					if (!rc->att[t / B])
						continue;
					float w = sc[t] / sum;
					for (int j = 0; j < hd; j++) {
						float vj;
						eng_kv_load(p, &vj,
							    (unsigned char *)eng_page_vraw(p, s->pages[t / B], layer, (int)(t % B)) +
								    ((size_t)g * hd + j) * p->esize,
							    1);
						oh[j] += w * vj;
					}
				}
			}
		}
	}
}

static void ref_axpy(eng_backend *be, float *y, const float *x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

void eng_cpu_swiglu(eng_backend *be, float *g, const float *u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void *cpu_alloc(eng_backend *be, size_t bytes)
{
	void *p = NULL;
	return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

static void cpu_release(eng_backend *be, void *p)
{
	free(p);
}

static void cpu_to_host(eng_backend *be, float *host, const float *src, size_t n)
{
	memcpy(host, src, n * sizeof(float));
}

static void cpu_from_host(eng_backend *be, float *dst, const float *host, size_t n)
{
	memcpy(dst, host, n * sizeof(float));
}

static void cpu_embed(eng_backend *be, float *x, const int32_t *tok, int n)
{
	const eng_weight *e = &be->m->embed;
	for (int i = 0; i < n; i++)
		eng_weight_row_f32(x + (size_t)i * e->cols, e, tok[i]);
}

static void cpu_gather(eng_backend *be, float *dst, const float *src, const int *idx, int n, int width)
{
	for (int i = 0; i < n; i++)
		memmove(dst + (size_t)i * width, src + (size_t)idx[i] * width, (size_t)width * sizeof(float));
}

void eng_cpu_axpy_rows(eng_backend *be, float *y, const float *x, const int *rows, const float *a, int n, int width)
{
	for (int j = 0; j < n; j++)
		be->axpy(be, y + (size_t)rows[j] * width, x + (size_t)j * width, a[j], (size_t)width);
}

/* The ops both CPU paths take as they are. */
void eng_cpu_swiglu_oai(eng_backend *be, float *g, const float *u, size_t n, float alpha, float limit)
{
	(void)be;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] > limit ? limit : g[i];
		float ui = u[i] > limit ? limit : u[i] < -limit ? -limit : u[i];
		g[i] = (ui + 1.0f) * (gi / (1.0f + expf(-alpha * gi)));
	}
}

void eng_cpu_fill_common(eng_backend *be)
{
	be->alloc = cpu_alloc;
	be->release = cpu_release;
	be->to_host = cpu_to_host;
	be->from_host = cpu_from_host;
	be->embed = cpu_embed;
	be->gather = cpu_gather;
	be->rmsnorm = eng_cpu_rmsnorm;
	be->rope = eng_cpu_rope;
	be->kv_store = eng_cpu_kv_store;
	be->swiglu = eng_cpu_swiglu;
	be->swiglu_oai = eng_cpu_swiglu_oai;
	be->index_select = eng_index_select;
	be->axpy_rows = eng_cpu_axpy_rows;
}

int eng_backend_ref_init(eng_backend *be, eng_model *m)
{
	memset(be, 0, sizeof(*be));
	be->name = "ref";
	be->m = m;
	eng_cpu_fill_common(be);
	be->matmul = ref_matmul;
	be->attention = ref_attention;
	be->reserve = ref_reserve;
	be->axpy = ref_axpy;
	if (!(be->ctx = calloc(1, sizeof(ref_ctx))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	return ref_reserve(be, 1024);
}

void eng_backend_ref_free(eng_backend *be)
{
	ref_ctx *rc = be ? be->ctx : NULL;
	if (!rc)
		return;
	free(rc->sc), free(rc->bsc), free(rc->att);
	free(rc);
	be->ctx = NULL;
}
