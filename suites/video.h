/*
 * suites/video.h: a video as a list of frames (a folder of images or an
 * archive of them), sampled as transformers' default sampler does. Both
 * backends read it: the engine encodes the frames, an OpenAI-compatible
 * server gets them as images.
 */
#ifndef EV_SUITES_VIDEO_H
#define EV_SUITES_VIDEO_H

#include <stddef.h>
#include <stdint.h>

#define EV_VIDEO_MAX_FRAMES 768        /* frames sampled from one video (the M3 processor's max_frames) */
#define EV_VIDEO_MAX_SOURCE 100000     /* frames a folder or archive may list */

/* The sampled frames of one video, in time order. */
typedef struct {
	int n;            /* frames sampled */
	uint8_t **data;   /* each frame's encoded bytes (PNG, JPEG, ...) */
	size_t *len;
	char **name;      /* its file or entry name */
	int *index;       /* its index among the source's frames */
	int total;        /* frames in the source */
	double fps;       /* the source's frame rate (1 when not given) */
} ev_video;

/* Caps: one frame's encoded bytes (default 64 MiB) and all sampled
 * frames' together (default 1 GiB). */
typedef struct {
	size_t max_frame_bytes, max_total_bytes;
} ev_video_limits;

/* transformers' default_sample_indices_fn: with frames > 0 that many,
 * else max(1, floor(total / fps * sample_fps)) (sample_fps 0 means 1);
 * never more than total (transformers refuses; a rate past the source's
 * takes every frame) nor EV_VIDEO_MAX_FRAMES (spread over the whole
 * video); index i is floor(i * total / n). idx has room for
 * EV_VIDEO_MAX_FRAMES. */
int ev_video_sample(int total, double fps, double sample_fps, int frames, int *idx);

/* Lists the frames of `path` (a folder: its regular files with image
 * extensions, links refused; an archive: its regular entries likewise),
 * sorts them by name with digit runs compared as numbers (frame-2 before
 * frame-10), samples them, and reads the sampled ones. Errors name the
 * path and the entry: no frames, a link, a frame or the total past the
 * caps, more than EV_VIDEO_MAX_SOURCE frames. */
int ev_video_load(ev_video *v, const char *path, double fps, double sample_fps, int frames,
                  const ev_video_limits *lim);
void ev_video_free(ev_video *v);

#endif
