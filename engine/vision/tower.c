/*
 * engine/vision/tower.c: MiniMax-M3's vision tower and projector, the
 * plain definition (f32 loops, one image at a time), as transformers'
 * MiniMaxM3VLVisionModel and MiniMaxM3VLMultiModalProjector compute them:
 * a Conv3d patch embedding without bias (one matmul over 3 x T x P x P
 * values a patch), a LayerNorm, pre-norm encoder layers (LayerNorm, full
 * non-causal attention with biases and axial 3-D RoPE on the first
 * 3 * 2 * ((head_dim / 3) / 2) channels, LayerNorm, GELU MLP), then per
 * patch a GELU MLP to the text width and per merge group of merge^2
 * patches (contiguous rows) a second GELU MLP into one LM token.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#ifdef EV_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "base/base.h"
#include "engine/backend.h"
#include "engine/vision/vision.h"

typedef struct {
	float *w, *b; /* [out, in], [out] (b may be NULL) */
	int out, in;
} lin;

typedef struct {
	float *g, *b;
} lnorm;

typedef struct {
	lnorm ln1, ln2;
	lin q, k, v, o, fc1, fc2;
} vlayer;

struct eng_vision_model {
	bool fast; /* OpenBLAS GEMMs for the matmuls and attention (else the plain loops) */
	int hidden, inter, layers, heads, head_dim, text_hidden, proj_hidden;
	float eps;
	double theta;
	eng_vision_prep prep, vprep; /* images', videos' */
	float *patch_w; /* [hidden, 3 * T * P * P] */
	lnorm pre;
	vlayer *L;
	lin p1, p2, m1, m2;
	float **owned;
	int nowned;
};

static float *own(eng_vision_model *vm, float *p)
{
	float **no = p ? realloc(vm->owned, (size_t)(vm->nowned + 1) * sizeof *no) : NULL;
	if (!no) {
		free(p);
		return NULL;
	}
	vm->owned = no;
	return vm->owned[vm->nowned++] = p;
}

/* tensor `name` (any dtype) as f32 with n values, or an error naming it */
static float *tensor_f32(eng_vision_model *vm, eng_tensor_set *ts, const char *name, size_t n, int *rc)
{
	if (*rc)
		return NULL;
	eng_tensor *t = eng_st_find(ts, name);
	if (!t) {
		*rc = ev_error_set(EV_E_NOTFOUND, "vision tower: tensor %s missing", name);
		return NULL;
	}
	size_t cnt = 1;
	for (int d = 0; d < t->ndim; d++)
		cnt *= (size_t)t->shape[d];
	if (cnt != n) {
		*rc = ev_error_set(EV_E_INVALID, "vision tower: tensor %s has %zu values, the config implies %zu", name, cnt, n);
		return NULL;
	}
	float *v = own(vm, malloc(n * sizeof(float)));
	if (!v) {
		*rc = ev_error_set(EV_E_NOMEM, "out of memory for %s", name);
		return NULL;
	}
	eng_to_f32(v, t->data, t->dtype, n);
	return v;
}

static lin load_lin(eng_vision_model *vm, eng_tensor_set *ts, const char *pre, int out, int in, int *rc)
{
	char nm[256];
	lin l = {NULL, NULL, out, in};
	snprintf(nm, sizeof nm, "%s.weight", pre);
	l.w = tensor_f32(vm, ts, nm, (size_t)out * in, rc);
	snprintf(nm, sizeof nm, "%s.bias", pre);
	l.b = tensor_f32(vm, ts, nm, (size_t)out, rc);
	return l;
}

static lnorm load_ln(eng_vision_model *vm, eng_tensor_set *ts, const char *pre, int n, int *rc)
{
	char nm[256];
	lnorm l;
	snprintf(nm, sizeof nm, "%s.weight", pre);
	l.g = tensor_f32(vm, ts, nm, (size_t)n, rc);
	snprintf(nm, sizeof nm, "%s.bias", pre);
	l.b = tensor_f32(vm, ts, nm, (size_t)n, rc);
	return l;
}

