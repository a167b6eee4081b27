/* base/base64.c: strict decoding and encoding. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void base64_decodes_strictly(void **st)
{
	(void)st;
	unsigned char *d;
	size_t n;
	assert_int_equal(ev_base64_decode(&d, &n, "aGVsbG8=", 8, 100, "x"), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "hello", 5);
	free(d);
	assert_int_equal(ev_base64_decode(&d, &n, "aGVsbG8", 7, 100, "att"), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "att: invalid base64"));
	assert_int_equal(ev_base64_decode(&d, &n, "aG Vs", 4, 100, "x"), EV_E_PARSE);
	assert_int_equal(ev_base64_decode(&d, &n, "a=Vs", 4, 100, "x"), EV_E_PARSE);
	assert_int_equal(ev_base64_decode(&d, &n, "aGVsbG8=", 8, 4, "x"), EV_E_LIMIT);
	assert_null(d);
}

static void base64_round_trips_random_bytes(void **st)
{
	(void)st;
	ev_rng r;
	ev_rng_seed(&r, 7);
	unsigned char data[300];
	for (size_t len = 0; len < sizeof data; len++) {
		for (size_t i = 0; i < len; i++)
			data[i] = (unsigned char)ev_rng_next(&r);
		char *t;
		assert_int_equal(ev_base64_encode(&t, data, len), 0);
		assert_int_equal(strlen(t), (len + 2) / 3 * 4);
		unsigned char *back;
		size_t n;
		assert_int_equal(ev_base64_decode(&back, &n, t, strlen(t), len, "rt"), 0);
		assert_int_equal(n, len);
		assert_memory_equal(back, data, len);
		free(back);
		free(t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(base64_decodes_strictly),
		cmocka_unit_test(base64_round_trips_random_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
