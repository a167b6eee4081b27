/* The agent loop against the fixture server, scripted per turn with
 * tool_calls rows: a file written in turn 1 and a final answer in turn 2
 * score 1; a wrong end state or a missing fact scores 0 naming what
 * differed; a model that never stops calling tools hits the turn limit;
 * <tool_call> text from a backend without native tools is executed too;
 * the runner sends environment samples through the loop. */
#include "fixture_util.h"

#include <stdio.h>

static tu_server srv;
static ev_suite *suite;

#define WRITE_CALL(id, text)                                                                                      \
	"[{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"write_file\",\"arguments\":"                \
	"\"{\\\"path\\\":\\\"/notes.txt\\\",\\\"content\\\":\\\"" text "\\\"}\"}}]"

static const char *table =
	"{\"match\":\"NOTE-TASK\",\"turn\":1,\"tool_calls\":" WRITE_CALL("c1", "buy milk") "}\n"
	"{\"match\":\"NOTE-TASK\",\"turn\":2,\"reply\":\"I saved the note: buy milk.\"}\n"
	"{\"match\":\"WRONG-TASK\",\"turn\":1,\"tool_calls\":" WRITE_CALL("c1", "buy bread") "}\n"
	"{\"match\":\"WRONG-TASK\",\"turn\":2,\"reply\":\"Saved.\"}\n"
	"{\"match\":\"LOOP-TASK\",\"tool_calls\":[{\"id\":\"l\",\"type\":\"function\",\"function\":"
	"{\"name\":\"list_dir\",\"arguments\":\"{}\"}}]}\n"
	"{\"match\":\"TEXT-TASK\",\"turn\":1,\"reply\":\"<tool_call>{\\\"name\\\":\\\"set\\\",\\\"arguments\\\":"
	"{\\\"key\\\":\\\"color\\\",\\\"value\\\":\\\"blue\\\"}}</tool_call>\"}\n"
	"{\"match\":\"TEXT-TASK\",\"turn\":2,\"reply\":\"Done, color is now BLUE.\"}\n";

#define FS "\"environment\":{\"type\":\"fs\",\"files\":{\"/readme.txt\":\"hi\"}}"
#define WANT_MILK "\"expected_state\":{\"fs\":{\"files\":{\"/notes.txt\":\"buy milk\",\"/readme.txt\":\"hi\"}}}"

static const char *samples =
	"{\"id\":\"note\",\"input\":\"NOTE-TASK: save 'buy milk' in /notes.txt\",\"metadata\":{" FS "},"
	"\"tests\":{" WANT_MILK ",\"required_facts\":[\"Buy Milk\"]}}\n"
	"{\"id\":\"wrong\",\"input\":\"WRONG-TASK: save 'buy milk' in /notes.txt\",\"metadata\":{" FS "},"
	"\"tests\":{" WANT_MILK "}}\n"
	"{\"id\":\"fact\",\"input\":\"NOTE-TASK again, and name the shop\",\"metadata\":{" FS "},"
	"\"tests\":{" WANT_MILK ",\"required_facts\":[\"milk\",\"corner shop\"]}}\n"
	"{\"id\":\"loop\",\"input\":\"LOOP-TASK\",\"metadata\":{" FS "},\"tests\":{}}\n"
	"{\"id\":\"text\",\"input\":\"TEXT-TASK\",\"metadata\":{\"environment\":{\"type\":\"kv\"}},"
	"\"tests\":{\"expected_state\":{\"kv\":{\"data\":{\"color\":\"blue\"}}},\"required_facts\":[\"blue\"]}}\n";

