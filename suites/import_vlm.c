/*
 * suites/import_vlm.c: multimodal benchmarks as published by the two
 * common toolkits, into suite folders (import.h): VLMEvalKit's TSV files
 * (base64 images in a column, options in columns A, B, ...) and
 * lmms-eval-style JSON Lines. Multiple-choice questions can be imported
 * circularly: one sample per rotation of the options, all sharing a
 * metadata "circular_group" so that the summary's circular score counts a
 * question right only when every rotation is.
 */
#include "suites/import.h"
#include "suites/suites_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/text.h"

#define MAX_OPTIONS 26
#define MAX_IMAGES 16                          /* images of one question */
#define MAX_IMAGE_BYTES ((size_t)64 << 20)     /* one decoded image */
#define MAX_FILE ((size_t)8 << 30)             /* a TSV or JSONL file */

/* One question, whatever file it came from (strings borrowed). */
typedef struct {
	const char *id, *question, *hint, *answer, *category, *split;
	const char *options[MAX_OPTIONS];
	int n_options;
	const uint8_t *img[MAX_IMAGES];
	size_t img_len[MAX_IMAGES];
	int n_img;
	size_t line;
} question;

typedef struct {
	const char *file, *img_dir, *img_rel; /* images written to img_dir, named img_rel/... in samples */
	bool circular;
	ev_import_ctx ic;
	long n_questions, n_images;
} writer;

static const char *image_ext(const uint8_t *d, size_t n)
{
	if (n > 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8))
		return "png";
	if (n > 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
		return "jpg";
	if (n > 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6)))
		return "gif";
	if (n > 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
		return "webp";
	return NULL;
}

