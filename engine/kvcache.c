/*
 * engine/kvcache.c: the paged KV cache and the sequences that own pages.
 * A page is one MSA block (block_size positions) of every layer's keys and
 * values, with the block's running key sum per KV head beside them. Pages
 * are refcounted and recycled through the pool's free list, so a sequence
 * only holds memory for the positions it has.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/backend.h"

/* A page's memory. Pages of 2 MiB or more are mapped on their own,
 * starting on a 2 MiB boundary and advised for transparent huge pages:
 * attention reads a KV head's slice of every position, short runs a
 * stride apart, and with 4 KiB pages nearly each run is another TLB
 * entry (engine/README.md "Attention at long context"). The map holds
 * the page's bytes (to a whole small page), so the part past the last
 * whole 2 MiB stays in small pages and no memory is added. Smaller pages, a map refused
 * (the process's map count), and builds under AddressSanitizer (which
 * guards heap blocks alone) take malloc; *mapped says which. */
#define KV_HUGE ((size_t)2 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define KV_MAP 0
#else
#define KV_MAP 1
#endif

static unsigned char *page_mem(size_t bytes, bool *mapped)
{
	*mapped = false;
	if (!KV_MAP || bytes < KV_HUGE)
		return malloc(bytes);
	long ps = sysconf(_SC_PAGESIZE);
	size_t small = ps > 0 ? (size_t)ps : 4096, len = (bytes + small - 1) / small * small, span = len + KV_HUGE;
	unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return malloc(bytes);
	uintptr_t at = ((uintptr_t)m + KV_HUGE - 1) / KV_HUGE * KV_HUGE;
	size_t head = at - (uintptr_t)m, tail = span - head - len; /* both whole small pages */
	if (head)
		munmap(m, head);
	if (tail)
		munmap((unsigned char *)at + len, tail);
#ifdef MADV_HUGEPAGE
	madvise((void *)at, bytes, MADV_HUGEPAGE); /* a hint: without THP the page is as good as malloc's */
#endif
	*mapped = true;
	return (unsigned char *)at;
}

static void page_mem_free(eng_page *pg, size_t bytes)
{
	if (pg->mapped)
		munmap(pg->data, bytes); /* (the kernel takes the last small page whole) */
	else
		free(pg->data);
}

int eng_kv_pool_init(eng_kv_pool *p, int layers, int kvh, int hd, int block)
{
	memset(p, 0, sizeof(*p));
	p->block = block;
	p->layers = layers;
	p->kvh = kvh;
	p->hd = hd;
	return eng_kv_pool_configure(p, ENG_F32, 0);
}

int eng_kv_pool_configure(eng_kv_pool *p, eng_dtype dtype, uint64_t max_bytes)
{
	if (p->live)
		return ev_error_set(EV_E_INTERNAL, "KV pool: dtype changed with pages in use");
	eng_kv_pool_clear(p);
	p->dtype = dtype;
	p->esize = eng_dtype_size(dtype);
	size_t kd = (size_t)p->kvh * p->hd;
	p->layer_bytes = (size_t)2 * p->block * kd * p->esize + kd * sizeof(float) +
			 (size_t)p->block * p->idim * sizeof(float) + (size_t)2 * p->idim * sizeof(float);
	p->layer_bytes = (p->layer_bytes + 7) / 8 * 8;
	p->page_bytes = p->layer_bytes * (size_t)p->layers;
	p->max_bytes = max_bytes;
	return 0;
}

void eng_kv_pool_clear(eng_kv_pool *p)
{
	for (int i = 0; i < p->nfree; i++) {
		if (p->free[i]->dev && p->dev_free)
			p->dev_free(p->free[i]->dev);
		page_mem_free(p->free[i], p->page_bytes);
		free(p->free[i]);
	}
	free(p->free);
	p->free = NULL;
	p->nfree = p->free_cap = 0;
}

eng_page *eng_page_get(eng_kv_pool *p)
{
	eng_page *pg = NULL;
	if (p->max_bytes && (uint64_t)(p->live + 1) * p->page_bytes > p->max_bytes) {
		ev_error_set(EV_E_LIMIT,
			     "KV cache full: %ld pages of %zu bytes in use, another would pass --kv-max-bytes %llu "
			     "(%ld tokens of %d a page)",
			     p->live, p->page_bytes, (unsigned long long)p->max_bytes, p->live * p->block, p->block);
		return NULL;
	}
	if (p->nfree) {
		pg = p->free[--p->nfree];
	} else {
		if (!(pg = calloc(1, sizeof(*pg))))
			goto nomem;
		if (!(pg->data = page_mem(p->page_bytes, &pg->mapped))) {
			free(pg);
			goto nomem;
		}
	}
	pg->refs = 1;
	pg->ntok = 0;
	pg->gen = ++p->gen; /* new contents: a device copy is stale */
	pg->dev_ahead = false;
	/* only the key sums need zeroing; K and V slots are written before read */
	for (int l = 0; l < p->layers; l++)
		memset(eng_page_ksum(p, pg, l), 0, (size_t)p->kvh * p->hd * sizeof(float));
	p->live++;
	return pg;
nomem:
	ev_error_set(EV_E_NOMEM, "out of memory for a KV page (%zu bytes)", p->page_bytes);
	return NULL;
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
		if (pg->dev && p->dev_free)
			p->dev_free(pg->dev);
		page_mem_free(pg, p->page_bytes);
		free(pg);
	}
}

