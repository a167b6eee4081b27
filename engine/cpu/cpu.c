/*
 * engine/cpu/cpu.c: the fast CPU backend. The matmul splits the weight's
 * output rows over the thread pool. Prefill (4 or more batch rows) takes
 * tiles of 4 weight rows x 3 batch rows (dot3x4: 12 accumulators in
 * registers), so each weight row streams from memory once per call;
 * decode reads 4 weight rows a quarter of the task apart (4 streams per
 * worker). Every output, in every kernel, is one 8-lane FMA accumulator
 * over the row summed in one fixed order (hsum8), so a prompt fed at once,
 * fed token by token or batched with others gives the same bits. F16/BF16
 * rows are converted to f32 once per tile. Attention runs one task per
 * (row, KV head): dense or MSA block-sparse, online softmax over the
 * attended blocks. AVX2/FMA where the build has them; SLEEF's vector exp
 * when the build found it.
 */
#ifdef EV_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ENG_AVX2 1
#endif

#if defined(EV_HAVE_SLEEF) && defined(ENG_AVX2)
#include <sleef.h>
#define ENG_VEXP 1
#endif

#include "engine/backend.h"

typedef struct {
	eng_pool *pool;
	int nw;
	float **wconv;   /* per worker: 4 rows of converted weights */
	/* per worker attention scratch, O(block) whatever the context: one
	 * block of converted keys and values, its scores, the group's running
	 * softmax state, and MSA's top-k and block list */
	float **kbuf, **vbuf, **sc, **acc, **mx, **sum, **qsum, **top;
	int **topi, **blocks;
	int nlist; /* room in a block list: sink + local + top_k + 1 */
	/* per worker, the index branch of a tile of prefill rows */
	float **tq, **ttop;
	int **ttopi;
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

#ifdef ENG_VEXP
/* SLEEF's 1-ulp exp of 8 floats; a short tail goes through a padded
 * vector, so a value's exp never depends on where it sits. */
static inline __m256 exp8(__m256 x)
{
	return Sleef_expf8_u10avx2(x);
}

static inline void exp_tail(float *y, const float *x, int n, float sub)
{
	float t[8] = {0};
	for (int i = 0; i < n; i++)
		t[i] = x[i] - sub;
	_mm256_storeu_ps(t, exp8(_mm256_loadu_ps(t)));
	memcpy(y, t, (size_t)n * sizeof(float));
}
#endif

/* y[i] = exp(x[i] - sub), i < n (y may be x) */
static void exp_shift(float *y, const float *x, float sub, int n)
{
	int i = 0;
#ifdef ENG_VEXP
	__m256 s = _mm256_set1_ps(sub);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
	if (i < n)
		exp_tail(y + i, x + i, n - i, sub);
#else
	for (; i < n; i++)
		y[i] = expf(x[i] - sub);
#endif
}

/* y[i] = y[i] * c + a * x[i], i < n (online softmax: rescale and add) */
static void scale_axpy(float *y, float c, float a, const float *x, int n)
{
	int i = 0;
#ifdef ENG_AVX2
	__m256 cv = _mm256_set1_ps(c), av = _mm256_set1_ps(a);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_mul_ps(cv, _mm256_loadu_ps(y + i))));
#endif
	for (; i < n; i++)
		y[i] = y[i] * c + a * x[i];
}

static void axpy1(float *y, float a, const float *x, int n)
{
	int i = 0;
#ifdef ENG_AVX2
	__m256 av = _mm256_set1_ps(a);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
	for (; i < n; i++)
		y[i] += a * x[i];
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

#ifdef ENG_AVX2
/* The sum of one accumulator's lanes in dot4's order (see there), so that
 * every kernel gives an output the same bits whatever its tile. */
static inline float hsum8(__m256 a)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, a), _mm256_hadd_ps(a, a));
	return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#endif

/* w . x with one accumulator, its lanes summed as dot4 sums them: the
 * same bits as any of dot4's outputs. */
static float dot1(const float *x, const float *w, int n)
{
	int i = 0;
	float s = 0;
#ifdef ENG_AVX2
	__m256 a = _mm256_setzero_ps();
	for (; i + 8 <= n; i += 8)
		a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), a);
	s = hsum8(a);
#endif
	for (; i < n; i++)
		s += x[i] * w[i];
	return s;
}

/* o[i][j] = w_j . x_i for 3 batch rows and 4 weight rows: the batch
 * vectors (from L2) held in registers, each weight vector (from L1)
 * loaded once into the 16th register and used three times. */
