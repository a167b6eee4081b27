/*
 * Images into the engine (engine/vision): PNG in every colour form and
 * JPEG decode to the RGB written (fixtures encoded here with libpng and
 * libjpeg); EXIF orientations 2-8 turn the image as PIL's exif_transpose;
 * hostile input (truncated, huge or bomb dimensions, not an image, too many
 * bytes) fails with an error naming it; smart_resize's known cases;
 * preprocessing keeps a size that needs no resize exactly and orders the
 * patches in merge groups.
 */
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gif_lib.h>
#include <jpeglib.h>
#include <webp/decode.h>
#include <webp/encode.h>
#include <webp/mux.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "tests/engine/engine_testutil.h"
#include "engine/make/make.h"
#include "engine/vision/vision.h"
#include "engine/tokenizer/tokenizer.h"
#include "suites/suites.h"
#include "base/fs.h"

/* ---- fixtures --------------------------------------------------------------- */

typedef struct {
	unsigned char *p;
	size_t n, cap;
} mem;

static void mem_put(mem *m, const void *d, size_t n)
{
	if (m->n + n > m->cap) {
		m->cap = (m->n + n) * 2;
		m->p = realloc(m->p, m->cap);
		assert_non_null(m->p);
	}
	memcpy(m->p + m->n, d, n);
	m->n += n;
}

static void png_put(png_structp png, png_bytep d, size_t n)
{
	mem_put(png_get_io_ptr(png), d, n);
}

static void png_flush_none(png_structp png)
{
	(void)png;
}

/* A PNG of w x h in colour type `type` and `bits`, samples from `px`
 * (channels of that type, 8 or 16 bits big-endian); with `rows` 0 only
 * the signature and header are written (a bomb's first bytes). */
static mem write_png(int w, int h, int type, int bits, const unsigned char *px, bool rows, const png_color *pal,
		     int npal)
{
	mem m = {0};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png_create_info_struct(png);
	assert_true(png && info);
	if (setjmp(png_jmpbuf(png)))
		fail_msg("libpng could not write the fixture");
	png_set_write_fn(png, &m, png_put, png_flush_none);
	png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bits, type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	if (pal)
		png_set_PLTE(png, info, pal, npal);
	png_write_info(png, info);
	if (rows) {
		int ch = type == PNG_COLOR_TYPE_RGB ? 3 : type == PNG_COLOR_TYPE_RGBA ? 4 : type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : 1;
		size_t stride = (size_t)w * ch * (bits / 8);
		for (int y = 0; y < h; y++)
			png_write_row(png, px + (size_t)y * stride);
		png_write_end(png, NULL);
	}
	png_destroy_write_struct(&png, &info);
	return m;
}

/* A JPEG (quality 100, 4:4:4) of interleaved RGB, with an EXIF
 * orientation block when `orient` > 0. */
static mem write_jpeg(int w, int h, const unsigned char *rgb, int orient)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	unsigned char *buf = NULL;
	unsigned long n = 0;
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &buf, &n);
	c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h, c.input_components = 3, c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 100, TRUE);
	for (int i = 0; i < c.num_components; i++)
		c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
	jpeg_start_compress(&c, TRUE);
	if (orient > 0) { /* "Exif\0\0", a big-endian TIFF header, IFD0 with the orientation tag */
		unsigned char ex[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
				      0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, (unsigned char)orient, 0, 0, 0, 0, 0, 0};
		jpeg_write_marker(&c, JPEG_APP0 + 1, ex, sizeof ex);
	}
	while (c.next_scanline < c.image_height) {
		JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	mem m = {buf, n, n};
	return m;
}

static unsigned char *pattern(int w, int h, int ch, uint64_t seed)
{
	unsigned char *p = malloc((size_t)w * h * ch);
	ev_rng r;
	ev_rng_seed(&r, seed);
	for (size_t i = 0; i < (size_t)w * h * ch; i++)
		p[i] = (unsigned char)ev_rng_below(&r, 256);
	return p;
}

/* ---- tests ------------------------------------------------------------------ */

static void png_colour_forms_decode_to_rgb(void **state)
{
	(void)state;
	int w = 37, h = 23;
	unsigned char *rgba = pattern(w, h, 4, 1), *rgb = malloc((size_t)w * h * 3), *gray = pattern(w, h, 1, 2);
	for (int i = 0; i < w * h; i++)
		memcpy(rgb + i * 3, rgba + i * 4, 3);
	eng_image im;
	/* RGB, RGBA (alpha dropped), 16-bit RGB (high byte kept) */
	mem m = write_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	assert_true(im.w == w && im.h == h);
	assert_memory_equal(im.rgb, rgb, (size_t)w * h * 3);
	eng_image_free(&im), free(m.p);
	m = write_png(w, h, PNG_COLOR_TYPE_RGBA, 8, rgba, true, NULL, 0);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	assert_memory_equal(im.rgb, rgb, (size_t)w * h * 3);
	eng_image_free(&im), free(m.p);
	unsigned char *rgb16 = malloc((size_t)w * h * 6);
	for (int i = 0; i < w * h * 3; i++)
		rgb16[2 * i] = rgb[i], rgb16[2 * i + 1] = (unsigned char)(255 - rgb[i]);
	m = write_png(w, h, PNG_COLOR_TYPE_RGB, 16, rgb16, true, NULL, 0);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	for (int i = 0; i < w * h * 3; i++) /* libpng's 16 -> 8 strip keeps the high byte */
		assert_int_equal(im.rgb[i], rgb[i]);
	eng_image_free(&im), free(m.p);
	/* grey: each channel the grey value; a palette: its colours */
	m = write_png(w, h, PNG_COLOR_TYPE_GRAY, 8, gray, true, NULL, 0);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	for (int i = 0; i < w * h; i++)
		assert_true(im.rgb[3 * i] == gray[i] && im.rgb[3 * i + 1] == gray[i] && im.rgb[3 * i + 2] == gray[i]);
	eng_image_free(&im), free(m.p);
	png_color pal[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {9, 99, 199}};
	unsigned char *idx = malloc((size_t)w * h);
	for (int i = 0; i < w * h; i++)
		idx[i] = (unsigned char)(gray[i] % 4);
	m = write_png(w, h, PNG_COLOR_TYPE_PALETTE, 8, idx, true, pal, 4);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	for (int i = 0; i < w * h; i++)
		assert_true(im.rgb[3 * i] == pal[idx[i]].red && im.rgb[3 * i + 2] == pal[idx[i]].blue);
	eng_image_free(&im), free(m.p);
	free(rgba), free(rgb), free(gray), free(rgb16), free(idx);
}

/* A JPEG at quality 100 comes back close to what was written; with an
 * EXIF orientation the pixels are turned as PIL turns them (checked
 * against the orientation-1 decode, the same compressed data). */
