/*
 * engine/cpu/qdot_body.h: the vector kernels of engine/cpu/qdot.c, included
 * once for each instruction set (QD_SFX names the copy, QD_TARGET is its
 * target attribute, QD_VNNI 1 in the AVX512-VNNI copy). Decode reads raw
 * rows four at a time: the AVX2 copy's kern; the VNNI copy's kern4b
 * (Q4_0 .. Q5_1, IQ4_NL), kern4k (Q4_K, Q5_K), kern4i (IQ4_XS), kern6k
 * (Q6_K), kern2k (Q2_K) and kern3k (Q3_K), the weights as bytes against
 * the activations' two bytes (eng_qxbyt), and its kernr (two rows to a
 * 512-bit register, as 16-bit words) for Q8_0 and for calls without those
 * bytes (of Q4_0 .. Q5_1; the other types then take the AVX2 kern). Prefill unpacks 16 rows into a group
 * (group_unpack) and runs gkern on it, one row a lane. The sums are
 * qdot.h's definition; only how a block's exact integer sum is formed
 * differs between the kernels, so all give the same bits.
 */
#define QD_CAT2(a, b) a##b
#define QD_CAT(a, b) QD_CAT2(a, b)
#define QD(name) QD_CAT(name, QD_SFX)
#define QD_FN static inline __attribute__((always_inline, target(QD_TARGET)))

/* element e's low (hi 0) or high nibble of 16 bytes as bytes 0..15, the
 * other half's as bytes 16..31: a 32-block's nibbles in element order */
QD_FN __m256i QD(nib16)(const uint8_t *qs)
{
	__m128i x = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0F);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), m), _mm_and_si128(x, m));
}

/* IQ4_NL's sixteen values in each 128-bit half, for a byte shuffle by nibble */
QD_FN __m256i QD(iq4tab)(void)
{
	return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)eng_ggml_iq4nl_values));
}

#if QD_VNNI
/* the same in each 128 bits of 512 */
QD_FN __m512i QD(iq4tab512)(void)
{
	return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)eng_ggml_iq4nl_values));
}
#endif

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

/* Block b of a row of type t: its 32 integer values as bytes, in element
 * order (qdot.h; the scales come four rows at once from scales4 and
 * kscales below). */
QD_FN void QD(unpack)(const uint8_t *row, int b, int t, __m256i *q)
{
	switch (t) {
	case 3: { /* Q8_0 {f16 d; i8 qs[32]} */
		const uint8_t *p = row + (size_t)b * 34;
		*q = _mm256_loadu_si256((const __m256i *)(p + 2));
		return;
	}
	case 4: { /* Q4_0 {f16 d; qs[16]}: nibble - 8 */
		const uint8_t *p = row + (size_t)b * 18;
		*q = _mm256_sub_epi8(QD(nib16)(p + 2), _mm256_set1_epi8(8));
		return;
	}
	case 5: { /* Q4_1 {f16 d, m; qs[16]} */
		const uint8_t *p = row + (size_t)b * 20;
		*q = QD(nib16)(p + 4);
		return;
	}
	case 6: { /* Q5_0 {f16 d; u32 qh; qs[16]}: (nibble | bit << 4) - 16 */
		const uint8_t *p = row + (size_t)b * 22;
		uint32_t qh;
		memcpy(&qh, p + 2, 4);
		*q = _mm256_sub_epi8(_mm256_or_si256(QD(nib16)(p + 6), QD(bits16)(qh)), _mm256_set1_epi8(16));
		return;
	}
	case 7: { /* Q5_1 {f16 d, m; u32 qh; qs[16]} */
		const uint8_t *p = row + (size_t)b * 24;
		uint32_t qh;
		memcpy(&qh, p + 4, 4);
		*q = _mm256_or_si256(QD(nib16)(p + 8), QD(bits16)(qh));
		return;
	}
	case 8:
	case 9: { /* Q4_K {f16 d, dmin; scales[12]; qs[128]}, Q5_K {..., qh[32], qs[128]} */
		int five = t == 9, j = b % 8;
		const uint8_t *p = row + (size_t)(b / 8) * (five ? 176 : 144);
		__m256i v = QD(bytes_shr)(p + (five ? 48 : 16) + (j / 2) * 32, 4 * (j % 2), 0x0F);
		if (five)
			v = _mm256_or_si256(v, _mm256_slli_epi16(QD(bytes_shr)(p + 16, j, 1), 4));
		*q = v;
		return;
	}
	case 13: { /* Q2_K {scales[16]; qs[64]; f16 d, dmin}: block j's 2-bit values, bits 2 (j % 4) of its half's 32 bytes */
		int j = b % 8;
		*q = QD(bytes_shr)(row + (size_t)(b / 8) * 84 + 16 + 32 * (j / 4), 2 * (j % 4), 3);
		return;
	}
	case 14: { /* Q3_K {hmask[32]; qs[64]; scales[12]; f16 d}: Q2_K's 2-bit fields (at 32), + 4 where bit j of hmask is set, - 4 */
		int j = b % 8;
		const uint8_t *p = row + (size_t)(b / 8) * 110;
		__m256i lo = QD(bytes_shr)(p + 32 + 32 * (j / 4), 2 * (j % 4), 3), hb = QD(bytes_shr)(p, j, 1);
		*q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hb, 2)), _mm256_set1_epi8(4));
		return;
	}
	case 12: { /* IQ4_NL {f16 d; qs[16]}: the table's values of the nibbles */
		*q = _mm256_shuffle_epi8(QD(iq4tab)(), QD(nib16)(row + (size_t)b * 18 + 2));
		return;
	}
	case 11: { /* IQ4_XS {f16 d; u16 scales_h; scales_l[4]; qs[128]}: IQ4_NL's values of block b's nibbles */
		*q = _mm256_shuffle_epi8(QD(iq4tab)(), QD(nib16)(row + (size_t)(b / 8) * 136 + 8 + (size_t)(b % 8) * 16));
		return;
	}
	case 15:
	case 16:
	case 17: { /* the IQ2s: four groups of eight, each a grid entry's magnitudes and its signs (bytes +-1) */
		int j = b % 8;
		const uint64_t *g8 = eng_ggml_iq2_grid8_tab[t - 15];
		uint64_t m[4], s[4];
		if (t == 15) { /* IQ2_XXS: the entries the first u32's bytes, the signs seven bits at 7 k of the second */
			const uint8_t *p = row + (size_t)(b / 8) * 66 + 2 + 8 * j;
			uint32_t aux;
			memcpy(&aux, p + 4, 4);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++)
				m[k] = g8[p[k]], s[k] = eng_ggml_iq2_ksign8_tab[(aux >> (7 * k)) & 127];
		} else if (t == 16) { /* IQ2_XS: a u16 a group, nine bits of entry and seven of signs */
			uint16_t v[4];
			memcpy(v, row + (size_t)(b / 8) * 74 + 2 + 8 * j, 8);
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++)
				m[k] = g8[v[k] & 511], s[k] = eng_ggml_iq2_ksign8_tab[v[k] >> 9];
		} else { /* IQ2_S: qs[g] and two bits of qh[g / 4] the entry, signs[g] the signs */
			const uint8_t *sb = row + (size_t)(b / 8) * 82;
			uint32_t lo, sg, qh = sb[66 + j];
			memcpy(&lo, sb + 2 + 4 * j, 4), memcpy(&sg, sb + 34 + 4 * j, 4);
			/* (word arithmetic: the compiler's vector form of these indices went through slow moves) */
			m[0] = g8[(lo & 255) | (qh & 3) << 8], m[1] = g8[((lo >> 8) & 255) | (qh & 12) << 6];
			m[2] = g8[((lo >> 16) & 255) | (qh & 48) << 4], m[3] = g8[(lo >> 24) | (qh & 192) << 2];
#pragma GCC unroll 4
			for (int k = 0; k < 4; k++)
				s[k] = eng_ggml_iq2_sign8_tab[(sg >> (8 * k)) & 255];
		}
		__m256i mag = _mm256_setr_epi64x((long long)m[0], (long long)m[1], (long long)m[2], (long long)m[3]);
		*q = _mm256_sign_epi8(mag, _mm256_setr_epi64x((long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]));
		return;
	}
	default: { /* Q6_K {ql[128], qh[64], i8 scales[16], f16 d}: (6 bits) - 32 */
		int j = b % 8, h = j / 4, k = j % 4;
		const uint8_t *p = row + (size_t)(b / 8) * 210;
		__m256i lo = QD(bytes_shr)(p + h * 64 + (k & 1) * 32, k >= 2 ? 4 : 0, 0x0F);
		__m256i hi = _mm256_slli_epi16(QD(bytes_shr)(p + 128 + h * 32, 2 * k, 3), 4);
		*q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
		return;
	}
	}
}

/* Block b's scales of four rows of a 32-element type (lane r row r), s0
 * and s1 the same, and their minimum coefficients (m; Q4_1, Q5_1): the
 * definition's values (qdot.c's unpack_ref), the same bits. K-quants and
 * IQ4_XS take theirs a super-block at a time (kscales below). */
QD_FN void QD(scales4)(const uint8_t *const w[4], int b, int t, __m128 *s0, __m128 *s1, __m128 *m)
{
	size_t at = (size_t)b * (size_t)qd_bsz[t];
	*s0 = *s1 = eng_qs_f16x4(w, at);
	if (t == 5 || t == 7)
		*m = eng_qs_f16x4(w, at + 2);
}

/* dst[0..16) = d4[k % 4] * (float)bytes[k] (unsigned), negated if neg:
 * the products kscales forms (negation is exact) */
QD_FN void QD(put16)(float *dst, __m128i bytes, __m128 d4, int neg)
{
#if QD_VNNI
	__m512 v = _mm512_mul_ps(_mm512_broadcast_f32x4(d4), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)));
	if (neg)
		v = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_castps_si512(_mm512_set1_ps(-0.0f))));
	_mm512_storeu_ps(dst, v);
#else
	__m256 d8 = _mm256_set_m128(d4, d4);
	__m256 lo = _mm256_mul_ps(d8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
	__m256 hi = _mm256_mul_ps(d8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8))));
	if (neg)
		lo = _mm256_xor_ps(lo, _mm256_set1_ps(-0.0f)), hi = _mm256_xor_ps(hi, _mm256_set1_ps(-0.0f));
	_mm256_storeu_ps(dst, lo), _mm256_storeu_ps(dst + 8, hi);
#endif
}

/* A K-quant super-block's scales for its 8 blocks and four rows, the
 * products the definition forms one block at a time (qdot.c's unpack_ref;
 * the same bits): s0[j*4 + r], s1[..] (Q6_K's second halves), m[..]
 * (Q4_K, Q5_K; zero for Q6_K). The four rows' 6-bit scales and minima are
 * taken apart together in one vector, then turned to block-major order
 * with a byte shuffle. */
