/*
 * suites/video.c: a video's frames from a folder or an archive (video.h).
 */
#include "suites/suites_int.h"
#include "suites/video.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ev_video_sample(int total, double fps, double sample_fps, int frames, int *idx)
{
	if (total < 1)
		return ev_error_set(EV_E_INVALID, "video: no frames");
	if (!(fps > 0))
		fps = 1;
	if (!(sample_fps > 0))
		sample_fps = 1;
	long n = frames > 0 ? frames : (long)((double)total / fps * sample_fps);
	if (n < 1)
		n = 1;
	if (n > total)
		n = total;
	if (n > EV_VIDEO_MAX_FRAMES)
		n = EV_VIDEO_MAX_FRAMES;
	for (long i = 0; i < n; i++)
		idx[i] = (int)(i * (long)total / n);
	return (int)n;
}

/* names compared with digit runs as numbers, then bytewise */
static int natural_cmp(const void *pa, const void *pb)
{
	const char *a = *(char *const *)pa, *b = *(char *const *)pb;
	while (*a && *b) {
		if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
			while (*a == '0' && a[1] >= '0' && a[1] <= '9')
				a++;
			while (*b == '0' && b[1] >= '0' && b[1] <= '9')
				b++;
			size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
			if (na != nb)
				return na < nb ? -1 : 1;
			int c = strncmp(a, b, na);
			if (c)
				return c;
			a += na, b += nb;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++, b++;
	}
	return *a ? 1 : *b ? -1 : strcmp(*(char *const *)pa, *(char *const *)pb);
}

static bool is_frame_name(const char *name)
{
	const char *mime = NULL;
	return name[0] != '.' && ev_part_kind_for_path(name, &mime) == EV_PART_IMAGE;
}

void ev_video_free(ev_video *v)
{
	for (int i = 0; i < v->n; i++) {
		free(v->data ? v->data[i] : NULL);
		free(v->name ? v->name[i] : NULL);
	}
	free(v->data), free(v->len), free(v->name), free(v->index);
	memset(v, 0, sizeof *v);
}

typedef struct {
	char **names;
	int n, cap;
} name_list;

static int keep_name(name_list *l, const char *name, const char *path)
{
	if (l->n == EV_VIDEO_MAX_SOURCE)
		return ev_error_set(EV_E_LIMIT, "%s: more than %d frames", path, EV_VIDEO_MAX_SOURCE);
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 64;
		char **nn = realloc(l->names, (size_t)cap * sizeof *nn);
		if (!nn)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		l->names = nn, l->cap = cap;
	}
	return (l->names[l->n] = ev_strdup(name)) ? (l->n++, 0) : ev_error_set(EV_E_NOMEM, "out of memory");
}

static void names_free(name_list *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
}

static int list_folder(name_list *l, const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (!is_frame_name(e->d_name))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			rc = ev_error_set(EV_E_IO, "%s/%s: %s", path, e->d_name, strerror(errno));
		else if (S_ISLNK(st.st_mode))
			rc = ev_error_set(EV_E_UNSAFE, "%s/%s: a link; a video's frames must be files in its folder", path,
			                  e->d_name);
		else if (S_ISREG(st.st_mode))
			rc = keep_name(l, e->d_name, path);
	}
	closedir(d);
	return rc;
}

/* A frame file read through the descriptor opened without following a
 * link, at most cap bytes. */
