/* base/vec.c and vec.h: the typed growable array. */
#include "testutil.h"

typedef struct {
	int a;
	double b;
} pair;

static void vector_grows_and_keeps_order(void **st)
{
	(void)st;
	EV_VEC(int) v = {0};
	for (int i = 0; i < 10000; i++)
		assert_int_equal(ev_vec_push(&v, i * 3), 0);
	assert_int_equal(v.n, 10000);
	assert_true(v.cap >= v.n);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(v.v[i], i * 3);
	ev_vec_free(&v);
	assert_null(v.v);
	assert_int_equal(v.n, 0);
}

static void vector_add_gives_a_zeroed_element(void **st)
{
	(void)st;
	EV_VEC(pair) v = {0};
	assert_int_equal(ev_vec_reserve(&v, 3), 0);
	assert_true(v.cap >= 3);
	for (int i = 0; i < 5; i++) {
		pair *p = ev_vec_add(&v);
		assert_non_null(p);
		assert_int_equal(p->a, 0);
		assert_true(p->b == 0);
		p->a = i;
	}
	assert_int_equal(v.v[4].a, 4);
	ev_vec_free(&v);
}

static void vector_refuses_an_impossible_size(void **st)
{
	(void)st;
	EV_VEC(double) v = {0};
	assert_int_equal(ev_vec_push(&v, 1.0), 0);
	double *before = v.v;
	size_t cap = v.cap;
	assert_int_equal(ev_vec_reserve(&v, SIZE_MAX / 2), EV_E_NOMEM);
	assert_ptr_equal(v.v, before); /* unchanged */
	assert_int_equal(v.cap, cap);
	assert_true(v.v[0] == 1.0);
	ev_vec_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(vector_grows_and_keeps_order),
		cmocka_unit_test(vector_add_gives_a_zeroed_element),
		cmocka_unit_test(vector_refuses_an_impossible_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
