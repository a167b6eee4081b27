/*
 * evald bench engine: prefill and decode tokens per second on a checkpoint,
 * at batch 1 and at batch B (B sequences advanced together through
 * eng_forward_batch, as continuous batching does), on the fast CPU path and
 * (at batch 1, short lengths: it is slow) on the reference path, with the
 * peak resident memory beside the weights' size so that regressions in
 * either show. Each fast-path figure is the mean (and standard deviation)
 * of --repeats timed runs after one untimed warm-up run.
 *   evald bench engine --model DIR [--prompt N] [--decode N] [--batch B]
 *                      [--threads N] [--repeats R] [--ref-prompt N] [--ref-decode N]
 *                      [--bandwidth weights|buffer] [--no-reference] [--reference-only] [--json]
 * The memory bound beside batch-1 decode is the bytes a step reads over
 * read bandwidth; on the CPU that bandwidth is, by default, the weights'
 * own, read whole just before each timed decode, and each run's decode is
 * set against its own moment's bound (the machine's bandwidth moves).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <unistd.h>

#include "engine/engine.h"
#include "engine/gguf/gguf.h"
#ifdef EV_HAVE_CUDA
#include "engine/cuda/cuda.h"
#endif
#include "base/base.h"
#include "evald/cli.h"

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);

#define MAX_REPEATS 100

/* ---- the memory bound: bytes a decode step reads over read bandwidth ---- */

#define BW_REGIONS 64

static volatile uint64_t bw_sink;

/* Memory a bandwidth figure reads: regions taken end to end, each cut to a
 * multiple of 128 bytes (so that every share starts on a word). */
typedef struct {
	const void *p[BW_REGIONS];
	size_t len[BW_REGIONS];
	int n;
	size_t total;
} bw_src;

static void bw_add(bw_src *s, const void *p, size_t len)
{
	len &= ~(size_t)127;
	if (s->n < BW_REGIONS && len)
		s->p[s->n] = p, s->len[s->n++] = len, s->total += len;
}

typedef struct {
	const bw_src *src;
	size_t a, b; /* its share: bytes [a, b) of the regions end to end */
	uint64_t sum;
} bw_part;

/* ORs n words together with cheap independent ORs (not additions, whose
 * latency would be the limit), so that memory is. */
static uint64_t bw_or(const uint64_t *p, size_t n)
{
	uint64_t acc = 0;
	size_t i = 0;
#ifdef __AVX2__
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	for (; i + 16 <= n; i += 16) {
		a0 = _mm256_or_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
		a1 = _mm256_or_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
		a2 = _mm256_or_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
		a3 = _mm256_or_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
	}
	uint64_t t[4];
	_mm256_storeu_si256((__m256i *)t, _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3)));
	acc = t[0] | t[1] | t[2] | t[3];
#endif
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	for (; i + 4 <= n; i += 4)
		s0 |= p[i], s1 |= p[i + 1], s2 |= p[i + 2], s3 |= p[i + 3];
	return acc | s0 | s1 | s2 | s3;
}

static void *bw_read(void *arg)
{
	bw_part *b = arg;
	uint64_t acc = 0;
	size_t off = 0;
	for (int r = 0; r < b->src->n; r++) {
		size_t lo = off > b->a ? off : b->a, end = off + b->src->len[r], hi = end < b->b ? end : b->b;
		if (lo < hi)
			acc |= bw_or((const uint64_t *)((const char *)b->src->p[r] + (lo - off)), (hi - lo) / 8);
		off = end;
	}
	b->sum = acc;
	return NULL;
}

/* Bytes/s reading all of src once with `threads` threads (contiguous
 * shares of 128-byte multiples), the best of `passes`; 0 when nothing was
 * read. */
