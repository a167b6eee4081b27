/*
 * eng_tokenizer_write_default: what it writes loads back, round-trips
 * text, holds the family's special tokens and chat template, and is the
 * same every time.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const samples[] = {
	"The evaluation harness runs a model through many suites.",
	"Completely unseen words: xylophone, quixotic, zeitgeist 12345678 !!!",
	"  leading spaces, tabs\tand\nnewlines\n\n\nand trailing   ",
	"Unicode: caf\xc3\xa9, \xd0\xbc\xd0\xb8\xd1\x80, \xe4\xb8\xad\xe6\x96\x87, \xf0\x9f\x98\x80",
	"def add(a, b):\n    return a + b\n",
	"",
};

static void round_trip_all(const eng_tokenizer *tok)
{
	for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
		int32_t *ids = NULL;
		size_t n = 0, len = 0;
		char *out = NULL;
		assert_int_equal(eng_tokenize(tok, samples[i], strlen(samples[i]), true, &ids, &n), 0);
		assert_int_equal(eng_detokenize(tok, ids, n, false, &out, &len), 0);
		assert_string_equal(out, samples[i]);
		free(out);
		free(ids);
	}
}

static void check_family(const char *family, int vocab, const char *const *specials, size_t nsp,
			 const char *eos)
{
	char *dir = tu_tmpdir(family);
	if (eng_tokenizer_write_default(dir, vocab, family) != 0)
		fail_msg("write: %s", ev_error_msg());
	eng_tokenizer *tok = NULL;
	if (eng_tokenizer_load(&tok, dir) != 0)
		fail_msg("load back: %s", ev_error_msg());
	assert_int_equal(eng_tokenizer_vocab_size(tok), vocab);
	for (size_t k = 0; k < nsp; k++) {
		int32_t id = eng_token_id(tok, specials[k]);
		assert_int_equal(id, vocab - (int)nsp + (int)k);
		assert_true(eng_token_is_special(tok, id));
	}
	assert_int_equal(eng_tokenizer_eos_id(tok), eng_token_id(tok, eos));
	round_trip_all(tok);

	/* merges were learned: common English is much shorter than its bytes */
	const char *text = "the model reads the answer and the tests";
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(tok, text, strlen(text), false, &ids, &n), 0);
	assert_true(n * 3 < strlen(text));
	free(ids);

	/* the template's family is recognised, and a rendered prompt splits its
	 * special tokens out */
	eng_chat_family fam = ENG_CHAT_UNKNOWN;
	assert_int_equal(eng_chat_family_detect(&fam, dir), 0);
	assert_int_equal(fam, eng_chat_family_from_name(family));
	eng_chat_msg msgs[] = {{"user", "Hi there", NULL, NULL, NULL}};
	char *prompt = NULL;
	assert_int_equal(eng_chat_render(&prompt, NULL, fam, msgs, 1, NULL, true), 0);
	assert_int_equal(eng_tokenize(tok, prompt, strlen(prompt), true, &ids, &n), 0);
	size_t nspecial = 0;
	for (size_t i = 0; i < n; i++)
		nspecial += eng_token_is_special(tok, ids[i]);
	assert_true(nspecial >= 3); /* im_start, im_end, im_start (chatml) */
	int32_t stop[4];
	assert_true(eng_chat_stop_ids(tok, fam, stop, 4) >= 1);
	assert_int_equal(stop[0], eng_token_id(tok, eos));
	free(ids);
	free(prompt);
	eng_tokenizer_free(tok);

	/* deterministic: a second write is byte for byte the same */
	char *dir2 = tu_tmpdir(family);
	assert_int_equal(eng_tokenizer_write_default(dir2, vocab, family), 0);
	char *a = NULL, *b = NULL, *pa = tu_path(dir, "tokenizer.json"), *pb = tu_path(dir2, "tokenizer.json");
	size_t la, lb;
	assert_int_equal(ev_file_read(&a, &la, pa, 1 << 24), 0);
	assert_int_equal(ev_file_read(&b, &lb, pb, 1 << 24), 0);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	free(a), free(b), free(pa), free(pb), free(dir2), free(dir);
}

