/* scoring/toolcall_parse.c: reading calls from tool_calls JSON and from
 * model text (JSON objects, Python calls, fences, <tool_call> tags). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "scoring/scoring.h"

/* Parses and checks the count; returns the list (caller frees). */
static ev_toolcalls *parse_ok(const char *tool_calls, const char *text, size_t want)
{
	ev_toolcalls *l = NULL;
	int rc = ev_toolcalls_parse(&l, tool_calls, text);
	if (rc)
		fail_msg("parse failed: %s (text: %s)", ev_error_msg(), text ? text : "(null)");
	assert_non_null(l);
	if (ev_toolcalls_count(l) != want)
		fail_msg("expected %zu calls, got %zu in: %s", want, ev_toolcalls_count(l), text ? text : tool_calls);
	return l;
}

static void expect_call(const ev_toolcalls *l, size_t i, const char *name, const char *args)
{
	const ev_toolcall *c = ev_toolcalls_get(l, i);
	assert_non_null(c);
	assert_string_equal(c->name, name);
	assert_string_equal(c->arguments_json, args);
}

static void parse_fails(const char *tool_calls, const char *text)
{
	ev_toolcalls *l = (ev_toolcalls *)1;
	int rc = ev_toolcalls_parse(&l, tool_calls, text);
	if (rc != EV_E_PARSE)
		fail_msg("expected a parse failure for: %s (got %d, %zu calls)", text ? text : tool_calls, rc,
		         rc ? 0 : ev_toolcalls_count(l));
	assert_null(l);
	assert_true(strlen(ev_error_msg()) > 0);
}

