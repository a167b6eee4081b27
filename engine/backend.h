/*
 * engine/backend.h: what only the engine's own files share. The loaded
 * model (config, tensors bound to layers), the paged KV cache, and the
 * backend function table that every compute path implements: the CPU
 * reference mode (plain loops, the oracle), the fast CPU path, and later
 * CUDA. forward.c drives the model through the table only.
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/msa_split.h"

/* ---- tensors ------------------------------------------------------------ */

/* A weight's stored type: f32, the two halves, or one of ggml's block
 * types (32-element blocks Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; 256-element
 * super-blocks Q4_K, Q5_K, Q6_K, IQ4_XS, Q2_K, Q3_K, IQ2_XXS, IQ2_XS, IQ2_S; layouts in engine/gguf/README.md), kept
 * as stored and read in place. */
typedef enum {
	ENG_F32 = 0,
	ENG_F16 = 1,
	ENG_BF16 = 2,
	ENG_Q8_0 = 3,
	ENG_Q4_0 = 4,
	ENG_Q4_1 = 5,
	ENG_Q5_0 = 6,
	ENG_Q5_1 = 7,
	ENG_Q4_K = 8,
	ENG_Q5_K = 9,
	ENG_Q6_K = 10,
	ENG_IQ4_XS = 11,
	ENG_IQ4_NL = 12,
	ENG_Q2_K = 13,
	ENG_Q3_K = 14,
	ENG_IQ2_XXS = 15,
	ENG_IQ2_XS = 16,
	ENG_IQ2_S = 17,
} eng_dtype;
#define ENG_DTYPE_COUNT 18

/* The name as safetensors headers and GGUF write it ("F32", "Q4_K"), and
 * in lower case as the engine reports it ("f32", "q4_k"). */

const char *eng_dtype_name(eng_dtype t);
const char *eng_dtype_lower(eng_dtype t);
/* The dtype of a name as eng_dtype_name writes it; -1 when unknown. */
int eng_dtype_parse(const char *name);
/* ggml's type number of a dtype (engine/gguf/quant.h), and back (-1:
 * not a type the engine keeps). */
uint32_t eng_dtype_ggml(eng_dtype t);
int eng_dtype_from_ggml(uint32_t ggml_type);
/* Bytes an element (f32, f16, bf16; the KV cache's types). */
size_t eng_dtype_size(eng_dtype t);
/* Elements a block (1 for f32 / f16 / bf16, 32 or 256 for the block
 * types) and the bytes of n elements (n a multiple of the block). */
int eng_dtype_block(eng_dtype t);
size_t eng_dtype_bytes(eng_dtype t, size_t n);
float eng_f16_to_f32(uint16_t h);
uint16_t eng_f32_to_f16(float f);
static inline float eng_bf16_to_f32(uint16_t h)
{
	union { uint32_t u; float f; } v = {(uint32_t)h << 16};
	return v.f;
}
uint16_t eng_f32_to_bf16(float f);
/* Converts n elements of `src` (dtype t; a block type: n a multiple of its
 * block, each value as the format's definition computes it) to f32. */
void eng_to_f32(float *dst, const void *src, eng_dtype t, size_t n);

#define ENG_MAX_DIMS 5 /* a Conv3d kernel: out, in, t, h, w */

/* One tensor of a checkpoint: data points into the mmapped file (or an
 * aligned copy when the file's offset is not aligned for the dtype). */
typedef struct {
	char *name;
	eng_dtype dtype;
	int ndim;
	int64_t shape[ENG_MAX_DIMS];
	const void *data;
	size_t nbytes;
	int file;        /* index into the loaded files */
	bool used;       /* bound to the model */
} eng_tensor;

/* A 2-D weight [rows, cols] in its stored dtype, as the matmul sees it.
 * x4: its rows are quads laid out four rows together (engine/cpu/qdot.h
 * eng_qx4_pack; eng_qx4_type, rows a multiple of 4), as the fast CPU path
 * lays them out when the model is loaded (engine/cpu/layout.c): every
 * reader takes a row through eng_weight_row, or the whole weight through
 * eng_weight_rows, unless it reads quads itself. */
typedef struct {
	const void *data;
	eng_dtype dtype;
	int rows, cols;
	bool x4;
} eng_weight;

/* Row r of w as stored (rows as the file holds them): a pointer into w's
 * data, or (x4) the row written into tmp (the row's bytes) and tmp. */
const uint8_t *eng_weight_row(const eng_weight *w, int r, uint8_t *tmp);
/* Every row of w as stored: rows * the row's bytes written into dst. */
void eng_weight_rows(uint8_t *dst, const eng_weight *w);
/* Row r of w in f32 (cols values; exact, as eng_to_f32). */
void eng_weight_row_f32(float *dst, const eng_weight *w, int r);

