/*
 * suites/gen_vision.c: the multimodal suite (README "Multimodal
 * generator"): pictures drawn with raster.c, questions whose answers
 * follow from the drawing, a checker each that needs no judge.
 */
#include "suites/gen.h"
#include "suites/import.h"
#include "suites/raster.h"

#include <stdlib.h>
#include <string.h>

#include "base/fs.h"

static const struct {
	const char *name;
	uint8_t rgb[3];
} palette[] = {
	{"red", {220, 30, 30}},     {"green", {30, 160, 40}},  {"blue", {30, 70, 225}}, {"yellow", {240, 205, 20}},
	{"orange", {245, 130, 20}}, {"purple", {140, 40, 170}}, {"black", {20, 20, 20}},
};
#define NCOL ((int)(sizeof palette / sizeof palette[0]))

static const uint8_t white[3] = {255, 255, 255}, grid_grey[3] = {215, 215, 215}, ink[3] = {20, 20, 20};
static const char *const shape_names[3] = {"circle", "square", "triangle"};

static const char *const task_names[] = {"count",   "colour",  "position",    "digits",     "words",
                                         "chart",   "compare", "video-order", "video-count"};
#define NTASK ((int)(sizeof task_names / sizeof task_names[0]))

static const char *const words[] = {"APPLE", "BRIDGE", "CANDLE", "DESERT", "ENGINE", "FOREST", "GARDEN", "HARBOR",
                                    "ISLAND", "JACKET", "KETTLE", "LADDER", "MARKET", "NEEDLE", "ORANGE", "PENCIL",
                                    "QUARTZ", "RIVER",  "SILVER", "TICKET", "UMBRELLA", "VALLEY", "WINDOW", "YELLOW",
                                    "ZEBRA",  "CLOUD",  "STONE",  "PLANET", "MIRROR", "ROCKET"};
#define NWORDS ((int)(sizeof words / sizeof words[0]))

bool ev_gen_multimodal_task_known(const char *name)
{
	for (int i = 0; i < NTASK; i++)
		if (!strcmp(name, task_names[i]))
			return true;
	return false;
}

typedef struct {
	const char *dir; /* the suite folder */
	int side;
	ev_buf *out;     /* samples.jsonl */
} gen;

static void shape(ev_canvas *c, int kind, int cx, int cy, int r, const uint8_t col[3])
{
	if (kind == 0)
		ev_canvas_circle(c, cx, cy, r, col);
	else if (kind == 1)
		ev_canvas_rect(c, cx - r, cy - r, cx + r, cy + r, col);
	else
		ev_canvas_triangle(c, cx, cy, r, col);
}

/* n distinct cells of a 4 x 4 grid in random order, into cells[] */
static void pick_cells(ev_rng *r, int *cells, int n)
{
	int all[16];
	for (int i = 0; i < 16; i++)
		all[i] = i;
	for (int i = 0; i < n; i++) {
		int j = i + (int)ev_rng_below(r, (uint64_t)(16 - i));
		int t = all[i];
		all[i] = all[j], all[j] = t;
		cells[i] = all[i];
	}
}

/* a shape in grid cell `cell`: radius about a third of the cell, jittered */
static void shape_in_cell(ev_canvas *c, ev_rng *r, int cell, int kind, const uint8_t col[3])
{
	int cs = c->w / 4, rad = cs * 30 / 100, slack = cs / 2 - rad - 2;
	int cx = (cell % 4) * cs + cs / 2 + (slack > 0 ? (int)ev_rng_below(r, (uint64_t)(2 * slack + 1)) - slack : 0);
	int cy = (cell / 4) * cs + cs / 2 + (slack > 0 ? (int)ev_rng_below(r, (uint64_t)(2 * slack + 1)) - slack : 0);
	shape(c, kind, cx, cy, rad, col);
}

static int save(const gen *g, const ev_canvas *c, const char *rel)
{
	char *path = ev_asprintf("%s/%s", g->dir, rel);
	if (!path)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_canvas_write_png(c, path);
	free(path);
	return rc;
}

