/* Tool environments: each kind's tools, its permissions and its refusals
 * (fs path escape, sqlite writes without permission, calculator
 * precedence and errors), the state they end in, and the subset match. */
#include "suites/suites.h"
#include "tests/common/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ev_env *mk(const char *spec)
{
	ev_env *e = NULL;
	int rc = ev_env_new(&e, spec, "test");
	if (rc)
		fail_msg("ev_env_new(%s): %s", spec, ev_error_msg());
	return e;
}

/* Runs a call and returns the parsed result (caller frees). */
static cJSON *call(ev_env *e, const char *name, const char *args)
{
	char *r = NULL;
	assert_int_equal(ev_env_execute(e, name, args, &r), 0);
	assert_non_null(r);
	cJSON *j = cJSON_Parse(r);
	assert_non_null(j);
	free(r);
	return j;
}

static void assert_error(ev_env *e, const char *name, const char *args, const char *needle)
{
	cJSON *j = call(e, name, args);
	const char *err = ev_json_str(j, "error", NULL);
	if (!err || !strstr(err, needle))
		fail_msg("%s(%s): expected an error with \"%s\", got %s", name, args, needle, cJSON_PrintUnformatted(j));
	cJSON_Delete(j);
}

static void assert_state(ev_env *e, const char *expected)
{
	char *st = NULL;
	assert_int_equal(ev_env_state_json(e, &st), 0);
	bool ok = false;
	char *d = NULL;
	assert_int_equal(ev_env_state_match(&ok, &d, st, expected), 0);
	if (!ok)
		fail_msg("state %s does not match %s: %s", st, expected, d ? d : "?");
	free(d);
	free(st);
}

static void fs_tools_read_write_list_delete(void **state)
{
	(void)state;
	ev_env *e = mk("{\"type\":\"fs\",\"files\":{\"/docs/a.txt\":\"alpha\",\"b.txt\":\"beta\"}}");
	assert_true(ev_env_has_tool(e, "read_file"));
	assert_true(ev_env_has_tool(e, "write_file"));
	assert_false(ev_env_has_tool(e, "get"));
	cJSON *j = call(e, "read_file", "{\"path\":\"/docs/./a.txt\"}");
	assert_string_equal(ev_json_str(j, "content", ""), "alpha");
	cJSON_Delete(j);
	j = call(e, "write_file", "{\"path\":\"docs/sub/../c.txt\",\"content\":\"gamma\"}");
	assert_string_equal(ev_json_str(j, "path", ""), "/docs/c.txt");
	cJSON_Delete(j);
	j = call(e, "list_dir", "{}");
	char *t = ev_json_print(cJSON_GetObjectItem(j, "entries"));
	assert_string_equal(t, "[\"b.txt\",\"docs/\"]");
	free(t);
	cJSON_Delete(j);
	j = call(e, "delete_file", "{\"path\":\"/b.txt\"}");
	assert_string_equal(ev_json_str(j, "deleted", ""), "/b.txt");
	cJSON_Delete(j);
	assert_error(e, "read_file", "{\"path\":\"/b.txt\"}", "no such file");
	assert_error(e, "read_file", "{\"path\":\"/docs\"}", "is a directory");
	assert_error(e, "write_file", "{\"path\":\"/docs/a.txt/x\",\"content\":\"\"}", "parent");
	assert_error(e, "list_dir", "{\"path\":\"/nowhere\"}", "no such directory");
	assert_error(e, "read_file", "{}", "missing argument \"path\"");
	assert_error(e, "read_file", "{\"path\":7}", "expected a string");
	assert_error(e, "read_file", "{\"path\":\"/x\",\"mode\":\"r\"}", "unexpected argument");
	assert_error(e, "read_file", "not json", "expected a JSON object");
	assert_error(e, "format_disk", "{}", "unknown tool");
	assert_state(e, "{\"fs\":{\"files\":{\"/docs/a.txt\":\"alpha\",\"/docs/c.txt\":\"gamma\"}}}");
	ev_env_free(e);
}

