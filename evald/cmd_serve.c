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
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "evald/cli.h"
#include "base/text.h"
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
	/* the header deadline: every open connection, and a thread that closes
	 * those past their deadline */
	pthread_mutex_t clock_mu;
	pthread_cond_t clock_cv;
	struct conn_clock *clocks;
	pthread_t reaper;
	bool reaper_started, stopping;
	unsigned long reaped;
};

/* Per socket: when it must have sent a whole request head. */
typedef struct conn_clock {
	struct conn_clock *prev, *next;
	int fd;
	bool in_request; /* headers received, not yet answered */
	double deadline;
} conn_clock;

#define KEEPALIVE_HEAD_S 60.0

/* Per connection: the route, what was decided before the body, the body. */
typedef struct {
	const ev_serve_route *route;
	int early_status; /* answered before the body (404, 405, 401, 413) */
	const char *early_msg;
	bool authorized;
	bool too_big;
	ev_buf body;
	/* a deferred answer (see ev_serve_response) */
	void *defer;
	int (*finish)(void *defer, ev_serve_response *resp);
	void (*release)(void *defer);
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

int ev_serve_openai_error(ev_serve_response *resp, int status, const char *param, const char *code,
                          const char *message)
{
	const char *type = status == 401 ? "authentication_error" : status == 403 ? "permission_error"
	                 : status == 404 ? "not_found_error" : status == 429 ? "rate_limit_error"
	                 : status >= 500 ? "server_error" : "invalid_request_error";
	ev_buf b = EV_BUF_INIT(64 * 1024);
	int rc = ev_buf_puts(&b, "{\"error\":{\"message\":");
	if (!rc)
		rc = ev_json_buf_str(&b, message ? message : "error");
	if (!rc)
		rc = ev_buf_printf(&b, ",\"type\":\"%s\",\"param\":", type);
	if (!rc)
		rc = param ? ev_json_buf_str(&b, param) : ev_buf_puts(&b, "null");
	if (!rc)
		rc = ev_buf_puts(&b, ",\"code\":");
	if (!rc)
		rc = code ? ev_json_buf_str(&b, code) : ev_buf_puts(&b, "null");
	if (!rc)
		rc = ev_buf_puts(&b, "}}");
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

/* "Bearer <token>", or HTTP Basic credentials whose password is the token
 * (what a browser sends for the viewer's pages; the user name is not
 * read), checked in constant time: both sides are hashed first, so neither
 * the length nor a prefix of the token leaks through timing. */
static bool check_token(const ev_serve *s, struct MHD_Connection *c)
{
	if (!s->token)
		return false;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	unsigned char hash[32];
	if (h && strncasecmp(h, "Basic ", 6) == 0) {
		const char *p = h + 6;
		while (*p == ' ')
			p++;
		unsigned char *dec = NULL;
		size_t n = 0;
		if (strlen(p) > 4096 || ev_base64_decode(&dec, &n, p, strlen(p), 4096, "Authorization") != 0) {
			ev_error_clear();
			return false;
		}
		const unsigned char *colon = memchr(dec, ':', n);
		bool ok = false;
		if (colon) {
			ev_sha256(hash, colon + 1, n - (size_t)(colon + 1 - dec));
			ok = CRYPTO_memcmp(hash, s->token_hash, sizeof hash) == 0;
		}
		OPENSSL_cleanse(dec, n);
		free(dec);
		return ok;
	}
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	const char *given = h + 7;
	while (*given == ' ')
		given++;
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
	if (resp->status == 401) { /* scripts send a bearer token; a browser asks its user (the viewer) */
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"evald\", charset=\"UTF-8\"");
	}
	if (resp->retry_after > 0) {
		char ra[16];
		snprintf(ra, sizeof ra, "%d", resp->retry_after);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	enum MHD_Result ok = MHD_queue_response(c, (unsigned)(resp->status ? resp->status : 200), r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg, bool openai)
{
	ev_serve_response resp = {0};
	if (openai)
		ev_serve_openai_error(&resp, status, NULL, NULL, msg);
	else
		ev_serve_json_error(&resp, status, NULL, msg);
	enum MHD_Result ok = send_response(c, &resp);
	free(resp.body);
	return ok;
}

/* ---- the access handler ----------------------------------------------------------- */

static enum MHD_Result answer(struct MHD_Connection *c, const char *method, const char *url, int rc,
                              ev_serve_response *resp, bool openai);

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
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		if (ci && ci->socket_context) {
			pthread_mutex_lock(&s->clock_mu);
			((conn_clock *)ci->socket_context)->in_request = true;
			pthread_mutex_unlock(&s->clock_mu);
		}
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
			return send_error(c, cs->early_status, cs->early_msg, cs->route ? cs->route->openai_errors
			                                                                         : !strncmp(url, "/v1/", 4));
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
	if (cs->finish) { /* resumed (or done before it could suspend): answer now */
		ev_serve_response resp = {0};
		ev_error_clear();
		int (*finish)(void *, ev_serve_response *) = cs->finish;
		cs->finish = NULL;
		return answer(c, method, url, finish(cs->defer, &resp), &resp, cs->route->openai_errors);
	}
	if (cs->too_big)
		return send_error(c, 413, cs->body.max ? "request body over this route's limit" : "this request takes no body",
		                  cs->route->openai_errors);

	ev_serve_request req = {method, url, c, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	                                                                    MHD_HTTP_HEADER_CONTENT_TYPE),
	                        cs->body.data ? cs->body.data : "", cs->body.len, cs->authorized, s->opt.max_body};
	ev_serve_response resp = {0};
	ev_error_clear();
	int rc = cs->route->fn(cs->route->ctx, &req, &resp);
	if (!rc && resp.defer) {
		cs->defer = resp.defer;
		cs->finish = resp.finish;
		cs->release = resp.release;
		return MHD_YES; /* the handler suspended the connection, or its work is done already */
	}
	return answer(c, method, url, rc, &resp, cs->route->openai_errors);
}

/* Sends a handler's answer: its response, or the JSON error for rc. */
static enum MHD_Result answer(struct MHD_Connection *c, const char *method, const char *url, int rc,
                              ev_serve_response *resp0, bool openai)
{
	ev_serve_response resp = *resp0;
	if (rc) {
		int status = ev_serve_http_status(rc);
		const char *msg = ev_error_msg();
		if (status == 500) {
			ev_log_error("%s %s: %s", method, url, msg);
			msg = "internal error (see the server's log)";
		}
		if (openai)
			ev_serve_openai_error(&resp, status, NULL, status == 404 && strstr(msg, "not served here") ? "model_not_found"
			                                                                                        : NULL,
			                      msg);
		else
			ev_serve_json_error(&resp, status, NULL, msg);
	}
	enum MHD_Result ok = send_response(c, &resp);
	free(resp.body);
	return ok;
}

void ev_serve_suspend(struct MHD_Connection *conn) { MHD_suspend_connection(conn); }

void ev_serve_resume(struct MHD_Connection *conn) { MHD_resume_connection(conn); }

void ev_serve_cap_send_buffer(struct MHD_Connection *conn, int bytes)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		(void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

bool ev_serve_client_gone(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return true;
	char b;
	ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	ev_serve *s = cls;
	(void)toe;
	conn_state *cs = *con_cls;
	if (cs) {
		if (cs->release)
			cs->release(cs->defer);
		ev_buf_free(&cs->body);
		free(cs);
		*con_cls = NULL;
	}
	/* the next request on a kept-alive connection gets its own deadline */
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context) {
		pthread_mutex_lock(&s->clock_mu);
		conn_clock *k = ci->socket_context;
		k->in_request = false;
		k->deadline = ev_now() + KEEPALIVE_HEAD_S;
		pthread_mutex_unlock(&s->clock_mu);
	}
}

/* Connections come and go: each gets a clock for its request head. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
	ev_serve *s = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		conn_clock *k = ci ? calloc(1, sizeof *k) : NULL;
		if (!k)
			return; /* no deadline for this one; MHD's idle timeout still holds */
		k->fd = ci->connect_fd;
		k->deadline = ev_now() + s->opt.header_timeout;
		pthread_mutex_lock(&s->clock_mu);
		k->next = s->clocks;
		if (s->clocks)
			s->clocks->prev = k;
		s->clocks = k;
		pthread_mutex_unlock(&s->clock_mu);
		*socket_context = k;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
		/* MHD closes the socket after this returns: the reaper, which
		 * shuts sockets down under the same lock, never sees a reused fd */
		conn_clock *k = *socket_context;
		pthread_mutex_lock(&s->clock_mu);
		if (k->prev)
			k->prev->next = k->next;
		else
			s->clocks = k->next;
		if (k->next)
			k->next->prev = k->prev;
		pthread_mutex_unlock(&s->clock_mu);
		free(k);
		*socket_context = NULL;
	}
}

