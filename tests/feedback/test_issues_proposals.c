/* feedback: training proposals: created from a cluster (its issues become
 * evidence) or a regression (its broken samples), joined, moved through the
 * statuses; shown with whether later runs scored the linked issue-N repro
 * samples of the community suite better; exported as JSONL training-data
 * candidates. Plus the GitHub import and the repro case it feeds. */
#include "tracker_fixture.h"

#include <stdlib.h>
#include <string.h>

static const char PNG[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDRtiny";

static int64_t add(ev_tracker *t, const char *title, const char *body, const char *expected, bool png)
{
	ev_issue_attachment a = {"x.png", NULL, PNG, sizeof PNG - 1};
	ev_issue_info info = {0};
	info.title = title;
	info.body = body;
	info.expected = expected;
	info.output = "the wrong answer";
	info.model = "ckpt-1";
	if (png) {
		info.attachments = &a;
		info.n_attachments = 1;
	}
	int64_t id = 0;
	if (ev_issue_add(t, &info, &id) != 0)
		fail_msg("add: %s", ev_error_msg());
	return id;
}

static void proposal_from_cluster_tracks_repro_runs_and_exports(void **state)
{
	(void)state;
	char *db = tf_db_path("proposals");
	ev_tracker *t = tf_open(db);
	int64_t i1 = add(t, "Chart values misread", "the model reads the bar chart values wrong every single time I try it",
	                 "42", true);
	int64_t i2 = add(t, "Chart values misread again",
	                 "the model reads the bar chart values wrong every single time I try it today", "42", false);
	int64_t i3 = add(t, "Unrelated", "the tokenizer splits emoji strangely in long outputs", NULL, false);
	ev_triage_options o = EV_TRIAGE_OPTIONS_INIT;
	char *json = NULL;
	assert_int_equal(ev_triage_run(t, &o, &json), 0);
	free(json);
	long cluster = tf_query_long(db, "SELECT cluster_id FROM issues WHERE id = 1");
	assert_true(cluster > 0);
	assert_int_equal(tf_query_long(db, "SELECT cluster_id FROM issues WHERE id = 2"), cluster);

	int64_t p = 0;
	assert_int_equal(ev_proposal_new(t, NULL, "fix chart reading", cluster, 0, &p), 0);
	char *title = tf_query_text(db, "SELECT title FROM proposals");
	assert_non_null(strstr(title, "Chart values misread"));
	free(title);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM proposal_evidence WHERE kind = 'issue'"), 2);
	assert_int_equal(ev_proposal_join(t, p, "alice"), 0);
	assert_int_equal(ev_proposal_join(t, p, "bob"), 0);
	assert_int_equal(ev_proposal_join(t, p, "alice"), 0);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM proposal_members"), 2);
	assert_int_equal(ev_proposal_join(t, 99, "carol"), EV_E_NOTFOUND);
	assert_int_equal(ev_proposal_set_status(t, p, "accepted"), 0);
	assert_int_equal(ev_proposal_set_status(t, p, "done"), EV_E_INVALID);
	assert_int_equal(ev_proposal_set_status(t, 99, "shipped"), EV_E_NOTFOUND);
	char ref[32];
	snprintf(ref, sizeof ref, "%lld", (long long)i3);
	assert_int_equal(ev_proposal_add_evidence(t, p, "issue", ref, "also seen"), 0);
	assert_int_equal(ev_proposal_add_evidence(t, p, "issue", "12345", NULL), EV_E_NOTFOUND);
	assert_int_equal(ev_proposal_add_evidence(t, p, "rumour", "1", NULL), EV_E_INVALID);
	assert_int_equal(ev_proposal_add_evidence(t, p, "sample", "no-slash", NULL), EV_E_INVALID);

	/* two later runs on the community suite: the first fails the repro
	 * cases, the second passes them */
	int64_t r1 = tf_run(t, "ckpt-1"), r2 = tf_run(t, "ckpt-2");
	char s1[32], s2[32];
	snprintf(s1, sizeof s1, "issue-%lld", (long long)i1);
	snprintf(s2, sizeof s2, "issue-%lld", (long long)i2);
	tf_put(t, r1, "community", s1, 0, 0.0, "wrong_answer", "41");
	tf_put(t, r1, "community", s2, 0, 1.0, "", "42");
	tf_put(t, r2, "community", s1, 0, 1.0, "", "42");
	tf_put(t, r2, "community", s2, 0, 1.0, "", "42");
	tf_put(t, r2, "community", "issue-999", 0, 0.0, "wrong_answer", "x"); /* not linked */
	tf_put(t, r2, "other", s1, 0, 0.0, "wrong_answer", "x");             /* not the community suite */
	assert_int_equal(ev_proposal_show_json(t, p, &json), 0);
	cJSON *j = cJSON_Parse(json);
	assert_string_equal(ev_json_str(j, "status", ""), "accepted");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "members")), 2);
	cJSON *rep = cJSON_GetObjectItem(j, "repro");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "samples")), 3);
	cJSON *runs = cJSON_GetObjectItem(rep, "runs");
	assert_int_equal(cJSON_GetArraySize(runs), 2);
	assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(runs, 0), "n", 0), 2);
	assert_true(ev_json_num(cJSON_GetArrayItem(runs, 0), "pass_rate", -1) == 0.5);
	assert_true(ev_json_num(cJSON_GetArrayItem(runs, 1), "pass_rate", -1) == 1.0);
	assert_true(ev_json_bool(rep, "improved", false));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "models")), 2);
	bool found_cluster = false;
	cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "evidence"))
	found_cluster = found_cluster || !strcmp(ev_json_str(e, "kind", ""), "cluster");
	assert_true(found_cluster);
	cJSON_Delete(j);
	free(json);

	assert_int_equal(ev_proposals_list_json(t, &json), 0);
	j = cJSON_Parse(json);
	assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "proposals"), 0), "members", 0), 2);
	cJSON_Delete(j);
	free(json);

	/* export: one line per linked issue, with reference and model output */
	char *dir = tu_tmpdir("proposals-export");
	char *out = tu_path(dir, "data.jsonl");
	size_t n = 0;
	assert_int_equal(ev_proposal_export(t, p, out, &n), 0);
	assert_int_equal(n, 3);
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, out, 1 << 20), 0);
	cJSON *first = cJSON_ParseWithLength(text, strcspn(text, "\n"));
	assert_non_null(first);
	assert_string_equal(ev_json_str(first, "id", ""), s1);
	assert_string_equal(ev_json_str(first, "reference", ""), "42");
	assert_string_equal(ev_json_str(first, "model_output", ""), "the wrong answer");
	assert_non_null(strstr(ev_json_str(first, "prompt", ""), "bar chart"));
	cJSON *att = cJSON_GetArrayItem(cJSON_GetObjectItem(first, "attachments"), 0);
	char sha[EV_SHA256_HEX];
	ev_sha256_hex(sha, PNG, sizeof PNG - 1);
	assert_string_equal(ev_json_str(att, "sha256", ""), sha);
	cJSON_Delete(first);
	free(text);
	assert_int_equal(ev_proposal_export(t, 77, out, &n), EV_E_NOTFOUND);
	free(out);
	free(dir);
	ev_tracker_close(t);
	free(db);
}

