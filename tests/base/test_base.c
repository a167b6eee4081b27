/* evald/base: errors, buffers, arenas, JSON helpers, hashing, rng. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void error_message_is_per_thread_and_wrapped(void **st)
{
	(void)st;
	assert_int_equal(ev_error_set(EV_E_PARSE, "samples.jsonl:%d: id: missing", 3), EV_E_PARSE);
	assert_string_equal(ev_error_msg(), "samples.jsonl:3: id: missing");
	ev_error_wrap(EV_E_INVALID, "loading %s", "s1");
	assert_string_equal(ev_error_msg(), "loading s1: samples.jsonl:3: id: missing");
	assert_int_equal(ev_error_code(), EV_E_INVALID);
	ev_error_clear();
	assert_string_equal(ev_error_msg(), "");
}

static void buffer_refuses_growth_past_its_cap(void **st)
{
	(void)st;
	ev_buf b = EV_BUF_INIT(10);
	assert_int_equal(ev_buf_puts(&b, "hello"), 0);
	assert_int_equal(ev_buf_printf(&b, "%d", 1234), 0);
	assert_int_equal(ev_buf_puts(&b, "xy"), EV_E_LIMIT);
	assert_string_equal(b.data, "hello1234"); /* unchanged by the failed append */
	assert_int_equal(ev_buf_putc(&b, '!'), 0);
	assert_int_equal(ev_buf_putc(&b, '!'), EV_E_LIMIT);
	size_t n;
	char *s = ev_buf_detach(&b, &n);
	assert_int_equal(n, 10);
	assert_null(b.data);
	free(s);
}

static void arena_caps_total_allocation(void **st)
{
	(void)st;
	ev_arena *a;
	assert_int_equal(ev_arena_new(&a, 200000), 0);
	char *s = ev_arena_strdup(a, "abc");
	assert_string_equal(s, "abc");
	assert_non_null(ev_arena_alloc(a, 100000));
	assert_null(ev_arena_alloc(a, 150000));
	assert_int_equal(ev_error_code(), EV_E_LIMIT);
	ev_arena_free(a);
	ev_arena_free(NULL);
}

static void sha256_matches_known_vectors(void **st)
{
	(void)st;
	char hex[EV_SHA256_HEX];
	ev_sha256_hex(hex, "abc", 3);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ev_sha256_ctx *c;
	assert_int_equal(ev_sha256_begin(&c), 0);
	ev_sha256_update(c, "a", 1);
	ev_sha256_update(c, "bc", 2);
	char hex2[EV_SHA256_HEX];
	ev_sha256_end_hex(c, hex2);
	assert_string_equal(hex, hex2);
}

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
	cJSON_Delete(j);
	ev_buf b = EV_BUF_INIT(1000);
	ev_json_buf_str(&b, "q\"\\\n\x01");
	assert_string_equal(b.data, "\"q\\\"\\\\\\n\\u0001\"");
	ev_buf_free(&b);
}

static void rng_is_deterministic_and_bounded(void **st)
{
	(void)st;
	ev_rng a, b;
	ev_rng_seed(&a, 42);
	ev_rng_seed(&b, 42);
	for (int i = 0; i < 100; i++)
		assert_true(ev_rng_next(&a) == ev_rng_next(&b));
	for (int i = 0; i < 1000; i++) {
		assert_true(ev_rng_below(&a, 7) < 7);
		double u = ev_rng_uniform(&a);
		assert_true(u >= 0 && u < 1);
	}
}

static void utf8_validation_rejects_bad_sequences(void **st)
{
	(void)st;
	assert_true(ev_utf8_valid("h\xc3\xa9llo \xf0\x9f\x98\x80", 11));
	assert_false(ev_utf8_valid("\xc3", 1));
	assert_false(ev_utf8_valid("\xed\xa0\x80", 3));  /* surrogate */
	assert_false(ev_utf8_valid("\xc0\xaf", 2));      /* overlong */
}

static void file_read_respects_cap(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base");
	char *p = tu_write(d, "f.txt", "0123456789");
	char *data;
	size_t n;
	assert_int_equal(ev_file_read(&data, &n, p, 100), 0);
	assert_int_equal(n, 10);
	free(data);
	assert_int_equal(ev_file_read(&data, &n, p, 5), EV_E_LIMIT);
	assert_int_equal(ev_file_read(&data, &n, "/nonexistent/x", 5), EV_E_NOTFOUND);
	free(p);
	free(d);
}

static void numbers_parse_whole_strings_only(void **st)
{
	(void)st;
	int64_t i;
	double f;
	assert_true(ev_parse_i64("-42", &i) && i == -42);
	assert_false(ev_parse_i64("42x", &i));
	assert_true(ev_parse_f64("1e-3", &f) && f == 1e-3);
	assert_false(ev_parse_f64("nan", &f));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(error_message_is_per_thread_and_wrapped),
		cmocka_unit_test(buffer_refuses_growth_past_its_cap),
		cmocka_unit_test(arena_caps_total_allocation),
		cmocka_unit_test(sha256_matches_known_vectors),
		cmocka_unit_test(json_helpers_name_source_and_key),
		cmocka_unit_test(rng_is_deterministic_and_bounded),
		cmocka_unit_test(utf8_validation_rejects_bad_sequences),
		cmocka_unit_test(file_read_respects_cap),
		cmocka_unit_test(numbers_parse_whole_strings_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
