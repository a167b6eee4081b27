/* The engine backend under the runner: a suite whose targets are the
 * model's own greedy answers (computed first, one request at a time,
 * through eng_chat_render + eng_generate + the streaming detokenizer)
 * scores 1.0 when run batched through the backend; stop strings cut the
 * text; max_tokens gives finish_reason "length"; bad requests become
 * error completions, not crashes. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "runners/runners.h"
#include "scoring/scoring.h"
#include "testutil.h"

#define NS 10
#define MAXTOK 12

static char *dir;
static char expect[NS][4096];
static char inputs[NS][128];
static int n_usable;

/* Greedy answer of one user message, alone, as the backend should give it. */
static void solo_answer(eng_model *m, eng_tokenizer *tok, const char *input, int max_tokens, char *out, size_t cap,
                        int *n_tokens)
{
	eng_chat_msg msg = {"user", input, NULL, NULL, NULL};
	char *prompt = NULL;
	size_t plen = 0;
	assert_int_equal(eng_chat_render(&prompt, &plen, ENG_CHAT_LLAMA3, &msg, 1, NULL, true), 0);
	int32_t *ids = NULL;
	size_t n = 0;
	assert_int_equal(eng_tokenize(tok, prompt, plen, true, &ids, &n), 0);
	eng_model_info in;
	eng_model_get_info(m, &in);
	int32_t stop[32];
	int ns = (int)eng_chat_stop_ids(tok, ENG_CHAT_LLAMA3, stop, 16);
	for (int i = 0; i < in.n_eos; i++) {
		bool seen = false;
		for (int k = 0; k < ns; k++)
			seen |= stop[k] == in.eos_ids[i];
		if (!seen)
			stop[ns++] = in.eos_ids[i];
	}
	eng_generate_options g = ENG_GENERATE_OPTIONS_INIT;
	g.max_tokens = max_tokens;
	g.stop_ids = stop;
	g.n_stop = ns;
	int32_t gen[256];
	int ng = 0;
	eng_stop_reason why;
	eng_seq *s = NULL;
	assert_int_equal(eng_seq_new(&s, m), 0);
	assert_int_equal(eng_generate(s, ids, (int)n, &g, NULL, NULL, gen, 256, &ng, &why), 0);
	eng_detok_stream *ds = NULL;
	ev_buf b = EV_BUF_INIT(1 << 20);
	assert_int_equal(eng_detok_stream_new(&ds, tok, true), 0);
	for (int i = 0; i < ng; i++)
		assert_int_equal(eng_detok_stream_push(ds, gen[i], &b), 0);
	assert_int_equal(eng_detok_stream_flush(ds, &b), 0);
	snprintf(out, cap, "%s", b.data ? b.data : "");
	if (n_tokens)
		*n_tokens = ng;
	ev_buf_free(&b);
	eng_detok_stream_free(ds);
	eng_seq_free(s);
	free(ids);
	free(prompt);
}

static bool usable(const char *t)
{
	size_t alnum = 0;
	for (const char *p = t; *p; p++)
		alnum += isalnum((unsigned char)*p) != 0;
	return alnum >= 2 && !strchr(t, '"') && !strchr(t, '\\');
}

static int setup(void **st)
{
	(void)st;
	dir = tu_tmpdir("backend-engine");
	char *ck = tu_path(dir, "ckpt");
	eng_mkmodel_sizes z = ENG_MKMODEL_SIZES_INIT;
	z.vocab = 600;
	z.max_position = 1024;
	if (eng_mkmodel(ck, "llama", &z, "f32", 11))
		fail_msg("mkmodel: %s", ev_error_msg());
	eng_model *m = NULL;
	eng_tokenizer *tok = NULL;
	eng_model_options mo = ENG_MODEL_OPTIONS_INIT;
	mo.threads = 2;
	assert_int_equal(eng_model_load(&m, ck, &mo), 0);
	assert_int_equal(eng_tokenizer_load(&tok, ck), 0);
	for (int i = 0; n_usable < NS && i < 200; i++) {
		snprintf(inputs[n_usable], sizeof inputs[0], "Question %d: tell me about the number %d%s", i, i * 7,
		         i % 3 ? " and the sea" : "");
		solo_answer(m, tok, inputs[n_usable], MAXTOK, expect[n_usable], sizeof expect[0], NULL);
		if (usable(expect[n_usable]))
			n_usable++;
	}
	assert_true(n_usable >= 6);
	eng_tokenizer_free(tok);
	eng_model_free(m);
	free(ck);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	free(dir);
	return 0;
}

