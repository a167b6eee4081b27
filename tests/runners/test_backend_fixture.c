/* The OpenAI backend against the fixture server: retries on 429 (honouring
 * Retry-After), 5xx, malformed bodies and dropped connections; permanent
 * 4xx; timeouts; round-robin over base URLs; the API key and extra headers;
 * the response size cap. */
#include "fixture_util.h"

#include <unistd.h>

static tu_server srv, srv2, keyed;

static int setup(void **state)
{
	fu_start(&srv, NULL);
	fu_start(&srv2, NULL);
	const char *args[] = {"--require-key", "sekret-1", NULL};
	fu_start(&keyed, args);
	return 0;
}

static int teardown(void **state)
{
	tu_server_stop(&srv);
	tu_server_stop(&srv2);
	tu_server_stop(&keyed);
	return 0;
}

static ev_openai_options opts(const char *const *urls, size_t n)
{
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = urls;
	o.n_urls = n;
	o.api_key_env = "EV_TEST_RUNNERS_KEY";
	o.timeout_s = 10;
	o.backoff_base_s = 0.01;
	o.backoff_max_s = 2;
	return o;
}

/* Sends one user message and waits for its completion. */
static void ask(ev_completion *c, const ev_openai_options *o, const char *prompt)
{
	ev_backend *b = NULL;
	assert_int_equal(ev_backend_openai_new(&b, o), 0);
	ev_part p;
	memset(&p, 0, sizeof p);
	p.kind = EV_PART_TEXT;
	p.text = (char *)prompt;
	ev_message m = {(char *)"user", &p, 1, NULL, NULL, NULL};
	ev_request req = {"fixture", &m, 1, NULL, EV_GEN_INIT, NULL, (void *)0x1234, NULL, 0, 0};
	assert_int_equal(ev_backend_submit(b, &req), 0);
	assert_int_equal(ev_backend_pending(b), 1);
	int n = 0;
	double t0 = ev_now();
	while (n == 0 && ev_now() - t0 < 30)
		n = ev_backend_poll(b, c, 1, 0.05);
	assert_int_equal(n, 1);
	assert_ptr_equal(c->cookie, (void *)0x1234);
	assert_int_equal(ev_backend_pending(b), 0);
	ev_backend_free(b);
}

static void plain_request_succeeds_first_time(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	ev_completion c;
	ask(&c, &o, "hello backend");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_string_equal(c.text, "echo: hello backend");
	assert_string_equal(c.finish_reason, "stop");
	assert_int_equal(c.attempts, 1);
	assert_int_equal(c.prompt_tokens, 2);
	assert_int_equal(c.completion_tokens, 3);
	assert_non_null(c.raw_json);
	assert_true(c.latency_s > 0 && c.latency_s < 10);
	ev_completion_clear(&c);
}

static void rate_limit_is_retried_after_retry_after(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	ev_completion c;
	double t0 = ev_now();
	ask(&c, &o, "rl [[status=429 retry-after=1 times=1]]");
	double took = ev_now() - t0;
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_int_equal(c.attempts, 2);
	/* Retry-After: 1 was honoured rather than the 10 ms backoff. */
	assert_true(took >= 0.9);
	ev_completion_clear(&c);
}

static void server_errors_malformed_bodies_and_drops_are_retried(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	ev_completion c;
	ask(&c, &o, "e5 [[status=500 times=2]]");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_int_equal(c.attempts, 3);
	ev_completion_clear(&c);
	ask(&c, &o, "e503 [[status=503 times=1]][[malformed times=1]]");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_int_equal(c.attempts, 3);
	ev_completion_clear(&c);
	ask(&c, &o, "bad [[malformed times=1]]");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_int_equal(c.attempts, 2);
	assert_string_equal(c.text, "echo: bad [[malformed times=1]]");
	ev_completion_clear(&c);
	/* curl itself retries once on a reused connection that closes without
	 * an answer, so two drops make sure the backend sees one. */
	ask(&c, &o, "drop [[drop times=2]]");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_true(c.attempts >= 2);
	ev_completion_clear(&c);
}

static void retries_exhausted_is_an_error_naming_the_failure(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	o.max_retries = 2;
	ev_completion c;
	ask(&c, &o, "always [[status=500 times=100]]");
	assert_int_equal(c.status, EV_COMPLETION_ERROR);
	assert_int_equal(c.attempts, 3);
	assert_string_equal(c.error, "HTTP 500 after 3 attempts");
	assert_null(c.text);
	ev_completion_clear(&c);
}

static void client_errors_are_not_retried(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	ev_completion c;
	ask(&c, &o, "nope [[status=400 times=5]]");
	assert_int_equal(c.status, EV_COMPLETION_ERROR);
	assert_int_equal(c.attempts, 1);
	assert_non_null(strstr(c.error, "HTTP 400"));
	assert_non_null(strstr(c.error, "not retried"));
	ev_completion_clear(&c);
}

static void slow_answers_time_out(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	o.timeout_s = 0.3;
	o.max_retries = 1;
	ev_completion c;
	ask(&c, &o, "slow [[latency=1500]]");
	assert_int_equal(c.status, EV_COMPLETION_TIMEOUT);
	assert_int_equal(c.attempts, 2);
	assert_non_null(strstr(c.error, "timeout"));
	ev_completion_clear(&c);
}

