/*
 * engine/tokenizer.c: loading a byte-level BPE tokenizer.json into flat
 * tables, encoding (added tokens, then pre-tokenizer and BPE), decoding,
 * and the streaming detokenizer.
 */
#include "engine/tokenizer/tokenizer_int.h"

#include <utf8proc.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the bytes -> id map ------------------------------------------------- */

static const char *ent_bytes(const eng_tokenizer *tok, int32_t id, size_t *len)
{
	*len = tok->ent[id].len;
	return tok->pool + tok->ent[id].off;
}

int32_t eng_tok_lookup(const eng_tokenizer *tok, const char *s, size_t len)
{
	if (!tok->bmap)
		return -1;
	for (size_t i = eng_tok_hash(s, len) & tok->bmap_mask; tok->bmap[i]; i = (i + 1) & tok->bmap_mask) {
		int32_t id = (int32_t)tok->bmap[i] - 1;
		size_t n;
		const char *b = ent_bytes(tok, id, &n);
		if (n == len && memcmp(b, s, len) == 0)
			return id;
	}
	return -1;
}

/* Adds id to the map unless its bytes are there already (first one wins). */
static void bmap_put(eng_tokenizer *tok, int32_t id)
{
	size_t len;
	const char *s = ent_bytes(tok, id, &len);
	size_t i = eng_tok_hash(s, len) & tok->bmap_mask;
	for (; tok->bmap[i]; i = (i + 1) & tok->bmap_mask) {
		size_t n;
		const char *b = ent_bytes(tok, (int32_t)tok->bmap[i] - 1, &n);
		if (n == len && memcmp(b, s, len) == 0)
			return;
	}
	tok->bmap[i] = (uint32_t)id + 1;
}

/* ---- loading ---------------------------------------------------------------- */

typedef struct {
	const char *what; /* file name for messages */
	ev_buf pool;
} loader;

/* The byte id a SentencePiece byte-fallback token's text names
 * ("<0x0A>" -> 10), or -1. */
static int byte_token(const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
		return -1;
	const char *h = strchr(hex, s[3]), *l = strchr(hex, s[4]);
	return h && l && s[3] && s[4] ? (int)((h - hex) << 4 | (l - hex)) : -1;
}

/* Vocab text in the form the pool keeps: byte-level text unmapped to its
 * bytes when it can be; SentencePiece text with the metaspace as ' '.
 * out has room for len bytes (both forms only shrink). */
static void vocab_form(const eng_tokenizer *tok, const char *text, size_t len, char *out, size_t *n)
{
	if (!tok->spm) {
		if (!eng_tok_unmap(text, len, out, n))
			memcpy(out, text, *n = len);
		return;
	}
	size_t k = 0;
	for (size_t i = 0; i < len; i++) {
		if (i + 3 <= len && !memcmp(text + i, ENG_TOK_METASPACE, 3)) {
			out[k++] = ' ';
			i += 2;
		} else {
			out[k++] = text[i];
		}
	}
	*n = k;
}

/* Stores vocab text (in vocab_form when `convert`, verbatim otherwise)
 * and returns the pool offset. */
static int pool_add(const eng_tokenizer *tok, loader *ld, const char *text, size_t len, bool convert, uint32_t *off,
		    uint32_t *out_len)
{
	char tmp[ENG_TOK_MAX_TOKEN_BYTES];
	size_t n = len;
	const char *src = text;
	if (convert && len <= sizeof tmp) {
		vocab_form(tok, text, len, tmp, &n);
		src = tmp;
	}
	if (ld->pool.len > UINT32_MAX - n - 1)
		return ev_error_set(EV_E_LIMIT, "%s: vocab text over 4 GiB", ld->what);
	*off = (uint32_t)ld->pool.len;
	*out_len = (uint32_t)n;
	return ev_buf_append(&ld->pool, src, n);
}

static int parse_id(int32_t *out, const cJSON *v, const char *what, const char *field)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= ENG_TOK_MAX_VOCAB ||
	    v->valuedouble != (double)(int32_t)v->valuedouble)
		return ev_error_set(EV_E_INVALID, "%s: %s: id must be an integer in [0, %d)", what, field,
				    ENG_TOK_MAX_VOCAB);
	*out = (int32_t)v->valuedouble;
	return 0;
}

