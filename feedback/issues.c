/*
 * feedback/issues.c: community issue reports in the tracker: adding one
 * (validated first, attachment files stored, then one transaction for the
 * rows), closing, listing and showing; plus the intake's shared helpers
 * (transactions, private statements, rows as JSON).
 */
#include "feedback/issues_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ------------------------------------------------------------ */

int ev_intake_begin(ev_tracker *t)
{
	int rc = ev_tracker_flush(t);
	if (rc)
		return rc;
	return ev_tracker_exec(t, "BEGIN IMMEDIATE", "starting a write transaction");
}

int ev_intake_commit(ev_tracker *t) { return ev_tracker_exec(t, "COMMIT", "committing"); }

void ev_intake_rollback(ev_tracker *t)
{
	if (t && t->db && !sqlite3_get_autocommit(t->db))
		sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
}

bool ev_intake_table_exists(ev_tracker *t, const char *name)
{
	sqlite3_stmt *st = NULL;
	bool yes = false;
	if (ev_tracker_prepare(t, &st, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1") == 0) {
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		yes = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return yes;
}

static bool is_time_column(const char *name)
{
	static const char *const names[] = {"created", "updated", "closed", "joined", "finished", "at", NULL};
	for (const char *const *p = names; *p; p++)
		if (!strcmp(name, *p))
			return true;
	return false;
}

cJSON *ev_intake_row_json(sqlite3_stmt *st)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	int n = sqlite3_column_count(st);
	for (int i = 0; i < n; i++) {
		const char *name = sqlite3_column_name(st, i);
		cJSON *v = NULL;
		switch (sqlite3_column_type(st, i)) {
		case SQLITE_NULL:
			v = cJSON_CreateNull();
			break;
		case SQLITE_INTEGER:
		case SQLITE_FLOAT: {
			double d = sqlite3_column_double(st, i);
			if (is_time_column(name)) {
				if (d <= 0) {
					v = cJSON_CreateNull();
				} else {
					char iso[32];
					ev_iso8601(iso, d);
					v = cJSON_CreateString(iso);
				}
			} else {
				v = cJSON_CreateNumber(d);
			}
			break;
		}
		default:
			v = cJSON_CreateString((const char *)sqlite3_column_text(st, i));
		}
		if (!v || !cJSON_AddItemToObject(o, name, v)) {
			cJSON_Delete(v);
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

int ev_intake_emit(char **out, cJSON *tree)
{
	*out = NULL;
	if (!tree)
		return ev_error_set(EV_E_NOMEM, "out of memory building JSON");
	*out = ev_json_print(tree);
	cJSON_Delete(tree);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory printing JSON");
}

/* ---- validation ------------------------------------------------------------------ */

static int check_text(const char *s, size_t max, bool required, bool oneline, const char *field)
{
	if (!s) {
		if (required)
			return ev_error_set(EV_E_INVALID, "%s: required", field);
		return 0;
	}
	size_t n = strlen(s);
	if (required && n == 0)
		return ev_error_set(EV_E_INVALID, "%s: must not be empty", field);
	if (n > max)
		return ev_error_set(EV_E_LIMIT, "%s: %zu bytes, over the %zu-byte limit", field, n, max);
	if (!ev_utf8_valid(s, n))
		return ev_error_set(EV_E_INVALID, "%s: not valid UTF-8", field);
	if (oneline)
		for (const unsigned char *p = (const unsigned char *)s; *p; p++)
			if (*p < 0x20 || *p == 0x7f)
				return ev_error_set(EV_E_INVALID, "%s: control character at byte %zu", field,
				                    (size_t)(p - (const unsigned char *)s));
	return 0;
}

int ev_intake_issue_check(const ev_issue_info *in, const char **mimes, const char **modality)
{
	int rc;
	char field[64];
	if ((rc = check_text(in->title, EV_ISSUE_MAX_TITLE, true, false, "title")) ||
	    (rc = check_text(in->body, EV_ISSUE_MAX_BODY, false, false, "body")) ||
	    (rc = check_text(in->model, EV_ISSUE_MAX_SHORT, false, true, "model")) ||
	    (rc = check_text(in->prompt, EV_ISSUE_MAX_FIELD, false, false, "prompt")) ||
	    (rc = check_text(in->output, EV_ISSUE_MAX_FIELD, false, false, "output")) ||
	    (rc = check_text(in->expected, EV_ISSUE_MAX_FIELD, false, false, "expected")) ||
	    (rc = check_text(in->external_id, 2048, false, true, "external_id")) ||
	    (rc = check_text(in->author, EV_ISSUE_MAX_SHORT, false, true, "author")))
		return rc;
	if (in->source && strcmp(in->source, "cli") && strcmp(in->source, "http") && strcmp(in->source, "github"))
		return ev_error_set(EV_E_INVALID, "source: \"%.40s\" is not cli, http or github", in->source);
	if (in->n_labels > EV_ISSUE_MAX_LABELS)
		return ev_error_set(EV_E_LIMIT, "labels: %zu, over the limit of %d", in->n_labels, EV_ISSUE_MAX_LABELS);
	for (size_t i = 0; i < in->n_labels; i++) {
		snprintf(field, sizeof field, "labels[%zu]", i);
		if ((rc = check_text(in->labels[i], 64, true, true, field)))
			return rc;
	}
	if (in->n_links > EV_ISSUE_MAX_LINKS)
		return ev_error_set(EV_E_LIMIT, "links: %zu, over the limit of %d", in->n_links, EV_ISSUE_MAX_LINKS);
	for (size_t i = 0; i < in->n_links; i++) {
		snprintf(field, sizeof field, "links[%zu]", i);
		if ((rc = check_text(in->links[i], 2048, true, true, field)))
			return rc;
	}
	if (in->n_attachments > EV_ISSUE_MAX_ATTACHMENTS)
		return ev_error_set(EV_E_LIMIT, "attachments: %zu, over the limit of %d", in->n_attachments,
		                    EV_ISSUE_MAX_ATTACHMENTS);
	size_t max = in->max_attachment_bytes ? in->max_attachment_bytes : EV_ATTACH_MAX_DEFAULT;
	const char *mod = "text";
	for (size_t i = 0; i < in->n_attachments; i++) {
		const ev_issue_attachment *a = &in->attachments[i];
		if (a->name)
			snprintf(field, sizeof field, "attachments[%zu] (%.30s)", i, a->name);
		else
			snprintf(field, sizeof field, "attachments[%zu]", i);
		if (a->name && (rc = check_text(a->name, 255, false, true, field)))
			return rc;
		if (!a->data || a->len == 0)
			return ev_error_set(EV_E_INVALID, "%s: empty", field);
		if (a->len > max)
			return ev_error_set(EV_E_LIMIT, "%s: %zu bytes, over the %zu-byte limit", field, a->len, max);
		const char *m = ev_attach_detect_mime(a->data, a->len);
		if ((rc = ev_attach_check_claim(a->claimed_mime, m, field)))
			return rc;
		mimes[i] = m;
		const char *k = ev_attach_kind(m);
		mod = i == 0 ? k : strcmp(mod, k) ? "mixed" : mod;
	}
	*modality = mod;
	return 0;
}

/* ---- add ---------------------------------------------------------------------- */

int ev_intake_issue_insert(ev_tracker *t, const ev_issue_info *in, const char *const *mimes,
                           const char *const *shas, const char *modality, int64_t *out_id)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;
	int64_t id = 0;

	if ((rc = ev_tracker_prepare(t, &st,
	                            "INSERT INTO issues (title, body, model, prompt, output, expected, source, "
	                            "external_id, author, modality, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
	                            "?9, ?10, ?11)")))
		goto done;
	sqlite3_bind_text(st, 1, in->title, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, in->body ? in->body : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, in->model, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, in->prompt, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, in->output, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, in->expected, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, in->source ? in->source : "cli", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, in->external_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, in->author, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, modality, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 11, in->created > 0 ? in->created : ev_wall_time());
	int src = sqlite3_step(st);
	if (src == SQLITE_CONSTRAINT_UNIQUE) {
		rc = ev_error_set(EV_E_INVALID, "external_id: an issue with \"%.200s\" exists already", in->external_id);
		goto done;
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "inserting an issue");
		goto done;
	}
	id = sqlite3_last_insert_rowid(t->db);
	sqlite3_finalize(st);
	st = NULL;

	for (size_t i = 0; i < in->n_attachments; i++) {
		const ev_issue_attachment *a = &in->attachments[i];
		if ((rc = ev_tracker_prepare(t, &st,
		                            "INSERT OR IGNORE INTO attachments (sha256, mime, size, original_name) "
		                            "VALUES (?1, ?2, ?3, ?4)")))
			goto done;
		sqlite3_bind_text(st, 1, shas[i], -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, mimes[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)a->len);
		sqlite3_bind_text(st, 4, a->name, -1, SQLITE_STATIC);
		if ((rc = ev_tracker_step_done(t, st, "inserting an attachment")))
			goto done;
		sqlite3_finalize(st);
		if ((rc = ev_tracker_prepare(t, &st,
		                            "INSERT OR IGNORE INTO issue_attachments (issue_id, sha256, name) "
		                            "VALUES (?1, ?2, ?3)")))
			goto done;
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, shas[i], -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, a->name, -1, SQLITE_STATIC);
		if ((rc = ev_tracker_step_done(t, st, "linking an attachment")))
			goto done;
		sqlite3_finalize(st);
		st = NULL;
	}
	for (size_t i = 0; i < in->n_labels; i++) {
		if ((rc = ev_tracker_prepare(t, &st, "INSERT OR IGNORE INTO labels (issue_id, label) VALUES (?1, ?2)")))
			goto done;
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, in->labels[i], -1, SQLITE_STATIC);
		if ((rc = ev_tracker_step_done(t, st, "inserting a label")))
			goto done;
		sqlite3_finalize(st);
		st = NULL;
	}
	for (size_t i = 0; i < in->n_links; i++) {
		if ((rc = ev_tracker_prepare(t, &st, "INSERT OR IGNORE INTO links (issue_id, url) VALUES (?1, ?2)")))
			goto done;
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_text(st, 2, in->links[i], -1, SQLITE_STATIC);
		if ((rc = ev_tracker_step_done(t, st, "inserting a link")))
			goto done;
		sqlite3_finalize(st);
		st = NULL;
	}
	*out_id = id;
done:
	sqlite3_finalize(st);
	return rc;
}

