/*
 * The CUDA backend's end-to-end cases, shared by the device test
 * (test_cuda_backend.c: the real backend on a GPU) and the host test
 * (test_cuda_backend_host.c: engine/cuda/backend.c itself over host
 * stand-ins of the device ops). The includer defines
 *   eng_model *load_dev(const char *dir, eng_model_options *o);
 *   void free_dev(eng_model *m);
 *   void read_dev(void *host, const void *dev, size_t bytes);
 * after the `setting` type, which this file declares first.
 */
#ifndef CUDA_BACKEND_CASES_H
#define CUDA_BACKEND_CASES_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/gguf/gguf.h"
#include "tests/engine/engine_testutil.h"

typedef struct {
	const char *arch, *dtype;
	eng_kv_dtype kv;
	eng_attention_kind attn;
	int block;
} setting;

static eng_model *load_dev(const char *dir, eng_model_options *o);
static void free_dev(eng_model *m);
static void read_dev(void *host, const void *dev, size_t bytes);

/* Every page of s whose device copy is marked current is consistent:
 * where the host's data is current too, the copy's keys and values of the
 * filled slots are the host's bytes; where the device is ahead (keys
 * stored there alone), every layer's key sums are the sum of its stored
 * keys in slot order, bit for bit (what the host's rebuild would give).
 * Returns the pages compared. */
static int pages_match(eng_seq *s)
{
	eng_kv_pool *p = &s->m->kv;
	unsigned char *buf = malloc(p->page_bytes);
	size_t kd = (size_t)p->kvh * p->hd, rowb = kd * p->esize;
	float *row = malloc(kd * sizeof(float)), *sum = malloc(kd * sizeof(float));
	int n = 0;
	assert_true(buf && row && sum);
	for (int b = 0; b < s->npages; b++) {
		eng_page *pg = s->pages[b];
		if (!pg->dev || pg->dev_gen != pg->gen)
			continue;
		read_dev(buf, pg->dev, p->page_bytes);
		for (int l = 0; l < p->layers; l++) {
			size_t k = (unsigned char *)eng_page_kraw(p, pg, l, 0) - pg->data;
			size_t v = (unsigned char *)eng_page_vraw(p, pg, l, 0) - pg->data;
			size_t ks = (unsigned char *)eng_page_ksum(p, pg, l) - pg->data;
			if (!pg->dev_ahead) {
				if (memcmp(buf + k, pg->data + k, (size_t)pg->ntok * rowb) ||
				    memcmp(buf + v, pg->data + v, (size_t)pg->ntok * rowb))
					fail_msg("page %d, layer %d: the device copy is marked current and differs from the host's",
						 b, l);
				continue;
			}
			memset(sum, 0, kd * sizeof(float));
			for (int t = 0; t < pg->ntok; t++) {
				eng_kv_load(p, row, buf + k + (size_t)t * rowb, kd);
				for (size_t j = 0; j < kd; j++)
					sum[j] += row[j];
			}
			if (memcmp(buf + ks, sum, kd * sizeof(float)))
				fail_msg("page %d, layer %d: the device's key sums are not the sum of its %d stored keys", b, l,
					 pg->ntok);
		}
		n++;
	}
	free(buf), free(row), free(sum);
	return n;
}

#define PROMPT 160

static eng_model *load(const char *dir, eng_backend_kind be, const setting *st)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = be;
	o.threads = 2;
	o.kv_dtype = st->kv;
	o.attention.kind = st->attn;
	o.attention.block_size = st->block;
	if (st->attn == ENG_ATTN_MSA) {
		o.attention.top_k = 2;
		o.attention.dense_below = 0;
	}
	if (be == ENG_BACKEND_CUDA)
		return load_dev(dir, &o);
	eng_model *m = NULL;
	if (eng_model_load(&m, dir, &o) != 0)
		fail_msg("load %s: %s", dir, ev_error_msg());
	return m;
}

static int argmax(const float *v, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = v[i] > v[b] ? i : b;
	return b;
}

