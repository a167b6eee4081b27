/*
 * scoring/checker_regex.c: the regex checker and the PCRE2 helpers the
 * other kinds use.
 *
 * Patterns compile once, in UTF mode with Unicode classes, when the checker
 * is built; scoring allocates its own match data, so one checker serves
 * many threads. Every match runs under a match context with a match limit,
 * a depth limit and a heap limit; hitting one scores 0 with reason
 * match_limit instead of hanging.
 *
 * No JIT, on purpose: the JIT ignores the depth limit, counts the match
 * limit differently and has its own small stack, so the same answer could
 * pass on one PCRE2 build and hit a limit on another. Scores must not
 * depend on the build, and the interpreter is fast enough for answers.
 */
#include "scoring/scoring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- PCRE2 helpers ------------------------------------------------------- */

/* Some patterns compile but fail when matched: a recursion that can call
 * itself at the same subject position ("(?R)", "((?1))", "(a|(?R))") makes
 * pcre2_match return an error rather than a match or no match. Left until
 * scoring, that error would come back on every answer. So each pattern is
 * matched, once, against a few short subjects; an error other than a limit
 * rejects it where the suite loads, naming the field. A pattern that fails
 * only on rarer subjects is still caught at scoring time, per answer. */
static const char *const PROBE_SUBJECTS[] = {"", "a", "0", " ", "answer: 42", NULL};

static int probe(const ev_rx *rx, const char *field)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(rx->code, NULL);
	pcre2_match_context *mc = ev_rx_context(100000, 1000);
	int rc = 0;
	if (!md || !mc) {
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", field);
		goto done;
	}
	for (const char *const *s = PROBE_SUBJECTS; *s; s++) {
		int got = pcre2_match(rx->code, (PCRE2_SPTR)*s, strlen(*s), 0, 0, md, mc);
		if (got >= 0 || got == PCRE2_ERROR_NOMATCH || ev_rx_is_limit(got))
			continue;
		if (got == PCRE2_ERROR_NOMEMORY) {
			rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", field);
			goto done;
		}
		char msg[256];
		ev_rx_errtext(got, msg, sizeof msg);
		rc = ev_error_set(EV_E_INVALID, "%s: the pattern fails when matched (%s), on the subject \"%s\"", field,
		                  msg, *s);
		goto done;
	}
done:
	pcre2_match_context_free(mc);
	pcre2_match_data_free(md);
	return rc;
}

int ev_rx_compile(ev_rx *rx, const char *pattern, size_t len, uint32_t options, const char *field)
{
	*rx = (ev_rx){0};
	if (len > EV_CHECK_MAX_PATTERN_BYTES)
		return ev_error_set(EV_E_LIMIT, "%s: pattern of %zu bytes (at most %zu)", field, len,
		                    EV_CHECK_MAX_PATTERN_BYTES);
	int err = 0;
	PCRE2_SIZE off = 0;
	rx->code = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C | options,
	                         &err, &off, NULL);
	if (!rx->code) {
		char msg[256];
		ev_rx_errtext(err, msg, sizeof msg);
		return ev_error_set(EV_E_INVALID, "%s: %s at offset %zu", field, msg, (size_t)off);
	}
	if (pcre2_pattern_info(rx->code, PCRE2_INFO_CAPTURECOUNT, &rx->n_groups) != 0)
		rx->n_groups = 0;
	int rc = probe(rx, field);
	if (rc)
		ev_rx_clear(rx);
	return rc;
}

void ev_rx_clear(ev_rx *rx)
{
	if (!rx)
		return;
	pcre2_code_free(rx->code);
	*rx = (ev_rx){0};
}

pcre2_match_context *ev_rx_context(uint32_t match_limit, uint32_t depth_limit)
{
	pcre2_match_context *m = pcre2_match_context_create(NULL);
	if (!m)
		return NULL;
	pcre2_set_match_limit(m, match_limit);
	pcre2_set_depth_limit(m, depth_limit);
	pcre2_set_heap_limit(m, EV_RX_HEAP_LIMIT_KIB);
	return m;
}

bool ev_rx_is_limit(int rc)
{
	return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
	       rc == PCRE2_ERROR_JIT_STACKLIMIT;
}

void ev_rx_errtext(int rc, char *buf, size_t size)
{
	if (pcre2_get_error_message(rc, (PCRE2_UCHAR *)buf, size) < 0)
		snprintf(buf, size, "PCRE2 error %d", rc);
}

