/*
 * Helpers the tests share: scratch folders, running the evald program and
 * capturing its output, starting the fixture server, reading the
 * environment that tests/CMakeLists.txt sets.
 */
#ifndef EV_TESTUTIL_H
#define EV_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/base.h"

/* A fresh empty folder under EV_TEST_TMP, named after `tag`; malloc'd. */
char *tu_tmpdir(const char *tag);
/* Path join into a malloc'd string. */
char *tu_path(const char *dir, const char *name);
/* Writes text to dir/name; returns the malloc'd full path. */
char *tu_write(const char *dir, const char *name, const char *text);
/* EV_SHARED_DIR/data/<rel> when it exists, else NULL (the test should skip). */
char *tu_shared(const char *rel);
const char *tu_evald(void);

/* Runs argv (argv[0] is the program) with optional stdin text, waits, and
 * captures stdout and stderr (each capped at 64 MiB). Returns the exit
 * status (or 128 + signal). out/err may be NULL; free them with free(). */
int tu_run(char **out, char **err, const char *stdin_text, const char *const argv[]);
/* The same through a printf-built shell command line (/bin/sh -c). */
int tu_sh(char **out, char **err, const char *fmt, ...) EV_PRINTF(3, 4);

/* The fixture OpenAI-compatible server, started on a free loopback port
 * with the given extra arguments (NULL-terminated). */
typedef struct {
	int pid;
	int port;
	char url[64]; /* http://127.0.0.1:PORT/v1 */
} tu_server;
int tu_server_start(tu_server *s, const char *const extra_args[]);
void tu_server_stop(tu_server *s);

#endif
