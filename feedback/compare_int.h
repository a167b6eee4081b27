/*
 * feedback/compare_int.h: what compare.c, compare_calib.c and regress.c
 * share: one run's results folded into per-sample scores, and the noise
 * floor lookup. Not for use outside feedback/ (and its tests).
 */
#ifndef EV_COMPARE_INT_H
#define EV_COMPARE_INT_H

#include "feedback/feedback_int.h"

/* Bytes of a result's detail kept as evidence. */
#define EV_COMPARE_DETAIL_MAX 256

/* One sample of one run: its epochs folded together. */
typedef struct {
	const char *suite;  /* in the arena; equal suites share the pointer */
	const char *id;     /* in the arena */
	double score;       /* mean over the scored (non-error) epochs */
	int n_scored;       /* 0: only error results (left out of comparisons) */
	int n_errors;
	ev_fingerprint fp;  /* of the first failing epoch (scored first, else error) */
	const char *detail; /* that epoch's detail, cut; may be NULL */
	/* what shaped the first epoch's request (its request_json), hashed
	 * (the first 8 bytes of sha256): the prompt (messages, prompt or
	 * input), the decoding parameters (everything else but the model's
	 * name and stream), the tools; has_request false when none was kept */
	bool has_request;
	uint64_t h_prompt, h_decoding, h_tools;
	/* the rendered prompt's hash the backend reported (engine), or "" */
	char rendered[17];
} ev_sample_score;

typedef struct {
	ev_arena *arena;
	ev_sample_score *v; /* sorted by (suite, id), bytewise */
	size_t n, cap;
} ev_run_scores;

/* Reads every result of `run_id` and folds it per sample (ev_sample_fold:
 * error results counted, left out of the score). Free with
 * ev_run_scores_clear. */
int ev_run_scores_load(ev_run_scores *out, ev_tracker *t, int64_t run_id);
void ev_run_scores_clear(ev_run_scores *s);
/* (suite, id) order, bytewise, for merging two runs. */
int ev_sample_score_cmp(const ev_sample_score *x, const ev_sample_score *y);

/* The suite hash a run recorded for `suite` (its suites_json), malloc'd, or
 * NULL when it recorded none. */
char *ev_run_suite_hash(const ev_run_row *run, const char *suite);

/* The latest calibration of `suite` (preferring `suite_hash` when not
 * NULL). Returns 0 with *found false when there is none. flaky_json is
 * malloc'd (may be NULL). */
typedef struct {
	bool found;
	int64_t id;
	double variance; /* of the suite score across the repeats */
	long n;          /* samples per repeat */
	int repeats;
	char *flip_rate_json;
} ev_calibration_row;

int ev_calibration_latest(ev_tracker *t, const char *suite, const char *suite_hash, ev_calibration_row *out);
void ev_calibration_row_clear(ev_calibration_row *c);

#endif
