/*
 * scoring/checker.h: checkers that turn a model's answer into a score.
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
#ifndef EV_SCORING_CHECKER_H
#define EV_SCORING_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suites.h"

/* ev_reason, its names and ev_reason_is_error live with the result type
 * in suites/result.h. */

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
/* The same for an answer that may carry OpenAI tool_calls (JSON array,
 * or NULL): tool-call checkers read the calls from there as well as from
 * the text; every other checker scores the text alone. */
int ev_checker_score_calls(const ev_checker *c, const ev_sample *sample, const char *response,
                           const char *tool_calls_json, bool truncated, ev_verdict *out);

/* A multiple-choice checker by log-likelihood ("loglikelihood"): the
 * text put between the prompt and each choice (" " by default). NULL for
 * every other checker: then the runner generates instead of scoring. */
const char *ev_checker_loglik_delimiter(const ev_checker *c);

/* The answer with thinking removed, malloc'd. *unclosed is set when a
 * <think> was never closed (everything after it is thinking). */
char *ev_strip_thinking(const char *response, bool *unclosed);

#endif
