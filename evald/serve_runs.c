/*
 * evald/serve_runs.c: the team tracker's API of `evald serve`: runs and
 * their results written by `evald run --tracker URL` from many machines
 * and read by `evald runs|report|compare --tracker URL`. Every route needs
 * the bearer token.
 *
 *   POST /api/runs            {"model","model_source","suites_json","config_json","epochs","n_planned",
 *                              "key"}: creates a run (201 {"run_id"}); a key already seen gives
 *                              back its run (200), so a retried create makes no second run
 *   GET  /api/runs            {"runs": [run rows, newest first]}
 *   GET  /api/runs/N          {"run": row, "results": [every result]}
 *   POST /api/runs/N/results  {"results": [up to 2,000 results]}: stored by run, suite, sample and
 *                              epoch (a result sent twice replaces itself: retries never duplicate);
 *                              {"stored": n}; a malformed one fails the batch naming it, nothing stored
 *   POST /api/runs/N/status   {"status", "summary_json"?}
 */
#include <stdlib.h>
#include <string.h>

#include "evald/cli.h"
#include "evald/serve.h"

#define MAX_BATCH 2000

static int parse_body(cJSON **out, const ev_serve_request *req)
{
	return ev_json_parse(out, req->body, req->body_len, "request body");
}

static int post_run(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	cJSON *j = NULL;
	int rc = parse_body(&j, req);
	if (rc)
		return rc;
	ev_run_info info = {0};
	info.model = ev_json_str(j, "model", NULL);
	info.model_source = ev_json_str(j, "model_source", NULL);
	info.suites_json = ev_json_str(j, "suites_json", NULL);
	info.config_json = ev_json_str(j, "config_json", NULL);
	info.epochs = (int)ev_json_num(j, "epochs", 1);
	info.n_planned = (long)ev_json_num(j, "n_planned", 0);
	info.client_key = ev_json_str(j, "key", NULL);
	if (!info.client_key)
		rc = ev_error_set(EV_E_INVALID, "key: required (a key of the client's choosing, so a retry finds its run)");
	int64_t id = 0;
	if (!rc) {
		ev_tracker *t = ev_serve_api_lock(api);
		int64_t before = 0;
		ev_run_row *rows = NULL;
		size_t n = 0;
		if (ev_tracker_runs_list(t, &rows, &n, 1) == 0 && n)
			before = rows[0].id;
		ev_run_rows_free(rows, n);
		ev_error_clear();
		rc = ev_tracker_run_create(t, &info, &id);
		ev_serve_api_unlock(api);
		resp->status = id > before ? 201 : 200;
	}
	cJSON_Delete(j);
	if (!rc && !(resp->body = ev_asprintf("{\"run_id\":%lld}", (long long)id)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	return rc;
}

static int get_runs(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	(void)req;
	ev_serve_api *api = ctx;
	ev_run_row *rows = NULL;
	size_t n = 0;
	ev_tracker *t = ev_serve_api_lock(api);
	int rc = ev_tracker_runs_list(t, &rows, &n, 100000);
	ev_serve_api_unlock(api);
	cJSON *o = rc ? NULL : cJSON_CreateObject(), *a = o ? cJSON_AddArrayToObject(o, "runs") : NULL;
	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, ev_run_row_json(&rows[i]));
	ev_run_rows_free(rows, n);
	if (!rc && !(resp->body = o ? ev_json_print(o) : NULL))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(o);
	return rc;
}

static int add_result(void *ctx, const ev_result *r)
{
	cJSON *o = ev_result_json(r);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_AddItemToArray(ctx, o);
	return 0;
}

/* N and the rest of the path after /api/runs/N ("" or "/results", ...). */
static int run_of(const char *path, int64_t *id, const char **rest)
{
	const char *p = path + strlen("/api/runs/");
	char num[24];
	size_t k = strspn(p, "0123456789");
	if (!k || k >= sizeof num)
		return ev_error_set(EV_E_NOTFOUND, "no such run: \"%.40s\"", p);
	memcpy(num, p, k);
	num[k] = 0;
	if (!ev_parse_i64(num, id) || *id <= 0)
		return ev_error_set(EV_E_NOTFOUND, "no such run: \"%.40s\"", p);
	*rest = p + k;
	return 0;
}

static int get_run(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	int64_t id;
	const char *rest;
	int rc = run_of(req->path, &id, &rest);
	if (rc)
		return rc;
	if (*rest)
		return ev_error_set(EV_E_NOTFOUND, "no such path: %.80s", req->path);
	ev_run_row row = {0};
	cJSON *o = cJSON_CreateObject(), *results = o ? cJSON_AddArrayToObject(o, "results") : NULL;
	ev_tracker *t = ev_serve_api_lock(api);
	rc = ev_tracker_run_get(t, id, &row);
	if (!rc)
		rc = results ? ev_tracker_results_each(t, id, add_result, results) : ev_error_set(EV_E_NOMEM, "out of memory");
	ev_serve_api_unlock(api);
	if (!rc)
		cJSON_AddItemToObject(o, "run", ev_run_row_json(&row));
	ev_run_row_clear(&row);
	if (!rc && !(resp->body = ev_json_print(o)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_Delete(o);
	return rc;
}

static int post_run_part(void *ctx, const ev_serve_request *req, ev_serve_response *resp)
{
	ev_serve_api *api = ctx;
	int64_t id;
	const char *rest;
	int rc = run_of(req->path, &id, &rest);
	if (rc)
		return rc;
	bool results = !strcmp(rest, "/results"), status = !strcmp(rest, "/status");
	if (!results && !status)
		return ev_error_set(EV_E_NOTFOUND, "no such path: %.80s", req->path);
	cJSON *j = NULL;
	if ((rc = parse_body(&j, req)))
		return rc;
	long stored = 0;
	if (results) {
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "results"), *x;
		int n = cJSON_GetArraySize(arr);
		ev_result *v = NULL;
		if (!cJSON_IsArray(arr) || n > MAX_BATCH)
			rc = ev_error_set(EV_E_INVALID, "results: expected a list of at most %d results", MAX_BATCH);
		else if (!(v = calloc((size_t)(n ? n : 1), sizeof *v)))
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
		int i = 0;
		cJSON_ArrayForEach(x, arr) /* all read before any is stored */
		{
			char what[40];
			snprintf(what, sizeof what, "results[%d]", i);
			if (rc || (rc = ev_result_from_json(&v[i++], x, what)))
				break;
		}
		if (!rc) {
			ev_tracker *t = ev_serve_api_lock(api);
			ev_run_row row = {0};
			rc = ev_tracker_run_get(t, id, &row);
			ev_run_row_clear(&row);
			for (int k = 0; !rc && k < n; k++, stored++)
				rc = ev_tracker_result_put(t, id, &v[k]);
			int frc = ev_tracker_flush(t);
			ev_serve_api_unlock(api);
			rc = rc ? rc : frc;
		}
		free(v);
	} else {
		const char *st = ev_json_str(j, "status", NULL), *sum = ev_json_str(j, "summary_json", NULL);
		static const char *const ok[] = {"running", "finished", "finished_with_errors", "failed", "interrupted"};
		bool known = false;
		for (size_t k = 0; st && k < sizeof ok / sizeof *ok; k++)
			known = known || !strcmp(st, ok[k]);
		if (!known)
			rc = ev_error_set(EV_E_INVALID, "status: expected running, finished, finished_with_errors, failed or "
			                                "interrupted");
		if (!rc) {
			ev_tracker *t = ev_serve_api_lock(api);
			if (sum)
				rc = ev_tracker_run_set_summary(t, id, sum);
			if (!rc)
				rc = ev_tracker_run_set_status(t, id, st);
			ev_serve_api_unlock(api);
		}
	}
	cJSON_Delete(j);
	if (!rc && !(resp->body = ev_asprintf("{\"run_id\":%lld,\"stored\":%ld}", (long long)id, stored)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	return rc;
}

int ev_serve_runs_register(ev_serve *s, ev_serve_api *api)
{
	const ev_serve_route routes[] = {
		{"POST", "/api/runs", true, post_run, api, EV_SERVE_JSON_BODY_MAX, false},
		{"GET", "/api/runs", true, get_runs, api, 0, false},
		{"GET", "/api/runs/*", true, get_run, api, 0, false},
		{"POST", "/api/runs/*", true, post_run_part, api, 0, false},
	};
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		int rc = ev_serve_add_route(s, &routes[i]);
		if (rc)
			return rc;
	}
	return 0;
}
