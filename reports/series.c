/*
 * reports/series.c: `evald report --series M1,M2,... --format json|html|md`,
 * a checkpoint series as a trend. Each model stands for its latest
 * finished run; per suite the score with its 95% CI at each checkpoint; a
 * change point between consecutive checkpoints where their paired
 * comparison (ev_compare_runs: paired bootstrap interval and McNemar or
 * sign-flip p) says the score moved (p < 0.05 and the interval leaves out
 * zero); and the regressions filed between runs of the series with their
 * lifecycle (every status change, with its model and run).
 *
 * JSON: {"series":[{"model","run"}],"suites":[{"name","points":[{"model",
 * "run","score","ci_low","ci_high","n"}],"changes":[{"from","to","delta",
 * "ci_low","ci_high","p","direction"}]}],"regressions":[{"id","suite",
 * "baseline_run","candidate_run","status","delta","events":[...]}]}.
 */
#include "reports/reports_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SERIES_MAX 256

/* The latest finished run of each model, in the series' order. */
static int series_runs(ev_tracker *t, const char *const *models, size_t n, int64_t *runs)
{
	ev_run_row *rows = NULL;
	size_t nr = 0;
	int rc = ev_tracker_runs_list(t, &rows, &nr, 100000);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		runs[i] = 0;
		for (size_t k = 0; k < nr && !runs[i]; k++) /* newest first */
			if (rows[k].model && !strcmp(rows[k].model, models[i]) && rows[k].status &&
			    !strcmp(rows[k].status, "finished"))
				runs[i] = rows[k].id;
		if (!runs[i])
			rc = ev_error_set(EV_E_NOTFOUND, "series: no finished run of model '%s'", models[i]);
	}
	ev_run_rows_free(rows, nr);
	return rc;
}