/* Closes connections that have not sent a request head by their deadline
 * (shutdown: MHD sees the end of the stream and cleans up as usual). */
static void *reaper(void *arg)
{
	ev_serve *s = arg;
	pthread_mutex_lock(&s->clock_mu);
	while (!s->stopping) {
		double now = ev_now();
		for (conn_clock *k = s->clocks; k; k = k->next) {
			if (!k->in_request && now > k->deadline) {
				shutdown(k->fd, SHUT_RDWR);
				k->deadline = INFINITY;
				s->reaped++;
				ev_log_debug("serve: closed a connection that sent no request head in time");
			}
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->clock_cv, &s->clock_mu, &ts);
	}
	pthread_mutex_unlock(&s->clock_mu);
	return NULL;
}

/* The connection limit: what the file limit allows (raising the soft
 * limit to the hard one), at most 10,000, never below 64. */
static unsigned connection_limit(int asked)
{
	struct rlimit rl;
	rlim_t have = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
			if (want > rl.rlim_cur) {
				struct rlimit r2 = {want, rl.rlim_max};
				if (setrlimit(RLIMIT_NOFILE, &r2) == 0)
					rl.rlim_cur = want;
			}
		}
		have = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
	}
	long room = (long)have - 128; /* the tracker, the checkpoint, the pool's own */
	long n = asked > 0 ? asked : 10000;
	if (n > room)
		n = room;
	return (unsigned)(n < 64 ? 64 : n);
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
	if (s->opt.header_timeout <= 0)
		s->opt.header_timeout = 10;
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
	pthread_mutex_init(&s->clock_mu, NULL);
	pthread_cond_init(&s->clock_cv, NULL);
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
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
	if (s->ipv6)
		flags |= MHD_USE_IPv6;
	unsigned limit = connection_limit(s->opt.max_connections);
	struct MHD_OptionItem ops[] = {
		{MHD_OPTION_SOCK_ADDR, 0, &s->addr},
		{MHD_OPTION_CONNECTION_TIMEOUT, 60, NULL},
		{MHD_OPTION_CONNECTION_LIMIT, (intptr_t)limit, NULL},
		{MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)(void *)on_completed, s},
		{MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)(void *)on_connection, s},
		{MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)(void *)on_mhd_log, s},
		/* one thread: no pool (MHD warns about a pool of 0 or 1) */
		{s->opt.threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, s->opt.threads, NULL},
		{MHD_OPTION_END, 0, NULL},
	};
	s->daemon = MHD_start_daemon(flags, (uint16_t)s->opt.port, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, ops,
	                             MHD_OPTION_END);
	if (!s->daemon)
		return ev_error_set(EV_E_IO, "serve: cannot listen on %s port %d (in use, or not permitted)", s->opt.host,
		                    s->opt.port);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : s->opt.port;
	if (pthread_create(&s->reaper, NULL, reaper, s) == 0)
		s->reaper_started = true;
	else
		ev_log_warn("serve: no thread for the header deadline; only the idle timeout applies");
	ev_log_debug("serve: at most %u connections, request heads within %d s", limit, s->opt.header_timeout);
	return 0;
}

