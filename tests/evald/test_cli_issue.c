/* evald issue / triage / proposal end to end through the program: add with
 * attachments and labels, list, show, close, import of a generated GitHub
 * export (pull requests, labels, image links; a second import adds nothing),
 * repro into a community suite that `evald suites validate` accepts, triage
 * into clusters, and a proposal from a cluster joined, accepted and
 * exported. Plus the usage errors a user meets. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *dir, *db;

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("cli-issue");
	db = tu_path(dir, "evald.db");
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	free(db);
	free(dir);
	return 0;
}

/* Runs evald --db DB ARGS...; returns the exit status, *out the stdout. */
static int ev(char **out, char **err, const char *a1, const char *a2, const char *a3, const char *a4,
              const char *a5, const char *a6, const char *a7, const char *a8)
{
	const char *argv[16] = {tu_evald(), "--db", db};
	int n = 3;
	const char *args[] = {a1, a2, a3, a4, a5, a6, a7, a8};
	for (size_t i = 0; i < 8 && args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return tu_run(out, err, NULL, argv);
}

static cJSON *json_or_fail(const char *text)
{
	cJSON *j = cJSON_Parse(text ? text : "");
	if (!j)
		fail_msg("not JSON: %s", text ? text : "(null)");
	return j;
}

static void issue_add_list_show_close(void **st)
{
	(void)st;
	char *png = tu_path(dir, "shot.png");
	assert_int_equal(ev_file_write(png, "\x89PNG\r\n\x1a\n\0\0\0\rIHDRcli", 19), 0);
	char *log = tu_write(dir, "run.log", "traceback: line 3\n");
	char *out = NULL, *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "issue", "add", "--title", "Chart read wrong", "--body",
	                      "The bar chart image is misread", "--attach", png, "--attach", log, "--model", "ckpt-3",
	                      "--prompt", "What is the tallest bar?", "--expected", "42", "--output", "40",
	                      "--label", "vision", "--label", "bug", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	assert_int_equal(atoi(out), 1);
	free(out);
	free(err);
	assert_int_equal(ev(&out, NULL, "issue", "add", "--title", "Second report", "--json", NULL, NULL, NULL), 0);
	cJSON *j = json_or_fail(out);
	assert_int_equal((int)ev_json_num(j, "id", 0), 2);
	cJSON_Delete(j);
	free(out);

	assert_int_equal(ev(&out, NULL, "issue", "list", "--json", NULL, NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 2);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "list", "--label", "vision", "--json", NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 1);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "list", NULL, NULL, NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "Chart read wrong"));
	free(out);

	assert_int_equal(ev(&out, NULL, "issue", "show", "1", "--json", NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_string_equal(ev_json_str(j, "modality", ""), "mixed"); /* an image and a text log */
	assert_string_equal(ev_json_str(j, "model", ""), "ckpt-3");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "attachments")), 2);
	cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "attachments"), 1);
	assert_string_equal(ev_json_str(a, "mime", ""), "text/plain");
	assert_string_equal(ev_json_str(a, "name", ""), "run.log");
	cJSON_Delete(j);
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "show", "1", NULL, NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "image/png"));
	free(out);

	assert_int_equal(ev(NULL, NULL, "issue", "close", "2", NULL, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(ev(&out, NULL, "issue", "list", "--status", "closed", "--json", NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 1);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "issues"), 0), "title", ""),
	                    "Second report");
	cJSON_Delete(j);
	free(out);

	/* errors */
	assert_int_equal(ev(NULL, &err, "issue", "show", "99", NULL, NULL, NULL, NULL, NULL), 1);
	assert_non_null(strstr(err, "no such issue"));
	free(err);
	assert_int_equal(ev(NULL, NULL, "issue", "show", "abc", NULL, NULL, NULL, NULL, NULL), 2);
	assert_int_equal(ev(NULL, NULL, "issue", "add", "--body", "no title", NULL, NULL, NULL, NULL), 2);
	assert_int_equal(ev(NULL, NULL, "issue", "frobnicate", NULL, NULL, NULL, NULL, NULL, NULL), 2);
	assert_int_equal(ev(NULL, NULL, "issue", "list", "--status", "maybe", NULL, NULL, NULL, NULL), 2);
	assert_int_equal(ev(NULL, &err, "issue", "add", "--title", "t", "--attach", "/no/such/file", NULL, NULL), 1);
	assert_non_null(strstr(err, "/no/such/file"));
	free(err);
	assert_int_equal(ev(NULL, &err, "issue", "add", "--title", "t", "--attach", png, "--max-attachment", "4"), 1);
	free(err);
	free(log);
	free(png);
}