static double bw_time(const bw_src *src, int threads, int passes)
{
	if (threads < 1)
		threads = 1;
	if (threads > 64)
		threads = 64;
	pthread_t th[64];
	bw_part part[64];
	double best = 0;
	uint64_t sink = 0;
	size_t units = src->total / 128;
	for (int pass = 0; pass < passes && units; pass++) {
		double t0 = ev_now();
		for (int k = 0; k < threads; k++) {
			part[k] = (bw_part){src, units * (size_t)k / (size_t)threads * 128,
			                    units * (size_t)(k + 1) / (size_t)threads * 128, 0};
			if (pthread_create(&th[k], NULL, bw_read, &part[k]))
				bw_read(&part[k]), th[k] = 0;
		}
		for (int k = 0; k < threads; k++) {
			if (th[k])
				pthread_join(th[k], NULL);
			sink |= part[k].sum;
		}
		double dt = ev_now() - t0;
		if (dt > 0 && (double)src->total / dt > best)
			best = (double)src->total / dt;
	}
	bw_sink = sink; /* (the ORs are used, so that no compiler drops the reads) */
	return best;
}

/* Read bandwidth in bytes/s of a 512 MiB buffer of its own (far past the
 * caches), the best of 5 passes; the buffer in pages of the weights' kind
 * (huge: advised for transparent huge pages, as the engine reads weight
 * files into; else the default 4 KiB), since they draw different
 * bandwidths. For weights too small to time themselves; 0 when the buffer
 * cannot be had. */
static double read_bandwidth(int threads, bool huge)
{
	size_t bytes = (size_t)512 << 20, n = bytes / sizeof(uint64_t);
	void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *buf = map == MAP_FAILED ? NULL : map;
	if (!buf)
		return 0;
	if (huge)
		(void)madvise(buf, bytes, MADV_HUGEPAGE);
	for (size_t i = 0; i < n; i++)
		buf[i] = i & 7;
	bw_src one = {0};
	bw_add(&one, buf, bytes);
	double best = bw_time(&one, threads, 5);
	munmap(buf, bytes);
	return best;
}

typedef struct {
	const char *path;
	int batch;
	long prompt, decode;
	int repeats;
	double prefill_tok_s, decode_tok_s; /* means over the repeats */
	double prefill_sd, decode_sd;       /* their standard deviations */
	/* --backend cuda: synchronous copies between host and device a decode
	 * step, and table uploads left out because the device held them */
	double step_up, step_down, step_skipped;
	/* with a bw_src: the read bandwidth (bytes/s) taken just before each
	 * timed decode, and that decode's rate, run by run */
	double run_bw[MAX_REPEATS], run_decode[MAX_REPEATS];
} row;

/* B sequences, each fed `prompt` random tokens in one batched forward,
 * then `decode` single-token steps over all of them. */
/* With bw: its memory read (2 passes, the faster) between the prefill and
 * the decode, the bandwidth into *bw_out. */
/* With pprof and prof: the prefill and the decode steps timed stage by
 * stage into them. */
