/*
 * engine/config.c: config.json and generation_config.json of a checkpoint,
 * turned into eng_config. Every size is bounded and checked for the
 * relations the forward pass relies on (heads a multiple of KV heads, even
 * head_dim, top-k <= experts) before anything is allocated from it.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

#define CONFIG_MAX (4u << 20)

static const struct {
	const char *name;
	eng_arch arch;
	const char *family;
} archs[] = {
	{"LlamaForCausalLM", ENG_ARCH_LLAMA, "llama"},
	{"MistralForCausalLM", ENG_ARCH_MISTRAL, "mistral"},
	{"Qwen2ForCausalLM", ENG_ARCH_QWEN2, "qwen2"},
	{"Qwen3ForCausalLM", ENG_ARCH_QWEN3, "qwen3"},
	{"MixtralForCausalLM", ENG_ARCH_MIXTRAL, "mixtral"},
	{"Qwen3MoeForCausalLM", ENG_ARCH_QWEN3_MOE, "qwen3_moe"},
	{"Qwen2MoeForCausalLM", ENG_ARCH_QWEN2_MOE, "qwen2_moe"},
	{"MiniMaxM3VLForCausalLM", ENG_ARCH_MINIMAX_M3, "minimax_m3"},
	{"MiniMaxM3SparseForConditionalGeneration", ENG_ARCH_MINIMAX_M3, "minimax_m3"},
};
#define NARCHS (int)(sizeof(archs) / sizeof(archs[0]))

const char *eng_arch_family(eng_arch a)
{
	for (int i = 0; i < NARCHS; i++)
		if (archs[i].arch == a)
			return archs[i].family;
	return "?";
}

/* An integer field within [lo, hi]; `dflt` < lo means required. */
static int get_int(int *out, const cJSON *o, const char *key, long dflt, long lo, long hi, const char *path)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v)) {
		if (dflt < lo)
			return ev_error_set(EV_E_INVALID, "%s: '%s' is required", path, key);
		*out = (int)dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi)
		return ev_error_set(EV_E_INVALID, "%s: '%s' must be an integer in [%ld, %ld]", path, key, lo, hi);
	*out = (int)v->valuedouble;
	return 0;
}

static int get_num(double *out, const cJSON *o, const char *key, double dflt, double lo, double hi, const char *path)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v)) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
		return ev_error_set(EV_E_INVALID, "%s: '%s' must be a number in [%g, %g]", path, key, lo, hi);
	*out = v->valuedouble;
	return 0;
}

/* eos_token_id: a number or a list of numbers; appended, deduplicated. */
static void add_eos(eng_config *c, const cJSON *v)
{
	const cJSON *items[8];
	int n = 0;
	if (cJSON_IsNumber(v))
		items[n++] = v;
	else if (cJSON_IsArray(v))
		for (const cJSON *e = v->child; e && n < 8; e = e->next)
			items[n++] = e;
	for (int i = 0; i < n; i++) {
		if (!cJSON_IsNumber(items[i]) || items[i]->valuedouble < 0 || items[i]->valuedouble >= c->vocab)
			continue;
		int id = (int)items[i]->valuedouble, j = 0;
		for (; j < c->n_eos; j++)
			if (c->eos_ids[j] == id)
				break;
		if (j == c->n_eos && c->n_eos < 8)
			c->eos_ids[c->n_eos++] = id;
	}
}

