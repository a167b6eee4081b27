/*
 * feedback/proposal_export.c: a proposal's failing cases as JSONL training-data
 * candidates: each linked issue (prompt, attachments, the expected answer as
 * reference, the model's reported output) and each regression sample (the
 * candidate run's request messages and answer).
 */
#include "feedback/issues_int.h"

#include <stdlib.h>
#include <string.h>

#define EXPORT_MAX ((size_t)1 << 31)

static int add_line(ev_buf *b, cJSON *o)
{
	char *s = o ? ev_json_print(o) : NULL;
	cJSON_Delete(o);
	if (!s)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_buf_puts(b, s);
	if (!rc)
		rc = ev_buf_putc(b, '\n');
	free(s);
	return rc;
}

static int export_issue(ev_tracker *t, ev_buf *b, int64_t issue, const char *dir)
{
	sqlite3_stmt *st = NULL;
	cJSON *o = NULL;
	int rc = ev_tracker_prepare(t, &st,
	                           "SELECT title, body, prompt, expected, output, model FROM issues WHERE id = ?1");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, issue);
	int r = sqlite3_step(st);
	if (r != SQLITE_ROW) { /* evidence of an issue since deleted: nothing to export */
		rc = r == SQLITE_DONE ? 0 : ev_tracker_sqlerr(t, r, "reading issue %lld", (long long)issue);
		goto done;
	}
	const char *title = (const char *)sqlite3_column_text(st, 0);
	const char *body = (const char *)sqlite3_column_text(st, 1);
	const char *prompt = (const char *)sqlite3_column_text(st, 2);
	o = cJSON_CreateObject();
	char sid[48];
	snprintf(sid, sizeof sid, "issue-%lld", (long long)issue);
	cJSON_AddStringToObject(o, "id", sid);
	if (prompt && *prompt) {
		cJSON_AddStringToObject(o, "prompt", prompt);
	} else {
		char *p = body && *body ? ev_asprintf("%s\n\n%s", title, body) : ev_strdup(title);
		cJSON_AddStringToObject(o, "prompt", p ? p : "");
		free(p);
	}
	for (int c = 3; c <= 5; c++) {
		static const char *const keys[] = {"reference", "model_output", "model"};
		const char *v = (const char *)sqlite3_column_text(st, c);
		if (v)
			cJSON_AddStringToObject(o, keys[c - 3], v);
		else
			cJSON_AddNullToObject(o, keys[c - 3]);
	}
	cJSON_AddStringToObject(o, "title", title);
	cJSON_AddStringToObject(o, "source", "issue");
	sqlite3_finalize(st);
	cJSON *atts = cJSON_AddArrayToObject(o, "attachments");
	if ((rc = ev_tracker_prepare(t, &st,
	                            "SELECT a.sha256, a.mime FROM issue_attachments ia JOIN attachments a ON "
	                            "a.sha256 = ia.sha256 WHERE ia.issue_id = ?1 ORDER BY ia.rowid")))
		goto done;
	sqlite3_bind_int64(st, 1, issue);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *a = cJSON_CreateObject();
		char *path = NULL;
		const char *sha = (const char *)sqlite3_column_text(st, 0);
		if ((rc = ev_attach_path(&path, dir, sha))) {
			cJSON_Delete(a);
			goto done;
		}
		cJSON_AddStringToObject(a, "sha256", sha);
		cJSON_AddStringToObject(a, "mime", (const char *)sqlite3_column_text(st, 1));
		cJSON_AddStringToObject(a, "path", path);
		free(path);
		cJSON_AddItemToArray(atts, a);
	}
	if (r != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, r, "reading attachments");
		goto done;
	}
	rc = add_line(b, o);
	o = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(o);
	return rc;
}

/* One failing result of (suite, sample): from `run` when > 0, else the latest
 * run that scored it below 1. */
