/*
 * engine: the bundled inference engine, usable on its own.
 *
 * Loads a Hugging Face checkpoint folder (config.json, safetensors, memory
 * mapped), runs the forward pass of Llama-family decoders (Llama, Mistral,
 * Qwen2, Qwen3, Mixtral, Qwen3-MoE, Qwen2-MoE) over a paged KV cache, and samples.
 * Everything returns 0 or a negative EV_E_* status with the per-thread
 * message set (base/). Handles are opaque; *_free accepts NULL.
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

#include "engine/tokenizer/tokenizer.h"
#include "base/base.h"

/* ---- model ------------------------------------------------------------ */

typedef struct eng_model eng_model;

typedef enum {
	ENG_BACKEND_CPU = 0, /* blocked, vectorised, threaded CPU path */
	ENG_BACKEND_REF = 1, /* plain single-threaded loops: the oracle */
	ENG_BACKEND_CUDA = 2, /* the CUDA device (a build with the toolkit, and a GPU) */
} eng_backend_kind;

/* ==== MSA and KV options (engine/msa.c, engine/kvcache.c) ================ */

typedef enum {
	ENG_ATTN_AUTO = 0,  /* MSA when config.json has an "msa" object, else dense */
	ENG_ATTN_DENSE = 1,
	ENG_ATTN_MSA = 2,
} eng_attention_kind;

#define ENG_MSA_MAX_DENSE_LAYERS 64

/* Which blocks MSA attends: MiniMax-M3's learned lightning indexer (max of
 * index-key scores a block) or the training-free mean selector (query . the
 * block's mean key); AUTO = the indexer where the checkpoint has one. */
typedef enum {
	ENG_SEL_AUTO = 0,
	ENG_SEL_INDEXER = 1,
	ENG_SEL_MEAN = 2,
} eng_msa_selector;

/* Block-sparse attention settings (DESIGN.md, "MSA"). A field < 0 means
 * "not given": config.json's "msa" value, else the default (block_size 64,
 * top_k 16, sink_blocks 1, local_blocks 2, dense_below 8192, no dense
 * layers). block_size is also the KV page size. */
typedef struct {
	eng_attention_kind kind;
	int block_size, top_k, sink_blocks, local_blocks;
	long dense_below;
	int n_dense_layers; /* -1 = not given; then dense_layers[0 .. n) */
	int dense_layers[ENG_MSA_MAX_DENSE_LAYERS];
	eng_msa_selector selector;
} eng_attention_options;

#define ENG_ATTENTION_OPTIONS_INIT                                                                      \
	{.kind = ENG_ATTN_AUTO, .block_size = -1, .top_k = -1, .sink_blocks = -1, .local_blocks = -1,              \
	 .dense_below = -1, .n_dense_layers = -1}

typedef enum { ENG_KV_F32 = 0, ENG_KV_F16 = 1, ENG_KV_BF16 = 2 } eng_kv_dtype;

/* ==== end MSA and KV options ============================================= */

typedef struct {
	eng_backend_kind backend;
	int threads;       /* CPU worker threads; 0 = all online cores */
	int block_size;    /* KV page size in tokens (MSA block size); 0 = 64 */
	long max_context;  /* cap on a sequence's length; 0 = the config's
	                      max_position_embeddings, at most
	                      ENG_DEFAULT_MAX_CONTEXT */
	eng_attention_options attention;
	eng_kv_dtype kv_dtype;  /* how K and V are stored (key sums stay f32) */
	int activation_bits;    /* CPU: what K-quant and IQ4_XS weights (Q4_K, Q5_K, Q6_K, IQ4_XS) meet: activations
	                           quantized to 16 bits a block of 32 (0 or 16, the default,
	                           engine/cpu/qdot.h) or to 8 bits a super-block of 256 as
	                           llama.cpp does (8, engine/cpu/q8k.h): faster, less precise */
	uint64_t kv_max_bytes;  /* bound on all KV pages of the model; 0 = none */
} eng_model_options;

