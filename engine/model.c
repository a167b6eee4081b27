/*
 * engine/model.c: binding a checkpoint's tensors to the model's layers.
 * Every tensor the config implies is looked up by its Hugging Face name and
 * its shape checked against the config; 2-D weights stay in the mmapped
 * file in their stored dtype, 1-D ones (norms, biases) get small f32 copies.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"

#define MISSING_SHOWN 10

typedef struct {
	eng_model *m;
	ev_buf missing;
	int nmissing;
	int rc; /* first hard error (shape, dtype, memory) */
	char where[512];
} binder;

static eng_tensor *lookup(binder *b, const char *name)
{
	eng_tensor *t = eng_st_find(&b->m->ts, name);
	if (!t) {
		if (b->nmissing < MISSING_SHOWN)
			ev_buf_printf(&b->missing, "%s%s", b->nmissing ? ", " : "", name);
		b->nmissing++;
	}
	return t;
}

static bool shape_ok(binder *b, eng_tensor *t, int ndim, int64_t d0, int64_t d1)
{
	bool ok = t->ndim == ndim && t->shape[0] == d0 && (ndim < 2 || t->shape[1] == d1);
	if (!ok && !b->rc) {
		char got[96] = "", want[64];
		size_t o = 0;
		for (int i = 0; i < t->ndim; i++)
			o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
		if (ndim == 1)
			snprintf(want, sizeof(want), "%lld", (long long)d0);
		else
			snprintf(want, sizeof(want), "%lld, %lld", (long long)d0, (long long)d1);
		b->rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s' has shape [%s] but the config implies [%s]",
				     b->m->ts.paths[t->file], t->name, got, want);
	}
	return ok;
}

/* The tensor name of a printf pattern, in the binder's buffer. */
static const char *nm(binder *b, const char *fmt, ...) EV_PRINTF(2, 3);
static const char *nm(binder *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->where, sizeof(b->where), fmt, ap);
	va_end(ap);
	return b->where;
}

static void bind_weight(binder *b, eng_weight *w, const char *name, int rows, int cols)
{
	eng_tensor *t = lookup(b, name);
	if (!t || !shape_ok(b, t, 2, rows, cols))
		return;
	t->used = true;
	w->data = t->data;
	w->dtype = t->dtype;
	w->rows = rows;
	w->cols = cols;
}

static float *bind_vec(binder *b, const char *name, int n)
{
	eng_tensor *t = lookup(b, name);
	if (!t || !shape_ok(b, t, 1, n, 0))
		return NULL;
	t->used = true;
	eng_model *m = b->m;
	float *v = malloc((size_t)n * sizeof(float));
	if (m->nowned == m->owned_cap) {
		int cap = m->owned_cap ? 2 * m->owned_cap : 64;
		float **no = realloc(m->owned, (size_t)cap * sizeof(*no));
		if (no) {
			m->owned = no;
			m->owned_cap = cap;
		}
	}
	if (!v || m->nowned == m->owned_cap) {
		free(v);
		if (!b->rc)
			b->rc = ev_error_set(EV_E_NOMEM, "out of memory");
		return NULL;
	}
	eng_to_f32(v, t->data, t->dtype, (size_t)n);
	m->owned[m->nowned++] = v;
	return v;
}

/* Binds gate, up and down of one FFN: prefix "model.layers.3.mlp" with
 * the three leaf names. */
static void bind_ffn(binder *b, eng_ffn *f, const char *prefix, int inter, const char *g, const char *u,
		     const char *d)
{
	int h = b->m->c.hidden;
	char p[256];
	snprintf(p, sizeof(p), "%s", prefix);
	bind_weight(b, &f->gate, nm(b, "%s.%s.weight", p, g), inter, h);
	bind_weight(b, &f->up, nm(b, "%s.%s.weight", p, u), inter, h);
	bind_weight(b, &f->down, nm(b, "%s.%s.weight", p, d), h, inter);
}

/* A Gemma-style norm (scaled by 1 + weight): the f32 copy holds 1 + w, so
 * the plain RMSNorm op computes it. */
static float *bind_norm(binder *b, const char *name, int n)
{
	float *v = bind_vec(b, name, n);
	for (int i = 0; v && b->m->c.gemma_norm && i < n; i++)
		v[i] += 1.0f;
	return v;
}

/* A fused gate_up weight [2 * inter, hidden] as two views (gate the first
 * half of the rows, up the second), and down [hidden, inter]. */
