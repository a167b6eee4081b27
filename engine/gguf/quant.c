/*
 * engine/gguf/quant.c: ggml's block formats, read and written one block at
 * a time (the plain path; the layouts are in README.md).
 */
#include "engine/gguf/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/backend.h"

#define QK 32   /* the simple formats' block */
#define QKK 256 /* the K-quants' super-block */

static const struct {
	uint32_t t;
	const char *name;
	int block;
	size_t size;
} types[] = {
	{ENG_GGML_F32, "F32", 1, 4},         {ENG_GGML_F16, "F16", 1, 2},         {ENG_GGML_BF16, "BF16", 1, 2},
	{ENG_GGML_Q8_0, "Q8_0", QK, 34},     {ENG_GGML_Q4_0, "Q4_0", QK, 18},     {ENG_GGML_Q4_1, "Q4_1", QK, 20},
	{ENG_GGML_Q5_0, "Q5_0", QK, 22},     {ENG_GGML_Q5_1, "Q5_1", QK, 24},     {ENG_GGML_IQ4_NL, "IQ4_NL", QK, 18},
	{ENG_GGML_Q2_K, "Q2_K", QKK, 84},    {ENG_GGML_Q3_K, "Q3_K", QKK, 110},   {ENG_GGML_Q4_K, "Q4_K", QKK, 144},   {ENG_GGML_Q5_K, "Q5_K", QKK, 176},
	{ENG_GGML_Q6_K, "Q6_K", QKK, 210},   {ENG_GGML_IQ4_XS, "IQ4_XS", QKK, 136},
};
#define NTYPES (sizeof types / sizeof types[0])

const char *eng_ggml_type_name(uint32_t t)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].t == t)
			return types[i].name;
	return "?";
}

bool eng_ggml_type_from_name(const char *name, uint32_t *t)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (!strcmp(name, types[i].name)) {
			*t = types[i].t;
			return true;
		}
	return false;
}

void eng_ggml_type_names(char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NTYPES && at < n; i++) {
		int k = snprintf(buf + at, n - at, "%s%s", i ? ", " : "", types[i].name);
		at += k > 0 ? (size_t)k : 0;
	}
}

const char *eng_ggml_type_known_name(uint32_t t)
{
	static const char *const all[] = {"F32",  "F16",  "Q4_0", "Q4_1", NULL,    NULL,    "Q5_0",  "Q5_1",
	                                  "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",  "Q5_K",  "Q6_K",  "Q8_K",
	                                  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
	                                  "I8",   "I16",  "I32",  "I64",  "F64",   "IQ1_M", "BF16"};
	return t < sizeof all / sizeof all[0] ? all[t] : NULL;
}

int eng_ggml_type_block(uint32_t t)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].t == t)
			return types[i].block;
	return 0;
}

size_t eng_ggml_type_size(uint32_t t)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].t == t)
			return types[i].size;
	return 0;
}

size_t eng_ggml_bytes(uint32_t t, uint64_t n)
{
	int b = eng_ggml_type_block(t);
	return b ? (size_t)(n / (uint64_t)b) * eng_ggml_type_size(t) : 0;
}

float eng_ggml_h2f(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return eng_f16_to_f32(h);
}

static void f2h(uint8_t *p, float f)
{
	uint16_t h = eng_f32_to_f16(f);
	memcpy(p, &h, 2);
}

