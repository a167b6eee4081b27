/*
 * engine/cpu/qdot_body.h: the vector kernels of engine/cpu/qdot.c, included
 * once for each instruction set (QD_SFX names the copy, QD_TARGET is its
 * target attribute, QD_VNNI 1 in the AVX512-VNNI copy). The AVX2 copy has
 * the 8-lane kernel (kern) for raw and unpacked rows; the VNNI copy has
 * kernr (raw rows, 1-3 activation rows) and kern_pairs (unpacked rows, up
 * to 6), which hold two 8-lane sets side by side in 512-bit registers.
 * Both copies unpack rows for prefill (unpack_row). The sums are those of
 * qdot.h's definition; only how the exact integer lane sums are formed
 * differs between the kernels, so all give the same bits.
 */
#define QD_CAT2(a, b) a##b
#define QD_CAT(a, b) QD_CAT2(a, b)
#define QD(name) QD_CAT(name, QD_SFX)
#define QD_FN static inline __attribute__((always_inline, target(QD_TARGET)))

QD_FN float QD(h2f)(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

/* element e's low (hi 0) or high nibble of 16 bytes as bytes 0..15, the
 * other half's as bytes 16..31: a 32-block's nibbles in element order */
QD_FN __m256i QD(nib16)(const uint8_t *qs)
{
	__m128i x = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0F);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
}

/* byte e: 0x10 where bit e of qh is set, else 0 */
QD_FN __m256i QD(bits16)(uint32_t qh)
{
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
	                                _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
	                                                 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
	__m256i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
	return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, mask), mask), _mm256_set1_epi8(0x10));
}

/* 32 bytes shifted right by sh within each byte, masked */
QD_FN __m256i QD(bytes_shr)(const uint8_t *p, int sh, int mask)
{
	__m256i x = _mm256_loadu_si256((const __m256i *)p);
	return _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(sh)), _mm256_set1_epi8((char)mask));
}

/* Block b of a row of type t: its 32 integer values as bytes (in element
 * order), the scales of its halves and the minimum coefficient (qdot.h). */
QD_FN void QD(unpack)(const uint8_t *row, int b, int t, __m256i *q, float *sc, float *m)
{
	*m = 0.0f;
	switch (t) {
	case 3: { /* Q8_0 {f16 d; i8 qs[32]} */
		const uint8_t *p = row + (size_t)b * 34;
		sc[0] = sc[1] = QD(h2f)(p);
		*q = _mm256_loadu_si256((const __m256i *)(p + 2));
		return;
	}
	case 4: { /* Q4_0 {f16 d; qs[16]}: nibble - 8 */
		const uint8_t *p = row + (size_t)b * 18;
		sc[0] = sc[1] = QD(h2f)(p);
		*q = _mm256_sub_epi8(QD(nib16)(p + 2), _mm256_set1_epi8(8));
		return;
	}
	case 5: { /* Q4_1 {f16 d, m; qs[16]} */
		const uint8_t *p = row + (size_t)b * 20;
		sc[0] = sc[1] = QD(h2f)(p);
		*m = QD(h2f)(p + 2);
		*q = QD(nib16)(p + 4);
		return;
	}
	case 6: { /* Q5_0 {f16 d; u32 qh; qs[16]}: (nibble | bit << 4) - 16 */
		const uint8_t *p = row + (size_t)b * 22;
		uint32_t qh;
		memcpy(&qh, p + 2, 4);
		sc[0] = sc[1] = QD(h2f)(p);
		*q = _mm256_sub_epi8(_mm256_or_si256(QD(nib16)(p + 6), QD(bits16)(qh)), _mm256_set1_epi8(16));
		return;
	}
	case 7: { /* Q5_1 {f16 d, m; u32 qh; qs[16]} */
		const uint8_t *p = row + (size_t)b * 24;
		uint32_t qh;
		memcpy(&qh, p + 4, 4);
		sc[0] = sc[1] = QD(h2f)(p);
		*m = QD(h2f)(p + 2);
		*q = _mm256_or_si256(QD(nib16)(p + 8), QD(bits16)(qh));
		return;
	}
	case 8:
	case 9: { /* Q4_K {f16 d, dmin; scales[12]; qs[128]}, Q5_K {..., qh[32], qs[128]} */
		int five = t == 9, j = b % 8, s, mn;
		const uint8_t *p = row + (size_t)(b / 8) * (five ? 176 : 144);
		qd_scale_min(j, p + 4, &s, &mn);
		sc[0] = sc[1] = QD(h2f)(p) * (float)s;
		*m = -(QD(h2f)(p + 2) * (float)mn);
		__m256i v = QD(bytes_shr)(p + (five ? 48 : 16) + (j / 2) * 32, 4 * (j % 2), 0x0F);
		if (five)
			v = _mm256_or_si256(v, _mm256_slli_epi16(QD(bytes_shr)(p + 16, j, 1), 4));
		*q = v;
		return;
	}
	default: { /* Q6_K {ql[128], qh[64], i8 scales[16], f16 d}: (6 bits) - 32 */
		int j = b % 8, h = j / 4, k = j % 4;
		const uint8_t *p = row + (size_t)(b / 8) * 210;
		float d = QD(h2f)(p + 208);
		const int8_t *s8 = (const int8_t *)(p + 192 + h * 8 + 2 * k);
		sc[0] = d * (float)s8[0], sc[1] = d * (float)s8[1];
		__m256i lo = QD(bytes_shr)(p + h * 64 + (k & 1) * 32, k >= 2 ? 4 : 0, 0x0F);
		__m256i hi = _mm256_slli_epi16(QD(bytes_shr)(p + 128 + h * 32, 2 * k, 3), 4);
		*q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
		return;
	}
	}
}