QD_FN void QD(kscalesx)(const uint8_t *const w[4], int sb, int t, float *s0, float *s1, float *m, int x4)
{
	if (qd_iq2(t)) {
		/* the IQ2s (never in quads): each half's d (1 + 2 ls) / 8, as unpack_ref
		 * forms it. The four rows' eight ls bytes (IQ2_XXS: each block's last
		 * byte, its top nibble for both halves; the others' scales, a nibble a
		 * half) interleaved to block-major order, a row a lane of four */
		size_t at = (size_t)sb * (t == 15 ? 66 : t == 16 ? 74 : 82);
		__m128i r8[4];
		float d[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			const uint8_t *p = w[r] + at;
			uint64_t v = 0;
			if (t == 15)
				for (int j = 0; j < 8; j++)
					v |= (uint64_t)(p[2 + 8 * j + 7] >> 4) << (8 * j);
			else
				memcpy(&v, p + (t == 16 ? 66 : 74), 8);
			r8[r] = _mm_cvtsi64_si128((long long)v);
			d[r] = eng_ggml_h2f(p);
		}
		__m128i a = _mm_unpacklo_epi8(r8[0], r8[1]), c = _mm_unpacklo_epi8(r8[2], r8[3]);
		__m128i by[2] = {_mm_unpacklo_epi16(a, c), _mm_unpackhi_epi16(a, c)}; /* blocks 0-3, 4-7 */
		const __m128 d4 = _mm_loadu_ps(d);
		const __m256 d8 = _mm256_set_m128(d4, d4), eighth = _mm256_set1_ps(0.125f);
		const __m128i lo4 = _mm_set1_epi8(0x0F);
		for (int k = 0; k < 2; k++) {
			float *dst = k ? s1 : s0;
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++) { /* blocks 2q, 2q + 1: their bytes, the half's nibble */
				__m128i nb = _mm_srli_si128(by[q / 2], 8 * (q % 2));
				nb = k && t != 15 ? _mm_srli_epi16(nb, 4) : nb;
				__m256i l = _mm256_cvtepu8_epi32(_mm_and_si128(nb, lo4));
				__m256 mul = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(l, l), _mm256_set1_epi32(1)));
				_mm256_storeu_ps(dst + 8 * q, _mm256_mul_ps(_mm256_mul_ps(d8, mul), eighth));
			}
		}
		memset(m, 0, 32 * sizeof *m);
		(void)x4;
		return;
	}
	if (t == 11) {
		/* IQ4_XS: block j's scale d * ls_j, ls_j = (the nibble j % 2 of
		 * scales_l[j / 2] | bits 2j, 2j + 1 of scales_h << 4) - 32, for two
		 * blocks and four rows a vector (lane k: block 2p + k / 4, row k % 4);
		 * s1 the same, m zero (eng_ggml_iq4xs_scale's definition, the same
		 * bits). The four rows' 8-byte heads {d, scales_h, scales_l} as one
		 * vector of dwords [d | scales_h << 16, scales_l] a row (a quad holds
		 * them so, eng_qx4_pack: one load). */
		__m256i H;
		if (x4) {
			H = _mm256_loadu_si256((const __m256i *)(w[0] + (size_t)sb * 4 * 136));
		} else {
			long long h[4];
			for (int r = 0; r < 4; r++)
				memcpy(&h[r], w[r] + (size_t)sb * 136, 8);
			H = _mm256_setr_epi64x(h[0], h[1], h[2], h[3]);
		}
		const __m256i ev = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), od = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
		__m256i L = _mm256_permutevar8x32_epi32(H, od), E = _mm256_permutevar8x32_epi32(H, ev);
		__m256i S = _mm256_srli_epi32(E, 16);
		__m128i dh = _mm_packus_epi32(_mm_and_si128(_mm256_castsi256_si128(E), _mm_set1_epi32(0xFFFF)), _mm_setzero_si128());
		__m128 d4 = _mm_cvtph_ps(dh);
		__m256 D = _mm256_set_m128(d4, d4);
		const __m256i m4 = _mm256_set1_epi32(0xF), m2 = _mm256_set1_epi32(3), off = _mm256_set1_epi32(32);
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			__m256i shl = _mm256_setr_epi32(8 * q, 8 * q, 8 * q, 8 * q, 8 * q + 4, 8 * q + 4, 8 * q + 4, 8 * q + 4);
			__m256i shh = _mm256_setr_epi32(4 * q, 4 * q, 4 * q, 4 * q, 4 * q + 2, 4 * q + 2, 4 * q + 2, 4 * q + 2);
			__m256i ls = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi32(L, shl), m4),
			                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(S, shh), m2), 4));
			__m256 v = _mm256_mul_ps(D, _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, off)));
			_mm256_storeu_ps(s0 + 8 * q, v), _mm256_storeu_ps(s1 + 8 * q, v);
			_mm256_storeu_ps(m + 8 * q, _mm256_setzero_ps());
		}
		return;
	}
	if (t == 8 || t == 9) {
		/* each row's 16-byte head {f16 d, dmin; scales[12]} in one load, the
		 * four heads transposed to dwords: H0 lane r = row r's d | dmin,
		 * Q0..Q2 its three dwords of packed 6-bit scales and minima (a
		 * quad, eng_qx4_pack, holds them so: four loads) */
		size_t at = (size_t)sb * (t == 9 ? 176 : 144);
		__m128i H0, Q0, Q1, Q2;
		if (x4) {
			const uint8_t *p = w[0] + 4 * at;
			H0 = _mm_loadu_si128((const __m128i *)p), Q0 = _mm_loadu_si128((const __m128i *)(p + 16));
			Q1 = _mm_loadu_si128((const __m128i *)(p + 32)), Q2 = _mm_loadu_si128((const __m128i *)(p + 48));
		} else {
			__m128i h[4];
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				h[r] = _mm_loadu_si128((const __m128i *)(w[r] + at));
			__m128i t0 = _mm_unpacklo_epi32(h[0], h[1]), t1 = _mm_unpacklo_epi32(h[2], h[3]);
			__m128i t2 = _mm_unpackhi_epi32(h[0], h[1]), t3 = _mm_unpackhi_epi32(h[2], h[3]);
			H0 = _mm_unpacklo_epi64(t0, t1), Q0 = _mm_unpackhi_epi64(t0, t1);
			Q1 = _mm_unpacklo_epi64(t2, t3), Q2 = _mm_unpackhi_epi64(t2, t3);
		}
		/* the d's (even halves) and dmin's (odd) of the four rows, as floats */
		const __m128i ev = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
		const __m128i od = _mm_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
		__m128 d = _mm_cvtph_ps(_mm_shuffle_epi8(H0, ev)), dm = _mm_cvtph_ps(_mm_shuffle_epi8(H0, od));
		const __m128i m6 = _mm_set1_epi8(0x3F), m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x30);
		/* byte j of lane r: block j's (slo, mlo: j < 4; shi, mhi: j - 4) scale or minimum of row r */
		__m128i slo = _mm_and_si128(Q0, m6), mlo = _mm_and_si128(Q1, m6);
		__m128i shi = _mm_or_si128(_mm_and_si128(Q2, m4), _mm_and_si128(_mm_srli_epi32(Q0, 2), m2));
		__m128i mhi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(Q2, 4), m4), _mm_and_si128(_mm_srli_epi32(Q1, 2), m2));
		/* to block-major order: byte j * 4 + r */
		const __m128i tr = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
		QD(put16)(s0, _mm_shuffle_epi8(slo, tr), d, 0), QD(put16)(s0 + 16, _mm_shuffle_epi8(shi, tr), d, 0);
		QD(put16)(m, _mm_shuffle_epi8(mlo, tr), dm, 1), QD(put16)(m + 16, _mm_shuffle_epi8(mhi, tr), dm, 1);
		return;
	}
	/* Q6_K, Q3_K: 16 signed scales a row; block j's halves take scales 2j and 2j + 1 */
	__m128i g[4]; /* [i: r0 r1 r2 r3] for i = 0-3, 4-7, 8-11, 12-15 */
	__m128 d;
	if (t == 14) {
		/* Q3_K's 12 bytes of scales as three dwords a row, the four rows
		 * transposed (A[k] lane r: row r's dword k; a quad holds them so,
		 * then the four d): the 6-bit scale i is byte i % 4 of dword i / 4
		 * of {A0's low nibbles, A1's, A0's high, A1's high}, each with
		 * two bits of A2 on top (eng_ggml_q3k_scale, four at a time) */
		size_t at = (size_t)sb * 110;
		__m128i A[3];
		if (x4) {
			const uint8_t *p = w[0] + 4 * at + 384;
#pragma GCC unroll 3
			for (int k = 0; k < 3; k++)
				A[k] = _mm_loadu_si128((const __m128i *)(p + 16 * k));
			d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + 48)));
		} else {
			__m128i h[4];
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++) /* bytes 94-109 (all within the super-block), scales to the bottom */
				h[r] = _mm_srli_si128(_mm_loadu_si128((const __m128i *)(w[r] + at + 94)), 2);
			__m128i t0 = _mm_unpacklo_epi32(h[0], h[1]), t1 = _mm_unpacklo_epi32(h[2], h[3]);
			__m128i t2 = _mm_unpackhi_epi32(h[0], h[1]), t3 = _mm_unpackhi_epi32(h[2], h[3]);
			A[0] = _mm_unpacklo_epi64(t0, t1), A[1] = _mm_unpackhi_epi64(t0, t1), A[2] = _mm_unpacklo_epi64(t2, t3);
			d = eng_qs_f16x4(w, at + 108);
		}
		const __m128i m4 = _mm_set1_epi8(0x0F), m3 = _mm_set1_epi8(3), off = _mm_set1_epi8(32);
		const __m128i tr = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			__m128i lo = _mm_and_si128(k < 2 ? A[k] : _mm_srli_epi32(A[k - 2], 4), m4);
			__m128i hi = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(A[2], 2 * k), m3), 4);
			g[k] = _mm_sub_epi8(_mm_shuffle_epi8(_mm_or_si128(lo, hi), tr), off);
		}
	} else if (x4) { /* a quad holds them so, then the four d (eng_qx4_pack) */
		const uint8_t *p = w[0] + (size_t)sb * 4 * 210 + 768;
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			g[q] = _mm_loadu_si128((const __m128i *)(p + 16 * q));
		d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + 64)));
	} else {
		size_t at = (size_t)sb * 210;
		__m128i r0 = _mm_loadu_si128((const __m128i *)(w[0] + at + 192)), r1 = _mm_loadu_si128((const __m128i *)(w[1] + at + 192));
		__m128i r2 = _mm_loadu_si128((const __m128i *)(w[2] + at + 192)), r3 = _mm_loadu_si128((const __m128i *)(w[3] + at + 192));
		__m128i a0 = _mm_unpacklo_epi8(r0, r1), a1 = _mm_unpackhi_epi8(r0, r1);
		__m128i c0 = _mm_unpacklo_epi8(r2, r3), c1 = _mm_unpackhi_epi8(r2, r3);
		g[0] = _mm_unpacklo_epi16(a0, c0), g[1] = _mm_unpackhi_epi16(a0, c0);
		g[2] = _mm_unpacklo_epi16(a1, c1), g[3] = _mm_unpackhi_epi16(a1, c1);
		d = eng_qs_f16x4(w, at + 208);
	}
	memset(m, 0, 32 * sizeof(float));
	/* scale i = 2j + half: g[q]'s 32-bit groups are i = 4q .. 4q + 3 (blocks
	 * 2q, 2q + 1); the even ones (first halves) to s0, the odd ones to s1 */
#if QD_VNNI
	__m512 f[4];
	__m512 d16 = _mm512_broadcast_f32x4(d);
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++)
		f[q] = _mm512_mul_ps(d16, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(g[q])));
	const __m512i ev = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
	const __m512i od = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
#pragma GCC unroll 2
	for (int q = 0; q < 4; q += 2) {
		_mm512_storeu_ps(s0 + 8 * q, _mm512_permutex2var_ps(f[q], ev, f[q + 1]));
		_mm512_storeu_ps(s1 + 8 * q, _mm512_permutex2var_ps(f[q], od, f[q + 1]));
	}
#else
	__m256 d8 = _mm256_set_m128(d, d);
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++) {
		__m256 lo = _mm256_mul_ps(d8, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(g[q])));
		__m256 hi = _mm256_mul_ps(d8, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(g[q], 8))));
		_mm_storeu_ps(s0 + 8 * q, _mm256_castps256_ps128(lo)), _mm_storeu_ps(s1 + 8 * q, _mm256_extractf128_ps(lo, 1));
		_mm_storeu_ps(s0 + 8 * q + 4, _mm256_castps256_ps128(hi)), _mm_storeu_ps(s1 + 8 * q + 4, _mm256_extractf128_ps(hi, 1));
	}
#endif
}

QD_FN void QD(kscales)(const uint8_t *const w[4], int sb, int t, float *s0, float *s1, float *m)
{
	QD(kscalesx)(w, sb, t, s0, s1, m, 0);
}

/* Q2_K: a super-block's halves' scales d * sc (s0, s1) and minimum
 * coefficients -(dmin * min) (m0, m1) of its 8 blocks and four rows, at
 * j * 4 + r, as unpack_ref forms them: the four rows' 16 scale bytes
 * transposed (g[q] byte 4k + r: row r's byte 4q + k, as kscalesx takes
 * Q6_K's), each 8 bytes (a block's two halves, four rows) widened once
 * for the low nibbles and once for the high */
QD_FN void QD(q2scalesx)(const uint8_t *const w[4], int sb, float *s0, float *s1, float *m0, float *m1, int x4)
{
	size_t at = (size_t)sb * 84;
	__m128i g[4];
	__m128 d4, dm4;
	if (x4) { /* a quad holds them transposed, then the four d and the four dmin (eng_qx4_pack) */
		const uint8_t *p = w[0] + 4 * at;
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			g[q] = _mm_loadu_si128((const __m128i *)(p + 16 * q));
		d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + 64)));
		dm4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(p + 72)));
	} else {
		__m128i r0 = _mm_loadu_si128((const __m128i *)(w[0] + at)), r1 = _mm_loadu_si128((const __m128i *)(w[1] + at));
		__m128i r2 = _mm_loadu_si128((const __m128i *)(w[2] + at)), r3 = _mm_loadu_si128((const __m128i *)(w[3] + at));
		__m128i a0 = _mm_unpacklo_epi8(r0, r1), a1 = _mm_unpackhi_epi8(r0, r1);
		__m128i c0 = _mm_unpacklo_epi8(r2, r3), c1 = _mm_unpackhi_epi8(r2, r3);
		g[0] = _mm_unpacklo_epi16(a0, c0), g[1] = _mm_unpackhi_epi16(a0, c0);
		g[2] = _mm_unpacklo_epi16(a1, c1), g[3] = _mm_unpackhi_epi16(a1, c1);
		d4 = eng_qs_f16x4(w, at + 80), dm4 = eng_qs_f16x4(w, at + 82);
	}
	__m256 d = _mm256_set_m128(d4, d4), dm = _mm256_set_m128(dm4, dm4), neg = _mm256_set1_ps(-0.0f);
	const __m128i lo4 = _mm_set1_epi8(0x0F);
