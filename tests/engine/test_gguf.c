/* GGUF: every block type round-trips through the quantizer (the blocks
 * read again by an element-indexed decoder written here from the layouts,
 * bit for bit with the library's; errors within each type's bound); files
 * from the writer read back whole; truncations, 20,000 mutated headers and
 * crafted bad files are refused by name, never crash. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "engine/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"

static float h2f(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return eng_f16_to_f32(h);
}

/* element e of a block of type t, read straight from the layout */
static float elem(const uint8_t *b, uint32_t t, int e)
{
	switch (t) {
	case ENG_GGML_Q4_0: {
		int q = e < 16 ? b[2 + e] & 0xF : b[2 + e - 16] >> 4;
		return (float)(q - 8) * h2f(b);
	}
	case ENG_GGML_Q4_1: {
		int q = e < 16 ? b[4 + e] & 0xF : b[4 + e - 16] >> 4;
		return (float)q * h2f(b) + h2f(b + 2);
	}
	case ENG_GGML_Q5_0:
	case ENG_GGML_Q5_1: {
		int one = t == ENG_GGML_Q5_1, j = e % 16;
		const uint8_t *qh = b + (one ? 4 : 2), *qs = b + (one ? 8 : 6);
		int lo4 = e < 16 ? qs[j] & 0xF : qs[j] >> 4, hi = (qh[e / 8] >> (e % 8)) & 1, q = lo4 | hi << 4;
		return one ? (float)q * h2f(b) + h2f(b + 2) : (float)(q - 16) * h2f(b);
	}
	case ENG_GGML_Q8_0:
		return (float)(int8_t)b[2 + e] * h2f(b);
	case ENG_GGML_IQ4_NL: { /* ggml's non-linear table, written out here */
		static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
		int q = e < 16 ? b[2 + e] & 0xF : b[2 + e - 16] >> 4;
		return h2f(b) * (float)kv[q];
	}
	case ENG_GGML_IQ4_XS: { /* {f16 d; u16 scales_h; u8 scales_l[4]; qs[128]}, IQ4_NL's table */
		static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
		int sub = e / 32, l = e % 32;
		uint16_t sh;
		memcpy(&sh, b + 2, 2);
		int ls = ((b[4 + sub / 2] >> (sub % 2 ? 4 : 0)) & 0xF) + 16 * ((sh >> (2 * sub)) & 3);
		int q = l < 16 ? b[8 + 16 * sub + l] & 0xF : b[8 + 16 * sub + l - 16] >> 4;
		return h2f(b) * (float)(ls - 32) * (float)kv[q];
	}
	case ENG_GGML_Q4_K:
	case ENG_GGML_Q5_K: {
		int five = t == ENG_GGML_Q5_K, c = e / 64, half = (e % 64) / 32, l = e % 32, sub = 2 * c + half;
		const uint8_t *s = b + 4, *qs = b + (five ? 48 : 16) + 32 * c;
		int sc = sub < 4 ? s[sub] & 63 : (s[sub + 4] & 0xF) | ((s[sub - 4] >> 6) << 4);
		int m = sub < 4 ? s[sub + 4] & 63 : (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
		int q = half ? qs[l] >> 4 : qs[l] & 0xF;
		if (five)
			q |= ((b[16 + l] >> sub) & 1) << 4;
		return h2f(b) * (float)sc * (float)q - h2f(b + 2) * (float)m;
	}
	case ENG_GGML_Q2_K: { /* {scales[16]; qs[64]; f16 d, dmin}: halves of 128, four 2-bit fields a byte */
		int half = e / 128, field = (e % 128) / 32, l = e % 32, sub = e / 16;
		int q = (b[16 + 32 * half + l] >> (2 * field)) & 3;
		return h2f(b + 80) * (float)(b[sub] & 0xF) * (float)q - h2f(b + 82) * (float)(b[sub] >> 4);
	}
	case ENG_GGML_Q3_K: {
		/* the 12 scale bytes unpacked four at a time as 32-bit words: the low nibbles of
		 * words 0 and 1, then their high nibbles, each with two bits of word 2 on top */
		uint32_t w[4], top;
		memcpy(w, b + 96, 12);
		top = w[2];
		w[2] = ((w[0] >> 4) & 0x0f0f0f0fu) | (((top >> 4) & 0x03030303u) << 4);
		w[3] = ((w[1] >> 4) & 0x0f0f0f0fu) | (((top >> 6) & 0x03030303u) << 4);
		w[0] = (w[0] & 0x0f0f0f0fu) | ((top & 0x03030303u) << 4);
		w[1] = (w[1] & 0x0f0f0f0fu) | (((top >> 2) & 0x03030303u) << 4);
		int8_t sc[16];
		memcpy(sc, w, 16);
		/* halves of 128 use 32 bytes of 2-bit values each, four shifts a half;
		 * the high mask's bit (4 half + shift) clear means minus 4 */
		int half = e / 128, shift = (e % 128) / 32, l = e % 32;
		int q = ((b[32 + 32 * half + l] >> (2 * shift)) & 3) - ((b[l] & (1 << (4 * half + shift))) ? 0 : 4);
		return h2f(b + 108) * (float)(sc[e / 16] - 32) * (float)q;
	}
	case ENG_GGML_IQ3_XXS: {
		/* eight blocks of 32: four groups of eight a block, each two grid entries of
		 * four magnitudes (qs[8 block + 2 group], + 1) and seven sign bits at 7 group
		 * of the block's u32 (the eighth sign their parity), the scale in its top 4 */
		int blk = e / 32, grp = e % 32 / 8, half = e % 8 / 4;
		uint32_t aux;
		memcpy(&aux, b + 2 + 64 + 4 * blk, 4);
		unsigned s7 = (aux >> (7 * grp)) & 127, sg = s7 | (unsigned)(__builtin_popcount(s7) & 1) << 7;
		int m = eng_ggml_iq3xxs_mag(b[2 + 8 * blk + 2 * grp + half], e % 4);
		float db = h2f(b) * (0.5f + (float)(aux >> 28)) * 0.5f;
		return db * (float)m * ((sg >> (e % 8)) & 1 ? -1.0f : 1.0f);
	}
	case ENG_GGML_IQ3_S: {
		/* {d; qs[64]; qh[8]; signs[32]; scales[4]}: block of 32 k's group of eight g
		 * takes entries qs[8k + 2g], + 1 with bits 2g, 2g + 1 of qh[k] as their ninth,
		 * signs[4k + g], and the scale d (1 + 2 nibble k % 2 of scales[k / 2]) */
		int blk = e / 32, grp = e % 32 / 8, half = e % 8 / 4;
		int idx = b[2 + 8 * blk + 2 * grp + half] | (((b[66 + blk] >> (2 * grp + half)) & 1) << 8);
		int ls = (b[106 + blk / 2] >> (4 * (blk % 2))) & 0xF;
		float db = h2f(b) * (float)(1 + 2 * ls);
		return db * (float)eng_ggml_iq3s_mag(idx, e % 4) * ((b[74 + 4 * blk + grp] >> (e % 8)) & 1 ? -1.0f : 1.0f);
	}
	case ENG_GGML_IQ2_XXS:
	case ENG_GGML_IQ2_XS:
	case ENG_GGML_IQ2_S: {
		/* XXS {d; u32 pairs[16]}: block of 32 k's pair: four entry bytes, then seven sign bits a
		 * group (the eighth their parity) and the 4-bit scale on top; XS {d; u16 qs[32]; scales[8]}:
		 * nine bits of entry under seven of signs a group, a nibble of scale a 16; S {d; qs[32];
		 * signs[32]; qh[8]; scales[8]}: the entry's two top bits in qh, eight sign bits a group */
		int grp = e / 8, j = e % 8, idx, ls;
		unsigned sg;
		const uint16_t *grid;
		if (t == ENG_GGML_IQ2_XXS) {
			uint32_t w2;
			memcpy(&w2, b + 2 + 8 * (e / 32) + 4, 4);
			idx = b[2 + 8 * (e / 32) + grp % 4], ls = (int)(w2 >> 28), grid = eng_ggml_iq2xxs_grid;
			sg = (w2 >> (7 * (grp % 4))) & 127;
			sg |= (unsigned)(__builtin_popcount(sg) & 1) << 7;
		} else if (t == ENG_GGML_IQ2_XS) {
			unsigned v = b[2 + 2 * grp] | (unsigned)b[3 + 2 * grp] << 8;
			idx = (int)(v & 511), grid = eng_ggml_iq2xs_grid, ls = (b[66 + e / 32] >> (4 * (e / 16 % 2))) & 15;
			sg = v >> 9;
			sg |= (unsigned)(__builtin_popcount(sg) & 1) << 7;
		} else {
			idx = b[2 + grp] | ((b[66 + grp / 4] >> (2 * (grp % 4))) & 3) << 8, grid = eng_ggml_iq2s_grid;
			ls = (b[74 + e / 32] >> (4 * (e / 16 % 2))) & 15, sg = b[34 + grp];
		}
		static const float lv[3] = {8.0f, 25.0f, 43.0f};
		float db = h2f(b) * (0.5f + (float)ls) * 0.25f;
		return db * lv[(grid[idx] >> (2 * j)) & 3] * ((sg >> j) & 1 ? -1.0f : 1.0f);
	}
	case ENG_GGML_IQ1_S: {
		/* {d; qs[32]; u16 qh[8]}: block of 32 k's group of eight g takes the entry
		 * qs[4k + g] with bits 3g .. 3g + 2 of qh[k] as its ninth to eleventh, the
		 * multiplier 1 + 2 (bits 12 .. 14), the shift -1/8 with bit 15, else 1/8 */
		int blk = e / 32, grp = e % 32 / 8;
		unsigned qh = b[34 + 2 * blk] | (unsigned)b[35 + 2 * blk] << 8;
		int idx = b[2 + 4 * blk + grp] | (int)((qh >> (3 * grp)) & 7) << 8;
		float dl = h2f(b) * (float)(1 + 2 * ((qh >> 12) & 7));
		return dl * ((float)eng_ggml_iq1_level(idx, e % 8) + (qh & 0x8000 ? -0.125f : 0.125f));
	}
	case ENG_GGML_IQ1_M: {
		/* {qs[32]; qh[16]; u16 scales[4]}: the f16 d from the scales' top nibbles;
		 * sixteen 3-bit multipliers 1 + 2 ls, four a u16 from its bottom; group of
		 * eight g the entry qs[g] with nibble g % 2 of qh[g / 2]: three bits on top,
		 * the fourth the shift's sign */
		unsigned sc[4], grp = (unsigned)e / 8;
		for (int k = 0; k < 4; k++)
			sc[k] = b[48 + 2 * k] | (unsigned)b[49 + 2 * k] << 8;
		uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
		uint8_t d2[2] = {(uint8_t)dh, (uint8_t)(dh >> 8)};
		unsigned nib = (b[32 + grp / 2] >> (4 * (grp % 2))) & 15, sub = (unsigned)e / 16;
		float dl = h2f(d2) * (float)(1 + 2 * ((sc[sub / 4] >> (3 * (sub % 4))) & 7));
		return dl * ((float)eng_ggml_iq1_level(b[grp] | (int)(nib & 7) << 8, e % 8) + (nib & 8 ? -0.125f : 0.125f));
	}
	case ENG_GGML_Q6_K: {
		int h = e / 128, g = (e % 128) / 32, l = e % 32;
		const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
		int lo4 = (g & 1 ? ql[l + 32] : ql[l]);
		lo4 = g < 2 ? lo4 & 0xF : lo4 >> 4;
		int q = (lo4 | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
		return h2f(b + 208) * (float)(int8_t)b[192 + e / 16] * (float)q;
	}
	}
	return NAN;
}

static void types_round_trip(void **st)
{
	(void)st;
	struct {
		uint32_t t;
		double max_rms; /* relative to the data's RMS */
	} cases[] = {{ENG_GGML_F16, 1e-3}, {ENG_GGML_BF16, 5e-3}, {ENG_GGML_Q8_0, 0.01}, {ENG_GGML_Q6_K, 0.04},
	             {ENG_GGML_Q5_0, 0.06}, {ENG_GGML_Q5_1, 0.06}, {ENG_GGML_Q5_K, 0.08}, {ENG_GGML_Q4_0, 0.12},
	             {ENG_GGML_Q4_1, 0.12}, {ENG_GGML_Q4_K, 0.15}, {ENG_GGML_Q3_K, 0.15}, {ENG_GGML_IQ4_NL, 0.1},
	             {ENG_GGML_IQ4_XS, 0.1}, {ENG_GGML_Q2_K, 0.35}, {ENG_GGML_IQ3_XXS, 0.3}, {ENG_GGML_IQ3_S, 0.3},
	             {ENG_GGML_IQ1_S, 0.4}, {ENG_GGML_IQ1_M, 0.35}, {ENG_GGML_IQ2_XXS, 0.4}, {ENG_GGML_IQ2_XS, 0.3},
	             {ENG_GGML_IQ2_S, 0.3}};
	enum { N = 256 * 16 };
	float *x = malloc(N * 4), *y = malloc(N * 4);
	uint8_t *q = malloc(N * 4);
	ev_rng r;
	ev_rng_seed(&r, 3);
	for (int i = 0; i < N; i++) { /* roughly normal, a few outliers, some blocks all positive */
		double u = ev_rng_uniform(&r) + ev_rng_uniform(&r) + ev_rng_uniform(&r) - 1.5;
		x[i] = (float)(u * (i % 97 == 0 ? 8 : 1) + ((i / 256) % 5 == 4 ? 3 : 0));
	}
	double rms = 0;
	for (int i = 0; i < N; i++)
		rms += (double)x[i] * x[i];
	rms = sqrt(rms / N);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		uint32_t t = cases[c].t;
		int blk = eng_ggml_type_block(t);
		size_t bs = eng_ggml_type_size(t);
		assert_true(blk > 0 && bs > 0);
		eng_ggml_quantize(q, x, t, N);
		eng_ggml_dequantize(y, q, t, N);
		double err = 0;
		for (int i = 0; i < N; i++) {
			err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
			if (blk > 1) { /* the library's reading = the layout read element by element */
				float want = elem(q + (size_t)(i / blk) * bs, t, i % blk);
				if (memcmp(&want, &y[i], 4))
					fail_msg("%s element %d: %g, the layout says %g", eng_ggml_type_name(t), i, y[i], want);
			}
		}
		err = sqrt(err / N) / rms;
		print_message("%-5s %3zu bytes / %3d elements: relative RMS error %.4f\n", eng_ggml_type_name(t), bs, blk, err);
		if (err > cases[c].max_rms)
			fail_msg("%s: relative RMS error %.4f over %.4f", eng_ggml_type_name(t), err, cases[c].max_rms);
	}
	/* a zero block stays zero (no division by a zero scale) */
	memset(x, 0, 256 * 4);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		eng_ggml_quantize(q, x, cases[c].t, 256);
		eng_ggml_dequantize(y, q, cases[c].t, 256);
		for (int i = 0; i < 256; i++)
			assert_true(y[i] == 0.0f);
	}
	free(x), free(y), free(q);
}

