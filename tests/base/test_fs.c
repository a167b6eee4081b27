/* base/fs.c: capped reads, atomic writes, folders, temporary folders and recursive removal. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void file_read_respects_cap(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_fs_read");
	char *p = tu_write(d, "f.txt", "0123456789");
	char *data;
	size_t n;
	assert_int_equal(ev_file_read(&data, &n, p, 100), 0);
	assert_int_equal(n, 10);
	free(data);
	assert_int_equal(ev_file_read(&data, &n, p, 5), EV_E_LIMIT);
	assert_int_equal(ev_file_read(&data, &n, "/nonexistent/x", 5), EV_E_NOTFOUND);
	assert_int_equal(ev_file_read(&data, &n, d, 5), EV_E_IO); /* a folder */
	free(p);
	free(d);
}

static void file_write_replaces_atomically_and_mkdir_makes_parents(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_fs_write");
	char *sub = tu_path(d, "a/b/c");
	assert_int_equal(ev_mkdir_p(sub), 0);
	assert_int_equal(ev_mkdir_p(sub), 0); /* existing is fine */
	char *f = tu_path(sub, "x");
	assert_int_equal(ev_file_write(f, "one", 3), 0);
	assert_int_equal(ev_file_write(f, "two!", 4), 0);
	char *data;
	size_t n;
	assert_int_equal(ev_file_read(&data, &n, f, 100), 0);
	assert_string_equal(data, "two!");
	free(data);
	free(f);
	free(sub);
	free(d);
}

static void rmtree_removes_locked_folders_but_not_link_targets(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_fs_rm");
	char *keep = tu_path(d, "keep");
	char *tree = tu_path(d, "tree");
	char *locked = tu_path(tree, "locked");
	assert_int_equal(ev_mkdir_p(keep), 0);
	free(tu_write(keep, "precious", "data"));
	assert_int_equal(ev_mkdir_p(locked), 0);
	free(tu_write(locked, "f", "x"));
	char *link = tu_path(tree, "to-keep");
	assert_int_equal(symlink(keep, link), 0);
	assert_int_equal(chmod(locked, 0), 0);
	/* Without FORCE a folder without permissions may stay (unless root,
	 * who may remove it anyway); with FORCE it goes. */
	(void)ev_rmtree(tree, 0);
	assert_int_equal(ev_rmtree(tree, EV_RMTREE_FORCE), 0);
	struct stat sb;
	assert_int_not_equal(lstat(tree, &sb), 0);
	char *precious = tu_path(keep, "precious");
	assert_int_equal(stat(precious, &sb), 0); /* the link's target is intact */
	assert_int_equal(ev_rmtree(tree, 0), 0); /* absent is fine */
	assert_int_equal(ev_rmtree(NULL, 0), 0);
	assert_int_equal(ev_rmtree(precious, 0), 0); /* a plain file */
	assert_int_not_equal(stat(precious, &sb), 0);
	free(precious);
	free(link);
	free(locked);
	free(tree);
	free(keep);
	free(d);
}

/* ev_mkdtemp: in the base given, else in $TMPDIR (the tests run with it
 * set to their scratch folder), else /tmp; a base that is not there named */
static void mkdtemp_goes_where_asked(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_fs_mkdtemp"), *a = NULL, *b = NULL;
	assert_int_equal(ev_mkdtemp(&a, d, "x"), 0);
	char *want = ev_asprintf("%s/evald-x-", d);
	assert_true(!strncmp(a, want, strlen(want)) && strlen(a) == strlen(want) + 6);
	struct stat sb;
	assert_true(stat(a, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0700);
	char *old = getenv("TMPDIR") ? ev_strdup(getenv("TMPDIR")) : NULL;
	setenv("TMPDIR", d, 1);
	assert_int_equal(ev_mkdtemp(&b, "", "y"), 0);
	free(want);
	want = ev_asprintf("%s/evald-y-", d);
	assert_true(!strncmp(b, want, strlen(want)));
	char *none = NULL;
	assert_int_equal(ev_mkdtemp(&none, "/nonexistent/place", "z"), EV_E_IO);
	assert_null(none);
	assert_non_null(strstr(ev_error_msg(), "/nonexistent/place"));
	if (old)
		setenv("TMPDIR", old, 1);
	else
		unsetenv("TMPDIR");
	assert_int_equal(ev_rmtree(a, 0), 0);
	assert_int_equal(ev_rmtree(b, 0), 0);
	free(old), free(want), free(a), free(b), free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(file_read_respects_cap),
		cmocka_unit_test(file_write_replaces_atomically_and_mkdir_makes_parents),
		cmocka_unit_test(rmtree_removes_locked_folders_but_not_link_targets),
		cmocka_unit_test(mkdtemp_goes_where_asked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