#pragma GCC unroll 8
	for (int j = 0; j < 8; j++) { /* block j: bytes 8 (j % 2) .. of g[j / 2] */
		__m128i bytes = j % 2 ? _mm_srli_si128(g[j / 2], 8) : g[j / 2];
		__m256 s = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(bytes, lo4))));
		__m256 m = _mm256_xor_ps(_mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), lo4)))), neg);
		_mm_storeu_ps(s0 + 4 * j, _mm256_castps256_ps128(s)), _mm_storeu_ps(s1 + 4 * j, _mm256_extractf128_ps(s, 1));
		_mm_storeu_ps(m0 + 4 * j, _mm256_castps256_ps128(m)), _mm_storeu_ps(m1 + 4 * j, _mm256_extractf128_ps(m, 1));
	}
}

QD_FN void QD(q2scales)(const uint8_t *const w[4], int sb, float *s0, float *s1, float *m0, float *m1)
{
	QD(q2scalesx)(w, sb, s0, s1, m0, m1, 0);
}

/* The sums of an activation block's q over elements 0-15 (h[0]) and
 * 16-31 (h[1]): Q2_K's minima meet them */
QD_FN void QD(halfsums)(const int16_t *q, int h[2])
{
	const __m256i one = _mm256_set1_epi16(1);
	__m256i a = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)q), one);
	__m256i c = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(q + 16)), one);
	__m256i s = _mm256_hadd_epi32(a, c); /* [a01 a23 c01 c23 | a45 a67 c45 c67] */
	s = _mm256_hadd_epi32(s, s);
	__m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	h[0] = _mm_cvtsi128_si32(t), h[1] = _mm_extract_epi32(t, 1);
}

#if !QD_VNNI
/* The kernel on four raw rows for one type and batch width known at
 * compile time: a block's integer sums of the four rows against one
 * activation row (madd, then isum4) meet their scale products four rows
 * at once; lane r of acc and mn is row r's chain of qdot.h. */
QD_FN void QD(kern)(float *o, const eng_qxblk *const *x, int nx, const uint8_t *const w[4], int nb, int t)
{
	const int two = qd_two(t), mins = qd_has_min(t), q2 = t == 13;
	__m128 acc[3], mn[3];
#pragma GCC unroll 3
	for (int i = 0; i < 3; i++)
		acc[i] = mn[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32], km1[32]; /* a super-block's scales (kscales; Q2_K: q2scales) */
	for (int b = 0; b < nb; b++) {
		/* the four rows' scales at once (scales4, kscales) */
		__m128 vs0, vs1, vm = _mm_setzero_ps(), vm1 = _mm_setzero_ps();
		if (qd_super(t)) {
			if (b % 8 == 0) {
				if (q2)
					QD(q2scales)(w, b / 8, ks0, ks1, km, km1);
				else
					QD(kscales)(w, b / 8, t, ks0, ks1, km);
			}
			vs0 = _mm_loadu_ps(ks0 + 4 * (b % 8)), vs1 = _mm_loadu_ps(ks1 + 4 * (b % 8)), vm = _mm_loadu_ps(km + 4 * (b % 8));
			if (q2)
				vm1 = _mm_loadu_ps(km1 + 4 * (b % 8));
		} else {
			QD(scales4)(w, b, t, &vs0, &vs1, &vm);
		}
		__m256i lo[4], hi[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			__m256i q;
			QD(unpack)(w[r], b, t, &q);
			lo[r] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
			hi[r] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
		}
#pragma GCC unroll 3
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *xb = x[i] + b;
			__m256i xlo = _mm256_loadu_si256((const __m256i *)xb->q);
			__m256i xhi = _mm256_loadu_si256((const __m256i *)(xb->q + 16));
			__m128 xd = _mm_set1_ps(xb->d);
			__m256i pl[4], ph[4];
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++)
				pl[r] = _mm256_madd_epi16(lo[r], xlo), ph[r] = _mm256_madd_epi16(hi[r], xhi);
			if (!two) {
#pragma GCC unroll 4
				for (int r = 0; r < 4; r++)
					pl[r] = _mm256_add_epi32(pl[r], ph[r]);
				__m128i s = eng_qs_isum4(pl[0], pl[1], pl[2], pl[3]);
				acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(s), _mm_mul_ps(vs0, xd), acc[i]);
			} else {
				__m128i sl = eng_qs_isum4(pl[0], pl[1], pl[2], pl[3]), sh = eng_qs_isum4(ph[0], ph[1], ph[2], ph[3]);
				acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(sl), _mm_mul_ps(vs0, xd), acc[i]);
				acc[i] = _mm_fmadd_ps(_mm_cvtepi32_ps(sh), _mm_mul_ps(vs1, xd), acc[i]);
			}
			if (mins)
				mn[i] = _mm_fmadd_ps(vm, _mm_set1_ps(xb->s), mn[i]);
			if (q2) {
				int h[2];
				QD(halfsums)(xb->q, h);
				mn[i] = _mm_fmadd_ps(vm, _mm_set1_ps(xb->d * (float)h[0]), mn[i]);
				mn[i] = _mm_fmadd_ps(vm1, _mm_set1_ps(xb->d * (float)h[1]), mn[i]);
			}
		}
	}
#pragma GCC unroll 3
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, _mm_add_ps(acc[i], mn[i]));
}

__attribute__((target(QD_TARGET))) static void QD(qdot)(float *o, const eng_qxblk *const *x, int nx,
                                                         const uint8_t *const w[4], int nb, int t)
{
#define QD_CASE(T)                                                                                                     \
	case T:                                                                                                        \
		if (nx == 1)                                                                                           \
			QD(kern)(o, x, 1, w, nb, T);                                                                   \
		else if (nx == 2)                                                                                      \
			QD(kern)(o, x, 2, w, nb, T);                                                                   \
		else                                                                                                   \
			QD(kern)(o, x, 3, w, nb, T);                                                                   \
		break;
	switch (t) {
		QD_CASE(3)
		QD_CASE(4)
		QD_CASE(5)
		QD_CASE(6)
		QD_CASE(7)
		QD_CASE(8)
		QD_CASE(9)
		QD_CASE(11)
		QD_CASE(12)
		QD_CASE(13)
		QD_CASE(14)
		QD_CASE(15)
		QD_CASE(16)
		QD_CASE(17)
	default:
		QD_CASE(10)
	}
#undef QD_CASE
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
 * (unpack above, widened as read; the scales come from scales4):
 * kernr's registers (Q8_0, and the 32-element types in a call made
 * without the activations' bytes). */
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
	}
}

/* [32 bytes at a | 32 bytes at c] */
QD_FN __m512i QD(bytes4)(const uint8_t *a, const uint8_t *c)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
	                          _mm256_loadu_si256((const __m256i *)c), 1);
}

/* Q4_K/Q5_K blocks b (even) and b + 1 of the four rows as bytes, a row
 * to each 128 bits: e[0] = [row 0's elements 0-15 of block b | row 1's |
 * row 2's | row 3's], e[1] the same of elements 16-31, o[0..1] block
 * b + 1's. Their nibbles share bytes (the even block's low, the odd
 * one's high), so one load a row serves both; Q5_K's fifth bit is bit j
 * of the 32 bytes of qh, laid out as the values are, so a byte test is
 * the lane mask. */
QD_FN void QD(kquadx)(const uint8_t *const w[4], int b, int t, __m512i e[2], __m512i o[2], int x4)
{
	int five = t == 9, j = b % 8;
	size_t sb = (size_t)(b / 8) * (five ? 176 : 144), at = sb + (five ? 48 : 16) + (size_t)(j / 2) * 32;
	const __m512i f = _mm512_set1_epi8(0x0F);
	__m512i v0, v1;
	if (x4) { /* a quad (eng_qx4_pack) holds the four rows' runs as v0, v1 below */
		const uint8_t *p = w[0] + 4 * at;
		v0 = _mm512_loadu_si512((const void *)p), v1 = _mm512_loadu_si512((const void *)(p + 64));
	} else {
		/* [row 0's bytes 0-15, 16-31, row 1's 0-15, 16-31], then rows 2 and 3 */
		__m512i p01 = QD(bytes4)(w[0] + at, w[1] + at), p23 = QD(bytes4)(w[2] + at, w[3] + at);
		v0 = _mm512_shuffle_i64x2(p01, p23, 0x88), v1 = _mm512_shuffle_i64x2(p01, p23, 0xDD);
	}
	e[0] = _mm512_and_si512(v0, f), e[1] = _mm512_and_si512(v1, f);
	o[0] = _mm512_and_si512(_mm512_srli_epi16(v0, 4), f), o[1] = _mm512_and_si512(_mm512_srli_epi16(v1, 4), f);
	if (five) {
		__m512i h0, h1;
		if (x4) {
			const uint8_t *p = w[0] + 4 * (sb + 16);
			h0 = _mm512_loadu_si512((const void *)p), h1 = _mm512_loadu_si512((const void *)(p + 64));
		} else {
			__m512i q01 = QD(bytes4)(w[0] + sb + 16, w[1] + sb + 16), q23 = QD(bytes4)(w[2] + sb + 16, w[3] + sb + 16);
			h0 = _mm512_shuffle_i64x2(q01, q23, 0x88), h1 = _mm512_shuffle_i64x2(q01, q23, 0xDD);
		}
		const __m512i w16 = _mm512_set1_epi8(16), be = _mm512_set1_epi8((char)(1 << j)), bo = _mm512_set1_epi8((char)(1 << (j + 1)));
		e[0] = _mm512_mask_add_epi8(e[0], _mm512_test_epi8_mask(h0, be), e[0], w16);
		e[1] = _mm512_mask_add_epi8(e[1], _mm512_test_epi8_mask(h1, be), e[1], w16);
		o[0] = _mm512_mask_add_epi8(o[0], _mm512_test_epi8_mask(h0, bo), o[0], w16);
		o[1] = _mm512_mask_add_epi8(o[1], _mm512_test_epi8_mask(h1, bo), o[1], w16);
	}
}

QD_FN void QD(kquad)(const uint8_t *const w[4], int b, int t, __m512i e[2], __m512i o[2])
{
	QD(kquadx)(w, b, t, e, o, 0);
}

/* The four rows' exact sums of a block laid out as kquad lays it (v[0]
 * its elements 0-15, v[1] 16-31, a row to 128 bits) against an
 * activation block's bytes y (elements 16k .. 16k + 15 broadcast to each
 * 128 bits): 256 * sum v * hb + sum v * lb, four lanes a row (a lane at
 * most 8 * 31 * 128 before its shift) */
QD_FN __m512i QD(bdot4)(const __m512i v[2], const eng_qxbyt *y)
{
	__m512i xh[2], xl[2];
#pragma GCC unroll 2
	for (int k = 0; k < 2; k++) {
		xh[k] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->hb + 16 * k)));
		xl[k] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->lb + 16 * k)));
	}
	__m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), v[0], xh[0]), v[1], xh[1]);
	p = _mm512_slli_epi32(p, 8);
	return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p, xl[0], v[0]), xl[1], v[1]);
}

/* bdot4 on signed values v (IQ4_NL's table; u = v + 128, their top bit
 * flipped, unsigned): hb meets u, lb meets v, so a lane holds its sum of
 * v q plus 32768 times its sum of hb, which the caller takes off
 * (eng_qxbyt.hbs) */
QD_FN __m512i QD(bdot4u)(const __m512i v[2], const __m512i u[2], const eng_qxbyt *y)
{
	__m512i xh[2], xl[2];
#pragma GCC unroll 2
	for (int k = 0; k < 2; k++) {
		xh[k] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->hb + 16 * k)));
		xl[k] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y->lb + 16 * k)));
	}
	__m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], xh[0]), u[1], xh[1]);
	p = _mm512_slli_epi32(p, 8);
	return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p, xl[0], v[0]), xl[1], v[1]);
}

/* a register of IQ4 table values with their top bit flipped: v + 128, unsigned */
QD_FN __m512i QD(plus128)(__m512i v)
{
	return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
}

/* Four lanes a row (a row to 128 bits) of t0 and of t1 as [t0's four row
 * totals | t1's] */
QD_FN __m256i QD(isum2q)(__m512i t0, __m512i t1)
{
	/* 128 bits a row: [t0's lanes 0 + 2, t1's 0 + 2, t0's 1 + 3, t1's 1 + 3], then t0's total in lane 0, t1's in 1 */
	__m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(t0, t1), _mm512_unpackhi_epi32(t0, t1));
	u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
	return _mm512_castsi512_si256(
	    _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), u));
}

/* Q6_K blocks b .. b + 3 (one half of a super-block, b % 4 == 0) of the
 * pair of rows a = w[2 pair], c = w[2 pair + 1] as bytes, v[k] = [a's 32
 * raw values (0..63; the offset of 32 is taken off the sums) | c's 32] of
 * block b + k, from three loads a row (its low bits k % 2's 32 bytes, low
 * or high nibble; its high bits the half's 32 bytes shifted by 2k), or,
 * on a quad (x4, w[0] the quad), three loads for the pair. */