static void issue_import_github_export(void **st)
{
	(void)st;
	/* a generated export: 6 issues, 2 pull requests, labels, image links */
	ev_buf b = EV_BUF_INIT(1 << 20);
	ev_buf_puts(&b, "[");
	for (int i = 1; i <= 8; i++) {
		bool pr = i % 4 == 0;
		ev_buf_printf(&b,
		              "%s{\"number\":%d,\"html_url\":\"https://github.com/acme/model/%s/%d\",\"title\":\"GH report %d\","
		              "\"body\":\"details ![img](https://user-images.example/%d.png) <img src=\\\"https://cdn.example/%d.jpg\\\">\","
		              "\"labels\":[{\"name\":\"community\"},{\"name\":\"l%d\"}],\"user\":{\"login\":\"user%d\"},"
		              "\"created_at\":\"2025-01-0%dT12:00:00Z\",\"state\":\"open\"%s}",
		              i > 1 ? "," : "", i, pr ? "pull" : "issues", i, i, i, i, i, i, i,
		              pr ? ",\"pull_request\":{\"url\":\"https://api.github.com/x\"}" : "");
	}
	ev_buf_puts(&b, "]");
	char *f = tu_write(dir, "gh.json", b.data);
	ev_buf_free(&b);
	char *out = NULL;
	assert_int_equal(ev(&out, NULL, "issue", "import", f, "--json", NULL, NULL, NULL, NULL), 0);
	cJSON *j = json_or_fail(out);
	assert_int_equal((int)ev_json_num(j, "imported", 0), 6);
	assert_int_equal((int)ev_json_num(j, "skipped_pull_requests", 0), 2);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "import", f, NULL, NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "imported 0 issues (6 already there"));
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "list", "--label", "community", "--json", NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 6);
	cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "issues"), 0);
	int id = (int)ev_json_num(first, "id", 0);
	assert_string_equal(ev_json_str(first, "source", ""), "github");
	cJSON_Delete(j);
	free(out);
	char ids[16];
	snprintf(ids, sizeof ids, "%d", id);
	assert_int_equal(ev(&out, NULL, "issue", "show", ids, "--json", NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "links")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "attachments")), 0); /* never fetched */
	cJSON_Delete(j);
	free(out);
	char *bad = tu_write(dir, "bad.json", "{not json");
	char *err = NULL;
	assert_int_equal(ev(NULL, &err, "issue", "import", bad, NULL, NULL, NULL, NULL, NULL), 1);
	assert_non_null(strstr(err, "bad.json"));
	free(err);
	free(bad);
	free(f);
}

static void issue_repro_makes_a_valid_community_suite(void **st)
{
	(void)st;
	char *sd = tu_path(dir, "community");
	char *out = NULL, *err = NULL;
	assert_int_equal(ev(&out, &err, "issue", "repro", "1", "--suite-dir", sd, "--json", NULL, NULL), 0);
	cJSON *j = json_or_fail(out);
	assert_string_equal(ev_json_str(j, "sample_id", ""), "issue-1");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "attachments")), 2);
	cJSON_Delete(j);
	free(out);
	free(err);
	assert_int_equal(ev(&out, NULL, "issue", "repro", "3", "--regex", "(?i)report \\d", "--suite-dir", sd, NULL),
	                 0);
	free(out);
	/* issue 2 has no expected answer and no checker was given */
	assert_int_equal(ev(NULL, &err, "issue", "repro", "2", "--suite-dir", sd, NULL, NULL, NULL), 1);
	assert_non_null(strstr(err, "--regex or --target"));
	free(err);
	assert_int_equal(ev(NULL, NULL, "issue", "repro", "2", "--regex", "a", "--target", "b", NULL), 2);
	const char *argv[] = {tu_evald(), "suites", "validate", sd, "--json", NULL};
	assert_int_equal(tu_run(&out, &err, NULL, argv), 0);
	j = json_or_fail(out);
	assert_true(ev_json_bool(j, "valid", false));
	assert_string_equal(ev_json_str(j, "name", ""), "community");
	assert_int_equal((int)ev_json_num(j, "n", 0), 2);
	cJSON_Delete(j);
	free(out);
	free(err);
	/* the default folder: beside the tracker */
	assert_int_equal(ev(&out, NULL, "issue", "repro", "1", "--target", "42", NULL, NULL, NULL), 0);
	free(out);
	char *def = tu_path(dir, "community/samples.jsonl");
	char *text = NULL;
	size_t len;
	assert_int_equal(ev_file_read(&text, &len, def, 1 << 20), 0);
	assert_non_null(strstr(text, "\"issue-1\""));
	free(text);
	free(def);
	free(sd);
}

