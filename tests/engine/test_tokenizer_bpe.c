/*
 * Byte-level BPE on small hand-built tokenizer.json files: merges written
 * as strings or as pairs, bad merges, added and special tokens, the
 * ignore_merges shortcut, Split behaviors, merge order, limits and bytes
 * that are not UTF-8.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer_int.h"
#include "test_tokenizer_fixture.h"

#include <stdlib.h>
#include <string.h>

/* Encodes and compares with the token texts given ("he|llo"). */
static void expect(const eng_tokenizer *tok, const char *text, bool special, const char *want)
{
	int32_t *ids = NULL;
	size_t n = 0;
	if (eng_tokenize(tok, text, strlen(text), special, &ids, &n) != 0)
		fail_msg("tokenize \"%s\": %s", text, ev_error_msg());
	ev_buf got = EV_BUF_INIT(1 << 16);
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *p = eng_token_bytes(tok, ids[i], &len);
		assert_non_null(p);
		if (i)
			ev_buf_putc(&got, '|');
		ev_buf_append(&got, p, len);
	}
	if (strcmp(got.data ? got.data : "", want) != 0)
		fail_msg("\"%s\": want [%s], got [%s]", text, want, got.data ? got.data : "");
	char *back = NULL;
	size_t blen;
	assert_int_equal(eng_detokenize(tok, ids, n, false, &back, &blen), 0);
	assert_int_equal(blen, strlen(text));
	assert_memory_equal(back, text, blen);
	free(back);
	ev_buf_free(&got);
	free(ids);
}

static const char *const hello_merges[] = {"h", "e", "l", "l", "he", "ll", "hell", "o", " ", "w", " w", "o",
					   " wo", "r", "a", "a"};

static void merges_as_strings_and_pairs_encode_alike(void **state)
{
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *a = tt_load(&s);
	s.pairs = true;
	eng_tokenizer *b = tt_load(&s);
	const char *texts[] = {"hello world", "hell help", "aaaa aaa", "who", ""};
	for (size_t t = 0; t < 5; t++) {
		int32_t *x = NULL, *y = NULL;
		size_t nx, ny;
		assert_int_equal(eng_tokenize(a, texts[t], strlen(texts[t]), false, &x, &nx), 0);
		assert_int_equal(eng_tokenize(b, texts[t], strlen(texts[t]), false, &y, &ny), 0);
		assert_non_null(x);
		assert_int_equal(nx, ny);
		assert_memory_equal(x, y, nx * sizeof *x);
		free(x);
		free(y);
	}
	expect(a, "hello world", false, "hello| wor|l|d");
	expect(b, "hello world", false, "hello| wor|l|d");
	eng_tokenizer_free(a);
	eng_tokenizer_free(b);
}

static void merges_follow_rank_then_leftmost(void **state)
{
	/* "a a" merges leftmost first: aaa -> aa|a, aaaa -> aa|aa */
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	expect(t, "aaa", false, "aa|a");
	expect(t, "aaaa", false, "aa|aa");
	/* "hell"+"o" needs "he"+"ll" first (rank order) */
	expect(t, "ohello", false, "o|hello");
	expect(t, "lhe", false, "l|he");
	eng_tokenizer_free(t);
}

static void bad_merge_is_an_error_naming_its_index(void **state)
{
	static const struct {
		const char *merges;
		const char *needle;
	} cases[] = {
		{"[\"h e\", 42]", "model.merges[1]"},
		{"[\"h e\", \"l\"]", "model.merges[1]"},
		{"[\"h e\", \"l l l\"]", "model.merges[1]"},
		{"[\"h e\", [\"l\"]]", "model.merges[1]"},
		{"[\"h e\", [\"l\", 3]]", "model.merges[1]"},
		{"[\"h e\", \"l \\u4e2d\\u6587\"]", "model.merges[1]: unknown token"},
		{"[\"h e\", \"x y\"]", "model.merges[1]: merged token"},
		{"{\"h\": \"e\"}", "model.merges: expected an array"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tt_spec s = {hello_merges, 1, NULL, 0, false, false, NULL, NULL, cases[i].merges, NULL, NULL};
		char *j = tt_build(&s);
		eng_tokenizer *tok = NULL;
		int rc = eng_tokenizer_load_json(&tok, j, strlen(j), "bad.json");
		assert_int_equal(rc, EV_E_INVALID);
		assert_null(tok);
		if (!strstr(ev_error_msg(), cases[i].needle) || !strstr(ev_error_msg(), "bad.json"))
			fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, ev_error_msg(), cases[i].needle);
		free(j);
	}
}

