/*
 * engine/chat.c: the chat template families (ChatML with Qwen-style tools,
 * Llama-3 with JSON tool calls): recognising them in tokenizer_config.json,
 * rendering messages and tool definitions into prompt text, and parsing
 * tool calls back out of generated text.
 *
 * The templates are fixed C renderings of the two families, not a Jinja
 * interpreter: the checkpoint's own template only picks the family. JSON is
 * written the way the families' templates write it (Python's json.dumps
 * spacing: ", " and ": "), so the prompts read as the models were trained.
 */
#include "engine/tokenizer/tokenizer_int.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- families -------------------------------------------------------------- */

const char *eng_chat_family_name(eng_chat_family f)
{
	switch (f) {
	case ENG_CHAT_CHATML: return "chatml";
	case ENG_CHAT_LLAMA3: return "llama3";
	default: return NULL;
	}
}

eng_chat_family eng_chat_family_from_name(const char *name)
{
	if (!name)
		return ENG_CHAT_UNKNOWN;
	if (strcmp(name, "chatml") == 0 || strcmp(name, "qwen") == 0)
		return ENG_CHAT_CHATML;
	if (strcmp(name, "llama3") == 0 || strcmp(name, "llama-3") == 0)
		return ENG_CHAT_LLAMA3;
	return ENG_CHAT_UNKNOWN;
}

eng_chat_family eng_chat_family_from_template(const char *t)
{
	if (!t)
		return ENG_CHAT_UNKNOWN;
	if (strstr(t, "<|start_header_id|>") && strstr(t, "<|eot_id|>"))
		return ENG_CHAT_LLAMA3;
	if (strstr(t, "<|im_start|>"))
		return ENG_CHAT_CHATML;
	return ENG_CHAT_UNKNOWN;
}

/* chat_template is a string, or a list of {name, template} (the "default"
 * one, else the first one recognised). */
static eng_chat_family family_of_config(const cJSON *cfg)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
	if (cJSON_IsString(t))
		return eng_chat_family_from_template(t->valuestring);
	eng_chat_family found = ENG_CHAT_UNKNOWN;
	const cJSON *list = cJSON_IsArray(t) ? t : NULL, *it;
	cJSON_ArrayForEach(it, list)
	{
		eng_chat_family f = eng_chat_family_from_template(ev_json_str(it, "template", NULL));
		if (f && strcmp(ev_json_str(it, "name", ""), "default") == 0)
			return f;
		if (!found)
			found = f;
	}
	return found;
}

int eng_chat_family_detect(eng_chat_family *out, const char *config_or_dir)
{
	*out = ENG_CHAT_UNKNOWN;
	const char *p = config_or_dir;
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '{') { /* the JSON text itself */
		cJSON *cfg = NULL;
		int rc = ev_json_parse(&cfg, p, strlen(p), "tokenizer_config");
		if (!rc)
			*out = family_of_config(cfg);
		cJSON_Delete(cfg);
		return rc;
	}
	struct stat st;
	bool is_dir = stat(config_or_dir, &st) == 0 && S_ISDIR(st.st_mode);
	char *path = is_dir ? ev_asprintf("%s/tokenizer_config.json", config_or_dir) : ev_strdup(config_or_dir);
	char *text = NULL, *jinja = NULL;
	size_t len = 0;
	cJSON *cfg = NULL;
	int rc = path ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc)
		goto done;
	rc = ev_file_read(&text, &len, path, ENG_TOK_MAX_CONFIG);
	if (rc == 0) {
		if ((rc = ev_json_parse(&cfg, text, len, path)))
			goto done;
		*out = family_of_config(cfg);
	} else if (!is_dir || rc != EV_E_NOTFOUND) {
		goto done;
	}
	if (!*out && is_dir) {
		/* Newer checkpoints keep the template in its own file. */
		free(path);
		path = ev_asprintf("%s/chat_template.jinja", config_or_dir);
		int rj = path ? ev_file_read(&jinja, &len, path, ENG_TOK_MAX_CONFIG) : EV_E_NOMEM;
		if (rj == 0) {
			*out = eng_chat_family_from_template(jinja);
			rc = 0;
		} else if (rc) {
			rc = ev_error_set(EV_E_NOTFOUND, "%s: neither tokenizer_config.json nor chat_template.jinja",
					  config_or_dir);
		}
	}
	if (!rc)
		ev_error_clear();
