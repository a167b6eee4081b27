/*
 * evald/eval.c: one evaluation as a function (evald/eval.h): the settings'
 * option table and stored form, and the pipeline suites -> backend ->
 * runner -> tracker -> summary that `run`, `calibrate` and `watch` share.
 */
#include "evald/eval.h"


#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runners/runners.h"
#include "evald/remote.h"

/* --shard K/N */
static int shard_fn(void *opts, const ev_opt *o, const char *name, const char *v)
{
	ev_eval_config *c = opts;
	int k, n;
	char extra;
	if (sscanf(v, "%d/%d%c", &k, &n, &extra) != 2 || n < 1 || k < 0 || k >= n)
		return ev_error_set(EV_E_INVALID, "%s takes K/N with 0 <= K < N (got '%.100s')", name, v);
	c->shard_k = k, c->shard_n = n;
	return 0;
}

/* --header 'Name: value' */
static int header_fn(void *opts, const ev_opt *o, const char *name, const char *v)
{
	ev_eval_config *c = opts;
	if (!strchr(v, ':'))
		return ev_error_set(EV_E_INVALID, "%s takes 'Name: value'", name);
	if (c->n_headers >= EV_EVAL_MAX_LIST)
		return ev_error_set(EV_E_LIMIT, "%s: at most %d", name, EV_EVAL_MAX_LIST);
	c->headers[c->n_headers++] = v;
	return 0;
}

#define T ev_eval_config
/* Rows with a key are stored with the run (and read back on resume) by
 * ev_opt_to_json; the checker, the shard, the headers and the engine
 * settings are stored below in their own shapes. */
const ev_opt ev_eval_opts[] = {
	{.name = "--model", .kind = EV_OPT_STRS, .off = offsetof(T, models), .size = sizeof(((T *)0)->models),
	 .count_off = offsetof(T, n_models), .meta = "URL|PATH", .key = "models",
	 .help = "an OpenAI-compatible base URL (several share the load) or a checkpoint: a folder or a GGUF file"},
	{.name = "--model-name", .kind = EV_OPT_STR, .off = offsetof(T, model_name), .meta = "NAME",
	 .key = "model_name", .help = "the name runs are filed under (default: the model a URL serves, else the --model)"},
	{.name = "--suite", .kind = EV_OPT_STRS, .off = offsetof(T, suites), .size = sizeof(((T *)0)->suites),
	 .count_off = offsetof(T, n_suites), .meta = "PATH", .key = "suites",
	 .help = "a suite folder, archive or .jsonl (none: the embedded default suite)"},
	{.name = "--concurrency", .kind = EV_OPT_INT, .off = offsetof(T, concurrency), .size = sizeof(int), .lo = 1,
	 .hi = 4096, .meta = "N", .key = "concurrency", .help = "requests in flight"},
	{.name = "--timeout", .kind = EV_OPT_NUM, .off = offsetof(T, timeout_s), .lo = 0, .hi = 1e7, .meta = "S",
	 .key = "timeout", .help = "seconds a request may take"},
	{.name = "--retries", .kind = EV_OPT_INT, .off = offsetof(T, retries), .size = sizeof(int), .lo = 0, .hi = 1000,
	 .meta = "N", .key = "retries", .help = "tries again after a backend error or timeout"},
	EV_O_FN("--header", EV_OPT_VALUE, "'K: V'", "an HTTP header sent with every request", header_fn),
	{.name = "--api-key-env", .kind = EV_OPT_STR, .off = offsetof(T, api_key_env), .meta = "VAR",
	 .key = "api_key_env", .help = "the environment variable holding the API key"},
	{.name = "--limit", .kind = EV_OPT_INT, .off = offsetof(T, limit), .size = sizeof(int64_t), .lo = 0,
	 .hi = 1e9, .meta = "N", .key = "limit", .help = "the first N samples of each suite (0: all)"},
	{.name = "--epochs", .kind = EV_OPT_INT, .off = offsetof(T, epochs), .size = sizeof(int), .lo = 0, .hi = 100000,
	 .meta = "K", .key = "epochs", .help = "answers per sample (pass@k, pass^k); 0: the suite's own"},
	EV_O_FN("--shard", EV_OPT_VALUE, "K/N", "evaluate shard K of N (`evald merge` joins them)", shard_fn),
	{.name = "--max-tokens", .kind = EV_OPT_INT, .off = offsetof(T, max_tokens), .size = sizeof(int), .lo = 0,
	 .hi = 1e9, .meta = "N", .key = "max_tokens", .help = "completion tokens per answer (0: the suite's own)"},
	{.name = "--temperature", .kind = EV_OPT_NUM, .off = offsetof(T, temperature), .has_off = offsetof(T, has_temperature),
	 .lo = 0, .hi = 100, .meta = "T", .key = "temperature", .help = "sampling temperature (default: the suite's)"},
	{.name = "--top-p", .kind = EV_OPT_NUM, .off = offsetof(T, top_p), .has_off = offsetof(T, has_top_p), .lo = 0,
	 .hi = 1, .meta = "P", .key = "top_p", .help = "nucleus sampling (default: the suite's)"},
	{.name = "--seed", .kind = EV_OPT_INT, .off = offsetof(T, seed), .size = sizeof(int64_t), .has_off = offsetof(T, has_seed),
	 .lo = 0, .hi = 9e15, .meta = "S", .key = "seed", .help = "sampling seed"},
	{.name = "--no-cache", .kind = EV_OPT_FLAG, .off = offsetof(T, no_cache), .key = "no_cache",
	 .help = "ask the model again even where the response cache has the answer"},
	{.name = "--effort", .kind = EV_OPT_STR, .off = offsetof(T, effort), .meta = "LEVELS", .key = "effort",
	 .help = "thinking effort as a run dimension: each suite at each level, e.g. none,low,medium,high (sent as "
	         "reasoning_effort)"},
	{.name = "--router", .kind = EV_OPT_STR, .off = offsetof(T, router), .meta = "ROUTES", .key = "router",
	 .help = "route samples between the --model given: CATEGORY=N,...,*=N (N their place, 1-based; the "
	         "category is metadata category, else task, else the suite) or a file from evald route --save-router"},
	{.name = "--chat-template", .kind = EV_OPT_CHOICE, .off = offsetof(T, chat_template), .choices = "chatml|llama3|none",
	 .key = "chat_template", .help = "a checkpoint's chat template (default: its own; none: plain text)"},
	EV_CHECKER_OPTS(T, checker),
	EV_ENGINE_OPTS(T, engine),
	EV_O_END,
};
#undef T

static const ev_cmd_spec config_spec = {.name = "run", .opts = ev_eval_opts};

void ev_eval_config_init(ev_eval_config *c)
{
	memset(c, 0, sizeof *c);
	c->concurrency = 16;
	c->timeout_s = 300;
	c->retries = 6;
	c->api_key_env = "OPENAI_API_KEY";
	c->shard_n = 1;
	c->temperature = -1;
	c->top_p = -1;
	c->checker = (ev_checker_flags)EV_CHECKER_FLAGS_INIT;
	ev_engine_flags_init(&c->engine);
}

