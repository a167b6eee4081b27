/* Shards of a suite are disjoint, cover it, and are roughly even. */
#include "runners/runners.h"
#include "tests/common/testutil.h"

#include <stdio.h>
#include <string.h>

static void every_id_belongs_to_exactly_one_shard(void **state)
{
	char id[32];
	for (int n = 1; n <= 8; n++) {
		int per[8] = {0};
		for (int i = 0; i < 1000; i++) {
			snprintf(id, sizeof id, "sample-%d", i);
			int owners = 0;
			for (int k = 0; k < n; k++) {
				if (ev_shard_owns(id, k, n)) {
					owners++;
					per[k]++;
				}
			}
			assert_int_equal(owners, 1);
		}
		for (int k = 0; k < n; k++) {
			/* 1000/n expected; a hash split stays well within +-40%. */
			assert_true(per[k] > 600 / n);
			assert_true(per[k] < 1400 / n);
		}
	}
}

static void split_is_deterministic_and_whole_for_one_shard(void **state)
{
	assert_true(ev_shard_owns("anything", 0, 1));
	assert_true(ev_shard_owns("anything", 0, 0));
	for (int k = 0; k < 5; k++)
		assert_int_equal(ev_shard_owns("q-17", k, 5), ev_shard_owns("q-17", k, 5));
	assert_false(ev_shard_owns("q-17", 5, 5));
	assert_false(ev_shard_owns("q-17", -1, 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_id_belongs_to_exactly_one_shard),
		cmocka_unit_test(split_is_deterministic_and_whole_for_one_shard),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
