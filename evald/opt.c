/*
 * evald/opt.c: parsing, help and stored configuration from a command's
 * option table (evald/opt.h).
 */
#include "evald/opt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COL 30

static void *field(void *opts, size_t off) { return (char *)opts + off; }
static const void *cfield(const void *opts, size_t off) { return (const char *)opts + off; }

static bool takes_value(const ev_opt *o)
{
	return o->kind != EV_OPT_FLAG && (o->kind != EV_OPT_FN || (o->flags & EV_OPT_VALUE));
}

/* The option `arg` names (its "=value" part, if any, not compared). */
static bool matches(const ev_opt *o, const char *arg, size_t len)
{
	if (o->short_name && len == 2 && arg[0] == '-' && arg[1] == o->short_name)
		return true;
	size_t n = strlen(o->name);
	if (o->flags & EV_OPT_PREFIX)
		return len > n && !strncmp(arg, o->name, n);
	return len == n && !strncmp(arg, o->name, n);
}

static const ev_opt *find(const ev_cmd_spec *spec, const char *arg, size_t len)
{
	for (const ev_opt *o = spec->opts; o && o->name; o++)
		if (matches(o, arg, len))
			return o;
	for (const ev_opt *const *g = spec->groups; g && *g; g++)
		for (const ev_opt *o = *g; o->name; o++)
			if (matches(o, arg, len))
				return o;
	return NULL;
}

static int64_t read_int(const void *p, size_t size)
{
	if (size == sizeof(int))
		return *(const int *)p;
	if (size == sizeof(int64_t))
		return *(const int64_t *)p;
	return 0;
}

static void write_int(void *p, size_t size, int64_t v)
{
	if (size == sizeof(int))
		*(int *)p = (int)v;
	else if (size == sizeof(int64_t))
		*(int64_t *)p = v;
}

static bool in_choices(const char *choices, const char *v)
{
	size_t n = strlen(v);
	for (const char *p = choices; *p;) {
		const char *e = strchr(p, '|');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && !strncmp(p, v, n))
			return true;
		p += l + (e ? 1 : 0);
	}
	return false;
}

/* Stores one value; on failure the message names the option. */
static int set_value(const ev_opt *o, void *opts, const char *name, const char *v)
{
	void *p = field(opts, o->off);
	int64_t i;
	double d;
	switch (o->kind) {
	case EV_OPT_FLAG:
		*(bool *)p = true;
		break;
	case EV_OPT_STR:
		*(const char **)p = v;
		break;
	case EV_OPT_CHOICE:
		if (!in_choices(o->choices, v))
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not one of %s", o->name, v, o->choices);
		*(const char **)p = v;
		break;
	case EV_OPT_STRS: {
		int *cnt = field(opts, o->count_off);
		size_t max = o->size / sizeof(const char *);
		if ((size_t)*cnt >= max)
			return ev_error_set(EV_E_LIMIT, "%s: at most %zu", o->name, max);
		((const char **)p)[(*cnt)++] = v;
		break;
	}
	case EV_OPT_INT:
		if (!ev_parse_i64(v, &i) || (double)i < o->lo || (double)i > o->hi)
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not a whole number from %.0f to %.0f", o->name, v,
			                    o->lo, o->hi);
		write_int(p, o->size, i);
		break;
	case EV_OPT_NUM:
		if (!ev_parse_f64(v, &d) || d < o->lo || d > o->hi)
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not a number from %g to %g", o->name, v, o->lo, o->hi);
		*(double *)p = d;
		break;
	case EV_OPT_ID:
		if (!ev_parse_i64(v, &i) || i < 1)
			return ev_error_set(EV_E_INVALID, "%s: '%s' is not an id (a whole number from 1)", o->name, v);
		*(int64_t *)p = i;
		break;
	case EV_OPT_FN:
		return o->fn(opts, o, name, v);
	}
	if (o->has_off)
		*(bool *)field(opts, o->has_off) = true;
	return 0;
}

static int usage_error(const ev_cmd_spec *spec)
{
	fprintf(stderr, "evald %s: %s\n", spec->name, ev_error_msg());
	ev_opt_usage(spec, stderr);
	fprintf(stderr, "'evald %s --help' describes every option.\n", spec->name);
	return EV_OPT_USAGE;
}

