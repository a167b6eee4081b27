/*
 * feedback: the tracker, one SQLite file that keeps everything. Its public
 * interface, cut at its seams:
 *   feedback/tracker.h   opening, runs, results, the response cache
 *   feedback/compare.h   comparison, calibration, regressions
 *   feedback/issues.h    issues, attachments, triage, proposals
 *   feedback/watch.h     the checkpoint watcher's state
 * Include the one a file needs; this header includes them all.
 */
#ifndef EV_FEEDBACK_H
#define EV_FEEDBACK_H

#include "feedback/compare.h"
#include "feedback/issues.h"
#include "feedback/tracker.h"
#include "feedback/watch.h"

#endif