QD_FN float QD(hsum8)(__m256 a)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, a), _mm256_hadd_ps(a, a));
	return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

/* One block of one weight row (lo, hi: its 16-bit values; s0, s1 its
 * halves' scales broadcast) against one activation block (xlo, xhi, its
 * scale xd broadcast) into the row's lanes, as qdot.h defines. */
#if !QD_VNNI
QD_FN __m256 QD(block)(__m256 acc, __m256i lo, __m256i hi, __m256 s0, __m256 s1, __m256i xlo, __m256i xhi, __m256 xd,
                       int two)
{
	__m256i plo = _mm256_madd_epi16(lo, xlo), phi = _mm256_madd_epi16(hi, xhi);
	if (!two)
		return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(plo, phi)), _mm256_mul_ps(s0, xd), acc);
	acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(plo), _mm256_mul_ps(s0, xd), acc);
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(phi), _mm256_mul_ps(s1, xd), acc);
}

/* the kernel on rows of blocks, for one type and batch width known at
 * compile time (unpacked tells the rows come unpacked, eng_qrow). The
 * four rows' minimum terms go in the lanes of one 4-lane vector an
 * activation row: lane r is row r's chain of fma(m, s, mins). */
QD_FN void QD(kern)(float *o, const eng_qxblk *const *x, int nx, const void *const w[4], int unpacked, int nb, int t)
{
	const int two = t == 10, mins = qd_has_min(t);
	__m256 acc[3][4];
	__m128 mn[3];
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++) {
		mn[i] = _mm_setzero_ps();
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			acc[i][r] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		__m256i lo[4], hi[4];
		__m256 s0[4], s1[4];
		float m[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			float sc[2];
			if (unpacked) {
				const eng_qrow *u = w[r];
				lo[r] = _mm256_loadu_si256((const __m256i *)(u->q + (size_t)b * 32));
				hi[r] = _mm256_loadu_si256((const __m256i *)(u->q + (size_t)b * 32 + 16));
				sc[0] = u->sc[2 * b], sc[1] = u->sc[2 * b + 1], m[r] = u->m[b];
			} else {
				__m256i q;
				QD(unpack)(w[r], b, t, &q, sc, &m[r]);
				lo[r] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
				hi[r] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
			}
			s0[r] = _mm256_set1_ps(sc[0]);
			s1[r] = two ? _mm256_set1_ps(sc[1]) : s0[r];
			/* kept as vectors: else GCC multiplies the scalars and broadcasts each product */
			__asm__("" : "+" QD_VREG(s0[r]));
			__asm__("" : "+" QD_VREG(s1[r]));
		}
		__m128 mw = _mm_setr_ps(m[0], m[1], m[2], m[3]);
#pragma GCC unroll 3
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *xb = x[i] + b;
			__m256i xlo = _mm256_loadu_si256((const __m256i *)xb->q);
			__m256i xhi = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
			__m256 xd = _mm256_set1_ps(xb->d);
			__asm__("" : "+" QD_VREG(xd));
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				acc[i][r] = QD(block)(acc[i][r], lo[r], hi[r], s0[r], s1[r], xlo, xhi, xd, two);
			if (mins)
				mn[i] = _mm_fmadd_ps(mw, _mm_set1_ps(xb->s), mn[i]);
		}
	}
