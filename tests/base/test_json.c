/* base/json.c: the cJSON helpers. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void json_helpers_name_source_and_key(void **st)
{
	(void)st;
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, "{\"a\":1,", 7, "x.json:4"), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "x.json:4"));
	assert_int_equal(ev_json_parse(&j, "{\"a\":1,\"s\":\"t\"}", 15, "y"), 0);
	const char *s = NULL;
	assert_int_equal(ev_json_str_req(&s, j, "s", "y:1"), 0);
	assert_string_equal(s, "t");
	assert_int_equal(ev_json_str_req(&s, j, "a", "y:1"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "y:1: a: expected a string"));
	assert_true(ev_json_num(j, "a", 0) == 1.0);
	assert_true(ev_json_num(j, "missing", 7) == 7.0);
	assert_string_equal(ev_json_str(j, "missing", "d"), "d");
	assert_true(ev_json_bool(j, "missing", true));
	cJSON_Delete(j);
	/* One document: whitespace may follow it, nothing else. */
	assert_int_equal(ev_json_parse(&j, "[1] \r\n", 6, "z"), 0);
	cJSON_Delete(j);
	assert_int_equal(ev_json_parse(&j, "{\"a\":1} {\"b\":2}", 15, "z"), EV_E_PARSE);
	assert_null(j);
	assert_non_null(strstr(ev_error_msg(), "z: malformed JSON near byte 8"));
}

static void json_nesting_past_the_limit_is_named_as_such(void **st)
{
	(void)st;
	size_t n = 3000;
	char *deep = malloc(2 * n + 1);
	memset(deep, '[', n);
	memset(deep + n, ']', n);
	deep[2 * n] = 0;
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, deep, 2 * n, "deep.json"), EV_E_LIMIT);
	assert_non_null(strstr(ev_error_msg(), "deep.json: nested deeper than"));
	/* brackets inside strings do not count */
	assert_int_equal(ev_json_parse(&j, "{\"a\":\"[[[[\",}", 14, "s.json"), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "malformed JSON"));
	free(deep);
}

static void json_strings_are_escaped(void **st)
{
	(void)st;
	ev_buf b = EV_BUF_INIT(1000);
	ev_json_buf_str(&b, "q\"\\\n\x01");
	assert_string_equal(b.data, "\"q\\\"\\\\\\n\\u0001\"");
	ev_buf_reset(&b);
	ev_json_buf_strn(&b, "a\0b", 3);
	assert_string_equal(b.data, "\"a\\u0000b\"");
	ev_buf_free(&b);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "n", 2);
	char *p = ev_json_print(o);
	assert_string_equal(p, "{\"n\":2}");
	free(p);
	cJSON_Delete(o);
}

static void json_nul_escapes_are_found_refused_or_replaced(void **st)
{
	(void)st;
	const char *t = "{\"a\":\"x\\u0000y\"}";
	assert_int_equal(ev_json_find_nul(t, strlen(t)), 7);
	/* An escaped backslash before u0000 is text; so is u0000 outside a string escape. */
	const char *ok = "{\"a\":\"x\\\\u0000\",\"u0000\":1}";
	assert_int_equal(ev_json_find_nul(ok, strlen(ok)), strlen(ok));
	const char *key = "{\"\\u0000\":1}";
	assert_int_equal(ev_json_find_nul(key, strlen(key)), 2);
	/* Cut before the escape is whole: not found. */
	assert_int_equal(ev_json_find_nul(t, 10), 10);

	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, t, strlen(t), "body.json"), EV_E_PARSE);
	assert_null(j);
	assert_non_null(strstr(ev_error_msg(), "body.json: a string holds \\u0000 (NUL) at byte 7"));
	assert_int_equal(ev_json_parse(&j, ok, strlen(ok), "ok.json"), 0);
	assert_string_equal(ev_json_str(j, "a", ""), "x\\u0000");
	cJSON_Delete(j);

	char two[] = "[\"\\u0000\",\"a\\u0000b\"]";
	assert_int_equal(ev_json_replace_nul(two, strlen(two)), 2);
	assert_string_equal(two, "[\"\\ufffd\",\"a\\ufffdb\"]");
	assert_int_equal(ev_json_parse(&j, two, strlen(two), "two"), 0);
	assert_string_equal(cJSON_GetArrayItem(j, 1)->valuestring, "a\xEF\xBF\xBD" "b");
	cJSON_Delete(j);
}

/* Numbers keep the form they were written in: 1.0 stays a float (Python's
 * json reads it as one; BFCL types depend on it), 1 an integer; strings
 * with a digit or a dot inside do not shift the count. */
static void json_numbers_print_back_in_their_form(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
		{"[1.0,2,3.5,-0.0,1e3,2E-2,12345678901234]", "[1.0,2,3.5,-0.0,1000.0,0.02,12345678901234]"},
		{"{\"a.1\":[\"2.0\",7],\"b\":{\"c\":[5.0,{\"d\":6}]}}", "{\"a.1\":[\"2.0\",7],\"b\":{\"c\":[5.0,{\"d\":6}]}}"},
		{"[\"x\\\"1.0\",1.0,true,null]", "[\"x\\\"1.0\",1.0,true,null]"},
		{"0.1", "0.1"},
		{"[1.5e300,-7]", "[1.5e+300,-7]"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cJSON *j = NULL;
		assert_int_equal(ev_json_parse(&j, cases[i][0], strlen(cases[i][0]), "t"), 0);
		char *p = ev_json_print(j);
		assert_string_equal(p, cases[i][1]);
		/* a copy keeps the form too */
		cJSON *d = cJSON_Duplicate(j, true);
		char *q = ev_json_print(d);
		assert_string_equal(q, cases[i][1]);
		free(p), free(q);
		cJSON_Delete(j), cJSON_Delete(d);
	}
	/* numbers made in code print as cJSON would */
	cJSON *a = cJSON_CreateArray();
	cJSON_AddItemToArray(a, cJSON_CreateNumber(2));
	cJSON_AddItemToArray(a, cJSON_CreateNumber(0.25));
	char *p = ev_json_print(a);
	assert_string_equal(p, "[2,0.25]");
	free(p);
	cJSON_Delete(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_helpers_name_source_and_key),
		cmocka_unit_test(json_strings_are_escaped),
		cmocka_unit_test(json_numbers_print_back_in_their_form),
		cmocka_unit_test(json_nesting_past_the_limit_is_named_as_such),
		cmocka_unit_test(json_nul_escapes_are_found_refused_or_replaced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
