/*
 * suites/import_bfcl.c: Berkeley Function Calling Leaderboard files to a
 * tool-use suite.
 *
 * BFCL publishes one JSON object a line (despite the .json name):
 * {"id","question":[[messages of turn 1], ...],"function":[...]} and, in a
 * separate file, {"id","ground_truth":[{"fn":{"arg":[acceptable...]}}]}.
 * A sample keeps BFCL's functions and ground truth untouched in "tests"
 * (the toolcall checker applies BFCL's own types to them) and offers the
 * model the same functions as OpenAI tools: names with '.' turned into '_'
 * (OpenAI names allow [a-zA-Z0-9_-] only; the checker accepts both forms)
 * and BFCL's types turned into JSON Schema (dict -> object, float ->
 * number, tuple -> array, any -> no type).
 */
#include "suites/suites.h"
#include "suites/suites_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A BFCL file is a few hundred KiB; leave room for much larger ones. */
#define BFCL_MAX_FILE ((size_t)512 << 20)
#define BFCL_MAX_NAME 128
#define BFCL_MAX_SCHEMA_DEPTH 32

typedef struct {
	char *id;
	cJSON *gt;
	size_t line;
} answer;

typedef struct {
	answer *v;
	size_t n, cap;
} answers;

static void answers_free(answers *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->v[i].id);
		cJSON_Delete(a->v[i].gt);
	}
	free(a->v);
}

static int cmp_answer(const void *x, const void *y)
{
	return strcmp(((const answer *)x)->id, ((const answer *)y)->id);
}

static const answer *answer_find(const answers *a, const char *id)
{
	answer key = {.id = (char *)id};
	return bsearch(&key, a->v, a->n, sizeof *a->v, cmp_answer);
}

/* Calls fn for each non-blank line of `text` (line numbers from 1). */
typedef int (*line_fn)(void *ctx, const char *line, size_t len, size_t lineno);

static int each_line(const char *text, size_t len, line_fn fn, void *ctx)
{
	size_t lineno = 0;
	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t n = end - pos;
		lineno++;
		if (n > EV_SUITE_MAX_LINE)
			return ev_error_set(EV_E_LIMIT, "line %zu: longer than %zu bytes", lineno, EV_SUITE_MAX_LINE);
		if (strspn(text + pos, " \t\r") < n) {
			int rc = fn(ctx, text + pos, n, lineno);
			if (rc)
				return rc;
		}
		pos = end + 1;
	}
	return 0;
}

typedef struct {
	const char *file;
	answers *a;
} answers_ctx;

