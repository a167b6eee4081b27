/*
 * feedback/compare.c: paired comparison of two runs, sample by sample.
 *
 * Each run's results are folded per sample (mean over the epochs that are
 * not infrastructure errors), the two runs are merged on (suite, sample),
 * and each suite gets the deltas, a paired bootstrap interval, a paired
 * test (McNemar exact for 0/1 scores, sign-flip permutation otherwise), the
 * minimum detectable effect from the noise floor, and the samples that
 * flipped. Also the failure fingerprint of a stored result.
 */
#include "feedback/compare_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A run's folded samples live in one arena capped here. */
#define SCORES_ARENA_MAX ((size_t)1 << 30)

/* ---- fingerprints ------------------------------------------------------------ */

static const char *const fp_names[EV_FP_COUNT] = {
	[EV_FP_WRONG_ANSWER] = "wrong_answer",
	[EV_FP_NO_ANSWER] = "no_answer",
	[EV_FP_TRUNCATED] = "truncated",
	[EV_FP_UNCLOSED_THINKING] = "unclosed_thinking",
	[EV_FP_TOOL_CALL_PARSE] = "tool_call_parse_error",
	[EV_FP_TIMEOUT] = "timeout",
	[EV_FP_SANDBOX_ERROR] = "sandbox_error",
	[EV_FP_BACKEND_ERROR] = "backend_error",
};

const char *ev_fingerprint_name(ev_fingerprint f)
{
	if ((int)f < 0 || f >= EV_FP_COUNT)
		return "unknown";
	return fp_names[f];
}

static bool eq(const char *a, const char *b) { return a && !strcmp(a, b); }

ev_fingerprint ev_fingerprint_of(const char *reason, const char *detail, const char *finish_reason)
{
	/* The scoring reasons are the first word; the detail refines the two
	 * that hide a more specific cause: the tool-call checker reports an
	 * unparseable answer as no_answer with "unparseable: ..." and test
	 * execution reports sandbox faults and timeouts in its detail. */
	if (detail && (ev_str_starts(detail, "unparseable") || eq(reason, "unparseable")))
		return EV_FP_TOOL_CALL_PARSE;
	if (eq(reason, "timeout"))
		return EV_FP_TIMEOUT;
	if (eq(reason, "backend_error"))
		return EV_FP_BACKEND_ERROR;
	if (detail && ev_str_starts(detail, "sandbox error"))
		return EV_FP_SANDBOX_ERROR;
	if (detail && ev_str_starts(detail, "timed out"))
		return EV_FP_TIMEOUT;
	if (eq(reason, "truncated") || eq(finish_reason, "length"))
		return EV_FP_TRUNCATED;
	if (eq(reason, "unclosed_thinking"))
		return EV_FP_UNCLOSED_THINKING;
	if (eq(reason, "no_answer"))
		return EV_FP_NO_ANSWER;
	return EV_FP_WRONG_ANSWER;
}

/* ---- one run folded per sample --------------------------------------------------- */

typedef struct {
	ev_run_scores *s;
	ev_sample_fold fold; /* the current sample's epochs */
	bool failed_scored; /* the current sample's fingerprint comes from a scored epoch */
} load_ctx;

static char *cut_detail(ev_arena *a, const char *d)
{
	if (!d || !*d)
		return NULL;
	size_t n = strlen(d);
	if (n > EV_COMPARE_DETAIL_MAX) {
		n = EV_COMPARE_DETAIL_MAX;
		/* do not split a UTF-8 sequence */
		while (n > 0 && ((unsigned char)d[n] & 0xC0) == 0x80)
			n--;
	}
	return ev_arena_strndup(a, d, n);
}

/* The first 8 bytes of sha256 of a JSON value as evald prints it (0 for none). */
static uint64_t json_hash(const cJSON *v)
{
	if (!v)
		return 0;
	char *t = ev_json_print(v);
	unsigned char h[32];
	ev_sha256(h, t ? t : "", t ? strlen(t) : 0);
	free(t);
	uint64_t x;
	memcpy(&x, h, 8);
	return x;
}

