/*
 * The parts of tokenizer.json that HF's tokenizers apply around BPE, as it
 * applies them: normalizers (NFC and friends, Sequence), the Digits
 * pre-tokenizer, whitespace as Unicode's White_Space (not U+180E), and
 * the post-processor's special tokens (TemplateProcessing, Roberta).
 * Each case failed before: NFC was accepted and not applied, Digits was
 * refused, PCRE2's \s took U+180E, and no post-processor was read.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer_int.h"
#include "test_tokenizer_fixture.h"

#include <stdlib.h>
#include <string.h>

/* Token texts joined by '|' (raw bytes). */
static char *pieces(const eng_tokenizer *tok, const char *text)
{
	int32_t *ids = NULL;
	size_t n = 0;
	if (eng_tokenize(tok, text, strlen(text), true, &ids, &n) != 0)
		fail_msg("tokenize \"%s\": %s", text, ev_error_msg());
	ev_buf got = EV_BUF_INIT(1 << 16);
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *p = eng_token_bytes(tok, ids[i], &len);
		if (i)
			ev_buf_putc(&got, '|');
		ev_buf_append(&got, p, len);
	}
	free(ids);
	return got.data ? got.data : ev_strdup("");
}

static void expect_pieces(const eng_tokenizer *tok, const char *text, const char *want)
{
	char *got = pieces(tok, text);
	if (strcmp(got, want))
		fail_msg("\"%s\": want [%s], got [%s]", text, want, got);
	free(got);
}

static const char *const merges[] = {"c", "a", "ca", "f", "1", "2", " ", "\xe1"};

static void normalizers_apply_nfc_nfkc_and_sequences(void **state)
{
	(void)state;
	tt_spec s = {merges, 4, NULL, 0, false, false, NULL, NULL, NULL, "{\"type\": \"NFC\"}", NULL};
	eng_tokenizer *nfc = tt_load(&s);
	/* e + combining acute composes to U+00E9: the same ids as the composed form */
	char *a = pieces(nfc, "cafe\xcc\x81"), *b = pieces(nfc, "caf\xc3\xa9");
	assert_string_equal(a, b);
	assert_string_equal(a, "caf|\xc3|\xa9");
	free(a), free(b);
	s.normalizer = NULL;
	eng_tokenizer *none = tt_load(&s);
	expect_pieces(none, "cafe\xcc\x81", "caf|e|\xcc|\x81");
	/* NFKC folds compatibility forms: U+FB01 (the fi ligature) is "fi" */
	s.normalizer = "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFD\"}, {\"type\": \"NFKC\"}]}";
	eng_tokenizer *nfkc = tt_load(&s);
	expect_pieces(nfkc, "\xef\xac\x81", "f|i");
	expect_pieces(nfkc, "cafe\xcc\x81", "caf|\xc3|\xa9");
	/* added tokens are matched before normalizing, and stay whole */
	eng_tokenizer_free(nfc), eng_tokenizer_free(none), eng_tokenizer_free(nfkc);
	/* what is not supported is named */
	s.normalizer = "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"BertNormalizer\"}]}";
	char *j = tt_build(&s);
	eng_tokenizer *t = NULL;
	assert_int_equal(eng_tokenizer_load_json(&t, j, strlen(j), "t.json"), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "normalizer.normalizers[1]"));
	assert_non_null(strstr(ev_error_msg(), "BertNormalizer"));
	free(j);
}

static void digits_pre_tokenizer_splits_numbers(void **state)
{
	(void)state;
	tt_spec s = {merges, 3, NULL, 0, false, false, NULL,
	             "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true},"
	             " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}]}",
	             NULL, NULL, NULL};
	eng_tokenizer *each = tt_load(&s);
	expect_pieces(each, "ca123", "ca|1|2|3");
	s.pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": false},"
	        " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}]}";
	eng_tokenizer *runs = tt_load(&s);
	expect_pieces(runs, "ca123", "ca|12|3");
	/* Arabic-Indic digits are digits too */
	expect_pieces(each, "\xd9\xa1\xd9\xa2", "\xd9|\xa1|\xd9|\xa2");
	eng_tokenizer_free(each), eng_tokenizer_free(runs);
}

static void u180e_is_not_whitespace(void **state)
{
	(void)state;
	/* merge " " + the first byte of U+180E: only within one piece */
	tt_spec s = {merges + 6, 1, NULL, 0, false, false, NULL, NULL, NULL, NULL, NULL};
	eng_tokenizer *t = tt_load(&s);
	/* Unicode (and Oniguruma, HF's regex engine) dropped U+180E from
	 * White_Space: " \u180E" is a space and a symbol, one GPT-2 piece */
	expect_pieces(t, "x \xe1\xa0\x8ey", "x| \xe1|\xa0|\x8e|y");
	/* real whitespace still splits as before: U+00A0 is White_Space */
	expect_pieces(t, "x \xc2\xa0y", "x| |\xc2|\xa0|y");
	eng_tokenizer_free(t);
}

static const char specials[] = "[{\"id\": 300, \"content\": \"<s>\", \"special\": true},"
                               " {\"id\": 301, \"content\": \"</s>\", \"special\": true}]";

