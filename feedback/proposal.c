/*
 * feedback/proposal.c: training proposals: a weakness confirmed by evidence
 * (issues, clusters, regressions, samples) that people join and move through
 * proposed -> investigating -> experimenting -> accepted -> shipped (or
 * dropped). Showing one tells whether later runs scored its repro cases (the
 * issue-N samples of the community suite) better.
 */
#include "feedback/issues_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const statuses[] = {"proposed", "investigating", "experimenting", "accepted", "shipped", "dropped",
                                       NULL};

bool ev_proposal_status_valid(const char *status)
{
	for (const char *const *p = statuses; status && *p; p++)
		if (!strcmp(*p, status))
			return true;
	return false;
}

static int check_line(const char *s, size_t max, const char *field)
{
	if (!s || !*s)
		return ev_error_set(EV_E_INVALID, "%s: required", field);
	size_t n = strlen(s);
	if (n > max)
		return ev_error_set(EV_E_LIMIT, "%s: %zu bytes, over the %zu-byte limit", field, n, max);
	if (!ev_utf8_valid(s, n))
		return ev_error_set(EV_E_INVALID, "%s: not valid UTF-8", field);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return ev_error_set(EV_E_INVALID, "%s: control character", field);
	return 0;
}

/* 0 when `sql` (one ?1 id parameter) returns a row; *text (may be NULL) gets
 * its first column, malloc'd. */
static int row_exists(ev_tracker *t, const char *sql, int64_t id, char **text, const char *what)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st, sql);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	int r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		if (text && !(*text = ev_strdup(sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0)
		                                                               : "")))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
	} else if (r == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "%s %lld: no such %s", what, (long long)id, what);
	} else {
		rc = ev_tracker_sqlerr(t, r, "looking up %s %lld", what, (long long)id);
	}
	sqlite3_finalize(st);
	return rc;
}

static int parse_ref_id(const char *ref, int64_t *id, const char *kind)
{
	if (!ref || !ev_parse_i64(ref, id) || *id <= 0)
		return ev_error_set(EV_E_INVALID, "evidence: %s reference \"%.40s\" is not an id", kind, ref ? ref : "");
	return 0;
}

static int insert_evidence(ev_tracker *t, int64_t id, const char *kind, const char *ref, const char *note)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st,
	                           "INSERT OR IGNORE INTO proposal_evidence (proposal_id, kind, ref, note) VALUES (?1, "
	                           "?2, ?3, ?4)");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ref, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, note, -1, SQLITE_STATIC);
	rc = ev_tracker_step_done(t, st, "adding evidence");
	sqlite3_finalize(st);
	return rc;
}

