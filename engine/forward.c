/*
 * engine/forward.c: the decoder forward pass, written once over the
 * backend table. Rows of a batch are tokens of one or many sequences, each
 * at its own position; every weight is read once per chunk of rows (GEMM),
 * attention reads each row's own pages. Prefill is cut into chunks of
 * ENG_CHUNK rows so that scratch memory stays a small constant: attention
 * work is chunk x context, never context^2, and the fast path's attention
 * scratch is O(block) per worker whatever the context.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

#define ENG_CHUNK 256

/* Backend buffers (activations) and host buffers (the work's description). */
typedef struct {
	eng_backend *be;
	float *x, *xb, *q, *k, *v, *att, *g, *u;
	float *router;     /* [rows, experts] */
	float *sgate;      /* [rows] the shared expert's gate */
	float *eb, *eo;    /* expert input / output [rows, hidden] */
	float *nbuf, *lbuf; /* final norm rows, logits rows */
	float *iq, *ik;    /* the lightning indexer's queries [rows, heads, dim] and keys [rows, dim] */
	/* host */
	float *ik_h;       /* the index keys on the host (device backends) */
	float *router_h;
	int *sel;          /* [rows, top_k] expert ids */
	float *selw;       /* [rows, top_k] weights */
	int *erows;        /* rows routed to one expert */
	float *ew;
	int *lrows;        /* rows whose logits are wanted */
	int *lists, *nls;  /* the indexer's blocks per (row, KV head) */
	long *pos;
	eng_row *rows;
} scratch;

static void scratch_free(scratch *s)
{
	eng_backend *be = s->be;
	float **dev[] = {&s->x, &s->xb, &s->q, &s->k, &s->v, &s->att, &s->g, &s->u, &s->router, &s->sgate, &s->eb, &s->eo,
			 &s->nbuf, &s->lbuf, &s->iq, &s->ik};
	for (size_t i = 0; be && i < sizeof(dev) / sizeof(dev[0]); i++)
		if (*dev[i])
			be->release(be, *dev[i]);
	free(s->router_h), free(s->ik_h), free(s->sel), free(s->selw), free(s->erows), free(s->ew), free(s->lrows), free(s->pos);
	free(s->rows);
	free(s->lists), free(s->nls);
}

static int scratch_alloc(scratch *s, eng_backend *be, const eng_config *c, int n, int nlog)
{
	memset(s, 0, sizeof(*s));
	s->be = be;
	size_t N = (size_t)n, F = sizeof(float), qd = (size_t)c->heads * c->head_dim,
	       kd = (size_t)c->kv_heads * c->head_dim, H = (size_t)c->hidden;
	size_t inter = (size_t)(c->intermediate > c->moe_intermediate ? c->intermediate : c->moe_intermediate);
	inter = inter > (size_t)c->shared_intermediate ? inter : (size_t)c->shared_intermediate;
	size_t E = (size_t)(c->experts > 0 ? c->experts : 1), K = (size_t)(c->top_k > 0 ? c->top_k : 1);
	struct {
		float **p;
		size_t bytes;
	} dev[] = {{&s->x, N * H * F}, {&s->xb, N * H * F}, {&s->q, N * qd * F}, {&s->k, N * kd * F},
		   {&s->v, N * kd * F}, {&s->att, N * qd * F}, {&s->g, N * inter * F}, {&s->u, N * inter * F},
		   {&s->router, N * E * F}, {&s->sgate, N * F}, {&s->eb, N * H * F}, {&s->eo, N * H * F},
		   {&s->nbuf, (size_t)nlog * H * F}, {&s->lbuf, (size_t)nlog * (size_t)c->vocab * F},
		   {&s->iq, N * (size_t)(c->sparse_layer ? c->index_heads * c->index_dim : 1) * F},
		   {&s->ik, N * (size_t)(c->sparse_layer ? c->index_dim : 1) * F}};
	bool ok = true;
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		ok &= (*dev[i].p = be->alloc(be, dev[i].bytes)) != NULL;
	s->router_h = malloc(N * E * F);
	s->ik_h = malloc(N * (size_t)(c->sparse_layer ? c->index_dim : 1) * F);
	s->sel = malloc(N * K * sizeof(int));
	s->selw = malloc(N * K * F);
	s->erows = malloc(N * sizeof(int));
	s->ew = malloc(N * F);
	s->lrows = malloc(N * sizeof(int));
	s->pos = malloc(N * sizeof(long));
	s->rows = malloc(N * sizeof(eng_row));
	size_t nl = c->sparse_layer ? (size_t)c->index_topk : 1, kvh = (size_t)c->kv_heads;
	s->lists = malloc(N * kvh * nl * sizeof(int));
	s->nls = malloc(N * kvh * sizeof(int));
	if (!ok || !s->router_h || !s->ik_h || !s->sel || !s->selw || !s->erows || !s->ew || !s->lrows || !s->pos || !s->rows ||
	    !s->lists || !s->nls) {
		scratch_free(s);
		return ev_error_set(EV_E_NOMEM, "out of memory for forward scratch (%d rows)", n);
	}
	return 0;
}

