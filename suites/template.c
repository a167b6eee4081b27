/*
 * template.c: prompt templates ("{field}" substitution) and message text.
 *
 * A template is plain text with {name} references; "{{" and "}}" stand for
 * literal braces. A name is looked up in the sample line's own fields,
 * then in its "metadata" object; a dotted name ("metadata.topic") walks
 * nested objects. Strings, numbers and booleans substitute; anything else,
 * and any unknown name, is an error naming the field.
 */
#include "suites/suites_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ev_suite_num_text(char out[32], double v)
{
	if (isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0) {
		snprintf(out, 32, "%.0f", v);
		return;
	}
	snprintf(out, 32, "%.15g", v);
	if (strtod(out, NULL) != v)
		snprintf(out, 32, "%.17g", v);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
	       c == '.';
}

static const cJSON *lookup(const cJSON *fields, const char *name, size_t n)
{
	char key[256];
	if (n >= sizeof key)
		return NULL;
	memcpy(key, name, n);
	key[n] = 0;
	if (!strchr(key, '.')) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(fields, key);
		if (!v) {
			const cJSON *md = cJSON_GetObjectItemCaseSensitive(fields, "metadata");
			if (cJSON_IsObject(md))
				v = cJSON_GetObjectItemCaseSensitive(md, key);
		}
		return v;
	}
	const cJSON *cur = fields;
	for (char *save = NULL, *tok = strtok_r(key, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
		if (!cJSON_IsObject(cur))
			return NULL;
		cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
	}
	return cur == fields ? NULL : cur;
}

/* Walks the template; with `fields` NULL it only checks the syntax. */
static int render(ev_buf *b, const char *tmpl, const cJSON *fields, const char *what)
{
	if (!what)
		what = "template";
	const char *p = tmpl;
	while (*p) {
		size_t at = (size_t)(p - tmpl);
		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
			if (b && ev_buf_putc(b, p[0]))
				goto limit;
			p += 2;
			continue;
		}
		if (p[0] == '}')
			return ev_error_set(EV_E_INVALID, "%s: prompt_template: a lone '}' at byte %zu (write '}}' for a brace)",
			                    what, at);
		if (p[0] != '{') {
			size_t n = strcspn(p, "{}");
			if (b && ev_buf_append(b, p, n))
				goto limit;
			p += n;
			continue;
		}
		const char *name = p + 1;
		size_t n = 0;
		while (name[n] && name[n] != '}' && name[n] != '{')
			n++;
		if (name[n] != '}')
			return ev_error_set(EV_E_INVALID, "%s: prompt_template: '{' at byte %zu is not closed (write '{{' for a brace)",
			                    what, at);
		if (n == 0 || n > 200)
			return ev_error_set(EV_E_INVALID, "%s: prompt_template: an empty or overlong field name at byte %zu", what,
			                    at);
		for (size_t i = 0; i < n; i++)
			if (!name_char(name[i]))
				return ev_error_set(EV_E_INVALID,
				                    "%s: prompt_template: the field name at byte %zu has a character other than letters, digits, '_', '-', '.'",
				                    what, at);
		p = name + n + 1;
		if (!fields)
			continue;
		const cJSON *v = lookup(fields, name, n);
		char num[32];
		const char *text = NULL;
		if (!v)
			return ev_error_set(EV_E_INVALID, "%s: prompt_template: unknown field {%.*s}", what, (int)n, name);
		if (cJSON_IsString(v)) {
			text = v->valuestring;
		} else if (cJSON_IsNumber(v)) {
			ev_suite_num_text(num, v->valuedouble);
			text = num;
		} else if (cJSON_IsBool(v)) {
			text = cJSON_IsTrue(v) ? "true" : "false";
		} else {
			return ev_error_set(EV_E_INVALID,
			                    "%s: prompt_template: field {%.*s} is %s; only strings, numbers and booleans substitute",
			                    what, (int)n, name,
			                    cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "a list" : "an object");
		}
		if (ev_buf_puts(b, text))
			goto limit;
	}
	return 0;
limit:
	return ev_error_set(EV_E_LIMIT, "%s: prompt_template: the rendered prompt passes %zu bytes", what, b->max);
}

int ev_template_check(const char *tmpl, const char *what) { return render(NULL, tmpl, NULL, what); }

int ev_template_render(char **out, const char *tmpl, const cJSON *fields, const char *what)
{
	*out = NULL;
	if (!tmpl)
		return ev_error_set(EV_E_INVALID, "%s: no template", what ? what : "template");
	if (!cJSON_IsObject(fields))
		return ev_error_set(EV_E_INVALID, "%s: prompt_template: the fields are not an object",
		                    what ? what : "template");
	ev_buf b = EV_BUF_INIT(EV_SUITE_MAX_RENDER);
	int rc = render(&b, tmpl, fields, what);
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	*out = ev_buf_detach(&b, NULL);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

char *ev_message_text(const ev_message *m)
{
	ev_buf b = EV_BUF_INIT(SIZE_MAX / 2);
	bool first = true;
	for (size_t i = 0; m && i < m->n_parts; i++) {
		const ev_part *p = &m->parts[i];
		if (p->kind != EV_PART_TEXT || !p->text)
			continue;
		if ((!first && ev_buf_putc(&b, '\n')) || ev_buf_puts(&b, p->text)) {
			ev_buf_free(&b);
			return NULL;
		}
		first = false;
	}
	return ev_buf_detach(&b, NULL);
}
