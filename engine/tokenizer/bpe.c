/*
 * engine/bpe.c: byte-pair merging of one pre-token word, the pair and word
 * hash maps it relies on, and the per-tokenizer word cache.
 *
 * A word starts as one symbol a byte in a linked list; candidate merges of
 * neighbours sit in a binary heap ordered by (merge rank, position), so the
 * lowest-ranked pair, leftmost first, is merged next (the Hugging Face
 * order). A popped candidate whose neighbours changed since it was pushed is
 * stale and skipped. Each merge costs O(log n): a long word is not
 * quadratic.
 */
#include "engine/tokenizer/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- hashing and the pair map ------------------------------------------- */

uint64_t eng_tok_hash(const void *p, size_t n)
{
	/* FNV-1a, then a final mix so that the low bits (the slot) spread. */
	return ev_hash_mix(ev_hash_bytes(p, n));
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

int eng_tok_pairmap_init(eng_tok_pairmap *m, size_t expect)
{
	size_t cap = 64;
	while (cap < expect * 2 + 1)
		cap *= 2;
	m->slots = malloc(cap * sizeof *m->slots);
	if (!m->slots)
		return ev_error_set(EV_E_NOMEM, "out of memory for %zu merges", expect);
	for (size_t i = 0; i < cap; i++)
		m->slots[i].key = UINT64_MAX;
	m->mask = cap - 1;
	m->n = 0;
	return 0;
}

void eng_tok_pairmap_free(eng_tok_pairmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->mask = m->n = 0;
}

void eng_tok_pairmap_put(eng_tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t result)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	size_t i = mix64(key) & m->mask;
	while (m->slots[i].key != UINT64_MAX) {
		if (m->slots[i].key == key)
			return; /* the first (lowest) rank wins */
		i = (i + 1) & m->mask;
	}
	/* The caller sized the map for every merge: it is never more than half full. */
	m->slots[i] = (eng_tok_pair){key, rank, result};
	m->n++;
}

const eng_tok_pair *eng_tok_pairmap_get(const eng_tok_pairmap *m, int32_t a, int32_t b)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	size_t i = mix64(key) & m->mask;
	while (m->slots[i].key != UINT64_MAX) {
		if (m->slots[i].key == key)
			return &m->slots[i];
		i = (i + 1) & m->mask;
	}
	return NULL;
}

/* ---- encoder state --------------------------------------------------------- */

typedef struct {
	int32_t id; /* -1 once merged into its left neighbour */
	int32_t prev, next;
} sym;

typedef struct {
	int32_t rank, left, right;
	int32_t left_id, right_id, result;
} cand;

int eng_tok_enc_init(eng_tok_enc *e, const eng_tokenizer *tok)
{
	memset(e, 0, sizeof *e);
	e->tok = tok;
	for (size_t k = 0; k < tok->n_steps; k++) {
		if (!tok->steps[k].re)
			continue;
		e->md[k] = pcre2_match_data_create_from_pattern(tok->steps[k].re, NULL);
		if (!e->md[k])
			return ev_error_set(EV_E_NOMEM, "out of memory for regex match data");
	}
	e->mc = pcre2_match_context_create(NULL);
	e->js = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
	if (!e->mc || !e->js)
		return ev_error_set(EV_E_NOMEM, "out of memory for the regex context");
	pcre2_jit_stack_assign(e->mc, NULL, e->js);
	pcre2_set_match_limit(e->mc, 10000000);
	pcre2_set_depth_limit(e->mc, 10000);
	return 0;
}

void eng_tok_enc_free(eng_tok_enc *e)
{
	for (size_t k = 0; k < ENG_TOK_MAX_STEPS; k++)
		pcre2_match_data_free(e->md[k]);
	pcre2_match_context_free(e->mc);
	pcre2_jit_stack_free(e->js);
	free(e->ids);
	free(e->sym);
	free(e->heap);
	memset(e, 0, sizeof *e);
}

