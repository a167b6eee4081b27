/*
 * suites/import.h: importers of published data sets (BFCL, HumanEval,
 * MBPP) into suite folders, and the writer they share.
 */
#ifndef EV_SUITES_IMPORT_H
#define EV_SUITES_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "suites/suite.h"

/* ---- BFCL importer (suites/import_bfcl.c; owner: toolcall) ---------------- */

/* Turns a Berkeley Function Calling Leaderboard file (one JSON object a
 * line: id, question, function) and its possible answers (id,
 * ground_truth; NULL for irrelevance) into a suite folder `out_dir`
 * (created if absent): suite.json (name from the file, "BFCL_v3_simple.json"
 * -> "bfcl_v3_simple"; kind "tool-use"; checker {"type":"toolcall",
 * "category":"simple"}) and samples.jsonl: id, messages (the question's
 * first turn), tools (OpenAI format: dots in names become '_', BFCL types
 * become JSON Schema), tests {"functions", "ground_truth"} (BFCL's own,
 * for the checker) and metadata {"category", "source"}. Every question
 * needs an answer when `answers` is given. Errors name file:line and the
 * field; nothing is written then. */
int ev_import_bfcl(const char *questions, const char *answers, const char *out_dir);

/* ---- HumanEval and MBPP importers (suites/import_humaneval.c,
 * suites/import_mbpp.c; owner: sandbox) ------------------------------------ */

/* Turns the published HumanEval file (HumanEval.jsonl.gz, or the same
 * uncompressed: task_id, prompt, entry_point, canonical_solution, test)
 * into a suite folder `out_dir` (created if absent): suite.json (name
 * "humaneval", kind "coding", checker {"type":"humaneval"}) and
 * samples.jsonl: id = task_id, input = prompt, tests {"style":"humaneval",
 * "prompt","test","entry_point"}, metadata {"canonical_solution",
 * "entry_point"}. Errors name file:line and the field; nothing is written
 * then. */
int ev_import_humaneval(const char *jsonl_or_gz, const char *out_dir);

/* The same for MBPP (mbpp.jsonl, plain or compressed: task_id, text or
 * prompt, code, test_list, test_setup_code or test_imports,
 * challenge_test_list): name "mbpp", checker {"type":"mbpp"}; id = the
 * task_id as text; input = the text and the tests it must pass; tests
 * {"style":"mbpp","test_list","test_setup_code","challenge_test_list"};
 * metadata {"code"}. */
int ev_import_mbpp(const char *jsonl_or_gz, const char *out_dir);

/* Reads a whole file that may be compressed (gzip, zstd, xz, bzip2:
 * whatever libarchive's filters know; plain text passes through), at most
 * `max` bytes once decompressed (EV_E_LIMIT past that). *out is
 * NUL-terminated; free it with free(). */
int ev_import_read(char **out, size_t *len_out, const char *path, size_t max);

/* Calls fn for each non-blank line of a JSON Lines text with the parsed
 * object and "file:line" for errors; stops at the first non-zero return.
 * A line that is not a JSON object is an error naming file:line. */
int ev_import_each_object(const char *text, size_t len, const char *file,
                          int (*fn)(void *ctx, const cJSON *obj, const char *where), void *ctx);

/* Fails naming both lines ("file:12: task_id: duplicate \"x\" (first on
 * line 3)") when two of the n ids are equal; lines[i] is ids[i]'s line. */
int ev_import_unique_ids(const char *const *ids, const size_t *lines, size_t n, const char *file);

/* What an importer's record function builds: the samples.jsonl text and
 * every id with its line, for the duplicate check. */
typedef struct {
	ev_buf out;
	char **ids;
	size_t *lines;
	size_t n, cap, lines_cap;
} ev_import_ctx;

/* Keeps a copy of `id` and the line of `where` ("file:12"). */
int ev_import_keep_id(ev_import_ctx *c, const char *id, const char *where);
void ev_import_ctx_clear(ev_import_ctx *c);

/* An importer of a JSON Lines file: reads `path` (compressed or not, at
 * most max_file bytes), hands each object to record(ctx = an
 * ev_import_ctx, obj, "file:line"), checks the ids are unique and that
 * there was at least one, then writes suite_json and the samples into
 * out_dir. Nothing is written on failure. */
int ev_import_jsonl(const char *path, size_t max_file, int (*record)(void *ctx, const cJSON *obj, const char *where),
                    const char *suite_json, const char *out_dir);

/* Writes suite.json and samples.jsonl into `out_dir` (created if absent;
 * its parent must exist), each atomically. */
int ev_import_write_suite(const char *out_dir, const char *suite_json, const char *samples, size_t samples_len);

/* ---- multimodal importers (suites/import_vlm.c) ------------------------------ */

/* VLMEvalKit's TSV (as its data sets are published: a header, then a row a
 * question; pandas' quoting): columns index, question, answer (required),
 * image (base64, a list "['b64', ...]", or 64 bytes or fewer: the index of
 * a row holding the image), hint, A, B, C, ... (the options, up to the
 * first empty one), category, split or l2-category. Images are written to
 * out_dir/images/ (sniffed PNG, JPEG, GIF, WebP); a sample's user turn is
 * its images, then "Hint: ...", "Question: ...", "Options:" with "A. ..."
 * lines and "Answer with the letter of the right option."; multiple choice
 * uses the choice checker over the options' letters, other rows the
 * answer as an exact target. With `circular`, each multiple-choice question
 * becomes one sample per rotation of its options (ids "<index>",
 * "<index>-c1", ...; the target letter follows the right option; metadata
 * circular_group = index, rotation) so that the summary's circular score
 * counts a question right only when every rotation is. Errors name
 * file:line and the column; nothing is written then (images are staged
 * in a private folder and moved into place at the end). */
int ev_import_vlmevalkit(const char *tsv, const char *out_dir, bool circular);
/* lmms-eval-style JSON Lines: a line an object with an id (id,
 * question_id, index or doc_id), the question (question, prompt or text),
 * the answer (answer, target, gt_answer or label: a letter, the option's
 * text, or with options its 0-based index), optional options or choices
 * (a list, or an object keyed A, B, ...), hint, category, and images
 * (image or image_path: one; images: a list; each a path relative to the
 * file's folder and inside it, a data: URL, or bare base64). The same
 * suite as above. */
int ev_import_lmms(const char *jsonl, const char *out_dir, bool circular);

#endif