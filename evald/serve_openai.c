/*
 * evald/serve_openai.c: the OpenAI-compatible endpoints of `evald serve
 * --model DIR`, over the engine backend (runners/backend_engine.c).
 *
 *   GET  /v1/models
 *   POST /v1/chat/completions   (messages, tools, max_tokens, temperature,
 *                                top_p, seed, stop, n, logprobs with
 *                                top_logprobs; "stream": true for SSE)
 *   POST /v1/completions        (prompt text or token ids, or a list; logprobs
 *                                N, echo (prompt tokens scored); "stream" too)
 *   POST /v1/responses          (instructions, input messages, function calls
 *                                and their outputs, function tools; not streamed)
 *
 * Every request goes to the one backend, whose worker batches all requests
 * in flight together, so concurrent HTTP requests share forward passes. No
 * HTTP thread waits for the engine: a non-streaming handler suspends its
 * connection and answers when the engine's worker resumes it with the
 * completion; a streaming one answers with an MHD callback response that
 * drains a buffer the worker fills with `data: {...}` chunks (ending with
 * `data: [DONE]`), suspending the connection while the buffer is empty.
 * At most max_queue requests are admitted (503 past it). A client that
 * goes away cancels its request: MHD notices on a live connection, and the
 * worker peeks at the socket of a suspended one after every token.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "engine/engine.h"
#include "evald/serve.h"
#include "runners/runners.h"

#define MAX_MESSAGES 4096
#define MAX_CONTENT_PARTS 64 /* parts of one message's content */
#define MAX_STOP 16
#define MAX_CHOICES 16

struct ev_serve_openai {
	ev_backend *be;
	char *name;
	long max_context;
	ev_serve_openai_options opt;
	char *image_root; /* opt.image_root's realpath, or NULL */
	pthread_rwlock_t life; /* submitters hold it shared; stopping, exclusive */
	bool stopped;
	pthread_mutex_t mu;    /* what follows */
	unsigned long long next_id;
	long admitted;         /* queued or generating */
	unsigned long long completed, cancelled, rejected, failed;
};

/* ---- request parsing -------------------------------------------------------------------- */

/* Owned copies behind an ev_request. */
typedef struct {
	ev_request req;
	ev_message *msgs; /* each with its own parts */
	size_t n;
	char *tools;
	char *stop[MAX_STOP];
	/* /v1/completions prompts: texts, or token ids (one prompt each) */
	int n_prompts;
	char *texts[MAX_CHOICES];
	int32_t *ids[MAX_CHOICES];
	size_t n_ids[MAX_CHOICES];
	bool stream;
	bool echo; /* completions: the prompt's text before the answer's */
	int n_choices;
	const char *image_root; /* the server's --image-root (realpath), or NULL */
} parsed;

static void parsed_clear(parsed *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->msgs[i].role);
		free(p->msgs[i].tool_calls_json);
		free(p->msgs[i].tool_call_id);
		free(p->msgs[i].name);
		for (size_t k = 0; p->msgs[i].parts && k < p->msgs[i].n_parts; k++) {
			free(p->msgs[i].parts[k].text);
			free(p->msgs[i].parts[k].url);
		}
		free(p->msgs[i].parts);
	}
	free(p->msgs);
	free(p->tools);
	for (int i = 0; i < MAX_STOP; i++)
		free(p->stop[i]);
	for (int i = 0; i < MAX_CHOICES; i++) {
		free(p->texts[i]);
		free(p->ids[i]);
	}
	memset(p, 0, sizeof *p);
}

/* A file:// image URL inside the image root: the resolved path. */
static int local_image(ev_part *p, const char *url, const char *root, size_t i, size_t k)
{
	if (!root)
		return ev_error_set(EV_E_UNSUPPORTED,
		                    "messages[%zu].content[%zu]: file:// images are read only under the server's "
		                    "--image-root",
		                    i, k);
	const char *path = url + 7;
	size_t rl = strlen(root);
	char what[64];
	snprintf(what, sizeof what, "messages[%zu].content[%zu].image_url", i, k);
	/* an absolute path must name the root; then it is resolved as a relative one */
	if (path[0] == '/') {
		if (strncmp(path, root, rl) || (path[rl] != '/' && path[rl]))
			return ev_error_set(EV_E_UNSAFE, "%s: '%.200s' is outside the server's --image-root", what, path);
		path += rl;
		while (*path == '/')
			path++;
	}
	int rc = ev_suite_resolve_path(&p->path, root, path, what);
	if (rc)
		return rc == EV_E_UNSAFE ? ev_error_set(EV_E_UNSAFE, "%s: '%.200s' is outside the server's --image-root", what,
		                                        url + 7)
		                         : rc;
	p->kind = EV_PART_IMAGE;
	return 0;
}

/* A message's content as parts: a string or null is one text part; an
 * array gives a part each, text or an image as a base64 data: URL
 * (`image_url`, its object or string form), or as a file:// URL inside the
 * server's --image-root. Otherwise the server reads no files and fetches
 * no URLs for a client. */
