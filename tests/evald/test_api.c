/* evald serve, the tracker API end to end over loopback with libcurl: the
 * bearer token (missing or wrong: 401), size limits (413, declared and
 * chunked), malformed JSON (400 naming the field), a MIME claim that
 * disagrees with the content (415, JSON and multipart), multipart uploads,
 * the GET lists, 200 concurrent uploads from 8 threads (all stored once,
 * none partial, files with the right sha256), and the loopback-only rule. */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#define TOKEN "s3cret-token-for-tests"

static char *dir, *db;
static pid_t srv_pid;
static int port;

static int start_server(void)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	fflush(NULL);
	srv_pid = fork();
	if (srv_pid < 0)
		return -1;
	if (srv_pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		setenv("EVALD_API_TOKEN", TOKEN, 1);
		execl(tu_evald(), "evald", "-q", "--db", db, "serve", "--port", "0", "--print-port", "--max-body",
		      "2000000", "--max-attachment", "1000000", "--threads", "8", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[32] = {0};
	size_t k = 0;
	while (k + 1 < sizeof line && read(fds[0], line + k, 1) == 1 && line[k] != '\n')
		k++;
	close(fds[0]);
	port = atoi(line);
	return port > 0 ? 0 : -1;
}

static int setup(void **st)
{
	(void)st;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	dir = tu_tmpdir("api");
	db = tu_path(dir, "evald.db");
	return start_server();
}

static int teardown(void **st)
{
	(void)st;
	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		int status = 0;
		waitpid(srv_pid, &status, 0);
	}
	curl_global_cleanup();
	free(db);
	free(dir);
	return 0;
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	ev_buf_append(ud, p, sz * n);
	return sz * n;
}

typedef struct {
	const char *data;
	size_t len, off;
} reader;

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
	reader *r = ud;
	size_t k = r->len - r->off < sz * n ? r->len - r->off : sz * n;
	memcpy(p, r->data + r->off, k);
	r->off += k;
	return k;
}

/* One request; returns the HTTP status (0 on transport failure). *out gets
 * the body (may be NULL). chunked: send without Content-Length. */
static long http(const char *method, const char *path, const char *ctype, const char *body, size_t len,
                 const char *token, curl_mime *mime, bool chunked, char **out)
{
	CURL *c = curl_easy_init();
	ev_buf b = EV_BUF_INIT(64 << 20);
	struct curl_slist *h = NULL;
	char url[256], hdr[256];
	reader rd = {body, len, 0};
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (token) {
		snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", token);
		h = curl_slist_append(h, hdr);
	}
	if (ctype) {
		snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype);
		h = curl_slist_append(h, hdr);
	}
	if (mime) {
		curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		if (chunked) {
			h = curl_slist_append(h, "Transfer-Encoding: chunked");
			curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(c, CURLOPT_READDATA, &rd);
		} else {
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		}
	} else if (body) {
		/* another method with a body (a GET that should not have one) */
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = ev_buf_detach(&b, NULL);
	ev_buf_free(&b);
	return code;
}

static long post_json(const char *json, const char *token, char **out)
{
	return http("POST", "/api/issues", "application/json", json, strlen(json), token, NULL, false, out);
}

static char *b64(const void *data, size_t n)
{
	char *o = malloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)o, data, (int)n);
	return o;
}

static long db_long(const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	long v = -1;
	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

static const char PNG[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR-api-test-image";

static void missing_or_wrong_token_is_401(void **st)
{
	(void)st;
	char *out = NULL;
	assert_int_equal(post_json("{\"title\":\"x\"}", NULL, &out), 401);
	cJSON *j = cJSON_Parse(out);
	assert_non_null(j);
	assert_non_null(strstr(ev_json_str(j, "error", ""), "Bearer"));
	cJSON_Delete(j);
	free(out);
	assert_int_equal(post_json("{\"title\":\"x\"}", "wrong", NULL), 401);
	assert_int_equal(post_json("{\"title\":\"x\"}", TOKEN "x", NULL), 401);
	assert_int_equal(post_json("{\"title\":\"x\"}", "s3cret", NULL), 401);
	assert_int_equal(db_long("SELECT count(*) FROM issues WHERE title = 'x'"), 0);
}

static void json_issue_with_attachment_is_stored(void **st)
{
	(void)st;
	char *data = b64(PNG, sizeof PNG - 1);
	char *body = ev_asprintf("{\"title\":\"chart misread\",\"body\":\"b\",\"model\":\"m1\",\"prompt\":\"p\","
	                         "\"expected\":\"42\",\"labels\":[\"vision\",\"bug\"],\"attachments\":[{\"name\":"
	                         "\"chart.png\",\"mime\":\"image/png\",\"data\":\"%s\"}]}",
	                         data);
	char *out = NULL;
	assert_int_equal(post_json(body, TOKEN, &out), 201);
	cJSON *j = cJSON_Parse(out);
	assert_string_equal(ev_json_str(j, "source", ""), "http");
	assert_string_equal(ev_json_str(j, "modality", ""), "image");
	cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "attachments"), 0);
	char sha[EV_SHA256_HEX], fsha[EV_SHA256_HEX];
	ev_sha256_hex(sha, PNG, sizeof PNG - 1);
	assert_string_equal(ev_json_str(a, "sha256", ""), sha);
	assert_int_equal(ev_sha256_file_hex(fsha, ev_json_str(a, "path", "")), 0);
	assert_string_equal(fsha, sha);
	cJSON_Delete(j);
	free(out);
	free(body);
	free(data);
}