static int parse_rope_scaling(eng_config *c, const cJSON *rs, const char *path)
{
	if (!rs || cJSON_IsNull(rs))
		return 0;
	if (!cJSON_IsObject(rs))
		return ev_error_set(EV_E_INVALID, "%s: 'rope_scaling' must be an object", path);
	const char *type = ev_json_str(rs, "rope_type", ev_json_str(rs, "type", "default"));
	int rc = 0;
	if (!strcmp(type, "default"))
		return 0;
	if (!strcmp(type, "freq_factors")) { /* evald's own: a GGUF file's rope_freqs, one factor a frequency */
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factors"), *x;
		int half = c->rope_dim / 2, n = 0;
		if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) != half)
			return ev_error_set(EV_E_INVALID, "%s: rope_scaling.factors: expected %d numbers (rotary channels / 2)",
					    path, half);
		if (!(c->rope_freq_factors = malloc((size_t)(half ? half : 1) * sizeof(float))))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		cJSON_ArrayForEach(x, f)
		{
			if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || x->valuedouble > 1e6)
				return ev_error_set(EV_E_INVALID, "%s: rope_scaling.factors[%d]: a positive number up to 1e6", path,
						    n);
			c->rope_freq_factors[n++] = (float)x->valuedouble;
		}
		c->rope_kind = 3;
		return 0;
	}
	if ((rc = get_num(&c->rope_factor, rs, "factor", 1.0, 1e-6, 1e6, path)))
		return rc;
	if (!strcmp(type, "linear")) {
		c->rope_kind = 2;
		return 0;
	}
	if (strcmp(type, "llama3"))
		return ev_error_set(EV_E_UNSUPPORTED, "%s: rope_scaling type '%s' not supported (llama3, linear, freq_factors)", path,
				    type);
	int orig = 0;
	c->rope_kind = 1;
	if ((rc = get_num(&c->rope_low, rs, "low_freq_factor", 1.0, 1e-6, 1e6, path)) ||
	    (rc = get_num(&c->rope_high, rs, "high_freq_factor", 4.0, 1e-6, 1e6, path)) ||
	    (rc = get_int(&orig, rs, "original_max_position_embeddings", 8192, 1, 1L << 30, path)))
		return rc;
	if (c->rope_high <= c->rope_low)
		return ev_error_set(EV_E_INVALID, "%s: rope_scaling: high_freq_factor must exceed low_freq_factor", path);
	c->rope_orig_max = orig;
	return 0;
}

/* "msa": {"block_size", "top_k", "sink_blocks", "local_blocks",
 * "dense_below", "dense_layers": [..]}; absent fields stay < 0 (defaults
 * are applied with the run's options in msa.c). */
static int parse_msa(eng_config *c, const cJSON *o, const char *path)
{
	eng_attention_options d = ENG_ATTENTION_OPTIONS_INIT;
	c->msa = d;
	if (!o || cJSON_IsNull(o))
		return 0;
	if (!cJSON_IsObject(o))
		return ev_error_set(EV_E_INVALID, "%s: 'msa' must be an object", path);
	static const struct {
		const char *key;
		long lo, hi;
	} f[] = {{"block_size", 1, 4096}, {"top_k", 0, 1 << 20}, {"sink_blocks", 0, 1 << 20},
		 {"local_blocks", 1, 1 << 20}, {"dense_below", 0, 1 << 30}};
	int v[5], rc = 0;
	for (int i = 0; i < 5; i++) {
		v[i] = -1;
		if (cJSON_GetObjectItemCaseSensitive(o, f[i].key) &&
		    (rc = get_int(&v[i], o, f[i].key, -1, f[i].lo, f[i].hi, path)))
			return ev_error_wrap(rc, "msa");
	}
	c->msa.block_size = v[0], c->msa.top_k = v[1], c->msa.sink_blocks = v[2], c->msa.local_blocks = v[3];
	c->msa.dense_below = v[4];
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(o, "dense_layers");
	if (dl && !cJSON_IsNull(dl)) {
		if (!cJSON_IsArray(dl))
			return ev_error_set(EV_E_INVALID, "%s: msa.dense_layers must be a list of layer indices", path);
		c->msa.n_dense_layers = 0;
		for (const cJSON *e = dl->child; e; e = e->next) {
			if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
			    e->valuedouble >= c->layers)
				return ev_error_set(EV_E_INVALID, "%s: msa.dense_layers: entries must be layer indices in [0, %d)",
						    path, c->layers);
			if (c->msa.n_dense_layers == ENG_MSA_MAX_DENSE_LAYERS)
				return ev_error_set(EV_E_LIMIT, "%s: msa.dense_layers: more than %d entries", path,
						    ENG_MSA_MAX_DENSE_LAYERS);
			c->msa.dense_layers[c->msa.n_dense_layers++] = (int)e->valuedouble;
		}
	}
	c->has_msa = true;
	return 0;
}

/* What transformers' config class of each architecture gives a setting
 * config.json leaves out (transformers 5: LlamaConfig, MistralConfig,
 * Qwen2Config, Qwen3Config, MixtralConfig, Qwen3MoeConfig). */
