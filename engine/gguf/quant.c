/*
 * engine/gguf/quant.c: ggml's block formats, read and written one block at
 * a time (the plain path; the layouts are in README.md).
 */
#include "engine/gguf/quant.h"

#include <math.h>
#include <pthread.h>
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
	{ENG_GGML_Q6_K, "Q6_K", QKK, 210},   {ENG_GGML_IQ4_XS, "IQ4_XS", QKK, 136}, {ENG_GGML_IQ3_XXS, "IQ3_XXS", QKK, 98},
	{ENG_GGML_IQ3_S, "IQ3_S", QKK, 110},
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
	case ENG_GGML_IQ3_XXS:
		for (size_t k = 0; k < n / QKK; k++, b += 98, y += QKK) {
			float d = eng_ggml_h2f(b);
			for (int e = 0; e < QKK; e++) {
				float db = d * (0.5f + (float)eng_ggml_iq3xxs_ls(b, e / 32)) * 0.5f;
				y[e] = db * (float)eng_ggml_iq3xxs_value(b, e);
			}
		}
		return;
	case ENG_GGML_IQ3_S:
		for (size_t k = 0; k < n / QKK; k++, b += 110, y += QKK) {
			float d = eng_ggml_h2f(b);
			for (int e = 0; e < QKK; e++)
				y[e] = d * (float)(1 + 2 * eng_ggml_iq3s_ls(b, e / 32)) * (float)eng_ggml_iq3s_value(b, e);
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

const uint16_t eng_ggml_iq3xxs_grid[256] = {
	0x000, 0x002, 0x004, 0x009, 0x00b, 0x00f, 0x010, 0x012, 0x019, 0x022, 0x03b, 0x03d, 0x041, 0x043, 0x048, 0x04a,
	0x051, 0x055, 0x058, 0x05a, 0x061, 0x06c, 0x078, 0x080, 0x082, 0x084, 0x089, 0x090, 0x092, 0x099, 0x09b, 0x09f,
	0x0a9, 0x0af, 0x0bd, 0x0c1, 0x0c7, 0x0c8, 0x0ca, 0x0d5, 0x0f8, 0x10b, 0x11f, 0x124, 0x12f, 0x13b, 0x13d, 0x141,
	0x147, 0x15a, 0x16a, 0x19d, 0x1b4, 0x1c8, 0x1cc, 0x1ce, 0x1e3, 0x1f1, 0x201, 0x203, 0x208, 0x20a, 0x211, 0x213,
	0x218, 0x21a, 0x21c, 0x227, 0x228, 0x240, 0x242, 0x249, 0x250, 0x252, 0x281, 0x283, 0x288, 0x28a, 0x291, 0x298,
	0x2ba, 0x2c0, 0x2c2, 0x2d0, 0x2d9, 0x2e6, 0x2f6, 0x301, 0x305, 0x328, 0x350, 0x354, 0x366, 0x379, 0x385, 0x3d2,
	0x3e0, 0x400, 0x402, 0x409, 0x40b, 0x410, 0x412, 0x416, 0x419, 0x422, 0x441, 0x443, 0x445, 0x448, 0x44a, 0x451,
	0x458, 0x473, 0x477, 0x478, 0x480, 0x482, 0x489, 0x48f, 0x490, 0x492, 0x49f, 0x4a0, 0x4ad, 0x4c1, 0x4c8, 0x4cc,
	0x4f8, 0x4fc, 0x51d, 0x52b, 0x543, 0x557, 0x561, 0x57c, 0x5c1, 0x5c3, 0x5ce, 0x5e5, 0x601, 0x608, 0x60a, 0x611,
	0x613, 0x628, 0x635, 0x63a, 0x640, 0x642, 0x650, 0x659, 0x664, 0x666, 0x681, 0x683, 0x688, 0x695, 0x6aa, 0x6ba,
	0x6c9, 0x6db, 0x718, 0x727, 0x73a, 0x740, 0x746, 0x752, 0x76d, 0x78c, 0x79e, 0x7b3, 0x7db, 0x7f0, 0x804, 0x80f,
	0x81d, 0x81f, 0x82b, 0x82f, 0x87c, 0x890, 0x89f, 0x8a0, 0x8b0, 0x8b6, 0x8c7, 0x8e5, 0x904, 0x929, 0x934, 0x955,
	0x963, 0x978, 0x9c5, 0x9c8, 0x9ca, 0x9d8, 0xa0a, 0xa21, 0xa38, 0xa40, 0xa46, 0xa56, 0xa6d, 0xa8c, 0xa9a, 0xaba,
	0xac2, 0xaeb, 0xb08, 0xb13, 0xb17, 0xb3a, 0xb42, 0xb59, 0xba8, 0xbd4, 0xbe2, 0xc14, 0xc24, 0xc26, 0xc34, 0xc51,
	0xc71, 0xc8f, 0xcb4, 0xcd8, 0xcde, 0xd24, 0xd45, 0xd6a, 0xd9b, 0xdc3, 0xdd1, 0xe03, 0xe05, 0xe07, 0xe08, 0xe1a,
	0xe2a, 0xe56, 0xe60, 0xe8a, 0xea5, 0xeaa, 0xec0, 0xecd, 0xedb, 0xef0, 0xf11, 0xf21, 0xf40, 0xf42, 0xf54, 0xf98,
};

const uint16_t eng_ggml_iq3s_grid[512] = {
	0x000, 0x001, 0x002, 0x005, 0x007, 0x008, 0x009, 0x00a, 0x00c, 0x00e, 0x010, 0x011, 0x015, 0x01b, 0x020, 0x022,
	0x025, 0x027, 0x029, 0x02b, 0x030, 0x032, 0x039, 0x03c, 0x03f, 0x040, 0x041, 0x042, 0x044, 0x048, 0x049, 0x04d,
	0x050, 0x053, 0x057, 0x059, 0x05d, 0x064, 0x071, 0x075, 0x07a, 0x080, 0x081, 0x085, 0x087, 0x088, 0x08b, 0x08e,
	0x091, 0x095, 0x098, 0x09c, 0x0a2, 0x0a5, 0x0a7, 0x0a9, 0x0ab, 0x0b8, 0x0bb, 0x0c3, 0x0c9, 0x0cd, 0x0d0, 0x0d2,
	0x0d9, 0x0db, 0x0de, 0x0e4, 0x0e8, 0x0ea, 0x0f7, 0x0f9, 0x0fd, 0x100, 0x10b, 0x10f, 0x111, 0x114, 0x11a, 0x120,
	0x123, 0x129, 0x138, 0x142, 0x144, 0x150, 0x152, 0x156, 0x15b, 0x161, 0x165, 0x167, 0x176, 0x17b, 0x186, 0x189,
	0x18b, 0x199, 0x1aa, 0x1b9, 0x1c0, 0x1c2, 0x1c4, 0x1d0, 0x1d2, 0x1d6, 0x1db, 0x1e8, 0x1ec, 0x200, 0x201, 0x202,
	0x204, 0x208, 0x209, 0x20b, 0x20d, 0x20f, 0x210, 0x212, 0x219, 0x21c, 0x21e, 0x22c, 0x22e, 0x231, 0x23a, 0x240,
	0x241, 0x243, 0x246, 0x248, 0x24c, 0x251, 0x258, 0x25b, 0x261, 0x268, 0x26a, 0x278, 0x27e, 0x280, 0x28a, 0x28d,
	0x28f, 0x290, 0x294, 0x29a, 0x2a0, 0x2a3, 0x2ad, 0x2b0, 0x2ba, 0x2c1, 0x2c4, 0x2c7, 0x2c8, 0x2cb, 0x2d1, 0x2d7,
	0x2d8, 0x2dc, 0x2e1, 0x2f2, 0x2f8, 0x303, 0x305, 0x30a, 0x30c, 0x319, 0x31b, 0x322, 0x326, 0x328, 0x32c, 0x341,
	0x348, 0x34b, 0x351, 0x358, 0x35a, 0x369, 0x390, 0x394, 0x397, 0x3a4, 0x3a6, 0x3c1, 0x3c3, 0x3c8, 0x3ca, 0x3d1,
	0x3dd, 0x3e1, 0x3f2, 0x3f8, 0x400, 0x401, 0x403, 0x405, 0x407, 0x408, 0x40a, 0x40c, 0x40e, 0x411, 0x413, 0x417,
	0x418, 0x41a, 0x421, 0x423, 0x425, 0x428, 0x42a, 0x437, 0x438, 0x43b, 0x43d, 0x440, 0x442, 0x448, 0x44b, 0x44f,
	0x452, 0x455, 0x459, 0x45c, 0x462, 0x469, 0x481, 0x484, 0x487, 0x491, 0x493, 0x498, 0x49f, 0x4a1, 0x4ab, 0x4af,
	0x4b9, 0x4bc, 0x4c0, 0x4c2, 0x4c5, 0x4c9, 0x4d2, 0x4d4, 0x4d9, 0x4db, 0x4e2, 0x4e8, 0x4f6, 0x501, 0x507, 0x510,
	0x513, 0x51a, 0x51d, 0x521, 0x53a, 0x53d, 0x544, 0x549, 0x552, 0x55f, 0x560, 0x56b, 0x578, 0x580, 0x582, 0x587,
	0x591, 0x5ad, 0x5b1, 0x5c5, 0x5c9, 0x5d6, 0x5d8, 0x5e3, 0x5e8, 0x602, 0x609, 0x60b, 0x60d, 0x60f, 0x612, 0x619,
	0x61b, 0x61d, 0x622, 0x624, 0x627, 0x629, 0x633, 0x639, 0x641, 0x643, 0x645, 0x64c, 0x651, 0x653, 0x660, 0x670,
	0x67a, 0x67e, 0x680, 0x68a, 0x690, 0x69a, 0x69c, 0x6a8, 0x6c1, 0x6c8, 0x6cc, 0x6d1, 0x6d3, 0x6d7, 0x6d8, 0x6e1,
	0x6e3, 0x6e7, 0x6ed, 0x6fb, 0x703, 0x709, 0x70e, 0x712, 0x719, 0x72a, 0x730, 0x734, 0x741, 0x748, 0x74a, 0x755,
	0x75a, 0x764, 0x76e, 0x77b, 0x78e, 0x7a1, 0x7c1, 0x7c3, 0x7d0, 0x7d2, 0x7dd, 0x800, 0x804, 0x80a, 0x810, 0x814,
	0x817, 0x81a, 0x821, 0x828, 0x838, 0x842, 0x847, 0x849, 0x84b, 0x852, 0x858, 0x85d, 0x863, 0x869, 0x86d, 0x881,
	0x883, 0x888, 0x88d, 0x891, 0x89b, 0x8a0, 0x8af, 0x8b2, 0x8b8, 0x8c4, 0x8c9, 0x8cb, 0x8d0, 0x8d2, 0x8d9, 0x8dd,
	0x900, 0x902, 0x914, 0x91f, 0x920, 0x939, 0x945, 0x947, 0x951, 0x972, 0x98b, 0x99c, 0x9b0, 0x9c8, 0x9cd, 0x9d8,
	0x9e3, 0x9e9, 0xa02, 0xa08, 0xa0c, 0xa12, 0xa20, 0xa24, 0xa27, 0xa2a, 0xa36, 0xa3c, 0xa41, 0xa43, 0xa45, 0xa4a,
	0xa51, 0xa5a, 0xa7a, 0xa80, 0xa89, 0xa93, 0xa98, 0xa9e, 0xaab, 0xac2, 0xac7, 0xac8, 0xad7, 0xae4, 0xae9, 0xaf5,
	0xafb, 0xb01, 0xb04, 0xb10, 0xb1a, 0xb26, 0xb4a, 0xb56, 0xb69, 0xb6b, 0xba2, 0xbc2, 0xbc4, 0xbd2, 0xc09, 0xc0b,
	0xc0d, 0xc19, 0xc1b, 0xc30, 0xc40, 0xc50, 0xc57, 0xc74, 0xc8a, 0xc9c, 0xca2, 0xcad, 0xcb2, 0xcb8, 0xcc0, 0xccc,
	0xcd1, 0xce0, 0xd15, 0xd23, 0xd32, 0xd40, 0xd43, 0xd5c, 0xd70, 0xd85, 0xda0, 0xdc9, 0xdcb, 0xe00, 0xe04, 0xe07,
	0xe10, 0xe12, 0xe1e, 0xe20, 0xe2c, 0xe32, 0xe42, 0xe49, 0xe54, 0xe63, 0xe65, 0xe81, 0xe84, 0xe88, 0xe8e, 0xe91,
	0xe98, 0xea9, 0xec2, 0xeda, 0xedd, 0xeeb, 0xf01, 0xf05, 0xf0b, 0xf10, 0xf28, 0xf52, 0xf62, 0xf82, 0xf99, 0xfc0,
};

const int8_t eng_ggml_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

bool eng_ggml_f16_half(uint16_t h, uint16_t *out)
{
	int ex = (h >> 10) & 0x1F, sign = h & 0x8000, mant = h & 0x3FF;
	if (ex == 0x1F || (ex <= 1 && (h & 1)))
		return false;
	/* the exponent one lower, or a subnormal's bits shifted */
	*out = ex > 1 ? (uint16_t)(sign | (ex - 1) << 10 | mant) : (uint16_t)(sign | ((h & 0x7FFF) >> 1));
	return true;
}

bool eng_ggml_iq3_to_q6k(uint8_t *dst, const uint8_t *src, uint32_t t, size_t nblocks)
{
	const int xxs = t == ENG_GGML_IQ3_XXS;
	const size_t bs = xxs ? 98 : 110;
	for (size_t k = 0; k < nblocks; k++, src += bs, dst += 210) {
		uint16_t h;
		memcpy(&h, src, 2);
		if (xxs && !eng_ggml_f16_half(h, &h))
			return false;
		int q[QKK];
		for (int e = 0; e < QKK; e++)
			q[e] = (xxs ? eng_ggml_iq3xxs_value(src, e) / 2 : eng_ggml_iq3s_value(src, e)) + 32;
		q6k_pack(dst, q);
		for (int j = 0; j < 16; j++)
			dst[192 + j] = (uint8_t)(int8_t)(1 + 2 * (xxs ? eng_ggml_iq3xxs_ls(src, j / 2) : eng_ggml_iq3s_ls(src, j / 2)));
		memcpy(dst + 208, &h, 2);
	}
	return true;
}

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

/* IQ3's grids searched: for each of the 4096 codes of four 3-bit level
 * indices, the grid entry nearest to it (squared distance of the levels'
 * values; the first of equals), made once */
static uint16_t iq3_near[2][4096];
static pthread_once_t iq3_once = PTHREAD_ONCE_INIT;

static void iq3_near_init(void)
{
	for (int s = 0; s < 2; s++) {
		int entries = s ? 512 : 256;
		for (int c = 0; c < 4096; c++) {
			long best = -1;
			for (int i = 0; i < entries; i++) {
				long dist = 0;
				for (int j = 0; j < 4; j++) {
					int want = s ? 2 * ((c >> (3 * j)) & 7) + 1 : eng_ggml_iq3xxs_mag_of_level((c >> (3 * j)) & 7);
					int got = s ? eng_ggml_iq3s_mag(i, j) : eng_ggml_iq3xxs_mag(i, j);
					dist += (long)(want - got) * (want - got);
				}
				if (best < 0 || dist < best)
					best = dist, iq3_near[s][c] = (uint16_t)i;
			}
		}
	}
}

/* The grid entry for the magnitudes v[0..4) under scale sc (each to its
 * nearest level, then iq3_near), adding its squared error to *err */
static int iq3_entry(const float *v, float sc, int xxs, double *err)
{
	int code = 0;
	for (int j = 0; j < 4; j++) {
		float a = sc > 0 ? fabsf(v[j]) / sc : 0.0f;
		int lv = 0;
		if (xxs) {
			for (int l = 1; l < 8; l++)
				if (fabsf(a - (float)eng_ggml_iq3xxs_mag_of_level(l)) < fabsf(a - (float)eng_ggml_iq3xxs_mag_of_level(lv)))
					lv = l;
		} else {
			lv = clampi((int)lrintf((a - 1.0f) / 2.0f), 0, 7);
		}
		code |= lv << (3 * j);
	}
	int e = iq3_near[!xxs][code];
	for (int j = 0; j < 4; j++) {
		float m = sc * (float)(xxs ? eng_ggml_iq3xxs_mag(e, j) : eng_ggml_iq3s_mag(e, j));
		*err += ((double)fabsf(v[j]) - m) * ((double)fabsf(v[j]) - m);
	}
	return e;
}

/* One IQ3 super-block of x (IQ3_XXS's or IQ3_S's levels): the
 * super-block's d putting the largest block's largest magnitude at the top
 * level under the top 4-bit multiplier; each block of 32 the multiplier
 * whose grid entries (iq3_entry) come nearest its magnitudes; IQ3_XXS's
 * eighth sign of a group of eight is the parity of the seven stored, so an
 * odd count of minus signs gives up the smallest magnitude's. Not
 * llama.cpp's search (no importance, a coarser choice of grid entries):
 * files from it differ in bits but read the same. */
static void iq3_quantize_block(uint8_t *b, const float *x, int xxs)
{
	pthread_once(&iq3_once, iq3_near_init);
	static const float top_mul[2] = {31.0f / 4.0f, 31.0f}; /* (0.5 + 15) 0.5 and 1 + 2 * 15 */
	const int top = xxs ? 62 : 15;
	float amax[8], mx = 0.0f;
	for (int k = 0; k < 8; k++) {
		amax[k] = amax_of(x + 32 * k, 32);
		mx = amax[k] > mx ? amax[k] : mx;
	}
	memset(b, 0, xxs ? 98 : 110);
	f2h(b, mx / ((float)top * top_mul[!xxs]));
	float d = eng_ggml_h2f(b);
	for (int k = 0; k < 8; k++) {
		/* the multiplier: XXS (0.5 + ls) 0.5, S 1 + 2 ls; the one of least error */
		int ls = 0;
		double best = -1;
		for (int c = 0; c < 16; c++) {
			float sc = xxs ? d * (0.5f + (float)c) * 0.5f : d * (float)(1 + 2 * c);
			double err = 0;
			for (int g = 0; g < 8; g++)
				iq3_entry(x + 32 * k + 4 * g, sc, xxs, &err);
			if (best < 0 || err < best)
				best = err, ls = c;
		}
		float sc = xxs ? d * (0.5f + (float)ls) * 0.5f : d * (float)(1 + 2 * ls);
		uint32_t aux = (uint32_t)ls << 28;
		for (int g = 0; g < 8; g++) {
			double unused = 0;
			int e = iq3_entry(x + 32 * k + 4 * g, sc, xxs, &unused);
			if (xxs) {
				b[2 + 8 * k + g] = (uint8_t)e;
			} else {
				b[2 + 8 * k + g] = (uint8_t)(e & 255);
				b[66 + k] |= (uint8_t)((e >> 8) << g);
			}
		}
		for (int h = 0; h < 4; h++) { /* the signs of each group of eight */
			const float *v = x + 32 * k + 8 * h;
			int signs = 0, small = 0;
			for (int j = 0; j < 8; j++) {
				signs |= (v[j] < 0) << j;
				small = fabsf(v[j]) < fabsf(v[small]) ? j : small;
			}
			if (xxs) {
				if (__builtin_parity((unsigned)signs))
					signs ^= 1 << small;
				aux |= (uint32_t)(signs & 127) << (7 * h);
			} else {
				b[74 + 4 * k + h] = (uint8_t)signs;
			}
		}
		if (xxs)
			memcpy(b + 66 + 4 * k, &aux, 4);
		else
			b[106 + k / 2] |= (uint8_t)(ls << (4 * (k % 2)));
	}
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
	case ENG_GGML_IQ3_XXS:
	case ENG_GGML_IQ3_S:
		for (size_t k = 0; k < n / QKK; k++, b += eng_ggml_type_size(t), x += QKK)
			iq3_quantize_block(b, x, t == ENG_GGML_IQ3_XXS);
		return;
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