static void dot3x4(float o[3][4], const float *const x[3], const float *const w[4], int n)
{
	int i = 0;
	float s[3][4] = {{0}};
#ifdef ENG_AVX2
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00;
	__m256 c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
	const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
	for (; i + 8 <= n; i += 8) {
		__m256 a0 = _mm256_loadu_ps(x0 + i), a1 = _mm256_loadu_ps(x1 + i), a2 = _mm256_loadu_ps(x2 + i), v;
		__asm__("" : "+x"(a0), "+x"(a1), "+x"(a2));
		v = _mm256_loadu_ps(w0 + i);
		__asm__("" : "+x"(v));
		c00 = _mm256_fmadd_ps(a0, v, c00);
		c10 = _mm256_fmadd_ps(a1, v, c10);
		c20 = _mm256_fmadd_ps(a2, v, c20);
		v = _mm256_loadu_ps(w1 + i);
		__asm__("" : "+x"(v));
		c01 = _mm256_fmadd_ps(a0, v, c01);
		c11 = _mm256_fmadd_ps(a1, v, c11);
		c21 = _mm256_fmadd_ps(a2, v, c21);
		v = _mm256_loadu_ps(w2 + i);
		__asm__("" : "+x"(v));
		c02 = _mm256_fmadd_ps(a0, v, c02);
		c12 = _mm256_fmadd_ps(a1, v, c12);
		c22 = _mm256_fmadd_ps(a2, v, c22);
		v = _mm256_loadu_ps(w3 + i);
		__asm__("" : "+x"(v));
		c03 = _mm256_fmadd_ps(a0, v, c03);
		c13 = _mm256_fmadd_ps(a1, v, c13);
		c23 = _mm256_fmadd_ps(a2, v, c23);
	}
	s[0][0] = hsum8(c00), s[0][1] = hsum8(c01), s[0][2] = hsum8(c02), s[0][3] = hsum8(c03);
	s[1][0] = hsum8(c10), s[1][1] = hsum8(c11), s[1][2] = hsum8(c12), s[1][3] = hsum8(c13);
	s[2][0] = hsum8(c20), s[2][1] = hsum8(c21), s[2][2] = hsum8(c22), s[2][3] = hsum8(c23);
#endif
	for (; i < n; i++)
		for (int r = 0; r < 3; r++)
			for (int k = 0; k < 4; k++)
				s[r][k] += x[r][i] * w[k][i];
	memcpy(o, s, sizeof(s));
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

static inline void mm_put(const mm_job *j, int i, int r, int nr, const float *o)
{
	float *y = j->y + (size_t)i * j->w->rows + r;
	for (int k = 0; k < nr; k++)
		y[k] = o[k] + (j->bias ? j->bias[r + k] : 0.0f);
}

/* Prefill: weight rows four at a time against batch rows three at a time
 * (dot3x4; measured ~6% faster whole-process than 4 batch x 3 weight
 * rows, whose batch vectors came from L2 four a step instead of three),
 * the last batch rows one by one (dot4: the same sums). */
static void mm_task_tiles(mm_job *j, int r0, int r1, int worker)
{
	int K = j->w->cols;
	float *buf = j->cc->wconv[worker];
	for (int r = r0; r < r1; r += 4) {
		int nr = r1 - r < 4 ? r1 - r : 4;
		const float *wr[4];
		for (int k = 0; k < 4; k++)
			wr[k] = wrow(j, r + (k < nr ? k : 0), buf + (size_t)k * K);
		int i = 0;
		for (; i + 3 <= j->n; i += 3) {
			const float *xr[3] = {j->x + (size_t)i * K, j->x + (size_t)(i + 1) * K, j->x + (size_t)(i + 2) * K};
			float o[3][4];
			dot3x4(o, xr, wr, K);
			for (int t = 0; t < 3; t++)
				mm_put(j, i + t, r, nr, o[t]);
		}
		for (; i < j->n; i++) {
			float o[4];
			dot4(o, j->x + (size_t)i * K, wr[0], wr[1], wr[2], wr[3], K);
			mm_put(j, i, r, nr, o);
		}
	}
}

static void mm_task(void *ctx, int task, int worker)
{
	mm_job *j = ctx;
	if (j->n >= 4) {
		int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
		mm_task_tiles(j, r0, r1 < j->w->rows ? r1 : j->w->rows, worker);
		return;
	}
	/* decode: four weight rows at once, a quarter of the task's range
	 * apart, so that each worker streams four separate runs of memory
	 * (measured whole-process against the alternatives on a 125M f32
	 * model: 4 far-apart rows ~12% faster than 2, 2 ~10% faster than 2
	 * adjacent ones, which beat 1 by ~5%; 1 beat 4 adjacent ones, the
	 * first kernel, by ~25%; 8 no better). dot4 and dot1 sum each output
	 * as the prefill tiles do, so the bits match. */
	const eng_weight *w = j->w;
	int K = w->cols, R = w->rows;
	int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
	if (r1 > R)
		r1 = R;
	float *buf = j->cc->wconv[worker];
	int q4 = (r1 - r0) / 4, r = r0;
	for (; r < r0 + q4; r++) {
		const float *w0 = wrow(j, r, buf), *w1 = wrow(j, r + q4, buf + K), *w2 = wrow(j, r + 2 * q4, buf + 2 * K),
			    *w3 = wrow(j, r + 3 * q4, buf + 3 * K);
		for (int i = 0; i < j->n; i++) {
			float o[4];
			dot4(o, j->x + (size_t)i * K, w0, w1, w2, w3, K);
			for (int t = 0; t < 4; t++)
				j->y[(size_t)i * R + r + t * q4] = o[t] + (j->bias ? j->bias[r + t * q4] : 0.0f);
		}
	}
	r = r0 + 4 * q4;
	for (; r < r1; r++) {
		const float *wr = wrow(j, r, buf);
		for (int i = 0; i < j->n; i++) {
			float o = dot1(j->x + (size_t)i * K, wr, K);
			j->y[(size_t)i * R + r] = o + (j->bias ? j->bias[r] : 0.0f);
		}
	}
}

#ifdef EV_HAVE_OPENBLAS
/* Opt-in (EVALD_BLAS=1): prefill chunks of 32 rows or more of f32
 * activations against f32 weights go to OpenBLAS's sgemm, which measured
 * up to ~1.5x faster than the blocked kernel below on this machine's two
 * cores (engine/README.md). It is off by default because sgemm sums in
 * another order: a prompt fed at once would then no longer give bit for
 * bit the logits of the same prompt fed token by token, and a sample's
 * greedy answer could depend on what else shared its batch, which an
 * evaluation harness must not allow. */
static bool blas_gemm(cpu_ctx *cc, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	static int enabled = -1;
	if (enabled < 0) {
		const char *e = getenv("EVALD_BLAS");
		enabled = e && !strcmp(e, "1");
	}
	if (!enabled || w->dtype != ENG_F32 || n < 32)
		return false;
	openblas_set_num_threads(cc->nw);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w->rows, w->cols, 1.0f, x, w->cols,
	            (const float *)w->data, w->cols, 0.0f, y, w->rows);
	if (bias)
		for (int i = 0; i < n; i++)
			axpy1(y + (size_t)i * w->rows, 1.0f, bias, w->rows);
	return true;
}
#endif

