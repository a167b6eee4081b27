/*
 * Tool calls parsed back out of generated text: one call, several calls,
 * content around them, malformed JSON reported per call (never a crash or
 * a failed parse), for both families.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static eng_chat_parsed *parse(eng_chat_family f, const char *text)
{
	eng_chat_parsed *p = NULL;
	if (eng_chat_parse_tool_calls(&p, f, text, strlen(text)) != 0)
		fail_msg("parse: %s", ev_error_msg());
	assert_non_null(p);
	assert_non_null(p->content);
	return p;
}

static void expect_call(const eng_chat_parsed *p, size_t i, const char *name, const char *args)
{
	assert_true(i < p->n_calls);
	assert_null(p->calls[i].error);
	assert_string_equal(p->calls[i].name, name);
	assert_string_equal(p->calls[i].arguments, args);
}

static void chatml_parses_one_call_and_content(void **state)
{
	eng_chat_parsed *p = parse(ENG_CHAT_CHATML, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
						     "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>");
	assert_int_equal(p->n_calls, 1);
	assert_int_equal(p->n_errors, 0);
	expect_call(p, 0, "get_weather", "{\"city\":\"Paris\",\"days\":2}");
	assert_string_equal(p->content, "Let me check.");
	eng_chat_parsed_free(p);
	/* plain text: no calls, content untouched but trimmed */
	p = parse(ENG_CHAT_CHATML, "  The answer is 4.\n");
	assert_int_equal(p->n_calls, 0);
	assert_string_equal(p->content, "The answer is 4.");
	eng_chat_parsed_free(p);
	p = parse(ENG_CHAT_CHATML, "");
	assert_int_equal(p->n_calls, 0);
	assert_string_equal(p->content, "");
	eng_chat_parsed_free(p);
	eng_chat_parsed_free(NULL);
}

static void chatml_parses_several_calls(void **state)
{
	eng_chat_parsed *p = parse(ENG_CHAT_CHATML,
				   "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
				   "<tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call>\n"
				   "<tool_call>\n{\"name\": \"c\"}\n</tool_call> done");
	assert_int_equal(p->n_calls, 3);
	expect_call(p, 0, "a", "{}");
	expect_call(p, 1, "b", "{\"x\":[1,2]}"); /* arguments given as a JSON string */
	expect_call(p, 2, "c", "{}");            /* no arguments */
	assert_string_equal(p->content, "done");
	eng_chat_parsed_free(p);
	/* an unterminated last call (generation stopped at the tag) */
	p = parse(ENG_CHAT_CHATML, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": 1}}\n");
	assert_int_equal(p->n_calls, 1);
	expect_call(p, 0, "a", "{\"q\":1}");
	eng_chat_parsed_free(p);
}

static void chatml_malformed_call_is_an_error_for_that_call(void **state)
{
	eng_chat_parsed *p = parse(ENG_CHAT_CHATML,
				   "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": }</tool_call>"
				   "<tool_call>{\"name\": \"b\", \"arguments\": {\"y\": 1}}</tool_call>"
				   "<tool_call>{\"arguments\": {}}</tool_call>"
				   "<tool_call>{\"name\": \"d\", \"arguments\": [1]}</tool_call>"
				   "<tool_call>{\"name\": \"e\", \"arguments\": \"{bad\"}</tool_call>"
				   "<tool_call>{\"name\": \"f\"} trailing</tool_call>"
				   "<tool_call></tool_call>");
	assert_int_equal(p->n_calls, 7);
	assert_int_equal(p->n_errors, 6);
	assert_null(p->calls[0].name);
	assert_null(p->calls[0].arguments);
	assert_non_null(strstr(p->calls[0].error, "malformed JSON"));
	expect_call(p, 1, "b", "{\"y\":1}");
	for (size_t i = 2; i < 7; i++) {
		assert_non_null(p->calls[i].error);
		assert_null(p->calls[i].name);
	}
	eng_chat_parsed_free(p);
}

