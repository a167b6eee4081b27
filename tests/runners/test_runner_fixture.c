/* The runner against the fixture server: every sample scored at
 * concurrency 16; backend failures and timeouts become excluded results;
 * the response cache keeps a second run off the server; limit, shard,
 * epochs and resume pick the work; per-sample checkers; a failing sink
 * stops the run. */
#include "fixture_util.h"

#include <stdio.h>

static tu_server srv;

static int setup(void **state)
{
	fu_start(&srv, NULL);
	return 0;
}

static int teardown(void **state)
{
	tu_server_stop(&srv);
	return 0;
}

/* ---- a suite built in memory ------------------------------------------- */

typedef struct {
	ev_suite s;
	ev_part *parts;
	ev_message *msgs;
	char **targets;
} mem_suite;

/* n samples "s<i>" asking "q<i>: the answer is ANS-<i>" with target
 * ANS-<i>; `extra[i]`, when set, is appended to sample i's prompt. */
static mem_suite *suite_new(int n, const char *const *extra, int n_extra)
{
	mem_suite *m = calloc(1, sizeof *m);
	m->s.name = ev_strdup("mem");
	m->s.root = ev_strdup("/tmp");
	m->s.checker_json = ev_strdup("{\"type\":\"includes\"}");
	m->s.gen = (ev_gen)EV_GEN_INIT;
	m->s.samples = calloc((size_t)n, sizeof *m->s.samples);
	m->s.n_samples = (size_t)n;
	m->parts = calloc((size_t)n, sizeof *m->parts);
	m->msgs = calloc((size_t)n, sizeof *m->msgs);
	m->targets = calloc((size_t)n, sizeof *m->targets);
	for (int i = 0; i < n; i++) {
		ev_sample *x = &m->s.samples[i];
		x->id = ev_asprintf("s%d", i);
		m->parts[i].kind = EV_PART_TEXT;
		m->parts[i].text = ev_asprintf("q%d: the answer is ANS-%d %s", i, i, i < n_extra && extra[i] ? extra[i] : "");
		m->msgs[i].role = ev_strdup("user");
		m->msgs[i].parts = &m->parts[i];
		m->msgs[i].n_parts = 1;
		x->messages = &m->msgs[i];
		x->n_messages = 1;
		m->targets[i] = ev_asprintf("ANS-%d", i);
		x->targets = &m->targets[i];
		x->n_targets = 1;
		x->target_json = ev_asprintf("\"ANS-%d\"", i);
		x->line = (size_t)i + 1;
	}
	return m;
}

static void suite_free(mem_suite *m)
{
	for (size_t i = 0; i < m->s.n_samples; i++) {
		free(m->s.samples[i].id);
		free(m->s.samples[i].target_json);
		free(m->s.samples[i].checker_json);
		free(m->parts[i].text);
		free(m->msgs[i].role);
		free(m->targets[i]);
	}
	free(m->s.samples);
	free(m->parts);
	free(m->msgs);
	free(m->targets);
	free(m->s.name);
	free(m->s.root);
	free(m->s.checker_json);
	free(m);
}

/* ---- what the sink saw --------------------------------------------------- */

typedef struct {
	char id[32];
	int epoch;
	double score;
	char reason[32];
	char finish[16];
	char detail[160];
	char hash[EV_SHA256_HEX];
	bool cached;
	int attempts;
} seen;

typedef struct {
	seen r[1024];
	int n;
	int ticks;
	int stop_after;          /* > 0: the sink fails after this many */
	char *keys[1024], *bodies[1024];
	int n_cache;
	const char *done_suffix; /* is_done: ids ending so are done in epoch 0 */
} sink;

static int on_result(void *ctx, const ev_result *r)
{
	sink *k = ctx;
	assert_true(k->n < 1024);
	seen *s = &k->r[k->n++];
	snprintf(s->id, sizeof s->id, "%s", r->sample_id);
	s->epoch = r->epoch;
	s->score = r->score;
	snprintf(s->reason, sizeof s->reason, "%s", r->reason ? r->reason : "");
	snprintf(s->finish, sizeof s->finish, "%s", r->finish_reason ? r->finish_reason : "");
	snprintf(s->detail, sizeof s->detail, "%s", r->detail ? r->detail : "");
	snprintf(s->hash, sizeof s->hash, "%s", r->request_hash ? r->request_hash : "");
	s->cached = r->cached;
	s->attempts = r->attempts;
	assert_string_equal(r->suite, "mem");
	return k->stop_after > 0 && k->n >= k->stop_after ? 7 : 0;
}

static void on_tick(void *ctx) { ((sink *)ctx)->ticks++; }

static int cache_get(void *ctx, const char *key, char **body)
{
	sink *k = ctx;
	for (int i = 0; i < k->n_cache; i++)
		if (!strcmp(k->keys[i], key)) {
			*body = ev_strdup(k->bodies[i]);
			return 0;
		}
	return EV_E_NOTFOUND;
}