/* one samples.jsonl line; `parts` is the user content's list (JSON text)
 * when the sample has a video, else the images go as attachments */
static int emit(const gen *g, const char *id, const char *question, const char *const *images, int nimg,
                const char *video, const char *target, const char *checker, const char *meta)
{
	ev_buf *b = g->out;
	int rc = ev_buf_printf(b, "{\"id\":\"%s\",", id);
	if (!rc && video) {
		rc = ev_buf_printf(b, "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video\",\"path\":\"%s\","
		                      "\"fps\":2},{\"type\":\"text\",\"text\":",
		                   video);
		if (!rc)
			rc = ev_json_buf_str(b, question);
		if (!rc)
			rc = ev_buf_puts(b, "}]}],");
	} else if (!rc) {
		rc = ev_buf_puts(b, "\"input\":");
		if (!rc)
			rc = ev_json_buf_str(b, question);
		if (!rc)
			rc = ev_buf_puts(b, ",\"attachments\":[");
		for (int i = 0; !rc && i < nimg; i++)
			rc = ev_buf_printf(b, "%s\"%s\"", i ? "," : "", images[i]);
		if (!rc)
			rc = ev_buf_puts(b, "],");
	}
	if (!rc)
		rc = ev_buf_puts(b, "\"target\":");
	if (!rc)
		rc = ev_json_buf_str(b, target);
	if (!rc)
		rc = ev_buf_printf(b, ",\"checker\":%s,\"metadata\":%s}\n", checker, meta);
	return rc;
}

#define NUMERIC "{\"type\":\"numeric\",\"tolerance\":0}"
#define EXACT "{\"type\":\"exact\"}"

static int task_count(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int kind = (int)ev_rng_below(r, 3), other = (kind + 1 + (int)ev_rng_below(r, 2)) % 3;
	int n = 1 + (int)ev_rng_below(r, 9), m = (int)ev_rng_below(r, 5), cells[16];
	pick_cells(r, cells, n + m);
	for (int i = 0; i < n + m; i++)
		shape_in_cell(c, r, cells[i], i < n ? kind : other, palette[ev_rng_below(r, NCOL)].rgb);
	char rel[160], q[200], t[8], meta[200];
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(q, sizeof q, "How many %ss are in the image? Answer with a number only.", shape_names[kind]);
	snprintf(t, sizeof t, "%d", n);
	snprintf(meta, sizeof meta, "{\"task\":\"count\",\"shape\":\"%s\",\"count\":%d,\"others\":%d,\"other_shape\":\"%s\"}",
	         shape_names[kind], n, m, shape_names[other]);
	const char *imgs[1] = {rel};
	int rc = save(g, c, rel);
	return rc ? rc : emit(g, id, q, imgs, 1, NULL, t, NUMERIC, meta);
}

static int task_colour(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int kind = (int)ev_rng_below(r, 3), other = (kind + 1 + (int)ev_rng_below(r, 2)) % 3;
	int col = (int)ev_rng_below(r, NCOL), col2 = (col + 1 + (int)ev_rng_below(r, NCOL - 1)) % NCOL;
	int S = c->w, left = (int)ev_rng_below(r, 2), big = S * 22 / 100, small = S * 12 / 100;
	shape(c, kind, left ? S / 4 + 4 : 3 * S / 4 - 4, S / 2, big, palette[col].rgb);
	shape(c, other, left ? 3 * S / 4 + 8 : S / 4 - 8, S / 2 + (int)ev_rng_below(r, (uint64_t)(S / 4)) - S / 8, small,
	      palette[col2].rgb);
	char rel[160], q[200], meta[200];
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(q, sizeof q, "What colour is the %s? Answer with one word.", shape_names[kind]);
	snprintf(meta, sizeof meta, "{\"task\":\"colour\",\"shape\":\"%s\",\"colour\":\"%s\",\"other\":\"%s %s\"}",
	         shape_names[kind], palette[col].name, palette[col2].name, shape_names[other]);
	const char *imgs[1] = {rel};
	int rc = save(g, c, rel);
	return rc ? rc : emit(g, id, q, imgs, 1, NULL, palette[col].name, EXACT, meta);
}

