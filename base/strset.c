/* FNV-1a hashing and an open-addressing set of owned strings. */
#include "base/base.h"

#include <string.h>

uint64_t ev_hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

uint64_t ev_hash_str(const char *s) { return ev_hash_bytes(s, strlen(s)); }

uint64_t ev_hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

typedef struct {
	char *s;
	size_t len;
} entry;

struct ev_strset {
	EV_VEC(entry) items; /* by number */
	size_t *slots;       /* number + 1, 0 for empty; a power of two long */
	size_t nslots;
};

int ev_strset_new(ev_strset **out)
{
	*out = calloc(1, sizeof **out);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

void ev_strset_free(ev_strset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->items.n; i++)
		free(s->items.v[i].s);
	ev_vec_free(&s->items);
	free(s->slots);
	free(s);
}

static size_t slot_of(const ev_strset *s, const char *str, size_t len)
{
	size_t mask = s->nslots - 1, i = (size_t)ev_hash_mix(ev_hash_bytes(str, len)) & mask;
	for (;; i = (i + 1) & mask) {
		size_t k = s->slots[i];
		if (!k)
			return i;
		const entry *e = &s->items.v[k - 1];
		if (e->len == len && !memcmp(e->s, str, len))
			return i;
	}
}

static int rehash(ev_strset *s, size_t nslots)
{
	size_t *ns = calloc(nslots, sizeof *ns);
	if (!ns)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	free(s->slots);
	s->slots = ns;
	s->nslots = nslots;
	for (size_t k = 0; k < s->items.n; k++)
		s->slots[slot_of(s, s->items.v[k].s, s->items.v[k].len)] = k + 1;
	return 0;
}

long ev_strset_find(const ev_strset *s, const char *str, size_t len)
{
	if (!s->nslots)
		return -1;
	size_t k = s->slots[slot_of(s, str, len)];
	return k ? (long)(k - 1) : -1;
}

int ev_strset_add(ev_strset *s, const char *str, size_t len, size_t *index_out, bool *added)
{
	long have = ev_strset_find(s, str, len);
	if (added)
		*added = have < 0;
	if (have >= 0) {
		if (index_out)
			*index_out = (size_t)have;
		return 0;
	}
	/* Keep the load at most one half. */
	if ((s->items.n + 1) * 2 > s->nslots && rehash(s, s->nslots ? s->nslots * 2 : 16))
		return EV_E_NOMEM;
	char *copy = malloc(len + 1);
	if (!copy || ev_vec_reserve(&s->items, s->items.n + 1)) {
		free(copy);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	memcpy(copy, str, len);
	copy[len] = 0;
	s->items.v[s->items.n++] = (entry){copy, len};
	s->slots[slot_of(s, str, len)] = s->items.n;
	if (index_out)
		*index_out = s->items.n - 1;
	return 0;
}

size_t ev_strset_count(const ev_strset *s) { return s->items.n; }

const char *ev_strset_get(const ev_strset *s, size_t i, size_t *len_out)
{
	if (i >= s->items.n)
		return NULL;
	if (len_out)
		*len_out = s->items.v[i].len;
	return s->items.v[i].s;
}
