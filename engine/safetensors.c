/*
 * engine/safetensors.c: opening a checkpoint's weights. Each file is
 * mmapped read-only (or read into memory advised for huge pages: see
 * want_huge below) and its header validated strictly before any tensor is
 * used: the 8-byte length bounded and inside the file, the JSON parsed,
 * dtype known, shape x dtype size equal to the byte length, offsets inside
 * the data region, no two tensors overlapping, no name twice. Sharded
 * checkpoints are read through model.safetensors.index.json.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/backend.h"

#define ST_HEADER_MAX (100u << 20)   /* 100 MB of header JSON */
#define ST_MAX_TENSORS 1000000
#define ST_MAX_SHARDS 4096
#define ST_INDEX_MAX (64u << 20)

/* Where a weight file's bytes live, by EVALD_WEIGHT_PAGES:
 *   file  the file mmapped (4 KiB pages shared with the page cache: on
 *         this project's machines the kernel maps no file pages huge);
 *   huge  the file read into anonymous memory advised for transparent
 *         huge pages (madvise MADV_HUGEPAGE), then made read-only;
 *   auto  (unset) huge for files of WP_MIN_BYTES or more when the kernel
 *         offers transparent huge pages and MemAvailable holds the copy
 *         with WP_SPARE_BYTES to spare, else file.
 * Decode streams every weight once a token, and 2 MiB pages spare the
 * TLB: SmolLM2's BF16 file decoded at 97-103 tok/s from huge pages against
 * 90-94 mmapped (three interleaved rounds; a plain read of 256 MiB drew
 * 32-34 against 30-31 GB/s). The bytes are the same either way. */
#define WP_MIN_BYTES ((size_t)32 << 20)
#define WP_SPARE_BYTES ((uint64_t)1 << 30)

static bool thp_offered(void)
{
	char buf[128] = {0};
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

static bool want_huge(size_t size)
{
	const char *e = getenv("EVALD_WEIGHT_PAGES");
	if (e && !strcmp(e, "huge"))
		return true;
	if (e && !strcmp(e, "file"))
		return false;
	if (e && *e && strcmp(e, "auto"))
		ev_log_warn("EVALD_WEIGHT_PAGES=%s is not one of file, huge, auto; auto is used", e);
	return size >= WP_MIN_BYTES && thp_offered() && ev_mem_available() >= (uint64_t)size + WP_SPARE_BYTES;
}

/* The file's size bytes read into fresh anonymous memory advised for huge
 * pages, made read-only; NULL (errno set) when that fails. */
static void *read_huge(int fd, size_t size)
{
	void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		return NULL;
	(void)madvise(a, size, MADV_HUGEPAGE); /* advice: without it the copy still serves */
	for (size_t at = 0; at < size;) {
		ssize_t got = pread(fd, (char *)a + at, size - at, (off_t)at);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			int e = got < 0 ? errno : EIO; /* the file shrank under us */
			munmap(a, size);
			errno = e;
			return NULL;
		}
		at += (size_t)got;
	}
	if (mprotect(a, size, PROT_READ)) {
		int e = errno;
		munmap(a, size);
		errno = e;
		return NULL;
	}
	return a;
}

static int by_offset(const void *a, const void *b)
{
	const eng_tensor *x = a, *y = b;
	uintptr_t p = (uintptr_t)x->data, q = (uintptr_t)y->data;
	return p < q ? -1 : p > q;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const eng_tensor *)a)->name, ((const eng_tensor *)b)->name);
}

/* F32, F16, BF16, and ggml's block types in evald's own files (a GGUF's
 * blocks kept as stored, engine/gguf/convert.c) */
static int parse_dtype(eng_dtype *out, const char *s)
{
	int t = eng_dtype_parse(s);
	if (t < 0)
		return -1;
	*out = (eng_dtype)t;
	return 0;
}

