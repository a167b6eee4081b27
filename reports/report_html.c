/*
 * reports/report_html.c: a run's report as one self-contained HTML file.
 *
 * No script and no fetch: a Content-Security-Policy forbids every load
 * but inline styles and data: images; charts are inline SVG drawn here,
 * each with a title, a description and the table it came from beside it
 * (the text alternative). The markup is well-formed XML (every element
 * closed, attributes quoted, text escaped), so an XML parser checks it.
 * Colours: the Okabe-Ito palette for series and viridis for the heatmap,
 * both told apart under the common colour-vision deficiencies; every value
 * is also printed as text.
 *
 * Figures are the JSON report's (report_json.c): the same data, each
 * carried in a data- attribute at full precision beside the rounded text.
 * The per-sample tables come from a second pass over the results, in
 * folds of 200 rows that the reader opens (<details>), so a run of 100,000
 * samples stays a page a browser shows at once. Output depends only on
 * the tracker's contents.
 */
#include "reports/reports_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Characters of the per-sample cells (failed samples; passed ones show
 * only the start of their answer: they are there to be found, not read)
 * and most thumbnail bytes (failed samples' images). */
#define INPUT_CHARS 40
#define ANSWER_CHARS 48
#define TARGET_CHARS 24
#define EXTRACTED_CHARS 24
#define PASSED_CHARS 20
#define ROWS_PER_FOLD 200
#define THUMB_MAX_BYTES (24 * 1024)
#define THUMBS_MAX_BYTES ((size_t)2 << 20)

#define esc ev_html_esc
#define num_attr ev_html_num_attr
#define STYLE EV_HTML_STYLE
static const char *const OKABE_BLUE = "#0072B2", *const OKABE_ORANGE = "#E69F00", *const OKABE_VERMILLION = "#D55E00";

/* ---- escaping ------------------------------------------------------------------ */

/* Text as valid UTF-8 (cut after max code points, "..." appended), with
 * & < > " ' as entities: safe in element text and in quoted attributes. */
int ev_html_esc(ev_buf *b, const char *s, size_t max)
{
	char *t = ev_report_text(s, max);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	int rc = 0;
	for (const char *p = t; *p && !rc; p++) {
		switch (*p) {
		case '&': rc = ev_buf_puts(b, "&amp;"); break;
		case '<': rc = ev_buf_puts(b, "&lt;"); break;
		case '>': rc = ev_buf_puts(b, "&gt;"); break;
		case '"': rc = ev_buf_puts(b, "&quot;"); break;
		case '\'': rc = ev_buf_puts(b, "&#39;"); break;
		default:
			/* control characters other than tab and newline are not allowed in XML */
			rc = (unsigned char)*p < 0x20 && *p != '\t' && *p != '\n' ? ev_buf_puts(b, "\xEF\xBF\xBD")
			                                                          : ev_buf_putc(b, *p);
		}
	}
	free(t);
	return rc;
}

/* A number for data- attributes, printed by the JSON reports' printer
 * (ev_json_print: the shortest of 15 or 17 digits that reads back
 * exactly), so the pages carry the same figure to the digit. */
int ev_html_num_attr(ev_buf *b, const char *name, double v)
{
	cJSON *n = cJSON_CreateNumber(v);
	char *t = n ? ev_json_print(n) : NULL;
	int rc = t ? ev_buf_printf(b, " data-%s=\"%s\"", name, t) : ev_error_set(EV_E_NOMEM, "report: out of memory");
	free(t);
	cJSON_Delete(n);
	return rc;
}

/* ---- the page ------------------------------------------------------------------- */

const char EV_HTML_STYLE[] =
	"body{font:15px/1.45 system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:1100px;margin:0 auto;"
	"padding:1em 1.5em}h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}"
	"dl.meta{display:grid;grid-template-columns:max-content auto;gap:.15em 1em}dl.meta dt{font-weight:600}"
	"dl.meta dd{margin:0}table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.2em .5em;"
	"text-align:left;vertical-align:top}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}"
	"tr.fail td.score{color:#a02c00;font-weight:600}td.text{max-width:26em;overflow-wrap:anywhere;font-size:.9em}"
	"figure{margin:.8em 0}figcaption{font-size:.9em;color:#444}svg text{font:12px system-ui,sans-serif}"
	"details{margin:.3em 0}summary{cursor:pointer}.note{color:#555;font-size:.9em}nav a{margin-right:1em}"
	"img.thumb{max-width:64px;max-height:64px;vertical-align:middle}.warn{color:#a02c00}"
	"table.samples td:nth-child(2),table.samples td:nth-child(3){text-align:right}"
	"table.samples td:nth-child(n+5){max-width:24em;overflow-wrap:anywhere;font-size:.9em}"
	"table.samples tr.fail td:nth-child(2){color:#a02c00;font-weight:600}";

int ev_html_begin(ev_buf *b)
{
	return ev_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>"
	                      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	                      "img-src data:; style-src 'unsafe-inline'; form-action 'self'\"/>"
	                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>");
}

static int head(ev_buf *b, const ev_report_data *d)
{
	const ev_run_row *r = &d->run;
	int rc = ev_html_begin(b);
	if (!rc)
		rc = ev_buf_printf(b, "Run %lld: ", (long long)r->id);
	if (!rc)
		rc = esc(b, r->model, 200);
	if (!rc)
		rc = ev_buf_printf(b, "</title><style>%s</style></head>\n<body>\n<h1 id=\"top\">Run %lld: ", STYLE,
		                   (long long)r->id);
	if (!rc)
		rc = esc(b, r->model, 200);
	if (!rc)
		rc = ev_buf_puts(b, "</h1>\n<dl class=\"meta\">");
	struct {
		const char *k, *v;
	} rows[] = {{"model", r->model}, {"source", r->model_source}, {"status", r->status}};
	for (size_t i = 0; !rc && i < sizeof rows / sizeof rows[0]; i++) {
		rc = ev_buf_printf(b, "<dt>%s</dt><dd>", rows[i].k);
		if (!rc)
			rc = esc(b, rows[i].v ? rows[i].v : "-", 400);
		if (!rc)
			rc = ev_buf_puts(b, "</dd>");
	}
	char c1[32] = "-", c2[32] = "-";
	if (r->created > 0)
		ev_iso8601(c1, r->created);
	if (r->finished > 0)
		ev_iso8601(c2, r->finished);
	if (!rc)
		rc = ev_buf_printf(b,
		                   "<dt>created</dt><dd>%s</dd><dt>finished</dt><dd>%s</dd><dt>results</dt><dd>%lld of %lld "
		                   "planned, %d epoch%s</dd><dt>complete</dt><dd>%s</dd></dl>\n",
		                   c1, c2, (long long)r->n_results, (long long)r->n_planned, r->epochs, r->epochs == 1 ? "" : "s",
		                   d->complete ? "yes (figures from the run's summary)"
		                               : "no (figures so far, from the results; no confidence intervals)");
	if (!rc)
		rc = ev_buf_puts(b, "<nav><a href=\"#suites\">Suites</a><a href=\"#failures\">Failure reasons</a>"
		                    "<a href=\"#grids\">Long context</a><a href=\"#passk\">pass@k</a>"
		                    "<a href=\"#most-failed\">Most failed</a><a href=\"#samples\">Samples</a></nav>\n");
	return rc;
}

/* ---- suites: bars with 95% CI whiskers ------------------------------------------ */

static int suites_section(ev_buf *b, const ev_report_data *d)
{
	const int W = 720, L = 200, P = 440, RH = 26, top = 24;
	int H = top + RH * (int)d->n_suites + 30;
	int rc = ev_buf_printf(b,
	                       "<section id=\"suites\"><h2>Suites</h2>\n<figure><svg class=\"chart suites\" "
	                       "xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
	                       "role=\"img\" aria-labelledby=\"suites-t suites-d\"><title id=\"suites-t\">Score by suite"
	                       "</title><desc id=\"suites-d\">Each suite's mean score from 0 to 1 as a bar, its 95%% "
	                       "confidence interval as a line across the bar's end; the table below lists the same "
	                       "figures.</desc>",
	                       W, H, W, H);
	for (int t = 0; !rc && t <= 4; t++) {
		double x = L + P * t / 4.0;
		rc = ev_buf_printf(b,
		                   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%d\" "
		                   "text-anchor=\"middle\">%.2f</text>",
		                   x, top - 6, x, H - 24, x, H - 8, t / 4.0);
	}
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		int y = top + RH * (int)i;
		rc = ev_buf_printf(b, "<g class=\"suite\" data-suite=\"");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_puts(b, "\"><title>");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc && s->has_score)
			rc = ev_buf_printf(b, ": %.3f", s->score);
		if (!rc && s->has_ci)
			rc = ev_buf_printf(b, " (95%% CI %.3f to %.3f)", s->ci_low, s->ci_high);
		if (!rc)
			rc = ev_buf_printf(b, ", n %ld</title><text x=\"%d\" y=\"%d\" text-anchor=\"end\">", s->n, L - 8,
			                   y + RH / 2 + 4);
		if (!rc)
			rc = esc(b, s->name, 28);
		if (!rc)
			rc = ev_buf_puts(b, "</text>");
		if (!rc && s->has_score)
			rc = ev_buf_printf(b,
			                   "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
			                   "<text x=\"%.1f\" y=\"%d\">%.3f</text>",
			                   L, y + 4, P * s->score, RH - 8, OKABE_BLUE,
			                   L + P * (s->has_ci ? s->ci_high : s->score) + 6, y + RH / 2 + 4, s->score);
		if (!rc && s->has_ci)
			rc = ev_buf_printf(b,
			                   "<line class=\"ci\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" "
			                   "stroke-width=\"2\"/><line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>"
			                   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>",
			                   L + P * s->ci_low, y + RH / 2, L + P * s->ci_high, y + RH / 2, L + P * s->ci_low, y + 7,
			                   L + P * s->ci_low, y + RH - 7, L + P * s->ci_high, y + 7, L + P * s->ci_high, y + RH - 7);
		if (!rc)
			rc = ev_buf_puts(b, "</g>");
	}
	if (!rc)
		rc = ev_buf_puts(b, "</svg><figcaption>Mean score by suite with its 95% confidence interval.</figcaption>"
		                    "</figure>\n<table class=\"suites\"><thead><tr><th>suite</th><th class=\"num\">score</th>"
		                    "<th class=\"num\">95% CI</th><th class=\"num\">n</th><th class=\"num\">errors</th></tr>"
		                    "</thead><tbody>");
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		rc = ev_buf_puts(b, "<tr data-suite=\"");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_putc(b, '"');
		if (!rc && s->has_score)
			rc = num_attr(b, "score", s->score);
		if (!rc && s->has_ci)
			rc = num_attr(b, "ci-low", s->ci_low);
		if (!rc && s->has_ci)
			rc = num_attr(b, "ci-high", s->ci_high);
		if (!rc)
			rc = ev_buf_printf(b, " data-n=\"%ld\" data-errors=\"%ld\"><td>", s->n, s->errors);
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = s->has_score ? ev_buf_printf(b, "</td><td class=\"num\">%.3f</td>", s->score)
			                  : ev_buf_puts(b, "</td><td class=\"num\">-</td>");
		if (!rc)
			rc = s->has_ci ? ev_buf_printf(b, "<td class=\"num\">%.3f to %.3f</td>", s->ci_low, s->ci_high)
			               : ev_buf_puts(b, "<td class=\"num\">-</td>");
		if (!rc)
			rc = ev_buf_printf(b, "<td class=\"num\">%ld</td><td class=\"num\">%ld</td></tr>", s->n, s->errors);
	}
	if (!rc)
		rc = ev_buf_puts(b, "</tbody></table></section>\n");
	return rc;
}

