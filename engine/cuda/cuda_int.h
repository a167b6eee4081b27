// engine/cuda/cuda_int.h: what the .cu files share.
#ifndef ENG_CUDA_INT_H
#define ENG_CUDA_INT_H

#include <cuda_runtime.h>

// 0, or the project's error for a failed CUDA call (what names the call).
int eng_cuda_check(cudaError_t e, const char *what);

// A scratch device buffer that grows (freed at exit by the driver). Slots:
// 0-2 the ops of ops.cu, 3 gather, 4 the paged attention's tables, 5 scatter,
// 6 the GEMM's rounded rows, 7 the paged attention's partial states.
#define ENG_CUDA_SCRATCH_SLOTS 8
void *eng_cuda_scratch(int which, size_t bytes);

#endif
