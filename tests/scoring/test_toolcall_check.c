/* scoring/toolcall_check.c: BFCL's AST rules on small hand-made cases:
 * names, required and unexpected parameters, types, value comparison,
 * categories, malformed inputs, and the "toolcall" checker kind. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"

static const char *FN_AREA =
	"[{\"name\":\"geo.area\",\"parameters\":{\"type\":\"dict\",\"properties\":{"
	"\"base\":{\"type\":\"integer\"},\"height\":{\"type\":\"float\"},\"unit\":{\"type\":\"string\"},"
	"\"exact\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"sizes\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	"\"point\":{\"type\":\"tuple\",\"items\":{\"type\":\"float\"}},"
	"\"opts\":{\"type\":\"dict\",\"properties\":{\"mode\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}}},"
	"\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"dict\"}},"
	"\"anything\":{\"type\":\"any\"}},"
	"\"required\":[\"base\",\"height\"]}}]";

static const char *GT_AREA =
	"[{\"geo.area\":{\"base\":[10],\"height\":[5.0, 5.5],\"unit\":[\"square meters\",\"\"],"
	"\"exact\":[true,\"\"],\"tags\":[[\"New York\",\"LA\"],\"\"],\"sizes\":[[1,2],\"\"],"
	"\"point\":[[1.5,2.5],\"\"],"
	"\"opts\":[{\"mode\":[\"fast\",\"quick\"],\"n\":[3,\"\"]},\"\"],"
	"\"rows\":[[{\"k\":[\"a\"]},{\"k\":[\"b\"]}],\"\"],"
	"\"anything\":[\"x\",\"\"]}}]";

static ev_toolcall_verdict run(const char *fns, const char *gt, const char *cat, const char *tool_calls,
                               const char *text)
{
	ev_toolcalls *l = NULL;
	ev_toolcall_verdict v;
	if (ev_toolcalls_parse(&l, tool_calls, text))
		l = NULL;
	if (ev_toolcall_check(fns, gt, cat, l, &v))
		fail_msg("check failed: %s", ev_error_msg());
	ev_toolcalls_free(l);
	return v;
}

#define PASS(text) expect(run(FN_AREA, GT_AREA, "simple", NULL, text), EV_TOOLCALL_PASS, NULL, text)
#define FAILS(text, reason, needle) expect(run(FN_AREA, GT_AREA, "simple", NULL, text), reason, needle, text)

static void expect(ev_toolcall_verdict v, ev_toolcall_reason want, const char *needle, const char *what)
{
	if (v.reason != want || v.pass != (want == EV_TOOLCALL_PASS))
		fail_msg("%s: expected %s, got %s (%s)", what, want ? ev_toolcall_reason_name(want) : "pass",
		         v.pass ? "pass" : ev_toolcall_reason_name(v.reason), v.detail);
	if (needle && !strstr(v.detail, needle))
		fail_msg("%s: detail \"%s\" does not name \"%s\"", what, v.detail, needle);
}

static void toolcall_check_names_and_parameters(void **st)
{
	(void)st;
	PASS("geo.area(base=10, height=5.0)");
	/* BFCL maps '.' to '_' only for the function-calling channel (below):
	 * a prompted answer names the function exactly */
	FAILS("geo_area(base=10, height=5.5)", EV_TOOLCALL_WRONG_FUNCTION, "geo.area");
	FAILS("area(base=10, height=5.0)", EV_TOOLCALL_WRONG_FUNCTION, "geo.area");
	FAILS("geo.area(height=5.0)", EV_TOOLCALL_MISSING_REQUIRED, "base");
	FAILS("geo.area(base=10, height=5.0, color=\"red\")", EV_TOOLCALL_UNEXPECTED_PARAM, "color");
	/* the function knows the parameter but the ground truth does not list it */
	const char *gt_min = "[{\"geo.area\":{\"base\":[10],\"height\":[5.0]}}]";
	expect(run(FN_AREA, gt_min, "simple", NULL, "geo.area(base=10, height=5.0, unit=\"m\")"),
	       EV_TOOLCALL_UNEXPECTED_PARAM, "unit", "gt-only");
	/* a parameter the ground truth needs (no "") although the function
	 * calls it optional */
	const char *gt_unit = "[{\"geo.area\":{\"base\":[10],\"height\":[5.0],\"unit\":[\"m\"]}}]";
	expect(run(FN_AREA, gt_unit, "simple", NULL, "geo.area(base=10, height=5.0)"), EV_TOOLCALL_MISSING_REQUIRED,
	       "unit", "gt-required");
}

