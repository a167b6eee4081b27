/*
 * engine/mkrecall.c: the recall checkpoint, a one-layer LlamaForCausalLM
 * whose weights are written down (not trained) so that it answers
 * " ... K<i> V<j> ... ? K<i>" with "V<j>" at any distance it can hold, and
 * the prompts and suite that go with it. It gives long-context code paths
 * (dense and MSA attention, a 1M-token KV cache) a model whose right
 * answer is known. The construction is in engine/README.md ("MSA").
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/backend.h"
#include "engine/tokenizer/tokenizer_int.h"

#define NK 32   /* keys */
#define NV 16   /* values */
#define NF 16   /* filler words */
#define CODE 16 /* +-1 code length of a key */
#define H 64    /* hidden size */
#define HD 64   /* head_dim (one head) */
#define INTER 8 /* MLP width (all zero) */

/* token ids */
#define T_EOS 256
#define T_ASK 257
#define T_KEY(i) (258 + (i))
#define T_VAL(j) (258 + NK + (j))
#define T_FILL(f) (258 + NK + NV + (f))
#define T_PAIR(i, j) (258 + NK + NV + NF + (i) * NV + (j))
#define VOCAB (258 + NK + NV + NF + NK * NV)

/* residual layout */
#define R_QCODE 0   /* [0, 16): a standalone key's code: the query */
#define R_KCODE 16  /* [16, 32): a pair's key code: what is matched */
#define R_VAL 32    /* [32, 48): a pair's value, one-hot; attention writes here */
#define R_PLAIN 48  /* fillers, "?", bytes */
#define R_ISVAL 49  /* an answer token: next comes EOS */

#define ROPE_THETA 1e12
#define GAIN_QK 2.5f
#define GAIN_O 2.0f
#define GAIN_LM 4.0f
#define GAIN_EOS 8.0f

/* The key codes: 16-bit words, pairwise Hamming distance >= 6 (so a
 * wrong key's dot product with the right one is at most 4 of 16), picked
 * greedily from a fixed pseudo-random order. */
static void key_codes(uint16_t code[NK])
{
	ev_rng r;
	ev_rng_seed(&r, 20240917);
	int n = 0;
	while (n < NK) {
		uint16_t c = (uint16_t)ev_rng_below(&r, 65536);
		int ok = 1;
		for (int k = 0; k < n && ok; k++)
			ok = __builtin_popcount((unsigned)(c ^ code[k])) >= 6;
		if (ok)
			code[n++] = c;
	}
}

/* RoPE pairs (d, d + 32) with d >= 24 turn by at most theta^(-48/64) =
 * 1e-9 rad a position: under 1e-3 rad over a million positions. The code's
 * 16 entries go there. */
static int stable_dim(int i)
{
	return i < 8 ? 24 + i : 56 + (i - 8);
}

/* Text of token t (NULL for the byte tokens). */
static int token_text(char *buf, size_t cap, int t)
{
	if (t == T_EOS)
		return snprintf(buf, cap, "</s>");
	if (t == T_ASK)
		return snprintf(buf, cap, " ?");
	if (t >= T_KEY(0) && t < T_KEY(NK))
		return snprintf(buf, cap, " K%d", t - T_KEY(0));
	if (t >= T_VAL(0) && t < T_VAL(NV))
		return snprintf(buf, cap, "V%d", t - T_VAL(0));
	if (t >= T_FILL(0) && t < T_FILL(NF))
		return snprintf(buf, cap, " F%d", t - T_FILL(0));
	if (t >= T_PAIR(0, 0) && t < VOCAB)
		return snprintf(buf, cap, " K%d V%d", (t - T_PAIR(0, 0)) / NV, (t - T_PAIR(0, 0)) % NV);
	return -1;
}

