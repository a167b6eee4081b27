/*
 * evald/serve_api.c: the tracker API of `evald serve`.
 *
 *   POST /api/issues        (bearer token) a report as JSON
 *       {"title","body","model","prompt","output","expected","labels":[..],
 *        "attachments":[{"name","mime","data":"<base64>"}]}
 *     or multipart/form-data (text fields of those names, "label"/"labels"
 *     repeatable, and file parts); 201 with the stored issue. 400 for a
 *     malformed request (the JSON error names the field), 413 past a size
 *     cap, 415 when a claimed MIME type disagrees with the content.
 *   GET /api/issues[?status=open|closed&label=L], GET /api/issues/N,
 *   GET /api/regressions ([] when the tracker has none), GET /api/proposals.
 *
 * One tracker handle behind a mutex: a tracker handle is used from one
 * thread at a time, and SQLite has one writer anyway. An issue and its
 * attachments are stored in one transaction (ev_issue_add).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "evald/cli.h"
#include "evald/serve.h"

struct ev_serve_api {
	ev_tracker *t;
	pthread_mutex_t lock;
	size_t max_attachment;
};

int ev_serve_api_new(ev_serve_api **out, const char *db_path, size_t max_attachment)
{
	*out = NULL;
	ev_serve_api *a = calloc(1, sizeof *a);
	if (!a)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_tracker_open(&a->t, db_path);
	if (rc) {
		free(a);
		return rc;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->max_attachment = max_attachment ? max_attachment : EV_ATTACH_MAX_DEFAULT;
	*out = a;
	return 0;
}

void ev_serve_api_free(ev_serve_api *a)
{
	if (!a)
		return;
	ev_tracker_close(a->t);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

ev_tracker *ev_serve_api_lock(ev_serve_api *a)
{
	pthread_mutex_lock(&a->lock);
	return a->t;
}

void ev_serve_api_unlock(ev_serve_api *a)
{
	pthread_mutex_unlock(&a->lock);
}

/* ---- the issue being received --------------------------------------------------- */

typedef struct {
	char *name, *mime;
	unsigned char *data;
	size_t len;
} upload;

typedef struct {
	/* text fields, owned */
	char *title, *body, *model, *prompt, *output, *expected;
	char *labels[EV_ISSUE_MAX_LABELS];
	size_t n_labels;
	upload atts[EV_ISSUE_MAX_ATTACHMENTS];
	size_t n_atts;
	size_t max_attachment;
	/* the first problem found: its status and field */
	int err;
	char field[96];
	/* multipart: the part being received */
	char cur_key[64];
	ev_buf cur;
	bool cur_is_file;
} incoming;

static void incoming_clear(incoming *in)
{
	free(in->title);
	free(in->body);
	free(in->model);
	free(in->prompt);
	free(in->output);
	free(in->expected);
	for (size_t i = 0; i < in->n_labels; i++)
		free(in->labels[i]);
	for (size_t i = 0; i < in->n_atts; i++) {
		free(in->atts[i].name);
		free(in->atts[i].mime);
		free(in->atts[i].data);
	}
	ev_buf_free(&in->cur);
}

static int fail(incoming *in, int code, const char *field, const char *fmt, ...) EV_PRINTF(4, 5);
static int fail(incoming *in, int code, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (!in->err) {
		in->err = code;
		snprintf(in->field, sizeof in->field, "%s", field ? field : "");
		ev_error_set(code, "%s", msg);
	}
	return code;
}

static char **text_slot(incoming *in, const char *key)
{
	if (!strcmp(key, "title"))
		return &in->title;
	if (!strcmp(key, "body"))
		return &in->body;
	if (!strcmp(key, "model"))
		return &in->model;
	if (!strcmp(key, "prompt"))
		return &in->prompt;
	if (!strcmp(key, "output"))
		return &in->output;
	if (!strcmp(key, "expected"))
		return &in->expected;
	return NULL;
}

static int add_label(incoming *in, const char *s, size_t n, const char *field)
{
	if (in->n_labels >= EV_ISSUE_MAX_LABELS)
		return fail(in, EV_E_LIMIT, "labels", "labels: more than %d", EV_ISSUE_MAX_LABELS);
	if (!(in->labels[in->n_labels] = ev_strndup(s, n)))
		return fail(in, EV_E_NOMEM, field, "out of memory");
	in->n_labels++;
	return 0;
}

/* ---- JSON bodies ------------------------------------------------------------------- */

