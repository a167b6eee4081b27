/*
 * evald/remote.c: a team tracker, an `evald serve` reached over its runs API
 * (evald/serve_runs.c), as `--tracker URL` uses it.
 *
 * Commands keep working on a local SQLite file, a mirror: `evald run
 * --tracker URL` creates its run on the server first (under a key of its
 * own, so a retried create finds the same run) and the mirror's run under
 * the same id, then streams each stored result to the server in batches;
 * a batch that cannot be sent stays queued and is sent again (results are
 * stored by run, sample and epoch, so a batch sent twice stores once), and
 * the run's end waits for the queue to drain. `--resume` first copies the
 * run and its results from the server into the mirror. Reading commands
 * (runs, report, compare, export, ...) copy the runs and the results of
 * the runs they name into a mirror and read that.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "evald/remote.h"

#define BATCH 500
#define FLUSH_S 2.0
/* A call keeps trying this long (a server restarting). While a run goes on,
 * $EVALD_TRACKER_RETRY_S (0.1 to 3600 s) may shorten it: a batch the server
 * cannot take waits in the queue instead. The last flush always tries at
 * least this long. */
#define RETRY_S 60.0

struct ev_remote {
	char *base;  /* http://host:port, no trailing slash */
	char *auth;  /* "Authorization: Bearer ..." */
	cJSON *queue; /* results not yet acknowledged, of run queue_run */
	int64_t queue_run;
	double last_push;
	long sent;
	bool last; /* the last flush: the full retry time */
};

int ev_remote_open(ev_remote **out, const char *url, const char *token_env)
{
	*out = NULL;
	if (!url || (!ev_str_starts(url, "http://") && !ev_str_starts(url, "https://")) || strlen(url) > 2000)
		return ev_error_set(EV_E_INVALID, "--tracker %.200s: expected the http(s) URL of an evald serve", url ? url : "");
	const char *env = token_env ? token_env : "EVALD_API_TOKEN", *tok = getenv(env);
	if (!tok || !*tok)
		return ev_error_set(EV_E_INVALID, "--tracker: the server's token is read from $%s, which is unset", env);
	ev_remote *r = calloc(1, sizeof *r);
	if (!r || !(r->base = ev_strdup(url)) || !(r->auth = ev_asprintf("Authorization: Bearer %s", tok)) ||
	    !(r->queue = cJSON_CreateArray())) {
		ev_remote_free(r);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	size_t n = strlen(r->base);
	while (n && r->base[n - 1] == '/')
		r->base[--n] = 0;
	if (n > 4 && !strcmp(r->base + n - 4, "/api")) /* the API's root given: the server's */
		r->base[n - 4] = 0;
	*out = r;
	return 0;
}

void ev_remote_free(ev_remote *r)
{
	if (!r)
		return;
	free(r->base);
	if (r->auth) /* the token: not left in freed memory */
		memset(r->auth, 0, strlen(r->auth));
	free(r->auth);
	cJSON_Delete(r->queue);
	free(r);
}

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
	return ev_buf_append(ud, p, size * n) ? 0 : size * n;
}

/* One request, tried again on network errors, 429 and 5xx for up to
 * RETRY_S seconds; *out (malloc'd) the body of a 2xx answer. A 4xx is
 * the request's fault: an error at once, with the server's message. */
static double retry_limit(bool last)
{
	const char *env = getenv("EVALD_TRACKER_RETRY_S");
	double limit = env ? strtod(env, NULL) : RETRY_S;
	limit = limit >= 0.1 && limit <= 3600 ? limit : RETRY_S;
	return last && limit < RETRY_S ? RETRY_S : limit;
}

static int call(ev_remote *r, const char *method, const char *path, const char *body, char **out)
{
	*out = NULL;
	char *url = ev_asprintf("%s%s", r->base, path);
	if (!url)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	double limit = retry_limit(r->last);
	double t0 = ev_now(), wait = 0.2;
	int rc = 0;
	for (int attempt = 1;; attempt++) {
		ev_buf b = EV_BUF_INIT((size_t)1 << 30);
		CURL *e = curl_easy_init();
		struct curl_slist *h = curl_slist_append(NULL, r->auth);
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 5L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT, 120L);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		if (!strcmp(method, "POST")) {
			curl_easy_setopt(e, CURLOPT_POST, 1L);
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "{}");
		}
		CURLcode cc = curl_easy_perform(e);
		long status = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_slist_free_all(h);
		curl_easy_cleanup(e);
		if (cc == CURLE_OK && status >= 200 && status < 300) {
			*out = ev_buf_detach(&b, NULL);
			rc = *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		bool again = cc != CURLE_OK || status == 429 || status >= 500;
		if (!again || ev_now() - t0 + wait > limit) {
			cJSON *j = b.data ? cJSON_Parse(b.data) : NULL;
			const char *msg = ev_json_str(j, "error", NULL);
			rc = cc != CURLE_OK ? ev_error_set(EV_E_IO, "tracker %s%s: %s (%d tries)", r->base, path,
			                                   curl_easy_strerror(cc), attempt)
			     : status == 401 || status == 403
			         ? ev_error_set(EV_E_UNSAFE, "tracker %s%s: %ld: the token was refused", r->base, path, status)
			         : ev_error_set(status == 404 ? EV_E_NOTFOUND : status < 500 ? EV_E_INVALID : EV_E_IO,
			                        "tracker %s%s: HTTP %ld%s%s", r->base, path, status, msg ? ": " : "",
			                        msg ? msg : "");
			cJSON_Delete(j);
			ev_buf_free(&b);
			break;
		}
		ev_buf_free(&b);
		usleep((useconds_t)(wait * 1e6));
		wait = wait * 2 > 5 ? 5 : wait * 2;
	}
	free(url);
	return rc;
}