/* Q3_K on random blocks (every bit pattern of the masks, the 2-bit values
 * and the scales; d any finite f16), and the extremes: the reader, the
 * engine's dtype (kept as itself) and the layout read element by element
 * agree */
static void q3k_read_by_layout(void **st)
{
	(void)st;
	enum { NB = 64 };
	uint8_t q3[NB * 110];
	float a[NB * 256], c[NB * 256];
	ev_rng r;
	ev_rng_seed(&r, 11);
	for (size_t i = 0; i < sizeof q3; i++)
		q3[i] = (uint8_t)ev_rng_below(&r, 256);
	for (int k = 0; k < NB; k++) {
		uint16_t h;
		do
			h = (uint16_t)ev_rng_below(&r, 65536);
		while (((h >> 10) & 0x1F) == 0x1F); /* not infinite, not NaN */
		memcpy(q3 + 110 * k + 108, &h, 2);
	}
	memset(q3, 0xFF, 108);          /* block 0: every value +3 under scale +31 */
	memset(q3 + 110, 0, 108);       /* block 1: every value -4 under scale -32 */
	eng_ggml_dequantize(a, q3, ENG_GGML_Q3_K, NB * 256);
	eng_to_f32(c, q3, ENG_Q3_K, NB * 256);
	for (int i = 0; i < NB * 256; i++) {
		float want = elem(q3 + (size_t)(i / 256) * 110, ENG_GGML_Q3_K, i % 256);
		if (memcmp(&a[i], &want, 4) || memcmp(&c[i], &want, 4))
			fail_msg("element %d: Q3_K %g, as the engine's dtype %g, the layout says %g", i, a[i], c[i], want);
	}
	float d0 = h2f(q3 + 108), d1 = h2f(q3 + 110 + 108);
	assert_true(a[0] == d0 * 31.0f * 3.0f && a[256] == d1 * -32.0f * -4.0f);
	assert_int_equal(eng_dtype_from_ggml(ENG_GGML_Q3_K), ENG_Q3_K);
	assert_int_equal(eng_dtype_bytes(ENG_Q3_K, 512), 220);
}