/* What shaped a request (see ev_sample_score): parsed once a sample. */
static void request_provenance(ev_sample_score *cur, const char *request_json)
{
	cJSON *j = request_json ? cJSON_Parse(request_json) : NULL;
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return;
	}
	cur->has_request = true;
	static const char *const prompt_keys[] = {"messages", "prompt", "input"};
	cJSON *prompt = cJSON_CreateObject();
	for (size_t k = 0; k < 3; k++) {
		cJSON *x = cJSON_DetachItemFromObjectCaseSensitive(j, prompt_keys[k]);
		if (x)
			cJSON_AddItemToObject(prompt, prompt_keys[k], x);
	}
	cJSON *tools = cJSON_DetachItemFromObjectCaseSensitive(j, "tools");
	cJSON_DeleteItemFromObjectCaseSensitive(j, "model"); /* the model is what is compared */
	cJSON_DeleteItemFromObjectCaseSensitive(j, "stream");
	/* the run's drawn seed: sampling noise, which the intervals already
	 * hold (and nothing at temperature 0), not a setting that changed */
	cJSON_DeleteItemFromObjectCaseSensitive(j, "seed");
	cur->h_prompt = json_hash(prompt);
	cur->h_tools = json_hash(tools);
	cur->h_decoding = json_hash(j);
	cJSON_Delete(prompt), cJSON_Delete(tools), cJSON_Delete(j);
}

const char *ev_provenance_names(unsigned bits, char *out, size_t cap)
{
	static const char *const names[4] = {"prompt", "rendered_prompt", "decoding", "tools"};
	static const unsigned order[4] = {EV_PROV_PROMPT, EV_PROV_RENDERED, EV_PROV_DECODING, EV_PROV_TOOLS};
	size_t at = 0;
	if (cap)
		out[0] = 0;
	for (int k = 0; k < 4; k++)
		if ((bits & order[k]) && at < cap)
			at += (size_t)snprintf(out + at, cap - at, "%s%s", at ? "," : "", names[k]);
	return out;
}

/* What of the request differed between a sample's two runs. */
static unsigned provenance_diff(const ev_sample_score *a, const ev_sample_score *b)
{
	unsigned bits = a->rendered[0] && b->rendered[0] && strcmp(a->rendered, b->rendered) ? EV_PROV_RENDERED : 0u;
	if (!a->has_request || !b->has_request)
		return bits;
	return bits | (a->h_prompt != b->h_prompt ? EV_PROV_PROMPT : 0u) |
	       (a->h_decoding != b->h_decoding ? EV_PROV_DECODING : 0u) | (a->h_tools != b->h_tools ? EV_PROV_TOOLS : 0u);
}

static int load_one(void *ctx, const ev_result *r)
{
	load_ctx *c = ctx;
	ev_run_scores *s = c->s;
	ev_sample_score *cur = s->n ? &s->v[s->n - 1] : NULL;
	if (!cur || strcmp(cur->id, r->sample_id) || strcmp(cur->suite, r->suite)) {
		/* Share the previous sample's suite string; taken before the array
		 * may move. */
		const char *prev_suite = cur && !strcmp(cur->suite, r->suite) ? cur->suite : NULL;
		if (EV_GROW(s->v, s->cap, s->n + 1))
			return ev_error_set(EV_E_NOMEM, "compare: out of memory");
		const char *suite = prev_suite ? prev_suite : ev_arena_strdup(s->arena, r->suite);
		const char *id = ev_arena_strdup(s->arena, r->sample_id);
		if (!suite || !id)
			return ev_error_set(EV_E_LIMIT, "compare: a run's sample ids exceed %zu bytes", SCORES_ARENA_MAX);
		cur = &s->v[s->n++];
		memset(cur, 0, sizeof *cur);
		cur->suite = suite;
		cur->id = id;
		cur->fp = EV_FP_WRONG_ANSWER;
		request_provenance(cur, r->request_json);
		if (r->prompt_hash)
			snprintf(cur->rendered, sizeof cur->rendered, "%s", r->prompt_hash);
		c->fold = (ev_sample_fold){0};
		c->failed_scored = false;
	}
	ev_sample_fold_add(&c->fold, r);
	cur->n_scored = c->fold.n_scored;
	cur->n_errors = c->fold.n_errors;
	cur->score = ev_sample_fold_mean(&c->fold);
	if (ev_result_is_error(r)) {
		if (!cur->detail && !c->failed_scored && cur->n_errors == 1 && cur->n_scored == 0) {
			cur->fp = ev_fingerprint_of(r->reason, r->detail, r->finish_reason);
			cur->detail = cut_detail(s->arena, r->detail);
		}
	} else {
		if (r->score < 1.0 && !c->failed_scored) {
			c->failed_scored = true;
			cur->fp = ev_fingerprint_of(r->reason, r->detail, r->finish_reason);
			cur->detail = cut_detail(s->arena, r->detail);
		}
	}
	return 0;
}