/* "labels": a list of strings. */
static int labels_from_json(incoming *in, const cJSON *v)
{
	if (!cJSON_IsArray(v))
		return fail(in, EV_E_INVALID, "labels", "labels: expected a list of strings");
	int i = 0, rc = 0;
	const cJSON *l;
	cJSON_ArrayForEach(l, v) {
		char f[32];
		snprintf(f, sizeof f, "labels[%d]", i++);
		if (!cJSON_IsString(l))
			return fail(in, EV_E_INVALID, f, "%s: expected a string", f);
		if ((rc = add_label(in, l->valuestring, strlen(l->valuestring), f)))
			return rc;
	}
	return 0;
}

/* One of "attachments": {"name","mime","data" (base64)}; `f` names it. */
static int attachment_from_json(incoming *in, const cJSON *a, const char *f)
{
	if (in->n_atts >= EV_ISSUE_MAX_ATTACHMENTS)
		return fail(in, EV_E_LIMIT, "attachments", "attachments: more than %d", EV_ISSUE_MAX_ATTACHMENTS);
	if (!cJSON_IsObject(a))
		return fail(in, EV_E_INVALID, f, "%s: expected an object", f);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(a, "name");
	const cJSON *mime = cJSON_GetObjectItemCaseSensitive(a, "mime");
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(a, "data");
	char ff[80];
	if (name && !cJSON_IsString(name) && !cJSON_IsNull(name)) {
		snprintf(ff, sizeof ff, "%s.name", f);
		return fail(in, EV_E_INVALID, ff, "%s: expected a string", ff);
	}
	if (mime && !cJSON_IsString(mime) && !cJSON_IsNull(mime)) {
		snprintf(ff, sizeof ff, "%s.mime", f);
		return fail(in, EV_E_INVALID, ff, "%s: expected a string", ff);
	}
	snprintf(ff, sizeof ff, "%s.data", f);
	if (!cJSON_IsString(data))
		return fail(in, EV_E_INVALID, ff, "%s: expected a base64 string", ff);
	upload *u = &in->atts[in->n_atts];
	if (ev_base64_decode(&u->data, &u->len, data->valuestring, strlen(data->valuestring), in->max_attachment, ff))
		return fail(in, ev_error_code(), ff, "%s", ev_error_msg());
	in->n_atts++;
	u->name = cJSON_IsString(name) ? ev_strdup(name->valuestring) : NULL;
	u->mime = cJSON_IsString(mime) ? ev_strdup(mime->valuestring) : NULL;
	return 0;
}

/* One field of the body. */
static int field_from_json(incoming *in, const cJSON *v)
{
	const char *key = v->string;
	char **slot = text_slot(in, key);
	if (slot) {
		if (cJSON_IsNull(v))
			return 0;
		if (!cJSON_IsString(v))
			return fail(in, EV_E_INVALID, key, "%s: expected a string", key);
		free(*slot);
		return (*slot = ev_strdup(v->valuestring)) ? 0 : fail(in, EV_E_NOMEM, key, "out of memory");
	}
	if (!strcmp(key, "labels"))
		return labels_from_json(in, v);
	if (!strcmp(key, "attachments")) {
		if (!cJSON_IsArray(v))
			return fail(in, EV_E_INVALID, "attachments", "attachments: expected a list of objects");
		int i = 0, rc = 0;
		const cJSON *a;
		cJSON_ArrayForEach(a, v) {
			char f[64];
			snprintf(f, sizeof f, "attachments[%d]", i++);
			if ((rc = attachment_from_json(in, a, f)))
				return rc;
		}
		return 0;
	}
	return fail(in, EV_E_INVALID, key, "%.60s: unknown field", key);
}

static int from_json(incoming *in, const char *body, size_t len);

int ev_serve_api_check_issue_json(const char *body, size_t len, size_t max_attachment)
{
	incoming in = {.max_attachment = max_attachment, .cur = EV_BUF_INIT(1 << 20)};
	int rc = from_json(&in, body, len);
	incoming_clear(&in);
	return rc;
}

static int from_json(incoming *in, const char *body, size_t len)
{
	cJSON *j = NULL;
	int rc;
	if ((rc = ev_json_parse(&j, body, len, "request body")))
		return fail(in, EV_E_PARSE, "", "%s", ev_error_msg());
	if (!cJSON_IsObject(j))
		rc = fail(in, EV_E_INVALID, "", "request body: expected a JSON object");
	for (const cJSON *v = rc ? NULL : j->child; v && !rc; v = v->next)
		rc = field_from_json(in, v);
	cJSON_Delete(j);
	return rc;
}

/* ---- multipart bodies (MHD's post processor) ------------------------------------------ */

