/*
 * evald serve: the HTTP server (see serve.h) and the command that runs it.
 *
 *   evald serve [--host 127.0.0.1] [--port 8080] [--token-env EVALD_API_TOKEN | --token T]
 *               [--max-body BYTES] [--max-attachment BYTES] [--threads N] [--allow-remote] [--print-port]
 *
 * The server core: libmicrohttpd with an internal thread pool; per connection
 * it matches a route, checks the bearer token and the declared size before
 * reading any of the body (401 / 413 at once), collects the body up to the cap
 * (413 past it, the rest discarded unread into memory), then calls the
 * route's handler.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "evald/cli.h"
#include "evald/serve.h"
#include "runners/runners.h"

struct ev_serve {
	ev_serve_options opt;
	char *token;
	unsigned char token_hash[32];
	ev_serve_route routes[EV_SERVE_MAX_ROUTES];
	size_t n_routes;
	struct sockaddr_storage addr;
	bool ipv6;
	struct MHD_Daemon *daemon;
	int port;
};

/* Per connection: the route, what was decided before the body, the body. */
typedef struct {
	const ev_serve_route *route;
	int early_status; /* answered before the body (404, 405, 401, 413) */
	const char *early_msg;
	bool authorized;
	bool too_big;
	ev_buf body;
} conn_state;

/* ---- helpers -------------------------------------------------------------------- */

int ev_serve_http_status(int code)
{
	switch (code) {
	case EV_E_PARSE:
	case EV_E_INVALID:
		return 400;
	case EV_E_LIMIT:
		return 413;
	case EV_E_UNSUPPORTED:
		return 415;
	case EV_E_NOTFOUND:
		return 404;
	case EV_E_UNSAFE:
		return 403;
	default:
		return 500;
	}
}

int ev_serve_json_error(ev_serve_response *resp, int status, const char *field, const char *message)
{
	ev_buf b = EV_BUF_INIT(64 * 1024);
	int rc = ev_buf_puts(&b, "{\"error\":");
	if (!rc)
		rc = ev_json_buf_str(&b, message ? message : "error");
	if (!rc && field) {
		rc = ev_buf_puts(&b, ",\"field\":");
		if (!rc)
			rc = ev_json_buf_str(&b, field);
	}
	if (!rc)
		rc = ev_buf_puts(&b, ",\"status\":");
	if (!rc)
		rc = ev_buf_printf(&b, "%d}", status);
	free(resp->body);
	resp->body = rc ? NULL : ev_buf_detach(&b, &resp->body_len);
	ev_buf_free(&b);
	resp->status = status;
	resp->content_type = "application/json";
	return 0;
}

static bool loopback_host(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
	}
	return false;
}

static const ev_serve_route *match_route(const ev_serve *s, const char *path, const char *method, bool *path_only)
{
	*path_only = false;
	for (size_t i = 0; i < s->n_routes; i++) {
		const ev_serve_route *r = &s->routes[i];
		size_t n = strlen(r->path);
		bool hit = n && r->path[n - 1] == '*' ? strncmp(path, r->path, n - 1) == 0 : strcmp(path, r->path) == 0;
		if (!hit)
			continue;
		if (!r->method || !strcmp(r->method, method))
			return r;
		*path_only = true;
	}
	return NULL;
}

/* "Bearer <token>" checked in constant time: both sides are hashed first,
 * so neither the length nor a prefix of the token leaks through timing. */
static bool check_token(const ev_serve *s, struct MHD_Connection *c)
{
	if (!s->token)
		return false;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	const char *given = h + 7;
	while (*given == ' ')
		given++;
	unsigned char hash[32];
	ev_sha256(hash, given, strlen(given));
	return CRYPTO_memcmp(hash, s->token_hash, sizeof hash) == 0;
}

static enum MHD_Result send_response(struct MHD_Connection *c, ev_serve_response *resp)
{
	struct MHD_Response *r = resp->mhd;
	resp->mhd = NULL;
	if (!r) {
		size_t len = resp->body ? (resp->body_len ? resp->body_len : strlen(resp->body)) : 0;
		r = MHD_create_response_from_buffer(len, resp->body ? resp->body : (void *)"", MHD_RESPMEM_MUST_COPY);
		if (!r)
			return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
		                        resp->content_type ? resp->content_type : "application/json");
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	}
	if (resp->status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)(resp->status ? resp->status : 200), r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg)
{
	ev_serve_response resp = {0};
	ev_serve_json_error(&resp, status, NULL, msg);
	enum MHD_Result ok = send_response(c, &resp);
	free(resp.body);
	return ok;
}