static void proposal_from_regression_brings_its_samples(void **state)
{
	(void)state;
	char *db = tf_db_path("proposals-reg");
	ev_tracker *t = tf_open(db);
	int64_t base = tf_run(t, "base"), cand = tf_run(t, "cand");
	ev_result r = {0};
	r.suite = "alpha";
	r.sample_id = "q7";
	r.request_json = "{\"model\":\"cand\",\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"}]}";
	r.response = "5";
	r.score = 0;
	r.reason = "wrong_answer";
	assert_int_equal(ev_tracker_result_put(t, cand, &r), 0);
	assert_int_equal(ev_tracker_flush(t), 0);
	int64_t p = 0;
	if (tf_query_long(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'regression_samples'") != 1) {
		ev_tracker_close(t);
		free(db);
		skip();
	}
	/* The regression row as regress's schema step writes it (the columns
	 * this module reads: id, suite, candidate_run, models, status). */
	char *sql = ev_asprintf("INSERT INTO regressions (id, suite, baseline_run, candidate_run, last_run, "
	                        "baseline_model, candidate_model, delta, ci_low, ci_high, p, created, updated) VALUES (5, "
	                        "'alpha', %lld, %lld, %lld, 'base', 'cand', -0.2, -0.3, -0.1, 0.01, 1, 1); INSERT INTO "
	                        "regression_samples (regression_id, sample_id, fingerprint) VALUES (5, 'q7', "
	                        "'wrong_answer')",
	                        (long long)base, (long long)cand, (long long)cand);
	tf_exec(db, sql);
	free(sql);
	assert_int_equal(ev_proposal_new(t, NULL, NULL, 0, 5, &p), 0);
	char *title = tf_query_text(db, "SELECT title FROM proposals");
	assert_string_equal(title, "Regression 5: alpha (base -> cand)");
	free(title);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM proposal_evidence WHERE kind = 'sample' AND ref = "
	                                   "'alpha/q7'"),
	                 1);
	assert_int_equal(ev_proposal_new(t, NULL, NULL, 0, 6, &p), EV_E_NOTFOUND);
	char *dir = tu_tmpdir("proposals-reg-export");
	char *out = tu_path(dir, "d.jsonl");
	size_t n = 0;
	assert_int_equal(ev_proposal_export(t, 1, out, &n), 0);
	assert_int_equal(n, 1);
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ev_file_read(&text, &len, out, 1 << 20), 0);
	cJSON *j = cJSON_Parse(text);
	assert_string_equal(ev_json_str(j, "id", ""), "alpha/q7");
	assert_string_equal(ev_json_str(j, "model_output", ""), "5");
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(j, "messages")));
	assert_string_equal(ev_json_str(j, "source", ""), "regression");
	cJSON_Delete(j);
	free(text);
	char *rows = NULL;
	assert_int_equal(ev_tracker_rows_json(t, "regressions", &rows), 0);
	j = cJSON_Parse(rows);
	assert_int_equal(cJSON_GetArraySize(j), 1);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(j, 0), "suite", ""), "alpha");
	cJSON_Delete(j);
	free(rows);
	assert_int_equal(ev_tracker_rows_json(t, "sqlite_schema", &rows), EV_E_INVALID);
	free(out);
	free(dir);
	ev_tracker_close(t);
	free(db);
}

