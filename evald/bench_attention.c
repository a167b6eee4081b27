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
#include "engine/gguf/gguf.h"
#include "base/base.h"
#include "evald/cli.h"

int ev_bench_attention_main(const ev_cli *cli, int argc, char **argv);

#define MAX_LENGTHS 16

typedef struct {
	double prefill_s;  /* < 0: not measured */
	double decode_ms;  /* per token */
	int answered;      /* -1 unknown, 0/1 */
	/* MiniMax-M3's indexer (< 0: none): its share of prefill and decode
	 * time, and the share of (query, block) pairs it scored exactly in
	 * decode (the rest its bound skipped) */
	double index_prefill, index_decode, scored_decode;
} mode_fig;

typedef struct {
	long tokens;
	uint64_t kv_bytes;
	const char *skipped; /* why, or NULL */
	mode_fig msa, dense;
	double dense_prefill_est_s; /* extrapolated when not measured, else -1 */
} len_fig;

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
	ev_buf_printf(b, "\"decode_ms_per_token\":%.4f,\"answered\":%s", f->decode_ms,
		      f->answered < 0 ? "null" : f->answered ? "true" : "false");
	if (f->index_decode >= 0)
		ev_buf_printf(b, ",\"index_share_prefill\":%.4f,\"index_share_decode\":%.4f,\"index_scored_decode\":%.4f",
			      f->index_prefill, f->index_decode, f->scored_decode);
	ev_buf_putc(b, '}');
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
	EV_O_STR("--model", T, model, "PATH", "the checkpoint: a folder or a GGUF file (required)"),
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
	.synopsis = "--model PATH [--lengths 4k,32k,128k,1m] [--decode N] [--repeats R] [OPTIONS]",
	.about = "Dense against MSA attention on one cache, by context length: prefill seconds, decode\n"
	         "ms/token, KV bytes, and whether the needle is answered (recall checkpoint).",
	.opts = attn_opts_table,
};

/* What the measurement of every length shares. */
typedef struct {
	const attn_opts *o;
	eng_model *m;
	eng_seq *s;
	int32_t *toks;
	eng_model_info in;
	bool recall;
	uint64_t avail;
	double dense_ref_len, dense_ref_s; /* the longest dense prefill measured */
} bench_state;

/* The prompt of L tokens (and ndec more to decode) into b->toks; *want the
 * recall checkpoint's answer. */
static int make_prompt(bench_state *b, long L, int32_t *want)
{
	const attn_opts *o = b->o;
	int32_t *nt = realloc(b->toks, (size_t)(L + o->ndec) * sizeof(*nt));
	if (!nt)
		return ev_error_set(EV_E_NOMEM, "out of memory for %ld tokens", L);
	b->toks = nt;
	if (b->recall) {
		int rc = eng_recall_tokens(nt, L, o->depth, (int)(o->distractors < L - 4 ? o->distractors : L - 4),
		                           (uint64_t)L, want);
		if (rc)
			return rc;
	} else {
		ev_rng r;
		ev_rng_seed(&r, (uint64_t)L);
		for (long i = 0; i < L; i++)
			nt[i] = (int32_t)ev_rng_below(&r, (uint64_t)b->in.vocab);
	}
	for (long i = L; i < L + o->ndec; i++)
		nt[i] = nt[i - L]; /* decode input: any tokens will do */
	return 0;
}

/* MSA prefill and decode, then dense prefill (up to --dense-prefill-max,
 * extrapolated past it) and dense decode over the same cache. */
