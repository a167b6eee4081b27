/*
 * env_kv.c: the "kv" tool environment, a key-value store.
 *
 * Spec: {"type":"kv","data":{"key":"value",...},"read_only":false}; keys
 * and values are strings. Tools: get(key), set(key, value), delete(key),
 * list_keys(prefix=""). State: {"data":{...}} sorted by key.
 */
#include "suites/env_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 10000
#define MAX_KEY 256
#define MAX_VALUE ((size_t)64 << 10)
#define MAX_LIST 500

typedef struct {
	cJSON *data; /* object, kept sorted by key */
	bool read_only;
} kv;

static void kv_destroy(void *self)
{
	kv *k = self;
	if (!k)
		return;
	cJSON_Delete(k->data);
	free(k);
}

/* Inserts or replaces; false on no memory. Keys are kept in insertion
 * order and sorted where they are shown (list_keys, the state). */
static bool kv_put(kv *k, const char *key, const char *value)
{
	cJSON *v = cJSON_CreateString(value);
	if (!v)
		return false;
	cJSON *old = cJSON_GetObjectItemCaseSensitive(k->data, key);
	if (old)
		return cJSON_ReplaceItemInObjectCaseSensitive(k->data, key, v); /* sets the key */
	if (!cJSON_AddItemToObject(k->data, key, v)) {
		cJSON_Delete(v);
		return false;
	}
	return true;
}

