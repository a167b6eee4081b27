/*
 * Where weight files live (engine/safetensors.c, EVALD_WEIGHT_PAGES):
 * mmapped, or read into anonymous memory advised for transparent huge
 * pages. Either way the model gives the same logits bit for bit; the copy
 * is read-only; auto keeps a small checkpoint mmapped; an unknown value
 * falls back to auto. Whether the kernel actually backs the copy with
 * huge pages is printed (it depends on the machine), not asserted.
 */
#include <stdio.h>
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

/* The /proc/self/smaps entry holding address p: its permissions and
 * AnonHugePages (kB). Returns 0 when found. */
static int mapping_of(const void *p, char perms[5], long *huge_kb)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	int in = 0, found = -1;
	uintptr_t a = (uintptr_t)p;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		char pr[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3) { /* a mapping's first line */
			in = a >= lo && a < hi;
			if (in)
				memcpy(perms, pr, 5), found = 0;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %ld kB", huge_kb) == 1)
			break;
	}
	fclose(f);
	return found;
}

static void weights_read_into_huge_pages_give_the_same_logits(void **st)
{
	(void)st;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.hidden = 512, z.intermediate = 512, z.vocab = 2048, z.heads = 8, z.kv_heads = 2, z.layers = 2;
	char *dir = et_mkmodel("wpages", "llama", &z, "f32", 11); /* about 20 MiB: below auto's 32 */
	int32_t toks[24];
	for (int i = 0; i < 24; i++)
		toks[i] = (int32_t)((i * 131 + 7) % 2048);
	const char *modes[] = {"file", "huge", NULL /* unset: auto */, "sideways"};
	float *want = NULL;
	for (int k = 0; k < 4; k++) {
		if (modes[k])
			setenv("EVALD_WEIGHT_PAGES", modes[k], 1);
		else
			unsetenv("EVALD_WEIGHT_PAGES");
		eng_model *m = et_load(dir, ENG_BACKEND_CPU, 0);
		eng_model_info in;
		eng_model_get_info(m, &in);
		bool huge = k == 1;
		assert_true(in.weight_bytes < ((uint64_t)32 << 20));
		if (in.weights_huge != huge)
			fail_msg("EVALD_WEIGHT_PAGES=%s: weights %s", modes[k] ? modes[k] : "(unset)",
			         in.weights_huge ? "read into huge pages" : "mmapped");
		float *got = et_logits(m, toks, 24, 0);
		if (!want)
			want = got;
		else if (memcmp(want, got, (size_t)24 * 2048 * sizeof(float)))
			fail_msg("EVALD_WEIGHT_PAGES=%s: logits differ from the mmapped file's", modes[k] ? modes[k] : "(unset)");
		if (huge) {
			/* the copy is read-only, as the mapping was */
			const void *p = m->ts.maps[0];
			char perms[5] = "";
			long kb = -1;
			assert_int_equal(mapping_of(p, perms, &kb), 0);
			assert_string_equal(perms, "r--p");
			print_message("weights read into anonymous memory: %s, AnonHugePages %ld kB\n", perms, kb);
		}
		if (got != want)
			free(got);
		eng_model_free(m);
	}
	unsetenv("EVALD_WEIGHT_PAGES");
	free(want), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(weights_read_into_huge_pages_give_the_same_logits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
