/* Metrics: mean and standard error, a bootstrap interval that the seed
 * fixes, that holds the mean, narrows as n grows and collapses when all
 * scores agree; pass@k and pass^k against hand-computed values. */
#include "tests/common/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"

static void mean_and_standard_error(void **state)
{
	(void)state;
	const double x[] = {1, 0, 1, 1};
	ev_stats st;
	assert_int_equal(ev_stats_compute(&st, x, 4, 1, 0), 0);
	assert_int_equal(st.n, 4);
	assert_true(fabs(st.mean - 0.75) < 1e-12);
	/* sample sd = sqrt(0.25) = 0.5 -> se = 0.5 / 2 */
	assert_true(fabs(st.stderr_ - 0.25) < 1e-12);

	const double one[] = {0.3};
	assert_int_equal(ev_stats_compute(&st, one, 1, 1, 0), 0);
	assert_true(st.mean == 0.3 && st.stderr_ == 0.0 && st.ci_low == 0.3 && st.ci_high == 0.3);

	assert_int_equal(ev_stats_compute(&st, NULL, 0, 1, 0), 0);
	assert_true(st.n == 0 && st.mean == 0 && st.stderr_ == 0 && st.ci_low == 0 && st.ci_high == 0);
}

static void bad_inputs_are_rejected(void **state)
{
	(void)state;
	const double x[] = {1, NAN};
	ev_stats st;
	assert_int_equal(ev_stats_compute(&st, x, 2, 1, 0), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "scores[1]"));
	assert_int_equal(ev_stats_compute(&st, x, 1, 1, -5), EV_E_INVALID);
	assert_int_equal(ev_stats_compute(&st, NULL, 3, 1, 0), EV_E_INVALID);
}

static void make_scores(double *x, size_t n, uint64_t seed, double p)
{
	ev_rng r;
	ev_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = ev_rng_uniform(&r) < p ? 1.0 : 0.0;
}

static void bootstrap_is_deterministic_per_seed(void **state)
{
	(void)state;
	double x[200];
	make_scores(x, 200, 7, 0.6);
	ev_stats a, b, c;
	assert_int_equal(ev_stats_compute(&a, x, 200, 42, 1000), 0);
	assert_int_equal(ev_stats_compute(&b, x, 200, 42, 1000), 0);
	assert_int_equal(ev_stats_compute(&c, x, 200, 43, 1000), 0);
	assert_memory_equal(&a, &b, sizeof a);
	assert_true(a.ci_low != c.ci_low || a.ci_high != c.ci_high);
	assert_true(a.mean == c.mean);
}

static void bootstrap_interval_is_sane(void **state)
{
	(void)state;
	static double x[4000];
	double prev_width = 2.0;
	const size_t sizes[] = {25, 100, 400, 1600, 4000};
	for (size_t k = 0; k < 5; k++) {
		size_t n = sizes[k];
		make_scores(x, n, 11 + k, 0.7);
		ev_stats st;
		assert_int_equal(ev_stats_compute(&st, x, n, 5, 1000), 0);
		double width = st.ci_high - st.ci_low;
		print_message("n=%zu mean=%.4f se=%.4f ci=[%.4f, %.4f] width=%.4f\n", n, st.mean, st.stderr_, st.ci_low,
		              st.ci_high, width);
		assert_true(st.ci_low <= st.mean && st.mean <= st.ci_high);
		assert_true(st.ci_low >= 0.0 && st.ci_high <= 1.0);
		assert_true(width < prev_width);
		/* A 95% interval is about 2 x 1.96 standard errors wide. */
		assert_true(width > 3.0 * st.stderr_ && width < 5.0 * st.stderr_);
		prev_width = width;
	}
}

static void bootstrap_coverage_is_near_nominal(void **state)
{
	(void)state;
	/* Draw 200 data sets of 100 Bernoulli(0.3) scores; the percentile
	 * interval should hold the true mean in roughly 95% of them. */
	double x[100];
	int covered = 0, trials = 200;
	for (int t = 0; t < trials; t++) {
		make_scores(x, 100, 1000 + (uint64_t)t, 0.3);
		ev_stats st;
		assert_int_equal(ev_stats_compute(&st, x, 100, (uint64_t)t, 500), 0);
		covered += st.ci_low <= 0.3 && 0.3 <= st.ci_high;
	}
	print_message("coverage %d/%d\n", covered, trials);
	assert_true(covered >= 175 && covered <= 200);
}

static void equal_scores_collapse_the_interval(void **state)
{
	(void)state;
	double x[50];
	for (int i = 0; i < 50; i++)
		x[i] = 0.1;
	ev_stats st;
	assert_int_equal(ev_stats_compute(&st, x, 50, 3, 100), 0);
	assert_true(st.ci_low == st.mean && st.ci_high == st.mean && st.stderr_ == 0.0);
}

static void pass_at_k_known_values(void **state)
{
	(void)state;
	assert_true(fabs(ev_pass_at_k(10, 3, 1) - 0.3) < 1e-12);
	assert_true(ev_pass_at_k(5, 5, 1) == 1.0);
	assert_true(ev_pass_at_k(5, 5, 5) == 1.0);
	assert_true(ev_pass_at_k(10, 0, 1) == 0.0);
	assert_true(ev_pass_at_k(10, 0, 20) == 0.0);
	/* n - c < k: every draw of k holds a correct one. */
	assert_true(ev_pass_at_k(10, 8, 3) == 1.0);
	assert_true(ev_pass_at_k(3, 1, 5) == 1.0);
	/* 1 - C(8,2)/C(10,2) = 1 - 28/45 */
	assert_true(fabs(ev_pass_at_k(10, 2, 2) - 17.0 / 45.0) < 1e-12);
	/* 1 - C(7,3)/C(10,3) = 1 - 35/120 */
	assert_true(fabs(ev_pass_at_k(10, 3, 3) - 85.0 / 120.0) < 1e-12);
	/* Stable where binomials overflow: n=2000, c=1, k=100 -> k/n. */
	assert_true(fabs(ev_pass_at_k(2000, 1, 100) - 0.05) < 1e-12);
	double big = ev_pass_at_k(5000, 40, 200);
	assert_true(isfinite(big) && big > 0.8 && big < 1.0);
	assert_true(isnan(ev_pass_at_k(0, 0, 1)));
	assert_true(isnan(ev_pass_at_k(5, 6, 1)));
	assert_true(isnan(ev_pass_at_k(5, 1, 0)));
	assert_true(isnan(ev_pass_at_k(5, -1, 1)));
}

static void pass_hat_k_known_values(void **state)
{
	(void)state;
	assert_true(fabs(ev_pass_hat_k(10, 3, 1) - 0.3) < 1e-12);
	/* C(3,2)/C(10,2) = 3/45 */
	assert_true(fabs(ev_pass_hat_k(10, 3, 2) - 3.0 / 45.0) < 1e-12);
	assert_true(ev_pass_hat_k(10, 3, 4) == 0.0);
	assert_true(ev_pass_hat_k(4, 4, 4) == 1.0);
	assert_true(isnan(ev_pass_hat_k(3, 4, 1)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mean_and_standard_error),
		cmocka_unit_test(bad_inputs_are_rejected),
		cmocka_unit_test(bootstrap_is_deterministic_per_seed),
		cmocka_unit_test(bootstrap_interval_is_sane),
		cmocka_unit_test(bootstrap_coverage_is_near_nominal),
		cmocka_unit_test(equal_scores_collapse_the_interval),
		cmocka_unit_test(pass_at_k_known_values),
		cmocka_unit_test(pass_hat_k_known_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
