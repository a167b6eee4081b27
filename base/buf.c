/* Capped byte buffers. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

void ev_buf_init(ev_buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

static int reserve(ev_buf *b, size_t extra)
{
	if (extra > b->max || b->len > b->max - extra)
		return ev_error_set(EV_E_LIMIT, "buffer limit of %zu bytes reached", b->max);
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory growing a buffer to %zu bytes", cap);
	b->data = p;
	b->cap = cap;
	return 0;
}

int ev_buf_append(ev_buf *b, const void *data, size_t n)
{
	int rc = reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int ev_buf_replace_nul(ev_buf *b, size_t from)
{
	if (from >= b->len || !memchr(b->data + from, 0, b->len - from))
		return 0;
	size_t n = 0;
	for (size_t i = from; i < b->len; i++)
		n += b->data[i] == 0;
	size_t tail = b->len - from;
	char *t = malloc(tail);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	memcpy(t, b->data + from, tail);
	int rc = reserve(b, 2 * n); /* each NUL: 1 byte becomes 3 */
	if (!rc) {
		b->len = from;
		for (size_t i = 0; i < tail; i++)
			if (t[i])
				b->data[b->len++] = t[i];
			else
				memcpy(b->data + b->len, "\xEF\xBF\xBD", 3), b->len += 3;
		b->data[b->len] = 0;
	}
	free(t);
	return rc;
}

int ev_buf_puts(ev_buf *b, const char *s) { return ev_buf_append(b, s, strlen(s)); }
int ev_buf_putc(ev_buf *b, char c) { return ev_buf_append(b, &c, 1); }

int ev_buf_printf(ev_buf *b, const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		va_end(ap2);
		return ev_error_set(EV_E_INVALID, "bad format string");
	}
	int rc = reserve(b, (size_t)n);
	if (!rc) {
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
		b->len += (size_t)n;
	}
	va_end(ap2);
	return rc;
}

void ev_buf_reset(ev_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = 0;
}

char *ev_buf_detach(ev_buf *b, size_t *len_out)
{
	char *p = b->data;
	if (!p)
		p = calloc(1, 1);
	if (len_out)
		*len_out = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void ev_buf_free(ev_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