int ev_sample_score_cmp(const ev_sample_score *x, const ev_sample_score *y)
{
	int c = x->suite == y->suite ? 0 : strcmp(x->suite, y->suite);
	return c ? c : strcmp(x->id, y->id);
}

static int cmp_scores(const void *x, const void *y) { return ev_sample_score_cmp(x, y); }

int ev_run_scores_load(ev_run_scores *out, ev_tracker *t, int64_t run_id)
{
	memset(out, 0, sizeof *out);
	int rc = ev_arena_new(&out->arena, SCORES_ARENA_MAX);
	if (rc)
		return rc;
	load_ctx c = {.s = out};
	if ((rc = ev_tracker_results_each(t, run_id, load_one, &c))) {
		ev_run_scores_clear(out);
		return ev_error_wrap(rc, "results of run %lld", (long long)run_id);
	}
	/* The query orders by (suite, sample_id) already; sorting here keeps the
	 * merge right whatever collation the column has. */
	if (out->n > 1)
		qsort(out->v, out->n, sizeof *out->v, cmp_scores);
	return 0;
}

void ev_run_scores_clear(ev_run_scores *s)
{
	if (!s)
		return;
	ev_arena_free(s->arena);
	free(s->v);
	memset(s, 0, sizeof *s);
}

char *ev_run_suite_hash(const ev_run_row *run, const char *suite)
{
	cJSON *j = NULL;
	char *h = NULL;
	if (!run->suites_json || ev_json_parse(&j, run->suites_json, strlen(run->suites_json), "run suites")) {
		ev_error_clear();
		return NULL;
	}
	const cJSON *s;
	cJSON_ArrayForEach(s, j) if (!h && eq(ev_json_str(s, "name", NULL), suite) && *ev_json_str(s, "hash", ""))
		h = ev_strdup(ev_json_str(s, "hash", ""));
	cJSON_Delete(j);
	return h;
}

/* ---- the comparison --------------------------------------------------------------- */

void ev_compare_free(ev_compare *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_prep; i++)
		free(c->prep[i].key), free(c->prep[i].a), free(c->prep[i].b);
	free(c->prep);
	for (size_t i = 0; i < c->n_config; i++)
		free(c->config[i].key), free(c->config[i].a), free(c->config[i].b);
	free(c->config);
	for (size_t i = 0; i < c->n_suites; i++) {
		ev_compare_suite *s = &c->suites[i];
		for (size_t k = 0; k < s->n_fixed; k++)
			free(s->fixed[k].sample_id), free(s->fixed[k].detail);
		for (size_t k = 0; k < s->n_broken; k++)
			free(s->broken[k].sample_id), free(s->broken[k].detail);
		free(s->fixed);
		free(s->broken);
		free(s->name);
	}
	free(c->suites);
	free(c->model_a);
	free(c->model_b);
	free(c);
}

