/*
 * engine/gguf/gguf.h: reading GGUF files (llama.cpp's single-file format,
 * version 3; 2 read as well), validated whole before use (README.md).
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGUF's value types */
enum {
	ENG_GGUF_U8 = 0, ENG_GGUF_I8 = 1, ENG_GGUF_U16 = 2, ENG_GGUF_I16 = 3, ENG_GGUF_U32 = 4, ENG_GGUF_I32 = 5,
	ENG_GGUF_F32 = 6, ENG_GGUF_BOOL = 7, ENG_GGUF_STRING = 8, ENG_GGUF_ARRAY = 9, ENG_GGUF_U64 = 10,
	ENG_GGUF_I64 = 11, ENG_GGUF_F64 = 12,
};

/* A string in the file: not NUL-terminated. */
typedef struct {
	const char *p;
	uint64_t n;
} eng_gguf_str;

typedef struct {
	eng_gguf_str key;
	uint32_t type;
	/* scalars */
	union {
		uint64_t u;
		int64_t i;
		double f;
	} v;
	eng_gguf_str s;     /* ENG_GGUF_STRING */
	uint32_t elem_type; /* ENG_GGUF_ARRAY: the elements' type and count */
	uint64_t count;
	const uint8_t *elems; /* the elements as stored (strings: length-prefixed) */
	/* the value's bytes in the file, after its type (for copying it) */
	const uint8_t *raw;
	size_t raw_len;
} eng_gguf_value;

typedef struct {
	eng_gguf_str name;
	uint32_t type;   /* ggml type (quant.h) */
	int ndim;
	uint64_t dims[4]; /* dims[0] the row length (ggml order) */
	uint64_t elements;
	uint64_t bytes;
	const uint8_t *data;
} eng_gguf_tensor;

typedef struct {
	const uint8_t *map;
	size_t len;
	uint32_t version;
	uint64_t alignment;
	eng_gguf_value *kv;
	size_t n_kv;
	eng_gguf_tensor *t;
	size_t n_t;
	size_t data_off;
	char *path;
} eng_gguf;

/* Maps and validates `path`; on failure *out is NULL and the error names
 * the key or tensor and the offset. */
int eng_gguf_open(eng_gguf **out, const char *path);
/* The same over bytes in memory (kept by the caller while g lives). */
int eng_gguf_parse(eng_gguf **out, const void *data, size_t len, const char *what);
void eng_gguf_close(eng_gguf *g);

const eng_gguf_value *eng_gguf_find_key(const eng_gguf *g, const char *key);
const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name);
/* Typed getters: 0, EV_E_NOTFOUND naming the key when absent, or
 * EV_E_INVALID when of another type or out of range. */
int eng_gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out);
int eng_gguf_get_f64(const eng_gguf *g, const char *key, double *out);
/* a malloc'd NUL-terminated copy (a string holding NUL is refused) */
int eng_gguf_get_str(const eng_gguf *g, const char *key, char **out);
/* Walks a (validated) string array: *at starts at the value's elems; each
 * call gives the next string and moves *at past it. */
eng_gguf_str eng_gguf_next_str(const uint8_t **at);

/* ---- writing (write.c): GGUF version 3 files, for fixtures and converters ---- */

typedef struct eng_gguf_writer eng_gguf_writer;
int eng_gguf_writer_new(eng_gguf_writer **out);
void eng_gguf_writer_free(eng_gguf_writer *w);
int eng_gguf_put_u32(eng_gguf_writer *w, const char *key, uint32_t v);
int eng_gguf_put_f32(eng_gguf_writer *w, const char *key, float v);
int eng_gguf_put_bool(eng_gguf_writer *w, const char *key, bool v);
int eng_gguf_put_str(eng_gguf_writer *w, const char *key, const char *v);
/* arrays of strings, of i32, of f32 */
int eng_gguf_put_strs(eng_gguf_writer *w, const char *key, const char *const *v, size_t n);
int eng_gguf_put_i32s(eng_gguf_writer *w, const char *key, const int32_t *v, size_t n);
int eng_gguf_put_f32s(eng_gguf_writer *w, const char *key, const float *v, size_t n);
/* A value of GGUF type `type` given as its bytes in the file (what follows
 * the type: a scalar, a string's length and bytes, an array's element
 * type, count and elements), for copying metadata from a file read. */
int eng_gguf_put_raw(eng_gguf_writer *w, const char *key, uint32_t type, const void *body, size_t bytes);
/* A tensor of ggml `type`, dims in ggml order (dims[0] the row), its
 * bytes copied. */
int eng_gguf_put_tensor(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim,
                        const void *data, size_t bytes);
/* A tensor whose `bytes` come later, from eng_gguf_write_with's fill
 * (its entry now, its place in the file's order). */
int eng_gguf_put_tensor_later(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim,
                              size_t bytes);
/* The file (alignment 32), written atomically. */
int eng_gguf_write(eng_gguf_writer *w, const char *path);
/* Makes the bytes of the i-th tensor put later (in their order), exactly
 * `bytes` of them, into buf. */