int ev_opt_parse(const ev_cmd_spec *spec, void *opts, int argc, char **argv, const char **pos, int *n_pos)
{
	int np = 0;
	bool options_end = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (options_end || a[0] != '-' || !a[1]) {
			if (np >= spec->max_pos || np >= EV_OPT_MAX_POS || !pos) {
				ev_error_set(EV_E_INVALID, "unexpected argument '%.200s'", a);
				return usage_error(spec);
			}
			pos[np++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			options_end = true;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			ev_opt_help(spec, opts, stdout);
			return EV_OPT_HELP;
		}
		const char *eq = ev_str_starts(a, "--") ? strchr(a, '=') : NULL;
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		const ev_opt *o = find(spec, a, len);
		if (!o) {
			ev_error_set(EV_E_INVALID, "unknown option '%.*s'", (int)(len > 200 ? 200 : len), a);
			return usage_error(spec);
		}
		char name[128];
		snprintf(name, sizeof name, "%.*s", (int)len, a);
		const char *v = NULL;
		if (takes_value(o)) {
			if (eq)
				v = eq + 1;
			else if (i + 1 < argc)
				v = argv[++i];
			else {
				ev_error_set(EV_E_INVALID, "%s needs a value (%s)", name, o->meta ? o->meta : "VALUE");
				return usage_error(spec);
			}
		} else if (eq) {
			ev_error_set(EV_E_INVALID, "%s takes no value", name);
			return usage_error(spec);
		}
		if (set_value(o, opts, name, v))
			return usage_error(spec);
	}
	if (np < spec->min_pos) {
		ev_error_set(EV_E_INVALID, "expected %s", spec->positional ? spec->positional : "more arguments");
		return usage_error(spec);
	}
	if (n_pos)
		*n_pos = np;
	return 0;
}

int ev_opt_exit(int parse_rc) { return parse_rc == EV_OPT_HELP ? 0 : 2; }

void ev_opt_usage(const ev_cmd_spec *spec, FILE *to)
{
	fprintf(to, "usage: evald %s%s%s\n", spec->name, spec->synopsis ? " " : "",
	        spec->synopsis ? spec->synopsis : "");
}

static void default_of(char *out, size_t cap, const ev_opt *o, const void *d)
{
	*out = 0;
	if (!d || o->kind == EV_OPT_FN)
		return;
	const void *p = cfield(d, o->off);
	switch (o->kind) {
	case EV_OPT_STR:
	case EV_OPT_CHOICE:
		if (*(const char *const *)p)
			snprintf(out, cap, "%s", *(const char *const *)p);
		break;
	case EV_OPT_INT:
		if (read_int(p, o->size) > 0)
			snprintf(out, cap, "%lld", (long long)read_int(p, o->size));
		break;
	case EV_OPT_NUM:
		if (*(const double *)p > 0)
			snprintf(out, cap, "%g", *(const double *)p);
		break;
	default:
		break;
	}
}

static void help_rows(const ev_opt *opts, const void *defaults, FILE *to)
{
	for (const ev_opt *o = opts; o && o->name; o++) {
		if (o->flags & EV_OPT_HIDDEN)
			continue;
		char head[160], dflt[96];
		const char *meta = o->kind == EV_OPT_CHOICE && !o->meta ? o->choices : o->meta;
		int n = snprintf(head, sizeof head, "  %s%s%s%s%s%s", o->short_name ? "-" : "",
		                 o->short_name ? (char[2]){o->short_name, 0} : "", o->short_name ? ", " : "", o->name,
		                 (o->flags & EV_OPT_PREFIX) ? "..." : "", "");
		if (takes_value(o) && meta)
			n += snprintf(head + n, sizeof head - (size_t)n, " %s", meta);
		default_of(dflt, sizeof dflt, o, defaults);
		fprintf(to, "%s", head);
		if (n >= HELP_COL - 1)
			fprintf(to, "\n%*s", HELP_COL, "");
		else
			fprintf(to, "%*s", HELP_COL - n, "");
		fprintf(to, "%s%s%s%s%s\n", o->help ? o->help : "", o->kind == EV_OPT_STRS ? " (repeatable)" : "",
		        *dflt ? " (default " : "", dflt, *dflt ? ")" : "");
	}
}

void ev_opt_help(const ev_cmd_spec *spec, const void *defaults, FILE *to)
{
	ev_opt_usage(spec, to);
	if (spec->about)
		fprintf(to, "\n%s\n", spec->about);
	bool any = spec->opts && spec->opts->name;
	for (const ev_opt *const *g = spec->groups; g && *g; g++)
		any = any || (*g)->name;
	if (any) {
		fprintf(to, "\noptions:\n");
		help_rows(spec->opts, defaults, to);
		for (const ev_opt *const *g = spec->groups; g && *g; g++)
			help_rows(*g, defaults, to);
	}
	fprintf(to, "  -h, --help%*s%s\n", HELP_COL - 12, "", "this text");
	if (spec->more)
		fprintf(to, "\n%s\n", spec->more);
}

