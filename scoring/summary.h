/*
 * scoring/summary.h: the one summary of scored results, and the JSON shape
 * it is stored and printed in. Part of scoring's public interface
 * (included by scoring/scoring.h).
 *
 * A suite's figures come from its fold (suites/result.h): n is the number
 * of samples with at least one scored epoch; score the mean over those
 * samples of each sample's mean over its scored epochs; stderr and a
 * seeded bootstrap 95% CI of that mean (ev_stats_compute); errors the
 * results left out as infrastructure faults; failures {reason: count} of
 * every result with a reason; pass@k and pass^k for each k that every
 * scored sample has at least k scored epochs for.
 *
 * The summary JSON, stored in runs.summary_json and printed by
 * `evald run --json`, `rescore`, `merge` and `score`:
 *   {"run_id","model","suites":[{"name","kind"?,"n","score","ci_low",
 *    "ci_high","stderr","errors","failures":{},"pass_at_k"?:{"k":p},
 *    "pass_hat_k"?:{"k":p},"circular"?:{"groups","score","ci_low","ci_high"}}]}
 */
#ifndef EV_SCORING_SUMMARY_H
#define EV_SCORING_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/result.h"

/* The bootstrap every summary uses, so that figures agree everywhere. */
#define EV_SUMMARY_SEED 0x5eed
#define EV_SUMMARY_BOOT 1000
#define EV_SUMMARY_MAX_K 8

typedef struct {
	/* the k of pass@k / pass^k to report (ascending); none: no pass@k */
	int ks[EV_SUMMARY_MAX_K];
	int n_ks;
	bool pass_hat; /* pass^k beside pass@k */
} ev_summary_options;

/* pass@1, 5, 10, 100 and pass^k: what a run with several epochs reports. */
#define EV_SUMMARY_EPOCHS_OPTIONS ((ev_summary_options){.ks = {1, 5, 10, 100}, .n_ks = 4, .pass_hat = true})

typedef struct {
	long n, errors;
	double score, ci_low, ci_high, stderr_;
	int n_k;               /* the ks reported, a prefix-free subset of the options' */
	int k[EV_SUMMARY_MAX_K];
	double pass_at_k[EV_SUMMARY_MAX_K], pass_hat_k[EV_SUMMARY_MAX_K];
	/* circular evaluation: samples sharing a metadata "circular_group"
	 * (the rotations of one multiple-choice question) pass together only
	 * when every one of them passes every scored epoch; the share of
	 * groups that pass, with its bootstrap CI. 0 groups: none. */
	long circular_groups;
	double circular_score, circular_ci_low, circular_ci_high;
} ev_suite_figures;

/* A suite's figures from its fold (NULL: a suite with no results). */
int ev_suite_figures_compute(ev_suite_figures *out, const ev_suite_fold *f, const ev_summary_options *opt);

/* One suite of a summary, as the JSON object above (kind may be NULL). */
cJSON *ev_suite_figures_json(const char *name, const char *kind, const ev_suite_figures *fig,
                             const ev_suite_fold *f, const ev_summary_options *opt);

/* The summary JSON of a run (malloc'd into *out): `planned` is the run's
 * suites list ([{"name","kind"},...], the order of the output; NULL: the
 * fold's suites in order); run_id < 0 and model NULL are written as null. */
int ev_summary_json(char **out, int64_t run_id, const char *model, const ev_run_fold *fold, const cJSON *planned,
                    const ev_summary_options *opt);

/* A summary JSON read back: the per-suite figures reports and readers use. */
typedef struct {
	char *name;
	bool has_score, has_ci, has_stderr;
	long n, errors;
	double score, ci_low, ci_high, stderr_;
	cJSON *failures;   /* {reason: count}, owned (an empty object when absent) */
	cJSON *pass_at_k;  /* owned, or NULL */
	cJSON *pass_hat_k; /* owned, or NULL */
} ev_summary_suite;

typedef struct {
	EV_VEC(ev_summary_suite) suites;
} ev_summary;

/* Parses a summary JSON; `what` names it in errors ("run 3: summary_json"). */
int ev_summary_parse(ev_summary *out, const char *json, const char *what);
void ev_summary_clear(ev_summary *s);
/* Prints a summary JSON as a short table (what `evald run` shows). */
void ev_summary_print(FILE *to, const char *summary_json);

#endif