static void forward_matches_reference(const setting *st, uint64_t seed)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 384;
	char *dir = et_mkmodel("cuda_be", st->arch, &z, st->dtype, seed);
	eng_model *ref = load(dir, ENG_BACKEND_REF, st), *dev = load(dir, ENG_BACKEND_CUDA, st);
	int32_t *t = et_tokens(PROMPT, z.vocab, seed + 1);
	float *a = et_logits(ref, t, PROMPT, 0), *b = et_logits(dev, t, PROMPT, 0), *c = et_logits(dev, t, PROMPT, 1);
	size_t n = (size_t)PROMPT * z.vocab;
	double e_ref = et_rel_err(b, a, n), e_step = et_rel_err(c, b, n);
	print_message("backend: %-10s %-4s kv %s %-5s: device vs reference %.3g, token by token vs at once %.3g\n", st->arch,
		      st->dtype, st->kv == ENG_KV_F16 ? "f16" : st->kv == ENG_KV_BF16 ? "bf16" : "f32", st->attn == ENG_ATTN_MSA ? "msa" : "auto", e_ref,
		      e_step);
	/* f32 weights: f32 throughout. 16-bit weights: prefill rows go to the
	 * tensor cores rounded to the weight's type (eng_cuda_gemm), decode
	 * rows stay f32 (the GEMV) */
	bool half = strcmp(st->dtype, "f32") != 0;
	assert_true(e_ref < (half ? 2e-2 : 1e-4));
	assert_true(e_step < (half ? 2e-2 : 1e-5));
	free(a), free(b), free(c), free(t);
	eng_model_free(ref);
	free_dev(dev);
	free(dir);
}

