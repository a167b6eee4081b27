/*
 * samples.c: samples.jsonl, one sample a line, into owned ev_sample structs.
 *
 * The file is streamed in chunks (never read whole), each line capped at
 * EV_SUITE_MAX_LINE, and every field validated with an error that names
 * "file:line: field: what". cJSON trees live for one line only. Sample ids
 * are unique: a hash table from id to sample index catches duplicates and
 * names both lines.
 */
#include "suites/suites_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ID 1024 /* bytes of a sample id */

typedef struct {
	ev_suite *s;
	const char *disp;
	const ev_suite_options *opt;
	size_t cap;     /* of s->samples */
	size_t *tab;    /* id hash table: sample index + 1, 0 when free */
	size_t tab_cap; /* a power of two */
	char what[512]; /* "file:line" of the line at hand */
} parser;

/* ---- freeing ------------------------------------------------------------ */

void ev_message_clear(ev_message *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_parts; i++) {
		free(m->parts[i].text);
		free(m->parts[i].path);
		free(m->parts[i].url);
		free(m->parts[i].mime);
	}
	free(m->parts);
	free(m->role);
	free(m->tool_calls_json);
	free(m->tool_call_id);
	free(m->name);
	memset(m, 0, sizeof *m);
}

void ev_sample_clear(ev_sample *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n_messages; i++)
		ev_message_clear(&x->messages[i]);
	free(x->messages);
	for (size_t i = 0; i < x->n_targets; i++)
		free(x->targets[i]);
	free(x->targets);
	free(x->id);
	free(x->target_json);
	free(x->tests_json);
	free(x->tools_json);
	free(x->metadata_json);
	free(x->checker_json);
	for (size_t i = 0; i < x->n_choices; i++)
		free(x->choices[i]);
	free(x->choices);
	memset(x, 0, sizeof *x);
}

static int nomem(void) { return ev_error_set(EV_E_NOMEM, "out of memory"); }

/* ---- the id table ------------------------------------------------------- */

/* The index + 1 of the sample with this id, or 0. */
static size_t id_find(const parser *P, const char *id)
{
	if (!P->tab_cap)
		return 0;
	for (size_t i = ev_hash_str(id) & (P->tab_cap - 1);; i = (i + 1) & (P->tab_cap - 1)) {
		size_t k = P->tab[i];
		if (!k || strcmp(P->s->samples[k - 1].id, id) == 0)
			return k;
	}
}

static int id_insert(parser *P, size_t index)
{
	if ((P->s->n_samples + 1) * 2 > P->tab_cap) {
		size_t cap = P->tab_cap ? P->tab_cap * 2 : 1024;
		size_t *tab = calloc(cap, sizeof *tab);
		if (!tab)
			return nomem();
		for (size_t j = 0; j < P->tab_cap; j++) {
			size_t k = P->tab[j];
			if (!k)
				continue;
			size_t i = ev_hash_str(P->s->samples[k - 1].id) & (cap - 1);
			while (tab[i])
				i = (i + 1) & (cap - 1);
			tab[i] = k;
		}
		free(P->tab);
		P->tab = tab;
		P->tab_cap = cap;
	}
	size_t i = ev_hash_str(P->s->samples[index].id) & (P->tab_cap - 1);
	while (P->tab[i])
		i = (i + 1) & (P->tab_cap - 1);
	P->tab[i] = index + 1;
	return 0;
}

/* ---- fields ------------------------------------------------------------- */

/* The sample's or suite's checker: an object kept as JSON text, or a bare
 * type name ("exact") taken as {"type":"exact"}. */
int ev_suite_checker_json(char **out, const cJSON *v, const char *what)
{
	*out = NULL;
	if (cJSON_IsString(v) && v->valuestring[0]) {
		ev_buf b = EV_BUF_INIT(SIZE_MAX / 2);
		if (ev_buf_puts(&b, "{\"type\":") || ev_json_buf_str(&b, v->valuestring) || ev_buf_putc(&b, '}')) {
			ev_buf_free(&b);
			return nomem();
		}
		*out = ev_buf_detach(&b, NULL);
	} else if (cJSON_IsObject(v)) {
		*out = ev_json_print(v);
	} else {
		return ev_error_set(EV_E_INVALID, "%s: checker: expected an object (or a checker type name)", what);
	}
	return *out ? 0 : nomem();
}

