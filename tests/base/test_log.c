/* base/log.c: levelled lines on stderr. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_lines_respect_the_level(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_log");
	char *p = tu_path(d, "err.txt");
	fflush(stderr);
	int saved = dup(2);
	FILE *f = freopen(p, "w", stderr);
	assert_non_null(f);
	ev_log_set_level(EV_LOG_WARN);
	assert_int_equal(ev_log_get_level(), EV_LOG_WARN);
	ev_log_info("hidden %d", 1);
	ev_log_warn("shown %d", 2);
	ev_log_error("also %s", "shown");
	ev_log_error("answer %s", "\x1b]0;t\x07" "x\r");
	char big[6000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	ev_log_warn("%s", big);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char *text;
	size_t n;
	assert_int_equal(ev_file_read(&text, &n, p, 65536), 0);
	/* Terminal controls in what a line quotes are neutralised; a long line
	 * is cut at 4 KiB with "...". */
	const char *want = "evald: warning: shown 2\nevald: error: also shown\nevald: error: answer ?]0;t?x?\n"
	                   "evald: warning: ";
	assert_memory_equal(text, want, strlen(want));
	const char *last = text + strlen(want);
	assert_int_equal(strlen(last), 4095 + 1);
	assert_memory_equal(last + 4092, "...\n", 4);
	assert_int_equal(last[4091], 'a');
	free(text);
	free(p);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(log_lines_respect_the_level),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
