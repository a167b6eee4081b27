/* `evald serve --model DIR` end to end: `evald run` over HTTP against it
 * gives the same per-sample responses as `evald run --model DIR` in
 * process; streamed SSE chunks concatenate to the non-streaming text (chat
 * and plain completions); /v1/models names the model; bad requests get
 * clear 4xx JSON errors. */
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <sqlite3.h>

#include "engine/engine.h"

static char *dir, *ckpt, *suite;
static pid_t srv_pid = -1;
static int port;

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("serve-openai");
	ckpt = tu_path(dir, "ckpt");
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 600;
	z.max_position = 1024;
	if (eng_mkmodel(ckpt, "qwen2", &z, "f32", 5))
		return -1;
	char *sdir = tu_path(dir, "suite");
	char *cmd = ev_asprintf("mkdir -p '%s'", sdir);
	if (system(cmd))
		return -1;
	free(cmd);
	free(tu_write(sdir, "suite.json",
	              "{\"name\":\"rt\",\"version\":\"1\",\"kind\":\"qa\",\"generation\":{\"temperature\":0,"
	              "\"max_tokens\":10},\"checker\":{\"type\":\"includes\"}}"));
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < 9; i++)
		ev_buf_printf(&b, "{\"id\":\"q%d\",\"input\":\"Round trip question %d about %s?\",\"target\":\"the\"}\n", i,
		              i, i % 2 ? "rivers" : "numbers");
	free(tu_write(sdir, "samples.jsonl", b.data));
	ev_buf_free(&b);
	suite = sdir;

	/* the server, on a free port it prints */
	int fd[2];
	if (pipe(fd))
		return -1;
	char *db = tu_path(dir, "serve.db");
	srv_pid = fork();
	if (srv_pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(tu_evald(), tu_evald(), "--db", db, "serve", "--model", ckpt, "--port", "0", "--print-port",
		      "--max-batch", "4", "--max-body", "65536", (char *)NULL);
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
	free(suite);
	return 0;
}

/* sample_id -> response of the one run in db, as "id\tresponse\n" lines in id order. */
static char *responses(const char *db)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *q = NULL;
	ev_buf b = EV_BUF_INIT(1 << 24);
	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h,
	                                    "SELECT sample_id, response, finish_reason, completion_tokens, reason FROM results "
	                                    "ORDER BY sample_id",
	                                    -1, &q, NULL),
	                 SQLITE_OK);
	int n = 0;
	while (sqlite3_step(q) == SQLITE_ROW) {
		ev_buf_printf(&b, "%s\t%s\t%s\t%d\t%s\n", sqlite3_column_text(q, 0), sqlite3_column_text(q, 1),
		              sqlite3_column_text(q, 2), sqlite3_column_int(q, 3), sqlite3_column_text(q, 4));
		n++;
	}
	assert_int_equal(n, 9);
	sqlite3_finalize(q);
	sqlite3_close(h);
	return b.data;
}

static void run_over_http_equals_run_in_process(void **st)
{
	(void)st;
	char *db1 = tu_path(dir, "inproc.db"), *db2 = tu_path(dir, "http.db");
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
	char *out = NULL, *err = NULL;
	const char *a1[] = {tu_evald(), "--db", db1, "run", "--model", ckpt, "--model-name", "ckpt", "--suite", suite,
	                    "--json", NULL};
	int rc = tu_run(&out, &err, NULL, a1);
	if (rc)
		fail_msg("in-process run: %s", err);
	free(out);
	free(err);
	const char *a2[] = {tu_evald(), "--db", db2, "run", "--model", url, "--model-name", "ckpt", "--suite", suite,
	                    "--json", "--concurrency", "8", NULL};
	rc = tu_run(&out, &err, NULL, a2);
	if (rc)
		fail_msg("http run: %s", err);
	free(out);
	free(err);
	char *r1 = responses(db1), *r2 = responses(db2);
	assert_string_equal(r1, r2);
	/* and the answers are real generations, not empty strings */
	assert_non_null(strstr(r1, "\tlength\t10\t") ? r1 : strstr(r1, "\tstop\t"));
	free(r1);
	free(r2);
	free(db1);
	free(db2);
}

