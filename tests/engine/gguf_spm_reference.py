"""Reference check: a SentencePiece GGUF tokenizer (tokenizer.ggml.model "llama": pieces with
scores, no merges) read by evald against transformers reading the same file
(AutoTokenizer.from_pretrained(..., gguf_file=...), its own GGUF-to-tokenizers conversion).

The file is written here with llama.cpp's gguf-py: a Llama-style vocabulary (<unk>, <s>, </s>,
the 256 byte pieces, characters, pieces trained as BPE trains them on a random corpus, scores
falling with the training order as SentencePiece's BPE gives them) and a one-layer random llama
so that `evald engine tokenize --model FILE.gguf` can take it. 500 random texts (characters in
and out of the vocabulary, spaces, newlines) must get the same ids from both, with and without
the special tokens. One known difference is left out and counted: a text that starts with a
space. SentencePiece (add_dummy_prefix) and llama.cpp put the prefix metaspace before it always
("▁▁c" for " c"), as evald does; transformers' GGUF conversion uses a Metaspace
pre-tokenizer with prepend_scheme "first", which adds none when the text already starts with one.

    gguf_spm_reference.py EVALD SCRATCH_DIR

Exits 1 on a difference, 77 (skip) without numpy, gguf or transformers.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from transformers import AutoTokenizer
except ImportError as e:
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, SCRATCH = sys.argv[1], sys.argv[2]
MS = "\u2581"
ALPHABET = ["a", "b", "c", "d", "e", "f", "\u00e9", "\u65e5"]  # é, 日
OUTSIDE = ["z", "\u672c", "\n", "!"]  # not pieces: their bytes


def train_vocab(rnd, n_merges):
    """Pieces trained by BPE on a corpus of random words: each step joins the most frequent pair."""
    words = []
    for _ in range(400):
        n = 1 + int(rnd.integers(0, 10))
        words.append([MS] + [ALPHABET[min(int(rnd.exponential(2.0)), len(ALPHABET) - 1)] for _ in range(n)])
    pieces = []
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), c = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        if c < 2:
            break
        pieces.append(a + b)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    return pieces


def write_gguf(path, rnd):
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>"), scores.append(0.0), types.append(6)
    trained = train_vocab(rnd, 150)
    for i, p in enumerate(trained):  # SentencePiece's BPE scores: falling with the training order
        tokens.append(p), scores.append(-float(i)), types.append(1)
    for i, ch in enumerate([MS] + ALPHABET):
        if ch not in tokens:
            tokens.append(ch), scores.append(-1000.0 - i), types.append(1)
    V, H, F = len(tokens), 64, 128
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_embedding_length(H)
    w.add_feed_forward_length(F)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(512)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    t = lambda *s: (rnd.standard_normal(s) * 0.05).astype(np.float32)
    w.add_tensor("token_embd.weight", t(V, H))
    w.add_tensor("output_norm.weight", np.ones(H, np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(H, np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(H, np.float32))
    w.add_tensor("blk.0.attn_q.weight", t(H, H))
    w.add_tensor("blk.0.attn_k.weight", t(H // 2, H))
    w.add_tensor("blk.0.attn_v.weight", t(H // 2, H))
    w.add_tensor("blk.0.attn_output.weight", t(H, H))
    w.add_tensor("blk.0.ffn_gate.weight", t(F, H))
    w.add_tensor("blk.0.ffn_up.weight", t(F, H))
    w.add_tensor("blk.0.ffn_down.weight", t(H, F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return len(trained), V


def main():
    os.makedirs(SCRATCH, exist_ok=True)
    rnd = np.random.default_rng(11)
    path = os.path.join(SCRATCH, "spm.gguf")
    trained, V = write_gguf(path, rnd)
    tok = AutoTokenizer.from_pretrained(SCRATCH, gguf_file="spm.gguf")
    texts = []
    for _ in range(500):
        n = 1 + int(rnd.integers(0, 25))
        chars = ALPHABET + OUTSIDE + [" "]
        texts.append("".join(chars[int(rnd.integers(0, len(chars)))] for _ in range(n)))
    lines = os.path.join(SCRATCH, "texts.jsonl")
    with open(lines, "w") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
    env = dict(os.environ, EVALD_CACHE_DIR=os.path.join(SCRATCH, "cache"))
    bad = lead = 0
    for special in (True, False):
        args = [EVALD, "engine", "tokenize", "--model", path, "--lines", lines]
        if not special:
            args.append("--no-special-tokens")
        out = subprocess.run(args, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(out.stderr)
            return 1
        got = [json.loads(l) for l in out.stdout.splitlines()]
        assert len(got) == len(texts), (len(got), len(texts))
        for t, g in zip(texts, got):
            want = tok.encode(t, add_special_tokens=special)
            if t.startswith(" "):
                lead += 1
                continue
            if g != want:
                bad += 1
                if bad <= 5:
                    print(f"DIFF special={special} {t!r}: evald {g} transformers {want}")
    n = 2 * len(texts) - lead
    print(f"SentencePiece GGUF ({trained} trained pieces, {V} in all): {n - bad}/{n} texts tokenized as "
          f"transformers does ({lead} starting with a space left out: see above)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
