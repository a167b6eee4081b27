/* The pre-tokenizers llama.cpp names in tokenizer.ggml.pre (engine/gguf/
 * pretok.c): every name resolves to its pre-tokenizer, which loads; each
 * splits text into the words its regexes make (expected words worked out
 * by hand from the regexes); a folder's pre_tokenizer is told by its words,
 * whatever its spelling; and a folder with each of them goes through a
 * GGUF file and back to the same token ids. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_int.h"
#include "engine/tokenizer/tokenizer_int.h"
#include "tests/engine/engine_testutil.h"

/* A tokenizer of one token with the given pre_tokenizer (JSON text) */
static eng_tokenizer *pre_only(const char *pre_json)
{
	char *json = ev_asprintf("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":%s}",
	                         pre_json);
	eng_tokenizer *tok = NULL;
	if (eng_tokenizer_load_json(&tok, json, strlen(json), "test"))
		fail_msg("%s: %s", pre_json, ev_error_msg());
	free(json);
	return tok;
}

static int join_word(void *ctx, const char *s, size_t len)
{
	ev_buf *b = ctx;
	if (b->len)
		ev_buf_putc(b, '|');
	return ev_buf_append(b, s, len);
}

/* The words of text under pre-tokenizer p, joined by '|' */
static char *words(const eng_gguf_pre *p, const char *text)
{
	char *json = eng_gguf_pre_json(p);
	assert_non_null(json);
	eng_tokenizer *tok = pre_only(json);
	ev_buf b = EV_BUF_INIT(1 << 16);
	assert_int_equal(eng_tok_words(tok, text, strlen(text), join_word, &b), 0);
	eng_tokenizer_free(tok);
	free(json);
	return b.data ? b.data : ev_strdup("");
}

static void every_name_resolves_and_loads(void **st)
{
	(void)st;
	size_t names = 0;
	for (size_t g = 0; g < eng_gguf_npres; g++) {
		char *json = eng_gguf_pre_json(&eng_gguf_pres[g]);
		assert_non_null(json);
		eng_tokenizer_free(pre_only(json)); /* every regex compiles */
		free(json);
		for (const char *const *n = eng_gguf_pres[g].names; *n; n++, names++)
			if (eng_gguf_pre_find(*n) != &eng_gguf_pres[g])
				fail_msg("'%s' does not stand for its own pre-tokenizer", *n);
	}
	assert_int_equal(names, 57); /* llama.cpp's names for the twelve */
	assert_ptr_equal(eng_gguf_pre_find(NULL), eng_gguf_pre_find("gpt-2")); /* a file without the key */
	assert_null(eng_gguf_pre_find("no-such-tokenizer"));
	assert_null(eng_gguf_pre_find("chameleon")); /* llama.cpp's, not read here */
	assert_true(eng_gguf_pre_find("llama-bpe")->ignore_merges && eng_gguf_pre_find("tekken")->ignore_merges);
	assert_false(eng_gguf_pre_find("smaug-bpe")->ignore_merges || eng_gguf_pre_find("qwen2")->ignore_merges);
	char list[4096];
	eng_gguf_pre_list(list, sizeof list);
	assert_non_null(strstr(list, "deepseek-r1-qwen"));
	char small[24];
	eng_gguf_pre_list(small, sizeof small);
	assert_int_equal(strlen(small), sizeof small - 1);
	assert_string_equal(small + sizeof small - 4, "...");
}

