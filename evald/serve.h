/*
 * evald/serve.h: the HTTP server of `evald serve` (libmicrohttpd, a thread
 * pool) and its route table.
 *
 * The server owns the socket, the thread pool, reading the request body
 * (capped: 413 past --max-body, before reading when Content-Length says so),
 * the bearer-token check (constant time) and JSON errors. What it serves is a
 * table of routes: the tracker API (/api/..., serve_api.c) registers its
 * own; the engine's OpenAI-compatible endpoints (/v1/...) are meant to be
 * registered the same way, next to the API in cmd_serve.c (see the hook
 * there). Handlers run on the pool's threads, several at once: whatever they
 * share must be locked (the tracker API keeps one tracker handle behind a
 * mutex).
 */
#ifndef EV_SERVE_H
#define EV_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "feedback/feedback.h"

struct MHD_Connection;
struct MHD_Response;

typedef struct ev_serve ev_serve;

typedef struct {
	const char *host;     /* "127.0.0.1" (default), "::1", "localhost", or any address with allow_remote */
	int port;             /* 0: any free port (ev_serve_port tells which) */
	const char *token;    /* bearer token for routes that need one; NULL: those routes answer 401 */
	size_t max_body;      /* request body cap in bytes (default 128 MiB) */
	int threads;          /* thread pool size (default 8) */
	bool allow_remote;    /* permit a non-loopback host */
} ev_serve_options;

#define EV_SERVE_OPTIONS_INIT {.host = "127.0.0.1", .port = 8080, .max_body = (size_t)128 << 20, .threads = 8}

/* One request as a handler sees it; everything is borrowed for the call. */
typedef struct {
	const char *method;          /* "GET", "POST", ... */
	const char *path;            /* the URL path, without the query */
	struct MHD_Connection *conn; /* for headers and query arguments (MHD_lookup_connection_value) */
	const char *content_type;    /* the Content-Type header, or NULL */
	const char *body;            /* the whole body, NUL-terminated ("" when none) */
	size_t body_len;
	bool authorized;             /* a valid bearer token came with it */
	size_t max_body;             /* the server's cap, for handlers that size things by it */
} ev_serve_request;

/* What a handler answers: status and a malloc'd body (freed by the server),
 * or a prepared MHD response (for streaming), which the server queues and
 * destroys. */
typedef struct {
	int status;               /* default 200 */
	const char *content_type; /* default "application/json" */
	char *body;
	size_t body_len;          /* 0: strlen(body) */
	struct MHD_Response *mhd;
} ev_serve_response;

/* Returns 0, or an ev_status that the server turns into a JSON error with
 * the thread's message (ev_serve_http_status says which HTTP status). */
typedef int (*ev_serve_handler)(void *ctx, const ev_serve_request *req, ev_serve_response *resp);

typedef struct {
	const char *method;  /* NULL: any method */
	const char *path;    /* exact path, or a prefix when it ends in '*' ("/v1/" + "*") */
	bool needs_token;    /* 401 (before the body is read) without a valid bearer token */
	ev_serve_handler fn;
	void *ctx;
	/* The most body this route reads (0: the server's --max-body, which
	 * also caps this). GET and HEAD requests take no body at all. */
	size_t max_body;
} ev_serve_route;

/* Body caps of the routes: JSON requests of the OpenAI routes (images come
 * as data URLs, so not tiny), and everything that is not an upload. */
#define EV_SERVE_JSON_BODY_MAX ((size_t)32 << 20)

#define EV_SERVE_MAX_ROUTES 64

/* The server, not yet listening. Refuses a non-loopback host unless
 * allow_remote (EV_E_UNSAFE). */
int ev_serve_new(ev_serve **out, const ev_serve_options *opt);
/* Adds a route (copied) before ev_serve_start; the first match wins, so add
 * exact paths before prefixes. */
int ev_serve_add_route(ev_serve *s, const ev_serve_route *r);
/* Binds and starts the thread pool. */
int ev_serve_start(ev_serve *s);
int ev_serve_port(const ev_serve *s);
/* Stops (waiting for requests in flight) and frees. Accepts NULL. */
void ev_serve_free(ev_serve *s);

/* HTTP status for an ev_status: parse/invalid 400, limit 413, unsupported
 * 415, not found 404, unsafe 403, otherwise 500. */
int ev_serve_http_status(int ev_code);
/* Sets resp to {"error": message, "field": field (when not NULL)}. */
int ev_serve_json_error(ev_serve_response *resp, int status, const char *field, const char *message);

/* ---- the tracker API (serve_api.c) --------------------------------------------- */

typedef struct ev_serve_api ev_serve_api;

/* Opens the tracker at db_path (one handle, behind a mutex). Attachments
 * are capped at max_attachment bytes each (0: EV_ATTACH_MAX_DEFAULT). */
int ev_serve_api_new(ev_serve_api **out, const char *db_path, size_t max_attachment);
void ev_serve_api_free(ev_serve_api *api);
/* Registers POST /api/issues (token), GET /api/issues, GET /api/issues/N,
 * GET /api/regressions, GET /api/proposals. */
int ev_serve_api_register(ev_serve *s, ev_serve_api *api);
/* Reads a POST /api/issues JSON body as the route does, storing nothing:
 * 0, or the error naming the field (for tests and the fuzz target). */
int ev_serve_api_check_issue_json(const char *body, size_t len, size_t max_attachment);

/* ---- the OpenAI-compatible endpoints (serve_openai.c; owner: serving) ----------- */

typedef struct ev_serve_openai ev_serve_openai;

/* Loads the engine backend (runners/runners.h: ev_backend_engine_new) with
 * `opt` (an ev_engine_backend_options, passed as void to keep this header
 * free of the runners'); every request of every connection goes to its one
 * batching worker. */
int ev_serve_openai_new(ev_serve_openai **out, const void *engine_backend_options);
void ev_serve_openai_free(ev_serve_openai *o);
const char *ev_serve_openai_model_name(const ev_serve_openai *o);
/* Registers GET /v1/models, POST /v1/chat/completions, POST /v1/completions
 * (both with "stream": true as server-sent events) and a JSON 404 for the
 * rest of /v1/. No token needed: they write nothing. */
int ev_serve_openai_register(ev_serve *s, ev_serve_openai *o);

#endif
