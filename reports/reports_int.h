/*
 * reports/reports_int.h: the report's data, gathered once from the tracker
 * (report_data.c) and written as Markdown (report_md.c) or JSON
 * (report_json.c).
 */
#ifndef EV_REPORTS_INT_H
#define EV_REPORTS_INT_H

#include "reports/reports.h"
#include "scoring/summary.h"

/* Characters of an answer shown in a report. */
#define EV_REPORT_ANSWER_CHARS 200
/* Upper bound on max_failed. */
#define EV_REPORT_MAX_FAILED 1000
/* Largest report produced (the most failed lists keep it small). */
#define EV_REPORT_MAX_BYTES ((size_t)256 << 20)

typedef struct {
	char *id;
	double score;  /* mean over the sample's scored epochs (0 when all were errors) */
	char *reason;  /* the reason of its worst epoch */
	char *answer;  /* extracted answer, else the response; truncated, valid UTF-8 */
} ev_report_failed;

typedef struct {
	char *name;
	bool from_summary; /* figures below come from the run's summary_json */
	long n;
	long errors;
	bool has_score, has_ci, has_stderr;
	double score, ci_low, ci_high, stderr_;
	cJSON *failures;   /* {reason: count}, owned */
	ev_report_failed *failed; /* lowest score first, ties by id */
	size_t n_failed;
	cJSON *grid;       /* length x depth cells (report_grid.c), or NULL */
	cJSON *pass_at_k, *pass_hat_k; /* {"k": p} from the summary (owned), or NULL */
} ev_report_suite;

typedef struct {
	ev_run_row run;
	bool complete;   /* the run has a summary */
	cJSON *config;   /* parsed config_json, or NULL */
	ev_report_suite *suites;
	size_t n_suites;
	size_t cap_suites;
	int max_failed;
	cJSON *effort;   /* the summary's "effort" (evald run --effort), owned, or NULL */
} ev_report_data;

int ev_report_gather(ev_report_data *d, ev_tracker *t, int64_t run_id, int max_failed);
void ev_report_data_clear(ev_report_data *d);

int ev_report_md(ev_buf *b, const ev_report_data *d);
int ev_report_json(ev_buf *b, const ev_report_data *d);

/* The length x depth grid (report_grid.c): add one result; write a
 * suite's grid as Markdown tables (one per task); as a JSON array of
 * {"task","length","depth","n","score"}. */
int ev_report_grid_add(cJSON **grid, const ev_result *r);
int ev_report_grid_md(ev_buf *b, const char *suite, const cJSON *grid);
cJSON *ev_report_grid_json(const cJSON *grid);

/* One grid cell's figures: mean, its 95% Wilson interval (scores read as
 * a proportion), and whether the interval leaves out the task's mean (the
 * cell differs from the task as a whole). */
typedef struct {
	double n, score, ci_low, ci_high, task_mean;
	bool significant;
} ev_report_cell;

/* Walks a suite's grid: tasks by name, lengths and depths ascending; fn
 * gets each (task, length key, depth key, cell) with depth NULL and cell
 * n 0 where a length lacks a depth another has. */
typedef int (*ev_report_cell_fn)(void *ctx, const char *task, const char *length, const char *depth,
                                 const ev_report_cell *c, size_t li, size_t nl, size_t di, size_t nd);
int ev_report_grid_each(const cJSON *grid, ev_report_cell_fn fn, void *ctx);
void ev_report_length_label(char out[32], const char *key);

/* HTML pieces the pages share (report_html.c): text escaped for element
 * text and quoted attributes (valid UTF-8, cut after max code points); a
 * number as a data- attribute printed as the JSON reports print it; the
 * page's start up to the open <title> (the CSP meta tag included); the
 * style sheet. */
int ev_html_esc(ev_buf *b, const char *s, size_t max);
int ev_html_num_attr(ev_buf *b, const char *name, double v);
int ev_html_begin(ev_buf *b);
extern const char EV_HTML_STYLE[];

/* A length x depth heatmap, cell by cell as ev_report_grid_each walks
 * them: at a task's first cell the heading and the <svg> (class, the text
 * alternative `aria`, `defs` put first inside), at each row's and column's
 * first the labels; *x, *y the cell's corner. Cells are EV_HTML_CW x
 * EV_HTML_CH from (EV_HTML_GX, EV_HTML_GY). ev_html_heatmap_empty draws a
 * cell without results. */
enum { EV_HTML_GX = 90, EV_HTML_GY = 46, EV_HTML_CW = 64, EV_HTML_CH = 34 };
int ev_html_heatmap_frame(ev_buf *b, const char *suite, const char *task, const char *length, const char *depth,
                          size_t li, size_t nl, size_t di, size_t nd, const char *svg_class, const char *aria,
                          const char *defs, int *x, int *y);
int ev_html_heatmap_empty(ev_buf *b, int x, int y);

/* The HTML report (report_html.c): the data, and the tracker for the
 * per-sample tables (a second pass over the results). */
int ev_report_html(ev_buf *b, const ev_report_data *d, ev_tracker *t);

/* A malloc'd copy of s as valid UTF-8 (invalid bytes become U+FFFD), cut
 * after max_chars code points with "..." appended when cut. NULL in gives "". */
char *ev_report_text(const char *s, size_t max_chars);

#endif
