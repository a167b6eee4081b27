/*
 * evald bench kernels: the CPU's dot-product kernels for quantized and
 * BF16 weights (engine/cpu/qdot.h, bfdot.h), each at every instruction-set
 * level this CPU has beside the plain C definition (the baseline, and the
 * oracle: every output of every level is compared with its bits).
 *   decode:  one activation row against raw weight rows, four at a time
 *            a quarter of the matrix apart (as batch-1 decode reads them)
 *   prefill: 48 activation rows (a prompt's chunk) against each group of
 *            16 weight rows, unpacked once, six rows a call (BF16: four
 *            weight rows read as they are, six activation rows a call)
 * Q8_0 .. Q5_1, Q4_K, Q5_K and Q6_K decode is measured once more at the top
 * level on the rows as quads laid out four rows together (qdot.h
 * eng_qx4_pack; level "... x4"), beside the same level on rows as stored.
 * K-quant types are measured twice: against 16-bit activations (qdot.h,
 * the default) and against 8-bit super-block ones (q8k.h, --activation-
 * bits 8; prefill there unpacks groups of 16 rows too, where the CPU has
 * AVX512-VNNI, and reads raw rows otherwise).
 * One thread, random weights written by the project's own quantizer.
 * Rows past the caches (--rows 65536 and up) show the kernels as they meet
 * memory; the default fits in the L2 cache and shows the instructions.
 *   evald bench kernels [--types q8_0,q4_k,...] [--rows N] [--cols N] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "engine/backend.h"
#include "engine/cpu/bfdot.h"
#include "engine/cpu/q8k.h"
#include "engine/cpu/qdot.h"
#include "engine/gguf/quant.h"
#include "evald/cli.h"

int ev_bench_kernels_main(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *types;
	int rows, cols;
	double seconds;
	bool json;
} bk_opts;

#define T bk_opts
static const ev_opt bk_table[] = {
	EV_O_STR("--types", T, types, "LIST", "weight types (all kept block types and bf16)"),
	EV_O_INT("--rows", T, rows, 16, 1 << 22, "N", "weight rows, a multiple of 16"),
	EV_O_INT("--cols", T, cols, 256, 1 << 16, "N", "weight columns, a multiple of 256"),
	EV_O_NUM("--seconds", T, seconds, 0.01, 60, "S", "seconds on each figure: the best of the passes that fit, at least two"),
	EV_O_FLAG("--json", T, json, "as JSON"),
	EV_O_END,
};
#undef T

static const ev_cmd_spec bk_spec = {
	.name = "bench kernels",
	.synopsis = "[--types q8_0,q4_k,...] [--rows N] [--cols N] [--seconds S] [--json]",
	.about = "The dot-product kernels for quantized and BF16 weights at each instruction-set level this\n"
	         "CPU has, beside the plain C definition (whose bits every level must equal), one thread:\n"
	         "batch-1 decode (one activation row) and prefill (48 rows against unpacked weights);\n"
	         "K-quants and IQ4_XS also against 8-bit activations (--activation-bits 8, engine/cpu/q8k.h); every\n"
	         "block type decodes also on rows laid out as quads of four (level \"... x4\", as the engine keeps\n"
	         "them on AVX512-VNNI CPUs; EVALD_WEIGHT_LAYOUT=rows turns that off).",
	.opts = bk_table,
};

#define BK_X 48 /* activation rows in prefill */

typedef struct {
	int t, rows, cols, nb;
	size_t rb;         /* bytes a weight row */
	uint8_t *w;        /* rows x rb */
	eng_qxblk *xq;     /* BK_X activation rows, quantized */
	eng_qxbyt *xqb;    /* their bytes (the K-quant decode kernels read them) */
	eng_q8kblk *xk;    /* the same rows, 8 bits a super-block (K-quants) */
	int act8;          /* this pass measures the 8-bit kernels */
	uint16_t *xbf;     /* BK_X activation rows, BF16, padded */
	eng_qgroup grp;    /* a group's rows unpacked */
	void *gmem;        /* its storage */
	float *out;        /* rows x BK_X */
	float *dec;        /* rows: a decode pass's outputs */
	uint8_t *w4;       /* w as quads laid out four rows together (eng_qx4_type), or NULL */
	uint8_t *scratch;  /* 4 rows' bytes (eng_qdot_rows_x4) */
	int x4;            /* this pass reads w4 */
} bk_case;