bool ev_compare_is_regression(const ev_compare_suite *s)
{
	return s->n > 0 && s->ci_high < 0 && s->p < 0.05 && fabs(s->delta) > s->mde;
}

static int add_flip(ev_flip **v, size_t *n, const ev_sample_score *a, const ev_sample_score *b,
                    const ev_sample_score *failing)
{
	ev_flip *nv = realloc(*v, (*n + 1) * sizeof *nv);
	if (!nv)
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	*v = nv;
	ev_flip *f = &nv[*n];
	memset(f, 0, sizeof *f);
	f->sample_id = ev_strdup(a->id);
	f->detail = ev_strdup(failing->detail);
	if (!f->sample_id || (failing->detail && !f->detail)) {
		free(f->sample_id);
		free(f->detail);
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	}
	f->score_a = a->score;
	f->score_b = b->score;
	f->fingerprint = failing->fp;
	f->flip_rate = -1;
	f->changed = provenance_diff(a, b);
	(*n)++;
	return 0;
}

static void apply_flip_rates(ev_flip *v, size_t n, const cJSON *flaky)
{
	for (size_t k = 0; k < n; k++) {
		const cJSON *r = flaky ? cJSON_GetObjectItemCaseSensitive(flaky, v[k].sample_id) : NULL;
		v[k].flip_rate = cJSON_IsNumber(r) ? r->valuedouble : flaky ? 0 : -1;
	}
}

/* Fills `s` (name already set) from the pairs [lo, hi) of pa/pb. */
static int finish_suite(ev_compare_suite *s, ev_tracker *t, const ev_run_row *run_a, const ev_run_row *run_b,
                        const ev_sample_score *const *pa,
                        const ev_sample_score *const *pb, size_t lo, size_t hi, const ev_compare_options *opt)
{
	size_t n = hi - lo;
	double *a = NULL, *b = NULL;
	char *hash = NULL;
	cJSON *flips = NULL;
	ev_calibration_row cal = {0};
	int rc = 0;

	s->n = n;
	s->p = 1.0;
	s->test = "mcnemar_exact";
	s->mde_source = "observed";
	s->binary = true;
	if (n == 0)
		return 0;
	a = malloc(n * sizeof *a);
	b = malloc(n * sizeof *b);
	if (!a || !b) {
		rc = ev_error_set(EV_E_NOMEM, "compare: out of memory");
		goto done;
	}
	double sa = 0, sb = 0;
	long fixed = 0, broken = 0;
	for (size_t i = 0; i < n; i++) {
		const ev_sample_score *x = pa[lo + i], *y = pb[lo + i];
		a[i] = x->score;
		b[i] = y->score;
		sa += a[i];
		sb += b[i];
		if ((a[i] != 0 && a[i] != 1) || (b[i] != 0 && b[i] != 1))
			s->binary = false;
		if (provenance_diff(x, y)) {
			s->n_changed++;
			s->delta_changed += b[i] - a[i];
		}
		if (a[i] < 1 && b[i] >= 1) {
			fixed++;
			if ((rc = add_flip(&s->fixed, &s->n_fixed, x, y, x)))
				goto done;
		} else if (a[i] >= 1 && b[i] < 1) {
			broken++;
			if ((rc = add_flip(&s->broken, &s->n_broken, x, y, y)))
				goto done;
		}
	}
	s->score_a = sa / (double)n;
	s->score_b = sb / (double)n;
	s->delta_changed /= (double)n;
	{
		char *ha = ev_run_suite_hash(run_a, s->name), *hb = ev_run_suite_hash(run_b, s->name);
		s->suite_changed = ha && hb && strcmp(ha, hb);
		free(ha), free(hb);
	}
	s->delta = s->score_b - s->score_a;
	uint64_t seed = opt->seed ^ ev_hash_str(s->name);
	if ((rc = ev_paired_bootstrap_ci(&s->ci_low, &s->ci_high, a, b, n, seed, opt->n_boot)))
		goto done;
	if (s->binary) {
		s->p = ev_paired_mcnemar_p(broken, fixed);
	} else {
		s->test = "sign_flip_permutation";
		s->p = ev_paired_sign_flip_p(a, b, n, seed, opt->n_perm);
		if (isnan(s->p)) {
			rc = ev_error_set(EV_E_NOMEM, "compare: out of memory");
			goto done;
		}
	}

	/* The noise floor: a calibration's run-to-run variance of the suite
	 * score, var_score, measured over n_cal samples, is a per-sample
	 * variance of var_score * n_cal; two independent runs differ by twice
	 * that. Without one, the observed variance of the paired differences. */
	if (opt->use_calibration) {
		hash = ev_run_suite_hash(run_b, s->name);
		if ((rc = ev_calibration_latest(t, s->name, hash, &cal)))
			goto done;
	}
	if (cal.found && cal.n > 0) {
		s->noise_var = 2.0 * cal.variance * (double)cal.n;
		s->mde_source = "calibration";
		s->calibration_id = cal.id;
		if (cal.flip_rate_json && !ev_json_parse(&flips, cal.flip_rate_json, strlen(cal.flip_rate_json), "flips")) {
			const cJSON *flaky = cJSON_GetObjectItemCaseSensitive(flips, "flaky");
			apply_flip_rates(s->fixed, s->n_fixed, cJSON_IsObject(flaky) ? flaky : NULL);
			apply_flip_rates(s->broken, s->n_broken, cJSON_IsObject(flaky) ? flaky : NULL);
		}
		ev_error_clear();
	} else {
		double md = s->delta, ss = 0;
		for (size_t i = 0; i < n; i++) {
			double d = (b[i] - a[i]) - md;
			ss += d * d;
		}
		s->noise_var = n > 1 ? ss / (double)(n - 1) : 0;
	}
	s->mde = ev_paired_mde(s->noise_var, n);
done:
	cJSON_Delete(flips);
	ev_calibration_row_clear(&cal);
	free(hash);
	free(a);
	free(b);
	return rc;
}