static int parse_id(char **out, const cJSON *j, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "id");
	char num[32];
	const char *id;
	if (!v || cJSON_IsNull(v))
		return ev_error_set(EV_E_INVALID, "%s: id: missing", what);
	if (cJSON_IsString(v)) {
		id = v->valuestring;
	} else if (cJSON_IsNumber(v)) {
		/* A number is read as a double: past 2^53, or with a fraction,
		 * distinct ids in the file can read as the same one. */
		if (!(fabs(v->valuedouble) < EV_ID_EXACT_MAX && v->valuedouble == floor(v->valuedouble)))
			return ev_error_set(EV_E_INVALID,
			                    "%s: id: a numeric id must be a whole number below 2^53 (write it as a string)", what);
		ev_suite_num_text(num, v->valuedouble);
		id = num;
	} else {
		return ev_error_set(EV_E_INVALID, "%s: id: expected a string or number", what);
	}
	if (!id[0])
		return ev_error_set(EV_E_INVALID, "%s: id: empty", what);
	size_t n = strlen(id);
	if (n > MAX_ID)
		return ev_error_set(EV_E_INVALID, "%s: id: longer than %d bytes", what, MAX_ID);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
			return ev_error_set(EV_E_INVALID, "%s: id: control characters are not allowed", what);
	*out = ev_strdup(id);
	return *out ? 0 : nomem();
}

static int parse_target(ev_sample *x, const cJSON *v, const char *what)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!(x->target_json = ev_json_print(v)))
		return nomem();
	const cJSON *one = v;
	size_t n = 1;
	if (cJSON_IsArray(v)) {
		n = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, v) {
			/* A list of objects (expected tool calls, say) stays JSON only. */
			if (!cJSON_IsString(e) && !cJSON_IsNumber(e) && !cJSON_IsBool(e))
				return 0;
			n++;
		}
		one = v->child;
	} else if (!cJSON_IsString(v) && !cJSON_IsNumber(v) && !cJSON_IsBool(v)) {
		return 0; /* an object target is for the checker to read */
	}
	if (!n)
		return 0;
	x->targets = calloc(n, sizeof *x->targets);
	if (!x->targets)
		return nomem();
	for (const cJSON *e = one; e && x->n_targets < n; e = e->next) {
		char num[32];
		const char *t = num;
		if (cJSON_IsString(e))
			t = e->valuestring;
		else if (cJSON_IsBool(e))
			t = cJSON_IsTrue(e) ? "true" : "false";
		else
			ev_suite_num_text(num, e->valuedouble);
		if (!(x->targets[x->n_targets] = ev_strdup(t)))
			return nomem();
		x->n_targets++;
	}
	(void)what;
	return 0;
}

/* "image_url" urls and "url" of other parts: web or inline data only;
 * files are named with "path" so that they pass the root check. */
static int check_url(const char *url, const char *what)
{
	if (ev_str_starts(url, "https://") || ev_str_starts(url, "http://") || ev_str_starts(url, "data:"))
		return 0;
	return ev_error_set(EV_E_UNSAFE, "%s: expected an http(s) or data: URL (name files with \"path\")", what);
}

/* The MIME type a data: URL states, or NULL. */
static char *data_url_mime(const char *url)
{
	if (!ev_str_starts(url, "data:"))
		return NULL;
	size_t n = strcspn(url + 5, ";,");
	return n && n < 128 ? ev_strndup(url + 5, n) : NULL;
}

static int file_part(parser *P, ev_part *p, ev_part_kind kind, const char *rel, const char *what)
{
	int rc = ev_suite_resolve_path_ex(&p->path, P->s->root, rel, what, kind == EV_PART_VIDEO);
	if (rc)
		return rc;
	const char *mime = NULL;
	ev_part_kind k = ev_part_kind_for_path(p->path, &mime);
	p->kind = kind == EV_PART_TEXT ? k : kind;
	struct stat st;
	if (p->kind == EV_PART_VIDEO && stat(p->path, &st) == 0 && S_ISDIR(st.st_mode))
		mime = "inode/directory"; /* a folder of frames */
	return (p->mime = ev_strdup(mime)) ? 0 : nomem();
}

