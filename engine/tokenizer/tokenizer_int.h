/*
 * engine/tokenizer/tokenizer_int.h: what the tokenizer's files share (tokenizer.c
 * loads and decodes, bpe.c merges, pretok.c splits, tok_default.c writes
 * the default tokenizer, chat.c renders). Not part of the public API.
 */
#ifndef ENG_TOKENIZER_INT_H
#define ENG_TOKENIZER_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>

#include "engine/tokenizer/tokenizer.h"

/* ---- ByteLevel: the 256 bytes <-> 256 printable code points ------------- */

/* Code point that byte b is written as in a byte-level vocab. */
uint32_t eng_tok_byte_to_cp(unsigned char b);
/* The byte written as code point cp, or -1 when cp is not one of them. */
int eng_tok_cp_to_byte(uint32_t cp);
/* Converts vocab text (UTF-8 of mapped code points) to raw bytes in out
 * (room for len bytes); false when some code point is not a mapped byte. */
bool eng_tok_unmap(const char *s, size_t len, char *out, size_t *out_len);
/* Appends the byte-level vocab text of raw bytes to b. */
int eng_tok_map(ev_buf *b, const char *s, size_t len);

/* ---- hash maps ----------------------------------------------------------- */

uint64_t eng_tok_hash(const void *p, size_t n);

/* Pair (left id, right id) -> (rank, merged id). Open addressing. */
typedef struct {
	uint64_t key;   /* left << 32 | right; UINT64_MAX = empty */
	int32_t rank;
	int32_t result;
} eng_tok_pair;

typedef struct {
	eng_tok_pair *slots;
	size_t mask;
	size_t n;
} eng_tok_pairmap;

int eng_tok_pairmap_init(eng_tok_pairmap *m, size_t expect);
void eng_tok_pairmap_free(eng_tok_pairmap *m);
/* Keeps the first insertion of a pair (lowest rank). */
void eng_tok_pairmap_put(eng_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t result);
const eng_tok_pair *eng_tok_pairmap_get(const eng_tok_pairmap *m, int32_t a, int32_t b);

/* ---- the tokenizer --------------------------------------------------------- */

/* TOK_BYTE: a SentencePiece byte-fallback token <0xXX> of the vocab,
 * stored as its byte, reached through byte_id[] only. */
enum { TOK_HOLE = 0, TOK_VOCAB = 1, TOK_ADDED = 2, TOK_SPECIAL = 3, TOK_BYTE = 4 };

typedef struct {
	uint32_t off, len; /* decoded bytes in tok->pool */
	uint8_t kind;
} eng_tok_entry;

typedef enum {
	SPLIT_REMOVED,
	SPLIT_ISOLATED,
	SPLIT_MERGED_PREV,
	SPLIT_MERGED_NEXT,
	SPLIT_CONTIGUOUS
} eng_tok_split_behavior;

/* One pre-tokenizer step: a regex split, or the ByteLevel step (re may be
 * NULL when use_regex is false; add_prefix_space applies there). */
typedef struct {
	pcre2_code *re;
	eng_tok_split_behavior behavior;
	bool invert;
	bool bytelevel;
	bool add_prefix_space;
	/* Metaspace (SentencePiece-converted BPE): the metaspace is ' '
	 * inside evald (see eng_tokenizer.spm); prepend 0 never, 1 first (the
	 * segment starting the text), 2 always; split before each space */
	bool metaspace;
	int prepend;
	bool split;
} eng_tok_step;

/* One normalizer step: a Unicode form (utf8proc options), Prepend(text)
 * or a literal Replace(pattern, content). */
enum { NORM_FORM, NORM_PREPEND, NORM_REPLACE };
typedef struct {
	int kind;
	int opts;
	char *a, *b; /* prepend text; replace pattern and content (metaspace as ' ') */
} eng_tok_norm;

#define ENG_TOK_MAX_STEPS 8
#define ENG_TOK_MAX_AFFIX 8
#define ENG_TOK_MAX_WORD 65536 /* longer words are merged in pieces (bpe.c) */

/* A cached word: its bytes then its ids. */
typedef struct eng_tok_cached {
	uint64_t hash;
	uint32_t len, n_ids;
	/* char bytes[len]; int32_t ids[n_ids] (aligned) follow */
} eng_tok_cached;