static int content_parts(ev_message *msg, const cJSON *c, size_t i, const char *image_root)
{
	if (!c || cJSON_IsNull(c) || cJSON_IsString(c)) {
		if (!(msg->parts = calloc(1, sizeof *msg->parts)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		msg->n_parts = 1;
		msg->parts[0].kind = EV_PART_TEXT;
		msg->parts[0].text = ev_strdup(cJSON_IsString(c) ? c->valuestring : "");
		return msg->parts[0].text ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if (!cJSON_IsArray(c))
		return ev_error_set(EV_E_INVALID, "messages[%zu].content: expected a string, an array or null", i);
	int n = cJSON_GetArraySize(c);
	if (n > MAX_CONTENT_PARTS)
		return ev_error_set(EV_E_LIMIT, "messages[%zu].content: more than %d parts", i, MAX_CONTENT_PARTS);
	if (!(msg->parts = calloc(n ? (size_t)n : 1, sizeof *msg->parts)))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const cJSON *part;
	size_t k = 0;
	cJSON_ArrayForEach(part, c) {
		const char *type = ev_json_str(part, "type", "");
		ev_part *p = &msg->parts[k];
		msg->n_parts = k + 1;
		if (!strcmp(type, "text")) {
			const char *t = ev_json_str(part, "text", NULL);
			if (!t)
				return ev_error_set(EV_E_INVALID, "messages[%zu].content[%zu].text: expected a string", i, k);
			p->kind = EV_PART_TEXT;
			if (!(p->text = ev_strdup(t)))
				return ev_error_set(EV_E_NOMEM, "out of memory");
		} else if (!strcmp(type, "image_url")) {
			const cJSON *iu = cJSON_GetObjectItemCaseSensitive(part, "image_url");
			const char *url = cJSON_IsString(iu) ? iu->valuestring : ev_json_str(iu, "url", NULL);
			if (!url)
				return ev_error_set(EV_E_INVALID, "messages[%zu].content[%zu].image_url.url: expected a string", i, k);
			if (!strncmp(url, "file://", 7)) {
				int rc = local_image(p, url, image_root, i, k);
				if (rc)
					return rc;
				k++;
				continue;
			}
			if (strncmp(url, "data:", 5))
				return ev_error_set(EV_E_UNSUPPORTED,
						    "messages[%zu].content[%zu]: the server fetches no image URLs; send the image "
						    "as a base64 data: URL (or a file:// URL under its --image-root)",
						    i, k);
			p->kind = EV_PART_IMAGE;
			if (!(p->url = ev_strdup(url)))
				return ev_error_set(EV_E_NOMEM, "out of memory");
		} else {
			return ev_error_set(EV_E_UNSUPPORTED,
					    "messages[%zu].content[%zu]: type \"%.40s\": this server takes text and image_url parts",
					    i, k, type);
		}
		k++;
	}
	if (!n) { /* an empty list: one empty text part */
		msg->n_parts = 1;
		msg->parts[0].kind = EV_PART_TEXT;
		msg->parts[0].text = ev_strdup("");
	}
	return 0;
}

static int opt_str(char **out, const cJSON *o, const char *key, size_t i)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return ev_error_set(EV_E_INVALID, "messages[%zu].%s: expected a string", i, key);
	*out = ev_strdup(v->valuestring);
	return 0;
}

static int parse_gen(parsed *p, const cJSON *root, bool chat)
{
	ev_gen *g = &p->req.gen;
	*g = (ev_gen)EV_GEN_INIT;
	const cJSON *v;
	bool max_zero = false;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")) ||
	    (v = cJSON_GetObjectItemCaseSensitive(root, "max_tokens"))) {
		if (!cJSON_IsNull(v)) {
			if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e7 || v->valuedouble != (int)v->valuedouble)
				return ev_error_set(EV_E_INVALID, "max_tokens: expected an integer from %d to 10000000", chat ? 1 : 0);
			if (chat && v->valuedouble == 0)
				return ev_error_set(EV_E_INVALID, "max_tokens: expected an integer from 1 to 10000000");
			g->max_tokens = v->valueint;
			max_zero = g->max_tokens == 0;
		}
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "temperature")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 100))
			return ev_error_set(EV_E_INVALID, "temperature: expected a number from 0 to 100");
		g->temperature = v->valuedouble;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "top_p")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1))
			return ev_error_set(EV_E_INVALID, "top_p: expected a number in (0, 1]");
		g->top_p = v->valuedouble;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "seed")) && !cJSON_IsNull(v)) {
		/* bounded before the conversion: a double past int64 is undefined there */
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= -9.2e18 && v->valuedouble <= 9.2e18) ||
		    v->valuedouble != (double)(int64_t)v->valuedouble)
			return ev_error_set(EV_E_INVALID, "seed: expected an integer of at most 19 digits");
		g->has_seed = true;
		g->seed = (int64_t)v->valuedouble;
	}
	/* Thinking: OpenAI's reasoning_effort (a level), or thinking_budget in
	 * tokens (as Alibaba's Qwen API names it); the engine enforces either. */
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "reasoning_effort")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= sizeof g->reasoning_effort)
			return ev_error_set(EV_E_INVALID, "reasoning_effort: expected a level such as \"low\" (1 to %zu characters)",
			                    sizeof g->reasoning_effort - 1);
		snprintf(g->reasoning_effort, sizeof g->reasoning_effort, "%s", v->valuestring);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "thinking_budget")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1048576) ||
		    v->valuedouble != (int)v->valuedouble)
			return ev_error_set(EV_E_INVALID, "thinking_budget: expected an integer from 0 to 1048576");
		snprintf(g->reasoning_effort, sizeof g->reasoning_effort, "%d", v->valueint);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "stop")) && !cJSON_IsNull(v)) {
		if (cJSON_IsString(v)) {
			p->stop[0] = ev_strdup(v->valuestring);
			g->n_stop = 1;
		} else if (cJSON_IsArray(v)) {
			const cJSON *s;
			cJSON_ArrayForEach(s, v) {
				if (!cJSON_IsString(s))
					return ev_error_set(EV_E_INVALID, "stop[%zu]: expected a string", g->n_stop);
				if (g->n_stop == MAX_STOP)
					return ev_error_set(EV_E_LIMIT, "stop: more than %d strings", MAX_STOP);
				p->stop[g->n_stop++] = ev_strdup(s->valuestring);
			}
		} else {
			return ev_error_set(EV_E_INVALID, "stop: expected a string or an array of strings");
		}
		g->stop = p->stop;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsBool(v))
			return ev_error_set(EV_E_INVALID, "stream: expected true or false");
		p->stream = cJSON_IsTrue(v);
	}
	/* log-probabilities: chat's logprobs true with top_logprobs 0..20
	 * alternatives; the legacy completions' logprobs N (0..20, OpenAI
	 * allows 5, vLLM 20), with echo also the prompt's tokens (what lm-eval's
	 * loglikelihood reads: max_tokens 0 or 1, echo, logprobs) */
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "logprobs")) && !cJSON_IsNull(v)) {
		if (chat && cJSON_IsBool(v)) {
			g->logprobs = cJSON_IsTrue(v);
		} else if (!chat && cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= ENG_MAX_TOP_LOGPROBS &&
		           v->valuedouble == (int)v->valuedouble) {
			g->logprobs = true;
			g->top_logprobs = (int)v->valuedouble;
		} else {
			return chat ? ev_error_set(EV_E_INVALID, "logprobs: expected true or false")
			            : ev_error_set(EV_E_INVALID, "logprobs: expected an integer from 0 to %d (alternatives a token)",
			                           ENG_MAX_TOP_LOGPROBS);
		}
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "top_logprobs")) && !cJSON_IsNull(v)) {
		if (!chat)
			return ev_error_set(EV_E_INVALID, "top_logprobs: a chat field; completions take logprobs N");
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > ENG_MAX_TOP_LOGPROBS ||
		    v->valuedouble != (int)v->valuedouble)
			return ev_error_set(EV_E_INVALID, "top_logprobs: expected an integer from 0 to %d", ENG_MAX_TOP_LOGPROBS);
		if (v->valuedouble > 0 && !g->logprobs)
			return ev_error_set(EV_E_INVALID, "top_logprobs: needs logprobs true");
		g->top_logprobs = (int)v->valuedouble;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "echo")) && !cJSON_IsNull(v)) {
		if (chat || !cJSON_IsBool(v))
			return ev_error_set(EV_E_INVALID, chat ? "echo: a completions field; chat does not echo"
			                                       : "echo: expected true or false");
		p->echo = cJSON_IsTrue(v);
		/* the prompt's tokens are what the echoed text is made of */
		g->prompt_logprobs = p->echo;
	}
	if (max_zero) {
		if (!p->echo)
			return ev_error_set(EV_E_INVALID, "max_tokens: 0 generates nothing; it needs echo (to score the prompt)");
		g->prompt_only = true;
	}
	/* response_format: text is what comes anyway; a JSON object or schema
	 * would need constrained decoding: refused, never silently ignored */
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "response_format")) && !cJSON_IsNull(v)) {
		const char *t = ev_json_str(v, "type", NULL);
		if (!cJSON_IsObject(v) || !t)
			return ev_error_set(EV_E_INVALID, "response_format: expected {\"type\": ...}");
		if (strcmp(t, "text"))
			return ev_error_set(EV_E_INVALID, "response_format: \"%.40s\" needs constrained decoding, which this "
			                                  "server does not do; only \"text\" is served", t);
	}
	/* vLLM's extension: generate to max_tokens whatever the model says */
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "ignore_eos")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsBool(v))
			return ev_error_set(EV_E_INVALID, "ignore_eos: expected true or false");
		g->ignore_eos = cJSON_IsTrue(v);
	}
	p->n_choices = 1;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "n")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > MAX_CHOICES ||
		    v->valuedouble != (int)v->valuedouble)
			return ev_error_set(EV_E_INVALID, "n: expected an integer from 1 to %d", MAX_CHOICES);
		p->n_choices = (int)v->valuedouble;
		if (p->n_choices > 1 && p->stream)
			return ev_error_set(EV_E_INVALID, "n: more than one choice is not streamed; leave out stream");
	}
	if ((g->logprobs || p->echo) && p->stream)
		return ev_error_set(EV_E_INVALID, "%s: not streamed; leave out stream", p->echo ? "echo" : "logprobs");
	return 0;
}

static int parse_chat(parsed *p, const cJSON *root)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
	if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
		return ev_error_set(EV_E_INVALID, "messages: expected a non-empty array");
	size_t n = (size_t)cJSON_GetArraySize(msgs);
	if (n > MAX_MESSAGES)
		return ev_error_set(EV_E_LIMIT, "messages: more than %d", MAX_MESSAGES);
	p->msgs = calloc(n, sizeof *p->msgs);
	if (!p->msgs)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const cJSON *m;
	int rc;
	cJSON_ArrayForEach(m, msgs) {
		size_t i = p->n++;
		if (!cJSON_IsObject(m))
			return ev_error_set(EV_E_INVALID, "messages[%zu]: expected an object", i);
		const char *role = ev_json_str(m, "role", NULL);
		if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
		              strcmp(role, "tool") && strcmp(role, "developer")))
			return ev_error_set(EV_E_INVALID, "messages[%zu].role: expected system, user, assistant or tool", i);
		p->msgs[i].role = ev_strdup(strcmp(role, "developer") ? role : "system");
		if ((rc = content_parts(&p->msgs[i], cJSON_GetObjectItemCaseSensitive(m, "content"), i, p->image_root)))
			return rc;
		const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		if (tc && !cJSON_IsNull(tc)) {
			if (!cJSON_IsArray(tc))
				return ev_error_set(EV_E_INVALID, "messages[%zu].tool_calls: expected an array", i);
			p->msgs[i].tool_calls_json = ev_json_print(tc);
		}
		if ((rc = opt_str(&p->msgs[i].tool_call_id, m, "tool_call_id", i)) ||
		    (rc = opt_str(&p->msgs[i].name, m, "name", i)))
			return rc;
	}
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
	if (tools && !cJSON_IsNull(tools)) {
		if (!cJSON_IsArray(tools))
			return ev_error_set(EV_E_INVALID, "tools: expected an array");
		if (cJSON_GetArraySize(tools))
			p->tools = ev_json_print(tools);
	}
	p->req.messages = p->msgs;
	p->req.n_messages = p->n;
	p->req.tools_json = p->tools;
	/* tool_choice: "auto" is what the model does anyway; "none" renders the
	 * turn without the tools (so no call can be read); forcing a call
	 * ("required", a named function) needs constrained decoding, which is
	 * not served: refused rather than ignored */
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
	if (tc && !cJSON_IsNull(tc)) {
		if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
			p->req.tools_json = NULL;
		} else if (!(cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto"))) {
			return ev_error_set(EV_E_INVALID, "tool_choice: only \"auto\" and \"none\" are served (forcing a call "
			                                  "needs constrained decoding, which this server does not do)");
		}
	}
	return parse_gen(p, root, true);
}

