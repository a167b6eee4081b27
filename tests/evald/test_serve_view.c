/* evald serve's tracker viewer (/view) over loopback: a real tracker (two
 * runs with a drop between them, the regression it files, an issue with
 * an image attachment, a proposal) behind a real `evald serve`.
 *   - without credentials the pages answer 401 asking for Basic auth; a
 *     wrong token too; the token as the Basic password opens them;
 *   - /view/runs/N and /view/compare are byte for byte what `evald report
 *     --format html` and `evald compare --format html` write;
 *   - an issue's page shows its attached image inline (a data: URL);
 *   - actions: a form posted without its csrf field, or with another
 *     path's, is refused (403) and changes nothing; with it the issue is
 *     closed, the regression confirmed and the proposal joined (read back
 *     through the API);
 *   - with --public the pages open without a token, the actions do not;
 *   - every page is well-formed XML, and in chromium (when installed)
 *     renders with no console message; screenshots kept. */
#include "testutil.h"

#include <libxml/parser.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/fs.h"

#define TOKEN "view-token-for-tests"

static char *dir, *db;
static pid_t live[2]; /* servers to stop even when a check fails */

/* a 2x2 PNG */
static const unsigned char PNG[] = {
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
	0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a, 0x73, 0x00, 0x00, 0x00,
	0x16, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x08, 0x19, 0x18, 0x18, 0xfe,
	0x03, 0x00, 0x1f, 0xee, 0x03, 0xfd, 0x38, 0x77, 0x89, 0x6a, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
	0xae, 0x42, 0x60, 0x82};

static pid_t start(bool public_read, int *port)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		setenv("EVALD_API_TOKEN", TOKEN, 1);
		if (public_read)
			execl(tu_evald(), "evald", "-q", "--db", db, "serve", "--port", "0", "--print-port", "--public",
			      (char *)NULL);
		else
			execl(tu_evald(), "evald", "-q", "--db", db, "serve", "--port", "0", "--print-port", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char line[32] = {0};
	size_t k = 0;
	while (k + 1 < sizeof line && read(fds[0], line + k, 1) == 1 && line[k] != '\n')
		k++;
	close(fds[0]);
	*port = atoi(line);
	live[public_read] = pid;
	assert_true(*port > 0);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	int st = 0;
	waitpid(pid, &st, 0);
	for (int i = 0; i < 2; i++)
		if (live[i] == pid)
			live[i] = 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		if (live[i] > 0)
			stop(live[i]);
	return 0;
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	ev_buf_append(ud, p, sz * n);
	return sz * n;
}

/* GET or POST (body != NULL, form-encoded); userpwd NULL: no credentials. */
static long http(int port, const char *path, const char *userpwd, const char *body, char **out, char **www_auth)
{
	CURL *c = curl_easy_init();
	ev_buf b = EV_BUF_INIT(256 << 20), h = EV_BUF_INIT(1 << 20);
	char url[512];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (userpwd) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
	}
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (www_auth)
		*www_auth = ev_strdup(h.data ? h.data : "");
	ev_buf_free(&h);
	if (out)
		*out = b.data ? ev_buf_detach(&b, NULL) : ev_strdup("");
	else
		ev_buf_free(&b);
	return code;
}

/* evald -q --db DB ARGS... (at most 12), which must succeed; its stdout. */
static char *cli(const char *a0, const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
                 const char *a6, const char *a7)
{
	const char *argv[] = {tu_evald(), "-q", "--db", db, a0, a1, a2, a3, a4, a5, a6, a7, NULL};
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc != 0)
		fail_msg("evald %s %s: %d\n%s", a0, a1 ? a1 : "", rc, err ? err : "");
	free(err);
	return out;
}

/* The csrf field of the form that posts to `action` on a page. */
static char *csrf_for(const char *page, const char *action)
{
	char key[256];
	snprintf(key, sizeof key, "action=\"%s\"><input type=\"hidden\" name=\"csrf\" value=\"", action);
	const char *p = strstr(page, key);
	if (!p)
		fail_msg("no form for %s", action);
	p += strlen(key);
	return ev_strndup(p, strspn(p, "0123456789abcdef"));
}

static void wellformed(const char *page, const char *what)
{
	xmlDocPtr d = xmlReadMemory(page, (int)strlen(page), what, "UTF-8", XML_PARSE_NONET);
	if (!d)
		fail_msg("%s is not well-formed", what);
	xmlFreeDoc(d);
}

/* Two runs of one suite through the fixture server: A answers every
 * question (it echoes the prompt, which holds the target), B is told to
 * answer the first 30 wrongly; the drop is filed as a regression. */
