/* The HumanEval and MBPP importers: published files (plain or gzip) become
 * suite folders that load, with the fields the checker needs; bad records
 * fail naming file:line and the field, writing nothing. The real HumanEval
 * file is imported too when shared/data is there. */
#include "tests/common/testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites/suites.h"

static const char HE[] =
	"{\"task_id\":\"HumanEval/0\",\"prompt\":\"def one():\\n\",\"entry_point\":\"one\","
	"\"canonical_solution\":\"    return 1\\n\",\"test\":\"def check(candidate):\\n    assert candidate() == 1\\n\"}\n"
	"\n"
	"{\"task_id\":\"HumanEval/1\",\"prompt\":\"def two():\\n\",\"entry_point\":\"two\","
	"\"canonical_solution\":\"    return 2\\n\",\"test\":\"def check(candidate):\\n    assert candidate() == 2\\n\"}\n";

/* Writes text gzip-compressed (libarchive's raw writer with the gzip filter). */
static char *write_gz(const char *dir, const char *name, const char *text)
{
	char *path = tu_path(dir, name);
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_pathname(e, "data");
	archive_entry_set_size(e, (la_int64_t)strlen(text));
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, text, strlen(text)), (la_ssize_t)strlen(text));
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	return path;
}

static ev_suite *load(const char *dir)
{
	ev_suite *s = NULL;
	ev_suite_options o = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &o))
		fail_msg("load %s: %s", dir, ev_error_msg());
	return s;
}

static void humaneval_gz_becomes_a_coding_suite(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("import-he");
	char *gz = write_gz(dir, "HumanEval.jsonl.gz", HE);
	char *out = tu_path(dir, "suite");
	assert_int_equal(ev_import_humaneval(gz, out), 0);
	ev_suite *s = load(out);
	assert_string_equal(s->name, "humaneval");
	assert_string_equal(s->kind, "coding");
	assert_non_null(strstr(s->checker_json, "\"humaneval\""));
	assert_int_equal(s->n_samples, 2);
	assert_string_equal(s->samples[1].id, "HumanEval/1");
	cJSON *t = cJSON_Parse(s->samples[1].tests_json);
	assert_string_equal(ev_json_str(t, "style", ""), "humaneval");
	assert_string_equal(ev_json_str(t, "prompt", ""), "def two():\n");
	assert_string_equal(ev_json_str(t, "entry_point", ""), "two");
	assert_non_null(strstr(ev_json_str(t, "test", ""), "candidate() == 2"));
	cJSON_Delete(t);
	cJSON *m = cJSON_Parse(s->samples[1].metadata_json);
	assert_string_equal(ev_json_str(m, "canonical_solution", ""), "    return 2\n");
	cJSON_Delete(m);
	/* the prompt is the user's message */
	char *text = ev_message_text(&s->samples[0].messages[s->samples[0].n_messages - 1]);
	assert_string_equal(text, "def one():\n");
	free(text);
	ev_suite_free(s);

	/* the same file uncompressed imports the same */
	char *plain = tu_write(dir, "he.jsonl", HE);
	char *out2 = tu_path(dir, "suite2");
	assert_int_equal(ev_import_humaneval(plain, out2), 0);
	s = load(out2);
	assert_int_equal(s->n_samples, 2);
	ev_suite_free(s);
	free(plain);
	free(out2);
	free(out);
	free(gz);
	free(dir);
}

static void bad_records_name_file_line_and_field(void **state)
{
	(void)state;
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{"{\"task_id\":\"a\",\"prompt\":\"p\",\"entry_point\":\"f\",\"test\":\"def check(c): pass\"}\n",
		 "x.jsonl:1: canonical_solution: missing"},
		{"\n{\"task_id\":\"a\",\"prompt\":\"p\",\"entry_point\":\"f(\",\"canonical_solution\":\"\",\"test\":\"def check(c): pass\"}\n",
		 "x.jsonl:2: entry_point"},
		{"{\"task_id\":\"a\",\"prompt\":\"p\",\"entry_point\":\"f\",\"canonical_solution\":\"\",\"test\":\"assert 1\"}\n",
		 "x.jsonl:1: test"},
		{"{\"task_id\":7,\"prompt\":\"p\",\"entry_point\":\"f\",\"canonical_solution\":\"\",\"test\":\"def check(c): pass\"}\n",
		 "x.jsonl:1: task_id"},
		{"{\"task_id\":\"a\",\"prompt\":\"p\",\"entry_point\":\"f\",\"canonical_solution\":\"\",\"test\":\"def check(c): pass\"}\n"
		 "{\"task_id\":\"a\",\"prompt\":\"p\",\"entry_point\":\"f\",\"canonical_solution\":\"\",\"test\":\"def check(c): pass\"}\n",
		 "x.jsonl:2: task_id: duplicate \"a\" (first on line 1)"},
		{"{\"task_id\":\"a\",\n", "x.jsonl:1"},
		{"[1]\n", "x.jsonl:1: expected a JSON object"},
		{"", "no problems"},
	};
	char *dir = tu_tmpdir("import-he-bad");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *in = tu_write(dir, "x.jsonl", cases[i].text);
		char *out = tu_path(dir, "out");
		int rc = ev_import_humaneval(in, out);
		if (rc >= 0 || !strstr(ev_error_msg(), cases[i].msg))
			fail_msg("case %zu: rc %d, \"%s\" lacks \"%s\"", i, rc, ev_error_msg(), cases[i].msg);
		char *sj = tu_path(out, "suite.json");
		assert_int_equal(access(sj, F_OK), -1); /* nothing written */
		free(sj);
		free(in);
		free(out);
	}
	assert_int_equal(ev_import_humaneval("/nonexistent/HumanEval.jsonl.gz", dir), EV_E_NOTFOUND);
	free(dir);
}

