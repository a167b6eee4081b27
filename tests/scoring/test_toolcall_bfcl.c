/* BFCL conformance of the tool-call checker over shared/data/bfcl: every
 * possible answer, written as a model would (OpenAI tool_calls JSON and
 * Python call text), passes; irrelevance passes only without a call; each
 * kind of perturbed answer fails with its own reason. Skips without the
 * shared data. Prints the counts. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"
#include "suites/suites.h"

static const char *const CATS[] = {"simple", "multiple", "parallel", "parallel_multiple"};
#define N_CATS 4

/* ---- reading an imported suite -------------------------------------------- */

typedef struct {
	cJSON **lines;
	size_t n;
} lines;

static void lines_free(lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		cJSON_Delete(l->lines[i]);
	free(l->lines);
}

/* Imports BFCL_v3_<cat>.json and returns the samples.jsonl lines; false
 * when the shared data is absent. */
static bool import_cat(lines *out, const char *cat, bool with_answers)
{
	memset(out, 0, sizeof *out);
	char rel[128];
	snprintf(rel, sizeof rel, "bfcl/BFCL_v3_%s.json", cat);
	char *q = tu_shared(rel);
	if (!q) {
		print_message("shared data absent (EV_SHARED_DIR/data/bfcl): skipping\n");
		return false;
	}
	snprintf(rel, sizeof rel, "bfcl/possible_answer/BFCL_v3_%s.json", cat);
	char *a = with_answers ? tu_shared(rel) : NULL;
	if (with_answers)
		assert_non_null(a);
	char tag[64];
	snprintf(tag, sizeof tag, "toolcall_bfcl_%s", cat);
	char *dir = tu_tmpdir(tag);
	if (ev_import_bfcl(q, a, dir))
		fail_msg("import %s: %s", cat, ev_error_msg());
	char *path = tu_path(dir, "samples.jsonl");
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, path, (size_t)64 << 20), 0);
	for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		if (!*p)
			continue;
		cJSON *j = cJSON_Parse(p);
		assert_non_null(j);
		out->lines = realloc(out->lines, (out->n + 1) * sizeof *out->lines);
		assert_non_null(out->lines);
		out->lines[out->n++] = j;
	}
	free(text);
	free(path);
	free(dir);
	free(q);
	free(a);
	return true;
}

/* ---- writing answers --------------------------------------------------------- */

static void py_value(ev_buf *b, const cJSON *v)
{
	if (cJSON_IsString(v)) {
		ev_buf_putc(b, '"');
		for (const unsigned char *s = (const unsigned char *)v->valuestring; *s; s++) {
			if (*s == '"' || *s == '\\')
				ev_buf_printf(b, "\\%c", *s);
			else if (*s == '\n')
				ev_buf_puts(b, "\\n");
			else if (*s < 0x20)
				ev_buf_printf(b, "\\x%02x", *s);
			else
				ev_buf_putc(b, (char)*s);
		}
		ev_buf_putc(b, '"');
	} else if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == floor(d) && fabs(d) < 1e15)
			ev_buf_printf(b, "%lld", (long long)d);
		else
			ev_buf_printf(b, "%.17g", d);
	} else if (cJSON_IsBool(v)) {
		ev_buf_puts(b, cJSON_IsTrue(v) ? "True" : "False");
	} else if (cJSON_IsNull(v)) {
		ev_buf_puts(b, "None");
	} else if (cJSON_IsArray(v)) {
		ev_buf_putc(b, '[');
		const cJSON *e;
		int k = 0;
		cJSON_ArrayForEach(e, v) {
			if (k++)
				ev_buf_puts(b, ", ");
			py_value(b, e);
		}
		ev_buf_putc(b, ']');
	} else if (cJSON_IsObject(v)) {
		ev_buf_putc(b, '{');
		const cJSON *e;
		int k = 0;
		cJSON_ArrayForEach(e, v) {
			if (k++)
				ev_buf_puts(b, ", ");
			ev_json_buf_str(b, e->string);
			ev_buf_puts(b, ": ");
			py_value(b, e);
		}
		ev_buf_putc(b, '}');
	}
}

