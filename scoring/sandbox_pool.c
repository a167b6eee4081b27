/*
 * sandbox_pool.c: running many sandboxed jobs at once.
 *
 * A plain parallel-for: `jobs` threads take the next index from a shared
 * counter until none is left. Each sandboxed run spends its time waiting on
 * a child, so threads (not processes) are enough, and results land in the
 * caller's array without copying.
 */
#include "scoring/scoring.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_JOBS 256

typedef struct {
	atomic_size_t next;
	size_t n;
	void (*fn)(void *ctx, size_t i);
	void *ctx;
} pool;

static void *worker(void *arg)
{
	pool *p = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n)
			break;
		p->fn(p->ctx, i);
	}
	return NULL;
}

void ev_sandbox_parallel(size_t n, int jobs, void (*fn)(void *ctx, size_t i), void *ctx)
{
	if (!fn || !n)
		return;
	if (jobs < 1)
		jobs = 1;
	if (jobs > MAX_JOBS)
		jobs = MAX_JOBS;
	if ((size_t)jobs > n)
		jobs = (int)n;
	pool p = {0, n, fn, ctx};
	atomic_init(&p.next, 0);
	pthread_t th[MAX_JOBS];
	int started = 0;
	for (int t = 1; t < jobs; t++) {
		if (pthread_create(&th[started], NULL, worker, &p) != 0)
			break; /* fewer threads: the work still gets done */
		started++;
	}
	worker(&p);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
}

typedef struct {
	const ev_sandbox_options *opt;
	ev_sandbox_job *jobs;
} run_ctx;

static void run_one(void *arg, size_t i)
{
	run_ctx *c = arg;
	ev_sandbox_job *j = &c->jobs[i];
	j->status = ev_sandbox_run(j->opt ? j->opt : c->opt, j->argv, j->files, j->n_files, &j->result);
}

void ev_sandbox_run_many(const ev_sandbox_options *opt, ev_sandbox_job *jobs, size_t n, int concurrency)
{
	run_ctx c = {opt, jobs};
	ev_sandbox_parallel(n, concurrency, run_one, &c);
}