static int export_sample(ev_tracker *t, ev_buf *b, const char *suite, const char *sample, int64_t run)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st,
	                           "SELECT res.request_json, res.response, res.extracted, res.reason, res.detail, "
	                           "m.name, res.run_id FROM results res JOIN runs r ON r.id = res.run_id JOIN models m "
	                           "ON m.id = r.model_id WHERE res.suite = ?1 AND res.sample_id = ?2 AND (?3 <= 0 OR "
	                           "res.run_id = ?3) ORDER BY (res.score < 1) DESC, r.created DESC, res.epoch LIMIT 1");
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, suite, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, sample, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, run);
	int r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		rc = r == SQLITE_DONE ? 0 : ev_tracker_sqlerr(t, r, "reading %s/%s", suite, sample);
		sqlite3_finalize(st);
		return rc;
	}
	cJSON *o = cJSON_CreateObject();
	char *id = ev_asprintf("%s/%s", suite, sample);
	cJSON_AddStringToObject(o, "id", id ? id : sample);
	free(id);
	const char *req = (const char *)sqlite3_column_text(st, 0);
	cJSON *rj = req ? cJSON_Parse(req) : NULL;
	cJSON *msgs = rj ? cJSON_DetachItemFromObjectCaseSensitive(rj, "messages") : NULL;
	cJSON_AddItemToObject(o, "messages", msgs ? msgs : cJSON_CreateNull());
	cJSON_Delete(rj);
	cJSON_AddArrayToObject(o, "attachments");
	cJSON_AddNullToObject(o, "reference");
	const char *resp = (const char *)sqlite3_column_text(st, 1);
	if (resp)
		cJSON_AddStringToObject(o, "model_output", resp);
	else
		cJSON_AddNullToObject(o, "model_output");
	cJSON_AddStringToObject(o, "model", (const char *)sqlite3_column_text(st, 5));
	cJSON_AddNumberToObject(o, "run", (double)sqlite3_column_int64(st, 6));
	cJSON_AddStringToObject(o, "reason", sqlite3_column_text(st, 3) ? (const char *)sqlite3_column_text(st, 3) : "");
	if (sqlite3_column_text(st, 4))
		cJSON_AddStringToObject(o, "detail", (const char *)sqlite3_column_text(st, 4));
	cJSON_AddStringToObject(o, "source", "regression");
	sqlite3_finalize(st);
	return add_line(b, o);
}

int ev_proposal_export(ev_tracker *t, int64_t id, const char *out_path, size_t *n_out)
{
	sqlite3_stmt *st = NULL;
	cJSON *ids = NULL;
	char *dir = NULL;
	ev_buf b = EV_BUF_INIT(EXPORT_MAX);
	size_t n = 0;
	int rc;
	if (n_out)
		*n_out = 0;
	if ((rc = ev_tracker_flush(t)) || (rc = ev_attach_dir(&dir, t)))
		goto done;
	if ((rc = ev_tracker_prepare(t, &st, "SELECT 1 FROM proposals WHERE id = ?1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int src = sqlite3_step(st);
	if (src != SQLITE_ROW) {
		/* A damaged page is not an absent proposal. */
		rc = src == SQLITE_DONE ? ev_error_set(EV_E_NOTFOUND, "proposal %lld: no such proposal", (long long)id)
		                        : ev_tracker_sqlerr(t, src, "reading proposal %lld", (long long)id);
		goto done;
	}
	sqlite3_finalize(st);
	st = NULL;
	if ((rc = ev_intake_proposal_issues(t, id, &ids)))
		goto done;
	const cJSON *x;
	cJSON_ArrayForEach(x, ids)
	{
		size_t before = b.len;
		if ((rc = export_issue(t, &b, (int64_t)x->valuedouble, dir)))
			goto done;
		n += b.len > before;
	}
	/* Sample evidence: from a regression, its candidate run; else the
	 * latest failing result. */
	bool have_reg = ev_intake_table_exists(t, "regressions");
	if ((rc = ev_tracker_prepare(t, &st,
	                            have_reg ? "SELECT e.ref, coalesce((SELECT g.candidate_run FROM regressions g WHERE "
	                                       "e.note = 'regression ' || g.id), 0) FROM proposal_evidence e WHERE "
	                                       "e.proposal_id = ?1 AND e.kind = 'sample' ORDER BY e.rowid"
	                                     : "SELECT e.ref, 0 FROM proposal_evidence e WHERE e.proposal_id = ?1 AND "
	                                       "e.kind = 'sample' ORDER BY e.rowid")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *ref = (const char *)sqlite3_column_text(st, 0);
		const char *slash = strchr(ref, '/');
		if (!slash)
			continue;
		char *suite = ev_strndup(ref, (size_t)(slash - ref));
		size_t before = b.len;
		rc = suite ? export_sample(t, &b, suite, slash + 1, sqlite3_column_int64(st, 1))
		           : ev_error_set(EV_E_NOMEM, "out of memory");
		free(suite);
		if (rc)
			goto done;
		n += b.len > before;
	}
	if (r != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, r, "reading sample evidence");
		goto done;
	}
	if ((rc = ev_file_write(out_path, b.data ? b.data : "", b.len)))
		goto done;
	if (n_out)
		*n_out = n;
done:
	sqlite3_finalize(st);
	cJSON_Delete(ids);
	ev_buf_free(&b);
	free(dir);
	return rc;
}
