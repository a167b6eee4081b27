/*
 * runners/backend_engine.c: the bundled engine as a runner backend.
 *
 * One worker thread owns the model's scheduler (eng_batch). Callers' threads
 * render and tokenize their requests (the tokenizer is shareable) and hand
 * the worker a ready job through a locked queue; the worker admits queued
 * jobs, runs one batched step, and turns finished sequences into
 * completions. Per generated token (on the worker) the text grows through
 * the streaming detokenizer, stop strings are searched in the new tail, and
 * the part of the text that no stop string can still claim goes to the
 * streaming callback. Completions go to poll()'s queue, or to on_done for
 * streaming callers (evald serve).
 */
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/vision/vision.h"
#include "runners/runners_int.h"

#define MAX_TEXT ((size_t)64 << 20) /* generated text of one request */
#define MAX_IMAGES 64                /* image and video parts of one request (a video sent as frames is many) */
#define MAX_IMAGE_BYTES ((size_t)64 << 20)
#define MAX_CACHED_IMAGES 256        /* encoded images kept for a run */

/* An encoded image, by the SHA-256 of its bytes. */
struct img_cached {
	unsigned char sha[32];
	float *rows;
	int n;
	int grid_t, frame_tokens; /* a video's: temporal patches, tokens a patch's frame */
};
#define MAX_STOP_STRINGS 16
#define MAX_STOP_IDS 16

/* What a scheduler cookie points to: a job, or one continuation of a
 * scoring job (both structs start with the tag). */
enum { TAG_JOB = 1, TAG_PART = 2 };

struct ejob;

/* One continuation of a scoring job: the context's tokens then its own. */
typedef struct {
	int tag;
	struct ejob *j;
	int32_t *ids;
	int n, ctx;
} epart;

typedef struct ejob {
	int tag;
	struct ejob *next;
	struct ejob *lprev, *lnext; /* the worker's list of jobs in the scheduler */
	uint64_t bid;               /* the scheduler's id */
	void *cookie;
	bool streamed;
	ev_engine_stream cb;
	bool chat, tools;
	int32_t *prompt;
	size_t n_prompt;
	char prompt_hash[17];       /* the prompt's token ids hashed (provenance), "" for scoring jobs */
	eng_generate_options gen;
	char **stop;
	size_t n_stop, max_stop;
	eng_detok_stream *detok;
	ev_buf text;
	size_t emitted;
	bool cut;       /* a stop string ended it */
	bool want_lp, want_plp, prompt_only; /* log-probabilities kept (ev_gen) */
	int top_lp;
	bool cancelled; /* on_delta asked to stop */
	double t0;
	int status;     /* a failure found before the engine ran it */
	char *error;
	/* image rows for the prompt's placeholders (a multimodal M3) */
	float *embeds;
	int n_embeds;
	eng_think_options think; /* the budget, or where blocks open and close (counting only) */
	/* a scoring request: one scheduler request a continuation */
	epart *parts;
	ev_loglik *ll;
	int n_parts, parts_left;
} ejob;

typedef struct engine {
	ev_engine_backend_options opt;
	char *name;
	eng_model *m;
	eng_model_info info;
	eng_tokenizer *tok;
	eng_chat_template *tmpl; /* the checkpoint's own template, rendered as transformers does */
	ev_rng seeds;            /* for requests without a seed (behind mu) */
	eng_chat_family family;  /* tool-call parsing and turn ends; the renderer without a template */
	int32_t chat_stop[MAX_STOP_IDS], raw_stop[MAX_STOP_IDS];
	int n_chat_stop, n_raw_stop;
	int32_t think_open, think_close; /* <think> and </think> as single tokens, or -1 */
	eng_batch *batch;
	/* a multimodal M3's vision tower (NULL: text only), and the rows of the
	 * images seen in this run by content hash (an image in many samples is
	 * encoded once), both behind vmu */
	eng_vision_model *vm;
	pthread_mutex_t vmu;
	struct img_cached *imgs;
	int n_imgs;
	pthread_t worker;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv_work, cv_done;
	bool stop;
	ejob *in, *in_tail;       /* submitted, not yet in the scheduler */
	ev_completion *ready;     /* finished, for poll() */
	size_t n_ready, cap_ready;
	int pending;              /* poll()-returned requests not yet returned */
	ejob *live;               /* in the scheduler (worker only) */
	unsigned long long seq;   /* completion ids */
} engine;

static void ejob_free(ejob *j)
{
	if (!j)
		return;
	free(j->prompt);
	for (size_t i = 0; i < j->n_stop; i++)
		free(j->stop[i]);
	free(j->stop);
	eng_detok_stream_free(j->detok);
	ev_buf_free(&j->text);
	free(j->error);
	for (int i = 0; i < j->n_parts; i++)
		free(j->parts[i].ids);
	free(j->parts);
	free(j->ll);
	free(j->embeds);
	free(j);
}

/* ---- text as it is generated ---------------------------------------------------- */

/* Sends the text that is final: everything when the request ended,
 * otherwise all but the last max_stop - 1 bytes (a stop string may still
 * begin there), never splitting a UTF-8 sequence. */
static void emit(ejob *j, bool final)
{
	size_t upto = j->text.len;
	if (!final && j->max_stop > 1)
		upto = upto > j->max_stop - 1 ? upto - (j->max_stop - 1) : 0;
	while (!final && upto > j->emitted && upto < j->text.len && ((unsigned char)j->text.data[upto] & 0xC0) == 0x80)
		upto--;
	if (upto <= j->emitted)
		return;
	if (j->streamed && j->cb.on_delta && !j->cancelled &&
	    j->cb.on_delta(j->cb.ctx, j->text.data + j->emitted, upto - j->emitted))
		j->cancelled = true;
	j->emitted = upto;
}

/* The scheduler's per-token callback: non-zero ends the sequence. */
static int on_token(void *ctx, int32_t token, double logprob)
{
	ejob *j = ctx;
	size_t old = j->text.len;
	if (eng_detok_stream_push(j->detok, token, &j->text) || ev_buf_replace_nul(&j->text, old))
		return 1; /* text cap reached: end as if by length */
	if (j->n_stop) {
		size_t from = old > j->max_stop - 1 ? old - (j->max_stop - 1) : 0;
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < j->n_stop; i++) {
			const char *p = j->text.data + from;
			size_t sl = strlen(j->stop[i]);
			while ((p = memchr(p, j->stop[i][0], j->text.len - (size_t)(p - j->text.data)))) {
				size_t at = (size_t)(p - j->text.data);
				if (at + sl > j->text.len)
					break;
				if (!memcmp(p, j->stop[i], sl)) {
					best = at < best ? at : best;
					break;
				}
				p++;
			}
		}
		if (best != SIZE_MAX) {
			j->text.len = best;
			j->text.data[best] = 0;
			j->cut = true;
			emit(j, true);
			return 1;
		}
	}
	emit(j, false);
	if (!j->cancelled && j->streamed && j->cb.cancelled && j->cb.cancelled(j->cb.ctx))
		j->cancelled = true;
	return j->cancelled;
}

/* ---- completions ------------------------------------------------------------------ */

/* OpenAI tool_calls array of the calls parsed out of the text (well-formed
 * ones only); NULL when there are none. */
static char *tool_calls_json(const eng_chat_parsed *p, unsigned long long id)
{
	cJSON *arr = cJSON_CreateArray();
	size_t k = 0;
	for (size_t i = 0; arr && i < p->n_calls; i++) {
		const eng_tool_call *c = &p->calls[i];
		if (c->error || !c->name)
			continue;
		cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
		char cid[64];
		snprintf(cid, sizeof cid, "call_%llu_%zu", id, k++);
		cJSON_AddStringToObject(o, "id", cid);
		cJSON_AddStringToObject(o, "type", "function");
		cJSON_AddStringToObject(f, "name", c->name);
		cJSON_AddStringToObject(f, "arguments", c->arguments ? c->arguments : "{}");
		cJSON_AddItemToObject(o, "function", f);
		cJSON_AddItemToArray(arr, o);
	}
	char *s = k ? ev_json_print(arr) : NULL;
	cJSON_Delete(arr);
	return s;
}

/* One token as OpenAI writes it in logprobs: "token", "logprob" (null
 * when not a number: a prompt's first token), "bytes"; the object is left
 * open for the caller. */