static void fill(void)
{
	ev_buf s = EV_BUF_INIT(1 << 20), t = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 60; i++)
		ev_buf_printf(&s, "{\"id\":\"q%02d\",\"input\":\"Question %02d: say tok%02d.\",\"target\":\"tok%02d\"}\n", i,
		              i, i, i);
	for (int i = 0; i < 30; i++)
		ev_buf_printf(&t, "{\"match\":\"Question %02d:\",\"reply\":\"no idea <b>at all</b>\"}\n", i);
	char *suite = tu_write(dir, "s.jsonl", s.data), *table = tu_write(dir, "bad.jsonl", t.data);
	ev_buf_free(&s), ev_buf_free(&t);
	tu_server good, bad;
	const char *none[] = {NULL}, *args[] = {"--table", table, NULL};
	assert_int_equal(tu_server_start(&good, none), 0);
	assert_int_equal(tu_server_start(&bad, args), 0);
	const tu_server *srv[2] = {&good, &bad};
	const char *names[2] = {"ckpt-a", "ckpt-b"};
	for (int k = 0; k < 2; k++) {
		char *out = NULL, *err = NULL;
		const char *argv[] = {tu_evald(), "--db", db, "-q", "run", "--model", srv[k]->url, "--model-name", names[k],
		                      "--suite", suite, "--no-cache", NULL};
		if (tu_run(&out, &err, NULL, argv) != 0)
			fail_msg("run %s: %s", names[k], err);
		free(out), free(err);
	}
	tu_server_stop(&good), tu_server_stop(&bad);
	char *out = NULL, *err = NULL;
	const char *cmp[] = {tu_evald(), "--db", db, "-q", "compare", "1", "2", "--file-regressions", "--json", NULL};
	if (tu_run(&out, &err, NULL, cmp) != 0)
		fail_msg("compare: %s", err);
	assert_non_null(strstr(out, "\"regression_id\""));
	free(out), free(err), free(suite), free(table);
}

