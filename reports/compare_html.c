/*
 * reports/compare_html.c: `evald compare A B --format html`, one
 * self-contained page (the run report's rules: CSP, no script, inline
 * SVG, well-formed XML). Per suite the paired difference B - A with its
 * 95% interval and the minimum detectable effect drawn against zero; the
 * flipped samples with both runs' answers side by side; for long-context
 * suites a heatmap of the per-cell difference; the regressions filed, when
 * --file-regressions filed some. Figures are the JSON comparison's, as
 * data- attributes.
 */
#include "reports/reports_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ANSWER_CHARS 120
#define FLIPS_SHOWN 500 /* flipped samples shown per suite and direction (the JSON has them all) */

/* ---- the answers of the flipped samples --------------------------------------- */

typedef struct {
	const ev_compare *c;
	cJSON *answers; /* {suite: {sample: answer}} for the flipped samples */
} answers_ctx;

static bool flipped(const ev_compare *c, const char *suite, const char *id)
{
	for (size_t i = 0; i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		if (strcmp(s->name, suite))
			continue;
		for (size_t k = 0; k < s->n_fixed && k < FLIPS_SHOWN; k++)
			if (!strcmp(s->fixed[k].sample_id, id))
				return true;
		for (size_t k = 0; k < s->n_broken && k < FLIPS_SHOWN; k++)
			if (!strcmp(s->broken[k].sample_id, id))
				return true;
	}
	return false;
}

/* The first scored epoch's answer of each flipped sample (an error's detail when none was scored). */
static int answer_cb(void *ctx, const ev_result *r)
{
	answers_ctx *a = ctx;
	if (!flipped(a->c, r->suite, r->sample_id))
		return 0;
	cJSON *s = cJSON_GetObjectItemCaseSensitive(a->answers, r->suite);
	if (!s && !(s = cJSON_AddObjectToObject(a->answers, r->suite)))
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	const cJSON *have = cJSON_GetObjectItemCaseSensitive(s, r->sample_id);
	bool err = ev_result_is_error(r);
	if (have && (err || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(have, "error"))))
		return 0;
	if (have)
		cJSON_DeleteItemFromObjectCaseSensitive(s, r->sample_id);
	cJSON *o = cJSON_AddObjectToObject(s, r->sample_id);
	const char *text = r->response && *r->response ? r->response : r->detail ? r->detail : "";
	if (!o || !cJSON_AddStringToObject(o, "answer", text) ||
	    !cJSON_AddStringToObject(o, "extracted", r->extracted ? r->extracted : "") ||
	    !cJSON_AddBoolToObject(o, "error", err))
		return ev_error_set(EV_E_NOMEM, "compare: out of memory");
	return 0;
}

static cJSON *answers_of(ev_tracker *t, const ev_compare *c, int64_t run, int *rc)
{
	answers_ctx a = {c, cJSON_CreateObject()};
	if (!a.answers) {
		*rc = ev_error_set(EV_E_NOMEM, "compare: out of memory");
		return NULL;
	}
	if ((*rc = ev_tracker_results_each(t, run, answer_cb, &a))) {
		cJSON_Delete(a.answers);
		return NULL;
	}
	return a.answers;
}

/* ---- the forest plot of differences --------------------------------------------- */

