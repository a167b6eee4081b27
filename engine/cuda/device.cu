// engine/cuda/device.cu: the device, its memory, and the errors of CUDA
// calls as the project's (ev_error_set).
#include <cuda_runtime.h>

#include <string.h>

extern "C" {
#include "base/base.h"
#include "engine/cuda/cuda.h"
}

#include "engine/cuda/cuda_int.h"

int eng_cuda_check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	int code = e == cudaErrorMemoryAllocation ? EV_E_NOMEM
	           : e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? EV_E_UNSUPPORTED
	                                                                       : EV_E_IO;
	return ev_error_set(code, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" int eng_cuda_probe(eng_cuda_info *out)
{
	memset(out, 0, sizeof *out);
	cudaDriverGetVersion(&out->driver);
	cudaRuntimeGetVersion(&out->runtime);
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		cudaGetLastError(); /* clear the sticky state of a failed query */
		return ev_error_set(EV_E_UNSUPPORTED, "no CUDA device: %s",
		                    e != cudaSuccess ? cudaGetErrorString(e) : "the driver sees none");
	}
	cudaDeviceProp p;
	if (int rc = eng_cuda_check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties"))
		return rc;
	out->devices = n;
	snprintf(out->name, sizeof out->name, "%s", p.name);
	out->cc_major = p.major;
	out->cc_minor = p.minor;
	out->mem_bytes = p.totalGlobalMem;
	out->sms = p.multiProcessorCount;
	int clock = 0, width = 0;
	cudaDeviceGetAttribute(&clock, cudaDevAttrMemoryClockRate, 0);
	cudaDeviceGetAttribute(&width, cudaDevAttrGlobalMemoryBusWidth, 0);
	out->mem_clock_khz = clock;
	out->bus_width_bits = width;
	return 0;
}

extern "C" void *eng_cuda_malloc(size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return p;
}

extern "C" void eng_cuda_free(void *d)
{
	if (d)
		cudaFree(d);
}

eng_cuda_counts eng_cuda_counters;

extern "C" void eng_cuda_counts_get(eng_cuda_counts *out)
{
	*out = eng_cuda_counters;
}

extern "C" int eng_cuda_upload(void *d_dst, const void *src, size_t bytes)
{
	eng_cuda_counters.uploads++;
	return eng_cuda_check(cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice), "upload");
}

extern "C" int eng_cuda_download(void *dst, const void *d_src, size_t bytes)
{
	eng_cuda_counters.downloads++;
	return eng_cuda_check(cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost), "download");
}

extern "C" int eng_cuda_sync(void)
{
	if (int rc = eng_cuda_check(cudaGetLastError(), "kernel launch"))
		return rc;
	return eng_cuda_check(cudaDeviceSynchronize(), "kernel");
}

int eng_cuda_time_best(float *best_ms, int reps, int (*run)(void *ctx), void *ctx)
{
	cudaEvent_t e0 = NULL, e1 = NULL;
	int rc = eng_cuda_check(cudaEventCreate(&e0), "event");
	if (!rc)
		rc = eng_cuda_check(cudaEventCreate(&e1), "event");
	float best = 1e30f;
	for (int r = 0; !rc && r < reps + 1; r++) {
		cudaEventRecord(e0);
		rc = run(ctx);
		cudaEventRecord(e1);
		cudaEventSynchronize(e1);
		float ms = 0;
		cudaEventElapsedTime(&ms, e0, e1);
		if (r > 0 && ms < best) // the first is a warm-up
			best = ms;
	}
	if (!rc)
		rc = eng_cuda_sync();
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	*best_ms = best;
	return rc;
}