/* calls: [{"name": ..., "args": {...}}] -> OpenAI tool_calls JSON. */
static char *as_tool_calls(const cJSON *calls)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *c;
	int k = 0;
	cJSON_ArrayForEach(c, calls) {
		char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "args"));
		char *name = ev_strdup(cJSON_GetObjectItem(c, "name")->valuestring);
		for (char *p = name; *p; p++)
			if (*p == '.')
				*p = '_'; /* what an OpenAI model sees in the imported tools */
		cJSON *tc = cJSON_CreateObject(), *fn = cJSON_CreateObject();
		char id[32];
		snprintf(id, sizeof id, "call_%d", k++);
		cJSON_AddStringToObject(tc, "id", id);
		cJSON_AddStringToObject(tc, "type", "function");
		cJSON_AddStringToObject(fn, "name", name);
		cJSON_AddStringToObject(fn, "arguments", args);
		cJSON_AddItemToObject(tc, "function", fn);
		cJSON_AddItemToArray(arr, tc);
		free(args);
		free(name);
	}
	char *s = cJSON_PrintUnformatted(arr);
	cJSON_Delete(arr);
	return s;
}

/* calls -> "[f(a=1, b="x"), g(...)]" */
static char *as_python(const cJSON *calls)
{
	ev_buf b = EV_BUF_INIT((size_t)16 << 20);
	ev_buf_putc(&b, '[');
	const cJSON *c;
	int k = 0;
	cJSON_ArrayForEach(c, calls) {
		if (k++)
			ev_buf_puts(&b, ", ");
		ev_buf_printf(&b, "%s(", cJSON_GetObjectItem(c, "name")->valuestring);
		const cJSON *a;
		int m = 0;
		cJSON_ArrayForEach(a, cJSON_GetObjectItem(c, "args")) {
			ev_buf_printf(&b, "%s%s=", m++ ? ", " : "", a->string);
			py_value(&b, a);
		}
		ev_buf_putc(&b, ')');
	}
	ev_buf_putc(&b, ']');
	return ev_buf_detach(&b, NULL);
}

static const cJSON *find_fn(const cJSON *fns, const char *name)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, fns) {
		if (!strcmp(cJSON_GetObjectItem(f, "name")->valuestring, name))
			return f;
	}
	return NULL;
}

static bool has_empty(const cJSON *vals)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, vals) {
		if (cJSON_IsString(v) && !v->valuestring[0])
			return true;
	}
	return false;
}

static const cJSON *first_value(const cJSON *vals)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, vals) {
		if (!(cJSON_IsString(v) && !v->valuestring[0]))
			return v;
	}
	return NULL;
}

/* A dict in the ground truth lists acceptable values per key: the model's
 * dict takes the first of each (recursively for nested dicts). */
static cJSON *dict_answer(const cJSON *acc, bool omit_optional)
{
	if (!cJSON_IsObject(acc))
		return cJSON_Duplicate(acc, true);
	cJSON *d = cJSON_CreateObject();
	const cJSON *k;
	cJSON_ArrayForEach(k, acc) {
		if (!cJSON_IsArray(k)) {
			cJSON_AddItemToObject(d, k->string, cJSON_Duplicate(k, true));
			continue;
		}
		if (omit_optional && has_empty(k))
			continue;
		const cJSON *v = first_value(k);
		if (v)
			cJSON_AddItemToObject(d, k->string, cJSON_IsObject(v) ? dict_answer(v, omit_optional)
			                                                      : cJSON_Duplicate(v, true));
	}
	return d;
}

static bool is_required(const cJSON *fn, const char *param)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "parameters"), "required")) {
		if (cJSON_IsString(r) && !strcmp(r->valuestring, param))
			return true;
	}
	return false;
}

/* The answer built from the ground truth: for each expected call, the
 * function BFCL checks against and, for each parameter, its first
 * acceptable value; `omit_optional` leaves out those that "" allows. */
