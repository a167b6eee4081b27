/*
 * engine/gguf/gguf_int.h: what the converter's files share inside
 * engine/gguf (not part of its interface).
 */
#ifndef ENG_GGUF_INT_H
#define ENG_GGUF_INT_H

#include "base/base.h"
#include "engine/gguf/gguf.h"

/* The merges of g's SentencePiece vocabulary (tokenizer.ggml.tokens,
 * scores, token_type) appended to `out` as the inside of a tokenizer.json
 * "merges" list of [left, right] pairs (spm.c). */
int eng_gguf_spm_merges(const eng_gguf *g, ev_buf *out);

#endif
