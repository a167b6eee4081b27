/*
 * scoring/toolcall_parse.c: finding the function calls in a model's answer.
 *
 * Two sources. An OpenAI `tool_calls` array, when the backend returned one,
 * is authoritative. Otherwise the calls are read out of the text, in this
 * order of trust:
 *   1. <tool_call>...</tool_call> blocks (each must parse);
 *   2. ``` fenced blocks (those that parse; the others are ignored);
 *   3. the whole text (after any </think>) as one call form;
 *   4. a scan of prose for call-shaped pieces (a JSON call object or list,
 *      or a Python call such as `get_weather(city="Paris")`).
 * A call form is a JSON object {"name", "arguments"|"parameters"} (also
 * wrapped as {"type":"function","function":{...}} or {"tool_calls":[...]}),
 * a list of those, or Python calls `[f(a=1), g(b="x")]`, bracketed or not,
 * separated by commas, semicolons or newlines. Python arguments are
 * keyword arguments; positional ones are ignored as BFCL's decoder does, and
 * a bare name stands for its own text (a variable, as BFCL reads it).
 */
#include "scoring/toolcall_int.h"

#include <stdlib.h>
#include <string.h>

void ev_toolcalls_free(ev_toolcalls *l)
{
	if (!l)
		return;
	free(l->calls);
	ev_arena_free(l->a);
	free(l);
}

size_t ev_toolcalls_count(const ev_toolcalls *l) { return l ? l->n : 0; }

const ev_toolcall *ev_toolcalls_get(const ev_toolcalls *l, size_t i)
{
	return l && i < l->n ? &l->calls[i].pub : NULL;
}