static int read_file_capped(uint8_t **out, size_t *len, const char *dir, const char *name, size_t cap)
{
	*out = NULL, *len = 0;
	char *p = ev_asprintf("%s/%s", dir, name);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		rc = ev_error_set(EV_E_IO, "%s: cannot read the frame: %s", p, fd < 0 ? strerror(errno) : "not a file");
	else if ((size_t)st.st_size > cap)
		rc = ev_error_set(EV_E_LIMIT, "%s: %lld bytes pass the frame cap of %zu", p, (long long)st.st_size, cap);
	ev_buf b = EV_BUF_INIT(cap);
	char chunk[1 << 16];
	ssize_t k = 0;
	while (!rc && (k = read(fd, chunk, sizeof chunk)) > 0)
		if (ev_buf_append(&b, chunk, (size_t)k))
			rc = ev_error_set(EV_E_LIMIT, "%s: passes the frame cap of %zu bytes", p, cap);
	if (!rc && k < 0)
		rc = ev_error_set(EV_E_IO, "%s: %s", p, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (!rc) {
		*out = (uint8_t *)ev_buf_detach(&b, len);
		if (!*out && !(*out = calloc(1, 1)))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	ev_buf_free(&b);
	free(p);
	return rc;
}

/* The archive's frame entries (regular files with image names); links
 * and other special entries are refused as in suite archives. */
static int list_archive(name_list *l, const char *path)
{
	struct archive *a = ev_suite_archive_open(path);
	if (!a)
		return ev_error_code();
	struct archive_entry *e;
	int rc = 0, r;
	while (!rc && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!name)
			continue;
		const char *base = strrchr(name, '/');
		base = base ? base + 1 : name;
		mode_t t = archive_entry_filetype(e);
		if (t == AE_IFLNK || archive_entry_hardlink(e))
			rc = ev_error_set(EV_E_UNSAFE, "%s: entry '%s': a link; frames must be files", path, name);
		else if (t == AE_IFREG && is_frame_name(base))
			rc = keep_name(l, name, path);
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = ev_error_set(EV_E_INVALID, "%s: a damaged archive: %s", path, archive_error_string(a));
	archive_read_free(a);
	return rc;
}

/* reads the wanted entries (names in want[], sorted as in the video) */
static int read_archive(ev_video *v, const char *path, size_t frame_cap, size_t total_cap)
{
	struct archive *a = ev_suite_archive_open(path);
	if (!a)
		return ev_error_code();
	struct archive_entry *e;
	int rc = 0, r, got = 0;
	size_t total = 0;
	while (!rc && got < v->n && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!name || archive_entry_filetype(e) != AE_IFREG)
			continue;
		for (int i = 0; i < v->n && !rc; i++) {
			if (v->data[i] || strcmp(v->name[i], name))
				continue;
			ev_buf b = EV_BUF_INIT(frame_cap);
			char chunk[1 << 16];
			la_ssize_t k;
			while (!rc && (k = archive_read_data(a, chunk, sizeof chunk)) > 0)
				if (ev_buf_append(&b, chunk, (size_t)k))
					rc = ev_error_set(EV_E_LIMIT, "%s: entry '%s' passes the frame cap of %zu bytes", path, name,
					                  frame_cap);
			if (!rc && k < 0)
				rc = ev_error_set(EV_E_INVALID, "%s: entry '%s': %s", path, name, archive_error_string(a));
			total += b.len;
			if (!rc && total > total_cap)
				rc = ev_error_set(EV_E_LIMIT, "%s: the sampled frames pass %zu bytes", path, total_cap);
			if (rc) {
				ev_buf_free(&b);
				break;
			}
			v->len[i] = b.len;
			v->data[i] = (uint8_t *)ev_buf_detach(&b, NULL);
			if (!v->data[i])
				v->data[i] = calloc(1, 1);
			got++;
			break;
		}
	}
	archive_read_free(a);
	for (int i = 0; !rc && i < v->n; i++)
		if (!v->data[i])
			rc = ev_error_set(EV_E_INVALID, "%s: entry '%s' could not be read again", path, v->name[i]);
	return rc;
}

int ev_video_load(ev_video *v, const char *path, double fps, double sample_fps, int frames,
                  const ev_video_limits *lim)
{
	memset(v, 0, sizeof *v);
	size_t frame_cap = lim && lim->max_frame_bytes ? lim->max_frame_bytes : (size_t)64 << 20;
	size_t total_cap = lim && lim->max_total_bytes ? lim->max_total_bytes : (size_t)1 << 30;
	struct stat st;
	if (stat(path, &st) != 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	bool folder = S_ISDIR(st.st_mode);
	name_list l = {0};
	int rc = folder ? list_folder(&l, path) : list_archive(&l, path);
	if (!rc && l.n == 0)
		rc = ev_error_set(EV_E_INVALID, "%s: no frames (image files: png, jpg, ...)", path);
	if (rc) {
		names_free(&l);
		return rc;
	}
	qsort(l.names, (size_t)l.n, sizeof *l.names, natural_cmp);
	int idx[EV_VIDEO_MAX_FRAMES];
	int n = ev_video_sample(l.n, fps, sample_fps, frames, idx);
	v->total = l.n;
	v->fps = fps > 0 ? fps : 1;
	if (!(v->data = calloc((size_t)n, sizeof *v->data)) || !(v->len = calloc((size_t)n, sizeof *v->len)) ||
	    !(v->name = calloc((size_t)n, sizeof *v->name)) || !(v->index = calloc((size_t)n, sizeof *v->index))) {
		names_free(&l);
		ev_video_free(v);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	v->n = n;
	for (int i = 0; i < n; i++) {
		v->index[i] = idx[i];
		v->name[i] = l.names[idx[i]];
		l.names[idx[i]] = NULL;
	}
	names_free(&l);
	size_t total = 0;
	if (folder) {
		for (int i = 0; i < n && !rc; i++) {
			rc = read_file_capped(&v->data[i], &v->len[i], path, v->name[i], frame_cap);
			total += v->len[i];
			if (!rc && total > total_cap)
				rc = ev_error_set(EV_E_LIMIT, "%s: the sampled frames pass %zu bytes", path, total_cap);
		}
	} else {
		rc = read_archive(v, path, frame_cap, total_cap);
	}
	if (rc)
		ev_video_free(v);
	return rc;
}
