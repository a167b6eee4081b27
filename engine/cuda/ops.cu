// engine/cuda/ops.cu: the decoder's ops and MSA's indexer and sparse
// decode on the device (contracts in engine/cuda/cuda.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "base/base.h"
#include "engine/cuda/cuda.h"
#include "engine/msa_split.h"
}

#include "engine/cuda/cuda_int.h"

#define GEMV_MAX_N 8
#define GEMV_WARPS 8

// The scratch slots; a slot's shadow (what eng_cuda_scratch_upload last
// put there) counts only while `held` says the buffer has not been
// replaced since (a new buffer may come back at the old address).
static void *s_buf[ENG_CUDA_SCRATCH_SLOTS];
static size_t s_cap[ENG_CUDA_SCRATCH_SLOTS];
static unsigned char *s_shadow[ENG_CUDA_SCRATCH_SLOTS];
static size_t s_shadow_cap[ENG_CUDA_SCRATCH_SLOTS], s_shadow_n[ENG_CUDA_SCRATCH_SLOTS];
static bool s_held[ENG_CUDA_SCRATCH_SLOTS];

void *eng_cuda_scratch(int which, size_t bytes)
{
	if (which < 0 || which >= ENG_CUDA_SCRATCH_SLOTS)
		return NULL;
	if (bytes > s_cap[which]) {
		s_held[which] = false;
		if (s_buf[which])
			cudaFree(s_buf[which]);
		s_buf[which] = NULL;
		s_cap[which] = 0;
		if (cudaMalloc(&s_buf[which], bytes) != cudaSuccess) {
			cudaGetLastError();
			return NULL;
		}
		s_cap[which] = bytes;
	}
	return s_buf[which];
}

void *eng_cuda_scratch_upload(int which, const void *host, size_t bytes, int *rc)
{
	void *d = eng_cuda_scratch(which, bytes);
	if (!d) {
		*rc = ev_error_set(EV_E_NOMEM, "cuda: out of device memory for a table of %zu bytes", bytes);
		return NULL;
	}
	if (s_held[which] && s_shadow_n[which] == bytes && !memcmp(s_shadow[which], host, bytes)) {
		*rc = 0;
		eng_cuda_counters.skipped++;
		return d; // the slot holds these bytes already
	}
	s_held[which] = false;
	if ((*rc = eng_cuda_upload(d, host, bytes)))
		return NULL;
	if (bytes > s_shadow_cap[which]) {
		free(s_shadow[which]);
		s_shadow_cap[which] = 0;
		if (!(s_shadow[which] = (unsigned char *)malloc(bytes)))
			return d; // uploaded; the next call uploads again
		s_shadow_cap[which] = bytes;
	}
	memcpy(s_shadow[which], host, bytes);
	s_shadow_n[which] = bytes;
	s_held[which] = true;
	return d;
}

// ---- the decode GEMV ---------------------------------------------------------

// 8 weights from 16 bytes of a 16-bit type.
template <int DT> __device__ __forceinline__ void unpack8(float w[8], uint4 v)
{
	uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint16_t lo = (uint16_t)(u[i] & 0xffff), hi = (uint16_t)(u[i] >> 16);
		w[2 * i] = DT == DT_BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
		w[2 * i + 1] = DT == DT_BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
	}
}

// One warp a weight row: each lane reads 16 bytes at a time along the row
// (coalesced: the warp reads 512 contiguous bytes), multiplies them with
// every x row, and the warp sums at the end. x is read through the cache.
// NX: the most x rows a launch takes (GEMV_MAX_N; 1 for a launch over
// pairs, whose blocks each pick their weight and rows).
template <int DT, int NX>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(float *y, const float *__restrict__ x, int n,
                                                              const void *__restrict__ w, int rows, int cols,
                                                              gemv_pick pick)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int row = blockIdx.x * GEMV_WARPS + warp;
	if (row >= rows)
		return;
	if (NX == 1) // a launch over pairs (eng_cuda_gemv_sel)
		GEMV_PICK(pick, w, x, y, n, rows, cols);
	float acc[NX];
#pragma unroll
	for (int b = 0; b < NX; b++)
		acc[b] = 0.0f;
	if (DT == DT_F32) {
		const float4 *wr = (const float4 *)((const float *)w + (size_t)row * cols);
		for (int c = lane; c < cols / 4; c += 32) {
			float4 v = __ldg(wr + c);
#pragma unroll
			for (int b = 0; b < NX; b++) {
				if (b >= n)
					break;
				float4 xv = __ldg((const float4 *)(x + (size_t)b * cols) + c);
				acc[b] += v.x * xv.x + v.y * xv.y + v.z * xv.z + v.w * xv.w;
			}
		}
	} else {
		// four 16-byte loads a lane in flight before any is used (a row of
		// a ~1B model is only 8 such loads a lane: one at a time leaves the
		// memory system idle between them); the sums in the same order
		const uint4 *wr = (const uint4 *)((const uint16_t *)w + (size_t)row * cols);
		int nc = cols / 8, c = lane;
		for (; c + 96 < nc; c += 128) {
			uint4 v[4] = {__ldg(wr + c), __ldg(wr + c + 32), __ldg(wr + c + 64), __ldg(wr + c + 96)};
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float wv[8];
				unpack8<DT>(wv, v[k]);
#pragma unroll
				for (int b = 0; b < NX; b++) {
					if (b >= n)
						break;
					const float4 *xr = (const float4 *)(x + (size_t)b * cols) + 2 * (c + 32 * k);
					float4 x0 = __ldg(xr), x1 = __ldg(xr + 1);
					acc[b] += wv[0] * x0.x + wv[1] * x0.y + wv[2] * x0.z + wv[3] * x0.w + wv[4] * x1.x +
					          wv[5] * x1.y + wv[6] * x1.z + wv[7] * x1.w;
				}
			}
		}
		for (; c < nc; c += 32) {
			float wv[8];
			unpack8<DT>(wv, __ldg(wr + c));
#pragma unroll
			for (int b = 0; b < NX; b++) {
				if (b >= n)
					break;
				const float4 *xr = (const float4 *)(x + (size_t)b * cols) + 2 * c;
				float4 x0 = __ldg(xr), x1 = __ldg(xr + 1);
				acc[b] += wv[0] * x0.x + wv[1] * x0.y + wv[2] * x0.z + wv[3] * x0.w + wv[4] * x1.x + wv[5] * x1.y +
				          wv[6] * x1.z + wv[7] * x1.w;
			}
		}
	}
	warp_store_rows(y, acc, n, rows, row, lane);
}

