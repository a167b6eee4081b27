/*
 * The runner: feeds a plan's (sample, epoch) pairs to a backend, scores
 * what comes back and hands each result to the plan's sink.
 *
 * Work list: the first `limit` samples in suite order, those of this
 * shard, times the epochs (epoch-major, so an interrupted run has every
 * sample once before any twice), minus what is_done reports. Each pair is
 * turned into a request body and its hash; a cache hit is scored at once
 * (cached = true), the rest go to the backend, which is kept at its
 * capacity. Everything happens in the caller's thread: poll waits at most
 * 50 ms, on_tick runs every loop.
 */
#include "runners/runners_int.h"

#include <stdlib.h>
#include <string.h>

#define POLL_WAIT_S 0.05
#define POLL_BATCH 64
/* Cache hits handled in one loop before on_tick and poll get a turn. */
#define FILL_BATCH 256

typedef struct {
	uint32_t sample;
	int32_t epoch;
} item;

/* One request in flight (the backend's cookie). */
typedef struct job {
	struct job *prev, *next;
	const ev_sample *sample;
	int epoch;
	char *request_json;
	char hash[EV_SHA256_HEX];
	const char *answered_by; /* the routed model's label (the backend's), or NULL */
} job;

/* Per-sample checker overrides, built on first use and kept by spec. */
typedef struct chk {
	struct chk *next;
	char *spec;
	ev_checker *checker;
} chk;

#define CHK_BUCKETS 256

typedef struct {
	ev_backend *b;
	const ev_run_plan *plan;
	ev_run_counts counts;
	ev_checker *own_checker; /* from suite->checker_json when the plan has none */
	chk *chk[CHK_BUCKETS];
	job inflight;            /* list head */
	item *agent_items;       /* agent-loop samples, run last (agent.c) */
	size_t n_agent_items;
} run;

bool ev_shard_owns(const char *sample_id, int shard_k, int shard_n)
{
	if (shard_n <= 1)
		return true;
	unsigned char d[32];
	ev_sha256(d, sample_id, strlen(sample_id));
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h = h << 8 | d[i];
	return (int)(h % (uint64_t)shard_n) == shard_k;
}

static void job_free(job *j)
{
	if (!j)
		return;
	free(j->request_json);
	free(j);
}

static void job_link(run *r, job *j)
{
	j->next = r->inflight.next;
	j->prev = &r->inflight;
	r->inflight.next->prev = j;
	r->inflight.next = j;
}

static void job_unlink(job *j)
{
	j->prev->next = j->next;
	j->next->prev = j->prev;
}

/* FNV-1a over bytes, continuing from h (FNV_START to begin). */
#define FNV_START 1469598103934665603ULL
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

