/*
 * Chat templates: the prompt text of both families, with and without
 * tools, pinned as golden strings; bad messages and tool JSON are refused
 * with the index at fault; the family is recognised from configs.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char tools[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather of a city\","
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";
#define TOOL_LINE                                                                                          \
	"{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather of a "  \
	"city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, " \
	"\"required\": [\"city\"]}}}"

static const char call_json[] = "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
				 "\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]";

static const eng_chat_msg convo[] = {
	{"system", "You are terse.", NULL, NULL, NULL},
	{"user", "Weather in Paris?", NULL, NULL, NULL},
	{"assistant", "", call_json, NULL, NULL},
	{"tool", "{\"temp\": 21}", NULL, "c1", "get_weather"},
	{"assistant", "21 degrees.", NULL, NULL, NULL},
};

static void expect_render(eng_chat_family f, const eng_chat_msg *m, size_t n, const char *tl, bool gen,
			  const char *want)
{
	char *out = NULL;
	size_t len = 0;
	if (eng_chat_render(&out, &len, f, m, n, tl, gen) != 0)
		fail_msg("render: %s", ev_error_msg());
	assert_int_equal(len, strlen(out));
	if (strcmp(out, want) != 0)
		fail_msg("want:\n%s\n---- got:\n%s", want, out);
	free(out);
}

static void chatml_renders_plain_conversation(void **state)
{
	const eng_chat_msg m[] = {{"system", "Be brief.", NULL, NULL, NULL},
				  {"user", "Hi", NULL, NULL, NULL},
				  {"assistant", "Hello!", NULL, NULL, NULL},
				  {"user", "2+2?", NULL, NULL, NULL}};
	expect_render(ENG_CHAT_CHATML, m, 4, NULL, true,
		      "<|im_start|>system\nBe brief.<|im_end|>\n"
		      "<|im_start|>user\nHi<|im_end|>\n"
		      "<|im_start|>assistant\nHello!<|im_end|>\n"
		      "<|im_start|>user\n2+2?<|im_end|>\n"
		      "<|im_start|>assistant\n");
	expect_render(ENG_CHAT_CHATML, m + 1, 1, NULL, false, "<|im_start|>user\nHi<|im_end|>\n");
	expect_render(ENG_CHAT_CHATML, m, 0, NULL, true, "<|im_start|>assistant\n");
	/* an empty tools list is no tools */
	expect_render(ENG_CHAT_CHATML, m + 1, 1, "[]", false, "<|im_start|>user\nHi<|im_end|>\n");
}

static void chatml_renders_tools_calls_and_results(void **state)
{
	expect_render(ENG_CHAT_CHATML, convo, 5, tools, true,
		      "<|im_start|>system\nYou are terse.\n\n# Tools\n\n"
		      "You can call the functions described below to help answer the user.\n\n"
		      "Their signatures are listed between <tools></tools> tags:\n<tools>\n" TOOL_LINE "\n</tools>\n\n"
		      "To call a function, answer with a JSON object holding its name and arguments between "
		      "<tool_call></tool_call> tags, one tag per call:\n"
		      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
		      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
		      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
		      "</tool_call><|im_end|>\n"
		      "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
		      "<|im_start|>assistant\n21 degrees.<|im_end|>\n"
		      "<|im_start|>assistant\n");
	/* no system message: a default one carries the tools; content before
	 * calls; two calls; consecutive tool results share one user turn */
	const eng_chat_msg m[] = {
		{"user", "Paris and Rome?", NULL, NULL, NULL},
		{"assistant", "Checking.",
		 "[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}},"
		 "{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\",\"days\":[1,2.5]}}}]",
		 NULL, NULL},
		{"tool", "sunny", NULL, "a", NULL},
		{"tool", "rainy", NULL, "b", NULL},
	};
	char *out = NULL;
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, m, 4, tools, false), 0);
	assert_true(ev_str_starts(out, "<|im_start|>system\nYou are a helpful assistant.\n\n# Tools"));
	const char *tail = strstr(out, "<|im_start|>user\nParis and Rome?");
	assert_non_null(tail);
	assert_string_equal(tail,
			    "<|im_start|>user\nParis and Rome?<|im_end|>\n"
			    "<|im_start|>assistant\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
			    "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
			    "{\"city\": \"Rome\", \"days\": [1, 2.5]}}\n</tool_call><|im_end|>\n"
			    "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrainy\n"
			    "</tool_response><|im_end|>\n");
	free(out);
}