static int new_suite(ev_compare *c, const char *name, ev_compare_suite **out)
{
	ev_compare_suite *v = realloc(c->suites, (c->n_suites + 1) * sizeof *v);
	if (!v)
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	c->suites = v;
	ev_compare_suite *s = &v[c->n_suites];
	memset(s, 0, sizeof *s);
	if (!(s->name = ev_strdup(name)))
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	c->n_suites++;
	*out = s;
	return 0;
}

/* The "preprocessing" object of a run's stored config, or NULL. */
static cJSON *run_prep(const ev_run_row *r)
{
	cJSON *cfg = r->config_json ? cJSON_Parse(r->config_json) : NULL;
	cJSON *p = cfg ? cJSON_DetachItemFromObjectCaseSensitive(cfg, "preprocessing") : NULL;
	cJSON_Delete(cfg);
	if (p && !cJSON_IsObject(p)) {
		cJSON_Delete(p);
		p = NULL;
	}
	return p;
}

static int add_diff(ev_prep_diff **v, size_t *n, const char *key, const cJSON *a, const cJSON *b)
{
	ev_prep_diff *nv = realloc(*v, (*n + 1) * sizeof *nv);
	if (!nv)
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	*v = nv;
	ev_prep_diff *d = &nv[*n];
	d->key = ev_strdup(key);
	d->a = a ? ev_json_print(a) : ev_strdup("absent");
	d->b = b ? ev_json_print(b) : ev_strdup("absent");
	if (!d->key || !d->a || !d->b) {
		free(d->key), free(d->a), free(d->b);
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	}
	(*n)++;
	return 0;
}

static int add_prep_diff(ev_compare *c, const char *key, const cJSON *a, const cJSON *b)
{
	return add_diff(&c->prep, &c->n_prep, key, a, b);
}

/* The run settings that differ (config_json's top-level keys), the model's
 * own left out; the run's own seed too when both drew one (a seed that
 * differs does not change greedy answers; the requests say when it did). */
