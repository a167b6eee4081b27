/*
 * engine/tokenizer/jinja.c: the chat-template renderer (see jinja.h for
 * the subset and how it follows transformers' Jinja2 setup).
 *
 * Three parts: the lexer cuts the source into text and tags, applying
 * Jinja's whitespace rules (trim_blocks, lstrip_blocks, '-' and '+'); the
 * parser builds a tree of statements and expressions; the evaluator walks
 * it with values that behave as Python's (ints and floats apart, dicts in
 * insertion order, Python's str() and repr() for output). Everything a
 * render allocates lives in one arena, freed when it ends.
 */
#include "engine/tokenizer/jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 200      /* expression and statement nesting */
#define MAX_CALL_DEPTH 64  /* macro calls within macro calls */
#define ARENA_MAX ((size_t)1 << 30)

/* ---- values ----------------------------------------------------------------- */

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_FUNC } vkind;

typedef struct node node;
typedef struct val val;
struct val {
	vkind k;
	bool ns;            /* a namespace(): attributes may be set */
	bool b;
	long long i;
	double f;
	const char *s;      /* V_STR bytes; V_UNDEF and V_FUNC: the name */
	size_t n;
	val **items;        /* V_LIST items; V_DICT values */
	val **keys;         /* V_DICT keys */
	size_t len, cap;
	const node *macro;  /* V_MACRO */
	val *self;          /* V_FUNC: the bound receiver, or NULL for a global */
};

/* ---- the tree ------------------------------------------------------------------ */

typedef enum {
	N_BODY, N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE,
	E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NOT, E_NEG, E_BIN, E_AND, E_OR,
	E_COND, E_LIST, E_DICT
} nkind;

struct node {
	nkind k;
	int line;
	const char *s; /* text, names, operators */
	size_t n;
	val *lit;
	node *a, *b, *c, *d;
	node **list; /* statements, arguments, elements, dict keys */
	size_t nlist, caplist;
	node **list2; /* dict values, keyword argument values, macro defaults */
	const char **names; /* keyword argument names, loop targets, macro parameters */
	size_t nnames, capnames;
	bool neg; /* E_TEST: is not */
};

struct eng_jinja {
	ev_arena *arena;
	node *root;
	char *what;
};

/* ---- shared helpers ------------------------------------------------------------ */

static void *zalloc(ev_arena *a, size_t n)
{
	void *p = ev_arena_alloc(a, n);
	if (p)
		memset(p, 0, n);
	return p;
}

static bool grow(ev_arena *a, void ***v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t nc = *cap ? *cap * 2 : 4;
	while (nc < need)
		nc *= 2;
	void **nv = ev_arena_alloc(a, nc * elem);
	if (!nv)
		return false;
	if (*cap)
		memcpy(nv, *v, *cap * elem);
	*v = nv;
	*cap = nc;
	return true;
}

/* ---- lexing: text and tags --------------------------------------------------------- */

typedef enum { SEG_TEXT, SEG_VAR, SEG_BLOCK } segkind;

typedef struct {
	segkind k;
	const char *s; /* for tags: the inside, without delimiters and modifiers */
	size_t n;
	int line;
} seg;

typedef struct {
	ev_arena *a;
	const char *what;
	seg *v;
	size_t n, cap;
} segs;

static int line_of(const char *src, const char *p)
{
	int l = 1;
	for (const char *q = src; q < p; q++)
		l += *q == '\n';
	return l;
}

static int push_seg(segs *S, segkind k, const char *s, size_t n, int line)
{
	if (S->n == S->cap) {
		size_t nc = S->cap ? S->cap * 2 : 64;
		seg *nv = ev_arena_alloc(S->a, nc * sizeof *nv);
		if (!nv)
			return ev_error_set(EV_E_NOMEM, "%s: out of memory", S->what);
		if (S->n)
			memcpy(nv, S->v, S->n * sizeof *nv);
		S->v = nv;
		S->cap = nc;
	}
	S->v[S->n++] = (seg){k, s, n, line};
	return 0;
}

/* Cuts the source into segments. trim_blocks: a newline right after a
 * block tag or comment goes (unless '+%}'); lstrip_blocks: spaces and tabs
 * from a line's start to a block tag or comment go (unless '{%+'); '-'
 * strips all whitespace on its side. */
static int lex(segs *S, const char *src, size_t len)
{
	size_t pos = 0;
	bool strip_next = false, trim_nl = false;
	while (pos <= len) {
		/* the next tag */
		size_t t = pos;
		const char *open = NULL;
		while (t + 1 < len) {
			if (src[t] == '{' && (src[t + 1] == '{' || src[t + 1] == '%' || src[t + 1] == '#')) {
				open = src + t;
				break;
			}
			t++;
		}
		size_t text_end = open ? t : len;
		const char *ts = src + pos;
		size_t tn = text_end - pos;
		if (strip_next) {
			while (tn && (*ts == ' ' || *ts == '\t' || *ts == '\n' || *ts == '\r'))
				ts++, tn--;
		} else if (trim_nl && tn && *ts == '\n') {
			ts++, tn--;
		} else if (trim_nl && tn >= 2 && ts[0] == '\r' && ts[1] == '\n') {
			ts += 2, tn -= 2;
		}
		strip_next = trim_nl = false;
		if (!open) {
			if (tn && push_seg(S, SEG_TEXT, ts, tn, line_of(src, ts)))
				return ev_error_code();
			break;
		}
		char kind = open[1];
		const char *in = open + 2;
		bool minus_l = *in == '-', plus_l = *in == '+';
		if (minus_l || plus_l)
			in++;
		/* the closing delimiter (strings inside tags may hold one) */
		const char *close = NULL;
		char endc = kind == '{' ? '}' : kind;
		char quote = 0;
		for (const char *p = in; p + 1 < src + len; p++) {
			if (kind != '#' && quote) {
				if (*p == '\\')
					p++;
				else if (*p == quote)
					quote = 0;
				continue;
			}
			if (kind != '#' && (*p == '"' || *p == '\''))
				quote = *p;
			else if (p[0] == endc && p[1] == '}') {
				close = p;
				break;
			}
		}
		if (!close)
			return ev_error_set(EV_E_PARSE, "%s: line %d: a tag opened with '{%c' is never closed", S->what,
					    line_of(src, open), kind);
		const char *ie = close;
		bool minus_r = ie > in && ie[-1] == '-', plus_r = ie > in && ie[-1] == '+';
		if (minus_r || plus_r)
			ie--;
		/* whitespace before the tag */
		bool blockish = kind != '{';
		if (minus_l) {
			while (tn && (ts[tn - 1] == ' ' || ts[tn - 1] == '\t' || ts[tn - 1] == '\n' || ts[tn - 1] == '\r'))
				tn--;
		} else if (blockish && !plus_l) {
			/* lstrip_blocks: spaces and tabs back to the line's start */
			size_t k = tn;
			while (k && (ts[k - 1] == ' ' || ts[k - 1] == '\t'))
				k--;
			bool at_line_start = k ? ts[k - 1] == '\n' : (ts == src || ts[-1] == '\n');
			if (at_line_start)
				tn = k;
		}
		if (tn && push_seg(S, SEG_TEXT, ts, tn, line_of(src, ts)))
			return ev_error_code();
		int line = line_of(src, open);
		if (kind == '{' && push_seg(S, SEG_VAR, in, (size_t)(ie - in), line))
			return ev_error_code();
		if (kind == '%' && push_seg(S, SEG_BLOCK, in, (size_t)(ie - in), line))
			return ev_error_code();
		strip_next = minus_r;
		trim_nl = blockish && !minus_r && !plus_r;
		pos = (size_t)(close + 2 - src);
		if (pos >= len) {
			break;
		}
	}
	return 0;
}

/* ---- expression tokens ------------------------------------------------------------ */

typedef enum { T_END, T_NAME, T_INT, T_FLOAT, T_STR, T_OP } tkind;

typedef struct {
	tkind k;
	const char *s;
	size_t n;
	long long i;
	double f;
	char *str; /* T_STR, unescaped (arena) */
	size_t strn;
} tok;

typedef struct {
	ev_arena *a;
	const char *what;
	int line;
	const char *p, *end;
	tok cur;
	int depth;
} tparser;

static int perr(tparser *P, const char *fmt, ...) EV_PRINTF(2, 3);
static int perr(tparser *P, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return ev_error_set(EV_E_PARSE, "%s: line %d: %s", P->what, P->line, msg);
}

static int next(tparser *P)
{
	const char *p = P->p;
	while (p < P->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	tok t = {0};
	t.s = p;
	if (p >= P->end) {
		t.k = T_END;
		P->cur = t;
		P->p = p;
		return 0;
	}
	char c = *p;
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
		while (p < P->end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
				      (*p >= '0' && *p <= '9')))
			p++;
		t.k = T_NAME;
	} else if (c >= '0' && c <= '9') {
		bool flt = false;
		while (p < P->end && ((*p >= '0' && *p <= '9') || *p == '_'))
			p++;
		if (p + 1 < P->end && *p == '.' && p[1] >= '0' && p[1] <= '9') {
			flt = true;
			p++;
			while (p < P->end && *p >= '0' && *p <= '9')
				p++;
		}
		if (p < P->end && (*p == 'e' || *p == 'E')) {
			flt = true;
			p++;
			if (p < P->end && (*p == '+' || *p == '-'))
				p++;
			while (p < P->end && *p >= '0' && *p <= '9')
				p++;
		}
		char buf[64];
		size_t n = 0;
		for (const char *q = t.s; q < p && n < sizeof buf - 1; q++)
			if (*q != '_')
				buf[n++] = *q;
		buf[n] = 0;
		if (flt) {
			t.k = T_FLOAT;
			t.f = strtod(buf, NULL);
		} else {
			t.k = T_INT;
			t.i = strtoll(buf, NULL, 10);
		}
	} else if (c == '"' || c == '\'') {
		char q = c;
		p++;
		char *o = ev_arena_alloc(P->a, (size_t)(P->end - p) + 1);
		if (!o)
			return ev_error_set(EV_E_NOMEM, "%s: out of memory", P->what);
		size_t n = 0;
		while (p < P->end && *p != q) {
			if (*p == '\\' && p + 1 < P->end) {
				p++;
				switch (*p) {
				case 'n': o[n++] = '\n'; break;
				case 't': o[n++] = '\t'; break;
				case 'r': o[n++] = '\r'; break;
				case '0': o[n++] = '\0'; break;
				case '\\': o[n++] = '\\'; break;
				case '\'': o[n++] = '\''; break;
				case '"': o[n++] = '"'; break;
				case '\n': break;
				case 'x':
				case 'u':
				case 'U': {
					int digits = *p == 'x' ? 2 : *p == 'u' ? 4 : 8;
					unsigned cp = 0;
					int k;
					for (k = 0; k < digits && p + 1 < P->end; k++) {
						char h = p[1];
						int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
							: h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
						if (v < 0)
							break;
						cp = cp * 16 + (unsigned)v;
						p++;
					}
					if (k != digits || cp > 0x10FFFF)
						return perr(P, "bad \\%c escape in a string", digits == 2 ? 'x' : 'u');
					n += ev_utf8_encode(o + n, cp);
					break;
				}
				default:
					o[n++] = '\\';
					o[n++] = *p;
				}
				p++;
			} else {
				o[n++] = *p++;
			}
		}
		if (p >= P->end)
			return perr(P, "a string is never closed");
		p++;
		o[n] = 0;
		t.k = T_STR;
		t.str = o;
		t.strn = n;
	} else {
		static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**"};
		t.k = T_OP;
		p++;
		for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
			if (p < P->end && c == two[i][0] && *p == two[i][1]) {
				p++;
				break;
			}
		if (!strchr("()[]{},:.|+-*/%~<>=!", c))
			return perr(P, "unexpected character '%c'", c);
	}
	t.n = (size_t)(p - t.s);
	P->cur = t;
	P->p = p;
	return 0;
}

static bool is_op(const tparser *P, const char *op)
{
	return P->cur.k == T_OP && P->cur.n == strlen(op) && !memcmp(P->cur.s, op, P->cur.n);
}

static bool is_name(const tparser *P, const char *name)
{
	return P->cur.k == T_NAME && P->cur.n == strlen(name) && !memcmp(P->cur.s, name, P->cur.n);
}

static int expect_op(tparser *P, const char *op)
{
	if (!is_op(P, op))
		return perr(P, "expected '%s', found '%.*s'", op, P->cur.k == T_END ? 3 : (int)P->cur.n,
			    P->cur.k == T_END ? "end" : P->cur.s);
	return next(P);
}

static node *mk(tparser *P, nkind k)
{
	node *n = zalloc(P->a, sizeof *n);
	if (n) {
		n->k = k;
		n->line = P->line;
	} else {
		ev_error_set(EV_E_NOMEM, "%s: out of memory", P->what);
	}
	return n;
}

static bool add(tparser *P, node *parent, node *child)
{
	if (!grow(P->a, (void ***)&parent->list, &parent->caplist, parent->nlist + 1, sizeof(node *)))
		return false;
	parent->list[parent->nlist++] = child;
	return true;
}

