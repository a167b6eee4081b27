/* `evald run` on a checkpoint folder with the engine's own settings:
 * MSA and KV flags reach the engine, are stored with the run for resume,
 * and are refused with a clear message when bad or when the model is a URL. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void engine_flags_reach_the_engine_and_are_checked(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-engine-run");
	char *ck = tu_path(dir, "ckpt");
	char *db = tu_path(dir, "evald.db");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "llama", "--out", ck, "--seed", "3", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	char *suite = tu_write(dir, "s.jsonl",
	                       "{\"id\":\"a\",\"input\":\"the cat sat on the mat\",\"target\":\"zzzz\"}\n"
	                       "{\"id\":\"b\",\"input\":\"a long story about the sea and the ships\",\"target\":\"zzzz\"}\n");
	char *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", ck, "--suite", suite, "--max-tokens", "4",
	                     "--attention", "msa", "--msa-block-size", "4", "--msa-top-k", "1", "--msa-dense-below", "0",
	                     "--kv-dtype", "f16", "--json", NULL};
	int rc = tu_run(&out, &err, NULL, run);
	if (rc)
		print_message("%s\n", err);
	assert_int_equal(rc, 0);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), "n", 0), 2);
	cJSON_Delete(j);
	free(out);
	free(err);

	/* The settings are kept with the run, so a resume uses the same engine. */
	char *cfg = NULL;
	tu_sh(&cfg, NULL, "sqlite3 '%s' 'SELECT config_json FROM runs WHERE id = 1'", db);
	assert_non_null(strstr(cfg, "\"msa-top-k\":\"1\""));
	assert_non_null(strstr(cfg, "\"attention\":\"msa\""));
	free(cfg);

	/* A bad engine setting is a usage error, caught as the arguments are read. */
	const char *bad[] = {tu_evald(), "--db", db, "run", "--model", ck, "--suite", suite, "--msa-top-k", "lots", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, bad), 2);
	assert_non_null(strstr(err, "top-k"));
	free(err);
	const char *url[] = {tu_evald(), "--db", db, "run", "--model", "http://127.0.0.1:9/v1", "--suite", suite,
	                     "--attention", "msa", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, url), 1);
	assert_non_null(strstr(err, "checkpoint folder"));
	free(err);
	free(suite), free(db), free(ck), free(dir);
}

/* The README's main job: the recall checkpoint on its own suite, through
 * the engine backend (no chat template: plain text), scores 1 at every
 * length and depth, and the report shows the grid. */
static void recall_checkpoint_scores_its_own_suite(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-recall");
	char *ck = tu_path(dir, "ckpt"), *suite = tu_path(dir, "suite"), *db = tu_path(dir, "evald.db");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "recall", "--out", ck, NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	const char *gen[] = {tu_evald(), "suites", "gen", "recall", "-o", suite, "--lengths", "256,1k", "--depths",
	                     "0,50,100", "--samples", "2", "--distractors", "8", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, gen), 0);
	char *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", ck, "--suite", suite, "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, run), 0);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_int_equal((int)ev_json_num(s, "n", 0), 12);
	assert_true(ev_json_num(s, "score", 0) == 1.0);
	cJSON_Delete(j);
	free(out);
	free(err);
	const char *rep[] = {tu_evald(), "--db", db, "report", "1", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, rep), 0);
	assert_non_null(strstr(out, "| 1K | 1.00 | 1.00 | 1.00 |"));
	free(out);
	const char *bad[] = {tu_evald(), "suites", "gen", "recall", "-o", suite, "--depths", "150", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, bad), 2);
	assert_non_null(strstr(err, "percentage"));
	free(err);
	free(ck), free(suite), free(db), free(dir);
}

/* The opt-in OpenBLAS prefill (EVALD_BLAS=1) agrees with the reference
 * path on a prompt long enough to use it (32 rows or more). */
