/* reports: the HTML report of a run the test fills (1,000 samples over
 * three suites: plain, long-context with a length x depth grid, and
 * multimodal with inline images; pass@k in the summary; hostile text in
 * answers). Checked: well-formed XML (libxml2, no network), the same
 * bytes twice, every figure equal to the JSON report's (suites, grid
 * cells, pass@k, failure counts), one row a sample, nothing that loads
 * from elsewhere, stored text never markup, under 250 KB. Then in a real
 * browser (Debian's chromium, headless; skipped without it): the DOM
 * after parsing holds the charts and tables with the same counts, no
 * console errors or refused loads, and a screenshot is kept under
 * build/test-artifacts. */
#include "tracker_fixture.h"

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "reports/reports.h"

/* a 1x1 PNG */
static const char PNG1[] = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
                           "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

enum { N_PLAIN = 700, N_LONG = 250, N_MM = 50 };

static void put(ev_tracker *t, int64_t run, const char *suite, const char *id, int epoch, double score,
                const char *reason, const char *answer, const char *meta, const char *req)
{
	char target[48];
	snprintf(target, sizeof target, "\"t-%s\"", id);
	ev_result r = {.suite = suite, .sample_id = id, .epoch = epoch, .request_hash = "00ff", .response = answer,
	               .extracted = answer, .score = score, .reason = reason, .finish_reason = "stop",
	               .prompt_tokens = 10, .completion_tokens = 5, .latency_s = 0.1, .attempts = 1,
	               .metadata_json = meta, .request_json = req, .target_json = target};
	if (ev_tracker_result_put(t, run, &r))
		fail_msg("put: %s", ev_error_msg());
}

/* variant 1: the candidate of a comparison: every 13th plain sample and
 * the long suite's 4K rows flipped */
static int64_t fill_v(ev_tracker *t, int variant)
{
	int64_t run = tf_run(t, variant == 1 ? "ckpt-8" : variant == 2 ? "ckpt-9" : "ckpt <b>&amp; \"7\"");
	char id[32], meta[128], req[512], ans[160];
	for (int i = 0; i < N_PLAIN; i++)
		for (int e = 0; e < 2; e++) {
			snprintf(id, sizeof id, "p-%04d", i);
			snprintf(req, sizeof req,
			         "{\"messages\":[{\"role\":\"user\",\"content\":\"Question %d: what is %d plus %d? Answer with the "
			         "number only, and nothing else at all, please.\"}]}",
			         i, i, 2 * i);
			bool ok = i != 3 && (i * 7 + e * 3) % 10 < 6;
			if (variant == 1 && i % 13 == 0)
				ok = !ok;
			if (i == 3)
				snprintf(ans, sizeof ans, "</td><script>alert(1)</script>]]>\x01 <img src=\"http://evil/x.png\"/>");
			else
				snprintf(ans, sizeof ans, "The answer is %d, as computed step by step from the question above.",
				         ok ? 3 * i : 3 * i + 1);
			put(t, run, "plain", id, e, ok ? 1 : 0, ok ? "" : i % 3 ? "wrong_answer" : "no_answer", ans, NULL, req);
		}
	for (int i = 0; i < N_LONG; i++)
		for (int e = 0; e < 2; e++) {
			snprintf(id, sizeof id, "l-%04d", i);
			int len = (i % 5 + 1) * 1024, depth = (i / 5 % 5) * 25;
			snprintf(meta, sizeof meta, "{\"length\":%d,\"depth\":%d,\"task\":\"%s\"}", len, depth,
			         i % 2 ? "kv" : "needle");
			bool ok = (len < 4096 || depth > 50) ? (i + e) % 9 != 0 : (i + e) % 2 == 0;
			if (variant == 1 && len == 4096)
				ok = false;
			put(t, run, "long", id, e, ok, ok ? "" : "wrong_answer", ok ? "k17" : "k99", meta,
			    "{\"messages\":[{\"role\":\"user\",\"content\":\"(a long haystack) What is the value of key 17?\"}]}");
		}
	for (int i = 0; i < N_MM; i++)
		for (int e = 0; e < 2; e++) {
			snprintf(id, sizeof id, "m-%04d", i);
			snprintf(req, sizeof req,
			         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"How many dots?\"},"
			         "{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}}]}]}",
			         i == 1 ? "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=" : PNG1);
			put(t, run, "multimodal", id, e, i % 4 != 0, i % 4 ? "" : "wrong_answer", i % 4 ? "3" : "4", NULL, req);
		}
	/* the summary as evald run writes it (figures the test states; pass@k for the plain suite) */
	const char *summary =
		"{\"run_id\":1,\"model\":\"m\",\"suites\":["
		"{\"name\":\"plain\",\"n\":700,\"score\":0.6,\"ci_low\":0.56,\"ci_high\":0.64,\"stderr\":0.02,\"errors\":0,"
		"\"failures\":{\"wrong_answer\":373,\"no_answer\":187},\"pass_at_k\":{\"1\":0.6,\"2\":0.8},"
		"\"pass_hat_k\":{\"1\":0.6,\"2\":0.4}},"
		"{\"name\":\"long\",\"n\":250,\"score\":0.7,\"ci_low\":0.64,\"ci_high\":0.76,\"stderr\":0.03,\"errors\":0,"
		"\"failures\":{\"wrong_answer\":150}},"
		"{\"name\":\"multimodal\",\"n\":50,\"score\":0.74,\"ci_low\":0.62,\"ci_high\":0.86,\"stderr\":0.06,"
		"\"errors\":0,\"failures\":{\"wrong_answer\":26}}]}";
	assert_int_equal(ev_tracker_run_set_summary(t, run, summary), 0);
	assert_int_equal(ev_tracker_run_set_status(t, run, "finished"), 0);
	return run;
}

