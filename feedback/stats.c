/*
 * feedback/stats.c: the paired statistics behind `evald compare` and
 * regression filing: McNemar's exact test, the paired bootstrap interval,
 * the paired sign-flip permutation test and the minimum detectable effect.
 *
 * Pure functions over plain arrays (feedback may not use scoring/), seeded
 * with ev_rng so that the same inputs and seed give the same numbers.
 */
#include "feedback/feedback.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Above this many resamples or permutations the caller is asking for
 * minutes of CPU: refuse rather than hang a daemon. */
#define MAX_RESAMPLES 1000000
/* Past this many non-zero differences the sign-flip test uses the normal
 * limit of its permutation distribution instead of sampling it. */
#define SIGN_FLIP_NORMAL_ABOVE 4096

double ev_paired_mcnemar_p(long b, long c)
{
	if (b < 0 || c < 0)
		return NAN;
	long n = b + c;
	if (n == 0)
		return 1.0;
	long k = b < c ? b : c;
	/* P(X <= k) for X ~ Binomial(n, 1/2), summed in log space so that
	 * large n neither overflows nor underflows term by term. */
	double log_half_n = (double)n * log(0.5);
	double lg_n1 = lgamma((double)n + 1);
	double sum = 0;
	/* The terms rise with i up to n/2, so the last one (i = k <= n/2) is the
	 * largest: scale by it. */
	double max_term = lg_n1 - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) + log_half_n;
	for (long i = 0; i <= k; i++) {
		double lt = lg_n1 - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) + log_half_n;
		sum += exp(lt - max_term);
	}
	double p = 2.0 * exp(max_term + log(sum));
	return p > 1.0 ? 1.0 : p;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* The q-quantile (0..1) of sorted v[0..n) by linear interpolation between
 * order statistics. */
static double quantile(const double *v, size_t n, double q)
{
	if (n == 1)
		return v[0];
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)floor(pos);
	if (lo >= n - 1)
		return v[n - 1];
	double f = pos - (double)lo;
	return v[lo] + f * (v[lo + 1] - v[lo]);
}

int ev_paired_bootstrap_ci(double *ci_low, double *ci_high, const double *a, const double *b, size_t n,
                           uint64_t seed, int n_boot)
{
	*ci_low = *ci_high = 0;
	if (n == 0)
		return 0;
	if (!a || !b)
		return ev_error_set(EV_E_INVALID, "paired bootstrap: no scores");
	if (n_boot <= 0)
		n_boot = 2000;
	if (n_boot > MAX_RESAMPLES)
		return ev_error_set(EV_E_LIMIT, "paired bootstrap: %d resamples (at most %d)", n_boot, MAX_RESAMPLES);
	double *d = malloc(n * sizeof *d);
	double *means = malloc((size_t)n_boot * sizeof *means);
	if (!d || !means) {
		free(d);
		free(means);
		return ev_error_set(EV_E_NOMEM, "paired bootstrap: out of memory (%zu samples)", n);
	}
	for (size_t i = 0; i < n; i++)
		d[i] = b[i] - a[i];
	ev_rng r;
	ev_rng_seed(&r, seed);
	for (int k = 0; k < n_boot; k++) {
		double s = 0;
		for (size_t i = 0; i < n; i++)
			s += d[ev_rng_below(&r, n)];
		means[k] = s / (double)n;
	}
	qsort(means, (size_t)n_boot, sizeof *means, cmp_double);
	*ci_low = quantile(means, (size_t)n_boot, 0.025);
	*ci_high = quantile(means, (size_t)n_boot, 0.975);
	free(d);
	free(means);
	return 0;
}

double ev_paired_sign_flip_p(const double *a, const double *b, size_t n, uint64_t seed, int n_perm)
{
	double *d = NULL;
	size_t m = 0;
	double p = 1.0;
	if (n == 0 || !a || !b)
		return 1.0;
	d = malloc(n * sizeof *d);
	if (!d)
		return NAN;
	double obs = 0;
	for (size_t i = 0; i < n; i++) {
		double x = b[i] - a[i];
		if (x != 0)
			d[m++] = x;
		obs += x;
	}
	if (m == 0)
		goto done;
	/* Compare sums, not means (same n throughout); a small tolerance keeps
	 * a pattern equal to the observed one from losing to rounding. */
	obs = fabs(obs);
	double tol = 1e-9 * (obs + 1);
	if (m <= 16) {
		uint32_t total = (uint32_t)1 << m, hits = 0;
		for (uint32_t mask = 0; mask < total; mask++) {
			double s = 0;
			for (size_t i = 0; i < m; i++)
				s += (mask >> i) & 1 ? -d[i] : d[i];
			if (fabs(s) >= obs - tol)
				hits++;
		}
		p = (double)hits / (double)total;
	} else if (m > SIGN_FLIP_NORMAL_ABOVE) {
		/* Under the null each sign is a fair coin, so the sum has mean 0 and
		 * variance sum(d^2) exactly; with thousands of terms its distribution
		 * is normal to well within Monte Carlo error, at a ten-thousandth of
		 * the cost. */
		double v = 0;
		for (size_t i = 0; i < m; i++)
			v += d[i] * d[i];
		p = erfc(obs / sqrt(2.0 * v));
		if (p > 1)
			p = 1;
	} else {
		if (n_perm <= 0)
			n_perm = 10000;
		if (n_perm > MAX_RESAMPLES)
			n_perm = MAX_RESAMPLES;
		ev_rng r;
		ev_rng_seed(&r, seed ^ 0x5167f11bULL);
		long hits = 0;
		for (int k = 0; k < n_perm; k++) {
			double s = 0;
			uint64_t bits = 0;
			for (size_t i = 0; i < m; i++) {
				if ((i & 63) == 0)
					bits = ev_rng_next(&r);
				s += bits & 1 ? -d[i] : d[i];
				bits >>= 1;
			}
			if (fabs(s) >= obs - tol)
				hits++;
		}
		p = (double)(hits + 1) / (double)(n_perm + 1);
	}
done:
	free(d);
	return p;
}

double ev_paired_mde(double diff_var, size_t n)
{
	if (n == 0 || !(diff_var > 0))
		return 0;
	return 2.8 * sqrt(diff_var / (double)n);
}
