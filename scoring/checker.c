/*
 * scoring/checker.c: building checkers from their JSON spec, and the
 * scoring path every kind shares.
 *
 * ev_checker_new validates the spec (type known, no unknown field, every
 * field typed and in range) and hands it to the kind's parse function,
 * which compiles whatever it needs once (regexes), so that a bad spec
 * fails when the suite loads and scoring only reads shared state.
 *
 * ev_checker_score strips thinking, makes the answer valid UTF-8, settles
 * empty answers itself (no_answer, unclosed_thinking, truncated), and
 * turns a wrong or missing answer of a response cut at max_tokens into
 * `truncated`, since that is the fault to fix.
 */
#include "scoring/scoring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The checker kinds. A new kind adds one line here (see scoring_int.h). */
static const ev_checker_type *const kinds[] = {
	&ev_checker_includes, &ev_checker_exact, &ev_checker_numeric, &ev_checker_choice, &ev_checker_regex,
	&ev_checker_toolcall, &ev_checker_humaneval, &ev_checker_mbpp, &ev_checker_tests, &ev_checker_loglik,
	&ev_checker_judge,
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* Fields any kind accepts and ignores. */
static const char *const common_fields[] = {"type", "description", NULL};

struct ev_checker {
	const ev_checker_type *type;
	void *impl;
	char *spec; /* normalised JSON */
};

/* ---- spec helpers ----------------------------------------------------- */

int ev_spec_bool(bool *out, const cJSON *spec, const char *key, bool dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, key);
	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsBool(v))
		return ev_error_set(EV_E_INVALID, "checker.%s: expected true or false", key);
	*out = cJSON_IsTrue(v);
	return 0;
}

int ev_spec_num(double *out, const cJSON *spec, const char *key, double dflt, double min, double max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, key);
	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return ev_error_set(EV_E_INVALID, "checker.%s: expected a number", key);
	if (v->valuedouble < min || v->valuedouble > max)
		return ev_error_set(EV_E_INVALID, "checker.%s: %g is out of range %g..%g", key, v->valuedouble, min, max);
	*out = v->valuedouble;
	return 0;
}

static int list_names(ev_buf *b, const char *const *names)
{
	int rc = 0;
	for (size_t i = 0; names[i] && !rc; i++)
		rc = ev_buf_printf(b, "%s%s", i ? ", " : "", names[i]);
	return rc;
}

int ev_spec_enum(const char **out, const cJSON *spec, const char *key, const char *dflt, const char *const *choices)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, key);
	if (!v) {
		*out = dflt;
		return 0;
	}
	if (cJSON_IsString(v)) {
		for (size_t i = 0; choices[i]; i++) {
			if (strcmp(choices[i], v->valuestring) == 0) {
				*out = choices[i];
				return 0;
			}
		}
	}
	ev_buf b = EV_BUF_INIT(1024);
	list_names(&b, choices);
	int rc = ev_error_set(EV_E_INVALID, "checker.%s: expected one of %s", key, b.data ? b.data : "");
	ev_buf_free(&b);
	return rc;
}

static bool in_list(const char *const *names, const char *s)
{
	for (size_t i = 0; names && names[i]; i++)
		if (strcmp(names[i], s) == 0)
			return true;
	return false;
}

static int check_fields(const cJSON *spec, const ev_checker_type *t)
{
	for (const cJSON *f = spec->child; f; f = f->next) {
		if (in_list(common_fields, f->string) || in_list(t->fields, f->string))
			continue;
		ev_buf b = EV_BUF_INIT(1024);
		list_names(&b, t->fields);
		int rc = ev_error_set(EV_E_INVALID, "checker.%.64s: unknown field for type %s (known: %s)", f->string,
		                      t->name, b.data ? b.data : "");
		ev_buf_free(&b);
		return rc;
	}
	return 0;
}

/* ---- building ---------------------------------------------------------- */

static const ev_checker_type *find_kind(const char *name)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(kinds[i]->name, name) == 0)
			return kinds[i];
	return NULL;
}

static bool blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

int ev_checker_new(ev_checker **out, const char *spec_json)
{
	cJSON *spec = NULL, *norm = NULL;
	ev_checker *c = NULL;
	int rc = 0;
	if (!out)
		return ev_error_set(EV_E_INVALID, "ev_checker_new: out is NULL");
	*out = NULL;
	if (!spec_json || blank(spec_json))
		spec_json = "{\"type\":\"includes\"}";
	if ((rc = ev_json_parse(&spec, spec_json, strlen(spec_json), "checker")))
		goto done;
	/* "regex" alone is shorthand for {"type":"regex"} (CLI flags). */
	if (cJSON_IsString(spec)) {
		cJSON *obj = cJSON_CreateObject();
		if (!obj || !cJSON_AddStringToObject(obj, "type", spec->valuestring)) {
			cJSON_Delete(obj);
			rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
			goto done;
		}
		cJSON_Delete(spec);
		spec = obj;
	}
	if (!cJSON_IsObject(spec)) {
		rc = ev_error_set(EV_E_INVALID, "checker: expected an object or a type name");
		goto done;
	}
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(spec, "type");
	const char *name = "includes";
	if (type) {
		if (!cJSON_IsString(type)) {
			rc = ev_error_set(EV_E_INVALID, "checker.type: expected a string");
			goto done;
		}
		name = type->valuestring;
	}
	const ev_checker_type *kind = find_kind(name);
	if (!kind) {
		ev_buf b = EV_BUF_INIT(1024);
		for (size_t i = 0; i < N_KINDS; i++)
			ev_buf_printf(&b, "%s%s", i ? ", " : "", kinds[i]->name);
		rc = ev_error_set(EV_E_INVALID, "checker.type: unknown type \"%.64s\" (known: %s)", name,
		                  b.data ? b.data : "");
		ev_buf_free(&b);
		goto done;
	}
	if ((rc = check_fields(spec, kind)))
		goto done;
	c = calloc(1, sizeof *c);
	norm = cJSON_CreateObject();
	if (!c || !norm || !cJSON_AddStringToObject(norm, "type", kind->name)) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}
	c->type = kind;
	if ((rc = kind->parse(&c->impl, spec, norm)))
		goto done;
	c->spec = ev_json_print(norm);
	if (!c->spec) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}
	*out = c;
	c = NULL;
