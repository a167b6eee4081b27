// engine/cuda/quant.cu: weights of ggml's block types (Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ4_NL, Q2_K, Q3_K, IQ2_XXS, IQ2_XS, IQ2_S; layouts in
// engine/gguf/README.md) read in
// place on the device: the decode GEMV over them, and their dequantization
// to f32 for the prefill GEMM. Every element is the value the format's
// definition gives (engine/gguf/quant.c's eng_ggml_dequantize), computed
// with the same roundings in the same order (no fused multiply-add), so a
// weight means the same on the device as on the host.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdint.h>

extern "C" {
#include "base/base.h"
#include "engine/cuda/cuda.h"
// the IQ2 grids (engine/gguf/quant.h), copied to the device once
extern const uint16_t eng_ggml_iq2xxs_grid[256];
extern const uint16_t eng_ggml_iq2xs_grid[512];
extern const uint16_t eng_ggml_iq2s_grid[1024];
}

#include "engine/cuda/cuda_int.h"

#define QG_WARPS 8
#define QG_MAX_N 8

template <int DT> struct qt;
template <> struct qt<QT_Q8_0> { enum { elems = 32, bytes = 34 }; };
template <> struct qt<QT_Q4_0> { enum { elems = 32, bytes = 18 }; };
template <> struct qt<QT_Q4_1> { enum { elems = 32, bytes = 20 }; };
template <> struct qt<QT_Q5_0> { enum { elems = 32, bytes = 22 }; };
template <> struct qt<QT_Q5_1> { enum { elems = 32, bytes = 24 }; };
template <> struct qt<QT_Q4_K> { enum { elems = 256, bytes = 144 }; };
template <> struct qt<QT_Q5_K> { enum { elems = 256, bytes = 176 }; };
template <> struct qt<QT_Q6_K> { enum { elems = 256, bytes = 210 }; };
template <> struct qt<QT_IQ4_XS> { enum { elems = 256, bytes = 136 }; };
template <> struct qt<QT_IQ4_NL> { enum { elems = 32, bytes = 18 }; };
template <> struct qt<QT_Q2_K> { enum { elems = 256, bytes = 84 }; };
template <> struct qt<QT_Q3_K> { enum { elems = 256, bytes = 110 }; };
template <> struct qt<QT_IQ2_XXS> { enum { elems = 256, bytes = 66 }; };
template <> struct qt<QT_IQ2_XS> { enum { elems = 256, bytes = 74 }; };
template <> struct qt<QT_IQ2_S> { enum { elems = 256, bytes = 82 }; };

// The IQ2 grids' 16-bit codes (IQ2_XXS's at 0, IQ2_XS's at 256, IQ2_S's at
// 768): entry i's element e the magnitude 8, 25 or 43 of its bits 2e, 2e + 1
__constant__ uint16_t iq2_grid[256 + 512 + 1024];

static int iq2_grids_up(void)
{
	static bool up = false;
	if (up)
		return 0;
	cudaError_t e = cudaMemcpyToSymbol(iq2_grid, eng_ggml_iq2xxs_grid, 256 * 2, 0);
	if (e == cudaSuccess)
		e = cudaMemcpyToSymbol(iq2_grid, eng_ggml_iq2xs_grid, 512 * 2, 256 * 2);
	if (e == cudaSuccess)
		e = cudaMemcpyToSymbol(iq2_grid, eng_ggml_iq2s_grid, 1024 * 2, 768 * 2);
	if (e != cudaSuccess)
		return ev_error_set(EV_E_IO, "cuda: the IQ2 grids not copied: %s", cudaGetErrorString(e));
	up = true;
	return 0;
}

// IQ4_NL's sixteen values (engine/gguf/quant.c's eng_ggml_iq4nl_values), which IQ4_NL's and IQ4_XS's nibbles index
__constant__ int8_t iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