int ev_rx_next(const ev_rx *rx, pcre2_match_context *mctx, pcre2_match_data *md, const char *subj, size_t len,
               size_t *offset)
{
	size_t at = *offset;
	if (at > len)
		return 0;
	int rc = pcre2_match(rx->code, (PCRE2_SPTR)subj, len, at, PCRE2_NO_UTF_CHECK, md, mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc < 0)
		return rc;
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
	size_t next = ov[1];
	/* An empty match (or one that \K moved back) must not match again
	 * in the same place: step one character past it. */
	if (ov[1] <= ov[0] || next <= at) {
		next = next > at ? next : at;
		if (next >= len) {
			next = len + 1;
		} else {
			next++;
			while (next < len && ((unsigned char)subj[next] & 0xC0) == 0x80)
				next++;
		}
	}
	*offset = next;
	return 1;
}

/* ---- the regex checker ----------------------------------------------------- */

typedef enum { CMP_AUTO, CMP_EXACT, CMP_INCLUDES, CMP_NONE } compare_mode;

typedef struct {
	ev_rx rx;
	uint32_t group;
	char field[40]; /* "checker.patterns[3]" */
} rx_pattern;

typedef struct {
	rx_pattern *pats;
	size_t n_pats;
	bool last;
	compare_mode compare;
	ev_norm norm;
	uint32_t match_limit, depth_limit, match_budget;
	pcre2_match_context *mctx;
} regex_checker;

/* Returned by the budget's callout, and so by pcre2_match, when the
 * answer's budget is spent (PCRE2's own errors are small negatives). */
#define RX_BUDGET_SPENT (-1000)

static int budget_callout(pcre2_callout_block *cb, void *data)
{
	(void)cb;
	uint64_t *left = data;
	if (!*left)
		return RX_BUDGET_SPENT;
	(*left)--;
	return 0;
}

static const char *const regex_fields[] = {
	"pattern", "patterns", "group", "match", "ignore_case", "compare", "fold_case", "ignore_space", "ignore_punct",
	"match_limit", "depth_limit", "match_budget", NULL,
};

static void regex_free(void *impl)
{
	regex_checker *r = impl;
	if (!r)
		return;
	for (size_t i = 0; i < r->n_pats; i++)
		ev_rx_clear(&r->pats[i].rx);
	free(r->pats);
	pcre2_match_context_free(r->mctx);
	free(r);
}

static int limit_field(uint32_t *out, const cJSON *spec, const char *key, uint32_t dflt)
{
	double v;
	int rc = ev_spec_num(&v, spec, key, dflt, 1, EV_RX_LIMIT_MAX);
	if (rc)
		return rc;
	if (v != floor(v))
		return ev_error_set(EV_E_INVALID, "checker.%s: expected a whole number", key);
	*out = (uint32_t)v;
	return 0;
}

/* Resolves the "group" field for one compiled pattern. */
static int resolve_group(rx_pattern *p, const cJSON *group)
{
	if (!group) {
		p->group = p->rx.n_groups > 0 ? 1 : 0;
		return 0;
	}
	if (cJSON_IsString(group)) {
		int g = pcre2_substring_number_from_name(p->rx.code, (PCRE2_SPTR)group->valuestring);
		if (g < 0)
			return ev_error_set(EV_E_INVALID, "checker.group: no group named \"%.64s\" in %s", group->valuestring,
			                    p->field);
		p->group = (uint32_t)g;
		return 0;
	}
	double g = group->valuedouble;
	if (!cJSON_IsNumber(group) || g < 0 || g != floor(g) || g > 65535)
		return ev_error_set(EV_E_INVALID, "checker.group: expected a group number (0 for the whole match) or name");
	if ((uint32_t)g > p->rx.n_groups)
		return ev_error_set(EV_E_INVALID, "checker.group: %u, but %s has %u group%s", (unsigned)g, p->field,
		                    p->rx.n_groups, p->rx.n_groups == 1 ? "" : "s");
	p->group = (uint32_t)g;
	return 0;
}

