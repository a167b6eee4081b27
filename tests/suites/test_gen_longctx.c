/* Long-context generators: every task's samples hit their target length in
 * the real tokenizer's tokens once the chat template is applied, the
 * needle sits at the asked depth, the output is a loadable suite, and the
 * seed alone decides the bytes. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tokenizer.h"
#include "scoring/scoring.h"
#include "suites/suites.h"

static eng_tokenizer *TOK;
static char *TOKDIR;

static int count_cb(void *ctx, const char *text, size_t len, size_t *out)
{
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = eng_tokenize(ctx, text, len, true, &ids, &n);
	free(ids);
	*out = n;
	return rc;
}

static int render_cb(void *ctx, const ev_token_msg *msgs, size_t n, const char *tools, char **out, size_t *len)
{
	(void)ctx;
	eng_chat_msg *m = calloc(n + 1, sizeof *m);
	if (!m)
		return EV_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		m[i].role = msgs[i].role;
		m[i].content = msgs[i].content;
		m[i].tool_calls_json = msgs[i].tool_calls_json;
		m[i].tool_call_id = msgs[i].tool_call_id;
		m[i].name = msgs[i].name;
	}
	int rc = eng_chat_render(out, len, ENG_CHAT_CHATML, m, n, tools, true);
	free(m);
	return rc;
}

static size_t ntok(const char *text, size_t len)
{
	size_t n = 0;
	assert_int_equal(count_cb(TOK, text, len, &n), 0);
	return n;
}

static int setup(void **state)
{
	(void)state;
	if (getenv("LC_DEBUG"))
		ev_log_set_level(EV_LOG_DEBUG);
	TOKDIR = tu_tmpdir("longctx-tok");
	if (eng_tokenizer_write_default(TOKDIR, 2048, "chatml") != 0 || eng_tokenizer_load(&TOK, TOKDIR) != 0) {
		fprintf(stderr, "tokenizer: %s\n", ev_error_msg());
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	eng_tokenizer_free(TOK);
	free(TOKDIR);
	return 0;
}

static ev_token_counter counter(void)
{
	ev_token_counter tc = {count_cb, render_cb, TOK};
	return tc;
}

static char *gen(const char *tag, const char *const *tasks, size_t n_tasks, const size_t *lens, size_t n_lens,
		 const int *depths, size_t n_depths, int samples, uint64_t seed)
{
	char *dir = tu_tmpdir(tag);
	char *out = tu_path(dir, "suite");
	ev_longctx_options o = EV_LONGCTX_OPTIONS_INIT;
	o.tasks = tasks;
	o.n_tasks = n_tasks;
	o.lengths = lens;
	o.n_lengths = n_lens;
	o.depths = depths;
	o.n_depths = n_depths;
	o.samples = samples;
	o.seed = seed;
	ev_token_counter tc = counter();
	int rc = ev_gen_longctx(&o, &tc, out);
	if (rc)
		fail_msg("ev_gen_longctx: %s", ev_error_msg());
	free(dir);
	return out;
}

/* The prompt a model sees for a stored sample. */
static char *render_sample(const ev_sample *s, const char *tools, size_t *len)
{
	ev_token_msg *m = calloc(s->n_messages, sizeof *m);
	char **texts = calloc(s->n_messages, sizeof *texts);
	assert_non_null(m);
	assert_non_null(texts);
	for (size_t i = 0; i < s->n_messages; i++) {
		const ev_message *x = &s->messages[i];
		texts[i] = x->n_parts ? ev_message_text(x) : NULL;
		m[i].role = x->role;
		m[i].content = texts[i];
		m[i].tool_calls_json = x->tool_calls_json;
		m[i].tool_call_id = x->tool_call_id;
		m[i].name = x->name;
	}
	char *out = NULL;
	assert_int_equal(render_cb(NULL, m, s->n_messages, tools, &out, len), 0);
	for (size_t i = 0; i < s->n_messages; i++)
		free(texts[i]);
	free(texts);
	free(m);
	return out;
}

static double meta_num(const ev_sample *s, const char *key)
{
	cJSON *j = cJSON_Parse(s->metadata_json);
	assert_non_null(j);
	double v = ev_json_num(j, key, -1e9);
	cJSON_Delete(j);
	return v;
}