/* A file name part from an id: letters, digits, '-', '_', '.'; others '_'. */
static void safe_name(char *out, size_t cap, const char *id)
{
	size_t o = 0;
	for (const char *p = id; *p && o + 1 < cap; p++)
		out[o++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		                           *p == '_'
		                   ? *p
		                   : '_';
	out[o] = 0;
}

/* The user turn: the images, then hint, question, options (rotated by
 * `rot`) and what to answer with. */
static int write_sample(writer *w, const question *q, const char *const *img_paths, int rot)
{
	ev_buf *b = &w->ic.out;
	char id[1100];
	if (rot)
		snprintf(id, sizeof id, "%s-c%d", q->id, rot);
	else
		snprintf(id, sizeof id, "%s", q->id);
	char where[512];
	snprintf(where, sizeof where, "%s:%zu", w->file, q->line);
	int rc = ev_import_keep_id(&w->ic, id, where);
	ev_buf text = EV_BUF_INIT((size_t)64 << 20);
	if (!rc && q->hint)
		rc = ev_buf_printf(&text, "Hint: %s\n", q->hint);
	if (!rc)
		rc = ev_buf_printf(&text, q->n_options ? "Question: %s\n" : "%s", q->question);
	int ans = -1;
	if (q->n_options) {
		for (int k = 0; k < q->n_options; k++)
			if (q->answer[0] == 'A' + k && !q->answer[1])
				ans = k;
		if (!rc)
			rc = ev_buf_puts(&text, "Options:\n");
		for (int k = 0; !rc && k < q->n_options; k++)
			rc = ev_buf_printf(&text, "%c. %s\n", 'A' + k, q->options[(k + rot) % q->n_options]);
		if (!rc)
			rc = ev_buf_puts(&text, "Answer with the letter of the right option.");
	}
	if (!rc)
		rc = ev_buf_printf(b, "{\"id\":");
	if (!rc)
		rc = ev_json_buf_str(b, id);
	if (!rc)
		rc = ev_buf_puts(b, ",\"messages\":[{\"role\":\"user\",\"content\":[");
	for (int k = 0; !rc && k < q->n_img; k++) {
		rc = ev_buf_puts(b, "{\"type\":\"image\",\"path\":");
		if (!rc)
			rc = ev_json_buf_str(b, img_paths[k]);
		if (!rc)
			rc = ev_buf_puts(b, "},");
	}
	if (!rc)
		rc = ev_buf_puts(b, "{\"type\":\"text\",\"text\":");
	if (!rc)
		rc = ev_json_buf_str(b, text.data ? text.data : "");
	if (!rc)
		rc = ev_buf_puts(b, "}]}],\"target\":");
	if (!rc && q->n_options) {
		/* the right option's letter after the rotation */
		char t[2] = {(char)('A' + (ans - rot + q->n_options) % q->n_options), 0};
		rc = ev_json_buf_str(b, t);
		if (!rc)
			rc = ev_buf_printf(b, ",\"checker\":{\"type\":\"choice\",\"letters\":\"%.*s\"}", q->n_options,
			                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
	} else if (!rc) {
		rc = ev_json_buf_str(b, q->answer);
	}
	if (!rc)
		rc = ev_buf_puts(b, ",\"metadata\":{\"source_id\":");
	if (!rc)
		rc = ev_json_buf_str(b, q->id);
	if (!rc && q->category) {
		rc = ev_buf_puts(b, ",\"category\":");
		if (!rc)
			rc = ev_json_buf_str(b, q->category);
	}
	if (!rc && q->split) {
		rc = ev_buf_puts(b, ",\"split\":");
		if (!rc)
			rc = ev_json_buf_str(b, q->split);
	}
	if (!rc && w->circular && q->n_options > 1) {
		rc = ev_buf_puts(b, ",\"circular_group\":");
		if (!rc)
			rc = ev_json_buf_str(b, q->id);
		if (!rc)
			rc = ev_buf_printf(b, ",\"rotation\":%d", rot);
	}
	if (!rc)
		rc = ev_buf_puts(b, "}}\n");
	ev_buf_free(&text);
	return rc;
}

/* Checks a question, writes its images, and its sample(s). */
static int add_question(writer *w, const question *q)
{
	char where[512];
	snprintf(where, sizeof where, "%s:%zu", w->file, q->line);
	if (!q->id || !*q->id)
		return ev_error_set(EV_E_INVALID, "%s: no id (index)", where);
	if (!q->question)
		return ev_error_set(EV_E_INVALID, "%s: question: missing", where);
	if (!q->answer || !*q->answer)
		return ev_error_set(EV_E_INVALID, "%s: answer: missing (a question without its answer cannot be scored)",
		                    where);
	if (q->n_options) {
		if (q->n_options < 2)
			return ev_error_set(EV_E_INVALID, "%s: one option only", where);
		if (!(q->answer[0] >= 'A' && q->answer[0] < 'A' + q->n_options && !q->answer[1]))
			return ev_error_set(EV_E_INVALID, "%s: answer: \"%.40s\" is not the letter of one of the %d options", where,
			                    q->answer, q->n_options);
	}
	char *paths[MAX_IMAGES] = {0};
	int rc = 0;
	for (int k = 0; k < q->n_img && !rc; k++) {
		const char *ext = image_ext(q->img[k], q->img_len[k]);
		if (!ext) {
			rc = ev_error_set(EV_E_INVALID, "%s: image %d is not a PNG, JPEG, GIF or WebP file", where, k + 1);
			break;
		}
		char nm[160];
		safe_name(nm, sizeof nm, q->id);
		char *full = ev_asprintf("%s/%s-%ld.%s", w->img_dir, nm, w->n_images, ext);
		paths[k] = ev_asprintf("%s/%s-%ld.%s", w->img_rel, nm, w->n_images, ext);
		w->n_images++;
		rc = !full || !paths[k] ? ev_error_set(EV_E_NOMEM, "out of memory")
		                        : ev_file_write(full, q->img[k], q->img_len[k]);
		free(full);
	}
	int rots = w->circular && q->n_options > 1 ? q->n_options : 1;
	for (int r = 0; r < rots && !rc; r++)
		rc = write_sample(w, q, (const char *const *)paths, r);
	for (int k = 0; k < q->n_img; k++)
		free(paths[k]);
	w->n_questions++;
	return rc;
}

/* ---- VLMEvalKit TSV ---------------------------------------------------------- */

/* The next TSV record's fields (pandas' quoting: a field in double quotes
 * may hold tabs, newlines and doubled quotes), NUL-terminated in place. */
static int tsv_record(char **pos, char *end, char **fields, int max, int *n, size_t *line, const char *file)
{
	char *p = *pos;
	*n = 0;
	for (;;) {
		if (*n == max)
			return ev_error_set(EV_E_LIMIT, "%s:%zu: more than %d columns", file, *line, max);
		char *out = p, *start = p;
		if (p < end && *p == '"') {
			p++;
			for (;;) {
				if (p >= end)
					return ev_error_set(EV_E_PARSE, "%s:%zu: a quoted field is not closed", file, *line);
				if (*p == '"' && p + 1 < end && p[1] == '"') {
					*out++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					break;
				} else {
					if (*p == '\n')
						(*line)++;
					*out++ = *p++;
				}
			}
			if (p < end && *p != '\t' && *p != '\n' && *p != '\r')
				return ev_error_set(EV_E_PARSE, "%s:%zu: text after a closing quote", file, *line);
		} else {
			while (p < end && *p != '\t' && *p != '\n')
				p++;
			out = p;
			if (out > start && out[-1] == '\r')
				out--;
		}
		char sep = p < end ? *p : '\n';
		if (sep == '\r' && p + 1 < end && p[1] == '\n')
			p++, sep = '\n';
		*out = 0;
		fields[(*n)++] = start;
		if (p < end)
			p++;
		if (sep == '\n' || p >= end) {
			*pos = p;
			return 0;
		}
	}
}

static bool missing(const char *v)
{
	return !v || !*v || !strcmp(v, "nan") || !strcmp(v, "NaN") || !strcmp(v, "None");
}

/* An image cell: base64 (one image), a Python-style list of them
 * ("['...', '...']"), or (64 bytes or fewer) another row's index. */
typedef struct {
	char **index, **image;
	size_t n;
} image_map;

static const char *resolve_ref(const image_map *m, const char *cell)
{
	if (strlen(cell) > 64)
		return cell;
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->index[i], cell))
			return strlen(m->image[i]) > 64 ? m->image[i] : NULL;
	return NULL;
}

