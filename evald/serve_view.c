/*
 * evald/serve_view.c: the tracker viewer of `evald serve`, pages a person
 * reads in a browser (the same renderer as `evald report --format html`):
 *
 *   GET  /view                       runs, newest first, and a compare form
 *   GET  /view/runs/N                the run's report
 *   GET  /view/compare?a=N&b=M       the comparison of two runs
 *   GET  /view/regressions           regressions with their status
 *   GET  /view/issues                community issues; /view/issues/N one, its images shown
 *   GET  /view/clusters              clusters from triage
 *   GET  /view/proposals             proposals with members and evidence
 *   POST /view/regressions/N         status=confirmed|investigating|fixed|invalid|wontfix (the CLI's)
 *   POST /view/issues/N/close
 *   POST /view/proposals/N/join      who=NAME
 *
 * Pages need the server's token unless `--public` makes reading open; the
 * forms always do. A browser sends the token as HTTP Basic credentials
 * (any user name, the token as password: the server asks with
 * WWW-Authenticate), scripts as a bearer header. Each form carries a field
 * derived from the token and its own path (sha256), which another site
 * cannot forge, so a page elsewhere cannot make a signed-in browser act.
 * Pages are self-contained (the reports' CSP: no script, no loads but data:
 * images), and every stored string is escaped.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "base/fs.h"
#include "base/text.h"
#include "evald/cli.h"
#include "evald/serve.h"
#include "reports/reports.h"
#include "reports/reports_int.h"

#define IMAGE_MAX ((size_t)2 << 20) /* an attachment shown inline at most */

struct ev_serve_view {
	ev_serve_api *api;
	bool public_read;
	char csrf_key[EV_SHA256_HEX]; /* sha256 of the token: what form fields are derived from */
	bool has_token;
};

int ev_serve_view_new(ev_serve_view **out, ev_serve_api *api, const char *token, bool public_read)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	(*out)->api = api;
	(*out)->public_read = public_read;
	if (token) {
		ev_sha256_hex((*out)->csrf_key, token, strlen(token));
		(*out)->has_token = true;
	}
	return 0;
}

void ev_serve_view_free(ev_serve_view *v)
{
	free(v);
}

/* The form field of a path: sha256(key "|" path), hex. */
static void csrf_of(const ev_serve_view *v, const char *path, char out[EV_SHA256_HEX])
{
	char *s = ev_asprintf("%s|%s", v->csrf_key, path);
	ev_sha256_hex(out, s ? s : "", s ? strlen(s) : 0);
	free(s);
}

/* ---- page pieces ------------------------------------------------------------------ */

static int page_begin(ev_buf *b, const char *title)
{
	int rc = ev_html_begin(b);
	if (!rc)
		rc = ev_html_esc(b, title, 200);
	if (!rc)
		rc = ev_buf_printf(b, "</title><style>%s</style></head>\n<body>\n<nav><a href=\"/view\">Runs</a>"
		                      "<a href=\"/view/regressions\">Regressions</a><a href=\"/view/issues\">Issues</a>"
		                      "<a href=\"/view/clusters\">Clusters</a><a href=\"/view/proposals\">Proposals</a></nav>\n<h1>",
		                   EV_HTML_STYLE);
	if (!rc)
		rc = ev_html_esc(b, title, 200);
	return rc ? rc : ev_buf_puts(b, "</h1>\n");
}

static int page_end(ev_buf *b, ev_serve_response *resp)
{
	int rc = ev_buf_puts(b, "</body></html>\n");
	if (rc) {
		ev_buf_free(b);
		return rc;
	}
	resp->content_type = "text/html; charset=utf-8";
	resp->body = ev_buf_detach(b, &resp->body_len);
	return 0;
}

/* A POST form to `action` with the derived field, the given inner fields and a button. */
static int form(ev_buf *b, const ev_serve_view *v, const char *action, const char *fields, const char *button)
{
	char c[EV_SHA256_HEX];
	csrf_of(v, action, c);
	int rc = ev_buf_puts(b, "<form method=\"post\" action=\"");
	if (!rc)
		rc = ev_html_esc(b, action, 200);
	if (!rc)
		rc = ev_buf_printf(b, "\"><input type=\"hidden\" name=\"csrf\" value=\"%s\"/>%s<button type=\"submit\">", c,
		                   fields);
	if (!rc)
		rc = ev_html_esc(b, button, 60);
	return rc ? rc : ev_buf_puts(b, "</button></form>");
}