static cJSON *answer_of(const cJSON *fns, const cJSON *gt, const char *cat, bool omit_optional)
{
	cJSON *calls = cJSON_CreateArray();
	const cJSON *e;
	cJSON_ArrayForEach(e, gt) {
		const cJSON *exp = e->child;
		const cJSON *f = !strcmp(cat, "simple") ? cJSON_GetArrayItem(fns, 0) : find_fn(fns, exp->string);
		assert_non_null(f);
		const cJSON *props = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "parameters"), "properties");
		cJSON *c = cJSON_CreateObject(), *args = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "name", cJSON_GetObjectItem(f, "name")->valuestring);
		const cJSON *p;
		cJSON_ArrayForEach(p, exp) {
			if (!cJSON_GetObjectItem(props, p->string))
				continue; /* a ground-truth-only parameter: optional there */
			if (omit_optional && has_empty(p) && !is_required(f, p->string))
				continue;
			const cJSON *v = first_value(p);
			if (!v)
				continue;
			const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(props, p->string), "type"));
			cJSON *val;
			if (t && !strcmp(t, "dict")) {
				val = dict_answer(v, omit_optional);
			} else if (t && !strcmp(t, "array") && cJSON_IsArray(v)) {
				/* a list of dicts: each element an acceptable-values dict */
				val = cJSON_CreateArray();
				const cJSON *el;
				cJSON_ArrayForEach(el, v) cJSON_AddItemToArray(val, dict_answer(el, omit_optional));
			} else {
				val = cJSON_Duplicate(v, true);
			}
			cJSON_AddItemToObject(args, p->string, val);
		}
		cJSON_AddItemToObject(c, "args", args);
		cJSON_AddItemToArray(calls, c);
	}
	return calls;
}

typedef struct {
	char *fns, *gt;
	const char *cat;
} item;

/* Checks one answer in one form; returns the verdict. */
static ev_toolcall_verdict check_form(const item *it, const cJSON *calls, bool python)
{
	char *out = python ? as_python(calls) : as_tool_calls(calls);
	ev_toolcalls *l = NULL;
	ev_toolcall_verdict v;
	int rc = python ? ev_toolcalls_parse(&l, NULL, out) : ev_toolcalls_parse(&l, out, NULL);
	if (rc)
		l = NULL; /* unparseable */
	if (ev_toolcall_check(it->fns, it->gt, it->cat, l, &v))
		fail_msg("check: %s", ev_error_msg());
	ev_toolcalls_free(l);
	free(out);
	return v;
}

static void toolcall_bfcl_possible_answers_pass(void **st)
{
	(void)st;
	for (int c = 0; c < N_CATS; c++) {
		lines L;
		if (!import_cat(&L, CATS[c], true))
			skip();
		size_t pass[2][2] = {{0}}, total = 0;
		for (size_t i = 0; i < L.n; i++) {
			const cJSON *tests = cJSON_GetObjectItem(L.lines[i], "tests");
			const char *id = cJSON_GetObjectItem(L.lines[i], "id")->valuestring;
			item it = {cJSON_PrintUnformatted(cJSON_GetObjectItem(tests, "functions")),
			           cJSON_PrintUnformatted(cJSON_GetObjectItem(tests, "ground_truth")), CATS[c]};
			total++;
			for (int omit = 0; omit < 2; omit++) {
				cJSON *calls = answer_of(cJSON_GetObjectItem(tests, "functions"),
				                         cJSON_GetObjectItem(tests, "ground_truth"), CATS[c], omit);
				for (int py = 0; py < 2; py++) {
					ev_toolcall_verdict v = check_form(&it, calls, py);
					if (v.pass)
						pass[omit][py]++;
					else
						print_message("FAIL %s (%s, %s): %s: %s\n", id, py ? "python" : "tool_calls",
						              omit ? "optional omitted" : "optional given",
						              ev_toolcall_reason_name(v.reason), v.detail);
				}
				cJSON_Delete(calls);
			}
			free(it.fns);
			free(it.gt);
		}
		print_message("bfcl %-17s tool_calls %zu/%zu, python %zu/%zu (optional given); "
		              "tool_calls %zu/%zu, python %zu/%zu (optional omitted)\n",
		              CATS[c], pass[0][0], total, pass[0][1], total, pass[1][0], total, pass[1][1], total);
		assert_true(total > 0);
		for (int a = 0; a < 2; a++)
			for (int b = 0; b < 2; b++)
				assert_int_equal(pass[a][b], total);
		lines_free(&L);
	}
}