/* Reads one tensor's header entry into t (name already set). */
static int parse_entry(eng_tensor *t, const cJSON *e, const char *path, const char *base, size_t data_len)
{
	if (!cJSON_IsObject(e))
		return ev_error_set(EV_E_PARSE, "%s: tensor '%s': entry is not an object", path, t->name);
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
	if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
		return ev_error_set(EV_E_PARSE, "%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]",
				    path, t->name);
	if (parse_dtype(&t->dtype, dt->valuestring))
		return ev_error_set(EV_E_UNSUPPORTED, "%s: tensor '%s': dtype '%s' not supported (F32, F16, BF16)",
				    path, t->name, dt->valuestring);
	int nd = cJSON_GetArraySize(sh);
	if (nd > ENG_MAX_DIMS)
		return ev_error_set(EV_E_INVALID, "%s: tensor '%s': %d dimensions (at most %d)", path, t->name, nd,
				    ENG_MAX_DIMS);
	t->ndim = nd;
	uint64_t elems = 1;
	for (int i = 0; i < nd; i++) {
		const cJSON *d = cJSON_GetArrayItem(sh, i);
		if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 ||
		    d->valuedouble != (double)(int64_t)d->valuedouble)
			return ev_error_set(EV_E_INVALID, "%s: tensor '%s': bad shape dimension %d", path, t->name, i);
		t->shape[i] = (int64_t)d->valuedouble;
		if (t->shape[i] && elems > UINT64_MAX / 16 / (uint64_t)t->shape[i])
			return ev_error_set(EV_E_INVALID, "%s: tensor '%s': shape too large", path, t->name);
		elems *= (uint64_t)t->shape[i];
	}
	double b = cJSON_GetArrayItem(off, 0)->valuedouble, en = cJSON_GetArrayItem(off, 1)->valuedouble;
	if (!cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)) || !(b >= 0) ||
	    !(en >= b) || b != floor(b) || en != floor(en))
		return ev_error_set(EV_E_INVALID, "%s: tensor '%s': bad data_offsets", path, t->name);
	if (en > (double)data_len) /* before any cast to an integer */
		return ev_error_set(EV_E_INVALID,
				    "%s: tensor '%s': data_offsets [%.0f, %.0f] past the end of the data (%zu bytes)",
				    path, t->name, b, en, data_len);
	int blk = eng_dtype_block(t->dtype);
	if (blk > 1 && (t->ndim < 1 || t->shape[t->ndim - 1] % blk))
		return ev_error_set(EV_E_INVALID, "%s: tensor '%s': %s rows must be whole blocks of %d", path, t->name,
				    eng_dtype_name(t->dtype), blk);
	uint64_t want = eng_dtype_bytes(t->dtype, elems);
	t->nbytes = (size_t)(en - b);
	if (want != t->nbytes)
		return ev_error_set(EV_E_INVALID,
				    "%s: tensor '%s': shape and dtype %s need %llu bytes but data_offsets span %zu",
				    path, t->name, eng_dtype_name(t->dtype), (unsigned long long)want, t->nbytes);
	t->data = base + (size_t)b;
	return 0;
}