/* ---- direct HTTP --------------------------------------------------------------------------- */

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
	ev_buf_append(ud, p, sz * n);
	return sz * n;
}

static long http(const char *method, const char *path, const char *body, char **out)
{
	CURL *c = curl_easy_init();
	char url[256];
	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	ev_buf b = EV_BUF_INIT(1 << 24);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	long code = 0;
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	*out = b.data ? b.data : ev_strdup("");
	return code;
}

/* Concatenates the text of every `data:` chunk; checks the stream ends
 * with [DONE] and that exactly one chunk carries a finish_reason. */
static char *sse_text(const char *body, bool chat, char *finish, size_t fcap)
{
	ev_buf t = EV_BUF_INIT(1 << 24);
	ev_buf_puts(&t, "");
	int finishes = 0;
	bool done = false;
	const char *p = body;
	while ((p = strstr(p, "data: "))) {
		p += 6;
		const char *e = strstr(p, "\n\n");
		assert_non_null(e);
		if (!strncmp(p, "[DONE]", 6)) {
			done = true;
			break;
		}
		cJSON *j = cJSON_ParseWithLength(p, (size_t)(e - p));
		assert_non_null(j);
		cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
		assert_non_null(c0);
		const char *piece = chat ? ev_json_str(cJSON_GetObjectItem(c0, "delta"), "content", "")
		                         : ev_json_str(c0, "text", "");
		ev_buf_puts(&t, piece);
		const char *fr = ev_json_str(c0, "finish_reason", NULL);
		if (fr) {
			finishes++;
			snprintf(finish, fcap, "%s", fr);
		}
		cJSON_Delete(j);
		p = e;
	}
	assert_true(done);
	assert_int_equal(finishes, 1);
	return t.data;
}

static void streamed_chunks_concatenate_to_the_whole_answer(void **st)
{
	(void)st;
#define CHAT                                                                                           \
	"{\"model\":\"ckpt\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"                 \
	"{\"role\":\"user\",\"content\":\"Tell me a story about a lighthouse.\"}],"                         \
	"\"max_tokens\":24,\"temperature\":0%s}"
	char *b1 = ev_asprintf(CHAT, ""), *b2 = ev_asprintf(CHAT, ",\"stream\":true");
	char *whole = NULL, *stream = NULL;
	assert_int_equal(http("POST", "/v1/chat/completions", b1, &whole), 200);
	assert_int_equal(http("POST", "/v1/chat/completions", b2, &stream), 200);
	cJSON *j = cJSON_Parse(whole);
	assert_non_null(j);
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const char *text = ev_json_str(cJSON_GetObjectItem(c0, "message"), "content", NULL);
	assert_non_null(text);
	assert_true(strlen(text) > 0);
	char fin[32] = "";
	char *cat = sse_text(stream, true, fin, sizeof fin);
	assert_string_equal(cat, text);
	assert_string_equal(fin, ev_json_str(c0, "finish_reason", ""));
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "completion_tokens", 0) > 0, 1);
	free(cat);
	cJSON_Delete(j);
	free(whole);
	free(stream);
	free(b1);
	free(b2);

	/* with tools the text is held to the end: a call must never go out
	 * as text first (before, the call's JSON streamed as content, then
	 * again as tool_calls); one content delta, equal to the answer's */
#define TOOLS ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]"
	b1 = ev_asprintf(CHAT, TOOLS);
	b2 = ev_asprintf(CHAT, TOOLS ",\"stream\":true");
	assert_int_equal(http("POST", "/v1/chat/completions", b1, &whole), 200);
	assert_int_equal(http("POST", "/v1/chat/completions", b2, &stream), 200);
	j = cJSON_Parse(whole);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	text = ev_json_str(cJSON_GetObjectItem(c0, "message"), "content", "");
	int with_text = 0;
	for (char *ev = strstr(stream, "data: {"); ev; ev = strstr(ev + 1, "data: {")) {
		char *end = strstr(ev, "\n\n");
		char *one = ev_strndup(ev + 6, end ? (size_t)(end - ev - 6) : strlen(ev + 6));
		cJSON *chunk = cJSON_Parse(one);
		const cJSON *d = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(chunk, "choices"), 0), "delta");
		const char *piece = ev_json_str(d, "content", "");
		if (*piece) {
			with_text++;
			assert_string_equal(piece, text);
		}
		cJSON_Delete(chunk);
		free(one);
	}
	assert_int_equal(with_text, *text ? 1 : 0);
	cJSON_Delete(j);
	free(whole);
	free(stream);
	free(b1);
	free(b2);

	/* plain completions, with a stop string cutting it */
