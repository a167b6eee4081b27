/*
 * evald compare RUN_A RUN_B: paired comparison of two runs, suite by suite
 * (A the baseline, B the candidate): scores, delta with a paired bootstrap
 * 95% interval, McNemar's exact p (or a sign-flip permutation p for
 * non-binary scores), the minimum detectable effect from the noise floor,
 * and the samples that flipped. --file-regressions files each significant
 * drop as a regression (see `evald regressions`).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "evald/cli.h"
#include "reports/reports.h"

typedef struct {
	bool json, file_regressions, no_calibration;
	int64_t seed;
	const char *format, *out;
} compare_opts;

static const ev_opt compare_opts_table[] = {
	EV_O_FLAG("--json", compare_opts, json, "as JSON (with \"regressions\" when filed)"),
	EV_O_FLAG("--file-regressions", compare_opts, file_regressions, "file each significant drop as a regression"),
	EV_O_FLAG("--no-calibration", compare_opts, no_calibration, "ignore the noise floor of calibrations"),
	EV_O_INT("--seed", compare_opts, seed, 0, 9e15, "S", "bootstrap and permutation seed"),
	EV_O_CHOICE("--format", compare_opts, format, "text|json|html",
	            "text (default), json (= --json), or html: one self-contained page with charts"),
	{.name = "--output", .short_name = 'o', .kind = EV_OPT_STR, .off = offsetof(compare_opts, out), .meta = "FILE",
	 .help = "write the html page to FILE (atomically) instead of stdout"},
	EV_O_END,
};

static const ev_cmd_spec compare_spec = {
	.name = "compare",
	.synopsis = "RUN_A RUN_B [--json | --format html [-o FILE]] [--seed S] [--no-calibration] [--file-regressions]",
	.about = "Paired comparison of two runs, suite by suite: RUN_A is the baseline, RUN_B the candidate,\n"
	         "delta = B - A with a paired bootstrap 95% CI, McNemar's exact p (sign-flip permutation for\n"
	         "partial scores), the minimum detectable effect, and the samples that flipped.",
	.opts = compare_opts_table,
	.positional = "RUN_A RUN_B",
	.min_pos = 2,
	.max_pos = 2,
};

/* Ids printed per list; --json has them all. */
#define MAX_PRINTED_IDS 50

static void print_ids(const char *label, const ev_flip *v, size_t n, bool with_fp)
{
	printf("  %s (%zu):", label, n);
	for (size_t k = 0; k < n; k++) {
		if (k == MAX_PRINTED_IDS) {
			printf(" ... and %zu more (--json lists them all)", n - k);
			break;
		}
		if (with_fp)
			printf(" %s[%s]", v[k].sample_id, ev_fingerprint_name(v[k].fingerprint));
		else
			printf(" %s", v[k].sample_id);
		if (v[k].flip_rate > 0)
			printf("(flaky %.2f)", v[k].flip_rate);
	}
	printf("\n");
}

/* Model, suite and sample names come from suites and the tracker. */
static void term_clean_compare(ev_compare *c)
{
	ev_term_clean(c->model_a);
	ev_term_clean(c->model_b);
	for (size_t i = 0; i < c->n_suites; i++) {
		ev_compare_suite *s = &c->suites[i];
		ev_term_clean(s->name);
		for (size_t k = 0; k < s->n_fixed; k++)
			ev_term_clean(s->fixed[k].sample_id);
		for (size_t k = 0; k < s->n_broken; k++)
			ev_term_clean(s->broken[k].sample_id);
	}
}

