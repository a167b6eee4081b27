/*
 * evald bench cuda: the CUDA ops' speed on the device, each beside its
 * bound measured in the same run: the device's copy bandwidth (the bound of
 * a decode GEMV, which reads each weight once), the GEMV's read bandwidth
 * on the weight shapes of a ~1B Llama (hidden 2048, MLP 8192, vocabulary
 * 128,256) in bf16, f16 and f32 at batch 1 and 8, the prefill GEMM
 * (cuBLASLt) on the same shapes at 2048 rows in TFLOP/s, and MSA's sparse decode
 * against dense decode over the same cache at each length (one query row,
 * M3-like heads). Without a CUDA device it says so and fails.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

#ifdef EV_HAVE_CUDA
#include "engine/cuda/cuda.h"
#endif

int ev_bench_cuda_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	bool json;
	int reps;
	const char *lengths;
} cuda_opts;

static const ev_opt cuda_table[] = {
	EV_O_FLAG("--json", cuda_opts, json, "one JSON object of figures"),
	EV_O_INT("--repeats", cuda_opts, reps, 1, 1000, "R", "best of R timed runs"),
	EV_O_STR("--lengths", cuda_opts, lengths, "LIST", "context lengths for the decode (64k,1m)"),
	EV_O_END,
};

static const ev_cmd_spec cuda_spec = {
	.name = "bench cuda",
	.synopsis = "[--repeats R] [--lengths 64k,1m] [--json]",
	.about = "The CUDA ops on the device beside their bounds: copy bandwidth, decode GEMV read bandwidth\n"
	         "(bf16, f16, f32; batch 1 and 8), the prefill GEMM's TFLOP/s at 2,048 rows, MSA sparse decode\n"
	         "vs dense decode by context length.",
	.opts = cuda_table,
};

#ifdef EV_HAVE_CUDA
#include <math.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One decode row at position len - 1: MSA over `topk` blocks vs every
 * block; best of reps, microseconds each. */
static int decode_pair(long len, int reps, double *us_msa, double *us_dense)
{
	int nh = 16, kvh = 4, hd = 128, block = 64, topk = 16, nlist = topk;
	size_t kv = (size_t)len * kvh * hd * sizeof(float);
	float *k = eng_cuda_malloc(kv), *v = eng_cuda_malloc(kv), *q = eng_cuda_malloc((size_t)nh * hd * 4),
	      *out = eng_cuda_malloc((size_t)nh * hd * 4);
	int rc = k && v && q && out ? 0 : ev_error_set(EV_E_NOMEM, "cuda: a %ld-token cache (%.1f GiB)", len, 2.0 * kv / (1 << 30));
	long pos = len - 1, nb = pos / block + 1;
	int lists[4 * 16], nls[4], dense[4] = {-1, -1, -1, -1};
	for (int g = 0; g < kvh; g++) {
		for (int j = 0; j < topk; j++) /* spread over the context, the own block last */
			lists[g * nlist + j] = (int)(j == topk - 1 ? nb - 1 : (nb - 1) * j / topk);
		nls[g] = topk;
	}
	double best_m = 1e30, best_d = 1e30;
	for (int r = 0; !rc && r < reps + 1; r++) {
		double t0 = now_s();
		rc = eng_cuda_sparse_decode(out, q, k, v, 1, nh, kvh, hd, &pos, block, lists, nls, nlist, 132, 0);
		if (!rc)
			rc = eng_cuda_sync();
		double t1 = now_s();
		if (!rc)
			rc = eng_cuda_sparse_decode(out, q, k, v, 1, nh, kvh, hd, &pos, block, lists, dense, nlist, 132, 0);
		if (!rc)
			rc = eng_cuda_sync();
		double t2 = now_s();
		if (r > 0)
			best_m = fmin(best_m, t1 - t0), best_d = fmin(best_d, t2 - t1);
	}
	*us_msa = best_m * 1e6, *us_dense = best_d * 1e6;
	eng_cuda_free(k), eng_cuda_free(v), eng_cuda_free(q), eng_cuda_free(out);
	return rc;
}
#endif

