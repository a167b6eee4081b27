/*
 * feedback/result_json.c: a stored result and a run as JSON objects, both
 * ways: what a team tracker's API (evald serve /api/runs) carries. Every
 * column of the results table has its key; a missing key is the column's
 * empty value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "feedback/feedback.h"

static void put_str(cJSON *o, const char *k, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, k, v);
}

cJSON *ev_result_json(const ev_result *r)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	put_str(o, "suite", r->suite);
	put_str(o, "sample_id", r->sample_id);
	cJSON_AddNumberToObject(o, "epoch", r->epoch);
	put_str(o, "request_hash", r->request_hash);
	put_str(o, "request_json", r->request_json);
	put_str(o, "response", r->response);
	put_str(o, "tool_calls_json", r->tool_calls_json);
	put_str(o, "extracted", r->extracted);
	cJSON_AddNumberToObject(o, "score", r->score);
	put_str(o, "reason", r->reason);
	put_str(o, "detail", r->detail);
	put_str(o, "finish_reason", r->finish_reason);
	cJSON_AddNumberToObject(o, "prompt_tokens", r->prompt_tokens);
	cJSON_AddNumberToObject(o, "completion_tokens", r->completion_tokens);
	cJSON_AddNumberToObject(o, "thinking_tokens", r->thinking_tokens);
	cJSON_AddNumberToObject(o, "latency_s", r->latency_s);
	cJSON_AddNumberToObject(o, "attempts", r->attempts);
	cJSON_AddBoolToObject(o, "cached", r->cached);
	put_str(o, "metadata_json", r->metadata_json);
	put_str(o, "target_json", r->target_json);
	put_str(o, "prompt_hash", r->prompt_hash);
	put_str(o, "answered_by", r->answered_by);
	put_str(o, "agents_json", r->agents_json);
	return o;
}

/* A string field: absent or null is NULL; anything else but a string is an error. */
static int get_str(const char **out, const cJSON *o, const char *k, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return ev_error_set(EV_E_INVALID, "%s.%s: expected a string", what, k);
	*out = v->valuestring;
	return 0;
}

static int get_num(double *out, const cJSON *o, const char *k, double lo, double hi, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	*out = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
		return ev_error_set(EV_E_INVALID, "%s.%s: expected a number from %g to %g", what, k, lo, hi);
	*out = v->valuedouble;
	return 0;
}

int ev_result_from_json(ev_result *r, const cJSON *o, const char *what)
{
	memset(r, 0, sizeof *r);
	if (!cJSON_IsObject(o))
		return ev_error_set(EV_E_INVALID, "%s: expected an object", what);
	double epoch, score, pt, ct, tt, lat, att;
	int rc;
	if ((rc = get_str(&r->suite, o, "suite", what)) || (rc = get_str(&r->sample_id, o, "sample_id", what)) ||
	    (rc = get_str(&r->request_hash, o, "request_hash", what)) ||
	    (rc = get_str(&r->request_json, o, "request_json", what)) || (rc = get_str(&r->response, o, "response", what)) ||
	    (rc = get_str(&r->tool_calls_json, o, "tool_calls_json", what)) ||
	    (rc = get_str(&r->extracted, o, "extracted", what)) || (rc = get_str(&r->reason, o, "reason", what)) ||
	    (rc = get_str(&r->detail, o, "detail", what)) || (rc = get_str(&r->finish_reason, o, "finish_reason", what)) ||
	    (rc = get_str(&r->metadata_json, o, "metadata_json", what)) ||
	    (rc = get_str(&r->target_json, o, "target_json", what)) ||
	    (rc = get_str(&r->prompt_hash, o, "prompt_hash", what)) ||
	    (rc = get_str(&r->answered_by, o, "answered_by", what)) ||
	    (rc = get_str(&r->agents_json, o, "agents_json", what)) ||
	    (rc = get_num(&epoch, o, "epoch", 0, 1e6, what)) || (rc = get_num(&score, o, "score", 0, 1, what)) ||
	    (rc = get_num(&pt, o, "prompt_tokens", 0, 2e9, what)) || (rc = get_num(&ct, o, "completion_tokens", 0, 2e9, what)) ||
	    (rc = get_num(&tt, o, "thinking_tokens", 0, 2e9, what)) || (rc = get_num(&lat, o, "latency_s", 0, 1e9, what)) ||
	    (rc = get_num(&att, o, "attempts", 0, 1e6, what)))
		return rc;
	if (!r->suite || !*r->suite || !r->sample_id || !*r->sample_id)
		return ev_error_set(EV_E_INVALID, "%s: suite and sample_id are required", what);
	if (epoch != floor(epoch))
		return ev_error_set(EV_E_INVALID, "%s.epoch: expected a whole number", what);
	r->epoch = (int)epoch, r->score = score, r->prompt_tokens = (int)pt, r->completion_tokens = (int)ct;
	r->thinking_tokens = (int)tt, r->latency_s = lat, r->attempts = (int)att;
	r->cached = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "cached"));
	if (!r->reason)
		r->reason = "";
	if (!r->request_hash)
		r->request_hash = "";
	return 0;
}

cJSON *ev_run_row_json(const ev_run_row *r)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "id", (double)r->id);
	put_str(o, "model", r->model);
	put_str(o, "model_source", r->model_source);
	put_str(o, "suites_json", r->suites_json);
	put_str(o, "config_json", r->config_json);
	put_str(o, "status", r->status);
	put_str(o, "summary_json", r->summary_json);
	cJSON_AddNumberToObject(o, "created", r->created);
	cJSON_AddNumberToObject(o, "finished", r->finished);
	cJSON_AddNumberToObject(o, "epochs", r->epochs);
	cJSON_AddNumberToObject(o, "n_planned", (double)r->n_planned);
	cJSON_AddNumberToObject(o, "n_results", (double)r->n_results);
	return o;
}
