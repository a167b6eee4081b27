/* UTF-8: the one decoder (strict and lenient), encoder, validator, and the
 * copies that sanitise or clip text. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

size_t ev_utf8_next(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)s;
	if (n == 0)
		return 0;
	unsigned c = p[0];
	size_t k;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xE0) == 0xC0) {
		k = 1, min = 0x80, v = c & 0x1F;
	} else if ((c & 0xF0) == 0xE0) {
		k = 2, min = 0x800, v = c & 0x0F;
	} else if ((c & 0xF8) == 0xF0) {
		k = 3, min = 0x10000, v = c & 0x07;
	} else {
		return 0;
	}
	if (n <= k)
		return 0;
	for (size_t i = 1; i <= k; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return k + 1;
}

size_t ev_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	size_t k = ev_utf8_next(s, n, cp);
	if (k == 0) {
		*cp = 0xFFFD;
		return n ? 1 : 0;
	}
	return k;
}

size_t ev_utf8_encode(char o[4], uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

bool ev_utf8_valid(const char *s, size_t len)
{
	uint32_t cp;
	for (size_t i = 0; i < len;) {
		size_t k = ev_utf8_next(s + i, len - i, &cp);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

char *ev_utf8_sanitize(const char *s, size_t len, size_t *out_len)
{
	/* Each bad byte becomes 3 bytes at most. */
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	char *o = malloc(len * 3 + 1);
	if (!o)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = ev_utf8_next(s + i, len - i, &cp);
		if (k == 0) {
			n += ev_utf8_encode(o + n, 0xFFFD);
			i++;
		} else {
			memcpy(o + n, s + i, k);
			n += k;
			i += k;
		}
	}
	o[n] = '\0';
	if (out_len)
		*out_len = n;
	return o;
}

char *ev_utf8_clip(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return ev_strndup(s, len);
	size_t cut = max;
	while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
		cut--;
	char *o = malloc(cut + 4);
	if (!o)
		return NULL;
	memcpy(o, s, cut);
	memcpy(o + cut, "...", 4);
	return o;
}

/* C0 controls other than tab and newline, DEL, and the C1 controls
 * (U+0080..U+009F, two bytes C2 80..C2 9F in UTF-8) are what a terminal may
 * act on: ESC starts CSI/OSC sequences (title, clipboard, cursor), a bare CR
 * or backspace overwrites what was printed before it, and U+009B is a
 * one-character CSI on terminals that honour C1. */
size_t ev_term_clean(char *s)
{
	if (!s)
		return 0;
	size_t r = 0, w = 0, n = 0;
	while (s[r]) {
		unsigned char c = (unsigned char)s[r];
		if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
			s[w++] = '?';
			r++;
			n++;
		} else if (c == 0xC2 && (unsigned char)s[r + 1] >= 0x80 && (unsigned char)s[r + 1] <= 0x9F) {
			s[w++] = '?';
			r += 2;
			n++;
		} else {
			s[w++] = s[r++];
		}
	}
	s[w] = '\0';
	return n;
}

size_t ev_utf8_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}