static void toolcall_parse_reads_openai_tool_calls(void **st)
{
	(void)st;
	ev_toolcalls *l = parse_ok("[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"math_factorial\","
	                           "\"arguments\":\"{\\\"number\\\": 5, \\\"x\\\": 2.0}\"}},"
	                           "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":{\"a\":[1,\"b\"]}}},"
	                           "{\"type\":\"function\",\"function\":{\"name\":\"h\",\"arguments\":\"\"}}]",
	                           "ignored text", 3);
	expect_call(l, 0, "math_factorial", "{\"number\": 5, \"x\": 2.0}");
	expect_call(l, 1, "g", "{\"a\": [1, \"b\"]}");
	expect_call(l, 2, "h", "{}");
	assert_null(ev_toolcalls_get(l, 3));
	ev_toolcalls_free(l);
	/* an empty or null tool_calls falls back to the text */
	l = parse_ok("[]", "f(a=1)", 1);
	ev_toolcalls_free(l);
	l = parse_ok("null", "", 0);
	ev_toolcalls_free(l);
	/* malformed arguments are not silently dropped */
	parse_fails("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{bad json\"}}]", NULL);
	parse_fails("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]", NULL);
	parse_fails("{\"not\": \"a list\"}", NULL);
	parse_fails("[1, 2]", NULL);
	ev_toolcalls_free(NULL);
}

static void toolcall_parse_reads_python_calls(void **st)
{
	(void)st;
	ev_toolcalls *l = parse_ok(NULL,
	                           "[f(a=1, b=\"x\"), g(c=[1,2], d={\"k\": 2.5}, e=True, f=None), "
	                           "math.factorial(n=-5, m=-2.5e3, t=(1, 2), u=(3,), v=(), w='it\\'s', z=\"a\\\"b\\n\")]",
	                           3);
	expect_call(l, 0, "f", "{\"a\": 1, \"b\": \"x\"}");
	expect_call(l, 1, "g", "{\"c\": [1, 2], \"d\": {\"k\": 2.5}, \"e\": true, \"f\": null}");
	expect_call(l, 2, "math.factorial",
	            "{\"n\": -5, \"m\": -2500.0, \"t\": [1, 2], \"u\": [3], \"v\": [], \"w\": \"it's\", \"z\": \"a\\\"b\\n\"}");
	ev_toolcalls_free(l);
	/* without brackets, several calls, newlines, trailing commas, a variable */
	l = parse_ok(NULL, "  calc.area(base=10, height=5.0,)\nother(x=[1, [2, 3]], y=some_var, z=1_000)  ", 2);
	expect_call(l, 0, "calc.area", "{\"base\": 10, \"height\": 5.0}");
	expect_call(l, 1, "other", "{\"x\": [1, [2, 3]], \"y\": \"some_var\", \"z\": 1000}");
	ev_toolcalls_free(l);
	/* floats and ints stay distinct, also for integral floats */
	l = parse_ok(NULL, "f(a=5, b=5.0, c=5., d=.5, e=1e2)", 1);
	expect_call(l, 0, "f", "{\"a\": 5, \"b\": 5.0, \"c\": 5.0, \"d\": 0.5, \"e\": 100.0}");
	ev_toolcalls_free(l);
	/* unicode escapes and raw strings */
	l = parse_ok(NULL, "f(a=\"\\u00e9\\ud83d\\ude00\", b=r'\\d+')", 1);
	expect_call(l, 0, "f", "{\"a\": \"\xc3\xa9\xf0\x9f\x98\x80\", \"b\": \"\\\\d+\"}");
	ev_toolcalls_free(l);
	l = parse_ok(NULL, "[]", 0);
	ev_toolcalls_free(l);
	l = parse_ok(NULL, "f()", 1);
	expect_call(l, 0, "f", "{}");
	ev_toolcalls_free(l);
}

static void toolcall_parse_reads_json_objects_in_text(void **st)
{
	(void)st;
	ev_toolcalls *l = parse_ok(NULL, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", 1);
	expect_call(l, 0, "get_weather", "{\"city\": \"Paris\"}");
	ev_toolcalls_free(l);
	l = parse_ok(NULL, "[{\"name\": \"a\", \"parameters\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": \"{\\\"y\\\": 2}\"}]",
	             2);
	expect_call(l, 0, "a", "{\"x\": 1}");
	expect_call(l, 1, "b", "{\"y\": 2}");
	ev_toolcalls_free(l);
	/* fences, with an info string; prose around them */
	l = parse_ok(NULL, "Here you go:\n```json\n{\"name\": \"a\", \"arguments\": {\"x\": 1.5}}\n```\nand\n```python\n"
	                   "b(y='z')\n```\nDone.",
	             2);
	expect_call(l, 0, "a", "{\"x\": 1.5}");
	expect_call(l, 1, "b", "{\"y\": \"z\"}");
	ev_toolcalls_free(l);
	/* <tool_call> tags (Qwen/Hermes style), thinking first */
	l = parse_ok(NULL, "<think>maybe f(a=2)?</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
	                   "</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
	             2);
	expect_call(l, 0, "f", "{\"a\": 1}");
	expect_call(l, 1, "g", "{}");
	ev_toolcalls_free(l);
	/* a call inside prose */
	l = parse_ok(NULL, "I will call get_weather(city=\"Paris\", days=3) now.", 1);
	expect_call(l, 0, "get_weather", "{\"city\": \"Paris\", \"days\": 3}");
	ev_toolcalls_free(l);
	/* empty answers have no calls and are not errors */
	l = parse_ok(NULL, "  \n", 0);
	ev_toolcalls_free(l);
	l = parse_ok(NULL, NULL, 0);
	ev_toolcalls_free(l);
}

static void toolcall_parse_rejects_garbage(void **st)
{
	(void)st;
	parse_fails(NULL, "I cannot help with that, there is no suitable function.");
	parse_fails(NULL, "asdf qwer (zxcv");
	parse_fails(NULL, "f(a=1");                   /* unterminated */
	parse_fails(NULL, "f(a=1, a=2)");             /* repeated keyword */
	parse_fails(NULL, "f(a=g(1))");               /* nested call */
	parse_fails(NULL, "f(a=\"x)");                /* unterminated string */
	parse_fails(NULL, "<tool_call>{\"name\": 1}</tool_call>");
	parse_fails(NULL, "{\"name\": \"f\", \"arguments\": [1]}");
	/* nesting past the cap fails cleanly */
	char deep[400];
	size_t n = 0;
	n += (size_t)snprintf(deep, sizeof deep, "f(a=");
	for (int i = 0; i < 100; i++)
		deep[n++] = '[';
	for (int i = 0; i < 100; i++)
		deep[n++] = ']';
	deep[n++] = ')';
	deep[n] = 0;
	parse_fails(NULL, deep);
	/* an oversized answer is refused, not scanned */
	size_t big = ((size_t)8 << 20) + 10;
	char *s = malloc(big + 1);
	assert_non_null(s);
	memset(s, 'a', big);
	s[big] = 0;
	ev_toolcalls *l = NULL;
	assert_int_equal(ev_toolcalls_parse(&l, NULL, s), EV_E_LIMIT);
	assert_null(l);
	free(s);
}

/* Random bytes around call-like fragments must never crash or leak. */
static void toolcall_parse_survives_random_input(void **st)
{
	(void)st;
	static const char *const frags[] = {"f(", ")", "[", "]", "{", "}", "\"", "'", ",", "=", "a", "1", "-", ".", "e",
	                                    "<tool_call>", "</tool_call>", "```", "\n", "\\", "True", ":", "name",
	                                    "\"name\"", "arguments", "(", "x.y"};
	ev_rng r;
	ev_rng_seed(&r, 7);
	char buf[256];
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = 0;
		int parts = (int)ev_rng_below(&r, 24);
		for (int k = 0; k < parts; k++) {
			const char *f = frags[ev_rng_below(&r, sizeof frags / sizeof frags[0])];
			size_t fl = strlen(f);
			if (n + fl >= sizeof buf)
				break;
			memcpy(buf + n, f, fl);
			n += fl;
		}
		buf[n] = 0;
		ev_toolcalls *l = NULL;
		int rc = ev_toolcalls_parse(&l, NULL, buf);
		assert_true(rc == 0 || rc == EV_E_PARSE);
		assert_true(rc == 0 ? l != NULL : l == NULL);
		ev_toolcalls_free(l);
		rc = ev_toolcalls_parse(&l, buf, NULL);
		ev_toolcalls_free(l);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(toolcall_parse_reads_openai_tool_calls),
		cmocka_unit_test(toolcall_parse_reads_python_calls),
		cmocka_unit_test(toolcall_parse_reads_json_objects_in_text),
		cmocka_unit_test(toolcall_parse_rejects_garbage),
		cmocka_unit_test(toolcall_parse_survives_random_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