/* Adds a keyword argument (or a dict value, or a macro default). */
static bool add_kw(tparser *P, node *parent, const char *name, node *v)
{
	size_t cap = parent->capnames;
	if (!grow(P->a, (void ***)&parent->names, &parent->capnames, parent->nnames + 1, sizeof(char *)))
		return false;
	if (parent->capnames != cap || !parent->list2) {
		node **nv = ev_arena_alloc(P->a, parent->capnames * sizeof *nv);
		if (!nv)
			return false;
		if (parent->list2)
			memcpy(nv, parent->list2, parent->nnames * sizeof *nv);
		parent->list2 = nv;
	}
	parent->names[parent->nnames] = name;
	parent->list2[parent->nnames++] = v;
	return true;
}

static char *tok_name(tparser *P)
{
	return ev_arena_strndup(P->a, P->cur.s, P->cur.n);
}

static node *parse_expr(tparser *P);
static node *parse_or(tparser *P);

static val *mkval(ev_arena *a, vkind k)
{
	val *v = zalloc(a, sizeof *v);
	if (v)
		v->k = k;
	return v;
}

/* Call arguments: positional, then name=value. */
static int parse_args(tparser *P, node *call)
{
	if (expect_op(P, "("))
		return ev_error_code();
	while (!is_op(P, ")")) {
		if (P->cur.k == T_NAME) {
			/* name=value? look ahead */
			const char *save = P->p;
			tok t = P->cur;
			if (next(P))
				return ev_error_code();
			if (is_op(P, "=")) {
				char *name = ev_arena_strndup(P->a, t.s, t.n);
				if (next(P))
					return ev_error_code();
				node *v = parse_expr(P);
				if (!v || !add_kw(P, call, name, v))
					return ev_error_code() ? ev_error_code() : EV_E_NOMEM;
				goto sep;
			}
			P->p = save;
			P->cur = t;
		}
		node *v = parse_expr(P);
		if (!v || !add(P, call, v))
			return ev_error_code() ? ev_error_code() : EV_E_NOMEM;
	sep:
		if (is_op(P, ","))
			next(P);
		else if (!is_op(P, ")"))
			return perr(P, "expected ',' or ')' in a call");
	}
	return next(P);
}

static node *parse_primary(tparser *P)
{
	node *n = NULL;
	tok t = P->cur;
	if (t.k == T_INT || t.k == T_FLOAT || t.k == T_STR) {
		n = mk(P, E_LIT);
		if (!n || !(n->lit = mkval(P->a, t.k == T_INT ? V_INT : t.k == T_FLOAT ? V_FLOAT : V_STR)))
			return NULL;
		n->lit->i = t.i;
		n->lit->f = t.f;
		n->lit->s = t.str;
		n->lit->n = t.strn;
		/* adjacent strings concatenate, as in Python */
		if (next(P))
			return NULL;
		while (t.k == T_STR && P->cur.k == T_STR) {
			char *s = ev_arena_alloc(P->a, n->lit->n + P->cur.strn + 1);
			if (!s)
				return NULL;
			memcpy(s, n->lit->s, n->lit->n);
			memcpy(s + n->lit->n, P->cur.str, P->cur.strn + 1);
			n->lit->s = s;
			n->lit->n += P->cur.strn;
			if (next(P))
				return NULL;
		}
		return n;
	}
	if (t.k == T_NAME) {
		static const struct {
			const char *name;
			vkind k;
			bool b;
		} consts[] = {{"true", V_BOOL, true},  {"True", V_BOOL, true}, {"false", V_BOOL, false},
			      {"False", V_BOOL, false}, {"none", V_NONE, false}, {"None", V_NONE, false}};
		for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++) {
			if (is_name(P, consts[i].name)) {
				n = mk(P, E_LIT);
				if (!n || !(n->lit = mkval(P->a, consts[i].k)))
					return NULL;
				n->lit->b = consts[i].b;
				return next(P) ? NULL : n;
			}
		}
		n = mk(P, E_NAME);
		if (!n || !(n->s = tok_name(P)))
			return NULL;
		return next(P) ? NULL : n;
	}
	if (is_op(P, "(")) {
		if (next(P))
			return NULL;
		node *first = parse_expr(P);
		if (!first)
			return NULL;
		if (is_op(P, ",")) { /* a tuple: a list here */
			n = mk(P, E_LIST);
			if (!n || !add(P, n, first))
				return NULL;
			while (is_op(P, ",")) {
				if (next(P))
					return NULL;
				if (is_op(P, ")"))
					break;
				node *e = parse_expr(P);
				if (!e || !add(P, n, e))
					return NULL;
			}
			first = n;
		}
		return expect_op(P, ")") ? NULL : first;
	}
	if (is_op(P, "[")) {
		n = mk(P, E_LIST);
		if (!n || next(P))
			return NULL;
		while (!is_op(P, "]")) {
			node *e = parse_expr(P);
			if (!e || !add(P, n, e))
				return NULL;
			if (is_op(P, ",")) {
				if (next(P))
					return NULL;
			} else if (!is_op(P, "]")) {
				perr(P, "expected ',' or ']' in a list");
				return NULL;
			}
		}
		return next(P) ? NULL : n;
	}
	if (is_op(P, "{")) {
		n = mk(P, E_DICT);
		if (!n || next(P))
			return NULL;
		while (!is_op(P, "}")) {
			node *k = parse_expr(P);
			if (!k || expect_op(P, ":"))
				return NULL;
			node *v = parse_expr(P);
			if (!v || !add(P, n, k) || !add_kw(P, n, NULL, v))
				return NULL;
			if (is_op(P, ",")) {
				if (next(P))
					return NULL;
			} else if (!is_op(P, "}")) {
				perr(P, "expected ',' or '}' in a dict");
				return NULL;
			}
		}
		return next(P) ? NULL : n;
	}
	perr(P, "unexpected '%.*s' in an expression", P->cur.k == T_END ? 3 : (int)P->cur.n,
	     P->cur.k == T_END ? "end" : P->cur.s);
	return NULL;
}

static node *parse_postfix(tparser *P, node *n)
{
	for (;;) {
		if (is_op(P, ".")) {
			if (next(P))
				return NULL;
			if (P->cur.k != T_NAME && P->cur.k != T_INT) {
				perr(P, "expected a name after '.'");
				return NULL;
			}
			node *a = mk(P, E_ATTR);
			if (!a || !(a->s = tok_name(P)))
				return NULL;
			a->a = n;
			n = a;
			if (next(P))
				return NULL;
		} else if (is_op(P, "[")) {
			if (next(P))
				return NULL;
			node *parts[3] = {NULL, NULL, NULL};
			bool slice = false;
			for (int i = 0; i < 3; i++) {
				if (!is_op(P, ":") && !is_op(P, "]")) {
					if (!(parts[i] = parse_expr(P)))
						return NULL;
				}
				if (is_op(P, ":") && i < 2) {
					slice = true;
					if (next(P))
						return NULL;
				} else {
					break;
				}
			}
			if (expect_op(P, "]"))
				return NULL;
			node *x = mk(P, slice ? E_SLICE : E_ITEM);
			if (!x)
				return NULL;
			x->a = n;
			if (slice) {
				x->b = parts[0], x->c = parts[1], x->d = parts[2];
			} else {
				if (!parts[0]) {
					perr(P, "empty subscript");
					return NULL;
				}
				x->b = parts[0];
			}
			n = x;
		} else if (is_op(P, "(")) {
			node *c = mk(P, E_CALL);
			if (!c)
				return NULL;
			c->a = n;
			if (parse_args(P, c))
				return NULL;
			n = c;
		} else {
			return n;
		}
	}
}

/* value|filter(args) and value is [not] test(args), in a loop. */
static node *parse_filters(tparser *P, node *n)
{
	for (;;) {
		if (is_op(P, "|")) {
			if (next(P))
				return NULL;
			if (P->cur.k != T_NAME) {
				perr(P, "expected a filter name after '|'");
				return NULL;
			}
			node *f = mk(P, E_FILTER);
			if (!f || !(f->s = tok_name(P)) || next(P))
				return NULL;
			f->a = n;
			if (is_op(P, "(") && parse_args(P, f))
				return NULL;
			n = f;
		} else if (is_name(P, "is")) {
			node *t = mk(P, E_TEST);
			if (!t || next(P))
				return NULL;
			if (is_name(P, "not")) {
				t->neg = true;
				if (next(P))
					return NULL;
			}
			if (P->cur.k != T_NAME && !(P->cur.k == T_OP && (is_op(P, "==") || is_op(P, "!=")))) {
				perr(P, "expected a test name after 'is'");
				return NULL;
			}
			t->s = is_name(P, "none") || is_name(P, "None") ? "none"
			     : is_name(P, "true") || is_name(P, "True") ? "true"
			     : is_name(P, "false") || is_name(P, "False") ? "false"
									   : tok_name(P);
			if (!t->s || next(P))
				return NULL;
			t->a = n;
			if (is_op(P, "(")) {
				if (parse_args(P, t))
					return NULL;
			} else if (P->cur.k == T_STR || P->cur.k == T_INT || P->cur.k == T_FLOAT ||
				   (P->cur.k == T_NAME && !is_name(P, "and") && !is_name(P, "or") && !is_name(P, "else") &&
				    !is_name(P, "if") && !is_name(P, "in") && !is_name(P, "is") && !is_name(P, "not"))) {
				/* one argument without parentheses: "is divisibleby 3" */
				node *arg = parse_primary(P);
				if (!arg || !add(P, t, arg))
					return NULL;
			}
			n = t;
		} else {
			return n;
		}
	}
}

static node *parse_unary(tparser *P)
{
	if (++P->depth > MAX_DEPTH) {
		perr(P, "nested deeper than %d levels", MAX_DEPTH);
		return NULL;
	}
	node *n;
	if (is_op(P, "-") || is_op(P, "+")) {
		bool neg = is_op(P, "-");
		if (next(P))
			return NULL;
		node *x = parse_unary(P);
		if (!x)
			return NULL;
		if (neg) {
			n = mk(P, E_NEG);
			if (!n)
				return NULL;
			n->a = x;
		} else {
			n = x;
		}
	} else {
		n = parse_primary(P);
		if (n)
			n = parse_postfix(P, n);
	}
	if (n)
		n = parse_filters(P, n);
	P->depth--;
	return n;
}

static node *binary(tparser *P, const char *op, node *a, node *b)
{
	node *n = mk(P, E_BIN);
	if (!n)
		return NULL;
	n->s = op;
	n->a = a;
	n->b = b;
	return n;
}

static node *parse_pow(tparser *P)
{
	node *a = parse_unary(P);
	while (a && is_op(P, "**")) {
		if (next(P))
			return NULL;
		node *b = parse_unary(P);
		a = b ? binary(P, "**", a, b) : NULL;
	}
	return a;
}

static node *parse_mul(tparser *P)
{
	node *a = parse_pow(P);
	while (a && (is_op(P, "*") || is_op(P, "/") || is_op(P, "//") || is_op(P, "%"))) {
		const char *op = is_op(P, "*") ? "*" : is_op(P, "//") ? "//" : is_op(P, "/") ? "/" : "%";
		if (next(P))
			return NULL;
		node *b = parse_pow(P);
		a = b ? binary(P, op, a, b) : NULL;
	}
	return a;
}

static node *parse_concat(tparser *P)
{
	node *a = parse_mul(P);
	while (a && is_op(P, "~")) {
		if (next(P))
			return NULL;
		node *b = parse_mul(P);
		a = b ? binary(P, "~", a, b) : NULL;
	}
	return a;
}

static node *parse_add(tparser *P)
{
	node *a = parse_concat(P);
	while (a && (is_op(P, "+") || is_op(P, "-"))) {
		const char *op = is_op(P, "+") ? "+" : "-";
		if (next(P))
			return NULL;
		node *b = parse_concat(P);
		a = b ? binary(P, op, a, b) : NULL;
	}
	return a;
}

static node *parse_compare(tparser *P)
{
	node *a = parse_add(P);
	for (;;) {
		if (!a)
			return NULL;
		const char *op = NULL;
		static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
		for (size_t i = 0; i < sizeof ops / sizeof ops[0] && !op; i++)
			if (is_op(P, ops[i]))
				op = ops[i];
		if (!op && is_name(P, "in"))
			op = "in";
		if (!op && is_name(P, "not")) {
			/* "not in" */
			const char *save = P->p;
			tok t = P->cur;
			if (next(P))
				return NULL;
			if (is_name(P, "in")) {
				op = "not in";
			} else {
				P->p = save;
				P->cur = t;
				return a;
			}
		}
		if (!op)
			return a;
		if (next(P))
			return NULL;
		node *b = parse_add(P);
		a = b ? binary(P, op, a, b) : NULL;
	}
}

static node *parse_not(tparser *P)
{
	if (is_name(P, "not")) {
		if (next(P))
			return NULL;
		node *x = parse_not(P);
		node *n = x ? mk(P, E_NOT) : NULL;
		if (n)
			n->a = x;
		return n;
	}
	return parse_compare(P);
}

static node *parse_and(tparser *P)
{
	node *a = parse_not(P);
	while (a && is_name(P, "and")) {
		if (next(P))
			return NULL;
		node *b = parse_not(P);
		node *n = b ? mk(P, E_AND) : NULL;
		if (!n)
			return NULL;
		n->a = a, n->b = b;
		a = n;
	}
	return a;
}

static node *parse_or(tparser *P)
{
	node *a = parse_and(P);
	while (a && is_name(P, "or")) {
		if (next(P))
			return NULL;
		node *b = parse_and(P);
		node *n = b ? mk(P, E_OR) : NULL;
		if (!n)
			return NULL;
		n->a = a, n->b = b;
		a = n;
	}
	return a;
}

