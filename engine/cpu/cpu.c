/*
 * engine/cpu/cpu.c: the fast CPU backend's table: element-wise ops
 * (residual adds, SwiGLU, RMSNorm) split across the pool, and the
 * backend's setup and teardown. Matmul is in matmul.c, attention in
 * attention.c, the vector kernels in kernels.h.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_int.h"
#include "engine/cpu/kernels.h"

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

/* The angles of positions pos[0..n) (half of them a row) into the cache,
 * computed as eng_cpu_rope computes them, unless the same positions and
 * frequencies made them last; false when out of memory. */
static bool rope_angles(cpu_ctx *cc, int n, int half, const long *pos, const float *inv_freq)
{
	if (cc->rope_ok && cc->rope_half == half && cc->rope_n == n &&
	    !memcmp(cc->rope_freq, inv_freq, (size_t)half * sizeof *inv_freq) &&
	    !memcmp(cc->rope_pos, pos, (size_t)n * sizeof *pos))
		return true;
	cc->rope_ok = false;
	size_t need = (size_t)n * (size_t)half > (size_t)n ? (size_t)n * (size_t)half : (size_t)n;
	if (need > cc->rope_cap) {
		float *cs = realloc(cc->rope_cs, need * sizeof *cs);
		if (cs)
			cc->rope_cs = cs;
		float *sn = cs ? realloc(cc->rope_sn, need * sizeof *sn) : NULL;
		if (sn)
			cc->rope_sn = sn;
		long *ps = sn ? realloc(cc->rope_pos, need * sizeof *ps) : NULL;
		if (!ps)
			return false;
		cc->rope_pos = ps;
		cc->rope_cap = need;
	}
	if (half > cc->rope_fcap) {
		float *f = realloc(cc->rope_freq, (size_t)half * sizeof *f);
		if (!f)
			return false;
		cc->rope_freq = f, cc->rope_fcap = half;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < half; j++) {
			double a = (double)pos[i] * (double)inv_freq[j];
			cc->rope_cs[(size_t)i * half + j] = (float)cos(a);
			cc->rope_sn[(size_t)i * half + j] = (float)sin(a);
		}
	memcpy(cc->rope_pos, pos, (size_t)n * sizeof *pos);
	memcpy(cc->rope_freq, inv_freq, (size_t)half * sizeof *inv_freq);
	cc->rope_half = half, cc->rope_n = n, cc->rope_ok = true;
	return true;
}

/* Rows task * per .. of one RoPE call, on the cached angles */
typedef struct {
	const cpu_ctx *cc;
	float *x;
	int n, nh, hd, half, per; /* per: rows a task */
} rope_job;

static void rope_task(void *ctx, int task, int worker)
{
	(void)worker;
	const rope_job *j = ctx;
	int half = j->half, i1 = (task + 1) * j->per < j->n ? (task + 1) * j->per : j->n;
	for (int i = task * j->per; i < i1; i++) {
		const float *restrict cs = j->cc->rope_cs + (size_t)i * half, *restrict sn = j->cc->rope_sn + (size_t)i * half;
		for (int h = 0; h < j->nh; h++) {
			float *restrict a = j->x + ((size_t)i * j->nh + h) * j->hd, *restrict b = a + half;
			for (int k = 0; k < half; k++) {
				float x1 = a[k], x2 = b[k];
				a[k] = x1 * cs[k] - x2 * sn[k];
				b[k] = x2 * cs[k] + x1 * sn[k];
			}
		}
	}
}

/* RoPE as eng_cpu_rope (the same bits: the same angles, the same products
 * and sums, which -std=c11 does not contract), the angles computed once
 * for every layer's q and k of a step, each head's channels in a loop
 * the compiler vectorizes, a prefill's rows split over the workers */
static void cpu_rope(eng_backend *be, float *x, int n, int nh, int hd, int rd, const long *pos, const float *inv_freq)
{
	cpu_ctx *cc = be->ctx;
	int half = rd / 2;
	if (!rope_angles(cc, n, half, pos, inv_freq)) {
		eng_cpu_rope(be, x, n, nh, hd, rd, pos, inv_freq);
		return;
	}
	/* rows over the workers where there are enough to pay for a job (prefill) */
	int per = n >= 16 ? (n + 2 * cc->nw - 1) / (2 * cc->nw) : n;
	rope_job j = {cc, x, n, nh, hd, half, per > 0 ? per : 1};
	eng_pool_run(cc->pool, rope_task, &j, (n + j.per - 1) / j.per);
}

