/*
 * engine/gguf/gguf.c: a GGUF file read and validated whole (README.md):
 * every length is checked against the bytes left before it is used, so a
 * hostile header can only be refused.
 */
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

#define MAX_TENSORS ((uint64_t)1 << 20)
#define MAX_KV ((uint64_t)1 << 20)
#define MAX_STRING ((uint64_t)1 << 30)
#define MAX_ARRAY ((uint64_t)1 << 30)
#define MAX_NAME 4096 /* a key or tensor name */

typedef struct {
	const uint8_t *p;
	size_t len, at;
	const char *what;
} rd;

static int need(rd *r, uint64_t n, const char *field)
{
	if (n > r->len - r->at)
		return ev_error_set(EV_E_INVALID, "%s: %s at byte %zu: %llu bytes needed, %zu left (truncated or a bad "
		                                  "length)",
		                    r->what, field, r->at, (unsigned long long)n, r->len - r->at);
	return 0;
}

static int u32(rd *r, uint32_t *v, const char *field)
{
	int rc = need(r, 4, field);
	if (!rc) {
		memcpy(v, r->p + r->at, 4);
		r->at += 4;
	}
	return rc;
}

static int u64(rd *r, uint64_t *v, const char *field)
{
	int rc = need(r, 8, field);
	if (!rc) {
		memcpy(v, r->p + r->at, 8);
		r->at += 8;
	}
	return rc;
}

static int str(rd *r, eng_gguf_str *s, uint64_t max, const char *field)
{
	uint64_t n;
	int rc = u64(r, &n, field);
	if (rc)
		return rc;
	if (n > max)
		return ev_error_set(EV_E_LIMIT, "%s: %s at byte %zu: a string of %llu bytes (at most %llu)", r->what, field,
		                    r->at - 8, (unsigned long long)n, (unsigned long long)max);
	if ((rc = need(r, n, field)))
		return rc;
	s->p = (const char *)r->p + r->at;
	s->n = n;
	r->at += n;
	return 0;
}

static size_t scalar_size(uint32_t t)
{
	switch (t) {
	case ENG_GGUF_U8: case ENG_GGUF_I8: case ENG_GGUF_BOOL: return 1;
	case ENG_GGUF_U16: case ENG_GGUF_I16: return 2;
	case ENG_GGUF_U32: case ENG_GGUF_I32: case ENG_GGUF_F32: return 4;
	case ENG_GGUF_U64: case ENG_GGUF_I64: case ENG_GGUF_F64: return 8;
	}
	return 0;
}

static void scalar(eng_gguf_value *v, uint32_t t, const uint8_t *p)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32v;
	float f;
	switch (t) {
	case ENG_GGUF_U8: case ENG_GGUF_BOOL: v->v.u = p[0]; break;
	case ENG_GGUF_I8: v->v.i = (int8_t)p[0]; break;
	case ENG_GGUF_U16: memcpy(&u16, p, 2); v->v.u = u16; break;
	case ENG_GGUF_I16: memcpy(&u16, p, 2); v->v.i = (int16_t)u16; break;
	case ENG_GGUF_U32: memcpy(&u32v, p, 4); v->v.u = u32v; break;
	case ENG_GGUF_I32: memcpy(&u32v, p, 4); v->v.i = (int32_t)u32v; break;
	case ENG_GGUF_F32: memcpy(&f, p, 4); v->v.f = f; break;
	case ENG_GGUF_U64: memcpy(&v->v.u, p, 8); break;
	case ENG_GGUF_I64: memcpy(&v->v.i, p, 8); break;
	case ENG_GGUF_F64: memcpy(&v->v.f, p, 8); break;
	}
	(void)u8;
}

static bool is_signed(uint32_t t)
{
	return t == ENG_GGUF_I8 || t == ENG_GGUF_I16 || t == ENG_GGUF_I32 || t == ENG_GGUF_I64;
}

