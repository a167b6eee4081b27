/*
 * engine/dtype.c: the stored weight types (F32, F16, BF16 and ggml's
 * block types) and their conversions to and from f32. F16 goes through a
 * 64 K entry table built once, since the matmul converts weight rows on
 * the fly.
 */
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "engine/backend.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/quant.h"

static const struct {
	const char *name, *lower;
	int block;       /* elements */
	size_t bytes;    /* a block */
	uint32_t ggml;   /* ggml's type number */
} dtypes[ENG_DTYPE_COUNT] = {
	[ENG_F32] = {"F32", "f32", 1, 4, ENG_GGML_F32},
	[ENG_F16] = {"F16", "f16", 1, 2, ENG_GGML_F16},
	[ENG_BF16] = {"BF16", "bf16", 1, 2, ENG_GGML_BF16},
	[ENG_Q8_0] = {"Q8_0", "q8_0", 32, 34, ENG_GGML_Q8_0},
	[ENG_Q4_0] = {"Q4_0", "q4_0", 32, 18, ENG_GGML_Q4_0},
	[ENG_Q4_1] = {"Q4_1", "q4_1", 32, 20, ENG_GGML_Q4_1},
	[ENG_Q5_0] = {"Q5_0", "q5_0", 32, 22, ENG_GGML_Q5_0},
	[ENG_Q5_1] = {"Q5_1", "q5_1", 32, 24, ENG_GGML_Q5_1},
	[ENG_Q4_K] = {"Q4_K", "q4_k", 256, 144, ENG_GGML_Q4_K},
	[ENG_Q5_K] = {"Q5_K", "q5_k", 256, 176, ENG_GGML_Q5_K},
	[ENG_Q6_K] = {"Q6_K", "q6_k", 256, 210, ENG_GGML_Q6_K},
	[ENG_IQ4_XS] = {"IQ4_XS", "iq4_xs", 256, 136, ENG_GGML_IQ4_XS},
	[ENG_IQ4_NL] = {"IQ4_NL", "iq4_nl", 32, 18, ENG_GGML_IQ4_NL},
	[ENG_Q2_K] = {"Q2_K", "q2_k", 256, 84, ENG_GGML_Q2_K},
	[ENG_Q3_K] = {"Q3_K", "q3_k", 256, 110, ENG_GGML_Q3_K},
	[ENG_IQ2_XXS] = {"IQ2_XXS", "iq2_xxs", 256, 66, ENG_GGML_IQ2_XXS},
	[ENG_IQ2_XS] = {"IQ2_XS", "iq2_xs", 256, 74, ENG_GGML_IQ2_XS},
	[ENG_IQ2_S] = {"IQ2_S", "iq2_s", 256, 82, ENG_GGML_IQ2_S},
};

static bool known(eng_dtype t)
{
	return (unsigned)t < ENG_DTYPE_COUNT;
}

const char *eng_dtype_name(eng_dtype t)
{
	return known(t) ? dtypes[t].name : "?";
}

const char *eng_dtype_lower(eng_dtype t)
{
	return known(t) ? dtypes[t].lower : "?";
}

int eng_dtype_parse(const char *name)
{
	for (int t = 0; t < ENG_DTYPE_COUNT; t++)
		if (!strcmp(name, dtypes[t].name))
			return t;
	return -1;
}

uint32_t eng_dtype_ggml(eng_dtype t)
{
	return known(t) ? dtypes[t].ggml : UINT32_MAX;
}

int eng_dtype_from_ggml(uint32_t ggml_type)
{
	for (int t = 0; t < ENG_DTYPE_COUNT; t++)
		if (dtypes[t].ggml == ggml_type)
			return t;
	return -1;
}

size_t eng_dtype_size(eng_dtype t)
{
	return t == ENG_F32 ? 4 : 2;
}

int eng_dtype_block(eng_dtype t)
{
	return known(t) ? dtypes[t].block : 1;
}