static node *parse_expr(tparser *P)
{
	node *a = parse_or(P);
	if (a && is_name(P, "if")) {
		if (next(P))
			return NULL;
		node *cond = parse_or(P);
		if (!cond)
			return NULL;
		node *alt = NULL;
		if (is_name(P, "else")) {
			if (next(P))
				return NULL;
			if (!(alt = parse_expr(P)))
				return NULL;
		}
		node *n = mk(P, E_COND);
		if (!n)
			return NULL;
		n->a = cond, n->b = a, n->c = alt;
		return n;
	}
	return a;
}

/* ---- statements ------------------------------------------------------------------- */

typedef struct {
	ev_arena *a;
	const char *what;
	segs *S;
	size_t i;
	int depth;
} sparser;

static int tp_init(tparser *P, sparser *SP, const seg *g)
{
	memset(P, 0, sizeof *P);
	P->a = SP->a;
	P->what = SP->what;
	P->line = g->line;
	P->p = g->s;
	P->end = g->s + g->n;
	return next(P);
}

/* The first word of a block tag. */
static bool tag_is(const seg *g, const char *word)
{
	const char *p = g->s, *e = g->s + g->n;
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	size_t n = strlen(word);
	return (size_t)(e - p) >= n && !memcmp(p, word, n) &&
	       ((size_t)(e - p) == n || !((p[n] >= 'a' && p[n] <= 'z') || p[n] == '_'));
}

static int end_of_tag(tparser *P)
{
	if (P->cur.k != T_END)
		return perr(P, "unexpected '%.*s' at the end of a tag", (int)P->cur.n, P->cur.s);
	return 0;
}

static node *parse_body(sparser *SP, const char *const *stops, size_t *which);

/* {% if ... %} (P is at its keyword) */
static node *parse_if(sparser *SP, tparser P)
{
	node *n = mk(&P, N_IF), *cur = n;
	if (!n || next(&P) || !(n->a = parse_expr(&P)) || end_of_tag(&P))
		return NULL;
	for (;;) {
		static const char *const stops[] = {"elif", "else", "endif", NULL};
		size_t which = 0;
		if (!(cur->b = parse_body(SP, stops, &which)))
			return NULL;
		const seg *t = &SP->S->v[SP->i - 1];
		if (which == 2)
			return n;
		if (which == 1) {
			static const char *const end[] = {"endif", NULL};
			if (!(cur->c = parse_body(SP, end, &which)))
				return NULL;
			return n;
		}
		/* elif */
		node *e = mk(&P, N_IF);
		tparser Q;
		if (!e || tp_init(&Q, SP, t) || next(&Q) || !(e->a = parse_expr(&Q)) || end_of_tag(&Q))
			return NULL;
		cur->c = e;
		cur = e;
	}
}

/* {% for ... %} (P is at its keyword) */
static node *parse_for(sparser *SP, tparser P)
{
	node *n = mk(&P, N_FOR);
	if (!n || next(&P))
		return NULL;
	for (;;) {
		if (P.cur.k != T_NAME) {
			perr(&P, "expected a loop variable");
			return NULL;
		}
		char *name = tok_name(&P);
		if (!name || !grow(P.a, (void ***)&n->names, &n->capnames, n->nnames + 1, sizeof(char *)))
			return NULL;
		n->names[n->nnames++] = name;
		if (next(&P))
			return NULL;
		if (!is_op(&P, ","))
			break;
		if (next(&P))
			return NULL;
	}
	if (!is_name(&P, "in")) {
		perr(&P, "expected 'in' in a for loop");
		return NULL;
	}
	if (next(&P) || !(n->a = parse_or(&P)))
		return NULL;
	if (is_name(&P, "if") && (next(&P) || !(n->d = parse_expr(&P))))
		return NULL;
	if (is_name(&P, "recursive")) {
		perr(&P, "recursive loops are not supported");
		return NULL;
	}
	if (end_of_tag(&P))
		return NULL;
	static const char *const stops[] = {"else", "endfor", NULL};
	size_t which = 0;
	if (!(n->b = parse_body(SP, stops, &which)))
		return NULL;
	if (which == 0) {
		static const char *const end[] = {"endfor", NULL};
		if (!(n->c = parse_body(SP, end, &which)))
			return NULL;
	}
	return n;
}

/* {% set ... %} (P is at its keyword) */
static node *parse_set(sparser *SP, tparser P)
{
	if (next(&P) || P.cur.k != T_NAME) {
		perr(&P, "expected a name after 'set'");
		return NULL;
	}
	char *name = tok_name(&P);
	if (!name || next(&P))
		return NULL;
	char *attr = NULL;
	if (is_op(&P, ".")) {
		if (next(&P) || P.cur.k != T_NAME) {
			perr(&P, "expected an attribute name");
			return NULL;
		}
		attr = tok_name(&P);
		if (!attr || next(&P))
			return NULL;
	}
	if (is_op(&P, ",")) {
		perr(&P, "set with several targets is not supported");
		return NULL;
	}
	if (!is_op(&P, "=")) {
		if (attr || end_of_tag(&P))
			return attr ? (perr(&P, "expected '='"), NULL) : NULL;
		node *n = mk(&P, N_SETBLOCK);
		static const char *const end[] = {"endset", NULL};
		size_t which;
		if (!n || !(n->b = parse_body(SP, end, &which)))
			return NULL;
		n->s = name;
		return n;
	}
	node *n = mk(&P, N_SET);
	if (!n || next(&P) || !(n->b = parse_expr(&P)) || end_of_tag(&P))
		return NULL;
	if (attr) {
		node *obj = mk(&P, E_NAME);
		if (!obj)
			return NULL;
		obj->s = name;
		n->a = obj;
		n->s = attr;
	} else {
		n->s = name;
	}
	return n;
}

/* {% macro ... %} (P is at its keyword) */
static node *parse_macro(sparser *SP, tparser P)
{
	node *n = mk(&P, N_MACRO);
	if (!n || next(&P) || P.cur.k != T_NAME) {
		perr(&P, "expected a macro name");
		return NULL;
	}
	if (!(n->s = tok_name(&P)) || next(&P) || expect_op(&P, "("))
		return NULL;
	while (!is_op(&P, ")")) {
		if (P.cur.k != T_NAME) {
			perr(&P, "expected a parameter name");
			return NULL;
		}
		char *pname = tok_name(&P);
		node *dflt = NULL;
		if (!pname || next(&P))
			return NULL;
		if (is_op(&P, "=") && (next(&P) || !(dflt = parse_expr(&P))))
			return NULL;
		if (!add_kw(&P, n, pname, dflt))
			return NULL;
		if (is_op(&P, ",")) {
			if (next(&P))
				return NULL;
		} else if (!is_op(&P, ")")) {
			perr(&P, "expected ',' or ')' in the parameters");
			return NULL;
		}
	}
	if (next(&P) || end_of_tag(&P))
		return NULL;
	static const char *const end[] = {"endmacro", NULL};
	size_t which;
	if (!(n->b = parse_body(SP, end, &which)))
		return NULL;
	return n;
}

static node *parse_block(sparser *SP, const seg *g)
{
	tparser P;
	if (tp_init(&P, SP, g))
		return NULL;
	if (P.cur.k != T_NAME) {
		perr(&P, "expected a statement");
		return NULL;
	}
	if (is_name(&P, "if"))
		return parse_if(SP, P);

	if (is_name(&P, "for"))
		return parse_for(SP, P);

	if (is_name(&P, "set"))
		return parse_set(SP, P);

	if (is_name(&P, "macro"))
		return parse_macro(SP, P);

	if (is_name(&P, "break") || is_name(&P, "continue")) {
		node *n = mk(&P, is_name(&P, "break") ? N_BREAK : N_CONTINUE);
		return n && !next(&P) && !end_of_tag(&P) ? n : NULL;
	}
	if (is_name(&P, "generation")) {
		/* transformers' marker for assistant masks: rendered as is */
		static const char *const end[] = {"endgeneration", NULL};
		size_t which;
		if (next(&P) || end_of_tag(&P))
			return NULL;
		return parse_body(SP, end, &which);
	}
	perr(&P, "the statement '%.*s' is not supported", (int)P.cur.n, P.cur.s);
	return NULL;
}

/* Statements up to one of `stops` (consumed; *which says which), or to the
 * end when stops is NULL. */
static node *parse_body(sparser *SP, const char *const *stops, size_t *which)
{
	if (++SP->depth > MAX_DEPTH) {
		ev_error_set(EV_E_PARSE, "%s: blocks nested deeper than %d levels", SP->what, MAX_DEPTH);
		return NULL;
	}
	tparser P0 = {.a = SP->a, .what = SP->what};
	node *body = mk(&P0, N_BODY);
	if (!body)
		return NULL;
	int open_line = SP->i < SP->S->n ? SP->S->v[SP->i].line : 0;
	while (SP->i < SP->S->n) {
		const seg *g = &SP->S->v[SP->i++];
		P0.line = g->line;
		if (g->k == SEG_TEXT) {
			node *t = mk(&P0, N_TEXT);
			if (!t)
				return NULL;
			t->s = g->s;
			t->n = g->n;
			if (!add(&P0, body, t))
				return NULL;
			continue;
		}
		if (g->k == SEG_VAR) {
			tparser P;
			node *o = mk(&P0, N_OUT);
			if (!o || tp_init(&P, SP, g) || !(o->a = parse_expr(&P)) || end_of_tag(&P) || !add(&P0, body, o))
				return NULL;
			continue;
		}
		for (size_t k = 0; stops && stops[k]; k++) {
			if (tag_is(g, stops[k])) {
				*which = k;
				SP->depth--;
				if (strcmp(stops[k], "else") && strcmp(stops[k], "elif")) {
					tparser P;
					if (tp_init(&P, SP, g) || next(&P) || end_of_tag(&P))
						return NULL;
				} else if (!strcmp(stops[k], "else")) {
					tparser P;
					if (tp_init(&P, SP, g) || next(&P) || end_of_tag(&P))
						return NULL;
				}
				return body;
			}
		}
		static const char *const closers[] = {"endif", "endfor", "endset", "endmacro", "elif", "else",
						      "endgeneration", NULL};
		for (size_t k = 0; closers[k]; k++) {
			if (tag_is(g, closers[k])) {
				ev_error_set(EV_E_PARSE, "%s: line %d: '%s' without its opening statement", SP->what, g->line,
					     closers[k]);
				return NULL;
			}
		}
		node *st = parse_block(SP, g);
		if (!st || !add(&P0, body, st))
			return NULL;
	}
	if (stops) {
		ev_error_set(EV_E_PARSE, "%s: line %d: a block is never closed (expected '%s')", SP->what, open_line,
			     stops[0]);
		return NULL;
	}
	SP->depth--;
	return body;
}