static void post_processors_put_their_special_tokens(void **state)
{
	(void)state;
	/* Llama-3's shape: Sequence[ByteLevel, TemplateProcessing(BOS $A)] */
	tt_spec s = {merges, 3, NULL, 0, false, false, specials, NULL, NULL, NULL,
	             "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", \"trim_offsets\": false},"
	             " {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
	             " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<s>\":"
	             " {\"id\": \"<s>\", \"ids\": [300], \"tokens\": [\"<s>\"]}}}]}"};
	eng_tokenizer *t = tt_load(&s);
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize_with_specials(t, "ca", 2, &ids, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 300);
	free(ids);
	/* the plain encoding adds nothing (what chat templates are tokenized with) */
	assert_int_equal(eng_tokenize(t, "ca", 2, true, &ids, &n), 0);
	assert_int_equal(n, 1);
	free(ids);
	eng_tokenizer_free(t);
	/* RoBERTa's: <s> $A </s> */
	s.post = "{\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 301], \"cls\": [\"<s>\", 300]}";
	t = tt_load(&s);
	assert_int_equal(eng_tokenize_with_specials(t, "c", 1, &ids, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 300);
	assert_int_equal(ids[2], 301);
	free(ids);
	eng_tokenizer_free(t);
	/* Qwen's: ByteLevel only, no special tokens; and none at all */
	s.post = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}";
	t = tt_load(&s);
	assert_int_equal(eng_tokenize_with_specials(t, "c", 1, &ids, &n), 0);
	assert_int_equal(n, 1);
	free(ids);
	eng_tokenizer_free(t);
	/* an unknown one is named */
	s.post = "{\"type\": \"MysteryProcessing\"}";
	char *j = tt_build(&s);
	assert_int_equal(eng_tokenizer_load_json(&t, j, strlen(j), "t.json"), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "MysteryProcessing"));
	free(j);
}

/* SentencePiece-converted BPE (Llama-2, Mistral): characters as the first
 * symbols, the metaspace for spaces (Prepend + Replace normalizers), bytes
 * of characters outside the vocab as <0xXX> tokens, and a decoder that
 * turns it all back, dropping the one space the normalizer put first.
 * Before, such a tokenizer.json was refused ("only byte-level BPE"). */
#define MS "\u2581"
static const char spm_json[] =
	"{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
	" {\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
	" \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"" MS "\"},"
	" {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" MS "\"}]},"
	" \"pre_tokenizer\": null,"
	" \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
	" {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1]}}},"
	" \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"" MS "\"},"
	" \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", \"content\": \" \","
	" \"start\": 1, \"stop\": 0}]},"
	" \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true,"
	" \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"<0x0A>\": 2, \"<0xC3>\": 3, \"<0xA9>\": 4, \"" MS "\": 5, \"a\": 6,"
	" \"b\": 7, \"" MS "a\": 8, \"ab\": 9, \"" MS "ab\": 10},"
	" \"merges\": [\"" MS " a\", \"a b\", \"" MS "a b\"]}}";

static void sentencepiece_bpe_encodes_and_decodes(void **state)
{
	(void)state;
	eng_tokenizer *tok = NULL;
	if (eng_tokenizer_load_json(&tok, spm_json, strlen(spm_json), "spm.json"))
		fail_msg("load: %s", ev_error_msg());
	/* "ab ab" -> metaspace-prefixed words; \n and é through their bytes */
	int32_t *ids = NULL;
	size_t n = 0;
	const char text[] = "ab ab\n\xc3\xa9";
	assert_int_equal(eng_tokenize_with_specials(tok, text, strlen(text), &ids, &n), 0);
	static const int32_t want[] = {1, 10, 10, 2, 3, 4};
	assert_int_equal(n, 6);
	assert_memory_equal(ids, want, sizeof want);
	/* pieces as the vocab writes them */
	ev_buf b = EV_BUF_INIT(1 << 10);
	assert_int_equal(eng_token_piece(tok, 10, &b), 0);
	assert_int_equal(eng_token_piece(tok, 2, &b), 0);
	assert_int_equal(b.len, strlen("\xe2\x96\x81" "ab<0x0A>"));
	assert_memory_equal(b.data, "\xe2\x96\x81" "ab<0x0A>", b.len);
	ev_buf_free(&b);
	assert_int_equal(eng_token_id(tok, "<0xA9>"), 4);
	assert_int_equal(eng_token_id(tok, "\xe2\x96\x81" "ab"), 10);
	/* decoding gives the text back: the first space dropped, bytes joined */
	char *out = NULL;
	size_t len = 0;
	assert_int_equal(eng_detokenize(tok, ids, n, true, &out, &len), 0);
	assert_string_equal(out, text);
	free(out);
	eng_detok_stream *st = NULL;
	assert_int_equal(eng_detok_stream_new(&st, tok, true), 0);
	ev_buf sb = EV_BUF_INIT(1 << 10);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(eng_detok_stream_push(st, ids[i], &sb), 0);
	assert_string_equal(sb.data, text);
	ev_buf_free(&sb);
	eng_detok_stream_free(st);
	free(ids);
	/* a character with neither a token nor all of its bytes: one <unk>
	 * for the run (fuse_unk); a metaspace in the text is a space */
	expect_pieces(tok, "a\xe4\xbd\xa0\xe5\xa5\xbd", " a|<unk>");
	assert_int_equal(eng_tokenize(tok, "\xe2\x96\x81" "ab", 5, true, &ids, &n), 0);
	int32_t *ids2 = NULL;
	size_t n2 = 0;
	assert_int_equal(eng_tokenize(tok, " ab", 3, true, &ids2, &n2), 0);
	assert_int_equal(n, n2);
	assert_memory_equal(ids, ids2, n * sizeof *ids);
	free(ids), free(ids2);
	eng_tokenizer_free(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(normalizers_apply_nfc_nfkc_and_sequences),
		cmocka_unit_test(digits_pre_tokenizer_splits_numbers),
		cmocka_unit_test(u180e_is_not_whitespace),
		cmocka_unit_test(post_processors_put_their_special_tokens),
		cmocka_unit_test(sentencepiece_bpe_encodes_and_decodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