static int checker_for(run *r, const ev_sample *s, const ev_checker **out)
{
	if (!s->checker_json) {
		*out = r->plan->checker ? r->plan->checker : r->own_checker;
		return *out ? 0 : ev_error_set(EV_E_INVALID, "suite %s: no checker", r->plan->suite->name);
	}
	uint64_t h = fnv(FNV_START, s->checker_json, strlen(s->checker_json));
	chk **bucket = &r->chk[h % CHK_BUCKETS];
	for (chk *c = *bucket; c; c = c->next) {
		if (!strcmp(c->spec, s->checker_json)) {
			*out = c->checker;
			return 0;
		}
	}
	chk *c = calloc(1, sizeof *c);
	if (!c || !(c->spec = ev_strdup(s->checker_json))) {
		free(c);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	int rc = ev_checker_new(&c->checker, s->checker_json);
	if (rc) {
		free(c->spec);
		free(c);
		return ev_error_wrap(rc, "sample %.200s (line %zu): checker", s->id, s->line);
	}
	c->next = *bucket;
	*bucket = c;
	*out = c->checker;
	return 0;
}

static void progress(run *r)
{
	if (!r->plan->progress)
		return;
	double mean = r->counts.scored ? r->counts.score_sum / (double)r->counts.scored : -1.0;
	ev_progress_update(r->plan->progress, r->counts.done, mean, r->counts.errors);
}

/* Turns one completion into a result and hands it to the sink. Returns the
 * sink's non-zero answer (the run stops) or 0. */
static int64_t derive_seed(int64_t seed, const char *id, int epoch);

static int deliver(run *r, const ev_sample *s, int epoch, const char *request_json, const char *hash,
                   const ev_completion *c, bool cached, const char *answered_by)
{
	const ev_run_plan *p = r->plan;
	ev_result res;
	memset(&res, 0, sizeof res);
	ev_verdict v;
	memset(&v, 0, sizeof v);
	char *detail = NULL;
	res.suite = p->suite->name;
	res.sample_id = s->id;
	res.epoch = epoch;
	res.request_hash = hash;
	res.request_json = request_json;
	res.response = c->text;
	res.tool_calls_json = c->tool_calls_json;
	res.finish_reason = c->finish_reason;
	res.prompt_tokens = c->prompt_tokens;
	res.completion_tokens = c->completion_tokens;
	res.thinking_tokens = c->thinking_tokens;
	res.answered_by = answered_by;
	res.prompt_hash = c->prompt_hash[0] ? c->prompt_hash : NULL;
	res.latency_s = c->latency_s;
	res.attempts = c->attempts;
	res.cached = cached;
	res.metadata_json = s->metadata_json;
	res.target_json = s->target_json;

	bool failed = c->status != EV_COMPLETION_OK && c->status != EV_COMPLETION_CONTEXT;
	res.reason = ev_reason_name(c->status == EV_COMPLETION_TIMEOUT ? EV_REASON_TIMEOUT : EV_REASON_BACKEND_ERROR);
	res.detail = c->error ? c->error : "backend failed";
	if (c->status == EV_COMPLETION_CONTEXT) {
		/* the model's limit: a wrong answer of a kind, scored 0, in the score */
		res.reason = ev_reason_name(EV_REASON_CONTEXT_OVERFLOW);
		res.score = 0;
	} else if (!failed) {
		const ev_checker *ck = NULL;
		int rc = checker_for(r, s, &ck);
		if (rc)
			return rc;
		bool truncated = c->finish_reason && !strcmp(c->finish_reason, "length");
		rc = ev_checker_score_calls(ck, s, c->text ? c->text : "", c->tool_calls_json, truncated, &v);
		if (rc) {
			/* A checker that cannot run (sandbox, memory) is an
			 * infrastructure fault, not a wrong answer. */
			failed = true;
			res.reason = ev_reason_name(EV_REASON_BACKEND_ERROR);
			res.detail = detail = ev_asprintf("checker failed: %s", ev_error_msg());
		} else {
			res.score = v.score < 0 ? 0 : v.score > 1 ? 1 : v.score;
			res.reason = v.reason == EV_REASON_NONE ? "" : ev_reason_name(v.reason);
			res.extracted = v.extracted;
			res.detail = v.detail;
			if (!cached && c->raw_json && p->cache_put && p->cache_put(p->ctx, hash, c->raw_json))
				ev_log_warn("cache: cannot store the response of sample %s", s->id);
		}
	}
	r->counts.done++;
	if (failed) {
		res.score = 0;
		r->counts.errors++;
	} else {
		r->counts.scored++;
		r->counts.score_sum += res.score;
	}
	if (cached)
		r->counts.cached++;
	int rc = p->on_result ? p->on_result(p->ctx, &res) : 0;
	ev_verdict_clear(&v);
	free(detail);
	progress(r);
	return rc;
}

static void free_all(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
}

/* Starts one work item: a request failure or a cache hit is delivered at
 * once; otherwise the request goes to the backend. */
static int start_item(run *r, const item *it, bool *submitted)
{
	const ev_run_plan *p = r->plan;
	const ev_suite *su = p->suite;
	const ev_sample *s = &su->samples[it->sample];
	*submitted = false;
	job *j = calloc(1, sizeof *j);
	if (!j)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	j->sample = s;
	j->epoch = it->epoch;
	ev_request req;
	memset(&req, 0, sizeof req);
	req.model = p->model;
	req.messages = s->messages;
	req.n_messages = s->n_messages;
	req.tools_json = s->tools_json;
	req.gen = su->gen;
	req.suite_root = su->root;
	req.cookie = j;
	/* Routing between models: the model is chosen now, so the request
	 * hashed, cached and stored is the one that model gets. */
	req.route = ev_backend_route(r->b, su->name, s->metadata_json, &req.model, &j->answered_by) + 1;
	/* A multiple-choice sample under a loglikelihood checker is scored,
	 * not answered: one continuation a choice, after the delimiter. */
	const ev_checker *ck = NULL;
	const char *delim = checker_for(r, s, &ck) == 0 ? ev_checker_loglik_delimiter(ck) : NULL;
	ev_error_clear();
	char *conts[EV_SUITE_MAX_CHOICES];
	size_t n_conts = 0;
	bool scoring = delim != NULL;
	int rc = 0;
	if (scoring && !s->n_choices)
		rc = ev_error_set(EV_E_INVALID, "sample %.200s: the loglikelihood checker needs \"choices\"", s->id);
	for (size_t i = 0; !rc && scoring && i < s->n_choices; i++)
		if (!(conts[n_conts++] = ev_asprintf("%s%s", delim, s->choices[i])))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (scoring) {
		req.continuations = (const char *const *)conts;
		req.n_continuations = n_conts;
		req.gen.temperature = 0; /* nothing is sampled */
		req.gen.has_seed = false;
	}
	/* Sampling: every sample and epoch gets its own seed, derived from the
	 * run's, so that epochs differ and a run is reproducible from its
	 * record. Greedy decoding sends none. */
	if (req.gen.has_seed && su->gen.temperature != 0.0)
		req.gen.seed = derive_seed(req.gen.seed, s->id, it->epoch);
	else if (su->gen.temperature == 0.0)
		req.gen.has_seed = false; /* greedy: a seed changes nothing but the cache key */
	if (!rc)
		rc = ev_request_to_json(&j->request_json, &req, false);
	if (rc) {
		ev_completion c;
		memset(&c, 0, sizeof c);
		c.status = EV_COMPLETION_ERROR;
		c.error = ev_asprintf("request: %s", ev_error_msg());
		rc = deliver(r, s, it->epoch, NULL, "", &c, false, j->answered_by);
		ev_completion_clear(&c);
		job_free(j);
		free_all(conts, n_conts);
		return rc;
	}
	/* Greedy decoding gives the same answer every epoch: one cache entry. */
	bool greedy = su->gen.temperature == 0.0 || scoring;
	if (scoring) { /* the body joins context and choices: the key says where they meet */
		char *ctx = NULL, *salt = NULL;
		size_t clen = 0;
		if (ev_request_context(&ctx, &clen, &req) == 0)
			salt = ev_asprintf("%s\nscoring context=%zu delimiter=%s", p->cache_salt ? p->cache_salt : "", clen, delim);
		ev_error_clear();
		ev_request_hash_for(j->hash, j->request_json, -1, salt ? salt : p->cache_salt);
		free(ctx);
		free(salt);
	} else {
		ev_request_hash_for(j->hash, j->request_json, greedy ? -1 : it->epoch, p->cache_salt);
	}

	char *body = NULL;
	if (p->cache_get && p->cache_get(p->ctx, j->hash, &body) == 0 && body) {
		ev_completion c;
		memset(&c, 0, sizeof c);
		if (ev_completion_from_json(&c, body, strlen(body)) == 0) {
			c.status = EV_COMPLETION_OK;
			rc = deliver(r, s, it->epoch, j->request_json, j->hash, &c, true, j->answered_by);
			ev_completion_clear(&c);
			free(body);
			job_free(j);
			free_all(conts, n_conts);
			return rc;
		}
		ev_log_warn("cache: unreadable entry for sample %s, asking the backend (%s)", s->id, ev_error_msg());
		ev_completion_clear(&c);
	}
	free(body);
	rc = ev_backend_submit(r->b, &req);
	free_all(conts, n_conts);
	if (rc) {
		job_free(j);
		return ev_error_wrap(rc, "submitting sample %.200s", s->id);
	}
	job_link(r, j);
	*submitted = true;
	return 0;
}

/* ---- agent-loop samples (added by the agent engineer; see agent.c) -------
 * Samples with a tool environment (ev_agent_wants) go through ev_agent_run
 * instead of one request. They run after the single-request samples, one at
 * a time while the backend has nothing else in flight, because the loop
 * polls the backend for its own completions. No response cache: a
 * conversation is many requests. A malformed environment is the suite's
 * fault: recorded as backend_error (excluded from scores), the run goes on. */
static int run_agent_item(run *r, const item *it)
{
	const ev_run_plan *p = r->plan;
	const ev_sample *s = &p->suite->samples[it->sample];
	ev_agent_options o = EV_AGENT_OPTIONS_INIT;
	o.model = p->model;
	o.suite_root = p->suite->root;
	const char *answered_by = NULL;
	o.route = ev_backend_route(r->b, p->suite->name, s->metadata_json, &o.model, &answered_by) + 1;
	ev_agent_result ar;
	char *err = NULL;
	if (ev_agent_run(r->b, s, &p->suite->gen, &o, &ar)) {
		ar.failed = true;
		ar.reason = EV_REASON_BACKEND_ERROR;
		ar.detail = err = ev_strdup(ev_error_msg());
	}
	char hash[EV_SHA256_HEX] = "";
	if (ar.first_request_json)
		ev_request_hash_for(hash, ar.first_request_json, p->suite->gen.temperature == 0.0 ? -1 : it->epoch,
		                    p->cache_salt);
	ev_result res;
	memset(&res, 0, sizeof res);
	res.suite = p->suite->name;
	res.sample_id = s->id;
	res.epoch = it->epoch;
	res.request_hash = hash;
	res.request_json = ar.first_request_json;
	res.response = ar.final_text;
	res.tool_calls_json = ar.tool_calls_json;
	res.extracted = ar.state_json;
	res.score = ar.failed ? 0 : ar.score;
	res.reason = ar.reason == EV_REASON_NONE ? "" : ev_reason_name(ar.reason);
	res.detail = ar.detail;
	res.finish_reason = ar.finish_reason;
	res.prompt_tokens = ar.prompt_tokens;
	res.completion_tokens = ar.completion_tokens;
	res.thinking_tokens = ar.thinking_tokens;
	res.answered_by = answered_by;
	res.agents_json = ar.agents_json;
	res.latency_s = ar.latency_s;
	res.attempts = ar.attempts;
	res.metadata_json = s->metadata_json;
	res.target_json = s->target_json;
	r->counts.done++;
	if (ar.failed) {
		r->counts.errors++;
	} else {
		r->counts.scored++;
		r->counts.score_sum += res.score;
	}
	int rc = p->on_result ? p->on_result(p->ctx, &res) : 0;
	if (err)
		ar.detail = NULL;
	free(err);
	ev_agent_result_clear(&ar);
	progress(r);
	return rc;
}

/* FNV-1a over the run seed, the sample id and the epoch, folded below
 * 2^53 so that JSON carries it exactly. */
static int64_t derive_seed(int64_t seed, const char *id, int epoch)
{
	unsigned char sb[8], eb[4];
	for (int i = 0; i < 8; i++)
		sb[i] = (uint8_t)((uint64_t)seed >> (8 * i));
	for (int i = 0; i < 4; i++)
		eb[i] = (uint8_t)((unsigned)epoch >> (8 * i));
	uint64_t h = fnv(FNV_START, sb, sizeof sb);
	h = fnv(h, id ? id : "", id ? strlen(id) : 0);
	h = fnv(h, "\xff", 1); /* separates the id from the epoch */
	h = fnv(h, eb, sizeof eb);
	h ^= h >> 29; /* mix the high bits down */
	return (int64_t)(h & ((1ULL << 53) - 1));
}

/* Builds the list of (sample, epoch) pairs this run owes. */
static int plan_items(const ev_run_plan *p, item **out, size_t *n_out)
{
	const ev_suite *su = p->suite;
	size_t n_samples = su->n_samples;
	if (p->limit > 0 && (size_t)p->limit < n_samples)
		n_samples = (size_t)p->limit;
	if (n_samples > UINT32_MAX)
		return ev_error_set(EV_E_LIMIT, "suite %s: over %u samples", su->name, UINT32_MAX);
	bool *owned = calloc(n_samples ? n_samples : 1, sizeof *owned);
	size_t n_owned = 0;
	if (!owned)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n_samples; i++)
		if ((owned[i] = ev_shard_owns(su->samples[i].id, p->shard_k, p->shard_n)))
			n_owned++;
	item *items = NULL;
	if (n_owned <= SIZE_MAX / sizeof *items / ((size_t)p->epochs + 1))
		items = malloc((n_owned * (size_t)p->epochs + 1) * sizeof *items);
	if (!items) {
		free(owned);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	size_t n = 0;
	for (int e = 0; e < p->epochs; e++)
		for (size_t i = 0; i < n_samples; i++)
			if (owned[i] && !(p->is_done && p->is_done(p->ctx, su->name, su->samples[i].id, e)))
				items[n++] = (item){(uint32_t)i, e};
	free(owned);
	*out = items;
	*n_out = n;
	return 0;
}

static int check_plan(const ev_run_plan *p)
{
	if (!p->suite)
		return ev_error_set(EV_E_INVALID, "run plan: no suite");
	if (p->epochs < 1 || p->epochs > 100000)
		return ev_error_set(EV_E_INVALID, "run plan: epochs %d: expected 1..100000", p->epochs);
	int n = p->shard_n < 1 ? 1 : p->shard_n;
	if (p->shard_k < 0 || p->shard_k >= n)
		return ev_error_set(EV_E_INVALID, "run plan: shard %d of %d: expected 0 <= k < n", p->shard_k, p->shard_n);
	if (p->limit < 0)
		return ev_error_set(EV_E_INVALID, "run plan: limit %ld: expected >= 0", p->limit);
	for (size_t i = 0; i < p->suite->n_samples; i++)
		if (!p->suite->samples[i].id)
			return ev_error_set(EV_E_INVALID, "suite %s: sample %zu has no id", p->suite->name, i);
	return 0;
}

int ev_runner_run(ev_backend *b, const ev_run_plan *plan, ev_run_counts *out)
{
	run r;
	memset(&r, 0, sizeof r);
	r.b = b;
	r.plan = plan;
	r.inflight.next = r.inflight.prev = &r.inflight;
	item *items = NULL;
	size_t n_items = 0, next = 0;
	ev_completion *comps = calloc(POLL_BATCH, sizeof *comps);
	int rc = 0;
	if (!comps) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = check_plan(plan)))
		goto done;
	if (!plan->checker && plan->suite->checker_json &&
	    (rc = ev_checker_new(&r.own_checker, plan->suite->checker_json))) {
		ev_error_wrap(rc, "suite %s: checker", plan->suite->name);
		goto done;
	}
	if ((rc = plan_items(plan, &items, &n_items)))
		goto done;
	r.counts.total = (long)n_items;
	if (!(r.agent_items = malloc((n_items + 1) * sizeof *r.agent_items))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	progress(&r);

	for (;;) {
		if (plan->stop && *plan->stop) {
			rc = ev_error_set(EV_E_INVALID, "interrupted");
			goto done;
		}
		int cap = ev_backend_capacity(b);
		int handled = 0;
		while (next < n_items && ev_backend_pending(b) < (cap > 0 ? cap : 1) && handled < FILL_BATCH) {
			if (ev_agent_wants(plan->suite, &plan->suite->samples[items[next].sample])) {
				r.agent_items[r.n_agent_items++] = items[next++]; /* agent loop, below */
				continue;
			}
			bool submitted;
			if ((rc = start_item(&r, &items[next++], &submitted)))
				goto done;
			if (!submitted)
				handled++;
		}
		if (next >= n_items && ev_backend_pending(b) == 0)
			break;
		/* Cache hits still waiting to be handled: no time to sleep. */
		bool more = handled >= FILL_BATCH;
		int n = ev_backend_poll(b, comps, POLL_BATCH, more ? 0.0 : POLL_WAIT_S);
		if (n < 0) {
			rc = n;
			goto done;
		}
		for (int i = 0; i < n; i++) {
			job *j = comps[i].cookie;
			if (!rc) {
				job_unlink(j);
				rc = deliver(&r, j->sample, j->epoch, j->request_json, j->hash, &comps[i], false, j->answered_by);
				job_free(j);
			}
			ev_completion_clear(&comps[i]);
		}
		if (rc)
			goto done;
		if (plan->on_tick)
			plan->on_tick(plan->ctx);
	}
	for (size_t i = 0; i < r.n_agent_items; i++) {
		if (plan->stop && *plan->stop) {
			rc = ev_error_set(EV_E_INVALID, "interrupted");
			goto done;
		}
		if ((rc = run_agent_item(&r, &r.agent_items[i])))
			goto done;
		if (plan->on_tick)
			plan->on_tick(plan->ctx);
	}
done:
	/* Requests still in flight when the run stops early: the backend keeps
	 * their (now stale) cookies; the caller frees the backend. */
	while (r.inflight.next != &r.inflight) {
		job *j = r.inflight.next;
		job_unlink(j);
		job_free(j);
	}
	for (int i = 0; i < CHK_BUCKETS; i++) {
		for (chk *c = r.chk[i], *nx; c; c = nx) {
			nx = c->next;
			ev_checker_free(c->checker);
			free(c->spec);
			free(c);
		}
	}
	ev_checker_free(r.own_checker);
	free(r.agent_items);
	free(items);
	free(comps);
	if (out)
		*out = r.counts;
	return rc;
}