static void viewer(void **state)
{
	(void)state;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	dir = tu_tmpdir("view");
	db = tu_path(dir, "evald.db");
	/* the tracker: runs through the fixture server (its answers are right for some questions) */
	fill();
	char *o = NULL;
	char *png = tu_path(dir, "shot.png");
	assert_int_equal(ev_file_write(png, PNG, sizeof PNG), 0);
	o = cli("issue", "add", "--title", "Counts <b>dots</b> wrong", "--body", "see image", "--attach", png);
	free(o);
	o = cli("proposal", "new", "--title", "More counting data", "--issue", "1", NULL, NULL);
	free(o);

	int port;
	pid_t pid = start(false, &port);
	char *page = NULL, *hdr = NULL;
	/* no credentials, a wrong token: 401 asking for Basic */
	assert_int_equal(http(port, "/view", NULL, NULL, &page, &hdr), 401);
	assert_non_null(strstr(hdr, "WWW-Authenticate: Basic realm=\"evald\""));
	free(page), free(hdr);
	assert_int_equal(http(port, "/view", "me:wrong", NULL, NULL, NULL), 401);
	/* the token as the password */
	assert_int_equal(http(port, "/view", "me:" TOKEN, NULL, &page, NULL), 200);
	wellformed(page, "/view");
	assert_non_null(strstr(page, "<tr data-run=\"1\">"));
	free(page);
	/* the run's page is the report */
	assert_int_equal(http(port, "/view/runs/1", "me:" TOKEN, NULL, &page, NULL), 200);
	char *rep = cli("report", "1", "--format", "html", NULL, NULL, NULL, NULL);
	assert_string_equal(page, rep);
	wellformed(page, "/view/runs/1");
	free(page), free(rep);
	assert_int_equal(http(port, "/view/runs/99", "me:" TOKEN, NULL, NULL, NULL), 404);
	assert_int_equal(http(port, "/view/compare?a=1&b=2", "me:" TOKEN, NULL, &page, NULL), 200);
	char *cmp = cli("compare", "1", "2", "--format", "html", NULL, NULL, NULL);
	assert_string_equal(page, cmp);
	free(page), free(cmp);
	assert_int_equal(http(port, "/view/compare?a=1", "me:" TOKEN, NULL, NULL, NULL), 400);
	/* the issue with its image inline, stored text escaped */
	assert_int_equal(http(port, "/view/issues/1", "me:" TOKEN, NULL, &page, NULL), 200);
	wellformed(page, "/view/issues/1");
	assert_non_null(strstr(page, "src=\"data:image/png;base64,iVBORw0KGgo"));
	assert_non_null(strstr(page, "Counts &lt;b&gt;dots&lt;/b&gt; wrong"));
	char *csrf = csrf_for(page, "/view/issues/1/close");
	char *other = ev_asprintf("csrf=%s", csrf);
	free(page);
	/* forged or missing csrf: refused, nothing changed */
	assert_int_equal(http(port, "/view/issues/1/close", "me:" TOKEN, "x=1", NULL, NULL), 403);
	assert_int_equal(http(port, "/view/proposals/1/join", "me:" TOKEN, other, NULL, NULL), 403);
	assert_int_equal(http(port, "/api/issues/1", NULL, NULL, &page, NULL), 200);
	assert_non_null(strstr(page, "\"status\":\"open\""));
	free(page);
	/* with it: closed */
	assert_int_equal(http(port, "/view/issues/1/close", "me:" TOKEN, other, &page, NULL), 200);
	free(page);
	assert_int_equal(http(port, "/api/issues/1", NULL, NULL, &page, NULL), 200);
	assert_non_null(strstr(page, "\"status\":\"closed\""));
	free(page), free(csrf), free(other);
	/* join the proposal */
	assert_int_equal(http(port, "/view/proposals", "me:" TOKEN, NULL, &page, NULL), 200);
	wellformed(page, "/view/proposals");
	assert_non_null(strstr(page, "More counting data"));
	csrf = csrf_for(page, "/view/proposals/1/join");
	other = ev_asprintf("csrf=%s&who=Ada+L%%C3%%B6w", csrf);
	free(page);
	assert_int_equal(http(port, "/view/proposals/1/join", "me:" TOKEN, other, &page, NULL), 200);
	free(page);
	assert_int_equal(http(port, "/view/proposals", "me:" TOKEN, NULL, &page, NULL), 200);
	assert_non_null(strstr(page, "<li>Ada L\xc3\xb6w</li>"));
	free(page), free(csrf), free(other);
	/* confirm the regression the comparison filed */
	assert_int_equal(http(port, "/view/regressions", "me:" TOKEN, NULL, &page, NULL), 200);
	wellformed(page, "/view/regressions");
	assert_non_null(strstr(page, "data-status=\"new\""));
	assert_non_null(strstr(page, "href=\"/view/compare?a=1&amp;b=2\""));
	csrf = csrf_for(page, "/view/regressions/1");
	other = ev_asprintf("csrf=%s&status=confirmed", csrf);
	free(page);
	assert_int_equal(http(port, "/view/regressions/1", "me:" TOKEN, "status=confirmed", NULL, NULL), 403);
	assert_int_equal(http(port, "/view/regressions/1", "me:" TOKEN, other, &page, NULL), 200);
	free(page);
	assert_int_equal(http(port, "/api/regressions", NULL, NULL, &page, NULL), 200);
	assert_non_null(strstr(page, "\"status\":\"confirmed\""));
	free(page), free(csrf), free(other);
	/* the other pages render */
	const char *pages[] = {"/view/regressions", "/view/issues", "/view/clusters"};
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(http(port, pages[i], "me:" TOKEN, NULL, &page, NULL), 200);
		wellformed(page, pages[i]);
		free(page);
	}
	stop(pid);

	/* --public: read without a token, act only with it */
	pid = start(true, &port);
	assert_int_equal(http(port, "/view/issues/1", NULL, NULL, &page, NULL), 200);
	free(page);
	assert_int_equal(http(port, "/view/issues/1/close", NULL, "csrf=00", NULL, NULL), 401);
	const char *chromium = getenv("EVALD_CHROMIUM") ? getenv("EVALD_CHROMIUM") : "/usr/bin/chromium";
	if (access(chromium, X_OK) == 0) {
		const char *tmp = getenv("EV_TEST_TMP");
		char *arts = ev_asprintf("%s/../test-artifacts", tmp ? tmp : "/tmp");
		assert_int_equal(ev_mkdir_p(arts), 0);
		const char *shots[][2] = {{"/view", "view-runs"}, {"/view/issues/1", "view-issue"},
		                          {"/view/proposals", "view-proposals"}};
		for (size_t i = 0; i < 3; i++) {
			char *url = ev_asprintf("http://127.0.0.1:%d%s", port, shots[i][0]);
			char *prof = ev_asprintf("--user-data-dir=%s/profile", dir);
			char *shot = ev_asprintf("--screenshot=%s/%s.png", arts, shots[i][1]);
			char *out = NULL, *err = NULL;
			const char *dump[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
			                      "--enable-logging=stderr", "--v=0", "--dump-dom", url, NULL};
			assert_int_equal(tu_run(&out, &err, NULL, dump), 0);
			assert_non_null(strstr(out, "<nav>"));
			if (strstr(err, "CONSOLE") || strstr(err, "Refused to"))
				fail_msg("%s: the browser complained:\n%s", shots[i][0], err);
			free(out), free(err);
			out = err = NULL;
			const char *snap[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
			                      "--hide-scrollbars", "--window-size=1100,900", shot, url, NULL};
			assert_int_equal(tu_run(&out, &err, NULL, snap), 0);
			free(out), free(err), free(url), free(prof), free(shot);
		}
		print_message("browser: 3 viewer pages rendered without console messages; screenshots in %s\n", arts);
		free(arts);
	} else {
		print_message("SKIP browser checks: no chromium at %s\n", chromium);
	}
	stop(pid);
	free(png), free(db), free(dir);
	curl_global_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(viewer, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