int ev_issue_add(ev_tracker *t, const ev_issue_info *info, int64_t *out_id)
{
	const char *mimes[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	char shas[EV_ISSUE_MAX_ATTACHMENTS][EV_SHA256_HEX];
	const char *sha_ptrs[EV_ISSUE_MAX_ATTACHMENTS] = {0};
	const char *modality = "text";
	char *dir = NULL;
	int rc;

	if (out_id)
		*out_id = 0;
	if ((rc = ev_intake_issue_check(info, mimes, &modality)))
		return rc;
	/* The files first: a row never names a file that is not complete. A
	 * failure after this leaves at most unreferenced, complete files. */
	if (info->n_attachments) {
		if ((rc = ev_attach_dir(&dir, t)))
			goto done;
		for (size_t i = 0; i < info->n_attachments; i++) {
			if ((rc = ev_attach_store(dir, info->attachments[i].data, info->attachments[i].len, shas[i])))
				goto done;
			sha_ptrs[i] = shas[i];
		}
	}
	if ((rc = ev_intake_begin(t)))
		goto done;
	int64_t id = 0;
	if ((rc = ev_intake_issue_insert(t, info, mimes, sha_ptrs, modality, &id)) || (rc = ev_intake_commit(t))) {
		ev_intake_rollback(t);
		goto done;
	}
	if (out_id)
		*out_id = id;
done:
	free(dir);
	return rc;
}

/* ---- close, find ------------------------------------------------------------------ */

int ev_issue_close(ev_tracker *t, int64_t id)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_flush(t);
	if (rc || (rc = ev_tracker_prepare(t, &st,
	                                  "UPDATE issues SET status = 'closed', closed = ?2 WHERE id = ?1 AND "
	                                  "status = 'open'")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_double(st, 2, ev_wall_time());
	if ((rc = ev_tracker_step_done(t, st, "closing an issue")))
		goto done;
	if (sqlite3_changes(t->db) == 0) {
		sqlite3_finalize(st);
		if ((rc = ev_tracker_prepare(t, &st, "SELECT 1 FROM issues WHERE id = ?1")))
			goto done;
		sqlite3_bind_int64(st, 1, id);
		int src = sqlite3_step(st);
		if (src == SQLITE_DONE)
			rc = ev_error_set(EV_E_NOTFOUND, "issue %lld: no such issue", (long long)id);
		else if (src != SQLITE_ROW)
			rc = ev_tracker_sqlerr(t, src, "reading issue %lld", (long long)id);
	}
done:
	sqlite3_finalize(st);
	return rc;
}

int ev_issue_find_external(ev_tracker *t, const char *external_id, int64_t *out_id)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st, "SELECT id FROM issues WHERE external_id = ?1");
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, external_id, -1, SQLITE_STATIC);
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		*out_id = sqlite3_column_int64(st, 0);
	else if (src == SQLITE_DONE)
		rc = ev_error_set(EV_E_NOTFOUND, "no issue with external id \"%.200s\"", external_id);
	else
		rc = ev_tracker_sqlerr(t, src, "looking up an external id");
	sqlite3_finalize(st);
	return rc;
}