static void jpeg_decodes_and_exif_orientation_turns(void **state)
{
	(void)state;
	int w = 24, h = 16;
	unsigned char *rgb = malloc((size_t)w * h * 3);
	for (int y = 0; y < h; y++) /* smooth, so JPEG keeps it closely */
		for (int x = 0; x < w; x++) {
			unsigned char *p = rgb + ((size_t)y * w + x) * 3;
			p[0] = (unsigned char)(x * 10), p[1] = (unsigned char)(y * 15), p[2] = 128;
		}
	eng_image base, im;
	mem m = write_jpeg(w, h, rgb, 0);
	assert_int_equal(eng_image_decode(&base, m.p, m.n, NULL), 0);
	free(m.p);
	assert_true(base.w == w && base.h == h);
	int worst = 0;
	for (int i = 0; i < w * h * 3; i++)
		worst = abs(base.rgb[i] - rgb[i]) > worst ? abs(base.rgb[i] - rgb[i]) : worst;
	print_message("JPEG quality 100: largest difference %d\n", worst);
	assert_true(worst <= 8);
	for (int o = 1; o <= 8; o++) {
		m = write_jpeg(w, h, rgb, o);
		assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
		free(m.p);
		bool swap = o >= 5;
		assert_int_equal(im.w, swap ? h : w);
		assert_int_equal(im.h, swap ? w : h);
		for (int y = 0; y < im.h; y++)
			for (int x = 0; x < im.w; x++) {
				/* where output (x, y) comes from in the upright source */
				int sx = x, sy = y;
				switch (o) {
				case 2: sx = w - 1 - x; break;
				case 3: sx = w - 1 - x, sy = h - 1 - y; break;
				case 4: sy = h - 1 - y; break;
				case 5: sx = y, sy = x; break;
				case 6: sx = y, sy = h - 1 - x; break;
				case 7: sx = w - 1 - y, sy = h - 1 - x; break;
				case 8: sx = w - 1 - y, sy = x; break;
				}
				assert_memory_equal(im.rgb + ((size_t)y * im.w + x) * 3, base.rgb + ((size_t)sy * w + sx) * 3, 3);
			}
		eng_image_free(&im);
	}
	/* orientation 6 on a corner: the source's bottom-left lands top-left */
	m = write_jpeg(w, h, rgb, 6);
	assert_int_equal(eng_image_decode(&im, m.p, m.n, NULL), 0);
	assert_memory_equal(im.rgb, base.rgb + (size_t)(h - 1) * w * 3, 3);
	eng_image_free(&im), free(m.p);
	eng_image_free(&base);
	free(rgb);
}

static void expect_error(const void *d, size_t n, const eng_image_limits *lim, const char *needle)
{
	eng_image im;
	int rc = eng_image_decode(&im, d, n, lim);
	if (rc == 0)
		fail_msg("decoded what should fail (%s)", needle);
	if (!strstr(ev_error_msg(), needle))
		fail_msg("error '%s' does not say '%s'", ev_error_msg(), needle);
	assert_null(im.rgb);
}

static void hostile_images_fail_cleanly(void **state)
{
	(void)state;
	int w = 40, h = 30;
	unsigned char *rgb = pattern(w, h, 3, 5);
	mem p = write_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0), j = write_jpeg(w, h, rgb, 0);
	/* truncated anywhere past the header */
	for (size_t cut = 40; cut < p.n; cut += p.n / 7)
		expect_error(p.p, cut, NULL, "PNG image");
	for (size_t cut = 200; cut < j.n - 2; cut += j.n / 7)
		expect_error(j.p, cut, NULL, "JPEG image");
	/* a header declaring 100,000 x 100,000 pixels, in 40-odd bytes: refused
	 * from the header, before anything is allocated */
	mem bomb = write_png(100000, 100000, PNG_COLOR_TYPE_RGB, 8, NULL, false, NULL, 0);
	expect_error(bomb.p, bomb.n, NULL, "100000 x 100000 pixels: more than");
	/* a limit of the caller's */
	eng_image_limits lim = {.max_pixels = 1000};
	expect_error(p.p, p.n, &lim, "40 x 30 pixels: more than the 1000");
	lim = (eng_image_limits){.max_bytes = 100};
	expect_error(p.p, p.n, &lim, "more than the 100 allowed");
	/* not an image, whatever a file name says; empty */
	const char text[] = "<html>not a picture</html>";
	expect_error(text, sizeof text, NULL, "not a PNG, JPEG, WebP or GIF image");
	expect_error("", 0, NULL, "not a PNG, JPEG, WebP or GIF image");
	/* a file: its name in the error */
	char *dir = tu_tmpdir("vision"), *f = tu_write(dir, "photo.png", text);
	eng_image im;
	assert_int_not_equal(eng_image_load(&im, f, NULL), 0);
	assert_non_null(strstr(ev_error_msg(), "photo.png"));
	free(f), free(dir);
	free(p.p), free(j.p), free(bomb.p), free(rgb);
}

static void smart_resize_known_cases(void **state)
{
	(void)state;
	static const int cases[][4] = {
		/* h, w -> h', w' (transformers' smart_resize, factor 28, [3136, 451584]) */
		{448, 448, 448, 448}, {20, 30, 56, 84},     {1000, 700, 784, 560},
		{12, 1500, 28, 644},  {1024, 1024, 672, 672}, {42, 42, 56, 56}, /* 1.5 rounds to 2 (half to even) */
		{70, 70, 56, 56},     /* 2.5 rounds to 2 */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int oh = 0, ow = 0;
		assert_int_equal(eng_smart_resize(cases[i][0], cases[i][1], 28, 3136, 451584, &oh, &ow), 0);
		if (oh != cases[i][2] || ow != cases[i][3])
			fail_msg("%d x %d: %d x %d, want %d x %d", cases[i][0], cases[i][1], oh, ow, cases[i][2], cases[i][3]);
	}
	int oh, ow;
	assert_int_not_equal(eng_smart_resize(10, 2500, 28, 3136, 451584, &oh, &ow), 0);
	assert_non_null(strstr(ev_error_msg(), "aspect ratio"));
}

/* A 56 x 56 image keeps its size (56 * 56 = the minimum), so the patches
 * hold its pixels exactly, normalised; rows go merge group by merge group. */
static void patches_in_merge_group_order(void **state)
{
	(void)state;
	int W = 56, H = 56;
	eng_image im = {W, H, pattern(W, H, 3, 9)};
	eng_vision_prep p = ENG_VISION_PREP_INIT;
	eng_vision_input v;
	assert_int_equal(eng_vision_preprocess(&im, &p, &v), 0);
	assert_true(v.grid_t == 1 && v.grid_h == 4 && v.grid_w == 4 && v.n == 16 && v.dim == 3 * 2 * 14 * 14);
	assert_int_equal(eng_vision_tokens(&v, &p), 4);
	/* row r: merge group (r / 4) of a 2 x 2 grid of groups, then (r % 4) within */
	for (int r = 0; r < v.n; r++) {
		int g = r / 4, k = r % 4, py = (g / 2 * 2 + k / 2) * 14, px = (g % 2 * 2 + k % 2) * 14;
		for (int c = 0; c < 3; c++)
			for (int t = 0; t < 2; t++)
				for (int y = 0; y < 14; y++)
					for (int x = 0; x < 14; x++) {
						float want = ((float)im.rgb[((size_t)(py + y) * W + px + x) * 3 + c] -
							      (float)(p.mean[c] / p.rescale)) /
							     (float)(p.std[c] / p.rescale);
						float got = v.pixels[(size_t)r * v.dim + ((c * 2 + t) * 14 + y) * 14 + x];
						if (got != want)
							fail_msg("row %d c%d t%d (%d,%d): %g, want %g", r, c, t, y, x, got, want);
					}
	}
	eng_vision_input_free(&v);
	eng_image_free(&im);
}

