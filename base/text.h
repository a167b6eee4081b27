/*
 * base/text.h: UTF-8, base64 and vectors of strings. Included by
 * base/base.h.
 */
#ifndef EV_BASE_TEXT_H
#define EV_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/vec.h"

/* ---- UTF-8 (utf8.c) ------------------------------------------------------ */

/* The length (1-4) of the valid UTF-8 sequence at s[0..n) and its code
 * point in *cp, or 0 when the bytes there are not one (overlong forms,
 * surrogates, values past U+10FFFF, truncated sequences and n == 0). */
size_t ev_utf8_next(const char *s, size_t n, uint32_t *cp);
/* The lenient form: an invalid byte decodes as U+FFFD of length 1. Returns
 * 0 only for n == 0. */
size_t ev_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Writes the UTF-8 form of `cp` (at most U+10FFFF) and returns its length. */
size_t ev_utf8_encode(char out[4], uint32_t cp);
/* True when `s` is `len` bytes of valid UTF-8. */
bool ev_utf8_valid(const char *s, size_t len);
/* Code points in `len` bytes of UTF-8 (bytes that do not continue a
 * sequence: Python's len() of valid text). */
size_t ev_utf8_chars(const char *s, size_t len);
/* A malloc'd copy with every invalid sequence replaced by U+FFFD; NULL when
 * memory ran out. out_len may be NULL. */
char *ev_utf8_sanitize(const char *s, size_t len, size_t *out_len);
/* A malloc'd copy of at most `max` bytes, cut at a code point boundary and
 * ended with "..." when cut; NULL when memory ran out. */
char *ev_utf8_clip(const char *s, size_t len, size_t max);
/* Makes `s` safe to print on a terminal, in place: every C0 control but tab
 * and newline, DEL and every C1 control (U+0080..U+009F) becomes '?'. Text
 * from the tracker (issue titles, model answers, sample ids) goes through
 * this before a command prints it as text. Returns how many were replaced. */
size_t ev_term_clean(char *s);

/* ---- base64 (base64.c) ----------------------------------------------------- */

/* Strict base64 (RFC 4648 alphabet, length a multiple of 4, '=' only as the
 * last one or two characters, no whitespace) into a malloc'd buffer of at
 * most `max` bytes (EV_E_LIMIT past it; EV_E_PARSE naming `what` when
 * malformed). The buffer is NUL-terminated (not counted). */
int ev_base64_decode(unsigned char **out, size_t *out_len, const char *in, size_t in_len, size_t max,
                     const char *what);
/* The base64 text of `len` bytes, malloc'd and NUL-terminated. */
int ev_base64_encode(char **out, const void *data, size_t len);

/* ---- vectors of strings (strv.c) ------------------------------------------- */

/* Owned, NUL-terminated strings. `ev_strv v = {0};` is empty. */
typedef EV_VEC(char *) ev_strv;

/* Appends a copy of `n` bytes of `s`: 0 or EV_E_NOMEM (v unchanged). */
int ev_strv_push(ev_strv *v, const char *s, size_t n);
/* The index of the first string equal to `n` bytes of `s`, or -1. */
long ev_strv_find(const ev_strv *v, const char *s, size_t n);
/* Frees every string and the storage; `v` is empty after. */
void ev_strv_clear(ev_strv *v);
/* Frees a plain array of `n` malloc'd strings (NULL is fine). */
void ev_strv_free(char **v, size_t n);

#endif