/* One row's RMSNorm, its sum of squares in 16 running sums (element j
 * into sum j % 16) totalled as a tree, where the reference's one running
 * sum waits on each add in turn: the fast path's own rounding of the
 * sum, the same on every worker and in every batch; the rest as the
 * reference (y = x * r * g; y may be x). */
static void rms_row(float *y, const float *x, const float *g, int d, float eps)
{
	float s[16] = {0};
	int j = 0;
	for (; j + 16 <= d; j += 16)
		for (int l = 0; l < 16; l++)
			s[l] += x[j + l] * x[j + l];
	for (int l = 0; j < d; j++, l++)
		s[l] += x[j] * x[j];
	for (int w = 8; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			s[l] += s[l + w];
	float r = 1.0f / sqrtf(s[0] / (float)d + eps);
	for (j = 0; j < d; j++)
		y[j] = x[j] * r * g[j];
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
	for (size_t r = r0; r < r1; r++)
		rms_row(j->y + r * j->d, j->x + r * j->d, j->g, j->d, j->eps);
}

static void cpu_rmsnorm(eng_backend *be, float *y, const float *x, const float *g, int n, int d, float eps)
{
	cpu_ctx *cc = be->ctx;
	ew_job j = {y, x, g, 0, eps, (size_t)n, d};
	int per = rms_rows(d);
	eng_pool_run(cc->pool, rmsnorm_task, &j, (n + per - 1) / per);
}

/* MiniMax-M3's indexer on the fast path (eng_index_scan): rows grouped
 * into tiles of consecutive rows of one sequence (each page's box and
 * keys read once for the tile and every index head); when there are fewer
 * tiles than workers (decode), each tile's block range is split across
 * the workers and the parts merged by eng_index_compose. */
typedef struct {
	const eng_model *m;
	const eng_row *rows;
	const float *iq;
	int layer, cap, nsplit;
	const int *tile0; /* tile t: rows tile0[t] .. tile0[t + 1] - 1 */
	const long *span; /* tile t's candidate blocks 0 .. span[t] - 1 */
	eng_index_hit *hits;
	int *nhits;
	eng_index_stats st;
	int failed;
} index_job;

static void index_select_task(void *ctx, int task, int worker)
{
	(void)worker;
	index_job *j = ctx;
	int kvh = j->m->kv.kvh, t = task / j->nsplit, part = task % j->nsplit;
	long n = j->span[t], b0 = n * part / j->nsplit, b1 = n * (part + 1) / j->nsplit;
	size_t at = (size_t)task * ENG_INDEX_TILE * kvh;
	eng_index_stats st = {0};
	if (eng_index_scan(j->m, j->rows + j->tile0[t], j->tile0[t + 1] - j->tile0[t], j->layer,
			   j->iq + (size_t)j->tile0[t] * kvh * j->m->kv.idim, b0, b1, j->hits + at * j->cap,
			   j->nhits + at, j->cap, &st))
		__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->st.candidates, st.candidates, __ATOMIC_RELAXED);
	__atomic_add_fetch(&j->st.scored, st.scored, __ATOMIC_RELAXED);
}