#define ENG_DEFAULT_MAX_CONTEXT (1L << 20)

#define ENG_MODEL_OPTIONS_INIT {.backend = ENG_BACKEND_CPU, .attention = ENG_ATTENTION_OPTIONS_INIT, .kv_dtype = ENG_KV_F32}

/* (MSA and KV options) Parses one of the shared engine flags into `o`:
 *   --attention dense|msa  --msa-selector indexer|mean  --msa-block-size B  --msa-top-k K
 *   --msa-sink-blocks S  --msa-local-blocks L  --msa-dense-below N
 *   --msa-dense-layers 0,1  --kv-dtype f32|f16|bf16  --kv-max-bytes N[k|m|g]
 *   --activation-bits 16|8
 * Returns 1 when `flag` is one of them (its value consumed), 0 when it is
 * not, or a negative status (the message names the flag) for a bad value.
 * evald's engine, run and serve commands share it. */
int eng_options_parse_flag(eng_model_options *o, const char *flag, const char *value);
/* Usage text for the flags above (a few lines, each ending in a newline). */
const char *eng_options_usage(void);

/* Loads the checkpoint in folder `dir`. Errors name the file and the
 * tensor or field at fault. `opts` may be NULL for the defaults. */
int eng_model_load(eng_model **out, const char *dir, const eng_model_options *opts);
void eng_model_free(eng_model *m);

/* Switches the compute path of a loaded model (for comparisons). The
 * CUDA backend is set up on first use (EV_E_UNSUPPORTED naming why when
 * the build has no CUDA or there is no device); sequences carry over, their
 * pages brought to the device as they are read. */
int eng_model_set_backend(eng_model *m, eng_backend_kind kind);

/* What a loaded model is; all fields borrowed from the model. */
typedef struct {
	const char *architecture; /* as in config.json ("LlamaForCausalLM") */
	const char *family;       /* llama|mistral|qwen2|qwen3|mixtral|qwen3_moe|qwen2_moe|minimax_m3 */
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
	uint64_t decode_weight_bytes; /* of them, what one decoded token reads: all but the experts a
	                            * layer does not choose (the top-k of them read; a mean over
	                            * tokens) and the embedding table where it is not also the head
	                            * (one row of it read) */
	int activation_bits;       /* K-quant weights' activations on the CPU: 16 or 8 */
	bool weights_huge;         /* the weight files read into memory advised for transparent huge
	                            * pages, not mmapped (EVALD_WEIGHT_PAGES, engine/README.md) */
	uint64_t quad_bytes;       /* of weight_bytes, laid out as quads of four rows for the CPU's
	                            * decode (EVALD_WEIGHT_LAYOUT, engine/README.md) */
	uint64_t kv_bytes_per_token; /* KV cache in its dtype, all layers, key sums included */
	const char *dtypes;        /* "bf16", "f32,bf16", ... */
	/* weight_bytes by stored type, the most bytes first: what a GGUF mix
	 * such as Q4_K_M holds (rows that are not whole super-blocks fall back) */
	int n_weight_types;
	struct {
		const char *dtype; /* as in dtypes */
		uint64_t bytes, elems;
	} weight_types[24];
	int block_size;
	long max_context;
	uint64_t kv_max_bytes;     /* the KV byte bound, 0 = none */
	long sliding_window;       /* 0 = full attention */
	/* settings config.json leaves out, as transformers' defaults fill
	 * them ("sliding_window=4096, ..."); "" when it states them all */
	const char *config_defaults;
	const char *backend;       /* the path forwards take: "cpu", "ref" or "cuda" */
} eng_model_info;

void eng_model_get_info(const eng_model *m, eng_model_info *out);

/* The memory the checkpoint's weight files occupy in this process (read
 * into memory or mapped): up to cap regions into ptr/len; returns how many
 * there are. Read-only; for benchmarks that time reading the weights
 * themselves (evald bench engine's memory bound). */
