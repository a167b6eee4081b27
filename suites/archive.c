/*
 * archive.c: safe extraction of suite archives (tar, tar.gz, tar.zst, zip).
 *
 * Files are written by hand, not through archive_write_disk, so every rule
 * is visible here: names are cleaned and must stay inside the destination
 * (no absolute paths, no ".."), links, devices, fifos and sockets are
 * refused, every directory on the way is opened with O_NOFOLLOW relative to
 * its parent, and the entry count and total uncompressed bytes are capped
 * while the data streams, so a decompression bomb stops at the cap. On any
 * failure the partial extraction is removed.
 */
#include "suites/suites_int.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64     /* path components of one entry */
#define MAX_NAME 4095    /* bytes of one entry's path */
/* Cleans an entry name into `out` ("a/./b//c" -> "a/b/c"); an empty result
 * means the archive's root itself. Absolute names and ".." are refused. */
static int clean_name(char out[MAX_NAME + 1], const char *name, const char *arc, const char *shown)
{
	if (name[0] == '/')
		return ev_error_set(EV_E_UNSAFE, "%s: entry '%s': absolute path refused", arc, shown);
	size_t o = 0, depth = 0;
	const char *p = name;
	while (*p) {
		const char *q = strchr(p, '/');
		size_t n = q ? (size_t)(q - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return ev_error_set(EV_E_UNSAFE, "%s: entry '%s': '..' in path refused", arc, shown);
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (++depth > MAX_DEPTH)
				return ev_error_set(EV_E_LIMIT, "%s: entry '%s': deeper than %d folders", arc, shown,
				                    MAX_DEPTH);
			if (n > NAME_MAX || o + n + 1 > MAX_NAME)
				return ev_error_set(EV_E_INVALID, "%s: entry '%s': name too long", arc, shown);
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	out[o] = 0;
	return 0;
}

/* Opens (creating them as needed) the folders of `rel` but its last
 * component, relative to `root`, never following a link. Returns the
 * parent's fd (or -1 with the message set) and points *leaf at the last
 * component inside `rel`. */
static int open_parent(int root, char *rel, const char **leaf, const char *arc, const char *shown)
{
	int fd = dup(root);
	if (fd < 0) {
		ev_error_set(EV_E_IO, "%s: %s", arc, strerror(errno));
		return -1;
	}
	char *p = rel;
	for (;;) {
		char *slash = strchr(p, '/');
		if (!slash)
			break;
		*slash = 0;
		if (mkdirat(fd, p, 0755) != 0 && errno != EEXIST) {
			ev_error_set(EV_E_IO, "%s: entry '%s': mkdir: %s", arc, shown, strerror(errno));
			*slash = '/';
			close(fd);
			return -1;
		}
		int next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		*slash = '/';
		close(fd);
		if (next < 0) {
			ev_error_set(EV_E_IO, "%s: entry '%s': %s", arc, shown, strerror(e));
			return -1;
		}
		fd = next;
		p = slash + 1;
	}
	*leaf = p;
	return fd;
}

/* Copies one regular entry's data to `fd`, keeping *total under `max`. */
static int copy_data(struct archive *a, int fd, size_t *total, size_t max, const char *arc, const char *shown)
{
	static const char bomb[] = "%s: entry '%s': uncompressed size passes the limit of %zu bytes";
	char buf[65536];
	for (;;) {
		la_ssize_t n = archive_read_data(a, buf, sizeof buf);
		if (n == 0)
			return 0;
		if (n < 0)
			return ev_error_set(EV_E_PARSE, "%s: entry '%s': %s", arc, shown, archive_error_string(a));
		if ((size_t)n > max - *total)
			return ev_error_set(EV_E_LIMIT, bomb, arc, shown, max);
		*total += (size_t)n;
		for (la_ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return ev_error_set(EV_E_IO, "%s: entry '%s': write: %s", arc, shown, strerror(errno));
			off += w;
		}
	}
}

static const char *type_name(mode_t t)
{
	switch (t) {
	case AE_IFCHR: return "character device";
	case AE_IFBLK: return "block device";
	case AE_IFIFO: return "fifo";
	case AE_IFSOCK: return "socket";
	default: return "special file";
	}
}

static int extract_entry(struct archive *a, struct archive_entry *e, int root, size_t *total, size_t max,
                         const char *arc)
{
	const char *name = archive_entry_pathname(e);
	if (!name)
		name = archive_entry_pathname_utf8(e);
	char shown[EV_SUITE_SHOW], target[EV_SUITE_SHOW];
	ev_suite_show(shown, name);
	if (!name || !*name)
		return ev_error_set(EV_E_INVALID, "%s: an entry has no name", arc);
	char rel[MAX_NAME + 1];
	int rc = clean_name(rel, name, arc, shown);
	if (rc)
		return rc;

	/* Links are refused outright: a suite needs none, and a link that
	 * stays inside today is one careless rule away from one that leaves. */
	if (archive_entry_hardlink(e)) {
		ev_suite_show(target, archive_entry_hardlink(e));
		return ev_error_set(EV_E_UNSAFE, "%s: entry '%s': hard link to '%s' refused (no links in suites)", arc,
		                    shown, target);
	}
	mode_t type = archive_entry_filetype(e);
	if (type == AE_IFLNK) {
		ev_suite_show(target, archive_entry_symlink(e));
		return ev_error_set(EV_E_UNSAFE, "%s: entry '%s': symlink to '%s' refused (no links in suites)", arc,
		                    shown, target);
	}
	if (type != AE_IFREG && type != AE_IFDIR)
		return ev_error_set(EV_E_UNSAFE, "%s: entry '%s': %s refused", arc, shown, type_name(type));
	if (!rel[0]) {
		if (type == AE_IFDIR)
			return 0; /* "./" */
		return ev_error_set(EV_E_INVALID, "%s: entry '%s': a file with no name", arc, shown);
	}

	const char *leaf = NULL;
	int pfd = open_parent(root, rel, &leaf, arc, shown);
	if (pfd < 0)
		return ev_error_code();
	if (type == AE_IFDIR) {
		struct stat st;
		if (mkdirat(pfd, leaf, 0755) != 0 &&
		    (errno != EEXIST || fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)))
			rc = ev_error_set(EV_E_IO, "%s: entry '%s': mkdir: %s", arc, shown,
			                  errno == EEXIST ? "a file of that name exists" : strerror(errno));
		close(pfd);
		return rc;
	}

	/* The declared size, when the format states one, is checked first so
	 * that an honest bomb fails before a byte is written; copy_data checks
	 * again as the bytes arrive, since a size can be absent or lie. */
	if (archive_entry_size_is_set(e) && archive_entry_size(e) >= 0 &&
	    (uint64_t)archive_entry_size(e) > (uint64_t)(max - *total)) {
		close(pfd);
		return ev_error_set(EV_E_LIMIT,
		                    "%s: entry '%s': uncompressed size passes the limit of %zu bytes (declared size %lld)", arc,
		                    shown, max, (long long)archive_entry_size(e));
	}
	int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = ev_error_set(EV_E_IO, "%s: entry '%s': %s", arc, shown, strerror(errno));
		close(pfd);
		return rc;
	}
	rc = copy_data(a, fd, total, max, arc, shown);
	if (close(fd) != 0 && !rc)
		rc = ev_error_set(EV_E_IO, "%s: entry '%s': close: %s", arc, shown, strerror(errno));
	close(pfd);
	return rc;
}