void ev_eval_config_clear(ev_eval_config *c)
{
	free(c->checker_spec);
	c->checker_spec = NULL;
}

/* ---- secrets: never stored -------------------------------------------------------
 *
 * A header's value ("Authorization: Bearer ...") and the password of a URL
 * ("https://user:pw@host") are kept out of everything stored with a run
 * (its settings, its model source): they are replaced by REDACTED. On
 * resume they are given again (--header with the same name, --model). */

#define REDACTED "[redacted]"

/* The URL with the password of its user info (or a bare user, which is
 * often a token) replaced; malloc'd. */
char *ev_eval_redact_url(const char *url)
{
	const char *scheme = strstr(url, "://");
	const char *host = scheme ? scheme + 3 : url;
	const char *end = host + strcspn(host, "/?#");
	const char *at = memchr(host, '@', (size_t)(end - host));
	if (!at)
		return ev_strdup(url);
	const char *colon = memchr(host, ':', (size_t)(at - host));
	if (colon)
		return ev_asprintf("%.*s:" REDACTED "%s", (int)(colon - url), url, at);
	return ev_asprintf("%.*s" REDACTED "%s", (int)(host - url), url, at);
}

static cJSON *redacted_models(const ev_eval_config *c)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < c->n_models; i++) {
		char *r = ev_eval_redact_url(c->models[i]);
		cJSON_AddItemToArray(a, cJSON_CreateString(r ? r : ""));
		free(r);
	}
	return a;
}

static cJSON *redacted_headers(const ev_eval_config *c)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < c->n_headers; i++) {
		const char *colon = strchr(c->headers[i], ':');
		char *r = ev_asprintf("%.*s: " REDACTED, (int)(colon ? colon - c->headers[i] : 0), c->headers[i]);
		cJSON_AddItemToArray(a, cJSON_CreateString(r ? r : ""));
		free(r);
	}
	return a;
}

/* The length of a header's name ("Authorization" of "Authorization: x"). */
static size_t header_name_len(const char *h)
{
	const char *colon = strchr(h, ':');
	return colon ? (size_t)(colon - h) : strlen(h);
}

/* On resume: what the caller gave again replaces what was redacted; every
 * secret must be back. */
static int restore_secrets(ev_eval_config *stored, const ev_eval_config *given)
{
	if (given->n_models) {
		memcpy(stored->models, given->models, sizeof stored->models);
		stored->n_models = given->n_models;
	}
	for (int g = 0; g < given->n_headers; g++) {
		size_t n = header_name_len(given->headers[g]);
		int k = 0;
		while (k < stored->n_headers && (header_name_len(stored->headers[k]) != n ||
		                                 strncasecmp(stored->headers[k], given->headers[g], n)))
			k++;
		if (k == EV_EVAL_MAX_LIST)
			return ev_error_set(EV_E_LIMIT, "--header: too many headers");
		stored->headers[k] = given->headers[g];
		if (k == stored->n_headers)
			stored->n_headers++;
	}
	for (int i = 0; i < stored->n_models; i++)
		if (strstr(stored->models[i], REDACTED))
			return ev_error_set(EV_E_INVALID, "the run's model URL had a password, which is not stored: give "
			                    "--model again with it");
	for (int k = 0; k < stored->n_headers; k++)
		if (strstr(stored->headers[k], REDACTED))
			return ev_error_set(EV_E_INVALID, "header %.*s was sent with the run but its value is not stored: give "
			                    "it again with --header '%.*s: ...'",
			                    (int)header_name_len(stored->headers[k]), stored->headers[k],
			                    (int)header_name_len(stored->headers[k]), stored->headers[k]);
	return 0;
}

int ev_eval_config_to_json(const ev_eval_config *c, char **out)
{
	*out = NULL;
	cJSON *o = cJSON_CreateObject();
	int rc = o ? ev_opt_to_json(&config_spec, c, o) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc) {
		cJSON *spec = c->checker_spec ? cJSON_Parse(c->checker_spec) : NULL;
		if (spec)
			cJSON_AddItemToObject(o, "checker", spec);
		cJSON_ReplaceItemInObjectCaseSensitive(o, "models", redacted_models(c));
		cJSON_AddItemToObject(o, "headers", redacted_headers(c));
		cJSON_AddNumberToObject(o, "shard_k", c->shard_k);
		cJSON_AddNumberToObject(o, "shard_n", c->shard_n);
		cJSON *eng = ev_engine_flags_json(&c->engine);
		if (eng)
			cJSON_AddItemToObject(o, "engine", eng);
		if (!(*out = ev_json_print(o)))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	cJSON_Delete(o);
	return rc;
}

int ev_eval_config_from_json(ev_eval_config *c, const cJSON *j)
{
	int rc = ev_opt_from_json(&config_spec, c, j);
	if (rc)
		return rc;
	const cJSON *v;
	c->n_headers = 0;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "headers")) if (cJSON_IsString(v) &&
	                                                                           c->n_headers < EV_EVAL_MAX_LIST)
		c->headers[c->n_headers++] = v->valuestring;
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "checker");
	free(c->checker_spec);
	c->checker_spec = cJSON_IsObject(spec) ? ev_json_print(spec) : NULL;
	double k = ev_json_num(j, "shard_k", 0), n = ev_json_num(j, "shard_n", 1);
	if (!(n >= 1 && n <= 1e6 && k >= 0 && k < n))
		return ev_error_set(EV_E_INVALID, "stored configuration: shard %g/%g", k, n);
	c->shard_k = (int)k, c->shard_n = (int)n;
	const cJSON *eng = cJSON_GetObjectItemCaseSensitive(j, "engine");
	if (cJSON_IsObject(eng) && (rc = ev_engine_flags_from_json(&c->engine, eng)))
		return rc;
	if (!c->n_models || !c->n_suites)
		return ev_error_set(EV_E_INVALID, "the stored run config has no models or suites");
	return 0;
}

void ev_eval_outcome_clear(ev_eval_outcome *o)
{
	free(o->summary_json);
	o->summary_json = NULL;
}

/* ---- resume: the results already stored ---------------------------------------- */

static char *done_key(const char *suite, const char *id, int epoch)
{
	return ev_asprintf("%s\x1f%s\x1f%d", suite, id, epoch);
}

static int collect_done(void *ctx, const ev_result *r)
{
	if (ev_result_is_error(r))
		return 0; /* errors are tried again */
	char *k = done_key(r->suite, r->sample_id, r->epoch);
	int rc = k ? ev_strset_add(ctx, k, strlen(k), NULL, NULL) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(k);
	return rc;
}

/* ---- the sink: the runner's results into the tracker ------------------------------ */

