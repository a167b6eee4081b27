/* Continuous batching (engine/batch.c): every request's tokens and stop
 * reason equal those of eng_generate run alone, whatever shares the batch,
 * however prompts are chunked, and whatever order requests finish in; on a
 * Llama, and on a MiniMax-M3 whose lightning indexer drops blocks (pages of
 * 16, top-4 blocks: the prompts and the haystack are longer), prefix sharing
 * included. */
#include "engine_testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define NPROMPT 12

static char *dir;
static eng_model *m;
static eng_model_info info;

static int setup_arch(const char *arch)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 400;
	z.max_position = 512;
	z.layers = strcmp(arch, "llama") ? 3 : 2; /* M3: full, sparse, full attention */
	dir = et_mkmodel(arch, arch, &z, "f32", 7);
	m = et_load(dir, ENG_BACKEND_CPU, 16);
	eng_model_get_info(m, &info);
	return 0;
}

static int setup(void **st)
{
	(void)st;
	return setup_arch("llama");
}

static int setup_m3(void **st)
{
	(void)st;
	return setup_arch("minimax_m3");
}

static int teardown(void **st)
{
	(void)st;
	eng_model_free(m);
	free(dir);
	return 0;
}

typedef struct {
	int32_t *prompt;
	int n_prompt;
	eng_generate_options gen;
	int32_t want[128];
	int n_want;
	eng_stop_reason why;
} case_t;

/* Prompts of lengths 1..~70, some stopping on an id the model is likely to
 * produce (the first greedy token of another prompt), others by length. */
static void make_cases(case_t *c, double temperature)
{
	for (int i = 0; i < NPROMPT; i++) {
		c[i].n_prompt = 1 + (i * 37) % 71;
		c[i].prompt = et_tokens(c[i].n_prompt, info.vocab, 100 + (uint64_t)i);
		eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
		g.max_tokens = 5 + (i * 7) % 23;
		g.sample.temperature = temperature;
		g.sample.top_p = temperature > 0 ? 0.9 : 1.0;
		g.sample.seed = 1000 + (uint64_t)i;
		if (i % 3 == 1)
			g.sample.repetition_penalty = 1.3;
		c[i].gen = g;
	}
}

static void solo(case_t *c)
{
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	int rc = eng_generate(s, c->prompt, c->n_prompt, &c->gen, NULL, NULL, c->want, 128, &c->n_want, &c->why);
	if (rc)
		fail_msg("generate: %s", ev_error_msg());
	eng_seq_free(s);
}

static void run_batched(case_t *c, int max_batch, int step_tokens)
{
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	o.max_batch = max_batch;
	o.max_step_tokens = step_tokens;
	eng_batch *b = NULL;
	assert_int_equal(eng_batch_new(&b, m, &o), 0);
	/* Half now, the rest joining while the first ones run. */
	int added = 0, got = 0, steps = 0;
	for (; added < NPROMPT / 2; added++) {
		eng_batch_request r = {.prompt = c[added].prompt, .n_prompt = c[added].n_prompt, .gen = c[added].gen, .cookie = &c[added]};
		assert_int_equal(eng_batch_add(b, &r, NULL), 0);
	}
	while (got < NPROMPT) {
		if (added < NPROMPT && steps % 3 == 2) {
			eng_batch_request r = {.prompt = c[added].prompt, .n_prompt = c[added].n_prompt, .gen = c[added].gen, .cookie = &c[added]};
			assert_int_equal(eng_batch_add(b, &r, NULL), 0);
			added++;
		}
		if (eng_batch_step(b) != 0)
			fail_msg("step: %s", ev_error_msg());
		steps++;
		eng_batch_result res[4];
		int n = eng_batch_take(b, res, 4);
		for (int k = 0; k < n; k++) {
			case_t *x = res[k].cookie;
			if (res[k].status)
				fail_msg("request failed: %s", res[k].error);
			assert_int_equal(res[k].n_prompt, x->n_prompt);
			assert_int_equal(res[k].n_tokens, x->n_want);
			assert_int_equal(res[k].reason, x->why);
			assert_memory_equal(res[k].tokens, x->want, (size_t)x->n_want * sizeof(int32_t));
			eng_batch_result_clear(&res[k]);
			got++;
		}
		assert_true(steps < 10000);
	}
	assert_int_equal(eng_batch_pending(b), 0);
	/* it really batched: fewer steps than tokens fed one request at a time */
	int total = 0;
	for (int i = 0; i < NPROMPT; i++)
		total += c[i].n_want + 1;
	if (max_batch > 1 && step_tokens >= 64)
		assert_true(steps < total);
	eng_batch_free(b);
}