#define CMP "{\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0%s}"
	b1 = ev_asprintf(CMP, "");
	assert_int_equal(http("POST", "/v1/completions", b1, &whole), 200);
	j = cJSON_Parse(whole);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	char *full = ev_strdup(ev_json_str(c0, "text", ""));
	assert_true(strlen(full) >= 4);
	cJSON_Delete(j);
	free(whole);
	/* stop at a 2-byte piece from the middle of the answer */
	char stop[3] = {full[strlen(full) / 2], full[strlen(full) / 2 + 1], 0};
	cJSON *sj = cJSON_CreateString(stop);
	char *stop_json = ev_json_print(sj);
	cJSON_Delete(sj);
	char *extra = ev_asprintf(",\"stop\":[%s]", stop_json), *extra_s = ev_asprintf(",\"stop\":%s,\"stream\":true", stop_json);
	char *b3 = ev_asprintf(CMP, extra), *b4 = ev_asprintf(CMP, extra_s);
	assert_int_equal(http("POST", "/v1/completions", b3, &whole), 200);
	assert_int_equal(http("POST", "/v1/completions", b4, &stream), 200);
	j = cJSON_Parse(whole);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const char *cut = ev_json_str(c0, "text", "");
	assert_int_equal(strlen(cut), (size_t)(strstr(full, stop) - full));
	assert_string_equal(ev_json_str(c0, "finish_reason", ""), "stop");
	cat = sse_text(stream, false, fin, sizeof fin);
	assert_string_equal(cat, cut);
	assert_string_equal(fin, "stop");
	free(cat);
	cJSON_Delete(j);
	free(whole);
	free(stream);
	free(b1);
	free(b3);
	free(b4);
	free(extra);
	free(extra_s);
	free(stop_json);
	free(full);
}

static void models_and_errors_answer_json(void **st)
{
	(void)st;
	char *out = NULL;
	assert_int_equal(http("GET", "/v1/models", NULL, &out), 200);
	assert_non_null(strstr(out, "\"id\":\"ckpt\""));
	free(out);
	struct {
		const char *path, *body;
		long status;
		const char *needle;
	} cases[] = {
		{"/v1/chat/completions", "{not json", 400, "request body"},
		{"/v1/chat/completions", "[]", 400, "JSON object"},
		{"/v1/chat/completions", "{\"messages\":[]}", 400, "messages"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", 400, "role"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":-1}", 400,
		 "temperature"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":\"x\"}", 400,
		 "max_tokens"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":{}}", 400, "tools"},
		{"/v1/completions", "{\"prompt\":42}", 400, "prompt"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"seed\":1e300}", 400,
		 "seed"},
		{"/v1/embeddings", "{}", 404, "no such endpoint"},
		/* A named model must be the one served; leaving it out is fine. */
		{"/v1/chat/completions", "{\"model\":\"gpt-4\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 404,
		 "gpt-4\\\": not served here (this server serves \\\"ckpt"},
		{"/v1/completions", "{\"model\":\"ckp\",\"prompt\":\"hi\"}", 404, "not served here"},
		{"/v1/completions", "{\"model\":7,\"prompt\":\"hi\"}", 400, "model: expected a string"},
		/* what needs constrained decoding is refused, never silently ignored */
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":"
		 "{\"type\":\"json_object\"}}", 400, "constrained decoding"},
		{"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":"
		 "\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\"}", 400, "tool_choice"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long code = http("POST", cases[i].path, cases[i].body, &out);
		if (code != cases[i].status || !strstr(out, cases[i].needle) || !strstr(out, "\"error\""))
			fail_msg("case %zu (%s): got %ld %s", i, cases[i].body, code, out);
		/* in OpenAI's shape, which clients read: {"error":{"message","type","param","code"}} */
		cJSON *j = cJSON_Parse(out);
		const cJSON *e = cJSON_GetObjectItem(j, "error");
		if (!cJSON_IsObject(e) || !cJSON_IsString(cJSON_GetObjectItem(e, "message")) ||
		    !cJSON_IsString(cJSON_GetObjectItem(e, "type")) || !cJSON_GetObjectItem(e, "param") ||
		    !cJSON_GetObjectItem(e, "code"))
			fail_msg("case %zu: not an OpenAI error body: %s", i, out);
		const char *type = cJSON_GetObjectItem(e, "type")->valuestring;
		assert_string_equal(type, cases[i].status == 400 ? "invalid_request_error" : "not_found_error");
		if (strstr(cases[i].needle, "served"))
			assert_string_equal(ev_json_str(e, "code", ""), "model_not_found");
		cJSON_Delete(j);
		free(out);
	}
	/* response_format text and tool_choice auto/none are served */
	assert_int_equal(http("POST", "/v1/chat/completions",
	                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,"
	                      "\"response_format\":{\"type\":\"text\"},\"tools\":[{\"type\":\"function\",\"function\":"
	                      "{\"name\":\"f\"}}],\"tool_choice\":\"none\"}",
	                      &out),
	                 200);
	free(out);
	/* a body past --max-body is refused before the engine sees it */
	char *big = malloc(70000);
	memset(big, 'a', 69999);
	big[69999] = 0;
	char *body = ev_asprintf("{\"prompt\":\"%s\"}", big);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 413);
	free(out);
	free(body);
	free(big);
}