QD_FN void QD(q6quadx)(const uint8_t *const w[4], int pair, int b, __m512i v[4], int x4)
{
	int h = b % 8 / 4;
	size_t at = (size_t)(b / 8) * 210;
	__m512i l0, l1, q;
	if (x4) { /* a quad holds the pair's three registers one after another (eng_qx4_pack) */
		const uint8_t *p = w[0] + 4 * at + 384 * h + 192 * pair;
		l0 = _mm512_loadu_si512((const void *)p), l1 = _mm512_loadu_si512((const void *)(p + 64));
		q = _mm512_loadu_si512((const void *)(p + 128));
	} else {
		const uint8_t *ra = w[2 * pair], *rc = w[2 * pair + 1];
		const uint8_t *la = ra + at + h * 64, *lc = rc + at + h * 64, *qa = ra + at + 128 + h * 32, *qc = rc + at + 128 + h * 32;
		l0 = QD(bytes4)(la, lc), l1 = QD(bytes4)(la + 32, lc + 32), q = QD(bytes4)(qa, qc);
	}
	const __m512i f = _mm512_set1_epi8(0x0F), m = _mm512_set1_epi8(0x30);
	/* bits 4-5 of each byte from its own bits 2k, 2k + 1 (the 16-bit shifts
	 * carry nothing across a byte into them) */
	v[0] = _mm512_or_si512(_mm512_and_si512(l0, f), _mm512_and_si512(_mm512_slli_epi16(q, 4), m));
	v[1] = _mm512_or_si512(_mm512_and_si512(l1, f), _mm512_and_si512(_mm512_slli_epi16(q, 2), m));
	v[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), f), _mm512_and_si512(q, m));
	v[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), f), _mm512_and_si512(_mm512_srli_epi16(q, 2), m));
}

/* A register of weight bytes w (0..63: [row a's 32 | row c's 32] of a
 * block) against an activation block's bytes (hb, lb broadcast to both
 * halves): sum w * q = 256 * sum w * hb + sum w * lb, four products to a
 * lane, exactly (a lane at most 4 * 63 * 128 before its shift) */
QD_FN __m512i QD(bdot)(__m512i w, __m512i xh, __m512i xl)
{
	__m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xh);
	return _mm512_dpbusd_epi32(_mm512_slli_epi32(p, 8), xl, w);
}

/* Four registers' 128-bit lanes each totalled: lane c of the result is
 * [p0's lane c total, p1's, q0's, q1's] (in-lane sums only) */
QD_FN __m512i QD(tot4x4)(__m512i p0, __m512i p1, __m512i q0, __m512i q1)
{
	/* 128 bits c: [p0's lanes 0 + 2, p1's, p0's 1 + 3, p1's], the same of q0, q1; then the totals */
	__m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
	__m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(q0, q1), _mm512_unpackhi_epi32(q0, q1));
	return _mm512_add_epi32(_mm512_unpacklo_epi64(u, v), _mm512_unpackhi_epi64(u, v));
}

/* Q6_K's half sums of two blocks: p0, p1 block b's (rows 0 and 1, then
 * 2 and 3; 128 bits a row and half: [a's first half | a's second | c's
 * first | c's second], four lanes each), q0, q1 block b + 1's, as [block
 * b's first-half totals of rows 0-3 | its second-half totals | block b +
 * 1's first | its second], from in-lane sums and one permute */
QD_FN __m512i QD(isum16)(__m512i p0, __m512i p1, __m512i q0, __m512i q1)
{
	return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 4, 12, 5, 13, 2, 10, 3, 11, 6, 14, 7, 15),
	                                QD(tot4x4)(p0, p1, q0, q1));
}

/* Two blocks' sums of four rows as kernr forms them: p0 block b's rows 0
 * and 1 (8 lanes each, 256 bits a row), p1 its rows 2 and 3, q0, q1 block
 * b + 1's; as [block b's four row totals | block b + 1's], from in-lane
 * sums, one swap of 128-bit lanes and one permute */
QD_FN __m256i QD(isum8w)(__m512i p0, __m512i p1, __m512i q0, __m512i q1)
{
	__m512i s = QD(tot4x4)(p0, p1, q0, q1);
	/* a row is two 128-bit lanes: 0 and 1 (rows 0, 2), 2 and 3 (rows 1, 3) */
	s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, 0xB1));
	return _mm512_castsi512_si256(
	    _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

/* Decode on raw rows (1-6 activation rows) of a 32-element type (Q8_0,
 * or any of them in a call without the activations' bytes), weight rows
 * 0 and 1 in one register's two halves and rows 2 and 3 in another's:
 * madd and dpwssd form a block's integer sums in 8 lanes a row, two
 * blocks at a time, isum8w totals them, and the definition's fma runs on
 * the four rows at once, block by block in order, their products sc * d
 * formed together. With x4 (a constant; Q8_0 alone) w[0] is a quad laid
 * out four rows together (qdot.h eng_qx4_pack) and w[1..3] are not read. */
QD_FN void QD(kernrx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t, int x4)
{
	(void)xy; /* the words */
	const int mins = qd_has_min(t);
	__m128 acc[ENG_QDOT_X], mn[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = mn[i] = _mm_setzero_ps();
	for (int b = 0; b < nb; b += 2) {
		const int two = b + 1 < nb; /* a second block (an odd row ends with one) */
		__m128 s0, s1, m0 = _mm_setzero_ps(), t0 = _mm_setzero_ps(), t1, m1 = _mm_setzero_ps();
		__m512i wa[2][2], wb[2][2]; /* blocks b and b + 1: rows 0 and 1 (h 0), 2 and 3 (h 1), elements 0-15 and 16-31 */
		if (x4) { /* a Q8_0 quad: the four d in one load, a pair's half block one 256-bit load */
			const uint8_t *blk = w[0] + (size_t)b * 4 * 34;
			s0 = s1 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)blk));
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				wa[h][0] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 8 + 64 * h)));
				wa[h][1] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 40 + 64 * h)));
				wb[h][0] = wb[h][1] = _mm512_setzero_si512();
			}
			if (two) {
				blk += 4 * 34;
				t0 = t1 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)blk));
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					wb[h][0] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 8 + 64 * h)));
					wb[h][1] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(blk + 40 + 64 * h)));
				}
			}
		} else {
			QD(scales4)(w, b, t, &s0, &s1, &m0);
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				QD(words2)(w[2 * h], w[2 * h + 1], b, t, &wa[h][0], &wa[h][1]);
				wb[h][0] = wb[h][1] = _mm512_setzero_si512();
			}
			if (two) {
				QD(scales4)(w, b + 1, t, &t0, &t1, &m1);
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++)
					QD(words2)(w[2 * h], w[2 * h + 1], b + 1, t, &wb[h][0], &wb[h][1]);
			}
		}
		__m256 sc = _mm256_set_m128(t0, s0);
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *xb = x[i] + b;
			__m512i x1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb->q));
			__m512i x2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb->q + 16)));
			__m512i p0 = _mm512_dpwssd_epi32(_mm512_madd_epi16(wa[0][0], x1), wa[0][1], x2);
			__m512i p1 = _mm512_dpwssd_epi32(_mm512_madd_epi16(wa[1][0], x1), wa[1][1], x2);
			__m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();
			float d1 = 0.0f;
			if (two) {
				x1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)xb[1].q));
				x2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb[1].q + 16)));
				q0 = _mm512_dpwssd_epi32(_mm512_madd_epi16(wb[0][0], x1), wb[0][1], x2);
				q1 = _mm512_dpwssd_epi32(_mm512_madd_epi16(wb[1][0], x1), wb[1][1], x2);
				d1 = xb[1].d;
			}
			__m256 f = _mm256_cvtepi32_ps(QD(isum8w)(p0, p1, q0, q1));
			__m256 sd = _mm256_mul_ps(sc, _mm256_set_m128(_mm_set1_ps(d1), _mm_set1_ps(xb->d)));
			acc[i] = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(sd), acc[i]);
			if (two)
				acc[i] = _mm_fmadd_ps(_mm256_extractf128_ps(f, 1), _mm256_extractf128_ps(sd, 1), acc[i]);
			if (mins) {
				mn[i] = _mm_fmadd_ps(m0, _mm_set1_ps(xb->s), mn[i]);
				if (two)
					mn[i] = _mm_fmadd_ps(m1, _mm_set1_ps(xb[1].s), mn[i]);
			}
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, _mm_add_ps(acc[i], mn[i]));
}

QD_FN void QD(kernr)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                     const uint8_t *const w[4], int nb, int t)
{
	QD(kernrx)(o, x, xy, nx, w, nb, t, 0);
}

/* Block b of a 32-element type (Q4_0 .. Q5_1) of the four rows as bytes,
 * a row to 128 bits: v[0] = [row 0's elements 0-15 | row 1's | row 2's |
 * row 3's], v[1] the same of elements 16-31. The values are the stored
 * ones (0..31): Q4_0's offset of 8 and Q5_0's of 16 come off the sums. */
QD_FN void QD(bquad)(const uint8_t *const w[4], int b, int t, __m512i v[2])
{
	size_t at = (size_t)b * (size_t)qd_bsz[t] + (size_t)qd_qs[t];
	__m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w[0] + at)));
	q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(w[1] + at)), 1);
	q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(w[2] + at)), 2);
	q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(w[3] + at)), 3);
	const __m512i f = _mm512_set1_epi8(0x0F);
	v[0] = _mm512_and_si512(q, f), v[1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), f);
	if (t == 6 || t == 7) { /* the fifth bits: bit e of a row's qh for its element e */
		uint64_t lo = 0, hi = 0;
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			uint32_t h;
			memcpy(&h, w[r] + at - 4, 4);
			lo |= (uint64_t)(h & 0xFFFFu) << (16 * r), hi |= (uint64_t)(h >> 16) << (16 * r);
		}
		const __m512i w16 = _mm512_set1_epi8(16);
		v[0] = _mm512_mask_add_epi8(v[0], (__mmask64)lo, v[0], w16);
		v[1] = _mm512_mask_add_epi8(v[1], (__mmask64)hi, v[1], w16);
	}
}

/* bquad and scales4 on a quad laid out four rows together (qdot.h
 * eng_qx4_pack; blk its block b): the four rows' nibbles in one load,
 * their scales (and minimum coefficients) in one each, the same values. */
QD_FN void QD(bquad4)(const uint8_t *blk, int t, __m512i v[2], __m128 *s0, __m128 *s1, __m128 *m)
{
	__m512i q = _mm512_loadu_si512((const void *)(blk + qd_x4qs[t]));
	const __m512i f = _mm512_set1_epi8(0x0F);
	v[0] = _mm512_and_si512(q, f), v[1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), f);
	*s0 = *s1 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)blk));
	if (t == 5 || t == 7)
		*m = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(blk + 8)));
	if (t == 6 || t == 7) { /* the fifth bits, laid out as v[0]'s and v[1]'s masks */
		uint64_t lo, hi;
		memcpy(&lo, blk + (t == 7 ? 16 : 8), 8), memcpy(&hi, blk + (t == 7 ? 24 : 16), 8);
		const __m512i w16 = _mm512_set1_epi8(16);
		v[0] = _mm512_mask_add_epi8(v[0], (__mmask64)lo, v[0], w16);
		v[1] = _mm512_mask_add_epi8(v[1], (__mmask64)hi, v[1], w16);
	}
}

/* Decode on raw rows of Q4_0 .. Q5_1 and IQ4_NL, weights kept as bytes:
 * kern4k's way (bquad, bdot4, two blocks' totals in one isum2q), each
 * block with its own scales (scales4); Q4_0 and Q5_0 take 8 or 16 times
 * the activations' block sum off each sum; IQ4_NL's nibbles go through
 * the table to signed values (bdot4s), and 32768 times the block's sum of
 * hb comes off. The fmas are kernr's, block by block in order. With x4 (a
 * constant) w[0] is a quad laid out four rows together (bquad4) and
 * w[1..3] are not read. */
