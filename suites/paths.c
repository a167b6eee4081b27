/*
 * paths.c: the suite's file-system helpers: attachment paths confined to
 * the suite root, part kinds from file extensions, names made safe to show,
 * and removal of extracted folders.
 */
#include "suites/suites_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void ev_suite_show(char out[EV_SUITE_SHOW], const char *s)
{
	size_t n = s ? strnlen(s, EV_SUITE_SHOW - 4) : 0;
	if (n)
		memcpy(out, s, n);
	out[n] = 0;
	ev_term_clean(out);
	if (s && s[n])
		strcat(out, "...");
}

int ev_suite_resolve_path(char **out, const char *root, const char *rel, const char *what)
{
	return ev_suite_resolve_path_ex(out, root, rel, what, false);
}

int ev_suite_resolve_path_ex(char **out, const char *root, const char *rel, const char *what, bool folder_ok)
{
	*out = NULL;
	char shown[EV_SUITE_SHOW];
	ev_suite_show(shown, rel);
	if (!rel[0])
		return ev_error_set(EV_E_INVALID, "%s: an empty path", what);
	if (rel[0] == '/')
		return ev_error_set(EV_E_UNSAFE, "%s: '%s' is an absolute path; paths are relative to the suite folder",
		                    what, shown);
	/* A lexical check first, so that "../x" is refused as unsafe whether
	 * or not x exists; realpath below catches escapes through links. */
	long depth = 0;
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			depth--;
		else if (n && !(n == 1 && p[0] == '.'))
			depth++;
		if (depth < 0)
			return ev_error_set(EV_E_UNSAFE, "%s: '%s' leaves the suite folder", what, shown);
		p += n;
		if (*p)
			p++;
	}
	char *full = ev_asprintf("%s/%s", root, rel);
	if (!full)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	char *real = realpath(full, NULL);
	int e = errno;
	free(full);
	if (!real) {
		if (e == ENOENT || e == ENOTDIR)
			return ev_error_set(EV_E_NOTFOUND, "%s: '%s': no such file in the suite folder", what, shown);
		return ev_error_set(EV_E_IO, "%s: '%s': %s", what, shown, strerror(e));
	}
	size_t rl = strlen(root);
	if (!(strncmp(real, root, rl) == 0 && (real[rl] == '/' || real[rl] == 0 || (rl == 1 && root[0] == '/')))) {
		free(real);
		return ev_error_set(EV_E_UNSAFE, "%s: '%s' resolves outside the suite folder", what, shown);
	}
	struct stat st;
	if (stat(real, &st) != 0 || !(S_ISREG(st.st_mode) || (folder_ok && S_ISDIR(st.st_mode)))) {
		free(real);
		return ev_error_set(EV_E_INVALID, "%s: '%s' is not a regular file%s", what, shown, folder_ok ? " or folder" : "");
	}
	*out = real;
	return 0;
}

static const struct {
	const char *ext;
	ev_part_kind kind;
	const char *mime;
} kinds[] = {
	{"png", EV_PART_IMAGE, "image/png"},
	{"jpg", EV_PART_IMAGE, "image/jpeg"},
	{"jpeg", EV_PART_IMAGE, "image/jpeg"},
	{"gif", EV_PART_IMAGE, "image/gif"},
	{"webp", EV_PART_IMAGE, "image/webp"},
	{"bmp", EV_PART_IMAGE, "image/bmp"},
	{"tif", EV_PART_IMAGE, "image/tiff"},
	{"tiff", EV_PART_IMAGE, "image/tiff"},
	{"heic", EV_PART_IMAGE, "image/heic"},
	{"mp4", EV_PART_VIDEO, "video/mp4"},
	{"m4v", EV_PART_VIDEO, "video/x-m4v"},
	{"webm", EV_PART_VIDEO, "video/webm"},
	{"mov", EV_PART_VIDEO, "video/quicktime"},
	{"mkv", EV_PART_VIDEO, "video/x-matroska"},
	{"avi", EV_PART_VIDEO, "video/x-msvideo"},
	{"pdf", EV_PART_DOCUMENT, "application/pdf"},
	{"txt", EV_PART_DOCUMENT, "text/plain"},
	{"md", EV_PART_DOCUMENT, "text/markdown"},
	{"csv", EV_PART_DOCUMENT, "text/csv"},
	{"json", EV_PART_DOCUMENT, "application/json"},
	{"html", EV_PART_DOCUMENT, "text/html"},
	{"htm", EV_PART_DOCUMENT, "text/html"},
	{"docx", EV_PART_DOCUMENT, "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
	{"xlsx", EV_PART_DOCUMENT, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
	{"pptx", EV_PART_DOCUMENT, "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
};

ev_part_kind ev_part_kind_for_path(const char *path, const char **mime)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash : path, '.');
	if (dot)
		for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
			if (strcasecmp(dot + 1, kinds[i].ext) == 0) {
				if (mime)
					*mime = kinds[i].mime;
				return kinds[i].kind;
			}
	if (mime)
		*mime = "application/octet-stream";
	return EV_PART_DOCUMENT;
}