typedef struct {
	eng_arch arch;
	long max_position;
	double rms_eps, rope_theta;
	int kv_heads;        /* 0: as many as the query heads */
	long sliding_window; /* 0: none */
	bool tie;
} arch_defaults;

static const arch_defaults defaults[] = {
	{ENG_ARCH_LLAMA, 2048, 1e-6, 10000.0, 0, 0, false},
	{ENG_ARCH_MISTRAL, 4096 * 32, 1e-6, 10000.0, 8, 4096, false},
	{ENG_ARCH_QWEN2, 32768, 1e-6, 10000.0, 32, 0, false},
	{ENG_ARCH_QWEN3, 32768, 1e-6, 10000.0, 32, 0, false},
	{ENG_ARCH_MIXTRAL, 4096 * 32, 1e-5, 1e6, 8, 0, false},
	{ENG_ARCH_QWEN3_MOE, 32768, 1e-6, 10000.0, 4, 0, false},
	{ENG_ARCH_QWEN2_MOE, 32768, 1e-6, 10000.0, 16, 0, false},
	{ENG_ARCH_MINIMAX_M3, 524288, 1e-6, 5e6, 4, 0, false},
};

/* Records a setting taken from the defaults (for engine info). */
static void note_default_str(eng_config *c, const cJSON *o, const char *key, const char *val)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	if (x && !cJSON_IsNull(x))
		return;
	size_t n = strlen(c->defaults_used);
	snprintf(c->defaults_used + n, sizeof c->defaults_used - n, "%s%s=%s", n ? ", " : "", key, val);
}

static void note_default(eng_config *c, const cJSON *o, const char *key, double v)
{
	char val[32];
	snprintf(val, sizeof val, "%g", v);
	note_default_str(c, o, key, val);
}

/* transformers 5 writes rope_theta and the scaling into "rope_parameters"
 * ({"rope_theta": ..., "rope_type": "default"|"llama3"|"linear", ...});
 * older configs have "rope_theta" and "rope_scaling". */
