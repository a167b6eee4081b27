/*
 * Helpers the engine tests share: random checkpoints, logits of a token
 * list on a chosen path, and the normalised error the comparisons use.
 */
#ifndef ENG_TESTUTIL_H
#define ENG_TESTUTIL_H

#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "tests/common/testutil.h"

/* ||a - b|| / ||b|| over n floats. */
static inline double et_rel_err(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)a[i] - b[i];
		num += d * d;
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* A fresh random checkpoint of `arch` in a new scratch folder. */
static inline char *et_mkmodel(const char *tag, const char *arch, const eng_mkmodel_sizes *z, const char *dtype,
			       uint64_t seed)
{
	char *dir = tu_tmpdir(tag);
	if (eng_mkmodel(dir, arch, z, dtype, seed) != 0)
		fail_msg("mkmodel %s: %s", arch, ev_error_msg());
	return dir;
}

static inline eng_model *et_load(const char *dir, eng_backend_kind be, int block)
{
	eng_model_options o = ENG_MODEL_OPTIONS_INIT;
	o.backend = be;
	o.block_size = block;
	o.threads = 2;
	eng_model *m = NULL;
	if (eng_model_load(&m, dir, &o) != 0)
		fail_msg("load %s: %s", dir, ev_error_msg());
	return m;
}

/* Logits of every position of `toks`, fed at once (step 0) or `step`
 * tokens at a time. malloc'd n * vocab floats. */
static inline float *et_logits(eng_model *m, const int32_t *toks, int n, int step)
{
	eng_model_info in;
	eng_model_get_info(m, &in);
	float *out = malloc((size_t)n * in.vocab * sizeof(float));
	eng_seq *s = NULL;
	assert_non_null(out);
	assert_int_equal(eng_seq_new(&s, m), 0);
	if (step <= 0)
		step = n;
	for (int i = 0; i < n; i += step) {
		int k = n - i < step ? n - i : step;
		if (eng_forward(s, toks + i, k, out + (size_t)i * in.vocab) != 0)
			fail_msg("forward: %s", ev_error_msg());
	}
	assert_int_equal(eng_seq_len(s), n);
	eng_seq_free(s);
	return out;
}

static inline int32_t *et_tokens(int n, int vocab, uint64_t seed)
{
	ev_rng r;
	ev_rng_seed(&r, seed);
	int32_t *t = malloc((size_t)n * sizeof(*t));
	assert_non_null(t);
	for (int i = 0; i < n; i++)
		t[i] = (int32_t)ev_rng_below(&r, (uint64_t)vocab);
	return t;
}

#endif
