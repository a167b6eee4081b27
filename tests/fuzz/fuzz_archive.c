/* Fuzz target: a suite archive (tar, gzip, zstd, zip as libarchive reads
 * them) through the safe extractor, into a fresh folder each time. */
#include <stdlib.h>

#include "base/base.h"
#include "fuzz.h"
#include "suites/suites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *path = ev_asprintf("%s/in.archive", fuzz_tmpdir());
	char *dest = ev_asprintf("%s/out", fuzz_tmpdir());
	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.max_archive_bytes = (size_t)16 << 20; /* bombs stop early */
	opt.max_entries = 1000;
	if (path && dest && ev_file_write(path, data, size) == 0 && ev_mkdir_p(dest) == 0)
		(void)ev_archive_extract(path, dest, &opt);
	ev_rmtree(dest, EV_RMTREE_FORCE);
	free(path);
	free(dest);
	ev_error_clear();
	return 0;
}