static void default_chatml_tokenizer_round_trips(void **state)
{
	const char *const sp[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
	check_family("chatml", 512, sp, 3, "<|im_end|>");
	check_family("chatml", 1500, sp, 3, "<|im_end|>");
}

static void default_llama3_tokenizer_round_trips(void **state)
{
	const char *const sp[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
				  "<|end_header_id|>", "<|eot_id|>"};
	check_family("llama3", 512, sp, 5, "<|eot_id|>");
	char *dir = tu_tmpdir("llama3-bos");
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_write_default(dir, 300, "llama3"), 0);
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	assert_int_equal(eng_tokenizer_bos_id(tok), eng_token_id(tok, "<|begin_of_text|>"));
	eng_tokenizer_free(tok);
	free(dir);
}

static void default_writer_fills_vocab_past_what_it_can_learn(void **state)
{
	char *dir = tu_tmpdir("big");
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_write_default(dir, 65536, "chatml"), 0);
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	assert_int_equal(eng_tokenizer_vocab_size(tok), 65536);
	round_trip_all(tok);
	/* every id decodes, filler ones included */
	for (int32_t id = 0; id < 65536; id++) {
		size_t len = 0;
		assert_non_null(eng_token_bytes(tok, id, &len));
		assert_true(len > 0);
	}
	eng_tokenizer_free(tok);
	free(dir);
}

static void default_writer_refuses_bad_arguments(void **state)
{
	char *dir = tu_tmpdir("badargs");
	assert_int_equal(eng_tokenizer_write_default(dir, 512, "gemma"), EV_E_INVALID);
	assert_int_equal(eng_tokenizer_write_default(dir, 100, "chatml"), EV_E_INVALID);
	assert_int_equal(eng_tokenizer_write_default(dir, 1 << 20, "llama3"), EV_E_INVALID);
	assert_true(eng_tokenizer_write_default("/nonexistent/dir", 512, "chatml") < 0);
	free(dir);
}

typedef struct {
	const eng_tokenizer *tok;
	const char *text;
	size_t len;
	int32_t *ids;
	size_t n;
	int rc;
} job;

static void *encode_job(void *arg)
{
	job *j = arg;
	for (int r = 0; r < 20 && !j->rc; r++) {
		free(j->ids);
		j->ids = NULL;
		j->rc = eng_tokenize(j->tok, j->text, j->len, false, &j->ids, &j->n);
	}
	return NULL;
}

static void tokenizer_shared_by_threads_encodes_alike(void **state)
{
	char *dir = tu_tmpdir("threads");
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_write_default(dir, 800, "llama3"), 0);
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	ev_buf text = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 400; i++)
		ev_buf_printf(&text, "word%d %s ", i * 7919 % 1000, samples[i % 5]);
	int32_t *want = NULL;
	size_t nwant = 0;
	assert_int_equal(eng_tokenize(tok, text.data, text.len, false, &want, &nwant), 0);
	eng_tokenizer_free(tok); /* a fresh tokenizer: the threads fill its cache together */
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	job jobs[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		jobs[i] = (job){tok, text.data, text.len, NULL, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, encode_job, &jobs[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rc, 0);
		assert_int_equal(jobs[i].n, nwant);
		assert_memory_equal(jobs[i].ids, want, nwant * sizeof *want);
		free(jobs[i].ids);
	}
	free(want);
	ev_buf_free(&text);
	eng_tokenizer_free(tok);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(default_chatml_tokenizer_round_trips),
		cmocka_unit_test(default_llama3_tokenizer_round_trips),
		cmocka_unit_test(default_writer_fills_vocab_past_what_it_can_learn),
		cmocka_unit_test(default_writer_refuses_bad_arguments),
		cmocka_unit_test(tokenizer_shared_by_threads_encodes_alike),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
