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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_helpers_name_source_and_key),
		cmocka_unit_test(json_strings_are_escaped),
		cmocka_unit_test(json_nesting_past_the_limit_is_named_as_such),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