static int load_vocab(eng_tokenizer *tok, loader *ld, const cJSON *vocab, const cJSON *added)
{
	int rc = 0;
	if (!cJSON_IsObject(vocab))
		return ev_error_set(EV_E_INVALID, "%s: model.vocab: expected an object", ld->what);
	size_t nv = 0;
	int32_t max_id = -1;
	const cJSON *v;
	cJSON_ArrayForEach(v, vocab)
	{
		int32_t id = 0;
		if (++nv > ENG_TOK_MAX_VOCAB)
			return ev_error_set(EV_E_LIMIT, "%s: model.vocab: more than %d entries", ld->what,
					    ENG_TOK_MAX_VOCAB);
		char field[64];
		snprintf(field, sizeof field, "model.vocab[%zu]", nv - 1);
		if ((rc = parse_id(&id, v, ld->what, field)))
			return rc;
		max_id = id > max_id ? id : max_id;
	}
	if (added && !cJSON_IsArray(added))
		return ev_error_set(EV_E_INVALID, "%s: added_tokens: expected an array", ld->what);
	size_t na = 0;
	cJSON_ArrayForEach(v, added)
	{
		int32_t id;
		char field[64];
		snprintf(field, sizeof field, "added_tokens[%zu].id", na);
		if ((rc = parse_id(&id, cJSON_GetObjectItemCaseSensitive(v, "id"), ld->what, field)))
			return rc;
		const char *content = ev_json_str(v, "content", NULL);
		if (!content || !*content)
			return ev_error_set(EV_E_INVALID, "%s: added_tokens[%zu].content: expected a non-empty string",
					    ld->what, na);
		max_id = id > max_id ? id : max_id;
		na++;
	}
	tok->n_ent = (size_t)(max_id + 1);
	tok->ent = calloc(tok->n_ent ? tok->n_ent : 1, sizeof *tok->ent);
	tok->added = calloc(na ? na : 1, sizeof *tok->added);
	if (!tok->ent || !tok->added)
		return ev_error_set(EV_E_NOMEM, "%s: out of memory for %zu tokens", ld->what, tok->n_ent);

	size_t i = 0;
	cJSON_ArrayForEach(v, vocab)
	{
		int32_t id = (int32_t)v->valuedouble;
		size_t len = strlen(v->string);
		if (len == 0 || len > ENG_TOK_MAX_TOKEN_BYTES)
			return ev_error_set(EV_E_INVALID, "%s: model.vocab[%zu]: token of %zu bytes (1..%d)", ld->what,
					    i, len, ENG_TOK_MAX_TOKEN_BYTES);
		if (tok->ent[id].kind != TOK_HOLE)
			return ev_error_set(EV_E_INVALID, "%s: model.vocab[%zu]: id %d given twice", ld->what, i,
					    (int)id);
		tok->ent[id].kind = TOK_VOCAB;
		int b = tok->spm && tok->byte_fallback ? byte_token(v->string, len) : -1;
		if (b >= 0) { /* <0xXX>: decodes to its byte, found through byte_id */
			char c = (char)b;
			tok->ent[id].kind = TOK_BYTE;
			if (tok->byte_id[b] < 0)
				tok->byte_id[b] = id;
			rc = pool_add(tok, ld, &c, 1, false, &tok->ent[id].off, &tok->ent[id].len);
		} else {
			rc = pool_add(tok, ld, v->string, len, true, &tok->ent[id].off, &tok->ent[id].len);
		}
		if (rc)
			return rc;
		i++;
	}
	/* Added tokens are matched and decoded verbatim; one may also sit in
	 * the vocab under the same id (the usual case). */
	i = 0;
	cJSON_ArrayForEach(v, added)
	{
		int32_t id = (int32_t)ev_json_num(v, "id", 0);
		const char *content = ev_json_str(v, "content", "");
		size_t len = strlen(content);
		if (len > ENG_TOK_MAX_TOKEN_BYTES)
			return ev_error_set(EV_E_INVALID, "%s: added_tokens[%zu].content: over %d bytes", ld->what, i,
					    ENG_TOK_MAX_TOKEN_BYTES);
		tok->ent[id].kind = ev_json_bool(v, "special", false) ? TOK_SPECIAL : TOK_ADDED;
		if ((rc = pool_add(tok, ld, content, len, false, &tok->ent[id].off, &tok->ent[id].len)))
			return rc;
		bool dup = false;
		for (size_t k = 0; k < tok->n_added; k++)
			dup |= tok->added[k] == id;
		if (!dup)
			tok->added[tok->n_added++] = id;
		i++;
	}
	return 0;
}

/* The id of a vocab token from its text (text) and pool form (form). */
static int32_t vocab_id(const eng_tokenizer *tok, const char *text, size_t tlen, const char *form, size_t flen)
{
	int b = tok->spm && tok->byte_fallback ? byte_token(text, tlen) : -1;
	if (b >= 0 && tok->byte_id[b] >= 0)
		return tok->byte_id[b];
	return eng_tok_lookup(tok, form, flen);
}

static int load_merges(eng_tokenizer *tok, loader *ld, const cJSON *merges)
{
	if (!merges)
		return eng_tok_pairmap_init(&tok->merges, 0);
	if (!cJSON_IsArray(merges))
		return ev_error_set(EV_E_INVALID, "%s: model.merges: expected an array", ld->what);
	size_t n = (size_t)cJSON_GetArraySize(merges);
	if (n > ENG_TOK_MAX_MERGES)
		return ev_error_set(EV_E_LIMIT, "%s: model.merges: %zu entries, over %d", ld->what, n,
				    ENG_TOK_MAX_MERGES);
	int rc = eng_tok_pairmap_init(&tok->merges, n);
	if (rc)
		return rc;
	char a[ENG_TOK_MAX_TOKEN_BYTES], b[ENG_TOK_MAX_TOKEN_BYTES], ab[2 * ENG_TOK_MAX_TOKEN_BYTES];
	size_t idx = 0;
	const cJSON *m;
	cJSON_ArrayForEach(m, merges)
	{
		const char *pa = NULL, *pb = NULL;
		size_t la = 0, lb = 0;
		if (cJSON_IsString(m)) {
			const char *s = m->valuestring, *sp = strchr(s, ' ');
			if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1])
				return ev_error_set(EV_E_INVALID,
						    "%s: model.merges[%zu]: \"%.64s\" is not two tokens split by one space",
						    ld->what, idx, s);
			pa = s, la = (size_t)(sp - s);
			pb = sp + 1, lb = strlen(pb);
		} else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
			   cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
			pa = cJSON_GetArrayItem(m, 0)->valuestring, la = strlen(pa);
			pb = cJSON_GetArrayItem(m, 1)->valuestring, lb = strlen(pb);
		} else {
			return ev_error_set(EV_E_INVALID,
					    "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", ld->what, idx);
		}
		size_t na, nb;
		if (la == 0 || lb == 0 || la > sizeof a || lb > sizeof b)
			return ev_error_set(EV_E_INVALID, "%s: model.merges[%zu]: empty or overlong part", ld->what,
					    idx);
		vocab_form(tok, pa, la, a, &na);
		vocab_form(tok, pb, lb, b, &nb);
		int32_t ia = vocab_id(tok, pa, la, a, na), ib = vocab_id(tok, pb, lb, b, nb);
		if (ia < 0 || ib < 0)
			return ev_error_set(EV_E_INVALID, "%s: model.merges[%zu]: unknown token \"%.*s\"", ld->what,
					    idx, (int)(ia < 0 ? la : lb), ia < 0 ? pa : pb);
		memcpy(ab, a, na);
		memcpy(ab + na, b, nb);
		int32_t r = eng_tok_lookup(tok, ab, na + nb);
		if (r < 0)
			return ev_error_set(EV_E_INVALID, "%s: model.merges[%zu]: merged token \"%.*s%.*s\" is not in the vocab",
					    ld->what, idx, (int)la, pa, (int)lb, pb);
		eng_tok_pairmap_put(&tok->merges, ia, ib, (int32_t)idx, r);
		idx++;
	}
	return 0;
}