typedef struct {
	ev_tracker *t;
	int64_t run_id;
	ev_strset *done;
	bool use_cache;
	volatile sig_atomic_t *stop;
	struct ev_remote *remote;
} sink_ctx;

static bool sink_is_done(void *ctx, const char *suite, const char *id, int epoch)
{
	sink_ctx *s = ctx;
	char *k = done_key(suite, id, epoch);
	bool has = k && ev_strset_find(s->done, k, strlen(k)) >= 0;
	free(k);
	return has;
}

static int sink_cache_get(void *ctx, const char *key, char **body)
{
	sink_ctx *s = ctx;
	if (!s->use_cache)
		return EV_E_NOTFOUND;
	return ev_tracker_cache_get(s->t, key, body);
}

static int sink_cache_put(void *ctx, const char *key, const char *body)
{
	sink_ctx *s = ctx;
	return s->use_cache ? ev_tracker_cache_put(s->t, key, body) : 0;
}

/* A failed commit anywhere (a result's, the cache's, a tick's) drops the
 * results pending in it: the run stops then, rather than end with some of
 * them missing under a confident summary. */
static int lost_check(ev_tracker *t)
{
	const char *why;
	long lost = ev_tracker_lost_writes(t, &why);
	if (!lost)
		return 0;
	return ev_error_set(EV_E_DB, "%ld writes were lost when the tracker could not commit them (%s); the run stops "
	                    "here, and resume redoes what was lost", lost, why);
}

static int sink_result(void *ctx, const ev_result *r)
{
	sink_ctx *s = ctx;
	int rc = lost_check(s->t);
	if (!rc)
		rc = ev_tracker_result_put(s->t, s->run_id, r);
	if (!rc)
		rc = lost_check(s->t);
	if (!rc && s->remote)
		rc = ev_remote_add(s->remote, s->run_id, r);
	if (rc)
		return rc;
	if (s->stop && *s->stop)
		return ev_error_set(EV_E_INVALID, "interrupted");
	return 0;
}

static void sink_tick(void *ctx)
{
	sink_ctx *s = ctx;
	if (ev_tracker_tick(s->t))
		ev_log_warn("tracker: %s", ev_error_msg());
}

/* ---- the pieces of one evaluation --------------------------------------------------- */

typedef struct {
	ev_tracker *t;
	ev_eval_config *c;
	const ev_eval_options *o;
	ev_suite *suites[EV_EVAL_MAX_LIST];
	ev_checker *checkers[EV_EVAL_MAX_LIST];
	/* the suites run: each --suite once, or once a level with --effort */
	int n;
	const char *path[EV_EVAL_MAX_LIST];
	char effort[EV_EVAL_MAX_LIST][16];
	cJSON *suites_info;
	char *tmpdir;
	long total;
	long done, cached; /* results this invocation produced; how many from the cache */
	char *own_name;    /* the served model's name, when --model-name was not given */
	char *router_spec; /* --router as a spec string (a file read), stored with the run */
	int max_epochs;
	ev_backend *backend;
	ev_run_row row;       /* the stored run, on resume */
	cJSON *stored;        /* its configuration */
	ev_eval_config own;   /* read from it (strings point into it) */
} eval_state;

static long planned(const ev_suite *s, long limit, int shard_k, int shard_n, int epochs)
{
	long n = 0;
	for (size_t i = 0; i < s->n_samples && (limit <= 0 || (long)i < limit); i++)
		if (ev_shard_owns(s->samples[i].id, shard_k, shard_n))
			n++;
	return n * epochs;
}

/* The run's settings applied to a loaded suite. */
static void apply_generation(ev_suite *s, const ev_eval_config *c)
{
	if (c->epochs > 0)
		s->gen.epochs = c->epochs;
	if (s->gen.epochs < 1)
		s->gen.epochs = 1;
	if (c->max_tokens > 0)
		s->gen.max_tokens = c->max_tokens;
	if (c->temperature >= 0)
		s->gen.temperature = c->temperature;
	if (c->top_p >= 0)
		s->gen.top_p = c->top_p;
	if (c->has_seed)
		s->gen.has_seed = true, s->gen.seed = c->seed;
}

/* ---- thinking effort as a run dimension ----------------------------------------------- */

/* A suite's results folded for the effort table: token and latency sums,
 * and each sample's mean score over its epochs (rows arrive ordered by
 * suite, sample, epoch, so samples are sorted by id for pairing). */
typedef struct {
	char *id;
	double sum;
	int n;
} eff_sample;

typedef struct {
	char *suite;
	double completion, thinking, latency;
	long n;
	eff_sample *s;
	size_t ns, cap;
} eff_suite;

typedef struct {
	eff_suite *v;
	size_t n, cap;
} effort_ctx;

static int effort_tokens_cb(void *ctx, const ev_result *r)
{
	effort_ctx *e = ctx;
	if (ev_result_is_error(r))
		return 0;
	eff_suite *u = NULL;
	for (size_t i = e->n; i-- > 0 && !u;)
		if (!strcmp(e->v[i].suite, r->suite))
			u = &e->v[i];
	if (!u) {
		if (e->n == e->cap) {
			size_t cap = e->cap ? 2 * e->cap : 8;
			eff_suite *v = realloc(e->v, cap * sizeof *v);
			if (!v)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			e->v = v, e->cap = cap;
		}
		u = &e->v[e->n];
		memset(u, 0, sizeof *u);
		if (!(u->suite = ev_strdup(r->suite)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		e->n++;
	}
	u->completion += r->completion_tokens;
	u->thinking += r->thinking_tokens;
	u->latency += r->latency_s;
	u->n++;
	if (!u->ns || strcmp(u->s[u->ns - 1].id, r->sample_id)) {
		if (u->ns == u->cap) {
			size_t cap = u->cap ? 2 * u->cap : 64;
			eff_sample *v = realloc(u->s, cap * sizeof *v);
			if (!v)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			u->s = v, u->cap = cap;
		}
		u->s[u->ns] = (eff_sample){ev_strdup(r->sample_id), 0, 0};
		if (!u->s[u->ns].id)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		u->ns++;
	}
	u->s[u->ns - 1].sum += r->score;
	u->s[u->ns - 1].n++;
	return 0;
}

static void effort_ctx_clear(effort_ctx *e)
{
	for (size_t i = 0; i < e->n; i++) {
		for (size_t k = 0; k < e->v[i].ns; k++)
			free(e->v[i].s[k].id);
		free(e->v[i].s);
		free(e->v[i].suite);
	}
	free(e->v);
}

static const eff_suite *eff_find(const effort_ctx *e, const char *suite)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->v[i].suite, suite))
			return &e->v[i];
	return NULL;
}

/* Level b against level a on the samples both have: mean of the per-sample
 * score differences, its paired bootstrap 95% interval and the sign-flip
 * p-value. */