static void bind_fused_ffn(binder *b, eng_ffn *f, const char *gate_up, const char *down, int inter)
{
	int h = b->m->c.hidden;
	bind_weight(b, &f->gate, gate_up, 2 * inter, h);
	if (f->gate.data) {
		f->gate.rows = inter;
		f->up = f->gate;
		f->up.data = (const char *)f->gate.data + eng_dtype_bytes(f->gate.dtype, (size_t)inter * h);
	}
	bind_weight(b, &f->down, down, h, inter);
}

/* Experts stored as 3-D tensors: gate_up [E, 2 * inter, hidden], down
 * [E, hidden, inter]; each expert a view. */
static void bind_experts3(binder *b, eng_ffn *ex, const char *prefix, int n, int inter)
{
	int h = b->m->c.hidden;
	char gu[256], dn[256];
	snprintf(gu, sizeof gu, "%s.gate_up_proj", prefix);
	snprintf(dn, sizeof dn, "%s.down_proj", prefix);
	eng_tensor *tg = lookup(b, gu), *td = lookup(b, dn);
	if (!tg || !td)
		return;
	bool ok = tg->ndim == 3 && tg->shape[0] == n && tg->shape[1] == 2 * inter && tg->shape[2] == h &&
		  td->ndim == 3 && td->shape[0] == n && td->shape[1] == h && td->shape[2] == inter;
	if (!ok) {
		if (!b->rc)
			b->rc = ev_error_set(EV_E_INVALID, "%s: expert tensors %s / %s must be [%d, %d, %d] and [%d, %d, %d]",
					     b->m->ts.paths[tg->file], gu, dn, n, 2 * inter, h, n, h, inter);
		return;
	}
	tg->used = td->used = true;
	for (int e = 0; e < n; e++) {
		const char *g = (const char *)tg->data + eng_dtype_bytes(tg->dtype, (size_t)e * 2 * inter * h);
		ex[e].gate = (eng_weight){g, tg->dtype, inter, h, false};
		ex[e].up = (eng_weight){g + eng_dtype_bytes(tg->dtype, (size_t)inter * h), tg->dtype, inter, h, false};
		ex[e].down = (eng_weight){(const char *)td->data + eng_dtype_bytes(td->dtype, (size_t)e * h * inter), td->dtype,
					  h, inter, false};
	}
}

/* MiniMax-M3's decoder (transformers' minimax_m3_vl): tensors under
 * c->prefix; the indexer's are bound on sparse layers. */
static int bind_minimax_m3(binder *b, eng_model *m)
{
	eng_config *c = &m->c;
	const char *P = c->prefix;
	int q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
	bind_weight(b, &m->embed, nm(b, "%sembed_tokens.weight", P), c->vocab, c->hidden);
	m->final_norm = bind_norm(b, nm(b, "%snorm.weight", P), c->hidden);
	if (c->tie)
		m->lm_head = m->embed;
	else
		bind_weight(b, &m->lm_head, "lm_head.weight", c->vocab, c->hidden);
	char pre[128];
	for (int i = 0; i < c->layers && !b->rc; i++) {
		eng_layer *L = &m->layers[i];
		snprintf(pre, sizeof pre, "%slayers.%d", P, i);
		L->attn_norm = bind_norm(b, nm(b, "%s.input_layernorm.weight", pre), c->hidden);
		L->ffn_norm = bind_norm(b, nm(b, "%s.post_attention_layernorm.weight", pre), c->hidden);
		bind_weight(b, &L->wq, nm(b, "%s.self_attn.q_proj.weight", pre), q, c->hidden);
		bind_weight(b, &L->wk, nm(b, "%s.self_attn.k_proj.weight", pre), kv, c->hidden);
		bind_weight(b, &L->wv, nm(b, "%s.self_attn.v_proj.weight", pre), kv, c->hidden);
		bind_weight(b, &L->wo, nm(b, "%s.self_attn.o_proj.weight", pre), c->hidden, q);
		L->q_norm = bind_norm(b, nm(b, "%s.self_attn.q_norm.weight", pre), c->head_dim);
		L->k_norm = bind_norm(b, nm(b, "%s.self_attn.k_norm.weight", pre), c->head_dim);
		if (c->sparse_layer[i]) {
			bind_weight(b, &L->iq, nm(b, "%s.self_attn.indexer.q_proj.weight", pre), c->index_heads * c->index_dim,
				    c->hidden);
			bind_weight(b, &L->ik, nm(b, "%s.self_attn.indexer.k_proj.weight", pre), c->index_dim, c->hidden);
			L->iq_norm = bind_norm(b, nm(b, "%s.self_attn.indexer.q_norm.weight", pre), c->index_dim);
			L->ik_norm = bind_norm(b, nm(b, "%s.self_attn.indexer.k_norm.weight", pre), c->index_dim);
		}
		L->moe = c->moe_layer[i];
		char gu[160], dn[160];
		if (!L->moe) {
			snprintf(gu, sizeof gu, "%s.mlp.gate_up_proj.weight", pre);
			snprintf(dn, sizeof dn, "%s.mlp.down_proj.weight", pre);
			bind_fused_ffn(b, &L->ffn, gu, dn, c->intermediate);
			continue;
		}
		if (!(L->experts = calloc((size_t)c->experts, sizeof(eng_ffn))))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		bind_weight(b, &L->router, nm(b, "%s.mlp.gate.weight", pre), c->experts, c->hidden);
		L->router_bias = bind_vec(b, nm(b, "%s.mlp.gate.e_score_correction_bias", pre), c->experts);
		char ex[160];
		snprintf(ex, sizeof ex, "%s.mlp.experts", pre);
		bind_experts3(b, L->experts, ex, c->experts, c->moe_intermediate);
		if (c->shared_intermediate) {
			snprintf(gu, sizeof gu, "%s.mlp.shared_experts.gate_up_proj.weight", pre);
			snprintf(dn, sizeof dn, "%s.mlp.shared_experts.down_proj.weight", pre);
			bind_fused_ffn(b, &L->shared, gu, dn, c->shared_intermediate);
		}
	}
	return 0;
}