__device__ __forceinline__ float h2f(const uint8_t *p)
{
	return __half2float(__ushort_as_half((uint16_t)(p[0] | (p[1] << 8))));
}

// The 6-bit scale and min j of a Q4_K / Q5_K super-block (scale_min).
__device__ __forceinline__ void scale_min(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// A unit is 32 consecutive elements: a whole block of the 32-element
// types, an eighth of a K-quant super-block. unit<DT>(b, j, v) writes the
// 32 values of unit j of the block at b.
template <int DT> __device__ __forceinline__ void unit(const uint8_t *b, int j, float v[32])
{
	if (DT == QT_Q8_0) {
		float d = h2f(b);
#pragma unroll
		for (int e = 0; e < 32; e++)
			v[e] = __fmul_rn((float)(int8_t)b[2 + e], d);
	} else if (DT == QT_Q4_0) {
		float d = h2f(b);
#pragma unroll
		for (int e = 0; e < 16; e++) {
			v[e] = __fmul_rn((float)((b[2 + e] & 0xF) - 8), d);
			v[e + 16] = __fmul_rn((float)((b[2 + e] >> 4) - 8), d);
		}
	} else if (DT == QT_Q4_1) {
		float d = h2f(b), m = h2f(b + 2);
#pragma unroll
		for (int e = 0; e < 16; e++) {
			v[e] = __fadd_rn(__fmul_rn((float)(b[4 + e] & 0xF), d), m);
			v[e + 16] = __fadd_rn(__fmul_rn((float)(b[4 + e] >> 4), d), m);
		}
	} else if (DT == QT_Q5_0 || DT == QT_Q5_1) {
		const bool one = DT == QT_Q5_1;
		float d = h2f(b), m = one ? h2f(b + 2) : 0.0f;
		const uint8_t *h = b + (one ? 4 : 2), *qs = b + (one ? 8 : 6);
		uint32_t qh = (uint32_t)h[0] | ((uint32_t)h[1] << 8) | ((uint32_t)h[2] << 16) | ((uint32_t)h[3] << 24);
#pragma unroll
		for (int e = 0; e < 16; e++) {
			int lo = (qs[e] & 0xF) | (int)(((qh >> e) & 1) << 4);
			int hi = (qs[e] >> 4) | (int)(((qh >> (e + 16)) & 1) << 4);
			v[e] = one ? __fadd_rn(__fmul_rn((float)lo, d), m) : __fmul_rn((float)(lo - 16), d);
			v[e + 16] = one ? __fadd_rn(__fmul_rn((float)hi, d), m) : __fmul_rn((float)(hi - 16), d);
		}
	} else if (DT == QT_Q4_K || DT == QT_Q5_K) {
		const bool five = DT == QT_Q5_K;
		float d = h2f(b), dmin = h2f(b + 2);
		const uint8_t *sc = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16) + 32 * (j >> 1);
		int s, m;
		scale_min(j, sc, &s, &m);
		float ds = __fmul_rn(d, (float)s), dm = __fmul_rn(dmin, (float)m);
#pragma unroll
		for (int e = 0; e < 32; e++) {
			int nib = (j & 1) ? q[e] >> 4 : q[e] & 0xF;
			if (five)
				nib += ((qh[e] >> j) & 1) << 4;
			v[e] = __fsub_rn(__fmul_rn(ds, (float)nib), dm);
		}
	} else if (DT == QT_Q2_K) { // unit j: bits 2 (j % 4) of its half's 32 bytes; a scale and minimum a 16
		float d = h2f(b + 80), dmin = h2f(b + 82);
		const uint8_t *qs = b + 16 + 32 * (j / 4);
#pragma unroll
		for (int e = 0; e < 32; e++) {
			int s = b[2 * j + e / 16], q = (qs[e] >> (2 * (j & 3))) & 3;
			v[e] = __fsub_rn(__fmul_rn(__fmul_rn(d, (float)(s & 0xF)), (float)q), __fmul_rn(dmin, (float)(s >> 4)));
		}
	} else if (DT == QT_Q3_K) { // unit j: bits 2 (j % 4) of its half's 32 bytes, less 4 where bit j of hmask is clear
		float d = h2f(b + 108);
		const uint8_t *qs = b + 32 + 32 * (j / 4), *sc = b + 96;
#pragma unroll
		for (int e = 0; e < 32; e++) {
			int k = 2 * j + e / 16; // the sub-block of 16 and its signed 6-bit scale (eng_ggml_q3k_scale)
			int s = (((sc[k % 8] >> (k < 8 ? 0 : 4)) & 0xF) | (((sc[8 + k % 4] >> (2 * (k / 4))) & 3) << 4)) - 32;
			int q = ((qs[e] >> (2 * (j & 3))) & 3) - ((b[e] >> j) & 1 ? 0 : 4);
			v[e] = __fmul_rn(__fmul_rn(d, (float)s), (float)q);
		}
	} else if (DT == QT_IQ4_NL) { // d times the table's value of each nibble
		float d = h2f(b);
#pragma unroll
		for (int e = 0; e < 16; e++) {
			v[e] = __fmul_rn(d, (float)iq4_values[b[2 + e] & 0xF]);
			v[e + 16] = __fmul_rn(d, (float)iq4_values[b[2 + e] >> 4]);
		}
	} else if (DT == QT_IQ4_XS) { // d * (unit j's signed 6-bit scale), times the table's value of each nibble
		int ls = (((b[4 + j / 2] >> (4 * (j & 1))) & 0xF) | (((b[2 + j / 4] >> (2 * (j & 3))) & 3) << 4)) - 32;
		float dl = __fmul_rn(h2f(b), (float)ls);
		const uint8_t *qs = b + 8 + 16 * j;
#pragma unroll
		for (int e = 0; e < 16; e++) {
			v[e] = __fmul_rn(dl, (float)iq4_values[qs[e] & 0xF]);
			v[e + 16] = __fmul_rn(dl, (float)iq4_values[qs[e] >> 4]);
		}
	} else if (DT == QT_IQ2_XXS || DT == QT_IQ2_XS || DT == QT_IQ2_S) {
		// unit j: groups of eight 4j .. 4j + 3, each a grid entry and eight signs; each half's
		// scale d (1 + 2 ls) / 8 (IQ2_XXS: one ls a unit)
		float d = h2f(b);
#pragma unroll
		for (int g = 0; g < 4; g++) {
			int idx, sg, ls, off;
			if (DT == QT_IQ2_XXS) {
				const uint8_t *p = b + 2 + 8 * j;
				uint32_t aux = p[4] | (p[5] << 8) | (p[6] << 16) | ((uint32_t)p[7] << 24);
				int s7 = (aux >> (7 * g)) & 127;
				idx = p[g], sg = s7 | ((__popc(s7) & 1) << 7), ls = aux >> 28, off = 0;
			} else if (DT == QT_IQ2_XS) {
				int q = b[2 + 8 * j + 2 * g] | (b[3 + 8 * j + 2 * g] << 8), s7 = q >> 9;
				idx = q & 511, sg = s7 | ((__popc(s7) & 1) << 7), ls = (b[66 + j] >> (4 * (g / 2))) & 15, off = 256;
			} else {
				idx = b[2 + 4 * j + g] | (((b[66 + j] >> (2 * g)) & 3) << 8), sg = b[34 + 4 * j + g];
				ls = (b[74 + j] >> (4 * (g / 2))) & 15, off = 768;
			}
			float sc = __fmul_rn(__fmul_rn(d, (float)(1 + 2 * ls)), 0.125f);
			int code = iq2_grid[off + idx];
#pragma unroll
			for (int e = 0; e < 8; e++) {
				int l = (code >> (2 * e)) & 3, m = l == 0 ? 8 : l == 1 ? 25 : 43;
				v[8 * g + e] = __fmul_rn(sc, (float)((sg >> e) & 1 ? -m : m));
			}
		}
	} else { // Q6_K: unit j is quarter j % 4 of half j / 4
		int h = j >> 2, r = j & 3;
		const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
		const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
		float d = h2f(b + 208);
#pragma unroll
		for (int e = 0; e < 32; e++) {
			int lo = r & 1 ? ql[e + 32] : ql[e];
			int q = ((r & 2 ? lo >> 4 : lo & 0xF) | (((qh[e] >> (2 * r)) & 3) << 4)) - 32;
			v[e] = __fmul_rn(__fmul_rn(d, (float)sc[e / 16 + 2 * r]), (float)q);
		}
	}
}