int eng_jinja_compile(eng_jinja **out, const char *source, size_t len, const char *what)
{
	*out = NULL;
	if (len > ENG_JINJA_MAX_TEMPLATE)
		return ev_error_set(EV_E_LIMIT, "%s: %zu bytes, over the limit of %zu", what, len, ENG_JINJA_MAX_TEMPLATE);
	eng_jinja *t = calloc(1, sizeof *t);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_arena_new(&t->arena, ARENA_MAX);
	char *src = NULL;
	if (!rc && (!(t->what = ev_strdup(what ? what : "template")) ||
		    !(src = ev_arena_strndup(t->arena, source, len))))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	segs S = {t->arena, t->what, NULL, 0, 0};
	if (!rc)
		rc = lex(&S, src, len);
	if (!rc) {
		sparser SP = {t->arena, t->what, &S, 0, 0};
		size_t which;
		if (!(t->root = parse_body(&SP, NULL, &which)))
			rc = ev_error_code() ? ev_error_code() : EV_E_PARSE;
	}
	if (rc) {
		eng_jinja_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void eng_jinja_free(eng_jinja *t)
{
	if (!t)
		return;
	ev_arena_free(t->arena);
	free(t->what);
	free(t);
}

/* ---- evaluation ------------------------------------------------------------------------ */

typedef struct scope scope;
struct scope {
	const char **names;
	val **vals;
	size_t n, cap;
	scope *parent;
};

typedef struct {
	ev_arena *a;
	const char *what;
	scope *globals;
	long steps;
	int calls;
	int brk; /* 1 break, 2 continue */
	int line;
} env;

static int eerr(env *E, const char *fmt, ...) EV_PRINTF(2, 3);
static int eerr(env *E, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return ev_error_set(EV_E_INVALID, "%s: line %d: %s", E->what, E->line, msg);
}

static val *vstr(env *E, const char *s, size_t n)
{
	val *v = mkval(E->a, V_STR);
	char *c = v ? ev_arena_alloc(E->a, n + 1) : NULL;
	if (!c)
		return NULL;
	memcpy(c, s, n);
	c[n] = 0;
	v->s = c;
	v->n = n;
	return v;
}

static val *vint(env *E, long long i)
{
	val *v = mkval(E->a, V_INT);
	if (v)
		v->i = i;
	return v;
}

static val *vfloat(env *E, double f)
{
	val *v = mkval(E->a, V_FLOAT);
	if (v)
		v->f = f;
	return v;
}

static val *vbool(env *E, bool b)
{
	val *v = mkval(E->a, V_BOOL);
	if (v)
		v->b = b;
	return v;
}

static bool push_item(env *E, val *list, val *x)
{
	if (!grow(E->a, (void ***)&list->items, &list->cap, list->len + 1, sizeof(val *)))
		return false;
	list->items[list->len++] = x;
	return true;
}

/* Sets key in a dict (replacing, or appending in order). */
static bool dict_set(env *E, val *d, val *key, val *v)
{
	for (size_t i = 0; i < d->len; i++) {
		val *k = d->keys[i];
		if (k->k == key->k && k->k == V_STR && k->n == key->n && !memcmp(k->s, key->s, k->n)) {
			d->items[i] = v;
			return true;
		}
	}
	size_t cap = d->cap;
	if (!grow(E->a, (void ***)&d->items, &d->cap, d->len + 1, sizeof(val *)))
		return false;
	if (d->cap != cap || !d->keys) {
		val **nk = ev_arena_alloc(E->a, d->cap * sizeof *nk);
		if (!nk)
			return false;
		if (d->keys)
			memcpy(nk, d->keys, d->len * sizeof *nk);
		d->keys = nk;
	}
	d->keys[d->len] = key;
	d->items[d->len++] = v;
	return true;
}

static val *dict_get(const val *d, const char *key, size_t n)
{
	for (size_t i = 0; i < d->len; i++) {
		const val *k = d->keys[i];
		if (k->k == V_STR && k->n == n && !memcmp(k->s, key, n))
			return d->items[i];
	}
	return NULL;
}

/* JSON into values: numbers written as floats stay floats. */
static val *from_json(env *E, const cJSON *j)
{
	if (!j)
		return mkval(E->a, V_NONE);
	switch (j->type & 0xFF) {
	case cJSON_NULL: return mkval(E->a, V_NONE);
	case cJSON_False: return vbool(E, false);
	case cJSON_True: return vbool(E, true);
	case cJSON_Number:
		if ((j->type & EV_JSON_FLOAT_FORM) || j->valuedouble != floor(j->valuedouble) ||
		    fabs(j->valuedouble) >= 9.2e18)
			return vfloat(E, j->valuedouble);
		return vint(E, (long long)j->valuedouble);
	case cJSON_String: return vstr(E, j->valuestring, strlen(j->valuestring));
	case cJSON_Array: {
		val *l = mkval(E->a, V_LIST);
		for (const cJSON *c = j->child; l && c; c = c->next) {
			val *x = from_json(E, c);
			if (!x || !push_item(E, l, x))
				return NULL;
		}
		return l;
	}
	case cJSON_Object: {
		val *d = mkval(E->a, V_DICT);
		for (const cJSON *c = j->child; d && c; c = c->next) {
			val *k = vstr(E, c->string, strlen(c->string)), *x = from_json(E, c);
			if (!k || !x || !dict_set(E, d, k, x))
				return NULL;
		}
		return d;
	}
	default: return mkval(E->a, V_NONE);
	}
}

/* ---- Python's str(), repr() and json.dumps ------------------------------------------ */

/* Python's repr of a float: the shortest digits that read back the same,
 * in fixed notation for exponents -4..15, else with "e+XX". */
static void float_repr(ev_buf *b, double f)
{
	if (isnan(f)) {
		ev_buf_puts(b, "nan");
		return;
	}
	if (isinf(f)) {
		ev_buf_puts(b, f < 0 ? "-inf" : "inf");
		return;
	}
	char e[40];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	/* digits and exponent from the %e form */
	char digits[24];
	size_t nd = 0;
	const char *p = e;
	bool neg = *p == '-';
	if (neg)
		p++;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	int exp = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	if (neg)
		ev_buf_putc(b, '-');
	if (exp >= -5 && exp < 16) {
		if (exp < 0) {
			ev_buf_puts(b, "0.");
			for (int k = 0; k < -exp - 1; k++)
				ev_buf_putc(b, '0');
			ev_buf_puts(b, digits);
		} else {
			for (int k = 0; k <= exp; k++)
				ev_buf_putc(b, (size_t)k < nd ? digits[k] : '0');
			ev_buf_putc(b, '.');
			if ((size_t)exp + 1 < nd)
				ev_buf_puts(b, digits + exp + 1);
			else
				ev_buf_putc(b, '0');
		}
	} else {
		ev_buf_putc(b, digits[0]);
		if (nd > 1) {
			ev_buf_putc(b, '.');
			ev_buf_puts(b, digits + 1);
		}
		ev_buf_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	}
}

static void str_repr(ev_buf *b, const char *s, size_t n)
{
	bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
	char q = has_sq && !has_dq ? '"' : '\'';
	ev_buf_putc(b, q);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == (unsigned char)q) {
			ev_buf_putc(b, '\\');
			ev_buf_putc(b, (char)c);
		} else if (c == '\n') {
			ev_buf_puts(b, "\\n");
		} else if (c == '\r') {
			ev_buf_puts(b, "\\r");
		} else if (c == '\t') {
			ev_buf_puts(b, "\\t");
		} else if (c < 0x20 || c == 0x7f) {
			ev_buf_printf(b, "\\x%02x", c);
		} else {
			ev_buf_putc(b, (char)c);
		}
	}
	ev_buf_putc(b, q);
}

static void to_str(ev_buf *b, const val *v, bool repr)
{
	switch (v->k) {
	case V_UNDEF: break;
	case V_NONE: ev_buf_puts(b, "None"); break;
	case V_BOOL: ev_buf_puts(b, v->b ? "True" : "False"); break;
	case V_INT: ev_buf_printf(b, "%lld", v->i); break;
	case V_FLOAT: float_repr(b, v->f); break;
	case V_STR:
		if (repr)
			str_repr(b, v->s, v->n);
		else
			ev_buf_append(b, v->s, v->n);
		break;
	case V_LIST:
		ev_buf_putc(b, '[');
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				ev_buf_puts(b, ", ");
			to_str(b, v->items[i], true);
		}
		ev_buf_putc(b, ']');
		break;
	case V_DICT:
		if (v->ns) {
			ev_buf_puts(b, "<Namespace>");
			break;
		}
		ev_buf_putc(b, '{');
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				ev_buf_puts(b, ", ");
			to_str(b, v->keys[i], true);
			ev_buf_puts(b, ": ");
			to_str(b, v->items[i], true);
		}
		ev_buf_putc(b, '}');
		break;
	case V_MACRO: ev_buf_puts(b, "<Macro>"); break;
	case V_FUNC: ev_buf_printf(b, "<built-in function %s>", v->s); break;
	}
}

typedef struct {
	int indent; /* < 0: none */
	bool ensure_ascii, sort_keys;
	const char *item_sep, *key_sep;
} json_opts;

static void json_str(ev_buf *b, const char *s, size_t n, bool ascii)
{
	ev_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': ev_buf_puts(b, "\\\""); break;
		case '\\': ev_buf_puts(b, "\\\\"); break;
		case '\n': ev_buf_puts(b, "\\n"); break;
		case '\r': ev_buf_puts(b, "\\r"); break;
		case '\t': ev_buf_puts(b, "\\t"); break;
		case '\b': ev_buf_puts(b, "\\b"); break;
		case '\f': ev_buf_puts(b, "\\f"); break;
		default:
			if (c < 0x20) {
				ev_buf_printf(b, "\\u%04x", c);
			} else if (c >= 0x80 && ascii) {
				/* one UTF-8 sequence as \uXXXX (surrogates past the BMP) */
				uint32_t cp = 0;
				size_t len = ev_utf8_next(s + i, n - i, &cp);
				if (!len) {
					ev_buf_printf(b, "\\u%04x", c);
					break;
				}
				i += len - 1;
				if (cp >= 0x10000) {
					cp -= 0x10000;
					ev_buf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
				} else {
					ev_buf_printf(b, "\\u%04x", cp);
				}
			} else {
				ev_buf_putc(b, (char)c);
			}
		}
	}
	ev_buf_putc(b, '"');
}

static int cmp_keys(const void *a, const void *b, void *ctx)
{
	(void)ctx;
	const val *x = *(val *const *)a, *y = *(val *const *)b;
	size_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->s, y->s, n);
	return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int to_json(env *E, ev_buf *b, const val *v, const json_opts *o, int level)
{
	if (level > MAX_DEPTH)
		return eerr(E, "tojson: nested deeper than %d levels", MAX_DEPTH);
	switch (v->k) {
	case V_UNDEF:
	case V_NONE: ev_buf_puts(b, "null"); return 0;
	case V_BOOL: ev_buf_puts(b, v->b ? "true" : "false"); return 0;
	case V_INT: ev_buf_printf(b, "%lld", v->i); return 0;
	case V_FLOAT:
		if (isnan(v->f))
			ev_buf_puts(b, "NaN");
		else if (isinf(v->f))
			ev_buf_puts(b, v->f < 0 ? "-Infinity" : "Infinity");
		else
			float_repr(b, v->f);
		return 0;
	case V_STR: json_str(b, v->s, v->n, o->ensure_ascii); return 0;
	case V_LIST:
	case V_DICT: {
		bool dict = v->k == V_DICT;
		if (!v->len) {
			ev_buf_puts(b, dict ? "{}" : "[]");
			return 0;
		}
		val **keys = v->keys;
		if (dict && o->sort_keys) {
			keys = ev_arena_alloc(E->a, v->len * sizeof *keys);
			if (!keys)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			memcpy(keys, v->keys, v->len * sizeof *keys);
			for (size_t i = 0; i < v->len; i++)
				if (keys[i]->k != V_STR)
					return eerr(E, "tojson: sort_keys needs string keys");
			qsort_r(keys, v->len, sizeof *keys, cmp_keys, NULL);
		}
		ev_buf_putc(b, dict ? '{' : '[');
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				ev_buf_puts(b, o->item_sep);
			if (o->indent >= 0) {
				ev_buf_putc(b, '\n');
				for (int k = 0; k < o->indent * (level + 1); k++)
					ev_buf_putc(b, ' ');
			}
			if (dict) {
				const val *k = keys[i];
				const val *x = o->sort_keys ? dict_get(v, k->s, k->n) : v->items[i];
				if (k->k == V_STR) {
					json_str(b, k->s, k->n, o->ensure_ascii);
				} else if (k->k == V_INT || k->k == V_FLOAT || k->k == V_BOOL || k->k == V_NONE) {
					ev_buf_putc(b, '"');
					int rc = to_json(E, b, k, o, level + 1);
					if (rc)
						return rc;
					ev_buf_putc(b, '"');
				} else {
					return eerr(E, "tojson: keys must be strings");
				}
				ev_buf_puts(b, o->key_sep);
				int rc = to_json(E, b, x, o, level + 1);
				if (rc)
					return rc;
			} else {
				int rc = to_json(E, b, v->items[i], o, level + 1);
				if (rc)
					return rc;
			}
		}
		if (o->indent >= 0) {
			ev_buf_putc(b, '\n');
			for (int k = 0; k < o->indent * level; k++)
				ev_buf_putc(b, ' ');
		}
		ev_buf_putc(b, dict ? '}' : ']');
		return 0;
	}
	default: return eerr(E, "tojson: a %s is not JSON", v->k == V_MACRO ? "macro" : "function");
	}
}

/* ---- semantics ------------------------------------------------------------------------ */

static const char *kind_name(vkind k)
{
	static const char *const names[] = {"undefined", "none", "bool", "int", "float", "str", "list", "dict",
					    "macro", "function"};
	return names[k];
}

static bool truthy(const val *v)
{
	switch (v->k) {
	case V_UNDEF:
	case V_NONE: return false;
	case V_BOOL: return v->b;
	case V_INT: return v->i != 0;
	case V_FLOAT: return v->f != 0;
	case V_STR: return v->n > 0;
	case V_LIST:
	case V_DICT: return v->ns || v->len > 0;
	default: return true;
	}
}

static bool numeric(const val *v) { return v->k == V_INT || v->k == V_FLOAT || v->k == V_BOOL; }

static double num(const val *v) { return v->k == V_FLOAT ? v->f : v->k == V_INT ? (double)v->i : v->b ? 1.0 : 0.0; }

static bool equal(const val *x, const val *y)
{
	if (numeric(x) && numeric(y))
		return num(x) == num(y);
	if ((x->k == V_NONE || x->k == V_UNDEF) && (y->k == V_NONE || y->k == V_UNDEF))
		return x->k == y->k;
	if (x->k != y->k)
		return false;
	switch (x->k) {
	case V_STR: return x->n == y->n && !memcmp(x->s, y->s, x->n);
	case V_LIST:
		if (x->len != y->len)
			return false;
		for (size_t i = 0; i < x->len; i++)
			if (!equal(x->items[i], y->items[i]))
				return false;
		return true;
	case V_DICT:
		if (x->len != y->len)
			return false;
		for (size_t i = 0; i < x->len; i++) {
			const val *o = x->keys[i]->k == V_STR ? dict_get(y, x->keys[i]->s, x->keys[i]->n) : NULL;
			if (!o || !equal(x->items[i], o))
				return false;
		}
		return true;
	default: return x == y;
	}
}

/* -1, 0, 1; *ok false when the two cannot be ordered. */
static int compare(const val *x, const val *y, bool *ok)
{
	*ok = true;
	if (numeric(x) && numeric(y))
		return (num(x) > num(y)) - (num(x) < num(y));
	if (x->k == V_STR && y->k == V_STR) {
		size_t n = x->n < y->n ? x->n : y->n;
		int c = memcmp(x->s, y->s, n);
		return c ? (c > 0) - (c < 0) : (x->n > y->n) - (x->n < y->n);
	}
	if (x->k == V_LIST && y->k == V_LIST) {
		for (size_t i = 0; i < x->len && i < y->len; i++) {
			int c = compare(x->items[i], y->items[i], ok);
			if (!*ok || c)
				return c;
		}
		return (x->len > y->len) - (x->len < y->len);
	}
	*ok = false;
	return 0;
}

