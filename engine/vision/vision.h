/*
 * engine/vision/vision.h: images into the engine. Decoding (PNG through
 * libpng, JPEG through libjpeg-turbo, WebP through libwebp, GIF through
 * giflib, chosen by content, EXIF orientation
 * applied, sizes bounded before any pixel is allocated) and MiniMax-M3's
 * image preprocessing as transformers' MiniMaxM3VLImageProcessor does it:
 * smart_resize, torchvision's antialiased bicubic resize, rescale and
 * CLIP normalisation, patches of 14 x 14 x 2 frames in merge-group order.
 * Contract: engine/vision/README.md.
 */
#ifndef ENG_VISION_H
#define ENG_VISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* M3's processor's markers: a prompt's image marker becomes the start
 * marker, one image token a merge group, the end marker. */
#define ENG_VISION_IMAGE_MARKER "]<]image[>["
#define ENG_VISION_START_MARKER "]<]start of image[>["
#define ENG_VISION_END_MARKER "]<]end of image[>["
#define ENG_VISION_VIDEO_MARKER "]<]video[>["
#define ENG_VISION_MAX_FRAMES 768 /* frames of one video (the video processor's max_frames) */
#define ENG_VISION_SEGMENT_FRAMES 4 /* temporal patches a tower attention segment (vision_segment_max_frames) */

/* An 8-bit RGB image, rows top to bottom, pixels interleaved (r, g, b). */
typedef struct {
	int w, h;
	uint8_t *rgb;
} eng_image;

/* What a decoder accepts: the encoded size and the decoded pixel count.
 * Zero fields take the defaults (64 MiB, 64 M pixels). */
typedef struct {
	size_t max_bytes;
	long max_pixels;
} eng_image_limits;

/* Decodes a PNG, JPEG, WebP or GIF held in memory (the format from its first bytes;
 * a file's name is never trusted). Palette, grey, 16-bit and alpha forms
 * become 8-bit RGB (alpha dropped, as PIL's convert("RGB")); a JPEG's EXIF
 * orientation is applied. Errors name what is wrong: not an image, a
 * truncated or corrupt stream, a size past the limits (checked from the
 * header, before the pixels are allocated). */
int eng_image_decode(eng_image *out, const void *data, size_t n, const eng_image_limits *lim);
/* The same from a file (`path` only names it in errors). */
int eng_image_load(eng_image *out, const char *path, const eng_image_limits *lim);
void eng_image_free(eng_image *im);

/* MiniMax-M3's preprocessing settings (transformers' defaults with
 * ENG_VISION_PREP_INIT: patch 14, temporal patch 2, merge 2, pixels in
 * [3136, 451584], OpenAI CLIP mean and std, rescale 1/255). */
typedef struct {
	int patch, temporal, merge;
	long min_pixels, max_pixels;
	double mean[3], std[3]; /* as transformers holds them (Python floats) */
	double rescale;
} eng_vision_prep;

#define ENG_VISION_PREP_INIT                                                                                \
	{.patch = 14, .temporal = 2, .merge = 2, .min_pixels = 3136, .max_pixels = 451584,                 \
	 .mean = {0.48145466, 0.4578275, 0.40821073}, .std = {0.26862954, 0.26130258, 0.27577711},  \
	 .rescale = 1.0 / 255.0}

/* The video processor's: the same but frames of [3136, 602112] pixels. */
#define ENG_VISION_VIDEO_PREP_INIT                                                                          \
	{.patch = 14, .temporal = 2, .merge = 2, .min_pixels = 3136, .max_pixels = 602112,                 \
	 .mean = {0.48145466, 0.4578275, 0.40821073}, .std = {0.26862954, 0.26130258, 0.27577711},  \
	 .rescale = 1.0 / 255.0}

/* transformers' smart_resize: sides that are multiples of `factor`, the
 * aspect ratio kept as closely as may be, the pixel count within [min_px,
 * max_px] (Python's round-half-even, floor and ceil on doubles). An aspect
 * ratio past 200 is refused, as there. */
int eng_smart_resize(int h, int w, int factor, long min_px, long max_px, int *oh, int *ow);

/* Resizes interleaved 8-bit RGB from w x h to ow x oh as torchvision's
 * resize does on a uint8 tensor with bicubic interpolation and
 * antialiasing: separable (width, then height), the cubic kernel with
 * a = -0.5 widened by the scale when shrinking, weights normalised, each
 * pass rounded and clamped to 8 bits. dst has room for ow * oh * 3. */
