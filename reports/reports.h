/*
 * reports: a run as Markdown, JSON or self-contained HTML, read from the
 * tracker.
 *
 * The JSON shape is documented in reports/README.md. Both formats show,
 * per suite, the score with its 95% CI, counts (samples, scored, errors),
 * failure reasons, and the most failed samples. The per-suite figures come
 * from the run's stored summary (written by `evald run` and `rescore`).
 */
#ifndef EV_REPORTS_H
#define EV_REPORTS_H

#include <stdio.h>

#include "base/base.h"
#include "feedback/feedback.h"

typedef enum { EV_REPORT_MD, EV_REPORT_JSON, EV_REPORT_HTML } ev_report_format;

typedef struct {
	ev_report_format format;
	int max_failed;   /* most failed samples listed per suite (10) */
} ev_report_options;

#define EV_REPORT_OPTIONS_INIT {.format = EV_REPORT_MD, .max_failed = 10}

int ev_report_write(ev_tracker *t, int64_t run_id, const ev_report_options *opt, FILE *out);

/* A checkpoint series (series.c): each model's latest finished run, per
 * suite the score with its CI at each checkpoint, change points between
 * consecutive checkpoints (their paired comparison significant), and the
 * regressions filed between runs of the series with their history; as
 * JSON, Markdown or one HTML page, appended to out. */
int ev_report_series(ev_tracker *t, const char *const *models, size_t n, ev_report_format fmt, ev_buf *out);

/* The comparison of two runs as one self-contained HTML page
 * (compare_html.c): differences with their intervals, flipped samples with
 * both answers, long-context difference heatmaps, and the regressions
 * `actions_json` (ev_regressions_apply's output; NULL: none filed) names. */
int ev_compare_html(ev_buf *b, ev_tracker *t, const ev_compare *c, const char *actions_json);

#endif