/* Also through the checker registry and the sample path: score 1. */
static void toolcall_bfcl_scores_through_the_checker(void **st)
{
	(void)st;
	lines L;
	if (!import_cat(&L, "parallel_multiple", true))
		skip();
	ev_checker *ck = NULL;
	assert_int_equal(ev_checker_new(&ck, "{\"type\":\"toolcall\",\"category\":\"parallel_multiple\"}"), 0);
	size_t ok = 0;
	for (size_t i = 0; i < L.n; i++) {
		const cJSON *tests = cJSON_GetObjectItem(L.lines[i], "tests");
		cJSON *calls = answer_of(cJSON_GetObjectItem(tests, "functions"), cJSON_GetObjectItem(tests, "ground_truth"),
		                         "parallel_multiple", false);
		char *py = as_python(calls), *tc = as_tool_calls(calls);
		ev_sample s = {0};
		s.id = "x";
		s.tests_json = cJSON_PrintUnformatted(tests);
		s.metadata_json = cJSON_PrintUnformatted(cJSON_GetObjectItem(L.lines[i], "metadata"));
		ev_verdict v;
		assert_int_equal(ev_checker_score(ck, &s, py, false, &v), 0);
		bool a = v.score == 1.0 && v.reason == EV_REASON_NONE;
		ev_verdict_clear(&v);
		assert_int_equal(ev_toolcall_score(&s, "", tc, &v), 0);
		bool b = v.score == 1.0 && v.reason == EV_REASON_NONE && v.extracted;
		ev_verdict_clear(&v);
		/* the tool_calls array given as the answer text is a prompted
		 * answer: BFCL maps no names there, so it passes only when no
		 * function name has a dot */
		assert_int_equal(ev_checker_score(ck, &s, tc, false, &v), 0);
		bool dotted = false;
		const cJSON *g;
		cJSON_ArrayForEach(g, cJSON_GetObjectItem(tests, "ground_truth"))
			dotted |= g->child && strchr(g->child->string, '.') != NULL;
		bool d = dotted ? v.score == 0.0 : v.score == 1.0;
		ev_verdict_clear(&v);
		ok += a && b && d;
		free(s.tests_json);
		free(s.metadata_json);
		free(py);
		free(tc);
		cJSON_Delete(calls);
	}
	print_message("bfcl parallel_multiple through ev_checker_score and ev_toolcall_score: %zu/%zu\n", ok, L.n);
	assert_int_equal(ok, L.n);
	ev_checker_free(ck);
	lines_free(&L);
}

static void toolcall_bfcl_irrelevance_passes_only_without_a_call(void **st)
{
	(void)st;
	lines L;
	if (!import_cat(&L, "irrelevance", false))
		skip();
	size_t no_call = 0, empty = 0, call_fails = 0;
	for (size_t i = 0; i < L.n; i++) {
		const cJSON *tests = cJSON_GetObjectItem(L.lines[i], "tests");
		item it = {cJSON_PrintUnformatted(cJSON_GetObjectItem(tests, "functions")),
		           cJSON_PrintUnformatted(cJSON_GetObjectItem(tests, "ground_truth")), "irrelevance"};
		ev_toolcalls *l = NULL;
		ev_toolcall_verdict v;
		int rc = ev_toolcalls_parse(&l, NULL, "None of the given functions can answer this; the area is 25.");
		assert_int_equal(ev_toolcall_check(it.fns, it.gt, it.cat, rc ? NULL : l, &v), 0);
		no_call += v.pass;
		ev_toolcalls_free(l);
		assert_int_equal(ev_toolcalls_parse(&l, "[]", ""), 0);
		assert_int_equal(ev_toolcall_check(it.fns, it.gt, it.cat, l, &v), 0);
		empty += v.pass;
		ev_toolcalls_free(l);
		/* a call to the offered function, with whatever arguments */
		const char *fname = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(tests, "functions"), 0),
		                                        "name")->valuestring;
		char *text = ev_asprintf("%s(x=1)", fname);
		assert_int_equal(ev_toolcalls_parse(&l, NULL, text), 0);
		assert_int_equal(ev_toolcall_check(it.fns, it.gt, it.cat, l, &v), 0);
		call_fails += !v.pass && v.reason == EV_TOOLCALL_WRONG_COUNT;
		ev_toolcalls_free(l);
		free(text);
		free(it.fns);
		free(it.gt);
	}
	print_message("bfcl irrelevance: prose passes %zu/%zu, empty passes %zu/%zu, a call fails %zu/%zu\n", no_call,
	              L.n, empty, L.n, call_fails, L.n);
	assert_true(L.n > 0);
	assert_int_equal(no_call, L.n);
	assert_int_equal(empty, L.n);
	assert_int_equal(call_fails, L.n);
	lines_free(&L);
}