/* n > 1: n choices, indexed, their tokens summed in usage; with a seed the
 * same request gives the same choices (each its own seed); streamed or out
 * of range, a 400. Before, n=2 answered 415. */
static void several_choices_in_one_answer(void **st)
{
	(void)st;
	char *out = NULL;
	assert_int_equal(http("POST", "/v1/chat/completions",
	                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,\"n\":3,"
	                      "\"temperature\":1,\"seed\":11}",
	                      &out),
	                 200);
	cJSON *j = cJSON_Parse(out);
	const cJSON *ch = cJSON_GetObjectItem(j, "choices");
	assert_int_equal(cJSON_GetArraySize(ch), 3);
	long sum = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(ch, i), "index", -1), i);
		assert_non_null(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, i), "message"));
	}
	sum = (long)ev_json_num(cJSON_GetObjectItem(j, "usage"), "completion_tokens", 0);
	assert_true(sum >= 3 && sum <= 15);
	char *first = ev_json_print(ch);
	cJSON_Delete(j);
	free(out);
	/* the same seeded request: the same three choices */
	assert_int_equal(http("POST", "/v1/chat/completions",
	                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,\"n\":3,"
	                      "\"temperature\":1,\"seed\":11}",
	                      &out),
	                 200);
	j = cJSON_Parse(out);
	char *again = ev_json_print(cJSON_GetObjectItem(j, "choices"));
	assert_string_equal(first, again);
	free(first), free(again);
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"hi\",\"n\":2,\"stream\":true}", &out), 400);
	free(out);
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"hi\",\"n\":17}", &out), 400);
	free(out);
}

/* logprobs of the chosen tokens: the completions' legacy form sums to the
 * log-probability `engine generate` gives the same greedy continuation;
 * chat's content list has one entry a token, each <= 0.
 * Before, logprobs were ignored (lm-eval: KeyError 'logprobs'). */