static int effort_pair(cJSON *into, const char *level_a, const eff_suite *a, const eff_suite *b)
{
	size_t cap = a && b ? (a->ns < b->ns ? a->ns : b->ns) : 0, n = 0;
	double *x = malloc((cap ? cap : 1) * sizeof *x), *y = malloc((cap ? cap : 1) * sizeof *y);
	if (!x || !y) {
		free(x), free(y);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	for (size_t i = 0, k = 0; a && b && i < a->ns && k < b->ns;) {
		int c = strcmp(a->s[i].id, b->s[k].id);
		if (c < 0) {
			i++;
		} else if (c > 0) {
			k++;
		} else {
			x[n] = a->s[i].sum / a->s[i].n, y[n] = b->s[k].sum / b->s[k].n;
			n++, i++, k++;
		}
	}
	double d = 0, lo = 0, hi = 0;
	for (size_t i = 0; i < n; i++)
		d += (y[i] - x[i]) / (double)n;
	int rc = ev_paired_bootstrap_ci(&lo, &hi, x, y, n, 1, 0);
	double p = n ? ev_paired_sign_flip_p(x, y, n, 1, 0) : 1;
	cJSON *o = rc ? NULL : cJSON_AddObjectToObject(into, "vs_previous");
	if (o) {
		cJSON_AddStringToObject(o, "level", level_a);
		cJSON_AddNumberToObject(o, "n", (double)n);
		cJSON_AddNumberToObject(o, "diff", d);
		cJSON_AddNumberToObject(o, "ci_low", lo);
		cJSON_AddNumberToObject(o, "ci_high", hi);
		cJSON_AddNumberToObject(o, "p", p);
	}
	free(x), free(y);
	return rc;
}

/* With --effort: per suite, each level's score (with its CI, from the
 * summary), mean completion, thinking and answer tokens and latency, the
 * paired difference from the level before, and whether token use rises
 * with the levels in the order given (a backend that ignores the setting
 * does not); added to the summary as "effort" and told on stderr. */
static int effort_summary(eval_state *st, effort_ctx *ep, cJSON *sum)
{
	effort_ctx e = *ep;
	int rc = 0;
	cJSON *eff = rc ? NULL : cJSON_CreateObject(), *suites = eff ? cJSON_AddArrayToObject(eff, "suites") : NULL;
	for (int i = 0; !rc && i < st->n; i++) {
		if (i && st->path[i] == st->path[i - 1])
			continue; /* one entry a --suite, its levels together */
		cJSON *o = cJSON_CreateObject(), *pts = cJSON_AddArrayToObject(o, "levels");
		const char *full = st->suites[i]->name, *at = strstr(full, "@effort=");
		char *base = ev_strndup(full, at ? (size_t)(at - full) : strlen(full));
		cJSON_AddStringToObject(o, "name", base ? base : "");
		free(base);
		bool rises = true;
		double prev = -1;
		for (int k = i; !rc && k < st->n && st->path[k] == st->path[i]; k++) {
			const char *nm = st->suites[k]->name;
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "level", st->effort[k]);
			const cJSON *x, *fig = NULL;
			cJSON_ArrayForEach(x, cJSON_GetObjectItem(sum, "suites")) if (!strcmp(ev_json_str(x, "name", ""), nm)) fig = x;
			static const char *const keys[] = {"n", "score", "ci_low", "ci_high"};
			for (size_t q = 0; q < 4; q++) {
				const cJSON *v = cJSON_GetObjectItem(fig, keys[q]);
				if (v)
					cJSON_AddItemToObject(p, keys[q], cJSON_Duplicate(v, 1));
			}
			const eff_suite *u = eff_find(&e, nm);
			double n = u ? (double)u->n : 0, mean = n > 0 ? u->completion / n : 0, think = n > 0 ? u->thinking / n : 0;
			cJSON_AddNumberToObject(p, "completion_tokens", mean);
			cJSON_AddNumberToObject(p, "thinking_tokens", think);
			cJSON_AddNumberToObject(p, "answer_tokens", mean - think);
			cJSON_AddNumberToObject(p, "latency_s", n > 0 ? u->latency / n : 0);
			if (k > i)
				rc = effort_pair(p, st->effort[k - 1], eff_find(&e, st->suites[k - 1]->name), u);
			if (prev >= 0 && !(mean > prev))
				rises = false;
			prev = mean;
			cJSON_AddItemToArray(pts, p);
		}
		cJSON_AddBoolToObject(o, "tokens_rise", rises);
		cJSON_AddItemToArray(suites, o);
		if (!st->o->quiet) {
			fprintf(stderr, "effort on %s:", ev_json_str(o, "name", ""));
			const cJSON *p;
			cJSON_ArrayForEach(p, pts) fprintf(stderr, " %s %.3f (%.0f tokens, %.0f thinking)", ev_json_str(p, "level", ""),
			                                   ev_json_num(p, "score", 0), ev_json_num(p, "completion_tokens", 0),
			                                   ev_json_num(p, "thinking_tokens", 0));
			fprintf(stderr, "\n");
		}
		if (!rises)
			ev_log_warn("%s: completion tokens do not rise with --effort: the backend may ignore reasoning_effort",
			            ev_json_str(o, "name", ""));
	}
	if (!rc) {
		cJSON_AddItemToObject(sum, "effort", eff);
		eff = NULL;
	}
	cJSON_Delete(eff);
	return rc;
}

/* ---- routing between models ------------------------------------------------ */

static int routing_cb(void *ctx, const ev_result *r)
{
	cJSON *models = ctx, *m = cJSON_GetObjectItemCaseSensitive(models, r->answered_by ? r->answered_by : "");
	if (!m && !(m = cJSON_AddArrayToObject(models, r->answered_by ? r->answered_by : "")))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	while (cJSON_GetArraySize(m) < 3)
		cJSON_AddItemToArray(m, cJSON_CreateNumber(0));
	/* [answered, scored, score sum] */
	cJSON *a = cJSON_GetArrayItem(m, 0), *s = cJSON_GetArrayItem(m, 1), *sum = cJSON_GetArrayItem(m, 2);
	cJSON_SetNumberValue(a, a->valuedouble + 1);
	if (!ev_result_is_error(r)) {
		cJSON_SetNumberValue(s, s->valuedouble + 1);
		cJSON_SetNumberValue(sum, sum->valuedouble + r->score);
	}
	return 0;
}

/* With --router: the routes and, per model, the samples it answered and
 * its mean score on them; added to the summary as "routing". */
