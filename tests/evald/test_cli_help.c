/* Every command and subcommand describes itself with --help (exit 0, a
 * usage line and its options on stdout), and refuses an unknown option the
 * same way (exit 2, the option named, the usage line): the option table
 * (evald/opt.c) is the one source of both. Also the table's own rules:
 * values checked against their bounds, repeatable options, --name=value. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* The names listed under `heading` ("commands:", "subcommands:") of a help text. */
static int names_under(const char *text, const char *heading, char names[][32], int max)
{
	const char *p = strstr(text, heading);
	int n = 0;
	if (!p)
		return 0;
	p = strchr(p, '\n');
	while (p && p[1] == ' ' && p[2] == ' ' && p[3] != ' ' && n < max) {
		const char *s = p + 3, *e = s;
		while (*e && *e != ' ' && *e != '\n')
			e++;
		snprintf(names[n++], 32, "%.*s", (int)(e - s), s);
		p = strchr(e, '\n');
	}
	return n;
}

/* `evald <words> --help`, and the same with an unknown option; recurses
 * into subcommands. Returns how many commands were checked. */
static int check(const char *const *words, int nw)
{
	const char *argv[8] = {tu_evald()};
	for (int i = 0; i < nw; i++)
		argv[1 + i] = words[i];
	argv[1 + nw] = "--help";
	argv[2 + nw] = NULL;
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc != 0 || !strstr(out, "usage: evald "))
		fail_msg("evald %s %s --help: exit %d, stdout: %.200s", words[0], nw > 1 ? words[1] : "", rc, out);
	char subs[32][32];
	int ns = names_under(out, "subcommands:", subs, 32), checked = 1;
	if (ns) {
		const char *w[6];
		for (int k = 0; k < ns; k++) {
			for (int i = 0; i < nw; i++)
				w[i] = words[i];
			w[nw] = subs[k];
			checked += check(w, nw + 1);
		}
	} else {
		/* A leaf: an unknown option is a usage error naming it. */
		assert_non_null(strstr(out, "-h, --help"));
		free(out), free(err);
		argv[1 + nw] = "--no-such-option";
		rc = tu_run(&out, &err, NULL, argv);
		if (rc != 2 || !strstr(err, "unknown option '--no-such-option'") || !strstr(err, "usage: evald "))
			fail_msg("evald %s %s --no-such-option: exit %d, stderr: %.300s", words[0], nw > 1 ? words[1] : "",
			         rc, err);
	}
	free(out), free(err);
	return checked;
}

static void every_command_and_subcommand_has_help_and_names_unknown_options(void **st)
{
	(void)st;
	char *out = NULL;
	const char *argv[] = {tu_evald(), "--help", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, argv), 0);
	char cmds[64][32];
	int n = names_under(out, "commands:", cmds, 64);
	assert_true(n >= 18);
	int checked = 0;
	for (int i = 0; i < n; i++) {
		const char *w[1] = {cmds[i]};
		checked += check(w, 1);
	}
	/* issue, proposal, regressions, suites (and its import/gen), engine, bench */
	assert_true(checked >= 50);
	free(out);
}

static void values_are_checked_against_their_bounds(void **st)
{
	(void)st;
	char *err = NULL;
	const char *conc[] = {tu_evald(), "run", "--model", "http://127.0.0.1:9/v1", "--concurrency", "0", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, conc), 2);
	assert_non_null(strstr(err, "--concurrency: '0' is not a whole number from 1 to 4096"));
	free(err);
	const char *missing[] = {tu_evald(), "report", "3", "--format", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, missing), 2);
	assert_non_null(strstr(err, "--format needs a value"));
	free(err);
	const char *choice[] = {tu_evald(), "report", "3", "--format=html5", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, choice), 2);
	assert_non_null(strstr(err, "--format: 'html5' is not one of md|markdown|json"));
	free(err);
	const char *extra[] = {tu_evald(), "compare", "1", "2", "3", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, extra), 2);
	assert_non_null(strstr(err, "unexpected argument '3'"));
	free(err);
	const char *few[] = {tu_evald(), "compare", "1", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, few), 2);
	assert_non_null(strstr(err, "expected RUN_A RUN_B"));
	free(err);
	const char *flagval[] = {tu_evald(), "runs", "--json=yes", NULL};
	assert_int_equal(tu_run(NULL, &err, NULL, flagval), 2);
	assert_non_null(strstr(err, "--json takes no value"));
	free(err);
}

static void help_shows_defaults_and_shared_option_groups(void **st)
{
	(void)st;
	char *out = NULL;
	const char *argv[] = {tu_evald(), "calibrate", "--help", NULL};
	assert_int_equal(tu_run(&out, NULL, NULL, argv), 0);
	/* calibrate takes the run options: the one table, shown with its defaults */
	assert_non_null(strstr(out, "--repeats R"));
	assert_non_null(strstr(out, "--concurrency N"));
	assert_non_null(strstr(out, "(default 16)"));
	assert_non_null(strstr(out, "--pattern REGEX"));
	assert_non_null(strstr(out, "--msa-top-k K"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_command_and_subcommand_has_help_and_names_unknown_options),
		cmocka_unit_test(values_are_checked_against_their_bounds),
		cmocka_unit_test(help_shows_defaults_and_shared_option_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