static void each_splits_as_its_regexes(void **st)
{
	(void)st;
	static const char t1[] = "I'M 12345 hello", t2[] = "HelloWorld's a/b\n", t3[] = "\xe6\x97\xa5\xe6\x9c\xac abc 12345",
	                  t4[] = "cafe\xcc\x81 x!!\n", t5[] = "Hello, \xe4\xb8\x96\xe7\x95\x8c 123\n";
	static const struct {
		const char *name, *text, *want;
	} cases[] = {
		/* GPT-2: lowercase contractions only, digit runs after a space */
		{"gpt-2", t1, "I|'|M| 12345| hello"},
		{"gpt-2", t2, "HelloWorld|'s| a|/|b|\n"},
		/* SmolLM: each digit first */
		{"smollm", t1, "I|'|M| |1|2|3|4|5| hello"},
		/* Llama 3: contractions in either case, digits in threes, a symbol leads letters */
		{"llama-bpe", t1, "I|'M| |123|45| hello"},
		{"llama-bpe", t2, "HelloWorld|'s| a|/b|\n"},
		{"smaug-bpe", t1, "I|'M| |123|45| hello"},
		/* Qwen2: digits one by one; a combining mark is not a letter */
		{"qwen2", t1, "I|'M| |1|2|3|4|5| hello"},
		{"qwen2", t4, "cafe|\xcc\x81| x|!!\n"},
		{"deepseek-r1-qwen", t1, "I|'M| |1|2|3|4|5| hello"},
		/* Qwen3.5: marks belong to words */
		{"qwen35", t4, "cafe\xcc\x81| x|!!\n"},
		/* Tekken: words split at case changes, no contractions */
		{"tekken", t1, "I|'M| |1|2|3|4|5| hello"},
		{"tekken", t2, "Hello|World|'s| a|/b|\n"},
		/* GPT-4o: case changes, a word keeps its contraction, digits in threes */
		{"gpt-4o", t1, "I'M| |123|45| hello"},
		{"gpt-4o", t2, "Hello|World's| a|/b|\n"},
		/* Seed-Coder: symbols do not take the line break */
		{"seed-coder", t4, "cafe|\xcc\x81| x|!!|\n"},
		/* DeepSeek V3: digits in threes first, then Han and kana runs */
		{"deepseek-v3", t3, "\xe6\x97\xa5\xe6\x9c\xac| abc| |123|45"},
		{"deepseek-v3", t1, "I|'M| |123|45| hello"},
		/* DeepSeek LLM: line breaks, cased letters, ASCII and full-width punctuation, CJK, digit runs */
		{"deepseek-llm", t5, "Hello|,| |\xe4\xb8\x96\xe7\x95\x8c| |123|\n"},
		/* DeepSeek Coder: the same with letters of any script, digits one by one */
		{"deepseek-coder", t5, "Hello|,| |\xe4\xb8\x96\xe7\x95\x8c| |1|2|3|\n"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const eng_gguf_pre *p = eng_gguf_pre_find(cases[c].name);
		assert_non_null(p);
		char *got = words(p, cases[c].text);
		if (strcmp(got, cases[c].want))
			fail_msg("%s on \"%s\": want [%s], got [%s]", cases[c].name, cases[c].text, cases[c].want, got);
		free(got);
	}
}

/* The name a pre_tokenizer (JSON text) with ignore_merges is told to be, or NULL */
static const char *told(const char *pre_json, bool ignore_merges)
{
	cJSON *j = cJSON_Parse(pre_json);
	assert_non_null(j);
	const eng_gguf_pre *p = NULL;
	if (eng_gguf_pre_match(j, ignore_merges, &p))
		fail_msg("%s: %s", pre_json, ev_error_msg());
	cJSON_Delete(j);
	return p ? p->names[0] : NULL;
}

static void expect_told(const char *pre_json, bool ignore_merges, const char *want)
{
	const char *got = told(pre_json, ignore_merges);
	if (!got || strcmp(got, want))
		fail_msg("%s (ignore_merges %d): told as %s, not %s", pre_json, ignore_merges, got ? got : "none", want);
}

#define BL_FALSE "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}"
#define SPLIT(re) "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" re "\"},\"behavior\":\"Isolated\",\"invert\":false}"
#define SEQ(a, b) "{\"type\":\"Sequence\",\"pretokenizers\":[" a "," b "]}"

static void folders_are_told_by_their_words(void **st)
{
	(void)st;
	/* GPT-2's regex written out, beside ByteLevel applying it itself */
	expect_told("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}", false, "gpt-2");
	expect_told(SEQ(SPLIT("'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|"
	                      "\\\\s+(?!\\\\S)|\\\\s+"),
	                BL_FALSE),
	            false, "gpt-2");
	/* Llama 3 as llama.cpp spells its contractions: the name goes by ignore_merges */
	static const char llama3_ascii[] = SEQ(
	    SPLIT("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
	          "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"),
	    BL_FALSE);
	expect_told(llama3_ascii, true, "llama-bpe");
	expect_told(llama3_ascii, false, "smaug-bpe");
	/* Tekken with the line breaks as characters rather than escapes */
	static const char tekken[] = SEQ(
	    SPLIT("[^\\r\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}"
	          "\\\\p{M}]+|[^\\r\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p{Ll}\\\\p{Lm}"
	          "\\\\p{Lo}\\\\p{M}]*|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\r\\n/]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+"),
	    BL_FALSE);
	expect_told(tekken, true, "tekken");
	/* no name has those words with the other ignore_merges: the one that has them */
	expect_told(tekken, false, "tekken");
	/* Digits as HF writes SmolLM's */
	expect_told(SEQ("{\"type\":\"Digits\",\"individual_digits\":true}",
	                "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"),
	            false, "smollm");
	/* near misses are no name: digits in twos, words at whitespace */
	assert_null(told(SEQ(SPLIT("\\\\p{N}{1,2}"), BL_FALSE), false));
	assert_null(told(SEQ(SPLIT("\\\\S+|\\\\s+"), BL_FALSE), false));
	/* a pre_tokenizer evald cannot run is an error that names it */
	cJSON *bad = cJSON_Parse("{\"type\":\"Punctuation\"}");
	const eng_gguf_pre *p = NULL;
	assert_int_not_equal(eng_gguf_pre_match(bad, false, &p), 0);
	assert_non_null(strstr(ev_error_msg(), "Punctuation"));
	ev_error_clear();
	cJSON_Delete(bad);
}

/* Each pre-tokenizer in a folder: the GGUF file the exporter writes names
 * it, and the folder evald makes again of that file tokenizes as the
 * first did (the ids of texts that tell them apart). */
static void each_comes_back_through_gguf(void **st)
{
	(void)st;
	char *work = tu_tmpdir("pretokw"), *cache = tu_tmpdir("pretokc");
	setenv("EVALD_CACHE_DIR", cache, 1);
	static const char *const texts[] = {
	    "I'M sure they'RE here, 1234567 + 89.\n", "HelloWorld getHTTPResponse \xc3\x89" "cole na\xc3\xafve cafe\xcc\x81",
	    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86 \xed\x95\x9c abc 12345\r\n", "a/b  x!!\n\n  end   "};
	for (size_t g = 0; g < eng_gguf_npres; g++) {
		const eng_gguf_pre *pg = &eng_gguf_pres[g];
		eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
		char *dir = et_mkmodel("pretok", "llama", &z, "f32", 5), *tp = tu_path(dir, "tokenizer.json"), *t = NULL;
		size_t len = 0;
		assert_int_equal(ev_file_read(&t, &len, tp, 64 << 20), 0);
		cJSON *tj = cJSON_Parse(t), *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
		char *json = eng_gguf_pre_json(pg);
		cJSON_ReplaceItemInObjectCaseSensitive(tj, "pre_tokenizer", cJSON_Parse(json));
		cJSON_DeleteItemFromObjectCaseSensitive(model, "ignore_merges");
		cJSON_AddBoolToObject(model, "ignore_merges", pg->ignore_merges);
		char *nt = cJSON_Print(tj);
		assert_int_equal(ev_file_write(tp, nt, strlen(nt)), 0);
		char *out = tu_path(work, "p.gguf"), *conv = NULL;
		eng_gguf_export_opts o = {.type = NULL};
		eng_gguf_export_stats es;
		if (eng_gguf_export(dir, out, &o, &es))
			fail_msg("%s: %s", pg->names[0], ev_error_msg());
		assert_string_equal(es.pre, pg->names[0]);
		assert_int_equal(eng_model_path_resolve(out, &conv), 0);
		eng_tokenizer *ta = NULL, *tb = NULL;
		assert_int_equal(eng_tokenizer_load(&ta, dir), 0);
		assert_int_equal(eng_tokenizer_load(&tb, conv), 0);
		for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
			int32_t *ia = NULL, *ib = NULL;
			size_t na = 0, nb = 0;
			assert_int_equal(eng_tokenize(ta, texts[k], strlen(texts[k]), false, &ia, &na), 0);
			assert_int_equal(eng_tokenize(tb, texts[k], strlen(texts[k]), false, &ib, &nb), 0);
			if (na != nb || memcmp(ia, ib, na * sizeof *ia))
				fail_msg("%s, text %zu: %zu ids from the folder, %zu through GGUF", pg->names[0], k, na, nb);
			free(ia), free(ib);
		}
		eng_tokenizer_free(ta), eng_tokenizer_free(tb);
		unlink(out);
		cJSON_Delete(tj);
		free(nt), free(json), free(t), free(tp), free(out), free(conv), free(dir);
	}
	free(work), free(cache);
}

/* evald engine gguf --pre-tokenizers: the table as users read it */
static void cli_lists_them(void **st)
{
	(void)st;
	const char *ev = tu_evald();
	const char *a1[] = {ev, "engine", "gguf", "--pre-tokenizers", "--json", NULL};
	char *out = NULL, *err = NULL;
	assert_int_equal(tu_run(&out, &err, NULL, a1), 0);
	cJSON *all = cJSON_Parse(out);
	assert_int_equal(cJSON_GetArraySize(all), (int)eng_gguf_npres);
	const cJSON *p, *n;
	bool tekken = false;
	cJSON_ArrayForEach(p, all)
	{
		cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(p, "names")) if (!strcmp(n->valuestring, "tekken"))
		{
			tekken = true;
			assert_true(ev_json_bool(p, "ignore_merges", false));
			char *pt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(p, "pre_tokenizer"));
			assert_non_null(strstr(pt, "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}"));
			free(pt);
		}
	}
	assert_true(tekken);
	cJSON_Delete(all), free(out), free(err);
	const char *a2[] = {ev, "engine", "gguf", "--pre-tokenizers", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, a2), 0);
	assert_non_null(strstr(out, "qwen2, deepseek-r1-qwen"));
	free(out), free(err);
	const char *a3[] = {ev, "engine", "gguf", "--pre-tokenizers", "x.gguf", NULL}, *a4[] = {ev, "engine", "gguf", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, a3), 2);
	assert_non_null(strstr(err, "--pre-tokenizers takes no FILE"));
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, a4), 2);
	assert_non_null(strstr(err, "a FILE (or FOLDER) is needed"));
	free(out), free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_name_resolves_and_loads),
		cmocka_unit_test(each_splits_as_its_regexes),
		cmocka_unit_test(folders_are_told_by_their_words),
		cmocka_unit_test(each_comes_back_through_gguf),
		cmocka_unit_test(cli_lists_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
