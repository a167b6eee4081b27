/*
 * engine/gguf/gguf_int.h: what the converter's files share inside
 * engine/gguf (not part of its interface).
 */
#ifndef ENG_GGUF_INT_H
#define ENG_GGUF_INT_H

#include "base/base.h"
#include "engine/gguf/gguf.h"

/* The merges of g's SentencePiece vocabulary (tokenizer.ggml.tokens,
 * scores, token_type) appended to `out` as the inside of a tokenizer.json
 * "merges" list of [left, right] pairs (spm.c). */
int eng_gguf_spm_merges(const eng_gguf *g, ev_buf *out);

/* GGUF's tensor names beside Hugging Face's, {gguf, hf}, each list ended
 * by {NULL, NULL} (convert.c): the model's own (top), a layer's after
 * "blk.N." and "model.layers.N.", and Qwen2-MoE's shared expert's. */
extern const char *const eng_gguf_top_names[][2];
extern const char *const eng_gguf_layer_names[][2];
extern const char *const eng_gguf_shexp_names[][2];

/* A MoE layer's names in Hugging Face's folders: Mixtral's (GGUF's llama
 * with experts), "model.layers.N.block_sparse_moe.experts.E.w1", or the
 * Qwen MoE forms', "model.layers.N.mlp.experts.E.gate_proj" (convert.c) */
typedef struct {
	const char *block;            /* "block_sparse_moe" or "mlp" */
	const char *gate, *up, *down; /* an expert's three matrices */
} moe_names;
extern const moe_names eng_gguf_mixtral_names, eng_gguf_qwen_moe_names;

/* A byte-level pre-tokenizer llama.cpp names in tokenizer.ggml.pre
 * (pretok.c): its names, whether a word that is a whole token is taken
 * as that token without its merges (tokenizer.json's ignore_merges;
 * llama.cpp does so for Llama 3's and Tekken's names), and its steps as
 * tokenizer.json's pre_tokenizer spells them. */
typedef struct {
	int kind;       /* pretok.c's STEP_ */
	const char *re; /* a split's regex */
} eng_gguf_pre_step;
typedef struct {
	const char *const *names; /* NULL-terminated; the exporter writes the first */
	bool ignore_merges;
	eng_gguf_pre_step steps[8]; /* up to a STEP_END */
} eng_gguf_pre;
extern const eng_gguf_pre eng_gguf_pres[];
extern const size_t eng_gguf_npres;
/* The pre-tokenizer a tokenizer.ggml.pre name stands for (NULL, a file
 * without the key: GPT-2's), or NULL for a name evald does not know. */
const eng_gguf_pre *eng_gguf_pre_find(const char *name);
/* Every name evald reads, comma-separated, into buf (cut with "..." when
 * longer than n). */
void eng_gguf_pre_list(char *buf, size_t n);
/* Its tokenizer.json pre_tokenizer as JSON text (malloc'd; NULL when out
 * of memory). */
char *eng_gguf_pre_json(const eng_gguf_pre *p);
/* The pre-tokenizer a folder's tokenizer.json pre_tokenizer is: the one
 * that splits a probe text (of contractions, digits, case changes,
 * scripts, punctuation and whitespace) into the same words, with the same
 * ignore_merges where one does, else with the other; *out NULL where none
 * does. Non-zero (the error set) where the pre_tokenizer cannot be read. */
int eng_gguf_pre_match(const cJSON *pre_tokenizer, bool ignore_merges, const eng_gguf_pre **out);

/* The type a tensor named `name` (ndim dims, rows of `row` elements,
 * stored as ggml type `stored`) gets in a file quantized to `target`
 * (mix: the Q4_K_M / Q5_K_M rules, over `layers` layers; has_output: the
 * file has output.weight apart from token_embd): 2-D weights and 3-D
 * stacked experts the target, the mix's choice (ffn_down_exps with
 * ffn_down) or llama.cpp's fallback where rows are not whole blocks;
 * norms, biases and other tensors `stored` (requant.c). */
uint32_t eng_gguf_weight_type(const char *name, int ndim, uint64_t row, uint32_t stored, uint32_t target, int mix,
                              int layers, bool has_output);
/* general.file_type for a target, as llama.cpp numbers its file types. */
uint32_t eng_gguf_file_type(uint32_t target, int mix);

#endif