/* the f16 d of a grid type's super-block at b: IQ1_M's in its scales' top nibbles */
static void put_d(uint8_t *b, uint32_t t, uint16_t h)
{
	if (t != ENG_GGML_IQ1_M) {
		memcpy(b, &h, 2);
		return;
	}
	for (int k = 0; k < 4; k++)
		b[49 + 2 * k] = (uint8_t)((b[49 + 2 * k] & 0x0F) | ((h >> (4 * k)) & 0xF) << 4);
}

/* The four grid types (IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) on random blocks
 * (every grid entry, sign, shift and scale; d any finite f16 whose Q6_K d
 * is exact): the reader and the layout read element by element agree, and
 * so does the Q6_K the engine keeps them as; an IQ3_XXS d whose half is
 * not an f16, or an IQ1 d whose eighth is not, is not rewritten; one at
 * the edge of the normal range is */
static void grid_read_by_layout(void **st)
{
	(void)st;
	enum { NB = 64 };
	/* the grids as ggml has them: codes in ascending order, and entries at either end */
	for (int i = 1; i < 512; i++)
		assert_true(eng_ggml_iq3s_grid[i] > eng_ggml_iq3s_grid[i - 1] && (i >= 256 || eng_ggml_iq3xxs_grid[i] > eng_ggml_iq3xxs_grid[i - 1]));
	const int ends[4][5] = {{1, 20, 4, 4, 4}, {255, 4, 28, 52, 62}, {1, 3, 1, 1, 1}, {511, 1, 1, 15, 15}};
	for (int k = 0; k < 4; k++)
		for (int j = 0; j < 4; j++)
			assert_int_equal(k < 2 ? eng_ggml_iq3xxs_mag(ends[k][0], j) : eng_ggml_iq3s_mag(ends[k][0], j), ends[k][1 + j]);
	for (int j = 1; j < 2048; j++)
		assert_true(eng_ggml_iq1s_grid[j] > eng_ggml_iq1s_grid[j - 1]);
	const int iq1_ends[3][9] = {{0, -1, -1, -1, -1, -1, -1, -1, -1}, {1, 1, -1, -1, -1, -1, -1, -1, -1},
	                            {2047, 1, 1, 1, 1, 1, 1, 1, 1}};
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 8; j++)
			assert_int_equal(eng_ggml_iq1_level(iq1_ends[k][0], j), iq1_ends[k][1 + j]);
	const uint32_t ts[] = {ENG_GGML_IQ3_XXS, ENG_GGML_IQ3_S, ENG_GGML_IQ1_S, ENG_GGML_IQ1_M};
	for (int ti = 0; ti < 4; ti++) {
		uint32_t t = ts[ti];
		const int iq1 = t == ENG_GGML_IQ1_S || t == ENG_GGML_IQ1_M, halvings = iq1 ? 3 : t == ENG_GGML_IQ3_XXS;
		size_t bs = eng_ggml_type_size(t);
		uint8_t *q = malloc(NB * bs), q6[NB * 210];
		float a[NB * 256], c[NB * 256];
		ev_rng r;
		ev_rng_seed(&r, 21 + ti);
		for (size_t i = 0; i < NB * bs; i++)
			q[i] = (uint8_t)ev_rng_below(&r, 256);
		for (int k = 0; k < NB; k++) {
			uint16_t h;
			int ex;
			do /* finite; its Q6_K d exact: a normal f16 whose eighth (half) is one too, or ends in zeros */
				h = (uint16_t)ev_rng_below(&r, 65536), ex = (h >> 10) & 0x1F;
			while (ex == 0x1F || (ex <= halvings && (h & ((1 << (halvings + 1 - ex)) - 1))));
			put_d(q + bs * k, t, h);
		}
		/* the smallest normal exponent, the last bits clear: its half or eighth a subnormal */
		put_d(q + bs, t, t == ENG_GGML_IQ3_XXS ? 0x0402 : 0x0408);
		eng_ggml_dequantize(a, q, t, NB * 256);
		assert_true(eng_ggml_grid_to_q6k(q6, q, t, NB));
		eng_ggml_dequantize(c, q6, ENG_GGML_Q6_K, NB * 256);
		for (int i = 0; i < NB * 256; i++) {
			float want = elem(q + (size_t)(i / 256) * bs, t, i % 256);
			if (memcmp(&a[i], &want, 4) || memcmp(&c[i], &want, 4))
				fail_msg("%s element %d: %g, as Q6_K %g, the layout says %g", eng_ggml_type_name(t), i, a[i], c[i],
				         want);
		}
		if (halvings) {
			put_d(q, t, iq1 ? 0x0404 : 0x0001); /* no f16 is this one's eighth (the smallest subnormal's half) */
			assert_false(eng_ggml_grid_to_q6k(q6, q, t, 1));
			uint16_t d6;
			assert_false(eng_ggml_grid_q6k_d(q, t, &d6));
		}
		put_d(q, t, 0x7C00); /* an infinity: no Q6_K d */
		assert_false(eng_ggml_grid_to_q6k(q6, q, t, 1));
		free(q);
	}
}