/* The loaded safetensors files of a checkpoint (safetensors.c). */
typedef struct {
	int nfiles;
	void **maps;
	size_t *map_len;
	char **paths;
	eng_tensor *t;   /* sorted by name */
	int nt;
	void **copies;   /* aligned copies of misaligned tensors */
	int ncopies;
	int nhuge;       /* files read into anonymous memory advised for huge pages (EVALD_WEIGHT_PAGES) */
} eng_tensor_set;

/* Opens model.safetensors, or the shards of model.safetensors.index.json,
 * in `dir`, validating every header. */
int eng_st_open(eng_tensor_set *ts, const char *dir);
/* Validates one file's header and appends its tensors (file index fi). */
int eng_st_parse(eng_tensor_set *ts, int fi, const char *path, const void *map, size_t len);
void eng_st_close(eng_tensor_set *ts);
eng_tensor *eng_st_find(eng_tensor_set *ts, const char *name);

/* ---- config ------------------------------------------------------------- */

typedef enum {
	ENG_ARCH_LLAMA, ENG_ARCH_MISTRAL, ENG_ARCH_QWEN2, ENG_ARCH_QWEN3,
	ENG_ARCH_MIXTRAL, ENG_ARCH_QWEN3_MOE, ENG_ARCH_MINIMAX_M3, ENG_ARCH_QWEN2_MOE
} eng_arch;

typedef struct {
	eng_arch arch;
	char architecture[64];
	int hidden, layers, heads, kv_heads, head_dim, intermediate, vocab;
	double rms_eps, rope_theta;
	/* rope_scaling: 0 none, 1 llama3, 2 linear, 3 per-frequency factors
	 * (evald's "freq_factors": a GGUF file's rope_freqs tensor, each
	 * inv_freq divided by its factor as llama.cpp does) */
	int rope_kind;
	double rope_factor, rope_low, rope_high;
	long rope_orig_max;
	float *rope_freq_factors; /* rope_dim / 2 of them (kind 3) */
	bool tie;
	long max_position;
	long sliding_window; /* 0 = none */
	bool qkv_bias, o_bias, qk_norm;
	/* MoE */
	int experts, top_k, moe_intermediate, sparse_step;
	bool norm_topk;
	bool *moe_layer; /* [layers] */
	int bos_id;
	int eos_ids[8];
	int n_eos;
	/* the multimodal wrapper's image and video placeholder ids (-1: a
	 * text-only model): their embeddings are replaced by the next queued
	 * rows, in prompt order */
	int image_token, video_token;
	/* the prefix of the decoder's tensors: "model." (text-only form) or
	 * "model.language_model." (MiniMax-M3's multimodal wrapper) */
	char prefix[32];
	/* RoPE rotates the first rope_dim channels of a head (rotate-half over
	 * them; head_dim * partial_rotary_factor), the rest pass through */
	int rope_dim;
	/* MiniMax-M3 (transformers' minimax_m3_vl): Gemma RMSNorm (scaled by
	 * 1 + weight, folded into the f32 copies at load), fused gate_up
	 * projections with SwiGLU-OAI ((clamp(up) + 1) * g * sigmoid(alpha g),
	 * g = min(gate, limit)), a sigmoid router choosing on sigmoid + bias,
	 * weights renormalised over the chosen and scaled by routed_scale, one
	 * shared expert; per layer a dense or MoE MLP (moe_layer) and full or
	 * sparse attention (sparse_layer: the lightning indexer) */
	bool gemma_norm, oai_swiglu, sigmoid_router;
	double swiglu_alpha, swiglu_limit, routed_scale;
	int shared_intermediate;
	int rotary_dim_cfg; /* config.json's rotary_dim, which transformers does not use */
	bool *sparse_layer; /* [layers] */
	int index_heads, index_dim, index_block, index_topk, index_local;
	/* config.json "msa" (fields < 0 when absent); has_msa when present */
	bool has_msa;
	eng_attention_options msa;
	/* The settings config.json leaves out that change the arithmetic, with
	 * the value transformers' config class gives them ("sliding_window=4096,
	 * rms_norm_eps=1e-06"); "" when it states them all. */
	char defaults_used[512];
} eng_config;

/* Parses config.json (and generation_config.json for EOS ids) in `dir`. */
int eng_config_load(eng_config *c, const char *dir);
/* Parses the text of a config.json; `what` names it in errors. */
int eng_config_parse(eng_config *c, const char *json, size_t len, const char *what);
void eng_config_clear(eng_config *c);
const char *eng_arch_family(eng_arch a);

/* ---- layers ------------------------------------------------------------- */

typedef struct {
	eng_weight gate, up, down;
} eng_ffn;

