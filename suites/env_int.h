/*
 * env_int.h: what the tool environments (suites/env*.c) share. Each kind
 * fills one table; env.c builds, dispatches and combines them.
 */
#ifndef EV_SUITES_ENV_INT_H
#define EV_SUITES_ENV_INT_H

#include "suites/suites.h"

/* Caps shared by the kinds: a tool result, a string argument. */
#define EV_ENV_MAX_RESULT ((size_t)64 << 10)
#define EV_ENV_MAX_ARG ((size_t)1 << 20)

typedef struct {
	const char *type;
	/* Builds the state from the spec object; errors name `what`. */
	int (*create)(void **self, const cJSON *spec, const char *what);
	/* The tools array (cJSON, caller-owned) this instance offers. */
	cJSON *(*tools)(const void *self);
	/* Runs tool `name`; *result is an object, {"error":...} for the
	 * model's mistakes. Negative status only for no memory. */
	int (*exec)(void *self, const char *name, const cJSON *args, cJSON **result);
	/* The canonical state object (caller-owned), NULL on no memory. */
	cJSON *(*state)(const void *self);
	void (*destroy)(void *self);
} ev_env_kind;

extern const ev_env_kind ev_env_kind_fs;
extern const ev_env_kind ev_env_kind_kv;
extern const ev_env_kind ev_env_kind_sqlite;
extern const ev_env_kind ev_env_kind_calculator;

/* {"error": printf(...)}; NULL on no memory. */
cJSON *ev_env_error(const char *fmt, ...) EV_PRINTF(1, 2);
/* One OpenAI function tool: params is a JSON Schema "properties" object
 * text, required a JSON array text. Added to arr; false on no memory. */
bool ev_env_tool_add(cJSON *arr, const char *name, const char *desc, const char *props_json,
                     const char *required_json);
/* A required string argument, or NULL with *err set to an error result. */
const char *ev_env_arg_str(const cJSON *args, const char *key, bool required, cJSON **err);
/* Checks that args has no key outside `known` (NULL-terminated). */
cJSON *ev_env_check_args(const cJSON *args, const char *const *known);

#endif