static void llama3_renders_plain_conversation(void **state)
{
	const eng_chat_msg m[] = {{"system", "Be brief.", NULL, NULL, NULL},
				  {"user", "Hi", NULL, NULL, NULL},
				  {"assistant", "Hello!", NULL, NULL, NULL}};
	expect_render(ENG_CHAT_LLAMA3, m, 3, NULL, true,
		      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
		      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\n");
	expect_render(ENG_CHAT_LLAMA3, m + 1, 1, NULL, false,
		      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

static void llama3_renders_tools_calls_and_results(void **state)
{
	expect_render(ENG_CHAT_LLAMA3, convo, 5, tools, true,
		      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n\n"
		      "You are terse.<|eot_id|>"
		      "<|start_header_id|>user<|end_header_id|>\n\n"
		      "You have access to the functions below. To call one, answer with only a JSON object of the form "
		      "{\"name\": function name, \"parameters\": object of argument names and values}, using literal "
		      "values, no variables.\n\n" TOOL_LINE "\n\nWeather in Paris?<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\n"
		      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
		      "<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 21}<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\n21 degrees.<|eot_id|>"
		      "<|start_header_id|>assistant<|end_header_id|>\n\n");
	/* without a user message the tools go into the system message */
	expect_render(ENG_CHAT_LLAMA3, convo, 1, tools, false,
		      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n\n"
		      "You are terse.\n\nYou have access to the functions below. To call one, answer with only a JSON "
		      "object of the form {\"name\": function name, \"parameters\": object of argument names and "
		      "values}, using literal values, no variables.\n\n" TOOL_LINE "<|eot_id|>");
}

static void render_refuses_bad_messages_and_tools(void **state)
{
	char *out = NULL;
	const eng_chat_msg badrole[] = {{"user", "a", NULL, NULL, NULL}, {"wizard", "b", NULL, NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, badrole, 2, NULL, true), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "messages[1].role"));
	const eng_chat_msg nullrole[] = {{NULL, "a", NULL, NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_LLAMA3, nullrole, 1, NULL, true), EV_E_INVALID);
	const eng_chat_msg badcalls[] = {{"user", "a", NULL, NULL, NULL}, {"assistant", "", "[{\"id\": ", NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, badcalls, 2, NULL, true), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "messages[1].tool_calls"));
	const eng_chat_msg noname[] = {{"assistant", "", "[{\"function\": {\"arguments\": {}}}]", NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_LLAMA3, noname, 1, NULL, true), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "messages[0].tool_calls[0]"));
	const eng_chat_msg ok[] = {{"user", "a", NULL, NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, ok, 1, "{\"name\": 1}", true), EV_E_INVALID);
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, ok, 1, "[{\"type\": \"function\"}]", true),
			 EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "tools[0]"));
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, ok, 1, "[oops", true), EV_E_INVALID);
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_UNKNOWN, ok, 1, NULL, true), EV_E_INVALID);
	assert_null(out);
	/* arguments that are not JSON are kept as a JSON string, not dropped */
	const eng_chat_msg rawargs[] = {{"assistant", "", "[{\"name\": \"f\", \"arguments\": \"not json\"}]", NULL, NULL}};
	assert_int_equal(eng_chat_render(&out, NULL, ENG_CHAT_CHATML, rawargs, 1, NULL, false), 0);
	assert_non_null(strstr(out, "{\"name\": \"f\", \"arguments\": \"not json\"}"));
	free(out);
}