/* IQ4_NL on random blocks (every nibble, d any finite f16): the reader
 * and the engine's dtype read each element as the layout read element by
 * element says */
static void iq4nl_read_by_layout(void **st)
{
	(void)st;
	enum { NB = 64 };
	uint8_t nl[NB * 18];
	float a[NB * 32], c[NB * 32];
	ev_rng r;
	ev_rng_seed(&r, 13);
	for (size_t i = 0; i < sizeof nl; i++)
		nl[i] = (uint8_t)ev_rng_below(&r, 256);
	for (int k = 0; k < NB; k++) {
		uint16_t h;
		do
			h = (uint16_t)ev_rng_below(&r, 65536);
		while (((h >> 10) & 0x1F) == 0x1F);
		memcpy(nl + 18 * k, &h, 2);
	}
	eng_ggml_dequantize(a, nl, ENG_GGML_IQ4_NL, NB * 32);
	eng_to_f32(c, nl, ENG_IQ4_NL, NB * 32);
	for (int i = 0; i < NB * 32; i++) {
		float want = elem(nl + (size_t)(i / 32) * 18, ENG_GGML_IQ4_NL, i % 32);
		if (memcmp(&a[i], &want, 4) || memcmp(&c[i], &want, 4))
			fail_msg("element %d: IQ4_NL %g, as the engine's dtype %g, the layout says %g", i, a[i], c[i], want);
	}
	assert_int_equal(eng_dtype_from_ggml(ENG_GGML_IQ4_NL), ENG_IQ4_NL);
	assert_int_equal(eng_dtype_bytes(ENG_IQ4_NL, 64), 36);
}