typedef struct {
	int n;
	double sum;
	char finish[NS][16];
} sink;

static int on_result(void *ctx, const ev_result *r)
{
	sink *s = ctx;
	s->n++;
	s->sum += r->score;
	if (r->score < 1)
		print_message("sample %s: %s (%s) got [%s]\n", r->sample_id, r->reason, r->detail ? r->detail : "",
		              r->response ? r->response : "(null)");
	int i = atoi(r->sample_id + 1);
	if (i >= 0 && i < NS)
		snprintf(s->finish[i], sizeof s->finish[i], "%s", r->finish_reason ? r->finish_reason : "");
	return 0;
}

static ev_suite *write_suite(const char *name, const char *gen_json, bool wrong_last)
{
	char *sdir = tu_path(dir, name);
	char *cmd = ev_asprintf("mkdir -p '%s'", sdir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	char *sj = ev_asprintf("{\"name\":\"%s\",\"version\":\"1\",\"kind\":\"qa\",\"generation\":%s,"
	                       "\"checker\":{\"type\":\"exact\"}}",
	                       name, gen_json);
	free(tu_write(sdir, "suite.json", sj));
	free(sj);
	ev_buf b = EV_BUF_INIT(1 << 20);
	for (int i = 0; i < n_usable; i++) {
		cJSON *o = cJSON_CreateObject();
		char id[16];
		snprintf(id, sizeof id, "s%d", i);
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "input", inputs[i]);
		cJSON_AddStringToObject(o, "target", wrong_last && i == n_usable - 1 ? "certainly not this" : expect[i]);
		char *line = ev_json_print(o);
		ev_buf_printf(&b, "%s\n", line);
		free(line);
		cJSON_Delete(o);
	}
	free(tu_write(sdir, "samples.jsonl", b.data));
	ev_buf_free(&b);
	ev_suite *s = NULL;
	if (ev_suite_load(&s, sdir, NULL))
		fail_msg("suite: %s", ev_error_msg());
	free(sdir);
	return s;
}

static void run_suite(ev_backend *be, ev_suite *s, sink *out)
{
	ev_checker *ck = NULL;
	assert_int_equal(ev_checker_new(&ck, s->checker_json), 0);
	ev_run_plan p;
	memset(&p, 0, sizeof p);
	p.suite = s;
	p.checker = ck;
	p.model = "m";
	p.epochs = 1;
	p.shard_n = 1;
	p.on_result = on_result;
	p.ctx = out;
	ev_run_counts c;
	if (ev_runner_run(be, &p, &c))
		fail_msg("run: %s", ev_error_msg());
	assert_int_equal(c.errors, 0);
	ev_checker_free(ck);
}

static ev_backend *backend(int max_batch)
{
	char *ck = tu_path(dir, "ckpt");
	ev_engine_backend_options o = EV_ENGINE_BACKEND_OPTIONS_INIT;
	o.model_dir = ck;
	o.threads = 2;
	o.max_batch = max_batch;
	ev_backend *b = NULL;
	if (ev_backend_engine_new(&b, &o))
		fail_msg("backend: %s", ev_error_msg());
	assert_string_equal(ev_backend_engine_model_name(b), "ckpt");
	free(ck);
	return b;
}

static void suite_of_own_greedy_answers_scores_one(void **st)
{
	(void)st;
	ev_suite *s = write_suite("own", "{\"temperature\":0,\"max_tokens\":12}", false);
	ev_backend *be = backend(4);
	sink out = {0};
	run_suite(be, s, &out);
	assert_int_equal(out.n, n_usable);
	assert_true(out.sum == (double)n_usable);
	/* and the check can fail: one wrong target costs exactly one point */
	ev_suite *w = write_suite("own-wrong", "{\"temperature\":0,\"max_tokens\":12}", true);
	sink out2 = {0};
	run_suite(be, w, &out2);
	assert_true(out2.sum == (double)(n_usable - 1));
	ev_backend_free(be);
	ev_suite_free(s);
	ev_suite_free(w);
}