static int cfg_int(const cJSON *o, const char *k, int dflt, int lo, int hi, int *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!v || cJSON_IsNull(v)) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < lo || v->valuedouble > hi)
		return ev_error_set(EV_E_INVALID, "config.json: vision setting '%s' must be a whole number in [%d, %d]", k, lo, hi);
	*out = (int)v->valuedouble;
	return 0;
}

int eng_vision_model_load(eng_vision_model **out, const char *dir)
{
	*out = NULL;
	char *path = ev_asprintf("%s/config.json", dir), *text = NULL;
	size_t len = 0;
	int rc = path ? ev_file_read(&text, &len, path, 4u << 20) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(path);
	if (rc)
		return rc;
	cJSON *root = cJSON_ParseWithLength(text, len);
	free(text);
	const cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config"),
		    *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	if (!cJSON_IsObject(vc) || !cJSON_IsObject(tc)) {
		cJSON_Delete(root);
		return ev_error_set(EV_E_UNSUPPORTED, "%s: no vision_config and text_config (not a multimodal M3 checkpoint)", dir);
	}
	eng_vision_model *vm = calloc(1, sizeof *vm);
	if (!vm) {
		cJSON_Delete(root);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	vm->prep = (eng_vision_prep)ENG_VISION_PREP_INIT;
#ifdef EV_HAVE_OPENBLAS
	vm->fast = true;
#endif
	int eps_ok = 1;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(vc, "layer_norm_eps"), *rp = cJSON_GetObjectItemCaseSensitive(vc, "rope_parameters");
	vm->eps = cJSON_IsNumber(e) ? (float)e->valuedouble : 1e-5f;
	eps_ok = vm->eps > 0 && vm->eps < 1;
	const cJSON *th = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "rope_theta") : NULL;
	vm->theta = cJSON_IsNumber(th) ? th->valuedouble : 10000.0;
	const cJSON *act = cJSON_GetObjectItemCaseSensitive(vc, "hidden_act");
	if ((rc = cfg_int(vc, "hidden_size", 1280, 1, 1 << 16, &vm->hidden)) ||
	    (rc = cfg_int(vc, "intermediate_size", 5120, 1, 1 << 18, &vm->inter)) ||
	    (rc = cfg_int(vc, "num_hidden_layers", 32, 1, 1024, &vm->layers)) ||
	    (rc = cfg_int(vc, "num_attention_heads", 16, 1, 1024, &vm->heads)) ||
	    (rc = cfg_int(vc, "patch_size", 14, 1, 64, &vm->prep.patch)) ||
	    (rc = cfg_int(vc, "temporal_patch_size", 2, 1, 8, &vm->prep.temporal)) ||
	    (rc = cfg_int(vc, "spatial_merge_size", 2, 1, 8, &vm->prep.merge)) ||
	    (rc = cfg_int(tc, "hidden_size", 6144, 1, 1 << 17, &vm->text_hidden)) ||
	    (rc = cfg_int(root, "projector_hidden_size", 6144, 1, 1 << 17, &vm->proj_hidden)))
		goto fail;
	if (!eps_ok || vm->hidden % vm->heads || (act && !(cJSON_IsString(act) && !strcmp(act->valuestring, "gelu")))) {
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s: vision tower with layer_norm_eps %g, hidden %d over %d heads, act %s: "
						   "not what M3's tower is", dir, vm->eps, vm->hidden, vm->heads,
				  cJSON_IsString(act) ? act->valuestring : "gelu");
		goto fail;
	}
	vm->head_dim = vm->hidden / vm->heads;
	vm->vprep = (eng_vision_prep)ENG_VISION_VIDEO_PREP_INIT;
	vm->vprep.patch = vm->prep.patch, vm->vprep.temporal = vm->prep.temporal, vm->vprep.merge = vm->prep.merge;
	cJSON_Delete(root);
	root = NULL;
	eng_tensor_set ts;
	memset(&ts, 0, sizeof ts);
	if ((rc = eng_st_open(&ts, dir)))
		goto fail;
	int H = vm->hidden, T = vm->prep.temporal, P = vm->prep.patch, M = vm->prep.merge;
	const char *pw = "model.vision_tower.embeddings.proj.weight";
	if (!eng_st_find(&ts, pw)) /* the released checkpoints' own name */
		pw = "model.vision_tower.embeddings.patch_embedding.weight";
	vm->patch_w = tensor_f32(vm, &ts, pw, (size_t)H * 3 * T * P * P, &rc);
	vm->pre = load_ln(vm, &ts, "model.vision_tower.pre_layrnorm", H, &rc);
	vm->L = calloc((size_t)vm->layers, sizeof *vm->L);
	if (!vm->L && !rc)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < vm->layers && !rc; i++) {
		char p[128];
		vlayer *L = &vm->L[i];
#define PFX(s) (snprintf(p, sizeof p, "model.vision_tower.layers.%d.%s", i, s), p)
		L->ln1 = load_ln(vm, &ts, PFX("layer_norm1"), H, &rc);
		L->ln2 = load_ln(vm, &ts, PFX("layer_norm2"), H, &rc);
		L->q = load_lin(vm, &ts, PFX("self_attn.q_proj"), H, H, &rc);
		L->k = load_lin(vm, &ts, PFX("self_attn.k_proj"), H, H, &rc);
		L->v = load_lin(vm, &ts, PFX("self_attn.v_proj"), H, H, &rc);
		L->o = load_lin(vm, &ts, PFX("self_attn.out_proj"), H, H, &rc);
		L->fc1 = load_lin(vm, &ts, PFX("mlp.fc1"), vm->inter, H, &rc);
		L->fc2 = load_lin(vm, &ts, PFX("mlp.fc2"), H, vm->inter, &rc);
#undef PFX
	}
	int TH = vm->text_hidden, PH = vm->proj_hidden;
	vm->p1 = load_lin(vm, &ts, "model.multi_modal_projector.linear_1", PH, H, &rc);
	vm->p2 = load_lin(vm, &ts, "model.multi_modal_projector.linear_2", TH, PH, &rc);
	vm->m1 = load_lin(vm, &ts, "model.multi_modal_projector.merge_linear_1", PH, TH * M * M, &rc);
	vm->m2 = load_lin(vm, &ts, "model.multi_modal_projector.merge_linear_2", TH, PH, &rc);
	eng_st_close(&ts);
	if (rc)
		goto fail;
	*out = vm;
	return 0;