static void forwards_match_the_reference(void **state)
{
	(void)state;
	static const setting s[] = {
		{"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16},   {"llama", "bf16", ENG_KV_F16, ENG_ATTN_AUTO, 16},
		{"llama", "f32", ENG_KV_F32, ENG_ATTN_MSA, 8},    {"qwen3", "f16", ENG_KV_BF16, ENG_ATTN_AUTO, 32},
		{"qwen3_moe", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16}, {"qwen2_moe", "bf16", ENG_KV_F32, ENG_ATTN_AUTO, 16},
		{"minimax_m3", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16},
	};
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		forward_matches_reference(&s[i], 40 + i);
}

static void greedy_tokens_equal_the_reference(void **state)
{
	(void)state;
	setting st = {"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 384;
	char *dir = et_mkmodel("cuda_greedy", "llama", &z, "f32", 7);
	eng_model *ref = load(dir, ENG_BACKEND_REF, &st), *dev = load(dir, ENG_BACKEND_CUDA, &st);
	int same = 0;
	for (int p = 0; p < 5; p++) {
		int32_t *prompt = et_tokens(5 + 3 * p, z.vocab, 100 + p);
		eng_seq *sr = NULL, *sd = NULL;
		assert_int_equal(eng_seq_new(&sr, ref), 0);
		assert_int_equal(eng_seq_new(&sd, dev), 0);
		assert_int_equal(eng_forward(sr, prompt, 5 + 3 * p, NULL), 0);
		assert_int_equal(eng_forward(sd, prompt, 5 + 3 * p, NULL), 0);
		int k = 0;
		for (; k < 256; k++) {
			int32_t tr = argmax(eng_seq_logits(sr), z.vocab), td = argmax(eng_seq_logits(sd), z.vocab);
			if (tr != td)
				break;
			assert_int_equal(eng_forward(sr, &tr, 1, NULL), 0);
			assert_int_equal(eng_forward(sd, &td, 1, NULL), 0);
		}
		print_message("backend: prompt %d: %d of 256 greedy tokens equal\n", p, k);
		same += k == 256;
		eng_seq_free(sr);
		eng_seq_free(sd);
		free(prompt);
	}
	assert_int_equal(same, 5);
	eng_model_free(ref);
	free_dev(dev);
	free(dir);
}

static void batch_of_eight_equals_each_alone(void **state)
{
	(void)state;
	setting st = {"qwen3_moe", "bf16", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 384;
	char *dir = et_mkmodel("cuda_batch", "qwen3_moe", &z, "bf16", 9);
	eng_model *dev = load(dir, ENG_BACKEND_CUDA, &st);
	eng_seq *bs[8], *solo = NULL;
	int32_t *tok[8];
	int ntok[8];
	for (int i = 0; i < 8; i++) {
		ntok[i] = 3 + 5 * i;
		tok[i] = et_tokens(ntok[i], z.vocab, 300 + i);
		assert_int_equal(eng_seq_new(&bs[i], dev), 0);
	}
	/* the prompts one at a time (as alone), then eight decode steps of one
	 * token each for all eight at once */
	for (int i = 0; i < 8; i++)
		assert_int_equal(eng_forward(bs[i], tok[i], ntok[i], NULL), 0);
	for (int step = 0; step < 8; step++) {
		int32_t next[8];
		const int32_t *np[8];
		int one[8];
		for (int i = 0; i < 8; i++) {
			next[i] = argmax(eng_seq_logits(bs[i]), z.vocab);
			np[i] = &next[i];
			one[i] = 1;
		}
		assert_int_equal(eng_forward_batch(dev, bs, np, one, 8), 0);
	}
	for (int i = 0; i < 8; i++) {
		assert_int_equal(eng_seq_new(&solo, dev), 0);
		assert_int_equal(eng_forward(solo, tok[i], ntok[i], NULL), 0);
		for (int step = 0; step < 8; step++) {
			int32_t next = argmax(eng_seq_logits(solo), z.vocab);
			assert_int_equal(eng_forward(solo, &next, 1, NULL), 0);
		}
		assert_memory_equal(eng_seq_logits(solo), eng_seq_logits(bs[i]), (size_t)z.vocab * sizeof(float));
		eng_seq_free(solo);
		eng_seq_free(bs[i]);
		free(tok[i]);
	}
	print_message("backend: 8 sequences decoded together: the same bits as each alone after 8 steps\n");
	free_dev(dev);
	free(dir);
}

/* Pages shared by a fork, copied when written, returned by a truncation
 * and handed out again: the device's copies follow the host's. */
static void forks_and_truncation_follow_the_host(void **state)
{
	(void)state;
	setting st = {"llama", "f32", ENG_KV_F16, ENG_ATTN_AUTO, 16};
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 384;
	char *dir = et_mkmodel("cuda_fork", "llama", &z, "f32", 13);
	eng_model *ref = load(dir, ENG_BACKEND_REF, &st), *dev = load(dir, ENG_BACKEND_CUDA, &st);
	int32_t *t = et_tokens(120, z.vocab, 17);
	double worst = 0;
	eng_seq *r = NULL, *d = NULL, *rf = NULL, *df = NULL;
	/* a sequence run and freed first: its pages, device copies and all,
	 * wait in the pool to be handed out again below */
	assert_int_equal(eng_seq_new(&d, dev), 0);
	assert_int_equal(eng_forward(d, t + 50, 64, NULL), 0);
	eng_seq_free(d);
	assert_int_equal(eng_seq_new(&r, ref), 0);
	assert_int_equal(eng_seq_new(&d, dev), 0);
	assert_int_equal(eng_forward(r, t, 70, NULL), 0);
	assert_int_equal(eng_forward(d, t, 70, NULL), 0);
	/* a fork at 40 (mid-page), fed other tokens: the shared page is copied */
	assert_int_equal(eng_seq_fork(&rf, r, 40), 0);
	assert_int_equal(eng_seq_fork(&df, d, 40), 0);
	assert_int_equal(eng_forward(rf, t + 80, 30, NULL), 0);
	assert_int_equal(eng_forward(df, t + 80, 30, NULL), 0);
	int checked = pages_match(df) + pages_match(d);
	double e = et_rel_err(eng_seq_logits(df), eng_seq_logits(rf), (size_t)z.vocab);
	worst = e > worst ? e : worst;
	/* the original goes on after the fork wrote its copy */
	assert_int_equal(eng_forward(r, t + 70, 10, NULL), 0);
	assert_int_equal(eng_forward(d, t + 70, 10, NULL), 0);
	checked += pages_match(d) + pages_match(df);
	e = et_rel_err(eng_seq_logits(d), eng_seq_logits(r), (size_t)z.vocab);
	worst = e > worst ? e : worst;
	/* truncated to 20 and fed something else: pages returned and reused */
	eng_seq_free(rf);
	eng_seq_free(df);
	assert_int_equal(eng_seq_truncate(r, 20), 0);
	assert_int_equal(eng_seq_truncate(d, 20), 0);
	assert_int_equal(eng_forward(r, t + 20, 90, NULL), 0);
	assert_int_equal(eng_forward(d, t + 20, 90, NULL), 0);
	checked += pages_match(d);
	e = et_rel_err(eng_seq_logits(d), eng_seq_logits(r), (size_t)z.vocab);
	worst = e > worst ? e : worst;
	print_message("backend: fork, write after fork, truncate and refill: worst error against the reference %.3g; "
		      "%d current device pages equal the host's\n", worst, checked);
	assert_true(checked >= 10);
	assert_true(worst < 1e-4);
	eng_seq_free(r);
	eng_seq_free(d);
	free(t);
	eng_model_free(ref);
	free_dev(dev);
	free(dir);
}

/* A real trained model, where its file is (SmolLM2-135M-Instruct's Q4_1
 * GGUF as setup fetches it; EVALD_SMOLLM2_GGUF names it): its Q4_1 and
 * Q8_0 weights and quantized embedding table through the backend's host
 * side give the CPU's logits (its f32 kernels: the dequantized weights,
 * f32 rows) on a prompt and four greedy steps. */
static void smollm2_gives_the_cpu_logits(void **state)
{
	(void)state;
	const char *path = getenv("EVALD_SMOLLM2_GGUF");
	if (!path || access(path, R_OK) != 0) {
		print_message("skipped: no SmolLM2 file (EVALD_SMOLLM2_GGUF=%s)\n", path ? path : "");
		skip();
	}
	char *dir = NULL, *cache = tu_tmpdir("cuda_host_cache");
	setenv("EVALD_CACHE_DIR", cache, 1); /* the converted folder goes there, not to the user's cache */
	assert_int_equal(eng_model_path_resolve(path, &dir), 0);
	free(cache);
	setenv("EVALD_QUANT_DOT", "f32", 1);
	setting st = {"llama", "f32", ENG_KV_F32, ENG_ATTN_AUTO, 16};
	eng_model *cpu = load(dir, ENG_BACKEND_CPU, &st), *m = load(dir, ENG_BACKEND_CUDA, &st);
	unsetenv("EVALD_QUANT_DOT");
	int32_t prompt[] = {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3717, 7018};
	eng_seq *a = NULL, *b = NULL;
	assert_int_equal(eng_seq_new(&a, cpu), 0);
	assert_int_equal(eng_seq_new(&b, m), 0);
	assert_int_equal(eng_forward(a, prompt, 12, NULL), 0);
	assert_int_equal(eng_forward(b, prompt, 12, NULL), 0);
	eng_model_info in;
	eng_model_get_info(m, &in);
	double worst = 0;
	for (int step = 0; step < 5; step++) {
		double e = et_rel_err(eng_seq_logits(b), eng_seq_logits(a), (size_t)in.vocab);
		worst = e > worst ? e : worst;
		int32_t ta = argmax(eng_seq_logits(a), in.vocab), tb = argmax(eng_seq_logits(b), in.vocab);
		assert_int_equal(ta, tb);
		if (step < 4) {
			assert_int_equal(eng_forward(a, &ta, 1, NULL), 0);
			assert_int_equal(eng_forward(b, &tb, 1, NULL), 0);
		}
	}
	print_message("backend: SmolLM2 Q4_1 (%s): device vs CPU (f32 kernels) worst %.3g over the prompt and 4 greedy "
		      "steps\n", in.dtypes, worst);
	assert_true(worst < 1e-4);
	eng_seq_free(a);
	eng_seq_free(b);
	eng_model_free(cpu);
	free_dev(m);
	free(dir);
}

#define CUDA_BACKEND_TESTS                                                \
	cmocka_unit_test(forwards_match_the_reference),                   \
	cmocka_unit_test(greedy_tokens_equal_the_reference),              \
	cmocka_unit_test(batch_of_eight_equals_each_alone),               \
	cmocka_unit_test(forks_and_truncation_follow_the_host),            \
	cmocka_unit_test(smollm2_gives_the_cpu_logits)

#endif
