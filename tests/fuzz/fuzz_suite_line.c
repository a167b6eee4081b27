/* Fuzz target: a bare .jsonl suite (the sample line parser, templates,
 * messages, tools and attachments fields) through ev_suite_load. */
#include <stdlib.h>

#include "base/base.h"
#include "fuzz.h"
#include "suites/suites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = ev_asprintf("%s/samples.jsonl", fuzz_tmpdir());
	ev_suite *s = NULL;
	if (path && ev_file_write(path, data, size) == 0 && ev_suite_load(&s, path, NULL) == 0) {
		for (size_t i = 0; i < s->n_samples; i++) {
			char *t = s->samples[i].n_messages ? ev_message_text(&s->samples[i].messages[0]) : NULL;
			free(t);
		}
	}
	ev_suite_free(s);
	free(path);
	ev_error_clear();
	return 0;
}