/* An image through a random multimodal M3 (mkmodel --arch minimax_m3_vl):
 * its rows take the placeholders' places; at once = token by token = the
 * reference path; without queued rows the placeholders are refused, and a
 * text-only model refuses rows. */
static void image_rows_replace_placeholders(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	z.layers = 3;
	char *dir = et_mkmodel("m3vl", "minimax_m3_vl", &z, "f32", 3);
	eng_vision_model *vm = NULL;
	assert_int_equal(eng_vision_model_load(&vm, dir), 0);
	eng_image im = {84, 56, pattern(84, 56, 3, 4)};
	eng_vision_input v;
	float *rows = NULL;
	int nrows = 0;
	assert_int_equal(eng_vision_preprocess(&im, eng_vision_model_prep(vm), &v), 0);
	assert_int_equal(eng_vision_encode(vm, &v, &rows, &nrows), 0);
	assert_int_equal(nrows, 6); /* 56 x 84: a 4 x 6 patch grid, 2 x 2 merged */
	if (eng_vision_model_fast(vm)) { /* the fast tower against the plain one */
		float *plain = NULL;
		int np = 0;
		eng_vision_model_set_fast(vm, false);
		assert_int_equal(eng_vision_encode(vm, &v, &plain, &np), 0);
		assert_int_equal(np, nrows);
		double e = et_rel_err(rows, plain, (size_t)nrows * z.hidden);
		print_message("vision tower: fast / plain %.2e\n", e);
		assert_true(e <= 1e-5);
		free(plain);
	} else {
		print_message("vision tower: no fast path in this build (no OpenBLAS): plain only\n");
	}
	eng_model *fast = et_load(dir, ENG_BACKEND_CPU, 0), *ref = et_load(dir, ENG_BACKEND_REF, 0);
	int img = eng_model_image_token(fast), n = 12;
	assert_int_equal(img, (int)z.vocab - 4);
	int32_t toks[12] = {5, 17, 9, img, img, img, img, img, img, 33, 2, 8};
	size_t V = (size_t)z.vocab;
	float *lg[3];
	for (int k = 0; k < 3; k++) {
		eng_model *m = k == 2 ? ref : fast;
		eng_seq *s = NULL;
		lg[k] = malloc((size_t)n * V * sizeof(float));
		assert_int_equal(eng_seq_new(&s, m), 0);
		assert_int_equal(eng_seq_add_embeddings(s, rows, nrows), 0);
		if (k == 1) /* token by token */
			for (int i = 0; i < n; i++) {
				assert_int_equal(eng_forward(s, toks + i, 1, NULL), 0);
				memcpy(lg[k] + (size_t)i * V, eng_seq_logits(s), V * sizeof(float));
			}
		else
			assert_int_equal(eng_forward(s, toks, n, lg[k]), 0);
		assert_int_equal(eng_seq_pending_embeddings(s), 0);
		eng_seq_free(s);
	}
	double step = et_rel_err(lg[1], lg[0], (size_t)n * V), vref = et_rel_err(lg[2], lg[0], (size_t)n * V);
	print_message("image rows: token by token / at once %.2e, reference / fast %.2e\n", step, vref);
	assert_true(step <= 1e-5 && vref <= 1e-5);
	/* zero rows instead of the image: the same logits before the first placeholder, others from it on */
	eng_seq *s = NULL;
	float *plain = malloc((size_t)n * V * sizeof(float));
	assert_int_equal(eng_seq_new(&s, fast), 0);
	float *zeros = calloc((size_t)nrows * z.hidden, sizeof(float));
	assert_int_equal(eng_seq_add_embeddings(s, zeros, nrows), 0);
	assert_int_equal(eng_forward(s, toks, n, plain), 0);
	assert_true(et_rel_err(plain, lg[0], 3 * V) <= 1e-6);	      /* the text before is the same */
	assert_true(et_rel_err(plain + 3 * V, lg[0] + 3 * V, V) > 1e-3); /* the image is not */
	eng_seq_free(s);
	/* placeholders without rows; rows on a text-only model */
	assert_int_equal(eng_seq_new(&s, fast), 0);
	assert_int_not_equal(eng_forward(s, toks, n, NULL), 0);
	assert_non_null(strstr(ev_error_msg(), "image and video placeholder tokens"));
	eng_seq_free(s);
	char *tdir = et_mkmodel("m3text", "minimax_m3", &z, "f32", 3);
	eng_model *text = et_load(tdir, ENG_BACKEND_CPU, 0);
	assert_int_equal(eng_model_image_token(text), -1);
	assert_int_equal(eng_seq_new(&s, text), 0);
	assert_int_not_equal(eng_seq_add_embeddings(s, rows, nrows), 0);
	eng_seq_free(s);
	eng_model_free(text);
	for (int k = 0; k < 3; k++)
		free(lg[k]);
	free(plain), free(zeros), free(rows), free(dir), free(tdir);
	eng_vision_input_free(&v);
	eng_image_free(&im);
	eng_vision_model_free(vm);
	eng_model_free(fast);
	eng_model_free(ref);
}

/* The command line: `engine generate --image` expands the prompt's image
 * marker and answers; a marker count that does not match the images, a
 * text-only model, or a file that is no image fail with a message. */
