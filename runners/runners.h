/*
 * runners: drive a model through a suite.
 *
 * A backend turns chat requests into completions asynchronously: the
 * OpenAI one over libcurl multi (concurrency, per-request timeout, retries
 * with exponential backoff and jitter on 429/5xx/network errors honouring
 * Retry-After), the engine one in process (batched). The runner feeds it
 * the samples x epochs of a plan (minus those already done), scores each
 * completion with the plan's checker, and hands every scored result to the
 * plan's sink. It never touches SQLite itself.
 *
 * Infrastructure failures (retries exhausted, timeouts) become results
 * with reason backend_error / timeout: counted, excluded from scores,
 * never scored as wrong answers.
 */
#ifndef EV_RUNNERS_H
#define EV_RUNNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"
#include "scoring/scoring.h"
#include "suites/suites.h"

/* ---- requests and completions ------------------------------------------ */

/* One chat request. Borrowed by the backend until its completion is
 * returned. */
typedef struct {
	const char *model;
	const ev_message *messages;
	size_t n_messages;
	const char *tools_json;   /* OpenAI tools array, or NULL */
	ev_gen gen;
	const char *suite_root;   /* for attachments */
	void *cookie;             /* the caller's, returned in the completion */
} ev_request;

typedef enum {
	EV_COMPLETION_OK,
	EV_COMPLETION_ERROR,     /* retries exhausted or a permanent failure */
	EV_COMPLETION_TIMEOUT
} ev_completion_status;

typedef struct {
	void *cookie;
	ev_completion_status status;
	char *text;            /* the answer (thinking included), malloc'd */
	char *tool_calls_json; /* OpenAI tool_calls array, or NULL */
	char *finish_reason;   /* "stop", "length", "tool_calls" */
	char *error;           /* what failed, for ERROR/TIMEOUT */
	char *raw_json;        /* the backend's response body, for the cache */
	int prompt_tokens, completion_tokens;
	double latency_s;
	int attempts;
} ev_completion;

void ev_completion_clear(ev_completion *c);

/* Builds the OpenAI chat-completions body of a request (also the basis of
 * the request hash). malloc'd JSON text. */
int ev_request_to_json(char **out, const ev_request *req, bool stream);
/* sha256 hex of model + body (+ epoch when sampling is not greedy). The
 * body names the model; the caller passes epoch < 0 for greedy decoding
 * (temperature 0), so that every epoch shares one cache entry. */
void ev_request_hash(char out[EV_SHA256_HEX], const char *request_json, int epoch);
/* Parses an OpenAI chat-completions response body into *out (text,
 * tool_calls, finish_reason, usage). */
int ev_completion_from_json(ev_completion *out, const char *body, size_t len);

/* ---- backends -------------------------------------------------------- */

typedef struct ev_backend ev_backend;

typedef struct {
	const char *const *base_urls; /* "http://host:port/v1"; several spread the load */
	size_t n_urls;
	const char *api_key_env;      /* variable holding the key ("OPENAI_API_KEY") */
	const char *const *headers;   /* extra "Name: value" headers */
	size_t n_headers;
	int concurrency;              /* requests in flight (16) */
	double timeout_s;             /* per attempt (300) */
	int max_retries;              /* after the first attempt (6) */
	double backoff_base_s;        /* first backoff (0.5), doubled each time */
	double backoff_max_s;         /* cap (30) */
	size_t max_response_bytes;    /* per response body (64 MiB) */
} ev_openai_options;

#define EV_OPENAI_OPTIONS_INIT {NULL, 0, "OPENAI_API_KEY", NULL, 0, 16, 300.0, 6, 0.5, 30.0, (size_t)64 << 20}

int ev_backend_openai_new(ev_backend **out, const ev_openai_options *opt);
void ev_backend_free(ev_backend *b);
/* How many requests the backend wants in flight. */
int ev_backend_capacity(ev_backend *b);
/* Queues a request (the backend copies what it needs). */
int ev_backend_submit(ev_backend *b, const ev_request *req);
/* Waits up to wait_s for completions; fills up to `max` of them into
 * out[] and returns how many (>= 0) or a negative status. */
int ev_backend_poll(ev_backend *b, ev_completion *out, int max, double wait_s);
/* Requests submitted and not yet returned by poll. */
int ev_backend_pending(ev_backend *b);

/* ---- the runner ---------------------------------------------------------- */

typedef struct {
	long total;       /* results expected this run (after resume/shard/limit) */
	long done;        /* results produced (including cached) */
	long scored;      /* results that count toward the score */
	long errors;      /* backend errors and timeouts */
	long cached;
	double score_sum;
} ev_run_counts;

typedef struct {
	const ev_suite *suite;
	const ev_checker *checker;
	const char *model;        /* model name sent in requests */
	int epochs;               /* >= 1 */
	long limit;               /* first N samples (0: all) */
	int shard_k, shard_n;     /* this is shard k of n (0 of 1: all) */
	/* Resume: true when (sample, epoch) is already stored. May be NULL. */
	bool (*is_done)(void *ctx, const char *suite, const char *sample_id, int epoch);
	/* Cache: get returns 0 and a malloc'd body, or EV_E_NOTFOUND. May be NULL. */
	int (*cache_get)(void *ctx, const char *key, char **body);
	int (*cache_put)(void *ctx, const char *key, const char *body);
	/* Sink: every scored result, in the runner's thread. Non-zero stops the run. */
	int (*on_result)(void *ctx, const ev_result *r);
	/* Called at least every 50 ms while the run goes on (commit timers). */
	void (*on_tick)(void *ctx);
	void *ctx;
	ev_progress *progress;    /* may be NULL */
} ev_run_plan;

