/* base/error.c: status names and the per-thread message. */
#include "testutil.h"

#include <pthread.h>
#include <string.h>

static void error_message_is_set_wrapped_and_cleared(void **st)
{
	(void)st;
	assert_int_equal(ev_error_set(EV_E_PARSE, "samples.jsonl:%d: id: missing", 3), EV_E_PARSE);
	assert_string_equal(ev_error_msg(), "samples.jsonl:3: id: missing");
	ev_error_wrap(EV_E_INVALID, "loading %s", "s1");
	assert_string_equal(ev_error_msg(), "loading s1: samples.jsonl:3: id: missing");
	assert_int_equal(ev_error_code(), EV_E_INVALID);
	ev_error_clear();
	assert_string_equal(ev_error_msg(), "");
	assert_string_equal(ev_status_name(EV_E_LIMIT), "limit");
}

static void *other_thread(void *arg)
{
	(void)arg;
	ev_error_set(EV_E_IO, "from the other thread");
	return NULL;
}

static void error_message_is_per_thread(void **st)
{
	(void)st;
	ev_error_set(EV_E_PARSE, "mine");
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(ev_error_msg(), "mine");
	assert_int_equal(ev_error_code(), EV_E_PARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(error_message_is_set_wrapped_and_cleared),
		cmocka_unit_test(error_message_is_per_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