static void mbpp_becomes_a_coding_suite(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("import-mbpp");
	char *in = tu_write(dir, "mbpp.jsonl",
	                    "{\"text\":\"Write a function to square x.\",\"code\":\"def sq(x):\\n    return x*x\","
	                    "\"task_id\":11,\"test_setup_code\":\"\",\"test_list\":[\"assert sq(2) == 4\",\"assert sq(3) == 9\"],"
	                    "\"challenge_test_list\":[]}\n"
	                    "{\"prompt\":\"Write a function to negate x.\",\"code\":\"def neg(x): return -x\","
	                    "\"task_id\":12,\"test_imports\":[\"import math\"],\"test_list\":[\"assert neg(1) == -1\"]}\n");
	char *out = tu_path(dir, "suite");
	assert_int_equal(ev_import_mbpp(in, out), 0);
	ev_suite *s = load(out);
	assert_string_equal(s->name, "mbpp");
	assert_non_null(strstr(s->checker_json, "\"mbpp\""));
	assert_int_equal(s->n_samples, 2);
	assert_string_equal(s->samples[0].id, "11");
	char *text = ev_message_text(&s->samples[0].messages[s->samples[0].n_messages - 1]);
	assert_non_null(strstr(text, "square x"));
	assert_non_null(strstr(text, "assert sq(3) == 9"));
	free(text);
	cJSON *t = cJSON_Parse(s->samples[0].tests_json);
	assert_string_equal(ev_json_str(t, "style", ""), "mbpp");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "test_list")), 2);
	cJSON_Delete(t);
	t = cJSON_Parse(s->samples[1].tests_json);
	assert_string_equal(ev_json_str(t, "test_setup_code", ""), "import math\n");
	cJSON_Delete(t);
	cJSON *m = cJSON_Parse(s->samples[1].metadata_json);
	assert_string_equal(ev_json_str(m, "code", ""), "def neg(x): return -x");
	cJSON_Delete(m);
	ev_suite_free(s);

	char *bad = tu_write(dir, "bad.jsonl", "{\"text\":\"t\",\"code\":\"c\",\"task_id\":1,\"test_list\":[\"ok\", 3]}\n");
	assert_int_equal(ev_import_mbpp(bad, out), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "bad.jsonl:1: test_list[1]"));
	char *dup = tu_write(dir, "dup.jsonl",
	                     "{\"text\":\"t\",\"code\":\"c\",\"task_id\":1,\"test_list\":[\"a\"]}\n"
	                     "{\"text\":\"t\",\"code\":\"c\",\"task_id\":1,\"test_list\":[\"a\"]}\n");
	assert_int_equal(ev_import_mbpp(dup, out), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "dup.jsonl:2: task_id: duplicate"));
	free(dup);
	free(bad);
	free(in);
	free(out);
	free(dir);
}

static void published_humaneval_imports_164_problems(void **state)
{
	(void)state;
	char *gz = tu_shared("humaneval/HumanEval.jsonl.gz");
	if (!gz) {
		print_message("shared/data/humaneval is absent: skipped\n");
		skip();
	}
	char *dir = tu_tmpdir("import-he-real");
	char *out = tu_path(dir, "suite");
	assert_int_equal(ev_import_humaneval(gz, out), 0);
	ev_suite *s = load(out);
	assert_int_equal(s->n_samples, 164);
	assert_string_equal(s->samples[0].id, "HumanEval/0");
	assert_string_equal(s->samples[163].id, "HumanEval/163");
	for (size_t i = 0; i < s->n_samples; i++) {
		cJSON *t = cJSON_Parse(s->samples[i].tests_json);
		assert_non_null(t);
		assert_true(ev_json_str(t, "entry_point", "")[0] != 0);
		assert_non_null(strstr(ev_json_str(t, "test", ""), "def check("));
		cJSON_Delete(t);
	}
	ev_suite_free(s);
	free(out);
	free(dir);
	free(gz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(humaneval_gz_becomes_a_coding_suite),
		cmocka_unit_test(bad_records_name_file_line_and_field),
		cmocka_unit_test(mbpp_becomes_a_coding_suite),
		cmocka_unit_test(published_humaneval_imports_164_problems),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