static int value(rd *r, eng_gguf_value *v, const char *key)
{
	char field[160];
	snprintf(field, sizeof field, "key '%.100s'", key);
	int rc;
	if (v->type == ENG_GGUF_STRING)
		return str(r, &v->s, MAX_STRING, field);
	if (v->type == ENG_GGUF_ARRAY) {
		if ((rc = u32(r, &v->elem_type, field)) || (rc = u64(r, &v->count, field)))
			return rc;
		if (v->count > MAX_ARRAY)
			return ev_error_set(EV_E_LIMIT, "%s: %s: an array of %llu elements (at most %llu)", r->what, field,
			                    (unsigned long long)v->count, (unsigned long long)MAX_ARRAY);
		v->elems = r->p + r->at;
		if (v->elem_type == ENG_GGUF_STRING) {
			for (uint64_t i = 0; i < v->count; i++) {
				eng_gguf_str s;
				if ((rc = str(r, &s, MAX_STRING, field)))
					return rc;
			}
			return 0;
		}
		size_t es = scalar_size(v->elem_type);
		if (!es)
			return ev_error_set(EV_E_INVALID, "%s: %s: arrays of type %u are not read (arrays of arrays included)",
			                    r->what, field, v->elem_type);
		if ((rc = need(r, v->count * es, field)))
			return rc;
		r->at += v->count * es;
		return 0;
	}
	size_t n = scalar_size(v->type);
	if (!n)
		return ev_error_set(EV_E_INVALID, "%s: %s: unknown value type %u", r->what, field, v->type);
	if ((rc = need(r, n, field)))
		return rc;
	scalar(v, v->type, r->p + r->at);
	if (v->type == ENG_GGUF_BOOL && v->v.u > 1)
		return ev_error_set(EV_E_INVALID, "%s: %s: a bool of %llu", r->what, field, (unsigned long long)v->v.u);
	r->at += n;
	return 0;
}

static bool name_ok(const eng_gguf_str *s)
{
	if (!s->n || s->n > MAX_NAME)
		return false;
	for (uint64_t i = 0; i < s->n; i++)
		if ((unsigned char)s->p[i] < 0x20)
			return false;
	return true;
}

static bool str_eq(const eng_gguf_str *a, const char *b)
{
	size_t n = strlen(b);
	return a->n == n && !memcmp(a->p, b, n);
}

static int by_offset(const void *a, const void *b)
{
	const eng_gguf_tensor *x = *(const eng_gguf_tensor *const *)a, *y = *(const eng_gguf_tensor *const *)b;
	return x->data < y->data ? -1 : x->data > y->data;
}

static int by_name(const void *a, const void *b)
{
	const eng_gguf_str *x = a, *y = b;
	uint64_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->p, y->p, n);
	return c ? c : (x->n < y->n ? -1 : x->n > y->n);
}

/* Duplicate names among n strings each `stride` bytes apart. */
static int duplicates(const void *base, size_t n, size_t stride, const char *what, const char *kind)
{
	eng_gguf_str *v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		memcpy(&v[i], (const char *)base + i * stride, sizeof *v);
	qsort(v, n, sizeof *v, by_name);
	int rc = 0;
	for (size_t i = 1; i < n && !rc; i++)
		if (!by_name(&v[i - 1], &v[i]))
			rc = ev_error_set(EV_E_INVALID, "%s: %s '%.*s' appears twice", what, kind, (int)(v[i].n < 200 ? v[i].n : 200),
			                  v[i].p);
	free(v);
	return rc;
}

