/*
 * The OpenAI-compatible HTTP backend: chat-completions requests over one
 * libcurl multi handle, driven from the caller's thread by poll().
 *
 * Each submitted request becomes a transfer that goes queued -> active ->
 * (waiting -> queued -> active)* -> ready. At most `concurrency` are
 * active; connections stay open in the multi handle's pool and are reused
 * (keep-alive), and attempts go round-robin over the base URLs. A failed
 * attempt is retried, after exponential backoff times a random jitter (or
 * the server's Retry-After, capped), when it was a 429, a 5xx, a network
 * error, a timeout or a 2xx whose body is not a completion; other 4xx are
 * permanent. See runners/README.md for the whole policy.
 */
#include "runners/runners_int.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

typedef struct xfer {
	struct xfer *next; /* in the start queue */
	void *cookie;
	char *body;
	size_t body_len;
	CURL *easy;        /* while active */
	int slot;          /* index in openai.active while active */
	ev_buf resp;
	int attempts;
	double attempt_start;
	double due;        /* when waiting: the time to start again */
	long retry_after;  /* seconds from the last response, or -1 */
	bool last_timeout;
	bool over_cap;
	char err[320];     /* the last failure */
	/* a scoring request (<base>/completions): where each continuation's
	 * tokens lie, in characters of its prompt */
	size_t n_cont;
	long ctx_chars;
	long *full_chars;
	char *model;
} xfer;

typedef struct {
	char **urls;
	char **score_urls; /* <base>/completions, for scoring requests */
	size_t n_urls, rr;
	struct curl_slist *headers;
	CURLM *multi;
	CURL **idle;       /* easy handles kept for reuse */
	int n_idle;
	int concurrency, max_retries;
	long timeout_ms;
	double backoff_base, backoff_max;
	size_t max_response;
	xfer *q_head, *q_tail;
	xfer **waiting;    /* room for every pending transfer */
	int n_waiting, cap_waiting;
	xfer **active;     /* concurrency slots */
	int n_active;
	ev_completion *ready;
	int n_ready, cap_ready;
	int pending;
	ev_rng rng;
	char *served_model; /* the one model /models listed (the first URL's), or NULL */
} openai;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void xfer_free(xfer *x)
{
	if (!x)
		return;
	free(x->body);
	ev_buf_free(&x->resp);
	free(x->full_chars);
	free(x->model);
	free(x);
}

static void queue_push(openai *o, xfer *x)
{
	x->next = NULL;
	if (o->q_tail)
		o->q_tail->next = x;
	else
		o->q_head = x;
	o->q_tail = x;
}

static xfer *queue_pop(openai *o)
{
	xfer *x = o->q_head;
	if (x) {
		o->q_head = x->next;
		if (!o->q_head)
			o->q_tail = NULL;
		x->next = NULL;
	}
	return x;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t len = size * n;
	if (ev_buf_append(&x->resp, p, len)) {
		x->over_cap = true;
		return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
	}
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t len = size * n;
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		x->retry_after = -1; /* a new response (after a 100 Continue, say) */
	} else if (len > 12 && !strncasecmp(p, "Retry-After:", 12)) {
		/* Seconds only; the HTTP-date form falls back to the backoff. */
		char tmp[32];
		size_t m = len - 12 < sizeof tmp - 1 ? len - 12 : sizeof tmp - 1;
		memcpy(tmp, p + 12, m);
		tmp[m] = 0;
		char *end;
		long v = strtol(tmp, &end, 10);
		while (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t')
			end++;
		if (end != tmp && !*end && v >= 0)
			x->retry_after = v;
	}
	return len;
}