int eng_model_weight_regions(const eng_model *m, const void **ptr, size_t *len, int cap);

/* The bytes of keys and values a decode step's attention reads, over all
 * layers, for a sequence holding ctx positions (the new one included): a
 * layer's attended positions (dense: the context, or its sliding window;
 * MSA's block-mean choice past dense_below: the sink, chosen and local
 * blocks; MiniMax-M3's indexer: its top-k blocks) times a position's key
 * and value in the cache's dtype. MSA's selectors' own reads (block key
 * sums, index keys) are left out. *exact (may be NULL) is false where a
 * layer's count is an upper bound instead: the indexer's list once it
 * leaves blocks out (its last block may be partial), or a window over
 * sparse attention. */
uint64_t eng_model_kv_read_bytes(const eng_model *m, long ctx, bool *exact);

/* ---- where a forward step's time goes -------------------------------------- */

/* The stages of a forward step, in its order (a MoE layer's router,
 * experts and shared expert are one stage). With eng_model.prof set, the
 * forward pass adds each stage's wall seconds to sec[stage] and counts
 * its calls in steps; each stage ends when its backend call returns, so
 * on the CPU (whose ops return done) the stages tile the step, and a
 * device backend's would time only its launches. */
enum {
	ENG_PROF_EMBED,
	ENG_PROF_NORM,      /* every RMSNorm: the layers' two, q/k norms, the final one */
	ENG_PROF_QKV,       /* the q, k and v projections */
	ENG_PROF_ROPE,      /* RoPE of q and k */
	ENG_PROF_KV_STORE,  /* keys and values into the pages */
	ENG_PROF_INDEXER,   /* MiniMax-M3's lightning indexer: projections, keys, the choice */
	ENG_PROF_ATTENTION, /* scores, softmax and values */
	ENG_PROF_O,         /* the output projection */
	ENG_PROF_RESIDUAL,  /* the residual adds of dense layers */
	ENG_PROF_GATE_UP,   /* the MLP's gate and up projections */
	ENG_PROF_SWIGLU,
	ENG_PROF_DOWN,      /* the MLP's down projection */
	ENG_PROF_MOE,       /* a MoE layer's MLP whole */
	ENG_PROF_HEAD,      /* the LM head (with its gather and copy out) */
	ENG_PROF_N
};
typedef struct eng_prof {
	double sec[ENG_PROF_N];
	long steps; /* forward chunks timed */
} eng_prof;
/* Times the model's forward steps into p from now on (p NULL: no more);
 * the caller keeps p while it is set (evald bench engine --profile). */
void eng_model_set_prof(eng_model *m, eng_prof *p);
/* A stage's name as reports print it ("q,k,v", "attention", ...). */
const char *eng_prof_name(int stage);
/* Whether the stage is a weight matmul (its time is the weights' reading). */
bool eng_prof_is_matmul(int stage);

/* Which CPU kernels quantized and BF16 weights take in this process (the
 * arithmetic and the instruction set chosen at run time, engine/README.md
 * "Quantized and BF16 weights"), as one line into buf. */
void eng_cpu_kernels(char *buf, size_t cap, int activation_bits);

/* The parameters a checkpoint of this config.json holds, in total and used
 * per token (MoE: the chosen experts only), from the config alone: what
 * eng_model_get_info counts from the loaded tensors. */
int eng_config_params(const char *config_path, uint64_t *total, uint64_t *active);

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
/* Queues embedding rows ([n, hidden], e.g. an image's from
 * eng_vision_encode) for the sequence's next image placeholder tokens:
 * each placeholder fed after this takes the next row instead of its own
 * embedding (transformers' masked_scatter); its position is its place in
 * the sequence, as any token's. A forward whose placeholders outnumber the
 * queued rows fails. Refused by a model without a placeholder id. */