/* IQ4_XS on random bytes (every signed 6-bit scale, every nibble): the
 * reader, the engine's dtype and the layout read element by element agree */
static void iq4xs_read_by_layout(void **st)
{
	(void)st;
	enum { NB = 64 };
	uint8_t xs[NB * 136];
	float a[NB * 256], c[NB * 256];
	ev_rng r;
	ev_rng_seed(&r, 17);
	for (size_t i = 0; i < sizeof xs; i++)
		xs[i] = (uint8_t)ev_rng_below(&r, 256);
	for (int k = 0; k < NB; k++) {
		uint16_t h;
		do
			h = (uint16_t)ev_rng_below(&r, 65536);
		while (((h >> 10) & 0x1F) == 0x1F);
		memcpy(xs + 136 * k, &h, 2);
	}
	eng_ggml_dequantize(a, xs, ENG_GGML_IQ4_XS, NB * 256);
	eng_to_f32(c, xs, ENG_IQ4_XS, NB * 256);
	bool seen[64] = {false};
	for (int i = 0; i < NB * 256; i++) {
		const uint8_t *b = xs + (size_t)(i / 256) * 136;
		float want = elem(b, ENG_GGML_IQ4_XS, i % 256);
		seen[eng_ggml_iq4xs_scale(i % 256 / 32, b) + 32] = true;
		if (memcmp(&a[i], &want, 4) || memcmp(&c[i], &want, 4))
			fail_msg("IQ4_XS element %d: %g, as the engine's dtype %g, the layout says %g", i, a[i], c[i], want);
	}
	for (int v = 0; v < 64; v++)
		if (!seen[v])
			fail_msg("scale %d never drawn: more blocks needed", v - 32);
	assert_int_equal(eng_dtype_from_ggml(ENG_GGML_IQ4_XS), ENG_IQ4_XS);
	assert_int_equal(eng_dtype_bytes(ENG_IQ4_XS, 512), 272);
}

