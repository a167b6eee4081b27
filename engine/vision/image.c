/*
 * engine/vision/image.c: PNG (libpng) and JPEG (libjpeg-turbo) into 8-bit
 * RGB, the format told by the first bytes, sizes checked from the header
 * before pixels are allocated, a JPEG's EXIF orientation applied.
 */
#include <png.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include <gif_lib.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "base/base.h"
#include "engine/vision/vision.h"

#define DEFAULT_MAX_BYTES ((size_t)64 << 20)
#define DEFAULT_MAX_PIXELS (64L << 20)

static void limits_of(const eng_image_limits *lim, size_t *bytes, long *pixels)
{
	*bytes = lim && lim->max_bytes ? lim->max_bytes : DEFAULT_MAX_BYTES;
	*pixels = lim && lim->max_pixels ? lim->max_pixels : DEFAULT_MAX_PIXELS;
}

static int check_size(const char *fmt, unsigned long w, unsigned long h, long max_pixels)
{
	if (w == 0 || h == 0)
		return ev_error_set(EV_E_INVALID, "%s image of %lu x %lu pixels: empty", fmt, w, h);
	if (w > (unsigned long)max_pixels || h > (unsigned long)max_pixels || (double)w * (double)h > (double)max_pixels)
		return ev_error_set(EV_E_LIMIT, "%s image of %lu x %lu pixels: more than the %ld pixels allowed", fmt, w, h,
				    max_pixels);
	return 0;
}

/* ---- PNG ------------------------------------------------------------------ */

typedef struct {
	const unsigned char *p;
	size_t n, at;
	char why[160];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t len)
{
	png_src *s = png_get_io_ptr(png);
	if (len > s->n - s->at) {
		snprintf(s->why, sizeof s->why, "truncated (%zu bytes)", s->n);
		png_error(png, "truncated");
	}
	memcpy(out, s->p + s->at, len);
	s->at += len;
}

static void png_fail(png_structp png, png_const_charp msg)
{
	png_src *s = png_get_error_ptr(png);
	if (!s->why[0])
		snprintf(s->why, sizeof s->why, "%s", msg);
	png_longjmp(png, 1);
}

static void png_quiet(png_structp png, png_const_charp msg)
{
	(void)png, (void)msg;
}

static int decode_png(eng_image *out, const unsigned char *data, size_t n, long max_pixels)
{
	/* the size from IHDR (signature, length, "IHDR", width, height) before
	 * libpng reads further: a bomb is refused from its first 24 bytes */
	if (n >= 24 && !memcmp(data + 12, "IHDR", 4)) {
		unsigned long w = (unsigned long)data[16] << 24 | (unsigned long)data[17] << 16 | (unsigned long)data[18] << 8 | data[19];
		unsigned long h = (unsigned long)data[20] << 24 | (unsigned long)data[21] << 16 | (unsigned long)data[22] << 8 | data[23];
		int rc = check_size("PNG", w, h, max_pixels);
		if (rc)
			return rc;
	}
	png_src src = {data, n, 0, ""};
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_quiet);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	uint8_t *volatile rgb = NULL;
	png_bytep *volatile rows = NULL;
	int rc = 0;
	if (!png || !info) {
		png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
		return ev_error_set(EV_E_NOMEM, "out of memory for the PNG decoder");
	}
	if (setjmp(png_jmpbuf(png))) {
		rc = ev_error_set(EV_E_INVALID, "PNG image: %s", src.why[0] ? src.why : "corrupt");
		goto done;
	}
	png_set_read_fn(png, &src, png_read_mem);
	/* libpng's own guard too, so no chunk or row count outgrows the limit */
	png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
	png_set_chunk_malloc_max(png, 64u << 20);
	png_read_info(png, info);
	png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
	if ((rc = check_size("PNG", w, h, max_pixels)))
		goto done;
	int bits = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
	if (type == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (type == PNG_COLOR_TYPE_GRAY && bits < 8)
		png_set_expand_gray_1_2_4_to_8(png);
	if (bits == 16)
		png_set_strip_16(png);
	if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(png);
	png_set_strip_alpha(png); /* an alpha channel, or one tRNS expanded into */
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_rowbytes(png, info) != (size_t)w * 3) {
		rc = ev_error_set(EV_E_UNSUPPORTED, "PNG image: a pixel layout other than 8-bit RGB after conversion");
		goto done;
	}
	rgb = malloc((size_t)w * h * 3);
	rows = malloc((size_t)h * sizeof(png_bytep));
	if (!rgb || !rows) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory for a %u x %u PNG image", (unsigned)w, (unsigned)h);
		goto done;
	}
	for (png_uint_32 y = 0; y < h; y++)
		rows[y] = rgb + (size_t)y * w * 3;
	png_read_image(png, rows);
	out->w = (int)w, out->h = (int)h, out->rgb = rgb;
	rgb = NULL;