static void free_cases(case_t *c)
{
	for (int i = 0; i < NPROMPT; i++)
		free(c[i].prompt);
}

static void batched_greedy_equals_sequential_greedy(void **st)
{
	(void)st;
	case_t c[NPROMPT];
	make_cases(c, 0.0);
	for (int i = 0; i < NPROMPT; i++)
		solo(&c[i]);
	run_batched(c, 4, 512);
	free_cases(c);
}

static void chunked_prefill_keeps_results_identical(void **st)
{
	(void)st;
	case_t c[NPROMPT];
	make_cases(c, 0.0);
	for (int i = 0; i < NPROMPT; i++)
		solo(&c[i]);
	run_batched(c, 3, 7); /* prompts fed 7 tokens a step, shared */
	run_batched(c, 1, 1); /* the degenerate case: one row a step */
	free_cases(c);
}

static void seeded_sampling_is_independent_of_batch_mates(void **st)
{
	(void)st;
	case_t c[NPROMPT];
	make_cases(c, 0.8);
	for (int i = 0; i < NPROMPT; i++)
		solo(&c[i]);
	run_batched(c, 4, 64);
	free_cases(c);
}

static int stop_after_two(void *ctx, int32_t tok, double lp)
{
	(void)tok, (void)lp;
	return ++*(int *)ctx >= 2;
}

static void callback_and_cancel_end_one_request_only(void **st)
{
	(void)st;
	int32_t *p = et_tokens(10, info.vocab, 5);
	eng_batch *b = NULL;
	assert_int_equal(eng_batch_new(&b, m, NULL), 0);
	int count = 0;
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	g.max_tokens = 20;
	g.stop_ids = (int32_t[]){-5}; /* never produced: only length ends it */
	g.n_stop = 1;
	eng_batch_request a = {.prompt = p, .n_prompt = 10, .gen = g, .cb = stop_after_two, .cb_ctx = &count, .cookie = (void *)1};
	eng_batch_request q = {.prompt = p, .n_prompt = 10, .gen = g, .cookie = (void *)2};
	eng_batch_request r3 = {.prompt = p, .n_prompt = 10, .gen = g, .cookie = (void *)3};
	uint64_t id2, id3;
	assert_int_equal(eng_batch_add(b, &a, NULL), 0);
	assert_int_equal(eng_batch_add(b, &q, &id2), 0);
	assert_int_equal(eng_batch_add(b, &r3, &id3), 0);
	assert_int_equal(eng_batch_cancel(b, id3), 0); /* still queued */
	assert_int_equal(eng_batch_cancel(b, 999), EV_E_NOTFOUND);
	eng_batch_result res[3];
	int seen = 0;
	while (seen < 3) {
		assert_int_equal(eng_batch_step(b), 0);
		int n = eng_batch_take(b, res, 3);
		for (int k = 0; k < n; k++, seen++) {
			if (res[k].cookie == (void *)1) {
				assert_int_equal(res[k].reason, ENG_STOP_CALLBACK);
				assert_int_equal(res[k].n_tokens, 2);
			} else if (res[k].cookie == (void *)2) {
				assert_int_equal(res[k].reason, ENG_STOP_LENGTH);
				assert_int_equal(res[k].n_tokens, 20);
			} else {
				assert_int_equal(res[k].reason, ENG_STOP_CALLBACK);
				assert_int_equal(res[k].n_tokens, 0);
			}
			eng_batch_result_clear(&res[k]);
		}
	}
	eng_batch_free(b);
	free(p);
}