static void token_lp_json(ev_buf *b, const engine *e, int32_t tok, double lp)
{
	size_t len = 0;
	const char *p = eng_token_bytes(e->tok, tok, &len);
	ev_buf_puts(b, "{\"token\":");
	ev_json_buf_strn(b, p ? p : "", p ? len : 0);
	if (!isnan(lp)) /* -inf (a probability below f32's range) as -9999, as vLLM writes it */
		ev_buf_printf(b, ",\"logprob\":%.9g,\"bytes\":[", isinf(lp) ? -9999.0 : lp);
	else
		ev_buf_puts(b, ",\"logprob\":null,\"bytes\":[");
	for (size_t k = 0; p && k < len; k++)
		ev_buf_printf(b, "%s%u", k ? "," : "", (unsigned char)p[k]);
	ev_buf_putc(b, ']');
}

/* Tokens' log-probabilities as OpenAI's chat logprobs.content list, each
 * with its top_logprobs alternatives. */
static char *logprobs_json(const engine *e, const eng_logprob *lp, int n)
{
	ev_buf b = EV_BUF_INIT((size_t)256 << 20);
	ev_buf_putc(&b, '[');
	for (int i = 0; i < n; i++) {
		if (i)
			ev_buf_putc(&b, ',');
		token_lp_json(&b, e, lp[i].token, lp[i].logprob);
		ev_buf_puts(&b, ",\"top_logprobs\":[");
		for (int k = 0; k < lp[i].n_top; k++) {
			if (k)
				ev_buf_putc(&b, ',');
			token_lp_json(&b, e, lp[i].top_id[k], lp[i].top_lp[k]);
			ev_buf_putc(&b, '}');
		}
		ev_buf_puts(&b, "]}");
	}
	ev_buf_putc(&b, ']');
	return ev_buf_detach(&b, NULL);
}

/* The OpenAI chat.completion body of a completion. */

static char *completion_body(const engine *e, const ev_completion *c, unsigned long long id)
{
	cJSON *root = cJSON_CreateObject(), *choices = cJSON_CreateArray(), *ch = cJSON_CreateObject(),
	      *msg = cJSON_CreateObject(), *usage = cJSON_CreateObject();
	char cid[64];
	snprintf(cid, sizeof cid, "chatcmpl-evald-%llu", id);
	cJSON_AddStringToObject(root, "id", cid);
	cJSON_AddStringToObject(root, "object", "chat.completion");
	cJSON_AddNumberToObject(root, "created", (double)time(NULL));
	cJSON_AddStringToObject(root, "model", e->name);
	cJSON_AddNumberToObject(ch, "index", 0);
	cJSON_AddStringToObject(msg, "role", "assistant");
	cJSON_AddStringToObject(msg, "content", c->text ? c->text : "");
	if (c->tool_calls_json) {
		cJSON *tc = cJSON_Parse(c->tool_calls_json);
		if (tc)
			cJSON_AddItemToObject(msg, "tool_calls", tc);
	}
	cJSON_AddItemToObject(ch, "message", msg);
	if (c->logprobs_json) {
		cJSON *content = cJSON_Parse(c->logprobs_json), *lp = cJSON_CreateObject();
		if (content && lp) {
			cJSON_AddItemToObject(lp, "content", content);
			cJSON_AddItemToObject(ch, "logprobs", lp);
		} else {
			cJSON_Delete(content);
			cJSON_Delete(lp);
		}
	}
	cJSON_AddStringToObject(ch, "finish_reason", c->finish_reason ? c->finish_reason : "stop");
	cJSON_AddItemToArray(choices, ch);
	cJSON_AddItemToObject(root, "choices", choices);
	cJSON_AddNumberToObject(usage, "prompt_tokens", c->prompt_tokens);
	cJSON_AddNumberToObject(usage, "completion_tokens", c->completion_tokens);
	cJSON_AddNumberToObject(usage, "total_tokens", c->prompt_tokens + c->completion_tokens);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(usage, "completion_tokens_details"), "reasoning_tokens",
	                        c->thinking_tokens);
	cJSON_AddItemToObject(root, "usage", usage);
	char *s = ev_json_print(root);
	cJSON_Delete(root);
	return s;
}

/* Fills *c from a finished job (res NULL: it failed before running). */
static int thinking_tokens(const ejob *j, const int32_t *toks, int n);

static void complete(engine *e, ejob *j, const eng_batch_result *res, ev_completion *c)
{
	memset(c, 0, sizeof *c);
	c->cookie = j->cookie;
	c->attempts = 1;
	c->prompt_tokens = (int)j->n_prompt;
	memcpy(c->prompt_hash, j->prompt_hash, sizeof c->prompt_hash);
	unsigned long long id = ++e->seq;
	int status = res ? res->status : j->status;
	if (j->n_parts) { /* a scoring job: its parts' results are in already */
		status = j->status;
		for (int i = 0; i < j->n_parts; i++)
			c->prompt_tokens += i ? j->parts[i].n - j->parts[i].ctx : j->parts[i].n;
	}
	if (status) {
		c->status = status == EV_E_LIMIT && j->error && strstr(j->error, "pass the model's context")
		                ? EV_COMPLETION_CONTEXT
		                : EV_COMPLETION_ERROR;
		c->error = ev_asprintf("engine: %s", res ? (res->error ? res->error : "failed") : j->error);
		c->latency_s = ev_now() - j->t0;
		return;
	}
	if (j->n_parts) {
		if (ev_scoring_complete(c, j->ll, (size_t)j->n_parts, e->name, c->prompt_tokens)) {
			c->status = EV_COMPLETION_ERROR;
			c->error = ev_strdup(ev_error_msg());
		}
		c->latency_s = ev_now() - j->t0;
		return;
	}
	if (!j->cut) {
		eng_detok_stream_flush(j->detok, &j->text);
	}
	emit(j, true);
	c->status = EV_COMPLETION_OK;
	c->completion_tokens = res->n_tokens;
	c->thinking_tokens = thinking_tokens(j, res->tokens, res->n_tokens);
	const char *finish = res->reason == ENG_STOP_LENGTH && !j->cut ? "length" : "stop";
	char *text = NULL;
	if (j->tools && e->family != ENG_CHAT_UNKNOWN) {
		eng_chat_parsed *p = NULL;
		if (eng_chat_parse_tool_calls(&p, e->family, j->text.data ? j->text.data : "", j->text.len) == 0) {
			c->tool_calls_json = tool_calls_json(p, id);
			if (c->tool_calls_json) {
				text = ev_strdup(p->content);
				finish = "tool_calls";
			}
		}
		eng_chat_parsed_free(p);
	}
	c->text = text ? text : ev_strdup(j->text.data ? j->text.data : "");
	c->finish_reason = ev_strdup(finish);
	if (res->logprobs)
		c->logprobs_json = logprobs_json(e, res->logprobs, res->n_tokens);
	if (res->prompt_logprobs)
		c->prompt_logprobs_json = logprobs_json(e, res->prompt_logprobs, res->n_prompt);
	c->latency_s = ev_now() - j->t0;
	c->raw_json = completion_body(e, c, id);
}

static void deliver(engine *e, ejob *j, ev_completion *c)
{
	if (j->streamed) {
		if (j->cb.on_done)
			j->cb.on_done(j->cb.ctx, c);
		else
			ev_completion_clear(c);
		return;
	}
	pthread_mutex_lock(&e->mu);
	if (e->n_ready == e->cap_ready) {
		size_t cap = e->cap_ready ? e->cap_ready * 2 : 16;
		ev_completion *p = realloc(e->ready, cap * sizeof *p);
		if (!p) { /* keep the request counted: poll() reports the failure */
			pthread_mutex_unlock(&e->mu);
			ev_log_error("engine backend: out of memory queueing a completion");
			ev_completion_clear(c);
			return;
		}
		e->ready = p;
		e->cap_ready = cap;
	}
	e->ready[e->n_ready++] = *c;
	pthread_cond_broadcast(&e->cv_done);
	pthread_mutex_unlock(&e->mu);
}

/* ---- the worker ------------------------------------------------------------------------ */

static void unlink_live(engine *e, ejob *j)
{
	if (j->lprev)
		j->lprev->lnext = j->lnext;
	else if (e->live == j)
		e->live = j->lnext;
	if (j->lnext)
		j->lnext->lprev = j->lprev;
	j->lprev = j->lnext = NULL;
}

