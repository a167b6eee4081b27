/*
 * engine/pretok.c: the pre-tokenizer of the BPE tokenizer: the ByteLevel
 * byte <-> code point map, PCRE2 regex splits with the Hugging Face split
 * behaviors, and the walk of a text segment through the configured steps
 * down to BPE words.
 */
#include "engine/tokenizer/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2: contractions, optionally space-led letters / digits / other
 * symbols, then whitespace (a trailing run keeps its last space for the
 * next word). */
const char eng_tok_gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Llama-3: case-insensitive contractions, letters led by one non-letter,
 * digits in groups of at most three, symbols with trailing newlines,
 * newline runs, whitespace. */
const char eng_tok_llama3_pattern[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
	" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ---- ByteLevel map -------------------------------------------------------- */

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls,
 * space, DEL, NBSP, soft hyphen...) take the code points from 256 up, in
 * byte order. */
static bool byte_is_printable(unsigned b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

static uint16_t byte_cp[256]; /* byte -> code point */
static int16_t cp_byte[324];  /* code point -> byte, -1 for none */
static pthread_once_t map_once = PTHREAD_ONCE_INIT;

static void map_init(void)
{
	uint32_t next = 256;
	for (uint32_t cp = 0; cp < 324; cp++)
		cp_byte[cp] = -1;
	for (unsigned b = 0; b < 256; b++) {
		byte_cp[b] = (uint16_t)(byte_is_printable(b) ? b : next++);
		cp_byte[byte_cp[b]] = (int16_t)b;
	}
}

uint32_t eng_tok_byte_to_cp(unsigned char b)
{
	pthread_once(&map_once, map_init);
	return byte_cp[b];
}

int eng_tok_cp_to_byte(uint32_t cp)
{
	pthread_once(&map_once, map_init);
	return cp < 324 ? cp_byte[cp] : -1;
}

bool eng_tok_unmap(const char *s, size_t len, char *out, size_t *out_len)
{
	pthread_once(&map_once, map_init);
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;
	while (i < len) {
		uint32_t cp;
		size_t k = ev_utf8_next((const char *)p + i, len - i, &cp);
		if (!k || cp >= 324 || cp_byte[cp] < 0)
			return false;
		out[o++] = (char)cp_byte[cp];
		i += k;
	}
	*out_len = o;
	return true;
}

int eng_tok_map(ev_buf *b, const char *s, size_t len)
{
	pthread_once(&map_once, map_init);
	for (size_t i = 0; i < len; i++) {
		uint32_t cp = byte_cp[(unsigned char)s[i]];
		char u[2];
		int rc;
		if (cp < 0x80) {
			rc = ev_buf_putc(b, (char)cp);
		} else {
			u[0] = (char)(0xC0 | (cp >> 6));
			u[1] = (char)(0x80 | (cp & 0x3F));
			rc = ev_buf_append(b, u, 2);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- regex ------------------------------------------------------------- */

int eng_tok_regex(pcre2_code **out, const char *pattern, bool literal, const char *what)
{
	int err = 0;
	PCRE2_SIZE off = 0;
	uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
	opts |= literal ? PCRE2_LITERAL : PCRE2_UCP; /* PCRE2 refuses UCP with LITERAL */
	/* \s and \S as Oniguruma (HF's regex engine) reads them: Unicode's
	 * White_Space. PCRE2's \s also takes U+180E, which Unicode dropped
	 * from White_Space in 6.3. */
	ev_buf pat = EV_BUF_INIT(1 << 20);
	if (!literal) {
		for (const char *p = pattern; *p; p++) {
			if (p[0] == '\\' && (p[1] == 's' || p[1] == 'S')) {
				(void)ev_buf_puts(&pat, p[1] == 's' ? "\\p{White_Space}" : "\\P{White_Space}");
				p++;
			} else if (p[0] == '\\' && p[1]) {
				(void)ev_buf_append(&pat, p, 2);
				p++;
			} else {
				(void)ev_buf_append(&pat, p, 1);
			}
		}
		if (!pat.data) {
			ev_buf_free(&pat);
			return ev_error_set(EV_E_NOMEM, "%s: out of memory", what);
		}
		pattern = pat.data;
	}
	*out = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
	ev_buf_free(&pat);
	if (!*out) {
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(err, msg, sizeof msg);
		return ev_error_set(EV_E_INVALID, "%s: bad regex at offset %zu: %s", what, (size_t)off,
				    (const char *)msg);
	}
	/* JIT is a speed-up only: where it is unavailable the interpreter runs. */
	(void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);
	return 0;
}

/* ---- split ------------------------------------------------------------ */

typedef struct {
	size_t start, end;
	bool delim;
} span;

typedef struct {
	span *v;
	size_t n, cap;
} spanvec;

static int spans_push(spanvec *sv, size_t start, size_t end, bool delim)
{
	if (start == end)
		return 0;
	if (EV_GROW(sv->v, sv->cap, sv->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory splitting text");
	sv->v[sv->n++] = (span){start, end, delim};
	return 0;
}

static int match_error(int rc)
{
	PCRE2_UCHAR msg[256];
	pcre2_get_error_message(rc, msg, sizeof msg);
	return ev_error_set(rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
					    rc == PCRE2_ERROR_JIT_STACKLIMIT
				    ? EV_E_LIMIT
				    : EV_E_INTERNAL,
			    "pre-tokenizer regex: %s", (const char *)msg);
}

int eng_tok_split(const eng_tok_step *step, pcre2_match_data *md, pcre2_match_context *mc,
		  const char *s, size_t len, eng_tok_piece_fn fn, void *ctx)
{
	spanvec sv = {0};
	int rc = 0;
	/* Isolated without invert, the common case, streams its pieces. */
	bool stream = step->behavior == SPLIT_ISOLATED;
	size_t pos = 0, gap = 0;
	while (pos < len) {
		int m = pcre2_match(step->re, (PCRE2_SPTR)s, len, pos, 0, md, mc);
		if (m == PCRE2_ERROR_NOMATCH)
			break;
		if (m < 0) {
			rc = match_error(m);
			goto done;
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		size_t ms = ov[0], me = ov[1];
		if (me <= ms) {
			/* An empty match splits nothing: step over one character. */
			pos = ms + 1;
			while (pos < len && ((unsigned char)s[pos] & 0xC0) == 0x80)
				pos++;
			continue;
		}
		if (stream) {
			if (ms > gap && (rc = fn(ctx, s + gap, ms - gap)))
				goto done;
			if ((rc = fn(ctx, s + ms, me - ms)))
				goto done;
		} else {
			if ((rc = spans_push(&sv, gap, ms, step->invert)) ||
			    (rc = spans_push(&sv, ms, me, !step->invert)))
				goto done;
		}
		gap = pos = me;
	}
	if (stream) {
		if (len > gap)
			rc = fn(ctx, s + gap, len - gap);
		goto done;
	}
	if ((rc = spans_push(&sv, gap, len, step->invert)))
		goto done;

	/* Now group the spans: delimiters are dropped, kept alone, or glued to
	 * a neighbour that is not itself a delimiter. */
	size_t i = 0;
	switch (step->behavior) {
	case SPLIT_REMOVED:
		for (i = 0; i < sv.n && !rc; i++)
			if (!sv.v[i].delim)
				rc = fn(ctx, s + sv.v[i].start, sv.v[i].end - sv.v[i].start);
		break;
	case SPLIT_ISOLATED:
		break;
	case SPLIT_MERGED_PREV:
		while (i < sv.n && !rc) {
			size_t a = sv.v[i].start, b = sv.v[i].end;
			if (!sv.v[i].delim && i + 1 < sv.n && sv.v[i + 1].delim) {
				b = sv.v[i + 1].end;
				i++;
			}
			i++;
			rc = fn(ctx, s + a, b - a);
		}
		break;
	case SPLIT_MERGED_NEXT: {
		/* Walk forward, deciding for each delimiter whether the span
		 * after it is a non-delimiter it joins. */
		while (i < sv.n && !rc) {
			size_t a = sv.v[i].start, b = sv.v[i].end;
			if (sv.v[i].delim && i + 1 < sv.n && !sv.v[i + 1].delim) {
				b = sv.v[i + 1].end;
				i++;
			}
			i++;
			rc = fn(ctx, s + a, b - a);
		}
		break;
	}
	case SPLIT_CONTIGUOUS:
		while (i < sv.n && !rc) {
			size_t a = sv.v[i].start, b = sv.v[i].end;
			if (sv.v[i].delim)
				while (i + 1 < sv.n && sv.v[i + 1].delim)
					b = sv.v[++i].end;
			i++;
			rc = fn(ctx, s + a, b - a);
		}
		break;
	}
done:
	free(sv.v);
	return rc;
}

/* ---- walking a segment through the steps ---------------------------------- */

typedef struct {
	eng_tok_enc *e;
	size_t k;
} walk;

static int walk_piece(void *ctx, const char *s, size_t len);
static int walk_step(eng_tok_enc *e, size_t k, const char *s, size_t len);

/* Metaspace (the metaspace is ' ' in pool form): one prepended when the
 * scheme says so and the text does not start with one, then, with split,
 * a word before each space (the space starting the next word). */
static int metaspace_step(eng_tok_enc *e, size_t k, const char *s, size_t len)
{
	const eng_tok_step *st = &e->tok->steps[k];
	char *copy = NULL;
	if ((st->prepend == 2 || (st->prepend == 1 && e->text_start)) && s[0] != ' ') {
		if (!(copy = malloc(len + 1)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		copy[0] = ' ';
		memcpy(copy + 1, s, len);
		s = copy;
		len++;
	}
	int rc = 0;
	size_t start = 0;
	for (size_t i = 1; st->split && i < len && !rc; i++)
		if (s[i] == ' ') {
			rc = walk_step(e, k + 1, s + start, i - start);
			start = i;
		}
	if (!rc)
		rc = walk_step(e, k + 1, s + start, len - start);
	free(copy);
	return rc;
}

static int walk_step(eng_tok_enc *e, size_t k, const char *s, size_t len)
{
	const eng_tokenizer *tok = e->tok;
	if (len == 0)
		return 0;
	if (k == tok->n_steps)
		return e->word ? e->word(e->word_ctx, s, len) : eng_tok_bpe_word(e, s, len);
	const eng_tok_step *st = &tok->steps[k];
	char *copy = NULL;
	int rc;
	if (st->metaspace)
		return metaspace_step(e, k, s, len);
	if (st->bytelevel && st->add_prefix_space && s[0] != ' ') {
		copy = malloc(len + 1);
		if (!copy)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		copy[0] = ' ';
		memcpy(copy + 1, s, len);
		s = copy;
		len++;
	}
	if (st->re) {
		walk w = {e, k + 1};
		rc = eng_tok_split(st, e->md[k], e->mc, s, len, walk_piece, &w);
	} else {
		rc = walk_step(e, k + 1, s, len);
	}
	free(copy);
	return rc;
}

static int walk_piece(void *ctx, const char *s, size_t len)
{
	walk *w = ctx;
	return walk_step(w->e, w->k, s, len);
}

int eng_tok_encode_segment(eng_tok_enc *e, const char *s, size_t len)
{
	return walk_step(e, 0, s, len);
}

int eng_tok_words(const eng_tokenizer *tok, const char *s, size_t len, eng_tok_piece_fn fn, void *ctx)
{
	eng_tok_enc e;
	int rc = eng_tok_enc_init(&e, tok);
	if (!rc) {
		e.word = fn;
		e.word_ctx = ctx;
		e.text_start = true;
		rc = walk_step(&e, 0, s, len);
	}
	eng_tok_enc_free(&e);
	return rc;
}