int eng_seq_add_embeddings(eng_seq *s, const float *rows, int n);
/* Rows queued and not yet taken by a placeholder. */
long eng_seq_pending_embeddings(const eng_seq *s);
/* The image placeholder token id, or -1 for a text-only model. */
int eng_model_image_token(const eng_model *m);
/* The video placeholder's id (-1 without a vision tower). */
int eng_model_video_token(const eng_model *m);

/* Advances `nseq` distinct sequences of one model in one batched forward:
 * sequence i gets tokens[i][0 .. ntok[i]) and keeps its last logits. The
 * weights are read once for all of them (GEMM over every row). */
int eng_forward_batch(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens,
		      const int *ntok, int nseq);

/* eng_forward_batch that also hands out every row's logits of the
 * sequences with every_row[i] set: fn(ctx, i, j, logits) for each of their
 * tokens j (in order; logits valid during the call only), before the
 * forward returns. The rows are the same bits as without. */
typedef void (*eng_row_logits_fn)(void *ctx, int seq, long row, const float *logits);
int eng_forward_batch_rows(eng_model *m, eng_seq *const *seqs, const int32_t *const *tokens, const int *ntok, int nseq,
			   const bool *every_row, eng_row_logits_fn fn, void *ctx);

/* ---- sampling ---------------------------------------------------------- */

typedef struct {
	double temperature;        /* 0 = greedy (argmax, lowest id on ties) */
	int top_k;                 /* 0 = off */
	double top_p;              /* 1 = off */
	double min_p;              /* 0 = off */
	double repetition_penalty; /* 1 = off (HF convention) */
	uint64_t seed;
} eng_sample_options;

#define ENG_SAMPLE_OPTIONS_INIT {.temperature = 0.0, .top_p = 1.0, .repetition_penalty = 1.0}

typedef struct eng_sampler eng_sampler;

int eng_sampler_new(eng_sampler **out, const eng_sample_options *opts, int vocab);
void eng_sampler_free(eng_sampler *s);
/* Picks a token from `logits` (not modified). `history` (n_history ids,
 * may be NULL) feeds the repetition penalty. *logprob_out, when not NULL,
 * gets the chosen token's log-probability under the model's raw
 * distribution (log-softmax of the logits, before any processing). */
int eng_sample(eng_sampler *s, int32_t *token_out, double *logprob_out, const float *logits,
	       const int32_t *history, long n_history);

/* A token's log-probability under the model's raw distribution (the
 * log-softmax of the logits, before temperature or any processing) and the
 * n_top most likely tokens there, descending (lower id first on ties). */
#define ENG_MAX_TOP_LOGPROBS 20
typedef struct {
	int32_t token;
	double logprob;      /* NAN for a prompt's first token: nothing precedes it */
	int n_top;
	int32_t top_id[ENG_MAX_TOP_LOGPROBS];
	double top_lp[ENG_MAX_TOP_LOGPROBS];
} eng_logprob;

/* Fills *out for token `tok` (NAN logprob when tok is outside 0..vocab)
 * with min(n_top, ENG_MAX_TOP_LOGPROBS) alternatives. */
void eng_logprob_of(eng_logprob *out, const float *logits, int vocab, int32_t tok, int n_top);

/* A thinking budget for models that think in <think> ... </think> blocks.
 * When `enforce` is set, the tokens generated inside blocks (the open and
 * close ids themselves not counted) are counted over the whole answer, and
 * once `budget` of them are spent inside an open block the next token is
 * close_id, put in place of sampling: the block is closed at the budget,
 * never past it (a block opened again after that is closed at once).
 * `open_at_start`: the prompt ends inside a block (templates that open it,
 * as DeepSeek-R1's does). max_tokens then counts the answer only (the
 * tokens outside blocks, tags not counted): generation stops when that
 * many are out, or at max_tokens + budget + 1 in all. */