static cJSON *build(ev_tracker *t, const char *const *models, size_t n, int *rc)
{
	int64_t runs[SERIES_MAX];
	if (n < 1 || n > SERIES_MAX) {
		*rc = ev_error_set(EV_E_INVALID, "series: 1 to %d models", SERIES_MAX);
		return NULL;
	}
	if ((*rc = series_runs(t, models, n, runs)))
		return NULL;
	cJSON *o = cJSON_CreateObject(), *ser = cJSON_AddArrayToObject(o, "series"),
	      *suites = cJSON_AddArrayToObject(o, "suites");
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "model", models[i]);
		cJSON_AddNumberToObject(e, "run", (double)runs[i]);
		cJSON_AddItemToArray(ser, e);
	}
	/* the points */
	for (size_t i = 0; i < n && !*rc; i++) {
		ev_report_data d;
		if ((*rc = ev_report_gather(&d, t, runs[i], 0)))
			break;
		for (size_t k = 0; k < d.n_suites; k++) {
			const ev_report_suite *s = &d.suites[k];
			cJSON *su = NULL, *x;
			cJSON_ArrayForEach(x, suites) if (!strcmp(ev_json_str(x, "name", ""), s->name)) su = x;
			if (!su) {
				su = cJSON_CreateObject();
				cJSON_AddStringToObject(su, "name", s->name);
				cJSON_AddArrayToObject(su, "points");
				cJSON_AddArrayToObject(su, "changes");
				cJSON_AddItemToArray(suites, su);
			}
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "model", models[i]);
			cJSON_AddNumberToObject(p, "run", (double)runs[i]);
			if (s->has_score)
				cJSON_AddNumberToObject(p, "score", s->score);
			if (s->has_ci) {
				cJSON_AddNumberToObject(p, "ci_low", s->ci_low);
				cJSON_AddNumberToObject(p, "ci_high", s->ci_high);
			}
			cJSON_AddNumberToObject(p, "n", (double)s->n);
			cJSON_AddItemToArray(cJSON_GetObjectItem(su, "points"), p);
		}
		ev_report_data_clear(&d);
	}
	/* the change points: consecutive checkpoints compared, paired */
	for (size_t i = 1; i < n && !*rc; i++) {
		ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
		ev_compare *c = NULL;
		if ((*rc = ev_compare_runs(&c, t, runs[i - 1], runs[i], &opt)))
			break;
		for (size_t k = 0; k < c->n_suites; k++) {
			const ev_compare_suite *s = &c->suites[k];
			bool moved = s->n > 0 && s->p < 0.05 && (s->ci_low > 0 || s->ci_high < 0);
			if (!moved)
				continue;
			cJSON *su = NULL, *x;
			cJSON_ArrayForEach(x, suites) if (!strcmp(ev_json_str(x, "name", ""), s->name)) su = x;
			if (!su)
				continue;
			cJSON *ch = cJSON_CreateObject();
			cJSON_AddStringToObject(ch, "from", models[i - 1]);
			cJSON_AddStringToObject(ch, "to", models[i]);
			cJSON_AddNumberToObject(ch, "delta", s->delta);
			cJSON_AddNumberToObject(ch, "ci_low", s->ci_low);
			cJSON_AddNumberToObject(ch, "ci_high", s->ci_high);
			cJSON_AddNumberToObject(ch, "p", s->p);
			cJSON_AddStringToObject(ch, "direction", s->delta < 0 ? "down" : "up");
			cJSON_AddItemToArray(cJSON_GetObjectItem(su, "changes"), ch);
		}
		ev_compare_free(c);
	}
	/* regressions between runs of the series, with their history */
	char *list = NULL;
	if (!*rc && !(*rc = ev_regressions_list_json(t, NULL, &list))) {
		cJSON *l = cJSON_Parse(list), *regs = cJSON_AddArrayToObject(o, "regressions"), *r;
		cJSON_ArrayForEach(r, cJSON_GetObjectItem(l, "regressions"))
		{
			int64_t a = (int64_t)ev_json_num(r, "baseline_run", 0), b = (int64_t)ev_json_num(r, "candidate_run", 0);
			bool in_a = false, in_b = false;
			for (size_t i = 0; i < n; i++)
				in_a = in_a || runs[i] == a, in_b = in_b || runs[i] == b;
			if (!in_a || !in_b)
				continue;
			char *shown = NULL;
			if (ev_regression_show_json(t, (int64_t)ev_json_num(r, "id", 0), &shown)) {
				ev_error_clear();
				continue;
			}
			cJSON *full = cJSON_Parse(shown), *keep = cJSON_CreateObject();
			free(shown);
			static const char *const keys[] = {"id", "suite", "baseline_run", "candidate_run", "baseline_model",
			                                   "candidate_model", "status", "delta", "created", "updated", "events"};
			for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
				cJSON *v = cJSON_GetObjectItem(full, keys[k]);
				if (v)
					cJSON_AddItemToObject(keep, keys[k], cJSON_Duplicate(v, 1));
			}
			cJSON_AddItemToArray(regs, keep);
			cJSON_Delete(full);
		}
		cJSON_Delete(l);
		free(list);
	}
	if (*rc) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- HTML ------------------------------------------------------------------------ */