static void malformed_json_is_400_naming_the_field(void **st)
{
	(void)st;
	static const struct {
		const char *body;
		const char *field;
	} cases[] = {
		{"{\"title\": ", NULL},
		{"[1,2]", NULL},
		{"{\"title\":5}", "title"},
		{"{\"body\":\"no title\"}", "title"},
		{"{\"title\":\"t\",\"labels\":\"bug\"}", "labels"},
		{"{\"title\":\"t\",\"labels\":[\"ok\",3]}", "labels[1]"},
		{"{\"title\":\"t\",\"attachments\":[{\"data\":\"!!!!\"}]}", "attachments[0].data"},
		{"{\"title\":\"t\",\"attachments\":[{\"data\":\"aGk\"}]}", "attachments[0].data"},
		{"{\"title\":\"t\",\"attachments\":[{\"name\":5,\"data\":\"aGk=\"}]}", "attachments[0].name"},
		{"{\"title\":\"t\",\"attachments\":[7]}", "attachments[0]"},
		{"{\"title\":\"t\",\"colour\":\"red\"}", "colour"},
		{"{\"title\":\"\"}", "title"},
	};
	long before = db_long("SELECT count(*) FROM issues");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *out = NULL;
		long code = post_json(cases[i].body, TOKEN, &out);
		if (code != 400)
			fail_msg("case %zu: status %ld (%s)", i, code, out ? out : "");
		cJSON *j = cJSON_Parse(out);
		assert_non_null(j);
		assert_true(*ev_json_str(j, "error", ""));
		if (cases[i].field && strcmp(ev_json_str(j, "field", ""), cases[i].field))
			fail_msg("case %zu: field \"%s\", expected \"%s\" (%s)", i, ev_json_str(j, "field", ""),
			         cases[i].field, out);
		cJSON_Delete(j);
		free(out);
	}
	/* an unknown content type */
	assert_int_equal(http("POST", "/api/issues", "text/plain", "hi", 2, TOKEN, NULL, false, NULL), 415);
	assert_int_equal(db_long("SELECT count(*) FROM issues"), before);
}

static void oversized_request_is_413(void **st)
{
	(void)st;
	size_t n = 3000000;
	char *big = malloc(n + 1);
	memset(big, 'a', n);
	memcpy(big, "{\"title\":\"", 10);
	big[n] = 0;
	char *out = NULL;
	assert_int_equal(http("POST", "/api/issues", "application/json", big, n, TOKEN, NULL, false, &out), 413);
	free(out);
	/* without a Content-Length the cap applies while reading */
	assert_int_equal(http("POST", "/api/issues", "application/json", big, n, TOKEN, NULL, true, NULL), 413);
	free(big);
	/* an attachment over --max-attachment (1 MB) inside a body under --max-body */
	size_t an = 1200000;
	unsigned char *raw = calloc(1, an);
	memcpy(raw, PNG, sizeof PNG - 1);
	char *data = b64(raw, an);
	char *body = ev_asprintf("{\"title\":\"big\",\"attachments\":[{\"data\":\"%s\"}]}", data);
	assert_true(strlen(body) < 2000000);
	assert_int_equal(post_json(body, TOKEN, &out), 413);
	assert_non_null(strstr(out, "attachments[0]"));
	free(out);
	free(body);
	free(data);
	free(raw);
	/* a GET takes no body at all */
	assert_int_equal(http("GET", "/api/issues", "application/json", "{\"x\":1}", 7, NULL, NULL, false, &out), 413);
	assert_non_null(strstr(out, "takes no body"));
	free(out);
	/* the server is still fine */
	assert_int_equal(http("GET", "/api/issues", NULL, NULL, 0, NULL, NULL, false, NULL), 200);
}

