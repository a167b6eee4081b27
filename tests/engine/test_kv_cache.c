/*
 * The paged KV cache: sequences forked from a common prefix share its full
 * pages and give the logits of unshared ones (also after truncating into
 * a shared page); f16/bf16 KV stays close to f32; the byte bound fails
 * clearly; a prompt prefilled in chunks equals it fed at once; the fast
 * path's attention scratch does not depend on the context cap; pages of
 * 2 MiB or more are maps of their own advised for huge pages.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

static char *g_dir;
static eng_mkmodel_sizes g_z;

static int setup(void **state)
{
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 300;
	g_z = z;
	g_dir = tu_tmpdir("kv");
	return eng_mkmodel(g_dir, "qwen2", &z, "f32", 5) ? -1 : 0;
}

static eng_model *load_kv(eng_backend_kind be, eng_kv_dtype dt, uint64_t max_bytes, long max_context)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = be;
	o.threads = 2;
	o.block_size = 16;
	o.kv_dtype = dt;
	o.kv_max_bytes = max_bytes;
	o.max_context = max_context;
	eng_model *m = NULL;
	if (eng_model_load(&m, g_dir, &o) != 0)
		fail_msg("load: %s", ev_error_msg());
	return m;
}

/* logits after feeding `suffix` to a fork of `base` at n_prefix */
static void fork_logits(float *out, eng_seq *base, long n_prefix, const int32_t *suffix, int ns)
{
	eng_seq *f = NULL;
	if (eng_seq_fork(&f, base, n_prefix) != 0)
		fail_msg("fork: %s", ev_error_msg());
	assert_int_equal(eng_seq_len(f), n_prefix);
	assert_int_equal(eng_forward(f, suffix, ns, out), 0);
	eng_seq_free(f);
}

static void kv_shared_prefix_sequences_equal_unshared_ones(void **state)
{
	for (int be = 0; be < 2; be++) {
		eng_model *m = load_kv(be ? ENG_BACKEND_REF : ENG_BACKEND_CPU, ENG_KV_F32, 0, 0);
		int np = 70, ns = 20; /* 70 = 4 full pages of 16 + 6 */
		int32_t *t = et_tokens(np + 2 * ns, g_z.vocab, 3);
		const int32_t *qa = t + np, *qb = t + np + ns;
		size_t V = (size_t)g_z.vocab, nv = (size_t)ns * V;
		float *fa = malloc(nv * sizeof(float)), *fb = malloc(nv * sizeof(float));
		float *fc = malloc((size_t)(np - 64 + ns) * V * sizeof(float)), *ua = malloc(nv * sizeof(float));
		eng_seq *base = NULL, *u = NULL;
		assert_int_equal(eng_seq_new(&base, m), 0);
		assert_int_equal(eng_forward(base, t, np, NULL), 0);
		long live = m->kv.live;
		fork_logits(fa, base, np, qa, ns);
		fork_logits(fb, base, np, qb, ns);
		fork_logits(fc, base, 64, t + 64, np - 64 + ns); /* fork on a page boundary */
		/* unshared: the whole prompt in a fresh sequence */
		int32_t *full = malloc((size_t)(np + ns) * sizeof(*full));
		memcpy(full, t, (size_t)np * sizeof(*full));
		memcpy(full + np, qa, (size_t)ns * sizeof(*full));
		float *all = et_logits(m, full, np + ns, 0);
		assert_memory_equal(fa, all + (size_t)np * V, nv * sizeof(float));
		assert_memory_equal(fc + (size_t)(np - 64) * V, all + (size_t)np * V, nv * sizeof(float));
		memcpy(full + np, qb, (size_t)ns * sizeof(*full));
		float *allb = et_logits(m, full, np + ns, 0);
		assert_memory_equal(fb, allb + (size_t)np * V, nv * sizeof(float));
		/* forks held at once share the 4 full pages: one copied page each */
		eng_seq *f1 = NULL, *f2 = NULL;
		assert_int_equal(eng_seq_fork(&f1, base, np), 0);
		assert_int_equal(eng_seq_fork(&f2, base, np), 0);
		assert_int_equal(m->kv.live, live + 2);
		assert_int_equal(base->pages[0]->refs, 3);
		/* the base goes on writing after forks: its shared pages untouched */
		assert_int_equal(eng_forward(base, qa, ns, ua), 0);
		assert_memory_equal(ua, fa, nv * sizeof(float));
		/* truncating into a shared page copies it; the forks are unharmed */
		assert_int_equal(eng_seq_truncate(f1, 40), 0);
		assert_int_equal(eng_forward(f1, t + 40, np - 40, NULL), 0);
		assert_int_equal(eng_forward(f1, qb, ns, fc), 0);
		assert_memory_equal(fc, fb, nv * sizeof(float));
		assert_int_equal(eng_forward(f2, qa, ns, fc), 0);
		assert_memory_equal(fc, fa, nv * sizeof(float));
		assert_int_equal(eng_seq_fork(&u, base, base->len + 1) < 0, 1);
		eng_seq_free(f1), eng_seq_free(f2), eng_seq_free(base);
		assert_int_equal(m->kv.live, 0);
		free(fa), free(fb), free(fc), free(ua), free(full), free(all), free(allb), free(t);
		eng_model_free(m);
	}
}