static void generate_with_an_image_on_the_command_line(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlcli", "minimax_m3_vl", &z, "f32", 5), *tdir = et_mkmodel("m3cli", "minimax_m3", &z, "f32", 5);
	unsigned char *rgb = pattern(90, 60, 3, 6);
	mem p = write_png(90, 60, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/cat.png", dir), *txt = tu_write(dir, "notes.png", "not an image");
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL,
			(const char *const[]){ev, "engine", "generate", "--model", dir, "--prompt", "Look: " ENG_VISION_IMAGE_MARKER " ok?",
					      "--image", png, "--max-tokens", "3", "--json", NULL});
	if (rc)
		fail_msg("generate --image: %s", err);
	/* the marker became the start marker, 6 image tokens (60 x 90 -> 56 x 84), the end marker */
	eng_tokenizer *tok = NULL;
	int32_t *ids = NULL;
	size_t nids = 0;
	const char *prompt = "Look: " ENG_VISION_IMAGE_MARKER " ok?";
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	assert_int_equal(eng_tokenize_with_specials(tok, prompt, strlen(prompt), &ids, &nids), 0);
	char want[64];
	snprintf(want, sizeof want, "\"prompt_tokens\":%zu,", nids - 1 + 6 + 2);
	if (!strstr(out, want))
		fail_msg("generate --image: %s lacks %s", out, want);
	free(ids);
	eng_tokenizer_free(tok);
	free(out), free(err);
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "generate", "--model", dir, "--prompt", "no marker here", "--image", png,
					  "--max-tokens", "3", NULL});
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "0 image markers"));
	free(out), free(err);
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "generate", "--model", dir, "--prompt", ENG_VISION_IMAGE_MARKER, "--image",
					  txt, "--max-tokens", "3", NULL});
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "notes.png: not a PNG, JPEG, WebP or GIF image"));
	free(out), free(err);
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "generate", "--model", tdir, "--prompt", "hi", "--image", png,
					  "--max-tokens", "3", NULL});
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "not a multimodal checkpoint"));
	free(out), free(err);
	free(png), free(txt), free(p.p), free(rgb), free(dir), free(tdir);
}

/* `evald run --model DIR` on a suite whose samples attach an image: the
 * image reaches the engine (the answer and prompt length equal `engine
 * generate --chat --image` on the same text), and a text-only checkpoint
 * says it takes text parts only. */
static void run_a_suite_with_images(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlrun", "minimax_m3_vl", &z, "f32", 5), *tdir = et_mkmodel("m3run", "minimax_m3", &z, "f32", 5);
	char *sd = tu_tmpdir("vsuite");
	unsigned char *rgb = pattern(90, 60, 3, 8);
	mem p = write_png(90, 60, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/cat.png", sd), *db = ev_asprintf("%s/t.db", sd), *tdb = ev_asprintf("%s/u.db", sd);
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	char *suite = tu_write(sd, "s.jsonl", "{\"id\":\"1\",\"input\":\"What is it?\",\"attachments\":[\"cat.png\"],\"target\":\"x\"}\n");
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL,
			(const char *const[]){ev, "--db", db, "run", "--model", dir, "--suite", suite, "--max-tokens", "6", NULL});
	if (rc)
		fail_msg("run: %s", err);
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", db, "export", "1", NULL}), 0);
	cJSON *row = cJSON_Parse(out);
	assert_non_null(row);
	free(out), free(err);
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "engine", "generate", "--model", dir, "--chat", "--prompt",
					  "What is it?\n" ENG_VISION_IMAGE_MARKER, "--image", png, "--max-tokens", "6", "--json", NULL});
	if (rc)
		fail_msg("generate: %s", err);
	cJSON *gen = cJSON_Parse(out);
	assert_non_null(gen);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(row, "response"), *txt = cJSON_GetObjectItemCaseSensitive(gen, "text");
	assert_true(cJSON_IsString(resp) && cJSON_IsString(txt));
	assert_string_equal(resp->valuestring, txt->valuestring);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(row, "prompt_tokens")->valueint,
			 cJSON_GetObjectItemCaseSensitive(gen, "prompt_tokens")->valueint);
	print_message("run with an image: answer %s, %d prompt tokens, as engine generate --image\n", resp->valuestring,
		      cJSON_GetObjectItemCaseSensitive(row, "prompt_tokens")->valueint);
	cJSON_Delete(row), cJSON_Delete(gen);
	free(out), free(err);
	/* a text-only checkpoint: the sample fails, saying why */
	tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", tdb, "run", "--model", tdir, "--suite", suite, "--max-tokens", "6", NULL});
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", tdb, "export", "1", NULL}), 0);
	if (!strstr(out, "text parts only (this checkpoint has no vision tower)"))
		fail_msg("text-only run: %s", out);
	free(out), free(err);
	free(png), free(db), free(tdb), free(suite), free(sd), free(p.p), free(rgb), free(dir), free(tdir);
}

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	ev_buf_append(ud, p, sz * n);
	return sz * n;
}

static long post(int port, const char *path, const char *body, char **out)
{
	CURL *c = curl_easy_init();
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	ev_buf b = EV_BUF_INIT(1 << 24);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	long code = 0;
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	*out = b.data ? b.data : ev_strdup("");
	return code;
}

/* `evald serve` with a multimodal M3: an image_url data: URL answers as
 * `engine generate --chat --image` on the same text; an http URL, another
 * part type, and bytes that are no image are 4xx errors naming the part. */