int ev_remote_create_run(ev_remote *r, const ev_run_info *info, int64_t *id)
{
	unsigned char rnd[16];
	char key[40];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return ev_error_set(EV_E_IO, "no random bytes for the run's key");
	for (int i = 0; i < 16; i++)
		snprintf(key + 2 * i, 3, "%02x", rnd[i]);
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_AddStringToObject(o, "model", info->model ? info->model : "");
	cJSON_AddStringToObject(o, "model_source", info->model_source ? info->model_source : "");
	if (info->suites_json)
		cJSON_AddStringToObject(o, "suites_json", info->suites_json);
	if (info->config_json)
		cJSON_AddStringToObject(o, "config_json", info->config_json);
	cJSON_AddNumberToObject(o, "epochs", info->epochs);
	cJSON_AddNumberToObject(o, "n_planned", (double)info->n_planned);
	cJSON_AddStringToObject(o, "key", key);
	char *body = ev_json_print(o), *out = NULL;
	cJSON_Delete(o);
	int rc = body ? call(r, "POST", "/api/runs", body, &out) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(body);
	cJSON *j = rc ? NULL : cJSON_Parse(out);
	double v = ev_json_num(j, "run_id", 0);
	if (!rc && v < 1)
		rc = ev_error_set(EV_E_PARSE, "tracker %s: no run_id in its answer", r->base);
	*id = (int64_t)v;
	cJSON_Delete(j);
	free(out);
	return rc;
}

/* Sends what is queued; on failure it stays queued. */
static int push(ev_remote *r)
{
	int n = cJSON_GetArraySize(r->queue);
	if (!n)
		return 0;
	int rc = 0;
	while (!rc && (n = cJSON_GetArraySize(r->queue)) > 0) {
		cJSON *batch = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(batch, "results");
		int k = n < BATCH ? n : BATCH;
		for (int i = 0; i < k; i++)
			cJSON_AddItemReferenceToArray(arr, cJSON_GetArrayItem(r->queue, i));
		char *body = ev_json_print(batch), path[64], *out = NULL;
		cJSON_Delete(batch);
		snprintf(path, sizeof path, "/api/runs/%lld/results", (long long)r->queue_run);
		rc = body ? call(r, "POST", path, body, &out) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(body);
		free(out);
		if (!rc) {
			for (int i = 0; i < k; i++)
				cJSON_DeleteItemFromArray(r->queue, 0);
			r->sent += k;
		}
	}
	r->last_push = ev_now();
	return rc;
}

int ev_remote_add(ev_remote *r, int64_t run_id, const ev_result *res)
{
	if (r->queue_run && r->queue_run != run_id && push(r))
		return ev_error_code();
	r->queue_run = run_id;
	cJSON *o = ev_result_json(res);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	cJSON_AddItemToArray(r->queue, o);
	if (cJSON_GetArraySize(r->queue) >= BATCH || ev_now() - r->last_push > FLUSH_S) {
		if (push(r)) { /* the run goes on; the queue waits for the server */
			ev_log_warn("%s (%d results queued; sent again later)", ev_error_msg(), cJSON_GetArraySize(r->queue));
			ev_error_clear();
		}
	}
	return 0;
}

int ev_remote_finish(ev_remote *r, int64_t run_id, const char *status, const char *summary_json, long *sent)
{
	r->last = true;
	int rc = push(r);
	if (!rc) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "status", status);
		if (summary_json)
			cJSON_AddStringToObject(o, "summary_json", summary_json);
		char *body = ev_json_print(o), path[64], *out = NULL;
		cJSON_Delete(o);
		snprintf(path, sizeof path, "/api/runs/%lld/status", (long long)run_id);
		rc = body ? call(r, "POST", path, body, &out) : ev_error_set(EV_E_NOMEM, "out of memory");
		free(body), free(out);
	}
	if (sent)
		*sent = r->sent;
	return rc;
}

/* Copies a run row (as the API gives it) into the mirror, and with
 * `results` its results too (one more request). */
