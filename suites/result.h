/*
 * suites/result.h: what a result means, owned in one place. The result of
 * one sample's epoch (ev_result), why it did not score 1 (ev_reason, whose
 * names are stored in the tracker), which reasons are infrastructure faults
 * that scores leave out (ev_reason_is_error), and the fold of a suite's
 * results into per-sample and per-suite counts that every summary, report
 * and comparison starts from. It lives in suites/, the lowest module that
 * runners, scoring and the tracker all stand on.
 */
#ifndef EV_SUITES_RESULT_H
#define EV_SUITES_RESULT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

/* Why a sample did not score 1 (or EV_REASON_NONE when it did or when a
 * partial score needs no reason). The names are stable: they are stored in
 * the tracker and printed in reports. */
typedef enum {
	EV_REASON_NONE = 0,
	EV_REASON_WRONG_ANSWER,  /* "wrong_answer" */
	EV_REASON_NO_ANSWER,     /* "no_answer": nothing could be extracted */
	EV_REASON_TRUNCATED,     /* "truncated": stopped at max_tokens */
	EV_REASON_BACKEND_ERROR, /* "backend_error": excluded from the score */
	EV_REASON_TIMEOUT,       /* "timeout": excluded from the score */
	EV_REASON_MATCH_LIMIT,   /* "match_limit": regex hit PCRE2's limits */
	EV_REASON_UNCLOSED_THINK,/* "unclosed_thinking" */
	EV_REASON_CONTEXT_OVERFLOW, /* "context_overflow": the prompt passed the model's context (scored 0) */
	EV_REASON_COUNT
} ev_reason;

const char *ev_reason_name(ev_reason r);
/* EV_REASON_COUNT when the name is unknown. */
ev_reason ev_reason_parse(const char *name);
/* Reasons that are infrastructure faults, excluded from the score. */
bool ev_reason_is_error(ev_reason r);
/* The same for a stored reason name; NULL, "" and unknown names are not
 * errors. */
bool ev_reason_name_is_error(const char *reason);

/* One scored answer: what runners produce and the tracker stores. All
 * pointers are borrowed for the duration of the call they are passed to.
 * `reason` is a reason name ("" when none). */
typedef struct {
	const char *suite;
	const char *sample_id;
	int epoch;                 /* 0-based */
	const char *request_hash;  /* sha256 hex of model + request + settings */
	const char *request_json;  /* the request body sent, or NULL */
	const char *response;      /* full answer text, thinking kept */
	const char *tool_calls_json; /* OpenAI tool_calls of the answer, or NULL */
	const char *extracted;     /* what the checker compared, or NULL */
	double score;              /* 0..1 */
	const char *reason;
	const char *detail;        /* checker or backend note, or NULL */
	const char *finish_reason; /* "stop", "length", "tool_calls", ... */
	int prompt_tokens;
	int completion_tokens;
	int thinking_tokens;       /* of completion_tokens, spent thinking (0: none or unknown) */
	double latency_s;
	int attempts;
	bool cached;
	const char *metadata_json; /* the sample's metadata object, or NULL */
	const char *target_json;   /* the sample's target as written (JSON), or NULL */
	const char *prompt_hash;   /* the rendered prompt's token ids hashed (engine), or NULL */
	const char *answered_by;   /* with routing: the model that answered, else NULL */
	const char *agents_json;   /* multi-agent samples: per-agent turns, tokens, calls (runners/agent.h) */
} ev_result;

/* The category a sample counts under for routing: its metadata's "category",
 * else its "task", else the suite's name; with `key`, its metadata's value
 * there (a string or a number: a classifier's label), else "". An error
 * when it does not fit in cap bytes (cut to fit). */
int ev_sample_category(char *buf, size_t cap, const char *suite, const char *metadata_json, const char *key);

/* An infrastructure fault: counted, left out of scores, tried again on
 * resume. */
bool ev_result_is_error(const ev_result *r);

/* ---- the fold (result.c) ------------------------------------------------- */

/* One sample's epochs folded together. */
typedef struct {
	double sum;   /* of the scored (non-error) epochs' scores */
	int n_scored; /* 0: only errors, and the sample is left out of scores */
	int n_errors;
	int n_pass;   /* scored epochs with score >= 1 (pass@k, pass^k) */
	/* the sample's metadata "circular_group" (set by ev_run_fold_add; the
	 * rotations of one multiple-choice question share it), or NULL */
	char *group;
} ev_sample_fold;

void ev_sample_fold_add(ev_sample_fold *f, const ev_result *r);
/* Mean over the scored epochs; 0 when none. */
double ev_sample_fold_mean(const ev_sample_fold *f);

typedef struct {
	char *reason;
	long count;
} ev_reason_count;

/* One suite's results folded, streaming: results must come with each
 * sample's epochs together (the tracker gives them ordered by suite,
 * sample and epoch). */
typedef struct {
	char *name;
	long n_results;       /* every result */
	long errors;          /* results whose reason is an error */
	long scored_results;  /* the others */
	double scored_sum;    /* their scores summed */
	/* {reason: count} of results with a reason, errors included, in the
	 * order first seen */
	EV_VEC(ev_reason_count) failures;
	EV_VEC(ev_sample_fold) samples; /* one a sample, in order */
	char *cur_id;         /* the sample being folded */
} ev_suite_fold;

/* Every suite of a run, in the order first seen. */
typedef struct {
	EV_VEC(ev_suite_fold) suites;
} ev_run_fold;

/* Adds one result (its suite created on first sight): 0 or EV_E_NOMEM. */
int ev_run_fold_add(ev_run_fold *f, const ev_result *r);
/* The suite named `name`, or NULL. */
ev_suite_fold *ev_run_fold_find(ev_run_fold *f, const char *name);
void ev_run_fold_clear(ev_run_fold *f);
/* The count of `reason` in a suite's failures (0 when absent). */
long ev_suite_fold_failures(const ev_suite_fold *s, const char *reason);

#endif