static int add_call(ev_toolcalls *l, const char *name, size_t nlen, tcv *args)
{
	if (nlen == 0)
		return ev_error_set(EV_E_PARSE, "a call has an empty function name");
	if (nlen > TC_MAX_NAME)
		return ev_error_set(EV_E_PARSE, "a function name is longer than %d bytes", TC_MAX_NAME);
	if (args->kind != TCV_DICT)
		return ev_error_set(EV_E_PARSE, "the arguments of '%.*s' are not an object", (int)nlen, name);
	if (l->n >= TC_MAX_CALLS)
		return ev_error_set(EV_E_LIMIT, "more than %d calls in one answer", TC_MAX_CALLS);
	if (EV_GROW(l->calls, l->cap, l->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	ev_buf b = EV_BUF_INIT(TC_MAX_TEXT);
	int rc = tcv_print_json(&b, args);
	char *json = rc ? NULL : ev_arena_strndup(l->a, b.data, b.len);
	ev_buf_free(&b);
	char *nm = ev_arena_strndup(l->a, name, nlen);
	if (!json || !nm)
		return ev_error_set(EV_E_LIMIT, "the calls of one answer are too large");
	tc_call *c = &l->calls[l->n++];
	c->pub.name = nm;
	c->pub.arguments_json = json;
	c->args = args;
	return 0;
}

/* ---- JSON call objects ---------------------------------------------------- */

/* Arguments given as a value: an object, a string holding JSON, or nothing. */
static int call_args(ev_toolcalls *l, const tcv *raw, tcv **out, const char *what)
{
	if (!raw || raw->kind == TCV_NULL || tcv_is_empty_str(raw)) {
		*out = tcv_new(l->a, TCV_DICT);
		return *out ? 0 : ev_error_set(EV_E_LIMIT, "out of memory");
	}
	if (raw->kind == TCV_STR) {
		int rc = tcv_parse_all(out, l->a, raw->s, raw->len, what);
		if (rc)
			return rc;
		if ((*out)->kind != TCV_DICT)
			return ev_error_set(EV_E_PARSE, "%s: not a JSON object", what);
		return 0;
	}
	if (raw->kind != TCV_DICT)
		return ev_error_set(EV_E_PARSE, "%s: not an object", what);
	*out = (tcv *)raw;
	return 0;
}

/* Whether `v` looks like one call object (without checking it fully). */
static bool is_call_obj(const tcv *v)
{
	if (!v || v->kind != TCV_DICT)
		return false;
	const tcv *f = tcv_get(v, "function");
	if (f && f->kind == TCV_DICT)
		return is_call_obj(f);
	const tcv *n = tcv_get(v, "name");
	return n && n->kind == TCV_STR;
}

static int add_call_obj(ev_toolcalls *l, const tcv *v, const char *what)
{
	const tcv *f = tcv_get(v, "function");
	if (f && f->kind == TCV_DICT)
		v = f;
	const tcv *n = tcv_get(v, "name");
	if (!n || n->kind != TCV_STR)
		return ev_error_set(EV_E_PARSE, "%s: no function name", what);
	const tcv *raw = tcv_get(v, "arguments");
	if (!raw)
		raw = tcv_get(v, "parameters");
	char w[96];
	snprintf(w, sizeof w, "%s.arguments", what);
	tcv *args;
	int rc = call_args(l, raw, &args, w);
	return rc ? rc : add_call(l, n->s, n->len, args);
}

/* A parsed JSON value that is a call form: returns 1 when it added its
 * calls, 0 when it is not call-shaped, or a negative status. */
static int add_json_form(ev_toolcalls *l, const tcv *v)
{
	const tcv *tc = tcv_get(v, "tool_calls");
	if (tc && tc->kind == TCV_LIST)
		v = tc;
	if (v->kind == TCV_DICT) {
		if (!is_call_obj(v))
			return 0;
		int rc = add_call_obj(l, v, "call");
		return rc ? rc : 1;
	}
	if (v->kind != TCV_LIST)
		return 0;
	for (size_t i = 0; i < v->n; i++)
		if (!is_call_obj(v->items[i]))
			return 0;
	for (size_t i = 0; i < v->n; i++) {
		char w[48];
		snprintf(w, sizeof w, "call[%zu]", i);
		int rc = add_call_obj(l, v->items[i], w);
		if (rc)
			return rc;
	}
	return 1;
}

/* ---- Python calls ---------------------------------------------------------- */

static bool ident_at(const tcv_parser *p)
{
	return p->pos < p->n && tcv_is_ident_start(p->s[p->pos]);
}

/* A dotted name followed by '(' at p->pos, without consuming anything. */
static bool call_start_at(const tcv_parser *p)
{
	size_t k = p->pos;
	if (k >= p->n || !tcv_is_ident_start(p->s[k]))
		return false;
	while (k < p->n && (tcv_is_ident_char(p->s[k]) ||
	                    (p->s[k] == '.' && k + 1 < p->n && tcv_is_ident_start(p->s[k + 1]))))
		k++;
	while (!p->o.prose && k < p->n && (p->s[k] == ' ' || p->s[k] == '\t'))
		k++;
	return k < p->n && p->s[k] == '(';
}

static bool has_key(const tcv *d, const char *key, size_t klen)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->klens[i] == klen && memcmp(d->keys[i], key, klen) == 0)
			return true;
	return false;
}