/* The K experts with the greatest v (ties to the lower expert id). */
static void top_experts(const float *v, int E, int K, int *sel)
{
	for (int k = 0; k < K; k++) {
		int best = -1;
		for (int e = 0; e < E; e++) {
			bool taken = false;
			for (int j = 0; j < k; j++)
				taken |= sel[j] == e;
			if (!taken && (best < 0 || v[e] > v[best]))
				best = e;
		}
		sel[k] = best;
	}
}

/* softmax over the router logits, top-k, renormalised over the chosen
 * ones when the config says so */
static void route(const eng_config *c, const float *logits, int *sel, float *w)
{
	int E = c->experts, K = c->top_k;
	float mx = logits[0];
	for (int e = 1; e < E; e++)
		mx = logits[e] > mx ? logits[e] : mx;
	double sum = 0;
	for (int e = 0; e < E; e++)
		sum += exp((double)logits[e] - mx);
	top_experts(logits, E, K, sel);
	for (int k = 0; k < K; k++)
		w[k] = (float)(exp((double)logits[sel[k]] - mx) / sum);
	if (c->norm_topk) {
		double t = 0;
		for (int k = 0; k < K; k++)
			t += w[k];
		for (int k = 0; k < K; k++)
			w[k] = (float)(w[k] / t);
	}
}

/* MiniMax-M3's router: sigmoid scores, the top-k chosen on score + bias,
 * weighted by the scores renormalised over the chosen */
static void route_sigmoid(const eng_config *c, const float *logits, const float *bias, int *sel, float *w)
{
	int E = c->experts, K = c->top_k;
	float sc[4096], choice[4096]; /* experts <= 4096 (config.c) */
	for (int e = 0; e < E; e++) {
		sc[e] = 1.0f / (1.0f + expf(-logits[e]));
		choice[e] = sc[e] + (bias ? bias[e] : 0.0f);
	}
	top_experts(choice, E, K, sel);
	double t = 0;
	for (int k = 0; k < K; k++)
		t += w[k] = sc[sel[k]];
	for (int k = 0; k < K; k++)
		w[k] = (float)(w[k] / t);
}

/* ys[k] = x . ws[k]^T (+ bs[k]), k < nw, as one call where the backend
 * has matmul_many (the same bits as a call each) */
static void matmul_same_x(eng_backend *be, int nw, float *const *ys, const float *x, int n, const eng_weight *const *ws,
                          const float *const *bs)
{
	if (be->matmul_many) {
		be->matmul_many(be, nw, ys, x, n, ws, bs);
		return;
	}
	for (int k = 0; k < nw; k++)
		be->matmul(be, ys[k], x, n, ws[k], bs[k]);
}