/* Whether (sample index, epoch) belongs to shard k of n: a deterministic
 * split on the hash of the sample id, so shards of one suite are disjoint
 * and together cover it. */
bool ev_shard_owns(const char *sample_id, int shard_k, int shard_n);

/* Runs the plan to the end. Returns 0 when every planned result reached
 * the sink (errors included), or the sink's / backend's failure. */
int ev_runner_run(ev_backend *b, const ev_run_plan *plan, ev_run_counts *out);

/* ---- benchmark ------------------------------------------------------------ */

/* For `evald bench runner`: sends n_requests trivial chat requests to
 * base_url ("http://127.0.0.1:PORT/v1") through the OpenAI backend at the
 * given concurrency (no scoring, no tracker) and reports the wall rate and
 * this process's CPU seconds (user + system, getrusage) per request. Fails
 * with EV_E_BACKEND when any request does not complete OK. */
int ev_bench_runner(const char *base_url, long n_requests, int concurrency, double *out_req_per_s,
                    double *out_cpu_s_per_req);


/* ==== the agent loop (runners/agent.c; owner: agent) =======================
 *
 * Multi-turn tool use against a stateful environment (suites' ev_env): the
 * model gets the messages and the environment's tools (plus the sample's
 * own), each tool call it makes is executed and answered with a tool
 * message, until it answers without calling a tool or a limit is hit. The
 * end state is then scored: see runners/README.md, "Agent loop". */

typedef struct {
	const char *model;      /* model name sent in requests */
	const char *suite_root; /* for attachments, or NULL */
	int max_turns;          /* model requests (10) */
	long max_tokens;        /* completion tokens over all turns (0: none) */
	double max_wall_s;      /* checked between turns (0: none) */
} ev_agent_options;

#define EV_AGENT_OPTIONS_INIT {NULL, NULL, 10, 0, 600.0}

typedef struct {
	bool failed;            /* a backend error/timeout: not scored */
	ev_reason reason;       /* EV_REASON_NONE when score is 1 */
	double score;           /* 0 or 1 */
	char *detail;           /* what differed, the limit hit, or the error */
	char *final_text;       /* the last answer (thinking kept), or NULL */
	char *tool_calls_json;  /* every call made, OpenAI format, or NULL */
	char *state_json;       /* the environment's end state */
	char *first_request_json; /* the first request body (for the hash) */
	char *finish_reason;    /* of the last completion */
	int turns;              /* model requests made */
	int n_tool_calls;
	int prompt_tokens, completion_tokens;
	double latency_s;       /* sum over the turns */
	int attempts;
} ev_agent_result;

void ev_agent_result_clear(ev_agent_result *r);

/* True when the sample goes through the agent loop: the suite's kind is
 * "tool-use-multiturn" or the sample has metadata.environment /
 * tests.environment. */
bool ev_agent_wants(const ev_suite *suite, const ev_sample *s);

/* Runs one sample to the end and scores it. The backend must have nothing
 * else in flight (the loop polls it for its own completions). Returns 0
 * with *out filled (a backend failure is out->failed), or a negative status
 * when the sample's environment or tests are malformed (the suite's
 * fault; the message names the sample). */
int ev_agent_run(ev_backend *b, const ev_sample *s, const ev_gen *gen, const ev_agent_options *opt,
                 ev_agent_result *out);

/* ==== end of the agent loop ================================================ */

/* ==== the engine backend (runners/backend_engine.c; owner: serving) ========
 *
 * The bundled engine in process: a worker thread owns the model and a
 * continuous-batching scheduler (eng_batch); submit() renders the chat with
 * the model's chat template (messages and tools), tokenizes and queues it;
 * the worker detokenizes as it generates, applies stop strings, parses tool
 * calls back out of the answer and queues the completion for poll(). The
 * completion's raw_json is the OpenAI chat.completion body, so the response
 * cache and `evald serve` see the same thing as the OpenAI backend. */

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
 * not returned by poll() and do not count in pending(). */
typedef struct {
	int (*on_delta)(void *ctx, const char *text, size_t len);
	void (*on_done)(void *ctx, ev_completion *c);
	void *ctx;
} ev_engine_stream;

/* Submits a chat request (raw_prompt NULL) or a plain text prompt
 * (raw_prompt set: no chat template, the model's BOS first when it has one;
 * req->messages ignored) with streaming callbacks. A request that cannot
 * be rendered or tokenized fails here (EV_E_INVALID / EV_E_LIMIT / ...), and
 * then no callback is called. */
int ev_backend_engine_submit_stream(ev_backend *b, const ev_request *req, const char *raw_prompt,
                                    const ev_engine_stream *cb);
/* The reported model name of an engine backend; NULL for other backends. */
const char *ev_backend_engine_model_name(ev_backend *b);
/* Context length of the loaded model (tokens); 0 for other backends. */
long ev_backend_engine_max_context(ev_backend *b);

/* ==== end of the engine backend ============================================ */

#endif
