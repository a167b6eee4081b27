/*
 * Helpers the feedback and reports tests share: a fresh tracker in a
 * scratch folder, runs and results with few words, and scalar queries
 * through a second, independent SQLite connection (what another process
 * would see).
 */
#ifndef EV_TRACKER_FIXTURE_H
#define EV_TRACKER_FIXTURE_H

#include "testutil.h"

#include "feedback/feedback.h"

/* <fresh scratch folder named after tag>/evald.db; malloc'd. */
char *tf_db_path(const char *tag);
ev_tracker *tf_open(const char *path);
int64_t tf_run(ev_tracker *t, const char *model);
/* Puts one result with the given score fields; the rest are plausible. */
void tf_put(ev_tracker *t, int64_t run, const char *suite, const char *id, int epoch, double score,
            const char *reason, const char *extracted);
/* The integer a one-value query returns on its own connection (-1 on error). */
long tf_query_long(const char *path, const char *sql);
/* The text of a one-value query on its own connection; malloc'd, NULL on error. */
char *tf_query_text(const char *path, const char *sql);
/* Runs SQL on its own connection; fails the test on error. */
void tf_exec(const char *path, const char *sql);

#endif