/* The text of a Responses content value: a string, or parts of type
 * input_text / output_text / text (joined by newlines). */
static int responses_text(char **out, const cJSON *c, const char *what)
{
	if (cJSON_IsString(c))
		return (*out = ev_strdup(c->valuestring)) ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!cJSON_IsArray(c))
		return ev_error_set(EV_E_INVALID, "%s: expected a string or a list of parts", what);
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	const cJSON *part;
	int k = 0;
	cJSON_ArrayForEach(part, c) {
		const char *type = ev_json_str(part, "type", "");
		const char *t = ev_json_str(part, "text", NULL);
		if (strcmp(type, "input_text") && strcmp(type, "output_text") && strcmp(type, "text")) {
			ev_buf_free(&b);
			return ev_error_set(EV_E_UNSUPPORTED, "%s[%d]: type \"%.40s\": this model takes text only", what, k, type);
		}
		if (!t || (b.len && ev_buf_putc(&b, '\n')) || ev_buf_puts(&b, t)) {
			ev_buf_free(&b);
			return ev_error_set(EV_E_INVALID, "%s[%d].text: expected a string", what, k);
		}
		k++;
	}
	*out = b.data ? b.data : ev_strdup("");
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* A Responses content list holding images, as chat parts: input_text /
 * output_text / text -> text, input_image (image_url a string) ->
 * image_url. NULL (no error) when it holds no image: the text path. */
static int responses_parts(cJSON **out, const cJSON *c, const char *what)
{
	*out = NULL;
	bool any = false;
	const cJSON *part;
	if (!cJSON_IsArray(c))
		return 0;
	cJSON_ArrayForEach(part, c) any = any || !strcmp(ev_json_str(part, "type", ""), "input_image");
	if (!any)
		return 0;
	cJSON *arr = cJSON_CreateArray();
	int k = 0;
	cJSON_ArrayForEach(part, c) {
		const char *type = ev_json_str(part, "type", "");
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(arr, o);
		if (!strcmp(type, "input_image")) {
			const char *url = ev_json_str(part, "image_url", NULL);
			if (url && strncmp(url, "data:", 5) && strncmp(url, "file://", 7)) {
				cJSON_Delete(arr);
				return ev_error_set(EV_E_INVALID, "%s[%d].image_url: expected a base64 data: URL (the server fetches "
				                                  "no URLs) or a file:// URL under its --image-root", what, k);
			}
			if (!url) {
				cJSON_Delete(arr);
				return ev_error_set(EV_E_INVALID, "%s[%d].image_url: expected a data: URL string (file_id is not "
				                                  "served here)", what, k);
			}
			cJSON_AddStringToObject(o, "type", "image_url");
			cJSON_AddItemToObject(o, "image_url", cJSON_CreateObject());
			cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(o, "image_url"), "url", url);
		} else if (!strcmp(type, "input_text") || !strcmp(type, "output_text") || !strcmp(type, "text")) {
			const char *t = ev_json_str(part, "text", NULL);
			if (!t) {
				cJSON_Delete(arr);
				return ev_error_set(EV_E_INVALID, "%s[%d].text: expected a string", what, k);
			}
			cJSON_AddStringToObject(o, "type", "text");
			cJSON_AddStringToObject(o, "text", t);
		} else {
			cJSON_Delete(arr);
			return ev_error_set(EV_E_UNSUPPORTED, "%s[%d]: type \"%.40s\": this server takes text and images", what, k,
			                    type);
		}
		k++;
	}
	*out = arr;
	return 0;
}

/* A message of the chat form into msgs. */
static cJSON *chat_msg(cJSON *msgs, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "role", role);
	if (content)
		cJSON_AddStringToObject(m, "content", content);
	else
		cJSON_AddNullToObject(m, "content");
	cJSON_AddItemToArray(msgs, m);
	return m;
}

/* POST /v1/responses: the request in the chat form (instructions a system
 * message, input items messages, function calls an assistant turn's
 * tool_calls, their outputs tool messages, function tools unflattened),
 * then parsed as a chat request. State kept between responses
 * (previous_response_id) and streaming are not served. */
static int parse_responses(parsed *p, const cJSON *root)
{
	const cJSON *v;
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "previous_response_id")) && !cJSON_IsNull(v))
		return ev_error_set(EV_E_INVALID, "previous_response_id: responses are not stored here; send the "
		                                  "conversation in input");
	if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream")) && cJSON_IsTrue(v))
		return ev_error_set(EV_E_INVALID, "stream: /v1/responses is not streamed here; leave out stream (or use "
		                                  "/v1/chat/completions)");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "text"), "format");
	if (fmt && strcmp(ev_json_str(fmt, "type", "text"), "text"))
		return ev_error_set(EV_E_INVALID, "text.format: \"%.40s\" needs constrained decoding, which this server "
		                                  "does not do; only \"text\" is served", ev_json_str(fmt, "type", ""));
	cJSON *chat = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(chat, "messages");
	int rc = 0;
	char *t = NULL;
	const char *instr = ev_json_str(root, "instructions", NULL);
	if (instr)
		chat_msg(msgs, "system", instr);
	const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
	if (cJSON_IsString(input)) {
		chat_msg(msgs, "user", input->valuestring);
	} else if (!cJSON_IsArray(input) || !cJSON_GetArraySize(input)) {
		rc = ev_error_set(EV_E_INVALID, "input: expected a string or a non-empty list of items");
	}
	const cJSON *it;
	int i = 0;
	cJSON *calls_to = NULL; /* the assistant turn function calls join */
	const cJSON *items = cJSON_IsArray(input) ? input : NULL;
	cJSON_ArrayForEach(it, items) {
		char what[48];
		snprintf(what, sizeof what, "input[%d]", i++);
		const char *type = ev_json_str(it, "type", cJSON_GetObjectItemCaseSensitive(it, "role") ? "message" : "");
		if (rc)
			break;
		if (!strcmp(type, "message")) {
			const char *role = ev_json_str(it, "role", "");
			if (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "assistant")) {
				rc = ev_error_set(EV_E_INVALID, "%s.role: expected user, system, developer or assistant", what);
				break;
			}
			snprintf(what + strlen(what), sizeof what - strlen(what), ".content");
			cJSON *parts = NULL;
			if ((rc = responses_parts(&parts, cJSON_GetObjectItemCaseSensitive(it, "content"), what)))
				break;
			if (parts) { /* text with images */
				cJSON *m = chat_msg(msgs, role, "");
				cJSON_ReplaceItemInObjectCaseSensitive(m, "content", parts);
				calls_to = !strcmp(role, "assistant") ? m : NULL;
				continue;
			}
			if ((rc = responses_text(&t, cJSON_GetObjectItemCaseSensitive(it, "content"), what)))
				break;
			cJSON *m = chat_msg(msgs, role, t);
			calls_to = !strcmp(role, "assistant") ? m : NULL;
			free(t);
			t = NULL;
		} else if (!strcmp(type, "function_call")) {
			const char *name = ev_json_str(it, "name", NULL), *args = ev_json_str(it, "arguments", "{}"),
			           *id = ev_json_str(it, "call_id", NULL);
			if (!name || !id) {
				rc = ev_error_set(EV_E_INVALID, "%s: a function_call needs name and call_id", what);
				break;
			}
			if (!calls_to)
				calls_to = chat_msg(msgs, "assistant", NULL);
			cJSON *tc = cJSON_GetObjectItemCaseSensitive(calls_to, "tool_calls");
			if (!tc)
				tc = cJSON_AddArrayToObject(calls_to, "tool_calls");
			cJSON *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "id", id);
			cJSON_AddStringToObject(c, "type", "function");
			cJSON_AddStringToObject(fn, "name", name);
			cJSON_AddStringToObject(fn, "arguments", args);
			cJSON_AddItemToObject(c, "function", fn);
			cJSON_AddItemToArray(tc, c);
		} else if (!strcmp(type, "function_call_output")) {
			const cJSON *out = cJSON_GetObjectItemCaseSensitive(it, "output");
			const char *id = ev_json_str(it, "call_id", NULL);
			if (!id || (rc = responses_text(&t, out, what))) {
				rc = rc ? rc : ev_error_set(EV_E_INVALID, "%s: a function_call_output needs call_id", what);
				break;
			}
			cJSON *m = chat_msg(msgs, "tool", t);
			cJSON_AddStringToObject(m, "tool_call_id", id);
			calls_to = NULL;
			free(t);
			t = NULL;
		} else if (strcmp(type, "reasoning")) { /* reasoning items: the model's own, not replayed */
			rc = ev_error_set(EV_E_INVALID, "%s.type: \"%.40s\" is not served (message, function_call, "
			                                "function_call_output)", what, type);
		}
	}
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools"), *tool;
	if (!rc && cJSON_IsArray(tools) && cJSON_GetArraySize(tools)) {
		cJSON *ct = cJSON_AddArrayToObject(chat, "tools");
		int k = 0;
		cJSON_ArrayForEach(tool, tools) {
			if (strcmp(ev_json_str(tool, "type", ""), "function") || !ev_json_str(tool, "name", NULL)) {
				rc = ev_error_set(EV_E_INVALID, "tools[%d]: only function tools (with a name) are served", k);
				break;
			}
			cJSON *o = cJSON_CreateObject(), *fn = cJSON_Duplicate(tool, 1);
			cJSON_DeleteItemFromObjectCaseSensitive(fn, "type");
			cJSON_DeleteItemFromObjectCaseSensitive(fn, "strict");
			cJSON_AddStringToObject(o, "type", "function");
			cJSON_AddItemToObject(o, "function", fn);
			cJSON_AddItemToArray(ct, o);
			k++;
		}
	}
	/* the settings that share the chat form's meaning */
	static const char *const same[] = {"temperature", "top_p", "tool_choice", "model", NULL};
	for (int k = 0; !rc && same[k]; k++)
		if ((v = cJSON_GetObjectItemCaseSensitive(root, same[k])))
			cJSON_AddItemToObject(chat, same[k], cJSON_Duplicate(v, 1));
	if (!rc && (v = cJSON_GetObjectItemCaseSensitive(root, "max_output_tokens")))
		cJSON_AddItemToObject(chat, "max_tokens", cJSON_Duplicate(v, 1));
	if (!rc && cJSON_IsObject(v = cJSON_GetObjectItemCaseSensitive(root, "tool_choice")) &&
	    !strcmp(ev_json_str(v, "type", ""), "function")) /* the flat form of a named choice */
		rc = ev_error_set(EV_E_INVALID, "tool_choice: only \"auto\" and \"none\" are served (forcing a call needs "
		                                "constrained decoding, which this server does not do)");
	free(t);
	if (!rc)
		rc = parse_chat(p, chat);
	cJSON_Delete(chat);
	return rc;
}

