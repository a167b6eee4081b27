/*
 * config.json settings that are left out take transformers' defaults for
 * the architecture (a Mistral without "sliding_window" attends through a
 * 4096-token window; "sliding_window": null is full attention; Mixtral's
 * epsilon and theta differ from Llama's), rope_parameters (transformers
 * 5's form) give theta and scaling, and what was defaulted is listed.
 */
#include "tests/common/testutil.h"
#include "engine/backend.h"

#include <string.h>

static void parse(eng_config *c, const char *arch, const char *extra)
{
	char *j = ev_asprintf("{\"architectures\":[\"%s\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
	                      "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":300,"
	                      "\"intermediate_size\":128,\"num_local_experts\":4%s%s}",
	                      arch, extra[0] ? "," : "", extra);
	if (eng_config_parse(c, j, strlen(j), "config.json"))
		fail_msg("%s: %s", arch, ev_error_msg());
	free(j);
}

static void left_out_settings_take_transformers_defaults(void **state)
{
	(void)state;
	eng_config c;
	parse(&c, "MistralForCausalLM", "");
	assert_int_equal(c.sliding_window, 4096);
	assert_true(c.rms_eps == 1e-6 && c.rope_theta == 10000.0);
	assert_int_equal(c.max_position, 131072);
	assert_non_null(strstr(c.defaults_used, "sliding_window=4096"));
	assert_non_null(strstr(c.defaults_used, "rope_theta=10000"));
	eng_config_clear(&c);

	parse(&c, "MistralForCausalLM", "\"sliding_window\":null,\"rope_theta\":1e6,\"rms_norm_eps\":1e-5,"
	                                "\"max_position_embeddings\":4096,\"tie_word_embeddings\":false");
	assert_int_equal(c.sliding_window, 0);
	assert_string_equal(c.defaults_used, "");
	eng_config_clear(&c);

	parse(&c, "MixtralForCausalLM", "");
	assert_int_equal(c.sliding_window, 0);
	assert_true(c.rms_eps == 1e-5 && c.rope_theta == 1e6);
	eng_config_clear(&c);

	parse(&c, "LlamaForCausalLM", "");
	assert_int_equal(c.max_position, 2048);
	eng_config_clear(&c);

	/* transformers 5 writes theta and scaling into rope_parameters */
	parse(&c, "LlamaForCausalLM", "\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"llama3\",\"factor\":8.0,"
	                              "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
	                              "\"original_max_position_embeddings\":8192}");
	assert_true(c.rope_theta == 500000.0);
	assert_int_equal(c.rope_kind, 1);
	assert_null(strstr(c.defaults_used, "rope_theta"));
	eng_config_clear(&c);
}

/* The parameters a config implies equal those counted from the loaded
 * tensors, for every architecture (MiniMax-M3's indexer, shared expert and
 * router bias included); and MiniMax-M3's defaults (the released sizes,
 * every layer MoE) give its shape from the config alone. */
static void parameters_from_the_config_alone(void **state)
{
	(void)state;
	static const char *const archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "minimax_m3",
					    "minimax_m3_vl"};
	char *dir = tu_tmpdir("params");
	for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
		char *md = ev_asprintf("%s/%s", dir, archs[a]), *cfg = ev_asprintf("%s/config.json", md);
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		z.layers = 3;
		assert_int_equal(eng_mkmodel(md, archs[a], &z, "bf16", 3), 0);
		eng_model *m = NULL;
		assert_int_equal(eng_model_load(&m, md, NULL), 0);
		eng_model_info in;
		eng_model_get_info(m, &in);
		uint64_t total = 0, active = 0;
		assert_int_equal(eng_config_params(cfg, &total, &active), 0);
		if (total != in.params_total || active != in.params_active)
			fail_msg("%s: config says %llu / %llu, tensors %llu / %llu", archs[a], (unsigned long long)total,
				 (unsigned long long)active, (unsigned long long)in.params_total,
				 (unsigned long long)in.params_active);
		eng_model_free(m);
		free(md), free(cfg);
	}
	char *cfg = tu_write(dir, "m3.json", "{\"architectures\":[\"MiniMaxM3VLForCausalLM\"]}");
	uint64_t total = 0, active = 0;
	assert_int_equal(eng_config_params(cfg, &total, &active), 0);
	print_message("MiniMax-M3 with transformers' defaults: %.1f B total, %.1f B active\n", total / 1e9, active / 1e9);
	assert_true(total > 400e9 && total < 460e9 && active > 20e9 && active < 30e9);
	free(cfg);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(left_out_settings_take_transformers_defaults),
		cmocka_unit_test(parameters_from_the_config_alone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