static void embed_row(float *e, int t, const uint16_t *code)
{
	memset(e, 0, H * sizeof(float));
	if (t >= T_KEY(0) && t < T_KEY(NK)) {
		for (int b = 0; b < CODE; b++)
			e[R_QCODE + b] = code[t - T_KEY(0)] >> b & 1 ? 1.0f : -1.0f;
	} else if (t >= T_PAIR(0, 0) && t < VOCAB) {
		int i = (t - T_PAIR(0, 0)) / NV, j = (t - T_PAIR(0, 0)) % NV;
		for (int b = 0; b < CODE; b++)
			e[R_KCODE + b] = code[i] >> b & 1 ? 1.0f : -1.0f;
		e[R_VAL + j] = 1.0f;
	} else if (t >= T_VAL(0) && t < T_VAL(NV)) {
		e[R_ISVAL] = 1.0f;
	} else {
		e[R_PLAIN] = 1.0f;
	}
}

typedef struct {
	const char *name;
	int rows, cols; /* cols 0: a vector */
	float *data;
} tensor;

static int write_safetensors(const char *path, const tensor *t, int n)
{
	ev_buf h = EV_BUF_INIT(1 << 20);
	int rc = ev_buf_putc(&h, '{');
	size_t off = 0;
	for (int i = 0; i < n && !rc; i++) {
		size_t cnt = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1);
		if (t[i].cols)
			rc = ev_buf_printf(&h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
					   i ? "," : "", t[i].name, t[i].rows, t[i].cols, off, off + cnt * 4);
		else
			rc = ev_buf_printf(&h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
					   i ? "," : "", t[i].name, t[i].rows, off, off + cnt * 4);
		off += cnt * 4;
	}
	if (!rc)
		rc = ev_buf_putc(&h, '}');
	while (!rc && h.len % 8)
		rc = ev_buf_putc(&h, ' ');
	FILE *f = rc ? NULL : fopen(path, "wb");
	if (!rc && !f)
		rc = ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
	if (!rc) {
		uint64_t hl = h.len;
		unsigned char le[8];
		for (int b = 0; b < 8; b++)
			le[b] = (unsigned char)(hl >> (8 * b));
		int ok = fwrite(le, 1, 8, f) == 8 && fwrite(h.data, 1, h.len, f) == h.len;
		for (int i = 0; i < n && ok; i++) {
			size_t cnt = (size_t)t[i].rows * (size_t)(t[i].cols ? t[i].cols : 1);
			ok = fwrite(t[i].data, sizeof(float), cnt, f) == cnt;
		}
		if (fclose(f) || !ok)
			rc = ev_error_set(EV_E_IO, "%s: write failed", path);
	}
	ev_buf_free(&h);
	return rc;
}

static int write_text(const char *dir, const char *name, const char *text, size_t len)
{
	char *p = ev_asprintf("%s/%s", dir, name);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_file_write(p, text, len);
	free(p);
	return rc;
}

/* tokenizer.json: the 256 byte tokens (no merges) and every word of the
 * vocabulary as an added token, so text splits into exactly them. */
