/*
 * engine: the bundled inference engine, usable on its own.
 *
 * Loads a Hugging Face checkpoint folder (config.json, safetensors, memory
 * mapped), runs the forward pass of Llama-family decoders (Llama, Mistral,
 * Qwen2, Qwen3, Mixtral, Qwen3-MoE) over a paged KV cache, and samples.
 * Everything returns 0 or a negative EV_E_* status with the per-thread
 * message set (evald/base). Handles are opaque; *_free accepts NULL.
 *
 * A model is read-only after loading and may be shared by many sequences
 * and threads: forwards (and page-pool changes) on one model serialise on
 * the model's lock, since its backend thread pool is shared. A sequence is
 * used by one thread at a time. Many sequences advance together through
 * eng_forward_batch, which is what continuous batching builds on.
 */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tokenizer.h"
#include "evald/base/base.h"

/* ---- model ------------------------------------------------------------ */

typedef struct eng_model eng_model;

typedef enum {
	ENG_BACKEND_CPU = 0, /* blocked, vectorised, threaded CPU path */
	ENG_BACKEND_REF = 1, /* plain single-threaded loops: the oracle */
} eng_backend_kind;

typedef struct {
	eng_backend_kind backend;
	int threads;       /* CPU worker threads; 0 = all online cores */
	int block_size;    /* KV page size in tokens (MSA block size); 0 = 64 */
	long max_context;  /* cap on a sequence's length; 0 = the config's
	                      max_position_embeddings, at most
	                      ENG_DEFAULT_MAX_CONTEXT */
} eng_model_options;

#define ENG_DEFAULT_MAX_CONTEXT (1L << 20)

#define ENG_MODEL_OPTIONS_INIT {ENG_BACKEND_CPU, 0, 0, 0}

/* Loads the checkpoint in folder `dir`. Errors name the file and the
 * tensor or field at fault. `opts` may be NULL for the defaults. */
int eng_model_load(eng_model **out, const char *dir, const eng_model_options *opts);
void eng_model_free(eng_model *m);

/* Switches the compute path of a loaded model (for comparisons). */
int eng_model_set_backend(eng_model *m, eng_backend_kind kind);

/* What a loaded model is; all fields borrowed from the model. */
typedef struct {
	const char *architecture; /* as in config.json ("LlamaForCausalLM") */
	const char *family;       /* llama|mistral|qwen2|qwen3|mixtral|qwen3_moe */
	int layers, hidden, heads, kv_heads, head_dim, intermediate;
	int vocab;
	int experts, experts_per_token, moe_intermediate; /* 0 when dense */
	int moe_layers;            /* how many layers are MoE */
	long max_position;
	double rope_theta, rms_eps;
	bool tied_embeddings;
	int bos_id;                /* -1 when unknown */
	int eos_ids[8];
	int n_eos;
	uint64_t params_total;     /* every weight element */
	uint64_t params_active;    /* used per token (MoE: top-k experts only) */
	uint64_t weight_bytes;     /* bytes of weights as stored */
	uint64_t kv_bytes_per_token; /* KV cache (f32) across all layers */
	const char *dtypes;        /* "bf16", "f32,bf16", ... */
	int block_size;
	long max_context;
} eng_model_info;

void eng_model_get_info(const eng_model *m, eng_model_info *out);

/* ---- sequences and the forward pass ----------------------------------- */

/* A sequence: one stream of tokens with its own paged KV cache. */
typedef struct eng_seq eng_seq;

int eng_seq_new(eng_seq **out, eng_model *m);
void eng_seq_free(eng_seq *s);
/* Tokens held in the cache so far (the next position). */
long eng_seq_len(const eng_seq *s);
/* Drops positions >= n (n <= len), returning their pages. */
int eng_seq_truncate(eng_seq *s, long n);
/* Logits (vocab floats) after the last token fed; NULL before any.
 * Borrowed, valid until the next forward on this sequence. */
const float *eng_seq_logits(const eng_seq *s);