done:
	ev_checker_free(c);
	cJSON_Delete(norm);
	cJSON_Delete(spec);
	return rc;
}

void ev_checker_free(ev_checker *c)
{
	if (!c)
		return;
	if (c->impl)
		c->type->free(c->impl);
	free(c->spec);
	free(c);
}

const char *ev_checker_spec(const ev_checker *c) { return c ? c->spec : NULL; }

/* ---- scoring ------------------------------------------------------------ */

void ev_verdict_clear(ev_verdict *v)
{
	if (!v)
		return;
	free(v->extracted);
	free(v->detail);
	*v = (ev_verdict){0};
}

char *ev_check_detail_mismatch(const ev_sample *sample, const char *got)
{
	const char *want = sample && sample->n_targets ? sample->targets[0] : "";
	char *w = ev_utf8_clip(want, strlen(want), EV_CHECK_MAX_QUOTE);
	char *g = ev_utf8_clip(got, strlen(got), EV_CHECK_MAX_QUOTE);
	char *d = NULL;
	if (w && g) {
		if (sample && sample->n_targets > 1)
			d = ev_asprintf("expected \"%s\" (or %zu other targets), got \"%s\"", w, sample->n_targets - 1, g);
		else
			d = ev_asprintf("expected \"%s\", got \"%s\"", w, g);
	}
	free(w);
	free(g);
	return d;
}

int ev_check_need_targets(const ev_sample *sample, const char *kind)
{
	if (sample && sample->n_targets > 0)
		return 0;
	return ev_error_set(EV_E_INVALID, "the %s checker needs a target and the sample has none", kind);
}

static const char *empty_detail(bool truncated, bool unclosed)
{
	if (truncated)
		return unclosed ? "stopped at max_tokens while thinking (no </think>)"
		                : "stopped at max_tokens with an empty answer";
	return unclosed ? "<think> was never closed: the whole answer is thinking" : "the answer is empty";
}

int ev_checker_score(const ev_checker *c, const ev_sample *sample, const char *response, bool truncated,
                     ev_verdict *out)
{
	if (!out)
		return ev_error_set(EV_E_INVALID, "ev_checker_score: out is NULL");
	*out = (ev_verdict){0};
	if (!c)
		return ev_error_set(EV_E_INVALID, "ev_checker_score: checker is NULL");

	int rc = 0;
	char *stripped = NULL, *answer = NULL;
	ev_check_out co = {0};
	bool unclosed = false;
	size_t len = 0;
	stripped = ev_strip_thinking(response, &unclosed);
	if (stripped)
		answer = ev_utf8_sanitize(stripped, strlen(stripped), &len);
	if (!answer) {
		rc = ev_error_set(EV_E_NOMEM, "scoring: out of memory");
		goto done;
	}

	if (len == 0) {
		co.reason = truncated ? EV_REASON_TRUNCATED : unclosed ? EV_REASON_UNCLOSED_THINK : EV_REASON_NO_ANSWER;
		co.detail = ev_strdup(empty_detail(truncated, unclosed));
	} else {
		rc = c->type->score(c->impl, sample, answer, len, &co);
		if (rc) {
			if (sample && sample->id)
				ev_error_wrap(rc, "sample %.128s (line %zu)", sample->id, sample->line);
			goto done;
		}
		bool miss = co.score < 1.0 && (co.reason == EV_REASON_WRONG_ANSWER || co.reason == EV_REASON_NO_ANSWER);
		if (miss && (truncated || unclosed)) {
			const char *why = truncated ? "stopped at max_tokens" : "<think> was never closed";
			char *d = co.detail ? ev_asprintf("%s; %s", why, co.detail) : ev_strdup(why);
			if (d) {
				free(co.detail);
				co.detail = d;
			}
			if (truncated)
				co.reason = EV_REASON_TRUNCATED;
		}
	}
	out->score = co.score;
	out->reason = co.reason;
	out->extracted = co.extracted;
	out->detail = co.detail;
	co.extracted = co.detail = NULL;
done:
	free(co.extracted);
	free(co.detail);
	free(answer);
	free(stripped);
	return rc;
}

const char *ev_checker_loglik_delimiter(const ev_checker *c)
{
	return c && c->type == &ev_checker_loglik ? ev_checker_loglik_delimiter_of(c->impl) : NULL;
}

int ev_checker_score_calls(const ev_checker *c, const ev_sample *sample, const char *response,
                           const char *tool_calls_json, bool truncated, ev_verdict *out)
{
	/* A tool-call answer may have no text at all (calls only, or an
	 * irrelevance sample rightly answered with nothing), so it skips the
	 * common path's empty-answer rule. */
	if (c && c->type == &ev_checker_toolcall)
		return ev_toolcall_score(sample, response ? response : "", tool_calls_json, out);
	return ev_checker_score(c, sample, response, truncated, out);
}