typedef struct {
	float *attn_norm, *ffn_norm;     /* [hidden], f32 copies */
	float *q_norm, *k_norm;          /* [head_dim] or NULL */
	float *bq, *bk, *bv, *bo;        /* biases or NULL */
	eng_weight wq, wk, wv, wo;
	bool moe;
	eng_ffn ffn;                     /* dense */
	eng_weight router;               /* [experts, hidden] */
	eng_ffn *experts;                /* [experts] */
	/* MiniMax-M3: the router's selection bias [experts], the shared expert,
	 * and (sparse layers) the lightning indexer's projections and norms */
	float *router_bias;
	eng_ffn shared;
	/* Qwen2-MoE: the shared expert's gate [1, hidden]; its output is
	 * scaled by sigmoid(gate . x) a row (M3's is added as it is) */
	eng_weight shared_gate;
	eng_weight iq, ik;               /* [index_heads * index_dim, hidden], [index_dim, hidden] */
	float *iq_norm, *ik_norm;        /* [index_dim] */
} eng_layer;

/* ---- paged KV cache ----------------------------------------------------- */

/* A page holds block_size positions of every layer's keys and values, plus
 * per layer and KV head the running sum of the post-RoPE keys it holds (the
 * MSA index branch reads the block's mean key without touching the keys).
 * Layout per layer: K[B][kvh][hd], V[B][kvh][hd] in the pool's KV dtype
 * (f32, f16 or bf16), then ksum[kvh][hd] in f32 (the sum of the stored,
 * rounded keys, so that it equals a re-summing of the keys). Pages are
 * refcounted: sequences forked from a common prefix share its full pages,
 * which are then never written again (a partly filled page is copied). */
typedef struct {
	int refs;
	int ntok;     /* positions filled */
	unsigned char *data;
	/* The version of the page's contents: a new number from the pool each
	 * time a page is handed out, copied into, or has keys stored on the
	 * host. A device backend keeps its own copy of the page at `dev` and
	 * the version it holds at dev_gen: equal, the copy is current.
	 * dev_ahead: keys and values (and their sums) or index keys were
	 * stored into the device copy and not yet into `data`; the copy is
	 * then current and holds the truth of those parts (the index keys'
	 * boxes are the host's, rebuilt when pulled), and whatever reads or
	 * writes them on the host first calls eng_page_pull. */
	uint64_t gen, dev_gen;
	void *dev;
	bool dev_ahead;
	bool mapped; /* data is a map of its own (kvcache.c), not malloc's */
} eng_page;

typedef struct eng_kv_pool_s {
	int block;        /* positions per page */
	int idim;         /* MiniMax-M3's index key per position and layer (f32; 0: none) */
	eng_dtype dtype;  /* of K and V */
	size_t esize;     /* bytes per K/V element */
	size_t layer_bytes; /* bytes per layer in a page */
	size_t page_bytes;
	int layers, kvh, hd;
	eng_page **free;  /* free list */
	int nfree, free_cap;
	long live;        /* pages handed out */
	uint64_t max_bytes; /* bound on live pages' bytes; 0 = none */
	uint64_t gen;     /* the last version number handed out */
	/* frees a page's device copy when the page's memory goes back (set
	 * by a device backend; NULL: none) */
	void (*dev_free)(void *dev);
	/* brings a dev_ahead page's keys, values, key sums and index keys
	 * down into its data (set by a device backend; 0 or an error) */
	int (*dev_pull)(const struct eng_kv_pool_s *p, eng_page *pg);
} eng_kv_pool;

/* Raw K / V row (kvh * hd elements of the pool's dtype) of a slot. */
static inline void *eng_page_kraw(const eng_kv_pool *p, eng_page *pg, int layer, int slot)
{
	return pg->data + (size_t)layer * p->layer_bytes + (size_t)slot * p->kvh * p->hd * p->esize;
}
static inline void *eng_page_vraw(const eng_kv_pool *p, eng_page *pg, int layer, int slot)
{
	return pg->data + (size_t)layer * p->layer_bytes + (size_t)(p->block + slot) * p->kvh * p->hd * p->esize;
}
/* f32 views: valid only when the pool's dtype is ENG_F32. */
static inline float *eng_page_k(const eng_kv_pool *p, eng_page *pg, int layer, int slot)
{
	return (float *)eng_page_kraw(p, pg, layer, slot);
}
static inline float *eng_page_v(const eng_kv_pool *p, eng_page *pg, int layer, int slot)
{
	return (float *)eng_page_vraw(p, pg, layer, slot);
}
static inline float *eng_page_ksum(const eng_kv_pool *p, eng_page *pg, int layer)
{
	return (float *)(pg->data + (size_t)layer * p->layer_bytes + (size_t)2 * p->block * p->kvh * p->hd * p->esize);
}
/* The lightning indexer's key of a slot (idim floats), after the key sums. */
static inline float *eng_page_ikey(const eng_kv_pool *p, eng_page *pg, int layer, int slot)
{
	return (float *)(pg->data + (size_t)layer * p->layer_bytes + (size_t)2 * p->block * p->kvh * p->hd * p->esize +
			 (size_t)p->kvh * p->hd * sizeof(float)) +
	       (size_t)slot * p->idim;
}
/* The box of a page's index keys (2 * idim floats: the element-wise max,
 * then min, of every key stored in it since its first slot was written: a
 * bound on each current key, even after a truncation left stale ones). */
