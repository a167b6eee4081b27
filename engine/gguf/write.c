/*
 * engine/gguf/write.c: GGUF version 3 files (fixtures and converters):
 * metadata in the order given, tensors packed at 32-byte alignment, their
 * bytes given at once or made one tensor at a time while the file is
 * written (eng_gguf_write_with), so that a converter holds one tensor.
 */
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/fs.h"

struct eng_gguf_writer {
	ev_buf kv;   /* the metadata pairs as they go in the file */
	uint64_t n_kv;
	ev_buf info; /* the tensor infos */
	ev_buf data; /* the bytes of the tensors given at once, each padded to the alignment */
	uint64_t n_t;
	uint64_t off; /* the next tensor's offset in the file's data */
	struct wt {
		size_t bytes, at; /* its bytes; where they are in data (given at once) */
		bool later;       /* made by eng_gguf_write_with's fill */
	} *t;
	size_t cap;
};

#define ALIGN 32

int eng_gguf_writer_new(eng_gguf_writer **out)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	ev_buf_init(&(*out)->kv, (size_t)1 << 32);
	ev_buf_init(&(*out)->info, (size_t)1 << 30);
	ev_buf_init(&(*out)->data, (size_t)1 << 36);
	return 0;
}

void eng_gguf_writer_free(eng_gguf_writer *w)
{
	if (!w)
		return;
	ev_buf_free(&w->kv), ev_buf_free(&w->info), ev_buf_free(&w->data);
	free(w->t);
	free(w);
}

static int put(ev_buf *b, const void *p, size_t n)
{
	return ev_buf_append(b, p, n);
}

static int put_u32(ev_buf *b, uint32_t v)
{
	return put(b, &v, 4);
}

static int put_u64(ev_buf *b, uint64_t v)
{
	return put(b, &v, 8);
}

static int put_string(ev_buf *b, const char *s)
{
	size_t n = strlen(s);
	int rc = put_u64(b, n);
	return rc ? rc : put(b, s, n);
}

static int key(eng_gguf_writer *w, const char *k, uint32_t type)
{
	int rc = put_string(&w->kv, k);
	if (!rc)
		rc = put_u32(&w->kv, type);
	if (!rc)
		w->n_kv++;
	return rc;
}

int eng_gguf_put_u32(eng_gguf_writer *w, const char *k, uint32_t v)
{
	int rc = key(w, k, ENG_GGUF_U32);
	return rc ? rc : put_u32(&w->kv, v);
}

int eng_gguf_put_f32(eng_gguf_writer *w, const char *k, float v)
{
	int rc = key(w, k, ENG_GGUF_F32);
	return rc ? rc : put(&w->kv, &v, 4);
}

int eng_gguf_put_bool(eng_gguf_writer *w, const char *k, bool v)
{
	uint8_t b = v;
	int rc = key(w, k, ENG_GGUF_BOOL);
	return rc ? rc : put(&w->kv, &b, 1);
}

int eng_gguf_put_str(eng_gguf_writer *w, const char *k, const char *v)
{
	int rc = key(w, k, ENG_GGUF_STRING);
	return rc ? rc : put_string(&w->kv, v);
}

static int array_head(eng_gguf_writer *w, const char *k, uint32_t et, size_t n)
{
	int rc = key(w, k, ENG_GGUF_ARRAY);
	if (!rc)
		rc = put_u32(&w->kv, et);
	return rc ? rc : put_u64(&w->kv, n);
}

int eng_gguf_put_strs(eng_gguf_writer *w, const char *k, const char *const *v, size_t n)
{
	int rc = array_head(w, k, ENG_GGUF_STRING, n);
	for (size_t i = 0; i < n && !rc; i++)
		rc = put_string(&w->kv, v[i]);
	return rc;
}

int eng_gguf_put_i32s(eng_gguf_writer *w, const char *k, const int32_t *v, size_t n)
{
	int rc = array_head(w, k, ENG_GGUF_I32, n);
	return rc ? rc : put(&w->kv, v, n * 4);
}

int eng_gguf_put_f32s(eng_gguf_writer *w, const char *k, const float *v, size_t n)
{
	int rc = array_head(w, k, ENG_GGUF_F32, n);
	return rc ? rc : put(&w->kv, v, n * 4);
}

