/*
 * feedback/issues_import.c: importing a GitHub REST issues export (the array
 * that GET /repos/{owner}/{repo}/issues returns, or a search result's
 * {"items": [...]}) and finding the image links in a Markdown/HTML body.
 * Links are recorded, never fetched. The import is one transaction.
 */
#include "feedback/issues_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define IMPORT_MAX_FILE ((size_t)256 << 20)

/* ---- image links ------------------------------------------------------------ */

static int strv_add_url(ev_strv *s, const char *p, size_t n)
{
	if (n == 0 || n > 2048 || s->n >= EV_ISSUE_MAX_LINKS)
		return 0;
	if (!((n > 7 && !strncasecmp(p, "http://", 7)) || (n > 8 && !strncasecmp(p, "https://", 8))))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return 0;
	if (ev_strv_find(s, p, n) >= 0)
		return 0;
	return ev_strv_push(s, p, n);
}

/* After "![": skips the alt text (brackets may nest), expects "(", and takes
 * the URL up to whitespace or ")"; <url> form too. Returns the end. */
static const char *md_image(ev_strv *s, const char *p, int *rc)
{
	int depth = 1;
	for (; *p && depth > 0; p++) {
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '[')
			depth++;
		else if (*p == ']')
			depth--;
	}
	if (depth || *p != '(')
		return p;
	p++;
	while (*p == ' ' || *p == '\t')
		p++;
	const char *start = p, *end;
	if (*p == '<') {
		start = ++p;
		end = strchr(p, '>');
		if (!end)
			return p;
	} else {
		end = p;
		while (*end && *end != ')' && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')
			end++;
	}
	*rc = strv_add_url(s, start, (size_t)(end - start));
	return end;
}

/* After "<img": finds src=... inside the tag. Returns the end of the tag. */
static const char *html_img(ev_strv *s, const char *p, int *rc)
{
	const char *gt = strchr(p, '>');
	const char *end_tag = gt ? gt : p + strlen(p);
	for (const char *q = p; q + 3 < end_tag; q++) {
		if (strncasecmp(q, "src", 3) != 0 || (q > p && q[-1] != ' ' && q[-1] != '\t' && q[-1] != '\n'))
			continue;
		const char *v = q + 3;
		while (*v == ' ' || *v == '\t')
			v++;
		if (*v != '=')
			continue;
		v++;
		while (*v == ' ' || *v == '\t')
			v++;
		const char *e;
		if (*v == '"' || *v == '\'') {
			char quote = *v++;
			e = v;
			while (e < end_tag && *e != quote)
				e++;
		} else {
			e = v;
			while (e < end_tag && *e != ' ' && *e != '\t' && *e != '\n' && *e != '/')
				e++;
			if (e < end_tag && *e == '/' && e + 1 < end_tag) /* a slash inside an unquoted URL */
				while (e < end_tag && *e != ' ' && *e != '\t' && *e != '\n')
					e++;
		}
		*rc = strv_add_url(s, v, (size_t)(e - v));
		break;
	}
	return end_tag;
}

int ev_issue_image_links(char ***out, size_t *n, const char *text)
{
	ev_strv s = {0};
	int rc = 0;
	*out = NULL;
	*n = 0;
	for (const char *p = text ? text : ""; *p && !rc;) {
		if (p[0] == '!' && p[1] == '[')
			p = md_image(&s, p + 2, &rc);
		else if (p[0] == '<' && !strncasecmp(p + 1, "img", 3) &&
		         (p[4] == ' ' || p[4] == '\t' || p[4] == '\n' || p[4] == '/'))
			p = html_img(&s, p + 4, &rc);
		else
			p++;
	}
	if (rc) {
		ev_strv_clear(&s);
		return rc;
	}
	*out = s.v;
	*n = s.n;
	return 0;
}

/* ---- GitHub import ------------------------------------------------------------ */

static int parse_time(double *out, const char *s, const char *what)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!end || (*end && strcmp(end, "Z") != 0 && !(end[0] == '.' || end[0] == '+' || end[0] == '-')))
		return ev_error_set(EV_E_INVALID, "%s: created_at: \"%.40s\" is not an ISO-8601 time", what, s ? s : "");
	time_t tt = timegm(&tm);
	*out = (double)tt;
	return 0;
}

typedef struct {
	const char *labels[EV_ISSUE_MAX_LABELS];
	size_t n_labels;
	char **links;
	size_t n_links;
	char ext[64];
} item_scratch;

