/* feedback: issue attachments: MIME type from magic bytes for every kind
 * (minimal signatures generated here), claims that disagree rejected, strict
 * base64, the content-addressed store, and ev_issue_add's all-or-nothing
 * transaction, modality and caps. */
#include "tracker_fixture.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A stored (uncompressed) zip holding empty entries with these names. */
static unsigned char *make_zip(const char *const *names, size_t n, size_t *len)
{
	unsigned char *z = calloc(1, 4096);
	size_t p = 0, offs[8], cd;
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		offs[i] = p;
		memcpy(z + p, "PK\x03\x04", 4);
		z[p + 4] = 20;
		z[p + 26] = (unsigned char)nl;
		memcpy(z + p + 30, names[i], nl);
		p += 30 + nl;
	}
	cd = p;
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		memcpy(z + p, "PK\x01\x02", 4);
		z[p + 28] = (unsigned char)nl;
		z[p + 42] = (unsigned char)offs[i];
		memcpy(z + p + 46, names[i], nl);
		p += 46 + nl;
	}
	size_t cd_size = p - cd;
	memcpy(z + p, "PK\x05\x06", 4);
	z[p + 8] = z[p + 10] = (unsigned char)n;
	z[p + 12] = (unsigned char)cd_size;
	z[p + 16] = (unsigned char)cd;
	p += 22;
	*len = p;
	return z;
}