static void toolcall_check_types_follow_bfcl(void **st)
{
	(void)st;
	PASS("geo.area(base=10, height=5)"); /* an int is a float */
	FAILS("geo.area(base=10.0, height=5.0)", EV_TOOLCALL_WRONG_TYPE, "base");
	FAILS("geo.area(base=\"10\", height=5.0)", EV_TOOLCALL_WRONG_TYPE, "base");
	FAILS("geo.area(base=True, height=5.0)", EV_TOOLCALL_WRONG_TYPE, "base"); /* a bool is no int */
	FAILS("geo.area(base=10, height=5.0, exact=\"true\")", EV_TOOLCALL_WRONG_TYPE, "exact");
	PASS("geo.area(base=10, height=5.0, exact=true)");
	FAILS("geo.area(base=10, height=5.0, exact=False)", EV_TOOLCALL_VALUE_MISMATCH, "exact");
	/* array items are checked: one level */
	const char *gt_sizes = "[{\"geo.area\":{\"base\":[10],\"height\":[5.0],\"sizes\":[[1,2]]}}]";
	expect(run(FN_AREA, gt_sizes, "simple", NULL, "geo.area(base=10, height=5.0, sizes=[1, \"2\"])"),
	       EV_TOOLCALL_WRONG_TYPE, "sizes", "items");
	/* BFCL's quirk, kept: with "" among the acceptable values the element
	 * check lets everything through, and the value check decides */
	FAILS("geo.area(base=10, height=5.0, sizes=[1, \"2\"])", EV_TOOLCALL_VALUE_MISMATCH, "sizes");
	FAILS("geo.area(base=10, height=5.0, tags=\"New York\")", EV_TOOLCALL_WRONG_TYPE, "tags");
	/* a tuple parameter takes a tuple or a list; an array parameter a list only */
	PASS("geo.area(base=10, height=5.0, point=(1.5, 2.5))");
	PASS("geo.area(base=10, height=5.0, point=[1.5, 2.5])");
	FAILS("geo.area(base=10, height=5.0, sizes=(1, 2))", EV_TOOLCALL_WRONG_TYPE, "sizes");
	/* "any" is BFCL's string */
	PASS("geo.area(base=10, height=5.0, anything=\"X\")");
	FAILS("geo.area(base=10, height=5.0, anything=3)", EV_TOOLCALL_WRONG_TYPE, "anything");
	/* a variable: the ground truth's own type is accepted, compared as is */
	const char *gt_var = "[{\"geo.area\":{\"base\":[\"b\"],\"height\":[5.0]}}]";
	expect(run(FN_AREA, gt_var, "simple", NULL, "geo.area(base=b, height=5.0)"), EV_TOOLCALL_PASS, NULL, "var");
	expect(run(FN_AREA, gt_var, "simple", NULL, "geo.area(base=\"B\", height=5.0)"), EV_TOOLCALL_VALUE_MISMATCH,
	       "base", "var case");
}

