/*
 * engine/gguf/pretok.c: the byte-level pre-tokenizers llama.cpp names in
 * tokenizer.ggml.pre, each as the tokenizer.json pre_tokenizer it stands
 * for (the reader writes that into the folder it makes of a GGUF file),
 * and the way back: which name a folder's pre_tokenizer is, told by the
 * words it splits a probe text into (the exporter writes that name).
 *
 * The names and what each splits by are llama.cpp's (src/llama-vocab.cpp,
 * its table of names and its regex lists); where llama.cpp rewrote a
 * model's regex for its own regex engine (the case classes of Tekken and
 * GPT-4o as ASCII tests), the model's own tokenizer.json form is kept,
 * which PCRE2 runs as written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/gguf/gguf_int.h"
#include "engine/tokenizer/tokenizer_int.h"

/* Contractions in either case, as Llama 3 and its successors write them */
#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
/* The uppercase-then-lowercase words of Tekken and GPT-4o (optionally
 * followed by the contractions, GPT-4o) */
#define CASED_WORDS(tail)                                                                                              \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" tail                   \
	"|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" tail

static const char re_qwen2[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_qwen35[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
                                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_tekken[] = CASED_WORDS("") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
                                "\\s+(?!\\S)|\\s+";
static const char re_gpt4o[] = CASED_WORDS("(?i:'s|'t|'re|'ve|'m|'ll|'d)?") "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                               "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_seed_coder[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* DeepSeek V3: digits in threes, then Han and kana runs, then the rest */
static const char re_ds3_cjk[] = "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+";
static const char re_ds3_words[] = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
                                   "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* DeepSeek LLM and Coder: line breaks, words, punctuation, CJK runs, digits, each its own split */
static const char re_ds_cjk[] = "[\\x{4e00}-\\x{9fa5}\\x{0800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+";
static const char re_dsllm_words[] = "\\s?[\\p{Lu}\\p{Ll}\\p{Lt}]+"; /* cased letters */
static const char re_dsllm_punct[] = "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}"
                                     "\\x{3000}-\\x{3002}]+";

/* A step of a pre-tokenizer: its kind and, for a split, its regex
 * (words isolated, as tokenizer.json's Split with behavior Isolated) */
enum { STEP_END, STEP_SPLIT, STEP_DIGITS, STEP_BYTELEVEL_GPT2, STEP_BYTELEVEL };

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define STEPS(...) {__VA_ARGS__, {STEP_END, NULL}}

const eng_gguf_pre eng_gguf_pres[] = {
	{NAMES("gpt-2", "gpt2", "default", "phi-2", "mpt", "olmo", "jais", "exaone4", "mellum", "gigachat", "a.x-4.0",
	       "trillion", "granite-docling", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "modern-bert"),
	 false, STEPS({STEP_BYTELEVEL_GPT2, NULL})},
	{NAMES("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"), false,
	 STEPS({STEP_DIGITS, NULL}, {STEP_BYTELEVEL_GPT2, NULL})},
	{NAMES("llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"),
	 true, STEPS({STEP_SPLIT, eng_tok_llama3_pattern}, {STEP_BYTELEVEL, NULL})},
	{NAMES("smaug-bpe", "dbrx"), false, STEPS({STEP_SPLIT, eng_tok_llama3_pattern}, {STEP_BYTELEVEL, NULL})},
	{NAMES("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan"), false,
	 STEPS({STEP_SPLIT, re_qwen2}, {STEP_BYTELEVEL, NULL})},
	{NAMES("qwen35"), false, STEPS({STEP_SPLIT, re_qwen35}, {STEP_BYTELEVEL, NULL})},
	{NAMES("tekken"), true, STEPS({STEP_SPLIT, re_tekken}, {STEP_BYTELEVEL, NULL})},
	{NAMES("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), false,
	 STEPS({STEP_SPLIT, re_gpt4o}, {STEP_BYTELEVEL, NULL})},
	{NAMES("seed-coder"), false, STEPS({STEP_SPLIT, re_seed_coder}, {STEP_BYTELEVEL, NULL})},
	{NAMES("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"), false,
	 STEPS({STEP_SPLIT, "\\p{N}{1,3}"}, {STEP_SPLIT, re_ds3_cjk}, {STEP_SPLIT, re_ds3_words}, {STEP_BYTELEVEL, NULL})},
	{NAMES("deepseek-llm"), false,
	 STEPS({STEP_SPLIT, "[\\r\\n]"}, {STEP_SPLIT, re_dsllm_words}, {STEP_SPLIT, re_dsllm_punct}, {STEP_SPLIT, "\\s+$"},
	       {STEP_SPLIT, re_ds_cjk}, {STEP_SPLIT, "\\p{N}+"}, {STEP_BYTELEVEL, NULL})},
	{NAMES("deepseek-coder"), false,
	 STEPS({STEP_SPLIT, "[\\r\\n]"}, {STEP_SPLIT, "\\s?\\p{L}+"}, {STEP_SPLIT, "\\s?\\p{P}+"}, {STEP_SPLIT, re_ds_cjk},
	       {STEP_SPLIT, "\\p{N}"}, {STEP_BYTELEVEL, NULL})},
};
const size_t eng_gguf_npres = sizeof eng_gguf_pres / sizeof eng_gguf_pres[0];

const eng_gguf_pre *eng_gguf_pre_find(const char *name)
{
	if (!name)
		return &eng_gguf_pres[0]; /* a file without the key: GPT-2's */
	for (size_t g = 0; g < eng_gguf_npres; g++)
		for (const char *const *n = eng_gguf_pres[g].names; *n; n++)
			if (!strcmp(*n, name))
				return &eng_gguf_pres[g];
	return NULL;
}

void eng_gguf_pre_list(char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t g = 0; g < eng_gguf_npres && at < n; g++)
		for (const char *const *nm = eng_gguf_pres[g].names; *nm && at < n; nm++) {
			int k = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", *nm);
			at += k > 0 ? (size_t)k : 0;
		}
	if (at >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
}

static cJSON *step_json(const eng_gguf_pre_step *s)
{
	cJSON *o = cJSON_CreateObject();
	bool ok = o != NULL;
	if (s->kind == STEP_SPLIT) {
		cJSON *pat = ok && cJSON_AddStringToObject(o, "type", "Split") ? cJSON_AddObjectToObject(o, "pattern") : NULL;
		ok = pat && cJSON_AddStringToObject(pat, "Regex", s->re) && cJSON_AddStringToObject(o, "behavior", "Isolated") &&
		     cJSON_AddFalseToObject(o, "invert");
	} else if (s->kind == STEP_DIGITS) {
		ok = ok && cJSON_AddStringToObject(o, "type", "Digits") && cJSON_AddTrueToObject(o, "individual_digits");
	} else {
		ok = ok && cJSON_AddStringToObject(o, "type", "ByteLevel") && cJSON_AddFalseToObject(o, "add_prefix_space") &&
		     cJSON_AddTrueToObject(o, "trim_offsets") &&
		     cJSON_AddBoolToObject(o, "use_regex", s->kind == STEP_BYTELEVEL_GPT2);
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

char *eng_gguf_pre_json(const eng_gguf_pre *p)
{
	cJSON *root;
	if (p->steps[1].kind == STEP_END) {
		root = step_json(&p->steps[0]);
	} else {
		root = cJSON_CreateObject();
		bool ok = root && cJSON_AddStringToObject(root, "type", "Sequence");
		cJSON *list = ok ? cJSON_AddArrayToObject(root, "pretokenizers") : NULL;
		ok = list != NULL;
		for (const eng_gguf_pre_step *s = p->steps; ok && s->kind != STEP_END; s++) {
			cJSON *st = step_json(s);
			ok = st && cJSON_AddItemToArray(list, st);
		}
		if (!ok) {
			cJSON_Delete(root);
			root = NULL;
		}
	}
	char *text = root ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return text;
}

char *eng_gguf_pre_tokenizers_json(void)
{
	cJSON *all = cJSON_CreateArray();
	bool ok = all != NULL;
	for (size_t g = 0; g < eng_gguf_npres && ok; g++) {
		char *pj = eng_gguf_pre_json(&eng_gguf_pres[g]);
		cJSON *o = cJSON_CreateObject(), *names = cJSON_CreateArray(), *pt = pj ? cJSON_Parse(pj) : NULL;
		free(pj);
		ok = o && names && pt;
		for (const char *const *n = eng_gguf_pres[g].names; ok && *n; n++)
			ok = cJSON_AddItemToArray(names, cJSON_CreateString(*n));
		/* each item is the object's once added, so that nothing is freed twice */
		if (ok && (ok = cJSON_AddItemToObject(o, "names", names)))
			names = NULL;
		if (ok && (ok = cJSON_AddItemToObject(o, "pre_tokenizer", pt)))
			pt = NULL;
		ok = ok && cJSON_AddBoolToObject(o, "ignore_merges", eng_gguf_pres[g].ignore_merges);
		if (ok && (ok = cJSON_AddItemToArray(all, o)))
			o = NULL;
		cJSON_Delete(o), cJSON_Delete(names), cJSON_Delete(pt);
	}
	char *text = ok ? cJSON_PrintUnformatted(all) : NULL;
	cJSON_Delete(all);
	return text;
}

/* ---- a folder's pre_tokenizer by its words --------------------------------- */

/* Text whose words tell the names apart: contractions in both cases,
 * digit runs, letters after a space, a symbol or a newline, case changes
 * in ASCII and beyond, combining marks, Greek and Cyrillic, Han, kana and
 * Hangul, full-width punctuation, symbol runs before newlines and
 * slashes, and whitespace runs within and at the end. */
static const char probe[] = "I'm sure they'RE here, isn't it? We'LL see: 1234567 + 89 = 1234656.\n"
                            "HelloWorld HTTPServer getHTTPResponse \xc3\x89" "cole\xc3\x89t\xc3\xa9 na\xc3\xafve "
                            "cafe\xcc\x81 \xce\xb1\xce\xb2\xce\xb3 \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\n"
                            "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
                            "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 "
                            "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xef\xbc\x81\xef\xbc\x9f\xe3\x80\x82 "
                            "\xe2\x80\x9cquoted\xe2\x80\x9d\r\n"
                            "#tag @user `code` a_b-c/d.e ...!!\n\n  x\t\ty  <a/>//\n"
                            "$5 \xe2\x82\xac" "100 \xe2\x85\xab 3\xc2\xbd   \n"
                            "   end   ";

typedef struct {
	ev_buf *b;
} words_ctx;

/* each word as its length and bytes, so that two lists compare as bytes */
static int put_word(void *ctx, const char *s, size_t len)
{
	ev_buf *b = ((words_ctx *)ctx)->b;
	uint32_t n = (uint32_t)len;
	if (ev_buf_append(b, (const char *)&n, sizeof n) || ev_buf_append(b, s, len))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	return 0;
}

/* The probe's words under a pre_tokenizer (JSON text), into b */
static int probe_words(const char *pre_json, ev_buf *b)
{
	char *json = ev_asprintf("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":%s}",
	                         pre_json);
	if (!json)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	eng_tokenizer *tok = NULL;
	int rc = eng_tokenizer_load_json(&tok, json, strlen(json), "pre_tokenizer");
	words_ctx wc = {b};
	if (!rc)
		rc = eng_tok_words(tok, probe, sizeof probe - 1, put_word, &wc);
	eng_tokenizer_free(tok);
	free(json);
	return rc;
}

int eng_gguf_pre_match(const cJSON *pre_tokenizer, bool ignore_merges, const eng_gguf_pre **out)
{
	*out = NULL;
	char *theirs = pre_tokenizer ? cJSON_PrintUnformatted(pre_tokenizer) : NULL;
	if (!theirs)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	ev_buf want = EV_BUF_INIT(1 << 20);
	int rc = probe_words(theirs, &want);
	free(theirs);
	const eng_gguf_pre *other = NULL; /* the same words, the other ignore_merges */
	for (size_t g = 0; g < eng_gguf_npres && !rc && !*out; g++) {
		char *ours = eng_gguf_pre_json(&eng_gguf_pres[g]);
		ev_buf got = EV_BUF_INIT(1 << 20);
		rc = ours ? probe_words(ours, &got) : ev_error_set(EV_E_NOMEM, "out of memory");
		if (!rc && got.len == want.len && !memcmp(got.data, want.data, got.len)) {
			if (eng_gguf_pres[g].ignore_merges == ignore_merges)
				*out = &eng_gguf_pres[g];
			else if (!other)
				other = &eng_gguf_pres[g];
		}
		free(ours);
		ev_buf_free(&got);
	}
	ev_buf_free(&want);
	if (!rc && !*out)
		*out = other;
	return rc;
}
