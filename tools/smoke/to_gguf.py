#!/usr/bin/python3
"""Convert a trained smoke model (tools/smoke/train_tiny.py output) to GGUF the way llama.cpp's
converter and `llama-quantize --pure` lay it out, independently of ckpt's C++ (gguf_io.py,
written from specs/gguf.md), and write beside it the quantized model's truth.

usage: to_gguf.py MODEL_DIR OUT.gguf --type f32|f16|bf16|q8_0|q4_0|q4_k [--float-copy DIR]

- Architecture: llama (model_type llama; mistral and mixtral convert to llama too, but their
  tiny stand-ins use a sliding window / expert layout not converted here), qwen2, qwen3,
  qwen3moe. Keys `{arch}.*` as specs/gguf.md §3.3; tensor names as §4 (token_embd, blk.N.attn_q,
  ..., output_norm, output; no `output` when the embeddings are tied; qwen3moe's experts stacked
  as ffn_{gate,up,down}_exps [E, Fe, X]); a Llama-3 rope_scaling becomes rope_freqs.weight
  (per-frequency divisors, F32), as the converter writes it.
- q/k rows, arch llama only: the converter's reordering of each head from HF's rotate-half
  layout (dim j with j + hd/2) into adjacent pairs (2j, 2j+1), for llama.cpp's "normal" RoPE:
  W.reshape(heads, 2, hd/2, in).swapaxes(1, 2).reshape(W.shape); k with the kv head count.
- Types: 1-D tensors (norms, biases) stay F32; every 2-D weight becomes --type. A row length
  that is not a multiple of the type's block falls back as llama-quantize's
  tensor_type_fallback does (specs/gguf.md §2.3): Q4_K -> Q5_0 (-> F16). The tiny models' rows
  are 64 and 160 wide, so --type q4_k yields Q5_0 blocks throughout: Q4_K itself is exercised
  by `--self-test` (random 256-wide rows), not by the smoke models.
- Vocabulary: tokenizer.json byte-level BPE -> tokenizer.ggml.model gpt2 with tokens, token_type
  (1 normal, 3 control for special added tokens, 4 user-defined), merges, and tokenizer.ggml.pre
  named after the Split pattern (Llama 3's -> llama-bpe, Qwen2's -> qwen2, GPT-2's -> gpt-2), as
  the converter's hash of the tokenizer's output picks it; bos/eos ids and add_bos_token from
  tokenizer_config.json.
- Beside OUT.gguf: ckpt-smoke-baseline.json, the torch reference forward pass (families.py) over
  the weights dequantized from what was written (q/k rows put back in HF order), and a copy of
  smoke_tokens.json; --float-copy writes those weights as a float32 checkpoint for
  tests/smoke/torch_forward.py."""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import bpe  # noqa: E402
import families  # noqa: E402
import gguf_io  # noqa: E402
import safetensors_io  # noqa: E402
from gguf_io import ARRAY, BOOL, F32, I32, STRING, U32  # noqa: E402

ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3moe", "gemma": "gemma",
        "mixtral": "llama"}
TYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0", "q4_k": "Q4_K"}
FALLBACK = {"Q4_K": "Q5_0", "Q5_0": "F16", "Q4_0": "F16", "Q8_0": "F16"}
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "Q4_K": 15, "BF16": 32}  # llama_ftype (Q4_K: Q4_K_M)
PARTS = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
         "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
         "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp",
         "block_sparse_moe.gate": "ffn_gate_inp"}
EXPERT_PARTS = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down", "w1": "gate", "w3": "up", "w2": "down"}
PRE = {bpe.LLAMA3_PATTERN: "llama-bpe", bpe.QWEN2_PATTERN: "qwen2", bpe.GPT2_PATTERN: "gpt-2"}