/* call, its wall seconds added to stage st of pf where pf is set (eng_prof) */
#define STAGE(pf, st, call)                                                                                            \
	do {                                                                                                           \
		eng_prof *pf_ = (pf);                                                                                  \
		double t0_ = pf_ ? ev_now() : 0.0;                                                                     \
		call;                                                                                                  \
		if (pf_)                                                                                               \
			pf_->sec[st] += ev_now() - t0_;                                                                \
	} while (0)

static const char *const prof_names[ENG_PROF_N] = {
	[ENG_PROF_EMBED] = "embed",       [ENG_PROF_NORM] = "norms",         [ENG_PROF_QKV] = "q,k,v",
	[ENG_PROF_ROPE] = "rope",         [ENG_PROF_KV_STORE] = "kv store",  [ENG_PROF_INDEXER] = "indexer",
	[ENG_PROF_ATTENTION] = "attention", [ENG_PROF_O] = "o",            [ENG_PROF_RESIDUAL] = "residual",
	[ENG_PROF_GATE_UP] = "gate,up",   [ENG_PROF_SWIGLU] = "swiglu",      [ENG_PROF_DOWN] = "down",
	[ENG_PROF_MOE] = "moe",           [ENG_PROF_HEAD] = "head",
};

const char *eng_prof_name(int stage)
{
	return stage >= 0 && stage < ENG_PROF_N ? prof_names[stage] : "?";
}

bool eng_prof_is_matmul(int stage)
{
	return stage == ENG_PROF_QKV || stage == ENG_PROF_O || stage == ENG_PROF_GATE_UP || stage == ENG_PROF_DOWN ||
	       stage == ENG_PROF_MOE || stage == ENG_PROF_HEAD;
}

/* The MLP; its stages timed into pf where set (NULL inside a MoE layer,
 * which is timed whole) */
static void ffn(eng_backend *be, const eng_config *c, scratch *s, const eng_ffn *f, float *out, const float *in, int n,
		eng_prof *pf)
{
	float *gu[2] = {s->g, s->u};
	const eng_weight *w2[2] = {&f->gate, &f->up};
	const float *nob[2] = {NULL, NULL};
	STAGE(pf, ENG_PROF_GATE_UP, matmul_same_x(be, 2, gu, in, n, w2, nob));
	if (c->oai_swiglu)
		STAGE(pf, ENG_PROF_SWIGLU,
		      be->swiglu_oai(be, s->g, s->u, (size_t)n * f->gate.rows, (float)c->swiglu_alpha,
				     (float)c->swiglu_limit));
	else
		STAGE(pf, ENG_PROF_SWIGLU, be->swiglu(be, s->g, s->u, (size_t)n * f->gate.rows));
	STAGE(pf, ENG_PROF_DOWN, be->matmul(be, out, s->g, n, &f->down, NULL));
}

void eng_moe_route(const eng_config *c, const float *logits, const float *bias, int *sel, float *w)
{
	if (c->sigmoid_router)
		route_sigmoid(c, logits, bias, sel, w);
	else
		route(c, logits, sel, w);
}

