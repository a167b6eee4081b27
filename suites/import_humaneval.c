/*
 * import_humaneval.c: the HumanEval importer, and the reading and writing
 * helpers the coding importers share (compressed JSON Lines in, a suite
 * folder out).
 */
#include "suites/suites.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Caps: the published file is 45 KB compressed, 200 KB plain. */
#define MAX_FILE ((size_t)256 << 20)
#define MAX_RECORDS 100000
#define MAX_ID 256

/* ---- shared helpers ----------------------------------------------------------- */

int ev_import_read(char **out, size_t *len_out, const char *path, size_t max)
{
	*out = NULL;
	if (len_out)
		*len_out = 0;
	/* libarchive finds no format in an empty file: that is just empty text */
	struct stat st;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
		return (*out = ev_strdup("")) ? 0 : ev_error_set(EV_E_NOMEM, "%s: out of memory", path);
	struct archive *a = archive_read_new();
	ev_buf b = EV_BUF_INIT(max);
	int rc = 0;
	if (!a)
		return ev_error_set(EV_E_NOMEM, "%s: out of memory", path);
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	struct archive_entry *e;
	if (archive_read_open_filename(a, path, 65536) != ARCHIVE_OK) {
		int en = archive_errno(a);
		rc = ev_error_set(en == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, archive_error_string(a));
		goto done;
	}
	int h = archive_read_next_header(a, &e);
	if (h == ARCHIVE_EOF)
		goto done; /* an empty file */
	if (h != ARCHIVE_OK) {
		rc = ev_error_set(EV_E_PARSE, "%s: %s", path, archive_error_string(a));
		goto done;
	}
	char chunk[65536];
	for (;;) {
		la_ssize_t n = archive_read_data(a, chunk, sizeof chunk);
		if (n == 0)
			break;
		if (n < 0) {
			rc = ev_error_set(EV_E_PARSE, "%s: %s", path, archive_error_string(a));
			goto done;
		}
		if (ev_buf_append(&b, chunk, (size_t)n)) {
			rc = ev_error_set(EV_E_LIMIT, "%s: larger than %zu bytes once decompressed", path, max);
			goto done;
		}
	}
done:
	archive_read_free(a);
	if (!rc) {
		*out = b.data ? ev_buf_detach(&b, len_out) : ev_strdup("");
		if (!*out)
			rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", path);
	}
	ev_buf_free(&b);
	return rc;
}

int ev_import_each_object(const char *text, size_t len, const char *file,
                          int (*fn)(void *ctx, const cJSON *obj, const char *where), void *ctx)
{
	size_t line = 0, i = 0, records = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && text[j] != '\n')
			j++;
		line++;
		const char *p = text + i;
		size_t n = j - i;
		i = j + 1;
		if (line == 1 && n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3))
			p += 3, n -= 3;
		bool blank = true;
		for (size_t k = 0; k < n && blank; k++)
			blank = isspace((unsigned char)p[k]) != 0;
		if (blank)
			continue;
		char where[600];
		snprintf(where, sizeof where, "%s:%zu", file, line);
		if (++records > MAX_RECORDS)
			return ev_error_set(EV_E_LIMIT, "%s: more than %d records", where, MAX_RECORDS);
		cJSON *obj = NULL;
		int rc = ev_json_parse(&obj, p, n, where);
		if (!rc && !cJSON_IsObject(obj))
			rc = ev_error_set(EV_E_PARSE, "%s: expected a JSON object", where);
		if (!rc)
			rc = fn(ctx, obj, where);
		cJSON_Delete(obj);
		if (rc)
			return rc;
	}
	return 0;
}

typedef struct {
	const char *id;
	size_t line;
} id_line;