static int routing_summary(eval_state *st, const cJSON *acc, cJSON *sum)
{
	cJSON *o = cJSON_CreateObject(), *x;
	int rc = o ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON *models = rc ? NULL : cJSON_AddArrayToObject(o, "models");
	if (!rc) {
		cJSON_AddStringToObject(o, "routes", st->c->router);
		cJSON_ArrayForEach(x, acc)
		{
			cJSON *m = cJSON_CreateObject();
			double scored = cJSON_GetArrayItem(x, 1)->valuedouble;
			cJSON_AddStringToObject(m, "model", x->string);
			cJSON_AddNumberToObject(m, "answered", cJSON_GetArrayItem(x, 0)->valuedouble);
			cJSON_AddNumberToObject(m, "scored", scored);
			cJSON_AddNumberToObject(m, "score", scored > 0 ? cJSON_GetArrayItem(x, 2)->valuedouble / scored : 0);
			cJSON_AddItemToArray(models, m);
			if (!st->o->quiet)
				fprintf(stderr, "routed to %s: %.0f samples, score %.3f\n", x->string,
				        cJSON_GetArrayItem(x, 0)->valuedouble, ev_json_num(m, "score", 0));
		}
		cJSON_AddItemToObject(sum, "routing", o);
		o = NULL;
	}
	cJSON_Delete(o);
	return rc;
}

/* ---- multi-agent samples ---------------------------------------------------------- */

static int agents_cb(void *ctx, const ev_result *r)
{
	if (!r->agents_json || ev_result_is_error(r))
		return 0;
	cJSON *acc = ctx, *a = cJSON_Parse(r->agents_json), *x, *v;
	cJSON_ArrayForEach(x, a)
	{
		cJSON *m = cJSON_GetObjectItemCaseSensitive(acc, x->string);
		if (!m && (m = cJSON_AddObjectToObject(acc, x->string)))
			cJSON_AddNumberToObject(m, "samples", 0);
		if (!m)
			break;
		cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "samples");
		cJSON_SetNumberValue(n, n->valuedouble + 1);
		cJSON_ArrayForEach(v, x)
		{
			cJSON *t = cJSON_GetObjectItemCaseSensitive(m, v->string);
			if (!t)
				t = cJSON_AddNumberToObject(m, v->string, 0);
			if (t && cJSON_IsNumber(v))
				cJSON_SetNumberValue(t, t->valuedouble + v->valuedouble);
		}
	}
	cJSON_Delete(a);
	return 0;
}

/* With multi-agent samples: per agent, the samples it took part in and its
 * turns, tokens, tool calls and delegations over them (sums), added to the
 * summary as "agents". */
static void agents_summary(eval_state *st, cJSON *acc, cJSON *sum)
{
	cJSON *x;
	if (!st->o->quiet)
		cJSON_ArrayForEach(x, acc) fprintf(stderr, "agent %s: %.0f samples, %.0f turns, %.0f completion tokens, %.0f tool calls\n",
		                                   x->string, ev_json_num(x, "samples", 0), ev_json_num(x, "turns", 0),
		                                   ev_json_num(x, "completion_tokens", 0), ev_json_num(x, "tool_calls", 0));
	cJSON_AddItemToObject(sum, "agents", acc);
}

/* What --effort, --router and multi-agent samples add to the summary
 * ("effort", "routing", "agents"), from one pass over the results. */
typedef struct {
	effort_ctx *effort;     /* with --effort */
	cJSON *routing, *agents; /* routing with --router */
} extras_ctx;

static int extras_cb(void *ctx, const ev_result *r)
{
	extras_ctx *x = ctx;
	int rc = x->effort ? effort_tokens_cb(x->effort, r) : 0;
	if (!rc && x->routing)
		rc = routing_cb(x->routing, r);
	return rc ? rc : agents_cb(x->agents, r);
}

static int summary_extras(eval_state *st, int64_t run_id, char **summary_json)
{
	bool effort = false;
	for (int i = 0; i < st->n; i++)
		effort = effort || st->effort[i][0];
	effort_ctx e = {0};
	extras_ctx x = {effort ? &e : NULL, st->c->router ? cJSON_CreateObject() : NULL, cJSON_CreateObject()};
	cJSON *sum = cJSON_Parse(*summary_json);
	int rc = sum && x.agents && (!st->c->router || x.routing) ? ev_tracker_results_each(st->t, run_id, extras_cb, &x)
	                                                          : ev_error_set(EV_E_NOMEM, "out of memory");
	bool added = false;
	if (!rc && effort)
		rc = effort_summary(st, &e, sum), added = true;
	if (!rc && x.routing)
		rc = routing_summary(st, x.routing, sum), added = true;
	if (!rc && cJSON_GetArraySize(x.agents)) {
		agents_summary(st, x.agents, sum);
		x.agents = NULL, added = true;
	}
	char *text = !rc && added ? ev_json_print(sum) : NULL;
	if (!rc && added && !text)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (text) {
		free(*summary_json);
		*summary_json = text;
	}
	effort_ctx_clear(&e);
	cJSON_Delete(x.routing), cJSON_Delete(x.agents), cJSON_Delete(sum);
	return rc;
}

/* The suites to run: each --suite, or each at every --effort level. */
static int plan_suites(eval_state *st)
{
	ev_eval_config *c = st->c;
	st->n = 0;
	char levels[8][16];
	int nl = 0;
	if (c->effort && *c->effort) {
		const char *p = c->effort;
		while (*p) {
			size_t k = strcspn(p, ",");
			if (!k || k >= 16 || nl == 8)
				return ev_error_set(EV_E_INVALID, "--effort: up to 8 comma-separated levels of 1 to 15 characters");
			for (size_t q = 0; q < k; q++)
				if (!(p[q] >= 'a' && p[q] <= 'z') && !(p[q] >= '0' && p[q] <= '9') && p[q] != '-' && p[q] != '_')
					return ev_error_set(EV_E_INVALID, "--effort: level '%.*s' (letters, digits, - and _)", (int)k, p);
			memcpy(levels[nl], p, k);
			levels[nl++][k] = 0;
			p += k + (p[k] == ',');
		}
	}
	for (int i = 0; i < c->n_suites; i++)
		for (int l = 0; l < (nl ? nl : 1); l++) {
			if (st->n == EV_EVAL_MAX_LIST)
				return ev_error_set(EV_E_LIMIT, "at most %d suites x effort levels", EV_EVAL_MAX_LIST);
			st->path[st->n] = c->suites[i];
			snprintf(st->effort[st->n], sizeof st->effort[0], "%s", nl ? levels[l] : "");
			st->n++;
		}
	return 0;
}

