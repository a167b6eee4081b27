/* The chat-completions body built from a request, and the request hash. */
#include "runners/runners.h"
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

static ev_part text_part(const char *t)
{
	ev_part p;
	memset(&p, 0, sizeof p);
	p.kind = EV_PART_TEXT;
	p.text = (char *)t;
	return p;
}

static cJSON *build(const ev_request *req, bool stream)
{
	char *json = NULL;
	assert_int_equal(ev_request_to_json(&json, req, stream), 0);
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, json, strlen(json), "request"), 0);
	free(json);
	return j;
}

static void text_only_messages_have_string_content_and_unset_gen_is_absent(void **state)
{
	ev_part sys = text_part("be brief"), u1 = text_part("line one"), u2 = text_part("line two");
	ev_part up[2] = {u1, u2};
	ev_message msgs[2] = {{(char *)"system", &sys, 1, NULL, NULL, NULL}, {(char *)"user", up, 2, NULL, NULL, NULL}};
	ev_request req = {"m1", msgs, 2, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	cJSON *j = build(&req, false);
	assert_string_equal(ev_json_str(j, "model", ""), "m1");
	const cJSON *m = cJSON_GetObjectItem(j, "messages");
	assert_int_equal(cJSON_GetArraySize(m), 2);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(m, 0), "role", ""), "system");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(m, 0), "content", ""), "be brief");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(m, 1), "content", ""), "line one\nline two");
	const char *absent[] = {"max_tokens", "temperature", "top_p", "seed", "stop", "tools", "stream"};
	for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
		assert_null(cJSON_GetObjectItem(j, absent[i]));
	cJSON_Delete(j);
}

static void gen_settings_tools_and_stream_are_sent(void **state)
{
	ev_part u = text_part("hi");
	ev_message msg = {(char *)"user", &u, 1, NULL, NULL, NULL};
	char *stop[] = {(char *)"END", (char *)"\n\n"};
	ev_gen g = EV_GEN_INIT;
	g.max_tokens = 64;
	g.temperature = 0.0;
	g.top_p = 0.95;
	g.has_seed = true;
	g.seed = 9007199254740993LL; /* 2^53 + 1: lost if printed as a double */
	g.stop = stop;
	g.n_stop = 2;
	ev_request req = {"m", &msg, 1, "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", g, NULL, NULL, NULL, 0, 0};
	char *json = NULL;
	assert_int_equal(ev_request_to_json(&json, &req, true), 0);
	assert_non_null(strstr(json, "\"seed\":9007199254740993"));
	cJSON *j = NULL;
	assert_int_equal(ev_json_parse(&j, json, strlen(json), "request"), 0);
	assert_int_equal((int)ev_json_num(j, "max_tokens", -1), 64);
	assert_true(ev_json_num(j, "temperature", -1) == 0.0);
	assert_true(ev_json_num(j, "top_p", -1) == 0.95);
	assert_true(ev_json_bool(j, "stream", false));
	const cJSON *st = cJSON_GetObjectItem(j, "stop");
	assert_int_equal(cJSON_GetArraySize(st), 2);
	assert_string_equal(cJSON_GetArrayItem(st, 1)->valuestring, "\n\n");
	const cJSON *tools = cJSON_GetObjectItem(j, "tools");
	assert_true(cJSON_IsArray(tools));
	assert_string_equal(ev_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(tools, 0), "function"), "name", ""), "f");
	cJSON_Delete(j);
	free(json);
}

static void tool_turns_keep_calls_ids_and_null_content(void **state)
{
	ev_part u = text_part("weather?"), t = text_part("{\"temp\":3}");
	ev_message msgs[3] = {
		{(char *)"user", &u, 1, NULL, NULL, NULL},
		{(char *)"assistant", NULL, 0,
		 (char *)"[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":\"{}\"}}]", NULL, NULL},
		{(char *)"tool", &t, 1, NULL, (char *)"c1", (char *)"w"},
	};
	ev_request req = {"m", msgs, 3, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	cJSON *j = build(&req, false);
	const cJSON *m = cJSON_GetObjectItem(j, "messages");
	const cJSON *a = cJSON_GetArrayItem(m, 1), *tm = cJSON_GetArrayItem(m, 2);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(a, "content")));
	const cJSON *tc = cJSON_GetObjectItem(a, "tool_calls");
	assert_true(cJSON_IsArray(tc));
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(tc, 0), "id", ""), "c1");
	assert_string_equal(ev_json_str(tm, "tool_call_id", ""), "c1");
	assert_string_equal(ev_json_str(tm, "name", ""), "w");
	assert_string_equal(ev_json_str(tm, "content", ""), "{\"temp\":3}");
	cJSON_Delete(j);
}