/* Many questions about one haystack: the prompts share a 300-token
 * prefix; with the prefix cache the later ones start from the first one's
 * KV pages, and every answer is still eng_generate's alone. One prompt
 * leaves the haystack at token 200 (a fork inside a page: copied), one
 * shares nothing. */
static void prefix_cache_reuses_a_haystack_with_identical_answers(void **st)
{
	(void)st;
	enum { NQ = 7, HAY = 300, QLEN = 9 };
	int32_t *hay = et_tokens(HAY, info.vocab, 4242);
	case_t c[NQ];
	for (int i = 0; i < NQ; i++) {
		int32_t *q = et_tokens(QLEN + 120, info.vocab, 500 + (uint64_t)i);
		c[i].n_prompt = HAY + QLEN;
		c[i].prompt = malloc((size_t)c[i].n_prompt * sizeof(int32_t));
		memcpy(c[i].prompt, hay, HAY * sizeof(int32_t));
		if (i == 4) /* leaves the haystack at token 200 */
			memcpy(c[i].prompt + 200, q, (HAY - 200) * sizeof(int32_t));
		if (i == 5) /* nothing in common */
			memcpy(c[i].prompt, q + QLEN, 100 * sizeof(int32_t));
		memcpy(c[i].prompt + HAY, q, QLEN * sizeof(int32_t));
		free(q);
		eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
		g.max_tokens = 6;
		g.stop_ids = NULL;
		c[i].gen = g;
		solo(&c[i]);
	}
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	o.max_batch = 2;
	o.prefix_min = 64;
	eng_batch *b = NULL;
	assert_int_equal(eng_batch_new(&b, m, &o), 0);
	for (int i = 0; i < NQ; i++) {
		eng_batch_request r = {.prompt = c[i].prompt, .n_prompt = c[i].n_prompt, .gen = c[i].gen, .cookie = &c[i]};
		assert_int_equal(eng_batch_add(b, &r, NULL), 0);
	}
	int got = 0, steps = 0;
	while (got < NQ) {
		assert_int_equal(eng_batch_step(b), 0);
		eng_batch_result res[4];
		int n = eng_batch_take(b, res, 4);
		for (int k = 0; k < n; k++, got++) {
			case_t *x = res[k].cookie;
			if (res[k].status)
				fail_msg("request failed: %s", res[k].error);
			assert_int_equal(res[k].n_tokens, x->n_want);
			assert_memory_equal(res[k].tokens, x->want, (size_t)x->n_want * sizeof(int32_t));
			eng_batch_result_clear(&res[k]);
		}
		assert_true(++steps < 10000);
	}
	/* the first starts beside the one sharing nothing; the other five
	 * wait for its prefill and start from its pages (the whole pages of
	 * its prompt): four with the haystack (the questions differ from
	 * their first token), one with the 200 tokens it shares */
	long cached = (HAY + QLEN) / info.block_size * info.block_size, reused = eng_batch_prefix_reused(b);
	print_message("prefix cache: %ld prompt tokens reused (pages of %d)\n", reused, info.block_size);
	assert_int_equal(reused, 4 * (cached < HAY ? cached : HAY) + 200);
	eng_batch_free(b);
	/* off: nothing reused, same answers (run_batched checks them) */
	o.prefix_cache = 0;
	assert_int_equal(eng_batch_new(&b, m, &o), 0);
	assert_int_equal(eng_batch_prefix_reused(b), 0);
	eng_batch_free(b);
	o.prefix_cache = 65;
	assert_int_equal(eng_batch_new(&b, m, &o), EV_E_INVALID);
	for (int i = 0; i < NQ; i++)
		free(c[i].prompt);
	free(hay);
}

/* Under a KV byte bound the cache gives way: three unrelated 309-token
 * prompts one after another, room for little more than two sequences;
 * kept prompts are dropped while the live KV is past half the bound, so
 * none fails for want of pages, and each answer is eng_generate's. */
