// engine/cuda/cuda_int.h: what the .cu files share.
#ifndef ENG_CUDA_INT_H
#define ENG_CUDA_INT_H

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// eng_dtype's numbers (engine/backend.h) of the types kept as floats, and
// of the block types (quant.cu)
enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 };
enum { QT_Q8_0 = 3, QT_Q4_0 = 4, QT_Q4_1 = 5, QT_Q5_0 = 6, QT_Q5_1 = 7, QT_Q4_K = 8, QT_Q5_K = 9, QT_Q6_K = 10,
       QT_IQ4_XS = 11, QT_IQ4_NL = 12, QT_Q2_K = 13, QT_Q3_K = 14, QT_IQ2_XXS = 15, QT_IQ2_XS = 16, QT_IQ2_S = 17 };

__device__ __forceinline__ float bf16_to_f32(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
	return __half2float(__ushort_as_half(h));
}

// f32 to bf16 and f16 bits exactly as engine/dtype.c rounds them (to
// nearest even; NaN kept quiet, overflow to infinity), so a store on the
// device holds the host's bytes.
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f)
{
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f)
{
	uint32_t u = __float_as_uint(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffffu;
	if (a >= 0x7f800000u)
		return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);
	if (a >= 0x477ff000u)
		return sign | 0x7c00;
	if (a < 0x38800000u) // subnormal or zero: a / 2^-24, nearest even
		return sign | (uint16_t)__float2int_rn(__uint_as_float(a) * 16777216.0f);
	uint32_t r = a + 0xfffu + ((a >> 13) & 1);
	return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

// Element i of an f32, f16 or bf16 array.
__device__ __forceinline__ float dev_elem(const void *p, size_t i, int dtype)
{
	return dtype == DT_F32    ? ((const float *)p)[i]
	       : dtype == DT_BF16 ? bf16_to_f32(((const uint16_t *)p)[i])
	                          : f16_to_f32(((const uint16_t *)p)[i]);
}

// The sum of v over the warp's 32 lanes, in every lane (butterfly order).
__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// A GEMV warp's finish: each of the first n lane sums of acc summed over
// the warp, lane 0 storing it at y[b * rows + row].
template <int N>
__device__ __forceinline__ void warp_store_rows(float *y, const float (&acc)[N], int n, int rows, int row, int lane)
{
#pragma unroll
	for (int b = 0; b < N; b++) {
		float s = warp_sum(acc[b]);
		if (lane == 0 && b < n)
			y[(size_t)b * rows + row] = s;
	}
}

// A GEMV launched over pairs: grid (row blocks, pairs / xdiv, xdiv), pair
// j = blockIdx.y * xdiv + blockIdx.z takes the weight wtab[sel[j]], x row
// blockIdx.y and y row j, one row (eng_cuda_gemv_sel; the grid carries the
// x row, a division in the kernel cost a stack frame).
struct gemv_pick {
	const void *const *wtab;
	const int *sel;
};

// Moves a GEMV block of a launch over pairs to its pair: its weight, x
// row, y row and one row. (Fields set one by one: a struct returned from
// a branch cost the kernels a stack frame.)
#define GEMV_PICK(pick, w, x, y, n, rows, cols)                                                                        \
	do {                                                                                                           \
		int j_ = blockIdx.y * gridDim.z + blockIdx.z;                                                          \
		w = (decltype(w))(pick).wtab[(pick).sel[j_]];                                                          \
		x += (size_t)blockIdx.y * (cols);                                                                      \
		y += (size_t)j_ * (rows);                                                                              \
		n = 1;                                                                                                 \
	} while (0)

// (grid as the GEMV's launch over pairs makes it: row blocks of
// GEMV_PICK_WARPS rows)
#define GEMV_PICK_WARPS 8
int eng_cuda_gemv_q_pick(float *d_y, const float *d_x, int rows, int cols, int dtype, dim3 grid, gemv_pick pick);


// 0, or the project's error for a failed CUDA call (what names the call).
int eng_cuda_check(cudaError_t e, const char *what);

// 0, or the error of the kernel launch just made (what names it)
static inline int launch_ok(const char *what)
{
	return eng_cuda_check(cudaGetLastError(), what);
}

// x rounded up to 16 (the offsets of a host table packed for one upload)
static inline size_t align16(size_t x)
{
	return (x + 15) / 16 * 16;
}

// A scratch device buffer that grows (freed at exit by the driver). Slots:
// 0-2 the ops of ops.cu, 3 gather, 4 the paged attention's tables, 5 unused,
// 6 the GEMM's rounded rows, 7 the paged attention's partial states, 8 the
// KV store's table, 9 RoPE's positions, 10 the indexer's positions and pages,
// 11 the index-key store's table.
#define ENG_CUDA_SCRATCH_SLOTS 12
void *eng_cuda_scratch(int which, size_t bytes);

// The device copy of `bytes` host bytes in scratch slot `which`, uploaded
// only when they differ from what the slot last took (a decode step's
// layers hand the same positions and tables to their ops again and again;
// the default stream orders an upload after the kernels before it, so a
// slot is never rewritten under a kernel that reads it). A slot used here
// is used only here. NULL with *rc set on failure.
void *eng_cuda_scratch_upload(int which, const void *host, size_t bytes, int *rc);

// The copies counted by eng_cuda_counts (device.cu)
extern eng_cuda_counts eng_cuda_counters;

// The fastest of reps timed runs of run(ctx) after one untimed warm-up, in
// milliseconds between events on the default stream (0 or run's error).
int eng_cuda_time_best(float *best_ms, int reps, int (*run)(void *ctx), void *ctx);

#endif