QD_FN void QD(kern4bx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	const int mins = qd_has_min(t), iq = t == 12, off = t == 4 ? 8 : t == 6 ? 16 : 0;
	const __m512i tab = QD(iq4tab512)();
	__m128 acc[ENG_QDOT_X], mn[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = mn[i] = _mm_setzero_ps();
	for (int b = 0; b < nb; b += 2) {
		const int two = b + 1 < nb; /* a second block (an odd row ends with one) */
		__m512i e[2], od[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
		__m128 s0, s1, m0 = _mm_setzero_ps(), t0 = _mm_setzero_ps(), t1, m1 = _mm_setzero_ps();
		if (x4) {
			const uint8_t *blk = w[0] + (size_t)b * 4 * (size_t)qd_bsz[t];
			QD(bquad4)(blk, t, e, &s0, &s1, &m0);
			if (two)
				QD(bquad4)(blk + 4 * qd_bsz[t], t, od, &t0, &t1, &m1);
		} else {
			QD(bquad)(w, b, t, e);
			QD(scales4)(w, b, t, &s0, &s1, &m0);
			if (two) {
				QD(bquad)(w, b + 1, t, od);
				QD(scales4)(w, b + 1, t, &t0, &t1, &m1);
			}
		}
		__m512i eu[2], odu[2]; /* IQ4_NL: the values + 128 (bdot4u) */
		if (iq)
#pragma GCC unroll 2
			for (int k = 0; k < 2; k++) {
				e[k] = _mm512_shuffle_epi8(tab, e[k]), od[k] = _mm512_shuffle_epi8(tab, od[k]);
				eu[k] = QD(plus128)(e[k]), odu[k] = QD(plus128)(od[k]);
			}
		__m256 sc = _mm256_set_m128(t0, s0);
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *x0 = x[i] + b;
			const eng_qxbyt *y0 = xy[i] + b;
			__m512i p0 = iq ? QD(bdot4u)(e, eu, y0) : QD(bdot4)(e, y0), p1 = _mm512_setzero_si512();
			int o0 = iq ? 32768 * y0->hbs : off * (y0->hs[0] + y0->hs[1]), o1 = 0;
			float d1 = 0.0f;
			if (two) {
				p1 = iq ? QD(bdot4u)(od, odu, y0 + 1) : QD(bdot4)(od, y0 + 1);
				o1 = iq ? 32768 * y0[1].hbs : off * (y0[1].hs[0] + y0[1].hs[1]), d1 = x0[1].d;
			}
			__m256i tot = QD(isum2q)(p0, p1);
			if (off || iq)
				tot = _mm256_sub_epi32(tot, _mm256_set_m128i(_mm_set1_epi32(o1), _mm_set1_epi32(o0)));
			__m256 f = _mm256_cvtepi32_ps(tot);
			__m256 sd = _mm256_mul_ps(sc, _mm256_set_m128(_mm_set1_ps(d1), _mm_set1_ps(x0->d)));
			acc[i] = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(sd), acc[i]);
			if (two)
				acc[i] = _mm_fmadd_ps(_mm256_extractf128_ps(f, 1), _mm256_extractf128_ps(sd, 1), acc[i]);
			if (mins) {
				mn[i] = _mm_fmadd_ps(m0, _mm_set1_ps(x0->s), mn[i]);
				if (two)
					mn[i] = _mm_fmadd_ps(m1, _mm_set1_ps(x0[1].s), mn[i]);
			}
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, _mm_add_ps(acc[i], mn[i]));
}

QD_FN void QD(kern4b)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern4bx)(o, x, xy, nx, w, nb, t, 0);
}

/* Decode on raw rows of Q4_K/Q5_K, weights kept as bytes: a register
 * holds 16 values of each of the four rows, a row to 128 bits (kquad),
 * and each activation element q = 256 hb + lb meets them in dpbusd
 * (bdot4), 64 products an instruction where 16-bit words take 32, so a
 * block's exact sums come without widening the weights; two blocks' sums
 * are totalled together within each row's 128 bits (isum2q). The fmas
 * are kernr's, block by block in order. */
QD_FN void QD(kern4kx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	__m128 acc[ENG_QDOT_X], mn[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = mn[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a super-block's scales (kscales) */
	for (int b = 0; b < nb; b += 2) {
		if (b % 8 == 0)
			QD(kscalesx)(w, b / 8, t, ks0, ks1, km, x4);
		__m512i e[2], od[2];
		QD(kquadx)(w, b, t, e, od, x4);
		__m256 sc = _mm256_loadu_ps(ks0 + 4 * (b % 8)), m = _mm256_loadu_ps(km + 4 * (b % 8));
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *x0 = x[i] + b, *x1 = x0 + 1;
			const eng_qxbyt *y0 = xy[i] + b, *y1 = y0 + 1;
			__m512i t0 = QD(bdot4)(e, y0), t1 = QD(bdot4)(od, y1);
			__m256 f = _mm256_cvtepi32_ps(QD(isum2q)(t0, t1));
			__m256 sd = _mm256_mul_ps(sc, _mm256_set_m128(_mm_set1_ps(x1->d), _mm_set1_ps(x0->d)));
			acc[i] = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(sd), acc[i]);
			acc[i] = _mm_fmadd_ps(_mm256_extractf128_ps(f, 1), _mm256_extractf128_ps(sd, 1), acc[i]);
			mn[i] = _mm_fmadd_ps(_mm256_castps256_ps128(m), _mm_set1_ps(x0->s), mn[i]);
			mn[i] = _mm_fmadd_ps(_mm256_extractf128_ps(m, 1), _mm_set1_ps(x1->s), mn[i]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, _mm_add_ps(acc[i], mn[i]));
}

QD_FN void QD(kern4k)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern4kx)(o, x, xy, nx, w, nb, t, 0);
}

/* Decode on raw rows of IQ4_XS, weights kept as bytes: blocks b (even)
 * and b + 1 of the four rows, a row to 128 bits (their 16 bytes of
 * nibbles side by side in each row, split as kquadx splits Q4_K's), the
 * nibbles through IQ4_NL's table to signed values w. An activation
 * element q = 256 hb + lb meets w in two dpbusd: w + 128 (w with its top
 * bit flipped, unsigned) against hb, lb against w; so a lane holds sum w q
 * + 32768 * sum hb, and the block's hbs takes the second term off: the
 * exact block sums, then kernr's fmas in its order. */
QD_FN void QD(kern4ix)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	__m128 acc[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a super-block's scales (kscales; ks1 and km unused) */
	const __m512i f = _mm512_set1_epi8(0x0F);
	const __m512i tab = QD(iq4tab512)();
	for (int b = 0; b < nb; b += 2) {
		if (b % 8 == 0)
			QD(kscalesx)(w, b / 8, t, ks0, ks1, km, x4);
		__m512i v0, v1; /* the four rows' block b, a row to 128 bits, and their block b + 1 */
		if (x4) { /* a quad holds them so (eng_qx4_pack) */
			const uint8_t *q = w[0] + (size_t)(b / 8) * 4 * 136 + 32 + (size_t)(b % 8 / 2) * 128;
			v0 = _mm512_loadu_si512((const void *)q), v1 = _mm512_loadu_si512((const void *)(q + 64));
		} else { /* [row 0's block b, block b + 1, row 1's ...], then rows 2 and 3 */
			size_t at = (size_t)(b / 8) * 136 + 8 + (size_t)(b % 8) * 16;
			__m512i p01 = QD(bytes4)(w[0] + at, w[1] + at), p23 = QD(bytes4)(w[2] + at, w[3] + at);
			v0 = _mm512_shuffle_i64x2(p01, p23, 0x88), v1 = _mm512_shuffle_i64x2(p01, p23, 0xDD);
		}
		__m512i s[2][2], u[2][2]; /* [block][elements 0-15, 16-31]: signed values, and + 128 */
		s[0][0] = _mm512_shuffle_epi8(tab, _mm512_and_si512(v0, f));
		s[0][1] = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v0, 4), f));
		s[1][0] = _mm512_shuffle_epi8(tab, _mm512_and_si512(v1, f));
		s[1][1] = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(v1, 4), f));
#pragma GCC unroll 2
		for (int k = 0; k < 2; k++)
			u[k][0] = QD(plus128)(s[k][0]), u[k][1] = QD(plus128)(s[k][1]);
		__m256 sc = _mm256_loadu_ps(ks0 + 4 * (b % 8));
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxblk *x0 = x[i] + b;
			const eng_qxbyt *y0 = xy[i] + b;
			__m256i is = _mm256_sub_epi32(QD(isum2q)(QD(bdot4u)(s[0], u[0], y0), QD(bdot4u)(s[1], u[1], y0 + 1)),
			                              _mm256_set_m128i(_mm_set1_epi32(32768 * y0[1].hbs), _mm_set1_epi32(32768 * y0[0].hbs)));
			__m256 fs = _mm256_cvtepi32_ps(is);
			__m256 sd = _mm256_mul_ps(sc, _mm256_set_m128(_mm_set1_ps(x0[1].d), _mm_set1_ps(x0->d)));
			acc[i] = _mm_fmadd_ps(_mm256_castps256_ps128(fs), _mm256_castps256_ps128(sd), acc[i]);
			acc[i] = _mm_fmadd_ps(_mm256_extractf128_ps(fs, 1), _mm256_extractf128_ps(sd, 1), acc[i]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, acc[i]);
}

QD_FN void QD(kern4i)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern4ix)(o, x, xy, nx, w, nb, t, 0);
}

/* Blocks b and b + 1 of four rows held two rows a register (v0 block b:
 * rows 0 and 1, then 2 and 3; v1 block b + 1) against the activations'
 * bytes y0, y1: their 16 half sums in isum16's order as floats, less
 * 2^sh times the activations' half sums where the weights are stored +
 * 2^sh (Q6_K 5, Q3_K 2, the IQ2s 6; sh < 0: no offset, Q2_K) */
QD_FN __m512i QD(halves16i)(const __m512i v0[2], const __m512i v1[2], const eng_qxbyt *y0, const eng_qxbyt *y1, int sh)
{
	__m512i xh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y0->hb));
	__m512i xl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y0->lb));
	__m512i p0 = QD(bdot)(v0[0], xh, xl), p1 = QD(bdot)(v0[1], xh, xl);
	xh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y1->hb));
	xl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y1->lb));
	__m512i q0 = QD(bdot)(v1[0], xh, xl), q1 = QD(bdot)(v1[1], xh, xl);
	__m512i s = QD(isum16)(p0, p1, q0, q1);
	if (sh >= 0) { /* each half's activation sum four times: [block b's halves | block b + 1's] */
		const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
		__m128i hs = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)y0->hs), _mm_loadl_epi64((const __m128i *)y1->hs));
		__m512i off = _mm512_permutexvar_epi32(halves, _mm512_castsi128_si512(hs));
		s = _mm512_sub_epi32(s, _mm512_sll_epi32(off, _mm_cvtsi32_si128(sh)));
	}
	return s;
}

QD_FN __m512 QD(halves16)(const __m512i v0[2], const __m512i v1[2], const eng_qxbyt *y0, const eng_qxbyt *y1, int sh)
{
	return _mm512_cvtepi32_ps(QD(halves16i)(v0, v1, y0, y1, sh));
}

/* The definition's four fmas of blocks b and b + 1 (halves16's f): each
 * half's sum by its scale (sc0: block b's first halves of the four rows,
 * then its second; sc1 block b + 1's) times the activation block's d */
QD_FN __m128 QD(fma16)(__m128 acc, __m512 f, __m256 sc0, __m256 sc1, float d0, float d1)
{
	__m256 sd0 = _mm256_mul_ps(sc0, _mm256_set1_ps(d0)), sd1 = _mm256_mul_ps(sc1, _mm256_set1_ps(d1));
	acc = _mm_fmadd_ps(_mm512_castps512_ps128(f), _mm256_castps256_ps128(sd0), acc);
	acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(f, 1), _mm256_extractf128_ps(sd0, 1), acc);
	acc = _mm_fmadd_ps(_mm512_extractf32x4_ps(f, 2), _mm256_castps256_ps128(sd1), acc);
	return _mm_fmadd_ps(_mm512_extractf32x4_ps(f, 3), _mm256_extractf128_ps(sd1, 1), acc);
}

/* Decode on raw rows of Q6_K, weights kept as bytes: a register holds a
 * block of two rows ([a's 32 | c's 32], q6quadx's raw values), each
 * activation element q = 256 hb + lb meets it in two dpbusd (bdot), two
 * blocks' half sums are totalled together (isum16: each row and half is
 * 128 bits, so in-lane sums and one permute), and 32 times the
 * activations' half sums come off (the values are stored + 32). The fmas
 * are kernr's, the halves' and blocks' in order. */
QD_FN void QD(kern6kx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	__m128 acc[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a super-block's scales (kscales; km unused) */
	__m512i q6[2][4]; /* a half super-block's four blocks (q6quadx) */
#pragma GCC unroll 4
	for (int k = 0; k < 4; k++)
		q6[0][k] = q6[1][k] = _mm512_setzero_si512();
	for (int b = 0; b < nb; b += 2) {
		if (b % 8 == 0)
			QD(kscalesx)(w, b / 8, t, ks0, ks1, km, x4);
		int j = b % 8;
		__m256 sc0 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j), _mm_loadu_ps(ks0 + 4 * j));
		__m256 sc1 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j + 4), _mm_loadu_ps(ks0 + 4 * j + 4));
		__m512i v0[2], v1[2]; /* blocks b and b + 1, rows 0 and 1 (h 0), 2 and 3 (h 1) */
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			if (b % 4 == 0)
				QD(q6quadx)(w, h, b, q6[h], x4);
			/* constant indices, so that q6 stays in registers */
			v0[h] = b % 4 == 0 ? q6[h][0] : q6[h][2];
			v1[h] = b % 4 == 0 ? q6[h][1] : q6[h][3];
		}
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxbyt *y0 = xy[i] + b;
			acc[i] = QD(fma16)(acc[i], QD(halves16)(v0, v1, y0, y0 + 1, 5), sc0, sc1, x[i][b].d, x[i][b + 1].d);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, acc[i]);
}

