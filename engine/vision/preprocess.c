/*
 * engine/vision/preprocess.c: MiniMax-M3's image preprocessing as
 * transformers' MiniMaxM3VLImageProcessor (torchvision backend) computes
 * it: smart_resize, the antialiased bicubic resize of a uint8 tensor,
 * rescale and normalise fused ((x - mean/r) / (std/r) in f32), patches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/vision/vision.h"

int eng_smart_resize(int h, int w, int factor, long min_px, long max_px, int *oh, int *ow)
{
	if (h <= 0 || w <= 0 || factor <= 0)
		return ev_error_set(EV_E_INVALID, "smart_resize: %d x %d with factor %d", w, h, factor);
	double ar = (double)(h > w ? h : w) / (double)(h > w ? w : h);
	if (ar > 200)
		return ev_error_set(EV_E_INVALID, "image of %d x %d: absolute aspect ratio must be smaller than 200, got %g", w,
				    h, ar);
	/* Python's round() is half-to-even, as nearbyint in the default mode */
	double hb = nearbyint((double)h / factor) * factor, wb = nearbyint((double)w / factor) * factor;
	if (hb * wb > (double)max_px) {
		double beta = sqrt((double)h * (double)w / (double)max_px);
		hb = floor((double)h / beta / factor) * factor;
		wb = floor((double)w / beta / factor) * factor;
		hb = hb > factor ? hb : factor;
		wb = wb > factor ? wb : factor;
	} else if (hb * wb < (double)min_px) {
		double beta = sqrt((double)min_px / ((double)h * (double)w));
		hb = ceil((double)h * beta / factor) * factor;
		wb = ceil((double)w * beta / factor) * factor;
	}
	if (hb > 1 << 20 || wb > 1 << 20)
		return ev_error_set(EV_E_LIMIT, "smart_resize: %d x %d becomes %.0f x %.0f", w, h, wb, hb);
	*oh = (int)hb, *ow = (int)wb;
	return 0;
}

/* Keys' cubic with a = -0.5, the kernel of torchvision's antialiased
 * bicubic (and PIL's). */
static double cubic(double x)
{
	const double a = -0.5;
	x = fabs(x);
	if (x < 1.0)
		return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
	if (x < 2.0)
		return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
	return 0.0;
}

/* For each of `out` outputs along a side of `in`: the first input index,
 * the count, and the normalised weights (room for `*span` a output). */
typedef struct {
	int *first, *count, span;
	double *w;
} taps;

static int make_taps(taps *t, int in, int out)
{
	double scale = (double)in / out, support = scale >= 1.0 ? 2.0 * scale : 2.0;
	double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
	t->span = (int)ceil(support) * 2 + 1;
	t->first = malloc((size_t)out * sizeof(int));
	t->count = malloc((size_t)out * sizeof(int));
	t->w = malloc((size_t)out * t->span * sizeof(double));
	if (!t->first || !t->count || !t->w)
		return ev_error_set(EV_E_NOMEM, "out of memory for resize weights");
	for (int i = 0; i < out; i++) {
		double center = scale * (i + 0.5);
		long lo = (long)(center - support + 0.5), hi = (long)(center + support + 0.5);
		lo = lo > 0 ? lo : 0;
		hi = hi < in ? hi : in;
		int n = (int)(hi - lo);
		n = n < t->span ? n : t->span;
		double total = 0, *w = t->w + (size_t)i * t->span;
		for (int j = 0; j < n; j++) {
			w[j] = cubic((j + lo - center + 0.5) * inv);
			total += w[j];
		}
		for (int j = 0; j < n; j++)
			w[j] = total != 0 ? w[j] / total : 0;
		t->first[i] = (int)lo, t->count[i] = n;
	}
	return 0;
}

static void free_taps(taps *t)
{
	free(t->first), free(t->count), free(t->w);
}

