/*
 * env_fs.c: the "fs" tool environment, an in-memory file system.
 *
 * Spec: {"type":"fs","files":{"/path":"text",...},"read_only":false}.
 * Files only; folders exist while a file is inside them. Every path is
 * normalised against "/" ("a/./b" -> "/a/b", "/a/../b" -> "/b"); a ".."
 * above the root is refused, so nothing can name a place outside. Tools:
 * read_file(path), write_file(path, content), list_dir(path="/"),
 * delete_file(path). State: {"files":{"/path":"text",...}} sorted by path.
 */
#include "suites/env_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FILES 1000
#define MAX_PATH 1024
#define MAX_COMPONENT 255
#define MAX_FILE_BYTES ((size_t)1 << 20)
#define MAX_TOTAL_BYTES ((size_t)16 << 20)

typedef struct {
	char *path;
	char *data;
	size_t len;
} file;

typedef struct {
	file *files;
	size_t n;
	size_t total;
	bool read_only;
} fs;

/* Normalises `in` into out[MAX_PATH + 1]; NULL on success, else the reason. */
static const char *norm_path(char *out, const char *in)
{
	size_t len = strlen(in);
	if (len == 0)
		return "empty path";
	if (len > MAX_PATH)
		return "path longer than 1024 bytes";
	size_t o = 0;
	size_t marks[MAX_PATH]; /* where each component starts in out */
	size_t depth = 0;
	out[0] = 0;
	for (const char *p = in; *p;) {
		while (*p == '/')
			p++;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - s);
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (depth == 0)
				return "path escapes the root";
			o = marks[--depth];
			out[o] = 0;
			continue;
		}
		if (n > MAX_COMPONENT)
			return "a path component is longer than 255 bytes";
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return "control character in path";
		marks[depth++] = o;
		out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
		out[o] = 0;
	}
	if (o == 0) {
		out[0] = '/';
		out[1] = 0;
	}
	return NULL;
}

static file *find(fs *f, const char *path)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->files[i].path, path))
			return &f->files[i];
	return NULL;
}

/* True when some file lies under folder `dir` ("/" holds everything). */
static bool is_dir(const fs *f, const char *dir)
{
	if (!strcmp(dir, "/"))
		return true;
	size_t n = strlen(dir);
	for (size_t i = 0; i < f->n; i++)
		if (!strncmp(f->files[i].path, dir, n) && f->files[i].path[n] == '/')
			return true;
	return false;
}

/* The first proper prefix folder of `path` that is a file, or NULL. */
static const char *parent_is_file(fs *f, const char *path)
{
	char buf[MAX_PATH + 1];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		file *x = find(f, buf);
		*p = '/';
		if (x)
			return x->path;
	}
	return NULL;
}

/* Writes or replaces a file; a reason on refusal, NULL when done (*nomem
 * set when memory ran out). */
static const char *put(fs *f, const char *path, const char *data, size_t len, bool *nomem)
{
	*nomem = false;
	if (!strcmp(path, "/") || is_dir(f, path))
		return "is a directory";
	if (parent_is_file(f, path))
		return "a parent of the path is a file";
	if (len > MAX_FILE_BYTES)
		return "content over 1 MiB";
	file *x = find(f, path);
	size_t old = x ? x->len : 0;
	if (f->total - old + len > MAX_TOTAL_BYTES)
		return "the file system is full (16 MiB)";
	if (!x && f->n >= MAX_FILES)
		return "the file system is full (1000 files)";
	char *copy = ev_strndup(data, len);
	if (!copy) {
		*nomem = true;
		return NULL;
	}
	if (!x) {
		file *nf = realloc(f->files, (f->n + 1) * sizeof *nf);
		char *p = ev_strdup(path);
		if (!nf || !p) {
			if (nf)
				f->files = nf;
			free(p);
			free(copy);
			*nomem = true;
			return NULL;
		}
		f->files = nf;
		x = &f->files[f->n++];
		x->path = p;
		x->data = NULL;
		x->len = 0;
	}
	free(x->data);
	x->data = copy;
	x->len = len;
	f->total = f->total - old + len;
	return NULL;
}

