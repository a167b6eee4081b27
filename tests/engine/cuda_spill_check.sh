#!/bin/sh
# The build's spill check bites: a kernel that must spill (96 live floats
# under 32 registers) fails to compile with the flags engine/cuda is built
# with, naming the spill; engine/cuda's own kernels compile with them.
# Usage: cuda_spill_check.sh NVCC SOURCE_DIR FLAGS...
set -u
nvcc=$1 src=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/spill.cu" <<'CU'
__global__ void heavy(float *out, const float *in)
{
	float r[96];
#pragma unroll
	for (int i = 0; i < 96; i++)
		r[i] = in[threadIdx.x * 96 + i] * (i + 1);
	float s = 0;
#pragma unroll
	for (int k = 0; k < 8; k++)
#pragma unroll
		for (int i = 0; i < 96; i++)
			s += r[i] * r[(i * 7 + k) % 96];
	out[threadIdx.x] = s;
}
CU
if "$nvcc" "$@" -maxrregcount=32 -c "$tmp/spill.cu" -o "$tmp/spill.o" > "$tmp/out" 2>&1; then
	echo "FAIL: a kernel that spills compiled with the build's flags"; cat "$tmp/out"; exit 1
fi
grep -q "spill" "$tmp/out" || { echo "FAIL: the failure does not name the spill:"; cat "$tmp/out"; exit 1; }
echo "a spilling kernel is refused: $(grep -o 'Registers are spilled[^,]*' "$tmp/out" | head -1)"
for f in "$src"/engine/cuda/*.cu; do
	"$nvcc" "$@" -I"$src" -Xptxas=-v -c "$f" -o "$tmp/k.o" > "$tmp/v" 2>&1 || { echo "FAIL: $f"; cat "$tmp/v"; exit 1; }
	echo "$(basename "$f"): $(grep -c 'Compiling entry function' "$tmp/v") kernels, $(grep -o '[0-9]* bytes spill stores' "$tmp/v" | sort -u | tr '\n' ' ')"
done
echo "ok"