/* A video part's "fps" (the frames' rate), "sample_fps" and "frames" */
static int video_rates(ev_part *p, const cJSON *v, const char *what)
{
	static const char *const keys[3] = {"fps", "sample_fps", "frames"};
	double val[3] = {0, 0, 0};
	for (int i = 0; i < 3; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, keys[i]);
		if (!x || cJSON_IsNull(x))
			continue;
		double lim = i == 2 ? EV_VIDEO_MAX_FRAMES : 1000;
		if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || x->valuedouble > lim ||
		    (i == 2 && x->valuedouble != (double)(int)x->valuedouble))
			return ev_error_set(EV_E_INVALID, "%s.%s: expected a %s in (0, %g]", what, keys[i],
			                    i == 2 ? "whole number" : "number", lim);
		val[i] = x->valuedouble;
	}
	if (val[1] > 0 && val[2] > 0)
		return ev_error_set(EV_E_INVALID, "%s: sample_fps and frames exclude each other", what);
	p->fps = val[0], p->sample_fps = val[1], p->frames = (int)val[2];
	return 0;
}

static int parse_part(parser *P, ev_part *p, const cJSON *v, const char *what)
{
	char w[640];
	if (cJSON_IsString(v)) {
		p->kind = EV_PART_TEXT;
		return (p->text = ev_strdup(v->valuestring)) ? 0 : nomem();
	}
	const char *type = ev_json_str(v, "type", NULL);
	if (!cJSON_IsObject(v) || !type)
		return ev_error_set(EV_E_INVALID, "%s.type: expected a part object with a \"type\"", what);
	if (strcmp(type, "text") == 0) {
		const char *t = ev_json_str(v, "text", NULL);
		if (!t)
			return ev_error_set(EV_E_INVALID, "%s.text: expected a string", what);
		p->kind = EV_PART_TEXT;
		return (p->text = ev_strdup(t)) ? 0 : nomem();
	}
	if (strcmp(type, "image_url") == 0) {
		const cJSON *iu = cJSON_GetObjectItemCaseSensitive(v, "image_url");
		const char *url = cJSON_IsString(iu) ? iu->valuestring : ev_json_str(iu, "url", NULL);
		snprintf(w, sizeof w, "%s.image_url.url", what);
		if (!url)
			return ev_error_set(EV_E_INVALID, "%s: expected a string", w);
		int rc = check_url(url, w);
		if (rc)
			return rc;
		p->kind = EV_PART_IMAGE;
		p->mime = data_url_mime(url);
		return (p->url = ev_strdup(url)) ? 0 : nomem();
	}
	ev_part_kind kind;
	if (strcmp(type, "image") == 0)
		kind = EV_PART_IMAGE;
	else if (strcmp(type, "video") == 0)
		kind = EV_PART_VIDEO;
	else if (strcmp(type, "document") == 0)
		kind = EV_PART_DOCUMENT;
	else {
		char shown[EV_SUITE_SHOW];
		ev_suite_show(shown, type);
		return ev_error_set(EV_E_INVALID, "%s.type: unknown part type '%s' (text, image_url, image, video, document)",
		                    what, shown);
	}
	const char *path = ev_json_str(v, "path", NULL);
	const char *url = ev_json_str(v, "url", NULL);
	if (kind == EV_PART_VIDEO) {
		int rc = video_rates(p, v, what);
		if (rc)
			return rc;
	}
	if (path) {
		snprintf(w, sizeof w, "%s.path", what);
		return file_part(P, p, kind, path, w);
	}
	if (url) {
		snprintf(w, sizeof w, "%s.url", what);
		int rc = check_url(url, w);
		if (rc)
			return rc;
		p->kind = kind;
		p->mime = data_url_mime(url);
		return (p->url = ev_strdup(url)) ? 0 : nomem();
	}
	return ev_error_set(EV_E_INVALID, "%s.path: missing (a %s part needs a path or a url)", what, type);
}

static bool role_ok(const char *r)
{
	return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") || !strcmp(r, "tool");
}