static void print_human(ev_compare *c, const char *actions_json)
{
	term_clean_compare(c);
	printf("compare: run %lld (%s) -> run %lld (%s)\n", (long long)c->run_a, c->model_a, (long long)c->run_b,
	       c->model_b);
	if (c->n_prep) {
		printf("warning: the runs preprocessed images differently; a score change may not be the model's:\n");
		for (size_t i = 0; i < c->n_prep; i++) {
			ev_term_clean(c->prep[i].key), ev_term_clean(c->prep[i].a), ev_term_clean(c->prep[i].b);
			printf("  %s: %.120s -> %.120s\n", c->prep[i].key, c->prep[i].a, c->prep[i].b);
		}
	}
	if (c->n_config) {
		printf("provenance: the runs' settings differ; a score change may not be the model's:\n");
		for (size_t i = 0; i < c->n_config; i++) {
			ev_term_clean(c->config[i].key), ev_term_clean(c->config[i].a), ev_term_clean(c->config[i].b);
			printf("  %s: %.120s -> %.120s\n", c->config[i].key, c->config[i].a, c->config[i].b);
		}
	}
	printf("%-20s %6s %8s %8s %8s  %-18s %9s %-9s %-20s\n", "suite", "n", "score_a", "score_b", "delta", "95% CI", "p",
	       "test", "MDE");
	for (size_t i = 0; i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		char ci[48], mde[40];
		snprintf(ci, sizeof ci, "[%+.3f, %+.3f]", s->ci_low, s->ci_high);
		snprintf(mde, sizeof mde, "%.3f (%s)", s->mde, s->mde_source);
		printf("%-20.20s %6zu %8.3f %8.3f %+8.3f  %-18s %9.2g %-9s %-20s%s\n", s->name, s->n, s->score_a, s->score_b,
		       s->delta, ci, s->p, s->binary ? "mcnemar" : "signflip", mde,
		       ev_compare_is_regression(s) ? "  DROP" : "");
		if (s->only_a || s->only_b)
			printf("  left out: %zu scored only in A, %zu only in B\n", s->only_a, s->only_b);
		if (s->n_changed)
			printf("  provenance: %zu paired samples' requests differ; they carry %+.3f of the %+.3f delta\n",
			       s->n_changed, s->delta_changed, s->delta);
		if (s->suite_changed)
			printf("  provenance: the suite changed between the runs (its hash differs)\n");
		print_ids("fixed", s->fixed, s->n_fixed, false);
		print_ids("broken", s->broken, s->n_broken, true);
	}
	if (actions_json) {
		cJSON *j = ev_cli_text_json(actions_json);
		const cJSON *a;
		int n = 0;
		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(j, "actions"))
		{
			printf("regression %.0f (%s): %s\n", ev_json_num(a, "regression_id", 0), ev_json_str(a, "suite", ""),
			       ev_json_str(a, "action", ""));
			n++;
		}
		if (!n)
			printf("regressions: nothing to file\n");
		cJSON_Delete(j);
	}
}

int ev_cmd_compare(const ev_cli *cli, int argc, char **argv)
{
	compare_opts co = {.json = cli->json, .seed = 1};
	const char *pos[2];
	int64_t runs[2];
	int prc = ev_opt_parse(&compare_spec, &co, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!ev_cli_parse_run_id(pos[0], &runs[0]) || !ev_cli_parse_run_id(pos[1], &runs[1]))
		return EV_EXIT_USAGE;
	bool json = co.json || (co.format && !strcmp(co.format, "json")), file_regressions = co.file_regressions;
	bool html = co.format && !strcmp(co.format, "html");
	if (co.out && !html) {
		fprintf(stderr, "evald compare: -o goes with --format html\n");
		return EV_EXIT_USAGE;
	}
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	opt.seed = (uint64_t)co.seed;
	opt.use_calibration = !co.no_calibration;

	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	ev_compare *c = NULL;
	char *out = NULL, *actions = NULL;
	if (ev_cli_open_tracker(cli, &t))
		return EV_EXIT_FAIL;
	if (ev_compare_runs(&c, t, runs[0], runs[1], &opt)) {
		ev_cli_fail("compare");
		goto done;
	}
	if (file_regressions && ev_regressions_apply(t, c, &actions)) {
		ev_cli_fail("regressions");
		goto done;
	}
	if (html) {
		ev_buf b = EV_BUF_INIT((size_t)256 << 20);
		int hr = ev_compare_html(&b, t, c, actions);
		if (!hr)
			hr = co.out ? ev_file_write(co.out, b.data, b.len) : (fwrite(b.data, 1, b.len, stdout) == b.len ? 0 : EV_E_IO);
		ev_buf_free(&b);
		if (hr) {
			ev_cli_fail("compare");
			goto done;
		}
	} else if (json) {
		if (ev_compare_json(&out, c)) {
			ev_cli_fail("compare");
			goto done;
		}
		if (actions) {
			/* One document: the comparison with what was filed beside it. */
			cJSON *j = cJSON_Parse(out), *a = cJSON_Parse(actions);
			if (j && a) {
				cJSON_AddItemToObject(j, "regressions", cJSON_DetachItemFromObject(a, "actions"));
				free(out);
				out = ev_json_print(j);
			}
			cJSON_Delete(j);
			cJSON_Delete(a);
			if (!out) {
				ev_error_set(EV_E_NOMEM, "out of memory");
				ev_cli_fail("compare");
				goto done;
			}
		}
		printf("%s\n", out);
	} else {
		print_human(c, actions);
	}
	rc = 0;
done:
	free(out);
	free(actions);
	ev_compare_free(c);
	ev_tracker_close(t);
	return rc;
}
