/*
 * evald engine preprocess: an image as MiniMax-M3's processor makes it
 * (engine/vision): decoded size, resized size, patch grid, LM tokens;
 * optionally the pixel values as raw little-endian f32 (for comparison
 * with transformers' processor), or smart_resize over a list of sizes.
 *   evald engine preprocess --image FILE [--out FILE] [--min-pixels N] [--max-pixels N] [--json]
 *   evald engine preprocess --video DIR|ARCHIVE [--fps F] [--sample-fps F | --frames N] [--text-out FILE] ...
 *   evald engine preprocess --sizes FILE     ("H W" a line in, "H' W'" a line out)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/fs.h"
#include "engine/vision/vision.h"
#include "evald/cli.h"
#include "suites/video.h"

int ev_engine_preprocess_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *image, *video, *out, *sizes, *model, *embed_out, *text_out;
	int64_t min_pixels, max_pixels, frames;
	double fps, sample_fps;
	bool json, reference;
} prep_opts;

#define T prep_opts
static const ev_opt prep_table[] = {
	EV_O_STR("--image", T, image, "FILE", "a PNG, JPEG, WebP or GIF file"),
	EV_O_STR("--video", T, video, "DIR|ARCHIVE", "a video: a folder or tar/zip of frames (sorted by name)"),
	EV_O_NUM("--fps", T, fps, 0, 1000, "F", "the video frames' rate (timestamps are written only with it)"),
	EV_O_NUM("--sample-fps", T, sample_fps, 0, 1000, "F", "frames a second to sample (default 1)"),
	EV_O_INT("--frames", T, frames, 1, EV_VIDEO_MAX_FRAMES, "N", "sample N frames instead"),
	EV_O_STR("--text-out", T, text_out, "FILE", "with --video: write the placeholder text the prompt gets"),
	EV_O_STR("--out", T, out, "FILE", "write the pixel values there (raw little-endian f32, patch rows)"),
	EV_O_STR("--sizes", T, sizes, "FILE", "smart_resize each \"H W\" line of FILE instead"),
	EV_O_STR("--model", T, model, "DIR", "a multimodal M3 checkpoint: its vision tower encodes the image"),
	EV_O_STR("--embed-out", T, embed_out, "FILE", "with --model: write the LM embedding rows there (raw f32)"),
	EV_O_INT("--min-pixels", T, min_pixels, 1, 1L << 30, "N", "the processor's shortest_edge pixel bound (3136)"),
	EV_O_INT("--max-pixels", T, max_pixels, 1, 1L << 30, "N", "the processor's longest_edge pixel bound (451584)"),
	EV_O_FLAG("--reference", T, reference, "with --model: the plain tower (the oracle; slow)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec prep_spec = {
	.name = "engine preprocess",
	.synopsis = "--image FILE | --video DIR [--fps F] [--sample-fps F|--frames N] [--out FILE] [--model DIR [--embed-out FILE]]\n"
	            "       [--min-pixels N] [--max-pixels N] [--json]  |  --sizes FILE",
	.about = "An image or a video as MiniMax-M3's processors make them: decoded and resized sizes, the patch\n"
	         "grid (t, h, w) and the LM tokens it becomes; --out writes the pixel values.",
	.opts = prep_table,
};

static int sizes_main(const prep_opts *o, const eng_vision_prep *p)
{
	FILE *f = fopen(o->sizes, "r");
	if (!f) {
		fprintf(stderr, "evald engine preprocess: %s: cannot open\n", o->sizes);
		return 1;
	}
	char line[256];
	int rc = 0, ln = 0;
	while (fgets(line, sizeof line, f)) {
		ln++;
		int h = 0, w = 0, oh = 0, ow = 0;
		if (sscanf(line, "%d %d", &h, &w) != 2) {
			fprintf(stderr, "evald engine preprocess: %s:%d: expected \"H W\"\n", o->sizes, ln);
			rc = 1;
			break;
		}
		if (eng_smart_resize(h, w, p->patch * p->merge, p->min_pixels, p->max_pixels, &oh, &ow))
			printf("error %s\n", ev_error_msg());
		else
			printf("%d %d\n", oh, ow);
	}
	fclose(f);
	return rc;
}

/* The sampled frames of o->video decoded (*nf of them) with the sample's
 * frame indices into idx. */