static void kv_half_precision_is_close_to_f32(void **state)
{
	int n = 90;
	int32_t *t = et_tokens(n, g_z.vocab, 8);
	size_t nv = (size_t)n * g_z.vocab;
	eng_model *f32 = load_kv(ENG_BACKEND_CPU, ENG_KV_F32, 0, 0);
	float *l32 = et_logits(f32, t, n, 0);
	eng_model_info i32, i16;
	eng_model_get_info(f32, &i32);
	eng_kv_dtype dts[] = {ENG_KV_F16, ENG_KV_BF16};
	double tol[] = {2e-3, 2e-2};
	for (int k = 0; k < 2; k++) {
		eng_model *h = load_kv(ENG_BACKEND_CPU, dts[k], 0, 0), *hr = load_kv(ENG_BACKEND_REF, dts[k], 0, 0);
		eng_model_get_info(h, &i16);
		assert_true(i16.kv_bytes_per_token < i32.kv_bytes_per_token * 6 / 10);
		float *lh = et_logits(h, t, n, 0), *ls = et_logits(h, t, n, 1), *lr = et_logits(hr, t, n, 0);
		double e = et_rel_err(lh, l32, nv), er = et_rel_err(lh, lr, nv);
		print_message("kv %s: vs f32 %.2e, fast vs ref %.2e\n", k ? "bf16" : "f16", e, er);
		assert_true(e > 0 && e < tol[k]);
		assert_true(er < 1e-4);
		assert_memory_equal(lh, ls, nv * sizeof(float));
		free(lh), free(ls), free(lr);
		eng_model_free(h), eng_model_free(hr);
	}
	free(l32), free(t);
	eng_model_free(f32);
}

static void kv_byte_bound_fails_clearly(void **state)
{
	eng_model *m = load_kv(ENG_BACKEND_CPU, ENG_KV_F32, 1, 0);
	size_t page = m->kv.page_bytes;
	eng_model_free(m);
	m = load_kv(ENG_BACKEND_CPU, ENG_KV_F32, 3 * page, 0); /* 3 pages = 48 tokens */
	int32_t *t = et_tokens(60, g_z.vocab, 1);
	eng_seq *s = NULL, *s2 = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_forward(s, t, 48, NULL), 0);
	assert_int_equal(eng_model_kv_bytes(m), 3 * page);
	int rc = eng_forward(s, t + 48, 1, NULL);
	assert_int_equal(rc, EV_E_LIMIT);
	print_message("%s\n", ev_error_msg());
	assert_non_null(strstr(ev_error_msg(), "--kv-max-bytes"));
	assert_int_equal(eng_seq_len(s), 48);
	/* forking shares pages: a full-page prefix costs nothing */
	assert_int_equal(eng_seq_fork(&s2, s, 32), 0);
	assert_int_equal(eng_model_kv_bytes(m), 3 * page);
	eng_seq_free(s2);
	/* freeing makes room again */
	assert_int_equal(eng_seq_truncate(s, 16), 0);
	assert_int_equal(eng_forward(s, t + 16, 20, NULL), 0);
	eng_seq_free(s);
	free(t);
	eng_model_free(m);
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	assert_int_equal(eng_options_parse_flag(&o, "--kv-max-bytes", "2m"), 1);
	assert_int_equal(o.kv_max_bytes, 2u << 20);
	assert_int_equal(eng_options_parse_flag(&o, "--kv-dtype", "bf16"), 1);
	assert_int_equal(o.kv_dtype, ENG_KV_BF16);
	assert_true(eng_options_parse_flag(&o, "--kv-max-bytes", "lots") < 0);
	assert_true(eng_options_parse_flag(&o, "--kv-dtype", "f8") < 0);
}