/* Queues every continuation of scoring job j; returns how many are in
 * (none: j failed, its status says why). */
static int add_parts(engine *e, ejob *j)
{
	j->parts_left = 0;
	for (int k = 0; k < j->n_parts; k++) {
		epart *p = &j->parts[k];
		eng_batch_request r = {.prompt = p->ids, .n_prompt = p->n, .gen = j->gen, .cookie = p,
		                       .prompt_logprobs = true, .prompt_only = true, .top_logprobs = 1};
		if (eng_batch_add(e->batch, &r, NULL)) {
			if (!j->status) {
				j->status = ev_error_code();
				j->error = ev_strdup(ev_error_msg());
			}
			continue;
		}
		j->parts_left++;
	}
	return j->parts_left;
}

/* One continuation scored: the sum of its tokens' log-probabilities and
 * whether each was the most likely. Returns the job when it was the last. */
static ejob *part_done(epart *p, const eng_batch_result *res)
{
	ejob *j = p->j;
	ev_loglik *l = &j->ll[p - j->parts];
	*l = (ev_loglik){0, p->n - p->ctx, true};
	if (res->status || !res->prompt_logprobs) {
		if (!j->status) {
			j->status = res->status ? res->status : EV_E_BACKEND;
			j->error = ev_strdup(res->error ? res->error : "no prompt log-probabilities");
		}
	} else {
		for (int i = p->ctx; i < p->n; i++) {
			const eng_logprob *t = &res->prompt_logprobs[i];
			l->logprob += t->logprob;
			l->greedy = l->greedy && t->n_top > 0 && t->top_id[0] == t->token;
		}
	}
	return --j->parts_left == 0 ? j : NULL;
}

static void *worker(void *arg)
{
	engine *e = arg;
	eng_batch_result res[16];
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->stop && !e->in && eng_batch_pending(e->batch) == 0)
			pthread_cond_wait(&e->cv_work, &e->mu);
		if (e->stop)
			break;
		ejob *in = e->in;
		e->in = e->in_tail = NULL;
		pthread_mutex_unlock(&e->mu);
		for (ejob *j = in, *n; j; j = n) {
			n = j->next;
			j->next = NULL;
			eng_batch_request r = {.prompt = j->prompt, .n_prompt = (int)j->n_prompt, .gen = j->gen,
			                       .cb = on_token, .cb_ctx = j, .cookie = j, .logprobs = j->want_lp,
			                       .prompt_logprobs = j->want_plp, .prompt_only = j->prompt_only,
			                       .top_logprobs = j->top_lp, .embeds = j->embeds, .n_embeds = j->n_embeds};
			if (!j->status && j->streamed && j->cb.cancelled && j->cb.cancelled(j->cb.ctx)) {
				j->status = EV_E_BACKEND;
				j->error = ev_strdup("cancelled: the client left before the request ran");
			}
			if (!j->status && j->n_parts) {
				if (add_parts(e, j)) {
					j->lnext = e->live;
					if (e->live)
						e->live->lprev = j;
					e->live = j;
					continue;
				}
			} else if (!j->status && eng_batch_add(e->batch, &r, &j->bid)) {
				j->status = ev_error_code();
				j->error = ev_strdup(ev_error_msg());
			}
			if (!j->status) {
				j->lnext = e->live;
				if (e->live)
					e->live->lprev = j;
				e->live = j;
				continue;
			}
			if (j->status) {
				ev_completion c;
				complete(e, j, NULL, &c);
				deliver(e, j, &c);
				ejob_free(j);
			}
		}
		if (eng_batch_step(e->batch))
			ev_log_error("engine backend: %s", ev_error_msg());
		int n;
		while ((n = eng_batch_take(e->batch, res, 16)) > 0) {
			for (int i = 0; i < n; i++) {
				ejob *j = res[i].cookie;
				if (*(int *)res[i].cookie == TAG_PART) {
					j = part_done(res[i].cookie, &res[i]);
					eng_batch_result_clear(&res[i]);
					if (!j)
						continue; /* other continuations still running */
					unlink_live(e, j);
					ev_completion c;
					complete(e, j, NULL, &c);
					deliver(e, j, &c);
					ejob_free(j);
					continue;
				}
				unlink_live(e, j);
				ev_completion c;
				complete(e, j, &res[i], &c);
				deliver(e, j, &c);
				ejob_free(j);
				eng_batch_result_clear(&res[i]);
			}
		}
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* ---- requests --------------------------------------------------------------------------- */

/* The image and video parts of a request's messages, in prompt order
 * (parts not owned). A video is encoded as its text is written (its
 * placeholders depend on its frames): its rows are owned here. */
typedef struct {
	const ev_part *p[MAX_IMAGES];
	float *vrows[MAX_IMAGES]; /* a video's rows, else NULL */
	int vcount[MAX_IMAGES];
	int n;
	struct engine *e;
} img_list;

static void img_list_clear(img_list *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->vrows[i]);
	l->n = 0;
}

static int video_part(struct engine *e, const ev_part *p, char **text, float **rows, int *nrows);

/* Text parts joined by newlines, as ev_request_to_json sends them; with a
 * multimodal model (imgs not NULL) an image part becomes M3's image marker
 * in the text and joins imgs, else it is refused. */