static int cpu_index_select(eng_backend *be, const eng_row *rows, int n, int layer, const float *iq, int *lists,
			    int *nls, int nlist)
{
	cpu_ctx *cc = be->ctx;
	eng_model *m = be->m;
	int kvh = m->kv.kvh, cap = m->c.index_topk, nt = 0;
	int *tile0 = malloc((size_t)(n + 1) * sizeof *tile0);
	long *span = malloc((size_t)(n + 1) * sizeof *span), longest = 0;
	if (!tile0 || !span) {
		free(tile0), free(span);
		return ev_error_set(EV_E_NOMEM, "out of memory for the indexer's plan");
	}
	for (int i = 0; i < n; i++) {
		if (i == 0 || rows[i].seq != rows[i - 1].seq || i - tile0[nt - 1] == ENG_INDEX_TILE) {
			tile0[nt] = i;
			span[nt++] = 0;
		}
		long blocks = rows[i].pos / m->kv.block + 1;
		span[nt - 1] = blocks > span[nt - 1] ? blocks : span[nt - 1];
		longest = blocks > longest ? blocks : longest;
	}
	tile0[nt] = n;
	/* split ranges only where there are idle workers and blocks enough */
	int nsplit = 1;
	if (nt < cc->nw && longest >= 256) {
		nsplit = (2 * cc->nw + nt - 1) / nt;
		nsplit = nsplit > 64 ? 64 : nsplit;
	}
	size_t slots = (size_t)nt * nsplit * ENG_INDEX_TILE * kvh;
	index_job j = {m, rows, iq, layer, cap, nsplit, tile0, span, malloc(slots * cap * sizeof(eng_index_hit)),
		       malloc(slots * sizeof(int)), {0, 0}, 0};
	int rc = 0;
	if (!j.hits || !j.nhits) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory for the indexer's hits");
		goto out;
	}
	eng_pool_run(cc->pool, index_select_task, &j, nt * nsplit);
	if (j.failed) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory for the indexer's bounds");
		goto out;
	}
	for (int t = 0; t < nt; t++)
		for (int i = tile0[t]; i < tile0[t + 1]; i++)
			for (int g = 0; g < kvh; g++) {
				const eng_index_hit *parts[64];
				int np[64];
				for (int part = 0; part < nsplit; part++) {
					size_t q = ((size_t)(t * nsplit + part) * ENG_INDEX_TILE + (i - tile0[t])) * kvh + g;
					parts[part] = j.hits + q * cap;
					np[part] = j.nhits[q];
				}
				size_t o = (size_t)i * kvh + g;
				nls[o] = eng_index_compose(m, &rows[i], parts, np, nsplit, lists + o * nlist, nlist);
			}
	m->istats.candidates += j.st.candidates;
	m->istats.scored += j.st.scored;
out:
	free(j.hits), free(j.nhits), free(tile0), free(span);
	return rc;
}

/* Whether block and BF16 weights take their own kernels (qdot, bfdot)
 * rather than the f32 ones (EVALD_QUANT_DOT=f32). */
static int quant_dot(void)
{
	static atomic_int warned;
	const char *qd = getenv("EVALD_QUANT_DOT");
	if (!qd || !*qd || !strcmp(qd, "auto"))
		return 1;
	if (!strcmp(qd, "f32"))
		return 0;
	if (!atomic_exchange(&warned, 1))
		ev_log_warn("EVALD_QUANT_DOT=%s is not one of f32, auto; the integer and BF16 kernels are used", qd);
	return 1;
}