static void serve_chat_with_an_image(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlserve", "minimax_m3_vl", &z, "f32", 5);
	unsigned char *rgb = pattern(90, 60, 3, 9);
	mem p = write_png(90, 60, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/cat.png", dir), *b64 = NULL;
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	assert_int_equal(ev_base64_encode(&b64, p.p, p.n), 0);
	int fd[2], port = 0;
	assert_int_equal(pipe(fd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(tu_evald(), tu_evald(), "serve", "--model", dir, "--port", "0", "--print-port", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	assert_true(f && fscanf(f, "%d", &port) == 1);
	fclose(f);
	char *body = ev_asprintf("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is it?\"},"
				 "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,%s\"}}]}],"
				 "\"max_tokens\":6,\"temperature\":0}", b64);
	char *out = NULL, *err = NULL;
	assert_int_equal(post(port, "/v1/chat/completions", body, &out), 200);
	cJSON *ans = cJSON_Parse(out);
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ans, "choices"), 0), "message"),
		"content");
	assert_true(cJSON_IsString(msg));
	free(out);
	int rc = tu_run(&out, &err, NULL,
			(const char *const[]){tu_evald(), "engine", "generate", "--model", dir, "--chat", "--prompt",
					      "What is it?\n" ENG_VISION_IMAGE_MARKER, "--image", png, "--max-tokens", "6", "--json", NULL});
	if (rc)
		fail_msg("generate: %s", err);
	cJSON *gen = cJSON_Parse(out);
	assert_string_equal(msg->valuestring, cJSON_GetObjectItemCaseSensitive(gen, "text")->valuestring);
	print_message("serve with an image: %s, as engine generate --image\n", msg->valuestring);
	cJSON_Delete(ans), cJSON_Delete(gen);
	free(out), free(err), free(body);
	static const char *const bad[][2] = {
		{"{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/cat.png\"}}", "fetches no image URLs"},
		{"{\"type\":\"input_audio\",\"input_audio\":{}}", "takes text and image_url parts"},
		{"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,aGVsbG8=\"}}", "not a PNG, JPEG, WebP or GIF image"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		body = ev_asprintf("{\"messages\":[{\"role\":\"user\",\"content\":[%s]}],\"max_tokens\":2}", bad[i][0]);
		long code = post(port, "/v1/chat/completions", body, &out);
		if (code < 400 || code >= 500 || !strstr(out, bad[i][1]))
			fail_msg("%s: %ld %s", bad[i][0], code, out);
		free(out), free(body);
	}
	kill(pid, SIGTERM);
	int st;
	waitpid(pid, &st, 0);
	free(png), free(b64), free(p.p), free(rgb), free(dir);
}

/* Videos: still frames preprocess as the image does; an odd count repeats
 * the last frame; the tower encodes segments of 4 temporal patches on
 * their own (the rows of frames 0-7 and of 8-9 alone are the rows of the
 * ten-frame video); the placeholder text; `evald run` with a video part
 * adds exactly that text's tokens to the prompt; frames of two sizes fail
 * naming the frame. */
static void videos_through_the_tower_and_run(void **state)
{
	(void)state;
	eng_vision_prep p = ENG_VISION_VIDEO_PREP_INIT;
	eng_image fr[10];
	for (int i = 0; i < 10; i++)
		fr[i] = (eng_image){56, 84, pattern(56, 84, 3, 40 + (uint64_t)i)};
	eng_vision_input img, vid, odd, last;
	eng_vision_prep ip = p;
	assert_int_equal(eng_vision_preprocess(&fr[0], &ip, &img), 0);
	eng_image two[2] = {fr[0], fr[0]};
	assert_int_equal(eng_vision_preprocess_video(two, 2, &p, &vid), 0);
	assert_int_equal(vid.n, img.n);
	assert_memory_equal(vid.pixels, img.pixels, (size_t)img.n * img.dim * sizeof(float));
	eng_vision_input_free(&vid);
	assert_int_equal(eng_vision_preprocess_video(fr, 3, &p, &odd), 0); /* frames 0 1 | 2 2 */
	eng_image pair[2] = {fr[2], fr[2]};
	assert_int_equal(eng_vision_preprocess_video(pair, 2, &p, &last), 0);
	assert_int_equal(odd.grid_t, 2);
	assert_memory_equal(odd.pixels + (size_t)last.n * last.dim, last.pixels, (size_t)last.n * last.dim * sizeof(float));
	eng_vision_input_free(&odd), eng_vision_input_free(&last), eng_vision_input_free(&img);
	eng_image bad[2] = {fr[0], {84, 56, fr[1].rgb}};
	assert_int_equal(eng_vision_preprocess_video(bad, 2, &p, &vid), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "frame 1"));

	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlvideo", "minimax_m3_vl", &z, "f32", 6);
	eng_vision_model *vm = NULL;
	assert_int_equal(eng_vision_model_load(&vm, dir), 0);
	eng_vision_input all, head, tail;
	assert_int_equal(eng_vision_preprocess_video(fr, 10, &p, &all), 0);
	assert_int_equal(eng_vision_preprocess_video(fr, 8, &p, &head), 0);
	assert_int_equal(eng_vision_preprocess_video(fr + 8, 2, &p, &tail), 0);
	float *ra = NULL, *rh = NULL, *rt = NULL;
	int na = 0, nh = 0, nt = 0;
	assert_int_equal(eng_vision_encode_video(vm, &all, &ra, &na), 0);
	assert_int_equal(eng_vision_encode_video(vm, &head, &rh, &nh), 0);
	assert_int_equal(eng_vision_encode_video(vm, &tail, &rt, &nt), 0);
	assert_int_equal(na, 5 * 6); /* 5 temporal patches of a 2 x 3 merged grid */
	assert_int_equal(nh + nt, na);
	size_t H = (size_t)eng_vision_model_text_hidden(vm);
	assert_memory_equal(ra, rh, (size_t)nh * H * sizeof(float));
	assert_memory_equal(ra + (size_t)nh * H, rt, (size_t)nt * H * sizeof(float));
	free(ra), free(rh), free(rt);
	eng_vision_input_free(&all), eng_vision_input_free(&head), eng_vision_input_free(&tail);
	eng_vision_model_free(vm);

	char *text = NULL;
	int idx[3] = {0, 3, 7};
	assert_int_equal(eng_vision_video_text(&text, idx, 3, 3.0, 2, 2, 2), 0);
	assert_string_equal(text, "]<]0.0 seconds[>[" ENG_VISION_START_MARKER ENG_VISION_VIDEO_MARKER ENG_VISION_VIDEO_MARKER
				  ENG_VISION_END_MARKER "]<]2.3 seconds[>[" ENG_VISION_START_MARKER ENG_VISION_VIDEO_MARKER
				  ENG_VISION_VIDEO_MARKER ENG_VISION_END_MARKER);
	free(text);
	assert_int_equal(eng_vision_video_text(&text, idx, 3, 0, 1, 1, 2), 0); /* no rate: no timestamps */
	assert_string_equal(text, ENG_VISION_START_MARKER ENG_VISION_VIDEO_MARKER ENG_VISION_END_MARKER);
	free(text);

	/* evald run: a suite with a video of 4 frames at 2 fps, and the same text alone */
	char *sd = tu_tmpdir("vidsuite"), *clip = ev_asprintf("%s/clip", sd);
	assert_int_equal(ev_mkdir_p(clip), 0);
	for (int i = 0; i < 4; i++) {
		mem m = write_png(84, 56, PNG_COLOR_TYPE_RGB, 8, fr[i].rgb, true, NULL, 0);
		char *f = ev_asprintf("%s/%d.png", clip, i);
		assert_int_equal(ev_file_write(f, m.p, m.n), 0);
		free(f), free(m.p);
	}
	char *suite = tu_write(sd, "s.jsonl",
			       "{\"id\":\"v\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What "
			       "happens?\"},{\"type\":\"video\",\"path\":\"clip\",\"fps\":2}]}],\"target\":\"x\"}\n"
			       "{\"id\":\"t\",\"input\":\"What happens?\",\"target\":\"x\"}\n");
	char *db = ev_asprintf("%s/t.db", sd), *vt = ev_asprintf("%s/v.txt", sd);
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL,
			(const char *const[]){ev, "--db", db, "run", "--model", dir, "--suite", suite, "--max-tokens", "4", NULL});
	if (rc)
		fail_msg("run: %s", err);
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", db, "--json", "export", "1", NULL}), 0);
	int pv = -1, pt = -1;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		cJSON *row = cJSON_Parse(line);
		assert_non_null(row);
		const char *id = cJSON_GetObjectItemCaseSensitive(row, "sample_id")->valuestring;
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(row, "error");
		if (cJSON_IsString(e))
			fail_msg("%s: %s", id, e->valuestring);
		*(strcmp(id, "v") ? &pt : &pv) = cJSON_GetObjectItemCaseSensitive(row, "prompt_tokens")->valueint;
		cJSON_Delete(row);
	}
	free(out), free(err);
	/* the video's text: 4 frames at 2 fps sampled at 1 a second = frames 0 and 2, one temporal patch */
	assert_int_equal(tu_run(&out, &err, NULL,
				(const char *const[]){ev, "engine", "preprocess", "--video", clip, "--fps", "2", "--text-out", vt,
						      NULL}),
			 0);
	free(out), free(err);
	char *vtext = NULL;
	size_t vl = 0;
	assert_int_equal(ev_file_read(&vtext, &vl, vt, 1 << 20), 0);
	assert_true(ev_str_starts(vtext, "]<]0.0 seconds[>[" ENG_VISION_START_MARKER));
	eng_tokenizer *tok = NULL;
	assert_int_equal(eng_tokenizer_load(&tok, dir), 0);
	int32_t *ids = NULL;
	size_t nids = 0;
	assert_int_equal(eng_tokenize(tok, vtext, vl, true, &ids, &nids), 0);
	print_message("run with a video: %d prompt tokens, %d without it, the video's text %zu tokens\n", pv, pt, nids);
	assert_int_equal(pv - pt, (int)nids + 1); /* + the newline joining the parts */
	free(ids), free(vtext);
	eng_tokenizer_free(tok);
	for (int i = 0; i < 10; i++)
		free(fr[i].rgb);
	free(sd), free(clip), free(suite), free(db), free(vt), free(dir);
}