fail:
	cJSON_Delete(root);
	eng_vision_model_free(vm);
	return rc;
}

void eng_vision_model_free(eng_vision_model *vm)
{
	if (!vm)
		return;
	for (int i = 0; i < vm->nowned; i++)
		free(vm->owned[i]);
	free(vm->owned);
	free(vm->L);
	free(vm);
}

const eng_vision_prep *eng_vision_model_prep(const eng_vision_model *vm)
{
	return &vm->prep;
}

const eng_vision_prep *eng_vision_model_video_prep(const eng_vision_model *vm)
{
	return &vm->vprep;
}

int eng_vision_model_text_hidden(const eng_vision_model *vm)
{
	return vm->text_hidden;
}

/* y[n, l.out] = x[n, l.in] . w^T + b */
static void linear(const eng_vision_model *vm, float *y, const float *x, int n, const lin *l)
{
#ifdef EV_HAVE_OPENBLAS
	if (vm->fast) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, l->out, l->in, 1.0f, x, l->in, l->w, l->in, 0.0f, y,
			    l->out);
		for (int r = 0; l->b && r < n; r++)
			for (int o = 0; o < l->out; o++)
				y[(size_t)r * l->out + o] += l->b[o];
		return;
	}
#else
	(void)vm;
#endif
	for (int r = 0; r < n; r++)
		for (int o = 0; o < l->out; o++) {
			const float *w = l->w + (size_t)o * l->in, *xr = x + (size_t)r * l->in;
			float s = 0;
			for (int i = 0; i < l->in; i++)
				s += w[i] * xr[i];
			y[(size_t)r * l->out + o] = s + (l->b ? l->b[o] : 0.0f);
		}
}

