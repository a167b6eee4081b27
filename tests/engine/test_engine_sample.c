/*
 * Sampling and generation: greedy, temperature, top-k, top-p, min-p,
 * seeds, the repetition penalty, log-probabilities, stop ids and limits.
 */
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

static int32_t pick(const eng_sample_options *o, const float *lg, int V, const int32_t *hist, long nh, double *lp)
{
	eng_sampler *s = NULL;
	assert_int_equal(eng_sampler_new(&s, o, V), 0);
	int32_t t = -1;
	assert_int_equal(eng_sample(s, &t, lp, lg, hist, nh), 0);
	eng_sampler_free(s);
	return t;
}

static void greedy_takes_argmax_lowest_on_ties(void **state)
{
	float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
	eng_sample_options o = ENG_SAMPLE_OPTIONS_INIT;
	double lp;
	assert_int_equal(pick(&o, lg, 6, NULL, 0, &lp), 1);
	/* logprob is the raw log-softmax */
	double z = 0;
	for (int i = 0; i < 6; i++)
		z += exp(lg[i]);
	assert_true(fabs(lp - (2.0 - log(z))) < 1e-9);
}

static void truncations_reduce_to_greedy(void **state)
{
	float lg[5] = {0.1f, 1.0f, 3.0f, 2.9f, -2.0f};
	for (uint64_t seed = 0; seed < 50; seed++) {
		eng_sample_options o = ENG_SAMPLE_OPTIONS_INIT;
		o.temperature = 1.5;
		o.seed = seed;
		o.top_k = 1;
		assert_int_equal(pick(&o, lg, 5, NULL, 0, NULL), 2);
		o.top_k = 0;
		o.top_p = 0.05;
		assert_int_equal(pick(&o, lg, 5, NULL, 0, NULL), 2);
		o.top_p = 1;
		o.min_p = 1.0;
		assert_int_equal(pick(&o, lg, 5, NULL, 0, NULL), 2);
		/* top-k 2 never leaves the two best */
		o.min_p = 0;
		o.top_k = 2;
		int32_t t = pick(&o, lg, 5, NULL, 0, NULL);
		assert_true(t == 2 || t == 3);
	}
}

/* At temperature 1 the draws follow softmax; the same seed repeats. */
static void draws_follow_softmax_and_seed_repeats(void **state)
{
	float lg[4] = {0.0f, 1.0f, 2.0f, -1.0f};
	eng_sample_options o = ENG_SAMPLE_OPTIONS_INIT;
	o.temperature = 1.0;
	o.seed = 42;
	eng_sampler *s = NULL, *s2 = NULL;
	assert_int_equal(eng_sampler_new(&s, &o, 4), 0);
	assert_int_equal(eng_sampler_new(&s2, &o, 4), 0);
	int cnt[4] = {0};
	int N = 20000;
	for (int i = 0; i < N; i++) {
		int32_t t, t2;
		assert_int_equal(eng_sample(s, &t, NULL, lg, NULL, 0), 0);
		assert_int_equal(eng_sample(s2, &t2, NULL, lg, NULL, 0), 0);
		assert_int_equal(t, t2);
		cnt[t]++;
	}
	double z = 0;
	for (int i = 0; i < 4; i++)
		z += exp(lg[i]);
	for (int i = 0; i < 4; i++) {
		double p = exp(lg[i]) / z, sd = sqrt(p * (1 - p) / N);
		assert_true(fabs((double)cnt[i] / N - p) < 5 * sd);
	}
	/* top-p 0.7 keeps {2, 1} (0.665 + 0.245 >= 0.7) and never draws 0 or 3 */
	eng_sampler_free(s);
	o.top_p = 0.7;
	assert_int_equal(eng_sampler_new(&s, &o, 4), 0);
	for (int i = 0; i < 2000; i++) {
		int32_t t;
		assert_int_equal(eng_sample(s, &t, NULL, lg, NULL, 0), 0);
		assert_true(t == 1 || t == 2);
	}
	eng_sampler_free(s);
	eng_sampler_free(s2);
}

static void repetition_penalty_discourages_seen_tokens(void **state)
{
	float lg[3] = {2.0f, 1.5f, -0.5f};
	eng_sample_options o = ENG_SAMPLE_OPTIONS_INIT;
	o.repetition_penalty = 2.0; /* 2.0 -> 1.0, below 1.5 */
	int32_t hist[3] = {0, 0, 0};
	assert_int_equal(pick(&o, lg, 3, hist, 3, NULL), 1);
	assert_int_equal(pick(&o, lg, 3, NULL, 0, NULL), 0);
	/* bad options are refused */
	eng_sampler *s = NULL;
	o.top_p = 0;
	assert_int_equal(eng_sampler_new(&s, &o, 3), EV_E_INVALID);
}

static int count_cb(void *ctx, int32_t t, double lp)
{
	int *n = ctx;
	assert_true(lp <= 0);
	return ++*n >= 3; /* stop after three */
}

/* Greedy generation equals the argmax chain of the logits; stop ids,
 * max_tokens and the callback end it. */
static void generate_follows_logits_and_stops(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	char *dir = et_mkmodel("gen", "llama", &z, "f32", 5);
	eng_model *m = et_load(dir, ENG_BACKEND_CPU, 16);
	int32_t prompt[4] = {10, 20, 30, 40}, out[16];
	int n = 0;
	eng_stop_reason why;
	eng_seq *s = NULL;
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	g.max_tokens = 8;
	int32_t none = -5;
	g.stop_ids = &none;
	g.n_stop = 1;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_generate(s, prompt, 4, &g, NULL, NULL, out, 16, &n, &why), 0);
	assert_int_equal(n, 8);
	assert_int_equal(why, ENG_STOP_LENGTH);
	/* the oracle: argmax of the logits of prompt + out[..i] */
	int32_t all[12];
	memcpy(all, prompt, sizeof(prompt));
	memcpy(all + 4, out, 8 * sizeof(int32_t));
	float *lg = et_logits(m, all, 11, 0);
	for (int i = 0; i < 8; i++) {
		const float *row = lg + (size_t)(3 + i) * z.vocab;
		int best = 0;
		for (int j = 1; j < z.vocab; j++)
			if (row[j] > row[best])
				best = j;
		assert_int_equal(best, out[i]);
	}
	free(lg);
	/* stop at the 3rd generated token, given as a stop id */
	eng_seq_free(s);
	assert_int_equal(eng_seq_new(&s, m), 0);
	g.stop_ids = &out[2];
	assert_int_equal(eng_generate(s, prompt, 4, &g, NULL, NULL, NULL, 0, &n, &why), 0);
	assert_int_equal(why, ENG_STOP_EOS);
	assert_true(n <= 2);
	/* the callback stops it */
	eng_seq_free(s);
	assert_int_equal(eng_seq_new(&s, m), 0);
	g.stop_ids = &none;
	int cnt = 0;
	assert_int_equal(eng_generate(s, prompt, 4, &g, count_cb, &cnt, NULL, 0, &n, &why), 0);
	assert_int_equal(why, ENG_STOP_CALLBACK);
	assert_int_equal(n, 3);
	eng_seq_free(s);
	eng_model_free(m);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(greedy_takes_argmax_lowest_on_ties),
		cmocka_unit_test(truncations_reduce_to_greedy),
		cmocka_unit_test(draws_follow_softmax_and_seed_repeats),
		cmocka_unit_test(repetition_penalty_discourages_seen_tokens),
		cmocka_unit_test(generate_follows_logits_and_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