static void cpu_matmul(eng_backend *be, float *y, const float *x, int n, const eng_weight *w, const float *bias)
{
	cpu_ctx *cc = be->ctx;
#ifdef EV_HAVE_OPENBLAS
	if (blas_gemm(cc, y, x, n, w, bias))
		return;
#endif
	int tasks_wanted = cc->nw * 8;
	int per = (w->rows + tasks_wanted - 1) / tasks_wanted;
	per = (per + 3) / 4 * 4; /* whole tiles of 4 rows, and quarters for decode */
	if (per < 8)
		per = 8;
	mm_job j = {cc, y, x, n, w, bias, per};
	eng_pool_run(cc->pool, mm_task, &j, (w->rows + per - 1) / per);
}

/* sum over the group's query heads: sum_h q_h . mean_b == (sum_h q_h) .
 * ksum_b / B, one dot a block */
static void group_qsum(float *qsum, const float *q, int g, int group, int hd)
{
	memcpy(qsum, q + (size_t)g * group * hd, (size_t)hd * sizeof(float));
	for (int h = 1; h < group; h++)
		for (int j = 0; j < hd; j++)
			qsum[j] += q[((size_t)g * group + h) * hd + j];
}

/* Offers block b with score sc to the running top-k (descending; blocks
 * come in ascending order, so an equal score keeps the lower block). */
static inline void topk_push(float *top, int *topi, int *nt, int K, float sc, int b)
{
	if (*nt == K && !(sc > top[K - 1]))
		return;
	int i = *nt < K ? (*nt)++ : K - 1;
	while (i > 0 && top[i - 1] < sc) {
		top[i] = top[i - 1];
		topi[i] = topi[i - 1];
		i--;
	}
	top[i] = sc;
	topi[i] = b;
}

/* The attended blocks ascending: sinks, the selected, the local window. */
static int compose_list(const eng_msa *a, long cur, int *topi, int nt, int *blocks)
{
	for (int i = 1; i < nt; i++)
		for (int j = i; j > 0 && topi[j - 1] > topi[j]; j--) {
			int t = topi[j];
			topi[j] = topi[j - 1];
			topi[j - 1] = t;
		}
	int n = 0;
	long ns = a->sink < cur + 1 ? a->sink : cur + 1, last = cur - a->local;
	for (long b = 0; b < ns; b++)
		blocks[n++] = (int)b;
	for (int i = 0; i < nt; i++)
		blocks[n++] = topi[i];
	for (long b = last + 1 > ns ? last + 1 : ns; b <= cur; b++)
		blocks[n++] = (int)b;
	return n;
}

/* The index scores q . ksum of up to four consecutive blocks b.. (not past
 * `last`) of KV head g, four at a time because the horizontal sums are
 * what a block costs otherwise. Each score is computed the same way
 * whatever its place in the four (dot4's lanes are independent), so
 * prefill tiles and decode pick the same blocks. Returns how many. */
static int block_scores4(float sc[4], const float *q, const float *kidx, long b, long last, int kvh, int g, int hd)
{
	int nb = last - b + 1 < 4 ? (int)(last - b + 1) : 4;
	const float *k[4];
	for (int t = 0; t < 4; t++)
		k[t] = kidx + ((size_t)(b + (t < nb ? t : 0)) * (size_t)kvh + (size_t)g) * (size_t)hd;
	dot4(sc, q, k[0], k[1], k[2], k[3], hd);
	return nb;
}

