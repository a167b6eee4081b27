/*
 * feedback/issues_repro.c: turning an issue report into an eval case: the
 * sample "issue-<id>" of the community suite folder (suite.json,
 * samples.jsonl, attachments/ beside), so that every later run on that suite
 * follows the evidence. The suite is loaded back after writing; a failure
 * restores the previous samples.jsonl.
 */
#include "feedback/issues_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPRO_MAX_SAMPLES_FILE ((size_t)512 << 20)

static const char *ext_of_mime(const char *mime)
{
	static const char *const map[][2] = {
		{"image/png", "png"},
		{"image/jpeg", "jpg"},
		{"image/gif", "gif"},
		{"image/webp", "webp"},
		{"video/mp4", "mp4"},
		{"video/quicktime", "mov"},
		{"video/webm", "webm"},
		{"video/x-matroska", "mkv"},
		{"application/pdf", "pdf"},
		{"application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"},
		{"application/vnd.openxmlformats-officedocument.presentationml.presentation", "pptx"},
		{"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"},
		{"application/zip", "zip"},
		{"text/plain", "txt"},
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(map[i][0], mime))
			return map[i][1];
	return "bin";
}

static int check_regex(const char *re)
{
	int err = 0;
	PCRE2_SIZE off = 0;
	pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, NULL);
	if (c) {
		pcre2_code_free(c);
		return 0;
	}
	PCRE2_UCHAR msg[160];
	pcre2_get_error_message(err, msg, sizeof msg);
	return ev_error_set(EV_E_INVALID, "--regex: at offset %zu: %s", (size_t)off, (const char *)msg);
}

/* Builds the sample's JSON line (without newline). */
static int build_sample(cJSON **out, ev_tracker *t, int64_t id, const ev_repro_options *opt, const char *suite_dir,
                        cJSON *att_out)
{
	sqlite3_stmt *st = NULL;
	cJSON *s = NULL;
	char *dir = NULL, *src = NULL, *dst = NULL, *data = NULL, *adir = NULL;
	int rc;
	*out = NULL;

	if ((rc = ev_tracker_prepare(t, &st,
	                            "SELECT title, body, prompt, expected, model, output, source FROM issues "
	                            "WHERE id = ?1")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	int r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		rc = ev_error_set(EV_E_NOTFOUND, "issue %lld: no such issue", (long long)id);
		goto done;
	}
	if (r != SQLITE_ROW) {
		rc = ev_tracker_sqlerr(t, r, "reading issue %lld", (long long)id);
		goto done;
	}
	const char *title = (const char *)sqlite3_column_text(st, 0);
	const char *body = (const char *)sqlite3_column_text(st, 1);
	const char *prompt = (const char *)sqlite3_column_text(st, 2);
	const char *expected = (const char *)sqlite3_column_text(st, 3);
	const char *model = (const char *)sqlite3_column_text(st, 4);
	const char *output = (const char *)sqlite3_column_text(st, 5);
	const char *source = (const char *)sqlite3_column_text(st, 6);

	s = cJSON_CreateObject();
	char sid[48];
	snprintf(sid, sizeof sid, "issue-%lld", (long long)id);
	cJSON_AddStringToObject(s, "id", sid);
	if (prompt && *prompt) {
		cJSON_AddStringToObject(s, "input", prompt);
	} else {
		char *in = body && *body ? ev_asprintf("%s\n\n%s", title, body) : ev_strdup(title);
		if (!in) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		cJSON_AddStringToObject(s, "input", in);
		free(in);
	}
	if (opt->regex) {
		if ((rc = check_regex(opt->regex)))
			goto done;
		cJSON *ck = cJSON_AddObjectToObject(s, "checker");
		cJSON_AddStringToObject(ck, "type", "regex");
		cJSON *pats = cJSON_AddArrayToObject(ck, "patterns");
		cJSON_AddItemToArray(pats, cJSON_CreateString(opt->regex));
		cJSON_AddStringToObject(ck, "compare", "none");
	} else {
		const char *target = opt->target ? opt->target : expected;
		if (!target || !*target) {
			rc = ev_error_set(EV_E_INVALID,
			                  "issue %lld: no checker: give --regex or --target (the issue has no expected answer)",
			                  (long long)id);
			goto done;
		}
		cJSON_AddStringToObject(s, "target", target);
		cJSON *ck = cJSON_AddObjectToObject(s, "checker");
		cJSON_AddStringToObject(ck, "type", "includes");
	}
	cJSON *meta = cJSON_AddObjectToObject(s, "metadata");
	cJSON_AddNumberToObject(meta, "issue", (double)id);
	cJSON_AddStringToObject(meta, "title", title);
	if (model)
		cJSON_AddStringToObject(meta, "reported_model", model);
	if (output)
		cJSON_AddStringToObject(meta, "reported_output", output);
	cJSON_AddStringToObject(meta, "source", source ? source : "cli");
	sqlite3_finalize(st);
	st = NULL;

	/* Attachments, copied beside the samples. */
	if ((rc = ev_attach_dir(&dir, t)) ||
	    (rc = ev_tracker_prepare(t, &st,
	                            "SELECT a.sha256, a.mime FROM issue_attachments ia JOIN attachments a ON "
	                            "a.sha256 = ia.sha256 WHERE ia.issue_id = ?1 ORDER BY ia.rowid")))
		goto done;
	sqlite3_bind_int64(st, 1, id);
	cJSON *atts = NULL;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *sha = (const char *)sqlite3_column_text(st, 0);
		const char *mime = (const char *)sqlite3_column_text(st, 1);
		if (!atts) {
			atts = cJSON_AddArrayToObject(s, "attachments");
			if (!(adir = ev_asprintf("%s/attachments", suite_dir))) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				goto done;
			}
			if ((rc = ev_mkdir_p(adir)))
				goto done;
		}
		char rel[128];
		snprintf(rel, sizeof rel, "attachments/%s-%.12s.%s", sid, sha, ext_of_mime(mime));
		size_t len = 0;
		free(src);
		free(dst);
		src = NULL;
		if ((rc = ev_attach_path(&src, dir, sha)))
			goto done;
		if (!(dst = ev_asprintf("%s/%s", suite_dir, rel))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if ((rc = ev_file_read(&data, &len, src, (size_t)1 << 31)) || (rc = ev_file_write(dst, data, len)))
			goto done;
		free(data);
		data = NULL;
		cJSON_AddItemToArray(atts, cJSON_CreateString(rel));
		cJSON_AddItemToArray(att_out, cJSON_CreateString(rel));
	}
	if (r != SQLITE_DONE) {
		rc = ev_tracker_sqlerr(t, r, "reading attachments of issue %lld", (long long)id);
		goto done;
	}
	*out = s;
	s = NULL;
done:
	sqlite3_finalize(st);
	cJSON_Delete(s);
	free(dir);
	free(src);
	free(dst);
	free(data);
	free(adir);
	return rc;
}