/* Loads every suite and its checker, before anything is stored. */
static int load_suites(eval_state *st)
{
	ev_eval_config *c = st->c;
	if (!(st->suites_info = cJSON_CreateArray()))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	st->max_epochs = 1;
	int prc = plan_suites(st);
	if (prc)
		return prc;
	for (int i = 0; i < st->n; i++) {
		int rc = ev_cli_suite_load(&st->suites[i], st->path[i], &st->tmpdir);
		if (rc)
			return ev_error_wrap(rc, "%s", st->path[i]);
		ev_suite *s = st->suites[i];
		if (st->effort[i][0]) { /* its own suite, named for the level */
			char *nm = ev_asprintf("%s@effort=%s", s->name, st->effort[i]);
			if (!nm)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			free(s->name);
			s->name = nm;
			snprintf(s->gen.reasoning_effort, sizeof s->gen.reasoning_effort, "%s", st->effort[i]);
		}
		const char *spec = c->checker_spec ? c->checker_spec
		                   : s->checker_json ? s->checker_json
		                                     : "{\"type\":\"includes\"}";
		if ((rc = ev_checker_new(&st->checkers[i], spec)))
			return ev_error_wrap(rc, "%s", s->name);
		apply_generation(s, c);
		if (s->gen.epochs > st->max_epochs)
			st->max_epochs = s->gen.epochs;
		st->total += planned(s, (long)c->limit, c->shard_k, c->shard_n, s->gen.epochs);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddStringToObject(o, "version", s->version ? s->version : "");
		cJSON_AddStringToObject(o, "kind", s->kind ? s->kind : "");
		cJSON_AddStringToObject(o, "hash", s->content_hash ? s->content_hash : "");
		cJSON_AddStringToObject(o, "path", st->path[i]);
		if (st->effort[i][0])
			cJSON_AddStringToObject(o, "effort", st->effort[i]);
		cJSON_AddNumberToObject(o, "n", (double)s->n_samples);
		/* the checker as it was built: a judge's model and identity too */
		cJSON *ck = cJSON_Parse(ev_checker_spec(st->checkers[i]));
		if (ck)
			cJSON_AddItemToObject(o, "checker", ck);
		cJSON_AddItemToArray(st->suites_info, o);
	}
	return 0;
}

/* On resume the suites must be the ones the run started with. */
static int check_same_suites(eval_state *st, int64_t run_id)
{
	cJSON *old = NULL;
	if (!st->row.suites_json || ev_json_parse(&old, st->row.suites_json, strlen(st->row.suites_json), "run suites")) {
		ev_error_clear();
		return 0;
	}
	int rc = 0;
	for (int i = 0; i < st->n && !rc; i++) {
		const char *h = ev_json_str(cJSON_GetArrayItem(old, i), "hash", "");
		if (*h && st->suites[i]->content_hash && strcmp(h, st->suites[i]->content_hash))
			rc = ev_error_set(EV_E_INVALID, "suite %s changed since run %lld started (content hash differs)",
			                  st->suites[i]->name, (long long)run_id);
	}
	cJSON_Delete(old);
	return rc;
}

/* The backend of models[first .. first + n): a checkpoint folder or GGUF
 * file (one), or OpenAI-compatible URLs sharing the load. */
static int make_one_backend(ev_backend **out, const ev_eval_config *c, int first, int n, const char *name)
{
	const char *m0 = c->models[first];
	bool http = ev_str_starts(m0, "http://") || ev_str_starts(m0, "https://");
	struct stat st;
	size_t ml = strlen(m0);
	bool gguf = ml > 5 && !strcmp(m0 + ml - 5, ".gguf") && stat(m0, &st) == 0 && S_ISREG(st.st_mode);
	if (!http && (gguf || (stat(m0, &st) == 0 && S_ISDIR(st.st_mode)))) {
		if (n > 1)
			return ev_error_set(EV_E_INVALID, "--model: one checkpoint folder at a time");
		ev_engine_backend_options eo = EV_ENGINE_BACKEND_OPTIONS_INIT;
		eo.model_dir = m0;
		eo.model_name = name;
		eo.chat_template = c->chat_template;
		eo.engine = &c->engine.mo;
		return ev_backend_engine_new(out, &eo);
	}
	if (c->engine.n)
		return ev_error_set(EV_E_INVALID, "--attention, --msa-* and --kv-* apply to a checkpoint folder, not to %s",
		                    m0);
	if (!http)
		return ev_error_set(EV_E_INVALID, "--model %s: neither an http(s) URL nor a checkpoint folder", m0);
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = c->models + first;
	o.n_urls = (size_t)n;
	o.api_key_env = c->api_key_env;
	o.headers = c->headers;
	o.n_headers = (size_t)c->n_headers;
	o.concurrency = c->concurrency;
	o.timeout_s = c->timeout_s;
	o.max_retries = c->retries;
	o.probe = true; /* a dead or refusing endpoint fails now, not after every request's retries */
	return ev_backend_openai_new(out, &o);
}

/* With --router: each --model its own backend, asked for the model it
 * serves (else its URL or folder), results labelled by that name. The
 * table from a file is kept as its spec, so the run stores the routing
 * itself. */