static void refused_connections_are_retried_then_fail(void **state)
{
	/* A port that was just in use and is now closed. */
	tu_server dead;
	fu_start(&dead, NULL);
	tu_server_stop(&dead);
	const char *u[] = {dead.url};
	ev_openai_options o = opts(u, 1);
	o.max_retries = 2;
	ev_completion c;
	ask(&c, &o, "anyone?");
	assert_int_equal(c.status, EV_COMPLETION_ERROR);
	assert_int_equal(c.attempts, 3);
	assert_non_null(strstr(c.error, "network error"));
	ev_completion_clear(&c);
}

static void requests_spread_over_base_urls(void **state)
{
	const char *u[] = {srv.url, srv2.url};
	ev_openai_options o = opts(u, 2);
	o.concurrency = 4;
	long a0 = fu_requests(&srv), b0 = fu_requests(&srv2);
	ev_backend *b = NULL;
	assert_int_equal(ev_backend_openai_new(&b, &o), 0);
	ev_part p;
	memset(&p, 0, sizeof p);
	p.kind = EV_PART_TEXT;
	p.text = (char *)"spread";
	ev_message m = {(char *)"user", &p, 1, NULL, NULL, NULL};
	ev_request req = {"fixture", &m, 1, NULL, EV_GEN_INIT, NULL, NULL, NULL, 0, 0};
	for (int i = 0; i < 20; i++)
		assert_int_equal(ev_backend_submit(b, &req), 0);
	ev_completion c[8];
	int got = 0;
	double t0 = ev_now();
	while (got < 20 && ev_now() - t0 < 30) {
		int n = ev_backend_poll(b, c, 8, 0.05);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			assert_int_equal(c[i].status, EV_COMPLETION_OK);
			ev_completion_clear(&c[i]);
		}
		got += n;
	}
	assert_int_equal(got, 20);
	ev_backend_free(b);
	long da = fu_requests(&srv) - a0, db = fu_requests(&srv2) - b0;
	assert_int_equal(da + db, 20);
	assert_int_equal(da, 10); /* round-robin, no retries */
}

static void api_key_header_is_sent_and_401_is_permanent(void **state)
{
	const char *u[] = {keyed.url};
	ev_openai_options o = opts(u, 1);
	ev_completion c;
	unsetenv("EV_TEST_RUNNERS_KEY");
	ask(&c, &o, "let me in");
	assert_int_equal(c.status, EV_COMPLETION_ERROR);
	assert_int_equal(c.attempts, 1);
	assert_non_null(strstr(c.error, "HTTP 401"));
	ev_completion_clear(&c);
	setenv("EV_TEST_RUNNERS_KEY", "sekret-1", 1);
	ask(&c, &o, "let me in");
	unsetenv("EV_TEST_RUNNERS_KEY");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_string_equal(c.text, "echo: let me in");
	ev_completion_clear(&c);
}

static void extra_headers_are_sent(void **state)
{
	const char *u[] = {srv.url};
	const char *h[] = {"X-Evald-Test: yes-42"};
	ev_openai_options o = opts(u, 1);
	o.headers = h;
	o.n_headers = 1;
	ev_completion c;
	ask(&c, &o, "[[echo-header=X-Evald-Test]]");
	assert_int_equal(c.status, EV_COMPLETION_OK);
	assert_string_equal(c.text, "header: yes-42");
	ev_completion_clear(&c);
}

static void oversized_responses_are_refused(void **state)
{
	const char *u[] = {srv.url};
	ev_openai_options o = opts(u, 1);
	o.max_response_bytes = 1024;
	char prompt[2100];
	memset(prompt, 'x', sizeof prompt);
	memcpy(prompt, "[[reply=", 8);
	memcpy(prompt + sizeof prompt - 3, "]]", 3);
	ev_completion c;
	ask(&c, &o, prompt);
	assert_int_equal(c.status, EV_COMPLETION_ERROR);
	assert_int_equal(c.attempts, 1);
	assert_non_null(strstr(c.error, "over the limit"));
	ev_completion_clear(&c);
}

static void bad_options_are_refused(void **state)
{
	ev_backend *b = (ev_backend *)0x1;
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	assert_int_equal(ev_backend_openai_new(&b, &o), EV_E_INVALID);
	assert_null(b);
	const char *bad[] = {"ftp://x"};
	o.base_urls = bad;
	o.n_urls = 1;
	assert_int_equal(ev_backend_openai_new(&b, &o), EV_E_INVALID);
	const char *good[] = {"http://127.0.0.1:1/v1"};
	o.base_urls = good;
	o.concurrency = 0;
	assert_int_equal(ev_backend_openai_new(&b, &o), EV_E_INVALID);
	o.concurrency = 4;
	const char *hdr[] = {"X-Bad: a\r\nX-Injected: b"};
	o.headers = hdr;
	o.n_headers = 1;
	assert_int_equal(ev_backend_openai_new(&b, &o), EV_E_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_request_succeeds_first_time),
		cmocka_unit_test(rate_limit_is_retried_after_retry_after),
		cmocka_unit_test(server_errors_malformed_bodies_and_drops_are_retried),
		cmocka_unit_test(retries_exhausted_is_an_error_naming_the_failure),
		cmocka_unit_test(client_errors_are_not_retried),
		cmocka_unit_test(slow_answers_time_out),
		cmocka_unit_test(refused_connections_are_retried_then_fail),
		cmocka_unit_test(requests_spread_over_base_urls),
		cmocka_unit_test(api_key_header_is_sent_and_401_is_permanent),
		cmocka_unit_test(extra_headers_are_sent),
		cmocka_unit_test(oversized_responses_are_refused),
		cmocka_unit_test(bad_options_are_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
