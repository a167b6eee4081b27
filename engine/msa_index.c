/*
 * engine/msa_index.c: the mean selector's index search on the fast path:
 * block scores q . ksum against the per-page key sums (through the CPU
 * kernels' dot4), a running top-k with ties to the lower block, and the
 * superblock box bound that skips what cannot enter the top-k without
 * changing the choice. msa.c holds the reference selection it is tested
 * against.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/msa_index.h"

/* sum over the group's query heads: sum_h q_h . mean_b == (sum_h q_h) .
 * ksum_b / B, one dot a block */
void eng_msa_group_qsum(float *qsum, const float *q, int g, int group, int hd)
{
	memcpy(qsum, q + (size_t)g * group * hd, (size_t)hd * sizeof(float));
	for (int h = 1; h < group; h++)
		for (int j = 0; j < hd; j++)
			qsum[j] += q[((size_t)g * group + h) * hd + j];
}

/* The attended blocks ascending: sinks, the selected, the local window. */
int eng_msa_compose_list(const eng_msa *a, long cur, int *topi, int nt, int *blocks)
{
	for (int i = 1; i < nt; i++)
		for (int j = i; j > 0 && topi[j - 1] > topi[j]; j--) {
			int t = topi[j];
			topi[j] = topi[j - 1];
			topi[j - 1] = t;
		}
	int n = 0;
	long ns = a->sink < cur + 1 ? a->sink : cur + 1, last = cur - a->local;
	for (long b = 0; b < ns; b++)
		blocks[n++] = (int)b;
	for (int i = 0; i < nt; i++)
		blocks[n++] = topi[i];
	for (long b = last + 1 > ns ? last + 1 : ns; b <= cur; b++)
		blocks[n++] = (int)b;
	return n;
}

eng_msa_index eng_msa_seq_index(const eng_seq *s, int layer)
{
	const eng_kv_pool *p = &s->m->kv;
	return (eng_msa_index){s->kidx[layer], s->kbox[layer], p->kvh, p->hd, p->block};
}

/* An upper bound on any computed score q . k of a row k inside the box
 * [mn, mx] (element-wise): S1 = sum_d max(q_d mx_d, q_d mn_d) is the
 * exact maximum up to the rounding of its own products and sum; S3 =
 * sum_d |q_d| max(|mx_d|, |mn_d|) bounds sum |q_d k_d|, which scales the
 * rounding both that sum and a block's own dot product can carry
 * (2 gamma_hd + u, generously rounded up). */
static float box_margin(int hd)
{
	double u = ldexp(1, -24), gam = (hd + 8) * u / (1 - (hd + 8) * u);
	return (float)(1.01 * (2 * gam + 1.01 * u) / (1 - gam) + ldexp(1, -22));
}

/* c: box_margin(hd), computed once a scan */
static float box_bound(const float *q, const float *mx, const float *mn, int hd, float c)
{
	int d = 0;
	float s1 = 0, s3 = 0;
#ifdef ENG_AVX2
	__m256 v1 = _mm256_setzero_ps(), v3 = v1;
	const __m256 sign = _mm256_set1_ps(-0.0f);
	for (; d + 8 <= hd; d += 8) {
		__m256 qv = _mm256_loadu_ps(q + d), hi = _mm256_loadu_ps(mx + d), lo = _mm256_loadu_ps(mn + d);
		v1 = _mm256_add_ps(v1, _mm256_max_ps(_mm256_mul_ps(qv, hi), _mm256_mul_ps(qv, lo)));
		__m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, hi), _mm256_andnot_ps(sign, lo));
		v3 = _mm256_fmadd_ps(_mm256_andnot_ps(sign, qv), m, v3);
	}
	float t1[8], t3[8];
	_mm256_storeu_ps(t1, v1);
	_mm256_storeu_ps(t3, v3);
	for (int i = 0; i < 8; i++)
		s1 += t1[i], s3 += t3[i];
#endif
	for (; d < hd; d++) {
		float a = q[d] * mx[d], b = q[d] * mn[d];
		/* NaN anywhere must reach the result (fmaxf would drop it) */
		s1 += a != a || b != b ? NAN : a > b ? a : b;
		float ah = fabsf(mx[d]), bh = fabsf(mn[d]);
		s3 += fabsf(q[d]) * (ah != ah || bh != bh ? NAN : ah > bh ? ah : bh);
	}
	return s1 + c * s3 + fabsf(s1) * 0x1p-22f;
}

/* The plain scan of [b0, b1] into the running top-k. */
static void scan_exact(const eng_msa_index *ix, int g, const float *qsum, long b0, long b1, int K, float *top,
		       int *topi, int *nt)
{
	float inv = 1.0f / (float)ix->block;
	for (long b = b0; b <= b1; b += 4) {
		float sc[4];
		int nb = eng_msa_block_scores4(sc, qsum, ix->k, b, b1, ix->kvh, g, ix->hd);
		for (int t = 0; t < nb; t++)
			eng_msa_topk_push(top, topi, nt, K, sc[t] * inv, (int)(b + t));
	}
}

int eng_msa_index_topk(const eng_msa_index *ix, int g, const float *qsum, long b0, long b1, int K, bool bound,
		       float *top, int *topi)
{
	int nt = 0, hd = ix->hd;
	if (K <= 0 || b1 < b0)
		return 0;
	if (!bound || !ix->box) {
		scan_exact(ix, g, qsum, b0, b1, K, top, topi, &nt);
		return nt;
	}
	size_t kd = (size_t)ix->kvh * hd;
	float inv = 1.0f / (float)ix->block, c = box_margin(hd);
	for (long b = b0; b <= b1;) {
		long sb = b / ENG_MSA_SUPER, e = (sb + 1) * ENG_MSA_SUPER - 1 < b1 ? (sb + 1) * ENG_MSA_SUPER - 1 : b1;
		if (nt == K) {
			const float *mx = ix->box + (size_t)sb * 2 * kd + (size_t)g * hd;
			/* (rounding is monotone: no later block's score divided
			 * by the block size can pass the bound's) */
			if (box_bound(qsum, mx, mx + kd, hd, c) * inv <= top[K - 1]) {
				b = e + 1;
				continue;
			}
		}
		scan_exact(ix, g, qsum, b, e, K, top, topi, &nt);
		b = e + 1;
	}
	return nt;
}

int eng_msa_select_fast(const eng_model *m, const eng_seq *s, int layer, long pos, int g, const float *q,
			int *blocks, float *qsum, float *top, int *topi)
{
	const eng_kv_pool *p = &m->kv;
	const eng_msa *a = &m->msa;
	int B = p->block, hd = p->hd, K = a->top_k, nt = 0;
	long cur = pos / B, last = cur - a->local; /* candidates [sink, last] */
	eng_msa_group_qsum(qsum, q, g, m->c.heads / m->c.kv_heads, hd);
	eng_msa_index ix = eng_msa_seq_index(s, layer);
	nt = eng_msa_index_topk(&ix, g, qsum, a->sink, last, K, true, top, topi);
	return eng_msa_compose_list(a, cur, topi, nt, blocks);
}