static int trend_chart(ev_buf *b, const cJSON *su, const cJSON *series)
{
	const int X = 60, Y = 20, PW = 560, PH = 200;
	int n = cJSON_GetArraySize(series);
	double step = n > 1 ? (double)PW / (n - 1) : 0;
	int rc = ev_buf_printf(b,
	                       "<figure><svg class=\"chart trend\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	                       "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"Score by checkpoint with its "
	                       "95%% interval as a band; triangles mark significant changes (up or down); the table "
	                       "lists the values\">",
	                       X + PW + 40, Y + PH + 60, X + PW + 40, Y + PH + 60);
	for (int t = 0; !rc && t <= 4; t++)
		rc = ev_buf_printf(b,
		                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" "
		                   "text-anchor=\"end\">%.2f</text>",
		                   X, Y + PH - PH * t / 4.0, X + PW, Y + PH - PH * t / 4.0, X - 6, Y + PH - PH * t / 4.0 + 4,
		                   t / 4.0);
	/* x position of a model in the series */
	const cJSON *pts = cJSON_GetObjectItem(su, "points"), *p, *m;
	ev_buf band_top = EV_BUF_INIT(1 << 20), band_bot = EV_BUF_INIT(1 << 20), line = EV_BUF_INIT(1 << 20);
	cJSON_ArrayForEach(p, pts)
	{
		int idx = 0, i = 0;
		cJSON_ArrayForEach(m, series)
		{
			if (!strcmp(ev_json_str(m, "model", ""), ev_json_str(p, "model", "")))
				idx = i;
			i++;
		}
		double x = X + step * idx;
		if (cJSON_HasObjectItem(p, "score"))
			ev_buf_printf(&line, "%.1f,%.1f ", x, Y + PH - PH * ev_json_num(p, "score", 0));
		if (cJSON_HasObjectItem(p, "ci_low")) {
			ev_buf_printf(&band_top, "%.1f,%.1f ", x, Y + PH - PH * ev_json_num(p, "ci_high", 0));
			char pt[48];
			snprintf(pt, sizeof pt, "%.1f,%.1f ", x, Y + PH - PH * ev_json_num(p, "ci_low", 0));
			/* the lower edge runs back: prepend */
			ev_buf nb = EV_BUF_INIT(1 << 20);
			ev_buf_puts(&nb, pt);
			if (band_bot.len)
				ev_buf_append(&nb, band_bot.data, band_bot.len);
			ev_buf_free(&band_bot);
			band_bot = nb;
		}
	}
	if (!rc && band_top.len)
		rc = ev_buf_printf(b, "<polygon points=\"%s%s\" fill=\"#0072B2\" fill-opacity=\"0.18\" stroke=\"none\"/>",
		                   band_top.data, band_bot.data ? band_bot.data : "");
	if (!rc && line.len)
		rc = ev_buf_printf(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"#0072B2\" stroke-width=\"2\"/>", line.data);
	ev_buf_free(&band_top), ev_buf_free(&band_bot), ev_buf_free(&line);
	cJSON_ArrayForEach(p, pts)
	{
		if (rc)
			break;
		int idx = 0, i = 0;
		cJSON_ArrayForEach(m, series)
		{
			if (!strcmp(ev_json_str(m, "model", ""), ev_json_str(p, "model", "")))
				idx = i;
			i++;
		}
		double x = X + step * idx;
		rc = ev_buf_puts(b, "<g class=\"point\" data-model=\"");
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(p, "model", ""), 120);
		if (!rc)
			rc = ev_buf_putc(b, '"');
		if (!rc)
			rc = ev_html_num_attr(b, "score", ev_json_num(p, "score", 0));
		if (!rc)
			rc = ev_buf_puts(b, "><title>");
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(p, "model", ""), 120);
		if (!rc)
			rc = ev_buf_printf(b, ": %.3f</title><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#0072B2\"/></g>"
			                      "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
			                   ev_json_num(p, "score", 0), x, Y + PH - PH * ev_json_num(p, "score", 0), x, Y + PH + 18);
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(p, "model", ""), 16);
		if (!rc)
			rc = ev_buf_puts(b, "</text>");
	}
	const cJSON *ch;
	cJSON_ArrayForEach(ch, cJSON_GetObjectItem(su, "changes"))
	{
		if (rc)
			break;
		int idx = 0, i = 0;
		cJSON_ArrayForEach(m, series)
		{
			if (!strcmp(ev_json_str(m, "model", ""), ev_json_str(ch, "to", "")))
				idx = i;
			i++;
		}
		double x = X + step * idx - step / 2;
		bool down = !strcmp(ev_json_str(ch, "direction", ""), "down");
		rc = ev_buf_printf(b,
		                   "<g class=\"change\" data-direction=\"%s\"><title>%+.3f, p %.3g</title><polygon "
		                   "points=\"%.1f,%d %.1f,%d %.1f,%d\" fill=\"%s\"/></g>",
		                   down ? "down" : "up", ev_json_num(ch, "delta", 0), ev_json_num(ch, "p", 1), x - 7,
		                   down ? Y + PH + 30 : Y + PH + 42, x + 7, down ? Y + PH + 30 : Y + PH + 42, x,
		                   down ? Y + PH + 42 : Y + PH + 30, down ? "#D55E00" : "#009E73");
	}
	return rc ? rc : ev_buf_puts(b, "</svg></figure>\n");
}