#pragma GCC unroll 3
	for (int i = 0; i < nx; i++) {
		float mv[4];
		_mm_storeu_ps(mv, mn[i]);
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			o[i * 4 + r] = QD(hsum8)(acc[i][r]) + mv[r];
	}
}

#endif /* !QD_VNNI */

#if QD_VNNI
/* [16 bytes at a | 16 bytes at c] */
QD_FN __m256i QD(bytes2)(const uint8_t *a, const uint8_t *c)
{
	return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
	                               _mm_loadu_si128((const __m128i *)c), 1);
}

/* The 16 bits of a block's qh (or test mask) for elements 0-15 (first) or
 * 16-31 of rows a and c: a's in bits 0-15, c's in bits 16-31 */
QD_FN __mmask32 QD(half_bits)(uint32_t a, uint32_t c, int second)
{
	return (__mmask32)(second ? (a >> 16) | (c & 0xFFFF0000u) : (a & 0xFFFFu) | (c << 16));
}

/* Block b of rows a and c of type t as two registers of 16-bit values:
 * r1 = [a's elements 0-15 | c's 0-15], r2 = [a's 16-31 | c's 16-31]
 * (unpack above, widened as read; the scales come from scales4 below):
 * decode's kernel. */
QD_FN void QD(words2)(const uint8_t *ra, const uint8_t *rc, int b, int t, __m512i *r1, __m512i *r2)
{
	const __m512i w16 = _mm512_set1_epi16(16), f = _mm512_set1_epi16(0x0F);
	switch (t) {
	case 3: {
		const uint8_t *a = ra + (size_t)b * 34 + 2, *c = rc + (size_t)b * 34 + 2;
		*r1 = _mm512_cvtepi8_epi16(QD(bytes2)(a, c));
		*r2 = _mm512_cvtepi8_epi16(QD(bytes2)(a + 16, c + 16));
		return;
	}
	case 4:
	case 5:
	case 6:
	case 7: {
		const uint8_t *a = ra + (size_t)b * (size_t)qd_bsz[t], *c = rc + (size_t)b * (size_t)qd_bsz[t];
		__m512i v = _mm512_cvtepu8_epi16(QD(bytes2)(a + qd_qs[t], c + qd_qs[t]));
		*r1 = _mm512_and_si512(v, f), *r2 = _mm512_srli_epi16(v, 4);
		if (t == 4) {
			*r1 = _mm512_sub_epi16(*r1, _mm512_set1_epi16(8)), *r2 = _mm512_sub_epi16(*r2, _mm512_set1_epi16(8));
		} else if (t != 5) {
			uint32_t ha, hc;
			memcpy(&ha, a + qd_qs[t] - 4, 4), memcpy(&hc, c + qd_qs[t] - 4, 4);
			if (t == 6) { /* bit set: + 16 - 16; clear: - 16 */
				*r1 = _mm512_mask_sub_epi16(*r1, QD(half_bits)(~ha, ~hc, 0), *r1, w16);
				*r2 = _mm512_mask_sub_epi16(*r2, QD(half_bits)(~ha, ~hc, 1), *r2, w16);
			} else {
				*r1 = _mm512_mask_add_epi16(*r1, QD(half_bits)(ha, hc, 0), *r1, w16);
				*r2 = _mm512_mask_add_epi16(*r2, QD(half_bits)(ha, hc, 1), *r2, w16);
			}
		}
		return;
	}
	case 8:
	case 9: {
		int five = t == 9, j = b % 8;
		size_t at = (size_t)(b / 8) * (five ? 176 : 144);
		const uint8_t *a = ra + at + (five ? 48 : 16) + (j / 2) * 32, *c = rc + at + (five ? 48 : 16) + (j / 2) * 32;
		__m512i v1 = _mm512_cvtepu8_epi16(QD(bytes2)(a, c)), v2 = _mm512_cvtepu8_epi16(QD(bytes2)(a + 16, c + 16));
		if (j % 2)
			*r1 = _mm512_srli_epi16(v1, 4), *r2 = _mm512_srli_epi16(v2, 4);
		else
			*r1 = _mm512_and_si512(v1, f), *r2 = _mm512_and_si512(v2, f);
		if (five) {
			const __m256i bit = _mm256_set1_epi8((char)(1 << j));
			uint32_t ka = (uint32_t)_mm256_test_epi8_mask(_mm256_loadu_si256((const __m256i *)(ra + at + 16)), bit);
			uint32_t kc = (uint32_t)_mm256_test_epi8_mask(_mm256_loadu_si256((const __m256i *)(rc + at + 16)), bit);
			*r1 = _mm512_mask_add_epi16(*r1, QD(half_bits)(ka, kc, 0), *r1, w16);
			*r2 = _mm512_mask_add_epi16(*r2, QD(half_bits)(ka, kc, 1), *r2, w16);
		}
		return;
	}
	default: {
		int j = b % 8, h = j / 4, k = j % 4;
		size_t at = (size_t)(b / 8) * 210;
		const uint8_t *la = ra + at + h * 64 + (k & 1) * 32, *lc = rc + at + h * 64 + (k & 1) * 32;
		const uint8_t *qa = ra + at + 128 + h * 32, *qc = rc + at + 128 + h * 32;
		__m128i s4 = _mm_cvtsi32_si128(k >= 2 ? 4 : 0), s2 = _mm_cvtsi32_si128(2 * k);
		const __m512i three = _mm512_set1_epi16(3), w32 = _mm512_set1_epi16(32);
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++) {
			__m512i lo = _mm512_and_si512(_mm512_srl_epi16(_mm512_cvtepu8_epi16(QD(bytes2)(la + 16 * half, lc + 16 * half)), s4), f);
			__m512i hi = _mm512_and_si512(_mm512_srl_epi16(_mm512_cvtepu8_epi16(QD(bytes2)(qa + 16 * half, qc + 16 * half)), s2),
			                              three);
			__m512i v = _mm512_sub_epi16(_mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)), w32);
			if (half)
				*r2 = v;
			else
				*r1 = v;
		}
		return;
	}
	}
}