static int measure_once(eng_model *m, int vocab, int batch, long prompt, long decode, const bw_src *bw, int threads,
                        double *bw_out, eng_prof *pprof, eng_prof *prof, row *out)
{
	eng_seq **seqs = calloc((size_t)batch, sizeof *seqs);
	int32_t *toks = malloc((size_t)batch * (size_t)(prompt + decode) * sizeof *toks);
	const int32_t **tp = calloc((size_t)batch, sizeof *tp);
	int *nt = calloc((size_t)batch, sizeof *nt);
	int rc = 0;
	if (!seqs || !toks || !tp || !nt) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	ev_rng r;
	ev_rng_seed(&r, 1);
	for (long i = 0; i < batch * (prompt + decode); i++)
		toks[i] = (int32_t)ev_rng_below(&r, (uint64_t)vocab);
	for (int b = 0; b < batch; b++)
		if ((rc = eng_seq_new(&seqs[b], m)))
			goto done;
	for (int b = 0; b < batch; b++) {
		tp[b] = toks + (size_t)b * (size_t)(prompt + decode);
		nt[b] = (int)prompt;
	}
	eng_model_set_prof(m, pprof);
	double t0 = ev_now();
	if ((rc = eng_forward_batch(m, seqs, tp, nt, batch)))
		goto done;
	double t_prefill = ev_now() - t0;
	eng_model_set_prof(m, NULL);
	if (bw)
		*bw_out = bw_time(bw, threads, 2);
#ifdef EV_HAVE_CUDA
	eng_cuda_counts c0, c1;
	eng_cuda_counts_get(&c0);
#endif
	eng_model_set_prof(m, prof);
	t0 = ev_now();
	for (long i = 0; i < decode; i++) {
		for (int b = 0; b < batch; b++) {
			tp[b] = toks + (size_t)b * (size_t)(prompt + decode) + (size_t)(prompt + i);
			nt[b] = 1;
		}
		if ((rc = eng_forward_batch(m, seqs, tp, nt, batch)))
			goto done;
	}
	double t_decode = ev_now() - t0;
	eng_model_set_prof(m, NULL);
	out->step_up = out->step_down = out->step_skipped = 0;
#ifdef EV_HAVE_CUDA
	eng_cuda_counts_get(&c1);
	if (decode) {
		out->step_up = (double)(c1.uploads - c0.uploads) / (double)decode;
		out->step_down = (double)(c1.downloads - c0.downloads) / (double)decode;
		out->step_skipped = (double)(c1.skipped - c0.skipped) / (double)decode;
	}
#endif
	out->batch = batch;
	out->prompt = prompt;
	out->decode = decode;
	out->prefill_tok_s = (double)batch * (double)prompt / t_prefill;
	out->decode_tok_s = decode ? (double)batch * (double)decode / t_decode : 0;
done:
	eng_model_set_prof(m, NULL);
	if (seqs)
		for (int b = 0; b < batch; b++)
			eng_seq_free(seqs[b]);
	free(seqs);
	free(toks);
	free(tp);
	free(nt);
	return rc;
}