/* group g's four rows, a quarter of the matrix apart */
static void group_rows(const bk_case *c, int g, const uint8_t *wr[4])
{
	int q4 = c->rows / 4;
	for (int u = 0; u < 4; u++)
		wr[u] = c->w + (size_t)(g + u * q4) * c->rb;
}

/* One pass: decode (one activation row) or prefill (BK_X rows) over
 * every weight row; out[row * BK_X + i]. */
static void pass(bk_case *c, bool prefill)
{
	if (c->act8 && prefill && eng_q8k_group_level()) { /* groups of 16 rows, as the 16-bit path */
		int nsb = c->cols / 256;
		eng_q8kgroup kg;
		eng_q8k_group_place(&kg, c->gmem, nsb);
		for (int g = 0; g < c->rows / ENG_Q8K_GROUP_ROWS; g++) {
			const uint8_t *wr[ENG_Q8K_GROUP_ROWS];
			for (int u = 0; u < ENG_Q8K_GROUP_ROWS; u++)
				wr[u] = c->w + (size_t)(g * ENG_Q8K_GROUP_ROWS + u) * c->rb;
			eng_q8k_group_unpack(&kg, wr, nsb, c->t);
			for (int i0 = 0; i0 < BK_X; i0 += ENG_Q8K_GROUP_X) {
				const eng_q8kblk *xr[ENG_Q8K_GROUP_X];
				float o[ENG_Q8K_GROUP_X * ENG_Q8K_GROUP_ROWS];
				for (int k = 0; k < ENG_Q8K_GROUP_X; k++)
					xr[k] = c->xk + (size_t)(i0 + k) * nsb;
				eng_q8k_group_dot(o, xr, ENG_Q8K_GROUP_X, &kg, nsb, c->t);
				for (int i = 0; i < ENG_Q8K_GROUP_X; i++)
					for (int k = 0; k < ENG_Q8K_GROUP_ROWS; k++)
						c->out[(size_t)(g * ENG_Q8K_GROUP_ROWS + k) * BK_X + i0 + i] = o[i * ENG_Q8K_GROUP_ROWS + k];
			}
		}
		return;
	}
	if (c->act8) {
		int q4 = c->rows / 4, nsb = c->cols / 256, n = prefill ? BK_X : 1;
		for (int g = 0; g < q4; g++) {
			const uint8_t *wr[4];
			group_rows(c, g, wr);
			for (int i0 = 0; i0 < n; i0 += ENG_Q8K_X) {
				int nx = n - i0 < ENG_Q8K_X ? n - i0 : ENG_Q8K_X;
				const eng_q8kblk *xr[ENG_Q8K_X];
				float o[ENG_Q8K_X * 4];
				for (int k = 0; k < nx; k++)
					xr[k] = c->xk + (size_t)(i0 + k) * nsb;
				eng_q8k_dot(o, xr, nx, wr, nsb, c->t);
				for (int i = 0; i < nx; i++)
					for (int k = 0; k < 4; k++)
						c->out[(size_t)(g + k * q4) * BK_X + i0 + i] = o[i * 4 + k];
			}
		}
		return;
	}
	if (prefill && c->t != ENG_BF16) {
		for (int g = 0; g < c->rows / ENG_QGROUP_ROWS; g++) {
			const uint8_t *wr[ENG_QGROUP_ROWS];
			for (int u = 0; u < ENG_QGROUP_ROWS; u++)
				wr[u] = c->w + (size_t)(g * ENG_QGROUP_ROWS + u) * c->rb;
			eng_qgroup_unpack(&c->grp, wr, c->nb, c->t);
			for (int i0 = 0; i0 < BK_X; i0 += ENG_QGROUP_X) {
				const eng_qxblk *xr[ENG_QGROUP_X];
				float o[ENG_QGROUP_X * ENG_QGROUP_ROWS];
				for (int k = 0; k < ENG_QGROUP_X; k++)
					xr[k] = c->xq + (size_t)(i0 + k) * c->nb;
				eng_qdot_group(o, xr, ENG_QGROUP_X, &c->grp, c->nb, c->t);
				for (int i = 0; i < ENG_QGROUP_X; i++)
					for (int k = 0; k < ENG_QGROUP_ROWS; k++)
						c->out[(size_t)(g * ENG_QGROUP_ROWS + k) * BK_X + i0 + i] = o[i * ENG_QGROUP_ROWS + k];
			}
		}
		return;
	}
	int q4 = c->rows / 4, stride = (c->cols + 31) / 32 * 32;
	if (!prefill && c->x4) { /* the quads in one call, as eng_qdot_rows */
		eng_qdot_rows_x4(c->dec, c->xq, c->xqb, c->w4, c->rb, 0, q4, c->nb, c->t, c->scratch);
		for (int r = 0; r < c->rows; r++)
			c->out[(size_t)r * BK_X] = c->dec[r];
		return;
	}
	if (!prefill && c->t != ENG_BF16) { /* decode as the engine runs it: every quad in one call */
		eng_qdot_rows(c->dec, c->xq, c->xqb, c->w, c->rb, 0, q4, q4, c->nb, c->t);
		for (int r = 0; r < c->rows; r++)
			c->out[(size_t)r * BK_X] = c->dec[r];
		return;
	}
	for (int g = 0; g < q4; g++) {
		const uint8_t *wr[4];
		group_rows(c, g, wr);
		int step = prefill ? ENG_BFDOT_X : 1, n = prefill ? BK_X : 1;
		for (int i0 = 0; i0 < n; i0 += step) {
			float o[ENG_BFDOT_X * 4];
			if (c->t == ENG_BF16) {
				const uint16_t *xr[ENG_BFDOT_X], *wb[4];
				for (int k = 0; k < step; k++)
					xr[k] = c->xbf + (size_t)(i0 + k) * stride;
				for (int k = 0; k < 4; k++)
					wb[k] = (const uint16_t *)wr[k];
				eng_bfdot(o, xr, step, wb, c->cols);
			} else {
				const eng_qxblk *xr[1] = {c->xq + (size_t)i0 * c->nb};
				const eng_qxbyt *xy[1] = {c->xqb + (size_t)i0 * c->nb};
				eng_qdot(o, xr, xy, 1, wr, c->nb, c->t);
			}
			for (int i = 0; i < step; i++)
				for (int k = 0; k < 4; k++)
					c->out[(size_t)(g + k * q4) * BK_X + i0 + i] = o[i * 4 + k];
		}
	}
}

