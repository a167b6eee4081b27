/*
 * reports/report_md.c: a run's report as Markdown.
 *
 * A title with the run, model, status and times; a table of suites (score,
 * 95% CI, n, errors); the failure reasons of each suite; and a table of its
 * most failed samples. Text from the run (names, reasons, answers) goes into
 * table cells escaped: "|" as "\|", newlines as <br>, and "<" and "&" as
 * entities, so no stored text can break the table or inject markup.
 */
#include "reports/reports_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Appends s as the text of one table cell (valid UTF-8, escaped). */
static int cell(ev_buf *b, const char *s)
{
	char *clean = ev_report_text(s, SIZE_MAX);
	int rc = 0;
	if (!clean)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	for (const char *p = clean; !rc && *p; p++) {
		switch (*p) {
		case '|': rc = ev_buf_puts(b, "\\|"); break;
		case '\n': rc = ev_buf_puts(b, "<br>"); break;
		case '\r': break;
		case '<': rc = ev_buf_puts(b, "&lt;"); break;
		case '&': rc = ev_buf_puts(b, "&amp;"); break;
		default: rc = ev_buf_putc(b, *p);
		}
	}
	free(clean);
	return rc;
}

static int time_line(ev_buf *b, const char *label, double wall)
{
	char iso[32];
	if (wall <= 0)
		return ev_buf_printf(b, "- %s: -\n", label);
	ev_iso8601(iso, wall);
	return ev_buf_printf(b, "- %s: %s\n", label, iso);
}

static int suites_table(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "## Suites\n\n| suite | score | 95% CI | n | errors |\n| --- | ---: | :---: | ---: | ---: |\n");
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		if ((rc = ev_buf_puts(b, "| ")) || (rc = cell(b, s->name)))
			break;
		if (s->has_score)
			rc = ev_buf_printf(b, " | %.3f", s->score);
		else
			rc = ev_buf_puts(b, " | -");
		if (!rc && s->has_ci)
			rc = ev_buf_printf(b, " | [%.3f, %.3f]", s->ci_low, s->ci_high);
		else if (!rc)
			rc = ev_buf_puts(b, " | -");
		if (!rc)
			rc = ev_buf_printf(b, " | %ld | %ld |\n", s->n, s->errors);
	}
	return rc ? rc : ev_buf_putc(b, '\n');
}

static int failures_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "## Failure reasons\n\n");
	bool any = false;
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		const cJSON *e;
		if (!cJSON_GetArraySize(s->failures))
			continue;
		any = true;
		if ((rc = ev_buf_puts(b, "### ")) || (rc = cell(b, s->name)) ||
		    (rc = ev_buf_puts(b, "\n\n| reason | count |\n| --- | ---: |\n")))
			break;
		cJSON_ArrayForEach(e, s->failures) {
			if ((rc = ev_buf_puts(b, "| ")) || (rc = cell(b, e->string)) ||
			    (rc = ev_buf_printf(b, " | %.0f |\n", e->valuedouble)))
				break;
		}
		if (!rc)
			rc = ev_buf_putc(b, '\n');
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "No failures.\n\n");
	return rc;
}

static int failed_section(ev_buf *b, const ev_report_data *d)
{
	int rc = ev_buf_puts(b, "## Most failed samples\n\n");
	bool any = false;
	for (size_t i = 0; !rc && i < d->n_suites; i++) {
		const ev_report_suite *s = &d->suites[i];
		if (!s->n_failed)
			continue;
		any = true;
		if ((rc = ev_buf_puts(b, "### ")) || (rc = cell(b, s->name)) ||
		    (rc = ev_buf_puts(b, "\n\n| sample | score | reason | answer |\n| --- | ---: | --- | --- |\n")))
			break;
		for (size_t k = 0; !rc && k < s->n_failed; k++) {
			const ev_report_failed *f = &s->failed[k];
			if ((rc = ev_buf_puts(b, "| ")) || (rc = cell(b, f->id)) ||
			    (rc = ev_buf_printf(b, " | %.3f | ", f->score)) || (rc = cell(b, f->reason)) ||
			    (rc = ev_buf_puts(b, " | ")) || (rc = cell(b, f->answer)))
				break;
			rc = ev_buf_puts(b, " |\n");
		}
		if (!rc)
			rc = ev_buf_putc(b, '\n');
	}
	if (!rc && !any)
		rc = ev_buf_puts(b, "None.\n\n");
	return rc;
}