static char *write_fixture(const char *dir, size_t *len_out, char **bytes)
{
	eng_gguf_writer *w = NULL;
	assert_int_equal(eng_gguf_writer_new(&w), 0);
	const char *toks[3] = {"a", "bc", "\xc4\xa0the"};
	int32_t ty[3] = {1, 1, 3};
	assert_int_equal(eng_gguf_put_str(w, "general.architecture", "llama"), 0);
	assert_int_equal(eng_gguf_put_u32(w, "llama.block_count", 2), 0);
	assert_int_equal(eng_gguf_put_f32(w, "llama.rope.freq_base", 10000.0f), 0);
	assert_int_equal(eng_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", true), 0);
	assert_int_equal(eng_gguf_put_strs(w, "tokenizer.ggml.tokens", toks, 3), 0);
	assert_int_equal(eng_gguf_put_i32s(w, "tokenizer.ggml.token_type", ty, 3), 0);
	float v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (float)i / 7.0f - 3;
	uint8_t q8[68];
	eng_ggml_quantize(q8, v, ENG_GGML_Q8_0, 64);
	uint64_t d1[1] = {64}, d2[2] = {32, 2};
	assert_int_equal(eng_gguf_put_tensor(w, "output_norm.weight", ENG_GGML_F32, d1, 1, v, sizeof v), 0);
	assert_int_equal(eng_gguf_put_tensor(w, "blk.0.attn_q.weight", ENG_GGML_Q8_0, d2, 2, q8, sizeof q8), 0);
	char *path = tu_path(dir, "f.gguf");
	assert_int_equal(eng_gguf_write(w, path), 0);
	eng_gguf_writer_free(w);
	assert_int_equal(ev_file_read(bytes, len_out, path, 1 << 20), 0);
	return path;
}

static void written_files_read_back(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("gguf"), *bytes = NULL;
	size_t len = 0;
	char *path = write_fixture(dir, &len, &bytes);
	eng_gguf *g = NULL;
	if (eng_gguf_open(&g, path))
		fail_msg("%s", ev_error_msg());
	assert_int_equal(g->version, 3);
	assert_int_equal(g->n_kv, 6);
	assert_int_equal(g->n_t, 2);
	uint64_t u = 0;
	double f = 0;
	char *s = NULL;
	assert_int_equal(eng_gguf_get_u64(g, "llama.block_count", &u), 0);
	assert_int_equal(u, 2);
	assert_int_equal(eng_gguf_get_f64(g, "llama.rope.freq_base", &f), 0);
	assert_true(f == 10000.0);
	assert_int_equal(eng_gguf_get_str(g, "general.architecture", &s), 0);
	assert_string_equal(s, "llama");
	free(s);
	assert_int_equal(eng_gguf_get_u64(g, "llama.nothing", &u), EV_E_NOTFOUND);
	assert_non_null(strstr(ev_error_msg(), "llama.nothing"));
	assert_int_equal(eng_gguf_get_u64(g, "general.architecture", &u), EV_E_INVALID);
	const eng_gguf_value *tv = eng_gguf_find_key(g, "tokenizer.ggml.tokens");
	assert_non_null(tv);
	assert_int_equal(tv->type, ENG_GGUF_ARRAY);
	assert_int_equal(tv->count, 3);
	const uint8_t *at = tv->elems;
	eng_gguf_str a = eng_gguf_next_str(&at), b = eng_gguf_next_str(&at), c = eng_gguf_next_str(&at);
	assert_true(a.n == 1 && b.n == 2 && c.n == 5 && !memcmp(c.p, "\xc4\xa0the", 5));
	const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "blk.0.attn_q.weight");
	assert_non_null(t);
	assert_int_equal(t->type, ENG_GGML_Q8_0);
	assert_int_equal(t->elements, 64);
	assert_int_equal(t->bytes, 68);
	assert_int_equal((uintptr_t)(t->data - g->map) % 32, 0);
	float y[64];
	eng_ggml_dequantize(y, t->data, t->type, 64);
	assert_true(fabsf(y[10] - (10.0f / 7.0f - 3)) < 0.05f);
	const eng_gguf_tensor *n = eng_gguf_find_tensor(g, "output_norm.weight");
	assert_memory_equal(n->data, bytes + (n->data - g->map), 256);
	eng_gguf_close(g);

	/* every truncation is refused, naming the file */
	for (size_t cut = 0; cut < len; cut += cut < 400 ? 1 : 37) {
		assert_int_not_equal(eng_gguf_parse(&g, bytes, cut, "cut.gguf"), 0);
		assert_null(g);
		assert_non_null(strstr(ev_error_msg(), "cut.gguf"));
	}
	/* 20,000 mutations of the header: refused or read, never a crash */
	ev_rng r;
	ev_rng_seed(&r, 17);
	char *m = malloc(len);
	int refused = 0;
	for (int k = 0; k < 20000; k++) {
		memcpy(m, bytes, len);
		int flips = 1 + (int)ev_rng_below(&r, 4);
		for (int i = 0; i < flips; i++) {
			size_t pos = ev_rng_below(&r, 400 < len ? 400 : len);
			m[pos] = (char)(ev_rng_below(&r, 4) == 0 ? 0xff : (int)ev_rng_below(&r, 256));
		}
		if (eng_gguf_parse(&g, m, len, "fuzz.gguf")) {
			refused++;
			assert_true(strlen(ev_error_msg()) > 0);
		} else {
			for (size_t i = 0; i < g->n_t; i++) /* what was read lies inside the buffer */
				assert_true(g->t[i].data >= (const uint8_t *)m && g->t[i].data + g->t[i].bytes <= (const uint8_t *)m + len);
			eng_gguf_close(g);
		}
	}
	print_message("20000 mutated headers: %d refused, %d read\n", refused, 20000 - refused);
	assert_true(refused > 1000);
	free(m), free(bytes), free(path), free(dir);
}

