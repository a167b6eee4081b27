/* SHA-256 through OpenSSL's libcrypto (EVP interface). */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

struct ev_sha256_ctx {
	EVP_MD_CTX *md;
};

static void to_hex(char out[EV_SHA256_HEX], const unsigned char d[32])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = 0;
}

void ev_sha256(unsigned char out[32], const void *data, size_t len)
{
	unsigned int n = 32;
	EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

void ev_sha256_hex(char out[EV_SHA256_HEX], const void *data, size_t len)
{
	unsigned char d[32];
	ev_sha256(d, data, len);
	to_hex(out, d);
}

int ev_sha256_begin(ev_sha256_ctx **out)
{
	ev_sha256_ctx *c = malloc(sizeof *c);
	if (!c || !(c->md = EVP_MD_CTX_new())) {
		free(c);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	EVP_DigestInit_ex(c->md, EVP_sha256(), NULL);
	*out = c;
	return 0;
}

void ev_sha256_update(ev_sha256_ctx *c, const void *data, size_t len) { EVP_DigestUpdate(c->md, data, len); }

void ev_sha256_end_hex(ev_sha256_ctx *c, char out[EV_SHA256_HEX])
{
	unsigned char d[32];
	unsigned int n = 32;
	EVP_DigestFinal_ex(c->md, d, &n);
	EVP_MD_CTX_free(c->md);
	free(c);
	to_hex(out, d);
}

int ev_sha256_file_hex(char out[EV_SHA256_HEX], const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
	ev_sha256_ctx *c = NULL;
	int rc = ev_sha256_begin(&c);
	if (rc) {
		close(fd);
		return rc;
	}
	unsigned char buf[1 << 16];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		ev_sha256_update(c, buf, (size_t)n);
	int e = errno;
	close(fd);
	ev_sha256_end_hex(c, out);
	if (n < 0)
		return ev_error_set(EV_E_IO, "%s: %s", path, strerror(e));
	return 0;
}