static int task_position(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	static const char *const where[4] = {"top left", "top right", "bottom left", "bottom right"};
	int cols[NCOL];
	for (int i = 0; i < NCOL; i++)
		cols[i] = i;
	for (int i = 0; i < 4; i++) { /* four distinct colours */
		int j = i + (int)ev_rng_below(r, (uint64_t)(NCOL - i)), t = cols[i];
		cols[i] = cols[j], cols[j] = t;
	}
	int S = c->w, rad = S * 14 / 100, j = S / 16;
	for (int qd = 0; qd < 4; qd++) {
		int cx = (qd % 2) * S / 2 + S / 4 + (int)ev_rng_below(r, (uint64_t)(2 * j + 1)) - j;
		int cy = (qd / 2) * S / 2 + S / 4 + (int)ev_rng_below(r, (uint64_t)(2 * j + 1)) - j;
		shape(c, (int)ev_rng_below(r, 3), cx, cy, rad, palette[cols[qd]].rgb);
	}
	int ask = (int)ev_rng_below(r, 4);
	char rel[160], q[240], meta[240];
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(q, sizeof q,
	         "Where in the image is the %s shape: top left, top right, bottom left or bottom right? "
	         "Answer with one of those.",
	         palette[cols[ask]].name);
	snprintf(meta, sizeof meta,
	         "{\"task\":\"position\",\"colour\":\"%s\",\"quadrants\":[\"%s\",\"%s\",\"%s\",\"%s\"]}",
	         palette[cols[ask]].name, palette[cols[0]].name, palette[cols[1]].name, palette[cols[2]].name,
	         palette[cols[3]].name);
	const char *imgs[1] = {rel};
	int rc = save(g, c, rel);
	return rc ? rc : emit(g, id, q, imgs, 1, NULL, where[ask], EXACT, meta);
}

/* text centred on the canvas at the largest scale that fits, nudged */
static void centred_text(ev_canvas *c, ev_rng *r, const char *text)
{
	int n = (int)strlen(text), S = c->w;
	int sc = (S - 16) / (6 * n - 1);
	if (sc > S / 3 / 7)
		sc = S / 3 / 7;
	if (sc < 1)
		sc = 1;
	int w = ev_canvas_text_width(n, sc), h = 7 * sc;
	int sx = (S - w) / 2 > 8 ? (S - w) / 2 - 8 : 0, sy = (S - h) / 2 > 16 ? (S - h) / 2 - 16 : 0;
	int x = (S - w) / 2 + (sx ? (int)ev_rng_below(r, (uint64_t)(2 * sx + 1)) - sx : 0);
	int y = (S - h) / 2 + (sy ? (int)ev_rng_below(r, (uint64_t)(2 * sy + 1)) - sy : 0);
	ev_canvas_text(c, x, y, sc, text, ink);
}

static int task_digits(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int n = 3 + (int)ev_rng_below(r, 4);
	char t[8];
	t[0] = (char)('1' + ev_rng_below(r, 9));
	for (int i = 1; i < n; i++)
		t[i] = (char)('0' + ev_rng_below(r, 10));
	t[n] = 0;
	centred_text(c, r, t);
	char rel[160], meta[120];
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(meta, sizeof meta, "{\"task\":\"digits\",\"digits\":%d}", n);
	const char *imgs[1] = {rel};
	int rc = save(g, c, rel);
	return rc ? rc
	          : emit(g, id, "What number is written in the image? Answer with the digits only.", imgs, 1, NULL, t,
	                 EXACT, meta);
}