/* A token-id list: [1, 2, 3]. */
static int parse_ids(parsed *p, int k, const cJSON *arr, const char *what)
{
	size_t n = (size_t)cJSON_GetArraySize(arr);
	if (!n || n > (size_t)1 << 24)
		return ev_error_set(EV_E_INVALID, "%s: expected 1 to 16777216 token ids", what);
	if (!(p->ids[k] = malloc(n * sizeof *p->ids[k])))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	size_t i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, arr)
	{
		if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > INT32_MAX || t->valuedouble != (int32_t)t->valuedouble)
			return ev_error_set(EV_E_INVALID, "%s[%zu]: expected a token id", what, i);
		p->ids[k][i++] = (int32_t)t->valuedouble;
	}
	p->n_ids[k] = n;
	return 0;
}

/* "prompt": a string, token ids, or a list of either (one answer each). */
static int parse_completion(parsed *p, const cJSON *root)
{
	const cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompt");
	int rc = 0;
	if (cJSON_IsString(pr)) {
		p->n_prompts = 1;
		p->texts[0] = ev_strdup(pr->valuestring);
	} else if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) > 0 && cJSON_IsNumber(pr->child)) {
		p->n_prompts = 1;
		rc = parse_ids(p, 0, pr, "prompt");
	} else if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) > 0) {
		int k = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, pr)
		{
			char what[32];
			snprintf(what, sizeof what, "prompt[%d]", k);
			if (k == MAX_CHOICES)
				return ev_error_set(EV_E_LIMIT, "prompt: more than %d prompts", MAX_CHOICES);
			if (cJSON_IsString(x))
				p->texts[k] = ev_strdup(x->valuestring);
			else if (cJSON_IsArray(x) && cJSON_IsNumber(x->child))
				rc = parse_ids(p, k, x, what);
			else
				return ev_error_set(EV_E_INVALID, "%s: expected a string or token ids", what);
			if (rc)
				return rc;
			k++;
		}
		p->n_prompts = k;
	} else {
		return ev_error_set(EV_E_INVALID, "prompt: expected a string, token ids, or a list of either");
	}
	if (rc)
		return rc;
	for (int i = 0; i < p->n_prompts; i++)
		if (!p->texts[i] && !p->ids[i])
			return ev_error_set(EV_E_NOMEM, "out of memory");
	if ((rc = parse_gen(p, root, false)))
		return rc;
	if (p->n_prompts * p->n_choices > MAX_CHOICES)
		return ev_error_set(EV_E_LIMIT, "prompt: %d prompts x n %d is more than %d answers", p->n_prompts,
		                    p->n_choices, MAX_CHOICES);
	if (p->n_prompts > 1 && p->stream)
		return ev_error_set(EV_E_INVALID, "prompt: several prompts are not streamed; leave out stream");
	return 0;
}

/* Submits prompt k of a completions request (text or token ids). */
static int submit_prompt(ev_serve_openai *o, const ev_request *req, const parsed *p, int k, const ev_engine_stream *cb)
{
	if (p->ids[k])
		return ev_backend_engine_submit_tokens(o->be, req, p->ids[k], p->n_ids[k], cb);
	return ev_backend_engine_submit_stream(o->be, req, p->texts[k], cb);
}

/* ---- one request in flight ---------------------------------------------------------------- */

typedef struct {
	pthread_mutex_t mu;
	int refs;          /* the connection's side (handler, then stream or deferred answer), and the engine */
	ev_serve_openai *o;
	struct MHD_Connection *conn;
	bool chat, stream;
	bool done;         /* on_done ran */
	bool gone;         /* the connection ended: conn must not be touched */
	bool suspended;    /* we suspended conn; whoever changes what it waits for resumes it */
	bool overflow;     /* the stream fell too far behind: cancelled */
	bool cancel_seen;  /* the engine was told to cancel */
	ev_completion c;   /* when done */
	ev_buf sse;        /* streaming: bytes not yet sent */
	size_t sent_off;
	char id[64];
	long created;
	struct choice_group *group; /* n > 1: the answer the choices make together */
	bool hold;         /* streamed with tools: the text waits for the end (a call is no text) */
	bool responses;    /* POST /v1/responses: answered in the Responses form */
	bool echo;         /* completions: the prompt comes back before the answer */
	char *echo_text;   /* the prompt's text; NULL for token ids (made from their bytes) */
} inflight;

/* n > 1: the choices of one request, answered together when the last is
 * done (the connection waits suspended until then). */
typedef struct choice_group {
	pthread_mutex_t mu;
	int n, per, remaining, refs; /* per: choices a prompt (n of the request) */
	bool suspended, gone;
	struct MHD_Connection *conn;
	inflight *f[MAX_CHOICES];
} choice_group;

static void inflight_unref(inflight *f);

/* Each choice the engine still runs holds the group, and so does the
 * connection: the last to let go frees it. */
