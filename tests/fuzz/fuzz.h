/*
 * tests/fuzz: libFuzzer-style entry points for evald's parsers of untrusted
 * input. Each fuzz_*.c defines LLVMFuzzerTestOneInput; built with clang and
 * -fsanitize=fuzzer (cmake -DEV_FUZZ=ON, CC=clang) each is a libFuzzer
 * binary; otherwise driver.c runs it over its saved corpus
 * (tests/fuzz/corpus/<target>/) and over deterministic mutations of every
 * input, as a ctest test (label fuzz), under the sanitizers in CI. An input
 * that once crashed a target is kept in its corpus as a regression case.
 */
#ifndef EV_TESTS_FUZZ_H
#define EV_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A scratch folder for targets that need files (made once a process). */
const char *fuzz_tmpdir(void);

#endif