static int series_html(ev_buf *b, const cJSON *o)
{
	const cJSON *series = cJSON_GetObjectItem(o, "series"), *su, *p;
	int rc = ev_html_begin(b);
	if (!rc)
		rc = ev_buf_printf(b, "Checkpoint series</title><style>%s</style></head>\n<body>\n<h1 id=\"top\">Checkpoint "
		                      "series</h1>\n<p class=\"note\">",
		                   EV_HTML_STYLE);
	cJSON_ArrayForEach(p, series)
	{
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(p, "model", ""), 120);
		if (!rc)
			rc = ev_buf_printf(b, " (run %.0f)%s", ev_json_num(p, "run", 0), p->next ? " &#8594; " : "");
	}
	if (!rc)
		rc = ev_buf_puts(b, "</p>\n<section id=\"trends\"><h2>Scores over the series</h2>\n");
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(o, "suites"))
	{
		if (rc)
			break;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(su, "name", ""), 200);
		if (!rc)
			rc = ev_buf_puts(b, "</h3>\n");
		if (!rc)
			rc = trend_chart(b, su, series);
		if (!rc)
			rc = ev_buf_puts(b, "<table class=\"trend\"><thead><tr><th>checkpoint</th><th class=\"num\">run</th>"
			                    "<th class=\"num\">score</th><th class=\"num\">95% CI</th><th class=\"num\">n</th>"
			                    "</tr></thead><tbody>");
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(su, "points"))
		{
			if (rc)
				break;
			rc = ev_buf_puts(b, "<tr><td>");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(p, "model", ""), 120);
			if (!rc)
				rc = ev_buf_printf(b, "</td><td class=\"num\">%.0f</td><td class=\"num\">%.3f</td>", ev_json_num(p, "run", 0),
				                   ev_json_num(p, "score", 0));
			if (!rc)
				rc = cJSON_HasObjectItem(p, "ci_low")
				         ? ev_buf_printf(b, "<td class=\"num\">%.3f to %.3f</td>", ev_json_num(p, "ci_low", 0),
				                         ev_json_num(p, "ci_high", 0))
				         : ev_buf_puts(b, "<td class=\"num\">-</td>");
			if (!rc)
				rc = ev_buf_printf(b, "<td class=\"num\">%.0f</td></tr>", ev_json_num(p, "n", 0));
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
		const cJSON *ch;
		cJSON_ArrayForEach(ch, cJSON_GetObjectItem(su, "changes"))
		{
			if (rc)
				break;
			rc = ev_buf_printf(b, "<p class=\"change\">Change point %s: ", ev_json_str(ch, "direction", ""));
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(ch, "from", ""), 120);
			if (!rc)
				rc = ev_buf_puts(b, " &#8594; ");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(ch, "to", ""), 120);
			if (!rc)
				rc = ev_buf_printf(b, ": %+.3f (95%% CI %+.3f to %+.3f), p %.3g</p>\n", ev_json_num(ch, "delta", 0),
				                   ev_json_num(ch, "ci_low", 0), ev_json_num(ch, "ci_high", 0), ev_json_num(ch, "p", 1));
		}
	}
	if (!rc)
		rc = ev_buf_puts(b, "</section>\n<section id=\"regressions\"><h2>Regressions and their lifecycle</h2>\n");
	const cJSON *r, *regs = cJSON_GetObjectItem(o, "regressions");
	if (!rc && !cJSON_GetArraySize(regs))
		rc = ev_buf_puts(b, "<p class=\"note\">None filed between runs of this series.</p>\n");
	cJSON_ArrayForEach(r, regs)
	{
		if (rc)
			break;
		rc = ev_buf_printf(b, "<h3 class=\"regression\" data-id=\"%.0f\">Regression %.0f: ", ev_json_num(r, "id", 0),
		                   ev_json_num(r, "id", 0));
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(r, "suite", ""), 120);
		if (!rc)
			rc = ev_buf_printf(b, ", run %.0f &#8594; %.0f, %+.3f, now ", ev_json_num(r, "baseline_run", 0),
			                   ev_json_num(r, "candidate_run", 0), ev_json_num(r, "delta", 0));
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(r, "status", ""), 40);
		if (!rc)
			rc = ev_buf_puts(b, "</h3><ol class=\"events\">");
		const cJSON *e;
		cJSON_ArrayForEach(e, cJSON_GetObjectItem(r, "events"))
		{
			if (rc)
				break;
			rc = ev_buf_puts(b, "<li>");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(e, "at", ""), 40);
			if (!rc)
				rc = ev_buf_puts(b, ": ");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(e, "status", ""), 40);
			if (!rc && *ev_json_str(e, "model", "")) {
				rc = ev_buf_puts(b, " (");
				if (!rc)
					rc = ev_html_esc(b, ev_json_str(e, "model", ""), 120);
				if (!rc)
					rc = ev_buf_puts(b, ")");
			}
			if (!rc)
				rc = ev_buf_puts(b, "</li>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</ol>\n");
	}
	return rc ? rc : ev_buf_puts(b, "</section>\n</body></html>\n");
}

