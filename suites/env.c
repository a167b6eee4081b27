/*
 * env.c: tool environments: building them from a spec, dispatching calls
 * to the kind that owns the tool, the combined state, and the subset
 * comparison of a state with an expected one.
 */
#include "suites/env_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENVS 8
#define MAX_SPEC_BYTES ((size_t)16 << 20)

static const ev_env_kind *const kinds[] = {&ev_env_kind_fs, &ev_env_kind_kv, &ev_env_kind_sqlite,
                                           &ev_env_kind_calculator};

typedef struct {
	const ev_env_kind *kind;
	void *self;
	cJSON *tools;
} one_env;

struct ev_env {
	one_env envs[MAX_ENVS];
	int n;
	char *tools_json;
};

cJSON *ev_env_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *o = cJSON_CreateObject();
	if (o && !cJSON_AddStringToObject(o, "error", msg)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

bool ev_env_tool_add(cJSON *arr, const char *name, const char *desc, const char *props_json,
                     const char *required_json)
{
	cJSON *t = cJSON_CreateObject(), *f = NULL, *p = NULL;
	if (!t || !cJSON_AddStringToObject(t, "type", "function") || !(f = cJSON_AddObjectToObject(t, "function")) ||
	    !cJSON_AddStringToObject(f, "name", name) || !cJSON_AddStringToObject(f, "description", desc) ||
	    !(p = cJSON_AddObjectToObject(f, "parameters")) || !cJSON_AddStringToObject(p, "type", "object")) {
		cJSON_Delete(t);
		return false;
	}
	cJSON *props = cJSON_Parse(props_json), *req = cJSON_Parse(required_json);
	if (!props || !req) {
		cJSON_Delete(props);
		cJSON_Delete(req);
		cJSON_Delete(t);
		return false;
	}
	cJSON_AddItemToObject(p, "properties", props);
	cJSON_AddItemToObject(p, "required", req);
	cJSON_AddItemToArray(arr, t);
	return true;
}

const char *ev_env_arg_str(const cJSON *args, const char *key, bool required, cJSON **err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
	*err = NULL;
	if (!v) {
		if (required)
			*err = ev_env_error("missing argument \"%s\"", key);
		return NULL;
	}
	if (!cJSON_IsString(v)) {
		*err = ev_env_error("argument \"%s\": expected a string", key);
		return NULL;
	}
	if (strlen(v->valuestring) > EV_ENV_MAX_ARG) {
		*err = ev_env_error("argument \"%s\": longer than %zu bytes", key, EV_ENV_MAX_ARG);
		return NULL;
	}
	return v->valuestring;
}

cJSON *ev_env_check_args(const cJSON *args, const char *const *known)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, args) {
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = !strcmp(a->string, *k);
		if (!ok)
			return ev_env_error("unexpected argument \"%.100s\"", a->string);
	}
	return NULL;
}

void ev_env_free(ev_env *e)
{
	if (!e)
		return;
	for (int i = 0; i < e->n; i++) {
		e->envs[i].kind->destroy(e->envs[i].self);
		cJSON_Delete(e->envs[i].tools);
	}
	free(e->tools_json);
	free(e);
}

static int add_one(ev_env *e, const cJSON *spec, const char *what)
{
	if (!cJSON_IsObject(spec))
		return ev_error_set(EV_E_INVALID, "%s: expected an object with \"type\"", what);
	const char *type = ev_json_str(spec, "type", NULL);
	if (!type)
		return ev_error_set(EV_E_INVALID, "%s.type: missing (fs, kv, sqlite, calculator)", what);
	const ev_env_kind *k = NULL;
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds && !k; i++)
		if (!strcmp(kinds[i]->type, type))
			k = kinds[i];
	if (!k)
		return ev_error_set(EV_E_INVALID, "%s.type: unknown environment '%.64s' (fs, kv, sqlite, calculator)", what,
		                    type);
	for (int i = 0; i < e->n; i++)
		if (e->envs[i].kind == k)
			return ev_error_set(EV_E_INVALID, "%s: environment '%s' given twice", what, type);
	if (e->n >= MAX_ENVS)
		return ev_error_set(EV_E_LIMIT, "%s: more than %d environments", what, MAX_ENVS);
	one_env *o = &e->envs[e->n];
	int rc = k->create(&o->self, spec, what);
	if (rc)
		return rc;
	o->kind = k;
	e->n++;
	if (!(o->tools = k->tools(o->self)))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	return 0;
}

