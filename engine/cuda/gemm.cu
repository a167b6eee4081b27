// engine/cuda/gemm.cu: the prefill GEMM through cuBLASLt (contract in
// engine/cuda/cuda.h). y[n, rows] = x[n, cols] . w^T with the weight in its
// stored type: f32 weights multiply f32 rows (CUBLAS_COMPUTE_32F, no TF32:
// every product and sum in f32); f16 and bf16 weights multiply the rows
// rounded to the same type (to nearest, ties to even; the tensor cores take
// both operands in one type), accumulated in f32, written as f32.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "base/base.h"
#include "engine/cuda/cuda.h"
}

#include "engine/cuda/cuda_int.h"

#define GEMM_WORKSPACE (32u << 20)

static cublasLtHandle_t g_lt;
static void *g_ws;

// cuBLASLt's entry points, looked up when the first GEMM runs (a process
// that never runs one never maps the library).
#define LT_FUNCS(X)                                                                                                    \
	X(cublasLtCreate) X(cublasLtGetStatusString) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescSetAttribute)      \
	X(cublasLtMatmulDescDestroy) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)                       \
	X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulPreferenceDestroy)   \
	X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
#define LT_PTR(f) static decltype(&f) p_##f;
LT_FUNCS(LT_PTR)

static int lt_open(void)
{
	static void *lib;
	if (lib)
		return 0;
	char name[64];
	snprintf(name, sizeof name, "libcublasLt.so.%d", CUDART_VERSION / 1000);
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return ev_error_set(EV_E_UNSUPPORTED, "cuda gemm: cuBLASLt (%s) could not be opened: %s", name, dlerror());
#define LT_SYM(f)                                                                                                     \
	if (!(p_##f = (decltype(&f))dlsym(h, #f))) {                                                                  \
		dlclose(h);                                                                                           \
		return ev_error_set(EV_E_UNSUPPORTED, "cuda gemm: %s has no %s", name, #f);                          \
	}
	LT_FUNCS(LT_SYM)
	lib = h;
	return 0;
}

static int lt_check(cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	return ev_error_set(s == CUBLAS_STATUS_ALLOC_FAILED ? EV_E_NOMEM
	                    : s == CUBLAS_STATUS_NOT_SUPPORTED ? EV_E_UNSUPPORTED
	                                                       : EV_E_IO,
	                    "cublasLt: %s: %s", what, p_cublasLtGetStatusString(s));
}

__global__ void round_rows_kernel(void *dst, const float *x, size_t n, int dtype)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	// the host's roundings (engine/dtype.c), as the KV store takes them
	((uint16_t *)dst)[i] = dtype == DT_BF16 ? f32_to_bf16_bits(x[i]) : f32_to_f16_bits(x[i]);
}

extern "C" int eng_cuda_gemm(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	if (n < 1 || rows < 1 || cols < 1 || (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16))
		return ev_error_set(EV_E_INVALID, "cuda gemm: n %d, [%d, %d] of dtype %d (f32, f16, bf16)", n, rows, cols,
		                    dtype);
	int rc = lt_open();
	if (rc)
		return rc;
	if (!g_lt && (rc = lt_check(p_cublasLtCreate(&g_lt), "create")))
		return rc;
	if (!g_ws && !(g_ws = eng_cuda_malloc(GEMM_WORKSPACE)))
		return ev_error_set(EV_E_NOMEM, "cuda gemm: out of device memory for the workspace");
	cudaDataType_t t = dtype == DT_F32 ? CUDA_R_32F : dtype == DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
	const void *b = d_x;
	if (dtype != DT_F32) { // the rows in the weight's type
		size_t total = (size_t)n * cols;
		void *xs = eng_cuda_scratch(6, total * 2);
		if (!xs)
			return ev_error_set(EV_E_NOMEM, "cuda gemm: out of device memory for %d rows", n);
		round_rows_kernel<<<(unsigned)((total + 255) / 256), 256>>>(xs, d_x, total, dtype);
		if ((rc = launch_ok("gemm: rounding the rows")))
			return rc;
		b = xs;
	}
	// Column-major as cuBLAS sees it: w (row-major [rows, cols]) is A =
	// [cols, rows] with ld cols, taken transposed; x is B = [cols, n]; y is
	// C = [rows, n] with ld rows.
	cublasLtMatmulDesc_t op = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
	cublasLtMatmulPreference_t pref = NULL;
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	uint64_t ws = GEMM_WORKSPACE;
	cublasLtMatmulHeuristicResult_t heur;
	int found = 0;
	float alpha = 1.0f, beta = 0.0f;
	if (!(rc = lt_check(p_cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc")) &&
	    !(rc = lt_check(p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa")) &&
	    !(rc = lt_check(p_cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb")) &&
	    !(rc = lt_check(p_cublasLtMatrixLayoutCreate(&la, t, (uint64_t)cols, (uint64_t)rows, (int64_t)cols), "layout a")) &&
	    !(rc = lt_check(p_cublasLtMatrixLayoutCreate(&lb, t, (uint64_t)cols, (uint64_t)n, (int64_t)cols), "layout b")) &&
	    !(rc = lt_check(p_cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)rows, (uint64_t)n, (int64_t)rows),
	                    "layout c")) &&
	    !(rc = lt_check(p_cublasLtMatmulPreferenceCreate(&pref), "preference")) &&
	    !(rc = lt_check(p_cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
	                                                         sizeof ws),
	                    "workspace")) &&
	    !(rc = lt_check(p_cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, lc, lc, pref, 1, &heur, &found), "heuristic"))) {
		if (!found)
			rc = ev_error_set(EV_E_UNSUPPORTED, "cublasLt: no algorithm for [%d, %d] x %d rows of dtype %d", rows,
			                  cols, n, dtype);
		else
			rc = lt_check(p_cublasLtMatmul(g_lt, op, &alpha, d_w, la, b, lb, &beta, d_y, lc, d_y, lc, &heur.algo, g_ws,
			                             GEMM_WORKSPACE, 0),
			              "matmul");
	}
	if (pref)
		p_cublasLtMatmulPreferenceDestroy(pref);
	if (lc)
		p_cublasLtMatrixLayoutDestroy(lc);
	if (lb)
		p_cublasLtMatrixLayoutDestroy(lb);
	if (la)
		p_cublasLtMatrixLayoutDestroy(la);
	if (op)
		p_cublasLtMatmulDescDestroy(op);
	return rc;
}

typedef struct {
	float *y, *x;
	void *w;
	int n, dtype, rows, cols;
} gemm_job;

static int gemm_once(void *ctx)
{
	gemm_job *j = (gemm_job *)ctx;
	return eng_cuda_gemm(j->y, j->x, j->n, j->w, j->dtype, j->rows, j->cols);
}

extern "C" int eng_cuda_gemm_tflops(double *tflops, double *us, int rows, int cols, int dtype, int n, int reps)
{
	size_t esz = dtype == DT_F32 ? 4 : 2, wbytes = (size_t)rows * cols * esz;
	gemm_job j = {(float *)eng_cuda_malloc((size_t)n * rows * sizeof(float)),
	              (float *)eng_cuda_malloc((size_t)n * cols * sizeof(float)), eng_cuda_malloc(wbytes), n, dtype, rows,
	              cols};
	int rc = j.w && j.x && j.y ? 0 : ev_error_set(EV_E_NOMEM, "cuda: a [%d, %d] weight and %d rows", rows, cols, n);
	float best = 0;
	if (!rc) { // small non-zero values: 0x3c3c is about 0.0115 in bf16, 1.06 in f16
		cudaMemset(j.w, 0x3c, wbytes);
		cudaMemset(j.x, 0x3c, (size_t)n * cols * sizeof(float));
		rc = eng_cuda_time_best(&best, reps, gemm_once, &j);
	}
	*tflops = rc ? 0 : 2.0 * rows * cols * (double)n / (best * 1e-3) / 1e12;
	*us = rc ? 0 : best * 1e3;
	eng_cuda_free(j.w), eng_cuda_free(j.x), eng_cuda_free(j.y);
	return rc;
}