static void moe(eng_backend *be, const eng_config *c, const eng_layer *L, int layer, scratch *s, int n)
{
	int H = c->hidden, K = c->top_k;
	float scale = c->sigmoid_router ? (float)c->routed_scale : 1.0f;
	be->matmul(be, s->router, s->xb, n, &L->router, NULL);
	/* a device backend may run the whole layer itself (decode), in the
	 * order below */
	if (be->moe && be->moe(be, s->x, s->xb, s->router, n, layer, scale) == 0)
		return;
	/* the shared expert first, into the residual: as it is (M3), or scaled
	 * a row by sigmoid(shared_expert_gate . x) (Qwen2-MoE) */
	if (L->shared.down.data) {
		ffn(be, c, s, &L->shared, s->eo, s->xb, n, NULL);
		if (L->shared_gate.data) {
			be->matmul(be, s->sgate, s->xb, n, &L->shared_gate, NULL);
			be->to_host(be, s->router_h, s->sgate, (size_t)n);
			for (int i = 0; i < n; i++) {
				s->erows[i] = i;
				s->ew[i] = (float)(1.0 / (1.0 + exp(-(double)s->router_h[i])));
			}
			be->axpy_rows(be, s->x, s->eo, s->erows, s->ew, n, H);
		} else {
			be->axpy(be, s->x, s->eo, 1.0f, (size_t)n * H);
		}
	}
	be->to_host(be, s->router_h, s->router, (size_t)n * c->experts);
	for (int i = 0; i < n; i++)
		eng_moe_route(c, s->router_h + (size_t)i * c->experts, L->router_bias, s->sel + (size_t)i * K,
			      s->selw + (size_t)i * K);
	/* each expert runs once over the rows routed to it (a small GEMM),
	 * its outputs added in ascending expert order */
	for (int e = 0; e < c->experts; e++) {
		int ne = 0;
		for (int i = 0; i < n; i++)
			for (int k = 0; k < K; k++)
				if (s->sel[(size_t)i * K + k] == e) {
					s->erows[ne] = i;
					s->ew[ne++] = s->selw[(size_t)i * K + k];
				}
		if (!ne)
			continue;
		be->gather(be, s->eb, s->xb, s->erows, ne, H);
		ffn(be, c, s, &L->experts[e], s->eo, s->eb, ne, NULL);
		for (int j = 0; j < ne; j++)
			s->ew[j] *= scale;
		be->axpy_rows(be, s->x, s->eo, s->erows, s->ew, ne, H);
	}
}

/* One chunk of n rows through every layer; row i's logits go to
 * logit_dst[i] when that is not NULL. The rows' pages are reserved.
 * Returns 0 or the status of a step that could not be done (the
 * sequences are then in an unknown state, as after any failed forward). */