done:
	free(rows);
	free(rgb);
	png_destroy_read_struct(&png, &info, NULL);
	return rc;
}

/* ---- JPEG ----------------------------------------------------------------- */

typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char why[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_fail(j_common_ptr c)
{
	jpeg_err *e = (jpeg_err *)c->err;
	c->err->format_message(c, e->why);
	longjmp(e->jb, 1);
}

static void jpeg_quiet(j_common_ptr c, int level)
{
	/* a corrupt-data warning means a damaged stream: refuse it */
	if (level < 0) {
		jpeg_err *e = (jpeg_err *)c->err;
		c->err->format_message(c, e->why);
		longjmp(e->jb, 1);
	}
}

static unsigned rd16(const unsigned char *p, bool le)
{
	return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | (unsigned)p[1];
}

static unsigned long rd32(const unsigned char *p, bool le)
{
	return le ? (unsigned long)p[0] | (unsigned long)p[1] << 8 | (unsigned long)p[2] << 16 | (unsigned long)p[3] << 24
		  : (unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 | (unsigned long)p[3];
}

/* The orientation tag (0x0112) of an APP1 Exif block, 1 when absent or
 * unreadable (every offset checked against the block). */
static int exif_orientation(const unsigned char *d, size_t n)
{
	if (n < 14 || memcmp(d, "Exif\0\0", 6))
		return 1;
	const unsigned char *t = d + 6;
	size_t tn = n - 6;
	bool le = t[0] == 'I' && t[1] == 'I';
	if (!le && !(t[0] == 'M' && t[1] == 'M'))
		return 1;
	if (rd16(t + 2, le) != 42)
		return 1;
	unsigned long ifd = rd32(t + 4, le);
	if (ifd > tn - 2)
		return 1;
	unsigned cnt = rd16(t + ifd, le);
	for (unsigned i = 0; i < cnt; i++) {
		size_t e = ifd + 2 + (size_t)i * 12;
		if (e + 12 > tn)
			return 1;
		if (rd16(t + e, le) == 0x0112 && rd16(t + e + 2, le) == 3) {
			unsigned v = rd16(t + e + 8, le);
			return v >= 1 && v <= 8 ? (int)v : 1;
		}
	}
	return 1;
}

static int decode_jpeg(eng_image *out, const unsigned char *data, size_t n, long max_pixels, int *orient)
{
	struct jpeg_decompress_struct c;
	jpeg_err err;
	memset(&err, 0, sizeof err);
	c.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = jpeg_fail;
	err.pub.emit_message = jpeg_quiet;
	uint8_t *volatile rgb = NULL;
	int rc = 0;
	jpeg_create_decompress(&c);
	if (setjmp(err.jb)) {
		rc = ev_error_set(EV_E_INVALID, "JPEG image: %s", err.why[0] ? err.why : "corrupt");
		goto done;
	}
	jpeg_mem_src(&c, data, (unsigned long)n);
	jpeg_save_markers(&c, JPEG_APP0 + 1, 0xffff);
	jpeg_read_header(&c, TRUE);
	if ((rc = check_size("JPEG", c.image_width, c.image_height, max_pixels)))
		goto done;
	*orient = 1;
	for (jpeg_saved_marker_ptr mk = c.marker_list; mk; mk = mk->next)
		if (mk->marker == JPEG_APP0 + 1 && (*orient = exif_orientation(mk->data, mk->data_length)) != 1)
			break;
	c.out_color_space = JCS_RGB;
	jpeg_start_decompress(&c);
	if (c.output_components != 3) {
		rc = ev_error_set(EV_E_UNSUPPORTED, "JPEG image: %d components after conversion to RGB", c.output_components);
		goto done;
	}
	size_t stride = (size_t)c.output_width * 3;
	if (!(rgb = malloc(stride * c.output_height))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory for a %u x %u JPEG image", c.output_width, c.output_height);
		goto done;
	}
	while (c.output_scanline < c.output_height) {
		JSAMPROW row = rgb + stride * c.output_scanline;
		jpeg_read_scanlines(&c, &row, 1);
	}
	jpeg_finish_decompress(&c);
	out->w = (int)c.output_width, out->h = (int)c.output_height, out->rgb = rgb;
	rgb = NULL;
done:
	free(rgb);
	jpeg_destroy_decompress(&c);
	return rc;
}

/* Turns the image as EXIF orientation o asks (2-8), as PIL's
 * ImageOps.exif_transpose: each output pixel's source. */
static int orient_image(eng_image *im, int o)
{
	int W = im->w, H = im->h, ow = o >= 5 ? H : W, oh = o >= 5 ? W : H;
	uint8_t *d = malloc((size_t)W * H * 3);
	if (!d)
		return ev_error_set(EV_E_NOMEM, "out of memory turning a %d x %d image", W, H);
	for (int y = 0; y < oh; y++)
		for (int x = 0; x < ow; x++) {
			int sx = x, sy = y;
			switch (o) {
			case 2: sx = W - 1 - x; break;
			case 3: sx = W - 1 - x, sy = H - 1 - y; break;
			case 4: sy = H - 1 - y; break;
			case 5: sx = y, sy = x; break;
			case 6: sx = y, sy = H - 1 - x; break;
			case 7: sx = W - 1 - y, sy = H - 1 - x; break;
			case 8: sx = W - 1 - y, sy = x; break;
			default: break;
			}
			memcpy(d + ((size_t)y * ow + x) * 3, im->rgb + ((size_t)sy * W + sx) * 3, 3);
		}
	free(im->rgb);
	im->rgb = d, im->w = ow, im->h = oh;
	return 0;
}

/* ---- WebP (libwebp; an animation's first frame through libwebpdemux) ----- */

static int decode_webp(eng_image *out, const unsigned char *data, size_t n, long max_pixels)
{
	WebPBitstreamFeatures f;
	if (WebPGetFeatures(data, n, &f) != VP8_STATUS_OK)
		return ev_error_set(EV_E_INVALID, "WebP image: a truncated or corrupt header");
	int rc = check_size("WebP", (unsigned long)f.width, (unsigned long)f.height, max_pixels);
	if (rc)
		return rc;
	size_t np = (size_t)f.width * (size_t)f.height;
	if (!(out->rgb = malloc(np * 3)))
		return ev_error_set(EV_E_NOMEM, "out of memory for a %d x %d image", f.width, f.height);
	out->w = f.width, out->h = f.height;
	if (!f.has_animation) {
		if (!WebPDecodeRGBInto(data, n, out->rgb, np * 3, f.width * 3)) {
			eng_image_free(out);
			return ev_error_set(EV_E_INVALID, "WebP image of %d x %d pixels: truncated or corrupt data", f.width,
					    f.height);
		}
		return 0;
	}
	/* an animation: its canvas after the first frame, alpha dropped */
	WebPData wd = {data, n};
	WebPAnimDecoderOptions o;
	WebPAnimDecoderOptionsInit(&o);
	o.color_mode = MODE_RGBA;
	o.use_threads = 0;
	WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &o);
	WebPAnimInfo info;
	uint8_t *rgba = NULL;
	int ts = 0;
	if (!dec || !WebPAnimDecoderGetInfo(dec, &info) || info.canvas_width != (uint32_t)f.width ||
	    info.canvas_height != (uint32_t)f.height || !WebPAnimDecoderGetNext(dec, &rgba, &ts)) {
		WebPAnimDecoderDelete(dec);
		eng_image_free(out);
		return ev_error_set(EV_E_INVALID, "animated WebP image of %d x %d pixels: its first frame is truncated or "
						  "corrupt", f.width, f.height);
	}
	for (size_t i = 0; i < np; i++)
		memcpy(out->rgb + 3 * i, rgba + 4 * i, 3);
	WebPAnimDecoderDelete(dec);
	return 0;
}

/* ---- GIF (giflib): the first frame on the logical screen ------------------- */

typedef struct {
	const unsigned char *p;
	size_t n, at;
} gif_src;

static int gif_read(GifFileType *g, GifByteType *buf, int len)
{
	gif_src *s = g->UserData;
	size_t k = len < 0 ? 0 : (size_t)len;
	if (k > s->n - s->at)
		k = s->n - s->at;
	memcpy(buf, s->p + s->at, k);
	s->at += k;
	return (int)k;
}

static int decode_gif(eng_image *out, const unsigned char *data, size_t n, long max_pixels)
{
	gif_src src = {data, n, 0};
	int err = 0, rc = 0;
	GifFileType *g = DGifOpen(&src, gif_read, &err);
	if (!g)
		return ev_error_set(EV_E_INVALID, "GIF image: %s", GifErrorString(err) ? GifErrorString(err) : "bad header");
	GifByteType *line = NULL;
	if ((rc = check_size("GIF", (unsigned long)g->SWidth, (unsigned long)g->SHeight, max_pixels)))
		goto done;
	int W = g->SWidth, H = g->SHeight;
	if (!(out->rgb = calloc((size_t)W * (size_t)H, 3)) || !(line = malloc((size_t)W))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory for a %d x %d image", W, H);
		goto done;
	}
	out->w = W, out->h = H;
	/* the screen starts as the background colour (black without a global map) */
	const ColorMapObject *gm = g->SColorMap;
	if (gm && g->SBackGroundColor < gm->ColorCount)
		for (size_t i = 0; i < (size_t)W * H; i++) {
			const GifColorType *c = &gm->Colors[g->SBackGroundColor];
			out->rgb[3 * i] = c->Red, out->rgb[3 * i + 1] = c->Green, out->rgb[3 * i + 2] = c->Blue;
		}
	GifRecordType t;
	do {
		if (DGifGetRecordType(g, &t) == GIF_ERROR) {
			rc = ev_error_set(EV_E_INVALID, "GIF image: truncated or corrupt (%s)", GifErrorString(g->Error));
			goto done;
		}
		if (t == EXTENSION_RECORD_TYPE) {
			int code;
			GifByteType *ext = NULL;
			if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) {
				rc = ev_error_set(EV_E_INVALID, "GIF image: a corrupt extension");
				goto done;
			}
			while (ext)
				if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) {
					rc = ev_error_set(EV_E_INVALID, "GIF image: a corrupt extension");
					goto done;
				}
		}
	} while (t != IMAGE_DESC_RECORD_TYPE && t != TERMINATE_RECORD_TYPE);
	if (t == TERMINATE_RECORD_TYPE || DGifGetImageDesc(g) == GIF_ERROR) {
		rc = ev_error_set(EV_E_INVALID, "GIF image: no frame");
		goto done;
	}
	const GifImageDesc *d = &g->Image;
	const ColorMapObject *cm = d->ColorMap ? d->ColorMap : gm;
	if (!cm || d->Width <= 0 || d->Height <= 0 || d->Width > W || d->Height > H || d->Left > W - d->Width ||
	    d->Top > H - d->Height) {
		rc = ev_error_set(EV_E_INVALID, "GIF image: a frame of %d x %d at (%d, %d) outside the %d x %d screen%s",
				  d->Width, d->Height, d->Left, d->Top, W, H, cm ? "" : ", or no colour map");
		goto done;
	}
	/* rows in file order: interlaced frames come in four passes */
	static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
	int passes = d->Interlace ? 4 : 1;
	for (int ps = 0; ps < passes; ps++)
		for (int y = d->Interlace ? start[ps] : 0; y < d->Height; y += d->Interlace ? step[ps] : 1) {
			if (DGifGetLine(g, line, d->Width) == GIF_ERROR) {
				rc = ev_error_set(EV_E_INVALID, "GIF image of %d x %d pixels: truncated or corrupt data", W, H);
				goto done;
			}
			uint8_t *o = out->rgb + 3 * ((size_t)(d->Top + y) * W + d->Left);
			for (int x = 0; x < d->Width; x++) {
				int k = line[x] < cm->ColorCount ? line[x] : 0;
				o[3 * x] = cm->Colors[k].Red, o[3 * x + 1] = cm->Colors[k].Green, o[3 * x + 2] = cm->Colors[k].Blue;
			}
		}