static int bind_all(eng_model *m, const char *dir)
{
	eng_config *c = &m->c;
	binder b = {m, EV_BUF_INIT(4096), 0, 0, ""};
	int q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim, rc = 0;
	if (c->arch == ENG_ARCH_MINIMAX_M3) {
		if ((rc = bind_minimax_m3(&b, m)))
			goto done;
		goto checked;
	}
	bind_weight(&b, &m->embed, "model.embed_tokens.weight", c->vocab, c->hidden);
	m->final_norm = bind_vec(&b, "model.norm.weight", c->hidden);
	if (c->tie)
		m->lm_head = m->embed;
	else
		bind_weight(&b, &m->lm_head, "lm_head.weight", c->vocab, c->hidden);
	for (int i = 0; i < c->layers && !b.rc; i++) {
		eng_layer *L = &m->layers[i];
		L->attn_norm = bind_vec(&b, nm(&b, "model.layers.%d.input_layernorm.weight", i), c->hidden);
		L->ffn_norm = bind_vec(&b, nm(&b, "model.layers.%d.post_attention_layernorm.weight", i), c->hidden);
		bind_weight(&b, &L->wq, nm(&b, "model.layers.%d.self_attn.q_proj.weight", i), q, c->hidden);
		bind_weight(&b, &L->wk, nm(&b, "model.layers.%d.self_attn.k_proj.weight", i), kv, c->hidden);
		bind_weight(&b, &L->wv, nm(&b, "model.layers.%d.self_attn.v_proj.weight", i), kv, c->hidden);
		bind_weight(&b, &L->wo, nm(&b, "model.layers.%d.self_attn.o_proj.weight", i), c->hidden, q);
		if (c->qkv_bias) {
			L->bq = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.q_proj.bias", i), q);
			L->bk = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.k_proj.bias", i), kv);
			L->bv = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.v_proj.bias", i), kv);
		}
		if (c->o_bias)
			L->bo = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.o_proj.bias", i), c->hidden);
		if (c->qk_norm) {
			L->q_norm = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.q_norm.weight", i), c->head_dim);
			L->k_norm = bind_vec(&b, nm(&b, "model.layers.%d.self_attn.k_norm.weight", i), c->head_dim);
		}
		L->moe = c->moe_layer[i];
		if (!L->moe) {
			bind_ffn(&b, &L->ffn, nm(&b, "model.layers.%d.mlp", i), c->intermediate, "gate_proj", "up_proj",
				 "down_proj");
			continue;
		}
		if (!(L->experts = calloc((size_t)c->experts, sizeof(eng_ffn)))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if (c->arch == ENG_ARCH_MIXTRAL) {
			bind_weight(&b, &L->router, nm(&b, "model.layers.%d.block_sparse_moe.gate.weight", i), c->experts,
				    c->hidden);
			for (int e = 0; e < c->experts; e++)
				bind_ffn(&b, &L->experts[e], nm(&b, "model.layers.%d.block_sparse_moe.experts.%d", i, e),
					 c->moe_intermediate, "w1", "w3", "w2");
		} else {
			bind_weight(&b, &L->router, nm(&b, "model.layers.%d.mlp.gate.weight", i), c->experts, c->hidden);
			for (int e = 0; e < c->experts; e++)
				bind_ffn(&b, &L->experts[e], nm(&b, "model.layers.%d.mlp.experts.%d", i, e),
					 c->moe_intermediate, "gate_proj", "up_proj", "down_proj");
			if (c->arch == ENG_ARCH_QWEN2_MOE && c->shared_intermediate) {
				bind_ffn(&b, &L->shared, nm(&b, "model.layers.%d.mlp.shared_expert", i), c->shared_intermediate,
					 "gate_proj", "up_proj", "down_proj");
				bind_weight(&b, &L->shared_gate, nm(&b, "model.layers.%d.mlp.shared_expert_gate.weight", i), 1,
					    c->hidden);
			}
		}
	}
checked:
	if (b.rc) {
		rc = b.rc;
		goto done;
	}
	if (b.nmissing) {
		rc = ev_error_set(EV_E_NOTFOUND, "%s: %d tensor%s missing for %s: %s%s", dir, b.nmissing,
				  b.nmissing > 1 ? "s" : "", c->architecture, b.missing.data ? b.missing.data : "",
				  b.nmissing > MISSING_SHOWN ? ", ..." : "");
		goto done;
	}
	int unused = 0;
	for (int i = 0; i < m->ts.nt; i++)
		unused += !m->ts.t[i].used;
	if (unused)
		ev_log_debug("%s: %d tensor(s) not used by %s", dir, unused, c->architecture);
done:
	ev_buf_free(&b.missing);
	return rc;
}

/* inv_freq[i] = theta^(-2i/d), with llama3 or linear scaling, or divided
 * by a factor of its own (a GGUF file's rope_freqs). */
static void rope_freqs(float *inv, const eng_config *c)
{
	int half = c->rope_dim / 2;
	for (int i = 0; i < half; i++) {
		double f = pow(c->rope_theta, -2.0 * i / c->rope_dim);
		if (c->rope_kind == 3) {
			f /= c->rope_freq_factors[i];
		} else if (c->rope_kind == 2) {
			f /= c->rope_factor;
		} else if (c->rope_kind == 1) {
			double wavelen = 2 * M_PI / f;
			double low_wl = (double)c->rope_orig_max / c->rope_low;
			double high_wl = (double)c->rope_orig_max / c->rope_high;
			if (wavelen > low_wl) {
				f /= c->rope_factor;
			} else if (wavelen >= high_wl) {
				double s = ((double)c->rope_orig_max / wavelen - c->rope_low) / (c->rope_high - c->rope_low);
				f = (1 - s) * f / c->rope_factor + s * f;
			}
		}
		inv[i] = (float)f;
	}
}

static void note_dtype(eng_model *m, eng_dtype t)
{
	const char *n = eng_dtype_lower(t);
	char key[8];
	snprintf(key, sizeof(key), "%s", n);
	/* the list is short: look for the exact item */
	char *p = m->dtypes;
	while ((p = strstr(p, key))) {
		size_t l = strlen(key);
		if ((p == m->dtypes || p[-1] == ',') && (p[l] == ',' || !p[l]))
			return;
		p += l;
	}
	size_t o = strlen(m->dtypes);
	snprintf(m->dtypes + o, sizeof(m->dtypes) - o, "%s%s", o ? "," : "", n);
}

int eng_model_load(eng_model **out, const char *dir, const eng_model_options *opts)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	if (opts)
		o = *opts;
	*out = NULL;
	int rc;
	eng_model *m = calloc(1, sizeof(*m));
	if (!m)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	pthread_mutex_init(&m->mu, NULL);
	if ((rc = eng_config_load(&m->c, dir)))
		goto done;
	if ((rc = eng_st_open(&m->ts, dir)))
		goto done;
	if (!(m->layers = calloc((size_t)m->c.layers, sizeof(eng_layer))) ||
	    !(m->inv_freq = malloc((size_t)m->c.head_dim / 2 * sizeof(float)))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = bind_all(m, dir)))
		goto done;
	rope_freqs(m->inv_freq, &m->c);

	for (int i = 0; i < m->ts.nt; i++)
		if (m->ts.t[i].used) {
			m->weight_bytes += m->ts.t[i].nbytes;
			note_dtype(m, m->ts.t[i].dtype);
			m->type_bytes[m->ts.t[i].dtype] += m->ts.t[i].nbytes;
			uint64_t elems = 1;
			for (int d = 0; d < m->ts.t[i].ndim; d++)
				elems *= (uint64_t)m->ts.t[i].shape[d];
			m->type_elems[m->ts.t[i].dtype] += elems;
		}
	int block = 0;
	if (o.block_size && (o.block_size < 1 || o.block_size > 4096)) {
		rc = ev_error_set(EV_E_INVALID, "block_size %d out of range [1, 4096]", o.block_size);
		goto done;
	}
	bool has_indexer = false;
	for (int i = 0; m->c.sparse_layer && i < m->c.layers; i++)
		has_indexer |= m->c.sparse_layer[i];
	if (has_indexer) {
		/* MiniMax-M3: a page is one of the indexer's blocks; MSA is the
		 * indexer's choice (the mean selector stays off), dense attends all */
		if (o.block_size && o.block_size != m->c.index_block) {
			rc = ev_error_set(EV_E_INVALID, "block_size %d: this checkpoint's index_block_size is %d (one page is one "
						      "block)", o.block_size, m->c.index_block);
			goto done;
		}
		if (m->c.index_dim < m->c.rope_dim) {
			rc = ev_error_set(EV_E_UNSUPPORTED, "%s: index_head_dim %d is smaller than the %d rotated channels", dir,
					  m->c.index_dim, m->c.rope_dim);
			goto done;
		}
		m->mean_selector = o.attention.selector == ENG_SEL_MEAN;
		m->indexer = o.attention.kind != ENG_ATTN_DENSE && !m->mean_selector;
		if (!m->mean_selector)
			o.attention.kind = ENG_ATTN_DENSE; /* the mean selector stays off */
		else if (o.attention.kind == ENG_ATTN_AUTO)
			o.attention.kind = ENG_ATTN_MSA;
		o.block_size = m->c.index_block;
		m->kv.idim = m->c.index_dim;
	} else if (o.attention.selector == ENG_SEL_INDEXER) {
		rc = ev_error_set(EV_E_INVALID, "%s: --msa-selector indexer needs a checkpoint with a lightning indexer "
						"(MiniMax-M3 sparse layers); this one has none (use mean)", dir);
		goto done;
	} else if (o.attention.selector == ENG_SEL_MEAN && o.attention.kind == ENG_ATTN_AUTO) {
		o.attention.kind = ENG_ATTN_MSA; /* naming the selector asks for MSA */
	}
	/* MSA settings decide the page size (one page = one sparse block) */
	if ((rc = eng_msa_setup(m, &o.attention, o.block_size, &block)))
		goto done;
	for (int l = 0; m->mean_selector && l < m->c.layers; l++)
		m->msa.dense_layer[l] |= !m->c.sparse_layer[l]; /* M3's full-attention layers */
	/* without an explicit cap, at most ENG_DEFAULT_MAX_CONTEXT (attention
	 * scratch no longer depends on it: O(block) per worker) */
	long cap = o.max_context > 0 ? o.max_context : ENG_DEFAULT_MAX_CONTEXT;
	m->max_context = cap < m->c.max_position ? cap : m->c.max_position;
	int idim = m->kv.idim;
	if ((rc = eng_kv_pool_init(&m->kv, m->c.layers, m->c.kv_heads, m->c.head_dim, block)))
		goto done;
	m->kv.idim = idim;
	static const eng_dtype kvt[] = {ENG_F32, ENG_F16, ENG_BF16};
	if ((unsigned)o.kv_dtype > 2) {
		rc = ev_error_set(EV_E_INVALID, "kv_dtype %d unknown", (int)o.kv_dtype);
		goto done;
	}
	if ((rc = eng_kv_pool_configure(&m->kv, kvt[o.kv_dtype], o.kv_max_bytes)))
		goto done;
	if (o.activation_bits != 0 && o.activation_bits != 16 && o.activation_bits != 8) {
		rc = ev_error_set(EV_E_INVALID, "activation_bits %d: 16 or 8", o.activation_bits);
		goto done;
	}
	m->activation_bits = o.activation_bits == 8 ? 8 : 16;
	m->threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (m->threads < 1)
		m->threads = 1;
	m->cpu_quads = o.backend != ENG_BACKEND_CUDA;
	if ((rc = eng_backend_ref_init(&m->ref, m)) || (rc = eng_backend_cpu_init(&m->cpu, m, m->threads)))
		goto done;
	m->be = o.backend == ENG_BACKEND_REF ? &m->ref : &m->cpu;
	if (o.backend == ENG_BACKEND_CUDA && (rc = eng_model_set_backend(m, ENG_BACKEND_CUDA)))
		goto done;
	*out = m;
	m = NULL;
