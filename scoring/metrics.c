/*
 * scoring/metrics.c: aggregate statistics over per-sample scores.
 *
 * ev_stats_compute gives the mean, its standard error and a seeded
 * percentile bootstrap 95% interval; ev_pass_at_k and ev_pass_hat_k the
 * unbiased estimators for k draws out of n attempts with c correct.
 */
#include "scoring/scoring.h"

#include <math.h>
#include <stdlib.h>

/* Resamples are capped so that a stray argument cannot ask for hours. */
#define MAX_BOOT 1000000

/* An unbiased index in [0, n) from ev_rng by multiply-and-shift with
 * rejection (Lemire): one multiplication per draw where ev_rng_below
 * divides twice, and the resampling loop is nothing but draws. */
static uint64_t draw_below(ev_rng *r, uint64_t n)
{
	__extension__ typedef unsigned __int128 u128;
	u128 m = (u128)ev_rng_next(r) * n;
	uint64_t lo = (uint64_t)m;
	if (lo < n) {
		uint64_t floor_ = -n % n;
		while (lo < floor_) {
			m = (u128)ev_rng_next(r) * n;
			lo = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks of a sorted array (the
 * "type 7" quantile that R and NumPy use by default). */
static double quantile(const double *sorted, size_t n, double q)
{
	double h = q * (double)(n - 1);
	size_t lo = (size_t)floor(h);
	if (lo + 1 >= n)
		return sorted[n - 1];
	double f = h - (double)lo;
	return sorted[lo] + f * (sorted[lo + 1] - sorted[lo]);
}

int ev_stats_compute(ev_stats *out, const double *scores, size_t n, uint64_t seed, int n_boot)
{
	if (!out)
		return ev_error_set(EV_E_INVALID, "ev_stats_compute: out is NULL");
	*out = (ev_stats){0};
	if (n_boot < 0 || n_boot > MAX_BOOT)
		return ev_error_set(EV_E_INVALID, "ev_stats_compute: n_boot %d out of range 0..%d", n_boot, MAX_BOOT);
	if (n == 0)
		return 0;
	if (!scores)
		return ev_error_set(EV_E_INVALID, "ev_stats_compute: scores is NULL");
	if (n_boot == 0)
		n_boot = 1000;
	if (n > UINT32_MAX)
		return ev_error_set(EV_E_LIMIT, "ev_stats_compute: %zu scores (at most %u)", n, UINT32_MAX);

	double sum = 0;
	bool all_equal = true;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(scores[i]))
			return ev_error_set(EV_E_INVALID, "ev_stats_compute: scores[%zu] is not finite", i);
		sum += scores[i];
		all_equal = all_equal && scores[i] == scores[0];
	}
	double mean = sum / (double)n;
	out->n = n;
	out->mean = mean;
	if (all_equal) {
		/* Every resample has this mean; skip the work and any rounding. */
		out->ci_low = out->ci_high = mean;
		return 0;
	}
	if (n >= 2) {
		double ss = 0;
		for (size_t i = 0; i < n; i++)
			ss += (scores[i] - mean) * (scores[i] - mean);
		out->stderr_ = sqrt(ss / (double)(n - 1)) / sqrt((double)n);
	}

	double *means = malloc((size_t)n_boot * sizeof *means);
	if (!means)
		return ev_error_set(EV_E_NOMEM, "ev_stats_compute: %d bootstrap means", n_boot);
	ev_rng rng;
	ev_rng_seed(&rng, seed);
	for (int b = 0; b < n_boot; b++) {
		double s = 0;
		for (size_t i = 0; i < n; i++)
			s += scores[draw_below(&rng, n)];
		means[b] = s / (double)n;
	}
	qsort(means, (size_t)n_boot, sizeof *means, cmp_double);
	out->ci_low = quantile(means, (size_t)n_boot, 0.025);
	out->ci_high = quantile(means, (size_t)n_boot, 0.975);
	free(means);
	return 0;
}

static bool counts_ok(int n, int c, int k) { return n >= 1 && c >= 0 && c <= n && k >= 1; }

double ev_pass_at_k(int n, int c, int k)
{
	if (!counts_ok(n, c, k))
		return NAN;
	if (c == 0)
		return 0.0;
	if (n - c < k)
		return 1.0;
	/* 1 - C(n-c, k) / C(n, k) as a product of ratios near 1, so that no
	 * binomial coefficient is ever formed (they overflow for n ~ 1000). */
	double fail = 1.0;
	for (int i = n - c + 1; i <= n; i++)
		fail *= 1.0 - (double)k / (double)i;
	return 1.0 - fail;
}

double ev_pass_hat_k(int n, int c, int k)
{
	if (!counts_ok(n, c, k))
		return NAN;
	if (k > c)
		return 0.0;
	/* C(c, k) / C(n, k) = prod_{i<k} (c - i) / (n - i). */
	double p = 1.0;
	for (int i = 0; i < k; i++)
		p *= (double)(c - i) / (double)(n - i);
	return p;
}