/* Seconds a pass, the best of as many as fit in `budget` (at least 2). */
static double time_pass(bk_case *c, bool prefill, double budget)
{
	double best = 1e30, start = ev_now();
	for (int k = 0; k < 2 || ev_now() - start < budget; k++) {
		double t0 = ev_now();
		pass(c, prefill);
		double dt = ev_now() - t0;
		best = dt < best ? dt : best;
	}
	return best;
}

static void set_level(int t, int l)
{
	if (t == ENG_BF16)
		eng_bfdot_set_level(l);
	else
		eng_qdot_set_level(l);
}

static const char *level_name(int t, int l)
{
	if (t != ENG_BF16)
		return eng_qdot_level_name(l);
	return l == 2 ? "avx512-bf16" : l == 1 ? "avx2" : "plain";
}

static int case_init(bk_case *c, int t, int rows, int cols, ev_rng *r)
{
	memset(c, 0, sizeof *c);
	c->t = t, c->rows = rows, c->cols = cols, c->nb = cols / 32;
	c->rb = eng_dtype_bytes((eng_dtype)t, (size_t)cols);
	size_t n = (size_t)rows * cols;
	float *wf = malloc(n * sizeof *wf), *x = malloc((size_t)BK_X * cols * sizeof *x);
	c->w = malloc((size_t)rows * c->rb);
	c->xq = malloc((size_t)BK_X * c->nb * sizeof *c->xq);
	c->xqb = malloc((size_t)BK_X * c->nb * sizeof *c->xqb);
	c->xk = malloc((size_t)BK_X * (cols / 256) * sizeof *c->xk);
	c->xbf = malloc((size_t)BK_X * ((cols + 31) / 32 * 32) * sizeof *c->xbf);
	c->out = malloc((size_t)rows * BK_X * sizeof *c->out);
	c->dec = malloc((size_t)rows * sizeof *c->dec);
	bool ok = wf && x && c->w && c->xq && c->xqb && c->xk && c->xbf && c->out && c->dec;
	if (ok && (ok = (c->gmem = malloc(ENG_QGROUP_BYTES(c->nb))) != NULL))
		eng_qgroup_place(&c->grp, c->gmem, c->nb);
	if (ok) {
		for (size_t i = 0; i < n; i++)
			wf[i] = (float)(ev_rng_uniform(r) * 2 - 1);
		for (size_t i = 0; i < (size_t)BK_X * cols; i++)
			x[i] = (float)(ev_rng_uniform(r) * 2 - 1);
		if (t == ENG_BF16) {
			uint16_t *wb = (uint16_t *)c->w;
			for (size_t i = 0; i < n; i++)
				wb[i] = eng_f32_to_bf16(wf[i]);
		} else {
			eng_ggml_quantize(c->w, wf, eng_dtype_ggml((eng_dtype)t), n);
		}
		for (int i = 0; i < BK_X; i++) {
			eng_qx_quantize_ref(c->xq + (size_t)i * c->nb, x + (size_t)i * cols, cols);
			eng_q8k_quantize(c->xk + (size_t)i * (cols / 256), x + (size_t)i * cols, cols);
			eng_bf_round_ref(c->xbf + (size_t)i * ((cols + 31) / 32 * 32), x + (size_t)i * cols, cols);
		}
		eng_qx_bytes(c->xqb, c->xq, BK_X * c->nb);
	}
	if (ok && eng_qx4_type(t)) {
		c->w4 = malloc((size_t)rows * c->rb);
		c->scratch = malloc(4 * c->rb);
		if ((ok = c->w4 && c->scratch))
			eng_qx4_pack_rows(c->w4, c->w, rows, c->nb, t);
	}
	free(wf), free(x);
	return ok ? 0 : ev_error_set(EV_E_NOMEM, "out of memory for a %d x %d matrix", rows, cols);
}

