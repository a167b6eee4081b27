/* Bump arenas: chunks chained together, freed in one call. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct chunk {
	struct chunk *next;
	size_t used, size;
	max_align_t data[];
} chunk;

struct ev_arena {
	chunk *head;
	size_t total, max;
};

int ev_arena_new(ev_arena **out, size_t max)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	(*out)->max = max;
	return 0;
}

void ev_arena_free(ev_arena *a)
{
	if (!a)
		return;
	for (chunk *c = a->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(a);
}

void *ev_arena_alloc(ev_arena *a, size_t n)
{
	const size_t align = sizeof(max_align_t);
	n = (n + align - 1) / align * align;
	if (n == 0)
		n = align;
	chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		size_t size = n > 65536 ? n : 65536;
		if (a->total + size > a->max) {
			ev_error_set(EV_E_LIMIT, "arena limit of %zu bytes reached", a->max);
			return NULL;
		}
		c = malloc(sizeof *c + size);
		if (!c) {
			ev_error_set(EV_E_NOMEM, "out of memory");
			return NULL;
		}
		c->used = 0;
		c->size = size;
		c->next = a->head;
		a->head = c;
		a->total += size;
	}
	void *p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

char *ev_arena_strndup(ev_arena *a, const char *s, size_t n)
{
	char *p = ev_arena_alloc(a, n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

char *ev_arena_strdup(ev_arena *a, const char *s) { return s ? ev_arena_strndup(a, s, strlen(s)) : NULL; }
size_t ev_arena_used(const ev_arena *a) { return a->total; }