/* The preprocessing fingerprint: a multimodal run stores it, `evald
 * compare` lists what differs (the chat template here), runs that agree
 * show nothing, and a text-only run of the same checkpoint has none. */
static void compare_flags_preprocessing_that_differs(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlfp", "minimax_m3_vl", &z, "f32", 5);
	char *sd = tu_tmpdir("fpsuite");
	unsigned char *rgb = pattern(56, 56, 3, 11);
	mem p = write_png(56, 56, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/a.png", sd), *db = ev_asprintf("%s/t.db", sd);
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	char *mm = tu_write(sd, "mm.jsonl", "{\"id\":\"1\",\"input\":\"Colour?\",\"attachments\":[\"a.png\"],\"target\":\"red\"}\n");
	char *txt = tu_write(sd, "txt.jsonl", "{\"id\":\"1\",\"input\":\"Colour?\",\"target\":\"red\"}\n");
	const char *ev = tu_evald();
	const char *runs[4][3] = {{mm, NULL}, {mm, "chatml"}, {mm, NULL}, {txt, NULL}};
	for (int i = 0; i < 4; i++) {
		char *out = NULL, *err = NULL;
		const char *argv[16] = {ev, "--db", db, "-q", "run", "--model", dir, "--suite", runs[i][0], "--max-tokens", "2"};
		int k = 11;
		if (runs[i][1])
			argv[k++] = "--chat-template", argv[k++] = runs[i][1];
		argv[k] = NULL;
		if (tu_run(&out, &err, NULL, argv))
			fail_msg("run %d: %s", i, err);
		free(out), free(err);
	}
	char *out = NULL, *err = NULL;
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", db, "--json", "compare", "1", "2", NULL}), 0);
	cJSON *j = cJSON_Parse(out);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "preprocessing_differs");
	bool hash = false;
	const cJSON *x;
	cJSON_ArrayForEach(x, d) hash = hash || !strcmp(cJSON_GetObjectItemCaseSensitive(x, "key")->valuestring, "template_hash");
	assert_true(hash);
	cJSON_Delete(j);
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", db, "--json", "compare", "1", "3", NULL}), 0);
	j = cJSON_Parse(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "preprocessing_differs")), 0);
	cJSON_Delete(j);
	free(out), free(err);
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){ev, "--db", db, "compare", "4", "1", NULL}), 0);
	if (!strstr(out, "preprocessed images differently") || !strstr(out, "fingerprint: absent -> {"))
		fail_msg("compare text-only -> multimodal: %s", out);
	free(out), free(err);
	free(png), free(db), free(mm), free(txt), free(sd), free(p.p), free(rgb), free(dir);
}

/* `evald serve --model DIR [--image-root ROOT]` on a free port (its pid in *pid). */
static int serve_start_root(const char *dir, const char *root, pid_t *pid)
{
	int fd[2], port = 0;
	assert_int_equal(pipe(fd), 0);
	*pid = fork();
	if (*pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		if (root)
			execl(tu_evald(), tu_evald(), "serve", "--model", dir, "--port", "0", "--print-port", "--image-root", root,
			      (char *)NULL);
		else
			execl(tu_evald(), tu_evald(), "serve", "--model", dir, "--port", "0", "--print-port", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	assert_true(f && fscanf(f, "%d", &port) == 1);
	fclose(f);
	return port;
}

static int serve_start(const char *dir, pid_t *pid)
{
	return serve_start_root(dir, NULL, pid);
}

/* the first choice's message content of a chat answer, or a Responses answer's output text */
static char *answer_text(const char *json)
{
	cJSON *a = cJSON_Parse(json);
	assert_non_null(a);
	const cJSON *ch = cJSON_GetObjectItemCaseSensitive(a, "choices");
	char *t = NULL;
	if (ch) {
		t = ev_strdup(cJSON_GetObjectItemCaseSensitive(
				      cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ch, 0), "message"), "content")
				      ->valuestring);
	} else {
		const cJSON *it;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(a, "output"))
		{
			const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "content"), 0);
			if (c && !t)
				t = ev_strdup(cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring);
		}
	}
	assert_non_null(t);
	cJSON_Delete(a);
	return t;
}

/* `evald serve --image-root DIR`: an image named by a file:// URL (absolute
 * or relative to the root) answers as the same image sent inline; paths
 * outside the root (absolute, "..", a link leading out) are refused with
 * 4xx, and so is any file:// URL without --image-root; /v1/responses takes
 * input_image parts and answers as chat does. */