/* crafted bad files, each refused naming what is wrong */
static void crafted_bad_files(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("ggufbad");
	float v[32] = {0};
	struct {
		uint32_t type;
		uint64_t dims[2];
		int nd;
		const char *want;
	} cases[] = {
		{15, {256, 1}, 2, "type Q8_K = 15 is not read"},
		{ENG_GGML_Q8_0, {33, 1}, 2, "not whole Q8_0 blocks"},
		{ENG_GGML_F32, {0, 1}, 2, "dimension 0 of 0"},
		{99, {32, 1}, 2, "type 99 is not read"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		eng_gguf_writer *w = NULL;
		assert_int_equal(eng_gguf_writer_new(&w), 0);
		assert_int_equal(eng_gguf_put_tensor(w, "bad.weight", cases[i].type, cases[i].dims, cases[i].nd, v, sizeof v), 0);
		char *p = tu_path(dir, "bad.gguf");
		assert_int_equal(eng_gguf_write(w, p), 0);
		eng_gguf_writer_free(w);
		eng_gguf *g = NULL;
		assert_int_not_equal(eng_gguf_open(&g, p), 0);
		if (!strstr(ev_error_msg(), cases[i].want) || !strstr(ev_error_msg(), "bad.weight"))
			fail_msg("case %zu: %s", i, ev_error_msg());
		free(p);
	}
	/* a tensor past the end; two tensors at one offset; a bad alignment; a duplicate key */
	eng_gguf_writer *w = NULL;
	assert_int_equal(eng_gguf_writer_new(&w), 0);
	uint64_t d[1] = {32};
	assert_int_equal(eng_gguf_put_u32(w, "general.alignment", 48), 0);
	assert_int_equal(eng_gguf_put_tensor(w, "x", ENG_GGML_F32, d, 1, v, sizeof v), 0);
	char *p = tu_path(dir, "align.gguf");
	assert_int_equal(eng_gguf_write(w, p), 0);
	eng_gguf_writer_free(w);
	eng_gguf *g = NULL;
	assert_int_not_equal(eng_gguf_open(&g, p), 0);
	assert_non_null(strstr(ev_error_msg(), "general.alignment"));
	free(p);
	assert_int_equal(eng_gguf_writer_new(&w), 0);
	assert_int_equal(eng_gguf_put_u32(w, "k", 1), 0);
	assert_int_equal(eng_gguf_put_u32(w, "k", 2), 0);
	p = tu_path(dir, "dup.gguf");
	assert_int_equal(eng_gguf_write(w, p), 0);
	eng_gguf_writer_free(w);
	assert_int_not_equal(eng_gguf_open(&g, p), 0);
	assert_non_null(strstr(ev_error_msg(), "'k' appears twice"));
	/* the same bytes with the tensor's size grown past the file */
	char *bytes = NULL;
	size_t len = 0;
	free(p);
	assert_int_equal(eng_gguf_writer_new(&w), 0);
	assert_int_equal(eng_gguf_put_tensor(w, "x", ENG_GGML_F32, d, 1, v, sizeof v), 0);
	p = tu_path(dir, "big.gguf");
	assert_int_equal(eng_gguf_write(w, p), 0);
	eng_gguf_writer_free(w);
	assert_int_equal(ev_file_read(&bytes, &len, p, 1 << 20), 0);
	uint64_t huge = 1u << 20;
	memcpy(bytes + 24 + 8 + 1 + 4, &huge, 8); /* header, name "x", ndim: dims[0] */
	assert_int_not_equal(eng_gguf_parse(&g, bytes, len, "big.gguf"), 0);
	assert_non_null(strstr(ev_error_msg(), "tensor 'x'"));
	memcpy(bytes, "GGUX", 4);
	assert_int_not_equal(eng_gguf_parse(&g, bytes, len, "big.gguf"), 0);
	assert_non_null(strstr(ev_error_msg(), "not a GGUF file"));
	free(bytes), free(p), free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(types_round_trip),
		cmocka_unit_test(q3k_read_by_layout),
		cmocka_unit_test(grid_read_by_layout),
		cmocka_unit_test(iq4nl_read_by_layout),
		cmocka_unit_test(iq4xs_read_by_layout),
		cmocka_unit_test(written_files_read_back),
		cmocka_unit_test(crafted_bad_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
