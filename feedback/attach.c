/*
 * feedback/attach.c: attachments of community issues: MIME type from the
 * content's magic bytes, claim checking, strict base64, and the
 * content-addressed store beside the tracker (<dir>/ab/cdef..., written to a
 * temporary file and renamed, so a final name never holds a partial file).
 */
#include "feedback/feedback_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>


#define MIME_DOCX "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
#define MIME_PPTX "application/vnd.openxmlformats-officedocument.presentationml.presentation"
#define MIME_XLSX "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

/* ---- MIME detection ---------------------------------------------------------- */

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }

/* The OOXML flavour of a zip from its entry names: word/, ppt/ or xl/. */
static const char *zip_flavour_of_name(const unsigned char *name, size_t n)
{
	if (n >= 5 && !memcmp(name, "word/", 5))
		return MIME_DOCX;
	if (n >= 4 && !memcmp(name, "ppt/", 4))
		return MIME_PPTX;
	if (n >= 3 && !memcmp(name, "xl/", 3))
		return MIME_XLSX;
	return NULL;
}

/* Walks the central directory (found through the end record) and, when
 * there is none, the local headers from the start; every offset is checked
 * against the buffer. */
static const char *zip_flavour(const unsigned char *d, size_t len)
{
	/* End of central directory: 22 bytes plus a comment of up to 64 KiB. */
	size_t lo = len > 22 + 65535 ? len - 22 - 65535 : 0;
	for (size_t i = len >= 22 ? len - 22 + 1 : 0; i-- > lo;) {
		if (memcmp(d + i, "PK\x05\x06", 4) != 0)
			continue;
		uint32_t count = rd16(d + i + 10), off = rd32(d + i + 16);
		size_t p = off;
		for (uint32_t k = 0; k < count && p + 46 <= len; k++) {
			if (memcmp(d + p, "PK\x01\x02", 4) != 0)
				break;
			size_t nl = rd16(d + p + 28), xl = rd16(d + p + 30), cl = rd16(d + p + 32);
			if (p + 46 + nl > len)
				break;
			const char *f = zip_flavour_of_name(d + p + 46, nl);
			if (f)
				return f;
			p += 46 + nl + xl + cl;
		}
		break;
	}
	size_t p = 0;
	for (int k = 0; k < 4096 && p + 30 <= len && !memcmp(d + p, "PK\x03\x04", 4); k++) {
		size_t nl = rd16(d + p + 26), xl = rd16(d + p + 28);
		uint32_t csize = rd32(d + p + 18);
		if (p + 30 + nl > len)
			break;
		const char *f = zip_flavour_of_name(d + p + 30, nl);
		if (f)
			return f;
		if (rd16(d + p + 6) & 0x8) /* sizes in a data descriptor: cannot walk on */
			break;
		p += 30 + nl + xl + (size_t)csize;
	}
	return "application/zip";
}

static bool has_bytes(const unsigned char *d, size_t len, const char *needle, size_t limit)
{
	size_t n = strlen(needle);
	if (limit > len)
		limit = len;
	for (size_t i = 0; i + n <= limit; i++)
		if (!memcmp(d + i, needle, n))
			return true;
	return false;
}

const char *ev_attach_detect_mime(const void *data, size_t len)
{
	const unsigned char *d = data;
	if (!d)
		len = 0;
	if (len >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8))
		return "image/png";
	if (len >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
		return "image/jpeg";
	if (len >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6)))
		return "image/gif";
	if (len >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
		return "image/webp";
	if (len >= 12 && !memcmp(d + 4, "ftyp", 4))
		return !memcmp(d + 8, "qt  ", 4) ? "video/quicktime" : "video/mp4";
	if (len >= 4 && !memcmp(d, "\x1A\x45\xDF\xA3", 4))
		return has_bytes(d, len, "matroska", 64) ? "video/x-matroska" : "video/webm";
	if (len >= 5 && !memcmp(d, "%PDF-", 5))
		return "application/pdf";
	if (len >= 4 && (!memcmp(d, "PK\x03\x04", 4) || !memcmp(d, "PK\x05\x06", 4)))
		return zip_flavour(d, len);
	/* Text: valid UTF-8 without NUL and without the C0 controls that no
	 * text file holds (tab, newlines, form feed and ESC for coloured logs
	 * are fine). */
	bool text = ev_utf8_valid((const char *)d, len);
	for (size_t i = 0; text && i < len; i++)
		text = d[i] >= 0x20 || d[i] == '\t' || d[i] == '\n' || d[i] == '\r' || d[i] == '\f' || d[i] == '\v' ||
		       d[i] == 0x1b;
	if (text)
		return "text/plain";
	return "application/octet-stream";
}

const char *ev_attach_kind(const char *mime)
{
	if (mime && ev_str_starts(mime, "image/"))
		return "image";
	if (mime && ev_str_starts(mime, "video/"))
		return "video";
	return "document";
}