QD_FN uint64_t QD(u16at)(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return h;
}

/* The four rows' f16 values at byte offset `at`, as floats: the bits
 * gathered in a general register, converted in one instruction (each the
 * same float as h2f of it). */
QD_FN __m128 QD(f16x4)(const uint8_t *const w[4], size_t at)
{
	uint64_t v = QD(u16at)(w[0] + at) | QD(u16at)(w[1] + at) << 16 | QD(u16at)(w[2] + at) << 32 |
	             QD(u16at)(w[3] + at) << 48;
	return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}

/* Block b's scales of four rows of a 32-element type (lane r row r), s0
 * and s1 the same, and their minimum coefficients (m; Q4_1, Q5_1): the
 * values unpack reads one row at a time, the same bits. K-quants take
 * theirs a super-block at a time (kscales below). */
QD_FN void QD(scales4)(const uint8_t *const w[4], int b, int t, __m128 *s0, __m128 *s1, __m128 *m)
{
	size_t at = (size_t)b * (size_t)qd_bsz[t];
	*s0 = *s1 = QD(f16x4)(w, at);
	if (t == 5 || t == 7)
		*m = QD(f16x4)(w, at + 2);
}

/* A K-quant super-block's scales for its 8 blocks and four rows, the
 * products unpack forms one block at a time (the same bits): s0[j*4 + r],
 * s1[..] (Q6_K's second halves), m[..] (Q4_K, Q5_K). The 6-bit scales
 * and minima of each row are taken apart four at a time in a general
 * register, then turned to block-major order with byte shuffles. */
