/*
 * tests/fuzz/driver.c: runs a fuzz target without libFuzzer: every file of
 * the corpus folder (argv[1]) as it is, then N mutations of each (argv[2],
 * default 64): bit flips, byte changes, truncations, duplications and
 * splices of two inputs, from a fixed seed, so a run is repeatable. A
 * target fails by crashing (or tripping a sanitizer); returning is passing.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "fuzz.h"

#define FUZZ_MAX_INPUT ((size_t)1 << 20)
#define MAX_FILES 512

/* One mutation of `in` into out (capacity FUZZ_MAX_INPUT); returns its length. */
static size_t mutate(uint8_t *out, const uint8_t *in, size_t n, const uint8_t *other, size_t on, ev_rng *r)
{
	memcpy(out, in, n);
	int kind = (int)ev_rng_below(r, 6);
	size_t at = n ? (size_t)ev_rng_below(r, n) : 0;
	switch (kind) {
	case 0: /* bit flips */
		for (int k = 0; n && k < 1 + (int)ev_rng_below(r, 4); k++)
			out[ev_rng_below(r, n)] ^= (uint8_t)(1u << ev_rng_below(r, 8));
		return n;
	case 1: { /* interesting bytes */
		static const uint8_t v[] = {0, 0xff, 0x7f, 0x80, '"', '\\', '{', '}', '[', ']', ',', ':', '\n', '9'};
		if (n)
			out[at] = v[ev_rng_below(r, sizeof v)];
		return n;
	}
	case 2: /* truncate */
		return at;
	case 3: { /* duplicate a stretch */
		size_t len = n - at < 64 ? n - at : 64;
		if (n + len > FUZZ_MAX_INPUT)
			return n;
		memmove(out + at + len, out + at, n - at);
		memcpy(out + at + len, in + at, len);
		return n + len;
	}
	case 4: { /* splice another input's tail */
		size_t from = on ? (size_t)ev_rng_below(r, on) : 0, len = on - from;
		if (at + len > FUZZ_MAX_INPUT)
			len = FUZZ_MAX_INPUT - at;
		memcpy(out + at, other + from, len);
		return at + len;
	}
	default: /* a large number where digits are */
		for (size_t i = at; i < n; i++)
			if (out[i] >= '0' && out[i] <= '9') {
				static const char big[] = "18446744073709551616";
				size_t k = sizeof big - 1 < n - i ? sizeof big - 1 : n - i;
				memcpy(out + i, big, k);
				break;
			}
		return n;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
		return 2;
	}
	long muts = argc > 2 ? atol(argv[2]) : 64;
	DIR *d = opendir(argv[1]);
	if (!d) {
		fprintf(stderr, "%s: no corpus\n", argv[1]);
		return 1;
	}
	char *data[MAX_FILES];
	size_t len[MAX_FILES];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < MAX_FILES) {
		if (e->d_name[0] == '.')
			continue;
		char *p = ev_asprintf("%s/%s", argv[1], e->d_name);
		if (p && ev_file_read(&data[n], &len[n], p, FUZZ_MAX_INPUT) == 0)
			n++;
		free(p);
	}
	closedir(d);
	uint8_t *buf = malloc(FUZZ_MAX_INPUT);
	if (!n || !buf) {
		fprintf(stderr, "%s: an empty corpus\n", argv[1]);
		return 1;
	}
	ev_log_set_level(EV_LOG_ERROR); /* targets warn about what they refuse */
	long runs = 0;
	for (int i = 0; i < n; i++) {
		/* each input with a copy of its own, so that reads past its end are caught */
		uint8_t *copy = malloc(len[i] ? len[i] : 1);
		memcpy(copy, data[i], len[i]);
		LLVMFuzzerTestOneInput(copy, len[i]);
		free(copy);
		runs++;
		ev_rng r;
		ev_rng_seed(&r, 0x5eed + (uint64_t)i);
		for (long k = 0; k < muts; k++) {
			int j = (int)ev_rng_below(&r, (uint64_t)n);
			size_t m = mutate(buf, (const uint8_t *)data[i], len[i], (const uint8_t *)data[j], len[j], &r);
			uint8_t *in = malloc(m ? m : 1);
			memcpy(in, buf, m);
			LLVMFuzzerTestOneInput(in, m);
			free(in);
			runs++;
		}
	}
	printf("%s: %d inputs, %ld runs, no crash\n", argv[1], n, runs);
	for (int i = 0; i < n; i++)
		free(data[i]);
	free(buf);
	ev_rmtree(fuzz_tmpdir(), EV_RMTREE_FORCE);
	return 0;
}