static int parse_message(parser *P, ev_message *m, const cJSON *v, const char *what)
{
	char w[600];
	if (!cJSON_IsObject(v))
		return ev_error_set(EV_E_INVALID, "%s: expected an object", what);
	const char *role = ev_json_str(v, "role", NULL);
	if (!role || !role_ok(role))
		return ev_error_set(EV_E_INVALID, "%s.role: expected one of system, user, assistant, tool", what);
	if (!(m->role = ev_strdup(role)))
		return nomem();

	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(v, "tool_calls");
	if (tc && !cJSON_IsNull(tc)) {
		if (!cJSON_IsArray(tc))
			return ev_error_set(EV_E_INVALID, "%s.tool_calls: expected a list", what);
		if (!(m->tool_calls_json = ev_json_print(tc)))
			return nomem();
	}
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(v, "tool_call_id");
	if (tid && !cJSON_IsString(tid))
		return ev_error_set(EV_E_INVALID, "%s.tool_call_id: expected a string", what);
	if (tid && !(m->tool_call_id = ev_strdup(tid->valuestring)))
		return nomem();
	if (!strcmp(role, "tool") && !tid)
		return ev_error_set(EV_E_INVALID, "%s.tool_call_id: missing (a tool message answers a call)", what);
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
	if (nm && !cJSON_IsString(nm))
		return ev_error_set(EV_E_INVALID, "%s.name: expected a string", what);
	if (nm && !(m->name = ev_strdup(nm->valuestring)))
		return nomem();

	const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
	if (!c || cJSON_IsNull(c)) {
		if (m->tool_calls_json)
			return 0; /* an assistant turn that only calls tools */
		return ev_error_set(EV_E_INVALID, "%s.content: missing", what);
	}
	if (cJSON_IsString(c)) {
		if (!(m->parts = calloc(1, sizeof *m->parts)) || !(m->parts[0].text = ev_strdup(c->valuestring)))
			return nomem();
		m->n_parts = 1;
		return 0;
	}
	if (!cJSON_IsArray(c))
		return ev_error_set(EV_E_INVALID, "%s.content: expected a string or a list of parts", what);
	size_t n = (size_t)cJSON_GetArraySize(c);
	if (n && !(m->parts = calloc(n, sizeof *m->parts)))
		return nomem();
	const cJSON *e;
	cJSON_ArrayForEach(e, c) {
		snprintf(w, sizeof w, "%s.content[%zu]", what, m->n_parts);
		int rc = parse_part(P, &m->parts[m->n_parts], e, w);
		m->n_parts++; /* counted even on failure, so clear() frees it */
		if (rc)
			return rc;
	}
	return 0;
}

/* A message with one text part; takes `text`. */
static int text_message(ev_message *m, const char *role, char *text)
{
	if (!text)
		return nomem();
	if (!(m->role = ev_strdup(role)) || !(m->parts = calloc(1, sizeof *m->parts))) {
		free(text);
		return nomem();
	}
	m->parts[0].kind = EV_PART_TEXT;
	m->parts[0].text = text;
	m->n_parts = 1;
	return 0;
}

static int parse_messages(parser *P, ev_sample *x, const cJSON *j, const char *what)
{
	ev_suite *s = P->s;
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
	const cJSON *input = cJSON_GetObjectItemCaseSensitive(j, "input");
	if (input && !cJSON_IsString(input) && !cJSON_IsNull(input))
		return ev_error_set(EV_E_INVALID, "%s: input: expected a string", what);
	if (msgs && !cJSON_IsNull(msgs) && (!cJSON_IsArray(msgs) || !msgs->child))
		return ev_error_set(EV_E_INVALID, "%s: messages: expected a non-empty list", what);
	bool have_msgs = msgs && cJSON_IsArray(msgs);
	bool have_input = cJSON_IsString(input);
	if (!have_msgs && !have_input && !s->prompt_template)
		return ev_error_set(EV_E_INVALID, "%s: input: missing (a sample needs input or messages)", what);

	size_t n = have_msgs ? (size_t)cJSON_GetArraySize(msgs) : 1;
	const char *first_role = have_msgs ? ev_json_str(msgs->child, "role", "") : "user";
	bool add_system = s->system_prompt && strcmp(first_role, "system") != 0;
	x->messages = calloc(n + add_system, sizeof *x->messages);
	if (!x->messages)
		return nomem();
	int rc = 0;
	if (add_system) {
		rc = text_message(&x->messages[0], "system", ev_strdup(s->system_prompt));
		x->n_messages++;
		if (rc)
			return rc;
	}
	if (have_msgs) {
		const cJSON *e;
		char w[560];
		size_t i = 0;
		cJSON_ArrayForEach(e, msgs) {
			snprintf(w, sizeof w, "%s: messages[%zu]", what, i++);
			rc = parse_message(P, &x->messages[x->n_messages], e, w);
			x->n_messages++;
			if (rc)
				return rc;
		}
		return 0;
	}
	char *text = NULL;
	if (s->prompt_template) {
		rc = ev_template_render(&text, s->prompt_template, j, what);
		if (rc)
			return rc;
	} else {
		text = ev_strdup(input->valuestring);
	}
	rc = text_message(&x->messages[x->n_messages], "user", text);
	x->n_messages++;
	return rc;
}