/* Inside the caller's transaction. */
static int add_evidence_tx(ev_tracker *t, int64_t id, const char *kind, const char *ref, const char *note)
{
	int64_t rid = 0;
	char buf[64];
	int rc;
	if ((rc = row_exists(t, "SELECT id FROM proposals WHERE id = ?1", id, NULL, "proposal")))
		return rc;
	if (note && (rc = check_line(note, 4096, "note")))
		return rc;
	if (!strcmp(kind, "issue")) {
		if ((rc = parse_ref_id(ref, &rid, kind)) ||
		    (rc = row_exists(t, "SELECT id FROM issues WHERE id = ?1", rid, NULL, "issue")))
			return rc;
		snprintf(buf, sizeof buf, "%lld", (long long)rid);
		return insert_evidence(t, id, kind, buf, note);
	}
	if (!strcmp(kind, "cluster")) {
		int64_t *issues = NULL;
		size_t n = 0;
		if ((rc = parse_ref_id(ref, &rid, kind)) ||
		    (rc = row_exists(t, "SELECT id FROM clusters WHERE id = ?1", rid, NULL, "cluster")))
			return rc;
		snprintf(buf, sizeof buf, "%lld", (long long)rid);
		if ((rc = insert_evidence(t, id, kind, buf, note)) || (rc = ev_intake_cluster_issues(t, rid, &issues, &n)))
			return rc;
		char nb[64], ib[32];
		snprintf(nb, sizeof nb, "cluster %lld", (long long)rid);
		for (size_t i = 0; i < n && !rc; i++) {
			snprintf(ib, sizeof ib, "%lld", (long long)issues[i]);
			rc = insert_evidence(t, id, "issue", ib, nb);
		}
		free(issues);
		return rc;
	}
	if (!strcmp(kind, "regression")) {
		if ((rc = parse_ref_id(ref, &rid, kind)))
			return rc;
		if (!ev_intake_table_exists(t, "regressions"))
			return ev_error_set(EV_E_NOTFOUND, "regression %lld: this tracker has no regressions", (long long)rid);
		char *suite = NULL;
		if ((rc = row_exists(t, "SELECT suite FROM regressions WHERE id = ?1", rid, &suite, "regression")))
			return rc;
		snprintf(buf, sizeof buf, "%lld", (long long)rid);
		rc = insert_evidence(t, id, kind, buf, note);
		sqlite3_stmt *st = NULL;
		if (!rc && ev_intake_table_exists(t, "regression_samples") &&
		    !(rc = ev_tracker_prepare(t, &st,
		                             "SELECT sample_id FROM regression_samples WHERE regression_id = ?1 ORDER BY "
		                             "sample_id"))) {
			sqlite3_bind_int64(st, 1, rid);
			char nb[64];
			snprintf(nb, sizeof nb, "regression %lld", (long long)rid);
			int r;
			while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
				char *sref = ev_asprintf("%s/%s", suite, (const char *)sqlite3_column_text(st, 0));
				rc = sref ? insert_evidence(t, id, "sample", sref, nb) : ev_error_set(EV_E_NOMEM, "out of memory");
				free(sref);
			}
			sqlite3_finalize(st);
		}
		free(suite);
		return rc;
	}
	if (!strcmp(kind, "sample")) {
		if ((rc = check_line(ref, 2048, "evidence: sample")))
			return rc;
		const char *slash = strchr(ref, '/');
		if (!slash || slash == ref || !slash[1])
			return ev_error_set(EV_E_INVALID, "evidence: sample \"%.100s\": expected SUITE/SAMPLE_ID", ref);
		return insert_evidence(t, id, kind, ref, note);
	}
	return ev_error_set(EV_E_INVALID, "evidence: kind \"%.40s\" is not issue, cluster, regression or sample",
	                    kind ? kind : "");
}

static int touch(ev_tracker *t, int64_t id)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st, "UPDATE proposals SET updated = ?2 WHERE id = ?1");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_double(st, 2, ev_wall_time());
	rc = ev_tracker_step_done(t, st, "updating a proposal");
	sqlite3_finalize(st);
	return rc;
}

int ev_proposal_add_evidence(ev_tracker *t, int64_t id, const char *kind, const char *ref, const char *note)
{
	int rc = ev_intake_begin(t);
	if (rc)
		return rc;
	if ((rc = add_evidence_tx(t, id, kind ? kind : "", ref, note)) || (rc = touch(t, id)) ||
	    (rc = ev_intake_commit(t)))
		ev_intake_rollback(t);
	return rc;
}

int ev_proposal_new(ev_tracker *t, const char *title, const char *body, int64_t from_cluster,
                    int64_t from_regression, int64_t *out_id)
{
	char *auto_title = NULL, *what = NULL;
	sqlite3_stmt *st = NULL;
	int rc;
	*out_id = 0;
	if (body && strlen(body) > ((size_t)1 << 20))
		return ev_error_set(EV_E_LIMIT, "body: over the 1 MiB limit");
	if (body && !ev_utf8_valid(body, strlen(body)))
		return ev_error_set(EV_E_INVALID, "body: not valid UTF-8");
	if ((rc = ev_intake_begin(t)))
		return rc;
	if (!title && from_cluster) {
		if ((rc = row_exists(t, "SELECT title FROM issues WHERE cluster_id = ?1 ORDER BY id LIMIT 1", from_cluster,
		                     &what, "cluster")))
			goto done;
		auto_title = ev_asprintf("Cluster %lld: %.200s", (long long)from_cluster, what);
	} else if (!title && from_regression) {
		if (!ev_intake_table_exists(t, "regressions")) {
			rc = ev_error_set(EV_E_NOTFOUND, "regression %lld: this tracker has no regressions",
			                  (long long)from_regression);
			goto done;
		}
		if ((rc = row_exists(t,
		                     "SELECT suite || ' (' || coalesce(baseline_model, '?') || ' -> ' || "
		                     "coalesce(candidate_model, '?') || ')' FROM regressions WHERE id = ?1",
		                     from_regression, &what, "regression")))
			goto done;
		auto_title = ev_asprintf("Regression %lld: %.200s", (long long)from_regression, what);
	}
	if (!title)
		title = auto_title;
	if ((rc = check_line(title, 1000, "title")))
		goto done;
	double now = ev_wall_time();
	if ((rc = ev_tracker_prepare(t, &st,
	                            "INSERT INTO proposals (title, body, status, created, updated) VALUES (?1, ?2, "
	                            "'proposed', ?3, ?3)")))
		goto done;
	sqlite3_bind_text(st, 1, title, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, body ? body : "", -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, now);
	if ((rc = ev_tracker_step_done(t, st, "inserting a proposal")))
		goto done;
	int64_t id = sqlite3_last_insert_rowid(t->db);
	char ref[32];
	if (from_cluster) {
		snprintf(ref, sizeof ref, "%lld", (long long)from_cluster);
		if ((rc = add_evidence_tx(t, id, "cluster", ref, NULL)))
			goto done;
	}
	if (from_regression) {
		snprintf(ref, sizeof ref, "%lld", (long long)from_regression);
		if ((rc = add_evidence_tx(t, id, "regression", ref, NULL)))
			goto done;
	}
	if ((rc = ev_intake_commit(t)))
		goto done;
	*out_id = id;
done:
	if (rc)
		ev_intake_rollback(t);
	sqlite3_finalize(st);
	free(auto_title);
	free(what);
	return rc;
}