static void stop_strings_and_length_set_text_and_finish_reason(void **st)
{
	(void)st;
	ev_backend *be = backend(3);
	ev_part part = {.kind = EV_PART_TEXT, .text = inputs[0]};
	ev_message msg = {"user", &part, 1, NULL, NULL, NULL};
	/* a stop string taken from the middle of the known answer */
	size_t L = strlen(expect[0]);
	char stopstr[8];
	size_t at = L / 2;
	snprintf(stopstr, sizeof stopstr, "%.3s", expect[0] + at);
	char *stops[] = {stopstr};
	ev_request rq;
	memset(&rq, 0, sizeof rq);
	rq.messages = &msg;
	rq.n_messages = 1;
	rq.gen = (ev_gen)EV_GEN_INIT;
	rq.gen.temperature = 0;
	rq.gen.max_tokens = MAXTOK;
	rq.gen.stop = stops;
	rq.gen.n_stop = 1;
	rq.cookie = (void *)1;
	assert_int_equal(ev_backend_submit(be, &rq), 0);
	ev_request r2 = rq;
	r2.gen.stop = NULL;
	r2.gen.n_stop = 0;
	r2.gen.max_tokens = 3;
	r2.cookie = (void *)2;
	assert_int_equal(ev_backend_submit(be, &r2), 0);
	ev_request r3 = rq;
	r3.tools_json = "{not json";
	r3.cookie = (void *)3;
	assert_int_equal(ev_backend_submit(be, &r3), 0);
	assert_int_equal(ev_backend_pending(be), 3);
	int got = 0;
	while (got < 3) {
		ev_completion c[3];
		int n = ev_backend_poll(be, c, 3, 5.0);
		assert_true(n > 0);
		for (int i = 0; i < n; i++, got++) {
			if (c[i].cookie == (void *)1) {
				assert_int_equal(c[i].status, EV_COMPLETION_OK);
				const char *first = strstr(expect[0], stopstr);
				assert_non_null(first);
				assert_int_equal(strlen(c[i].text), (size_t)(first - expect[0]));
				assert_memory_equal(c[i].text, expect[0], strlen(c[i].text));
				assert_string_equal(c[i].finish_reason, "stop");
				/* raw_json parses back into the same completion */
				ev_completion back;
				memset(&back, 0, sizeof back);
				assert_int_equal(ev_completion_from_json(&back, c[i].raw_json, strlen(c[i].raw_json)), 0);
				assert_string_equal(back.text, c[i].text);
				ev_completion_clear(&back);
			} else if (c[i].cookie == (void *)2) {
				assert_int_equal(c[i].status, EV_COMPLETION_OK);
				assert_int_equal(c[i].completion_tokens, 3);
				assert_string_equal(c[i].finish_reason, "length");
				assert_true(c[i].prompt_tokens > 5);
				assert_true(c[i].latency_s > 0);
			} else {
				assert_int_equal(c[i].status, EV_COMPLETION_ERROR);
				assert_non_null(strstr(c[i].error, "tools"));
			}
			ev_completion_clear(&c[i]);
		}
	}
	assert_int_equal(ev_backend_pending(be), 0);
	ev_backend_free(be);
}

static void bad_options_fail_with_a_message(void **st)
{
	(void)st;
	ev_backend *b = NULL;
	ev_engine_backend_options o = EV_ENGINE_BACKEND_OPTIONS_INIT;
	assert_int_equal(ev_backend_engine_new(&b, &o), EV_E_INVALID);
	o.model_dir = "/nonexistent/ckpt";
	assert_true(ev_backend_engine_new(&b, &o) < 0);
	assert_null(b);
	char *ck = tu_path(dir, "ckpt");
	o.model_dir = ck;
	o.chat_template = "jinja-of-the-week";
	assert_int_equal(ev_backend_engine_new(&b, &o), EV_E_INVALID);
	o.chat_template = NULL;
	/* Engine settings the checkpoint cannot take are refused at load,
	 * naming them. */
	eng_model_options eo = ENG_MODEL_OPTIONS_INIT;
	eo.attention.kind = ENG_ATTN_MSA;
	eo.attention.n_dense_layers = 1;
	eo.attention.dense_layers[0] = 999;
	o.engine = &eo;
	assert_int_equal(ev_backend_engine_new(&b, &o), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "dense_layers"));
	assert_null(b);
	free(ck);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(suite_of_own_greedy_answers_scores_one),
		cmocka_unit_test(stop_strings_and_length_set_text_and_finish_reason),
		cmocka_unit_test(bad_options_fail_with_a_message),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
