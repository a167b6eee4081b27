/*
 * tests/scoring/cases.h: table-driven checker cases shared by the scoring
 * tests. A case is a checker spec, the sample's targets, a response and
 * what the verdict must be; sc_run_cases prints every case that fails
 * (with its row) and returns how many did.
 */
#ifndef EV_TESTS_SCORING_CASES_H
#define EV_TESTS_SCORING_CASES_H

#include "scoring/scoring.h"
#include "tests/common/testutil.h"

typedef struct {
	const char *spec;      /* checker JSON */
	const char *targets;   /* '|'-separated; NULL: the sample has none */
	const char *response;
	double score;
	const char *reason;    /* reason name ("" for none) */
	const char *extracted; /* NULL: not checked */
	bool truncated;
} sc_case;

/* A sample owning its split targets; free with sc_sample_free. */
ev_sample *sc_sample_new(const char *targets);
void sc_sample_free(ev_sample *s);

/* Builds a checker that must be valid (fails the test otherwise). */
ev_checker *sc_checker(const char *spec);

int sc_run_cases(const sc_case *cases, size_t n, const char *table);

#define SC_RUN(table) assert_int_equal(sc_run_cases(table, sizeof table / sizeof table[0], #table), 0)

#endif