static eng_msa_index seq_index(const eng_seq *s, int layer)
{
	const eng_kv_pool *p = &s->m->kv;
	return (eng_msa_index){s->kidx[layer], s->kbox[layer], p->kvh, p->hd, p->block};
}

/* An upper bound on any computed score q . k of a row k inside the box
 * [mn, mx] (element-wise): S1 = sum_d max(q_d mx_d, q_d mn_d) is the
 * exact maximum up to the rounding of its own products and sum; S3 =
 * sum_d |q_d| max(|mx_d|, |mn_d|) bounds sum |q_d k_d|, which scales the
 * rounding both that sum and a block's own dot product can carry
 * (2 gamma_hd + u, generously rounded up). */
static float box_margin(int hd)
{
	double u = ldexp(1, -24), gam = (hd + 8) * u / (1 - (hd + 8) * u);
	return (float)(1.01 * (2 * gam + 1.01 * u) / (1 - gam) + ldexp(1, -22));
}

/* c: box_margin(hd), computed once a scan */
static float box_bound(const float *q, const float *mx, const float *mn, int hd, float c)
{
	int d = 0;
	float s1 = 0, s3 = 0;
#ifdef ENG_AVX2
	__m256 v1 = _mm256_setzero_ps(), v3 = v1;
	const __m256 sign = _mm256_set1_ps(-0.0f);
	for (; d + 8 <= hd; d += 8) {
		__m256 qv = _mm256_loadu_ps(q + d), hi = _mm256_loadu_ps(mx + d), lo = _mm256_loadu_ps(mn + d);
		v1 = _mm256_add_ps(v1, _mm256_max_ps(_mm256_mul_ps(qv, hi), _mm256_mul_ps(qv, lo)));
		__m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, hi), _mm256_andnot_ps(sign, lo));
		v3 = _mm256_fmadd_ps(_mm256_andnot_ps(sign, qv), m, v3);
	}
	float t1[8], t3[8];
	_mm256_storeu_ps(t1, v1);
	_mm256_storeu_ps(t3, v3);
	for (int i = 0; i < 8; i++)
		s1 += t1[i], s3 += t3[i];
#endif
	for (; d < hd; d++) {
		float a = q[d] * mx[d], b = q[d] * mn[d];
		/* NaN anywhere must reach the result (fmaxf would drop it) */
		s1 += a != a || b != b ? NAN : a > b ? a : b;
		float ah = fabsf(mx[d]), bh = fabsf(mn[d]);
		s3 += fabsf(q[d]) * (ah != ah || bh != bh ? NAN : ah > bh ? ah : bh);
	}
	return s1 + c * s3 + fabsf(s1) * 0x1p-22f;
}

/* The plain scan of [b0, b1] into the running top-k. */
static void scan_exact(const eng_msa_index *ix, int g, const float *qsum, long b0, long b1, int K, float *top,
		       int *topi, int *nt)
{
	float inv = 1.0f / (float)ix->block;
	for (long b = b0; b <= b1; b += 4) {
		float sc[4];
		int nb = block_scores4(sc, qsum, ix->k, b, b1, ix->kvh, g, ix->hd);
		for (int t = 0; t < nb; t++)
			topk_push(top, topi, nt, K, sc[t] * inv, (int)(b + t));
	}
}

int eng_msa_index_topk(const eng_msa_index *ix, int g, const float *qsum, long b0, long b1, int K, bool bound,
		       float *top, int *topi)
{
	int nt = 0, hd = ix->hd;
	if (K <= 0 || b1 < b0)
		return 0;
	if (!bound || !ix->box) {
		scan_exact(ix, g, qsum, b0, b1, K, top, topi, &nt);
		return nt;
	}
	size_t kd = (size_t)ix->kvh * hd;
	float inv = 1.0f / (float)ix->block, c = box_margin(hd);
	for (long b = b0; b <= b1;) {
		long sb = b / ENG_MSA_SUPER, e = (sb + 1) * ENG_MSA_SUPER - 1 < b1 ? (sb + 1) * ENG_MSA_SUPER - 1 : b1;
		if (nt == K) {
			const float *mx = ix->box + (size_t)sb * 2 * kd + (size_t)g * hd;
			/* (rounding is monotone: no later block's score divided
			 * by the block size can pass the bound's) */
			if (box_bound(qsum, mx, mx + kd, hd, c) * inv <= top[K - 1]) {
				b = e + 1;
				continue;
			}
		}
		scan_exact(ix, g, qsum, b, e, K, top, topi, &nt);
		b = e + 1;
	}
	return nt;
}

int eng_msa_select_fast(const eng_model *m, const eng_seq *s, int layer, long pos, int g, const float *q,
			int *blocks, float *qsum, float *top, int *topi)
{
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	int B = p->block, hd = p->hd, K = a->top_k, nt = 0;
	long cur = pos / B, last = cur - a->local; /* candidates [sink, last] */
	group_qsum(qsum, q, g, m->c.heads / m->c.kv_heads, hd);
	eng_msa_index ix = seq_index(s, layer);
	nt = eng_msa_index_topk(&ix, g, qsum, a->sink, last, K, true, top, topi);
	return compose_list(a, cur, topi, nt, blocks);
}

