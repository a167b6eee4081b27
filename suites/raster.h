/*
 * suites/raster.h: the little drawing kit the multimodal generator paints
 * with (suites only): an RGB canvas, filled shapes, evald's own 5 x 7
 * pixel font, PNG out through libpng.
 */
#ifndef EV_SUITES_RASTER_H
#define EV_SUITES_RASTER_H

#include <stdint.h>

typedef struct {
	int w, h;
	uint8_t *rgb; /* rows top to bottom, r g b interleaved */
} ev_canvas;

/* A w x h canvas filled with `bg`; EV_E_NOMEM or EV_E_INVALID (sides
 * outside 1..8192). */
int ev_canvas_init(ev_canvas *c, int w, int h, const uint8_t bg[3]);
void ev_canvas_free(ev_canvas *c);
/* Pixels with x in [x0, x1) and y in [y0, y1), clipped to the canvas. */
void ev_canvas_rect(ev_canvas *c, int x0, int y0, int x1, int y1, const uint8_t col[3]);
/* Pixels whose centres lie within r of (cx, cy). */
void ev_canvas_circle(ev_canvas *c, int cx, int cy, int r, const uint8_t col[3]);
/* An upright isosceles triangle: apex (cx, cy - r), base from cx - r to
 * cx + r at cy + r; pixels whose centres are inside. */
void ev_canvas_triangle(ev_canvas *c, int cx, int cy, int r, const uint8_t col[3]);
/* Text in the 5 x 7 font (digits, A-Z; lower case drawn as upper case,
 * anything else as a space), each font pixel a scale x scale block, one
 * font pixel between letters, top left at (x, y). */
void ev_canvas_text(ev_canvas *c, int x, int y, int scale, const char *text, const uint8_t col[3]);
/* Width in pixels of n letters at `scale`. */
static inline int ev_canvas_text_width(int n, int scale)
{
	return n > 0 ? (6 * n - 1) * scale : 0;
}
/* Writes the canvas as an 8-bit RGB PNG (compression level 6, no time or
 * text chunks: the same pixels give the same bytes). */
int ev_canvas_write_png(const ev_canvas *c, const char *path);

#endif
