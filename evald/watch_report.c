/*
 * evald/watch_report.c: what the watcher does with a finished run: the
 * comparison with the baseline (regressions filed in process, as `evald
 * compare --file-regressions` does) and the Markdown report with the
 * comparison appended.
 */
#include "evald/watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "evald/cli.h"
#include "reports/reports.h"

int ev_watch_compare_and_file(ev_tracker *t, const char *name, int64_t base, int64_t cand, char **out_json,
                              ev_compare **out_cmp)
{
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	ev_compare *c = NULL;
	char *actions = NULL, *js = NULL;
	cJSON *j = NULL, *a = NULL;
	int rc;
	*out_json = NULL;
	if ((rc = ev_compare_runs(&c, t, base, cand, &opt)) || (rc = ev_regressions_apply(t, c, &actions)) ||
	    (rc = ev_compare_json(&js, c)))
		goto done;
	j = cJSON_Parse(js);
	a = actions ? cJSON_Parse(actions) : NULL;
	if (!j) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	cJSON *acts = a ? cJSON_DetachItemFromObject(a, "actions") : NULL;
	cJSON_AddItemToObject(j, "regressions", acts ? acts : cJSON_CreateArray());
	for (size_t i = 0; i < c->n_suites; i++) {
		const ev_compare_suite *s = &c->suites[i];
		char reg[80] = "";
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "regressions")) if (!strcmp(
		    ev_json_str(x, "suite", ""), s->name))
		    snprintf(reg, sizeof reg, ": regression %.0f %s", ev_json_num(x, "regression_id", 0),
		             ev_json_str(x, "action", ""));
		ev_log_info("watch: %s: %s: %.3f -> %.3f (delta %+.3f, 95%% CI [%+.3f, %+.3f], p %.2g, n %zu)%s", name,
		            s->name, s->score_a, s->score_b, s->delta, s->ci_low, s->ci_high, s->p, s->n, reg);
	}
	*out_json = ev_json_print(j);
	if (!*out_json)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
done:
	cJSON_Delete(j);
	cJSON_Delete(a);
	free(js);
	free(actions);
	if (!rc && out_cmp)
		*out_cmp = c;
	else
		ev_compare_free(c);
	return rc;
}

int ev_watch_report_write(ev_tracker *t, const char *reports_dir, const char *folder, const char *baseline_model,
                          int64_t run_id, const ev_compare *c, const char *compare_json, char **out_path)
{
	ev_report_options ro = EV_REPORT_OPTIONS_INIT;
	char *path = ev_asprintf("%s/%s.md", reports_dir, folder), *tmp = ev_asprintf("%s/.%s.md.tmp", reports_dir, folder);
	int rc = 0;
	FILE *f = NULL;
	*out_path = NULL;
	if (!path || !tmp) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (mkdir(reports_dir, 0755) != 0 && errno != EEXIST) {
		rc = ev_error_set(EV_E_IO, "%s: cannot create the reports folder: %s", reports_dir, strerror(errno));
		goto done;
	}
	if (!(f = fopen(tmp, "w"))) {
		rc = ev_error_set(EV_E_IO, "%s: %s", tmp, strerror(errno));
		goto done;
	}
	if ((rc = ev_report_write(t, run_id, &ro, f)))
		goto done;
	fprintf(f, "\n## Compared with the baseline\n\n");
	if (!c) {
		fprintf(f, "Not compared: %s.\n", baseline_model ? "this checkpoint is the baseline"
		                                                 : "the baseline has no finished run on these suites yet");
	} else {
		cJSON *j = cJSON_Parse(compare_json);
		fprintf(f, "Baseline: run %lld (%s); candidate: run %lld (%s).\n\n", (long long)c->run_a, c->model_a,
		        (long long)c->run_b, c->model_b);
		fprintf(f, "| suite | n | baseline | candidate | delta | 95%% CI | p | MDE | regression |\n");
		fprintf(f, "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |\n");
		for (size_t i = 0; i < c->n_suites; i++) {
			const ev_compare_suite *s = &c->suites[i];
			const char *act = "";
			double rid = 0;
			const cJSON *x;
			cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "regressions")) if (!strcmp(
			    ev_json_str(x, "suite", ""), s->name))
			{
				act = ev_json_str(x, "action", "");
				rid = ev_json_num(x, "regression_id", 0);
			}
			char reg[64] = "";
			if (*act)
				snprintf(reg, sizeof reg, "#%.0f %s", rid, act);
			fprintf(f, "| %s | %zu | %.3f | %.3f | %+.3f | [%+.3f, %+.3f] | %.2g | %.3f | %s |\n", s->name, s->n,
			        s->score_a, s->score_b, s->delta, s->ci_low, s->ci_high, s->p, s->mde, reg);
		}
		cJSON_Delete(j);
	}
	if (fclose(f) != 0) {
		f = NULL;
		rc = ev_error_set(EV_E_IO, "%s: %s", tmp, strerror(errno));
		goto done;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		rc = ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
		goto done;
	}
	*out_path = path;
	path = NULL;
done:
	if (f)
		fclose(f);
	if (rc && tmp)
		remove(tmp);
	free(path);
	free(tmp);
	return rc;
}