int ev_intake_cluster_issues(ev_tracker *t, int64_t cluster, int64_t **out, size_t *n)
{
	sqlite3_stmt *st = NULL;
	int64_t *v = NULL;
	size_t cnt = 0, cap = 0;
	*out = NULL;
	*n = 0;
	int rc = ev_tracker_prepare(t, &st, "SELECT id FROM issues WHERE cluster_id = ?1 ORDER BY id");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, cluster);
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		if (EV_GROW(v, cap, cnt + 1)) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		v[cnt++] = sqlite3_column_int64(st, 0);
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading cluster %lld", (long long)cluster);
		goto done;
	}
	*out = v;
	*n = cnt;
	v = NULL;
done:
	free(v);
	sqlite3_finalize(st);
	return rc;
}

/* ---- list and show ------------------------------------------------------------------ */

/* Replaces the "labels" text column (labels joined by newlines) by a list. */
static int labels_to_list(cJSON *o)
{
	cJSON *lab = cJSON_DetachItemFromObjectCaseSensitive(o, "labels");
	cJSON *list = cJSON_CreateArray();
	if (!list) {
		cJSON_Delete(lab);
		return EV_E_NOMEM;
	}
	if (cJSON_IsString(lab)) {
		const char *s = lab->valuestring;
		while (*s) {
			const char *e = strchr(s, '\n');
			size_t n = e ? (size_t)(e - s) : strlen(s);
			char *one = ev_strndup(s, n);
			cJSON_AddItemToArray(list, cJSON_CreateString(one ? one : ""));
			free(one);
			s += n + (e ? 1 : 0);
		}
	}
	cJSON_Delete(lab);
	cJSON_AddItemToObject(o, "labels", list);
	return 0;
}