/* The claim's type/subtype, lowercased, parameters and spaces dropped. */
static void mime_base(char *out, size_t outsz, const char *s)
{
	size_t k = 0;
	while (*s == ' ' || *s == '\t')
		s++;
	for (; *s && *s != ';' && *s != ' ' && *s != '\t' && k + 1 < outsz; s++)
		out[k++] = (char)((*s >= 'A' && *s <= 'Z') ? *s + 32 : *s);
	out[k] = 0;
}

int ev_attach_check_claim(const char *claimed, const char *detected, const char *what)
{
	char c[128];
	if (!claimed || !*claimed)
		return 0;
	mime_base(c, sizeof c, claimed);
	if (!*c || !strcmp(c, "application/octet-stream") || !strcmp(c, detected))
		return 0;
	if (!strcmp(detected, "image/jpeg") && (!strcmp(c, "image/jpg") || !strcmp(c, "image/pjpeg")))
		return 0;
	if (!strcmp(detected, "text/plain") &&
	    (ev_str_starts(c, "text/") || !strcmp(c, "application/json") || !strcmp(c, "application/x-ndjson") ||
	     !strcmp(c, "application/xml") || !strcmp(c, "application/x-yaml")))
		return 0;
	if ((!strcmp(detected, MIME_DOCX) || !strcmp(detected, MIME_PPTX) || !strcmp(detected, MIME_XLSX) ||
	     !strcmp(detected, "application/zip")) &&
	    (!strcmp(c, "application/zip") || !strcmp(c, "application/x-zip-compressed")))
		return 0;
	if (!strcmp(detected, "video/webm") && !strcmp(c, "audio/webm"))
		return 0;
	if (!strcmp(detected, "video/x-matroska") && !strcmp(c, "video/webm"))
		return 0;
	if (!strcmp(detected, "video/mp4") && (!strcmp(c, "audio/mp4") || !strcmp(c, "video/quicktime")))
		return 0;
	return ev_error_set(EV_E_UNSUPPORTED, "%s: claimed type %.100s but the content is %s", what, c, detected);
}

/* ---- the store ---------------------------------------------------------------- */

int ev_attach_dir(char **out, ev_tracker *t)
{
	*out = NULL;
	const char *p = t && t->path ? t->path : "";
	char *copy = ev_strdup(*p && strcmp(p, ":memory:") && !ev_str_starts(p, "file:") ? p : "./x");
	if (!copy)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	*out = ev_asprintf("%s/attachments", dirname(copy));
	free(copy);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static bool sha_valid(const char *sha)
{
	if (!sha || strlen(sha) != 64)
		return false;
	for (const char *p = sha; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int ev_attach_path(char **out, const char *dir, const char *sha)
{
	*out = NULL;
	if (!sha_valid(sha))
		return ev_error_set(EV_E_INVALID, "attachment: \"%.70s\" is not a sha256 hex digest", sha ? sha : "");
	*out = ev_asprintf("%s/%.2s/%s", dir, sha, sha + 2);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int ev_attach_store(const char *dir, const void *data, size_t len, char sha_out[EV_SHA256_HEX])
{
	char sha[EV_SHA256_HEX];
	char *sub = NULL, *final = NULL, *tmp = NULL;
	int fd = -1, rc = 0;
	struct stat st;

	ev_sha256_hex(sha, data, len);
	if (sha_out)
		memcpy(sha_out, sha, EV_SHA256_HEX);
	if ((rc = ev_attach_path(&final, dir, sha)))
		goto done;
	if (stat(final, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len)
		goto done; /* content-addressed: already there */
	sub = ev_asprintf("%s/%.2s", dir, sha);
	if (!sub) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	/* Reports' attachments are private to the tracker's user. */
	if ((rc = ev_mkdir_p_mode(dir, 0700)) || (rc = ev_mkdir_p_mode(sub, 0700)))
		goto done;
	/* Unique per process and call: concurrent stores of the same content
	 * each write their own temporary file and the renames agree. */
	static _Atomic unsigned long seq;
	tmp = ev_asprintf("%s/.tmp-%.16s-%ld-%lu", sub, sha, (long)getpid(), (unsigned long)++seq);
	if (!tmp) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = ev_error_set(EV_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
		goto done;
	}
	if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
		rc = ev_error_set(EV_E_IO, "%s: cannot write: %s", tmp, strerror(errno));
		goto done;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = ev_error_set(EV_E_IO, "%s: cannot write: %s", tmp, strerror(errno));
		goto done;
	}
	fd = -1;
	if (rename(tmp, final) != 0) {
		rc = ev_error_set(EV_E_IO, "%s: cannot rename into place: %s", final, strerror(errno));
		goto done;
	}
	free(tmp);
	tmp = NULL;
	/* Make the rename itself durable before the tracker row refers to it. */
	int dfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
done:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(sub);
	free(final);
	return rc;
}