int eng_st_parse(eng_tensor_set *ts, int fi, const char *path, const void *map, size_t len)
{
	cJSON *root = NULL;
	int rc = 0, first = ts->nt;
	if (len < 8)
		return ev_error_set(EV_E_PARSE, "%s: too short for a safetensors file (%zu bytes)", path, len);
	uint64_t hlen = 0;
	const unsigned char *p = map;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | p[i];
	if (hlen > ST_HEADER_MAX)
		return ev_error_set(EV_E_LIMIT, "%s: header length %llu over the limit of %u bytes", path,
				    (unsigned long long)hlen, ST_HEADER_MAX);
	if (hlen < 2 || hlen > len - 8)
		return ev_error_set(EV_E_PARSE, "%s: header length %llu runs past the end of the file (%zu bytes)",
				    path, (unsigned long long)hlen, len);
	if ((rc = ev_json_parse(&root, (const char *)p + 8, (size_t)hlen, path)))
		return rc;
	if (!cJSON_IsObject(root)) {
		rc = ev_error_set(EV_E_PARSE, "%s: header is not a JSON object", path);
		goto done;
	}
	const char *base = (const char *)p + 8 + hlen;
	size_t data_len = len - 8 - (size_t)hlen;
	int n = 0;
	for (const cJSON *e = root->child; e; e = e->next)
		n++;
	if (n > ST_MAX_TENSORS || ts->nt + n > ST_MAX_TENSORS) {
		rc = ev_error_set(EV_E_LIMIT, "%s: too many tensors (%d)", path, n);
		goto done;
	}
	eng_tensor *nt = realloc(ts->t, (size_t)(ts->nt + n + 1) * sizeof(*nt));
	if (!nt) {
		rc = ev_error_set(EV_E_NOMEM, "%s: out of memory", path);
		goto done;
	}
	ts->t = nt;
	for (const cJSON *e = root->child; e; e = e->next) {
		if (!e->string) {
			rc = ev_error_set(EV_E_PARSE, "%s: header entry without a name", path);
			goto done;
		}
		if (!strcmp(e->string, "__metadata__"))
			continue;
		/* a name given twice in one header is that, not an overlap */
		for (const cJSON *o = root->child; o != e; o = o->next)
			if (o->string && !strcmp(o->string, e->string)) {
				rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s' appears twice in the header", path, e->string);
				goto done;
			}
		eng_tensor *t = &ts->t[ts->nt];
		memset(t, 0, sizeof(*t));
		t->file = fi;
		if (!(t->name = ev_strdup(e->string))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		ts->nt++;
		if ((rc = parse_entry(t, e, path, base, data_len)))
			goto done;
	}
	/* overlaps: sort this file's tensors by offset; each must end before
	 * the next begins (empty tensors take no room) */
	int cnt = ts->nt - first;
	eng_tensor *ft = ts->t + first;
	qsort(ft, (size_t)cnt, sizeof(*ft), by_offset);
	for (int i = 1; i < cnt; i++) {
		const char *prev_end = (const char *)ft[i - 1].data + ft[i - 1].nbytes;
		if (ft[i].nbytes && ft[i - 1].nbytes && (const char *)ft[i].data < prev_end) {
			rc = ev_error_set(EV_E_INVALID, "%s: tensors '%s' and '%s' overlap in the data region", path,
					  ft[i - 1].name, ft[i].name);
			goto done;
		}
	}
	/* misaligned data (offsets not a multiple of the element size after
	 * the header) gets an aligned copy, so the kernels may load directly */
	for (int i = 0; i < cnt; i++) {
		size_t es = eng_dtype_block(ft[i].dtype) > 1 ? 2 : eng_dtype_size(ft[i].dtype); /* blocks: f16 scales */
		if (((uintptr_t)ft[i].data % es) == 0 || !ft[i].nbytes)
			continue;
		void *cp = NULL;
		void **nc = realloc(ts->copies, (size_t)(ts->ncopies + 1) * sizeof(*nc));
		if (!nc || posix_memalign(&cp, 64, ft[i].nbytes)) {
			if (nc)
				ts->copies = nc;
			rc = ev_error_set(EV_E_NOMEM, "%s: out of memory copying '%s'", path, ft[i].name);
			goto done;
		}
		ts->copies = nc;
		memcpy(cp, ft[i].data, ft[i].nbytes);
		ts->copies[ts->ncopies++] = cp;
		ft[i].data = cp;
	}
done:
	cJSON_Delete(root);
	return rc;
}

static int map_file(eng_tensor_set *ts, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	int rc = 0;
	void *m = NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rc = ev_error_set(EV_E_IO, "%s: not a regular file", path);
		goto done;
	}
	if (st.st_size < 8) {
		rc = ev_error_set(EV_E_PARSE, "%s: too short for a safetensors file (%lld bytes)", path,
				  (long long)st.st_size);
		goto done;
	}
	bool huge = false;
	if (want_huge((size_t)st.st_size)) {
		if ((m = read_huge(fd, (size_t)st.st_size)))
			huge = true;
		else
			ev_log_warn("%s: reading into huge pages failed (%s); mmapped instead", path, strerror(errno));
	}
	if (!huge)
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		rc = ev_error_set(EV_E_IO, "%s: mmap: %s", path, strerror(errno));
		goto done;
	}
	int fi = ts->nfiles;
	void **nm = realloc(ts->maps, (size_t)(fi + 1) * sizeof(*nm));
	if (nm)
		ts->maps = nm;
	size_t *nl = realloc(ts->map_len, (size_t)(fi + 1) * sizeof(*nl));
	if (nl)
		ts->map_len = nl;
	char **np = realloc(ts->paths, (size_t)(fi + 1) * sizeof(*np));
	if (np)
		ts->paths = np;
	char *pcopy = ev_strdup(path);
	if (!nm || !nl || !np || !pcopy) {
		free(pcopy);
		munmap(m, (size_t)st.st_size);
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	ts->maps[fi] = m;
	ts->map_len[fi] = (size_t)st.st_size;
	ts->paths[fi] = pcopy;
	ts->nfiles++;
	ts->nhuge += huge;
	rc = eng_st_parse(ts, fi, path, m, (size_t)st.st_size);
done:
	close(fd);
	return rc;
}

