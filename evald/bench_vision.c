/*
 * evald bench vision: seconds to turn an image into M3's LM rows on this
 * machine, by image size: preprocessing (decode excluded), then the vision
 * tower and projector on the fast path beside the plain one (the
 * baseline, and the oracle: their rows' largest relative difference is
 * printed too). Images are synthetic (smooth gradients with noise).
 *   evald bench vision --model DIR [--sizes 448,1024] [--no-reference] [--json]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/vision/vision.h"
#include "evald/cli.h"

int ev_bench_vision_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *model, *sizes;
	bool no_reference, json;
} bv_opts;

#define T bv_opts
static const ev_opt bv_table[] = {
	EV_O_STR("--model", T, model, "DIR", "a multimodal M3 checkpoint (required)"),
	EV_O_STR("--sizes", T, sizes, "LIST", "square image sides in pixels (448,1024)"),
	EV_O_FLAG("--no-reference", T, no_reference, "skip the plain tower (slow on a released-size tower)"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec bv_spec = {
	.name = "bench vision",
	.synopsis = "--model DIR [--sizes 448,1024] [--no-reference] [--json]",
	.about = "Seconds to turn one image into LM rows by size: preprocessing, then the vision tower and\n"
	         "projector on the fast path beside the plain one.",
	.opts = bv_table,
};

static void synth(eng_image *im, int side, uint64_t seed)
{
	ev_rng r;
	ev_rng_seed(&r, seed);
	im->w = im->h = side;
	im->rgb = malloc((size_t)side * side * 3);
	for (int y = 0; im->rgb && y < side; y++)
		for (int x = 0; x < side; x++) {
			uint8_t *p = im->rgb + ((size_t)y * side + x) * 3;
			p[0] = (uint8_t)(x * 255 / side + (int)ev_rng_below(&r, 9)) , p[1] = (uint8_t)(y * 255 / side);
			p[2] = (uint8_t)((x + y) % 256);
		}
}

int ev_bench_vision_main(const ev_cli *cli, int argc, char **argv)
{
	bv_opts o = {.json = cli->json};
	int prc = ev_opt_parse(&bv_spec, &o, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if (!o.model) {
		fprintf(stderr, "evald bench vision: --model is required\n");
		return EV_EXIT_USAGE;
	}
	size_t sizes[8] = {448, 1024};
	int ns = 2;
	if (o.sizes && (ns = ev_cli_parse_lengths(sizes, 8, o.sizes, "--sizes")) < 0)
		return ev_cli_fail("bench vision"), EV_EXIT_USAGE;
	eng_vision_model *vm = NULL;
	if (eng_vision_model_load(&vm, o.model))
		return ev_cli_fail("bench vision"), 1;
	bool fast = eng_vision_model_fast(vm);
	if (!o.json)
		printf("model %s: one image a size (the tower's fast path: %s)\n%8s %10s %7s %12s %12s %12s %8s %10s\n", o.model,
		       fast ? "OpenBLAS GEMMs" : "none in this build", "side", "resized", "tokens", "preprocess s",
		       "fast s", "plain s", "plain/fast", "max rel");
	else
		printf("{\"model\":\"%s\",\"fast_path\":%s,\"sizes\":[", o.model, fast ? "true" : "false");
	int rc = 0;
	for (int i = 0; i < ns && !rc; i++) {
		eng_image im;
		eng_vision_input v;
		synth(&im, (int)sizes[i], (uint64_t)i + 1);
		if (!im.rgb) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			break;
		}
		double t0 = ev_now();
		if ((rc = eng_vision_preprocess(&im, eng_vision_model_prep(vm), &v))) {
			eng_image_free(&im);
			break;
		}
		double tp = ev_now() - t0, tf = -1, tr = -1, rel = -1;
		float *a = NULL, *b = NULL;
		int na = 0, nb = 0;
		eng_vision_model_set_fast(vm, true);
		if (fast) {
			t0 = ev_now();
			rc = eng_vision_encode(vm, &v, &a, &na);
			tf = ev_now() - t0;
		}
		if (!rc && !o.no_reference) {
			eng_vision_model_set_fast(vm, false);
			t0 = ev_now();
			rc = eng_vision_encode(vm, &v, &b, &nb);
			tr = ev_now() - t0;
		}
		if (!rc && a && b && na == nb) {
			double num = 0, den = 0;
			size_t cnt = (size_t)na * eng_vision_model_text_hidden(vm);
			for (size_t k = 0; k < cnt; k++) {
				num = fabs(a[k] - b[k]) > num ? fabs(a[k] - b[k]) : num;
				den = fabs(b[k]) > den ? fabs(b[k]) : den;
			}
			rel = den > 0 ? num / den : 0;
		}
		int tokens = eng_vision_tokens(&v, eng_vision_model_prep(vm));
		if (!rc && !o.json) {
			char fs[32] = "-", rs[32] = "-", ratio[32] = "-", rl[32] = "-";
			if (tf >= 0)
				snprintf(fs, sizeof fs, "%.3f", tf);
			if (tr >= 0)
				snprintf(rs, sizeof rs, "%.3f", tr);
			if (tf > 0 && tr >= 0)
				snprintf(ratio, sizeof ratio, "%.1fx", tr / tf);
			if (rel >= 0)
				snprintf(rl, sizeof rl, "%.1e", rel);
			printf("%8zu %4dx%-5d %7d %12.4f %12s %12s %8s %10s\n", sizes[i], v.resized_w, v.resized_h, tokens, tp, fs,
			       rs, ratio, rl);
		} else if (!rc) {
			printf("%s{\"side\":%zu,\"resized\":[%d,%d],\"tokens\":%d,\"preprocess_s\":%.6f,\"fast_s\":", i ? "," : "",
			       sizes[i], v.resized_w, v.resized_h, tokens, tp);
			tf >= 0 ? printf("%.6f", tf) : printf("null");
			printf(",\"plain_s\":");
			tr >= 0 ? printf("%.6f", tr) : printf("null");
			printf(",\"max_rel_diff\":");
			rel >= 0 ? printf("%.3g}", rel) : printf("null}");
		}
		free(a), free(b);
		eng_vision_input_free(&v);
		eng_image_free(&im);
	}
	if (o.json && !rc)
		printf("]}\n");
	eng_vision_model_free(vm);
	return rc ? (ev_cli_fail("bench vision"), 1) : 0;
}
