/* base/buf.c: the capped byte buffer. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void buffer_refuses_growth_past_its_cap(void **st)
{
	(void)st;
	ev_buf b = EV_BUF_INIT(10);
	assert_int_equal(ev_buf_puts(&b, "hello"), 0);
	assert_int_equal(ev_buf_printf(&b, "%d", 1234), 0);
	assert_int_equal(ev_buf_puts(&b, "xy"), EV_E_LIMIT);
	assert_string_equal(b.data, "hello1234"); /* unchanged by the failed append */
	assert_int_equal(ev_buf_putc(&b, '!'), 0);
	assert_int_equal(ev_buf_putc(&b, '!'), EV_E_LIMIT);
	size_t n;
	char *s = ev_buf_detach(&b, &n);
	assert_int_equal(n, 10);
	assert_null(b.data);
	free(s);
}

static void buffer_holds_binary_and_resets(void **st)
{
	(void)st;
	ev_buf b = EV_BUF_INIT(1 << 20);
	assert_int_equal(ev_buf_append(&b, "a\0b", 3), 0);
	assert_int_equal(b.len, 3);
	assert_int_equal(b.data[3], 0); /* always NUL-terminated */
	ev_buf_reset(&b);
	assert_int_equal(b.len, 0);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(ev_buf_printf(&b, "%04d", i % 10000), 0);
	assert_int_equal(b.len, 40000);
	assert_memory_equal(b.data + 39996, "9999", 4);
	ev_buf_free(&b);
	ev_buf_free(&b); /* twice is fine */
}

/* A NUL in text becomes U+FFFD from where asked on; before it, nothing
 * changes; past the cap, an error and the buffer as it was. */
static void nul_bytes_become_replacement_characters(void **st)
{
	(void)st;
	ev_buf b = EV_BUF_INIT(64);
	assert_int_equal(ev_buf_append(&b, "a\0b\0\0c", 6), 0);
	assert_int_equal(ev_buf_replace_nul(&b, 2), 0);
	assert_int_equal(b.len, 1 + 1 + 1 + 3 + 3 + 1);
	assert_memory_equal(b.data, "a\0b\xEF\xBF\xBD\xEF\xBF\xBD" "c", b.len);
	assert_int_equal(strlen(b.data + 2), b.len - 2);
	assert_int_equal(ev_buf_replace_nul(&b, 0), 0);
	assert_string_equal(b.data, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD" "c");
	ev_buf_free(&b);
	ev_buf small = EV_BUF_INIT(8);
	assert_int_equal(ev_buf_append(&small, "\0\0\0\0", 4), 0);
	assert_int_equal(ev_buf_replace_nul(&small, 0), EV_E_LIMIT);
	assert_int_equal(small.len, 4);
	ev_buf_free(&small);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(buffer_refuses_growth_past_its_cap),
		cmocka_unit_test(buffer_holds_binary_and_resets),
		cmocka_unit_test(nul_bytes_become_replacement_characters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