typedef struct {
	cpu_ctx *cc;
	eng_model *m;
	float *out;
	const float *q;
	const eng_row *rows;
	int n, layer, nh;
	long window;
	/* prefill: block lists chosen beforehand for tiles of rows (NULL in
	 * decode); lists[(i * kvh + g) * nlist ..], nls[] < 0 for dense rows */
	int *lists, *nls, nlist;
} att_job;

#define INDEX_TILE 16

/* Index branch for a tile of up to INDEX_TILE consecutive rows and one KV
 * head: rows of one sequence scan the same blocks, so each block's key sum
 * is loaded once for all of them (the same arithmetic as
 * eng_msa_select_fast, row by row, so the same choice). */
static void index_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	eng_model *m = j->m;
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	cpu_ctx *cc = j->cc;
	int g = task % p->kvh, i0 = task / p->kvh * INDEX_TILE, hd = p->hd, K = a->top_k, B = p->block;
	int i1 = i0 + INDEX_TILE < j->n ? i0 + INDEX_TILE : j->n, group = j->nh / p->kvh;
	float *qs = cc->tq[worker], *top = cc->ttop[worker], inv = 1.0f / (float)B;
	int *topi = cc->ttopi[worker], nt[INDEX_TILE], rows[INDEX_TILE], nr = 0;
	long maxlast = -1;
	const eng_seq *s = NULL;
	for (int i = i0; i < i1; i++) {
		int *nl = &j->nls[(size_t)i * p->kvh + g];
		long pos = j->rows[i].pos;
		*nl = -1;
		if (!eng_msa_sparse(m, j->layer, pos))
			continue;
		if (s && j->rows[i].seq != s) { /* another sequence: on its own */
			*nl = eng_msa_select_fast(m, j->rows[i].seq, j->layer, pos, g, j->q + (size_t)i * j->nh * hd,
						  j->lists + ((size_t)i * p->kvh + g) * j->nlist, cc->qsum[worker],
						  cc->top[worker], cc->topi[worker]);
			continue;
		}
		s = j->rows[i].seq;
		group_qsum(qs + (size_t)nr * hd, j->q + (size_t)i * j->nh * hd, g, group, hd);
		nt[nr] = 0;
		maxlast = pos / B - a->local > maxlast ? pos / B - a->local : maxlast;
		rows[nr++] = i;
	}
	for (long b = a->sink; b <= maxlast && K > 0; b += 4) {
		for (int r = 0; r < nr; r++) {
			long last = j->rows[rows[r]].pos / B - a->local;
			if (b > last)
				continue;
			float sc[4];
			int nb = block_scores4(sc, qs + (size_t)r * hd, s->kidx[j->layer], b, last, p->kvh, g, hd);
			for (int t = 0; t < nb; t++)
				topk_push(top + (size_t)r * K, topi + (size_t)r * K, &nt[r], K, sc[t] * inv, (int)(b + t));
		}
	}
	for (int r = 0; r < nr; r++) {
		int i = rows[r];
		j->nls[(size_t)i * p->kvh + g] = compose_list(a, j->rows[i].pos / B, topi + (size_t)r * K, nt[r],
							      j->lists + ((size_t)i * p->kvh + g) * j->nlist);
	}
}

/* One (row, KV head) task: the attended blocks in ascending order (every
 * block for dense attention), each block's keys and values read once for
 * all query heads of the group, softmax kept online (running max, sum and
 * weighted values rescaled as the max grows), so the scratch is one block
 * whatever the context. */
