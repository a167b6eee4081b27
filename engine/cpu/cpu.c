/*
 * engine/cpu/cpu.c: the fast CPU backend. The matmul splits the weight's
 * output rows over the thread pool; each task takes blocks of 4 weight rows
 * (F16/BF16 rows converted to f32 once per block) and multiplies them with
 * every row of the batch, so the weights stream from memory once per call
 * however many tokens there are (prefill = GEMM). Attention runs one task
 * per (row, head). Dot products use AVX2/FMA where the build has them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ENG_AVX2 1
#endif

#include "engine/backend.h"

typedef struct {
	eng_pool *pool;
	int nw;
	float **wconv;   /* per worker: 4 rows of converted weights */
	float **scores;  /* per worker: max_context attention scores */
	size_t maxcols;
} cpu_ctx;

static float dot(const float *a, const float *b, int n)
{
	int i = 0;
	float s = 0;
#ifdef ENG_AVX2
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	for (; i + 16 <= n; i += 16) {
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
		acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
	}
	for (; i + 8 <= n; i += 8)
		acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
	acc0 = _mm256_add_ps(acc0, acc1);
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	s = _mm_cvtss_f32(h);
#endif
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* out[j] = w_j . x for the 4 weight rows w0..w3 (length n) */
static void dot4(float out[4], const float *x, const float *w0, const float *w1, const float *w2, const float *w3,
		 int n)
{
	int i = 0;
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#ifdef ENG_AVX2
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + i), a0);
		a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w1 + i), a1);
		a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w2 + i), a2);
		a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w3 + i), a3);
	}
	/* horizontal sums of the four accumulators at once */
	__m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
	__m256 t2 = _mm256_hadd_ps(t0, t1);
	__m128 r = _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
	float tmp[4];
	_mm_storeu_ps(tmp, r);
	s0 = tmp[0], s1 = tmp[1], s2 = tmp[2], s3 = tmp[3];
#endif
	for (; i < n; i++) {
		s0 += x[i] * w0[i];
		s1 += x[i] * w1[i];
		s2 += x[i] * w2[i];
		s3 += x[i] * w3[i];
	}
	out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

/* o0[j] = w_j . x0 and o1[j] = w_j . x1: two batch rows share each weight
 * load, which is what makes prefill compute-bound rather than load-bound */
static void dot4x2(float o0[4], float o1[4], const float *x0, const float *x1, const float *const w[4], int n)
{
	int i = 0;
	float s0[4] = {0}, s1[4] = {0};
#ifdef ENG_AVX2
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(x0 + i), y = _mm256_loadu_ps(x1 + i), v;
		v = _mm256_loadu_ps(w[0] + i);
		a0 = _mm256_fmadd_ps(x, v, a0);
		b0 = _mm256_fmadd_ps(y, v, b0);
		v = _mm256_loadu_ps(w[1] + i);
		a1 = _mm256_fmadd_ps(x, v, a1);
		b1 = _mm256_fmadd_ps(y, v, b1);
		v = _mm256_loadu_ps(w[2] + i);
		a2 = _mm256_fmadd_ps(x, v, a2);
		b2 = _mm256_fmadd_ps(y, v, b2);
		v = _mm256_loadu_ps(w[3] + i);
		a3 = _mm256_fmadd_ps(x, v, a3);
		b3 = _mm256_fmadd_ps(y, v, b3);
	}
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	_mm_storeu_ps(s0, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
	t = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
	_mm_storeu_ps(s1, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
#endif
	for (; i < n; i++)
		for (int k = 0; k < 4; k++) {
			s0[k] += x0[i] * w[k][i];
			s1[k] += x1[i] * w[k][i];
		}
	memcpy(o0, s0, sizeof(s0));
	memcpy(o1, s1, sizeof(s1));
}

typedef struct {
	cpu_ctx *cc;
	float *y;
	const float *x;
	int n;
	const eng_weight *w;
	const float *bias;
	int rows_per_task;
} mm_job;

static const float *wrow(const mm_job *j, int r, float *buf)
{
	const eng_weight *w = j->w;
	size_t off = (size_t)r * (size_t)w->cols;
	if (w->dtype == ENG_F32)
		return (const float *)w->data + off;
	eng_to_f32(buf, (const uint16_t *)w->data + off, w->dtype, (size_t)w->cols);
	return buf;
}

static void mm_task(void *ctx, int task, int worker)
{
	mm_job *j = ctx;
	const eng_weight *w = j->w;
	int K = w->cols, R = w->rows;
	int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
	if (r1 > R)
		r1 = R;
	float *buf = j->cc->wconv[worker];
	for (int r = r0; r < r1; r += 4) {
		int nr = r1 - r < 4 ? r1 - r : 4;
		const float *wr[4];
		for (int k = 0; k < 4; k++)
			wr[k] = wrow(j, r + (k < nr ? k : 0), buf + (size_t)k * K);
		int i = 0;
		for (; i + 2 <= j->n; i += 2) {
			float o0[4], o1[4];
			dot4x2(o0, o1, j->x + (size_t)i * K, j->x + (size_t)(i + 1) * K, wr, K);
			float *y0 = j->y + (size_t)i * R + r, *y1 = y0 + R;
			for (int k = 0; k < nr; k++) {
				y0[k] = o0[k] + (j->bias ? j->bias[r + k] : 0.0f);
				y1[k] = o1[k] + (j->bias ? j->bias[r + k] : 0.0f);
			}
		}
		for (; i < j->n; i++) {
			float o[4];
			dot4(o, j->x + (size_t)i * K, wr[0], wr[1], wr[2], wr[3], K);
			float *yi = j->y + (size_t)i * R + r;
			for (int k = 0; k < nr; k++)
				yi[k] = o[k] + (j->bias ? j->bias[r + k] : 0.0f);
		}
	}
}

static void cpu_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	cpu_ctx *cc = be->ctx;
	int tasks_wanted = cc->nw * 8;
	int per = (w->rows + tasks_wanted - 1) / tasks_wanted;
	per = (per + 3) / 4 * 4;
	if (per < 8)
		per = 8;
	mm_job j = {cc, y, x, n, w, bias, per};
	eng_pool_run(cc->pool, mm_task, &j, (w->rows + per - 1) / per);
}

