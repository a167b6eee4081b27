/*
 * BF16 weights against BF16-rounded activations (engine/cpu/bfdot.h): the
 * rounding and the dot product at every level the CPU has (AVX2,
 * AVX512-BF16's vdpbf16ps) against the plain definition bit for bit, over
 * row lengths with and without a partial last chunk, and the definition
 * against the f32 dot within the activations' rounding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/cpu/bfdot.h"
#include "tests/engine/engine_testutil.h"

static void fill(float *v, size_t n, ev_rng *r, double scale)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((2 * ev_rng_uniform(r) - 1) * scale);
}

static void rounding_by_definition(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 7);
	int n = 1000;
	float *x = malloc((size_t)n * 4);
	fill(x, (size_t)n, &r, 50.0);
	/* ties: 1 + 2^-8 lies between two BF16 values (1 and 1 + 2^-7), to the even one, 1 */
	x[0] = 1.0f + 1.0f / 256, x[1] = 1.0f + 3.0f / 256, x[2] = -0.0f;
	uint16_t *a = malloc(1024 * 2), *b = malloc(1024 * 2);
	eng_bf_round_ref(a, x, n);
	assert_int_equal(a[0], 0x3F80);                  /* 1.0 */
	assert_int_equal(a[1], 0x3F82);                  /* 1 + 2^-6: the even neighbour of 1 + 3 * 2^-8 */
	assert_int_equal(a[2], 0x8000);
	for (int i = n; i < 1024; i++)
		assert_int_equal(a[i], 0);
	for (int i = 3; i < n; i++) /* within half a BF16 step */
		assert_true(fabsf(eng_bf16_to_f32(a[i]) - x[i]) <= fabsf(x[i]) * (1.0f / 256) * 1.0001f);
	int top = eng_bfdot_level();
	for (int l = 0; l <= top; l++) {
		eng_bfdot_set_level(l);
		memset(b, 0x55, 1024 * 2);
		eng_bf_round(b, x, n);
		if (memcmp(a, b, 1024 * 2))
			fail_msg("BF16 rounding at level %d differs from the definition", l);
	}
	eng_bfdot_set_level(top);
	free(x), free(a), free(b);
}

static void dot_by_definition(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 8);
	int top = eng_bfdot_level();
	print_message("BF16 dot level on this CPU: %d (2: AVX512-BF16)\n", top);
	enum { NX = ENG_BFDOT_X };
	const int lens[] = {32, 576, 77, 5, 1, 1024, 33};
	for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
		int n = lens[li], np = (n + 31) / 32 * 32;
		float *wf = malloc((size_t)4 * n * 4), *x = malloc((size_t)NX * n * 4);
		uint16_t *w = malloc((size_t)4 * n * 2), *xb = malloc((size_t)NX * np * 2);
		double worst = 0;
		for (int trial = 0; trial < 10; trial++) {
			fill(wf, (size_t)4 * n, &r, 1.0);
			fill(x, (size_t)NX * n, &r, trial % 2 ? 30.0 : 0.05);
			for (int i = 0; i < 4 * n; i++)
				w[i] = eng_f32_to_bf16(wf[i]), wf[i] = eng_bf16_to_f32(w[i]);
			for (int i = 0; i < NX; i++)
				eng_bf_round_ref(xb + (size_t)i * np, x + (size_t)i * n, n);
			const uint16_t *wr[4] = {w, w + n, w + 2 * n, w + 3 * n};
			const uint16_t *xr[NX];
			for (int i = 0; i < NX; i++)
				xr[i] = xb + (size_t)i * np;
			float want[NX * 4];
			for (int i = 0; i < NX; i++)
				for (int k = 0; k < 4; k++) {
					want[i * 4 + k] = eng_bfdot_ref(xr[i], wr[k], n);
					double exact = 0, bound = 0;
					for (int e = 0; e < n; e++) {
						exact += (double)x[i * n + e] * wf[k * n + e];
						bound += fabs((double)x[i * n + e]) * fabs(wf[k * n + e]);
					}
					/* the activations' rounding (half a step: 2^-8 relative) and the sums' (n * 2^-24) */
					double err = fabs(want[i * 4 + k] - exact), lim = bound * (1.0 / 256 + n * 6e-8) * 1.01;
					if (err > lim)
						fail_msg("n=%d: BF16 dot %.7g vs exact %.7g beyond %.3g", n, want[i * 4 + k], exact, lim);
					double rel = err / (bound + 1e-30);
					worst = rel > worst ? rel : worst;
				}
			for (int l = 0; l <= top; l++) {
				eng_bfdot_set_level(l);
				for (int nx = 1; nx <= NX; nx++) {
					float got[NX * 4];
					eng_bfdot(got, xr, nx, wr, n);
					for (int i = 0; i < nx; i++)
						for (int k = 0; k < 4; k++)
							if (memcmp(&got[4 * i + k], &want[4 * i + k], 4))
								fail_msg("n=%d level %d width %d: row %d, weight row %d %.9g differs from the "
								         "definition's %.9g",
								         n, l, nx, i, k, got[4 * i + k], want[4 * i + k]);
				}
			}
			eng_bfdot_set_level(top);
		}
		print_message("n=%4d: error against the f32 dot, relative to sum |x w|: at most %.2e\n", n, worst);
		free(wf), free(x), free(w), free(xb);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rounding_by_definition),
		cmocka_unit_test(dot_by_definition),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
