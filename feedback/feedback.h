/*
 * feedback: the tracker, one SQLite file that keeps everything.
 *
 * WAL mode, a busy timeout, foreign keys, and a schema version with forward
 * migrations (an older file upgrades in place, nothing lost; a newer one is
 * refused). Results are group-committed: each is committed within
 * EV_TRACKER_COMMIT_S of arriving (ev_tracker_tick from the caller's loop,
 * or at the 512th pending result, or at ev_tracker_flush/close).
 *
 * A tracker handle is used from one thread at a time.
 */
#ifndef EV_FEEDBACK_H
#define EV_FEEDBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suites.h"

#define EV_TRACKER_COMMIT_S 0.1

typedef struct ev_tracker ev_tracker;

/* Opens or creates the tracker at `path` and migrates it to the current
 * schema. */
int ev_tracker_open(ev_tracker **out, const char *path);
/* Commits what is pending and closes. Accepts NULL. */
void ev_tracker_close(ev_tracker *t);
int ev_tracker_schema_version(ev_tracker *t);
/* The underlying connection, for modules of feedback/ and their tests. */
struct sqlite3 *ev_tracker_db(ev_tracker *t);

/* ---- runs ---------------------------------------------------------------- */

typedef struct {
	const char *model;        /* checkpoint / model name */
	const char *model_source; /* URL(s) or checkpoint folder */
	const char *suites_json;  /* [{"name","version","hash","path","n"}] */
	const char *config_json;  /* the run's settings (checker, gen, flags) */
	int epochs;
	long n_planned;           /* samples x epochs in this run (this shard) */
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
int ev_tracker_run_set_summary(ev_tracker *t, int64_t run_id, const char *summary_json);
/* EV_E_NOTFOUND when there is no such run. */
int ev_tracker_run_get(ev_tracker *t, int64_t run_id, ev_run_row *out);
/* Newest first; limit <= 0 means all. Free with ev_run_rows_free. */
int ev_tracker_runs_list(ev_tracker *t, ev_run_row **out, size_t *n, int limit);
void ev_run_row_clear(ev_run_row *r);
void ev_run_rows_free(ev_run_row *rows, size_t n);

/* ---- results ------------------------------------------------------------- */

/* Stores one result (replacing an earlier one for the same run, suite,
 * sample and epoch). Buffered: see the group commit above. */
int ev_tracker_result_put(ev_tracker *t, int64_t run_id, const ev_result *r);
int ev_tracker_flush(ev_tracker *t);
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

/* ==== comparison, noise floor and regressions (compare*.c, regress*.c,
 * stats.c; owner: regress) ==================================================
 *
 * Paired comparison of two runs sample by sample, the noise floor measured
 * by calibration (the same evaluation repeated), and regressions filed from
 * significant drops. See feedback/README.md, "Comparison and regressions". */

/* ---- paired statistics (stats.c): plain arrays, no tracker ---------------- */

/* McNemar's exact two-sided p for b and c discordant pairs: the binomial
 * test of min(b, c) successes in b + c trials with p = 1/2, doubled and
 * capped at 1. 1 when b + c == 0; NAN for negative counts. */
double ev_paired_mcnemar_p(long b, long c);

/* Percentile 95% interval of mean(b[i] - a[i]) over n_boot (2000 when <= 0)
 * resamples of the indices with replacement, seeded (same seed, same
 * interval). n == 0 gives [0, 0]. */
int ev_paired_bootstrap_ci(double *ci_low, double *ci_high, const double *a, const double *b, size_t n,
                           uint64_t seed, int n_boot);

/* Two-sided p of the paired sign-flip permutation test of mean(b - a) == 0:
 * exact over every sign pattern when at most 16 differences are non-zero,
 * n_perm (10000 when <= 0) seeded random patterns up to 4096, p = (k + 1) /
 * (n_perm + 1), and past that the normal limit of the permutation
 * distribution (variance sum(d^2)). 1 when every difference is 0. */
double ev_paired_sign_flip_p(const double *a, const double *b, size_t n, uint64_t seed, int n_perm);

/* Minimum detectable effect (80% power, two-sided 5%): 2.8 * sqrt(var / n)
 * where var is the variance of one per-sample difference. 0 when n == 0. */
double ev_paired_mde(double diff_var, size_t n);

/* ---- comparison (compare.c) ------------------------------------------------ */

/* The per-sample fingerprint of a failure, from the stored result. */
typedef enum {
	EV_FP_WRONG_ANSWER = 0,   /* "wrong_answer" */
	EV_FP_NO_ANSWER,          /* "no_answer" */
	EV_FP_TRUNCATED,          /* "truncated" */
	EV_FP_UNCLOSED_THINKING,  /* "unclosed_thinking" */
	EV_FP_TOOL_CALL_PARSE,    /* "tool_call_parse_error" */
	EV_FP_TIMEOUT,            /* "timeout" */
	EV_FP_SANDBOX_ERROR,      /* "sandbox_error" */
	EV_FP_BACKEND_ERROR,      /* "backend_error" */
	EV_FP_COUNT
} ev_fingerprint;

const char *ev_fingerprint_name(ev_fingerprint f);
/* Classifies one stored result (reason, detail, finish_reason; any may be
 * NULL). */
ev_fingerprint ev_fingerprint_of(const char *reason, const char *detail, const char *finish_reason);

typedef struct {
	uint64_t seed;   /* bootstrap and permutation seed (default 1) */
	int n_boot;      /* bootstrap resamples (default 2000) */
	int n_perm;      /* sign-flip permutations for non-binary scores (default 10000) */
	bool use_calibration; /* take the noise floor from the latest calibration (default true) */
} ev_compare_options;

/* Results whose reason is an infrastructure fault (ev_result_is_error) are
 * left out of the scores compared. */
#define EV_COMPARE_OPTIONS_INIT {.seed = 1, .n_boot = 2000, .n_perm = 10000, .use_calibration = true}

/* A sample that flipped between the runs. */
typedef struct {
	char *sample_id;
	double score_a, score_b;
	ev_fingerprint fingerprint; /* of the failing side (B for broken, A for fixed) */
	char *detail;               /* that result's detail, cut to 256 bytes; may be NULL */
	double flip_rate;           /* from the calibration; -1 when none */
} ev_flip;

typedef struct {
	char *name;
	size_t n;              /* samples scored in both runs */
	size_t only_a, only_b; /* samples scored in one run only (left out) */
	double score_a, score_b, delta; /* delta = score_b - score_a */
	double ci_low, ci_high; /* paired bootstrap 95% interval of delta */
	double p;
	bool binary;           /* every per-sample score is 0 or 1 */
	const char *test;      /* "mcnemar_exact" or "sign_flip_permutation" (static) */
	double mde;
	const char *mde_source; /* "calibration" or "observed" (static) */
	int64_t calibration_id; /* 0 when none was used */
	double noise_var;      /* per-sample variance the MDE came from */
	ev_flip *fixed;        /* A < 1, B == 1 */
	size_t n_fixed;
	ev_flip *broken;       /* A == 1, B < 1 */
	size_t n_broken;
} ev_compare_suite;

typedef struct {
	int64_t run_a, run_b;
	char *model_a, *model_b;
	ev_compare_suite *suites; /* by name */
	size_t n_suites;
} ev_compare;

/* Compares run B with run A over the (suite, sample) pairs both scored:
 * per-sample score = the mean over its epochs that are not errors; samples
 * with only error results are left out. McNemar's exact test when every
 * per-sample score is 0 or 1, else the paired sign-flip permutation test.
 * The MDE comes from the latest calibration of the suite (preferring one
 * with the same suite hash as run B) when there is one, else from the
 * observed variance of the paired differences. Free with ev_compare_free. */
int ev_compare_runs(ev_compare **out, ev_tracker *t, int64_t run_a, int64_t run_b, const ev_compare_options *opt);
void ev_compare_free(ev_compare *c);
/* {"run_a","run_b","model_a","model_b","suites":[{"name","n","score_a",
 * "score_b","delta","ci_low","ci_high","p","test","mde","mde_source",
 * "calibration_id","significant_drop","only_a","only_b","fixed":[ids],
 * "broken":[ids],"fixed_samples"/"broken_samples":[{"id","score_a",
 * "score_b","fingerprint","detail","flip_rate"}]}]}; malloc'd. */
int ev_compare_json(char **out, const ev_compare *c);
/* True when suite s is a significant drop: ci_high < 0, p < 0.05 and
 * |delta| > mde. */
bool ev_compare_is_regression(const ev_compare_suite *s);

/* ---- calibration (compare_calib.c) ----------------------------------------- */

/* Computes and stores one noise-floor record per suite from repeated runs
 * of the same evaluation (at least 2): the sample variance of the suite
 * score across the runs, and per-sample flip rates (the fraction of runs
 * where the sample's outcome, pass = score 1, differs from its majority).
 * `model` names the model. *out_json (may be NULL) gets
 * {"calibrations":[{"id","model","suite","suite_hash","repeats","n",
 * "variance","mean_flip_rate","flaky":{id:rate},"run_ids":[..]}]}. */
int ev_calibration_store(ev_tracker *t, const char *model, const int64_t *run_ids, size_t n_runs,
                         const ev_compare_options *opt, char **out_json);
/* The latest calibration of `suite` as JSON (same shape as one element
 * above); EV_E_NOTFOUND when none. */
int ev_calibration_get_json(ev_tracker *t, const char *suite, char **out_json);

/* ---- regressions (regress.c) ----------------------------------------------- */

/* Statuses: new, confirmed, investigating, fixed, invalid, wontfix, regressed. */
bool ev_regression_status_valid(const char *status);

/* Files regressions from an existing comparison (A = baseline, B =
 * candidate), suite by suite:
 *  - significantly worse (ev_compare_is_regression): the regression of
 *    (suite, baseline run) is created ("new"), or updated with this
 *    candidate's evidence (broken samples replaced); one that was "fixed"
 *    becomes "regressed" (same id); "invalid" and "wontfix" keep their
 *    status and evidence;
 *  - otherwise, open ones (new, confirmed, investigating, regressed)
 *    become "fixed" with fixed_in = the candidate's model.
 * A candidate run older than the one a regression last saw changes nothing
 * there. Each change is an event in regression_events. *out_json (may be
 * NULL) gets {"actions":[{"suite","regression_id","action"}]} with action
 * filed, updated, regressed, fixed or kept. One transaction. */
int ev_regressions_apply(ev_tracker *t, const ev_compare *cmp, char **out_json);
/* ev_compare_runs(baseline, candidate) then ev_regressions_apply: the entry
 * point for `evald compare --file-regressions` and the checkpoint watcher. */
int ev_regressions_file(ev_tracker *t, int64_t baseline_run, int64_t candidate_run, const ev_compare_options *opt,
                        char **out_json);

/* {"regressions":[{"id","suite","baseline_run","candidate_run",
 * "baseline_model","candidate_model","delta","ci_low","ci_high","p","mde",
 * "n","n_broken","status","assignee","fixed_in","created","updated"}]},
 * newest first; `status` NULL for all. */
int ev_regressions_list_json(ev_tracker *t, const char *status, char **out_json);
/* One regression with its evidence: the fields above plus
 * "samples":[{"sample_id","fingerprint","detail"}] and
 * "events":[{"status","model","run","at"}]. EV_E_NOTFOUND when absent. */
int ev_regression_show_json(ev_tracker *t, int64_t id, char **out_json);
/* Sets the status (and the assignee when not NULL) by hand, with an event. */
int ev_regression_set_status(ev_tracker *t, int64_t id, const char *status, const char *assignee);

/* ==== end of comparison, noise floor and regressions ====================== */

/* ==== community issues, attachments, triage and training proposals
 * (issues*.c, attach*.c, triage*.c, proposal*.c; owner: intake) =============
 *
 * Reports arrive from the CLI, the HTTP API or a GitHub export, with
 * attachments stored content-addressed beside the tracker; triage groups
 * near-duplicates and labels them; a report becomes an eval case in the
 * `community` suite; proposals gather the evidence for a training change.
 * See feedback/README.md, "Issues", "Triage" and "Proposals". */

/* ---- attachments (attach.c) ------------------------------------------------ */

#define EV_ATTACH_MAX_DEFAULT ((size_t)50 << 20) /* bytes of one attachment */
#define EV_ISSUE_MAX_ATTACHMENTS 32
#define EV_ISSUE_MAX_LABELS 32

/* The MIME type of `data` from its magic bytes: image/png, image/jpeg,
 * image/gif, image/webp, video/mp4, video/quicktime, video/webm,
 * video/x-matroska, application/pdf, the three OOXML types (a zip holding
 * word/, ppt/ or xl/), application/zip, text/plain (valid UTF-8 without NUL
 * or C0 controls other than tab, newlines, form feed, ESC), else
 * application/octet-stream. Static string. */
const char *ev_attach_detect_mime(const void *data, size_t len);
/* "image", "video" or "document" (everything else) for a MIME type. */
const char *ev_attach_kind(const char *mime);
/* Checks a claimed type (HTTP Content-Type, may carry parameters; NULL or
 * application/octet-stream is no claim) against the detected one. Aliases
 * agree (image/jpg, text/<any> for text, application/zip for OOXML). Else
 * EV_E_UNSUPPORTED naming `what`, the claim and the detected type. */
int ev_attach_check_claim(const char *claimed, const char *detected, const char *what);
/* The attachment folder of a tracker: <folder of the tracker file>/attachments
 * (malloc'd). */
int ev_attach_dir(char **out, ev_tracker *t);
/* Stores `len` bytes under <dir>/<sha[0:2]>/<sha[2:]> (folders made as
 * needed): written to a temporary file in the same folder, synced, then
 * renamed, so the final name never holds a partial file. Present content is
 * not rewritten. sha_out (may be NULL) gets the hex digest. */
int ev_attach_store(const char *dir, const void *data, size_t len, char sha_out[EV_SHA256_HEX]);
/* <dir>/<sha[0:2]>/<sha[2:]> (malloc'd); EV_E_INVALID for a malformed sha. */
int ev_attach_path(char **out, const char *dir, const char *sha);

/* ---- issues (issues.c, issues_import.c, issues_repro.c) -------------------- */

typedef struct {
	const char *name;         /* original file name (may be NULL) */
	const char *claimed_mime; /* Content-Type given with it (may be NULL) */
	const void *data;
	size_t len;
} ev_issue_attachment;

typedef struct {
	const char *title;        /* required, 1-1000 bytes */
	const char *body;         /* may be NULL ("") */
	const char *model, *prompt, *output, *expected; /* may be NULL */
	const char *source;       /* "cli" (NULL), "http" or "github" */
	const char *external_id;  /* unique when set (GitHub html_url) */
	const char *author;
	double created;           /* wall seconds; 0: now */
	const char *const *labels;
	size_t n_labels;
	const ev_issue_attachment *attachments;
	size_t n_attachments;
	const char *const *links; /* image URLs recorded, never fetched */
	size_t n_links;
	size_t max_attachment_bytes; /* 0: EV_ATTACH_MAX_DEFAULT */
} ev_issue_info;

/* Validates everything first (UTF-8 text with size caps, labels, attachment
 * sizes and MIME claims: EV_E_INVALID / EV_E_LIMIT / EV_E_UNSUPPORTED naming
 * the field), stores the attachment files, then writes the issue with its
 * attachments, labels and links in one transaction: on any failure no row is
 * left. The modality follows from the attachments (text when none, mixed when
 * their kinds differ). A duplicate external_id is EV_E_INVALID. */
int ev_issue_add(ev_tracker *t, const ev_issue_info *info, int64_t *out_id);
/* Sets status closed (stamping closed); EV_E_NOTFOUND when absent. */
int ev_issue_close(ev_tracker *t, int64_t id);
/* The issue with this external id: 0 and *out_id, or EV_E_NOTFOUND. */
int ev_issue_find_external(ev_tracker *t, const char *external_id, int64_t *out_id);
/* {"issues":[{"id","title","status","source","modality","model","author",
 * "external_id","cluster_id","labels":[..],"n_attachments","created",
 * "closed"}]}, newest first; status / label NULL for any. */
int ev_issues_list_json(ev_tracker *t, const char *status, const char *label, char **out_json);
/* The rows of one of the tracker's tables ("regressions", "issues",
 * "proposals" or "clusters"), newest first, as a JSON array of objects
 * (column names as keys, times as ISO-8601); "[]" when the tracker has no
 * such table. For readers that must not depend on the table's owner. */
int ev_tracker_rows_json(ev_tracker *t, const char *table, char **out_json);
/* One issue with every field plus "attachments":[{"sha256","mime","size",
 * "name","path"}] and "links":[..]. EV_E_NOTFOUND when absent. */
int ev_issue_show_json(ev_tracker *t, int64_t id, char **out_json);

/* Imports GitHub's REST issues array (a file of at most 256 MiB): title,
 * body, labels[].name (or plain strings), user.login, created_at,
 * html_url (else "github#<number>") as external id. Pull requests (an item
 * with "pull_request") are skipped, as are issues already imported (same
 * external id). Image links in the body (markdown ![..](url) and <img src>)
 * are recorded in links, never fetched. All or nothing: one transaction.
 * *out_json (may be NULL): {"imported","skipped_existing","skipped_pull_requests","ids":[..]}. */
int ev_issues_import_github(ev_tracker *t, const char *path, char **out_json);
/* The image URLs of a Markdown/HTML text, in order, without duplicates
 * (http and https only, at most 64). Free with ev_strv_free. */
int ev_issue_image_links(char ***out, size_t *n, const char *text);

typedef struct {
	const char *regex;     /* per-sample regex checker (an assertion on the answer) */
	const char *target;    /* else: target answer, "includes" checker */
	const char *suite_dir; /* NULL: <folder of the tracker>/community */
} ev_repro_options;

#define EV_REPRO_OPTIONS_INIT {NULL, NULL, NULL}

/* Turns issue `id` into the sample "issue-<id>" of the community suite
 * (suite.json written when absent; the sample replaced when present): the
 * prompt is the issue's prompt (else title and body), the checker a regex
 * from opt->regex, else the target opt->target, else the issue's expected
 * answer (EV_E_INVALID when none of them). Attachments are copied beside,
 * under attachments/. The suite is loaded back to check it; on failure the
 * previous samples.jsonl is restored. *out_json (may be NULL):
 * {"suite_dir","sample_id","attachments":[..],"replaced":bool}. */
int ev_issue_repro(ev_tracker *t, int64_t id, const ev_repro_options *opt, char **out_json);

/* ---- triage (triage.c, triage_rules.c) --------------------------------------- */

typedef struct {
	double threshold;       /* estimated Jaccard of word 3-shingles (default 0.45) */
	const char *rules_path; /* "label<TAB>PCRE2 pattern" lines; NULL: the built-in rules */
	bool dry_run;           /* compute and report, store nothing */
} ev_triage_options;

#define EV_TRIAGE_OPTIONS_INIT {0.45, NULL, false}

/* Groups the open issues: MinHash (128 hashes) over the normalised word
 * 3-shingles of title and body, LSH (64 bands of 2) for candidates, pairs
 * whose estimated Jaccard >= threshold joined, and issues sharing an
 * attachment joined, by union-find. Groups of two or more become clusters
 * (an existing cluster id is kept when the group holds its issues); open
 * issues outside a group lose their cluster. Labels from the rules
 * (case-insensitive over title and body) and from attachment modality are
 * added. *out_json (may be NULL): {"clusters":[{"id","size","new","issues":[..],
 * "titles":[..]}],"labeled":n,"issues":n}, clusters by size, new first among
 * equals. */
int ev_triage_run(ev_tracker *t, const ev_triage_options *opt, char **out_json);

/* The label rules (triage_rules.c). */
typedef struct ev_label_rules ev_label_rules;
/* Reads a rules file (NULL: the built-in rules); errors name file:line. */
int ev_label_rules_new(ev_label_rules **out, const char *path);
void ev_label_rules_free(ev_label_rules *r);
/* Calls add(ctx, label) for each rule matching `text`. */
int ev_label_rules_apply(const ev_label_rules *r, const char *text, int (*add)(void *ctx, const char *label),
                         void *ctx);

/* ---- training proposals (proposal.c, proposal_export.c) ---------------------- */

/* proposed, investigating, experimenting, accepted, shipped, dropped. */
bool ev_proposal_status_valid(const char *status);
/* A new proposal ("proposed"). from_cluster / from_regression (0: none)
 * add that evidence (a cluster brings its issues, a regression its broken
 * samples) and supply a title when `title` is NULL. */
int ev_proposal_new(ev_tracker *t, const char *title, const char *body, int64_t from_cluster,
                    int64_t from_regression, int64_t *out_id);
/* kind: issue, cluster, regression or sample ("suite/sample_id"); the
 * referenced issue, cluster or regression must exist. Idempotent. */
int ev_proposal_add_evidence(ev_tracker *t, int64_t id, const char *kind, const char *ref, const char *note);
int ev_proposal_join(ev_tracker *t, int64_t id, const char *who);
int ev_proposal_set_status(ev_tracker *t, int64_t id, const char *status);
/* {"proposals":[{"id","title","status","members","n_evidence","created","updated"}]}. */
int ev_proposals_list_json(ev_tracker *t, char **out_json);
/* The proposal, "members":[{"who","joined"}], "evidence":[{"kind","ref",
 * "note", "title"/"status" of the issue, cluster or regression}], and
 * "repro": {"samples":["issue-N"...], "runs":[{"run","model","created","n",
 * "passed","pass_rate"}] (runs that scored those samples in the community
 * suite, oldest first), "models":[{"model","runs","first_pass_rate",
 * "last_pass_rate","improved"}]}. */
int ev_proposal_show_json(ev_tracker *t, int64_t id, char **out_json);
/* Writes the proposal's failing cases to `out_path` (JSONL, atomically):
 * for each linked issue {"id":"issue-N","prompt" or "messages",
 * "attachments":[{"sha256","mime","path"}],"reference","model_output",
 * "model","source":"issue"}, and for each regression sample the candidate
 * run's {"id":"suite/sample","messages","reference":null,"model_output",
 * "model","source":"regression"}. *n_out: lines written. */
int ev_proposal_export(ev_tracker *t, int64_t id, const char *out_path, size_t *n_out);

/* ==== end of community issues, attachments, triage and proposals ========= */

/* ==== checkpoint watcher (watch*.c; owner: watch) ==========================
 *
 * The state of `evald watch`: one row per checkpoint folder it has noticed,
 * keyed by the folder's absolute path. A row goes seen -> complete ->
 * running -> evaluated (or failed); a watcher that restarts resumes every row
 * left `running` (with its run id) or `complete`. See feedback/README.md,
 * "Checkpoint watcher". */

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
 * are exactly `suites`: *out its id, or EV_E_NOTFOUND. */
int ev_watch_baseline_run(ev_tracker *t, const char *model, const char *const *suites, size_t n_suites,
                          int64_t *out);

/* ==== end of checkpoint watcher ============================================ */

#endif
