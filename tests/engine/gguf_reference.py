"""Reference check: evald's GGUF reader and block decoding against llama.cpp's own Python package
(`gguf`, PyPI): a file written by gguf-py's GGUFWriter holding a tensor of every type evald reads
(quantized by gguf-py's quantizer where it has one, else random blocks with finite scales), read
by `evald engine gguf` (metadata and tensor list) and each tensor dequantized by `evald engine
gguf --tensor` must equal gguf.quants.dequantize bit for bit.

    gguf_reference.py EVALD SCRATCH_DIR

Exits 1 on a difference, 77 (skip) without numpy or gguf.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, SCRATCH = sys.argv[1], sys.argv[2]
Q = gguf.GGMLQuantizationType
TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
         "Q6_K", "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M",
         "IQ2_XXS", "IQ2_XS", "IQ2_S"]
F16_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2],
              "Q5_K": [0, 2], "Q6_K": [208], "Q3_K": [108], "IQ4_NL": [0], "IQ4_XS": [0], "Q2_K": [80, 82],
              "IQ3_XXS": [0], "IQ3_S": [0], "IQ1_S": [0], "IQ2_XXS": [0],
              "IQ2_XS": [0], "IQ2_S": [0]}


def blocks(name, rows, cols, rnd):
    """A [rows, cols] tensor of type `name` as gguf-py stores it (bytes shaped per row)."""
    qt = Q[name]
    x = rnd.standard_normal((rows, cols)).astype(np.float32)
    if name == "F32":
        return x, x
    if name == "F16":
        return x.astype(np.float16), x
    try:
        return quants.quantize(x, qt), x
    except (NotImplementedError, quants.QuantError):
        pass
    # no quantizer in gguf-py for this type: random blocks whose f16 scales are finite
    bsize, tsize = gguf.GGML_QUANT_SIZES[qt]
    raw = rnd.integers(0, 256, (rows, cols // bsize, tsize), dtype=np.uint8)
    for off in F16_FIELDS.get(name, []):
        scale = (rnd.standard_normal((rows, cols // bsize)) * 0.05).astype(np.float16)
        raw[:, :, off:off + 2] = scale.view(np.uint8).reshape(rows, cols // bsize, 2)
    if name == "IQ1_M":  # its f16 d is the top nibbles of the four scales, the first's lowest
        d = (rnd.standard_normal((rows, cols // bsize)) * 0.05).astype(np.float16).view(np.uint16)
        for k in range(4):
            top = ((d >> (4 * k)) & 0xF).astype(np.uint8) << 4
            raw[:, :, 49 + 2 * k] = (raw[:, :, 49 + 2 * k] & 0x0F) | top
    return raw.reshape(rows, cols // bsize * tsize), None


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    path = os.path.join(SCRATCH, "types.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(2)
    w.add_string("general.name", "evald reference fixture")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "\u0120the"])
    rnd = np.random.default_rng(5)
    want = {}
    for name in TYPES:
        data, _ = blocks(name, 3, 512, rnd)
        tname = "t." + name.lower()
        w.add_tensor(tname, data, raw_dtype=Q[name] if name not in ("F32", "F16") else None)
        want[tname] = (name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    bad = 0
    info = json.loads(subprocess.run([EVALD, "engine", "gguf", path, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    meta = info["metadata"]
    ok = meta.get("general.architecture") == "llama" and meta.get("llama.block_count") == 2 and \
        len(info["tensors"]) == len(TYPES)
    bad += not ok
    print("metadata and tensor list read: %s (%d keys, %d tensors)%s" % (
        "equal" if ok else "DIFFERENT", len(meta), len(info["tensors"]), "" if ok else "  FAIL"))
    reader = gguf.GGUFReader(path)
    for t in reader.tensors:
        name, _ = want[t.name]
        ref = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        out = os.path.join(SCRATCH, t.name + ".f32")
        subprocess.run([EVALD, "engine", "gguf", path, "--tensor", t.name, "--out", out], check=True,
                       capture_output=True)
        got = np.fromfile(out, dtype="<f4")
        same = got.shape == ref.shape and np.array_equal(got.view(np.uint32), ref.view(np.uint32))
        err = float(np.abs(got - ref).max()) if got.shape == ref.shape else float("inf")
        bad += not same
        print("%-5s %5d values: %s (largest difference %.3g)%s" % (name, ref.size, "bit-equal" if same else "DIFFERENT",
                                                                     err, "" if same else "  FAIL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