static int measure(bench_state *b, len_fig *f, long L)
{
	const attn_opts *o = b->o;
	int32_t want = -1;
	int rc = make_prompt(b, L, &want);
	if (rc)
		return rc;
	if (!o->json)
		fprintf(stderr, "evald bench attention: %ld tokens ...\n", L);
	eng_seq_free(b->s);
	b->s = NULL;
	if ((rc = eng_seq_new(&b->s, b->m)) || (rc = eng_model_set_attention(b->m, ENG_ATTN_MSA)))
		return rc;
	eng_index_counts c0, c1, c2;
	eng_model_index_counts(b->m, &c0);
	double t0 = ev_now();
	if ((rc = eng_forward(b->s, b->toks, (int)L, NULL)))
		return rc;
	f->msa.prefill_s = ev_now() - t0;
	eng_model_index_counts(b->m, &c1);
	if (b->recall)
		f->msa.answered = argmax(eng_seq_logits(b->s), b->in.vocab) == want;
	t0 = ev_now();
	if ((rc = decode(b->s, L, b->toks + L, o->ndec, o->rounds, &f->msa.decode_ms)))
		return rc;
	double td = ev_now() - t0;
	eng_model_index_counts(b->m, &c2);
	if (c1.candidates > c0.candidates || c1.seconds > c0.seconds) { /* the model has an indexer */
		f->msa.index_prefill = (c1.seconds - c0.seconds) / f->msa.prefill_s;
		f->msa.index_decode = td > 0 ? (c2.seconds - c1.seconds) / td : 0;
		f->msa.scored_decode =
			c2.candidates > c1.candidates ? (double)(c2.scored - c1.scored) / (double)(c2.candidates - c1.candidates) : 0;
	}
	if ((rc = eng_model_set_attention(b->m, ENG_ATTN_DENSE)))
		return rc;
	if (L <= o->dense_max) {
		if ((rc = eng_seq_truncate(b->s, 0)))
			return rc;
		t0 = ev_now();
		if ((rc = eng_forward(b->s, b->toks, (int)L, NULL)))
			return rc;
		f->dense.prefill_s = ev_now() - t0;
		b->dense_ref_len = (double)L, b->dense_ref_s = f->dense.prefill_s;
		if (b->recall)
			f->dense.answered = argmax(eng_seq_logits(b->s), b->in.vocab) == want;
	} else if (b->dense_ref_len > 0) {
		/* attention dominates: quadratic in the length */
		double r = (double)L / b->dense_ref_len;
		f->dense_prefill_est_s = b->dense_ref_s * r * r;
	}
	/* dense decode over the same cache (MSA-built past dense_max) */
	if ((rc = decode(b->s, L, b->toks + L, o->ndec, o->rounds, &f->dense.decode_ms)))
		return rc;
	if (b->recall && f->dense.answered < 0) {
		/* the answer at the last prompt position, attended densely */
		if ((rc = eng_seq_truncate(b->s, L - 1)) || (rc = eng_forward(b->s, b->toks + L - 1, 1, NULL)))
			return rc;
		f->dense.answered = argmax(eng_seq_logits(b->s), b->in.vocab) == want;
	}
	return 0;
}

/* One length's figures, or why it was skipped. */
static int measure_length(bench_state *b, len_fig *f, long asked)
{
	memset(f, 0, sizeof(*f));
	f->msa.answered = f->dense.answered = -1;
	f->msa.prefill_s = f->dense.prefill_s = -1;
	f->msa.index_prefill = f->msa.index_decode = f->msa.scored_decode = -1;
	f->dense.index_prefill = f->dense.index_decode = f->dense.scored_decode = -1;
	f->dense_prefill_est_s = -1;
	long L = asked;
	if (L + b->o->ndec > b->in.max_context)
		L = b->in.max_context - b->o->ndec; /* "1m" = as much as the model holds */
	f->tokens = L;
	f->kv_bytes = b->in.kv_bytes_per_token * (uint64_t)(L + b->o->ndec + 2 * b->in.block_size);
	if (L < 16)
		f->skipped = "shorter than 16 tokens";
	else if (b->avail && f->kv_bytes > b->avail / 10 * 8)
		f->skipped = "KV cache would not fit in available memory";
	return f->skipped ? 0 : measure(b, f, L);
}

/* The targets, from the measured lengths. */
typedef struct {
	double r128, d32, dmax, rmax; /* < 0: not measured */
	long lmax;
} targets;

