/*
 * engine/tokenizer/chat_template.c: finding a checkpoint's chat template and
 * rendering it with the variables transformers gives it (see
 * chat_template.h).
 */
#include "engine/tokenizer/chat_template.h"

#include <string.h>

#include "engine/tokenizer/jinja.h"
#include "engine/tokenizer/tokenizer.h"

struct eng_chat_template {
	eng_jinja *jinja;
	char *source;
	cJSON *specials; /* {"bos_token": "<s>", ...} */
};

static const char *const SPECIAL_KEYS[] = {"bos_token", "eos_token", "unk_token", "sep_token",
					   "pad_token", "cls_token", "mask_token", NULL};

/* A special token as a string: "<s>" or {"content": "<s>", ...}. */
static const char *token_text(const cJSON *v)
{
	if (cJSON_IsString(v))
		return v->valuestring;
	if (cJSON_IsObject(v))
		return ev_json_str(v, "content", NULL);
	return NULL;
}

static int pick(char **src, const cJSON *ct, const char *name, const char *path)
{
	if (cJSON_IsString(ct)) {
		if (name && strcmp(name, "default"))
			return ev_error_set(EV_E_NOTFOUND, "%s: the chat template has no variant \"%s\" (only one template)",
					    path, name);
		return (*src = ev_strdup(ct->valuestring)) ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!cJSON_IsArray(ct))
		return ev_error_set(EV_E_INVALID, "%s: chat_template: expected a string or a list of {name, template}", path);
	const char *want = name ? name : "default";
	const cJSON *it;
	ev_buf names = EV_BUF_INIT(4096);
	cJSON_ArrayForEach(it, ct)
	{
		const char *n = ev_json_str(it, "name", ""), *t = ev_json_str(it, "template", NULL);
		ev_buf_printf(&names, "%s%s", names.len ? ", " : "", n);
		if (t && !strcmp(n, want)) {
			ev_buf_free(&names);
			return (*src = ev_strdup(t)) ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
		}
	}
	int rc = ev_error_set(EV_E_NOTFOUND, "%s: no chat template named \"%s\" (there are: %s)", path, want,
			      names.data ? names.data : "none");
	ev_buf_free(&names);
	return rc;
}

int eng_chat_template_load(eng_chat_template **out, const char *dir, const char *name)
{
	*out = NULL;
	eng_chat_template *t = calloc(1, sizeof *t);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	char *path = ev_asprintf("%s/tokenizer_config.json", dir), *text = NULL;
	size_t len = 0;
	cJSON *cfg = NULL;
	int rc = path ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc && (rc = ev_file_read(&text, &len, path, ENG_TOK_MAX_CONFIG)) == EV_E_NOTFOUND) {
		ev_error_clear();
		rc = 0;
	}
	if (!rc && text && (rc = ev_json_parse(&cfg, text, len, path)) == 0 && !cJSON_IsObject(cfg))
		rc = ev_error_set(EV_E_INVALID, "%s: expected a JSON object", path);
	if (!rc && !(t->specials = cJSON_CreateObject()))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; !rc && SPECIAL_KEYS[i]; i++) {
		const char *v = token_text(cJSON_GetObjectItemCaseSensitive(cfg, SPECIAL_KEYS[i]));
		if (v && !cJSON_AddStringToObject(t->specials, SPECIAL_KEYS[i], v))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
	char what[600];
	if (!rc && ct && !cJSON_IsNull(ct)) {
		rc = pick(&t->source, ct, name, path);
		snprintf(what, sizeof what, "%s: chat_template", path);
	} else if (!rc) {
		/* transformers 4.43+ keeps it in its own file */
		free(path);
		path = ev_asprintf("%s/chat_template.jinja", dir);
		rc = path ? ev_file_read(&t->source, &len, path, ENG_JINJA_MAX_TEMPLATE) : EV_E_NOMEM;
		if (rc == EV_E_NOTFOUND)
			rc = ev_error_set(EV_E_NOTFOUND, "%s: no chat template (neither tokenizer_config.json's chat_template "
					  "nor chat_template.jinja)", dir);
		snprintf(what, sizeof what, "%s", path ? path : "chat_template.jinja");
	}
	if (!rc)
		rc = eng_jinja_compile(&t->jinja, t->source, strlen(t->source), what);
	cJSON_Delete(cfg);
	free(text);
	free(path);
	if (rc) {
		eng_chat_template_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void eng_chat_template_free(eng_chat_template *t)
{
	if (!t)
		return;
	eng_jinja_free(t->jinja);
	free(t->source);
	cJSON_Delete(t->specials);
	free(t);
}

const char *eng_chat_template_source(const eng_chat_template *t) { return t ? t->source : NULL; }

int eng_chat_template_render(const eng_chat_template *t, const cJSON *messages, const cJSON *tools,
			     bool add_generation_prompt, const cJSON *extra, char **out, size_t *out_len)
{
	*out = NULL;
	/* The variables by reference: nothing is copied but the object holding them. */
	cJSON *vars = cJSON_CreateObject();
	int rc = vars ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	for (const cJSON *s = t->specials->child; !rc && s; s = s->next)
		if (!cJSON_AddItemReferenceToObject(vars, s->string, (cJSON *)s))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc && (!cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)messages) ||
		    !(tools ? cJSON_AddItemReferenceToObject(vars, "tools", (cJSON *)tools) : cJSON_AddNullToObject(vars, "tools") != NULL) ||
		    !cJSON_AddNullToObject(vars, "documents") ||
		    !cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	/* keyword variables win, as in apply_chat_template(**kwargs) */
	for (const cJSON *e = extra ? extra->child : NULL; !rc && e; e = e->next) {
		cJSON_DeleteItemFromObjectCaseSensitive(vars, e->string);
		if (!cJSON_AddItemReferenceToObject(vars, e->string, (cJSON *)e))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!rc)
		rc = eng_jinja_render(t->jinja, vars, out, out_len);
	cJSON_Delete(vars);
	return rc;
}