static void pack_scale_min(uint8_t *q, const int *sc, const int *m)
{
	memset(q, 0, 12);
	for (int j = 0; j < 8; j++) {
		if (j < 4) {
			q[j] |= (uint8_t)(sc[j] & 63);
			q[j + 4] |= (uint8_t)(m[j] & 63);
		} else {
			q[j + 4] |= (uint8_t)((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
			q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
			q[j] |= (uint8_t)((m[j] >> 4) << 6);
		}
	}
}

/* Q6_K: a super-block's 256 values q (0 .. 63, the offset 32 on) into its
 * ql[128] and qh[64]: element 128 h + 32 r + l (r < 4) keeps its low four
 * bits in ql[64 h + 32 (r % 2) + l] (the high nibble for r >= 2) and its
 * two high bits in qh[32 h + l] at bits 2 r */
static void q6k_pack(uint8_t *b, const int *q)
{
	uint8_t *ql = b, *qh = b + 128;
	for (int h = 0; h < 2; h++)
		for (int l = 0; l < 32; l++) {
			const int *p = q + 128 * h;
			ql[64 * h + l] = (uint8_t)((p[l] & 0xF) | ((p[l + 64] & 0xF) << 4));
			ql[64 * h + l + 32] = (uint8_t)((p[l + 32] & 0xF) | ((p[l + 96] & 0xF) << 4));
			qh[32 * h + l] = (uint8_t)(((p[l] >> 4) & 3) | (((p[l + 32] >> 4) & 3) << 2) |
			                           (((p[l + 64] >> 4) & 3) << 4) | (((p[l + 96] >> 4) & 3) << 6));
		}
}

void eng_ggml_dequantize(float *y, const void *src, uint32_t t, size_t n)
{
	const uint8_t *b = src;
	switch (t) {
	case ENG_GGML_F32:
		memcpy(y, src, n * 4);
		return;
	case ENG_GGML_F16:
		eng_to_f32(y, src, ENG_F16, n);
		return;
	case ENG_GGML_BF16:
		eng_to_f32(y, src, ENG_BF16, n);
		return;
	case ENG_GGML_Q4_0:
		for (size_t k = 0; k < n / QK; k++, b += 18, y += QK) {
			float d = eng_ggml_h2f(b);
			for (int j = 0; j < 16; j++) {
				y[j] = (float)((b[2 + j] & 0xF) - 8) * d;
				y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
			}
		}
		return;
	case ENG_GGML_Q4_1:
		for (size_t k = 0; k < n / QK; k++, b += 20, y += QK) {
			float d = eng_ggml_h2f(b), m = eng_ggml_h2f(b + 2);
			for (int j = 0; j < 16; j++) {
				y[j] = (float)(b[4 + j] & 0xF) * d + m;
				y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
			}
		}
		return;
	case ENG_GGML_Q5_0:
	case ENG_GGML_Q5_1: {
		bool one = t == ENG_GGML_Q5_1;
		size_t bs = one ? 24 : 22;
		for (size_t k = 0; k < n / QK; k++, b += bs, y += QK) {
			float d = eng_ggml_h2f(b), m = one ? eng_ggml_h2f(b + 2) : 0;
			uint32_t qh;
			memcpy(&qh, b + (one ? 4 : 2), 4);
			const uint8_t *qs = b + (one ? 8 : 6);
			for (int j = 0; j < 16; j++) {
				int lo = (qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
				int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
				y[j] = one ? (float)lo * d + m : (float)(lo - 16) * d;
				y[j + 16] = one ? (float)hi * d + m : (float)(hi - 16) * d;
			}
		}
		return;
	}
	case ENG_GGML_Q8_0:
		for (size_t k = 0; k < n / QK; k++, b += 34, y += QK) {
			float d = eng_ggml_h2f(b);
			for (int j = 0; j < QK; j++)
				y[j] = (float)(int8_t)b[2 + j] * d;
		}
		return;
	case ENG_GGML_IQ4_NL: /* {f16 d; u8 qs[16]}: low nibbles the first 16 elements, x = d * value[q] */
		for (size_t k = 0; k < n / QK; k++, b += 18, y += QK) {
			float d = eng_ggml_h2f(b);
			for (int j = 0; j < 16; j++) {
				y[j] = d * (float)eng_ggml_iq4_value(b + 2, j);
				y[j + 16] = d * (float)eng_ggml_iq4_value(b + 2, j + 16);
			}
		}
		return;
	case ENG_GGML_IQ4_XS:
		for (size_t k = 0; k < n / QKK; k++, b += 136)
			for (int j = 0; j < 8; j++, y += QK) {
				float dl = eng_ggml_h2f(b) * (float)eng_ggml_iq4xs_scale(j, b);
				const uint8_t *qs = b + 8 + 16 * j;
				for (int l = 0; l < 16; l++) {
					y[l] = dl * (float)eng_ggml_iq4_value(qs, l);
					y[l + 16] = dl * (float)eng_ggml_iq4_value(qs, l + 16);
				}
			}
		return;
	case ENG_GGML_Q4_K:
	case ENG_GGML_Q5_K: {
		bool five = t == ENG_GGML_Q5_K;
		size_t bs = five ? 176 : 144;
		for (size_t k = 0; k < n / QKK; k++, b += bs) {
			float d = eng_ggml_h2f(b), dmin = eng_ggml_h2f(b + 2);
			const uint8_t *sc = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
			for (int c = 0; c < 4; c++, q += 32) {
				int s1, m1, s2, m2;
				eng_ggml_kscale_min(2 * c, sc, &s1, &m1);
				eng_ggml_kscale_min(2 * c + 1, sc, &s2, &m2);
				for (int l = 0; l < 32; l++) {
					int lo = q[l] & 0xF, hi = q[l] >> 4;
					if (five) {
						lo += ((qh[l] >> (2 * c)) & 1) << 4;
						hi += ((qh[l] >> (2 * c + 1)) & 1) << 4;
					}
					y[l] = d * (float)s1 * (float)lo - dmin * (float)m1;
					y[l + 32] = d * (float)s2 * (float)hi - dmin * (float)m2;
				}
				y += 64;
			}
		}
		return;
	}
	case ENG_GGML_Q2_K:
		for (size_t k = 0; k < n / QKK; k++, b += 84, y += QKK) {
			float d = eng_ggml_h2f(b + 80), dmin = eng_ggml_h2f(b + 82);
			for (int e = 0; e < QKK; e++) {
				int sc = b[e / 16] & 0xF, mn = b[e / 16] >> 4;
				y[e] = d * (float)sc * (float)eng_ggml_q2k_value(b, e) - dmin * (float)mn;
			}
		}
		return;
	case ENG_GGML_Q3_K:
		for (size_t k = 0; k < n / QKK; k++, b += 110, y += QKK) {
			float d = eng_ggml_h2f(b + 108);
			for (int e = 0; e < QKK; e++)
				y[e] = d * (float)eng_ggml_q3k_scale(e / 16, b + 96) * (float)eng_ggml_q3k_value(b, e);
		}
		return;
	case ENG_GGML_Q6_K:
		for (size_t k = 0; k < n / QKK; k++, b += 210) {
			const uint8_t *ql = b, *qh = b + 128;
			const int8_t *sc = (const int8_t *)(b + 192);
			float d = eng_ggml_h2f(b + 208);
			for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128)
				for (int l = 0; l < 32; l++) {
					int is = l / 16;
					int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
					int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
					int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
					int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
					y[l] = d * (float)sc[is] * (float)q1;
					y[l + 32] = d * (float)sc[is + 2] * (float)q2;
					y[l + 64] = d * (float)sc[is + 4] * (float)q3;
					y[l + 96] = d * (float)sc[is + 6] * (float)q4;
				}
		}
		return;
	}
}

const int8_t eng_ggml_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* a symmetric block: scale from the largest magnitude, q in [-lim, lim] */
static float amax_of(const float *x, int n)
{
	float a = 0;
	for (int i = 0; i < n; i++)
		a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
	return a;
}

static void range_of(const float *x, int n, float *lo, float *hi)
{
	*lo = x[0], *hi = x[0];
	for (int i = 1; i < n; i++) {
		*lo = x[i] < *lo ? x[i] : *lo;
		*hi = x[i] > *hi ? x[i] : *hi;
	}
}

/* The index of IQ4_NL's table entry whose d * value is nearest x (the
 * first of a tie; 8, the value nearest zero, where d is zero). */
static int iq4_nearest(float x, float d)
{
	int best = 8;
	for (int v = 0; v < 16 && d; v++)
		best = fabsf(x - d * (float)eng_ggml_iq4nl_values[v]) < fabsf(x - d * (float)eng_ggml_iq4nl_values[best])
		           ? v
		           : best;
	return best;
}

/* The element of x[0..n) with the largest magnitude, its sign kept (the first of a tie) */
static float signed_max(const float *x, int n)
{
	float m = 0;
	for (int j = 0; j < n; j++)
		m = fabsf(x[j]) > fabsf(m) ? x[j] : m;
	return m;
}

void eng_ggml_quantize(void *dst, const float *x, uint32_t t, size_t n)
{
	uint8_t *b = dst;
	switch (t) {
	case ENG_GGML_F32:
		memcpy(dst, x, n * 4);
		return;
	case ENG_GGML_F16:
	case ENG_GGML_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h = t == ENG_GGML_F16 ? eng_f32_to_f16(x[i]) : eng_f32_to_bf16(x[i]);
			memcpy(b + 2 * i, &h, 2);
		}
		return;
	case ENG_GGML_Q4_0:
	case ENG_GGML_Q5_0:
	case ENG_GGML_Q8_0: {
		int bits = t == ENG_GGML_Q4_0 ? 4 : t == ENG_GGML_Q5_0 ? 5 : 8, off = bits == 8 ? 0 : 1 << (bits - 1);
		int lim = bits == 8 ? 127 : off - 1;
		size_t bs = eng_ggml_type_size(t);
		for (size_t k = 0; k < n / QK; k++, b += bs, x += QK) {
			float d = amax_of(x, QK) / (float)lim;
			f2h(b, d);
			float dq = eng_ggml_h2f(b), inv = dq ? 1.0f / dq : 0;
			int q[QK];
			for (int j = 0; j < QK; j++)
				q[j] = clampi((int)lrintf(x[j] * inv), -lim - (bits == 8 ? 0 : 1), lim) + off;
			if (bits == 8) {
				for (int j = 0; j < QK; j++)
					b[2 + j] = (uint8_t)(int8_t)q[j];
			} else {
				uint8_t *qs = b + (bits == 5 ? 6 : 2);
				uint32_t qh = 0;
				for (int j = 0; j < 16; j++) {
					qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
					qh |= (uint32_t)((q[j] >> 4) & 1) << j;
					qh |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
				}
				if (bits == 5)
					memcpy(b + 2, &qh, 4);
			}
		}
		return;
	}
	case ENG_GGML_IQ4_NL:
		for (size_t k = 0; k < n / QK; k++, b += 18, x += QK) {
			/* the largest magnitude at the table's -127, each value to its nearest entry */
			f2h(b, signed_max(x, QK) / -127.0f);
			float d = eng_ggml_h2f(b);
			memset(b + 2, 0, 16);
			for (int j = 0; j < QK; j++)
				b[2 + j % 16] |= (uint8_t)(iq4_nearest(x[j], d) << (j < 16 ? 0 : 4));
		}
		return;
	case ENG_GGML_IQ4_XS:
		for (size_t k = 0; k < n / QKK; k++, b += 136, x += QKK) {
			/* each block's largest magnitude at the table's -127 (as IQ4_NL), the
			 * block scales on a signed 6-bit grid whose -32 is the largest of them;
			 * each value to its nearest entry under its block's d * scale */
			float s[8], smax = 0;
			for (int j = 0; j < 8; j++) {
				s[j] = signed_max(x + QK * j, QK) / -127.0f;
				smax = fabsf(s[j]) > fabsf(smax) ? s[j] : smax;
			}
			f2h(b, smax / -32.0f);
			float d = eng_ggml_h2f(b);
			memset(b + 2, 0, 134);
			for (int j = 0; j < 8; j++) {
				int u = (d ? clampi((int)lrintf(s[j] / d), -32, 31) : 0) + 32;
				b[4 + j / 2] |= (uint8_t)((u & 0xF) << (4 * (j % 2)));
				b[2 + j / 4] |= (uint8_t)((u >> 4) << (2 * (j % 4)));
				float dl = d * (float)(u - 32);
				for (int l = 0; l < QK; l++)
					b[8 + 16 * j + l % 16] |= (uint8_t)(iq4_nearest(x[QK * j + l], dl) << (l < 16 ? 0 : 4));
			}
		}
		return;
	case ENG_GGML_Q4_1:
	case ENG_GGML_Q5_1: {
		int bits = t == ENG_GGML_Q4_1 ? 4 : 5, top = (1 << bits) - 1;
		size_t bs = eng_ggml_type_size(t);
		for (size_t k = 0; k < n / QK; k++, b += bs, x += QK) {
			float lo, hi;
			range_of(x, QK, &lo, &hi);
			f2h(b, (hi - lo) / (float)top);
			f2h(b + 2, lo);
			float d = eng_ggml_h2f(b), m = eng_ggml_h2f(b + 2), inv = d ? 1.0f / d : 0;
			int q[QK];
			for (int j = 0; j < QK; j++)
				q[j] = clampi((int)lrintf((x[j] - m) * inv), 0, top);
			uint8_t *qs = b + (bits == 5 ? 8 : 4);
			uint32_t qh = 0;
			for (int j = 0; j < 16; j++) {
				qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
				qh |= (uint32_t)((q[j] >> 4) & 1) << j;
				qh |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
			}
			if (bits == 5)
				memcpy(b + 4, &qh, 4);
		}
		return;
	}
	case ENG_GGML_Q4_K:
	case ENG_GGML_Q5_K: {
		bool five = t == ENG_GGML_Q5_K;
		int top = five ? 31 : 15;
		size_t bs = five ? 176 : 144;
		for (size_t k = 0; k < n / QKK; k++, b += bs, x += QKK) {
			/* each sub-block's range: scale (hi - lo) / top, min -lo (>= 0);
			 * super-block d and dmin put the largest on the 6-bit grid */
			float ss[8], mm[8], smax = 0, mmax = 0;
			for (int j = 0; j < 8; j++) {
				float lo, hi;
				range_of(x + 32 * j, 32, &lo, &hi);
				if (lo > 0)
					lo = 0;
				ss[j] = (hi - lo) / (float)top;
				mm[j] = -lo;
				smax = ss[j] > smax ? ss[j] : smax;
				mmax = mm[j] > mmax ? mm[j] : mmax;
			}
			f2h(b, smax / 63.0f);
			f2h(b + 2, mmax / 63.0f);
			float d = eng_ggml_h2f(b), dmin = eng_ggml_h2f(b + 2);
			int sc[8], mi[8];
			for (int j = 0; j < 8; j++) {
				sc[j] = d ? clampi((int)lrintf(ss[j] / d), 0, 63) : 0;
				mi[j] = dmin ? clampi((int)lrintf(mm[j] / dmin), 0, 63) : 0;
			}
			pack_scale_min(b + 4, sc, mi);
			uint8_t *qh = b + 16, *q = b + (five ? 48 : 16);
			if (five)
				memset(qh, 0, 32);
			for (int c = 0; c < 4; c++, q += 32)
				for (int l = 0; l < 32; l++) {
					int v[2];
					for (int h = 0; h < 2; h++) {
						int j = 2 * c + h;
						float ds = d * (float)sc[j], dm = dmin * (float)mi[j];
						v[h] = ds ? clampi((int)lrintf((x[64 * c + 32 * h + l] + dm) / ds), 0, top) : 0;
					}
					q[l] = (uint8_t)((v[0] & 0xF) | ((v[1] & 0xF) << 4));
					if (five)
						qh[l] |= (uint8_t)((((v[0] >> 4) & 1) << (2 * c)) | (((v[1] >> 4) & 1) << (2 * c + 1)));
				}
		}
		return;
	}
	case ENG_GGML_Q2_K:
		for (size_t k = 0; k < n / QKK; k++, b += 84, x += QKK) {
			/* sixteen sub-blocks of 16: each one's range over q in [0, 3] (scale (hi - lo) / 3,
			 * minimum -lo >= 0), the super-block's d and dmin putting the largest on 4 bits */
			float s[16], m[16], smax = 0, mmax = 0;
			for (int j = 0; j < 16; j++) {
				float lo, hi;
				range_of(x + 16 * j, 16, &lo, &hi);
				if (lo > 0)
					lo = 0;
				s[j] = (hi - lo) / 3.0f, m[j] = -lo;
				smax = s[j] > smax ? s[j] : smax;
				mmax = m[j] > mmax ? m[j] : mmax;
			}
			f2h(b + 80, smax / 15.0f);
			f2h(b + 82, mmax / 15.0f);
			float d = eng_ggml_h2f(b + 80), dmin = eng_ggml_h2f(b + 82);
			memset(b, 0, 80);
			for (int j = 0; j < 16; j++) {
				int sc = d ? clampi((int)lrintf(s[j] / d), 0, 15) : 0, mn = dmin ? clampi((int)lrintf(m[j] / dmin), 0, 15) : 0;
				b[j] = (uint8_t)(sc | mn << 4);
				float ds = d * (float)sc, dm = dmin * (float)mn;
				for (int l = 0; l < 16; l++) {
					int e = 16 * j + l;
					int q = ds ? clampi((int)lrintf((x[e] + dm) / ds), 0, 3) : 0;
					b[16 + 32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * (e % 128 / 32)));
				}
			}
		}
		return;
	case ENG_GGML_Q3_K:
		for (size_t k = 0; k < n / QKK; k++, b += 110, x += QKK) {
			/* sixteen sub-blocks of 16: a signed 6-bit scale each over q in [-4, 3], each sub-block's
			 * largest magnitude at -4 and the largest scale at -32 (signed, so that the wider end of
			 * each range takes the extreme) */
			float s[16], smax = 0;
			for (int j = 0; j < 16; j++) {
				float m = 0;
				for (int l = 0; l < 16; l++)
					m = fabsf(x[16 * j + l]) > fabsf(m) ? x[16 * j + l] : m;
				s[j] = m / -4.0f;
				smax = fabsf(s[j]) > fabsf(smax) ? s[j] : smax;
			}
			f2h(b + 108, smax / -32.0f);
			float d = eng_ggml_h2f(b + 108);
			memset(b, 0, 108);
			for (int j = 0; j < 16; j++) {
				int sc = d ? clampi((int)lrintf(s[j] / d), -32, 31) : 0, u = sc + 32;
				b[96 + j % 8] |= (uint8_t)((u & 0xF) << (j < 8 ? 0 : 4));
				b[104 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
				float ds = d * (float)sc;
				for (int l = 0; l < 16; l++) {
					int e = 16 * j + l, c = e / 32, i = e % 32;
					int q = (ds ? clampi((int)lrintf(x[e] / ds), -4, 3) : 0) + 4;
					b[32 + 32 * (c / 4) + i] |= (uint8_t)((q & 3) << (2 * (c % 4)));
					b[i] |= (uint8_t)((q >> 2) << c);
				}
			}
		}
		return;
	case ENG_GGML_Q6_K:
		for (size_t k = 0; k < n / QKK; k++, b += 210, x += QKK) {
			/* sixteen sub-blocks of 16: an 8-bit scale each over a 6-bit q in [-32, 31] */
			float s[16], smax = 0;
			for (int j = 0; j < 16; j++) {
				s[j] = amax_of(x + 16 * j, 16) / 31.0f;
				smax = s[j] > smax ? s[j] : smax;
			}
			f2h(b + 208, smax / 127.0f);
			float d = eng_ggml_h2f(b + 208);
			int8_t *sc = (int8_t *)(b + 192);
			for (int j = 0; j < 16; j++)
				sc[j] = (int8_t)(d ? clampi((int)lrintf(s[j] / d), -128, 127) : 0);
			int q[QKK];
			for (int e = 0; e < QKK; e++) {
				float ds = d * (float)sc[e / 16];
				q[e] = (ds ? clampi((int)lrintf(x[e] / ds), -32, 31) : 0) + 32;
			}
			q6k_pack(b, q);
		}
		return;
	}
}