/* A table of a JSON array's objects: columns are keys (a value shown as
 * text, cut at 160 characters); `link` (may be NULL) makes the first
 * column a link to link + the row's "id". */
static int table(ev_buf *b, const cJSON *rows, const char *const *cols, size_t nc, const char *link)
{
	int rc = ev_buf_puts(b, "<table><thead><tr>");
	for (size_t k = 0; !rc && k < nc; k++) {
		rc = ev_buf_puts(b, "<th>");
		if (!rc)
			rc = ev_html_esc(b, cols[k], 40);
		if (!rc)
			rc = ev_buf_puts(b, "</th>");
	}
	if (!rc)
		rc = ev_buf_puts(b, "</tr></thead><tbody>");
	const cJSON *r;
	cJSON_ArrayForEach(r, rows)
	{
		if (rc)
			break;
		rc = ev_buf_printf(b, "<tr data-id=\"%.0f\">", ev_json_num(r, "id", 0));
		for (size_t k = 0; !rc && k < nc; k++) {
			const cJSON *x = cJSON_GetObjectItemCaseSensitive(r, cols[k]);
			char *text = cJSON_IsString(x) ? ev_strdup(x->valuestring) : x ? cJSON_PrintUnformatted(x) : ev_strdup("");
			rc = ev_buf_puts(b, "<td>");
			if (!rc && k == 0 && link)
				rc = ev_buf_printf(b, "<a href=\"%s%.0f\">", link, ev_json_num(r, "id", 0));
			if (!rc)
				rc = ev_html_esc(b, text ? text : "", 160);
			if (!rc && k == 0 && link)
				rc = ev_buf_puts(b, "</a>");
			if (!rc)
				rc = ev_buf_puts(b, "</td>");
			free(text);
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tr>");
	}
	return rc ? rc : ev_buf_puts(b, "</tbody></table>\n");
}

/* The JSON array under `key` of a tracker JSON answer (or the answer itself). */
static cJSON *list_of(const char *json, const char *key)
{
	cJSON *j = cJSON_Parse(json ? json : "[]");
	if (cJSON_IsObject(j) && key) {
		cJSON *a = cJSON_DetachItemFromObjectCaseSensitive(j, key);
		cJSON_Delete(j);
		return a;
	}
	return j;
}

static int64_t path_id(const char *path, const char *prefix)
{
	int64_t id = 0;
	const char *tail = path + strlen(prefix);
	char num[24];
	size_t n = strspn(tail, "0123456789");
	if (!n || n >= sizeof num)
		return 0;
	memcpy(num, tail, n);
	num[n] = 0;
	return ev_parse_i64(num, &id) && id > 0 ? id : 0;
}

static bool can_read(const ev_serve_view *v, const ev_serve_request *req)
{
	return v->public_read || req->authorized;
}

static int need_read(const ev_serve_view *v, const ev_serve_request *req)
{
	return can_read(v, req) ? 0 : ev_error_set(EV_E_UNSAFE, "this viewer needs the server's token (or --public)");
}

/* ---- pages ------------------------------------------------------------------------------- */

static int view_runs(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	ev_run_row *rows = NULL;
	size_t n = 0;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_tracker_runs_list(t, &rows, &n, 1000);
	ev_serve_api_unlock(v->api);
	if (rc)
		return rc;
	ev_buf b = EV_BUF_INIT((size_t)64 << 20);
	rc = page_begin(&b, "Runs");
	if (!rc)
		rc = ev_buf_puts(&b, "<form method=\"get\" action=\"/view/compare\"><label>compare run <input name=\"a\" "
		                     "size=\"6\"/></label> <label>with run <input name=\"b\" size=\"6\"/></label> <button "
		                     "type=\"submit\">Compare</button></form>\n<table class=\"runs\"><thead><tr><th>run</th>"
		                     "<th>model</th><th>status</th><th>results</th><th>created</th></tr></thead><tbody>");
	for (size_t i = 0; !rc && i < n; i++) {
		char when[32] = "-";
		if (rows[i].created > 0)
			ev_iso8601(when, rows[i].created);
		rc = ev_buf_printf(&b, "<tr data-run=\"%lld\"><td><a href=\"/view/runs/%lld\">%lld</a></td><td>",
		                   (long long)rows[i].id, (long long)rows[i].id, (long long)rows[i].id);
		if (!rc)
			rc = ev_html_esc(&b, rows[i].model, 120);
		if (!rc)
			rc = ev_buf_puts(&b, "</td><td>");
		if (!rc)
			rc = ev_html_esc(&b, rows[i].status, 40);
		if (!rc)
			rc = ev_buf_printf(&b, "</td><td>%lld of %lld</td><td>%s</td></tr>", (long long)rows[i].n_results,
			                   (long long)rows[i].n_planned, when);
	}
	if (!rc)
		rc = ev_buf_puts(&b, "</tbody></table>\n");
	ev_run_rows_free(rows, n);
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

static int view_run(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	int64_t id = path_id(req->path, "/view/runs/");
	if (!id)
		return ev_error_set(EV_E_NOTFOUND, "no such run");
	ev_report_options opt = EV_REPORT_OPTIONS_INIT;
	opt.format = EV_REPORT_HTML;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_report_write(t, id, &opt, f);
	ev_serve_api_unlock(v->api);
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	resp->content_type = "text/html; charset=utf-8";
	resp->body = buf, resp->body_len = len;
	return 0;
}

static int view_compare(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	const char *sa = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "a");
	const char *sb = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "b");
	int64_t a = 0, b = 0;
	if (!sa || !sb || !ev_parse_i64(sa, &a) || !ev_parse_i64(sb, &b) || a <= 0 || b <= 0)
		return ev_error_set(EV_E_INVALID, "compare: give two run ids, ?a=N&b=M");
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	ev_compare *c = NULL;
	ev_buf out = EV_BUF_INIT((size_t)256 << 20);
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_compare_runs(&c, t, a, b, &opt);
	if (!rc)
		rc = ev_compare_html(&out, t, c, NULL);
	ev_serve_api_unlock(v->api);
	ev_compare_free(c);
	if (rc) {
		ev_buf_free(&out);
		return rc;
	}
	resp->content_type = "text/html; charset=utf-8";
	resp->body = ev_buf_detach(&out, &resp->body_len);
	return 0;
}