/* ---- perturbations -------------------------------------------------------------- */

enum { P_RENAME, P_DROP_REQ, P_BOGUS, P_TYPE, P_VALUE, P_DROP_CALL, P_GARBAGE, P_N };
static const char *const P_NAMES[P_N] = {"rename function", "drop required", "bogus param", "string for int",
                                         "change value", "drop a call", "garbage text"};
static const ev_toolcall_reason P_WANT[P_N] = {EV_TOOLCALL_WRONG_FUNCTION, EV_TOOLCALL_MISSING_REQUIRED,
                                               EV_TOOLCALL_UNEXPECTED_PARAM, EV_TOOLCALL_WRONG_TYPE,
                                               EV_TOOLCALL_VALUE_MISMATCH, EV_TOOLCALL_WRONG_COUNT,
                                               EV_TOOLCALL_UNPARSEABLE};

static const cJSON *fn_of_call(const cJSON *fns, const cJSON *call)
{
	return find_fn(fns, cJSON_GetObjectItem(call, "name")->valuestring);
}

static const char *ptype(const cJSON *fn, const char *param)
{
	const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "parameters"), "properties"),
	                                     param);
	const cJSON *t = cJSON_GetObjectItem(p, "type");
	return cJSON_IsString(t) ? t->valuestring : "";
}

/* The acceptable values of `param` in the expected call named like `call`. */
static const cJSON *gt_vals(const cJSON *gt, const cJSON *call, const char *param)
{
	const char *name = cJSON_GetObjectItem(call, "name")->valuestring;
	const cJSON *e;
	cJSON_ArrayForEach(e, gt) {
		if (!strcmp(e->child->string, name))
			return cJSON_GetObjectItem(e->child, param);
	}
	return NULL;
}

/* First non-"" acceptable value is a number (not a variable name). */
static bool numeric_answer(const cJSON *vals)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, vals) {
		if (cJSON_IsString(v) && !v->valuestring[0])
			continue;
		return cJSON_IsNumber(v);
	}
	return false;
}

static bool string_answer(const cJSON *vals)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, vals) {
		if (cJSON_IsString(v) && !v->valuestring[0])
			continue;
		return cJSON_IsString(v);
	}
	return false;
}

/* Applies perturbation k to `calls` in place; false when it does not apply
 * to this entry. Only the first call is touched, so that in the parallel
 * categories exactly one expected call is left unmatched. */