static int message_text(char **out, const ev_message *m, size_t idx, img_list *imgs)
{
	ev_buf b = EV_BUF_INIT(ENG_CHAT_MAX_PROMPT);
	for (size_t i = 0; i < m->n_parts; i++) {
		const char *t = m->parts[i].text ? m->parts[i].text : "";
		char *owned = NULL;
		ev_part_kind k = m->parts[i].kind;
		if ((k == EV_PART_IMAGE || k == EV_PART_VIDEO) && imgs) {
			if (imgs->n == MAX_IMAGES) {
				ev_buf_free(&b);
				return ev_error_set(EV_E_LIMIT, "messages[%zu]: more than %d images and videos in a request", idx,
						    MAX_IMAGES);
			}
			imgs->p[imgs->n] = &m->parts[i];
			imgs->vrows[imgs->n] = NULL;
			t = ENG_VISION_IMAGE_MARKER;
			if (k == EV_PART_VIDEO) {
				int rc = video_part(imgs->e, &m->parts[i], &owned, &imgs->vrows[imgs->n], &imgs->vcount[imgs->n]);
				if (rc) {
					ev_buf_free(&b);
					return ev_error_wrap(rc, "messages[%zu]", idx);
				}
				t = owned;
			}
			imgs->n++;
		} else if (k != EV_PART_TEXT) {
			ev_buf_free(&b);
			return ev_error_set(EV_E_UNSUPPORTED, "messages[%zu]: the engine backend takes text parts only%s", idx,
					    k == EV_PART_IMAGE || k == EV_PART_VIDEO ? " (this checkpoint has no vision tower)" : "");
		}
		int arc = (i && ev_buf_putc(&b, '\n')) || ev_buf_puts(&b, t);
		free(owned);
		if (arc) {
			ev_buf_free(&b);
			return ev_error_wrap(ev_error_code(), "messages[%zu]", idx);
		}
	}
	*out = b.data ? b.data : ev_strdup("");
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* A model without a chat template (a base model, the recall checkpoint)
 * gets the messages' texts as plain text, one after the other. */
static int render_plain(const ev_request *req, char **prompt, size_t *len, img_list *imgs)
{
	if (req->tools_json && *req->tools_json)
		return ev_error_set(EV_E_UNSUPPORTED, "tools need a chat template (give chat_template: chatml or llama3)");
	ev_buf b = EV_BUF_INIT(MAX_TEXT);
	int rc = 0;
	for (size_t i = 0; !rc && i < req->n_messages; i++) {
		char *t = NULL;
		if ((rc = message_text(&t, &req->messages[i], i, imgs)))
			break;
		if (b.len && *t)
			rc = ev_buf_puts(&b, "\n\n");
		if (!rc)
			rc = ev_buf_puts(&b, t);
		free(t);
	}
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	*prompt = ev_buf_detach(&b, len);
	return *prompt ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

/* The request as apply_chat_template's messages: text content, tool calls
 * with their arguments as objects (as vLLM hands them to templates; a
 * string that is not a JSON object stays a string), tool_call_id, name. */
static int messages_json(cJSON **out, const ev_request *req, img_list *imgs)
{
	cJSON *arr = cJSON_CreateArray();
	int rc = arr ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; !rc && i < req->n_messages; i++) {
		const ev_message *m = &req->messages[i];
		char *text = NULL;
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		if ((rc = message_text(&text, m, i, imgs)))
			break;
		cJSON_AddStringToObject(o, "role", m->role ? m->role : "user");
		cJSON_AddStringToObject(o, "content", text);
		free(text);
		if (m->tool_calls_json && *m->tool_calls_json) {
			cJSON *tc = NULL;
			if ((rc = ev_json_parse(&tc, m->tool_calls_json, strlen(m->tool_calls_json), "tool_calls")))
				break;
			cJSON *c;
			cJSON_ArrayForEach(c, tc)
			{
				cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
				cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
				cJSON *obj = NULL;
				if (cJSON_IsString(a) && !ev_json_parse(&obj, a->valuestring, strlen(a->valuestring), "arguments") &&
				    cJSON_IsObject(obj))
					cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
				else
					cJSON_Delete(obj);
				ev_error_clear();
			}
			cJSON_AddItemToObject(o, "tool_calls", tc);
		}
		if (m->tool_call_id)
			cJSON_AddStringToObject(o, "tool_call_id", m->tool_call_id);
		if (m->name)
			cJSON_AddStringToObject(o, "name", m->name);
	}
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

/* The thinking budget a request asks for: its reasoning_effort as a level
 * (none 0, minimal 64, low 256, medium 1024, high 4096 tokens) or a number
 * of tokens; -1 when none is asked. */
static int think_budget(const ev_gen *g, int *budget)
{
	static const struct {
		const char *name;
		int budget;
	} levels[] = {{"none", 0}, {"minimal", 64}, {"low", 256}, {"medium", 1024}, {"high", 4096}};
	*budget = -1;
	const char *l = g->reasoning_effort;
	if (!l[0])
		return 0;
	for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
		if (!strcmp(l, levels[i].name))
			return *budget = levels[i].budget, 0;
	long v = 0;
	size_t k = 0;
	for (; l[k] >= '0' && l[k] <= '9' && v <= (1L << 20); k++)
		v = v * 10 + (l[k] - '0');
	if (k && !l[k] && v <= (1L << 20))
		return *budget = (int)v, 0;
	return ev_error_set(EV_E_INVALID,
	                    "reasoning_effort '%s': the engine takes none, minimal, low, medium, high or a thinking "
	                    "budget in tokens (0 to 1048576)",
	                    l);
}

static int render_template(engine *e, const ev_request *req, char **prompt, size_t *len, img_list *imgs)
{
	cJSON *msgs = NULL, *tools = NULL, *extra = NULL;
	int budget = -1;
	int rc = think_budget(&req->gen, &budget);
	if (!rc)
		rc = messages_json(&msgs, req, imgs);
	if (!rc && req->tools_json && *req->tools_json)
		rc = ev_json_parse(&tools, req->tools_json, strlen(req->tools_json), "tools");
	/* templates that think take enable_thinking (Qwen3, DeepSeek-R1, SmolLM3) */
	if (!rc && budget >= 0 && (!(extra = cJSON_CreateObject()) || !cJSON_AddBoolToObject(extra, "enable_thinking", budget > 0)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = eng_chat_template_render(e->tmpl, msgs, tools, true, extra, prompt, len);
	cJSON_Delete(msgs);
	cJSON_Delete(tools);
	cJSON_Delete(extra);
	return rc;
}

/* Where the prompt leaves off: inside a think block when its last open
 * comes after its last close (a template that opens the block itself). */
static bool prompt_ends_thinking(const engine *e, const int32_t *ids, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		if (ids[i] == e->think_close)
			return false;
		if (ids[i] == e->think_open)
			return true;
	}
	return false;
}

/* Thinking tokens of a finished answer: those inside blocks. */
static int thinking_tokens(const ejob *j, const int32_t *toks, int n)
{
	if (j->think.close_id < 0)
		return 0;
	eng_think_options o = j->think;
	o.enforce = true;
	eng_think_state st = eng_think_start(&o);
	for (int i = 0; i < n; i++)
		eng_think_step(&o, &st, toks[i]);
	return st.used;
}

static int render(engine *e, const ev_request *req, char **prompt, size_t *len, img_list *imgs)
{
	if (e->tmpl) {
		if (!req->n_messages)
			return ev_error_set(EV_E_INVALID, "messages: empty");
		return render_template(e, req, prompt, len, imgs);
	}
	if (e->family == ENG_CHAT_UNKNOWN)
		return render_plain(req, prompt, len, imgs);
	if (!req->n_messages)
		return ev_error_set(EV_E_INVALID, "messages: empty");
	int rc = 0;
	eng_chat_msg *msgs = calloc(req->n_messages, sizeof *msgs);
	char **texts = calloc(req->n_messages, sizeof *texts);
	if (!msgs || !texts) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < req->n_messages; i++) {
		const ev_message *m = &req->messages[i];
		if ((rc = message_text(&texts[i], m, i, imgs)))
			goto done;
		msgs[i].role = m->role ? m->role : "user";
		msgs[i].content = texts[i];
		msgs[i].tool_calls_json = m->tool_calls_json;
		msgs[i].tool_call_id = m->tool_call_id;
		msgs[i].name = m->name;
	}
	rc = eng_chat_render(prompt, len, e->family, msgs, req->n_messages, req->tools_json, true);
done:
	if (texts)
		for (size_t i = 0; i < req->n_messages; i++)
			free(texts[i]);
	free(texts);
	free(msgs);
	return rc;
}

static uint64_t fresh_seed(engine *e)
{
	pthread_mutex_lock(&e->mu);
	uint64_t s = ev_rng_next(&e->seeds);
	pthread_mutex_unlock(&e->mu);
	return s;
}

/* Builds a job from a request: prompt tokens and generation settings. */
static int make_job_ids(engine *e, const ev_request *req, const char *raw_prompt, const int32_t *raw_ids,
                        size_t n_raw, ejob **out);

/* An image part's bytes: a file (a suite attachment) or a data: URL;
 * the engine fetches nothing from the network. */
static int image_bytes(const ev_part *p, char **data, size_t *n)
{
	*data = NULL, *n = 0;
	if (p->path)
		return ev_file_read(data, n, p->path, MAX_IMAGE_BYTES);
	const char *u = p->url, *comma = u ? strchr(u, ',') : NULL;
	if (!u || strncmp(u, "data:", 5) || !comma || comma - u < 12 || strncmp(comma - 7, ";base64", 7))
		return ev_error_set(EV_E_UNSUPPORTED, "image %.60s%s: the engine backend reads files and base64 data: URLs only",
				    u ? u : "(no url or path)", u && strlen(u) > 60 ? "..." : "");
	unsigned char *b = NULL;
	int rc = ev_base64_decode(&b, n, comma + 1, strlen(comma + 1), MAX_IMAGE_BYTES, "image data URL");
	*data = (char *)b;
	return rc;
}

/* The LM rows of an image part, from the run's cache or encoded now
 * (decoded, preprocessed, through the tower); *rows stays the cache's. */
/* Keeps rows under `sha` (the oldest entry goes when full); vmu held. */
static void cache_put(engine *e, const unsigned char sha[32], float *rows, int n, int grid_t, int frame_tokens)
{
	if (e->n_imgs == MAX_CACHED_IMAGES) {
		free(e->imgs[0].rows);
		memmove(e->imgs, e->imgs + 1, (size_t)(MAX_CACHED_IMAGES - 1) * sizeof *e->imgs);
		e->n_imgs--;
	}
	struct img_cached *c = &e->imgs[e->n_imgs++];
	memcpy(c->sha, sha, 32);
	c->rows = rows, c->n = n, c->grid_t = grid_t, c->frame_tokens = frame_tokens;
}

static int image_rows(engine *e, const ev_part *p, const float **rows, int *nrows)
{
	char *data = NULL;
	size_t n = 0;
	int rc = image_bytes(p, &data, &n);
	if (rc)
		return rc;
	unsigned char sha[32];
	ev_sha256(sha, data, n);
	pthread_mutex_lock(&e->vmu);
	for (int i = 0; i < e->n_imgs; i++)
		if (!memcmp(e->imgs[i].sha, sha, 32) && !e->imgs[i].grid_t) {
			*rows = e->imgs[i].rows, *nrows = e->imgs[i].n;
			pthread_mutex_unlock(&e->vmu);
			free(data);
			return 0;
		}
	eng_image im;
	float *r = NULL;
	int nr = 0;
	if (!(rc = eng_image_decode(&im, data, n, NULL))) {
		rc = eng_vision_encode_image(e->vm, &im, &r, &nr);
		eng_image_free(&im);
	}
	free(data);
	if (!rc) {
		cache_put(e, sha, r, nr, 0, 0);
		*rows = r, *nrows = nr;
	} else {
		free(r);
	}
	pthread_mutex_unlock(&e->vmu);
	return rc ? ev_error_wrap(rc, "image %s", p->path ? p->path : "(data URL)") : 0;
}

/* A video part: its sampled frames decoded, preprocessed as M3's video
 * processor does and encoded in segments (cached by the frames' content
 * and the sampling), its placeholder text (timestamps when the part
 * states its frame rate), and a copy of its rows. */
static int video_part(engine *e, const ev_part *p, char **text, float **rows, int *nrows)
{
	*text = NULL, *rows = NULL, *nrows = 0;
	if (!p->path)
		return ev_error_set(EV_E_UNSUPPORTED, "a video by URL: the engine reads videos from files (a folder or an "
						      "archive of frames)");
	ev_video v;
	int rc = ev_video_load(&v, p->path, p->fps, p->sample_fps, p->frames, NULL);
	if (rc)
		return rc;
	/* the key: the hash of the sampled frames' hashes */
	unsigned char sha[32], *fs = malloc((size_t)v.n * 32);
	if (!fs) {
		ev_video_free(&v);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	for (int i = 0; i < v.n; i++)
		ev_sha256(fs + 32 * i, v.data[i], v.len[i]);
	ev_sha256(sha, fs, (size_t)v.n * 32);
	free(fs);
	const eng_vision_prep *vp = eng_vision_model_video_prep(e->vm);
	int grid_t = 0, ft = 0;
	float *cached = NULL;
	pthread_mutex_lock(&e->vmu);
	for (int i = 0; i < e->n_imgs; i++)
		if (!memcmp(e->imgs[i].sha, sha, 32) && e->imgs[i].grid_t) {
			if ((cached = malloc((size_t)e->imgs[i].n * (size_t)e->info.hidden * sizeof(float))))
				memcpy(cached, e->imgs[i].rows, (size_t)e->imgs[i].n * (size_t)e->info.hidden * sizeof(float));
			*nrows = e->imgs[i].n, grid_t = e->imgs[i].grid_t, ft = e->imgs[i].frame_tokens;
			break;
		}
	if (!cached && !grid_t) {
		eng_image *fr = calloc((size_t)v.n, sizeof *fr);
		eng_vision_input in = {0};
		float *r = NULL;
		int nr = 0;
		if (!fr)
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		for (int i = 0; !rc && i < v.n; i++)
			if ((rc = eng_image_decode(&fr[i], v.data[i], v.len[i], NULL)))
				rc = ev_error_wrap(rc, "frame %s", v.name[i]);
		if (!rc)
			rc = eng_vision_preprocess_video(fr, v.n, vp, &in);
		if (!rc)
			rc = eng_vision_encode_video(e->vm, &in, &r, &nr);
		for (int i = 0; fr && i < v.n; i++)
			eng_image_free(&fr[i]);
		free(fr);
		if (!rc) {
			grid_t = in.grid_t, ft = in.grid_h * in.grid_w / (vp->merge * vp->merge), *nrows = nr;
			if ((cached = malloc((size_t)nr * (size_t)e->info.hidden * sizeof(float))))
				memcpy(cached, r, (size_t)nr * (size_t)e->info.hidden * sizeof(float));
			cache_put(e, sha, r, nr, grid_t, ft);
		} else {
			free(r);
		}
		eng_vision_input_free(&in);
	}
	pthread_mutex_unlock(&e->vmu);
	if (!rc && !cached)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = eng_vision_video_text(text, v.index, v.n, p->fps, grid_t, ft, vp->temporal);
	ev_video_free(&v);
	if (rc) {
		free(cached);
		*nrows = 0;
		return ev_error_wrap(rc, "video %s", p->path);
	}
	*rows = cached;
	return 0;
}

/* The prompt's image markers expanded (start, one placeholder a row, end)
 * and the images' rows gathered for them. */
static int attach_images(engine *e, const img_list *imgs, int32_t **ids, size_t *n, ejob *j)
{
	int counts[MAX_IMAGES], icounts[MAX_IMAGES], nimg = 0, total = 0, rc = 0;
	const float *rows[MAX_IMAGES];
	for (int k = 0; k < imgs->n && !rc; k++) {
		if (imgs->vrows[k]) { /* a video: its placeholders are in the text already */
			rows[k] = imgs->vrows[k], counts[k] = imgs->vcount[k];
		} else if (!(rc = image_rows(e, imgs->p[k], &rows[k], &counts[k]))) {
			icounts[nimg++] = counts[k];
		}
		total += rc ? 0 : counts[k];
	}
	int32_t *out = NULL;
	int nout = 0;
	if (!rc)
		rc = eng_vision_expand_markers(*ids, (int)*n, eng_model_image_token(e->m),
					       eng_token_id(e->tok, ENG_VISION_START_MARKER),
					       eng_token_id(e->tok, ENG_VISION_END_MARKER), icounts, nimg, &out, &nout);
	/* every video placeholder has its row */
	long vt = 0, vwant = total;
	for (int i = 0; !rc && i < nout; i++)
		vt += out[i] == eng_model_video_token(e->m);
	for (int k = 0; k < nimg; k++)
		vwant -= icounts[k];
	if (!rc && vt != vwant)
		rc = ev_error_set(EV_E_INVALID, "the prompt holds %ld video placeholders (%s) for %ld video rows", vt,
				  ENG_VISION_VIDEO_MARKER, vwant);
	size_t H = (size_t)e->info.hidden;
	if (!rc && !(j->embeds = malloc((size_t)(total ? total : 1) * H * sizeof(float))))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc) {
		free(out);
		return rc;
	}
	/* the cached rows are copied while they cannot be dropped: one lock */
	pthread_mutex_lock(&e->vmu);
	for (int k = 0, at = 0; k < imgs->n; at += counts[k], k++)
		memcpy(j->embeds + (size_t)at * H, rows[k], (size_t)counts[k] * H * sizeof(float));
	pthread_mutex_unlock(&e->vmu);
	j->n_embeds = total;
	free(*ids);
	*ids = out, *n = (size_t)nout;
	return 0;
}

static int make_job(engine *e, const ev_request *req, const char *raw_prompt, ejob **out)
{
	return make_job_ids(e, req, raw_prompt, NULL, 0, out);
}

/* A scoring job: each continuation after the context, tokenized as a
 * completions prompt is (the tokenizer's special tokens added) and split
 * as lm-eval splits it: the context's own tokens first, the rest the
 * continuation's. */
static int make_scoring_job(engine *e, const ev_request *req, ejob *j)
{
	char *ctx = NULL;
	size_t clen = 0;
	int32_t *cids = NULL;
	size_t nc = 0;
	int rc = ev_request_context(&ctx, &clen, req);
	if (!rc && req->n_continuations > EV_MAX_CONTINUATIONS)
		rc = ev_error_set(EV_E_LIMIT, "a scoring request has %zu continuations, more than %d", req->n_continuations,
		                  EV_MAX_CONTINUATIONS);
	if (!rc)
		rc = eng_tokenize_with_specials(e->tok, ctx, clen, &cids, &nc);
	if (!rc && !nc)
		rc = ev_error_set(EV_E_INVALID, "scoring: the context is empty (no token to score the continuations after)");
	size_t n = req->n_continuations;
	if (!rc && (!(j->parts = calloc(n, sizeof *j->parts)) || !(j->ll = calloc(n, sizeof *j->ll))))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t k = 0; !rc && k < n; k++) {
		epart *p = &j->parts[k];
		p->tag = TAG_PART;
		p->j = j;
		j->n_parts++;
		char *full = ev_asprintf("%s%s", ctx, req->continuations[k] ? req->continuations[k] : "");
		size_t nf = 0;
		rc = full ? eng_tokenize_with_specials(e->tok, full, strlen(full), &p->ids, &nf)
		          : ev_error_set(EV_E_NOMEM, "out of memory");
		free(full);
		if (rc)
			break;
		p->n = (int)nf;
		p->ctx = (int)nc;
		if (nf <= nc)
			rc = ev_error_set(EV_E_INVALID, "continuation %zu: no token of its own after the context", k);
		else if ((long)nf > e->info.max_context)
			rc = ev_error_set(EV_E_LIMIT, "prompt: %zu tokens pass the model's context of %ld", nf,
			                  e->info.max_context);
	}
	free(ctx);
	free(cids);
	return rc;
}

static int make_job_ids(engine *e, const ev_request *req, const char *raw_prompt, const int32_t *raw_ids,
                        size_t n_raw, ejob **out)
{
	*out = NULL;
	ejob *j = calloc(1, sizeof *j);
	char *text = NULL;
	size_t len = 0;
	int32_t *ids = NULL;
	size_t n = 0;
	int rc = 0;
	img_list imgs = {.n = 0, .e = e};
	if (!j)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	j->tag = TAG_JOB;
	j->t0 = ev_now();
	j->think.open_id = j->think.close_id = -1;
	j->cookie = req->cookie;
	ev_buf_init(&j->text, MAX_TEXT);
	if (req->n_continuations && !raw_prompt && !raw_ids) {
		eng_generate_options o = ENG_GENERATE_OPTIONS_INIT;
		o.max_tokens = 1;
		j->gen = o;
		if ((rc = make_scoring_job(e, req, j))) {
			ejob_free(j);
			return rc;
		}
		*out = j;
		return 0;
	}
	j->chat = raw_prompt == NULL && raw_ids == NULL;
	j->tools = j->chat && req->tools_json && *req->tools_json;
	if (j->chat)
		rc = render(e, req, &text, &len, e->vm ? &imgs : NULL);
	else if (raw_prompt)
		len = strlen(raw_prompt);
	/* A chat template writes its own special tokens (HF tokenizes it with
	 * add_special_tokens=False); plain text gets what the tokenizer's
	 * post-processor puts around a sequence (Llama-3: its BOS; Qwen:
	 * nothing), as HF's encode does by default. */
	bool templated = j->chat && (e->tmpl || e->family != ENG_CHAT_UNKNOWN);
	if (!rc && raw_ids) { /* token ids as given */
		if (!(ids = malloc((n_raw ? n_raw : 1) * sizeof *ids)))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		for (size_t i = 0; !rc && i < n_raw; i++) {
			if (raw_ids[i] < 0 || raw_ids[i] >= e->info.vocab)
				rc = ev_error_set(EV_E_INVALID, "prompt[%zu]: token id %d is not in the vocabulary (size %d)", i,
				                  (int)raw_ids[i], e->info.vocab);
			else
				ids[i] = raw_ids[i];
		}
		n = n_raw;
	} else if (!rc) {
		rc = templated ? eng_tokenize(e->tok, text, len, true, &ids, &n)
		               : eng_tokenize_with_specials(e->tok, text ? text : raw_prompt, len, &ids, &n);
	}
	if (!rc && imgs.n)
		rc = attach_images(e, &imgs, &ids, &n, j);
	if (rc)
		goto done;
	bool bos = false;
	if (n + bos == 0) {
		rc = ev_error_set(EV_E_INVALID, "prompt: empty");
		goto done;
	}
	if ((long)(n + bos) > e->info.max_context) {
		rc = ev_error_set(EV_E_LIMIT, "prompt: %zu tokens pass the model's context of %ld", n + bos,
		                  e->info.max_context);
		goto done;
	}
	if (!(j->prompt = malloc((n + 1) * sizeof *j->prompt))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (bos)
		j->prompt[0] = e->info.bos_id;
	memcpy(j->prompt + bos, ids, n * sizeof *ids);
	j->n_prompt = n + bos;
	{ /* what reached the model: the chat template's and tokenizer's work, hashed */
		char hex[EV_SHA256_HEX];
		ev_sha256_hex(hex, j->prompt, j->n_prompt * sizeof *j->prompt);
		memcpy(j->prompt_hash, hex, 16);
		j->prompt_hash[16] = 0;
	}

	const ev_gen *g = &req->gen;
	eng_generate_options o = ENG_GENERATE_OPTIONS_INIT;
	o.max_tokens = g->max_tokens > 0 ? g->max_tokens : e->opt.default_max_tokens;
	o.sample.temperature = g->temperature >= 0 ? g->temperature : 0.0;
	o.sample.top_p = g->top_p >= 0 ? g->top_p : 1.0;
	if (o.sample.temperature > 100 || o.sample.top_p > 1) {
		rc = ev_error_set(EV_E_INVALID, "%s: out of range", o.sample.top_p > 1 ? "top_p" : "temperature");
		goto done;
	}
	/* no seed: a fresh one (as OpenAI's API samples), never a fixed 0 */
	o.sample.seed = g->has_seed ? (uint64_t)g->seed : fresh_seed(e);
	o.stop_ids = j->chat ? e->chat_stop : e->raw_stop;
	o.n_stop = g->ignore_eos ? 0 : j->chat ? e->n_chat_stop : e->n_raw_stop;
	/* A thinking budget is enforced where the vocabulary has </think>; the
	 * blocks are counted in any case. */
	int budget = -1;
	if ((rc = think_budget(g, &budget)))
		goto done;
	j->think = (eng_think_options){.budget = budget > 0 ? budget : 0, .open_id = e->think_open, .close_id = e->think_close,
	                               .open_at_start = prompt_ends_thinking(e, j->prompt, j->n_prompt)};
	if (budget >= 0 && e->think_close >= 0) {
		o.think = j->think;
		o.think.enforce = true;
	}
	j->gen = o;
	j->want_lp = g->logprobs;
	j->want_plp = g->prompt_logprobs;
	j->prompt_only = g->prompt_only;
	j->top_lp = g->top_logprobs;
	if (j->top_lp < 0 || j->top_lp > ENG_MAX_TOP_LOGPROBS) {
		rc = ev_error_set(EV_E_INVALID, "top_logprobs: %d is not within 0..%d", j->top_lp, ENG_MAX_TOP_LOGPROBS);
		goto done;
	}
	if (g->n_stop > MAX_STOP_STRINGS) {
		rc = ev_error_set(EV_E_LIMIT, "stop: more than %d strings", MAX_STOP_STRINGS);
		goto done;
	}
	if (g->n_stop && !(j->stop = calloc(g->n_stop, sizeof *j->stop))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < g->n_stop; i++) {
		if (!g->stop[i] || !*g->stop[i])
			continue; /* an empty stop string would end every answer at once */
		if (strlen(g->stop[i]) > 1024) {
			rc = ev_error_set(EV_E_LIMIT, "stop[%zu]: longer than 1024 bytes", i);
			goto done;
		}
		if (!(j->stop[j->n_stop] = ev_strdup(g->stop[i]))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		size_t sl = strlen(g->stop[i]);
		j->max_stop = sl > j->max_stop ? sl : j->max_stop;
		j->n_stop++;
	}
	rc = eng_detok_stream_new(&j->detok, e->tok, true);
done:
	img_list_clear(&imgs);
	free(text);
	free(ids);
	if (rc) {
		ejob_free(j);
		return rc;
	}
	*out = j;
	return 0;
}

static void enqueue(engine *e, ejob *j)
{
	pthread_mutex_lock(&e->mu);
	if (e->in_tail)
		e->in_tail->next = j;
	else
		e->in = j;
	e->in_tail = j;
	if (!j->streamed)
		e->pending++;
	pthread_cond_signal(&e->cv_work);
	pthread_mutex_unlock(&e->mu);
}

static int op_submit(void *impl, const ev_request *req)
{
	engine *e = impl;
	ejob *j = NULL;
	if (make_job(e, req, NULL, &j)) {
		/* The sample's fault, not the run's: an error completion for it. */
		if (!(j = calloc(1, sizeof *j)))
			return ev_error_set(EV_E_NOMEM, "out of memory");
		j->tag = TAG_JOB;
		j->t0 = ev_now();
		j->cookie = req->cookie;
		j->status = ev_error_code() ? ev_error_code() : EV_E_INVALID;
		j->error = ev_strdup(ev_error_msg());
	}
	enqueue(e, j);
	return 0;
}

int ev_backend_engine_submit_stream(ev_backend *b, const ev_request *req, const char *raw_prompt,
                                    const ev_engine_stream *cb)
{
	if (!b || !b->ops || strcmp(b->ops->name, "engine"))
		return ev_error_set(EV_E_INVALID, "not an engine backend");
	engine *e = b->impl;
	ejob *j = NULL;
	int rc = make_job(e, req, raw_prompt, &j);
	if (rc)
		return rc;
	j->streamed = true;
	if (cb)
		j->cb = *cb;
	enqueue(e, j);
	return 0;
}

int ev_backend_engine_submit_tokens(ev_backend *b, const ev_request *req, const int32_t *ids, size_t n,
                                    const ev_engine_stream *cb)
{
	if (!b || !b->ops || strcmp(b->ops->name, "engine"))
		return ev_error_set(EV_E_INVALID, "not an engine backend");
	engine *e = b->impl;
	ejob *j = NULL;
	int rc = make_job_ids(e, req, NULL, ids, n, &j);
	if (rc)
		return rc;
	j->streamed = true;
	if (cb)
		j->cb = *cb;
	enqueue(e, j);
	return 0;
}

const char *ev_backend_engine_model_name(ev_backend *b)
{
	if (!b || !b->ops || strcmp(b->ops->name, "engine"))
		return NULL;
	return ((engine *)b->impl)->name;
}

long ev_backend_engine_max_context(ev_backend *b)
{
	if (!b || !b->ops || strcmp(b->ops->name, "engine"))
		return 0;
	return ((engine *)b->impl)->info.max_context;
}

static int op_poll(void *impl, ev_completion *out, int max, double wait_s)
{
	engine *e = impl;
	double until = ev_now() + (wait_s > 0 ? wait_s : 0);
	pthread_mutex_lock(&e->mu);
	while (!e->n_ready && e->pending > 0) {
		double left = until - ev_now();
		if (left <= 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double t = (double)ts.tv_sec + ts.tv_nsec / 1e9 + left;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
	}
	int n = 0;
	while (n < max && (size_t)n < e->n_ready) {
		out[n] = e->ready[n];
		n++;
	}
	if (n)
		memmove(e->ready, e->ready + n, (e->n_ready - (size_t)n) * sizeof *e->ready);
	e->n_ready -= (size_t)n;
	e->pending -= n;
	pthread_mutex_unlock(&e->mu);
	return n;
}

static int op_capacity(void *impl) { return ((engine *)impl)->opt.max_batch * 2; }

static int op_pending(void *impl)
{
	engine *e = impl;
	pthread_mutex_lock(&e->mu);
	int n = e->pending;
	pthread_mutex_unlock(&e->mu);
	return n;
}

static void stop_job(engine *e, ejob *j)
{
	if (j->streamed) {
		if (!j->status) {
			j->status = EV_E_BACKEND;
			free(j->error);
			j->error = ev_strdup("the server is stopping");
		}
		ev_completion c;
		complete(e, j, NULL, &c);
		deliver(e, j, &c);
	}
	ejob_free(j);
}

static void op_free(void *impl)
{
	engine *e = impl;
	if (!e)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->mu);
		e->stop = true;
		pthread_cond_broadcast(&e->cv_work);
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->worker, NULL);
	}
	/* Jobs not finished (the worker has stopped): streamed ones are told
	 * (their owners outlive the backend); polled ones are dropped with it. */
	for (ejob *j = e->in, *n; j; j = n) {
		n = j->next;
		stop_job(e, j);
	}
	while (e->live) {
		ejob *j = e->live;
		unlink_live(e, j);
		stop_job(e, j);
	}
	eng_batch_free(e->batch);
	for (size_t i = 0; i < e->n_ready; i++)
		ev_completion_clear(&e->ready[i]);
	free(e->ready);
	eng_tokenizer_free(e->tok);
	eng_chat_template_free(e->tmpl);
	eng_vision_model_free(e->vm);
	for (int i = 0; i < e->n_imgs; i++)
		free(e->imgs[i].rows);
	free(e->imgs);
	pthread_mutex_destroy(&e->vmu);
	eng_model_free(e->m);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv_work);
	pthread_cond_destroy(&e->cv_done);
	free(e->name);
	free(e);
}