int ev_issue_repro(ev_tracker *t, int64_t id, const ev_repro_options *opt_in, char **out_json)
{
	ev_repro_options opt = opt_in ? *opt_in : (ev_repro_options)EV_REPRO_OPTIONS_INIT;
	char *suite_dir = NULL, *suite_json = NULL, *samples = NULL, *old = NULL, *line = NULL, *tdir = NULL;
	size_t old_len = 0;
	bool had_old = false, written = false, replaced = false;
	cJSON *sample = NULL, *atts = cJSON_CreateArray();
	ev_buf nb = EV_BUF_INIT(REPRO_MAX_SAMPLES_FILE);
	ev_suite *suite = NULL;
	int rc;

	if (out_json)
		*out_json = NULL;
	if (!atts)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if ((rc = ev_tracker_flush(t)))
		goto done;
	if (opt.suite_dir) {
		suite_dir = ev_strdup(opt.suite_dir);
	} else {
		if ((rc = ev_attach_dir(&tdir, t)))
			goto done;
		/* <tracker folder>/attachments -> <tracker folder>/community */
		suite_dir = ev_asprintf("%.*s/community", (int)(strlen(tdir) - strlen("/attachments")), tdir);
	}
	if (!suite_dir || !(suite_json = ev_asprintf("%s/suite.json", suite_dir)) ||
	    !(samples = ev_asprintf("%s/samples.jsonl", suite_dir))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = ev_mkdir_p(suite_dir)))
		goto done;
	if ((rc = build_sample(&sample, t, id, &opt, suite_dir, atts)))
		goto done;
	if (!(line = ev_json_print(sample))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if (access(suite_json, F_OK) != 0) {
		static const char sj[] =
			"{\"name\":\"community\",\"version\":\"1\",\"kind\":\"community\","
			"\"description\":\"Eval cases reproduced from community issue reports (evald issue repro)\","
			"\"checker\":{\"type\":\"includes\"}}\n";
		if ((rc = ev_file_write(suite_json, sj, sizeof sj - 1)))
			goto done;
	}
	if (access(samples, F_OK) == 0) {
		if ((rc = ev_file_read(&old, &old_len, samples, REPRO_MAX_SAMPLES_FILE)))
			goto done;
		had_old = true;
	}
	/* The old lines, with this sample's replaced in place. */
	const char *sid = cJSON_GetObjectItemCaseSensitive(sample, "id")->valuestring;
	for (const char *p = old ? old : ""; *p;) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		cJSON *j = n ? cJSON_ParseWithLength(p, n) : NULL;
		const char *lid = j ? ev_json_str(j, "id", NULL) : NULL;
		bool same = lid && !strcmp(lid, sid);
		cJSON_Delete(j);
		if (same) {
			rc = replaced ? 0 : ev_buf_puts(&nb, line);
			replaced = true;
		} else if (n) {
			rc = ev_buf_append(&nb, p, n);
		}
		if (rc || (n && (rc = ev_buf_putc(&nb, '\n'))))
			goto done;
		p += n + (e ? 1 : 0);
	}
	if (!replaced && ((rc = ev_buf_puts(&nb, line)) || (rc = ev_buf_putc(&nb, '\n'))))
		goto done;
	if ((rc = ev_file_write(samples, nb.data, nb.len)))
		goto done;
	written = true;
	if ((rc = ev_suite_load(&suite, suite_dir, NULL))) {
		ev_error_wrap(rc, "the community suite does not load with issue %lld (left as it was)", (long long)id);
		goto done;
	}
	written = false;
	if (out_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "suite_dir", suite_dir);
		cJSON_AddStringToObject(o, "sample_id", sid);
		cJSON_AddItemToObject(o, "attachments", atts);
		atts = NULL;
		cJSON_AddBoolToObject(o, "replaced", replaced);
		cJSON_AddNumberToObject(o, "n_samples", (double)suite->n_samples);
		rc = ev_intake_emit(out_json, o);
	}
done:
	if (written) { /* restore what was there */
		if (had_old)
			ev_file_write(samples, old, old_len);
		else
			unlink(samples);
	}
	ev_suite_free(suite);
	ev_buf_free(&nb);
	cJSON_Delete(sample);
	cJSON_Delete(atts);
	free(line);
	free(old);
	free(samples);
	free(suite_json);
	free(suite_dir);
	free(tdir);
	return rc;
}