/* A shard name from the index must be a plain file name in the folder. */
static bool safe_name(const char *s)
{
	return s[0] && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\') && strlen(s) < 256;
}

static int open_index(eng_tensor_set *ts, const char *dir, const char *ipath)
{
	char *text = NULL;
	cJSON *root = NULL;
	char **files = NULL;
	int nfiles = 0, rc;
	size_t len;
	if ((rc = ev_file_read(&text, &len, ipath, ST_INDEX_MAX)))
		return ev_error_wrap(rc, "%s", ipath);
	if ((rc = ev_json_parse(&root, text, len, ipath)))
		goto done;
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		rc = ev_error_set(EV_E_PARSE, "%s: no 'weight_map' object", ipath);
		goto done;
	}
	/* distinct shard files, in order of first mention */
	for (const cJSON *e = wm->child; e; e = e->next) {
		if (!cJSON_IsString(e) || !safe_name(e->valuestring)) {
			rc = ev_error_set(EV_E_UNSAFE, "%s: weight_map['%s']: not a plain file name in the folder",
					  ipath, e->string ? e->string : "?");
			goto done;
		}
		int j = 0;
		for (; j < nfiles; j++)
			if (!strcmp(files[j], e->valuestring))
				break;
		if (j < nfiles)
			continue;
		if (nfiles >= ST_MAX_SHARDS) {
			rc = ev_error_set(EV_E_LIMIT, "%s: more than %d shards", ipath, ST_MAX_SHARDS);
			goto done;
		}
		char **nf = realloc(files, (size_t)(nfiles + 1) * sizeof(*nf));
		if (!nf) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		files = nf;
		files[nfiles++] = e->valuestring;
	}
	for (int j = 0; j < nfiles; j++) {
		char *p = ev_asprintf("%s/%s", dir, files[j]);
		if (!p) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		rc = map_file(ts, p);
		free(p);
		if (rc)
			goto done;
	}
	/* every name the index lists must be in the shard it names */
	qsort(ts->t, (size_t)ts->nt, sizeof(*ts->t), by_name);
	for (const cJSON *e = wm->child; e; e = e->next) {
		eng_tensor *t = eng_st_find(ts, e->string);
		if (!t || strcmp(ts->paths[t->file] + strlen(dir) + 1, e->valuestring)) {
			rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s' is not in shard '%s'", ipath, e->string,
					  e->valuestring);
			goto done;
		}
	}
done:
	free(files);
	cJSON_Delete(root);
	free(text);
	return rc;
}

int eng_st_open(eng_tensor_set *ts, const char *dir)
{
	memset(ts, 0, sizeof(*ts));
	int rc;
	char *single = ev_asprintf("%s/model.safetensors", dir);
	char *index = ev_asprintf("%s/model.safetensors.index.json", dir);
	if (!single || !index) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (access(single, F_OK) == 0) {
		rc = map_file(ts, single);
	} else if (access(index, F_OK) == 0) {
		rc = open_index(ts, dir, index);
	} else {
		rc = ev_error_set(EV_E_NOTFOUND, "%s: neither model.safetensors nor model.safetensors.index.json", dir);
	}
	if (rc)
		goto done;
	qsort(ts->t, (size_t)ts->nt, sizeof(*ts->t), by_name);
	for (int i = 1; i < ts->nt; i++)
		if (!strcmp(ts->t[i - 1].name, ts->t[i].name)) {
			rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s' appears twice", ts->paths[ts->t[i].file],
					  ts->t[i].name);
			goto done;
		}
done:
	free(single);
	free(index);
	if (rc)
		eng_st_close(ts);
	return rc;
}

eng_tensor *eng_st_find(eng_tensor_set *ts, const char *name)
{
	eng_tensor key;
	key.name = (char *)name;
	return ts->t ? bsearch(&key, ts->t, (size_t)ts->nt, sizeof(key), by_name) : NULL;
}

void eng_st_close(eng_tensor_set *ts)
{
	if (!ts)
		return;
	for (int i = 0; i < ts->nt; i++)
		free(ts->t[i].name);
	free(ts->t);
	for (int i = 0; i < ts->nfiles; i++) {
		munmap(ts->maps[i], ts->map_len[i]);
		free(ts->paths[i]);
	}
	for (int i = 0; i < ts->ncopies; i++)
		free(ts->copies[i]);
	free(ts->copies);
	free(ts->maps);
	free(ts->map_len);
	free(ts->paths);
	memset(ts, 0, sizeof(*ts));
}