static int read_answer(void *ctx, const char *line, size_t len, size_t lineno)
{
	answers_ctx *c = ctx;
	char what[600];
	snprintf(what, sizeof what, "%s:%zu", c->file, lineno);
	cJSON *j = NULL;
	int rc = ev_json_parse(&j, line, len, what);
	if (rc)
		return rc;
	const char *id;
	cJSON *gt = cJSON_GetObjectItemCaseSensitive(j, "ground_truth");
	if ((rc = ev_json_str_req(&id, j, "id", what)))
		goto done;
	if (!cJSON_IsArray(gt)) {
		rc = ev_error_set(EV_E_INVALID, "%s: ground_truth: expected a list", what);
		goto done;
	}
	if (EV_GROW(c->a->v, c->a->cap, c->a->n + 1)) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	answer *x = &c->a->v[c->a->n];
	x->id = ev_strdup(id);
	x->gt = cJSON_DetachItemViaPointer(j, gt);
	x->line = lineno;
	if (!x->id) {
		free(x->id);
		cJSON_Delete(x->gt);
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	c->a->n++;
done:
	cJSON_Delete(j);
	return rc;
}

/* ---- tools --------------------------------------------------------------- */

static int set_type(cJSON *o, const char *t)
{
	cJSON *s = cJSON_CreateString(t);
	if (!s || !cJSON_ReplaceItemInObjectCaseSensitive(o, "type", s)) {
		cJSON_Delete(s);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

/* BFCL's types to JSON Schema, in place, through properties and items. */
static int fix_schema(cJSON *o, int depth, const char *what)
{
	if (!cJSON_IsObject(o))
		return 0;
	if (depth > BFCL_MAX_SCHEMA_DEPTH)
		return ev_error_set(EV_E_LIMIT, "%s: parameters nested deeper than %d", what, BFCL_MAX_SCHEMA_DEPTH);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
	int rc = 0;
	if (cJSON_IsString(t)) {
		const char *s = t->valuestring;
		if (!strcmp(s, "dict"))
			rc = set_type(o, "object");
		else if (!strcmp(s, "float"))
			rc = set_type(o, "number");
		else if (!strcmp(s, "tuple"))
			rc = set_type(o, "array");
		else if (strcmp(s, "string") && strcmp(s, "integer") && strcmp(s, "boolean") && strcmp(s, "array") &&
		         strcmp(s, "object") && strcmp(s, "number") && strcmp(s, "null"))
			cJSON_DeleteItemFromObjectCaseSensitive(o, "type"); /* "any" and the unknown */
	}
	cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "properties"))
	{
		if (!rc)
			rc = fix_schema(e, depth + 1, what);
	}
	cJSON *items = cJSON_GetObjectItemCaseSensitive(o, "items");
	if (!rc && cJSON_IsArray(items)) {
		cJSON_ArrayForEach(e, items)
		{
			if (!rc)
				rc = fix_schema(e, depth + 1, what);
		}
	} else if (!rc) {
		rc = fix_schema(items, depth + 1, what);
	}
	if (!rc)
		rc = fix_schema(cJSON_GetObjectItemCaseSensitive(o, "additionalProperties"), depth + 1, what);
	return rc;
}

static int tool_of(cJSON **out, const cJSON *f, size_t i, const char *what)
{
	char w[700];
	snprintf(w, sizeof w, "%s: function[%zu]", what, i);
	*out = NULL;
	const char *name;
	int rc = ev_json_str_req(&name, f, "name", w);
	if (rc)
		return rc;
	if (!*name || strlen(name) > BFCL_MAX_NAME)
		return ev_error_set(EV_E_INVALID, "%s: name: expected 1 to %d bytes", w, BFCL_MAX_NAME);
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
	if (params && !cJSON_IsObject(params))
		return ev_error_set(EV_E_INVALID, "%s: parameters: expected an object", w);
	cJSON *tool = cJSON_CreateObject(), *fn = cJSON_CreateObject();
	cJSON *p = params ? cJSON_Duplicate(params, true) : cJSON_Parse("{\"type\":\"object\",\"properties\":{}}");
	char *oname = ev_strdup(name);
	if (!tool || !fn || !p || !oname) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (char *c = oname; *c; c++)
		if (*c == '.')
			*c = '_';
	if ((rc = fix_schema(p, 0, w)))
		goto done;
	const char *desc = ev_json_str(f, "description", NULL);
	cJSON_AddStringToObject(tool, "type", "function");
	cJSON_AddStringToObject(fn, "name", oname);
	if (desc)
		cJSON_AddStringToObject(fn, "description", desc);
	cJSON_AddItemToObject(fn, "parameters", p);
	p = NULL;
	cJSON_AddItemToObject(tool, "function", fn);
	fn = NULL;
	*out = tool;
	tool = NULL;
done:
	free(oname);
	cJSON_Delete(p);
	cJSON_Delete(fn);
	cJSON_Delete(tool);
	return rc;
}

/* ---- questions ------------------------------------------------------------ */

typedef struct {
	const char *file;
	const char *category;
	const answers *a; /* NULL: irrelevance */
	ev_buf out;
	size_t n;
	answer *ids; /* id and line of each question (gt unused), to refuse duplicates */
	size_t n_ids, cap_ids;
} questions_ctx;

static bool known_role(const char *r)
{
	return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant");
}

static int add_copy(cJSON *to, const char *key, const cJSON *v)
{
	cJSON *d = cJSON_Duplicate(v, true);
	if (!d || !cJSON_AddItemToObject(to, key, d)) {
		cJSON_Delete(d);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

static int read_question(void *ctx, const char *line, size_t len, size_t lineno)
{
	questions_ctx *c = ctx;
	char what[600];
	snprintf(what, sizeof what, "%s:%zu", c->file, lineno);
	cJSON *j = NULL, *o = NULL;
	char *text = NULL;
	int rc = ev_json_parse(&j, line, len, what);
	if (rc)
		return rc;
	const char *id;
	if ((rc = ev_json_str_req(&id, j, "id", what)))
		goto done;
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question");
	const cJSON *turn = cJSON_IsArray(q) ? cJSON_GetArrayItem(q, 0) : NULL;
	if (!cJSON_IsArray(turn) || cJSON_GetArraySize(turn) == 0) {
		rc = ev_error_set(EV_E_INVALID, "%s: question: expected a list of turns, the first a list of messages",
		                  what);
		goto done;
	}
	const cJSON *m;
	size_t k = 0;
	cJSON_ArrayForEach(m, turn)
	{
		const char *role = ev_json_str(m, "role", NULL);
		if (!role || !known_role(role) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content"))) {
			rc = ev_error_set(EV_E_INVALID,
			                  "%s: question[0][%zu]: expected {\"role\": system|user|assistant, \"content\": text}",
			                  what, k);
			goto done;
		}
		k++;
	}
	const cJSON *fns = cJSON_GetObjectItemCaseSensitive(j, "function");
	if (!cJSON_IsArray(fns)) {
		rc = ev_error_set(EV_E_INVALID, "%s: function: expected a list", what);
		goto done;
	}
	const cJSON *gt = NULL;
	if (c->a) {
		const answer *an = answer_find(c->a, id);
		if (!an) {
			rc = ev_error_set(EV_E_INVALID, "%s: no possible answer for id \"%.128s\"", what, id);
			goto done;
		}
		gt = an->gt;
	}
	/* Built in reading order: id, messages, tools, tests, metadata. */
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "id", id)) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = add_copy(o, "messages", turn)))
		goto done;
	cJSON *tools = cJSON_AddArrayToObject(o, "tools");
	cJSON *tests = cJSON_AddObjectToObject(o, "tests");
	cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
	if (!tools || !tests || !meta) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	const cJSON *f;
	size_t i = 0;
	cJSON_ArrayForEach(f, fns)
	{
		cJSON *tool;
		if ((rc = tool_of(&tool, f, i++, what)))
			goto done;
		cJSON_AddItemToArray(tools, tool);
	}
	if ((rc = add_copy(tests, "functions", fns)))
		goto done;
	if (gt)
		rc = add_copy(tests, "ground_truth", gt);
	else if (!cJSON_AddArrayToObject(tests, "ground_truth"))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc)
		goto done;
	if (!cJSON_AddStringToObject(meta, "category", c->category) || !cJSON_AddStringToObject(meta, "source", "bfcl")) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (!(text = ev_json_print(o))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ev_buf_puts(&c->out, text)) || (rc = ev_buf_putc(&c->out, '\n'))) {
		ev_error_wrap(rc, "%s", what);
		goto done;
	}
	if (c->n_ids == c->cap_ids) {
		size_t cap = c->cap_ids ? c->cap_ids * 2 : 256;
		answer *ids = realloc(c->ids, cap * sizeof *ids);
		if (!ids) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		c->ids = ids;
		c->cap_ids = cap;
	}
	c->ids[c->n_ids] = (answer){.id = ev_strdup(id), .line = lineno};
	if (!c->ids[c->n_ids].id) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	c->n_ids++;
	c->n++;