static targets targets_of(const len_fig *fig, int nlen)
{
	targets t = {-1, -1, -1, -1, 0};
	for (int li = 0; li < nlen; li++) {
		const len_fig *f = &fig[li];
		if (f->skipped)
			continue;
		if (f->tokens >= 131072 - 64 && f->tokens <= 131072 && f->msa.decode_ms > 0)
			t.r128 = f->dense.decode_ms / f->msa.decode_ms;
		if (f->tokens == 32768)
			t.d32 = f->msa.decode_ms;
		if (f->tokens > t.lmax)
			t.lmax = f->tokens, t.dmax = f->msa.decode_ms,
			t.rmax = f->msa.decode_ms > 0 ? f->dense.decode_ms / f->msa.decode_ms : -1;
	}
	return t;
}

static void write_json(const bench_state *b, const eng_attention_options *at, const len_fig *fig, int nlen,
                       targets t)
{
	ev_buf o = EV_BUF_INIT(1u << 20);
	ev_buf_puts(&o, "{\"model\":");
	ev_json_buf_str(&o, b->o->model);
	ev_buf_printf(&o,
	              ",\"recall\":%s,\"kv_bytes_per_token\":%llu,\"decode_tokens\":%d,\"msa\":{\"block_size\":%d,"
	              "\"top_k\":%d,\"sink_blocks\":%d,\"local_blocks\":%d,\"dense_below\":%ld},\"lengths\":[",
	              b->recall ? "true" : "false", (unsigned long long)b->in.kv_bytes_per_token, b->o->ndec,
	              at->block_size, at->top_k, at->sink_blocks, at->local_blocks, at->dense_below);
	for (int li = 0; li < nlen; li++) {
		const len_fig *f = &fig[li];
		ev_buf_printf(&o, "%s{\"tokens\":%ld,\"kv_bytes\":%llu,", li ? "," : "", f->tokens,
		              (unsigned long long)f->kv_bytes);
		if (f->skipped) {
			ev_buf_printf(&o, "\"skipped\":\"%s\"}", f->skipped);
			continue;
		}
		put_mode(&o, "msa", &f->msa);
		ev_buf_putc(&o, ',');
		put_mode(&o, "dense", &f->dense);
		if (f->dense_prefill_est_s >= 0)
			ev_buf_printf(&o, ",\"dense_prefill_estimate_s\":%.1f", f->dense_prefill_est_s);
		ev_buf_printf(&o, ",\"dense_over_msa_decode\":%.2f}",
		              f->msa.decode_ms > 0 ? f->dense.decode_ms / f->msa.decode_ms : 0.0);
	}
	ev_buf_puts(&o, "],\"targets\":{");
	if (t.r128 > 0)
		ev_buf_printf(&o, "\"msa_decode_cheaper_at_128k\":%.2f,\"msa_5x_cheaper_at_128k\":%s", t.r128,
		              t.r128 >= 5 ? "true" : "false");
	else
		ev_buf_puts(&o, "\"msa_decode_cheaper_at_128k\":null");
	if (t.d32 > 0 && t.lmax > 32768)
		ev_buf_printf(&o, ",\"msa_decode_growth_32k_to_%ld\":%.2f,\"within_2x\":%s", t.lmax, t.dmax / t.d32,
		              t.dmax / t.d32 <= 2 ? "true" : "false");
	if (t.lmax >= 1000000 && t.rmax > 0)
		ev_buf_printf(&o, ",\"msa_decode_cheaper_at_%ld\":%.2f,\"msa_8x_cheaper\":%s", t.lmax, t.rmax,
			      t.rmax >= 8 ? "true" : "false");
	ev_buf_puts(&o, "}}\n");
	fputs(o.data ? o.data : "", stdout);
	ev_buf_free(&o);
}

static const char *answered(int a) { return a < 0 ? "-" : a ? "yes" : "no"; }

