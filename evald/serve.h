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
	/* A new connection must have sent its request's headers within this
	 * many seconds (default 10), a kept-alive one within 60 s of its last
	 * answer: slow senders are closed, not waited for. */
	int header_timeout;
	/* Open connections at most (0: as many as the file limit allows, up
	 * to 10,000; the soft file limit is raised to the hard one for it). */
	int max_connections;
} ev_serve_options;

#define EV_SERVE_OPTIONS_INIT                                                                                   \
	{.host = "127.0.0.1", .port = 8080, .max_body = (size_t)128 << 20, .threads = 8, .header_timeout = 10}

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
typedef struct ev_serve_response {
	int status;               /* default 200 */
	const char *content_type; /* default "application/json" */
	char *body;
	size_t body_len;          /* 0: strlen(body) */
	struct MHD_Response *mhd;
	int retry_after;          /* > 0: a Retry-After header, in seconds (429, 503) */
	/* A deferred answer: the handler handed the work to another thread and
	 * suspended the connection itself (ev_serve_suspend, under its own lock,
	 * unless the work was already done), so that no HTTP thread waits. The
	 * work resumes it (ev_serve_resume) when done; the server then calls
	 * finish(defer, resp) on an HTTP thread to fill the answer, and
	 * release(defer) when the connection ends (finished or not). */
	void *defer;
	int (*finish)(void *defer, struct ev_serve_response *resp);
	void (*release)(void *defer);
} ev_serve_response;

/* Suspends a connection from inside a handler or a stream callback; resumes
 * it from any thread. A suspended connection holds no thread and does not
 * time out; every suspended connection must be resumed before the server
 * stops. */
void ev_serve_suspend(struct MHD_Connection *conn);
void ev_serve_resume(struct MHD_Connection *conn);
/* True when the client behind conn has closed its side or reset the
 * connection (a non-blocking peek; for suspended connections, which MHD
 * does not watch). */
bool ev_serve_client_gone(struct MHD_Connection *conn);
/* Caps the kernel's send buffer of a connection (streams: what a client
 * that does not read can make the kernel hold, up to 4 MiB a socket by
 * default, is then this, and the stream's own allowance counts). */
void ev_serve_cap_send_buffer(struct MHD_Connection *conn, int bytes);

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
	/* Errors in OpenAI's shape, {"error":{"message","type","param","code"}},
	 * as OpenAI clients read them (the /v1 routes); else {"error","status"}. */
	bool openai_errors;
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
/* The same in OpenAI's shape: {"error":{"message","type","param","code"}},
 * the type from the status (invalid_request_error, authentication_error,
 * permission_error, not_found_error, rate_limit_error, server_error);
 * code may be NULL. */
int ev_serve_openai_error(ev_serve_response *resp, int status, const char *param, const char *code,
                          const char *message);

/* ---- the tracker API (serve_api.c) --------------------------------------------- */

typedef struct ev_serve_api ev_serve_api;

/* Opens the tracker at db_path (one handle, behind a mutex). Attachments
 * are capped at max_attachment bytes each (0: EV_ATTACH_MAX_DEFAULT). */
int ev_serve_api_new(ev_serve_api **out, const char *db_path, size_t max_attachment);
void ev_serve_api_free(ev_serve_api *api);
/* Registers POST /api/issues (token), GET /api/issues, GET /api/issues/N,
 * GET /api/regressions, GET /api/proposals. */
int ev_serve_api_register(ev_serve *s, ev_serve_api *api);
/* Registers the team tracker's runs API (evald/serve_runs.c; token). */
int ev_serve_runs_register(ev_serve *s, ev_serve_api *api);
/* The tracker, locked for the caller (other pages of the server share it). */
ev_tracker *ev_serve_api_lock(ev_serve_api *api);
void ev_serve_api_unlock(ev_serve_api *api);
/* Reads a POST /api/issues JSON body as the route does, storing nothing:
 * 0, or the error naming the field (for tests and the fuzz target). */
int ev_serve_api_check_issue_json(const char *body, size_t len, size_t max_attachment);

/* ---- the tracker viewer (serve_view.c) ------------------------------------------ */

typedef struct ev_serve_view ev_serve_view;

/* Pages over the API's tracker; `token` is the server's (forms derive
 * their csrf field from it; NULL: no action works); public_read opens the
 * pages without a token. */
int ev_serve_view_new(ev_serve_view **out, ev_serve_api *api, const char *token, bool public_read);
void ev_serve_view_free(ev_serve_view *v);
/* Registers GET /view, /view/runs/N, /view/compare?a=&b=, /view/regressions,
 * /view/issues[/N], /view/clusters, /view/proposals and the POST actions
 * /view/regressions/N, /view/issues/N/close, /view/proposals/N/join. */
int ev_serve_view_register(ev_serve *s, ev_serve_view *v);

/* ---- the OpenAI-compatible endpoints (serve_openai.c; owner: serving) ----------- */

typedef struct ev_serve_openai ev_serve_openai;

typedef struct {
	/* Requests admitted at once (queued or generating); past it a request
	 * gets 503 with Retry-After at once (default 64). */
	int max_queue;
	/* Bytes a streaming client may fall behind (default 256 MiB); past it
	 * the request is cancelled and its stream ends with an error event. */
	size_t stream_buffer;
	/* A folder whose image files clients may name (image_url "file://PATH",
	 * PATH absolute or relative to the folder; resolved through links and
	 * refused outside it). NULL: the server reads no files for a client. */
	const char *image_root;
} ev_serve_openai_options;

#define EV_SERVE_OPENAI_OPTIONS_INIT {.max_queue = 64, .stream_buffer = (size_t)256 << 20}

/* Loads the engine backend (runners/runners.h: ev_backend_engine_new) with
 * `engine_backend_options` (an ev_engine_backend_options, passed as void to
 * keep this header free of the runners'); every request of every
 * connection goes to its one batching worker. No HTTP thread waits for a
 * generation: a connection waiting for one is suspended, and a client that
 * leaves (closes or resets its connection) cancels its request. opt may be
 * NULL (the defaults). */
int ev_serve_openai_new(ev_serve_openai **out, const void *engine_backend_options, const ev_serve_openai_options *opt);
/* Ends every request in flight with an error ("the server is stopping"),
 * resuming their connections, and refuses new ones with 503: call it
 * before ev_serve_free (which cannot stop with suspended connections). */
void ev_serve_openai_stop(ev_serve_openai *o);
/* Stops (if not yet) and frees; after ev_serve_free. Accepts NULL. */
void ev_serve_openai_free(ev_serve_openai *o);
const char *ev_serve_openai_model_name(const ev_serve_openai *o);
/* Registers GET /v1/models, POST /v1/chat/completions, POST /v1/completions
 * (both with "stream": true as server-sent events), GET /health (the
 * request counters: running, completed, cancelled, rejected, failed) and a
 * JSON 404 for the rest of /v1/. No token needed: they write nothing. */
int ev_serve_openai_register(ev_serve *s, ev_serve_openai *o);

#endif
