/* Fuzz target: tokenizer.json (vocabulary, merges, added tokens,
 * pre-tokenizer regexes), then a round trip of a fixed text through it. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_tokenizer *tok = NULL;
	if (eng_tokenizer_load_json(&tok, (const char *)data, size, "fuzz tokenizer.json") == 0) {
		static const char text[] = "Hello, world! 123 caf\xc3\xa9 \xf0\x9f\x98\x80 <|im_start|>";
		int32_t *ids = NULL;
		size_t n = 0;
		if (eng_tokenize(tok, text, sizeof text - 1, true, &ids, &n) == 0) {
			char *back = NULL;
			size_t blen = 0;
			(void)eng_detokenize(tok, ids, n, true, &back, &blen);
			free(back);
		}
		free(ids);
	}
	eng_tokenizer_free(tok);
	ev_error_clear();
	return 0;
}