// Rows of any length: a warp a weight row, one element a lane at a time
// (rows whose length is not a multiple of 8 miss the 16-byte loads).
template <int DT, int NX>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_any_kernel(float *y, const float *__restrict__ x, int n,
                                                                  const void *__restrict__ w, int rows, int cols,
                                                                  gemv_pick pick)
{
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int row = blockIdx.x * GEMV_WARPS + warp;
	if (row >= rows)
		return;
	if (NX == 1) // a launch over pairs (eng_cuda_gemv_sel)
		GEMV_PICK(pick, w, x, y, n, rows, cols);
	float acc[NX];
#pragma unroll
	for (int b = 0; b < NX; b++)
		acc[b] = 0.0f;
	size_t base = (size_t)row * cols;
	for (int c = lane; c < cols; c += 32) {
		float v = dev_elem(w, base + c, DT);
#pragma unroll
		for (int b = 0; b < NX; b++) {
			if (b >= n)
				break;
			acc[b] += v * __ldg(x + (size_t)b * cols + c);
		}
	}
	warp_store_rows(y, acc, n, rows, row, lane);
}

typedef void (*kernel)(float *, const float *, int, const void *, int, int, gemv_pick);

// 16-byte loads where every row starts on one (cols a multiple of 8),
// one element at a time otherwise; pairs 1: the launch over pairs
static kernel gemv_for(int dtype, int cols, int pairs)
{
	static const kernel vec[2][3] = {
		{gemv_kernel<DT_F32, GEMV_MAX_N>, gemv_kernel<DT_F16, GEMV_MAX_N>, gemv_kernel<DT_BF16, GEMV_MAX_N>},
		{gemv_kernel<DT_F32, 1>, gemv_kernel<DT_F16, 1>, gemv_kernel<DT_BF16, 1>}};
	static const kernel any[2][3] = {
		{gemv_any_kernel<DT_F32, GEMV_MAX_N>, gemv_any_kernel<DT_F16, GEMV_MAX_N>, gemv_any_kernel<DT_BF16, GEMV_MAX_N>},
		{gemv_any_kernel<DT_F32, 1>, gemv_any_kernel<DT_F16, 1>, gemv_any_kernel<DT_BF16, 1>}};
	return (cols % 8 ? any : vec)[pairs][dtype];
}

extern "C" int eng_cuda_gemv(float *d_y, const float *d_x, int n, const void *d_w, int dtype, int rows, int cols)
{
	if (n < 1 || rows < 1 || cols < 1 || (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16))
		return ev_error_set(EV_E_INVALID, "cuda gemv: n %d, [%d, %d] of dtype %d (f32, f16, bf16)", n, rows, cols,
		                    dtype);
	kernel k = gemv_for(dtype, cols, 0);
	for (int b0 = 0; b0 < n; b0 += GEMV_MAX_N) {
		int nb = n - b0 < GEMV_MAX_N ? n - b0 : GEMV_MAX_N;
		k<<<(rows + GEMV_WARPS - 1) / GEMV_WARPS, GEMV_WARPS * 32>>>(d_y + (size_t)b0 * rows, d_x + (size_t)b0 * cols,
		                                                             nb, d_w, rows, cols, gemv_pick{});
	}
	return launch_ok("gemv");
}

extern "C" int eng_cuda_gemv_sel(float *d_y, const float *d_x, int xdiv, const int *d_sel, int pairs,
                                 void *const *d_wtab, int dtype, int rows, int cols)
{
	if (pairs < 1)
		return 0;
	if (xdiv < 1 || xdiv > 64 || pairs % xdiv || rows < 1 || cols < 1 || pairs / xdiv > 65535)
		return ev_error_set(EV_E_INVALID, "cuda gemv_sel: %d pairs (x a row each %d), [%d, %d]", pairs, xdiv, rows, cols);
	gemv_pick pick = {(const void *const *)d_wtab, d_sel};
	static_assert(GEMV_WARPS == GEMV_PICK_WARPS, "a launch over pairs has blocks of GEMV_PICK_WARPS rows");
	dim3 grid((unsigned)((rows + GEMV_PICK_WARPS - 1) / GEMV_PICK_WARPS), (unsigned)(pairs / xdiv), (unsigned)xdiv);
	if (dtype >= QT_Q8_0)
		return eng_cuda_gemv_q_pick(d_y, d_x, rows, cols, dtype, grid, pick);
	if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
		return ev_error_set(EV_E_INVALID, "cuda gemv_sel: dtype %d", dtype);
	gemv_for(dtype, cols, 1)<<<grid, GEMV_WARPS * 32>>>(d_y, d_x, 1, NULL, rows, cols, pick);
	return launch_ok("gemv_sel");
}

