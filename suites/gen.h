/*
 * suites/gen.h: suite generators: long-context suites fitted to a model's
 * tokens (gen_longctx*.c) and the recall checkpoint's suite (gen_recall.c).
 */
#ifndef EV_SUITES_GEN_H
#define EV_SUITES_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suite.h"

/* ---- long-context generators (suites/gen_longctx*.c; owner: longctx) ------ */

/* One chat message for counting, borrowed strings (as engine's eng_chat_msg:
 * suites may not use the engine, so the caller adapts). */
typedef struct {
	const char *role;
	const char *content;
	const char *tool_calls_json;
	const char *tool_call_id;
	const char *name;
} ev_token_msg;

/* How the generators measure text in the model's tokens. `count` is
 * required: the number of tokens of `len` bytes of plain text. `render`
 * is optional: the full prompt text the model would see for `msgs` (chat
 * template applied, generation prompt added, malloc'd into *out); when it
 * is NULL the prompt is the message contents joined by newlines. Both
 * return 0 or a negative EV_E_* with the message set. */
typedef struct {
	int (*count)(void *ctx, const char *text, size_t len, size_t *out_tokens);
	int (*render)(void *ctx, const ev_token_msg *msgs, size_t n, const char *tools_json, char **out,
	              size_t *out_len);
	void *ctx;
} ev_token_counter;

#define EV_LONGCTX_MAX_LENGTH ((size_t)8 << 20) /* tokens of one sample */
#define EV_LONGCTX_MAX_SAMPLES 100000           /* samples of one suite */

/* What to generate: every task x length x depth, `samples` times each
 * (vt and cwe have no needle depth: they take the lengths only). NULL /
 * zero-count lists take the defaults (all tasks; 4k; depths 0,25,50,75,100).
 * Depths are percent, 0..100. */
typedef struct {
	const char *const *tasks; /* "niah","multikey","multivalue","multiquery","vt","cwe","agent" */
	size_t n_tasks;
	const size_t *lengths;    /* target prompt lengths in tokens */
	size_t n_lengths;
	const int *depths;
	size_t n_depths;
	int samples;              /* >= 1 */
	uint64_t seed;
	const char *name;         /* suite name, default "longctx" */
	bool quiet;               /* no progress line */
} ev_longctx_options;

#define EV_LONGCTX_OPTIONS_INIT {.samples = 1, .quiet = true}

/* Parses a length ("4096", "4k" = 4096, "128k", "1m" = 1048576) into
 * tokens; EV_E_INVALID naming the text when bad or over the cap. */
int ev_longctx_parse_length(size_t *out, const char *text);
/* True when `name` is one of the task names above. */
bool ev_longctx_task_known(const char *name);

/* Generates the suite folder `out_dir` (created if absent; parent must
 * exist): suite.json (kind "long-context") and samples.jsonl, each sample
 * fitted to its target length in the tokens of `tc` (the rendered prompt
 * is at most the target and within max(16, 0.5%) of it), deterministic
 * from opt->seed: the same options and counter give the same bytes.
 * Each sample's metadata: task, length, tokens, depth (or null), needle_token
 * (token position of the first needle in the prompt, or -1), haystack kinds;
 * single answers use the includes checker, several answers a per-sample
 * regex checker that needs all of them. */
int ev_gen_longctx(const ev_longctx_options *opt, const ev_token_counter *tc, const char *out_dir);

/* The recall suite (suites/gen_recall.c): key-value recall prompts for a
 * model built to answer them (the engine's constructed recall checkpoint).
 * `make` renders one prompt of `length` tokens with the needle at `depth`
 * percent and `distractors` other pairs, from `seed`: the text malloc'd
 * into *text and the expected value into answer. For each length x depth x
 * sample, one sample {"id":"len<L>-depth<D>-<s>","input","target",
 * "metadata":{"task":"recall","length","depth","distractors"}}; suite.json
 * names the suite "recall" (kind long-context, includes checker, greedy,
 * 4 tokens). Written atomically into out_dir. */
typedef int (*ev_recall_make_fn)(void *ctx, char **text, char answer[16], long length, int depth, int distractors,
                                 uint64_t seed);
typedef struct {
	const long *lengths; /* tokens, each in [4, 2^21] */
	int nlengths;
	const int *depths; /* percent */
	int ndepths;
	int samples, distractors;
	uint64_t seed;
} ev_recall_options;
int ev_gen_recall(const ev_recall_options *opt, ev_recall_make_fn make, void *ctx, const char *out_dir);

/* ---- the multimodal suite (suites/gen_vision.c) ---------------------------- */

#define EV_MULTIMODAL_MAX_SAMPLES 10000 /* samples of one task */

/* What to draw: the tasks (NULL / 0: all of count, colour, position,
 * digits, words, chart, compare, video-order, video-count), `samples` of
 * each, square pictures of `side` pixels (0: 224; 112..1024). */
typedef struct {
	const char *const *tasks;
	size_t n_tasks;
	int samples;
	int side;
	uint64_t seed;
	const char *name; /* default "multimodal" */
} ev_multimodal_options;

bool ev_gen_multimodal_task_known(const char *name);
/* Writes the suite folder out_dir (created if absent; its images/ and
 * videos/ replaced): suite.json (kind "multimodal"), samples.jsonl,
 * images/<id>.png, videos/<id>/frame-NNN.png. Deterministic from the
 * options. suites/README.md "Multimodal generator" lists the tasks. */
int ev_gen_multimodal(const ev_multimodal_options *opt, const char *out_dir);

#endif