static int64_t fill(ev_tracker *t)
{
	return fill_v(t, 0);
}

static char *report(ev_tracker *t, int64_t run, ev_report_format fmt, size_t *len)
{
	ev_report_options opt = EV_REPORT_OPTIONS_INIT;
	opt.format = fmt;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	assert_non_null(f);
	if (ev_report_write(t, run, &opt, f))
		fail_msg("report: %s", ev_error_msg());
	fclose(f);
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The XPath query's node set size. */
static int xcount(xmlXPathContextPtr x, const char *q)
{
	xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)q, x);
	assert_non_null(o);
	int n = o->nodesetval ? o->nodesetval->nodeNr : 0;
	xmlXPathFreeObject(o);
	return n;
}

/* The attribute of the one node a query finds, as a number. */
static double xnum(xmlXPathContextPtr x, const char *q, const char *attr)
{
	xmlXPathObjectPtr o = xmlXPathEvalExpression((const xmlChar *)q, x);
	assert_non_null(o);
	if (!o->nodesetval || o->nodesetval->nodeNr != 1)
		fail_msg("%s: %d nodes", q, o->nodesetval ? o->nodesetval->nodeNr : 0);
	xmlChar *v = xmlGetProp(o->nodesetval->nodeTab[0], (const xmlChar *)attr);
	assert_non_null(v);
	double d = strtod((const char *)v, NULL);
	xmlFree(v);
	xmlXPathFreeObject(o);
	return d;
}