static void prefix_cache_gives_way_under_a_kv_bound(void **st)
{
	(void)st;
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	mo.backend = ENG_BACKEND_CPU;
	mo.threads = 2;
	mo.block_size = info.block_size;
	uint64_t page = info.kv_bytes_per_token * (uint64_t)info.block_size;
	mo.kv_max_bytes = page * 44; /* a sequence here takes 20 pages */
	eng_model *mb = NULL;
	if (eng_model_load(&mb, dir, &mo))
		fail_msg("load: %s", ev_error_msg());
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	o.max_batch = 1;
	o.prefix_min = 64;
	eng_batch *b = NULL;
	assert_int_equal(eng_batch_new(&b, mb, &o), 0);
	case_t c[3];
	for (int i = 0; i < 3; i++) {
		c[i].n_prompt = 309;
		c[i].prompt = et_tokens(c[i].n_prompt, info.vocab, 900 + (uint64_t)i);
		eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
		g.max_tokens = 6;
		c[i].gen = g;
		solo(&c[i]);
		eng_batch_request r = {.prompt = c[i].prompt, .n_prompt = c[i].n_prompt, .gen = c[i].gen, .cookie = &c[i]};
		assert_int_equal(eng_batch_add(b, &r, NULL), 0);
	}
	int got = 0, steps = 0;
	while (got < 3) {
		assert_int_equal(eng_batch_step(b), 0);
		eng_batch_result res;
		while (eng_batch_take(b, &res, 1) == 1) {
			case_t *x = res.cookie;
			if (res.status)
				fail_msg("request failed: %s", res.error);
			assert_int_equal(res.n_tokens, x->n_want);
			assert_memory_equal(res.tokens, x->want, (size_t)x->n_want * sizeof(int32_t));
			eng_batch_result_clear(&res);
			got++;
		}
		assert_true(++steps < 10000);
		assert_true(eng_model_kv_bytes(mb) <= mo.kv_max_bytes);
	}
	eng_batch_free(b);
	assert_int_equal(eng_model_kv_bytes(mb), 0);
	for (int i = 0; i < 3; i++)
		free(c[i].prompt);
	eng_model_free(mb);
}

static void bad_requests_are_refused_or_failed_cleanly(void **st)
{
	(void)st;
	eng_batch *b = NULL;
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	o.max_batch = 0;
	assert_int_equal(eng_batch_new(&b, m, &o), EV_E_INVALID);
	assert_int_equal(eng_batch_new(&b, m, NULL), 0);
	int32_t bad = info.vocab;
	eng_batch_request r = {.prompt = &bad, .n_prompt = 1, .gen = (eng_generate_options)ENG_GENERATE_OPTIONS_INIT};
	assert_int_equal(eng_batch_add(b, &r, NULL), EV_E_INVALID);
	r.n_prompt = 0;
	assert_int_equal(eng_batch_add(b, &r, NULL), EV_E_INVALID);
	/* a prompt past the context limit fails at admission, not the process */
	int32_t *big = calloc(600, sizeof *big);
	eng_batch_request r2 = {.prompt = big, .n_prompt = 600, .gen = (eng_generate_options)ENG_GENERATE_OPTIONS_INIT};
	assert_int_equal(eng_batch_add(b, &r2, NULL), 0);
	assert_int_equal(eng_batch_step(b), 0);
	eng_batch_result res;
	assert_int_equal(eng_batch_take(b, &res, 1), 1);
	assert_int_equal(res.status, EV_E_LIMIT);
	assert_non_null(strstr(res.error, "context limit"));
	eng_batch_result_clear(&res);
	eng_batch_free(b);
	eng_batch_free(NULL);
	free(big);
}

/* The oracle of a prompt's log-probabilities: one eng_forward with every
 * row's logits, log-softmax in double by hand. */
static double oracle_lp(const float *row, int vocab, int tok)
{
	double mx = row[0], sum = 0;
	for (int v = 1; v < vocab; v++)
		mx = row[v] > mx ? row[v] : mx;
	for (int v = 0; v < vocab; v++)
		sum += exp(row[v] - mx);
	return row[tok] - mx - log(sum);
}