/* ---- thinking effort: accuracy against tokens (evald run --effort) ---------------- */

static int effort_section(ev_buf *b, const ev_report_data *d)
{
	if (!d->effort)
		return 0;
	int rc = ev_buf_puts(b, "<section id=\"effort\"><h2>Thinking effort</h2>\n");
	const cJSON *su, *p;
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(d->effort, "suites"))
	{
		if (rc)
			break;
		const cJSON *lv = cJSON_GetObjectItem(su, "levels");
		double tmax = 1, tmin = 1e300;
		cJSON_ArrayForEach(p, lv)
		{
			double t = ev_json_num(p, "completion_tokens", 0);
			tmax = t > tmax ? t : tmax;
			tmin = t > 0 && t < tmin ? t : tmin;
		}
		if (tmin > tmax)
			tmin = 1;
		const int X = 60, Y = 16, PW = 460, PH = 200;
		double lx0 = log(tmin > 0 ? tmin : 1), lx1 = log(tmax), span = lx1 > lx0 ? lx1 - lx0 : 1;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = ev_html_esc(b, ev_json_str(su, "name", ""), 200);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</h3><figure><svg class=\"chart effort\" xmlns=\"http://www.w3.org/2000/svg\" "
			                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"Score "
			                   "against mean completion tokens (log scale), one point a thinking-effort level with its "
			                   "95%% interval; the table lists the values\">",
			                   X + PW + 60, Y + PH + 40, X + PW + 60, Y + PH + 40);
		for (int t = 0; !rc && t <= 4; t++)
			rc = ev_buf_printf(b,
			                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" "
			                   "y=\"%.1f\" text-anchor=\"end\">%.2f</text>",
			                   X, Y + PH - PH * t / 4.0, X + PW, Y + PH - PH * t / 4.0, X - 6, Y + PH - PH * t / 4.0 + 4,
			                   t / 4.0);
		if (!rc)
			rc = ev_buf_puts(b, "<polyline fill=\"none\" stroke=\"#0072B2\" stroke-width=\"2\" points=\"");
		cJSON_ArrayForEach(p, lv)
		{
			double t = ev_json_num(p, "completion_tokens", 0);
			double x = X + PW * (log(t > 0 ? t : tmin) - lx0) / span, y = Y + PH - PH * ev_json_num(p, "score", 0);
			if (!rc)
				rc = ev_buf_printf(b, "%.1f,%.1f ", x, y);
		}
		if (!rc)
			rc = ev_buf_puts(b, "\"/>");
		cJSON_ArrayForEach(p, lv)
		{
			if (rc)
				break;
			double t = ev_json_num(p, "completion_tokens", 0);
			double x = X + PW * (log(t > 0 ? t : tmin) - lx0) / span, y = Y + PH - PH * ev_json_num(p, "score", 0);
			rc = ev_buf_puts(b, "<g class=\"level\" data-level=\"");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(p, "level", ""), 16);
			if (!rc)
				rc = ev_buf_putc(b, '"');
			if (!rc)
				rc = ev_html_num_attr(b, "score", ev_json_num(p, "score", 0));
			if (!rc)
				rc = ev_html_num_attr(b, "tokens", t);
			if (!rc)
				rc = ev_buf_printf(b,
				                   "><title>%.3f (95%% CI %.3f to %.3f) at %.1f tokens</title><line x1=\"%.1f\" "
				                   "y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/><circle cx=\"%.1f\" "
				                   "cy=\"%.1f\" r=\"5\" fill=\"#0072B2\"/><text x=\"%.1f\" y=\"%.1f\">",
				                   ev_json_num(p, "score", 0), ev_json_num(p, "ci_low", 0), ev_json_num(p, "ci_high", 0), t,
				                   x, Y + PH - PH * ev_json_num(p, "ci_low", 0), x, Y + PH - PH * ev_json_num(p, "ci_high", 0),
				                   x, y, x + 8, y - 8);
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(p, "level", ""), 16);
			if (!rc)
				rc = ev_buf_puts(b, "</text></g>");
		}
		if (!rc)
			rc = ev_buf_printf(b, "<text x=\"%d\" y=\"%d\">mean completion tokens (log)</text></svg></figure>",
			                   X + PW / 2 - 80, Y + PH + 30);
		if (!rc)
			rc = ev_buf_puts(b, "<table class=\"effort\"><thead><tr><th>level</th><th class=\"num\">score</th>"
			                    "<th class=\"num\">95% CI</th><th class=\"num\">vs level before (paired)</th>"
			                    "<th class=\"num\">completion tokens</th><th class=\"num\">thinking</th>"
			                    "<th class=\"num\">answer</th><th class=\"num\">latency s</th></tr></thead><tbody>");
		cJSON_ArrayForEach(p, lv)
		{
			if (!rc)
				rc = ev_buf_puts(b, "<tr><td>");
			if (!rc)
				rc = ev_html_esc(b, ev_json_str(p, "level", ""), 16);
			const cJSON *vs = cJSON_GetObjectItem(p, "vs_previous");
			if (!rc)
				rc = ev_buf_printf(b, "</td><td class=\"num\">%.3f</td><td class=\"num\">%.3f to %.3f</td><td class=\"num\">",
				                   ev_json_num(p, "score", 0), ev_json_num(p, "ci_low", 0), ev_json_num(p, "ci_high", 0));
			if (!rc && vs)
				rc = ev_buf_printf(b, "%+.3f (%+.3f to %+.3f), p %.3g", ev_json_num(vs, "diff", 0),
				                   ev_json_num(vs, "ci_low", 0), ev_json_num(vs, "ci_high", 0), ev_json_num(vs, "p", 1));
			if (!rc)
				rc = ev_buf_printf(b,
				                   "</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td>"
				                   "<td class=\"num\">%.3f</td></tr>",
				                   ev_json_num(p, "completion_tokens", 0), ev_json_num(p, "thinking_tokens", 0),
				                   ev_json_num(p, "answer_tokens", 0), ev_json_num(p, "latency_s", 0));
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
		if (!rc && !cJSON_IsTrue(cJSON_GetObjectItem(su, "tokens_rise")))
			rc = ev_buf_puts(b, "<p class=\"warn\">Token use does not rise with the level: the backend may ignore "
			                    "the setting.</p>\n");
	}
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- failure reasons ------------------------------------------------------------- */

