/*
 * scoring/toolcall.h: the tool-call checker (scoring/toolcall_*.c).
 *
 * BFCL's AST semantics for function calls: see scoring/README.md, section
 * "Tool-call checker". Calls are read from OpenAI `tool_calls` JSON or out of
 * model text (JSON call objects, Python call syntax, fences, <tool_call>). */
#ifndef EV_SCORING_TOOLCALL_H
#define EV_SCORING_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "scoring/checker.h"
#include "suites/suites.h"

typedef struct {
	const char *name;           /* as the model wrote it; owned by the list */
	const char *arguments_json; /* JSON object; floats keep a '.', tuples are arrays */
} ev_toolcall;

typedef struct ev_toolcalls ev_toolcalls;

/* Reads the calls of one answer. When `tool_calls_json` holds a non-empty
 * OpenAI tool_calls array it is used (each "arguments" a JSON string or an
 * object); otherwise the calls are found in `text` (may be NULL). Returns 0
 * with *out set (possibly zero calls: an empty answer or "[]"), or
 * EV_E_PARSE when there is text but no call can be read from it (the
 * message says why), EV_E_LIMIT past the caps. Free with ev_toolcalls_free. */
int ev_toolcalls_parse(ev_toolcalls **out, const char *tool_calls_json, const char *text);
void ev_toolcalls_free(ev_toolcalls *l);
size_t ev_toolcalls_count(const ev_toolcalls *l);
/* Borrowed; NULL past the end. */
const ev_toolcall *ev_toolcalls_get(const ev_toolcalls *l, size_t i);
/* True when the calls came through the API's function-calling channel
 * (tool_calls), false when they were read out of the text. BFCL maps a
 * function's '.' to '_' only for the channel, whose names cannot hold dots
 * (the tools are sent so); a text answer must name the function exactly. */
bool ev_toolcalls_from_channel(const ev_toolcalls *l);

typedef enum {
	EV_TOOLCALL_PASS = 0,
	EV_TOOLCALL_WRONG_FUNCTION,   /* "wrong_function" */
	EV_TOOLCALL_MISSING_REQUIRED, /* "missing_required" */
	EV_TOOLCALL_UNEXPECTED_PARAM, /* "unexpected_param" */
	EV_TOOLCALL_WRONG_TYPE,       /* "wrong_type" */
	EV_TOOLCALL_VALUE_MISMATCH,   /* "value_mismatch" */
	EV_TOOLCALL_WRONG_COUNT,      /* "wrong_count" */
	EV_TOOLCALL_UNPARSEABLE,      /* "unparseable" */
	EV_TOOLCALL_REASON_COUNT
} ev_toolcall_reason;

/* "" for EV_TOOLCALL_PASS. */
const char *ev_toolcall_reason_name(ev_toolcall_reason r);

typedef struct {
	bool pass;
	ev_toolcall_reason reason;
	char detail[512]; /* names the function and parameter; "" on a pass */
} ev_toolcall_verdict;

/* Checks `calls` (NULL: the answer was unparseable) against BFCL's
 * `functions_json` (the question's "function" array, BFCL types) and
 * `ground_truth_json` (the possible answer's "ground_truth" array; "[]" or
 * NULL for irrelevance). `category` picks the rule as BFCL does: containing
 * "irrelevance" = no call; "relevance" = at least one call; "parallel" =
 * the calls in any order; "multiple" = the one right call among several
 * functions; otherwise simple. Returns 0 with *out filled, or a negative
 * status when the functions or ground truth are malformed (not the
 * model's fault). */
int ev_toolcall_check(const char *functions_json, const char *ground_truth_json, const char *category,
                      const ev_toolcalls *calls, ev_toolcall_verdict *out);

/* Scores one answer of a sample imported by ev_import_bfcl (its "tests"
 * hold {"functions","ground_truth"}; the category comes from the sample's
 * checker override, else its metadata.category, else "simple"): score 1
 * or 0; reason no_answer when unparseable, wrong_answer otherwise; the
 * detail starts with the tool-call reason name ("value_mismatch: ...").
 * Returns a negative status when the sample's tests are malformed. Free
 * with ev_verdict_clear. */
int ev_toolcall_score(const ev_sample *s, const char *response_text, const char *tool_calls_json,
                      ev_verdict *out);

#endif
