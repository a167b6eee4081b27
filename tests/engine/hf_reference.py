#!/usr/bin/env python3
"""Independent pure-Python forward pass of the engine's architectures,
following the Hugging Face modeling code's semantics (no numpy, no torch),
used by test_engine_pyref.c as a second oracle for tiny checkpoints.

usage: hf_reference.py MODEL_DIR 1,2,3   -> JSON [[logits of position 0], ...]
"""
import json
import math
import struct
import sys


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        raw = data[base + b:base + en]
        dt = e["dtype"]
        if dt == "F32":
            vals = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        elif dt == "F16":
            vals = list(struct.unpack("<%de" % (len(raw) // 2), raw))
        elif dt == "BF16":
            hs = struct.unpack("<%dH" % (len(raw) // 2), raw)
            vals = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in hs]
        else:
            raise ValueError(dt)
        shape = e["shape"]
        if len(shape) == 2:
            r, c = shape
            vals = [vals[i * c:(i + 1) * c] for i in range(r)]
        elif len(shape) == 3:  # experts stored together: [E][rows][cols]
            n, r, c = shape
            vals = [[vals[(k * r + i) * c:(k * r + i + 1) * c] for i in range(r)] for k in range(n)]
        out[name] = vals
    return out


def matvec(w, x, bias=None):
    y = [sum(a * b for a, b in zip(row, x)) for row in w]
    if bias is not None:
        y = [a + b for a, b in zip(y, bias)]
    return y


def rmsnorm(x, g, eps):
    var = sum(v * v for v in x) / len(x)
    r = 1.0 / math.sqrt(var + eps)
    return [v * r * w for v, w in zip(x, g)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def softmax(xs):
    m = max(xs)
    e = [math.exp(v - m) for v in xs]
    s = sum(e)
    return [v / s for v in e]


def inv_freqs(cfg, hd):
    theta = cfg.get("rope_theta", 10000.0)
    inv = [1.0 / (theta ** (2 * i / hd)) for i in range(hd // 2)]
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wl, hi_wl = old / lo, old / hi
        res = []
        for f in inv:
            wl = 2 * math.pi / f
            if wl < hi_wl:
                res.append(f)
            elif wl > lo_wl:
                res.append(f / factor)
            else:
                s = (old / wl - lo) / (hi - lo)
                res.append((1 - s) * f / factor + s * f)
        inv = res
    elif kind == "linear":
        inv = [f / rs["factor"] for f in inv]
    return inv


def rope(v, pos, inv):
    # rotate_half: the first half pairs with the second half
    h = len(v) // 2
    out = list(v)
    for i in range(h):
        c, s = math.cos(pos * inv[i]), math.sin(pos * inv[i])
        out[i] = v[i] * c - v[i + h] * s
        out[i + h] = v[i + h] * c + v[i] * s
    return out


def mlp(W, prefix, x, names=("gate_proj", "up_proj", "down_proj")):
    g = matvec(W[prefix + "." + names[0] + ".weight"], x)
    u = matvec(W[prefix + "." + names[1] + ".weight"], x)
    return matvec(W[prefix + "." + names[2] + ".weight"], [silu(a) * b for a, b in zip(g, u)])


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def minimax_m3(cfg, W, toks):
    """MiniMax-M3's text decoder as transformers' minimax_m3_vl defines it,
    written here from that definition, one token at a time: Gemma norms
    (1 + w), partial rotary, SwiGLU-OAI MLPs, the sigmoid router with its
    selection bias and the shared expert, and the lightning indexer's block
    choice on sparse layers."""
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, kvh, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, n_rep = cfg.get("rms_norm_eps", 1e-6), nh // kvh
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", 5e6)
    rd = int(hd * rp.get("partial_rotary_factor", 1.0))
    inv = [1.0 / (theta ** (2 * i / rd)) for i in range(rd // 2)]
    alpha, limit = cfg.get("swiglu_alpha", 1.702), cfg.get("swiglu_limit", 7.0)
    kinds = cfg.get("layer_types") or ["full_attention"] * L
    mlps = cfg.get("mlp_layer_types") or ["sparse"] * L
    B, topk, local = cfg.get("index_block_size", 128), cfg.get("index_topk_blocks", 16), cfg.get("index_local_blocks", 1)
    pre = "model.language_model." if cfg["architectures"][0] == "MiniMaxM3SparseForConditionalGeneration" else "model."

    def gnorm(x, w):
        return rmsnorm(x, [1.0 + a for a in w], eps)

    def prope(v, pos):  # rotate-half over the first rd channels
        return rope(v[:rd], pos, inv) + v[rd:]

    def oai(gate_up, down, x):
        gu = matvec(gate_up, x)
        i = len(gu) // 2
        act = []
        for g, u in zip(gu[:i], gu[i:]):
            g = min(g, limit)
            u = max(-limit, min(limit, u))
            act.append((u + 1.0) * g * sigmoid(alpha * g))
        return matvec(down, act)

    kc, vc, ic = [[] for _ in range(L)], [[] for _ in range(L)], [[] for _ in range(L)]
    result = []
    for pos, t in enumerate(toks):
        x = list(W[pre + "embed_tokens.weight"][t])
        for l in range(L):
            p = pre + "layers.%d." % l
            xn = gnorm(x, W[p + "input_layernorm.weight"])
            q, k, v = (matvec(W[p + "self_attn.%s_proj.weight" % n], xn) for n in "qkv")
            qh = [prope(gnorm(q[h * hd:(h + 1) * hd], W[p + "self_attn.q_norm.weight"]), pos) for h in range(nh)]
            kh = [prope(gnorm(k[h * hd:(h + 1) * hd], W[p + "self_attn.k_norm.weight"]), pos) for h in range(kvh)]
            kc[l].append(kh)
            vc[l].append([v[h * hd:(h + 1) * hd] for h in range(kvh)])
            allowed = None  # per KV group: the keys it attends
            if kinds[l] == "minimax_m3_sparse":
                ip = p + "self_attn.indexer."
                iq = matvec(W[ip + "q_proj.weight"], xn)
                idim = len(W[ip + "q_norm.weight"])
                iqh = [prope(gnorm(iq[h * idim:(h + 1) * idim], W[ip + "q_norm.weight"]), pos) for h in range(kvh)]
                ic[l].append(prope(gnorm(matvec(W[ip + "k_proj.weight"], xn), W[ip + "k_norm.weight"]), pos))
                cur = pos // B
                allowed = []
                for g in range(kvh):
                    sc = [max(sum(a * b for a, b in zip(iqh[g], ic[l][s])) for s in range(b * B, min(b * B + B, pos + 1)))
                          for b in range(cur + 1)]
                    for j in range(local):
                        sc[max(cur - j, 0)] = math.inf
                    chosen = sorted(range(cur + 1), key=lambda b: (-sc[b], b))[:min(topk, cur + 1)]
                    allowed.append([s for s in range(pos + 1) if s // B in chosen])
            att = []
            for h in range(nh):
                g = h // n_rep
                keys = allowed[g] if allowed is not None else range(pos + 1)
                sc = [sum(a * b for a, b in zip(qh[h], kc[l][s][g])) / math.sqrt(hd) for s in keys]
                pr = softmax(sc)
                o = [0.0] * hd
                for w, s in zip(pr, keys):
                    o = [a + w * b for a, b in zip(o, vc[l][s][g])]
                att.extend(o)
            x = [a + b for a, b in zip(x, matvec(W[p + "self_attn.o_proj.weight"], att))]
            xn = gnorm(x, W[p + "post_attention_layernorm.weight"])
            if mlps[l] == "dense":
                y = oai(W[p + "mlp.gate_up_proj.weight"], W[p + "mlp.down_proj.weight"], xn)
            else:
                sig = [sigmoid(a) for a in matvec(W[p + "mlp.gate.weight"], xn)]
                bias = W[p + "mlp.gate.e_score_correction_bias"]
                top = sorted(range(len(sig)), key=lambda e: (-(sig[e] + bias[e]), e))[:cfg["num_experts_per_tok"]]
                tot = sum(sig[e] for e in top)
                y = [0.0] * H
                for e in top:
                    ye = oai(W[p + "mlp.experts.gate_up_proj"][e], W[p + "mlp.experts.down_proj"][e], xn)
                    y = [a + sig[e] / tot * b for a, b in zip(y, ye)]
                rsf = cfg.get("routed_scaling_factor", 2.0)
                sh = oai(W[p + "mlp.shared_experts.gate_up_proj.weight"], W[p + "mlp.shared_experts.down_proj.weight"], xn)
                y = [a * rsf + b for a, b in zip(y, sh)]
            x = [a + b for a, b in zip(x, y)]
        result.append(matvec(W["lm_head.weight"], gnorm(x, W[pre + "norm.weight"])))
    return result


def main():
    d, toks = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
    cfg = json.load(open(d + "/config.json"))
    W = load_safetensors(d + "/model.safetensors")
    arch = cfg["architectures"][0]
    if arch in ("MiniMaxM3VLForCausalLM", "MiniMaxM3SparseForConditionalGeneration"):
        if "text_config" in cfg:
            cfg = dict(cfg["text_config"], architectures=[arch])
        json.dump(minimax_m3(cfg, W, toks), sys.stdout)
        return
    arch = cfg["architectures"][0]
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, kvh = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or H // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    inv = inv_freqs(cfg, hd)
    n_rep = nh // kvh
    window = cfg.get("sliding_window") if arch in ("MistralForCausalLM", "MixtralForCausalLM") else None
    lm = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    kcache = [[] for _ in range(L)]
    vcache = [[] for _ in range(L)]
    result = []
    for pos, t in enumerate(toks):
        x = list(W["model.embed_tokens.weight"][t])
        for l in range(L):
            p = "model.layers.%d." % l
            xn = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
            q = matvec(W[p + "self_attn.q_proj.weight"], xn, W.get(p + "self_attn.q_proj.bias"))
            k = matvec(W[p + "self_attn.k_proj.weight"], xn, W.get(p + "self_attn.k_proj.bias"))
            v = matvec(W[p + "self_attn.v_proj.weight"], xn, W.get(p + "self_attn.v_proj.bias"))
            qh = [q[h * hd:(h + 1) * hd] for h in range(nh)]
            kh = [k[h * hd:(h + 1) * hd] for h in range(kvh)]
            vh = [v[h * hd:(h + 1) * hd] for h in range(kvh)]
            if p + "self_attn.q_norm.weight" in W:
                qh = [rmsnorm(a, W[p + "self_attn.q_norm.weight"], eps) for a in qh]
                kh = [rmsnorm(a, W[p + "self_attn.k_norm.weight"], eps) for a in kh]
            qh = [rope(a, pos, inv) for a in qh]
            kh = [rope(a, pos, inv) for a in kh]
            kcache[l].append(kh)
            vcache[l].append(vh)
            att = []
            for h in range(nh):
                g = h // n_rep  # repeat_kv: query head h reads KV head h // n_rep
                lo = 0 if not window else max(0, pos - window + 1)
                sc = [sum(a * b for a, b in zip(qh[h], kcache[l][s][g])) / math.sqrt(hd) for s in range(lo, pos + 1)]
                pr = softmax(sc)
                o = [0.0] * hd
                for w, s in zip(pr, range(lo, pos + 1)):
                    o = [a + w * b for a, b in zip(o, vcache[l][s][g])]
                att.extend(o)
            ao = matvec(W[p + "self_attn.o_proj.weight"], att, W.get(p + "self_attn.o_proj.bias"))
            x = [a + b for a, b in zip(x, ao)]
            xn = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
            if arch == "MixtralForCausalLM":
                pre, gate, names, renorm = p + "block_sparse_moe", "gate", ("w1", "w3", "w2"), True
            elif arch in ("Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM") and (p + "mlp.gate.weight") in W:
                pre, gate, names, renorm = p + "mlp", "gate", ("gate_proj", "up_proj", "down_proj"), cfg.get("norm_topk_prob", False)
            else:
                pre = None
            if pre is None:
                y = mlp(W, p + "mlp", xn)
            else:
                probs = softmax(matvec(W[pre + "." + gate + ".weight"], xn))
                k_ = cfg["num_experts_per_tok"]
                top = sorted(range(len(probs)), key=lambda e: (-probs[e], e))[:k_]
                ws = [probs[e] for e in top]
                if renorm:
                    s = sum(ws)
                    ws = [w / s for w in ws]
                y = [0.0] * H
                for e, w in zip(top, ws):
                    ye = mlp(W, pre + ".experts.%d" % e, xn, names)
                    y = [a + w * b for a, b in zip(y, ye)]
                if (pre + ".shared_expert_gate.weight") in W:  # Qwen2-MoE: sigmoid-gated shared expert
                    g = matvec(W[pre + ".shared_expert_gate.weight"], xn)[0]
                    ys = mlp(W, pre + ".shared_expert", xn)
                    s = 1.0 / (1.0 + math.exp(-g))
                    y = [a + s * b for a, b in zip(y, ys)]
            x = [a + b for a, b in zip(x, y)]
        xn = rmsnorm(x, W["model.norm.weight"], eps)
        result.append(matvec(lm, xn))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