static const ev_backend_ops engine_ops = {"engine", op_capacity, op_submit, op_poll, op_pending, op_free};

/* ---- construction -------------------------------------------------------------------- */

static int add_stop(int32_t *ids, int *n, int32_t id)
{
	if (id < 0)
		return 0;
	for (int i = 0; i < *n; i++)
		if (ids[i] == id)
			return 0;
	if (*n < MAX_STOP_IDS)
		ids[(*n)++] = id;
	return 0;
}

/* What answers: the checkpoint's small files whole, every weight file's
 * size and first 64 KiB (its header: names, shapes, offsets), and the
 * settings that change the arithmetic. Cheap at any checkpoint size. */
static void checkpoint_identity(ev_backend *b, const engine *e, const char *dir)
{
	ev_buf id = EV_BUF_INIT((size_t)256 << 20);
	static const char *const small[] = {"config.json", "generation_config.json", "tokenizer.json",
	                                    "tokenizer_config.json", "chat_template.jinja", NULL};
	for (size_t i = 0; small[i]; i++) {
		char *p = ev_asprintf("%s/%s", dir, small[i]), *text = NULL;
		size_t len = 0;
		if (p && !ev_file_read(&text, &len, p, (size_t)64 << 20)) {
			char h[EV_SHA256_HEX];
			ev_sha256_hex(h, text, len);
			ev_buf_printf(&id, "%s:%s\n", small[i], h);
		}
		ev_error_clear();
		free(text);
		free(p);
	}
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		bool weights = (n > 12 && !strcmp(de->d_name + n - 12, ".safetensors")) ||
		               (n > 5 && !strcmp(de->d_name + n - 5, ".gguf"));
		if (!weights)
			continue;
		char *p = ev_asprintf("%s/%s", dir, de->d_name);
		int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0) {
			char head[65536];
			ssize_t got = pread(fd, head, sizeof head, 0);
			char h[EV_SHA256_HEX];
			ev_sha256_hex(h, head, got > 0 ? (size_t)got : 0);
			ev_buf_printf(&id, "%s:%lld:%s\n", de->d_name, (long long)st.st_size, h);
		}
		if (fd >= 0)
			close(fd);
		free(p);
	}
	if (d)
		closedir(d);
	ev_buf_printf(&id, "dtypes=%s kv_max=%llu block=%d context=%ld template=%s\n", e->info.dtypes,
	              (unsigned long long)e->info.kv_max_bytes, e->info.block_size, e->info.max_context,
	              e->opt.chat_template ? e->opt.chat_template : "");
	if (e->opt.engine) { /* --attention, --msa-*, --kv-* */
		const eng_model_options *m = e->opt.engine;
		const eng_attention_options *a = &m->attention;
		ev_buf_printf(&id, "attention=%d,%d,%d,%d,%d,%ld,%d kv=%d,%llu block=%d layers=", (int)a->kind,
		              a->block_size, a->top_k, a->sink_blocks, a->local_blocks, a->dense_below, a->n_dense_layers,
		              (int)m->kv_dtype, (unsigned long long)m->kv_max_bytes, m->block_size);
		for (int k = 0; k < a->n_dense_layers && k < ENG_MSA_MAX_DENSE_LAYERS; k++)
			ev_buf_printf(&id, "%d,", a->dense_layers[k]);
	}
	ev_backend_set_identity(b, id.data ? id.data : "", id.len);
	ev_buf_free(&id);
}

