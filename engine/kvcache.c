/*
 * engine/kvcache.c: the paged KV cache and the sequences that own pages.
 * A page is one MSA block (block_size positions) of every layer's keys and
 * values, with the block's running key sum per KV head beside them. Pages
 * are refcounted and recycled through the pool's free list, so a sequence
 * only holds memory for the positions it has.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

int eng_kv_pool_init(eng_kv_pool *p, int layers, int kvh, int hd, int block)
{
	memset(p, 0, sizeof(*p));
	p->block = block;
	p->kvh = kvh;
	p->hd = hd;
	p->layer_floats = (size_t)(2 * block + 1) * (size_t)kvh * (size_t)hd;
	p->page_floats = p->layer_floats * (size_t)layers;
	return 0;
}

void eng_kv_pool_clear(eng_kv_pool *p)
{
	for (int i = 0; i < p->nfree; i++) {
		free(p->free[i]->data);
		free(p->free[i]);
	}
	free(p->free);
	p->free = NULL;
	p->nfree = p->free_cap = 0;
}

eng_page *eng_page_get(eng_kv_pool *p)
{
	eng_page *pg = NULL;
	if (p->nfree) {
		pg = p->free[--p->nfree];
	} else {
		if (!(pg = calloc(1, sizeof(*pg))))
			return NULL;
		if (!(pg->data = malloc(p->page_floats * sizeof(float)))) {
			free(pg);
			return NULL;
		}
	}
	pg->refs = 1;
	pg->ntok = 0;
	/* only the key sums need zeroing; K and V slots are written before read */
	for (size_t l = 0; l * p->layer_floats < p->page_floats; l++)
		memset(pg->data + l * p->layer_floats + (size_t)2 * p->block * p->kvh * p->hd, 0,
		       (size_t)p->kvh * p->hd * sizeof(float));
	p->live++;
	return pg;
}

void eng_page_put(eng_kv_pool *p, eng_page *pg)
{
	if (!pg || --pg->refs > 0)
		return;
	p->live--;
	/* keep a bounded free list; past it, give the memory back */
	if (p->nfree == p->free_cap && p->free_cap < 256) {
		int cap = p->free_cap ? 2 * p->free_cap : 16;
		eng_page **nf = realloc(p->free, (size_t)cap * sizeof(*nf));
		if (nf) {
			p->free = nf;
			p->free_cap = cap;
		}
	}
	if (p->nfree < p->free_cap) {
		p->free[p->nfree++] = pg;
	} else {
		free(pg->data);
		free(pg);
	}
}

int eng_seq_new(eng_seq **out, eng_model *m)
{
	*out = NULL;
	eng_seq *s = calloc(1, sizeof(*s));
	if (!s || !(s->logits = malloc((size_t)m->c.vocab * sizeof(float)))) {
		free(s);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	s->m = m;
	*out = s;
	return 0;
}

void eng_seq_free(eng_seq *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->m->mu);
	for (int i = 0; i < s->npages; i++)
		eng_page_put(&s->m->kv, s->pages[i]);
	pthread_mutex_unlock(&s->m->mu);
	free(s->pages);
	free(s->logits);
	free(s);
}

long eng_seq_len(const eng_seq *s)
{
	return s->len;
}

const float *eng_seq_logits(const eng_seq *s)
{
	return s->has_logits ? s->logits : NULL;
}

int eng_seq_reserve(eng_seq *s, long n)
{
	eng_kv_pool *p = &s->m->kv;
	if (n < 0 || s->len + n > s->m->max_context)
		return ev_error_set(EV_E_LIMIT, "sequence of %ld tokens would pass the context limit of %ld",
				    s->len + n, s->m->max_context);
	long need = (s->len + n + p->block - 1) / p->block;
	if (need > s->pages_cap) {
		long cap = s->pages_cap ? s->pages_cap : 4;
		while (cap < need)
			cap *= 2;
		eng_page **np = realloc(s->pages, (size_t)cap * sizeof(*np));
		if (!np)
			return ev_error_set(EV_E_NOMEM, "out of memory growing the page table");
		s->pages = np;
		s->pages_cap = (int)cap;
	}
	while (s->npages < need) {
		eng_page *pg = eng_page_get(p);
		if (!pg)
			return ev_error_set(EV_E_NOMEM, "out of memory for a KV page (%zu bytes)",
					    p->page_floats * sizeof(float));
		s->pages[s->npages++] = pg;
	}
	return 0;
}

static int truncate_locked(eng_seq *s, long n);

int eng_seq_truncate(eng_seq *s, long n)
{
	pthread_mutex_lock(&s->m->mu);
	int rc = truncate_locked(s, n);
	pthread_mutex_unlock(&s->m->mu);
	return rc;
}

static int truncate_locked(eng_seq *s, long n)
{
	if (n < 0 || n > s->len)
		return ev_error_set(EV_E_INVALID, "truncate to %ld: the sequence holds %ld tokens", n, s->len);
	eng_kv_pool *p = &s->m->kv;
	int keep = (int)((n + p->block - 1) / p->block);
	for (int i = keep; i < s->npages; i++)
		eng_page_put(p, s->pages[i]);
	s->npages = keep;
	s->len = n;
	s->has_logits = false;
	if (n % p->block == 0 || keep == 0)
		return 0;
	/* the last page keeps part of its positions: rebuild its key sums
	 * (a shared page would need copy-on-write; none is shared yet) */
	eng_page *pg = s->pages[keep - 1];
	pg->ntok = (int)(n - (long)(keep - 1) * p->block);
	size_t kd = (size_t)p->kvh * p->hd;
	for (int l = 0; (size_t)l * p->layer_floats < p->page_floats; l++) {
		float *sum = eng_page_ksum(p, pg, l);
		memset(sum, 0, kd * sizeof(float));
		for (int t = 0; t < pg->ntok; t++) {
			const float *k = eng_page_k(p, pg, l, t);
			for (size_t i = 0; i < kd; i++)
				sum[i] += k[i];
		}
	}
	return 0;
}