static double worst_len_err, worst_depth_err;

/* Every sample's rendered prompt is at most its target and within
 * max(16, 0.5%) of it; the recorded count is the real one. */
static void check_lengths(const ev_suite *s)
{
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		size_t len = 0;
		char *p = render_sample(x, x->tools_json, &len);
		size_t n = ntok(p, len);
		size_t target = (size_t)meta_num(x, "length");
		size_t tol = target / 200 > 16 ? target / 200 : 16;
		if (n > target || target - n > tol)
			fail_msg("%s: %zu tokens for a target of %zu", x->id, n, target);
		assert_int_equal((size_t)meta_num(x, "tokens"), n);
		double e = (double)(target - n) / (double)target;
		if (e > worst_len_err)
			worst_len_err = e;
		free(p);
	}
}

static void all_tasks_fit_their_length_and_load(void **state)
{
	(void)state;
	static const char *const tasks[] = {"niah", "multikey", "multivalue", "multiquery", "vt", "cwe", "agent"};
	static const size_t lens[] = {1500, 4096};
	static const int depths[] = {0, 50, 100};
	char *dir = gen("longctx-all", tasks, 7, lens, 2, depths, 3, 1, 11);
	ev_suite *s = NULL;
	ev_suite_options so = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &so))
		fail_msg("load: %s", ev_error_msg());
	assert_string_equal(s->kind, "long-context");
	assert_string_equal(s->name, "longctx");
	/* 5 depth tasks x 2 lengths x 3 depths + vt, cwe x 2 lengths */
	assert_int_equal(s->n_samples, 5 * 2 * 3 + 2 * 2);
	check_lengths(s);
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		assert_true(x->n_targets >= 1);
		assert_non_null(x->checker_json);
		/* The answers are in the prompt (needles, or the word list). */
		char *last = ev_message_text(&x->messages[x->n_messages - 1]);
		size_t len = 0;
		char *p = render_sample(x, x->tools_json, &len);
		for (size_t t = 0; t < x->n_targets; t++)
			if (!strstr(p, x->targets[t]))
				fail_msg("%s: target %s is not in the prompt", x->id, x->targets[t]);
		free(p);
		free(last);
		if (x->n_targets > 1)
			assert_non_null(strstr(x->checker_json, "regex"));
		if (!strncmp(x->id, "agent", 5)) {
			assert_non_null(x->tools_json);
			assert_true(x->n_messages > 6);
			assert_non_null(x->messages[2].tool_calls_json);
			assert_string_equal(x->messages[3].role, "tool");
		}
	}
	fprintf(stderr, "worst length shortfall: %.3f%%\n", 100 * worst_len_err);
	ev_suite_free(s);
	free(dir);
}

/* The needle's first token sits at the asked share of the haystack's
 * tokens (within 2%), and the recorded position is the real one. */
static void check_depths(const ev_suite *s)
{
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		size_t len = 0;
		char *p = render_sample(x, NULL, &len);
		const char *hs = strstr(p, "Document:");
		const char *nd = strstr(p, "The special ");
		const char *he = strstr(p, "\n\nWhat is the special");
		assert_non_null(hs);
		assert_non_null(nd);
		assert_non_null(he);
		hs += strlen("Document:");
		nd--; /* the needle's separator starts its first token */
		const char *ne = strchr(nd + 1, '.');
		assert_non_null(ne);
		size_t t_hs = ntok(p, (size_t)(hs - p)), t_nd = ntok(p, (size_t)(nd - p)), t_he = ntok(p, (size_t)(he - p));
		size_t t_needle = ntok(nd, (size_t)(ne + 1 - nd));
		double hay = (double)(t_he - t_hs) - (double)t_needle;
		double depth = (double)(t_nd - t_hs) / hay;
		double want = meta_num(x, "depth") / 100.0;
		double e = depth > want ? depth - want : want - depth;
		if (e > 0.02)
			fail_msg("%s: needle at %.2f%% of the haystack, asked %.0f%%", x->id, 100 * depth, 100 * want);
		if (e > worst_depth_err)
			worst_depth_err = e;
		double rec = meta_num(x, "needle_token");
		assert_true(rec >= (double)t_nd - 1 && rec <= (double)t_nd + 1);
		free(p);
	}
}