static void llama3_parses_json_calls(void **state)
{
	eng_chat_parsed *p =
		parse(ENG_CHAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
	assert_int_equal(p->n_calls, 1);
	expect_call(p, 0, "get_weather", "{\"city\":\"Paris\"}");
	assert_string_equal(p->content, "");
	eng_chat_parsed_free(p);
	/* python tag, several calls separated by ';' and newlines */
	p = parse(ENG_CHAT_LLAMA3, "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; "
				   "{\"name\": \"b\", \"arguments\": {}}\n{\"name\": \"c\", \"parameters\": {}}");
	assert_int_equal(p->n_calls, 3);
	expect_call(p, 0, "a", "{\"x\":1}");
	expect_call(p, 1, "b", "{}");
	expect_call(p, 2, "c", "{}");
	eng_chat_parsed_free(p);
	/* prose, or a JSON answer without a name, is content */
	p = parse(ENG_CHAT_LLAMA3, "It is sunny in Paris.");
	assert_int_equal(p->n_calls, 0);
	assert_string_equal(p->content, "It is sunny in Paris.");
	eng_chat_parsed_free(p);
	p = parse(ENG_CHAT_LLAMA3, "{\"answer\": 4}");
	assert_int_equal(p->n_calls, 0);
	assert_string_equal(p->content, "{\"answer\": 4}");
	eng_chat_parsed_free(p);
}

static void llama3_malformed_call_is_an_error_for_that_call(void **state)
{
	eng_chat_parsed *p = parse(ENG_CHAT_LLAMA3, "{\"name\": \"a\", \"parameters\": {\"x\": 1}}; "
						    "{\"name\": \"b\", \"parameters\": {\"y\": ");
	assert_int_equal(p->n_calls, 2);
	assert_int_equal(p->n_errors, 1);
	expect_call(p, 0, "a", "{\"x\":1}");
	assert_non_null(strstr(p->calls[1].error, "malformed JSON"));
	eng_chat_parsed_free(p);
	/* broken braces that never named a function stay content */
	p = parse(ENG_CHAT_LLAMA3, "{not json at all");
	assert_int_equal(p->n_calls, 0);
	assert_string_equal(p->content, "{not json at all");
	eng_chat_parsed_free(p);
}

static void parse_survives_hostile_text(void **state)
{
	/* deep nesting, stray tags, NUL-free garbage: parsed, never a crash */
	ev_buf b = EV_BUF_INIT(1 << 20);
	ev_buf_puts(&b, "<tool_call>");
	for (int i = 0; i < 5000; i++)
		ev_buf_puts(&b, "{\"a\":[");
	ev_buf_puts(&b, "</tool_call></tool_call><tool_call><tool_call>");
	eng_chat_parsed *p = parse(ENG_CHAT_CHATML, b.data);
	assert_true(p->n_calls >= 1);
	assert_int_equal(p->n_errors, p->n_calls);
	eng_chat_parsed_free(p);
	ev_buf_reset(&b);
	for (int i = 0; i < 5000; i++)
		ev_buf_puts(&b, "{\"name\":[");
	p = parse(ENG_CHAT_LLAMA3, b.data);
	assert_int_equal(p->n_errors, p->n_calls);
	eng_chat_parsed_free(p);
	ev_buf_free(&b);
	eng_chat_parsed *q = NULL;
	assert_int_equal(eng_chat_parse_tool_calls(&q, ENG_CHAT_UNKNOWN, "x", 1), EV_E_INVALID);
	assert_null(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chatml_parses_one_call_and_content),
		cmocka_unit_test(chatml_parses_several_calls),
		cmocka_unit_test(chatml_malformed_call_is_an_error_for_that_call),
		cmocka_unit_test(llama3_parses_json_calls),
		cmocka_unit_test(llama3_malformed_call_is_an_error_for_that_call),
		cmocka_unit_test(parse_survives_hostile_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