static void layer_norm(float *y, const float *x, int n, int d, const lnorm *ln, float eps)
{
	for (int r = 0; r < n; r++) {
		const float *xr = x + (size_t)r * d;
		double mean = 0, var = 0;
		for (int i = 0; i < d; i++)
			mean += xr[i];
		mean /= d;
		for (int i = 0; i < d; i++)
			var += (xr[i] - mean) * (xr[i] - mean);
		var /= d;
		float inv = (float)(1.0 / sqrt(var + eps));
		for (int i = 0; i < d; i++)
			y[(size_t)r * d + i] = ((float)(xr[i] - mean) * inv) * ln->g[i] + ln->b[i];
	}
}

/* exact GELU, as torch's default */
static void gelu(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))));
}

/* Axial 3-D RoPE on q or k [n, heads, hd]: channel i < rot/2 pairs with
 * i + rot/2 (rotate-half) and turns by angle[r][i]. */
static void rope3(float *x, int n, int heads, int hd, int rot, const float *cosv, const float *sinv)
{
	int half = rot / 2;
	for (int r = 0; r < n; r++)
		for (int h = 0; h < heads; h++) {
			float *v = x + ((size_t)r * heads + h) * hd;
			for (int i = 0; i < half; i++) {
				float c = cosv[(size_t)r * half + i], s = sinv[(size_t)r * half + i], a = v[i], b = v[i + half];
				v[i] = a * c - b * s;
				v[i + half] = b * c + a * s;
			}
		}
}

/* Full attention over the n patches, per head: the plain loops, or two
 * GEMMs a head with the softmax between. */
static int attend(const eng_vision_model *vm, float *ao, const float *q, const float *k, const float *v, int n, int heads,
		  int hd, float scale)
{
	int H = heads * hd;
#ifdef EV_HAVE_OPENBLAS
	if (vm->fast) {
		float *S = malloc((size_t)n * n * sizeof(float));
		if (!S)
			return ev_error_set(EV_E_NOMEM, "out of memory for %d x %d attention scores", n, n);
		for (int hh = 0; hh < heads; hh++) {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, hd, scale, q + (size_t)hh * hd, H,
				    k + (size_t)hh * hd, H, 0.0f, S, n);
			for (int i = 0; i < n; i++) {
				float *row = S + (size_t)i * n, mx = -INFINITY;
				for (int j = 0; j < n; j++)
					mx = row[j] > mx ? row[j] : mx;
				double sum = 0;
				for (int j = 0; j < n; j++)
					sum += row[j] = expf(row[j] - mx);
				float inv = (float)(1.0 / sum);
				for (int j = 0; j < n; j++)
					row[j] *= inv;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, n, 1.0f, S, n, v + (size_t)hh * hd, H, 0.0f,
				    ao + (size_t)hh * hd, H);
		}
		free(S);
		return 0;
	}
#else
	(void)vm;
#endif
	float *att = malloc((size_t)n * sizeof(float));
	if (!att)
		return ev_error_set(EV_E_NOMEM, "out of memory for attention");
	for (int hh = 0; hh < heads; hh++)
		for (int i = 0; i < n; i++) {
			const float *qi = q + ((size_t)i * heads + hh) * hd;
			float mx = -INFINITY;
			for (int j = 0; j < n; j++) {
				const float *kj = k + ((size_t)j * heads + hh) * hd;
				float s = 0;
				for (int d = 0; d < hd; d++)
					s += qi[d] * kj[d];
				att[j] = s * scale;
				mx = att[j] > mx ? att[j] : mx;
			}
			double sum = 0;
			for (int j = 0; j < n; j++)
				sum += att[j] = expf(att[j] - mx);
			float *o = ao + ((size_t)i * heads + hh) * hd;
			for (int d = 0; d < hd; d++) {
				double acc = 0;
				for (int j = 0; j < n; j++)
					acc += att[j] * v[((size_t)j * heads + hh) * hd + d];
				o[d] = (float)(acc / sum);
			}
		}
	free(att);
	return 0;
}