int eng_page_pull(eng_kv_pool *p, eng_page *pg)
{
	if (!pg->dev_ahead)
		return 0;
	if (!p->dev_pull)
		return ev_error_set(EV_E_INTERNAL, "KV page: its keys are on a device no backend reads back");
	int rc = p->dev_pull(p, pg);
	if (rc)
		return rc;
	pg->dev_ahead = false;
	eng_index_page_boxes(p, pg);
	return 0;
}

int eng_seq_pull(eng_seq *s)
{
	int rc = 0;
	for (int i = 0; !rc && i < s->npages; i++)
		rc = eng_page_pull(&s->m->kv, s->pages[i]);
	if (!rc && s->ibox_stale) {
		eng_index_seq_boxes(s);
		s->ibox_stale = false;
	}
	return rc;
}

uint64_t eng_model_kv_bytes(const eng_model *m)
{
	return (uint64_t)m->kv.live * m->kv.page_bytes;
}

void eng_model_index_counts(const eng_model *m, eng_index_counts *out)
{
	out->seconds = m->index_seconds;
	out->candidates = m->istats.candidates;
	out->scored = m->istats.scored;
}

/* Rebuilds the key sums of a page from its first ntok stored keys, in
 * position order (the order kv_store adds them in). */
static void rebuild_sums(eng_kv_pool *p, eng_page *pg)
{
	size_t kd = (size_t)p->kvh * p->hd;
	float *row = malloc(kd * sizeof(float));
	for (int l = 0; l < p->layers; l++) {
		float *sum = eng_page_ksum(p, pg, l);
		memset(sum, 0, kd * sizeof(float));
		for (int t = 0; t < pg->ntok; t++) {
			if (row) {
				eng_kv_load(p, row, eng_page_kraw(p, pg, l, t), kd);
				for (size_t i = 0; i < kd; i++)
					sum[i] += row[i];
			} else { /* no memory for a row: one element at a time */
				for (size_t i = 0; i < kd; i++) {
					float x;
					eng_kv_load(p, &x, (unsigned char *)eng_page_kraw(p, pg, l, t) + i * p->esize, 1);
					sum[i] += x;
				}
			}
		}
	}
	free(row);
}

/* A private copy of *slot holding its first ntok positions (sums rebuilt),
 * replacing the shared page in the table. */
static int make_private(eng_kv_pool *p, eng_page **slot, int ntok)
{
	eng_page *old = *slot, *pg;
	int rc = eng_page_pull(p, old);
	if (rc)
		return rc;
	if (!(pg = eng_page_get(p)))
		return ev_error_code() ? ev_error_code() : EV_E_NOMEM;
	memcpy(pg->data, old->data, p->page_bytes);
	pg->ntok = ntok;
	rebuild_sums(p, pg);
	pg->gen = ++p->gen;
	eng_page_put(p, old);
	*slot = pg;
	return 0;
}

int eng_seq_add_embeddings(eng_seq *s, const float *rows, int n)
{
	const eng_config *c = &s->m->c;
	if (c->image_token < 0)
		return ev_error_set(EV_E_UNSUPPORTED, "%s has no image placeholder token: it takes no image rows",
				    c->architecture);
	if (n < 0 || n > (1 << 22) || (n && !rows))
		return ev_error_set(EV_E_INVALID, "add_embeddings: %d rows", n);
	size_t H = (size_t)c->hidden;
	float *nr = realloc(s->mm_rows, (size_t)(s->mm_n + n) * H * sizeof(float));
	if (!nr)
		return ev_error_set(EV_E_NOMEM, "out of memory queueing %d image rows", n);
	memcpy(nr + (size_t)s->mm_n * H, rows, (size_t)n * H * sizeof(float));
	s->mm_rows = nr;
	s->mm_n += n;
	return 0;
}

