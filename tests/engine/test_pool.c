/*
 * The fast CPU path's thread pool (engine/cpu/pool.c): every task of every
 * job runs exactly once, on a worker id in range, and its writes are seen
 * when eng_pool_run returns; jobs back to back (the hand-off without locks),
 * jobs after pauses long enough that the workers sleep, and tasks long
 * enough that the caller sleeps; two tasks of one job really run at once.
 */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "tests/engine/engine_testutil.h"

enum { MAXT = 200 };

typedef struct {
	atomic_int ran[MAXT];
	int out[MAXT]; /* plain writes, read by the caller after the job */
	int job, threads, bad_worker;
	long sleep_us; /* a task's pause (0: none) */
} counts;

static void nap(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static void count_task(void *ctx, int task, int worker)
{
	counts *c = ctx;
	atomic_fetch_add(&c->ran[task], 1);
	if (worker < 0 || worker >= c->threads)
		c->bad_worker = 1;
	if (c->sleep_us && task == 0)
		nap(c->sleep_us);
	c->out[task] = c->job * 1000 + task;
}

static void run_jobs(int threads, int jobs, long gap_us, long task_us)
{
	eng_pool *p = NULL;
	assert_int_equal(eng_pool_new(&p, threads), 0);
	assert_int_equal(eng_pool_threads(p), threads);
	static counts c;
	const int sizes[] = {0, 1, 2, 3, 7, 64, MAXT};
	for (int j = 0; j < jobs; j++) {
		int n = sizes[j % (int)(sizeof sizes / sizeof sizes[0])];
		memset(&c, 0, sizeof c);
		c.job = j, c.threads = threads, c.sleep_us = task_us;
		eng_pool_run(p, count_task, &c, n);
		assert_false(c.bad_worker);
		for (int t = 0; t < MAXT; t++) {
			if (atomic_load(&c.ran[t]) != (t < n))
				fail_msg("%d threads, job %d of %d tasks: task %d ran %d times", threads, j, n, t,
					 atomic_load(&c.ran[t]));
			if (t < n && c.out[t] != j * 1000 + t)
				fail_msg("%d threads, job %d: task %d's write not seen (%d)", threads, j, t, c.out[t]);
		}
		if (gap_us)
			nap(gap_us);
	}
	eng_pool_free(p);
}

static void every_task_once_back_to_back(void **state)
{
	(void)state;
	for (int threads = 1; threads <= 4; threads++)
		run_jobs(threads, 3000, 0, 0);
}

static void every_task_once_after_the_workers_sleep(void **state)
{
	(void)state;
	for (int threads = 2; threads <= 3; threads++)
		run_jobs(threads, 60, 3000, 0); /* 3 ms between jobs: far past the spin */
}

static void every_task_once_while_the_caller_sleeps(void **state)
{
	(void)state;
	for (int threads = 2; threads <= 3; threads++)
		run_jobs(threads, 60, 0, 3000); /* task 0 takes 3 ms: the caller waits past its spin */
}

/* Two tasks that each wait for the other to have started: they finish
 * only if two threads run them at once (a bound of 10 s, not a timing). */
typedef struct {
	atomic_int started;
	atomic_int met;
} meet;

static void meet_task(void *ctx, int task, int worker)
{
	(void)task, (void)worker;
	meet *m = ctx;
	atomic_fetch_add(&m->started, 1);
	for (long k = 0; k < 200000 && atomic_load(&m->started) < 2; k++)
		nap(1);
	if (atomic_load(&m->started) >= 2)
		atomic_fetch_add(&m->met, 1);
}

static void two_tasks_run_at_once(void **state)
{
	(void)state;
	eng_pool *p = NULL;
	assert_int_equal(eng_pool_new(&p, 2), 0);
	for (int round = 0; round < 20; round++) {
		meet m;
		atomic_init(&m.started, 0);
		atomic_init(&m.met, 0);
		eng_pool_run(p, meet_task, &m, 2);
		assert_int_equal(atomic_load(&m.met), 2);
		if (round % 5 == 4)
			nap(3000); /* and once the worker has gone to sleep */
	}
	eng_pool_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(every_task_once_back_to_back),
	    cmocka_unit_test(every_task_once_after_the_workers_sleep),
	    cmocka_unit_test(every_task_once_while_the_caller_sleeps),
	    cmocka_unit_test(two_tasks_run_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