static bool perturb(int k, cJSON *calls, const cJSON *fns, const cJSON *gt, const char *cat)
{
	cJSON *c0 = cJSON_GetArrayItem(calls, 0);
	cJSON *args = cJSON_GetObjectItem(c0, "args");
	const cJSON *fn = !strcmp(cat, "simple") ? cJSON_GetArrayItem(fns, 0) : fn_of_call(fns, c0);
	switch (k) {
	case P_RENAME: {
		char *n = ev_asprintf("%s_renamed", cJSON_GetObjectItem(c0, "name")->valuestring);
		cJSON_ReplaceItemInObject(c0, "name", cJSON_CreateString(n));
		free(n);
		return true;
	}
	case P_DROP_REQ: {
		const cJSON *r;
		cJSON_ArrayForEach(r, cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "parameters"), "required")) {
			if (cJSON_GetObjectItem(args, r->valuestring)) {
				cJSON_DeleteItemFromObject(args, r->valuestring);
				return true;
			}
		}
		return false;
	}
	case P_BOGUS:
		cJSON_AddNumberToObject(args, "zz_bogus_param", 1);
		return true;
	case P_TYPE: {
		const cJSON *a;
		cJSON_ArrayForEach(a, args) {
			if (!strcmp(ptype(fn, a->string), "integer") && numeric_answer(gt_vals(gt, c0, a->string))) {
				cJSON_ReplaceItemInObject(args, a->string, cJSON_CreateString("seven"));
				return true;
			}
		}
		return false;
	}
	case P_VALUE: {
		const cJSON *a;
		cJSON_ArrayForEach(a, args) {
			const char *t = ptype(fn, a->string);
			const cJSON *vals = gt_vals(gt, c0, a->string);
			if (!strcmp(t, "string") && string_answer(vals)) {
				cJSON_ReplaceItemInObject(args, a->string, cJSON_CreateString("zq unlikely value 8675309"));
				return true;
			}
			if ((!strcmp(t, "integer") || !strcmp(t, "float")) && numeric_answer(vals)) {
				cJSON_ReplaceItemInObject(args, a->string, cJSON_CreateNumber(!strcmp(t, "float") ? 8675.5 : 8675309));
				return true;
			}
		}
		return false;
	}
	case P_DROP_CALL:
		if (cJSON_GetArraySize(calls) < 2)
			cJSON_AddItemToArray(calls, cJSON_Duplicate(c0, true)); /* one too many instead */
		else
			cJSON_DeleteItemFromArray(calls, 0);
		return true;
	default: return true;
	}
}

static void toolcall_bfcl_perturbed_answers_fail_with_their_reason(void **st)
{
	(void)st;
	size_t applied[P_N] = {0}, right[P_N] = {0};
	for (int c = 0; c < N_CATS; c++) {
		lines L;
		if (!import_cat(&L, CATS[c], true))
			skip();
		for (size_t i = 0; i < L.n; i++) {
			const cJSON *tests = cJSON_GetObjectItem(L.lines[i], "tests");
			const cJSON *fns = cJSON_GetObjectItem(tests, "functions"), *gt = cJSON_GetObjectItem(tests, "ground_truth");
			const char *id = cJSON_GetObjectItem(L.lines[i], "id")->valuestring;
			item it = {cJSON_PrintUnformatted(fns), cJSON_PrintUnformatted(gt), CATS[c]};
			for (int k = 0; k < P_N; k++) {
				cJSON *calls = answer_of(fns, gt, CATS[c], true);
				if (!perturb(k, calls, fns, gt, CATS[c])) {
					cJSON_Delete(calls);
					continue;
				}
				for (int py = 0; py < 2; py++) {
					ev_toolcall_verdict v;
					if (k == P_GARBAGE) {
						ev_toolcalls *l = NULL;
						int rc = ev_toolcalls_parse(&l, NULL, "I'm sorry, I can't help with that request (really).");
						assert_int_equal(ev_toolcall_check(it.fns, it.gt, it.cat, rc ? NULL : l, &v), 0);
						ev_toolcalls_free(l);
					} else {
						v = check_form(&it, calls, py);
					}
					applied[k]++;
					if (!v.pass && v.reason == P_WANT[k])
						right[k]++;
					else
						print_message("WRONG %s %s (%s): got %s: %s\n", P_NAMES[k], id, py ? "python" : "tool_calls",
						              v.pass ? "pass" : ev_toolcall_reason_name(v.reason), v.detail);
				}
				cJSON_Delete(calls);
			}
			free(it.fns);
			free(it.gt);
		}
		lines_free(&L);
	}
	for (int k = 0; k < P_N; k++) {
		print_message("perturbation %-16s -> %-16s %zu/%zu\n", P_NAMES[k], ev_toolcall_reason_name(P_WANT[k]),
		              right[k], applied[k]);
		assert_true(applied[k] > 0);
		assert_int_equal(right[k], applied[k]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(toolcall_bfcl_possible_answers_pass),
		cmocka_unit_test(toolcall_bfcl_scores_through_the_checker),
		cmocka_unit_test(toolcall_bfcl_irrelevance_passes_only_without_a_call),
		cmocka_unit_test(toolcall_bfcl_perturbed_answers_fail_with_their_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
