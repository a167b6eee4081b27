/* The CUDA ops (engine/cuda) against the CPU reference, op by op, on
 * random inputs (ctest label gpu): the GEMV in f32, f16 and bf16 at batch
 * 1, 3 and 8 against the dequantized product; the cuBLASLt GEMM at 16, 37
 * and 256 rows against the product of the rows rounded to the weight's
 * type; every block type's decoding bit for bit against the definition and
 * its GEMV against the product of the decoded weights; RMSNorm, RoPE (full and
 * partial rotary), SwiGLU, SwiGLU-OAI, axpy, embedding rows; the lightning
 * indexer's choice equal to eng_index_select_one's definition block for
 * block (ties to the lower block included); the split-K sparse decode
 * against direct attention over the chosen blocks, for several split
 * targets (the same answer however it is cut); the KV store byte for byte
 * against the host's store; an MoE decode's routing, GEMV over (row,
 * expert) pairs and mixing. Each op prints its largest
 * normalized error. Without a device the test says so and is skipped
 * (exit 77). */
#include "engine_testutil.h"
#include "engine/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/cuda/cuda.h"
#include "engine/gguf/quant.h"
#include "tests/engine/kv_store_def.h"

static uint64_t rng = 88172645463325252ull;

static float rnd(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_vec(size_t n, float scale)
{
	float *v = malloc(n * sizeof *v);
	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = rnd() * scale;
	return v;
}

static void *up(const void *h, size_t bytes)
{
	void *d = eng_cuda_malloc(bytes);
	assert_non_null(d);
	assert_int_equal(eng_cuda_upload(d, h, bytes), 0);
	return d;
}

static float *down(const float *d, size_t n)
{
	float *h = malloc(n * sizeof *h);
	assert_int_equal(eng_cuda_sync(), 0);
	assert_int_equal(eng_cuda_download(h, d, n * sizeof *h), 0);
	return h;
}

/* max |a - b| / max(max |b|, 1e-30) */
static double nerr(const float *a, const float *b, size_t n)
{
	double e = 0, s = 1e-30;
	for (size_t i = 0; i < n; i++) {
		e = fmax(e, fabs((double)a[i] - b[i]));
		s = fmax(s, fabs((double)b[i]));
	}
	return e / s;
}

static void report(const char *op, double e, double tol)
{
	printf("cuda %-28s normalized error %.3g (tolerance %.1g)\n", op, e, tol);
	if (!(e <= tol))
		fail_msg("%s: error %.3g over %.1g", op, e, tol);
}

/* Random weights [rows, cols] as dtype holds them: *w gets their values,
 * the return is the device copy of the stored form. */
static void *weights_up(int dt, int rows, int cols, float **w)
{
	size_t count = (size_t)rows * cols;
	*w = rand_vec(count, 1.0f);
	uint16_t *h = malloc(count * 2);
	for (size_t i = 0; i < count; i++) {
		if (dt == ENG_F16)
			h[i] = eng_f32_to_f16((*w)[i]), (*w)[i] = eng_f16_to_f32(h[i]);
		else if (dt == ENG_BF16)
			h[i] = eng_f32_to_bf16((*w)[i]), (*w)[i] = eng_bf16_to_f32(h[i]);
	}
	void *d = up(dt == ENG_F32 ? (const void *)*w : (const void *)h, count * (dt ? 2 : 4));
	free(h);
	return d;
}

typedef int (*matmul_op)(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols);

/* op(y, x, n, dw) for each n of ns against the product of w (its values)
 * with random rows in double; with round_rows, the rows as the weight's
 * 16-bit type holds them (what the GEMM multiplies). */
static void check_matmul(const char *what, matmul_op op, const void *dw, int dt, const float *w, int rows, int cols,
                         const int *ns, int nn, bool round_rows)
{
	for (int k = 0; k < nn; k++) {
		int n = ns[k];
		float *x = rand_vec((size_t)n * cols, 1.0f), *want = malloc((size_t)n * rows * sizeof *want);
		float *dx = up(x, (size_t)n * cols * 4), *dy = eng_cuda_malloc((size_t)n * rows * 4);
		for (size_t i = 0; round_rows && i < (size_t)n * cols; i++)
			x[i] = dt == ENG_F16    ? eng_f16_to_f32(eng_f32_to_f16(x[i]))
			       : dt == ENG_BF16 ? eng_bf16_to_f32(eng_f32_to_bf16(x[i]))
			                        : x[i];
		for (int b = 0; b < n; b++)
			for (int r = 0; r < rows; r++) {
				double a = 0;
				for (int c = 0; c < cols; c++)
					a += (double)w[(size_t)r * cols + c] * x[(size_t)b * cols + c];
				want[(size_t)b * rows + r] = (float)a;
			}
		assert_int_equal(op(dy, dx, n, dw, dt, rows, cols), 0);
		float *got = down(dy, (size_t)n * rows);
		char name[64];
		snprintf(name, sizeof name, "%s %s [%d,%d] n=%d", what, eng_dtype_lower((eng_dtype)dt), rows, cols, n);
		report(name, nerr(got, want, (size_t)n * rows), 1e-5);
		free(got), free(x), free(want), eng_cuda_free(dx), eng_cuda_free(dy);
	}
}

static void gemv_matches_the_dequantized_product(void **st)
{
	(void)st;
	static const int shapes[][2] = {{64, 64}, {1000, 512}, {333, 2056}};
	static const int ns[] = {1, 3, 8, 11};
	for (size_t s = 0; s < 3; s++)
		for (int dt = 0; dt < 3; dt++) {
			float *w = NULL;
			void *dw = weights_up(dt, shapes[s][0], shapes[s][1], &w);
			check_matmul("gemv", eng_cuda_gemv, dw, dt, w, shapes[s][0], shapes[s][1], ns, 4, false);
			free(w), eng_cuda_free(dw);
		}
}

/* The prefill GEMM: rows rounded to a 16-bit weight's type, products and
 * sums in f32, against the same product in double. */
static void gemm_matches_the_product_of_rounded_rows(void **st)
{
	(void)st;
	static const int shapes[][2] = {{64, 64}, {1000, 512}, {333, 2056}};
	static const int ns[] = {16, 37, 256};
	for (size_t s = 0; s < 3; s++)
		for (int dt = 0; dt < 3; dt++) {
			float *w = NULL;
			void *dw = weights_up(dt, shapes[s][0], shapes[s][1], &w);
			check_matmul("gemm", eng_cuda_gemm, dw, dt, w, shapes[s][0], shapes[s][1], ns, 3, true);
			free(w), eng_cuda_free(dw);
		}
}

/* Block-type weights read in place: the device's decoding of every type
 * is the definition's, bit for bit, and the GEMV over them is the product
 * of the decoded weights. */
static void block_types_match_the_definition(void **st)
{
	(void)st;
	static const int types[] = {ENG_Q8_0, ENG_Q4_0, ENG_Q4_1, ENG_Q5_0, ENG_Q5_1, ENG_Q4_K, ENG_Q5_K, ENG_Q6_K, ENG_IQ4_XS, ENG_IQ4_NL, ENG_Q2_K, ENG_Q3_K,
	                            ENG_IQ2_XXS, ENG_IQ2_XS, ENG_IQ2_S};
	static const int ns[] = {1, 3, 8, 11};
	int rows = 96, cols = 512;
	size_t count = (size_t)rows * cols;
	for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
		eng_dtype t = (eng_dtype)types[k];
		float *src = rand_vec(count, 2.0f), *w = malloc(count * sizeof *w), *got = NULL;
		size_t bytes = eng_dtype_bytes(t, count);
		void *q = malloc(bytes);
		eng_ggml_quantize(q, src, eng_dtype_ggml(t), count);
		eng_to_f32(w, q, t, count);
		void *dq = up(q, bytes);
		float *dd = eng_cuda_malloc(count * sizeof(float));
		assert_int_equal(eng_cuda_dequantize(dd, dq, t, count), 0);
		got = down(dd, count);
		size_t differ = 0;
		for (size_t i = 0; i < count; i++)
			differ += memcmp(&got[i], &w[i], sizeof(float)) != 0;
		printf("cuda dequantize %-5s: %zu of %zu values differ from the definition\n", eng_dtype_lower(t), differ, count);
		assert_int_equal(differ, 0);
		check_matmul("gemv", eng_cuda_gemv_q, dq, t, w, rows, cols, ns, 4, false);
		free(got), free(src), free(w), free(q), eng_cuda_free(dq), eng_cuda_free(dd);
	}
}

