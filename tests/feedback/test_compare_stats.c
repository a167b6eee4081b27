/* feedback: the paired statistics of comparisons (McNemar exact, paired
 * bootstrap interval, sign-flip permutation test, MDE) on tables and
 * constructed cases whose answers are known. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "feedback/feedback.h"

static void mcnemar_exact_p_matches_binomial_tables(void **st)
{
	(void)st;
	/* 2 * P(X <= 0), X ~ Bin(5, 1/2) = 2/32 */
	assert_float_equal(ev_paired_mcnemar_p(0, 5), 0.0625, 1e-12);
	assert_float_equal(ev_paired_mcnemar_p(5, 0), 0.0625, 1e-12);
	/* 2 * (1 + 10) / 1024 */
	assert_float_equal(ev_paired_mcnemar_p(1, 9), 22.0 / 1024.0, 1e-12);
	assert_float_equal(ev_paired_mcnemar_p(9, 1), 0.021484375, 1e-12);
	/* 2 * (1 + 20 + 190) / 2^20 */
	assert_float_equal(ev_paired_mcnemar_p(2, 18), 2.0 * 211.0 / 1048576.0, 1e-12);
	/* balanced tables and no discordant pair: capped at 1 */
	assert_float_equal(ev_paired_mcnemar_p(3, 3), 1.0, 0);
	assert_float_equal(ev_paired_mcnemar_p(0, 0), 1.0, 0);
	assert_true(isnan(ev_paired_mcnemar_p(-1, 2)));
}

static void mcnemar_exact_p_stays_finite_for_large_tables(void **st)
{
	(void)st;
	/* z = 300 / sqrt(10300) = 2.956: the normal approximation gives 0.0031 */
	double p = ev_paired_mcnemar_p(5000, 5300);
	assert_true(p > 0.002 && p < 0.0045);
	/* far in the tail: tiny but not NaN, and still a probability */
	p = ev_paired_mcnemar_p(0, 2000);
	assert_true(p >= 0 && p < 1e-300);
	p = ev_paired_mcnemar_p(100000, 100000);
	assert_float_equal(p, 1.0, 1e-9);
}

static void paired_bootstrap_contains_the_true_delta_of_a_constructed_case(void **st)
{
	(void)st;
	enum { N = 200 };
	double a[N], b[N];
	for (int i = 0; i < N; i++) {
		a[i] = 1;
		b[i] = i % 4 == 0 ? 0 : 1; /* delta exactly -0.25 */
	}
	double lo, hi;
	assert_int_equal(ev_paired_bootstrap_ci(&lo, &hi, a, b, N, 42, 2000), 0);
	assert_true(lo <= -0.25 && hi >= -0.25);
	assert_true(hi < 0);          /* a real drop: the interval excludes 0 */
	assert_true(hi - lo < 0.2);   /* and is not absurdly wide */
	assert_true(hi - lo > 0.05);

	/* a constant difference has no spread at all */
	for (int i = 0; i < N; i++)
		a[i] = 0.5, b[i] = 0.75;
	assert_int_equal(ev_paired_bootstrap_ci(&lo, &hi, a, b, N, 1, 500), 0);
	assert_float_equal(lo, 0.25, 1e-12);
	assert_float_equal(hi, 0.25, 1e-12);

	assert_int_equal(ev_paired_bootstrap_ci(&lo, &hi, a, b, 0, 1, 500), 0);
	assert_float_equal(lo, 0, 0);
	assert_float_equal(hi, 0, 0);
}

static void paired_bootstrap_is_deterministic_for_a_seed(void **st)
{
	(void)st;
	enum { N = 97 };
	double a[N], b[N];
	ev_rng r;
	ev_rng_seed(&r, 7);
	for (int i = 0; i < N; i++) {
		a[i] = ev_rng_uniform(&r) < 0.7;
		b[i] = ev_rng_uniform(&r) < 0.6;
	}
	double lo1, hi1, lo2, hi2, lo3, hi3;
	assert_int_equal(ev_paired_bootstrap_ci(&lo1, &hi1, a, b, N, 123, 2000), 0);
	assert_int_equal(ev_paired_bootstrap_ci(&lo2, &hi2, a, b, N, 123, 2000), 0);
	assert_true(lo1 == lo2 && hi1 == hi2);
	assert_int_equal(ev_paired_bootstrap_ci(&lo3, &hi3, a, b, N, 124, 2000), 0);
	assert_true(lo3 != lo1 || hi3 != hi1);
}

/* Over many constructed populations with a known delta, the 95% interval
 * should hold it about 95% of the time (a percentile bootstrap under-covers
 * a little at n = 100, so the band is generous but not vacuous). */