done:
	free(line);
	DGifCloseFile(g, &err);
	if (rc)
		eng_image_free(out);
	return rc;
}

int eng_image_decode(eng_image *out, const void *data, size_t n, const eng_image_limits *lim)
{
	memset(out, 0, sizeof *out);
	size_t max_bytes;
	long max_pixels;
	limits_of(lim, &max_bytes, &max_pixels);
	const unsigned char *p = data;
	if (n > max_bytes)
		return ev_error_set(EV_E_LIMIT, "image of %zu bytes: more than the %zu allowed", n, max_bytes);
	if (n >= 8 && !png_sig_cmp(p, 0, 8))
		return decode_png(out, p, n, max_pixels);
	if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) {
		int o = 1, rc = decode_jpeg(out, p, n, max_pixels, &o);
		if (!rc && o != 1 && (rc = orient_image(out, o)))
			eng_image_free(out);
		return rc;
	}
	if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
		return decode_webp(out, p, n, max_pixels);
	if (n >= 6 && (!memcmp(p, "GIF87a", 6) || !memcmp(p, "GIF89a", 6)))
		return decode_gif(out, p, n, max_pixels);
	return ev_error_set(EV_E_INVALID, "not a PNG, JPEG, WebP or GIF image (%zu bytes starting %02x %02x %02x %02x)", n,
			    n > 0 ? p[0] : 0, n > 1 ? p[1] : 0, n > 2 ? p[2] : 0, n > 3 ? p[3] : 0);
}

int eng_image_load(eng_image *out, const char *path, const eng_image_limits *lim)
{
	memset(out, 0, sizeof *out);
	size_t max_bytes;
	long max_pixels;
	limits_of(lim, &max_bytes, &max_pixels);
	char *data = NULL;
	size_t n = 0;
	int rc = ev_file_read(&data, &n, path, max_bytes);
	if (rc)
		return rc;
	rc = eng_image_decode(out, data, n, lim);
	free(data);
	if (rc) {
		char why[512];
		snprintf(why, sizeof why, "%s", ev_error_msg());
		return ev_error_set(rc, "%s: %s", path, why);
	}
	return 0;
}

void eng_image_free(eng_image *im)
{
	if (!im)
		return;
	free(im->rgb);
	im->rgb = NULL;
	im->w = im->h = 0;
}
