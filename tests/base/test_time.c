/* base/time.c: clocks, ISO-8601 and the seedable generator. */
#include "testutil.h"

static void rng_is_deterministic_and_bounded(void **st)
{
	(void)st;
	ev_rng a, b;
	ev_rng_seed(&a, 42);
	ev_rng_seed(&b, 42);
	for (int i = 0; i < 100; i++)
		assert_true(ev_rng_next(&a) == ev_rng_next(&b));
	for (int i = 0; i < 1000; i++) {
		assert_true(ev_rng_below(&a, 7) < 7);
		double u = ev_rng_uniform(&a);
		assert_true(u >= 0 && u < 1);
	}
}

static void clocks_move_forward_and_format(void **st)
{
	(void)st;
	double t0 = ev_now();
	ev_sleep(0.01);
	assert_true(ev_now() - t0 >= 0.009);
	char s[32];
	ev_iso8601(s, 0);
	assert_string_equal(s, "1970-01-01T00:00:00Z");
	ev_iso8601(s, 1796313273.0); /* 2026-12-03 15:54:33 UTC */
	assert_string_equal(s, "2026-12-03T15:54:33Z");
	assert_true(ev_wall_time() > 1.7e9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rng_is_deterministic_and_bounded),
		cmocka_unit_test(clocks_move_forward_and_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