static void github_import_skips_prs_records_links_and_does_not_duplicate(void **state)
{
	(void)state;
	char *db = tf_db_path("gh-import");
	char *dir = tu_tmpdir("gh-import-files");
	char *f = tu_write(dir, "issues.json",
	                   "[{\"number\":1,\"html_url\":\"https://github.com/o/r/issues/1\",\"title\":\"Image misread\","
	                   "\"body\":\"see ![shot](https://user-images.example/a.png) and <img src=\\\"https://i.example/b.jpg\\\">\","
	                   "\"labels\":[{\"name\":\"bug\"},{\"name\":\"vision\"}],\"user\":{\"login\":\"octo\"},"
	                   "\"created_at\":\"2024-05-01T10:00:00Z\"},"
	                   "{\"number\":2,\"html_url\":\"https://github.com/o/r/pull/2\",\"title\":\"Fix\",\"body\":null,"
	                   "\"pull_request\":{\"url\":\"x\"}},"
	                   "{\"number\":3,\"title\":\"No url\",\"body\":null,\"labels\":[],\"user\":null}]");
	ev_tracker *t = tf_open(db);
	char *json = NULL;
	assert_int_equal(ev_issues_import_github(t, f, &json), 0);
	cJSON *j = cJSON_Parse(json);
	assert_int_equal((int)ev_json_num(j, "imported", 0), 2);
	assert_int_equal((int)ev_json_num(j, "skipped_pull_requests", 0), 1);
	cJSON_Delete(j);
	free(json);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM links"), 2);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM labels"), 2);
	char *a = tf_query_text(db, "SELECT author || ' ' || source || ' ' || external_id FROM issues WHERE id = 1");
	assert_string_equal(a, "octo github https://github.com/o/r/issues/1");
	free(a);
	assert_int_equal(tf_query_long(db, "SELECT CAST(created AS INTEGER) FROM issues WHERE id = 1"), 1714557600);
	a = tf_query_text(db, "SELECT external_id FROM issues WHERE id = 2");
	assert_string_equal(a, "github#3");
	free(a);
	/* again: nothing new */
	assert_int_equal(ev_issues_import_github(t, f, &json), 0);
	j = cJSON_Parse(json);
	assert_int_equal((int)ev_json_num(j, "imported", -1), 0);
	assert_int_equal((int)ev_json_num(j, "skipped_existing", 0), 2);
	cJSON_Delete(j);
	free(json);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issues"), 2);
	/* a bad item fails the whole file, naming it; nothing of it is stored */
	char *bad = tu_write(dir, "bad.json",
	                     "[{\"number\":10,\"title\":\"fine\"},{\"number\":11,\"title\":7}]");
	assert_int_equal(ev_issues_import_github(t, bad, &json), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "bad.json: [1]"));
	assert_non_null(strstr(ev_error_msg(), "title"));
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issues"), 2);
	char *notarr = tu_write(dir, "obj.json", "{\"message\":\"Not Found\"}");
	assert_int_equal(ev_issues_import_github(t, notarr, &json), EV_E_INVALID);
	ev_tracker_close(t);
	free(notarr);
	free(bad);
	free(f);
	free(dir);
	free(db);
}

