/*
 * Optional: the engine's logits against Hugging Face transformers on the
 * same random checkpoints. Runs only where /usr/bin/python3 can import
 * torch and transformers (nothing is installed for it); skips otherwise.
 */
#include <string.h>

#include "tests/engine/engine_testutil.h"

static const char *script =
	"import sys, json, torch, transformers\n"
	"d, toks = sys.argv[1], [int(x) for x in sys.argv[2].split(',')]\n"
	"m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)\n"
	"m.eval()\n"
	"with torch.no_grad():\n"
	"    out = m(torch.tensor([toks])).logits[0]\n"
	"json.dump(out.tolist(), sys.stdout)\n";

static void logits_match_transformers(void **state)
{
	char *out = NULL, *err = NULL;
	if (tu_sh(&out, &err, "/usr/bin/python3 -c 'import torch, transformers' 2>/dev/null") != 0) {
		free(out), free(err);
		print_message("skipped: /usr/bin/python3 cannot import torch and transformers\n");
		skip();
	}
	free(out), free(err);
	const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe"};
	char *dir = tu_tmpdir("hf");
	char *py = tu_write(dir, "ref.py", script);
	for (size_t a = 0; a < sizeof(archs) / sizeof(archs[0]); a++) {
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		char *md = ev_asprintf("%s/%s", dir, archs[a]);
		assert_int_equal(eng_mkmodel(md, archs[a], &z, "f32", 17), 0);
		int32_t t[9] = {1, 5, 300, 7, 7, 42, 99, 3, 511};
		eng_model *m = et_load(md, ENG_BACKEND_CPU, 0);
		float *ours = et_logits(m, t, 9, 0);
		out = err = NULL;
		int rc = tu_sh(&out, &err, "/usr/bin/python3 '%s' '%s' 1,5,300,7,7,42,99,3,511", py, md);
		if (rc != 0)
			fail_msg("%s: transformers failed: %s", archs[a], err ? err : "");
		cJSON *j = NULL;
		assert_int_equal(ev_json_parse(&j, out, strlen(out), "transformers"), 0);
		float *theirs = malloc(9 * (size_t)z.vocab * sizeof(float));
		for (int i = 0; i < 9; i++)
			for (int k = 0; k < z.vocab; k++)
				theirs[(size_t)i * z.vocab + k] = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(j, i), k)->valuedouble;
		double e = et_rel_err(ours, theirs, 9 * (size_t)z.vocab);
		print_message("%-10s vs transformers: %.2e\n", archs[a], e);
		assert_true(e < 1e-4);
		cJSON_Delete(j);
		free(out), free(err), free(ours), free(theirs), free(md);
		eng_model_free(m);
	}
	free(py);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(logits_match_transformers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