static int cmp_item(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* The items of the store sorted by key (malloc'd, borrowed items). */
static const cJSON **sorted_items(const kv *k, int *n_out)
{
	int n = cJSON_GetArraySize(k->data);
	const cJSON **v = malloc((size_t)(n ? n : 1) * sizeof *v);
	if (!v)
		return NULL;
	int i = 0;
	for (const cJSON *c = k->data->child; c && i < n; c = c->next)
		v[i++] = c;
	qsort(v, (size_t)i, sizeof *v, cmp_item);
	*n_out = i;
	return v;
}

static const char *check_key(const char *key)
{
	if (!*key)
		return "empty key";
	if (strlen(key) > MAX_KEY)
		return "key longer than 256 bytes";
	return NULL;
}

static int kv_create(void **self, const cJSON *spec, const char *what)
{
	kv *k = calloc(1, sizeof *k);
	int rc = 0;
	if (!k || !(k->data = cJSON_CreateObject())) {
		kv_destroy(k);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, spec) {
		if (strcmp(f->string, "type") && strcmp(f->string, "data") && strcmp(f->string, "read_only")) {
			rc = ev_error_set(EV_E_INVALID, "%s.%.64s: unknown field (data, read_only)", what, f->string);
			goto done;
		}
	}
	const cJSON *ro = cJSON_GetObjectItemCaseSensitive(spec, "read_only");
	if (ro && !cJSON_IsBool(ro)) {
		rc = ev_error_set(EV_E_INVALID, "%s.read_only: expected true or false", what);
		goto done;
	}
	k->read_only = cJSON_IsTrue(ro);
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(spec, "data");
	if (data && !cJSON_IsObject(data)) {
		rc = ev_error_set(EV_E_INVALID, "%s.data: expected an object of key: string", what);
		goto done;
	}
	int n = 0;
	cJSON_ArrayForEach(f, data) {
		const char *why = check_key(f->string);
		if (!why && !cJSON_IsString(f))
			why = "expected a string value";
		if (!why && strlen(f->valuestring) > MAX_VALUE)
			why = "value longer than 64 KiB";
		if (!why && cJSON_GetObjectItemCaseSensitive(k->data, f->string))
			why = "given twice";
		if (!why && ++n > MAX_KEYS)
			why = "more than 10000 keys";
		if (why) {
			rc = ev_error_set(EV_E_INVALID, "%s.data.%.200s: %s", what, f->string, why);
			goto done;
		}
		if (!kv_put(k, f->string, f->valuestring)) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
	}
done:
	if (rc) {
		kv_destroy(k);
		return rc;
	}
	*self = k;
	return 0;
}

static cJSON *kv_tools(const void *self)
{
	(void)self;
	cJSON *a = cJSON_CreateArray();
	const char *key = "{\"key\":{\"type\":\"string\"}}";
	if (!a || !ev_env_tool_add(a, "get", "Get the value stored under a key.", key, "[\"key\"]") ||
	    !ev_env_tool_add(a, "set", "Store a string value under a key (replacing any value).",
	                     "{\"key\":{\"type\":\"string\"},\"value\":{\"type\":\"string\"}}", "[\"key\",\"value\"]") ||
	    !ev_env_tool_add(a, "delete", "Delete a key.", key, "[\"key\"]") ||
	    !ev_env_tool_add(a, "list_keys", "List the keys, in order, that start with a prefix (all by default).",
	                     "{\"prefix\":{\"type\":\"string\"}}", "[]")) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

static cJSON *obj2(const char *k1, cJSON *v1, const char *k2, cJSON *v2)
{
	cJSON *o = cJSON_CreateObject();
	if (!o || !v1 || (k2 && !v2)) {
		cJSON_Delete(o);
		cJSON_Delete(v1);
		cJSON_Delete(v2);
		return NULL;
	}
	cJSON_AddItemToObject(o, k1, v1);
	if (k2)
		cJSON_AddItemToObject(o, k2, v2);
	return o;
}

static int kv_exec(void *self, const char *name, const cJSON *args, cJSON **result)
{
	kv *k = self;
	cJSON *err = NULL;
	static const char *const k_key[] = {"key", NULL};
	static const char *const k_set[] = {"key", "value", NULL};
	static const char *const k_list[] = {"prefix", NULL};
	bool set = !strcmp(name, "set"), list = !strcmp(name, "list_keys"), del = !strcmp(name, "delete");
	if ((err = ev_env_check_args(args, set ? k_set : list ? k_list : k_key))) {
		*result = err;
		return 0;
	}
	if (list) {
		const char *prefix = ev_env_arg_str(args, "prefix", false, &err);
		if (err) {
			*result = err;
			return 0;
		}
		size_t pl = prefix ? strlen(prefix) : 0;
		cJSON *keys = cJSON_CreateArray();
		int n = 0, n_items = 0;
		bool more = false;
		const cJSON **items = sorted_items(k, &n_items);
		if (!items) {
			cJSON_Delete(keys);
			return ev_error_set(EV_E_NOMEM, "out of memory");
		}
		for (int i = 0; i < n_items; i++) {
			const cJSON *c = items[i];
			if (pl && strncmp(c->string, prefix, pl))
				continue;
			if (n++ >= MAX_LIST) {
				more = true;
				break;
			}
			cJSON *s = cJSON_CreateString(c->string);
			if (!s || !keys) {
				cJSON_Delete(s);
				cJSON_Delete(keys);
				free(items);
				return ev_error_set(EV_E_NOMEM, "out of memory");
			}
			cJSON_AddItemToArray(keys, s);
		}
		free(items);
		*result = obj2("keys", keys, "truncated", cJSON_CreateBool(more));
		return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	const char *key = ev_env_arg_str(args, "key", true, &err);
	const char *why = err ? NULL : check_key(key);
	if (err || why) {
		*result = err ? err : ev_env_error("%s", why);
		return 0;
	}
	if ((set || del) && k->read_only) {
		*result = ev_env_error("%.200s: permission denied (the store is read-only)", key);
		return 0;
	}
	cJSON *cur = cJSON_GetObjectItemCaseSensitive(k->data, key);
	if (set) {
		const char *value = ev_env_arg_str(args, "value", true, &err);
		if (err) {
			*result = err;
			return 0;
		}
		if (strlen(value) > MAX_VALUE) {
			*result = ev_env_error("value longer than 64 KiB");
			return 0;
		}
		if (!cur && cJSON_GetArraySize(k->data) >= MAX_KEYS) {
			*result = ev_env_error("the store is full (10000 keys)");
			return 0;
		}
		if (!kv_put(k, key, value))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		*result = obj2("key", cJSON_CreateString(key), "value", cJSON_CreateString(value));
		return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!cur) {
		*result = ev_env_error("%.200s: no such key", key);
		return 0;
	}
	if (del) {
		*result = obj2("deleted", cJSON_CreateString(key), NULL, NULL);
		if (*result)
			cJSON_Delete(cJSON_DetachItemViaPointer(k->data, cur));
	} else {
		*result = obj2("key", cJSON_CreateString(key), "value", cJSON_CreateString(cur->valuestring));
	}
	return *result ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static cJSON *kv_state(const void *self)
{
	const kv *k = self;
	int n = 0;
	const cJSON **items = sorted_items(k, &n);
	cJSON *data = items ? cJSON_CreateObject() : NULL;
	for (int i = 0; data && i < n; i++) {
		if (!cJSON_AddStringToObject(data, items[i]->string, items[i]->valuestring)) {
			cJSON_Delete(data);
			data = NULL;
		}
	}
	free(items);
	return obj2("data", data, NULL, NULL);
}

const ev_env_kind ev_env_kind_kv = {"kv", kv_create, kv_tools, kv_exec, kv_state, kv_destroy};
