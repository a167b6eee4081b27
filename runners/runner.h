/*
 * runners/runner.h: requests, backends and the runner.
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
#ifndef EV_RUNNERS_RUNNER_H
#define EV_RUNNERS_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
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
	/* A scoring request (a multiple-choice sample) when n_continuations >
	 * 0: the context is the messages' texts as plain text (ev_request_context;
	 * no chat template), each continuation's log-probability after it is
	 * computed, and nothing is generated. The completion's text is then
	 * the JSON of ev_scoring_text (runners/README.md, "Scoring requests"). */
	const char *const *continuations;
	size_t n_continuations;
	/* Routing (ev_backend_router_new): the model chosen for the sample
	 * (1-based, as ev_backend_route + 1; 0: the router's default). Other
	 * backends ignore it. */
	int route;
} ev_request;

/* At most this many continuations a scoring request. */
#define EV_MAX_CONTINUATIONS 64

/* One continuation's score: the sum of its tokens' log-probabilities,
 * how many tokens it took, and whether each was the most likely one. */
typedef struct {
	double logprob;
	int tokens;
	bool greedy;
} ev_loglik;

typedef enum {
	EV_COMPLETION_OK,
	EV_COMPLETION_ERROR,     /* retries exhausted or a permanent failure */
	EV_COMPLETION_TIMEOUT,
	/* The prompt does not fit the model's context (the engine's check, or
	 * a server's 400 saying so): the model's limit, scored 0 with reason
	 * context_overflow, not an infrastructure fault. */
	EV_COMPLETION_CONTEXT
} ev_completion_status;

typedef struct {
	void *cookie;
	ev_completion_status status;
	char *text;            /* the answer (thinking included), malloc'd */
	char *tool_calls_json; /* OpenAI tool_calls array, or NULL */
	char *finish_reason;   /* "stop", "length", "tool_calls" */
	char *error;           /* what failed, for ERROR/TIMEOUT */
	char *raw_json;        /* the backend's response body, for the cache */
	/* with gen.logprobs (engine): [{"token","logprob","bytes":[...]}, ...],
	 * one a generated token, the log-probability under the model's raw
	 * distribution (before temperature and top-p); NULL otherwise */
	char *logprobs_json;
	/* with gen.prompt_logprobs (engine): the same list for the prompt's
	 * tokens, the first one's logprob null (nothing precedes it) */
	char *prompt_logprobs_json;
	int prompt_tokens, completion_tokens;
	/* of completion_tokens, those spent thinking (the engine: inside
	 * <think> blocks; a server: usage.completion_tokens_details.
	 * reasoning_tokens), 0 when unknown */
	int thinking_tokens;
	double latency_s;
	int attempts;
	/* the first 16 hex digits of sha256 of the prompt's token ids as the
	 * model got them (the bundled engine: chat template and tokenizer
	 * applied); "" when the backend does not know them (a server) */
	char prompt_hash[17];
} ev_completion;

void ev_completion_clear(ev_completion *c);

/* Builds the OpenAI chat-completions body of a request (also the basis of
 * the request hash). malloc'd JSON text. */
int ev_request_to_json(char **out, const ev_request *req, bool stream);
/* sha256 hex of model + body (+ epoch when sampling is not greedy). The
 * body names the model; the caller passes epoch < 0 for greedy decoding
 * (temperature 0), so that every epoch shares one cache entry. */
void ev_request_hash(char out[EV_SHA256_HEX], const char *request_json, int epoch);
/* The same, salted with what answers (ev_backend_identity; NULL: none),
 * so that another server or checkpoint behind the same model name never
 * gets this request's cached answer. */
void ev_request_hash_for(char out[EV_SHA256_HEX], const char *request_json, int epoch, const char *salt);
/* Parses an OpenAI chat-completions response body into *out (text,
 * tool_calls, finish_reason, usage). */
int ev_completion_from_json(ev_completion *out, const char *body, size_t len);

/* Scoring requests. The context text (malloc'd): the messages' text parts,
 * messages joined by a blank line. Its trailing whitespace belongs to the
 * continuations (as lm-eval moves it): *ctx_len is its length without it. */
int ev_request_context(char **out, size_t *ctx_len, const ev_request *req);
/* The completion of a scoring request: text {"logprobs":[...],"tokens":
 * [...],"greedy":[...]} and raw_json a chat.completion body carrying that
 * text (so that the response cache returns it unchanged). */
