/*
 * scoring/toolcall_check.c: BFCL's AST checker for function calls.
 *
 * The rules follow the Berkeley Function Calling Leaderboard's Python
 * checker (ast_checker.py), re-derived from its behaviour:
 *   - the function name matches as written; for calls that came through
 *     the API's function-calling channel (tool_calls), whose names cannot
 *     hold dots, the name with '.' turned into '_' instead (BFCL's
 *     convert_func_name for such models; the tools are sent so);
 *   - every parameter the function requires is present, and every
 *     parameter the ground truth lists without "" is present;
 *   - no parameter outside the function's properties or the ground truth;
 *   - BFCL types: string, integer (a bool is not one), float (an integer
 *     is accepted), boolean, array, tuple (a tuple or a list), dict, any
 *     (BFCL treats it as string); array/tuple elements are checked against
 *     `items` one level deep. A value of another type still passes the
 *     type check when the ground truth's acceptable values have that type
 *     (BFCL's "variable" case), and is then compared as is;
 *   - the value is among the acceptable ones: strings after standardising
 *     (lowercase, without spaces and ,./-_*^, ' read as "), lists element
 *     by element, dicts key by key against the ground truth's acceptable
 *     values for each key, lists of dicts dict by dict.
 * Two deliberate differences, both accepting what BFCL's own intent
 * accepts: the parallel categories look for a full matching of calls to
 * expected calls (BFCL's greedy pass can miss one), and strings nested
 * inside lists and dicts are standardised at every depth.
 */
#include "scoring/toolcall_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const REASONS[EV_TOOLCALL_REASON_COUNT] = {
	"", "wrong_function", "missing_required", "unexpected_param", "wrong_type", "value_mismatch",
	"wrong_count", "unparseable",
};

const char *ev_toolcall_reason_name(ev_toolcall_reason r)
{
	return (unsigned)r < EV_TOOLCALL_REASON_COUNT ? REASONS[r] : "?";
}

static ev_toolcall_reason verdict(ev_toolcall_verdict *out, ev_toolcall_reason r, const char *fmt, ...)
	EV_PRINTF(3, 4);
static ev_toolcall_reason verdict(ev_toolcall_verdict *out, ev_toolcall_reason r, const char *fmt, ...)
{
	out->pass = r == EV_TOOLCALL_PASS;
	out->reason = r;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->detail, sizeof out->detail, fmt, ap);
	va_end(ap);
	return r;
}

/* ---- string standardisation ----------------------------------------------- */

static bool std_drop(char c)
{
	return c == ' ' || c == ',' || c == '.' || c == '/' || c == '-' || c == '_' || c == '*' || c == '^';
}

static char std_map(char c)
{
	if (c >= 'A' && c <= 'Z')
		return (char)(c - 'A' + 'a');
	return c == '\'' ? '"' : c;
}

/* BFCL's standardize_string(a) == standardize_string(b), without copies. */
static bool std_eq(const tcv *a, const tcv *b)
{
	size_t i = 0, j = 0;
	for (;;) {
		while (i < a->len && std_drop(a->s[i]))
			i++;
		while (j < b->len && std_drop(b->s[j]))
			j++;
		if (i == a->len || j == b->len)
			return i == a->len && j == b->len;
		if (std_map(a->s[i]) != std_map(b->s[j]))
			return false;
		i++;
		j++;
	}
}

/* Equality with strings standardised at every depth and lists and tuples
 * alike; numbers and the rest as Python's ==. */
static bool loose_eq(const tcv *a, const tcv *b)
{
	if (a->kind == TCV_STR && b->kind == TCV_STR)
		return std_eq(a, b);
	bool al = a->kind == TCV_LIST || a->kind == TCV_TUPLE, bl = b->kind == TCV_LIST || b->kind == TCV_TUPLE;
	if (al && bl) {
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if (!loose_eq(a->items[i], b->items[i]))
				return false;
		return true;
	}
	if (a->kind == TCV_DICT && b->kind == TCV_DICT) {
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++) {
			const tcv *o = NULL;
			for (size_t j = 0; j < b->n && !o; j++)
				if (b->klens[j] == a->klens[i] && memcmp(b->keys[j], a->keys[i], a->klens[i]) == 0)
					o = b->items[j];
			if (!o || !loose_eq(a->items[i], o))
				return false;
		}
		return true;
	}
	return tcv_py_eq(a, b);
}