static void elementwise_ops_match_the_cpu(void **st)
{
	(void)st;
	int n = 5, d = 896, nh = 7, hd = 128;
	/* rmsnorm */
	float *x = rand_vec((size_t)n * d, 3.0f), *g = rand_vec(d, 1.0f), *want = malloc((size_t)n * d * 4);
	eng_cpu_rmsnorm(NULL, want, x, g, n, d, 1e-6f);
	float *dx = up(x, (size_t)n * d * 4), *dg = up(g, d * 4), *dy = eng_cuda_malloc((size_t)n * d * 4);
	assert_int_equal(eng_cuda_rmsnorm(dy, dx, dg, n, d, 1e-6f), 0);
	float *got = down(dy, (size_t)n * d);
	report("rmsnorm", nerr(got, want, (size_t)n * d), 1e-6);
	free(got);
	/* rope, full and partial */
	long pos[5] = {0, 1, 17, 4095, 1000000};
	for (int rd = hd; rd >= hd / 2; rd /= 2) {
		float *q = rand_vec((size_t)n * nh * hd, 1.0f), *inv = malloc((size_t)rd / 2 * 4);
		for (int j = 0; j < rd / 2; j++)
			inv[j] = (float)pow(1e6, -2.0 * j / rd);
		float *dq = up(q, (size_t)n * nh * hd * 4), *dinv = up(inv, (size_t)rd / 2 * 4);
		eng_cpu_rope(NULL, q, n, nh, hd, rd, pos, inv);
		assert_int_equal(eng_cuda_rope(dq, n, nh, hd, rd, pos, dinv), 0);
		got = down(dq, (size_t)n * nh * hd);
		report(rd == hd ? "rope" : "rope partial", nerr(got, q, (size_t)n * nh * hd), 1e-6);
		free(got);
		/* as many rows at other positions: the op must not keep the last ones */
		long pos2[5] = {3, 2, 1, 0, 77};
		assert_int_equal(eng_cuda_upload(dq, q, (size_t)n * nh * hd * 4), 0);
		eng_cpu_rope(NULL, q, n, nh, hd, rd, pos2, inv);
		assert_int_equal(eng_cuda_rope(dq, n, nh, hd, rd, pos2, dinv), 0);
		got = down(dq, (size_t)n * nh * hd);
		report("rope, new positions", nerr(got, q, (size_t)n * nh * hd), 1e-6);
		free(got), free(q), free(inv), eng_cuda_free(dq), eng_cuda_free(dinv);
	}
	/* swiglu, swiglu-oai, axpy */
	size_t m = 10000;
	float *a = rand_vec(m, 8.0f), *b = rand_vec(m, 8.0f), *a2 = malloc(m * 4);
	memcpy(a2, a, m * 4);
	float *da = up(a, m * 4), *db = up(b, m * 4);
	eng_cpu_swiglu(NULL, a, b, m);
	assert_int_equal(eng_cuda_swiglu(da, db, m), 0);
	got = down(da, m);
	report("swiglu", nerr(got, a, m), 1e-6);
	free(got);
	assert_int_equal(eng_cuda_upload(da, a2, m * 4), 0);
	eng_cpu_swiglu_oai(NULL, a2, b, m, 1.702f, 7.0f);
	assert_int_equal(eng_cuda_swiglu_oai(da, db, m, 1.702f, 7.0f), 0);
	got = down(da, m);
	report("swiglu_oai", nerr(got, a2, m), 1e-6);
	free(got);
	for (size_t i = 0; i < m; i++)
		a2[i] += 0.25f * b[i];
	assert_int_equal(eng_cuda_upload(da, a2, m * 4), 0); /* y = a2 before; compare after one more axpy */
	for (size_t i = 0; i < m; i++)
		a2[i] += 0.25f * b[i];
	assert_int_equal(eng_cuda_axpy(da, db, 0.25f, m), 0);
	got = down(da, m);
	report("axpy", nerr(got, a2, m), 1e-7);
	free(got);
	/* embedding rows from a bf16 table */
	int vocab = 300, width = 64;
	int32_t tok[4] = {0, 299, 7, 7};
	uint16_t *tab = malloc((size_t)vocab * width * 2);
	for (int i = 0; i < vocab * width; i++)
		tab[i] = eng_f32_to_bf16(rnd());
	void *dt = up(tab, (size_t)vocab * width * 2);
	float *de = eng_cuda_malloc(4 * (size_t)width * 4);
	assert_int_equal(eng_cuda_embed(de, dt, ENG_BF16, vocab, width, tok, 4), 0);
	got = down(de, 4 * (size_t)width);
	float *ew = malloc(4 * (size_t)width * 4);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < width; j++)
			ew[i * width + j] = eng_bf16_to_f32(tab[tok[i] * width + j]);
	report("embed bf16", nerr(got, ew, 4 * (size_t)width), 0);
	int32_t bad = vocab;
	assert_int_equal(eng_cuda_embed(de, dt, ENG_BF16, vocab, width, &bad, 1), EV_E_INVALID);
	free(got), free(ew), free(tab), eng_cuda_free(dt), eng_cuda_free(de);
	free(x), free(g), free(want), free(a), free(b), free(a2);
	eng_cuda_free(dx), eng_cuda_free(dg), eng_cuda_free(dy), eng_cuda_free(da), eng_cuda_free(db);
}