QD_FN __m128i QD(u64x2)(uint64_t lo, uint64_t hi)
{
	return _mm_set_epi64x((long long)hi, (long long)lo);
}

QD_FN void QD(kscales)(const uint8_t *const w[4], int sb, int t, float *s0, float *s1, float *m)
{
	if (t == 8 || t == 9) {
		size_t at = (size_t)sb * (t == 9 ? 176 : 144);
		uint64_t sc[4], mn[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			uint32_t q0, q1, q2;
			memcpy(&q0, w[r] + at + 4, 4), memcpy(&q1, w[r] + at + 8, 4), memcpy(&q2, w[r] + at + 12, 4);
			uint32_t slo = q0 & 0x3F3F3F3Fu, mlo = q1 & 0x3F3F3F3Fu;
			uint32_t shi = (q2 & 0x0F0F0F0Fu) | ((q0 >> 2) & 0x30303030u);
			uint32_t mhi = ((q2 >> 4) & 0x0F0F0F0Fu) | ((q1 >> 2) & 0x30303030u);
			sc[r] = slo | (uint64_t)shi << 32, mn[r] = mlo | (uint64_t)mhi << 32;
		}
		const __m128i il = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
		__m512 d = _mm512_broadcast_f32x4(QD(f16x4)(w, at)), dm = _mm512_broadcast_f32x4(QD(f16x4)(w, at + 2));
		const uint64_t *src[2] = {sc, mn};
#pragma GCC unroll 2
		for (int k = 0; k < 2; k++) {
			const uint64_t *v = src[k];
			__m128i a = _mm_shuffle_epi8(QD(u64x2)(v[0], v[1]), il), c = _mm_shuffle_epi8(QD(u64x2)(v[2], v[3]), il);
			__m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi16(a, c)));
			__m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi16(a, c)));
			if (k == 0) {
				_mm512_storeu_ps(s0, _mm512_mul_ps(d, f0)), _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(d, f1));
			} else {
				const __m512 neg = _mm512_set1_ps(-0.0f);
				_mm512_storeu_ps(m, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dm, f0)),
				                                                         _mm512_castps_si512(neg))));
				_mm512_storeu_ps(m + 16, _mm512_castsi512_ps(_mm512_xor_si512(
				                                 _mm512_castps_si512(_mm512_mul_ps(dm, f1)), _mm512_castps_si512(neg))));
			}
		}
		return;
	}
	/* Q6_K: 16 int8 scales a row; block j's halves take scales 2j and 2j + 1 */
	size_t at = (size_t)sb * 210;
	__m128i r0 = _mm_loadu_si128((const __m128i *)(w[0] + at + 192)), r1 = _mm_loadu_si128((const __m128i *)(w[1] + at + 192));
	__m128i r2 = _mm_loadu_si128((const __m128i *)(w[2] + at + 192)), r3 = _mm_loadu_si128((const __m128i *)(w[3] + at + 192));
	__m128i a0 = _mm_unpacklo_epi8(r0, r1), a1 = _mm_unpackhi_epi8(r0, r1);
	__m128i c0 = _mm_unpacklo_epi8(r2, r3), c1 = _mm_unpackhi_epi8(r2, r3);
	/* [i: r0 r1 r2 r3] for i = 0-3, 4-7, 8-11, 12-15 */
	__m128i g[4] = {_mm_unpacklo_epi16(a0, c0), _mm_unpackhi_epi16(a0, c0), _mm_unpacklo_epi16(a1, c1),
	                _mm_unpackhi_epi16(a1, c1)};
	__m512 d = _mm512_broadcast_f32x4(QD(f16x4)(w, at + 208));
	/* scale i = 2j + half: g's 32-bit groups in order are i = 0..15; split
	 * even (first halves) and odd (second halves) */
	float all[64];
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		_mm512_storeu_ps(all + 16 * q, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(g[q]))));
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) {
		_mm_storeu_ps(s0 + 4 * j, _mm_loadu_ps(all + 8 * j));
		_mm_storeu_ps(s1 + 4 * j, _mm_loadu_ps(all + 8 * j + 4));
	}
}

