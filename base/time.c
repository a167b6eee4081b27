/* Clocks, sleeping, and the seedable generator (xoshiro256**). */
#include "base/base.h"

#include <errno.h>
#include <time.h>

double ev_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ev_wall_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void ev_sleep(double seconds)
{
	if (seconds <= 0)
		return;
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void ev_iso8601(char out[32], double wall)
{
	time_t t = (time_t)wall;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void ev_rng_seed(ev_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ev_rng_next(ev_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double ev_rng_uniform(ev_rng *r) { return (double)(ev_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t ev_rng_below(ev_rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
	do
		x = ev_rng_next(r);
	while (x >= lim);
	return x % n;
}