/* ---- the access handler ----------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
	ev_serve *s = cls;
	conn_state *cs = *con_cls;
	(void)version;

	if (!cs) {
		/* First call: headers only. Decide everything that needs no body. */
		cs = calloc(1, sizeof *cs);
		if (!cs)
			return MHD_NO;
		*con_cls = cs;
		bool path_only = false;
		cs->route = match_route(s, url, method, &path_only);
		/* Each route reads at most its own cap; a GET none: a client cannot
		 * make every connection hold the server's largest body. */
		size_t cap = s->opt.max_body;
		if (cs->route && cs->route->max_body && cs->route->max_body < cap)
			cap = cs->route->max_body;
		if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
			cap = 0;
		ev_buf_init(&cs->body, cap);
		cs->authorized = check_token(s, c);
		if (!cs->route) {
			cs->early_status = path_only ? 405 : 404;
			cs->early_msg = path_only ? "method not allowed" : "no such endpoint";
		} else if (cs->route->needs_token && !cs->authorized) {
			cs->early_status = 401;
			cs->early_msg = s->token ? "a valid 'Authorization: Bearer <token>' header is required"
			                         : "writes are disabled: the server has no token (--token-env or --token)";
		} else {
			const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
			int64_t n;
			if (cl && ev_parse_i64(cl, &n) && n >= 0 && (uint64_t)n > cap) {
				cs->early_status = 413;
				cs->early_msg = cap ? "request body over this route's limit" : "this request takes no body";
			}
		}
		if (cs->early_status)
			return send_error(c, cs->early_status, cs->early_msg);
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (!cs->too_big && ev_buf_append(&cs->body, upload_data, *upload_data_size) != 0) {
			cs->too_big = true; /* chunked or lying about its length */
			ev_buf_free(&cs->body);
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (cs->early_status) /* already answered */
		return MHD_YES;
	if (cs->too_big)
		return send_error(c, 413, cs->body.max ? "request body over this route's limit" : "this request takes no body");

	ev_serve_request req = {method, url, c, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	                                                                    MHD_HTTP_HEADER_CONTENT_TYPE),
	                        cs->body.data ? cs->body.data : "", cs->body.len, cs->authorized, s->opt.max_body};
	ev_serve_response resp = {0};
	ev_error_clear();
	int rc = cs->route->fn(cs->route->ctx, &req, &resp);
	if (rc) {
		int status = ev_serve_http_status(rc);
		if (status == 500) {
			ev_log_error("%s %s: %s", method, url, ev_error_msg());
			ev_serve_json_error(&resp, 500, NULL, "internal error (see the server's log)");
		} else {
			ev_serve_json_error(&resp, status, NULL, ev_error_msg());
		}
	}
	enum MHD_Result ok = send_response(c, &resp);
	free(resp.body);
	return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)c, (void)toe;
	conn_state *cs = *con_cls;
	if (cs) {
		ev_buf_free(&cs->body);
		free(cs);
		*con_cls = NULL;
	}
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = 0;
	ev_log_debug("http: %s", msg);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