// ---- norms, RoPE, activations ----------------------------------------------------

__global__ void rmsnorm_kernel(float *y, const float *x, const float *g, int d, float eps)
{
	__shared__ float part[32];
	const float *xi = x + (size_t)blockIdx.x * d;
	float *yi = y + (size_t)blockIdx.x * d;
	float s = 0.0f;
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		s += xi[j] * xi[j];
	s = warp_sum(s);
	if (threadIdx.x % 32 == 0)
		part[threadIdx.x / 32] = s;
	__syncthreads();
	if (threadIdx.x < 32) {
		s = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
		s = warp_sum(s);
		if (threadIdx.x == 0)
			part[0] = s;
	}
	__syncthreads();
	float r = 1.0f / sqrtf(part[0] / (float)d + eps);
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		yi[j] = xi[j] * r * g[j];
}

extern "C" int eng_cuda_rmsnorm(float *d_y, const float *d_x, const float *d_g, int n, int d, float eps)
{
	if (n < 1 || d < 1)
		return ev_error_set(EV_E_INVALID, "cuda rmsnorm: n %d, d %d", n, d);
	rmsnorm_kernel<<<n, 256>>>(d_y, d_x, d_g, d, eps);
	return launch_ok("rmsnorm");
}

// The angle as the CPU takes it (double), its cosine and sine rounded to
// float, then the same products.
__global__ void rope_kernel(float *x, int n, int nh, int hd, int half, const long long *pos, const float *inv_freq)
{
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * half)
		return;
	int i = (int)(k / half), j = (int)(k % half);
	double a = (double)pos[i] * (double)inv_freq[j];
	float cs = (float)cos(a), sn = (float)sin(a);
	for (int h = 0; h < nh; h++) {
		float *v = x + ((size_t)i * nh + h) * hd;
		float x1 = v[j], x2 = v[j + half];
		v[j] = __fsub_rn(__fmul_rn(x1, cs), __fmul_rn(x2, sn));
		v[j + half] = __fadd_rn(__fmul_rn(x2, cs), __fmul_rn(x1, sn));
	}
}

extern "C" int eng_cuda_rope(float *d_x, int n, int nh, int hd, int rd, const long *pos, const float *d_inv_freq)
{
	if (n < 1 || nh < 1 || rd < 2 || rd % 2 || rd > hd)
		return ev_error_set(EV_E_INVALID, "cuda rope: n %d, heads %d, head %d, rotary %d", n, nh, hd, rd);
	long long *h = (long long *)malloc((size_t)n * sizeof *h);
	if (!h)
		return ev_error_set(EV_E_NOMEM, "cuda rope: out of memory");
	for (int i = 0; i < n; i++)
		h[i] = pos[i];
	int rc;
	long long *d_pos = (long long *)eng_cuda_scratch_upload(9, h, (size_t)n * sizeof *h, &rc);
	free(h);
	if (!d_pos)
		return rc;
	long long total = (long long)n * (rd / 2);
	rope_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_x, n, nh, hd, rd / 2, d_pos, d_inv_freq);
	return launch_ok("rope");
}

__global__ void swiglu_kernel(float *g, const float *u, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void swiglu_oai_kernel(float *g, const float *u, size_t n, float alpha, float limit)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float gi = g[i] > limit ? limit : g[i];
	float ui = u[i] > limit ? limit : u[i] < -limit ? -limit : u[i];
	g[i] = (ui + 1.0f) * (gi / (1.0f + expf(-alpha * gi)));
}

__global__ void axpy_kernel(float *y, const float *x, float a, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += a * x[i];
}

// ---- MoE on the device (decode) ----------------------------------------------------

// The K experts of one row with the greatest v(e) (ties to the lower id),
// as engine/forward.c's top_experts.
template <typename V>
__device__ void top_experts_dev(V v, int E, int K, int *sel)
{
	for (int k = 0; k < K; k++) {
		int best = -1;
		float bv = 0.0f;
		for (int e = 0; e < E; e++) {
			bool taken = false;
			for (int j = 0; j < k; j++)
				taken |= sel[j] == e;
			float ve = v(e);
			if (!taken && (best < 0 || ve > bv))
				best = e, bv = ve;
		}
		sel[k] = best;
	}
}

struct logit_of {
	const float *l;
	__device__ float operator()(int e) const { return l[e]; }
};

__device__ __forceinline__ float sigmoid_score(float l)
{
	return 1.0f / (1.0f + expf(-l));
}

struct sigmoid_choice {
	const float *l, *bias;
	__device__ float operator()(int e) const { return sigmoid_score(l[e]) + (bias ? bias[e] : 0.0f); }
};

