/*
 * evald bench attention: dense against MSA attention at growing context
 * lengths, in one run: prefill time, decode time per token, KV bytes per
 * token. One KV cache per length serves both: prefilled once with MSA
 * (and, up to --dense-prefill-max, once more with dense attention to time
 * it), then decoded with each in turn from the same position (the
 * fastest of --repeats rounds of --decode tokens). On the
 * recall checkpoint (evald engine mkmodel --arch recall) the prompt is a
 * needle in a haystack and each mode reports whether it answered.
 *   evald bench attention --model DIR [--lengths 4k,32k,128k,1m] [--decode N]
 *        [--repeats R] [--depth PCT] [--distractors N] [--dense-prefill-max N] [--threads N]
 *        [MSA/KV flags] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "base/base.h"
#include "evald/cli.h"

int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv);

#define MAX_LENGTHS 16

typedef struct {
	double prefill_s;  /* < 0: not measured */
	double decode_ms;  /* per token */
	int answered;      /* -1 unknown, 0/1 */
} mode_fig;

typedef struct {
	long tokens;
	uint64_t kv_bytes;
	const char *skipped; /* why, or NULL */
	mode_fig msa, dense;
	double dense_prefill_est_s; /* extrapolated when not measured, else -1 */
} len_fig;

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (kb)
		return (uint64_t)kb * 1024;
	long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

static int argmax(const float *v, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[b])
			b = i;
	return b;
}

/* decode `n` tokens from position `at` of s (truncating back first), in
 * `rounds` rounds: *ms is the fastest round's mean per token, the figure
 * least disturbed by whatever else shares the machine */
static int decode(eng_seq *s, long at, const int32_t *toks, int n, int rounds, double *ms)
{
	int rc = 0;
	*ms = 0;
	for (int r = 0; r < rounds && !rc; r++) {
		rc = eng_seq_truncate(s, at);
		double t0 = ev_now();
		for (int i = 0; i < n && !rc; i++)
			rc = eng_forward(s, toks + i, 1, NULL);
		double t = n ? (ev_now() - t0) * 1000.0 / n : 0;
		*ms = r == 0 || t < *ms ? t : *ms;
	}
	return rc;
}

static void put_mode(ev_buf *b, const char *name, const mode_fig *f)
{
	ev_buf_printf(b, "\"%s\":{", name);
	if (f->prefill_s >= 0)
		ev_buf_printf(b, "\"prefill_s\":%.4f,", f->prefill_s);
	else
		ev_buf_puts(b, "\"prefill_s\":null,");
	ev_buf_printf(b, "\"decode_ms_per_token\":%.4f,\"answered\":%s}", f->decode_ms,
		      f->answered < 0 ? "null" : f->answered ? "true" : "false");
}

typedef struct {
	const char *model, *lengths;
	int ndec, rounds, depth, distractors, threads;
	int64_t dense_max;
	bool json;
	ev_engine_flags engine;
} attn_opts;

