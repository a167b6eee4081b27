/*
 * feedback/compare.h: paired comparison of two runs, the noise floor
 * (calibration) and regressions with their lifecycle.
 * Part of the tracker's public interface (feedback/feedback.h).
 */
#ifndef EV_FEEDBACK_COMPARE_H
#define EV_FEEDBACK_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "feedback/tracker.h"


/* ---- paired statistics (stats.c): plain arrays, no tracker ---------------- */

/* McNemar's exact two-sided p for b and c discordant pairs: the binomial
 * test of min(b, c) successes in b + c trials with p = 1/2, doubled and
 * capped at 1. 1 when b + c == 0; NAN for negative counts. */
double ev_paired_mcnemar_p(long b, long c);

/* Percentile 95% interval of mean(b[i] - a[i]) over n_boot (2000 when <= 0)
 * resamples of the indices with replacement, seeded (same seed, same
 * interval). n == 0 gives [0, 0]. */
int ev_paired_bootstrap_ci(double *ci_low, double *ci_high, const double *a, const double *b, size_t n,
                           uint64_t seed, int n_boot);

/* Two-sided p of the paired sign-flip permutation test of mean(b - a) == 0:
 * exact over every sign pattern when at most 16 differences are non-zero,
 * n_perm (10000 when <= 0) seeded random patterns up to 4096, p = (k + 1) /
 * (n_perm + 1), and past that the normal limit of the permutation
 * distribution (variance sum(d^2)). 1 when every difference is 0. */
double ev_paired_sign_flip_p(const double *a, const double *b, size_t n, uint64_t seed, int n_perm);

/* Minimum detectable effect (80% power, two-sided 5%): 2.8 * sqrt(var / n)
 * where var is the variance of one per-sample difference. 0 when n == 0. */
double ev_paired_mde(double diff_var, size_t n);

/* ---- comparison (compare.c) ------------------------------------------------ */

/* The per-sample fingerprint of a failure, from the stored result. */
typedef enum {
	EV_FP_WRONG_ANSWER = 0,   /* "wrong_answer" */
	EV_FP_NO_ANSWER,          /* "no_answer" */
	EV_FP_TRUNCATED,          /* "truncated" */
	EV_FP_UNCLOSED_THINKING,  /* "unclosed_thinking" */
	EV_FP_TOOL_CALL_PARSE,    /* "tool_call_parse_error" */
	EV_FP_TIMEOUT,            /* "timeout" */
	EV_FP_SANDBOX_ERROR,      /* "sandbox_error" */
	EV_FP_BACKEND_ERROR,      /* "backend_error" */
	EV_FP_COUNT
} ev_fingerprint;

const char *ev_fingerprint_name(ev_fingerprint f);
/* Classifies one stored result (reason, detail, finish_reason; any may be
 * NULL). */
ev_fingerprint ev_fingerprint_of(const char *reason, const char *detail, const char *finish_reason);

typedef struct {
	uint64_t seed;   /* bootstrap and permutation seed (default 1) */
	int n_boot;      /* bootstrap resamples (default 2000) */
	int n_perm;      /* sign-flip permutations for non-binary scores (default 10000) */
	bool use_calibration; /* take the noise floor from the latest calibration (default true) */
} ev_compare_options;

/* Results whose reason is an infrastructure fault (ev_result_is_error) are
 * left out of the scores compared. */
#define EV_COMPARE_OPTIONS_INIT {.seed = 1, .n_boot = 2000, .n_perm = 10000, .use_calibration = true}

/* A sample that flipped between the runs. */
typedef struct {
	char *sample_id;
	double score_a, score_b;
	ev_fingerprint fingerprint; /* of the failing side (B for broken, A for fixed) */
	char *detail;               /* that result's detail, cut to 256 bytes; may be NULL */
	double flip_rate;           /* from the calibration; -1 when none */
	unsigned changed;           /* EV_PROV_* bits: what of the request differed between the runs */
} ev_flip;

/* What differed in a sample's request between two runs (its provenance). */
enum { EV_PROV_PROMPT = 1, EV_PROV_DECODING = 2, EV_PROV_TOOLS = 4, EV_PROV_RENDERED = 8 };
/* "prompt,rendered_prompt,decoding,tools" (those set) into out (at least
 * 48 bytes); "" for 0. rendered_prompt: the prompt as the model got it
 * (the engine's chat template and tokenizer applied) differs. */
