/*
 * toolcall_int.h: what the tool-call files (toolcall_*.c) share and nothing
 * else may use.
 *
 * A typed value tree that keeps what BFCL's checker needs and JSON text
 * loses once it goes through cJSON: integers apart from floats (5 vs 5.0),
 * tuples apart from lists, strings with embedded NULs. One lenient parser
 * reads both JSON and Python literal syntax into it; all nodes live in an
 * arena that the owner frees in one call.
 */
#ifndef EV_TOOLCALL_INT_H
#define EV_TOOLCALL_INT_H

#include "scoring/scoring.h"

/* Caps: nesting of values, bytes of text read, calls in one answer. */
#define TC_MAX_DEPTH 64
#define TC_MAX_TEXT ((size_t)8 << 20)
#define TC_MAX_CALLS 1024
/* Prose is scanned for call-shaped pieces only this far. */
#define TC_MAX_PROSE ((size_t)256 << 10)
#define TC_MAX_NAME 256
#define TC_ARENA_MAX ((size_t)256 << 20)

typedef enum {
	TCV_NULL,
	TCV_BOOL,
	TCV_INT,
	TCV_FLOAT,
	TCV_STR,
	TCV_LIST,
	TCV_TUPLE,
	TCV_DICT
} tcv_kind;

typedef struct tcv tcv;
struct tcv {
	tcv_kind kind;
	bool b;
	bool big;       /* an integer outside int64: compare through `f` */
	int64_t i;
	double f;       /* also set for integers */
	char *s;        /* TCV_STR: NUL-terminated, `len` bytes (may hold NULs) */
	size_t len;
	tcv **items;    /* list/tuple elements, dict values */
	char **keys;    /* dict keys (NUL-terminated) */
	size_t *klens;
	size_t n;
};

/* Parser switches. */
typedef struct {
	bool names;   /* bare (dotted) identifiers read as strings: BFCL's variables */
	bool prose;   /* calls found in prose: "f(" tight, keyword arguments only */
} tcv_opts;

typedef struct {
	const char *s;
	size_t n, pos;
	ev_arena *a;
	int depth;
	tcv_opts o;
	char err[160];
} tcv_parser;

void tcv_parser_init(tcv_parser *p, ev_arena *a, const char *s, size_t n);
/* Parses one value at p->pos (leading whitespace skipped). NULL on error,
 * with p->err set and p->pos near the fault. */
tcv *tcv_parse_value(tcv_parser *p);
/* Parses the whole of s[0..n) as one value (whitespace around it only). On
 * failure sets the per-thread message "<what>: byte N: ..." and returns a
 * negative status. */
int tcv_parse_all(tcv **out, ev_arena *a, const char *s, size_t n, const char *what);
void tcv_skip_space(tcv_parser *p);
bool tcv_is_ident_start(char c);
bool tcv_is_ident_char(char c);

/* Node constructors (arena); NULL when the arena is full. */
tcv *tcv_new(ev_arena *a, tcv_kind k);
tcv *tcv_new_str(ev_arena *a, const char *s, size_t len);
/* Appends to a list/tuple (key NULL) or sets a dict key (replacing). */
int tcv_push(ev_arena *a, tcv *c, const char *key, size_t klen, tcv *v);

/* Dict lookup by a C string key; NULL when absent or `d` is not a dict. */
tcv *tcv_get(const tcv *d, const char *key);
bool tcv_is_str(const tcv *v, const char *s);
bool tcv_is_empty_str(const tcv *v);

/* Python `==`: numbers by value (bool counts as 0/1), strings bytewise,
 * a list never equals a tuple, dicts by key set and values. */
bool tcv_py_eq(const tcv *a, const tcv *b);

/* JSON text: floats keep a '.' or an exponent so a reader can tell them
 * from integers; tuples become arrays; non-finite floats become null. */
int tcv_print_json(ev_buf *b, const tcv *v);
/* A short, human form of a value for details (JSON, clipped); malloc'd. */
char *tcv_show(const tcv *v, size_t max);
/* Python's name for the kind ("int", "str", "list", ...). */
const char *tcv_kind_name(tcv_kind k);

/* ---- calls ------------------------------------------------------------ */

typedef struct {
	ev_toolcall pub;
	tcv *args; /* a dict */
} tc_call;

struct ev_toolcalls {
	ev_arena *a;
	tc_call *calls;
	size_t n, cap;
	bool channel; /* read from the API's tool_calls, not from text */
};

/* Checks calls against already-parsed BFCL functions and ground truth. */
int tc_check_values(const tcv *functions, const tcv *ground_truth, const char *category,
                    const ev_toolcalls *calls, ev_toolcall_verdict *out);

#endif