static void html_report_checks(void **state)
{
	(void)state;
	char *path = tf_db_path("report-html");
	ev_tracker *t = tf_open(path);
	int64_t run = fill(t);
	size_t len = 0, len2 = 0, jlen = 0;
	char *html = report(t, run, EV_REPORT_HTML, &len), *again = report(t, run, EV_REPORT_HTML, &len2);
	char *json = report(t, run, EV_REPORT_JSON, &jlen);
	print_message("HTML report of %d samples (%d results): %zu bytes\n", N_PLAIN + N_LONG + N_MM,
	              2 * (N_PLAIN + N_LONG + N_MM), len);
	/* the same bytes for the same tracker */
	assert_int_equal(len, len2);
	assert_memory_equal(html, again, len);
	if (getenv("EV_DUMP_HTML"))
		ev_file_write(getenv("EV_DUMP_HTML"), html, len);
	assert_true(len < 250000);
	/* self-contained: a policy that forbids loads, nothing that loads, no script */
	assert_non_null(strstr(html, "http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
	assert_int_equal(count(html, "<script"), 0);
	assert_int_equal(count(html, "src=\"http"), 0);
	assert_int_equal(count(html, "href=\"http"), 0);
	assert_int_equal(count(html, "data:image/svg"), 0); /* an image type that could carry script is not shown */
	assert_non_null(strstr(html, "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;]]&gt;"));
	assert_int_equal(count(html, "<img class=\"thumb\""), (N_MM + 3) / 4); /* failed samples' images; not the SVG one */

	/* well-formed XML, and the figures */
	xmlDocPtr doc = xmlReadMemory(html, (int)len, "report.html", "UTF-8", XML_PARSE_NONET);
	if (!doc)
		fail_msg("the report is not well-formed XML");
	xmlXPathContextPtr x = xmlXPathNewContext(doc);
	xmlXPathRegisterNs(x, (const xmlChar *)"s", (const xmlChar *)"http://www.w3.org/2000/svg");
	cJSON *j = cJSON_Parse(json);
	assert_non_null(j);
	const cJSON *s;
	int suites = 0;
	cJSON_ArrayForEach(s, cJSON_GetObjectItem(j, "suites"))
	{
		suites++;
		char q[256];
		const char *name = ev_json_str(s, "name", "");
		snprintf(q, sizeof q, "//tr[@data-suite='%s']", name);
		assert_true(xnum(x, q, "data-score") == ev_json_num(s, "score", -1));
		assert_true(xnum(x, q, "data-ci-low") == ev_json_num(s, "ci_low", -1));
		assert_true(xnum(x, q, "data-ci-high") == ev_json_num(s, "ci_high", -1));
		assert_true(xnum(x, q, "data-n") == ev_json_num(s, "n", -1));
		const cJSON *f;
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(s, "failures"))
		{
			snprintf(q, sizeof q, "//h3[.='%s']/following-sibling::table[1][@class='failures']/tbody/tr[@data-reason='%s']",
			         name, f->string);
			assert_true(xnum(x, q, "data-count") == f->valuedouble);
		}
		const cJSON *c;
		int cells = 0;
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(s, "grid"))
		{
			cells++;
			snprintf(q, sizeof q, "//s:g[@class='cell'][@data-task='%s'][@data-length='%.0f'][@data-depth='%.0f']",
			         ev_json_str(c, "task", ""), ev_json_num(c, "length", 0), ev_json_num(c, "depth", 0));
			assert_true(xnum(x, q, "data-score") == ev_json_num(c, "score", -1));
			assert_true(xnum(x, q, "data-ci-low") == ev_json_num(c, "ci_low", -1));
			assert_true(xnum(x, q, "data-ci-high") == ev_json_num(c, "ci_high", -1));
		}
		if (!strcmp(name, "long"))
			assert_int_equal(cells, 50); /* 2 tasks x 5 lengths x 5 depths */
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(s, "pass_at_k"))
		{
			snprintf(q, sizeof q, "//s:circle[@data-k='%s']", c->string);
			assert_true(xnum(x, q, "data-p") == c->valuedouble);
		}
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(s, "pass_hat_k"))
		{
			snprintf(q, sizeof q, "//s:rect[@class='point hat'][@data-k='%s']", c->string);
			assert_true(xnum(x, q, "data-p") == c->valuedouble);
		}
	}
	assert_int_equal(suites, 3);
	assert_int_equal(xcount(x, "//s:g[@class='cell']"), 50);
	assert_int_equal(xcount(x, "//s:g[@class='cell'][@data-significant='true']") > 0, 1);
	assert_int_equal(xcount(x, "//tr[@data-sample]"), N_PLAIN + N_LONG + N_MM);
	assert_int_equal(xcount(x, "//details[@class='fold']"), 4 + 2 + 1); /* folds of 200 rows */
	/* every chart has a text alternative */
	assert_int_equal(xcount(x, "//s:svg[not(@aria-label) and not(@aria-labelledby)]"), 0);
	/* a sample's row: its mean over epochs; a failed one shows its target */
	assert_true(xnum(x, "//tr[@data-sample='p-0001']", "data-score") == 0.5);
	assert_int_equal(xcount(x, "//tr[@data-sample='p-0001']/td[8][.='t-p-0001']"), 1);
	xmlXPathFreeContext(x);
	xmlFreeDoc(doc);
	cJSON_Delete(j);

	/* in a real browser */
	const char *chromium = getenv("EVALD_CHROMIUM") ? getenv("EVALD_CHROMIUM") : "/usr/bin/chromium";
	if (access(chromium, X_OK) != 0) {
		print_message("SKIP browser checks: no chromium at %s (setup installs Debian's chromium)\n", chromium);
	} else {
		char *dir = tu_tmpdir("report-html-browser"), *page = tu_path(dir, "report.html");
		assert_int_equal(ev_file_write(page, html, len), 0);
		const char *tmp = getenv("EV_TEST_TMP");
		char *arts = ev_asprintf("%s/../test-artifacts", tmp ? tmp : "/tmp");
		assert_int_equal(ev_mkdir_p(arts), 0);
		char *shot = ev_asprintf("%s/report-run.png", arts), *url = ev_asprintf("file://%s", page);
		char *shot_arg = ev_asprintf("--screenshot=%s", shot), *prof = ev_asprintf("--user-data-dir=%s/profile", dir);
		char *out = NULL, *err = NULL;
		const char *dump[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
		                      "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000", "--dump-dom", url,
		                      NULL};
		int rc = tu_run(&out, &err, NULL, dump);
		if (rc != 0)
			fail_msg("chromium --dump-dom: %d\n%s", rc, err ? err : "");
		/* the DOM the browser built: the charts and tables, with their counts */
		assert_int_equal(count(out, "data-sample="), N_PLAIN + N_LONG + N_MM);
		assert_int_equal(count(out, "class=\"cell\""), 50);
		assert_int_equal(count(out, "<svg"), 1 + 3 + 2 + 1);
		assert_int_equal(count(out, "<tr data-suite="), 3);
		/* nothing refused, no console errors */
		if (strstr(err, "Refused to") || strstr(err, "CONSOLE") || strstr(err, "Uncaught"))
			fail_msg("the browser complained:\n%s", err);
		free(out), free(err);
		out = err = NULL;
		const char *snap[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
		                      "--hide-scrollbars", "--window-size=1200,3000", shot_arg, url, NULL};
		rc = tu_run(&out, &err, NULL, snap);
		if (rc != 0 || access(shot, R_OK) != 0)
			fail_msg("chromium --screenshot: %d\n%s", rc, err ? err : "");
		print_message("browser: DOM checked; screenshot %s\n", shot);
		free(out), free(err), free(dir), free(page), free(arts), free(shot), free(url), free(shot_arg), free(prof);
	}
	free(html), free(again), free(json);
	ev_tracker_close(t);
	free(path);
}