int ev_serve_port(const ev_serve *s) { return s ? s->port : 0; }

void ev_serve_free(ev_serve *s)
{
	if (!s)
		return;
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (s->reaper_started) {
		pthread_mutex_lock(&s->clock_mu);
		s->stopping = true;
		pthread_cond_broadcast(&s->clock_cv);
		pthread_mutex_unlock(&s->clock_mu);
		pthread_join(s->reaper, NULL);
	}
	pthread_mutex_destroy(&s->clock_mu);
	pthread_cond_destroy(&s->clock_cv);
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
	bool print_port, public_read;
	/* --model DIR: the engine's OpenAI-compatible endpoints (serve_openai.c) */
	ev_engine_backend_options eng;
	ev_engine_flags engine;
	ev_serve_openai_options oai;
	int64_t stream_buffer;
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
	EV_O_INT("--header-timeout", T, srv.header_timeout, 1, 3600, "SECONDS",
	         "a new connection must send its request head within this"),
	EV_O_INT("--max-connections", T, srv.max_connections, 64, 100000, "N",
	         "open connections at most (default: what the file limit allows, up to 10000)"),
	EV_O_FLAG("--allow-remote", T, srv.allow_remote, "permit a non-loopback --host"),
	EV_O_FLAG("--print-port", T, print_port, "print the port once listening (for scripts)"),
	EV_O_FLAG("--public", T, public_read,
	          "let anyone read the viewer's pages (/view); its actions still need the token"),
	EV_O_STR("--model", T, eng.model_dir, "PATH", "also serve this checkpoint (a folder or a GGUF file) on /v1 (OpenAI-compatible)"),
	EV_O_STR("--model-name", T, eng.model_name, "NAME", "the served model's name (default: the folder's or file's)"),
	EV_O_CHOICE("--chat-template", T, eng.chat_template, "chatml|llama3|none", "the chat template (default: the checkpoint's)"),
	EV_O_INT("--max-batch", T, eng.max_batch, 1, 1024, "N", "sequences generated together"),
	EV_O_INT("--max-queue", T, oai.max_queue, 1, 100000, "N",
	         "generation requests admitted at once; past it 503 with Retry-After"),
	EV_O_STR("--image-root", T, oai.image_root, "DIR",
	         "clients may name image files under DIR (image_url file://PATH); else no file is read for them"),
	EV_O_INT("--stream-buffer", T, stream_buffer, 4096, 1e12, "BYTES",
	         "how far a streaming client may fall behind before its request is cancelled (256 MiB)"),
	EV_ENGINE_OPTS(T, engine),
	EV_O_END,
};
#undef T