int eng_tok_emit(eng_tok_enc *e, int32_t id)
{
	if (EV_GROW(e->ids, e->cap, e->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory for %zu token ids", e->n + 1);
	e->ids[e->n++] = id;
	return 0;
}

/* The scratch of one word: sym and heap grow with the longest word seen. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	*p = ev_vec_grow_(*p, cap, need, elem);
	return need <= *cap ? 0 : ev_error_set(EV_E_NOMEM, "out of memory for a %zu-byte word", need);
}

/* ---- the candidate heap ------------------------------------------------ */

static bool cand_less(const cand *a, const cand *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(cand *h, size_t *n, cand c)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!cand_less(&c, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
	cand top = h[0];
	cand last = h[--*n];
	size_t i = 0, m = *n;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		const cand *best = &last;
		if (l < m && cand_less(&h[l], best))
			s = l, best = &h[l];
		if (r < m && cand_less(&h[r], best))
			s = r;
		if (s == i)
			break;
		h[i] = h[s];
		i = s;
	}
	if (m)
		h[i] = last;
	return top;
}

/* Pushes the merge of symbols l and r when the vocab has one. */
static void try_pair(const eng_tokenizer *tok, const sym *sy, cand *h, size_t *n, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return;
	const eng_tok_pair *p = eng_tok_pairmap_get(&tok->merges, sy[l].id, sy[r].id);
	if (p)
		heap_push(h, n, (cand){p->rank, l, r, sy[l].id, sy[r].id, p->result});
}

/* ---- the word cache --------------------------------------------------------- */

#define CACHE_MAX_WORD 128
#define CACHE_SLOTS 65536 /* at most half of them used, then the cache restarts */

static int32_t *cached_ids(eng_tok_cached *c)
{
	size_t off = (sizeof *c + c->len + 3) & ~(size_t)3;
	return (int32_t *)((char *)c + off);
}

void eng_tok_cache_clear(eng_tokenizer *tok)
{
	if (!tok->cache)
		return;
	for (size_t i = 0; i <= tok->cache_mask; i++) {
		free(tok->cache[i]);
		tok->cache[i] = NULL;
	}
	tok->cache_n = 0;
}

/* Copies a cached word's ids to the output; 1 when found. */
static int cache_get(eng_tok_enc *e, const char *s, size_t len, uint64_t h)
{
	eng_tokenizer *tok = (eng_tokenizer *)e->tok; /* the cache is the only mutable part */
	int found = 0, rc = 0;
	pthread_mutex_lock(&tok->lock);
	if (tok->cache) {
		for (size_t i = h & tok->cache_mask; tok->cache[i]; i = (i + 1) & tok->cache_mask) {
			eng_tok_cached *c = tok->cache[i];
			if (c->hash == h && c->len == len && memcmp(c + 1, s, len) == 0) {
				const int32_t *ids = cached_ids(c);
				for (uint32_t k = 0; k < c->n_ids && !rc; k++)
					rc = eng_tok_emit(e, ids[k]);
				found = 1;
				break;
			}
		}
	}
	pthread_mutex_unlock(&tok->lock);
	return rc ? rc : found;
}

static void cache_put(eng_tok_enc *e, const char *s, size_t len, uint64_t h, const int32_t *ids,
		      size_t n_ids)
{
	eng_tokenizer *tok = (eng_tokenizer *)e->tok;
	eng_tok_cached tmp = {h, (uint32_t)len, (uint32_t)n_ids};
	size_t off = (sizeof tmp + len + 3) & ~(size_t)3;
	eng_tok_cached *c = malloc(off + n_ids * sizeof(int32_t));
	if (!c)
		return; /* the cache is only a speed-up */
	*c = tmp;
	memcpy(c + 1, s, len);
	memcpy(cached_ids(c), ids, n_ids * sizeof(int32_t));
	pthread_mutex_lock(&tok->lock);
	if (!tok->cache) {
		tok->cache = calloc(CACHE_SLOTS, sizeof *tok->cache);
		tok->cache_mask = CACHE_SLOTS - 1;
	}
	if (!tok->cache) {
		free(c);
	} else {
		if (tok->cache_n >= CACHE_SLOTS / 2)
			eng_tok_cache_clear(tok);
		size_t i = h & tok->cache_mask;
		while (tok->cache[i]) {
			eng_tok_cached *o = tok->cache[i];
			if (o->hash == h && o->len == len && memcmp(o + 1, s, len) == 0)
				break; /* another thread got there first */
			i = (i + 1) & tok->cache_mask;
		}
		if (tok->cache[i]) {
			free(c);
		} else {
			tok->cache[i] = c;
			tok->cache_n++;
		}
	}
	pthread_mutex_unlock(&tok->lock);
}

/* ---- one word ----------------------------------------------------------------- */

/* SentencePiece-converted BPE: the word's first symbols, one a character
 * found in the vocab, else its bytes' <0xXX> tokens (byte_fallback), else
 * the unknown token (one for a run of them with fuse_unk). Returns the
 * number of symbols written to ids (room for len). */
static int spm_symbols(const eng_tokenizer *tok, const char *s, size_t len, int32_t *ids, size_t *n)
{
	size_t k = 0;
	bool last_unk = false;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t cl = ev_utf8_decode(s + i, len - i, &cp);
		int32_t id = eng_tok_lookup(tok, s + i, cl);
		if (id >= 0) {
			ids[k++] = id;
			last_unk = false;
		} else {
			bool bytes = tok->byte_fallback;
			for (size_t b = 0; b < cl && bytes; b++)
				bytes = tok->byte_id[(unsigned char)s[i + b]] >= 0;
			if (bytes) {
				for (size_t b = 0; b < cl; b++)
					ids[k++] = tok->byte_id[(unsigned char)s[i + b]];
				last_unk = false;
			} else if (tok->unk_id >= 0) {
				if (!(tok->fuse_unk && last_unk))
					ids[k++] = tok->unk_id;
				last_unk = true;
			} else {
				return ev_error_set(EV_E_INVALID, "character U+%04X has no token in the vocab and there is "
								  "no unknown token", (unsigned)cp);
			}
		}
		i += cl;
	}
	*n = k;
	return 0;
}

static int bpe_word(eng_tok_enc *e, const char *s, size_t len)
{
	const eng_tokenizer *tok = e->tok;
	int rc;
	if (len == 1 && !tok->spm) {
		int32_t id = tok->byte_id[(unsigned char)s[0]];
		if (id < 0)
			return ev_error_set(EV_E_INVALID, "byte 0x%02x has no token in the vocab",
					    (unsigned char)s[0]);
		return eng_tok_emit(e, id);
	}
	uint64_t h = 0;
	if (len <= CACHE_MAX_WORD) {
		h = eng_tok_hash(s, len);
		if ((rc = cache_get(e, s, len, h)) != 0)
			return rc < 0 ? rc : 0;
	}
	size_t first = e->n;
	if (tok->ignore_merges) {
		int32_t id = eng_tok_lookup(tok, s, len);
		if (id >= 0) {
			rc = eng_tok_emit(e, id);
			goto out;
		}
	}
	if ((rc = grow(&e->sym, &e->sym_cap, len, sizeof(sym))) ||
	    (rc = grow(&e->heap, &e->heap_cap, 3 * len, sizeof(cand))))
		return rc;
	sym *sy = e->sym;
	cand *hp = e->heap;
	size_t nh = 0, ns = len;
	if (tok->spm) { /* symbols a character (ids first, in place) */
		int32_t *ids = (int32_t *)e->heap; /* 3 * len cands: room for len ids */
		if ((rc = spm_symbols(tok, s, len, ids, &ns)))
			return rc;
		for (size_t i = 0; i < ns; i++)
			sy[i] = (sym){ids[i], (int32_t)i - 1, i + 1 < ns ? (int32_t)i + 1 : -1};
	} else {
		for (size_t i = 0; i < len; i++) {
			int32_t id = tok->byte_id[(unsigned char)s[i]];
			if (id < 0)
				return ev_error_set(EV_E_INVALID, "byte 0x%02x has no token in the vocab",
						    (unsigned char)s[i]);
			sy[i] = (sym){id, (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1};
		}
	}
	for (size_t i = 0; i + 1 < ns; i++)
		try_pair(tok, sy, hp, &nh, (int32_t)i, (int32_t)i + 1);
	while (nh) {
		cand c = heap_pop(hp, &nh);
		if (sy[c.left].id != c.left_id || sy[c.left].next != c.right || sy[c.right].id != c.right_id)
			continue; /* stale: a neighbour was merged since */
		int32_t nx = sy[c.right].next;
		sy[c.left].id = c.result;
		sy[c.left].next = nx;
		sy[c.right].id = -1;
		if (nx >= 0)
			sy[nx].prev = c.left;
		/* Each merge adds at most two candidates and removes one symbol,
		 * so the heap never outgrows 3 * len. */
		try_pair(tok, sy, hp, &nh, sy[c.left].prev, c.left);
		try_pair(tok, sy, hp, &nh, c.left, nx);
	}
	for (int32_t i = 0; i >= 0 && !rc; i = sy[i].next)
		rc = eng_tok_emit(e, sy[i].id);
out:
	if (!rc && len <= CACHE_MAX_WORD)
		cache_put(e, s, len, h, e->ids + first, e->n - first);
	return rc;
}

/* A pathological word (megabytes without a break) is merged in pieces of
 * ENG_TOK_MAX_WORD bytes cut at character boundaries, which bounds the
 * scratch memory; words that long do not occur in real text. */
int eng_tok_bpe_word(eng_tok_enc *e, const char *s, size_t len)
{
	while (len > ENG_TOK_MAX_WORD) {
		size_t cut = ENG_TOK_MAX_WORD;
		for (int k = 0; k < 3 && ((unsigned char)s[cut] & 0xC0) == 0x80; k++)
			cut--;
		int rc = bpe_word(e, s, cut);
		if (rc)
			return rc;
		s += cut;
		len -= cut;
	}
	return bpe_word(e, s, len);
}