static int run_chunk(eng_model *m, scratch *s, const int32_t *tok, int n, float **logit_dst)
{
	const eng_config *c = &m->c;
	eng_backend *be = m->be;
	int H = c->hidden, hd = c->head_dim;
	float eps = (float)c->rms_eps;
	eng_prof *pf = m->prof;
	if (pf)
		pf->steps++;
	STAGE(pf, ENG_PROF_EMBED, be->embed(be, s->x, tok, n));
	/* image placeholders take their sequence's queued rows, in order */
	for (int i = 0; c->image_token >= 0 && i < n; i++)
		if (tok[i] == c->image_token || tok[i] == c->video_token) {
			eng_seq *q = s->rows[i].seq;
			be->from_host(be, s->x + (size_t)i * H, q->mm_rows + (size_t)q->mm_at++ * H, (size_t)H);
		}
	for (int l = 0; l < c->layers; l++) {
		const eng_layer *L = &m->layers[l];
		STAGE(pf, ENG_PROF_NORM, be->rmsnorm(be, s->xb, s->x, L->attn_norm, n, H, eps));
		float *qkv[3] = {s->q, s->k, s->v};
		const eng_weight *wqkv[3] = {&L->wq, &L->wk, &L->wv};
		const float *bqkv[3] = {L->bq, L->bk, L->bv};
		STAGE(pf, ENG_PROF_QKV, matmul_same_x(be, 3, qkv, s->xb, n, wqkv, bqkv));
		if (L->q_norm) {
			STAGE(pf, ENG_PROF_NORM, be->rmsnorm(be, s->q, s->q, L->q_norm, n * c->heads, hd, eps));
			STAGE(pf, ENG_PROF_NORM, be->rmsnorm(be, s->k, s->k, L->k_norm, n * c->kv_heads, hd, eps));
		}
		STAGE(pf, ENG_PROF_ROPE, be->rope(be, s->q, n, c->heads, hd, c->rope_dim, s->pos, m->inv_freq));
		STAGE(pf, ENG_PROF_ROPE, be->rope(be, s->k, n, c->kv_heads, hd, c->rope_dim, s->pos, m->inv_freq));
		STAGE(pf, ENG_PROF_KV_STORE, be->kv_store(be, s->rows, n, l, s->k, s->v));
		const int *lists = NULL;
		if (m->indexer && c->sparse_layer[l]) {
			double ti = pf ? ev_now() : 0.0;
			/* the lightning indexer: its own projections of the layer
			 * input, norms and RoPE; keys stored, then the blocks chosen */
			int ih = c->index_heads, id = c->index_dim;
			be->matmul(be, s->iq, s->xb, n, &L->iq, NULL);
			be->matmul(be, s->ik, s->xb, n, &L->ik, NULL);
			be->rmsnorm(be, s->iq, s->iq, L->iq_norm, n * ih, id, eps);
			be->rmsnorm(be, s->ik, s->ik, L->ik_norm, n, id, eps);
			be->rope(be, s->iq, n, ih, id, c->rope_dim, s->pos, m->inv_freq);
			be->rope(be, s->ik, n, 1, id, c->rope_dim, s->pos, m->inv_freq);
			double t0 = ev_now();
			if (be->index_store) { /* a device backend keeps them in its page copies */
				be->index_store(be, s->rows, n, l, s->ik);
				for (int i = 0; i < n; i++)
					s->rows[i].seq->ibox_stale = true;
			} else {
				const float *ik = s->ik;
				if (be->device) {
					be->to_host(be, s->ik_h, s->ik, (size_t)n * id);
					ik = s->ik_h;
				}
				eng_index_store(m, s->rows, n, l, ik);
			}
			int rc = be->index_select(be, s->rows, n, l, s->iq, s->lists, s->nls, c->index_topk);
			m->index_seconds += ev_now() - t0;
			if (pf)
				pf->sec[ENG_PROF_INDEXER] += ev_now() - ti;
			if (rc)
				return rc; /* never attend other keys than the model would */
			lists = s->lists;
		}
		STAGE(pf, ENG_PROF_ATTENTION,
		      be->attention(be, s->att, s->q, s->rows, n, l, c->heads, c->sliding_window, lists, s->nls,
				    c->index_topk));
		STAGE(pf, ENG_PROF_O, be->matmul(be, s->xb, s->att, n, &L->wo, L->bo));
		STAGE(pf, ENG_PROF_RESIDUAL, be->axpy(be, s->x, s->xb, 1.0f, (size_t)n * H));
		STAGE(pf, ENG_PROF_NORM, be->rmsnorm(be, s->xb, s->x, L->ffn_norm, n, H, eps));
		if (L->moe) {
			STAGE(pf, ENG_PROF_MOE, moe(be, c, L, l, s, n));
		} else {
			ffn(be, c, s, &L->ffn, s->xb, s->xb, n, pf);
			STAGE(pf, ENG_PROF_RESIDUAL, be->axpy(be, s->x, s->xb, 1.0f, (size_t)n * H));
		}
	}
	/* final norm and LM head only for the rows whose logits are wanted */
	int nl = 0;
	for (int i = 0; i < n; i++)
		if (logit_dst[i])
			s->lrows[nl++] = i;
	if (nl) {
		STAGE(pf, ENG_PROF_HEAD, be->gather(be, s->nbuf, s->x, s->lrows, nl, H));
		STAGE(pf, ENG_PROF_NORM, be->rmsnorm(be, s->nbuf, s->nbuf, m->final_norm, nl, H, eps));
		double th = pf ? ev_now() : 0.0;
		be->matmul(be, s->lbuf, s->nbuf, nl, &m->lm_head, NULL);
		for (int j = 0; j < nl; j++)
			be->to_host(be, logit_dst[s->lrows[j]], s->lbuf + (size_t)j * c->vocab, (size_t)c->vocab);
		if (pf)
			pf->sec[ENG_PROF_HEAD] += ev_now() - th;
	}
	/* a device backend's failure (out of device memory, a kernel's error) */
	return be->status ? be->status(be) : 0;
}