static int write_tokenizer(const char *dir)
{
	ev_buf j = EV_BUF_INIT(4u << 20), m = EV_BUF_INIT(64);
	char w[64];
	int rc = ev_buf_puts(&j, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
	for (int t = T_EOS; t < VOCAB && !rc; t++) {
		token_text(w, sizeof w, t);
		rc = ev_buf_printf(&j, "%s{\"id\":%d,\"content\":", t > T_EOS ? "," : "", t);
		if (!rc && !(rc = ev_json_buf_str(&j, w)))
			rc = ev_buf_printf(&j, ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
					       "\"normalized\":false,\"special\":%s}",
					   t == T_EOS ? "true" : "false");
	}
	if (!rc)
		rc = ev_buf_puts(&j, "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
				     "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
				     "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
				     "\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
				     "\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
				     "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{");
	for (int b = 0; b < 256 && !rc; b++) {
		char c = (char)b;
		ev_buf_reset(&m);
		if (!(rc = eng_tok_map(&m, &c, 1)) && !(rc = ev_buf_puts(&j, b ? "," : "")) &&
		    !(rc = ev_json_buf_str(&j, m.data)))
			rc = ev_buf_printf(&j, ":%d", b);
	}
	if (!rc)
		rc = ev_buf_puts(&j, "},\"merges\":[]}}\n");
	if (!rc)
		rc = write_text(dir, "tokenizer.json", j.data, j.len);
	static const char cfg[] = "{\"added_tokens_decoder\":{\"256\":{\"content\":\"</s>\",\"lstrip\":false,"
				  "\"normalized\":false,\"rstrip\":false,\"single_word\":false,\"special\":true}},"
				  "\"bos_token\":null,\"eos_token\":\"</s>\",\"clean_up_tokenization_spaces\":false,"
				  "\"model_max_length\":2097152,\"tokenizer_class\":\"PreTrainedTokenizerFast\"}\n";
	if (!rc)
		rc = write_text(dir, "tokenizer_config.json", cfg, sizeof cfg - 1);
	ev_buf_free(&m);
	ev_buf_free(&j);
	return rc;
}

int eng_mkrecall(const char *dir)
{
	uint16_t code[NK];
	key_codes(code);
	float *emb = calloc((size_t)VOCAB * H, sizeof(float)), *lm = calloc((size_t)VOCAB * H, sizeof(float));
	float *wq = calloc(HD * H, sizeof(float)), *wk = calloc(HD * H, sizeof(float));
	float *wv = calloc(HD * H, sizeof(float)), *wo = calloc(H * HD, sizeof(float));
	float *ones = malloc(H * sizeof(float)), *zero = calloc(INTER * H, sizeof(float));
	char *path = NULL;
	int rc = 0;
	if (!emb || !lm || !wq || !wk || !wv || !wo || !ones || !zero) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (int i = 0; i < H; i++)
		ones[i] = 1.0f;
	for (int t = 0; t < VOCAB; t++)
		embed_row(emb + (size_t)t * H, t, code);
	for (int b = 0; b < CODE; b++) {
		wq[stable_dim(b) * H + R_QCODE + b] = GAIN_QK; /* query: the asked key's code */
		wk[stable_dim(b) * H + R_KCODE + b] = GAIN_QK; /* key: a pair's key code */
	}
	for (int j = 0; j < NV; j++) {
		wv[j * H + R_VAL + j] = 1.0f;       /* value: the pair's value, one-hot */
		wo[(R_VAL + j) * HD + j] = GAIN_O;  /* back into the value dims */
		lm[(size_t)T_VAL(j) * H + R_VAL + j] = GAIN_LM;
	}
	lm[(size_t)T_EOS * H + R_ISVAL] = GAIN_EOS;
	tensor ts[] = {
		{"lm_head.weight", VOCAB, H, lm},
		{"model.embed_tokens.weight", VOCAB, H, emb},
		{"model.layers.0.input_layernorm.weight", H, 0, ones},
		{"model.layers.0.mlp.down_proj.weight", H, INTER, zero},
		{"model.layers.0.mlp.gate_proj.weight", INTER, H, zero},
		{"model.layers.0.mlp.up_proj.weight", INTER, H, zero},
		{"model.layers.0.post_attention_layernorm.weight", H, 0, ones},
		{"model.layers.0.self_attn.k_proj.weight", HD, H, wk},
		{"model.layers.0.self_attn.o_proj.weight", H, HD, wo},
		{"model.layers.0.self_attn.q_proj.weight", HD, H, wq},
		{"model.layers.0.self_attn.v_proj.weight", HD, H, wv},
		{"model.norm.weight", H, 0, ones},
	};
	char cfg[1024];
	int n = snprintf(cfg, sizeof cfg,
			 "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":%d,"
			 "\"intermediate_size\":%d,\"num_hidden_layers\":1,\"num_attention_heads\":1,"
			 "\"num_key_value_heads\":1,\"head_dim\":%d,\"vocab_size\":%d,\"rms_norm_eps\":1e-06,"
			 "\"rope_theta\":%.0f,\"max_position_embeddings\":2097152,\"tie_word_embeddings\":false,"
			 "\"eos_token_id\":%d,\"torch_dtype\":\"float32\",\"hidden_act\":\"silu\"}\n",
			 H, INTER, HD, VOCAB, ROPE_THETA, T_EOS);
	char gen[64];
	int gn = snprintf(gen, sizeof gen, "{\"eos_token_id\":%d}\n", T_EOS);
	if ((rc = ev_mkdir_p(dir)) || (rc = write_text(dir, "config.json", cfg, (size_t)n)) ||
	    (rc = write_text(dir, "generation_config.json", gen, (size_t)gn)))
		goto done;
	if (!(path = ev_asprintf("%s/model.safetensors", dir))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = write_safetensors(path, ts, (int)(sizeof ts / sizeof ts[0]))))
		goto done;
	rc = write_tokenizer(dir);
done:
	free(path);
	free(emb), free(lm), free(wq), free(wk), free(wv), free(wo), free(ones), free(zero);
	return rc;
}