static void mean_sd(const double *v, int n, double *mean, double *sd)
{
	double s = 0, q = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	*mean = s / n;
	for (int i = 0; i < n; i++)
		q += (v[i] - *mean) * (v[i] - *mean);
	*sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* One untimed warm-up round (weights paged in, workers awake), then
 * `repeats` timed rounds: mean and standard deviation of each rate (and,
 * with bw, each round's bandwidth beside its decode rate). */
static int measure(eng_model *m, int vocab, int batch, long prompt, long decode, int repeats, const bw_src *bw,
                   int threads, row *out)
{
	double pf[MAX_REPEATS], dc[MAX_REPEATS] = {0}, bws[MAX_REPEATS] = {0};
	row one;
	int rc = measure_once(m, vocab, batch, prompt, decode, NULL, 0, NULL, NULL, NULL, &one);
	for (int r = 0; r < repeats && !rc; r++) {
		rc = measure_once(m, vocab, batch, prompt, decode, bw, threads, &bws[r], NULL, NULL, &one);
		pf[r] = one.prefill_tok_s;
		dc[r] = one.decode_tok_s;
	}
	if (rc)
		return rc;
	one.path = out->path;
	*out = one;
	out->repeats = repeats;
	mean_sd(pf, repeats, &out->prefill_tok_s, &out->prefill_sd);
	mean_sd(dc, repeats, &out->decode_tok_s, &out->decode_sd);
	memcpy(out->run_bw, bws, sizeof bws);
	memcpy(out->run_decode, dc, sizeof dc);
	return 0;
}

/* The profile's sums: what the stages leave of `total` seconds, and the
 * weight matmuls' seconds; with per, the stages' seconds divided by it */
static void prof_sums(eng_prof *p, double per, double total, double *other, double *mm)
{
	*other = total, *mm = 0;
	for (int k = 0; k < ENG_PROF_N; k++) {
		p->sec[k] /= per;
		*other -= p->sec[k];
		*mm += eng_prof_is_matmul(k) ? p->sec[k] : 0;
	}
}

static void json_profile(cJSON *o, const char *key, const eng_prof *p, double total, double other, double mm,
                         double tok_s)
{
	cJSON *j = cJSON_AddObjectToObject(o, key);
	cJSON_AddNumberToObject(j, "steps", (double)p->steps);
	cJSON_AddNumberToObject(j, "tok_s", tok_s);
	cJSON_AddNumberToObject(j, "step_s", total);
	cJSON *st = cJSON_AddObjectToObject(j, "stage_s");
	for (int k = 0; k < ENG_PROF_N; k++)
		if (p->sec[k] > 0)
			cJSON_AddNumberToObject(st, eng_prof_name(k), p->sec[k]);
	cJSON_AddNumberToObject(j, "other_s", other);
	cJSON_AddNumberToObject(j, "matmul_share", total > 0 ? mm / total : 0);
}

/* --profile's lines under a heading: the stages by share of the whole
 * (`step` seconds), largest first */
static void print_profile(const char *heading, const eng_prof *p, double step, double other, double mm)
{
	printf("  %s: %.3f ms; weight matmuls %.1f%% of it):\n", heading, step * 1e3, step > 0 ? 100 * mm / step : 0);
	bool done[ENG_PROF_N] = {false};
	int col = 0;
	for (;;) {
		int best = -1;
		for (int k = 0; k < ENG_PROF_N; k++)
			if (!done[k] && p->sec[k] > 0 && (best < 0 || p->sec[k] > p->sec[best]))
				best = k;
		if (best < 0)
			break;
		done[best] = true;
		printf("%s%s %.1f%% (%.0f us)", col % 5 ? ", " : "    ", eng_prof_name(best), 100 * p->sec[best] / step,
		       p->sec[best] * 1e6);
		if (++col % 5 == 0)
			printf("\n");
	}
	printf("%sother %.1f%% (%.0f us: between the stages)\n", col % 5 ? ", " : "    ",
	       step > 0 ? 100 * other / step : 0, other * 1e6);
}

typedef struct {
	const char *model, *bandwidth;
	int prompt, decode, threads, batch, ref_prompt, ref_decode, repeats;
	bool no_ref, only_ref, json, profile;
	ev_engine_flags engine;
} bench_opts;

#define T bench_opts
static const ev_opt bench_opts_table[] = {
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file (required)"),
	EV_O_INT("--prompt", T, prompt, 1, 1 << 20, "N", "prompt tokens"),
	EV_O_INT("--decode", T, decode, 0, 1 << 20, "N", "decoded tokens"),
	EV_O_INT("--batch", T, batch, 1, 1024, "B", "sequences in the batched row"),
	EV_O_INT("--threads", T, threads, 0, 1024, "N", "CPU threads (0: all cores)"),
	EV_O_INT("--repeats", T, repeats, 1, MAX_REPEATS, "R", "timed runs after one warm-up (mean and sd)"),
	EV_O_INT("--ref-prompt", T, ref_prompt, 1, 1 << 20, "N", "prompt tokens on the reference path"),
	EV_O_INT("--ref-decode", T, ref_decode, 0, 1 << 20, "N", "decoded tokens on the reference path"),
	EV_O_STR("--bandwidth", T, bandwidth, "weights|buffer",
	         "the memory bound's bandwidth: the weights read just before each timed decode, or a 512 MiB buffer "
	         "read once (default: the weights from 64 MiB)"),
	EV_O_FLAG("--no-reference", T, no_ref, "leave out the reference path"),
	EV_O_FLAG("--reference-only", T, only_ref, "only the reference path"),
	{.name = "--reference", .kind = EV_OPT_FLAG, .off = offsetof(T, only_ref), .flags = EV_OPT_HIDDEN,
	 .help = "the old name of --reference-only"},
	EV_O_FLAG("--profile", T, profile,
	          "one more batch-1 run after the timed ones, its prefill and decode steps timed stage by stage "
	          "(matmuls, attention, norms, ...): where the time goes, on the CPU"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_ENGINE_OPTS(T, engine),
	EV_O_END,
};
#undef T

static const ev_cmd_spec bench_spec = {
	.name = "bench engine",
	.synopsis = "--model PATH [--prompt N] [--decode N] [--batch B] [--repeats R] [OPTIONS]",
	.about = "Prefill and decode tokens/s of the bundled engine, batch 1 and batch B, fast path beside\n"
	         "the reference path, with peak RSS.",
	.opts = bench_opts_table,
};

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv)
{
	bench_opts bo = {.prompt = 128, .decode = 32, .batch = 8, .ref_prompt = 16, .ref_decode = 4, .repeats = 3,
	                 .json = cli->json};
	ev_engine_flags_init(&bo.engine);
	int prc = ev_opt_parse(&bench_spec, &bo, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!bo.model) {
		fprintf(stderr, "evald bench engine: --model is required\n");
		return EV_EXIT_USAGE;
	}
	if (bo.bandwidth && strcmp(bo.bandwidth, "weights") && strcmp(bo.bandwidth, "buffer")) {
		fprintf(stderr, "evald bench engine: --bandwidth needs weights or buffer, not '%s'\n", bo.bandwidth);
		return EV_EXIT_USAGE;
	}
	char *model_dir = NULL;
	if (eng_model_path_resolve(bo.model, &model_dir)) {
		fprintf(stderr, "evald bench engine: %s\n", ev_error_msg());
		return EV_EXIT_FAIL;
	}
	const char *model = model_dir;
	int64_t prompt = bo.prompt, decode = bo.decode, threads = bo.threads, batch = bo.batch,
	        ref_prompt = bo.ref_prompt, ref_decode = bo.ref_decode, repeats = bo.repeats;
	bool with_ref = !bo.no_ref, only_ref = bo.only_ref, json = bo.json;
	eng_model_options mo = bo.engine.mo;
	mo.threads = (int)threads;
	eng_model *m = NULL;
	row rows[3];
	int n = 0, rc = EV_EXIT_FAIL;
	double t0 = ev_now();
	if (eng_model_load(&m, model, &mo))
		goto fail;
	double t_load = ev_now() - t0;
	eng_model_info in;
	eng_model_get_info(m, &in);
	if (prompt + decode > in.max_context) {
		ev_error_set(EV_E_LIMIT, "prompt + decode (%lld) pass the context limit %ld", (long long)(prompt + decode),
		             in.max_context);
		goto fail;
	}
	/* --backend cuda: the fast rows are the device's, and its bound is the
	 * device's copy bandwidth */
	bool on_dev = in.backend && !strcmp(in.backend, "cuda");
	if (bo.profile && (on_dev || only_ref || decode < 1)) {
		ev_error_set(EV_E_INVALID, "--profile times the fast CPU path's decode steps: %s",
		             on_dev ? "the device runs its stages asynchronously, so their times would be launches"
		             : only_ref ? "not with --reference-only" : "it needs --decode of at least 1");
		goto fail;
	}
	long nthreads = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
	/* on the CPU, the bound's bandwidth is the weights' own: read whole
	 * just before each timed batch-1 decode, so that each decode meets the
	 * bandwidth of its moment (this machine's moves by half between
	 * minutes); weights under 64 MiB would time the caches instead */
	bw_src wsrc = {0};
	const void *wp[BW_REGIONS];
	size_t wl[BW_REGIONS];
	int nw = eng_model_weight_regions(m, wp, wl, BW_REGIONS);
	for (int i = 0; i < nw && i < BW_REGIONS; i++)
		bw_add(&wsrc, wp[i], wl[i]);
	bool paired = !on_dev && !only_ref && decode > 0 && nw <= BW_REGIONS && wsrc.total > 0 &&
	              (bo.bandwidth ? !strcmp(bo.bandwidth, "weights") : wsrc.total >= ((size_t)64 << 20));
	if (!only_ref) {
		rows[n].path = on_dev ? "cuda" : "fast";
		if (measure(m, in.vocab, 1, prompt, decode, (int)repeats, paired ? &wsrc : NULL, (int)nthreads, &rows[n]))
			goto fail;
		n++;
		if (batch > 1) {
			rows[n].path = on_dev ? "cuda" : "fast";
			if (measure(m, in.vocab, (int)batch, prompt, decode, (int)repeats, NULL, 0, &rows[n]))
				goto fail;
			n++;
		}
	}
	/* --profile: one more batch-1 run, its prefill and its decode steps
	 * timed stage by stage (the decode's as a step's) */
	eng_prof prof = {0}, pprof = {0};
	row prow = {0};
	double prof_step = 0, prof_other = 0, prof_mm = 0, pre_s = 0, pre_other = 0, pre_mm = 0;
	if (bo.profile) {
		if (measure_once(m, in.vocab, 1, prompt, decode, NULL, 0, NULL, &pprof, &prof, &prow))
			goto fail;
		prof_step = 1.0 / prow.decode_tok_s;
		prof_sums(&prof, (double)decode, prof_step, &prof_other, &prof_mm);
		pre_s = (double)prompt / prow.prefill_tok_s;
		prof_sums(&pprof, 1.0, pre_s, &pre_other, &pre_mm);
	}
	if (with_ref || only_ref) {
		if (eng_model_set_backend(m, ENG_BACKEND_REF))
			goto fail;
		rows[n].path = "reference";
		if (measure(m, in.vocab, 1, ref_prompt, ref_decode, 1, NULL, 0, &rows[n]))
			goto fail;
		n++;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double rss = (double)ru.ru_maxrss * 1024.0;
	/* a decode step at batch 1 reads every weight a token uses once (the
	 * active share of the weights' stored bytes) and the keys and values
	 * its attention takes (eng_model_kv_read_bytes, the mean over the
	 * timed steps): its ceiling is read bandwidth over those bytes */
	double bw = 0;
	if (!on_dev && !paired) {
		bw = read_bandwidth((int)nthreads, in.weights_huge);
	} else if (on_dev) {
#ifdef EV_HAVE_CUDA
		double gbps = 0;
		if (eng_cuda_copy_bandwidth(&gbps, (size_t)1 << 30, 5) == 0)
			bw = gbps * 1e9;
		ev_error_clear();
#endif
	}
	double step_wbytes = (double)in.decode_weight_bytes;
	double step_kv = 0;
	bool kv_exact = true;
	for (int64_t i = 0; i < decode; i++) {
		bool ex = true;
		step_kv += (double)eng_model_kv_read_bytes(m, (long)(prompt + i + 1), &ex) / (double)decode;
		kv_exact = kv_exact && ex;
	}
	double step_bytes = step_wbytes + step_kv;
	double dec1 = !only_ref && n ? rows[0].decode_tok_s : 0;
	/* paired: each run's decode over its own moment's bound, then the mean
	 * and spread of those shares; the bandwidths' mean, least and most */
	double share = 0, share_sd = 0, bw_lo = 0, bw_hi = 0;
	if (paired && step_bytes > 0) {
		double sh[MAX_REPEATS];
		int k = 0;
		bw_lo = bw_hi = rows[0].run_bw[0];
		for (int r = 0; r < rows[0].repeats; r++) {
			double b = rows[0].run_bw[r];
			bw += b / rows[0].repeats;
			bw_lo = b < bw_lo ? b : bw_lo, bw_hi = b > bw_hi ? b : bw_hi;
			if (b > 0)
				sh[k++] = rows[0].run_decode[r] / (b / step_bytes);
		}
		if (k)
			mean_sd(sh, k, &share, &share_sd);
	}
	double bound = bw > 0 && step_bytes > 0 ? bw / step_bytes : 0;
	if (!paired && dec1 > 0 && bound > 0)
		share = dec1 / bound;
	char kernels[200];
	eng_cpu_kernels(kernels, sizeof kernels, in.activation_bits);
#ifdef EV_HAVE_CUDA
	if (on_dev)
		snprintf(kernels, sizeof kernels, "cuda: f32 activations; GEMV below %d rows (block types read in place), "
		                                  "cuBLASLt GEMM from %d (block types decoded to f32)",
		         ENG_CUDA_GEMM_ROWS, ENG_CUDA_GEMM_ROWS);
#endif
	if (json) {
		cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "results");
		cJSON_AddStringToObject(o, "model", model);
		cJSON_AddStringToObject(o, "architecture", in.architecture);
		cJSON_AddNumberToObject(o, "params", (double)in.params_total);
		cJSON_AddNumberToObject(o, "weight_bytes", (double)in.weight_bytes);
		cJSON_AddStringToObject(o, "weight_pages", in.weights_huge ? "huge" : "file");
		cJSON_AddNumberToObject(o, "weight_quad_bytes", (double)in.quad_bytes);
		cJSON_AddStringToObject(o, "dtypes", in.dtypes);
		cJSON_AddStringToObject(o, "kernels", kernels);
		cJSON_AddStringToObject(o, "backend", in.backend ? in.backend : "cpu");
		cJSON_AddNumberToObject(o, "threads", (double)threads);
		cJSON_AddNumberToObject(o, "load_s", t_load);
		cJSON_AddNumberToObject(o, "peak_rss_bytes", rss);
		cJSON_AddNumberToObject(o, "decode_bytes_per_token", step_bytes);
		cJSON_AddNumberToObject(o, "decode_weight_bytes_per_token", step_wbytes);
		cJSON_AddNumberToObject(o, "decode_kv_bytes_per_token", step_kv);
		cJSON_AddBoolToObject(o, "decode_kv_bytes_exact", kv_exact);
		cJSON_AddNumberToObject(o, "read_bandwidth_bytes_s", bw);
		cJSON_AddStringToObject(o, "read_bandwidth_of", paired ? "weights" : on_dev ? "device copy" : "buffer");
		cJSON_AddNumberToObject(o, "decode_bound_tok_s", bound);
		if (share > 0)
			cJSON_AddNumberToObject(o, "decode_share_of_bound", share);
		if (paired) {
			cJSON_AddNumberToObject(o, "decode_share_of_bound_sd", share_sd);
			cJSON *rb = cJSON_AddArrayToObject(o, "read_bandwidth_runs");
			for (int r = 0; r < rows[0].repeats; r++)
				cJSON_AddItemToArray(rb, cJSON_CreateNumber(rows[0].run_bw[r]));
			cJSON *rd = cJSON_AddArrayToObject(o, "decode_tok_s_runs");
			for (int r = 0; r < rows[0].repeats; r++)
				cJSON_AddItemToArray(rd, cJSON_CreateNumber(rows[0].run_decode[r]));
		}
		if (bo.profile) {
			json_profile(o, "decode_profile", &prof, prof_step, prof_other, prof_mm, prow.decode_tok_s);
			json_profile(o, "prefill_profile", &pprof, pre_s, pre_other, pre_mm, prow.prefill_tok_s);
		}
		for (int i = 0; i < n; i++) {
			cJSON *r = cJSON_CreateObject();
			cJSON_AddStringToObject(r, "path", rows[i].path);
			cJSON_AddNumberToObject(r, "batch", rows[i].batch);
			cJSON_AddNumberToObject(r, "prompt_tokens", (double)rows[i].prompt);
			cJSON_AddNumberToObject(r, "decode_tokens", (double)rows[i].decode);
			cJSON_AddNumberToObject(r, "prefill_tok_s", rows[i].prefill_tok_s);
			cJSON_AddNumberToObject(r, "decode_tok_s", rows[i].decode_tok_s);
			cJSON_AddNumberToObject(r, "prefill_tok_s_sd", rows[i].prefill_sd);
			cJSON_AddNumberToObject(r, "decode_tok_s_sd", rows[i].decode_sd);
			cJSON_AddNumberToObject(r, "repeats", rows[i].repeats);
			if (on_dev) {
				cJSON_AddNumberToObject(r, "decode_step_uploads", rows[i].step_up);
				cJSON_AddNumberToObject(r, "decode_step_downloads", rows[i].step_down);
				cJSON_AddNumberToObject(r, "decode_step_uploads_skipped", rows[i].step_skipped);
			}
			cJSON_AddItemToArray(arr, r);
		}
		char *s = ev_json_print(o);
		printf("%s\n", s ? s : "{}");
		free(s);
		cJSON_Delete(o);
	} else {
		printf("%s (%s, %.1f M params, %.1f MiB weights, %s, %s), loaded in %.3f s\n", model, in.architecture,
		       in.params_total / 1e6, in.weight_bytes / 1048576.0, in.dtypes,
		       in.weights_huge ? "read into huge pages" : "mmapped", t_load);
		printf("  kernels: %s\n", kernels);
		if (in.quad_bytes)
			printf("  layout: %.1f MiB of the weights as quads of four rows (EVALD_WEIGHT_LAYOUT=rows keeps rows)\n",
			       in.quad_bytes / 1048576.0);
		printf("  %-10s %5s %7s %7s %18s %18s  (mean +- sd of %lld runs after a warm-up)\n", "path", "batch",
		       "prompt", "decode", "prefill tok/s", "decode tok/s", (long long)repeats);
		for (int i = 0; i < n; i++)
			printf("  %-10s %5d %7ld %7ld %9.2f +- %6.2f %9.2f +- %6.2f\n", rows[i].path, rows[i].batch,
			       rows[i].prompt, rows[i].decode, rows[i].prefill_tok_s, rows[i].prefill_sd,
			       rows[i].decode_tok_s, rows[i].decode_sd);
		for (int i = 0; on_dev && i < n; i++)
			if (!strcmp(rows[i].path, "cuda"))
				printf("  batch %d: %.1f uploads and %.1f downloads a decode step (%.1f table uploads the device "
				       "held already)\n", rows[i].batch, rows[i].step_up, rows[i].step_down, rows[i].step_skipped);
		printf("  peak RSS %.1f MiB\n", rss / 1048576.0);
		/* the bound, then the timed batch-1 decode set against it, where
		 * one was timed (not with --reference-only or --decode 0) */
		if (bound > 0)
			printf("  decode step: %.3g MiB of weights + %s%.3g MiB of keys and values (the mean over %lld steps)\n",
			       step_wbytes / 1048576.0, kv_exact ? "" : "at most ", step_kv / 1048576.0, (long long)decode);
		if (bound > 0 && on_dev)
			printf("  memory bound: %.1f MiB a decode step / %.1f GB/s (the device's copy bandwidth) = %.1f tok/s",
			       step_bytes / 1048576.0, bw / 1e9, bound);
		else if (bound > 0 && paired)
			printf("  memory bound: %.1f MiB a decode step; the weights read at %.1f-%.1f GB/s (%ld threads, %s, "
			       "just before each timed decode) = %.1f-%.1f tok/s",
			       step_bytes / 1048576.0, bw_lo / 1e9, bw_hi / 1e9, nthreads,
			       in.weights_huge ? "huge pages" : "mapped", bw_lo / step_bytes, bw_hi / step_bytes);
		else if (bound > 0)
			printf("  memory bound: %.1f MiB a decode step / %.1f GB/s read (%ld threads, %s pages) = %.1f tok/s",
			       step_bytes / 1048576.0, bw / 1e9, nthreads, in.weights_huge ? "huge" : "4 KiB", bound);
		if (bound > 0 && on_dev)
			printf("; batch-1 decode at %.0f%% of it\n", dec1 > 0 ? 100.0 * dec1 / bound : 0.0);
		else if (bound > 0 && share > 0 && paired)
			printf("; batch-1 decode at %.0f%% +- %.0f%% of it, run by run\n", 100.0 * share, 100.0 * share_sd);
		else if (bound > 0 && share > 0)
			printf("; batch-1 decode at %.0f%% of it\n", 100.0 * share);
		else if (bound > 0)
			printf(" (no batch-1 decode was timed to set against it)\n");
		if (bo.profile) {
			char h[160];
			snprintf(h, sizeof h, "prefill by stage (one more batch-1 run: %ld tokens at %.1f tok/s, timed stage by stage",
			         (long)prompt, prow.prefill_tok_s);
			print_profile(h, &pprof, pre_s, pre_other, pre_mm);
			snprintf(h, sizeof h, "decode step by stage (its %ld steps at %.1f tok/s, a step", (long)decode,
			         prow.decode_tok_s);
			print_profile(h, &prof, prof_step, prof_other, prof_mm);
		}
	}
	rc = 0;
	goto done;
fail:
	fprintf(stderr, "evald bench engine: %s\n", ev_error_msg());
done:
	eng_model_free(m);
	free(model_dir);
	return rc;
}
