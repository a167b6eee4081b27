/* The multimodal generator: every drawing holds what its sample says
 * (shapes counted as connected blots, the named colour where the question
 * puts it, a bar's height on the chart's own grid, a video's events seen
 * after sampling at 1 frame a second), the suite loads, and the seed alone
 * decides the bytes. Also the video reader: folders and archives of frames,
 * natural name order, transformers' sampling, links refused. */
#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/vision/vision.h"
#include "suites/suites.h"

static bool white(const uint8_t *p)
{
	return p[0] == 255 && p[1] == 255 && p[2] == 255;
}

/* non-white 4-connected blots; the largest's colour into big[3] */
static int blots(const eng_image *im, uint8_t big[3])
{
	int w = im->w, h = im->h, n = 0, best = 0;
	int *lab = calloc((size_t)w * h, sizeof *lab), *stack = malloc((size_t)w * h * sizeof *stack);
	assert_non_null(lab);
	assert_non_null(stack);
	for (int s = 0; s < w * h; s++) {
		if (lab[s] || white(im->rgb + 3 * s))
			continue;
		int top = 0, size = 0;
		lab[s] = ++n;
		stack[top++] = s;
		while (top) {
			int p = stack[--top], x = p % w, y = p / w;
			size++;
			int nb[4] = {x > 0 ? p - 1 : -1, x < w - 1 ? p + 1 : -1, y > 0 ? p - w : -1, y < h - 1 ? p + w : -1};
			for (int k = 0; k < 4; k++)
				if (nb[k] >= 0 && !lab[nb[k]] && !white(im->rgb + 3 * nb[k])) {
					lab[nb[k]] = n;
					stack[top++] = nb[k];
				}
		}
		if (size > best && big) {
			best = size;
			memcpy(big, im->rgb + 3 * s, 3);
		}
	}
	free(lab), free(stack);
	return n;
}

static const struct {
	const char *name;
	uint8_t rgb[3];
} colours[] = {{"red", {220, 30, 30}},     {"green", {30, 160, 40}},   {"blue", {30, 70, 225}}, {"yellow", {240, 205, 20}},
               {"orange", {245, 130, 20}}, {"purple", {140, 40, 170}}, {"black", {20, 20, 20}}};

static const char *colour_name(const uint8_t *p)
{
	for (size_t i = 0; i < sizeof colours / sizeof colours[0]; i++)
		if (!memcmp(p, colours[i].rgb, 3))
			return colours[i].name;
	return white(p) ? "white" : "other";
}

static void load_part(eng_image *im, const char *path)
{
	if (eng_image_load(im, path, NULL))
		fail_msg("%s: %s", path, ev_error_msg());
}

static const ev_part *file_part(const ev_sample *s, int k)
{
	const ev_message *m = &s->messages[s->n_messages - 1];
	for (size_t i = 0; i < m->n_parts; i++)
		if (m->parts[i].kind != EV_PART_TEXT && k-- == 0)
			return &m->parts[i];
	fail_msg("%s: no file part %d", s->id, k);
	return NULL;
}

static int meta_int(const cJSON *m, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, k);
	assert_true(cJSON_IsNumber(v));
	return (int)v->valuedouble;
}

/* the chart's horizontal lines (grey grid or black axis) at column x, bottom up */
static int chart_value(const eng_image *im, char bar, int nbars)
{
	int w = im->w, lines[16], nl = 0, x = w - 10;
	for (int y = im->h - 1; y >= 0 && nl < 16; y--)
		if (!white(im->rgb + 3 * ((size_t)y * w + x)))
			lines[nl++] = y;
	assert_int_equal(nl, 11);
	/* the bars: runs of blue along the row just above the axis */
	int y0 = lines[0] - 1, runs[8][2], nr = 0;
	for (int xx = 0; xx < w; xx++) {
		bool b = !strcmp(colour_name(im->rgb + 3 * ((size_t)y0 * w + xx)), "blue");
		if (b && (nr == 0 || runs[nr - 1][1] != xx - 1)) {
			assert_true(nr < 8);
			runs[nr][0] = runs[nr][1] = xx;
			nr++;
		} else if (b) {
			runs[nr - 1][1] = xx;
		}
	}
	assert_int_equal(nr, nbars);
	int cx = (runs[bar - 'A'][0] + runs[bar - 'A'][1]) / 2, top = y0;
	while (top > 0 && !strcmp(colour_name(im->rgb + 3 * ((size_t)(top - 1) * w + cx)), "blue"))
		top--;
	for (int k = 0; k < 11; k++)
		if (lines[k] == top)
			return k;
	fail_msg("bar %c's top (row %d) is on no grid line", bar, top);
	return -1;
}