/* The items a for loop (or a filter) walks. */
static val *iterable(env *E, val *v)
{
	if (v->k == V_LIST)
		return v;
	val *l = mkval(E->a, V_LIST);
	if (!l)
		return NULL;
	if (v->k == V_UNDEF)
		return l;
	if (v->k == V_DICT) {
		for (size_t i = 0; i < v->len; i++)
			if (!push_item(E, l, v->keys[i]))
				return NULL;
		return l;
	}
	if (v->k == V_STR) {
		for (size_t i = 0; i < v->n;) {
			size_t k = 1;
			unsigned char c = (unsigned char)v->s[i];
			if (c >= 0xC0)
				k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
			if (i + k > v->n)
				k = v->n - i;
			val *ch = vstr(E, v->s + i, k);
			if (!ch || !push_item(E, l, ch))
				return NULL;
			i += k;
		}
		return l;
	}
	eerr(E, "a %s is not iterable", kind_name(v->k));
	return NULL;
}

static long long length(const val *v)
{
	if (v->k == V_STR) {
		long long n = 0;
		for (size_t i = 0; i < v->n; i++)
			n += ((unsigned char)v->s[i] & 0xC0) != 0x80;
		return n;
	}
	return v->k == V_LIST || v->k == V_DICT ? (long long)v->len : 0;
}

/* ---- scopes ----------------------------------------------------------------------------- */

static scope *scope_new(env *E, scope *parent)
{
	scope *s = zalloc(E->a, sizeof *s);
	if (s)
		s->parent = parent;
	return s;
}

static bool scope_set(env *E, scope *s, const char *name, val *v)
{
	for (size_t i = 0; i < s->n; i++) {
		if (!strcmp(s->names[i], name)) {
			s->vals[i] = v;
			return true;
		}
	}
	size_t cap = s->cap;
	if (!grow(E->a, (void ***)&s->names, &s->cap, s->n + 1, sizeof(char *)))
		return false;
	if (s->cap != cap || !s->vals) {
		val **nv = ev_arena_alloc(E->a, s->cap * sizeof *nv);
		if (!nv)
			return false;
		if (s->vals)
			memcpy(nv, s->vals, s->n * sizeof *nv);
		s->vals = nv;
	}
	s->names[s->n] = name;
	s->vals[s->n++] = v;
	return true;
}

static val *lookup(env *E, scope *s, const char *name)
{
	for (; s; s = s->parent)
		for (size_t i = s->n; i-- > 0;)
			if (!strcmp(s->names[i], name))
				return s->vals[i];
	static const char *const globals[] = {"raise_exception", "strftime_now", "range", "namespace", "dict", NULL};
	for (size_t i = 0; globals[i]; i++) {
		if (!strcmp(name, globals[i])) {
			val *f = mkval(E->a, V_FUNC);
			if (f)
				f->s = globals[i];
			return f;
		}
	}
	val *u = mkval(E->a, V_UNDEF);
	if (u)
		u->s = name;
	return u;
}

/* ---- expressions --------------------------------------------------------------------- */

typedef struct {
	val **pos;
	size_t npos;
	const char **names;
	val **kw;
	size_t nkw;
} args;

static val *eval(env *E, scope *s, const node *n);
static int render(env *E, scope *s, const node *n, ev_buf *out);

static int eval_args(env *E, scope *s, const node *n, args *A)
{
	memset(A, 0, sizeof *A);
	if (n->nlist) {
		A->pos = ev_arena_alloc(E->a, n->nlist * sizeof *A->pos);
		if (!A->pos)
			return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < n->nlist; i++)
		if (!(A->pos[A->npos++] = eval(E, s, n->list[i])))
			return ev_error_code();
	if (n->nnames) {
		A->kw = ev_arena_alloc(E->a, n->nnames * sizeof *A->kw);
		if (!A->kw)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		A->names = n->names;
	}
	for (size_t i = 0; i < n->nnames; i++)
		if (!(A->kw[A->nkw++] = eval(E, s, n->list2[i])))
			return ev_error_code();
	return 0;
}

/* The argument at position `pos` or named `name`, else NULL. */
static val *arg(const args *A, size_t pos, const char *name)
{
	if (pos < A->npos)
		return A->pos[pos];
	for (size_t i = 0; name && i < A->nkw; i++)
		if (!strcmp(A->names[i], name))
			return A->kw[i];
	return NULL;
}

