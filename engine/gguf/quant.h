/*
 * engine/gguf/quant.h: ggml's tensor types as GGUF files store them, and
 * their blocks to and from f32 (README.md: the layouts).
 */
#ifndef ENG_GGUF_QUANT_H
#define ENG_GGUF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
	ENG_GGML_F32 = 0,
	ENG_GGML_F16 = 1,
	ENG_GGML_Q4_0 = 2,
	ENG_GGML_Q4_1 = 3,
	ENG_GGML_Q5_0 = 6,
	ENG_GGML_Q5_1 = 7,
	ENG_GGML_Q8_0 = 8,
	ENG_GGML_Q2_K = 10,
	ENG_GGML_Q3_K = 11,
	ENG_GGML_Q4_K = 12,
	ENG_GGML_Q5_K = 13,
	ENG_GGML_Q6_K = 14,
	ENG_GGML_IQ2_XXS = 16,
	ENG_GGML_IQ2_XS = 17,
	ENG_GGML_IQ3_XXS = 18,
	ENG_GGML_IQ1_S = 19,
	ENG_GGML_IQ4_NL = 20,
	ENG_GGML_IQ3_S = 21,
	ENG_GGML_IQ2_S = 22,
	ENG_GGML_IQ4_XS = 23,
	ENG_GGML_IQ1_M = 29,
	ENG_GGML_BF16 = 30,
};

/* "Q4_K" and the like; "?" for a type evald does not read. */
const char *eng_ggml_type_name(uint32_t t);
/* The type a name ("Q4_K") stands for, among those evald reads; false where none. */
bool eng_ggml_type_from_name(const char *name, uint32_t *t);
/* The names of every type evald reads (and writes), comma-separated, into buf (n >= 128). */
void eng_ggml_type_names(char *buf, size_t n);
/* ggml's name of any type number (for errors naming what is not read), or NULL. */
const char *eng_ggml_type_known_name(uint32_t t);
/* Elements a block and bytes a block; 0 for types evald does not read. */
int eng_ggml_type_block(uint32_t t);
size_t eng_ggml_type_size(uint32_t t);
/* Bytes of n elements of type t (n whole blocks; 0 for types evald does not read). */
size_t eng_ggml_bytes(uint32_t t, uint64_t n);

/* The little-endian f16 at p, as a float (a block's scales). */
float eng_ggml_h2f(const uint8_t *p);

/* Q4_K / Q5_K: block j's (j < 8) 6-bit scale and minimum from a
 * super-block's 12 packed bytes q (the layout's one definition: the
 * readers, the quantizer and the CPU kernels' references take it). */
