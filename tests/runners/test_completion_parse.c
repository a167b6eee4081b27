/* Parsing chat-completions response bodies into completions. */
#include "runners/runners.h"
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

static int parse(ev_completion *c, const char *body)
{
	memset(c, 0, sizeof *c);
	return ev_completion_from_json(c, body, strlen(body));
}

static void text_finish_reason_and_usage_are_read(void **state)
{
	ev_completion c;
	const char *body = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"42\"},"
	                   "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1}}";
	assert_int_equal(parse(&c, body), 0);
	assert_string_equal(c.text, "42");
	assert_string_equal(c.finish_reason, "stop");
	assert_null(c.tool_calls_json);
	assert_int_equal(c.prompt_tokens, 7);
	assert_int_equal(c.completion_tokens, 1);
	assert_string_equal(c.raw_json, body);
	ev_completion_clear(&c);
	assert_null(c.text);
}

static void null_content_with_tool_calls(void **state)
{
	ev_completion c;
	assert_int_equal(parse(&c, "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
	                           "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
	                           "\"finish_reason\":\"tool_calls\"}]}"),
	                 0);
	assert_string_equal(c.text, "");
	assert_string_equal(c.finish_reason, "tool_calls");
	assert_non_null(c.tool_calls_json);
	cJSON *tc = NULL;
	assert_int_equal(ev_json_parse(&tc, c.tool_calls_json, strlen(c.tool_calls_json), "tc"), 0);
	assert_string_equal(ev_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(tc, 0), "function"), "name", ""), "f");
	cJSON_Delete(tc);
	assert_int_equal(c.prompt_tokens, 0); /* no usage */
	ev_completion_clear(&c);
}

static void content_parts_and_reasoning_are_joined(void **state)
{
	ev_completion c;
	assert_int_equal(parse(&c, "{\"choices\":[{\"message\":{\"reasoning_content\":\"hmm\",\"content\":[{\"type\":"
	                           "\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},\"finish_reason\":\"length\"}]}"),
	                 0);
	assert_string_equal(c.text, "<think>hmm</think>ab");
	assert_string_equal(c.finish_reason, "length");
	ev_completion_clear(&c);
}

static void bad_bodies_are_errors(void **state)
{
	ev_completion c;
	assert_int_equal(parse(&c, "{\"choices\":[{\"mess"), EV_E_PARSE);
	assert_int_equal(parse(&c, "[]"), EV_E_PARSE);
	assert_int_equal(parse(&c, "{\"choices\":[]}"), EV_E_PARSE);
	assert_int_equal(parse(&c, "{\"choices\":[{\"message\":\"x\"}]}"), EV_E_PARSE);
	assert_int_equal(parse(&c, "{\"choices\":[{\"message\":{\"content\":5}}]}"), EV_E_PARSE);
	assert_int_equal(parse(&c, "{\"choices\":[{\"message\":{\"content\":\"x\",\"tool_calls\":{}}}]}"), EV_E_PARSE);
	assert_int_equal(parse(&c, "{\"error\":{\"message\":\"overloaded\"}}"), EV_E_BACKEND);
	assert_non_null(strstr(ev_error_msg(), "overloaded"));
	assert_null(c.text);
	assert_null(c.raw_json);
}

/* A NUL in the answer must not cut it short: the rest is scored too. */
static void nul_in_an_answer_is_replaced_not_cut(void **state)
{
	(void)state;
	ev_completion c;
	const char *body = "{\"choices\":[{\"message\":{\"content\":\"4\\u00002 and \\\\u0000 stays\"},"
	                   "\"finish_reason\":\"stop\"}]}";
	assert_int_equal(parse(&c, body), 0);
	/* The escape became U+FFFD; an escaped backslash before u0000 is text. */
	assert_string_equal(c.text, "4\xEF\xBF\xBD" "2 and \\u0000 stays");
	ev_completion_clear(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_finish_reason_and_usage_are_read),
		cmocka_unit_test(null_content_with_tool_calls),
		cmocka_unit_test(content_parts_and_reasoning_are_joined),
		cmocka_unit_test(bad_bodies_are_errors),
		cmocka_unit_test(nul_in_an_answer_is_replaced_not_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