static int failures_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "<section id=\"failures\"><h2>Failure reasons</h2>\n");
	bool any = false;
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		int n = cJSON_GetArraySize(s->failures);
		if (n <= 0)
			continue;
		any = true;
		double max = 1;
		const cJSON *e;
		cJSON_ArrayForEach(e, s->failures) max = e->valuedouble > max ? e->valuedouble : max;
		const int L = 200, P = 360, RH = 22, H = RH * n + 8;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</h3><figure><svg class=\"chart failures\" xmlns=\"http://www.w3.org/2000/svg\" "
			                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"Results by "
			                   "failure reason, as counted in the table below\">",
			                   L + P + 80, H, L + P + 80, H);
		int k = 0;
		cJSON_ArrayForEach(e, s->failures)
		{
			if (rc)
				break;
			int y = 4 + RH * k++;
			rc = ev_buf_printf(b, "<g><title>");
			if (!rc)
				rc = esc(b, e->string, 120);
			if (!rc)
				rc = ev_buf_printf(b, ": %.0f</title><text x=\"%d\" y=\"%d\" text-anchor=\"end\">", e->valuedouble, L - 8,
				                   y + 15);
			if (!rc)
				rc = esc(b, e->string, 28);
			if (!rc)
				rc = ev_buf_printf(b,
				                   "</text><rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
				                   "<text x=\"%.1f\" y=\"%d\">%.0f</text></g>",
				                   L, y + 2, P * e->valuedouble / max, RH - 6, OKABE_VERMILLION,
				                   L + P * e->valuedouble / max + 6, y + 15, e->valuedouble);
		}
		if (!rc)
			rc = ev_buf_puts(b, "</svg></figure><table class=\"failures\"><thead><tr><th>reason</th>"
			                    "<th class=\"num\">results</th></tr></thead><tbody>");
		cJSON_ArrayForEach(e, s->failures)
		{
			if (rc)
				break;
			rc = ev_buf_puts(b, "<tr data-reason=\"");
			if (!rc)
				rc = esc(b, e->string, 200);
			if (!rc)
				rc = ev_buf_putc(b, '"');
			if (!rc)
				rc = num_attr(b, "count", e->valuedouble);
			if (!rc)
				rc = ev_buf_puts(b, "><td>");
			if (!rc)
				rc = esc(b, e->string, 200);
			if (!rc)
				rc = ev_buf_printf(b, "</td><td class=\"num\">%.0f</td></tr>", e->valuedouble);
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "<p class=\"note\">No failures.</p>\n");
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- the long-context heatmap ------------------------------------------------------ */