static val *need_str(env *E, val *v, const char *what)
{
	if (!v || v->k != V_STR) {
		eerr(E, "%s: expected a string, got %s", what, v ? kind_name(v->k) : "nothing");
		return NULL;
	}
	return v;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's str.strip family (chars NULL: whitespace). */
static val *strip(env *E, val *v, val *chars, bool left, bool right)
{
	size_t a = 0, b = v->n;
	while (a < b && (chars ? memchr(chars->s, v->s[a], chars->n) != NULL : is_space(v->s[a])) && left)
		a++;
	while (b > a && (chars ? memchr(chars->s, v->s[b - 1], chars->n) != NULL : is_space(v->s[b - 1])) && right)
		b--;
	return vstr(E, v->s + a, b - a);
}

static val *replace(env *E, val *v, val *from, val *to, long long count)
{
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	size_t i = 0;
	long long done = 0;
	if (!from->n) { /* Python inserts between every character */
		for (; i < v->n; i++) {
			if (count < 0 || done < count) {
				ev_buf_append(&b, to->s, to->n);
				done++;
			}
			ev_buf_append(&b, v->s + i, 1);
		}
		if (count < 0 || done < count)
			ev_buf_append(&b, to->s, to->n);
	} else {
		while (i < v->n) {
			if ((count < 0 || done < count) && i + from->n <= v->n && !memcmp(v->s + i, from->s, from->n)) {
				ev_buf_append(&b, to->s, to->n);
				i += from->n;
				done++;
			} else {
				ev_buf_append(&b, v->s + i, 1);
				i++;
			}
		}
	}
	val *r = vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	return r;
}

static val *case_map(env *E, val *v, int how) /* 0 lower, 1 upper, 2 title, 3 capitalize */
{
	val *r = vstr(E, v->s, v->n);
	if (!r)
		return NULL;
	char *s = (char *)r->s;
	bool start = true;
	for (size_t i = 0; i < r->n; i++) {
		char c = s[i];
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
		if (how == 0 || (how == 3 && i > 0) || (how == 2 && !start))
			s[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		else if (how == 1 || how == 2 || how == 3)
			s[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
		if (how == 2)
			start = !alpha;
	}
	return r;
}

static val *split(env *E, val *v, val *sep, long long maxsplit)
{
	val *l = mkval(E->a, V_LIST);
	if (!l)
		return NULL;
	size_t i = 0;
	long long done = 0;
	if (!sep || sep->k == V_NONE) {
		for (;;) {
			while (i < v->n && is_space(v->s[i]))
				i++;
			if (i >= v->n)
				break;
			size_t j = i;
			if (maxsplit >= 0 && done >= maxsplit) {
				size_t e = v->n;
				while (e > i && is_space(v->s[e - 1]))
					e--;
				val *w = vstr(E, v->s + i, e - i);
				return w && push_item(E, l, w) ? l : NULL;
			}
			while (j < v->n && !is_space(v->s[j]))
				j++;
			val *w = vstr(E, v->s + i, j - i);
			if (!w || !push_item(E, l, w))
				return NULL;
			done++;
			i = j;
		}
		return l;
	}
	if (!sep->n) {
		eerr(E, "split: empty separator");
		return NULL;
	}
	size_t start = 0;
	while (i + sep->n <= v->n && (maxsplit < 0 || done < maxsplit)) {
		if (!memcmp(v->s + i, sep->s, sep->n)) {
			val *w = vstr(E, v->s + start, i - start);
			if (!w || !push_item(E, l, w))
				return NULL;
			i += sep->n;
			start = i;
			done++;
		} else {
			i++;
		}
	}
	val *w = vstr(E, v->s + start, v->n - start);
	return w && push_item(E, l, w) ? l : NULL;
}

static bool starts_or_ends(val *v, val *x, bool end)
{
	if (x->k == V_LIST) {
		for (size_t i = 0; i < x->len; i++)
			if (x->items[i]->k == V_STR && starts_or_ends(v, x->items[i], end))
				return true;
		return false;
	}
	if (x->k != V_STR || x->n > v->n)
		return false;
	return !memcmp(end ? v->s + v->n - x->n : v->s, x->s, x->n);
}

static val *join(env *E, val *seq, val *sep, val *attr)
{
	val *l = iterable(E, seq);
	if (!l)
		return NULL;
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	for (size_t i = 0; i < l->len; i++) {
		if (i && sep)
			to_str(&b, sep, false);
		val *x = l->items[i];
		if (attr && x->k == V_DICT && attr->k == V_STR) {
			x = dict_get(x, attr->s, attr->n);
			if (!x)
				continue;
		}
		to_str(&b, x, false);
	}
	val *r = vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	return r;
}

static val *call_test(env *E, const char *name, val *v, const args *A);
static val *call_filter(env *E, scope *s, const char *name, val *v, const args *A);

/* A method of a string, dict or list. */
static val *call_method(env *E, val *self, const char *name, const args *A)
{
	if (self->k == V_STR) {
		if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
			val *chars = arg(A, 0, "chars");
			if (chars && chars->k == V_NONE)
				chars = NULL;
			if (chars && !need_str(E, chars, name))
				return NULL;
			return strip(E, self, chars, name[0] != 'r', name[0] != 'l');
		}
		if (!strcmp(name, "split")) {
			val *mx = arg(A, 1, "maxsplit");
			return split(E, self, arg(A, 0, "sep"), mx && mx->k == V_INT ? mx->i : -1);
		}
		if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
			val *x = arg(A, 0, "prefix");
			if (!x)
				return eerr(E, "%s: needs an argument", name), NULL;
			return vbool(E, starts_or_ends(self, x, name[0] == 'e'));
		}
		if (!strcmp(name, "upper"))
			return case_map(E, self, 1);
		if (!strcmp(name, "lower"))
			return case_map(E, self, 0);
		if (!strcmp(name, "title"))
			return case_map(E, self, 2);
		if (!strcmp(name, "capitalize"))
			return case_map(E, self, 3);
		if (!strcmp(name, "replace")) {
			val *a = need_str(E, arg(A, 0, "old"), "replace"), *b = a ? need_str(E, arg(A, 1, "new"), "replace") : NULL;
			val *c = arg(A, 2, "count");
			return b ? replace(E, self, a, b, c && c->k == V_INT ? c->i : -1) : NULL;
		}
		if (!strcmp(name, "find") || !strcmp(name, "count") || !strcmp(name, "index")) {
			val *x = need_str(E, arg(A, 0, "sub"), name);
			if (!x)
				return NULL;
			long long found = -1, count = 0;
			for (size_t i = 0; i + x->n <= self->n; i++) {
				if (!memcmp(self->s + i, x->s, x->n)) {
					if (found < 0)
						found = (long long)i;
					count++;
					if (x->n)
						i += x->n - 1;
				}
			}
			if (!strcmp(name, "index") && found < 0)
				return eerr(E, "index: substring not found"), NULL;
			return vint(E, name[0] == 'c' ? count : found);
		}
		if (!strcmp(name, "join")) {
			val *seq = arg(A, 0, "iterable");
			return seq ? join(E, seq, self, NULL) : (eerr(E, "join: needs an iterable"), NULL);
		}
		if (!strcmp(name, "isdigit") || !strcmp(name, "isspace") || !strcmp(name, "isalpha")) {
			bool ok = self->n > 0;
			for (size_t i = 0; i < self->n && ok; i++) {
				char c = self->s[i];
				ok = name[2] == 'd' ? (c >= '0' && c <= '9') : name[2] == 's' ? is_space(c)
				   : ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
			}
			return vbool(E, ok);
		}
	} else if (self->k == V_DICT) {
		if (!strcmp(name, "items") || !strcmp(name, "keys") || !strcmp(name, "values")) {
			val *l = mkval(E->a, V_LIST);
			for (size_t i = 0; l && i < self->len; i++) {
				val *x;
				if (name[0] == 'i') {
					x = mkval(E->a, V_LIST);
					if (!x || !push_item(E, x, self->keys[i]) || !push_item(E, x, self->items[i]))
						return NULL;
				} else {
					x = name[0] == 'k' ? self->keys[i] : self->items[i];
				}
				if (!push_item(E, l, x))
					return NULL;
			}
			return l;
		}
		if (!strcmp(name, "get")) {
			val *k = arg(A, 0, "key"), *d = arg(A, 1, "default");
			val *x = k && k->k == V_STR ? dict_get(self, k->s, k->n) : NULL;
			return x ? x : d ? d : mkval(E->a, V_NONE);
		}
	} else if (self->k == V_LIST) {
		if (!strcmp(name, "append") || !strcmp(name, "extend") || !strcmp(name, "pop") ||
		    !strcmp(name, "insert") || !strcmp(name, "remove"))
			return eerr(E, "a list cannot be changed inside a chat template (%s: transformers' sandbox refuses "
				       "it too)", name), NULL;
		if (!strcmp(name, "index") || !strcmp(name, "count")) {
			val *x = arg(A, 0, "value");
			long long c = 0, at = -1;
			for (size_t i = 0; x && i < self->len; i++)
				if (equal(self->items[i], x)) {
					if (at < 0)
						at = (long long)i;
					c++;
				}
			if (name[0] == 'i' && at < 0)
				return eerr(E, "index: value not in the list"), NULL;
			return vint(E, name[0] == 'c' ? c : at);
		}
	}
	eerr(E, "a %s has no method '%s'", kind_name(self->k), name);
	return NULL;
}

static val *call_global(env *E, const char *name, const args *A)
{
	if (!strcmp(name, "raise_exception")) {
		ev_buf b = EV_BUF_INIT(4096);
		val *m = arg(A, 0, "message");
		if (m)
			to_str(&b, m, false);
		ev_error_set(EV_E_INVALID, "%s: the template raised an exception: %s", E->what, b.data ? b.data : "");
		ev_buf_free(&b);
		return NULL;
	}
	if (!strcmp(name, "strftime_now")) {
		val *f = need_str(E, arg(A, 0, "format"), "strftime_now");
		if (!f)
			return NULL;
		char out[256];
		/* the clock, unless EVALD_TEMPLATE_NOW pins it (seconds since the
		 * epoch): a run whose template prints today's date then renders the
		 * same prompts on any day */
		time_t now = time(NULL);
		const char *pin = getenv("EVALD_TEMPLATE_NOW");
		char *pend = NULL;
		long long pv = pin && *pin ? strtoll(pin, &pend, 10) : 0;
		if (pin && *pin && pend && !*pend && pv >= 0)
			now = (time_t)pv;
		struct tm tmv;
		localtime_r(&now, &tmv);
		/* the template's own format, as Python's strftime takes it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		size_t n = strftime(out, sizeof out, f->s, &tmv);
#pragma GCC diagnostic pop
		return vstr(E, out, n);
	}
	if (!strcmp(name, "range")) {
		long long a = 0, b = 0, st = 1;
		for (size_t i = 0; i < A->npos; i++)
			if (A->pos[i]->k != V_INT)
				return eerr(E, "range: expected integers"), NULL;
		if (A->npos == 1)
			b = A->pos[0]->i;
		else if (A->npos >= 2)
			a = A->pos[0]->i, b = A->pos[1]->i;
		if (A->npos >= 3)
			st = A->pos[2]->i;
		if (!st || A->npos == 0 || A->npos > 3)
			return eerr(E, "range: expected 1 to 3 integers, the step not 0"), NULL;
		val *l = mkval(E->a, V_LIST);
		for (long long x = a; l && (st > 0 ? x < b : x > b); x += st) {
			if (++E->steps > ENG_JINJA_MAX_STEPS)
				return eerr(E, "more than %ld steps", ENG_JINJA_MAX_STEPS), NULL;
			val *v = vint(E, x);
			if (!v || !push_item(E, l, v))
				return NULL;
		}
		return l;
	}
	if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
		val *d = mkval(E->a, V_DICT);
		if (!d)
			return NULL;
		d->ns = name[0] == 'n';
		if (A->npos && A->pos[0]->k == V_DICT) {
			for (size_t i = 0; i < A->pos[0]->len; i++)
				if (!dict_set(E, d, A->pos[0]->keys[i], A->pos[0]->items[i]))
					return NULL;
		}
		for (size_t i = 0; i < A->nkw; i++) {
			val *k = vstr(E, A->names[i], strlen(A->names[i]));
			if (!k || !dict_set(E, d, k, A->kw[i]))
				return NULL;
		}
		return d;
	}
	eerr(E, "unknown function '%s'", name);
	return NULL;
}

static val *call_macro(env *E, const node *m, const args *A)
{
	if (++E->calls > MAX_CALL_DEPTH) {
		eerr(E, "macro calls nested deeper than %d", MAX_CALL_DEPTH);
		return NULL;
	}
	if (++E->steps > ENG_JINJA_MAX_STEPS)
		return eerr(E, "more than %ld steps", ENG_JINJA_MAX_STEPS), NULL;
	scope *s = scope_new(E, E->globals);
	if (!s)
		return NULL;
	if (A->npos > m->nnames)
		return eerr(E, "macro '%s' takes %zu arguments, got %zu", m->s, m->nnames, A->npos), NULL;
	for (size_t i = 0; i < m->nnames; i++) {
		val *v = arg(A, i, m->names[i]);
		if (!v)
			v = m->list2[i] ? eval(E, s, m->list2[i]) : lookup(E, NULL, m->names[i]);
		if (!v || !scope_set(E, s, m->names[i], v))
			return NULL;
	}
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	int saved_brk = E->brk;
	int rc = render(E, s, m->b, &b);
	E->brk = saved_brk;
	E->calls--;
	val *r = rc ? NULL : vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	return r;
}

static val *getattr_(env *E, val *obj, const char *name)
{
	if (obj->k == V_UNDEF) {
		eerr(E, "'%s' is undefined (reading .%s)", obj->s ? obj->s : "a value", name);
		return NULL;
	}
	if (obj->k == V_DICT) {
		val *x = dict_get(obj, name, strlen(name));
		if (x)
			return x;
	}
	if (obj->k == V_STR || obj->k == V_DICT || obj->k == V_LIST) {
		static const char *const methods[] = {
			"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower", "title",
			"capitalize", "replace", "find", "count", "index", "join", "isdigit", "isspace", "isalpha",
			"items", "keys", "values", "get", "append", "extend", "pop", "insert", "remove", NULL};
		for (size_t i = 0; methods[i]; i++) {
			if (!strcmp(name, methods[i])) {
				val *f = mkval(E->a, V_FUNC);
				if (f) {
					f->s = methods[i];
					f->self = obj;
				}
				return f;
			}
		}
	}
	val *u = mkval(E->a, V_UNDEF);
	if (u)
		u->s = name;
	return u;
}

static val *getitem(env *E, val *obj, val *key)
{
	if (obj->k == V_UNDEF) {
		eerr(E, "'%s' is undefined (reading an item)", obj->s ? obj->s : "a value");
		return NULL;
	}
	if (obj->k == V_DICT) {
		val *x = NULL;
		if (key->k == V_STR)
			x = dict_get(obj, key->s, key->n);
		else
			for (size_t i = 0; i < obj->len && !x; i++)
				if (equal(obj->keys[i], key))
					x = obj->items[i];
		if (x)
			return x;
		val *u = mkval(E->a, V_UNDEF);
		if (u)
			u->s = key->k == V_STR ? key->s : "item";
		return u;
	}
	if ((obj->k == V_LIST || obj->k == V_STR) && (key->k == V_INT || key->k == V_BOOL)) {
		val *l = obj->k == V_LIST ? obj : iterable(E, obj);
		if (!l)
			return NULL;
		long long i = key->k == V_INT ? key->i : key->b;
		if (i < 0)
			i += (long long)l->len;
		if (i < 0 || i >= (long long)l->len) {
			val *u = mkval(E->a, V_UNDEF);
			if (u)
				u->s = "index out of range";
			return u;
		}
		return l->items[i];
	}
	if (key->k == V_STR)
		return getattr_(E, obj, key->s);
	val *u = mkval(E->a, V_UNDEF);
	if (u)
		u->s = "item";
	return u;
}

static val *slice(env *E, val *obj, val *a, val *b, val *c)
{
	val *l = obj->k == V_LIST ? obj : obj->k == V_STR ? iterable(E, obj) : NULL;
	if (!l)
		return eerr(E, "cannot slice a %s", kind_name(obj->k)), NULL;
	long long n = (long long)l->len, step = c && c->k == V_INT ? c->i : 1;
	if (!step)
		return eerr(E, "slice step cannot be zero"), NULL;
	long long lo, hi;
	if (step > 0) {
		lo = a && a->k == V_INT ? a->i : 0;
		hi = b && b->k == V_INT ? b->i : n;
		if (lo < 0)
			lo += n;
		if (hi < 0)
			hi += n;
		lo = lo < 0 ? 0 : lo > n ? n : lo;
		hi = hi < 0 ? 0 : hi > n ? n : hi;
	} else {
		lo = a && a->k == V_INT ? a->i : n - 1;
		hi = b && b->k == V_INT ? b->i : -n - 1;
		if (lo < 0)
			lo += n;
		if (hi < 0)
			hi += n;
		lo = lo < -1 ? -1 : lo > n - 1 ? n - 1 : lo;
		hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
	}
	val *r = mkval(E->a, V_LIST);
	for (long long i = lo; r && (step > 0 ? i < hi : i > hi); i += step)
		if (!push_item(E, r, l->items[i]))
			return NULL;
	if (r && obj->k == V_STR)
		return join(E, r, NULL, NULL);
	return r;
}

static val *arith(env *E, const char *op, val *x, val *y)
{
	if (!strcmp(op, "~")) {
		ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
		to_str(&b, x, false);
		to_str(&b, y, false);
		val *r = vstr(E, b.data ? b.data : "", b.len);
		ev_buf_free(&b);
		return r;
	}
	if (!strcmp(op, "+") && x->k == V_STR && y->k == V_STR) {
		val *r = mkval(E->a, V_STR);
		char *s = r ? ev_arena_alloc(E->a, x->n + y->n + 1) : NULL;
		if (!s)
			return NULL;
		memcpy(s, x->s, x->n);
		memcpy(s + x->n, y->s, y->n);
		s[x->n + y->n] = 0;
		r->s = s;
		r->n = x->n + y->n;
		return r;
	}
	if (!strcmp(op, "+") && x->k == V_LIST && y->k == V_LIST) {
		val *r = mkval(E->a, V_LIST);
		for (size_t i = 0; r && i < x->len; i++)
			if (!push_item(E, r, x->items[i]))
				return NULL;
		for (size_t i = 0; r && i < y->len; i++)
			if (!push_item(E, r, y->items[i]))
				return NULL;
		return r;
	}
	if (!strcmp(op, "*") && ((x->k == V_STR && y->k == V_INT) || (x->k == V_INT && y->k == V_STR))) {
		val *str = x->k == V_STR ? x : y;
		long long times = x->k == V_INT ? x->i : y->i;
		ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
		for (long long i = 0; i < times; i++)
			if (ev_buf_append(&b, str->s, str->n))
				break;
		val *r = vstr(E, b.data ? b.data : "", b.len);
		ev_buf_free(&b);
		return r;
	}
	if (!numeric(x) || !numeric(y))
		return eerr(E, "unsupported operand types for %s: %s and %s", op, kind_name(x->k), kind_name(y->k)), NULL;
	bool ints = x->k != V_FLOAT && y->k != V_FLOAT;
	long long a = x->k == V_INT ? x->i : x->b, b = y->k == V_INT ? y->i : y->b;
	double fa = num(x), fb = num(y);
	switch (op[0]) {
	case '+': return ints ? vint(E, a + b) : vfloat(E, fa + fb);
	case '-': return ints ? vint(E, a - b) : vfloat(E, fa - fb);
	case '*':
		if (op[1] == '*')
			return ints && b >= 0 ? vint(E, (long long)pow((double)a, (double)b)) : vfloat(E, pow(fa, fb));
		return ints ? vint(E, a * b) : vfloat(E, fa * fb);
	case '/':
		if (fb == 0)
			return eerr(E, "division by zero"), NULL;
		if (op[1] == '/') {
			if (ints) {
				long long q = a / b;
				if ((a % b) && ((a < 0) != (b < 0)))
					q--;
				return vint(E, q);
			}
			return vfloat(E, floor(fa / fb));
		}
		return vfloat(E, fa / fb);
	case '%':
		if (fb == 0)
			return eerr(E, "modulo by zero"), NULL;
		if (ints) {
			long long r = a % b;
			if (r && ((r < 0) != (b < 0)))
				r += b;
			return vint(E, r);
		}
		return vfloat(E, fa - fb * floor(fa / fb));
	}
	return eerr(E, "unknown operator %s", op), NULL;
}

static bool contains(val *hay, val *needle, bool *ok)
{
	*ok = true;
	if (hay->k == V_STR && needle->k == V_STR) {
		if (!needle->n)
			return true;
		for (size_t i = 0; i + needle->n <= hay->n; i++)
			if (!memcmp(hay->s + i, needle->s, needle->n))
				return true;
		return false;
	}
	if (hay->k == V_LIST) {
		for (size_t i = 0; i < hay->len; i++)
			if (equal(hay->items[i], needle))
				return true;
		return false;
	}
	if (hay->k == V_DICT) {
		for (size_t i = 0; i < hay->len; i++)
			if (equal(hay->keys[i], needle))
				return true;
		return false;
	}
	if (hay->k == V_UNDEF)
		return false;
	*ok = false;
	return false;
}

static val *eval(env *E, scope *s, const node *n)
{
	E->line = n->line;
	switch (n->k) {
	case E_LIT: return n->lit;
	case E_NAME: return lookup(E, s, n->s);
	case E_ATTR: {
		val *o = eval(E, s, n->a);
		return o ? getattr_(E, o, n->s) : NULL;
	}
	case E_ITEM: {
		val *o = eval(E, s, n->a), *k = o ? eval(E, s, n->b) : NULL;
		return k ? getitem(E, o, k) : NULL;
	}
	case E_SLICE: {
		val *o = eval(E, s, n->a);
		val *a = o && n->b ? eval(E, s, n->b) : NULL, *b = o && n->c ? eval(E, s, n->c) : NULL,
		    *c = o && n->d ? eval(E, s, n->d) : NULL;
		if (!o || (n->b && !a) || (n->c && !b) || (n->d && !c))
			return NULL;
		return slice(E, o, a, b, c);
	}
	case E_CALL: {
		val *f = eval(E, s, n->a);
		args A;
		if (!f || eval_args(E, s, n, &A))
			return NULL;
		E->line = n->line;
		if (f->k == V_MACRO)
			return call_macro(E, f->macro, &A);
		if (f->k == V_FUNC)
			return f->self ? call_method(E, f->self, f->s, &A) : call_global(E, f->s, &A);
		if (f->k == V_UNDEF)
			return eerr(E, "'%s' is undefined (called as a function)", f->s ? f->s : "a value"), NULL;
		return eerr(E, "a %s cannot be called", kind_name(f->k)), NULL;
	}
	case E_FILTER: {
		val *v = eval(E, s, n->a);
		args A;
		if (!v || eval_args(E, s, n, &A))
			return NULL;
		E->line = n->line;
		return call_filter(E, s, n->s, v, &A);
	}
	case E_TEST: {
		val *v = eval(E, s, n->a);
		args A;
		if (!v || eval_args(E, s, n, &A))
			return NULL;
		E->line = n->line;
		val *r = call_test(E, n->s, v, &A);
		return r && n->neg ? vbool(E, !r->b) : r;
	}
	case E_NOT: {
		val *v = eval(E, s, n->a);
		return v ? vbool(E, !truthy(v)) : NULL;
	}
	case E_NEG: {
		val *v = eval(E, s, n->a);
		if (!v)
			return NULL;
		if (v->k == V_INT)
			return vint(E, -v->i);
		if (v->k == V_FLOAT)
			return vfloat(E, -v->f);
		return eerr(E, "cannot negate a %s", kind_name(v->k)), NULL;
	}
	case E_AND:
	case E_OR: {
		val *a = eval(E, s, n->a);
		if (!a)
			return NULL;
		if (truthy(a) == (n->k == E_OR))
			return a;
		return eval(E, s, n->b);
	}
	case E_COND: {
		val *c = eval(E, s, n->a);
		if (!c)
			return NULL;
		if (truthy(c))
			return eval(E, s, n->b);
		if (n->c)
			return eval(E, s, n->c);
		val *u = mkval(E->a, V_UNDEF);
		return u;
	}
	case E_BIN: {
		val *x = eval(E, s, n->a), *y = x ? eval(E, s, n->b) : NULL;
		if (!y)
			return NULL;
		E->line = n->line;
		const char *op = n->s;
		if (!strcmp(op, "==") || !strcmp(op, "!="))
			return vbool(E, equal(x, y) == (op[0] == '='));
		if (!strcmp(op, "in") || !strcmp(op, "not in")) {
			bool ok;
			bool r = contains(y, x, &ok);
			if (!ok)
				return eerr(E, "'in' needs a string, list or dict on its right, got %s", kind_name(y->k)), NULL;
			return vbool(E, r == (op[0] == 'i'));
		}
		if (op[0] == '<' || op[0] == '>') {
			bool ok;
			int c = compare(x, y, &ok);
			if (!ok)
				return eerr(E, "cannot compare %s with %s", kind_name(x->k), kind_name(y->k)), NULL;
			bool r = op[0] == '<' ? (op[1] == '=' ? c <= 0 : c < 0) : (op[1] == '=' ? c >= 0 : c > 0);
			return vbool(E, r);
		}
		return arith(E, op, x, y);
	}
	case E_LIST: {
		val *l = mkval(E->a, V_LIST);
		for (size_t i = 0; l && i < n->nlist; i++) {
			val *x = eval(E, s, n->list[i]);
			if (!x || !push_item(E, l, x))
				return NULL;
		}
		return l;
	}
	case E_DICT: {
		val *d = mkval(E->a, V_DICT);
		for (size_t i = 0; d && i < n->nlist; i++) {
			val *k = eval(E, s, n->list[i]), *v = k ? eval(E, s, n->list2[i]) : NULL;
			if (!v || !dict_set(E, d, k, v))
				return NULL;
		}
		return d;
	}
	default: return eerr(E, "internal: a statement used as an expression"), NULL;
	}
}

/* ---- tests and filters --------------------------------------------------------------- */

static val *call_test(env *E, const char *name, val *v, const args *A)
{
	val *x = arg(A, 0, NULL);
	bool r;
	if (!strcmp(name, "defined"))
		r = v->k != V_UNDEF;
	else if (!strcmp(name, "undefined"))
		r = v->k == V_UNDEF;
	else if (!strcmp(name, "none"))
		r = v->k == V_NONE;
	else if (!strcmp(name, "string"))
		r = v->k == V_STR;
	else if (!strcmp(name, "number"))
		r = v->k == V_INT || v->k == V_FLOAT;
	else if (!strcmp(name, "integer"))
		r = v->k == V_INT;
	else if (!strcmp(name, "float"))
		r = v->k == V_FLOAT;
	else if (!strcmp(name, "boolean"))
		r = v->k == V_BOOL;
	else if (!strcmp(name, "true"))
		r = v->k == V_BOOL && v->b;
	else if (!strcmp(name, "false"))
		r = v->k == V_BOOL && !v->b;
	else if (!strcmp(name, "mapping"))
		r = v->k == V_DICT;
	else if (!strcmp(name, "iterable"))
		r = v->k == V_LIST || v->k == V_DICT || v->k == V_STR;
	else if (!strcmp(name, "sequence"))
		r = v->k == V_LIST || v->k == V_DICT || v->k == V_STR;
	else if (!strcmp(name, "callable"))
		r = v->k == V_MACRO || v->k == V_FUNC;
	else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
		if (v->k != V_INT)
			return eerr(E, "'%s' needs an integer", name), NULL;
		r = (v->i % 2 != 0) == (name[0] == 'o');
	} else if (!strcmp(name, "divisibleby")) {
		if (v->k != V_INT || !x || x->k != V_INT || !x->i)
			return eerr(E, "'divisibleby' needs integers"), NULL;
		r = v->i % x->i == 0;
	} else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==") || !strcmp(name, "sameas")) {
		r = x && equal(v, x);
	} else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
		r = !(x && equal(v, x));
	} else if (!strcmp(name, "lt") || !strcmp(name, "gt") || !strcmp(name, "le") || !strcmp(name, "ge")) {
		bool ok = false;
		int c = x ? compare(v, x, &ok) : 0;
		if (!ok)
			return eerr(E, "'%s' cannot compare these", name), NULL;
		r = name[0] == 'l' ? (name[1] == 't' ? c < 0 : c <= 0) : (name[1] == 't' ? c > 0 : c >= 0);
	} else if (!strcmp(name, "in")) {
		bool ok = false;
		r = x && contains(x, v, &ok);
		if (!ok)
			return eerr(E, "'in' needs a container"), NULL;
	} else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
		r = v->k == V_STR;
		for (size_t i = 0; r && i < v->n; i++)
			r = name[0] == 'l' ? !(v->s[i] >= 'A' && v->s[i] <= 'Z') : !(v->s[i] >= 'a' && v->s[i] <= 'z');
	} else {
		return eerr(E, "the test '%s' is not supported", name), NULL;
	}
	return vbool(E, r);
}