/* Where every row's logits go for the sequences that want them all. */
typedef struct {
	const bool *want;  /* [nseq], or NULL */
	eng_row_logits_fn fn;
	void *ctx;
} row_sink;

/* Shared by eng_forward and eng_forward_batch: `all_logits` only with one
 * sequence; `rs` (may be NULL) hands out every row of the sequences that
 * ask for it. */
static int forward(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens, const int *ntok, int nseq,
		   float *all_logits, const row_sink *rs)
{
	const eng_config *c = &m->c;
	long total = 0;
	int rc = 0;
	scratch s;
	float **dst = NULL, *rowbuf = NULL;
	int32_t *flat = NULL;
	int *rsrc = NULL; /* per chunk row: its place in rowbuf, or -1 */
	for (int i = 0; i < nseq; i++) {
		if (!seqs[i] || seqs[i]->m != m)
			return ev_error_set(EV_E_INVALID, "forward: sequence %d does not belong to this model", i);
		if (ntok[i] < 0 || (ntok[i] > 0 && !tokens[i]))
			return ev_error_set(EV_E_INVALID, "forward: sequence %d: bad token count %d", i, ntok[i]);
		for (int j = 0; j < i; j++)
			if (seqs[j] == seqs[i])
				return ev_error_set(EV_E_INVALID, "forward: sequence %d appears twice in the batch", i);
		long ph = 0;
		for (int j = 0; c->image_token >= 0 && j < ntok[i]; j++)
			ph += tokens[i][j] == c->image_token || tokens[i][j] == c->video_token;
		if (ph > eng_seq_pending_embeddings(seqs[i]))
			return ev_error_set(EV_E_INVALID, "forward: sequence %d: %ld image and video placeholder tokens (ids %d, %d) "
							  "and %ld rows queued for them", i, ph, c->image_token, c->video_token,
					    eng_seq_pending_embeddings(seqs[i]));
		for (int j = 0; j < ntok[i]; j++)
			if (tokens[i][j] < 0 || tokens[i][j] >= c->vocab)
				return ev_error_set(EV_E_INVALID, "forward: token %d at index %d is outside the vocabulary (%d)",
						    tokens[i][j], j, c->vocab);
		if (seqs[i]->len + ntok[i] > m->max_context)
			return ev_error_set(EV_E_LIMIT, "forward: %ld + %d tokens pass the context limit of %ld",
					    seqs[i]->len, ntok[i], m->max_context);
		total += ntok[i];
	}
	if (!total)
		return 0;
	long longest = 0;
	for (int i = 0; i < nseq; i++) {
		if ((rc = eng_seq_reserve(seqs[i], ntok[i])))
			return rc;
		/* a host backend reads and writes the pages' data: keys a device
		 * backend stored there alone come down first (only a device
		 * backend's pool has the hook, so a CPU-only model never walks
		 * its pages here) */
		if (!m->be->device && m->kv.dev_pull && (rc = eng_seq_pull(seqs[i])))
			return rc;
		longest = seqs[i]->len + ntok[i] > longest ? seqs[i]->len + ntok[i] : longest;
	}
	if (m->be->reserve && (rc = m->be->reserve(m->be, longest)))
		return rc;
	long every = 0; /* rows whose logits all go to rs */
	for (int i = 0; rs && rs->want && i < nseq; i++)
		every += rs->want[i] ? ntok[i] : 0;
	int chunk = total < ENG_CHUNK ? (int)total : ENG_CHUNK;
	int nlog = all_logits || every ? chunk : (nseq < chunk ? nseq : chunk);
	if ((rc = scratch_alloc(&s, m->be, c, chunk, nlog)))
		return rc;
	if (!(dst = calloc((size_t)chunk, sizeof(*dst))) || !(flat = malloc((size_t)chunk * sizeof(*flat))) ||
	    !(rsrc = malloc((size_t)chunk * sizeof(*rsrc))) ||
	    (every && !(rowbuf = malloc((size_t)(every < chunk ? every : chunk) * c->vocab * sizeof(float))))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	int si = 0, sj = 0; /* next token: sequence si, index sj */
	long done_rows = 0;
	while (done_rows < total) {
		int n = 0, nr = 0;
		while (n < chunk && si < nseq) {
			if (sj >= ntok[si]) {
				si++, sj = 0;
				continue;
			}
			eng_seq *q = seqs[si];
			flat[n] = tokens[si][sj];
			s.rows[n].seq = q;
			s.rows[n].pos = q->len + sj;
			s.pos[n] = q->len + sj;
			rsrc[n] = -1;
			if (all_logits) {
				dst[n] = all_logits + (size_t)sj * c->vocab;
			} else if (every && rs->want[si]) {
				rsrc[n] = nr;
				dst[n] = rowbuf + (size_t)nr++ * c->vocab;
			} else {
				dst[n] = sj == ntok[si] - 1 ? q->logits : NULL;
			}
			n++, sj++;
		}
		if ((rc = run_chunk(m, &s, flat, n, dst)))
			goto done;
		/* hand out the rows wanted whole; a sequence's last row is also its logits */
		for (int r = 0, i = 0; nr && r < n; r++) {
			if (rsrc[r] < 0)
				continue;
			while (seqs[i] != s.rows[r].seq)
				i++;
			long at = s.rows[r].pos - seqs[i]->len;
			rs->fn(rs->ctx, i, at, dst[r]);
			if (at == ntok[i] - 1)
				memcpy(seqs[i]->logits, dst[r], (size_t)c->vocab * sizeof(float));
		}
		done_rows += n;
	}
	for (int i = 0; i < nseq; i++) {
		if (!ntok[i])
			continue;
		seqs[i]->len += ntok[i];
		if (all_logits)
			memcpy(seqs[i]->logits, all_logits + (size_t)(ntok[i] - 1) * c->vocab,
			       (size_t)c->vocab * sizeof(float));
		seqs[i]->has_logits = true;
	}
done:
	free(dst);
	free(flat);
	free(rsrc);
	free(rowbuf);
	scratch_free(&s);
	return rc;
}

int eng_forward(eng_seq *s, const int32_t *tokens, int n, float *all_logits)
{
	if (!s)
		return ev_error_set(EV_E_INVALID, "forward: no sequence");
	pthread_mutex_lock(&s->m->mu);
	int rc = forward(s->m, &s, &tokens, &n, 1, all_logits, NULL);
	pthread_mutex_unlock(&s->m->mu);
	return rc;
}

int eng_forward_batch(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens, const int *ntok, int nseq)
{
	if (nseq < 0 || (nseq && (!seqs || !tokens || !ntok)))
		return ev_error_set(EV_E_INVALID, "forward_batch: bad arguments");
	pthread_mutex_lock(&m->mu);
	int rc = forward(m, seqs, tokens, ntok, nseq, NULL, NULL);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int eng_forward_batch_rows(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens, const int *ntok, int nseq,
			   const bool *every_row, eng_row_logits_fn fn, void *ctx)
{
	if (nseq < 0 || (nseq && (!seqs || !tokens || !ntok)) || (every_row && !fn))
		return ev_error_set(EV_E_INVALID, "forward_batch: bad arguments");
	row_sink rs = {every_row, fn, ctx};
	pthread_mutex_lock(&m->mu);
	int rc = forward(m, seqs, tokens, ntok, nseq, NULL, &rs);
	pthread_mutex_unlock(&m->mu);
	return rc;
}