static int deltas_section(ev_buf *b, const ev_compare *c)
{
	double lim = 0.1;
	for (size_t i = 0; i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		double m = fmax(fmax(fabs(s->ci_low), fabs(s->ci_high)), fmax(fabs(s->delta), s->mde));
		lim = m > lim ? m : lim;
	}
	lim = ceil(lim * 10) / 10;
	if (lim > 1)
		lim = 1;
	const int L = 200, P = 440, RH = 30, top = 24;
	int H = top + RH * (int)c->n_suites + 30;
	double zx = L + P / 2.0;
	int rc = ev_buf_printf(b,
	                       "<section id=\"suites\"><h2>Paired differences</h2>\n<figure><svg class=\"chart deltas\" "
	                       "xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	                       "role=\"img\" aria-labelledby=\"d-t d-d\"><title id=\"d-t\">Score change B - A by suite"
	                       "</title><desc id=\"d-d\">For each suite the difference of the candidate's score from the "
	                       "baseline's as a dot, its paired bootstrap 95%% interval as a line, and the band of effects "
	                       "smaller than the minimum detectable effect in grey around zero; the table below lists the "
	                       "same figures.</desc>",
	                       L + P + 60, H, L + P + 60, H);
	for (int t = -2; !rc && t <= 2; t++) {
		double x = zx + P / 2.0 * t / 2.0;
		rc = ev_buf_printf(b,
		                   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/><text x=\"%.1f\" y=\"%d\" "
		                   "text-anchor=\"middle\">%+.2f</text>",
		                   x, top - 6, x, H - 24, t ? "#ddd" : "#555", x, H - 8, lim * t / 2.0);
	}
	for (size_t i = 0; !rc && i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		int y = top + RH * (int)i;
		double k = P / 2.0 / lim;
		bool drop = ev_compare_is_regression(s);
		double lo = fmax(-lim, s->ci_low), hi = fmin(lim, s->ci_high), dx = fmax(-lim, fmin(lim, s->delta));
		rc = ev_buf_puts(b, "<g class=\"delta\" data-suite=\"");
		if (!rc)
			rc = ev_html_esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_puts(b, "\"><title>");
		if (!rc)
			rc = ev_html_esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_printf(b, ": %+.3f (95%% CI %+.3f to %+.3f), p %.3g, MDE %.3f%s</title>", s->delta, s->ci_low,
			                   s->ci_high, s->p, s->mde, drop ? ", a significant drop" : "");
		if (!rc)
			rc = ev_buf_printf(b,
			                   "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#e6e6e6\"/>"
			                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">",
			                   zx - k * fmin(s->mde, lim), y + 3, 2 * k * fmin(s->mde, lim), RH - 6, L - 8, y + RH / 2 + 4);
		if (!rc)
			rc = ev_html_esc(b, s->name, 28);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</text><line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" "
			                   "stroke-width=\"2\"/><circle cx=\"%.1f\" cy=\"%d\" r=\"5\" fill=\"%s\"/>"
			                   "<text x=\"%.1f\" y=\"%d\">%+.3f%s</text></g>",
			                   zx + k * lo, y + RH / 2, zx + k * hi, y + RH / 2, zx + k * dx, y + RH / 2,
			                   drop ? "#D55E00" : "#0072B2", zx + k * hi + 8, y + RH / 2 + 4, s->delta,
			                   drop ? " drop" : "");
	}
	if (!rc)
		rc = ev_buf_puts(b, "</svg><figcaption>B - A with the paired bootstrap 95% interval; grey: smaller than the "
		                    "minimum detectable effect; vermillion: a significant drop.</figcaption></figure>\n"
		                    "<table class=\"deltas\"><thead><tr><th>suite</th><th class=\"num\">n</th>"
		                    "<th class=\"num\">A</th><th class=\"num\">B</th><th class=\"num\">B - A</th>"
		                    "<th class=\"num\">95% CI</th><th class=\"num\">p</th><th>test</th><th class=\"num\">MDE</th>"
		                    "<th class=\"num\">fixed</th><th class=\"num\">broken</th></tr></thead><tbody>");
	for (size_t i = 0; !rc && i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		rc = ev_buf_puts(b, "<tr data-suite=\"");
		if (!rc)
			rc = ev_html_esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_putc(b, '"');
		struct {
			const char *k;
			double v;
		} f[] = {{"score-a", s->score_a}, {"score-b", s->score_b}, {"delta", s->delta}, {"ci-low", s->ci_low},
		         {"ci-high", s->ci_high}, {"p", s->p}, {"mde", s->mde}};
		for (size_t k = 0; !rc && k < sizeof f / sizeof f[0]; k++)
			rc = ev_html_num_attr(b, f[k].k, f[k].v);
		if (!rc)
			rc = ev_buf_printf(b, " data-n=\"%zu\" data-drop=\"%s\"%s><td>", s->n,
			                   ev_compare_is_regression(s) ? "true" : "false",
			                   ev_compare_is_regression(s) ? " class=\"fail\"" : "");
		if (!rc)
			rc = ev_html_esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</td><td class=\"num\">%zu</td><td class=\"num\">%.3f</td><td class=\"num\">%.3f</td>"
			                   "<td class=\"num score\">%+.3f</td><td class=\"num\">%+.3f to %+.3f</td>"
			                   "<td class=\"num\">%.3g</td><td>%s</td><td class=\"num\">%.3f (%s)</td>"
			                   "<td class=\"num\">%zu</td><td class=\"num\">%zu</td></tr>",
			                   s->n, s->score_a, s->score_b, s->delta, s->ci_low, s->ci_high, s->p,
			                   s->binary ? "McNemar" : "sign flip", s->mde, s->mde_source, s->n_fixed, s->n_broken);
	}
	return rc ? rc : ev_buf_puts(b, "</tbody></table></section>\n");
}