static void print_table(const bench_state *b, const eng_attention_options *at, const len_fig *fig, int nlen,
                        targets t)
{
	printf("model %s%s, KV %llu bytes/token, MSA block %d top_k %d sink %d local %d dense_below %ld\n", b->o->model,
	       b->recall ? " (recall checkpoint)" : "", (unsigned long long)b->in.kv_bytes_per_token, at->block_size,
	       at->top_k, at->sink_blocks, at->local_blocks, at->dense_below);
	printf("%9s %10s | %11s %11s %6s | %11s %11s %6s | %7s\n", "tokens", "KV MiB", "msa pre s", "msa ms/tok", "ans",
	       "dense pre s", "dense ms/tok", "ans", "dense/msa");
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
		printf("%9ld %10.1f | %11.3f %11.3f %6s | %11s %11.3f %6s | %7.2f\n", f->tokens, f->kv_bytes / 1048576.0,
		       f->msa.prefill_s, f->msa.decode_ms, answered(f->msa.answered), dp, f->dense.decode_ms,
		       answered(f->dense.answered), f->msa.decode_ms > 0 ? f->dense.decode_ms / f->msa.decode_ms : 0.0);
	}
	for (int li = 0; li < nlen; li++) {
		const len_fig *f = &fig[li];
		if (!f->skipped && f->msa.index_decode >= 0)
			printf("indexer at %ld: %.1f%% of MSA prefill, %.1f%% of MSA decode; decode scored %.1f%% of the "
			       "blocks exactly (the bound skipped the rest)\n",
			       f->tokens, 100 * f->msa.index_prefill, 100 * f->msa.index_decode, 100 * f->msa.scored_decode);
	}
	if (t.lmax >= 1000000 && t.dmax > 0)
		printf("target: MSA >= 8x cheaper per decoded token at %ld: %.2fx (%s)\n", t.lmax, t.rmax,
		       t.rmax >= 8 ? "met" : "NOT met");
	if (t.r128 > 0)
		printf("target: MSA >= 5x cheaper per decoded token at 128K: %.2fx (%s)\n", t.r128,
		       t.r128 >= 5 ? "met" : "NOT met");
	if (t.d32 > 0 && t.lmax > 32768)
		printf("target: MSA decode cost 32K -> %ld within 2x: %.2fx (%s)\n", t.lmax, t.dmax / t.d32,
		       t.dmax / t.d32 <= 2 ? "met" : "NOT met");
}

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
	long lengths[MAX_LENGTHS] = {4096, 32768, 131072, 1048576};
	size_t lens[MAX_LENGTHS];
	int nlen = 4;
	if (ao.lengths) {
		if ((nlen = ev_cli_parse_lengths(lens, MAX_LENGTHS, ao.lengths, "--lengths")) < 0)
			return ev_cli_fail("bench attention"), EV_EXIT_USAGE;
		for (int i = 0; i < nlen; i++)
			lengths[i] = (long)lens[i];
	}
	eng_model_options mo = ao.engine.mo;
	mo.threads = ao.threads;
	if (mo.attention.kind == ENG_ATTN_AUTO || mo.attention.kind == ENG_ATTN_DENSE)
		mo.attention.kind = ENG_ATTN_MSA; /* both are run; MSA settings from flags/config */
	bench_state b = {.o = &ao, .avail = ev_mem_available()};
	len_fig fig[MAX_LENGTHS];
	eng_attention_options at;
	char *model_dir = NULL; /* a GGUF file: its converted folder */
	int rc = eng_model_path_resolve(ao.model, &model_dir);
	if (!rc)
		rc = eng_model_load(&b.m, model_dir, &mo);
	if (!rc) {
		eng_model_get_info(b.m, &b.in);
		eng_model_get_attention(b.m, &at);
		b.recall = eng_model_is_recall(b.m);
	}
	for (int li = 0; li < nlen && !rc; li++)
		rc = measure_length(&b, &fig[li], lengths[li]);
	if (rc) {
		fprintf(stderr, "evald bench attention: %s\n", ev_error_msg());
	} else {
		targets t = targets_of(fig, nlen);
		if (ao.json)
			write_json(&b, &at, fig, nlen, t);
		else
			print_table(&b, &at, fig, nlen, t);
	}
	free(b.toks);
	eng_seq_free(b.s);
	eng_model_free(b.m);
	free(model_dir);
	return rc ? EV_EXIT_FAIL : 0;
}