/* viridis at t in [0, 1], from five of its published stops */
static void viridis(double t, char out[8], bool *dark)
{
	static const unsigned char stop[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
	t = t < 0 ? 0 : t > 1 ? 1 : t;
	double x = t * 4;
	int i = x >= 4 ? 3 : (int)x;
	double f = x - i;
	int c[3];
	for (int k = 0; k < 3; k++)
		c[k] = (int)lround(stop[i][k] + (stop[i + 1][k] - stop[i][k]) * f);
	snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
	*dark = t < 0.6; /* white text on the dark end */
}

typedef struct {
	ev_buf *b;
	const char *suite;
	int rc;
} grid_ctx;

enum { GX = EV_HTML_GX, GY = EV_HTML_GY, CW = EV_HTML_CW, CH = EV_HTML_CH };

int ev_html_heatmap_frame(ev_buf *b, const char *suite, const char *task, const char *length, const char *depth,
                          size_t li, size_t nl, size_t di, size_t nd, const char *svg_class, const char *aria,
                          const char *defs, int *x, int *y)
{
	int rc = 0;
	if (li == 0 && di == 0) { /* a task's heatmap starts */
		int W = GX + CW * (int)nd + 20, H = GY + CH * (int)nl + 40;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = esc(b, suite, 200);
		if (!rc)
			rc = ev_buf_puts(b, ": ");
		if (!rc)
			rc = esc(b, task, 200);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</h3><figure><svg class=\"chart %s\" xmlns=\"http://www.w3.org/2000/svg\" "
			                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
			                   svg_class, W, H, W, H);
		if (!rc)
			rc = esc(b, aria, 1000);
		if (!rc)
			rc = ev_buf_printf(b, "\">%s<text x=\"%d\" y=\"14\">needle depth %%</text><text x=\"4\" y=\"%d\">length</text>",
			                   defs, GX, GY - 22);
	}
	if (!rc && li == 0) {
		rc = ev_buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", GX + CW * (int)di + CW / 2, GY - 6);
		if (!rc)
			rc = esc(b, depth, 12);
		if (!rc)
			rc = ev_buf_puts(b, "</text>");
	}
	if (!rc && di == 0) {
		char lab[32];
		ev_report_length_label(lab, length);
		rc = ev_buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", GX - 8,
		                   GY + CH * (int)li + CH / 2 + 4, lab);
	}
	*x = GX + CW * (int)di, *y = GY + CH * (int)li;
	return rc;
}

