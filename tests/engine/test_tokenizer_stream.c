/*
 * The streaming detokenizer: UTF-8 sequences split across tokens are held
 * back until complete, bytes that can never be valid come out as U+FFFD,
 * and for valid text the streamed output equals eng_detokenize.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_tokenizer_fixture.h"

#include <stdlib.h>
#include <string.h>

/* "😀" is F0 9F 98 80; "é" is C3 A9. The merges make tokens that end
 * and start in the middle of those characters. */
static const char *const merges[] = {" ", "\xF0", "\x9F", "\x98", "\x80", "!", "\xA9", "x", "a", "\xC3"};

static eng_tokenizer *tok_new(void)
{
	tt_spec s = {merges, 5, NULL, 0, true, false,
		     "[{\"id\": 400, \"content\": \"<|end|>\", \"special\": true}]",
		     /* no regex: the whole text is one word, so merges may cross characters */
		     "{\"type\": \"ByteLevel\", \"use_regex\": false}", NULL, NULL, NULL};
	return tt_load(&s);
}

/* Pushes ids one at a time; records what each push emitted. */
static char *stream(const eng_tokenizer *tok, const int32_t *ids, size_t n, bool skip, char **each)
{
	eng_detok_stream *st = NULL;
	assert_int_equal(eng_detok_stream_new(&st, tok, skip), 0);
	ev_buf all = EV_BUF_INIT(1 << 20);
	for (size_t i = 0; i < n; i++) {
		size_t before = all.len;
		assert_int_equal(eng_detok_stream_push(st, ids[i], &all), 0);
		if (each)
			each[i] = ev_strndup(all.data ? all.data + before : "", all.len - before);
	}
	assert_int_equal(eng_detok_stream_flush(st, &all), 0);
	eng_detok_stream_free(st);
	return ev_buf_detach(&all, NULL);
}

static void stream_holds_emoji_split_across_tokens(void **state)
{
	eng_tokenizer *tok = tok_new();
	const char *text = " \xF0\x9F\x98\x80!";
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(tok, text, strlen(text), false, &ids, &n), 0);
	/* " \xF0" | "\x9F\x98" | "\x80!" */
	assert_int_equal(n, 3);
	char *each[3];
	char *all = stream(tok, ids, n, false, each);
	assert_string_equal(each[0], " ");             /* the lead byte is held */
	assert_string_equal(each[1], "");              /* still incomplete */
	assert_string_equal(each[2], "\xF0\x9F\x98\x80!"); /* complete: out it comes */
	assert_string_equal(all, text);
	for (int i = 0; i < 3; i++)
		free(each[i]);
	free(all);
	free(ids);
	eng_tokenizer_free(tok);
}

static void stream_emits_byte_tokens_once_complete(void **state)
{
	eng_tokenizer *tok = tok_new();
	/* four single-byte tokens: F0 9F 98 80 (ids are the byte values) */
	int32_t ids[] = {0xF0, 0x9F, 0x98, 0x80, 'a', 0xC3, 0xA9};
	char *each[7];
	char *all = stream(tok, ids, 7, false, each);
	assert_string_equal(each[0], "");
	assert_string_equal(each[1], "");
	assert_string_equal(each[2], "");
	assert_string_equal(each[3], "\xF0\x9F\x98\x80");
	assert_string_equal(each[4], "a");
	assert_string_equal(each[5], "");
	assert_string_equal(each[6], "\xC3\xA9");
	assert_string_equal(all, "\xF0\x9F\x98\x80" "a\xC3\xA9");
	for (int i = 0; i < 7; i++)
		free(each[i]);
	free(all);
	eng_tokenizer_free(tok);
}

static void stream_replaces_bytes_that_cannot_be_utf8(void **state)
{
	eng_tokenizer *tok = tok_new();
	/* a stray continuation byte, a lead byte interrupted by ASCII, an
	 * invalid byte, and an incomplete sequence left at the end */
	int32_t ids[] = {0x80, 'a', 0xE2, 0x82, 'x', 0xFF, 'a', 0xF0, 0x9F};
	char *all = stream(tok, ids, 9, false, NULL);
	assert_true(ev_utf8_valid(all, strlen(all)));
	assert_string_equal(all, "\xEF\xBF\xBD" "a" "\xEF\xBF\xBD\xEF\xBF\xBD" "x" "\xEF\xBF\xBD" "a" "\xEF\xBF\xBD");
	free(all);
	/* an overlong form and a surrogate are not held, they are refused */
	int32_t bad[] = {0xC0, 0xAF, 0xED, 0xA0, 0x80};
	all = stream(tok, bad, 5, false, NULL);
	assert_true(ev_utf8_valid(all, strlen(all)));
	assert_null(strstr(all, "\xC0"));
	free(all);
	eng_tokenizer_free(tok);
}

static void stream_equals_detokenize_for_valid_text(void **state)
{
	eng_tokenizer *tok = tok_new();
	const char *text = "a \xF0\x9F\x98\x80\xF0\x9F\x98\x80 x\xC3\xA9! \xE4\xB8\xAD<|end|>\xE6\x96\x87";
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(tok, text, strlen(text), true, &ids, &n), 0);
	char *want = NULL, *got = NULL;
	size_t wl = 0;
	assert_int_equal(eng_detokenize(tok, ids, n, false, &want, &wl), 0);
	assert_string_equal(want, text);
	got = stream(tok, ids, n, false, NULL);
	assert_string_equal(got, want);
	free(got);
	free(want);
	/* skip_special: the special token drops out, the rest is the same */
	assert_int_equal(eng_detokenize(tok, ids, n, true, &want, &wl), 0);
	got = stream(tok, ids, n, true, NULL);
	assert_string_equal(got, want);
	assert_null(strstr(got, "<|end|>"));
	free(got);
	free(want);
	free(ids);
	/* an id outside the vocab is an error, not a crash */
	eng_detok_stream *st = NULL;
	ev_buf b = EV_BUF_INIT(64);
	assert_int_equal(eng_detok_stream_new(&st, tok, false), 0);
	assert_int_equal(eng_detok_stream_push(st, 99999, &b), EV_E_INVALID);
	assert_int_equal(eng_detok_stream_push(st, 300, &b), EV_E_INVALID); /* a hole */
	eng_detok_stream_free(st);
	eng_detok_stream_free(NULL);
	ev_buf_free(&b);
	eng_tokenizer_free(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stream_holds_emoji_split_across_tokens),
		cmocka_unit_test(stream_emits_byte_tokens_once_complete),
		cmocka_unit_test(stream_replaces_bytes_that_cannot_be_utf8),
		cmocka_unit_test(stream_equals_detokenize_for_valid_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