static void niah_needle_sits_at_asked_depth(void **state)
{
	(void)state;
	static const char *const tasks[] = {"niah"};
	static const size_t lens[] = {4096, 16384};
	static const int depths[] = {0, 10, 25, 50, 75, 90, 100};
	char *dir = gen("longctx-depth", tasks, 1, lens, 2, depths, 7, 2, 5);
	ev_suite *s = NULL;
	ev_suite_options so = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &so))
		fail_msg("load: %s", ev_error_msg());
	check_lengths(s);
	check_depths(s);
	fprintf(stderr, "worst depth error: %.3f%%\n", 100 * worst_depth_err);
	ev_suite_free(s);
	free(dir);
}

/* The same with a published tokenizer (GPT-2's, from the shared data) at
 * 128k tokens. */
static void real_tokenizer_128k_niah_fits(void **state)
{
	(void)state;
	char *g = tu_shared("tokenizers/gpt2");
	if (!g) {
		fprintf(stderr, "skipped: shared data absent (no tokenizers/gpt2)\n");
		skip();
	}
	eng_tokenizer *mine = TOK, *gpt2 = NULL;
	if (eng_tokenizer_load(&gpt2, g))
		fail_msg("gpt2: %s", ev_error_msg());
	TOK = gpt2;
	static const char *const tasks[] = {"niah"};
	/* EV_LONGCTX_1M=1 adds a million-token sample (seconds more). */
	static const size_t lens[] = {131072, 1048576};
	size_t n_lens = getenv("EV_LONGCTX_1M") ? 2 : 1;
	static const int depths[] = {0, 35, 100};
	double t0 = ev_now();
	char *dir = gen("longctx-gpt2", tasks, 1, lens, n_lens, depths, 3, 1, 9);
	fprintf(stderr, "%zu niah samples of %s: %.2f s\n", 3 * n_lens, n_lens > 1 ? "128k and 1m" : "128k",
		ev_now() - t0);
	worst_len_err = worst_depth_err = 0;
	ev_suite *s = NULL;
	ev_suite_options so = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &so))
		fail_msg("load: %s", ev_error_msg());
	assert_int_equal(s->n_samples, 3 * n_lens);
	check_lengths(s);
	check_depths(s);
	fprintf(stderr, "gpt2: worst length shortfall %.3f%%, worst depth error %.3f%%\n", 100 * worst_len_err,
		100 * worst_depth_err);
	ev_suite_free(s);
	TOK = mine;
	eng_tokenizer_free(gpt2);
	free(dir);
	free(g);
}

static double score(const ev_sample *x, const char *answer)
{
	ev_checker *c = NULL;
	if (ev_checker_new(&c, x->checker_json))
		fail_msg("%s: checker: %s", x->id, ev_error_msg());
	ev_verdict v;
	memset(&v, 0, sizeof v);
	if (ev_checker_score(c, x, answer, false, &v))
		fail_msg("%s: score: %s", x->id, ev_error_msg());
	double r = v.score;
	ev_verdict_clear(&v);
	ev_checker_free(c);
	return r;
}

/* Several answers: the sample's own checker wants all of them, in any
 * order and case, as whole words; one answer alone scores the usual way. */
static void checkers_need_every_answer(void **state)
{
	(void)state;
	static const char *const tasks[] = {"niah", "multivalue", "multiquery", "vt", "cwe"};
	static const size_t lens[] = {1024};
	static const int depths[] = {40};
	char *dir = gen("longctx-check", tasks, 5, lens, 1, depths, 1, 1, 3);
	ev_suite *s = NULL;
	ev_suite_options so = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &so))
		fail_msg("load: %s", ev_error_msg());
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		ev_buf all = EV_BUF_INIT(1 << 16), some = EV_BUF_INIT(1 << 16);
		for (size_t t = x->n_targets; t-- > 0;) {
			assert_int_equal(ev_buf_printf(&all, "%s, ", x->targets[t]), 0);
			if (t)
				assert_int_equal(ev_buf_printf(&some, "%s, ", x->targets[t]), 0);
		}
		assert_true(score(x, all.data) == 1.0);
		assert_true(score(x, "I could not find it.") == 0.0);
		if (x->n_targets > 1) {
			assert_true(score(x, some.data) == 0.0);
			/* A target inside a longer word does not count. */
			char *glued = ev_asprintf("%sX %s", x->targets[0], some.data);
			assert_true(score(x, glued) == 0.0);
			free(glued);
		}
		ev_buf_free(&all);
		ev_buf_free(&some);
	}
	ev_suite_free(s);
	free(dir);
}