static int parse_split(eng_tok_step *st, const cJSON *pt, const char *what, const char *field)
{
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
	const char *re = ev_json_str(pat, "Regex", NULL), *lit = ev_json_str(pat, "String", NULL);
	if (!re && !lit)
		return ev_error_set(EV_E_INVALID, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}",
				    what, field);
	const char *beh = ev_json_str(pt, "behavior", "Isolated");
	static const struct {
		const char *name;
		eng_tok_split_behavior b;
	} names[] = {{"Removed", SPLIT_REMOVED},
		     {"Isolated", SPLIT_ISOLATED},
		     {"MergedWithPrevious", SPLIT_MERGED_PREV},
		     {"MergedWithNext", SPLIT_MERGED_NEXT},
		     {"Contiguous", SPLIT_CONTIGUOUS}};
	size_t i;
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(beh, names[i].name) == 0)
			break;
	if (i == sizeof names / sizeof names[0])
		return ev_error_set(EV_E_INVALID, "%s: %s.behavior: unknown \"%.64s\"", what, field, beh);
	st->behavior = names[i].b;
	st->invert = ev_json_bool(pt, "invert", false);
	char where[160];
	snprintf(where, sizeof where, "%s: %s.pattern", what, field);
	return eng_tok_regex(&st->re, re ? re : lit, !re, where);
}

static int parse_step(eng_tokenizer *tok, const cJSON *pt, const char *what, const char *field, bool *bytelevel)
{
	const char *type = ev_json_str(pt, "type", NULL);
	if (!type)
		return ev_error_set(EV_E_INVALID, "%s: %s.type: missing", what, field);
	if (tok->n_steps == ENG_TOK_MAX_STEPS)
		return ev_error_set(EV_E_LIMIT, "%s: %s: more than %d steps", what, field, ENG_TOK_MAX_STEPS);
	eng_tok_step *st = &tok->steps[tok->n_steps];
	memset(st, 0, sizeof *st);
	if (strcmp(type, "ByteLevel") == 0) {
		st->bytelevel = true;
		st->add_prefix_space = ev_json_bool(pt, "add_prefix_space", false);
		st->behavior = SPLIT_ISOLATED;
		*bytelevel = true;
		if (ev_json_bool(pt, "use_regex", true)) {
			char where[160];
			snprintf(where, sizeof where, "%s: %s", what, field);
			int rc = eng_tok_regex(&st->re, eng_tok_gpt2_pattern, false, where);
			if (rc)
				return rc;
		}
		tok->n_steps++;
		return 0;
	}
	if (strcmp(type, "Metaspace") == 0) {
		if (!tok->spm)
			return ev_error_set(EV_E_UNSUPPORTED, "%s: %s: Metaspace beside ByteLevel is not supported", what, field);
		if (strcmp(ev_json_str(pt, "replacement", ENG_TOK_METASPACE), ENG_TOK_METASPACE))
			return ev_error_set(EV_E_UNSUPPORTED, "%s: %s.replacement: only U+2581 is supported", what, field);
		const char *scheme = ev_json_str(pt, "prepend_scheme", NULL);
		st->metaspace = true;
		st->prepend = scheme ? (!strcmp(scheme, "always") ? 2 : !strcmp(scheme, "first") ? 1 : 0)
		                     : (ev_json_bool(pt, "add_prefix_space", true) ? 2 : 0);
		if (scheme && strcmp(scheme, "always") && strcmp(scheme, "first") && strcmp(scheme, "never"))
			return ev_error_set(EV_E_INVALID, "%s: %s.prepend_scheme: \"%.32s\" (always, first, never)", what, field,
			                    scheme);
		st->split = ev_json_bool(pt, "split", true);
		tok->n_steps++;
		return 0;
	}
	if (strcmp(type, "Split") == 0) {
		int rc = parse_split(st, pt, what, field);
		if (!rc)
			tok->n_steps++;
		return rc;
	}
	if (strcmp(type, "Digits") == 0) {
		/* Rust's char::is_numeric (Nd, Nl, No): each digit alone, or
		 * runs of them kept together */
		bool each = ev_json_bool(pt, "individual_digits", false);
		st->behavior = each ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
		char where[160];
		snprintf(where, sizeof where, "%s: %s", what, field);
		int rc = eng_tok_regex(&st->re, "[\\p{Nd}\\p{Nl}\\p{No}]", false, where);
		if (!rc)
			tok->n_steps++;
		return rc;
	}
	return ev_error_set(EV_E_UNSUPPORTED, "%s: %s.type: pre-tokenizer \"%.64s\" is not supported", what, field,
			    type);
}

static int load_pretok(eng_tokenizer *tok, const cJSON *root, const char *what)
{
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
	bool bytelevel = false;
	int rc = 0;
	if (cJSON_IsObject(pt) && strcmp(ev_json_str(pt, "type", ""), "Sequence") == 0) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
		if (!cJSON_IsArray(list))
			return ev_error_set(EV_E_INVALID, "%s: pre_tokenizer.pretokenizers: expected an array", what);
		size_t i = 0;
		const cJSON *s;
		cJSON_ArrayForEach(s, list)
		{
			char field[64];
			snprintf(field, sizeof field, "pre_tokenizer.pretokenizers[%zu]", i++);
			if ((rc = parse_step(tok, s, what, field, &bytelevel)))
				return rc;
		}
	} else if (cJSON_IsObject(pt)) {
		if ((rc = parse_step(tok, pt, what, "pre_tokenizer", &bytelevel)))
			return rc;
	}
	(void)bytelevel; /* without it: SentencePiece-converted BPE (tok->spm) */
	return 0;
}

/* Whether the pre-tokenizer (or one of a Sequence) is ByteLevel: then the
 * vocab is byte-level text; otherwise SentencePiece-converted. */
static bool has_bytelevel(const cJSON *root)
{
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), *x;
	if (!strcmp(ev_json_str(pt, "type", ""), "ByteLevel"))
		return true;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"))
	if (!strcmp(ev_json_str(x, "type", ""), "ByteLevel"))
		return true;
	return false;
}

/* The decoder's one effect evald needs to know of: a leading space
 * dropped (Strip with start >= 1 after Fuse, or Metaspace prepending). */