static void att_task(void *ctx, int task, int worker)
{
	att_job *j = ctx;
	eng_model *m = j->m;
	eng_kv_pool *p = &m->kv;
	cpu_ctx *cc = j->cc;
	int i = task / p->kvh, g = task % p->kvh, hd = p->hd, group = j->nh / p->kvh, B = p->block;
	eng_seq *s = j->rows[i].seq;
	long pos = j->rows[i].pos, lo = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
	long cur = pos / B;
	const float *qi = j->q + (size_t)i * j->nh * hd;
	float *kb = cc->kbuf[worker], *vb = cc->vbuf[worker], *sc = cc->sc[worker], *acc = cc->acc[worker];
	float *mx = cc->mx[worker], *sum = cc->sum[worker];
	int *list = cc->blocks[worker], nb = -1;
	if (j->lists) {
		list = j->lists + (size_t)task * j->nlist;
		nb = j->nls[task];
	} else if (eng_msa_sparse(m, j->layer, pos)) {
		nb = eng_msa_select_fast(m, s, j->layer, pos, g, qi, list, cc->qsum[worker], cc->top[worker],
					 cc->topi[worker]);
	}
	float scale = 1.0f / sqrtf((float)hd);
	size_t kd = (size_t)p->kvh * hd;
	for (int h = 0; h < group; h++) {
		mx[h] = -INFINITY;
		sum[h] = 0;
	}
	memset(acc, 0, (size_t)group * hd * sizeof(float));
	long nblocks = nb >= 0 ? nb : cur + 1 - lo / B;
	for (long bi = 0; bi < nblocks; bi++) {
		long b = nb >= 0 ? list[bi] : lo / B + bi;
		long t0 = b * B > lo ? b * B : lo, t1 = b * B + B - 1 < pos ? b * B + B - 1 : pos;
		if (t0 > t1)
			continue;
		int cnt = (int)(t1 - t0 + 1), s0 = (int)(t0 - b * B);
		eng_page *pg = s->pages[b];
		const float *K, *V;
		size_t stride;
		if (p->dtype == ENG_F32) {
			K = eng_page_k(p, pg, j->layer, s0) + (size_t)g * hd;
			V = eng_page_v(p, pg, j->layer, s0) + (size_t)g * hd;
			stride = kd;
		} else {
			for (int t = 0; t < cnt; t++) {
				eng_kv_load(p, kb + (size_t)t * hd,
					    (unsigned char *)eng_page_kraw(p, pg, j->layer, s0 + t) + (size_t)g * hd * p->esize,
					    (size_t)hd);
				eng_kv_load(p, vb + (size_t)t * hd,
					    (unsigned char *)eng_page_vraw(p, pg, j->layer, s0 + t) + (size_t)g * hd * p->esize,
					    (size_t)hd);
			}
			K = kb, V = vb, stride = (size_t)hd;
		}
		for (int h = 0; h < group; h++) {
			const float *qh = qi + ((size_t)g * group + h) * hd;
			float *ah = acc + (size_t)h * hd, bmax = -INFINITY;
			for (int t = 0; t < cnt; t++) {
				sc[t] = dot(qh, K + (size_t)t * stride, hd) * scale;
				bmax = sc[t] > bmax ? sc[t] : bmax;
			}
			float nm = bmax > mx[h] ? bmax : mx[h];
			float corr = expf(mx[h] - nm); /* 0 on the first block */
			mx[h] = nm;
			exp_shift(sc, sc, nm, cnt);
			sum[h] = sum[h] * corr + sc[0];
			scale_axpy(ah, corr, sc[0], V, hd);
			for (int t = 1; t < cnt; t++) {
				sum[h] += sc[t];
				axpy1(ah, sc[t], V + (size_t)t * stride, hd);
			}
		}
	}
	for (int h = 0; h < group; h++) {
		float *oh = j->out + ((size_t)i * j->nh + (size_t)g * group + h) * hd, inv = 1.0f / sum[h];
		for (int d = 0; d < hd; d++)
			oh[d] = acc[(size_t)h * hd + d] * inv;
	}
}

/* Decode with few rows: one row's index scan over a long context is most
 * of its cost, so the scan of each (row, KV head) is split into block
 * ranges across the workers, each keeping its own top-k, merged after.
 * The top-k is the k greatest under (score descending, block ascending),
 * a total order, so the merged choice is the one a single scan makes. */
typedef struct {
	att_job *j;
	int splits;
	float *ptop; /* [task][top_k] */
	int *ptopi, *pn;
} split_job;

static void split_index_task(void *ctx, int task, int worker)
{
	split_job *sj = ctx;
	att_job *j = sj->j;
	eng_model *m = j->m;
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	int S = sj->splits, K = a->top_k, hd = p->hd, B = p->block;
	int part = task % S, rg = task / S, i = rg / p->kvh, g = rg % p->kvh;
	long pos = j->rows[i].pos, first = a->sink, last = pos / B - a->local;
	float *top = sj->ptop + (size_t)task * K;
	int *topi = sj->ptopi + (size_t)task * K, nt = 0;
	sj->pn[task] = 0;
	if (!eng_msa_sparse(m, j->layer, pos) || last < first || K <= 0)
		return;
	long per = (last - first + S) / S;
	long b0 = first + part * per, b1 = b0 + per - 1 < last ? b0 + per - 1 : last;
	float *qsum = j->cc->qsum[worker];
	group_qsum(qsum, j->q + (size_t)i * j->nh * hd, g, j->nh / p->kvh, hd);
	eng_msa_index ix = seq_index(j->rows[i].seq, j->layer);
	nt = eng_msa_index_topk(&ix, g, qsum, b0, b1, K, true, top, topi);
	sj->pn[task] = nt;
}

/* Merges the splits' top-k lists into the block list of each (row, KV
 * head). Returns false when scratch could not be had (the caller then
 * lets each attention task choose its own blocks: the same result). */