static int parse_rope_parameters(eng_config *c, const cJSON *o, const char *path, bool *theta_given)
{
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");
	if (!rp || cJSON_IsNull(rp))
		return 0;
	if (!cJSON_IsObject(rp))
		return ev_error_set(EV_E_INVALID, "%s: 'rope_parameters' must be an object", path);
	if (cJSON_GetObjectItemCaseSensitive(rp, "full_attention") || cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention"))
		return ev_error_set(EV_E_UNSUPPORTED, "%s: rope_parameters per layer type are not supported", path);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(rp, "rope_theta");
	if (t && !cJSON_IsNull(t)) {
		int rc = get_num(&c->rope_theta, rp, "rope_theta", 10000.0, 1, 1e12, path);
		if (rc)
			return rc;
		*theta_given = true;
	}
	if (cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor")) {
		double f = 1;
		int rc = get_num(&f, rp, "partial_rotary_factor", 1.0, 1e-6, 1.0, path);
		if (rc)
			return rc;
		c->rope_dim = (int)(c->head_dim * f); /* transformers' int(head_dim * factor) */
	}
	return parse_rope_scaling(c, rp, path);
}

/* MiniMax-M3's text config (transformers' MiniMaxM3VLTextConfig, with the
 * defaults it applies): per-layer MLP and attention kinds, the MoE, the
 * SwiGLU-OAI constants and the lightning indexer. */
static int parse_minimax_m3(eng_config *c, const cJSON *o, const char *path)
{
	int rc = 0, experts = 0;
	c->gemma_norm = c->oai_swiglu = c->sigmoid_router = true;
	c->qk_norm = true;
	if ((rc = get_int(&c->intermediate, o, "dense_intermediate_size", 12288, 1, 1 << 20, path)) ||
	    (rc = get_int(&c->moe_intermediate, o, "intermediate_size", 3072, 1, 1 << 20, path)) ||
	    (rc = get_int(&c->shared_intermediate, o, "shared_intermediate_size", 3072, 0, 1 << 20, path)) ||
	    (rc = get_int(&experts, o, "num_local_experts", 128, 1, 4096, path)) ||
	    (rc = get_int(&c->top_k, o, "num_experts_per_tok", 4, 1, 4096, path)) ||
	    (rc = get_num(&c->routed_scale, o, "routed_scaling_factor", 2.0, 0, 1e6, path)) ||
	    (rc = get_num(&c->swiglu_alpha, o, "swiglu_alpha", 1.702, 0, 1e6, path)) ||
	    (rc = get_num(&c->swiglu_limit, o, "swiglu_limit", 7.0, 0, 1e6, path)) ||
	    (rc = get_int(&c->rotary_dim_cfg, o, "rotary_dim", 64, 0, 1 << 16, path)) ||
	    (rc = get_int(&c->index_heads, o, "index_n_heads", 4, 1, 4096, path)) ||
	    (rc = get_int(&c->index_dim, o, "index_head_dim", 128, 2, 4096, path)) ||
	    (rc = get_int(&c->index_block, o, "index_block_size", 128, 1, 4096, path)) ||
	    (rc = get_int(&c->index_topk, o, "index_topk_blocks", 16, 1, ENG_INDEX_MAX_TOPK, path)) ||
	    (rc = get_int(&c->index_local, o, "index_local_blocks", 1, 0, 64, path)))
		return rc;
	/* the released checkpoints' own forms, which transformers maps on load:
	 * sparse_attention_config's sparse_* keys win over the flat index_*
	 * ones, its sparse_attention_freq and a top-level moe_layer_freq (one
	 * truthy entry a layer) stand for layer_types and mlp_layer_types */
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "sparse_attention_config");
	if (sc && !cJSON_IsNull(sc) && !cJSON_IsObject(sc))
		return ev_error_set(EV_E_INVALID, "%s: 'sparse_attention_config' must be an object", path);
	static const struct {
		const char *key;
		size_t off;
		int lo, hi;
	} legacy[] = {{"sparse_num_index_heads", offsetof(eng_config, index_heads), 1, 4096},
		      {"sparse_index_dim", offsetof(eng_config, index_dim), 2, 4096},
		      {"sparse_block_size", offsetof(eng_config, index_block), 1, 4096},
		      {"sparse_topk_blocks", offsetof(eng_config, index_topk), 1, ENG_INDEX_MAX_TOPK},
		      {"sparse_local_block", offsetof(eng_config, index_local), 0, 64}};
	for (size_t i = 0; cJSON_IsObject(sc) && i < sizeof legacy / sizeof legacy[0]; i++) {
		int *f = (int *)((char *)c + legacy[i].off);
		if (cJSON_GetObjectItemCaseSensitive(sc, legacy[i].key) &&
		    (rc = get_int(f, sc, legacy[i].key, *f, legacy[i].lo, legacy[i].hi, path)))
			return rc;
	}
	c->experts = experts;
	if (c->top_k > c->experts)
		return ev_error_set(EV_E_INVALID, "%s: num_experts_per_tok %d exceeds the %d experts", path, c->top_k,
				    c->experts);
	if (!(c->moe_layer = calloc((size_t)c->layers, sizeof(bool))) ||
	    !(c->sparse_layer = calloc((size_t)c->layers, sizeof(bool))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	static const char *const keys[2] = {"mlp_layer_types", "layer_types"};
	static const char *const on[2] = {"sparse", "minimax_m3_sparse"}, *const off[2] = {"dense", "full_attention"};
	for (int k = 0; k < 2; k++) {
		bool *flag = k ? c->sparse_layer : c->moe_layer;
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
		const cJSON *freq = k ? (cJSON_IsObject(sc) ? cJSON_GetObjectItemCaseSensitive(sc, "sparse_attention_freq") : NULL)
				      : cJSON_GetObjectItemCaseSensitive(o, "moe_layer_freq");
		if ((!list || cJSON_IsNull(list)) && freq && !cJSON_IsNull(freq)) {
			const char *fk = k ? "sparse_attention_config.sparse_attention_freq" : "moe_layer_freq";
			if (!cJSON_IsArray(freq) || cJSON_GetArraySize(freq) != c->layers)
				return ev_error_set(EV_E_INVALID, "%s: '%s' must list one entry a layer (%d)", path, fk, c->layers);
			int i = 0;
			const cJSON *e;
			cJSON_ArrayForEach(e, freq) {
				if (!cJSON_IsNumber(e) && !cJSON_IsBool(e))
					return ev_error_set(EV_E_INVALID, "%s: %s[%d]: expected a number or a boolean", path, fk, i);
				flag[i++] = cJSON_IsBool(e) ? cJSON_IsTrue(e) : e->valuedouble != 0;
			}
			continue;
		}
		if (!list || cJSON_IsNull(list)) { /* every layer MoE; every layer full attention */
			for (int i = 0; i < c->layers; i++)
				flag[i] = k == 0;
			note_default_str(c, o, keys[k], k ? "all full_attention" : "all sparse");
			continue;
		}
		if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != c->layers)
			return ev_error_set(EV_E_INVALID, "%s: '%s' must list one entry a layer (%d)", path, keys[k], c->layers);
		int i = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, list) {
			const char *v = cJSON_IsString(e) ? e->valuestring : "";
			if (strcmp(v, on[k]) && strcmp(v, off[k]))
				return ev_error_set(EV_E_INVALID, "%s: %s[%d]: expected \"%s\" or \"%s\"", path, keys[k], i, off[k],
						    on[k]);
			flag[i++] = !strcmp(v, on[k]);
		}
	}
	if (c->index_heads != c->kv_heads)
		for (int i = 0; i < c->layers; i++)
			if (c->sparse_layer[i])
				return ev_error_set(EV_E_INVALID, "%s: index_n_heads %d must equal num_key_value_heads %d (one "
								  "block choice a KV group)", path, c->index_heads, c->kv_heads);
	return 0;
}

