/* suites/import_bfcl.c: BFCL files to a loadable tool-use suite; tools in
 * OpenAI form, BFCL's functions and ground truth kept for the checker;
 * errors naming file:line. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "suites/suites.h"

static const char *Q1 =
	"{\"id\": \"simple_0\", \"question\": [[{\"role\": \"user\", \"content\": \"Area of a 10 by 5 triangle?\"}]], "
	"\"function\": [{\"name\": \"geo.triangle_area\", \"description\": \"Area.\", \"parameters\": {\"type\": \"dict\", "
	"\"properties\": {\"base\": {\"type\": \"integer\"}, \"height\": {\"type\": \"float\"}, "
	"\"point\": {\"type\": \"tuple\", \"items\": {\"type\": \"float\"}}, \"extra\": {\"type\": \"any\"}, "
	"\"rows\": {\"type\": \"array\", \"items\": {\"type\": \"dict\", \"properties\": {\"k\": {\"type\": \"float\"}}}}}, "
	"\"required\": [\"base\", \"height\"]}}]}\n"
	"\n"
	"{\"id\": \"simple_1\", \"question\": [[{\"role\": \"system\", \"content\": \"Be brief.\"}, "
	"{\"role\": \"user\", \"content\": \"5!\"}], [{\"role\": \"user\", \"content\": \"later turn\"}]], "
	"\"function\": [{\"name\": \"math.factorial\", \"parameters\": {\"type\": \"dict\", \"properties\": "
	"{\"number\": {\"type\": \"integer\"}}, \"required\": [\"number\"]}}]}\n";

static const char *A1 = "{\"id\": \"simple_1\", \"ground_truth\": [{\"math.factorial\": {\"number\": [5]}}]}\n"
                        "{\"id\": \"simple_0\", \"ground_truth\": [{\"geo.triangle_area\": {\"base\": [10], "
                        "\"height\": [5.0], \"point\": [\"\"], \"extra\": [\"\"], \"rows\": [\"\"]}}]}\n";

static cJSON *read_json(const char *dir, const char *name, size_t line)
{
	char *path = tu_path(dir, name);
	char *text = NULL;
	size_t len;
	assert_int_equal(ev_file_read(&text, &len, path, 1 << 24), 0);
	char *p = text;
	for (size_t i = 0; line != (size_t)-1 && i < line; i++) {
		p = strchr(p, '\n');
		assert_non_null(p);
		p++;
	}
	char *nl = strchr(p, '\n');
	if (nl && line != (size_t)-1)
		*nl = 0;
	cJSON *j = cJSON_Parse(p);
	assert_non_null(j);
	free(text);
	free(path);
	return j;
}

static const char *jstr(const cJSON *o, const char *path)
{
	/* "a.b.0.c": objects by key, arrays by index */
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	const cJSON *v = o;
	for (char *save, *tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
		v = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(v, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(v, tok);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void import_bfcl_writes_a_loadable_suite(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("import_bfcl_fixture");
	char *q = tu_write(dir, "BFCL_v3_simple.json", Q1);
	char *a = tu_write(dir, "answers.json", A1);
	char *out = tu_path(dir, "suite");
	if (ev_import_bfcl(q, a, out))
		fail_msg("import: %s", ev_error_msg());

	cJSON *sj = read_json(out, "suite.json", (size_t)-1);
	assert_string_equal(jstr(sj, "name"), "bfcl_v3_simple");
	assert_string_equal(jstr(sj, "kind"), "tool-use");
	assert_string_equal(jstr(sj, "checker.type"), "toolcall");
	assert_string_equal(jstr(sj, "checker.category"), "simple");
	cJSON_Delete(sj);

	cJSON *s0 = read_json(out, "samples.jsonl", 0);
	assert_string_equal(jstr(s0, "id"), "simple_0");
	assert_string_equal(jstr(s0, "messages.0.role"), "user");
	assert_string_equal(jstr(s0, "tools.0.type"), "function");
	assert_string_equal(jstr(s0, "tools.0.function.name"), "geo_triangle_area");
	assert_string_equal(jstr(s0, "tools.0.function.description"), "Area.");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.type"), "object");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.base.type"), "integer");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.height.type"), "number");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.point.type"), "array");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.point.items.type"), "number");
	assert_null(jstr(s0, "tools.0.function.parameters.properties.extra.type"));
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.rows.items.type"), "object");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.properties.rows.items.properties.k.type"), "number");
	assert_string_equal(jstr(s0, "tools.0.function.parameters.required.0"), "base");
	/* BFCL's own functions and ground truth, untouched */
	assert_string_equal(jstr(s0, "tests.functions.0.name"), "geo.triangle_area");
	assert_string_equal(jstr(s0, "tests.functions.0.parameters.type"), "dict");
	assert_string_equal(jstr(s0, "tests.functions.0.parameters.properties.height.type"), "float");
	const cJSON *gt = cJSON_GetObjectItem(cJSON_GetObjectItem(s0, "tests"), "ground_truth");
	assert_non_null(cJSON_GetObjectItem(cJSON_GetArrayItem(gt, 0), "geo.triangle_area"));
	assert_string_equal(jstr(s0, "metadata.category"), "simple");
	cJSON_Delete(s0);
	cJSON *s1 = read_json(out, "samples.jsonl", 1);
	assert_string_equal(jstr(s1, "id"), "simple_1");
	/* the first turn only, system message kept */
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(s1, "messages")), 2);
	assert_string_equal(jstr(s1, "messages.0.role"), "system");
	assert_string_equal(jstr(s1, "messages.1.content"), "5!");
	cJSON_Delete(s1);

	ev_suite *s = NULL;
	if (ev_suite_load(&s, out, NULL))
		fail_msg("load: %s", ev_error_msg());
	assert_int_equal(s->n_samples, 2);
	assert_string_equal(s->name, "bfcl_v3_simple");
	assert_non_null(strstr(s->checker_json, "toolcall"));
	assert_non_null(s->samples[0].tools_json);
	assert_non_null(strstr(s->samples[0].tests_json, "ground_truth"));
	ev_suite_free(s);
	free(q);
	free(a);
	free(out);
	free(dir);
}