/* One call `name(kw=value, ...)`; appends to *calls on success. */
static int py_call(ev_toolcalls *l, tcv_parser *p)
{
	size_t start = p->pos;
	while (p->pos < p->n && (tcv_is_ident_char(p->s[p->pos]) ||
	                         (p->s[p->pos] == '.' && p->pos + 1 < p->n && tcv_is_ident_start(p->s[p->pos + 1]))))
		p->pos++;
	size_t nlen = p->pos - start;
	tcv_skip_space(p);
	if (p->pos >= p->n || p->s[p->pos] != '(')
		return ev_error_set(EV_E_PARSE, "byte %zu: expected '(' after a function name", p->pos);
	p->pos++;
	tcv *args = tcv_new(l->a, TCV_DICT);
	if (!args)
		return ev_error_set(EV_E_LIMIT, "out of memory");
	p->o.names = true;
	for (bool first = true;; first = false) {
		tcv_skip_space(p);
		if (p->pos < p->n && p->s[p->pos] == ')') {
			p->pos++;
			break;
		}
		if (!first) {
			if (p->pos >= p->n || p->s[p->pos] != ',')
				return ev_error_set(EV_E_PARSE, "byte %zu: expected ',' or ')' in a call", p->pos);
			p->pos++;
			tcv_skip_space(p);
			if (p->pos < p->n && p->s[p->pos] == ')') {
				p->pos++;
				break;
			}
		}
		/* keyword=value, or a positional value (ignored, as BFCL does) */
		size_t save = p->pos;
		const char *key = NULL;
		size_t klen = 0;
		if (ident_at(p)) {
			size_t k = p->pos;
			while (k < p->n && tcv_is_ident_char(p->s[k]))
				k++;
			size_t e = k;
			while (e < p->n && (p->s[e] == ' ' || p->s[e] == '\t'))
				e++;
			if (e < p->n && p->s[e] == '=' && (e + 1 >= p->n || p->s[e + 1] != '=')) {
				key = p->s + p->pos;
				klen = k - p->pos;
				p->pos = e + 1;
			}
		}
		if (!key && p->o.prose)
			return ev_error_set(EV_E_PARSE, "byte %zu: a positional argument in prose", p->pos);
		p->err[0] = 0;
		tcv *v = tcv_parse_value(p);
		if (!v)
			return ev_error_set(EV_E_PARSE, "%s", p->err);
		if (key) {
			if (has_key(args, key, klen))
				return ev_error_set(EV_E_PARSE, "byte %zu: keyword argument '%.*s' repeated", save,
				                    (int)klen, key);
			if (tcv_push(l->a, args, key, klen, v))
				return ev_error_set(EV_E_LIMIT, "out of memory");
		}
	}
	return add_call(l, p->s + start, nlen, args);
}

/* Python calls at p->pos: "[f(...), g(...)]" or "f(...), g(...)". */
static int py_calls(ev_toolcalls *l, tcv_parser *p)
{
	tcv_skip_space(p);
	bool bracket = p->pos < p->n && p->s[p->pos] == '[';
	if (bracket) {
		p->pos++;
		tcv_skip_space(p);
		if (p->pos < p->n && p->s[p->pos] == ']') {
			p->pos++;
			return 0; /* "[]": no calls */
		}
	}
	for (;;) {
		tcv_skip_space(p);
		if (!call_start_at(p))
			return ev_error_set(EV_E_PARSE, "byte %zu: expected a function call", p->pos);
		int rc = py_call(l, p);
		if (rc)
			return rc;
		size_t after = p->pos;
		tcv_skip_space(p);
		if (p->pos < p->n && (p->s[p->pos] == ',' || p->s[p->pos] == ';')) {
			p->pos++;
			tcv_skip_space(p);
		}
		if (bracket && p->pos < p->n && p->s[p->pos] == ']') {
			p->pos++;
			return 0;
		}
		if (!call_start_at(p)) {
			if (bracket)
				return ev_error_set(EV_E_PARSE, "byte %zu: expected ']'", p->pos);
			p->pos = after;
			return 0;
		}
	}
}

/* ---- segments ------------------------------------------------------------- */

/* Reads one call form at s[0..n) from `*pos`. With `whole`, nothing but
 * whitespace and ';' may follow. Returns 0 with calls added and *pos moved
 * past the form, or a negative status with nothing added. */
