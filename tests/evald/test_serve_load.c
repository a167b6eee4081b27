/* `evald serve` under load and abuse (issue 11, item 6):
 *  - hundreds of connections that trickle a request head do not lock others
 *    out, and are closed at the header deadline;
 *  - generations hold no HTTP thread: with one thread, /v1/models answers
 *    while long generations run;
 *  - past --max-queue a request gets 503 with Retry-After at once;
 *  - a client that leaves cancels its generation (plain and streaming),
 *    which would otherwise run for minutes;
 *  - a streaming client that does not read is cancelled at --stream-buffer
 *    and its stream ends with an error event.
 * The server's GET /health counters say what happened to each request. */
#include "testutil.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "engine/engine.h"

#define N_SLOW 600

static char *dir, *ckpt;
static pid_t srv_pid = -1;
static int port;

static int setup(void **st)
{
	(void)st;
	signal(SIGPIPE, SIG_IGN);
	/* the slow connections need file descriptors */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	dir = tu_tmpdir("serve-load");
	ckpt = tu_path(dir, "ckpt");
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 600;
	z.max_position = 65536; /* room for generations far longer than any test waits */
	if (eng_mkmodel(ckpt, "qwen2", &z, "f32", 9))
		return -1;
	int fd[2];
	if (pipe(fd))
		return -1;
	char *db = tu_path(dir, "serve.db");
	srv_pid = fork();
	if (srv_pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(tu_evald(), tu_evald(), "--db", db, "serve", "--model", ckpt, "--port", "0", "--print-port",
		      "--threads", "1", "--max-queue", "3", "--header-timeout", "1", "--stream-buffer", "4096",
		      (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	FILE *f = fdopen(fd[0], "r");
	if (!f || fscanf(f, "%d", &port) != 1) {
		fprintf(stderr, "serve did not print its port\n");
		return -1;
	}
	fclose(f);
	free(db);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		int status;
		waitpid(srv_pid, &status, 0);
	}
	free(dir);
	free(ckpt);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_server(int rcvbuf)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s >= 0);
	if (rcvbuf)
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(0x7f000001);
	assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof a), 0);
	return s;
}

static void send_all(int s, const char *p)
{
	size_t n = strlen(p);
	while (n) {
		ssize_t k = send(s, p, n, 0);
		assert_true(k > 0);
		p += k;
		n -= (size_t)k;
	}
}

/* A raw POST of a JSON body; the answer is not read. */
static int post_raw(const char *path, const char *body, int rcvbuf)
{
	int s = connect_server(rcvbuf);
	char head[256];
	snprintf(head, sizeof head,
	         "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", path,
	         strlen(body));
	send_all(s, head);
	send_all(s, body);
	return s;
}

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	ev_buf_append(ud, p, sz * n);
	return sz * n;
}

static size_t header_cb(char *p, size_t sz, size_t n, void *ud)
{
	if (sz * n > 12 && !strncasecmp(p, "Retry-After:", 12))
		*(int *)ud = atoi(p + 12);
	return sz * n;
}

/* One request with curl; the status, the body in *out, Retry-After in *retry. */
static long http(const char *method, const char *path, const char *body, char **out, int *retry)
{
	CURL *c = curl_easy_init();
	char url[256];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	ev_buf b = EV_BUF_INIT(1 << 24);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	int ra = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &ra);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	long code = 0;
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fprintf(stderr, "%s %s: %s\n", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = b.data ? b.data : ev_strdup("");
	else
		ev_buf_free(&b);
	if (retry)
		*retry = ra;
	return rc == CURLE_OK ? code : -1;
}

/* A counter of GET /health. */
static long health(const char *key)
{
	char *body = NULL;
	assert_int_equal(http("GET", "/health", NULL, &body, NULL), 200);
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(body, pat);
	assert_non_null(p);
	long v = strtol(p + strlen(pat), NULL, 10);
	free(body);
	return v;
}

/* Waits (up to 20 s) until a counter reaches at least `want`. */
static long health_wait(const char *key, long want, bool at_most)
{
	double until = now_s() + 20;
	long v;
	while ((v = health(key)), at_most ? v > want : v < want) {
		if (now_s() > until)
			break;
		usleep(50 * 1000);
	}
	return v;
}

static const char *LONG_PLAIN = "{\"prompt\":\"a long one\",\"max_tokens\":60000,\"ignore_eos\":true}";
static const char *LONG_STREAM = "{\"messages\":[{\"role\":\"user\",\"content\":\"a long one\"}],\"max_tokens\":60000,"
                                 "\"ignore_eos\":true,\"stream\":true}";

static void slow_request_heads_lock_nobody_out_and_are_closed(void **st)
{
	(void)st;
	int *slow = calloc(N_SLOW, sizeof *slow);
	for (int i = 0; i < N_SLOW; i++) {
		slow[i] = connect_server(0);
		send_all(slow[i], "GET /api/issues HTTP/1.1\r\nHost: x\r\n"); /* and never the end of the head */
	}
	/* everyone else is still served */
	char *body = NULL;
	assert_int_equal(http("GET", "/v1/models", NULL, &body, NULL), 200);
	assert_non_null(strstr(body, "\"object\":\"list\""));
	free(body);
	/* past the deadline (1 s here) the server has closed every slow one */
	int closed = 0;
	double until = now_s() + 15;
	for (int i = 0; i < N_SLOW; i++) {
		struct pollfd p = {slow[i], POLLIN, 0};
		int left = (int)((until - now_s()) * 1000);
		if (left > 0 && poll(&p, 1, left) == 1) {
			char b[512];
			ssize_t n = recv(slow[i], b, sizeof b, 0);
			if (n == 0 || (n < 0 && errno == ECONNRESET))
				closed++;
		}
		close(slow[i]);
	}
	free(slow);
	assert_int_equal(closed, N_SLOW);
}