int ev_issues_list_json(ev_tracker *t, const char *status, const char *label, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "issues");
	int rc = 0;
	*out_json = NULL;
	if (!arr) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = ev_tracker_prepare(t, &st,
	                            "SELECT i.id, i.title, i.status, i.source, i.modality, i.model, i.author, "
	                            "i.external_id, i.cluster_id, "
	                            "(SELECT group_concat(label, char(10)) FROM (SELECT label FROM labels l WHERE "
	                            "l.issue_id = i.id ORDER BY label)) AS labels, "
	                            "(SELECT count(*) FROM issue_attachments a WHERE a.issue_id = i.id) AS "
	                            "n_attachments, i.created, i.closed FROM issues i "
	                            "WHERE (?1 IS NULL OR i.status = ?1) AND (?2 IS NULL OR EXISTS (SELECT 1 FROM "
	                            "labels l WHERE l.issue_id = i.id AND l.label = ?2)) ORDER BY i.id DESC")))
		goto done;
	sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
	int src;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *o = ev_intake_row_json(st);
		if (!o || labels_to_list(o)) {
			cJSON_Delete(o);
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		cJSON_AddItemToArray(arr, o);
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "listing issues");
		goto done;
	}
	rc = ev_intake_emit(out_json, root);
	root = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(root);
	return rc;
}