static int start(openai *o, xfer *x)
{
	CURL *e = o->n_idle ? o->idle[--o->n_idle] : curl_easy_init();
	if (!e)
		return ev_error_set(EV_E_NOMEM, "curl_easy_init failed");
	ev_buf_reset(&x->resp);
	x->retry_after = -1;
	x->over_cap = false;
	x->attempts++;
	x->attempt_start = ev_now();
	size_t at = o->rr++ % o->n_urls;
	const char *url = x->n_cont ? o->score_urls[at] : o->urls[at];
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms < 30000 ? o->timeout_ms : 30000L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	CURLMcode mc = curl_multi_add_handle(o->multi, e);
	if (mc != CURLM_OK) {
		curl_easy_cleanup(e);
		return ev_error_set(EV_E_BACKEND, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
	}
	x->easy = e;
	x->slot = o->n_active;
	o->active[o->n_active++] = x;
	return 0;
}

static int push_ready(openai *o, ev_completion *c)
{
	if (o->n_ready == o->cap_ready) {
		int cap = o->cap_ready ? o->cap_ready * 2 : 64;
		ev_completion *r = realloc(o->ready, (size_t)cap * sizeof *r);
		if (!r)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		o->ready = r;
		o->cap_ready = cap;
	}
	o->ready[o->n_ready++] = *c;
	return 0;
}

/* Hands a finished transfer's outcome to the ready list and frees it. */
static int finish(openai *o, xfer *x, ev_completion *c)
{
	c->cookie = x->cookie;
	c->attempts = x->attempts;
	int rc = push_ready(o, c);
	if (rc)
		ev_completion_clear(c);
	xfer_free(x);
	return rc;
}

/* A 400 that says the prompt is longer than the model's context, in the
 * words vLLM, SGLang, llama.cpp's server, TGI and OpenAI use. */
static bool context_overflow(const char *body, size_t len)
{
	static const char *const says[] = {"maximum context length", "context_length_exceeded", "exceeds the context",
	                                   "exceed_context_size", "longer than the model's context",
	                                   "pass the model's context", "input is too long", "too many tokens",
	                                   "exceeds maximum", "Input validation error: `inputs` tokens + `max_new_tokens`"};
	if (!body)
		return false;
	for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
		if (memmem(body, len, says[i], strlen(says[i])))
			return true;
	return false;
}

static int fail(openai *o, xfer *x, bool permanent)
{
	ev_completion c;
	memset(&c, 0, sizeof c);
	c.status = x->last_timeout ? EV_COMPLETION_TIMEOUT : EV_COMPLETION_ERROR;
	if (permanent)
		c.error = ev_asprintf("%s (not retried)", x->err);
	else
		c.error = ev_asprintf("%s after %d attempt%s", x->err, x->attempts, x->attempts == 1 ? "" : "s");
	return finish(o, x, &c);
}

static double backoff(openai *o, const xfer *x)
{
	if (x->retry_after >= 0) {
		double ra = (double)x->retry_after < o->backoff_max ? (double)x->retry_after : o->backoff_max;
		return ra * (1.0 + 0.1 * ev_rng_uniform(&o->rng));
	}
	double d = o->backoff_base * pow(2.0, x->attempts - 1);
	d *= 0.5 + ev_rng_uniform(&o->rng); /* jitter in [0.5, 1.5) */
	return d < o->backoff_max ? d : o->backoff_max;
}

static int retry_or_fail(openai *o, xfer *x)
{
	if (x->attempts > o->max_retries)
		return fail(o, x, false);
	x->due = ev_now() + backoff(o, x);
	o->waiting[o->n_waiting++] = x; /* room: one slot a pending transfer */
	return 0;
}

/* Classifies one finished attempt. */
/* The completion of a scoring request from its legacy completions answer. */
static int scored(const xfer *x, ev_completion *c)
{
	ev_loglik l[EV_MAX_CONTINUATIONS];
	const char *body = x->resp.data ? x->resp.data : "";
	int rc = ev_scoring_from_legacy(l, x->n_cont, body, x->resp.len, x->ctx_chars, x->full_chars);
	if (rc)
		return rc;
	cJSON *root = cJSON_Parse(body);
	double prompt = ev_json_num(cJSON_GetObjectItemCaseSensitive(root, "usage"), "prompt_tokens", 0);
	cJSON_Delete(root);
	return ev_scoring_complete(c, l, x->n_cont, x->model, (int)prompt);
}

static int done_attempt(openai *o, xfer *x, CURLcode res)
{
	double now = ev_now();
	x->last_timeout = false;
	if (res == CURLE_OPERATION_TIMEDOUT) {
		x->last_timeout = true;
		snprintf(x->err, sizeof x->err, "timeout (%.3g s per attempt)", (double)o->timeout_ms / 1000.0);
		return retry_or_fail(o, x);
	}
	if (res == CURLE_WRITE_ERROR && x->over_cap) {
		snprintf(x->err, sizeof x->err, "response body over the limit of %zu bytes", o->max_response);
		return fail(o, x, true);
	}
	if (res != CURLE_OK) {
		snprintf(x->err, sizeof x->err, "network error: %s", curl_easy_strerror(res));
		return retry_or_fail(o, x);
	}
	long code = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300) {
		ev_completion c;
		memset(&c, 0, sizeof c);
		if (x->n_cont && scored(x, &c) == 0) {
			c.status = EV_COMPLETION_OK;
			c.latency_s = now - x->attempt_start;
			return finish(o, x, &c);
		}
		if (!x->n_cont && ev_completion_from_json(&c, x->resp.data ? x->resp.data : "", x->resp.len) == 0) {
			c.status = EV_COMPLETION_OK;
			c.latency_s = now - x->attempt_start;
			return finish(o, x, &c);
		}
		ev_completion_clear(&c);
		snprintf(x->err, sizeof x->err, "HTTP %ld with a bad body (%.200s)", code, ev_error_msg());
		return retry_or_fail(o, x);
	}
	if (code == 429 || code >= 500) {
		snprintf(x->err, sizeof x->err, "HTTP %ld", code);
		return retry_or_fail(o, x);
	}
	snprintf(x->err, sizeof x->err, "HTTP %ld: %.200s", code, x->resp.data ? x->resp.data : "");
	if (code == 400 && context_overflow(x->resp.data, x->resp.len)) {
		ev_completion c;
		memset(&c, 0, sizeof c);
		c.status = EV_COMPLETION_CONTEXT;
		c.error = ev_strdup(x->err);
		return finish(o, x, &c);
	}
	return fail(o, x, true);
}