static bool split_index(cpu_ctx *cc, att_job *j)
{
	eng_model *m = j->m;
	const eng_msa *a = &m->msa;
	int kvh = m->kv.kvh, S = cc->nw, K = a->top_k > 0 ? a->top_k : 1, nrg = j->n * kvh;
	split_job sj = {j, S, malloc((size_t)nrg * S * K * sizeof(float)), malloc((size_t)nrg * S * K * sizeof(int)),
			malloc((size_t)nrg * S * sizeof(int))};
	int *merged = malloc((size_t)K * sizeof(int));
	j->lists = malloc((size_t)nrg * j->nlist * sizeof(int));
	j->nls = malloc((size_t)nrg * sizeof(int));
	bool ok = sj.ptop && sj.ptopi && sj.pn && merged && j->lists && j->nls;
	if (ok) {
		eng_pool_run(cc->pool, split_index_task, &sj, nrg * S);
		for (int rg = 0; rg < nrg; rg++) {
			long pos = j->rows[rg / kvh].pos;
			if (!eng_msa_sparse(m, j->layer, pos)) {
				j->nls[rg] = -1;
				continue;
			}
			int at[64] = {0}, nt = 0; /* S <= 64: the pool's worker count */
			while (nt < a->top_k) {
				int best = -1;
				for (int sp = 0; sp < S && sp < 64; sp++) {
					int t = rg * S + sp;
					if (at[sp] >= sj.pn[t])
						continue;
					float sc = sj.ptop[(size_t)t * K + at[sp]];
					int bi = sj.ptopi[(size_t)t * K + at[sp]];
					if (best < 0)
						best = sp;
					else {
						int tb = rg * S + best;
						float bsc = sj.ptop[(size_t)tb * K + at[best]];
						int bbi = sj.ptopi[(size_t)tb * K + at[best]];
						if (sc > bsc || (sc == bsc && bi < bbi))
							best = sp;
					}
				}
				if (best < 0)
					break;
				merged[nt++] = sj.ptopi[(size_t)(rg * S + best) * K + at[best]++];
			}
			j->nls[rg] = compose_list(a, pos / m->kv.block, merged, nt, j->lists + (size_t)rg * j->nlist);
		}
	}
	free(sj.ptop);
	free(sj.ptopi);
	free(sj.pn);
	free(merged);
	if (!ok) {
		free(j->lists);
		free(j->nls);
		j->lists = NULL;
		j->nls = NULL;
	}
	return ok;
}

static void cpu_attention(eng_backend *be, float *out, const float *q, const eng_row *rows, int n, int layer,
			  int nh, long window)
{
	cpu_ctx *cc = be->ctx;
	eng_model *m = be->m;
	int kvh = m->kv.kvh;
	att_job j = {cc, m, out, q, rows, n, layer, nh, window, NULL, NULL, cc->nlist};
	bool sparse = false;
	for (int i = 0; i < n && !sparse; i++)
		sparse = eng_msa_sparse(m, layer, rows[i].pos);
	/* several sparse rows: choose their blocks tile by tile first (when
	 * the lists cannot be had, each task chooses its own: same result) */
	long longest = 0;
	for (int i = 0; i < n; i++)
		longest = rows[i].pos > longest ? rows[i].pos : longest;
	if (sparse && n * kvh < cc->nw && cc->nw > 1 && cc->nw <= 64 && longest / m->kv.block >= 1024) {
		split_index(cc, &j);
	} else if (sparse && n > 1 && (j.lists = malloc((size_t)n * kvh * j.nlist * sizeof(int))) &&
	           (j.nls = malloc((size_t)n * kvh * sizeof(int)))) {
		eng_pool_run(cc->pool, index_task, &j, (n + INDEX_TILE - 1) / INDEX_TILE * kvh);
	} else {
		free(j.lists);
		j.lists = NULL;
	}
	eng_pool_run(cc->pool, att_task, &j, n * kvh);
	free(j.lists);
	free(j.nls);
}

/* Element-wise ops over many rows (prefill) split into ranges across the
 * pool; each element is computed as the single-threaded code computes it,
 * so results do not depend on the split. */
#define EW_CHUNK 8192 /* elements a task */

typedef struct {
	float *y;
	const float *x, *g;
	float a, eps;
	size_t n;
	int d; /* rmsnorm: row width */
} ew_job;

static void axpy_task(void *ctx, int task, int worker)
{
	ew_job *j = ctx;
	size_t i0 = (size_t)task * EW_CHUNK, i1 = i0 + EW_CHUNK < j->n ? i0 + EW_CHUNK : j->n;
	for (size_t i = i0; i < i1; i++)
		j->y[i] += j->a * j->x[i];
}

static void cpu_axpy(eng_backend *be, float *y, const float *x, float a, size_t n)
{
	cpu_ctx *cc = be->ctx;
	ew_job j = {y, x, NULL, a, 0, n, 0};
	eng_pool_run(cc->pool, axpy_task, &j, (int)((n + EW_CHUNK - 1) / EW_CHUNK));
}

/* g = silu(g) * u, as eng_cpu_swiglu computes it but with the vector exp */
static void swiglu_range(float *g, const float *u, size_t n)
{
	size_t i = 0;
#ifdef ENG_VEXP
	const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(g + i), e = exp8(_mm256_xor_ps(x, neg));
		_mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
	}
	if (i < n) {
		float e[8], m[8] = {0};
		int t = (int)(n - i);
		for (int k = 0; k < t; k++)
			m[k] = -g[i + k];
		exp_shift(e, m, 0.0f, t);
		for (int k = 0; k < t; k++)
			g[i + k] = g[i + k] / (1.0f + e[k]) * u[i + k];
	}