static void fs_refuses_path_escape_and_read_only_writes(void **state)
{
	(void)state;
	ev_env *e = mk("{\"type\":\"fs\",\"files\":{\"/a.txt\":\"x\"},\"read_only\":true}");
	assert_error(e, "read_file", "{\"path\":\"../etc/passwd\"}", "escapes the root");
	assert_error(e, "read_file", "{\"path\":\"/a/../../etc/passwd\"}", "escapes the root");
	assert_error(e, "list_dir", "{\"path\":\"..\"}", "escapes the root");
	assert_error(e, "read_file", "{\"path\":\"\"}", "empty path");
	assert_error(e, "write_file", "{\"path\":\"/b.txt\",\"content\":\"y\"}", "permission denied");
	assert_error(e, "delete_file", "{\"path\":\"/a.txt\"}", "permission denied");
	assert_state(e, "{\"fs\":{\"files\":{\"/a.txt\":\"x\"}}}");
	ev_env_free(e);
	/* A spec that escapes is the suite's error. */
	ev_env *bad = NULL;
	assert_int_equal(ev_env_new(&bad, "{\"type\":\"fs\",\"files\":{\"../x\":\"y\"}}", "s.jsonl:3"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "s.jsonl:3.files.../x: path escapes the root"));
	assert_null(bad);
}

static void kv_tools_and_read_only(void **state)
{
	(void)state;
	ev_env *e = mk("{\"type\":\"kv\",\"data\":{\"user:2\":\"bo\",\"user:1\":\"al\",\"cfg\":\"on\"}}");
	cJSON *j = call(e, "get", "{\"key\":\"user:1\"}");
	assert_string_equal(ev_json_str(j, "value", ""), "al");
	cJSON_Delete(j);
	j = call(e, "list_keys", "{\"prefix\":\"user:\"}");
	char *t = ev_json_print(cJSON_GetObjectItem(j, "keys"));
	assert_string_equal(t, "[\"user:1\",\"user:2\"]");
	free(t);
	cJSON_Delete(j);
	cJSON_Delete(call(e, "set", "{\"key\":\"user:3\",\"value\":\"cy\"}"));
	cJSON_Delete(call(e, "set", "{\"key\":\"cfg\",\"value\":\"off\"}"));
	cJSON_Delete(call(e, "delete", "{\"key\":\"user:2\"}"));
	assert_error(e, "get", "{\"key\":\"user:2\"}", "no such key");
	assert_error(e, "set", "{\"key\":\"k\"}", "missing argument \"value\"");
	assert_error(e, "set", "{\"key\":\"\",\"value\":\"v\"}", "empty key");
	char *st = NULL;
	assert_int_equal(ev_env_state_json(e, &st), 0);
	assert_string_equal(st, "{\"kv\":{\"data\":{\"cfg\":\"off\",\"user:1\":\"al\",\"user:3\":\"cy\"}}}");
	free(st);
	ev_env_free(e);
	e = mk("{\"type\":\"kv\",\"data\":{\"a\":\"1\"},\"read_only\":true}");
	assert_error(e, "set", "{\"key\":\"a\",\"value\":\"2\"}", "permission denied");
	assert_error(e, "delete", "{\"key\":\"a\"}", "permission denied");
	ev_env_free(e);
}

#define SEED                                                                                                    \
	"\"setup\":\"CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, qty INTEGER);"                           \
	"INSERT INTO items VALUES (1,'bolt',10),(2,'nut',0),(3,'gear',4);\""

static void sqlite_query_reads_and_refuses_writes_without_permission(void **state)
{
	(void)state;
	ev_env *e = mk("{\"type\":\"sqlite\"," SEED "}");
	cJSON *j = call(e, "query", "{\"sql\":\"SELECT name FROM items WHERE qty > 0 ORDER BY id\"}");
	char *t = ev_json_print(cJSON_GetObjectItem(j, "rows"));
	assert_string_equal(t, "[{\"name\":\"bolt\"},{\"name\":\"gear\"}]");
	free(t);
	cJSON_Delete(j);
	/* Writes through query are refused by the authorizer, with or
	 * without the write permission; execute needs the permission. */
	assert_error(e, "query", "{\"sql\":\"DELETE FROM items\"}", "refused");
	assert_error(e, "query", "{\"sql\":\"DROP TABLE items\"}", "refused");
	assert_error(e, "query", "{\"sql\":\"ATTACH DATABASE '/tmp/x.db' AS x\"}", "refused");
	assert_error(e, "query", "{\"sql\":\"PRAGMA writable_schema=1\"}", "refused");
	assert_error(e, "query", "{\"sql\":\"SELECT random()\"}", "random");
	assert_error(e, "execute", "{\"sql\":\"UPDATE items SET qty = 99\"}", "permission denied");
	assert_error(e, "query", "{\"sql\":\"SELECT 1; DELETE FROM items\"}", "one statement");
	assert_error(e, "query", "{\"sql\":\"SELEC nonsense\"}", "syntax error");
	/* A runaway statement is stopped. */
	assert_error(e, "query",
	             "{\"sql\":\"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c\"}",
	             "too long");
	assert_state(e, "{\"sqlite\":{\"tables\":{\"items\":[{\"id\":1,\"qty\":10},{\"name\":\"nut\"},{\"qty\":4}]}}}");
	ev_env_free(e);
}

