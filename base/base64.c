/* Strict base64 through libcrypto's block codec. */
#include "base/base.h"

#include <stdlib.h>

#include <openssl/evp.h>

static bool b64_char(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
	       ch == '/';
}

int ev_base64_decode(unsigned char **out, size_t *out_len, const char *in, size_t in_len, size_t max,
                     const char *what)
{
	*out = NULL;
	*out_len = 0;
	if (in_len % 4 != 0)
		return ev_error_set(EV_E_PARSE, "%s: invalid base64: length %zu is not a multiple of 4", what, in_len);
	size_t pad = 0;
	if (in_len >= 1 && in[in_len - 1] == '=')
		pad++;
	if (in_len >= 2 && in[in_len - 2] == '=')
		pad++;
	for (size_t i = 0; i < in_len - pad; i++)
		if (!b64_char((unsigned char)in[i]))
			return ev_error_set(EV_E_PARSE, "%s: invalid base64: unexpected character at offset %zu", what, i);
	size_t n = in_len / 4 * 3 - pad;
	if (n > max)
		return ev_error_set(EV_E_LIMIT, "%s: %zu bytes decoded, over the %zu-byte limit", what, n, max);
	if (in_len > (size_t)INT32_MAX)
		return ev_error_set(EV_E_LIMIT, "%s: base64 text too long", what);
	/* EVP_DecodeBlock writes whole groups of 3, padding included. */
	unsigned char *buf = malloc(in_len / 4 * 3 + 1);
	if (!buf)
		return ev_error_set(EV_E_NOMEM, "%s: out of memory decoding %zu bytes", what, n);
	int got = in_len ? EVP_DecodeBlock(buf, (const unsigned char *)in, (int)in_len) : 0;
	if (got < 0 || (size_t)got != in_len / 4 * 3) {
		free(buf);
		return ev_error_set(EV_E_PARSE, "%s: invalid base64", what);
	}
	buf[n] = 0;
	*out = buf;
	*out_len = n;
	return 0;
}

int ev_base64_encode(char **out, const void *data, size_t len)
{
	*out = NULL;
	if (len > (size_t)INT32_MAX / 4 * 3 - 3)
		return ev_error_set(EV_E_LIMIT, "base64: %zu bytes is too much to encode at once", len);
	char *o = malloc((len + 2) / 3 * 4 + 1);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int n = EVP_EncodeBlock((unsigned char *)o, data, (int)len);
	o[n] = 0;
	*out = o;
	return 0;
}