/* The page of `evald compare A B --format html`: well-formed, self-contained,
 * each suite's difference equal to the JSON comparison's, every flipped
 * sample with both runs' answers, the long suite's difference heatmap with
 * the 4K row turned orange, the same bytes twice; in chromium when present. */
static void compare_html_checks(void **state)
{
	(void)state;
	char *path = tf_db_path("compare-html");
	ev_tracker *t = tf_open(path);
	int64_t a = fill_v(t, 0), b = fill_v(t, 1);
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	ev_compare *c = NULL;
	if (ev_compare_runs(&c, t, a, b, &opt))
		fail_msg("%s", ev_error_msg());
	ev_buf h1 = EV_BUF_INIT((size_t)64 << 20), h2 = EV_BUF_INIT((size_t)64 << 20);
	assert_int_equal(ev_compare_html(&h1, t, c, NULL), 0);
	assert_int_equal(ev_compare_html(&h2, t, c, NULL), 0);
	if (getenv("EV_DUMP_HTML")) {
		ev_file_write("/tmp/h/cmp1.html", h1.data, h1.len);
		ev_file_write("/tmp/h/cmp2.html", h2.data, h2.len);
	}
	assert_int_equal(h1.len, h2.len);
	assert_memory_equal(h1.data, h2.data, h1.len);
	print_message("compare page: %zu bytes\n", h1.len);
	assert_int_equal(count(h1.data, "<script"), 0);
	assert_int_equal(count(h1.data, "src=\"http"), 0);
	assert_non_null(strstr(h1.data, "content=\"default-src 'none';"));
	xmlDocPtr doc = xmlReadMemory(h1.data, (int)h1.len, "compare.html", "UTF-8", XML_PARSE_NONET);
	if (!doc)
		fail_msg("the compare page is not well-formed XML");
	xmlXPathContextPtr x = xmlXPathNewContext(doc);
	xmlXPathRegisterNs(x, (const xmlChar *)"s", (const xmlChar *)"http://www.w3.org/2000/svg");
	char *js = NULL;
	assert_int_equal(ev_compare_json(&js, c), 0);
	cJSON *j = cJSON_Parse(js);
	const cJSON *su;
	size_t flips = 0;
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(j, "suites"))
	{
		char q[256];
		snprintf(q, sizeof q, "//tr[@data-suite='%s']", ev_json_str(su, "name", ""));
		assert_true(xnum(x, q, "data-delta") == ev_json_num(su, "delta", -9));
		assert_true(xnum(x, q, "data-ci-low") == ev_json_num(su, "ci_low", -9));
		assert_true(xnum(x, q, "data-ci-high") == ev_json_num(su, "ci_high", -9));
		assert_true(xnum(x, q, "data-p") == ev_json_num(su, "p", -9));
		assert_true(xnum(x, q, "data-mde") == ev_json_num(su, "mde", -9));
		flips += (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(su, "fixed")) +
		         (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(su, "broken"));
	}
	print_message("flipped samples: %zu\n", flips);
	assert_true(flips > 20);
	assert_int_equal(xcount(x, "//tr[@class='flip']"), (int)flips);
	/* a flipped sample: A's and B's answers beside each other */
	assert_int_equal(xcount(x, "//tr[@data-sample='p-0013']/td[contains(., 'The answer is 39,')]"), 1);
	assert_int_equal(xcount(x, "//tr[@data-sample='p-0013']/td[contains(., 'The answer is 40,')]"), 1);
	/* the long suite: 50 difference cells, the 4K row all drops */
	assert_int_equal(xcount(x, "//s:g[@class='dcell']"), 50);
	assert_int_equal(xcount(x, "//s:g[@class='dcell'][@data-length='4096'][@data-delta < 0]"), 10);
	assert_int_equal(xcount(x, "//s:g[@class='dcell'][@data-length!='4096'][@data-delta != 0]"), 0);
	xmlXPathFreeContext(x);
	xmlFreeDoc(doc);
	const char *chromium = getenv("EVALD_CHROMIUM") ? getenv("EVALD_CHROMIUM") : "/usr/bin/chromium";
	if (access(chromium, X_OK) == 0) {
		char *dir = tu_tmpdir("compare-html-browser"), *page = tu_path(dir, "compare.html");
		assert_int_equal(ev_file_write(page, h1.data, h1.len), 0);
		const char *tmp = getenv("EV_TEST_TMP");
		char *shot = ev_asprintf("--screenshot=%s/../test-artifacts/compare-runs.png", tmp ? tmp : "/tmp");
		char *url = ev_asprintf("file://%s", page), *prof = ev_asprintf("--user-data-dir=%s/profile", dir);
		char *out = NULL, *err = NULL;
		const char *dump[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
		                      "--enable-logging=stderr", "--v=0", "--dump-dom", url, NULL};
		assert_int_equal(tu_run(&out, &err, NULL, dump), 0);
		assert_int_equal(count(out, "class=\"flip\""), flips);
		assert_int_equal(count(out, "class=\"dcell\""), 50);
		if (strstr(err, "CONSOLE") || strstr(err, "Refused to"))
			fail_msg("the browser complained:\n%s", err);
		free(out), free(err);
		out = err = NULL;
		const char *snap[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", prof,
		                      "--hide-scrollbars", "--window-size=1200,2400", shot, url, NULL};
		assert_int_equal(tu_run(&out, &err, NULL, snap), 0);
		free(out), free(err), free(dir), free(page), free(shot), free(url), free(prof);
	}
	cJSON_Delete(j);
	free(js);
	ev_buf_free(&h1), ev_buf_free(&h2);
	ev_compare_free(c);
	ev_tracker_close(t);
	free(path);
}