/* The definition (engine/indexer.c's eng_index_select_one on a flat cache):
 * block scores by the CPU's dot product, the local blocks forced, the best
 * up to top-k, lower block first on ties; ascending. */
static float cpu_dot(const float *a, const float *b, int n);
static int choose(const float *q, const float *ik, int idim, long pos, int block, int topk, int local, int nlist,
                  int *out)
{
	long cur = pos / block;
	float *sc = malloc((size_t)(cur + 1) * sizeof *sc);
	for (long b = 0; b <= cur; b++) {
		long t1 = b * block + block - 1 < pos ? b * block + block - 1 : pos;
		float best = -INFINITY;
		for (long t = b * block; t <= t1; t++) {
			float dd = cpu_dot(q, ik + (size_t)t * idim, idim);
			best = dd > best ? dd : best;
		}
		sc[b] = best;
	}
	for (int j = 0; j < local; j++)
		sc[cur - j > 0 ? cur - j : 0] = INFINITY;
	long want = topk < cur + 1 ? topk : cur + 1;
	want = want < nlist ? want : nlist;
	int k = 0;
	for (; k < want; k++) {
		long pick = -1;
		for (long b = 0; b <= cur; b++)
			if (sc[b] != -INFINITY && (pick < 0 || sc[b] > sc[pick]))
				pick = b;
		if (pick < 0)
			break;
		out[k] = (int)pick;
		sc[pick] = -INFINITY;
	}
	for (int a = 1; a < k; a++)
		for (int c = a; c > 0 && out[c - 1] > out[c]; c--) {
			int t = out[c];
			out[c] = out[c - 1];
			out[c - 1] = t;
		}
	free(sc);
	return k;
}