#else
	eng_cpu_swiglu(NULL, g + i, u + i, n - i);
#endif
}

static void swiglu_task(void *ctx, int task, int worker)
{
	ew_job *j = ctx;
	size_t i0 = (size_t)task * EW_CHUNK, i1 = i0 + EW_CHUNK < j->n ? i0 + EW_CHUNK : j->n;
	swiglu_range(j->y + i0, j->x + i0, i1 - i0);
}

static void cpu_swiglu(eng_backend *be, float *g, const float *u, size_t n)
{
	cpu_ctx *cc = be->ctx;
	ew_job j = {g, u, NULL, 0, 0, n, 0};
	eng_pool_run(cc->pool, swiglu_task, &j, (int)((n + EW_CHUNK - 1) / EW_CHUNK));
}

static int rms_rows(int d)
{
	return EW_CHUNK / d > 0 ? EW_CHUNK / d : 1;
}

static void rmsnorm_task(void *ctx, int task, int worker)
{
	ew_job *j = ctx;
	int per = rms_rows(j->d);
	size_t r0 = (size_t)task * per, r1 = r0 + per < j->n ? r0 + per : j->n;
	eng_cpu_rmsnorm(NULL, j->y + r0 * j->d, j->x + r0 * j->d, j->g, (int)(r1 - r0), j->d, j->eps);
}

static void cpu_rmsnorm(eng_backend *be, float *y, const float *x, const float *g, int n, int d, float eps)
{
	cpu_ctx *cc = be->ctx;
	ew_job j = {y, x, g, 0, eps, (size_t)n, d};
	int per = rms_rows(d);
	eng_pool_run(cc->pool, rmsnorm_task, &j, (n + per - 1) / per);
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
	be->swiglu = cpu_swiglu;
	be->rmsnorm = cpu_rmsnorm;
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
	size_t B = (size_t)m->kv.block, hd = (size_t)c->head_dim, group = (size_t)(c->heads / c->kv_heads);
	size_t K = (size_t)(m->msa.top_k > 0 ? m->msa.top_k : 1);
	size_t nlist = (size_t)m->msa.sink + (size_t)m->msa.local + K + 1;
	struct {
		float ***f;
		size_t n;
	} fl[] = {{&cc->wconv, 4 * mc}, {&cc->kbuf, B * hd}, {&cc->vbuf, B * hd}, {&cc->sc, B},
		  {&cc->acc, group * hd}, {&cc->mx, group}, {&cc->sum, group}, {&cc->qsum, hd}, {&cc->top, K},
		  {&cc->tq, INDEX_TILE * hd}, {&cc->ttop, INDEX_TILE * K}};
	cc->nlist = (int)nlist;
	for (size_t k = 0; k < sizeof(fl) / sizeof(fl[0]); k++) {
		if (!(*fl[k].f = calloc((size_t)cc->nw, sizeof(float *))))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		for (int i = 0; i < cc->nw; i++)
			if (!((*fl[k].f)[i] = malloc(fl[k].n * sizeof(float))))
				return ev_error_set(EV_E_NOMEM, "out of memory for worker scratch");
	}
	if (!(cc->topi = calloc((size_t)cc->nw, sizeof(int *))) || !(cc->blocks = calloc((size_t)cc->nw, sizeof(int *))) ||
	    !(cc->ttopi = calloc((size_t)cc->nw, sizeof(int *))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < cc->nw; i++)
		if (!(cc->topi[i] = malloc(K * sizeof(int))) || !(cc->blocks[i] = malloc(nlist * sizeof(int))) ||
		    !(cc->ttopi[i] = malloc(INDEX_TILE * K * sizeof(int))))
			return ev_error_set(EV_E_NOMEM, "out of memory for worker scratch");
	return 0;
}

void eng_backend_cpu_free(eng_backend *be)
{
	cpu_ctx *cc = be ? be->ctx : NULL;
	if (!cc)
		return;
	eng_pool_free(cc->pool);
	float ***fl[] = {&cc->wconv, &cc->kbuf, &cc->vbuf, &cc->sc,  &cc->acc, &cc->mx,
			 &cc->sum,   &cc->qsum, &cc->top,  &cc->tq, &cc->ttop};
	for (size_t k = 0; k < sizeof(fl) / sizeof(fl[0]); k++) {
		for (int i = 0; *fl[k] && i < cc->nw; i++)
			free((*fl[k])[i]);
		free(*fl[k]);
	}
	for (int i = 0; i < cc->nw; i++) {
		if (cc->topi)
			free(cc->topi[i]);
		if (cc->blocks)
			free(cc->blocks[i]);
		if (cc->ttopi)
			free(cc->ttopi[i]);
	}
	free(cc->topi);
	free(cc->blocks);
	free(cc->ttopi);
	free(cc);
	be->ctx = NULL;
}
