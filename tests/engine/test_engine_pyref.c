/*
 * A second, independent oracle: hf_reference.py, a pure-Python forward
 * pass written from the Hugging Face modeling semantics (rotate-half RoPE
 * with llama3 scaling, repeat_kv GQA, q/k norms, biases, Mixtral and
 * Qwen3-MoE routing, sliding window, and MiniMax-M3 with its lightning
 * indexer). The reference backend shares
 * forward.c with the fast path, so this is what catches a model-level
 * mistake both CPU paths would make alike. Skips where there is no
 * /usr/bin/python3.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/engine/engine_testutil.h"

static void check(const char *arch, const char *dtype, const char *config_edit_from, const char *config_edit_to)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 32;
	z.intermediate = 48;
	z.vocab = 300;
	z.heads = 4;
	z.kv_heads = 2;
	char *dir = et_mkmodel("pyref", arch, &z, dtype, 13);
	if (config_edit_from) {
		char *cfg = tu_path(dir, "config.json"), *text = NULL;
		size_t len;
		assert_int_equal(ev_file_read(&text, &len, cfg, 1 << 20), 0);
		char *p = strstr(text, config_edit_from);
		assert_non_null(p);
		*p = 0;
		char *edited = ev_asprintf("%s%s%s", text, config_edit_to, p + strlen(config_edit_from));
		assert_int_equal(ev_file_write(cfg, edited, strlen(edited)), 0);
		free(edited);
		free(text);
		free(cfg);
	}
	int32_t t[7] = {1, 5, 298, 7, 7, 42, 100};
	eng_model *m = et_load(dir, ENG_BACKEND_REF, 4);
	float *ours = et_logits(m, t, 7, 0);
	char *src = getenv("EV_SOURCE_DIR") ? ev_asprintf("%s/tests/engine/hf_reference.py", getenv("EV_SOURCE_DIR"))
					    : ev_strdup("tests/engine/hf_reference.py");
	char *out = NULL, *err = NULL;
	int rc = tu_sh(&out, &err, "/usr/bin/python3 '%s' '%s' 1,5,298,7,7,42,100", src, dir);
	if (rc != 0)
		fail_msg("%s: hf_reference.py failed (%d): %s", arch, rc, err ? err : "");
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "hf_reference"), 0);
	assert_int_equal(cJSON_GetArraySize(j), 7);
	float *theirs = malloc(7 * (size_t)z.vocab * sizeof(float));
	for (int i = 0; i < 7; i++) {
		cJSON *row = cJSON_GetArrayItem(j, i);
		assert_int_equal(cJSON_GetArraySize(row), z.vocab);
		for (int k = 0; k < z.vocab; k++)
			theirs[(size_t)i * z.vocab + k] = (float)cJSON_GetArrayItem(row, k)->valuedouble;
	}
	double e = et_rel_err(ours, theirs, 7 * (size_t)z.vocab);
	print_message("%-10s %-5s %s vs hf_reference.py: %.2e\n", arch, dtype, config_edit_to ? config_edit_to : "", e);
	assert_true(e < 1e-5);
	cJSON_Delete(j);
	free(out), free(err), free(src), free(ours), free(theirs);
	eng_model_free(m);
	free(dir);
}

/* MiniMax-M3 (both layouts) past the indexer's top-k x block (4 x 16):
 * 90 tokens, so the sparse layers choose blocks in both. */
static void check_m3(const char *arch)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 32;
	z.intermediate = 48;
	z.vocab = 300;
	z.layers = 3;
	char *dir = et_mkmodel("pyref-m3", arch, &z, "f32", 13);
	enum { N = 90 };
	int32_t t[N];
	ev_buf list = EV_BUF_INIT(1 << 16);
	for (int i = 0; i < N; i++) {
		t[i] = (int32_t)((i * 37 + 11) % (z.vocab - 4)); /* no placeholder id of the _vl layout */
		ev_buf_printf(&list, "%s%d", i ? "," : "", t[i]);
	}
	eng_model *m = et_load(dir, ENG_BACKEND_REF, 0);
	float *ours = et_logits(m, t, N, 0);
	char *src = getenv("EV_SOURCE_DIR") ? ev_asprintf("%s/tests/engine/hf_reference.py", getenv("EV_SOURCE_DIR"))
					    : ev_strdup("tests/engine/hf_reference.py");
	char *out = NULL, *err = NULL;
	int rc = tu_sh(&out, &err, "/usr/bin/python3 '%s' '%s' %s", src, dir, list.data);
	if (rc != 0)
		fail_msg("%s: hf_reference.py failed (%d): %s", arch, rc, err ? err : "");
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, out, strlen(out), "hf_reference"), 0);
	assert_int_equal(cJSON_GetArraySize(j), N);
	float *theirs = malloc((size_t)N * z.vocab * sizeof(float));
	for (int i = 0; i < N; i++)
		for (int k = 0; k < z.vocab; k++)
			theirs[(size_t)i * z.vocab + k] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(j, i), k)->valuedouble;
	double e = et_rel_err(ours, theirs, (size_t)N * z.vocab);
	print_message("%-13s f32   90 tokens, the indexer choosing, vs hf_reference.py: %.2e\n", arch, e);
	assert_true(e < 1e-5);
	cJSON_Delete(j);
	ev_buf_free(&list);
	free(out), free(err), free(src), free(ours), free(theirs);
	eng_model_free(m);
	free(dir);
}

static void logits_match_independent_python_forward(void **state)
{
	if (access("/usr/bin/python3", X_OK) != 0) {
		print_message("skipped: no /usr/bin/python3\n");
		skip();
	}
	const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe"};
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		check(archs[i], "f32", NULL, NULL);
	check("llama", "bf16", NULL, NULL);
	check("qwen3", "f16", NULL, NULL);
	check("mistral", "f32", "\"sliding_window\":null", "\"sliding_window\":3");
	check("qwen3_moe", "f32", "\"norm_topk_prob\":true", "\"norm_topk_prob\":false");
	check("qwen2_moe", "f32", "\"norm_topk_prob\":false", "\"norm_topk_prob\":true");
	check_m3("minimax_m3");
	check_m3("minimax_m3_vl");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(logits_match_independent_python_forward),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