static const ev_cmd_spec serve_spec = {
	.name = "serve",
	.synopsis = "[--host ADDR] [--port PORT] [--token-env VAR] [--model PATH] [OPTIONS]",
	.about = "Serves the tracker API: POST /api/issues (bearer token), GET /api/issues[/N],\n"
	         "GET /api/regressions, GET /api/proposals. With --model, also the checkpoint on\n"
	         "/v1/chat/completions, /v1/completions (\"stream\": true: SSE) and /v1/models.",
	.opts = serve_opts_table,
};

int ev_cmd_serve(const ev_cli *cli, int argc, char **argv)
{
	serve_opts so = {.srv = EV_SERVE_OPTIONS_INIT, .token_env = "EVALD_API_TOKEN",
	                 .eng = EV_ENGINE_BACKEND_OPTIONS_INIT, .oai = EV_SERVE_OPENAI_OPTIONS_INIT};
	ev_engine_flags_init(&so.engine);
	int prc = ev_opt_parse(&serve_spec, &so, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	ev_serve_options opt = so.srv;
	const char *token_env = so.token_env, *token = so.token;
	size_t max_attachment = (size_t)so.max_attachment;
	bool print_port = so.print_port;
	ev_engine_backend_options eng = so.eng;
	if (so.stream_buffer)
		so.oai.stream_buffer = (size_t)so.stream_buffer;
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
	ev_serve_view *view = NULL;
	int ret = EV_EXIT_FAIL;
	if (ev_serve_new(&srv, &opt) != 0) {
		ret = ev_error_code() == EV_E_UNSAFE || ev_error_code() == EV_E_INVALID ? EV_EXIT_USAGE : EV_EXIT_FAIL;
		ev_cli_fail("serve");
		goto done;
	}
	if (ev_serve_api_new(&api, cli->db_path, max_attachment) != 0 || ev_serve_api_register(srv, api) != 0 ||
	    ev_serve_runs_register(srv, api) != 0 ||
	    ev_serve_view_new(&view, api, opt.token, so.public_read) != 0 || ev_serve_view_register(srv, view) != 0) {
		ev_cli_fail("serve");
		goto done;
	}
	/* The engine's OpenAI-compatible endpoints (/v1/models,
	 * /v1/chat/completions, /v1/completions; serve_openai.c) on the same server. */
	if (eng.model_dir && (ev_serve_openai_new(&oai, &eng, &so.oai) != 0 || ev_serve_openai_register(srv, oai) != 0)) {
		ev_cli_fail("serve");
		goto done;
	}
	if (ev_serve_start(srv) != 0) {
		ev_cli_fail("serve");
		goto done;
	}
	if (print_port) {
		printf("%d\n", ev_serve_port(srv));
	} else {
		const char *lb = strchr(opt.host, ':') ? "[" : "", *rb = strchr(opt.host, ':') ? "]" : "";
		printf("evald: serving %s on http://%s%s%s:%d/api/ and the viewer on /view/ (Ctrl-C stops)\n", cli->db_path,
		       lb, opt.host, rb, ev_serve_port(srv));
		if (oai) /* the base URL an OpenAI client takes */
			printf("evald: model %s at http://%s%s%s:%d/v1\n", ev_serve_openai_model_name(oai), lb, opt.host, rb,
			       ev_serve_port(srv));
	}
	fflush(stdout);
	int sig = 0;
	sigwait(&stop, &sig);
	ev_log_info("serve: signal %d, stopping", sig);
	ret = 0;
done:
	/* generations end first (their suspended connections resumed with an
	 * error), then the server, which waits for requests in flight before
	 * the tracker closes */
	ev_serve_openai_stop(oai);
	ev_serve_free(srv);
	ev_serve_view_free(view);
	ev_serve_api_free(api);
	ev_serve_openai_free(oai);
	if (token_copy) {
		OPENSSL_cleanse(token_copy, strlen(token_copy));
		free(token_copy);
	}
	return ret;
}
