/* Prompt templates: {field} substitution, literal braces, the errors that
 * name the field; and ev_message_text. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "suites/suites.h"

static cJSON *fields(const char *json)
{
	cJSON *j = cJSON_Parse(json);
	assert_non_null(j);
	return j;
}

static void expect(const char *tmpl, const char *json, const char *want)
{
	cJSON *f = fields(json);
	char *out = NULL;
	int rc = ev_template_render(&out, tmpl, f, "samples.jsonl:1");
	if (rc)
		fail_msg("%s: %s", tmpl, ev_error_msg());
	assert_string_equal(out, want);
	free(out);
	cJSON_Delete(f);
}

static void expect_error(const char *tmpl, const char *json, const char *needle)
{
	cJSON *f = fields(json);
	char *out = (char *)"sentinel";
	int rc = ev_template_render(&out, tmpl, f, "samples.jsonl:7");
	assert_int_equal(rc, EV_E_INVALID);
	assert_null(out);
	if (!strstr(ev_error_msg(), needle) || !strstr(ev_error_msg(), "samples.jsonl:7"))
		fail_msg("message '%s' lacks '%s'", ev_error_msg(), needle);
	cJSON_Delete(f);
}

static void template_substitutes_line_fields(void **state)
{
	(void)state;
	expect("Q: {input}\nA:", "{\"input\":\"2+2?\"}", "Q: 2+2?\nA:");
	expect("{a}-{b}-{a}", "{\"a\":\"x\",\"b\":\"y\"}", "x-y-x");
	expect("no fields at all", "{}", "no fields at all");
	expect("", "{}", "");
}

static void template_formats_numbers_and_booleans(void **state)
{
	(void)state;
	expect("{n} {f} {t} {big}", "{\"n\":42,\"f\":0.5,\"t\":true,\"big\":-3}", "42 0.5 true -3");
}

static void template_falls_back_to_metadata_and_walks_dots(void **state)
{
	(void)state;
	expect("{topic}/{metadata.level}", "{\"metadata\":{\"topic\":\"math\",\"level\":3}}", "math/3");
	/* A line field wins over a metadata field of the same name. */
	expect("{topic}", "{\"topic\":\"line\",\"metadata\":{\"topic\":\"meta\"}}", "line");
}

static void template_doubled_braces_are_literal(void **state)
{
	(void)state;
	expect("{{\"answer\": \"{input}\"}}", "{\"input\":\"x\"}", "{\"answer\": \"x\"}");
	expect("{{{input}}}", "{\"input\":\"y\"}", "{y}");
}

static void template_unknown_field_is_an_error_naming_it(void **state)
{
	(void)state;
	expect_error("Q: {question}", "{\"input\":\"x\"}", "unknown field {question}");
	expect_error("{metadata.nope}", "{\"metadata\":{}}", "unknown field {metadata.nope}");
}

static void template_rejects_bad_syntax_and_values(void **state)
{
	(void)state;
	expect_error("a } b", "{}", "lone '}'");
	expect_error("a {input", "{\"input\":\"x\"}", "not closed");
	expect_error("a {} b", "{}", "empty");
	expect_error("{in put}", "{}", "character other than");
	expect_error("{choices}", "{\"choices\":[\"a\",\"b\"]}", "a list");
	expect_error("{x}", "{\"x\":null}", "null");
}

static void message_text_joins_text_parts(void **state)
{
	(void)state;
	ev_part parts[3] = {
		{.kind = EV_PART_TEXT, .text = (char *)"Look:"},
		{.kind = EV_PART_IMAGE, .path = (char *)"/x/cat.png", .mime = (char *)"image/png"},
		{.kind = EV_PART_TEXT, .text = (char *)"What is it?"},
	};
	ev_message m = {(char *)"user", parts, 3, NULL, NULL, NULL};
	char *t = ev_message_text(&m);
	assert_string_equal(t, "Look:\nWhat is it?");
	free(t);
	ev_message empty = {(char *)"assistant", NULL, 0, (char *)"[]", NULL, NULL};
	t = ev_message_text(&empty);
	assert_string_equal(t, "");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(template_substitutes_line_fields),
		cmocka_unit_test(template_formats_numbers_and_booleans),
		cmocka_unit_test(template_falls_back_to_metadata_and_walks_dots),
		cmocka_unit_test(template_doubled_braces_are_literal),
		cmocka_unit_test(template_unknown_field_is_an_error_naming_it),
		cmocka_unit_test(template_rejects_bad_syntax_and_values),
		cmocka_unit_test(message_text_joins_text_parts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