static void group_unref(choice_group *g)
{
	pthread_mutex_lock(&g->mu);
	int left = --g->refs;
	pthread_mutex_unlock(&g->mu);
	if (left)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static void inflight_unref(inflight *f)
{
	pthread_mutex_lock(&f->mu);
	int left = --f->refs;
	pthread_mutex_unlock(&f->mu);
	if (left)
		return;
	ev_completion_clear(&f->c);
	ev_buf_free(&f->sse);
	free(f->echo_text);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* With f->mu held: the connection waits for what just changed. */
static void wake(inflight *f)
{
	if (f->suspended) {
		f->suspended = false;
		ev_serve_resume(f->conn);
	}
}

/* Appends one event to the stream; past the client's allowance the request
 * is cancelled and the stream ends with an error event instead. */
static void sse_put(inflight *f, const char *json)
{
	if (f->overflow)
		return;
	size_t need = strlen(json) + 8;
	if (f->sse.len + need > f->o->opt.stream_buffer) {
		f->overflow = true;
		ev_log_warn("serve: %s: the client fell more than %zu bytes behind; cancelled", f->id,
		            f->o->opt.stream_buffer);
		ev_buf_printf(&f->sse,
		              "data: {\"error\":\"the client read the stream too slowly (more than %zu bytes behind): "
		              "generation cancelled\"}\n\n",
		              f->o->opt.stream_buffer);
		return;
	}
	if (ev_buf_printf(&f->sse, "data: %s\n\n", json))
		ev_log_error("serve: a stream chunk was lost (out of memory)");
}

/* One SSE chunk: a content delta and/or the end. */
static void sse_chunk(inflight *f, const char *text, size_t len, const ev_completion *end)
{
	cJSON *root = cJSON_CreateObject(), *choices = cJSON_CreateArray(), *ch = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "id", f->id);
	cJSON_AddStringToObject(root, "object", f->chat ? "chat.completion.chunk" : "text_completion");
	cJSON_AddNumberToObject(root, "created", (double)f->created);
	cJSON_AddStringToObject(root, "model", f->o->name);
	cJSON_AddNumberToObject(ch, "index", 0);
	char *t = text ? ev_strndup(text, len) : NULL;
	if (f->chat) {
		cJSON *d = cJSON_CreateObject();
		if (t)
			cJSON_AddStringToObject(d, "content", t);
		if (end && end->tool_calls_json) {
			cJSON *tc = cJSON_Parse(end->tool_calls_json);
			int k = 0;
			cJSON *it;
			cJSON_ArrayForEach(it, tc) cJSON_AddNumberToObject(it, "index", k++);
			if (tc)
				cJSON_AddItemToObject(d, "tool_calls", tc);
		}
		cJSON_AddItemToObject(ch, "delta", d);
	} else {
		cJSON_AddStringToObject(ch, "text", t ? t : "");
	}
	free(t);
	if (end)
		cJSON_AddStringToObject(ch, "finish_reason", end->finish_reason ? end->finish_reason : "stop");
	else
		cJSON_AddNullToObject(ch, "finish_reason");
	cJSON_AddItemToArray(choices, ch);
	cJSON_AddItemToObject(root, "choices", choices);
	if (end) {
		cJSON *u = cJSON_CreateObject();
		cJSON_AddNumberToObject(u, "prompt_tokens", end->prompt_tokens);
		cJSON_AddNumberToObject(u, "completion_tokens", end->completion_tokens);
		cJSON_AddNumberToObject(u, "total_tokens", end->prompt_tokens + end->completion_tokens);
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "completion_tokens_details"), "reasoning_tokens",
		                        end->thinking_tokens);
		cJSON_AddItemToObject(root, "usage", u);
	}
	char *s = ev_json_print(root);
	cJSON_Delete(root);
	if (s)
		sse_put(f, s);
	else
		ev_log_error("serve: a stream chunk was lost (out of memory)");
	free(s);
}

/* The engine asks after every token whether to go on. */
static int on_cancelled(void *ctx)
{
	inflight *f = ctx;
	pthread_mutex_lock(&f->mu);
	bool stop = f->gone || f->overflow;
	/* conn is alive while suspended (MHD closes nothing suspended) and,
	 * for a plain answer, until the connection ends (which sets gone) */
	if (!stop && f->group) {
		pthread_mutex_lock(&f->group->mu);
		stop = f->group->gone || (f->group->suspended && ev_serve_client_gone(f->conn));
		pthread_mutex_unlock(&f->group->mu);
	} else if (!stop && (f->suspended || !f->stream)) {
		stop = ev_serve_client_gone(f->conn);
	}
	if (stop && !f->cancel_seen) {
		f->cancel_seen = true;
		ev_log_info("serve: %s: cancelled (%s)", f->id, f->overflow ? "the stream fell behind" : "the client left");
	}
	pthread_mutex_unlock(&f->mu);
	return stop;
}

static int on_delta(void *ctx, const char *text, size_t len)
{
	inflight *f = ctx;
	pthread_mutex_lock(&f->mu);
	if (f->stream && !f->gone && !f->hold) {
		sse_chunk(f, text, len, NULL);
		wake(f);
	}
	pthread_mutex_unlock(&f->mu);
	return on_cancelled(f);
}

static void on_done(void *ctx, ev_completion *c)
{
	inflight *f = ctx;
	ev_serve_openai *o = f->o;
	pthread_mutex_lock(&f->mu);
	f->c = *c;
	memset(c, 0, sizeof *c);
	bool ok = f->c.status == EV_COMPLETION_OK, cancelled = f->cancel_seen;
	if (f->stream && !f->gone) {
		if (f->overflow) {
			/* the error event is already in the buffer */
		} else if (ok) {
			/* the text went out as deltas (held back with tools: now the
			 * text without the calls, which come as tool_calls deltas
			 * only); the last chunk says how it ended */
			if (f->hold && f->c.text && *f->c.text)
				sse_chunk(f, f->c.text, strlen(f->c.text), NULL);
			sse_chunk(f, NULL, 0, &f->c);
		} else {
			ev_buf_puts(&f->sse, "data: {\"error\":");
			ev_json_buf_str(&f->sse, f->c.error ? f->c.error : "engine failure");
			ev_buf_puts(&f->sse, "}\n\n");
		}
		ev_buf_puts(&f->sse, "data: [DONE]\n\n");
	}
	f->done = true;
	wake(f);
	choice_group *g = f->group;
	pthread_mutex_unlock(&f->mu);
	if (g) { /* the last choice wakes the connection */
		pthread_mutex_lock(&g->mu);
		if (--g->remaining == 0 && g->suspended) {
			g->suspended = false;
			ev_serve_resume(g->conn);
		}
		pthread_mutex_unlock(&g->mu);
		group_unref(g);
	}
	pthread_mutex_lock(&o->mu);
	o->admitted--;
	if (cancelled)
		o->cancelled++;
	else if (ok)
		o->completed++;
	else
		o->failed++;
	pthread_mutex_unlock(&o->mu);
	inflight_unref(f);
}

/* MHD pulls the stream from here on one of its threads; with nothing to
 * send yet it suspends the connection until the engine adds some. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	inflight *f = cls;
	pthread_mutex_lock(&f->mu);
	ssize_t n;
	if (f->sent_off < f->sse.len) {
		size_t k = f->sse.len - f->sent_off < max ? f->sse.len - f->sent_off : max;
		memcpy(buf, f->sse.data + f->sent_off, k);
		f->sent_off += k;
		if (f->sent_off == f->sse.len) { /* everything sent: reuse the buffer */
			ev_buf_reset(&f->sse);
			f->sent_off = 0;
		}
		n = (ssize_t)k;
	} else if (f->done) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		ev_serve_suspend(f->conn);
		f->suspended = true;
		n = 0;
	}
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* The connection's side lets go (the stream or the deferred answer ended):
 * a request still running is cancelled at its next token. */
static void conn_release(void *cls)
{
	inflight *f = cls;
	pthread_mutex_lock(&f->mu);
	f->gone = true;
	pthread_mutex_unlock(&f->mu);
	inflight_unref(f);
}

/* ---- handlers ----------------------------------------------------------------------------------- */

/* Appends a chat-form logprobs list (token, logprob, bytes, top_logprobs)
 * to the legacy completions form: tokens, token_logprobs (null where there
 * is none), top_logprobs ({token: logprob}, null where there is none),
 * text_offset (characters from the start of the choice's text). `text`, when
 * set, gets the tokens' bytes (the echoed prompt of token ids). */