static void malformed_tokenizer_files_fail_cleanly(void **state)
{
	static const char *const bad[] = {
		"", "[]", "{\"model\": 3}", "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
		"{\"model\": {\"vocab\": {\"a\": -1}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
		"{\"model\": {\"vocab\": {\"a\": 1.5}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
		"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Metaspace\", "
		"\"replacement\": \"_\"}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [], \"byte_fallback\": true}, \"pre_tokenizer\": "
		"{\"type\": \"ByteLevel\"}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [], \"unk_token\": \"<unk>\"}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
		"\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}}, {\"type\": \"ByteLevel\"}]}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
		"\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Odd\"}, "
		"{\"type\": \"ByteLevel\"}]}}",
		"{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 5}], "
		"\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		eng_tokenizer *tok = NULL;
		int rc = eng_tokenizer_load_json(&tok, bad[i], strlen(bad[i]), "bad.json");
		if (rc >= 0 || tok)
			fail_msg("case %zu loaded", i);
		assert_non_null(strstr(ev_error_msg(), "bad.json"));
	}
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_load(&tok, "/nonexistent/tokenizer.json"), EV_E_NOTFOUND);
	assert_null(tok);
}

static const char added_json[] =
	"[{\"id\": 300, \"content\": \"<|im_end|>\", \"special\": true},"
	" {\"id\": 301, \"content\": \"<|im_end|>!!\", \"special\": true},"
	" {\"id\": 302, \"content\": \"<tool>\", \"special\": false}]";

static void added_tokens_split_out_longest_first(void **state)
{
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, added_json, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	assert_int_equal(eng_tokenizer_vocab_size(t), 303);
	assert_int_equal(eng_token_id(t, "<|im_end|>"), 300);
	assert_true(eng_token_is_special(t, 300));
	assert_false(eng_token_is_special(t, 302));
	expect(t, "hello<|im_end|>world", true, "hello|<|im_end|>|w|o|r|l|d");
	expect(t, "a<|im_end|>!!b", true, "a|<|im_end|>!!|b");
	expect(t, "<|im_end|><|im_end|>", true, "<|im_end|>|<|im_end|>");
	/* a normal added token is split out even when specials are not */
	expect(t, "x<tool>y", false, "x|<tool>|y");
	/* specials not allowed: their text is ordinary text */
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(t, "hello<|im_end|>", 15, false, &ids, &n), 0);
	assert_true(n > 2);
	for (size_t i = 0; i < n; i++)
		assert_true(ids[i] < 300);
	free(ids);
	/* skip_special drops them from decoding */
	int32_t seq[] = {300, 259, 302};
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(eng_detokenize(t, seq, 3, true, &out, &len), 0);
	assert_string_equal(out, "hello<tool>");
	free(out);
	assert_int_equal(eng_detokenize(t, seq, 3, false, &out, &len), 0);
	assert_string_equal(out, "<|im_end|>hello<tool>");
	free(out);
	int32_t badid[] = {303};
	assert_int_equal(eng_detokenize(t, badid, 1, false, &out, &len), EV_E_INVALID);
	assert_null(out);
	eng_tokenizer_free(t);
}