static inline float *eng_page_ibox(const eng_kv_pool *p, eng_page *pg, int layer)
{
	return eng_page_ikey(p, pg, layer, p->block);
}
/* n stored elements (pool dtype) at src -> f32. */
static inline void eng_kv_load(const eng_kv_pool *p, float *dst, const void *src, size_t n)
{
	eng_to_f32(dst, src, p->dtype, n);
}

int eng_kv_pool_init(eng_kv_pool *p, int layers, int kvh, int hd, int block);
/* Sets the storage dtype and the byte bound; before any page is handed out. */
int eng_kv_pool_configure(eng_kv_pool *p, eng_dtype dtype, uint64_t max_bytes);
void eng_kv_pool_clear(eng_kv_pool *p);
/* A fresh page (refs 1, key sums zero), or NULL with the message set
 * (out of memory, or the byte bound reached: EV_E_LIMIT). */
eng_page *eng_page_get(eng_kv_pool *p);
void eng_page_put(eng_kv_pool *p, eng_page *pg);
/* Makes a page's host data hold its keys, values, key sums and index keys
 * (a no-op unless a device backend stored them there alone: dev_ahead),
 * the index keys' boxes rebuilt from them. 0 or the device's error. */
int eng_page_pull(eng_kv_pool *p, eng_page *pg);

struct eng_seq {
	eng_model *m;
	eng_page **pages;
	int npages, pages_cap;
	/* MSA's index: per layer, a contiguous copy of the key sums of the
	 * complete blocks ([block][kvh][hd]), written when a page fills. The
	 * page's sum stays the truth; scanning pages one by one for the index
	 * was memory-latency bound (89% of a 1M-token prefill). */
	float **kidx;
	/* beside it, per layer and superblock of ENG_MSA_SUPER blocks, the
	 * box of their rows: per KV head the element-wise max, then the min
	 * ([superblock][2][kvh][hd]); eng_msa_index_topk skips a superblock
	 * whose box proves none of its blocks can be chosen */
	float **kbox;
	/* MiniMax-M3's indexer: per layer and superblock of ENG_MSA_SUPER
	 * pages, the box of every index key stored in it since its first slot
	 * was written ([superblock][2][idim]: max, then min): a bound on its
	 * current keys, even after a truncation or a fork (NULL without idim) */
	float **ibox;
	/* a device backend stored index keys of this sequence in its page
	 * copies alone: ibox (and the pages' boxes) are rebuilt from the keys
	 * when eng_seq_pull brings them down */
	bool ibox_stale;
	long kidx_cap; /* blocks */
	long len;
	float *logits; /* [vocab] */
	bool has_logits;
	/* embedding rows queued for the image placeholders still to come
	 * ([mm_n, hidden], mm_at of them used): eng_seq_add_embeddings */
	float *mm_rows;
	long mm_n, mm_at;
};

/* Makes room for positions [len, len + n): new pages (and index rows) as
 * needed; the page that position len falls in is made private (copied)
 * when shared. */
int eng_seq_reserve(eng_seq *s, long n);
/* eng_page_pull on every page of s (before a host backend reads them),
 * then, where a device backend stored index keys alone (ibox_stale), the
 * indexer's superblock boxes rebuilt from the pages'. */
int eng_seq_pull(eng_seq *s);

/* ---- MSA ------------------------------------------------------------------ */

/* The resolved settings of a model (engine/msa.c). */
typedef struct {
	bool on;            /* MSA at all (else every layer is dense) */
	int block;          /* == the KV page size */
	int top_k, sink, local;
	long dense_below;
	bool *dense_layer;  /* [layers] */
} eng_msa;

/* Resolves options over config.json over defaults into m->msa (and the
 * page size into *block). */
int eng_msa_setup(eng_model *m, const eng_attention_options *opt, int page_block, int *block);
void eng_msa_clear(eng_msa *a);

/* Whether the query at `pos` in `layer` uses the sparse branch. */
bool eng_msa_sparse(const eng_model *m, int layer, long pos);

/* Marks in `att` (cur + 1 flags, cur = pos / block) the blocks the query at
 * `pos` attends in `layer` for KV head g; q holds all heads of that row
 * (post-RoPE). The reference re-reads keys to form block means and scores
 * every candidate; `scores` has room for cur floats. */
void eng_msa_select_ref(const eng_model *m, const eng_seq *s, int layer, long pos, int g, const float *q,
			unsigned char *att, float *scores);
