/*
 * base/strset.h: string hashing, and a set of strings that numbers what it
 * holds (0, 1, 2... in the order added). Included by base/base.h.
 */
#ifndef EV_BASE_STRSET_H
#define EV_BASE_STRSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 64-bit FNV-1a of `n` bytes / of a C string. Stable across builds and
 * runs (seeds and stored keys depend on it); not for untrusted keys where
 * collisions could be forced cheaply, and not a cryptographic hash. */
uint64_t ev_hash_bytes(const void *p, size_t n);
uint64_t ev_hash_str(const char *s);
/* A final avalanche of a hash, so that its low bits can pick a slot. */
uint64_t ev_hash_mix(uint64_t h);

typedef struct ev_strset ev_strset;

int ev_strset_new(ev_strset **out);
void ev_strset_free(ev_strset *s);
/* Adds a copy of `len` bytes (NULs allowed) unless present. *index_out
 * (may be NULL) gets the string's number; *added (may be NULL) whether it
 * was new. EV_E_NOMEM leaves the set as it was. */
int ev_strset_add(ev_strset *s, const char *str, size_t len, size_t *index_out, bool *added);
/* The number of the string, or -1 when absent. */
long ev_strset_find(const ev_strset *s, const char *str, size_t len);
size_t ev_strset_count(const ev_strset *s);
/* The string with number i (borrowed; NUL-terminated; len_out may be NULL). */
const char *ev_strset_get(const ev_strset *s, size_t i, size_t *len_out);

#endif
