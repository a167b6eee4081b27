/*
 * evald: the program. Parses the global options, then hands the rest of the
 * command line to one subcommand from the table in commands.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "evald/cli.h"
#include "evald/remote.h"

int ev_cmd_version(const ev_cli *cli, int argc, char **argv);


static void usage(FILE *to)
{
	fprintf(to, "usage: evald [--db FILE] [--json] [-v|-q] COMMAND [ARGS]\n\ncommands:\n");
	for (const ev_command *c = ev_commands; c->name; c++)
		fprintf(to, "  %-12s %s\n", c->name, c->summary);
	fprintf(to, "\n'evald COMMAND --help' describes one command.\n");
}

/* A reading command against a team tracker: the server's runs, with the
 * results of the runs the command names (every run's for `runs`), copied
 * into a temporary mirror that the command reads. */
static int through_mirror(ev_cli *cli, const ev_command *c, int argc, char **argv)
{
	static const char *const reads[] = {"runs", "report", "compare", "export", "route", NULL};
	bool ok = false;
	for (int i = 0; reads[i]; i++)
		ok = ok || !strcmp(c->name, reads[i]);
	if (!ok) {
		fprintf(stderr, "evald %s: --tracker is for run, submit, runs, report, compare, export and route\n", c->name);
		return EV_EXIT_USAGE;
	}
	int64_t ids[64];
	size_t n = 0;
	if (!strcmp(c->name, "runs"))
		ids[n++] = -1;
	for (int i = 1; i < argc && n < 64; i++) {
		int64_t v;
		if (ev_parse_i64(argv[i], &v) && v > 0)
			ids[n++] = v;
	}
	char path[4096];
	if (ev_remote_mirror_path(path, sizeof path, "tracker"))
		return ev_cli_fail("--tracker");
	ev_remote *r = NULL;
	ev_tracker *t = NULL;
	int rc = ev_remote_open(&r, cli->tracker_url, cli->tracker_token_env);
	if (!rc)
		rc = ev_tracker_open(&t, path);
	if (!rc)
		rc = ev_remote_mirror(r, t, ids, n);
	ev_tracker_close(t);
	ev_remote_free(r);
	int out;
	if (rc) {
		out = ev_cli_fail("--tracker");
	} else {
		ev_cli local = *cli;
		local.db_path = path;
		local.tracker_url = NULL;
		out = c->fn(&local, argc, argv);
	}
	ev_remote_mirror_remove(path);
	return out;
}

int main(int argc, char **argv)
{
	ev_cli cli = {getenv("EVALD_DB") ? getenv("EVALD_DB") : "evald.db", false, false, argv[0], NULL, NULL};
	/* --tracker URL and --tracker-token-env VAR wherever they stand (up to a
	 * "--"): taken out here, so every command takes them alike */
	int w = 1;
	bool dashdash = false;
	for (int r = 1; r < argc; r++) {
		dashdash = dashdash || !strcmp(argv[r], "--");
		if (!dashdash && (!strcmp(argv[r], "--tracker") || !strcmp(argv[r], "--tracker-token-env"))) {
			if (r + 1 >= argc) {
				fprintf(stderr, "evald: %s needs a value\n", argv[r]);
				return EV_EXIT_USAGE;
			}
			if (!strcmp(argv[r], "--tracker"))
				cli.tracker_url = argv[r + 1];
			else
				cli.tracker_token_env = argv[r + 1];
			r++;
			continue;
		}
		argv[w++] = argv[r];
	}
	argc = w;
	argv[argc] = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--db") && i + 1 < argc)
			cli.db_path = argv[++i];
		else if (!strcmp(argv[i], "--json"))
			cli.json = true;
		else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			ev_log_set_level(EV_LOG_DEBUG);
		else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			cli.quiet = true;
			ev_log_set_level(EV_LOG_WARN);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			return ev_cmd_version(&cli, 0, NULL);
		} else {
			fprintf(stderr, "evald: unknown option %s\n", argv[i]);
			usage(stderr);
			return EV_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return EV_EXIT_USAGE;
	}
	for (const ev_command *c = ev_commands; c->name; c++)
		if (!strcmp(c->name, argv[i]))
			/* run and submit take the team tracker themselves; reading commands through a mirror */
			return cli.tracker_url && strcmp(c->name, "run") && strcmp(c->name, "submit")
			           ? through_mirror(&cli, c, argc - i, argv + i)
			           : c->fn(&cli, argc - i, argv + i);
	fprintf(stderr, "evald: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return EV_EXIT_USAGE;
}
