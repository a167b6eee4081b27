/*
 * engine/mkmodel.c: writes a random-weight Hugging Face checkpoint of any
 * supported architecture, for tests and benchmarks: config.json,
 * generation_config.json, model.safetensors (F32, F16 or BF16, streamed to
 * disk so a large model never sits in memory) and, through the tokenizer's
 * writer, tokenizer.json + tokenizer_config.json. Linear weights are
 * uniform with standard deviation 1/sqrt(fan-in), norms near 1, so
 * activations stay near unit size through any depth the tests use.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/backend.h"
#include "engine/vision/vision.h"

/* INIT_GEMMA: a Gemma-style norm's weight, near 0 (it scales by 1 + w) */
typedef enum { INIT_LINEAR, INIT_NORM, INIT_BIAS, INIT_GEMMA } init_kind;

typedef struct {
	char name[128];
	int ndim;
	int64_t shape[5];
	init_kind init;
} spec;

typedef struct {
	spec *v;
	int n, cap;
	int rc;
} spec_list;

static void add3(spec_list *l, init_kind k, int64_t d0, int64_t d1, int64_t d2, const char *fmt, ...) EV_PRINTF(6, 7);
static void add(spec_list *l, init_kind k, int64_t d0, int64_t d1, const char *fmt, ...) EV_PRINTF(5, 6);

static spec *next_spec(spec_list *l, init_kind k, int64_t d0, int64_t d1, int64_t d2)
{
	if (l->rc)
		return NULL;
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 64;
		spec *nv = realloc(l->v, (size_t)cap * sizeof(*nv));
		if (!nv) {
			l->rc = ev_error_set(EV_E_NOMEM, "out of memory");
			return NULL;
		}
		l->v = nv;
		l->cap = cap;
	}
	spec *s = &l->v[l->n++];
	s->ndim = d2 ? 3 : d1 ? 2 : 1;
	s->shape[0] = d0;
	s->shape[1] = d1;
	s->shape[2] = d2;
	s->init = k;
	return s;
}

/* A 5-D tensor (a Conv3d kernel: out, in, t, h, w). */
static void add5(spec_list *l, init_kind k, const int64_t d[5], const char *name)
{
	spec *s = next_spec(l, k, d[0], d[1], d[2]);
	if (!s)
		return;
	s->ndim = 5;
	s->shape[3] = d[3];
	s->shape[4] = d[4];
	snprintf(s->name, sizeof(s->name), "%s", name);
}

/* A 3-D tensor (experts stored together). */
static void add3(spec_list *l, init_kind k, int64_t d0, int64_t d1, int64_t d2, const char *fmt, ...)
{
	spec *s = next_spec(l, k, d0, d1, d2);
	if (!s)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->name, sizeof(s->name), fmt, ap);
	va_end(ap);
}

static void add(spec_list *l, init_kind k, int64_t d0, int64_t d1, const char *fmt, ...)
{
	spec *s = next_spec(l, k, d0, d1, 0);
	if (!s)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->name, sizeof(s->name), fmt, ap);
	va_end(ap);
}

static const struct {
	const char *arch, *cls, *model_type, *family;
} arch_names[] = {
	{"llama", "LlamaForCausalLM", "llama", "llama3"},
	{"mistral", "MistralForCausalLM", "mistral", "llama3"},
	{"qwen2", "Qwen2ForCausalLM", "qwen2", "chatml"},
	{"qwen3", "Qwen3ForCausalLM", "qwen3", "chatml"},
	{"mixtral", "MixtralForCausalLM", "mixtral", "llama3"},
	{"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe", "chatml"},
	{"minimax_m3", "MiniMaxM3VLForCausalLM", "minimax_m3_vl_text", "chatml"},
	{"minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration", "minimax_m3_vl", "chatml"},
	{"qwen2_moe", "Qwen2MoeForCausalLM", "qwen2_moe", "chatml"},
};
#define ARCH_M3 6
#define ARCH_M3_VL 7 /* the multimodal wrapper's layout: text_config, model.language_model.* (no vision weights yet) */
#define ARCH_QWEN2_MOE 8 /* Qwen2-MoE: qwen2's biases, qwen3_moe's experts, a gated shared expert */