int eng_backend_cpu_init(eng_backend *be, eng_model *m, int threads)
{
	memset(be, 0, sizeof(*be));
	be->name = "cpu";
	be->m = m;
	eng_cpu_fill_common(be);
	be->matmul = eng_cpu_matmul;
	be->matmul_many = eng_cpu_matmul_many;
	be->attention = eng_cpu_attention;
	be->axpy = cpu_axpy;
	be->swiglu = cpu_swiglu;
	be->rmsnorm = cpu_rmsnorm;
	be->rope = cpu_rope;
	be->index_select = cpu_index_select;
	cpu_ctx *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	be->ctx = cc;
	int rc = eng_pool_new(&cc->pool, threads);
	if (rc)
		return rc;
	const eng_config *c = &m->c;
	size_t mc = (size_t)c->hidden;
	size_t cand[] = {(size_t)c->heads * c->head_dim, (size_t)c->intermediate, (size_t)c->moe_intermediate,
	                 (size_t)c->shared_intermediate};
	for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
		mc = cand[i] > mc ? cand[i] : mc;
	cc->maxcols = mc;
	cc->nw = eng_pool_threads(cc->pool);
	cc->qdot = quant_dot();
	cc->act8 = m->activation_bits == 8;
	if (cc->act8 && !(cc->xk = malloc((size_t)ENG_CPU_QROWS * (mc / 256 + 1) * sizeof *cc->xk)))
		return ev_error_set(EV_E_NOMEM, "out of memory for 8-bit activations");
	if (!(cc->xq = malloc((size_t)ENG_CPU_QROWS * ((mc + 31) / 32) * sizeof *cc->xq)) ||
	    !(cc->xqb = malloc((size_t)ENG_CPU_UNPACK_ROWS * ((mc + 31) / 32) * sizeof *cc->xqb)) ||
	    !(cc->xbf = malloc((size_t)ENG_CPU_QROWS * ((mc + 31) / 32 * 32) * sizeof *cc->xbf)))
		return ev_error_set(EV_E_NOMEM, "out of memory for quantized activations");
	size_t nbm = (mc + 31) / 32;
	if (!(cc->qgrp = calloc((size_t)cc->nw, sizeof *cc->qgrp)) || !(cc->qmem = calloc((size_t)cc->nw, sizeof(void *))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < cc->nw; i++) {
		/* a group of 16-bit path rows, or of 8-bit path super-blocks (q8k.h) */
		size_t qb = ENG_QGROUP_BYTES(nbm), kb = ENG_Q8K_GROUP_BYTES(mc / 256 + 1);
		char *p = malloc(qb > kb ? qb : kb);
		if (!(cc->qmem[i] = p))
			return ev_error_set(EV_E_NOMEM, "out of memory for worker scratch");
		eng_qgroup_place(&cc->qgrp[i], p, (int)nbm);
	}
	/* rows of quads as stored: 16 of the widest row of the widest such types
	 * (Q8_0 and Q6_K, 1.0625 and 0.82 bytes an element) */
	if (!(cc->x4rows = calloc((size_t)cc->nw, sizeof *cc->x4rows)))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	size_t x4b = eng_dtype_bytes(ENG_Q8_0, nbm * 32), x6b = eng_dtype_bytes(ENG_Q6_K, (nbm * 32 + 255) / 256 * 256);
	for (int i = 0; i < cc->nw; i++)
		if (!(cc->x4rows[i] = malloc(ENG_QGROUP_ROWS * (x4b > x6b ? x4b : x6b))))
			return ev_error_set(EV_E_NOMEM, "out of memory for worker scratch");
	if (m->cpu_quads && cc->qdot && eng_qdot_level() == 2 && (rc = eng_cpu_lay_out_quads(m, !cc->act8)))
		return rc;
	size_t B = (size_t)m->kv.block, hd = (size_t)c->head_dim, group = (size_t)(c->heads / c->kv_heads);
	size_t K = (size_t)(m->msa.top_k > 0 ? m->msa.top_k : 1);
	size_t nlist = (size_t)m->msa.sink + (size_t)m->msa.local + K + 1;
	struct {
		float ***f;
		size_t n;
	} fl[] = {{&cc->wconv, 4 * mc}, {&cc->kbuf, B * hd}, {&cc->vbuf, B * hd}, {&cc->sc, ATT_TILE * group * B},
		  {&cc->acc, ATT_TILE * group * hd}, {&cc->mx, ATT_TILE * group}, {&cc->sum, ATT_TILE * group},
		  {&cc->tacc, ATT_TILE * group * hd}, {&cc->tmx, ATT_TILE * group}, {&cc->tsum, ATT_TILE * group}, {&cc->qsum, hd}, {&cc->top, K},
		  {&cc->tq, INDEX_TILE * hd}, {&cc->ttop, INDEX_TILE * K}, {&cc->qpack, (ATT_TILE * group + 1) * hd}};
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
	float ***fl[] = {&cc->wconv, &cc->kbuf, &cc->vbuf, &cc->sc, &cc->acc, &cc->mx, &cc->sum,
			 &cc->tacc, &cc->tmx, &cc->tsum, &cc->qsum, &cc->top, &cc->tq, &cc->ttop, &cc->qpack};
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
	free(cc->xq);
	free(cc->xqb);
	free(cc->xk);
	free(cc->xbf);
	for (int i = 0; cc->qmem && i < cc->nw; i++)
		free(cc->qmem[i]);
	free(cc->qmem);
	free(cc->qgrp);
	for (int i = 0; cc->x4rows && i < cc->nw; i++)
		free(cc->x4rows[i]);
	free(cc->x4rows);
	free(cc->rope_cs), free(cc->rope_sn), free(cc->rope_pos), free(cc->rope_freq);
	free(cc);
	be->ctx = NULL;
}

void eng_cpu_kernels(char *buf, size_t cap, int activation_bits)
{
	if (!quant_dot()) {
		snprintf(buf, cap, "block and bf16 weights: f32 kernels on exactly converted values (EVALD_QUANT_DOT=f32)");
		return;
	}
	int bl = eng_bfdot_level();
	snprintf(buf, cap, "block weights: %s integer dot (%s); bf16 weights: bf16 activations, %s",
	         activation_bits == 8 ? "16-bit activations (Q2_K .. Q6_K, IQ4_XS: 8-bit a super-block)," : "16-bit activations,",
	         eng_qdot_level_name(eng_qdot_level()), bl == 2 ? "vdpbf16ps (avx512-bf16)" : bl == 1 ? "fma (avx2)" : "plain");
}

int eng_cpu_dot_avx2(void)
{
#ifdef ENG_AVX2
	return 1;
#else
	return 0;
#endif
}
