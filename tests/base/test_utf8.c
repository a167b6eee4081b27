/* base/utf8.c: the one UTF-8 decoder, encoder and validator. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void utf8_validation_rejects_bad_sequences(void **st)
{
	(void)st;
	assert_true(ev_utf8_valid("h\xc3\xa9llo \xf0\x9f\x98\x80", 11));
	assert_false(ev_utf8_valid("\xc3", 1));
	assert_false(ev_utf8_valid("\xed\xa0\x80", 3)); /* surrogate */
	assert_false(ev_utf8_valid("\xc0\xaf", 2));     /* overlong */
	assert_false(ev_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
	assert_true(ev_utf8_valid("", 0));
}

static void utf8_round_trips_every_scalar_value(void **st)
{
	(void)st;
	for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
		if (cp >= 0xD800 && cp <= 0xDFFF)
			continue;
		char b[4];
		size_t n = ev_utf8_encode(b, cp);
		uint32_t back = 0;
		assert_int_equal(ev_utf8_next(b, n, &back), n);
		assert_int_equal(back, cp);
		/* A truncated sequence is not one. */
		if (n > 1)
			assert_int_equal(ev_utf8_next(b, n - 1, &back), 0);
	}
}

static void lenient_decode_gives_replacement_and_sanitize_repairs(void **st)
{
	(void)st;
	uint32_t cp;
	assert_int_equal(ev_utf8_decode("\xff" "a", 2, &cp), 1);
	assert_int_equal(cp, 0xFFFD);
	assert_int_equal(ev_utf8_decode("", 0, &cp), 0);
	size_t n;
	char *s = ev_utf8_sanitize("a\xff" "b", 3, &n);
	assert_string_equal(s, "a\xef\xbf\xbd" "b");
	assert_int_equal(n, 5);
	free(s);
	/* Clipping never cuts a code point in half. */
	s = ev_utf8_clip("\xc3\xa9\xc3\xa9\xc3\xa9", 6, 3);
	assert_string_equal(s, "\xc3\xa9...");
	free(s);
	s = ev_utf8_clip("abc", 3, 3);
	assert_string_equal(s, "abc");
	free(s);
}

static void term_clean_neutralises_controls_and_keeps_text(void **st)
{
	(void)st;
	/* OSC title set, CSI clear, bare CR, backspace, DEL, 8-bit CSI (U+009B). */
	char s[] = "a\x1b]0;owned\x07" "b\x1b[2Jc\rd\be\x7f f\xc2\x9b" "31m\tg\nh";
	assert_int_equal(ev_term_clean(s), 7);
	assert_string_equal(s, "a?]0;owned?b?[2Jc?d?e? f?31m\tg\nh");
	/* Printable UTF-8 around the C1 range stays: U+00A0, U+00E9, U+0100. */
	char u[] = "\xc2\xa0\xc3\xa9\xc4\x80\xe2\x80\x9b";
	assert_int_equal(ev_term_clean(u), 0);
	assert_string_equal(u, "\xc2\xa0\xc3\xa9\xc4\x80\xe2\x80\x9b");
	/* A lone C2 at the end is left alone, and NULL is fine. */
	char e[] = "x\xc2";
	assert_int_equal(ev_term_clean(e), 0);
	assert_int_equal(ev_term_clean(NULL), 0);

	cJSON *j = cJSON_Parse("{\"t\":\"x\\u001b[1m\",\"l\":[\"\\u009b\",{\"k\\u0007\":\"ok\"}],\"n\":1}");
	assert_non_null(j);
	assert_int_equal(ev_json_term_clean(j), 3);
	char *p = cJSON_PrintUnformatted(j);
	assert_string_equal(p, "{\"t\":\"x?[1m\",\"l\":[\"?\",{\"k?\":\"ok\"}],\"n\":1}");
	free(p);
	cJSON_Delete(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(utf8_validation_rejects_bad_sequences),
		cmocka_unit_test(utf8_round_trips_every_scalar_value),
		cmocka_unit_test(lenient_decode_gives_replacement_and_sanitize_repairs),
		cmocka_unit_test(term_clean_neutralises_controls_and_keeps_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
