/*
 * suites_int.h: what the suites module's files share and nothing else may use.
 *
 * The loader (load.c) reads suite.json into the ev_suite and hands
 * samples.jsonl to the sample parser (samples.c); both use the path
 * helpers below for attachments and for removing extracted folders.
 */
#ifndef EV_SUITES_INT_H
#define EV_SUITES_INT_H

#include "suites/suites.h"

/* One samples.jsonl line may not be longer than this (a 64 MiB line is
 * already a long-context prompt of some ten million tokens). */
#define EV_SUITE_MAX_LINE ((size_t)64 << 20)
/* A rendered prompt template may not grow past this. */
#define EV_SUITE_MAX_RENDER ((size_t)256 << 20)
/* Attachments a sample may list. */
#define EV_SUITE_MAX_ATTACHMENTS 256
/* Stop strings in generation.stop. */
#define EV_SUITE_MAX_STOP 16
/* generation.epochs upper bound. */
#define EV_SUITE_MAX_EPOCHS 1000

/* Options with every zero field replaced by its default. */
void ev_suite_options_resolve(ev_suite_options *dst, const ev_suite_options *src);

/* Parses the samples file at `path` into s->samples, applying s's
 * system_prompt and prompt_template. `disp` names the file in errors
 * ("suite/samples.jsonl"). The file's bytes are fed to `hash` (may be
 * NULL). s->root must be set (the realpath of the attachment root). */
int ev_samples_parse(ev_suite *s, const char *path, const char *disp, const ev_suite_options *opt,
                     ev_sha256_ctx *hash);

/* A checker spec as JSON text: an object printed, or a bare type name
 * ("exact") turned into {"type":"exact"}. `what` prefixes errors. */
int ev_suite_checker_json(char **out, const cJSON *v, const char *what);

/* Frees one sample's members (not the sample itself). */
void ev_sample_clear(ev_sample *x);
void ev_message_clear(ev_message *m);

/* Resolves `rel` (relative to the folder `root`, itself a realpath) to an
 * absolute malloc'd path of an existing regular file inside root. Absolute
 * paths, ".." climbing out and symlinks resolving outside are EV_E_UNSAFE;
 * a missing file is EV_E_NOTFOUND. `what` prefixes the message. */
/* The same; a folder is accepted too when folder_ok (a video's frames). */
/* A tar or zip archive opened for reading with only the formats and
 * filters suites may come in (archive.c); NULL with the error set. */
struct archive;
struct archive *ev_suite_archive_open(const char *path);
int ev_suite_resolve_path_ex(char **out, const char *root, const char *rel, const char *what, bool folder_ok);

/* The part kind and MIME type that a file name's extension implies. */
ev_part_kind ev_part_kind_for_path(const char *path, const char **mime);

/* Checks a template's brace syntax without rendering it. */
int ev_template_check(const char *tmpl, const char *what);

/* A JSON number as text: integers without a fraction, others in the
 * shortest form that reads back the same. */
void ev_suite_num_text(char out[32], double v);

/* A name fit for a message: terminal controls become '?' (ev_term_clean), and a name longer
 * than 200 bytes is cut with "...". */
#define EV_SUITE_SHOW 204
void ev_suite_show(char out[EV_SUITE_SHOW], const char *s);


#endif
