/* base/hash.c: SHA-256. */
#include "testutil.h"

#include <stdlib.h>

static void sha256_matches_known_vectors(void **st)
{
	(void)st;
	char hex[EV_SHA256_HEX];
	ev_sha256_hex(hex, "abc", 3);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	ev_sha256_ctx *c;
	assert_int_equal(ev_sha256_begin(&c), 0);
	ev_sha256_update(c, "a", 1);
	ev_sha256_update(c, "bc", 2);
	char hex2[EV_SHA256_HEX];
	ev_sha256_end_hex(c, hex2);
	assert_string_equal(hex, hex2);
}

static void sha256_of_a_file_equals_that_of_its_bytes(void **st)
{
	(void)st;
	char *d = tu_tmpdir("base_hash");
	char *p = tu_write(d, "f", "abc");
	char hex[EV_SHA256_HEX];
	assert_int_equal(ev_sha256_file_hex(hex, p), 0);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_int_not_equal(ev_sha256_file_hex(hex, "/nonexistent/f"), 0);
	free(p);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sha256_matches_known_vectors),
		cmocka_unit_test(sha256_of_a_file_equals_that_of_its_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