/* The preprocessing a multimodal checkpoint's images and videos get, for
 * the run to store (ev_backend_preprocessing). */
static int preprocessing_fingerprint(ev_backend *b, const engine *e)
{
	const eng_vision_prep *ip = eng_vision_model_prep(e->vm), *vp = eng_vision_model_video_prep(e->vm);
	char th[EV_SHA256_HEX] = "";
	const char *src = e->tmpl ? eng_chat_template_source(e->tmpl) : NULL;
	const char *fam = e->family != ENG_CHAT_UNKNOWN ? eng_chat_family_name(e->family) : "none";
	if (src)
		ev_sha256_hex(th, src, strlen(src));
	else
		ev_sha256_hex(th, fam, strlen(fam));
	char *fp = ev_asprintf(
		"{\"backend\":\"engine\",\"resampler\":\"torchvision bicubic antialiased (uint8, fixed point)\","
		"\"patch\":%d,\"temporal_patch\":%d,\"merge\":%d,\"image_pixels\":[%ld,%ld],\"video_pixels\":[%ld,%ld],"
		"\"mean\":[%.9g,%.9g,%.9g],\"std\":[%.9g,%.9g,%.9g],\"rescale\":%.17g,\"tokens_per\":\"%d x %d patches\","
		"\"video_sample_fps\":1,\"video_max_frames\":%d,\"video_segment\":%d,\"image_token\":%d,"
		"\"video_token\":%d,\"template\":\"%s\",\"template_hash\":\"%s\"}",
		ip->patch, ip->temporal, ip->merge, ip->min_pixels, ip->max_pixels, vp->min_pixels, vp->max_pixels,
		ip->mean[0], ip->mean[1], ip->mean[2], ip->std[0], ip->std[1], ip->std[2], ip->rescale, ip->merge, ip->merge,
		ENG_VISION_MAX_FRAMES, ENG_VISION_SEGMENT_FRAMES, eng_model_image_token(e->m), eng_model_video_token(e->m),
		src ? "checkpoint" : fam, th);
	int rc = fp ? ev_backend_set_preprocessing(b, fp) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(fp);
	return rc;
}

