/*
 * The OpenAI chat-completions wire format: building a request body from an
 * ev_request, the request hash (the response cache's key), and parsing a
 * response body into an ev_completion. Used by the OpenAI backend and the
 * runner; the engine backend may reuse the parsing for its own output.
 */
#include "runners/runners.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Images inlined as data: URLs are read whole; past this they are refused. */
#define MAX_INLINE_IMAGE ((size_t)20 << 20)

void ev_completion_clear(ev_completion *c)
{
	if (!c)
		return;
	free(c->text);
	free(c->tool_calls_json);
	free(c->finish_reason);
	free(c->error);
	free(c->raw_json);
	free(c->logprobs_json);
	free(c->prompt_logprobs_json);
	memset(c, 0, sizeof *c);
}

static const char *guess_mime(const char *path)
{
	static const char *const map[][2] = {{".png", "image/png"},   {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"},
	                                     {".gif", "image/gif"},   {".webp", "image/webp"}, {".bmp", "image/bmp"}};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (ev_str_ends(path, map[i][0]))
			return map[i][1];
	return "application/octet-stream";
}

/* {"type":"image_url","image_url":{"url":url}}, or NULL (out of memory) */
static cJSON *image_url_item(const char *url)
{
	cJSON *o = cJSON_CreateObject(), *iu = cJSON_CreateObject();
	if (!url || !o || !iu || !cJSON_AddStringToObject(o, "type", "image_url") || !cJSON_AddStringToObject(iu, "url", url)) {
		cJSON_Delete(o);
		cJSON_Delete(iu);
		return NULL;
	}
	cJSON_AddItemToObject(o, "image_url", iu);
	return o;
}

/* The same with bytes inlined as a data: URL */
static cJSON *data_url_item(const void *data, size_t len, const char *mime)
{
	char *b64 = NULL, *url = NULL;
	cJSON *o = NULL;
	if (ev_base64_encode(&b64, data, len) == 0 && (url = ev_asprintf("data:%s;base64,%s", mime, b64)))
		o = image_url_item(url);
	free(b64), free(url);
	return o;
}

/* An image part as an image_url item; a part with only a path is inlined
 * as a data: URL. */
static int image_part(cJSON **out, const ev_part *p)
{
	*out = NULL;
	if (p->url) {
		*out = image_url_item(p->url);
	} else if (p->path) {
		char *data = NULL;
		size_t len = 0;
		int rc = ev_file_read(&data, &len, p->path, MAX_INLINE_IMAGE);
		if (rc)
			return ev_error_wrap(rc, "image attachment");
		*out = data_url_item(data, len, p->mime ? p->mime : guess_mime(p->path));
		free(data);
	} else {
		return ev_error_set(EV_E_INVALID, "image part has neither url nor path");
	}
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* A video to an OpenAI-compatible server: its sampled frames, in time
 * order, as images (what the chat API takes everywhere), each preceded
 * by its time when the part states its frame rate. */
static int video_parts(cJSON *arr, const ev_part *p)
{
	if (!p->path)
		return ev_error_set(EV_E_UNSUPPORTED, "a video by URL cannot be sent as frames (give a folder or an archive)");
	ev_video v;
	int rc = ev_video_load(&v, p->path, p->fps, p->sample_fps, p->frames, NULL);
	if (rc)
		return ev_error_wrap(rc, "video attachment");
	for (int i = 0; !rc && i < v.n; i++) {
		const uint8_t *d = v.data[i];
		const char *mime = v.len[i] > 3 && d[0] == 0xFF && d[1] == 0xD8 ? "image/jpeg"
		                   : v.len[i] > 8 && !memcmp(d, "\x89PNG", 4) ? "image/png"
		                                                               : guess_mime(v.name[i]);
		if (p->fps > 0) {
			char label[64];
			snprintf(label, sizeof label, "[%.1f seconds]", (double)v.index[i] / p->fps);
			cJSON *t = cJSON_CreateObject();
			if (!t || !cJSON_AddStringToObject(t, "type", "text") || !cJSON_AddStringToObject(t, "text", label)) {
				cJSON_Delete(t);
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				break;
			}
			cJSON_AddItemToArray(arr, t);
		}
		cJSON *o = data_url_item(d, v.len[i], mime);
		if (!o)
			rc = ev_error_set(EV_E_NOMEM, "out of memory inlining frame %s", v.name[i]);
		else
			cJSON_AddItemToArray(arr, o);
	}
	ev_video_free(&v);
	return rc;
}

static const char *part_kind_name(ev_part_kind k)
{
	switch (k) {
	case EV_PART_TEXT: return "text";
	case EV_PART_IMAGE: return "image";
	case EV_PART_VIDEO: return "video";
	case EV_PART_DOCUMENT: return "document";
	}
	return "unknown";
}

static int content_json(cJSON **out, const ev_message *m)
{
	bool only_text = true;
	for (size_t i = 0; i < m->n_parts; i++)
		only_text = only_text && m->parts[i].kind == EV_PART_TEXT;
	*out = NULL;
	if (m->n_parts == 0) {
		*out = m->tool_calls_json ? cJSON_CreateNull() : cJSON_CreateString("");
		return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (only_text) {
		/* Several text parts are joined by a newline into one string. */
		ev_buf b = EV_BUF_INIT((size_t)1 << 31);
		for (size_t i = 0; i < m->n_parts; i++) {
			if ((i && ev_buf_putc(&b, '\n')) || ev_buf_puts(&b, m->parts[i].text ? m->parts[i].text : "")) {
				ev_buf_free(&b);
				return ev_error_wrap(ev_error_code(), "message content");
			}
		}
		*out = cJSON_CreateString(b.data ? b.data : "");
		ev_buf_free(&b);
		return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < m->n_parts; i++) {
		const ev_part *p = &m->parts[i];
		cJSON *item = NULL;
		int rc = 0;
		if (p->kind == EV_PART_TEXT) {
			item = cJSON_CreateObject();
			if (!item || !cJSON_AddStringToObject(item, "type", "text") ||
			    !cJSON_AddStringToObject(item, "text", p->text ? p->text : ""))
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
		} else if (p->kind == EV_PART_IMAGE) {
			rc = image_part(&item, p);
		} else if (p->kind == EV_PART_VIDEO && p->path) {
			if ((rc = video_parts(arr, p))) {
				cJSON_Delete(arr);
				return rc;
			}
			continue;
		} else {
			rc = ev_error_set(EV_E_UNSUPPORTED, "%s parts cannot be sent to an OpenAI-compatible server yet",
			                  part_kind_name(p->kind));
		}
		if (rc) {
			cJSON_Delete(item);
			cJSON_Delete(arr);
			return rc;
		}
		cJSON_AddItemToArray(arr, item);
	}
	*out = arr;
	return 0;
}

/* Parses JSON text that must be an array (tools, tool_calls). */
static int json_array(cJSON **out, const char *text, const char *what)
{
	int rc = ev_json_parse(out, text, strlen(text), what);
	if (rc)
		return rc;
	if (!cJSON_IsArray(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return ev_error_set(EV_E_INVALID, "%s: expected a JSON array", what);
	}
	return 0;
}

int ev_request_context(char **out, size_t *ctx_len, const ev_request *req)
{
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	int rc = 0;
	*out = NULL;
	for (size_t i = 0; !rc && i < req->n_messages; i++) {
		const ev_message *m = &req->messages[i];
		if (i)
			rc = ev_buf_puts(&b, "\n\n");
		for (size_t k = 0; !rc && k < m->n_parts; k++) {
			if (m->parts[k].kind != EV_PART_TEXT)
				rc = ev_error_set(EV_E_UNSUPPORTED, "messages[%zu]: a scoring request takes text parts only", i);
			else if (k)
				rc = ev_buf_putc(&b, '\n');
			if (!rc)
				rc = ev_buf_puts(&b, m->parts[k].text ? m->parts[k].text : "");
		}
	}
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	size_t len = b.len;
	char *text = b.data ? ev_buf_detach(&b, NULL) : ev_strdup("");
	if (!text)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	while (len && strchr(" \t\r\n\f\v", text[len - 1]))
		len--;
	*out = text;
	*ctx_len = len;
	return 0;
}

/* The legacy completions body of a scoring request: one prompt a
 * continuation, echo with one alternative a token (lm-eval's form); one
 * token is generated, since some servers refuse max_tokens 0. */
static int scoring_body(char **out, const ev_request *req)
{
	if (req->n_continuations > EV_MAX_CONTINUATIONS)
		return ev_error_set(EV_E_LIMIT, "a scoring request has %zu continuations, more than %d",
		                    req->n_continuations, EV_MAX_CONTINUATIONS);
	char *ctx = NULL;
	size_t clen = 0;
	int rc = ev_request_context(&ctx, &clen, req);
	if (rc)
		return rc;
	cJSON *root = cJSON_CreateObject(), *prompts = cJSON_CreateArray();
	cJSON_AddItemToObject(root, "model", cJSON_CreateString(req->model ? req->model : ""));
	cJSON_AddItemToObject(root, "prompt", prompts);
	for (size_t i = 0; i < req->n_continuations; i++) {
		char *p = ev_asprintf("%s%s", ctx, req->continuations[i] ? req->continuations[i] : "");
		cJSON_AddItemToArray(prompts, cJSON_CreateString(p ? p : ""));
		free(p);
	}
	cJSON_AddNumberToObject(root, "max_tokens", 1);
	cJSON_AddNumberToObject(root, "temperature", 0);
	cJSON_AddTrueToObject(root, "echo");
	cJSON_AddNumberToObject(root, "logprobs", 1);
	*out = ev_json_print(root);
	cJSON_Delete(root);
	free(ctx);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory printing a request");
}

int ev_scoring_complete(ev_completion *c, const ev_loglik *l, size_t n, const char *model, int prompt_tokens)
{
	ev_buf t = EV_BUF_INIT((size_t)1 << 20);
	ev_buf_puts(&t, "{\"logprobs\":[");
	for (size_t i = 0; i < n; i++)
		ev_buf_printf(&t, "%s%.17g", i ? "," : "", isfinite(l[i].logprob) ? l[i].logprob : -1e300);
	ev_buf_puts(&t, "],\"tokens\":[");
	for (size_t i = 0; i < n; i++)
		ev_buf_printf(&t, "%s%d", i ? "," : "", l[i].tokens);
	ev_buf_puts(&t, "],\"greedy\":[");
	for (size_t i = 0; i < n; i++)
		ev_buf_printf(&t, "%s%s", i ? "," : "", l[i].greedy ? "true" : "false");
	ev_buf_puts(&t, "]}");
	if (!t.data)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	c->text = ev_buf_detach(&t, NULL);
	c->finish_reason = ev_strdup("stop");
	c->prompt_tokens = prompt_tokens;
	c->completion_tokens = 0;
	cJSON *root = cJSON_CreateObject(), *choices = cJSON_AddArrayToObject(root, "choices"),
	      *ch = cJSON_CreateObject(), *msg = cJSON_CreateObject(), *u = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "object", "chat.completion");
	cJSON_AddStringToObject(root, "model", model ? model : "");
	cJSON_AddNumberToObject(ch, "index", 0);
	cJSON_AddStringToObject(msg, "role", "assistant");
	cJSON_AddStringToObject(msg, "content", c->text);
	cJSON_AddItemToObject(ch, "message", msg);
	cJSON_AddStringToObject(ch, "finish_reason", "stop");
	cJSON_AddItemToArray(choices, ch);
	cJSON_AddNumberToObject(u, "prompt_tokens", prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", 0);
	cJSON_AddNumberToObject(u, "total_tokens", prompt_tokens);
	cJSON_AddItemToObject(root, "usage", u);
	c->raw_json = ev_json_print(root);
	cJSON_Delete(root);
	return c->finish_reason && c->raw_json ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

int ev_scoring_from_legacy(ev_loglik *l, size_t n, const char *body, size_t len, long ctx_chars,
                           const long *full_chars)
{
	cJSON *root = NULL;
	int rc = ev_json_parse(&root, body, len, "response");
	if (rc)
		return rc;
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (err && !cJSON_IsNull(err)) {
		rc = ev_error_set(EV_E_BACKEND, "response: server error: %.300s",
		                  cJSON_IsString(err) ? err->valuestring : ev_json_str(err, "message", "(no message)"));
		goto done;
	}
	const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
	if (!cJSON_IsArray(choices) || (size_t)cJSON_GetArraySize(choices) != n) {
		rc = ev_error_set(EV_E_PARSE, "response: choices: expected %zu (one a continuation)", n);
		goto done;
	}
	for (size_t k = 0; k < n; k++)
		l[k] = (ev_loglik){0, 0, true};
	bool *seen = calloc(n ? n : 1, sizeof *seen);
	if (!seen) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	const cJSON *ch;
	size_t pos = 0;
	cJSON_ArrayForEach(ch, choices) {
		/* "index" says which prompt; servers may answer out of order */
		double idx = ev_json_num(ch, "index", (double)pos);
		pos++;
		size_t k = (size_t)idx;
		if (!(idx >= 0 && idx < (double)n) || seen[k]) {
			rc = ev_error_set(EV_E_PARSE, "response: choices[%zu].index: expected a distinct 0..%zu", pos - 1, n - 1);
			break;
		}
		seen[k] = true;
		const cJSON *lp = cJSON_GetObjectItemCaseSensitive(ch, "logprobs");
		const cJSON *vals = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs"),
		            *offs = cJSON_GetObjectItemCaseSensitive(lp, "text_offset"),
		            *tops = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
		int nt = cJSON_GetArraySize(vals);
		if (!cJSON_IsArray(vals) || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != nt) {
			rc = ev_error_set(EV_E_PARSE, "response: choices[%zu].logprobs: expected token_logprobs and text_offset "
			                              "of one length (does the server take echo with logprobs?)", k);
			break;
		}
		for (int i = 0; i < nt; i++) {
			const cJSON *o = cJSON_GetArrayItem(offs, i), *v = cJSON_GetArrayItem(vals, i);
			double off = cJSON_IsNumber(o) ? o->valuedouble : -1;
			if (off < (double)ctx_chars || off >= (double)full_chars[k])
				continue;
			if (!cJSON_IsNumber(v)) {
				rc = ev_error_set(EV_E_PARSE, "response: choices[%zu]: token %d of the continuation has no logprob", k, i);
				break;
			}
			l[k].logprob += v->valuedouble;
			l[k].tokens++;
			/* greedy: no alternative beats the token's own value */
			const cJSON *alt;
			cJSON_ArrayForEach(alt, cJSON_GetArrayItem(tops, i)) {
				if (cJSON_IsNumber(alt) && alt->valuedouble > v->valuedouble)
					l[k].greedy = false;
			}
		}
		if (!rc && !l[k].tokens)
			rc = ev_error_set(EV_E_PARSE, "response: choices[%zu]: no token of the continuation came back "
			                              "(text_offset past the context?)", k);
		if (rc)
			break;
	}
	free(seen);
done:
	cJSON_Delete(root);
	return rc;
}

int ev_request_to_json(char **out, const ev_request *req, bool stream)
{
	int rc = 0;
	*out = NULL;
	if (req->n_continuations)
		return scoring_body(out, req);
	cJSON *root = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
	if (!root || !msgs) {
		cJSON_Delete(msgs);
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	cJSON_AddItemToObject(root, "model", cJSON_CreateString(req->model ? req->model : ""));
	cJSON_AddItemToObject(root, "messages", msgs);
	for (size_t i = 0; i < req->n_messages; i++) {
		const ev_message *m = &req->messages[i];
		cJSON *o = cJSON_CreateObject(), *content = NULL;
		if (!o) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		cJSON_AddItemToArray(msgs, o);
		cJSON_AddItemToObject(o, "role", cJSON_CreateString(m->role ? m->role : "user"));
		if ((rc = content_json(&content, m))) {
			ev_error_wrap(rc, "messages[%zu]", i);
			goto done;
		}
		cJSON_AddItemToObject(o, "content", content);
		if (m->tool_calls_json) {
			cJSON *tc = NULL;
			char what[64];
			snprintf(what, sizeof what, "messages[%zu].tool_calls", i);
			if ((rc = json_array(&tc, m->tool_calls_json, what)))
				goto done;
			cJSON_AddItemToObject(o, "tool_calls", tc);
		}
		if (m->tool_call_id)
			cJSON_AddStringToObject(o, "tool_call_id", m->tool_call_id);
		if (m->name)
			cJSON_AddStringToObject(o, "name", m->name);
	}
	if (req->tools_json) {
		cJSON *tools = NULL;
		if ((rc = json_array(&tools, req->tools_json, "tools")))
			goto done;
		cJSON_AddItemToObject(root, "tools", tools);
	}
	const ev_gen *g = &req->gen;
	if (g->max_tokens > 0)
		cJSON_AddNumberToObject(root, "max_tokens", g->max_tokens);
	if (g->temperature >= 0)
		cJSON_AddNumberToObject(root, "temperature", g->temperature);
	if (g->top_p >= 0)
		cJSON_AddNumberToObject(root, "top_p", g->top_p);
	/* A level goes as OpenAI's reasoning_effort; a number of tokens as
	 * thinking_budget (Alibaba's Qwen API, evald serve) with the chat
	 * template's enable_thinking (vLLM, SGLang) off at 0. */
	if (g->reasoning_effort[0] && strspn(g->reasoning_effort, "0123456789") == strlen(g->reasoning_effort)) {
		long budget = strtol(g->reasoning_effort, NULL, 10);
		cJSON_AddNumberToObject(root, "thinking_budget", (double)budget);
		cJSON *kw = cJSON_AddObjectToObject(root, "chat_template_kwargs");
		if (kw)
			cJSON_AddBoolToObject(kw, "enable_thinking", budget > 0);
	} else if (g->reasoning_effort[0]) {
		cJSON_AddStringToObject(root, "reasoning_effort", g->reasoning_effort);
	}
	if (g->has_seed) {
		/* Raw, so that 64-bit seeds keep every digit. */
		char seed[32];
		snprintf(seed, sizeof seed, "%lld", (long long)g->seed);
		cJSON_AddRawToObject(root, "seed", seed);
	}
	if (g->n_stop) {
		cJSON *stop = cJSON_AddArrayToObject(root, "stop");
		for (size_t i = 0; stop && i < g->n_stop; i++)
			cJSON_AddItemToArray(stop, cJSON_CreateString(g->stop[i] ? g->stop[i] : ""));
	}
	if (stream)
		cJSON_AddTrueToObject(root, "stream");
	*out = ev_json_print(root);
	if (!*out)
		rc = ev_error_set(EV_E_NOMEM, "out of memory printing a request");
done:
	cJSON_Delete(root);
	return rc;
}

void ev_request_hash(char out[EV_SHA256_HEX], const char *request_json, int epoch)
{
	ev_request_hash_for(out, request_json, epoch, NULL);
}

void ev_request_hash_for(char out[EV_SHA256_HEX], const char *request_json, int epoch, const char *salt)
{
	/* The body already names the model and every generation setting. A
	 * version tag keeps old cache entries from matching if the body's
	 * layout ever changes. */
	ev_sha256_ctx *c = NULL;
	if (ev_sha256_begin(&c)) {
		memset(out, '0', EV_SHA256_HEX - 1);
		out[EV_SHA256_HEX - 1] = 0;
		return;
	}
	static const char tag[] = "evald-request-v1\n";
	ev_sha256_update(c, tag, sizeof tag - 1);
	ev_sha256_update(c, request_json, strlen(request_json));
	if (salt && *salt) {
		ev_sha256_update(c, "\nbackend=", 9);
		ev_sha256_update(c, salt, strlen(salt));
	}
	if (epoch >= 0) {
		char e[32];
		int n = snprintf(e, sizeof e, "\nepoch=%d", epoch);
		ev_sha256_update(c, e, (size_t)n);
	}
	ev_sha256_end_hex(c, out);
}

/* The text of a content value: a string, null, or an array of parts
 * whose text parts are concatenated. */
static int content_text(ev_buf *b, const cJSON *content)
{
	if (!content || cJSON_IsNull(content))
		return 0;
	if (cJSON_IsString(content))
		return ev_buf_puts(b, content->valuestring);
	if (!cJSON_IsArray(content))
		return ev_error_set(EV_E_PARSE, "response: choices[0].message.content: expected a string, an array or null");
	const cJSON *part;
	cJSON_ArrayForEach(part, content) {
		const char *t = ev_json_str(part, "text", NULL);
		int rc = t ? ev_buf_puts(b, t) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

int ev_completion_from_json(ev_completion *out, const char *body, size_t len)
{
	cJSON *root = NULL;
	ev_buf text = EV_BUF_INIT(len + 64);
	/* A NUL in the answer would cut it short where cJSON decodes it; the
	 * answer is scored whole, with U+FFFD in its place. */
	char *fixed = NULL;
	if (ev_json_find_nul(body, len) < len) {
		if (!(fixed = malloc(len + 1)))
			return ev_error_set(EV_E_NOMEM, "response: out of memory");
		memcpy(fixed, body, len);
		fixed[len] = '\0';
		ev_json_replace_nul(fixed, len);
		body = fixed;
	}
	int rc = ev_json_parse(&root, body, len, "response");
	if (rc)
		goto done;
	if (!cJSON_IsObject(root)) {
		rc = ev_error_set(EV_E_PARSE, "response: expected a JSON object");
		goto done;
	}
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (err && !cJSON_IsNull(err)) {
		const char *msg = cJSON_IsString(err) ? err->valuestring : ev_json_str(err, "message", "(no message)");
		rc = ev_error_set(EV_E_BACKEND, "response: server error: %.300s", msg);
		goto done;
	}
	const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
	const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
	if (!cJSON_IsObject(c0)) {
		rc = ev_error_set(EV_E_PARSE, "response: choices: expected a non-empty array of objects");
		goto done;
	}
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
	if (!msg)
		msg = cJSON_GetObjectItemCaseSensitive(c0, "delta"); /* one-chunk streams */
	if (!cJSON_IsObject(msg)) {
		rc = ev_error_set(EV_E_PARSE, "response: choices[0].message: expected an object");
		goto done;
	}
	/* Reasoning servers return thinking apart; it is kept in the text the
	 * way models that think inline write it, and the checkers strip it. */
	const char *reasoning = ev_json_str(msg, "reasoning_content", NULL);
	if (reasoning && *reasoning &&
	    (ev_buf_puts(&text, "<think>") || ev_buf_puts(&text, reasoning) || ev_buf_puts(&text, "</think>")))
		goto nomem;
	if ((rc = content_text(&text, cJSON_GetObjectItemCaseSensitive(msg, "content"))))
		goto done;
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
	if (tc && !cJSON_IsNull(tc) && !cJSON_IsArray(tc)) {
		rc = ev_error_set(EV_E_PARSE, "response: choices[0].message.tool_calls: expected an array");
		goto done;
	}
	const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
	const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");

	ev_completion c = *out;
	c.text = ev_buf_detach(&text, NULL);
	c.tool_calls_json = cJSON_IsArray(tc) && cJSON_GetArraySize(tc) > 0 ? ev_json_print(tc) : NULL;
	c.finish_reason = ev_strdup(cJSON_IsString(fr) ? fr->valuestring : "");
	c.raw_json = ev_strndup(body, len);
	double pt = ev_json_num(usage, "prompt_tokens", 0), ct = ev_json_num(usage, "completion_tokens", 0);
	c.prompt_tokens = pt > 0 && pt < 2e9 ? (int)pt : 0;
	c.completion_tokens = ct > 0 && ct < 2e9 ? (int)ct : 0;
	double rt = ev_json_num(cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens_details"), "reasoning_tokens", 0);
	c.thinking_tokens = rt > 0 && rt <= ct ? (int)rt : 0;
	if (!c.text || !c.finish_reason || !c.raw_json || (cJSON_IsArray(tc) && cJSON_GetArraySize(tc) > 0 && !c.tool_calls_json)) {
		free(c.text);
		free(c.tool_calls_json);
		free(c.finish_reason);
		free(c.raw_json);
		goto nomem;
	}
	free(out->text);
	free(out->tool_calls_json);
	free(out->finish_reason);
	free(out->raw_json);
	*out = c;
	goto done;
nomem:
	rc = ev_error_set(EV_E_NOMEM, "out of memory parsing a response");
done:
	ev_buf_free(&text);
	cJSON_Delete(root);
	free(fixed);
	return rc;
}