static int load_frames(const prep_opts *o, eng_image **frames, int *nf, int *idx, int *total)
{
	ev_video vid;
	int rc = ev_video_load(&vid, o->video, o->fps, o->sample_fps, (int)o->frames, NULL);
	if (rc)
		return rc;
	eng_image *fr = calloc((size_t)vid.n, sizeof *fr);
	if (!fr)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; !rc && i < vid.n; i++)
		if ((rc = eng_image_decode(&fr[i], vid.data[i], vid.len[i], NULL)))
			rc = ev_error_wrap(rc, "%s: frame %s", o->video, vid.name[i]);
	if (rc) {
		for (int i = 0; fr && i < vid.n; i++)
			eng_image_free(&fr[i]);
		free(fr);
	} else {
		memcpy(idx, vid.index, (size_t)vid.n * sizeof *idx);
		*frames = fr, *nf = vid.n, *total = vid.total;
	}
	ev_video_free(&vid);
	return rc;
}

int ev_engine_preprocess_main(const ev_cli *cli, int argc, char **argv)
{
	prep_opts o = {.json = cli->json};
	int prc = ev_opt_parse(&prep_spec, &o, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	eng_vision_prep p = ENG_VISION_PREP_INIT;
	if (o.video)
		p = (eng_vision_prep)ENG_VISION_VIDEO_PREP_INIT;
	if (o.min_pixels)
		p.min_pixels = (long)o.min_pixels;
	if (o.max_pixels)
		p.max_pixels = (long)o.max_pixels;
	if (!!o.image + !!o.sizes + !!o.video != 1) {
		fprintf(stderr, "evald engine preprocess: give one of --image, --video or --sizes\n");
		return EV_EXIT_USAGE;
	}
	if (o.frames && o.sample_fps > 0) {
		fprintf(stderr, "evald engine preprocess: --frames and --sample-fps exclude each other\n");
		return EV_EXIT_USAGE;
	}
	if (o.sizes)
		return sizes_main(&o, &p);
	eng_vision_model *vm = NULL;
	if (o.model) {
		if (eng_vision_model_load(&vm, o.model))
			return ev_cli_fail("engine preprocess"), 1;
		if (o.reference)
			eng_vision_model_set_fast(vm, false);
		eng_vision_prep mp = o.video ? *eng_vision_model_video_prep(vm) : *eng_vision_model_prep(vm);
		mp.min_pixels = p.min_pixels, mp.max_pixels = p.max_pixels;
		p = mp;
	}
	eng_image im = {0}, *frames = NULL;
	eng_vision_input v = {0};
	int nf = 0, total = 0, *idx = malloc(EV_VIDEO_MAX_FRAMES * sizeof *idx);
	char *vtext = NULL;
	int rc = idx ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = o.video ? load_frames(&o, &frames, &nf, idx, &total) : eng_image_load(&im, o.image, NULL);
	double t0 = ev_now(), secs = 0, enc = 0;
	if (!rc)
		rc = o.video ? eng_vision_preprocess_video(frames, nf, &p, &v) : eng_vision_preprocess(&im, &p, &v);
	secs = ev_now() - t0;
	if (!rc && o.video)
		rc = eng_vision_video_text(&vtext, idx, nf, o.fps, v.grid_t, v.grid_h * v.grid_w / (p.merge * p.merge),
					   p.temporal);
	float *rows = NULL;
	int nrows = 0;
	if (!rc && vm) {
		t0 = ev_now();
		rc = o.video ? eng_vision_encode_video(vm, &v, &rows, &nrows) : eng_vision_encode(vm, &v, &rows, &nrows);
		enc = ev_now() - t0;
	}
	if (!rc && o.text_out && ev_file_write(o.text_out, vtext ? vtext : "", vtext ? strlen(vtext) : 0))
		rc = EV_E_IO;
	if (frames && !rc)
		im = frames[0]; /* the size shown */
	for (int i = 1; i < nf; i++)
		eng_image_free(&frames[i]);
	free(frames);
	if (rc) {
		eng_image_free(&im);
		eng_vision_input_free(&v);
		eng_vision_model_free(vm);
		free(idx), free(vtext);
		return ev_cli_fail("engine preprocess"), 1;
	}
	if (o.embed_out && vm) {
		FILE *f = fopen(o.embed_out, "wb");
		size_t cnt = (size_t)nrows * eng_vision_model_text_hidden(vm);
		if (!f || fwrite(rows, sizeof(float), cnt, f) != cnt || fclose(f)) {
			fprintf(stderr, "evald engine preprocess: %s: write failed\n", o.embed_out);
			rc = 1;
		}
	}
	if (o.out) {
		FILE *f = fopen(o.out, "wb");
		size_t cnt = (size_t)v.n * v.dim;
		if (!f || fwrite(v.pixels, sizeof(float), cnt, f) != cnt || fclose(f)) {
			fprintf(stderr, "evald engine preprocess: %s: write failed\n", o.out);
			rc = 1;
		}
	}
	int tokens = eng_vision_tokens(&v, &p);
	if (o.json && o.video) {
		printf("{\"width\":%d,\"height\":%d,\"resized_width\":%d,\"resized_height\":%d,\"grid_thw\":[%d,%d,%d],"
		       "\"patches\":%d,\"patch_dim\":%d,\"tokens\":%d,\"source_frames\":%d,\"frames_indices\":[",
		       im.w, im.h, v.resized_w, v.resized_h, v.grid_t, v.grid_h, v.grid_w, v.n, v.dim, tokens, total);
		for (int i = 0; i < nf; i++)
			printf("%s%d", i ? "," : "", idx[i]);
		printf("],\"segments\":%d,\"seconds\":%.6f,\"encode_seconds\":%.6f}\n",
		       (v.grid_t + ENG_VISION_SEGMENT_FRAMES - 1) / ENG_VISION_SEGMENT_FRAMES, secs, enc);
	} else if (o.json)
		printf("{\"width\":%d,\"height\":%d,\"resized_width\":%d,\"resized_height\":%d,\"grid_thw\":[%d,%d,%d],"
		       "\"patches\":%d,\"patch_dim\":%d,\"tokens\":%d,\"seconds\":%.6f,\"encode_seconds\":%.6f}\n",
		       im.w, im.h, v.resized_w, v.resized_h, v.grid_t, v.grid_h, v.grid_w, v.n, v.dim, tokens, secs, enc);
	else if (o.video)
		printf("video of %d frames, %d sampled, %d x %d -> %d x %d, grid (t, h, w) = (%d, %d, %d), %d patches, %d LM "
		       "tokens (%.1f ms)\n",
		       total, nf, im.w, im.h, v.resized_w, v.resized_h, v.grid_t, v.grid_h, v.grid_w, v.n, tokens, secs * 1000);
	else
		printf("image %d x %d -> %d x %d, grid (t, h, w) = (%d, %d, %d), %d patches of %d values, %d LM tokens "
		       "(%.1f ms)\n",
		       im.w, im.h, v.resized_w, v.resized_h, v.grid_t, v.grid_h, v.grid_w, v.n, v.dim, tokens, secs * 1000);
	if (vm && !o.json)
		printf("encoded into %d embedding rows of %d in %.1f ms (the plain tower)\n", nrows,
		       eng_vision_model_text_hidden(vm), enc * 1000);
	free(rows), free(idx), free(vtext);
	eng_vision_model_free(vm);
	eng_vision_input_free(&v);
	eng_image_free(&im);
	return rc;
}