static bool any_eq(const tcv *v, const tcv *vals, bool loose)
{
	for (size_t i = 0; i < vals->n; i++)
		if (loose ? loose_eq(v, vals->items[i]) : tcv_py_eq(v, vals->items[i]))
			return true;
	return false;
}

/* ---- types ----------------------------------------------------------------- */

/* BFCL's type names and the Python type each stands for. */
static bool bfcl_kind(const char *t, tcv_kind *k)
{
	static const struct {
		const char *name;
		tcv_kind kind;
	} map[] = {
		{"string", TCV_STR}, {"integer", TCV_INT}, {"float", TCV_FLOAT}, {"boolean", TCV_BOOL},
		{"array", TCV_LIST}, {"tuple", TCV_LIST}, {"dict", TCV_DICT},    {"any", TCV_STR},
	};
	for (size_t i = 0; t && i < sizeof map / sizeof map[0]; i++) {
		if (strcmp(t, map[i].name) == 0) {
			*k = map[i].kind;
			return true;
		}
	}
	return false;
}

/* The kind of the first acceptable value that is not "" (false when all
 * are ""). */
static bool answer_kind(const tcv *vals, tcv_kind *k)
{
	for (size_t i = 0; vals && vals->kind == TCV_LIST && i < vals->n; i++) {
		if (!tcv_is_empty_str(vals->items[i])) {
			*k = vals->items[i]->kind;
			return true;
		}
	}
	return false;
}

/* BFCL's type_checker: is `v` of `expected` (elements of `nested` when
 * has_nested), or of the acceptable values' own type (*is_var then)? */
static bool type_ok(const tcv *v, const tcv *vals, tcv_kind expected, bool has_nested, tcv_kind nested,
                    bool *is_var)
{
	tcv_kind pk;
	bool has_pk = answer_kind(vals, &pk);
	*is_var = has_pk && pk != expected;
	if (v->kind == expected) {
		if (!has_nested)
			return true;
		for (size_t i = 0; i < vals->n; i++) {
			const tcv *pa = vals->items[i];
			bool ok = true;
			if (pa->kind == TCV_LIST) {
				for (size_t j = 0; ok && j < v->n; j++) {
					bool iv;
					ok = type_ok(v->items[j], pa, nested, false, nested, &iv);
				}
			}
			if (ok)
				return true;
		}
		return false;
	}
	if (has_pk && v->kind == pk) {
		*is_var = true;
		return true;
	}
	return false;
}

/* ---- value checkers ---------------------------------------------------------- */

static bool dict_ok(const tcv *v, const tcv *vals, char *why, size_t whylen);

/* One key's value inside a dict against its acceptable values: loosely
 * equal to one of them, or (a dict) matching one read as a nested
 * acceptable-values dict. */
static bool dict_value_ok(const tcv *v, const tcv *acc)
{
	if (acc->kind != TCV_LIST)
		return loose_eq(v, acc);
	if (any_eq(v, acc, true))
		return true;
	if (v->kind == TCV_DICT) {
		char why[8];
		return dict_ok(v, acc, why, sizeof why);
	}
	return false;
}

static bool dict_ok(const tcv *v, const tcv *vals, char *why, size_t whylen)
{
	snprintf(why, whylen, "no acceptable dict");
	if (v->kind != TCV_DICT)
		return false;
	for (size_t a = 0; a < vals->n; a++) {
		const tcv *pa = vals->items[a];
		if (tcv_is_empty_str(pa) || pa->kind != TCV_DICT)
			continue;
		bool ok = true;
		for (size_t i = 0; ok && i < v->n; i++) {
			const tcv *acc = tcv_get(pa, v->keys[i]);
			if (!acc) {
				snprintf(why, whylen, "unexpected key '%s'", v->keys[i]);
				ok = false;
			} else if (!dict_value_ok(v->items[i], acc)) {
				char *got = tcv_show(v->items[i], 80);
				snprintf(why, whylen, "key '%s': %s is not acceptable", v->keys[i], got);
				free(got);
				ok = false;
			}
		}
		for (size_t i = 0; ok && i < pa->n; i++) {
			bool optional = false;
			for (size_t k = 0; pa->items[i]->kind == TCV_LIST && k < pa->items[i]->n && !optional; k++)
				optional = tcv_is_empty_str(pa->items[i]->items[k]);
			if (!tcv_get(v, pa->keys[i]) && !optional) {
				snprintf(why, whylen, "missing key '%s'", pa->keys[i]);
				ok = false;
			}
		}
		if (ok)
			return true;
	}
	return false;
}