static void mime_detected_from_magic_bytes_for_every_kind(void **state)
{
	(void)state;
	static const struct {
		const char *bytes;
		size_t n;
		const char *mime;
	} cases[] = {
		{"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, "image/png"},
		{"\xFF\xD8\xFF\xE0\0\x10JFIF", 10, "image/jpeg"},
		{"GIF89a\x01\0\x01\0", 10, "image/gif"},
		{"GIF87a\x01\0\x01\0", 10, "image/gif"},
		{"RIFF\x24\0\0\0WEBPVP8 ", 16, "image/webp"},
		{"\0\0\0\x18" "ftypmp42\0\0\0\0", 16, "video/mp4"},
		{"\0\0\0\x14" "ftypqt  \0\0\0\0", 16, "video/quicktime"},
		{"\x1A\x45\xDF\xA3\x9F\x42\x86\x81\x01\x42\x82\x84webm", 16, "video/webm"},
		{"\x1A\x45\xDF\xA3\x9F\x42\x86\x81\x01\x42\x82\x88matroska", 20, "video/x-matroska"},
		{"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", 15, "application/pdf"},
		{"plain text report\nwith two lines\n", 33, "text/plain"},
		{"caf\xc3\xa9 \xe2\x9c\x93 unicode", 16, "text/plain"},
		{"text with a \0 NUL", 17, "application/octet-stream"},
		{"bad \xff\xfe utf-8", 13, "application/octet-stream"},
		{"\x7f" "ELF\x02\x01\x01", 7, "application/octet-stream"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *m = ev_attach_detect_mime(cases[i].bytes, cases[i].n);
		if (strcmp(m, cases[i].mime))
			fail_msg("case %zu: detected %s, expected %s", i, m, cases[i].mime);
	}
	assert_string_equal(ev_attach_detect_mime("", 0), "text/plain");

	static const struct {
		const char *names[3];
		const char *mime;
	} zips[] = {
		{{"[Content_Types].xml", "word/document.xml", NULL},
		 "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
		{{"[Content_Types].xml", "ppt/presentation.xml", NULL},
		 "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
		{{"[Content_Types].xml", "xl/workbook.xml", NULL},
		 "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
		{{"notes.txt", "data/x.csv", NULL}, "application/zip"},
	};
	for (size_t i = 0; i < sizeof zips / sizeof zips[0]; i++) {
		size_t n = zips[i].names[2] ? 3 : 2, len;
		unsigned char *z = make_zip(zips[i].names, n, &len);
		assert_string_equal(ev_attach_detect_mime(z, len), zips[i].mime);
		/* without the end record (cut short), the local headers still tell */
		assert_string_equal(ev_attach_detect_mime(z, len - 22), zips[i].mime);
		free(z);
	}
	assert_string_equal(ev_attach_kind("image/webp"), "image");
	assert_string_equal(ev_attach_kind("video/webm"), "video");
	assert_string_equal(ev_attach_kind("application/pdf"), "document");
	assert_string_equal(ev_attach_kind("text/plain"), "document");
}

static void claimed_mime_that_disagrees_is_rejected(void **state)
{
	(void)state;
	assert_int_equal(ev_attach_check_claim(NULL, "image/png", "a"), 0);
	assert_int_equal(ev_attach_check_claim("image/png", "image/png", "a"), 0);
	assert_int_equal(ev_attach_check_claim("IMAGE/PNG; charset=binary", "image/png", "a"), 0);
	assert_int_equal(ev_attach_check_claim("application/octet-stream", "image/png", "a"), 0);
	assert_int_equal(ev_attach_check_claim("image/jpg", "image/jpeg", "a"), 0);
	assert_int_equal(ev_attach_check_claim("text/markdown", "text/plain", "a"), 0);
	assert_int_equal(ev_attach_check_claim("application/zip",
	                                       "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	                                       "a"),
	                 0);
	assert_int_equal(ev_attach_check_claim("image/jpeg", "image/png", "attachments[0] (cat.jpg)"), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "image/jpeg"));
	assert_non_null(strstr(ev_error_msg(), "image/png"));
	assert_non_null(strstr(ev_error_msg(), "cat.jpg"));
	assert_int_equal(ev_attach_check_claim("application/pdf", "text/plain", "x"), EV_E_UNSUPPORTED);
	assert_int_equal(ev_attach_check_claim("video/mp4", "image/gif", "x"), EV_E_UNSUPPORTED);
}

static void base64_is_strict(void **state)
{
	(void)state;
	unsigned char *out = NULL;
	size_t n = 0;
	assert_int_equal(ev_base64_decode(&out, &n, "aGVsbG8=", 8, 100, "d"), 0);
	assert_int_equal(n, 5);
	assert_memory_equal(out, "hello", 5);
	free(out);
	assert_int_equal(ev_base64_decode(&out, &n, "aGk=", 4, 100, "d"), 0);
	assert_int_equal(n, 2);
	free(out);
	assert_int_equal(ev_base64_decode(&out, &n, "", 0, 100, "d"), 0);
	assert_int_equal(n, 0);
	free(out);
	assert_int_equal(ev_base64_decode(&out, &n, "aGVsbG8", 7, 100, "d"), EV_E_PARSE);  /* length */
	assert_int_equal(ev_base64_decode(&out, &n, "aGV sbG8", 8, 100, "d"), EV_E_PARSE); /* space */
	assert_int_equal(ev_base64_decode(&out, &n, "aG=sbG8=", 8, 100, "d"), EV_E_PARSE); /* inner pad */
	assert_int_equal(ev_base64_decode(&out, &n, "aGVs\nbG8", 8, 100, "field.data"), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "field.data"));
	assert_int_equal(ev_base64_decode(&out, &n, "aGVsbG8=", 8, 4, "d"), EV_E_LIMIT);
	assert_null(out);
}

static int count_files(const char *dir)
{
	char *out = NULL;
	tu_sh(&out, NULL, "find '%s' -type f | wc -l", dir);
	int n = out ? atoi(out) : -1;
	free(out);
	return n;
}

static void store_is_content_addressed_and_idempotent(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("attach-store");
	char *adir = tu_path(dir, "attachments");
	char sha[EV_SHA256_HEX], sha2[EV_SHA256_HEX], want[EV_SHA256_HEX];
	assert_int_equal(ev_attach_store(adir, "hello world", 11, sha), 0);
	ev_sha256_hex(want, "hello world", 11);
	assert_string_equal(sha, want);
	char *p = NULL;
	assert_int_equal(ev_attach_path(&p, adir, sha), 0);
	char *expect = ev_asprintf("%s/%.2s/%s", adir, sha, sha + 2);
	assert_string_equal(p, expect);
	char file_sha[EV_SHA256_HEX];
	assert_int_equal(ev_sha256_file_hex(file_sha, p), 0);
	assert_string_equal(file_sha, sha);
	assert_int_equal(ev_attach_store(adir, "hello world", 11, sha2), 0);
	assert_string_equal(sha, sha2);
	assert_int_equal(count_files(adir), 1); /* no temp file left behind */
	free(p);
	assert_int_equal(ev_attach_path(&p, adir, "../../etc/passwd"), EV_E_INVALID);
	assert_null(p);
	free(expect);
	free(adir);
	free(dir);
}

static const char PNG[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDRpixels";
static const char MP4[] = "\0\0\0\x18" "ftypisom\0\0\0\0moov";

static void issue_add_stores_rows_and_derives_modality(void **state)
{
	(void)state;
	char *db = tf_db_path("issue-add");
	ev_tracker *t = tf_open(db);
	const char *labels[] = {"bug", "vision", "bug"};
	ev_issue_attachment atts[] = {{"a.png", "image/png", PNG, sizeof PNG - 1},
	                              {"b.png", NULL, PNG, sizeof PNG - 1}, /* same content: one file, one row */
	                              {"clip.mp4", "video/mp4", MP4, sizeof MP4 - 1}};
	ev_issue_info info = {0};
	info.title = "chart misread";
	info.body = "see attached";
	info.labels = labels;
	info.n_labels = 3;
	info.attachments = atts;
	info.n_attachments = 3;
	int64_t id = 0;
	assert_int_equal(ev_issue_add(t, &info, &id), 0);
	assert_true(id > 0);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM attachments"), 2);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issue_attachments"), 2);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM labels"), 2);
	char *mod = tf_query_text(db, "SELECT modality FROM issues");
	assert_string_equal(mod, "mixed");
	free(mod);

	/* one kind -> that modality; none -> text */
	info.attachments = atts;
	info.n_attachments = 1;
	info.n_labels = 0;
	assert_int_equal(ev_issue_add(t, &info, &id), 0);
	char *sql = ev_asprintf("SELECT modality FROM issues WHERE id = %lld", (long long)id);
	mod = tf_query_text(db, sql);
	assert_string_equal(mod, "image");
	free(mod);
	free(sql);
	info.n_attachments = 0;
	assert_int_equal(ev_issue_add(t, &info, &id), 0);
	sql = ev_asprintf("SELECT modality FROM issues WHERE id = %lld", (long long)id);
	mod = tf_query_text(db, sql);
	assert_string_equal(mod, "text");
	free(mod);
	free(sql);

	char *json = NULL;
	assert_int_equal(ev_issue_show_json(t, 1, &json), 0);
	cJSON *j = cJSON_Parse(json);
	cJSON *a0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "attachments"), 0);
	char sha[EV_SHA256_HEX];
	ev_sha256_hex(sha, PNG, sizeof PNG - 1);
	assert_string_equal(ev_json_str(a0, "sha256", ""), sha);
	assert_string_equal(ev_json_str(a0, "mime", ""), "image/png");
	char fsha[EV_SHA256_HEX];
	assert_int_equal(ev_sha256_file_hex(fsha, ev_json_str(a0, "path", "")), 0);
	assert_string_equal(fsha, sha);
	cJSON_Delete(j);
	free(json);

	assert_int_equal(ev_issue_close(t, 1), 0);
	assert_int_equal(ev_issue_close(t, 999), EV_E_NOTFOUND);
	assert_int_equal(ev_issues_list_json(t, "open", NULL, &json), 0);
	j = cJSON_Parse(json);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 2);
	cJSON_Delete(j);
	free(json);
	assert_int_equal(ev_issues_list_json(t, NULL, "vision", &json), 0);
	j = cJSON_Parse(json);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "issues")), 1);
	cJSON_Delete(j);
	free(json);
	ev_tracker_close(t);
	free(db);
}