/* Ends the part being received: a text field or a file. */
static int finish_part(incoming *in)
{
	if (!in->cur_key[0])
		return 0;
	int rc = 0;
	if (!in->cur_is_file) {
		char **slot = text_slot(in, in->cur_key);
		if (slot) {
			free(*slot);
			*slot = ev_buf_detach(&in->cur, NULL);
			if (!*slot)
				*slot = ev_strdup("");
		} else if (!strcmp(in->cur_key, "labels") || !strcmp(in->cur_key, "label")) {
			/* one label a part, or several separated by commas */
			const char *s = in->cur.data ? in->cur.data : "";
			while (!rc && *s) {
				size_t n = strcspn(s, ",");
				const char *b = s, *e = s + n;
				while (b < e && *b == ' ')
					b++;
				while (e > b && e[-1] == ' ')
					e--;
				if (e > b)
					rc = add_label(in, b, (size_t)(e - b), "labels");
				s += n + (s[n] ? 1 : 0);
			}
		} else {
			rc = fail(in, EV_E_INVALID, in->cur_key, "%.60s: unknown field", in->cur_key);
		}
	} else {
		in->atts[in->n_atts - 1].data = (unsigned char *)ev_buf_detach(&in->cur, &in->atts[in->n_atts - 1].len);
	}
	ev_buf_reset(&in->cur);
	in->cur_key[0] = 0;
	return rc;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                               const char *content_type, const char *transfer_encoding, const char *data,
                               uint64_t off, size_t size)
{
	incoming *in = cls;
	(void)kind, (void)transfer_encoding;
	if (in->err)
		return MHD_NO;
	if (!key)
		key = "";
	if (off == 0) { /* a new part */
		if (finish_part(in))
			return MHD_NO;
		snprintf(in->cur_key, sizeof in->cur_key, "%s", *key ? key : "file");
		in->cur_is_file = filename != NULL;
		if (in->cur_is_file) {
			if (in->n_atts >= EV_ISSUE_MAX_ATTACHMENTS) {
				fail(in, EV_E_LIMIT, "attachments", "attachments: more than %d", EV_ISSUE_MAX_ATTACHMENTS);
				return MHD_NO;
			}
			upload *u = &in->atts[in->n_atts++];
			u->name = ev_strdup(filename);
			u->mime = content_type ? ev_strdup(content_type) : NULL;
			ev_buf_free(&in->cur);
			ev_buf_init(&in->cur, in->max_attachment);
		} else {
			ev_buf_free(&in->cur);
			ev_buf_init(&in->cur, (size_t)8 << 20);
		}
	}
	if (size && ev_buf_append(&in->cur, data, size) != 0) {
		char f[96];
		snprintf(f, sizeof f, "%s%s%.40s%s", in->cur_key, in->cur_is_file ? " (" : "",
		         in->cur_is_file ? (in->atts[in->n_atts - 1].name ? in->atts[in->n_atts - 1].name : "") : "",
		         in->cur_is_file ? ")" : "");
		fail(in, EV_E_LIMIT, in->cur_key, "%s: over the %zu-byte limit", f, in->cur.max);
		return MHD_NO;
	}
	return MHD_YES;
}

static int from_multipart(incoming *in, const ev_serve_request *req)
{
	struct MHD_PostProcessor *pp = MHD_create_post_processor(req->conn, 64 * 1024, on_part, in);
	if (!pp)
		return fail(in, EV_E_PARSE, "Content-Type", "multipart/form-data: missing or bad boundary");
	enum MHD_Result ok = MHD_post_process(pp, req->body, req->body_len);
	enum MHD_Result done = MHD_destroy_post_processor(pp);
	if (in->err)
		return in->err;
	if (ok != MHD_YES || done != MHD_YES)
		return fail(in, EV_E_PARSE, "", "multipart/form-data: malformed or truncated body");
	return finish_part(in);
}

/* ---- handlers -------------------------------------------------------------------------- */

