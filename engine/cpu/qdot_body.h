/*
 * engine/cpu/qdot_body.h: the vector kernel of engine/cpu/qdot.c, included
 * once for each instruction set (QD_SFX names the copy, QD_TARGET is its
 * target attribute, QD_VNNI 1 where dpbusd does the integer sums). The
 * sums are those of qdot.h's definition; only how the exact integer lane
 * sums are formed differs between the copies.
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
QD_FN __m256 QD(block)(__m256 acc, __m256i lo, __m256i hi, __m256 s0, __m256 s1, __m256i xlo, __m256i xhi, __m256 xd,
                       int two)
{
#if QD_VNNI
	/* madd for the first half (no zeroed accumulator to copy), dpwssd adds the second */
	if (!two)
		return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_dpwssd_epi32(_mm256_madd_epi16(lo, xlo), hi, xhi)),
		                       _mm256_mul_ps(s0, xd), acc);
	__m256i plo = _mm256_madd_epi16(lo, xlo), phi = _mm256_madd_epi16(hi, xhi);
#else
	__m256i plo = _mm256_madd_epi16(lo, xlo), phi = _mm256_madd_epi16(hi, xhi);
	if (!two)
		return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(plo, phi)), _mm256_mul_ps(s0, xd), acc);
#endif
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

#if QD_VNNI
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

#undef QD_FN
#undef QD
#undef QD_CAT
#undef QD_CAT2