static void ignore_merges_takes_whole_words_from_the_vocab(void **state)
{
	/* "hello" is in the vocab but no merge path builds it past "he". */
	const char *const extra[] = {"hello", " world"};
	tt_spec s = {hello_merges, 1, extra, 2, true, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	expect(t, "hello world", false, "he|l|l|o| |w|o|r|l|d");
	eng_tokenizer_free(t);
	s.ignore_merges = true;
	t = tt_load(&s);
	expect(t, "hello world", false, "hello| world");
	expect(t, "hellos", false, "he|l|l|o|s");
	eng_tokenizer_free(t);
}

static void split_behaviors_group_pieces(void **state)
{
	/* Split on "-" then ByteLevel without regex; with no merges every
	 * byte is a token, so the pieces show only through the word cache
	 * and ignore_merges: whole pieces that are in the vocab. */
	const char *const extra[] = {"a-", "-b", "--", "a", "b"};
	static const struct {
		const char *behavior;
		const char *want;
	} cases[] = {
		{"Isolated", "a|-|-|b"},
		{"Removed", "a|b"},
		{"MergedWithPrevious", "a-|-|b"},
		{"MergedWithNext", "a|-|-b"},
		{"Contiguous", "a|--|b"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *pre = ev_asprintf("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
					"\"pattern\": {\"String\": \"-\"}, \"behavior\": \"%s\", \"invert\": false}, "
					"{\"type\": \"ByteLevel\", \"use_regex\": false}]}",
					cases[i].behavior);
		tt_spec s = {NULL, 0, extra, 5, true, true, NULL, pre, NULL, NULL, NULL};
		eng_tokenizer *t = tt_load(&s);
		int32_t *ids = NULL;
		size_t n = 0;
		assert_int_equal(eng_tokenize(t, "a--b", 4, false, &ids, &n), 0);
		ev_buf got = EV_BUF_INIT(256);
		for (size_t k = 0; k < n; k++) {
			size_t len;
			const char *p = eng_token_bytes(t, ids[k], &len);
			if (k)
				ev_buf_putc(&got, '|');
			ev_buf_append(&got, p, len);
		}
		if (strcmp(got.data, cases[i].want) != 0)
			fail_msg("%s: want %s, got %s", cases[i].behavior, cases[i].want, got.data);
		ev_buf_free(&got);
		free(ids);
		eng_tokenizer_free(t);
		free(pre);
	}
}

static void split_regex_uses_unicode_properties(void **state)
{
	/* \p{L}+ isolates letter runs of any script; other text stays apart */
	const char *pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
			  "\"pattern\": {\"Regex\": \"\\\\p{L}+|\\\\p{N}\"}, \"behavior\": \"Isolated\"}, "
			  "{\"type\": \"ByteLevel\", \"use_regex\": false}]}";
	const char *const extra[] = {"\xc3\xa9t\xc3\xa9", "\xd0\xbc\xd0\xb8\xd1\x80", "12"};
	tt_spec s = {NULL, 0, extra, 3, true, true, NULL, pre, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	expect(t, "\xc3\xa9t\xc3\xa9 \xd0\xbc\xd0\xb8\xd1\x80", false,
	       "\xc3\xa9t\xc3\xa9| |\xd0\xbc\xd0\xb8\xd1\x80");
	expect(t, "12", false, "1|2"); /* \p{N} one digit at a time */
	eng_tokenizer_free(t);
}

static void invalid_utf8_bytes_round_trip(void **state)
{
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	const char text[] = "he\xff\xfe llo \xe2\x82 w\x80orld\xc3";
	int32_t *ids = NULL;
	size_t n = 0, len = 0;
	char *out = NULL;
	assert_int_equal(eng_tokenize(t, text, sizeof text - 1, false, &ids, &n), 0);
	assert_int_equal(eng_detokenize(t, ids, n, false, &out, &len), 0);
	assert_int_equal(len, sizeof text - 1);
	assert_memory_equal(out, text, len);
	free(out);
	free(ids);
	/* embedded NUL bytes too */
	assert_int_equal(eng_tokenize(t, "a\0b", 3, false, &ids, &n), 0);
	assert_int_equal(n, 3);
	free(ids);
	eng_tokenizer_free(t);
}

static void long_inputs_are_not_quadratic(void **state)
{
	/* One 2 MB "word" of a repeated pair and a 2 MB run of spaces. */
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	size_t len = 2u << 20;
	char *text = malloc(len);
	for (size_t i = 0; i < len; i++)
		text[i] = 'a';
	double t0 = ev_now();
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(t, text, len, false, &ids, &n), 0);
	assert_int_equal(n, len / 2); /* all "aa" */
	free(ids);
	memset(text, ' ', len);
	assert_int_equal(eng_tokenize(t, text, len, false, &ids, &n), 0);
	assert_int_equal(n, len);
	free(ids);
	double dt = ev_now() - t0;
	if (dt > 10.0)
		fail_msg("4 MB took %.1f s", dt);
	free(text);
	eng_tokenizer_free(t);
}

static void oversized_inputs_are_refused(void **state)
{
	tt_spec s = {hello_merges, 8, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	int32_t *ids = NULL;
	size_t n = 0;
	/* the length is checked before the text is read */
	assert_int_equal(eng_tokenize(t, "x", ENG_TOK_MAX_INPUT + 1, false, &ids, &n), EV_E_LIMIT);
	assert_null(ids);
	eng_tokenizer *t2 = NULL;
	/* the size is checked before the text is read */
	assert_int_equal(eng_tokenizer_load_json(&t2, "{}", ENG_TOK_MAX_FILE + 1, "big.json"), EV_E_LIMIT);
	assert_null(t2);
	eng_tokenizer_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(merges_as_strings_and_pairs_encode_alike),
		cmocka_unit_test(merges_follow_rank_then_leftmost),
		cmocka_unit_test(bad_merge_is_an_error_naming_its_index),
		cmocka_unit_test(malformed_tokenizer_files_fail_cleanly),
		cmocka_unit_test(added_tokens_split_out_longest_first),
		cmocka_unit_test(ignore_merges_takes_whole_words_from_the_vocab),
		cmocka_unit_test(split_behaviors_group_pieces),
		cmocka_unit_test(split_regex_uses_unicode_properties),
		cmocka_unit_test(invalid_utf8_bytes_round_trip),
		cmocka_unit_test(long_inputs_are_not_quadratic),
		cmocka_unit_test(oversized_inputs_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
