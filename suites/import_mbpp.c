/*
 * import_mbpp.c: the MBPP importer (Mostly Basic Python Problems, as
 * published: mbpp.jsonl, and the "sanitized" variant with prompt and
 * test_imports).
 */
#include "suites/suites.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FILE ((size_t)256 << 20)
#define MAX_ID 64

/* The task id as text: MBPP's are integers; a string is kept as it is. */
static int id_text(char out[MAX_ID + 1], const cJSON *o, const char *where)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "task_id");
	if (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble && v->valuedouble >= 0 &&
	    v->valuedouble < 1e15) {
		snprintf(out, MAX_ID + 1, "%lld", (long long)v->valuedouble);
		return 0;
	}
	if (cJSON_IsString(v) && v->valuestring[0] && strlen(v->valuestring) <= MAX_ID) {
		snprintf(out, MAX_ID + 1, "%s", v->valuestring);
		return 0;
	}
	return ev_error_set(EV_E_INVALID, "%s: task_id: %s", where,
	                    v ? "expected a whole number or a short string" : "missing");
}

/* A list of strings (copied into `to` under `key`), required or not. */
static int str_list(cJSON *to, const cJSON *o, const char *key, bool required, const char *where)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return ev_error_set(EV_E_INVALID, "%s: %s: missing", where, key);
		return cJSON_AddArrayToObject(to, key) ? 0 : ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	}
	if (!cJSON_IsArray(v))
		return ev_error_set(EV_E_INVALID, "%s: %s: expected a list of strings", where, key);
	size_t i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e))
			return ev_error_set(EV_E_INVALID, "%s: %s[%zu]: expected a string", where, key, i);
		i++;
	}
	if (required && !i)
		return ev_error_set(EV_E_INVALID, "%s: %s: empty", where, key);
	cJSON *copy = cJSON_Duplicate(v, 1);
	if (!copy || !cJSON_AddItemToObject(to, key, copy)) {
		cJSON_Delete(copy);
		return ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	}
	return 0;
}

static const char *opt_str(const cJSON *o, const char *key, const char *where, int *rc)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v)) {
		*rc = ev_error_set(EV_E_INVALID, "%s: %s: expected a string", where, key);
		return NULL;
	}
	return v->valuestring;
}

static int mbpp_record(void *arg, const cJSON *o, const char *where)
{
	ev_import_ctx *c = arg;
	char id[MAX_ID + 1];
	int rc = id_text(id, o, where);
	if (rc)
		return rc;
	const char *text = opt_str(o, "text", where, &rc);
	if (!text && !rc)
		text = opt_str(o, "prompt", where, &rc);
	const char *code = rc ? NULL : opt_str(o, "code", where, &rc);
	const char *setup = rc ? NULL : opt_str(o, "test_setup_code", where, &rc);
	if (rc)
		return rc;
	if (!text || !text[0])
		return ev_error_set(EV_E_INVALID, "%s: text: missing (nor is there a prompt)", where);
	if (!code)
		return ev_error_set(EV_E_INVALID, "%s: code: missing", where);
	if ((rc = ev_import_keep_id(c, id, where)))
		return rc;

	cJSON *s = cJSON_CreateObject(), *t = NULL, *m = NULL;
	ev_buf input = EV_BUF_INIT((size_t)16 << 20), setup_b = EV_BUF_INIT((size_t)16 << 20);
	if (!s || !(t = cJSON_CreateObject())) {
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
		goto done;
	}
	if ((rc = str_list(t, o, "test_list", true, where)) ||
	    (rc = str_list(t, o, "challenge_test_list", false, where)))
		goto done;
	/* The sanitized variant lists its imports instead of a setup string. */
	const cJSON *imports = cJSON_GetObjectItemCaseSensitive(o, "test_imports");
	if (setup && setup[0])
		(void)ev_buf_printf(&setup_b, "%s\n", setup);
	if (cJSON_IsArray(imports)) {
		const cJSON *e;
		cJSON_ArrayForEach(e, imports) {
			if (!cJSON_IsString(e)) {
				rc = ev_error_set(EV_E_INVALID, "%s: test_imports: expected a list of strings", where);
				goto done;
			}
			(void)ev_buf_printf(&setup_b, "%s\n", e->valuestring);
		}
	}
	(void)ev_buf_printf(&input, "%s\nYour code should pass these tests:\n\n", text);
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "test_list"))
		(void)ev_buf_printf(&input, "%s\n", e->valuestring);
	if (!input.data || !cJSON_AddStringToObject(t, "style", "mbpp") ||
	    !cJSON_AddStringToObject(t, "test_setup_code", setup_b.data ? setup_b.data : "") ||
	    !cJSON_AddStringToObject(s, "id", id) || !cJSON_AddStringToObject(s, "input", input.data)) {
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory or too long", where);
		goto done;
	}
	cJSON_AddItemToObject(s, "tests", t);
	t = NULL;
	if (!(m = cJSON_AddObjectToObject(s, "metadata")) || !cJSON_AddStringToObject(m, "code", code)) {
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
		goto done;
	}
	char *line = ev_json_print(s);
	if (!line)
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", where);
	else if (ev_buf_puts(&c->out, line) || ev_buf_putc(&c->out, '\n'))
		rc = ev_error_set(EV_E_LIMIT, "%s: suite larger than %zu bytes", where, c->out.max);
	free(line);
done:
	cJSON_Delete(t);
	cJSON_Delete(s);
	ev_buf_free(&input);
	ev_buf_free(&setup_b);
	return rc;
}

int ev_import_mbpp(const char *jsonl_or_gz, const char *out_dir)
{
	if (!jsonl_or_gz || !out_dir)
		return ev_error_set(EV_E_INVALID, "ev_import_mbpp: the file and out_dir are needed");
	static const char suite[] =
		"{\"name\":\"mbpp\",\"version\":\"1\",\"kind\":\"coding\","
		"\"description\":\"MBPP (Google): write a Python function from a short description; judged by its "
		"asserts\",\"system_prompt\":\"Write the Python function. Answer with the code in one ```python code "
		"block.\",\"generation\":{\"max_tokens\":1024,\"temperature\":0},\"checker\":{\"type\":\"mbpp\"}}\n";
	return ev_import_jsonl(jsonl_or_gz, MAX_FILE, mbpp_record, suite, out_dir);
}