// One warp a weight row; lane k takes units k, k + 32, ...: each unit's 32
// values against every x row.
template <int DT, int NX>
__global__ void __launch_bounds__(QG_WARPS * 32) gemv_q_kernel(float *y, const float *__restrict__ x, int n,
                                                              const uint8_t *__restrict__ w, int rows, int cols,
                                                              gemv_pick pick)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int row = blockIdx.x * QG_WARPS + warp;
	if (row >= rows)
		return;
	if (NX == 1) // a launch over pairs (eng_cuda_gemv_sel)
		GEMV_PICK(pick, w, x, y, n, rows, cols);
	const int per = qt<DT>::elems / 32; // units a block
	size_t row_bytes = (size_t)(cols / qt<DT>::elems) * qt<DT>::bytes;
	const uint8_t *wr = w + (size_t)row * row_bytes;
	float acc[NX];
#pragma unroll
	for (int b = 0; b < NX; b++)
		acc[b] = 0.0f;
	for (int u = lane; u < cols / 32; u += 32) {
		float v[32];
		unit<DT>(wr + (size_t)(u / per) * qt<DT>::bytes, u % per, v);
#pragma unroll
		for (int b = 0; b < NX; b++) {
			if (b >= n)
				break;
			const float *xb = x + (size_t)b * cols + (size_t)u * 32;
			float s = 0.0f;
#pragma unroll
			for (int e = 0; e < 32; e++)
				s += v[e] * __ldg(xb + e);
			acc[b] += s;
		}
	}
	warp_store_rows(y, acc, n, rows, row, lane);
}

