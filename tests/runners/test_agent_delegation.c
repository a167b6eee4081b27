/* Multi-agent samples: an orchestrator whose only tools are ask_<worker>
 * delegates to workers that hold the environment's tools. Scripted on the
 * fixture server: the orchestrator asks "records" for two values (two kv
 * calls in its conversation), then "calculator" for their quotient, then
 * answers; the answer passes, and the accounting names each agent's turns,
 * tool calls and delegations, its tokens summing to the sample's. An
 * orchestrator that calls a worker's tool itself is refused (the store is
 * untouched); a worker that never answers comes back to the orchestrator
 * as an error; a worker given its own model ("model": 2) is played by the
 * router's second server, every one of its requests there; bad agent
 * specs are refused naming the field. */
#include "fixture_util.h"

#include <stdio.h>

static tu_server srv, srv2;
static ev_suite *suite;

#define CALL(id, name, args) "{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":" args "}}"

static const char *table =
	"{\"match\":\"DELEG-TASK\",\"turn\":1,\"tool_calls\":[" CALL("o1", "ask_records", "\"{\\\"task\\\":\\\"RECORDS-JOB stock and usage of bolts\\\"}\"") "]}\n"
	"{\"match\":\"RECORDS-JOB\",\"turn\":1,\"tool_calls\":[" CALL("r1", "get", "\"{\\\"key\\\":\\\"stock:bolts\\\"}\"") "," CALL("r2", "get", "\"{\\\"key\\\":\\\"usage:bolts\\\"}\"") "]}\n"
	"{\"match\":\"RECORDS-JOB\",\"turn\":2,\"reply\":\"stock:bolts is 1260, usage:bolts is 45\"}\n"
	"{\"match\":\"DELEG-TASK\",\"turn\":2,\"tool_calls\":[" CALL("o2", "ask_calculator", "\"{\\\"task\\\":\\\"CALC-JOB 1260/45\\\"}\"") "]}\n"
	"{\"match\":\"CALC-JOB\",\"turn\":1,\"tool_calls\":[" CALL("c1", "calculate", "\"{\\\"expression\\\":\\\"1260/45\\\"}\"") "]}\n"
	"{\"match\":\"CALC-JOB\",\"turn\":2,\"reply\":\"28\"}\n"
	"{\"match\":\"DELEG-TASK\",\"turn\":3,\"reply\":\"The bolts last 28 days.\"}\n"
	"{\"match\":\"CHEAT-TASK\",\"turn\":1,\"tool_calls\":[" CALL("x1", "set", "\"{\\\"key\\\":\\\"hacked\\\",\\\"value\\\":\\\"1\\\"}\"") "]}\n"
	"{\"match\":\"CHEAT-TASK\",\"turn\":2,\"reply\":\"Done.\"}\n"
	"{\"match\":\"STUCK-TASK\",\"turn\":1,\"tool_calls\":[" CALL("s1", "ask_records", "\"{\\\"task\\\":\\\"LOOP-JOB\\\"}\"") "]}\n"
	"{\"match\":\"LOOP-JOB\",\"tool_calls\":[" CALL("l1", "list_keys", "\"{}\"") "]}\n"
	"{\"match\":\"STUCK-TASK\",\"turn\":2,\"reply\":\"The records agent could not say.\"}\n";

#define ENV "\"environment\":[{\"type\":\"kv\",\"data\":{\"stock:bolts\":\"1260\",\"usage:bolts\":\"45\"}},{\"type\":\"calculator\"}]"
#define RECORDS(extra) "{\"name\":\"records\",\"description\":\"reads the store\",\"system\":\"You read records.\",\"tools\":[\"get\",\"set\",\"list_keys\"]" extra "}"
#define CALC(extra) "{\"name\":\"calculator\",\"description\":\"does sums\",\"tools\":[\"calculate\"]" extra "}"

static const char *samples =
	"{\"id\":\"deleg\",\"input\":\"DELEG-TASK: how many days do the bolts last?\",\"metadata\":{" ENV
	",\"agents\":{\"workers\":[" RECORDS("") "," CALC("") "]}},\"tests\":{\"required_facts\":[\"28\"]}}\n"
	"{\"id\":\"cheat\",\"input\":\"CHEAT-TASK\",\"metadata\":{" ENV ",\"agents\":{\"workers\":[" RECORDS("") "]}},"
	"\"tests\":{\"expected_state\":{\"kv\":{\"data\":{\"hacked\":\"1\"}}}}}\n"
	"{\"id\":\"stuck\",\"input\":\"STUCK-TASK\",\"metadata\":{" ENV ",\"agents\":{\"workers\":[" RECORDS(",\"max_turns\":3") "]}},"
	"\"tests\":{\"required_facts\":[\"could not\"]}}\n"
	"{\"id\":\"routed\",\"input\":\"DELEG-TASK again\",\"metadata\":{" ENV
	",\"agents\":{\"workers\":[" RECORDS(",\"model\":2") "," CALC("") "]}},\"tests\":{\"required_facts\":[\"28\"]}}\n"
	"{\"id\":\"bad-tool\",\"input\":\"x\",\"metadata\":{" ENV ",\"agents\":{\"workers\":[{\"name\":\"w\",\"tools\":[\"rm_rf\"]}]}}}\n"
	"{\"id\":\"bad-name\",\"input\":\"x\",\"metadata\":{" ENV ",\"agents\":{\"workers\":[{\"name\":\"Bad Name\"}]}}}\n"
	"{\"id\":\"no-workers\",\"input\":\"x\",\"metadata\":{" ENV ",\"agents\":{\"workers\":[]}}}\n";