/* The same choice from the blocks' key sums (mean = sum / block, keys
 * never read; from the sequence's contiguous copy s->kidx), top-k kept while streaming over the blocks: writes the attended
 * blocks ascending into blocks[] (room for sink + local + top_k) and
 * returns their count. qsum: hd floats; top, topi: top_k entries. */
int eng_msa_select_fast(const eng_model *m, const eng_seq *s, int layer, long pos, int g, const float *q,
			int *blocks, float *qsum, float *top, int *topi);

/* Blocks per superblock of the MSA index. */
#define ENG_MSA_SUPER 16

/* One layer's index as eng_msa_index_topk reads it: rows of kvh * hd key
 * sums per complete block (k: the truth) and, when box is not NULL, per
 * superblock the element-wise max and min of its rows. */
typedef struct {
	const float *k;
	const float *box;
	int kvh, hd, block;
} eng_msa_index;

/* Writes block b's index row from its key sums (kvh * hd floats) and
 * widens its superblock's box (restarted by the superblock's first block;
 * a box may hold rows since replaced: it stays an upper bound). */
void eng_msa_index_put(float *k, float *box, long b, const float *sum, int kvh, int hd);

/* The K greatest blocks of [b0, b1] for KV head g under (qsum . k_b /
 * block descending, block ascending) into top/topi, descending; returns
 * their count. With `bound`, once K blocks are held, a superblock is
 * skipped when the bound sum_d max(q_d max_d, q_d min_d) over its box,
 * plus the rounding any computed score of its blocks can carry (both
 * dot products, Higham's gamma_hd), is no greater than the k-th score
 * held: its blocks, coming later, could at best tie and ties go to the
 * lower block. The choice is therefore the exact scan's, bit for bit; a
 * bound that is not a number never skips. */
int eng_msa_index_topk(const eng_msa_index *ix, int g, const float *qsum, long b0, long b1, int K, bool bound,
		       float *top, int *topi);

/* ---- the backend function table ----------------------------------------- */

/* Where one row of a batched forward sits: its sequence and position. */
typedef struct {
	eng_seq *seq;
	long pos;
} eng_row;

/* ---- MiniMax-M3's lightning indexer (engine/indexer.c) -------------------- */

/* Stores rows' index keys ik[n, idim] (normed, rotated) in their page slots. */
void eng_index_store(eng_model *m, const eng_row *rows, int n, int layer, const float *ik);
/* The definition of the choice, for one row and one index head (= KV
 * head) whose query is qv: the score of a key is qv . its index key, a block's the max over its
 * keys <= pos; the index_local blocks ending at the query's own block are
 * always kept; then the highest-scoring blocks (lower block first on ties)
 * up to min(index_topk, blocks so far). Writes the blocks ascending to out
 * (room for nlist) and returns their count; `scores` has room for the
 * row's blocks. Every path chooses with it, so every path chooses alike. */
struct eng_backend;
/* The fast path's choice, the same blocks bit for bit (the same exact
 * scores decide; rounding is bounded): for a tile of up to ENG_INDEX_TILE
 * rows of ONE sequence (iq[nr, kvh, idim]) and every index head, the best
 * non-forced blocks within [b0, b1), sorted (score descending, block
 * ascending), at hits + (r * kvh + g) * cap (their count in nhits). Each
 * page's box bounds its blocks' scores from above (plus the rounding an
 * exact score may carry); a query's first `rest` blocks by bound set a
 * threshold, and a later block is scored exactly only where its bound can
 * still enter. Split a long range across workers and merge the parts with
 * eng_index_compose. -1 when out of memory. */
#define ENG_INDEX_MAX_TOPK 1024
#define ENG_INDEX_TILE 16
typedef struct {
	float score;
	int block;
} eng_index_hit;
typedef struct {
	long candidates, scored; /* (query, block) pairs to choose from, and those scored exactly */
} eng_index_stats;
int eng_index_scan(const eng_model *m, const eng_row *rows, int nr, int layer, const float *iq, long b0, long b1,
		   eng_index_hit *hits, int *nhits, int cap, eng_index_stats *st);
/* A row's final list (ascending, returns its length) from its forced blocks
 * and the merge of its hit lists from up to 64 ranges. */
int eng_index_compose(const eng_model *m, const eng_row *row, const eng_index_hit *const *parts, const int *nparts,
		      int nparts_n, int *out, int nlist);
int eng_index_select_one(const eng_model *m, const eng_row *row, int layer, const float *qv, int *out, int nlist,
			 float *scores);
/* The choice of n rows (iq[n, kvh, idim]): row i and KV head g's blocks at
 * lists + (i * kvh + g) * nlist, their count at nls[i * kvh + g]; one row
 * and head after the other (the reference path's index_select op). */
