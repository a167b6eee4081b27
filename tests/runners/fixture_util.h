/* Helpers the runners' integration tests share: a fixture server per test
 * group and its /stats counter. */
#ifndef EV_TEST_RUNNERS_FIXTURE_UTIL_H
#define EV_TEST_RUNNERS_FIXTURE_UTIL_H

#include "runners/runners.h"
#include "tests/common/testutil.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

static size_t fu_collect(char *p, size_t size, size_t n, void *ud)
{
	ev_buf_append(ud, p, size * n);
	return size * n;
}

/* Chat requests the server has seen (GET /stats), or -1. */
static long fu_requests(const tu_server *s)
{
	char url[96];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/stats", s->port);
	ev_buf b = EV_BUF_INIT(1 << 16);
	CURL *e = curl_easy_init();
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fu_collect);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	CURLcode rc = curl_easy_perform(e);
	curl_easy_cleanup(e);
	long n = -1;
	cJSON *j = NULL;
	if (rc == CURLE_OK && ev_json_parse(&j, b.data ? b.data : "", b.len, "stats") == 0)
		n = (long)ev_json_num(j, "requests", -1);
	cJSON_Delete(j);
	ev_buf_free(&b);
	return n;
}

static void fu_start(tu_server *s, const char *const args[])
{
	if (tu_server_start(s, args) != 0)
		fail_msg("cannot start the fixture server (EV_FIXTURE_SERVER=%s)", getenv("EV_FIXTURE_SERVER"));
}

#endif
