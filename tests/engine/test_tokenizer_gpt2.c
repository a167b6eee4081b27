/*
 * The byte-level BPE against the published GPT-2 tokenizer and its test
 * vectors (shared/data/tokenizers/gpt2): every vector's ids match exactly,
 * and decoding gives back every input byte for byte. Skips where the shared
 * folder is absent.
 *
 * vectors.inp is input_0 SEP input_1 SEP ... input_n SEP with SEP the line
 * "\n__ggml_vocab_test__\n": the newline before the marker ends the input
 * and is not part of it; vectors.out holds one line of ids per input.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#define SEP "\n__ggml_vocab_test__\n"
#define SKIP_ABSENT()                                                                    \
	do {                                                                             \
		print_message("skipped: tokenizers/gpt2 not found under EV_SHARED_DIR/data\n"); \
		skip();                                                                  \
	} while (0)

typedef struct {
	eng_tokenizer *tok;
	char *inp, *outp;
	size_t inp_len;
} fixture;

static int setup(void **state)
{
	char *dir = tu_shared("tokenizers/gpt2");
	if (!dir) {
		*state = NULL;
		return 0;
	}
	fixture *f = calloc(1, sizeof *f);
	char *p = tu_path(dir, "vectors.inp"), *q = tu_path(dir, "vectors.out");
	size_t n;
	if (eng_tokenizer_load(&f->tok, dir) != 0)
		fail_msg("load %s: %s", dir, ev_error_msg());
	if (ev_file_read(&f->inp, &f->inp_len, p, 1 << 20) || ev_file_read(&f->outp, &n, q, 1 << 20))
		fail_msg("read vectors: %s", ev_error_msg());
	free(p);
	free(q);
	free(dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	if (f) {
		eng_tokenizer_free(f->tok);
		free(f->inp);
		free(f->outp);
		free(f);
	}
	return 0;
}

/* Walks the vectors: calls check for each (input, expected line). */
static size_t each_vector(fixture *f, void (*check)(fixture *, const char *, size_t, const char *, size_t))
{
	const char *s = f->inp, *end = f->inp + f->inp_len, *line = f->outp;
	size_t count = 0;
	while (s < end) {
		const char *sep = strstr(s, SEP);
		assert_non_null(sep); /* the file ends with a separator */
		const char *eol = strchr(line, '\n');
		assert_non_null(eol);
		check(f, s, (size_t)(sep - s), line, count);
		s = sep + strlen(SEP);
		line = eol + 1;
		count++;
	}
	return count;
}

static void check_ids(fixture *f, const char *in, size_t len, const char *line, size_t idx)
{
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(f->tok, in, len, false, &ids, &n), 0);
	ev_buf got = EV_BUF_INIT(1 << 20);
	for (size_t i = 0; i < n; i++)
		ev_buf_printf(&got, " %d", (int)ids[i]);
	const char *eol = strchr(line, '\n');
	/* vectors.out writes each id after a space, as above */
	size_t want_len = (size_t)(eol - line);
	if (got.len != want_len || memcmp(got.data ? got.data : "", line, want_len) != 0)
		fail_msg("vector %zu (\"%.*s\"):\n want:%.*s\n  got:%s", idx, (int)len, in, (int)want_len, line,
			 got.data ? got.data : "");
	ev_buf_free(&got);
	free(ids);
}

static void gpt2_vectors_match_exactly(void **state)
{
	fixture *f = *state;
	if (!f)
		SKIP_ABSENT();
	assert_int_equal(eng_tokenizer_vocab_size(f->tok), 50257);
	size_t n = each_vector(f, check_ids);
	assert_int_equal(n, 46);
}

static void check_roundtrip(fixture *f, const char *in, size_t len, const char *line, size_t idx)
{
	int32_t *ids = NULL;
	size_t n = 0, olen = 0;
	char *out = NULL;
	assert_int_equal(eng_tokenize(f->tok, in, len, false, &ids, &n), 0);
	assert_int_equal(eng_detokenize(f->tok, ids, n, false, &out, &olen), 0);
	if (olen != len || memcmp(out, in, len) != 0)
		fail_msg("vector %zu does not round-trip", idx);
	free(out);
	free(ids);
}

static void gpt2_vectors_round_trip(void **state)
{
	fixture *f = *state;
	if (!f)
		SKIP_ABSENT();
	each_vector(f, check_roundtrip);
	/* and the whole file at once, separators included */
	check_roundtrip(f, f->inp, f->inp_len, NULL, 999);
}

static void gpt2_special_token_split_only_when_allowed(void **state)
{
	fixture *f = *state;
	if (!f)
		SKIP_ABSENT();
	const char *text = "Hello<|endoftext|> world";
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(f->tok, text, strlen(text), true, &ids, &n), 0);
	/* Hello, <|endoftext|>, Ġworld */
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 15496);
	assert_int_equal(ids[1], 50256);
	assert_int_equal(ids[2], 995);
	free(ids);
	assert_int_equal(eng_tokenize(f->tok, text, strlen(text), false, &ids, &n), 0);
	assert_true(n > 3);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], 50256);
	free(ids);
	assert_int_equal(eng_token_id(f->tok, "<|endoftext|>"), 50256);
	assert_int_equal(eng_token_id(f->tok, "Ġworld"), 995);
	assert_int_equal(eng_token_id(f->tok, " world"), 995);
	assert_int_equal(eng_token_id(f->tok, "no such token here"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gpt2_vectors_match_exactly),
		cmocka_unit_test(gpt2_vectors_round_trip),
		cmocka_unit_test(gpt2_special_token_split_only_when_allowed),
	};
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	char *dir = tu_shared("tokenizers/gpt2");
	free(dir);
	return rc == 0 && !dir ? 77 : rc; /* ctest reports the skip */
}