int ev_issue_show_json(ev_tracker *t, int64_t id, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *o = NULL;
	char *dir = NULL;
	int rc;
	*out_json = NULL;
	if ((rc = ev_tracker_flush(t)) || (rc = ev_attach_dir(&dir, t)) ||
	    (rc = ev_tracker_prepare(t, &st,
	                            "SELECT i.id, i.title, i.body, i.model, i.prompt, i.output, i.expected, i.source, "
	                            "i.external_id, i.author, i.status, i.modality, i.cluster_id, "
	                            "(SELECT group_concat(label, char(10)) FROM (SELECT label FROM labels l WHERE "
	                            "l.issue_id = i.id ORDER BY label)) AS labels, i.created, i.closed "
	                            "FROM issues i WHERE i.id = ?1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int src = sqlite3_step(st);
	if (src == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "issue %lld: no such issue", (long long)id);
		goto done;
	}
	if (src != SQLITE_ROW) {
		rc = ev_tracker_sqlerr(t, src, "reading issue %lld", (long long)id);
		goto done;
	}
	if (!(o = ev_intake_row_json(st)) || labels_to_list(o)) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	sqlite3_finalize(st);
	cJSON *atts = cJSON_AddArrayToObject(o, "attachments");
	if ((rc = ev_tracker_prepare(t, &st,
	                            "SELECT a.sha256, a.mime, a.size, coalesce(ia.name, a.original_name) AS name "
	                            "FROM issue_attachments ia JOIN attachments a ON a.sha256 = ia.sha256 "
	                            "WHERE ia.issue_id = ?1 ORDER BY ia.rowid")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *a = ev_intake_row_json(st);
		char *path = NULL;
		if (!a) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if ((rc = ev_attach_path(&path, dir, (const char *)sqlite3_column_text(st, 0)))) {
			cJSON_Delete(a);
			goto done;
		}
		cJSON_AddStringToObject(a, "path", path);
		free(path);
		cJSON_AddItemToArray(atts, a);
	}
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading attachments");
		goto done;
	}
	sqlite3_finalize(st);
	cJSON *links = cJSON_AddArrayToObject(o, "links");
	if ((rc = ev_tracker_prepare(t, &st, "SELECT url FROM links WHERE issue_id = ?1 ORDER BY rowid")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(links, cJSON_CreateString((const char *)sqlite3_column_text(st, 0)));
	if (src != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, src, "reading links");
		goto done;
	}
	rc = ev_intake_emit(out_json, o);
	o = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(o);
	free(dir);
	return rc;
}

int ev_tracker_rows_json(ev_tracker *t, const char *table, char **out_json)
{
	static const char *const allowed[] = {"regressions", "issues", "proposals", "clusters", NULL};
	sqlite3_stmt *st = NULL;
	cJSON *arr = NULL;
	char *sql = NULL;
	int rc = 0;
	*out_json = NULL;
	bool ok = false;
	for (const char *const *p = allowed; table && *p; p++)
		ok = ok || !strcmp(*p, table);
	if (!ok)
		return ev_error_set(EV_E_INVALID, "rows: \"%.40s\" is not a table that can be listed", table ? table : "");
	if ((rc = ev_tracker_flush(t)))
		return rc;
	if (!(arr = cJSON_CreateArray()))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (ev_intake_table_exists(t, table)) {
		/* `table` is one of the fixed names above. */
		if (!(sql = ev_asprintf("SELECT * FROM %s ORDER BY id DESC", table))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if ((rc = ev_tracker_prepare(t, &st, sql)))
			goto done;
		int r;
		while ((r = sqlite3_step(st)) == SQLITE_ROW) {
			cJSON *o = ev_intake_row_json(st);
			if (!o) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				goto done;
			}
			cJSON_AddItemToArray(arr, o);
		}
		if (r != SQLITE_DONE) {
			rc = ev_tracker_sqlerr(t, r, "reading %s", table);
			goto done;
		}
	}
	rc = ev_intake_emit(out_json, arr);
	arr = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(arr);
	free(sql);
	return rc;
}