/* Decode on raw rows (1-3 activation rows), weight rows 0 and 1 in one register's two halves
 * and rows 2 and 3 in another's: lane k of a half gets the pairs 2k, 2k+1
 * of the block's first half from madd and of its second from dpwssd
 * (lo_k + hi_k, the same exact integers as the 8-lane kernel), then the
 * definition's fma, its products sc * d formed four rows at once: the
 * same bits as qdot.h says, in about half the instructions a block. */
QD_FN void QD(kernr)(float *o, const eng_qxblk *const *x, int nx, const uint8_t *const w[4], int nb, int t)
{
	const int two = t == 10, mins = qd_has_min(t);
	const __m512i lanes01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
	const __m512i lanes23 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	__m512 acc[2][3];
	__m128 mn[3];
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++)
		acc[0][i] = acc[1][i] = _mm512_setzero_ps(), mn[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a K-quant super-block's scales (kscales) */
	for (int b = 0; b < nb; b++) {
		__m128 s0, s1, m = _mm_setzero_ps();
		if (t >= 8) {
			if (b % 8 == 0)
				QD(kscales)(w, b / 8, t, ks0, ks1, km);
			s0 = _mm_loadu_ps(ks0 + 4 * (b % 8)), s1 = _mm_loadu_ps(ks1 + 4 * (b % 8)), m = _mm_loadu_ps(km + 4 * (b % 8));
		} else {
			QD(scales4)(w, b, t, &s0, &s1, &m);
		}
		__m512i x1[3], x2[3];
		__m512 sx0[3], sx1[3];
#pragma GCC unroll 3
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *xb = x[i] + b;
			x1[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->q));
			x2[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb->q + 16)));
			__m128 xd = _mm_set1_ps(xb->d);
			sx0[i] = _mm512_castps128_ps512(_mm_mul_ps(s0, xd));
			sx1[i] = two ? _mm512_castps128_ps512(_mm_mul_ps(s1, xd)) : sx0[i];
			if (mins)
				mn[i] = _mm_fmadd_ps(m, _mm_set1_ps(xb->s), mn[i]);
		}
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			__m512i idx = h ? lanes23 : lanes01, r1, r2;
			QD(words2)(w[2 * h], w[2 * h + 1], b, t, &r1, &r2);
#pragma GCC unroll 3
			for (int i = 0; i < nx; i++) {
				if (!two) {
					__m512i sum = _mm512_dpwssd_epi32(_mm512_madd_epi16(r1, x1[i]), r2, x2[i]);
					acc[h][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(idx, sx0[i]),
					                            acc[h][i]);
				} else {
					acc[h][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(r1, x1[i])),
					                            _mm512_permutexvar_ps(idx, sx0[i]), acc[h][i]);
					acc[h][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(r2, x2[i])),
					                            _mm512_permutexvar_ps(idx, sx1[i]), acc[h][i]);
				}
			}
		}
	}