done:
	free(text);
	cJSON_Delete(o);
	cJSON_Delete(j);
	return rc;
}

/* "dir/BFCL_v3_live_simple.json" -> name "bfcl_v3_live_simple", category
 * "live_simple". */
static int names_of(char name[BFCL_MAX_NAME + 1], const char **category, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strcspn(base, ".");
	if (n == 0 || n > BFCL_MAX_NAME)
		return ev_error_set(EV_E_INVALID, "%s: cannot name a suite after this file", path);
	for (size_t i = 0; i < n; i++) {
		char ch = base[i];
		name[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
		if ((unsigned char)ch < 0x20)
			return ev_error_set(EV_E_INVALID, "%s: control character in the file name", path);
	}
	name[n] = 0;
	const char *c = name;
	if (ev_str_starts(c, "bfcl_")) {
		c += 5;
		if (*c == 'v') {
			const char *d = c + 1;
			while (*d >= '0' && *d <= '9')
				d++;
			if (d > c + 1 && *d == '_')
				c = d + 1;
		}
	}
	if (!*c)
		return ev_error_set(EV_E_INVALID, "%s: no category in the file name", path);
	*category = c;
	return 0;
}

static int ensure_dir(const char *dir)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	struct stat st;
	if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	return ev_error_set(EV_E_IO, "%s: cannot create the suite folder: %s", dir, strerror(errno));
}