#define T attn_opts
static const ev_opt attn_opts_table[] = {
	EV_O_STR("--model", T, model, "DIR", "the checkpoint (required)"),
	EV_O_STR("--lengths", T, lengths, "LIST", "context lengths (4k,32k,128k,1m)"),
	EV_O_INT("--decode", T, ndec, 1, 4096, "N", "tokens decoded at each length"),
	EV_O_INT("--repeats", T, rounds, 1, 100, "R", "rounds; the fastest is reported"),
	EV_O_INT("--depth", T, depth, 0, 100, "PCT", "where the needle sits (recall checkpoint)"),
	EV_O_INT("--distractors", T, distractors, 0, 1 << 30, "N", "other pairs in the haystack"),
	EV_O_INT("--dense-prefill-max", T, dense_max, 0, 1L << 30, "N", "longest context prefilled densely"),
	EV_O_INT("--threads", T, threads, 0, 1024, "N", "CPU threads (0: all cores)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_ENGINE_OPTS(T, engine),
	EV_O_END,
};
#undef T

static const ev_cmd_spec attn_spec = {
	.name = "bench attention",
	.synopsis = "--model DIR [--lengths 4k,32k,128k,1m] [--decode N] [--repeats R] [OPTIONS]",
	.about = "Dense against MSA attention on one cache, by context length: prefill seconds, decode\n"
	         "ms/token, KV bytes, and whether the needle is answered (recall checkpoint).",
	.opts = attn_opts_table,
};

int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv)
{
	attn_opts ao = {.ndec = 16, .rounds = 3, .depth = 50, .dense_max = 32768, .json = cli->json};
	ev_engine_flags_init(&ao.engine);
	int prc = ev_opt_parse(&attn_spec, &ao, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!ao.model) {
		fprintf(stderr, "evald bench attention: --model is required\n");
		return EV_EXIT_USAGE;
	}
	const char *model = ao.model;
	long lengths[MAX_LENGTHS] = {4096, 32768, 131072, 1048576};
	size_t lens[MAX_LENGTHS];
	int nlen = 4;
	if (ao.lengths) {
		if ((nlen = ev_cli_parse_lengths(lens, MAX_LENGTHS, ao.lengths, "--lengths")) < 0)
			return ev_cli_fail("bench attention"), EV_EXIT_USAGE;
		for (int i = 0; i < nlen; i++)
			lengths[i] = (long)lens[i];
	}
	int64_t ndec = ao.ndec, rounds = ao.rounds, depth = ao.depth, distractors = ao.distractors,
	        dense_max = ao.dense_max, threads = ao.threads;
	bool json = ao.json;
	eng_model_options mo = ao.engine.mo;
	mo.threads = (int)threads;
	if (mo.attention.kind == ENG_ATTN_AUTO || mo.attention.kind == ENG_ATTN_DENSE)
		mo.attention.kind = ENG_ATTN_MSA; /* both are run; MSA settings from flags/config */
	eng_model *m = NULL;
	eng_seq *s = NULL;
	int32_t *toks = NULL;
	len_fig fig[MAX_LENGTHS];
	int rc = EV_EXIT_FAIL;
	if (eng_model_load(&m, model, &mo))
		goto fail;
	eng_model_info in;
	eng_model_get_info(m, &in);
	eng_attention_options at;
	eng_model_get_attention(m, &at);
	bool recall = eng_model_is_recall(m);
	uint64_t avail = mem_available();
	double dense_ref_len = 0, dense_ref_s = 0;
	for (int li = 0; li < nlen; li++) {
		len_fig *f = &fig[li];
		memset(f, 0, sizeof(*f));
		f->msa.answered = f->dense.answered = -1;
		f->msa.prefill_s = f->dense.prefill_s = -1;
		f->dense_prefill_est_s = -1;
		long L = lengths[li];
		if (L + ndec > in.max_context)
			L = in.max_context - ndec; /* "1m" = as much as the model holds */
		f->tokens = L;
		f->kv_bytes = in.kv_bytes_per_token * (uint64_t)(L + ndec + 2 * in.block_size);
		if (L < 16) {
			f->skipped = "shorter than 16 tokens";
			continue;
		}
		if (avail && f->kv_bytes > avail / 10 * 8) {
			f->skipped = "KV cache would not fit in available memory";
			continue;
		}
		int32_t *nt = realloc(toks, (size_t)(L + ndec) * sizeof(*toks)), want = -1;
		if (!nt) {
			ev_error_set(EV_E_NOMEM, "out of memory for %ld tokens", L);
			goto fail;
		}
		toks = nt;
		if (recall) {
			if (eng_recall_tokens(toks, L, (int)depth, (int)(distractors < L - 4 ? distractors : L - 4),
					      (uint64_t)L, &want))
				goto fail;
		} else {
			ev_rng r;
			ev_rng_seed(&r, (uint64_t)L);
			for (long i = 0; i < L; i++)
				toks[i] = (int32_t)ev_rng_below(&r, (uint64_t)in.vocab);
		}
		for (long i = L; i < L + ndec; i++)
			toks[i] = toks[i - L]; /* decode input: any tokens will do */
		if (!json)
			fprintf(stderr, "evald bench attention: %ld tokens ...\n", L);
		eng_seq_free(s);
		s = NULL;
		if (eng_seq_new(&s, m) || eng_model_set_attention(m, ENG_ATTN_MSA))
			goto fail;
		double t0 = ev_now();
		if (eng_forward(s, toks, (int)L, NULL))
			goto fail;
		f->msa.prefill_s = ev_now() - t0;
		if (recall)
			f->msa.answered = argmax(eng_seq_logits(s), in.vocab) == want;
		if (decode(s, L, toks + L, (int)ndec, (int)rounds, &f->msa.decode_ms))
			goto fail;
		if (eng_model_set_attention(m, ENG_ATTN_DENSE))
			goto fail;
		if (L <= dense_max) {
			if (eng_seq_truncate(s, 0))
				goto fail;
			t0 = ev_now();
			if (eng_forward(s, toks, (int)L, NULL))
				goto fail;
			f->dense.prefill_s = ev_now() - t0;
			dense_ref_len = (double)L, dense_ref_s = f->dense.prefill_s;
			if (recall)
				f->dense.answered = argmax(eng_seq_logits(s), in.vocab) == want;
		} else if (dense_ref_len > 0) {
			/* attention dominates: quadratic in the length */
			f->dense_prefill_est_s = dense_ref_s * ((double)L / dense_ref_len) * ((double)L / dense_ref_len);
		}
		/* dense decode over the same cache (MSA-built past dense_max) */
		if (decode(s, L, toks + L, (int)ndec, (int)rounds, &f->dense.decode_ms))
			goto fail;
		if (recall && f->dense.answered < 0) {
			/* the answer at the last prompt position, attended densely */
			if (eng_seq_truncate(s, L - 1) || eng_forward(s, toks + L - 1, 1, NULL))
				goto fail;
			f->dense.answered = argmax(eng_seq_logits(s), in.vocab) == want;
		}
	}
	/* the targets, measured */
	double r128 = -1, d32 = -1, dmax = -1;
	long lmax = 0;
	for (int li = 0; li < nlen; li++) {
		const len_fig *f = &fig[li];
		if (f->skipped)
			continue;
		if (f->tokens >= 131072 - 64 && f->tokens <= 131072 && f->msa.decode_ms > 0)
			r128 = f->dense.decode_ms / f->msa.decode_ms;
		if (f->tokens == 32768)
			d32 = f->msa.decode_ms;
		if (f->tokens > lmax)
			lmax = f->tokens, dmax = f->msa.decode_ms;
	}
	ev_buf b = EV_BUF_INIT(1u << 20);
	ev_buf_puts(&b, "{\"model\":");
	ev_json_buf_str(&b, model);
	ev_buf_printf(&b,
		      ",\"recall\":%s,\"kv_bytes_per_token\":%llu,\"decode_tokens\":%lld,\"msa\":{\"block_size\":%d,"
		      "\"top_k\":%d,\"sink_blocks\":%d,\"local_blocks\":%d,\"dense_below\":%ld},\"lengths\":[",
		      recall ? "true" : "false", (unsigned long long)in.kv_bytes_per_token, (long long)ndec,
		      at.block_size, at.top_k, at.sink_blocks, at.local_blocks, at.dense_below);
	for (int li = 0; li < nlen; li++) {
		const len_fig *f = &fig[li];
		ev_buf_printf(&b, "%s{\"tokens\":%ld,\"kv_bytes\":%llu,", li ? "," : "", f->tokens,
			      (unsigned long long)f->kv_bytes);
		if (f->skipped) {
			ev_buf_printf(&b, "\"skipped\":\"%s\"}", f->skipped);
			continue;
		}
		put_mode(&b, "msa", &f->msa);
		ev_buf_putc(&b, ',');
		put_mode(&b, "dense", &f->dense);
		if (f->dense_prefill_est_s >= 0)
			ev_buf_printf(&b, ",\"dense_prefill_estimate_s\":%.1f", f->dense_prefill_est_s);
		ev_buf_printf(&b, ",\"dense_over_msa_decode\":%.2f}",
			      f->msa.decode_ms > 0 ? f->dense.decode_ms / f->msa.decode_ms : 0.0);
	}
	ev_buf_puts(&b, "],\"targets\":{");
	if (r128 > 0)
		ev_buf_printf(&b, "\"msa_decode_cheaper_at_128k\":%.2f,\"msa_5x_cheaper_at_128k\":%s", r128,
			      r128 >= 5 ? "true" : "false");
	else
		ev_buf_puts(&b, "\"msa_decode_cheaper_at_128k\":null");
	if (d32 > 0 && lmax > 32768)
		ev_buf_printf(&b, ",\"msa_decode_growth_32k_to_%ld\":%.2f,\"within_2x\":%s", lmax, dmax / d32,
			      dmax / d32 <= 2 ? "true" : "false");
	ev_buf_puts(&b, "}}\n");
	if (json) {
		fputs(b.data ? b.data : "", stdout);
	} else {
		printf("model %s%s, KV %llu bytes/token, MSA block %d top_k %d sink %d local %d dense_below %ld\n", model,
		       recall ? " (recall checkpoint)" : "", (unsigned long long)in.kv_bytes_per_token, at.block_size,
		       at.top_k, at.sink_blocks, at.local_blocks, at.dense_below);
		printf("%9s %10s | %11s %11s %6s | %11s %11s %6s | %7s\n", "tokens", "KV MiB", "msa pre s", "msa ms/tok",
		       "ans", "dense pre s", "dense ms/tok", "ans", "dense/msa");
		for (int li = 0; li < nlen; li++) {
			const len_fig *f = &fig[li];
			if (f->skipped) {
				printf("%9ld %10.1f | skipped: %s\n", f->tokens, f->kv_bytes / 1048576.0, f->skipped);
				continue;
			}
			char dp[32];
			if (f->dense.prefill_s >= 0)
				snprintf(dp, sizeof dp, "%.3f", f->dense.prefill_s);
			else if (f->dense_prefill_est_s >= 0)
				snprintf(dp, sizeof dp, "~%.0f est", f->dense_prefill_est_s);
			else
				snprintf(dp, sizeof dp, "skipped");
			printf("%9ld %10.1f | %11.3f %11.3f %6s | %11s %11.3f %6s | %7.2f\n", f->tokens,
			       f->kv_bytes / 1048576.0, f->msa.prefill_s, f->msa.decode_ms,
			       f->msa.answered < 0 ? "-" : f->msa.answered ? "yes" : "no", dp, f->dense.decode_ms,
			       f->dense.answered < 0 ? "-" : f->dense.answered ? "yes" : "no",
			       f->msa.decode_ms > 0 ? f->dense.decode_ms / f->msa.decode_ms : 0.0);
		}
		if (r128 > 0)
			printf("target: MSA >= 5x cheaper per decoded token at 128K: %.2fx (%s)\n", r128,
			       r128 >= 5 ? "met" : "NOT met");
		if (d32 > 0 && lmax > 32768)
			printf("target: MSA decode cost 32K -> %ld within 2x: %.2fx (%s)\n", lmax, dmax / d32,
			       dmax / d32 <= 2 ? "met" : "NOT met");
	}
	ev_buf_free(&b);
	rc = 0;
	goto done;
fail:
	fprintf(stderr, "evald bench attention: %s\n", ev_error_msg());
done:
	free(toks);
	eng_seq_free(s);
	eng_model_free(m);
	return rc;
}