/* Decode on raw rows of the IQ2s, weights as bytes: each row's block
 * (unpack's signed values, the grid lookups) + 64, a register [row a's
 * 32 | row c's 32] of a pair of rows, against the activations' two bytes
 * by halves16i, 64 times each half's activation sum off. IQ2_XS and
 * IQ2_S meet each half's sum with its own scale (fma16); IQ2_XXS, one
 * scale a block, adds its halves' integer sums first, as the definition. */
QD_FN void QD(kerniq2)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t)
{
	__m128 acc[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a super-block's scales (kscales; km unused) */
	const __m512i off = _mm512_set1_epi8(64);
	for (int b = 0; b < nb; b += 2) {
		if (b % 8 == 0)
			QD(kscalesx)(w, b / 8, t, ks0, ks1, km, 0);
		int j = b % 8;
		__m512i v[2][2]; /* [block b, b + 1][rows 0 and 1, 2 and 3] */
#pragma GCC unroll 2
		for (int k = 0; k < 2; k++)
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				__m256i qa, qc;
				QD(unpack)(w[2 * h], b + k, t, &qa);
				QD(unpack)(w[2 * h + 1], b + k, t, &qc);
				v[k][h] = _mm512_add_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(qa), qc, 1), off);
			}
		if (!qd_two(t)) {
			__m256 sc = _mm256_loadu_ps(ks0 + 4 * j); /* blocks b and b + 1, four rows each */
#pragma GCC unroll 6
			for (int i = 0; i < nx; i++) {
				const eng_qxbyt *y0 = xy[i] + b;
				__m512i s = QD(halves16i)(v[0], v[1], y0, y0 + 1, 6);
				/* [b lo, b hi, b + 1 lo, b + 1 hi], four rows each: each block's halves added */
				s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, 0xB1));
				__m256i sum = _mm512_castsi512_si256(_mm512_shuffle_i32x4(s, s, 0x08));
				__m256 fs = _mm256_cvtepi32_ps(sum);
				__m256 sd = _mm256_mul_ps(sc, _mm256_set_m128(_mm_set1_ps(x[i][b + 1].d), _mm_set1_ps(x[i][b].d)));
				acc[i] = _mm_fmadd_ps(_mm256_castps256_ps128(fs), _mm256_castps256_ps128(sd), acc[i]);
				acc[i] = _mm_fmadd_ps(_mm256_extractf128_ps(fs, 1), _mm256_extractf128_ps(sd, 1), acc[i]);
			}
		} else {
			__m256 sc0 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j), _mm_loadu_ps(ks0 + 4 * j));
			__m256 sc1 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j + 4), _mm_loadu_ps(ks0 + 4 * j + 4));
#pragma GCC unroll 6
			for (int i = 0; i < nx; i++) {
				const eng_qxbyt *y0 = xy[i] + b;
				acc[i] = QD(fma16)(acc[i], QD(halves16)(v[0], v[1], y0, y0 + 1, 6), sc0, sc1, x[i][b].d, x[i][b + 1].d);
			}
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, acc[i]);
}

/* Decode on raw rows of Q2_K, weights kept as bytes: kern6k's way, a
 * register [row a's 32 | row c's 32] of one block's 2-bit values (one
 * 64-byte load of a pair's half super-block serves its four blocks, by
 * shifts), bdot against the activations' two bytes, the halves' sums
 * totalled by isum16 and met by their own scales; each half's minimum
 * meets the activations' half sum (hs). The fmas are the definition's,
 * block by block, lo then hi. */
QD_FN void QD(kern2kx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	(void)t;
	__m128 acc[ENG_QDOT_X], mn[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = mn[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km0[32], km1[32]; /* a super-block's scales (q2scales) */
	const __m512i three = _mm512_set1_epi8(3);
	for (int b = 0; b < nb; b += 2) {
		int j = b % 8;
		if (j == 0)
			QD(q2scalesx)(w, b / 8, ks0, ks1, km0, km1, x4);
		__m256 sc0 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j), _mm_loadu_ps(ks0 + 4 * j));
		__m256 sc1 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j + 4), _mm_loadu_ps(ks0 + 4 * j + 4));
		__m128 mb0 = _mm_loadu_ps(km0 + 4 * j), mb1 = _mm_loadu_ps(km1 + 4 * j);
		__m128 mc0 = _mm_loadu_ps(km0 + 4 * j + 4), mc1 = _mm_loadu_ps(km1 + 4 * j + 4);
		size_t at = (size_t)(b / 8) * 84 + 16 + 32 * (size_t)(j / 4);
		__m512i v0[2], v1[2]; /* blocks b and b + 1, rows 0 and 1 (h 0), 2 and 3 (h 1) */
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			/* a quad holds the pair's 32 bytes side by side (eng_qx4_pack) */
			__m512i q = x4 ? _mm512_loadu_si512((const void *)(w[0] + (size_t)(b / 8) * 4 * 84 + 80 + 128 * (j / 4) + 64 * h))
			               : QD(bytes4)(w[2 * h] + at, w[2 * h + 1] + at);
			v0[h] = _mm512_and_si512(_mm512_srli_epi16(q, 2 * (j % 4)), three);
			v1[h] = _mm512_and_si512(_mm512_srli_epi16(q, 2 * (j % 4) + 2), three);
		}
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxbyt *y0 = xy[i] + b, *y1 = y0 + 1;
			float d0 = x[i][b].d, d1 = x[i][b + 1].d;
			acc[i] = QD(fma16)(acc[i], QD(halves16)(v0, v1, y0, y1, -1), sc0, sc1, d0, d1);
			mn[i] = _mm_fmadd_ps(mb0, _mm_set1_ps(d0 * (float)y0->hs[0]), mn[i]);
			mn[i] = _mm_fmadd_ps(mb1, _mm_set1_ps(d0 * (float)y0->hs[1]), mn[i]);
			mn[i] = _mm_fmadd_ps(mc0, _mm_set1_ps(d1 * (float)y1->hs[0]), mn[i]);
			mn[i] = _mm_fmadd_ps(mc1, _mm_set1_ps(d1 * (float)y1->hs[1]), mn[i]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, _mm_add_ps(acc[i], mn[i]));
}

/* Q3_K's values + 4 (0 .. 7) of block j of a pair of rows: bits 2 (j % 4)
 * of their half's 32 bytes of 2-bit fields raw, with 4 added where bit j
 * of their bytes of hmask hm is set (kern3kx, and the groups from quads) */
QD_FN __m512i QD(q3pair)(__m512i raw, __m512i hm, int j)
{
	__m512i v = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * (j % 4)), _mm512_set1_epi8(3));
	return _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(hm, _mm512_set1_epi8((char)(1 << j))), v, _mm512_set1_epi8(4));
}

/* Decode on raw rows of Q3_K, weights kept as bytes: kern2k's 2-bit
 * fields (one 64-byte load of a pair's half super-block serves its four
 * blocks) with the high bit added as 4 where hmask's bit j is set (a
 * byte test of the pair's 32 bytes of hmask, loaded once a super-block),
 * so a weight byte is its value + 4 (0..7); bdot against the activations'
 * two bytes, the halves' sums totalled by isum16, 4 times the
 * activations' half sums taken off, and each half met by its own scale
 * (kscalesx), as kern6k. The fmas are the definition's, block by block,
 * lo then hi. With x4 (a constant) w[0] is a quad laid out four rows
 * together (qdot.h eng_qx4_pack) and w[1..3] are not read. */
QD_FN void QD(kern3kx)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                       const uint8_t *const w[4], int nb, int t, int x4)
{
	__m128 acc[ENG_QDOT_X];
#pragma GCC unroll 6
	for (int i = 0; i < ENG_QDOT_X; i++)
		acc[i] = _mm_setzero_ps();
	float ks0[32], ks1[32], km[32]; /* a super-block's scales (kscalesx; km unused) */
	__m512i hm[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* the pairs' hmask */
	for (int b = 0; b < nb; b += 2) {
		int j = b % 8;
		const uint8_t *sb = w[0] + (size_t)(b / 8) * (x4 ? 4 * 110 : 110);
		if (j == 0) {
			QD(kscalesx)(w, b / 8, t, ks0, ks1, km, x4);
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) /* a quad holds each pair's 32 bytes side by side (eng_qx4_pack) */
				hm[h] = x4 ? _mm512_loadu_si512((const void *)(sb + 256 + 64 * h))
				           : QD(bytes4)(w[2 * h] + (size_t)(b / 8) * 110, w[2 * h + 1] + (size_t)(b / 8) * 110);
		}
		__m256 sc0 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j), _mm_loadu_ps(ks0 + 4 * j));
		__m256 sc1 = _mm256_set_m128(_mm_loadu_ps(ks1 + 4 * j + 4), _mm_loadu_ps(ks0 + 4 * j + 4));
		size_t at = (size_t)(b / 8) * 110 + 32 + 32 * (size_t)(j / 4);
		__m512i v0[2], v1[2]; /* blocks b and b + 1, rows 0 and 1 (h 0), 2 and 3 (h 1) */
#pragma GCC unroll 2
		for (int h = 0; h < 2; h++) {
			__m512i q = x4 ? _mm512_loadu_si512((const void *)(sb + 128 * (j / 4) + 64 * h))
			               : QD(bytes4)(w[2 * h] + at, w[2 * h + 1] + at);
			v0[h] = QD(q3pair)(q, hm[h], j), v1[h] = QD(q3pair)(q, hm[h], j + 1);
		}
#pragma GCC unroll 6
		for (int i = 0; i < nx; i++) {
			const eng_qxbyt *y0 = xy[i] + b;
			acc[i] = QD(fma16)(acc[i], QD(halves16)(v0, v1, y0, y0 + 1, 2), sc0, sc1, x[i][b].d, x[i][b + 1].d);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < nx; i++)
		_mm_storeu_ps(o + i * 4, acc[i]);
}

QD_FN void QD(kern3k)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern3kx)(o, x, xy, nx, w, nb, t, 0);
}

QD_FN void QD(kern2k)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern2kx)(o, x, xy, nx, w, nb, t, 0);
}

QD_FN void QD(kern6k)(float *o, const eng_qxblk *const *x, const eng_qxbyt *const *xy, int nx,
                      const uint8_t *const w[4], int nb, int t)
{
	QD(kern6kx)(o, x, xy, nx, w, nb, t, 0);
}

__attribute__((target(QD_TARGET))) static void QD(qdotr)(float *o, const eng_qxblk *const *x,
                                                          const eng_qxbyt *const *xy, int nx,
                                                          const uint8_t *const w[4], int nb, int t)
{
#define QD_R(T, K)                                                                                                     \
	case T:                                                                                                        \
		switch (nx) {                                                                                          \
		case 1: QD(K)(o, x, xy, 1, w, nb, T); break;                                                           \
		case 2: QD(K)(o, x, xy, 2, w, nb, T); break;                                                           \
		case 3: QD(K)(o, x, xy, 3, w, nb, T); break;                                                           \
		case 4: QD(K)(o, x, xy, 4, w, nb, T); break;                                                           \
		case 5: QD(K)(o, x, xy, 5, w, nb, T); break;                                                           \
		default: QD(K)(o, x, xy, 6, w, nb, T); break;                                                          \
		}                                                                                                      \
		break;
	if (!xy) { /* no bytes: Q8_0 .. Q5_1 on words (eng_qdot takes the others elsewhere: qd_words) */
		switch (t) {
			QD_R(4, kernr)
			QD_R(5, kernr)
			QD_R(6, kernr)
			QD_R(7, kernr)
		default:
			QD_R(3, kernr)
		}
		return;
	}
	switch (t) {
		QD_R(3, kernr)
		QD_R(4, kern4b)
		QD_R(5, kern4b)
		QD_R(6, kern4b)
		QD_R(7, kern4b)
		QD_R(8, kern4k)
		QD_R(9, kern4k)
		QD_R(11, kern4i)
		QD_R(12, kern4b)
		QD_R(13, kern2k)
		QD_R(14, kern3k)
		QD_R(15, kerniq2)
		QD_R(16, kerniq2)
		QD_R(17, kerniq2)
	default:
		QD_R(10, kern6k)
	}
#undef QD_R
}

/* eng_qdot_rows at this level: one activation row (its bytes xy, which
 * every type but Q8_0 reads; NULL for the 32-element types alone), nq
 * quads of rows a quarter apart, each through the kernel qdotr takes for
 * it with nx = 1 (the same bits), the type chosen once for the whole run
 * of quads rather than quad by quad. */