// A thread a row: eng_moe_route's arithmetic (softmax in double; sigmoid
// in float), then the chosen put in ascending expert order with their
// weights, each times scale.
__global__ void moe_route_kernel(int *sel, float *w, const float *logits, int n, int E, int K, int kind,
                                 const float *bias, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const float *l = logits + (size_t)i * E;
	int *s = sel + (size_t)i * K;
	float *wi = w + (size_t)i * K;
	if (kind == 2) {
		top_experts_dev(sigmoid_choice{l, bias}, E, K, s);
		double t = 0;
		for (int k = 0; k < K; k++)
			t += wi[k] = sigmoid_score(l[s[k]]);
		for (int k = 0; k < K; k++)
			wi[k] = (float)(wi[k] / t);
	} else {
		float mx = l[0];
		for (int e = 1; e < E; e++)
			mx = l[e] > mx ? l[e] : mx;
		double sum = 0;
		for (int e = 0; e < E; e++)
			sum += exp((double)l[e] - mx);
		top_experts_dev(logit_of{l}, E, K, s);
		for (int k = 0; k < K; k++)
			wi[k] = (float)(exp((double)l[s[k]] - mx) / sum);
		if (kind == 1) {
			double t = 0;
			for (int k = 0; k < K; k++)
				t += wi[k];
			for (int k = 0; k < K; k++)
				wi[k] = (float)(wi[k] / t);
		}
	}
	for (int a = 1; a < K; a++) // ascending expert order: the host's order of adding
		for (int c = a; c > 0 && s[c - 1] > s[c]; c--) {
			int te = s[c];
			float tw = wi[c];
			s[c] = s[c - 1], wi[c] = wi[c - 1];
			s[c - 1] = te, wi[c - 1] = tw;
		}
	for (int k = 0; k < K; k++)
		wi[k] = __fmul_rn(wi[k], scale);
}

extern "C" int eng_cuda_moe_route(int *d_sel, float *d_w, const float *d_logits, int n, int E, int K, int kind,
                                  const float *d_bias, float scale)
{
	if (n < 1)
		return 0;
	if (E < 1 || E > 4096 || K < 1 || K > E || K > 64 || kind < 0 || kind > 2)
		return ev_error_set(EV_E_INVALID, "cuda moe_route: %d experts, top %d, kind %d", E, K, kind);
	moe_route_kernel<<<(unsigned)((n + 63) / 64), 64>>>(d_sel, d_w, d_logits, n, E, K, kind, d_bias, scale);
	return launch_ok("moe route");
}

// x[i] += w[i, k] * eo[i * K + k], k in order: a thread an element of x
// (each addition as axpy_kernel's)
__global__ void moe_mix_kernel(float *x, const float *eo, const float *w, int n, int K, int width)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= (size_t)n * width)
		return;
	size_t i = t / width, c = t % width;
	float y = x[t];
	for (int k = 0; k < K; k++) {
		float a = w[i * K + k];
		y += a * eo[(i * K + k) * width + c];
	}
	x[t] = y;
}

__global__ void gate_add_kernel(float *x, const float *eo, const float *g, int n, int width)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= (size_t)n * width)
		return;
	float a = (float)(1.0 / (1.0 + exp(-(double)g[t / width])));
	x[t] += a * eo[t];
}

extern "C" int eng_cuda_gate_add(float *d_x, const float *d_eo, const float *d_g, int n, int width)
{
	if (n < 1 || width < 1)
		return n == 0 ? 0 : ev_error_set(EV_E_INVALID, "cuda gate_add: n %d, width %d", n, width);
	size_t total = (size_t)n * width;
	gate_add_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_x, d_eo, d_g, n, width);
	return launch_ok("gate add");
}

extern "C" int eng_cuda_moe_mix(float *d_x, const float *d_eo, const float *d_w, int n, int K, int width)
{
	if (n < 1 || K < 1 || width < 1)
		return n == 0 ? 0 : ev_error_set(EV_E_INVALID, "cuda moe_mix: n %d, K %d, width %d", n, K, width);
	size_t total = (size_t)n * width;
	moe_mix_kernel<<<(unsigned)((total + 255) / 256), 256>>>(d_x, d_eo, d_w, n, K, width);
	return launch_ok("moe mix");
}

static unsigned blocks_for(size_t n)
{
	return (unsigned)((n + 255) / 256);
}

extern "C" int eng_cuda_swiglu(float *d_g, const float *d_u, size_t n)
{
	if (!n)
		return 0;
	swiglu_kernel<<<blocks_for(n), 256>>>(d_g, d_u, n);
	return launch_ok("swiglu");
}

extern "C" int eng_cuda_swiglu_oai(float *d_g, const float *d_u, size_t n, float alpha, float limit)
{
	if (!n)
		return 0;
	swiglu_oai_kernel<<<blocks_for(n), 256>>>(d_g, d_u, n, alpha, limit);
	return launch_ok("swiglu_oai");
}

extern "C" int eng_cuda_axpy(float *d_y, const float *d_x, float a, size_t n)
{
	if (!n)
		return 0;
	axpy_kernel<<<blocks_for(n), 256>>>(d_y, d_x, a, n);
	return launch_ok("axpy");
}

__global__ void embed_kernel(float *x, const void *table, int dtype, int width, const int32_t *tok, int n)
{
	size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (size_t)n * width)
		return;
	int i = (int)(k / width), j = (int)(k % width);
	size_t at = (size_t)tok[i] * width + j;
	x[k] = dev_elem(table, at, dtype);
}

extern "C" int eng_cuda_embed(float *d_x, const void *d_table, int dtype, int vocab, int width, const int32_t *tok,
                              int n)
{
	if (n < 1 || width < 1 || (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16))
		return ev_error_set(EV_E_INVALID, "cuda embed: n %d, width %d, dtype %d", n, width, dtype);
	for (int i = 0; i < n; i++)
		if (tok[i] < 0 || tok[i] >= vocab)
			return ev_error_set(EV_E_INVALID, "cuda embed: token %d at %d is outside the vocabulary (%d)", tok[i], i,
			                    vocab);
	int32_t *d_tok = (int32_t *)eng_cuda_scratch(1, (size_t)n * sizeof *d_tok);
	if (!d_tok)
		return ev_error_set(EV_E_NOMEM, "cuda embed: out of memory");
	int rc = eng_cuda_upload(d_tok, tok, (size_t)n * sizeof *tok);
	if (rc)
		return rc;
	embed_kernel<<<blocks_for((size_t)n * width), 256>>>(d_x, d_table, dtype, width, d_tok, n);
	return launch_ok("embed");
}

