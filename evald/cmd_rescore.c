/*
 * evald rescore RUN [checker flags] [--json]: scores the run's stored
 * answers again with the current checker (the run's own, or the one the
 * flags give) without calling the model, and updates the summary.
 * Results that were backend errors have no answer and stay as they are.
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"

typedef struct {
	char *suite, *sample_id, *response, *finish_reason, *tool_calls_json;
	int epoch;
} stored;

typedef EV_VEC(stored) stored_list;

static int collect(void *ctx, const ev_result *r)
{
	stored_list *l = ctx;
	if (ev_result_is_error(r))
		return 0;
	stored *s = ev_vec_add(l);
	if (!s)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	s->suite = ev_strdup(r->suite);
	s->sample_id = ev_strdup(r->sample_id);
	s->response = ev_strdup(r->response ? r->response : "");
	s->finish_reason = ev_strdup(r->finish_reason ? r->finish_reason : "");
	s->tool_calls_json = ev_strdup(r->tool_calls_json); /* may be NULL */
	s->epoch = r->epoch;
	return s->suite && s->sample_id && s->response && s->finish_reason ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

static int by_id(const void *a, const void *b)
{
	return strcmp((*(const ev_sample *const *)a)->id, (*(const ev_sample *const *)b)->id);
}

/* `index` holds the suite's samples sorted by id. */
static const ev_sample *find_sample(const ev_sample **index, size_t n, const char *id)
{
	ev_sample key = {.id = (char *)id};
	const ev_sample *k = &key;
	const ev_sample **hit = bsearch(&k, index, n, sizeof *index, by_id);
	return hit ? *hit : NULL;
}

typedef struct {
	ev_checker_flags cf;
	bool json;
} rescore_opts;

static const ev_opt rescore_opts_table[] = {
	EV_O_FLAG("--json", rescore_opts, json, "print the new summary as JSON"),
	EV_CHECKER_OPTS(rescore_opts, cf),
	EV_O_END,
};

static const ev_cmd_spec rescore_spec = {
	.name = "rescore",
	.synopsis = "RUN [--checker TYPE] [--pattern REGEX]... [--json]",
	.about = "Scores a run's stored answers again, with the checker the flags give (default: the one\n"
	         "the run used), without calling the model, and stores the new summary.",
	.opts = rescore_opts_table,
	.positional = "RUN",
	.min_pos = 1,
	.max_pos = 1,
};

/* Scores again the stored answers of one suite of the run (`si`, its entry
 * in the run's suites list) with `spec` (NULL: the suite's own checker).
 * *changed counts the results rewritten. */
static int rescore_suite(ev_tracker *t, int64_t run_id, const cJSON *si, const char *spec, const stored_list *list,
                         char **tmpdir, long *changed)
{
	const char *name = ev_json_str(si, "name", ""), *path = ev_json_str(si, "path", "");
	ev_suite *suite = NULL;
	ev_checker *checker = NULL;
	const ev_sample **index = NULL;
	int rc = ev_cli_suite_load(&suite, path, tmpdir);
	if (rc)
		return ev_error_wrap(rc, "%s", path);
	if (suite->content_hash && strcmp(ev_json_str(si, "hash", ""), suite->content_hash))
		ev_log_warn("suite %s changed since the run (content hash differs); scoring against its current targets",
		            name);
	if (!spec)
		spec = suite->checker_json ? suite->checker_json : "{\"type\":\"includes\"}";
	if ((rc = ev_checker_new(&checker, spec))) {
		ev_error_wrap(rc, "%s", name);
		goto done;
	}
	if (!(index = calloc(suite->n_samples + 1, sizeof *index))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < suite->n_samples; i++)
		index[i] = &suite->samples[i];
	qsort(index, suite->n_samples, sizeof *index, by_id);
	for (size_t i = 0; i < list->n && !rc; i++) {
		const stored *s = &list->v[i];
		if (strcmp(s->suite, name))
			continue;
		const ev_sample *sample = find_sample(index, suite->n_samples, s->sample_id);
		if (!sample) {
			ev_log_warn("%s: sample %s is no longer in the suite; left as it was", name, s->sample_id);
			continue;
		}
		ev_verdict v = {0};
		if (ev_checker_score_calls(checker, sample, s->response, s->tool_calls_json,
		                           !strcmp(s->finish_reason, "length"), &v) == 0) {
			rc = ev_tracker_result_rescore(t, run_id, name, s->sample_id, s->epoch, v.score,
			                               ev_reason_name(v.reason), v.extracted, v.detail);
			if (!rc)
				(*changed)++;
		}
		ev_verdict_clear(&v);
	}
done:
	free(index);
	ev_checker_free(checker);
	ev_suite_free(suite);
	return rc;
}

int ev_cmd_rescore(const ev_cli *cli, int argc, char **argv)
{
	rescore_opts ro = {.cf = EV_CHECKER_FLAGS_INIT, .json = cli->json};
	const char *pos[1];
	int prc = ev_opt_parse(&rescore_spec, &ro, argc, argv, pos, NULL);
	if (prc)
		return ev_opt_exit(prc);
	int64_t run_id;
	if (!ev_cli_parse_run_id(pos[0], &run_id))
		return EV_EXIT_USAGE;

	int rc = EV_EXIT_FAIL;
	ev_tracker *t = NULL;
	ev_run_row row = {0};
	cJSON *config = NULL, *suites_info = NULL;
	char *spec = ev_checker_flags_spec(&ro.cf), *tmpdir = NULL, *summary = NULL;
	stored_list list = {0};
	long changed = 0;

	if (ev_cli_open_tracker(cli, &t))
		goto done;
	if (ev_tracker_run_get(t, run_id, &row) || ev_tracker_results_each(t, run_id, collect, &list)) {
		ev_cli_fail("rescore");
		goto done;
	}
	config = row.config_json ? cJSON_Parse(row.config_json) : NULL;
	suites_info = row.suites_json ? cJSON_Parse(row.suites_json) : NULL;
	/* The flags' checker, else the one the run used, else each suite's own. */
	const cJSON *run_spec = cJSON_GetObjectItemCaseSensitive(config, "checker");
	if (!spec && cJSON_IsObject(run_spec))
		spec = ev_json_print(run_spec);
	const cJSON *si;
	cJSON_ArrayForEach(si, suites_info) {
		if (rescore_suite(t, run_id, si, spec, &list, &tmpdir, &changed)) {
			ev_cli_fail("rescore");
			goto done;
		}
	}
	if (ev_tracker_flush(t) || ev_summary_compute(&summary, t, run_id) || ev_tracker_run_set_summary(t, run_id, summary)) {
		ev_cli_fail("rescore");
		goto done;
	}
	if (ro.json)
		printf("%s\n", summary);
	else {
		fprintf(stderr, "evald: run %lld: %ld answers scored again\n", (long long)run_id, changed);
		ev_summary_print(stdout, summary);
	}
	rc = 0;
done:
	for (size_t i = 0; i < list.n; i++) {
		free(list.v[i].suite);
		free(list.v[i].sample_id);
		free(list.v[i].response);
		free(list.v[i].finish_reason);
		free(list.v[i].tool_calls_json);
	}
	ev_vec_free(&list);
	ev_cli_tmpdir_remove(tmpdir);
	free(spec);
	free(summary);
	cJSON_Delete(config);
	cJSON_Delete(suites_info);
	ev_run_row_clear(&row);
	ev_tracker_close(t);
	return rc;
}