static int row_to_json(const ev_opt *o, const void *opts, cJSON *into)
{
	const void *p = cfield(opts, o->off);
	if (o->has_off && !*(const bool *)cfield(opts, o->has_off))
		return 0;
	cJSON *v = NULL;
	switch (o->kind) {
	case EV_OPT_FLAG:
		v = cJSON_CreateBool(*(const bool *)p);
		break;
	case EV_OPT_STR:
	case EV_OPT_CHOICE:
		v = *(const char *const *)p ? cJSON_CreateString(*(const char *const *)p) : cJSON_CreateNull();
		break;
	case EV_OPT_STRS: {
		int n = *(const int *)cfield(opts, o->count_off);
		v = cJSON_CreateArray();
		for (int i = 0; v && i < n; i++)
			cJSON_AddItemToArray(v, cJSON_CreateString(((const char *const *)p)[i]));
		break;
	}
	case EV_OPT_INT:
		v = cJSON_CreateNumber((double)read_int(p, o->size));
		break;
	case EV_OPT_NUM:
		v = cJSON_CreateNumber(*(const double *)p);
		break;
	case EV_OPT_ID:
		v = cJSON_CreateNumber((double)*(const int64_t *)p);
		break;
	case EV_OPT_FN:
		return 0;
	}
	if (!v || !cJSON_AddItemToObject(into, o->key, v)) {
		cJSON_Delete(v);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

int ev_opt_to_json(const ev_cmd_spec *spec, const void *opts, cJSON *into)
{
	int rc = 0;
	for (const ev_opt *o = spec->opts; o && o->name && !rc; o++)
		if (o->key)
			rc = row_to_json(o, opts, into);
	for (const ev_opt *const *g = spec->groups; g && *g && !rc; g++)
		for (const ev_opt *o = *g; o->name && !rc; o++)
			if (o->key)
				rc = row_to_json(o, opts, into);
	return rc;
}

static int row_from_json(const ev_opt *o, void *opts, const cJSON *j)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, o->key);
	void *p = field(opts, o->off);
	if (!v || o->kind == EV_OPT_FN)
		return 0;
	bool ok = true;
	switch (o->kind) {
	case EV_OPT_FLAG:
		ok = cJSON_IsBool(v);
		if (ok)
			*(bool *)p = cJSON_IsTrue(v);
		break;
	case EV_OPT_STR:
	case EV_OPT_CHOICE:
		ok = cJSON_IsString(v) || cJSON_IsNull(v);
		if (ok)
			*(const char **)p = cJSON_IsString(v) ? v->valuestring : NULL;
		break;
	case EV_OPT_STRS: {
		int *cnt = field(opts, o->count_off);
		size_t max = o->size / sizeof(const char *);
		const cJSON *e, *list = cJSON_IsArray(v) ? v : NULL;
		ok = list != NULL;
		*cnt = 0;
		cJSON_ArrayForEach(e, list) {
			if (!cJSON_IsString(e) || (size_t)*cnt >= max) {
				ok = false;
				break;
			}
			((const char **)p)[(*cnt)++] = e->valuestring;
		}
		break;
	}
	case EV_OPT_INT:
	case EV_OPT_ID:
		/* Bounded before the conversion: a stored value is untrusted. */
		ok = cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
		     v->valuedouble >= (o->kind == EV_OPT_ID ? 1 : o->lo) &&
		     v->valuedouble <= (o->kind == EV_OPT_ID ? 9e15 : o->hi);
		if (ok && o->kind == EV_OPT_ID)
			*(int64_t *)p = (int64_t)v->valuedouble;
		else if (ok)
			write_int(p, o->size, (int64_t)v->valuedouble);
		break;
	case EV_OPT_NUM:
		ok = cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
		     ((v->valuedouble >= o->lo && v->valuedouble <= o->hi) || v->valuedouble == *(double *)p);
		if (ok)
			*(double *)p = v->valuedouble;
		break;
	case EV_OPT_FN:
		break;
	}
	if (!ok)
		return ev_error_set(EV_E_INVALID, "stored configuration: %s: a value of the wrong type or out of range",
		                    o->key);
	if (o->has_off)
		*(bool *)field(opts, o->has_off) = true;
	return 0;
}

int ev_opt_from_json(const ev_cmd_spec *spec, void *opts, const cJSON *j)
{
	int rc = 0;
	for (const ev_opt *o = spec->opts; o && o->name && !rc; o++)
		if (o->key)
			rc = row_from_json(o, opts, j);
	for (const ev_opt *const *g = spec->groups; g && *g && !rc; g++)
		for (const ev_opt *o = *g; o->name && !rc; o++)
			if (o->key)
				rc = row_from_json(o, opts, j);
	return rc;
}