static void toolcall_check_compares_values_like_bfcl(void **st)
{
	(void)st;
	FAILS("geo.area(base=11, height=5.0)", EV_TOOLCALL_VALUE_MISMATCH, "base");
	/* strings: lowercase, spaces and ,./-_*^ removed */
	PASS("geo.area(base=10, height=5.0, unit=\"Square-Meters\")");
	PASS("geo.area(base=10, height=5.0, unit=\"square_meters.\")");
	FAILS("geo.area(base=10, height=5.0, unit=\"square feet\")", EV_TOOLCALL_VALUE_MISMATCH, "unit");
	/* lists element by element, strings standardised, order kept */
	PASS("geo.area(base=10, height=5.0, tags=[\"new york\", \"la\"])");
	FAILS("geo.area(base=10, height=5.0, tags=[\"LA\", \"New York\"])", EV_TOOLCALL_VALUE_MISMATCH, "tags");
	FAILS("geo.area(base=10, height=5.0, sizes=[1])", EV_TOOLCALL_VALUE_MISMATCH, "sizes");
	/* dicts key by key against acceptable values; "" makes a key optional */
	PASS("geo.area(base=10, height=5.0, opts={\"mode\": \"Quick\"})");
	PASS("geo.area(base=10, height=5.0, opts={\"mode\": \"fast\", \"n\": 3})");
	FAILS("geo.area(base=10, height=5.0, opts={\"mode\": \"slow\"})", EV_TOOLCALL_VALUE_MISMATCH, "mode");
	FAILS("geo.area(base=10, height=5.0, opts={\"n\": 3})", EV_TOOLCALL_VALUE_MISMATCH, "mode");
	FAILS("geo.area(base=10, height=5.0, opts={\"mode\": \"fast\", \"x\": 1})", EV_TOOLCALL_VALUE_MISMATCH, "'x'");
	/* lists of dicts, dict by dict */
	PASS("geo.area(base=10, height=5.0, rows=[{\"k\": \"A\"}, {\"k\": \"b\"}])");
	FAILS("geo.area(base=10, height=5.0, rows=[{\"k\": \"b\"}, {\"k\": \"a\"}])", EV_TOOLCALL_VALUE_MISMATCH, "rows");
	FAILS("geo.area(base=10, height=5.0, rows=[{\"k\": \"a\"}])", EV_TOOLCALL_VALUE_MISMATCH, "rows");
	/* the same through OpenAI tool_calls, with the arguments as a string */
	expect(run(FN_AREA, GT_AREA, "simple",
	           "[{\"type\":\"function\",\"function\":{\"name\":\"geo_area\",\"arguments\":"
	           "\"{\\\"base\\\": 10, \\\"height\\\": 5.5, \\\"unit\\\": \\\"Square Meters\\\"}\"}}]",
	           NULL),
	       EV_TOOLCALL_PASS, NULL, "tool_calls");
	expect(run(FN_AREA, GT_AREA, "simple",
	           "[{\"type\":\"function\",\"function\":{\"name\":\"geo_area\",\"arguments\":"
	           "\"{\\\"base\\\": 10.0, \\\"height\\\": 5.5}\"}}]",
	           NULL),
	       EV_TOOLCALL_WRONG_TYPE, "base", "tool_calls float for int");
	/* through the channel the name is the OpenAI-safe one; a dotted name
	 * there is not what BFCL expects either */
	expect(run(FN_AREA, GT_AREA, "simple",
	           "[{\"type\":\"function\",\"function\":{\"name\":\"geo.area\",\"arguments\":"
	           "\"{\\\"base\\\": 10, \\\"height\\\": 5.5}\"}}]",
	           NULL),
	       EV_TOOLCALL_WRONG_FUNCTION, "geo.area", "tool_calls dotted name");
}

/* BFCL promotes an int to a float only at the top level: inside a list of
 * floats an int is the wrong type, whether the ground truth came straight
 * from BFCL's file or went through evald's JSON (which keeps 1.0 a float). */
static void ints_inside_float_lists_are_wrong_types(void **st)
{
	(void)st;
	const char *fn = "[{\"name\":\"f\",\"parameters\":{\"type\":\"dict\",\"properties\":{\"x\":{\"type\":"
	                 "\"array\",\"items\":{\"type\":\"float\"}}},\"required\":[\"x\"]}}]";
	const char *gt = "[{\"f\":{\"x\":[[1.0,2.0]]}}]";
	expect(run(fn, gt, "simple", NULL, "f(x=[1.0, 2.0])"), EV_TOOLCALL_PASS, NULL, "floats");
	expect(run(fn, gt, "simple", NULL, "f(x=[1, 2])"), EV_TOOLCALL_WRONG_TYPE, "x", "ints in a float list");
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, gt, strlen(gt), "gt"), 0);
	char *again = ev_json_print(j);
	assert_string_equal(again, gt);
	expect(run(fn, again, "simple", NULL, "f(x=[1, 2])"), EV_TOOLCALL_WRONG_TYPE, "x", "after a JSON round trip");
	free(again);
	cJSON_Delete(j);
}

static const char *FN_TWO = "[{\"name\":\"f\",\"parameters\":{\"type\":\"dict\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                            "\"required\":[\"a\"]}},"
                            "{\"name\":\"g\",\"parameters\":{\"type\":\"dict\",\"properties\":{\"s\":{\"type\":\"string\"}},"
                            "\"required\":[\"s\"]}}]";