static bool list_dict_ok(const tcv *v, const tcv *vals, char *why, size_t whylen)
{
	snprintf(why, whylen, "no acceptable list of dicts");
	for (size_t a = 0; a < vals->n; a++) {
		const tcv *pa = vals->items[a];
		/* BFCL takes len("") == 0: "" accepts an empty list. */
		size_t pn = pa->kind == TCV_LIST ? pa->n : tcv_is_empty_str(pa) ? 0 : (size_t)-1;
		if (pn != v->n) {
			snprintf(why, whylen, "wrong number of dicts");
			continue;
		}
		bool ok = true;
		for (size_t i = 0; ok && i < v->n; i++) {
			tcv one = {.kind = TCV_LIST, .items = &pa->items[i], .n = 1};
			char sub[160];
			if (!dict_ok(v->items[i], &one, sub, sizeof sub)) {
				snprintf(why, whylen, "element %zu: %s", i, sub);
				ok = false;
			}
		}
		if (ok)
			return true;
	}
	return false;
}

static bool string_ok(const tcv *v, const tcv *vals)
{
	for (size_t i = 0; i < vals->n; i++)
		if (vals->items[i]->kind == TCV_STR && std_eq(v, vals->items[i]))
			return true;
	return false;
}

static bool list_ok(const tcv *v, const tcv *vals)
{
	for (size_t i = 0; i < vals->n; i++) {
		const tcv *pa = vals->items[i];
		if (pa->kind == TCV_LIST && loose_eq(v, pa))
			return true;
		if (tcv_is_empty_str(pa) && v->n == 0)
			return true; /* BFCL iterates "" as an empty list */
	}
	return false;
}

/* ---- one call ------------------------------------------------------------------ */

/* BFCL: exact, or for the function-calling channel the expected name with
 * its dots as underscores. */