static void load_decoder(eng_tokenizer *tok, const cJSON *root)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "decoder"), *x;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
	const cJSON *one = cJSON_IsArray(list) ? NULL : d, *steps = cJSON_IsArray(list) ? list : NULL;
	cJSON_ArrayForEach(x, steps)
	{
		const char *t = ev_json_str(x, "type", "");
		if (!strcmp(t, "Strip") && !strcmp(ev_json_str(x, "content", ""), " ") && ev_json_num(x, "start", 0) >= 1)
			tok->strip_lead = true;
		if (!strcmp(t, "Metaspace"))
			one = x;
	}
	if (one && !strcmp(ev_json_str(one, "type", ""), "Metaspace")) {
		const char *scheme = ev_json_str(one, "prepend_scheme", NULL);
		tok->strip_lead = scheme ? strcmp(scheme, "never") != 0 : ev_json_bool(one, "add_prefix_space", true);
	}
}

static int check_model(const cJSON *root, const char *what)
{
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (!cJSON_IsObject(model))
		return ev_error_set(EV_E_INVALID, "%s: model: expected an object", what);
	const char *type = ev_json_str(model, "type", "BPE");
	if (strcmp(type, "BPE") != 0)
		return ev_error_set(EV_E_UNSUPPORTED, "%s: model.type: \"%.64s\" is not supported (BPE only)", what,
				    type);
	const char *pre = ev_json_str(model, "continuing_subword_prefix", ""),
		   *suf = ev_json_str(model, "end_of_word_suffix", "");
	if ((pre && *pre) || (suf && *suf))
		return ev_error_set(EV_E_UNSUPPORTED, "%s: model: subword prefixes/suffixes are not supported", what);
	if (ev_json_bool(model, "byte_fallback", false) && has_bytelevel(root))
		return ev_error_set(EV_E_UNSUPPORTED, "%s: model.byte_fallback with a ByteLevel pre-tokenizer is not supported",
				    what);
	return 0;
}