done:
	eng_model_free(m);
	return rc;
}

int eng_model_set_backend(eng_model *m, eng_backend_kind kind)
{
	if (kind == ENG_BACKEND_REF)
		m->be = &m->ref;
	else if (kind == ENG_BACKEND_CPU)
		m->be = &m->cpu;
	else if (kind == ENG_BACKEND_CUDA) {
#ifdef EV_HAVE_CUDA
		int rc;
		if (!m->cuda.ctx && (rc = eng_backend_cuda_init(&m->cuda, m)))
			return rc;
		m->be = &m->cuda;
#else
		return ev_error_set(EV_E_UNSUPPORTED, "--backend cuda: this evald was built without CUDA (no toolkit was "
						      "found when it was configured)");
#endif
	} else
		return ev_error_set(EV_E_INVALID, "unknown backend %d", (int)kind);
	return 0;
}

void eng_model_free(eng_model *m)
{
	if (!m)
		return;
	eng_backend_cpu_free(&m->cpu);
	eng_backend_ref_free(&m->ref);
	eng_kv_pool_clear(&m->kv); /* before the device backend: pages free their device copies */
#ifdef EV_HAVE_CUDA
	eng_backend_cuda_free(&m->cuda);
#endif
	eng_msa_clear(&m->msa);
	for (int i = 0; m->layers && i < m->c.layers; i++)
		free(m->layers[i].experts);
	free(m->layers);
	for (int i = 0; i < m->nowned; i++)
		free(m->owned[i]);
	free(m->owned);
	free(m->inv_freq);
	eng_st_close(&m->ts);
	eng_config_clear(&m->c);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static uint64_t wsize(const eng_weight *w)
{
	return (uint64_t)w->rows * (uint64_t)w->cols;
}

/* a weight's bytes as stored */
static uint64_t wbytes(const eng_weight *w)
{
	return eng_dtype_bytes(w->dtype, wsize(w));
}

int eng_model_image_token(const eng_model *m)
{
	return m->c.image_token;
}

int eng_model_video_token(const eng_model *m)
{
	return m->c.video_token;
}

int eng_model_weight_regions(const eng_model *m, const void **ptr, size_t *len, int cap)
{
	int n = 0;
	for (int i = 0; i < m->ts.nfiles; i++) {
		if (!m->ts.maps[i] || !m->ts.map_len[i])
			continue;
		if (n < cap)
			ptr[n] = m->ts.maps[i], len[n] = m->ts.map_len[i];
		n++;
	}
	return n;
}

uint64_t eng_model_kv_read_bytes(const eng_model *m, long ctx, bool *exact)
{
	const eng_config *c = &m->c;
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	bool ex = true;
	uint64_t total = 0;
	if (ctx > 0) { /* an empty sequence attends nothing */
		long B = p->block, nblk = (ctx - 1) / B + 1, win = c->sliding_window;
		uint64_t per = 2u * (uint64_t)p->kvh * (uint64_t)p->hd * (uint64_t)p->esize;
		for (int l = 0; l < c->layers; l++) {
			long n = ctx; /* positions attended */
			bool sparse = false;
			if (m->indexer && c->sparse_layer[l]) {
				if (nblk > c->index_topk) /* (then index_topk whole blocks are fewer than ctx) */
					n = (long)c->index_topk * B, sparse = true, ex = false;
			} else if (eng_msa_sparse(m, l, ctx - 1)) {
				/* mark_always's sinks and local window (the last `local`
				 * blocks, the query's own partial one among them), top_k
				 * of the blocks between, all whole */
				long keep = (long)a->sink + a->local + a->top_k;
				if (nblk > keep)
					n = (keep - 1) * B + (ctx - (nblk - 1) * B), sparse = true;
			}
			if (win > 0 && n > win) {
				n = win;
				ex = ex && !sparse;
			}
			total += (uint64_t)n * per;
		}
	}
	if (exact)
		*exact = ex;
	return total;
}

void eng_model_get_info(const eng_model *m, eng_model_info *out)
{
	const eng_config *c = &m->c;
	memset(out, 0, sizeof(*out));
	out->architecture = c->architecture;
	out->sliding_window = c->sliding_window;
	out->config_defaults = c->defaults_used;
	out->family = eng_arch_family(c->arch);
	out->layers = c->layers;
	out->hidden = c->hidden;
	out->heads = c->heads;
	out->kv_heads = c->kv_heads;
	out->head_dim = c->head_dim;
	out->intermediate = c->intermediate;
	out->vocab = c->vocab;
	out->experts = c->experts;
	out->experts_per_token = c->experts ? c->top_k : 0;
	out->moe_intermediate = c->experts ? c->moe_intermediate : 0;
	out->max_position = c->max_position;
	out->kv_max_bytes = m->kv.max_bytes;
	out->rope_theta = c->rope_theta;
	out->rms_eps = c->rms_eps;
	out->tied_embeddings = c->tie;
	out->bos_id = c->bos_id;
	out->n_eos = c->n_eos;
	memcpy(out->eos_ids, c->eos_ids, sizeof(out->eos_ids));
	uint64_t total = 0, inactive = 0;
	for (int i = 0; i < m->ts.nt; i++)
		if (m->ts.t[i].used)
		{
			uint64_t el = 1;
			for (int d = 0; d < m->ts.t[i].ndim; d++)
				el *= (uint64_t)m->ts.t[i].shape[d];
			total += el;
		}
	/* the experts a layer does not choose: their parameters, and their bytes (expert 0's
	 * each), which a decode step does not read; nor one of an embedding table that is not the
	 * head but the token's row */
	uint64_t skip = 0;
	for (int i = 0; i < c->layers; i++) {
		const eng_layer *L = &m->layers[i];
		if (!L->moe)
			continue;
		out->moe_layers++;
		const eng_ffn *x = &L->experts[0];
		inactive += (wsize(&x->gate) + wsize(&x->up) + wsize(&x->down)) * (uint64_t)(c->experts - c->top_k);
		skip += (wbytes(&x->gate) + wbytes(&x->up) + wbytes(&x->down)) * (uint64_t)(c->experts - c->top_k);
	}
	out->params_total = total;
	out->params_active = total - inactive;
	out->weight_bytes = m->weight_bytes;
	if (!c->tie && m->embed.data && m->embed.rows > 0)
		skip += wbytes(&m->embed) - wbytes(&m->embed) / (uint64_t)m->embed.rows;
	out->decode_weight_bytes = m->weight_bytes > skip ? m->weight_bytes - skip : 0;
	out->weights_huge = m->ts.nfiles > 0 && m->ts.nhuge == m->ts.nfiles;
	out->quad_bytes = m->quad_bytes;
	out->activation_bits = m->activation_bits;
	/* pages as allocated (KV dtype, key sums, padding) over their tokens */
	out->kv_bytes_per_token = (uint64_t)m->kv.page_bytes / (uint64_t)m->kv.block;
	out->dtypes = m->dtypes;
	_Static_assert(ENG_DTYPE_COUNT <= (int)(sizeof out->weight_types / sizeof out->weight_types[0]),
	               "eng_model_info.weight_types holds every dtype");
	out->n_weight_types = 0;
	for (int t = 0; t < ENG_DTYPE_COUNT; t++) /* insertion by bytes, the most first */
		if (m->type_bytes[t]) {
			int k = out->n_weight_types++;
			for (; k > 0 && out->weight_types[k - 1].bytes < m->type_bytes[t]; k--)
				out->weight_types[k] = out->weight_types[k - 1];
			out->weight_types[k].dtype = eng_dtype_lower((eng_dtype)t);
			out->weight_types[k].bytes = m->type_bytes[t];
			out->weight_types[k].elems = m->type_elems[t];
		}
	out->block_size = m->kv.block;
	out->max_context = m->max_context;
	out->backend = m->be ? m->be->name : "cpu";
}

void eng_model_set_prof(eng_model *m, eng_prof *p)
{
	m->prof = p;
}