int ev_proposal_join(ev_tracker *t, int64_t id, const char *who)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if ((rc = check_line(who, 128, "who")) || (rc = ev_intake_begin(t)))
		return rc;
	if ((rc = row_exists(t, "SELECT id FROM proposals WHERE id = ?1", id, NULL, "proposal")) ||
	    (rc = ev_tracker_prepare(t, &st,
	                            "INSERT OR IGNORE INTO proposal_members (proposal_id, who, joined) VALUES (?1, ?2, "
	                            "?3)")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, who, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, ev_wall_time());
	if ((rc = ev_tracker_step_done(t, st, "joining a proposal")) || (rc = touch(t, id)))
		goto done;
	rc = ev_intake_commit(t);
done:
	if (rc)
		ev_intake_rollback(t);
	sqlite3_finalize(st);
	return rc;
}

int ev_proposal_set_status(ev_tracker *t, int64_t id, const char *status)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if (!ev_proposal_status_valid(status))
		return ev_error_set(EV_E_INVALID,
		                    "status \"%.40s\": expected proposed, investigating, experimenting, accepted, shipped "
		                    "or dropped",
		                    status ? status : "");
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = ev_tracker_prepare(t, &st, "UPDATE proposals SET status = ?2, updated = ?3 WHERE id = ?1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, status, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, ev_wall_time());
	if ((rc = ev_tracker_step_done(t, st, "setting a proposal's status")))
		goto done;
	if (sqlite3_changes(t->db) == 0)
		rc = ev_error_set(EV_E_NOTFOUND, "proposal %lld: no such proposal", (long long)id);
done:
	sqlite3_finalize(st);
	return rc;
}

/* ---- list and show ------------------------------------------------------------------ */

/* Appends every row of `sql` (one ?1 id parameter, or none when id <= 0) to `arr`. */
static int rows_into(ev_tracker *t, cJSON *arr, const char *sql, int64_t id, const char *what)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st, sql);
	if (rc)
		return rc;
	if (id > 0)
		sqlite3_bind_int64(st, 1, id);
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *o = ev_intake_row_json(st);
		if (!o) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		cJSON_AddItemToArray(arr, o);
	}
	if (!rc && r != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, r, "%s", what);
	sqlite3_finalize(st);
	return rc;
}

int ev_proposals_list_json(ev_tracker *t, char **out_json)
{
	cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "proposals");
	int rc;
	*out_json = NULL;
	if (!arr) {
		cJSON_Delete(o);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = rows_into(t, arr,
	                    "SELECT p.id, p.title, p.status, (SELECT count(*) FROM proposal_members m WHERE "
	                    "m.proposal_id = p.id) AS members, (SELECT count(*) FROM proposal_evidence e WHERE "
	                    "e.proposal_id = p.id) AS n_evidence, p.created, p.updated FROM proposals p ORDER BY p.id "
	                    "DESC",
	                    0, "listing proposals"))) {
		cJSON_Delete(o);
		return rc;
	}
	return ev_intake_emit(out_json, o);
}