int ev_html_heatmap_empty(ev_buf *b, int x, int y)
{
	return ev_buf_printf(b,
	                     "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f2f2f2\" stroke=\"#fff\"/>"
	                     "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">-</text>",
	                     x, y, CW, CH, x + CW / 2, y + CH / 2 + 4);
}

static int grid_cell(void *ctx, const char *task, const char *length, const char *depth, const ev_report_cell *c,
                     size_t li, size_t nl, size_t di, size_t nd)
{
	grid_ctx *g = ctx;
	ev_buf *b = g->b;
	int rc = 0;
	int x, y;
	rc = ev_html_heatmap_frame(b, g->suite, task, length, depth, li, nl, di, nd, "heatmap",
	                           "Score by context length (rows) and needle depth (columns); each cell's score is "
	                           "written in it, its 95% interval in its title; hatched cells do not differ "
	                           "significantly from the task's mean",
	                           "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
	                           "patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" "
	                           "stroke=\"#fff\" stroke-opacity=\"0.55\" stroke-width=\"2\"/></pattern></defs>",
	                           &x, &y);
	if (!rc && c->n > 0) {
		char col[8];
		bool dark;
		viridis(c->score, col, &dark);
		rc = ev_buf_puts(b, "<g class=\"cell\" data-task=\"");
		if (!rc)
			rc = esc(b, task, 200);
		if (!rc)
			rc = ev_buf_printf(b, "\" data-length=\"%s\" data-depth=\"%s\" data-n=\"%.0f\"", length, depth, c->n);
		if (!rc)
			rc = num_attr(b, "score", c->score);
		if (!rc)
			rc = num_attr(b, "ci-low", c->ci_low);
		if (!rc)
			rc = num_attr(b, "ci-high", c->ci_high);
		if (!rc)
			rc = ev_buf_printf(b,
			                   " data-significant=\"%s\"><title>length %s, depth %s%%: %.3f (95%% CI %.3f to %.3f, "
			                   "n %.0f)%s</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
			                   "stroke=\"#fff\"/>",
			                   c->significant ? "true" : "false", length, depth, c->score, c->ci_low, c->ci_high, c->n,
			                   c->significant ? "" : "; not significantly different from the task's mean", x, y, CW,
			                   CH, col);
		if (!rc && !c->significant)
			rc = ev_buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#hatch)\"/>", x, y,
			                   CW, CH);
		if (!rc)
			rc = ev_buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">%.2f</text></g>",
			                   x + CW / 2, y + CH / 2 + 4, dark ? "#fff" : "#000", c->score);
	} else if (!rc) {
		rc = ev_html_heatmap_empty(b, x, y);
	}
	if (!rc && li == nl - 1 && di == nd - 1) { /* the legend, then the end */
		int ly = GY + CH * (int)nl + 12;
		for (int k = 0; !rc && k < 10; k++) {
			char col[8];
			bool dark;
			viridis((k + 0.5) / 10, col, &dark);
			rc = ev_buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"16\" height=\"10\" fill=\"%s\"/>", GX + 16 * k, ly,
			                   col);
		}
		if (!rc)
			rc = ev_buf_printf(b,
			                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text><text x=\"%d\" y=\"%d\">1</text>"
			                   "</svg><figcaption>Rows: context length; columns: needle depth. Hatched: the cell's "
			                   "95%% interval holds the task's mean (%.3f).</figcaption></figure>\n",
			                   GX - 4, ly + 9, GX + 164, ly + 9, c->task_mean);
	}
	if (rc)
		g->rc = rc;
	return rc;
}

static int grids_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "<section id=\"grids\"><h2>Long context: length x depth</h2>\n");
	bool any = false;
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		if (!d->suites[i].grid)
			continue;
		any = true;
		grid_ctx g = {b, d->suites[i].name, 0};
		rc = ev_report_grid_each(d->suites[i].grid, grid_cell, &g);
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "<p class=\"note\">No long-context suites (samples with length and depth).</p>\n");
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- pass@k and pass^k over epochs -------------------------------------------------- */

