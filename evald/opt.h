/*
 * evald/opt.h: the declarative option table every command parses its
 * arguments with, in the manner of curl's tool option table. A command
 * describes itself once (an ev_cmd_spec: name, synopsis, what it does, its
 * options and positional arguments); from that one description come the
 * parser with its error messages, `--help`, and, for commands whose
 * settings are stored (a run's configuration), the JSON written and read
 * back.
 *
 * Each option writes into a field of the command's own options struct,
 * named by offsetof; the caller fills that struct with its defaults first
 * (they are shown by --help).
 */
#ifndef EV_OPT_H
#define EV_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

typedef enum {
	EV_OPT_FLAG,  /* bool, no value */
	EV_OPT_STR,   /* const char *, the argv string itself */
	EV_OPT_STRS,  /* repeatable: const char *[max] plus an int count */
	EV_OPT_INT,   /* int, long or int64_t (by field size) in [lo, hi] */
	EV_OPT_NUM,   /* double in [lo, hi] */
	EV_OPT_ID,    /* int64_t id >= 1 (a run, an issue...) */
	EV_OPT_CHOICE,/* const char *, one of `choices` ("a|b|c") */
	EV_OPT_FN,    /* the option's own parser */
} ev_opt_kind;

typedef struct ev_opt ev_opt;

/* An EV_OPT_FN parser: 0, or a negative status with the message set
 * (without the command's name: "--shard: ..."). `name` is what was given. */
typedef int (*ev_opt_fn)(void *opts, const ev_opt *o, const char *name, const char *value);

enum {
	EV_OPT_VALUE = 1u << 0,  /* EV_OPT_FN: takes a value */
	EV_OPT_PREFIX = 1u << 1, /* the name is a prefix: "--msa-" matches --msa-top-k */
	EV_OPT_HIDDEN = 1u << 2, /* left out of --help (internal plumbing) */
};

struct ev_opt {
	const char *name;    /* "--model" */
	char short_name;     /* 'o' for -o; 0 for none */
	ev_opt_kind kind;
	size_t off;          /* offsetof the field */
	size_t size;         /* sizeof the field (EV_OPT_INT, EV_OPT_STRS's array) */
	size_t count_off;    /* EV_OPT_STRS: offsetof its int count */
	size_t has_off;      /* when nonzero: offsetof a bool set when the option was given */
	double lo, hi;       /* EV_OPT_INT / EV_OPT_NUM bounds */
	const char *choices; /* EV_OPT_CHOICE: "a|b|c" */
	const char *meta;    /* the value's name in --help ("URL|DIR") */
	const char *help;
	const char *key;     /* the key in a stored configuration, or NULL */
	ev_opt_fn fn;
	unsigned flags;
};

/* Table rows (T is the options struct type). */
#define EV_O_FLAG(nm, T, f, hlp) {.name = (nm), .kind = EV_OPT_FLAG, .off = offsetof(T, f), .help = (hlp)}
#define EV_O_STR(nm, T, f, mt, hlp) \
	{.name = (nm), .kind = EV_OPT_STR, .off = offsetof(T, f), .meta = (mt), .help = (hlp)}
#define EV_O_STRS(nm, T, f, cnt, mt, hlp)                                                                  \
	{.name = (nm), .kind = EV_OPT_STRS, .off = offsetof(T, f), .size = sizeof(((T *)0)->f),           \
	 .count_off = offsetof(T, cnt), .meta = (mt), .help = (hlp)}
#define EV_O_INT(nm, T, f, l, h, mt, hlp)                                                                  \
	{.name = (nm), .kind = EV_OPT_INT, .off = offsetof(T, f), .size = sizeof(((T *)0)->f), .lo = (l), \
	 .hi = (h), .meta = (mt), .help = (hlp)}
#define EV_O_NUM(nm, T, f, l, h, mt, hlp)                                                                 \
	{.name = (nm), .kind = EV_OPT_NUM, .off = offsetof(T, f), .lo = (l), .hi = (h), .meta = (mt),    \
	 .help = (hlp)}
#define EV_O_ID(nm, T, f, mt, hlp) \
	{.name = (nm), .kind = EV_OPT_ID, .off = offsetof(T, f), .meta = (mt), .help = (hlp)}
#define EV_O_CHOICE(nm, T, f, ch, hlp) \
	{.name = (nm), .kind = EV_OPT_CHOICE, .off = offsetof(T, f), .choices = (ch), .help = (hlp)}
#define EV_O_FN(nm, fl, mt, hlp, f) {.name = (nm), .kind = EV_OPT_FN, .meta = (mt), .help = (hlp), .fn = (f), .flags = (fl)}
#define EV_O_END {.name = NULL}

/* A command (or subcommand) described once. */
typedef struct {
	const char *name;       /* "run", "issue add" */
	const char *synopsis;   /* after "usage: evald NAME ": "--model URL|DIR [OPTIONS]" */
	const char *about;      /* what it does, a few lines */
	const ev_opt *opts;     /* ends with EV_O_END; may be NULL */
	const char *positional; /* the positional arguments' names for help ("RUN_A RUN_B"), or NULL */
	int min_pos, max_pos;   /* how many positional arguments */
	const char *more;       /* text after the options in --help (examples, notes), or NULL */
	/* Options of another table accepted as well (a shared group: the checker
	 * flags, the engine flags), writing into the same struct; or NULL. */
	const ev_opt *const *groups;
} ev_cmd_spec;

#define EV_OPT_MAX_POS 16

/* Parses argv[1..argc) by the spec into `opts` and the positional arguments
 * into pos[0..*n_pos) (pos may be NULL when max_pos is 0). "--" ends the
 * options. Returns 0, EV_OPT_HELP after printing --help to stdout, or
 * EV_OPT_USAGE after printing an error naming the command and the option,
 * and the synopsis, to stderr. */
#define EV_OPT_HELP 1
#define EV_OPT_USAGE (-1)
int ev_opt_parse(const ev_cmd_spec *spec, void *opts, int argc, char **argv, const char **pos, int *n_pos);

/* The exit code for a parse result other than 0: 0 after help, 2 after a
 * usage error. */
int ev_opt_exit(int parse_rc);

/* Prints the command's help: usage line, about, options with their value
 * names, defaults (read from `defaults`, may be NULL) and help text. */
void ev_opt_help(const ev_cmd_spec *spec, const void *defaults, FILE *to);
/* The one-line usage ("usage: evald NAME SYNOPSIS"). */
void ev_opt_usage(const ev_cmd_spec *spec, FILE *to);

/* The stored configuration: every option with a key, as JSON (flags as
 * booleans, lists as arrays, numbers as numbers; an option with has_off
 * only when given). EV_OPT_FN options are stored by their owner. */
int ev_opt_to_json(const ev_cmd_spec *spec, const void *opts, cJSON *into);
/* Reads it back into `opts` (strings point into `j`, which the caller
 * keeps); absent keys leave the field as it is. EV_E_INVALID names the key
 * of a value of the wrong type or out of range. */
int ev_opt_from_json(const ev_cmd_spec *spec, void *opts, const cJSON *j);

#endif
