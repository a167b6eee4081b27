/*
 * engine/cpu/pool.c: the fast CPU path's thread pool. A decoded token is
 * ~150 jobs back to back, some of a few µs, so a job is handed over
 * without locks: the caller writes the job, then publishes it by bumping
 * a generation counter; workers spinning on the counter take it at once,
 * take task indices from one atomic counter (uneven tasks balance
 * themselves), and count themselves out; the caller spins until all are
 * out. Only a side that has waited long (POOL_SPIN pause rounds, some tens
 * of µs) sleeps on a condition variable, and the other side takes the
 * mutex to wake it only when it says so. Each side's "I sleep" flag and
 * the other's counter are sequentially consistent atomics, written before
 * the other is read, so either the sleeper sees the news or the waker sees
 * the sleeper (and then wakes it under the mutex, which the sleeper holds
 * until it waits).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#include "engine/backend.h"

struct eng_pool {
	int n; /* workers including the caller */
	pthread_t *th;
	pthread_mutex_t mu;
	pthread_cond_t go, idle;
	/* the job: written by the caller before gen is bumped, read by the
	 * workers after they see it */
	eng_task_fn fn;
	void *ctx;
	int ntasks;
	_Alignas(64) atomic_ulong gen; /* job generation */
	atomic_int sleepers;           /* workers asleep on go (or about to be) */
	atomic_bool stop;
	_Alignas(64) atomic_int next;  /* the next task index */
	_Alignas(64) atomic_int busy;  /* workers still in the current job */
	atomic_bool caller_asleep;     /* the caller waits on idle (or is about to) */
};

typedef struct {
	eng_pool *p;
	int id;
} worker_arg;

/* Pause-loop rounds spent waiting before sleeping: some tens of µs. */
#define POOL_SPIN 4000

static void work(eng_pool *p, int id)
{
	for (;;) {
		int t = atomic_fetch_add(&p->next, 1);
		if (t >= p->ntasks)
			break;
		p->fn(p->ctx, t, id);
	}
}

/* A worker's wait for a generation other than seen (or stop): spin, then sleep. */
static unsigned long next_job(eng_pool *p, unsigned long seen)
{
	for (int k = 0; k < POOL_SPIN; k++) {
		unsigned long g = atomic_load(&p->gen);
		if (g != seen || atomic_load(&p->stop))
			return g;
		cpu_relax();
	}
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add(&p->sleepers, 1);
	unsigned long g;
	while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
		pthread_cond_wait(&p->go, &p->mu);
	atomic_fetch_sub(&p->sleepers, 1);
	pthread_mutex_unlock(&p->mu);
	return g;
}

static void *worker(void *arg)
{
	worker_arg *a = arg;
	eng_pool *p = a->p;
	int id = a->id;
	free(a);
	unsigned long seen = 0;
	for (;;) {
		seen = next_job(p, seen);
		if (atomic_load(&p->stop))
			break;
		work(p, id);
		if (atomic_fetch_sub(&p->busy, 1) == 1 && atomic_load(&p->caller_asleep)) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->idle);
			pthread_mutex_unlock(&p->mu);
		}
	}
	return NULL;
}

int eng_pool_new(eng_pool **out, int threads)
{
	*out = NULL;
	eng_pool *p = aligned_alloc(_Alignof(eng_pool), sizeof(*p)); /* the counters on lines of their own */
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	memset(p, 0, sizeof(*p));
	p->n = threads < 1 ? 1 : threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->idle, NULL);
	if (!(p->th = calloc((size_t)p->n, sizeof(pthread_t)))) {
		eng_pool_free(p);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	for (int i = 1; i < p->n; i++) {
		worker_arg *a = malloc(sizeof(*a));
		if (a) {
			a->p = p;
			a->id = i;
		}
		if (!a || pthread_create(&p->th[i], NULL, worker, a)) {
			free(a);
			p->n = i; /* the ones started */
			eng_pool_free(p);
			return ev_error_set(EV_E_INTERNAL, "cannot start engine worker thread %d", i);
		}
	}
	*out = p;
	return 0;
}

void eng_pool_free(eng_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; p->th && i < p->n; i++)
		pthread_join(p->th[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->go);
	pthread_cond_destroy(&p->idle);
	free(p->th);
	free(p);
}

int eng_pool_threads(const eng_pool *p)
{
	return p->n;
}

void eng_pool_run(eng_pool *p, eng_task_fn fn, void *ctx, int ntasks)
{
	if (p->n == 1 || ntasks <= 1) {
		for (int t = 0; t < ntasks; t++)
			fn(ctx, t, 0);
		return;
	}
	/* every worker left the last job (busy was 0), so these are free to write */
	p->fn = fn;
	p->ctx = ctx;
	p->ntasks = ntasks;
	atomic_store(&p->next, 0);
	atomic_store(&p->busy, p->n - 1);
	atomic_fetch_add(&p->gen, 1); /* publishes the job */
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->go);
		pthread_mutex_unlock(&p->mu);
	}
	work(p, 0);
	for (int k = 0; k < POOL_SPIN; k++) {
		if (atomic_load(&p->busy) == 0)
			return;
		cpu_relax();
	}
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->caller_asleep, true);
	while (atomic_load(&p->busy) > 0)
		pthread_cond_wait(&p->idle, &p->mu);
	atomic_store(&p->caller_asleep, false);
	pthread_mutex_unlock(&p->mu);
}
