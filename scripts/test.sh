#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then builds
# twice (warnings as errors; AddressSanitizer + UndefinedBehaviorSanitizer)
# and runs ctest in each. Checks labelled slow or gpu are left out here, and
# reference unless scripts/reference-env.sh has made its environment:
#   EVALD_TEST_LABELS=all scripts/test.sh    runs them too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
jobs=$(nproc)
exclude="slow|gpu|reference"
# the reference checks run where their environment is (scripts/reference-env.sh)
[[ -x .venv-reference/bin/python ]] && exclude="slow|gpu"
[[ "${EVALD_TEST_LABELS:-}" == "all" ]] && exclude="^$"

echo "== release build (-Werror) =="
cmake -S . -B build-test -G Ninja -DEV_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-test -j"$jobs"
ctest --test-dir build-test -LE "$exclude" --output-on-failure -j"$jobs"

echo "== sanitizer build (ASan + UBSan, -Werror) =="
cmake -S . -B build-asan -G Ninja -DEV_WERROR=ON -DEV_SANITIZE=ON -DEV_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -LE "$exclude" --output-on-failure -j"$jobs"