static void blas_prefill_agrees_with_the_reference(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-blas");
	char *ck = tu_path(dir, "ckpt");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "qwen2", "--out", ck, "--seed", "5", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	char toks[512] = "";
	for (int i = 0; i < 40; i++)
		snprintf(toks + strlen(toks), sizeof toks - strlen(toks), "%s%d", i ? "," : "", (i * 37 + 11) % 250);
	char *fast = NULL, *ref = NULL;
	assert_int_equal(tu_sh(&fast, NULL, "EVALD_BLAS=1 '%s' engine logits --model '%s' --tokens %s --json", tu_evald(),
	                       ck, toks), 0);
	assert_int_equal(tu_sh(&ref, NULL, "'%s' engine logits --model '%s' --tokens %s --json --reference", tu_evald(),
	                       ck, toks), 0);
	cJSON *a = cJSON_Parse(fast), *b = cJSON_Parse(ref);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(cJSON_GetArraySize(a), 40);
	double num = 0, den = 0;
	for (int p = 0; p < 40; p++) {
		cJSON *ra = cJSON_GetArrayItem(a, p), *rb = cJSON_GetArrayItem(b, p);
		assert_int_equal(cJSON_GetArraySize(ra), cJSON_GetArraySize(rb));
		for (int v = 0; v < cJSON_GetArraySize(ra); v++) {
			double x = cJSON_GetArrayItem(ra, v)->valuedouble, y = cJSON_GetArrayItem(rb, v)->valuedouble;
			num += (x - y) * (x - y);
			den += y * y;
		}
	}
	assert_true(den > 0);
	assert_true(num / den < 1e-10); /* relative error below 1e-5 */
	cJSON_Delete(a), cJSON_Delete(b);
	free(fast), free(ref), free(ck), free(dir);
}

/* Sampling is random by default and reproducible from the record: with
 * --epochs 3 --temperature 1 the epochs differ (before: seed 0 for every
 * request, identical epochs, pass@k meaningless); the run records the seed
 * it drew, and a rerun with that --seed gives the same answers. */
static void sampling_differs_by_epoch_and_replays_from_the_record(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-engine-seed");
	char *ck = tu_path(dir, "ckpt");
	char *db = tu_path(dir, "evald.db");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "qwen2", "--out", ck, "--vocab", "600", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	char *suite = tu_write(dir, "s.jsonl", "{\"id\":\"a\",\"input\":\"tell me\",\"target\":\"zzzz\"}\n"
	                                       "{\"id\":\"b\",\"input\":\"another\",\"target\":\"zzzz\"}\n");
	const char *run[] = {tu_evald(), "-q", "--db", db, "run", "--model", ck, "--suite", suite, "--max-tokens", "12",
	                     "--epochs", "3", "--temperature", "1", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, run), 0);
	char *out = NULL;
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT count(DISTINCT response) FROM results WHERE run_id = 1 GROUP BY sample_id\"", db);
	/* three epochs, three different answers for each sample */
	if (strcmp(out, "3\n3\n")) {
		char *rows = NULL;
		tu_sh(&rows, NULL, "sqlite3 '%s' \"SELECT sample_id, epoch, reason, finish_reason, completion_tokens, "
		                   "quote(response), detail FROM results WHERE run_id = 1\"", db);
		fail_msg("distinct answers per sample: %s; the results:\n%s", out, rows ? rows : "");
	}
	free(out);
	char *seed = NULL;
	tu_sh(&seed, NULL, "sqlite3 '%s' \"SELECT json_extract(config_json, '$.seed') FROM runs WHERE id = 1\"", db);
	assert_true(seed && strlen(seed) > 1);
	seed[strcspn(seed, "\n")] = 0;
	const char *again[] = {tu_evald(), "-q", "--db", db, "run", "--model", ck, "--suite", suite, "--max-tokens", "12",
	                       "--epochs", "3", "--temperature", "1", "--seed", seed, "--no-cache", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, again), 0);
	tu_sh(&out, NULL,
	      "sqlite3 '%s' \"SELECT count(*) FROM results a JOIN results b ON a.sample_id = b.sample_id AND "
	      "a.epoch = b.epoch WHERE a.run_id = 1 AND b.run_id = 2 AND a.response = b.response\"",
	      db);
	assert_string_equal(out, "6\n");
	free(out);
	/* pass@k and pass^k at k = the run's own epochs (3), not only 1, 5, 10, 100 */
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT json_extract(summary_json, '$.suites[0].pass_hat_k.3') IS NOT NULL AND "
	                  "json_extract(summary_json, '$.suites[0].pass_at_k.3') IS NOT NULL FROM runs WHERE id = 2\"", db);
	assert_string_equal(out, "1\n");
	free(out), free(seed), free(suite), free(db), free(ck), free(dir);
}