static void issue_add_failure_leaves_no_rows(void **state)
{
	(void)state;
	char *db = tf_db_path("issue-add-fail");
	ev_tracker *t = tf_open(db);
	ev_issue_attachment bad[] = {{"ok.png", "image/png", PNG, sizeof PNG - 1},
	                             {"cat.jpg", "image/jpeg", PNG, sizeof PNG - 1}};
	ev_issue_info info = {0};
	info.title = "t";
	info.attachments = bad;
	info.n_attachments = 2;
	int64_t id = 0;
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "cat.jpg"));

	/* over the size cap */
	info.n_attachments = 1;
	info.max_attachment_bytes = 8;
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_LIMIT);
	info.max_attachment_bytes = 0;

	/* invalid fields */
	info.title = "";
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_INVALID);
	info.title = "bad \xff utf8";
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "title"));
	info.title = "t";
	const char *labels[] = {"ok", "bad\nlabel"};
	info.labels = labels;
	info.n_labels = 2;
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "labels[1]"));
	info.n_labels = 0;

	/* a duplicate external id fails inside the transaction: nothing of the
	 * second issue stays (its label and attachment rows included) */
	info.external_id = "https://github.com/o/r/issues/1";
	assert_int_equal(ev_issue_add(t, &info, &id), 0);
	info.labels = labels;
	info.n_labels = 1;
	ev_issue_attachment other[] = {{"c.mp4", NULL, MP4, sizeof MP4 - 1}};
	info.attachments = other;
	assert_int_equal(ev_issue_add(t, &info, &id), EV_E_INVALID);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issues"), 1);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM labels"), 0);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM attachments"), 1);
	assert_int_equal(tf_query_long(db, "SELECT count(*) FROM issue_attachments"), 1);
	ev_tracker_close(t);
	free(db);
}

