/*
 * engine/gguf/convert.c: a GGUF checkpoint as the folder the engine loads
 * (README.md "Model files"): config.json from the architecture's keys,
 * tokenizer.json and tokenizer_config.json from tokenizer.ggml.* and
 * tokenizer.chat_template, model.safetensors with Hugging Face's tensor
 * names (llama.cpp's q/k row order undone; stacked experts split; every
 * tensor in its stored type, blocks included, unless EVALD_GGUF_DEQUANTIZE=1).
 * Converted once into a cache folder keyed by the file.
 */
#include "engine/gguf/gguf.h"
#include "engine/backend.h"
#include "engine/gguf/gguf_int.h"
#include "engine/gguf/quant.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/fs.h"

typedef struct {
	const char *arch;     /* GGUF general.architecture */
	const char *hf_class; /* config.json architectures[0] */
	const char *model_type;
	bool permute_qk;      /* llama.cpp's converter reorders q/k rows for rotate-half */
	const char *moe;      /* its MoE form (a file with {arch}.expert_count): HF class, or NULL */
} arch_map;

static const arch_map archs[] = {
	{"llama", "LlamaForCausalLM", "llama", true, "MixtralForCausalLM"},
	{"qwen2", "Qwen2ForCausalLM", "qwen2", false, NULL},
	{"qwen3", "Qwen3ForCausalLM", "qwen3", false, NULL},
	{"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe", false, "Qwen3MoeForCausalLM"},
	{"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe", false, "Qwen2MoeForCausalLM"},
};

typedef struct {
	char *hf;                   /* the Hugging Face name */
	const eng_gguf_tensor *t;   /* the GGUF tensor it comes from */
	const uint8_t *data;        /* its bytes (one expert's slice of a 3-D tensor, or all) */
	uint64_t elements;
	const char *dtype;          /* in the folder */
	int64_t shape[4];
	int ndim;
	size_t bytes;               /* in the folder */
	int permute_heads;          /* > 0: undo the q/k row order over that many heads */
} out_tensor;

/* The MoE names (gguf_int.h) */
const moe_names eng_gguf_mixtral_names = {"block_sparse_moe", "w1", "w3", "w2"};
const moe_names eng_gguf_qwen_moe_names = {"mlp", "gate_proj", "up_proj", "down_proj"};

/* GGUF's names beside Hugging Face's (gguf_int.h) */
const char *const eng_gguf_top_names[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                             {"output_norm.weight", "model.norm.weight"},
                                             {"output.weight", "lm_head.weight"},
                                             {NULL, NULL}};