/* ---- the MiniMax-M3 recall checkpoint --------------------------------------
 * The same vocabulary, tokenizer and residual layout, in M3's shape: two
 * layers, both sparse (lightning indexer), 4 query and 4 KV heads of 128,
 * index heads 4 of 128, index block 128, top-16 blocks, 1 local block,
 * partial rotary 0.5 (channels 64-127 unrotated). Queries, keys and index
 * vectors carry the code in unrotated channels 64-79 of every head, so the
 * match ignores distance exactly; the per-head Gemma norms scale a code to
 * entries of +-sqrt(8) times (1 + weight): the right pair's attention logit
 * is 128 (1 + w)^2 / sqrt(128) = 48 with 1 + w = 2.06, a wrong key's at
 * most a quarter of it, a filler's 0 (its key is zero). The indexer scores
 * the needle's block 128, a distractor's at most 32, a filler block 0, so
 * it always chooses the needle. Layer 0 attends but writes nothing back
 * (o_proj zero); layer 1 writes the value as the Llama checkpoint does.
 * MLPs are dense SwiGLU-OAI with zero weights (output 0). */
#define M3_HEADS 4
#define M3_HD 128
#define M3_CODE_AT 64 /* first unrotated channel */
#define M3_INTER 8
#define M3_QK_NORM 1.06f /* Gemma weight: gain 2.06 */
#define M3_GAIN_O 2.0f

