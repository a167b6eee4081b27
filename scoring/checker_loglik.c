/*
 * scoring/checker_loglik.c: the multiple-choice checker by log-likelihood
 * (`{"type":"loglikelihood"}`), as lm-evaluation-harness scores its
 * multiple-choice tasks.
 *
 * The sample has `choices`; the answer is what the runner's scoring
 * request returns (runners/README.md, "Scoring requests"): the JSON object
 * {"logprobs":[...],"tokens":[...],"greedy":[...]}, one entry a choice, the
 * log-probability of the delimiter + choice after the prompt. The model's
 * pick is the choice with the greatest log-probability (acc), or the
 * greatest log-probability per character of the choice (acc_norm: lm-eval
 * divides by the choice's length in characters); the first wins ties.
 * `metric` says which is the score ("acc" by default); both are written in
 * the detail, so a rescore with the other metric needs no model. The
 * target names the right choice: its index (0-based), its text, or its
 * letter (A for the first) when no choice is written so.
 */
#include "scoring/scoring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	bool norm;        /* acc_norm */
	char *delimiter;  /* between the prompt and a choice (" ") */
} loglik_checker;

static const char *const loglik_fields[] = {"metric", "delimiter", NULL};
static const char *const metrics[] = {"acc", "acc_norm", NULL};

static void loglik_free(void *impl)
{
	loglik_checker *c = impl;
	if (c)
		free(c->delimiter);
	free(c);
}

static int loglik_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	loglik_checker *c = calloc(1, sizeof *c);
	if (!c)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	const char *metric = NULL;
	int rc = ev_spec_enum(&metric, spec, "metric", "acc", metrics);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(spec, "delimiter");
	if (!rc && d && !cJSON_IsString(d))
		rc = ev_error_set(EV_E_INVALID, "checker.delimiter: expected a string (\" \" by default)");
	if (!rc && d && strlen(d->valuestring) > 64)
		rc = ev_error_set(EV_E_LIMIT, "checker.delimiter: longer than 64 bytes");
	if (!rc && !(c->delimiter = ev_strdup(d ? d->valuestring : " ")))
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
	if (rc) {
		loglik_free(c);
		return rc;
	}
	c->norm = !strcmp(metric, "acc_norm");
	cJSON_AddStringToObject(norm, "metric", metric);
	cJSON_AddStringToObject(norm, "delimiter", c->delimiter);
	*impl = c;
	return 0;
}

const char *ev_checker_loglik_delimiter_of(const void *impl)
{
	return ((const loglik_checker *)impl)->delimiter;
}

/* The index of the right choice from the sample's target; -1 when it
 * names none. */
static long gold_index(const ev_sample *s)
{
	const char *t = s->targets[0];
	for (size_t i = 0; i < s->n_choices; i++)
		if (!strcmp(t, s->choices[i]))
			return (long)i;
	char *end = NULL;
	long v = strtol(t, &end, 10);
	if (*t >= '0' && *t <= '9' && end && !*end)
		return v >= 0 && (size_t)v < s->n_choices ? v : -1;
	if (t[0] >= 'A' && t[0] <= 'Z' && !t[1])
		return (size_t)(t[0] - 'A') < s->n_choices ? t[0] - 'A' : -1;
	return -1;
}

static int loglik_score(const void *impl, const ev_sample *s, const char *answer, size_t len, ev_check_out *out)
{
	const loglik_checker *c = impl;
	if (!s->n_choices)
		return ev_error_set(EV_E_INVALID, "sample %.200s: the loglikelihood checker needs \"choices\"", s->id);
	int rc = ev_check_need_targets(s, "loglikelihood");
	if (rc)
		return rc;
	long gold = gold_index(s);
	if (gold < 0)
		return ev_error_set(EV_E_INVALID,
		                    "sample %.200s: target \"%.80s\" is not one of its %zu choices (an index, the text or a letter)",
		                    s->id, s->targets[0], s->n_choices);
	cJSON *j = NULL;
	const cJSON *lps = NULL;
	if (ev_json_parse(&j, answer, len, "answer") == 0)
		lps = cJSON_GetObjectItemCaseSensitive(j, "logprobs");
	ev_error_clear();
	if (!cJSON_IsArray(lps) || (size_t)cJSON_GetArraySize(lps) != s->n_choices) {
		/* not a scoring answer: a generation reached this checker */
		out->score = 0;
		out->reason = EV_REASON_NO_ANSWER;
		out->detail = ev_asprintf("expected the log-probabilities of %zu choices (a scoring request's answer)",
		                          s->n_choices);
		cJSON_Delete(j);
		return out->detail ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	long pred = -1, pred_norm = -1;
	double best = -INFINITY, best_norm = -INFINITY;
	ev_buf d = EV_BUF_INIT(1 << 20);
	ev_buf_puts(&d, "{\"logprobs\":[");
	for (size_t i = 0; i < s->n_choices; i++) {
		const cJSON *v = cJSON_GetArrayItem(lps, (int)i);
		double lp = cJSON_IsNumber(v) ? v->valuedouble : -INFINITY;
		size_t nc = ev_utf8_chars(s->choices[i], strlen(s->choices[i]));
		double per = lp / (double)(nc ? nc : 1);
		if (pred < 0 || lp > best) {
			best = lp;
			pred = (long)i;
		}
		if (pred_norm < 0 || per > best_norm) {
			best_norm = per;
			pred_norm = (long)i;
		}
		ev_buf_printf(&d, "%s%.9g", i ? "," : "", isfinite(lp) ? lp : -1e300);
	}
	cJSON_Delete(j);
	bool acc = pred == gold, acc_norm = pred_norm == gold;
	ev_buf_printf(&d, "],\"pred\":%ld,\"pred_norm\":%ld,\"gold\":%ld,\"acc\":%d,\"acc_norm\":%d}", pred, pred_norm,
	              gold, acc, acc_norm);
	long pick = c->norm ? pred_norm : pred;
	out->score = (c->norm ? acc_norm : acc) ? 1.0 : 0.0;
	out->reason = out->score == 1.0 ? EV_REASON_NONE : EV_REASON_WRONG_ANSWER;
	out->extracted = ev_strdup(s->choices[pick]);
	out->detail = ev_buf_detach(&d, NULL);
	return out->extracted && out->detail ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

const ev_checker_type ev_checker_loglik = {"loglikelihood", loglik_fields, loglik_parse, loglik_score, loglik_free};