static void serve_reads_images_under_its_root_and_responses_take_them(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlroot", "minimax_m3_vl", &z, "f32", 9);
	char *root = tu_tmpdir("imgroot");
	unsigned char *rgb = pattern(84, 56, 3, 31);
	mem p = write_png(84, 56, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/cat.png", root), *lnk = ev_asprintf("%s/out.png", root), *b64 = NULL;
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	assert_int_equal(symlink("/etc/hostname", lnk), 0);
	assert_int_equal(ev_base64_encode(&b64, p.p, p.n), 0);
	pid_t pid, pid2;
	int port = serve_start_root(dir, root, &pid), port2 = serve_start(dir, &pid2);
	char *url_abs = ev_asprintf("file://%s", png);
	const char *urls[3] = {NULL, url_abs, "file://cat.png"};
	char *first = NULL;
	for (int i = 0; i < 3; i++) {
		char *u = i ? ev_strdup(urls[i]) : ev_asprintf("data:image/png;base64,%s", b64);
		char *body = ev_asprintf("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
					 "\"What is it?\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}}]}],"
					 "\"max_tokens\":6,\"temperature\":0}", u);
		char *out = NULL;
		long code = post(port, "/v1/chat/completions", body, &out);
		if (code != 200)
			fail_msg("%s: %ld %s", u, code, out);
		char *t = answer_text(out);
		if (!first)
			first = ev_strdup(t);
		assert_string_equal(t, first);
		free(t), free(out), free(body), free(u);
	}
	/* the Responses form: input_text and input_image */
	char *rbody = ev_asprintf("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
				  "\"What is it?\"},{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,%s\"}]}],"
				  "\"max_output_tokens\":6,\"temperature\":0}", b64);
	char *out = NULL;
	long code = post(port, "/v1/responses", rbody, &out);
	if (code != 200)
		fail_msg("responses: %ld %s", code, out);
	char *rt = answer_text(out);
	assert_string_equal(rt, first);
	print_message("serve: the image inline, by file:// (absolute and relative) and through /v1/responses: %s\n", rt);
	free(rt), free(out), free(rbody);
	const char *bad[][3] = {{"file:///etc/hostname", "outside the server's --image-root", "1"},
				{"file://../x.png", "outside the server's --image-root", "1"},
				{"file://out.png", "outside the server's --image-root", "1"},
				{"file://cat.png", "--image-root", "2"}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *body = ev_asprintf("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
					 "\"image_url\":{\"url\":\"%s\"}}]}],\"max_tokens\":2}", bad[i][0]);
		code = post(bad[i][2][0] == '1' ? port : port2, "/v1/chat/completions", body, &out);
		if (code < 400 || code >= 500 || !strstr(out, bad[i][1]))
			fail_msg("%s: %ld %s", bad[i][0], code, out);
		free(out), free(body);
	}
	int st;
	kill(pid, SIGTERM), kill(pid2, SIGTERM);
	waitpid(pid, &st, 0), waitpid(pid2, &st, 0);
	free(first), free(url_abs), free(png), free(lnk), free(b64), free(p.p), free(rgb), free(root), free(dir);
}

/* Each exported result of run 1 of `db`: sample id -> (response, prompt
 * tokens), failing on any error. */
static cJSON *results_of(const char *db)
{
	char *out = NULL, *err = NULL;
	assert_int_equal(tu_run(&out, &err, NULL, (const char *const[]){tu_evald(), "--db", db, "--json", "export", "1", NULL}), 0);
	cJSON *all = cJSON_CreateObject();
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		cJSON *row = cJSON_Parse(line);
		assert_non_null(row);
		const char *id = cJSON_GetObjectItemCaseSensitive(row, "sample_id")->valuestring;
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(row, "error");
		if (cJSON_IsString(e))
			fail_msg("%s: %s: %s", db, id, e->valuestring);
		cJSON_AddItemToObject(all, id, row);
	}
	free(out), free(err);
	return all;
}

/* A community report with a screenshot becomes a case (`evald issue
 * repro`) that runs on the engine and on an OpenAI-compatible server (evald
 * serve with the same checkpoint) alike: the image reaches the model both
 * ways (the same prompt length and greedy answer); the generated
 * multimodal suite's images and videos run through the server too. */
static void issue_repro_with_an_image_runs_on_engine_and_server(void **state)
{
	(void)state;
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 320;
	char *dir = et_mkmodel("m3vlrepro", "minimax_m3_vl", &z, "f32", 7);
	char *sd = tu_tmpdir("repro");
	unsigned char *rgb = pattern(84, 56, 3, 21);
	mem p = write_png(84, 56, PNG_COLOR_TYPE_RGB, 8, rgb, true, NULL, 0);
	char *png = ev_asprintf("%s/shot.png", sd), *db = ev_asprintf("%s/t.db", sd), *db2 = ev_asprintf("%s/u.db", sd);
	char *cs = ev_asprintf("%s/community", sd), *mm = ev_asprintf("%s/mm", sd);
	assert_int_equal(ev_file_write(png, p.p, p.n), 0);
	const char *ev = tu_evald();
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL,
			(const char *const[]){ev, "--db", db, "issue", "add", "--title", "Miscounts the circles", "--attach", png,
					      "--prompt", "How many circles are in the image?", "--output", "4", "--expected",
					      "5", NULL});
	if (rc)
		fail_msg("issue add: %s", err);
	free(out), free(err);
	rc = tu_run(&out, &err, NULL,
		    (const char *const[]){ev, "--db", db, "issue", "repro", "1", "--target", "5", "--suite-dir", cs, NULL});
	if (rc)
		fail_msg("issue repro: %s", err);
	free(out), free(err);
	ev_multimodal_options mo = {.samples = 1, .side = 112, .seed = 3};
	const char *tasks[] = {"count", "compare", "video-order"};
	mo.tasks = tasks, mo.n_tasks = 3;
	assert_int_equal(ev_gen_multimodal(&mo, mm), 0);
	pid_t pid;
	int port = serve_start(dir, &pid);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
	const char *runs[2][2] = {{db, dir}, {db2, url}};
	for (int i = 0; i < 2; i++) {
		rc = tu_run(&out, &err, NULL,
			    (const char *const[]){ev, "--db", runs[i][0], "-q", "run", "--model", runs[i][1],
						  "--suite", cs, "--suite", mm, "--max-tokens", "6", NULL});
		if (rc)
			fail_msg("run on %s: %s", runs[i][1], err);
		free(out), free(err);
	}
	kill(pid, SIGTERM);
	int st;
	waitpid(pid, &st, 0);
	cJSON *a = results_of(db), *b = results_of(db2);
	const char *same[] = {"issue-1", "count-0", "compare-0"};
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, same[i]), *y = cJSON_GetObjectItemCaseSensitive(b, same[i]);
		assert_non_null(x);
		assert_non_null(y);
		assert_string_equal(cJSON_GetObjectItemCaseSensitive(x, "response")->valuestring,
				    cJSON_GetObjectItemCaseSensitive(y, "response")->valuestring);
		assert_int_equal(cJSON_GetObjectItemCaseSensitive(x, "prompt_tokens")->valueint,
				 cJSON_GetObjectItemCaseSensitive(y, "prompt_tokens")->valueint);
		print_message("%s: engine and server both answer %s from %d prompt tokens\n", same[i],
			      cJSON_GetObjectItemCaseSensitive(x, "response")->valuestring,
			      cJSON_GetObjectItemCaseSensitive(x, "prompt_tokens")->valueint);
	}
	/* a video: on the engine its frames pair into temporal patches; a server gets them as timed images */
	const cJSON *va = cJSON_GetObjectItemCaseSensitive(a, "video-order-0"), *vb = cJSON_GetObjectItemCaseSensitive(b, "video-order-0");
	assert_non_null(va);
	assert_non_null(vb);
	print_message("video-order-0: %d prompt tokens on the engine, %d through the server (frames as images)\n",
		      cJSON_GetObjectItemCaseSensitive(va, "prompt_tokens")->valueint,
		      cJSON_GetObjectItemCaseSensitive(vb, "prompt_tokens")->valueint);
	assert_true(cJSON_GetObjectItemCaseSensitive(vb, "prompt_tokens")->valueint >
		    cJSON_GetObjectItemCaseSensitive(va, "prompt_tokens")->valueint);
	cJSON_Delete(a), cJSON_Delete(b);
	free(png), free(db), free(db2), free(cs), free(mm), free(sd), free(p.p), free(rgb), free(dir);
}