def permute(w, heads):
    """HF rotate-half rows -> llama.cpp adjacent-pair rows (the converter's reordering)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg, head_dim):
    s = cfg["rope_scaling"]
    base, factor = cfg["rope_theta"], s["factor"]
    low, high, old = s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0), s["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / base ** (i / head_dim)
        wl = 2 * math.pi / freq
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def gguf_name(name, cfg):
    """HF name -> (llama.cpp name, expert part or None)."""
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    parts = name.split(".")
    assert parts[:2] == ["model", "layers"], name
    layer, rest = parts[2], ".".join(parts[3:])
    stem, suffix = rest.rsplit(".", 1)
    if stem in PARTS:
        return f"blk.{layer}.{PARTS[stem]}.{suffix}"
    raise ValueError(f"no GGUF name for {name}")


def _varint(b, p):
    v = s = 0
    while True:
        c = b[p]
        p += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, p


def _fields(b):
    """(field, wire, value) of one protobuf message; value: int, or bytes for wire 2, or the raw 4/8 bytes."""
    p = 0
    while p < len(b):
        tag, p = _varint(b, p)
        f, w = tag >> 3, tag & 7
        if w == 0:
            v, p = _varint(b, p)
        elif w == 2:
            n, p = _varint(b, p)
            v, p = b[p:p + n], p + n
        elif w == 5:
            v, p = b[p:p + 4], p + 4
        elif w == 1:
            v, p = b[p:p + 8], p + 8
        else:
            raise ValueError("protobuf wire type %d" % w)
        yield f, w, v


def sentencepiece_kvs(model_dir):
    """tokenizer.model (SentencePiece ModelProto: pieces = 1 {piece 1, score 2, type 3}, trainer_spec
    = 2 {unk_id 40, bos_id 41, eos_id 42, pad_id 43}, normalizer_spec = 3 {add_dummy_prefix 3,
    remove_extra_whitespaces 4}) -> tokenizer.ggml.model llama, as the converter writes it."""
    with open(os.path.join(model_dir, "tokenizer.model"), "rb") as f:
        blob = f.read()
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tcfg = json.load(f)
    tokens, scores, types = [], [], []
    ids = {"unk": 0, "bos": 1, "eos": 2, "pad": -1}
    add_prefix, remove_ws = True, True
    for f, w, v in _fields(blob):
        if f == 1 and w == 2:
            piece, score, ptype = "", 0.0, 1
            for pf, pw, pv in _fields(v):
                if pf == 1:
                    piece = pv.decode("utf-8")
                elif pf == 2:
                    score = struct.unpack("<f", pv)[0]
                elif pf == 3:
                    ptype = pv
            tokens.append(piece)
            scores.append(score)
            types.append(ptype)
        elif f == 2 and w == 2:
            for tf, tw, tv in _fields(v):
                if tw == 0 and tf in (40, 41, 42, 43):
                    tv = tv - (1 << 64) if tv >= 1 << 63 else tv
                    ids[{40: "unk", 41: "bos", 42: "eos", 43: "pad"}[tf]] = tv
        elif f == 3 and w == 2:
            for nf, nw, nv in _fields(v):
                if nf == 3:
                    add_prefix = bool(nv)
                elif nf == 4:
                    remove_ws = bool(nv)
    kvs = [("tokenizer.ggml.model", STRING, "llama"), ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
           ("tokenizer.ggml.scores", ARRAY, (F32, scores)), ("tokenizer.ggml.token_type", ARRAY, (I32, types))]
    for key, name in (("bos_token_id", "bos"), ("eos_token_id", "eos"), ("unknown_token_id", "unk"), ("padding_token_id", "pad")):
        if 0 <= ids[name] < len(tokens):
            kvs.append((f"tokenizer.ggml.{key}", U32, ids[name]))
    kvs += [("tokenizer.ggml.add_bos_token", BOOL, bool(tcfg.get("add_bos_token", True))),
            ("tokenizer.ggml.add_eos_token", BOOL, bool(tcfg.get("add_eos_token", False))),
            ("tokenizer.ggml.add_space_prefix", BOOL, add_prefix),
            ("tokenizer.ggml.remove_extra_whitespaces", BOOL, remove_ws)]
    return kvs


def tokenizer_kvs(model_dir):
    if not os.path.exists(os.path.join(model_dir, "tokenizer.json")) and os.path.exists(os.path.join(model_dir, "tokenizer.model")):
        return sentencepiece_kvs(model_dir)
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
        tcfg = json.load(f)
    model = tok["model"]
    if model.get("type") != "BPE":
        raise SystemExit("only byte-level BPE tokenizer.json vocabularies are converted here")
    by_id = {i: t for t, i in model["vocab"].items()}
    types = {i: 1 for i in by_id}
    for a in tok.get("added_tokens") or []:
        by_id[a["id"]] = a["content"]
        types[a["id"]] = 3 if a.get("special") else 4
    n = max(by_id) + 1
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(n)]
    token_types = [types.get(i, 5) for i in range(n)]
    pre_tok = tok["pre_tokenizer"]
    pattern = None
    if pre_tok["type"] == "Sequence":
        for p in pre_tok["pretokenizers"]:
            if p["type"] == "Split":
                pattern = p["pattern"]["Regex"]
    elif pre_tok["type"] == "ByteLevel" and pre_tok.get("use_regex", True):
        pattern = bpe.GPT2_PATTERN
    if pattern not in PRE:
        raise SystemExit("the tokenizer's pre-tokenizer pattern has no tokenizer.ggml.pre name here")
    ids = {t: i for i, t in enumerate(tokens)}
    kvs = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, PRE[pattern]),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (I32, token_types)),
           ("tokenizer.ggml.merges", ARRAY, (STRING, [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]))]
    for key, field in (("bos_token_id", "bos_token"), ("eos_token_id", "eos_token"), ("padding_token_id", "pad_token")):
        t = tcfg.get(field)
        if isinstance(t, dict):
            t = t.get("content")
        if t in ids:
            kvs.append((f"tokenizer.ggml.{key}", U32, ids[t]))
    kvs.append(("tokenizer.ggml.add_bos_token", BOOL, bool(tcfg.get("add_bos_token", False))))
    kvs.append(("tokenizer.ggml.add_eos_token", BOOL, bool(tcfg.get("add_eos_token", False))))
    return kvs


def convert(model_dir, out_path, qtype, float_copy=None):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    mt = cfg["model_type"]
    if mt not in ARCH:
        raise SystemExit(f"model_type {mt} is not converted by to_gguf.py (converted: {', '.join(ARCH)})")
    arch = ARCH[mt]
    tensors, _ = safetensors_io.load(os.path.join(model_dir, "model.safetensors"))
    H, L, nh = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or H // nh
    kvs = [("general.architecture", STRING, arch), ("general.type", STRING, "model"),
           ("general.name", STRING, f"ckpt smoke tiny {mt}"), ("general.file_type", U32, FILE_TYPE[TYPES[qtype]]),
           ("general.quantization_version", U32, 2),
           (f"{arch}.context_length", U32, cfg.get("max_position_embeddings", 2048)),
           (f"{arch}.embedding_length", U32, H), (f"{arch}.block_count", U32, L),
           (f"{arch}.feed_forward_length", U32, cfg["intermediate_size"]),
           (f"{arch}.attention.head_count", U32, nh), (f"{arch}.attention.head_count_kv", U32, nkv),
           (f"{arch}.attention.key_length", U32, hd), (f"{arch}.attention.value_length", U32, hd),
           (f"{arch}.rope.dimension_count", U32, hd), (f"{arch}.rope.freq_base", F32, float(cfg.get("rope_theta", 10000.0))),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32, float(cfg["rms_norm_eps"])),
           (f"{arch}.vocab_size", U32, cfg["vocab_size"])]
    if mt == "mixtral":
        kvs += [(f"{arch}.expert_count", U32, cfg["num_local_experts"]), (f"{arch}.expert_used_count", U32, cfg["num_experts_per_tok"])]
    if mt == "qwen3_moe":
        kvs += [(f"{arch}.expert_count", U32, cfg["num_experts"]), (f"{arch}.expert_used_count", U32, cfg["num_experts_per_tok"]),
                (f"{arch}.expert_feed_forward_length", U32, cfg["moe_intermediate_size"])]
    kvs += tokenizer_kvs(model_dir)

    out, truth = [], {}

    def put(hf, gname, w):
        """w float32 numpy, HF layout; returns the dequantized HF-layout truth."""
        perm = None
        if arch == "llama" and gname.endswith((".attn_q.weight", ".attn_k.weight")):
            perm = nh if ".attn_q." in gname else nkv
            w = permute(w, perm)
        plus_one = arch == "gemma" and gname.endswith("norm.weight")
        if plus_one:  # the converter stores Gemma's zero-centred norms as 1 + w; llama.cpp multiplies by them
            w = w + np.float32(1)
        if w.ndim == 1:
            t = "F32"
        else:
            t = TYPES[qtype]
            while w.shape[-1] % gguf_io.BLOCK[t][0]:
                t = FALLBACK[t]
        ne = list(reversed(w.shape))
        raw = gguf_io.quantize(t, w.reshape(-1, w.shape[-1]) if w.ndim > 1 else w[None, :])
        back = gguf_io.dequantize(t, raw, ne)
        if perm:
            back = unpermute(back, perm)
        if plus_one:
            back = back - np.float32(1)
        out.append((gname, t, ne, raw))
        if hf is not None:
            truth[hf] = torch.from_numpy(np.ascontiguousarray(back))

    names = sorted(tensors, key=lambda n: (0 if "embed" in n else 2 if not n.startswith("model.layers.") else 1,
                                          int(n.split(".")[2]) if n.startswith("model.layers.") else 0, n))
    experts = {}
    for name in names:
        w = tensors[name].float().numpy()
        if ".experts." in name:  # model.layers.N.{mlp,block_sparse_moe}.experts.E.{gate_proj,w1}.weight -> ffn_*_exps
            p = name.split(".")
            experts.setdefault((int(p[2]), p[6]), {})[int(p[5])] = (name, w)
            continue
        put(name, gguf_name(name, cfg), w)
    for (layer, proj), by_e in sorted(experts.items()):
        stacked = np.stack([by_e[e][1] for e in sorted(by_e)])
        gname = f"blk.{layer}.ffn_{EXPERT_PARTS[proj]}_exps.weight"
        put(None, gname, stacked)
        back = torch.from_numpy(np.ascontiguousarray(gguf_io.dequantize(out[-1][1], out[-1][3], out[-1][2])))
        for e in sorted(by_e):
            truth[by_e[e][0]] = back[e].contiguous()
    rs = cfg.get("rope_scaling") or {}
    if arch == "llama" and rs.get("rope_type", rs.get("type")) == "llama3":
        f = llama3_rope_factors(cfg, hd)
        out.append(("rope_freqs.weight", "F32", [f.size], f.astype("<f4").tobytes()))
    # llama.cpp orders: token_embd, [output_norm, output], blocks; file order does not matter to readers.
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    gguf_io.write(out_path, kvs, out)

    model = families.CausalLM(dict(cfg, torch_dtype="float32"))
    model.load_state_dict(truth, strict=True)
    with open(os.path.join(model_dir, "smoke_tokens.json")) as f:
        ids = json.load(f)["ids"]
    torch.set_num_threads(1)
    doc = baseline.compute(model, ids, f"tools/smoke/to_gguf.py --type {qtype} (torch reference, dequantized weights)")
    baseline.write(os.path.join(out_dir, "ckpt-smoke-baseline.json"), doc)
    shutil.copy(os.path.join(model_dir, "smoke_tokens.json"), out_dir)
    if float_copy:
        if os.path.exists(float_copy):
            shutil.rmtree(float_copy)
        os.makedirs(float_copy)
        with open(os.path.join(float_copy, "config.json"), "w") as f:
            json.dump(dict(cfg, torch_dtype="float32"), f, indent=2)
        safetensors_io.save(os.path.join(float_copy, "model.safetensors"), {k: v.contiguous() for k, v in truth.items()})
    kinds = sorted({t for _, t, _, _ in out})
    print(f"{os.path.basename(out_path)}: arch {arch}, {len(out)} tensors ({', '.join(kinds)}); "
          f"baseline perplexity {doc['perplexity']:.4f}")


def self_test(out_path):
    """A GGUF of random rows in every type the smoke writer quantizes, 256 wide (Q4_K's block),
    and OUT.json with the values this script decodes from it, to hold against ckpt's decoder."""
    rng = np.random.RandomState(20)
    tensors, expect = [], {}
    for t in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "Q4_K"):
        w = (rng.randn(4, 512) * rng.uniform(0.01, 2.0, size=(4, 1))).astype(np.float32)
        w[1, :256] -= 0.5  # a sub-block all of one sign: Q4_K's min is then 0
        raw = gguf_io.quantize(t, w)
        name = f"t.{t.lower()}.weight"
        tensors.append((name, t, [512, 4], raw))
        expect[name] = gguf_io.dequantize(t, raw, [512, 4]).tolist()
    gguf_io.write(out_path, [("general.architecture", STRING, "llama")], tensors)
    with open(out_path + ".json", "w") as f:
        json.dump(expect, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a trained smoke model, or with --self-test the GGUF to write")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--type", choices=sorted(TYPES), default="f16")
    parser.add_argument("--float-copy", help="also write the dequantized weights as a float checkpoint here")
    parser.add_argument("--self-test", action="store_true", help="write a GGUF of random rows in every type and their decoded values")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.model_dir)
    if not args.out:
        parser.error("OUT.gguf is required")
    convert(args.model_dir, args.out, args.type, args.float_copy)


if __name__ == "__main__":
    main()
