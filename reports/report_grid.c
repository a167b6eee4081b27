/*
 * The length x depth grid of long-context suites: results whose sample
 * metadata has numeric "length" and "depth" (and a "task", else "all")
 * are averaged per cell. Error results are left out, as everywhere.
 *
 * While gathering, the grid is a cJSON tree {task: {length: {depth:
 * [sum, n]}}}; keys are the numbers printed as integers so that the
 * Markdown table can sort them numerically.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reports/reports_int.h"

static cJSON *child(cJSON *parent, const char *key, bool array)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(parent, key);
	if (!c) {
		c = array ? cJSON_CreateArray() : cJSON_CreateObject();
		if (!c || !cJSON_AddItemToObject(parent, key, c)) {
			cJSON_Delete(c);
			return NULL;
		}
		if (array) {
			cJSON_AddItemToArray(c, cJSON_CreateNumber(0));
			cJSON_AddItemToArray(c, cJSON_CreateNumber(0));
		}
	}
	return c;
}

int ev_report_grid_add(cJSON **grid, const ev_result *r)
{
	if (!r->metadata_json)
		return 0;
	cJSON *m = cJSON_Parse(r->metadata_json);
	const cJSON *len = cJSON_GetObjectItemCaseSensitive(m, "length");
	const cJSON *dep = cJSON_GetObjectItemCaseSensitive(m, "depth");
	if (!cJSON_IsNumber(len) || !cJSON_IsNumber(dep)) {
		cJSON_Delete(m);
		return 0;
	}
	char lk[32], dk[32], task[64];
	snprintf(lk, sizeof lk, "%.0f", len->valuedouble);
	snprintf(dk, sizeof dk, "%.0f", dep->valuedouble);
	snprintf(task, sizeof task, "%s", ev_json_str(m, "task", "all"));
	cJSON_Delete(m);
	if (!*grid && !(*grid = cJSON_CreateObject()))
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	cJSON *t = child(*grid, task, false);
	cJSON *l = t ? child(t, lk, false) : NULL;
	cJSON *cell = l ? child(l, dk, true) : NULL;
	if (!cell || cJSON_GetArraySize(cell) != 2)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	cJSON *sum = cJSON_GetArrayItem(cell, 0), *n = cJSON_GetArrayItem(cell, 1);
	cJSON_SetNumberValue(sum, sum->valuedouble + r->score);
	cJSON_SetNumberValue(n, n->valuedouble + 1);
	return 0;
}

static int num_cmp(const void *a, const void *b)
{
	double x = atof(*(const char *const *)a), y = atof(*(const char *const *)b);
	return x < y ? -1 : x > y;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The sorted keys of an object (borrowed strings); *n their count. */
static const char **sorted_keys(const cJSON *o, size_t *n, bool numeric)
{
	*n = (size_t)cJSON_GetArraySize(o);
	const char **k = calloc(*n + 1, sizeof *k);
	if (!k)
		return NULL;
	size_t i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, o) k[i++] = e->string;
	qsort(k, *n, sizeof *k, numeric ? num_cmp : str_cmp);
	return k;
}

/* Every depth that appears under any length of a task. */
static cJSON *all_depths(const cJSON *task)
{
	cJSON *d = cJSON_CreateObject();
	const cJSON *l, *c;
	cJSON_ArrayForEach(l, task) cJSON_ArrayForEach(c, l) if (!cJSON_GetObjectItemCaseSensitive(d, c->string))
	    cJSON_AddNullToObject(d, c->string);
	return d;
}

void ev_report_length_label(char out[32], const char *key)
{
	double v = atof(key);
	if (v >= 1048576 && (long)v % 1048576 == 0)
		snprintf(out, 32, "%.0fM", v / 1048576);
	else if (v >= 1024 && (long)v % 1024 == 0)
		snprintf(out, 32, "%.0fK", v / 1024);
	else
		snprintf(out, 32, "%s", key);
}

int ev_report_grid_md(ev_buf *b, const char *suite, const cJSON *grid)
{
	if (!grid)
		return 0;
	int rc = 0;
	size_t nt;
	const char **tasks = sorted_keys(grid, &nt, false);
	if (!tasks)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	for (size_t ti = 0; !rc && ti < nt; ti++) {
		const cJSON *task = cJSON_GetObjectItemCaseSensitive(grid, tasks[ti]);
		cJSON *depths = all_depths(task);
		size_t nl, nd;
		const char **lens = sorted_keys(task, &nl, true);
		const char **deps = depths ? sorted_keys(depths, &nd, true) : NULL;
		if (!lens || !deps) {
			rc = ev_error_set(EV_E_NOMEM, "report: out of memory");
		} else {
			rc = ev_buf_printf(b, "### %s: %s (score by context length x needle depth %%)\n\n| length |", suite,
			                   tasks[ti]);
			for (size_t j = 0; !rc && j < nd; j++)
				rc = ev_buf_printf(b, " %s%% |", deps[j]);
			if (!rc)
				rc = ev_buf_puts(b, "\n| ---: |");
			for (size_t j = 0; !rc && j < nd; j++)
				rc = ev_buf_puts(b, " ---: |");
			for (size_t i = 0; !rc && i < nl; i++) {
				char lab[32];
				ev_report_length_label(lab, lens[i]);
				rc = ev_buf_printf(b, "\n| %s |", lab);
				const cJSON *l = cJSON_GetObjectItemCaseSensitive(task, lens[i]);
				for (size_t j = 0; !rc && j < nd; j++) {
					const cJSON *c = cJSON_GetObjectItemCaseSensitive(l, deps[j]);
					double n = c ? cJSON_GetArrayItem(c, 1)->valuedouble : 0;
					if (n > 0)
						rc = ev_buf_printf(b, " %.2f |", cJSON_GetArrayItem(c, 0)->valuedouble / n);
					else
						rc = ev_buf_puts(b, " - |");
				}
			}
			if (!rc)
				rc = ev_buf_puts(b, "\n\n");
		}
		free(lens);
		free(deps);
		cJSON_Delete(depths);
	}
	free(tasks);
	return rc;
}

