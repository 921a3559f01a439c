#!/usr/bin/env python3
"""Header-only GGUF verify: ckpt vs a Python-stdlib reader (bench/gguf_baseline.py) and, when
installed, @huggingface/gguf under Node (tests/oracles/node_modules), same inputs, same run.

The input is a sparse 100 GB GGUF with 1,000 Q4_K tensors (llama.cpp names, 80 layers) and a
128k-token byte-level BPE vocabulary with merges in its metadata (what makes real headers
megabytes): only the header and tensor infos are written, the data section is a hole.
Before timing, every tool must accept the clean file and reject a copy cut 1 GB short.
Then N paired rounds alternate the tools; reported: medians and ratios.

    python3 bench/gguf_bench.py BUILD_DIR [--rounds N] [--keep DIR]
"""
import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "..", "tests", "oracles")


def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, t, payload):
    return gguf_string(key) + struct.pack("<I", t) + payload


def write_model(path, layers=111, vocab=128000):
    """A llama-shaped model (E 8192, 64 heads, 8 KV heads, F 57344) in Q4_K: 3 + 9 x 111 =
    1,002 tensors, about 98 GB. The vocabulary is "b", a00000... and a00000b... with merges
    "aNNNNN b" -> "aNNNNNb", so every merge is well-formed and every token unique."""
    E, H, Hkv, Dk, F = 8192, 64, 8, 128, 57344
    half = (vocab - 1) // 2
    toks = ["b"] + ["a%06d" % i for i in range(half)] + ["a%06db" % i for i in range(vocab - 1 - half)]
    merges = ["a%06d b" % i for i in range(vocab - 1 - half)]
    kvs = [kv("general.architecture", 8, gguf_string("llama")),
           kv("llama.block_count", 4, struct.pack("<I", layers)),
           kv("llama.embedding_length", 4, struct.pack("<I", E)),
           kv("llama.context_length", 4, struct.pack("<I", 131072)),
           kv("llama.feed_forward_length", 4, struct.pack("<I", F)),
           kv("llama.attention.head_count", 4, struct.pack("<I", H)),
           kv("llama.attention.head_count_kv", 4, struct.pack("<I", Hkv)),
           kv("llama.rope.dimension_count", 4, struct.pack("<I", Dk)),
           kv("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
           kv("tokenizer.ggml.model", 8, gguf_string("gpt2")),
           kv("tokenizer.ggml.pre", 8, gguf_string("llama-bpe")),
           kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, vocab) + b"".join(gguf_string(t) for t in toks)),
           kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, vocab) + struct.pack("<%di" % vocab, *([1] * vocab))),
           kv("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, len(merges)) + b"".join(gguf_string(m) for m in merges)),
           kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
           kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2))]
    tensors = [("token_embd.weight", [E, vocab], 12), ("output_norm.weight", [E], 0), ("output.weight", [E, vocab], 12)]
    for i in range(layers):
        b = "blk.%d." % i
        tensors += [(b + "attn_norm.weight", [E], 0), (b + "attn_q.weight", [E, H * Dk], 12),
                    (b + "attn_k.weight", [E, Hkv * Dk], 12), (b + "attn_v.weight", [E, Hkv * Dk], 12),
                    (b + "attn_output.weight", [H * Dk, E], 12), (b + "ffn_norm.weight", [E], 0),
                    (b + "ffn_gate.weight", [E, F], 12), (b + "ffn_up.weight", [E, F], 12), (b + "ffn_down.weight", [F, E], 12)]
    infos, offset = [], 0
    for name, ne, t in tensors:
        infos.append(gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack("<%dq" % len(ne), *ne) + struct.pack("<iQ", t, offset))
        n = 1
        for d in ne:
            n *= d
        nbytes = n * 4 if t == 0 else n // 256 * 144
        offset += -(-nbytes // 32) * 32
    head = b"GGUF" + struct.pack("<Iqq", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + offset)
    return len(head), len(head) + offset, len(tensors)


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return time.perf_counter() - t0, p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--keep")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="ckpt-gguf-bench-")
    clean = os.path.join(work, "clean", "model.gguf")
    cut = os.path.join(work, "cut", "model.gguf")
    os.makedirs(os.path.dirname(clean), exist_ok=True)
    os.makedirs(os.path.dirname(cut), exist_ok=True)
    header, size, n_tensors = write_model(clean)
    with open(clean, "rb") as src, open(cut, "wb") as dst:  # sparse copy: header, then a hole
        dst.write(src.read(header))
        dst.truncate(size - 10**9)
    print("input: %s: %.1f GB (%d header bytes), %d tensors, 128000 tokens + merges" % (clean, size / 1e9, header, n_tensors))
    tools = {
        "ckpt": lambda p: [os.path.join(args.build_dir, "ckpt"), "verify", p, "--format", "json"],
        "python-stdlib": lambda p: [sys.executable, os.path.join(HERE, "gguf_baseline.py"), p],
    }
    node_ok = shutil.which("node") and os.path.exists(os.path.join(ORACLE, "node_modules", "@huggingface", "gguf"))
    if node_ok:
        # hf.js reads metadata and tensor infos only; it does not judge truncation, so it is
        # timed on the clean file only and not asked to reject the cut one.
        tools["@huggingface/gguf"] = lambda p: ["node", os.path.join(ORACLE, "gguf_read.mjs"), p]
    else:
        print("@huggingface/gguf: skipped (node or tests/oracles/node_modules absent; scripts/test.sh installs it)")
    for name, cmd in tools.items():
        _, rc, out = run(cmd(clean))
        if rc != 0:
            sys.exit("%s rejects the clean file: %s" % (name, out[:300]))
        if name != "@huggingface/gguf":
            _, rc, out = run(cmd(cut))
            if rc == 0:
                sys.exit("%s accepts the file cut 1 GB short" % name)
    times = {n: [] for n in tools}
    for _ in range(args.rounds):
        for name, cmd in tools.items():
            dt, _, _ = run(cmd(clean))
            times[name].append(dt)
    base = statistics.median(times["ckpt"])
    for name, ts in times.items():
        m = statistics.median(ts)
        print("%-18s median %8.1f ms  (min %.1f, max %.1f, %d rounds)  %s" % (
            name, m * 1e3, min(ts) * 1e3, max(ts) * 1e3, len(ts), "" if name == "ckpt" else "%.1fx ckpt" % (m / base)))
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
