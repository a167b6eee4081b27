/*
 * Optional: the engine's logits against Hugging Face transformers on the
 * same random checkpoints. Runs where an interpreter can import torch and
 * transformers: $EVALD_REFERENCE_PYTHON, else the reference environment
 * (scripts/reference-env.sh: .venv-reference in the checkout), else
 * /usr/bin/python3 (nothing is installed for it); skips otherwise.
 */
#include <string.h>
#include <unistd.h>

#include "tests/engine/engine_testutil.h"

static const char *script =
	"import sys, json, torch, transformers\n"
	"d, toks = sys.argv[1], [int(x) for x in sys.argv[2].split(',')]\n"
	"m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)\n"
	"m.eval()\n"
	"with torch.no_grad():\n"
	"    out = m(torch.tensor([toks])).logits[0]\n"
	"json.dump(out.tolist(), sys.stdout)\n";

/* The interpreter to ask (malloc'd). */
static char *reference_python(void)
{
	const char *env = getenv("EVALD_REFERENCE_PYTHON"), *src = getenv("EV_SOURCE_DIR");
	if (env && *env)
		return ev_strdup(env);
	char *venv = src ? ev_asprintf("%s/.venv-reference/bin/python", src) : NULL;
	if (venv && access(venv, X_OK) == 0)
		return venv;
	free(venv);
	return ev_strdup("/usr/bin/python3");
}

static void logits_match_transformers(void **state)
{
	char *out = NULL, *err = NULL, *python = reference_python();
	if (tu_sh(&out, &err, "'%s' -c 'import torch, transformers' 2>/dev/null", python) != 0) {
		free(out), free(err);
		print_message("skipped: %s cannot import torch and transformers\n", python);
		free(python);
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
		int rc = tu_sh(&out, &err, "'%s' '%s' '%s' 1,5,300,7,7,42,99,3,511", python, py, md);
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
	free(python);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(logits_match_transformers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
