/* tests/scoring/cases.c: the table runner and sample builder of cases.h. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

ev_sample *sc_sample_new(const char *targets)
{
	ev_sample *s = calloc(1, sizeof *s);
	assert_non_null(s);
	s->id = strdup("case");
	s->line = 1;
	if (!targets)
		return s;
	size_t n = 1;
	for (const char *p = targets; *p; p++)
		n += *p == '|';
	s->targets = calloc(n, sizeof *s->targets);
	assert_non_null(s->targets);
	const char *p = targets;
	for (size_t i = 0; i < n; i++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		s->targets[i] = ev_strndup(p, len);
		p += len + 1;
	}
	s->n_targets = n;
	return s;
}

void sc_sample_free(ev_sample *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_targets; i++)
		free(s->targets[i]);
	free(s->targets);
	free(s->id);
	free(s);
}

ev_checker *sc_checker(const char *spec)
{
	ev_checker *c = NULL;
	int rc = ev_checker_new(&c, spec);
	if (rc)
		fail_msg("checker %s: %s", spec, ev_error_msg());
	return c;
}

int sc_run_cases(const sc_case *cases, size_t n, const char *table)
{
	int failures = 0;
	for (size_t i = 0; i < n; i++) {
		const sc_case *k = &cases[i];
		ev_checker *c = NULL;
		if (ev_checker_new(&c, k->spec)) {
			print_error("%s[%zu]: spec %s: %s\n", table, i, k->spec, ev_error_msg());
			failures++;
			continue;
		}
		ev_sample *s = sc_sample_new(k->targets);
		ev_verdict v;
		int rc = ev_checker_score(c, s, k->response, k->truncated, &v);
		const char *why = NULL;
		if (rc)
			why = ev_error_msg();
		else if (v.score != k->score)
			why = "score";
		else if (strcmp(ev_reason_name(v.reason), k->reason) != 0)
			why = "reason";
		else if (k->extracted && (!v.extracted || strcmp(v.extracted, k->extracted) != 0))
			why = "extracted";
		if (why) {
			print_error("%s[%zu]: %s: response \"%s\" targets \"%s\": got score %g reason \"%s\" extracted "
			            "\"%s\" detail \"%s\"; want score %g reason \"%s\" extracted \"%s\"\n",
			            table, i, why, k->response, k->targets ? k->targets : "(none)", v.score,
			            ev_reason_name(v.reason), v.extracted ? v.extracted : "(null)",
			            v.detail ? v.detail : "(null)", k->score, k->reason,
			            k->extracted ? k->extracted : "(any)");
			failures++;
		}
		ev_verdict_clear(&v);
		sc_sample_free(s);
		ev_checker_free(c);
	}
	return failures;
}
