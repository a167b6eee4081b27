/* Fuzz target: the JSON body of POST /api/issues as the HTTP API reads it
 * (fields, labels, base64 attachments), storing nothing. */
#include "evald/serve.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)ev_serve_api_check_issue_json((const char *)data, size, (size_t)1 << 20);
	ev_error_clear();
	return 0;
}
