/*
 * evald/watch.h: what the files of `evald watch` share: cmd_watch.c (the
 * daemon), watch_scan.c (is a checkpoint folder complete?), watch_child.c
 * (the child `evald run`), watch_report.c (comparison and report).
 */
#ifndef EV_WATCH_H
#define EV_WATCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "evald/eval.h"
#include "feedback/feedback.h"

/* Caps on what one scan reads: folders in the watched folder, files walked
 * in one checkpoint (to this depth), and the JSON files read. */
#define EV_WATCH_MAX_FOLDERS 4096
#define EV_WATCH_MAX_FILES 20000
#define EV_WATCH_MAX_DEPTH 4
#define EV_WATCH_MAX_JSON ((size_t)16 << 20)

/* One look at a checkpoint folder. */
typedef struct {
	bool ready;         /* every file it needs is there and no marker says it is still written */
	char why[512];      /* when not ready: what is missing (for the log and the tracker) */
	char *endpoint_url; /* endpoint.json: the server to evaluate (malloc'd), else NULL */
	char *endpoint_model; /* endpoint.json "model" (malloc'd), may be NULL */
	/* sha256 over every file's relative path, size and mtime: two equal
	 * fingerprints on consecutive scans mean no writer is still copying. */
	char fingerprint[EV_SHA256_HEX];
} ev_watch_folder;

/* Looks at `dir`: a GGUF file (name.gguf) is ready when it starts with
 * GGUF's magic and a version the engine reads; a folder when it holds a
 * valid endpoint.json, or config.json
 * and its weights (model.safetensors, or every shard the
 * model.safetensors.index.json weight_map names), and no file or folder in it
 * is named *.tmp, *.partial, *.incomplete or .incomplete. A folder that is not
 * ready, whatever the reason (a missing file, malformed or oversized JSON, too
 * many files), is not an error: 0 with ready false and the reason in why.
 * Only a failed allocation is (EV_E_NOMEM). Clear with ev_watch_folder_clear. */
int ev_watch_folder_check(ev_watch_folder *out, const char *dir);
void ev_watch_folder_clear(ev_watch_folder *f);

/* ---- the child run (watch_child.c) ---------------------------------------------- */

/* What the child said about its run. */
typedef struct {
	int64_t run_id;  /* 0 until the run exists */
	char status[16]; /* "finished", "interrupted", "failed"; "" when it died first */
	char error[512]; /* the child's error message, when not finished */
} ev_watch_child_status;

/* Evaluates `c` (or resumes run `resume`) into the tracker at `db` in a
 * child process, which reports through a status pipe; on_started (may be
 * NULL) is called as soon as the run's id is known. Once *stop is set the
 * child gets SIGTERM, and SIGKILL 30 s later if it is still there; the
 * child gets SIGKILL if this process dies. `name` labels the log lines.
 * Returns the child's exit status, 128 + its signal, or -1 (error set)
 * when it could not be started or waited for. */
int ev_watch_child_eval(const char *db, ev_eval_config *c, int64_t resume, const char *name,
                        volatile sig_atomic_t *stop, void (*on_started)(void *ctx, int64_t run_id), void *ctx,
                        ev_watch_child_status *st);

/* ---- comparison and report (watch_report.c) --------------------------------------- */

/* Compares run `cand` with run `base` (the baseline), files regressions
 * (ev_regressions_apply), and logs one line per suite. *out_json gets the
 * comparison JSON (ev_compare_json) with "regressions": the filing actions;
 * *out_cmp (may be NULL) the comparison, freed with ev_compare_free. */
int ev_watch_compare_and_file(ev_tracker *t, const char *name, int64_t base, int64_t cand, char **out_json,
                              ev_compare **out_cmp);

/* Writes <reports_dir>/<folder>.md (the folder made if missing; written to a
 * dot-file beside it, then renamed): the run's Markdown report and a
 * "Compared with the baseline" section from `c` and `compare_json` (or a
 * line saying why there is none: `baseline_model` set means this is the
 * baseline). *out_path gets the path (malloc'd). */
int ev_watch_report_write(ev_tracker *t, const char *reports_dir, const char *folder, const char *baseline_model,
                          int64_t run_id, const ev_compare *c, const char *compare_json, char **out_path);

#endif