// ---- MSA: the lightning indexer --------------------------------------------------

#define INDEX_FLUSH 0x1p-60f

__device__ __forceinline__ float flush(float v)
{
	return fabsf(v) < INDEX_FLUSH ? 0.0f : v;
}

// dot(q, k) in the CPU's order of operations, so that scores, and with
// them the choice, are the same bits: with the CPU's AVX2 kernel, 16 lanes
// (two vectors of 8) accumulated by fused multiply-add, a tail of 8 into
// the first, the lanes summed pairwise as its horizontal add does, then
// the scalar tail; without it, one running sum. Keys are stored flushed.
__device__ float dot_cpu_order(const float *q, const float *k, int n, int avx2)
{
	int i = 0;
	float s = 0.0f;
	if (avx2) {
		float a0[8], a1[8];
#pragma unroll
		for (int l = 0; l < 8; l++)
			a0[l] = a1[l] = 0.0f;
		for (; i + 16 <= n; i += 16)
#pragma unroll
			for (int l = 0; l < 8; l++) {
				a0[l] = __fmaf_rn(q[i + l], k[i + l], a0[l]);
				a1[l] = __fmaf_rn(q[i + 8 + l], k[i + 8 + l], a1[l]);
			}
		for (; i + 8 <= n; i += 8)
#pragma unroll
			for (int l = 0; l < 8; l++)
				a0[l] = __fmaf_rn(q[i + l], k[i + l], a0[l]);
#pragma unroll
		for (int l = 0; l < 8; l++)
			a0[l] = __fadd_rn(a0[l], a1[l]);
		float h[4];
#pragma unroll
		for (int l = 0; l < 4; l++)
			h[l] = __fadd_rn(a0[l], a0[l + 4]);
		h[0] = __fadd_rn(h[0], h[2]);
		h[1] = __fadd_rn(h[1], h[3]);
		s = __fadd_rn(h[0], h[1]);
	}
	for (; i < n; i++)
		s = __fadd_rn(s, __fmul_rn(q[i], k[i]));
	return s;
}

