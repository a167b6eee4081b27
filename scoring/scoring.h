/*
 * scoring: checkers that turn a model's answer into a score, and metrics.
 *
 * A checker is built from a JSON spec (the suite's "checker" object, or
 * one that the CLI builds from flags):
 *   {"type":"includes"}                                  target in answer, case-insensitive
 *   {"type":"exact","ignore_case":true,"ignore_punct":true,"ignore_space":true}
 *   {"type":"numeric","tolerance":1e-6,"relative":false}
 *   {"type":"choice"}                                    letter A-Z extracted from the answer
 *   {"type":"regex","patterns":["..."],"group":1,"match":"first"|"last","ignore_case":false,
 *    "compare":"exact"|"includes"|"none"}  extraction, then comparison with a target
 * Thinking text (<think>...</think>, also an unclosed <think>) is stripped
 * before any checker sees the answer; the stored response keeps it.
 */
#ifndef EV_SCORING_H
#define EV_SCORING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evald/base/base.h"
#include "suites/suites.h"

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
	EV_REASON_COUNT
} ev_reason;

const char *ev_reason_name(ev_reason r);
/* EV_REASON_COUNT when the name is unknown. */
ev_reason ev_reason_parse(const char *name);
/* Reasons that are infrastructure faults, excluded from the score. */
bool ev_reason_is_error(ev_reason r);

typedef struct ev_checker ev_checker;

/* Builds a checker from its JSON spec; errors name the field
 * ("checker.patterns[1]: ..."). Regexes are compiled here, so a bad
 * pattern fails at load time, not per sample. */
int ev_checker_new(ev_checker **out, const char *spec_json);
void ev_checker_free(ev_checker *c);
/* The normalised spec (for storing with a run). Borrowed. */
const char *ev_checker_spec(const ev_checker *c);

typedef struct {
	double score;     /* 0..1 */
	ev_reason reason;
	char *extracted;  /* malloc'd answer the checker compared, or NULL */
	char *detail;     /* malloc'd human-readable note, or NULL */
} ev_verdict;

/* Scores `response` (the raw model output) for `sample`. `truncated`
 * says the backend stopped at max_tokens. Thread-safe: one checker may
 * score from several threads. Fills *out (free with ev_verdict_clear). */
int ev_checker_score(const ev_checker *c, const ev_sample *sample, const char *response, bool truncated,
                     ev_verdict *out);
void ev_verdict_clear(ev_verdict *v);

/* The answer with thinking removed, malloc'd. *unclosed is set when a
 * <think> was never closed (everything after it is thinking). */
char *ev_strip_thinking(const char *response, bool *unclosed);

/* ---- metrics ------------------------------------------------------------- */

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

/* Unbiased pass@k for n samples with c correct (1 - C(n-c,k)/C(n,k)). */
double ev_pass_at_k(int n, int c, int k);

#endif