static int regex_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	static const char *const matches[] = {"first", "last", NULL};
	static const char *const compares[] = {"exact", "includes", "none", NULL};
	int rc = 0;
	cJSON *list = NULL;
	regex_checker *r = calloc(1, sizeof *r);
	if (!r)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");

	const cJSON *one = cJSON_GetObjectItemCaseSensitive(spec, "pattern");
	const cJSON *many = cJSON_GetObjectItemCaseSensitive(spec, "patterns");
	const cJSON *group = cJSON_GetObjectItemCaseSensitive(spec, "group");
	const char *match, *compare;
	bool ignore_case;
	if (one && many) {
		rc = ev_error_set(EV_E_INVALID, "checker.pattern: give \"pattern\" or \"patterns\", not both");
		goto done;
	}
	if (!one && !many) {
		rc = ev_error_set(EV_E_INVALID, "checker.patterns: missing (a regex checker needs \"pattern\" or \"patterns\")");
		goto done;
	}
	if (one && !cJSON_IsString(one)) {
		rc = ev_error_set(EV_E_INVALID, "checker.pattern: expected a string");
		goto done;
	}
	if (many && (!cJSON_IsArray(many) || cJSON_GetArraySize(many) == 0)) {
		rc = ev_error_set(EV_E_INVALID, "checker.patterns: expected a non-empty list of strings");
		goto done;
	}
	size_t n = one ? 1 : (size_t)cJSON_GetArraySize(many);
	if (n > EV_CHECK_MAX_PATTERNS) {
		rc = ev_error_set(EV_E_LIMIT, "checker.patterns: %zu patterns (at most %d)", n, EV_CHECK_MAX_PATTERNS);
		goto done;
	}
	if (group && !cJSON_IsNumber(group) && !cJSON_IsString(group)) {
		rc = ev_error_set(EV_E_INVALID, "checker.group: expected a group number (0 for the whole match) or name");
		goto done;
	}
	if ((rc = ev_spec_enum(&match, spec, "match", "first", matches)) ||
	    (rc = ev_spec_enum(&compare, spec, "compare", NULL, compares)) ||
	    (rc = ev_spec_bool(&ignore_case, spec, "ignore_case", false)) ||
	    (rc = ev_spec_bool(&r->norm.fold_case, spec, "fold_case", true)) ||
	    (rc = ev_spec_bool(&r->norm.squash_space, spec, "ignore_space", true)) ||
	    (rc = ev_spec_bool(&r->norm.strip_punct, spec, "ignore_punct", true)) ||
	    (rc = limit_field(&r->match_limit, spec, "match_limit", EV_RX_MATCH_LIMIT)) ||
	    (rc = limit_field(&r->depth_limit, spec, "depth_limit", EV_RX_DEPTH_LIMIT)) ||
	    (rc = limit_field(&r->match_budget, spec, "match_budget", EV_RX_MATCH_BUDGET)))
		goto done;
	r->last = strcmp(match, "last") == 0;
	r->compare = !compare ? CMP_AUTO
	             : strcmp(compare, "exact") == 0 ? CMP_EXACT
	             : strcmp(compare, "includes") == 0 ? CMP_INCLUDES
	                                                 : CMP_NONE;

	r->pats = calloc(n, sizeof *r->pats);
	list = cJSON_CreateArray();
	if (!r->pats || !list) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		const cJSON *p = one ? one : cJSON_GetArrayItem(many, (int)i);
		rx_pattern *rp = &r->pats[i];
		if (one)
			snprintf(rp->field, sizeof rp->field, "checker.pattern");
		else
			snprintf(rp->field, sizeof rp->field, "checker.patterns[%zu]", i);
		if (!cJSON_IsString(p)) {
			rc = ev_error_set(EV_E_INVALID, "%s: expected a string", rp->field);
			goto done;
		}
		if ((rc = ev_rx_compile(&rp->rx, p->valuestring, strlen(p->valuestring),
		                        PCRE2_AUTO_CALLOUT | PCRE2_NO_AUTO_POSSESS | (ignore_case ? PCRE2_CASELESS : 0),
		                        rp->field)))
			goto done;
		r->n_pats = i + 1;
		if ((rc = resolve_group(rp, group)))
			goto done;
		cJSON *s = cJSON_CreateString(p->valuestring);
		if (!s || !cJSON_AddItemToArray(list, s)) {
			cJSON_Delete(s);
			rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
			goto done;
		}
	}
	r->mctx = ev_rx_context(r->match_limit, r->depth_limit);
	if (!r->mctx) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}

	bool ok = cJSON_AddItemToObject(norm, "patterns", list);
	if (ok)
		list = NULL;
	if (ok && group)
		ok = cJSON_AddItemToObject(norm, "group", cJSON_Duplicate(group, false));
	ok = ok && cJSON_AddStringToObject(norm, "match", match);
	ok = ok && cJSON_AddBoolToObject(norm, "ignore_case", ignore_case);
	if (ok && compare)
		ok = cJSON_AddStringToObject(norm, "compare", compare) != NULL;
	ok = ok && cJSON_AddBoolToObject(norm, "fold_case", r->norm.fold_case);
	ok = ok && cJSON_AddBoolToObject(norm, "ignore_space", r->norm.squash_space);
	ok = ok && cJSON_AddBoolToObject(norm, "ignore_punct", r->norm.strip_punct);
	ok = ok && cJSON_AddNumberToObject(norm, "match_limit", r->match_limit);
	ok = ok && cJSON_AddNumberToObject(norm, "depth_limit", r->depth_limit);
	ok = ok && cJSON_AddNumberToObject(norm, "match_budget", r->match_budget);
	if (!ok) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}
	*impl = r;
	r = NULL;
done:
	cJSON_Delete(list);
	regex_free(r);
	return rc;
}

/* Finds the wanted occurrence of one pattern. Returns 1 with [*a, *b) set,
 * 0 for no match, or a negative PCRE2 error. */