/* ---- flipped samples side by side ------------------------------------------------ */

static int answer_cell(ev_buf *b, const cJSON *answers, const char *suite, const char *id)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(answers, suite), id);
	int rc = ev_buf_puts(b, "<td class=\"text\">");
	if (!rc)
		rc = ev_html_esc(b, o ? ev_json_str(o, "answer", "") : "(no result)", ANSWER_CHARS);
	const char *ex = o ? ev_json_str(o, "extracted", "") : "";
	if (!rc && *ex) {
		rc = ev_buf_puts(b, "<br/><i>extracted:</i> ");
		if (!rc)
			rc = ev_html_esc(b, ex, 40);
	}
	return rc ? rc : ev_buf_puts(b, "</td>");
}

static int flips_section(ev_buf *b, const ev_compare *c, const cJSON *ans_a, const cJSON *ans_b)
{
	int rc = ev_buf_puts(b, "<section id=\"flips\"><h2>Flipped samples</h2>\n<p class=\"note\">Samples that passed "
	                        "in one run and not in the other, with both answers; broken ones carry the failure's "
	                        "fingerprint.</p>\n");
	for (size_t i = 0; !rc && i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		for (int dir = 0; !rc && dir < 2; dir++) {
			const ev_flip *v = dir ? s->fixed : s->broken;
			size_t n = dir ? s->n_fixed : s->n_broken;
			if (!n)
				continue;
			rc = ev_buf_puts(b, "<details class=\"flips\"");
			if (!rc)
				rc = ev_buf_printf(b, " data-direction=\"%s\" data-count=\"%zu\"%s><summary>", dir ? "fixed" : "broken",
				                   n, dir ? "" : " open=\"open\"");
			if (!rc)
				rc = ev_html_esc(b, s->name, 200);
			if (!rc)
				rc = ev_buf_printf(b, ": %zu %s%s</summary><table class=\"flips\"><thead><tr><th>sample</th>"
				                      "<th class=\"num\">A</th><th class=\"num\">B</th><th>why</th><th>answer in A</th>"
				                      "<th>answer in B</th></tr></thead><tbody>",
				                   n, dir ? "fixed (failed in A, pass in B)" : "broken (passed in A, fail in B)",
				                   n > FLIPS_SHOWN ? "; the first 500 shown (--json lists them all)" : "");
			for (size_t k = 0; !rc && k < n && k < FLIPS_SHOWN; k++) {
				rc = ev_buf_puts(b, "<tr class=\"flip\" data-sample=\"");
				if (!rc)
					rc = ev_html_esc(b, v[k].sample_id, 200);
				if (!rc)
					rc = ev_buf_puts(b, "\"><td>");
				if (!rc)
					rc = ev_html_esc(b, v[k].sample_id, 60);
				char names[64];
				ev_provenance_names(v[k].changed, names, sizeof names);
				if (!rc)
					rc = ev_buf_printf(b,
					                   "</td><td class=\"num\">%.2f</td><td class=\"num\">%.2f</td><td>%s%s%s%s</td>",
					                   v[k].score_a, v[k].score_b, ev_fingerprint_name(v[k].fingerprint),
					                   v[k].flip_rate > 0 ? " (flaky)" : "", *names ? "; request differed: " : "", names);
				if (!rc)
					rc = answer_cell(b, ans_a, s->name, v[k].sample_id);
				if (!rc)
					rc = answer_cell(b, ans_b, s->name, v[k].sample_id);
				if (!rc)
					rc = ev_buf_puts(b, "</tr>");
			}
			if (!rc)
				rc = ev_buf_puts(b, "</tbody></table></details>\n");
		}
	}
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- the difference heatmap of long-context grids --------------------------------- */

/* a diverging colour (orange for drops, blue for gains, white at zero; both ends told apart under
 * the common colour-vision deficiencies) for d in [-1, 1] */
static void diverging(double d, char out[8])
{
	d = d < -1 ? -1 : d > 1 ? 1 : d;
	const int lo[3] = {230, 97, 1}, hi[3] = {33, 102, 172}; /* #e66101, #2166ac */
	const int *end = d < 0 ? lo : hi;
	double t = fabs(d);
	int c[3];
	for (int k = 0; k < 3; k++)
		c[k] = (int)lround(255 + (end[k] - 255) * t);
	snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

typedef struct {
	ev_buf *b;
	const char *suite;
	const cJSON *grid_a; /* run A's grid of the suite */
	int rc;
} diff_ctx;

enum { CW = EV_HTML_CW, CH = EV_HTML_CH };

/* run A's cell (task, length, depth): mean and n */
static bool cell_a(const cJSON *grid, const char *task, const char *length, const char *depth, double *mean)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(grid, task), length), depth);
	double n = c ? cJSON_GetArrayItem(c, 1)->valuedouble : 0;
	if (n <= 0)
		return false;
	*mean = cJSON_GetArrayItem(c, 0)->valuedouble / n;
	return true;
}