static int setup(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("agent");
	char *tpath = tu_write(dir, "table.jsonl", table);
	char *sdir = tu_path(dir, "suite");
	char *cmd = ev_asprintf("mkdir -p '%s'", sdir);
	assert_int_equal(system(cmd), 0);
	free(tu_write(sdir, "suite.json",
	              "{\"name\":\"agent-test\",\"kind\":\"tool-use-multiturn\",\"checker\":{\"type\":\"includes\"},"
	              "\"generation\":{\"temperature\":0}}"));
	free(tu_write(sdir, "samples.jsonl", samples));
	if (ev_suite_load(&suite, sdir, NULL))
		fail_msg("load: %s", ev_error_msg());
	const char *args[] = {"--table", tpath, NULL};
	fu_start(&srv, args);
	free(cmd);
	free(sdir);
	free(tpath);
	free(dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_server_stop(&srv);
	ev_suite_free(suite);
	return 0;
}

static ev_backend *backend(void)
{
	static const char *urls[1];
	urls[0] = srv.url;
	ev_openai_options o = EV_OPENAI_OPTIONS_INIT;
	o.base_urls = urls;
	o.n_urls = 1;
	o.timeout_s = 10;
	o.max_retries = 0;
	ev_backend *b = NULL;
	assert_int_equal(ev_backend_openai_new(&b, &o), 0);
	return b;
}

static const ev_sample *sample(const char *id)
{
	for (size_t i = 0; i < suite->n_samples; i++)
		if (!strcmp(suite->samples[i].id, id))
			return &suite->samples[i];
	fail_msg("no sample %s", id);
	return NULL;
}

static void run_one(const char *id, int max_turns, ev_agent_result *r)
{
	ev_backend *b = backend();
	ev_agent_options o = EV_AGENT_OPTIONS_INIT;
	o.model = "fixture";
	o.max_turns = max_turns;
	if (ev_agent_run(b, sample(id), &suite->gen, &o, r))
		fail_msg("agent run %s: %s", id, ev_error_msg());
	ev_backend_free(b);
}

static void agent_write_then_answer_scores_one(void **state)
{
	(void)state;
	long before = fu_requests(&srv);
	ev_agent_result r;
	run_one("note", 10, &r);
	assert_false(r.failed);
	assert_int_equal(r.turns, 2);
	assert_int_equal(r.n_tool_calls, 1);
	assert_int_equal(fu_requests(&srv) - before, 2);
	if (r.score != 1.0)
		fail_msg("score %g: %s", r.score, r.detail ? r.detail : "");
	assert_int_equal(r.reason, EV_REASON_NONE);
	assert_string_equal(r.final_text, "I saved the note: buy milk.");
	assert_non_null(strstr(r.state_json, "\"/notes.txt\":\"buy milk\""));
	assert_non_null(strstr(r.tool_calls_json, "\"name\":\"write_file\""));
	assert_non_null(r.first_request_json);
	assert_non_null(strstr(r.first_request_json, "\"name\":\"write_file\"")); /* the env's tools were sent */
	ev_agent_result_clear(&r);
}

static void agent_wrong_state_scores_zero_naming_the_difference(void **state)
{
	(void)state;
	ev_agent_result r;
	run_one("wrong", 10, &r);
	assert_false(r.failed);
	assert_true(r.score == 0.0);
	assert_int_equal(r.reason, EV_REASON_WRONG_ANSWER);
	assert_string_equal(r.detail, "state: fs.files./notes.txt: expected \"buy milk\", got \"buy bread\"");
	ev_agent_result_clear(&r);
	run_one("fact", 10, &r);
	assert_true(r.score == 0.0);
	assert_string_equal(r.detail, "missing fact \"corner shop\"");
	ev_agent_result_clear(&r);
}

static void agent_stops_at_the_turn_limit(void **state)
{
	(void)state;
	long before = fu_requests(&srv);
	ev_agent_result r;
	run_one("loop", 3, &r);
	assert_false(r.failed);
	assert_int_equal(r.turns, 3);
	assert_int_equal(r.n_tool_calls, 3);
	assert_int_equal(fu_requests(&srv) - before, 3);
	assert_true(r.score == 0.0);
	assert_int_equal(r.reason, EV_REASON_NO_ANSWER);
	assert_string_equal(r.detail, "turn_limit: 3 turns without a final answer");
	assert_null(r.final_text);
	ev_agent_result_clear(&r);
}

static void agent_executes_tool_calls_written_as_text(void **state)
{
	(void)state;
	ev_agent_result r;
	run_one("text", 10, &r);
	assert_int_equal(r.turns, 2);
	assert_int_equal(r.n_tool_calls, 1);
	if (r.score != 1.0)
		fail_msg("score %g: %s (state %s)", r.score, r.detail ? r.detail : "", r.state_json);
	ev_agent_result_clear(&r);
}

typedef struct {
	char ids[8][32];
	double scores[8];
	char details[8][256];
	int n;
} sink;

static int on_result(void *ctx, const ev_result *res)
{
	sink *k = ctx;
	if (k->n < 8) {
		snprintf(k->ids[k->n], 32, "%s", res->sample_id);
		k->scores[k->n] = res->score;
		snprintf(k->details[k->n], 256, "%s", res->detail ? res->detail : "");
		k->n++;
	}
	return 0;
}

static void runner_sends_environment_samples_through_the_agent_loop(void **state)
{
	(void)state;
	ev_backend *b = backend();
	sink k;
	memset(&k, 0, sizeof k);
	ev_run_plan p;
	memset(&p, 0, sizeof p);
	p.suite = suite;
	p.model = "fixture";
	p.epochs = 1;
	p.shard_n = 1;
	p.on_result = on_result;
	p.ctx = &k;
	ev_run_counts c;
	if (ev_runner_run(b, &p, &c))
		fail_msg("runner: %s", ev_error_msg());
	ev_backend_free(b);
	assert_int_equal(c.total, 5);
	assert_int_equal(c.done, 5);
	assert_int_equal(c.errors, 0);
	assert_int_equal(k.n, 5);
	/* note and text pass; wrong, fact and loop (10 turns) do not. */
	assert_true(c.score_sum == 2.0);
	for (int i = 0; i < k.n; i++)
		if (!strcmp(k.ids[i], "loop"))
			assert_string_equal(k.details[i], "turn_limit: 10 turns without a final answer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(agent_write_then_answer_scores_one),
		cmocka_unit_test(agent_wrong_state_scores_zero_naming_the_difference),
		cmocka_unit_test(agent_stops_at_the_turn_limit),
		cmocka_unit_test(agent_executes_tool_calls_written_as_text),
		cmocka_unit_test(runner_sends_environment_samples_through_the_agent_loop),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