/* torchvision's 8-bit path (as Pillow's) works in fixed point: each
 * pass's weights as int16 with as many fraction bits as the largest weight
 * allows, sums from half a unit, shifted down and clamped. */
typedef struct {
	int16_t *w;
	int prec;
} fixed_taps;

static int fix_taps(fixed_taps *f, const taps *t, int out)
{
	double maxw = 0;
	for (int i = 0; i < out; i++)
		for (int j = 0; j < t->count[i]; j++)
			maxw = t->w[(size_t)i * t->span + j] > maxw ? t->w[(size_t)i * t->span + j] : maxw;
	int prec = 0;
	for (; prec < 15; prec++)
		if ((int)(0.5 + maxw * (1 << (prec + 1))) >= (1 << 15))
			break;
	f->prec = prec;
	if (!(f->w = malloc((size_t)out * t->span * sizeof(int16_t))))
		return ev_error_set(EV_E_NOMEM, "out of memory for resize weights");
	for (size_t i = 0; i < (size_t)out * t->span; i++) {
		double v = t->w[i] * (1 << prec);
		f->w[i] = (int16_t)(v < 0 ? v - 0.5 : v + 0.5);
	}
	return 0;
}

static uint8_t clamp8(int32_t v, int prec)
{
	v >>= prec;
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void eng_resize_bicubic_aa(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh)
{
	taps tx = {0}, ty = {0};
	fixed_taps fx = {0}, fy = {0};
	uint8_t *mid = malloc((size_t)ow * h * 3);
	if (!mid || make_taps(&tx, w, ow) || make_taps(&ty, h, oh) || fix_taps(&fx, &tx, ow) || fix_taps(&fy, &ty, oh)) {
		memset(dst, 0, (size_t)ow * oh * 3);
		goto out;
	}
	/* width first, then height; a side whose size is kept is copied */
	const uint8_t *hs = src;
	if (ow != w) {
		for (int y = 0; y < h; y++)
			for (int x = 0; x < ow; x++) {
				const int16_t *wt = fx.w + (size_t)x * tx.span;
				const uint8_t *s = src + ((size_t)y * w + tx.first[x]) * 3;
				int32_t r = 1 << (fx.prec - 1), g = r, b = r;
				for (int k = 0; k < tx.count[x]; k++, s += 3)
					r += wt[k] * s[0], g += wt[k] * s[1], b += wt[k] * s[2];
				uint8_t *d = mid + ((size_t)y * ow + x) * 3;
				d[0] = clamp8(r, fx.prec), d[1] = clamp8(g, fx.prec), d[2] = clamp8(b, fx.prec);
			}
		hs = mid;
	}
	if (oh == h) {
		memcpy(dst, hs, (size_t)ow * oh * 3);
		goto out;
	}
	for (int y = 0; y < oh; y++) {
		const int16_t *wt = fy.w + (size_t)y * ty.span;
		for (int x = 0; x < ow; x++) {
			int32_t r = 1 << (fy.prec - 1), g = r, b = r;
			for (int k = 0; k < ty.count[y]; k++) {
				const uint8_t *s = hs + ((size_t)(ty.first[y] + k) * ow + x) * 3;
				r += wt[k] * s[0], g += wt[k] * s[1], b += wt[k] * s[2];
			}
			uint8_t *d = dst + ((size_t)y * ow + x) * 3;
			d[0] = clamp8(r, fy.prec), d[1] = clamp8(g, fy.prec), d[2] = clamp8(b, fy.prec);
		}
	}
out:
	free_taps(&tx), free_taps(&ty), free(fx.w), free(fy.w), free(mid);
}

/* Rows of frames already resized to rw x rh (nf of them, the last
 * repeated up to a multiple of the temporal patch), in the processors'
 * order: temporal patch, merge-group row, merge-group column, the group's
 * rows and columns; a row: channel, frame, patch row, patch column.
 * Rescale and normalise fused as transformers fuses them: mean and std
 * divided by the rescale factor in double, then (x - m) / s in f32. */
static int patchify(const uint8_t *const *frames, int nf, int rw, int rh, const eng_vision_prep *p,
		    eng_vision_input *out)
{
	int P = p->patch, M = p->merge, T = p->temporal;
	float m[3], s[3];
	for (int c = 0; c < 3; c++)
		m[c] = (float)(p->mean[c] / p->rescale), s[c] = (float)(p->std[c] / p->rescale);
	int gh = rh / P, gw = rw / P, gt = (nf + T - 1) / T;
	out->dim = 3 * T * P * P;
	out->n = gt * gh * gw;
	out->grid_t = gt, out->grid_h = gh, out->grid_w = gw;
	out->resized_w = rw, out->resized_h = rh;
	if (!(out->pixels = malloc((size_t)out->n * out->dim * sizeof(float))))
		return ev_error_set(EV_E_NOMEM, "out of memory for %d patches", out->n);
	float *o = out->pixels;
	for (int tt = 0; tt < gt; tt++)
		for (int by = 0; by < gh / M; by++)
			for (int bx = 0; bx < gw / M; bx++)
				for (int my = 0; my < M; my++)
					for (int mx = 0; mx < M; mx++) {
						int py = (by * M + my) * P, px = (bx * M + mx) * P;
						for (int c = 0; c < 3; c++)
							for (int t = 0; t < T; t++) {
								int f = tt * T + t;
								const uint8_t *fr = frames[f < nf ? f : nf - 1];
								for (int y = 0; y < P; y++)
									for (int x = 0; x < P; x++)
										*o++ = ((float)fr[((size_t)(py + y) * rw + px + x) * 3 + c] -
											m[c]) / s[c];
							}
					}
	return 0;
}

static int check_prep(const eng_vision_prep *p)
{
	int P = p->patch, M = p->merge, T = p->temporal;
	if (P < 1 || M < 1 || T < 1 || P > 64 || M > 8 || T > 8)
		return ev_error_set(EV_E_INVALID, "vision preprocessing: patch %d, merge %d, temporal %d", P, M, T);
	return 0;
}

/* im resized to rw x rh (a copy at the identity size) */
static uint8_t *resized(const eng_image *im, int rw, int rh)
{
	uint8_t *rs = malloc((size_t)rw * rh * 3);
	if (!rs) {
		ev_error_set(EV_E_NOMEM, "out of memory resizing to %d x %d", rw, rh);
		return NULL;
	}
	if (rw == im->w && rh == im->h)
		memcpy(rs, im->rgb, (size_t)rw * rh * 3);
	else
		eng_resize_bicubic_aa(im->rgb, im->w, im->h, rs, rw, rh);
	return rs;
}

int eng_vision_preprocess(const eng_image *im, const eng_vision_prep *p, eng_vision_input *out)
{
	memset(out, 0, sizeof *out);
	int rh = 0, rw = 0, rc;
	if ((rc = check_prep(p)) || (rc = eng_smart_resize(im->h, im->w, p->patch * p->merge, p->min_pixels,
							   p->max_pixels, &rh, &rw)))
		return rc;
	uint8_t *rs = resized(im, rw, rh);
	if (!rs)
		return EV_E_NOMEM;
	/* a still image: the same frame for every temporal slot */
	const uint8_t *frames[1] = {rs};
	rc = patchify(frames, 1, rw, rh, p, out);
	free(rs);
	return rc;
}

int eng_vision_preprocess_video(const eng_image *frames, int n, const eng_vision_prep *p, eng_vision_input *out)
{
	memset(out, 0, sizeof *out);
	int rh = 0, rw = 0, rc;
	if (n < 1 || n > ENG_VISION_MAX_FRAMES)
		return ev_error_set(EV_E_INVALID, "video: %d frames (1 to %d)", n, ENG_VISION_MAX_FRAMES);
	for (int i = 1; i < n; i++)
		if (frames[i].w != frames[0].w || frames[i].h != frames[0].h)
			return ev_error_set(EV_E_INVALID, "video: frame %d is %d x %d, frame 0 %d x %d (a video's frames share "
							  "one size)", i, frames[i].w, frames[i].h, frames[0].w, frames[0].h);
	if ((rc = check_prep(p)) || (rc = eng_smart_resize(frames[0].h, frames[0].w, p->patch * p->merge, p->min_pixels,
							   p->max_pixels, &rh, &rw)))
		return rc;
	uint8_t **rs = calloc((size_t)n, sizeof *rs);
	if (!rs)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < n && !rc; i++)
		if (!(rs[i] = resized(&frames[i], rw, rh)))
			rc = EV_E_NOMEM;
	if (!rc)
		rc = patchify((const uint8_t *const *)rs, n, rw, rh, p, out);
	for (int i = 0; i < n; i++)
		free(rs[i]);
	free(rs);
	return rc;
}