/* One normalizer (or each of a Sequence) as utf8proc options. */
static int parse_norm(eng_tokenizer *tok, const cJSON *n, const char *what, const char *field)
{
	static const struct {
		const char *name;
		int opts;
	} forms[] = {
		{"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
		{"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
		{"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
		{"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT},
	};
	const char *t = ev_json_str(n, "type", "");
	if (!strcmp(t, "Sequence")) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
		if (!cJSON_IsArray(list))
			return ev_error_set(EV_E_INVALID, "%s: %s.normalizers: expected an array", what, field);
		size_t i = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, list)
		{
			char f[96];
			snprintf(f, sizeof f, "%s.normalizers[%zu]", field, i++);
			int rc = parse_norm(tok, x, what, f);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (tok->n_norm == ENG_TOK_MAX_STEPS)
		return ev_error_set(EV_E_LIMIT, "%s: %s: more than %d normalizers", what, field, ENG_TOK_MAX_STEPS);
	eng_tok_norm *nm = &tok->norm[tok->n_norm];
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		if (!strcmp(t, forms[i].name)) {
			*nm = (eng_tok_norm){NORM_FORM, forms[i].opts, NULL, NULL};
			tok->n_norm++;
			return 0;
		}
	}
	/* Prepend and Replace, as SentencePiece conversions write them; their
	 * text in pool form (the metaspace as ' ') */
	char a[256], b[256];
	size_t na = 0, nb = 0;
	if (!strcmp(t, "Prepend")) {
		const char *pre = ev_json_str(n, "prepend", NULL);
		if (!pre || strlen(pre) > sizeof a)
			return ev_error_set(EV_E_INVALID, "%s: %s.prepend: expected a short string", what, field);
		vocab_form(tok, pre, strlen(pre), a, &na);
		*nm = (eng_tok_norm){NORM_PREPEND, 0, ev_strndup(a, na), NULL};
		tok->n_norm++;
		return nm->a ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!strcmp(t, "Replace")) {
		const char *pat = ev_json_str(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String", NULL),
			   *content = ev_json_str(n, "content", NULL);
		if (!pat || !content || !*pat || strlen(pat) > sizeof a || strlen(content) > sizeof b)
			return ev_error_set(EV_E_UNSUPPORTED, "%s: %s: only Replace of a short literal String is supported",
					    what, field);
		vocab_form(tok, pat, strlen(pat), a, &na);
		vocab_form(tok, content, strlen(content), b, &nb);
		*nm = (eng_tok_norm){NORM_REPLACE, 0, ev_strndup(a, na), ev_strndup(b, nb)};
		tok->n_norm++;
		return nm->a && nm->b ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return ev_error_set(EV_E_UNSUPPORTED,
			    "%s: %s: normalizer \"%.64s\" is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)",
			    what, field, t);
}

static int load_norm(eng_tokenizer *tok, const cJSON *root, const char *what)
{
	const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
	if (!norm || cJSON_IsNull(norm))
		return 0;
	if (!cJSON_IsObject(norm))
		return ev_error_set(EV_E_INVALID, "%s: normalizer: expected an object or null", what);
	return parse_norm(tok, norm, what, "normalizer");
}

/* An id of the vocab by its token text (a post-processor names them so). */
static int post_id(eng_tokenizer *tok, const cJSON *special, const char *name, int32_t *out, const char *what,
		   const char *field)
{
	/* TemplateProcessing's special_tokens table gives the ids */
	const cJSON *entry = cJSON_GetObjectItemCaseSensitive(special, name);
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(entry, "ids");
	if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 1 && cJSON_IsNumber(ids->child) &&
	    ids->child->valuedouble >= 0 && ids->child->valuedouble < (double)tok->n_ent) {
		*out = (int32_t)ids->child->valuedouble;
		return 0;
	}
	int32_t id = eng_token_id(tok, name);
	if (id < 0)
		return ev_error_set(EV_E_INVALID, "%s: %s: special token \"%.64s\" is not in the vocab", what, field, name);
	*out = id;
	return 0;
}

static int post_push(eng_tokenizer *tok, bool after, int32_t id, const char *what)
{
	size_t *n = after ? &tok->n_post_suf : &tok->n_post_pre;
	if (*n == ENG_TOK_MAX_AFFIX)
		return ev_error_set(EV_E_LIMIT, "%s: post_processor: more than %d special tokens", what, ENG_TOK_MAX_AFFIX);
	(after ? tok->post_suf : tok->post_pre)[(*n)++] = id;
	return 0;
}

/* The post-processor's template for one sequence. */
static int parse_post(eng_tokenizer *tok, const cJSON *pp, const char *what, const char *field)
{
	const char *t = ev_json_str(pp, "type", "");
	int rc = 0;
	if (!strcmp(t, "ByteLevel"))
		return 0; /* offsets only */
	if (!strcmp(t, "Sequence")) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
		if (!cJSON_IsArray(list))
			return ev_error_set(EV_E_INVALID, "%s: %s.processors: expected an array", what, field);
		size_t i = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, list)
		{
			char f[96];
			snprintf(f, sizeof f, "%s.processors[%zu]", field, i++);
			if ((rc = parse_post(tok, x, what, f)))
				return rc;
		}
		return 0;
	}
	if (!strcmp(t, "TemplateProcessing")) {
		const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
		const cJSON *special = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
		if (!cJSON_IsArray(single))
			return ev_error_set(EV_E_INVALID, "%s: %s.single: expected an array", what, field);
		bool after = false, seen = false;
		const cJSON *piece;
		cJSON_ArrayForEach(piece, single)
		{
			const cJSON *sp = cJSON_GetObjectItemCaseSensitive(piece, "SpecialToken");
			const cJSON *sq = cJSON_GetObjectItemCaseSensitive(piece, "Sequence");
			if (sq) {
				if (seen)
					return ev_error_set(EV_E_UNSUPPORTED, "%s: %s.single: more than one sequence", what, field);
				seen = after = true;
			} else if (sp) {
				const char *name = ev_json_str(sp, "id", NULL);
				int32_t id = -1;
				if (!name)
					return ev_error_set(EV_E_INVALID, "%s: %s.single: a SpecialToken without an id", what, field);
				if ((rc = post_id(tok, special, name, &id, what, field)) || (rc = post_push(tok, after, id, what)))
					return rc;
			} else {
				return ev_error_set(EV_E_INVALID, "%s: %s.single: expected SpecialToken or Sequence pieces", what,
						    field);
			}
		}
		return 0;
	}
	if (!strcmp(t, "RobertaProcessing") || !strcmp(t, "BertProcessing")) {
		/* "cls": ["<s>", 0], "sep": ["</s>", 2] */
		const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
		const cJSON *ci = cJSON_GetArrayItem(cls, 1), *si = cJSON_GetArrayItem(sep, 1);
		if (!cJSON_IsNumber(ci) || !cJSON_IsNumber(si) || ci->valuedouble < 0 || si->valuedouble < 0 ||
		    ci->valuedouble >= (double)tok->n_ent || si->valuedouble >= (double)tok->n_ent)
			return ev_error_set(EV_E_INVALID, "%s: %s: cls and sep must be [token, id] with ids in the vocab", what,
					    field);
		if ((rc = post_push(tok, false, (int32_t)ci->valuedouble, what)))
			return rc;
		return post_push(tok, true, (int32_t)si->valuedouble, what);
	}
	return ev_error_set(EV_E_UNSUPPORTED,
			    "%s: %s: post-processor \"%.64s\" is not supported (TemplateProcessing, ByteLevel, Roberta/"
			    "BertProcessing, Sequence)",
			    what, field, t);
}

static int load_post(eng_tokenizer *tok, const cJSON *root, const char *what)
{
	const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
	if (!pp || cJSON_IsNull(pp))
		return 0;
	if (!cJSON_IsObject(pp))
		return ev_error_set(EV_E_INVALID, "%s: post_processor: expected an object or null", what);
	return parse_post(tok, pp, what, "post_processor");
}

void eng_tokenizer_affixes(const eng_tokenizer *tok, const int32_t **pre, size_t *n_pre, const int32_t **suf,
			   size_t *n_suf)
{
	*pre = tok->post_pre;
	*n_pre = tok->n_post_pre;
	*suf = tok->post_suf;
	*n_suf = tok->n_post_suf;
}

static int cmp_added(const void *a, const void *b, void *tokp)
{
	const eng_tokenizer *tok = tokp;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	if (tok->ent[x].len != tok->ent[y].len)
		return tok->ent[x].len > tok->ent[y].len ? -1 : 1;
	return x < y ? -1 : x > y;
}

int eng_tokenizer_load_json(eng_tokenizer **out, const char *json, size_t len, const char *what)
{
	*out = NULL;
	cJSON *root = NULL;
	loader ld = {what, EV_BUF_INIT(UINT32_MAX)};
	eng_tokenizer *tok = calloc(1, sizeof *tok);
	int rc = 0;
	if (!tok)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	pthread_mutex_init(&tok->lock, NULL);
	tok->bos_id = tok->eos_id = -1;
	if (len > ENG_TOK_MAX_FILE) {
		rc = ev_error_set(EV_E_LIMIT, "%s: %zu bytes, over the limit of %zu", what, len, ENG_TOK_MAX_FILE);
		goto done;
	}
	if ((rc = ev_json_parse(&root, json, len, what)))
		goto done;
	if (!cJSON_IsObject(root)) {
		rc = ev_error_set(EV_E_INVALID, "%s: expected a JSON object", what);
		goto done;
	}
	if ((rc = check_model(root, what)))
		goto done;
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	tok->spm = !has_bytelevel(root);
	tok->byte_fallback = tok->spm && ev_json_bool(model, "byte_fallback", false);
	tok->fuse_unk = ev_json_bool(model, "fuse_unk", false);
	tok->unk_id = -1;
	for (int b = 0; b < 256; b++)
		tok->byte_id[b] = -1;
	if ((rc = load_vocab(tok, &ld, cJSON_GetObjectItemCaseSensitive(model, "vocab"),
			     cJSON_GetObjectItemCaseSensitive(root, "added_tokens"))))
		goto done;
	tok->pool = ev_buf_detach(&ld.pool, &tok->pool_len);

	/* bytes -> id over vocab and normal added tokens; special ones are
	 * reached through the added-token scan only. */
	size_t cap = 64;
	while (cap < tok->n_ent * 2 + 1)
		cap *= 2;
	tok->bmap = calloc(cap, sizeof *tok->bmap);
	if (!tok->bmap) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	tok->bmap_mask = cap - 1;
	for (size_t id = 0; id < tok->n_ent; id++)
		if (tok->ent[id].kind == TOK_VOCAB || tok->ent[id].kind == TOK_ADDED)
			bmap_put(tok, (int32_t)id);
	for (int b = 0; b < 256 && !tok->spm; b++) {
		char c = (char)b;
		tok->byte_id[b] = eng_tok_lookup(tok, &c, 1);
	}
	const char *unk = ev_json_str(model, "unk_token", NULL);
	if (unk && (tok->unk_id = eng_token_id(tok, unk)) < 0) {
		rc = ev_error_set(EV_E_INVALID, "%s: model.unk_token \"%.64s\" is not in the vocab", what, unk);
		goto done;
	}
	load_decoder(tok, root);
	if ((rc = load_merges(tok, &ld, cJSON_GetObjectItemCaseSensitive(model, "merges"))))
		goto done;
	tok->ignore_merges = ev_json_bool(model, "ignore_merges", false);
	if ((rc = load_pretok(tok, root, what)) || (rc = load_norm(tok, root, what)) || (rc = load_post(tok, root, what)))
		goto done;

	qsort_r(tok->added, tok->n_added, sizeof *tok->added, cmp_added, tok);
	for (size_t k = 0; k < tok->n_added; k++) {
		const eng_tok_entry *e = &tok->ent[tok->added[k]];
		tok->first_byte[(unsigned char)tok->pool[e->off]] = true;
		tok->any_normal_added |= e->kind == TOK_ADDED;
	}
done:
	cJSON_Delete(root);
	ev_buf_free(&ld.pool);
	if (rc)
		eng_tokenizer_free(tok);
	else
		*out = tok;
	return rc;
}

/* bos_token / eos_token: a string, or {"content": ...} (older configs). */
static int32_t config_token(const eng_tokenizer *tok, const cJSON *cfg, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
	const char *s = cJSON_IsString(v) ? v->valuestring : ev_json_str(v, "content", NULL);
	return s ? eng_token_id(tok, s) : -1;
}

int eng_tokenizer_load(eng_tokenizer **out, const char *dir_or_file)
{
	*out = NULL;
	struct stat st;
	char *path = NULL, *text = NULL, *cfgpath = NULL, *cfgtext = NULL;
	size_t len = 0, cfglen = 0;
	cJSON *cfg = NULL;
	int rc;
	bool is_dir = stat(dir_or_file, &st) == 0 && S_ISDIR(st.st_mode);
	path = is_dir ? ev_asprintf("%s/tokenizer.json", dir_or_file) : ev_strdup(dir_or_file);
	if (!path)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if ((rc = ev_file_read(&text, &len, path, ENG_TOK_MAX_FILE)))
		goto done;
	if ((rc = eng_tokenizer_load_json(out, text, len, path)))
		goto done;
	if (is_dir) {
		cfgpath = ev_asprintf("%s/tokenizer_config.json", dir_or_file);
		if (cfgpath && ev_file_read(&cfgtext, &cfglen, cfgpath, ENG_TOK_MAX_CONFIG) == 0) {
			if ((rc = ev_json_parse(&cfg, cfgtext, cfglen, cfgpath)))
				goto done;
			(*out)->bos_id = config_token(*out, cfg, "bos_token");
			(*out)->eos_id = config_token(*out, cfg, "eos_token");
		}
		ev_error_clear(); /* a missing config is fine */
	}
done:
	if (rc) {
		eng_tokenizer_free(*out);
		*out = NULL;
	}
	cJSON_Delete(cfg);
	free(cfgtext);
	free(cfgpath);
	free(text);
	free(path);
	return rc;
}

void eng_tokenizer_free(eng_tokenizer *tok)
{
	if (!tok)
		return;
	eng_tok_cache_clear(tok);
	free(tok->cache);
	for (size_t k = 0; k < tok->n_steps; k++)
		pcre2_code_free(tok->steps[k].re);
	for (size_t k = 0; k < tok->n_norm; k++) {
		free(tok->norm[k].a);
		free(tok->norm[k].b);
	}
	eng_tok_pairmap_free(&tok->merges);
	pthread_mutex_destroy(&tok->lock);
	free(tok->added);
	free(tok->bmap);
	free(tok->ent);
	free(tok->pool);
	free(tok);
}

/* ---- encoding ------------------------------------------------------------------ */

/* Replaces every `pat` in s[0..len) by `rep` into a malloc'd string. */
static char *replace_all(const char *s, size_t len, const char *pat, const char *rep, size_t *out_len)
{
	size_t pl = strlen(pat), rl = strlen(rep);
	ev_buf b = EV_BUF_INIT(ENG_TOK_MAX_INPUT * 4);
	int rc = 0;
	for (size_t i = 0; i < len && !rc;) {
		if (pl && i + pl <= len && !memcmp(s + i, pat, pl)) {
			rc = ev_buf_append(&b, rep, rl);
			i += pl;
		} else {
			rc = ev_buf_putc(&b, s[i++]);
		}
	}
	if (rc) { /* never a cut text: the callers report out of memory */
		ev_buf_free(&b);
		return NULL;
	}
	if (!b.data) { /* nothing written: an empty string, not NULL (out of memory) */
		*out_len = 0;
		return ev_strdup("");
	}
	return ev_buf_detach(&b, out_len);
}

/* One normalizer step on in[0..n) into a malloc'd *out; 1 when it left the
 * text as it was (nothing allocated), 0 when *out holds the new text. */
static int norm_step(const eng_tok_norm *nm, const char *in, size_t n, char **out, size_t *out_len)
{
	if (nm->kind == NORM_PREPEND) {
		if (!n) /* HF's Prepend leaves empty text alone */
			return 1;
		*out = ev_asprintf("%s%.*s", nm->a, (int)n, in);
		*out_len = strlen(nm->a) + n;
	} else if (nm->kind == NORM_REPLACE) {
		if (!strcmp(nm->a, nm->b))
			return 1; /* " " -> metaspace is no change in pool form */
		*out = replace_all(in, n, nm->a, nm->b, out_len);
	} else {
		bool ascii = true;
		for (size_t i = 0; i < n && ascii; i++)
			ascii = (unsigned char)in[i] < 0x80;
		if (ascii) /* every normal form leaves ASCII alone */
			return 1;
		utf8proc_uint8_t *next = NULL;
		utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)n, &next,
						  (utf8proc_option_t)nm->opts);
		if (m < 0) {
			free(next);
			if (m == UTF8PROC_ERROR_NOMEM)
				return ev_error_set(EV_E_NOMEM, "out of memory normalizing text");
			return 1; /* not valid UTF-8: encoded as it is */
		}
		*out = (char *)next;
		*out_len = (size_t)m;
	}
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory normalizing text");
}

