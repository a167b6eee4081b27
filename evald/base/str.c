/* Small string helpers: duplication, formatting, number parsing, UTF-8. */
#include "evald/base/base.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

char *ev_strdup(const char *s) { return s ? strdup(s) : NULL; }

char *ev_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

char *ev_asprintf(const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (p)
		vsnprintf(p, (size_t)n + 1, fmt, ap2);
	va_end(ap2);
	return p;
}

bool ev_str_starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

bool ev_str_ends(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

bool ev_parse_i64(const char *s, int64_t *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool ev_parse_f64(const char *s, double *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return false;
	*out = v;
	return true;
}

bool ev_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *e = p + len;
	while (p < e) {
		unsigned c = *p;
		size_t n;
		unsigned min;
		if (c < 0x80) {
			p++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			n = 1, min = 0x80, c &= 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			n = 2, min = 0x800, c &= 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			n = 3, min = 0x10000, c &= 0x07;
		} else {
			return false;
		}
		if ((size_t)(e - p) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xC0) != 0x80)
				return false;
			c = (c << 6) | (p[i] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		p += n + 1;
	}
	return true;
}
