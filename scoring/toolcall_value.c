/*
 * scoring/toolcall_value.c: the typed value tree of the tool-call checker
 * and its one parser for JSON and Python literals.
 *
 * The parser is deliberately lenient about which of the two syntaxes it
 * reads (a model writes '{"a": True}' as readily as '{"a": true}') and
 * strict about everything else: bounded depth, no trailing junk where a
 * whole value is asked for, integers kept apart from floats by how they
 * were written (BFCL's type checks depend on it), tuples apart from lists.
 */
#include "scoring/toolcall_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes -------------------------------------------------------------- */

tcv *tcv_new(ev_arena *a, tcv_kind k)
{
	tcv *v = ev_arena_alloc(a, sizeof *v);
	if (v) {
		memset(v, 0, sizeof *v);
		v->kind = k;
	}
	return v;
}

tcv *tcv_new_str(ev_arena *a, const char *s, size_t len)
{
	tcv *v = tcv_new(a, TCV_STR);
	if (v) {
		v->s = ev_arena_strndup(a, s, len);
		v->len = len;
		if (!v->s)
			return NULL;
	}
	return v;
}

/* Arena arrays grow by copying into a twice larger block; the old block is
 * wasted, which at most doubles what a container costs. */
static int grow(ev_arena *a, tcv *c)
{
	size_t cap = c->n < 4 ? 4 : c->n * 2;
	tcv **items = ev_arena_alloc(a, cap * sizeof *items);
	if (!items)
		return EV_E_LIMIT;
	if (c->n)
		memcpy(items, c->items, c->n * sizeof *items);
	c->items = items;
	if (c->kind == TCV_DICT) {
		char **keys = ev_arena_alloc(a, cap * sizeof *keys);
		size_t *klens = ev_arena_alloc(a, cap * sizeof *klens);
		if (!keys || !klens)
			return EV_E_LIMIT;
		if (c->n) {
			memcpy(keys, c->keys, c->n * sizeof *keys);
			memcpy(klens, c->klens, c->n * sizeof *klens);
		}
		c->keys = keys;
		c->klens = klens;
	}
	return 0;
}

/* Capacity is implicit: a power of two from 4 up, so n == cap exactly when
 * n is 4, 8, 16... (or 0). */
static bool full(size_t n) { return n == 0 || (n >= 4 && (n & (n - 1)) == 0); }

int tcv_push(ev_arena *a, tcv *c, const char *key, size_t klen, tcv *v)
{
	if (c->kind == TCV_DICT) {
		for (size_t i = 0; i < c->n; i++) {
			if (c->klens[i] == klen && memcmp(c->keys[i], key, klen) == 0) {
				c->items[i] = v; /* the last one wins, as in JSON and Python */
				return 0;
			}
		}
	}
	if (full(c->n) && grow(a, c))
		return EV_E_LIMIT;
	if (c->kind == TCV_DICT) {
		c->keys[c->n] = ev_arena_strndup(a, key, klen);
		c->klens[c->n] = klen;
		if (!c->keys[c->n])
			return EV_E_LIMIT;
	}
	c->items[c->n++] = v;
	return 0;
}

tcv *tcv_get(const tcv *d, const char *key)
{
	if (!d || d->kind != TCV_DICT)
		return NULL;
	size_t kl = strlen(key);
	for (size_t i = 0; i < d->n; i++)
		if (d->klens[i] == kl && memcmp(d->keys[i], key, kl) == 0)
			return d->items[i];
	return NULL;
}

bool tcv_is_str(const tcv *v, const char *s)
{
	return v && v->kind == TCV_STR && v->len == strlen(s) && memcmp(v->s, s, v->len) == 0;
}

bool tcv_is_empty_str(const tcv *v) { return v && v->kind == TCV_STR && v->len == 0; }

const char *tcv_kind_name(tcv_kind k)
{
	switch (k) {
	case TCV_NULL: return "NoneType";
	case TCV_BOOL: return "bool";
	case TCV_INT: return "int";
	case TCV_FLOAT: return "float";
	case TCV_STR: return "str";
	case TCV_LIST: return "list";
	case TCV_TUPLE: return "tuple";
	case TCV_DICT: return "dict";
	}
	return "?";
}