/* A segment between added tokens, through the normalizer. Text that is
 * not valid UTF-8 (which HF's tokenizers cannot take at all) is encoded
 * as it is. SentencePiece-converted vocabularies see the metaspace as a
 * space, so a metaspace in the text is one (as it would match there). */
static int encode_normalized(eng_tok_enc *e, const char *s, size_t len)
{
	const eng_tokenizer *tok = e->tok;
	char *cur = NULL;
	const char *in = s;
	size_t n = len;
	int rc = 0;
	if (tok->spm && len >= 3 && memmem(s, len, ENG_TOK_METASPACE, 3)) {
		if (!(cur = replace_all(s, len, ENG_TOK_METASPACE, " ", &n)))
			return ev_error_set(EV_E_NOMEM, "out of memory normalizing text");
		in = cur;
	}
	for (size_t k = 0; k < tok->n_norm && len; k++) {
		char *next = NULL;
		size_t m = 0;
		if ((rc = norm_step(&tok->norm[k], in, n, &next, &m)) < 0)
			break;
		if (rc == 1) {
			rc = 0;
			continue;
		}
		free(cur);
		cur = next;
		in = cur;
		n = m;
	}
	if (!rc)
		rc = eng_tok_encode_segment(e, in, n);
	free(cur);
	return rc;
}

