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
	static const char *const archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe", "minimax_m3",
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

/* The released checkpoints' forms of MiniMax-M3's settings, as
 * transformers maps them: sparse_attention_config's sparse_* keys over the
 * flat index_* ones, its sparse_attention_freq for layer_types and
 * moe_layer_freq for mlp_layer_types; each malformed one named. */
static void minimax_m3_legacy_forms(void **state)
{
	(void)state;
	eng_config c;
	parse(&c, "MiniMaxM3VLForCausalLM",
	      "\"index_block_size\":64,\"sparse_attention_config\":{\"sparse_num_index_heads\":2,\"sparse_index_dim\":32,"
	      "\"sparse_block_size\":32,\"sparse_topk_blocks\":8,\"sparse_local_block\":2,\"sparse_attention_freq\":[0,1]},"
	      "\"moe_layer_freq\":[0,1]");
	assert_int_equal(c.index_heads, 2);
	assert_int_equal(c.index_dim, 32);
	assert_int_equal(c.index_block, 32);
	assert_int_equal(c.index_topk, 8);
	assert_int_equal(c.index_local, 2);
	assert_true(!c.sparse_layer[0] && c.sparse_layer[1] && !c.moe_layer[0] && c.moe_layer[1]);
	eng_config_clear(&c);
	/* the flat lists win where both are given */
	parse(&c, "MiniMaxM3VLForCausalLM",
	      "\"index_n_heads\":2,\"layer_types\":[\"minimax_m3_sparse\",\"minimax_m3_sparse\"],\"sparse_attention_config\":{"
	      "\"sparse_attention_freq\":[0,0]},\"moe_layer_freq\":[true,false]");
	assert_true(c.sparse_layer[0] && c.sparse_layer[1] && c.moe_layer[0] && !c.moe_layer[1]);
	eng_config_clear(&c);
	static const char *const bad[][2] = {
		{"\"moe_layer_freq\":[1]", "moe_layer_freq"},
		{"\"moe_layer_freq\":[1,\"x\"]", "moe_layer_freq[1]"},
		{"\"sparse_attention_config\":[1]", "sparse_attention_config"},
		{"\"sparse_attention_config\":{\"sparse_attention_freq\":{}}", "sparse_attention_freq"},
		{"\"sparse_attention_config\":{\"sparse_block_size\":0}", "sparse_block_size"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *j = ev_asprintf("{\"architectures\":[\"MiniMaxM3VLForCausalLM\"],\"num_hidden_layers\":2,%s}", bad[i][0]);
		assert_int_not_equal(eng_config_parse(&c, j, strlen(j), "config.json"), 0);
		if (!strstr(ev_error_msg(), bad[i][1]))
			fail_msg("%s: the error '%s' does not name %s", bad[i][0], ev_error_msg(), bad[i][1]);
		free(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(left_out_settings_take_transformers_defaults),
		cmocka_unit_test(parameters_from_the_config_alone),
		cmocka_unit_test(minimax_m3_legacy_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
