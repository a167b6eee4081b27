/* Fuzz target: a checkpoint's chat template (Jinja source: lexing, parsing,
 * and rendering over a fixed conversation with tools, so that loops,
 * filters, macros and tests all run on mutated code). Templates come with
 * checkpoints: they are untrusted. */
#include "engine/tokenizer/jinja.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static const char VARS[] =
	"{\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"hi 1.0\"},"
	"{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
	"\"arguments\":{\"a\":1,\"b\":[2.5,null,true]}}}]},{\"role\":\"tool\",\"content\":\"{\\\"r\\\":1}\"}],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
	"\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static cJSON *vars;
	if (!vars)
		ev_json_parse(&vars, VARS, strlen(VARS), "vars");
	eng_jinja *t = NULL;
	if (eng_jinja_compile(&t, (const char *)data, size, "fuzz template") == 0) {
		char *out = NULL;
		if (eng_jinja_render(t, vars, &out, NULL) == 0)
			free(out);
		eng_jinja_free(t);
	}
	ev_error_clear();
	return 0;
}
