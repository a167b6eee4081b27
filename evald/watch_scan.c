/*
 * evald/watch_scan.c: is a checkpoint folder complete yet?
 *
 * Trainers and copy jobs write checkpoints file by file, so a folder is
 * judged on what it holds (config.json and every weight file, or an
 * endpoint.json), on the markers writers leave while copying (*.tmp,
 * *.partial, *.incomplete), and on a fingerprint of every file's size and
 * mtime, which the caller compares over two consecutive scans. Everything
 * read here is bounded: the walk's depth and file count, the JSON sizes.
 * A GGUF file in the watched folder is a checkpoint of its own (one file,
 * judged by its size and mtime over two scans and its first bytes).
 */
#include "evald/watch.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ev_watch_folder_clear(ev_watch_folder *f)
{
	if (!f)
		return;
	free(f->endpoint_url);
	free(f->endpoint_model);
	memset(f, 0, sizeof *f);
}

static void not_ready(ev_watch_folder *f, const char *fmt, ...) EV_PRINTF(2, 3);
static void not_ready(ev_watch_folder *f, const char *fmt, ...)
{
	if (!f->ready && f->why[0])
		return; /* the first reason is the one reported */
	f->ready = false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof f->why, fmt, ap);
	va_end(ap);
}

static bool is_marker(const char *name)
{
	return !strcmp(name, ".incomplete") || ev_str_ends(name, ".tmp") || ev_str_ends(name, ".partial") ||
	       ev_str_ends(name, ".incomplete");
}

/* ---- the walk: markers and the fingerprint ------------------------------------ */

typedef struct {
	char **lines; /* "relpath\tsize\tmtime" */
	size_t n, cap;
	bool overflow;
	char marker[256];
} walk_state;

static int walk_add(walk_state *w, char *line)
{
	if (!line)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (EV_GROW(w->lines, w->cap, w->n + 1)) {
		free(line);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	w->lines[w->n++] = line;
	return 0;
}

/* A file's line in a fingerprint: its name, size, mtime and mode. */
static char *fp_line(const char *name, const struct stat *st)
{
	return ev_asprintf("%s\t%lld\t%lld.%09ld\t%o", name, (long long)st->st_size, (long long)st->st_mtim.tv_sec,
	                   (long)st->st_mtim.tv_nsec, (unsigned)st->st_mode);
}

static int walk(walk_state *w, const char *root, const char *rel, int depth)
{
	char *path = *rel ? ev_asprintf("%s/%s", root, rel) : ev_strdup(root);
	if (!path)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	DIR *d = opendir(path);
	int rc = 0;
	if (!d) {
		/* Gone or unreadable between two looks: record it, the fingerprint changes. */
		rc = walk_add(w, ev_asprintf("%s\t(unreadable: %s)", rel, strerror(errno)));
		free(path);
		return rc;
	}
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (w->n >= EV_WATCH_MAX_FILES) {
			w->overflow = true;
			break;
		}
		if (is_marker(e->d_name) && !w->marker[0])
			snprintf(w->marker, sizeof w->marker, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		char *sub = *rel ? ev_asprintf("%s/%s", rel, e->d_name) : ev_strdup(e->d_name);
		char *full = sub ? ev_asprintf("%s/%s", root, sub) : NULL;
		struct stat st;
		if (!sub || !full) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		} else if (lstat(full, &st) != 0) {
			rc = walk_add(w, ev_asprintf("%s\t(gone)", sub));
		} else {
			rc = walk_add(w, fp_line(sub, &st));
			/* Links are not followed: a checkpoint's own files are plain files. */
			if (!rc && S_ISDIR(st.st_mode) && depth + 1 < EV_WATCH_MAX_DEPTH)
				rc = walk(w, root, sub, depth + 1);
		}
		free(sub);
		free(full);
	}
	closedir(d);
	free(path);
	return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* ---- the files a checkpoint needs ----------------------------------------------- */

static bool regular_file(const char *dir, const char *name, long long *size)
{
	char *p = ev_asprintf("%s/%s", dir, name);
	struct stat st;
	bool ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
	if (ok && size)
		*size = (long long)st.st_size;
	free(p);
	return ok;
}

/* Reads dir/name as JSON; false (with the reason in f->why) when it cannot. */
static bool read_json(ev_watch_folder *f, cJSON **out, const char *dir, const char *name)
{
	char *p = ev_asprintf("%s/%s", dir, name), *text = NULL;
	size_t len = 0;
	*out = NULL;
	if (!p || ev_file_read(&text, &len, p, EV_WATCH_MAX_JSON) != 0 ||
	    ev_json_parse(out, text, len, name) != 0) {
		not_ready(f, "%s", p ? ev_error_msg() : "out of memory");
		free(p);
		free(text);
		return false;
	}
	free(p);
	free(text);
	return true;
}

/* A shard name from an index: a plain relative path, no "..", no control bytes. */
static bool shard_name_ok(const char *s)
{
	if (!*s || *s == '/' || strlen(s) > 1024)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20)
			return false;
	for (const char *p = s; (p = strstr(p, "..")); p += 2)
		if ((p == s || p[-1] == '/') && (p[2] == '/' || !p[2]))
			return false;
	return true;
}