static int cmp_id(const void *a, const void *b)
{
	const id_line *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

int ev_import_unique_ids(const char *const *ids, const size_t *lines, size_t n, const char *file)
{
	if (n < 2)
		return 0;
	id_line *v = malloc(n * sizeof *v);
	if (!v)
		return ev_error_set(EV_E_NOMEM, "%s: out of memory", file);
	for (size_t i = 0; i < n; i++)
		v[i] = (id_line){ids[i], lines[i]};
	qsort(v, n, sizeof *v, cmp_id);
	int rc = 0;
	for (size_t i = 1; i < n && !rc; i++)
		if (!strcmp(v[i].id, v[i - 1].id))
			rc = ev_error_set(EV_E_INVALID, "%s:%zu: task_id: duplicate \"%.60s\" (first on line %zu)", file,
			                  v[i].line, v[i].id, v[i - 1].line);
	free(v);
	return rc;
}

int ev_import_write_suite(const char *out_dir, const char *suite_json, const char *samples, size_t samples_len)
{
	if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
		return ev_error_set(EV_E_IO, "%s: %s", out_dir, strerror(errno));
	struct stat st;
	if (stat(out_dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return ev_error_set(EV_E_IO, "%s: not a folder", out_dir);
	char *p = ev_asprintf("%s/samples.jsonl", out_dir);
	int rc = p ? ev_file_write(p, samples, samples_len) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(p);
	if (rc)
		return rc;
	p = ev_asprintf("%s/suite.json", out_dir);
	rc = p ? ev_file_write(p, suite_json, strlen(suite_json)) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(p);
	return rc;
}

/* ---- HumanEval ------------------------------------------------------------------ */

int ev_import_keep_id(ev_import_ctx *c, const char *id, const char *where)
{
	/* ids and lines grow together: a second capacity for the second array */
	if (EV_GROW(c->ids, c->cap, c->n + 1) || EV_GROW(c->lines, c->lines_cap, c->n + 1))
		return ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	const char *colon = strrchr(where, ':');
	int64_t line = 0;
	if (!colon || !ev_parse_i64(colon + 1, &line))
		line = 0;
	if (!(c->ids[c->n] = ev_strdup(id)))
		return ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	c->lines[c->n++] = (size_t)line;
	return 0;
}

void ev_import_ctx_clear(ev_import_ctx *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->ids[i]);
	free(c->ids);
	free(c->lines);
	ev_buf_free(&c->out);
}

static int need_str(const char **out, const cJSON *o, const char *key, const char *where, bool nonempty)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return ev_error_set(EV_E_INVALID, "%s: %s: missing", where, key);
	if (!cJSON_IsString(v))
		return ev_error_set(EV_E_INVALID, "%s: %s: expected a string", where, key);
	if (nonempty && !v->valuestring[0])
		return ev_error_set(EV_E_INVALID, "%s: %s: empty", where, key);
	*out = v->valuestring;
	return 0;
}

static bool identifier(const char *s)
{
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	size_t n = 0;
	for (; s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && s[n] != '_')
			return false;
	return n <= 200;
}

static int add_line(ev_buf *out, cJSON *sample, const char *where)
{
	char *line = ev_json_print(sample);
	int rc = !line ? ev_error_set(EV_E_NOMEM, "%s: out of memory", where)
	               : ev_buf_puts(out, line) || ev_buf_putc(out, '\n')
	                     ? ev_error_set(EV_E_LIMIT, "%s: suite larger than %zu bytes", where, out->max)
	                     : 0;
	free(line);
	return rc;
}

static int he_record(void *arg, const cJSON *o, const char *where)
{
	ev_import_ctx *c = arg;
	const char *id, *prompt, *test, *entry, *canon;
	int rc;
	if ((rc = need_str(&id, o, "task_id", where, true)) || (rc = need_str(&prompt, o, "prompt", where, true)) ||
	    (rc = need_str(&test, o, "test", where, true)) || (rc = need_str(&entry, o, "entry_point", where, true)) ||
	    (rc = need_str(&canon, o, "canonical_solution", where, false)))
		return rc;
	if (strlen(id) > MAX_ID)
		return ev_error_set(EV_E_INVALID, "%s: task_id: longer than %d bytes", where, MAX_ID);
	if (!identifier(entry))
		return ev_error_set(EV_E_INVALID, "%s: entry_point: \"%.60s\" is not a Python name", where, entry);
	if (!strstr(test, "def check("))
		return ev_error_set(EV_E_INVALID, "%s: test: defines no check(candidate) function", where);
	if ((rc = ev_import_keep_id(c, id, where)))
		return rc;

	cJSON *s = cJSON_CreateObject(), *t = NULL, *m = NULL;
	rc = 0;
	if (!s || !cJSON_AddStringToObject(s, "id", id) || !cJSON_AddStringToObject(s, "input", prompt) ||
	    !(t = cJSON_AddObjectToObject(s, "tests")) || !cJSON_AddStringToObject(t, "style", "humaneval") ||
	    !cJSON_AddStringToObject(t, "prompt", prompt) || !cJSON_AddStringToObject(t, "test", test) ||
	    !cJSON_AddStringToObject(t, "entry_point", entry) || !(m = cJSON_AddObjectToObject(s, "metadata")) ||
	    !cJSON_AddStringToObject(m, "canonical_solution", canon) || !cJSON_AddStringToObject(m, "entry_point", entry))
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	if (!rc)
		rc = add_line(&c->out, s, where);
	cJSON_Delete(s);
	return rc;
}

int ev_import_jsonl(const char *path, size_t max_file, int (*record)(void *ctx, const cJSON *obj, const char *where),
                    const char *suite_json, const char *out_dir)
{
	char *text = NULL;
	size_t len = 0;
	ev_import_ctx c = {.out = EV_BUF_INIT(max_file * 2)};
	int rc = ev_import_read(&text, &len, path, max_file);
	if (!rc)
		rc = ev_import_each_object(text, len, path, record, &c);
	if (!rc)
		rc = ev_import_unique_ids((const char *const *)c.ids, c.lines, c.n, path);
	if (!rc && !c.n)
		rc = ev_error_set(EV_E_INVALID, "%s: no problems in it", path);
	if (!rc)
		rc = ev_import_write_suite(out_dir, suite_json, c.out.data, c.out.len);
	free(text);
	ev_import_ctx_clear(&c);
	return rc;
}

int ev_import_humaneval(const char *jsonl_or_gz, const char *out_dir)
{
	if (!jsonl_or_gz || !out_dir)
		return ev_error_set(EV_E_INVALID, "ev_import_humaneval: the file and out_dir are needed");
	static const char suite[] =
		"{\"name\":\"humaneval\",\"version\":\"1\",\"kind\":\"coding\","
		"\"description\":\"HumanEval (OpenAI): complete a Python function; judged by running its unit tests\","
		"\"system_prompt\":\"Complete the Python function. Answer with the whole function in one ```python "
		"code block.\",\"generation\":{\"max_tokens\":1024,\"temperature\":0},\"checker\":{\"type\":\"humaneval\"}}\n";
	return ev_import_jsonl(jsonl_or_gz, MAX_FILE, he_record, suite, out_dir);
}
