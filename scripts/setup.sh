#!/usr/bin/env bash
# Sets evald up on a fresh Debian machine and runs its main job once:
# installs the missing Debian packages, builds (release), starts the
# fixture OpenAI-compatible server with the embedded default suite's answer
# table, evaluates the embedded default suite against it, and prints the
# report. The tracker is ./evald.db.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$(nproc)"

port_file=$(mktemp)
build/bin/evald-fixture-server --port 0 --print-port \
  --table suites/data/default/fixture_table.jsonl >"$port_file" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$port_file"' EXIT
for _ in $(seq 100); do [[ -s "$port_file" ]] && break; sleep 0.05; done
port=$(head -n1 "$port_file")

build/bin/evald --db evald.db run --model "http://127.0.0.1:${port}/v1" --model-name fixture-default
run=$(build/bin/evald --db evald.db runs --json --limit 1 | sed -n 's/.*"id":\([0-9]*\).*/\1/p' | head -n1)
build/bin/evald --db evald.db report "$run" --format md
echo
echo "evald is built in build/bin; the tracker is ./evald.db (run $run)."
