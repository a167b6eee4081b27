/*
 * The constructed recall checkpoint (engine/mkrecall.c): with dense
 * attention it answers every length and depth tested, with and without
 * distractor pairs; its suite's text tokenizes to one token a word and the
 * generated answer is the target; MSA keeps the needle among fillers and
 * the test reports what it loses under dense distractors.
 */
#include <string.h>

#include "tests/engine/engine_testutil.h"
#include "suites/suites.h"

static char *g_dir;

static int setup(void **state)
{
	g_dir = tu_tmpdir("recall");
	return eng_mkrecall(g_dir) ? -1 : 0;
}

static eng_model *load_recall(eng_attention_kind kind, int top_k)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.threads = 2;
	o.attention.kind = kind;
	o.attention.top_k = top_k;
	o.attention.dense_below = 0;
	eng_model *m = NULL;
	if (eng_model_load(&m, g_dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	return m;
}

static int argmax(const float *v, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[b])
			b = i;
	return b;
}

/* how many are answered over depths 0, 25, .., 100 */
static int answered(eng_model *m, long n, int distractors, uint64_t seed, int *total)
{
	eng_model_info in;
	eng_model_get_info(m, &in);
	int32_t *t = malloc((size_t)n * sizeof(*t));
	assert_non_null(t);
	int ok = 0;
	*total = 0;
	for (int depth = 0; depth <= 100; depth += 25) {
		int32_t want;
		assert_int_equal(eng_recall_tokens(t, n, depth, distractors, seed + (uint64_t)depth, &want), 0);
		eng_seq *s = NULL;
		assert_int_equal(eng_seq_new(&s, m), 0);
		assert_int_equal(eng_forward(s, t, (int)n, NULL), 0);
		ok += argmax(eng_seq_logits(s), in.vocab) == want;
		(*total)++;
		eng_seq_free(s);
	}
	free(t);
	return ok;
}

static void recall_checkpoint_answers_every_length_and_depth_dense(void **state)
{
	eng_model *m = load_recall(ENG_ATTN_DENSE, 16);
	long lengths[] = {16, 1024, 4096};
	for (int i = 0; i < 3; i++)
		for (int d = 0; d < 2; d++) {
			int nd = d ? (int)(lengths[i] / 4) : 0, total;
			int ok = answered(m, lengths[i], nd, 100 + (uint64_t)i, &total);
			print_message("dense %5ld tokens, %4d distractors: %d/%d\n", lengths[i], nd, ok, total);
			assert_int_equal(ok, total);
		}
	eng_model_free(m);
}

static int make_recall(void *ctx, char **text, char answer[16], long length, int depth, int distractors,
                       uint64_t seed)
{
	(void)ctx;
	return eng_recall_text(text, answer, length, depth, distractors, seed);
}

static void recall_suite_text_gives_the_target(void **state)
{
	char *sdir = tu_tmpdir("recallsuite");
	long lengths[] = {40, 300};
	int depths[] = {0, 50, 100};
	ev_recall_options ro = {.lengths = lengths, .nlengths = 2, .depths = depths, .ndepths = 3, .samples = 2,
	                        .distractors = 5, .seed = 9};
	assert_int_equal(ev_gen_recall(&ro, make_recall, NULL, sdir), 0);
	char *path = tu_path(sdir, "samples.jsonl"), *text = NULL;
	size_t len;
	assert_int_equal(ev_file_read(&text, &len, path, 1 << 24), 0);
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_load(&tok, g_dir), 0);
	eng_model *m = load_recall(ENG_ATTN_DENSE, 16);
	int lines = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		cJSON *o = NULL;
		assert_int_equal(ev_json_parse(&o, line, strlen(line), "samples.jsonl"), 0);
		const char *input = ev_json_str(o, "input", NULL), *target = ev_json_str(o, "target", NULL);
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
		long want_len = (long)cJSON_GetObjectItemCaseSensitive(meta, "length")->valuedouble;
		int32_t *ids = NULL;
		size_t n = 0;
		assert_int_equal(eng_tokenize(tok, input, strlen(input), false, &ids, &n), 0);
		assert_int_equal((long)n, want_len);
		eng_seq *s = NULL;
		assert_int_equal(eng_seq_new(&s, m), 0);
		eng_generate_options go = ENG_GENERATE_OPTIONS_INIT;
		go.max_tokens = 4;
		int32_t out[4];
		int nout = 0;
		eng_stop_reason why;
		assert_int_equal(eng_generate(s, ids, (int)n, &go, NULL, NULL, out, 4, &nout, &why), 0);
		char *dec = NULL;
		assert_int_equal(eng_detokenize(tok, out, (size_t)nout, true, &dec, NULL), 0);
		assert_string_equal(dec, target);
		assert_int_equal(why, ENG_STOP_EOS);
		free(dec), free(ids);
		eng_seq_free(s);
		cJSON_Delete(o);
		lines++;
	}
	assert_int_equal(lines, 2 * 3 * 2);
	eng_model_free(m);
	eng_tokenizer_free(tok);
	free(text), free(path), free(sdir);
}

