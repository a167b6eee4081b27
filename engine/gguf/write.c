/*
 * engine/gguf/write.c: GGUF version 3 files written from memory (fixtures
 * and converters): metadata in the order given, tensors packed at
 * 32-byte alignment.
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
	ev_buf data; /* the tensor bytes, each padded to the alignment */
	uint64_t n_t;
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

int eng_gguf_put_tensor(eng_gguf_writer *w, const char *name, uint32_t type, const uint64_t *dims, int ndim,
                        const void *data, size_t bytes)
{
	if (ndim < 1 || ndim > 4)
		return ev_error_set(EV_E_INVALID, "gguf writer: %s: %d dimensions", name, ndim);
	int rc = put_string(&w->info, name);
	if (!rc)
		rc = put_u32(&w->info, (uint32_t)ndim);
	for (int d = 0; d < ndim && !rc; d++)
		rc = put_u64(&w->info, dims[d]);
	if (!rc)
		rc = put_u32(&w->info, type);
	if (!rc)
		rc = put_u64(&w->info, w->data.len);
	if (!rc)
		rc = put(&w->data, data, bytes);
	static const uint8_t zero[ALIGN] = {0};
	if (!rc && w->data.len % ALIGN)
		rc = put(&w->data, zero, ALIGN - w->data.len % ALIGN);
	if (!rc)
		w->n_t++;
	return rc;
}

int eng_gguf_write(eng_gguf_writer *w, const char *path)
{
	/* the header, metadata and tensor infos, padded to the alignment, then
	 * the tensor bytes where they are (not copied again: a file's worth of
	 * memory is enough) */
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
	const void *parts[2] = {h.data, w->data.data};
	size_t lens[2] = {h.len, w->data.len};
	if (!rc)
		rc = ev_file_write_parts(path, parts, lens, w->data.len ? 2 : 1);
	ev_buf_free(&h);
	return rc;
}