static int diff_cell(void *ctx, const char *task, const char *length, const char *depth, const ev_report_cell *c,
                     size_t li, size_t nl, size_t di, size_t nd)
{
	diff_ctx *g = ctx;
	ev_buf *b = g->b;
	int rc = 0;
	int x, y;
	rc = ev_html_heatmap_frame(b, g->suite, task, length, depth, li, nl, di, nd, "diffmap",
	                           "Score change B - A by context length (rows) and needle depth (columns), written in "
	                           "each cell; orange: lower in B, blue: higher",
	                           "", &x, &y);
	double a;
	if (!rc && c->n > 0 && cell_a(g->grid_a, task, length, depth, &a)) {
		double d = c->score - a;
		char col[8];
		diverging(d, col);
		rc = ev_buf_puts(b, "<g class=\"dcell\" data-task=\"");
		if (!rc)
			rc = ev_html_esc(b, task, 200);
		if (!rc)
			rc = ev_buf_printf(b, "\" data-length=\"%s\" data-depth=\"%s\"", length, depth);
		if (!rc)
			rc = ev_html_num_attr(b, "delta", d);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "><title>length %s, depth %s%%: A %.3f, B %.3f, B - A %+.3f</title><rect x=\"%d\" "
			                   "y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#999\"/><text x=\"%d\" "
			                   "y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%+.2f</text></g>",
			                   length, depth, a, c->score, d, x, y, CW, CH, col, x + CW / 2, y + CH / 2 + 4,
			                   fabs(d) > 0.6 ? "#fff" : "#000", d);
	} else if (!rc) {
		rc = ev_html_heatmap_empty(b, x, y);
	}
	if (!rc && li == nl - 1 && di == nd - 1)
		rc = ev_buf_puts(b, "</svg><figcaption>Each cell: B's mean minus A's; - where a run has no result there."
		                    "</figcaption></figure>\n");
	if (rc)
		g->rc = rc;
	return rc;
}