static bool name_matches(const char *got, const char *want, bool channel)
{
	if (!channel || !strchr(want, '.'))
		return strcmp(got, want) == 0;
	size_t n = strlen(want);
	if (strlen(got) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (got[i] != (want[i] == '.' ? '_' : want[i]))
			return false;
	return true;
}

static const char *fn_name(const tcv *f)
{
	const tcv *n = tcv_get(f, "name");
	return n && n->kind == TCV_STR ? n->s : "";
}

/* BFCL's simple_function_checker for one call against one function and its
 * ground-truth arguments (a dict of lists of acceptable values). */
static ev_toolcall_reason check_one(const tcv *fdesc, const tc_call *call, bool channel, const tcv *gt,
                                    ev_toolcall_verdict *out)
{
	const char *fname = fn_name(fdesc);
	if (!name_matches(call->pub.name, fname, channel))
		return verdict(out, EV_TOOLCALL_WRONG_FUNCTION, "expected a call to '%s', got '%s'", fname,
		               call->pub.name);
	const tcv *params = tcv_get(fdesc, "parameters");
	const tcv *props = tcv_get(params, "properties");
	const tcv *req = tcv_get(params, "required");
	const tcv *args = call->args;
	for (size_t i = 0; req && req->kind == TCV_LIST && i < req->n; i++) {
		const tcv *r = req->items[i];
		if (r->kind == TCV_STR && !tcv_get(args, r->s))
			return verdict(out, EV_TOOLCALL_MISSING_REQUIRED, "'%s': required parameter '%s' is missing", fname,
			               r->s);
	}
	for (size_t i = 0; i < args->n; i++) {
		const char *p = args->keys[i];
		const tcv *detail = tcv_get(props, p);
		const tcv *vals = tcv_get(gt, p);
		if (!detail || !vals)
			return verdict(out, EV_TOOLCALL_UNEXPECTED_PARAM, "'%s': unexpected parameter '%s'%s", fname, p,
			               detail ? " (not in the ground truth)" : "");
		tcv value = *args->items[i]; /* shallow: conversions below must not touch the call */
		const tcv *ty = tcv_get(detail, "type");
		const char *tname = ty && ty->kind == TCV_STR ? ty->s : NULL;
		tcv_kind expected, nested = TCV_NULL;
		bool typed = bfcl_kind(tname, &expected), has_nested = false, is_var = false;
		if (typed && strcmp(tname, "array") != 0 && strcmp(tname, "tuple") != 0)
			has_nested = false;
		else if (typed) {
			const tcv *it = tcv_get(tcv_get(detail, "items"), "type");
			has_nested = it && it->kind == TCV_STR && bfcl_kind(it->s, &nested);
		}
		if (typed && strcmp(tname, "tuple") == 0 && value.kind == TCV_TUPLE)
			value.kind = TCV_LIST;
		if (typed && strcmp(tname, "float") == 0 && value.kind == TCV_INT) {
			value.kind = TCV_FLOAT; /* Python's int to float promotion */
			value.f = value.big ? value.f : (double)value.i;
		}
		if (typed && !type_ok(&value, vals, expected, has_nested, nested, &is_var)) {
			char *got = tcv_show(args->items[i], 80);
			verdict(out, EV_TOOLCALL_WRONG_TYPE, "'%s': parameter '%s' expects %s%s%s, got %s %s", fname, p, tname,
			        has_nested ? " of " : "", has_nested ? tcv_get(tcv_get(detail, "items"), "type")->s : "",
			        tcv_kind_name(args->items[i]->kind), got);
			free(got);
			return out->reason;
		}
		bool ok;
		char why[200] = "";
		if (!typed || is_var)
			ok = any_eq(&value, vals, false);
		else if (expected == TCV_DICT)
			ok = dict_ok(&value, vals, why, sizeof why);
		else if (expected == TCV_LIST && has_nested && nested == TCV_DICT)
			ok = list_dict_ok(&value, vals, why, sizeof why);
		else if (expected == TCV_STR)
			ok = string_ok(&value, vals);
		else if (expected == TCV_LIST)
			ok = list_ok(&value, vals);
		else
			ok = any_eq(&value, vals, false);
		if (!ok) {
			char *got = tcv_show(args->items[i], 120), *want = tcv_show(vals, 160);
			verdict(out, EV_TOOLCALL_VALUE_MISMATCH, "'%s': parameter '%s': %s is not among %s%s%s", fname, p, got,
			        want, why[0] ? "; " : "", why);
			free(got);
			free(want);
			return out->reason;
		}
	}
	/* What the ground truth needs even where the function calls it optional. */
	for (size_t i = 0; i < gt->n; i++) {
		const tcv *vals = gt->items[i];
		bool optional = false;
		for (size_t k = 0; k < vals->n && !optional; k++)
			optional = tcv_is_empty_str(vals->items[k]);
		if (!optional && !tcv_get(args, gt->keys[i]))
			return verdict(out, EV_TOOLCALL_MISSING_REQUIRED,
			               "'%s': parameter '%s' is missing (the ground truth needs it)", fname, gt->keys[i]);
	}
	return verdict(out, EV_TOOLCALL_PASS, "%s", "");
}

/* ---- categories ------------------------------------------------------------------ */

static const tcv *find_fn(const tcv *functions, const char *name)
{
	for (size_t i = 0; i < functions->n; i++)
		if (strcmp(fn_name(functions->items[i]), name) == 0)
			return functions->items[i];
	/* Tolerate a ground truth that names the function in its OpenAI form. */
	for (size_t i = 0; i < functions->n; i++)
		if (name_matches(name, fn_name(functions->items[i]), true))
			return functions->items[i];
	return NULL;
}

static int validate(const tcv *functions, const tcv *gt)
{
	if (functions->kind != TCV_LIST)
		return ev_error_set(EV_E_INVALID, "functions: not an array");
	for (size_t i = 0; i < functions->n; i++) {
		const tcv *f = functions->items[i];
		if (f->kind != TCV_DICT || !tcv_get(f, "name") || tcv_get(f, "name")->kind != TCV_STR)
			return ev_error_set(EV_E_INVALID, "functions[%zu]: not an object with a name", i);
		const tcv *pr = tcv_get(f, "parameters");
		if (pr && pr->kind != TCV_DICT)
			return ev_error_set(EV_E_INVALID, "functions[%zu].parameters: not an object", i);
	}
	if (gt->kind != TCV_LIST)
		return ev_error_set(EV_E_INVALID, "ground_truth: not an array");
	if (gt->n > TC_MAX_CALLS)
		return ev_error_set(EV_E_LIMIT, "ground_truth: more than %d calls", TC_MAX_CALLS);
	for (size_t i = 0; i < gt->n; i++) {
		const tcv *e = gt->items[i];
		if (e->kind != TCV_DICT || e->n != 1 || e->items[0]->kind != TCV_DICT)
			return ev_error_set(EV_E_INVALID, "ground_truth[%zu]: not {\"function\": {arguments}}", i);
		const tcv *a = e->items[0];
		for (size_t k = 0; k < a->n; k++)
			if (a->items[k]->kind != TCV_LIST)
				return ev_error_set(EV_E_INVALID, "ground_truth[%zu].%s.%s: not a list of acceptable values", i,
				                    e->keys[0], a->keys[k]);
	}
	return 0;
}

static const tcv *gt_fn(const tcv *functions, const tcv *entry, size_t i, int *rc)
{
	const tcv *f = find_fn(functions, entry->keys[0]);
	if (!f)
		*rc = ev_error_set(EV_E_INVALID, "ground_truth[%zu]: function '%s' is not among the functions", i,
		                   entry->keys[0]);
	return f;
}

/* Kuhn's augmenting path for the parallel categories: ok[g * nc + c] says
 * call c satisfies expected call g. */
static bool augment(size_t g, const bool *ok, size_t nc, size_t *match_call, bool *seen)
{
	for (size_t c = 0; c < nc; c++) {
		if (!ok[g * nc + c] || seen[c])
			continue;
		seen[c] = true;
		if (match_call[c] == (size_t)-1 || augment(match_call[c], ok, nc, match_call, seen)) {
			match_call[c] = g;
			return true;
		}
	}
	return false;
}

static int check_parallel(const tcv *functions, const tcv *gt, const ev_toolcalls *calls, ev_toolcall_verdict *out)
{
	size_t ng = gt->n, nc = calls->n;
	int rc = 0;
	bool *ok = calloc(ng && nc ? ng * nc : 1, sizeof *ok);
	size_t *match_call = malloc((nc ? nc : 1) * sizeof *match_call);
	bool *seen = malloc(nc ? nc : 1);
	bool *any = calloc(ng ? ng : 1, sizeof *any);
	if (!ok || !match_call || !seen || !any) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	ev_toolcall_verdict tmp;
	for (size_t g = 0; g < ng; g++) {
		const tcv *f = gt_fn(functions, gt->items[g], g, &rc);
		if (!f)
			goto done;
		for (size_t c = 0; c < nc; c++) {
			ok[g * nc + c] = check_one(f, &calls->calls[c], calls->channel, gt->items[g]->items[0], &tmp) == EV_TOOLCALL_PASS;
			any[g] |= ok[g * nc + c];
		}
	}
	for (size_t c = 0; c < nc; c++)
		match_call[c] = (size_t)-1;
	/* Start from the calls in the order asked (models mostly keep it), so
	 * that a failure is explained against the call meant for it; then
	 * augment. The size of the matching does not depend on the start. */
	size_t matched = 0;
	bool *start = calloc(ng ? ng : 1, sizeof *start);
	if (!start) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t g = 0; g < ng && g < nc; g++) {
		if (ok[g * nc + g]) {
			start[g] = true;
			match_call[g] = g;
			matched++;
		}
	}
	for (size_t g = 0; g < ng; g++) {
		if (start[g])
			continue;
		memset(seen, 0, nc);
		if (augment(g, ok, nc, match_call, seen))
			matched++;
	}
	free(start);
	if (matched == ng) {
		verdict(out, EV_TOOLCALL_PASS, "%s", "");
		goto done;
	}
	/* Explain an expected call left over by the matching (one that no
	 * call satisfies at all if there is one) through the calls left over
	 * too, preferring one to the same function. */
	bool *gt_matched = any; /* reused: any[] is no longer needed */
	bool no_valid[TC_MAX_CALLS];
	for (size_t k = 0; k < ng; k++) {
		no_valid[k] = !any[k];
		gt_matched[k] = false;
	}
	for (size_t c = 0; c < nc; c++)
		if (match_call[c] != (size_t)-1)
			gt_matched[match_call[c]] = true;
	size_t g = (size_t)-1;
	for (size_t k = 0; k < ng && g == (size_t)-1; k++)
		if (!gt_matched[k] && k < nc && match_call[k] == (size_t)-1)
			g = k; /* its own call is left over too */
	for (size_t k = 0; k < ng && g == (size_t)-1; k++)
		if (!gt_matched[k] && no_valid[k])
			g = k;
	for (size_t k = 0; k < ng && g == (size_t)-1; k++)
		if (!gt_matched[k])
			g = k;
	const tcv *f = find_fn(functions, gt->items[g]->keys[0]);
	size_t pick = g < nc && match_call[g] == (size_t)-1 ? g : (size_t)-1;
	for (size_t c = 0; c < nc && pick == (size_t)-1; c++)
		if (match_call[c] == (size_t)-1 && name_matches(calls->calls[c].pub.name, fn_name(f), calls->channel))
			pick = c;
	for (size_t c = 0; c < nc && pick == (size_t)-1; c++)
		if (match_call[c] == (size_t)-1)
			pick = c;
	check_one(f, &calls->calls[pick], calls->channel, gt->items[g]->items[0], out);
	if (out->pass) {
		/* cannot happen: a passing pair would have been matched */
		verdict(out, EV_TOOLCALL_VALUE_MISMATCH, "'%s': the calls cannot be matched one to one with the expected calls",
		        fn_name(f));
	} else {
		char d[sizeof out->detail];
		memcpy(d, out->detail, sizeof d);
		snprintf(out->detail, sizeof out->detail, "expected call %zu: %s", g + 1, d);
	}
done:
	free(ok);
	free(match_call);
	free(seen);
	free(any);
	return rc;
}

