/*
 * suites/suite.h: the suite format and its loading.
 *
 * A suite is a folder or an archive (.tar, .tar.gz, .tar.zst, .zip) holding
 * suite.json and samples.jsonl with attachments beside them, or a bare
 * .jsonl file of {"id","input","target"} lines. Loading validates every
 * line and names file:line and the field in its errors. Archives are
 * extracted into a private temporary folder with no absolute paths, no
 * "..", no links leaving the bundle, and caps on entry count and size.
 *
 * The sample and message types below are plain data shared with scoring
 * and runners (read-only for them); the suite owns all their memory.
 */
#ifndef EV_SUITES_SUITE_H
#define EV_SUITES_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/result.h"

/* ---- the message model ------------------------------------------------- */

typedef enum {
	EV_PART_TEXT,
	EV_PART_IMAGE,
	EV_PART_VIDEO,
	EV_PART_DOCUMENT
} ev_part_kind;

/* One content part. Text parts carry `text`; attachments carry `path`
 * (absolute, inside the suite's root, checked at load) or `url`, and a MIME
 * type when known. A video part's path may name a folder of frames or an
 * archive of them (video.h); fps is the frames' rate (0: unknown, taken
 * as 1), sample_fps the rate to sample at (0: 1 a second, transformers'
 * default) and frames, when > 0, a fixed number of frames instead. */
typedef struct {
	ev_part_kind kind;
	char *text;
	char *path;
	char *url;
	char *mime;
	double fps, sample_fps;
	int frames;
} ev_part;

/* One chat message: role is "system", "user", "assistant" or "tool".
 * tool_calls_json is the OpenAI `tool_calls` array as JSON text (assistant
 * messages); tool_call_id and name belong to tool messages. */
typedef struct {
	char *role;
	ev_part *parts;
	size_t n_parts;
	char *tool_calls_json;
	char *tool_call_id;
	char *name;
} ev_message;

/* Generation settings. Unset fields keep the backend's defaults:
 * max_tokens 0, temperature/top_p < 0, has_seed false. */
typedef struct {
	int max_tokens;
	double temperature;
	double top_p;
	bool has_seed;
	int64_t seed;
	char **stop;
	size_t n_stop;
	int epochs; /* >= 1 */
	bool ignore_eos; /* generate up to max_tokens past end-of-sequence (engine backend;
	                    vLLM's extension of the same name, for load and length tests) */
	bool logprobs;   /* return each generated token's log-probability (engine backend) */
	int top_logprobs; /* with logprobs (and prompt_logprobs): that many alternatives a token, 0..20 */
	bool prompt_logprobs; /* also each prompt token's log-probability given those before (engine) */
	bool prompt_only;     /* generate nothing: only score the prompt (engine; with prompt_logprobs) */
	/* OpenAI's "reasoning_effort" sent with each request ("low", "medium",
	 * ...; evald run --effort); empty: not sent */
	char reasoning_effort[16];
} ev_gen;

#define EV_GEN_INIT {.temperature = -1.0, .top_p = -1.0, .epochs = 1}

typedef struct {
	char *id;
	ev_message *messages; /* after the prompt template was applied */
	size_t n_messages;
	char **targets;       /* acceptable answers (a string target is one) */
	size_t n_targets;
	char *target_json;    /* the target as written (string, number, list, object) */
	char *tests_json;     /* "tests" as JSON text, or NULL */
	char *tools_json;     /* OpenAI tool definitions array as JSON, or NULL */
	char *metadata_json;  /* "metadata" object as JSON text, or NULL */
	char *checker_json;   /* a per-sample checker override, or NULL */
	/* "choices": the options of a multiple-choice sample, scored by their
	 * log-likelihood after the prompt (checker "loglikelihood"); else none */
	char **choices;
	size_t n_choices;
	size_t line;          /* line in samples.jsonl (1-based) */
} ev_sample;

/* At most this many choices a sample. */
#define EV_SUITE_MAX_CHOICES 64

/* ---- suites -------------------------------------------------------------- */

typedef struct {
	char *name;
	char *version;
	char *kind;            /* "qa", "coding", "tool-use", "long-context", ... */
	char *root;            /* folder the samples and attachments are in */
	char *content_hash;    /* sha256 over suite.json and samples.jsonl */
	char *system_prompt;   /* optional, prepended as a system message */
	char *prompt_template; /* "{input}"-style template, or NULL */
	char *checker_json;    /* the suite's checker spec (scoring parses it) */
	ev_gen gen;
	ev_sample *samples;
	size_t n_samples;
	/* private */
	char *extracted_dir;   /* removed by ev_suite_free when set */
} ev_suite;

typedef struct {
	size_t max_archive_bytes;  /* total uncompressed bytes of an archive */
	size_t max_entries;        /* entries in an archive */
	size_t max_file_bytes;     /* one samples.jsonl or suite.json */
	size_t max_samples;
	const char *tmp_dir;       /* where archives are extracted (TMPDIR) */
} ev_suite_options;

#define EV_SUITE_OPTIONS_INIT                                                                          \
	{.max_archive_bytes = (size_t)4 << 30, .max_entries = 100000, .max_file_bytes = (size_t)2 << 30,        \
	 .max_samples = 10000000}

/* Loads a suite from a folder, an archive, or a bare .jsonl file. The
 * suite's name defaults to the file or folder name without extension.
 * On failure *out is NULL and the message names file:line and field. */
int ev_suite_load(ev_suite **out, const char *path, const ev_suite_options *opt);
void ev_suite_free(ev_suite *s);

/* Substitutes {field} references in a template with the sample's fields
 * ("input", and any string/number field of the sample line or its
 * metadata); "{{" and "}}" are literal braces. An unknown field is an
 * error naming it. The result is malloc'd. */
int ev_template_render(char **out, const char *tmpl, const cJSON *fields, const char *what);

/* The text of a message: its text parts joined (borrowed pointers copied
 * into a malloc'd string). */
char *ev_message_text(const ev_message *m);

/* Extracts an archive into `dest` under the safety rules above. */
int ev_archive_extract(const char *archive, const char *dest, const ev_suite_options *opt);

/* A relative path resolved inside `root` (a realpath): refused when
 * absolute, when it climbs out with "..", or when it resolves (through
 * links) outside root (EV_E_UNSAFE); EV_E_NOTFOUND when missing,
 * EV_E_INVALID when not a regular file. *out is the resolved path
 * (malloc'd); `what` names the field in errors. */
int ev_suite_resolve_path(char **out, const char *root, const char *rel, const char *what);

#endif