/* The longest added token at text[i], or -1. */
static int32_t added_at(const eng_tokenizer *tok, const char *text, size_t left, bool allow_special)
{
	for (size_t k = 0; k < tok->n_added; k++) {
		int32_t id = tok->added[k];
		const eng_tok_entry *e = &tok->ent[id];
		if (e->kind == TOK_SPECIAL && !allow_special)
			continue;
		if (e->len <= left && memcmp(tok->pool + e->off, text, e->len) == 0)
			return id; /* longest first */
	}
	return -1;
}

int eng_tokenize(const eng_tokenizer *tok, const char *text, size_t len, bool allow_special, int32_t **ids,
		 size_t *n)
{
	*ids = NULL;
	*n = 0;
	if (len > ENG_TOK_MAX_INPUT)
		return ev_error_set(EV_E_LIMIT, "tokenize: %zu bytes of input, over the limit of %zu", len,
				    ENG_TOK_MAX_INPUT);
	eng_tok_enc e;
	int rc = eng_tok_enc_init(&e, tok);
	if (rc)
		goto done;
	size_t seg = 0;
	if (tok->n_added && (allow_special || tok->any_normal_added)) {
		for (size_t i = 0; i < len; i++) {
			if (!tok->first_byte[(unsigned char)text[i]])
				continue;
			int32_t id = added_at(tok, text + i, len - i, allow_special);
			if (id < 0)
				continue;
			e.text_start = seg == 0;
			if ((rc = encode_normalized(&e, text + seg, i - seg)) || (rc = eng_tok_emit(&e, id)))
				goto done;
			i += tok->ent[id].len;
			seg = i;
			i--; /* the loop's i++ */
		}
	}
	e.text_start = seg == 0;
	if ((rc = encode_normalized(&e, text + seg, len - seg)))
		goto done;
	if (!e.ids && (rc = eng_tok_emit(&e, 0)) == 0)
		e.n = 0; /* never NULL on success */
	if (rc)
		goto done;
	*ids = e.ids;
	*n = e.n;
	e.ids = NULL;
done:
	eng_tok_enc_free(&e);
	return rc;
}