static int parse_attachments(parser *P, ev_sample *x, const cJSON *v, const char *what)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsArray(v))
		return ev_error_set(EV_E_INVALID, "%s: attachments: expected a list of relative paths", what);
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (!n)
		return 0;
	if (n > EV_SUITE_MAX_ATTACHMENTS)
		return ev_error_set(EV_E_LIMIT, "%s: attachments: more than %d", what, EV_SUITE_MAX_ATTACHMENTS);
	ev_message *m = NULL;
	for (size_t i = x->n_messages; i-- > 0;)
		if (!strcmp(x->messages[i].role, "user")) {
			m = &x->messages[i];
			break;
		}
	if (!m)
		return ev_error_set(EV_E_INVALID, "%s: attachments: the sample has no user message to attach them to", what);
	ev_part *parts = realloc(m->parts, (m->n_parts + n) * sizeof *parts);
	if (!parts)
		return nomem();
	m->parts = parts;
	const cJSON *e;
	size_t i = 0;
	cJSON_ArrayForEach(e, v) {
		char w[560];
		snprintf(w, sizeof w, "%s: attachments[%zu]", what, i++);
		if (!cJSON_IsString(e))
			return ev_error_set(EV_E_INVALID, "%s: expected a relative path", w);
		ev_part *p = &m->parts[m->n_parts];
		memset(p, 0, sizeof *p);
		int rc = file_part(P, p, EV_PART_TEXT, e->valuestring, w);
		m->n_parts++;
		if (rc)
			return rc;
	}
	return 0;
}

static int json_field(char **out, const cJSON *j, const char *key, int want, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (want == cJSON_Array && !cJSON_IsArray(v))
		return ev_error_set(EV_E_INVALID, "%s: %s: expected a list", what, key);
	if (want == cJSON_Object && !cJSON_IsObject(v))
		return ev_error_set(EV_E_INVALID, "%s: %s: expected an object", what, key);
	return (*out = ev_json_print(v)) ? 0 : nomem();
}

/* "choices": a list of 2..EV_SUITE_MAX_CHOICES non-empty strings. */
static int parse_choices(ev_sample *x, const cJSON *v, const char *what)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	int n = cJSON_GetArraySize(v);
	if (!cJSON_IsArray(v) || n < 2 || n > EV_SUITE_MAX_CHOICES)
		return ev_error_set(EV_E_INVALID, "%s: choices: expected a list of 2 to %d strings", what,
		                    EV_SUITE_MAX_CHOICES);
	if (!(x->choices = calloc((size_t)n, sizeof *x->choices)))
		return nomem();
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e) || !*e->valuestring)
			return ev_error_set(EV_E_INVALID, "%s: choices[%zu]: expected a non-empty string", what, x->n_choices);
		if (!(x->choices[x->n_choices++] = ev_strdup(e->valuestring)))
			return nomem();
	}
	return 0;
}

static int parse_sample(parser *P, ev_sample *x, const cJSON *j, const char *what)
{
	int rc = parse_id(&x->id, j, what);
	if (rc)
		return rc;
	size_t first = id_find(P, x->id);
	if (first) {
		char shown[EV_SUITE_SHOW];
		ev_suite_show(shown, x->id);
		return ev_error_set(EV_E_INVALID, "%s: id: duplicate id \"%s\" (first on line %zu)", what, shown,
		                    P->s->samples[first - 1].line);
	}
	if ((rc = parse_messages(P, x, j, what)) || (rc = parse_attachments(P, x, cJSON_GetObjectItemCaseSensitive(j, "attachments"), what)) ||
	    (rc = parse_target(x, cJSON_GetObjectItemCaseSensitive(j, "target"), what)) ||
	    (rc = json_field(&x->tests_json, j, "tests", 0, what)) ||
	    (rc = json_field(&x->tools_json, j, "tools", cJSON_Array, what)) ||
	    (rc = json_field(&x->metadata_json, j, "metadata", cJSON_Object, what)) ||
	    (rc = parse_choices(x, cJSON_GetObjectItemCaseSensitive(j, "choices"), what)))
		return rc;
	const cJSON *ck = cJSON_GetObjectItemCaseSensitive(j, "checker");
	if (ck && !cJSON_IsNull(ck))
		rc = ev_suite_checker_json(&x->checker_json, ck, what);
	return rc;
}