/* A prompt longer than the model's context is the model's limit: scored 0
 * with reason context_overflow and counted in the score, not a backend
 * error left out of it (before, it vanished from the score and the grid). */
static void over_length_prompts_are_context_overflows(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-engine-ctx");
	char *ck = tu_path(dir, "ckpt");
	char *db = tu_path(dir, "evald.db");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "qwen2", "--out", ck, "--max-position", "48", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	ev_buf b = EV_BUF_INIT(1 << 20);
	ev_buf_puts(&b, "{\"id\":\"short\",\"input\":\"hi\",\"target\":\"zzzz\"}\n{\"id\":\"long\",\"input\":\"");
	for (int i = 0; i < 200; i++)
		ev_buf_puts(&b, "word ");
	ev_buf_puts(&b, "\",\"target\":\"zzzz\"}\n");
	char *suite = tu_write(dir, "s.jsonl", b.data);
	ev_buf_free(&b);
	char *out = NULL, *err = NULL;
	const char *run[] = {tu_evald(), "--db", db, "run", "--model", ck, "--suite", suite, "--max-tokens", "4",
	                     "--json", NULL};
	int rc = tu_run(&out, &err, NULL, run);
	if (rc)
		fail_msg("exit %d: %s", rc, err);
	cJSON *j = cJSON_Parse(out);
	const cJSON *s0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0);
	assert_int_equal((int)ev_json_num(s0, "n", 0), 2);
	assert_int_equal((int)ev_json_num(s0, "errors", -1), 0);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(s0, "failures"), "context_overflow", 0), 1);
	cJSON_Delete(j);
	free(out), free(err);
	tu_sh(&out, NULL, "sqlite3 '%s' \"SELECT reason, score FROM results WHERE sample_id = 'long'\"", db);
	assert_string_equal(out, "context_overflow|0.0\n");
	free(out), free(suite), free(db), free(ck), free(dir);
}

/* suites gen long-context warns, up front, of lengths past the model's
 * context (their samples would score 0 as context_overflow). */
static void gen_warns_of_lengths_past_the_context(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("cli-gen-ctx");
	char *ck = tu_path(dir, "ckpt"), *out_dir = tu_path(dir, "suite");
	const char *mk[] = {tu_evald(), "engine", "mkmodel", "--arch", "qwen2", "--out", ck, "--max-position", "512", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, mk), 0);
	char *out = NULL, *err = NULL;
	const char *gen[] = {tu_evald(), "suites", "gen", "long-context", "--model", ck, "--tasks", "niah", "--lengths",
	                     "256,1k", "--depths", "50", "-o", out_dir, NULL};
	int rc = tu_run(&out, &err, NULL, gen);
	if (rc)
		fail_msg("exit %d: %s", rc, err);
	assert_non_null(strstr(err, "1024 tokens pass"));
	assert_null(strstr(err, "256 tokens pass"));
	free(out), free(err), free(out_dir), free(ck), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(engine_flags_reach_the_engine_and_are_checked),
		cmocka_unit_test(sampling_differs_by_epoch_and_replays_from_the_record),
		cmocka_unit_test(over_length_prompts_are_context_overflows),
		cmocka_unit_test(gen_warns_of_lengths_past_the_context),
		cmocka_unit_test(recall_checkpoint_scores_its_own_suite),
		cmocka_unit_test(blas_prefill_agrees_with_the_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