static void kv_chunked_prefill_equals_unchunked(void **state)
{
	/* 600 positions: over two 256-row forward chunks inside one call, and
	 * fed as uneven caller chunks; scratch independent of the cap */
	int n = 600;
	int32_t *t = et_tokens(n, g_z.vocab, 12);
	size_t nv = (size_t)n * g_z.vocab;
	eng_model *small = load_kv(ENG_BACKEND_CPU, ENG_KV_F32, 0, 1024);
	eng_model *big = load_kv(ENG_BACKEND_CPU, ENG_KV_F32, 0, 0);
	float *a = et_logits(small, t, n, 0), *b = et_logits(small, t, n, 97), *c = et_logits(big, t, n, 250);
	assert_memory_equal(a, b, nv * sizeof(float));
	assert_memory_equal(a, c, nv * sizeof(float));
	free(a), free(b), free(c), free(t);
	eng_model_free(small), eng_model_free(big);
}

#if !defined(__SANITIZE_ADDRESS__)
/* The VMA flags /proc/self/smaps lists for the map that starts at `at`
 * (into flags), and its size in kB; 0 when no map starts there. */
static long smaps_of(const void *at, char *flags, size_t cap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long kb = 0;
	bool in = false;
	flags[0] = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = lo == (unsigned long)(uintptr_t)at;
			if (in)
				kb = (long)((hi - lo) >> 10);
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			snprintf(flags, cap, "%s", line + 8);
		}
	}
	if (f)
		fclose(f);
	return kb;
}

/* Maps of this process that overlap [lo, hi) */
static int maps_over(uintptr_t lo, uintptr_t hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long a, b;
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a < hi && b > lo)
			n++;
	}
	if (f)
		fclose(f);
	return n;
}
#endif

/* Pages of 2 MiB or more are maps of their own on a 2 MiB boundary,
 * exactly the page's bytes, advised for huge pages ("hg"), and unmapped
 * when freed; smaller pages (and builds under AddressSanitizer) come from
 * malloc. */
static void kv_large_pages_are_maps_advised_huge(void **state)
{
	(void)state;
	eng_kv_pool p;
	/* 5 layers of 2 x 512 positions x 5 heads x 48 floats: 4.7 MiB a page, not a whole number of 4 KiB */
	assert_int_equal(eng_kv_pool_init(&p, 5, 5, 48, 512), 0);
	assert_true(p.page_bytes > ((size_t)4 << 20) && p.page_bytes % 4096);
	eng_page *pg[3];
	for (int i = 0; i < 3; i++) {
		assert_non_null(pg[i] = eng_page_get(&p));
		memset(pg[i]->data, 0x5a, p.page_bytes); /* every byte is the page's */
	}
#if defined(__SANITIZE_ADDRESS__)
	for (int i = 0; i < 3; i++)
		assert_false(pg[i]->mapped);
#else
	for (int i = 0; i < 3; i++) {
		char flags[256];
		assert_true(pg[i]->mapped);
		assert_int_equal((uintptr_t)pg[i]->data % ((uintptr_t)2 << 20), 0);
		long kb = smaps_of(pg[i]->data, flags, sizeof flags);
		if (kb != (long)((p.page_bytes + 4095) / 4096 * 4))
			fail_msg("page %d: a map of %ld kB, the page is %zu bytes", i, kb, p.page_bytes);
		if (!strstr(flags, " hg"))
			fail_msg("page %d: not advised for huge pages (VmFlags:%s)", i, flags);
	}
	unsigned char *first = pg[0]->data;
#endif
	for (int i = 0; i < 3; i++)
		eng_page_put(&p, pg[i]);
	eng_kv_pool_clear(&p); /* the free list's pages go back */
#if !defined(__SANITIZE_ADDRESS__)
	/* nothing of the page is left, nor the small page after it (where the
	 * slack mapped past an unaligned end would start) */
	if (maps_over((uintptr_t)first, (uintptr_t)first + (p.page_bytes + 4095) / 4096 * 4096 + 4096))
		fail_msg("a freed page's address range is still mapped");
#endif
	/* a small page: malloc's */
	assert_int_equal(eng_kv_pool_init(&p, 2, 2, 16, 16), 0);
	eng_page *small = eng_page_get(&p);
	assert_non_null(small);
	assert_false(small->mapped);
	eng_page_put(&p, small);
	eng_kv_pool_clear(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kv_shared_prefix_sequences_equal_unshared_ones),
		cmocka_unit_test(kv_half_precision_is_close_to_f32),
		cmocka_unit_test(kv_byte_bound_fails_clearly),
		cmocka_unit_test(kv_chunked_prefill_equals_unchunked),
		cmocka_unit_test(kv_large_pages_are_maps_advised_huge),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