static int diffmaps_section(ev_buf *b, const ev_report_data *ra, const ev_report_data *rb)
{
	int rc = ev_buf_puts(b, "<section id=\"grids\"><h2>Long context: the difference by length x depth</h2>\n");
	bool any = false;
	for (size_t i = 0; !rc && i < rb->n_suites; i++) {
		const ev_report_suite *sb = &rb->suites[i];
		const cJSON *ga = NULL;
		for (size_t k = 0; k < ra->n_suites; k++)
			if (!strcmp(ra->suites[k].name, sb->name))
				ga = ra->suites[k].grid;
		if (!sb->grid || !ga)
			continue;
		any = true;
		diff_ctx g = {b, sb->name, ga, 0};
		rc = ev_report_grid_each(sb->grid, diff_cell, &g);
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "<p class=\"note\">No long-context suite in both runs.</p>\n");
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- the page ------------------------------------------------------------------------ */

int ev_compare_html(ev_buf *b, ev_tracker *t, const ev_compare *c, const char *actions_json)
{
	ev_report_data ra, rb;
	int rc = ev_report_gather(&ra, t, c->run_a, 0);
	if (rc)
		return rc;
	if ((rc = ev_report_gather(&rb, t, c->run_b, 0))) {
		ev_report_data_clear(&ra);
		return rc;
	}
	cJSON *ans_a = answers_of(t, c, c->run_a, &rc), *ans_b = rc ? NULL : answers_of(t, c, c->run_b, &rc);
	if (!rc)
		rc = ev_html_begin(b);
	if (!rc)
		rc = ev_buf_printf(b, "Compare run %lld and run %lld</title><style>%s</style></head>\n<body>\n<h1 id=\"top\">"
		                      "Run %lld &#8594; run %lld</h1>\n<dl class=\"meta\"><dt>A (baseline)</dt><dd>",
		                   (long long)c->run_a, (long long)c->run_b, EV_HTML_STYLE, (long long)c->run_a,
		                   (long long)c->run_b);
	if (!rc)
		rc = ev_html_esc(b, c->model_a, 200);
	if (!rc)
		rc = ev_buf_puts(b, "</dd><dt>B (candidate)</dt><dd>");
	if (!rc)
		rc = ev_html_esc(b, c->model_b, 200);
	if (!rc)
		rc = ev_buf_puts(b, "</dd></dl>\n<nav><a href=\"#suites\">Differences</a><a href=\"#flips\">Flipped samples"
		                    "</a><a href=\"#grids\">Long context</a><a href=\"#regressions\">Regressions</a></nav>\n");
	if (!rc && c->n_prep) {
		rc = ev_buf_puts(b, "<p class=\"warn\" id=\"preprocessing\"><b>The runs preprocessed images differently</b>; a "
		                    "score change may not be the model's:</p><ul>");
		for (size_t i = 0; !rc && i < c->n_prep; i++) {
			rc = ev_buf_puts(b, "<li>");
			if (!rc)
				rc = ev_html_esc(b, c->prep[i].key, 80);
			if (!rc)
				rc = ev_buf_puts(b, ": ");
			if (!rc)
				rc = ev_html_esc(b, c->prep[i].a, 120);
			if (!rc)
				rc = ev_buf_puts(b, " &#8594; ");
			if (!rc)
				rc = ev_html_esc(b, c->prep[i].b, 120);
			if (!rc)
				rc = ev_buf_puts(b, "</li>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</ul>\n");
	}
	if (!rc && c->n_config) {
		rc = ev_buf_puts(b, "<p class=\"warn\" id=\"settings\"><b>The runs' settings differ</b>; a score change may "
		                    "not be the model's:</p><ul class=\"config-differs\">");
		for (size_t i = 0; !rc && i < c->n_config; i++) {
			rc = ev_buf_puts(b, "<li>");
			if (!rc)
				rc = ev_html_esc(b, c->config[i].key, 80);
			if (!rc)
				rc = ev_buf_puts(b, ": ");
			if (!rc)
				rc = ev_html_esc(b, c->config[i].a, 120);
			if (!rc)
				rc = ev_buf_puts(b, " &#8594; ");
			if (!rc)
				rc = ev_html_esc(b, c->config[i].b, 120);
			if (!rc)
				rc = ev_buf_puts(b, "</li>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</ul>\n");
	}
	if (!rc)
		rc = deltas_section(b, c);
	if (!rc)
		rc = flips_section(b, c, ans_a, ans_b);
	if (!rc)
		rc = diffmaps_section(b, &ra, &rb);
	if (!rc)
		rc = ev_buf_puts(b, "<section id=\"regressions\"><h2>Regressions</h2>\n");
	cJSON *acts = actions_json ? cJSON_Parse(actions_json) : NULL;
	const cJSON *a, *list = cJSON_GetObjectItemCaseSensitive(acts, "actions");
	if (!rc && !cJSON_GetArraySize(list))
		rc = ev_buf_puts(b, actions_json ? "<p class=\"note\">Nothing to file: no significant drop.</p>\n"
		                                 : "<p class=\"note\">Not filed (--file-regressions files each significant "
		                                   "drop).</p>\n");
	else if (!rc) {
		rc = ev_buf_puts(b, "<table class=\"regressions\"><thead><tr><th class=\"num\">regression</th><th>suite</th>"
		                    "<th>action</th></tr></thead><tbody>");
		cJSON_ArrayForEach(a, list)
		{
			if (rc)
				break;
			rc = ev_buf_printf(b, "<tr><td class=\"num\">%.0f</td><td>", ev_json_num(a, "regression_id", 0));
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(a, "suite", ""), 200);
			if (!rc)
				rc = ev_buf_puts(b, "</td><td>");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(a, "action", ""), 80);
			if (!rc)
				rc = ev_buf_puts(b, "</td></tr>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
	}
	cJSON_Delete(acts);
	if (!rc)
		rc = ev_buf_puts(b, "</section>\n<p class=\"note\"><a href=\"#top\">Top</a>. Written by evald from its tracker."
		                    "</p>\n</body></html>\n");
	cJSON_Delete(ans_a), cJSON_Delete(ans_b);
	ev_report_data_clear(&ra), ev_report_data_clear(&rb);
	return rc;
}
