/*
 * feedback/watch.h: the checkpoint watcher's state in the tracker.
 * Part of the tracker's public interface (feedback/feedback.h).
 */
#ifndef EV_FEEDBACK_WATCH_H
#define EV_FEEDBACK_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "feedback/tracker.h"


typedef struct {
	char *path;         /* absolute folder path (the key) */
	char *name;         /* checkpoint name: the model name of its runs */
	char *state;        /* seen, complete, running, evaluated, failed */
	int64_t run_id;     /* 0 until the run is known */
	char *compare_json; /* the comparison with the baseline; NULL when none */
	char *detail;       /* why it is incomplete or failed; may be NULL */
	double created, updated;
} ev_watch_row;

bool ev_watch_state_valid(const char *state);
/* Records a checkpoint as "seen" when its path is not known yet (*out_new
 * true, may be NULL); a known row is left as it is. */
int ev_watch_note(ev_tracker *t, const char *path, const char *name, bool *out_new);
/* Sets the state; run_id > 0 sets the run (0 keeps it, < 0 clears it);
 * detail (NULL clears it) says why, for incomplete and failed ones.
 * EV_E_NOTFOUND when the path is unknown. */
int ev_watch_set(ev_tracker *t, const char *path, const char *state, int64_t run_id, const char *detail);
/* Stores the comparison JSON (checked to be JSON; NULL clears it). */
int ev_watch_set_compare(ev_tracker *t, const char *path, const char *compare_json);
/* EV_E_NOTFOUND when the path is unknown. Clear with ev_watch_row_clear. */
int ev_watch_get(ev_tracker *t, const char *path, ev_watch_row *out);
/* Every row, oldest first (then by path). Free with ev_watch_rows_free. */
int ev_watch_list(ev_tracker *t, ev_watch_row **out, size_t *n);
void ev_watch_row_clear(ev_watch_row *r);
void ev_watch_rows_free(ev_watch_row *rows, size_t n);
/* {"checkpoints":[{"path","name","state","run_id","compare","detail",
 * "created","updated"}]} (times ISO-8601, compare the stored JSON or null). */
int ev_watch_list_json(ev_tracker *t, char **out_json);
/* The newest finished run of model `model` whose suites (by name, as a set)
 * are exactly `suites`, other than run `exclude` (the candidate, which may be
 * stored under the baseline's name when a folder serves it so; 0 excludes
 * nothing): *out its id, or EV_E_NOTFOUND. */
int ev_watch_baseline_run(ev_tracker *t, const char *model, const char *const *suites, size_t n_suites,
                          int64_t exclude, int64_t *out);

#endif