static void sqlite_execute_changes_rows_when_granted_but_not_schema(void **state)
{
	(void)state;
	ev_env *e = mk("{\"type\":\"sqlite\",\"allow_write\":true," SEED "}");
	cJSON *j = call(e, "execute", "{\"sql\":\"UPDATE items SET qty = qty + 5 WHERE name = 'nut'\"}");
	assert_int_equal((int)ev_json_num(j, "changes", -1), 1);
	cJSON_Delete(j);
	cJSON_Delete(call(e, "execute", "{\"sql\":\"INSERT INTO items(name, qty) VALUES ('cog', 7)\"}"));
	cJSON_Delete(call(e, "execute", "{\"sql\":\"DELETE FROM items WHERE id = 1\"}"));
	assert_error(e, "execute", "{\"sql\":\"DROP TABLE items\"}", "refused");
	assert_error(e, "execute", "{\"sql\":\"CREATE TABLE t(x)\"}", "refused");
	assert_error(e, "execute", "{\"sql\":\"SELECT 1\"}", "use query");
	assert_error(e, "query", "{\"sql\":\"INSERT INTO items(name) VALUES ('x')\"}", "refused");
	assert_state(e, "{\"sqlite\":{\"tables\":{\"items\":[{\"name\":\"nut\",\"qty\":5},{\"name\":\"gear\"},"
	                "{\"id\":4,\"name\":\"cog\",\"qty\":7}]}}}");
	ev_env_free(e);
	ev_env *bad = NULL;
	assert_int_equal(ev_env_new(&bad, "{\"type\":\"sqlite\",\"setup\":\"CREATE TABLEX\"}", "m"), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "m.setup"));
}

static void calculator_precedence_functions_and_errors(void **state)
{
	(void)state;
	static const struct {
		const char *expr;
		double want;
	} ok[] = {
		{"1 + 2 * 3", 7},       {"(1 + 2) * 3", 9},      {"2 ^ 3 ^ 2", 512},     {"-2 ^ 2", -4},
		{"2 ^ -1", 0.5},        {"2 ** 10", 1024},       {"10 / 4", 2.5},        {"7 - 2 - 1", 4},
		{"sqrt(16) + abs(-3)", 7}, {"round(3.14159, 2)", 3.14}, {"round(-2.5)", -3}, {"2 * pi", 6.283185307179586},
		{"--3", 3},             {" 1.5e3 / 3 ", 500},
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		double v;
		if (ev_env_calc(&v, ok[i].expr))
			fail_msg("%s: %s", ok[i].expr, ev_error_msg());
		if (fabs(v - ok[i].want) > 1e-9)
			fail_msg("%s = %.17g, want %.17g", ok[i].expr, v, ok[i].want);
	}
	static const struct {
		const char *expr, *why;
	} bad[] = {
		{"1 / 0", "division by zero"}, {"sqrt(-1)", "negative"},     {"1 +", "unexpected end"},
		{"2 * (3", "expected ')'"},    {"foo(2)", "unknown function"}, {"1; rm -rf /", "unexpected character"},
		{"10 ^ 400", "out of range"},  {"", "unexpected end"},       {"(-8) ^ 0.5", "fractional power"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		double v;
		assert_int_equal(ev_env_calc(&v, bad[i].expr), EV_E_INVALID);
		if (!strstr(ev_error_msg(), bad[i].why))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].expr, ev_error_msg(), bad[i].why);
	}
	/* Deep nesting is an error, not a stack overflow. */
	char deep[1001];
	memset(deep, '(', 1000);
	deep[1000] = 0;
	double v;
	assert_int_equal(ev_env_calc(&v, deep), EV_E_INVALID);
	assert_non_null(strstr(ev_error_msg(), "nested too deep"));

	ev_env *e = mk("[{\"type\":\"calculator\"},{\"type\":\"kv\"}]");
	cJSON *j = call(e, "calculate", "{\"expression\":\"(17 + 25) * 2\"}");
	assert_int_equal((int)ev_json_num(j, "result", 0), 84);
	cJSON_Delete(j);
	assert_error(e, "calculate", "{\"expression\":\"1/0\"}", "division by zero");
	assert_state(e, "{\"calculator\":{\"evaluations\":[{\"result\":84}]},\"kv\":{\"data\":{}}}");
	ev_env_free(e);
}

