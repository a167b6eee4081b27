/* Checker specs: malformed JSON, unknown types (listing the known ones),
 * unknown or mistyped fields, each error naming the field; the normalised
 * spec of every kind. */
#include "cases.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *spec;
	const char *needle;
} spec_error;

static const spec_error spec_errors[] = {
	{"{\"type\":", "checker: malformed JSON"},
	{"[1,2]", "checker: expected an object or a type name"},
	{"42", "checker: expected an object or a type name"},
	{"{\"type\":7}", "checker.type: expected a string"},
	{"{\"type\":\"fuzzy\"}", "checker.type: unknown type \"fuzzy\" (known: includes, exact, numeric, choice, regex"},
	{"\"fuzzy\"", "checker.type: unknown type \"fuzzy\""},
	{"{\"type\":\"exact\",\"ignore_caps\":true}",
	 "checker.ignore_caps: unknown field for type exact (known: ignore_case, ignore_space, ignore_punct)"},
	{"{\"type\":\"includes\",\"pattern\":\"x\"}", "checker.pattern: unknown field for type includes"},
	{"{\"type\":\"exact\",\"ignore_case\":1}", "checker.ignore_case: expected true or false"},
	{"{\"type\":\"numeric\",\"tolerance\":\"small\"}", "checker.tolerance: expected a number"},
	{"{\"type\":\"choice\",\"letters\":\"A-D\"}", "checker.letters: character 1 is not a letter"},
};

static void spec_errors_name_the_field(void **state)
{
	(void)state;
	int failures = 0;
	for (size_t i = 0; i < sizeof spec_errors / sizeof spec_errors[0]; i++) {
		ev_checker *c = (ev_checker *)1;
		int rc = ev_checker_new(&c, spec_errors[i].spec);
		if (rc >= 0 || c || !strstr(ev_error_msg(), spec_errors[i].needle)) {
			print_error("spec_errors[%zu]: %s: rc %d, message \"%s\", want \"%s\"\n", i, spec_errors[i].spec, rc,
			            ev_error_msg(), spec_errors[i].needle);
			failures++;
		}
	}
	assert_int_equal(failures, 0);
	assert_int_equal(ev_checker_new(NULL, "{}"), EV_E_INVALID);
}

typedef struct {
	const char *spec;
	const char *norm;
} spec_norm;

static const spec_norm spec_norms[] = {
	{NULL, "{\"type\":\"includes\",\"ignore_case\":true,\"ignore_space\":false,\"ignore_punct\":false}"},
	{"  ", "{\"type\":\"includes\",\"ignore_case\":true,\"ignore_space\":false,\"ignore_punct\":false}"},
	{"\"exact\"", "{\"type\":\"exact\",\"ignore_case\":true,\"ignore_space\":true,\"ignore_punct\":true}"},
	{"{\"type\":\"exact\",\"ignore_punct\":false,\"description\":\"strict-ish\"}",
	 "{\"type\":\"exact\",\"ignore_case\":true,\"ignore_space\":true,\"ignore_punct\":false}"},
	{"{\"type\":\"numeric\"}", "{\"type\":\"numeric\",\"tolerance\":1e-06,\"relative\":false}"},
	{"{\"type\":\"choice\"}", "{\"type\":\"choice\",\"letters\":\"ABCDEFGHIJKLMNOPQRSTUVWXYZ\"}"},
};

static void spec_is_normalised(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof spec_norms / sizeof spec_norms[0]; i++) {
		ev_checker *c = sc_checker(spec_norms[i].spec);
		assert_string_equal(ev_checker_spec(c), spec_norms[i].norm);
		ev_checker *again = sc_checker(ev_checker_spec(c));
		assert_string_equal(ev_checker_spec(again), spec_norms[i].norm);
		ev_checker_free(again);
		ev_checker_free(c);
	}
	assert_null(ev_checker_spec(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spec_errors_name_the_field),
		cmocka_unit_test(spec_is_normalised),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