const char *ev_provenance_names(unsigned bits, char *out, size_t cap);

typedef struct {
	char *name;
	size_t n;              /* samples scored in both runs */
	size_t only_a, only_b; /* samples scored in one run only (left out) */
	double score_a, score_b, delta; /* delta = score_b - score_a */
	double ci_low, ci_high; /* paired bootstrap 95% interval of delta */
	double p;
	bool binary;           /* every per-sample score is 0 or 1 */
	const char *test;      /* "mcnemar_exact" or "sign_flip_permutation" (static) */
	double mde;
	const char *mde_source; /* "calibration" or "observed" (static) */
	int64_t calibration_id; /* 0 when none was used */
	double noise_var;      /* per-sample variance the MDE came from */
	ev_flip *fixed;        /* A < 1, B == 1 */
	size_t n_fixed;
	ev_flip *broken;       /* A == 1, B < 1 */
	size_t n_broken;
	/* provenance: paired samples whose request differed between the runs
	 * (prompt, decoding or tools), and the part of delta they carry
	 * (sum of their b - a over n); `other_change` also when the suite
	 * itself (its hash) or the run's settings differ beyond the model */
	size_t n_changed;
	double delta_changed;
	bool suite_changed;
} ev_compare_suite;

/* A preprocessing setting that differs between the two runs' fingerprints
 * (the "preprocessing" object multimodal runs store with their config). */
typedef struct {
	char *key;
	char *a, *b; /* the values as JSON text; "absent" when a run lacks it */
} ev_prep_diff;

typedef struct {
	int64_t run_a, run_b;
	char *model_a, *model_b;
	ev_compare_suite *suites; /* by name */
	size_t n_suites;
	/* where the runs' preprocessing fingerprints differ (both runs
	 * multimodal, or one of them): images reached the two models
	 * differently, so a score change may not be the model's */
	ev_prep_diff *prep;
	size_t n_prep;
	/* the run settings (config_json keys) that differ, the model's own
	 * ("models", "model_name") left out: a change other than the model */
	ev_prep_diff *config;
	size_t n_config;
} ev_compare;

/* Compares run B with run A over the (suite, sample) pairs both scored:
 * per-sample score = the mean over its epochs that are not errors; samples
 * with only error results are left out. McNemar's exact test when every
 * per-sample score is 0 or 1, else the paired sign-flip permutation test.
 * The MDE comes from the latest calibration of the suite (preferring one
 * with the same suite hash as run B) when there is one, else from the
 * observed variance of the paired differences. Free with ev_compare_free. */
int ev_compare_runs(ev_compare **out, ev_tracker *t, int64_t run_a, int64_t run_b, const ev_compare_options *opt);
void ev_compare_free(ev_compare *c);
/* {"run_a","run_b","model_a","model_b","preprocessing_differs":[{"key","a","b"}],"suites":[{"name","n","score_a",
 * "score_b","delta","ci_low","ci_high","p","test","mde","mde_source",
 * "calibration_id","significant_drop","only_a","only_b","fixed":[ids],
 * "broken":[ids],"fixed_samples"/"broken_samples":[{"id","score_a",
 * "score_b","fingerprint","detail","flip_rate","changed":[what differed:
 * "prompt","rendered_prompt","decoding","tools", settings keys, "suite","preprocessing"]}],
 * "provenance":{"samples_changed","delta_from_changed_requests",
 * "suite_changed","settings_changed","share_of_delta_with_other_change"
 * (1 when settings, suite or preprocessing differ; else the changed
 * requests' part of delta; null when delta is 0)}}],
 * "config_differs":[{"key","a","b"}]};
 * malloc'd. */
int ev_compare_json(char **out, const ev_compare *c);
/* True when suite s is a significant drop: ci_high < 0, p < 0.05 and
 * |delta| > mde. */
bool ev_compare_is_regression(const ev_compare_suite *s);

/* ---- routing evaluated offline (route.c) ------------------------------------- */