static void family_is_recognised_from_config(void **state)
{
	assert_int_equal(eng_chat_family_from_name("chatml"), ENG_CHAT_CHATML);
	assert_int_equal(eng_chat_family_from_name("llama3"), ENG_CHAT_LLAMA3);
	assert_int_equal(eng_chat_family_from_name("vicuna"), ENG_CHAT_UNKNOWN);
	assert_string_equal(eng_chat_family_name(ENG_CHAT_LLAMA3), "llama3");
	assert_null(eng_chat_family_name(ENG_CHAT_UNKNOWN));
	assert_int_equal(eng_chat_family_from_template("{{'<|im_start|>' + m.role}}"), ENG_CHAT_CHATML);
	assert_int_equal(eng_chat_family_from_template("<|start_header_id|>{{r}}<|end_header_id|>{{c}}<|eot_id|>"),
			 ENG_CHAT_LLAMA3);
	assert_int_equal(eng_chat_family_from_template("[INST] {{c}} [/INST]"), ENG_CHAT_UNKNOWN);

	char *dir = tu_tmpdir("chatfam");
	eng_chat_family f = ENG_CHAT_UNKNOWN;
	char *p = tu_write(dir, "tokenizer_config.json", "{\"chat_template\": \"{{ '<|im_start|>' }}\"}");
	assert_int_equal(eng_chat_family_detect(&f, p), 0);
	assert_int_equal(f, ENG_CHAT_CHATML);
	assert_int_equal(eng_chat_family_detect(&f, dir), 0);
	assert_int_equal(f, ENG_CHAT_CHATML);
	free(p);
	/* a list of named templates: "default" wins */
	p = tu_write(dir, "tokenizer_config.json",
		     "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"<|im_start|>\"},"
		     " {\"name\": \"default\", \"template\": \"<|start_header_id|><|eot_id|>\"}]}");
	assert_int_equal(eng_chat_family_detect(&f, dir), 0);
	assert_int_equal(f, ENG_CHAT_LLAMA3);
	free(p);
	/* no template in the config: chat_template.jinja beside it */
	p = tu_write(dir, "tokenizer_config.json", "{\"eos_token\": \"x\"}");
	free(p);
	p = tu_write(dir, "chat_template.jinja", "{{ '<|im_start|>' + role }}");
	assert_int_equal(eng_chat_family_detect(&f, dir), 0);
	assert_int_equal(f, ENG_CHAT_CHATML);
	free(p);
	/* the JSON text itself */
	assert_int_equal(eng_chat_family_detect(&f, " {\"chat_template\": \"<|start_header_id|><|eot_id|>\"}"), 0);
	assert_int_equal(f, ENG_CHAT_LLAMA3);
	/* unknown template: status 0, family unknown */
	assert_int_equal(eng_chat_family_detect(&f, "{\"chat_template\": \"[INST]\"}"), 0);
	assert_int_equal(f, ENG_CHAT_UNKNOWN);
	/* broken or missing files are errors naming the file */
	p = tu_write(dir, "tokenizer_config.json", "{\"chat_template\": ");
	assert_int_equal(eng_chat_family_detect(&f, dir), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "tokenizer_config.json"));
	free(p);
	char *empty = tu_tmpdir("chatfam-empty");
	assert_int_equal(eng_chat_family_detect(&f, empty), EV_E_NOTFOUND);
	free(empty);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chatml_renders_plain_conversation),
		cmocka_unit_test(chatml_renders_tools_calls_and_results),
		cmocka_unit_test(llama3_renders_plain_conversation),
		cmocka_unit_test(llama3_renders_tools_calls_and_results),
		cmocka_unit_test(render_refuses_bad_messages_and_tools),
		cmocka_unit_test(family_is_recognised_from_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