static void logprobs_of_the_chosen_tokens(void **st)
{
	(void)st;
	char *out = NULL;
	assert_int_equal(http("POST", "/v1/completions",
	                      "{\"prompt\":\"Round trip\",\"max_tokens\":5,\"temperature\":0,\"logprobs\":0}", &out),
	                 200);
	cJSON *j = cJSON_Parse(out);
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const cJSON *vals = cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "token_logprobs");
	int n = cJSON_GetArraySize(vals);
	assert_int_equal(n, (int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "completion_tokens", -1));
	double sum = 0;
	const cJSON *v;
	cJSON_ArrayForEach(v, vals) sum += v->valuedouble;
	cJSON_Delete(j);
	free(out);
	char *gout = NULL, *gerr = NULL;
	const char *gen[] = {tu_evald(), "engine", "generate", "--model", ckpt, "--prompt", "Round trip", "--max-tokens", "5",
	                     "--json", NULL};
	assert_int_equal(tu_run(&gout, &gerr, NULL, gen), 0);
	j = cJSON_Parse(gout);
	double want = ev_json_num(j, "logprob", 1);
	int want_n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens"));
	cJSON_Delete(j);
	free(gout), free(gerr);
	assert_int_equal(n, want_n);
	assert_true(fabs(sum - want) < 1e-6 * (1 + fabs(want)));

	assert_int_equal(http("POST", "/v1/chat/completions",
	                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"logprobs\":true}",
	                      &out),
	                 200);
	j = cJSON_Parse(out);
	ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const cJSON *content = cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "content");
	assert_int_equal(cJSON_GetArraySize(content), (int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "completion_tokens", -1));
	cJSON_ArrayForEach(v, content) assert_true(ev_json_num(v, "logprob", 1) <= 0);
	cJSON_Delete(j);
	free(out);
}

/* The legacy logprobs object of choice 0. */
static const cJSON *legacy_lp(const cJSON *j)
{
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	return cJSON_GetObjectItem(ch, "logprobs");
}

/* Alternatives and echo, as lm-eval's loglikelihood reads them: the
 * prompt's own tokens scored (the first null), then the answer's; scoring
 * prompt + greedy answer with echo and max_tokens 0 gives the answer's
 * tokens the log-probabilities generation gave them, and the greedy
 * token's value is the largest of its alternatives. Chat's top_logprobs
 * come descending, the greedy token first. What makes no sense is a 400.
 * Before, logprobs N > 0, top_logprobs and echo were all 400s. */
