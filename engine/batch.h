/*
 * engine/batch.h: continuous batching (engine/batch.c).
 *
 * A scheduler that keeps many generations in flight on one model: each step
 * is one eng_forward_batch over every active sequence (a chunk of a new
 * one's prompt, or the one token each decoding sequence sampled last), and
 * each sequence then samples with its own sampler and stop conditions. New
 * requests join as others finish. Per sequence the result is exactly what
 * eng_generate gives alone (same tokens, same stop reason). The scheduler
 * is not thread-safe: one thread owns it (the runner's engine backend runs
 * it on its worker thread). */
#ifndef ENG_BATCH_H
#define ENG_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"

typedef struct eng_batch eng_batch;

typedef struct {
	int max_batch;       /* sequences in flight at once (8) */
	int max_step_tokens; /* prompt tokens fed per step over all sequences (512);
	                        a longer prompt is fed in chunks over several steps */
	/* Prefix cache: the KV pages of up to `prefix_cache` recent prompts (4;
	 * 0 = off) of at least `prefix_min` tokens (256) are kept, shared
	 * (eng_seq_fork), and a new request whose prompt starts with at least
	 * prefix_min tokens of one of them starts from there instead of
	 * recomputing it: many questions about one haystack pay for it once.
	 * The result is the same bits (prefill in chunks == in one pass).
	 * With a KV byte bound, cached prompts are dropped, oldest first,
	 * while the live KV is past half the bound. */
	int prefix_cache;
	int prefix_min;
} eng_batch_options;

#define ENG_BATCH_OPTIONS_INIT {.max_batch = 8, .max_step_tokens = 512, .prefix_cache = 4, .prefix_min = 256}

/* One generation. The prompt and stop ids are copied by eng_batch_add.
 * `cb`, when set, is called on the owning thread after each generated token
 * (inside eng_batch_step); non-zero stops that sequence (ENG_STOP_CALLBACK). */
typedef struct {
	const int32_t *prompt;
	int n_prompt;        /* >= 1 */
	eng_generate_options gen;
	eng_token_cb cb;
	void *cb_ctx;
	void *cookie;        /* the caller's, returned in eng_batch_result */
	/* Log-probabilities kept for the result: `logprobs` one entry per
	 * generated token, `prompt_logprobs` one per prompt token (the first
	 * with a NAN logprob: nothing precedes it; such a prompt is computed
	 * whole, never taken from the prefix cache), each with `top_logprobs`
	 * (0..ENG_MAX_TOP_LOGPROBS) alternatives. `prompt_only`: feed the
	 * prompt and generate nothing (scoring a text). */
	bool logprobs, prompt_logprobs, prompt_only;
	int top_logprobs;
	/* embedding rows [n_embeds, hidden] for the prompt's image placeholders
	 * (eng_seq_add_embeddings), copied; such a prompt is computed whole and
	 * never kept in or taken from the prefix cache (its placeholders say
	 * nothing of which image they stand for) */
	const float *embeds;
	int n_embeds;
} eng_batch_request;

/* A finished generation; clear with eng_batch_result_clear. */
typedef struct {
	void *cookie;
	uint64_t id;
	int status;          /* 0, or the EV_E_* that ended it (error says why) */
	char *error;
	int32_t *tokens;     /* generated ids, stop id excluded (malloc'd) */
	int n_tokens;
	int n_prompt;
	int n_think;         /* of n_tokens, those inside think blocks (with a budget) */
	eng_stop_reason reason;
	eng_logprob *logprobs;        /* n_tokens entries when asked, else NULL */
	eng_logprob *prompt_logprobs; /* n_prompt entries when asked, else NULL */
} eng_batch_result;

void eng_batch_result_clear(eng_batch_result *r);

/* `m` is borrowed and must outlive the scheduler. */
int eng_batch_new(eng_batch **out, eng_model *m, const eng_batch_options *opt);
/* Frees every sequence still queued or active (their results are lost). */
void eng_batch_free(eng_batch *b);
/* Queues a request; *id_out (may be NULL) names it for eng_batch_cancel. */
int eng_batch_add(eng_batch *b, const eng_batch_request *req, uint64_t *id_out);
/* Ends a queued or active request at once (reason ENG_STOP_CALLBACK, the
 * tokens so far kept). EV_E_NOTFOUND when it is not there (finished). */
int eng_batch_cancel(eng_batch *b, uint64_t id);
/* Runs one step (admits queued requests, one batched forward, sampling).
 * A failing forward ends the sequences of that step with the error in their
 * results; the scheduler stays usable. Returns 0, or a negative status only
 * for broken invariants / no memory. */
int eng_batch_step(eng_batch *b);
/* Moves up to `max` finished results into out[]; returns how many. */
int eng_batch_take(eng_batch *b, eng_batch_result *out, int max);
/* Requests not yet taken (queued, active or finished); those not yet
 * finished (queued or active); finished ones waiting for eng_batch_take. */
int eng_batch_pending(const eng_batch *b);
int eng_batch_active(const eng_batch *b);
int eng_batch_finished(const eng_batch *b);
/* Prompt tokens taken from the prefix cache so far (not recomputed). */
long eng_batch_prefix_reused(const eng_batch *b);

#endif
