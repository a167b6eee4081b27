/*
 * engine/tokenizer/jinja.h: chat templates as Hugging Face renders them.
 *
 * transformers' apply_chat_template compiles tokenizer_config.json's
 * `chat_template` with Jinja2 (a sandboxed environment with trim_blocks and
 * lstrip_blocks, the loopcontrols extension, and its own `tojson`,
 * `raise_exception` and `strftime_now`) and renders it with `messages`,
 * `tools`, `add_generation_prompt`, the special tokens (`bos_token`,
 * `eos_token`, ...) and any extra keyword variables (`enable_thinking`).
 * This is that renderer, for the subset chat templates use:
 *
 *   statements  if/elif/else, for (with `if`, `else`, unpacking, loop.*),
 *               set (also `set ns.attr` and block set), macro (with
 *               defaults), break/continue, generation (rendered as is),
 *               comments, whitespace control ({%- -%}, {%+ +%})
 *   expressions literals, lists, dicts, tuples, attribute and item access,
 *               slices, calls, filters, tests (is / is not), `in`, `not in`,
 *               arithmetic, `~`, comparisons, and/or/not, x if c else y
 *   filters     tojson (indent, ensure_ascii, separators, sort_keys, as
 *               transformers defines it), trim, length/count, string,
 *               default/d, join, first, last, upper, lower, capitalize,
 *               title, replace, items, list, reverse, int, float, abs,
 *               safe, indent, map, select/reject, selectattr/rejectattr,
 *               unique, dictsort, sort, wordcount, round
 *   methods     of strings (strip, lstrip, rstrip, split, startswith,
 *               endswith, upper, lower, title, capitalize, replace, find,
 *               count, join, format? no), of dicts (items, keys, values,
 *               get) and of lists (append, index, count)
 *   globals     raise_exception, strftime_now, range, namespace, dict
 *   tests       defined, undefined, none, string, number, integer, float,
 *               boolean, mapping, iterable, sequence, true, false, odd,
 *               even, divisibleby, eq/equalto/==, ne/!=, lt, gt, le, ge,
 *               in, lower, upper, callable
 *
 * Values print as Python prints them (1.0, True, None, ['a'], {'k': 1}):
 * numbers keep the int/float difference JSON inputs write
 * (EV_JSON_FLOAT_FORM). A construct outside the subset is an error naming
 * it and its line; so is raise_exception (its message). Output, loop
 * steps and nesting are bounded.
 */
#ifndef ENG_JINJA_H
#define ENG_JINJA_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

#define ENG_JINJA_MAX_OUTPUT ((size_t)64 << 20) /* bytes one render may write */
#define ENG_JINJA_MAX_STEPS 50000000L           /* loop iterations and macro calls */
#define ENG_JINJA_MAX_TEMPLATE ((size_t)1 << 20) /* bytes of template source */

typedef struct eng_jinja eng_jinja;

/* Compiles a template; `what` names it in errors ("tokenizer_config.json:
 * chat_template"). Errors name the line and the construct. */
int eng_jinja_compile(eng_jinja **out, const char *source, size_t len, const char *what);
void eng_jinja_free(eng_jinja *t);

/* Renders with the variables of `vars` (a JSON object; each key a
 * variable) into a malloc'd string *out (*out_len bytes, NUL-terminated).
 * `vars` is read, never changed. */
int eng_jinja_render(const eng_jinja *t, const cJSON *vars, char **out, size_t *out_len);

#endif
