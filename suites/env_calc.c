/*
 * env_calc.c: the "calculator" tool environment and its expression parser.
 *
 * Grammar (recursive descent, no eval):
 *   expr   = term { ("+" | "-") term }
 *   term   = unary { ("*" | "/") unary }
 *   unary  = ("+" | "-") unary | power
 *   power  = atom [ ("^" | "**") unary ]        right-associative
 *   atom   = number | "(" expr ")" | name "(" args ")" | "pi" | "e"
 * so -2^2 is -4 and 2^-1 is 0.5. Functions: sqrt(x), abs(x), round(x) and
 * round(x, digits). Division by zero, a negative square root, overflow and
 * anything not in the grammar are errors naming the offset.
 *
 * Spec: {"type":"calculator"}. Tool: calculate(expression) ->
 * {"expression","result"}. State: {"evaluations":[{"expression","result"}]}
 * of the successful calls (the first 100), so a task can require that the
 * agent actually computed something.
 */
#include "suites/env_int.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXPR 1000
#define MAX_DEPTH 64
#define MAX_HISTORY 100

typedef struct {
	const char *s;
	size_t i;
	int depth;
	char err[160];
} P;

static bool fail(P *p, const char *why)
{
	if (!p->err[0])
		snprintf(p->err, sizeof p->err, "%s at offset %zu", why, p->i);
	return false;
}

static void ws(P *p)
{
	while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
		p->i++;
}

static bool eat(P *p, const char *tok)
{
	ws(p);
	size_t n = strlen(tok);
	if (strncmp(p->s + p->i, tok, n))
		return false;
	/* "*" must not take the first half of "**". */
	if (n == 1 && tok[0] == '*' && p->s[p->i + 1] == '*')
		return false;
	p->i += n;
	return true;
}

static bool finite_or_fail(P *p, double v)
{
	return isfinite(v) ? true : fail(p, "result out of range");
}

static bool expr(P *p, double *v);
static bool unary(P *p, double *v);

static bool number(P *p, double *v)
{
	const char *start = p->s + p->i;
	size_t n = 0;
	while (isdigit((unsigned char)start[n]))
		n++;
	if (start[n] == '.') {
		n++;
		while (isdigit((unsigned char)start[n]))
			n++;
	}
	if (n == 0 || (n == 1 && start[0] == '.'))
		return fail(p, "expected a number");
	if (start[n] == 'e' || start[n] == 'E') {
		size_t m = n + 1;
		if (start[m] == '+' || start[m] == '-')
			m++;
		if (isdigit((unsigned char)start[m])) {
			while (isdigit((unsigned char)start[m]))
				m++;
			n = m;
		}
	}
	char buf[64];
	if (n >= sizeof buf)
		return fail(p, "number too long");
	memcpy(buf, start, n);
	buf[n] = 0;
	*v = strtod(buf, NULL);
	p->i += n;
	return finite_or_fail(p, *v);
}

static bool call(P *p, const char *name, double *v)
{
	double a, b = 0;
	int nargs = 1;
	if (!eat(p, "("))
		return fail(p, "expected '(' after a function name");
	if (!expr(p, &a))
		return false;
	if (eat(p, ",")) {
		if (!expr(p, &b))
			return false;
		nargs = 2;
	}
	if (!eat(p, ")"))
		return fail(p, "expected ')'");
	if (!strcmp(name, "round")) {
		if (nargs == 2 && (b != floor(b) || b < 0 || b > 15))
			return fail(p, "round: digits must be a whole number 0..15");
		double scale = pow(10.0, b);
		*v = round(a * scale) / scale;
		return finite_or_fail(p, *v);
	}
	if (nargs != 1)
		return fail(p, "too many arguments");
	if (!strcmp(name, "sqrt")) {
		if (a < 0)
			return fail(p, "sqrt of a negative number");
		*v = sqrt(a);
	} else {
		*v = fabs(a);
	}
	return true;
}

static bool atom(P *p, double *v)
{
	ws(p);
	char c = p->s[p->i];
	if (c == '(') {
		p->i++;
		if (++p->depth > MAX_DEPTH)
			return fail(p, "nested too deep");
		bool ok = expr(p, v);
		p->depth--;
		if (ok && !eat(p, ")"))
			return fail(p, "expected ')'");
		return ok;
	}
	if (isdigit((unsigned char)c) || c == '.')
		return number(p, v);
	if (isalpha((unsigned char)c)) {
		size_t n = 0;
		while (isalnum((unsigned char)p->s[p->i + n]) || p->s[p->i + n] == '_')
			n++;
		char name[16];
		if (n >= sizeof name)
			return fail(p, "unknown name");
		memcpy(name, p->s + p->i, n);
		name[n] = 0;
		if (!strcmp(name, "pi") || !strcmp(name, "e")) {
			p->i += n;
			*v = name[0] == 'p' ? 3.14159265358979323846 : 2.71828182845904523536;
			return true;
		}
		if (strcmp(name, "sqrt") && strcmp(name, "abs") && strcmp(name, "round"))
			return fail(p, "unknown function");
		p->i += n;
		if (++p->depth > MAX_DEPTH)
			return fail(p, "nested too deep");
		bool ok = call(p, name, v);
		p->depth--;
		return ok;
	}
	return fail(p, c ? "unexpected character" : "unexpected end of expression");
}