int eng_vision_video_text(char **out, const int *frame_index, int nframes, double fps, int grid_t, int frame_tokens,
			  int temporal)
{
	*out = NULL;
	if (grid_t < 1 || frame_tokens < 1 || nframes < 1 || temporal < 1 || (long)grid_t * frame_tokens > (1L << 22))
		return ev_error_set(EV_E_INVALID, "video text: %d temporal patches of %d tokens", grid_t, frame_tokens);
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	int rc = 0;
	for (int f = 0; f < grid_t && !rc; f++) {
		if (fps > 0 && frame_index) {
			int k = f * temporal < nframes - 1 ? f * temporal : nframes - 1;
			rc = ev_buf_printf(&b, "]<]%.1f seconds[>[", (double)frame_index[k] / fps);
		}
		if (!rc)
			rc = ev_buf_puts(&b, ENG_VISION_START_MARKER);
		for (int i = 0; i < frame_tokens && !rc; i++)
			rc = ev_buf_puts(&b, ENG_VISION_VIDEO_MARKER);
		if (!rc)
			rc = ev_buf_puts(&b, ENG_VISION_END_MARKER);
	}
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	*out = ev_buf_detach(&b, NULL);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

void eng_vision_input_free(eng_vision_input *v)
{
	if (!v)
		return;
	free(v->pixels);
	memset(v, 0, sizeof *v);
}

int eng_vision_expand_markers(const int32_t *ids, int n, int32_t image_token, int32_t start, int32_t end,
			      const int *counts, int nimg, int32_t **out, int *nout)
{
	*out = NULL, *nout = 0;
	int markers = 0;
	long total = n;
	for (int i = 0; i < n; i++)
		markers += ids[i] == image_token;
	if (markers != nimg)
		return ev_error_set(EV_E_INVALID, "the prompt holds %d image marker%s (%s, id %d) for %d image%s", markers,
				    markers == 1 ? "" : "s", ENG_VISION_IMAGE_MARKER, image_token, nimg, nimg == 1 ? "" : "s");
	for (int k = 0; k < nimg; k++) {
		if (counts[k] < 0 || counts[k] > (1 << 22))
			return ev_error_set(EV_E_INVALID, "image %d: %d rows", k, counts[k]);
		total += counts[k] + 1;
	}
	if (total > (1L << 30))
		return ev_error_set(EV_E_LIMIT, "the prompt would hold %ld tokens with its images", total);
	int32_t *o = malloc((size_t)total * sizeof *o);
	if (!o)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int w = 0, k = 0;
	for (int i = 0; i < n; i++) {
		if (ids[i] != image_token) {
			o[w++] = ids[i];
			continue;
		}
		if (start >= 0)
			o[w++] = start;
		for (int r = 0; r < counts[k]; r++)
			o[w++] = image_token;
		if (end >= 0)
			o[w++] = end;
		k++;
	}
	*out = o, *nout = w;
	return 0;
}