static int task_words(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	const char *w = words[ev_rng_below(r, NWORDS)];
	centred_text(c, r, w);
	char rel[160], meta[120], lower[16];
	size_t n = strlen(w);
	for (size_t i = 0; i <= n; i++)
		lower[i] = (char)(w[i] >= 'A' && w[i] <= 'Z' ? w[i] - 'A' + 'a' : w[i]);
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(meta, sizeof meta, "{\"task\":\"words\",\"letters\":%zu}", n);
	const char *imgs[1] = {rel};
	int rc = save(g, c, rel);
	return rc ? rc : emit(g, id, "What word is written in the image? Answer with the word only.", imgs, 1, NULL,
	                      lower, EXACT, meta);
}

static int task_chart(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int S = c->w, nb = 3 + (int)ev_rng_below(r, 3), v[5];
	int ts = S >= 336 ? 3 : S >= 168 ? 2 : 1; /* tick label scale */
	int left = ev_canvas_text_width(2, ts) + 6 * ts, bottom = 7 * ts + 6 * ts, top = 4 * ts;
	int x0 = left, x1 = S - 4 * ts, y0 = S - bottom, ph = y0 - top;
	for (int i = 0; i < nb; i++)
		v[i] = 1 + (int)ev_rng_below(r, 9);
	for (int k = 0; k <= 10; k++) { /* a grid line a unit, a label every two */
		int y = y0 - k * ph / 10;
		ev_canvas_rect(c, x0, y, x1, y + 1, k ? grid_grey : ink);
		if (k % 2 == 0) {
			char lab[4];
			snprintf(lab, sizeof lab, "%d", k);
			int w = ev_canvas_text_width((int)strlen(lab), ts);
			ev_canvas_text(c, x0 - 3 * ts - w, y - 7 * ts / 2, ts, lab, ink);
		}
	}
	ev_canvas_rect(c, x0, top, x0 + 1, y0 + 1, ink);
	int slot = (x1 - x0) / nb, bw = slot * 6 / 10;
	for (int i = 0; i < nb; i++) {
		int bx = x0 + i * slot + (slot - bw) / 2;
		ev_canvas_rect(c, bx, y0 - v[i] * ph / 10, bx + bw, y0, palette[2].rgb);
		char lab[2] = {(char)('A' + i), 0};
		ev_canvas_text(c, bx + bw / 2 - 5 * ts / 2, y0 + 3 * ts, ts, lab, ink);
	}
	int ask = (int)ev_rng_below(r, (uint64_t)nb);
	char rel[160], q[240], t[4], meta[200];
	snprintf(rel, sizeof rel, "images/%s.png", id);
	snprintf(q, sizeof q,
	         "The bar chart has bars labelled A to %c on an axis from 0 to 10. What is the value of bar %c? "
	         "Answer with a number only.",
	         'A' + nb - 1, 'A' + ask);
	snprintf(t, sizeof t, "%d", v[ask]);
	ev_buf m = EV_BUF_INIT(1024);
	int rc = ev_buf_printf(&m, "{\"task\":\"chart\",\"bar\":\"%c\",\"values\":[", 'A' + ask);
	for (int i = 0; !rc && i < nb; i++)
		rc = ev_buf_printf(&m, "%s%d", i ? "," : "", v[i]);
	if (!rc)
		rc = ev_buf_puts(&m, "]}");
	if (!rc)
		snprintf(meta, sizeof meta, "%s", m.data);
	ev_buf_free(&m);
	const char *imgs[1] = {rel};
	if (!rc)
		rc = save(g, c, rel);
	return rc ? rc : emit(g, id, q, imgs, 1, NULL, t, NUMERIC, meta);
}

static int task_compare(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int a = 1 + (int)ev_rng_below(r, 8), b = 1 + (int)ev_rng_below(r, 7), cells[16];
	if (b >= a)
		b++; /* b in 1..8, not a */
	char rel[2][160], meta[120];
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) {
		if (k)
			ev_canvas_rect(c, 0, 0, c->w, c->h, white);
		int n = k ? b : a;
		pick_cells(r, cells, n);
		for (int i = 0; i < n; i++)
			shape_in_cell(c, r, cells[i], 0, palette[ev_rng_below(r, NCOL)].rgb);
		snprintf(rel[k], sizeof rel[k], "images/%s-%c.png", id, 'a' + k);
		rc = save(g, c, rel[k]);
	}
	snprintf(meta, sizeof meta, "{\"task\":\"compare\",\"first\":%d,\"second\":%d}", a, b);
	const char *imgs[2] = {rel[0], rel[1]};
	return rc ? rc
	          : emit(g, id,
	                 "You are given two images. Which image has more circles, the first or the second? Answer first "
	                 "or second.",
	                 imgs, 2, NULL, a > b ? "first" : "second", EXACT, meta);
}