static void import_bfcl_irrelevance_and_errors(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("import_bfcl_errors");
	char *q = tu_write(dir, "BFCL_v3_irrelevance.json", Q1);
	char *out = tu_path(dir, "irr");
	assert_int_equal(ev_import_bfcl(q, NULL, out), 0);
	cJSON *s0 = read_json(out, "samples.jsonl", 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(s0, "tests"), "ground_truth")), 0);
	assert_string_equal(jstr(s0, "metadata.category"), "irrelevance");
	cJSON_Delete(s0);
	cJSON *sj = read_json(out, "suite.json", (size_t)-1);
	assert_string_equal(jstr(sj, "checker.category"), "irrelevance");
	cJSON_Delete(sj);

	/* an answer missing for a question */
	char *a = tu_write(dir, "a.json", "{\"id\": \"simple_1\", \"ground_truth\": []}\n");
	char *out2 = tu_path(dir, "x");
	assert_int_equal(ev_import_bfcl(q, a, out2), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "BFCL_v3_irrelevance.json:1"));
	assert_non_null(strstr(ev_error_msg(), "simple_0"));
	/* malformed JSON on line 2 */
	char *bad = tu_write(dir, "BFCL_v3_bad.json", "{\"id\": \"a\", \"question\": [[]], \"function\": []}\n{oops\n");
	assert_int_equal(ev_import_bfcl(bad, NULL, out2), EV_E_INVALID); /* line 1: empty first turn */
	assert_non_null(strstr(ev_error_msg(), "BFCL_v3_bad.json:1"));
	char *bad2 = tu_write(dir, "BFCL_v3_bad2.json",
	                      "{\"id\": \"a\", \"question\": [[{\"role\": \"user\", \"content\": \"x\"}]], \"function\": []}\n{oops\n");
	assert_int_equal(ev_import_bfcl(bad2, NULL, out2), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "BFCL_v3_bad2.json:2"));
	/* duplicate ids; a bad role; a function without a name */
	const char *line = "{\"id\": \"a\", \"question\": [[{\"role\": \"user\", \"content\": \"x\"}]], \"function\": []}\n";
	char *dup_text = ev_asprintf("%s%s", line, line);
	char *dup = tu_write(dir, "BFCL_v3_dup.json", dup_text);
	assert_int_equal(ev_import_bfcl(dup, NULL, out2), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "duplicate"));
	char *role = tu_write(dir, "BFCL_v3_role.json",
	                      "{\"id\": \"a\", \"question\": [[{\"role\": \"robot\", \"content\": \"x\"}]], \"function\": []}\n");
	assert_int_equal(ev_import_bfcl(role, NULL, out2), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "question[0][0]"));
	char *noname = tu_write(dir, "BFCL_v3_noname.json",
	                        "{\"id\": \"a\", \"question\": [[{\"role\": \"user\", \"content\": \"x\"}]], "
	                        "\"function\": [{\"parameters\": {}}]}\n");
	assert_int_equal(ev_import_bfcl(noname, NULL, out2), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "function[0]"));
	/* nothing was written by the failed imports */
	char *probe = tu_path(out2, "suite.json");
	FILE *f = fopen(probe, "r");
	assert_null(f);
	assert_int_equal(ev_import_bfcl("/nonexistent/BFCL_v3_simple.json", NULL, out2), EV_E_NOTFOUND);
	assert_non_null(strstr(ev_error_msg(), "/nonexistent/BFCL_v3_simple.json"));
	free(probe);
	free(noname);
	free(role);
	free(dup);
	free(dup_text);
	free(bad2);
	free(bad);
	free(out2);
	free(a);
	free(out);
	free(q);
	free(dir);
}