/* ---- lines -------------------------------------------------------------- */

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

static int parse_line(parser *P, size_t line, char *p, size_t n)
{
	if (line == 1 && n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) {
		p += 3;
		n -= 3;
	}
	if (blank(p, n))
		return 0;
	snprintf(P->what, sizeof P->what, "%s:%zu", P->disp, line);
	if (!ev_utf8_valid(p, n))
		return ev_error_set(EV_E_PARSE, "%s: invalid UTF-8", P->what);
	ev_suite *s = P->s;
	if (s->n_samples >= P->opt->max_samples)
		return ev_error_set(EV_E_LIMIT, "%s: more than %zu samples", P->what, P->opt->max_samples);
	cJSON *j = NULL;
	int rc = ev_json_parse(&j, p, n, P->what);
	if (rc)
		return rc;
	if (!cJSON_IsObject(j)) {
		rc = ev_error_set(EV_E_PARSE, "%s: expected a JSON object", P->what);
		goto done;
	}
	if (EV_GROW(s->samples, P->cap, s->n_samples + 1)) {
		rc = nomem();
		goto done;
	}
	ev_sample *x = &s->samples[s->n_samples];
	memset(x, 0, sizeof *x);
	x->line = line;
	rc = parse_sample(P, x, j, P->what);
	if (rc) {
		ev_sample_clear(x);
		goto done;
	}
	rc = id_insert(P, s->n_samples);
	if (rc) {
		ev_sample_clear(x);
		goto done;
	}
	s->n_samples++;
done:
	cJSON_Delete(j);
	return rc;
}

int ev_samples_parse(ev_suite *s, const char *path, const char *disp, const ev_suite_options *opt,
                     ev_sha256_ctx *hash)
{
	parser P = {.s = s, .disp = disp, .opt = opt};
	size_t max_line = EV_SUITE_MAX_LINE < opt->max_file_bytes ? EV_SUITE_MAX_LINE : opt->max_file_bytes;
	ev_buf line = EV_BUF_INIT(max_line);
	char *chunk = NULL;
	size_t line_no = 1, total = 0;
	int rc = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", disp, strerror(errno));
	chunk = malloc(1 << 20);
	if (!chunk) {
		rc = nomem();
		goto done;
	}
	for (;;) {
		size_t got = fread(chunk, 1, 1 << 20, f);
		if (got == 0) {
			if (ferror(f))
				rc = ev_error_set(EV_E_IO, "%s: read: %s", disp, strerror(errno));
			break;
		}
		if (got > opt->max_file_bytes - total) {
			rc = ev_error_set(EV_E_LIMIT, "%s: larger than the limit of %zu bytes", disp, opt->max_file_bytes);
			goto done;
		}
		total += got;
		if (hash)
			ev_sha256_update(hash, chunk, got);
		for (size_t i = 0; i < got;) {
			char *nl = memchr(chunk + i, '\n', got - i);
			size_t n = nl ? (size_t)(nl - (chunk + i)) : got - i;
			if (ev_buf_append(&line, chunk + i, n)) {
				rc = ev_error_set(EV_E_LIMIT, "%s:%zu: line longer than %zu bytes", disp, line_no, max_line);
				goto done;
			}
			i += n;
			if (!nl)
				break;
			i++;
			rc = parse_line(&P, line_no, line.data, line.len);
			if (rc)
				goto done;
			ev_buf_reset(&line);
			line_no++;
		}
	}
	if (!rc && line.len)
		rc = parse_line(&P, line_no, line.data, line.len);
	if (!rc && s->n_samples == 0)
		rc = ev_error_set(EV_E_INVALID, "%s: no samples", disp);
done:
	fclose(f);
	free(chunk);
	ev_buf_free(&line);
	free(P.tab);
	return rc;
}