static int import_one(ev_tracker *t, const cJSON *it, const char *what, cJSON *ids, long *imported,
                      long *skipped)
{
	item_scratch x = {0};
	ev_issue_info info = {0};
	const char *mimes[1] = {0};
	const char *modality = "text";
	int rc = 0;

	if (!cJSON_IsObject(it))
		return ev_error_set(EV_E_INVALID, "%s: expected an issue object", what);
	const cJSON *title = cJSON_GetObjectItemCaseSensitive(it, "title");
	if (!cJSON_IsString(title))
		return ev_error_set(EV_E_INVALID, "%s: title: expected a string", what);
	const cJSON *body = cJSON_GetObjectItemCaseSensitive(it, "body");
	if (body && !cJSON_IsString(body) && !cJSON_IsNull(body))
		return ev_error_set(EV_E_INVALID, "%s: body: expected a string or null", what);
	const cJSON *url = cJSON_GetObjectItemCaseSensitive(it, "html_url");
	const cJSON *num = cJSON_GetObjectItemCaseSensitive(it, "number");
	if (cJSON_IsString(url) && url->valuestring[0]) {
		info.external_id = url->valuestring;
	} else if (cJSON_IsNumber(num) && num->valuedouble >= 0 && num->valuedouble < 1e15 &&
	           num->valuedouble == floor(num->valuedouble)) {
		snprintf(x.ext, sizeof x.ext, "github#%lld", (long long)num->valuedouble);
		info.external_id = x.ext;
	} else {
		return ev_error_set(EV_E_INVALID, "%s: needs html_url or number (the external id)", what);
	}
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(it, "labels");
	if (labels && !cJSON_IsArray(labels) && !cJSON_IsNull(labels))
		return ev_error_set(EV_E_INVALID, "%s: labels: expected a list", what);
	const cJSON *l;
	cJSON_ArrayForEach(l, labels)
	{
		const char *name = cJSON_IsString(l) ? l->valuestring : ev_json_str(l, "name", NULL);
		if (!name)
			return ev_error_set(EV_E_INVALID, "%s: labels: expected names (strings or {\"name\"})", what);
		if (x.n_labels < EV_ISSUE_MAX_LABELS && *name)
			x.labels[x.n_labels++] = name;
	}
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(it, "user");
	info.author = cJSON_IsObject(user) ? ev_json_str(user, "login", NULL) : NULL;
	const char *created = ev_json_str(it, "created_at", NULL);
	if (created && (rc = parse_time(&info.created, created, what)))
		return rc;

	int64_t existing;
	if (ev_issue_find_external(t, info.external_id, &existing) == 0) {
		(*skipped)++;
		return 0;
	}
	ev_error_clear();
	info.title = title->valuestring;
	info.body = cJSON_IsString(body) ? body->valuestring : "";
	info.source = "github";
	info.labels = x.labels;
	info.n_labels = x.n_labels;
	if ((rc = ev_issue_image_links(&x.links, &x.n_links, info.body)))
		goto done;
	info.links = (const char *const *)x.links;
	info.n_links = x.n_links;
	int64_t id = 0;
	if ((rc = ev_intake_issue_check(&info, mimes, &modality)) ||
	    (rc = ev_intake_issue_insert(t, &info, mimes, NULL, modality, &id))) {
		ev_error_wrap(rc, "%s", what);
		goto done;
	}
	cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)id));
	(*imported)++;
done:
	ev_strv_free(x.links, x.n_links);
	return rc;
}

int ev_issues_import_github(ev_tracker *t, const char *path, char **out_json)
{
	char *text = NULL;
	size_t len = 0;
	cJSON *root = NULL, *res = NULL;
	long imported = 0, skipped = 0, prs = 0;
	bool in_tx = false;
	int rc;

	if (out_json)
		*out_json = NULL;
	if ((rc = ev_file_read(&text, &len, path, IMPORT_MAX_FILE)) || (rc = ev_json_parse(&root, text, len, path)))
		goto done;
	const cJSON *items = root;
	if (cJSON_IsObject(root))
		items = cJSON_GetObjectItemCaseSensitive(root, "items");
	if (!cJSON_IsArray(items)) {
		rc = ev_error_set(EV_E_INVALID, "%s: expected GitHub's issues array (or {\"items\": [...]})", path);
		goto done;
	}
	res = cJSON_CreateObject();
	cJSON *ids = cJSON_CreateArray();
	if (!res || !ids) {
		cJSON_Delete(ids);
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ev_intake_begin(t)))
		goto done;
	in_tx = true;
	size_t i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, items)
	{
		char what[300];
		snprintf(what, sizeof what, "%s: [%zu]", path, i++);
		if (cJSON_IsObject(it) && cJSON_GetObjectItemCaseSensitive(it, "pull_request")) {
			prs++;
			continue;
		}
		if ((rc = import_one(t, it, what, ids, &imported, &skipped))) {
			cJSON_Delete(ids);
			goto done;
		}
	}
	if ((rc = ev_intake_commit(t))) {
		cJSON_Delete(ids);
		goto done;
	}
	in_tx = false;
	cJSON_AddNumberToObject(res, "imported", (double)imported);
	cJSON_AddNumberToObject(res, "skipped_existing", (double)skipped);
	cJSON_AddNumberToObject(res, "skipped_pull_requests", (double)prs);
	cJSON_AddItemToObject(res, "ids", ids);
	if (out_json) {
		rc = ev_intake_emit(out_json, res);
		res = NULL;
	}
done:
	if (in_tx)
		ev_intake_rollback(t);
	cJSON_Delete(res);
	cJSON_Delete(root);
	free(text);
	return rc;
}