static void image_links_found_in_markdown_and_html(void **state)
{
	(void)state;
	char **v = NULL;
	size_t n = 0;
	const char *body = "Look: ![shot [1]](https://x.io/a.png \"title\") and <img width=3 src=\"http://y.io/b.jpg\">\n"
	                   "<IMG SRC='https://z.io/c.gif'/> dup ![again](https://x.io/a.png) "
	                   "not an image [link](https://n.io/) ![local](file:///etc/passwd) ![x](<https://w.io/d e.png>)";
	assert_int_equal(ev_issue_image_links(&v, &n, body), 0);
	assert_int_equal(n, 4);
	assert_string_equal(v[0], "https://x.io/a.png");
	assert_string_equal(v[1], "http://y.io/b.jpg");
	assert_string_equal(v[2], "https://z.io/c.gif");
	assert_string_equal(v[3], "https://w.io/d e.png");
	ev_strv_free(v, n);
	assert_int_equal(ev_issue_image_links(&v, &n, "![broken](https://x"), 0);
	ev_strv_free(v, n);
	assert_int_equal(ev_issue_image_links(&v, &n, "<img src=https://u.io/p/q.png>"), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0], "https://u.io/p/q.png");
	ev_strv_free(v, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mime_detected_from_magic_bytes_for_every_kind),
		cmocka_unit_test(claimed_mime_that_disagrees_is_rejected),
		cmocka_unit_test(base64_is_strict),
		cmocka_unit_test(store_is_content_addressed_and_idempotent),
		cmocka_unit_test(issue_add_stores_rows_and_derives_modality),
		cmocka_unit_test(issue_add_failure_leaves_no_rows),
		cmocka_unit_test(image_links_found_in_markdown_and_html),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