done:
	cJSON_Delete(cfg);
	free(jinja);
	free(text);
	free(path);
	return rc;
}

size_t eng_chat_stop_ids(const eng_tokenizer *tok, eng_chat_family family, int32_t *ids, size_t max)
{
	static const char *const chatml[] = {"<|im_end|>", "<|endoftext|>", NULL};
	static const char *const llama3[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", NULL};
	const char *const *names = family == ENG_CHAT_CHATML ? chatml : family == ENG_CHAT_LLAMA3 ? llama3 : NULL;
	size_t n = 0;
	for (; names && *names && n < max; names++) {
		int32_t id = eng_token_id(tok, *names);
		if (id >= 0)
			ids[n++] = id;
	}
	return n;
}

/* ---- JSON the way the templates write it ------------------------------------ */

static int json_py(ev_buf *b, const cJSON *v)
{
	int rc = 0;
	if (cJSON_IsNull(v))
		return ev_buf_puts(b, "null");
	if (cJSON_IsBool(v))
		return ev_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (!isfinite(d))
			return ev_buf_puts(b, "null");
		if (d == floor(d) && fabs(d) < 9007199254740992.0)
			return ev_buf_printf(b, "%.0f", d);
		char tmp[40];
		snprintf(tmp, sizeof tmp, "%.15g", d);
		if (strtod(tmp, NULL) != d)
			snprintf(tmp, sizeof tmp, "%.17g", d);
		return ev_buf_puts(b, tmp);
	}
	if (cJSON_IsString(v))
		return ev_json_buf_str(b, v->valuestring);
	bool obj = cJSON_IsObject(v);
	if (!obj && !cJSON_IsArray(v))
		return ev_buf_puts(b, "null");
	rc = ev_buf_putc(b, obj ? '{' : '[');
	const cJSON *c;
	bool first = true;
	cJSON_ArrayForEach(c, v)
	{
		if (rc)
			break;
		if (!first)
			rc = ev_buf_puts(b, ", ");
		first = false;
		if (!rc && obj && !(rc = ev_json_buf_str(b, c->string ? c->string : "")))
			rc = ev_buf_puts(b, ": ");
		if (!rc)
			rc = json_py(b, c);
	}
	return rc ? rc : ev_buf_putc(b, obj ? '}' : ']');
}

/* ---- rendering --------------------------------------------------------------- */

static const char chatml_tools_intro[] =
	"\n\n# Tools\n\n"
	"You can call the functions described below to help answer the user.\n\n"
	"Their signatures are listed between <tools></tools> tags:\n<tools>";

static const char chatml_tools_outro[] =
	"\n</tools>\n\n"
	"To call a function, answer with a JSON object holding its name and arguments between "
	"<tool_call></tool_call> tags, one tag per call:\n"
	"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

static const char llama3_tools_intro[] =
	"You have access to the functions below. To call one, answer with only a JSON object of the "
	"form {\"name\": function name, \"parameters\": object of argument names and values}, "
	"using literal values, no variables.\n\n";

/* Malformed JSON in a request is a bad argument, not a parse failure of a
 * file: re-code the message ev_json_parse set. */
static int as_invalid(void)
{
	char msg[512];
	snprintf(msg, sizeof msg, "%s", ev_error_msg());
	return ev_error_set(EV_E_INVALID, "%s", msg);
}

typedef struct {
	const char *name;
	cJSON *args; /* owned; a JSON string when the arguments were not JSON */
} call_view;

/* Reads one message's tool_calls_json into name + parsed arguments. */
static int read_calls(call_view **out, size_t *n_out, const char *json, size_t mi, cJSON **root)
{
	*out = NULL;
	*n_out = 0;
	char what[64];
	snprintf(what, sizeof what, "messages[%zu].tool_calls", mi);
	int rc = ev_json_parse(root, json, strlen(json), what);
	if (rc)
		return as_invalid();
	if (!cJSON_IsArray(*root))
		return ev_error_set(EV_E_INVALID, "%s: expected an array", what);
	size_t n = (size_t)cJSON_GetArraySize(*root), i = 0;
	call_view *cv = calloc(n ? n : 1, sizeof *cv);
	if (!cv)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const cJSON *c;
	cJSON_ArrayForEach(c, *root)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		if (!cJSON_IsObject(fn))
			fn = c;
		const char *name = ev_json_str(fn, "name", NULL);
		if (!name) {
			rc = ev_error_set(EV_E_INVALID, "%s[%zu]: missing function.name", what, i);
			break;
		}
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (!a)
			a = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		cv[i].name = name;
		if (cJSON_IsString(a)) {
			/* OpenAI sends the arguments as JSON text. */
			cv[i].args = cJSON_Parse(a->valuestring);
			if (!cv[i].args)
				cv[i].args = cJSON_CreateString(a->valuestring);
		} else {
			cv[i].args = a ? cJSON_Duplicate(a, 1) : cJSON_CreateObject();
		}
		if (!cv[i].args) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		i++;
	}
	if (rc) {
		for (size_t k = 0; k < i; k++)
			cJSON_Delete(cv[k].args);
		free(cv);
		return rc;
	}
	*out = cv;
	*n_out = n;
	return 0;
}