static int find_one(const regex_checker *r, pcre2_match_context *mctx, const rx_pattern *p, const char *s,
                    size_t len, size_t *a, size_t *b)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->rx.code, NULL);
	if (!md)
		return PCRE2_ERROR_NOMEMORY;
	size_t off = 0;
	int found = 0, rc;
	while ((rc = ev_rx_next(&p->rx, mctx, md, s, len, &off)) == 1) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		size_t x = ov[2 * p->group], y = ov[2 * p->group + 1];
		if (x == PCRE2_UNSET || y < x) /* group did not take part here */
			continue;
		*a = x, *b = y;
		found = 1;
		if (!r->last)
			break;
	}
	pcre2_match_data_free(md);
	return rc < 0 ? rc : found;
}

static int regex_score(const void *impl, const ev_sample *sample, const char *answer, size_t len, ev_check_out *out)
{
	const regex_checker *r = impl;
	compare_mode cmp = r->compare;
	bool has_targets = sample && sample->n_targets > 0;
	if (cmp == CMP_AUTO)
		cmp = has_targets ? CMP_EXACT : CMP_NONE;
	int rc = 0;
	if (cmp != CMP_NONE && (rc = ev_check_need_targets(sample, "regex")))
		return rc;

	size_t a = 0, b = 0, i = 0;
	int got = 0;
	/* One budget for the whole answer, every pattern and match call: a
	 * context of its own, since the checker serves many threads. */
	uint64_t left = r->match_budget;
	pcre2_match_context *mctx = pcre2_match_context_copy(r->mctx);
	if (!mctx)
		return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
	pcre2_set_callout(mctx, budget_callout, &left);
	for (; i < r->n_pats; i++)
		if ((got = find_one(r, mctx, &r->pats[i], answer, len, &a, &b)))
			break; /* a match, or the error below names this pattern */
	pcre2_match_context_free(mctx);
	if (got == PCRE2_ERROR_NOMEMORY)
		return ev_error_set(EV_E_NOMEM, "%s: out of memory matching", r->pats[i].field);
	if (got == RX_BUDGET_SPENT) {
		out->reason = EV_REASON_MATCH_LIMIT;
		out->detail = ev_asprintf("%s: the answer's match budget (match_budget %u steps) ran out on a %zu-byte answer",
		                          r->pats[i].field, r->match_budget, len);
		return 0;
	}
	if (got < 0 && ev_rx_is_limit(got)) {
		char msg[128];
		ev_rx_errtext(got, msg, sizeof msg);
		out->reason = EV_REASON_MATCH_LIMIT;
		out->detail = ev_asprintf("%s: %s (match_limit %u, depth_limit %u) on a %zu-byte answer",
		                          r->pats[i].field, msg, r->match_limit, r->depth_limit, len);
		return 0;
	}
	if (got < 0) {
		char msg[128];
		ev_rx_errtext(got, msg, sizeof msg);
		return ev_error_set(EV_E_INTERNAL, "%s: PCRE2: %s", r->pats[i].field, msg);
	}
	if (!got) {
		/* As an assertion (compare none) no match is a failed check; as an
		 * extraction it is a missing answer. */
		out->reason = cmp == CMP_NONE ? EV_REASON_WRONG_ANSWER : EV_REASON_NO_ANSWER;
		out->detail = ev_strdup(r->n_pats == 1 ? "the pattern did not match" : "no pattern matched");
		return 0;
	}
	out->extracted = ev_utf8_clip(answer + a, b - a, EV_CHECK_MAX_EXTRACTED);
	if (!out->extracted)
		return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
	if (cmp == CMP_NONE) {
		out->score = 1.0;
		return 0;
	}
	char *x = ev_norm_text(answer + a, b - a, &r->norm);
	if (!x)
		return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
	bool hit = false;
	for (size_t k = 0; k < sample->n_targets && !hit; k++) {
		const char *t = sample->targets[k] ? sample->targets[k] : "";
		size_t tl;
		char *clean = ev_utf8_sanitize(t, strlen(t), &tl);
		char *nt = clean ? ev_norm_text(clean, tl, &r->norm) : NULL;
		free(clean);
		if (!nt) {
			free(x);
			return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
		}
		hit = cmp == CMP_EXACT ? strcmp(x, nt) == 0 : (*nt && strstr(x, nt) != NULL);
		free(nt);
	}
	out->score = hit ? 1.0 : 0.0;
	if (!hit) {
		out->reason = EV_REASON_WRONG_ANSWER;
		out->detail = ev_check_detail_mismatch(sample, out->extracted);
	}
	free(x);
	return 0;
}

const ev_checker_type ev_checker_regex = {"regex", regex_fields, regex_parse, regex_score, regex_free};