static void fs_destroy(void *self)
{
	fs *f = self;
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->files[i].path);
		free(f->files[i].data);
	}
	free(f->files);
	free(f);
}

static int fs_create(void **self, const cJSON *spec, const char *what)
{
	fs *f = calloc(1, sizeof *f);
	if (!f)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = 0;
	const cJSON *k;
	cJSON_ArrayForEach(k, spec) {
		if (strcmp(k->string, "type") && strcmp(k->string, "files") && strcmp(k->string, "read_only")) {
			rc = ev_error_set(EV_E_INVALID, "%s.%.64s: unknown field (files, read_only)", what, k->string);
			goto done;
		}
	}
	const cJSON *ro = cJSON_GetObjectItemCaseSensitive(spec, "read_only");
	if (ro && !cJSON_IsBool(ro)) {
		rc = ev_error_set(EV_E_INVALID, "%s.read_only: expected true or false", what);
		goto done;
	}
	f->read_only = cJSON_IsTrue(ro);
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(spec, "files");
	if (files && !cJSON_IsObject(files)) {
		rc = ev_error_set(EV_E_INVALID, "%s.files: expected an object of path: text", what);
		goto done;
	}
	cJSON_ArrayForEach(k, files) {
		char p[MAX_PATH + 1];
		const char *why = cJSON_IsString(k) ? norm_path(p, k->string) : "expected a string";
		bool nomem = false;
		if (!why && find(f, p))
			why = "given twice";
		if (!why)
			why = put(f, p, k->valuestring, strlen(k->valuestring), &nomem);
		if (nomem) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if (why) {
			rc = ev_error_set(EV_E_INVALID, "%s.files.%.200s: %s", what, k->string, why);
			goto done;
		}
	}
done:
	if (rc) {
		fs_destroy(f);
		return rc;
	}
	*self = f;
	return 0;
}

/* Every tool is offered even on a read-only file system, so that a write
 * gets a clear "permission denied" rather than "unknown tool". */
static cJSON *fs_tools(const void *self)
{
	(void)self;
	cJSON *a = cJSON_CreateArray();
	const char *path = "{\"path\":{\"type\":\"string\",\"description\":\"absolute path, such as /notes/todo.txt\"}}";
	bool ok = a && ev_env_tool_add(a, "read_file", "Read a text file and return its content.", path, "[\"path\"]") &&
	          ev_env_tool_add(a, "list_dir", "List the files and folders (ending in '/') inside a folder.",
	                          "{\"path\":{\"type\":\"string\",\"description\":\"folder path, / by default\"}}", "[]");
	ok = ok && ev_env_tool_add(a, "write_file", "Create or replace a text file (folders are created as needed).",
		                     "{\"path\":{\"type\":\"string\",\"description\":\"absolute path\"},"
		                     "\"content\":{\"type\":\"string\",\"description\":\"the whole new content\"}}",
		                     "[\"path\",\"content\"]") &&
	     ev_env_tool_add(a, "delete_file", "Delete a file.", path, "[\"path\"]");
	if (!ok) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static cJSON *list_dir(fs *f, const char *dir)
{
	if (find(f, dir))
		return ev_env_error("%s: not a directory", dir);
	if (!is_dir(f, dir))
		return ev_env_error("%s: no such directory", dir);
	size_t dl = strcmp(dir, "/") ? strlen(dir) : 0;
	char **names = calloc(f->n ? f->n : 1, sizeof *names);
	size_t n = 0;
	cJSON *out = NULL, *arr = NULL;
	if (!names)
		return NULL;
	for (size_t i = 0; i < f->n; i++) {
		const char *p = f->files[i].path;
		if (strncmp(p, dir, dl) || p[dl] != '/')
			continue;
		const char *s = p + dl + 1, *slash = strchr(s, '/');
		char *name = slash ? ev_strndup(s, (size_t)(slash - s) + 1) : ev_strdup(s);
		if (!name)
			goto done;
		names[n++] = name;
	}
	qsort(names, n, sizeof *names, cmp_str);
	if (!(out = cJSON_CreateObject()) || !cJSON_AddStringToObject(out, "path", dir) ||
	    !(arr = cJSON_AddArrayToObject(out, "entries")))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		cJSON *s = cJSON_CreateString(names[i]);
		if (!s)
			goto fail;
		cJSON_AddItemToArray(arr, s);
	}
	goto done;
fail:
	cJSON_Delete(out);
	out = NULL;
done:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return out;
}

