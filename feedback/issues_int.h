/*
 * feedback/issues_int.h: what the intake files of feedback/ share (issues*,
 * attach*, triage*, proposal*): their own transactions, private statements,
 * rows as JSON, and the issue insert that runs inside a caller's
 * transaction. Not for use outside feedback/.
 */
#ifndef EV_ISSUES_INT_H
#define EV_ISSUES_INT_H

#include "feedback/feedback_int.h"

/* Caps on the text fields of an issue (bytes). */
#define EV_ISSUE_MAX_TITLE 1000
#define EV_ISSUE_MAX_BODY ((size_t)1 << 20)
#define EV_ISSUE_MAX_FIELD ((size_t)4 << 20) /* prompt, output, expected */
#define EV_ISSUE_MAX_SHORT 256               /* model, author, label is 64 */
#define EV_ISSUE_MAX_LINKS 64

/* Commits the group, then BEGIN IMMEDIATE: the intake's writes are durable
 * on their own and never share the results' group transaction. */
int ev_intake_begin(ev_tracker *t);
int ev_intake_commit(ev_tracker *t);
void ev_intake_rollback(ev_tracker *t);

/* A private statement (finalize it); errors name the SQL. */
/* Steps a statement without rows to DONE; errors say `what`. */
/* True when the table exists (the regressions table belongs to another step). */
bool ev_intake_table_exists(ev_tracker *t, const char *name);
/* The current row as an object: column names as keys, NULL as null, real
 * columns named created/updated/closed/joined/finished as ISO-8601 text
 * (0 as null). */
cJSON *ev_intake_row_json(sqlite3_stmt *st);
/* Prints a JSON tree into *out (malloc'd) and frees the tree. */
int ev_intake_emit(char **out, cJSON *tree);

/* Validation of everything in `info` before any write (see ev_issue_add);
 * fills mimes[i] (static strings) and the modality. */
int ev_intake_issue_check(const ev_issue_info *info, const char **mimes, const char **modality);
/* Inserts the issue and its attachment rows, labels and links inside the
 * caller's open transaction; the attachment files must already be stored. */
int ev_intake_issue_insert(ev_tracker *t, const ev_issue_info *info, const char *const *mimes,
                           const char *const *shas, const char *modality, int64_t *out_id);

/* The issue ids of a cluster, ascending (malloc'd). */
int ev_intake_cluster_issues(ev_tracker *t, int64_t cluster, int64_t **out, size_t *n);
/* The issue ids linked to a proposal (its issue evidence and the current
 * members of its clusters), ascending and unique, as a JSON array of numbers. */
int ev_intake_proposal_issues(ev_tracker *t, int64_t id, cJSON **ids_out);

#endif
