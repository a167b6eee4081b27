/*
 * evald bench engine: prefill and decode tokens per second of one sequence
 * (batch 1) on a checkpoint, on the fast CPU path or the reference, with
 * the peak resident memory beside the weights' size so that regressions in
 * either show.
 *   evald bench engine --model DIR [--prompt N] [--decode N] [--threads N]
 *                      [--reference] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine/engine.h"
#include "evald/base/base.h"
#include "evald/commands.h"

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv);

int ev_bench_engine_main(const ev_cli *cli, int argc, char **argv)
{
	const char *model = NULL;
	int64_t prompt = 128, decode = 32, threads = 0;
	bool reference = false, json = cli->json;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--model") && v)
			model = argv[++i];
		else if (!strcmp(argv[i], "--prompt") && v && ev_parse_i64(v, &prompt) && prompt >= 1 && prompt <= 1 << 20)
			i++;
		else if (!strcmp(argv[i], "--decode") && v && ev_parse_i64(v, &decode) && decode >= 0 && decode <= 1 << 20)
			i++;
		else if (!strcmp(argv[i], "--threads") && v && ev_parse_i64(v, &threads) && threads >= 1 && threads <= 1024)
			i++;
		else if (!strcmp(argv[i], "--reference"))
			reference = true;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else {
			fprintf(stderr, "usage: evald bench engine --model DIR [--prompt N] [--decode N] [--threads N] "
					"[--reference] [--json]\n");
			return EV_EXIT_USAGE;
		}
	}
	if (!model) {
		fprintf(stderr, "evald bench engine: --model is required\n");
		return EV_EXIT_USAGE;
	}
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	mo.backend = reference ? ENG_BACKEND_REF : ENG_BACKEND_CPU;
	mo.threads = (int)threads;
	eng_model *m = NULL;
	eng_seq *s = NULL;
	int32_t *toks = NULL;
	int rc = EV_EXIT_FAIL;
	double t0 = ev_now();
	if (eng_model_load(&m, model, &mo) || eng_seq_new(&s, m))
		goto fail;
	double t_load = ev_now() - t0;
	eng_model_info in;
	eng_model_get_info(m, &in);
	if (prompt + decode > in.max_context) {
		ev_error_set(EV_E_LIMIT, "prompt + decode (%lld) pass the context limit %ld", (long long)(prompt + decode),
			     in.max_context);
		goto fail;
	}
	if (!(toks = malloc((size_t)(prompt + decode) * sizeof(*toks)))) {
		ev_error_set(EV_E_NOMEM, "out of memory");
		goto fail;
	}
	ev_rng r;
	ev_rng_seed(&r, 1);
	for (int64_t i = 0; i < prompt + decode; i++)
		toks[i] = (int32_t)ev_rng_below(&r, (uint64_t)in.vocab);
	t0 = ev_now();
	if (eng_forward(s, toks, (int)prompt, NULL))
		goto fail;
	double t_prefill = ev_now() - t0;
	t0 = ev_now();
	for (int64_t i = 0; i < decode; i++)
		if (eng_forward(s, toks + prompt + i, 1, NULL))
			goto fail;
	double t_decode = ev_now() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double rss = (double)ru.ru_maxrss * 1024.0;
	double pps = prompt / t_prefill, dps = decode ? decode / t_decode : 0;
	if (json)
		printf("{\"model\":\"%s\",\"backend\":\"%s\",\"params\":%llu,\"weight_bytes\":%llu,\"load_s\":%.3f,"
		       "\"prompt_tokens\":%lld,\"prefill_tok_s\":%.2f,\"decode_tokens\":%lld,\"decode_tok_s\":%.2f,"
		       "\"peak_rss_bytes\":%.0f}\n",
		       model, reference ? "ref" : "cpu", (unsigned long long)in.params_total,
		       (unsigned long long)in.weight_bytes, t_load, (long long)prompt, pps, (long long)decode, dps, rss);
	else
		printf("%s (%s, %.1f M params, %.1f MiB weights), %s path\n"
		       "  load      %8.3f s\n  prefill   %8.2f tok/s (%lld tokens)\n  decode    %8.2f tok/s (%lld tokens)\n"
		       "  peak RSS  %8.1f MiB\n",
		       model, in.architecture, in.params_total / 1e6, in.weight_bytes / 1048576.0, reference ? "reference" : "fast",
		       t_load, pps, (long long)prompt, dps, (long long)decode, rss / 1048576.0);
	rc = 0;
	goto done;
fail:
	fprintf(stderr, "evald bench engine: %s\n", ev_error_msg());
done:
	free(toks);
	eng_seq_free(s);
	eng_model_free(m);
	return rc;
}