static int parse_config(eng_config *c, const cJSON *o, const char *path)
{
	int rc = 0;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "architectures");
	const char *name = cJSON_IsArray(a) && cJSON_IsString(a->child) ? a->child->valuestring : NULL;
	int ai = -1;
	for (int i = 0; name && i < NARCHS; i++)
		if (!strcmp(name, archs[i].name))
			ai = i;
	if (ai < 0) {
		ev_buf b = EV_BUF_INIT(1024);
		for (int i = 0; i < NARCHS; i++)
			ev_buf_printf(&b, "%s%s", i ? ", " : "", archs[i].name);
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s: architecture '%s' not supported (supported: %s)", path,
				  name ? name : "(none given)", b.data ? b.data : "");
		ev_buf_free(&b);
		return rc;
	}
	c->arch = archs[ai].arch;
	c->image_token = c->video_token = -1;
	snprintf(c->architecture, sizeof(c->architecture), "%s", archs[ai].name);
	snprintf(c->prefix, sizeof c->prefix, "model.");
	bool m3 = c->arch == ENG_ARCH_MINIMAX_M3;
	if (m3 && !strcmp(name, "MiniMaxM3SparseForConditionalGeneration")) {
		/* the multimodal wrapper: the decoder's settings are its text_config */
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "text_config");
		if (!cJSON_IsObject(tc))
			return ev_error_set(EV_E_INVALID, "%s: 'text_config' must be an object", path);
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "image_token_index");
		if (it && !cJSON_IsNull(it) && (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e9 ||
						it->valuedouble != (double)(int)it->valuedouble))
			return ev_error_set(EV_E_INVALID, "%s: 'image_token_index' must be a token id", path);
		c->image_token = cJSON_IsNumber(it) ? (int)it->valuedouble : 200025; /* transformers' default */
		const cJSON *vt = cJSON_GetObjectItemCaseSensitive(o, "video_token_index");
		if (vt && !cJSON_IsNull(vt) && (!cJSON_IsNumber(vt) || vt->valuedouble < 0 || vt->valuedouble > 1e9 ||
						vt->valuedouble != (double)(int)vt->valuedouble))
			return ev_error_set(EV_E_INVALID, "%s: 'video_token_index' must be a token id", path);
		c->video_token = cJSON_IsNumber(vt) ? (int)vt->valuedouble : 200026;
		o = tc;
		snprintf(c->prefix, sizeof c->prefix, "model.language_model.");
	}
	const arch_defaults *d = &defaults[0];
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
		if (defaults[i].arch == c->arch)
			d = &defaults[i];
	/* M3's config class gives every size a default (the released model's) */
	if ((rc = get_int(&c->hidden, o, "hidden_size", m3 ? 6144 : -1, 1, 1 << 17, path)) ||
	    (rc = get_int(&c->layers, o, "num_hidden_layers", m3 ? 60 : -1, 1, 1024, path)) ||
	    (rc = get_int(&c->heads, o, "num_attention_heads", m3 ? 64 : -1, 1, 4096, path)))
		return rc;
	/* Llama's None means "as many as the query heads"; the others have a number */
	if ((rc = get_int(&c->kv_heads, o, "num_key_value_heads", d->kv_heads ? d->kv_heads : c->heads, 1, 4096, path)) ||
	    (rc = get_int(&c->vocab, o, "vocab_size", m3 ? 200064 : -1, 1, 1 << 24, path)))
		return rc;
	note_default(c, o, "num_key_value_heads", c->kv_heads);
	int hd_default = m3 ? 128 : c->hidden % c->heads ? -1 : c->hidden / c->heads;
	if ((rc = get_int(&c->head_dim, o, "head_dim", hd_default, 2, 4096, path)))
		return rc;
	if (c->head_dim % 2)
		return ev_error_set(EV_E_INVALID, "%s: head_dim %d must be even (RoPE pairs i with i + d/2)", path,
				    c->head_dim);
	if (c->heads % c->kv_heads)
		return ev_error_set(EV_E_INVALID, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
				    path, c->heads, c->kv_heads);
	if ((rc = get_num(&c->rms_eps, o, "rms_norm_eps", d->rms_eps, 0, 1, path)) ||
	    (rc = get_num(&c->rope_theta, o, "rope_theta", d->rope_theta, 1, 1e12, path)))
		return rc;
	note_default(c, o, "rms_norm_eps", c->rms_eps);
	bool theta_given = cJSON_GetObjectItemCaseSensitive(o, "rope_theta") != NULL;
	c->rope_dim = c->head_dim;
	if (cJSON_GetObjectItemCaseSensitive(o, "partial_rotary_factor")) { /* the older, top-level place */
		double f = 1;
		if ((rc = get_num(&f, o, "partial_rotary_factor", 1.0, 1e-6, 1.0, path)))
			return rc;
		c->rope_dim = (int)(c->head_dim * f);
	}
	if ((rc = parse_rope_parameters(c, o, path, &theta_given)))
		return rc;
	if (!theta_given)
		note_default(c, o, "rope_theta", c->rope_theta);
	if (c->rope_dim < 2 || c->rope_dim % 2)
		return ev_error_set(EV_E_INVALID, "%s: RoPE rotates %d channels of %d: expected an even number >= 2", path,
				    c->rope_dim, c->head_dim);
	int maxpos = 0;
	if ((rc = get_int(&maxpos, o, "max_position_embeddings", d->max_position, 1, 1 << 30, path)))
		return rc;
	note_default(c, o, "max_position_embeddings", maxpos);
	c->max_position = maxpos;
	c->tie = ev_json_bool(o, "tie_word_embeddings", d->tie);
	note_default_str(c, o, "tie_word_embeddings", c->tie ? "true" : "false");
	if ((rc = parse_rope_scaling(c, cJSON_GetObjectItemCaseSensitive(o, "rope_scaling"), path)))
		return rc;
	bool attn_bias = ev_json_bool(o, "attention_bias", false);
	/* Qwen2: q/k/v biases always; Qwen2-MoE: unless qkv_bias says not */
	c->qkv_bias = attn_bias || c->arch == ENG_ARCH_QWEN2 ||
	              (c->arch == ENG_ARCH_QWEN2_MOE && ev_json_bool(o, "qkv_bias", true));
	c->o_bias = attn_bias && c->arch != ENG_ARCH_QWEN2;
	c->qk_norm = c->arch == ENG_ARCH_QWEN3 || c->arch == ENG_ARCH_QWEN3_MOE;
	if (c->arch == ENG_ARCH_MISTRAL || c->arch == ENG_ARCH_MIXTRAL) {
		/* MistralConfig's default window is 4096; Mixtral's None (full) */
		int sw = 0;
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "sliding_window");
		if (cJSON_IsNull(w))
			sw = 0; /* written as null: None, full attention */
		else if ((rc = get_int(&sw, o, "sliding_window", d->sliding_window, 0, 1 << 30, path)))
			return rc;
		c->sliding_window = sw;
		if (d->sliding_window && !w)
			note_default(c, o, "sliding_window", sw);
	}
	if (c->arch == ENG_ARCH_QWEN2 && ev_json_bool(o, "use_sliding_window", false))
		ev_log_warn("%s: use_sliding_window is ignored (attention is full)", path);

	if (m3) {
		if ((rc = parse_minimax_m3(c, o, path)))
			return rc;
		if (c->rotary_dim_cfg != c->rope_dim) /* said by engine info; the reference's count wins */
			note_default(c, o, "rotary channels (partial_rotary_factor, not rotary_dim)", c->rope_dim);
		goto ids;
	}
	bool moe = c->arch == ENG_ARCH_MIXTRAL || c->arch == ENG_ARCH_QWEN3_MOE || c->arch == ENG_ARCH_QWEN2_MOE;
	if ((rc = get_int(&c->intermediate, o, "intermediate_size", moe ? 0 : -1, moe ? 0 : 1, 1 << 20, path)))
		return rc;
	c->sparse_step = 1;
	if (c->arch == ENG_ARCH_MIXTRAL) {
		if ((rc = get_int(&c->experts, o, "num_local_experts", -1, 1, 1024, path)) ||
		    (rc = get_int(&c->top_k, o, "num_experts_per_tok", 2, 1, 4096, path)))
			return rc;
		if (c->intermediate < 1)
			return ev_error_set(EV_E_INVALID, "%s: 'intermediate_size' is required", path);
		c->moe_intermediate = c->intermediate;
		c->norm_topk = true;
	} else if (c->arch == ENG_ARCH_QWEN3_MOE || c->arch == ENG_ARCH_QWEN2_MOE) {
		/* Qwen2-MoE adds a shared expert (its own size; 0: none) */
		if (c->arch == ENG_ARCH_QWEN2_MOE &&
		    (rc = get_int(&c->shared_intermediate, o, "shared_expert_intermediate_size", -1, 0, 1 << 20, path)))
			return rc;
		if ((rc = get_int(&c->experts, o, "num_experts", -1, 0, 1024, path)) ||
		    (rc = get_int(&c->top_k, o, "num_experts_per_tok", 2, 1, 4096, path)) ||
		    (rc = get_int(&c->moe_intermediate, o, "moe_intermediate_size", -1, 1, 1 << 20, path)) ||
		    (rc = get_int(&c->sparse_step, o, "decoder_sparse_step", 1, 1, 4096, path)))
			return rc;
		c->norm_topk = ev_json_bool(o, "norm_topk_prob", false);
	}
	if (moe && c->experts && c->top_k > c->experts)
		return ev_error_set(EV_E_INVALID, "%s: num_experts_per_tok %d exceeds the %d experts", path, c->top_k,
				    c->experts);
	if (!(c->moe_layer = calloc((size_t)c->layers, sizeof(bool))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (moe && c->experts) {
		for (int i = 0; i < c->layers; i++)
			c->moe_layer[i] = c->arch == ENG_ARCH_MIXTRAL || (i + 1) % c->sparse_step == 0;
		const cJSON *only = cJSON_GetObjectItemCaseSensitive(o, "mlp_only_layers");
		if (only && !cJSON_IsNull(only) && !cJSON_IsArray(only))
			return ev_error_set(EV_E_INVALID, "%s: 'mlp_only_layers' must be a list", path);
		for (const cJSON *e = only ? only->child : NULL; e; e = e->next) {
			if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= c->layers)
				return ev_error_set(EV_E_INVALID, "%s: mlp_only_layers: bad layer index", path);
			c->moe_layer[(int)e->valuedouble] = false;
		}
		for (int i = 0; i < c->layers; i++)
			if (!c->moe_layer[i] && c->intermediate < 1)
				return ev_error_set(EV_E_INVALID, "%s: layer %d is dense but intermediate_size is 0", path, i);
	}
ids:
	c->bos_id = -1;
	const cJSON *bos = cJSON_GetObjectItemCaseSensitive(o, "bos_token_id");
	if (cJSON_IsNumber(bos) && bos->valuedouble >= 0 && bos->valuedouble < c->vocab)
		c->bos_id = (int)bos->valuedouble;
	add_eos(c, cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"));
	return parse_msa(c, cJSON_GetObjectItemCaseSensitive(o, "msa"), path);
}

int eng_config_parse(eng_config *c, const char *json, size_t len, const char *what)
{
	memset(c, 0, sizeof(*c));
	cJSON *o = NULL;
	int rc = ev_json_parse(&o, json, len, what);
	if (!rc && !cJSON_IsObject(o))
		rc = ev_error_set(EV_E_PARSE, "%s: not a JSON object", what);
	if (!rc)
		rc = parse_config(c, o, what);
	cJSON_Delete(o);
	if (rc)
		eng_config_clear(c);
	return rc;
}

int eng_config_load(eng_config *c, const char *dir)
{
	memset(c, 0, sizeof(*c));
	char *path = ev_asprintf("%s/config.json", dir), *gpath = ev_asprintf("%s/generation_config.json", dir);
	char *text = NULL;
	size_t len;
	cJSON *o = NULL;
	int rc;
	if (!path || !gpath) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ev_file_read(&text, &len, path, CONFIG_MAX))) {
		rc = ev_error_wrap(rc, "%s", path);
		goto done;
	}
	if ((rc = eng_config_parse(c, text, len, path)))
		goto done;
	free(text);
	text = NULL;
	/* generation_config.json is optional; its EOS ids join config's */
	if (ev_file_read(&text, &len, gpath, CONFIG_MAX) == 0) {
		if (ev_json_parse(&o, text, len, gpath) == 0 && cJSON_IsObject(o))
			add_eos(c, cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"));
		else
			ev_log_warn("%s: ignored: %s", gpath, ev_error_msg());
	}
	ev_error_clear();
done:
	cJSON_Delete(o);
	free(text);
	free(path);
	free(gpath);
	if (rc)
		eng_config_clear(c);
	return rc;
}

