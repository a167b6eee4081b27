/* evald version [--json]: the program's version. */
#include <stdio.h>

#include "evald/cli.h"

#define EVALD_VERSION "0.1.0"

int ev_cmd_version(const ev_cli *cli, int argc, char **argv);

static const ev_cmd_spec version_spec = {
	.name = "version",
	.synopsis = "[--json]",
	.about = "Prints evald's version.",
	.opts = ev_json_only_opts,
};

int ev_cmd_version(const ev_cli *cli, int argc, char **argv)
{
	ev_json_opts jo = {cli->json};
	int prc = argv ? ev_opt_parse(&version_spec, &jo, argc, argv, NULL, NULL) : 0;
	if (prc)
		return ev_opt_exit(prc);
	if (jo.json)
		printf("{\"version\":\"%s\"}\n", EVALD_VERSION);
	else
		printf("evald %s\n", EVALD_VERSION);
	return 0;
}