typedef int (*eng_gguf_fill_fn)(void *ctx, size_t i, void *buf, size_t bytes);
/* The same with the tensors put later made by fill one at a time as the
 * file is written (memory for the largest of them only); a failed fill
 * leaves no file. */
int eng_gguf_write_with(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ctx);

/* ---- quantizing a file again (requant.c) ---------------------------------- */

/* A type name as `evald engine gguf --quantize` takes it: one of the eleven
 * types (2-D weights in it), or the mixes Q4_K_M / Q5_K_M (*mix = 1). */
int eng_gguf_quant_target(const char *name, uint32_t *type, int *mix);

typedef struct {
	size_t converted, kept, fallbacks; /* tensors */
	uint64_t bytes_in, bytes_out;      /* tensor bytes */
} eng_gguf_requant_stats;

/* Writes `out`: `in` with its 2-D weights (names ending ".weight"; a MoE
 * file's 3-D stacked experts too) dequantized and quantized again to `type_name` (rows that are not whole
 * super-blocks fall back as llama.cpp's quantize does: Q3_K to Q4_0, Q4_K
 * to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0); norms, biases and other tensors as stored;
 * metadata copied. */
int eng_gguf_requantize(const char *in, const char *out, const char *type_name, eng_gguf_requant_stats *st);

/* ---- a checkpoint folder written as a GGUF file (export.c) -------------------- */

/* Writes the tokenizer's keys (tokenizer.ggml.*) in place of the folder's
 * tokenizer.json (a caller's own vocabulary, such as a SentencePiece one). */
typedef int (*eng_gguf_tok_fn)(eng_gguf_writer *w, void *ctx);

typedef struct {
	const char *type;         /* as eng_gguf_quant_target takes it; NULL: each weight in its stored type */
	eng_gguf_tok_fn tokenizer; /* NULL: the folder's tokenizer.json */
	void *tokenizer_ctx;
	bool experts_apart;       /* Mixtral's experts one tensor each (older llama.cpp files), not stacked */
} eng_gguf_export_opts;

typedef struct {
	char arch[16];                     /* general.architecture written */
	char pre[16]; /* tokenizer.ggml.pre written ("": none, for SentencePiece's BPE or a caller's tokenizer) */
	size_t tensors, quantized, fallbacks; /* tensors written; of them converted to another type; in a fallback type */
	uint64_t bytes_in, bytes_out;      /* tensor bytes read and written */
} eng_gguf_export_stats;

/* Writes `out`, a GGUF file of the checkpoint folder `dir` as llama.cpp's
 * converter writes one: the architecture's keys from config.json (llama,
 * Mistral without a sliding window, qwen2, qwen3, Mixtral, qwen2moe,
 * qwen3moe), the tokenizer of tokenizer.json (a byte-level BPE with the
 * llama.cpp name of its pre-tokenizer, or SentencePiece's BPE as GGUF's
 * 'llama' model with scores made from its merges) and the chat template,
 * the tensors under GGUF's names (llama's q/k rows in llama.cpp's order,
 * experts stacked) in o->type by eng_gguf_requantize's rules, norms and
 * biases F32. What GGUF cannot say (another architecture, a sliding
 * window, a pre-tokenizer llama.cpp has no name for, SentencePiece without
 * byte fallback) is refused by name; nothing is written then. */
int eng_gguf_export(const char *dir, const char *out, const eng_gguf_export_opts *o, eng_gguf_export_stats *st);

/* The byte-level pre-tokenizers evald reads from tokenizer.ggml.pre and
 * writes there (engine/gguf/pretok.c), as a JSON array of {"names": [...]
 * (llama.cpp's names for it, the one written first), "ignore_merges",
 * "pre_tokenizer" (as tokenizer.json spells it)}; malloc'd, NULL when out
 * of memory. */
char *eng_gguf_pre_tokenizers_json(void);

/* ---- checkpoints (convert.c) ------------------------------------------------ */

/* Writes the folder the engine loads from a GGUF checkpoint (llama, qwen2,
 * qwen3, qwen3moe, qwen2moe, llama with experts as Mixtral; a byte-level BPE
 * tokenizer): config.json, generation_config.json, tokenizer.json,
 * tokenizer_config.json (chat template), model.safetensors (HF names; q/k
 * rows back in HF's order for llama; stacked experts split one tensor an
 * expert; every tensor in its stored type, README.md). */
int eng_gguf_convert(const char *path, const char *out_dir);
/* The converted folder of a GGUF file in the cache ($EVALD_CACHE_DIR/gguf,
 * else $XDG_CACHE_HOME/evald/gguf, else ~/.cache/evald/gguf), keyed by the
 * file's size and the hash of its first and last MiB; converted on first
 * use. *dir is malloc'd. */
int eng_gguf_resolve(const char *path, char **dir);
/* A --model argument as a folder: a .gguf file through eng_gguf_resolve,
 * anything else as given (copied). */
int eng_model_path_resolve(const char *path, char **dir);

#endif
