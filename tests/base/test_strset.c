/* base/strset.c: string hashing and the numbering set. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static void hash_is_fnv1a(void **st)
{
	(void)st;
	/* Published FNV-1a 64 values; seeds and stored keys depend on them. */
	assert_true(ev_hash_str("") == 0xcbf29ce484222325ull);
	assert_true(ev_hash_str("a") == 0xaf63dc4c8601ec8cull);
	assert_true(ev_hash_str("foobar") == 0x85944171f73967e8ull);
	assert_true(ev_hash_bytes("a\0b", 3) != ev_hash_bytes("a\0c", 3));
	assert_true(ev_hash_mix(1) != 1);
}

static void set_numbers_strings_in_order_added(void **st)
{
	(void)st;
	ev_strset *s;
	assert_int_equal(ev_strset_new(&s), 0);
	char key[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		size_t idx;
		bool added;
		assert_int_equal(ev_strset_add(s, key, strlen(key), &idx, &added), 0);
		assert_true(added);
		assert_int_equal(idx, i);
	}
	for (int i = 4999; i >= 0; i--) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(ev_strset_find(s, key, strlen(key)), i);
		size_t idx;
		bool added;
		assert_int_equal(ev_strset_add(s, key, strlen(key), &idx, &added), 0);
		assert_false(added);
		assert_int_equal(idx, i);
	}
	assert_int_equal(ev_strset_count(s), 5000);
	assert_int_equal(ev_strset_find(s, "nope", 4), -1);
	assert_string_equal(ev_strset_get(s, 17, NULL), "k17");
	assert_null(ev_strset_get(s, 5000, NULL));
	/* Embedded NULs are part of the key. */
	assert_int_equal(ev_strset_add(s, "k1\0x", 4, NULL, NULL), 0);
	assert_int_equal(ev_strset_count(s), 5001);
	size_t len;
	ev_strset_get(s, 5000, &len);
	assert_int_equal(len, 4);
	ev_strset_free(s);
	ev_strset_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hash_is_fnv1a),
		cmocka_unit_test(set_numbers_strings_in_order_added),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