typedef struct {
	bool enforce;
	bool open_at_start;
	int budget;              /* >= 0 */
	int32_t open_id, close_id;
} eng_think_options;

typedef struct {
	bool in;   /* inside a block */
	int used;  /* thinking tokens so far */
	int tags;  /* open and close tokens so far */
} eng_think_state;

/* The token that must come next (close_id), or -1: sample. */
int32_t eng_think_forced(const eng_think_options *o, const eng_think_state *st);
/* Takes a generated token into the state. */
void eng_think_step(const eng_think_options *o, eng_think_state *st, int32_t tok);
/* The state at the start of generation. */
eng_think_state eng_think_start(const eng_think_options *o);
/* Under a budget: true when n_out generated tokens hold max_tokens answer
 * tokens (the answer is complete: stop for length). */
bool eng_think_answer_full(const eng_think_options *o, const eng_think_state *st, int max_tokens, long n_out);

typedef struct {
	int max_tokens;          /* 0 = up to the context limit */
	const int32_t *stop_ids; /* NULL: the model's EOS ids */
	int n_stop;
	eng_sample_options sample;
	int32_t *stop_token_out; /* when set: the stop id that ended it, or -1 */
	eng_think_options think;
	int *think_used_out;     /* when set: thinking tokens generated */
} eng_generate_options;

#define ENG_GENERATE_OPTIONS_INIT {.max_tokens = 256, .sample = ENG_SAMPLE_OPTIONS_INIT}

/* Tokens a generation may make with `room` positions left in the context:
 * max_tokens (0 = all the room), plus budget + 1 under a thinking budget. */
long eng_generate_limit(const eng_generate_options *o, long room);

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

/* ==== MSA, prefix sharing, recall checkpoint (engine/msa.c, kvcache.c,
 * mkrecall.c) ============================================================ */

/* The attention settings in force for a loaded model (after config.json and
 * options); kind is ENG_ATTN_DENSE or ENG_ATTN_MSA. */
void eng_model_get_attention(const eng_model *m, eng_attention_options *out);

/* Switches a loaded model between dense and MSA attention (the other MSA
 * settings stay as loaded); for comparisons over one KV cache. */
int eng_model_set_attention(eng_model *m, eng_attention_kind kind);

/* Whether `m` is the constructed recall checkpoint (eng_mkrecall). */
bool eng_model_is_recall(const eng_model *m);

/* A new sequence holding the first n_prefix positions of `src` (n_prefix <=
 * its length): full pages are shared (refcounted, never written again), a
 * partly filled last page is copied. Costs no forward. */
int eng_seq_fork(eng_seq **out, eng_seq *src, long n_prefix);

/* KV memory: bytes held by live pages, and the bound (0 = none). */
uint64_t eng_model_kv_bytes(const eng_model *m);

/* What MiniMax-M3's lightning indexer has done since the model loaded:
 * seconds in its store and scan, (query, block) pairs it chose among and
 * pairs it scored exactly, the others skipped by a bound (the fast path's
 * counts; benchmarks take differences). */
typedef struct {
	double seconds;
	long candidates, scored;
} eng_index_counts;
void eng_model_index_counts(const eng_model *m, eng_index_counts *out);

/* Debug: the blocks MSA attends for the query at position `pos` (< len) of
 * `s` in `layer`, KV head `kv_head`, with the query vectors `q` (heads *
 * head_dim floats, post-RoPE) given by the caller, on the model's current
 * backend (ENG_BACKEND_REF: the definition, re-reading keys;
 * ENG_BACKEND_CPU: from the page key sums). Writes the attended block
 * indices ascending into out (cap entries) and their count in *n.
 * Dense positions (dense layer, pos + 1 <= dense_below) list every block. */
int eng_msa_debug_blocks(eng_seq *s, int layer, long pos, int kv_head, const float *q, int *out, int cap, int *n);

/* ==== end MSA ============================================================= */

#include "engine/batch.h"
#include "engine/make/make.h"

#endif