static void legacy_logprobs(cJSON *lp, const cJSON *list, long *off, ev_buf *text)
{
	cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens"),
	      *vals = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs"),
	      *tops = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs"),
	      *offs = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
	const cJSON *t;
	/* A token's offset counts the characters complete before it, as vLLM
	 * counts them: a token holding the first bytes of a character split
	 * over two tokens starts where the one holding its last byte does. */
	long lead = *off;
	int need = 0; /* continuation bytes still owed by the last character */
	cJSON_ArrayForEach(t, list)
	{
		*off = lead - (need > 0);
		cJSON_AddItemToArray(toks, cJSON_CreateString(ev_json_str(t, "token", "")));
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "logprob");
		cJSON_AddItemToArray(vals, cJSON_IsNumber(v) ? cJSON_CreateNumber(v->valuedouble) : cJSON_CreateNull());
		cJSON *top = cJSON_IsNumber(v) ? cJSON_CreateObject() : cJSON_CreateNull();
		const cJSON *alt;
		cJSON_ArrayForEach(alt, cJSON_GetObjectItemCaseSensitive(t, "top_logprobs"))
		{
			const char *k = ev_json_str(alt, "token", "");
			if (cJSON_IsObject(top) && !cJSON_GetObjectItemCaseSensitive(top, k))
				cJSON_AddNumberToObject(top, k, ev_json_num(alt, "logprob", 0));
		}
		cJSON_AddItemToArray(tops, top);
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*off));
		const cJSON *b;
		cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(t, "bytes"))
		{
			int by = b->valueint;
			if ((by & 0xC0) != 0x80) {
				lead++;
				need = by >= 0xF0 ? 3 : by >= 0xE0 ? 2 : by >= 0xC0 ? 1 : 0;
			} else if (need > 0) {
				need--;
			}
			if (text)
				ev_buf_putc(text, (char)by);
		}
	}
	*off = lead - (need > 0);
}

static char *completion_text_body(const ev_serve_openai *o, const inflight *f)
{
	cJSON *root = cJSON_CreateObject(), *choices = cJSON_CreateArray(), *ch = cJSON_CreateObject(),
	      *u = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "id", f->id);
	cJSON_AddStringToObject(root, "object", "text_completion");
	cJSON_AddNumberToObject(root, "created", (double)f->created);
	cJSON_AddStringToObject(root, "model", o->name);
	cJSON_AddNumberToObject(ch, "index", 0);
	cJSON *prompt = f->echo && f->c.prompt_logprobs_json ? cJSON_Parse(f->c.prompt_logprobs_json) : NULL;
	cJSON *content = f->c.logprobs_json ? cJSON_Parse(f->c.logprobs_json) : NULL;
	cJSON *lp = cJSON_CreateObject();
	ev_buf text = EV_BUF_INIT((size_t)1 << 30);
	long off = 0;
	cJSON_AddItemToObject(lp, "tokens", cJSON_CreateArray());
	cJSON_AddItemToObject(lp, "token_logprobs", cJSON_CreateArray());
	cJSON_AddItemToObject(lp, "top_logprobs", cJSON_CreateArray());
	cJSON_AddItemToObject(lp, "text_offset", cJSON_CreateArray());
	if (f->echo) { /* the prompt's text, then the answer's */
		if (f->echo_text)
			ev_buf_puts(&text, f->echo_text);
		if (prompt) /* offsets count the prompt's own tokens' bytes */
			legacy_logprobs(lp, prompt, &off, f->echo_text ? NULL : &text);
		off = (long)ev_utf8_chars(text.data ? text.data : "", text.len);
	}
	ev_buf_puts(&text, f->c.text ? f->c.text : "");
	cJSON_AddStringToObject(ch, "text", text.data ? text.data : "");
	ev_buf_free(&text);
	if (content)
		legacy_logprobs(lp, content, &off, NULL);
	if (content) /* logprobs asked (an empty list when nothing was generated) */
		cJSON_AddItemToObject(ch, "logprobs", lp);
	else
		cJSON_Delete(lp);
	cJSON_Delete(prompt);
	cJSON_Delete(content);
	cJSON_AddStringToObject(ch, "finish_reason", f->c.finish_reason ? f->c.finish_reason : "stop");
	cJSON_AddItemToArray(choices, ch);
	cJSON_AddItemToObject(root, "choices", choices);
	cJSON_AddNumberToObject(u, "prompt_tokens", f->c.prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", f->c.completion_tokens);
	cJSON_AddNumberToObject(u, "total_tokens", f->c.prompt_tokens + f->c.completion_tokens);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "completion_tokens_details"), "reasoning_tokens",
	                        f->c.thinking_tokens);
	cJSON_AddItemToObject(root, "usage", u);
	char *s = ev_json_print(root);
	cJSON_Delete(root);
	return s;
}

/* The Responses form of a chat completion: a message item with the text
 * (when there is text or no call), then one function_call item a call. */
static char *responses_body(const ev_serve_openai *o, const inflight *f)
{
	cJSON *root = cJSON_CreateObject(), *out = cJSON_CreateArray(), *u = cJSON_CreateObject();
	bool cut = f->c.finish_reason && !strcmp(f->c.finish_reason, "length");
	cJSON_AddStringToObject(root, "id", f->id);
	cJSON_AddStringToObject(root, "object", "response");
	cJSON_AddNumberToObject(root, "created_at", (double)f->created);
	cJSON_AddStringToObject(root, "status", cut ? "incomplete" : "completed");
	cJSON_AddStringToObject(root, "model", o->name);
	cJSON *calls = f->c.tool_calls_json ? cJSON_Parse(f->c.tool_calls_json) : NULL;
	if ((f->c.text && *f->c.text) || !cJSON_GetArraySize(calls)) {
		cJSON *m = cJSON_CreateObject(), *content = cJSON_CreateArray(), *part = cJSON_CreateObject();
		char mid[80];
		snprintf(mid, sizeof mid, "msg_%s", f->id);
		cJSON_AddStringToObject(m, "type", "message");
		cJSON_AddStringToObject(m, "id", mid);
		cJSON_AddStringToObject(m, "status", cut ? "incomplete" : "completed");
		cJSON_AddStringToObject(m, "role", "assistant");
		cJSON_AddStringToObject(part, "type", "output_text");
		cJSON_AddStringToObject(part, "text", f->c.text ? f->c.text : "");
		cJSON_AddItemToObject(part, "annotations", cJSON_CreateArray());
		cJSON_AddItemToArray(content, part);
		cJSON_AddItemToObject(m, "content", content);
		cJSON_AddItemToArray(out, m);
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, calls) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		cJSON *item = cJSON_CreateObject();
		const char *cid = ev_json_str(c, "id", "call");
		char fid[96];
		snprintf(fid, sizeof fid, "fc_%s", cid);
		cJSON_AddStringToObject(item, "type", "function_call");
		cJSON_AddStringToObject(item, "id", fid);
		cJSON_AddStringToObject(item, "call_id", cid);
		cJSON_AddStringToObject(item, "name", ev_json_str(fn, "name", ""));
		cJSON_AddStringToObject(item, "arguments", ev_json_str(fn, "arguments", "{}"));
		cJSON_AddStringToObject(item, "status", "completed");
		cJSON_AddItemToArray(out, item);
	}
	cJSON_Delete(calls);
	cJSON_AddItemToObject(root, "output", out);
	if (cut) {
		cJSON *d = cJSON_AddObjectToObject(root, "incomplete_details");
		cJSON_AddStringToObject(d, "reason", "max_output_tokens");
	} else {
		cJSON_AddNullToObject(root, "incomplete_details");
	}
	cJSON_AddNullToObject(root, "error");
	cJSON_AddBoolToObject(root, "parallel_tool_calls", true);
	cJSON_AddStringToObject(root, "tool_choice", "auto");
	cJSON_AddItemToObject(root, "tools", cJSON_CreateArray());
	cJSON_AddNumberToObject(u, "input_tokens", f->c.prompt_tokens);
	cJSON_AddNumberToObject(u, "output_tokens", f->c.completion_tokens);
	cJSON_AddNumberToObject(u, "total_tokens", f->c.prompt_tokens + f->c.completion_tokens);
	cJSON_AddItemToObject(root, "usage", u);
	char *s = ev_json_print(root);
	cJSON_Delete(root);
	return s;
}

/* A plain (non-streaming) answer, once the engine is done and the
 * connection resumed. */