static int decode_images(question *q, uint8_t **owned, const char *cell, const char *where)
{
	char *copy = ev_strdup(cell);
	if (!copy)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	char *parts[MAX_IMAGES];
	int np = 0;
	if (copy[0] == '[') { /* ['b64', 'b64'] */
		for (char *p = copy; *p && np < MAX_IMAGES + 1;) {
			char *a = strpbrk(p, "'\"");
			if (!a)
				break;
			char *b = strchr(a + 1, *a);
			if (!b)
				break;
			*b = 0;
			if (np == MAX_IMAGES) {
				free(copy);
				return ev_error_set(EV_E_LIMIT, "%s: image: more than %d images", where, MAX_IMAGES);
			}
			parts[np++] = a + 1;
			p = b + 1;
		}
	} else {
		parts[np++] = copy;
	}
	int rc = 0;
	for (int k = 0; k < np && !rc; k++) {
		unsigned char *d = NULL;
		size_t n = 0;
		char what[600];
		snprintf(what, sizeof what, "%s: image %d", where, k + 1);
		if ((rc = ev_base64_decode(&d, &n, parts[k], strlen(parts[k]), MAX_IMAGE_BYTES, what)))
			break;
		owned[q->n_img] = d;
		q->img[q->n_img] = d, q->img_len[q->n_img] = n;
		q->n_img++;
	}
	free(copy);
	return rc;
}