/* 95% Wilson interval of a mean score p over n results */
static void wilson(double p, double n, double *lo, double *hi)
{
	const double z = 1.959963984540054, z2 = z * z;
	double den = 1 + z2 / n, mid = (p + z2 / (2 * n)) / den;
	double half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den;
	*lo = mid - half < 0 ? 0 : mid - half;
	*hi = mid + half > 1 ? 1 : mid + half;
}

int ev_report_grid_each(const cJSON *grid, ev_report_cell_fn fn, void *ctx)
{
	if (!grid)
		return 0;
	int rc = 0;
	size_t nt;
	const char **tasks = sorted_keys(grid, &nt, false);
	if (!tasks)
		return ev_error_set(EV_E_NOMEM, "report: out of memory");
	for (size_t ti = 0; !rc && ti < nt; ti++) {
		const cJSON *task = cJSON_GetObjectItemCaseSensitive(grid, tasks[ti]), *l, *c;
		double tsum = 0, tn = 0;
		cJSON_ArrayForEach(l, task) cJSON_ArrayForEach(c, l)
		{
			tsum += cJSON_GetArrayItem(c, 0)->valuedouble;
			tn += cJSON_GetArrayItem(c, 1)->valuedouble;
		}
		cJSON *depths = all_depths(task);
		size_t nl = 0, nd = 0;
		const char **lens = sorted_keys(task, &nl, true);
		const char **deps = depths ? sorted_keys(depths, &nd, true) : NULL;
		if (!lens || !deps)
			rc = ev_error_set(EV_E_NOMEM, "report: out of memory");
		for (size_t i = 0; !rc && i < nl; i++) {
			const cJSON *row = cJSON_GetObjectItemCaseSensitive(task, lens[i]);
			for (size_t j = 0; !rc && j < nd; j++) {
				const cJSON *cell = cJSON_GetObjectItemCaseSensitive(row, deps[j]);
				ev_report_cell e = {.task_mean = tn > 0 ? tsum / tn : 0};
				if (cell && (e.n = cJSON_GetArrayItem(cell, 1)->valuedouble) > 0) {
					e.score = cJSON_GetArrayItem(cell, 0)->valuedouble / e.n;
					wilson(e.score, e.n, &e.ci_low, &e.ci_high);
					e.significant = e.task_mean < e.ci_low || e.task_mean > e.ci_high;
				}
				rc = fn(ctx, tasks[ti], lens[i], deps[j], &e, i, nl, j, nd);
			}
		}
		free(lens);
		free(deps);
		cJSON_Delete(depths);
	}
	free(tasks);
	return rc;
}

static int cell_json(void *ctx, const char *task, const char *length, const char *depth, const ev_report_cell *c,
                     size_t li, size_t nl, size_t di, size_t nd)
{
	(void)li, (void)nl, (void)di, (void)nd;
	if (c->n <= 0)
		return 0;
	cJSON *o = cJSON_CreateObject();
	bool ok = o && cJSON_AddItemToArray(ctx, o) && cJSON_AddStringToObject(o, "task", task) &&
	          cJSON_AddNumberToObject(o, "length", atof(length)) && cJSON_AddNumberToObject(o, "depth", atof(depth)) &&
	          cJSON_AddNumberToObject(o, "n", c->n) && cJSON_AddNumberToObject(o, "score", c->score) &&
	          cJSON_AddNumberToObject(o, "ci_low", c->ci_low) && cJSON_AddNumberToObject(o, "ci_high", c->ci_high) &&
	          cJSON_AddBoolToObject(o, "significant", c->significant);
	return ok ? 0 : ev_error_set(EV_E_NOMEM, "report: out of memory");
}

/* [{"task","length","depth","n","score","ci_low","ci_high","significant"}]:
 * tasks by name, lengths then depths ascending */
cJSON *ev_report_grid_json(const cJSON *grid)
{
	cJSON *arr = cJSON_CreateArray();
	if (arr && ev_report_grid_each(grid, cell_json, arr)) {
		cJSON_Delete(arr);
		return NULL;
	}
	return arr;
}