/* 1 when `dir` holds nothing, 0 when it holds something, <0 on error. */
static int dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return ev_error_set(EV_E_IO, "%s: %s", dir, strerror(errno));
	int empty = 1;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

/* Extracts `archive` into `dest`, which must be absent (it is created) or
 * an empty folder. On failure dest is left as it was found: removed when
 * this call created it, emptied otherwise. */
struct archive *ev_suite_archive_open(const char *path)
{
	struct archive *a = archive_read_new();
	if (!a) {
		ev_error_set(EV_E_NOMEM, "out of memory");
		return NULL;
	}
	/* Only the formats and filters a suite may come in: fewer parsers
	 * facing hostile bytes, and no filter that runs an outside program. */
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_zip(a);
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK) {
		int err = archive_errno(a);
		ev_error_set(err == ENOENT ? EV_E_NOTFOUND : EV_E_PARSE, "%s: %s", path,
		             archive_error_string(a) ? archive_error_string(a) : "cannot open");
		archive_read_free(a);
		return NULL;
	}
	return a;
}

int ev_archive_extract(const char *archive, const char *dest, const ev_suite_options *opt)
{
	ev_suite_options o;
	ev_suite_options_resolve(&o, opt);
	struct archive *a = NULL;
	int root = -1, rc = 0;
	bool created = false, opened = false;

	if (mkdir(dest, 0700) == 0) {
		created = true;
	} else if (errno != EEXIST) {
		return ev_error_set(EV_E_IO, "%s: %s", dest, strerror(errno));
	} else {
		rc = dir_empty(dest);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return ev_error_set(EV_E_INVALID, "%s: the extraction folder is not empty", dest);
		rc = 0;
	}
	root = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0) {
		rc = ev_error_set(EV_E_IO, "%s: %s", dest, strerror(errno));
		goto done;
	}

	if (!(a = ev_suite_archive_open(archive))) {
		rc = ev_error_code();
		goto done;
	}
	opened = true;

	size_t n_entries = 0, total = 0;
	for (;;) {
		struct archive_entry *e = NULL;
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			rc = ev_error_set(EV_E_PARSE, "%s: after %zu entries: %s", archive, n_entries,
			                  archive_error_string(a) ? archive_error_string(a) : "unreadable header");
			goto done;
		}
		if (++n_entries > o.max_entries) {
			rc = ev_error_set(EV_E_LIMIT, "%s: more than %zu entries", archive, o.max_entries);
			goto done;
		}
		rc = extract_entry(a, e, root, &total, o.max_archive_bytes, archive);
		if (rc)
			goto done;
	}
	if (n_entries == 0)
		rc = ev_error_set(EV_E_PARSE, "%s: an empty archive", archive);

done:
	if (a) {
		if (opened)
			archive_read_close(a);
		archive_read_free(a);
	}
	if (root >= 0)
		close(root);
	if (rc) {
		/* Keep the first failure's message over any cleanup trouble. */
		char *msg = ev_strdup(ev_error_msg());
		ev_rmtree(dest, 0);
		if (!created)
			mkdir(dest, 0700);
		ev_error_set(rc, "%s", msg ? msg : "archive extraction failed");
		free(msg);
	}
	return rc;
}
