#!/usr/bin/env bash
# Sets evald up on a fresh Debian machine and runs its main job once:
# installs the missing Debian packages, builds (release), generates the
# default checkpoint (the constructed recall model, engine/mkrecall.c) and
# its long-context suite, evaluates it with the bundled engine, dense and
# with MSA block-sparse attention, and prints the report of each run.
# The tracker is ./evald.db; the checkpoint and suite are under build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$(nproc)"

evald=build/bin/evald
[[ -f build/default-ckpt/model.safetensors ]] || "$evald" engine mkmodel --arch recall --out build/default-ckpt
"$evald" suites gen recall -o build/default-suite --lengths 1k,8k --depths 0,25,50,75,100 --samples 2 \
  --distractors 16 --seed 1

for attention in dense msa; do
  "$evald" --db evald.db run --model build/default-ckpt --model-name "recall-$attention" \
    --suite build/default-suite --attention "$attention" --msa-top-k 4 --msa-dense-below 0
  run=$("$evald" --db evald.db runs --json --limit 1 | sed -n 's/.*"id":\([0-9]*\).*/\1/p' | head -n1)
  "$evald" --db evald.db report "$run" --format md
done
echo "evald is built in build/bin; the tracker is ./evald.db ('evald --db evald.db runs')."