static void check_endpoint(ev_watch_folder *f, const char *dir)
{
	cJSON *j = NULL;
	if (!read_json(f, &j, dir, "endpoint.json"))
		return;
	const char *url = ev_json_str(j, "url", NULL), *model = ev_json_str(j, "model", NULL);
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
	if (!cJSON_IsObject(j))
		not_ready(f, "endpoint.json: not a JSON object");
	else if (!url || (!ev_str_starts(url, "http://") && !ev_str_starts(url, "https://")) || strlen(url) > 2048)
		not_ready(f, "endpoint.json: url: expected an http(s) URL of at most 2048 bytes");
	else if (m && (!model || !*model || strlen(model) > 256))
		not_ready(f, "endpoint.json: model: expected a name of 1-256 bytes");
	else {
		for (const char *p = url; *p; p++)
			if ((unsigned char)*p <= 0x20) {
				not_ready(f, "endpoint.json: url: control or space characters");
				cJSON_Delete(j);
				return;
			}
		f->endpoint_url = ev_strdup(url);
		f->endpoint_model = model ? ev_strdup(model) : NULL;
	}
	cJSON_Delete(j);
}

static void check_weights(ev_watch_folder *f, const char *dir)
{
	if (!regular_file(dir, "config.json", NULL)) {
		not_ready(f, "config.json: missing");
		return;
	}
	if (regular_file(dir, "model.safetensors", NULL))
		return;
	if (!regular_file(dir, "model.safetensors.index.json", NULL)) {
		not_ready(f, "no model.safetensors and no model.safetensors.index.json");
		return;
	}
	cJSON *j = NULL;
	if (!read_json(f, &j, dir, "model.safetensors.index.json"))
		return;
	const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "weight_map"), *e;
	if (!cJSON_IsObject(map) || !map->child) {
		not_ready(f, "model.safetensors.index.json: weight_map: expected a non-empty object");
	} else {
		/* Tensors name their shard; shards repeat, so stat each name once in a row. */
		const char *last = NULL;
		cJSON_ArrayForEach(e, map)
		{
			if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
				not_ready(f, "model.safetensors.index.json: weight_map.%.100s: expected a relative shard file name",
				          e->string ? e->string : "?");
				break;
			}
			if (last && !strcmp(last, e->valuestring))
				continue;
			last = e->valuestring;
			long long size = 0;
			if (!regular_file(dir, e->valuestring, &size)) {
				not_ready(f, "shard %.200s (named in model.safetensors.index.json): missing", e->valuestring);
				break;
			}
		}
	}
	cJSON_Delete(j);
}

/* A file where a checkpoint folder was expected: its name, size and mtime
 * are the fingerprint. A GGUF file on its own (DIR/name.gguf) is ready
 * when it starts as a GGUF file does (magic, version 2 or 3). A copy in
 * progress shows as a fingerprint that changes between scans; a file that
 * is complete but broken fails its run, naming what is wrong, and is
 * looked at again once rewritten. */
static int check_file(ev_watch_folder *out, const char *path, const struct stat *st)
{
	char *line = fp_line(path, st);
	ev_sha256_ctx *h = NULL;
	int rc = line ? ev_sha256_begin(&h) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc) {
		ev_sha256_update(h, line, strlen(line) + 1);
		ev_sha256_end_hex(h, out->fingerprint);
	}
	free(line);
	if (rc)
		return rc;
	if (!ev_str_ends(path, ".gguf")) {
		not_ready(out, "a file, not a checkpoint folder or a .gguf file");
		return 0;
	}
	unsigned char head[8];
	FILE *f = fopen(path, "rb");
	size_t got = f ? fread(head, 1, sizeof head, f) : 0;
	if (f)
		fclose(f);
	uint32_t version = got == 8 ? (uint32_t)head[4] | (uint32_t)head[5] << 8 | (uint32_t)head[6] << 16 |
	                                      (uint32_t)head[7] << 24
	                            : 0;
	if (!f)
		not_ready(out, "cannot be read: %s", strerror(errno));
	else if (got < 8)
		not_ready(out, "%zu bytes: not a GGUF file yet", got);
	else if (memcmp(head, "GGUF", 4))
		not_ready(out, "does not start with GGUF's magic");
	else if (version != 2 && version != 3)
		not_ready(out, "GGUF version %u (2 or 3 are read)", (unsigned)version);
	return 0;
}

int ev_watch_folder_check(ev_watch_folder *out, const char *dir)
{
	walk_state w = {0};
	ev_sha256_ctx *h = NULL;
	int rc;
	memset(out, 0, sizeof *out);
	out->ready = true;

	struct stat st;
	if (stat(dir, &st) == 0 && S_ISREG(st.st_mode))
		return check_file(out, dir, &st);

	if ((rc = walk(&w, dir, "", 0)))
		goto done;
	if (w.n)
		qsort(w.lines, w.n, sizeof *w.lines, cmp_str);
	if ((rc = ev_sha256_begin(&h)))
		goto done;
	for (size_t i = 0; i < w.n; i++)
		ev_sha256_update(h, w.lines[i], strlen(w.lines[i]) + 1);
	ev_sha256_end_hex(h, out->fingerprint);

	if (w.overflow)
		not_ready(out, "more than %d files", EV_WATCH_MAX_FILES);
	else if (w.marker[0])
		not_ready(out, "%s: still being written", w.marker);
	else if (regular_file(dir, "endpoint.json", NULL))
		check_endpoint(out, dir);
	else
		check_weights(out, dir);
	ev_error_clear();
done:
	for (size_t i = 0; i < w.n; i++)
		free(w.lines[i]);
	free(w.lines);
	if (rc)
		ev_watch_folder_clear(out);
	return rc;
}