/* Takes finished attempts off the multi handle. */
static int drain(openai *o)
{
	CURLMsg *m;
	int left, rc = 0;
	while ((m = curl_multi_info_read(o->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *e = m->easy_handle;
		CURLcode res = m->data.result;
		xfer *x = NULL;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
		curl_multi_remove_handle(o->multi, e);
		xfer *last = o->active[--o->n_active];
		o->active[x->slot] = last;
		last->slot = x->slot;
		int r = done_attempt(o, x, res);
		if (!rc)
			rc = r;
		/* x may be freed now; the easy handle goes back to the pool. */
		if (o->n_idle < o->concurrency)
			o->idle[o->n_idle++] = e;
		else
			curl_easy_cleanup(e);
	}
	return rc;
}

/* Moves due retries to the queue and starts what fits. Returns the time
 * of the next due retry (or INFINITY). */
static double schedule(openai *o, int *rc)
{
	double now = ev_now(), next = INFINITY;
	for (int i = 0; i < o->n_waiting;) {
		xfer *x = o->waiting[i];
		if (x->due <= now) {
			o->waiting[i] = o->waiting[--o->n_waiting];
			queue_push(o, x);
		} else {
			if (x->due < next)
				next = x->due;
			i++;
		}
	}
	while (o->n_active < o->concurrency && o->q_head) {
		xfer *x = queue_pop(o);
		if (start(o, x)) {
			snprintf(x->err, sizeof x->err, "%s", ev_error_msg());
			int r = fail(o, x, true);
			if (r && !*rc)
				*rc = r;
		}
	}
	return next;
}

static int op_poll(void *impl, ev_completion *out, int max, double wait_s)
{
	openai *o = impl;
	double deadline = ev_now() + wait_s;
	int rc = 0;
	for (;;) {
		double next_due = schedule(o, &rc);
		int running = 0;
		CURLMcode mc = curl_multi_perform(o->multi, &running);
		if (mc != CURLM_OK && !rc)
			rc = ev_error_set(EV_E_BACKEND, "curl_multi_perform: %s", curl_multi_strerror(mc));
		int r = drain(o);
		if (r && !rc)
			rc = r;
		if (rc || o->n_ready > 0 || o->pending == 0)
			break;
		double now = ev_now();
		if (now >= deadline)
			break;
		/* A retry that fell due, or a slot freed for a queued transfer. */
		if (o->q_head && o->n_active < o->concurrency)
			continue;
		double until = (next_due < deadline ? next_due : deadline) - now;
		int ms = until <= 0 ? 0 : (int)ceil(until * 1000.0);
		mc = curl_multi_poll(o->multi, NULL, 0, ms, NULL);
		if (mc != CURLM_OK) {
			rc = ev_error_set(EV_E_BACKEND, "curl_multi_poll: %s", curl_multi_strerror(mc));
			break;
		}
	}
	if (rc)
		return rc;
	int n = o->n_ready < max ? o->n_ready : max;
	if (n == 0)
		return 0;
	memcpy(out, o->ready, (size_t)n * sizeof *out);
	memmove(o->ready, o->ready + n, (size_t)(o->n_ready - n) * sizeof *out);
	o->n_ready -= n;
	o->pending -= n;
	return n;
}

/* Where the continuations' tokens will lie in the echoed prompts. */
static int scoring_spans(xfer *x, const ev_request *req)
{
	char *ctx = NULL;
	size_t clen = 0;
	int rc = ev_request_context(&ctx, &clen, req);
	if (rc)
		return rc;
	x->n_cont = req->n_continuations;
	x->ctx_chars = (long)ev_utf8_chars(ctx, clen);
	long all = (long)ev_utf8_chars(ctx, strlen(ctx));
	free(ctx);
	x->model = ev_strdup(req->model ? req->model : "");
	if (!(x->full_chars = calloc(x->n_cont, sizeof *x->full_chars)) || !x->model)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t k = 0; k < x->n_cont; k++) {
		const char *c = req->continuations[k] ? req->continuations[k] : "";
		x->full_chars[k] = all + (long)ev_utf8_chars(c, strlen(c));
	}
	return 0;
}

static int op_submit(void *impl, const ev_request *req)
{
	openai *o = impl;
	char *body = NULL;
	int rc = ev_request_to_json(&body, req, false);
	if (rc)
		return rc;
	/* Room in `waiting` for every pending transfer, so retries never fail
	 * to be scheduled. */
	if (o->pending + 1 > o->cap_waiting) {
		int cap = o->cap_waiting ? o->cap_waiting * 2 : 64;
		xfer **w = realloc(o->waiting, (size_t)cap * sizeof *w);
		if (!w) {
			free(body);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
		o->waiting = w;
		o->cap_waiting = cap;
	}
	xfer *x = calloc(1, sizeof *x);
	if (!x) {
		free(body);
		free(x);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	x->cookie = req->cookie;
	x->body = body;
	x->body_len = strlen(body);
	if (req->n_continuations && (rc = scoring_spans(x, req))) {
		xfer_free(x);
		return rc;
	}
	ev_buf_init(&x->resp, o->max_response);
	queue_push(o, x);
	o->pending++;
	return 0;
}

static int op_capacity(void *impl) { return ((openai *)impl)->concurrency; }
static int op_pending(void *impl) { return ((openai *)impl)->pending; }

static void op_free(void *impl)
{
	openai *o = impl;
	if (!o)
		return;
	free(o->served_model);
	for (int i = 0; i < o->n_active; i++) {
		curl_multi_remove_handle(o->multi, o->active[i]->easy);
		curl_easy_cleanup(o->active[i]->easy);
		xfer_free(o->active[i]);
	}
	for (xfer *x; (x = queue_pop(o));)
		xfer_free(x);
	for (int i = 0; i < o->n_waiting; i++)
		xfer_free(o->waiting[i]);
	for (int i = 0; i < o->n_ready; i++)
		ev_completion_clear(&o->ready[i]);
	for (int i = 0; i < o->n_idle; i++)
		curl_easy_cleanup(o->idle[i]);
	if (o->multi)
		curl_multi_cleanup(o->multi);
	curl_slist_free_all(o->headers);
	for (size_t i = 0; i < o->n_urls; i++) {
		free(o->urls[i]);
		free(o->score_urls[i]);
	}
	free(o->urls);
	free(o->score_urls);
	free(o->idle);
	free(o->active);
	free(o->waiting);
	free(o->ready);
	free(o);
}

static const ev_backend_ops openai_ops = {
	.name = "openai",
	.capacity = op_capacity,
	.submit = op_submit,
	.poll = op_poll,
	.pending = op_pending,
	.free = op_free,
};

static int add_header(openai *o, const char *h)
{
	struct curl_slist *l = curl_slist_append(o->headers, h);
	if (!l)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	o->headers = l;
	return 0;
}

static int check_options(const ev_openai_options *opt)
{
	if (!opt->base_urls || opt->n_urls == 0)
		return ev_error_set(EV_E_INVALID, "openai backend: no base URL");
	for (size_t i = 0; i < opt->n_urls; i++) {
		const char *u = opt->base_urls[i];
		if (!u || !(ev_str_starts(u, "http://") || ev_str_starts(u, "https://")) || strlen(u) > 2000 ||
		    strpbrk(u, " \r\n\t"))
			return ev_error_set(EV_E_INVALID, "openai backend: base URL %zu: expected http(s)://host[:port]/path, got \"%.200s\"",
			                    i, u ? u : "(null)");
	}
	for (size_t i = 0; i < opt->n_headers; i++) {
		const char *h = opt->headers ? opt->headers[i] : NULL;
		if (!h || !strchr(h, ':') || strpbrk(h, "\r\n") || h[0] == ':')
			return ev_error_set(EV_E_INVALID, "openai backend: header %zu: expected \"Name: value\" on one line", i);
	}
	if (opt->concurrency < 1 || opt->concurrency > 4096)
		return ev_error_set(EV_E_INVALID, "openai backend: concurrency %d: expected 1..4096", opt->concurrency);
	if (!(opt->timeout_s > 0) || opt->timeout_s > 86400)
		return ev_error_set(EV_E_INVALID, "openai backend: timeout %g s: expected (0, 86400]", opt->timeout_s);
	if (opt->max_retries < 0 || opt->max_retries > 100)
		return ev_error_set(EV_E_INVALID, "openai backend: max_retries %d: expected 0..100", opt->max_retries);
	if (!(opt->backoff_base_s >= 0) || !(opt->backoff_max_s >= 0) || opt->backoff_max_s > 3600)
		return ev_error_set(EV_E_INVALID, "openai backend: backoff: expected 0 <= base, 0 <= max <= 3600 s");
	if (opt->max_response_bytes < 1024)
		return ev_error_set(EV_E_INVALID, "openai backend: max_response_bytes %zu: expected at least 1024",
		                    opt->max_response_bytes);
	return 0;
}

static size_t probe_sink(char *p, size_t size, size_t n, void *ud)
{
	(void)ev_buf_append(ud, p, size * n); /* past the cap: the identity is the URL's alone */
	return size * n;
}

/* The stable fields of a /models answer (ids and where they come from; not
 * "created", which some servers stamp on every request); *only gets the id
 * when it lists exactly one model. */
static void model_identity(ev_buf *ident, const char *body, size_t len, char **only)
{
	cJSON *j = NULL;
	if (!body || ev_json_parse(&j, body, len, "models")) {
		ev_error_clear();
		return;
	}
	static const char *const keys[] = {"id", "root", "parent", "owned_by", "max_model_len", NULL};
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "data"))
	{
		for (size_t k = 0; keys[k]; k++) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, keys[k]);
			char *t = v ? ev_json_print(v) : NULL;
			ev_buf_printf(ident, "%s=%s;", keys[k], t ? t : "");
			free(t);
		}
		ev_buf_putc(ident, '\n');
	}
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
	if (only && !*only && cJSON_GetArraySize(data) == 1) {
		const char *id = ev_json_str(cJSON_GetArrayItem(data, 0), "id", NULL);
		if (id && *id && strlen(id) < 512)
			*only = ev_strdup(id);
	}
	cJSON_Delete(j);
}