static void wrong_mime_claim_is_415(void **st)
{
	(void)st;
	char *data = b64(PNG, sizeof PNG - 1);
	char *body = ev_asprintf("{\"title\":\"liar\",\"attachments\":[{\"name\":\"cat.jpg\",\"mime\":\"image/jpeg\","
	                         "\"data\":\"%s\"}]}",
	                         data);
	char *out = NULL;
	assert_int_equal(post_json(body, TOKEN, &out), 415);
	assert_non_null(strstr(out, "image/jpeg"));
	assert_non_null(strstr(out, "image/png"));
	free(out);
	/* multipart: the part's Content-Type disagrees */
	CURL *c = curl_easy_init();
	curl_mime *m = curl_mime_init(c);
	curl_mimepart *p = curl_mime_addpart(m);
	curl_mime_name(p, "title");
	curl_mime_data(p, "liar 2", CURL_ZERO_TERMINATED);
	p = curl_mime_addpart(m);
	curl_mime_name(p, "file");
	curl_mime_filename(p, "doc.pdf");
	curl_mime_type(p, "application/pdf");
	curl_mime_data(p, PNG, sizeof PNG - 1);
	assert_int_equal(http("POST", "/api/issues", NULL, NULL, 0, TOKEN, m, false, &out), 415);
	assert_non_null(strstr(out, "application/pdf"));
	free(out);
	curl_mime_free(m);
	curl_easy_cleanup(c);
	assert_int_equal(db_long("SELECT count(*) FROM issues WHERE title LIKE 'liar%'"), 0);
	free(body);
	free(data);
}

static void multipart_upload_is_stored(void **st)
{
	(void)st;
	CURL *c = curl_easy_init();
	curl_mime *m = curl_mime_init(c);
	static const char *const fields[][2] = {{"title", "multipart report"}, {"body", "two files attached"},
	                                        {"model", "ckpt-9"},           {"label", "vision"},
	                                        {"labels", "bug, ui"}};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		curl_mimepart *p = curl_mime_addpart(m);
		curl_mime_name(p, fields[i][0]);
		curl_mime_data(p, fields[i][1], CURL_ZERO_TERMINATED);
	}
	curl_mimepart *p = curl_mime_addpart(m);
	curl_mime_name(p, "file");
	curl_mime_filename(p, "shot.png");
	curl_mime_type(p, "image/png");
	curl_mime_data(p, PNG, sizeof PNG - 1);
	static const char pdf[] = "%PDF-1.4\n1 0 obj <<>> endobj\n%%EOF\n";
	p = curl_mime_addpart(m);
	curl_mime_name(p, "file");
	curl_mime_filename(p, "spec.pdf"); /* no type given: curl says octet-stream or guesses */
	curl_mime_data(p, pdf, sizeof pdf - 1);
	char *out = NULL;
	long code = http("POST", "/api/issues", NULL, NULL, 0, TOKEN, m, false, &out);
	if (code != 201)
		fail_msg("status %ld: %s", code, out);
	cJSON *j = cJSON_Parse(out);
	assert_string_equal(ev_json_str(j, "title", ""), "multipart report");
	assert_string_equal(ev_json_str(j, "model", ""), "ckpt-9");
	assert_string_equal(ev_json_str(j, "modality", ""), "mixed");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "attachments")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "labels")), 3);
	cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "attachments"), 1);
	assert_string_equal(ev_json_str(a, "mime", ""), "application/pdf");
	assert_string_equal(ev_json_str(a, "name", ""), "spec.pdf");
	cJSON_Delete(j);
	free(out);
	curl_mime_free(m);
	curl_easy_cleanup(c);
}

static void get_lists_and_unknown_paths(void **st)
{
	(void)st;
	char *out = NULL;
	assert_int_equal(http("GET", "/api/issues", NULL, NULL, 0, NULL, NULL, false, &out), 200);
	cJSON *j = cJSON_Parse(out);
	assert_true(cJSON_IsArray(j));
	assert_true(cJSON_GetArraySize(j) >= 2);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/api/issues?label=bug", NULL, NULL, 0, NULL, NULL, false, &out), 200);
	j = cJSON_Parse(out);
	cJSON *it;
	cJSON_ArrayForEach(it, j)
	{
		bool bug = false;
		cJSON *l;
		cJSON_ArrayForEach(l, cJSON_GetObjectItem(it, "labels"))
		bug = bug || !strcmp(l->valuestring, "bug");
		assert_true(bug);
	}
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/api/issues/1", NULL, NULL, 0, NULL, NULL, false, &out), 200);
	j = cJSON_Parse(out);
	assert_int_equal((int)ev_json_num(j, "id", 0), 1);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/api/issues/99999", NULL, NULL, 0, NULL, NULL, false, NULL), 404);
	assert_int_equal(http("GET", "/api/regressions", NULL, NULL, 0, NULL, NULL, false, &out), 200);
	j = cJSON_Parse(out);
	assert_true(cJSON_IsArray(j));
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/api/proposals", NULL, NULL, 0, NULL, NULL, false, &out), 200);
	j = cJSON_Parse(out);
	assert_true(cJSON_IsArray(j));
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/api/nothing", NULL, NULL, 0, NULL, NULL, false, NULL), 404);
	assert_int_equal(http("POST", "/api/proposals", "application/json", "{}", 2, TOKEN, NULL, false, NULL), 405);
}