/* Long-context suites: score by length x depth, one table per task. */
static int grid_section(ev_buf *b, const ev_report_data *d)
{
	bool any = false;
	for (size_t i = 0; i < d->n_suites; i++)
		any = any || d->suites[i].grid;
	if (!any)
		return 0;
	int rc = ev_buf_puts(b, "## Length x depth\n\n");
	for (size_t i = 0; !rc && i < d->n_suites; i++)
		rc = ev_report_grid_md(b, d->suites[i].name, d->suites[i].grid);
	return rc;
}

/* evald run --effort: per suite, accuracy against tokens level by level */
static int effort_section(ev_buf *b, const ev_report_data *d)
{
	if (!d->effort)
		return 0;
	int rc = ev_buf_puts(b, "## Thinking effort\n\n");
	const cJSON *su, *p;
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(d->effort, "suites"))
	{
		if (rc)
			break;
		rc = ev_buf_puts(b, "### ");
		if (!rc)
			rc = cell(b, ev_json_str(su, "name", ""));
		if (!rc)
			rc = ev_buf_puts(b, "\n\n| level | score | 95% CI | vs level before (paired) | completion tokens | thinking | "
			                    "answer | latency s |\n| --- | ---: | :---: | :---: | ---: | ---: | ---: | ---: |\n");
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(su, "levels"))
		{
			if (!rc)
				rc = ev_buf_puts(b, "| ");
			if (!rc)
				rc = cell(b, ev_json_str(p, "level", ""));
			const cJSON *vs = cJSON_GetObjectItem(p, "vs_previous");
			if (!rc)
				rc = ev_buf_printf(b, " | %.3f | [%.3f, %.3f] | ", ev_json_num(p, "score", 0), ev_json_num(p, "ci_low", 0),
				                   ev_json_num(p, "ci_high", 0));
			if (!rc && vs)
				rc = ev_buf_printf(b, "%+.3f [%+.3f, %+.3f], p %.3g", ev_json_num(vs, "diff", 0),
				                   ev_json_num(vs, "ci_low", 0), ev_json_num(vs, "ci_high", 0), ev_json_num(vs, "p", 1));
			if (!rc)
				rc = ev_buf_printf(b, " | %.1f | %.1f | %.1f | %.3f |\n", ev_json_num(p, "completion_tokens", 0),
				                   ev_json_num(p, "thinking_tokens", 0), ev_json_num(p, "answer_tokens", 0),
				                   ev_json_num(p, "latency_s", 0));
		}
		if (!rc && !cJSON_IsTrue(cJSON_GetObjectItem(su, "tokens_rise")))
			rc = ev_buf_puts(b, "\nToken use does not rise with the level: the backend may ignore the setting.\n");
		if (!rc)
			rc = ev_buf_putc(b, '\n');
	}
	return rc;
}

static int report_md(ev_buf *b, const ev_report_data *d)
{
	const ev_run_row *r = &d->run;
	int rc;
	if ((rc = ev_buf_printf(b, "# Run %lld: ", (long long)r->id)) || (rc = cell(b, r->model)) ||
	    (rc = ev_buf_puts(b, "\n\n- Model: ")) || (rc = cell(b, r->model)) ||
	    (rc = ev_buf_puts(b, "\n- Status: ")) || (rc = cell(b, r->status)) || (rc = ev_buf_putc(b, '\n')) ||
	    (rc = time_line(b, "Created", r->created)) || (rc = time_line(b, "Finished", r->finished)) ||
	    (rc = ev_buf_printf(b, "- Results: %ld of %ld planned (%d epoch%s)\n", r->n_results, r->n_planned,
	                        r->epochs, r->epochs == 1 ? "" : "s")))
		return rc;
	if (!d->complete &&
	    (rc = ev_buf_puts(b, "- Complete: no (figures computed from the stored results, without CI)\n")))
		return rc;
	if ((rc = ev_buf_putc(b, '\n')) || (rc = suites_table(b, d)) || (rc = effort_section(b, d)) || (rc = grid_section(b, d)) ||
	    (rc = failures_section(b, d)) || (rc = failed_section(b, d)))
		return rc;
	return 0;
}

int ev_report_md(ev_buf *b, const ev_report_data *d)
{
	/* Printed to a terminal as often as to a file: model, suite, task and
	 * sample names and answers lose their terminal controls, once, here. */
	size_t start = b->len;
	int rc = report_md(b, d);
	if (!rc && b->data) {
		ev_term_clean(b->data + start);
		b->len = start + strlen(b->data + start);
	}
	return rc;
}