int ev_serve_new(ev_serve **out, const ev_serve_options *opt)
{
	*out = NULL;
	ev_serve *s = calloc(1, sizeof *s);
	if (!s)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	s->opt = opt ? *opt : (ev_serve_options)EV_SERVE_OPTIONS_INIT;
	if (!s->opt.host || !*s->opt.host || !strcmp(s->opt.host, "localhost"))
		s->opt.host = "127.0.0.1";
	if (!s->opt.max_body)
		s->opt.max_body = (size_t)128 << 20;
	if (s->opt.threads <= 0)
		s->opt.threads = 8;
	if (s->opt.port < 0 || s->opt.port > 65535) {
		int port = s->opt.port;
		free(s);
		return ev_error_set(EV_E_INVALID, "--port: %d is not a port", port);
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)&s->addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&s->addr;
	if (inet_pton(AF_INET, s->opt.host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)s->opt.port);
	} else if (inet_pton(AF_INET6, s->opt.host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)s->opt.port);
		s->ipv6 = true;
	} else {
		free(s);
		return ev_error_set(EV_E_INVALID, "--host: \"%.100s\" is not an IP address (or localhost)", opt->host);
	}
	if (!loopback_host(&s->addr) && !s->opt.allow_remote) {
		free(s);
		return ev_error_set(EV_E_UNSAFE,
		                    "--host %.100s is not a loopback address: refusing to listen beyond this machine "
		                    "without --allow-remote",
		                    opt->host);
	}
	if (s->opt.token) {
		if (!*s->opt.token) {
			free(s);
			return ev_error_set(EV_E_INVALID, "the API token is empty");
		}
		s->token = ev_strdup(s->opt.token);
		ev_sha256(s->token_hash, s->opt.token, strlen(s->opt.token));
		s->opt.token = NULL;
	}
	*out = s;
	return 0;
}

int ev_serve_add_route(ev_serve *s, const ev_serve_route *r)
{
	if (s->daemon)
		return ev_error_set(EV_E_INVALID, "serve: routes must be added before the server starts");
	if (s->n_routes == EV_SERVE_MAX_ROUTES)
		return ev_error_set(EV_E_LIMIT, "serve: more than %d routes", EV_SERVE_MAX_ROUTES);
	if (!r->path || !r->fn)
		return ev_error_set(EV_E_INVALID, "serve: a route needs a path and a handler");
	s->routes[s->n_routes++] = *r;
	return 0;
}

int ev_serve_start(ev_serve *s)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
	if (s->ipv6)
		flags |= MHD_USE_IPv6;
	s->daemon = MHD_start_daemon(flags, (uint16_t)s->opt.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
	                             (struct sockaddr *)&s->addr, MHD_OPTION_THREAD_POOL_SIZE,
	                             (unsigned)s->opt.threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
	                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_NOTIFY_COMPLETED,
	                             on_completed, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
	if (!s->daemon)
		return ev_error_set(EV_E_IO, "serve: cannot listen on %s port %d (in use, or not permitted)", s->opt.host,
		                    s->opt.port);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : s->opt.port;
	return 0;
}

int ev_serve_port(const ev_serve *s) { return s ? s->port : 0; }

void ev_serve_free(ev_serve *s)
{
	if (!s)
		return;
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (s->token) {
		OPENSSL_cleanse(s->token, strlen(s->token));
		free(s->token);
	}
	free(s);
}

/* ---- the command ------------------------------------------------------------------------- */

typedef struct {
	ev_serve_options srv;
	const char *token_env, *token;
	int64_t max_attachment;
	bool print_port;
	/* --model DIR: the engine's OpenAI-compatible endpoints (serve_openai.c) */
	ev_engine_backend_options eng;
	ev_engine_flags engine;
} serve_opts;

#define T serve_opts
static const ev_opt serve_opts_table[] = {
	EV_O_STR("--host", T, srv.host, "ADDR", "the address to listen on (loopback unless --allow-remote)"),
	EV_O_INT("--port", T, srv.port, 0, 65535, "PORT", "the port (0: any free one)"),
	EV_O_STR("--token-env", T, token_env, "VAR", "the environment variable holding the bearer token"),
	EV_O_STR("--token", T, token, "TOKEN", "the bearer token itself (visible to ps: prefer --token-env)"),
	EV_O_INT("--max-body", T, srv.max_body, 1, 1e12, "BYTES", "request body cap"),
	EV_O_INT("--max-attachment", T, max_attachment, 1, 1e12, "BYTES", "cap on one attachment of an issue"),
	EV_O_INT("--threads", T, srv.threads, 1, 256, "N", "HTTP threads"),
	EV_O_FLAG("--allow-remote", T, srv.allow_remote, "permit a non-loopback --host"),
	EV_O_FLAG("--print-port", T, print_port, "print the port once listening (for scripts)"),
	EV_O_STR("--model", T, eng.model_dir, "DIR", "also serve this checkpoint on /v1 (OpenAI-compatible)"),
	EV_O_STR("--model-name", T, eng.model_name, "NAME", "the served model's name (default: the folder's)"),
	EV_O_CHOICE("--chat-template", T, eng.chat_template, "chatml|llama3|none", "the chat template (default: the checkpoint's)"),
	EV_O_INT("--max-batch", T, eng.max_batch, 1, 1024, "N", "sequences generated together"),
	EV_ENGINE_OPTS(T, engine),
	EV_O_END,
};
#undef T

