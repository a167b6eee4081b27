/*
 * Small hand-built tokenizer.json files for the tokenizer tests.
 */
#ifndef TEST_TOKENIZER_FIXTURE_H
#define TEST_TOKENIZER_FIXTURE_H

#include "engine/tokenizer/tokenizer.h"

/* A tokenizer.json with the 256 byte tokens (id = byte), then one token
 * per merge (raw bytes "a b" pairs, in rank order), then `extra_vocab`
 * (raw words), then `added` (JSON objects text, may be NULL). */
typedef struct {
	const char *const *merges; /* "left", "right", ... pairs of raw bytes */
	size_t n_merges;
	const char *const *extra_vocab;
	size_t n_extra;
	bool pairs;            /* merges as ["a","b"] instead of "a b" */
	bool ignore_merges;
	const char *added;     /* JSON array text, or NULL */
	const char *pre;       /* pre_tokenizer JSON text, or NULL for GPT-2 ByteLevel */
	const char *merges_override; /* raw JSON for model.merges */
	const char *normalizer;      /* normalizer JSON text, or NULL for null */
	const char *post;            /* post_processor JSON text, or NULL for null */
} tt_spec;

char *tt_build(const tt_spec *s);
/* Loads tt_build's text; fails the test on error. */
eng_tokenizer *tt_load(const tt_spec *s);

#endif
