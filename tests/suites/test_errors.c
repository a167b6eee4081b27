/* Bad suites are refused with the right status and a message that names
 * file:line and the field: malformed lines, missing and duplicate ids,
 * invalid UTF-8, mistyped generation settings, attachments escaping the
 * suite folder, caps on samples and file size. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "suites/suites.h"

/* Loads a folder suite made of the given files (suite_json may be NULL)
 * and expects `code` with every needle in the message. Returns the folder. */
static char *expect_fail_opt(const char *suite_json, const char *samples, const ev_suite_options *opt, int code,
                             const char *needle, const char *needle2)
{
	char *dir = tu_tmpdir("bad");
	if (suite_json)
		free(tu_write(dir, "suite.json", suite_json));
	free(tu_write(dir, "samples.jsonl", samples));
	ev_suite *s = (ev_suite *)1;
	int rc = ev_suite_load(&s, dir, opt);
	if (rc != code)
		fail_msg("expected %s, got %s: %s", ev_status_name(code), ev_status_name(rc), ev_error_msg());
	assert_null(s);
	if (needle && !strstr(ev_error_msg(), needle))
		fail_msg("message '%s' lacks '%s'", ev_error_msg(), needle);
	if (needle2 && !strstr(ev_error_msg(), needle2))
		fail_msg("message '%s' lacks '%s'", ev_error_msg(), needle2);
	return dir;
}

static void expect_fail(const char *suite_json, const char *samples, int code, const char *needle,
                        const char *needle2)
{
	free(expect_fail_opt(suite_json, samples, NULL, code, needle, needle2));
}

#define OK_LINE "{\"id\":\"ok\",\"input\":\"hi\"}\n"

static void malformed_line_names_file_and_line(void **state)
{
	(void)state;
	char *dir = expect_fail_opt(NULL, OK_LINE "{\"id\":\"b\",\"input\":\"x\"}\n{\"id\":\"c\", input}\n", NULL,
	                            EV_E_PARSE, "samples.jsonl:3: malformed JSON", NULL);
	/* The message names the folder the user gave. */
	assert_non_null(strstr(ev_error_msg(), dir));
	free(dir);
	expect_fail(NULL, OK_LINE "{\"id\":\"b\",\"input\":\"x\"} trailing\n", EV_E_PARSE, "samples.jsonl:2: malformed JSON",
	            NULL);
	expect_fail(NULL, "[1,2]\n", EV_E_PARSE, "samples.jsonl:1: expected a JSON object", NULL);
	expect_fail(NULL, OK_LINE "{\"id\":\"b\",\"input\":\"caf\xC3\"}\n", EV_E_PARSE, "samples.jsonl:2: invalid UTF-8",
	            NULL);
	expect_fail(NULL, "\n  \n", EV_E_INVALID, "no samples", NULL);
	/* A NUL would silently cut an id or input where cJSON decodes it. */
	expect_fail(NULL, OK_LINE "{\"id\":\"b\\u0000x\",\"input\":\"x\"}\n", EV_E_PARSE,
	            "samples.jsonl:2: a string holds \\u0000 (NUL) at byte 8", NULL);
	expect_fail("{\"name\":\"s\\u0000t\"}", OK_LINE, EV_E_PARSE, "suite.json: a string holds \\u0000 (NUL)", NULL);
}

static void missing_or_mistyped_id_is_refused(void **state)
{
	(void)state;
	expect_fail(NULL, OK_LINE "{\"input\":\"no id\"}\n", EV_E_INVALID, "samples.jsonl:2: id: missing", NULL);
	expect_fail(NULL, "{\"id\":true,\"input\":\"x\"}\n", EV_E_INVALID, "samples.jsonl:1: id: expected a string or number",
	            NULL);
	expect_fail(NULL, "{\"id\":\"\",\"input\":\"x\"}\n", EV_E_INVALID, "id: empty", NULL);
	/* Read as doubles, these two distinct ids would be one. */
	expect_fail(NULL, "{\"id\":9007199254740993,\"input\":\"a\"}\n{\"id\":9007199254740992,\"input\":\"b\"}\n",
	            EV_E_INVALID, "samples.jsonl:1: id: a numeric id must be a whole number below 2^53", NULL);
	expect_fail(NULL, "{\"id\":1.5,\"input\":\"a\"}\n", EV_E_INVALID, "samples.jsonl:1: id: a numeric id must be", NULL);
	expect_fail(NULL, "{\"id\":1e300,\"input\":\"a\"}\n", EV_E_INVALID, "samples.jsonl:1: id: a numeric id must be", NULL);
}