static int passk_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "<section id=\"passk\"><h2>pass@k and pass^k</h2>\n");
	bool any = false;
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		int n = cJSON_GetArraySize(s->pass_at_k);
		if (n <= 0)
			continue;
		any = true;
		double kmax = 1;
		const cJSON *e;
		cJSON_ArrayForEach(e, s->pass_at_k) kmax = atof(e->string) > kmax && atof(e->string) < 1e9 ? atof(e->string) : kmax;
		const int X = 50, Y = 16, PW = 420, PH = 200;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_printf(b,
			                   "</h3><figure><svg class=\"chart passk\" xmlns=\"http://www.w3.org/2000/svg\" "
			                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"pass@k "
			                   "(solid, circles) and pass^k (dashed, squares) against k on a log scale; the table "
			                   "lists the values\">",
			                   X + PW + 140, Y + PH + 40, X + PW + 140, Y + PH + 40);
		for (int t = 0; !rc && t <= 4; t++)
			rc = ev_buf_printf(b,
			                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" "
			                   "y=\"%.1f\" text-anchor=\"end\">%.2f</text>",
			                   X, Y + PH - PH * t / 4.0, X + PW, Y + PH - PH * t / 4.0, X - 6,
			                   Y + PH - PH * t / 4.0 + 4, t / 4.0);
		for (int series = 0; !rc && series < 2; series++) {
			const cJSON *set = series ? s->pass_hat_k : s->pass_at_k;
			if (!set)
				continue;
			const char *col = series ? OKABE_ORANGE : OKABE_BLUE;
			rc = ev_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", col,
			                   series ? " stroke-dasharray=\"6 4\"" : "");
			cJSON_ArrayForEach(e, set)
			{
				double k = atof(e->string);
				if (!(k >= 1) || !cJSON_IsNumber(e)) /* not a k evald writes */
					continue;
				double x = X + (kmax > 1 ? PW * log(k) / log(kmax) : PW / 2.0), y = Y + PH - PH * e->valuedouble;
				if (!rc)
					rc = ev_buf_printf(b, "%.1f,%.1f ", x, y);
			}
			if (!rc)
				rc = ev_buf_puts(b, "\"/>");
			cJSON_ArrayForEach(e, set)
			{
				if (rc)
					break;
				double k = atof(e->string);
				if (!(k >= 1) || !cJSON_IsNumber(e))
					continue;
				double x = X + (kmax > 1 ? PW * log(k) / log(kmax) : PW / 2.0), y = Y + PH - PH * e->valuedouble;
				rc = ev_buf_puts(b, series ? "<rect class=\"point hat\" data-k=\"" : "<circle class=\"point at\" data-k=\"");
				if (!rc)
					rc = esc(b, e->string, 12);
				if (!rc)
					rc = ev_buf_putc(b, '"');
				if (!rc)
					rc = num_attr(b, "p", e->valuedouble);
				if (!rc)
					rc = series ? ev_buf_printf(b, " x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"><title>pass^",
					                            x - 4, y - 4, col)
					            : ev_buf_printf(b, " cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"><title>pass@", x, y, col);
				if (!rc)
					rc = esc(b, e->string, 12);
				if (!rc)
					rc = ev_buf_printf(b, " = %.3f</title></%s>", e->valuedouble, series ? "rect" : "circle");
				if (!rc && series == 0)
					rc = ev_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">k=", x, Y + PH + 18);
				if (!rc && series == 0)
					rc = esc(b, e->string, 12);
				if (!rc && series == 0)
					rc = ev_buf_puts(b, "</text>");
			}
		}
		if (!rc)
			rc = ev_buf_printf(b,
			                   "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
			                   "<text x=\"%d\" y=\"%d\">pass@k</text><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
			                   "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/><text x=\"%d\" y=\"%d\">"
			                   "pass^k</text></svg></figure>",
			                   X + PW + 16, Y + 10, X + PW + 44, Y + 10, OKABE_BLUE, X + PW + 50, Y + 14, X + PW + 16,
			                   Y + 30, X + PW + 44, Y + 30, OKABE_ORANGE, X + PW + 50, Y + 34);
		if (!rc)
			rc = ev_buf_puts(b, "<table class=\"passk\"><thead><tr><th class=\"num\">k</th><th class=\"num\">pass@k"
			                    "</th><th class=\"num\">pass^k</th></tr></thead><tbody>");
		cJSON_ArrayForEach(e, s->pass_at_k)
		{
			if (rc)
				break;
			const cJSON *h = s->pass_hat_k ? cJSON_GetObjectItemCaseSensitive(s->pass_hat_k, e->string) : NULL;
			rc = ev_buf_puts(b, "<tr><td class=\"num\">");
			if (!rc)
				rc = esc(b, e->string, 12);
			if (!rc)
				rc = ev_buf_printf(b, "</td><td class=\"num\">%.3f</td>", e->valuedouble);
			if (!rc)
				rc = cJSON_IsNumber(h) ? ev_buf_printf(b, "<td class=\"num\">%.3f</td></tr>", h->valuedouble)
				                       : ev_buf_puts(b, "<td class=\"num\">-</td></tr>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "<p class=\"note\">One epoch: no pass@k (run with --epochs to see it).</p>\n");
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- most failed samples ----------------------------------------------------------------- */

static int most_failed_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "<section id=\"most-failed\"><h2>Most failed samples</h2>\n");
	size_t listed = 0;
	for (size_t i = 0; i < d->n_suites; i++)
		listed += d->suites[i].n_failed;
	if (!rc && !listed)
		rc = ev_buf_puts(b, "<p class=\"note\">Every sample passed.</p>\n");
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		if (!s->n_failed)
			continue;
		rc = ev_buf_puts(b, "<h3>");
		if (!rc)
			rc = esc(b, s->name, 200);
		if (!rc)
			rc = ev_buf_puts(b, "</h3><table class=\"most-failed\"><thead><tr><th>sample</th><th class=\"num\">score"
			                    "</th><th>reason</th><th>answer</th></tr></thead><tbody>");
		for (size_t k = 0; !rc && k < s->n_failed; k++) {
			const ev_report_failed *f = &s->failed[k];
			rc = ev_buf_puts(b, "<tr class=\"fail\"><td>");
			if (!rc)
				rc = esc(b, f->id, 120);
			if (!rc)
				rc = ev_buf_printf(b, "</td><td class=\"num score\">%.3f</td><td>", f->score);
			if (!rc)
				rc = esc(b, f->reason, 80);
			if (!rc)
				rc = ev_buf_puts(b, "</td><td class=\"text\">");
			if (!rc)
				rc = esc(b, f->answer, EV_REPORT_ANSWER_CHARS);
			if (!rc)
				rc = ev_buf_puts(b, "</td></tr>");
		}
		if (!rc)
			rc = ev_buf_puts(b, "</tbody></table>\n");
	}
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