static void triage_and_proposal_from_cluster(void **st)
{
	(void)st;
	char *out = NULL, *err = NULL;
	const char *body = "the model ignores the second page of the attached pdf document and answers from page one";
	for (int k = 0; k < 2; k++) {
		const char *argv[] = {tu_evald(), "--db", db, "issue", "add", "--title", "PDF second page ignored",
		                      "--body", body, NULL};
		assert_int_equal(tu_run(NULL, NULL, NULL, argv), 0);
	}
	assert_int_equal(ev(&out, &err, "triage", "--json", NULL, NULL, NULL, NULL, NULL, NULL), 0);
	cJSON *j = json_or_fail(out);
	cJSON *cl = cJSON_GetObjectItem(j, "clusters");
	assert_true(cJSON_GetArraySize(cl) >= 1);
	int cid = (int)ev_json_num(cJSON_GetArrayItem(cl, 0), "id", 0);
	assert_true(cid > 0);
	cJSON_Delete(j);
	free(out);
	free(err);
	assert_int_equal(ev(&out, NULL, "triage", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "cluster"));
	free(out);
	assert_int_equal(ev(NULL, NULL, "triage", "--threshold", "7", NULL, NULL, NULL, NULL, NULL), 2);

	char cids[16];
	snprintf(cids, sizeof cids, "%d", cid);
	assert_int_equal(ev(&out, NULL, "proposal", "new", "--from-cluster", cids, NULL, NULL, NULL, NULL), 0);
	int pid = atoi(out);
	assert_true(pid > 0);
	free(out);
	char pids[16];
	snprintf(pids, sizeof pids, "%d", pid);
	assert_int_equal(ev(NULL, NULL, "proposal", "join", pids, "--who", "alice", NULL, NULL, NULL), 0);
	assert_int_equal(ev(NULL, NULL, "proposal", "status", pids, "accepted", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(ev(NULL, NULL, "proposal", "status", pids, "finished", NULL, NULL, NULL, NULL), 2);
	assert_int_equal(ev(&out, NULL, "proposal", "show", pids, "--json", NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_string_equal(ev_json_str(j, "status", ""), "accepted");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "members")), 1);
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(j, "evidence")) >= 3); /* the cluster and its issues */
	cJSON_Delete(j);
	free(out);
	assert_int_equal(ev(&out, NULL, "proposal", "show", pids, NULL, NULL, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "alice"));
	free(out);
	assert_int_equal(ev(&out, NULL, "proposal", "list", "--json", NULL, NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "proposals")), 1);
	cJSON_Delete(j);
	free(out);
	char *data = tu_path(dir, "data.jsonl");
	assert_int_equal(ev(&out, NULL, "proposal", "export", pids, "-o", data, NULL, NULL, NULL), 0);
	assert_non_null(strstr(out, "2 cases"));
	free(out);
	assert_int_equal(ev(NULL, NULL, "proposal", "new", "--title", "manual", "--issue", "1", NULL, NULL), 0);
	assert_int_equal(ev(NULL, &err, "proposal", "new", "--from-cluster", "999", NULL, NULL, NULL, NULL), 1);
	free(err);
	assert_int_equal(ev(NULL, NULL, "proposal", "new", NULL, NULL, NULL, NULL, NULL, NULL), 2);
	free(data);
}

/* True when `s` holds a byte a terminal may act on (tab and newline aside). */
static bool has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7F || (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
			return true;
	return false;
}

static void hostile_titles_print_without_terminal_controls(void **st)
{
	(void)st;
	/* An OSC that retitles the terminal, a screen clear, a carriage return
	 * that would overwrite the line, and an 8-bit CSI. */
	const char *title = "\x1b]0;pwned\x07" "Chart\x1b[2J\rlies \xc2\x9b" "31m";
	const char *body = "see\x1b[8m hidden\x1b[0m";
	char *out = NULL, *err = NULL;
	assert_int_equal(ev(&out, NULL, "issue", "add", "--title", title, "--body", body, "--json", NULL), 0);
	cJSON *j = json_or_fail(out);
	char id[32];
	snprintf(id, sizeof id, "%lld", (long long)ev_json_num(j, "id", 0));
	cJSON_Delete(j);
	free(out);

	assert_int_equal(ev(&out, NULL, "issue", "list", NULL, NULL, NULL, NULL, NULL, NULL), 0);
	assert_false(has_control(out));
	assert_non_null(strstr(out, "?]0;pwned?Chart?[2J?lies ?31m"));
	free(out);
	assert_int_equal(ev(&out, NULL, "issue", "show", id, NULL, NULL, NULL, NULL, NULL), 0);
	assert_false(has_control(out));
	assert_non_null(strstr(out, "see?[8m hidden?[0m"));
	free(out);
	/* Nothing stored is lost: --json gives the text back exactly. */
	assert_int_equal(ev(&out, NULL, "issue", "show", id, "--json", NULL, NULL, NULL, NULL), 0);
	j = json_or_fail(out);
	assert_string_equal(ev_json_str(j, "title", ""), title);
	assert_string_equal(ev_json_str(j, "body", ""), body);
	cJSON_Delete(j);
	free(out);
	/* Triage prints titles too. */
	assert_int_equal(ev(&out, &err, "triage", "--dry-run", NULL, NULL, NULL, NULL, NULL, NULL), 0);
	assert_false(has_control(out));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(issue_add_list_show_close),
		cmocka_unit_test(issue_import_github_export),
		cmocka_unit_test(issue_repro_makes_a_valid_community_suite),
		cmocka_unit_test(triage_and_proposal_from_cluster),
		cmocka_unit_test(hostile_titles_print_without_terminal_controls),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