/* the colours a sampled video shows, repeats collapsed; and how many runs of red */
static void video_events(const ev_part *p, char *seq, size_t cap, int *red_runs)
{
	ev_video v;
	if (ev_video_load(&v, p->path, p->fps, 1.0, 0, NULL))
		fail_msg("%s: %s", p->path, ev_error_msg());
	assert_int_equal(v.n, v.total / 2); /* 2 fps sampled at 1 */
	const char *last = "white";
	seq[0] = 0;
	*red_runs = 0;
	for (int i = 0; i < v.n; i++) {
		eng_image im;
		if (eng_image_decode(&im, v.data[i], v.len[i], NULL))
			fail_msg("%s: %s", v.name[i], ev_error_msg());
		uint8_t c[3] = {255, 255, 255};
		if (blots(&im, c) > 1)
			fail_msg("%s: more than one shape in a frame", v.name[i]);
		const char *nm = colour_name(c);
		if (strcmp(nm, last) && strcmp(nm, "white")) {
			snprintf(seq + strlen(seq), cap - strlen(seq), "%s%s", seq[0] ? ", " : "", nm);
			*red_runs += !strcmp(nm, "red");
		}
		last = nm;
		eng_image_free(&im);
	}
	ev_video_free(&v);
}

static void drawings_hold_their_answers(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("mm");
	ev_multimodal_options o = {.samples = 6, .seed = 7};
	assert_int_equal(ev_gen_multimodal(&o, dir), 0);
	ev_suite *s = NULL;
	if (ev_suite_load(&s, dir, NULL))
		fail_msg("%s", ev_error_msg());
	assert_int_equal(s->n_samples, 9 * 6);
	assert_string_equal(s->kind, "multimodal");
	int checked = 0;
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		cJSON *m = cJSON_Parse(x->metadata_json);
		assert_non_null(m);
		const char *task = cJSON_GetObjectItemCaseSensitive(m, "task")->valuestring;
		assert_int_equal(x->n_targets, 1);
		assert_non_null(x->checker_json);
		const char *t = x->targets[0];
		eng_image im = {0}, im2 = {0};
		uint8_t c[3];
		if (!strcmp(task, "count")) {
			load_part(&im, file_part(x, 0)->path);
			assert_int_equal(blots(&im, c), meta_int(m, "count") + meta_int(m, "others"));
			assert_int_equal(atoi(t), meta_int(m, "count"));
		} else if (!strcmp(task, "colour")) {
			load_part(&im, file_part(x, 0)->path);
			assert_int_equal(blots(&im, c), 2);
			assert_string_equal(colour_name(c), t);
		} else if (!strcmp(task, "position")) {
			load_part(&im, file_part(x, 0)->path);
			/* the named colour's pixels all lie in the target's quadrant */
			int hx = -1, hy = -1;
			for (int y = 0; y < im.h; y++)
				for (int xx = 0; xx < im.w; xx++)
					if (!strcmp(colour_name(im.rgb + 3 * ((size_t)y * im.w + xx)), cJSON_GetObjectItemCaseSensitive(m, "colour")->valuestring)) {
						int qx = xx >= im.w / 2, qy = y >= im.h / 2;
						assert_true((hx < 0 || hx == qx) && (hy < 0 || hy == qy));
						hx = qx, hy = qy;
					}
			char want[32];
			snprintf(want, sizeof want, "%s %s", hy ? "bottom" : "top", hx ? "right" : "left");
			assert_string_equal(want, t);
		} else if (!strcmp(task, "chart")) {
			load_part(&im, file_part(x, 0)->path);
			const cJSON *vals = cJSON_GetObjectItemCaseSensitive(m, "values");
			char bar = cJSON_GetObjectItemCaseSensitive(m, "bar")->valuestring[0];
			assert_int_equal(chart_value(&im, bar, cJSON_GetArraySize(vals)), atoi(t));
		} else if (!strcmp(task, "compare")) {
			load_part(&im, file_part(x, 0)->path);
			load_part(&im2, file_part(x, 1)->path);
			int a = blots(&im, c), b = blots(&im2, c);
			assert_int_equal(a, meta_int(m, "first"));
			assert_int_equal(b, meta_int(m, "second"));
			assert_string_equal(t, a > b ? "first" : "second");
		} else if (!strcmp(task, "digits") || !strcmp(task, "words")) {
			load_part(&im, file_part(x, 0)->path);
			assert_true(blots(&im, c) >= (int)strlen(t)); /* ink drawn: at least a blot a letter */
			assert_string_equal(colour_name(c), "black");
		} else if (!strcmp(task, "video-order") || !strcmp(task, "video-count")) {
			const ev_part *p = file_part(x, 0);
			assert_int_equal(p->kind, EV_PART_VIDEO);
			assert_true(p->fps == 2);
			char seq[128];
			int reds;
			video_events(p, seq, sizeof seq, &reds);
			if (!strcmp(task, "video-order"))
				assert_string_equal(seq, t);
			else
				assert_int_equal(reds, atoi(t));
		} else {
			fail_msg("unknown task %s", task);
		}
		checked++;
		eng_image_free(&im), eng_image_free(&im2);
		cJSON_Delete(m);
	}
	assert_int_equal(checked, 54);
	ev_suite_free(s);

	/* the same options, the same bytes; another seed, other pictures */
	char *again = tu_tmpdir("mm2"), *other = tu_tmpdir("mm3");
	assert_int_equal(ev_gen_multimodal(&o, again), 0);
	ev_multimodal_options o2 = o;
	o2.seed = 8;
	assert_int_equal(ev_gen_multimodal(&o2, other), 0);
	char *out = NULL;
	assert_int_equal(tu_sh(&out, NULL, "diff -r '%s' '%s' && echo same", dir, again), 0);
	assert_non_null(strstr(out, "same"));
	free(out);
	assert_int_not_equal(tu_sh(&out, NULL, "cmp -s '%s/images/count-0.png' '%s/images/count-0.png'", dir, other), 0);
	free(out);

	/* bad options name themselves */
	ev_multimodal_options bad = {.samples = 1, .side = 50};
	assert_int_not_equal(ev_gen_multimodal(&bad, again), 0);
	assert_non_null(strstr(ev_error_msg(), "side"));
	const char *unk[1] = {"juggling"};
	ev_multimodal_options bad2 = {.samples = 1, .tasks = unk, .n_tasks = 1};
	assert_int_not_equal(ev_gen_multimodal(&bad2, again), 0);
	assert_non_null(strstr(ev_error_msg(), "juggling"));
	free(dir), free(again), free(other);
}