static void alternatives_and_echo_score_prompts(void **st)
{
	(void)st;
	char *out = NULL, *tok = NULL, *terr = NULL;
	const char *tk[] = {tu_evald(), "engine", "tokenize", "--model", ckpt, "--text", "Round trip scoring",
	                    "--json", NULL};
	assert_int_equal(tu_run(&tok, &terr, NULL, tk), 0);
	cJSON *t = cJSON_Parse(tok);
	cJSON *ids = cJSON_Duplicate(cJSON_GetObjectItem(t, "ids"), 1);
	int np = cJSON_GetArraySize(ids);
	cJSON_Delete(t);
	free(tok), free(terr);
	assert_true(np >= 2);
	/* 1: generate 4 greedy tokens with 2 alternatives each */
	char *ids_s = ev_json_print(ids);
	char *body = ev_asprintf("{\"prompt\":%s,\"max_tokens\":4,\"temperature\":0,\"logprobs\":2}", ids_s);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	free(body);
	cJSON *j = cJSON_Parse(out);
	free(out);
	const cJSON *lp = legacy_lp(j);
	int ng = cJSON_GetArraySize(cJSON_GetObjectItem(lp, "token_logprobs"));
	assert_true(ng >= 1);
	double gen_lp[8];
	for (int i = 0; i < ng && i < 8; i++) {
		gen_lp[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "token_logprobs"), i)->valuedouble;
		const cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "top_logprobs"), i);
		assert_int_equal(cJSON_GetArraySize(top), 2);
		double best = -1e300;
		const cJSON *v;
		cJSON_ArrayForEach(v, top) best = v->valuedouble > best ? v->valuedouble : best;
		assert_true(best == gen_lp[i]); /* greedy: lm-eval's is_greedy holds */
	}
	cJSON_Delete(j);
	/* the answer again as text, tokenized, appended to the prompt's ids */
	body = ev_asprintf("{\"prompt\":%s,\"max_tokens\":4,\"temperature\":0}", ids_s);
	char *gen_out = NULL;
	assert_int_equal(http("POST", "/v1/completions", body, &gen_out), 200);
	free(body);
	j = cJSON_Parse(gen_out);
	free(gen_out);
	const char *answer = ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text", "");
	const char *tk2[] = {tu_evald(), "engine", "tokenize", "--model", ckpt, "--text", answer, "--json",
	                     "--no-special-tokens", NULL};
	assert_int_equal(tu_run(&tok, &terr, NULL, tk2), 0);
	cJSON_Delete(j);
	t = cJSON_Parse(tok);
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(t, "ids")) cJSON_AddItemToArray(ids, cJSON_CreateNumber(x->valuedouble));
	int na = cJSON_GetArraySize(cJSON_GetObjectItem(t, "ids"));
	cJSON_Delete(t);
	free(tok), free(terr);
	/* 2: score prompt + answer: nothing generated, every token scored */
	free(ids_s);
	ids_s = ev_json_print(ids);
	body = ev_asprintf("{\"prompt\":%s,\"max_tokens\":0,\"echo\":true,\"logprobs\":1}", ids_s);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	free(body);
	j = cJSON_Parse(out);
	free(out);
	lp = legacy_lp(j);
	const cJSON *vals = cJSON_GetObjectItem(lp, "token_logprobs"), *tops = cJSON_GetObjectItem(lp, "top_logprobs");
	assert_int_equal(cJSON_GetArraySize(vals), np + na);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lp, "tokens")), np + na);
	assert_true(cJSON_IsNull(cJSON_GetArrayItem(vals, 0)));
	assert_true(cJSON_IsNull(cJSON_GetArrayItem(tops, 0)));
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "completion_tokens", -1), 0);
	/* the answer re-tokenized may split differently; where it is the
	 * same tokens, the values are generation's */
	if (na != ng)
		print_message("the answer re-tokenized into %d tokens, generated as %d\n", na, ng);
	if (na == ng)
		for (int i = 0; i < na && i < 8; i++)
			assert_true(fabs(cJSON_GetArrayItem(vals, np + i)->valuedouble - gen_lp[i]) < 1e-6);
	for (int i = 1; i < np + na; i++) {
		assert_true(cJSON_GetArrayItem(vals, i)->valuedouble <= 0);
		assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(tops, i)), 1);
	}
	/* the echoed text of token ids is their bytes: the prompt, then the answer */
	const char *text = ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text", "");
	assert_non_null(strstr(text, "Round trip scoring"));
	cJSON_Delete(j);
	cJSON_Delete(ids);
	free(ids_s);

	/* echo of a text prompt: its text first */
	assert_int_equal(http("POST", "/v1/completions",
	                      "{\"prompt\":\"Round trip\",\"max_tokens\":3,\"temperature\":0,\"echo\":true}", &out),
	                 200);
	j = cJSON_Parse(out);
	free(out);
	text = ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text", "");
	assert_int_equal(strncmp(text, "Round trip", 10), 0);
	assert_null(legacy_lp(j)); /* no logprobs asked */
	cJSON_Delete(j);

	/* chat: top_logprobs 3, descending, the greedy token first */
	assert_int_equal(http("POST", "/v1/chat/completions",
	                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,"
	                      "\"temperature\":0,\"logprobs\":true,\"top_logprobs\":3}",
	                      &out),
	                 200);
	j = cJSON_Parse(out);
	free(out);
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const cJSON *e;
	int k = 0;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "logprobs"), "content"))
	{
		const cJSON *top = cJSON_GetObjectItem(e, "top_logprobs");
		assert_int_equal(cJSON_GetArraySize(top), 3);
		assert_string_equal(ev_json_str(cJSON_GetArrayItem(top, 0), "token", "?"), ev_json_str(e, "token", "!"));
		assert_true(ev_json_num(cJSON_GetArrayItem(top, 0), "logprob", 1) == ev_json_num(e, "logprob", 2));
		for (int i = 1; i < 3; i++)
			assert_true(ev_json_num(cJSON_GetArrayItem(top, i), "logprob", 1) <=
			            ev_json_num(cJSON_GetArrayItem(top, i - 1), "logprob", 0));
		k++;
	}
	assert_true(k >= 1);
	cJSON_Delete(j);

	static const char *const refused[] = {
		"/v1/completions", "{\"prompt\":\"hi\",\"logprobs\":21}",
		"/v1/completions", "{\"prompt\":\"hi\",\"logprobs\":true}",
		"/v1/completions", "{\"prompt\":\"hi\",\"echo\":true,\"stream\":true}",
		"/v1/completions", "{\"prompt\":\"hi\",\"logprobs\":0,\"stream\":true}",
		"/v1/completions", "{\"prompt\":\"hi\",\"max_tokens\":0}",
		"/v1/completions", "{\"prompt\":\"hi\",\"top_logprobs\":2}",
		"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"echo\":true}",
		"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_logprobs\":2}",
		"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"logprobs\":1}",
		"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}",
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i += 2) {
		assert_int_equal(http("POST", refused[i], refused[i + 1], &out), 400);
		free(out);
	}
}