/* The CPU's dot product in the order engine/cpu/kernels.h takes it. */
static float cpu_dot(const float *a, const float *b, int n)
{
	int i = 0;
	float s = 0;
	if (eng_cpu_dot_avx2()) {
		float a0[8] = {0}, a1[8] = {0}, h[4];
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 8; l++)
				a0[l] = fmaf(a[i + l], b[i + l], a0[l]), a1[l] = fmaf(a[i + 8 + l], b[i + 8 + l], a1[l]);
		for (; i + 8 <= n; i += 8)
			for (int l = 0; l < 8; l++)
				a0[l] = fmaf(a[i + l], b[i + l], a0[l]);
		for (int l = 0; l < 8; l++)
			a0[l] += a1[l];
		for (int l = 0; l < 4; l++)
			h[l] = a0[l] + a0[l + 4];
		s = (h[0] + h[2]) + (h[1] + h[3]);
	}
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static void indexer_choice_equals_the_definition(void **st)
{
	(void)st;
	int n = 4, kvh = 2, idim = 72, block = 16, topk = 6, local = 2, nlist = 8;
	long pos[4] = {5, 100, 1000, 4095}, len = 4096;
	float *ik = rand_vec((size_t)len * idim, 1.0f), *iq = rand_vec((size_t)n * kvh * idim, 1.0f);
	/* ties: two blocks holding the same best key */
	memcpy(ik + (size_t)(3 * block) * idim, ik + (size_t)(40 * block + 2) * idim, (size_t)idim * 4);
	for (size_t i = 0; i < (size_t)len * idim; i++)
		ik[i] = fabsf(ik[i]) < 0x1p-60f ? 0.0f : ik[i];
	/* the keys in "pages" laid out in reverse order, a block's keys 48
	 * bytes into its page: the op reads them where they lie */
	size_t pb = (size_t)block * idim * 4 + 48, nb = (size_t)len / block;
	unsigned char *hp = malloc(nb * pb), *dpg;
	void **pages = malloc(nb * sizeof(void *));
	for (size_t b = 0; b < nb; b++)
		memcpy(hp + (nb - 1 - b) * pb + 48, ik + b * block * idim, (size_t)block * idim * 4);
	dpg = up(hp, nb * pb);
	for (size_t b = 0; b < nb; b++)
		pages[b] = dpg + (nb - 1 - b) * pb;
	float *diq = up(iq, (size_t)n * kvh * idim * 4);
	int lists[4 * 2 * 8], nls[8], want[8];
	assert_int_equal(eng_cuda_index_select(lists, nls, nlist, diq, pages, (int)nb, 48, n, kvh, idim, pos, block, topk,
					       local), 0);
	for (int i = 0; i < n; i++)
		for (int g = 0; g < kvh; g++) {
			int k = choose(iq + ((size_t)i * kvh + g) * idim, ik, idim, pos[i], block, topk, local, nlist, want);
			assert_int_equal(nls[i * kvh + g], k);
			assert_memory_equal(lists + (i * kvh + g) * nlist, want, (size_t)k * sizeof(int));
		}
	printf("cuda index_select: %d rows x %d heads, lists equal to the definition\n", n, kvh);
	free(ik), free(iq), free(hp), free(pages), eng_cuda_free(dpg), eng_cuda_free(diq);
}

