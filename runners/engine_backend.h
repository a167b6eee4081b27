/*
 * runners/engine_backend.h: the engine backend (runners/backend_engine.c).
 *
 * The bundled engine in process: a worker thread owns the model and a
 * continuous-batching scheduler (eng_batch); submit() renders the chat with
 * the model's chat template (messages and tools), tokenizes and queues it;
 * the worker detokenizes as it generates, applies stop strings, parses tool
 * calls back out of the answer and queues the completion for poll(). The
 * completion's raw_json is the OpenAI chat.completion body, so the response
 * cache and `evald serve` see the same thing as the OpenAI backend. */
#ifndef EV_RUNNERS_ENGINE_BACKEND_H
#define EV_RUNNERS_ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"
#include "runners/runner.h"

typedef struct {
	const char *model_dir;      /* the checkpoint folder (required) */
	const char *model_name;     /* reported name; NULL: the folder's name */
	int threads;                /* CPU threads; 0: all online cores */
	int max_batch;              /* sequences generated together (8) */
	int max_step_tokens;        /* prompt tokens per batched step (512) */
	const char *chat_template;  /* "chatml" | "llama3"; NULL: from tokenizer_config.json */
	bool reference;             /* the engine's plain reference path (slow; for checks) */
	int default_max_tokens;     /* when a request sets none (512) */
	/* The engine's own settings (the attention, kv_dtype and kv_max_bytes
	 * fields, as eng_options_parse_flag fills them); NULL for the
	 * checkpoint's own. */
	const eng_model_options *engine;
} ev_engine_backend_options;

#define EV_ENGINE_BACKEND_OPTIONS_INIT {.max_batch = 8, .max_step_tokens = 512, .default_max_tokens = 512}

int ev_backend_engine_new(ev_backend **out, const ev_engine_backend_options *opt);

/* Streaming use (evald serve): on_delta gets each piece of the answer's
 * text as soon as it is final (stop strings already cut; the pieces
 * concatenate to the completion's text when no tool call was parsed out);
 * a non-zero return cancels the request. on_done gets the completion once
 * (the callee owns it: ev_completion_clear). Both run on the engine's
 * worker thread and must not block long. Requests submitted this way are
 * not returned by poll() and do not count in pending(). Each gets its
 * on_done exactly once, also when the backend is freed first (an error
 * saying the server is stopping). */
typedef struct {
	int (*on_delta)(void *ctx, const char *text, size_t len);
	void (*on_done)(void *ctx, ev_completion *c);
	/* Optional: asked before the request enters the scheduler and after
	 * every token; non-zero cancels it (the client left). It ends with
	 * on_done as usual: an error "cancelled" before it ran, otherwise the
	 * text so far. */
	int (*cancelled)(void *ctx);
	void *ctx;
} ev_engine_stream;

/* Submits a chat request (raw_prompt NULL) or a plain text prompt
 * (raw_prompt set: no chat template, the model's BOS first when it has one;
 * req->messages ignored) with streaming callbacks. A request that cannot
 * be rendered or tokenized fails here (EV_E_INVALID / EV_E_LIMIT / ...), and
 * then no callback is called. */
int ev_backend_engine_submit_stream(ev_backend *b, const ev_request *req, const char *raw_prompt,
                                    const ev_engine_stream *cb);
/* The same for a prompt given as token ids (as they are: no special token
 * added); an id outside the vocabulary is EV_E_INVALID. */
int ev_backend_engine_submit_tokens(ev_backend *b, const ev_request *req, const int32_t *ids, size_t n,
                                    const ev_engine_stream *cb);
/* The reported model name of an engine backend; NULL for other backends. */
const char *ev_backend_engine_model_name(ev_backend *b);
/* Context length of the loaded model (tokens); 0 for other backends. */
long ev_backend_engine_max_context(ev_backend *b);

#endif