static int mirror_run(ev_remote *r, ev_tracker *t, const cJSON *row, bool results)
{
	int64_t id = (int64_t)ev_json_num(row, "id", 0);
	cJSON *j = NULL;
	int rc = 0;
	if (results) {
		char path[64], *out = NULL;
		snprintf(path, sizeof path, "/api/runs/%lld", (long long)id);
		if (!(rc = call(r, "GET", path, NULL, &out)) && !(j = cJSON_Parse(out)))
			rc = ev_error_set(EV_E_PARSE, "tracker %s%s: not JSON", r->base, path);
		free(out);
		if (j)
			row = cJSON_GetObjectItemCaseSensitive(j, "run");
	}
	if (!rc) {
		ev_run_info info = {ev_json_str(row, "model", "?"), ev_json_str(row, "model_source", ""),
		                    ev_json_str(row, "suites_json", NULL), ev_json_str(row, "config_json", NULL),
		                    (int)ev_json_num(row, "epochs", 1), (long)ev_json_num(row, "n_planned", 0), id, NULL};
		int64_t got = 0;
		rc = ev_tracker_run_create(t, &info, &got);
	}
	const cJSON *x, *all = j ? cJSON_GetObjectItemCaseSensitive(j, "results") : NULL;
	int i = 0;
	cJSON_ArrayForEach(x, all)
	{
		ev_result res;
		char what[48];
		snprintf(what, sizeof what, "run %lld results[%d]", (long long)id, i++);
		if (rc || (rc = ev_result_from_json(&res, x, what)) || (rc = ev_tracker_result_put(t, id, &res)))
			break;
	}
	if (!rc && ev_json_str(row, "summary_json", NULL))
		rc = ev_tracker_run_set_summary(t, id, ev_json_str(row, "summary_json", NULL));
	if (!rc)
		rc = ev_tracker_run_set_status(t, id, ev_json_str(row, "status", "running"));
	if (!rc)
		rc = ev_tracker_flush(t);
	cJSON_Delete(j);
	return rc;
}

int ev_remote_run_status(ev_remote *r, int64_t id, char *status, long *n_results)
{
	char *out = NULL;
	int rc = call(r, "GET", "/api/runs", NULL, &out);
	cJSON *j = rc ? NULL : cJSON_Parse(out), *x;
	free(out);
	*status = 0;
	*n_results = 0;
	rc = rc ? rc : ev_error_set(EV_E_NOTFOUND, "tracker %s: no run %lld", r->base, (long long)id);
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "runs")) if ((int64_t)ev_json_num(x, "id", 0) == id)
	{
		snprintf(status, 32, "%s", ev_json_str(x, "status", ""));
		*n_results = (long)ev_json_num(x, "n_results", 0);
		ev_error_clear();
		rc = 0;
	}
	cJSON_Delete(j);
	return rc;
}

typedef struct {
	ev_remote *r;
	int64_t to;
	int rc;
} push_ctx;

static int push_one(void *ctx, const ev_result *res)
{
	push_ctx *p = ctx;
	return ev_remote_add(p->r, p->to, res);
}

int ev_remote_push_run(ev_remote *r, ev_tracker *t, int64_t id, int64_t *new_id)
{
	ev_run_row row = {0};
	int rc = ev_tracker_run_get(t, id, &row);
	if (!rc) {
		ev_run_info info = {row.model, row.model_source, row.suites_json, row.config_json, row.epochs, row.n_planned, 0,
		                    NULL};
		rc = ev_remote_create_run(r, &info, new_id);
	}
	push_ctx p = {r, *new_id, 0};
	if (!rc)
		rc = ev_tracker_results_each(t, id, push_one, &p);
	if (!rc)
		rc = ev_remote_finish(r, *new_id, row.status ? row.status : "finished", row.summary_json, NULL);
	ev_run_row_clear(&row);
	return rc;
}

int ev_remote_mirror_path(char *path, size_t cap, const char *tag)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(path, cap, "%s/evald-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	int fd = mkstemp(path);
	if (fd < 0)
		return ev_error_set(EV_E_IO, "no temporary file for the team tracker's mirror: %s", strerror(errno));
	close(fd);
	unlink(path); /* the name reserved; the tracker makes the file */
	return 0;
}

void ev_remote_mirror_remove(const char *path)
{
	static const char *const side[] = {"", "-wal", "-shm", "-journal"};
	for (int i = 0; path && *path && i < 4; i++) {
		char p[4200];
		snprintf(p, sizeof p, "%s%s", path, side[i]);
		unlink(p);
	}
}

int ev_remote_mirror(ev_remote *r, ev_tracker *t, const int64_t *runs, size_t n)
{
	char *out = NULL;
	int rc = call(r, "GET", "/api/runs", NULL, &out);
	cJSON *j = rc ? NULL : cJSON_Parse(out);
	free(out);
	if (!rc && !j)
		rc = ev_error_set(EV_E_PARSE, "tracker %s/api/runs: not JSON", r->base);
	/* oldest first, so that the mirror's rows come in the server's order */
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "runs");
	for (int i = cJSON_GetArraySize(list) - 1; !rc && i >= 0; i--) {
		const cJSON *row = cJSON_GetArrayItem(list, i);
		int64_t id = (int64_t)ev_json_num(row, "id", 0);
		bool want = false;
		for (size_t k = 0; k < n; k++)
			want = want || runs[k] == id || runs[k] < 0;
		rc = mirror_run(r, t, row, want);
	}
	cJSON_Delete(j);
	return rc;
}
