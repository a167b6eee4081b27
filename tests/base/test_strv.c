/* base/strv.c: vectors of owned strings. */
#include "testutil.h"

static void string_vector_copies_finds_and_clears(void **st)
{
	(void)st;
	ev_strv v = {0};
	char word[] = "alpha";
	assert_int_equal(ev_strv_push(&v, word, 5), 0);
	word[0] = 'X'; /* the vector holds its own copy */
	assert_int_equal(ev_strv_push(&v, "beta-gamma", 4), 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.v[0], "alpha");
	assert_string_equal(v.v[1], "beta");
	assert_int_equal(ev_strv_find(&v, "beta", 4), 1);
	assert_int_equal(ev_strv_find(&v, "bet", 3), -1);
	ev_strv_clear(&v);
	assert_int_equal(v.n, 0);
	assert_null(v.v);
	ev_strv_free(NULL, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(string_vector_copies_finds_and_clears),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
