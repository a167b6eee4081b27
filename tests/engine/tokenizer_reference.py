#!/usr/bin/env python3
"""Compares evald's tokenizer with Hugging Face's `tokenizers` on a fuzz corpus.

    tokenizer_reference.py EVALD SCRATCH_DIR [SHARED_DIR]

Tokenizers compared: GPT-2's tokenizer.json (from ../shared/data, when there)
as it is and with each of the parts evald reads around BPE switched on (an
NFC normalizer; NFKC; a Digits pre-tokenizer; a TemplateProcessing BOS),
each pre-tokenizer a GGUF file may name (`evald engine gguf
--pre-tokenizers`) on GPT-2's vocabulary,
and the default tokenizers `evald engine mkmodel` writes (Llama-3's shape
with its BOS post-processor, and Qwen's with NFC), and SentencePiece-converted BPE in three shapes
trained here with HF's trainer (byte fallback, unk, Metaspace). The corpus: 3,000 seeded
random strings mixing words, digits of several scripts, punctuation, every
kind of whitespace (U+180E among them), composed and decomposed accents,
compatibility forms, CJK and emoji. Each string is encoded with
add_special_tokens=True by both; prints the agreement per tokenizer and
exits 1 on any difference. Exit 77 (skip) without the `tokenizers` package.
"""
import json
import os
import random
import subprocess
import sys

try:
    from tokenizers import Tokenizer
except ImportError:
    print("SKIP: the tokenizers package is not installed (bash scripts/reference-env.sh)")
    sys.exit(77)

PIECES = [
    "hello", " world", "The", " quick", "brown", "fox", "I'm", " don't", "it's", "naïve", "café",
    "cafe\u0301", "e\u0301", "A\u030a", "\u00c5", "ﬁ", "ﬀ", "①", "²", "½", "Ⅻ", "ｆｕｌｌ", "１２３",
    "123", "4567", "3.14", "1,000", "٣٤٥", "०१२", "0x1F", "  ", "   ", "\t", "\n", "\n\n", "\r\n",
    "\u00a0", "\u180e", "\u2009", "\u3000", "\u200b", "!", "?!", "...", "—", "«", "»", "(", ")", "{",
    "}", "<|", "|>", "你好", "世界", "日本語", "한국어", "😀", "👍🏽", "🇫🇷", "Ωμέγα", "Привет",
    "مرحبا", "שלום", "ñ", "ß", "İ", "ǅ", "x", "y", "z", "_", "-", "/", "\\", "\"", "'",
]


def corpus(n, seed):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        k = rnd.randint(1, 12)
        out.append("".join(rnd.choice(PIECES) for _ in range(k)))
    return out


def evald_ids(evald, folder, texts, scratch):
    lines = os.path.join(scratch, "lines.jsonl")
    with open(lines, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=True) + "\n")
    out = subprocess.run([evald, "engine", "tokenize", "--model", folder, "--lines", lines],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def variant(base, name, scratch, change):
    data = json.loads(json.dumps(base))
    change(data)
    folder = os.path.join(scratch, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(data, f)
    return folder


def sentencepiece_bpe(scratch):
    """SentencePiece-converted BPE as Llama-2 and Mistral ship it, trained here
    with HF's own trainer: <unk> <s> </s>, then the 256 byte-fallback tokens
    <0x00>..<0xFF>, then the merged vocabulary; a small alphabet, so that most
    non-Latin characters fall back to bytes. Three shapes: Llama-2's (Prepend
    and Replace normalizers, no pre-tokenizer, Strip decoder, BOS), the newer
    Metaspace pre-tokenizer (prepend "first", no split), and Metaspace with
    prepend "always" and split, with unk instead of byte fallback."""
    from tokenizers import Tokenizer as T, models, normalizers, pre_tokenizers, trainers, decoders
    meta = "\u2581"
    tok = T(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(meta), normalizers.Replace(" ", meta)])
    trainer = trainers.BpeTrainer(vocab_size=1200, limit_alphabet=70, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(corpus(4000, 7), trainer)
    trained = json.loads(tok.to_str())
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in sorted(trained["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    bos = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                    {"Sequence": {"id": "A", "type_id": 0}}],
           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}

    def shape(name, normalizer, pre, decoder, byte_fallback=True, fuse_unk=True, post=bos):
        data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": decoder,
                "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                          "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
                          "ignore_merges": False, "vocab": vocab, "merges": trained["model"]["merges"]}}
        return variant(data, name, scratch, lambda d: None)

    legacy_norm = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": meta},
                                                       {"type": "Replace", "pattern": {"String": " "}, "content": meta}]}
    legacy_dec = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": meta}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    first = {"type": "Metaspace", "replacement": meta, "prepend_scheme": "first", "split": False}
    always = {"type": "Metaspace", "replacement": meta, "prepend_scheme": "always", "split": True}
    return [
        ("SentencePiece BPE (Llama-2 shape)", shape("spm-llama2", legacy_norm, None, legacy_dec)),
        ("SentencePiece BPE (Metaspace first)", shape("spm-first", None, first, first)),
        ("SentencePiece BPE (Metaspace split, unk)", shape("spm-unk", None, always, always, byte_fallback=False)),
    ]