static int col(char **names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

/* Writes the suite folder: the images staged in a private folder first,
 * moved into place with the samples when everything read. */
static int finish(writer *w, const char *out_dir, const char *stage, const char *suite_json)
{
	int rc = ev_import_unique_ids((const char *const *)w->ic.ids, w->ic.lines, w->ic.n, w->file);
	if (!rc && !w->ic.n)
		rc = ev_error_set(EV_E_INVALID, "%s: no questions", w->file);
	char *img = ev_asprintf("%s/images", out_dir);
	if (!rc && !img)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = ev_rmtree(img, 0);
	if (!rc && rename(stage, img) != 0)
		rc = ev_error_set(EV_E_IO, "%s: cannot move the images into place: %s", img, strerror(errno));
	if (!rc)
		rc = ev_import_write_suite(out_dir, suite_json, w->ic.out.data ? w->ic.out.data : "", w->ic.out.len);
	free(img);
	return rc;
}

static int suite_json(char **out, const char *file, const char *fmt, bool circular)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	char name[128];
	size_t n = strcspn(base, ".");
	snprintf(name, sizeof name, "%.*s", (int)(n < 100 ? n : 100), base);
	for (char *p = name; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	ev_buf b = EV_BUF_INIT(4096);
	int rc = ev_buf_puts(&b, "{\"name\":");
	if (!rc)
		rc = ev_json_buf_str(&b, name);
	if (!rc)
		rc = ev_buf_printf(&b,
		                   ",\"version\":\"1\",\"kind\":\"multimodal\",\"description\":\"imported from %s%s\","
		                   "\"generation\":{\"max_tokens\":32,\"temperature\":0},\"checker\":{\"type\":\"exact\"}}\n",
		                   fmt, circular ? ", circular (every rotation of the options a sample)" : "");
	*out = rc ? NULL : ev_buf_detach(&b, NULL);
	ev_buf_free(&b);
	return rc;
}

static int stage_dir(char **stage, const char *out_dir)
{
	int rc = ev_mkdir_p(out_dir);
	if (rc)
		return rc;
	*stage = ev_asprintf("%s/.images-XXXXXX", out_dir);
	if (!*stage)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (!mkdtemp(*stage))
		return ev_error_set(EV_E_IO, "%s: cannot make a staging folder: %s", out_dir, strerror(errno));
	return 0;
}

int ev_import_vlmevalkit(const char *tsv, const char *out_dir, bool circular)
{
	char *text = NULL, *stage = NULL, *sj = NULL;
	size_t len = 0;
	int rc = ev_import_read(&text, &len, tsv, MAX_FILE);
	if (rc)
		return rc;
	writer w = {.file = tsv, .circular = circular, .img_rel = "images"};
	ev_buf_init(&w.ic.out, (size_t)16 << 30);
	image_map m = {0};
	enum { MAXC = 64 };
	char *hdr[MAXC], *f[MAXC];
	int nh = 0, nf = 0;
	size_t line = 1;
	char *pos = text, *end = text + len;
	/* rows are kept as parsed (pointers into text) for the image references */
	char ***rows = NULL;
	size_t *row_line = NULL, nrows = 0, cap = 0;
	if ((rc = tsv_record(&pos, end, hdr, MAXC, &nh, &line, tsv)))
		goto done;
	int c_index = col(hdr, nh, "index"), c_q = col(hdr, nh, "question"), c_img = col(hdr, nh, "image");
	int c_ans = col(hdr, nh, "answer"), c_hint = col(hdr, nh, "hint"), c_cat = col(hdr, nh, "category");
	int c_split = col(hdr, nh, "split"), c_l2 = col(hdr, nh, "l2-category");
	if (c_index < 0 || c_q < 0 || c_ans < 0) {
		rc = ev_error_set(EV_E_INVALID, "%s:1: the header needs index, question and answer columns (VLMEvalKit's TSV)",
		                  tsv);
		goto done;
	}
	while (pos < end) {
		size_t at = ++line;
		if ((rc = tsv_record(&pos, end, f, MAXC, &nf, &line, tsv)))
			goto done;
		if (nf == 1 && !*f[0])
			continue; /* a blank line */
		if (nf != nh) {
			rc = ev_error_set(EV_E_PARSE, "%s:%zu: %d fields for %d columns", tsv, at, nf, nh);
			goto done;
		}
		if (EV_GROW(rows, cap, nrows + 1) || !(rows[nrows] = malloc((size_t)nf * sizeof(char *)))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		memcpy(rows[nrows], f, (size_t)nf * sizeof(char *));
		size_t *nl = realloc(row_line, (nrows + 1) * sizeof *nl);
		if (!nl) {
			free(rows[nrows]);
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		row_line = nl;
		row_line[nrows++] = at;
	}
	if (c_img >= 0) {
		m.index = calloc(nrows ? nrows : 1, sizeof *m.index);
		m.image = calloc(nrows ? nrows : 1, sizeof *m.image);
		if (!m.index || !m.image) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		for (size_t i = 0; i < nrows; i++)
			m.index[i] = rows[i][c_index], m.image[i] = rows[i][c_img];
		m.n = nrows;
	}
	if ((rc = stage_dir(&stage, out_dir)))
		goto done;
	w.img_dir = stage;
	for (size_t i = 0; i < nrows && !rc; i++) {
		char **r = rows[i];
		question q = {.id = r[c_index], .question = r[c_q], .answer = r[c_ans], .line = row_line[i]};
		q.hint = c_hint >= 0 && !missing(r[c_hint]) ? r[c_hint] : NULL;
		q.category = c_cat >= 0 && !missing(r[c_cat]) ? r[c_cat] : NULL;
		q.split = c_split >= 0 && !missing(r[c_split]) ? r[c_split] : c_l2 >= 0 && !missing(r[c_l2]) ? r[c_l2] : NULL;
		for (int k = 0; k < MAX_OPTIONS; k++) {
			char nm[2] = {(char)('A' + k), 0};
			int c = col(hdr, nh, nm);
			if (c < 0 || missing(r[c]))
				break;
			q.options[q.n_options++] = r[c];
		}
		uint8_t *owned[MAX_IMAGES] = {0};
		char where[512];
		snprintf(where, sizeof where, "%s:%zu", tsv, q.line);
		if (c_img >= 0 && !missing(r[c_img])) {
			const char *cell = resolve_ref(&m, r[c_img]);
			rc = cell ? decode_images(&q, owned, cell, where)
			          : ev_error_set(EV_E_INVALID, "%s: image: \"%.64s\" is neither base64 nor the index of a row "
			                                       "with an image",
			                         where, r[c_img]);
		}
		if (!rc)
			rc = add_question(&w, &q);
		for (int k = 0; k < MAX_IMAGES; k++)
			free(owned[k]);
	}
	if (!rc && !(rc = suite_json(&sj, tsv, "a VLMEvalKit TSV", circular)))
		rc = finish(&w, out_dir, stage, sj);
done:
	if (rc && stage)
		ev_rmtree(stage, 0);
	for (size_t i = 0; i < nrows; i++)
		free(rows[i]);
	free(rows), free(row_line), free(m.index), free(m.image), free(stage), free(sj), free(text);
	ev_import_ctx_clear(&w.ic);
	return rc;
}

/* ---- lmms-eval-style JSON Lines ------------------------------------------------ */

typedef struct {
	writer *w;
	const char *base_dir; /* the file's folder: relative image paths */
} lmms_ctx;

static const char *first_str(const cJSON *o, const char *const *keys, char *num, size_t cap)
{
	for (size_t i = 0; keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
		if (cJSON_IsString(v))
			return v->valuestring;
		if (cJSON_IsNumber(v)) {
			ev_suite_num_text(num, v->valuedouble);
			(void)cap;
			return num;
		}
	}
	return NULL;
}

/* An image value: a data: URL, bare base64, or a path relative to the
 * file's folder (inside it). */
static int lmms_image(question *q, uint8_t **owned, const char *v, const lmms_ctx *c, const char *where)
{
	if (q->n_img == MAX_IMAGES)
		return ev_error_set(EV_E_LIMIT, "%s: more than %d images", where, MAX_IMAGES);
	unsigned char *d = NULL;
	size_t n = 0;
	int rc;
	if (ev_str_starts(v, "data:")) {
		const char *comma = strstr(v, ";base64,");
		if (!comma)
			return ev_error_set(EV_E_INVALID, "%s: image: a data: URL that is not base64", where);
		rc = ev_base64_decode(&d, &n, comma + 8, strlen(comma + 8), MAX_IMAGE_BYTES, where);
	} else if (strlen(v) > 256 && !strchr(v, '/')) {
		rc = ev_base64_decode(&d, &n, v, strlen(v), MAX_IMAGE_BYTES, where);
	} else {
		char *path = NULL;
		if ((rc = ev_suite_resolve_path(&path, c->base_dir, v, where)))
			return rc;
		rc = ev_file_read((char **)&d, &n, path, MAX_IMAGE_BYTES);
		free(path);
	}
	if (rc)
		return rc;
	owned[q->n_img] = d;
	q->img[q->n_img] = d, q->img_len[q->n_img] = n;
	q->n_img++;
	return 0;
}

static int lmms_record(void *ctx, const cJSON *o, const char *where)
{
	const lmms_ctx *c = ctx;
	static const char *const id_keys[] = {"id", "question_id", "index", "doc_id", NULL};
	static const char *const q_keys[] = {"question", "prompt", "text", NULL};
	static const char *const a_keys[] = {"answer", "target", "gt_answer", "label", NULL};
	char num[3][64];
	question q = {0};
	const char *colon = strrchr(where, ':');
	q.line = colon ? (size_t)strtoul(colon + 1, NULL, 10) : 0;
	q.id = first_str(o, id_keys, num[0], 64);
	q.question = first_str(o, q_keys, num[1], 64);
	q.answer = first_str(o, a_keys, num[2], 64);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hint");
	q.hint = cJSON_IsString(h) && !missing(h->valuestring) ? h->valuestring : NULL;
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(o, "category");
	q.category = cJSON_IsString(cat) ? cat->valuestring : NULL;
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(o, "options");
	if (!opts)
		opts = cJSON_GetObjectItemCaseSensitive(o, "choices");
	if (cJSON_IsArray(opts) || cJSON_IsObject(opts)) {
		const cJSON *x;
		int k = 0;
		cJSON_ArrayForEach(x, opts)
		{
			if (k == MAX_OPTIONS)
				return ev_error_set(EV_E_LIMIT, "%s: options: more than %d", where, MAX_OPTIONS);
			if (cJSON_IsObject(opts) && !(x->string[0] == 'A' + k && !x->string[1]))
				return ev_error_set(EV_E_INVALID, "%s: options: keys must be A, B, C, ... in order", where);
			if (!cJSON_IsString(x))
				return ev_error_set(EV_E_INVALID, "%s: options[%d]: expected a string", where, k);
			q.options[k++] = x->valuestring;
		}
		q.n_options = k;
	} else if (opts && !cJSON_IsNull(opts)) {
		return ev_error_set(EV_E_INVALID, "%s: options: expected a list or an object of letters", where);
	}
	/* an answer given as the option's text or its index becomes its letter */
	char letter[2] = {0, 0};
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(o, "answer");
	if (q.n_options && cJSON_IsNumber(av) && av->valuedouble >= 0 && av->valuedouble < q.n_options &&
	    av->valuedouble == (int)av->valuedouble)
		letter[0] = (char)('A' + (int)av->valuedouble);
	for (int k = 0; q.n_options && q.answer && !letter[0] && k < q.n_options; k++)
		if (!strcmp(q.answer, q.options[k]) && !(q.answer[0] == 'A' + k && !q.answer[1]))
			letter[0] = (char)('A' + k);
	if (letter[0])
		q.answer = letter;
	uint8_t *owned[MAX_IMAGES] = {0};
	int rc = 0;
	const cJSON *img = cJSON_GetObjectItemCaseSensitive(o, "image");
	if (!img)
		img = cJSON_GetObjectItemCaseSensitive(o, "image_path");
	const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(o, "images");
	if (cJSON_IsString(img))
		rc = lmms_image(&q, owned, img->valuestring, c, where);
	if (cJSON_IsArray(imgs)) {
		const cJSON *x;
		cJSON_ArrayForEach(x, imgs)
		{
			if (rc)
				break;
			rc = cJSON_IsString(x) ? lmms_image(&q, owned, x->valuestring, c, where)
			                       : ev_error_set(EV_E_INVALID, "%s: images: expected strings", where);
		}
	}
	if (!rc)
		rc = add_question(c->w, &q);
	for (int k = 0; k < MAX_IMAGES; k++)
		free(owned[k]);
	return rc;
}

int ev_import_lmms(const char *jsonl, const char *out_dir, bool circular)
{
	char *text = NULL, *stage = NULL, *sj = NULL, *dir = NULL;
	size_t len = 0;
	int rc = ev_import_read(&text, &len, jsonl, MAX_FILE);
	if (rc)
		return rc;
	writer w = {.file = jsonl, .circular = circular, .img_rel = "images"};
	ev_buf_init(&w.ic.out, (size_t)16 << 30);
	char *slash = strrchr(jsonl, '/');
	dir = slash ? ev_strndup(jsonl, (size_t)(slash - jsonl)) : ev_strdup(".");
	char *real = dir ? realpath(dir, NULL) : NULL;
	if (!real)
		rc = ev_error_set(EV_E_IO, "%s: cannot resolve its folder", jsonl);
	if (!rc)
		rc = stage_dir(&stage, out_dir);
	w.img_dir = stage;
	lmms_ctx c = {&w, real};
	if (!rc)
		rc = ev_import_each_object(text, len, jsonl, lmms_record, &c);
	if (!rc && !(rc = suite_json(&sj, jsonl, "lmms-eval-style JSON Lines", circular)))
		rc = finish(&w, out_dir, stage, sj);
	if (rc && stage)
		ev_rmtree(stage, 0);
	free(stage), free(sj), free(text), free(dir), free(real);
	ev_import_ctx_clear(&w.ic);
	return rc;
}
