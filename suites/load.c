/*
 * load.c: ev_suite_load: a folder, an archive or a bare .jsonl file into an
 * ev_suite; suite.json parsing and validation; ev_suite_free.
 *
 * Errors name the file as the user knows it ("mysuite/suite.json",
 * "bundle.tar.gz: suite.json"), never the private extraction folder.
 */
#include "suites/suites_int.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SUITE_NAME 256

void ev_suite_options_resolve(ev_suite_options *dst, const ev_suite_options *src)
{
	ev_suite_options d = EV_SUITE_OPTIONS_INIT;
	if (src) {
		/* A zeroed field means "the default", so a struct that was only
		 * memset works too. */
		if (src->max_archive_bytes)
			d.max_archive_bytes = src->max_archive_bytes;
		if (src->max_entries)
			d.max_entries = src->max_entries;
		if (src->max_file_bytes)
			d.max_file_bytes = src->max_file_bytes;
		if (src->max_samples)
			d.max_samples = src->max_samples;
		d.tmp_dir = src->tmp_dir;
	}
	*dst = d;
}

void ev_suite_free(ev_suite *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_samples; i++)
		ev_sample_clear(&s->samples[i]);
	free(s->samples);
	for (size_t i = 0; i < s->gen.n_stop; i++)
		free(s->gen.stop[i]);
	free(s->gen.stop);
	free(s->name);
	free(s->version);
	free(s->kind);
	free(s->root);
	free(s->content_hash);
	free(s->system_prompt);
	free(s->prompt_template);
	free(s->checker_json);
	if (s->extracted_dir) {
		if (ev_rmtree(s->extracted_dir, 0))
			ev_log_warn("%s", ev_error_msg());
		free(s->extracted_dir);
	}
	free(s);
}

static int nomem(void) { return ev_error_set(EV_E_NOMEM, "out of memory"); }

/* ---- suite.json ---------------------------------------------------------- */

static bool is_int(const cJSON *v, double lo, double hi)
{
	return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble) &&
	       v->valuedouble >= lo && v->valuedouble <= hi;
}

static int parse_stop(ev_gen *g, const cJSON *v, const char *what)
{
	static const char bad[] = "%s: generation.stop: expected a string or a list of up to %d non-empty strings";
	size_t n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? (size_t)cJSON_GetArraySize(v) : 0;
	if ((!cJSON_IsString(v) && !cJSON_IsArray(v)) || n > EV_SUITE_MAX_STOP)
		return ev_error_set(EV_E_INVALID, bad, what, EV_SUITE_MAX_STOP);
	if (!n)
		return 0;
	if (!(g->stop = calloc(n, sizeof *g->stop)))
		return nomem();
	for (const cJSON *e = cJSON_IsString(v) ? v : v->child; e && g->n_stop < n; e = e->next) {
		if (!cJSON_IsString(e) || !e->valuestring[0])
			return ev_error_set(EV_E_INVALID, bad, what, EV_SUITE_MAX_STOP);
		if (!(g->stop[g->n_stop] = ev_strdup(e->valuestring)))
			return nomem();
		g->n_stop++;
	}
	return 0;
}

static int parse_gen(ev_gen *g, const cJSON *obj, const char *what, ev_buf *unknown)
{
	if (!cJSON_IsObject(obj))
		return ev_error_set(EV_E_INVALID, "%s: generation: expected an object", what);
	const cJSON *v;
	cJSON_ArrayForEach(v, obj) {
		const char *k = v->string;
		if (cJSON_IsNull(v))
			continue;
		if (!strcmp(k, "max_tokens")) {
			if (!is_int(v, 1, INT_MAX))
				return ev_error_set(EV_E_INVALID, "%s: generation.max_tokens: expected a positive integer", what);
			g->max_tokens = (int)v->valuedouble;
		} else if (!strcmp(k, "temperature")) {
			if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 100)
				return ev_error_set(EV_E_INVALID, "%s: generation.temperature: expected a number from 0 to 100",
				                    what);
			g->temperature = v->valuedouble;
		} else if (!strcmp(k, "top_p")) {
			if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1))
				return ev_error_set(EV_E_INVALID, "%s: generation.top_p: expected a number in (0, 1]", what);
			g->top_p = v->valuedouble;
		} else if (!strcmp(k, "seed")) {
			if (!is_int(v, -9007199254740992.0, 9007199254740992.0))
				return ev_error_set(EV_E_INVALID, "%s: generation.seed: expected an integer", what);
			g->has_seed = true;
			g->seed = (int64_t)v->valuedouble;
		} else if (!strcmp(k, "epochs")) {
			if (!is_int(v, 1, EV_SUITE_MAX_EPOCHS))
				return ev_error_set(EV_E_INVALID, "%s: generation.epochs: expected an integer from 1 to %d", what,
				                    EV_SUITE_MAX_EPOCHS);
			g->epochs = (int)v->valuedouble;
		} else if (!strcmp(k, "stop")) {
			int rc = parse_stop(g, v, what);
			if (rc)
				return rc;
		} else {
			/* The list is only for the warning: past its cap it is cut. */
			char shown[EV_SUITE_SHOW];
			ev_suite_show(shown, k);
			(void)ev_buf_printf(unknown, "%sgeneration.%s", unknown->len ? ", " : "", shown);
		}
	}
	return 0;
}

