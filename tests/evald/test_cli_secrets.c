/* Secrets are never stored: a header's value and a URL's password stay out
 * of the tracker (settings, model source) and of what runs and report
 * print; the tracker file is the user's alone (0600); resume asks for the
 * secrets again, naming them, and works once they are given. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KEY "SEKRET-HDR-123"
#define PW "SEKRET-PW-456"

static void secrets_stay_out_of_the_tracker_and_resume_asks_again(void **st)
{
	(void)st;
	tu_server srv;
	const char *args[] = {"--require-key", KEY, NULL};
	assert_int_equal(tu_server_start(&srv, args), 0);
	char *dir = tu_tmpdir("secrets");
	char *suite = tu_write(dir, "s.jsonl", "{\"id\":\"a\",\"input\":\"hello\",\"target\":\"hello\"}\n");
	char *db = tu_path(dir, "t.db");
	char *url = ev_asprintf("http://user:" PW "@127.0.0.1:%d/v1", srv.port);
	char *err = NULL, *out = NULL;
	const char *run[] = {tu_evald(), "-q", "--db", db, "run", "--model", url, "--model-name", "m", "--suite", suite,
	                     "--header", "Authorization: Bearer " KEY, NULL};
	int rc = tu_run(NULL, &err, NULL, run);
	if (rc)
		fail_msg("run: exit %d: %s", rc, err);
	free(err);

	struct stat sb;
	assert_int_equal(stat(db, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	tu_sh(&out, NULL, "sqlite3 '%s' .dump", db);
	assert_null(strstr(out, KEY));
	assert_null(strstr(out, PW));
	assert_non_null(strstr(out, "Authorization: [redacted]"));
	free(out);
	const char *runs[] = {tu_evald(), "--db", db, "runs", "--json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, runs), 0);
	assert_null(strstr(out, PW));
	free(out);
	const char *report[] = {tu_evald(), "--db", db, "report", "1", "--format", "json", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, report), 0);
	assert_null(strstr(out, PW));
	assert_null(strstr(out, KEY));
	free(out);

	/* Resume needs them again, and says which. */
	const char *r1[] = {tu_evald(), "-q", "--db", db, "run", "--resume", "1", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, r1), 1);
	assert_non_null(strstr(err, "give --model again"));
	free(err);
	const char *r2[] = {tu_evald(), "-q", "--db", db, "run", "--resume", "1", "--model", url, NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, r2), 1);
	assert_non_null(strstr(err, "header Authorization"));
	free(err);
	const char *r3[] = {tu_evald(), "-q", "--db", db, "run", "--resume", "1", "--model", url, "--header",
	                    "authorization: Bearer " KEY, NULL};
	rc = tu_run(NULL, &err, NULL, r3);
	if (rc)
		fail_msg("resume with the secrets: exit %d: %s", rc, err);
	free(err);
	free(url);
	free(db);
	free(suite);
	free(dir);
	tu_server_stop(&srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(secrets_stay_out_of_the_tracker_and_resume_asks_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
