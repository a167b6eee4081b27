/*
 * engine/make/make.h: checkpoint fabricators, apart from inference: random
 * checkpoints of every architecture (tests, benchmarks) and the constructed
 * recall checkpoint with its prompts.
 */
#ifndef ENG_MAKE_H
#define ENG_MAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct {
	int hidden, layers, heads, kv_heads, intermediate, vocab, experts, top_k;
	int head_dim;    /* 0 = hidden / heads */
	long max_position;
	int index_block, index_topk; /* minimax_m3's indexer; 0 = 16 and 4 */
	const char *sparse_layers;   /* minimax_m3's sparse-attention layers: "odd" (NULL), "all" or "none" */
	/* minimax_m3_vl's vision tower (0 = 32 wide, 64 inner, 2 layers, 2 heads) */
	int vision_hidden, vision_inter, vision_layers, vision_heads;
	/* <think> and </think> as special tokens and a chat template that
	 * opens a think block (eng_tokenizer_write_default_ex) */
	bool thinking;
} eng_mkmodel_sizes;

/* Defaults: hidden 64, 2 layers, 4 heads, 2 KV heads, intermediate 128,
 * vocab 512, 4 experts, top-k 2, max_position 4096. */
#define ENG_MKMODEL_SIZES_INIT                                                                          \
	{.hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .intermediate = 128, .vocab = 512, .experts = 4,    \
	 .top_k = 2, .max_position = 4096}

/* Writes a random-weight checkpoint of `arch` (llama|mistral|qwen2|qwen3|
 * mixtral|qwen3_moe|qwen2_moe) to folder `dir` (created if needed): config.json,
 * generation_config.json, model.safetensors in `dtype` (f32|f16|bf16) and,
 * when the tokenizer is built in, tokenizer.json + tokenizer_config.json.
 * Weights are scaled so that activations stay near unit size. */
int eng_mkmodel(const char *dir, const char *arch, const eng_mkmodel_sizes *sizes, const char *dtype,
		uint64_t seed);



/* The recall checkpoint: a one-layer LlamaForCausalLM whose weights are
 * constructed so that at the last position of " ... K<i> V<j> ... ? K<i>"
 * it predicts "V<j>" at any distance it holds (README "MSA"). Writes
 * config.json, generation_config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json into `dir` (created if needed). */
int eng_mkrecall(const char *dir);
/* The same recall task in MiniMax-M3's shape (two sparse layers, 4 heads
 * of 128, the lightning indexer choosing 16 blocks of 128), its index
 * weights written so that the needle's block wins the indexer
 * (engine/README.md "The MiniMax-M3 recall checkpoint"). */
int eng_mkrecall_m3(const char *dir);

/* A recall prompt as text (malloc'd into *text) for the recall checkpoint:
 * `n` tokens of filler haystack with `distractors` other pairs and the
 * needle pair at `depth` percent; *answer gets the value's text. The
 * suite of such prompts is written by suites/ (ev_gen_recall). */
int eng_recall_text(char **text, char answer[16], long n, int depth, int distractors, uint64_t seed);

/* Recall prompt as token ids (for tests and benchmarks without text):
 * length `n` tokens, needle at depth percent, `distractors` other pairs.
 * Fills toks[n]; *value_id gets the expected answer token. */
int eng_recall_tokens(int32_t *toks, long n, int depth, int distractors, uint64_t seed, int32_t *value_id);

#endif
