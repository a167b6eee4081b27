/*
 * base/vec.h: a typed growable array. Included by base/base.h.
 *
 *     EV_VEC(int) v = {0};
 *     if (ev_vec_push(&v, 42)) ...;   // EV_E_NOMEM, v unchanged
 *     for (size_t i = 0; i < v.n; i++) use(v.v[i]);
 *     ev_vec_free(&v);
 *
 * The macros evaluate their vector argument more than once: pass a plain
 * name or a pointer expression without side effects. They name EV_E_NOMEM
 * (base/base.h), which every user of them includes.
 */
#ifndef EV_BASE_VEC_H
#define EV_BASE_VEC_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define EV_VEC(T)                                                                                          \
	struct {                                                                                           \
		T *v;                                                                                      \
		size_t n, cap;                                                                             \
	}

/* Grows the storage `v` (`*cap` elements of `elem` bytes) to hold at least
 * `need`: capacity doubles (from 8), so pushes are amortised O(1). Returns
 * the new storage, or `v` itself with *cap unchanged when memory ran out or
 * the size would overflow. */
void *ev_vec_grow_(void *v, size_t *cap, size_t need, size_t elem);

/* The growth rule for an array kept in any two fields (a pointer `ptr`
 * and a size_t capacity `cap`, in elements): 0 once it has room for
 * `need` elements, EV_E_NOMEM otherwise (both unchanged). For arrays that
 * live beside others in a struct of their own making. */
#define EV_GROW(ptr, cap, need)                                                                            \
	((need) <= (cap) ? 0                                                                               \
	                 : ((ptr) = ev_vec_grow_((ptr), &(cap), (need), sizeof *(ptr)), (need) <= (cap) ? 0 : EV_E_NOMEM))

/* 0 once `vec` has room for `need` elements; EV_E_NOMEM otherwise (the
 * vector unchanged). */
#define ev_vec_reserve(vec, need) EV_GROW((vec)->v, (vec)->cap, (need))

/* Appends `x`: 0, or EV_E_NOMEM with the vector unchanged. */
#define ev_vec_push(vec, x) (ev_vec_reserve((vec), (vec)->n + 1) ? EV_E_NOMEM : ((vec)->v[(vec)->n++] = (x), 0))

/* A pointer to a new zeroed element at the end, or NULL (vector unchanged). */
#define ev_vec_add(vec)                                                                                    \
	(ev_vec_reserve((vec), (vec)->n + 1)                                                               \
	         ? NULL                                                                                    \
	         : (memset(&(vec)->v[(vec)->n], 0, sizeof *(vec)->v), &(vec)->v[(vec)->n++]))

/* Frees the storage (not what elements point to) and empties the vector. */
#define ev_vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

#endif