static int post_issue(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	incoming in;
	memset(&in, 0, sizeof in);
	in.max_attachment = api->max_attachment;
	ev_issue_attachment atts[EV_ISSUE_MAX_ATTACHMENTS];
	char *shown = NULL;
	int rc;

	const char *ct = req->content_type ? req->content_type : "";
	if (!strncasecmp(ct, "application/json", 16))
		rc = from_json(&in, req->body, req->body_len);
	else if (!strncasecmp(ct, "multipart/form-data", 19))
		rc = from_multipart(&in, req);
	else
		rc = fail(&in, EV_E_UNSUPPORTED, "Content-Type",
		          "Content-Type: \"%.60s\": expected application/json or multipart/form-data", ct);
	if (!rc && !in.title)
		rc = fail(&in, EV_E_INVALID, "title", "title: required");
	if (rc) {
		ev_serve_json_error(resp, ev_serve_http_status(rc), in.field[0] ? in.field : NULL, ev_error_msg());
		goto done;
	}
	for (size_t i = 0; i < in.n_atts; i++)
		atts[i] = (ev_issue_attachment){in.atts[i].name, in.atts[i].mime, in.atts[i].data, in.atts[i].len};
	ev_issue_info info = {0};
	info.title = in.title;
	info.body = in.body;
	info.model = in.model;
	info.prompt = in.prompt;
	info.output = in.output;
	info.expected = in.expected;
	info.source = "http";
	info.labels = (const char *const *)in.labels;
	info.n_labels = in.n_labels;
	info.attachments = atts;
	info.n_attachments = in.n_atts;
	info.max_attachment_bytes = api->max_attachment;
	int64_t id = 0;
	pthread_mutex_lock(&api->lock);
	rc = ev_issue_add(api->t, &info, &id);
	if (!rc)
		rc = ev_issue_show_json(api->t, id, &shown);
	pthread_mutex_unlock(&api->lock);
	if (rc) {
		int status = ev_serve_http_status(rc);
		if (status == 500) {
			ev_log_error("POST /api/issues: %s", ev_error_msg());
			ev_serve_json_error(resp, 500, NULL, "internal error (see the server's log)");
		} else {
			/* The validation message starts with the field it is about. */
			char field[96];
			size_t n = strcspn(ev_error_msg(), ":");
			snprintf(field, sizeof field, "%.*s", (int)(n < sizeof field ? n : sizeof field - 1), ev_error_msg());
			ev_serve_json_error(resp, status, field, ev_error_msg());
		}
		goto done;
	}
	resp->status = 201;
	resp->body = shown;
	shown = NULL;
done:
	free(shown);
	incoming_clear(&in);
	return 0;
}

/* Lists: the tracker's {"x":[...]} object unwrapped to the array. */
static int unwrap(char **json, const char *key)
{
	cJSON *j = cJSON_Parse(*json);
	cJSON *arr = j ? cJSON_DetachItemFromObjectCaseSensitive(j, key) : NULL;
	cJSON_Delete(j);
	if (!arr)
		return ev_error_set(EV_E_INTERNAL, "unwrapping %s", key);
	char *s = ev_json_print(arr);
	cJSON_Delete(arr);
	if (!s)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	free(*json);
	*json = s;
	return 0;
}

static int get_issues(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	const char *status = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "status");
	const char *label = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "label");
	if (status && strcmp(status, "open") && strcmp(status, "closed"))
		return ev_error_set(EV_E_INVALID, "status: expected open or closed");
	pthread_mutex_lock(&api->lock);
	int rc = ev_issues_list_json(api->t, status, label, &resp->body);
	pthread_mutex_unlock(&api->lock);
	return rc ? rc : unwrap(&resp->body, "issues");
}

static int get_issue(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	int64_t id;
	const char *tail = req->path + strlen("/api/issues/");
	if (!ev_parse_i64(tail, &id) || id <= 0)
		return ev_error_set(EV_E_NOTFOUND, "no such issue: \"%.40s\"", tail);
	pthread_mutex_lock(&api->lock);
	int rc = ev_issue_show_json(api->t, id, &resp->body);
	pthread_mutex_unlock(&api->lock);
	return rc;
}

static int get_regressions(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	(void)req;
	pthread_mutex_lock(&api->lock);
	int rc = ev_tracker_rows_json(api->t, "regressions", &resp->body);
	pthread_mutex_unlock(&api->lock);
	return rc;
}

static int get_proposals(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	(void)req;
	pthread_mutex_lock(&api->lock);
	int rc = ev_proposals_list_json(api->t, &resp->body);
	pthread_mutex_unlock(&api->lock);
	return rc ? rc : unwrap(&resp->body, "proposals");
}

int ev_serve_api_register(ev_serve *s, ev_serve_api *api)
{
	const ev_serve_route routes[] = {
		{"POST", "/api/issues", true, post_issue, api, 0, false}, /* uploads: the server's --max-body */
		{"GET", "/api/issues", false, get_issues, api, 0, false},
		{"GET", "/api/issues/*", false, get_issue, api, 0, false},
		{"GET", "/api/regressions", false, get_regressions, api, 0, false},
		{"GET", "/api/proposals", false, get_proposals, api, 0, false},
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		int rc = ev_serve_add_route(s, &routes[i]);
		if (rc)
			return rc;
	}
	return 0;
}