int eng_gguf_parse(eng_gguf **out, const void *data, size_t len, const char *what)
{
	*out = NULL;
	rd r = {data, len, 0, what};
	uint32_t magic, version;
	uint64_t nt, nkv;
	int rc;
	if ((rc = u32(&r, &magic, "magic")))
		return rc;
	if (memcmp(&magic, "GGUF", 4))
		return ev_error_set(EV_E_INVALID, "%s: not a GGUF file (magic %02x %02x %02x %02x)", what, r.p[0], r.p[1],
		                    r.p[2], r.p[3]);
	if ((rc = u32(&r, &version, "version")))
		return rc;
	if (version != 3 && version != 2)
		return ev_error_set(EV_E_UNSUPPORTED, "%s: GGUF version %u (versions 2 and 3 are read)", what, version);
	if ((rc = u64(&r, &nt, "tensor count")) || (rc = u64(&r, &nkv, "metadata count")))
		return rc;
	if (nt > MAX_TENSORS || nkv > MAX_KV)
		return ev_error_set(EV_E_LIMIT, "%s: %llu tensors and %llu metadata keys (at most %llu and %llu)", what,
		                    (unsigned long long)nt, (unsigned long long)nkv, (unsigned long long)MAX_TENSORS,
		                    (unsigned long long)MAX_KV);
	eng_gguf *g = calloc(1, sizeof *g);
	if (!g)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	g->map = data, g->len = len, g->version = version, g->alignment = 32;
	/* counts are bounded by the bytes they need (a key at least 12 bytes,
	 * a tensor at least 24) before anything that size is allocated */
	if (nkv > (len - r.at) / 12 || nt > (len - r.at) / 24) {
		rc = ev_error_set(EV_E_INVALID, "%s: %llu keys and %llu tensors cannot fit in %zu bytes", what,
		                  (unsigned long long)nkv, (unsigned long long)nt, len);
		goto fail;
	}
	if (!(g->kv = calloc(nkv ? nkv : 1, sizeof *g->kv)) || !(g->t = calloc(nt ? nt : 1, sizeof *g->t))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto fail;
	}
	for (uint64_t i = 0; i < nkv; i++) {
		eng_gguf_value *v = &g->kv[i];
		char field[48];
		snprintf(field, sizeof field, "metadata key %llu", (unsigned long long)i);
		if ((rc = str(&r, &v->key, MAX_NAME, field)))
			goto fail;
		if (!name_ok(&v->key)) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: an empty name or one with control bytes", what, field);
			goto fail;
		}
		char key[MAX_NAME + 1];
		snprintf(key, sizeof key, "%.*s", (int)v->key.n, v->key.p);
		if ((rc = u32(&r, &v->type, key)))
			goto fail;
		size_t body = r.at;
		if ((rc = value(&r, v, key)))
			goto fail;
		v->raw = r.p + body, v->raw_len = r.at - body;
		g->n_kv++;
		if (str_eq(&v->key, "general.alignment")) {
			if (v->type != ENG_GGUF_U32 || !v->v.u || v->v.u > (1u << 20) || (v->v.u & (v->v.u - 1))) {
				rc = ev_error_set(EV_E_INVALID, "%s: general.alignment: expected a power of two up to 1 MiB (u32)", what);
				goto fail;
			}
			g->alignment = v->v.u;
		}
	}
	if ((rc = duplicates(g->kv, g->n_kv, sizeof *g->kv, what, "metadata key")))
		goto fail;
	for (uint64_t i = 0; i < nt; i++) {
		eng_gguf_tensor *t = &g->t[i];
		char field[48];
		snprintf(field, sizeof field, "tensor %llu", (unsigned long long)i);
		if ((rc = str(&r, &t->name, MAX_NAME, field)))
			goto fail;
		if (!name_ok(&t->name)) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: an empty name or one with control bytes", what, field);
			goto fail;
		}
		char nm[MAX_NAME + 1];
		snprintf(nm, sizeof nm, "tensor '%.*s'", (int)t->name.n, t->name.p);
		uint32_t nd;
		if ((rc = u32(&r, &nd, nm)))
			goto fail;
		if (nd < 1 || nd > 4) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: %u dimensions (1 to 4)", what, nm, nd);
			goto fail;
		}
		t->ndim = (int)nd;
		t->elements = 1;
		for (uint32_t d = 0; d < nd; d++) {
			if ((rc = u64(&r, &t->dims[d], nm)))
				goto fail;
			if (!t->dims[d] || t->dims[d] > ((uint64_t)1 << 40) || t->elements > ((uint64_t)1 << 40) / t->dims[d]) {
				rc = ev_error_set(EV_E_INVALID, "%s: %s: dimension %u of %llu (each at least 1, at most 2^40 elements in "
				                                "all)", what, nm, d, (unsigned long long)t->dims[d]);
				goto fail;
			}
			t->elements *= t->dims[d];
		}
		uint64_t off;
		if ((rc = u32(&r, &t->type, nm)) || (rc = u64(&r, &off, nm)))
			goto fail;
		int blk = eng_ggml_type_block(t->type);
		if (!blk) {
			const char *known = eng_ggml_type_known_name(t->type);
			char read[256];
			eng_ggml_type_names(read, sizeof read);
			rc = ev_error_set(EV_E_UNSUPPORTED, "%s: %s: type %s%s%u is not read (%s are)", what, nm, known ? known : "",
			                  known ? " = " : "", t->type, read);
			goto fail;
		}
		if (t->dims[0] % (uint64_t)blk) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: rows of %llu elements are not whole %s blocks of %d", what, nm,
			                  (unsigned long long)t->dims[0], eng_ggml_type_name(t->type), blk);
			goto fail;
		}
		t->bytes = t->elements / (uint64_t)blk * eng_ggml_type_size(t->type);
		if (off % g->alignment) {
			rc = ev_error_set(EV_E_INVALID, "%s: %s: offset %llu is not a multiple of the alignment %llu", what, nm,
			                  (unsigned long long)off, (unsigned long long)g->alignment);
			goto fail;
		}
		t->data = (const uint8_t *)(uintptr_t)off; /* an offset until the data section is known */
		g->n_t++;
	}
	if ((rc = duplicates(g->t, g->n_t, sizeof *g->t, what, "tensor")))
		goto fail;
	/* the data section: after the header, at the next multiple of the alignment */
	size_t ds = (r.at + g->alignment - 1) / g->alignment * g->alignment;
	if (nt && ds > len) {
		rc = ev_error_set(EV_E_INVALID, "%s: the tensor data would start at byte %zu, past the end (%zu)", what, ds, len);
		goto fail;
	}
	g->data_off = ds;
	for (size_t i = 0; i < g->n_t; i++) {
		eng_gguf_tensor *t = &g->t[i];
		uint64_t off = (uint64_t)(uintptr_t)t->data;
		if (off > len - ds || t->bytes > len - ds - off) {
			rc = ev_error_set(EV_E_INVALID, "%s: tensor '%.*s': bytes %llu to %llu of the data section, which has %zu",
			                  what, (int)(t->name.n < 200 ? t->name.n : 200), t->name.p, (unsigned long long)off,
			                  (unsigned long long)(off + t->bytes), len - ds);
			goto fail;
		}
		t->data = (const uint8_t *)data + ds + off;
	}
	/* no two tensors share bytes */
	const eng_gguf_tensor **order = malloc((g->n_t ? g->n_t : 1) * sizeof *order);
	if (!order) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < g->n_t; i++)
		order[i] = &g->t[i];
	qsort(order, g->n_t, sizeof *order, by_offset);
	for (size_t i = 1; i < g->n_t && !rc; i++)
		if (order[i - 1]->data + order[i - 1]->bytes > order[i]->data)
			rc = ev_error_set(EV_E_INVALID, "%s: tensors '%.*s' and '%.*s' overlap", what,
			                  (int)(order[i - 1]->name.n < 200 ? order[i - 1]->name.n : 200), order[i - 1]->name.p,
			                  (int)(order[i]->name.n < 200 ? order[i]->name.n : 200), order[i]->name.p);
	free(order);
	if (rc)
		goto fail;
	*out = g;
	return 0;