int eng_index_select(struct eng_backend *be, const eng_row *rows, int n, int layer, const float *iq, int *lists,
		     int *nls, int nlist);
/* The boxes eng_index_store keeps, rebuilt from the keys themselves: a
 * page's (every layer, over its ntok slots), and a sequence's superblock
 * boxes from its pages' (pages with no slot filled left out). */
void eng_index_page_boxes(const eng_kv_pool *p, eng_page *pg);
void eng_index_seq_boxes(eng_seq *s);

/* Activations are f32 row-major [n rows, width] buffers in the backend's
 * own memory (from `alloc`; host memory for the CPU paths, device memory
 * for CUDA). Descriptions of the work (token ids, positions, rows with
 * their pages, expert choices) are host arrays the backend reads or
 * uploads itself. Every op is pure given its inputs, so each backend can
 * be compared with the reference op by op. */
typedef struct eng_backend {
	const char *name;
	/* activations live in device memory (not addressable on the host) */
	bool device;
	/* backend memory for activations; NULL when out of memory */
	void *(*alloc)(struct eng_backend *be, size_t bytes);
	void (*release)(struct eng_backend *be, void *p);
	/* copies n floats of backend memory to host memory, and back */
	void (*to_host)(struct eng_backend *be, float *host, const float *src, size_t n);
	void (*from_host)(struct eng_backend *be, float *dst, const float *host, size_t n);
	/* x[i] = embedding row tok[i] as f32, i < n */
	void (*embed)(struct eng_backend *be, float *x, const int32_t *tok, int n);
	/* dst[i] = src[idx[i]], rows of `width` floats, i < n */
	void (*gather)(struct eng_backend *be, float *dst, const float *src, const int *idx, int n, int width);
	/* y[n, w.rows] = x[n, w.cols] . w^T (+ bias[w.rows] when not NULL) */
	void (*matmul)(struct eng_backend *be, float *y, const float *x, int n, const eng_weight *w,
		       const float *bias);
	/* ys[k] = x . ws[k]^T (+ biases[k] when that is not NULL), k < nw: what
	 * nw matmul calls on the same x give, bit for bit, where one call can
	 * quantize x once and run the weights as one job (the CPU backend's,
	 * when the weights take their activations in the same form). May be
	 * NULL: then the caller makes the nw calls. */
	void (*matmul_many)(struct eng_backend *be, int nw, float *const *ys, const float *x, int n,
			    const eng_weight *const *ws, const float *const *biases);
	/* y[n, d] = x / rms(x) * g, per row */
	void (*rmsnorm)(struct eng_backend *be, float *y, const float *x, const float *g, int n, int d,
			float eps);
	/* rotate-half RoPE in place on the first rd channels of each head of
	 * x[n, nh, hd] (rd == hd: all), row i at position pos[i] */
	void (*rope)(struct eng_backend *be, float *x, int n, int nh, int hd, int rd, const long *pos,
		     const float *inv_freq);
	/* SwiGLU-OAI in place: g = min(g, limit), u = clamp(u, -limit, limit),
	 * g[i] = (u + 1) * g * sigmoid(alpha * g), i < n */
	void (*swiglu_oai)(struct eng_backend *be, float *g, const float *u, size_t n, float alpha, float limit);
	/* Makes the op's scratch ready for sequences up to max_len positions
	 * (may be NULL). Reference scratch grows with the context in use; the
	 * fast path's per-worker scratch is O(block) and needs nothing. */
	int (*reserve)(struct eng_backend *be, long max_len);
	/* Stores k, v [n, kvh, hd] of `layer` into each row's page slot and
	 * adds k (as stored) to the page's key sum. */
	void (*kv_store)(struct eng_backend *be, const eng_row *rows, int n, int layer, const float *k,
			 const float *v);
	/* out[n, nh, hd] = causal softmax(q k^T / sqrt(hd)) v over each row's
	 * cached positions <= pos (and > pos - window when window > 0); where
	 * eng_msa_sparse(layer, pos), over the MSA-selected blocks only. With
	 * `lists` (the lightning indexer's choice), row i and KV head g attend
	 * the nls[i * kvh + g] blocks at lists + (i * kvh + g) * nlist,
	 * ascending (nls < 0: every block). */
	void (*attention)(struct eng_backend *be, float *out, const float *q, const eng_row *rows, int n,
			  int layer, int nh, long window, const int *lists, const int *nls, int nlist);
	/* The rows' index keys ik[n, idim] (backend memory) into a device
	 * backend's own copies of their pages, flushed as eng_index_store
	 * stores them in the host's (may be NULL: the host's pages are all
	 * there is). */
	void (*index_store)(struct eng_backend *be, const eng_row *rows, int n, int layer, const float *ik);
	/* MiniMax-M3's lightning indexer: the blocks of n rows (iq[n, kvh,
	 * idim], their index keys already stored), as eng_index_select */
	int (*index_select)(struct eng_backend *be, const eng_row *rows, int n, int layer, const float *iq, int *lists,
			    int *nls, int nlist);
	/* y[i] += a * x[i], i < n (residuals, MoE expert mixing) */
	void (*axpy)(struct eng_backend *be, float *y, const float *x, float a, size_t n);
	/* for each j < n: row rows[j] of y += a[j] * row j of x (rows of width
	 * floats, rows[] distinct; rows and a on the host): an expert's
	 * outputs into the residual rows routed to it, in one call; each row
	 * as `axpy` computes it */
	void (*axpy_rows)(struct eng_backend *be, float *y, const float *x, const int *rows, const float *a, int n,
			  int width);
	/* g[i] = silu(g[i]) * u[i], i < n */
	void (*swiglu)(struct eng_backend *be, float *g, const float *u, size_t n);
	/* The MoE block of `layer` for n rows, without the host (may be
	 * NULL), as the forward's host loop computes it: the shared expert's
	 * output (if any) added into x first (times sigmoid of its gate a row
	 * where there is one), then row i routed from its router logits
	 * router[n, experts] as eng_moe_route routes it, each chosen expert's
	 * FFN run on its row of xb, and the outputs, times weight * scale,
	 * added into row i of x in ascending expert order (the device's exp
	 * may round differently in the last place). 0, or 1 to leave these
	 * rows to the host loop (too many rows for the backend's way, or
	 * experts it does not take). */
	int (*moe)(struct eng_backend *be, float *x, const float *xb, const float *router, int n, int layer, float scale);
	/* 0, or the first failure of an op since the last call (a device
	 * backend's ops cannot return one; they stop working after it). NULL:
	 * the ops cannot fail. */
	int (*status)(struct eng_backend *be);
	void *ctx; /* backend state (thread pool, scratch) */
	eng_model *m;
} eng_backend;