static void recall_msa_keeps_needle_among_fillers_and_reports_distractor_losses(void **state)
{
	/* 4096 tokens = 64 blocks; top_k 2 attends 5 of them */
	eng_model *m = load_recall(ENG_ATTN_MSA, 2);
	int total, ok = answered(m, 4096, 0, 7, &total);
	print_message("msa top_k 2, 4096 tokens, no distractors: %d/%d\n", ok, total);
	assert_int_equal(ok, total);
	int dens[] = {64, 512, 2048};
	for (int i = 0; i < 3; i++) {
		ok = answered(m, 4096, dens[i], 7, &total);
		print_message("msa top_k 2, 4096 tokens, %4d distractors: %d/%d\n", dens[i], ok, total);
	}
	eng_model_free(m);
}

static void recall_cli_mkmodel_generate_and_bench_attention_flags(void **state)
{
	char *dir = tu_tmpdir("recallcli"), *out = NULL, *err = NULL;
	char *model = tu_path(dir, "m");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "recall", "--out", model, NULL};
	assert_int_equal(tu_run(&out, &err, NULL, mk), 0);
	free(out), free(err);
	const char *gen[] = {tu_evald(), "engine", "generate", "--model", model, "--prompt", " K3 V7 F1 F2 K5 V2 F3 ? K3",
			     "--max-tokens", "4", "--attention", "msa", "--msa-block-size", "2", "--msa-top-k", "0",
			     "--msa-dense-below", "0", "--kv-dtype", "f16", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, gen), 0);
	/* block 2, no top-k: the needle (position 0) is the sink block */
	assert_non_null(strstr(out, "\"text\":\"V7\""));
	free(out), free(err);
	const char *bad[] = {tu_evald(), "engine", "logits", "--model", model, "--tokens", "1,2", "--msa-top-k", "-1", NULL};
	assert_int_not_equal(tu_run(&out, &err, NULL, bad), 0);
	assert_non_null(strstr(err, "--msa-top-k"));
	free(out), free(err);
	const char *bench[] = {tu_evald(), "engine", "bench-attention", "--model", model, "--lengths", "300,1k",
			       "--decode", "2", "--msa-block-size", "16", "--msa-dense-below", "0", "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, bench), 0);
	cJSON *o = NULL;
	assert_int_equal(ev_json_parse(&o, out, strlen(out), "bench"), 0);
	const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "lengths");
	assert_int_equal(cJSON_GetArraySize(ls), 2);
	for (const cJSON *l = ls->child; l; l = l->next) {
		assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(l, "msa"), "answered")));
		assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(l, "dense"), "answered")));
	}
	/* pages of 16: 2 x 16 x 64 f32 + a 64-float key sum, over 16 tokens */
	assert_int_equal((int)ev_json_num(o, "kv_bytes_per_token", 0), 528);
	cJSON_Delete(o);
	free(out), free(err), free(model), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(recall_checkpoint_answers_every_length_and_depth_dense),
		cmocka_unit_test(recall_suite_text_gives_the_target),
		cmocka_unit_test(recall_msa_keeps_needle_among_fillers_and_reports_distractor_losses),
		cmocka_unit_test(recall_cli_mkmodel_generate_and_bench_attention_flags),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
