/*
 * runners/router.c: a backend that routes each request to one of several
 * models (their own backends), by a table from a sample's category to a
 * model, with a default. The runner asks ev_backend_route first, so the
 * request it hashes, caches and stores already names the model that
 * answers; submit then hands it to that model's backend, and poll gathers
 * completions from all of them.
 */
#include "runners/runners_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"

typedef struct {
	ev_backend **child;
	char **name;  /* the model name each is asked for */
	char **label; /* how a result names it (answered_by) */
	size_t n;
	ev_route_table routes;
	size_t next;  /* where poll starts, in turn */
} router;

static void router_free(void *impl)
{
	router *r = impl;
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		ev_backend_free(r->child[i]);
		free(r->name[i]);
		free(r->label[i]);
	}
	free(r->child), free(r->name), free(r->label);
	ev_route_table_clear(&r->routes);
	free(r);
}

static int router_capacity(void *impl)
{
	router *r = impl;
	long c = 0;
	for (size_t i = 0; i < r->n; i++)
		c += ev_backend_capacity(r->child[i]);
	return c > 1 << 20 ? 1 << 20 : (int)c;
}

static int router_pending(void *impl)
{
	router *r = impl;
	int p = 0;
	for (size_t i = 0; i < r->n; i++)
		p += ev_backend_pending(r->child[i]);
	return p;
}

static int pick(const router *r, const ev_request *req)
{
	if (req->route > 0 && (size_t)req->route <= r->n)
		return req->route - 1;
	return r->routes.fallback;
}

static int router_submit(void *impl, const ev_request *req)
{
	router *r = impl;
	int i = pick(r, req);
	ev_request q = *req;
	q.model = r->name[i];
	q.route = i + 1;
	return ev_backend_submit(r->child[i], &q);
}

static int router_poll(void *impl, ev_completion *out, int max, double wait_s)
{
	router *r = impl;
	double until = ev_now() + wait_s;
	for (;;) {
		int got = 0;
		for (size_t k = 0; k < r->n && got < max; k++) {
			size_t i = (r->next + k) % r->n;
			if (!ev_backend_pending(r->child[i]))
				continue;
			int n = ev_backend_poll(r->child[i], out + got, max - got, 0);
			if (n < 0)
				return n;
			got += n;
		}
		r->next = (r->next + 1) % r->n;
		if (got || ev_now() >= until || !router_pending(r))
			return got;
		/* nothing yet: wait a little on the busiest model, then look again */
		size_t busy = 0;
		for (size_t i = 1; i < r->n; i++)
			if (ev_backend_pending(r->child[i]) > ev_backend_pending(r->child[busy]))
				busy = i;
		double left = until - ev_now();
		int n = ev_backend_poll(r->child[busy], out, max, left < 0.005 ? left : 0.005);
		if (n)
			return n;
	}
}

static const ev_backend_ops router_ops = {"router", router_capacity, router_submit, router_poll, router_pending,
                                          router_free};