// scores[(i * kvh + g) * nb + b]: block b's score for row i, head g (the
// max over its keys <= pos), -inf past the row's own block. One thread a
// key position: each block of keys is one CUDA block's reduction.
__global__ void index_scores_kernel(float *scores, const float *iq, const unsigned char *const *pages, size_t ik_off,
                                    int kvh, int idim, const long long *pos, int block, long nb, int avx2)
{
	extern __shared__ float sh[]; // idim (the flushed query), then blockDim.x maxima
	int i = blockIdx.z, g = blockIdx.y;
	long b = blockIdx.x;
	float *q = sh, *best = sh + idim;
	for (int j = threadIdx.x; j < idim; j += blockDim.x)
		q[j] = flush(iq[((size_t)i * kvh + g) * idim + j]);
	__syncthreads();
	long p = pos[i], t0 = b * block, t1 = t0 + block - 1 < p ? t0 + block - 1 : p;
	const float *ik = t1 >= t0 ? (const float *)(pages[b] + ik_off) : NULL; // the block's page: its keys
	float m = -INFINITY;
	for (long t = t0 + threadIdx.x; t <= t1; t += blockDim.x) {
		float d = dot_cpu_order(q, ik + (size_t)(t - t0) * idim, idim, avx2);
		m = d > m ? d : m;
	}
	best[threadIdx.x] = m;
	__syncthreads();
	for (int o = blockDim.x / 2; o > 0; o /= 2) {
		if (threadIdx.x < o && best[threadIdx.x + o] > best[threadIdx.x])
			best[threadIdx.x] = best[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		scores[((size_t)i * kvh + g) * nb + b] = t1 >= t0 ? best[0] : -INFINITY;
}

// The choice of one (row, head): one CUDA block; the forced (local) blocks
// first, then `want` rounds of an arg-max (higher score, lower block on
// ties) over the rest; written ascending.
__global__ void index_topk_kernel(int *lists, int *nls, float *scores, int kvh, long nb, const long long *pos,
                                  int block, int topk, int local, int nlist)
{
	__shared__ float bs[256];
	__shared__ long bb[256];
	__shared__ int chosen[1024];
	int i = blockIdx.y, g = blockIdx.x;
	float *sc = scores + ((size_t)i * kvh + g) * nb;
	long cur = pos[i] / block;
	long want = topk < cur + 1 ? topk : cur + 1;
	want = want < nlist ? want : nlist;
	want = want < 1024 ? want : 1024;
	for (int j = 0; j < local; j++) // the local blocks win their slots
		if (threadIdx.x == 0)
			sc[cur - j > 0 ? cur - j : 0] = INFINITY;
	__syncthreads();
	int k = 0;
	for (; k < want; k++) {
		float v = -INFINITY;
		long at = -1;
		for (long b = threadIdx.x; b <= cur; b += blockDim.x)
			if (sc[b] != -INFINITY && (at < 0 || sc[b] > v))
				v = sc[b], at = b;
		bs[threadIdx.x] = v;
		bb[threadIdx.x] = at;
		__syncthreads();
		for (int o = blockDim.x / 2; o > 0; o /= 2) {
			if (threadIdx.x < o) {
				float v2 = bs[threadIdx.x + o];
				long a2 = bb[threadIdx.x + o];
				long a1 = bb[threadIdx.x];
				if (a2 >= 0 && (a1 < 0 || v2 > bs[threadIdx.x] || (v2 == bs[threadIdx.x] && a2 < a1)))
					bs[threadIdx.x] = v2, bb[threadIdx.x] = a2;
			}
			__syncthreads();
		}
		long pick = bb[0];
		__syncthreads();
		if (pick < 0)
			break;
		if (threadIdx.x == 0) {
			chosen[k] = (int)pick;
			sc[pick] = -INFINITY;
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		for (int a = 1; a < k; a++) // ascending: the attention's fixed order
			for (int c = a; c > 0 && chosen[c - 1] > chosen[c]; c--) {
				int t = chosen[c];
				chosen[c] = chosen[c - 1];
				chosen[c - 1] = t;
			}
		int *out = lists + ((size_t)i * kvh + g) * nlist;
		for (int a = 0; a < k; a++)
			out[a] = chosen[a];
		nls[(size_t)i * kvh + g] = k;
	}
}

extern "C" int eng_cpu_dot_avx2(void); // engine/cpu: which order the CPU's dot product takes

extern "C" int eng_cuda_index_select(int *lists, int *nls, int nlist, const float *d_iq, void *const *pages, int npages,
                                     size_t ik_off, int n, int kvh, int idim, const long *pos, int block, int topk,
                                     int local)
{
	if (n < 1 || kvh < 1 || idim < 1 || idim > 4096 || block < 1 || topk < 1 || nlist < 1 || local < 0 || local > 64)
		return ev_error_set(EV_E_INVALID, "cuda index_select: n %d, kvh %d, idim %d, block %d, topk %d, nlist %d", n, kvh,
		                    idim, block, topk, nlist);
	long maxpos = 0;
	for (int i = 0; i < n; i++)
		maxpos = pos[i] > maxpos ? pos[i] : maxpos;
	long nb = maxpos / block + 1;
	if (npages < nb)
		return ev_error_set(EV_E_INVALID, "cuda index_select: %d pages for positions up to %ld (blocks of %d)", npages,
		                    maxpos, block);
	size_t ns = (size_t)n * kvh * nb;
	float *d_sc = (float *)eng_cuda_scratch(0, ns * sizeof(float));
	int *d_lists = (int *)eng_cuda_scratch(1, (size_t)n * kvh * (nlist + 1) * sizeof(int));
	// the table: positions, then the pages (a step's layers: the same table)
	size_t o_pages = align16((size_t)n * sizeof(long long)), total = o_pages + (size_t)nb * sizeof(void *);
	unsigned char *h = (unsigned char *)calloc(1, total);
	if (!d_sc || !d_lists || !h) {
		free(h);
		return ev_error_set(EV_E_NOMEM, "cuda index_select: out of memory");
	}
	for (int i = 0; i < n; i++)
		((long long *)h)[i] = pos[i];
	memcpy(h + o_pages, pages, (size_t)nb * sizeof(void *));
	int rc;
	unsigned char *d = (unsigned char *)eng_cuda_scratch_upload(10, h, total, &rc);
	free(h);
	if (!d)
		return rc;
	const long long *d_pos = (const long long *)d;
	dim3 g1((unsigned)nb, (unsigned)kvh, (unsigned)n);
	index_scores_kernel<<<g1, 128, (idim + 128) * sizeof(float)>>>(d_sc, d_iq, (const unsigned char *const *)(d + o_pages),
	                                                                ik_off, kvh, idim, d_pos, block, nb,
	                                                                eng_cpu_dot_avx2());
	if ((rc = launch_ok("index scores")))
		return rc;
	int *d_nls = d_lists + (size_t)n * kvh * nlist;
	index_topk_kernel<<<dim3((unsigned)kvh, (unsigned)n), 256>>>(d_lists, d_nls, d_sc, kvh, nb, d_pos, block, topk,
	                                                            local, nlist);
	if ((rc = launch_ok("index top-k")) || (rc = eng_cuda_download(lists, d_lists, (size_t)n * kvh * nlist * sizeof(int))))
		return rc;
	return eng_cuda_download(nls, d_nls, (size_t)n * kvh * sizeof(int));
}

// ---- MSA: sparse decode, split over blocks, merged by log-sum-exp ------------------

// One item (a partition of one row and KV head's block list): its group of
// query heads attend its blocks with an online softmax; the partial state
// (m, l, acc) goes to its slot. One warp a query head; hd <= 256.
#define DEC_MAX_HD 256
__global__ void decode_part_kernel(float *part_m, float *part_l, float *part_acc, const float *q, const float *k,
                                   const float *v, const eng_split_item *items, const int *lists, const int *nls_dense,
                                   int nlist, int nh, int kvh, int hd, const long long *pos, int block, float scale)
{
	const eng_split_item it = items[blockIdx.x];
	int group = nh / kvh, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (warp >= group)
		return;
	int h = it.kv_head * group + warp;
	const float *qh = q + ((size_t)it.row * nh + h) * hd;
	float qr[DEC_MAX_HD / 32], acc[DEC_MAX_HD / 32];
#pragma unroll
	for (int c = 0; c < DEC_MAX_HD / 32; c++) {
		int d = lane + 32 * c;
		qr[c] = d < hd ? qh[d] : 0.0f;
		acc[c] = 0.0f;
	}
	float m = -INFINITY, l = 0.0f;
	long p = pos[it.row];
	const int *list = lists ? lists + ((size_t)it.row * kvh + it.kv_head) * nlist : NULL;
	for (int e = it.first; e < it.first + it.count; e++) {
		long b = list && nls_dense[(size_t)it.row * kvh + it.kv_head] >= 0 ? list[e] : e;
		long t1 = b * block + block - 1 < p ? b * block + block - 1 : p;
		for (long t = b * block; t <= t1; t++) {
			const float *kt = k + ((size_t)t * kvh + it.kv_head) * hd;
			float s = 0.0f;
#pragma unroll
			for (int c = 0; c < DEC_MAX_HD / 32; c++) {
				int d = lane + 32 * c;
				if (d < hd)
					s += qr[c] * kt[d];
			}
			s = warp_sum(s) * scale;
			float mn = s > m ? s : m, corr = expf(m - mn), pw = expf(s - mn);
			l = l * corr + pw;
			const float *vt = v + ((size_t)t * kvh + it.kv_head) * hd;
#pragma unroll
			for (int c = 0; c < DEC_MAX_HD / 32; c++) {
				int d = lane + 32 * c;
				if (d < hd)
					acc[c] = acc[c] * corr + pw * vt[d];
			}
			m = mn;
		}
	}
	size_t at = (size_t)it.slot * group + warp;
	if (lane == 0) {
		part_m[at] = m;
		part_l[at] = l;
	}
#pragma unroll
	for (int c = 0; c < DEC_MAX_HD / 32; c++) {
		int d = lane + 32 * c;
		if (d < hd)
			part_acc[at * hd + d] = acc[c];
	}
}

// The merge of each (row, KV head)'s items in order, then acc / l. One
// warp a query head of the group; first[r * kvh + g] .. + count its items.
__global__ void decode_merge_kernel(float *out, const float *part_m, const float *part_l, const float *part_acc,
                                    const int *first, const int *count, int nh, int kvh, int hd)
{
	int rg = blockIdx.x, row = rg / kvh, g = rg % kvh, group = nh / kvh;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (warp >= group)
		return;
	float m = -INFINITY, l = 0.0f, acc[DEC_MAX_HD / 32];
#pragma unroll
	for (int c = 0; c < DEC_MAX_HD / 32; c++)
		acc[c] = 0.0f;
	for (int s = first[rg]; s < first[rg] + count[rg]; s++) {
		size_t at = (size_t)s * group + warp;
		float pm = part_m[at], pl = part_l[at];
		if (pl == 0.0f)
			continue;
		float mn = pm > m ? pm : m, ca = expf(m - mn), cb = expf(pm - mn);
		l = l * ca + pl * cb;
#pragma unroll
		for (int c = 0; c < DEC_MAX_HD / 32; c++) {
			int d = lane + 32 * c;
			if (d < hd)
				acc[c] = acc[c] * ca + part_acc[at * hd + d] * cb;
		}
		m = mn;
	}
	float *o = out + ((size_t)row * nh + g * group + warp) * hd;
#pragma unroll
	for (int c = 0; c < DEC_MAX_HD / 32; c++) {
		int d = lane + 32 * c;
		if (d < hd)
			o[d] = l > 0.0f ? acc[c] / l : 0.0f;
	}
}

extern "C" int eng_cuda_sparse_decode(float *d_out, const float *d_q, const float *d_k, const float *d_v, int n, int nh,
                                      int kvh, int hd, const long *pos, int block, const int *lists, const int *nls,
                                      int nlist, int target, float scale)
{
	if (n < 1 || kvh < 1 || nh % kvh || nh / kvh > 32 || hd < 1 || hd > DEC_MAX_HD || block < 1 || target < 1)
		return ev_error_set(EV_E_INVALID, "cuda sparse_decode: n %d, heads %d/%d, head %d (at most %d), block %d", n,
		                    nh, kvh, hd, DEC_MAX_HD, block);
	int rows_g = n * kvh, rc = 0;
	int *nb = (int *)malloc((size_t)rows_g * sizeof *nb), *dense = (int *)malloc((size_t)rows_g * sizeof *dense);
	int *first = (int *)malloc((size_t)rows_g * sizeof *first), *cnt = (int *)malloc((size_t)rows_g * sizeof *cnt);
	long long *hp = (long long *)malloc((size_t)n * sizeof *hp);
	long total_blocks = 0;
	if (!nb || !dense || !first || !cnt || !hp)
		rc = ev_error_set(EV_E_NOMEM, "cuda sparse_decode: out of memory");
	for (int r = 0; !rc && r < n; r++) {
		hp[r] = pos[r];
		for (int g = 0; g < kvh; g++) {
			int x = lists && nls && nls[r * kvh + g] >= 0 ? nls[r * kvh + g] : (int)(pos[r] / block + 1);
			nb[r * kvh + g] = x;
			dense[r * kvh + g] = lists && nls ? nls[r * kvh + g] : -1;
			total_blocks += x;
		}
	}
	int cap = (int)(total_blocks + rows_g), items_n = 0;
	eng_split_item *items = rc ? NULL : (eng_split_item *)malloc((size_t)cap * sizeof *items);
	if (!rc && !items)
		rc = ev_error_set(EV_E_NOMEM, "cuda sparse_decode: out of memory");
	if (!rc && (items_n = eng_split_worklist(nb, n, kvh, target, 1, items, cap)) < 0)
		rc = ev_error_set(EV_E_INVALID, "cuda sparse_decode: the work list does not fit");
	for (int r = 0; !rc && r < rows_g; r++)
		first[r] = cnt[r] = 0;
	for (int i = 0; !rc && i < items_n; i++) {
		int rg = items[i].row * kvh + items[i].kv_head;
		if (!cnt[rg])
			first[rg] = items[i].slot;
		cnt[rg]++;
	}
	int group = nh / kvh;
	size_t slots = (size_t)(items_n > 0 ? items_n : 1);
	size_t bytes_items = slots * sizeof(eng_split_item), bytes_lists = (size_t)rows_g * nlist * sizeof(int);
	size_t bytes_part = slots * group * (2 + hd) * sizeof(float);
	char *d = rc ? NULL
	             : (char *)eng_cuda_scratch(2, bytes_items + bytes_lists + 4 * (size_t)rows_g * sizeof(int) +
	                                               (size_t)n * sizeof(long long) + bytes_part + 64);
	if (!rc && !d)
		rc = ev_error_set(EV_E_NOMEM, "cuda sparse_decode: out of device memory");
	eng_split_item *d_items = (eng_split_item *)d;
	int *d_lists = (int *)(d + bytes_items), *d_dense = d_lists + (size_t)rows_g * nlist, *d_first = d_dense + rows_g,
	    *d_cnt = d_first + rows_g;
	long long *d_pos = (long long *)(((uintptr_t)(d_cnt + rows_g) + 7) & ~(uintptr_t)7);
	float *d_m = (float *)(d_pos + n), *d_l = d_m + slots * group, *d_acc = d_l + slots * group;
	if (!rc && (rc = eng_cuda_upload(d_items, items, (size_t)items_n * sizeof *items)) == 0 &&
	    (!lists || (rc = eng_cuda_upload(d_lists, lists, bytes_lists)) == 0) &&
	    (rc = eng_cuda_upload(d_dense, dense, (size_t)rows_g * sizeof(int))) == 0 &&
	    (rc = eng_cuda_upload(d_first, first, (size_t)rows_g * sizeof(int))) == 0 &&
	    (rc = eng_cuda_upload(d_cnt, cnt, (size_t)rows_g * sizeof(int))) == 0 &&
	    (rc = eng_cuda_upload(d_pos, hp, (size_t)n * sizeof(long long))) == 0) {
		float sc = scale > 0 ? scale : 1.0f / sqrtf((float)hd);
		if (items_n > 0)
			decode_part_kernel<<<items_n, group * 32>>>(d_m, d_l, d_acc, d_q, d_k, d_v, d_items,
			                                            lists ? d_lists : NULL, d_dense, nlist, nh, kvh, hd, d_pos,
			                                            block, sc);
		if (!(rc = launch_ok("sparse decode")))
			decode_merge_kernel<<<rows_g, group * 32>>>(d_out, d_m, d_l, d_acc, d_first, d_cnt, nh, kvh, hd);
		if (!rc)
			rc = launch_ok("sparse decode merge");
	}
	free(nb), free(dense), free(first), free(cnt), free(hp), free(items);
	return rc;
}

// ---- measuring ----------------------------------------------------------------------

typedef struct {
	void *a, *b;
	size_t bytes;
} copy_job;

static int copy_once(void *ctx)
{
	copy_job *j = (copy_job *)ctx;
	cudaMemcpy(j->b, j->a, j->bytes, cudaMemcpyDeviceToDevice);
	return eng_cuda_check(cudaGetLastError(), "copy");
}

extern "C" int eng_cuda_copy_bandwidth(double *gbps, size_t bytes, int reps)
{
	copy_job j = {eng_cuda_malloc(bytes), eng_cuda_malloc(bytes), bytes};
	int rc = j.a && j.b ? 0 : ev_error_set(EV_E_NOMEM, "cuda: %zu bytes twice", bytes);
	float best = 0;
	if (!rc)
		rc = eng_cuda_time_best(&best, reps, copy_once, &j);
	*gbps = rc ? 0 : 2.0 * (double)bytes / (best * 1e-3) / 1e9; // read + write
	eng_cuda_free(j.a), eng_cuda_free(j.b);
	return rc;
}

__global__ void fill_kernel(uint16_t *w, size_t n, uint32_t seed)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		uint32_t h = (uint32_t)i * 2654435761u ^ seed;
		w[i] = (uint16_t)(0x3c00 | (h & 0x3ff)); // small positive halves; bf16 reads them as small numbers too
	}
}

typedef struct {
	float *y, *x;
	void *w;
	int n, dtype, rows, cols;
} gemv_job;

static int gemv_once(void *ctx)
{
	gemv_job *j = (gemv_job *)ctx;
	return eng_cuda_gemv(j->y, j->x, j->n, j->w, j->dtype, j->rows, j->cols);
}

extern "C" int eng_cuda_gemv_bandwidth(double *gbps, double *us, int rows, int cols, int dtype, int n, int reps)
{
	size_t esz = dtype == DT_F32 ? 4 : 2, wbytes = (size_t)rows * cols * esz;
	gemv_job j = {(float *)eng_cuda_malloc((size_t)n * rows * sizeof(float)),
	              (float *)eng_cuda_malloc((size_t)n * cols * sizeof(float)), eng_cuda_malloc(wbytes), n, dtype, rows,
	              cols};
	int rc = j.w && j.x && j.y ? 0 : ev_error_set(EV_E_NOMEM, "cuda: a [%d, %d] weight", rows, cols);
	float best = 0;
	if (!rc) {
		fill_kernel<<<blocks_for(wbytes / 2), 256>>>((uint16_t *)j.w, wbytes / 2, 7u);
		cudaMemset(j.x, 0, (size_t)n * cols * sizeof(float));
		rc = eng_cuda_time_best(&best, reps, gemv_once, &j);
	}
	*gbps = rc ? 0 : (double)wbytes / (best * 1e-3) / 1e9;
	*us = rc ? 0 : best * 1e3;
	eng_cuda_free(j.w), eng_cuda_free(j.x), eng_cuda_free(j.y);
	return rc;
}