static int finish_plain(void *cls, ev_serve_response *resp)
{
	inflight *f = cls;
	pthread_mutex_lock(&f->mu);
	bool done = f->done;
	pthread_mutex_unlock(&f->mu);
	if (!done)
		return ev_error_set(EV_E_INTERNAL, "serve: %s answered before the engine finished", f->id);
	if (f->c.status != EV_COMPLETION_OK)
		return ev_error_set(EV_E_BACKEND, "%s", f->c.error ? f->c.error : "the engine failed");
	resp->body = f->responses ? responses_body(f->o, f)
	             : f->chat    ? ev_strdup(f->c.raw_json)
	                          : completion_text_body(f->o, f);
	return resp->body ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* n > 1: the choices' answers as one response, once every one is done. */
static int finish_choices(void *cls, ev_serve_response *resp)
{
	choice_group *g = cls;
	cJSON *root = NULL, *list = cJSON_CreateArray();
	int rc = list ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	long completion_tokens = 0, prompt_tokens = 0;
	for (int i = 0; !rc && i < g->n; i++) {
		inflight *f = g->f[i];
		pthread_mutex_lock(&f->mu);
		bool done = f->done;
		pthread_mutex_unlock(&f->mu);
		if (!done)
			return ev_error_set(EV_E_INTERNAL, "serve: choice %d answered before the engine finished", i);
		if (f->c.status != EV_COMPLETION_OK) {
			rc = ev_error_set(EV_E_BACKEND, "choice %d: %s", i, f->c.error ? f->c.error : "the engine failed");
			break;
		}
		char *body = f->chat ? ev_strdup(f->c.raw_json) : completion_text_body(f->o, f);
		cJSON *one = NULL;
		if (!body || ev_json_parse(&one, body, strlen(body), "choice")) {
			free(body);
			rc = ev_error_code() ? ev_error_code() : ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		free(body);
		cJSON *ch = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(one, "choices"), 0);
		if (ch) {
			cJSON_DeleteItemFromObjectCaseSensitive(ch, "index");
			cJSON_AddNumberToObject(ch, "index", i);
			cJSON_AddItemToArray(list, ch);
		}
		completion_tokens += f->c.completion_tokens;
		if (i % g->per == 0) /* each prompt counted once */
			prompt_tokens += f->c.prompt_tokens;
		if (!root) {
			root = one; /* the first answer's id, object, created, model */
		} else {
			cJSON_Delete(one);
		}
	}
	if (!rc && root) {
		cJSON_ReplaceItemInObjectCaseSensitive(root, "choices", list);
		list = NULL;
		cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "usage");
		cJSON_ReplaceItemInObjectCaseSensitive(u, "prompt_tokens", cJSON_CreateNumber((double)prompt_tokens));
		cJSON_ReplaceItemInObjectCaseSensitive(u, "completion_tokens", cJSON_CreateNumber((double)completion_tokens));
		cJSON_ReplaceItemInObjectCaseSensitive(u, "total_tokens",
		                                       cJSON_CreateNumber((double)(prompt_tokens + completion_tokens)));
		resp->body = ev_json_print(root);
		if (!resp->body)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	}
	cJSON_Delete(list);
	cJSON_Delete(root);
	return rc;
}

static void choices_release(void *cls)
{
	choice_group *g = cls;
	pthread_mutex_lock(&g->mu);
	g->gone = true;
	pthread_mutex_unlock(&g->mu);
	for (int i = 0; i < g->n; i++)
		if (g->f[i])
			conn_release(g->f[i]);
	group_unref(g);
}

/* 503 with Retry-After: the server is full or stopping (clients retry). */
static int busy(ev_serve_response *resp, const char *why)
{
	ev_serve_openai_error(resp, 503, NULL, "server_busy", why);
	resp->retry_after = 1;
	return 0;
}

static int busy(ev_serve_response *resp, const char *why);

/* n > 1 choices, not streamed: n generations of one request, each its own
 * seed (the request's plus the choice's index, or a fresh one), answered
 * together; the queue takes all n or none. */