static void split_decode_equals_direct_attention(void **st)
{
	(void)st;
	int n = 3, nh = 8, kvh = 2, hd = 128, block = 64, nlist = 16;
	long pos[3] = {63, 1000, 8191}, len = 8192;
	float *k = rand_vec((size_t)len * kvh * hd, 1.0f), *v = rand_vec((size_t)len * kvh * hd, 1.0f),
	      *q = rand_vec((size_t)n * nh * hd, 1.0f);
	int lists[3 * 2 * 16], nls[6];
	for (int r = 0; r < n; r++)
		for (int g = 0; g < kvh; g++) { /* every third block up to the own one, and the own one */
			int c = 0;
			long cur = pos[r] / block;
			for (long b = 0; b <= cur && c < nlist - 1; b += 3)
				lists[(r * kvh + g) * nlist + c++] = (int)b;
			if (lists[(r * kvh + g) * nlist + c - 1] != cur)
				lists[(r * kvh + g) * nlist + c++] = (int)cur;
			nls[r * kvh + g] = g == 1 && r == 1 ? -1 : c; /* one dense: every block */
		}
	float *want = calloc((size_t)n * nh * hd, 4);
	for (int r = 0; r < n; r++)
		for (int h = 0; h < nh; h++) {
			int g = h / (nh / kvh), c = nls[r * kvh + g];
			long nb = c < 0 ? pos[r] / block + 1 : c;
			double m = -INFINITY, l = 0, *acc = calloc((size_t)hd, sizeof(double));
			for (long e = 0; e < nb; e++) {
				long b = c < 0 ? e : lists[(r * kvh + g) * nlist + e];
				for (long t = b * block; t < b * block + block && t <= pos[r]; t++) {
					double s = 0;
					for (int d = 0; d < hd; d++)
						s += (double)q[((size_t)r * nh + h) * hd + d] * k[((size_t)t * kvh + g) * hd + d];
					s /= sqrt((double)hd);
					double mn = fmax(m, s), ca = exp(m - mn), p = exp(s - mn);
					l = l * ca + p;
					for (int d = 0; d < hd; d++)
						acc[d] = acc[d] * ca + p * v[((size_t)t * kvh + g) * hd + d];
					m = mn;
				}
			}
			for (int d = 0; d < hd; d++)
				want[((size_t)r * nh + h) * hd + d] = (float)(acc[d] / l);
			free(acc);
		}
	float *dk = up(k, (size_t)len * kvh * hd * 4), *dv = up(v, (size_t)len * kvh * hd * 4),
	      *dq = up(q, (size_t)n * nh * hd * 4), *dout = eng_cuda_malloc((size_t)n * nh * hd * 4);
	static const int targets[] = {1, 6, 64, 1000};
	for (int t = 0; t < 4; t++) {
		assert_int_equal(eng_cuda_sparse_decode(dout, dq, dk, dv, n, nh, kvh, hd, pos, block, lists, nls, nlist,
		                                        targets[t], 0),
		                 0);
		float *got = down(dout, (size_t)n * nh * hd);
		char name[64];
		snprintf(name, sizeof name, "sparse_decode target=%d", targets[t]);
		report(name, nerr(got, want, (size_t)n * nh * hd), 1e-5);
		free(got);
	}
	free(k), free(v), free(q), free(want);
	eng_cuda_free(dk), eng_cuda_free(dv), eng_cuda_free(dq), eng_cuda_free(dout);
}

/* Keys and values into device page copies, byte for byte what the host
 * stores (kv_store_def.h, eng_cpu_kv_store's conversions and sums) in
 * f32, f16 and bf16: rows of three pages in an interleaved order (a
 * page's sums take its rows in the batch's order), values that round to
 * a tie, overflow a half, fall to a subnormal or are NaN and infinity;
 * then the same table again (its upload skipped) and other slots (its
 * upload made). */
