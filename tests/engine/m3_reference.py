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
difference (f32). A bf16 checkpoint is checked three ways: the reference
path (`--reference`: the stored bf16 weights, f32 arithmetic, as
transformers runs them upcast) and the fast path on its f32 kernels
(EVALD_QUANT_DOT=f32) to the same 1e-4 and argmax; the fast path as it
runs by default, which rounds activations to bf16 for its vdpbf16ps
kernels, position by position: at least 90% of positions within 5e-2 (on
these random weights a router's top-k, or the indexer's, is often near a
tie, and that rounding flips it; the position's logits then come from
another expert mix or other keys; counted and printed). Token ids stay below 590, clear
of the wrapper's image and video placeholders (596, 599), which the engine
refuses without queued image rows. Exit 77 (skip) without torch or
transformers' minimax_m3_vl.
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
        worst, agree, total, fast_close, fast_worst = 0.0, 0, 0, 0, 0.0
        for n in (1, 7, 33, 64, 100, 200):
            toks = [rnd.randrange(590) for _ in range(n)]
            with torch.no_grad():
                want = model(torch.tensor([toks])).logits[0]
            scale = want.abs().max().item()
            # f32: the fast path is the definition's arithmetic; bf16: the
            # reference path is, and the fast path is checked apart
            paths = [([], None)] if dtype == "f32" else [(["--reference"], None), ([], "f32"), ([], None)]
            for extra, qdot in paths:
                env = dict(os.environ, EVALD_QUANT_DOT=qdot) if qdot else None
                out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, toks)),
                                      "--json"] + extra, check=True, capture_output=True, text=True, env=env).stdout
                got = torch.tensor(json.loads(out))
                if extra or qdot or dtype == "f32":
                    worst = max(worst, (got - want).abs().max().item() / scale)
                    agree += int((got.argmax(-1) == want.argmax(-1)).sum())
                else:
                    per = (got - want).abs().max(-1).values / scale
                    fast_close += int((per < 5e-2).sum())
                    fast_worst = max(fast_worst, per.max().item())
            total += n
        # the indexer matters past top-k x block: attending every key is another model there
        toks = [rnd.randrange(590) for _ in range(200)]
        with torch.no_grad():
            want = model(torch.tensor([toks])).logits[0]
        out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, toks)),
                              "--json", "--attention", "dense"], check=True, capture_output=True, text=True).stdout
        dense = (torch.tensor(json.loads(out)) - want).abs().max().item() / want.abs().max().item()
        print("%-34s attending every key instead, at 200 tokens: %.2e" % ("", dense))
        ok = worst < 1e-4 and agree == (total if dtype == "f32" else 2 * total) and dense > 1e-3
        if dtype != "f32":
            ok = ok and fast_close >= 0.9 * total
            print("%-34s fast path (bf16 activations): %d/%d positions within 5e-2, worst %.2e" % (
                "", fast_close, total, fast_worst))
        bad += not ok
        print("%-34s max relative logit difference %.2e, argmax %d/%d%s%s" % (
            name, worst, agree, 2 * total if dtype != "f32" else total,
            " (reference path; fast path on f32 kernels)" if dtype != "f32" else "", "" if ok else "  FAIL"))
    bad += recall_m3()
    return 1 if bad else 0


def recall_m3():
    """The constructed M3 recall checkpoint (mkmodel --arch recall_m3) is an M3 transformers runs: at
    3,000 tokens (24 blocks of 128, the indexer keeping 16) both answer the needle's value at two
    depths, with last-position logits equal."""
    d = os.path.join(SCRATCH, "recall_m3")
    subprocess.run([EVALD, "engine", "mkmodel", "--arch", "recall_m3", "--out", d], check=True, capture_output=True)
    model = MiniMaxM3VLForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
    model.eval()
    # token ids of engine/make/mkrecall.c: 32 keys, 16 values, 16 fillers, then the key-value pairs
    ask, key0, val0, fill0, pair0 = 257, 258, 258 + 32, 258 + 48, 258 + 64
    rnd = random.Random(5)
    bad = 0
    for n, depth in ((3000, 0.1), (3000, 0.6)):
        k, v = rnd.randrange(32), rnd.randrange(16)
        toks = [fill0 + rnd.randrange(16) for _ in range(n - 2)]
        toks[int((n - 3) * depth)] = pair0 + k * 16 + v
        toks += [ask, key0 + k]
        with torch.no_grad():
            want = model(torch.tensor([toks])).logits[0, -1]
        out = subprocess.run([EVALD, "engine", "logits", "--model", d, "--tokens", ",".join(map(str, toks)),
                              "--last", "--json"], check=True, capture_output=True, text=True).stdout
        got = torch.tensor(json.loads(out)).reshape(-1)
        diff = (got - want).abs().max().item() / want.abs().max().item()
        ok = int(want.argmax()) == val0 + v and int(got.argmax()) == val0 + v and diff < 1e-4
        bad += not ok
        print("recall_m3, %d tokens, needle at %d%%: answer V%d from transformers and the engine: %s %s, "
              "max relative difference %.2e%s" % (n, depth * 100, v, int(want.argmax()) == val0 + v,
                                                   int(got.argmax()) == val0 + v, diff, "" if ok else "  FAIL"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