static bool power(P *p, double *v)
{
	if (!atom(p, v))
		return false;
	if (eat(p, "^") || eat(p, "**")) {
		double e;
		if (++p->depth > MAX_DEPTH)
			return fail(p, "nested too deep");
		bool ok = unary(p, &e);
		p->depth--;
		if (!ok)
			return false;
		if (*v == 0 && e < 0)
			return fail(p, "division by zero");
		if (*v < 0 && e != floor(e))
			return fail(p, "fractional power of a negative number");
		*v = pow(*v, e);
		return finite_or_fail(p, *v);
	}
	return true;
}

static bool unary(P *p, double *v)
{
	if (eat(p, "-") || eat(p, "+")) {
		bool neg = p->s[p->i - 1] == '-';
		if (++p->depth > MAX_DEPTH)
			return fail(p, "nested too deep");
		bool ok = unary(p, v);
		p->depth--;
		if (ok && neg)
			*v = -*v;
		return ok;
	}
	return power(p, v);
}

static bool term(P *p, double *v)
{
	if (!unary(p, v))
		return false;
	for (;;) {
		double r;
		if (eat(p, "*")) {
			if (!unary(p, &r))
				return false;
			*v *= r;
		} else if (eat(p, "/")) {
			size_t at = p->i;
			if (!unary(p, &r))
				return false;
			if (r == 0) {
				p->i = at;
				return fail(p, "division by zero");
			}
			*v /= r;
		} else {
			return true;
		}
		if (!finite_or_fail(p, *v))
			return false;
	}
}

static bool expr(P *p, double *v)
{
	if (!term(p, v))
		return false;
	for (;;) {
		double r;
		if (eat(p, "+")) {
			if (!term(p, &r))
				return false;
			*v += r;
		} else if (eat(p, "-")) {
			if (!term(p, &r))
				return false;
			*v -= r;
		} else {
			return true;
		}
		if (!finite_or_fail(p, *v))
			return false;
	}
}

int ev_env_calc(double *out, const char *s)
{
	*out = 0;
	if (!s)
		return ev_error_set(EV_E_INVALID, "no expression");
	if (strlen(s) > MAX_EXPR)
		return ev_error_set(EV_E_INVALID, "expression longer than %d bytes", MAX_EXPR);
	P p = {s, 0, 0, {0}};
	double v;
	if (!expr(&p, &v))
		return ev_error_set(EV_E_INVALID, "%s", p.err);
	ws(&p);
	if (s[p.i]) {
		fail(&p, "unexpected character");
		return ev_error_set(EV_E_INVALID, "%s", p.err);
	}
	*out = v == 0 ? 0 : v; /* no "-0" in results */
	return 0;
}

/* ---- the environment -------------------------------------------------------- */

typedef struct {
	cJSON *history; /* array of {"expression","result"} */
} calc;

static void calc_destroy(void *self)
{
	calc *c = self;
	if (!c)
		return;
	cJSON_Delete(c->history);
	free(c);
}

static int calc_create(void **self, const cJSON *spec, const char *what)
{
	const cJSON *f;
	cJSON_ArrayForEach(f, spec) {
		if (strcmp(f->string, "type"))
			return ev_error_set(EV_E_INVALID, "%s.%.64s: unknown field (the calculator takes none)", what, f->string);
	}
	calc *c = calloc(1, sizeof *c);
	if (!c || !(c->history = cJSON_CreateArray())) {
		calc_destroy(c);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	*self = c;
	return 0;
}

static cJSON *calc_tools(const void *self)
{
	(void)self;
	cJSON *a = cJSON_CreateArray();
	if (!a || !ev_env_tool_add(a, "calculate",
	                           "Evaluate an arithmetic expression: + - * / ^, parentheses, sqrt(x), abs(x), "
	                           "round(x) or round(x, digits), pi, e.",
	                           "{\"expression\":{\"type\":\"string\",\"description\":\"such as (2 + 3) * 4\"}}",
	                           "[\"expression\"]")) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static int calc_exec(void *self, const char *name, const cJSON *args, cJSON **result)
{
	(void)name;
	calc *c = self;
	static const char *const known[] = {"expression", NULL};
	cJSON *err = ev_env_check_args(args, known);
	const char *e = err ? NULL : ev_env_arg_str(args, "expression", true, &err);
	if (err) {
		*result = err;
		return 0;
	}
	double v;
	if (ev_env_calc(&v, e)) {
		*result = ev_env_error("%s", ev_error_msg());
		return 0;
	}
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "expression", e) || !cJSON_AddNumberToObject(o, "result", v)) {
		cJSON_Delete(o);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (cJSON_GetArraySize(c->history) < MAX_HISTORY) {
		cJSON *h = cJSON_Duplicate(o, true);
		if (!h) {
			cJSON_Delete(o);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
		cJSON_AddItemToArray(c->history, h);
	}
	*result = o;
	return 0;
}

static cJSON *calc_state(const void *self)
{
	const calc *c = self;
	cJSON *o = cJSON_CreateObject(), *h = cJSON_Duplicate(c->history, true);
	if (!o || !h) {
		cJSON_Delete(o);
		cJSON_Delete(h);
		return NULL;
	}
	cJSON_AddItemToObject(o, "evaluations", h);
	return o;
}

const ev_env_kind ev_env_kind_calculator = {"calculator", calc_create, calc_tools, calc_exec, calc_state, calc_destroy};
