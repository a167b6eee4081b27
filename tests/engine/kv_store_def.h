/*
 * tests/engine/kv_store_def.h: eng_cuda_kv_store's contract computed on
 * the host (engine/cuda/cuda.h), one row after the other in the batch's
 * order: row i's key and value converted to the page dtype in slot
 * slot[i] of the page at page[i], the stored key (read back as f32) added
 * to that page's sums. The same conversions and sums as eng_cpu_kv_store,
 * so it is the oracle of the device op (test_cuda_ops.c) and the host
 * stand-in of it (test_cuda_backend_host.c).
 */
#ifndef TESTS_ENGINE_KV_STORE_DEF_H
#define TESTS_ENGINE_KV_STORE_DEF_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/backend.h"

static inline void kv_store_def(void *const *page, const int *slot, int n, const float *k, const float *v, int kd,
				int dtype, size_t kbase, size_t vbase, size_t sbase)
{
	size_t es = eng_dtype_size((eng_dtype)dtype);
	for (int i = 0; i < n; i++) {
		unsigned char *pg = page[i];
		unsigned char *K = pg + kbase + (size_t)slot[i] * kd * es, *V = pg + vbase + (size_t)slot[i] * kd * es;
		float *sum = (float *)(pg + sbase);
		const float *ki = k + (size_t)i * kd, *vi = v + (size_t)i * kd;
		for (int j = 0; j < kd; j++) {
			if (dtype == ENG_F32) {
				((float *)K)[j] = ki[j];
				((float *)V)[j] = vi[j];
				sum[j] += ki[j];
			} else {
				bool half = dtype == ENG_F16;
				uint16_t kq = half ? eng_f32_to_f16(ki[j]) : eng_f32_to_bf16(ki[j]);
				((uint16_t *)K)[j] = kq;
				((uint16_t *)V)[j] = half ? eng_f32_to_f16(vi[j]) : eng_f32_to_bf16(vi[j]);
				sum[j] += half ? eng_f16_to_f32(kq) : eng_bf16_to_f32(kq);
			}
		}
	}
}

#endif