static void write_tar(const char *path, const char *const *names, int n, const char *link)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (int i = 0; i < n + (link != NULL); i++) {
		struct archive_entry *e = archive_entry_new();
		char body[32];
		snprintf(body, sizeof body, "frame %d", i);
		archive_entry_set_pathname(e, i < n ? names[i] : link);
		if (i < n) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(e, (la_int64_t)strlen(body));
		} else {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, "/etc/passwd");
		}
		archive_entry_set_perm(e, 0644);
		archive_write_header(a, e);
		if (i < n)
			archive_write_data(a, body, strlen(body));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
}

static void video_frames_sampled_in_order(void **st)
{
	(void)st;
	int idx[EV_VIDEO_MAX_FRAMES];
	/* transformers: max(1, int(total / fps * sample_fps)), i * total // n */
	assert_int_equal(ev_video_sample(10, 2, 1, 0, idx), 5);
	assert_int_equal(idx[4], 8);
	assert_int_equal(ev_video_sample(7, 3, 1, 0, idx), 2);
	assert_int_equal(idx[1], 3);
	assert_int_equal(ev_video_sample(3, 30, 1, 0, idx), 1);
	assert_int_equal(ev_video_sample(10, 1, 0, 4, idx), 4);
	assert_int_equal(idx[3], 7);
	assert_int_equal(ev_video_sample(5, 1, 10, 0, idx), 5); /* past the source: every frame */
	assert_int_equal(ev_video_sample(100000, 1, 1, 0, idx), EV_VIDEO_MAX_FRAMES);
	assert_int_equal(idx[EV_VIDEO_MAX_FRAMES - 1], (int)((long)(EV_VIDEO_MAX_FRAMES - 1) * 100000 / EV_VIDEO_MAX_FRAMES));

	/* a folder: frame-2 before frame-10, other files ignored */
	char *dir = tu_tmpdir("vid");
	const char *names[] = {"frame-10.png", "frame-2.png", "frame-1.png", "frame-0.jpg", "notes.txt"};
	for (int i = 0; i < 5; i++) {
		char body[32];
		snprintf(body, sizeof body, "%s", names[i]);
		free(tu_write(dir, names[i], body));
	}
	ev_video v;
	assert_int_equal(ev_video_load(&v, dir, 1, 0, 0, NULL), 0);
	assert_int_equal(v.total, 4);
	assert_int_equal(v.n, 4);
	assert_string_equal(v.name[0], "frame-0.jpg");
	assert_string_equal(v.name[2], "frame-2.png");
	assert_string_equal(v.name[3], "frame-10.png");
	assert_memory_equal(v.data[3], "frame-10.png", 12);
	ev_video_free(&v);
	assert_int_equal(ev_video_load(&v, dir, 2, 0, 2, NULL), 0); /* a fixed count */
	assert_int_equal(v.n, 2);
	assert_string_equal(v.name[1], "frame-2.png");
	ev_video_free(&v);
	/* caps and links name the frame */
	ev_video_limits lim = {.max_frame_bytes = 4};
	assert_int_not_equal(ev_video_load(&v, dir, 1, 0, 0, &lim), 0);
	assert_non_null(strstr(ev_error_msg(), "frame-0.jpg"));
	char *lnk = tu_path(dir, "frame-5.png");
	assert_int_equal(symlink("/etc/hostname", lnk), 0);
	assert_int_equal(ev_video_load(&v, dir, 1, 0, 0, NULL), EV_E_UNSAFE);
	assert_non_null(strstr(ev_error_msg(), "frame-5.png"));
	free(lnk);

	/* an archive of frames */
	char *tars = tu_tmpdir("vid-tar"), *tar = tu_path(tars, "clip.tar"); /* not among the frames */
	const char *tn[] = {"clip/f10.png", "clip/f9.png", "clip/readme.md", "clip/f1.png"};
	write_tar(tar, tn, 4, NULL);
	assert_int_equal(ev_video_load(&v, tar, 1, 0, 0, NULL), 0);
	assert_int_equal(v.n, 3);
	assert_string_equal(v.name[0], "clip/f1.png");
	assert_string_equal(v.name[2], "clip/f10.png");
	assert_memory_equal(v.data[1], "frame 1", 7); /* f9 was the second entry */
	ev_video_free(&v);
	write_tar(tar, tn, 4, "clip/f11.png");
	assert_int_equal(ev_video_load(&v, tar, 1, 0, 0, NULL), EV_E_UNSAFE);
	assert_non_null(strstr(ev_error_msg(), "f11.png"));
	char *empty = tu_tmpdir("vid-empty");
	assert_int_equal(ev_video_load(&v, empty, 1, 0, 0, NULL), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "no frames"));
	free(tar), free(tars), free(dir), free(empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(drawings_hold_their_answers),
		cmocka_unit_test(video_frames_sampled_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
