#!/usr/bin/env bash
# Runs a reference check with the reference environment's Python
# (scripts/reference-env.sh); exit 77 (ctest: skipped) when it is absent.
cd "$(dirname "$0")/.."
py=.venv-reference/bin/python
if [[ ! -x "$py" ]]; then
  echo "SKIP: no reference environment (bash scripts/reference-env.sh)"
  exit 77
fi
exec "$py" "$@"
