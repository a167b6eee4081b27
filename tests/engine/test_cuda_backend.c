/*
 * The CUDA backend end to end (ctest label gpu): whole forwards on the
 * device against the CPU reference path on random checkpoints of Llama,
 * Qwen3-MoE, Qwen2-MoE and MiniMax-M3 shape (its lightning indexer on),
 * f32 and bf16 weights, f32 and f16 KV pages, dense and MSA attention:
 * - a prompt's logits at every position (normalised error printed, bound
 *   1e-4 for f32 weights: both sides compute in f32 from the same stored
 *   weights; 2e-2 for f16 and bf16 weights, whose prefill GEMM takes the
 *   rows rounded to the weights' type);
 * - the same prompt fed token by token on the device (the decode GEMV):
 *   the same logits within 1e-5 for f32 weights, 2e-2 for 16-bit ones;
 * - 256 greedy tokens identical to the reference's on 5 prompts (Llama);
 * - 8 sequences decoded together bit-identical to each alone;
 * - a fork of a sequence and a truncated sequence continue as the CPU's
 *   do (page versions: shared, copied and reused pages reach the device).
 * Without a device it says why and is skipped (exit 77). The cases are
 * in cuda_backend_cases.h; test_cuda_backend_host.c runs them over host
 * stand-ins of the device ops.
 */
#include "engine/cuda/cuda.h"
#include "tests/engine/cuda_backend_cases.h"

static eng_model *load_dev(const char *dir, eng_model_options *o)
{
	eng_model *m = NULL;
	if (eng_model_load(&m, dir, o) != 0)
		fail_msg("load %s on cuda: %s", dir, ev_error_msg());
	return m;
}

static void free_dev(eng_model *m)
{
	eng_model_free(m);
}

static void read_dev(void *host, const void *dev, size_t bytes)
{
	assert_int_equal(eng_cuda_download(host, dev, bytes), 0);
}

int main(void)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	char *dir = et_mkmodel("cuda_probe", "llama", &z, "f32", 1);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = ENG_BACKEND_CUDA;
	eng_model *m = NULL;
	int rc = eng_model_load(&m, dir, &o);
	eng_model_free(m);
	free(dir);
	if (rc == EV_E_UNSUPPORTED) {
		printf("skipped: %s (the gpu tests need a CUDA device; scripts/gpu-check.sh runs them where there is one)\n",
		       ev_error_msg());
		return 77;
	}
	const struct CMUnitTest tests[] = {CUDA_BACKEND_TESTS};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