/* `evald report --series A,B,C`: three checkpoints, B worse on the long
 * suite; the JSON has a point a checkpoint and suite, a change down A->B
 * and up B->C there and none on the unchanged multimodal suite, and the
 * regression filed A->B with its history; the HTML is well-formed with one
 * trend chart a suite and the same points. */
static void series_checks(void **state)
{
	(void)state;
	char *path = tf_db_path("series");
	ev_tracker *t = tf_open(path);
	int64_t a = fill_v(t, 0), b = fill_v(t, 1);
	fill_v(t, 2);
	ev_compare_options opt = EV_COMPARE_OPTIONS_INIT;
	ev_compare *c = NULL;
	char *acts = NULL;
	assert_int_equal(ev_compare_runs(&c, t, a, b, &opt), 0);
	assert_int_equal(ev_regressions_apply(t, c, &acts), 0);
	ev_compare_free(c);
	free(acts);
	const char *models[] = {"ckpt <b>&amp; \"7\"", "ckpt-8", "ckpt-9"};
	ev_buf j = EV_BUF_INIT((size_t)64 << 20), h = EV_BUF_INIT((size_t)64 << 20);
	if (ev_report_series(t, models, 3, EV_REPORT_JSON, &j))
		fail_msg("%s", ev_error_msg());
	assert_int_equal(ev_report_series(t, models, 3, EV_REPORT_HTML, &h), 0);
	cJSON *o = cJSON_Parse(j.data);
	assert_non_null(o);
	const cJSON *su;
	cJSON_ArrayForEach(su, cJSON_GetObjectItem(o, "suites"))
	{
		const char *name = ev_json_str(su, "name", "");
		assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(su, "points")), 3);
		const cJSON *ch = cJSON_GetObjectItem(su, "changes");
		if (!strcmp(name, "long")) {
			assert_int_equal(cJSON_GetArraySize(ch), 2);
			assert_string_equal(ev_json_str(cJSON_GetArrayItem(ch, 0), "direction", ""), "down");
			assert_string_equal(ev_json_str(cJSON_GetArrayItem(ch, 1), "direction", ""), "up");
		} else if (!strcmp(name, "multimodal")) {
			assert_int_equal(cJSON_GetArraySize(ch), 0);
		}
	}
	const cJSON *regs = cJSON_GetObjectItem(o, "regressions");
	assert_true(cJSON_GetArraySize(regs) >= 1);
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(regs, 0), "events")) >= 1);
	xmlDocPtr doc = xmlReadMemory(h.data, (int)h.len, "series.html", "UTF-8", XML_PARSE_NONET);
	if (!doc)
		fail_msg("the series page is not well-formed");
	xmlXPathContextPtr x = xmlXPathNewContext(doc);
	xmlXPathRegisterNs(x, (const xmlChar *)"s", (const xmlChar *)"http://www.w3.org/2000/svg");
	assert_int_equal(xcount(x, "//s:svg[@class='chart trend']"), 3);
	assert_int_equal(xcount(x, "//s:g[@class='point']"), 9);
	assert_int_equal(xcount(x, "//s:g[@class='change'][@data-direction='down']") >= 1, 1);
	assert_int_equal(xcount(x, "//h3[@class='regression']"), cJSON_GetArraySize(regs));
	xmlXPathFreeContext(x);
	xmlFreeDoc(doc);
	/* a model without a finished run is named */
	const char *bad[] = {"ckpt-8", "nope"};
	ev_buf z = EV_BUF_INIT(1 << 20);
	assert_int_not_equal(ev_report_series(t, bad, 2, EV_REPORT_JSON, &z), 0);
	assert_non_null(strstr(ev_error_msg(), "'nope'"));
	ev_buf_free(&z), ev_buf_free(&j), ev_buf_free(&h);
	cJSON_Delete(o);
	ev_tracker_close(t);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(html_report_checks),
		cmocka_unit_test(compare_html_checks),
		cmocka_unit_test(series_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