int eng_mkrecall_m3(const char *dir)
{
	uint16_t code[NK];
	key_codes(code);
	int qd = M3_HEADS * M3_HD;
	float *emb = calloc((size_t)VOCAB * H, sizeof(float)), *lm = calloc((size_t)VOCAB * H, sizeof(float));
	float *wq = calloc((size_t)qd * H, sizeof(float)), *wk = calloc((size_t)qd * H, sizeof(float));
	float *wv = calloc((size_t)qd * H, sizeof(float)), *wo = calloc((size_t)H * qd, sizeof(float));
	float *wo0 = calloc((size_t)H * qd, sizeof(float)), *ik = calloc((size_t)M3_HD * H, sizeof(float));
	float *zero = calloc((size_t)2 * M3_INTER * H, sizeof(float)), *hn = calloc(H, sizeof(float));
	float *qkn = malloc(M3_HD * sizeof(float)), *in0 = calloc(M3_HD, sizeof(float));
	char *path = NULL;
	int rc = 0;
	if (!emb || !lm || !wq || !wk || !wv || !wo || !wo0 || !ik || !zero || !hn || !qkn || !in0) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (int i = 0; i < M3_HD; i++)
		qkn[i] = M3_QK_NORM;
	for (int t = 0; t < VOCAB; t++)
		embed_row(emb + (size_t)t * H, t, code);
	for (int h = 0; h < M3_HEADS; h++)
		for (int b = 0; b < CODE; b++) {
			int row = h * M3_HD + M3_CODE_AT + b;
			wq[(size_t)row * H + R_QCODE + b] = 1.0f; /* query (and index query): the asked key's code */
			wk[(size_t)row * H + R_KCODE + b] = 1.0f; /* key: a pair's key code */
		}
	for (int b = 0; b < CODE; b++)
		ik[(size_t)(M3_CODE_AT + b) * H + R_KCODE + b] = 1.0f; /* the index key: a pair's key code */
	for (int h = 0; h < M3_HEADS; h++)
		for (int j = 0; j < NV; j++)
			wv[(size_t)(h * M3_HD + j) * H + R_VAL + j] = 1.0f; /* value: the pair's value, one-hot */
	for (int j = 0; j < NV; j++) {
		wo[(size_t)(R_VAL + j) * qd + j] = M3_GAIN_O; /* head 0's value back into the value dims */
		lm[(size_t)T_VAL(j) * H + R_VAL + j] = GAIN_LM;
	}
	lm[(size_t)T_EOS * H + R_ISVAL] = GAIN_EOS;
	tensor ts[64];
	int nt = 0;
	char names[64][96];
#define T_(nm, r, c, d) (snprintf(names[nt], sizeof names[nt], "%s", nm), ts[nt] = (tensor){names[nt], r, c, d}, nt++)
	T_("lm_head.weight", VOCAB, H, lm);
	T_("model.embed_tokens.weight", VOCAB, H, emb);
	T_("model.norm.weight", H, 0, hn);
	for (int l = 0; l < 2; l++) {
		char pre[32], nm[96];
		snprintf(pre, sizeof pre, "model.layers.%d.", l);
#define L_(suffix, r, c, d) (snprintf(nm, sizeof nm, "%s%s", pre, suffix), T_(nm, r, c, d))
		L_("input_layernorm.weight", H, 0, hn);
		L_("post_attention_layernorm.weight", H, 0, hn);
		L_("self_attn.q_proj.weight", qd, H, wq);
		L_("self_attn.k_proj.weight", qd, H, wk);
		L_("self_attn.v_proj.weight", qd, H, wv);
		L_("self_attn.o_proj.weight", H, qd, l ? wo : wo0);
		L_("self_attn.q_norm.weight", M3_HD, 0, qkn);
		L_("self_attn.k_norm.weight", M3_HD, 0, qkn);
		L_("self_attn.indexer.q_proj.weight", qd, H, wq);
		L_("self_attn.indexer.k_proj.weight", M3_HD, H, ik);
		L_("self_attn.indexer.q_norm.weight", M3_HD, 0, in0);
		L_("self_attn.indexer.k_norm.weight", M3_HD, 0, in0);
		L_("mlp.gate_up_proj.weight", 2 * M3_INTER, H, zero);
		L_("mlp.down_proj.weight", H, M3_INTER, zero);
#undef L_
	}
#undef T_
	char cfg[2048];
	int n = snprintf(cfg, sizeof cfg,
			 "{\"architectures\":[\"MiniMaxM3VLForCausalLM\"],\"model_type\":\"minimax_m3_vl_text\","
			 "\"hidden_size\":%d,\"intermediate_size\":%d,\"dense_intermediate_size\":%d,"
			 "\"shared_intermediate_size\":%d,\"num_local_experts\":1,\"num_experts_per_tok\":1,"
			 "\"num_hidden_layers\":2,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,"
			 "\"vocab_size\":%d,\"rms_norm_eps\":1e-06,\"rope_parameters\":{\"rope_type\":\"default\","
			 "\"rope_theta\":5000000.0,\"partial_rotary_factor\":0.5},\"rotary_dim\":%d,"
			 "\"max_position_embeddings\":2097152,\"tie_word_embeddings\":false,\"swiglu_alpha\":1.702,"
			 "\"swiglu_limit\":7.0,\"index_n_heads\":%d,\"index_head_dim\":%d,\"index_block_size\":128,"
			 "\"index_topk_blocks\":16,\"index_local_blocks\":1,"
			 "\"layer_types\":[\"minimax_m3_sparse\",\"minimax_m3_sparse\"],\"mlp_layer_types\":[\"dense\",\"dense\"],"
			 "\"bos_token_id\":null,\"eos_token_id\":%d,\"torch_dtype\":\"float32\"}\n",
			 H, M3_INTER, M3_INTER, M3_INTER, M3_HEADS, M3_HEADS, M3_HD, VOCAB, M3_HD / 2, M3_HEADS, M3_HD, T_EOS);
	char gen[64];
	int gn = snprintf(gen, sizeof gen, "{\"eos_token_id\":%d}\n", T_EOS);
	if ((rc = ev_mkdir_p(dir)) || (rc = write_text(dir, "config.json", cfg, (size_t)n)) ||
	    (rc = write_text(dir, "generation_config.json", gen, (size_t)gn)))
		goto done;
	if (!(path = ev_asprintf("%s/model.safetensors", dir))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = write_safetensors(path, ts, nt)))
		goto done;
	rc = write_tokenizer(dir);
