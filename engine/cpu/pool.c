/*
 * engine/cpu/pool.c: the fast CPU path's thread pool. Between jobs workers
 * first spin a little (a decoded token is ~90 jobs back to back, and a
 * futex wake-up per job cost more than the small ones take), then sleep
 * on a condition variable; within a job they take task indices from one
 * atomic counter, so uneven tasks balance themselves.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
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
	atomic_ulong gen;   /* job generation (written under mu) */
	atomic_int busy;    /* workers still in the current job (written under mu) */
	atomic_bool stop;
	eng_task_fn fn;
	void *ctx;
	int ntasks;
	atomic_int next;
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

static void *worker(void *arg)
{
	worker_arg *a = arg;
	eng_pool *p = a->p;
	int id = a->id;
	free(a);
	unsigned long seen = 0;
	for (;;) {
		for (int k = 0; k < POOL_SPIN && atomic_load(&p->gen) == seen && !atomic_load(&p->stop); k++)
			cpu_relax();
		pthread_mutex_lock(&p->mu); /* the job's fields are read under it */
		while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
			pthread_cond_wait(&p->go, &p->mu);
		if (atomic_load(&p->stop))
			break;
		seen = atomic_load(&p->gen);
		pthread_mutex_unlock(&p->mu);
		work(p, id);
		pthread_mutex_lock(&p->mu);
		if (atomic_fetch_sub(&p->busy, 1) == 1)
			pthread_cond_signal(&p->idle);
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int eng_pool_new(eng_pool **out, int threads)
{
	*out = NULL;
	eng_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
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
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->ctx = ctx;
	p->ntasks = ntasks;
	atomic_store(&p->next, 0);
	atomic_store(&p->busy, p->n - 1);
	atomic_fetch_add(&p->gen, 1);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	work(p, 0);
	for (int k = 0; k < POOL_SPIN && atomic_load(&p->busy) > 0; k++)
		cpu_relax();
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->busy) > 0)
		pthread_cond_wait(&p->idle, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