/* frames of a video: a folder videos/<id>/ of frame-NNN.png at 2 fps */
static int frame(const gen *g, const ev_canvas *c, const char *id, int k)
{
	char rel[200];
	snprintf(rel, sizeof rel, "videos/%s/frame-%03d.png", id, k);
	return save(g, c, rel);
}

static int video_dir(const gen *g, const char *id)
{
	char *d = ev_asprintf("%s/videos/%s", g->dir, id);
	int rc = d ? ev_mkdir_p(d) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(d);
	return rc;
}

static int task_video_order(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int k = 3 + (int)ev_rng_below(r, 2), cols[NCOL], S = c->w, f = 0, rc = video_dir(g, id);
	for (int i = 0; i < NCOL; i++)
		cols[i] = i;
	for (int i = 0; i < k; i++) {
		int j = i + (int)ev_rng_below(r, (uint64_t)(NCOL - i)), t = cols[i];
		cols[i] = cols[j], cols[j] = t;
	}
	/* each square 2 s on (4 frames), then 1 s blank (2 frames) */
	for (int e = 0; e < k && !rc; e++) {
		ev_canvas_rect(c, 0, 0, S, S, white);
		ev_canvas_rect(c, S * 3 / 10, S * 3 / 10, S * 7 / 10, S * 7 / 10, palette[cols[e]].rgb);
		for (int i = 0; i < 4 && !rc; i++)
			rc = frame(g, c, id, f++);
		ev_canvas_rect(c, 0, 0, S, S, white);
		for (int i = 0; i < 2 && !rc; i++)
			rc = frame(g, c, id, f++);
	}
	char rel[160], t[80] = "", meta[200];
	for (int e = 0; e < k; e++)
		snprintf(t + strlen(t), sizeof t - strlen(t), "%s%s", e ? ", " : "", palette[cols[e]].name);
	snprintf(rel, sizeof rel, "videos/%s", id);
	snprintf(meta, sizeof meta, "{\"task\":\"video-order\",\"events\":%d,\"frames\":%d,\"fps\":2}", k, f);
	return rc ? rc
	          : emit(g, id,
	                 "The video shows coloured squares one after another. Name their colours in the order they "
	                 "appear, separated by commas.",
	                 NULL, 0, rel, t, EXACT, meta);
}

static int task_video_count(const gen *g, ev_rng *r, const char *id, ev_canvas *c)
{
	int k = 1 + (int)ev_rng_below(r, 5), S = c->w, f = 0, rc = video_dir(g, id);
	/* 1 s blank, then each flash 2 s on and 2 s off (4 frames each) */
	for (int i = 0; i < 2 && !rc; i++)
		rc = frame(g, c, id, f++);
	for (int e = 0; e < k && !rc; e++) {
		int j = S / 8, cx = S / 2 + (int)ev_rng_below(r, (uint64_t)(2 * j + 1)) - j;
		int cy = S / 2 + (int)ev_rng_below(r, (uint64_t)(2 * j + 1)) - j;
		ev_canvas_circle(c, cx, cy, S / 6, palette[0].rgb);
		for (int i = 0; i < 4 && !rc; i++)
			rc = frame(g, c, id, f++);
		ev_canvas_rect(c, 0, 0, S, S, white);
		for (int i = 0; i < 4 && !rc; i++)
			rc = frame(g, c, id, f++);
	}
	char rel[160], t[4], meta[160];
	snprintf(rel, sizeof rel, "videos/%s", id);
	snprintf(t, sizeof t, "%d", k);
	snprintf(meta, sizeof meta, "{\"task\":\"video-count\",\"flashes\":%d,\"frames\":%d,\"fps\":2}", k, f);
	return rc ? rc
	          : emit(g, id,
	                 "A red circle appears and disappears during the video. How many times does it appear? Answer "
	                 "with a number only.",
	                 NULL, 0, rel, t, NUMERIC, meta);
}

