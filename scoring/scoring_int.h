/*
 * scoring_int.h: what the scoring module's files share and nothing else may use.
 *
 * A checker is a type (a small function table, one a checker kind) and the
 * private state its parse function built from the JSON spec. checker.c owns
 * the table of types, the spec helpers and the common scoring path
 * (thinking, empty answers, truncation); each checker_<kind>.c owns one
 * kind. To add a kind: implement an ev_checker_type in your own file,
 * declare it below, and add it to the table in checker.c.
 */
#ifndef EV_SCORING_INT_H
#define EV_SCORING_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "scoring/scoring.h"

/* Caps on what a spec may hold and what a verdict keeps. */
#define EV_CHECK_MAX_PATTERNS 64
#define EV_CHECK_MAX_PATTERN_BYTES ((size_t)64 << 10)
/* `extracted` is cut (at a UTF-8 boundary) past this many bytes. */
#define EV_CHECK_MAX_EXTRACTED ((size_t)4 << 10)
/* Quoted strings in `detail` are cut past this many bytes. */
#define EV_CHECK_MAX_QUOTE 160

/* PCRE2 limits: defaults, and the bounds a spec may set them to. */
#define EV_RX_MATCH_LIMIT 1000000u
/* Depth counts backtracking frames: a group repeated once a character
 * ("(?:a|b)*") needs one per repetition, so 10^4 would fail honest
 * patterns on answers of a few pages; the heap limit bounds the memory. */
#define EV_RX_DEPTH_LIMIT 100000u
/* The regex checker's budget for one answer, over every match call on it:
 * steps between pattern items (PCRE2's auto-callouts). A pattern that scans
 * a long answer once per start (match: last, a group that never takes part,
 * backtracking that stays inside one item) spends it in well under a second
 * instead of running for minutes, and the count does not depend on the
 * machine's speed. */
#define EV_RX_MATCH_BUDGET 20000000u
#define EV_RX_HEAP_LIMIT_KIB (64u << 10) /* 64 MiB for the interpreter's frames */
#define EV_RX_LIMIT_MAX 1000000000.0

/* What one checker kind's scorer reports back to the common path. */
typedef struct {
	double score;
	ev_reason reason;
	char *extracted; /* malloc'd, or NULL */
	char *detail;    /* malloc'd, or NULL */
} ev_check_out;

typedef struct ev_checker_type {
	const char *name;
	/* Field names the kind accepts besides "type" (NULL-terminated). */
	const char *const *fields;
	/* Reads `spec` (already checked for unknown fields) into *impl and
	 * adds the normalised fields to `norm`. Errors name the field. */
	int (*parse)(void **impl, const cJSON *spec, cJSON *norm);
	/* Scores a non-empty, valid UTF-8 `answer` (thinking removed) of
	 * `len` bytes. Returns 0 with *out filled, or a negative status for a
	 * fault that is not the answer's (a sample without a target, OOM). */
	int (*score)(const void *impl, const ev_sample *sample, const char *answer, size_t len, ev_check_out *out);
	void (*free)(void *impl);
} ev_checker_type;

extern const ev_checker_type ev_checker_includes;
extern const ev_checker_type ev_checker_exact;
extern const ev_checker_type ev_checker_numeric;
extern const ev_checker_type ev_checker_choice;
extern const ev_checker_type ev_checker_regex;
/* Test execution in the sandbox (testexec_checker.c; owner: sandbox). */
extern const ev_checker_type ev_checker_humaneval;
extern const ev_checker_type ev_checker_mbpp;
extern const ev_checker_type ev_checker_tests;
extern const ev_checker_type ev_checker_toolcall; /* toolcall_score.c */
extern const ev_checker_type ev_checker_loglik;   /* checker_loglik.c */
extern const ev_checker_type ev_checker_judge;    /* checker_judge.c */
/* The delimiter of a loglikelihood checker's state. */
const char *ev_checker_loglik_delimiter_of(const void *impl);

/* ---- spec helpers (checker.c) ---------------------------------------- */

/* Typed optional fields: absent keeps `dflt`; a mistyped or out-of-range
 * value fails with "checker.<key>: ...". */
int ev_spec_bool(bool *out, const cJSON *spec, const char *key, bool dflt);
int ev_spec_num(double *out, const cJSON *spec, const char *key, double dflt, double min, double max);
/* A string field that must be one of `choices` (NULL-terminated); *out
 * points into `choices`. */
int ev_spec_enum(const char **out, const cJSON *spec, const char *key, const char *dflt,
                 const char *const *choices);

/* "expected X, got Y"-style note with both sides clipped; malloc'd. */
char *ev_check_detail_mismatch(const ev_sample *sample, const char *got);
/* 0 when the sample has a target; else EV_E_INVALID naming `kind`. */
int ev_check_need_targets(const ev_sample *sample, const char *kind);

/* ---- text helpers (checker_text.c) ------------------------------------- */

typedef struct {
	bool fold_case;    /* Unicode-aware for Latin, Greek and Cyrillic */
	bool squash_space; /* runs of whitespace become one space; trimmed */
	bool strip_punct;  /* ASCII and common Unicode punctuation removed */
} ev_norm;

/* The normalised form of `len` bytes of valid UTF-8, malloc'd. */
char *ev_norm_text(const char *s, size_t len, const ev_norm *n);
/* Whether a code point is whitespace / punctuation for normalisation. */
bool ev_cp_space(uint32_t cp);
bool ev_cp_punct(uint32_t cp);


/* ---- PCRE2 helpers (checker_regex.c) ------------------------------------ */

typedef struct {
	pcre2_code *code;
	uint32_t n_groups;
} ev_rx;

/* Compiles `pattern` in UTF mode with `options` added. `field` names the
 * spec field in errors ("checker.patterns[1]: missing closing parenthesis
 * at offset 4"). */
int ev_rx_compile(ev_rx *rx, const char *pattern, size_t len, uint32_t options, const char *field);
void ev_rx_clear(ev_rx *rx);
/* A match context carrying the match, depth and heap limits. */
pcre2_match_context *ev_rx_context(uint32_t match_limit, uint32_t depth_limit);
/* One match of rx in subj[0..len) at or after *offset; on a match the
 * ovector of `md` holds it and *offset moves past it (by one character at
 * least, so a loop always ends). Returns 1 on a match, 0 when there is
 * none, or a negative PCRE2 error (PCRE2_ERROR_MATCHLIMIT, ...). */
int ev_rx_next(const ev_rx *rx, pcre2_match_context *mctx, pcre2_match_data *md, const char *subj,
               size_t len, size_t *offset);
/* Whether a PCRE2 match error means "a limit was hit" (match, depth,
 * heap) rather than a fault. */
bool ev_rx_is_limit(int rc);
/* PCRE2's text for an error code, into buf. */
void ev_rx_errtext(int rc, char *buf, size_t size);

/* ---- numbers (checker_numeric.c) ---------------------------------------- */

/* Finds the next number in s[0..len) at or after *pos: "1,234.5", "-3",
 * "1e-3", "$12", "45%". On success fills *val and the byte range
 * [*start, *end) it covered, moves *pos to *end and returns true. */
bool ev_num_scan(const char *s, size_t len, size_t *pos, double *val, size_t *start, size_t *end);
/* The whole of `s` (trimmed) as one number, or false. */
bool ev_num_parse_whole(const char *s, double *val);

#endif
