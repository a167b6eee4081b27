/* Fuzz target: a checkpoint's config.json (architecture, sizes and their
 * cross-checks, RoPE scaling, MoE, MSA settings). */
#include "engine/backend.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_config c;
	if (eng_config_parse(&c, (const char *)data, size, "fuzz config.json") == 0)
		eng_config_clear(&c);
	ev_error_clear();
	return 0;
}