typedef struct {
	bool latency;     /* cost in seconds (default: prompt + completion tokens) */
	double threshold; /* the "cost" router: the cheapest model within this of the best (0.05) */
	uint64_t seed;    /* bootstrap seed (1) */
	const char *by;   /* categories from this metadata key (a classifier's label); NULL: category, task, suite */
} ev_route_options;

#define EV_ROUTE_OPTIONS_INIT {.threshold = 0.05, .seed = 1}

/* Routers over stored runs of several models on the same suites, scored on
 * the samples every run scored (route.c says how): {"samples","cost",
 * "models":[{"name","run","score","ci_low","ci_high","cost"}],"routers":[
 * {"name":"category"|"cost"|"oracle","score","ci_low","ci_high","cost"}],
 * "hull":[names],"hull_area","tables":{"category":T,"cost":T}}, where T
 * is the rule learned on every sample as `evald run --router` reads it
 * ({"by"?,"routes":{category: N},"default":N}, N the run's place, 1-based);
 * malloc'd. */
int ev_route_eval(ev_tracker *t, const int64_t *runs, size_t n_runs, const ev_route_options *opt, char **out_json);

/* ---- calibration (compare_calib.c) ----------------------------------------- */

/* Computes and stores one noise-floor record per suite from repeated runs
 * of the same evaluation (at least 2): the sample variance of the suite
 * score across the runs, and per-sample flip rates (the fraction of runs
 * where the sample's outcome, pass = score 1, differs from its majority).
 * `model` names the model. *out_json (may be NULL) gets
 * {"calibrations":[{"id","model","suite","suite_hash","repeats","n",
 * "variance","mean_flip_rate","flaky":{id:rate},"run_ids":[..]}]}. */
int ev_calibration_store(ev_tracker *t, const char *model, const int64_t *run_ids, size_t n_runs,
                         const ev_compare_options *opt, char **out_json);
/* The latest calibration of `suite` as JSON (same shape as one element
 * above); EV_E_NOTFOUND when none. */
int ev_calibration_get_json(ev_tracker *t, const char *suite, char **out_json);

/* ---- regressions (regress.c) ----------------------------------------------- */

/* Statuses: new, confirmed, investigating, fixed, invalid, wontfix, regressed. */
bool ev_regression_status_valid(const char *status);

/* Files regressions from an existing comparison (A = baseline, B =
 * candidate), suite by suite:
 *  - significantly worse (ev_compare_is_regression): the regression of
 *    (suite, baseline run) is created ("new"), or updated with this
 *    candidate's evidence (broken samples replaced); one that was "fixed"
 *    becomes "regressed" (same id); "invalid" and "wontfix" keep their
 *    status and evidence;
 *  - otherwise, open ones (new, confirmed, investigating, regressed)
 *    become "fixed" with fixed_in = the candidate's model.
 * A candidate run older than the one a regression last saw changes nothing
 * there. Each change is an event in regression_events. *out_json (may be
 * NULL) gets {"actions":[{"suite","regression_id","action"}]} with action
 * filed, updated, regressed, fixed or kept. One transaction. */
int ev_regressions_apply(ev_tracker *t, const ev_compare *cmp, char **out_json);
/* ev_compare_runs(baseline, candidate) then ev_regressions_apply: the entry
 * point for `evald compare --file-regressions` and the checkpoint watcher. */
int ev_regressions_file(ev_tracker *t, int64_t baseline_run, int64_t candidate_run, const ev_compare_options *opt,
                        char **out_json);

/* {"regressions":[{"id","suite","baseline_run","candidate_run",
 * "baseline_model","candidate_model","delta","ci_low","ci_high","p","mde",
 * "n","n_broken","status","assignee","fixed_in","created","updated"}]},
 * newest first; `status` NULL for all. */
int ev_regressions_list_json(ev_tracker *t, const char *status, char **out_json);
/* One regression with its evidence: the fields above plus
 * "samples":[{"sample_id","fingerprint","detail"}] and
 * "events":[{"status","model","run","at"}]. EV_E_NOTFOUND when absent. */
int ev_regression_show_json(ev_tracker *t, int64_t id, char **out_json);
/* Sets the status (and the assignee when not NULL) by hand, with an event. */
int ev_regression_set_status(ev_tracker *t, int64_t id, const char *status, const char *assignee);

#endif