/* The text of a chat completion's first choice, its finish_reason and
 * prompt tokens. */
static char *chat_answer(const char *body, char fin[16], int *prompt_tokens)
{
	char *out = NULL;
	assert_int_equal(http("POST", "/v1/chat/completions", body, &out), 200);
	cJSON *j = cJSON_Parse(out);
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	char *text = ev_strdup(ev_json_str(cJSON_GetObjectItem(ch, "message"), "content", ""));
	snprintf(fin, 16, "%s", ev_json_str(ch, "finish_reason", ""));
	*prompt_tokens = (int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "prompt_tokens", -1);
	cJSON_Delete(j);
	free(out);
	return text;
}

/* POST /v1/responses (what Inspect's openai provider sends): the same
 * answer as the chat request it stands for, instructions and a replayed
 * function call with its output included; status incomplete when cut by
 * max_output_tokens; what it cannot serve is a 400 naming the field.
 * Before, /v1/responses was a 404. */
static void responses_answer_as_chat_does(void **st)
{
	(void)st;
	char fin[16];
	int pt = 0;
	char *want = chat_answer("{\"messages\":[{\"role\":\"user\",\"content\":\"Round trip\"}],\"max_tokens\":5,"
	                         "\"temperature\":0}", fin, &pt);
	char *out = NULL;
	assert_int_equal(http("POST", "/v1/responses",
	                      "{\"input\":\"Round trip\",\"max_output_tokens\":5,\"temperature\":0}", &out), 200);
	cJSON *j = cJSON_Parse(out);
	assert_string_equal(ev_json_str(j, "object", ""), "response");
	assert_string_equal(ev_json_str(j, "status", ""), strcmp(fin, "length") ? "completed" : "incomplete");
	const cJSON *item = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "output"), 0);
	assert_string_equal(ev_json_str(item, "type", ""), "message");
	const cJSON *part = cJSON_GetArrayItem(cJSON_GetObjectItem(item, "content"), 0);
	assert_string_equal(ev_json_str(part, "type", ""), "output_text");
	assert_string_equal(ev_json_str(part, "text", "?"), want);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "input_tokens", -2), pt);
	cJSON_Delete(j);
	free(out);
	free(want);

	/* a tool round trip: the chat form it maps to renders the same prompt */
	want = chat_answer(
		"{\"messages\":[{\"role\":\"system\",\"content\":\"Use tools.\"},{\"role\":\"user\",\"content\":"
		"\"Time?\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
		"\"function\",\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
		"\"tool_call_id\":\"c1\",\"content\":\"12:00\"}],\"tools\":[{\"type\":\"function\",\"function\":"
		"{\"name\":\"now\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}],\"max_tokens\":6,"
		"\"temperature\":0}",
		fin, &pt);
	assert_int_equal(http("POST", "/v1/responses",
	                      "{\"instructions\":\"Use tools.\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
	                      "\"input_text\",\"text\":\"Time?\"}]},{\"type\":\"function_call\",\"call_id\":\"c1\","
	                      "\"name\":\"now\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\",\"call_id\":"
	                      "\"c1\",\"output\":\"12:00\"}],\"tools\":[{\"type\":\"function\",\"name\":\"now\","
	                      "\"parameters\":{\"type\":\"object\",\"properties\":{}}}],\"max_output_tokens\":6,"
	                      "\"temperature\":0}",
	                      &out),
	                 200);
	j = cJSON_Parse(out);
	const cJSON *it;
	char *got = NULL;
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "output")) if (!strcmp(ev_json_str(it, "type", ""), "message")) got =
		ev_strdup(ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(it, "content"), 0), "text", ""));
	assert_string_equal(got ? got : "", want);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "input_tokens", -2), pt);
	free(got);
	cJSON_Delete(j);
	free(out);
	free(want);

	static const char *const refused[][2] = {
		{"{\"input\":\"hi\",\"stream\":true}", "stream"},
		{"{\"input\":\"hi\",\"previous_response_id\":\"resp_1\"}", "previous_response_id"},
		{"{\"input\":\"hi\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]"},
		{"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"x\"}]}]}",
		 "input[0].content[0]"},
		{"{\"input\":\"hi\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}", "text.format"},
		{"{\"input\":[]}", "input"},
		{"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", "call_id"},
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		long code = http("POST", "/v1/responses", refused[i][0], &out);
		if ((code != 400 && code != 415) || !strstr(out, refused[i][1]))
			fail_msg("%s: HTTP %ld %s (want 400 naming %s)", refused[i][0], code, out, refused[i][1]);
		free(out);
	}
}