static int diff_config(ev_compare *c, const ev_run_row *ra, const ev_run_row *rb)
{
	cJSON *a = ra->config_json ? cJSON_Parse(ra->config_json) : NULL, *b = rb->config_json ? cJSON_Parse(rb->config_json) : NULL;
	int rc = 0;
	static const char *const skip[] = {"models", "model_name", "seed", "shard_k", "shard_n"};
	if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
		const cJSON *x;
		cJSON_ArrayForEach(x, a)
		{
			bool skipped = false;
			for (size_t k = 0; k < sizeof skip / sizeof skip[0]; k++)
				skipped = skipped || !strcmp(x->string, skip[k]);
			const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
			if (!skipped && !rc && (!y || !cJSON_Compare(x, y, true)))
				rc = add_diff(&c->config, &c->n_config, x->string, x, y);
		}
		cJSON_ArrayForEach(x, b) if (!rc && !cJSON_GetObjectItemCaseSensitive(a, x->string)) rc =
			add_diff(&c->config, &c->n_config, x->string, NULL, x);
	}
	cJSON_Delete(a), cJSON_Delete(b);
	return rc;
}

/* Every key whose value differs between the runs' fingerprints (keys of
 * A in order, then those only B has); nothing when neither has one. */
static int diff_preprocessing(ev_compare *c, const ev_run_row *ra, const ev_run_row *rb)
{
	cJSON *pa = run_prep(ra), *pb = run_prep(rb);
	int rc = 0;
	if (pa && pb) {
		const cJSON *x;
		cJSON_ArrayForEach(x, pa)
		{
			const cJSON *y = cJSON_GetObjectItemCaseSensitive(pb, x->string);
			if (!rc && (!y || !cJSON_Compare(x, y, true)))
				rc = add_prep_diff(c, x->string, x, y);
		}
		cJSON_ArrayForEach(x, pb) if (!rc && !cJSON_GetObjectItemCaseSensitive(pa, x->string)) rc =
			add_prep_diff(c, x->string, NULL, x);
	} else if (pa || pb) {
		rc = add_prep_diff(c, "fingerprint", pa, pb);
	}
	cJSON_Delete(pa), cJSON_Delete(pb);
	return rc;
}

int ev_compare_runs(ev_compare **out, ev_tracker *t, int64_t run_a, int64_t run_b, const ev_compare_options *opt)
{
	ev_compare_options dflt = EV_COMPARE_OPTIONS_INIT;
	ev_run_scores A = {0}, B = {0};
	ev_run_row ra = {0}, rb = {0};
	const ev_sample_score **pa = NULL, **pb = NULL;
	ev_compare *c = NULL;
	int rc;

	*out = NULL;
	if (!opt)
		opt = &dflt;
	if ((rc = ev_tracker_run_get(t, run_a, &ra)) || (rc = ev_tracker_run_get(t, run_b, &rb)))
		goto done;
	if ((rc = ev_run_scores_load(&A, t, run_a)) ||
	    (rc = ev_run_scores_load(&B, t, run_b)))
		goto done;
	c = calloc(1, sizeof *c);
	size_t cap = A.n < B.n ? A.n : B.n;
	pa = malloc((cap ? cap : 1) * sizeof *pa);
	pb = malloc((cap ? cap : 1) * sizeof *pb);
	if (!c || !pa || !pb) {
		rc = ev_error_set(EV_E_NOMEM, "compare: out of memory");
		goto done;
	}
	c->run_a = run_a;
	c->run_b = run_b;
	c->model_a = ev_strdup(ra.model ? ra.model : "");
	c->model_b = ev_strdup(rb.model ? rb.model : "");
	if ((rc = diff_preprocessing(c, &ra, &rb)) || (rc = diff_config(c, &ra, &rb)))
		goto done;

	/* Merge the two sorted lists; each suite's pairs are contiguous. */
	size_t i = 0, j = 0, np = 0, suite_lo = 0;
	ev_compare_suite *cur = NULL;
	while (i < A.n || j < B.n) {
		const ev_sample_score *x = i < A.n ? &A.v[i] : NULL, *y = j < B.n ? &B.v[j] : NULL;
		const char *suite = x && (!y || ev_sample_score_cmp(x, y) <= 0) ? x->suite : y->suite;
		if (!cur || strcmp(cur->name, suite)) {
			if (cur && (rc = finish_suite(cur, t, &ra, &rb, pa, pb, suite_lo, np, opt)))
				goto done;
			if ((rc = new_suite(c, suite, &cur)))
				goto done;
			suite_lo = np;
		}
		int k = !x ? 1 : !y ? -1 : ev_sample_score_cmp(x, y);
		if (k == 0) {
			if (x->n_scored && y->n_scored) {
				pa[np] = x;
				pb[np] = y;
				np++;
			} else if (x->n_scored) {
				cur->only_a++;
			} else if (y->n_scored) {
				cur->only_b++;
			}
			i++, j++;
		} else if (k < 0) {
			cur->only_a += x->n_scored > 0;
			i++;
		} else {
			cur->only_b += y->n_scored > 0;
			j++;
		}
	}
	if (cur && (rc = finish_suite(cur, t, &ra, &rb, pa, pb, suite_lo, np, opt)))
		goto done;
	*out = c;
	c = NULL;
done:
	ev_compare_free(c);
	free(pa);
	free(pb);
	ev_run_scores_clear(&A);
	ev_run_scores_clear(&B);
	ev_run_row_clear(&ra);
	ev_run_row_clear(&rb);
	return rc;
}