static void check_top(const eng_logprob *e, const float *row, int vocab, int n_top)
{
	assert_int_equal(e->n_top, n_top);
	for (int k = 0; k < n_top; k++) {
		/* descending, and nothing outside the list beats its last entry */
		if (k)
			assert_true(e->top_lp[k] <= e->top_lp[k - 1]);
		assert_true(fabs(e->top_lp[k] - oracle_lp(row, vocab, e->top_id[k])) < 1e-9);
	}
	int better = 0;
	for (int v = 0; v < vocab; v++)
		better += row[v] > row[e->top_id[n_top - 1]];
	assert_true(better <= n_top - 1);
}

static void prompt_and_token_logprobs_match_a_whole_forward(void **st)
{
	(void)st;
	/* 300 prompt tokens fed 64 a step beside a plain request: the rows
	 * cross step and forward-chunk (256) boundaries */
	int np = 300, V = info.vocab;
	int32_t *p = et_tokens(np, V, 77);
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	o.max_step_tokens = 64;
	eng_batch *b = NULL;
	assert_int_equal(eng_batch_new(&b, m, &o), 0);
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	g.max_tokens = 6;
	g.stop_ids = (int32_t[]){-5};
	g.n_stop = 1;
	eng_batch_request plain = {.prompt = p + 100, .n_prompt = 40, .gen = g, .cookie = (void *)1};
	eng_batch_request r = {.prompt = p, .n_prompt = np, .gen = g, .cookie = (void *)2, .logprobs = true,
	                       .prompt_logprobs = true, .top_logprobs = 3};
	eng_batch_request only = {.prompt = p, .n_prompt = 50, .gen = g, .cookie = (void *)3,
	                          .prompt_logprobs = true, .prompt_only = true};
	eng_batch_request bad = r;
	bad.top_logprobs = ENG_MAX_TOP_LOGPROBS + 1;
	assert_int_equal(eng_batch_add(b, &bad, NULL), EV_E_INVALID);
	assert_int_equal(eng_batch_add(b, &plain, NULL), 0);
	assert_int_equal(eng_batch_add(b, &r, NULL), 0);
	assert_int_equal(eng_batch_add(b, &only, NULL), 0);
	eng_batch_result res[3], got[3] = {{0}};
	int n = 0;
	while (n < 3) {
		assert_int_equal(eng_batch_step(b), 0);
		int k = eng_batch_take(b, res, 3);
		for (int i = 0; i < k; i++)
			got[(intptr_t)res[i].cookie - 1] = res[i];
		n += k;
	}
	assert_null(got[0].logprobs);
	assert_null(got[0].prompt_logprobs);
	assert_int_equal(got[1].n_tokens, 6);
	assert_int_equal(got[2].n_tokens, 0);
	assert_null(got[2].logprobs);
	/* the oracle: prompt and generated tokens through one sequence */
	int total = np + 6;
	int32_t *all = malloc((size_t)total * sizeof *all);
	memcpy(all, p, (size_t)np * sizeof *all);
	memcpy(all + np, got[1].tokens, 6 * sizeof *all);
	float *rows = malloc((size_t)total * V * sizeof *rows);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, all, total, rows), 0);
	const eng_logprob *pl = got[1].prompt_logprobs;
	assert_int_equal(pl[0].token, p[0]);
	assert_true(isnan(pl[0].logprob));
	for (int i = 1; i < np; i++) {
		const float *row = rows + (size_t)(i - 1) * V;
		assert_int_equal(pl[i].token, p[i]);
		assert_true(fabs(pl[i].logprob - oracle_lp(row, V, p[i])) < 1e-9);
		check_top(&pl[i], row, V, 3);
		if (i < 50) /* the prompt-only request scored the same rows */
			assert_true(got[2].prompt_logprobs[i].logprob == pl[i].logprob);
	}
	for (int i = 0; i < 6; i++) {
		const float *row = rows + (size_t)(np - 1 + i) * V;
		const eng_logprob *e = &got[1].logprobs[i];
		assert_int_equal(e->token, got[1].tokens[i]);
		assert_true(fabs(e->logprob - oracle_lp(row, V, e->token)) < 1e-9);
		check_top(e, row, V, 3);
		/* greedy: the chosen token is the first alternative, same value */
		assert_int_equal(e->top_id[0], e->token);
		assert_true(e->top_lp[0] == e->logprob);
	}
	eng_seq_free(s);
	for (int i = 0; i < 3; i++)
		eng_batch_result_clear(&got[i]);
	eng_batch_free(b);
	free(rows);
	free(all);
	free(p);
}

