/* base/arena.c: the capped bump allocator. */
#include "testutil.h"

#include <stdint.h>

static void arena_caps_total_allocation(void **st)
{
	(void)st;
	ev_arena *a;
	assert_int_equal(ev_arena_new(&a, 200000), 0);
	char *s = ev_arena_strdup(a, "abc");
	assert_string_equal(s, "abc");
	assert_non_null(ev_arena_alloc(a, 100000));
	assert_null(ev_arena_alloc(a, 150000));
	assert_int_equal(ev_error_code(), EV_E_LIMIT);
	ev_arena_free(a);
	ev_arena_free(NULL);
}

static void arena_allocations_are_aligned_and_distinct(void **st)
{
	(void)st;
	ev_arena *a;
	assert_int_equal(ev_arena_new(&a, 1 << 20), 0);
	char *prev = NULL;
	for (int i = 1; i < 200; i++) {
		char *p = ev_arena_alloc(a, (size_t)i);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % sizeof(void *), 0);
		assert_true(p != prev);
		prev = p;
	}
	assert_string_equal(ev_arena_strndup(a, "abcdef", 3), "abc");
	assert_true(ev_arena_used(a) >= 199 * 200 / 2);
	ev_arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arena_caps_total_allocation),
		cmocka_unit_test(arena_allocations_are_aligned_and_distinct),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