int ev_backend_router_new(ev_backend **out, ev_backend **children, const char *const *names,
                          const char *const *labels, size_t n, ev_route_table *routes)
{
	*out = NULL;
	router *r = calloc(1, sizeof *r);
	int rc = 0;
	if (!r || !(r->child = calloc(n ? n : 1, sizeof *r->child)) || !(r->name = calloc(n ? n : 1, sizeof *r->name)) ||
	    !(r->label = calloc(n ? n : 1, sizeof *r->label)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) { /* the children are ours from here, whatever happens */
		if (r && r->child)
			r->child[i] = children[i];
		else
			ev_backend_free(children[i]);
		children[i] = NULL;
	}
	if (r && r->child)
		r->n = n;
	if (!rc && (n < 2 || n > EV_ROUTE_MAX_MODELS))
		rc = ev_error_set(EV_E_INVALID, "router: %zu models (2 to %d)", n, EV_ROUTE_MAX_MODELS);
	for (size_t i = 0; !rc && i < n; i++)
		if (!(r->name[i] = ev_strdup(names[i] ? names[i] : "")) || !(r->label[i] = ev_strdup(labels[i] ? labels[i] : "")))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc && (size_t)routes->n_models > n)
		rc = ev_error_set(EV_E_INVALID, "router: a route names model %d of only %zu given with --model",
		                  routes->n_models, n);
	if (rc) {
		ev_route_table_clear(routes);
		router_free(r);
		return rc;
	}
	r->routes = *routes;
	memset(routes, 0, sizeof *routes);
	/* identity: what answers is each model and the table that chooses */
	ev_buf id = EV_BUF_INIT(1 << 20);
	for (size_t i = 0; i < n; i++)
		ev_buf_printf(&id, "%zu %s %s\n", i, r->name[i], ev_backend_identity(r->child[i]));
	char *spec = ev_route_table_spec(&r->routes);
	ev_buf_puts(&id, spec ? spec : "");
	free(spec);
	if ((rc = ev_backend_wrap(out, &router_ops, r))) {
		ev_buf_free(&id);
		return rc;
	}
	ev_backend_set_identity(*out, id.data ? id.data : "", id.len);
	ev_buf_free(&id);
	return 0;
}

int ev_backend_route(ev_backend *b, const char *suite, const char *metadata_json, const char **model,
                     const char **label)
{
	if (!b || b->ops != &router_ops)
		return -1;
	router *r = b->impl;
	char category[257];
	if (ev_sample_category(category, sizeof category, suite, metadata_json, r->routes.by))
		ev_error_clear(); /* cut to 256 bytes: still a category */
	int i = ev_route_table_pick(&r->routes, category);
	if (model)
		*model = r->name[i];
	if (label)
		*label = r->label[i];
	return i;
}

/* ---- the table ------------------------------------------------------------ */

void ev_route_table_clear(ev_route_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->key[i]);
	free(t->key), free(t->model), free(t->by);
	memset(t, 0, sizeof *t);
}

int ev_route_table_pick(const ev_route_table *t, const char *key)
{
	for (size_t i = 0; key && i < t->n; i++)
		if (!strcmp(t->key[i], key))
			return t->model[i];
	return t->fallback;
}