static int setup(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("agent-deleg");
	char *tpath = tu_write(dir, "table.jsonl", table);
	char *sdir = tu_path(dir, "suite");
	char *cmd = ev_asprintf("mkdir -p '%s'", sdir);
	assert_int_equal(system(cmd), 0);
	free(tu_write(sdir, "suite.json",
	              "{\"name\":\"deleg-test\",\"kind\":\"tool-use-multiturn\",\"checker\":{\"type\":\"includes\"},"
	              "\"generation\":{\"temperature\":0}}"));
	free(tu_write(sdir, "samples.jsonl", samples));
	if (ev_suite_load(&suite, sdir, NULL))
		fail_msg("load: %s", ev_error_msg());
	const char *args[] = {"--table", tpath, NULL};
	fu_start(&srv, args);
	fu_start(&srv2, args);
	free(cmd), free(sdir), free(tpath), free(dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_server_stop(&srv);
	tu_server_stop(&srv2);
	ev_suite_free(suite);
	return 0;
}

static ev_backend *backend_of(const tu_server *s)
{
	const char *urls[1] = {s->url};
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

static int run_on(ev_backend *b, const char *id, ev_agent_result *r)
{
	ev_agent_options o = EV_AGENT_OPTIONS_INIT;
	o.model = "fixture";
	return ev_agent_run(b, sample(id), &suite->gen, &o, r);
}

static double spent(const cJSON *a, const char *agent, const char *key)
{
	return ev_json_num(cJSON_GetObjectItem(a, agent), key, -1);
}

static void orchestrator_delegates_and_each_agent_is_accounted(void **state)
{
	(void)state;
	ev_backend *b = backend_of(&srv);
	ev_agent_result r;
	if (run_on(b, "deleg", &r))
		fail_msg("%s", ev_error_msg());
	assert_false(r.failed);
	if (r.score != 1.0)
		fail_msg("score %g: %s", r.score, r.detail ? r.detail : "");
	assert_string_equal(r.final_text, "The bolts last 28 days.");
	cJSON *a = cJSON_Parse(r.agents_json);
	assert_non_null(a);
	assert_true(spent(a, "orchestrator", "turns") == 3);
	assert_true(spent(a, "orchestrator", "tool_calls") == 2);
	assert_true(spent(a, "records", "turns") == 2);
	assert_true(spent(a, "records", "tool_calls") == 2);
	assert_true(spent(a, "records", "delegations") == 1);
	assert_true(spent(a, "calculator", "turns") == 2);
	assert_true(spent(a, "calculator", "tool_calls") == 1);
	assert_int_equal(r.turns, 7);
	assert_int_equal(r.n_tool_calls, 5);
	double ct = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, a) ct += ev_json_num(x, "completion_tokens", 0);
	assert_true(ct == r.completion_tokens && ct > 0);
	cJSON_Delete(a);
	/* the calculator worker really ran its tool: the evaluation is in the state */
	assert_non_null(strstr(r.state_json, "1260/45"));
	ev_agent_result_clear(&r);

	/* the orchestrator calling a worker's tool itself: refused */
	assert_int_equal(run_on(b, "cheat", &r), 0);
	assert_true(r.score == 0.0);
	assert_null(strstr(r.state_json, "hacked"));
	ev_agent_result_clear(&r);

	/* a worker that never answers: an error the orchestrator gets back */
	assert_int_equal(run_on(b, "stuck", &r), 0);
	assert_true(r.score == 1.0);
	a = cJSON_Parse(r.agents_json);
	assert_true(spent(a, "records", "turns") == 3); /* its own max_turns */
	cJSON_Delete(a);
	ev_agent_result_clear(&r);
	ev_backend_free(b);
}

static void a_worker_plays_on_its_own_model(void **state)
{
	(void)state;
	ev_backend *kids[2] = {backend_of(&srv), backend_of(&srv2)};
	const char *names[2] = {"fixture", "fixture"}, *labels[2] = {"one", "two"};
	ev_route_table t;
	assert_int_equal(ev_route_table_parse(&t, "*=1"), 0);
	ev_backend *b = NULL;
	assert_int_equal(ev_backend_router_new(&b, kids, names, labels, 2, &t), 0);
	long before1 = fu_requests(&srv), before2 = fu_requests(&srv2);
	ev_agent_result r;
	ev_agent_options o = EV_AGENT_OPTIONS_INIT;
	o.model = "fixture";
	o.route = 1;
	if (ev_agent_run(b, sample("routed"), &suite->gen, &o, &r))
		fail_msg("%s", ev_error_msg());
	assert_true(r.score == 1.0);
	/* records' two turns on the second server; the orchestrator's three and the calculator's two on the first */
	assert_int_equal(fu_requests(&srv2) - before2, 2);
	assert_int_equal(fu_requests(&srv) - before1, 5);
	ev_agent_result_clear(&r);
	ev_backend_free(b);
}

static void bad_agent_specs_are_refused(void **state)
{
	(void)state;
	ev_backend *b = backend_of(&srv);
	static const char *const cases[][2] = {
		{"bad-tool", "'rm_rf' is not a tool of the environment"},
		{"bad-name", "name: 1 to 32"},
		{"no-workers", "1 to 8 workers"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ev_agent_result r;
		assert_int_not_equal(run_on(b, cases[i][0], &r), 0);
		if (!strstr(ev_error_msg(), cases[i][1]))
			fail_msg("%s: %s", cases[i][0], ev_error_msg());
	}
	ev_backend_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(orchestrator_delegates_and_each_agent_is_accounted),
		cmocka_unit_test(a_worker_plays_on_its_own_model),
		cmocka_unit_test(bad_agent_specs_are_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
