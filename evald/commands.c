/* The table of subcommands (see commands.h). Keep it sorted by name. */
#include "evald/commands.h"

#include <stddef.h>

int ev_cmd_bench(const ev_cli *cli, int argc, char **argv);
int ev_cmd_engine(const ev_cli *cli, int argc, char **argv);
int ev_cmd_merge(const ev_cli *cli, int argc, char **argv);
int ev_cmd_report(const ev_cli *cli, int argc, char **argv);
int ev_cmd_rescore(const ev_cli *cli, int argc, char **argv);
int ev_cmd_run(const ev_cli *cli, int argc, char **argv);
int ev_cmd_runs(const ev_cli *cli, int argc, char **argv);
int ev_cmd_score(const ev_cli *cli, int argc, char **argv);
int ev_cmd_suites(const ev_cli *cli, int argc, char **argv);
int ev_cmd_version(const ev_cli *cli, int argc, char **argv);

const ev_command ev_commands[] = {
	{"bench", ev_cmd_bench, "benchmarks: runner (more as modules land)"},
	{"engine", ev_cmd_engine, "the bundled inference engine: info, logits, generate, mkmodel"},
	{"merge", ev_cmd_merge, "join the runs of several shards into one run"},
	{"report", ev_cmd_report, "a run's report as Markdown or JSON"},
	{"rescore", ev_cmd_rescore, "score a run's stored answers again without the model"},
	{"run", ev_cmd_run, "evaluate a model on suites (or --resume a run)"},
	{"runs", ev_cmd_runs, "list the runs in the tracker"},
	{"score", ev_cmd_score, "score completions made elsewhere (HumanEval-style) by running their tests"},
	{"suites", ev_cmd_suites, "validate, list and import suites"},
	{"version", ev_cmd_version, "print the version"},
	{NULL, NULL, NULL},
};