void eng_resize_bicubic_aa(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh);

/* One image's model input: `n` patch rows of 3 * temporal * patch^2
 * floats (channel, then frame, then row, then column of the patch; the
 * still image repeated over the frames), rows ordered so that each merge x
 * merge group is contiguous; grid = (t, h, w) in patches. */
typedef struct {
	float *pixels;
	int n, dim;
	int grid_t, grid_h, grid_w;
	int resized_w, resized_h;
} eng_vision_input;

int eng_vision_preprocess(const eng_image *im, const eng_vision_prep *p, eng_vision_input *out);
/* A video's sampled frames (one size) as MiniMaxM3VLVideoProcessor makes
 * them with do_resize on: each frame smart_resized and resampled as an
 * image is, the last frame repeated up to a multiple of the temporal
 * patch, consecutive frames paired in a patch's temporal slots, rows
 * ordered by temporal patch first (grid_t = ceil(n / temporal)). */
int eng_vision_preprocess_video(const eng_image *frames, int n, const eng_vision_prep *p, eng_vision_input *out);
/* The text M3's processor puts for a video marker: per temporal patch f,
 * "]<]S seconds[>[" (S = frame_index[min(f * temporal, nframes - 1)] / fps
 * to one decimal, left out when fps <= 0 or frame_index is NULL), the
 * start marker, frame_tokens video markers, the end marker. malloc'd. */
int eng_vision_video_text(char **out, const int *frame_index, int nframes, double fps, int grid_t, int frame_tokens,
			  int temporal);
void eng_vision_input_free(eng_vision_input *v);
/* LM tokens the image becomes: patches / merge^2. */
static inline int eng_vision_tokens(const eng_vision_input *v, const eng_vision_prep *p)
{
	return v->n / (p->merge * p->merge);
}

/* The image markers of a token list expanded as M3's processor expands
 * them: marker k (id image_token) becomes start, counts[k] image tokens,
 * end (start or end < 0: left out). The number of markers must be nimg
 * (else an error naming both). *out is malloc'd. */
int eng_vision_expand_markers(const int32_t *ids, int n, int32_t image_token, int32_t start, int32_t end,
			      const int *counts, int nimg, int32_t **out, int *nout);

/* ---- the vision tower and projector (tower.c) ----------------------------- */

/* MiniMax-M3's vision tower and projector from a multimodal checkpoint
 * (config.json's vision_config, text_config and projector_hidden_size;
 * tensors under model.vision_tower. and model.multi_modal_projector.),
 * weights held as f32. The plain definition: one image at a time. */
typedef struct eng_vision_model eng_vision_model;
int eng_vision_model_load(eng_vision_model **out, const char *dir);
void eng_vision_model_free(eng_vision_model *vm);
/* The preprocessing the checkpoint's tower expects (patch, temporal patch
 * and merge from its config; pixel bounds and CLIP mean/std the
 * processor's defaults). */
const eng_vision_prep *eng_vision_model_prep(const eng_vision_model *vm);
int eng_vision_model_text_hidden(const eng_vision_model *vm);
/* One image's LM embedding rows: *rows = malloc'd [*nrows, text hidden],
 * one a merge group, in the order of the image's placeholder tokens. */
int eng_vision_encode(eng_vision_model *vm, const eng_vision_input *in, float **rows, int *nrows);
/* A decoded image's rows in one call: preprocessed as the model expects,
 * then encoded. */
int eng_vision_encode_image(eng_vision_model *vm, const eng_image *im, float **rows, int *nrows);
/* A video's rows: its temporal patches in segments of at most
 * ENG_VISION_SEGMENT_FRAMES, each encoded on its own (attention within a
 * segment, temporal positions from 0 in each), the rows in order. */
int eng_vision_encode_video(eng_vision_model *vm, const eng_vision_input *in, float **rows, int *nrows);
/* The video preprocessing the checkpoint's tower expects. */
const eng_vision_prep *eng_vision_model_video_prep(const eng_vision_model *vm);
/* The fast path (OpenBLAS GEMMs for the matmuls and the attention, its
 * threads; the default where the build found OpenBLAS) or the plain one. */
void eng_vision_model_set_fast(eng_vision_model *vm, bool fast);
bool eng_vision_model_fast(const eng_vision_model *vm);

#endif