static const ev_cmd_spec serve_spec = {
	.name = "serve",
	.synopsis = "[--host ADDR] [--port PORT] [--token-env VAR] [--model DIR] [OPTIONS]",
	.about = "Serves the tracker API: POST /api/issues (bearer token), GET /api/issues[/N],\n"
	         "GET /api/regressions, GET /api/proposals. With --model, also the checkpoint on\n"
	         "/v1/chat/completions, /v1/completions (\"stream\": true: SSE) and /v1/models.",
	.opts = serve_opts_table,
};

int ev_cmd_serve(const ev_cli *cli, int argc, char **argv)
{
	serve_opts so = {.srv = EV_SERVE_OPTIONS_INIT, .token_env = "EVALD_API_TOKEN",
	                 .eng = EV_ENGINE_BACKEND_OPTIONS_INIT};
	ev_engine_flags_init(&so.engine);
	int prc = ev_opt_parse(&serve_spec, &so, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	ev_serve_options opt = so.srv;
	const char *token_env = so.token_env, *token = so.token;
	size_t max_attachment = (size_t)so.max_attachment;
	bool print_port = so.print_port;
	ev_engine_backend_options eng = so.eng;
	ev_serve_openai *oai = NULL;
	if (so.engine.n)
		eng.engine = &so.engine.mo;
	/* A token given on the command line is copied and wiped from argv, so
	 * that ps does not show it (--token-env keeps it out of argv at all). */
	char *token_copy = NULL;
	if (token) {
		if (!(token_copy = ev_strdup(token)))
			return ev_cli_fail("serve");
		memset((char *)token, 'x', strlen(token));
		token = token_copy;
	}
	opt.token = token ? token : getenv(token_env);
	if (opt.token && !*opt.token)
		opt.token = NULL;
	if (!opt.token)
		ev_log_warn("serve: no API token ($%s unset, no --token): POST /api/issues answers 401", token_env);

	/* Block the stop signals before any thread starts, so that the pool's
	 * threads inherit the mask and only sigwait below sees them. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);

	ev_serve *srv = NULL;
	ev_serve_api *api = NULL;
	int ret = EV_EXIT_FAIL;
	if (ev_serve_new(&srv, &opt) != 0) {
		ret = ev_error_code() == EV_E_UNSAFE || ev_error_code() == EV_E_INVALID ? EV_EXIT_USAGE : EV_EXIT_FAIL;
		ev_cli_fail("serve");
		goto done;
	}
	if (ev_serve_api_new(&api, cli->db_path, max_attachment) != 0 || ev_serve_api_register(srv, api) != 0) {
		ev_cli_fail("serve");
		goto done;
	}
	/* The engine's OpenAI-compatible endpoints (/v1/models,
	 * /v1/chat/completions, /v1/completions; serve_openai.c) on the same server. */
	if (eng.model_dir && (ev_serve_openai_new(&oai, &eng) != 0 || ev_serve_openai_register(srv, oai) != 0)) {
		ev_cli_fail("serve");
		goto done;
	}
	if (ev_serve_start(srv) != 0) {
		ev_cli_fail("serve");
		goto done;
	}
	if (print_port)
		printf("%d\n", ev_serve_port(srv));
	else
		printf("evald: serving %s on http://%s%s%s:%d/api/ (Ctrl-C stops)\n", cli->db_path,
		       strchr(opt.host, ':') ? "[" : "", opt.host, strchr(opt.host, ':') ? "]" : "", ev_serve_port(srv));
	fflush(stdout);
	int sig = 0;
	sigwait(&stop, &sig);
	ev_log_info("serve: signal %d, stopping", sig);
	ret = 0;
done:
	ev_serve_free(srv); /* waits for requests in flight before the tracker closes */
	ev_serve_api_free(api);
	ev_serve_openai_free(oai);
	if (token_copy) {
		OPENSSL_cleanse(token_copy, strlen(token_copy));
		free(token_copy);
	}
	return ret;
}
