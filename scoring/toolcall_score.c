/*
 * scoring/toolcall_score.c: the "toolcall" checker kind, which scores a
 * sample imported from BFCL (suites/import_bfcl.c): its "tests" hold
 * {"functions": [...], "ground_truth": [...]} in BFCL's own types.
 *
 * Spec: {"type":"toolcall","category":"simple"}; the category may also come
 * from the sample (checker override, then metadata.category). Score 1 or 0.
 * An answer with no readable call is no_answer; any other failure is
 * wrong_answer; the detail starts with the tool-call reason name
 * ("value_mismatch: 'f': parameter 'x': ...") so reports can group by it.
 * `extracted` holds the calls read, as JSON.
 */
#include "scoring/scoring_int.h"
#include "scoring/toolcall_int.h"

#include <stdlib.h>
#include <string.h>

#define TC_MAX_CATEGORY 64

/* The category a sample names itself, copied into buf; false if none. */
static bool sample_category(const ev_sample *s, char *buf, size_t n)
{
	const char *srcs[2] = {s ? s->checker_json : NULL, s ? s->metadata_json : NULL};
	for (int i = 0; i < 2; i++) {
		cJSON *j = NULL;
		if (!srcs[i] || ev_json_parse(&j, srcs[i], strlen(srcs[i]), "sample"))
			continue;
		const char *c = ev_json_str(j, "category", NULL);
		bool ok = c && *c && strlen(c) < n;
		if (ok)
			snprintf(buf, n, "%s", c);
		cJSON_Delete(j);
		if (ok)
			return true;
	}
	ev_error_clear();
	return false;
}

static char *calls_json(const ev_toolcalls *calls)
{
	ev_buf b = EV_BUF_INIT(EV_CHECK_MAX_EXTRACTED);
	int rc = ev_buf_putc(&b, '[');
	for (size_t i = 0; !rc && i < calls->n; i++) {
		rc = ev_buf_puts(&b, i ? ", {\"name\": " : "{\"name\": ");
		if (!rc)
			rc = ev_json_buf_str(&b, calls->calls[i].pub.name);
		if (!rc)
			rc = ev_buf_printf(&b, ", \"arguments\": %s}", calls->calls[i].pub.arguments_json);
	}
	if (!rc)
		rc = ev_buf_putc(&b, ']');
	if (rc) {
		/* Too long for `extracted`: say how many calls instead. */
		ev_buf_free(&b);
		return ev_asprintf("(%zu calls, too long to show)", calls->n);
	}
	return ev_buf_detach(&b, NULL);
}

/* The shared path: fills score, reason, extracted and detail. */
static int score(const ev_sample *s, const char *category, const char *text, const char *tool_calls_json,
                 ev_check_out *out)
{
	*out = (ev_check_out){0};
	ev_arena *a = NULL;
	ev_toolcalls *calls = NULL;
	char cat[TC_MAX_CATEGORY], why[256] = "";
	int rc;
	if (!s || !s->tests_json)
		return ev_error_set(EV_E_INVALID, "the toolcall checker needs the sample's tests "
		                                  "({\"functions\", \"ground_truth\"}) and it has none");
	if (!category) {
		if (!sample_category(s, cat, sizeof cat))
			snprintf(cat, sizeof cat, "simple");
		category = cat;
	}
	if ((rc = ev_arena_new(&a, TC_ARENA_MAX)))
		return rc;
	tcv *tests;
	if ((rc = tcv_parse_all(&tests, a, s->tests_json, strlen(s->tests_json), "tests")))
		goto done;
	const tcv *functions = tcv_get(tests, "functions"), *gt = tcv_get(tests, "ground_truth");
	tcv empty = {.kind = TCV_LIST};
	if (!functions) {
		rc = ev_error_set(EV_E_INVALID, "tests.functions: missing");
		goto done;
	}
	if (!gt)
		gt = &empty;
	if (ev_toolcalls_parse(&calls, tool_calls_json, text)) {
		snprintf(why, sizeof why, "%s", ev_error_msg());
		ev_error_clear();
	}
	ev_toolcall_verdict v;
	if ((rc = tc_check_values(functions, gt, category, calls, &v)))
		goto done;
	out->score = v.pass ? 1.0 : 0.0;
	out->reason = v.pass ? EV_REASON_NONE
	              : v.reason == EV_TOOLCALL_UNPARSEABLE ? EV_REASON_NO_ANSWER
	                                                    : EV_REASON_WRONG_ANSWER;
	if (!v.pass)
		out->detail = ev_asprintf("%s: %s", ev_toolcall_reason_name(v.reason),
		                          v.reason == EV_TOOLCALL_UNPARSEABLE && why[0] ? why : v.detail);
	if (calls)
		out->extracted = calls_json(calls);
	if ((!v.pass && !out->detail) || (calls && !out->extracted))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	if (rc) {
		free(out->detail);
		free(out->extracted);
		*out = (ev_check_out){0};
	}
	ev_toolcalls_free(calls);
	ev_arena_free(a);
	return rc;
}

int ev_toolcall_score(const ev_sample *s, const char *response_text, const char *tool_calls_json, ev_verdict *out)
{
	*out = (ev_verdict){0};
	ev_check_out co;
	int rc = score(s, NULL, response_text, tool_calls_json, &co);
	if (rc)
		return rc;
	out->score = co.score;
	out->reason = co.reason;
	out->extracted = co.extracted;
	out->detail = co.detail;
	return 0;
}

/* ---- the checker kind ------------------------------------------------------ */

typedef struct {
	char *category; /* NULL: the sample's own, else "simple" */
} tc_impl;

static const char *const tc_fields[] = {"category", NULL};

static int tc_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	tc_impl *t = calloc(1, sizeof *t);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(spec, "category");
	if (c) {
		if (!cJSON_IsString(c) || !c->valuestring[0] || strlen(c->valuestring) >= TC_MAX_CATEGORY) {
			free(t);
			return ev_error_set(EV_E_INVALID, "checker.category: expected a BFCL category name "
			                                  "(\"simple\", \"multiple\", \"parallel\", ...)");
		}
		t->category = ev_strdup(c->valuestring);
		if (!t->category || !cJSON_AddStringToObject(norm, "category", c->valuestring)) {
			free(t->category);
			free(t);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
	}
	*impl = t;
	return 0;
}

static int tc_score(const void *impl, const ev_sample *sample, const char *answer, size_t len, ev_check_out *out)
{
	(void)len;
	const tc_impl *t = impl;
	return score(sample, t->category, answer, NULL, out);
}

static void tc_free(void *impl)
{
	tc_impl *t = impl;
	if (t)
		free(t->category);
	free(t);
}

const ev_checker_type ev_checker_toolcall = {"toolcall", tc_fields, tc_parse, tc_score, tc_free};
