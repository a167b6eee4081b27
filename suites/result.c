/*
 * suites/result.c: reason names, the one "is this an error?" rule, and the
 * per-sample / per-suite fold of results.
 */
#include "suites/result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[EV_REASON_COUNT] = {
	[EV_REASON_NONE] = "",
	[EV_REASON_WRONG_ANSWER] = "wrong_answer",
	[EV_REASON_NO_ANSWER] = "no_answer",
	[EV_REASON_TRUNCATED] = "truncated",
	[EV_REASON_BACKEND_ERROR] = "backend_error",
	[EV_REASON_TIMEOUT] = "timeout",
	[EV_REASON_MATCH_LIMIT] = "match_limit",
	[EV_REASON_UNCLOSED_THINK] = "unclosed_thinking",
	[EV_REASON_CONTEXT_OVERFLOW] = "context_overflow",
};

const char *ev_reason_name(ev_reason r)
{
	if ((int)r < 0 || r >= EV_REASON_COUNT)
		return "unknown";
	return names[r];
}

ev_reason ev_reason_parse(const char *name)
{
	if (!name)
		return EV_REASON_COUNT;
	for (int r = 0; r < EV_REASON_COUNT; r++)
		if (strcmp(names[r], name) == 0)
			return (ev_reason)r;
	return EV_REASON_COUNT;
}

bool ev_reason_is_error(ev_reason r) { return r == EV_REASON_BACKEND_ERROR || r == EV_REASON_TIMEOUT; }

bool ev_reason_name_is_error(const char *reason)
{
	ev_reason r = ev_reason_parse(reason);
	return r != EV_REASON_COUNT && ev_reason_is_error(r);
}

bool ev_result_is_error(const ev_result *r) { return ev_reason_name_is_error(r->reason); }

int ev_sample_category(char *buf, size_t cap, const char *suite, const char *metadata_json, const char *key)
{
	cJSON *m = metadata_json ? cJSON_Parse(metadata_json) : NULL;
	const char *c = ev_json_str(m, "category", ev_json_str(m, "task", NULL));
	int n;
	const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(m, key) : NULL;
	if (key && cJSON_IsNumber(v))
		n = snprintf(buf, cap, "%.17g", v->valuedouble);
	else if (key)
		n = snprintf(buf, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
	else
		n = snprintf(buf, cap, "%s", c ? c : suite ? suite : "");
	cJSON_Delete(m);
	return n < 0 || (size_t)n >= cap ? ev_error_set(EV_E_LIMIT, "category longer than %zu bytes", cap ? cap - 1 : 0) : 0;
}

void ev_sample_fold_add(ev_sample_fold *f, const ev_result *r)
{
	if (ev_result_is_error(r)) {
		f->n_errors++;
		return;
	}
	f->sum += r->score;
	f->n_scored++;
	if (r->score >= 1.0)
		f->n_pass++;
}

double ev_sample_fold_mean(const ev_sample_fold *f) { return f->n_scored ? f->sum / f->n_scored : 0.0; }

ev_suite_fold *ev_run_fold_find(ev_run_fold *f, const char *name)
{
	/* The last suite first: results come grouped by suite. */
	for (size_t i = f->suites.n; i-- > 0;)
		if (!strcmp(f->suites.v[i].name, name))
			return &f->suites.v[i];
	return NULL;
}

static int count_reason(ev_suite_fold *s, const char *reason)
{
	for (size_t i = 0; i < s->failures.n; i++)
		if (!strcmp(s->failures.v[i].reason, reason)) {
			s->failures.v[i].count++;
			return 0;
		}
	ev_reason_count rc = {ev_strdup(reason), 1};
	if (!rc.reason || ev_vec_push(&s->failures, rc)) {
		free(rc.reason);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

int ev_run_fold_add(ev_run_fold *f, const ev_result *r)
{
	const char *suite = r->suite ? r->suite : "";
	ev_suite_fold *s = ev_run_fold_find(f, suite);
	if (!s) {
		if (!(s = ev_vec_add(&f->suites)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		if (!(s->name = ev_strdup(suite))) {
			f->suites.n--;
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
	}
	const char *id = r->sample_id ? r->sample_id : "";
	if (!s->cur_id || strcmp(s->cur_id, id)) {
		char *cid = ev_strdup(id);
		ev_sample_fold *sf = cid ? ev_vec_add(&s->samples) : NULL;
		if (!sf) {
			free(cid);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
		free(s->cur_id);
		s->cur_id = cid;
		if (r->metadata_json && strstr(r->metadata_json, "\"circular_group\"")) {
			cJSON *m = cJSON_Parse(r->metadata_json);
			const cJSON *g = cJSON_GetObjectItemCaseSensitive(m, "circular_group");
			if (cJSON_IsString(g) && !(sf->group = ev_strdup(g->valuestring))) {
				cJSON_Delete(m);
				return ev_error_set(EV_E_NOMEM, "out of memory");
			}
			cJSON_Delete(m);
		}
	}
	ev_sample_fold_add(&s->samples.v[s->samples.n - 1], r);
	s->n_results++;
	if (ev_result_is_error(r)) {
		s->errors++;
	} else {
		s->scored_results++;
		s->scored_sum += r->score;
	}
	return r->reason && *r->reason ? count_reason(s, r->reason) : 0;
}

long ev_suite_fold_failures(const ev_suite_fold *s, const char *reason)
{
	for (size_t i = 0; i < s->failures.n; i++)
		if (!strcmp(s->failures.v[i].reason, reason))
			return s->failures.v[i].count;
	return 0;
}

void ev_run_fold_clear(ev_run_fold *f)
{
	for (size_t i = 0; i < f->suites.n; i++) {
		ev_suite_fold *s = &f->suites.v[i];
		for (size_t k = 0; k < s->failures.n; k++)
			free(s->failures.v[k].reason);
		ev_vec_free(&s->failures);
		for (size_t k = 0; k < s->samples.n; k++)
			free(s->samples.v[k].group);
		ev_vec_free(&s->samples);
		free(s->name);
		free(s->cur_id);
	}
	ev_vec_free(&f->suites);
}
