/* Fuzz target: a safetensors file's header (lengths, offsets, dtypes,
 * shapes, overlaps) through the engine's validating parser. */
#include "engine/backend.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	eng_tensor_set ts = {0};
	(void)eng_st_parse(&ts, 0, "fuzz.safetensors", data, size);
	eng_st_close(&ts);
	ev_error_clear();
	return 0;
}