__attribute__((target(QD_TARGET))) static void QD(rows)(float *y, const eng_qxblk *x, const eng_qxbyt *xy,
                                                         const uint8_t *W, size_t rb, int r0, int q4, int nq, int nb,
                                                         int t)
{
#define QD_W(T, K)                                                                                                     \
	case T:                                                                                                        \
		for (int k = 0; k < nq; k++) {                                                                         \
			const uint8_t *w[4];                                                                           \
			float o[4];                                                                                    \
			for (int u = 0; u < 4; u++)                                                                    \
				w[u] = W + (size_t)(r0 + k + u * q4) * rb;                                             \
			QD(K)(o, &x, &xy, 1, w, nb, T);                                                                \
			for (int u = 0; u < 4; u++)                                                                    \
				y[r0 + k + u * q4] = o[u];                                                             \
		}                                                                                                      \
		break;
	if (!xy) { /* no bytes: Q8_0 .. Q5_1 on words, as qdotr */
		switch (t) {
			QD_W(4, kernr)
			QD_W(5, kernr)
			QD_W(6, kernr)
			QD_W(7, kernr)
		default:
			QD_W(3, kernr)
		}
		return;
	}
	switch (t) {
		QD_W(3, kernr)
		QD_W(4, kern4b)
		QD_W(5, kern4b)
		QD_W(6, kern4b)
		QD_W(7, kern4b)
		QD_W(8, kern4k)
		QD_W(9, kern4k)
		QD_W(11, kern4i)
		QD_W(12, kern4b)
		QD_W(13, kern2k)
		QD_W(14, kern3k)
		QD_W(15, kerniq2)
		QD_W(16, kerniq2)
		QD_W(17, kerniq2)
	default:
		QD_W(10, kern6k)
	}
#undef QD_W
}

/* eng_qdot_x4 at this level: kern4bx or kern4kx on one quad against nx
 * (1 .. ENG_QDOT_X) activation rows, the type and width chosen here. */
__attribute__((target(QD_TARGET))) static void QD(quad4)(float *o, const eng_qxblk *const *x,
                                                          const eng_qxbyt *const *xy, int nx, const uint8_t *quad,
                                                          int nb, int t)
{
	const uint8_t *w[4] = {quad, NULL, NULL, NULL};
#define QD_Q4(T, K)                                                                                                     \
	case T:                                                                                                        \
		switch (nx) {                                                                                          \
		case 1: QD(K)(o, x, xy, 1, w, nb, T, 1); break;                                                        \
		case 2: QD(K)(o, x, xy, 2, w, nb, T, 1); break;                                                        \
		case 3: QD(K)(o, x, xy, 3, w, nb, T, 1); break;                                                        \
		case 4: QD(K)(o, x, xy, 4, w, nb, T, 1); break;                                                        \
		case 5: QD(K)(o, x, xy, 5, w, nb, T, 1); break;                                                        \
		default: QD(K)(o, x, xy, 6, w, nb, T, 1); break;                                                       \
		}                                                                                                      \
		break;
	switch (t) {
		QD_Q4(3, kernrx)
		QD_Q4(4, kern4bx)
		QD_Q4(5, kern4bx)
		QD_Q4(6, kern4bx)
		QD_Q4(7, kern4bx)
		QD_Q4(8, kern4kx)
		QD_Q4(9, kern4kx)
		QD_Q4(11, kern4ix)
		QD_Q4(12, kern4bx)
		QD_Q4(13, kern2kx)
		QD_Q4(14, kern3kx)
	default:
		QD_Q4(10, kern6kx)
	}
#undef QD_Q4
}

/* eng_qdot_rows_x4 at this level: nq quads laid out four rows together
 * from row r0 (a multiple of 4) of W, against one activation row and its
 * bytes, through kern4bx or kern4kx, the type chosen once for the run. */
__attribute__((target(QD_TARGET))) static void QD(rows4)(float *y, const eng_qxblk *x, const eng_qxbyt *xy,
                                                          const uint8_t *W, size_t rb, int r0, int nq, int nb, int t)
{
#define QD_W4(T, K)                                                                                                    \
	case T:                                                                                                        \
		for (int k = 0; k < nq; k++) {                                                                         \
			const uint8_t *w[4] = {W + (size_t)(r0 + 4 * k) * rb, NULL, NULL, NULL};                       \
			QD(K)(y + r0 + 4 * k, &x, &xy, 1, w, nb, T, 1);                                                \
		}                                                                                                      \
		break;
	switch (t) {
		QD_W4(3, kernrx)
		QD_W4(4, kern4bx)
		QD_W4(5, kern4bx)
		QD_W4(6, kern4bx)
		QD_W4(7, kern4bx)
		QD_W4(8, kern4kx)
		QD_W4(9, kern4kx)
		QD_W4(11, kern4ix)
		QD_W4(12, kern4bx)
		QD_W4(13, kern2kx)
		QD_W4(14, kern3kx)
	default:
		QD_W4(10, kern6kx)
	}
#undef QD_W4
}
#endif

/* A group's scales and minimum coefficients, four rows at once as decode
 * takes them (scales4; K-quants a super-block's 8 blocks at a time,
 * kscales). */
/* Block b's scales (both halves) and minimum coefficients of rows 4q ..
 * 4q + 3 into the group */
QD_FN void QD(group_put_scales)(eng_qgroup *g, int b, int q, __m128 s0, __m128 s1, __m128 m)
{
	_mm_storeu_ps(g->sc + b * 32 + 4 * q, s0);
	_mm_storeu_ps(g->sc + b * 32 + 16 + 4 * q, s1);
	_mm_storeu_ps(g->m + b * 16 + 4 * q, m);
}

/* A K-quant super-block's scales of rows 4q .. 4q + 3 (kscalesx, on rows
 * or on a quad) into the group's 8 blocks from b; a half takes its own
 * scale where the type's halves have their own (qd_two: Q6_K, Q3_K,
 * IQ2_XS, IQ2_S; kscalesx leaves s1 unset for Q4_K and Q5_K, whose blocks
 * take s0 whole) */
QD_FN void QD(group_kscales)(eng_qgroup *g, const uint8_t *const w[4], int b, int q, int t, int x4)
{
	float s0[32], s1[32], m[32];
	QD(kscalesx)(w, b / 8, t, s0, s1, m, x4);
	const float *h1 = qd_two(t) ? s1 : s0;
	for (int j = 0; j < 8; j++)
		QD(group_put_scales)(g, b + j, q, _mm_loadu_ps(s0 + 4 * j), _mm_loadu_ps(h1 + 4 * j), _mm_loadu_ps(m + 4 * j));
}

/* Q2_K's: a super-block's scales and both halves' minimum coefficients of
 * rows 4q .. 4q + 3 (q2scalesx, on rows or on a quad) into the group's 8
 * blocks from b */
QD_FN void QD(group_q2scales)(eng_qgroup *g, const uint8_t *const w[4], int b, int q, int x4)
{
	float s0[32], s1[32], m0[32], m1[32];
	QD(q2scalesx)(w, b / 8, s0, s1, m0, m1, x4);
	for (int j = 0; j < 8; j++) {
		QD(group_put_scales)(g, b + j, q, _mm_loadu_ps(s0 + 4 * j), _mm_loadu_ps(s1 + 4 * j), _mm_loadu_ps(m0 + 4 * j));
		_mm_storeu_ps(g->m2 + (b + j) * 16 + 4 * q, _mm_loadu_ps(m1 + 4 * j));
	}
}

QD_FN void QD(group_scales)(eng_qgroup *g, const uint8_t *const w[ENG_QGROUP_ROWS], int nb, int t)
{
	for (int b = 0; b < nb; b++) {
		if (t == 13 && b % 8 == 0) { /* Q2_K: each half's scale and minimum coefficient */
			for (int q = 0; q < 4; q++)
				QD(group_q2scales)(g, w + 4 * q, b, q, 0);
		} else if (t != 13 && qd_super(t) && b % 8 == 0) {
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++)
				QD(group_kscales)(g, w + 4 * q, b, q, t, 0);
		} else if (!qd_super(t)) {
#pragma GCC unroll 4
			for (int q = 0; q < 4; q++) {
				__m128 s0, s1, m = _mm_setzero_ps();
				QD(scales4)(w + 4 * q, b, t, &s0, &s1, &m);
				QD(group_put_scales)(g, b, q, s0, s1, m);
			}
		}
	}
}

/* Rows w[0..16) unpacked into a group (qdot.h's eng_qgroup): each block
 * widened to 16 bits as unpack gives it, its pairs put in place (VNNI:
 * the 16 rows' pairs, 16 x 16 32-bit values, transposed in registers;
 * AVX2: stored one by one). */
#if QD_VNNI
/* rows v[0..16) of 16 32-bit values into columns: v[k] lane r = v[r] lane k */
QD_FN void QD(transpose16)(__m512i v[16])
{
	__m512i t[16], u[16];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
	}
	/* u[4g + c], 128-bit lane L: rows 4g..4g+3, element 4L + c */
#pragma GCC unroll 4
	for (int g = 0; g < 4; g++) {
		u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
		u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
		u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
	}
	/* a 4 x 4 transpose of 128-bit lanes for each c */
#pragma GCC unroll 4
	for (int c = 0; c < 4; c++) {
		__m512i s0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), s1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
		__m512i s2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), s3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
		v[c] = _mm512_shuffle_i32x4(s0, s2, 0x88);
		v[4 + c] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
		v[8 + c] = _mm512_shuffle_i32x4(s1, s3, 0x88);
		v[12 + c] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
	}
}

/* Block b's 16 rows of 32 values (v[r], 16-bit) into the group, as pairs */
QD_FN void QD(group_put)(eng_qgroup *g, int b, __m512i v[16])
{
	QD(transpose16)(v);
#pragma GCC unroll 16
	for (int k = 0; k < 16; k++)
		_mm512_storeu_si512((void *)(g->q + ((size_t)b * 16 + (size_t)k) * 32), v[k]);
}

__attribute__((target(QD_TARGET))) static void QD(group_unpack)(eng_qgroup *g, const uint8_t *const w[ENG_QGROUP_ROWS],
                                                                 int nb, int t)
{
	QD(group_scales)(g, w, nb, t);
	for (int b = 0; b < nb; b++) {
		__m512i v[16];
#pragma GCC unroll 16
		for (int r = 0; r < ENG_QGROUP_ROWS; r++) {
			__m256i q;
			QD(unpack)(w[r], b, t, &q);
			v[r] = _mm512_cvtepi8_epi16(q);
		}
		QD(group_put)(g, b, v);
	}
}

/* Row u's 32 values of a block from bquad4's two registers (u constant) */
#define QD_ROW4(e, u) _mm256_set_m128i(_mm512_extracti32x4_epi32((e)[1], u), _mm512_extracti32x4_epi32((e)[0], u))

/* group_unpack on four quads laid out four rows together (rows 4q .. 4q + 3
 * of the group at quads[q]; every type laid out so, eng_qx4_type): the
 * values unpack and the scales group_scales give, read from the quads
 * (bquad4's loads, or kquadx's, q6quadx's, a pair of rows' bytes, and
 * kscalesx's) with no rows copied out. */
__attribute__((target(QD_TARGET))) static void QD(group_unpack4)(eng_qgroup *g, const uint8_t *const quads[4], int nb,
                                                                  int t)
{
	const size_t qb = qd_super(t) ? 0 : 4 * (size_t)qd_bsz[t]; /* (a block of four rows of the 32-element types) */
	const __m512i off = _mm512_set1_epi8((char)(t == 4 ? 8 : t == 6 ? 16 : 0));
	for (int b = 0; b < nb; b++) {
		__m512i v[16];
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			const uint8_t *blk = quads[q] + (size_t)b * qb;
			__m128 s0, s1, m = _mm_setzero_ps();
			if (t == 3) { /* Q8_0: the four d, each pair's halves side by side */
				s0 = s1 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)blk));
				QD(group_put_scales)(g, b, q, s0, s1, m);
