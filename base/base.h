/*
 * base/: the small shared base every module uses.
 *
 * Status codes with a per-thread message, logging, byte buffers with a hard
 * cap, arenas, cJSON helpers, SHA-256 (libcrypto), time and the progress line.
 * Everything here is plain C11 plus POSIX; nothing here knows about suites,
 * models or the tracker.
 */
#ifndef EV_BASE_H
#define EV_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#if defined(__GNUC__)
#define EV_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define EV_PRINTF(f, a)
#endif

/* ---- status codes ---------------------------------------------------- */

/* Every fallible function returns 0 or one of these (negative). The text of
 * the failure is kept per thread: ev_error_msg(). */
typedef enum {
	EV_OK = 0,
	EV_E_NOMEM = -1,    /* allocation failed */
	EV_E_IO = -2,       /* file or socket I/O failed */
	EV_E_PARSE = -3,    /* malformed input (JSON, JSONL, header...) */
	EV_E_INVALID = -4,  /* well formed but not acceptable (bad field value) */
	EV_E_LIMIT = -5,    /* a hard cap was reached (size, count, depth) */
	EV_E_NOTFOUND = -6, /* a named thing does not exist */
	EV_E_UNSAFE = -7,   /* refused for safety (path escape, link, bomb) */
	EV_E_BACKEND = -8,  /* the model backend failed (HTTP, engine) */
	EV_E_TIMEOUT = -9,  /* a deadline passed */
	EV_E_DB = -10,      /* the tracker's SQLite failed */
	EV_E_UNSUPPORTED = -11, /* valid but not supported by this build */
	EV_E_INTERNAL = -12 /* broken invariant inside evald */
} ev_status;

/* A short fixed name for a status ("parse", "limit", ...). */
const char *ev_status_name(int status);

/* Sets this thread's message and returns `code`, so that a failing path
 * reads `return ev_error_set(EV_E_PARSE, "%s:%d: ...", file, line);`. */
int ev_error_set(int code, const char *fmt, ...) EV_PRINTF(2, 3);
/* Prefixes the current message with "prefix: " and returns `code`. */
int ev_error_wrap(int code, const char *fmt, ...) EV_PRINTF(2, 3);
/* The message of the last failure on this thread ("" if none). Borrowed,
 * valid until the next ev_error_* call on this thread. */
const char *ev_error_msg(void);
int ev_error_code(void);
void ev_error_clear(void);

/* ---- logging ---------------------------------------------------------- */

typedef enum { EV_LOG_ERROR, EV_LOG_WARN, EV_LOG_INFO, EV_LOG_DEBUG } ev_log_level;

void ev_log_set_level(ev_log_level level);
ev_log_level ev_log_get_level(void);
/* Lines go to stderr as "evald: level: message". Thread-safe. */
void ev_log(ev_log_level level, const char *fmt, ...) EV_PRINTF(2, 3);
#define ev_log_error(...) ev_log(EV_LOG_ERROR, __VA_ARGS__)
#define ev_log_warn(...) ev_log(EV_LOG_WARN, __VA_ARGS__)
#define ev_log_info(...) ev_log(EV_LOG_INFO, __VA_ARGS__)
#define ev_log_debug(...) ev_log(EV_LOG_DEBUG, __VA_ARGS__)

/* ---- buffers ---------------------------------------------------------- */

/* A growable byte buffer with a hard maximum: appends past `max` fail with
 * EV_E_LIMIT and leave the buffer as it was. The data is always followed by
 * a NUL byte (not counted in len), so text can be used as a C string. */
typedef struct {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
} ev_buf;

#define EV_BUF_INIT(maxbytes) {.max = (maxbytes)}

void ev_buf_init(ev_buf *b, size_t max);
int ev_buf_append(ev_buf *b, const void *data, size_t n);
int ev_buf_puts(ev_buf *b, const char *s);
int ev_buf_printf(ev_buf *b, const char *fmt, ...) EV_PRINTF(2, 3);
int ev_buf_putc(ev_buf *b, char c);
void ev_buf_reset(ev_buf *b);
/* Replaces each NUL byte at or after `from` with U+FFFD (text that goes on
 * as a C string: a model's answer must not end at a NUL it wrote).
 * EV_E_LIMIT when the growth passes the cap (the buffer unchanged). */
int ev_buf_replace_nul(ev_buf *b, size_t from);
/* Hands the data to the caller (free with free()); the buffer is emptied. */
char *ev_buf_detach(ev_buf *b, size_t *len_out);
void ev_buf_free(ev_buf *b);

/* ---- arenas ----------------------------------------------------------- */

/* Bump allocator for short-lived work (one sample, one request): many
 * allocations, one ev_arena_free. Capped at `max` bytes in all. */
typedef struct ev_arena ev_arena;

int ev_arena_new(ev_arena **out, size_t max);
void ev_arena_free(ev_arena *a);
void *ev_arena_alloc(ev_arena *a, size_t n); /* NULL when over the cap */
char *ev_arena_strdup(ev_arena *a, const char *s);
char *ev_arena_strndup(ev_arena *a, const char *s, size_t n);
size_t ev_arena_used(const ev_arena *a);

/* ---- strings ---------------------------------------------------------- */