/* ---- thinking budget ----------------------------------------------------------------- */

/* Greedy tokens of `prompt` alone (no budget), up to max. */
static int greedy(const int32_t *prompt, int n, int max, int32_t *out, const eng_think_options *th, int *used)
{
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	g.max_tokens = max;
	if (th)
		g.think = *th;
	g.think_used_out = used;
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	int got = 0;
	eng_stop_reason why;
	int32_t stop_none = -1;
	g.stop_ids = &stop_none; /* no stop id (n_stop 0): run to max */
	g.n_stop = 0;
	if (eng_generate(s, prompt, n, &g, NULL, NULL, out, 256, &got, &why))
		fail_msg("generate: %s", ev_error_msg());
	eng_seq_free(s);
	return got;
}

/* The tokens inside blocks, counted again from the output (and the tags
 * in *tags); at the budget inside a block, the next token is the close. */
static int count_thinking(const int32_t *t, int n, const eng_think_options *o, int *tags)
{
	bool in = o->open_at_start;
	int used = 0;
	*tags = 0;
	for (int i = 0; i < n; i++) {
		if (in && used == o->budget && t[i] != o->close_id)
			fail_msg("token %d: budget %d spent inside a block, yet %d came and not the close", i, o->budget, t[i]);
		if (t[i] == o->open_id)
			in = true, ++*tags;
		else if (t[i] == o->close_id)
			in = false, ++*tags;
		else if (in)
			used++;
	}
	return used;
}

static int first_at(const int32_t *t, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (t[i] == id)
			return i;
	return -1;
}

/* An id the greedy answer never has. */
static int32_t unused_id(const int32_t *t, int n, int32_t from)
{
	for (int32_t id = from;; id++)
		if (first_at(t, n, id) < 0)
			return id;
}