static int fs_exec(void *self, const char *name, const cJSON *args, cJSON **result)
{
	fs *f = self;
	cJSON *err = NULL;
	static const char *const k_path[] = {"path", NULL};
	static const char *const k_write[] = {"path", "content", NULL};
	bool write = !strcmp(name, "write_file"), del = !strcmp(name, "delete_file");
	bool list = !strcmp(name, "list_dir");
	if ((err = ev_env_check_args(args, write ? k_write : k_path))) {
		*result = err;
		return 0;
	}
	const char *raw = ev_env_arg_str(args, "path", !list, &err);
	if (err) {
		*result = err;
		return 0;
	}
	char p[MAX_PATH + 1];
	const char *why = norm_path(p, raw ? raw : "/");
	if (why) {
		*result = ev_env_error("%.200s: %s", raw, why);
		return 0;
	}
	if ((write || del) && f->read_only) {
		*result = ev_env_error("%s: permission denied (the file system is read-only)", p);
		return 0;
	}
	if (list) {
		*result = list_dir(f, p);
		return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (write) {
		const char *content = ev_env_arg_str(args, "content", true, &err);
		if (err) {
			*result = err;
			return 0;
		}
		bool nomem;
		why = put(f, p, content, strlen(content), &nomem);
		if (nomem)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		if (why) {
			*result = ev_env_error("%s: %s", p, why);
			return 0;
		}
		cJSON *o = cJSON_CreateObject();
		if (o && (!cJSON_AddStringToObject(o, "path", p) || !cJSON_AddNumberToObject(o, "bytes", (double)strlen(content)))) {
			cJSON_Delete(o);
			o = NULL;
		}
		*result = o;
		return o ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	file *x = find(f, p);
	if (!x) {
		*result = ev_env_error(is_dir(f, p) ? "%s: is a directory" : "%s: no such file", p);
		return 0;
	}
	cJSON *o = cJSON_CreateObject();
	if (del) {
		if (o && !cJSON_AddStringToObject(o, "deleted", p)) {
			cJSON_Delete(o);
			o = NULL;
		}
		if (o) {
			f->total -= x->len;
			free(x->path);
			free(x->data);
			*x = f->files[--f->n];
		}
	} else if (o && (!cJSON_AddStringToObject(o, "path", p) || !cJSON_AddStringToObject(o, "content", x->data))) {
		cJSON_Delete(o);
		o = NULL;
	}
	*result = o;
	return o ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static int cmp_file(const void *a, const void *b) { return strcmp(((const file *)a)->path, ((const file *)b)->path); }

static cJSON *fs_state(const void *self)
{
	const fs *f = self;
	/* Sorted in place would reorder the caller's view; sort a copy of
	 * the index instead. */
	file *sorted = malloc((f->n ? f->n : 1) * sizeof *sorted);
	cJSON *st = cJSON_CreateObject(), *files = NULL;
	if (!sorted || !st || !(files = cJSON_AddObjectToObject(st, "files"))) {
		free(sorted);
		cJSON_Delete(st);
		return NULL;
	}
	if (f->n)
		memcpy(sorted, f->files, f->n * sizeof *sorted);
	qsort(sorted, f->n, sizeof *sorted, cmp_file);
	for (size_t i = 0; i < f->n; i++) {
		if (!cJSON_AddStringToObject(files, sorted[i].path, sorted[i].data)) {
			free(sorted);
			cJSON_Delete(st);
			return NULL;
		}
	}
	free(sorted);
	return st;
}

const ev_env_kind ev_env_kind_fs = {"fs", fs_create, fs_tools, fs_exec, fs_state, fs_destroy};