static void toolcall_check_categories(void **st)
{
	(void)st;
	const char *gt1 = "[{\"g\":{\"s\":[\"x\"]}}]";
	expect(run(FN_TWO, gt1, "multiple", NULL, "g(s='x')"), EV_TOOLCALL_PASS, NULL, "multiple");
	expect(run(FN_TWO, gt1, "multiple", NULL, "f(a=1)"), EV_TOOLCALL_WRONG_FUNCTION, "'g'", "multiple other");
	expect(run(FN_TWO, gt1, "multiple", NULL, "g(s='x'); g(s='x')"), EV_TOOLCALL_WRONG_COUNT, "1", "multiple 2");
	expect(run(FN_TWO, gt1, "multiple", NULL, ""), EV_TOOLCALL_WRONG_COUNT, NULL, "multiple none");
	expect(run(FN_TWO, gt1, "multiple", NULL, "no idea"), EV_TOOLCALL_UNPARSEABLE, NULL, "multiple garbage");
	const char *gt3 = "[{\"f\":{\"a\":[1]}},{\"f\":{\"a\":[2]}},{\"g\":{\"s\":[\"x\",\"y\"]}}]";
	expect(run(FN_TWO, gt3, "parallel_multiple", NULL, "[g(s='y'), f(a=2), f(a=1)]"), EV_TOOLCALL_PASS, NULL,
	       "any order");
	expect(run(FN_TWO, gt3, "parallel", NULL, "[f(a=1), f(a=1), g(s='x')]"), EV_TOOLCALL_VALUE_MISMATCH, "'a'",
	       "duplicate call");
	expect(run(FN_TWO, gt3, "parallel", NULL, "[f(a=1), g(s='x')]"), EV_TOOLCALL_WRONG_COUNT, "3", "dropped");
	expect(run(FN_TWO, gt3, "parallel", NULL, "[f(a=1), f(a=2), h(s='x')]"), EV_TOOLCALL_WRONG_FUNCTION, "'g'",
	       "renamed");
	/* overlapping acceptable values need a real matching, not a greedy pass */
	const char *gto = "[{\"f\":{\"a\":[1,2]}},{\"f\":{\"a\":[1]}}]";
	expect(run(FN_TWO, gto, "parallel", NULL, "[f(a=1), f(a=2)]"), EV_TOOLCALL_PASS, NULL, "matching");
	/* irrelevance: no call passes, any call fails */
	expect(run(FN_TWO, "[]", "irrelevance", NULL, "I can't do that with these tools."), EV_TOOLCALL_PASS, NULL, "irr");
	expect(run(FN_TWO, NULL, "irrelevance", NULL, ""), EV_TOOLCALL_PASS, NULL, "irr empty");
	expect(run(FN_TWO, "[]", "irrelevance", NULL, "f(a=1)"), EV_TOOLCALL_WRONG_COUNT, "'f'", "irr call");
	/* relevance: any call passes */
	expect(run(FN_TWO, "[]", "live_relevance", NULL, "f(a=99)"), EV_TOOLCALL_PASS, NULL, "rel");
	expect(run(FN_TWO, "[]", "live_relevance", NULL, "nothing"), EV_TOOLCALL_UNPARSEABLE, NULL, "rel none");
	/* simple checks against the first function, whatever name the ground
	 * truth uses (BFCL's data has such entries) */
	expect(run(FN_TWO, "[{\"other\":{\"a\":[1]}}]", "simple", NULL, "f(a=1)"), EV_TOOLCALL_PASS, NULL, "simple gt name");
	assert_string_equal(ev_toolcall_reason_name(EV_TOOLCALL_VALUE_MISMATCH), "value_mismatch");
	assert_string_equal(ev_toolcall_reason_name(EV_TOOLCALL_PASS), "");
}