int ev_intake_proposal_issues(ev_tracker *t, int64_t id, cJSON **ids_out)
{
	sqlite3_stmt *st = NULL;
	cJSON *ids = cJSON_CreateArray();
	int rc = ids ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	*ids_out = NULL;
	if (rc || (rc = ev_tracker_prepare(t, &st,
	                                  "SELECT CAST(ref AS INTEGER) AS i FROM proposal_evidence WHERE proposal_id = ?1 "
	                                  "AND kind = 'issue' UNION SELECT id FROM issues WHERE cluster_id IN (SELECT "
	                                  "CAST(ref AS INTEGER) FROM proposal_evidence WHERE proposal_id = ?1 AND kind = "
	                                  "'cluster') ORDER BY 1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW)
		cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)sqlite3_column_int64(st, 0)));
	if (r != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, r, "reading proposal %lld's issues", (long long)id);
		goto done;
	}
	*ids_out = ids;
	ids = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(ids);
	return rc;
}

/* "repro": the community-suite runs that scored the linked issue-N samples. */
static int repro_section(ev_tracker *t, cJSON *o, const cJSON *ids)
{
	sqlite3_stmt *st = NULL;
	cJSON *rep = cJSON_AddObjectToObject(o, "repro"), *samples = cJSON_AddArrayToObject(rep, "samples");
	cJSON *runs = cJSON_AddArrayToObject(rep, "runs"), *models = cJSON_AddArrayToObject(rep, "models");
	char *ids_json = NULL;
	int rc = 0;
	if (!models)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const cJSON *x;
	cJSON_ArrayForEach(x, ids)
	{
		char sid[48];
		snprintf(sid, sizeof sid, "issue-%lld", (long long)x->valuedouble);
		cJSON_AddItemToArray(samples, cJSON_CreateString(sid));
	}
	if (!(ids_json = ev_json_print(samples))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	/* Per run: the samples it scored (errors left out, as in the scores),
	 * each passing when its mean over epochs is 1. */
	if ((rc = ev_tracker_prepare(t, &st,
	                            "SELECT run_id, model, created, count(*), sum(s >= 1.0) FROM (SELECT res.run_id, "
	                            "m.name AS model, r.created, res.sample_id, avg(res.score) AS s FROM results res "
	                            "JOIN runs r ON r.id = res.run_id JOIN models m ON m.id = r.model_id WHERE "
	                            "res.suite = 'community' AND res.sample_id IN (SELECT value FROM json_each(?1)) "
	                            "AND res.reason NOT IN ('backend_error', 'timeout') GROUP BY res.run_id, "
	                            "res.sample_id) GROUP BY run_id ORDER BY created, run_id")))
		goto done;
	sqlite3_bind_text(st, 1, ids_json, -1, SQLITE_STATIC);
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *run = cJSON_CreateObject();
		const char *model = (const char *)sqlite3_column_text(st, 1);
		long n = sqlite3_column_int(st, 3), passed = sqlite3_column_int(st, 4);
		double rate = n ? (double)passed / (double)n : 0;
		char iso[32];
		ev_iso8601(iso, sqlite3_column_double(st, 2));
		cJSON_AddNumberToObject(run, "run", (double)sqlite3_column_int64(st, 0));
		cJSON_AddStringToObject(run, "model", model);
		cJSON_AddStringToObject(run, "created", iso);
		cJSON_AddNumberToObject(run, "n", (double)n);
		cJSON_AddNumberToObject(run, "passed", (double)passed);
		cJSON_AddNumberToObject(run, "pass_rate", rate);
		cJSON_AddItemToArray(runs, run);
		/* per model: first and last run (runs come oldest first) */
		cJSON *m = NULL, *it;
		cJSON_ArrayForEach(it, models)
		if (!strcmp(ev_json_str(it, "model", ""), model))
			m = it;
		if (!m) {
			m = cJSON_CreateObject();
			cJSON_AddStringToObject(m, "model", model);
			cJSON_AddNumberToObject(m, "runs", 0);
			cJSON_AddNumberToObject(m, "first_pass_rate", rate);
			cJSON_AddNumberToObject(m, "last_pass_rate", rate);
			cJSON_AddItemToArray(models, m);
		}
		cJSON *cnt = cJSON_GetObjectItemCaseSensitive(m, "runs");
		cJSON_SetNumberValue(cnt, cnt->valuedouble + 1);
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "last_pass_rate"), rate);
	}
	if (r != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, r, "reading community runs");
		goto done;
	}
	cJSON *m;
	cJSON_ArrayForEach(m, models)
	cJSON_AddBoolToObject(m, "improved", ev_json_num(m, "last_pass_rate", 0) > ev_json_num(m, "first_pass_rate", 0));
	/* Across models: did the latest run do better than the first? */
	int nr = cJSON_GetArraySize(runs);
	if (nr > 0) {
		double first = ev_json_num(cJSON_GetArrayItem(runs, 0), "pass_rate", 0);
		double last = ev_json_num(cJSON_GetArrayItem(runs, nr - 1), "pass_rate", 0);
		cJSON_AddNumberToObject(rep, "first_pass_rate", first);
		cJSON_AddNumberToObject(rep, "last_pass_rate", last);
		cJSON_AddBoolToObject(rep, "improved", last > first);
	}