static void paired_bootstrap_covers_the_true_delta_about_95_percent(void **st)
{
	(void)st;
	enum { N = 100, TRIALS = 300 };
	double a[N], b[N];
	ev_rng r;
	ev_rng_seed(&r, 2026);
	int covered = 0;
	for (int t = 0; t < TRIALS; t++) {
		/* Model A right with p 0.8; B flips right->wrong with p 0.15 and
		 * wrong->right with p 0.25: true delta = -0.8*0.15 + 0.2*0.25 = -0.07 */
		for (int i = 0; i < N; i++) {
			a[i] = ev_rng_uniform(&r) < 0.8;
			double u = ev_rng_uniform(&r);
			b[i] = a[i] ? (u < 0.15 ? 0 : 1) : (u < 0.25 ? 1 : 0);
		}
		double lo, hi;
		assert_int_equal(ev_paired_bootstrap_ci(&lo, &hi, a, b, N, (uint64_t)t, 500), 0);
		covered += lo <= -0.07 && hi >= -0.07;
	}
	double rate = (double)covered / TRIALS;
	assert_true(rate > 0.88 && rate < 0.99);
}

static void sign_flip_p_is_exact_for_few_differences_and_agrees_with_mcnemar(void **st)
{
	(void)st;
	double a[8] = {1, 1, 1, 1, 1, 0, 0, 0}, b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	/* five differences of -1: 2 of 32 sign patterns are as extreme */
	assert_float_equal(ev_paired_sign_flip_p(a, b, 8, 1, 0), 0.0625, 1e-12);
	assert_float_equal(ev_paired_sign_flip_p(a, b, 8, 1, 0), ev_paired_mcnemar_p(5, 0), 1e-12);
	/* no difference at all */
	assert_float_equal(ev_paired_sign_flip_p(a, a, 8, 1, 0), 1.0, 0);
	/* +0.5 and -0.5 cancel: every pattern is at least as extreme as 0 */
	double c[2] = {0.5, 0.5}, d[2] = {1.0, 0.0};
	assert_float_equal(ev_paired_sign_flip_p(c, d, 2, 1, 0), 1.0, 1e-12);
}

static void sign_flip_p_monte_carlo_separates_shift_from_noise(void **st)
{
	(void)st;
	enum { N = 120 };
	double a[N], b[N], c[N];
	ev_rng r;
	ev_rng_seed(&r, 9);
	for (int i = 0; i < N; i++) {
		a[i] = ev_rng_uniform(&r);
		b[i] = a[i] - 0.2 + 0.1 * (ev_rng_uniform(&r) - 0.5); /* a clear shift */
		c[i] = a[i] + 0.1 * (ev_rng_uniform(&r) - 0.5);       /* noise only */
		if (b[i] < 0)
			b[i] = 0;
		if (c[i] < 0)
			c[i] = 0;
	}
	double p_shift = ev_paired_sign_flip_p(a, b, N, 5, 5000);
	double p_noise = ev_paired_sign_flip_p(a, c, N, 5, 5000);
	assert_true(p_shift <= 2.0 / 5001.0);
	assert_true(p_noise > 0.05);
	/* seeded: the same p again */
	assert_float_equal(ev_paired_sign_flip_p(a, c, N, 5, 5000), p_noise, 0);
}

static void sign_flip_p_uses_the_exact_normal_limit_for_many_differences(void **st)
{
	(void)st;
	enum { N = 5000 };
	static double a[N], b[N];
	for (int i = 0; i < N; i++) {
		a[i] = i < 2600 ? 0 : 1;
		b[i] = i < 2600 ? 1 : 0;
	}
	/* sum 200, variance 5000: z = 2.828, p = erfc(2) */
	double p = ev_paired_sign_flip_p(a, b, N, 1, 0);
	assert_float_equal(p, erfc(2.0), 1e-12);
	/* and close to McNemar's exact p on the same table */
	double m = ev_paired_mcnemar_p(2400, 2600);
	assert_true(fabs(p - m) / m < 0.2);
}

static void mde_is_2_8_standard_errors_of_the_difference(void **st)
{
	(void)st;
	assert_float_equal(ev_paired_mde(0.25, 100), 2.8 * 0.05, 1e-12);
	assert_float_equal(ev_paired_mde(0.25, 0), 0, 0);
	assert_float_equal(ev_paired_mde(0, 100), 0, 0);
	assert_float_equal(ev_paired_mde(NAN, 100), 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mcnemar_exact_p_matches_binomial_tables),
		cmocka_unit_test(mcnemar_exact_p_stays_finite_for_large_tables),
		cmocka_unit_test(paired_bootstrap_contains_the_true_delta_of_a_constructed_case),
		cmocka_unit_test(paired_bootstrap_is_deterministic_for_a_seed),
		cmocka_unit_test(paired_bootstrap_covers_the_true_delta_about_95_percent),
		cmocka_unit_test(sign_flip_p_is_exact_for_few_differences_and_agrees_with_mcnemar),
		cmocka_unit_test(sign_flip_p_monte_carlo_separates_shift_from_noise),
		cmocka_unit_test(sign_flip_p_uses_the_exact_normal_limit_for_many_differences),
		cmocka_unit_test(mde_is_2_8_standard_errors_of_the_difference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