/* ---- JSON ------------------------------------------------------------------------- */

static cJSON *flip_ids(const ev_flip *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t k = 0; a && k < n; k++)
		cJSON_AddItemToArray(a, cJSON_CreateString(v[k].sample_id));
	return a;
}

/* What differed for one flipped sample: its request's parts, then what
 * differed for the whole run (settings by key, the suite, preprocessing). */
static cJSON *changed_json(const ev_flip *f, const ev_compare *c, const ev_compare_suite *s)
{
	cJSON *a = cJSON_CreateArray();
	static const struct {
		unsigned bit;
		const char *name;
	} parts[] = {{EV_PROV_PROMPT, "prompt"}, {EV_PROV_RENDERED, "rendered_prompt"}, {EV_PROV_DECODING, "decoding"},
	             {EV_PROV_TOOLS, "tools"}};
	for (size_t k = 0; k < 4; k++)
		if (f->changed & parts[k].bit)
			cJSON_AddItemToArray(a, cJSON_CreateString(parts[k].name));
	for (size_t k = 0; k < c->n_config; k++)
		cJSON_AddItemToArray(a, cJSON_CreateString(c->config[k].key));
	if (s->suite_changed)
		cJSON_AddItemToArray(a, cJSON_CreateString("suite"));
	if (c->n_prep)
		cJSON_AddItemToArray(a, cJSON_CreateString("preprocessing"));
	return a;
}

static cJSON *flip_details(const ev_flip *v, size_t n, const ev_compare *c, const ev_compare_suite *s)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t k = 0; a && k < n; k++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", v[k].sample_id);
		cJSON_AddNumberToObject(o, "score_a", v[k].score_a);
		cJSON_AddNumberToObject(o, "score_b", v[k].score_b);
		cJSON_AddStringToObject(o, "fingerprint", ev_fingerprint_name(v[k].fingerprint));
		if (v[k].detail)
			cJSON_AddStringToObject(o, "detail", v[k].detail);
		else
			cJSON_AddNullToObject(o, "detail");
		if (v[k].flip_rate >= 0)
			cJSON_AddNumberToObject(o, "flip_rate", v[k].flip_rate);
		else
			cJSON_AddNullToObject(o, "flip_rate");
		cJSON_AddItemToObject(o, "changed", changed_json(&v[k], c, s));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