int ev_import_bfcl(const char *questions, const char *answers_path, const char *out_dir)
{
	char *qtext = NULL, *atext = NULL, *suite = NULL, *path = NULL;
	size_t qlen = 0, alen = 0;
	answers an = {0};
	questions_ctx qc = {0};
	cJSON *sj = NULL;
	char name[BFCL_MAX_NAME + 1];
	int rc;
	if (!questions || !out_dir)
		return ev_error_set(EV_E_INVALID, "ev_import_bfcl: questions and out_dir are needed");
	ev_buf_init(&qc.out, BFCL_MAX_FILE * 2);
	if ((rc = names_of(name, &qc.category, questions)))
		goto done;
	if ((rc = ev_file_read(&qtext, &qlen, questions, BFCL_MAX_FILE)))
		goto done;
	if (answers_path) {
		if ((rc = ev_file_read(&atext, &alen, answers_path, BFCL_MAX_FILE)))
			goto done;
		answers_ctx ac = {answers_path, &an};
		if ((rc = each_line(atext, alen, read_answer, &ac)))
			goto done;
		qsort(an.v, an.n, sizeof *an.v, cmp_answer);
		for (size_t i = 1; i < an.n; i++) {
			if (!strcmp(an.v[i].id, an.v[i - 1].id)) {
				rc = ev_error_set(EV_E_INVALID, "%s:%zu: id: duplicate id \"%.128s\"", answers_path, an.v[i].line,
				                  an.v[i].id);
				goto done;
			}
		}
		qc.a = &an;
	}
	qc.file = questions;
	if ((rc = each_line(qtext, qlen, read_question, &qc)))
		goto done;
	qsort(qc.ids, qc.n_ids, sizeof *qc.ids, cmp_answer);
	for (size_t i = 1; i < qc.n_ids; i++) {
		if (!strcmp(qc.ids[i].id, qc.ids[i - 1].id)) {
			size_t l = qc.ids[i].line > qc.ids[i - 1].line ? qc.ids[i].line : qc.ids[i - 1].line;
			rc = ev_error_set(EV_E_INVALID, "%s:%zu: id: duplicate id \"%.128s\"", questions, l, qc.ids[i].id);
			goto done;
		}
	}
	if (qc.n == 0) {
		rc = ev_error_set(EV_E_INVALID, "%s: no questions", questions);
		goto done;
	}
	sj = cJSON_CreateObject();
	cJSON *ck = cJSON_CreateObject();
	if (!sj || !ck || !cJSON_AddItemToObject(sj, "name", cJSON_CreateString(name)) ||
	    !cJSON_AddStringToObject(sj, "version", "1") || !cJSON_AddStringToObject(sj, "kind", "tool-use") ||
	    !cJSON_AddStringToObject(sj, "description", "Berkeley Function Calling Leaderboard, imported by evald") ||
	    !cJSON_AddStringToObject(ck, "type", "toolcall") || !cJSON_AddStringToObject(ck, "category", qc.category) ||
	    !cJSON_AddItemToObject(sj, "checker", ck)) {
		if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(sj, "checker")))
			cJSON_Delete(ck);
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (!(suite = cJSON_Print(sj))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ensure_dir(out_dir)))
		goto done;
	path = ev_asprintf("%s/samples.jsonl", out_dir);
	if (!path || (rc = ev_file_write(path, qc.out.data ? qc.out.data : "", qc.out.len)))
		goto write_failed;
	free(path);
	path = ev_asprintf("%s/suite.json", out_dir);
	if (!path || (rc = ev_file_write(path, suite, strlen(suite))))
		goto write_failed;
	goto done;
write_failed:
	rc = path ? ev_error_wrap(rc ? rc : EV_E_IO, "%s", path) : ev_error_set(EV_E_NOMEM, "out of memory");
done:
	for (size_t i = 0; i < qc.n_ids; i++)
		free(qc.ids[i].id);
	free(qc.ids);
	ev_buf_free(&qc.out);
	cJSON_Delete(sj);
	answers_free(&an);
	free(suite);
	free(path);
	free(qtext);
	free(atext);
	return rc;
}