int eng_backend_ref_init(eng_backend *be, eng_model *m);
void eng_backend_ref_free(eng_backend *be);
int eng_backend_cpu_init(eng_backend *be, eng_model *m, int threads);
void eng_backend_cpu_free(eng_backend *be);
/* The CUDA backend (engine/cuda/backend.c; built with the toolkit only):
 * EV_E_UNSUPPORTED naming why when there is no usable device. */
int eng_backend_cuda_init(eng_backend *be, eng_model *m);
void eng_backend_cuda_free(eng_backend *be);
/* Bytes of weights on the device so far. */
uint64_t eng_backend_cuda_uploaded(const eng_backend *be);

/* 1 when the CPU's dot product (kernels.h) takes the AVX2 order (16 FMA
 * lanes), 0 when it is one running sum: the CUDA indexer follows it. */
int eng_cpu_dot_avx2(void);

/* A row's K experts (ascending by choice: score, then the lower id on
 * ties) and their weights from its router logits, as the config routes:
 * softmax (renormalised over the chosen when norm_topk), or MiniMax-M3's
 * sigmoid scores chosen on score + bias and renormalised (engine/
 * forward.c). */
void eng_moe_route(const eng_config *c, const float *logits, const float *bias, int *sel, float *w);

/* Ops the reference and fast CPU paths share (engine/cpu/ref.c). */
void eng_cpu_fill_common(eng_backend *be);
void eng_cpu_rmsnorm(eng_backend *be, float *y, const float *x, const float *g, int n, int d, float eps);
void eng_cpu_rope(eng_backend *be, float *x, int n, int nh, int hd, int rd, const long *pos, const float *inv_freq);
void eng_cpu_kv_store(eng_backend *be, const eng_row *rows, int n, int layer, const float *k, const float *v);
void eng_cpu_swiglu(eng_backend *be, float *g, const float *u, size_t n);
void eng_cpu_swiglu_oai(eng_backend *be, float *g, const float *u, size_t n, float alpha, float limit);
/* axpy_rows as a loop of the backend's own axpy (the same bits) */
void eng_cpu_axpy_rows(eng_backend *be, float *y, const float *x, const int *rows, const float *a, int n, int width);

/* ---- attention plans (engine/attn_plan.c) ------------------------------------ */

/* What an attention op reads, worked out on the host for a backend whose
 * kernels only follow lists (the CUDA one): for each row its first
 * position lo (the window's start, else 0) and, per (row, KV head) task t,
 * the cnt[t] blocks it attends, ascending: every block from lo / block to
 * the row's own for dense attention, kept as a range (first[t], the first
 * block; nothing stored, so a long context's prefill lists cost nothing);
 * the indexer's list where one is given (nls >= 0), or MSA's block-mean
 * choice (eng_msa_select_fast, as the fast CPU path takes it) where
 * eng_msa_sparse says so, stored at blocks + off[t] (first[t] = -1; off
 * has n * kvh + 1 entries). eng_attn_plan_block reads block k of task t.
 * A block's keys at positions in [lo, pos] are attended, no other.
 * Buffers grow and are kept between calls. */
