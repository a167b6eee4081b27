/* What the fuzz targets share, in both builds (driver and libFuzzer). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"
#include "fuzz.h"

const char *fuzz_tmpdir(void)
{
	static char dir[512];
	if (!dir[0]) {
		const char *base = getenv("EV_TEST_TMP");
		snprintf(dir, sizeof dir, "%s/fuzz-%ld", base && *base ? base : "/tmp", (long)getpid());
		if (ev_mkdir_p(dir))
			abort();
	}
	return dir;
}