static int series_md(ev_buf *b, const cJSON *o)
{
	const cJSON *su, *p;
	int rc = ev_buf_puts(b, "# Checkpoint series\n\n");
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(o, "suites"))
	{
		if (rc)
			break;
		rc = ev_buf_printf(b, "## %s\n\n| checkpoint | run | score | 95%% CI | n |\n| --- | ---: | ---: | ---: | ---: |\n",
		                   ev_json_str(su, "name", ""));
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(su, "points"))
		{
			if (!rc)
				rc = ev_buf_printf(b, "| %s | %.0f | %.3f | %.3f-%.3f | %.0f |\n", ev_json_str(p, "model", ""),
				                   ev_json_num(p, "run", 0), ev_json_num(p, "score", 0), ev_json_num(p, "ci_low", 0),
				                   ev_json_num(p, "ci_high", 0), ev_json_num(p, "n", 0));
		}
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(su, "changes"))
		{
			if (!rc)
				rc = ev_buf_printf(b, "\nChange point (%s): %s -> %s, %+.3f, p %.3g\n", ev_json_str(p, "direction", ""),
				                   ev_json_str(p, "from", ""), ev_json_str(p, "to", ""), ev_json_num(p, "delta", 0),
				                   ev_json_num(p, "p", 1));
		}
		if (!rc)
			rc = ev_buf_puts(b, "\n");
	}
	return rc;
}

int ev_report_series(ev_tracker *t, const char *const *models, size_t n, ev_report_format fmt, ev_buf *out)
{
	int rc = 0;
	cJSON *o = build(t, models, n, &rc);
	if (!o)
		return rc;
	if (fmt == EV_REPORT_JSON) {
		char *text = ev_json_print(o);
		rc = text ? ev_buf_puts(out, text) : ev_error_set(EV_E_NOMEM, "out of memory");
		if (!rc)
			rc = ev_buf_putc(out, '\n');
		free(text);
	} else if (fmt == EV_REPORT_HTML) {
		rc = series_html(out, o);
	} else {
		rc = series_md(out, o);
	}
	cJSON_Delete(o);
	return rc;
}
