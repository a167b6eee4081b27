/*
 * evald/remote.h: a team tracker reached over `evald serve`'s runs API
 * (evald/remote.c says how commands use it through a local mirror).
 */
#ifndef EV_EVALD_REMOTE_H
#define EV_EVALD_REMOTE_H

#include "evald/cli.h"

typedef struct ev_remote ev_remote;

/* url: the server's http(s) URL; the bearer token from $token_env
 * (EVALD_API_TOKEN when NULL). */
int ev_remote_open(ev_remote **out, const char *url, const char *token_env);
void ev_remote_free(ev_remote *r);
/* Creates a run on the server (a retry finds the same one): *id. */
int ev_remote_create_run(ev_remote *r, const ev_run_info *info, int64_t *id);
/* Queues a stored result for the server, sending in batches; a batch the
 * server cannot take now stays queued (a warning), sent again later. */
int ev_remote_add(ev_remote *r, int64_t run_id, const ev_result *res);
/* Sends every queued result (retrying up to a minute), then the run's
 * status and summary; *sent: results acknowledged in all. */
int ev_remote_finish(ev_remote *r, int64_t run_id, const char *status, const char *summary_json, long *sent);
/* A fresh path for a mirror file (under $TMPDIR, else /tmp; not created),
 * and the removal of such a file with its SQLite side files. */
int ev_remote_mirror_path(char *path, size_t cap, const char *tag);
void ev_remote_mirror_remove(const char *path);
/* Copies the server's runs into the mirror t (rows only), with the results
 * of those in runs[0..n) (an id < 0: of every run). */
int ev_remote_mirror(ev_remote *r, ev_tracker *t, const int64_t *runs, size_t n);
/* A run's status on the server (status has room for 32 bytes) and its
 * results stored; EV_E_NOTFOUND when there is no such run. */
int ev_remote_run_status(ev_remote *r, int64_t id, char *status, long *n_results);
/* Sends run `id` of the local tracker t (its row, results, summary and
 * status) to the server as a new run: *new_id. */
int ev_remote_push_run(ev_remote *r, ev_tracker *t, int64_t id, int64_t *new_id);

#endif