typedef struct {
	cpu_ctx *cc;
	eng_model *m;
	float *out;
	const float *q;
	const eng_row *rows;
	int layer, nh;
	long window;
} att_job;

static void att_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	eng_kv_pool *p = &j->m->kv;
	int i = task / j->nh, h = task % j->nh, hd = p->hd, g = h / (j->nh / p->kvh), B = p->block;
	eng_seq *s = j->rows[i].seq;
	long pos = j->rows[i].pos, lo = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
	const float *qh = j->q + ((size_t)i * j->nh + h) * hd;
	float *oh = j->out + ((size_t)i * j->nh + h) * hd, *sc = j->cc->scores[worker];
	float scale = 1.0f / sqrtf((float)hd), mx = -INFINITY;
	for (long t = lo; t <= pos; t++) {
		const float *kt = eng_page_k(p, s->pages[t / B], j->layer, (int)(t % B)) + (size_t)g * hd;
		sc[t] = dot(qh, kt, hd) * scale;
		mx = sc[t] > mx ? sc[t] : mx;
	}
	float sum = 0;
	for (long t = lo; t <= pos; t++) {
		sc[t] = expf(sc[t] - mx);
		sum += sc[t];
	}
	float inv = 1.0f / sum;
	memset(oh, 0, (size_t)hd * sizeof(float));
	for (long t = lo; t <= pos; t++) {
		const float *vt = eng_page_v(p, s->pages[t / B], j->layer, (int)(t % B)) + (size_t)g * hd;
		float w = sc[t] * inv;
		for (int d = 0; d < hd; d++)
			oh[d] += w * vt[d];
	}
}

static void cpu_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer,
			  int nh, long window)
{
	att_job j = {be->ctx, be->m, out, q, rows, layer, nh, window};
	eng_pool_run(((cpu_ctx *)be->ctx)->pool, att_task, &j, n * nh);
}

static void cpu_axpy(eng_backend *be, float *y, const float *x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

int eng_backend_cpu_init(eng_backend *be, eng_model *m, int threads)
{
	memset(be, 0, sizeof(*be));
	be->name = "cpu";
	be->m = m;
	eng_cpu_fill_common(be);
	be->matmul = cpu_matmul;
	be->attention = cpu_attention;
	be->axpy = cpu_axpy;
	cpu_ctx *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	be->ctx = cc;
	int rc = eng_pool_new(&cc->pool, threads);
	if (rc)
		return rc;
	const eng_config *c = &m->c;
	size_t mc = (size_t)c->hidden;
	size_t cand[] = {(size_t)c->heads * c->head_dim, (size_t)c->intermediate, (size_t)c->moe_intermediate};
	for (size_t i = 0; i < 3; i++)
		mc = cand[i] > mc ? cand[i] : mc;
	cc->maxcols = mc;
	cc->nw = eng_pool_threads(cc->pool);
	if (!(cc->wconv = calloc((size_t)cc->nw, sizeof(float *))) ||
	    !(cc->scores = calloc((size_t)cc->nw, sizeof(float *))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < cc->nw; i++)
		if (!(cc->wconv[i] = malloc(4 * mc * sizeof(float))) ||
		    !(cc->scores[i] = malloc((size_t)m->max_context * sizeof(float))))
			return ev_error_set(EV_E_NOMEM, "out of memory for worker scratch");
	return 0;
}

void eng_backend_cpu_free(eng_backend *be)
{
	cpu_ctx *cc = be ? be->ctx : NULL;
	if (!cc)
		return;
	eng_pool_free(cc->pool);
	for (int i = 0; i < cc->nw; i++) {
		if (cc->wconv)
			free(cc->wconv[i]);
		if (cc->scores)
			free(cc->scores[i]);
	}
	free(cc->wconv);
	free(cc->scores);
	free(cc);
	be->ctx = NULL;
}
