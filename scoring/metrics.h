/*
 * scoring/metrics.h: aggregate statistics over per-sample scores (metrics.c).
 */
#ifndef EV_SCORING_METRICS_H
#define EV_SCORING_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct {
	size_t n;
	double mean;
	double stderr_;   /* standard error of the mean */
	double ci_low;    /* bootstrap 95% percentile interval */
	double ci_high;
} ev_stats;

/* Mean, standard error and a seeded bootstrap 95% CI (n_boot resamples,
 * 1000 when 0). n == 0 gives zeros. */
int ev_stats_compute(ev_stats *out, const double *scores, size_t n, uint64_t seed, int n_boot);

/* Unbiased pass@k for n samples with c correct (1 - C(n-c,k)/C(n,k)).
 * 1 when n - c < k (and c > 0); NAN unless n >= 1, 0 <= c <= n, k >= 1. */
double ev_pass_at_k(int n, int c, int k);
/* pass^k: the chance that k draws without replacement are all correct
 * (C(c,k)/C(n,k)); 0 when k > c; NAN on the same bad counts. */
double ev_pass_hat_k(int n, int c, int k);

#endif