#pragma GCC unroll 3
	for (int i = 0; i < nx; i++) {
		float mv[4];
		_mm_storeu_ps(mv, mn[i]);
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			o[i * 4 + 2 * h] = QD(hsum8)(_mm512_castps512_ps256(acc[h][i])) + mv[2 * h];
			o[i * 4 + 2 * h + 1] =
			        QD(hsum8)(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[h][i]), 1))) + mv[2 * h + 1];
		}
	}
}

__attribute__((target(QD_TARGET))) static void QD(qdotr)(float *o, const eng_qxblk *const *x, int nx,
                                                          const uint8_t *const w[4], int nb, int t)
{
#define QD_R(T)                                                                                                        \
	case T:                                                                                                        \
		if (nx == 1)                                                                                           \
			QD(kernr)(o, x, 1, w, nb, T);                                                                  \
		else if (nx == 2)                                                                                      \
			QD(kernr)(o, x, 2, w, nb, T);                                                                  \
		else                                                                                                   \
			QD(kernr)(o, x, 3, w, nb, T);                                                                  \
		break;
	switch (t) {
		QD_R(3)
		QD_R(4)
		QD_R(5)
		QD_R(6)
		QD_R(7)
		QD_R(8)
		QD_R(9)
	default:
		QD_R(10)
	}
#undef QD_R
}

/* Unpacked rows against up to 6 activation rows, two to a 512-bit
 * register: a pair's lanes are two copies of the 8 lanes of qdot.h side
 * by side (the weight row broadcast to both halves, activation row 2p in
 * the low half and 2p+1 in the high), each half doing exactly the
 * definition's operations in its order, so every output has the bits of
 * the 8-lane kernel above with half the instructions a multiply. An odd
 * last row is paired with itself. */
QD_FN __m512i QD(pair16)(const int16_t *a, const int16_t *b)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
	                          _mm256_loadu_si256((const __m256i *)b), 1);
}

QD_FN void QD(kern_pairs)(float *o, const eng_qxblk *const *x, int nx, const eng_qrow *const w[4], int nb, int t,
                          int np)
{
	const int two = t == 10, mins = qd_has_min(t);
	__m512 acc[3][4];
	__m128 mn[6];
	const eng_qxblk *xr[6];
#pragma GCC unroll 6
	for (int i = 0; i < 6; i++) {
		mn[i] = _mm_setzero_ps();
		xr[i] = x[i < nx ? i : nx - 1];
	}
#pragma GCC unroll 3
	for (int p = 0; p < 3; p++)
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++)
			acc[p][r] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m512i xlo[3], xhi[3];
		__m512 xd[3];
#pragma GCC unroll 3
		for (int p = 0; p < np; p++) {
			const eng_qxblk *a = xr[2 * p] + b, *c = xr[2 * p + 1] + b;
			xlo[p] = QD(pair16)(a->q, c->q);
			xhi[p] = QD(pair16)(a->q + 16, c->q + 16);
			xd[p] = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a->d)),
			                                            _mm256_castps_pd(_mm256_set1_ps(c->d)), 1));
		}
		float m[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			const eng_qrow *u = w[r];
			__m512i lo = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(u->q + (size_t)b * 32)));
			__m512i hi = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(u->q + (size_t)b * 32 + 16)));
			__m512 s0 = _mm512_set1_ps(u->sc[2 * b]);
			m[r] = u->m[b];
