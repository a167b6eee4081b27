/*
 * evald: the program. Parses the global options, then hands the rest of the
 * command line to one subcommand from the table in commands.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "evald/cli.h"

int ev_cmd_version(const ev_cli *cli, int argc, char **argv);


static void usage(FILE *to)
{
	fprintf(to, "usage: evald [--db FILE] [--json] [-v|-q] COMMAND [ARGS]\n\ncommands:\n");
	for (const ev_command *c = ev_commands; c->name; c++)
		fprintf(to, "  %-12s %s\n", c->name, c->summary);
	fprintf(to, "\n'evald COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
	ev_cli cli = {getenv("EVALD_DB") ? getenv("EVALD_DB") : "evald.db", false, false, argv[0]};
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
			return c->fn(&cli, argc - i, argv + i);
	fprintf(stderr, "evald: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return EV_EXIT_USAGE;
}