typedef int (*task_fn)(const gen *, ev_rng *, const char *, ev_canvas *);
static const task_fn task_fns[NTASK] = {task_count,   task_colour,  task_position,        task_digits,     task_words,
                                        task_chart,   task_compare, task_video_order, task_video_count};

int ev_gen_multimodal(const ev_multimodal_options *opt, const char *out_dir)
{
	int side = opt->side ? opt->side : 224;
	if (opt->samples < 1 || opt->samples > EV_MULTIMODAL_MAX_SAMPLES)
		return ev_error_set(EV_E_INVALID, "multimodal suite: samples %d outside 1..%d", opt->samples,
		                    EV_MULTIMODAL_MAX_SAMPLES);
	if (side < 112 || side > 1024)
		return ev_error_set(EV_E_INVALID, "multimodal suite: image side %d outside 112..1024", side);
	bool want[NTASK];
	for (int i = 0; i < NTASK; i++)
		want[i] = opt->n_tasks == 0;
	for (size_t i = 0; i < opt->n_tasks; i++) {
		int k = 0;
		while (k < NTASK && strcmp(opt->tasks[i], task_names[k]))
			k++;
		if (k == NTASK)
			return ev_error_set(EV_E_INVALID, "multimodal suite: unknown task \"%s\"", opt->tasks[i]);
		want[k] = true;
	}
	int rc = ev_mkdir_p(out_dir);
	char *img = ev_asprintf("%s/images", out_dir), *vid = ev_asprintf("%s/videos", out_dir);
	/* pictures of an earlier generation are replaced, not mixed in */
	if (!rc && (!img || !vid))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = ev_rmtree(img, 0);
	if (!rc)
		rc = ev_rmtree(vid, 0);
	if (!rc)
		rc = ev_mkdir_p(img);
	free(img), free(vid);
	ev_buf out = EV_BUF_INIT((size_t)1 << 30);
	gen g = {out_dir, side, &out};
	for (int k = 0; k < NTASK && !rc; k++)
		for (int i = 0; want[k] && i < opt->samples && !rc; i++) {
			ev_rng r;
			ev_rng_seed(&r, opt->seed * 0x9E3779B97F4A7C15ull + (uint64_t)(k + 1) * 0xC2B2AE3D27D4EB4Full +
			                    (uint64_t)i * 0x165667B19E3779F9ull);
			ev_canvas c;
			char id[64];
			snprintf(id, sizeof id, "%s-%d", task_names[k], i);
			if ((rc = ev_canvas_init(&c, side, side, white)))
				break;
			rc = task_fns[k](&g, &r, id, &c);
			ev_canvas_free(&c);
		}
	if (!rc) {
		ev_buf s = EV_BUF_INIT(4096);
		rc = ev_buf_puts(&s, "{\"name\":");
		if (!rc)
			rc = ev_json_buf_str(&s, opt->name ? opt->name : "multimodal");
		if (!rc)
			rc = ev_buf_printf(&s,
			                   ",\"version\":\"1\",\"kind\":\"multimodal\",\"description\":\"pictures drawn by evald "
			                   "(shapes, colours, positions, digits, words, a bar chart, two-image comparisons, "
			                   "videos of events), %d pixels a side, seed %llu: every answer follows from the drawing\","
			                   "\"generation\":{\"max_tokens\":16,\"temperature\":0}}\n",
			                   side, (unsigned long long)opt->seed);
		if (!rc)
			rc = ev_import_write_suite(out_dir, s.data, out.data ? out.data : "", out.len);
		ev_buf_free(&s);
	}
	ev_buf_free(&out);
	return rc;
}
