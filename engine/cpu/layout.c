/*
 * engine/cpu/layout.c: the fast CPU path's weight layout. Where this CPU
 * decodes with AVX512-VNNI, each 2-D weight of Q8_0 .. Q5_1, Q4_K, Q5_K
 * and Q6_K (rows a multiple of 4; the K-quants not where they meet 8-bit
 * activations) is laid out in place as quads of four rows (qdot.h
 * eng_qx4_pack) when the model is loaded: decode then takes a block's
 * four rows in one load, where rows as stored take four and shuffles
 * (engine/README.md "Quads laid out four rows together"). The weight
 * keeps its bytes and place, so views into one tensor (gate and up,
 * experts) stay where they were; eng_weight.x4 tells every reader, and
 * the ones that read rows take them through eng_weight_row. The embedding
 * table too: a token's row comes out of its quad a block at a time
 * (eng_weight_row_f32), and a head tied to it is a matmul like any other.
 *
 * EVALD_WEIGHT_LAYOUT=rows keeps every weight as stored (the baseline in
 * measurements); quads (or unset) is the default.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/base.h"
#include "engine/cpu/cpu_int.h"

/* Every 2-D weight the model's layers and head hold. */
static int weights_of(eng_model *m, eng_weight ***out)
{
	const eng_config *c = &m->c;
	int cap = 2 + c->layers * (14 + 3 * (c->experts > 0 ? c->experts : 0)), n = 0;
	eng_weight **w = malloc((size_t)cap * sizeof *w);
	if (!w)
		return -1;
	w[n++] = &m->lm_head;
	if (m->embed.data != m->lm_head.data) /* a tied table is marked with its head (below) */
		w[n++] = &m->embed;
	for (int l = 0; l < c->layers; l++) {
		eng_layer *L = &m->layers[l];
		eng_weight *one[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn.gate, &L->ffn.up, &L->ffn.down, &L->router,
		                     &L->shared.gate, &L->shared.up, &L->shared.down, &L->shared_gate, &L->iq, &L->ik};
		for (size_t k = 0; k < sizeof one / sizeof one[0]; k++)
			w[n++] = one[k];
		for (int e = 0; L->moe && L->experts && e < c->experts; e++) {
			w[n++] = &L->experts[e].gate;
			w[n++] = &L->experts[e].up;
			w[n++] = &L->experts[e].down;
		}
	}
	*out = w;
	return n;
}

static bool inside(const void *p, size_t n, const void *base, size_t len)
{
	const char *a = p, *b = base;
	return a >= b && (size_t)(a - b) <= len && n <= len - (size_t)(a - b);
}

/* Where a weight's bytes live: the file map (or huge-page copy) index,
 * len + i for an aligned copy of a tensor (writable already), or -1: not
 * memory the model owns, left as it is. */
static int home_of(const eng_model *m, const eng_weight *w, size_t bytes)
{
	const eng_tensor_set *ts = &m->ts;
	for (int i = 0; i < ts->nfiles; i++)
		if (ts->maps[i] && inside(w->data, bytes, ts->maps[i], ts->map_len[i]))
			return i;
	for (int i = 0; i < ts->nt; i++)
		for (int k = 0; k < ts->ncopies; k++)
			if (ts->t[i].data == ts->copies[k] && inside(w->data, bytes, ts->t[i].data, ts->t[i].nbytes))
				return ts->nfiles + k;
	return -1;
}

int eng_cpu_lay_out_quads(eng_model *m, bool kquants)
{
	const char *e = getenv("EVALD_WEIGHT_LAYOUT");
	if (e && *e && strcmp(e, "quads")) {
		if (strcmp(e, "rows"))
			ev_log_warn("EVALD_WEIGHT_LAYOUT=%s is not one of quads, rows; quads are used", e);
		else
			return 0;
	}
	eng_weight **w = NULL;
	int n = weights_of(m, &w);
	if (n < 0)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	const eng_tensor_set *ts = &m->ts;
	bool *opened = calloc((size_t)ts->nfiles + 1, sizeof *opened);
	uint8_t *tmp = NULL;
	size_t tmp_cap = 0;
	int rc = 0;
	if (!opened)
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < n && !rc; i++) {
		eng_weight *x = w[i];
		bool kq = eng_q8k_type((int)x->dtype); /* (kept as rows with 8-bit activations: their kernels read rows) */
		if (!x->data || x->x4 || !eng_qx4_type((int)x->dtype) || (kq && !kquants) || x->rows % 4 ||
		    x->cols % eng_dtype_block(x->dtype))
			continue;
		size_t rb = eng_dtype_bytes(x->dtype, (size_t)x->cols), bytes = rb * (size_t)x->rows;
		int home = home_of(m, x, bytes);
		if (home < 0)
			continue;
		if (home < ts->nfiles && !opened[home]) {
			/* a private mapping or our own copy: writes stay in this process */
			if (mprotect(ts->maps[home], ts->map_len[home], PROT_READ | PROT_WRITE)) {
				rc = ev_error_set(EV_E_IO, "%s: cannot make the weights writable to lay them out: %s",
				                  ts->paths[home], strerror(errno));
				break;
			}
			opened[home] = true;
		}
		if (4 * rb > tmp_cap) {
			uint8_t *nt = realloc(tmp, 4 * rb);
			if (!nt) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				break;
			}
			tmp = nt, tmp_cap = 4 * rb;
		}
		uint8_t *data = (uint8_t *)(uintptr_t)x->data;
		for (int q = 0; q < x->rows / 4; q++) { /* a quad at a time through tmp, in place */
			uint8_t *quad = data + (size_t)q * 4 * rb;
			memcpy(tmp, quad, 4 * rb);
			eng_qx4_pack_rows(quad, tmp, 4, x->cols / 32, (int)x->dtype);
		}
		x->x4 = true;
		m->quad_bytes += bytes;
	}
	if (m->embed.data == m->lm_head.data) /* tied: the head's view is the table's (model.c's only alias) */
		m->embed.x4 = m->lm_head.x4;
	for (int i = 0; i < ts->nfiles; i++)
		if (opened[i] && mprotect(ts->maps[i], ts->map_len[i], PROT_READ) && !rc)
			rc = ev_error_set(EV_E_IO, "%s: cannot make the weights read-only again: %s", ts->paths[i],
			                  strerror(errno));
	free(tmp);
	free(opened);
	free(w);
	return rc;
}
