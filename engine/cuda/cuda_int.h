// engine/cuda/cuda_int.h: what the .cu files share.
#ifndef ENG_CUDA_INT_H
#define ENG_CUDA_INT_H

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

// eng_dtype's numbers (engine/backend.h) of the types kept as floats
enum { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 };

__device__ __forceinline__ float bf16_to_f32(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
	return __half2float(__ushort_as_half(h));
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

// 0, or the project's error for a failed CUDA call (what names the call).
int eng_cuda_check(cudaError_t e, const char *what);

// A scratch device buffer that grows (freed at exit by the driver). Slots:
// 0-2 the ops of ops.cu, 3 gather, 4 the paged attention's tables, 5 scatter,
// 6 the GEMM's rounded rows, 7 the paged attention's partial states.
#define ENG_CUDA_SCRATCH_SLOTS 8
void *eng_cuda_scratch(int which, size_t bytes);

// The fastest of reps timed runs of run(ctx) after one untimed warm-up, in
// milliseconds between events on the default stream (0 or run's error).
int eng_cuda_time_best(float *best_ms, int reps, int (*run)(void *ctx), void *ctx);

#endif