/* ---- per-sample tables (a second pass over the results) ------------------------------------- */

typedef struct {
	ev_buf *b;
	char *suite, *sample;
	int epochs, errors, scored;
	double sum, worst;
	char *reason, *answer, *extracted, *input, *image, *target;
	long rows;      /* in the current suite */
	ev_buf fold;    /* the rows of the fold being written */
	long fold_first;
	size_t thumbs;  /* bytes of thumbnails so far */
	int rc;
} rows_ctx;

/* The prompt's text (the last user message, its text parts joined) and
 * its first inline image's data: URL, from a request body. */
static void request_input(const char *req, char **text, char **image)
{
	*text = NULL, *image = NULL;
	cJSON *j = req ? cJSON_Parse(req) : NULL;
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages"), *m, *last = NULL;
	cJSON_ArrayForEach(m, msgs) if (!strcmp(ev_json_str(m, "role", ""), "user")) last = m;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
	if (cJSON_IsString(content)) {
		*text = ev_strdup(content->valuestring);
	} else if (cJSON_IsArray(content)) {
		ev_buf t = EV_BUF_INIT(1 << 20);
		const cJSON *p;
		cJSON_ArrayForEach(p, content)
		{
			const char *ty = ev_json_str(p, "type", "");
			if (!strcmp(ty, "text"))
				ev_buf_printf(&t, "%s%s", t.len ? " " : "", ev_json_str(p, "text", ""));
			else if (!strcmp(ty, "image_url") && !*image) {
				const cJSON *iu = cJSON_GetObjectItemCaseSensitive(p, "image_url");
				const char *url = cJSON_IsString(iu) ? iu->valuestring : ev_json_str(iu, "url", "");
				if (!strncmp(url, "data:image/", 11))
					*image = ev_strdup(url);
				ev_buf_printf(&t, "%s[image]", t.len ? " " : "");
			}
		}
		*text = t.data ? ev_buf_detach(&t, NULL) : ev_strdup("");
	}
	cJSON_Delete(j);
}

/* A data: image URL safe to put in src: the base64 alphabet only, bounded. */
static bool thumb_ok(const char *url)
{
	const char *comma = strchr(url, ',');
	if (!comma || strlen(url) > THUMB_MAX_BYTES)
		return false;
	static const char *const types[] = {"data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,",
	                                    "data:image/webp;base64,"};
	bool known = false;
	for (size_t i = 0; i < 4; i++)
		known = known || !strncmp(url, types[i], strlen(types[i]));
	if (!known)
		return false;
	for (const char *p = comma + 1; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '+' ||
		      *p == '/' || *p == '='))
			return false;
	return true;
}

static void row_reset(rows_ctx *c)
{
	free(c->sample), free(c->reason), free(c->answer), free(c->extracted), free(c->input), free(c->image);
	free(c->target);
	c->sample = c->reason = c->answer = c->extracted = c->input = c->image = c->target = NULL;
	c->epochs = c->errors = c->scored = 0;
	c->sum = 0;
	c->worst = 2;
}

/* The fold's rows into the page, inside a <details> that says which they are. */
static int fold_flush(rows_ctx *c)
{
	if (c->rows == c->fold_first)
		return 0;
	int rc = ev_buf_printf(c->b,
	                       "<details class=\"fold\"><summary>samples %ld to %ld</summary><table class=\"samples\">"
	                       "<thead><tr><th>sample</th><th class=\"num\">score</th><th class=\"num\">epochs</th>"
	                       "<th>reason</th><th>input</th><th>answer</th><th>extracted</th><th>target</th></tr></thead>"
	                       "<tbody>",
	                       c->fold_first + 1, c->rows);
	if (!rc)
		rc = ev_buf_append(c->b, c->fold.data, c->fold.len);
	if (!rc)
		rc = ev_buf_puts(c->b, "</tbody></table></details>\n");
	ev_buf_reset(&c->fold);
	c->fold_first = c->rows;
	return rc;
}

