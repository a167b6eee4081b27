/* base/str.c: string copies and whole-string number parsing. */
#include "testutil.h"

#include <stdlib.h>

static void numbers_parse_whole_strings_only(void **st)
{
	(void)st;
	int64_t i;
	double f;
	assert_true(ev_parse_i64("-42", &i) && i == -42);
	assert_false(ev_parse_i64("42x", &i));
	assert_false(ev_parse_i64("99999999999999999999", &i));
	assert_true(ev_parse_f64("1e-3", &f) && f == 1e-3);
	assert_false(ev_parse_f64("nan", &f));
	assert_false(ev_parse_f64("", &f));
}

static void string_helpers(void **st)
{
	(void)st;
	assert_null(ev_strdup(NULL));
	char *s = ev_asprintf("%s-%d", "a", 7);
	assert_string_equal(s, "a-7");
	free(s);
	s = ev_strndup("abcdef", 2);
	assert_string_equal(s, "ab");
	free(s);
	assert_true(ev_str_starts("evald", "ev"));
	assert_false(ev_str_starts("ev", "evald"));
	assert_true(ev_str_ends("a.jsonl", ".jsonl"));
	assert_false(ev_str_ends("l", ".jsonl"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(numbers_parse_whole_strings_only),
		cmocka_unit_test(string_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