int eng_tokenize_with_specials(const eng_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n)
{
	int32_t *body = NULL;
	size_t nb = 0;
	int rc = eng_tokenize(tok, text, len, true, &body, &nb);
	if (rc)
		return rc;
	size_t total = tok->n_post_pre + nb + tok->n_post_suf;
	int32_t *all = malloc((total ? total : 1) * sizeof *all);
	if (!all) {
		free(body);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	memcpy(all, tok->post_pre, tok->n_post_pre * sizeof *all);
	memcpy(all + tok->n_post_pre, body, nb * sizeof *all);
	memcpy(all + tok->n_post_pre + nb, tok->post_suf, tok->n_post_suf * sizeof *all);
	free(body);
	*ids = all;
	*n = total;
	return 0;
}

int eng_token_piece(const eng_tokenizer *tok, int32_t id, ev_buf *out)
{
	if (id < 0 || (size_t)id >= tok->n_ent || tok->ent[id].kind == TOK_HOLE)
		return ev_error_set(EV_E_INVALID, "id %d is not in the vocab (size %zu)", (int)id, tok->n_ent);
	const eng_tok_entry *e = &tok->ent[id];
	if (e->kind == TOK_BYTE)
		return ev_buf_printf(out, "<0x%02X>", (unsigned char)tok->pool[e->off]);
	if (e->kind == TOK_VOCAB && tok->spm) { /* the metaspace as the vocab writes it */
		for (uint32_t i = 0; i < e->len; i++) {
			char c = tok->pool[e->off + i];
			int rc = c == ' ' ? ev_buf_puts(out, ENG_TOK_METASPACE) : ev_buf_putc(out, c);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (e->kind == TOK_VOCAB)
		return eng_tok_map(out, tok->pool + e->off, e->len);
	return ev_buf_append(out, tok->pool + e->off, e->len);
}

/* ---- decoding ------------------------------------------------------------------ */

static int check_id(const eng_tokenizer *tok, int32_t id)
{
	if (id < 0 || (size_t)id >= tok->n_ent || tok->ent[id].kind == TOK_HOLE)
		return ev_error_set(EV_E_INVALID, "detokenize: id %d is not in the vocab (size %zu)", (int)id,
				    tok->n_ent);
	return 0;
}

int eng_detokenize(const eng_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special, char **out,
		   size_t *out_len)
{
	*out = NULL;
	ev_buf b = EV_BUF_INIT(ENG_TOK_MAX_INPUT);
	int rc = 0;
	bool stripped = false; /* the first token kept has been seen */
	for (size_t i = 0; i < n && !rc; i++) {
		if ((rc = check_id(tok, ids[i])))
			break;
		if (skip_special && tok->ent[ids[i]].kind == TOK_SPECIAL)
			continue;
		size_t len;
		const char *s = ent_bytes(tok, ids[i], &len);
		if (tok->strip_lead && !stripped && len && s[0] == ' ') /* the decoder's Strip */
			s++, len--;
		stripped = true;
		rc = ev_buf_append(&b, s, len);
	}
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	*out = ev_buf_detach(&b, out_len);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

int32_t eng_token_id(const eng_tokenizer *tok, const char *token)
{
	if (!tok || !token)
		return -1;
	size_t len = strlen(token);
	for (size_t k = 0; k < tok->n_added; k++) {
		const eng_tok_entry *e = &tok->ent[tok->added[k]];
		if (e->len == len && memcmp(tok->pool + e->off, token, len) == 0)
			return tok->added[k];
	}
	char tmp[ENG_TOK_MAX_TOKEN_BYTES];
	size_t n;
	if (len <= sizeof tmp) {
		vocab_form(tok, token, len, tmp, &n);
		int32_t id = vocab_id(tok, token, len, tmp, n);
		if (id >= 0)
			return id;
	}
	return eng_tok_lookup(tok, token, len);
}

const char *eng_token_bytes(const eng_tokenizer *tok, int32_t id, size_t *len)
{
	if (id < 0 || (size_t)id >= tok->n_ent || tok->ent[id].kind == TOK_HOLE) {
		*len = 0;
		return NULL;
	}
	return ent_bytes(tok, id, len);
}

bool eng_token_is_special(const eng_tokenizer *tok, int32_t id)
{
	return id >= 0 && (size_t)id < tok->n_ent && tok->ent[id].kind == TOK_SPECIAL;
}

size_t eng_tokenizer_vocab_size(const eng_tokenizer *tok) { return tok->n_ent; }
int32_t eng_tokenizer_bos_id(const eng_tokenizer *tok) { return tok->bos_id; }
int32_t eng_tokenizer_eos_id(const eng_tokenizer *tok) { return tok->eos_id; }

/* ---- streaming ------------------------------------------------------------------ */

struct eng_detok_stream {
	const eng_tokenizer *tok;
	bool skip_special;
	unsigned char held[4]; /* the start of an incomplete UTF-8 sequence */
	size_t n_held;
	bool started;          /* a token was emitted (the decoder's Strip is done) */
};

int eng_detok_stream_new(eng_detok_stream **out, const eng_tokenizer *tok, bool skip_special)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	(*out)->tok = tok;
	(*out)->skip_special = skip_special;
	return 0;
}

void eng_detok_stream_free(eng_detok_stream *s) { free(s); }

static const char replacement[] = "\xEF\xBF\xBD";

/* How a byte sequence starting at p (n bytes) begins: the length of a
 * complete valid character (> 0), 0 when it is a valid but incomplete
 * prefix, -1 when its first byte can start nothing valid. Second bytes are
 * range-checked so overlong forms and surrogates are invalid at once. */
static int utf8_status(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	int need;
	unsigned lo = 0x80, hi = 0xBF;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		lo = c == 0xE0 ? 0xA0 : 0x80;
		hi = c == 0xED ? 0x9F : 0xBF;
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		lo = c == 0xF0 ? 0x90 : 0x80;
		hi = c == 0xF4 ? 0x8F : 0xBF;
	} else
		return -1;
	for (int i = 1; i < need; i++) {
		if ((size_t)i >= n)
			return 0;
		unsigned lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
		if (p[i] < lo_i || p[i] > hi_i)
			return -1;
	}
	return need;
}

/* Emits the valid text of held + s; keeps an incomplete tail held. */
static int stream_feed(eng_detok_stream *st, const unsigned char *s, size_t len, ev_buf *out)
{
	int rc = 0;
	size_t i = 0;
	while (st->n_held && i < len) {
		/* Complete (or refute) the held sequence byte by byte. */
		st->held[st->n_held++] = s[i++];
		int k = utf8_status(st->held, st->n_held);
		if (k > 0) {
			rc = ev_buf_append(out, st->held, (size_t)k);
			st->n_held = 0;
		} else if (k < 0) {
			/* The lead byte was bad after all: replace it, re-read the rest. */
			unsigned char rest[4];
			size_t nr = st->n_held - 1;
			memcpy(rest, st->held + 1, nr);
			st->n_held = 0;
			if ((rc = ev_buf_puts(out, replacement)) || (rc = stream_feed(st, rest, nr, out)))
				return rc;
		}
		if (rc)
			return rc;
	}
	size_t run = i; /* start of bytes copied as they are */
	while (i < len) {
		int k = utf8_status(s + i, len - i);
		if (k > 0) {
			i += (size_t)k;
			continue;
		}
		if ((rc = ev_buf_append(out, s + run, i - run)))
			return rc;
		if (k == 0) { /* incomplete at the end: hold it */
			memcpy(st->held, s + i, len - i);
			st->n_held = len - i;
			return 0;
		}
		if ((rc = ev_buf_puts(out, replacement)))
			return rc;
		run = ++i;
	}
	return ev_buf_append(out, s + run, i - run);
}

int eng_detok_stream_push(eng_detok_stream *s, int32_t id, ev_buf *out)
{
	int rc = check_id(s->tok, id);
	if (rc)
		return rc;
	if (s->skip_special && s->tok->ent[id].kind == TOK_SPECIAL)
		return 0;
	size_t len;
	const char *b = ent_bytes(s->tok, id, &len);
	if (s->tok->strip_lead && !s->started && len && b[0] == ' ')
		b++, len--;
	s->started = true;
	return stream_feed(s, (const unsigned char *)b, len, out);
}

int eng_detok_stream_flush(eng_detok_stream *s, ev_buf *out)
{
	if (!s->n_held)
		return 0;
	s->n_held = 0;
	return ev_buf_puts(out, replacement);
}