/* Feeds n tokens (n > 1: prefill, as one batch; n == 1: decode) at the
 * sequence's next positions. The last position's logits are always kept in
 * the sequence (eng_seq_logits). `all_logits`, when not NULL, receives
 * n * vocab floats, one row a position. A prompt fed at once gives the
 * same logits as fed one token at a time. */
int eng_forward(eng_seq *s, const int32_t *tokens, int n, float *all_logits);

/* Advances `nseq` distinct sequences of one model in one batched forward:
 * sequence i gets tokens[i][0 .. ntok[i]) and keeps its last logits. The
 * weights are read once for all of them (GEMM over every row). */
int eng_forward_batch(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens,
		      const int *ntok, int nseq);

/* ---- sampling ---------------------------------------------------------- */

typedef struct {
	double temperature;        /* 0 = greedy (argmax, lowest id on ties) */
	int top_k;                 /* 0 = off */
	double top_p;              /* 1 = off */
	double min_p;              /* 0 = off */
	double repetition_penalty; /* 1 = off (HF convention) */
	uint64_t seed;
} eng_sample_options;

#define ENG_SAMPLE_OPTIONS_INIT {0.0, 0, 1.0, 0.0, 1.0, 0}

typedef struct eng_sampler eng_sampler;

int eng_sampler_new(eng_sampler **out, const eng_sample_options *opts, int vocab);
void eng_sampler_free(eng_sampler *s);
/* Picks a token from `logits` (not modified). `history` (n_history ids,
 * may be NULL) feeds the repetition penalty. *logprob_out, when not NULL,
 * gets the chosen token's log-probability under the model's raw
 * distribution (log-softmax of the logits, before any processing). */
int eng_sample(eng_sampler *s, int32_t *token_out, double *logprob_out, const float *logits,
	       const int32_t *history, long n_history);

typedef struct {
	int max_tokens;          /* 0 = up to the context limit */
	const int32_t *stop_ids; /* NULL: the model's EOS ids */
	int n_stop;
	eng_sample_options sample;
} eng_generate_options;

#define ENG_GENERATE_OPTIONS_INIT {256, NULL, 0, ENG_SAMPLE_OPTIONS_INIT}

/* Called after each generated token; return non-zero to stop early. */
typedef int (*eng_token_cb)(void *ctx, int32_t token, double logprob);

typedef enum { ENG_STOP_EOS = 0, ENG_STOP_LENGTH = 1, ENG_STOP_CALLBACK = 2 } eng_stop_reason;

/* Feeds `prompt` (may be empty when the sequence already holds tokens),
 * then samples until a stop id, max_tokens or the context limit. Generated
 * ids (stop id excluded) go to out_tokens (cap out_cap, may be NULL);
 * *n_out counts them all. */
int eng_generate(eng_seq *s, const int32_t *prompt, int n_prompt, const eng_generate_options *opts,
		 eng_token_cb cb, void *cb_ctx, int32_t *out_tokens, int out_cap, int *n_out,
		 eng_stop_reason *reason);

/* ---- random checkpoints (tests, benchmarks) ----------------------------- */

typedef struct {
	int hidden, layers, heads, kv_heads, intermediate, vocab, experts, top_k;
	int head_dim;    /* 0 = hidden / heads */
	long max_position;
} eng_mkmodel_sizes;

/* Defaults: hidden 64, 2 layers, 4 heads, 2 KV heads, intermediate 128,
 * vocab 512, 4 experts, top-k 2, max_position 4096. */
#define ENG_MKMODEL_SIZES_INIT {64, 2, 4, 2, 128, 512, 4, 2, 0, 4096}

/* Writes a random-weight checkpoint of `arch` (llama|mistral|qwen2|qwen3|
 * mixtral|qwen3_moe) to folder `dir` (created if needed): config.json,
 * generation_config.json, model.safetensors in `dtype` (f32|f16|bf16) and,
 * when the tokenizer is built in, tokenizer.json + tokenizer_config.json.
 * Weights are scaled so that activations stay near unit size. */
int eng_mkmodel(const char *dir, const char *arch, const eng_mkmodel_sizes *sizes, const char *dtype,
		uint64_t seed);

#endif
