/* The table of subcommands (see commands.h). Keep it sorted by name. */
#include "evald/commands.h"

#include <stddef.h>

int ev_cmd_bench(const ev_cli *cli, int argc, char **argv);
int ev_cmd_calibrate(const ev_cli *cli, int argc, char **argv);
int ev_cmd_compare(const ev_cli *cli, int argc, char **argv);
int ev_cmd_engine(const ev_cli *cli, int argc, char **argv);
int ev_cmd_export(const ev_cli *cli, int argc, char **argv);
int ev_cmd_issue(const ev_cli *cli, int argc, char **argv);
int ev_cmd_merge(const ev_cli *cli, int argc, char **argv);
int ev_cmd_proposal(const ev_cli *cli, int argc, char **argv);
int ev_cmd_regressions(const ev_cli *cli, int argc, char **argv);
int ev_cmd_report(const ev_cli *cli, int argc, char **argv);
int ev_cmd_rescore(const ev_cli *cli, int argc, char **argv);
int ev_cmd_route(const ev_cli *cli, int argc, char **argv);
int ev_cmd_run(const ev_cli *cli, int argc, char **argv);
int ev_cmd_runs(const ev_cli *cli, int argc, char **argv);
int ev_cmd_score(const ev_cli *cli, int argc, char **argv);
int ev_cmd_serve(const ev_cli *cli, int argc, char **argv);
int ev_cmd_submit(const ev_cli *cli, int argc, char **argv);
int ev_cmd_suites(const ev_cli *cli, int argc, char **argv);
int ev_cmd_triage(const ev_cli *cli, int argc, char **argv);
int ev_cmd_version(const ev_cli *cli, int argc, char **argv); /* cmd_version.c */
int ev_cmd_watch(const ev_cli *cli, int argc, char **argv);

const ev_command ev_commands[] = {
	{"bench", ev_cmd_bench, "benchmarks beside baselines: runner, engine, sandbox, attention"},
	{"calibrate", ev_cmd_calibrate, "measure the noise floor: the same evaluation repeated, per-suite variance"},
	{"compare", ev_cmd_compare, "paired comparison of two runs; --file-regressions files significant drops"},
	{"engine", ev_cmd_engine, "the bundled inference engine: info, logits, generate, mkmodel"},
	{"export", ev_cmd_export, "a run's per-sample rows as JSON lines or CSV"},
	{"issue", ev_cmd_issue, "community issue reports: add, list, show, close, import (GitHub), repro"},
	{"merge", ev_cmd_merge, "join the runs of several shards into one run"},
	{"proposal", ev_cmd_proposal, "training proposals: new, join, status, show, list, export"},
	{"regressions", ev_cmd_regressions, "list, show and triage regressions between checkpoints"},
	{"report", ev_cmd_report, "a run's report (Markdown, JSON, HTML), or a checkpoint series (--series)"},
	{"rescore", ev_cmd_rescore, "score a run's stored answers again without the model"},
	{"route", ev_cmd_route, "routing evaluated offline over stored runs: each model, routers, the oracle, the hull"},
	{"run", ev_cmd_run, "evaluate a model on suites (or --resume a run)"},
	{"runs", ev_cmd_runs, "list the runs in the tracker"},
	{"score", ev_cmd_score, "score completions made elsewhere (HumanEval-style) by running their tests"},
	{"serve", ev_cmd_serve, "HTTP server: the API (issues, regressions, proposals) and, with --model, OpenAI endpoints"},
	{"submit", ev_cmd_submit, "an evaluation as Slurm jobs: shards as an array, then merge, compare, report"},
	{"suites", ev_cmd_suites, "validate, list, import (HumanEval, MBPP, BFCL) and generate suites"},
	{"triage", ev_cmd_triage, "group near-duplicate issue reports into clusters and label them"},
	{"version", ev_cmd_version, "print the version"},
	{"watch", ev_cmd_watch, "watch a folder for new checkpoints: evaluate, compare with the baseline, report"},
	{NULL, NULL, NULL},
};