static int cache_put(void *ctx, const char *key, const char *body)
{
	sink *k = ctx;
	assert_true(k->n_cache < 1024);
	k->keys[k->n_cache] = ev_strdup(key);
	k->bodies[k->n_cache++] = ev_strdup(body);
	return 0;
}

static bool is_done(void *ctx, const char *suite, const char *id, int epoch)
{
	sink *k = ctx;
	return epoch == 0 && k->done_suffix && ev_str_ends(id, k->done_suffix);
}

static void sink_clear(sink *k)
{
	for (int i = 0; i < k->n_cache; i++) {
		free(k->keys[i]);
		free(k->bodies[i]);
	}
	memset(k, 0, sizeof *k);
}

static const seen *find(const sink *k, const char *id, int epoch)
{
	for (int i = 0; i < k->n; i++)
		if (!strcmp(k->r[i].id, id) && k->r[i].epoch == epoch)
			return &k->r[i];
	return NULL;
}

static ev_backend *backend(int concurrency, double timeout_s, int max_retries)
{
	static const char *urls[1];
	urls[0] = srv.url;
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = urls;
	o.n_urls = 1;
	o.concurrency = concurrency;
	o.timeout_s = timeout_s;
	o.max_retries = max_retries;
	o.backoff_base_s = 0.01;
	o.backoff_max_s = 0.5;
	ev_backend *b = NULL;
	assert_int_equal(ev_backend_openai_new(&b, &o), 0);
	return b;
}

static ev_run_plan plan_for(mem_suite *m, sink *k)
{
	ev_run_plan p;
	memset(&p, 0, sizeof p);
	p.suite = &m->s;
	p.model = "fixture";
	p.epochs = 1;
	p.shard_n = 1;
	p.on_result = on_result;
	p.on_tick = on_tick;
	p.ctx = k;
	return p;
}

/* ---- tests ------------------------------------------------------------------ */