static void generations_hold_no_thread_and_the_queue_is_bounded(void **st)
{
	(void)st;
	long cancelled0 = health("cancelled");
	/* three long generations fill the queue (--max-queue 3)... */
	int c[3];
	c[0] = post_raw("/v1/completions", LONG_PLAIN, 0);
	c[1] = post_raw("/v1/completions", LONG_PLAIN, 0);
	c[2] = post_raw("/v1/completions", LONG_PLAIN, 0);
	assert_int_equal(health_wait("in_flight", 3, false), 3);
	/* ...and the server's one HTTP thread still answers */
	char *body = NULL;
	assert_int_equal(http("GET", "/v1/models", NULL, &body, NULL), 200);
	free(body);
	/* a fourth is turned away at once, with a time to retry */
	int retry = 0;
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"one more\",\"max_tokens\":4}", &body, &retry), 503);
	assert_non_null(strstr(body, "--max-queue"));
	assert_true(retry >= 1);
	free(body);
	assert_true(health("rejected") >= 1);
	assert_int_equal(health("in_flight"), 3);
	/* the clients leave: their generations stop (they would run for minutes) */
	for (int i = 0; i < 3; i++)
		close(c[i]);
	assert_int_equal(health_wait("in_flight", 0, true), 0);
	assert_int_equal(health("cancelled"), cancelled0 + 3);
	/* and the queue takes new work again */
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"again\",\"max_tokens\":4}", &body, NULL), 200);
	assert_non_null(strstr(body, "\"text_completion\""));
	free(body);
}

/* n > 1: the choices wait together, and all of them stop when the client
 * leaves; n past the queue's room is turned away whole. */
static void choices_are_cancelled_together(void **st)
{
	(void)st;
	/* the last test's request may still be counting itself out */
	assert_int_equal(health_wait("in_flight", 0, true), 0);
	long cancelled0 = health("cancelled");
	int c = post_raw("/v1/completions", "{\"prompt\":\"long\",\"max_tokens\":60000,\"ignore_eos\":true,\"n\":2}", 0);
	assert_int_equal(health_wait("in_flight", 2, false), 2);
	char *body = NULL;
	int retry = 0;
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2,\"n\":2}", &body, &retry), 503);
	free(body);
	close(c);
	assert_int_equal(health_wait("in_flight", 0, true), 0);
	assert_int_equal(health("cancelled"), cancelled0 + 2);
}

static void a_stream_whose_client_leaves_is_cancelled(void **st)
{
	(void)st;
	long cancelled0 = health("cancelled");
	int s = post_raw("/v1/chat/completions", LONG_STREAM, 0);
	char chunk[4096];
	ssize_t n = recv(s, chunk, sizeof chunk - 1, 0); /* the head and the first chunks */
	assert_true(n > 0);
	chunk[n] = 0;
	assert_non_null(strstr(chunk, "text/event-stream"));
	close(s);
	assert_int_equal(health_wait("cancelled", cancelled0 + 1, false), cancelled0 + 1);
	assert_int_equal(health_wait("in_flight", 0, true), 0);
}

static void a_stream_nobody_reads_is_cancelled_with_an_error_event(void **st)
{
	(void)st;
	long cancelled0 = health("cancelled");
	/* a small receive window, and nothing read: the server's buffer for
	 * this stream passes --stream-buffer (4096 bytes) */
	int s = post_raw("/v1/chat/completions", LONG_STREAM, 2048);
	assert_int_equal(health_wait("cancelled", cancelled0 + 1, false), cancelled0 + 1);
	assert_int_equal(health_wait("in_flight", 0, true), 0);
	/* now read it all: the stream ends with the error and [DONE] */
	ev_buf b = EV_BUF_INIT(1 << 26);
	char chunk[65536];
	double until = now_s() + 20;
	while (now_s() < until) {
		struct pollfd p = {s, POLLIN, 0};
		if (poll(&p, 1, 1000) != 1)
			continue;
		ssize_t n = recv(s, chunk, sizeof chunk, 0);
		if (n <= 0)
			break;
		ev_buf_append(&b, chunk, (size_t)n);
		if (b.data && strstr(b.data, "data: [DONE]"))
			break;
	}
	close(s);
	assert_non_null(b.data);
	assert_non_null(strstr(b.data, "HTTP/1.1 200"));
	const char *err = strstr(b.data, "read the stream too slowly");
	assert_non_null(err);
	assert_non_null(strstr(err, "data: [DONE]"));
	ev_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(slow_request_heads_lock_nobody_out_and_are_closed),
		cmocka_unit_test(generations_hold_no_thread_and_the_queue_is_bounded),
		cmocka_unit_test(choices_are_cancelled_together),
		cmocka_unit_test(a_stream_whose_client_leaves_is_cancelled),
		cmocka_unit_test(a_stream_nobody_reads_is_cancelled_with_an_error_event),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