int tc_check_values(const tcv *functions, const tcv *gt, const char *category, const ev_toolcalls *calls,
                    ev_toolcall_verdict *out)
{
	memset(out, 0, sizeof *out);
	if (!category || !*category)
		category = "simple";
	int rc = validate(functions, gt);
	if (rc)
		return rc;
	size_t n = calls ? calls->n : 0;
	if (strstr(category, "irrelevance")) {
		if (n == 0)
			verdict(out, EV_TOOLCALL_PASS, "%s", "");
		else
			verdict(out, EV_TOOLCALL_WRONG_COUNT, "expected no function call, got %zu (first: '%s')", n,
			        calls->calls[0].pub.name);
		return 0;
	}
	if (!calls) {
		verdict(out, EV_TOOLCALL_UNPARSEABLE, "no function call could be read from the answer");
		return 0;
	}
	if (strstr(category, "relevance")) {
		if (n > 0)
			verdict(out, EV_TOOLCALL_PASS, "%s", "");
		else
			verdict(out, EV_TOOLCALL_WRONG_COUNT, "expected at least one function call, got none");
		return 0;
	}
	if (gt->n == 0)
		return ev_error_set(EV_E_INVALID, "ground_truth: empty for category '%s'", category);
	if (n != gt->n) {
		verdict(out, EV_TOOLCALL_WRONG_COUNT, "expected %zu function call%s, got %zu", gt->n,
		        gt->n == 1 ? "" : "s", n);
		return 0;
	}
	if (strstr(category, "parallel"))
		return check_parallel(functions, gt, calls, out);
	const tcv *f;
	if (strstr(category, "multiple")) {
		if (!(f = gt_fn(functions, gt->items[0], 0, &rc)))
			return rc;
	} else {
		/* simple: BFCL checks against the first function, whatever name
		 * the ground truth gives it */
		if (functions->n == 0)
			return ev_error_set(EV_E_INVALID, "functions: empty");
		f = functions->items[0];
	}
	check_one(f, &calls->calls[0], calls->channel, gt->items[0]->items[0], out);
	return 0;
}

int ev_toolcall_check(const char *functions_json, const char *ground_truth_json, const char *category,
                      const ev_toolcalls *calls, ev_toolcall_verdict *out)
{
	memset(out, 0, sizeof *out);
	ev_arena *a = NULL;
	int rc = ev_arena_new(&a, TC_ARENA_MAX);
	if (rc)
		return rc;
	tcv *functions = NULL, *gt = NULL;
	if (!functions_json)
		functions_json = "[]";
	if (!ground_truth_json)
		ground_truth_json = "[]";
	size_t fl = strlen(functions_json), gl = strlen(ground_truth_json);
	if (fl > TC_MAX_TEXT || gl > TC_MAX_TEXT) {
		rc = ev_error_set(EV_E_LIMIT, "functions or ground truth longer than %zu bytes", TC_MAX_TEXT);
		goto done;
	}
	if ((rc = tcv_parse_all(&functions, a, functions_json, fl, "functions")))
		goto done;
	if ((rc = tcv_parse_all(&gt, a, ground_truth_json, gl, "ground_truth")))
		goto done;
	rc = tc_check_values(functions, gt, category, calls, out);
done:
	ev_arena_free(a);
	return rc;
}