int ev_bench_cuda_main(const ev_cli *cli, int argc, char **argv)
{
	cuda_opts o = {.json = cli->json, .reps = 10};
	int prc = ev_opt_parse(&cuda_spec, &o, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
#ifndef EV_HAVE_CUDA
	(void)o;
	ev_error_set(EV_E_UNSUPPORTED, "this evald was built without CUDA (no toolkit when it was configured)");
	return ev_cli_fail("bench cuda");
#else
	size_t lens[8];
	int nlen = 2;
	long lengths[8] = {65536, 1048576};
	if (o.lengths) {
		if ((nlen = ev_cli_parse_lengths(lens, 8, o.lengths, "--lengths")) < 0)
			return ev_cli_fail("bench cuda"), EV_EXIT_USAGE;
		for (int i = 0; i < nlen; i++)
			lengths[i] = (long)lens[i];
	}
	eng_cuda_info ci;
	if (eng_cuda_probe(&ci))
		return ev_cli_fail("bench cuda");
	double peak = 2.0 * ci.mem_clock_khz * 1e3 * ci.bus_width_bits / 8 / 1e9, copy = 0;
	int rc = eng_cuda_copy_bandwidth(&copy, (size_t)1 << 30, o.reps);
	static const struct {
		const char *what;
		int rows, cols;
	} shapes[] = {{"qkv 2048x2048", 2048, 2048}, {"mlp up 8192x2048", 8192, 2048}, {"mlp down 2048x8192", 2048, 8192},
	              {"lm head 128256x2048", 128256, 2048}};
	static const int dts[] = {2, 1, 0};
	static const char *const dtn[] = {"f32", "f16", "bf16"};
	ev_buf j = EV_BUF_INIT(1 << 20);
	ev_buf_printf(&j, "{\"device\":\"%s\",\"cc\":\"%d.%d\",\"sms\":%d,\"mem_gib\":%.1f,\"peak_gbps\":%.0f,"
	                  "\"copy_gbps\":%.0f,\"gemv\":[",
	              ci.name, ci.cc_major, ci.cc_minor, ci.sms, (double)ci.mem_bytes / (1 << 30), peak, copy);
	if (!o.json)
		printf("device %s (compute %d.%d, %d SMs, %.1f GiB), peak %.0f GB/s, copy %.0f GB/s\n"
		       "%-22s %-5s %3s %10s %10s %12s\n",
		       ci.name, ci.cc_major, ci.cc_minor, ci.sms, (double)ci.mem_bytes / (1 << 30), peak, copy, "gemv", "dtype",
		       "n", "us", "GB/s", "of copy");
	bool first = true;
	for (size_t s = 0; !rc && s < sizeof shapes / sizeof *shapes; s++)
		for (int d = 0; !rc && d < 3; d++)
			for (int n = 1; !rc && n <= 8; n += 7) {
				double gbps = 0, us = 0;
				rc = eng_cuda_gemv_bandwidth(&gbps, &us, shapes[s].rows, shapes[s].cols, dts[d], n, o.reps);
				if (rc)
					break;
				ev_buf_printf(&j, "%s{\"shape\":\"%s\",\"dtype\":\"%s\",\"n\":%d,\"us\":%.2f,\"gbps\":%.1f,\"of_copy\":%.3f}",
				              first ? "" : ",", shapes[s].what, dtn[dts[d]], n, us, gbps, copy > 0 ? gbps / copy : 0);
				first = false;
				if (!o.json)
					printf("%-22s %-5s %3d %10.2f %10.1f %11.1f%%\n", shapes[s].what, dtn[dts[d]], n, us, gbps,
					       copy > 0 ? 100 * gbps / copy : 0);
			}
	/* the prefill GEMM on the same shapes, 2048 rows (a prompt's worth) */
	ev_buf_puts(&j, "],\"gemm\":[");
	if (!rc && !o.json)
		printf("%-22s %-5s %5s %10s %10s\n", "prefill gemm", "dtype", "rows", "us", "TFLOP/s");
	first = true;
	for (size_t s = 0; !rc && s < sizeof shapes / sizeof *shapes; s++)
		for (int d = 0; !rc && d < 3; d++) {
			double tf = 0, us = 0;
			rc = eng_cuda_gemm_tflops(&tf, &us, shapes[s].rows, shapes[s].cols, dts[d], 2048, o.reps);
			if (rc)
				break;
			ev_buf_printf(&j, "%s{\"shape\":\"%s\",\"dtype\":\"%s\",\"n\":2048,\"us\":%.2f,\"tflops\":%.1f}",
			              first ? "" : ",", shapes[s].what, dtn[dts[d]], us, tf);
			first = false;
			if (!o.json)
				printf("%-22s %-5s %5d %10.2f %10.1f\n", shapes[s].what, dtn[dts[d]], 2048, us, tf);
		}
	ev_buf_puts(&j, "],\"decode\":[");
	if (!rc && !o.json)
		printf("%-12s %14s %14s %8s\n", "decode", "MSA us", "dense us", "ratio");
	for (int i = 0; !rc && i < nlen; i++) {
		double m = 0, dn = 0;
		rc = decode_pair(lengths[i], o.reps, &m, &dn);
		if (rc)
			break;
		ev_buf_printf(&j, "%s{\"length\":%ld,\"msa_us\":%.1f,\"dense_us\":%.1f,\"ratio\":%.2f}", i ? "," : "",
		              lengths[i], m, dn, m > 0 ? dn / m : 0);
		if (!o.json)
			printf("%-12ld %14.1f %14.1f %7.1fx\n", lengths[i], m, dn, m > 0 ? dn / m : 0);
	}
	ev_buf_puts(&j, "]}");
	if (!rc && o.json)
		printf("%s\n", j.data);
	ev_buf_free(&j);
	return rc ? ev_cli_fail("bench cuda") : 0;
#endif
}