void eng_config_clear(eng_config *c)
{
	if (!c)
		return;
	free(c->moe_layer);
	c->moe_layer = NULL;
	free(c->rope_freq_factors);
	c->rope_freq_factors = NULL;
	free(c->sparse_layer);
	c->sparse_layer = NULL;
}

/* The tensors a config implies, counted as engine/model.c binds them. */
static void count_params(const eng_config *c, uint64_t *total, uint64_t *active)
{
	uint64_t H = (uint64_t)c->hidden, V = (uint64_t)c->vocab, hd = (uint64_t)c->head_dim;
	uint64_t q = (uint64_t)c->heads * hd, kv = (uint64_t)c->kv_heads * hd;
	uint64_t t = V * H + H + (c->tie ? 0 : V * H), idle = 0;
	for (int i = 0; i < c->layers; i++) {
		t += 2 * H + H * q + 2 * H * kv + q * H;
		if (c->qkv_bias)
			t += q + 2 * kv;
		if (c->o_bias)
			t += H;
		if (c->qk_norm)
			t += 2 * hd;
		if (c->sparse_layer && c->sparse_layer[i]) /* the indexer */
			t += H * (uint64_t)c->index_heads * c->index_dim + H * c->index_dim + 2 * (uint64_t)c->index_dim;
		if (!c->moe_layer || !c->moe_layer[i]) {
			t += 3 * H * (uint64_t)c->intermediate;
			continue;
		}
		uint64_t per = 3 * H * (uint64_t)c->moe_intermediate;
		t += (uint64_t)c->experts * H + (uint64_t)c->experts * per;
		if (c->sigmoid_router)
			t += (uint64_t)c->experts + 3 * H * (uint64_t)c->shared_intermediate;
		else if (c->shared_intermediate) /* Qwen2-MoE: the shared expert and its gate */
			t += 3 * H * (uint64_t)c->shared_intermediate + H;
		idle += (uint64_t)(c->experts - c->top_k) * per;
	}
	*total = t;
	*active = t - idle;
}

int eng_config_params(const char *config_path, uint64_t *total, uint64_t *active)
{
	char *text = NULL;
	size_t len = 0;
	eng_config c;
	int rc = ev_file_read(&text, &len, config_path, CONFIG_MAX);
	if (!rc)
		rc = eng_config_parse(&c, text, len, config_path);
	free(text);
	if (rc)
		return rc;
	count_params(&c, total, active);
	eng_config_clear(&c);
	return 0;
}