static void case_free(bk_case *c)
{
	free(c->w4), free(c->scratch);
	free(c->gmem), free(c->w), free(c->xq), free(c->xqb), free(c->xk), free(c->xbf), free(c->out), free(c->dec);
}

int ev_bench_kernels_main(const ev_cli *cli, int argc, char **argv)
{
	bk_opts o = {.rows = 1024, .cols = 1536, .seconds = 0.2, .json = cli->json};
	int prc = ev_opt_parse(&bk_spec, &o, argc, argv, NULL, NULL);
	if (prc)
		return ev_opt_exit(prc);
	if ((size_t)o.rows * (size_t)o.cols > ((size_t)1 << 28)) {
		fprintf(stderr, "evald bench kernels: --rows x --cols is at most 268435456 weights (%d x %d asked)\n", o.rows,
		        o.cols);
		return EV_EXIT_USAGE;
	}
	if (o.rows % 16 || o.cols % 256) {
		fprintf(stderr, "evald bench kernels: --rows must be a multiple of 16 and --cols of 256 (%d, %d)\n", o.rows, o.cols);
		return EV_EXIT_USAGE;
	}
	int types[ENG_DTYPE_COUNT], nt = 0;
	if (o.types) {
		char *list = ev_strdup(o.types), *save = NULL;
		for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			int t = -1;
			for (int k = 0; k < ENG_DTYPE_COUNT && t < 0; k++)
				if ((k == ENG_BF16 || k >= ENG_Q8_0) && !strcasecmp(tok, eng_dtype_name((eng_dtype)k)))
					t = k;
			if (t < 0) {
				fprintf(stderr, "evald bench kernels: --types: '%s' is not bf16 or a block type (q8_0 .. q6_k)\n",
				        tok);
				free(list);
				return EV_EXIT_USAGE;
			}
			bool seen = false; /* a type named twice is measured once */
			for (int k = 0; k < nt; k++)
				seen = seen || types[k] == t;
			if (!seen)
				types[nt++] = t;
		}
		free(list);
	} else {
		types[nt++] = ENG_BF16;
		for (int t = ENG_Q8_0; t < ENG_DTYPE_COUNT; t++)
			types[nt++] = t;
	}
	int qtop = eng_qdot_level(), btop = eng_bfdot_level();
	ev_rng r;
	ev_rng_seed(&r, 7);
	if (o.json)
		printf("{\"rows\":%d,\"cols\":%d,\"threads\":1,\"kernels\":[", o.rows, o.cols);
	else
		printf("%d x %d weights, one thread; GMAC/s (x the plain definition); every level's outputs against "
		       "the definition's bits\n%-6s %-14s %4s %12s %16s %20s %10s\n",
		       o.rows, o.cols, "type", "level", "acts", "weight MiB", "decode GMAC/s", "prefill GMAC/s", "same bits");
	int rc = 0, first = 1;
	for (int i = 0; i < nt && !rc; i++) {
		int t = types[i], top = t == ENG_BF16 ? btop : qtop;
		bk_case c;
		if ((rc = case_init(&c, t, o.rows, o.cols, &r))) {
			ev_cli_fail("bench kernels");
			break;
		}
		size_t nout = (size_t)o.rows * BK_X;
		float *ref[2] = {malloc(nout * sizeof(float)), malloc(nout * sizeof(float))};
		double base[2] = {0, 0};
		/* K-quants: every level against 16-bit activations, then against 8-bit ones */
		int runs = eng_q8k_type(t) ? 2 * (top + 1) : top + 1;
		for (int run = 0; ref[0] && ref[1] && run < runs; run++) {
			int l = run % (top + 1);
			c.act8 = run > top;
			set_level(t, l);
			double s[2];
			bool same = true;
			for (int p = 0; p < 2; p++) {
				memset(c.out, 0, nout * sizeof(float));
				s[p] = time_pass(&c, p, o.seconds);
				if (l == 0) { /* each kind of activation against its own definition */
					base[p] = s[p];
					memcpy(ref[p], c.out, nout * sizeof(float));
				}
				same = same && !memcmp(ref[p], c.out, nout * sizeof(float));
			}
			double macs = (double)o.rows * o.cols, gd = macs / s[0] * 1e-9,
			       gp = macs * BK_X / s[1] * 1e-9;
			double mib = (double)o.rows * (double)c.rb / 1048576.0;
			if (o.json)
				printf("%s{\"type\":\"%s\",\"level\":\"%s\",\"activation_bits\":%d,\"weight_mib\":%.2f,\"decode_gmacs\":%.3f,"
				       "\"decode_gbs\":%.3f,\"prefill_gmacs\":%.3f,\"decode_vs_plain\":%.2f,"
				       "\"prefill_vs_plain\":%.2f,\"same_bits\":%s}",
				       first ? "" : ",", eng_dtype_lower((eng_dtype)t), level_name(t, l), c.act8 ? 8 : 16, mib, gd,
				       (double)o.rows * (double)c.rb / s[0] * 1e-9, gp, base[0] / s[0], base[1] / s[1],
				       same ? "true" : "false");
			else
				printf("%-6s %-14s %4s %12.2f %9.2f (%4.1fx) %13.2f (%4.1fx) %10s\n", eng_dtype_lower((eng_dtype)t),
				       level_name(t, l), t == ENG_BF16 ? "bf16" : c.act8 ? "8" : "16", mib, gd, base[0] / s[0], gp, base[1] / s[1], same ? "yes" : "NO");
			first = 0;
			if (!same)
				rc = 1;
			if (c.w4 && !c.act8 && l == top && top == 2) { /* decode on quads at the top level, 16-bit activations */
				c.x4 = 1;
				memset(c.out, 0, nout * sizeof(float));
				double sd = time_pass(&c, false, o.seconds);
				c.x4 = 0;
				bool same4 = !memcmp(ref[0], c.out, nout * sizeof(float));
				double g4 = macs / sd * 1e-9;
				char ln[32];
				snprintf(ln, sizeof ln, "%s x4", level_name(t, top));
				if (o.json)
					printf(",{\"type\":\"%s\",\"level\":\"%s\",\"layout\":\"x4\",\"activation_bits\":16,"
					       "\"weight_mib\":%.2f,\"decode_gmacs\":%.3f,\"decode_gbs\":%.3f,\"decode_vs_plain\":%.2f,"
					       "\"same_bits\":%s}",
					       eng_dtype_lower((eng_dtype)t), level_name(t, top), mib, g4,
					       (double)o.rows * (double)c.rb / sd * 1e-9, base[0] / sd, same4 ? "true" : "false");
				else
					printf("%-6s %-14s %4s %12.2f %9.2f (%4.1fx) %20s %10s\n", eng_dtype_lower((eng_dtype)t), ln, "16",
					       mib, g4, base[0] / sd, "-", same4 ? "yes" : "NO");
				if (!same4)
					rc = 1;
			}
		}
		set_level(t, top);
		free(ref[0]), free(ref[1]);
		case_free(&c);
	}
	if (o.json)
		printf("]}\n");
	if (rc == 1)
		fprintf(stderr, "evald bench kernels: a kernel's outputs differ from the plain definition's\n");
	return rc ? 1 : 0;
}