void eng_vision_model_set_fast(eng_vision_model *vm, bool fast)
{
	vm->fast = fast;
}

bool eng_vision_model_fast(const eng_vision_model *vm)
{
	return vm->fast;
}

int eng_vision_encode(eng_vision_model *vm, const eng_vision_input *in, float **rows, int *nrows)
{
	*rows = NULL, *nrows = 0;
	const eng_vision_prep *p = &vm->prep;
	int H = vm->hidden, n = in->n, M = p->merge, hd = vm->head_dim, heads = vm->heads;
	if (in->dim != 3 * p->temporal * p->patch * p->patch || n % (M * M) || in->grid_h % M || in->grid_w % M ||
	    n != in->grid_t * in->grid_h * in->grid_w)
		return ev_error_set(EV_E_INVALID, "vision tower: %d patches of %d values on a (%d, %d, %d) grid do not fit "
						  "patch %d, temporal %d, merge %d", n, in->dim, in->grid_t, in->grid_h, in->grid_w,
				    p->patch, p->temporal, M);
	int S = 2 * ((hd / 3) / 2), half = 3 * (S / 2), rot = 2 * half, inter = vm->inter;
	size_t big = (size_t)n * (size_t)(inter > H ? inter : H);
	float *x = malloc((size_t)n * H * sizeof(float)), *h = malloc(big * sizeof(float)), *q = malloc((size_t)n * H * sizeof(float));
	float *k = malloc((size_t)n * H * sizeof(float)), *v = malloc((size_t)n * H * sizeof(float));
	float *cosv = malloc((size_t)n * (half ? half : 1) * sizeof(float));
	float *sinv = malloc((size_t)n * (half ? half : 1) * sizeof(float)), *ao = malloc((size_t)n * H * sizeof(float));
	int rc = 0;
	if (!x || !h || !q || !k || !v || !cosv || !sinv || !ao) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory encoding %d patches", n);
		goto out;
	}
	/* patch embedding: one matmul over each row's values */
	lin pe = {vm->patch_w, NULL, H, in->dim};
	linear(vm, x, in->pixels, n, &pe);
	/* positions (t, h, w) of each row (merge groups in rows), their angles */
	int gw = in->grid_w, per = in->grid_h * gw;
	for (int r = 0; r < n; r++) {
		int t = r / per, rr = r % per, g = rr / (M * M), kk = rr % (M * M);
		int ph = (g / (gw / M)) * M + kk / M, pw = (g % (gw / M)) * M + kk % M;
		int pos[3] = {t, ph, pw};
		for (int a = 0; a < 3; a++)
			for (int i = 0; i < S / 2; i++) {
				float inv = 1.0f / powf((float)vm->theta, (float)(2 * i) / (float)S);
				float f = (float)pos[a] * inv;
				cosv[(size_t)r * half + a * (S / 2) + i] = cosf(f);
				sinv[(size_t)r * half + a * (S / 2) + i] = sinf(f);
			}
	}
	layer_norm(x, x, n, H, &vm->pre, vm->eps);
	float scale = 1.0f / sqrtf((float)hd);
	for (int l = 0; l < vm->layers; l++) {
		vlayer *L = &vm->L[l];
		layer_norm(h, x, n, H, &L->ln1, vm->eps);
		linear(vm, q, h, n, &L->q);
		linear(vm, k, h, n, &L->k);
		linear(vm, v, h, n, &L->v);
		rope3(q, n, heads, hd, rot, cosv, sinv);
		rope3(k, n, heads, hd, rot, cosv, sinv);
		/* every patch attends every patch of its image (one image here) */
		if ((rc = attend(vm, ao, q, k, v, n, heads, hd, scale)))
			goto out;
		linear(vm, h, ao, n, &L->o);
		for (size_t i = 0; i < (size_t)n * H; i++)
			x[i] += h[i];
		layer_norm(h, x, n, H, &L->ln2, vm->eps);
		float *f = malloc((size_t)n * inter * sizeof(float));
		if (!f) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory encoding %d patches", n);
			goto out;
		}
		linear(vm, f, h, n, &L->fc1);
		gelu(f, (size_t)n * inter);
		linear(vm, h, f, n, &L->fc2);
		free(f);
		for (size_t i = 0; i < (size_t)n * H; i++)
			x[i] += h[i];
	}
	/* the projector: per patch to the text width, then per merge group */
	int TH = vm->text_hidden, PH = vm->proj_hidden, ng = n / (M * M);
	float *a = malloc((size_t)n * PH * sizeof(float)), *b = malloc((size_t)n * TH * sizeof(float));
	float *c = malloc((size_t)ng * PH * sizeof(float)), *y = malloc((size_t)ng * TH * sizeof(float));
	if (!a || !b || !c || !y) {
		free(a), free(b), free(c), free(y);
		rc = ev_error_set(EV_E_NOMEM, "out of memory projecting %d patches", n);
		goto out;
	}
	linear(vm, a, x, n, &vm->p1);
	gelu(a, (size_t)n * PH);
	linear(vm, b, a, n, &vm->p2);
	linear(vm, c, b, ng, &vm->m1); /* b's rows, M * M at a time, are one merged row */
	gelu(c, (size_t)ng * PH);
	linear(vm, y, c, ng, &vm->m2);
	free(a), free(b), free(c);
	*rows = y, *nrows = ng;
