/*
 * engine/tokenizer/chat_template.h: a checkpoint's chat template, loaded as
 * transformers loads it and rendered as apply_chat_template renders it
 * (jinja.h is the renderer).
 *
 * The template is tokenizer_config.json's "chat_template" (a string, or a
 * list of {"name","template"} from which `name` is taken, "default" when
 * NULL), else the chat_template.jinja file beside it. Rendering passes
 * `messages`, `tools` (None when not given), `documents` (None),
 * `add_generation_prompt`, the special tokens of tokenizer_config.json
 * (bos_token, eos_token, unk_token, pad_token, ... as strings) and any
 * extra keyword variables, which win over the rest.
 */
#ifndef ENG_CHAT_TEMPLATE_H
#define ENG_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

typedef struct eng_chat_template eng_chat_template;

/* EV_E_NOTFOUND when the checkpoint has no template (or none of that
 * name); compile errors name the construct and its line. */
int eng_chat_template_load(eng_chat_template **out, const char *dir, const char *name);
void eng_chat_template_free(eng_chat_template *t);
/* The template's source (borrowed). */
const char *eng_chat_template_source(const eng_chat_template *t);

/* messages: a JSON array of {"role","content",...}; tools: a JSON array or
 * NULL; extra: a JSON object of keyword variables or NULL. *out is
 * malloc'd. */
int eng_chat_template_render(const eng_chat_template *t, const cJSON *messages, const cJSON *tools,
			     bool add_generation_prompt, const cJSON *extra, char **out, size_t *out_len);

#endif
