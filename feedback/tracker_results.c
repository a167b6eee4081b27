/*
 * feedback/tracker_results.c: per-sample results and the response cache.
 *
 * Results, rescores and cache writes are group-committed (tracker.c):
 * they join the open write transaction and are committed within
 * EV_TRACKER_COMMIT_S, at the 512th pending write, or at flush/close.
 * Anything that reads results commits first, so it sees them all.
 */
#include "feedback/feedback_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int check_result(ev_tracker *t, const ev_result *r)
{
	if (!r)
		return ev_error_set(EV_E_INVALID, "result: missing");
	if (!r->suite || !*r->suite)
		return ev_error_set(EV_E_INVALID, "result: suite: missing");
	if (!r->sample_id || !*r->sample_id)
		return ev_error_set(EV_E_INVALID, "result %s: sample_id: missing", r->suite);
	if (r->epoch < 0)
		return ev_error_set(EV_E_INVALID, "result %s/%s: epoch %d: must not be negative", r->suite, r->sample_id,
		                    r->epoch);
	if (!isfinite(r->score) || r->score < 0 || r->score > 1)
		return ev_error_set(EV_E_INVALID, "result %s/%s: score %g: expected a number in [0, 1]", r->suite,
		                    r->sample_id, r->score);
	if (!isfinite(r->latency_s))
		return ev_error_set(EV_E_INVALID, "result %s/%s: latency_s: not a finite number", r->suite, r->sample_id);
	return 0;
}