done:
	free(path);
	free(emb), free(lm), free(wq), free(wk), free(wv), free(wo), free(wo0), free(ik), free(zero), free(hn);
	free(qkn), free(in0);
	return rc;
}

bool eng_model_is_recall(const eng_model *m)
{
	const eng_config *c = &m->c;
	if (c->arch == ENG_ARCH_MINIMAX_M3)
		return c->vocab == VOCAB && c->hidden == H && c->layers == 2 && c->heads == M3_HEADS &&
		       c->head_dim == M3_HD && c->index_topk == 16 && c->index_block == 128;
	return c->arch == ENG_ARCH_LLAMA && c->vocab == VOCAB && c->hidden == H && c->layers == 1 && c->heads == 1 &&
	       c->head_dim == HD && c->intermediate == INTER && c->rope_theta == ROPE_THETA;
}

/* ---- prompts --------------------------------------------------------------- */

int eng_recall_tokens(int32_t *toks, long n, int depth, int distractors, uint64_t seed, int32_t *value_id)
{
	if (n < 4 || depth < 0 || depth > 100 || distractors < 0 || distractors > n - 4)
		return ev_error_set(EV_E_INVALID, "recall prompt: length %ld, depth %d, %d distractors out of range", n,
				    depth, distractors);
	ev_rng r;
	ev_rng_seed(&r, seed);
	int key = (int)ev_rng_below(&r, NK), val = (int)ev_rng_below(&r, NV);
	long body = n - 2; /* then " ?" and the asked key */
	long at = (long)((double)(body - 1) * depth / 100.0 + 0.5);
	for (long i = 0; i < body; i++)
		toks[i] = T_FILL((int)ev_rng_below(&r, NF));
	/* distractors: other keys with any value, anywhere but the needle */
	for (int d = 0; d < distractors; d++) {
		long p;
		do
			p = (long)ev_rng_below(&r, (uint64_t)body);
		while (p == at);
		int k = (int)ev_rng_below(&r, NK - 1);
		toks[p] = T_PAIR(k >= key ? k + 1 : k, (int)ev_rng_below(&r, NV));
	}
	toks[at] = T_PAIR(key, val);
	toks[body] = T_ASK;
	toks[body + 1] = T_KEY(key);
	*value_id = T_VAL(val);
	return 0;
}

int eng_recall_text(char **text, char answer[16], long n, int depth, int distractors, uint64_t seed)
{
	*text = NULL;
	int32_t *toks = NULL, val;
	ev_buf out = EV_BUF_INIT((size_t)n * 16 + 64);
	char w[64];
	int rc = 0;
	if (n < 4 || n > (1L << 21))
		return ev_error_set(EV_E_INVALID, "recall prompt: length %ld out of [4, 2097152]", n);
	if (!(toks = malloc((size_t)n * sizeof(*toks))))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	rc = eng_recall_tokens(toks, n, depth, distractors, seed, &val);
	for (long i = 0; i < n && !rc; i++) {
		token_text(w, sizeof w, toks[i]);
		rc = ev_buf_puts(&out, w);
	}
	if (!rc) {
		token_text(w, sizeof w, val);
		snprintf(answer, 16, "%s", w);
		*text = ev_buf_detach(&out, NULL);
		rc = *text ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	free(toks);
	ev_buf_free(&out);
	return rc;
}