static int row_finish(rows_ctx *c)
{
	if (!c->sample)
		return 0;
	ev_buf *b = &c->fold;
	int rc = 0;
	double mean = c->scored ? c->sum / c->scored : 0;
	bool fail = !c->scored || mean < 1;
	if (!rc)
		rc = ev_buf_printf(b, "<tr%s data-sample=\"", fail ? " class=\"fail\"" : "");
	if (!rc)
		rc = esc(b, c->sample, 200);
	if (!rc)
		rc = ev_buf_putc(b, '"');
	if (!rc && fail) /* a passed sample's score is 1, written in its cell */
		rc = num_attr(b, "score", mean);
	if (!rc)
		rc = ev_buf_puts(b, "><td>");
	if (!rc)
		rc = esc(b, c->sample, 60);
	if (!rc)
		rc = c->scored ? ev_buf_printf(b, "</td><td>%.3f</td>", mean) : ev_buf_puts(b, "</td><td>error</td>");
	if (!rc)
		rc = ev_buf_printf(b, "<td>%d%s</td><td>", c->epochs, c->errors ? "*" : "");
	if (!rc)
		rc = esc(b, c->reason ? c->reason : "", 40);
	if (!rc)
		rc = ev_buf_puts(b, "</td><td>");
	if (!rc && fail && c->image && c->thumbs + strlen(c->image) <= THUMBS_MAX_BYTES && thumb_ok(c->image)) {
		c->thumbs += strlen(c->image);
		rc = ev_buf_printf(b, "<img class=\"thumb\" alt=\"the sample's image\" src=\"%s\"/> ", c->image);
	}
	if (!rc && fail)
		rc = esc(b, c->input ? c->input : "", INPUT_CHARS);
	if (!rc)
		rc = ev_buf_puts(b, "</td><td>");
	if (!rc)
		rc = esc(b, c->answer ? c->answer : "", fail ? ANSWER_CHARS : PASSED_CHARS);
	if (!rc)
		rc = ev_buf_puts(b, "</td><td>");
	/* the extracted answer where it says more than the answer's start */
	const char *ex = c->extracted ? c->extracted : "";
	if (!rc && fail && *ex && strncmp(ex, c->answer ? c->answer : "", strlen(ex)))
		rc = esc(b, ex, EXTRACTED_CHARS);
	if (!rc)
		rc = ev_buf_puts(b, "</td><td>");
	if (!rc && fail && c->target)
		rc = esc(b, c->target, TARGET_CHARS);
	if (!rc)
		rc = ev_buf_puts(b, "</td></tr>");
	c->rows++;
	row_reset(c);
	if (!rc && c->rows - c->fold_first == ROWS_PER_FOLD)
		rc = fold_flush(c);
	return rc;
}

static int suite_close(rows_ctx *c)
{
	int rc = row_finish(c);
	if (!rc)
		rc = fold_flush(c);
	if (!rc && c->suite && c->rows)
		rc = ev_buf_printf(c->b, "<p class=\"note\">%ld samples.</p>\n", c->rows);
	return rc;
}

static int row_cb(void *ctx, const ev_result *r)
{
	rows_ctx *c = ctx;
	int rc = 0;
	if (!c->suite || strcmp(c->suite, r->suite)) {
		if ((rc = suite_close(c)))
			return rc;
		free(c->suite);
		c->suite = ev_strdup(r->suite);
		c->rows = c->fold_first = 0;
		rc = ev_buf_puts(c->b, "<h3>");
		if (!rc)
			rc = esc(c->b, r->suite, 200);
		if (!rc)
			rc = ev_buf_puts(c->b, "</h3>\n");
	} else if (c->sample && strcmp(c->sample, r->sample_id)) {
		rc = row_finish(c);
	}
	if (rc)
		return rc;
	if (!c->sample) {
		c->sample = ev_strdup(r->sample_id);
		request_input(r->request_json, &c->input, &c->image);
		if (r->target_json) { /* a string target as its text, anything else as written */
			cJSON *tj = cJSON_Parse(r->target_json);
			c->target = ev_strdup(cJSON_IsString(tj) ? tj->valuestring : r->target_json);
			cJSON_Delete(tj);
		}
	}
	c->epochs++;
	bool err = ev_result_is_error(r);
	if (err)
		c->errors++;
	else
		c->scored++, c->sum += r->score;
	/* the worst scored epoch speaks for the sample (an error when none was scored) */
	if ((!err && r->score < c->worst) || (err && !c->reason)) {
		if (!err)
			c->worst = r->score;
		free(c->reason), free(c->answer), free(c->extracted);
		c->reason = ev_strdup(r->reason ? r->reason : "");
		c->answer = ev_strdup(r->response && *r->response ? r->response : r->detail ? r->detail : "");
		c->extracted = ev_strdup(r->extracted ? r->extracted : "");
	}
	return c->sample ? 0 : ev_error_set(EV_E_NOMEM, "report: out of memory");
}

static int samples_section(ev_buf *b, const ev_report_data *d, ev_tracker *t)
{
	int rc = ev_buf_puts(b, "<section id=\"samples\"><h2>Samples</h2>\n<p class=\"note\">One row a sample: its "
	                        "mean score over scored epochs (* an epoch was an error), and its worst epoch's reason, "
	                        "answer and extracted answer; folds of 200 rows.</p>\n");
	rows_ctx c = {.b = b, .worst = 2, .fold = EV_BUF_INIT(EV_REPORT_MAX_BYTES)};
	if (!rc)
		rc = ev_tracker_results_each(t, d->run.id, row_cb, &c);
	if (!rc)
		rc = suite_close(&c);
	row_reset(&c);
	free(c.suite);
	ev_buf_free(&c.fold);
	return rc ? rc : ev_buf_puts(b, "</section>\n");
}

int ev_report_html(ev_buf *b, const ev_report_data *d, ev_tracker *t)
{
	int rc = head(b, d);
	if (!rc)
		rc = suites_section(b, d);
	if (!rc)
		rc = effort_section(b, d);
	if (!rc)
		rc = failures_section(b, d);
	if (!rc)
		rc = grids_section(b, d);
	if (!rc)
		rc = passk_section(b, d);
	if (!rc)
		rc = most_failed_section(b, d);
	if (!rc)
		rc = samples_section(b, d, t);
	if (!rc)
		rc = ev_buf_puts(b, "<p class=\"note\"><a href=\"#top\">Top</a>. Written by evald from its tracker.</p>\n"
		                    "</body></html>\n");
	return rc;
}