#define N_THREADS 8
#define PER_THREAD 25

static void *uploader(void *arg)
{
	long tid = (long)(intptr_t)arg, ok = 0;
	for (int k = 0; k < PER_THREAD; k++) {
		char png[64];
		int n = snprintf(png, sizeof png, "\x89PNG\r\n\x1a\nconcurrent-%ld-%d", tid, k);
		char *data = b64(png, (size_t)n);
		char *body = ev_asprintf("{\"title\":\"conc-%ld-%d\",\"labels\":[\"load\"],\"attachments\":[{\"name\":"
		                         "\"p.png\",\"data\":\"%s\"}]}",
		                         tid, k, data);
		ok += post_json(body, TOKEN, NULL) == 201;
		free(body);
		free(data);
	}
	return (void *)(intptr_t)ok;
}

static void concurrent_uploads_all_stored_once_and_whole(void **st)
{
	(void)st;
	pthread_t th[N_THREADS];
	double t0 = ev_now();
	for (long i = 0; i < N_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, uploader, (void *)(intptr_t)i), 0);
	long ok = 0;
	for (int i = 0; i < N_THREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		ok += (long)(intptr_t)r;
	}
	double dt = ev_now() - t0;
	printf("api: %d uploads from %d threads in %.2f s (%.0f/s)\n", N_THREADS * PER_THREAD, N_THREADS, dt,
	       N_THREADS * PER_THREAD / dt);
	assert_int_equal(ok, N_THREADS * PER_THREAD);
	assert_int_equal(db_long("SELECT count(*) FROM issues WHERE title LIKE 'conc-%'"), N_THREADS * PER_THREAD);
	assert_int_equal(db_long("SELECT count(DISTINCT title) FROM issues WHERE title LIKE 'conc-%'"),
	                 N_THREADS * PER_THREAD);
	assert_int_equal(db_long("SELECT count(*) FROM issues i WHERE title LIKE 'conc-%' AND ((SELECT count(*) FROM "
	                         "issue_attachments a WHERE a.issue_id = i.id) != 1 OR (SELECT count(*) FROM labels l "
	                         "WHERE l.issue_id = i.id) != 1)"),
	                 0);
	/* every file is there with the right content */
	char *adir = tu_path(dir, "attachments");
	for (long tid = 0; tid < N_THREADS; tid++)
		for (int k = 0; k < PER_THREAD; k++) {
			char png[64], sha[EV_SHA256_HEX], fsha[EV_SHA256_HEX];
			int n = snprintf(png, sizeof png, "\x89PNG\r\n\x1a\nconcurrent-%ld-%d", tid, k);
			ev_sha256_hex(sha, png, (size_t)n);
			char *sql = ev_asprintf("SELECT count(*) FROM attachments WHERE sha256 = '%s' AND size = %d", sha, n);
			assert_int_equal(db_long(sql), 1);
			free(sql);
			char *path = ev_asprintf("%s/%.2s/%s", adir, sha, sha + 2);
			assert_int_equal(ev_sha256_file_hex(fsha, path), 0);
			assert_string_equal(fsha, sha);
			free(path);
		}
	free(adir);
	char *ic = NULL;
	sqlite3 *h = NULL;
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	ic = strdup((const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	sqlite3_close(h);
	assert_string_equal(ic, "ok");
	free(ic);
}

static void non_loopback_host_is_refused(void **st)
{
	(void)st;
	char *err = NULL;
	const char *argv[] = {tu_evald(), "--db", db, "serve", "--host", "0.0.0.0", "--port", "0", NULL};
	int rc = tu_run(NULL, &err, NULL, argv);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(err, "--allow-remote"));
	free(err);
	const char *argv2[] = {tu_evald(), "--db", db, "serve", "--host", "not-an-address", NULL};
	assert_int_equal(tu_run(NULL, NULL, NULL, argv2), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(missing_or_wrong_token_is_401),
		cmocka_unit_test(json_issue_with_attachment_is_stored),
		cmocka_unit_test(malformed_json_is_400_naming_the_field),
		cmocka_unit_test(oversized_request_is_413),
		cmocka_unit_test(wrong_mime_claim_is_415),
		cmocka_unit_test(multipart_upload_is_stored),
		cmocka_unit_test(get_lists_and_unknown_paths),
		cmocka_unit_test(concurrent_uploads_all_stored_once_and_whole),
		cmocka_unit_test(non_loopback_host_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