static int view_regressions(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	char *json = NULL;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_tracker_rows_json(t, "regressions", &json);
	ev_serve_api_unlock(v->api);
	cJSON *rows = rc ? NULL : list_of(json, NULL);
	free(json);
	if (rc)
		return rc;
	ev_buf b = EV_BUF_INIT((size_t)64 << 20);
	rc = page_begin(&b, "Regressions");
	if (!rc)
		rc = ev_buf_puts(&b, "<table class=\"regressions\"><thead><tr><th>id</th><th>suite</th><th>runs</th>"
		                     "<th>delta</th><th>status</th><th>action</th></tr></thead><tbody>");
	const cJSON *r;
	cJSON_ArrayForEach(r, rows)
	{
		if (rc)
			break;
		long long id = (long long)ev_json_num(r, "id", 0);
		rc = ev_buf_printf(&b, "<tr data-id=\"%lld\" data-status=\"", id);
		if (!rc)
			rc = ev_html_esc(&b, ev_json_str(r, "status", ""), 40);
		if (!rc)
			rc = ev_buf_printf(&b, "\"><td>%lld</td><td>", id);
		if (!rc)
			rc = ev_html_esc(&b, ev_json_str(r, "suite", ""), 120);
		if (!rc)
			rc = ev_buf_printf(&b,
			                   "</td><td><a href=\"/view/compare?a=%.0f&amp;b=%.0f\">%.0f &#8594; %.0f</a></td>"
			                   "<td>%+.3f</td><td>",
			                   ev_json_num(r, "baseline_run", 0), ev_json_num(r, "candidate_run", 0), ev_json_num(r, "baseline_run", 0),
			                   ev_json_num(r, "candidate_run", 0), ev_json_num(r, "delta", 0));
		if (!rc)
			rc = ev_html_esc(&b, ev_json_str(r, "status", ""), 40);
		if (!rc)
			rc = ev_buf_puts(&b, "</td><td>");
		char action[64];
		snprintf(action, sizeof action, "/view/regressions/%lld", id);
		if (!rc)
			rc = form(&b, v, action,
			          "<select name=\"status\"><option>confirmed</option><option>investigating</option>"
			          "<option>fixed</option><option>invalid</option><option>wontfix</option></select> ",
			          "Set");
		if (!rc)
			rc = ev_buf_puts(&b, "</td></tr>");
	}
	cJSON_Delete(rows);
	if (!rc)
		rc = ev_buf_puts(&b, "</tbody></table>\n");
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

static int view_issues(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	char *json = NULL;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_issues_list_json(t, NULL, NULL, &json);
	ev_serve_api_unlock(v->api);
	cJSON *rows = rc ? NULL : list_of(json, "issues");
	free(json);
	if (rc)
		return rc;
	ev_buf b = EV_BUF_INIT((size_t)64 << 20);
	rc = page_begin(&b, "Issues");
	static const char *const cols[] = {"id", "title", "status", "model", "labels", "created"};
	if (!rc)
		rc = table(&b, rows, cols, 6, "/view/issues/");
	cJSON_Delete(rows);
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

/* An attachment as an inline image when it is one (read from the store, bounded). */
static int attachment(ev_buf *b, const cJSON *a)
{
	const char *mime = ev_json_str(a, "mime", ""), *path = ev_json_str(a, "path", "");
	int rc = ev_buf_puts(b, "<li>");
	if (!rc)
		rc = ev_html_esc(b, ev_json_str(a, "name", "attachment"), 120);
	if (!rc)
		rc = ev_buf_puts(b, " (");
	if (!rc)
		rc = ev_html_esc(b, *mime ? mime : "unknown type", 80);
	if (!rc)
		rc = ev_buf_printf(b, ", %.0f bytes)", ev_json_num(a, "size", 0));
	bool image = !strcmp(mime, "image/png") || !strcmp(mime, "image/jpeg") || !strcmp(mime, "image/gif") ||
	             !strcmp(mime, "image/webp");
	char *data = NULL, *b64 = NULL;
	size_t len = 0;
	if (!rc && image && *path && ev_json_num(a, "size", 0) <= (double)IMAGE_MAX &&
	    ev_file_read(&data, &len, path, IMAGE_MAX) == 0 && ev_base64_encode(&b64, data, len) == 0)
		rc = ev_buf_printf(b, "<br/><img class=\"attachment\" style=\"max-width:480px;min-width:96px;"
		                      "image-rendering:pixelated\" alt=\"the attached image\" src=\"data:%s;base64,%s\"/>",
		                   mime, b64);
	ev_error_clear();
	free(data), free(b64);
	return rc ? rc : ev_buf_puts(b, "</li>");
}

static int view_issue(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	int64_t id = path_id(req->path, "/view/issues/");
	if (!id)
		return ev_error_set(EV_E_NOTFOUND, "no such issue");
	char *json = NULL;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_issue_show_json(t, id, &json);
	ev_serve_api_unlock(v->api);
	cJSON *is = rc ? NULL : cJSON_Parse(json);
	free(json);
	if (rc)
		return rc;
	char title[256];
	snprintf(title, sizeof title, "Issue %lld", (long long)id);
	ev_buf b = EV_BUF_INIT((size_t)128 << 20);
	rc = page_begin(&b, title);
	if (!rc)
		rc = ev_buf_puts(&b, "<dl class=\"meta\">");
	static const char *const fields[] = {"title", "status", "model", "prompt", "output", "expected", "body"};
	for (size_t k = 0; !rc && k < sizeof fields / sizeof fields[0]; k++) {
		const char *val = ev_json_str(is, fields[k], NULL);
		if (!val)
			continue;
		rc = ev_buf_printf(&b, "<dt>%s</dt><dd class=\"field-%s\">", fields[k], fields[k]);
		if (!rc)
			rc = ev_html_esc(&b, val, 4000);
		if (!rc)
			rc = ev_buf_puts(&b, "</dd>");
	}
	if (!rc)
		rc = ev_buf_puts(&b, "</dl>\n<h2>Attachments</h2><ul class=\"attachments\">");
	const cJSON *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(is, "attachments"))
	{
		if (!rc)
			rc = attachment(&b, a);
	}
	if (!rc)
		rc = ev_buf_puts(&b, "</ul>\n");
	if (!rc && strcmp(ev_json_str(is, "status", ""), "closed")) {
		char action[64];
		snprintf(action, sizeof action, "/view/issues/%lld/close", (long long)id);
		rc = form(&b, v, action, "", "Close this issue");
	}
	cJSON_Delete(is);
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

static int view_clusters(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	char *json = NULL;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_tracker_rows_json(t, "clusters", &json);
	ev_serve_api_unlock(v->api);
	cJSON *rows = rc ? NULL : list_of(json, NULL);
	free(json);
	if (rc)
		return rc;
	ev_buf b = EV_BUF_INIT((size_t)64 << 20);
	rc = page_begin(&b, "Clusters");
	const cJSON *first = cJSON_GetArrayItem(rows, 0), *k;
	const char *cols[16];
	size_t nc = 0;
	cJSON_ArrayForEach(k, first) if (nc < 16) cols[nc++] = k->string;
	if (!rc && nc)
		rc = table(&b, rows, cols, nc, NULL);
	else if (!rc)
		rc = ev_buf_puts(&b, "<p class=\"note\">No clusters yet (evald triage).</p>\n");
	cJSON_Delete(rows);
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

static int view_proposals(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = need_read(v, req);
	if (rc)
		return rc;
	char *json = NULL;
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_proposals_list_json(t, &json);
	cJSON *rows = rc ? NULL : list_of(json, "proposals");
	free(json);
	ev_buf b = EV_BUF_INIT((size_t)64 << 20);
	if (!rc)
		rc = page_begin(&b, "Proposals");
	const cJSON *p;
	cJSON_ArrayForEach(p, rows)
	{
		if (rc)
			break;
		long long id = (long long)ev_json_num(p, "id", 0);
		char *shown = NULL;
		if (ev_proposal_show_json(t, id, &shown))
			ev_error_clear();
		cJSON *full = shown ? cJSON_Parse(shown) : NULL;
		free(shown);
		rc = ev_buf_printf(&b, "<section class=\"proposal\" data-id=\"%lld\"><h2>%lld: ", id, id);
		if (!rc)
			rc = ev_html_esc(&b, ev_json_str(p, "title", ""), 200);
		if (!rc)
			rc = ev_buf_puts(&b, "</h2><p>");
		if (!rc)
			rc = ev_html_esc(&b, ev_json_str(full ? full : p, "body", ""), 2000);
		if (!rc)
			rc = ev_buf_puts(&b, "</p><h3>Members</h3><ul class=\"members\">");
		const cJSON *m;
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(full, "members"))
		{
			if (!rc)
				rc = ev_buf_puts(&b, "<li>");
			if (!rc)
				rc = ev_html_esc(&b, ev_json_str(m, "who", ""), 80);
			if (!rc)
				rc = ev_buf_puts(&b, "</li>");
		}
		if (!rc)
			rc = ev_buf_puts(&b, "</ul><h3>Evidence</h3><ul class=\"evidence\">");
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(full, "evidence"))
		{
			if (!rc)
				rc = ev_buf_puts(&b, "<li>");
			if (!rc)
				rc = ev_html_esc(&b, ev_json_str(m, "kind", ""), 40);
			if (!rc)
				rc = ev_buf_puts(&b, " ");
			if (!rc)
				rc = ev_html_esc(&b, ev_json_str(m, "ref", ""), 80);
			if (!rc)
				rc = ev_buf_puts(&b, ": ");
			if (!rc)
				rc = ev_html_esc(&b, ev_json_str(m, "title", ev_json_str(m, "note", "")), 200);
			if (!rc)
				rc = ev_buf_puts(&b, "</li>");
		}
		cJSON_Delete(full);
		char action[64];
		snprintf(action, sizeof action, "/view/proposals/%lld/join", id);
		if (!rc)
			rc = ev_buf_puts(&b, "</ul>");
		if (!rc)
			rc = form(&b, v, action, "<label>your name <input name=\"who\" size=\"16\"/></label> ", "Join");
		if (!rc)
			rc = ev_buf_puts(&b, "</section>\n");
	}
	ev_serve_api_unlock(v->api);
	cJSON_Delete(rows);
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	return page_end(&b, resp);
}

/* ---- actions ---------------------------------------------------------------------------- */

static int hexv(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A field of an application/x-www-form-urlencoded body, decoded (malloc'd), or NULL. */
static char *form_field(const char *body, size_t len, const char *name)
{
	size_t nl = strlen(name);
	const char *p = body, *end = body + len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;
		if ((size_t)(stop - p) > nl && !strncmp(p, name, nl) && p[nl] == '=') {
			const char *v = p + nl + 1;
			char *out = malloc((size_t)(stop - v) + 1);
			size_t o = 0;
			if (!out)
				return NULL;
			for (const char *q = v; q < stop; q++) {
				if (*q == '+')
					out[o++] = ' ';
				else if (*q == '%' && stop - q >= 3 && hexv(q[1]) >= 0 && hexv(q[2]) >= 0) {
					out[o++] = (char)(hexv(q[1]) * 16 + hexv(q[2]));
					q += 2;
				} else
					out[o++] = *q;
			}
			out[o] = 0;
			return out;
		}
		p = stop + 1;
	}
	return NULL;
}

/* The form's derived field must be this path's. */
static int check_form(const ev_serve_view *v, const ev_serve_request *req)
{
	if (!req->authorized)
		return ev_error_set(EV_E_UNSAFE, "actions need the server's token");
	char want[EV_SHA256_HEX];
	csrf_of(v, req->path, want);
	char *got = form_field(req->body, req->body_len, "csrf");
	bool ok = got && strlen(got) == strlen(want) && !CRYPTO_memcmp(got, want, strlen(want));
	free(got);
	return ok ? 0 : ev_error_set(EV_E_UNSAFE, "the form's csrf field does not match this server and path");
}

static int done_page(ev_serve_response *resp, const char *what, const char *back)
{
	ev_buf b = EV_BUF_INIT(1 << 20);
	int rc = page_begin(&b, "Done");
	if (!rc)
		rc = ev_buf_puts(&b, "<p class=\"done\">");
	if (!rc)
		rc = ev_html_esc(&b, what, 200);
	if (!rc)
		rc = ev_buf_printf(&b, ". <a href=\"%s\">Back</a>.</p>\n", back);
	return rc ? (ev_buf_free(&b), rc) : page_end(&b, resp);
}

static int post_regression(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = check_form(v, req);
	if (rc)
		return rc;
	int64_t id = path_id(req->path, "/view/regressions/");
	char *status = form_field(req->body, req->body_len, "status");
	if (!id || !status || !ev_regression_status_valid(status)) {
		free(status);
		return ev_error_set(EV_E_INVALID, "status: one of new, confirmed, investigating, fixed, invalid, wontfix, regressed");
	}
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_regression_set_status(t, id, status, NULL);
	ev_serve_api_unlock(v->api);
	char what[128];
	snprintf(what, sizeof what, "Regression %lld is now %s", (long long)id, status);
	free(status);
	return rc ? rc : done_page(resp, what, "/view/regressions");
}

static int post_issue_close(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = check_form(v, req);
	if (rc)
		return rc;
	int64_t id = path_id(req->path, "/view/issues/");
	if (!id || strcmp(req->path + strcspn(req->path + strlen("/view/issues/"), "/") + strlen("/view/issues/"), "/close"))
		return ev_error_set(EV_E_NOTFOUND, "no such action");
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_issue_close(t, id);
	ev_serve_api_unlock(v->api);
	char what[64], back[64];
	snprintf(what, sizeof what, "Issue %lld is closed", (long long)id);
	snprintf(back, sizeof back, "/view/issues/%lld", (long long)id);
	return rc ? rc : done_page(resp, what, back);
}

static int post_proposal_join(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_view *v = ctx;
	int rc = check_form(v, req);
	if (rc)
		return rc;
	int64_t id = path_id(req->path, "/view/proposals/");
	char *who = form_field(req->body, req->body_len, "who");
	if (!id || !who || !*who || strlen(who) > 200) {
		free(who);
		return ev_error_set(EV_E_INVALID, "who: a name of 1 to 200 bytes");
	}
	ev_tracker *t = ev_serve_api_lock(v->api);
	rc = ev_proposal_join(t, id, who);
	ev_serve_api_unlock(v->api);
	free(who);
	char what[64];
	snprintf(what, sizeof what, "Joined proposal %lld", (long long)id);
	return rc ? rc : done_page(resp, what, "/view/proposals");
}

int ev_serve_view_register(ev_serve *s, ev_serve_view *v)
{
	/* reading: open with --public (the handlers check), else the token */
	bool tok = !v->public_read;
	const ev_serve_route routes[] = {
		{"GET", "/view", tok, view_runs, v, 0, false},
		{"GET", "/view/", tok, view_runs, v, 0, false},
		{"GET", "/view/runs/*", tok, view_run, v, 0, false},
		{"GET", "/view/compare", tok, view_compare, v, 0, false},
		{"GET", "/view/regressions", tok, view_regressions, v, 0, false},
		{"GET", "/view/issues", tok, view_issues, v, 0, false},
		{"GET", "/view/issues/*", tok, view_issue, v, 0, false},
		{"GET", "/view/clusters", tok, view_clusters, v, 0, false},
		{"GET", "/view/proposals", tok, view_proposals, v, 0, false},
		{"POST", "/view/regressions/*", true, post_regression, v, 4096, false},
		{"POST", "/view/issues/*", true, post_issue_close, v, 4096, false},
		{"POST", "/view/proposals/*", true, post_proposal_join, v, 4096, false},
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		int rc = ev_serve_add_route(s, &routes[i]);
		if (rc)
			return rc;
	}
	return 0;
}