static void thinking_budget_closes_the_block_at_the_budget(void **st)
{
	(void)st;
	int32_t *p = et_tokens(10, info.vocab, 4242);
	int32_t w[256], t[256];
	int nw = greedy(p, 10, 120, w, NULL, NULL);
	assert_int_equal(nw, 120);
	/* the close: an id whose first greedy occurrence is well inside */
	int k = -1;
	for (int i = 4; i < 40 && k < 0; i++)
		if (first_at(w, i, w[i]) < 0)
			k = i;
	assert_true(k >= 4);
	eng_think_options o = {.enforce = true, .open_at_start = true, .budget = 60, .close_id = w[k],
	                       .open_id = unused_id(w, nw, 3)};
	int used = -1, tags = 0;
	/* a block the model closes itself, under the budget: nothing forced;
	 * the answer after it is max_tokens long */
	int n = greedy(p, 10, 40, t, &o, &used);
	assert_int_equal(n, k + 1 + 40);
	assert_memory_equal(t, w, (size_t)n * sizeof *t);
	assert_int_equal(used, k);
	assert_int_equal(count_thinking(t, n, &o, &tags), used);
	assert_int_equal(tags, 1);

	for (int budget = 0; budget < k; budget += 3) {
		o.budget = budget;
		n = greedy(p, 10, 20, t, &o, &used);
		assert_int_equal(used, budget);
		assert_int_equal(count_thinking(t, n, &o, &tags), budget);
		/* the answer: max_tokens, or the cap of max_tokens + budget + 1 in all */
		assert_true(n - used - tags == 20 || n == 20 + budget + 1);
		assert_memory_equal(t, w, (size_t)budget * sizeof *t); /* the thinking, as sampled */
		assert_int_equal(t[budget], o.close_id);               /* closed at the budget */
		/* and the answer after it is what the model says after that close */
		int32_t q[64], a[256];
		memcpy(q, p, 10 * sizeof *q);
		memcpy(q + 10, t, (size_t)(budget + 1) * sizeof *q);
		int na = greedy(q, 10 + budget + 1, n - budget - 1, a, NULL, NULL);
		assert_int_equal(na, n - budget - 1);
		assert_memory_equal(a, t + budget + 1, (size_t)na * sizeof *a);
	}

	/* a block the model opens itself: counted from its open */
	eng_think_options o2 = {.enforce = true, .budget = 2, .open_id = w[3], .close_id = unused_id(w, nw, 7)};
	if (first_at(w, 3, w[3]) < 0) {
		n = greedy(p, 10, 30, t, &o2, &used);
		assert_memory_equal(t, w, 6 * sizeof *t);
		assert_int_equal(t[6], o2.close_id);
		assert_int_equal(used, count_thinking(t, n, &o2, &tags));
		assert_true(used <= 2);
	}

	/* batched: the same tokens and counts as alone, mates with other budgets */
	eng_batch *b = NULL;
	eng_batch_options bo = ENG_BATCH_OPTIONS_INIT;
	bo.max_batch = 4;
	assert_int_equal(eng_batch_new(&b, m, &bo), 0);
	int32_t want[4][256];
	int nwant[4], uwant[4];
	int32_t stop_none = -1;
	for (int i = 0; i < 4; i++) {
		o.budget = i * 2;
		nwant[i] = greedy(p, 10 - i, 15, want[i], &o, &uwant[i]);
		eng_batch_request r = {.prompt = p, .n_prompt = 10 - i, .cookie = (void *)(intptr_t)i};
		r.gen = (eng_generate_options)ENG_GENERATE_OPTIONS_INIT;
		r.gen.max_tokens = 15;
		r.gen.stop_ids = &stop_none;
		r.gen.n_stop = 1;
		r.gen.think = o;
		assert_int_equal(eng_batch_add(b, &r, NULL), 0);
	}
	int got = 0;
	while (got < 4) {
		assert_int_equal(eng_batch_step(b), 0);
		eng_batch_result res[4];
		int nr = eng_batch_take(b, res, 4);
		for (int q = 0; q < nr; q++, got++) {
			int i = (int)(intptr_t)res[q].cookie;
			assert_int_equal(res[q].status, 0);
			assert_int_equal(res[q].n_tokens, nwant[i]);
			assert_int_equal(res[q].n_think, uwant[i]);
			assert_memory_equal(res[q].tokens, want[i], (size_t)nwant[i] * sizeof(int32_t));
			eng_batch_result_clear(&res[q]);
		}
	}
	/* a budget without a valid close id is refused */
	eng_batch_request bad = {.prompt = p, .n_prompt = 3};
	bad.gen = (eng_generate_options)ENG_GENERATE_OPTIONS_INIT;
	bad.gen.think = (eng_think_options){.enforce = true, .budget = 4, .close_id = info.vocab};
	assert_int_equal(eng_batch_add(b, &bad, NULL), EV_E_INVALID);
	eng_batch_free(b);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(batched_greedy_equals_sequential_greedy),
		cmocka_unit_test(chunked_prefill_keeps_results_identical),
		cmocka_unit_test(seeded_sampling_is_independent_of_batch_mates),
		cmocka_unit_test(callback_and_cancel_end_one_request_only),
		cmocka_unit_test(bad_requests_are_refused_or_failed_cleanly),
		cmocka_unit_test(prefix_cache_reuses_a_haystack_with_identical_answers),
		cmocka_unit_test(prefix_cache_gives_way_under_a_kv_bound),
		cmocka_unit_test(prompt_and_token_logprobs_match_a_whole_forward),
		cmocka_unit_test(thinking_budget_closes_the_block_at_the_budget),
	};
	const struct CMUnitTest m3[] = {
		cmocka_unit_test(batched_greedy_equals_sequential_greedy),
		cmocka_unit_test(chunked_prefill_keeps_results_identical),
		cmocka_unit_test(prefix_cache_reuses_a_haystack_with_identical_answers),
	};
	int failed = cmocka_run_group_tests_name("llama", tests, setup, teardown);
	return failed + cmocka_run_group_tests_name("minimax_m3", m3, setup_m3, teardown);
}
