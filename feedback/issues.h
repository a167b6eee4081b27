/*
 * feedback/issues.h: community issue reports with their attachments,
 * triage into clusters, and the training proposals that grow out of them.
 * Part of the tracker's public interface (feedback/feedback.h).
 */
#ifndef EV_FEEDBACK_ISSUES_H
#define EV_FEEDBACK_ISSUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "feedback/tracker.h"


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

#define EV_REPRO_OPTIONS_INIT {.regex = NULL}

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

#define EV_TRIAGE_OPTIONS_INIT {.threshold = 0.45}

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

#endif
