/* A tracker this process may read but not write (a read-only folder and
 * file; as root, read as the unprivileged user "nobody", for whom it is
 * read-only) is read by every reading command, and a write fails saying
 * the tracker is read-only, changing nothing. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void a_read_only_tracker_is_read_and_never_written(void **st)
{
	(void)st;
	tu_server srv;
	assert_int_equal(tu_server_start(&srv, NULL), 0);
	char *dir = tu_tmpdir("readonly");
	char *suite = tu_write(dir, "s.jsonl", "{\"id\":\"a\",\"input\":\"hello\",\"target\":\"hello\"}\n");
	char *db = tu_path(dir, "t.db");
	char *err = NULL, *out = NULL;
	const char *run[] = {tu_evald(), "-q", "--db", db, "run", "--model", srv.url, "--model-name", "m",
	                     "--suite", suite, NULL};
	int rc = tu_run(NULL, &err, NULL, run);
	if (rc)
		fail_msg("run: exit %d: %s", rc, err);
	free(err);
	const char *add[] = {tu_evald(), "--db", db, "issue", "add", "--title", "a report read read-only", "--body",
	                     "b", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, add), 0);
	tu_server_stop(&srv);

	/* read-only for whoever reads it next */
	const char *as = "";
	if (geteuid() == 0) {
		/* root writes anything: read as nobody, for whom the file is
		 * readable and neither it nor its folder writable */
		if (tu_sh(NULL, NULL, "command -v setpriv >/dev/null") != 0) {
			print_message("setpriv (util-linux) is missing: cannot read as another user\n");
			skip();
		}
		as = "setpriv --reuid 65534 --regid 65534 --clear-groups ";
		assert_int_equal(chmod(dir, 0755), 0);
		assert_int_equal(chmod(db, 0644), 0);
		if (tu_sh(NULL, NULL, "%stest -r '%s'", as, db) != 0) {
			print_message("nobody cannot reach %s (a parent folder is closed): skipped\n", dir);
			skip();
		}
	} else {
		assert_int_equal(chmod(db, 0444), 0);
		assert_int_equal(chmod(dir, 0555), 0);
	}
	char *before = NULL;
	tu_sh(&before, NULL, "sha256sum '%s'", db);

	const char *reads[] = {"runs", "report 1", "issue list", "issue show 1", "regressions", "proposal list"};
	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
		rc = tu_sh(&out, &err, "%s'%s' --db '%s' %s", as, tu_evald(), db, reads[i]);
		if (rc)
			fail_msg("%s on a read-only tracker: exit %d: %s", reads[i], rc, err);
		if (i == 0)
			assert_non_null(strstr(out, "finished"));
		if (i == 2)
			assert_non_null(strstr(out, "a report read read-only"));
		free(out);
		free(err);
	}
	/* a write fails, clearly, and nothing changes */
	rc = tu_sh(&out, &err, "%s'%s' --db '%s' issue add --title t --body b", as, tu_evald(), db);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "read-only"));
	free(out);
	free(err);
	char *after = NULL;
	tu_sh(&after, NULL, "sha256sum '%s'", db);
	assert_string_equal(before, after);
	free(before);
	free(after);
	chmod(dir, 0755);
	free(db);
	free(suite);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_read_only_tracker_is_read_and_never_written),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