int ev_tracker_result_put(ev_tracker *t, int64_t run_id, const ev_result *r)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = check_result(t, r)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st,
	                          "INSERT OR REPLACE INTO results(run_id, suite, sample_id, epoch, request_hash, "
	                          "request_json, response, tool_calls_json, extracted, score, reason, detail, "
	                          "finish_reason, prompt_tokens, completion_tokens, latency_s, attempts, cached, created, "
	                          "metadata_json, target_json, prompt_hash, thinking_tokens, answered_by, agents_json) "
	                          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
	                          "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)")))
		return rc;
	sqlite3_bind_int64(st, 1, run_id);
	if ((rc = ev_tracker_bind_text(t, st, 2, r->suite, "result: suite")) ||
	    (rc = ev_tracker_bind_text(t, st, 3, r->sample_id, "result: sample_id")) ||
	    (rc = ev_tracker_bind_text(t, st, 5, r->request_hash, "result: request_hash")) ||
	    (rc = ev_tracker_bind_text(t, st, 6, r->request_json, "result: request_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 7, r->response, "result: response")) ||
	    (rc = ev_tracker_bind_text(t, st, 8, r->tool_calls_json, "result: tool_calls_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 9, r->extracted, "result: extracted")) ||
	    (rc = ev_tracker_bind_text(t, st, 11, r->reason ? r->reason : "", "result: reason")) ||
	    (rc = ev_tracker_bind_text(t, st, 12, r->detail, "result: detail")) ||
	    (rc = ev_tracker_bind_text(t, st, 13, r->finish_reason, "result: finish_reason")) ||
	    (rc = ev_tracker_bind_text(t, st, 20, r->metadata_json, "result: metadata_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 21, r->target_json, "result: target_json")) ||
	    (rc = ev_tracker_bind_text(t, st, 22, r->prompt_hash, "result: prompt_hash")) ||
	    (rc = ev_tracker_bind_text(t, st, 24, r->answered_by, "result: answered_by")) ||
	    (rc = ev_tracker_bind_text(t, st, 25, r->agents_json, "result: agents_json")))
		goto done;
	sqlite3_bind_int(st, 4, r->epoch);
	sqlite3_bind_double(st, 10, r->score);
	sqlite3_bind_int(st, 14, r->prompt_tokens);
	sqlite3_bind_int(st, 15, r->completion_tokens);
	sqlite3_bind_int(st, 23, r->thinking_tokens);
	sqlite3_bind_double(st, 16, r->latency_s);
	sqlite3_bind_int(st, 17, r->attempts);
	sqlite3_bind_int(st, 18, r->cached ? 1 : 0);
	sqlite3_bind_double(st, 19, ev_wall_time());
	if ((rc = ev_tracker_group_write(t)))
		goto done;
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE) {
		/* A failed statement undoes only itself; the group stays open. */
		rc = ev_tracker_sqlerr(t, src, "storing result %s/%s epoch %d of run %lld", r->suite, r->sample_id,
		                       r->epoch, (long long)run_id);
		if (rc == EV_E_NOTFOUND)
			ev_error_wrap(rc, "run %lld does not exist", (long long)run_id);
		t->pending--;
		goto done;
	}
done:
	ev_tracker_stmt_done(st);
	if (rc)
		return rc;
	return ev_tracker_group_after(t);
}

typedef struct {
	ev_tracker *t;
	int64_t to;
	long copied;
} copy_ctx;

static int copy_one(void *ctx, const ev_result *r)
{
	copy_ctx *c = ctx;
	c->copied++;
	return ev_tracker_result_put(c->t, c->to, r);
}

int ev_tracker_results_copy(ev_tracker *from, int64_t run, ev_tracker *to, int64_t to_run, long *copied)
{
	copy_ctx c = {to, to_run, 0};
	int rc = ev_tracker_results_each(from, run, copy_one, &c);
	if (copied)
		*copied = c.copied;
	return rc;
}

int ev_tracker_results_each(ev_tracker *t, int64_t run_id, ev_result_cb cb, void *ctx)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = ev_tracker_flush(t)))
		return rc;
	/* A private statement: the callback may use the tracker, even iterate again. */
	int src = ev_tracker_prepare(t, &st,
	                             "SELECT suite, sample_id, epoch, request_hash, request_json, response, "
	                             "tool_calls_json, extracted, score, reason, detail, finish_reason, prompt_tokens, "
	                             "completion_tokens, latency_s, attempts, cached, metadata_json, target_json, prompt_hash, "
	                             "thinking_tokens, answered_by, agents_json FROM results WHERE run_id = ?1 "
	                             "ORDER BY suite, sample_id, epoch");
	if (src)
		return ev_error_wrap(src, "reading results of run %lld", (long long)run_id);
	sqlite3_bind_int64(st, 1, run_id);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		ev_result r;
		const char *reason = (const char *)sqlite3_column_text(st, 9);
		memset(&r, 0, sizeof r);
		r.suite = (const char *)sqlite3_column_text(st, 0);
		r.sample_id = (const char *)sqlite3_column_text(st, 1);
		r.epoch = sqlite3_column_int(st, 2);
		r.request_hash = (const char *)sqlite3_column_text(st, 3);
		r.request_json = (const char *)sqlite3_column_text(st, 4);
		r.response = (const char *)sqlite3_column_text(st, 5);
		r.tool_calls_json = (const char *)sqlite3_column_text(st, 6);
		r.extracted = (const char *)sqlite3_column_text(st, 7);
		r.score = sqlite3_column_double(st, 8);
		r.reason = reason ? reason : "";
		r.detail = (const char *)sqlite3_column_text(st, 10);
		r.finish_reason = (const char *)sqlite3_column_text(st, 11);
		r.prompt_tokens = sqlite3_column_int(st, 12);
		r.completion_tokens = sqlite3_column_int(st, 13);
		r.latency_s = sqlite3_column_double(st, 14);
		r.attempts = sqlite3_column_int(st, 15);
		r.cached = sqlite3_column_int(st, 16) != 0;
		r.metadata_json = (const char *)sqlite3_column_text(st, 17);
		r.target_json = (const char *)sqlite3_column_text(st, 18);
		r.prompt_hash = (const char *)sqlite3_column_text(st, 19);
		r.thinking_tokens = sqlite3_column_int(st, 20);
		r.answered_by = (const char *)sqlite3_column_text(st, 21);
		r.agents_json = (const char *)sqlite3_column_text(st, 22);
		if (!r.suite || !r.sample_id) {
			rc = ev_error_set(EV_E_NOMEM, "reading results of run %lld: out of memory", (long long)run_id);
			goto done;
		}
		if ((rc = cb(ctx, &r)))
			goto done;
	}
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "reading results of run %lld", (long long)run_id);
done:
	sqlite3_finalize(st);
	return rc;
}

