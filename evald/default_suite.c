/* The embedded default suite: a small QA set compiled into the program so
 * that `evald run` has something to run on a fresh machine. */
#include <stdlib.h>

#include "evald/cli.h"

extern const unsigned char ev_embedded_default[];
extern const unsigned long ev_embedded_default_len;

int ev_default_suite_write(char **out_path, const char *dir)
{
	char *p = ev_asprintf("%s/default.jsonl", dir);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	int rc = ev_file_write(p, ev_embedded_default, ev_embedded_default_len);
	if (rc) {
		free(p);
		return rc;
	}
	*out_path = p;
	return 0;
}