static void duplicate_id_names_both_lines(void **state)
{
	(void)state;
	expect_fail(NULL, "{\"id\":\"x\",\"input\":\"a\"}\n" OK_LINE "\n{\"id\":\"x\",\"input\":\"b\"}\n", EV_E_INVALID,
	            "samples.jsonl:4: id: duplicate id \"x\"", "first on line 1");
	/* 1 and "1" are the same id once ids are text. */
	expect_fail(NULL, "{\"id\":1,\"input\":\"a\"}\n{\"id\":\"1\",\"input\":\"b\"}\n", EV_E_INVALID,
	            "samples.jsonl:2: id: duplicate id \"1\"", "first on line 1");
}

static void sample_fields_are_validated(void **state)
{
	(void)state;
	expect_fail(NULL, "{\"id\":\"a\"}\n", EV_E_INVALID, "samples.jsonl:1: input: missing", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"input\":5}\n", EV_E_INVALID, "input: expected a string", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"messages\":[]}\n", EV_E_INVALID, "messages: expected a non-empty list", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}\n", EV_E_INVALID,
	            "samples.jsonl:1: messages[0].role", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"audio\"}]}]}\n",
	            EV_E_INVALID, "messages[0].content[0].type: unknown part type 'audio'", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"messages\":[{\"role\":\"user\"}]}\n", EV_E_INVALID, "messages[0].content: missing",
	            NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}\n", EV_E_INVALID,
	            "tool_call_id: missing", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"input\":\"x\",\"tools\":{}}\n", EV_E_INVALID, "tools: expected a list", NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"input\":\"x\",\"metadata\":[1]}\n", EV_E_INVALID, "metadata: expected an object",
	            NULL);
	expect_fail(NULL, "{\"id\":\"a\",\"input\":\"x\",\"checker\":3}\n", EV_E_INVALID, "checker: expected an object",
	            NULL);
	expect_fail(NULL,
	            "{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
	            "\"image_url\":{\"url\":\"file:///etc/passwd\"}}]}]}\n",
	            EV_E_UNSAFE, "image_url.url", NULL);
}