int ev_tracker_result_rescore(ev_tracker *t, int64_t run_id, const char *suite, const char *sample_id, int epoch,
                              double score, const char *reason, const char *extracted, const char *detail)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!suite || !sample_id)
		return ev_error_set(EV_E_INVALID, "rescore: suite and sample_id are required");
	if (!isfinite(score) || score < 0 || score > 1)
		return ev_error_set(EV_E_INVALID, "rescore %s/%s: score %g: expected a number in [0, 1]", suite, sample_id,
		                    score);
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE results SET score = ?1, reason = ?2, extracted = ?3, detail = ?4 "
	                                  "WHERE run_id = ?5 AND suite = ?6 AND sample_id = ?7 AND epoch = ?8")))
		return rc;
	sqlite3_bind_double(st, 1, score);
	if ((rc = ev_tracker_bind_text(t, st, 2, reason ? reason : "", "rescore: reason")) ||
	    (rc = ev_tracker_bind_text(t, st, 3, extracted, "rescore: extracted")) ||
	    (rc = ev_tracker_bind_text(t, st, 4, detail, "rescore: detail")) ||
	    (rc = ev_tracker_bind_text(t, st, 6, suite, "rescore: suite")) ||
	    (rc = ev_tracker_bind_text(t, st, 7, sample_id, "rescore: sample_id")))
		goto done;
	sqlite3_bind_int64(st, 5, run_id);
	sqlite3_bind_int(st, 8, epoch);
	if ((rc = ev_tracker_group_write(t)))
		goto done;
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "rescoring %s/%s epoch %d of run %lld", suite, sample_id, epoch,
		                       (long long)run_id);
	else if (sqlite3_changes(t->db) == 0)
		rc = ev_error_set(EV_E_NOTFOUND, "%s: run %lld has no result %s/%s epoch %d", t->path, (long long)run_id,
		                  suite, sample_id, epoch);
done:
	ev_tracker_stmt_done(st);
	if (rc)
		return rc;
	return ev_tracker_group_after(t);
}

/* ---- response cache ---------------------------------------------------------- */

int ev_tracker_cache_get(ev_tracker *t, const char *key, char **out_response_json)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out_response_json = NULL;
	if (!key || !*key)
		return ev_error_set(EV_E_INVALID, "cache: empty key");
	/* The hit count is a write: it joins the group like a result would. */
	if ((rc = ev_tracker_group_write(t)))
		return rc;
	if ((rc = ev_tracker_stmt(t, &st, "UPDATE cache SET hits = hits + 1 WHERE key = ?1 RETURNING response_json")))
		return rc;
	if ((rc = ev_tracker_bind_text(t, st, 1, key, "cache: key")))
		goto done;
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		if (!(*out_response_json = ev_strdup(s ? s : ""))) {
			rc = ev_error_set(EV_E_NOMEM, "cache: out of memory");
			goto done;
		}
		src = sqlite3_step(st);
		if (src != SQLITE_DONE) {
			free(*out_response_json);
			*out_response_json = NULL;
			rc = ev_tracker_sqlerr(t, src, "reading the cache");
		}
	} else if (src == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "cache: no entry for %.64s", key);
	} else {
		rc = ev_tracker_sqlerr(t, src, "reading the cache");
	}
done:
	ev_tracker_stmt_done(st);
	if (rc && rc != EV_E_NOTFOUND)
		return rc;
	int frc = ev_tracker_group_after(t);
	return rc ? rc : frc;
}

int ev_tracker_cache_put(ev_tracker *t, const char *key, const char *response_json)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!key || !*key)
		return ev_error_set(EV_E_INVALID, "cache: empty key");
	if (!response_json)
		return ev_error_set(EV_E_INVALID, "cache %.64s: no response", key);
	if ((rc = ev_tracker_stmt(t, &st, "INSERT OR REPLACE INTO cache(key, response_json, created, hits) "
	                                  "VALUES(?1, ?2, ?3, 0)")))
		return rc;
	if ((rc = ev_tracker_bind_text(t, st, 1, key, "cache: key")) ||
	    (rc = ev_tracker_bind_text(t, st, 2, response_json, "cache: response_json")))
		goto done;
	sqlite3_bind_double(st, 3, ev_wall_time());
	if ((rc = ev_tracker_group_write(t)))
		goto done;
	int src = sqlite3_step(st);
	if (src != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, src, "storing cache entry %.64s", key);
done:
	ev_tracker_stmt_done(st);
	if (rc)
		return rc;
	return ev_tracker_group_after(t);
}