static int backend_engine_new(ev_backend **out, const ev_engine_backend_options *opt);

int ev_backend_engine_new(ev_backend **out, const ev_engine_backend_options *given)
{
	*out = NULL;
	if (!given || !given->model_dir || !*given->model_dir)
		return ev_error_set(EV_E_INVALID, "engine backend: no model folder");
	/* a GGUF file stands for its converted folder, named by the file */
	char *dir = NULL;
	int rrc = eng_model_path_resolve(given->model_dir, &dir);
	if (rrc)
		return rrc;
	ev_engine_backend_options resolved = *given;
	resolved.model_dir = dir;
	const ev_engine_backend_options *opt = &resolved;
	char *gguf_name = NULL;
	if (strcmp(dir, given->model_dir) && !(given->model_name && *given->model_name)) {
		const char *b = strrchr(given->model_dir, '/');
		b = b ? b + 1 : given->model_dir;
		gguf_name = ev_strndup(b, strlen(b) - 5);
		resolved.model_name = gguf_name;
	}
	int brc = backend_engine_new(out, opt);
	free(gguf_name);
	free(dir);
	return brc;
}

static int backend_engine_new(ev_backend **out, const ev_engine_backend_options *opt)
{
	*out = NULL;
	if (opt->max_batch < 1 || opt->max_batch > 1024)
		return ev_error_set(EV_E_INVALID, "engine backend: max batch %d is not within 1..1024", opt->max_batch);
	engine *e = calloc(1, sizeof *e);
	if (!e)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->vmu, NULL);
	pthread_cond_init(&e->cv_work, NULL);
	pthread_cond_init(&e->cv_done, NULL);
	ev_rng_seed(&e->seeds, (uint64_t)(ev_wall_time() * 1e6) ^ ((uint64_t)(uintptr_t)e << 16));
	e->opt = *opt;
	if (e->opt.default_max_tokens <= 0)
		e->opt.default_max_tokens = 512;
	if (e->opt.max_step_tokens <= 0)
		e->opt.max_step_tokens = 512;
	int rc = 0;
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	mo.backend = opt->reference ? ENG_BACKEND_REF : ENG_BACKEND_CPU;
	mo.threads = opt->threads;
	if (opt->engine) {
		mo.attention = opt->engine->attention;
		mo.kv_dtype = opt->engine->kv_dtype;
		mo.kv_max_bytes = opt->engine->kv_max_bytes;
		if (!opt->reference && opt->engine->backend == ENG_BACKEND_CUDA)
			mo.backend = ENG_BACKEND_CUDA;
	}
	if (opt->model_name && *opt->model_name) {
		e->name = ev_strdup(opt->model_name);
	} else {
		const char *d = opt->model_dir;
		size_t l = strlen(d);
		while (l > 1 && d[l - 1] == '/')
			l--;
		size_t s = l;
		while (s > 0 && d[s - 1] != '/')
			s--;
		e->name = ev_strndup(d + s, l - s);
	}
	if ((rc = eng_model_load(&e->m, opt->model_dir, &mo)))
		goto fail;
	eng_model_get_info(e->m, &e->info);
	if ((rc = eng_tokenizer_load(&e->tok, opt->model_dir)))
		goto fail;
	/* a multimodal M3: its vision tower, for image parts */
	if (eng_model_image_token(e->m) >= 0 && (rc = eng_vision_model_load(&e->vm, opt->model_dir)))
		goto fail;
	if (!(e->imgs = calloc(MAX_CACHED_IMAGES, sizeof *e->imgs))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto fail;
	}
	if (opt->chat_template && (!strcmp(opt->chat_template, "none") || !strcmp(opt->chat_template, "plain"))) {
		e->family = ENG_CHAT_UNKNOWN; /* messages as plain text */
	} else if (opt->chat_template && *opt->chat_template) {
		e->family = eng_chat_family_from_name(opt->chat_template);
		if (e->family == ENG_CHAT_UNKNOWN) {
			rc = ev_error_set(EV_E_INVALID, "chat template \"%.50s\": expected chatml, llama3 or none",
			                  opt->chat_template);
			goto fail;
		}
	} else {
		if ((rc = eng_chat_family_detect(&e->family, opt->model_dir)))
			goto fail;
		/* The checkpoint's own template, rendered as transformers renders
		 * it; one that cannot be rendered is an error naming the construct
		 * (--chat-template chatml|llama3|none overrides it). */
		rc = eng_chat_template_load(&e->tmpl, opt->model_dir, NULL);
		if (rc == EV_E_NOTFOUND) {
			ev_error_clear();
			rc = 0;
		} else if (rc) {
			ev_error_wrap(rc, "the checkpoint's chat template (--chat-template chatml|llama3|none renders without it)");
			goto fail;
		}
	}
	/* a chat model evaluated without its template scores wrongly: said
	 * loudly unless plain text was asked for */
	bool asked_plain = opt->chat_template && (!strcmp(opt->chat_template, "none") || !strcmp(opt->chat_template, "plain"));
	if (e->family == ENG_CHAT_UNKNOWN && !e->tmpl && !asked_plain)
		ev_log_warn("engine backend: %s has no chat template: chat messages are fed as plain text (right for a "
		            "base model; --chat-template chatml|llama3 picks one, --chat-template none says plain text is meant)",
		            opt->model_dir);
	/* Ends of an assistant turn, and the model's own EOS ids. */
	int32_t ids[MAX_STOP_IDS];
	size_t k = e->family != ENG_CHAT_UNKNOWN ? eng_chat_stop_ids(e->tok, e->family, ids, MAX_STOP_IDS) : 0;
	for (size_t i = 0; i < k; i++)
		add_stop(e->chat_stop, &e->n_chat_stop, ids[i]);
	for (int i = 0; i < e->info.n_eos; i++) {
		add_stop(e->chat_stop, &e->n_chat_stop, e->info.eos_ids[i]);
		add_stop(e->raw_stop, &e->n_raw_stop, e->info.eos_ids[i]);
	}
	add_stop(e->raw_stop, &e->n_raw_stop, eng_tokenizer_eos_id(e->tok));
	e->think_open = eng_token_id(e->tok, "<think>");
	e->think_close = eng_token_id(e->tok, "</think>");
	eng_batch_options bo = ENG_BATCH_OPTIONS_INIT;
	bo.max_batch = opt->max_batch;
	bo.max_step_tokens = e->opt.max_step_tokens;
	if ((rc = eng_batch_new(&e->batch, e->m, &bo)))
		goto fail;
	if (pthread_create(&e->worker, NULL, worker, e)) {
		rc = ev_error_set(EV_E_INTERNAL, "engine backend: cannot start the worker thread");
		goto fail;
	}
	e->started = true;
	if ((rc = ev_backend_wrap(out, &engine_ops, e)))
		return rc;
	checkpoint_identity(*out, e, opt->model_dir);
	if (e->vm && (rc = preprocessing_fingerprint(*out, e))) {
		ev_backend_free(*out);
		*out = NULL;
		return rc;
	}
	return 0;
fail:
	ev_error_wrap(rc, "engine backend");
	op_free(e);
	return rc;
}
