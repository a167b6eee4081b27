/*
 * suites/gen_longctx_int.h: what the long-context generator's files share
 * (gen_longctx.c fits and writes; gen_longctx_text.c makes the content).
 */
#ifndef EV_GEN_LONGCTX_INT_H
#define EV_GEN_LONGCTX_INT_H

#include "suites/suites.h"

#define LC_MAX_NEEDLES 32
#define LC_MAX_TARGETS 16

typedef enum { LC_HAY_ESSAY, LC_HAY_NOISE, LC_HAY_LOGS, LC_HAY_WORDS, LC_HAY_ROUNDS } lc_hay_kind;

/* One piece of haystack or one needle. Text tasks: `text` is the piece,
 * starting with its separator (" " or "\n") and ending without one, so
 * that counting pieces alone sums to the count of their concatenation.
 * Agent rounds: `text` is the tool's answer, `calls` the assistant's
 * tool_calls JSON, `tool` the function name, `id` the call id. */
typedef struct {
	char *text;
	char *calls;
	char *tool;
	char *id;
	size_t tokens;
	double depth; /* needles: 0..1 of the haystack's tokens */
} lc_unit;

/* The haystack source's state (generated one unit at a time). */
typedef struct {
	lc_hay_kind kind;
	ev_rng rng;
	long serial;          /* logs: the clock; rounds: the count */
	char **common;        /* words: the frequent words (10) */
	char **rare;          /* words: the pool of infrequent words */
	size_t n_rare, rare_at, per_round;
	char avoid[16];       /* rounds: a ticket id filler must not use */
} lc_source;

/* A sample's recipe, before fitting. All strings live in `arena`. */
typedef struct {
	const char *task;
	int depth;            /* percent, or -1 */
	char *system;         /* agent only */
	char *prefix;         /* text before the haystack (agent: the first user turn) */
	char *suffix;         /* text after it (agent: the final user turn) */
	char *tools_json;     /* agent only */
	lc_unit needles[LC_MAX_NEEDLES];
	size_t n_needles;
	char *targets[LC_MAX_TARGETS];
	size_t n_targets;
	bool all;             /* every target is needed */
	cJSON *meta;          /* task-specific metadata (owned) */
	lc_source src;
} lc_recipe;

/* Builds the recipe of one sample of `task` (a known name) from `rng`;
 * `length` lets tasks scale how many needles/distractors they use. */
int ev_lc_recipe(lc_recipe *r, ev_arena *a, const char *task, int depth, size_t length, ev_rng *rng);
/* The next haystack unit of `src` into *u (strings in `a`). */
int ev_lc_unit_next(lc_source *src, ev_arena *a, lc_unit *u);

/* A read_file round of `sentences` essay sentences: the pad of agent
 * samples, long enough to be cut to any size a round may need. */
int ev_lc_pad_round(lc_source *src, ev_arena *a, size_t sentences, lc_unit *u);

#endif
