/*
 * engine/gguf/spm.c: a SentencePiece BPE vocabulary (GGUF's
 * tokenizer.ggml.model "llama": pieces with scores, no merges) as the
 * ranked merges a BPE tokenizer.json holds. SentencePiece's BPE merges, at
 * each step, the adjacent pair whose joined piece is in the vocabulary
 * with the highest score; ranked merges give the same segmentation when
 * every pair (left, right) whose pieces and join are all in the vocabulary
 * is listed, ordered by the join's score, highest first (pieces' scores
 * are distinct in real vocabularies; ties go to the lower join id, then
 * the lower left and right ids).
 */
#include "engine/gguf/gguf_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct {
	const char *p;
	uint32_t n, id;
} piece;

typedef struct {
	float score;
	uint32_t join, l, r;
} merge;

static int by_text(const void *a, const void *b)
{
	const piece *x = a, *y = b;
	uint32_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->p, y->p, n);
	return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int by_rank(const void *a, const void *b)
{
	const merge *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->join != y->join)
		return x->join < y->join ? -1 : 1;
	if (x->l != y->l)
		return x->l < y->l ? -1 : 1;
	return (x->r > y->r) - (x->r < y->r);
}

/* The id of the normal piece p[0..n), or -1. */
static long find(const piece *sorted, size_t count, const char *p, size_t n)
{
	piece key = {p, (uint32_t)n, 0};
	const piece *hit = bsearch(&key, sorted, count, sizeof *sorted, by_text);
	return hit ? (long)hit->id : -1;
}

int eng_gguf_spm_merges(const eng_gguf *g, ev_buf *out)
{
	const eng_gguf_value *toks = eng_gguf_find_key(g, "tokenizer.ggml.tokens"),
	                     *scores = eng_gguf_find_key(g, "tokenizer.ggml.scores"),
	                     *types = eng_gguf_find_key(g, "tokenizer.ggml.token_type");
	if (!toks || toks->type != ENG_GGUF_ARRAY || toks->elem_type != ENG_GGUF_STRING || !toks->count)
		return ev_error_set(EV_E_INVALID, "%s: tokenizer.ggml.tokens: expected a list of strings", g->path);
	if (!scores || scores->type != ENG_GGUF_ARRAY || scores->elem_type != ENG_GGUF_F32 || scores->count != toks->count)
		return ev_error_set(EV_E_INVALID, "%s: tokenizer.ggml.scores: a SentencePiece vocabulary needs one f32 score a "
		                                  "piece", g->path);
	if (toks->count > (1u << 24))
		return ev_error_set(EV_E_LIMIT, "%s: %llu pieces (at most %u)", g->path, (unsigned long long)toks->count,
		                    1u << 24);
	size_t n = (size_t)toks->count, np = 0, nm = 0, cap = 0;
	piece *all = malloc(n * sizeof *all), *normal = malloc(n * sizeof *normal);
	merge *m = NULL;
	int rc = all && normal ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	const uint8_t *at = toks->elems;
	for (size_t i = 0; i < n && !rc; i++) {
		eng_gguf_str s = eng_gguf_next_str(&at);
		int32_t ty = 1;
		if (types && types->elem_type == ENG_GGUF_I32 && types->count == toks->count)
			memcpy(&ty, types->elems + 4 * i, 4);
		all[i] = (piece){s.p, (uint32_t)(s.n > UINT32_MAX ? UINT32_MAX : s.n), (uint32_t)i};
		if (ty == 1) /* normal pieces merge; control, unknown, user-defined, unused and byte ones do not */
			normal[np++] = all[i];
	}
	if (!rc)
		qsort(normal, np, sizeof *normal, by_text);
	/* every split of a normal piece at a character boundary into two normal pieces */
	for (size_t k = 0; k < np && !rc; k++) {
		const piece *w = &normal[k];
		for (uint32_t cut = 1; cut < w->n && !rc; cut++) {
			if (((unsigned char)w->p[cut] & 0xC0) == 0x80) /* inside a character */
				continue;
			long l = find(normal, np, w->p, cut), r = l < 0 ? -1 : find(normal, np, w->p + cut, w->n - cut);
			if (r < 0)
				continue;
			if (nm == cap) {
				size_t nc = cap ? 2 * cap : 1024;
				merge *nmv = realloc(m, nc * sizeof *nmv);
				if (!nmv) {
					rc = ev_error_set(EV_E_NOMEM, "out of memory");
					break;
				}
				m = nmv, cap = nc;
			}
			float sc;
			memcpy(&sc, scores->elems + 4 * (size_t)w->id, 4);
			if (isnan(sc)) /* a NaN would leave the order undefined */
				sc = -INFINITY;
			m[nm++] = (merge){sc, w->id, (uint32_t)l, (uint32_t)r};
		}
	}
	if (!rc)
		qsort(m, nm, sizeof *m, by_rank);
	/* as [left, right] pairs: a piece may hold a space */
	for (size_t i = 0; i < nm && !rc; i++) {
		rc = ev_buf_puts(out, i ? ",[" : "[");
		if (!rc)
			rc = ev_json_buf_strn(out, all[m[i].l].p, all[m[i].l].n);
		if (!rc)
			rc = ev_buf_putc(out, ',');
		if (!rc)
			rc = ev_json_buf_strn(out, all[m[i].r].p, all[m[i].r].n);
		if (!rc)
			rc = ev_buf_putc(out, ']');
	}
	free(all), free(normal), free(m);
	return rc;
}