#pragma GCC unroll 3
			for (int p = 0; p < np; p++) {
				if (!two) {
					__m512i sum = _mm512_dpwssd_epi32(_mm512_madd_epi16(lo, xlo[p]), hi, xhi[p]);
					acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(s0, xd[p]), acc[p][r]);
				} else {
					__m512 s1 = _mm512_set1_ps(u->sc[2 * b + 1]);
					acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(lo, xlo[p])),
					                            _mm512_mul_ps(s0, xd[p]), acc[p][r]);
					acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(hi, xhi[p])),
					                            _mm512_mul_ps(s1, xd[p]), acc[p][r]);
				}
			}
		}
		if (mins) {
			__m128 mw = _mm_setr_ps(m[0], m[1], m[2], m[3]);
#pragma GCC unroll 6
			for (int i = 0; i < 2 * np; i++)
				mn[i] = _mm_fmadd_ps(mw, _mm_set1_ps(xr[i][b].s), mn[i]);
		}
	}
#pragma GCC unroll 3
	for (int p = 0; p < np; p++) {
		float mv[2][4];
		_mm_storeu_ps(mv[0], mn[2 * p]);
		_mm_storeu_ps(mv[1], mn[2 * p + 1]);
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			o[2 * p * 4 + r] = QD(hsum8)(_mm512_castps512_ps256(acc[p][r])) + mv[0][r];
			if (2 * p + 1 < nx)
				o[(2 * p + 1) * 4 + r] = QD(hsum8)(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][r]), 1))) + mv[1][r];
		}
	}
}

__attribute__((target(QD_TARGET))) static void QD(qdot_pairs)(float *o, const eng_qxblk *const *x, int nx,
                                                               const eng_qrow *const w[4], int nb, int t)
{
	int np = (nx + 1) / 2;
#define QD_P(T)                                                                                                        \
	case T:                                                                                                        \
		if (np == 1)                                                                                           \
			QD(kern_pairs)(o, x, nx, w, nb, T, 1);                                                         \
		else if (np == 2)                                                                                      \
			QD(kern_pairs)(o, x, nx, w, nb, T, 2);                                                         \
		else                                                                                                   \
			QD(kern_pairs)(o, x, nx, w, nb, T, 3);                                                         \
		break;
	switch (t) {
		QD_P(3)
		QD_P(4)
		QD_P(5)
		QD_P(6)
		QD_P(7)
		QD_P(8)
		QD_P(9)
	default:
		QD_P(10)
	}
#undef QD_P
}
#endif

__attribute__((target(QD_TARGET))) static void QD(unpack_row)(eng_qrow *dst, const uint8_t *w, int nb, int t)
{
	for (int b = 0; b < nb; b++) {
		__m256i q;
		QD(unpack)(w, b, t, &q, dst->sc + 2 * b, dst->m + b);
		_mm256_storeu_si256((__m256i *)(dst->q + (size_t)b * 32), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
		_mm256_storeu_si256((__m256i *)(dst->q + (size_t)b * 32 + 16),
		                    _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)));
	}
}

#if !QD_VNNI
__attribute__((target(QD_TARGET))) static void QD(qdot)(float *o, const eng_qxblk *const *x, int nx,
                                                         const void *const w[4], int unpacked, int nb, int t)
{
#define QD_W(T, NX)                                                                                                    \
	do {                                                                                                           \
		if (unpacked)                                                                                          \
			QD(kern)(o, x, NX, w, 1, nb, T);                                                               \
		else                                                                                                   \
			QD(kern)(o, x, NX, w, 0, nb, T);                                                               \
	} while (0)
#define QD_CASE(T)                                                                                                     \
	case T:                                                                                                        \
		if (nx == 1)                                                                                           \
			QD_W(T, 1);                                                                                    \
		else if (nx == 2)                                                                                      \
			QD_W(T, 2);                                                                                    \
		else                                                                                                   \
			QD_W(T, 3);                                                                                    \
		break;
	switch (t) {
		QD_CASE(3)
		QD_CASE(4)
		QD_CASE(5)
		QD_CASE(6)
		QD_CASE(7)
		QD_CASE(8)
		QD_CASE(9)
	default:
		QD_CASE(10)
	}
#undef QD_CASE
#undef QD_W
}
#endif

#undef QD_FN
#undef QD
#undef QD_CAT
#undef QD_CAT2