static const one_env *owner_of(const ev_env *e, const char *name)
{
	for (int i = 0; i < e->n; i++) {
		const cJSON *t;
		cJSON_ArrayForEach(t, e->envs[i].tools) {
			const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
			if (!strcmp(ev_json_str(f, "name", ""), name))
				return &e->envs[i];
		}
	}
	return NULL;
}

int ev_env_new(ev_env **out, const char *spec_json, const char *what)
{
	*out = NULL;
	if (!what)
		what = "environment";
	if (!spec_json)
		return ev_error_set(EV_E_INVALID, "%s: missing", what);
	size_t len = strlen(spec_json);
	if (len > MAX_SPEC_BYTES)
		return ev_error_set(EV_E_LIMIT, "%s: over %zu bytes", what, MAX_SPEC_BYTES);
	cJSON *spec = NULL, *all = NULL;
	ev_env *e = calloc(1, sizeof *e);
	int rc = e ? ev_json_parse(&spec, spec_json, len, what) : ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc)
		goto done;
	if (cJSON_IsArray(spec)) {
		if (cJSON_GetArraySize(spec) == 0) {
			rc = ev_error_set(EV_E_INVALID, "%s: an empty list of environments", what);
			goto done;
		}
		int i = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, spec) {
			char w[512];
			snprintf(w, sizeof w, "%s[%d]", what, i++);
			if ((rc = add_one(e, it, w)))
				goto done;
		}
	} else if ((rc = add_one(e, spec, what))) {
		goto done;
	}
	/* Tool names must be unique over all the environments. */
	if (!(all = cJSON_CreateArray())) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (int i = 0; i < e->n; i++) {
		const cJSON *t;
		cJSON_ArrayForEach(t, e->envs[i].tools) {
			const char *name = ev_json_str(cJSON_GetObjectItemCaseSensitive(t, "function"), "name", "");
			if (owner_of(e, name) != &e->envs[i]) {
				rc = ev_error_set(EV_E_INVALID, "%s: tool '%s' offered by two environments", what, name);
				goto done;
			}
			cJSON *dup = cJSON_Duplicate(t, true);
			if (!dup) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				goto done;
			}
			cJSON_AddItemToArray(all, dup);
		}
	}
	if (!(e->tools_json = ev_json_print(all)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	cJSON_Delete(all);
	cJSON_Delete(spec);
	if (rc) {
		ev_env_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

const char *ev_env_tools_json(const ev_env *e) { return e->tools_json; }

bool ev_env_has_tool(const ev_env *e, const char *name) { return name && owner_of(e, name) != NULL; }

/* Prints a result, cutting one that is too long for a tool message. */
static int print_result(char **out, const cJSON *r)
{
	char *t = ev_json_print(r);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (strlen(t) > EV_ENV_MAX_RESULT) {
		free(t);
		t = ev_asprintf("{\"error\":\"the result is longer than %zu bytes; ask for less\"}", EV_ENV_MAX_RESULT);
		if (!t)
			return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	*out = t;
	return 0;
}

int ev_env_execute(ev_env *e, const char *name, const char *arguments_json, char **result_json)
{
	*result_json = NULL;
	cJSON *args = NULL, *res = NULL;
	int rc = 0;
	const one_env *o = name ? owner_of(e, name) : NULL;
	if (!o) {
		res = ev_env_error("unknown tool '%.100s'", name ? name : "");
		goto done;
	}
	const char *a = arguments_json && *arguments_json ? arguments_json : "{}";
	size_t len = strlen(a);
	if (len > EV_ENV_MAX_ARG * 2) {
		res = ev_env_error("arguments: longer than %zu bytes", EV_ENV_MAX_ARG * 2);
		goto done;
	}
	if (!(args = cJSON_ParseWithLength(a, len)) || !cJSON_IsObject(args)) {
		res = ev_env_error("arguments: expected a JSON object");
		goto done;
	}
	rc = o->kind->exec(o->self, name, args, &res);
done:
	if (!rc && !res)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = print_result(result_json, res);
	cJSON_Delete(res);
	cJSON_Delete(args);
	return rc;
}

int ev_env_state_json(const ev_env *e, char **out)
{
	*out = NULL;
	cJSON *st = cJSON_CreateObject();
	for (int i = 0; st && i < e->n; i++) {
		cJSON *one = e->envs[i].kind->state(e->envs[i].self);
		if (!one) {
			cJSON_Delete(st);
			st = NULL;
			break;
		}
		cJSON_AddItemToObject(st, e->envs[i].kind->type, one);
	}
	*out = st ? ev_json_print(st) : NULL;
	cJSON_Delete(st);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* ---- subset comparison ----------------------------------------------------- */

static const char *type_name(const cJSON *v)
{
	if (cJSON_IsObject(v))
		return "an object";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNull(v))
		return "null";
	return "nothing";
}

/* A short printed form of a value for the detail. */
static char *short_text(const cJSON *v)
{
	char *t = v ? ev_json_print(v) : ev_strdup("(absent)");
	if (t && strlen(t) > 120)
		memcpy(t + 115, "...\0", 4);
	return t;
}

/* Returned by differ when no memory is left for a detail: still a
 * mismatch, never freed. */
static char nomem_detail[] = "out of memory";

static char *differ(const char *path, const cJSON *want, const cJSON *got, const char *why)
{
	char *w = short_text(want), *g = short_text(got);
	char *d = why ? ev_asprintf("%s: %s", *path ? path : "state", why)
	              : ev_asprintf("%s: expected %s, got %s", *path ? path : "state", w ? w : "?", g ? g : "?");
	free(w);
	free(g);
	return d ? d : nomem_detail;
}

/* Returns NULL when got matches want, else a malloc'd detail ("" when no
 * memory was left for it). depth bounds the recursion (cJSON already
 * limits nesting on parse). */
static char *match(const cJSON *want, const cJSON *got, const char *path, int depth)
{
	char sub[1024];
	if (depth > 64)
		return differ(path, NULL, NULL, "nested too deep");
	if (!got)
		return differ(path, want, NULL, NULL);
	if (cJSON_IsObject(want)) {
		if (!cJSON_IsObject(got))
			return differ(path, want, got, NULL);
		const cJSON *k;
		cJSON_ArrayForEach(k, want) {
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k->string);
			char *d = match(k, cJSON_GetObjectItemCaseSensitive(got, k->string), sub, depth + 1);
			if (d)
				return d;
		}
		return NULL;
	}
	if (cJSON_IsArray(want)) {
		if (!cJSON_IsArray(got))
			return differ(path, want, got, NULL);
		int nw = cJSON_GetArraySize(want), ng = cJSON_GetArraySize(got);
		if (nw != ng) {
			char why[96];
			snprintf(why, sizeof why, "expected %d items, got %d", nw, ng);
			return differ(path, NULL, NULL, why);
		}
		const cJSON *a = want->child, *b = got->child;
		for (int i = 0; a && b; i++, a = a->next, b = b->next) {
			snprintf(sub, sizeof sub, "%s[%d]", path, i);
			char *d = match(a, b, sub, depth + 1);
			if (d)
				return d;
		}
		return NULL;
	}
	if (cJSON_IsNumber(want)) {
		if (!cJSON_IsNumber(got))
			return differ(path, want, got, NULL);
		double x = want->valuedouble, y = got->valuedouble;
		double tol = 1e-9 * fmax(1.0, fmax(fabs(x), fabs(y)));
		return fabs(x - y) <= tol ? NULL : differ(path, want, got, NULL);
	}
	if (strcmp(type_name(want), type_name(got))) {
		char why[160];
		char *w = short_text(want);
		snprintf(why, sizeof why, "expected %s, got %s", w ? w : "?", type_name(got));
		free(w);
		return differ(path, NULL, NULL, why);
	}
	if (cJSON_IsString(want))
		return strcmp(want->valuestring, got->valuestring) ? differ(path, want, got, NULL) : NULL;
	if (cJSON_IsBool(want))
		return cJSON_IsTrue(want) == cJSON_IsTrue(got) ? NULL : differ(path, want, got, NULL);
	return NULL; /* both null */
}

int ev_env_state_match(bool *ok, char **detail, const char *state_json, const char *expected_json)
{
	*ok = false;
	*detail = NULL;
	cJSON *st = NULL, *ex = NULL;
	int rc;
	if ((rc = ev_json_parse(&st, state_json ? state_json : "", state_json ? strlen(state_json) : 0, "state")) ||
	    (rc = ev_json_parse(&ex, expected_json ? expected_json : "", expected_json ? strlen(expected_json) : 0,
	                        "expected_state")))
		goto done;
	char *d = match(ex, st, "", 0);
	*ok = d == NULL;
	*detail = d == nomem_detail ? NULL : d;
done:
	cJSON_Delete(st);
	cJSON_Delete(ex);
	return rc;
}
