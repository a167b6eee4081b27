/* base/progress.c: the progress display off a terminal. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void progress_off_a_tty_prints_plain_lines_and_quiet_prints_nothing(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_progress");
	char *p = tu_path(d, "out.txt");
	FILE *f = fopen(p, "w");
	ev_progress *pr;
	assert_int_equal(ev_progress_new(&pr, "run 3", 10, f, false), 0);
	ev_progress_update(pr, 4, 0.5, 0);
	ev_progress_update(pr, 10, 0.75, 1);
	ev_progress_finish(pr);
	ev_progress_free(pr);
	assert_int_equal(ev_progress_new(&pr, "quiet", 10, f, true), 0);
	ev_progress_update(pr, 10, 1.0, 0);
	ev_progress_finish(pr);
	ev_progress_free(pr);
	fclose(f);
	char *text;
	size_t n;
	assert_int_equal(ev_file_read(&text, &n, p, 4096), 0);
	assert_non_null(strstr(text, "evald: run 3 10/10"));
	assert_non_null(strstr(text, "score 0.750"));
	assert_null(strstr(text, "quiet"));
	assert_null(strchr(text, '\r')); /* no terminal control off a TTY */
	free(text);
	free(p);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(progress_off_a_tty_prints_plain_lines_and_quiet_prints_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