static int generate_choices(ev_serve_openai *o, const ev_serve_request *rq, ev_serve_response *resp, bool chat,
                            parsed *p)
{
	int per = p->n_choices, n = per * (chat ? 1 : p->n_prompts);
	pthread_rwlock_rdlock(&o->life);
	pthread_mutex_lock(&o->mu);
	bool ok = !o->stopped && o->admitted + n <= o->opt.max_queue;
	if (ok)
		o->admitted += n;
	else
		o->rejected++;
	unsigned long long id = ++o->next_id;
	long queued = o->admitted;
	bool stopped = o->stopped;
	pthread_mutex_unlock(&o->mu);
	if (!ok) {
		pthread_rwlock_unlock(&o->life);
		char why[160];
		snprintf(why, sizeof why, "the server is %s: %ld requests in flight, %d more asked (--max-queue); retry later",
		         stopped ? "stopping" : "busy", queued, n);
		return busy(resp, why);
	}
	choice_group *g = calloc(1, sizeof *g);
	if (!g) {
		pthread_mutex_lock(&o->mu);
		o->admitted -= n;
		pthread_mutex_unlock(&o->mu);
		pthread_rwlock_unlock(&o->life);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	pthread_mutex_init(&g->mu, NULL);
	g->n = n;
	g->per = per;
	g->remaining = n;
	g->refs = 1 + n; /* the connection, and each choice until its on_done */
	g->conn = rq->conn;
	for (int i = 0; i < n; i++) {
		inflight *f = calloc(1, sizeof *f);
		int rc = f ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
		if (f) {
			pthread_mutex_init(&f->mu, NULL);
			f->refs = 2; /* the group, and the engine */
			f->o = o;
			f->conn = rq->conn;
			f->chat = chat;
			f->created = (long)time(NULL);
			f->group = g;
			f->echo = p->echo;
			f->echo_text = p->echo && p->texts[i / per] ? ev_strdup(p->texts[i / per]) : NULL;
			snprintf(f->id, sizeof f->id, "%s-evald-%llu", chat ? "chatcmpl" : "cmpl", id);
			g->f[i] = f;
			ev_request req = p->req;
			if (req.gen.has_seed)
				req.gen.seed += i % per;
			ev_engine_stream cb = {on_delta, on_done, on_cancelled, f};
			rc = chat ? ev_backend_engine_submit_stream(o->be, &req, NULL, &cb) : submit_prompt(o, &req, p, i / per, &cb);
		}
		if (rc) { /* this choice never runs: it fails, and lets go of the group */
			if (f) {
				f->refs = 1;
				f->done = true;
				f->c.status = EV_COMPLETION_ERROR;
				f->c.error = ev_strdup(ev_error_msg());
			}
			pthread_mutex_lock(&o->mu);
			o->admitted--;
			o->failed++;
			pthread_mutex_unlock(&o->mu);
			pthread_mutex_lock(&g->mu);
			g->remaining--;
			pthread_mutex_unlock(&g->mu);
			group_unref(g);
		}
	}
	pthread_rwlock_unlock(&o->life);
	pthread_mutex_lock(&g->mu);
	if (g->remaining) {
		ev_serve_suspend(rq->conn);
		g->suspended = true;
	}
	pthread_mutex_unlock(&g->mu);
	resp->defer = g;
	resp->finish = finish_choices;
	resp->release = choices_release;
	return 0;
}

typedef enum { API_COMPLETIONS, API_CHAT, API_RESPONSES } api_kind;

static int generate(ev_serve_openai *o, const ev_serve_request *rq, ev_serve_response *resp, api_kind api)
{
	bool chat = api != API_COMPLETIONS;
	cJSON *root = NULL;
	parsed p;
	memset(&p, 0, sizeof p);
	inflight *f = NULL;
	bool admitted = false, locked = false;
	int rc = ev_json_parse(&root, rq->body, rq->body_len, "request body");
	if (rc)
		goto done;
	if (!cJSON_IsObject(root)) {
		rc = ev_error_set(EV_E_INVALID, "request body: expected a JSON object");
		goto done;
	}
	/* A request that names a model gets that model or an error: an answer
	 * from another one would be stored under the wrong name. */
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (model && !cJSON_IsNull(model)) {
		if (!cJSON_IsString(model)) {
			rc = ev_error_set(EV_E_INVALID, "model: expected a string");
			goto done;
		}
		if (strcmp(model->valuestring, o->name)) {
			rc = ev_error_set(EV_E_NOTFOUND, "model \"%.100s\": not served here (this server serves \"%s\"; see GET /v1/models)",
			                  model->valuestring, o->name);
			goto done;
		}
	}
	p.image_root = o->image_root;
	if ((rc = api == API_RESPONSES ? parse_responses(&p, root) : chat ? parse_chat(&p, root) : parse_completion(&p, root)))
		goto done;
	if (p.n_choices > 1 || (!chat && p.n_prompts > 1)) {
		rc = generate_choices(o, rq, resp, chat, &p);
		goto done;
	}

	pthread_rwlock_rdlock(&o->life);
	locked = true;
	pthread_mutex_lock(&o->mu);
	if (!o->stopped && o->admitted < o->opt.max_queue) {
		o->admitted++;
		admitted = true;
	} else {
		o->rejected++;
	}
	unsigned long long id = ++o->next_id;
	long queued = o->admitted;
	pthread_mutex_unlock(&o->mu);
	if (!admitted) {
		if (o->stopped)
			rc = busy(resp, "the server is stopping");
		else {
			char why[128];
			snprintf(why, sizeof why, "the server is busy: %ld requests in flight (--max-queue); retry later", queued);
			rc = busy(resp, why);
		}
		goto done;
	}
	if (!(f = calloc(1, sizeof *f))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	pthread_mutex_init(&f->mu, NULL);
	f->refs = 2;
	f->o = o;
	f->conn = rq->conn;
	f->chat = chat;
	f->stream = p.stream;
	f->responses = api == API_RESPONSES;
	f->hold = p.stream && chat && p.req.tools_json;
	f->echo = p.echo;
	f->echo_text = p.echo && p.texts[0] ? ev_strdup(p.texts[0]) : NULL;
	f->created = (long)time(NULL);
	snprintf(f->id, sizeof f->id, "%s-evald-%llu", api == API_RESPONSES ? "resp" : chat ? "chatcmpl" : "cmpl", id);
	if (p.stream) {
		/* room past the allowance for the closing events */
		ev_buf_init(&f->sse, o->opt.stream_buffer + 4096);
		if (chat) { /* the opening chunk names the role, as OpenAI's does */
			char *s = ev_asprintf("{\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":%ld,\"model\":",
			                      f->id, f->created);
			ev_buf lead = EV_BUF_INIT(64 * 1024);
			ev_buf_puts(&lead, s ? s : "{");
			free(s);
			ev_json_buf_str(&lead, o->name);
			ev_buf_puts(&lead, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
			                   "\"finish_reason\":null}]}");
			if (lead.data)
				sse_put(f, lead.data);
			ev_buf_free(&lead);
		}
	}
	ev_engine_stream cb = {on_delta, on_done, on_cancelled, f};
	if ((rc = chat ? ev_backend_engine_submit_stream(o->be, &p.req, NULL, &cb) : submit_prompt(o, &p.req, &p, 0, &cb))) {
		f->refs = 1;
		goto done;
	}
	admitted = false; /* on_done counts it out now */
	pthread_rwlock_unlock(&o->life);
	locked = false;
	if (p.stream) {
		/* the stream's allowance is what is held back; keep the kernel's
		 * share small too (it would grow to megabytes for a reader that
		 * does not read) */
		ev_serve_cap_send_buffer(rq->conn, 64 * 1024);
		struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, f,
		                                                           conn_release);
		if (!r) {
			pthread_mutex_lock(&f->mu);
			f->gone = true;
			pthread_mutex_unlock(&f->mu);
			rc = ev_error_set(EV_E_NOMEM, "cannot create the stream response");
			goto done;
		}
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		resp->mhd = r;
		resp->status = 200;
		f = NULL; /* the stream owns the connection's reference */
		goto done;
	}
	/* A plain answer: the connection waits suspended, holding no thread,
	 * unless the engine has finished already. */
	pthread_mutex_lock(&f->mu);
	if (!f->done) {
		ev_serve_suspend(rq->conn);
		f->suspended = true;
	}
	pthread_mutex_unlock(&f->mu);
	resp->defer = f;
	resp->finish = finish_plain;
	resp->release = conn_release;
	f = NULL; /* the deferred answer owns the connection's reference */
done:
	if (admitted) {
		pthread_mutex_lock(&o->mu);
		o->admitted--;
		o->failed++;
		pthread_mutex_unlock(&o->mu);
	}
	if (locked)
		pthread_rwlock_unlock(&o->life);
	if (f)
		inflight_unref(f);
	parsed_clear(&p);
	cJSON_Delete(root);
	return rc;
}

static int h_chat(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	return generate(ctx, rq, resp, API_CHAT);
}

static int h_completions(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	return generate(ctx, rq, resp, API_COMPLETIONS);
}

static int h_responses(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	return generate(ctx, rq, resp, API_RESPONSES);
}

static int h_models(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	(void)rq;
	ev_serve_openai *o = ctx;
	ev_buf b = EV_BUF_INIT(64 * 1024);
	int rc = ev_buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
	if (!rc)
		rc = ev_json_buf_str(&b, o->name);
	if (!rc)
		rc = ev_buf_printf(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"evald\",\"context_length\":%ld}]}",
		                   o->max_context);
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	resp->body = ev_buf_detach(&b, &resp->body_len);
	return 0;
}

/* GET /health: whether the model is up, and the request counters. */
static int h_health(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	(void)rq;
	ev_serve_openai *o = ctx;
	pthread_mutex_lock(&o->mu);
	bool stopped = o->stopped;
	long admitted = o->admitted;
	unsigned long long done = o->completed, cancelled = o->cancelled, rejected = o->rejected, failed = o->failed;
	pthread_mutex_unlock(&o->mu);
	ev_buf b = EV_BUF_INIT(64 * 1024);
	int rc = ev_buf_printf(&b, "{\"status\":\"%s\",\"model\":", stopped ? "stopping" : "ok");
	if (!rc)
		rc = ev_json_buf_str(&b, o->name);
	if (!rc)
		rc = ev_buf_printf(&b,
		                   ",\"in_flight\":%ld,\"max_queue\":%d,\"completed\":%llu,\"cancelled\":%llu,"
		                   "\"rejected\":%llu,\"failed\":%llu}",
		                   admitted, o->opt.max_queue, done, cancelled, rejected, failed);
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	resp->body = ev_buf_detach(&b, &resp->body_len);
	if (stopped)
		resp->status = 503;
	return 0;
}

static int h_unknown(void *ctx, const ev_serve_request *rq, ev_serve_response *resp)
{
	(void)ctx, (void)resp;
	return ev_error_set(EV_E_NOTFOUND, "%s %.200s: no such endpoint (POST /v1/chat/completions, POST /v1/completions, "
	                    "POST /v1/responses, GET /v1/models)", rq->method, rq->path);
}

/* ---- construction ---------------------------------------------------------------------------------- */

int ev_serve_openai_new(ev_serve_openai **out, const void *engine_backend_options, const ev_serve_openai_options *opt)
{
	const ev_engine_backend_options *eopt = engine_backend_options;
	*out = NULL;
	ev_serve_openai *o = calloc(1, sizeof *o);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	o->opt = opt ? *opt : (ev_serve_openai_options)EV_SERVE_OPENAI_OPTIONS_INIT;
	if (o->opt.max_queue <= 0)
		o->opt.max_queue = 64;
	if (!o->opt.stream_buffer)
		o->opt.stream_buffer = (size_t)256 << 20;
	int rc = 0;
	if (o->opt.image_root && !(o->image_root = realpath(o->opt.image_root, NULL)))
		rc = ev_error_set(EV_E_NOTFOUND, "--image-root %s: %s", o->opt.image_root, strerror(errno));
	if (!rc)
		rc = ev_backend_engine_new(&o->be, eopt);
	if (!rc && !(o->name = ev_strdup(ev_backend_engine_model_name(o->be))))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc) {
		ev_backend_free(o->be);
		free(o->image_root);
		free(o);
		return rc;
	}
	o->max_context = ev_backend_engine_max_context(o->be);
	pthread_mutex_init(&o->mu, NULL);
	pthread_rwlock_init(&o->life, NULL);
	*out = o;
	return 0;
}

void ev_serve_openai_stop(ev_serve_openai *o)
{
	if (!o)
		return;
	pthread_rwlock_wrlock(&o->life);
	pthread_mutex_lock(&o->mu);
	bool was = o->stopped;
	o->stopped = true;
	pthread_mutex_unlock(&o->mu);
	if (!was) {
		/* every request still running gets on_done (an error), which
		 * resumes its connection */
		ev_backend_free(o->be);
		o->be = NULL;
	}
	pthread_rwlock_unlock(&o->life);
}

void ev_serve_openai_free(ev_serve_openai *o)
{
	if (!o)
		return;
	ev_serve_openai_stop(o);
	pthread_rwlock_destroy(&o->life);
	pthread_mutex_destroy(&o->mu);
	free(o->name);
	free(o->image_root);
	free(o);
}

const char *ev_serve_openai_model_name(const ev_serve_openai *o) { return o ? o->name : NULL; }

int ev_serve_openai_register(ev_serve *s, ev_serve_openai *o)
{
	const ev_serve_route routes[] = {
		{"GET", "/v1/models", false, h_models, o, 0, true},
		{"POST", "/v1/chat/completions", false, h_chat, o, EV_SERVE_JSON_BODY_MAX, true},
		{"POST", "/v1/completions", false, h_completions, o, EV_SERVE_JSON_BODY_MAX, true},
		{"POST", "/v1/responses", false, h_responses, o, EV_SERVE_JSON_BODY_MAX, true},
		{"GET", "/health", false, h_health, o, 0, false},
		{NULL, "/v1/*", false, h_unknown, o, 4096, true},
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		int rc = ev_serve_add_route(s, &routes[i]);
		if (rc)
			return rc;
	}
	return 0;
}
