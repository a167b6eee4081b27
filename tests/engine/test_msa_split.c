/* The split-K decode plan (engine/msa_split.c): partitions cover the block
 * list once, in order, within the limits, sizes within one block of each
 * other, the same every time; attention computed partition by partition
 * and merged by log-sum-exp equals softmax attention over all the attended
 * keys computed directly in double (the oracle), for dense and for sparse
 * block lists with a partial last block, for any number of partitions. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/msa_split.h"

static void plans_cover_the_list(void **state)
{
	(void)state;
	eng_split_part parts[64], again[64];
	for (int n = 0; n <= 300; n += (n < 40 ? 1 : 7))
		for (int maxp = 1; maxp <= 40; maxp += 3)
			for (int minb = 1; minb <= 8; minb++) {
				int k = eng_split_plan(n, maxp, minb, parts);
				if (n == 0) {
					assert_int_equal(k, 0);
					continue;
				}
				assert_true(k >= 1 && k <= maxp);
				int at = 0, lo = n, hi = 0;
				for (int p = 0; p < k; p++) {
					assert_int_equal(parts[p].first, at);
					assert_true(parts[p].count >= 1);
					if (k > 1)
						assert_true(parts[p].count >= minb);
					if (p)
						assert_true(parts[p].count <= parts[p - 1].count); /* larger first */
					at += parts[p].count;
					lo = parts[p].count < lo ? parts[p].count : lo;
					hi = parts[p].count > hi ? parts[p].count : hi;
				}
				assert_int_equal(at, n);
				assert_true(hi - lo <= 1);
				/* as many partitions as the limits allow */
				int want = n / minb < 1 ? 1 : n / minb;
				assert_int_equal(k, want < maxp ? want : maxp);
				assert_int_equal(eng_split_plan(n, maxp, minb, again), k);
				assert_memory_equal(parts, again, (size_t)k * sizeof *parts);
			}
	assert_int_equal(eng_split_plan(5, 0, 1, parts), 0);
	assert_int_equal(eng_split_plan(5, 3, 0, parts), 0);
}

enum { G = 4, HD = 64, B = 16, NB = 40 };

static float frand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(*s >> 11) / 9007199254740992.0 * 2 - 1);
}

/* One block's keys into a state: the online softmax, plainly. */
static void attend(eng_split_state *st, const float *q, const float *K, const float *V, int cnt, float scale)
{
	for (int h = 0; h < G; h++)
		for (int t = 0; t < cnt; t++) {
			float s = 0;
			for (int d = 0; d < HD; d++)
				s += q[h * HD + d] * K[(size_t)t * HD + d];
			s *= scale;
			float m = st->m[h] > s ? st->m[h] : s;
			float c = st->m[h] == -INFINITY ? 0 : expf(st->m[h] - m), e = expf(s - m);
			st->l[h] = st->l[h] * c + e;
			for (int d = 0; d < HD; d++)
				st->acc[h * HD + d] = st->acc[h * HD + d] * c + e * V[(size_t)t * HD + d];
			st->m[h] = m;
		}
}

static void state_init(eng_split_state *st, float *m, float *l, float *acc)
{
	st->m = m, st->l = l, st->acc = acc;
	for (int h = 0; h < G; h++)
		m[h] = -INFINITY, l[h] = 0;
	memset(acc, 0, sizeof(float) * G * HD);
}

