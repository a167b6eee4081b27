/*
 * feedback/tracker.h: the tracker, one SQLite file that keeps everything;
 * its runs, results and response cache.
 *
 * WAL mode, a busy timeout, foreign keys, and a schema version with forward
 * migrations (an older file upgrades in place, nothing lost; a newer one is
 * refused). Results are group-committed: each is committed within
 * EV_TRACKER_COMMIT_S of arriving (ev_tracker_tick from the caller's loop,
 * or at the 512th pending result, or at ev_tracker_flush/close).
 *
 * A tracker handle is used from one thread at a time.
 */
#ifndef EV_FEEDBACK_TRACKER_H
#define EV_FEEDBACK_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suites.h"

#define EV_TRACKER_COMMIT_S 0.1

typedef struct ev_tracker ev_tracker;

/* Opens or creates the tracker at `path` and migrates it to the current
 * schema. A tracker this process may read but not write (a read-only file,
 * folder or mount) is opened read-only: every read works, and the first
 * write fails saying the tracker is read-only. One whose schema is older
 * than this evald's cannot be upgraded so, and is refused, saying why. */
int ev_tracker_open(ev_tracker **out, const char *path);
/* True when ev_tracker_open fell back to reading only. */
bool ev_tracker_readonly(const ev_tracker *t);
/* Commits what is pending and closes. Accepts NULL. */
void ev_tracker_close(ev_tracker *t);
int ev_tracker_schema_version(ev_tracker *t);

/* ---- runs ---------------------------------------------------------------- */

typedef struct {
	const char *model;        /* checkpoint / model name */
	const char *model_source; /* URL(s) or checkpoint folder */
	const char *suites_json;  /* [{"name","version","hash","path","n"}] */
	const char *config_json;  /* the run's settings (checker, gen, flags) */
	int epochs;
	long n_planned;           /* samples x epochs in this run (this shard) */
	int64_t id;               /* 0: the next id; else this one (a team tracker's run mirrored) */
	const char *client_key;   /* NULL, or a key the creator chose: creating with a key already
	                             stored gives that run back (*out_id), nothing created */
} ev_run_info;

typedef struct {
	int64_t id;
	char *model;
	char *model_source;
	char *suites_json;
	char *config_json;
	char *status;        /* running, finished, failed, interrupted */
	char *summary_json;  /* set when finished (or rescored), else NULL */
	double created;      /* wall seconds */
	double finished;     /* 0 while unfinished */
	int epochs;
	long n_planned;
	long n_results;
} ev_run_row;

int ev_tracker_run_create(ev_tracker *t, const ev_run_info *info, int64_t *out_id);
int ev_tracker_run_set_status(ev_tracker *t, int64_t run_id, const char *status);
/* A run's statuses: "running", "finished" (every result scored),
 * "finished_with_errors" (complete, but some requests failed: left out of
 * the score), "failed" (stopped by an error, or every request failed),
 * "interrupted". True for the two complete ones. */
bool ev_run_status_complete(const char *status);
int ev_tracker_run_set_summary(ev_tracker *t, int64_t run_id, const char *summary_json);
/* EV_E_NOTFOUND when there is no such run. */
int ev_tracker_run_get(ev_tracker *t, int64_t run_id, ev_run_row *out);
/* Newest first; limit <= 0 means all. Free with ev_run_rows_free. */
int ev_tracker_runs_list(ev_tracker *t, ev_run_row **out, size_t *n, int limit);
void ev_run_row_clear(ev_run_row *r);

/* A result and a run as JSON objects (feedback/result_json.c), as a team
 * tracker's API carries them: every column a key. ev_result_from_json
 * borrows the strings of o; errors name the field under `what`. */
cJSON *ev_result_json(const ev_result *r);
int ev_result_from_json(ev_result *r, const cJSON *o, const char *what);
cJSON *ev_run_row_json(const ev_run_row *r);
void ev_run_rows_free(ev_run_row *rows, size_t n);

/* ---- results ------------------------------------------------------------- */

/* Stores one result (replacing an earlier one for the same run, suite,
 * sample and epoch). Buffered: see the group commit above. */
int ev_tracker_result_put(ev_tracker *t, int64_t run_id, const ev_result *r);
int ev_tracker_flush(ev_tracker *t);
/* Stores every result of run `run` of tracker `from` as results of run
 * `to_run` of tracker `to` (the same tracker is fine); *copied (may be
 * NULL) counts them. Buffered like ev_tracker_result_put. */
int ev_tracker_results_copy(ev_tracker *from, int64_t run, ev_tracker *to, int64_t to_run, long *copied);
/* Writes rolled back since the tracker was opened because a commit failed
 * (disk full, I/O error), with SQLite's reason in *why (may be NULL). A
 * caller that must not lose results (a run) stops when this is not 0: the
 * results it handed over are not all stored, and resume redoes them. */
long ev_tracker_lost_writes(ev_tracker *t, const char **why);
/* Commits if the oldest pending result is older than EV_TRACKER_COMMIT_S. */
int ev_tracker_tick(ev_tracker *t);

/* Calls cb for each stored result of the run, ordered by suite, sample id
 * and epoch. A non-zero return from cb stops and is returned. */
typedef int (*ev_result_cb)(void *ctx, const ev_result *r);
int ev_tracker_results_each(ev_tracker *t, int64_t run_id, ev_result_cb cb, void *ctx);
/* Updates the score fields of one stored result (rescoring). */
int ev_tracker_result_rescore(ev_tracker *t, int64_t run_id, const char *suite, const char *sample_id, int epoch,
                              double score, const char *reason, const char *extracted, const char *detail);

/* ---- response cache -------------------------------------------------------- */

/* Cached backend responses keyed by a hash of model, request and
 * generation settings. get: EV_E_NOTFOUND when absent; *out malloc'd. */
int ev_tracker_cache_get(ev_tracker *t, const char *key, char **out_response_json);
int ev_tracker_cache_put(ev_tracker *t, const char *key, const char *response_json);

#endif
