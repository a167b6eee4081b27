/* feedback: a writer SIGKILLed while inserting issues with attachments
 * leaves a consistent tracker: PRAGMA integrity_check is ok, every issue
 * that is there has all its attachment, label and link rows (no partial
 * issue), every attachment row's file exists with the right sha256, and no
 * file under a final name is partial (temporary files may remain). */
#include "tracker_fixture.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void writer(const char *path, int fd)
{
	ev_tracker *t = NULL;
	if (ev_tracker_open(&t, path) != 0)
		_exit(3);
	/* Attachments big enough that the kill often lands inside a write. */
	size_t big = 256 * 1024;
	char *a = malloc(big), *b = malloc(big);
	memcpy(a, "\x89PNG\r\n\x1a\n", 8);
	memcpy(b, "%PDF-1.4\n", 9);
	for (long i = 0;; i++) {
		for (size_t k = 16; k < big; k += 64) {
			a[k] = (char)(i * 7 + (long)k);
			b[k] = (char)(i * 13 + (long)k);
		}
		snprintf(a + 8, 8, "%07ld", i % 10000000);
		snprintf(b + 9, 8, "%07ld", i % 10000000);
		ev_issue_attachment atts[] = {{"a.png", "image/png", a, big}, {"b.pdf", "application/pdf", b, big}};
		const char *labels[] = {"crash", "test"};
		const char *links[] = {"https://example.invalid/x.png"};
		ev_issue_info info = {0};
		char title[64];
		snprintf(title, sizeof title, "report %ld", i);
		info.title = title;
		info.body = "body";
		info.labels = labels;
		info.n_labels = 2;
		info.links = links;
		info.n_links = 1;
		info.attachments = atts;
		info.n_attachments = 2;
		int64_t id;
		if (ev_issue_add(t, &info, &id) != 0)
			_exit(4);
		long done = i + 1;
		if (write(fd, &done, sizeof done) != sizeof done)
			_exit(5);
	}
}

static void check_files(const char *adir, long *n_final)
{
	DIR *d = opendir(adir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *sub = tu_path(adir, e->d_name);
		DIR *d2 = opendir(sub);
		assert_non_null(d2);
		struct dirent *f;
		while ((f = readdir(d2))) {
			if (f->d_name[0] == '.') /* "." "..", and temporary files, which may be partial */
				continue;
			char *p = tu_path(sub, f->d_name), sha[EV_SHA256_HEX], name[EV_SHA256_HEX];
			assert_int_equal(ev_sha256_file_hex(sha, p), 0);
			snprintf(name, sizeof name, "%s%s", e->d_name, f->d_name);
			if (strcmp(sha, name) != 0)
				fail_msg("%s holds content with sha256 %s", p, sha);
			(*n_final)++;
			free(p);
		}
		closedir(d2);
		free(sub);
	}
	closedir(d);
}

static void killed_issue_writer_leaves_a_consistent_tracker(void **state)
{
	(void)state;
	char *db = tf_db_path("issues-crash");
	ev_tracker *t0 = tf_open(db); /* create the schema first */
	ev_tracker_close(t0);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		writer(db, fds[1]);
	}
	close(fds[1]);
	long committed = 0, v;
	while (committed < 25 && read(fds[0], &v, sizeof v) == (ssize_t)sizeof v)
		committed = v;
	/* kill at a moment unrelated to the loop's steps */
	ev_sleep(0.0137);
	kill(pid, SIGKILL);
	while (read(fds[0], &v, sizeof v) == (ssize_t)sizeof v)
		committed = v;
	close(fds[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	printf("crash: %ld issues reported committed before SIGKILL\n", committed);

	char *ic = tf_query_text(db, "PRAGMA integrity_check");
	assert_string_equal(ic, "ok");
	free(ic);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
	long n = tf_query_long(db, "SELECT count(*) FROM issues");
	assert_true(n >= committed);
	assert_true(n <= committed + 1);
	/* no partial issue */
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issues i WHERE (SELECT count(*) FROM issue_attachments "
	                                   "a WHERE a.issue_id = i.id) != 2 OR (SELECT count(*) FROM labels l WHERE "
	                                   "l.issue_id = i.id) != 2 OR (SELECT count(*) FROM links k WHERE k.issue_id = "
	                                   "i.id) != 1"),
	                 0);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM attachments"), 2 * n);
	/* every attachment row has its complete file; no final name holds a partial file */
	char *dir = strdup(db);
	*strrchr(dir, '/') = 0;
	char *adir = tu_path(dir, "attachments");
	long n_final = 0;
	check_files(adir, &n_final);
	assert_true(n_final >= 2 * n);
	ev_tracker *t = tf_open(db);
	char *json = NULL;
	assert_int_equal(ev_issues_list_json(t, NULL, NULL, &json), 0);
	cJSON *j = cJSON_Parse(json);
	cJSON *it;
	long checked = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "issues"))
	{
		char *one = NULL;
		assert_int_equal(ev_issue_show_json(t, (int64_t)ev_json_num(it, "id", 0), &one), 0);
		cJSON *s = cJSON_Parse(one), *a;
		cJSON_ArrayForEach(a, cJSON_GetObjectItem(s, "attachments"))
		{
			char sha[EV_SHA256_HEX];
			assert_int_equal(ev_sha256_file_hex(sha, ev_json_str(a, "path", "")), 0);
			assert_string_equal(sha, ev_json_str(a, "sha256", ""));
			checked++;
		}
		cJSON_Delete(s);
		free(one);
	}
	assert_int_equal(checked, 2 * n);
	cJSON_Delete(j);
	free(json);
	/* and the tracker takes new reports */
	ev_issue_info info = {0};
	info.title = "after the crash";
	int64_t id;
	assert_int_equal(ev_issue_add(t, &info, &id), 0);
	ev_tracker_close(t);
	free(adir);
	free(dir);
	free(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(killed_issue_writer_leaves_a_consistent_tracker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