size_t eng_dtype_bytes(eng_dtype t, size_t n)
{
	return known(t) ? n / (size_t)dtypes[t].block * dtypes[t].bytes : 0;
}

static float f16_decode(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0) {
		/* zero or subnormal: value = man * 2^-24 */
		float f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		u = sign | 0x7f800000u | (man << 13);
	else
		u = sign | ((exp + 112) << 23) | (man << 13);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_build(void)
{
	for (uint32_t i = 0; i < 65536; i++)
		f16_table[i] = f16_decode((uint16_t)i);
}

float eng_f16_to_f32(uint16_t h)
{
	pthread_once(&f16_once, f16_build);
	return f16_table[h];
}

uint16_t eng_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffffu;
	if (a >= 0x7f800000u) /* inf or nan */
		return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);
	if (a >= 0x477ff000u) /* rounds past the largest half */
		return sign | 0x7c00;
	if (a < 0x38800000u) { /* subnormal half or zero */
		float af;
		memcpy(&af, &a, 4);
		return sign | (uint16_t)lrintf(af * 16777216.0f); /* / 2^-24, nearest even */
	}
	/* normal: rebias exponent, round mantissa to nearest even */
	uint32_t r = a + 0xfffu + ((a >> 13) & 1);
	return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

uint16_t eng_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

void eng_to_f32(float *dst, const void *src, eng_dtype t, size_t n)
{
	if (eng_dtype_block(t) > 1) {
		eng_ggml_dequantize(dst, src, eng_dtype_ggml(t), n);
		return;
	}
	if (t == ENG_F32) {
		memcpy(dst, src, n * 4);
	} else if (t == ENG_BF16) {
		const uint16_t *s = src;
		size_t i = 0;
#ifdef __AVX2__
		/* exact: each value shifted into the high half (vectorized by hand:
		 * an -O2 build leaves the plain loop scalar) */
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
							  _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))), 16)));
#endif
		for (; i < n; i++)
			dst[i] = eng_bf16_to_f32(s[i]);
	} else {
		const uint16_t *s = src;
		size_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
#endif
		if (i < n)
			pthread_once(&f16_once, f16_build);
		for (; i < n; i++)
			dst[i] = f16_table[s[i]];
	}
}

const uint8_t *eng_weight_row(const eng_weight *w, int r, uint8_t *tmp)
{
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)w->cols);
	const uint8_t *data = w->data;
	if (!w->x4)
		return data + (size_t)r * rb;
	eng_qx4_row(tmp, data + (size_t)(r - r % 4) * rb, r % 4, w->cols / 32, (int)w->dtype);
	return tmp;
}

void eng_weight_rows(uint8_t *dst, const eng_weight *w)
{
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)w->cols);
	if (!w->x4) {
		memcpy(dst, w->data, rb * (size_t)w->rows);
		return;
	}
	for (int r = 0; r < w->rows; r++)
		eng_weight_row(w, r, dst + (size_t)r * rb);
}

void eng_weight_row_f32(float *dst, const eng_weight *w, int r)
{
	size_t rb = eng_dtype_bytes(w->dtype, (size_t)w->cols);
	const uint8_t *data = w->data;
	if (!w->x4) {
		eng_to_f32(dst, data + (size_t)r * rb, w->dtype, (size_t)w->cols);
		return;
	}
	/* a block (K-quants: super-block) at a time out of the quad (each of
	 * its blocks stands alone) */
	int B = eng_dtype_block(w->dtype);
	size_t bsz = eng_dtype_bytes(w->dtype, (size_t)B);
	const uint8_t *quad = data + (size_t)(r - r % 4) * rb;
	uint8_t blk[256];
	for (int b = 0; b < w->cols / B; b++) {
		eng_qx4_row(blk, quad + (size_t)b * 4 * bsz, r % 4, B / 32, (int)w->dtype);
		eng_to_f32(dst + (size_t)b * B, blk, w->dtype, (size_t)B);
	}
}