/* /v1/completions prompts as token ids, and several prompts at once (one
 * answer each, in order, usage over all): token ids give the text prompt's
 * greedy answer; an id outside the vocabulary is a 400. Before, anything
 * but one string was a 400. */
static void token_and_list_prompts(void **st)
{
	(void)st;
	char *tok = NULL, *terr = NULL;
	const char *tk[] = {tu_evald(), "engine", "tokenize", "--model", ckpt, "--text", "Round trip", "--json", NULL};
	assert_int_equal(tu_run(&tok, &terr, NULL, tk), 0);
	cJSON *t = cJSON_Parse(tok);
	char *ids = ev_json_print(cJSON_GetObjectItem(t, "ids"));
	int n_ids = cJSON_GetArraySize(cJSON_GetObjectItem(t, "ids"));
	cJSON_Delete(t);
	free(tok), free(terr);
	char *out = NULL;
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":\"Round trip\",\"max_tokens\":4,\"temperature\":0}", &out),
	                 200);
	cJSON *j = cJSON_Parse(out);
	char *want = ev_strdup(ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text", "?"));
	cJSON_Delete(j);
	free(out);
	char *body = ev_asprintf("{\"prompt\":%s,\"max_tokens\":4,\"temperature\":0}", ids);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	j = cJSON_Parse(out);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text", ""), want);
	assert_int_equal((int)ev_json_num(cJSON_GetObjectItem(j, "usage"), "prompt_tokens", 0), n_ids);
	cJSON_Delete(j);
	free(out), free(body);
	body = ev_asprintf("{\"prompt\":[\"Round trip\",%s,\"other words\"],\"max_tokens\":4,\"temperature\":0}", ids);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	j = cJSON_Parse(out);
	const cJSON *ch = cJSON_GetObjectItem(j, "choices");
	assert_int_equal(cJSON_GetArraySize(ch), 3);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ch, 0), "text", ""), want);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(ch, 1), "text", ""), want);
	assert_int_equal((int)ev_json_num(cJSON_GetArrayItem(ch, 2), "index", -1), 2);
	assert_true(ev_json_num(cJSON_GetObjectItem(j, "usage"), "prompt_tokens", 0) > 2 * n_ids);
	cJSON_Delete(j);
	free(out), free(body);
	assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":[99999999],\"max_tokens\":2}", &out), 400);
	assert_non_null(strstr(out, "not in the vocabulary"));
	free(out);
	free(want), free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(run_over_http_equals_run_in_process),
		cmocka_unit_test(streamed_chunks_concatenate_to_the_whole_answer),
		cmocka_unit_test(models_and_errors_answer_json),
		cmocka_unit_test(several_choices_in_one_answer),
		cmocka_unit_test(logprobs_of_the_chosen_tokens),
		cmocka_unit_test(alternatives_and_echo_score_prompts),
		cmocka_unit_test(responses_answer_as_chat_does),
		cmocka_unit_test(token_and_list_prompts),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