static void image_parts_become_image_url_parts(void **state)
{
	char *dir = tu_tmpdir("runners-img");
	char *png = tu_write(dir, "a.png", "PNGDATA");
	ev_part parts[3];
	memset(parts, 0, sizeof parts);
	parts[0] = text_part("what is this?");
	parts[1].kind = EV_PART_IMAGE;
	parts[1].url = (char *)"https://example.invalid/cat.jpg";
	parts[2].kind = EV_PART_IMAGE;
	parts[2].path = png;
	ev_message msg = {(char *)"user", parts, 3, NULL, NULL, NULL};
	ev_request req = {"m", &msg, 1, NULL, EV_GEN_INIT, dir, NULL, NULL, 0, 0};
	cJSON *j = build(&req, false);
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "messages"), 0), "content");
	assert_int_equal(cJSON_GetArraySize(c), 3);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(c, 0), "type", ""), "text");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(c, 0), "text", ""), "what is this?");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(c, 1), "type", ""), "image_url");
	assert_string_equal(ev_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(c, 1), "image_url"), "url", ""),
	                    "https://example.invalid/cat.jpg");
	/* "PNGDATA" in base64 */
	assert_string_equal(ev_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(c, 2), "image_url"), "url", ""),
	                    "data:image/png;base64,UE5HREFUQQ==");
	cJSON_Delete(j);
	free(png);
	free(dir);
}

static void bad_tools_and_video_parts_are_refused(void **state)
{
	ev_part u = text_part("hi");
	ev_message msg = {(char *)"user", &u, 1, NULL, NULL, NULL};
	ev_request req = {"m", &msg, 1, "{\"not\":\"an array\"}", EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	char *json = NULL;
	assert_int_equal(ev_request_to_json(&json, &req, false), EV_E_INVALID);
	assert_null(json);
	assert_non_null(strstr(ev_error_msg(), "tools"));
	ev_part v;
	memset(&v, 0, sizeof v);
	v.kind = EV_PART_VIDEO;
	v.url = (char *)"file.mp4";
	ev_message vm = {(char *)"user", &v, 1, NULL, NULL, NULL};
	ev_request vr = {"m", &vm, 1, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	assert_int_equal(ev_request_to_json(&json, &vr, false), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "video"));
	ev_message bad_calls = {(char *)"assistant", NULL, 0, (char *)"[broken", NULL, NULL};
	ev_request br = {"m", &bad_calls, 1, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	assert_int_equal(ev_request_to_json(&json, &br, false), EV_E_PARSE);
}

static void request_hash_depends_on_body_and_epoch_unless_greedy(void **state)
{
	char a[EV_SHA256_HEX], b[EV_SHA256_HEX], c[EV_SHA256_HEX], d[EV_SHA256_HEX], e[EV_SHA256_HEX];
	ev_request_hash(a, "{\"model\":\"m\"}", -1);
	ev_request_hash(b, "{\"model\":\"m\"}", -1);
	ev_request_hash(c, "{\"model\":\"m\"}", 0);
	ev_request_hash(d, "{\"model\":\"m\"}", 1);
	ev_request_hash(e, "{\"model\":\"n\"}", -1);
	assert_int_equal(strlen(a), 64);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(c, d);
	assert_string_not_equal(a, e);
}

/* A video part goes to a server as its sampled frames, each an inline
 * image after its time: 4 frames at 2 fps sampled at 1 a second are
 * frames 0 and 2, at 0.0 and 1.0 seconds. */
static void a_video_goes_as_timed_frames(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("reqvid");
	static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	for (int i = 0; i < 4; i++) {
		char name[16], body[16];
		snprintf(name, sizeof name, "%d.png", i);
		memcpy(body, png_sig, 8);
		snprintf(body + 8, 8, "f%d", i);
		free(tu_write(dir, name, body));
	}
	ev_part parts[2] = {text_part("what happens?")};
	memset(&parts[1], 0, sizeof parts[1]);
	parts[1].kind = EV_PART_VIDEO;
	parts[1].path = dir;
	parts[1].fps = 2;
	ev_message msg = {(char *)"user", parts, 2, NULL, NULL, NULL};
	ev_request req = {"m", &msg, 1, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	cJSON *j = build(&req, false);
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "messages"), 0), "content");
	assert_int_equal(cJSON_GetArraySize(c), 5);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(c, 1), "text", ""), "[0.0 seconds]");
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(c, 3), "text", ""), "[1.0 seconds]");
	const char *url = ev_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(c, 4), "image_url"), "url", "");
	assert_true(ev_str_starts(url, "data:image/png;base64,"));
	unsigned char *raw = NULL;
	size_t n = 0;
	assert_int_equal(ev_base64_decode(&raw, &n, url + 22, strlen(url) - 22, 1 << 20, "frame"), 0);
	assert_string_equal((char *)raw + 8, "f2");
	free(raw);
	cJSON_Delete(j);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_video_goes_as_timed_frames),
		cmocka_unit_test(text_only_messages_have_string_content_and_unset_gen_is_absent),
		cmocka_unit_test(gen_settings_tools_and_stream_are_sent),
		cmocka_unit_test(tool_turns_keep_calls_ids_and_null_content),
		cmocka_unit_test(image_parts_become_image_url_parts),
		cmocka_unit_test(bad_tools_and_video_parts_are_refused),
		cmocka_unit_test(request_hash_depends_on_body_and_epoch_unless_greedy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
