/*
 * The evald program's subcommands. Each lives in its own cmd_*.c file and
 * takes the arguments after its name; the global options (--db, -v, -q)
 * are parsed by main.c into ev_cli.
 */
#ifndef EV_COMMANDS_H
#define EV_COMMANDS_H

#include <stdbool.h>

typedef struct {
	const char *db_path; /* --db FILE, default ./evald.db */
	bool json;           /* --json given before the subcommand */
	bool quiet;
	const char *argv0;   /* path of this program */
	/* --tracker URL (anywhere before a "--"): a team tracker, an evald serve
	 * (evald/remote.h); its token from $EVALD_API_TOKEN or the variable
	 * --tracker-token-env names */
	const char *tracker_url;
	const char *tracker_token_env;
} ev_cli;

typedef int (*ev_cmd_fn)(const ev_cli *cli, int argc, char **argv);

typedef struct {
	const char *name;
	ev_cmd_fn fn;
	const char *summary;
} ev_command;

/* The table, in commands.c. Each entry's line is owned by its command. */
extern const ev_command ev_commands[];

/* Exit codes: 0 success, 1 failure of the job, 2 bad usage. */
#define EV_EXIT_FAIL 1
#define EV_EXIT_USAGE 2

#endif