/* ---- equality ------------------------------------------------------------ */

static bool is_num(const tcv *v) { return v->kind == TCV_BOOL || v->kind == TCV_INT || v->kind == TCV_FLOAT; }

bool tcv_py_eq(const tcv *a, const tcv *b)
{
	if (is_num(a) && is_num(b)) {
		bool ai = a->kind != TCV_FLOAT && !a->big, bi = b->kind != TCV_FLOAT && !b->big;
		int64_t x = a->kind == TCV_BOOL ? a->b : a->i, y = b->kind == TCV_BOOL ? b->b : b->i;
		if (ai && bi)
			return x == y;
		double fx = a->kind == TCV_BOOL ? (double)a->b : a->f;
		double fy = b->kind == TCV_BOOL ? (double)b->b : b->f;
		return fx == fy;
	}
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case TCV_NULL: return true;
	case TCV_STR: return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
	case TCV_LIST:
	case TCV_TUPLE:
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if (!tcv_py_eq(a->items[i], b->items[i]))
				return false;
		return true;
	case TCV_DICT:
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++) {
			const tcv *o = NULL;
			for (size_t j = 0; j < b->n && !o; j++)
				if (b->klens[j] == a->klens[i] && memcmp(b->keys[j], a->keys[i], a->klens[i]) == 0)
					o = b->items[j];
			if (!o || !tcv_py_eq(a->items[i], o))
				return false;
		}
		return true;
	default: return false;
	}
}

/* ---- printing ------------------------------------------------------------ */

int tcv_print_json(ev_buf *b, const tcv *v)
{
	int rc = 0;
	switch (v->kind) {
	case TCV_NULL: return ev_buf_puts(b, "null");
	case TCV_BOOL: return ev_buf_puts(b, v->b ? "true" : "false");
	case TCV_INT:
		if (v->big)
			return ev_buf_printf(b, "%.17g", v->f);
		return ev_buf_printf(b, "%lld", (long long)v->i);
	case TCV_FLOAT: {
		if (!isfinite(v->f))
			return ev_buf_puts(b, "null");
		char num[64];
		snprintf(num, sizeof num, "%.17g", v->f);
		/* The shortest form that reads back the same: positional where the
		 * magnitude is ordinary ("2500.0", not "2.5e+03"), else %g. */
		double m = fabs(v->f);
		bool fixed = m == 0 || (m >= 1e-4 && m < 1e15);
		for (int prec = fixed ? 0 : 1; prec <= 17; prec++) {
			char t[64];
			snprintf(t, sizeof t, fixed ? "%.*f" : "%.*g", prec, v->f);
			if (strtod(t, NULL) == v->f) {
				memcpy(num, t, sizeof num);
				break;
			}
		}
		rc = ev_buf_puts(b, num);
		if (!rc && !strpbrk(num, ".eE"))
			rc = ev_buf_puts(b, ".0");
		return rc;
	}
	case TCV_STR: return ev_json_buf_strn(b, v->s, v->len);
	case TCV_LIST:
	case TCV_TUPLE:
		rc = ev_buf_putc(b, '[');
		for (size_t i = 0; !rc && i < v->n; i++) {
			if (i)
				rc = ev_buf_puts(b, ", ");
			if (!rc)
				rc = tcv_print_json(b, v->items[i]);
		}
		return rc ? rc : ev_buf_putc(b, ']');
	case TCV_DICT:
		rc = ev_buf_putc(b, '{');
		for (size_t i = 0; !rc && i < v->n; i++) {
			if (i)
				rc = ev_buf_puts(b, ", ");
			if (!rc)
				rc = ev_json_buf_strn(b, v->keys[i], v->klens[i]);
			if (!rc)
				rc = ev_buf_puts(b, ": ");
			if (!rc)
				rc = tcv_print_json(b, v->items[i]);
		}
		return rc ? rc : ev_buf_putc(b, '}');
	}
	return EV_E_INTERNAL;
}

