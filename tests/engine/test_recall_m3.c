/*
 * The MiniMax-M3 recall checkpoint (eng_mkrecall_m3): at 3,072 tokens (24
 * blocks of 128, the indexer keeping 16) its lightning indexer finds the
 * needle's block among fillers at two depths and among 256 distractor
 * pairs (a block scores the max of its keys, so distractors do not add
 * up), skipping blocks by their bounds; attending every key answers too.
 * A few prompts only: it runs under the sanitizers in CI.
 */
#include <string.h>

#include "tests/engine/engine_testutil.h"
#include "engine/make/make.h"

static int argmax(const float *v, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[b])
			b = i;
	return b;
}

static bool answers(eng_model *m, long n, int depth, int distractors, uint64_t seed)
{
	eng_model_info in;
	eng_model_get_info(m, &in);
	int32_t *t = malloc((size_t)n * sizeof(*t)), want;
	assert_non_null(t);
	assert_int_equal(eng_recall_tokens(t, n, depth, distractors, seed, &want), 0);
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, (int)n, NULL), 0);
	bool ok = argmax(eng_seq_logits(s), in.vocab) == want;
	eng_seq_free(s);
	free(t);
	return ok;
}

static void recall_m3_indexer_finds_the_needle(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("recall_m3");
	assert_int_equal(eng_mkrecall_m3(dir), 0);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 2;
	eng_model *m = NULL;
	if (eng_model_load(&m, dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	assert_true(eng_model_is_recall(m));
	eng_attention_options at;
	eng_model_get_attention(m, &at);
	assert_int_equal(at.selector, ENG_SEL_INDEXER);
	int ok = answers(m, 3072, 10, 0, 11) + answers(m, 3072, 60, 0, 12) + answers(m, 3072, 35, 256, 13);
	print_message("recall_m3, indexer, 3072 tokens: %d/3 answered (two depths; 256 distractors)\n", ok);
	assert_int_equal(ok, 3);
	eng_index_counts c;
	eng_model_index_counts(m, &c);
	assert_true(c.candidates > 0 && c.scored > 0 && c.scored < c.candidates); /* the bound skipped blocks */
	print_message("recall_m3: %ld of %ld candidate blocks scored exactly\n", c.scored, c.candidates);
	assert_int_equal(eng_model_set_attention(m, ENG_ATTN_DENSE), 0);
	assert_true(answers(m, 3072, 10, 0, 11));
	eng_model_free(m);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(recall_m3_indexer_finds_the_needle),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