static int gif_write_mem(GifFileType *g, const GifByteType *b, int n)
{
	ev_buf_append(g->UserData, b, (size_t)n);
	return n;
}

/* A GIF of w x h with a 4-colour map; a frame (fw x fh at fx, fy) of
 * index (x + 2y) % 4, interlaced or not; the screen's background index 3. */
static ev_buf make_gif(int w, int h, int fx, int fy, int fw, int fh, bool interlace)
{
	ev_buf b = EV_BUF_INIT(1 << 24);
	int err = 0;
	GifFileType *g = EGifOpen(&b, gif_write_mem, &err);
	assert_non_null(g);
	GifColorType cols[4] = {{250, 10, 10}, {10, 250, 10}, {10, 10, 250}, {200, 200, 20}};
	ColorMapObject *cm = GifMakeMapObject(4, cols);
	assert_int_equal(EGifPutScreenDesc(g, w, h, 2, 3, cm), GIF_OK);
	assert_int_equal(EGifPutImageDesc(g, fx, fy, fw, fh, interlace, NULL), GIF_OK);
	GifPixelType *line = malloc((size_t)fw);
	/* interlaced: rows go in the four passes' order */
	static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
	for (int ps = 0; ps < (interlace ? 4 : 1); ps++)
		for (int y = interlace ? start[ps] : 0; y < fh; y += interlace ? step[ps] : 1) {
			for (int x = 0; x < fw; x++)
				line[x] = (GifPixelType)((x + 2 * y) % 4);
			assert_int_equal(EGifPutLine(g, line, fw), GIF_OK);
		}
	free(line);
	GifFreeMapObject(cm);
	assert_int_equal(EGifCloseFile(g, &err), GIF_OK);
	return b;
}

/* WebP (lossless: exact pixels; an animation: its first frame) and GIF (a
 * frame placed on the screen, interlaced rows put back, the background
 * elsewhere); truncated files and huge declared sizes fail cleanly. */
static void webp_and_gif_decode(void **state)
{
	(void)state;
	unsigned char *rgb = pattern(37, 23, 3, 5);
	uint8_t *enc = NULL;
	size_t n = WebPEncodeLosslessRGB(rgb, 37, 23, 37 * 3, &enc);
	assert_true(n > 0);
	eng_image im;
	assert_int_equal(eng_image_decode(&im, enc, n, NULL), 0);
	assert_int_equal(im.w, 37);
	assert_int_equal(im.h, 23);
	assert_memory_equal(im.rgb, rgb, 37 * 23 * 3);
	eng_image_free(&im);
	assert_int_equal(eng_image_decode(&im, enc, n / 2, NULL), EV_E_INVALID); /* truncated */
	eng_image_limits small = {.max_pixels = 500};
	assert_int_equal(eng_image_decode(&im, enc, n, &small), EV_E_LIMIT);
	WebPFree(enc);

	/* two frames: the first is what a still reader takes */
	WebPAnimEncoderOptions ao;
	assert_true(WebPAnimEncoderOptionsInit(&ao));
	WebPAnimEncoder *ae = WebPAnimEncoderNew(16, 12, &ao);
	WebPConfig cfg;
	assert_true(WebPConfigInit(&cfg));
	cfg.lossless = 1;
	unsigned char *f0 = pattern(16, 12, 4, 6), *f1 = pattern(16, 12, 4, 7);
	for (int i = 0; i < 16 * 12; i++)
		f0[4 * i + 3] = f1[4 * i + 3] = 255;
	WebPPicture pic;
	for (int k = 0; k < 2; k++) {
		assert_true(WebPPictureInit(&pic));
		pic.use_argb = 1, pic.width = 16, pic.height = 12;
		assert_true(WebPPictureImportRGBA(&pic, k ? f1 : f0, 16 * 4));
		assert_true(WebPAnimEncoderAdd(ae, &pic, k * 100, &cfg));
		WebPPictureFree(&pic);
	}
	assert_true(WebPAnimEncoderAdd(ae, NULL, 200, NULL));
	WebPData wd;
	WebPDataInit(&wd);
	assert_true(WebPAnimEncoderAssemble(ae, &wd));
	assert_int_equal(eng_image_decode(&im, wd.bytes, wd.size, NULL), 0);
	for (int i = 0; i < 16 * 12; i++)
		assert_memory_equal(im.rgb + 3 * i, f0 + 4 * i, 3);
	eng_image_free(&im);
	WebPDataClear(&wd);
	WebPAnimEncoderDelete(ae);
	free(f0), free(f1);

	static const uint8_t cols[4][3] = {{250, 10, 10}, {10, 250, 10}, {10, 10, 250}, {200, 200, 20}};
	for (int il = 0; il < 2; il++) {
		ev_buf g = make_gif(20, 15, 3, 2, 11, 10, il);
		assert_int_equal(eng_image_decode(&im, g.data, g.len, NULL), 0);
		assert_int_equal(im.w, 20);
		assert_int_equal(im.h, 15);
		for (int y = 0; y < 15; y++)
			for (int x = 0; x < 20; x++) {
				bool in = x >= 3 && x < 14 && y >= 2 && y < 12;
				int k = in ? ((x - 3) + 2 * (y - 2)) % 4 : 3;
				assert_memory_equal(im.rgb + 3 * (y * 20 + x), cols[k], 3);
			}
		eng_image_free(&im);
		assert_int_equal(eng_image_decode(&im, g.data, g.len - 12, NULL), EV_E_INVALID);
		ev_buf_free(&g);
	}
	/* a screen of 65535 x 65535 declared in 13 bytes: refused before any pixel */
	ev_buf g = make_gif(65535, 65535, 0, 0, 1, 1, false);
	assert_int_equal(eng_image_decode(&im, g.data, g.len, NULL), EV_E_LIMIT);
	assert_non_null(strstr(ev_error_msg(), "GIF image of 65535 x 65535"));
	ev_buf_free(&g);
	free(rgb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(png_colour_forms_decode_to_rgb),
		cmocka_unit_test(jpeg_decodes_and_exif_orientation_turns),
		cmocka_unit_test(hostile_images_fail_cleanly),
		cmocka_unit_test(webp_and_gif_decode),
		cmocka_unit_test(smart_resize_known_cases),
		cmocka_unit_test(patches_in_merge_group_order),
		cmocka_unit_test(image_rows_replace_placeholders),
		cmocka_unit_test(generate_with_an_image_on_the_command_line),
		cmocka_unit_test(run_a_suite_with_images),
		cmocka_unit_test(serve_chat_with_an_image),
		cmocka_unit_test(videos_through_the_tower_and_run),
		cmocka_unit_test(compare_flags_preprocessing_that_differs),
		cmocka_unit_test(issue_repro_with_an_image_runs_on_engine_and_server),
		cmocka_unit_test(serve_reads_images_under_its_root_and_responses_take_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