/* A string field (or NULL when absent or null); numbers are accepted as
 * text where `numbers` says so ("version": 2). */
static int str_field(char **out, const cJSON *v, const char *key, bool numbers, const char *what)
{
	char num[32];
	if (cJSON_IsNull(v))
		return 0;
	if (cJSON_IsString(v))
		*out = ev_strdup(v->valuestring);
	else if (numbers && cJSON_IsNumber(v))
		ev_suite_num_text(num, v->valuedouble), *out = ev_strdup(num);
	else
		return ev_error_set(EV_E_INVALID, "%s: %s: expected a string", what, key);
	return *out ? 0 : nomem();
}

static int check_name(const char *name, const char *what)
{
	size_t n = strlen(name);
	if (!n || n > MAX_SUITE_NAME)
		return ev_error_set(EV_E_INVALID, "%s: name: expected 1 to %d bytes", what, MAX_SUITE_NAME);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return ev_error_set(EV_E_INVALID, "%s: name: control characters are not allowed", what);
	return 0;
}

static int parse_suite_json(ev_suite *s, const char *text, size_t len, const char *what)
{
	cJSON *j = NULL;
	ev_buf unknown = EV_BUF_INIT(4096);
	int rc = 0;
	if (!ev_utf8_valid(text, len))
		return ev_error_set(EV_E_PARSE, "%s: invalid UTF-8", what);
	if ((rc = ev_json_parse(&j, text, len, what)))
		goto done;
	if (!cJSON_IsObject(j)) {
		rc = ev_error_set(EV_E_PARSE, "%s: expected a JSON object", what);
		goto done;
	}
	const cJSON *v;
	cJSON_ArrayForEach(v, j) {
		const char *k = v->string;
		if (!strcmp(k, "name")) {
			rc = str_field(&s->name, v, k, false, what);
			if (!rc && s->name)
				rc = check_name(s->name, what);
		} else if (!strcmp(k, "version")) {
			rc = str_field(&s->version, v, k, true, what);
		} else if (!strcmp(k, "kind")) {
			rc = str_field(&s->kind, v, k, false, what);
		} else if (!strcmp(k, "description")) {
			if (!cJSON_IsString(v) && !cJSON_IsNull(v))
				rc = ev_error_set(EV_E_INVALID, "%s: description: expected a string", what);
		} else if (!strcmp(k, "system_prompt")) {
			rc = str_field(&s->system_prompt, v, k, false, what);
		} else if (!strcmp(k, "prompt_template")) {
			rc = str_field(&s->prompt_template, v, k, false, what);
			if (!rc && s->prompt_template)
				rc = ev_template_check(s->prompt_template, what);
		} else if (!strcmp(k, "generation")) {
			if (!cJSON_IsNull(v))
				rc = parse_gen(&s->gen, v, what, &unknown);
		} else if (!strcmp(k, "checker")) {
			if (!cJSON_IsNull(v))
				rc = ev_suite_checker_json(&s->checker_json, v, what);
		} else {
			char shown[EV_SUITE_SHOW];
			ev_suite_show(shown, k);
			(void)ev_buf_printf(&unknown, "%s%s", unknown.len ? ", " : "", shown);
		}
		if (rc)
			goto done;
	}
	/* Once a load: a newer suite format should still load here. */
	if (unknown.len)
		ev_log_warn("%s: unknown keys ignored: %s", what, unknown.data);
done:
	ev_buf_free(&unknown);
	cJSON_Delete(j);
	return rc;
}

/* ---- the three kinds of path --------------------------------------------- */

