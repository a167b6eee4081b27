/* Fuzz target: tool calls read out of a model's answer (JSON call objects,
 * Python call syntax, fences, <tool_call> tags) and out of an OpenAI
 * tool_calls array; the input is tried as both. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "scoring/scoring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	ev_toolcalls *calls = NULL;
	if (ev_toolcalls_parse(&calls, NULL, text) == 0)
		ev_toolcalls_free(calls);
	calls = NULL;
	if (ev_toolcalls_parse(&calls, text, NULL) == 0)
		ev_toolcalls_free(calls);
	free(text);
	ev_error_clear();
	return 0;
}
