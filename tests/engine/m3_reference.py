"""Reference check: the engine's MiniMax-M3 forward against transformers'.

    m3_reference.py EVALD SCRATCH_DIR

Random tiny MiniMax-M3 checkpoints (`evald engine mkmodel --arch minimax_m3`, and `minimax_m3_vl`:
the multimodal wrapper's layout, its text_config and model.language_model.*;
a dense-MLP layer and MoE layers with the sigmoid router, its selection bias,
the shared expert and SwiGLU-OAI; full and sparse attention layers; partial
rotary; Gemma norms) in f32 and bf16 are loaded by transformers'
MiniMaxM3VLForCausalLM and by the engine (`evald engine logits`), on token
lists no longer than the sparse layers' top-k x block (16 x 4 = 64 here),
where the lightning indexer keeps every past block, so that every layer
attends all keys in both. Prints the largest relative logit difference and
the argmax agreement per checkpoint; exits 1 past 1e-4 (f32) or on an argmax
difference (f32). Exit 77 (skip) without torch or transformers' minimax_m3_vl.
"""
import json
import os
import random
import subprocess
import sys

try:
    import torch
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3SparseForConditionalGeneration, MiniMaxM3VLForCausalLM)
except ImportError as e:
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, SCRATCH = sys.argv[1], sys.argv[2]

SHAPES = [  # (name, arch, mkmodel flags, dtype)
    ("2 layers f32", "minimax_m3", ["--layers", "2"], "f32"),
    ("3 layers f32, 8 experts top 3", "minimax_m3", ["--layers", "3", "--experts", "8", "--top-k", "3"], "f32"),
    ("4 layers bf16", "minimax_m3", ["--layers", "4", "--hidden", "96", "--heads", "6", "--kv-heads", "2"], "bf16"),
    ("multimodal wrapper, 3 layers f32", "minimax_m3_vl", ["--layers", "3"], "f32"),
]


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    bad = 0
    for k, (name, arch, flags, dtype) in enumerate(SHAPES):
        d = os.path.join(SCRATCH, "m3-%d" % k)
        subprocess.run([EVALD, "engine", "mkmodel", "--arch", arch, "--out", d, "--vocab", "600",
                        "--dtype", dtype, "--seed", str(11 + k)] + flags, check=True, capture_output=True)
        cls = MiniMaxM3SparseForConditionalGeneration if arch == "minimax_m3_vl" else MiniMaxM3VLForCausalLM
        model = cls.from_pretrained(d, torch_dtype=torch.float32)  # the wrapper's vision tower: random, unused
        model.eval()
        rnd = random.Random(k)
        worst, agree, total = 0.0, 0, 0
        for n in (1, 7, 33, 64, 100, 200):
            toks = [rnd.randrange(600) for _ in range(n)]
            with torch.no_grad():
                want = model(torch.tensor([toks])).logits[0]
            out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, toks)),
                                  "--json"], check=True, capture_output=True, text=True).stdout
            got = torch.tensor(json.loads(out))
            scale = want.abs().max().item()
            worst = max(worst, (got - want).abs().max().item() / scale)
            agree += int((got.argmax(-1) == want.argmax(-1)).sum())
            total += n
        # the indexer matters past top-k x block: attending every key is another model there
        toks = [rnd.randrange(600) for _ in range(200)]
        with torch.no_grad():
            want = model(torch.tensor([toks])).logits[0]
        out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, toks)),
                              "--json", "--attention", "dense"], check=True, capture_output=True, text=True).stdout
        dense = (torch.tensor(json.loads(out)) - want).abs().max().item() / want.abs().max().item()
        print("%-34s attending every key instead, at 200 tokens: %.2e" % ("", dense))
        ok = worst < (1e-4 if dtype == "f32" else 5e-2) and (agree == total or dtype != "f32") and dense > 1e-3
        bad += not ok
        print("%-34s max relative logit difference %.2e, argmax %d/%d%s" % (name, worst, agree, total,
                                                                           "" if ok else "  FAIL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