static char *samples_of(const char *dir)
{
	char *path = tu_path(dir, "samples.jsonl"), *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, path, (size_t)1 << 30), 0);
	free(path);
	return text;
}

static void same_seed_same_bytes_other_seed_other_bytes(void **state)
{
	(void)state;
	static const char *const tasks[] = {"niah", "multikey", "vt", "cwe", "agent"};
	static const size_t lens[] = {2048};
	static const int depths[] = {30};
	char *a = gen("longctx-seed-a", tasks, 5, lens, 1, depths, 1, 2, 42);
	char *b = gen("longctx-seed-b", tasks, 5, lens, 1, depths, 1, 2, 42);
	char *c = gen("longctx-seed-c", tasks, 5, lens, 1, depths, 1, 2, 43);
	char *ta = samples_of(a), *tb = samples_of(b), *tcx = samples_of(c);
	assert_string_equal(ta, tb);
	assert_true(strcmp(ta, tcx) != 0);
	free(ta);
	free(tb);
	free(tcx);
	free(a);
	free(b);
	free(c);
}

static void bad_options_are_refused(void **state)
{
	(void)state;
	size_t n = 0;
	assert_int_equal(ev_longctx_parse_length(&n, "4k"), 0);
	assert_int_equal(n, 4096);
	assert_int_equal(ev_longctx_parse_length(&n, "128k"), 0);
	assert_int_equal(n, 131072);
	assert_int_equal(ev_longctx_parse_length(&n, "1m"), 0);
	assert_int_equal(n, 1048576);
	assert_int_equal(ev_longctx_parse_length(&n, "300"), 0);
	assert_int_equal(n, 300);
	assert_int_equal(ev_longctx_parse_length(&n, "0"), EV_E_INVALID);
	assert_int_equal(ev_longctx_parse_length(&n, "-4k"), EV_E_INVALID);
	assert_int_equal(ev_longctx_parse_length(&n, "4q"), EV_E_INVALID);
	assert_int_equal(ev_longctx_parse_length(&n, "99m"), EV_E_INVALID);
	assert_int_equal(ev_longctx_parse_length(&n, ""), EV_E_INVALID);

	char *dir = tu_tmpdir("longctx-bad");
	char *out = tu_path(dir, "s");
	ev_token_counter tc = counter();
	ev_longctx_options o = EV_LONGCTX_OPTIONS_INIT;
	static const char *const bad_task[] = {"haystack"};
	o.tasks = bad_task;
	o.n_tasks = 1;
	assert_int_equal(ev_gen_longctx(&o, &tc, out), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "haystack"));
	static const char *const niah[] = {"niah"};
	o.tasks = niah;
	static const int bad_depth[] = {120};
	o.depths = bad_depth;
	o.n_depths = 1;
	assert_int_equal(ev_gen_longctx(&o, &tc, out), EV_E_INVALID);
	o.n_depths = 0;
	static const size_t tiny[] = {20};
	o.lengths = tiny;
	o.n_lengths = 1;
	assert_int_equal(ev_gen_longctx(&o, &tc, out), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "too small"));
	free(out);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_options_are_refused),
		cmocka_unit_test(all_tasks_fit_their_length_and_load),
		cmocka_unit_test(niah_needle_sits_at_asked_depth),
		cmocka_unit_test(same_seed_same_bytes_other_seed_other_bytes),
		cmocka_unit_test(checkers_need_every_answer),
		cmocka_unit_test(real_tokenizer_128k_niah_fits),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