static void import_bfcl_shared_data_counts(void **st)
{
	(void)st;
	static const struct {
		const char *cat;
		size_t n;
	} cats[] = {{"simple", 400}, {"multiple", 200}, {"parallel", 200}, {"parallel_multiple", 200}, {"irrelevance", 240}};
	char *probe = tu_shared("bfcl/BFCL_v3_simple.json");
	if (!probe) {
		print_message("shared data absent (EV_SHARED_DIR/data/bfcl): skipping\n");
		skip();
	}
	free(probe);
	char *dir = tu_tmpdir("import_bfcl_shared");
	for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++) {
		char rel[128];
		snprintf(rel, sizeof rel, "bfcl/BFCL_v3_%s.json", cats[i].cat);
		char *q = tu_shared(rel);
		snprintf(rel, sizeof rel, "bfcl/possible_answer/BFCL_v3_%s.json", cats[i].cat);
		char *a = strcmp(cats[i].cat, "irrelevance") ? tu_shared(rel) : NULL;
		char *out = tu_path(dir, cats[i].cat);
		if (ev_import_bfcl(q, a, out))
			fail_msg("%s: %s", cats[i].cat, ev_error_msg());
		ev_suite *s = NULL;
		if (ev_suite_load(&s, out, NULL))
			fail_msg("%s: load: %s", cats[i].cat, ev_error_msg());
		print_message("bfcl_v3_%s: %zu samples\n", cats[i].cat, s->n_samples);
		assert_int_equal(s->n_samples, cats[i].n);
		for (size_t k = 0; k < s->n_samples; k++) {
			assert_non_null(s->samples[k].tools_json);
			assert_null(strstr(s->samples[k].tools_json, "\"dict\""));
			assert_null(strstr(s->samples[k].tools_json, "\"float\""));
			assert_non_null(s->samples[k].tests_json);
		}
		ev_suite_free(s);
		free(out);
		free(q);
		free(a);
	}
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(import_bfcl_writes_a_loadable_suite),
		cmocka_unit_test(import_bfcl_irrelevance_and_errors),
		cmocka_unit_test(import_bfcl_shared_data_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