typedef struct {
	int n, kvh;
	long *lo;
	int *off, *blocks, *cnt, *first;
	size_t lo_cap, off_cap, blocks_cap, cnt_cap, first_cap;
	float *qsum, *top;  /* eng_msa_select_fast's scratch */
	int *topi, *sel;
	size_t sel_cap;
	/* eng_attn_plan_split's work items (engine/msa_split.h), and per
	 * (row, KV head) its first item and their count */
	eng_split_item *items;
	int nitems;
	int *ifirst, *icount;
	size_t items_cap, ifirst_cap, icount_cap;
	eng_split_part *parts;
	size_t parts_cap;
} eng_attn_plan;

static inline int eng_attn_plan_block(const eng_attn_plan *pl, long t, int k)
{
	return pl->first[t] >= 0 ? pl->first[t] + k : pl->blocks[pl->off[t] + k];
}

/* Fills pl for n rows of `layer` (q: the rows' queries on the HOST, [n,
 * nh, hd], read only for MSA's block-mean choice; may be NULL when no row
 * takes it). 0, or EV_E_NOMEM. */
int eng_attn_plan_build(eng_attn_plan *pl, eng_model *m, const eng_row *rows, int n, int layer, long window,
			const int *lists, const int *nls, int nlist, const float *q, int nh);
/* Cuts every (row, KV head)'s list into parts of at least part_blocks
 * consecutive entries (eng_split_plan with no cap on the parts: as many as
 * fit, sizes differing by at most one), one work item each, items of a
 * (row, KV head) consecutive and in list order (its merge order). The cut
 * of a list depends on its length alone, never on the rest of the batch,
 * so a row gets the same arithmetic alone or batched. 0 or EV_E_NOMEM. */
int eng_attn_plan_split(eng_attn_plan *pl, int part_blocks);
/* Whether any of n rows takes MSA's block-mean choice (its query is read). */
bool eng_attn_plan_needs_q(const eng_model *m, const eng_row *rows, int n, int layer, const int *lists, const int *nls);
void eng_attn_plan_free(eng_attn_plan *pl);

/* ---- thread pool (engine/cpu/pool.c) -------------------------------------- */

/* A fixed set of workers that run one job at a time: fn(ctx, task, worker)
 * for every task in [0, ntasks), the calling thread taking part as worker
 * 0. eng_pool_run returns when all tasks are done. */
typedef struct eng_pool eng_pool;
typedef void (*eng_task_fn)(void *ctx, int task, int worker);

int eng_pool_new(eng_pool **out, int threads);
void eng_pool_free(eng_pool *p);
int eng_pool_threads(const eng_pool *p);
void eng_pool_run(eng_pool *p, eng_task_fn fn, void *ctx, int ntasks);

/* ---- the model ------------------------------------------------------------ */

struct eng_model {
	/* serialises forwards and page-pool changes: one model, many threads */
	pthread_mutex_t mu;
	eng_config c;
	eng_tensor_set ts;
	eng_weight embed, lm_head;
	float *final_norm;
	eng_layer *layers;
	float *inv_freq; /* [head_dim / 2] */
	eng_kv_pool kv;
	eng_msa msa;
	/* MiniMax-M3's lightning indexer chooses the blocks of its sparse
	 * layers (off: they attend every key; --attention dense) */
	bool indexer;
	/* --msa-selector mean on an M3 checkpoint: its sparse layers take the
	 * mean selector's blocks instead (full-attention layers stay dense) */
	bool mean_selector;
	/* what the indexer's scans did (counted by the fast path, under mu) */
	eng_index_stats istats;
	double index_seconds;
	long max_context;
	eng_backend ref, cpu;
	eng_backend cuda; /* set up when the model is loaded for it (ctx NULL: not) */
	eng_backend *be; /* the one in use */
	int threads;
	int activation_bits; /* K-quant weights' activations: 16 (qdot.h) or 8 (q8k.h) */
	char dtypes[64];
	uint64_t weight_bytes;
	uint64_t quad_bytes; /* of them laid out as quads (engine/cpu/layout.c) */
	/* the fast CPU path may lay weights out as quads: not when the model
	 * is loaded for the device, which would take them back apart */
	bool cpu_quads;
	/* where forward steps' time goes, stage by stage, while set (NULL:
	 * not timed); the caller owns it (evald bench engine --profile) */
	struct eng_prof *prof;
	uint64_t type_bytes[ENG_DTYPE_COUNT], type_elems[ENG_DTYPE_COUNT]; /* of weight_bytes, by dtype */
	/* f32 copies of 1-D tensors, freed with the model */
	float **owned;
	int nowned, owned_cap;
};

#endif
