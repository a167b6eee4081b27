/*
 * suites/raster.c: the multimodal generator's canvas (see raster.h).
 */
#include "suites/raster.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

int ev_canvas_init(ev_canvas *c, int w, int h, const uint8_t bg[3])
{
	c->w = c->h = 0, c->rgb = NULL;
	if (w < 1 || h < 1 || w > 8192 || h > 8192)
		return ev_error_set(EV_E_INVALID, "canvas: %d x %d is outside 1..8192", w, h);
	if (!(c->rgb = malloc((size_t)w * (size_t)h * 3)))
		return ev_error_set(EV_E_NOMEM, "out of memory for a %d x %d canvas", w, h);
	c->w = w, c->h = h;
	for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
		memcpy(c->rgb + 3 * i, bg, 3);
	return 0;
}

void ev_canvas_free(ev_canvas *c)
{
	free(c->rgb);
	c->rgb = NULL, c->w = c->h = 0;
}

static void put(ev_canvas *c, int x, int y, const uint8_t col[3])
{
	if (x >= 0 && y >= 0 && x < c->w && y < c->h)
		memcpy(c->rgb + 3 * ((size_t)y * (size_t)c->w + (size_t)x), col, 3);
}

void ev_canvas_rect(ev_canvas *c, int x0, int y0, int x1, int y1, const uint8_t col[3])
{
	for (int y = y0 < 0 ? 0 : y0; y < y1 && y < c->h; y++)
		for (int x = x0 < 0 ? 0 : x0; x < x1 && x < c->w; x++)
			put(c, x, y, col);
}

void ev_canvas_circle(ev_canvas *c, int cx, int cy, int r, const uint8_t col[3])
{
	/* centres at (x + 0.5, y + 0.5); compare in quarter pixels, integers only */
	long rr = 4L * r * r;
	for (int y = cy - r - 1; y <= cy + r; y++)
		for (int x = cx - r - 1; x <= cx + r; x++) {
			long dx = 2L * x + 1 - 2L * cx, dy = 2L * y + 1 - 2L * cy;
			if (dx * dx + dy * dy <= rr)
				put(c, x, y, col);
		}
}

void ev_canvas_triangle(ev_canvas *c, int cx, int cy, int r, const uint8_t col[3])
{
	/* at height y (centre y + 0.5) the half width grows from 0 at the apex
	 * to r at the base: |x + 0.5 - cx| <= (y + 0.5 - (cy - r)) / 2 */
	for (int y = cy - r; y < cy + r; y++)
		for (int x = cx - r; x < cx + r; x++) {
			long dx = 2L * x + 1 - 2L * cx, dy = 2L * y + 1 - 2L * (cy - r);
			if (dx < 0)
				dx = -dx;
			if (2 * dx <= dy)
				put(c, x, y, col);
		}
}

/* 7 rows of 5 pixels, '1' inked; evald's own drawing of each letter */
static const char *glyph(char ch)
{
	static const char *const digits[10] = {
		"01110100011001110101110011000101110", "00100011000010000100001000010001110",
		"01110100010000100010001000100011111", "11110000010000101110000010000111110",
		"00010001100101010010111110001000010", "11111100001111000001000011000101110",
		"00110010001000011110100011000101110", "11111000010001000100010000100001000",
		"01110100011000101110100011000101110", "01110100011000101111000010001001100",
	};
	static const char *const letters[26] = {
		"01110100011000111111100011000110001", "11110100011000111110100011000111110",
		"01110100011000010000100001000101110", "11100100101000110001100011001011100",
		"11111100001000011110100001000011111", "11111100001000011110100001000010000",
		"01110100011000010111100011000101111", "10001100011000111111100011000110001",
		"01110001000010000100001000010001110", "00111000100001000010000101001001100",
		"10001100101010011000101001001010001", "10000100001000010000100001000011111",
		"10001110111010110101100011000110001", "10001100011100110101100111000110001",
		"01110100011000110001100011000101110", "11110100011000111110100001000010000",
		"01110100011000110001101011001001101", "11110100011000111110101001001010001",
		"01111100001000001110000010000111110", "11111001000010000100001000010000100",
		"10001100011000110001100011000101110", "10001100011000110001100010101000100",
		"10001100011000110101101011010101010", "10001100010101000100010101000110001",
		"10001100010101000100001000010000100", "11111000010001000100010001000011111",
	};
	if (ch >= '0' && ch <= '9')
		return digits[ch - '0'];
	if (ch >= 'a' && ch <= 'z')
		ch = (char)(ch - 'a' + 'A');
	if (ch >= 'A' && ch <= 'Z')
		return letters[ch - 'A'];
	return NULL;
}

void ev_canvas_text(ev_canvas *c, int x, int y, int scale, const char *text, const uint8_t col[3])
{
	for (size_t i = 0; text[i]; i++) {
		const char *g = glyph(text[i]);
		int gx = x + (int)i * 6 * scale;
		for (int r = 0; g && r < 7; r++)
			for (int k = 0; k < 5; k++)
				if (g[r * 5 + k] == '1')
					ev_canvas_rect(c, gx + k * scale, y + r * scale, gx + (k + 1) * scale, y + (r + 1) * scale,
						       col);
	}
}

int ev_canvas_write_png(const ev_canvas *c, const char *path)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return ev_error_set(EV_E_IO, "%s: cannot create: %s", path, strerror(errno));
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	png_bytep *rows = malloc((size_t)(c->h ? c->h : 1) * sizeof *rows);
	int rc = 0;
	if (!png || !info || !rows) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory writing %s", path);
		goto out;
	}
	if (setjmp(png_jmpbuf(png))) {
		rc = ev_error_set(EV_E_IO, "%s: libpng could not write the image", path);
		goto out;
	}
	png_init_io(png, f);
	png_set_compression_level(png, 6);
	png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	for (int y = 0; y < c->h; y++)
		rows[y] = c->rgb + (size_t)y * (size_t)c->w * 3;
	png_write_info(png, info);
	png_write_image(png, rows);
	png_write_end(png, NULL);
out:
	png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
	free(rows);
	if (fclose(f) != 0 && !rc)
		rc = ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
	if (rc)
		unlink(path);
	return rc;
}
