/* The table of subcommands (see commands.h). Keep it sorted by name. */
#include "evald/commands.h"

#include <stddef.h>

int ev_cmd_version(const ev_cli *cli, int argc, char **argv);

const ev_command ev_commands[] = {
	{"version", ev_cmd_version, "print the version"},
	{NULL, NULL, NULL},
};