static bool exists(const char *dir, const char *name)
{
	char *p = ev_asprintf("%s/%s", dir, name);
	bool ok = p && access(p, F_OK) == 0;
	free(p);
	return ok;
}

static int finish_hash(ev_suite *s, ev_sha256_ctx *h)
{
	char hex[EV_SHA256_HEX];
	ev_sha256_end_hex(h, hex);
	return (s->content_hash = ev_strdup(hex)) ? 0 : nomem();
}

/* A folder holding suite.json (optional) and samples.jsonl. `root` is a
 * realpath; `disp` is what errors call the folder, ending in "/" or ": ". */
static int load_dir(ev_suite *s, const char *root, const char *disp, const char *dflt_name,
                    const ev_suite_options *opt)
{
	char *sj_path = NULL, *sj_disp = NULL, *sm_path = NULL, *sm_disp = NULL, *text = NULL;
	ev_sha256_ctx *h = NULL;
	size_t len = 0;
	int rc = 0;
	if (!(s->root = ev_strdup(root)) || !(sj_path = ev_asprintf("%s/suite.json", root)) ||
	    !(sj_disp = ev_asprintf("%ssuite.json", disp)) || !(sm_path = ev_asprintf("%s/samples.jsonl", root)) ||
	    !(sm_disp = ev_asprintf("%ssamples.jsonl", disp))) {
		rc = nomem();
		goto done;
	}
	if ((rc = ev_sha256_begin(&h)))
		goto done;
	struct stat st;
	if (stat(sj_path, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			rc = ev_error_set(EV_E_INVALID, "%s: not a regular file", sj_disp);
			goto done;
		}
		if ((rc = ev_file_read(&text, &len, sj_path, opt->max_file_bytes))) {
			/* Named as the user knows it, not by the extraction folder. */
			if (rc == EV_E_LIMIT)
				rc = ev_error_set(rc, "%s: larger than the limit of %zu bytes", sj_disp, opt->max_file_bytes);
			else
				rc = ev_error_set(rc, "%s: cannot read it (%s)", sj_disp, ev_status_name(rc));
			goto done;
		}
		ev_sha256_update(h, text, len);
		if ((rc = parse_suite_json(s, text, len, sj_disp)))
			goto done;
	}
	if (!s->name && !(s->name = ev_strdup(dflt_name[0] ? dflt_name : "suite"))) {
		rc = nomem();
		goto done;
	}
	if (stat(sm_path, &st) != 0) {
		rc = ev_error_set(EV_E_NOTFOUND, "%s: missing", sm_disp);
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = ev_error_set(EV_E_INVALID, "%s: not a regular file", sm_disp);
		goto done;
	}
	if ((rc = ev_samples_parse(s, sm_path, sm_disp, opt, h)))
		goto done;
	rc = finish_hash(s, h);
	h = NULL;
done:
	if (h) {
		char junk[EV_SHA256_HEX];
		ev_sha256_end_hex(h, junk);
	}
	free(text);
	free(sj_path);
	free(sj_disp);
	free(sm_path);
	free(sm_disp);
	return rc;
}

static const char *const archive_exts[] = {".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.xz",
                                           ".tar.bz2", ".tar", ".zip"};

static const char *archive_ext(const char *path)
{
	for (size_t i = 0; i < sizeof archive_exts / sizeof archive_exts[0]; i++)
		if (ev_str_ends(path, archive_exts[i]))
			return archive_exts[i];
	return NULL;
}

/* The basename of `path` without `ext` (malloc'd). */
static char *base_name(const char *path, const char *ext)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	size_t n = strlen(b), e = ext ? strlen(ext) : 0;
	return ev_strndup(b, n > e ? n - e : n);
}

/* The folder of an extracted archive that holds the suite: the top, or its
 * only folder (ignoring __MACOSX and dot files that zip tools add). */
static int find_bundle_root(char **sub, const char *top, const char *arc)
{
	*sub = NULL;
	if (exists(top, "samples.jsonl") || exists(top, "suite.json"))
		return 0;
	DIR *d = opendir(top);
	if (!d)
		return ev_error_set(EV_E_IO, "%s: %s", top, strerror(errno));
	int n = 0, rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "__MACOSX"))
			continue;
		n++;
		free(*sub);
		*sub = ev_strdup(de->d_name);
	}
	closedir(d);
	struct stat st;
	char *p = n == 1 && *sub ? ev_asprintf("%s/%s", top, *sub) : NULL;
	if (!p || lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) || !exists(p, "samples.jsonl")) {
		free(*sub);
		*sub = NULL;
		rc = ev_error_set(EV_E_NOTFOUND, "%s: no samples.jsonl at the archive's top or in its single top folder",
		                  arc);
	}
	free(p);
	return rc;
}