static void toolcall_check_rejects_malformed_inputs(void **st)
{
	(void)st;
	ev_toolcalls *l = NULL;
	assert_int_equal(ev_toolcalls_parse(&l, NULL, "f(a=1)"), 0);
	ev_toolcall_verdict v;
	assert_int_equal(ev_toolcall_check("{", "[]", "simple", l, &v), EV_E_PARSE);
	assert_int_equal(ev_toolcall_check("{}", "[]", "simple", l, &v), EV_E_INVALID);
	assert_int_equal(ev_toolcall_check(FN_TWO, "[{\"f\":{\"a\":1}}]", "simple", l, &v), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "ground_truth[0].f.a"));
	assert_int_equal(ev_toolcall_check(FN_TWO, "[{\"f\":{}, \"g\":{}}]", "simple", l, &v), EV_E_INVALID);
	assert_int_equal(ev_toolcall_check(FN_TWO, "[]", "simple", l, &v), EV_E_INVALID);
	assert_int_equal(ev_toolcall_check(FN_TWO, "[{\"zz\":{\"a\":[1]}}]", "multiple", l, &v), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "zz"));
	ev_toolcalls_free(l);
}

static void toolcall_checker_kind_scores_samples(void **st)
{
	(void)st;
	ev_checker *c = NULL;
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"toolcall\",\"category\":\"multiple\"}"), 0);
	assert_non_null(strstr(ev_checker_spec(c), "\"category\":\"multiple\""));
	ev_sample s = {0};
	s.id = "m1";
	s.tests_json = ev_asprintf("{\"functions\": %s, \"ground_truth\": [{\"g\":{\"s\":[\"x\"]}}]}", FN_TWO);
	ev_verdict v;
	assert_int_equal(ev_checker_score(c, &s, "```python\ng(s=\"X\")\n```", false, &v), 0);
	assert_true(v.score == 1.0);
	assert_int_equal(v.reason, EV_REASON_NONE);
	assert_string_equal(v.extracted, "[{\"name\": \"g\", \"arguments\": {\"s\": \"X\"}}]");
	ev_verdict_clear(&v);
	assert_int_equal(ev_checker_score(c, &s, "g(s=\"y\")", false, &v), 0);
	assert_true(v.score == 0.0);
	assert_int_equal(v.reason, EV_REASON_WRONG_ANSWER);
	assert_true(ev_str_starts(v.detail, "value_mismatch: "));
	ev_verdict_clear(&v);
	assert_int_equal(ev_checker_score(c, &s, "I don't know", false, &v), 0);
	assert_int_equal(v.reason, EV_REASON_NO_ANSWER);
	assert_true(ev_str_starts(v.detail, "unparseable: "));
	ev_verdict_clear(&v);
	ev_checker_free(c);

	/* the category from the sample's metadata */
	assert_int_equal(ev_checker_new(&c, "{\"type\":\"toolcall\"}"), 0);
	s.metadata_json = ev_strdup("{\"category\": \"irrelevance\"}");
	assert_int_equal(ev_checker_score(c, &s, "g(s=\"x\")", false, &v), 0);
	assert_true(v.score == 0.0);
	assert_true(ev_str_starts(v.detail, "wrong_count: "));
	ev_verdict_clear(&v);
	assert_int_equal(ev_checker_score(c, &s, "Not possible with these tools.", false, &v), 0);
	assert_true(v.score == 1.0);
	ev_verdict_clear(&v);
	/* ev_toolcall_score: tool_calls from the backend */
	assert_int_equal(ev_toolcall_score(&s, "", "[{\"type\":\"function\",\"function\":{\"name\":\"g\","
	                                              "\"arguments\":\"{}\"}}]", &v), 0);
	assert_true(v.score == 0.0);
	ev_verdict_clear(&v);
	/* a sample without tests is a fault of the suite, not a wrong answer */
	ev_sample bare = {0};
	bare.id = "b";
	assert_int_not_equal(ev_checker_score(c, &bare, "g(s=\"x\")", false, &v), 0);
	ev_checker_free(c);
	free(s.tests_json);
	free(s.metadata_json);

	assert_int_not_equal(ev_checker_new(&c, "{\"type\":\"toolcall\",\"category\":3}"), 0);
	assert_non_null(strstr(ev_error_msg(), "checker.category"));
	assert_int_not_equal(ev_checker_new(&c, "{\"type\":\"toolcall\",\"cat\":\"simple\"}"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(toolcall_check_names_and_parameters),
		cmocka_unit_test(ints_inside_float_lists_are_wrong_types),
		cmocka_unit_test(toolcall_check_types_follow_bfcl),
		cmocka_unit_test(toolcall_check_compares_values_like_bfcl),
		cmocka_unit_test(toolcall_check_categories),
		cmocka_unit_test(toolcall_check_rejects_malformed_inputs),
		cmocka_unit_test(toolcall_checker_kind_scores_samples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