static void kv_store_equals_the_host_store(void **st)
{
	(void)st;
	const int kd = 80, block = 8, n = 9;
	const size_t page_bytes = 4096 * 4;
	const float special[] = {NAN, INFINITY, -INFINITY, 70000.0f, 65519.0f, 1e-6f, -3e-8f, 1.0f + 1.0f / 512,
				 1.0f + 3.0f / 512, 0.0f, -0.0f};
	for (int dt = ENG_F32; dt <= ENG_BF16; dt++) {
		size_t es = eng_dtype_size((eng_dtype)dt), kbase = 256, vbase = kbase + (size_t)block * kd * es,
		       sbase = vbase + (size_t)block * kd * es;
		unsigned char *host[3], *dpage[3];
		void *hp[9], *dp[9];
		for (int g = 0; g < 3; g++) {
			host[g] = malloc(page_bytes);
			for (size_t b = 0; b < page_bytes; b++)
				host[g][b] = (unsigned char)(b * 131 + (size_t)g);
			float *sum = (float *)(host[g] + sbase);
			for (int j = 0; j < kd; j++)
				sum[j] = rnd();
			dpage[g] = up(host[g], page_bytes);
		}
		int which[9] = {0, 1, 0, 2, 0, 1, 2, 2, 0}, slot[9] = {0, 0, 1, 0, 2, 1, 1, 2, 3};
		for (int round = 0; round < 3; round++) {
			if (round == 2)
				for (int i = 0; i < n; i++)
					slot[i] += 4; /* other slots: a new table */
			for (int i = 0; i < n; i++)
				hp[i] = host[which[i]], dp[i] = dpage[which[i]];
			float *k = rand_vec((size_t)n * kd, 4.0f), *v = rand_vec((size_t)n * kd, 4.0f);
			for (size_t e = 0; e < sizeof special / sizeof special[0]; e++)
				k[e * 7] = special[e], v[e * 5 + 3] = special[e];
			float *dk = up(k, (size_t)n * kd * 4), *dv = up(v, (size_t)n * kd * 4);
			eng_cuda_counts c0, c1;
			eng_cuda_counts_get(&c0);
			assert_int_equal(eng_cuda_kv_store(dp, slot, n, dk, dv, kd, dt, kbase, vbase, sbase), 0);
			eng_cuda_counts_get(&c1);
			kv_store_def(hp, slot, n, k, v, kd, dt, kbase, vbase, sbase);
			assert_int_equal(c1.skipped - c0.skipped, round == 1 ? 1 : 0);
			assert_int_equal(eng_cuda_sync(), 0);
			for (int g = 0; g < 3; g++) {
				unsigned char *got = malloc(page_bytes);
				assert_int_equal(eng_cuda_download(got, dpage[g], page_bytes), 0);
				/* sums: bit for bit, but a NaN is any NaN (a GPU's add gives
				 * the canonical one, x86 keeps the operand's payload) */
				const float *gs = (const float *)(got + sbase), *hs = (const float *)(host[g] + sbase);
				for (int j = 0; j < kd; j++)
					if (!(isnan(gs[j]) && isnan(hs[j])) && memcmp(&gs[j], &hs[j], 4))
						fail_msg("kv store, dtype %d, round %d: page %d, sum %d: %g, the host's %g", dt, round,
							 g, j, gs[j], hs[j]);
				if (memcmp(got, host[g], sbase) ||
				    memcmp(got + sbase + kd * 4, host[g] + sbase + kd * 4, page_bytes - sbase - kd * 4))
					fail_msg("kv store, dtype %d, round %d: page %d differs from the host's store", dt, round, g);
				free(got);
			}
			free(k), free(v), eng_cuda_free(dk), eng_cuda_free(dv);
		}
		for (int g = 0; g < 3; g++)
			free(host[g]), eng_cuda_free(dpage[g]);
		report(dt == ENG_F32 ? "kv store f32" : dt == ENG_F16 ? "kv store f16" : "kv store bf16", 0, 0);
	}
	/* index keys: flushed below 2^-60 as eng_index_store flushes them,
	 * each into its page's slot at the layer's offset, nothing else */
	{
		const int idim = 40, rows = 4;
		const size_t pb = 8192, off = 1040;
		unsigned char *host = malloc(2 * pb), *got = malloc(2 * pb);
		for (size_t b = 0; b < 2 * pb; b++)
			host[b] = (unsigned char)(b * 7);
		unsigned char *dp = up(host, 2 * pb);
		void *page[4] = {dp, dp + pb, dp, dp + pb};
		int slot[4] = {0, 3, 5, 1};
		float *ik = rand_vec((size_t)rows * idim, 2.0f);
		ik[1] = 0x1p-61f, ik[2] = -0x1p-61f, ik[3] = 0x1p-60f, ik[4] = -0x1p-60f, ik[5] = 1e-30f, ik[6] = 0x1p-126f;
		float *dik = up(ik, sizeof(float) * rows * idim);
		assert_int_equal(eng_cuda_index_store(page, slot, rows, dik, idim, off), 0);
		for (int i = 0; i < rows; i++) {
			float *dst = (float *)(host + (i % 2) * pb + off) + (size_t)slot[i] * idim;
			for (int j = 0; j < idim; j++) {
				float x = ik[i * idim + j];
				dst[j] = fabsf(x) < 0x1p-60f ? 0.0f : x;
			}
		}
		assert_int_equal(eng_cuda_sync(), 0);
		assert_int_equal(eng_cuda_download(got, dp, 2 * pb), 0);
		if (memcmp(got, host, 2 * pb))
			fail_msg("index store: the pages differ from the host's store");
		report("index store (flushed)", 0, 0);
		free(host), free(got), free(ik), eng_cuda_free(dp), eng_cuda_free(dik);
	}
}