static void two_hundred_samples_at_concurrency_16_are_all_correct(void **state)
{
	mem_suite *m = suite_new(200, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(16, 10, 2);
	ev_run_plan p = plan_for(m, k);
	ev_run_counts c;
	long before = fu_requests(&srv);
	assert_int_equal(ev_runner_run(b, &p, &c), 0);
	assert_int_equal(c.total, 200);
	assert_int_equal(c.done, 200);
	assert_int_equal(c.scored, 200);
	assert_int_equal(c.errors, 0);
	assert_int_equal(c.cached, 0);
	assert_true(c.score_sum == 200.0);
	assert_int_equal(k->n, 200);
	for (int i = 0; i < 200; i++) {
		char id[16];
		snprintf(id, sizeof id, "s%d", i);
		const seen *s = find(k, id, 0);
		assert_non_null(s);
		assert_true(s->score == 1.0);
		assert_string_equal(s->reason, "");
		assert_int_equal(s->attempts, 1);
	}
	assert_true(k->ticks > 0);
	assert_int_equal(fu_requests(&srv) - before, 200);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void failures_and_timeouts_are_excluded_results(void **state)
{
	const char *extra[] = {NULL, NULL, NULL, "[[status=500 times=100]]", NULL, "[[latency=1500]]", NULL, "[[length]]"};
	mem_suite *m = suite_new(10, extra, 8);
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(4, 0.4, 2);
	ev_run_plan p = plan_for(m, k);
	ev_run_counts c;
	assert_int_equal(ev_runner_run(b, &p, &c), 0);
	assert_int_equal(c.done, 10);
	assert_int_equal(c.errors, 2);
	assert_int_equal(c.scored, 8);
	const seen *e = find(k, "s3", 0), *t = find(k, "s5", 0), *l = find(k, "s7", 0), *ok = find(k, "s0", 0);
	assert_string_equal(e->reason, "backend_error");
	assert_true(e->score == 0);
	assert_string_equal(e->detail, "HTTP 500 after 3 attempts");
	assert_string_equal(t->reason, "timeout");
	assert_int_equal(t->attempts, 3);
	assert_string_equal(l->finish, "length");
	assert_true(ok->score == 1.0);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void cache_hits_keep_a_second_run_off_the_server(void **state)
{
	mem_suite *m = suite_new(30, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(8, 10, 2);
	ev_run_plan p = plan_for(m, k);
	p.cache_get = cache_get;
	p.cache_put = cache_put;
	ev_run_counts c1, c2;
	long r0 = fu_requests(&srv);
	assert_int_equal(ev_runner_run(b, &p, &c1), 0);
	long r1 = fu_requests(&srv);
	assert_int_equal(r1 - r0, 30);
	assert_int_equal(c1.cached, 0);
	assert_int_equal(k->n_cache, 30);
	k->n = 0;
	assert_int_equal(ev_runner_run(b, &p, &c2), 0);
	assert_int_equal(fu_requests(&srv), r1);
	assert_int_equal(c2.cached, 30);
	assert_int_equal(c2.scored, 30);
	assert_true(c2.score_sum == c1.score_sum);
	assert_true(k->r[0].cached);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void epochs_share_a_request_hash_only_when_greedy(void **state)
{
	mem_suite *m = suite_new(3, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(4, 10, 2);
	ev_run_plan p = plan_for(m, k);
	p.epochs = 2;
	ev_run_counts c;
	assert_int_equal(ev_runner_run(b, &p, &c), 0); /* temperature unset: sampling */
	assert_int_equal(c.done, 6);
	assert_string_not_equal(find(k, "s1", 0)->hash, find(k, "s1", 1)->hash);
	k->n = 0;
	m->s.gen.temperature = 0;
	assert_int_equal(ev_runner_run(b, &p, &c), 0);
	assert_string_equal(find(k, "s1", 0)->hash, find(k, "s1", 1)->hash);
	assert_string_not_equal(find(k, "s1", 0)->hash, find(k, "s2", 0)->hash);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void limit_shard_epochs_and_resume_pick_the_work(void **state)
{
	mem_suite *m = suite_new(60, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	k->done_suffix = "0";
	ev_backend *b = backend(8, 10, 2);
	ev_run_plan p = plan_for(m, k);
	p.limit = 45;
	p.shard_k = 1;
	p.shard_n = 3;
	p.epochs = 2;
	p.is_done = is_done;
	long expect = 0;
	for (int e = 0; e < 2; e++)
		for (int i = 0; i < 45; i++) {
			char id[16];
			snprintf(id, sizeof id, "s%d", i);
			if (ev_shard_owns(id, 1, 3) && !(e == 0 && ev_str_ends(id, "0")))
				expect++;
		}
	assert_true(expect > 10);
	ev_run_counts c;
	assert_int_equal(ev_runner_run(b, &p, &c), 0);
	assert_int_equal(c.total, expect);
	assert_int_equal(c.done, expect);
	assert_int_equal(k->n, (int)expect);
	for (int i = 0; i < k->n; i++) {
		const seen *s = &k->r[i];
		assert_true(atoi(s->id + 1) < 45);
		assert_true(ev_shard_owns(s->id, 1, 3));
		assert_false(s->epoch == 0 && ev_str_ends(s->id, "0"));
	}
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void a_sample_checker_overrides_the_suite_checker(void **state)
{
	mem_suite *m = suite_new(4, NULL, 0);
	m->s.samples[0].checker_json = ev_strdup("{\"type\":\"exact\"}");
	m->s.samples[2].checker_json = ev_strdup("{\"type\":\"exact\"}");
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(4, 10, 2);
	ev_run_plan p = plan_for(m, k);
	ev_run_counts c;
	assert_int_equal(ev_runner_run(b, &p, &c), 0);
	assert_true(find(k, "s0", 0)->score == 0);
	assert_string_equal(find(k, "s0", 0)->reason, "wrong_answer");
	assert_true(find(k, "s1", 0)->score == 1);
	assert_true(find(k, "s2", 0)->score == 0);
	assert_true(c.score_sum == 2.0);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void a_failing_sink_stops_the_run(void **state)
{
	mem_suite *m = suite_new(50, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	k->stop_after = 5;
	ev_backend *b = backend(4, 10, 2);
	ev_run_plan p = plan_for(m, k);
	ev_run_counts c;
	assert_int_equal(ev_runner_run(b, &p, &c), 7);
	assert_int_equal(c.done, 5);
	assert_int_equal(k->n, 5);
	ev_backend_free(b);
	sink_clear(k);
	free(k);
	suite_free(m);
}

static void bad_plans_are_refused(void **state)
{
	mem_suite *m = suite_new(2, NULL, 0);
	sink *k = calloc(1, sizeof *k);
	ev_backend *b = backend(1, 10, 0);
	ev_run_plan p = plan_for(m, k);
	ev_run_counts c;
	p.epochs = 0;
	assert_int_equal(ev_runner_run(b, &p, &c), EV_E_INVALID);
	p.epochs = 1;
	p.shard_k = 3;
	p.shard_n = 2;
	assert_int_equal(ev_runner_run(b, &p, &c), EV_E_INVALID);
	assert_int_equal(k->n, 0);
	ev_backend_free(b);
	free(k);
	suite_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_hundred_samples_at_concurrency_16_are_all_correct),
		cmocka_unit_test(failures_and_timeouts_are_excluded_results),
		cmocka_unit_test(cache_hits_keep_a_second_run_off_the_server),
		cmocka_unit_test(epochs_share_a_request_hash_only_when_greedy),
		cmocka_unit_test(limit_shard_epochs_and_resume_pick_the_work),
		cmocka_unit_test(a_sample_checker_overrides_the_suite_checker),
		cmocka_unit_test(a_failing_sink_stops_the_run),
		cmocka_unit_test(bad_plans_are_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