/* MiniMax-M3 (transformers' text-only MiniMaxM3VLForCausalLM layout):
 * layer 0 dense MLP, the others MoE; odd layers (or all, or none: sizes'
 * sparse_layers) sparse attention with a lightning indexer (index heads = KV heads, index dim =
 * head_dim); Gemma norms near 0; the router's selection bias random. */
static bool m3_sparse(const eng_mkmodel_sizes *z, int layer)
{
	if (z->sparse_layers && !strcmp(z->sparse_layers, "all"))
		return true;
	if (z->sparse_layers && !strcmp(z->sparse_layers, "none"))
		return false;
	return layer % 2;
}

static void build_m3(spec_list *l, const eng_mkmodel_sizes *z, int hd, const char *P)
{
	int H = z->hidden, q = z->heads * hd, kv = z->kv_heads * hd, I = z->intermediate;
	add(l, INIT_LINEAR, z->vocab, H, "%sembed_tokens.weight", P);
	for (int i = 0; i < z->layers; i++) {
		add(l, INIT_GEMMA, H, 0, "%slayers.%d.input_layernorm.weight", P, i);
		add(l, INIT_GEMMA, H, 0, "%slayers.%d.post_attention_layernorm.weight", P, i);
		add(l, INIT_LINEAR, q, H, "%slayers.%d.self_attn.q_proj.weight", P, i);
		add(l, INIT_LINEAR, kv, H, "%slayers.%d.self_attn.k_proj.weight", P, i);
		add(l, INIT_LINEAR, kv, H, "%slayers.%d.self_attn.v_proj.weight", P, i);
		add(l, INIT_LINEAR, H, q, "%slayers.%d.self_attn.o_proj.weight", P, i);
		add(l, INIT_GEMMA, hd, 0, "%slayers.%d.self_attn.q_norm.weight", P, i);
		add(l, INIT_GEMMA, hd, 0, "%slayers.%d.self_attn.k_norm.weight", P, i);
		if (m3_sparse(z, i)) {
			add(l, INIT_LINEAR, z->kv_heads * hd, H, "%slayers.%d.self_attn.indexer.q_proj.weight", P, i);
			add(l, INIT_LINEAR, hd, H, "%slayers.%d.self_attn.indexer.k_proj.weight", P, i);
			add(l, INIT_GEMMA, hd, 0, "%slayers.%d.self_attn.indexer.q_norm.weight", P, i);
			add(l, INIT_GEMMA, hd, 0, "%slayers.%d.self_attn.indexer.k_norm.weight", P, i);
		}
		if (i == 0 && z->layers > 1) {
			add(l, INIT_LINEAR, 2 * I, H, "%slayers.%d.mlp.gate_up_proj.weight", P, i);
			add(l, INIT_LINEAR, H, I, "%slayers.%d.mlp.down_proj.weight", P, i);
			continue;
		}
		add(l, INIT_LINEAR, z->experts, H, "%slayers.%d.mlp.gate.weight", P, i);
		add(l, INIT_BIAS, z->experts, 0, "%slayers.%d.mlp.gate.e_score_correction_bias", P, i);
		add3(l, INIT_LINEAR, z->experts, 2 * I, H, "%slayers.%d.mlp.experts.gate_up_proj", P, i);
		add3(l, INIT_LINEAR, z->experts, H, I, "%slayers.%d.mlp.experts.down_proj", P, i);
		add(l, INIT_LINEAR, 2 * I, H, "%slayers.%d.mlp.shared_experts.gate_up_proj.weight", P, i);
		add(l, INIT_LINEAR, H, I, "%slayers.%d.mlp.shared_experts.down_proj.weight", P, i);
	}
	add(l, INIT_GEMMA, H, 0, "%snorm.weight", P);
	add(l, INIT_LINEAR, z->vocab, H, "lm_head.weight");
}

/* The multimodal wrapper's vision tower and projector (sizes VISION_*, a
 * projector as wide as the text model): what transformers' from_pretrained
 * loads with nothing missing. */