char *ev_strdup(const char *s);              /* NULL in, NULL out */
char *ev_strndup(const char *s, size_t n);
char *ev_asprintf(const char *fmt, ...) EV_PRINTF(1, 2);
bool ev_str_starts(const char *s, const char *prefix);
bool ev_str_ends(const char *s, const char *suffix);
/* Parses a whole decimal integer / float; false on trailing junk. */
bool ev_parse_i64(const char *s, int64_t *out);
bool ev_parse_f64(const char *s, double *out);

/* ---- JSON helpers (cJSON) --------------------------------------------- */

/* JSON numbers are read as doubles: a whole number is exact only below
 * 2^53, so a numeric id at or past it is refused rather than risk two
 * ids reading as one. */
#define EV_ID_EXACT_MAX 9007199254740992.0

/* Parses `len` bytes of JSON; `what` names the source in the error
 * ("samples.jsonl:12"). One value, with nothing but whitespace after it;
 * depth-limited by cJSON (CJSON_NESTING_LIMIT); text whose strings hold
 * \u0000 is refused (see ev_json_find_nul). A number written with a
 * fraction or an exponent is marked EV_JSON_FLOAT_FORM, so that
 * ev_json_print writes 1.0 back as 1.0, not 1: the difference is a type to
 * Python's json (BFCL's float ground truths, tool arguments). */
int ev_json_parse(cJSON **out, const char *text, size_t len, const char *what);
/* A bit of cJSON's `type` (above its own): the number was written as a
 * float. cJSON_Duplicate keeps it; cJSON_IsNumber is unaffected. */
#define EV_JSON_FLOAT_FORM (1 << 12)
/* Typed getters: return `dflt` when the key is absent; the *_req forms fail
 * with a message naming `what` and the key when it is absent or mistyped. */
const char *ev_json_str(const cJSON *obj, const char *key, const char *dflt);
double ev_json_num(const cJSON *obj, const char *key, double dflt);
bool ev_json_bool(const cJSON *obj, const char *key, bool dflt);
int ev_json_str_req(const char **out, const cJSON *obj, const char *key, const char *what);
/* Unformatted print into a malloc'd string; NULL on allocation failure.
 * Numbers keep their form: a whole number marked EV_JSON_FLOAT_FORM is
 * written with ".0"; other numbers as cJSON writes them (whole ones
 * without a fraction, the rest in their shortest exact form). */
char *ev_json_print(const cJSON *item);
/* The offset of the first \u0000 escape inside a string of JSON text, or
 * `len` when there is none. cJSON decodes it into a C string that ends
 * there, which would silently cut ids, inputs, titles and answers. */
size_t ev_json_find_nul(const char *text, size_t len);
/* Rewrites every such escape, in place, to \ufffd (the same six bytes'
 * length); returns how many. For text scored as is (model answers). */
size_t ev_json_replace_nul(char *text, size_t len);
/* ev_term_clean on every string value and key in the tree, in place: for
 * commands that print tracker JSON as text. Returns how many were replaced. */
size_t ev_json_term_clean(cJSON *item);
/* Appends `s` as a JSON string literal (with quotes and escapes). */
int ev_json_buf_str(ev_buf *b, const char *s);
/* The same for `len` bytes that may hold NULs (written as \u0000). */
int ev_json_buf_strn(ev_buf *b, const char *s, size_t len);

/* ---- hashing ----------------------------------------------------------- */

#define EV_SHA256_HEX 65 /* 64 hex digits and a NUL */

void ev_sha256(unsigned char out[32], const void *data, size_t len);
void ev_sha256_hex(char out[EV_SHA256_HEX], const void *data, size_t len);
/* Incremental form, for files and multi-part keys. */
typedef struct ev_sha256_ctx ev_sha256_ctx;
int ev_sha256_begin(ev_sha256_ctx **out);
void ev_sha256_update(ev_sha256_ctx *c, const void *data, size_t len);
void ev_sha256_end_hex(ev_sha256_ctx *c, char out[EV_SHA256_HEX]); /* frees c */
int ev_sha256_file_hex(char out[EV_SHA256_HEX], const char *path);

/* ---- time and randomness ---------------------------------------------- */

double ev_now(void);           /* monotonic seconds */
double ev_wall_time(void);     /* seconds since the epoch */
void ev_sleep(double seconds);
/* ISO-8601 UTC ("2026-12-02T15:14:33Z") of a wall time, into out[32]. */
void ev_iso8601(char out[32], double wall);

/* splitmix64-seeded xoshiro256**: deterministic and seedable, for
 * bootstrap resampling, jitter and generators. Not for secrets. */
typedef struct { uint64_t s[4]; } ev_rng;
void ev_rng_seed(ev_rng *r, uint64_t seed);
uint64_t ev_rng_next(ev_rng *r);
double ev_rng_uniform(ev_rng *r);           /* [0, 1) */
uint64_t ev_rng_below(ev_rng *r, uint64_t n); /* [0, n), unbiased */

/* ---- progress ---------------------------------------------------------- */

/* Progress of a long job: on a TTY a single rewritten line with
 * done/total, rate, ETA and the running score; otherwise a plain log line
 * at most every `interval` seconds. Quiet mode prints nothing. */
typedef struct ev_progress ev_progress;

int ev_progress_new(ev_progress **out, const char *label, long total, FILE *to, bool quiet);
/* Records progress; `score` < 0 means "no running score yet". */
void ev_progress_update(ev_progress *p, long done, double score, long errors);
void ev_progress_finish(ev_progress *p);
void ev_progress_free(ev_progress *p);

#include "base/vec.h"
#include "base/fs.h"
#include "base/strset.h"
#include "base/text.h"

#endif
