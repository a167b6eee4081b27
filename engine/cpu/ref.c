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

static float wget(const eng_weight *w, size_t r, size_t c)
{
	size_t i = r * (size_t)w->cols + c;
	switch (w->dtype) {
	case ENG_F32: return ((const float *)w->data)[i];
	case ENG_F16: return eng_f16_to_f32(((const uint16_t *)w->data)[i]);
	case ENG_BF16: return eng_bf16_to_f32(((const uint16_t *)w->data)[i]);
	}
	return 0;
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

void eng_cpu_rope(eng_backend *be, float *x, int n, int nh, int hd, const long *pos, const float *inv_freq)
{
	int half = hd / 2;
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
		memcpy(eng_page_k(p, pg, layer, slot), k + (size_t)i * kd, kd * sizeof(float));
		memcpy(eng_page_v(p, pg, layer, slot), v + (size_t)i * kd, kd * sizeof(float));
		float *sum = eng_page_ksum(p, pg, layer);
		for (size_t j = 0; j < kd; j++)
			sum[j] += k[(size_t)i * kd + j];
		if (slot + 1 > pg->ntok)
			pg->ntok = slot + 1;
	}
}

static void ref_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer,
			  int nh, long window)
{
	eng_kv_pool *p = &be->m->kv;
	int hd = p->hd, group = nh / p->kvh;
	float scale = 1.0f / sqrtf((float)hd);
	for (int i = 0; i < n; i++) {
		eng_seq *s = rows[i].seq;
		long pos = rows[i].pos, lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
		float *sc = be->ctx; /* max_context floats */
		for (int h = 0; h < nh; h++) {
			int g = h / group;
			const float *qh = q + ((size_t)i * nh + h) * hd;
			float *oh = out + ((size_t)i * nh + h) * hd;
			float mx = -INFINITY;
			for (long t = lo; t <= pos; t++) {
				const float *kt = eng_page_k(p, s->pages[t / p->block], layer, (int)(t % p->block)) + (size_t)g * hd;
				float d = 0;
				for (int j = 0; j < hd; j++)
					d += qh[j] * kt[j];
				sc[t] = d * scale;
				mx = sc[t] > mx ? sc[t] : mx;
			}
			float sum = 0;
			for (long t = lo; t <= pos; t++) {
				sc[t] = expf(sc[t] - mx);
				sum += sc[t];
			}
			for (int j = 0; j < hd; j++)
				oh[j] = 0;
			for (long t = lo; t <= pos; t++) {
				const float *vt = eng_page_v(p, s->pages[t / p->block], layer, (int)(t % p->block)) + (size_t)g * hd;
				float w = sc[t] / sum;
				for (int j = 0; j < hd; j++)
					oh[j] += w * vt[j];
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

static void cpu_embed(eng_backend *be, float *x, const int32_t *tok, int n)
{
	const eng_weight *e = &be->m->embed;
	size_t rb = (size_t)e->cols * eng_dtype_size(e->dtype);
	for (int i = 0; i < n; i++)
		eng_to_f32(x + (size_t)i * e->cols, (const char *)e->data + (size_t)tok[i] * rb, e->dtype, (size_t)e->cols);
}

static void cpu_gather(eng_backend *be, float *dst, const float *src, const int *idx, int n, int width)
{
	for (int i = 0; i < n; i++)
		memmove(dst + (size_t)i * width, src + (size_t)idx[i] * width, (size_t)width * sizeof(float));
}

/* The ops both CPU paths take as they are. */
void eng_cpu_fill_common(eng_backend *be)
{
	be->alloc = cpu_alloc;
	be->release = cpu_release;
	be->to_host = cpu_to_host;
	be->embed = cpu_embed;
	be->gather = cpu_gather;
	be->rmsnorm = eng_cpu_rmsnorm;
	be->rope = eng_cpu_rope;
	be->kv_store = eng_cpu_kv_store;
	be->swiglu = eng_cpu_swiglu;
}

int eng_backend_ref_init(eng_backend *be, eng_model *m)
{
	memset(be, 0, sizeof(*be));
	be->name = "ref";
	be->m = m;
	eng_cpu_fill_common(be);
	be->matmul = ref_matmul;
	be->attention = ref_attention;
	be->axpy = ref_axpy;
	if (!(be->ctx = malloc((size_t)m->max_context * sizeof(float))))
		return ev_error_set(EV_E_NOMEM, "out of memory for attention scores (%ld positions)", m->max_context);
	return 0;
}

void eng_backend_ref_free(eng_backend *be)
{
	free(be->ctx);
	be->ctx = NULL;
}