/* One GET <base>/models with the backend's headers. */
static int probe(openai *o, const char *base, const char *api_key_env, ev_buf *ident)
{
	size_t n = strlen(base);
	while (n && base[n - 1] == '/')
		n--;
	char *url = ev_asprintf("%.*s/models", (int)n, base);
	/* the URL as shown: a user:password@ part is never printed */
	char shown[300];
	const char *scheme = strstr(base, "://"), *at = scheme ? strchr(scheme + 3, '@') : NULL;
	const char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
	if (at && (!slash || at < slash))
		snprintf(shown, sizeof shown, "%.*s[redacted]%.200s", (int)(scheme + 3 - base), base, at);
	else
		snprintf(shown, sizeof shown, "%.280s", base);
	CURL *c = url ? curl_easy_init() : NULL;
	if (!c) {
		free(url);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, o->headers);
	ev_buf body = EV_BUF_INIT((size_t)1 << 20);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, probe_sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode cr = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	free(url);
	if (cr == CURLE_OK && code == 200)
		model_identity(ident, body.data, body.len, &o->served_model);
	ev_buf_free(&body);
	if (cr != CURLE_OK && cr != CURLE_WRITE_ERROR)
		return ev_error_set(EV_E_BACKEND, "--model %s: cannot reach the server (%s): is it running, and is the URL right?",
		                    shown, curl_easy_strerror(cr));
	if (code == 401 || code == 403)
		return ev_error_set(EV_E_BACKEND,
		                    "--model %s: the server refused the credentials (HTTP %ld): give them with --header "
		                    "'Authorization: Bearer ...' or $%s",
		                    shown, code, api_key_env ? api_key_env : "OPENAI_API_KEY");
	return 0;
}