static void split_equals_direct(void **state)
{
	(void)state;
	uint64_t seed = 7;
	float *K = malloc(sizeof(float) * NB * B * HD), *V = malloc(sizeof(float) * NB * B * HD), q[G * HD];
	for (size_t i = 0; i < (size_t)NB * B * HD; i++)
		K[i] = frand(&seed) * 2, V[i] = frand(&seed);
	for (int i = 0; i < G * HD; i++)
		q[i] = frand(&seed);
	float scale = 1.0f / sqrtf((float)HD);
	int last_cnt = 5; /* the last block is partial */
	for (int sparse = 0; sparse < 2; sparse++) {
		int list[NB], n = 0;
		for (int b = 0; b < NB; b++)
			if (!sparse || b == 0 || b >= NB - 2 || (b * 7) % 5 == 1)
				list[n++] = b;
		/* the oracle: softmax over every attended key, in double */
		double want[G * HD];
		for (int h = 0; h < G; h++) {
			double mx = -INFINITY, den = 0, num[HD] = {0};
			for (int pass = 0; pass < 2; pass++)
				for (int i = 0; i < n; i++) {
					int cnt = list[i] == NB - 1 ? last_cnt : B;
					for (int t = 0; t < cnt; t++) {
						const float *k = K + ((size_t)list[i] * B + t) * HD, *v = V + ((size_t)list[i] * B + t) * HD;
						double s = 0;
						for (int d = 0; d < HD; d++)
							s += (double)q[h * HD + d] * k[d];
						s *= scale;
						if (pass == 0) {
							mx = s > mx ? s : mx;
						} else {
							double e = exp(s - mx);
							den += e;
							for (int d = 0; d < HD; d++)
								num[d] += e * v[d];
						}
					}
				}
			for (int d = 0; d < HD; d++)
				want[h * HD + d] = num[d] / den;
		}
		for (int maxp = 1; maxp <= 16; maxp++) {
			eng_split_part parts[16];
			int k = eng_split_plan(n, maxp, 1, parts);
			float m[G], l[G], acc[G * HD], pm[G], pl[G], pacc[G * HD], out[G * HD];
			eng_split_state total, part;
			state_init(&total, m, l, acc);
			for (int p = 0; p < k; p++) {
				state_init(&part, pm, pl, pacc);
				for (int i = parts[p].first; i < parts[p].first + parts[p].count; i++) {
					int b = list[i], cnt = b == NB - 1 ? last_cnt : B;
					attend(&part, q, K + (size_t)b * B * HD, V + (size_t)b * B * HD, cnt, scale);
				}
				eng_split_merge(&total, &part, G, HD);
			}
			/* an empty part changes nothing */
			float em[G], el[G], eacc[G * HD];
			eng_split_state empty;
			state_init(&empty, em, el, eacc);
			float before[G * HD];
			memcpy(before, acc, sizeof before);
			eng_split_merge(&total, &empty, G, HD);
			assert_memory_equal(before, acc, sizeof before);
			eng_split_finish(out, &total, G, HD);
			double err = 0, ref = 0;
			for (int i = 0; i < G * HD; i++) {
				err = fmax(err, fabs(out[i] - want[i]));
				ref = fmax(ref, fabs(want[i]));
			}
			if (err > 1e-5 * ref)
				fail_msg("%s, %d partitions: error %.3g of %.3g", sparse ? "sparse" : "dense", k, err, ref);
		}
	}
	free(K), free(V);
}

/* The batch's work list: every (row, KV head)'s blocks covered once and in
 * order, slots unique and dense, about `target` items when rows are few
 * (a single sequence splits its long lists), one item a task when rows
 * are many; too small a buffer is said. */
static void worklists_cover_the_batch(void **state)
{
	(void)state;
	eng_split_item items[4096];
	const int cases[][4] = {{1, 4, 132, 2}, {8, 4, 132, 2}, {64, 4, 132, 2}, {3, 2, 1000, 1}, {1, 1, 64, 8}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int rows = cases[c][0], kvh = cases[c][1], target = cases[c][2], minb = cases[c][3];
		int nb[256];
		for (int i = 0; i < rows * kvh; i++)
			nb[i] = (i * 37) % 5 == 0 ? 0 : 16 + (i * 53) % 300; /* some empty, some long */
		int n = eng_split_worklist(nb, rows, kvh, target, minb, items, 4096);
		assert_true(n >= 0);
		int next = 0;
		for (int t = 0; t < rows * kvh; t++) {
			int at = 0, parts = 0;
			while (next < n && items[next].row * kvh + items[next].kv_head == t) {
				assert_int_equal(items[next].first, at);
				assert_int_equal(items[next].slot, next);
				at += items[next].count;
				next++, parts++;
			}
			assert_int_equal(at, nb[t]);
			if (rows * kvh >= target)
				assert_true(parts <= 1);
		}
		assert_int_equal(next, n);
		if (rows * kvh < target && minb == 2 && rows == 1)
			assert_true(n >= target / 2); /* a lone sequence's long lists spread over the device */
		print_message("rows %d x %d KV heads, target %d: %d items\n", rows, kvh, target, n);
	}
	int nb[2] = {100, 100};
	assert_int_equal(eng_split_worklist(nb, 1, 2, 64, 1, items, 10), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plans_cover_the_list),
		cmocka_unit_test(split_equals_direct),
		cmocka_unit_test(worklists_cover_the_batch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