char *tcv_show(const tcv *v, size_t max)
{
	ev_buf b = EV_BUF_INIT(max + 1);
	int rc = tcv_print_json(&b, v);
	if (rc == EV_E_LIMIT) {
		/* Cut at a UTF-8 boundary and mark the cut. */
		size_t n = b.len > max - 3 ? max - 3 : b.len;
		while (n > 0 && ((unsigned char)b.data[n] & 0xC0) == 0x80)
			n--;
		b.len = n;
		b.data[n] = 0;
		b.max = max + 4;
		rc = ev_buf_puts(&b, "...");
	}
	if (rc || !b.data) {
		ev_buf_free(&b);
		return ev_strdup("?");
	}
	return ev_buf_detach(&b, NULL);
}

/* ---- parsing ------------------------------------------------------------- */

void tcv_parser_init(tcv_parser *p, ev_arena *a, const char *s, size_t n)
{
	memset(p, 0, sizeof *p);
	p->s = s;
	p->n = n;
	p->a = a;
}

static tcv *fail(tcv_parser *p, const char *msg)
{
	if (!p->err[0])
		snprintf(p->err, sizeof p->err, "byte %zu: %s", p->pos, msg);
	return NULL;
}

bool tcv_is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool tcv_is_ident_char(char c) { return tcv_is_ident_start(c) || (c >= '0' && c <= '9'); }

