/* Capped byte buffers, whole-file reads and atomic file writes. */
#include "evald/base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int ev_file_read(char **out, size_t *len_out, const char *path, size_t max)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ev_error_set(EV_E_IO, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return ev_error_set(EV_E_LIMIT, "%s: %lld bytes, over the limit of %zu", path, (long long)st.st_size, max);
	}
	ev_buf b = EV_BUF_INIT(max);
	char chunk[65536];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			ev_buf_free(&b);
			return ev_error_set(EV_E_IO, "%s: %s", path, strerror(e));
		}
		if (n == 0)
			break;
		if (ev_buf_append(&b, chunk, (size_t)n)) {
			close(fd);
			ev_buf_free(&b);
			return ev_error_set(EV_E_LIMIT, "%s: over the limit of %zu bytes", path, max);
		}
	}
	close(fd);
	*out = ev_buf_detach(&b, len_out);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

int ev_mkdir_p(const char *dir)
{
	char *p = ev_strdup(dir);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, 0755) != 0 && errno != EEXIST && errno != EACCES)
				break;
			*s = '/';
		}
	int rc = mkdir(p, 0755) != 0 && errno != EEXIST
	                 ? ev_error_set(EV_E_IO, "%s: cannot create folder: %s", dir, strerror(errno))
	                 : 0;
	free(p);
	return rc;
}

int ev_file_write(const char *path, const void *data, size_t len)
{
	char *tmp = ev_asprintf("%s.tmp.%ld", path, (long)getpid());
	if (!tmp)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = ev_error_set(EV_E_IO, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return rc;
	}
	const char *p = data;
	size_t left = len;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = ev_error_set(EV_E_IO, "%s: %s", tmp, strerror(errno));
			close(fd);
			unlink(tmp);
			free(tmp);
			return rc;
		}
		p += n;
		left -= (size_t)n;
	}
	if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
		int rc = ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
		unlink(tmp);
		free(tmp);
		return rc;
	}
	free(tmp);
	return 0;
}