static int load_archive(ev_suite *s, const char *path, const char *ext, const ev_suite_options *opt)
{
	char *dir = NULL, *sub = NULL, *root = NULL, *real = NULL, *disp = NULL, *name = NULL;
	int rc = 0;
	if ((rc = ev_mkdtemp(&dir, opt->tmp_dir, "suite")))
		return rc;
	s->extracted_dir = dir; /* removed by ev_suite_free from here on */
	if ((rc = ev_archive_extract(path, dir, opt)) || (rc = find_bundle_root(&sub, dir, path)))
		goto done;
	root = sub ? ev_asprintf("%s/%s", dir, sub) : ev_strdup(dir);
	real = root ? realpath(root, NULL) : NULL;
	disp = sub ? ev_asprintf("%s: %s/", path, sub) : ev_asprintf("%s: ", path);
	name = base_name(path, ext);
	if (!real || !disp || !name) {
		rc = root && !real ? ev_error_set(EV_E_IO, "%s: %s", root, strerror(errno)) : nomem();
		goto done;
	}
	rc = load_dir(s, real, disp, name, opt);
done:
	free(sub);
	free(root);
	free(real);
	free(disp);
	free(name);
	return rc;
}

static int load_bare(ev_suite *s, const char *path, const ev_suite_options *opt)
{
	char *real = realpath(path, NULL);
	ev_sha256_ctx *h = NULL;
	int rc = 0;
	if (!real)
		return ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
	char *slash = strrchr(real, '/');
	s->root = slash == real ? ev_strdup("/") : ev_strndup(real, (size_t)(slash - real));
	s->name = base_name(path, ".jsonl");
	if (!s->root || !s->name) {
		rc = nomem();
		goto done;
	}
	if ((rc = check_name(s->name, path)) || (rc = ev_sha256_begin(&h)))
		goto done;
	if ((rc = ev_samples_parse(s, real, path, opt, h)))
		goto done;
	rc = finish_hash(s, h);
	h = NULL;
done:
	if (h) {
		char junk[EV_SHA256_HEX];
		ev_sha256_end_hex(h, junk);
	}
	free(real);
	return rc;
}

int ev_suite_load(ev_suite **out, const char *path, const ev_suite_options *opt)
{
	*out = NULL;
	ev_suite_options o;
	ev_suite_options_resolve(&o, opt);
	if (!path || !*path)
		return ev_error_set(EV_E_INVALID, "no suite path given");
	struct stat st;
	if (stat(path, &st) != 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	ev_suite *s = calloc(1, sizeof *s);
	if (!s)
		return nomem();
	s->gen = (ev_gen)EV_GEN_INIT;
	int rc = 0;
	const char *ext = NULL;
	if (S_ISDIR(st.st_mode)) {
		char *real = realpath(path, NULL);
		char *disp = ev_asprintf("%s%s", path, ev_str_ends(path, "/") ? "" : "/");
		char *name = real ? base_name(real, NULL) : NULL;
		if (!real || !disp || !name)
			rc = real ? nomem() : ev_error_set(EV_E_IO, "%s: %s", path, strerror(errno));
		else
			rc = load_dir(s, real, disp, name, &o);
		free(real);
		free(disp);
		free(name);
	} else if (!S_ISREG(st.st_mode)) {
		rc = ev_error_set(EV_E_INVALID, "%s: neither a folder nor a regular file", path);
	} else if (ev_str_ends(path, ".jsonl")) {
		rc = load_bare(s, path, &o);
	} else if ((ext = archive_ext(path))) {
		rc = load_archive(s, path, ext, &o);
	} else {
		rc = ev_error_set(EV_E_UNSUPPORTED,
		                  "%s: not a suite (expected a folder, a .jsonl file, or a .tar, .tar.gz, .tgz, .tar.zst or "
		                  ".zip archive)",
		                  path);
	}
	if (rc) {
		char *msg = ev_strdup(ev_error_msg());
		ev_suite_free(s);
		ev_error_set(rc, "%s", msg ? msg : "suite load failed");
		free(msg);
		return rc;
	}
	*out = s;
	return 0;
}