static val *dict_attr(val *x, val *attr)
{
	if (x->k != V_DICT || !attr || attr->k != V_STR)
		return NULL;
	/* "a.b" reaches nested keys */
	const char *p = attr->s, *e = attr->s + attr->n;
	val *cur = x;
	while (cur && p < e) {
		const char *dot = memchr(p, '.', (size_t)(e - p));
		size_t n = dot ? (size_t)(dot - p) : (size_t)(e - p);
		cur = cur->k == V_DICT ? dict_get(cur, p, n) : NULL;
		p += n + (dot ? 1 : 0);
	}
	return cur;
}

static int cmp_vals(const void *a, const void *b, void *ctx)
{
	(void)ctx;
	bool ok;
	return compare(*(val *const *)a, *(val *const *)b, &ok);
}

static val *filter_tojson(env *E, val *v, const args *A)
{
	/* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
	val *ea = arg(A, 0, "ensure_ascii"), *ind = arg(A, 1, "indent"), *sep = arg(A, 2, "separators"),
	    *sk = arg(A, 3, "sort_keys");
	json_opts o = {-1, ea && truthy(ea), sk && truthy(sk), ", ", ": "};
	if (ind && ind->k == V_INT)
		o.indent = (int)(ind->i < 0 ? 0 : ind->i > 64 ? 64 : ind->i);
	else if (ind && ind->k != V_NONE)
		return eerr(E, "tojson: indent must be an integer"), NULL;
	if (o.indent >= 0)
		o.item_sep = ",";
	if (sep && sep->k == V_LIST && sep->len == 2 && sep->items[0]->k == V_STR && sep->items[1]->k == V_STR) {
		o.item_sep = sep->items[0]->s;
		o.key_sep = sep->items[1]->s;
	}
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	int rc = to_json(E, &b, v, &o, 0);
	val *r = rc ? NULL : vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	return r;
}

static val *filter_int(env *E, val *v, const args *A)
{
	val *d = arg(A, 0, "default");
	if (v->k == V_INT)
		return v;
	if (v->k == V_FLOAT)
		return vint(E, (long long)v->f);
	if (v->k == V_BOOL)
		return vint(E, v->b);
	if (v->k == V_STR) {
		char *end;
		long long x = strtoll(v->s, &end, 10);
		if (end != v->s && !*end)
			return vint(E, x);
	}
	return d ? d : vint(E, 0);
}

static val *filter_float(env *E, val *v, const args *A)
{
	if (numeric(v))
		return vfloat(E, num(v));
	if (v->k == V_STR) {
		char *end;
		double x = strtod(v->s, &end);
		if (end != v->s && !*end)
			return vfloat(E, x);
	}
	val *d = arg(A, 0, "default");
	return d ? d : vfloat(E, 0);
}

static val *filter_indent(env *E, val *v, const args *A)
{
	val *w = arg(A, 0, "width"), *first = arg(A, 1, "first"), *blank = arg(A, 2, "blank");
	if (!need_str(E, v, "indent"))
		return NULL;
	ev_buf pad = EV_BUF_INIT(4096);
	if (w && w->k == V_STR)
		ev_buf_append(&pad, w->s, w->n);
	else
		for (long long k = 0; k < (w && w->k == V_INT ? w->i : 4) && k < 256; k++)
			ev_buf_putc(&pad, ' ');
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	size_t i = 0;
	bool line_first = true;
	while (i <= v->n) {
		const char *nl = memchr(v->s + i, '\n', v->n - i);
		size_t e = nl ? (size_t)(nl - v->s) : v->n;
		bool empty = e == i;
		if ((!line_first || (first && truthy(first))) && (!empty || (blank && truthy(blank))))
			ev_buf_append(&b, pad.data ? pad.data : "", pad.len);
		ev_buf_append(&b, v->s + i, e - i);
		if (!nl)
			break;
		ev_buf_putc(&b, '\n');
		i = e + 1;
		line_first = false;
	}
	val *r = vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&b);
	ev_buf_free(&pad);
	return r;
}

static val *filter_select(env *E, scope *s, const char *name, val *v, const args *A)
{
	val *l = iterable(E, v), *r = l ? mkval(E->a, V_LIST) : NULL;
	if (!r)
		return NULL;
	bool attr_form = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
	bool keep_true = name[0] == 's';
	val *attr = arg(A, 0, "attribute");
	/* map(attribute='x', default=...) or map('filter', args...) */
	val *fname = !strcmp(name, "map") && A->npos ? A->pos[0] : NULL;
	val *test = attr_form ? arg(A, 1, NULL) : (!strcmp(name, "map") ? NULL : arg(A, 0, NULL));
	for (size_t i = 0; i < l->len; i++) {
		val *x = l->items[i];
		if (!strcmp(name, "map")) {
			val *y;
			if (fname) {
				args sub = {A->pos + 1, A->npos - 1, A->names, A->kw, A->nkw};
				y = call_filter(E, s, fname->k == V_STR ? fname->s : "", x, &sub);
			} else {
				y = dict_attr(x, attr);
				if (!y) {
					val *d = arg(A, 99, "default");
					y = d ? d : mkval(E->a, V_UNDEF);
				}
			}
			if (!y || !push_item(E, r, y))
				return NULL;
			continue;
		}
		val *subject = attr_form ? dict_attr(x, attr) : x;
		if (!subject)
			subject = mkval(E->a, V_UNDEF);
		bool ok;
		if (test && test->k == V_STR) {
			args sub = {A->pos + (attr_form ? 2 : 1), A->npos > (attr_form ? 2u : 1u) ? A->npos - (attr_form ? 2 : 1) : 0,
				    NULL, NULL, 0};
			val *t = call_test(E, test->s, subject, &sub);
			if (!t)
				return NULL;
			ok = t->b;
		} else {
			ok = truthy(subject);
		}
		if (ok == keep_true && !push_item(E, r, x))
			return NULL;
	}
	return r;
}