int ev_scoring_complete(ev_completion *c, const ev_loglik *l, size_t n, const char *model, int prompt_tokens);
/* Reads the scores of a legacy /v1/completions answer to the scoring body
 * (one choice a continuation, echo with logprobs): continuation k's tokens
 * are those whose text_offset lies in [ctx_chars, full_chars[k]) (offsets
 * in characters, as OpenAI and vLLM count them). Fills l[0..n). */
int ev_scoring_from_legacy(ev_loglik *l, size_t n, const char *body, size_t len, long ctx_chars,
                           const long *full_chars);

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
	/* Probe each URL once (GET <url>/models, a few seconds) before any
	 * request: a server that cannot be reached, or that refuses the
	 * credentials (401/403), is an error naming the URL at once instead of
	 * every request failing after its retries. Any other answer (even a
	 * 404 from a server without /models) passes. */
	bool probe;
} ev_openai_options;

#define EV_OPENAI_OPTIONS_INIT                                                                          \
	{.api_key_env = "OPENAI_API_KEY", .concurrency = 16, .timeout_s = 300.0, .max_retries = 6,                 \
	 .backoff_base_s = 0.5, .backoff_max_s = 30.0, .max_response_bytes = (size_t)64 << 20}

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
/* What answers, as a hex digest: for an OpenAI-compatible backend its URLs
 * and the stable fields of each one's /models entries (id, root, parent,
 * owned_by, max_model_len), for the engine the checkpoint (config,
 * tokenizer files, every weight file's size and header) and the engine
 * settings. "" when the backend cannot say. */
const char *ev_backend_identity(const ev_backend *b);
/* How images and videos reach the model, as a JSON object (the run stores
 * it with multimodal runs; compare flags runs where it differs): for the
 * engine M3's preprocessing (resampler, patch, merge, temporal patch,
 * pixel bounds, mean/std, rescale, video sampling and segments, tokens a
 * merged patch, the chat template's hash), for a server what evald sends
 * (images as given; videos as sampled frames). NULL when the backend
 * takes no images (a text-only checkpoint). */
const char *ev_backend_preprocessing(const ev_backend *b);
/* The model an OpenAI-compatible backend's first URL serves, when its
 * /models (read by the probe) lists exactly one; NULL otherwise. */
const char *ev_backend_openai_served_model(const ev_backend *b);

/* ---- routing between models (router.c) ---------------------------------- */

#define EV_ROUTE_MAX_MODELS 16

/* Which model answers a category: key[i] -> model[i] (0-based), else
 * fallback. n_models: the highest model number named (1-based). */
typedef struct {
	char **key;
	int *model;
	size_t n;
	int fallback;
	int n_models;
	char *by; /* the metadata key categories come from (a classifier's label); NULL: ev_sample_category's */
} ev_route_table;

/* From "[by=KEY,]CATEGORY=N,...,*=N" (N: 1-based place of the --model;
 * "*" the default, else the first; by=KEY takes categories from the
 * samples' metadata KEY) or from a file {"by": KEY, "routes": {CATEGORY: N,
 * ...}, "default": N} (evald route --save-router; "by" optional). Errors
 * name the entry. */
int ev_route_table_parse(ev_route_table *t, const char *spec);
void ev_route_table_clear(ev_route_table *t);
int ev_route_table_pick(const ev_route_table *t, const char *key);
/* The table as a spec string (malloc'd): the same routing when parsed. */
char *ev_route_table_spec(const ev_route_table *t);

/* A backend over 2..EV_ROUTE_MAX_MODELS models: children[i] is asked for
 * model names[i] and its answers are labelled labels[i]; it takes
 * ownership of the children (freed on failure too) and of the table's
 * contents. Its identity covers every model's and the table. */
int ev_backend_router_new(ev_backend **out, ev_backend **children, const char *const *names,
                          const char *const *labels, size_t n, ev_route_table *routes);
/* The model a router sends a sample to (0-based; by its category from its
 * suite and metadata), that model's name and label; -1 when b is not a
 * router. */
int ev_backend_route(ev_backend *b, const char *suite, const char *metadata_json, const char **model,
                     const char **label);

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
	const char *cache_salt;   /* salts cache keys (ev_backend_identity); may be NULL */
	/* Sink: every scored result, in the runner's thread. Non-zero stops the run. */
	int (*on_result)(void *ctx, const ev_result *r);
	/* Called at least every 50 ms while the run goes on (commit timers). */
	void (*on_tick)(void *ctx);
	void *ctx;
	ev_progress *progress;    /* may be NULL */
	/* Set (by a signal handler) to stop: no new request is sent, the run
	 * returns at once with "interrupted" (requests in flight are dropped
	 * when the caller frees the backend). May be NULL. */
	volatile sig_atomic_t *stop;
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

#endif