#pragma GCC unroll 4
				for (int u = 0; u < 4; u++) {
					const uint8_t *h = blk + 8 + 64 * (u / 2) + 16 * (u % 2);
					v[4 * q + u] = _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_loadu_si128((const __m128i *)(h + 32)),
					                                                     _mm_loadu_si128((const __m128i *)h)));
				}
				continue;
			}
			__m512i e[2];
			if (t == 13) { /* Q2_K: a super-block's scales at its first block; a pair of rows a register */
				const uint8_t *w4[4] = {quads[q], NULL, NULL, NULL};
				int j = b % 8;
				if (j == 0)
					QD(group_q2scales)(g, w4, b, q, 1);
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					__m512i raw = _mm512_loadu_si512((const void *)(quads[q] + (size_t)(b / 8) * 4 * 84 + 80 + 128 * (j / 4) + 64 * h));
					__m512i vals = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * (j % 4)), _mm512_set1_epi8(3));
					v[4 * q + 2 * h] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(vals));
					v[4 * q + 2 * h + 1] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(vals, 1));
				}
				continue;
			}
			if (t == 10 || t == 14) { /* Q6_K, Q3_K: a super-block's scales at its first block; a pair of rows a register */
				const uint8_t *w4[4] = {quads[q], NULL, NULL, NULL};
				int j = b % 8;
				if (j == 0)
					QD(group_kscales)(g, w4, b, q, t, 1);
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					__m512i vals;
					if (t == 10) { /* q6quadx's raw values of the half's blocks, less 32 */
						__m512i q6[4];
						QD(q6quadx)(w4, h, b, q6, 1);
						vals = _mm512_sub_epi8(q6[j % 4], _mm512_set1_epi8(32));
					} else { /* the 2-bit fields, + 4 where hmask's bit j is set, less 4 */
						const uint8_t *sb = quads[q] + (size_t)(b / 8) * 4 * 110;
						__m512i raw = _mm512_loadu_si512((const void *)(sb + 128 * (j / 4) + 64 * h));
						__m512i hm = _mm512_loadu_si512((const void *)(sb + 256 + 64 * h));
						vals = _mm512_sub_epi8(QD(q3pair)(raw, hm, j), _mm512_set1_epi8(4));
					}
					v[4 * q + 2 * h] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(vals));
					v[4 * q + 2 * h + 1] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(vals, 1));
				}
				continue;
			}
			if (t == 8 || t == 9) { /* Q4_K, Q5_K: a super-block's scales at its first block; the pair b, b + 1 */
				const uint8_t *w4[4] = {quads[q], NULL, NULL, NULL};
				if (b % 8 == 0)
					QD(group_kscales)(g, w4, b, q, t, 1);
				__m512i o[2];
				QD(kquadx)(w4, b & ~1, t, e, o, 1);
				if (b & 1)
					e[0] = o[0], e[1] = o[1];
			} else if (t == 11) { /* IQ4_XS: the scales as for K-quants; block b's 64 bytes through the table */
				const uint8_t *w4[4] = {quads[q], NULL, NULL, NULL};
				if (b % 8 == 0)
					QD(group_kscales)(g, w4, b, q, t, 1);
				const __m512i f = _mm512_set1_epi8(0x0F);
				const __m512i tab = QD(iq4tab512)();
				__m512i raw = _mm512_loadu_si512((const void *)(quads[q] + (size_t)(b / 8) * 4 * 136 + 32 + (size_t)(b % 8) * 64));
				e[0] = _mm512_shuffle_epi8(tab, _mm512_and_si512(raw, f));
				e[1] = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(raw, 4), f));
			} else { /* Q4_0 .. Q5_1: the stored values, less Q4_0's 8 and Q5_0's 16 as unpack takes them;
				  * IQ4_NL: the table's values of the nibbles */
				QD(bquad4)(blk, t, e, &s0, &s1, &m);
				QD(group_put_scales)(g, b, q, s0, s1, m);
				if (t == 12) {
					const __m512i tab = QD(iq4tab512)();
					e[0] = _mm512_shuffle_epi8(tab, e[0]), e[1] = _mm512_shuffle_epi8(tab, e[1]);
				} else {
					e[0] = _mm512_sub_epi8(e[0], off), e[1] = _mm512_sub_epi8(e[1], off);
				}
			}
			v[4 * q] = _mm512_cvtepi8_epi16(QD_ROW4(e, 0));
			v[4 * q + 1] = _mm512_cvtepi8_epi16(QD_ROW4(e, 1));
			v[4 * q + 2] = _mm512_cvtepi8_epi16(QD_ROW4(e, 2));
			v[4 * q + 3] = _mm512_cvtepi8_epi16(QD_ROW4(e, 3));
		}
		QD(group_put)(g, b, v);
	}
}
#undef QD_ROW4
#else
__attribute__((target(QD_TARGET))) static void QD(group_unpack)(eng_qgroup *g, const uint8_t *const w[ENG_QGROUP_ROWS],
                                                                 int nb, int t)
{
	QD(group_scales)(g, w, nb, t);
	for (int b = 0; b < nb; b++)
#pragma GCC unroll 2
		for (int r0 = 0; r0 < ENG_QGROUP_ROWS; r0 += 8) {
			/* v[h][r]: row r0 + r's pairs 8h .. 8h + 7 as 32-bit values */
			__m256i v[2][8];
#pragma GCC unroll 8
			for (int r = 0; r < 8; r++) {
				__m256i q;
				QD(unpack)(w[r0 + r], b, t, &q);
				v[0][r] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
				v[1][r] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
			}
#pragma GCC unroll 2
			for (int h = 0; h < 2; h++) {
				/* an 8 x 8 transpose of 32-bit values: pair 8h + k of the 8
				 * rows into one register, stored where the group keeps it */
				__m256i p[8], u[8], *x = v[h];
#pragma GCC unroll 4
				for (int i = 0; i < 4; i++) {
					p[2 * i] = _mm256_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
					p[2 * i + 1] = _mm256_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
				}
				/* u[4c + j]: rows 4c .. 4c + 3 of pair j (low half) and j + 4 (high) */
#pragma GCC unroll 2
				for (int c = 0; c < 2; c++) {
					u[4 * c] = _mm256_unpacklo_epi64(p[4 * c], p[4 * c + 2]);
					u[4 * c + 1] = _mm256_unpackhi_epi64(p[4 * c], p[4 * c + 2]);
					u[4 * c + 2] = _mm256_unpacklo_epi64(p[4 * c + 1], p[4 * c + 3]);
					u[4 * c + 3] = _mm256_unpackhi_epi64(p[4 * c + 1], p[4 * c + 3]);
				}
#pragma GCC unroll 4
				for (int j = 0; j < 4; j++) {
					int16_t *d = g->q + (((size_t)b * 16 + (size_t)(8 * h + j)) * 16 + (size_t)r0) * 2;
					_mm256_storeu_si256((__m256i *)d, _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
					_mm256_storeu_si256((__m256i *)(d + 4 * 16 * 2), _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
				}
			}
		}
}
#endif

/* an activation block's elements 2k, 2k + 1 as one 32-bit value */
QD_FN int32_t QD(pair_at)(const int16_t *q, int k)
{
	int32_t v;
	memcpy(&v, q + 2 * k, 4);
	return v;
}

/* A group against NX activation rows (nx of them real, the rest repeat
 * the last), one weight row a lane: pair k of every row meets pair k of
 * an activation row, broadcast, in one dpwssd (AVX2: madd and add, the
 * group's two halves one after the other), so a lane ends a block with
 * the row's integer sum (Q6_K: its halves' in lo and hi) and the
 * definition's fma follows, sixteen (eight) rows at once. */
#if QD_VNNI
QD_FN void QD(gkern)(float *o, const eng_qxblk *const *x, int nx, const eng_qgroup *g, int nb, int t, int NX)
{
	const int two = qd_two(t), mins = qd_has_min(t), q2 = t == 13;
	__m512 acc[6], mn[6];
	const eng_qxblk *xr[6];
#pragma GCC unroll 6
	for (int i = 0; i < NX; i++)
		acc[i] = mn[i] = _mm512_setzero_ps(), xr[i] = x[i < nx ? i : nx - 1];
	for (int b = 0; b < nb; b++) {
		__m512i lo[6], hi[6];
#pragma GCC unroll 6
		for (int i = 0; i < NX; i++)
			lo[i] = hi[i] = _mm512_setzero_si512();
		const int16_t *wq = g->q + (size_t)b * 512;
#pragma GCC unroll 16
		for (int k = 0; k < 16; k++) {
			__m512i wv = _mm512_loadu_si512((const void *)(wq + k * 32));
#pragma GCC unroll 6
			for (int i = 0; i < NX; i++) {
				__m512i xv = _mm512_set1_epi32(QD(pair_at)(xr[i][b].q, k));
				if (two && k >= 8)
					hi[i] = _mm512_dpwssd_epi32(hi[i], wv, xv);
				else
					lo[i] = _mm512_dpwssd_epi32(lo[i], wv, xv);
			}
		}
		__m512 sc0 = _mm512_loadu_ps(g->sc + b * 32), sc1 = _mm512_loadu_ps(g->sc + b * 32 + 16);
		__m512 vm = _mm512_loadu_ps(g->m + b * 16);
#pragma GCC unroll 6
		for (int i = 0; i < NX; i++) {
			__m512 xd = _mm512_set1_ps(xr[i][b].d);
			acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[i]), _mm512_mul_ps(sc0, xd), acc[i]);
			if (two)
				acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[i]), _mm512_mul_ps(sc1, xd), acc[i]);
			if (mins)
				mn[i] = _mm512_fmadd_ps(vm, _mm512_set1_ps(xr[i][b].s), mn[i]);
			if (q2) {
				int h[2];
				QD(halfsums)(xr[i][b].q, h);
				mn[i] = _mm512_fmadd_ps(vm, _mm512_set1_ps(xr[i][b].d * (float)h[0]), mn[i]);
				mn[i] = _mm512_fmadd_ps(_mm512_loadu_ps(g->m2 + b * 16), _mm512_set1_ps(xr[i][b].d * (float)h[1]), mn[i]);
			}
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < NX; i++)
		if (i < nx)
			_mm512_storeu_ps(o + i * 16, _mm512_add_ps(acc[i], mn[i]));
}
#else
QD_FN void QD(gkern)(float *o, const eng_qxblk *const *x, int nx, const eng_qgroup *g, int nb, int t, int NX)
{
	const int two = qd_two(t), mins = qd_has_min(t), q2 = t == 13;
	const eng_qxblk *xr[3];
#pragma GCC unroll 3
	for (int i = 0; i < NX; i++)
		xr[i] = x[i < nx ? i : nx - 1];
#pragma GCC unroll 1
	for (int h = 0; h < 2; h++) {
		__m256 acc[3], mn[3];
#pragma GCC unroll 3
		for (int i = 0; i < NX; i++)
			acc[i] = mn[i] = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			__m256i lo[3], hi[3];
#pragma GCC unroll 3
			for (int i = 0; i < NX; i++)
				lo[i] = hi[i] = _mm256_setzero_si256();
			const int16_t *wq = g->q + (size_t)b * 512 + h * 16;
#pragma GCC unroll 16
			for (int k = 0; k < 16; k++) {
				__m256i wv = _mm256_loadu_si256((const __m256i *)(wq + k * 32));
#pragma GCC unroll 3
				for (int i = 0; i < NX; i++) {
					__m256i p = _mm256_madd_epi16(wv, _mm256_set1_epi32(QD(pair_at)(xr[i][b].q, k)));
					if (two && k >= 8)
						hi[i] = _mm256_add_epi32(hi[i], p);
					else
						lo[i] = _mm256_add_epi32(lo[i], p);
				}
			}
			__m256 sc0 = _mm256_loadu_ps(g->sc + b * 32 + h * 8), sc1 = _mm256_loadu_ps(g->sc + b * 32 + 16 + h * 8);
			__m256 vm = _mm256_loadu_ps(g->m + b * 16 + h * 8);
#pragma GCC unroll 3
			for (int i = 0; i < NX; i++) {
				__m256 xd = _mm256_set1_ps(xr[i][b].d);
				acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo[i]), _mm256_mul_ps(sc0, xd), acc[i]);
				if (two)
					acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi[i]), _mm256_mul_ps(sc1, xd), acc[i]);
				if (mins)
					mn[i] = _mm256_fmadd_ps(vm, _mm256_set1_ps(xr[i][b].s), mn[i]);
				if (q2) {
					int hh[2];
					QD(halfsums)(xr[i][b].q, hh);
					mn[i] = _mm256_fmadd_ps(vm, _mm256_set1_ps(xr[i][b].d * (float)hh[0]), mn[i]);
					mn[i] = _mm256_fmadd_ps(_mm256_loadu_ps(g->m2 + b * 16 + h * 8), _mm256_set1_ps(xr[i][b].d * (float)hh[1]),
					                        mn[i]);
				}
			}
		}
#pragma GCC unroll 3
		for (int i = 0; i < NX; i++)
			if (i < nx)
				_mm256_storeu_ps(o + i * 16 + h * 8, _mm256_add_ps(acc[i], mn[i]));
	}
}
#endif

/* eng_qdot_group at this level: VNNI takes up to 6 activation rows in
 * one pass (compiled for 2, 4 and 6), AVX2 three at a time. */
__attribute__((target(QD_TARGET))) static void QD(group)(float *o, const eng_qxblk *const *x, int nx,
                                                          const eng_qgroup *g, int nb, int t)
{
#if QD_VNNI
#define QD_G(T)                                                                                                        \
	case T:                                                                                                        \
		if (nx <= 2)                                                                                           \
			QD(gkern)(o, x, nx, g, nb, T, 2);                                                              \
		else if (nx <= 4)                                                                                      \
			QD(gkern)(o, x, nx, g, nb, T, 4);                                                              \
		else                                                                                                   \
			QD(gkern)(o, x, nx, g, nb, T, 6);                                                              \
		break;
#else
#define QD_G(T)                                                                                                        \
	case T:                                                                                                        \
		for (int i = 0; i < nx; i += 3)                                                                        \
			QD(gkern)(o + i * 16, x + i, nx - i < 3 ? nx - i : 3, g, nb, T, 3);                            \
		break;
#endif
	switch (t) {
		QD_G(3)
		QD_G(4)
		QD_G(5)
		QD_G(6)
		QD_G(7)
		QD_G(8)
		QD_G(9)
		QD_G(11)
		QD_G(12)
		QD_G(13)
		QD_G(15)
		QD_G(16)
		QD_G(17)
	default:
		QD_G(10)
	}
#undef QD_G
}

#undef QD_FN
#undef QD
#undef QD_CAT
#undef QD_CAT2