int eng_gguf_put_raw(eng_gguf_writer *w, const char *k, uint32_t type, const void *body, size_t bytes)
{
	int rc = key(w, k, type);
	return rc ? rc : put(&w->kv, body, bytes);
}

/* A tensor's entry (its bytes at the next offset) and its record */
static int put_entry(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim, size_t bytes,
                     bool later)
{
	if (ndim < 1 || ndim > 4)
		return ev_error_set(EV_E_INVALID, "gguf writer: %s: %d dimensions", name, ndim);
	if (w->n_t == w->cap) {
		size_t nc = w->cap ? 2 * w->cap : 64;
		struct wt *nt = realloc(w->t, nc * sizeof *nt);
		if (!nt)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		w->t = nt, w->cap = nc;
	}
	int rc = put_string(&w->info, name);
	if (!rc)
		rc = put_u32(&w->info, (uint32_t)ndim);
	for (int d = 0; d < ndim && !rc; d++)
		rc = put_u64(&w->info, dims[d]);
	if (!rc)
		rc = put_u32(&w->info, type);
	if (!rc)
		rc = put_u64(&w->info, w->off);
	if (rc)
		return rc;
	w->t[w->n_t++] = (struct wt){bytes, w->data.len, later};
	w->off += (bytes + ALIGN - 1) / ALIGN * ALIGN;
	return 0;
}

int eng_gguf_put_tensor(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim,
                        const void *data, size_t bytes)
{
	int rc = put_entry(w, name, type, dims, ndim, bytes, false);
	if (!rc)
		rc = put(&w->data, data, bytes);
	static const uint8_t zero[ALIGN] = {0};
	if (!rc && w->data.len % ALIGN)
		rc = put(&w->data, zero, ALIGN - w->data.len % ALIGN);
	return rc;
}

int eng_gguf_put_tensor_later(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim,
                              size_t bytes)
{
	return put_entry(w, name, type, dims, ndim, bytes, true);
}

int eng_gguf_write(eng_gguf_writer *w, const char *path)
{
	return eng_gguf_write_with(w, path, NULL, NULL);
}

int eng_gguf_write_with(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ctx)
{
	/* the header, metadata and tensor infos, padded to the alignment, then
	 * each tensor's bytes where they are, or as fill makes them, padded */
	ev_buf h = EV_BUF_INIT((size_t)1 << 32);
	static const uint8_t zero[ALIGN] = {0};
	int rc = put(&h, "GGUF", 4);
	if (!rc)
		rc = put_u32(&h, 3);
	if (!rc)
		rc = put_u64(&h, w->n_t);
	if (!rc)
		rc = put_u64(&h, w->n_kv);
	if (!rc && w->kv.len)
		rc = put(&h, w->kv.data, w->kv.len);
	if (!rc && w->info.len)
		rc = put(&h, w->info.data, w->info.len);
	if (!rc && h.len % ALIGN)
		rc = put(&h, zero, ALIGN - h.len % ALIGN);
	ev_file_out f;
	if (rc || (rc = ev_file_out_open(&f, path))) {
		ev_buf_free(&h);
		return rc;
	}
	rc = ev_file_out_write(&f, h.data, h.len);
	ev_buf_free(&h);
	void *buf = NULL;
	size_t cap = 0;
	for (size_t i = 0, later = 0; i < w->n_t && !rc; i++) {
		const struct wt *t = &w->t[i];
		const void *bytes = t->later ? NULL : (const void *)(w->data.data + t->at);
		if (t->later) {
			if (!fill) {
				rc = ev_error_set(EV_E_INVALID, "gguf writer: tensor %zu's bytes were to come later", i);
				break;
			}
			if (t->bytes > cap) {
				free(buf);
				cap = t->bytes;
				if (!(buf = malloc(cap))) {
					rc = ev_error_set(EV_E_NOMEM, "out of memory for a tensor of %zu bytes", cap);
					break;
				}
			}
			if ((rc = fill(ctx, later++, buf, t->bytes)))
				break;
			bytes = buf;
		}
		rc = ev_file_out_write(&f, bytes, t->bytes);
		if (!rc && t->bytes % ALIGN)
			rc = ev_file_out_write(&f, zero, ALIGN - t->bytes % ALIGN);
	}
	free(buf);
	return rc ? (ev_file_out_abort(&f), rc) : ev_file_out_commit(&f);
}