int ev_compare_json(char **out, const ev_compare *c)
{
	*out = NULL;
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	cJSON_AddNumberToObject(root, "run_a", (double)c->run_a);
	cJSON_AddNumberToObject(root, "run_b", (double)c->run_b);
	cJSON_AddStringToObject(root, "model_a", c->model_a ? c->model_a : "");
	cJSON_AddStringToObject(root, "model_b", c->model_b ? c->model_b : "");
	cJSON *pd = cJSON_AddArrayToObject(root, "preprocessing_differs");
	for (size_t i = 0; pd && i < c->n_prep; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "key", c->prep[i].key);
		cJSON_AddStringToObject(o, "a", c->prep[i].a);
		cJSON_AddStringToObject(o, "b", c->prep[i].b);
		cJSON_AddItemToArray(pd, o);
	}
	cJSON *cd = cJSON_AddArrayToObject(root, "config_differs");
	for (size_t i = 0; cd && i < c->n_config; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "key", c->config[i].key);
		cJSON_AddStringToObject(o, "a", c->config[i].a);
		cJSON_AddStringToObject(o, "b", c->config[i].b);
		cJSON_AddItemToArray(cd, o);
	}
	cJSON *arr = cJSON_AddArrayToObject(root, "suites");
	for (size_t i = 0; i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", s->name);
		cJSON_AddNumberToObject(o, "n", (double)s->n);
		cJSON_AddNumberToObject(o, "score_a", s->score_a);
		cJSON_AddNumberToObject(o, "score_b", s->score_b);
		cJSON_AddNumberToObject(o, "delta", s->delta);
		cJSON_AddNumberToObject(o, "ci_low", s->ci_low);
		cJSON_AddNumberToObject(o, "ci_high", s->ci_high);
		cJSON_AddNumberToObject(o, "p", s->p);
		cJSON_AddStringToObject(o, "test", s->test);
		cJSON_AddNumberToObject(o, "mde", s->mde);
		cJSON_AddStringToObject(o, "mde_source", s->mde_source);
		if (s->calibration_id)
			cJSON_AddNumberToObject(o, "calibration_id", (double)s->calibration_id);
		else
			cJSON_AddNullToObject(o, "calibration_id");
		cJSON_AddBoolToObject(o, "significant_drop", ev_compare_is_regression(s));
		cJSON_AddNumberToObject(o, "only_a", (double)s->only_a);
		cJSON_AddNumberToObject(o, "only_b", (double)s->only_b);
		cJSON_AddItemToObject(o, "fixed", flip_ids(s->fixed, s->n_fixed));
		cJSON_AddItemToObject(o, "broken", flip_ids(s->broken, s->n_broken));
		cJSON_AddItemToObject(o, "fixed_samples", flip_details(s->fixed, s->n_fixed, c, s));
		cJSON_AddItemToObject(o, "broken_samples", flip_details(s->broken, s->n_broken, c, s));
		/* which share of the score change coincides with a change other
		 * than the model: all of it when the run's settings, the suite or
		 * the preprocessing differ; else the part the samples whose
		 * request differed carry */
		cJSON *pv = cJSON_AddObjectToObject(o, "provenance");
		bool run_level = c->n_config > 0 || c->n_prep > 0 || s->suite_changed;
		cJSON_AddNumberToObject(pv, "samples_changed", (double)s->n_changed);
		cJSON_AddNumberToObject(pv, "delta_from_changed_requests", s->delta_changed);
		cJSON_AddBoolToObject(pv, "suite_changed", s->suite_changed);
		cJSON_AddBoolToObject(pv, "settings_changed", c->n_config > 0 || c->n_prep > 0);
		if (s->delta != 0)
			cJSON_AddNumberToObject(pv, "share_of_delta_with_other_change", run_level ? 1.0 : s->delta_changed / s->delta);
		else
			cJSON_AddNullToObject(pv, "share_of_delta_with_other_change");
		cJSON_AddItemToArray(arr, o);
	}
	*out = ev_json_print(root);
	cJSON_Delete(root);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "compare: out of memory");
}