long eng_seq_pending_embeddings(const eng_seq *s)
{
	return s->mm_n - s->mm_at;
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
	for (int l = 0; l < s->m->kv.layers; l++) {
		if (s->kidx)
			free(s->kidx[l]);
		if (s->kbox)
			free(s->kbox[l]);
		if (s->ibox)
			free(s->ibox[l]);
	}
	free(s->kidx);
	free(s->kbox);
	free(s->ibox);
	free(s->mm_rows);
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

/* Grows the sequence's MSA index (key sums and superblock boxes) to room
 * for cap blocks per layer, keeping what it holds. */
static int index_alloc(eng_seq *s, long cap)
{
	eng_kv_pool *p = &s->m->kv;
	size_t kd = (size_t)p->kvh * p->hd, n = (size_t)p->layers;
	size_t nsb = ((size_t)cap + ENG_MSA_SUPER - 1) / ENG_MSA_SUPER;
	if ((!s->kidx && !(s->kidx = calloc(n, sizeof(float *)))) ||
	    (!s->kbox && !(s->kbox = calloc(n, sizeof(float *)))) ||
	    (p->idim && !s->ibox && !(s->ibox = calloc(n, sizeof(float *)))))
		return EV_E_NOMEM;
	for (size_t l = 0; l < n; l++) {
		float *nk = realloc(s->kidx[l], (size_t)cap * kd * sizeof(float));
		if (!nk)
			return EV_E_NOMEM;
		s->kidx[l] = nk;
		float *nb = realloc(s->kbox[l], nsb * 2 * kd * sizeof(float));
		if (!nb)
			return EV_E_NOMEM;
		s->kbox[l] = nb;
		if (p->idim) {
			float *ib = realloc(s->ibox[l], nsb * 2 * (size_t)p->idim * sizeof(float));
			if (!ib)
				return EV_E_NOMEM;
			s->ibox[l] = ib;
		}
	}
	s->kidx_cap = cap;
	return 0;
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
	if (need > s->kidx_cap) {
		long cap = s->kidx_cap ? s->kidx_cap : 16;
		while (cap < need)
			cap *= 2;
		if (index_alloc(s, cap))
			return ev_error_set(EV_E_NOMEM, "out of memory growing the MSA index (%ld blocks)", cap);
	}
	/* the page position len falls in is written next: private first */
	long cur = s->len / p->block;
	int rc;
	if (n > 0 && cur < s->npages && s->pages[cur]->refs > 1 &&
	    (rc = make_private(p, &s->pages[cur], (int)(s->len - cur * p->block))))
		return rc;
	while (s->npages < need) {
		eng_page *pg = eng_page_get(p);
		if (!pg)
			return ev_error_code();
		s->pages[s->npages++] = pg;
	}
	return 0;
}

int eng_seq_fork(eng_seq **out, eng_seq *src, long n_prefix)
{
	*out = NULL;
	if (!src || n_prefix < 0 || n_prefix > src->len)
		return ev_error_set(EV_E_INVALID, "seq_fork: prefix of %ld tokens, the sequence holds %ld", n_prefix,
				    src ? src->len : 0L);
	eng_model *m = src->m;
	eng_kv_pool *p = &m->kv;
	eng_seq *s = NULL;
	int rc = eng_seq_new(&s, m);
	if (rc)
		return rc;
	int np = (int)((n_prefix + p->block - 1) / p->block);
	if (np && !(s->pages = malloc((size_t)np * sizeof(*s->pages)))) {
		eng_seq_free(s);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	s->pages_cap = np;
	if (np && p->idim) { /* the indexer's superblock boxes: src's cover the prefix (a superset is a bound) */
		bool ok = index_alloc(s, np) == 0;
		for (int l = 0; ok && l < p->layers; l++)
			memcpy(s->ibox[l], src->ibox[l],
			       (size_t)((np + ENG_MSA_SUPER - 1) / ENG_MSA_SUPER) * 2 * p->idim * sizeof(float));
		if (!ok) {
			eng_seq_free(s);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
	}
	s->ibox_stale = src->ibox_stale; /* the boxes copied are as stale as src's */
	long full = n_prefix / p->block;
	if (full) { /* the index rows of the shared full pages */
		size_t kd = (size_t)p->kvh * p->hd;
		bool ok = index_alloc(s, np) == 0;
		for (int l = 0; ok && l < p->layers; l++) {
			memcpy(s->kidx[l], src->kidx[l], (size_t)full * kd * sizeof(float));
			/* the last box may cover later blocks of src: still a bound */
			memcpy(s->kbox[l], src->kbox[l],
			       (size_t)((full + ENG_MSA_SUPER - 1) / ENG_MSA_SUPER) * 2 * kd * sizeof(float));
		}
		if (!ok) {
			eng_seq_free(s);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
	}
	pthread_mutex_lock(&m->mu);
	for (int i = 0; i < np; i++) {
		src->pages[i]->refs++;
		s->pages[s->npages++] = src->pages[i];
	}
	s->len = n_prefix;
	/* a partly used last page is copied now, so both sides may go on
	 * writing their own positions */
	int part = (int)(n_prefix % p->block);
	if (part && (rc = make_private(p, &s->pages[np - 1], part)))
		s->len = 0;
	pthread_mutex_unlock(&m->mu);
	if (rc) {
		eng_seq_free(s);
		return rc;
	}
	*out = s;
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
	/* the last page keeps part of its positions: rebuild its key sums,
	 * on a private copy when another sequence shares the page */
	eng_page *pg = s->pages[keep - 1];
	if (pg->refs > 1)
		return make_private(p, &s->pages[keep - 1], (int)(n - (long)(keep - 1) * p->block));
	int rc = eng_page_pull(p, pg);
	if (rc)
		return rc;
	pg->ntok = (int)(n - (long)(keep - 1) * p->block);
	rebuild_sums(p, pg);
	pg->gen = ++p->gen; /* the sums changed on the host */
	return 0;
}