// A thread a unit: its 32 values to f32.
template <int DT> __global__ void dequant_kernel(float *out, const uint8_t *w, size_t units)
{
	size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (u >= units)
		return;
	const int per = qt<DT>::elems / 32;
	float v[32];
	unit<DT>(w + (u / per) * qt<DT>::bytes, (int)(u % per), v);
#pragma unroll
	for (int e = 0; e < 32; e++)
		out[u * 32 + e] = v[e];
}

static_assert(QG_WARPS == GEMV_PICK_WARPS, "a launch over pairs has blocks of GEMV_PICK_WARPS rows");
typedef void (*qkernel)(float *, const float *, int, const uint8_t *, int, int, gemv_pick);
#define QK(N)                                                                                                          \
	{gemv_q_kernel<QT_Q8_0, N>, gemv_q_kernel<QT_Q4_0, N>, gemv_q_kernel<QT_Q4_1, N>, gemv_q_kernel<QT_Q5_0, N>,   \
	 gemv_q_kernel<QT_Q5_1, N>, gemv_q_kernel<QT_Q4_K, N>, gemv_q_kernel<QT_Q5_K, N>, gemv_q_kernel<QT_Q6_K, N>,  \
	 gemv_q_kernel<QT_IQ4_XS, N>, gemv_q_kernel<QT_IQ4_NL, N>, gemv_q_kernel<QT_Q2_K, N>, gemv_q_kernel<QT_Q3_K, N>,  \
	 gemv_q_kernel<QT_IQ2_XXS, N>, gemv_q_kernel<QT_IQ2_XS, N>, gemv_q_kernel<QT_IQ2_S, N>}