/* An MoE decode's ops: the routing's choice equal to eng_moe_route's in
 * ascending expert order (its weights within the device's exp), the GEMV
 * over (row, expert) pairs giving each pair the bits of the plain GEMV of
 * its expert's weight on its row (f32, bf16 and Q8_0 experts, rows of any
 * length), the mixing as the host's loop of additions, and the shared
 * expert's gated add. */
static void moe_ops_match_the_host(void **st)
{
	(void)st;
	enum { N = 3, E = 40, K = 6 };
	float *lg = rand_vec((size_t)N * E, 4.0f), *bias = rand_vec(E, 0.5f);
	lg[3] = lg[5]; /* a tie: the lower expert first */
	float *dlg = up(lg, sizeof(float) * N * E), *dbias = up(bias, sizeof(float) * E);
	int *dsel = eng_cuda_malloc(sizeof(int) * N * K);
	float *dw = eng_cuda_malloc(sizeof(float) * N * K);
	eng_config c;
	memset(&c, 0, sizeof c);
	c.experts = E, c.top_k = K;
	for (int kind = 0; kind < 3; kind++) {
		c.sigmoid_router = kind == 2, c.norm_topk = kind == 1;
		assert_int_equal(eng_cuda_moe_route(dsel, dw, dlg, N, E, K, kind, kind == 2 ? dbias : NULL, 0.75f), 0);
		int sel[N * K], want[K];
		float w[N * K], ww[K];
		assert_int_equal(eng_cuda_sync(), 0);
		assert_int_equal(eng_cuda_download(sel, dsel, sizeof sel), 0);
		assert_int_equal(eng_cuda_download(w, dw, sizeof w), 0);
		double worst = 0;
		for (int i = 0; i < N; i++) {
			eng_moe_route(&c, lg + (size_t)i * E, kind == 2 ? bias : NULL, want, ww);
			for (int k = 0; k < K; k++) { /* the host's choice, found in the device's ascending list */
				int at = -1;
				for (int j = 0; j < K; j++)
					at = sel[i * K + j] == want[k] ? j : at;
				if (at < 0)
					fail_msg("moe route kind %d, row %d: expert %d not chosen on the device", kind, i, want[k]);
				double e = fabs(w[i * K + at] - ww[k] * 0.75f) / fabs(ww[k] * 0.75f);
				worst = e > worst ? e : worst;
			}
			for (int k = 1; k < K; k++)
				assert_true(sel[i * K + k - 1] < sel[i * K + k]);
		}
		report(kind == 0 ? "moe route softmax" : kind == 1 ? "moe route softmax, renormalised" : "moe route sigmoid",
		       worst, 1e-6);
	}
	/* the pairs' GEMV: expert e = sel[j], x row j / K */
	const int dts[3] = {ENG_F32, ENG_BF16, ENG_Q8_0}, rows = 72, colss[3] = {128, 100, 256};
	int hsel[N * K];
	for (int j = 0; j < N * K; j++)
		hsel[j] = (j * 7 + 3) % 5;
	int *dps = up(hsel, sizeof hsel);
	for (int d = 0; d < 3; d++) {
		int dt = dts[d], cols = colss[d];
		void *wdev[5], **dtab;
		for (int e = 0; e < 5; e++) {
			float *w = NULL;
			if (dt == ENG_Q8_0) {
				w = rand_vec((size_t)rows * cols, 1.0f);
				size_t b = eng_dtype_bytes(ENG_Q8_0, (size_t)rows * cols);
				void *q = malloc(b);
				eng_ggml_quantize(q, w, eng_dtype_ggml(ENG_Q8_0), (size_t)rows * cols);
				wdev[e] = up(q, b);
				free(q);
			} else {
				wdev[e] = weights_up(dt, rows, cols, &w);
			}
			free(w);
		}
		dtab = up(wdev, sizeof wdev);
		float *x = rand_vec((size_t)N * cols, 1.0f), *dx = up(x, sizeof(float) * N * cols);
		float *dy = eng_cuda_malloc(sizeof(float) * N * K * rows), *d1 = eng_cuda_malloc(sizeof(float) * rows);
		assert_int_equal(eng_cuda_gemv_sel(dy, dx, K, dps, N * K, dtab, dt, rows, cols), 0);
		float *got = down(dy, (size_t)N * K * rows);
		for (int j = 0; j < N * K; j++) {
			int rc = dt == ENG_Q8_0 ? eng_cuda_gemv_q(d1, dx + (size_t)(j / K) * cols, 1, wdev[hsel[j]], dt, rows, cols)
						: eng_cuda_gemv(d1, dx + (size_t)(j / K) * cols, 1, wdev[hsel[j]], dt, rows, cols);
			assert_int_equal(rc, 0);
			float *one = down(d1, rows);
			if (memcmp(one, got + (size_t)j * rows, sizeof(float) * rows))
				fail_msg("gemv_sel dtype %d, pair %d: not the GEMV's bits of its expert (%g vs %g)", dt, j,
					 got[(size_t)j * rows], one[0]);
			free(one);
		}
		report(dt == ENG_F32 ? "gemv over pairs f32" : dt == ENG_BF16 ? "gemv over pairs bf16, rows of 100"
									    : "gemv over pairs q8_0", 0, 0);
		free(got), free(x);
		eng_cuda_free(dx), eng_cuda_free(dy), eng_cuda_free(d1), eng_cuda_free(dtab);
		for (int e = 0; e < 5; e++)
			eng_cuda_free(wdev[e]);
	}
	/* mixing: x[i] += w[i, k] * eo[i * K + k], k in order */
	int H = 96;
	float *x = rand_vec((size_t)N * H, 1.0f), *eo = rand_vec((size_t)N * K * H, 1.0f), *w = rand_vec(N * K, 1.0f);
	float *dx = up(x, sizeof(float) * N * H), *deo = up(eo, sizeof(float) * N * K * H), *dmw = up(w, sizeof(float) * N * K);
	assert_int_equal(eng_cuda_moe_mix(dx, deo, dmw, N, K, H), 0);
	for (int i = 0; i < N; i++)
		for (int k = 0; k < K; k++)
			for (int j = 0; j < H; j++)
				x[i * H + j] += w[i * K + k] * eo[((size_t)i * K + k) * H + j];
	float *got = down(dx, (size_t)N * H);
	report("moe mix", nerr(got, x, (size_t)N * H), 1e-6);
	free(got);
	/* the shared expert's gated add: x[i] += sigmoid(g[i]) * eo[i] */
	float *gv = rand_vec(N, 6.0f), *dg = up(gv, sizeof(float) * N);
	assert_int_equal(eng_cuda_gate_add(dx, deo, dg, N, H), 0);
	for (int i = 0; i < N; i++) {
		float a = (float)(1.0 / (1.0 + exp(-(double)gv[i])));
		for (int j = 0; j < H; j++)
			x[i * H + j] += a * eo[(size_t)i * H + j];
	}
	got = down(dx, (size_t)N * H);
	report("shared expert gate add", nerr(got, x, (size_t)N * H), 1e-6);
	free(got), free(gv), eng_cuda_free(dg);
	free(x), free(eo), free(w), free(lg), free(bias);
	eng_cuda_free(dx), eng_cuda_free(deo), eng_cuda_free(dmw), eng_cuda_free(dlg), eng_cuda_free(dbias);
	eng_cuda_free(dsel), eng_cuda_free(dw), eng_cuda_free(dps);
}

int main(void)
{
	eng_cuda_info info;
	if (eng_cuda_probe(&info)) {
		printf("skipped: %s (the gpu tests need a CUDA device; scripts/gpu-check.sh runs them where there is one)\n",
		       ev_error_msg());
		return 77;
	}
	printf("device: %s, compute %d.%d, %d SMs, %.1f GiB\n", info.name, info.cc_major, info.cc_minor, info.sms,
	       (double)info.mem_bytes / (1 << 30));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gemv_matches_the_dequantized_product),
		cmocka_unit_test(gemm_matches_the_product_of_rounded_rows),
		cmocka_unit_test(block_types_match_the_definition),
		cmocka_unit_test(elementwise_ops_match_the_cpu),
		cmocka_unit_test(indexer_choice_equals_the_definition),
		cmocka_unit_test(split_decode_equals_direct_attention),
		cmocka_unit_test(kv_store_equals_the_host_store),
		cmocka_unit_test(moe_ops_match_the_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