void tcv_skip_space(tcv_parser *p)
{
	while (p->pos < p->n) {
		char c = p->s[p->pos];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
			p->pos++;
		else
			break;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool read_hex(tcv_parser *p, int digits, uint32_t *out)
{
	uint32_t v = 0;
	if (p->pos + (size_t)digits > p->n)
		return false;
	for (int k = 0; k < digits; k++) {
		int h = hexval(p->s[p->pos + (size_t)k]);
		if (h < 0)
			return false;
		v = v * 16 + (uint32_t)h;
	}
	p->pos += (size_t)digits;
	*out = v;
	return true;
}

static int put_utf8(ev_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;
	if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		cp = 0xFFFD;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return ev_buf_append(b, u, n);
}

/* A JSON or Python string literal at p->pos: "..." '...' """...""" '''...''',
 * with an optional r/u prefix (already consumed: `raw`). */
static tcv *parse_string(tcv_parser *p, bool raw)
{
	char q = p->s[p->pos];
	bool triple = p->pos + 2 < p->n && p->s[p->pos + 1] == q && p->s[p->pos + 2] == q;
	p->pos += triple ? 3 : 1;
	ev_buf b = EV_BUF_INIT(TC_MAX_TEXT);
	tcv *v = NULL;
	for (;;) {
		if (p->pos >= p->n) {
			fail(p, "unterminated string");
			goto done;
		}
		char c = p->s[p->pos];
		if (c == q) {
			if (!triple) {
				p->pos++;
				break;
			}
			if (p->pos + 2 < p->n && p->s[p->pos + 1] == q && p->s[p->pos + 2] == q) {
				p->pos += 3;
				break;
			}
		}
		if (c != '\\' || raw) {
			if (raw && c == '\\' && p->pos + 1 < p->n) {
				/* A raw string still cannot end on an escaped quote. */
				if (ev_buf_append(&b, p->s + p->pos, 2))
					goto nomem;
				p->pos += 2;
				continue;
			}
			if (ev_buf_putc(&b, c))
				goto nomem;
			p->pos++;
			continue;
		}
		if (++p->pos >= p->n) {
			fail(p, "unterminated string");
			goto done;
		}
		char e = p->s[p->pos++];
		int rc = 0;
		uint32_t cp;
		switch (e) {
		case '"': case '\'': case '\\': case '/': rc = ev_buf_putc(&b, e); break;
		case 'n': rc = ev_buf_putc(&b, '\n'); break;
		case 't': rc = ev_buf_putc(&b, '\t'); break;
		case 'r': rc = ev_buf_putc(&b, '\r'); break;
		case 'b': rc = ev_buf_putc(&b, '\b'); break;
		case 'f': rc = ev_buf_putc(&b, '\f'); break;
		case 'v': rc = ev_buf_putc(&b, '\v'); break;
		case 'a': rc = ev_buf_putc(&b, '\a'); break;
		case '0': rc = ev_buf_putc(&b, '\0'); break;
		case '\n': break; /* a line continuation */
		case 'x':
			if (!read_hex(p, 2, &cp)) {
				fail(p, "bad \\x escape");
				goto done;
			}
			rc = put_utf8(&b, cp);
			break;
		case 'U':
			if (!read_hex(p, 8, &cp)) {
				fail(p, "bad \\U escape");
				goto done;
			}
			rc = put_utf8(&b, cp);
			break;
		case 'u':
			if (!read_hex(p, 4, &cp)) {
				fail(p, "bad \\u escape");
				goto done;
			}
			if (cp >= 0xD800 && cp <= 0xDBFF && p->pos + 6 <= p->n && p->s[p->pos] == '\\' &&
			    p->s[p->pos + 1] == 'u') {
				size_t save = p->pos;
				uint32_t lo;
				p->pos += 2;
				if (read_hex(p, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				else
					p->pos = save;
			}
			rc = put_utf8(&b, cp);
			break;
		default:
			/* Python keeps an unknown escape as written. */
			rc = ev_buf_putc(&b, '\\');
			if (!rc)
				rc = ev_buf_putc(&b, e);
		}
		if (rc)
			goto nomem;
	}
	v = tcv_new_str(p->a, b.data ? b.data : "", b.len);
	if (!v)
		goto nomem;
	goto done;
nomem:
	fail(p, "string too long or out of memory");
	v = NULL;
done:
	ev_buf_free(&b);
	return v;
}

static tcv *parse_number(tcv_parser *p)
{
	size_t start = p->pos;
	char digits[128];
	size_t nd = 0;
	bool is_float = false, any = false;
	if (p->pos < p->n && (p->s[p->pos] == '-' || p->s[p->pos] == '+'))
		digits[nd++] = p->s[p->pos++];
	while (p->pos < p->n) {
		char c = p->s[p->pos];
		if (c >= '0' && c <= '9') {
			any = true;
		} else if (c == '_' && any) {
			p->pos++; /* Python's digit separator */
			continue;
		} else if (c == '.' || c == 'e' || c == 'E') {
			is_float = true;
		} else if ((c == '-' || c == '+') && nd > 0 && (digits[nd - 1] == 'e' || digits[nd - 1] == 'E')) {
			/* exponent sign */
		} else {
			break;
		}
		if (nd + 1 >= sizeof digits)
			return fail(p, "number too long");
		digits[nd++] = c;
		p->pos++;
	}
	digits[nd] = 0;
	if (!any) {
		p->pos = start;
		return fail(p, "expected a value");
	}
	tcv *v = tcv_new(p->a, is_float ? TCV_FLOAT : TCV_INT);
	if (!v)
		return fail(p, "out of memory");
	char *end;
	errno = 0;
	v->f = strtod(digits, &end);
	if (*end) {
		p->pos = start;
		return fail(p, "malformed number");
	}
	if (!is_float) {
		errno = 0;
		long long x = strtoll(digits, &end, 10);
		if (errno == ERANGE)
			v->big = true;
		else
			v->i = x;
	}
	return v;
}

static bool word_at(tcv_parser *p, const char *w)
{
	size_t n = strlen(w);
	return p->pos + n <= p->n && memcmp(p->s + p->pos, w, n) == 0 &&
	       (p->pos + n == p->n || !tcv_is_ident_char(p->s[p->pos + n]));
}

static tcv *parse_container(tcv_parser *p, char open)
{
	char close = open == '[' ? ']' : open == '(' ? ')' : '}';
	tcv *c = tcv_new(p->a, open == '[' ? TCV_LIST : open == '(' ? TCV_TUPLE : TCV_DICT);
	if (!c)
		return fail(p, "out of memory");
	p->pos++;
	bool comma = false; /* a comma was seen: "(x,)" is a tuple, "(x)" is x */
	for (;;) {
		tcv_skip_space(p);
		if (p->pos >= p->n)
			return fail(p, "unterminated container");
		if (p->s[p->pos] == close) {
			p->pos++;
			break;
		}
		if (c->n > 0) {
			if (p->s[p->pos] != ',')
				return fail(p, "expected ',' or a closing bracket");
			p->pos++;
			comma = true;
			tcv_skip_space(p);
			if (p->pos < p->n && p->s[p->pos] == close) {
				p->pos++;
				break;
			}
		}
		if (c->kind == TCV_DICT) {
			tcv_skip_space(p);
			if (p->pos >= p->n || (p->s[p->pos] != '"' && p->s[p->pos] != '\''))
				return fail(p, "expected a string key");
			tcv *k = parse_string(p, false);
			if (!k)
				return NULL;
			tcv_skip_space(p);
			if (p->pos >= p->n || p->s[p->pos] != ':')
				return fail(p, "expected ':'");
			p->pos++;
			tcv *v = tcv_parse_value(p);
			if (!v)
				return NULL;
			if (tcv_push(p->a, c, k->s, k->len, v))
				return fail(p, "out of memory");
		} else {
			tcv *v = tcv_parse_value(p);
			if (!v)
				return NULL;
			if (tcv_push(p->a, c, NULL, 0, v))
				return fail(p, "out of memory");
		}
	}
	if (c->kind == TCV_TUPLE && c->n == 1 && !comma)
		return c->items[0]; /* parentheses around one value */
	return c;
}

tcv *tcv_parse_value(tcv_parser *p)
{
	tcv_skip_space(p);
	if (p->pos >= p->n)
		return fail(p, "expected a value");
	if (p->depth >= TC_MAX_DEPTH)
		return fail(p, "nesting too deep");
	char c = p->s[p->pos];
	tcv *v = NULL;
	p->depth++;
	if (c == '[' || c == '(' || c == '{') {
		v = parse_container(p, c);
	} else if (c == '"' || c == '\'') {
		v = parse_string(p, false);
	} else if ((c == 'r' || c == 'R' || c == 'u' || c == 'U') && p->pos + 1 < p->n &&
	           (p->s[p->pos + 1] == '"' || p->s[p->pos + 1] == '\'')) {
		p->pos++;
		v = parse_string(p, c == 'r' || c == 'R');
	} else if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) {
		v = parse_number(p);
	} else if (word_at(p, "true") || word_at(p, "True")) {
		p->pos += 4;
		if ((v = tcv_new(p->a, TCV_BOOL)))
			v->b = true;
	} else if (word_at(p, "false") || word_at(p, "False")) {
		p->pos += 5;
		v = tcv_new(p->a, TCV_BOOL);
	} else if (word_at(p, "null") || word_at(p, "None")) {
		p->pos += 4;
		v = tcv_new(p->a, TCV_NULL);
	} else if (p->o.names && tcv_is_ident_start(c)) {
		/* BFCL reads a bare name (a variable) as its own text. */
		size_t start = p->pos;
		while (p->pos < p->n && (tcv_is_ident_char(p->s[p->pos]) ||
		                         (p->s[p->pos] == '.' && p->pos + 1 < p->n &&
		                          tcv_is_ident_start(p->s[p->pos + 1]))))
			p->pos++;
		v = tcv_new_str(p->a, p->s + start, p->pos - start);
	} else {
		fail(p, "expected a value");
	}
	p->depth--;
	if (!v)
		return fail(p, "out of memory");
	return v;
}

int tcv_parse_all(tcv **out, ev_arena *a, const char *s, size_t n, const char *what)
{
	tcv_parser p;
	tcv_parser_init(&p, a, s, n);
	*out = tcv_parse_value(&p);
	if (*out) {
		tcv_skip_space(&p);
		if (p.pos == p.n)
			return 0;
		fail(&p, "unexpected text after the value");
		*out = NULL;
	}
	return ev_error_set(EV_E_PARSE, "%s: %s", what, p.err);
}