static int make_router(eval_state *st)
{
	ev_eval_config *c = st->c;
	ev_route_table t;
	int rc = ev_route_table_parse(&t, c->router);
	if (rc)
		return ev_error_wrap(rc, "--router");
	if (c->n_models < 2 || c->n_models > EV_ROUTE_MAX_MODELS) {
		ev_route_table_clear(&t);
		return ev_error_set(EV_E_INVALID, "--router: give 2 to %d --model, one a model (%d given)", EV_ROUTE_MAX_MODELS,
		                    c->n_models);
	}
	if (t.n_models > c->n_models) {
		int named = t.n_models;
		ev_route_table_clear(&t);
		return ev_error_set(EV_E_INVALID, "--router: a route names model %d of only %d given with --model", named,
		                    c->n_models);
	}
	if (!st->router_spec && !(st->router_spec = ev_route_table_spec(&t))) {
		ev_route_table_clear(&t);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	ev_backend *kids[EV_ROUTE_MAX_MODELS] = {0};
	char *names[EV_ROUTE_MAX_MODELS] = {0};
	for (int i = 0; !rc && i < c->n_models; i++) {
		if ((rc = make_one_backend(&kids[i], c, i, 1, NULL))) {
			ev_error_wrap(rc, "--model %s", c->models[i]);
			break;
		}
		const char *served = ev_backend_openai_served_model(kids[i]);
		names[i] = served ? ev_strdup(served) : ev_eval_redact_url(c->models[i]);
		for (int k = 0; names[i] && k < i; k++)
			if (!strcmp(names[i], names[k])) { /* two servers of one name: told apart by place */
				char *d = ev_asprintf("%s#%d", names[i], i + 1);
				free(names[i]);
				names[i] = d;
			}
		if (!names[i])
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (rc) {
		for (int i = 0; i < c->n_models; i++)
			ev_backend_free(kids[i]), free(names[i]);
		ev_route_table_clear(&t);
		return rc;
	}
	/* a server is asked for the model it serves; labels are the names */
	const char *asked[EV_ROUTE_MAX_MODELS];
	for (int i = 0; i < c->n_models; i++) {
		const char *served = ev_backend_openai_served_model(kids[i]);
		asked[i] = served ? served : names[i];
	}
	char *asked_copy[EV_ROUTE_MAX_MODELS] = {0};
	for (int i = 0; i < c->n_models; i++)
		asked_copy[i] = ev_strdup(asked[i]);
	rc = ev_backend_router_new(&st->backend, kids, (const char *const *)asked_copy, (const char *const *)names,
	                           (size_t)c->n_models, &t);
	if (!rc && !c->model_name) {
		ev_buf b = EV_BUF_INIT(1 << 16);
		ev_buf_puts(&b, "router(");
		for (int i = 0; i < c->n_models; i++)
			ev_buf_printf(&b, "%s%s", i ? "," : "", names[i]);
		ev_buf_puts(&b, ")");
		st->own_name = ev_buf_detach(&b, NULL);
		c->model_name = st->own_name;
	}
	for (int i = 0; i < c->n_models; i++)
		free(names[i]), free(asked_copy[i]);
	if (!rc)
		c->router = st->router_spec;
	return rc;
}

static int make_backend(ev_backend **out, const ev_eval_config *c)
{
	return make_one_backend(out, c, 0, c->n_models, c->model_name);
}

/* True when a sample of the run's suites holds an image or a video. */
static bool multimodal(const eval_state *st)
{
	for (int k = 0; k < st->n; k++)
		for (size_t i = 0; st->suites[k] && i < st->suites[k]->n_samples; i++) {
			const ev_sample *s = &st->suites[k]->samples[i];
			for (size_t m = 0; m < s->n_messages; m++)
				for (size_t p = 0; p < s->messages[m].n_parts; p++)
					if (s->messages[m].parts[p].kind == EV_PART_IMAGE || s->messages[m].parts[p].kind == EV_PART_VIDEO)
						return true;
		}
	return false;
}

/* The backend's preprocessing fingerprint added to a multimodal run's
 * config ("preprocessing"), so that compare can tell two runs apart by it. */
static int add_preprocessing(const eval_state *st, char **config_json)
{
	const char *fp = ev_backend_preprocessing(st->backend);
	if (!fp || !multimodal(st))
		return 0;
	cJSON *o = cJSON_Parse(*config_json), *f = cJSON_Parse(fp);
	char *out = NULL;
	if (o && f && cJSON_AddItemToObject(o, "preprocessing", f)) {
		f = NULL;
		out = ev_json_print(o);
	}
	cJSON_Delete(o), cJSON_Delete(f);
	if (!out)
		return ev_error_set(EV_E_NOMEM, "out of memory storing the preprocessing fingerprint");
	free(*config_json);
	*config_json = out;
	return 0;
}

/* A new run in the tracker, its settings stored with it. */
static int create_run(eval_state *st, int64_t *run_id)
{
	ev_eval_config *c = st->c;
	char *config_json = NULL, *suites_json = ev_json_print(st->suites_info);
	ev_buf sources = EV_BUF_INIT(1 << 20);
	int rc = suites_json ? ev_eval_config_to_json(c, &config_json) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = add_preprocessing(st, &config_json);
	for (int i = 0; i < c->n_models && !rc; i++) {
		char *r = ev_eval_redact_url(c->models[i]);
		rc = r ? ev_buf_printf(&sources, "%s%s", i ? " " : "", r) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(r);
	}
	if (!rc) {
		ev_run_info info = {c->model_name, sources.data ? sources.data : "", suites_json, config_json,
		                    st->max_epochs, st->total, 0, NULL};
		/* a team tracker's run first: the mirror takes its id */
		if (st->o->remote && !(rc = ev_remote_create_run(st->o->remote, &info, &info.id)))
			ev_log_info("run %lld created on the team tracker", (long long)info.id);
		if (!rc)
			rc = ev_tracker_run_create(st->t, &info, run_id);
	}
	ev_buf_free(&sources);
	free(config_json);
	free(suites_json);
	return rc;
}

/* The stored configuration of run `id` becomes the one used (the caller's
 * concurrency kept when it is not the default). */
static int load_stored(eval_state *st, int64_t id)
{
	const ev_eval_config *given = st->c;
	int concurrency = st->c->concurrency;
	ev_eval_config_init(&st->own);
	st->c = &st->own;
	int rc = ev_tracker_run_get(st->t, id, &st->row);
	if (rc)
		return rc;
	if (!st->row.config_json)
		return ev_error_set(EV_E_INVALID, "run %lld has no stored configuration", (long long)id);
	if ((rc = ev_json_parse(&st->stored, st->row.config_json, strlen(st->row.config_json), "run config")))
		return rc;
	if ((rc = ev_eval_config_from_json(st->c, st->stored)) || (rc = restore_secrets(st->c, given)))
		return rc;
	if (concurrency != 16)
		st->c->concurrency = concurrency;
	return 0;
}

/* Every suite through the runner into the tracker. Returns 0, or the
 * failure of a suite (interrupted when *stop was set). */
static int run_suites(eval_state *st, int64_t run_id, bool *stopped)
{
	ev_eval_config *c = st->c;
	const ev_eval_options *o = st->o;
	sink_ctx sink = {st->t, run_id, NULL, !c->no_cache, o->stop, o->remote};
	ev_progress *progress = NULL;
	int rc = ev_strset_new(&sink.done);
	if (!rc && o->resume)
		rc = ev_tracker_results_each(st->t, run_id, collect_done, sink.done);
	if (!rc)
		rc = ev_progress_new(&progress, "run", st->total - (long)ev_strset_count(sink.done), stderr, o->quiet);
	for (int i = 0; i < st->n && !rc; i++) {
		ev_run_plan plan = {
			.suite = st->suites[i], .checker = st->checkers[i], .model = c->model_name,
			.epochs = st->suites[i]->gen.epochs, .limit = (long)c->limit, .shard_k = c->shard_k,
			.shard_n = c->shard_n, .is_done = sink_is_done, .cache_get = sink_cache_get,
			.cache_put = sink_cache_put, .cache_salt = ev_backend_identity(st->backend), .on_result = sink_result, .on_tick = sink_tick, .ctx = &sink,
			.progress = progress, .stop = o->stop,
		};
		ev_run_counts counts = {0};
		if ((rc = ev_runner_run(st->backend, &plan, &counts)))
			ev_error_wrap(rc, "%s", st->suites[i]->name);
		st->done += counts.done;
		st->cached += counts.cached;
	}
	*stopped = o->stop && *o->stop;
	ev_progress_finish(progress);
	ev_progress_free(progress);
	ev_strset_free(sink.done);
	int frc = ev_tracker_flush(st->t);
	if (!frc)
		frc = lost_check(st->t);
	return rc ? rc : frc;
}

static void state_clear(eval_state *st)
{
	if (st->c && st->c->model_name == st->own_name)
		st->c->model_name = NULL; /* the caller's config must not keep a freed name */
	free(st->own_name);
	if (st->c && st->c->router == st->router_spec)
		st->c->router = NULL;
	free(st->router_spec);
	ev_backend_free(st->backend);
	for (int i = 0; i < EV_EVAL_MAX_LIST; i++) {
		ev_checker_free(st->checkers[i]);
		ev_suite_free(st->suites[i]);
	}
	ev_cli_tmpdir_remove(st->tmpdir);
	cJSON_Delete(st->suites_info);
	ev_run_row_clear(&st->row);
	ev_eval_config_clear(&st->own);
	cJSON_Delete(st->stored);
}

/* Scored samples and error results over the summary's suites. */
static void count_outcome(const char *summary_json, long *scored, long *errors)
{
	ev_summary sum = {0};
	*scored = *errors = 0;
	if (!summary_json || ev_summary_parse(&sum, summary_json, "summary")) {
		ev_error_clear();
		return;
	}
	for (size_t i = 0; i < sum.suites.n; i++) {
		*scored += sum.suites.v[i].n;
		*errors += sum.suites.v[i].errors;
	}
	ev_summary_clear(&sum);
}

static int take_first_error(void *ctx, const ev_result *r)
{
	char **out = ctx;
	if (!ev_result_is_error(r))
		return 0;
	*out = ev_asprintf("%s: %s", r->reason, r->detail ? r->detail : "");
	return 1; /* stop: the first is enough */
}

/* The run's first error result, as "reason: detail" (malloc'd), or NULL. */
static char *first_error(ev_tracker *t, int64_t run_id)
{
	char *out = NULL;
	(void)ev_tracker_results_each(t, run_id, take_first_error, &out);
	ev_error_clear();
	return out;
}

static int evaluate(eval_state *st, ev_eval_outcome *out)
{
	const ev_eval_options *o = st->o;
	int rc;
	if (o->resume && (rc = load_stored(st, o->resume)))
		return ev_error_wrap(rc, "--resume %lld", (long long)o->resume);
	ev_eval_config *c = st->c;
	if (!o->resume && !c->has_seed) {
		/* Random by default, and recorded with the run (resume and a
		 * rerun from the record sample the same): each sample and epoch
		 * then samples with its own seed derived from this one. */
		uint64_t r = 0;
		if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
			r = (uint64_t)(ev_wall_time() * 1e6) ^ ((uint64_t)getpid() << 20);
		c->seed = (int64_t)(r % 9000000000000000ULL);
		c->has_seed = true;
	}
	if (!o->resume) {
		if (!c->n_models)
			return ev_error_set(EV_E_INVALID, "--model is required");
		if (!c->n_suites)
			c->suites[c->n_suites++] = "@default";
		free(c->checker_spec);
		c->checker_spec = ev_checker_flags_spec(&c->checker);
	}
	if ((rc = load_suites(st)) || (o->resume && (rc = check_same_suites(st, o->resume))))
		return rc;
	if ((rc = c->router ? make_router(st) : make_backend(&st->backend, c)))
		return ev_error_wrap(rc, "model");
	if (!o->resume && !c->model_name) {
		/* the name the server gives its one model (a URL is no model's
		 * name); for a checkpoint, its folder's */
		const char *served = ev_backend_openai_served_model(st->backend);
		bool http = ev_str_starts(c->models[0], "http://") || ev_str_starts(c->models[0], "https://");
		c->model_name = served && (st->own_name = ev_strdup(served)) ? st->own_name : c->models[0];
		if (http && !served)
			ev_log_warn("--model-name not given and %s lists no single model: the URL is the model's name; "
			            "give --model-name",
			            c->models[0]);
	}
	out->run_id = o->resume;
	if (!o->resume && (rc = create_run(st, &out->run_id)))
		return rc;
	if ((rc = ev_tracker_run_set_status(st->t, out->run_id, "running")))
		return rc;
	if (o->on_started)
		o->on_started(o->ctx, out->run_id);
	if (!o->quiet)
		fprintf(stderr, "evald: run %lld: %s on %d suite(s), %ld results planned\n", (long long)out->run_id,
		        c->model_name, st->n, st->total);
	bool stopped = false;
	if ((rc = run_suites(st, out->run_id, &stopped))) {
		out->status = stopped ? "interrupted" : "failed";
		/* The message is kept over a failure to store the status. */
		char *msg = ev_strdup(ev_error_msg());
		if (ev_tracker_run_set_status(st->t, out->run_id, out->status))
			ev_log_warn("tracker: %s", ev_error_msg());
		if (o->remote && ev_remote_finish(o->remote, out->run_id, out->status, NULL, NULL))
			ev_log_warn("team tracker: %s", ev_error_msg());
		ev_error_set(rc, "%s", msg ? msg : "the run failed");
		free(msg);
		return rc;
	}
	/* The outcome says what happened: every request failing is a failed
	 * run, some failing a complete run with errors. */
	long scored = 0, errors = 0;
	const char *status = "finished";
	if (!(rc = ev_summary_compute(&out->summary_json, st->t, out->run_id)) &&
	    !(rc = summary_extras(st, out->run_id, &out->summary_json))) {
		count_outcome(out->summary_json, &scored, &errors);
		status = errors && !scored ? "failed" : errors ? "finished_with_errors" : "finished";
	}
	if (rc || (rc = ev_tracker_run_set_summary(st->t, out->run_id, out->summary_json)) ||
	    (rc = ev_tracker_run_set_status(st->t, out->run_id, status))) {
		/* The results are stored; the summary or the status were not. The
		 * run must not stay "running" (no process would ever end it): it is
		 * failed, and resume (which recomputes the summary) completes it. */
		rc = ev_error_wrap(rc, "summary");
		char *msg = ev_strdup(ev_error_msg());
		if (ev_tracker_run_set_status(st->t, out->run_id, "failed"))
			ev_log_error("run %lld: its status could not be stored either (%s): it shows as running until "
			             "resumed",
			             (long long)out->run_id, ev_error_msg());
		ev_error_set(rc, "%s", msg ? msg : "the summary could not be stored");
		free(msg);
		free(out->summary_json);
		out->summary_json = NULL;
		return rc;
	}
	/* the team tracker has every result before the run says it ended */
	long sent = 0;
	if (o->remote && (rc = ev_remote_finish(o->remote, out->run_id, status, out->summary_json, &sent))) {
		ev_error_wrap(rc, "run %lld: the team tracker did not take every result (resume sends them again)",
		              (long long)out->run_id);
		ev_tracker_run_set_status(st->t, out->run_id, "interrupted");
		return rc;
	}
	if (o->remote && !o->quiet)
		fprintf(stderr, "evald: run %lld: %ld results sent to the team tracker\n", (long long)out->run_id, sent);
	out->status = status;
	out->scored = scored;
	out->errors = errors;
	out->answered = st->done;
	out->cached = st->cached;
	if (!strcmp(status, "failed")) {
		char *first = first_error(st->t, out->run_id);
		rc = ev_error_set(EV_E_BACKEND, "every request failed (%ld results are errors, none was scored): %s", errors,
		                  first ? first : "see evald report");
		free(first);
		return rc;
	}
	return 0;
}

int ev_eval_run(ev_tracker *t, ev_eval_config *c, const ev_eval_options *o, ev_eval_outcome *out)
{
	static const ev_eval_options none = {0};
	memset(out, 0, sizeof *out);
	out->status = "failed";
	eval_state st = {.t = t, .c = c, .o = o ? o : &none};
	int rc = evaluate(&st, out);
	state_clear(&st);
	return rc;
}