static void bad_suite_json_fields_are_refused(void **state)
{
	(void)state;
	static const struct {
		const char *json, *needle;
	} cases[] = {
		{"{\"generation\":{\"max_tokens\":\"64\"}}", "suite.json: generation.max_tokens: expected a positive integer"},
		{"{\"generation\":{\"max_tokens\":0}}", "suite.json: generation.max_tokens: expected a positive integer"},
		{"{\"generation\":{\"max_tokens\":1.5}}", "suite.json: generation.max_tokens: expected a positive integer"},
		{"{\"generation\":{\"temperature\":\"hot\"}}", "suite.json: generation.temperature"},
		{"{\"generation\":{\"top_p\":2}}", "suite.json: generation.top_p"},
		{"{\"generation\":{\"seed\":0.5}}", "suite.json: generation.seed: expected an integer"},
		{"{\"generation\":{\"stop\":5}}", "suite.json: generation.stop"},
		{"{\"generation\":{\"stop\":[\"a\",7]}}", "suite.json: generation.stop"},
		{"{\"generation\":{\"epochs\":0}}", "suite.json: generation.epochs"},
		{"{\"generation\":[]}", "suite.json: generation: expected an object"},
		{"{\"name\":5}", "suite.json: name: expected a string"},
		{"{\"name\":\"\"}", "suite.json: name"},
		{"{\"checker\":[1]}", "suite.json: checker: expected an object"},
		{"{\"prompt_template\":\"Q: {input\"}", "suite.json: prompt_template"},
		{"{\"description\":1}", "suite.json: description: expected a string"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_fail(cases[i].json, OK_LINE, EV_E_INVALID, cases[i].needle, NULL);
	expect_fail("{\"name\":\"x\",}", OK_LINE, EV_E_PARSE, "suite.json: malformed JSON", NULL);
	expect_fail("[]", OK_LINE, EV_E_PARSE, "suite.json: expected a JSON object", NULL);
	expect_fail("{\"name\":\"x\"} {}", OK_LINE, EV_E_PARSE, "suite.json: malformed JSON", NULL);
	/* The template meets a sample without the field it needs. */
	expect_fail("{\"prompt_template\":\"{input} / {topic}\"}", OK_LINE, EV_E_INVALID,
	            "samples.jsonl:1: prompt_template: unknown field {topic}", NULL);
}

static void attachment_escaping_the_root_is_refused(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("escape");
	char *suite = tu_path(dir, "suite");
	mkdir(suite, 0755);
	free(tu_write(dir, "outside.png", "secret"));
	free(tu_write(suite, "inside.png", "fine"));
	char *target = tu_path(dir, "outside.png");
	char *link = tu_path(suite, "link.png");
	assert_int_equal(symlink(target, link), 0);

	static const struct {
		const char *line;
		int code;
		const char *needle;
	} cases[] = {
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"inside.png\",\"../outside.png\"]}",
		 EV_E_UNSAFE, "samples.jsonl:1: attachments[1]: '../outside.png' leaves the suite folder"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"a/../../outside.png\"]}", EV_E_UNSAFE, "leaves the suite"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"/etc/passwd\"]}", EV_E_UNSAFE, "absolute path"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"link.png\"]}", EV_E_UNSAFE, "resolves outside"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"missing.png\"]}", EV_E_NOTFOUND, "missing.png"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\".\"]}", EV_E_INVALID, "not a regular file"},
		{"{\"id\":\"a\",\"input\":\"x\",\"attachments\":\"inside.png\"}", EV_E_INVALID, "attachments: expected a list"},
		{"{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"path\":\"../outside.png\"}]}]}",
		 EV_E_UNSAFE, "messages[0].content[0].path"},
		{"{\"id\":\"a\",\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}],\"attachments\":[\"inside.png\"]}",
		 EV_E_INVALID, "no user message"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		free(tu_write(suite, "samples.jsonl", cases[i].line));
		ev_suite *s = NULL;
		int rc = ev_suite_load(&s, suite, NULL);
		if (rc != cases[i].code || !strstr(ev_error_msg(), cases[i].needle))
			fail_msg("case %zu: got %s: %s", i, ev_status_name(rc), ev_error_msg());
		assert_null(s);
	}
	/* The inside file alone is accepted, as an image part. */
	free(tu_write(suite, "samples.jsonl", "{\"id\":\"a\",\"input\":\"x\",\"attachments\":[\"inside.png\"]}"));
	ev_suite *s = NULL;
	assert_int_equal(ev_suite_load(&s, suite, NULL), 0);
	assert_int_equal(s->samples[0].messages[0].parts[1].kind, EV_PART_IMAGE);
	ev_suite_free(s);
	free(target);
	free(link);
	free(suite);
	free(dir);
}

static void caps_on_samples_and_file_size_hold(void **state)
{
	(void)state;
	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.max_samples = 2;
	free(expect_fail_opt(NULL, OK_LINE "{\"id\":2,\"input\":\"x\"}\n{\"id\":3,\"input\":\"x\"}\n", &opt, EV_E_LIMIT,
	                     "samples.jsonl:3: more than 2 samples", NULL));
	opt = (ev_suite_options)EV_SUITE_OPTIONS_INIT;
	opt.max_file_bytes = 40;
	free(expect_fail_opt(NULL, OK_LINE OK_LINE, &opt, EV_E_LIMIT, "samples.jsonl: larger than the limit of 40 bytes",
	                     NULL));
	free(expect_fail_opt("{\"name\":\"a rather long suite name to pass forty bytes\"}", OK_LINE, &opt, EV_E_LIMIT,
	                     "suite.json: larger than the limit", NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(malformed_line_names_file_and_line),
		cmocka_unit_test(missing_or_mistyped_id_is_refused),
		cmocka_unit_test(duplicate_id_names_both_lines),
		cmocka_unit_test(sample_fields_are_validated),
		cmocka_unit_test(bad_suite_json_fields_are_refused),
		cmocka_unit_test(attachment_escaping_the_root_is_refused),
		cmocka_unit_test(caps_on_samples_and_file_size_hold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
