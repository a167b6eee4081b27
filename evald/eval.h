/*
 * evald/eval.h: one evaluation as a function. `evald run`, `evald
 * calibrate` (its repeats, in process) and `evald watch` (through its child
 * `evald run`) all evaluate through ev_eval_run; the settings of an
 * evaluation are one struct with one option table (ev_eval_spec), from
 * which `evald run --help` and the configuration stored with the run both
 * come.
 */
#ifndef EV_EVAL_H
#define EV_EVAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "evald/cli.h"

#define EV_EVAL_MAX_LIST 64

/* Everything that shapes an evaluation's answers and scores. */
typedef struct {
	const char *models[EV_EVAL_MAX_LIST]; /* URLs, or one checkpoint folder */
	int n_models;
	const char *model_name;               /* NULL: the first model */
	const char *suites[EV_EVAL_MAX_LIST]; /* none: the embedded default suite */
	int n_suites;
	ev_checker_flags checker;             /* flags; the spec is made from them */
	int concurrency;
	double timeout_s;
	int retries;
	const char *headers[EV_EVAL_MAX_LIST];
	int n_headers;
	const char *api_key_env;
	int64_t limit;
	int epochs;                           /* 0: each suite's own */
	int shard_k, shard_n;
	int max_tokens;                       /* 0: each suite's own */
	double temperature, top_p;            /* < 0: each suite's own */
	bool has_temperature, has_top_p;
	int64_t seed;
	bool has_seed;
	bool no_cache;
	const char *chat_template; /* --chat-template for a checkpoint; NULL: its own */
	/* --effort none,low,medium,high: every suite run at each level, as its
	 * own suite "NAME@effort=LEVEL" (OpenAI's reasoning_effort); NULL: once */
	const char *effort;
	/* --router SPEC|FILE: each --model its own model, each sample answered
	 * by the one its category routes to (ev_route_table_parse); NULL: the
	 * --model URLs are replicas of one model sharing the load */
	const char *router;
	ev_engine_flags engine;               /* --attention, --msa-*, --kv-* */
	/* owned: the checker spec, from `checker` or from a stored run */
	char *checker_spec;
} ev_eval_config;

/* The defaults (concurrency 16, timeout 300 s, 6 retries, ...). */
void ev_eval_config_init(ev_eval_config *c);
void ev_eval_config_clear(ev_eval_config *c);

/* The option rows of ev_eval_config, for commands that take an
 * evaluation's settings (run, calibrate). */
extern const ev_opt ev_eval_opts[];

/* The URL with its password (or bare user, often a token) replaced by
 * "[redacted]"; malloc'd. Secrets are never stored with a run. */
char *ev_eval_redact_url(const char *url);

/* The configuration stored with a run (JSON, malloc'd; header values and
 * URL passwords redacted), and read back
 * (strings point into `j`, which the caller keeps while `c` is used). */
int ev_eval_config_to_json(const ev_eval_config *c, char **out);
int ev_eval_config_from_json(ev_eval_config *c, const cJSON *j);

typedef struct {
	int64_t resume;       /* > 0: finish this run, with its stored configuration */
	bool quiet;           /* no progress line, no "run N" line */
	/* Set (by a signal handler) to stop: the run ends "interrupted". */
	volatile sig_atomic_t *stop;
	/* Called once the run exists (before any result): a child reports its
	 * id through this (evald run --status-fd). May be NULL. */
	void (*on_started)(void *ctx, int64_t run_id);
	void *ctx;
	/* A team tracker (evald/remote.h): the run is created there first (the
	 * local tracker, a mirror, takes the same id), every stored result is
	 * sent there, and the end waits until the server has them all. */
	struct ev_remote *remote;
} ev_eval_options;

typedef struct {
	int64_t run_id;       /* 0 when the run was never created */
	/* "finished", "finished_with_errors" (some results are errors, left out
	 * of the score), "interrupted" or "failed" (static) */
	const char *status;
	char *summary_json;   /* when complete, or failed with every request failing (malloc'd) */
	long scored, errors;  /* scored samples and error results, when complete */
	long answered, cached; /* results this invocation produced, and how many came from the cache */
} ev_eval_outcome;

void ev_eval_outcome_clear(ev_eval_outcome *o);

/* Evaluates: loads the suites and checkers (before anything is stored),
 * makes the backend, creates the run (or takes the stored one on resume),
 * runs every suite streaming results into the tracker, and stores the
 * summary. On resume the stored configuration is used, with `c`'s
 * concurrency when it is not the default.
 * Returns 0 with out->status "finished" or "finished_with_errors"; EV_E_*
 * with the message set otherwise (out->run_id and status say how far it
 * got), EV_E_BACKEND when every request failed (status "failed", the first
 * error in the message). */
int ev_eval_run(ev_tracker *t, ev_eval_config *c, const ev_eval_options *o, ev_eval_outcome *out);

#endif