static int add_route(ev_route_table *t, const char *key, size_t klen, long model, const char *what)
{
	if (model < 1 || model > EV_ROUTE_MAX_MODELS)
		return ev_error_set(EV_E_INVALID, "%s: model %ld is not within 1..%d (the --model given so many places before)",
		                    what, model, EV_ROUTE_MAX_MODELS);
	if (klen == 1 && key[0] == '*') {
		t->fallback = (int)model - 1;
	} else {
		if (!klen || klen > 256)
			return ev_error_set(EV_E_INVALID, "%s: a category of 1 to 256 bytes", what);
		for (size_t i = 0; i < t->n; i++)
			if (strlen(t->key[i]) == klen && !memcmp(t->key[i], key, klen))
				return ev_error_set(EV_E_INVALID, "%s: category '%.*s' routed twice", what, (int)klen, key);
		if (t->n == 4096)
			return ev_error_set(EV_E_LIMIT, "%s: more than 4096 routes", what);
		char **k = realloc(t->key, (t->n + 1) * sizeof *k);
		if (k)
			t->key = k;
		int *m = realloc(t->model, (t->n + 1) * sizeof *m);
		if (m)
			t->model = m;
		if (!k || !m || !(t->key[t->n] = ev_strndup(key, klen)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		t->model[t->n++] = (int)model - 1;
	}
	if ((int)model > t->n_models)
		t->n_models = (int)model;
	return 0;
}

/* {"routes": {"cat": N, ...}, "default": N} */
static int parse_file(ev_route_table *t, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc = ev_file_read(&text, &len, path, (size_t)1 << 22);
	cJSON *root = NULL;
	if (!rc)
		rc = ev_json_parse(&root, text, len, path);
	free(text);
	if (rc)
		return rc;
	const cJSON *routes = cJSON_GetObjectItemCaseSensitive(root, "routes"),
	            *def = cJSON_GetObjectItemCaseSensitive(root, "default"), *x;
	const cJSON *by = cJSON_GetObjectItemCaseSensitive(root, "by");
	if (!cJSON_IsObject(routes) || !cJSON_IsNumber(def) || (by && !cJSON_IsNull(by) && !cJSON_IsString(by)))
		rc = ev_error_set(EV_E_INVALID, "%s: expected {\"by\": KEY, \"routes\": {CATEGORY: N, ...}, \"default\": N}",
		                  path);
	if (!rc && cJSON_IsString(by) && (!by->valuestring[0] || strlen(by->valuestring) > 128))
		rc = ev_error_set(EV_E_INVALID, "%s: by: a metadata key of 1 to 128 bytes", path);
	if (!rc && cJSON_IsString(by) && !(t->by = ev_strdup(by->valuestring)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = add_route(t, "*", 1, (long)def->valuedouble, path);
	cJSON_ArrayForEach(x, routes)
	{
		if (rc)
			break;
		if (!cJSON_IsNumber(x) || x->valuedouble != (long)x->valuedouble)
			rc = ev_error_set(EV_E_INVALID, "%s: routes.%.64s: expected a model number", path, x->string);
		else
			rc = add_route(t, x->string, strlen(x->string), (long)x->valuedouble, path);
	}
	cJSON_Delete(root);
	return rc;
}

int ev_route_table_parse(ev_route_table *t, const char *spec)
{
	memset(t, 0, sizeof *t);
	int rc = 0;
	if (!spec || !*spec)
		rc = ev_error_set(EV_E_INVALID, "--router: empty");
	else if (!strchr(spec, '=') && (rc = parse_file(t, spec)) && access(spec, F_OK))
		rc = ev_error_wrap(rc, "'%.200s' is neither CATEGORY=N,...,*=N nor a router file", spec);
	for (const char *p = spec; !rc && p && *p && strchr(spec, '=');) {
		size_t k = strcspn(p, ",");
		const char *eq = memchr(p, '=', k);
		if (!eq) {
			rc = ev_error_set(EV_E_INVALID, "--router: '%.*s' is not CATEGORY=N", (int)k, p);
			break;
		}
		if (eq - p == 2 && !memcmp(p, "by", 2)) { /* by=KEY: where categories come from */
			if (t->by || k - 3 < 1 || k - 3 > 128) {
				rc = ev_error_set(EV_E_INVALID, "--router: by=KEY once, KEY 1 to 128 bytes");
				break;
			}
			if (!(t->by = ev_strndup(eq + 1, k - 3))) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				break;
			}
			p += k + (p[k] == ',');
			continue;
		}
		char *end = NULL;
		long m = strtol(eq + 1, &end, 10);
		if (end != p + k || eq + 1 == end) {
			rc = ev_error_set(EV_E_INVALID, "--router: '%.*s': N must be a whole number", (int)k, p);
			break;
		}
		rc = add_route(t, p, (size_t)(eq - p), m, "--router");
		p += k + (p[k] == ',');
	}
	if (rc)
		ev_route_table_clear(t);
	return rc;
}

char *ev_route_table_spec(const ev_route_table *t)
{
	ev_buf b = EV_BUF_INIT(1 << 24);
	if (t->by)
		ev_buf_printf(&b, "by=%s,", t->by);
	for (size_t i = 0; i < t->n; i++)
		ev_buf_printf(&b, "%s=%d,", t->key[i], t->model[i] + 1);
	ev_buf_printf(&b, "*=%d", t->fallback + 1);
	return ev_buf_detach(&b, NULL);
}