done:
	sqlite3_finalize(st);
	free(ids_json);
	return rc;
}

int ev_proposal_show_json(ev_tracker *t, int64_t id, char **out_json)
{
	sqlite3_stmt *st = NULL;
	cJSON *o = NULL, *ids = NULL;
	int rc;
	*out_json = NULL;
	if ((rc = ev_tracker_flush(t)) ||
	    (rc = ev_tracker_prepare(t, &st, "SELECT id, title, body, status, created, updated FROM proposals WHERE id = ?1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		rc = r == SQLITE_DONE ? ev_error_set(EV_E_NOTFOUND, "proposal %lld: no such proposal", (long long)id)
		                      : ev_tracker_sqlerr(t, r, "reading proposal %lld", (long long)id);
		goto done;
	}
	if (!(o = ev_intake_row_json(st))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	cJSON *members = cJSON_AddArrayToObject(o, "members"), *ev = cJSON_AddArrayToObject(o, "evidence");
	bool have_reg = ev_intake_table_exists(t, "regressions");
	if ((rc = rows_into(t, members,
	                    "SELECT who, joined FROM proposal_members WHERE proposal_id = ?1 ORDER BY joined, who", id,
	                    "reading members")) ||
	    (rc = rows_into(t, ev,
	                    have_reg
	                        ? "SELECT e.kind, e.ref, e.note, CASE e.kind WHEN 'issue' THEN (SELECT title FROM issues "
	                          "WHERE id = CAST(e.ref AS INTEGER)) WHEN 'regression' THEN (SELECT suite FROM "
	                          "regressions WHERE id = CAST(e.ref AS INTEGER)) WHEN 'cluster' THEN (SELECT 'cluster of "
	                          "' || size FROM clusters WHERE id = CAST(e.ref AS INTEGER)) END AS title, CASE e.kind "
	                          "WHEN 'issue' THEN (SELECT status FROM issues WHERE id = CAST(e.ref AS INTEGER)) WHEN "
	                          "'regression' THEN (SELECT status FROM regressions WHERE id = CAST(e.ref AS INTEGER)) "
	                          "END AS status FROM proposal_evidence e WHERE e.proposal_id = ?1 ORDER BY e.kind, "
	                          "e.rowid"
	                        : "SELECT e.kind, e.ref, e.note, CASE e.kind WHEN 'issue' THEN (SELECT title FROM issues "
	                          "WHERE id = CAST(e.ref AS INTEGER)) WHEN 'cluster' THEN (SELECT 'cluster of ' || size "
	                          "FROM clusters WHERE id = CAST(e.ref AS INTEGER)) END AS title, CASE e.kind WHEN "
	                          "'issue' THEN (SELECT status FROM issues WHERE id = CAST(e.ref AS INTEGER)) END AS "
	                          "status FROM proposal_evidence e WHERE e.proposal_id = ?1 ORDER BY e.kind, e.rowid",
	                    id, "reading evidence")) ||
	    (rc = ev_intake_proposal_issues(t, id, &ids)) || (rc = repro_section(t, o, ids)))
		goto done;
	rc = ev_intake_emit(out_json, o);
	o = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(o);
	cJSON_Delete(ids);
	return rc;
}