fail:
	free(g->kv);
	free(g->t);
	free(g);
	return rc;
}

int eng_gguf_open(eng_gguf **out, const char *path)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 24) {
		close(fd);
		return ev_error_set(EV_E_INVALID, "%s: not a GGUF file (not a regular file of at least 24 bytes)", path);
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return ev_error_set(EV_E_IO, "%s: mmap: %s", path, strerror(errno));
	eng_gguf *g = NULL;
	int rc = eng_gguf_parse(&g, m, (size_t)st.st_size, path);
	if (!rc && !(g->path = ev_strdup(path)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc) {
		if (g) {
			free(g->kv), free(g->t), free(g);
		}
		munmap(m, (size_t)st.st_size);
		return rc;
	}
	*out = g;
	return 0;
}

void eng_gguf_close(eng_gguf *g)
{
	if (!g)
		return;
	if (g->path) /* mapped by eng_gguf_open */
		munmap((void *)g->map, g->len);
	free(g->path);
	free(g->kv);
	free(g->t);
	free(g);
}

const eng_gguf_value *eng_gguf_find_key(const eng_gguf *g, const char *key)
{
	for (size_t i = 0; i < g->n_kv; i++)
		if (str_eq(&g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name)
{
	for (size_t i = 0; i < g->n_t; i++)
		if (str_eq(&g->t[i].name, name))
			return &g->t[i];
	return NULL;
}

int eng_gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out)
{
	const eng_gguf_value *v = eng_gguf_find_key(g, key);
	if (!v)
		return ev_error_set(EV_E_NOTFOUND, "%s: no key '%s'", g->path ? g->path : "gguf", key);
	if (!scalar_size(v->type) || v->type == ENG_GGUF_F32 || v->type == ENG_GGUF_F64 || v->type == ENG_GGUF_BOOL ||
	    (is_signed(v->type) && v->v.i < 0))
		return ev_error_set(EV_E_INVALID, "%s: '%s': expected a non-negative integer", g->path ? g->path : "gguf", key);
	*out = v->v.u;
	return 0;
}

int eng_gguf_get_f64(const eng_gguf *g, const char *key, double *out)
{
	const eng_gguf_value *v = eng_gguf_find_key(g, key);
	if (!v)
		return ev_error_set(EV_E_NOTFOUND, "%s: no key '%s'", g->path ? g->path : "gguf", key);
	if (v->type == ENG_GGUF_F32 || v->type == ENG_GGUF_F64)
		*out = v->v.f;
	else if (is_signed(v->type))
		*out = (double)v->v.i;
	else if (scalar_size(v->type) && v->type != ENG_GGUF_BOOL)
		*out = (double)v->v.u;
	else
		return ev_error_set(EV_E_INVALID, "%s: '%s': expected a number", g->path ? g->path : "gguf", key);
	return 0;
}

int eng_gguf_get_str(const eng_gguf *g, const char *key, char **out)
{
	*out = NULL;
	const eng_gguf_value *v = eng_gguf_find_key(g, key);
	if (!v)
		return ev_error_set(EV_E_NOTFOUND, "%s: no key '%s'", g->path ? g->path : "gguf", key);
	if (v->type != ENG_GGUF_STRING || memchr(v->s.p, 0, v->s.n))
		return ev_error_set(EV_E_INVALID, "%s: '%s': expected a string", g->path ? g->path : "gguf", key);
	return (*out = ev_strndup(v->s.p, v->s.n)) ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

eng_gguf_str eng_gguf_next_str(const uint8_t **at)
{
	eng_gguf_str s;
	memcpy(&s.n, *at, 8);
	s.p = (const char *)*at + 8;
	*at += 8 + s.n;
	return s;
}