static inline void eng_ggml_kscale_min(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Q2_K {u8 scales[16]; u8 qs[64]; f16 d, dmin}: element e's 2-bit value,
 * bits 2 (e % 128 / 32) of qs[32 (e / 128) + e % 32] (its sub-block of 16,
 * e / 16, takes scale scales[e / 16] & 15 and minimum scales[e / 16] >> 4;
 * x = d sc q - dmin m). */
static inline int eng_ggml_q2k_value(const uint8_t *sb, int e)
{
	return (sb[16 + 32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

/* Q3_K: sub-block j's (j < 16) signed scale (-32 .. 31) from a
 * super-block's 12 packed bytes q: the low four bits in byte j % 8
 * (the high nibble from j = 8 on), the two high bits in byte 8 + j % 4
 * (bits 2 (j / 4) and up). */
static inline int eng_ggml_q3k_scale(int j, const uint8_t *q)
{
	int lo = (q[j % 8] >> (j < 8 ? 0 : 4)) & 0xF, hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
	return (lo | hi << 4) - 32;
}

/* Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: element e's
 * value (-4 .. 3): element 32 c + l (c < 8, l < 32) takes bits 2 (c % 4)
 * of qs[32 (c / 4) + l] and, where bit c of hmask[l] is clear, minus 4
 * (its sub-block of 16, e / 16, takes the scale eng_ggml_q3k_scale(e /
 * 16, scales); x = d scale value). */
static inline int eng_ggml_q3k_value(const uint8_t *sb, int e)
{
	int c = e / 32, l = e % 32;
	return ((sb[32 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3) - ((sb[l] >> c) & 1 ? 0 : 4);
}

/* IQ3_XXS's and IQ3_S's grids (ggml's iq3xxs_grid, iq3s_grid): entry i
 * stands for four magnitudes, element j's level the three bits at 3 j of
 * the code grid[i]; IQ3_XXS's levels 4, 12, 20, 28, 36, 44, 52, 62,
 * IQ3_S's 1, 3, .., 15 (2 level + 1). */
extern const uint16_t eng_ggml_iq3xxs_grid[256];
extern const uint16_t eng_ggml_iq3s_grid[512];
static inline int eng_ggml_iq3xxs_mag_of_level(int l)
{
	static const uint8_t lv[8] = {4, 12, 20, 28, 36, 44, 52, 62};
	return lv[l];
}
static inline int eng_ggml_iq3xxs_mag(int i, int j)
{
	return eng_ggml_iq3xxs_mag_of_level((eng_ggml_iq3xxs_grid[i] >> (3 * j)) & 7);
}
static inline int eng_ggml_iq3s_mag(int i, int j)
{
	return 2 * ((eng_ggml_iq3s_grid[i] >> (3 * j)) & 7) + 1;
}

/* IQ3_XXS {f16 d; u8 qs[64]; u32 aux[8]} (98 bytes): block of 32 b has
 * the scale d (0.5 + ls) 0.5, ls the top four bits of aux[b]; its group of
 * four k (< 8) the grid entry qs[8 b + k], whose signs are those of the
 * group of eight k / 2: seven bits at 7 (k / 2) of aux[b], the eighth
 * their parity (an odd count of minus signs never occurs), bit 4 (k % 2)
 * + j of them element j's. Element e's signed magnitude (the scale apart): */
static inline int eng_ggml_iq3xxs_value(const uint8_t *sb, int e)
{
	int b = e / 32, k = e % 32 / 4, j = e % 4;
	uint32_t aux;
	memcpy(&aux, sb + 66 + 4 * b, 4);
	int s7 = (int)(aux >> (7 * (k / 2))) & 127, signs = s7 | (__builtin_parity((unsigned)s7) << 7);
	int m = eng_ggml_iq3xxs_mag(sb[2 + 8 * b + k], j);
	return (signs >> (4 * (k % 2) + j)) & 1 ? -m : m;
}
/* its block b's scale multiplier ls (the scale is d (0.5 + ls) 0.5) */
static inline int eng_ggml_iq3xxs_ls(const uint8_t *sb, int b)
{
	return sb[66 + 4 * b + 3] >> 4;
}

/* IQ3_S {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]} (110
 * bytes): block of 32 b has the scale d (1 + 2 ls), ls the nibble b % 2 of
 * scales[b / 2]; its group of four k (< 8) the grid entry qs[8 b + k] |
 * (bit k of qh[b]) << 8, element j of it minus where bit 4 (k % 2) + j of
 * signs[4 b + k / 2] is set. Element e's signed magnitude: */
static inline int eng_ggml_iq3s_value(const uint8_t *sb, int e)
{
	int b = e / 32, k = e % 32 / 4, j = e % 4;
	int m = eng_ggml_iq3s_mag(sb[2 + 8 * b + k] | (((sb[66 + b] >> k) & 1) << 8), j);
	return (sb[74 + 4 * b + k / 2] >> (4 * (k % 2) + j)) & 1 ? -m : m;
}
static inline int eng_ggml_iq3s_ls(const uint8_t *sb, int b)
{
	return (sb[106 + b / 2] >> (4 * (b % 2))) & 0xF;
}

/* IQ1_S's and IQ1_M's grid (ggml's iq1s_grid): entry i stands for eight
 * levels -1, 0, 1, element j's the two bits at 2 j of the code grid[i],
 * less 1. */
extern const uint16_t eng_ggml_iq1s_grid[2048];
static inline int eng_ggml_iq1_level(int i, int j)
{
	return ((eng_ggml_iq1s_grid[i] >> (2 * j)) & 3) - 1;
}

/* IQ1_S {f16 d; u8 qs[32]; u16 qh[8]} (50 bytes): block of 32 b has the
 * scale d (1 + 2 ls), ls bits 12..14 of qh[b], and the shift delta, -1/8
 * where bit 15 of qh[b] is set, else +1/8; its group of eight k (< 4) the
 * grid entry qs[4 b + k] | (bits 3 k .. 3 k + 2 of qh[b]) << 8, and
 * x = d (1 + 2 ls) (level + delta). Element e's value in eighths,
 * 8 level + 8 delta (the scale apart): */
static inline int eng_ggml_iq1s_value(const uint8_t *sb, int e)
{
	int b = e / 32, k = e % 32 / 8, qh = sb[34 + 2 * b] | sb[35 + 2 * b] << 8;
	int i = sb[2 + 4 * b + k] | ((qh >> (3 * k)) & 7) << 8;
	return 8 * eng_ggml_iq1_level(i, e % 8) + (qh & 0x8000 ? -1 : 1);
}
static inline int eng_ggml_iq1s_ls(const uint8_t *sb, int b)
{
	return (sb[35 + 2 * b] >> 4) & 7;
}

/* IQ1_M {u8 qs[32]; u8 qh[16]; u16 scales[4]} (56 bytes) has no d field:
 * its f16 d is the top nibbles of scales[0..3], scales[0]'s the lowest.
 * Sub-block of 16 s has the scale d (1 + 2 ls), ls the three bits at
 * 3 (s % 4) of scales[s / 4]; group of eight g (< 32) the grid entry
 * qs[g] | (the low three bits of nibble g % 2 of qh[g / 2]) << 8, and the
 * shift -1/8 where that nibble's bit 3 is set, else +1/8. */
static inline uint16_t eng_ggml_iq1m_d(const uint8_t *sb)
{
	return (uint16_t)(sb[49] >> 4 | (sb[51] & 0xF0) | (sb[53] >> 4) << 8 | (sb[55] & 0xF0) << 8);
}
/* element e's value in eighths (the scale apart) */
static inline int eng_ggml_iq1m_value(const uint8_t *sb, int e)
{
	int g = e / 8, nib = (sb[32 + g / 2] >> (4 * (g % 2))) & 15;
	return 8 * eng_ggml_iq1_level(sb[g] | (nib & 7) << 8, e % 8) + (nib & 8 ? -1 : 1);
}
static inline int eng_ggml_iq1m_ls(const uint8_t *sb, int s)
{
	int sc = sb[48 + 2 * (s / 4)] | sb[49 + 2 * (s / 4)] << 8;
	return (sc >> (3 * (s % 4))) & 7;
}

/* IQ2_XXS's, IQ2_XS's and IQ2_S's grids (ggml's iq2xxs_grid, iq2xs_grid,
 * iq2s_grid): entry i stands for eight magnitudes 8, 25 or 43, element
 * j's the two bits at 2 j of the code grid[i] (0, 1, 2 in that order). */
extern const uint16_t eng_ggml_iq2xxs_grid[256];
extern const uint16_t eng_ggml_iq2xs_grid[512];
extern const uint16_t eng_ggml_iq2s_grid[1024];
static inline int eng_ggml_iq2_mag(uint16_t code, int j)
{
	static const uint8_t mag[4] = {8, 25, 43, 0};
	return mag[(code >> (2 * j)) & 3];
}
/* IQ2_XXS's and IQ2_XS's eight signs of a group from seven stored bits
 * s7: the eighth is their parity (ggml's ksigns_iq2xs) */
static inline int eng_ggml_iq2_signs(int s7)
{
	return s7 | __builtin_parity((unsigned)s7) << 7;
}
/* An IQ2 scale: d (0.5 + ls) / 4 as ggml forms it, here d (1 + 2 ls) / 8
 * (the same real number, exact in f32 either way) */
static inline float eng_ggml_iq2_scale(float d, int ls)
{
	return d * (float)(1 + 2 * ls) * 0.125f;
}

/* IQ2_XXS {f16 d; u8 qs[64]} (66 bytes): block of 32 b is two u32 at
 * 2 + 8 b: the first its four groups of eight's grid entries (byte k
 * group k's), the second their signs (seven bits at 7 k, eng_ggml_iq2_signs)
 * and ls in its top four bits; x = d (0.5 + ls) / 4 m s. Element e's
 * signed magnitude (the scale apart), and block b's ls: */
static inline int eng_ggml_iq2xxs_value(const uint8_t *sb, int e)
{
	int b = e / 32, k = e % 32 / 8, j = e % 8;
	uint32_t aux;
	memcpy(&aux, sb + 2 + 8 * b + 4, 4);
	int m = eng_ggml_iq2_mag(eng_ggml_iq2xxs_grid[sb[2 + 8 * b + k]], j);
	return (eng_ggml_iq2_signs((int)(aux >> (7 * k)) & 127) >> j) & 1 ? -m : m;
}
static inline int eng_ggml_iq2xxs_ls(const uint8_t *sb, int b)
{
	return sb[2 + 8 * b + 7] >> 4;
}

/* IQ2_XS {f16 d; u16 qs[32]; u8 scales[8]} (74 bytes): group of eight g
 * has qs[g]: its grid entry the low nine bits, its signs' seven bits the
 * high seven; sub-block of 16 s has ls the nibble s % 2 of scales[s / 2]. */
static inline int eng_ggml_iq2xs_value(const uint8_t *sb, int e)
{
	int g = e / 8, j = e % 8, q = sb[2 + 2 * g] | sb[3 + 2 * g] << 8;
	int m = eng_ggml_iq2_mag(eng_ggml_iq2xs_grid[q & 511], j);
	return (eng_ggml_iq2_signs(q >> 9) >> j) & 1 ? -m : m;
}
static inline int eng_ggml_iq2xs_ls(const uint8_t *sb, int s)
{
	return (sb[66 + s / 2] >> (4 * (s % 2))) & 15;
}

/* IQ2_S {f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8]} (82
 * bytes): group of eight g has the grid entry qs[g] | (bits 2 (g % 4) of
 * qh[g / 4]) << 8 and the eight signs of signs[g]; ls as IQ2_XS's. */
static inline int eng_ggml_iq2s_value(const uint8_t *sb, int e)
{
	int g = e / 8, j = e % 8;
	int m = eng_ggml_iq2_mag(eng_ggml_iq2s_grid[sb[2 + g] | ((sb[66 + g / 4] >> (2 * (g % 4))) & 3) << 8], j);
	return (sb[34 + g] >> j) & 1 ? -m : m;
}
static inline int eng_ggml_iq2s_ls(const uint8_t *sb, int s)
{
	return (sb[74 + s / 2] >> (4 * (s % 2))) & 15;
}

/* The IQ2 grids (IQ2_XXS's, IQ2_XS's, IQ2_S's) as eight magnitude bytes
 * an entry (element j's byte j), made as the program starts: the vector
 * kernels' lookup */
extern uint64_t eng_ggml_iq2_grid8_tab[3][1024];
/* eight signs as bytes 1 or -1 (element j's byte j): of the bits of b
 * (sign8), and of IQ2_XXS's and IQ2_XS's seven stored bits with their
 * parity (ksign8, eng_ggml_iq2_signs) */
extern uint64_t eng_ggml_iq2_sign8_tab[256], eng_ggml_iq2_ksign8_tab[128];

/* Element e of an IQ2 super-block of type t (IQ2_XXS, IQ2_XS, IQ2_S): its
 * signed magnitude, and the ls of its scale */
static inline int eng_ggml_iq2_value(const uint8_t *sb, uint32_t t, int e)
{
	return t == ENG_GGML_IQ2_XXS ? eng_ggml_iq2xxs_value(sb, e)
	       : t == ENG_GGML_IQ2_XS ? eng_ggml_iq2xs_value(sb, e)
	                              : eng_ggml_iq2s_value(sb, e);
}
static inline int eng_ggml_iq2_ls(const uint8_t *sb, uint32_t t, int e)
{
	return t == ENG_GGML_IQ2_XXS ? eng_ggml_iq2xxs_ls(sb, e / 32)
	       : t == ENG_GGML_IQ2_XS ? eng_ggml_iq2xs_ls(sb, e / 16)
	                              : eng_ggml_iq2s_ls(sb, e / 16);
}

/* The grid types the engine keeps as Q6_K, value for value: IQ3_XXS,
 * IQ3_S, IQ1_S, IQ1_M (whose values all fit a signed 6-bit q under a
 * scale of 16 elements). */
bool eng_ggml_grid_type(uint32_t t);
/* The f16 d the Q6_K super-block of such a block blk takes into *d: IQ3_S
 * its own, IQ3_XXS its half (its magnitudes halved, all even), IQ1_S and
 * IQ1_M their eighth (the values counted in eighths); false where that is
 * not exact in f16 (an infinity, a NaN, or a d near the bottom of the
 * range whose last bits would be lost). */
bool eng_ggml_grid_q6k_d(const uint8_t *blk, uint32_t t, uint16_t *d);
/* nblocks super-blocks of such a type t at src as Q6_K super-blocks in
 * dst with the same values: sixteen sub-blocks of 16, each its scale's
 * odd multiplier 1 + 2 ls as Q6_K's int8, each value + 32. Both read
 * x = (d sc) q with one rounding of the same real numbers, so they
 * dequantize to the same floats; false where eng_ggml_grid_q6k_d is,
 * dst then unfinished. */
bool eng_ggml_grid_to_q6k(uint8_t *dst, const uint8_t *src, uint32_t t, size_t nblocks);
/* *out = the f16 h / 2 where that is exact (false for an infinity, a NaN,
 * or a value near the bottom of the range whose last bit would be lost) */
bool eng_ggml_f16_half(uint16_t h, uint16_t *out);

/* IQ4_NL's sixteen values (ggml's kvalues_iq4nl): a 4-bit q stands for
 * d times one of them. */
extern const int8_t eng_ggml_iq4nl_values[16];

/* Element e (< 32) of a block of IQ4_NL nibbles qs[16] (IQ4_XS's blocks
 * too): the table's value of the low nibble of qs[e], or from e = 16 on
 * of the high nibble of qs[e - 16]. */
static inline int eng_ggml_iq4_value(const uint8_t *qs, int e)
{
	return eng_ggml_iq4nl_values[e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4];
}

/* IQ4_XS {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: block j's
 * (j < 8, 32 elements) signed scale ls - 32 (-32 .. 31), its low four bits
 * the nibble j % 2 of scales_l[j / 2] and its two high bits bits 2 j of
 * scales_h (the layout's one definition: the reader, the quantizer and the
 * CPU kernels' references take it). Its elements are d * scale * value[q],
 * q the block's nibbles as IQ4_NL's (at qs + 16 j: the low nibbles the
 * first 16 elements). */
static inline int eng_ggml_iq4xs_scale(int j, const uint8_t *sb)
{
	int lo = (sb[4 + j / 2] >> (4 * (j % 2))) & 0xF, hi = (sb[2 + j / 4] >> (2 * (j % 4))) & 3;
	return (lo | hi << 4) - 32;
}


/* n elements (a multiple of the type's block) of src to f32: the plain
 * reference reading of each block. */
void eng_ggml_dequantize(float *dst, const void *src, uint32_t t, size_t n);
/* f32 to the type's blocks (n a multiple of the block), round to nearest
 * with each block's scales from its own values (README.md). */
void eng_ggml_quantize(void *dst, const float *src, uint32_t t, size_t n);

#endif
