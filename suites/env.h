/*
 * suites/env.h: tool environments (suites/env*.c).
 *
 * Deterministic in-memory worlds that a tool-use agent acts on, built from
 * a sample's metadata.environment (or tests.environment): one object
 * {"type":"fs"|"kv"|"sqlite"|"calculator", ...} or an array of them with
 * distinct types. Each exposes OpenAI tool definitions and executes calls;
 * a bad call (unknown tool, bad arguments, refused permission, path escape)
 * is a tool result {"error":"..."}, never a failure. See suites/README.md,
 * "Tool environments", for each type's spec fields, tools and state. */
#ifndef EV_SUITES_ENV_H
#define EV_SUITES_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct ev_env ev_env;

/* Builds the environments a spec describes (JSON text). `what` names the
 * source in errors ("samples.jsonl:3: metadata.environment"). */
int ev_env_new(ev_env **out, const char *spec_json, const char *what);
void ev_env_free(ev_env *e);
/* The OpenAI tools array of every environment, as JSON text. Borrowed. */
const char *ev_env_tools_json(const ev_env *e);
/* True when one of the environments implements tool `name`. */
bool ev_env_has_tool(const ev_env *e, const char *name);
/* Executes one call; *result_json (malloc'd) is the tool's JSON answer,
 * {"error":"..."} for anything the model did wrong. Returns a negative
 * status only when memory ran out. */
int ev_env_execute(ev_env *e, const char *name, const char *arguments_json, char **result_json);
/* The canonical end state, {"<type>":{...}, ...}, malloc'd JSON text. */
int ev_env_state_json(const ev_env *e, char **out);

/* Compares a state with an expected one: objects by subset (every expected
 * key present and matching), arrays element by element with equal length,
 * numbers within 1e-9 relative, other values exactly. *match is set; when
 * false, *detail (malloc'd, may be NULL on no memory) names the first path
 * that differs ("fs.files./notes.txt: expected \"hi\", got \"ho\""). */
int ev_env_state_match(bool *match, char **detail, const char *state_json, const char *expected_json);

/* Evaluates an arithmetic expression (+ - * / ^ or **, parentheses, unary
 * minus, sqrt abs round, pi e). On a bad expression returns EV_E_INVALID
 * with the message saying why and where. */
int ev_env_calc(double *out, const char *expr);

#endif