static int parse_form(ev_toolcalls *l, const char *s, size_t n, size_t *pos, bool whole)
{
	size_t n0 = l->n;
	tcv_parser p;
	tcv_parser_init(&p, l->a, s, n);
	p.pos = *pos;
	p.o.prose = !whole;
	tcv_skip_space(&p);
	size_t start = p.pos;
	int rc = EV_E_PARSE;
	if (p.pos < p.n && (s[p.pos] == '{' || s[p.pos] == '[')) {
		tcv *v = tcv_parse_value(&p);
		if (v) {
			rc = add_json_form(l, v);
			if (rc == 1)
				rc = 0;
			else if (rc == 0 && v->kind == TCV_LIST && v->n == 0)
				rc = 0; /* "[]": an explicit "no call" */
			else if (rc == 0)
				rc = ev_error_set(EV_E_PARSE, "a JSON value that is not a function call");
		} else {
			rc = ev_error_set(EV_E_PARSE, "%s", p.err);
		}
	}
	if (rc && (start >= n || s[start] != '{')) {
		l->n = n0;
		p.pos = start;
		int rc2 = py_calls(l, &p);
		if (!rc2 || rc == EV_E_PARSE)
			rc = rc2;
		if (rc2 && l->n > n0)
			l->n = n0;
	}
	if (!rc && whole) {
		while (p.pos < n && (s[p.pos] == ';' || s[p.pos] == ' ' || s[p.pos] == '\n' || s[p.pos] == '\t' ||
		                     s[p.pos] == '\r'))
			p.pos++;
		if (p.pos < n)
			rc = ev_error_set(EV_E_PARSE, "byte %zu: unexpected text after the calls", p.pos);
	}
	if (rc) {
		l->n = n0;
		return rc;
	}
	*pos = p.pos;
	return 0;
}

static const char *find(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(s + i, needle, k) == 0)
			return s + i;
	return NULL;
}

/* 1. <tool_call> blocks. Returns 1 when there were any (calls added),
 * 0 when there were none, or a negative status. */
static int from_tags(ev_toolcalls *l, const char *s, size_t n)
{
	static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
	const char *at = find(s, n, OPEN);
	if (!at)
		return 0;
	while (at) {
		const char *body = at + strlen(OPEN);
		size_t left = n - (size_t)(body - s);
		const char *end = find(body, left, CLOSE);
		size_t blen = end ? (size_t)(end - body) : left;
		size_t pos = 0;
		int rc = parse_form(l, body, blen, &pos, true);
		if (rc)
			return ev_error_wrap(rc, "<tool_call> block");
		if (!end)
			break;
		const char *next = end + strlen(CLOSE);
		at = find(next, n - (size_t)(next - s), OPEN);
	}
	return 1;
}

/* 2. Fenced blocks: the ones that parse contribute their calls. Returns 1
 * when some did, 0 otherwise. */
static int from_fences(ev_toolcalls *l, const char *s, size_t n)
{
	int found = 0;
	const char *at = find(s, n, "```");
	while (at) {
		const char *body = at + 3;
		/* the info string ("json", "python", "tool_code") ends the line */
		const char *nl = memchr(body, '\n', n - (size_t)(body - s));
		if (!nl)
			break;
		body = nl + 1;
		const char *end = find(body, n - (size_t)(body - s), "```");
		size_t blen = end ? (size_t)(end - body) : n - (size_t)(body - s);
		size_t pos = 0;
		if (parse_form(l, body, blen, &pos, true) == 0)
			found = 1;
		if (!end)
			break;
		const char *next = end + 3;
		at = find(next, n - (size_t)(next - s), "```");
	}
	ev_error_clear();
	return found;
}