static void free_calls(call_view *cv, size_t n)
{
	for (size_t k = 0; k < n; k++)
		cJSON_Delete(cv[k].args);
	free(cv);
}

/* Each tool on its own line, as JSON. */
static int render_tools(ev_buf *b, const cJSON *tools, const char *sep, bool sep_first)
{
	int rc = 0;
	const cJSON *t;
	bool first = true;
	cJSON_ArrayForEach(t, tools)
	{
		if (!first || sep_first)
			rc = ev_buf_puts(b, sep);
		first = false;
		if (rc || (rc = json_py(b, t)))
			return rc;
	}
	return 0;
}

static int check_tools(cJSON **out, const char *tools_json)
{
	*out = NULL;
	if (!tools_json || !*tools_json)
		return 0;
	int rc = ev_json_parse(out, tools_json, strlen(tools_json), "tools");
	if (rc)
		return as_invalid();
	if (!cJSON_IsArray(*out))
		return ev_error_set(EV_E_INVALID, "tools: expected an array");
	size_t i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, *out)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		if (!ev_json_str(cJSON_IsObject(fn) ? fn : t, "name", NULL))
			return ev_error_set(EV_E_INVALID, "tools[%zu]: missing function.name", i);
		i++;
	}
	if (i == 0) { /* an empty list is no tools */
		cJSON_Delete(*out);
		*out = NULL;
	}
	return 0;
}

static int check_roles(const eng_chat_msg *msgs, size_t n)
{
	static const char *const ok[] = {"system", "user", "assistant", "tool"};
	for (size_t i = 0; i < n; i++) {
		bool good = false;
		for (size_t k = 0; k < 4 && msgs[i].role; k++)
			good |= strcmp(msgs[i].role, ok[k]) == 0;
		if (!good)
			return ev_error_set(EV_E_INVALID, "messages[%zu].role: \"%.32s\" is not system, user, assistant or tool",
					    i, msgs[i].role ? msgs[i].role : "(null)");
	}
	return 0;
}

static const char *text_of(const eng_chat_msg *m) { return m->content ? m->content : ""; }

static int render_chatml(ev_buf *b, const eng_chat_msg *msgs, size_t n, const cJSON *tools, bool gen)
{
	int rc = 0;
	size_t i = 0;
	bool sys = n > 0 && strcmp(msgs[0].role, "system") == 0;
	if (tools) {
		rc = ev_buf_printf(b, "<|im_start|>system\n%s", sys ? text_of(&msgs[0]) : "You are a helpful assistant.");
		if (!rc && !(rc = ev_buf_puts(b, chatml_tools_intro)) && !(rc = render_tools(b, tools, "\n", true)))
			rc = ev_buf_puts(b, chatml_tools_outro);
		if (!rc)
			rc = ev_buf_puts(b, "<|im_end|>\n");
		i = sys;
	}
	for (; i < n && !rc; i++) {
		const eng_chat_msg *m = &msgs[i];
		if (strcmp(m->role, "tool") == 0) {
			/* A run of tool results is one user turn. */
			bool first = i == 0 || strcmp(msgs[i - 1].role, "tool") != 0;
			bool last = i + 1 == n || strcmp(msgs[i + 1].role, "tool") != 0;
			if (first)
				rc = ev_buf_puts(b, "<|im_start|>user");
			if (!rc)
				rc = ev_buf_printf(b, "\n<tool_response>\n%s\n</tool_response>", text_of(m));
			if (!rc && last)
				rc = ev_buf_puts(b, "<|im_end|>\n");
			continue;
		}
		if (strcmp(m->role, "assistant") == 0 && m->tool_calls_json && *m->tool_calls_json) {
			call_view *cv = NULL;
			size_t nc = 0;
			cJSON *root = NULL;
			if ((rc = read_calls(&cv, &nc, m->tool_calls_json, i, &root)) == 0) {
				rc = ev_buf_puts(b, "<|im_start|>assistant");
				if (!rc && *text_of(m))
					rc = ev_buf_printf(b, "\n%s", text_of(m));
				for (size_t k = 0; k < nc && !rc; k++) {
					if (!(rc = ev_buf_puts(b, "\n<tool_call>\n{\"name\": ")) &&
					    !(rc = ev_json_buf_str(b, cv[k].name)) &&
					    !(rc = ev_buf_puts(b, ", \"arguments\": ")) && !(rc = json_py(b, cv[k].args)))
						rc = ev_buf_puts(b, "}\n</tool_call>");
				}
				if (!rc)
					rc = ev_buf_puts(b, "<|im_end|>\n");
			}
			free_calls(cv, nc);
			cJSON_Delete(root);
			continue;
		}
		rc = ev_buf_printf(b, "<|im_start|>%s\n%s<|im_end|>\n", m->role, text_of(m));
	}
	if (!rc && gen)
		rc = ev_buf_puts(b, "<|im_start|>assistant\n");
	return rc;
}