#define VISION_HIDDEN(z) ((z)->vision_hidden > 0 ? (z)->vision_hidden : 32)
#define VISION_INTER(z) ((z)->vision_inter > 0 ? (z)->vision_inter : 64)
#define VISION_LAYERS(z) ((z)->vision_layers > 0 ? (z)->vision_layers : 2)
#define VISION_HEADS(z) ((z)->vision_heads > 0 ? (z)->vision_heads : 2)
static void build_vision(spec_list *l, const eng_mkmodel_sizes *z)
{
	int V = VISION_HIDDEN(z), VI = VISION_INTER(z), H = z->hidden, PH = z->hidden;
	const int64_t conv[5] = {V, 3, 2, 14, 14};
	add5(l, INIT_LINEAR, conv, "model.vision_tower.embeddings.proj.weight");
	add(l, INIT_NORM, V, 0, "model.vision_tower.pre_layrnorm.weight");
	add(l, INIT_BIAS, V, 0, "model.vision_tower.pre_layrnorm.bias");
	for (int i = 0; i < VISION_LAYERS(z); i++) {
		static const char *const proj[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
		for (int k = 0; k < 4; k++) {
			add(l, INIT_LINEAR, V, V, "model.vision_tower.layers.%d.self_attn.%s.weight", i, proj[k]);
			add(l, INIT_BIAS, V, 0, "model.vision_tower.layers.%d.self_attn.%s.bias", i, proj[k]);
		}
		for (int k = 1; k <= 2; k++) {
			add(l, INIT_NORM, V, 0, "model.vision_tower.layers.%d.layer_norm%d.weight", i, k);
			add(l, INIT_BIAS, V, 0, "model.vision_tower.layers.%d.layer_norm%d.bias", i, k);
		}
		add(l, INIT_LINEAR, VI, V, "model.vision_tower.layers.%d.mlp.fc1.weight", i);
		add(l, INIT_BIAS, VI, 0, "model.vision_tower.layers.%d.mlp.fc1.bias", i);
		add(l, INIT_LINEAR, V, VI, "model.vision_tower.layers.%d.mlp.fc2.weight", i);
		add(l, INIT_BIAS, V, 0, "model.vision_tower.layers.%d.mlp.fc2.bias", i);
	}
	add(l, INIT_LINEAR, PH, V, "model.multi_modal_projector.linear_1.weight");
	add(l, INIT_BIAS, PH, 0, "model.multi_modal_projector.linear_1.bias");
	add(l, INIT_LINEAR, H, PH, "model.multi_modal_projector.linear_2.weight");
	add(l, INIT_BIAS, H, 0, "model.multi_modal_projector.linear_2.bias");
	add(l, INIT_LINEAR, PH, 4 * H, "model.multi_modal_projector.merge_linear_1.weight");
	add(l, INIT_BIAS, PH, 0, "model.multi_modal_projector.merge_linear_1.bias");
	add(l, INIT_LINEAR, H, PH, "model.multi_modal_projector.merge_linear_2.weight");
	add(l, INIT_BIAS, H, 0, "model.multi_modal_projector.merge_linear_2.bias");
}
#define NARCH (int)(sizeof(arch_names) / sizeof(arch_names[0]))

static void build_specs(spec_list *l, int a, const eng_mkmodel_sizes *z, int hd, bool tie)
{
	if (a == ARCH_M3 || a == ARCH_M3_VL) {
		build_m3(l, z, hd, a == ARCH_M3_VL ? "model.language_model." : "model.");
		if (a == ARCH_M3_VL)
			build_vision(l, z);
		return;
	}
	int H = z->hidden, q = z->heads * hd, kv = z->kv_heads * hd;
	bool qwen2 = a == 2 || a == ARCH_QWEN2_MOE, qk = a == 3 || a == 5, mixtral = a == 4,
	     qmoe = a == 5 || a == ARCH_QWEN2_MOE;
	add(l, INIT_LINEAR, z->vocab, H, "model.embed_tokens.weight");
	for (int i = 0; i < z->layers; i++) {
		add(l, INIT_NORM, H, 0, "model.layers.%d.input_layernorm.weight", i);
		add(l, INIT_NORM, H, 0, "model.layers.%d.post_attention_layernorm.weight", i);
		add(l, INIT_LINEAR, q, H, "model.layers.%d.self_attn.q_proj.weight", i);
		add(l, INIT_LINEAR, kv, H, "model.layers.%d.self_attn.k_proj.weight", i);
		add(l, INIT_LINEAR, kv, H, "model.layers.%d.self_attn.v_proj.weight", i);
		add(l, INIT_LINEAR, H, q, "model.layers.%d.self_attn.o_proj.weight", i);
		if (qwen2) {
			add(l, INIT_BIAS, q, 0, "model.layers.%d.self_attn.q_proj.bias", i);
			add(l, INIT_BIAS, kv, 0, "model.layers.%d.self_attn.k_proj.bias", i);
			add(l, INIT_BIAS, kv, 0, "model.layers.%d.self_attn.v_proj.bias", i);
		}
		if (qk) {
			add(l, INIT_NORM, hd, 0, "model.layers.%d.self_attn.q_norm.weight", i);
			add(l, INIT_NORM, hd, 0, "model.layers.%d.self_attn.k_norm.weight", i);
		}
		bool moe = mixtral || (qmoe && !(i == 0 && z->layers > 1));
		if (!moe) {
			add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.mlp.gate_proj.weight", i);
			add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.mlp.up_proj.weight", i);
			add(l, INIT_LINEAR, H, z->intermediate, "model.layers.%d.mlp.down_proj.weight", i);
		} else if (mixtral) {
			add(l, INIT_LINEAR, z->experts, H, "model.layers.%d.block_sparse_moe.gate.weight", i);
			for (int e = 0; e < z->experts; e++) {
				add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", i, e);
				add(l, INIT_LINEAR, H, z->intermediate, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", i, e);
				add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", i, e);
			}
		} else {
			add(l, INIT_LINEAR, z->experts, H, "model.layers.%d.mlp.gate.weight", i);
			for (int e = 0; e < z->experts; e++) {
				add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.mlp.experts.%d.gate_proj.weight", i, e);
				add(l, INIT_LINEAR, z->intermediate, H, "model.layers.%d.mlp.experts.%d.up_proj.weight", i, e);
				add(l, INIT_LINEAR, H, z->intermediate, "model.layers.%d.mlp.experts.%d.down_proj.weight", i, e);
			}
			if (a == ARCH_QWEN2_MOE) { /* the shared expert, twice an expert's width, and its gate */
				add(l, INIT_LINEAR, 2 * z->intermediate, H, "model.layers.%d.mlp.shared_expert.gate_proj.weight", i);
				add(l, INIT_LINEAR, 2 * z->intermediate, H, "model.layers.%d.mlp.shared_expert.up_proj.weight", i);
				add(l, INIT_LINEAR, H, 2 * z->intermediate, "model.layers.%d.mlp.shared_expert.down_proj.weight", i);
				add(l, INIT_LINEAR, 1, H, "model.layers.%d.mlp.shared_expert_gate.weight", i);
			}
		}
	}
	add(l, INIT_NORM, H, 0, "model.norm.weight");
	if (!tie)
		add(l, INIT_LINEAR, z->vocab, H, "lm_head.weight");
}

static int write_json(const char *dir, const char *name, cJSON *o)
{
	char *text = ev_json_print(o), *path = ev_asprintf("%s/%s", dir, name);
	int rc = text && path ? ev_file_write(path, text, strlen(text)) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(text);
	free(path);
	return rc;
}

static int write_config(const char *dir, int a, const eng_mkmodel_sizes *z, int hd, bool tie, const char *dtype,
			int bos, const int32_t *eos, int neos)
{
	cJSON *o = cJSON_CreateObject(), *g = cJSON_CreateObject();
	int rc = 0;
	if (!o || !g) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	cJSON *arr = cJSON_AddArrayToObject(o, "architectures");
	cJSON_AddItemToArray(arr, cJSON_CreateString(arch_names[a].cls));
	cJSON_AddStringToObject(o, "model_type", arch_names[a].model_type);
	cJSON_AddNumberToObject(o, "hidden_size", z->hidden);
	cJSON_AddNumberToObject(o, "intermediate_size", z->intermediate);
	cJSON_AddNumberToObject(o, "num_hidden_layers", z->layers);
	cJSON_AddNumberToObject(o, "num_attention_heads", z->heads);
	cJSON_AddNumberToObject(o, "num_key_value_heads", z->kv_heads);
	cJSON_AddNumberToObject(o, "head_dim", hd);
	cJSON_AddNumberToObject(o, "vocab_size", z->vocab);
	cJSON_AddNumberToObject(o, "max_position_embeddings", (double)z->max_position);
	cJSON_AddNumberToObject(o, "rms_norm_eps", a == 0 ? 1e-5 : 1e-6);
	cJSON_AddNumberToObject(o, "rope_theta", a >= 2 && a != 4 ? 1000000.0 : 500000.0);
	cJSON_AddBoolToObject(o, "tie_word_embeddings", tie);
	cJSON_AddStringToObject(o, "hidden_act", "silu");
	cJSON_AddStringToObject(o, "torch_dtype", !strcmp(dtype, "f32") ? "float32" : !strcmp(dtype, "f16") ? "float16" : "bfloat16");
	cJSON_AddBoolToObject(o, "attention_bias", false);
	if (a == 0) {
		cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
		cJSON_AddStringToObject(rs, "rope_type", "llama3");
		cJSON_AddNumberToObject(rs, "factor", 8.0);
		cJSON_AddNumberToObject(rs, "low_freq_factor", 1.0);
		cJSON_AddNumberToObject(rs, "high_freq_factor", 4.0);
		cJSON_AddNumberToObject(rs, "original_max_position_embeddings", 8192);
	}
	if (a == 1 || a == 4)
		cJSON_AddNullToObject(o, "sliding_window");
	if (a == 2)
		cJSON_AddBoolToObject(o, "use_sliding_window", false);
	if (a == 4) {
		cJSON_AddNumberToObject(o, "num_local_experts", z->experts);
		cJSON_AddNumberToObject(o, "num_experts_per_tok", z->top_k);
	}
	if (a == 5 || a == ARCH_QWEN2_MOE) {
		cJSON_AddNumberToObject(o, "num_experts", z->experts);
		cJSON_AddNumberToObject(o, "num_experts_per_tok", z->top_k);
		cJSON_AddNumberToObject(o, "moe_intermediate_size", z->intermediate);
		cJSON_AddNumberToObject(o, "decoder_sparse_step", 1);
		cJSON_AddBoolToObject(o, "norm_topk_prob", a == 5); /* Qwen2-MoE: false, its released default */
		if (a == ARCH_QWEN2_MOE)
			cJSON_AddNumberToObject(o, "shared_expert_intermediate_size", 2 * z->intermediate);
		cJSON *only = cJSON_AddArrayToObject(o, "mlp_only_layers");
		if (z->layers > 1)
			cJSON_AddItemToArray(only, cJSON_CreateNumber(0));
	}
	if (a == ARCH_M3 || a == ARCH_M3_VL) {
		/* partial rotary (half the head), every layer kind present */
		cJSON_DeleteItemFromObject(o, "rope_theta");
		cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
		cJSON_AddStringToObject(rp, "rope_type", "default");
		cJSON_AddRawToObject(rp, "rope_theta", "5000000.0"); /* floats as floats: transformers' config checks */
		cJSON_AddNumberToObject(rp, "partial_rotary_factor", 0.5);
		cJSON_AddNumberToObject(o, "rotary_dim", hd / 2);
		cJSON_AddNumberToObject(o, "dense_intermediate_size", z->intermediate);
		cJSON_AddNumberToObject(o, "shared_intermediate_size", z->intermediate);
		cJSON_AddNumberToObject(o, "num_local_experts", z->experts);
		cJSON_AddNumberToObject(o, "num_experts_per_tok", z->top_k);
		cJSON_AddRawToObject(o, "routed_scaling_factor", "2.0");
		cJSON_AddNumberToObject(o, "swiglu_alpha", 1.702);
		cJSON_AddRawToObject(o, "swiglu_limit", "2.0"); /* low: random activations reach the clamp */
		cJSON_AddNumberToObject(o, "index_n_heads", z->kv_heads);
		cJSON_AddNumberToObject(o, "index_head_dim", hd);
		cJSON_AddNumberToObject(o, "index_block_size", z->index_block > 0 ? z->index_block : 16);
		cJSON_AddNumberToObject(o, "index_topk_blocks", z->index_topk > 0 ? z->index_topk : 4);
		cJSON_AddNumberToObject(o, "index_local_blocks", 1);
		cJSON *lt = cJSON_AddArrayToObject(o, "layer_types"), *mt = cJSON_AddArrayToObject(o, "mlp_layer_types");
		for (int i = 0; i < z->layers; i++) {
			cJSON_AddItemToArray(lt, cJSON_CreateString(m3_sparse(z, i) ? "minimax_m3_sparse" : "full_attention"));
			cJSON_AddItemToArray(mt, cJSON_CreateString(i == 0 && z->layers > 1 ? "dense" : "sparse"));
		}
	}
	if (bos < 0 && (a == ARCH_M3 || a == ARCH_M3_VL)) /* else transformers takes the released model's id, outside this vocab */
		cJSON_AddNullToObject(o, "bos_token_id");
	if (bos >= 0) {
		cJSON_AddNumberToObject(o, "bos_token_id", bos);
		cJSON_AddNumberToObject(g, "bos_token_id", bos);
	}
	if (neos > 0) {
		cJSON_AddNumberToObject(o, "eos_token_id", eos[0]);
		cJSON *ge = cJSON_AddArrayToObject(g, "eos_token_id");
		for (int i = 0; i < neos; i++)
			cJSON_AddItemToArray(ge, cJSON_CreateNumber(eos[i]));
	}
	if (a == ARCH_M3_VL) { /* the decoder's settings become text_config; a small vision tower's config */
		cJSON *w = cJSON_CreateObject(), *wa = cJSON_AddArrayToObject(w, "architectures"), *v;
		cJSON_AddItemToArray(wa, cJSON_CreateString(arch_names[a].cls));
		cJSON_AddStringToObject(w, "model_type", "minimax_m3_vl");
		cJSON_DeleteItemFromObject(o, "architectures");
		cJSON_ReplaceItemInObject(o, "model_type", cJSON_CreateString("minimax_m3_vl_text"));
		cJSON_AddItemToObject(w, "text_config", o);
		v = cJSON_AddObjectToObject(w, "vision_config");
		cJSON_AddNumberToObject(v, "hidden_size", VISION_HIDDEN(z));
		cJSON_AddNumberToObject(v, "intermediate_size", VISION_INTER(z));
		cJSON_AddNumberToObject(v, "num_hidden_layers", VISION_LAYERS(z));
		cJSON_AddNumberToObject(v, "num_attention_heads", VISION_HEADS(z));
		cJSON_AddNumberToObject(v, "patch_size", 14);
		cJSON_AddNumberToObject(v, "temporal_patch_size", 2);
		cJSON_AddNumberToObject(v, "spatial_merge_size", 2);
		cJSON *vr = cJSON_AddObjectToObject(v, "rope_parameters");
		cJSON_AddStringToObject(vr, "rope_type", "axial");
		cJSON_AddRawToObject(vr, "rope_theta", "10000.0");
		cJSON_AddNumberToObject(w, "projector_hidden_size", z->hidden);
		/* placeholder ids inside this vocabulary (the released ones are not) */
		cJSON_AddNumberToObject(w, "image_token_index", z->vocab - 4);
		cJSON_AddNumberToObject(w, "video_token_index", z->vocab - 1);
		cJSON_AddBoolToObject(w, "tie_word_embeddings", false);
		o = w;
	}
	if ((rc = write_json(dir, "config.json", o)))
		goto done;
	rc = write_json(dir, "generation_config.json", g);
done:
	cJSON_Delete(o);
	cJSON_Delete(g);
	return rc;
}

static double spec_std(const spec *s)
{
	double fan = (double)s->shape[s->ndim - 1];
	if (s->ndim == 5) /* a Conv3d kernel: every input value of a patch */
		fan = (double)(s->shape[1] * s->shape[2] * s->shape[3] * s->shape[4]);
	return s->init == INIT_LINEAR ? 1.0 / sqrt(fan) : 0.1;
}

static int write_weights(const char *dir, const spec_list *l, eng_dtype dt, uint64_t seed)
{
	ev_buf hdr = EV_BUF_INIT(100u << 20);
	char *path = ev_asprintf("%s/model.safetensors", dir), *tmp = ev_asprintf("%s/.model.safetensors.tmp", dir);
	FILE *f = NULL;
	float *row = NULL;
	void *out = NULL;
	int rc = 0;
	size_t es = eng_dtype_size(dt), off = 0, maxrow = 0;
	if (!path || !tmp) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	rc = ev_buf_puts(&hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < l->n && !rc; i++) {
		const spec *s = &l->v[i];
		size_t n = 1;
		for (int d = 0; d < s->ndim; d++)
			n *= (size_t)s->shape[d];
		size_t rl = (size_t)s->shape[s->ndim - 1];
		maxrow = rl > maxrow ? rl : maxrow;
		rc = ev_buf_printf(&hdr, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", s->name, eng_dtype_name(dt));
		for (int d = 0; !rc && d < s->ndim; d++)
			rc = ev_buf_printf(&hdr, "%s%lld", d ? "," : "", (long long)s->shape[d]);
		if (!rc)
			rc = ev_buf_printf(&hdr, "],\"data_offsets\":[%zu,%zu]}", off, off + n * es);
		off += n * es;
	}
	if (!rc)
		rc = ev_buf_putc(&hdr, '}');
	while (!rc && (8 + hdr.len) % 8) /* keep the data region 8-aligned */
		rc = ev_buf_putc(&hdr, ' ');
	if (rc)
		goto done;
	if (!(row = malloc(maxrow * sizeof(float))) || !(out = malloc(maxrow * es))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (!(f = fopen(tmp, "wb"))) {
		rc = ev_error_set(EV_E_IO, "%s: %s", tmp, strerror(errno));
		goto done;
	}
	unsigned char len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
	bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr.data, 1, hdr.len, f) == hdr.len;
	ev_rng rng;
	ev_rng_seed(&rng, seed);
	for (int i = 0; i < l->n && ok; i++) {
		const spec *s = &l->v[i];
		size_t rl = (size_t)s->shape[s->ndim - 1], nrows = 1;
		for (int d = 0; d + 1 < s->ndim; d++)
			nrows *= (size_t)s->shape[d];
		double a = sqrt(3.0) * spec_std(s);
		for (size_t r = 0; r < nrows && ok; r++) {
			for (size_t j = 0; j < rl; j++) {
				double u = (2 * ev_rng_uniform(&rng) - 1) * a;
				row[j] = (float)(s->init == INIT_NORM ? 1.0 + u : u);
			}
			if (dt == ENG_F32)
				memcpy(out, row, rl * 4);
			else
				for (size_t j = 0; j < rl; j++)
					((uint16_t *)out)[j] = dt == ENG_F16 ? eng_f32_to_f16(row[j]) : eng_f32_to_bf16(row[j]);
			ok = fwrite(out, es, rl, f) == rl;
		}
	}
	if (fclose(f) != 0)
		ok = false;
	f = NULL;
	if (!ok || rename(tmp, path)) {
		rc = ev_error_set(EV_E_IO, "%s: write failed: %s", tmp, strerror(errno));
		remove(tmp);
	}
done:
	if (f) {
		fclose(f);
		remove(tmp);
	}
	free(row);
	free(out);
	free(path);
	free(tmp);
	ev_buf_free(&hdr);
	return rc;
}

int eng_mkmodel(const char *dir, const char *arch, const eng_mkmodel_sizes *sizes, const char *dtype, uint64_t seed)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	if (sizes)
		z = *sizes;
	int a = -1, rc;
	for (int i = 0; i < NARCH; i++)
		if (arch && !strcmp(arch, arch_names[i].arch))
			a = i;
	if (a < 0)
		return ev_error_set(EV_E_INVALID,
				    "mkmodel: unknown arch '%s' (llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, minimax_m3, "
				    "minimax_m3_vl, qwen2_moe)",
				    arch ? arch : "");
	eng_dtype dt;
	if (!dtype || !strcmp(dtype, "f32"))
		dt = ENG_F32;
	else if (!strcmp(dtype, "f16"))
		dt = ENG_F16;
	else if (!strcmp(dtype, "bf16"))
		dt = ENG_BF16;
	else
		return ev_error_set(EV_E_INVALID, "mkmodel: dtype '%s' (f32, f16, bf16)", dtype);
	bool moe = a >= 4;
	if (z.hidden < 2 || z.hidden > 16384 || z.layers < 1 || z.layers > 256 || z.heads < 1 || z.kv_heads < 1 ||
	    z.heads % z.kv_heads || z.intermediate < 1 || z.intermediate > 65536 || z.vocab < 2 || z.vocab > 1 << 20 ||
	    (moe && (z.experts < 1 || z.experts > 256 || z.top_k < 1 || z.top_k > z.experts)) || z.max_position < 1)
		return ev_error_set(EV_E_INVALID, "mkmodel: sizes out of range (heads a multiple of kv_heads, "
						  "top_k <= experts)");
	int hd = z.head_dim ? z.head_dim : z.hidden / z.heads;
	if (hd < 2 || hd % 2 || (!z.head_dim && z.hidden % z.heads))
		return ev_error_set(EV_E_INVALID, "mkmodel: head_dim %d must be even (hidden a multiple of heads)", hd);
	bool tie = a == 2 || a == 3;
	if ((a == ARCH_M3 || a == ARCH_M3_VL) && hd % 4)
		return ev_error_set(EV_E_INVALID, "mkmodel: minimax_m3 rotates half the head: head_dim %d must be a multiple of 4",
				    hd);
	if ((rc = ev_mkdir_p(dir)))
		return rc;
	/* the tokenizer first: its special ids go into the configs */
	int bos = -1, neos = 0;
	int32_t eos[8];
	eng_tokenizer *tok = NULL;
	const char *fam = arch_names[a].family;
	/* the multimodal wrapper's placeholders as M3's processor spells them,
	 * the vocabulary's last four ids (image_token_index = vocab - 4,
	 * video_token_index = vocab - 1) */
	static const char *const vision_sp[] = {ENG_VISION_IMAGE_MARKER, ENG_VISION_START_MARKER, ENG_VISION_END_MARKER,
						ENG_VISION_VIDEO_MARKER};
	const char *sp[8];
	size_t nsp = 0;
	if (z.thinking) /* before the placeholders, which stay the last ids */
		sp[nsp++] = "<think>", sp[nsp++] = "</think>";
	for (size_t k = 0; a == ARCH_M3_VL && k < 4; k++)
		sp[nsp++] = vision_sp[k];
	if (eng_tokenizer_write_default_ex(dir, z.vocab, fam, sp, nsp) == 0 &&
	    eng_tokenizer_load(&tok, dir) == 0) {
		bos = eng_tokenizer_bos_id(tok);
		int32_t e = eng_tokenizer_eos_id(tok);
		if (e >= 0)
			eos[neos++] = e;
		int32_t st[8];
		size_t ns = eng_chat_stop_ids(tok, eng_chat_family_from_name(fam), st, 8);
		for (size_t i = 0; i < ns && neos < 8; i++) {
			bool dup = false;
			for (int j = 0; j < neos; j++)
				dup |= eos[j] == st[i];
			if (!dup)
				eos[neos++] = st[i];
		}
		eng_tokenizer_free(tok);
	} else {
		ev_log_warn("mkmodel: %s: no tokenizer written (vocab %d): %s", dir, z.vocab, ev_error_msg());
	}
	if ((rc = write_config(dir, a, &z, hd, tie, dtype ? dtype : "f32", bos, eos, neos)))
		return rc;
	spec_list l = {0};
	build_specs(&l, a, &z, hd, tie);
	rc = l.rc ? l.rc : write_weights(dir, &l, dt, seed);
	free(l.v);
	return rc;
}