static void repro_writes_a_loadable_community_suite(void **state)
{
	(void)state;
	char *db = tf_db_path("repro");
	ev_tracker *t = tf_open(db);
	int64_t i1 = add(t, "Chart misread", "bar chart", "42", true);
	int64_t i2 = add(t, "No expected", "free text", NULL, false);
	char *dir = tu_tmpdir("repro-suite");
	char *sd = tu_path(dir, "community");
	ev_repro_options o = EV_REPRO_OPTIONS_INIT;
	o.suite_dir = sd;
	char *json = NULL;
	assert_int_equal(ev_issue_repro(t, i1, &o, &json), 0);
	free(json);
	assert_int_equal(ev_issue_repro(t, i2, &o, &json), EV_E_INVALID); /* no checker at all */
	o.regex = "(unclosed";
	assert_int_equal(ev_issue_repro(t, i2, &o, &json), EV_E_INVALID);
	o.regex = "\\bfree\\b";
	assert_int_equal(ev_issue_repro(t, i2, &o, &json), 0);
	free(json);
	o.regex = NULL;
	o.target = "43";
	assert_int_equal(ev_issue_repro(t, i1, &o, &json), 0); /* replaces issue-1's line */
	cJSON *j = cJSON_Parse(json);
	assert_true(ev_json_bool(j, "replaced", false));
	assert_int_equal((int)ev_json_num(j, "n_samples", 0), 2);
	cJSON_Delete(j);
	free(json);
	ev_suite *s = NULL;
	assert_int_equal(ev_suite_load(&s, sd, NULL), 0);
	assert_string_equal(s->name, "community");
	assert_int_equal(s->n_samples, 2);
	assert_string_equal(s->samples[0].id, "issue-1");
	assert_string_equal(s->samples[0].targets[0], "43");
	assert_non_null(strstr(s->samples[1].checker_json, "regex"));
	/* the attachment was copied beside and is a part of the user message */
	const ev_message *m = &s->samples[0].messages[s->samples[0].n_messages - 1];
	bool image = false;
	for (size_t k = 0; k < m->n_parts; k++)
		image = image || m->parts[k].kind == EV_PART_IMAGE;
	assert_true(image);
	ev_suite_free(s);
	assert_int_equal(ev_issue_repro(t, 999, &o, &json), EV_E_NOTFOUND);
	free(sd);
	free(dir);
	ev_tracker_close(t);
	free(db);
}

/* Overwrites the first bytes of the root page of `table` with garbage. */
static void damage_table(const char *db, const char *table)
{
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT rootpage FROM sqlite_master WHERE name = '%s'", table);
	long root = tf_query_long(db, sql), page = tf_query_long(db, "PRAGMA page_size");
	assert_true(root > 1 && page >= 512);
	FILE *f = fopen(db, "r+b");
	assert_non_null(f);
	unsigned char junk[64];
	memset(junk, 0xFF, sizeof junk);
	junk[0] = 0x0D; /* a leaf-table page type, with impossible cell counts */
	assert_int_equal(fseek(f, (root - 1) * page, SEEK_SET), 0);
	assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
	fclose(f);
}

/* A damaged page is reported as damage, not as "no such proposal/issue". */
static void damaged_pages_are_not_reported_as_missing_rows(void **state)
{
	(void)state;
	char *db = tf_db_path("proposals-damaged");
	ev_tracker *t = tf_open(db);
	int64_t issue = add(t, "Chart values misread", "the bars are read wrong", "42", false), p = 0;
	assert_int_equal(ev_proposal_new(t, "fix chart reading", NULL, 0, 0, &p), 0);
	ev_tracker_close(t); /* the last connection checkpoints the WAL into the file */
	damage_table(db, "proposals");
	damage_table(db, "issues_by_status");

	t = tf_open(db);
	char *dir = tu_tmpdir("proposals-damaged-out");
	char *out = tu_path(dir, "export.jsonl");
	int rc = ev_proposal_export(t, p, out, NULL);
	assert_int_equal(rc, EV_E_DB);
	assert_non_null(strstr(ev_error_msg(), "malformed"));
	/* Closing updates the issue through its (damaged) status index. */
	rc = ev_issue_close(t, issue);
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, EV_E_NOTFOUND);
	ev_tracker_close(t);
	free(out);
	free(dir);
	free(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(damaged_pages_are_not_reported_as_missing_rows),
		cmocka_unit_test(proposal_from_cluster_tracks_repro_runs_and_exports),
		cmocka_unit_test(proposal_from_regression_brings_its_samples),
		cmocka_unit_test(github_import_skips_prs_records_links_and_does_not_duplicate),
		cmocka_unit_test(repro_writes_a_loadable_community_suite),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