const char *const eng_gguf_layer_names[][2] = {
	{"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
	{"attn_k.weight", "self_attn.k_proj.weight"},   {"attn_v.weight", "self_attn.v_proj.weight"},
	{"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
	{"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.weight", "self_attn.o_proj.weight"},
	{"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
	{"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
	{"ffn_up.weight", "mlp.up_proj.weight"},        {"ffn_down.weight", "mlp.down_proj.weight"},
	{NULL, NULL},
};
const char *const eng_gguf_shexp_names[][2] = {{"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
                                               {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
                                               {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
                                               {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
                                               {NULL, NULL}};

/* GGUF's tensor names to Hugging Face's ("blk.N.x" -> "model.layers.N.y");
 * mn: the MoE names when the file has experts (the router, and older
 * files' one tensor an expert "blk.N.ffn_gate.E.weight"). */
static char *hf_name(const char *g, const moe_names *mn)
{
	for (size_t i = 0; eng_gguf_top_names[i][0]; i++)
		if (!strcmp(g, eng_gguf_top_names[i][0]))
			return ev_strdup(eng_gguf_top_names[i][1]);
	int layer = -1, used = 0;
	if (sscanf(g, "blk.%d.%n", &layer, &used) != 1 || used <= 0 || layer < 0)
		return NULL;
	for (size_t i = 0; eng_gguf_layer_names[i][0]; i++)
		if (!strcmp(g + used, eng_gguf_layer_names[i][0]))
			return ev_asprintf("model.layers.%d.%s", layer, eng_gguf_layer_names[i][1]);
	if (!mn)
		return NULL;
	if (!strcmp(g + used, "ffn_gate_inp.weight"))
		return ev_asprintf("model.layers.%d.%s.gate.weight", layer, mn->block);
	/* Qwen2-MoE's shared expert and its gate */
	for (size_t i = 0; eng_gguf_shexp_names[i][0]; i++)
		if (!strcmp(g + used, eng_gguf_shexp_names[i][0]))
			return ev_asprintf("model.layers.%d.%s", layer, eng_gguf_shexp_names[i][1]);
	int e = -1, u2 = 0;
	char which[8] = "";
	if (sscanf(g + used, "ffn_%4[a-z].%d.weight%n", which, &e, &u2) == 2 && e >= 0 && !g[used + u2]) {
		const char *leaf = !strcmp(which, "gate") ? mn->gate : !strcmp(which, "up") ? mn->up
		                   : !strcmp(which, "down") ? mn->down : NULL;
		if (leaf)
			return ev_asprintf("model.layers.%d.%s.experts.%d.%s.weight", layer, mn->block, e, leaf);
	}
	return NULL;
}

/* A 3-D expert tensor "blk.N.ffn_gate_exps.weight": its layer and which of
 * the expert's matrices (the leaf name), or NULL. */
static const char *exps_leaf(const char *g, const moe_names *mn, int *layer)
{
	int used = 0;
	*layer = -1;
	if (!mn || sscanf(g, "blk.%d.%n", layer, &used) != 1 || used <= 0 || *layer < 0)
		return NULL;
	if (!strcmp(g + used, "ffn_gate_exps.weight"))
		return mn->gate;
	if (!strcmp(g + used, "ffn_up_exps.weight"))
		return mn->up;
	if (!strcmp(g + used, "ffn_down_exps.weight"))
		return mn->down;
	return NULL;
}

static int get_u(const eng_gguf *g, const char *arch, const char *key, uint64_t *v, bool required, uint64_t dflt)
{
	char k[160];
	snprintf(k, sizeof k, "%s.%s", arch, key);
	int rc = eng_gguf_get_u64(g, k, v);
	if (rc == EV_E_NOTFOUND && !required) {
		ev_error_clear();
		*v = dflt;
		return 0;
	}
	return rc;
}

static int get_f(const eng_gguf *g, const char *arch, const char *key, double *v, double dflt)
{
	char k[160];
	snprintf(k, sizeof k, "%s.%s", arch, key);
	int rc = eng_gguf_get_f64(g, k, v);
	if (rc == EV_E_NOTFOUND) {
		ev_error_clear();
		*v = dflt;
		return 0;
	}
	return rc;
}

/* A MoE file's expert settings ({arch}.expert_*) */
typedef struct {
	uint64_t experts, used, ff; /* expert_count, expert_used_count, an expert's width */
	uint64_t shared_ff;         /* Qwen2-MoE: the shared expert's width (0: none) */
	bool norm;                  /* the chosen experts' weights renormalized */
} moe_cfg;

static int read_moe(const eng_gguf *g, const arch_map *a, moe_cfg *m)
{
	int rc = get_u(g, a->arch, "expert_used_count", &m->used, true, 0);
	if (!rc) /* Mixtral's experts are feed_forward_length wide; Qwen3-MoE names its own */
		rc = get_u(g, a->arch, strcmp(a->arch, "llama") ? "expert_feed_forward_length" : "feed_forward_length", &m->ff,
		           true, 0);
	if (rc)
		return rc;
	if (!m->used || m->used > m->experts || m->experts > 4096 || !m->ff)
		return ev_error_set(EV_E_INVALID, "%s: %llu of %llu experts a token, %llu wide", g->path,
		                    (unsigned long long)m->used, (unsigned long long)m->experts, (unsigned long long)m->ff);
	/* Mixtral and Qwen3-MoE renormalize the chosen experts' weights, Qwen2-MoE
	 * does not (llama.cpp's graphs for them); a file may say otherwise */
	char k[160];
	snprintf(k, sizeof k, "%s.expert_weights_norm", a->arch);
	const eng_gguf_value *v = eng_gguf_find_key(g, k);
	bool qwen2moe = !strcmp(a->arch, "qwen2moe");
	m->norm = v && v->type == ENG_GGUF_BOOL ? v->v.u != 0 : !qwen2moe;
	m->shared_ff = 0;
	if (qwen2moe) { /* the shared expert's width: said, or read off its first down matrix */
		const eng_gguf_tensor *sd = eng_gguf_find_tensor(g, "blk.0.ffn_down_shexp.weight");
		if ((rc = get_u(g, a->arch, "expert_shared_feed_forward_length", &m->shared_ff, false,
		                sd && sd->ndim == 2 ? sd->dims[0] : 0)))
			return rc;
	}
	return 0;
}

/* config.json and generation_config.json (moe: NULL for a dense model) */
static int write_config(const eng_gguf *g, const arch_map *a, const moe_cfg *moe, const char *dir, uint64_t vocab,
                        bool tied, long bos, long eos)
{
	uint64_t ctx, hidden, layers, ff, heads, kv, key_len;
	double eps, theta;
	int rc;
	if ((rc = get_u(g, a->arch, "embedding_length", &hidden, true, 0)) ||
	    (rc = get_u(g, a->arch, "block_count", &layers, true, 0)) ||
	    (rc = get_u(g, a->arch, "feed_forward_length", &ff, !moe, 0)) ||
	    (rc = get_u(g, a->arch, "attention.head_count", &heads, true, 0)) ||
	    (rc = get_u(g, a->arch, "attention.head_count_kv", &kv, false, 0)) ||
	    (rc = get_u(g, a->arch, "context_length", &ctx, false, 4096)) ||
	    (rc = get_u(g, a->arch, "attention.key_length", &key_len, false, 0)) ||
	    (rc = get_f(g, a->arch, "attention.layer_norm_rms_epsilon", &eps, 1e-6)) ||
	    (rc = get_f(g, a->arch, "rope.freq_base", &theta, 10000.0)))
		return rc;
	if (!kv)
		kv = heads;
	if (!heads || hidden % heads || heads % kv)
		return ev_error_set(EV_E_INVALID, "%s: %llu heads (%llu KV) over a width of %llu", g->path,
		                    (unsigned long long)heads, (unsigned long long)kv, (unsigned long long)hidden);
	char sk[160], *stype = NULL, scaling[160] = "";
	ev_buf factors = EV_BUF_INIT(1 << 20);
	snprintf(sk, sizeof sk, "%s.rope.scaling.type", a->arch);
	if (eng_gguf_get_str(g, sk, &stype) == EV_E_NOTFOUND)
		ev_error_clear();
	if (stype && strcmp(stype, "none")) {
		double factor = 1;
		if ((rc = get_f(g, a->arch, "rope.scaling.factor", &factor, 1.0)) || strcmp(stype, "linear")) {
			rc = rc ? rc : ev_error_set(EV_E_UNSUPPORTED, "%s: %s '%s' (only linear RoPE scaling is read so far)",
			                            g->path, sk, stype);
			free(stype);
			return rc;
		}
		snprintf(scaling, sizeof scaling, "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":%.17g},", factor);
	}
	free(stype);
	/* Llama 3.1-style scaling: one factor a rotary frequency, as a tensor */
	const eng_gguf_tensor *rf = eng_gguf_find_tensor(g, "rope_freqs.weight");
	if (rf) {
		uint64_t hd = key_len ? key_len : hidden / heads;
		if (scaling[0] || rf->type != ENG_GGML_F32 || rf->ndim != 1 || rf->elements != hd / 2) {
			ev_buf_free(&factors);
			return ev_error_set(EV_E_INVALID, "%s: tensor 'rope_freqs.weight': expected %llu F32 factors (head size / 2)%s",
			                    g->path, (unsigned long long)(hd / 2), scaling[0] ? " and no other RoPE scaling" : "");
		}
		ev_buf_puts(&factors, "\"rope_scaling\":{\"rope_type\":\"freq_factors\",\"factors\":[");
		for (uint64_t i = 0; i < rf->elements; i++) {
			float f;
			memcpy(&f, rf->data + 4 * i, 4);
			ev_buf_printf(&factors, "%s%.9g", i ? "," : "", (double)f);
		}
		ev_buf_puts(&factors, "]},");
	}
	char experts[256] = "";
	ev_buf dense = EV_BUF_INIT(1 << 20);
	if (moe && !strcmp(a->arch, "llama")) {
		snprintf(experts, sizeof experts, "\"num_local_experts\":%llu,\"num_experts_per_tok\":%llu,",
		         (unsigned long long)moe->experts, (unsigned long long)moe->used);
	} else if (moe) {
		snprintf(experts, sizeof experts,
		         "\"num_experts\":%llu,\"num_experts_per_tok\":%llu,\"moe_intermediate_size\":%llu,"
		         "\"norm_topk_prob\":%s,\"decoder_sparse_step\":1,\"shared_expert_intermediate_size\":%llu,",
		         (unsigned long long)moe->experts, (unsigned long long)moe->used, (unsigned long long)moe->ff,
		         moe->norm ? "true" : "false", (unsigned long long)moe->shared_ff);
		/* layers without a router are dense (Qwen3-MoE's mlp_only_layers) */
		ev_buf_puts(&dense, "\"mlp_only_layers\":[");
		for (uint64_t l = 0, n = 0; l < layers && l < (1u << 20); l++) {
			char rn[64];
			snprintf(rn, sizeof rn, "blk.%llu.ffn_gate_inp.weight", (unsigned long long)l);
			if (!eng_gguf_find_tensor(g, rn))
				ev_buf_printf(&dense, "%s%llu", n++ ? "," : "", (unsigned long long)l);
		}
		ev_buf_puts(&dense, "],");
	}
	char *cfg = ev_asprintf(
		"{\"architectures\":[\"%s\"],\"model_type\":\"%s\",%s%s\"hidden_size\":%llu,\"intermediate_size\":%llu,"
		"\"num_hidden_layers\":%llu,\"num_attention_heads\":%llu,\"num_key_value_heads\":%llu,\"head_dim\":%llu,"
		"\"rms_norm_eps\":%.9g,\"rope_theta\":%.17g,\"max_position_embeddings\":%llu,\"vocab_size\":%llu,"
		"\"tie_word_embeddings\":%s,\"bos_token_id\":%ld,\"eos_token_id\":%ld,\"torch_dtype\":\"float32\",%s"
		"\"converted_from\":\"gguf\"}\n",
		moe ? a->moe : a->hf_class, moe && !strcmp(a->arch, "llama") ? "mixtral" : a->model_type, experts,
		dense.data ? dense.data : "", (unsigned long long)hidden, (unsigned long long)ff, (unsigned long long)layers,
		(unsigned long long)heads, (unsigned long long)kv,
		(unsigned long long)(key_len ? key_len : hidden / heads), eps, theta, (unsigned long long)ctx,
		(unsigned long long)vocab, tied ? "true" : "false", bos, eos, factors.data ? factors.data : scaling);
	ev_buf_free(&factors);
	ev_buf_free(&dense);
	char *gen = ev_asprintf("{\"bos_token_id\":%ld,\"eos_token_id\":%ld}\n", bos, eos);
	char *p1 = ev_asprintf("%s/config.json", dir), *p2 = ev_asprintf("%s/generation_config.json", dir);
	rc = !cfg || !gen || !p1 || !p2 ? ev_error_set(EV_E_NOMEM, "out of memory") : ev_file_write(p1, cfg, strlen(cfg));
	if (!rc)
		rc = ev_file_write(p2, gen, strlen(gen));
	free(cfg), free(gen), free(p1), free(p2);
	return rc;
}

/* SentencePiece BPE as tokenizer.json spells it: the metaspace for spaces
 * (one put first unless add_space_prefix is false), characters outside
 * the vocabulary as their <0xXX> byte pieces, the decoder undoing both. */
static const char spm_normalizer[] = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
                                     "\"\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":"
                                     "\"\u2581\"}]}";
static const char spm_normalizer_plain[] = "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":"
                                           "\"\u2581\"}";
static const char spm_decoder[] = "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
                                  "\"\u2581\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
                                  "{\"type\":\"Strip\",\"content\":\" \",\"start\":%d,\"stop\":0}]}";

/* tokenizer.json (a byte-level BPE, or SentencePiece's BPE) and tokenizer_config.json */
static int write_tokenizer(const eng_gguf *g, const char *dir, uint64_t *vocab, long *bos, long *eos)
{
	char *model = NULL, *pre = NULL, *tmpl = NULL;
	int rc = eng_gguf_get_str(g, "tokenizer.ggml.model", &model);
	if (rc)
		return rc;
	bool spm = !strcmp(model, "llama");
	if (!spm && strcmp(model, "gpt2")) {
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s: tokenizer.ggml.model '%s': only 'gpt2' (byte-level BPE) and 'llama' "
		                                    "(SentencePiece BPE) tokenizers are read so far", g->path, model);
		free(model);
		return rc;
	}
	free(model);
	const eng_gguf_value *sp = eng_gguf_find_key(g, "tokenizer.ggml.add_space_prefix");
	bool space_prefix = !sp || sp->type != ENG_GGUF_BOOL || sp->v.u;
	if (!spm && eng_gguf_get_str(g, "tokenizer.ggml.pre", &pre) == EV_E_NOTFOUND)
		ev_error_clear();
	const eng_gguf_pre *pg = spm ? NULL : eng_gguf_pre_find(pre);
	char *ptj = pg ? eng_gguf_pre_json(pg) : NULL;
	const char *pt = spm ? "null" : ptj;
	if (!pt) {
		char known[512];
		eng_gguf_pre_list(known, sizeof known);
		rc = pg ? ev_error_set(EV_E_NOMEM, "out of memory")
		        : ev_error_set(EV_E_UNSUPPORTED, "%s: tokenizer.ggml.pre '%s': a pre-tokenizer evald does not know yet "
		                                         "(%s)", g->path, pre, known);
		free(pre), free(ptj);
		return rc;
	}
	const eng_gguf_value *toks = eng_gguf_find_key(g, "tokenizer.ggml.tokens"),
	                     *merges = eng_gguf_find_key(g, "tokenizer.ggml.merges"),
	                     *types = eng_gguf_find_key(g, "tokenizer.ggml.token_type");
	if (!toks || toks->type != ENG_GGUF_ARRAY || toks->elem_type != ENG_GGUF_STRING || !toks->count ||
	    (!spm && (!merges || merges->type != ENG_GGUF_ARRAY || merges->elem_type != ENG_GGUF_STRING))) {
		free(pre), free(ptj);
		return ev_error_set(EV_E_INVALID, "%s: tokenizer.ggml.tokens and tokenizer.ggml.merges: expected lists of "
		                                  "strings", g->path);
	}
	if (types && (types->type != ENG_GGUF_ARRAY || types->elem_type != ENG_GGUF_I32 || types->count != toks->count)) {
		free(pre), free(ptj);
		return ev_error_set(EV_E_INVALID, "%s: tokenizer.ggml.token_type: expected one i32 a token", g->path);
	}
	uint64_t u;
	*bos = eng_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u) ? -1 : (long)u;
	*eos = eng_gguf_get_u64(g, "tokenizer.ggml.eos_token_id", &u) ? -1 : (long)u;
	ev_error_clear();
	const eng_gguf_value *ab = eng_gguf_find_key(g, "tokenizer.ggml.add_bos_token");
	bool add_bos = ab && ab->type == ENG_GGUF_BOOL && ab->v.u && *bos >= 0;
	*vocab = toks->count;
	ev_buf b = EV_BUF_INIT((size_t)1 << 31), added = EV_BUF_INIT((size_t)1 << 30);
	rc = ev_buf_puts(&b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
	const uint8_t *at = toks->elems;
	const char *bos_text = NULL, *unk_text = NULL;
	size_t bos_len = 0, unk_len = 0;
	int n_added = 0;
	for (uint64_t i = 0; i < toks->count && !rc; i++) {
		eng_gguf_str s = eng_gguf_next_str(&at);
		int32_t ty = 1;
		if (types)
			memcpy(&ty, types->elems + 4 * i, 4);
		if ((long)i == *bos)
			bos_text = s.p, bos_len = s.n;
		if (ty != 3 && ty != 4 && !(spm && ty == 2)) /* control and user-defined tokens (and SentencePiece's unknown) */
			continue;
		if (ty == 2)
			unk_text = s.p, unk_len = s.n;
		rc = ev_buf_printf(&b, "%s{\"id\":%llu,\"content\":", n_added++ ? "," : "", (unsigned long long)i);
		if (!rc)
			rc = ev_json_buf_strn(&b, s.p, s.n);
		if (!rc)
			rc = ev_buf_printf(&b, ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
			                       "\"special\":%s}", ty == 3 ? "true" : "false");
	}
	if (!rc)
		rc = ev_buf_printf(&b, "],\"normalizer\":%s,\"pre_tokenizer\":%s,",
		                   !spm ? "null" : space_prefix ? spm_normalizer : spm_normalizer_plain, pt);
	if (!rc && add_bos && bos_text) {
		rc = ev_buf_puts(&b, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":");
		if (!rc)
			rc = ev_json_buf_strn(&b, bos_text, bos_len);
		if (!rc)
			rc = ev_buf_puts(&b, ",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"Sequence\":"
			                     "{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],"
			                     "\"special_tokens\":{");
		if (!rc)
			rc = ev_json_buf_strn(&b, bos_text, bos_len);
		if (!rc)
			rc = ev_buf_puts(&b, ":{\"id\":");
		if (!rc)
			rc = ev_json_buf_strn(&b, bos_text, bos_len);
		if (!rc)
			rc = ev_buf_printf(&b, ",\"ids\":[%ld],\"tokens\":[", *bos);
		if (!rc)
			rc = ev_json_buf_strn(&b, bos_text, bos_len);
		if (!rc)
			rc = ev_buf_puts(&b, "]}}},");
	} else if (!rc) {
		rc = ev_buf_puts(&b, "\"post_processor\":null,");
	}
	if (!rc && !spm)
		rc = ev_buf_printf(&b, "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
		                       "\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
		                       "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,"
		                       "\"byte_fallback\":false,\"ignore_merges\":%s,\"vocab\":{",
		                   pg->ignore_merges ? "true" : "false");
	if (!rc && spm) {
		rc = ev_buf_puts(&b, "\"decoder\":");
		if (!rc)
			rc = ev_buf_printf(&b, spm_decoder, space_prefix ? 1 : 0);
		if (!rc)
			rc = ev_buf_puts(&b, ",\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":");
		if (!rc)
			rc = unk_text ? ev_json_buf_strn(&b, unk_text, unk_len) : ev_buf_puts(&b, "null");
		if (!rc)
			rc = ev_buf_puts(&b, ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,"
			                     "\"byte_fallback\":true,\"ignore_merges\":false,\"vocab\":{");
	}
	at = toks->elems;
	for (uint64_t i = 0; i < toks->count && !rc; i++) {
		eng_gguf_str s = eng_gguf_next_str(&at);
		if (i)
			rc = ev_buf_putc(&b, ',');
		if (!rc)
			rc = ev_json_buf_strn(&b, s.p, s.n);
		if (!rc)
			rc = ev_buf_printf(&b, ":%llu", (unsigned long long)i);
	}
	if (!rc)
		rc = ev_buf_puts(&b, "},\"merges\":[");
	if (!rc && spm)
		rc = eng_gguf_spm_merges(g, &b);
	at = spm ? NULL : merges->elems;
	for (uint64_t i = 0; !spm && i < merges->count && !rc; i++) {
		eng_gguf_str s = eng_gguf_next_str(&at);
		if (i)
			rc = ev_buf_putc(&b, ',');
		if (!rc)
			rc = ev_json_buf_strn(&b, s.p, s.n);
	}
	if (!rc)
		rc = ev_buf_puts(&b, "]}}\n");
	char *path = ev_asprintf("%s/tokenizer.json", dir);
	if (!rc)
		rc = path ? ev_file_write(path, b.data, b.len) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(path);
	/* tokenizer_config.json: the chat template and the BOS/EOS tokens' text */
	if (!rc) {
		if (eng_gguf_get_str(g, "tokenizer.chat_template", &tmpl) == EV_E_NOTFOUND)
			ev_error_clear();
		ev_buf_reset(&added);
		rc = ev_buf_puts(&added, "{\"add_bos_token\":");
		if (!rc)
			rc = ev_buf_puts(&added, add_bos ? "true" : "false");
		at = toks->elems;
		for (uint64_t i = 0; i < toks->count && !rc; i++) {
			eng_gguf_str s = eng_gguf_next_str(&at);
			if ((long)i != *bos && (long)i != *eos)
				continue;
			rc = ev_buf_puts(&added, (long)i == *bos ? ",\"bos_token\":" : ",\"eos_token\":");
			if (!rc)
				rc = ev_json_buf_strn(&added, s.p, s.n);
			if (!rc && *bos == *eos) {
				rc = ev_buf_puts(&added, ",\"eos_token\":");
				if (!rc)
					rc = ev_json_buf_strn(&added, s.p, s.n);
			}
		}
		if (!rc && tmpl) {
			rc = ev_buf_puts(&added, ",\"chat_template\":");
			if (!rc)
				rc = ev_json_buf_str(&added, tmpl);
		}
		if (!rc)
			rc = ev_buf_puts(&added, "}\n");
		char *cp = ev_asprintf("%s/tokenizer_config.json", dir);
		if (!rc)
			rc = cp ? ev_file_write(cp, added.data, added.len) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(cp);
	}
	ev_buf_free(&b), ev_buf_free(&added);
	free(pre), free(ptj), free(tmpl);
	return rc;
}

/* HF row order from llama.cpp's: within each head of hd rows, GGUF row
 * 2i + j holds HF row j * hd / 2 + i (j = 0, 1). Rows of rb bytes (whole
 * rows of any type: blocks never span rows). */
static void unpermute(void *dst, const void *src, int64_t rows, size_t rb, int heads)
{
	int64_t hd = rows / heads;
	for (int h = 0; h < heads; h++)
		for (int64_t i = 0; i < hd / 2; i++)
			for (int j = 0; j < 2; j++)
				memcpy((char *)dst + (size_t)(h * hd + j * (hd / 2) + i) * rb,
				       (const char *)src + (size_t)(h * hd + 2 * i + j) * rb, rb);
}

/* The GGUF type a type is kept as: the grid types IQ3_XXS, IQ3_S, IQ1_S
 * and IQ1_M as Q6_K (value for value: eng_ggml_grid_to_q6k), the others
 * as themselves */
static uint32_t kept_as(uint32_t t)
{
	return eng_ggml_grid_type(t) ? ENG_GGML_Q6_K : t;
}

/* The engine's name of the type it keeps a GGUF type as (kept_as), or
 * NULL (converted to F32): every type it reads, unless
 * EVALD_GGUF_DEQUANTIZE=1 asks for the plain path (everything but F32
 * dequantized). */
static const char *kept_type(uint32_t t)
{
	const char *e = getenv("EVALD_GGUF_DEQUANTIZE");
	bool dequantize = e && !strcmp(e, "1");
	int d = eng_dtype_from_ggml(kept_as(t));
	if (d < 0 || (dequantize && d != ENG_F32))
		return NULL;
	return eng_dtype_name((eng_dtype)d);
}

/* The same for one tensor's n elements at data: a grid type's tensor with
 * a block whose Q6_K d would not be exact in f16 (eng_ggml_grid_q6k_d:
 * IQ3_XXS's d / 2, IQ1's d / 8) is F32 */
static const char *tensor_kept(uint32_t t, const uint8_t *data, uint64_t n)
{
	if (eng_ggml_grid_type(t) && kept_type(t))
		for (uint64_t k = 0; k < n / 256; k++) {
			uint16_t h;
			if (!eng_ggml_grid_q6k_d(data + k * eng_ggml_type_size(t), t, &h))
				return NULL;
		}
	return kept_type(t);
}

/* Bytes n elements of GGUF type t take in the folder kept as kept (or F32) */
static size_t kept_bytes(uint32_t t, const char *kept, uint64_t n)
{
	if (!kept)
		return (size_t)n * 4;
	return eng_ggml_bytes(kept_as(t), n);
}

/* One tensor of the folder: its header entry and its place in ot. */
static int add_out(ev_buf *hdr, out_tensor **ot, size_t *n, size_t *cap, size_t *off, size_t *maxel,
                   const out_tensor *o)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		out_tensor *no = realloc(*ot, nc * sizeof *no);
		if (!no)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		*ot = no, *cap = nc;
	}
	(*ot)[(*n)++] = *o;
	uint64_t stored = eng_ggml_bytes(o->t->type, o->elements);
	*maxel = o->elements > *maxel ? o->elements : *maxel;
	*maxel = stored / 4 + 1 > *maxel ? stored / 4 + 1 : *maxel;
	int rc = ev_buf_puts(hdr, ",");
	if (!rc)
		rc = ev_json_buf_str(hdr, o->hf);
	if (!rc)
		rc = ev_buf_printf(hdr, ":{\"dtype\":\"%s\",\"shape\":[", o->dtype);
	for (int d = 0; d < o->ndim && !rc; d++)
		rc = ev_buf_printf(hdr, "%s%lld", d ? "," : "", (long long)o->shape[d]);
	if (!rc)
		rc = ev_buf_printf(hdr, "],\"data_offsets\":[%zu,%zu]}", *off, *off + o->bytes);
	*off += o->bytes;
	return rc;
}

static int write_weights(const eng_gguf *g, const arch_map *a, const moe_names *mn, const char *dir, bool *tied)
{
	uint64_t heads = 0, kv = 0;
	int rc = get_u(g, a->arch, "attention.head_count", &heads, true, 0);
	if (!rc)
		rc = get_u(g, a->arch, "attention.head_count_kv", &kv, false, heads);
	if (rc)
		return rc;
	out_tensor *ot = NULL;
	size_t n = 0, cap = 0, off = 0, maxel = 0;
	*tied = true;
	ev_buf hdr = EV_BUF_INIT((size_t)256 << 20);
	rc = ev_buf_puts(&hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < g->n_t && !rc; i++) {
		const eng_gguf_tensor *t = &g->t[i];
		char *gn = ev_strndup(t->name.p, t->name.n);
		if (gn && !strcmp(gn, "rope_freqs.weight")) { /* read into config.json's rope_scaling */
			free(gn);
			continue;
		}
		int layer = -1;
		const char *leaf = gn ? exps_leaf(gn, mn, &layer) : NULL;
		if (leaf) { /* [experts, rows, cols]: one slice an expert, whole blocks each */
			if (t->ndim != 3) {
				rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s': expert tensors are 3-D, this one %d-D", g->path, gn,
				                  t->ndim);
				free(gn);
				break;
			}
			uint64_t per = t->dims[0] * t->dims[1];
			size_t pb = (size_t)(t->bytes / t->dims[2]);
			for (uint64_t e = 0; e < t->dims[2] && !rc; e++) {
				out_tensor o = {.t = t, .data = t->data + e * pb, .elements = per, .ndim = 2};
				o.hf = ev_asprintf("model.layers.%d.%s.experts.%llu.%s.weight", layer, mn->block,
				                   (unsigned long long)e, leaf);
				o.shape[0] = (int64_t)t->dims[1], o.shape[1] = (int64_t)t->dims[0];
				const char *kept = tensor_kept(t->type, o.data, per);
				o.dtype = kept ? kept : "F32";
				o.bytes = kept_bytes(t->type, kept, per);
				rc = o.hf ? add_out(&hdr, &ot, &n, &cap, &off, &maxel, &o) : ev_error_set(EV_E_NOMEM, "out of memory");
				if (rc)
					free(o.hf);
			}
			free(gn);
			continue;
		}
		char *hn = gn ? hf_name(gn, mn) : NULL;
		if (!hn) {
			rc = !gn ? ev_error_set(EV_E_NOMEM, "out of memory")
			     : ev_error_set(EV_E_UNSUPPORTED, "%s: tensor '%s': not a %s tensor evald knows", g->path, gn,
			                        a->arch);
			free(gn);
			break;
		}
		if (!strcmp(gn, "output.weight"))
			*tied = false;
		out_tensor o = {.hf = hn, .t = t, .data = t->data, .elements = t->elements, .ndim = t->ndim};
		for (int d = 0; d < t->ndim; d++) /* ggml's dims are innermost first */
			o.shape[d] = (int64_t)t->dims[t->ndim - 1 - d];
		if (t->ndim == 1 && strstr(gn, ".ffn_gate_inp_shexp.")) /* a vector in GGUF, a [1, hidden] Linear in HF */
			o.ndim = 2, o.shape[0] = 1, o.shape[1] = (int64_t)t->dims[0];
		const char *kept = tensor_kept(t->type, o.data, t->elements);
		bool q = strstr(gn, ".attn_q.weight") != NULL, k = strstr(gn, ".attn_k.weight") != NULL;
		free(gn);
		if (a->permute_qk && (q || k)) {
			o.permute_heads = (int)(q ? heads : kv);
			if (t->ndim != 2 || o.shape[0] % (2 * o.permute_heads)) {
				rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s': %lld rows do not split into %d heads of even size",
				                  g->path, hn, (long long)o.shape[0], o.permute_heads);
				free(hn);
				break;
			}
		}
		o.dtype = kept ? kept : "F32";
		o.bytes = kept_bytes(t->type, kept, t->elements);
		if ((rc = add_out(&hdr, &ot, &n, &cap, &off, &maxel, &o)))
			free(hn);
	}
	/* the tensors of each type kept as another (kept_as), counted by type */
	size_t rewritten[32] = {0};
	for (size_t i = 0; i < n && !rc; i++) {
		uint32_t t = ot[i].t->type;
		if (t < 32 && kept_as(t) != t && strcmp(ot[i].dtype, "F32"))
			rewritten[t]++;
	}
	for (uint32_t t = 0; t < 32 && !rc; t++)
		if (rewritten[t]) {
			uint32_t k = kept_as(t);
			ev_log_info("%s: %zu %s tensors kept as %s (the same values, %.3g bits a weight in memory)", g->path,
			            rewritten[t], eng_ggml_type_name(t), eng_ggml_type_name(k),
			            8.0 * (double)eng_ggml_type_size(k) / eng_ggml_type_block(k));
		}
	if (!rc)
		rc = ev_buf_putc(&hdr, '}');
	while (!rc && (8 + hdr.len) % 8)
		rc = ev_buf_putc(&hdr, ' ');
	char *path = ev_asprintf("%s/model.safetensors", dir);
	FILE *f = !rc && path ? fopen(path, "wb") : NULL;
	float *buf = NULL, *buf2 = NULL;
	if (!rc && (!f || !(buf = malloc((maxel ? maxel : 1) * 4)) || !(buf2 = malloc((maxel ? maxel : 1) * 4))))
		rc = ev_error_set(EV_E_IO, "%s: cannot write: %s", path ? path : dir, strerror(errno));
	if (!rc) {
		uint64_t hl = hdr.len;
		bool ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(hdr.data, 1, hdr.len, f) == hdr.len;
		for (size_t i = 0; i < n && ok; i++) {
			const out_tensor *o = &ot[i];
			const void *src = o->data;
			if (kept_type(o->t->type) && kept_as(o->t->type) != o->t->type && strcmp(o->dtype, "F32")) { /* as Q6_K */
				if (!eng_ggml_grid_to_q6k((uint8_t *)buf, o->data, o->t->type, (size_t)(o->elements / 256))) {
					/* (tensor_kept chose F32 for such a tensor: not reached) */
					rc = ev_error_set(EV_E_INVALID, "%s: %s: a block's scale is not exact as Q6_K's", g->path, o->hf);
					break;
				}
				src = buf;
			} else if (!kept_type(o->t->type) || strcmp(kept_type(o->t->type), o->dtype)) { /* dequantized */
				eng_ggml_dequantize(buf, o->data, o->t->type, o->elements);
				src = buf;
			}
			if (o->permute_heads) { /* whole rows moved, in whatever type they are written */
				unpermute(buf2, src, o->shape[0], o->bytes / (size_t)o->shape[0], o->permute_heads);
				src = buf2;
			}
			ok = fwrite(src, 1, o->bytes, f) == o->bytes;
		}
		if (fclose(f) != 0 || (!ok && !rc))
			rc = ev_error_set(EV_E_IO, "%s: write failed: %s", path, strerror(errno));
		f = NULL;
	}
	if (f)
		fclose(f);
	for (size_t i = 0; i < n; i++)
		free(ot[i].hf);
	free(ot), free(buf), free(buf2), free(path);
	ev_buf_free(&hdr);
	return rc;
}

int eng_gguf_convert(const char *path, const char *out_dir)
{
	eng_gguf *g = NULL;
	char *arch = NULL;
	int rc = eng_gguf_open(&g, path);
	if (!rc)
		rc = eng_gguf_get_str(g, "general.architecture", &arch);
	const arch_map *a = NULL;
	for (size_t i = 0; !rc && i < sizeof archs / sizeof archs[0]; i++)
		if (!strcmp(arch, archs[i].arch))
			a = &archs[i];
	if (!rc && !a)
		rc = ev_error_set(EV_E_UNSUPPORTED,
		                  "%s: architecture '%s' (llama, qwen2, qwen3, qwen3moe and qwen2moe GGUF files are read, and llama "
		                  "files with experts as Mixtral)",
		                  path, arch);
	/* experts: the architecture's MoE form */
	moe_cfg moe = {0};
	if (!rc)
		rc = get_u(g, a->arch, "expert_count", &moe.experts, false, 0);
	if (!rc && !moe.experts && a->moe && !strcmp(a->moe, a->hf_class)) /* MoE only (a llama may be dense) */
		rc = ev_error_set(EV_E_INVALID, "%s: %s.expert_count is required", path, a->arch);
	const moe_names *mn = NULL;
	if (!rc && moe.experts) {
		if (!a->moe)
			rc = ev_error_set(EV_E_UNSUPPORTED, "%s: %s with %llu experts: its MoE form is not read yet", path, a->arch,
			                  (unsigned long long)moe.experts);
		else
			rc = read_moe(g, a, &moe);
		mn = !strcmp(a->arch, "llama") ? &eng_gguf_mixtral_names : &eng_gguf_qwen_moe_names;
	}
	uint64_t vocab = 0;
	long bos = -1, eos = -1;
	bool tied = true;
	if (!rc)
		rc = ev_mkdir_p(out_dir);
	if (!rc)
		rc = write_tokenizer(g, out_dir, &vocab, &bos, &eos);
	if (!rc)
		rc = write_weights(g, a, mn, out_dir, &tied);
	if (!rc)
		rc = write_config(g, a, moe.experts ? &moe : NULL, out_dir, vocab, tied, bos, eos);
	free(arch);
	eng_gguf_close(g);
	return rc;
}

/* ---- the cache: one converted folder a file ------------------------------- */

static char *cache_root(void)
{
	const char *c = getenv("EVALD_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	if (c && *c)
		return ev_asprintf("%s/gguf", c);
	if (x && *x)
		return ev_asprintf("%s/evald/gguf", x);
	return ev_asprintf("%s/.cache/evald/gguf", h && *h ? h : "/tmp");
}

int eng_gguf_resolve(const char *path, char **dir)
{
	*dir = NULL;
	struct stat st;
	if (stat(path, &st) != 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	/* the key: the file's size and the hash of its first and last MiB */
	FILE *f = fopen(path, "rb");
	if (!f)
		return ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
	size_t part = 1 << 20;
	char *head = malloc(2 * part + 64);
	if (!head) {
		fclose(f);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	size_t got = fread(head, 1, part, f);
	if ((size_t)st.st_size > 2 * part && fseek(f, -(long)part, SEEK_END) == 0)
		got += fread(head + got, 1, part, f);
	fclose(f);
	/* the format version of the conversion (v6: Q3_K kept as itself, no
	 * longer as Q6_K; v5 had kept IQ4_NL as itself, no longer as Q8_0; so
	 * a folder converted before is made again) and whether blocks are kept */
	got += (size_t)snprintf(head + got, 64, "|%lld|v6|%s", (long long)st.st_size, kept_type(ENG_GGML_Q8_0) ? "q" : "f32");
	char key[EV_SHA256_HEX];
	ev_sha256_hex(key, head, got);
	free(head);
	char *root = cache_root();
	char *out = root ? ev_asprintf("%s/%.32s", root, key) : NULL;
	char *done = out ? ev_asprintf("%s/config.json", out) : NULL;
	int rc = done ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc && access(done, R_OK) != 0) {
		/* converted into a private folder, then renamed into place */
		char *tmp = ev_asprintf("%s.tmp-%d", out, (int)getpid());
		rc = tmp ? ev_mkdir_p(root) : ev_error_set(EV_E_NOMEM, "out of memory");
		if (!rc) {
			ev_rmtree(tmp, 0);
			ev_log_info("%s: converting to the engine's folder form in %s (once)", path, out);
			rc = eng_gguf_convert(path, tmp);
		}
		if (!rc && rename(tmp, out) != 0 && access(done, R_OK) != 0)
			rc = ev_error_set(EV_E_IO, "%s: %s", out, strerror(errno));
		if (tmp)
			ev_rmtree(tmp, 0);
		free(tmp);
	}
	free(root), free(done);
	if (rc) {
		free(out);
		return rc;
	}
	*dir = out;
	return 0;
}

int eng_model_path_resolve(const char *path, char **dir)
{
	size_t n = path ? strlen(path) : 0;
	struct stat st;
	if (n > 5 && !strcmp(path + n - 5, ".gguf")) {
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
			return eng_gguf_resolve(path, dir);
		if (stat(path, &st) != 0) /* named as a GGUF file: say it is missing, not that a folder lacks config.json */
			return ev_error_set(EV_E_NOTFOUND, "%s: %s", path, strerror(errno));
	}
	*dir = ev_strdup(path ? path : "");
	return *dir ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}