/* 4. Prose: every call-shaped piece, left to right. */
static int from_prose(ev_toolcalls *l, const char *s, size_t n)
{
	int found = 0, tries = 0;
	size_t i = 0;
	/* Each try may read to the end of the text: bound the work. */
	if (n > TC_MAX_PROSE)
		n = TC_MAX_PROSE;
	while (i < n && tries < 1024) {
		char c = s[i];
		bool word_start = tcv_is_ident_start(c) && (i == 0 || !(tcv_is_ident_char(s[i - 1]) || s[i - 1] == '.'));
		if (c == '{' || c == '[' || word_start) {
			tcv_parser p;
			tcv_parser_init(&p, l->a, s, n);
			p.pos = i;
			p.o.prose = true;
			/* A call written as an argument of a call that failed to
			 * parse is not a call of the answer. */
			size_t k = i;
			while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
				k--;
			bool in_args = word_start && k > 0 && strchr("=(,:", s[k - 1]);
			if (!in_args && (c == '{' || c == '[' || call_start_at(&p))) {
				tries++;
				size_t pos = i, before = l->n;
				if (parse_form(l, s, n, &pos, false) == 0 && pos > i && l->n > before) {
					found = 1;
					i = pos;
					continue;
				}
			}
		}
		i++;
	}
	ev_error_clear();
	return found;
}

static int from_tool_calls(ev_toolcalls *l, const tcv *v)
{
	if (v->kind != TCV_LIST)
		return ev_error_set(EV_E_PARSE, "tool_calls: not an array");
	for (size_t i = 0; i < v->n; i++) {
		char w[48];
		snprintf(w, sizeof w, "tool_calls[%zu]", i);
		if (!is_call_obj(v->items[i]))
			return ev_error_set(EV_E_PARSE, "%s: not a function call", w);
		int rc = add_call_obj(l, v->items[i], w);
		if (rc)
			return rc;
	}
	return 0;
}

bool ev_toolcalls_from_channel(const ev_toolcalls *l) { return l && l->channel; }

int ev_toolcalls_parse(ev_toolcalls **out, const char *tool_calls_json, const char *text)
{
	*out = NULL;
	ev_toolcalls *l = calloc(1, sizeof *l);
	int rc = 0;
	if (!l)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if ((rc = ev_arena_new(&l->a, TC_ARENA_MAX)))
		goto done;
	if (tool_calls_json) {
		size_t n = strlen(tool_calls_json);
		if (n > TC_MAX_TEXT) {
			rc = ev_error_set(EV_E_LIMIT, "tool_calls: longer than %zu bytes", TC_MAX_TEXT);
			goto done;
		}
		tcv *v;
		if ((rc = tcv_parse_all(&v, l->a, tool_calls_json, n, "tool_calls")) &&
		    strspn(tool_calls_json, " \t\r\n") < n)
			goto done;
		rc = 0;
		/* null, [] or blank: the calls, if any, are in the text */
		if (v && v->kind != TCV_NULL && !(v->kind == TCV_LIST && v->n == 0)) {
			l->channel = true;
			rc = from_tool_calls(l, v);
			goto done;
		}
	}
	if (!text)
		goto done;
	const char *s = text;
	size_t n = strlen(text);
	if (n > TC_MAX_TEXT) {
		rc = ev_error_set(EV_E_LIMIT, "answer: longer than %zu bytes", TC_MAX_TEXT);
		goto done;
	}
	/* Thinking is not an answer. */
	for (const char *t = find(s, n, "</think>"); t; t = find(s, n, "</think>")) {
		n -= (size_t)(t + 8 - s);
		s = t + 8;
	}
	if (strspn(s, " \t\r\n") == n)
		goto done;
	if ((rc = from_tags(l, s, n)) != 0) {
		rc = rc < 0 ? rc : 0;
		goto done;
	}
	if (from_fences(l, s, n))
		goto done;
	size_t pos = 0;
	if ((rc = parse_form(l, s, n, &pos, true)) == 0)
		goto done;
	char why[200];
	snprintf(why, sizeof why, "%s", ev_error_msg());
	if (from_prose(l, s, n)) {
		rc = 0;
		goto done;
	}
	rc = ev_error_set(EV_E_PARSE, "no function call found in the answer (%s)", why);
done:
	if (rc) {
		ev_toolcalls_free(l);
		return rc;
	}
	*out = l;
	return 0;
}
