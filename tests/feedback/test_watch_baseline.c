/*
 * watch's baseline lookup by model name: the newest finished run on the same
 * suite set, never the candidate itself (a checkpoint folder may serve the
 * candidate under the baseline's name, so both runs carry that name).
 */
#include "tracker_fixture.h"

#include "feedback/watch.h"

static const char *const SUITES[] = {"beta", "alpha"};

static void newest_other_finished_run_is_the_baseline(void **state)
{
	(void)state;
	char *path = tf_db_path("watch-baseline");
	ev_tracker *t = tf_open(path);
	int64_t older = tf_run(t, "m");
	int64_t unfinished = tf_run(t, "m");
	int64_t cand = tf_run(t, "m");
	assert_int_equal(ev_tracker_run_set_status(t, older, "finished"), 0);
	assert_int_equal(ev_tracker_run_set_status(t, unfinished, "failed"), 0);
	assert_int_equal(ev_tracker_run_set_status(t, cand, "finished"), 0);

	int64_t id = -1;
	/* Without an exclusion the candidate, being newest, would be picked. */
	assert_int_equal(ev_watch_baseline_run(t, "m", SUITES, 2, 0, &id), 0);
	assert_int_equal(id, cand);
	/* Excluding it yields the older finished run, skipping the failed one. */
	assert_int_equal(ev_watch_baseline_run(t, "m", SUITES, 2, cand, &id), 0);
	assert_int_equal(id, older);

	/* A different suite set or an unknown model finds nothing. */
	static const char *const ONE[] = {"alpha"};
	assert_int_equal(ev_watch_baseline_run(t, "m", ONE, 1, cand, &id), EV_E_NOTFOUND);
	assert_int_equal(ev_watch_baseline_run(t, "other", SUITES, 2, 0, &id), EV_E_NOTFOUND);

	/* The only finished run excluded: nothing else qualifies. */
	assert_int_equal(ev_tracker_run_set_status(t, older, "failed"), 0);
	assert_int_equal(ev_watch_baseline_run(t, "m", SUITES, 2, cand, &id), EV_E_NOTFOUND);

	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(newest_other_finished_run_is_the_baseline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
