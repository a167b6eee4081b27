/*
 * runners/agent.h: the agent loop (runners/agent.c).
 *
 * Multi-turn tool use against a stateful environment (suites' ev_env): the
 * model gets the messages and the environment's tools (plus the sample's
 * own), each tool call it makes is executed and answered with a tool
 * message, until it answers without calling a tool or a limit is hit. The
 * end state is then scored: see runners/README.md, "Agent loop". */
#ifndef EV_RUNNERS_AGENT_H
#define EV_RUNNERS_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "runners/runner.h"

typedef struct {
	const char *model;      /* model name sent in requests */
	const char *suite_root; /* for attachments, or NULL */
	int max_turns;          /* model requests (10) */
	long max_tokens;        /* completion tokens over all turns (0: none) */
	double max_wall_s;      /* checked between turns (0: none) */
	int route;              /* a router's model for every turn (ev_request.route), 0: none */
} ev_agent_options;

#define EV_AGENT_OPTIONS_INIT {.max_turns = 10, .max_wall_s = 600.0}

typedef struct {
	bool failed;            /* a backend error/timeout: not scored */
	ev_reason reason;       /* EV_REASON_NONE when score is 1 */
	double score;           /* 0 or 1 */
	char *detail;           /* what differed, the limit hit, or the error */
	char *final_text;       /* the last answer (thinking kept), or NULL */
	char *tool_calls_json;  /* every call made, OpenAI format, or NULL */
	char *state_json;       /* the environment's end state */
	char *first_request_json; /* the first request body (for the hash) */
	char *finish_reason;    /* of the last completion */
	int turns;              /* model requests made */
	int n_tool_calls;
	int prompt_tokens, completion_tokens, thinking_tokens; /* over every agent */
	double latency_s;       /* sum over the turns */
	int attempts;
	/* with metadata.agents: per agent ("orchestrator" and each worker)
	 * {turns, prompt_tokens, completion_tokens, thinking_tokens,
	 * tool_calls, delegations}; else NULL */
	char *agents_json;
} ev_agent_result;

void ev_agent_result_clear(ev_agent_result *r);

/* True when the sample goes through the agent loop: the suite's kind is
 * "tool-use-multiturn" or the sample has metadata.environment /
 * tests.environment. */
bool ev_agent_wants(const ev_suite *suite, const ev_sample *s);

/* Runs one sample to the end and scores it. The backend must have nothing
 * else in flight (the loop polls it for its own completions). Returns 0
 * with *out filled (a backend failure is out->failed), or a negative status
 * when the sample's environment or tests are malformed (the suite's
 * fault; the message names the sample). */
int ev_agent_run(ev_backend *b, const ev_sample *s, const ev_gen *gen, const ev_agent_options *opt,
                 ev_agent_result *out);

#endif