// [0]: up to QG_MAX_N x rows a launch; [1]: a launch over pairs
static const qkernel qkernels[2][15] = {QK(QG_MAX_N), QK(1)};
#undef QK

static int block_of(int dtype)
{
	return (dtype >= QT_Q8_0 && dtype <= QT_Q5_1) || dtype == QT_IQ4_NL                 ? 32
	       : (dtype >= QT_Q4_K && dtype <= QT_IQ4_XS) || (dtype >= QT_Q2_K && dtype <= QT_IQ2_S) ? 256
	                                                                       : 0;
}

extern "C" int eng_cuda_gemv_q(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	int B = block_of(dtype);
	if (!B || n < 1 || rows < 1 || cols < B || cols % B)
		return ev_error_set(EV_E_INVALID, "cuda gemv: n %d, [%d, %d] of block type %d (cols a multiple of its block)",
		                    n, rows, cols, dtype);
	int grc = dtype >= QT_IQ2_XXS ? iq2_grids_up() : 0;
	if (grc)
		return grc;
	for (int b0 = 0; b0 < n; b0 += QG_MAX_N) {
		int nb = n - b0 < QG_MAX_N ? n - b0 : QG_MAX_N;
		qkernels[0][dtype - QT_Q8_0]<<<(rows + QG_WARPS - 1) / QG_WARPS, QG_WARPS * 32>>>(
			d_y + (size_t)b0 * rows, d_x + (size_t)b0 * cols, nb, (const uint8_t *)d_w, rows, cols, gemv_pick{});
	}
	return launch_ok("gemv (block type)");
}

int eng_cuda_gemv_q_pick(float *d_y, const float *d_x, int rows, int cols, int dtype, dim3 grid, gemv_pick pick)
{
	int B = block_of(dtype);
	if (!B || cols < B || cols % B)
		return ev_error_set(EV_E_INVALID, "cuda gemv_sel: [%d, %d] of block type %d (cols a multiple of its block)", rows,
		                    cols, dtype);
	int grc = dtype >= QT_IQ2_XXS ? iq2_grids_up() : 0;
	if (grc)
		return grc;
	qkernels[1][dtype - QT_Q8_0]<<<grid, QG_WARPS * 32>>>(d_y, d_x, 1, NULL, rows, cols, pick);
	return launch_ok("gemv_sel (block type)");
}

extern "C" int eng_cuda_dequantize(float *d_out, const void *d_w, int dtype, size_t n)
{
	int B = block_of(dtype);
	if (!B || !n || n % B)
		return ev_error_set(EV_E_INVALID, "cuda dequantize: %zu elements of block type %d", n, dtype);
	int grc = dtype >= QT_IQ2_XXS ? iq2_grids_up() : 0;
	if (grc)
		return grc;
	size_t units = n / 32;
	typedef void (*kernel)(float *, const uint8_t *, size_t);
	static const kernel ks[] = {dequant_kernel<QT_Q8_0>, dequant_kernel<QT_Q4_0>, dequant_kernel<QT_Q4_1>,
	                            dequant_kernel<QT_Q5_0>, dequant_kernel<QT_Q5_1>, dequant_kernel<QT_Q4_K>,
	                            dequant_kernel<QT_Q5_K>, dequant_kernel<QT_Q6_K>, dequant_kernel<QT_IQ4_XS>,
	                            dequant_kernel<QT_IQ4_NL>, dequant_kernel<QT_Q2_K>, dequant_kernel<QT_Q3_K>,
	                            dequant_kernel<QT_IQ2_XXS>, dequant_kernel<QT_IQ2_XS>, dequant_kernel<QT_IQ2_S>};
	ks[dtype - QT_Q8_0]<<<(unsigned)((units + 127) / 128), 128>>>(d_out, (const uint8_t *)d_w, units);
	return launch_ok("dequantize");
}