static void env_specs_rejected_with_field_names(void **state)
{
	(void)state;
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{"{\"type\":\"ftp\"}", "unknown environment 'ftp'"},
		{"{}", "type: missing"},
		{"[{\"type\":\"kv\"},{\"type\":\"kv\"}]", "given twice"},
		{"{\"type\":\"kv\",\"data\":{\"a\":1}}", "data.a: expected a string value"},
		{"{\"type\":\"fs\",\"files\":[]}", "files: expected an object"},
		{"{\"type\":\"sqlite\",\"allow_write\":\"yes\"}", "allow_write: expected true or false"},
		{"{\"type\":\"calculator\",\"x\":1}", "x: unknown field"},
		{"[]", "empty list"},
		{"{\"type\":", "env"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		ev_env *e = NULL;
		assert_true(ev_env_new(&e, bad[i].spec, "env") < 0);
		assert_null(e);
		if (!strstr(ev_error_msg(), bad[i].msg))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].spec, ev_error_msg(), bad[i].msg);
	}
}

static void state_match_is_subset_for_objects_exact_for_arrays(void **state)
{
	(void)state;
	bool ok;
	char *d = NULL;
	assert_int_equal(ev_env_state_match(&ok, &d, "{\"a\":{\"b\":1,\"c\":2},\"x\":[1,{\"y\":2,\"z\":3}]}",
	                                    "{\"a\":{\"b\":1.0},\"x\":[1,{\"y\":2}]}"),
	                 0);
	assert_true(ok);
	assert_null(d);
	assert_int_equal(ev_env_state_match(&ok, &d, "{\"fs\":{\"files\":{\"/n.txt\":\"ho\"}}}",
	                                    "{\"fs\":{\"files\":{\"/n.txt\":\"hi\"}}}"),
	                 0);
	assert_false(ok);
	assert_string_equal(d, "fs.files./n.txt: expected \"hi\", got \"ho\"");
	free(d);
	assert_int_equal(ev_env_state_match(&ok, &d, "{\"x\":[1,2,3]}", "{\"x\":[1,2]}"), 0);
	assert_false(ok);
	assert_string_equal(d, "x: expected 2 items, got 3");
	free(d);
	assert_int_equal(ev_env_state_match(&ok, &d, "{\"x\":\"1\"}", "{\"x\":1}"), 0);
	assert_false(ok);
	free(d);
	assert_int_equal(ev_env_state_match(&ok, &d, "{}", "{\"gone\":null}"), 0);
	assert_false(ok);
	assert_non_null(strstr(d, "gone: expected null, got (absent)"));
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fs_tools_read_write_list_delete),
		cmocka_unit_test(fs_refuses_path_escape_and_read_only_writes),
		cmocka_unit_test(kv_tools_and_read_only),
		cmocka_unit_test(sqlite_query_reads_and_refuses_writes_without_permission),
		cmocka_unit_test(sqlite_execute_changes_rows_when_granted_but_not_schema),
		cmocka_unit_test(calculator_precedence_functions_and_errors),
		cmocka_unit_test(env_specs_rejected_with_field_names),
		cmocka_unit_test(state_match_is_subset_for_objects_exact_for_arrays),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