const char *ev_backend_openai_served_model(const ev_backend *b)
{
	if (!b || !b->ops || strcmp(b->ops->name, "openai"))
		return NULL;
	return ((const openai *)b->impl)->served_model;
}

int ev_backend_openai_new(ev_backend **out, const ev_openai_options *opt)
{
	*out = NULL;
	int rc = check_options(opt);
	if (rc)
		return rc;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return ev_error_set(EV_E_BACKEND, "curl_global_init: %s", curl_easy_strerror(curl_init_rc));
	openai *o = calloc(1, sizeof *o);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	o->concurrency = opt->concurrency;
	o->max_retries = opt->max_retries;
	o->timeout_ms = (long)ceil(opt->timeout_s * 1000.0);
	o->backoff_base = opt->backoff_base_s;
	o->backoff_max = opt->backoff_max_s;
	o->max_response = opt->max_response_bytes;
	ev_rng_seed(&o->rng, (uint64_t)(ev_wall_time() * 1e6) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)o);
	o->urls = calloc(opt->n_urls, sizeof *o->urls);
	o->score_urls = calloc(opt->n_urls, sizeof *o->score_urls);
	o->idle = calloc((size_t)opt->concurrency, sizeof *o->idle);
	o->active = calloc((size_t)opt->concurrency, sizeof *o->active);
	o->multi = curl_multi_init();
	if (!o->urls || !o->score_urls || !o->idle || !o->active || !o->multi)
		goto nomem;
	for (size_t i = 0; i < opt->n_urls; i++) {
		const char *u = opt->base_urls[i];
		size_t n = strlen(u);
		while (n && u[n - 1] == '/')
			n--;
		o->urls[i] = ev_asprintf("%.*s/chat/completions", (int)n, u);
		o->score_urls[i] = ev_asprintf("%.*s/completions", (int)n, u);
		o->n_urls++;
		if (!o->urls[i] || !o->score_urls[i])
			goto nomem;
	}
	/* "Expect:" stops curl from waiting for a 100 Continue on big bodies. */
	if ((rc = add_header(o, "Content-Type: application/json")) || (rc = add_header(o, "Expect:")))
		goto done;
	const char *key = opt->api_key_env ? getenv(opt->api_key_env) : NULL;
	if (key && *key) {
		if (strpbrk(key, "\r\n")) {
			rc = ev_error_set(EV_E_INVALID, "openai backend: $%s holds a line break", opt->api_key_env);
			goto done;
		}
		char *h = ev_asprintf("Authorization: Bearer %s", key);
		rc = h ? add_header(o, h) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(h);
		if (rc)
			goto done;
	}
	for (size_t i = 0; i < opt->n_headers; i++)
		if ((rc = add_header(o, opt->headers[i])))
			goto done;
	long maxconn = (long)opt->concurrency * (long)opt->n_urls + 4;
	curl_multi_setopt(o->multi, CURLMOPT_MAXCONNECTS, maxconn < 10000 ? maxconn : 10000L);
	ev_buf ident = EV_BUF_INIT((size_t)4 << 20);
	for (size_t i = 0; i < opt->n_urls; i++) {
		ev_buf_printf(&ident, "url=%s\n", opt->base_urls[i]);
		if (opt->probe && (rc = probe(o, opt->base_urls[i], opt->api_key_env, &ident))) {
			ev_buf_free(&ident);
			goto done;
		}
	}
	rc = ev_backend_wrap(out, &openai_ops, o);
	if (!rc) {
		ev_backend_set_identity(*out, ident.data ? ident.data : "", ident.len);
		/* the server preprocesses; evald only decides what it sends */
		char fp[512];
		snprintf(fp, sizeof fp,
		         "{\"backend\":\"openai\",\"images\":\"inline data: URLs of the files' bytes, not resized\","
		         "\"video\":\"sampled frames as images with [S seconds] labels\",\"video_sample_fps\":1,"
		         "\"video_max_frames\":%d}",
		         EV_VIDEO_MAX_FRAMES);
		if ((rc = ev_backend_set_preprocessing(*out, fp))) {
			ev_backend_free(*out);
			*out = NULL;
		}
	}
	ev_buf_free(&ident);
	return rc;
nomem:
	rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	op_free(o);
	return rc;
}