static val *filter_sort(env *E, const char *name, val *v, const args *A)
{
	val *l = !strcmp(name, "dictsort") ? call_method(E, v, "items", A) : iterable(E, v);
	if (!l)
		return NULL;
	val *r = mkval(E->a, V_LIST);
	for (size_t i = 0; r && i < l->len; i++)
		if (!push_item(E, r, l->items[i]))
			return NULL;
	if (r && r->len)
		qsort_r(r->items, r->len, sizeof *r->items, cmp_vals, NULL);
	val *rev = arg(A, 0, "reverse");
	if (r && rev && truthy(rev))
		for (size_t i = 0; i < r->len / 2; i++) {
			val *t = r->items[i];
			r->items[i] = r->items[r->len - 1 - i];
			r->items[r->len - 1 - i] = t;
		}
	return r;
}

static val *filter_escape(env *E, val *v)
{
	ev_buf in = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT), b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	to_str(&in, v, false);
	for (size_t i = 0; i < in.len; i++) {
		char c = in.data[i];
		if (c == '&')
			ev_buf_puts(&b, "&amp;");
		else if (c == '<')
			ev_buf_puts(&b, "&lt;");
		else if (c == '>')
			ev_buf_puts(&b, "&gt;");
		else if (c == '"')
			ev_buf_puts(&b, "&#34;");
		else if (c == '\'')
			ev_buf_puts(&b, "&#39;");
		else
			ev_buf_putc(&b, c);
	}
	val *r = vstr(E, b.data ? b.data : "", b.len);
	ev_buf_free(&in);
	ev_buf_free(&b);
	return r;
}

static val *call_filter(env *E, scope *s, const char *name, val *v, const args *A)
{
	(void)s;
	if (!strcmp(name, "tojson"))
		return filter_tojson(E, v, A);

	if (!strcmp(name, "trim")) {
		val *chars = arg(A, 0, "chars");
		if (v->k != V_STR) {
			ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
			to_str(&b, v, false);
			v = vstr(E, b.data ? b.data : "", b.len);
			ev_buf_free(&b);
			if (!v)
				return NULL;
		}
		return strip(E, v, chars && chars->k == V_STR ? chars : NULL, true, true);
	}
	if (!strcmp(name, "length") || !strcmp(name, "count")) {
		if (v->k != V_STR && v->k != V_LIST && v->k != V_DICT && v->k != V_UNDEF)
			return eerr(E, "length: a %s has no length", kind_name(v->k)), NULL;
		return vint(E, length(v));
	}
	if (!strcmp(name, "string")) {
		ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
		to_str(&b, v, false);
		val *r = vstr(E, b.data ? b.data : "", b.len);
		ev_buf_free(&b);
		return r;
	}
	if (!strcmp(name, "default") || !strcmp(name, "d")) {
		val *d = arg(A, 0, "default_value"), *boolean = arg(A, 1, "boolean");
		bool use = v->k == V_UNDEF || (boolean && truthy(boolean) && !truthy(v));
		return use ? (d ? d : vstr(E, "", 0)) : v;
	}
	if (!strcmp(name, "join"))
		return join(E, v, arg(A, 0, "d"), arg(A, 1, "attribute"));
	if (!strcmp(name, "first") || !strcmp(name, "last")) {
		val *l = iterable(E, v);
		if (!l)
			return NULL;
		if (!l->len) {
			val *u = mkval(E->a, V_UNDEF);
			if (u)
				u->s = name;
			return u;
		}
		return l->items[name[0] == 'f' ? 0 : l->len - 1];
	}
	if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
		if (!need_str(E, v, name))
			return NULL;
		return case_map(E, v, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3);
	}
	if (!strcmp(name, "replace")) {
		val *a = need_str(E, arg(A, 0, "old"), "replace"), *b = a ? need_str(E, arg(A, 1, "new"), "replace") : NULL;
		val *c = arg(A, 2, "count");
		return b && need_str(E, v, "replace") ? replace(E, v, a, b, c && c->k == V_INT ? c->i : -1) : NULL;
	}
	if (!strcmp(name, "items")) {
		if (v->k == V_UNDEF)
			return mkval(E->a, V_LIST);
		if (v->k != V_DICT)
			return eerr(E, "items: expected a dict, got %s", kind_name(v->k)), NULL;
		return call_method(E, v, "items", A);
	}
	if (!strcmp(name, "list"))
		return iterable(E, v);
	if (!strcmp(name, "reverse")) {
		val *l = iterable(E, v), *r = l ? mkval(E->a, V_LIST) : NULL;
		for (size_t i = l ? l->len : 0; r && i-- > 0;)
			if (!push_item(E, r, l->items[i]))
				return NULL;
		return r && v->k == V_STR ? join(E, r, NULL, NULL) : r;
	}
	if (!strcmp(name, "int"))
		return filter_int(E, v, A);

	if (!strcmp(name, "float"))
		return filter_float(E, v, A);

	if (!strcmp(name, "abs")) {
		if (v->k == V_INT)
			return vint(E, v->i < 0 ? -v->i : v->i);
		if (v->k == V_FLOAT)
			return vfloat(E, fabs(v->f));
		return eerr(E, "abs: expected a number"), NULL;
	}
	if (!strcmp(name, "round")) {
		val *p = arg(A, 0, "precision");
		double scale = pow(10, p && p->k == V_INT ? (double)p->i : 0);
		return numeric(v) ? vfloat(E, nearbyint(num(v) * scale) / scale) : (eerr(E, "round: expected a number"), NULL);
	}
	if (!strcmp(name, "safe"))
		return v;
	if (!strcmp(name, "indent"))
		return filter_indent(E, v, A);

	if (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
	    !strcmp(name, "rejectattr"))
		return filter_select(E, s, name, v, A);

	if (!strcmp(name, "unique")) {
		val *l = iterable(E, v), *r = l ? mkval(E->a, V_LIST) : NULL;
		for (size_t i = 0; r && i < l->len; i++) {
			bool ok, seen = contains(r, l->items[i], &ok);
			if (!seen && !push_item(E, r, l->items[i]))
				return NULL;
		}
		return r;
	}
	if (!strcmp(name, "sort") || !strcmp(name, "dictsort"))
		return filter_sort(E, name, v, A);

	if (!strcmp(name, "wordcount")) {
		val *w = need_str(E, v, "wordcount") ? split(E, v, NULL, -1) : NULL;
		return w ? vint(E, (long long)w->len) : NULL;
	}
	if (!strcmp(name, "e") || !strcmp(name, "escape"))
		return filter_escape(E, v);

	return eerr(E, "the filter '%s' is not supported", name), NULL;
}

/* ---- statements ----------------------------------------------------------------------- */

static int out_put(env *E, ev_buf *out, const char *s, size_t n)
{
	if (ev_buf_append(out, s, n))
		return eerr(E, "the rendered text passes %zu bytes", out->max);
	return 0;
}

/* Binds a loop's target names to one item (unpacking a pair or more). */
static int bind_targets(env *E, scope *inner, const node *n, val *x)
{
	if (n->nnames == 1)
		return scope_set(E, inner, n->names[0], x) ? 0 : EV_E_NOMEM;
	if (x->k != V_LIST || x->len != n->nnames)
		return eerr(E, "cannot unpack a %s into %zu loop variables", kind_name(x->k), n->nnames);
	for (size_t j = 0; j < n->nnames; j++)
		if (!scope_set(E, inner, n->names[j], x->items[j]))
			return EV_E_NOMEM;
	return 0;
}

/* {% for %}: the loop's own `if`, its `else`, loop.*, break and continue. */
static int render_for(env *E, scope *s, const node *n, ev_buf *out)
{
	val *it = eval(E, s, n->a);
	val *l = it ? iterable(E, it) : NULL;
	if (!l)
		return ev_error_code() ? ev_error_code() : EV_E_INVALID;
	/* the items that pass the loop's own "if" */
	val *items = l;
	scope *inner = scope_new(E, s);
	if (!inner)
		return EV_E_NOMEM;
	if (n->d) {
		items = mkval(E->a, V_LIST);
		for (size_t i = 0; items && i < l->len; i++) {
			int brc = bind_targets(E, inner, n, l->items[i]);
			if (brc)
				return brc;
			val *c = eval(E, inner, n->d);
			if (!c)
				return ev_error_code();
			if (truthy(c) && !push_item(E, items, l->items[i]))
				return EV_E_NOMEM;
		}
		if (!items)
			return EV_E_NOMEM;
	}
	if (!items->len)
		return render(E, s, n->c, out);
	val *loop = mkval(E->a, V_DICT);
	static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
					   "previtem", "nextitem"};
	val *k[9];
	for (int j = 0; j < 9; j++)
		if (!(k[j] = vstr(E, keys[j], strlen(keys[j]))))
			return EV_E_NOMEM;
	if (!loop || !scope_set(E, inner, "loop", loop))
		return EV_E_NOMEM;
	long long len = (long long)items->len;
	for (long long i = 0; i < len; i++) {
		if (++E->steps > ENG_JINJA_MAX_STEPS)
			return eerr(E, "more than %ld loop steps", ENG_JINJA_MAX_STEPS);
		val *x = items->items[i];
		int brc = bind_targets(E, inner, n, x);
		if (brc)
			return brc;
		val *vals[9] = {vint(E, i + 1), vint(E, i), vint(E, len - i), vint(E, len - i - 1), vbool(E, i == 0),
				vbool(E, i == len - 1), vint(E, len), i ? items->items[i - 1] : mkval(E->a, V_UNDEF),
				i + 1 < len ? items->items[i + 1] : mkval(E->a, V_UNDEF)};
		for (int j = 0; j < 9; j++)
			if (!vals[j] || !dict_set(E, loop, k[j], vals[j]))
				return EV_E_NOMEM;
		int rc = render(E, inner, n->b, out);
		if (rc)
			return rc;
		if (E->brk == 1) {
			E->brk = 0;
			break;
		}
		E->brk = 0;
	}
	return 0;
}

static int render(env *E, scope *s, const node *n, ev_buf *out)
{
	if (!n)
		return 0;
	E->line = n->line;
	switch (n->k) {
	case N_BODY:
		for (size_t i = 0; i < n->nlist; i++) {
			int rc = render(E, s, n->list[i], out);
			if (rc)
				return rc;
			if (E->brk)
				return 0;
		}
		return 0;
	case N_TEXT: return out_put(E, out, n->s, n->n);
	case N_OUT: {
		val *v = eval(E, s, n->a);
		if (!v)
			return ev_error_code() ? ev_error_code() : EV_E_INVALID;
		size_t before = out->len;
		to_str(out, v, false);
		if (out->len == before && v->k != V_UNDEF && v->k != V_STR)
			return eerr(E, "the rendered text passes %zu bytes", out->max);
		return 0;
	}
	case N_IF: {
		val *c = eval(E, s, n->a);
		if (!c)
			return ev_error_code() ? ev_error_code() : EV_E_INVALID;
		return render(E, s, truthy(c) ? n->b : n->c, out);
	}
	case N_FOR: return render_for(E, s, n, out);

	case N_SET: {
		val *v = eval(E, s, n->b);
		if (!v)
			return ev_error_code() ? ev_error_code() : EV_E_INVALID;
		if (n->a) {
			val *obj = eval(E, s, n->a);
			if (!obj)
				return ev_error_code();
			if (obj->k != V_DICT || !obj->ns)
				return eerr(E, "only a namespace() takes attributes (set %s.%s)", n->a->s, n->s);
			val *key = vstr(E, n->s, strlen(n->s));
			return key && dict_set(E, obj, key, v) ? 0 : EV_E_NOMEM;
		}
		return scope_set(E, s, n->s, v) ? 0 : EV_E_NOMEM;
	}
	case N_SETBLOCK: {
		ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
		int rc = render(E, s, n->b, &b);
		val *v = rc ? NULL : vstr(E, b.data ? b.data : "", b.len);
		ev_buf_free(&b);
		if (rc)
			return rc;
		return v && scope_set(E, s, n->s, v) ? 0 : EV_E_NOMEM;
	}
	case N_MACRO: {
		val *m = mkval(E->a, V_MACRO);
		if (!m)
			return EV_E_NOMEM;
		m->macro = n;
		return scope_set(E, s, n->s, m) ? 0 : EV_E_NOMEM;
	}
	case N_BREAK: E->brk = 1; return 0;
	case N_CONTINUE: E->brk = 2; return 0;
	default: return eerr(E, "internal: an expression used as a statement");
	}
}

int eng_jinja_render(const eng_jinja *t, const cJSON *vars, char **out, size_t *out_len)
{
	*out = NULL;
	if (out_len)
		*out_len = 0;
	env E = {0};
	E.what = t->what;
	int rc = ev_arena_new(&E.a, ARENA_MAX);
	if (rc)
		return rc;
	ev_buf b = EV_BUF_INIT(ENG_JINJA_MAX_OUTPUT);
	if (!(E.globals = scope_new(&E, NULL))) {
		rc = EV_E_NOMEM;
		goto done;
	}
	for (const cJSON *c = vars ? vars->child : NULL; c; c = c->next) {
		val *v = from_json(&E, c);
		if (!v || !scope_set(&E, E.globals, c->string, v)) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
	}
	ev_error_clear();
	rc = render(&E, E.globals, t->root, &b);
	if (rc && !ev_error_code())
		rc = ev_error_set(EV_E_INVALID, "%s: rendering failed", t->what);
	if (!rc) {
		*out = ev_buf_detach(&b, out_len);
		if (!*out)
			*out = ev_strdup("");
		if (!*out)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
done:
	ev_buf_free(&b);
	ev_arena_free(E.a);
	return rc;
}