struct eng_tokenizer {
	char *pool;           /* decoded bytes of every entry */
	size_t pool_len;
	eng_tok_entry *ent;   /* by id, n_ent = highest id + 1 */
	size_t n_ent;
	uint32_t *bmap;       /* bytes -> id + 1 (vocab + normal added) */
	size_t bmap_mask;
	int32_t byte_id[256]; /* id of each single byte token, -1 if none */
	eng_tok_pairmap merges;
	bool ignore_merges;
	/* added tokens, longest first within each first byte */
	int32_t *added;
	size_t n_added;
	bool any_normal_added;
	bool first_byte[256];
	eng_tok_step steps[ENG_TOK_MAX_STEPS];
	size_t n_steps;
	/* the normalizer: steps applied in order to text between added tokens */
	eng_tok_norm norm[ENG_TOK_MAX_STEPS];
	size_t n_norm;
	/* SentencePiece-converted BPE (no ByteLevel step): vocab text is kept
	 * verbatim but for the metaspace U+2581, stored (and matched) as ' ',
	 * so that decoding needs no Replace; a word starts as one symbol a
	 * character; a character outside the vocab becomes its bytes'
	 * <0xXX> tokens (byte_fallback) or unk_id (fuse_unk: one for a run) */
	bool spm, byte_fallback, fuse_unk;
	int32_t unk_id;
	bool strip_lead; /* the decoder drops one leading space (Strip, Metaspace) */
	/* the post-processor's single-sequence template: ids before and after */
	int32_t post_pre[ENG_TOK_MAX_AFFIX], post_suf[ENG_TOK_MAX_AFFIX];
	size_t n_post_pre, n_post_suf;
	int32_t bos_id, eos_id;
	/* word cache, behind the lock */
	pthread_mutex_t lock;
	eng_tok_cached **cache;
	size_t cache_mask, cache_n;
};

/* bytes -> id over the vocab (and normal added tokens); -1 when absent. */
int32_t eng_tok_lookup(const eng_tokenizer *tok, const char *s, size_t len);

/* The metaspace U+2581 as UTF-8. */
#define ENG_TOK_METASPACE "\xE2\x96\x81"

/* ---- pre-tokenizer and BPE (pretok.c, bpe.c) ---------------------------- */

/* Called with each piece a split produces; non-zero stops the split. */
typedef int (*eng_tok_piece_fn)(void *ctx, const char *s, size_t len);

/* Splits s by step->re (which must not be NULL) with step's behavior and
 * invert, calling fn on each non-empty piece in order. md is match data
 * for re. */
int eng_tok_split(const eng_tok_step *step, pcre2_match_data *md, pcre2_match_context *mc,
		  const char *s, size_t len, eng_tok_piece_fn fn, void *ctx);

/* Compiles a pre-tokenizer regex (UTF, UCP, invalid UTF allowed, JIT when
 * available); `what` names it in errors. literal: a String pattern. */
int eng_tok_regex(pcre2_code **out, const char *pattern, bool literal, const char *what);

/* The GPT-2 and Llama-3 pre-tokenizer patterns. */
extern const char eng_tok_gpt2_pattern[];
extern const char eng_tok_llama3_pattern[];

/* Per-call encoder state: output ids and scratch for the merge loop. */
typedef struct {
	const eng_tokenizer *tok;
	int32_t *ids;
	size_t n, cap;
	/* merge scratch */
	void *sym;
	size_t sym_cap;
	void *heap;
	size_t heap_cap;
	pcre2_match_data *md[ENG_TOK_MAX_STEPS];
	pcre2_match_context *mc;
	pcre2_jit_stack *js;
	bool text_start; /* the segment being encoded starts the text (Metaspace "first") */
	eng_tok_piece_fn word; /* when set, each pre-token word goes here instead of to BPE */
	void *word_ctx;
} eng_tok_enc;

int eng_tok_enc_init(eng_tok_enc *e, const eng_tokenizer *tok);
void eng_tok_enc_free(eng_tok_enc *e);
int eng_tok_emit(eng_tok_enc *e, int32_t id);
/* Runs the pre-tokenizer steps on a segment free of added tokens and BPE
 * on every word. */
int eng_tok_encode_segment(eng_tok_enc *e, const char *s, size_t len);
/* The pre-tokenizer's words of s (raw bytes; no normalizer, no added
 * tokens), each to fn in order: what BPE would meet. */
int eng_tok_words(const eng_tokenizer *tok, const char *s, size_t len, eng_tok_piece_fn fn, void *ctx);
/* BPE of one pre-token word (raw bytes). */
int eng_tok_bpe_word(eng_tok_enc *e, const char *s, size_t len);
void eng_tok_cache_clear(eng_tokenizer *tok);

#endif