out:
	free(x), free(h), free(q), free(k), free(v), free(cosv), free(sinv), free(ao);
	return rc;
}

int eng_vision_encode_video(eng_vision_model *vm, const eng_vision_input *in, float **rows, int *nrows)
{
	*rows = NULL, *nrows = 0;
	int per = in->grid_h * in->grid_w, M = vm->prep.merge, total = in->n / (M * M), at = 0, rc = 0;
	if (in->grid_t < 1 || per < 1 || in->n != in->grid_t * per)
		return ev_error_set(EV_E_INVALID, "video: %d patches on a (%d, %d, %d) grid", in->n, in->grid_t, in->grid_h,
				    in->grid_w);
	size_t TH = (size_t)vm->text_hidden;
	float *all = malloc((size_t)(total ? total : 1) * TH * sizeof(float));
	if (!all)
		return ev_error_set(EV_E_NOMEM, "out of memory for %d video rows", total);
	for (int t0 = 0; t0 < in->grid_t && !rc; t0 += ENG_VISION_SEGMENT_FRAMES) {
		eng_vision_input seg = *in;
		seg.grid_t = in->grid_t - t0 < ENG_VISION_SEGMENT_FRAMES ? in->grid_t - t0 : ENG_VISION_SEGMENT_FRAMES;
		seg.n = seg.grid_t * per;
		seg.pixels = in->pixels + (size_t)t0 * per * in->dim;
		float *r = NULL;
		int nr = 0;
		if (!(rc = eng_vision_encode(vm, &seg, &r, &nr))) {
			memcpy(all + (size_t)at * TH, r, (size_t)nr * TH * sizeof(float));
			at += nr;
		}
		free(r);
	}
	if (rc) {
		free(all);
		return rc;
	}
	*rows = all, *nrows = at;
	return 0;
}

int eng_vision_encode_image(eng_vision_model *vm, const eng_image *im, float **rows, int *nrows)
{
	*rows = NULL, *nrows = 0;
	eng_vision_input v;
	int rc = eng_vision_preprocess(im, &vm->prep, &v);
	if (!rc)
		rc = eng_vision_encode(vm, &v, rows, nrows);
	eng_vision_input_free(&v);
	return rc;
}