def main():
    evald, scratch = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) > 3 else ""
    os.makedirs(scratch, exist_ok=True)
    folders = []
    gpt2 = os.path.join(shared, "data", "tokenizers", "gpt2", "tokenizer.json") if shared else ""
    if gpt2 and os.path.exists(gpt2):
        with open(gpt2, encoding="utf-8") as f:
            base = json.load(f)
        eot = "<|endoftext|>"
        folders.append(("gpt2", variant(base, "gpt2", scratch, lambda d: None)))
        folders.append(("gpt2+NFC", variant(base, "gpt2-nfc", scratch,
                                            lambda d: d.update(normalizer={"type": "NFC"}))))
        folders.append(("gpt2+NFKC", variant(base, "gpt2-nfkc", scratch,
                                             lambda d: d.update(normalizer={"type": "NFKC"}))))

        def digits(d):
            d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True}, d["pre_tokenizer"]]}
        folders.append(("gpt2+Digits", variant(base, "gpt2-digits", scratch, digits)))

        def bos(d):
            d["post_processor"] = {"type": "TemplateProcessing",
                                   "single": [{"SpecialToken": {"id": eot, "type_id": 0}},
                                              {"Sequence": {"id": "A", "type_id": 0}}],
                                   "pair": [], "special_tokens": {eot: {"id": eot, "ids": [50256], "tokens": [eot]}}}
        folders.append(("gpt2+TemplateProcessing", variant(base, "gpt2-bos", scratch, bos)))

        # every pre-tokenizer a GGUF file may name (tokenizer.ggml.pre), as the
        # folder evald makes of such a file spells it, on GPT-2's vocabulary
        listing = subprocess.run([evald, "engine", "gguf", "--pre-tokenizers", "--json"], check=True,
                                 capture_output=True, text=True).stdout
        for p in json.loads(listing):
            def pre(d, p=p):
                d["pre_tokenizer"] = p["pre_tokenizer"]
                d["model"]["ignore_merges"] = p["ignore_merges"]
            name = p["names"][0]
            folders.append(("gpt2 as GGUF's " + name, variant(base, "gpt2-pre-" + name, scratch, pre)))
    folders += sentencepiece_bpe(scratch)
    for arch, label in (("llama", "evald default (Llama-3 shape)"), ("qwen2", "evald default (Qwen shape, NFC)")):
        out = os.path.join(scratch, "mk-" + arch)
        subprocess.run([evald, "engine", "mkmodel", "--arch", arch, "--out", out, "--vocab", "4096"], check=True,
                       capture_output=True)
        folders.append((label, out))

    texts = corpus(3000, 1)
    bad = 0
    for label, folder in folders:
        hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        hf.no_truncation()  # a call-time setting some files carry; evald never truncates
        hf.no_padding()
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=True)]
        got = evald_ids(evald, folder, texts, scratch)
        same = sum(1 for a, b in zip(want, got) if a == b)
        print("%-36s %4d/%d strings encode identically" % (label, same, len(texts)))
        for t, a, b in zip(texts, want, got):
            if a != b:
                print("  first difference: %r\n    hf    %s\n    evald %s" % (t, a, b))
                break
        bad += len(texts) - same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