static int llama3_header(ev_buf *b, const char *role)
{
	return ev_buf_printf(b, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
}

static int render_llama3(ev_buf *b, const eng_chat_msg *msgs, size_t n, const cJSON *tools, bool gen)
{
	int rc = ev_buf_puts(b, "<|begin_of_text|>");
	size_t i = 0;
	bool sys = n > 0 && strcmp(msgs[0].role, "system") == 0;
	/* The tools go into the first user message, or into the system
	 * message when there is no user message. */
	size_t first_user = n;
	for (size_t k = 0; k < n; k++)
		if (strcmp(msgs[k].role, "user") == 0) {
			first_user = k;
			break;
		}
	if (!rc && (sys || tools)) {
		rc = llama3_header(b, "system");
		if (!rc && tools)
			rc = ev_buf_puts(b, "Environment: ipython\n\n");
		if (!rc && sys)
			rc = ev_buf_puts(b, text_of(&msgs[0]));
		if (!rc && tools && first_user == n) {
			if (!(rc = ev_buf_puts(b, sys ? "\n\n" : "")) && !(rc = ev_buf_puts(b, llama3_tools_intro)))
				rc = render_tools(b, tools, "\n\n", false);
		}
		if (!rc)
			rc = ev_buf_puts(b, "<|eot_id|>");
		i = sys;
	}
	for (; i < n && !rc; i++) {
		const eng_chat_msg *m = &msgs[i];
		if (strcmp(m->role, "tool") == 0) {
			if (!(rc = llama3_header(b, "ipython")))
				rc = ev_buf_printf(b, "%s<|eot_id|>", text_of(m));
			continue;
		}
		if ((rc = llama3_header(b, m->role)))
			break;
		if (i == first_user && tools) {
			if (!(rc = ev_buf_puts(b, llama3_tools_intro)) && !(rc = render_tools(b, tools, "\n\n", false)))
				rc = ev_buf_puts(b, "\n\n");
			if (rc)
				break;
		}
		if (strcmp(m->role, "assistant") == 0 && m->tool_calls_json && *m->tool_calls_json) {
			call_view *cv = NULL;
			size_t nc = 0;
			cJSON *root = NULL;
			if ((rc = read_calls(&cv, &nc, m->tool_calls_json, i, &root)) == 0) {
				if (*text_of(m))
					rc = ev_buf_printf(b, "%s\n", text_of(m));
				for (size_t k = 0; k < nc && !rc; k++) {
					if (!(rc = ev_buf_puts(b, k ? "\n{\"name\": " : "{\"name\": ")) &&
					    !(rc = ev_json_buf_str(b, cv[k].name)) &&
					    !(rc = ev_buf_puts(b, ", \"parameters\": ")) && !(rc = json_py(b, cv[k].args)))
						rc = ev_buf_putc(b, '}');
				}
				if (!rc)
					rc = ev_buf_puts(b, "<|eot_id|>");
			}
			free_calls(cv, nc);
			cJSON_Delete(root);
			continue;
		}
		rc = ev_buf_printf(b, "%s<|eot_id|>", text_of(m));
	}
	if (!rc && gen)
		rc = llama3_header(b, "assistant");
	return rc;
}

int eng_chat_render(char **out, size_t *out_len, eng_chat_family family, const eng_chat_msg *msgs, size_t n_msgs,
		    const char *tools_json, bool add_generation_prompt)
{
	*out = NULL;
	ev_buf b = EV_BUF_INIT(ENG_CHAT_MAX_PROMPT);
	cJSON *tools = NULL;
	int rc;
	if (family != ENG_CHAT_CHATML && family != ENG_CHAT_LLAMA3)
		return ev_error_set(EV_E_INVALID, "chat template: unknown family %d", (int)family);
	if (n_msgs && !msgs)
		return ev_error_set(EV_E_INVALID, "chat template: no messages given");
	if ((rc = check_roles(msgs, n_msgs)) || (rc = check_tools(&tools, tools_json)))
		goto done;
	rc = family == ENG_CHAT_CHATML ? render_chatml(&b, msgs, n_msgs, tools, add_generation_prompt)
				       : render_llama3(&b, msgs, n_msgs, tools, add_generation_prompt);
	if (rc)
		goto done;
	*out = ev_buf_detach(&b, out_len);
	if (!*out)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	if (rc == EV_E_LIMIT)
		ev_error_set(rc, "chat template: prompt over %zu bytes", ENG_CHAT_MAX_PROMPT);
	cJSON_Delete(tools);
	ev_buf_free(&b);
	return rc;
}

/* ---- parsing tool calls -------------------------------------------------------- */

static int add_call(eng_chat_parsed *p, char *name, char *args, char *err)
{
	eng_tool_call *v = realloc(p->calls, (p->n_calls + 1) * sizeof *v);
	if (!v) {
		free(name);
		free(args);
		free(err);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	p->calls = v;
	v[p->n_calls++] = (eng_tool_call){name, args, err};
	p->n_errors += err != NULL;
	return 0;
}

/* Turns a parsed call object into (name, compact arguments) or an error. */
static int call_from_json(eng_chat_parsed *p, const cJSON *obj, size_t idx)
{
	const char *name = ev_json_str(obj, "name", NULL);
	if (!cJSON_IsObject(obj) || !name || !*name)
		return add_call(p, NULL, NULL, ev_asprintf("tool call %zu: expected an object with a \"name\" string", idx));
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "arguments");
	if (!a)
		a = cJSON_GetObjectItemCaseSensitive(obj, "parameters");
	cJSON *parsed = NULL;
	if (cJSON_IsString(a)) {
		parsed = cJSON_Parse(a->valuestring);
		if (!cJSON_IsObject(parsed)) {
			cJSON_Delete(parsed);
			return add_call(p, NULL, NULL,
					ev_asprintf("tool call %zu (%.64s): arguments string is not a JSON object", idx, name));
		}
		a = parsed;
	}
	if (a && !cJSON_IsObject(a))
		return add_call(p, NULL, NULL, ev_asprintf("tool call %zu (%.64s): arguments must be an object", idx, name));
	char *args = a ? cJSON_PrintUnformatted(a) : ev_strdup("{}");
	cJSON_Delete(parsed);
	char *nm = ev_strdup(name);
	if (!args || !nm) {
		free(args);
		free(nm);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return add_call(p, nm, args, NULL);
}

static void trim(const char **s, size_t *len)
{
	while (*len && isspace((unsigned char)**s))
		(*s)++, (*len)--;
	while (*len && isspace((unsigned char)(*s)[*len - 1]))
		(*len)--;
}

static const char *memfind(const char *h, size_t hl, const char *n)
{
	size_t nl = strlen(n);
	if (nl > hl)
		return NULL;
	return memmem(h, hl, n, nl);
}

static int parse_chatml(eng_chat_parsed *p, const char *text, size_t len, ev_buf *content)
{
	static const char open[] = "<tool_call>", close[] = "</tool_call>";
	size_t pos = 0;
	int rc = 0;
	while (pos < len && !rc) {
		const char *o = memfind(text + pos, len - pos, open);
		if (!o)
			break;
		if ((rc = ev_buf_append(content, text + pos, (size_t)(o - (text + pos)))))
			return rc;
		const char *body = o + strlen(open);
		size_t left = len - (size_t)(body - text);
		const char *c = memfind(body, left, close);
		size_t blen = c ? (size_t)(c - body) : left; /* an unterminated last call runs to the end */
		pos = c ? (size_t)(c - text) + strlen(close) : len;
		const char *s = body;
		trim(&s, &blen);
		const char *end = NULL;
		cJSON *obj = cJSON_ParseWithLengthOpts(s, blen, &end, 0);
		size_t idx = p->n_calls;
		if (!obj) {
			size_t at = end && end >= s ? (size_t)(end - s) : 0;
			rc = add_call(p, NULL, NULL, ev_asprintf("tool call %zu: malformed JSON near byte %zu", idx, at));
		} else if (end && (size_t)(end - s) < blen) {
			rc = add_call(p, NULL, NULL,
				      ev_asprintf("tool call %zu: text after the JSON object", idx));
		} else {
			rc = call_from_json(p, obj, idx);
		}
		cJSON_Delete(obj);
	}
	if (!rc && pos < len)
		rc = ev_buf_append(content, text + pos, len - pos);
	return rc;
}

static int parse_llama3(eng_chat_parsed *p, const char *text, size_t len, ev_buf *content)
{
	static const char tag[] = "<|python_tag|>";
	const char *s = text;
	size_t n = len;
	trim(&s, &n);
	if (n >= strlen(tag) && memcmp(s, tag, strlen(tag)) == 0) {
		s += strlen(tag), n -= strlen(tag);
		trim(&s, &n);
	}
	if (n == 0 || s[0] != '{')
		return ev_buf_append(content, text, len);
	/* One or more call objects separated by ';' or whitespace. */
	size_t pos = 0;
	int rc = 0;
	eng_chat_parsed tmp = {0};
	while (pos < n && s[pos] == '{' && !rc) {
		const char *end = NULL;
		cJSON *obj = cJSON_ParseWithLengthOpts(s + pos, n - pos, &end, 0);
		if (!obj) {
			/* Only text that set out to be a call counts as a broken one. */
			if (!memfind(s + pos, n - pos, "\"name\"")) {
				cJSON_Delete(obj);
				break;
			}
			size_t at = end && end >= s + pos ? (size_t)(end - (s + pos)) : 0;
			rc = add_call(&tmp, NULL, NULL,
				      ev_asprintf("tool call %zu: malformed JSON near byte %zu", tmp.n_calls, at));
			pos = n;
			break;
		}
		if (!ev_json_str(obj, "name", NULL)) {
			cJSON_Delete(obj);
			break; /* a JSON answer, not a call */
		}
		rc = call_from_json(&tmp, obj, tmp.n_calls);
		cJSON_Delete(obj);
		pos = (size_t)(end - s);
		while (pos < n && (isspace((unsigned char)s[pos]) || s[pos] == ';'))
			pos++;
	}
	if (!rc && tmp.n_calls == 0)
		return ev_buf_append(content, text, len);
	if (!rc && pos < n)
		rc = ev_buf_append(content, s + pos, n - pos);
	p->calls = tmp.calls;
	p->n_calls = tmp.n_calls;
	p->n_errors = tmp.n_errors;
	return rc;
}

int eng_chat_parse_tool_calls(eng_chat_parsed **out, eng_chat_family family, const char *text, size_t len)
{
	*out = NULL;
	if (!text && len)
		return ev_error_set(EV_E_INVALID, "parse tool calls: no text");
	if (family != ENG_CHAT_CHATML && family != ENG_CHAT_LLAMA3)
		return ev_error_set(EV_E_INVALID, "parse tool calls: unknown family %d", (int)family);
	eng_chat_parsed *p = calloc(1, sizeof *p);
	ev_buf content = EV_BUF_INIT(len + 1);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = len == 0 ? 0
		 : family == ENG_CHAT_CHATML ? parse_chatml(p, text, len, &content)
					     : parse_llama3(p, text, len, &content);
	if (!rc) {
		const char *s = content.data ? content.data : "";
		size_t n = content.len;
		trim(&s, &n);
		p->content = ev_strndup(s, n);
		if (!p->content)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	ev_buf_free(&content);
	if (rc) {
		eng_chat_parsed_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void eng_chat_parsed_free(eng_chat_parsed *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_calls; i++) {
		free(p->calls[i].name);
		free(p->calls[i].arguments);
		free(p->calls[i].error);
	}
	free(p->calls);
	free(p->content);
	free(p);
}
