#!/usr/bin/python3
"""ckpt smoke vs the torch reference forward pass, same model, same token ids, same run.

Stand-ins carry the real config.json of their model (../shared/corpus/configs) and a
model.safetensors with every tensor of that architecture under its real name and shape:
  - "qwen1.5-0.5b" (Qwen1.5-0.5B-Chat: qwen2, 24 layers, hidden 1024, vocab 151,936, tied;
    464M parameters, 0.93 GB BF16), filled with normally distributed values (std 0.02, norms 1);
  - "llama-2-7b" (Llama-2-7b-hf: 32 layers, hidden 4096, 6.7B parameters, 13.5 GB BF16), with
    --7b: a sparse file of zeros (writing 13.5 GB of random values takes longer than the run it
    measures; the arithmetic is the same, the disk is not read: the figure is compute and
    conversion). torch is not run on it: float32 weights alone are 27 GB, beyond this machine.
Both sides get the same token ids (a deterministic pseudo-random sequence of --tokens ids; the
tokenizer costs microseconds beside the forward pass). Measured per process from start to exit
(reading the weights included): wall, CPU (user + sys), peak RSS (getrusage of the child).
torch: /usr/bin/python3 with python3-torch, 2 threads, tools/smoke/families.py in float32 (the
reference the tests compare ckpt with), weights read by tools/smoke/safetensors_io.py. ckpt:
`ckpt smoke --token-ids FILE --threads 2 --no-locate --no-baseline --format json`.
Rounds alternate the order; reported: medians and the spread (min-max), ratios, and the mean
NLL of each side (they must agree: the same numbers were computed).

    /usr/bin/python3 bench/smoke_bench.py BUILD_DIR [--rounds R] [--tokens T] [--work DIR] [--7b] [--json FILE]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_CONFIGS = os.path.join(os.path.dirname(REPO), "shared", "corpus", "configs")
sys.path.insert(0, os.path.join(REPO, "tools", "smoke"))

TORCH_RUNNER = r"""
import json, sys, time
t0 = time.time()
import torch
sys.path.insert(0, sys.argv[1])
import families, safetensors_io
torch.set_num_threads(2)
model_dir, ids_file = sys.argv[2], sys.argv[3]
cfg = json.load(open(model_dir + "/config.json"))
ids = json.load(open(ids_file))
tensors, _ = safetensors_io.load(model_dir + "/model.safetensors")
model = families.CausalLM(cfg)
model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=True)
del tensors
t1 = time.time()
with torch.no_grad():
    x = torch.tensor(ids)
    logits, _ = model(x)
    nll, ppl, top1 = families.next_token_stats(logits, x)
t2 = time.time()
print(json.dumps({"nll_mean": nll, "load_s": t1 - t0, "forward_s": t2 - t1}))
"""


def standin_tensors(cfg):
    """(name, shape, kind) of every tensor of a llama/qwen2 checkpoint with this config."""
    H, L, V, I = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"], cfg["intermediate_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or H // nh
    qkv_bias = cfg["model_type"] == "qwen2"
    out = [("model.embed_tokens.weight", [V, H], "w"), ("model.norm.weight", [H], "norm")]
    for l in range(L):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", [H], "norm"), (p + "post_attention_layernorm.weight", [H], "norm"),
                (p + "self_attn.q_proj.weight", [nh * hd, H], "w"), (p + "self_attn.k_proj.weight", [nkv * hd, H], "w"),
                (p + "self_attn.v_proj.weight", [nkv * hd, H], "w"), (p + "self_attn.o_proj.weight", [H, nh * hd], "w"),
                (p + "mlp.gate_proj.weight", [I, H], "w"), (p + "mlp.up_proj.weight", [I, H], "w"),
                (p + "mlp.down_proj.weight", [H, I], "w")]
        if qkv_bias:
            out += [(p + "self_attn.q_proj.bias", [nh * hd], "bias"), (p + "self_attn.k_proj.bias", [nkv * hd], "bias"),
                    (p + "self_attn.v_proj.bias", [nkv * hd], "bias")]
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [V, H], "w"))
    return sorted(out)


def write_standin(config_name, out_dir, sparse):
    import numpy as np

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(CORPUS_CONFIGS, config_name, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = standin_tensors(cfg)
    header, offset = {}, 0
    for name, shape, _ in tensors:
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path = os.path.join(out_dir, "model.safetensors")
    rng = np.random.default_rng(20)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        if sparse:
            f.truncate(8 + len(blob) + offset)
        else:
            for name, shape, kind in tensors:
                count = 1
                for d in shape:
                    count *= d
                for start in range(0, count, 1 << 24):
                    n = min(1 << 24, count - start)
                    if kind == "norm":
                        values = np.ones(n, dtype=np.float32)
                    else:
                        values = (rng.standard_normal(n, dtype=np.float32) * 0.02).astype(np.float32)
                    f.write((values.view(np.uint32) >> 16).astype(np.uint16).tobytes())  # BF16: the high half
    params = sum(int(np.prod(s)) for _, s, _ in tensors)
    return cfg, params, os.path.getsize(path)


def measure(argv):
    """Runs argv; wall and CPU (user + sys) of that child alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rc": proc.returncode, "out": proc.stdout.decode(), "err": proc.stderr.decode(), "wall": wall, "cpu": cpu}


def peak_rss_of(argv):
    """Peak RSS of one run: RUSAGE_CHILDREN's maximum is over all children so far, so it is read
    in a fresh python child whose only child is argv."""
    code = ("import resource, subprocess, sys, json; p = subprocess.run(sys.argv[1:], capture_output=True); "
            "print(json.dumps({'rc': p.returncode, 'maxrss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))")
    r = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def spread(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--work", default="/tmp/ckpt-smoke-bench")
    ap.add_argument("--7b", dest="seven_b", action="store_true", help="also the 7B BF16 stand-in (ckpt only)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    ckpt = os.path.join(os.path.abspath(args.build_dir), "ckpt")
    results = {}

    def ids_for(vocab):
        ids = [(i * 7919 + 13) % vocab for i in range(args.tokens)]
        path = os.path.join(args.work, f"ids-{vocab}-{args.tokens}.json")
        with open(path, "w") as f:
            json.dump(ids, f)
        return path

    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "qwen1.5-0.5b")
    t = time.time()
    cfg, params, size = write_standin("Qwen1.5-0.5B-Chat-dense", model, sparse=False)
    print(f"stand-in qwen1.5-0.5b: {params / 1e6:.0f}M parameters, {size / 1e9:.2f} GB BF16 (written in {time.time() - t:.0f} s)")
    ids = ids_for(cfg["vocab_size"])
    ckpt_argv = [ckpt, "smoke", model, "--token-ids", ids, "--threads", "2", "--no-locate", "--no-baseline", "--format", "json"]
    torch_argv = ["/usr/bin/python3", "-c", TORCH_RUNNER, os.path.join(REPO, "tools", "smoke"), model, ids]
    runs = {"ckpt": [], "torch": []}
    for r in range(args.rounds):
        order = [("ckpt", ckpt_argv), ("torch", torch_argv)]
        if r % 2:
            order.reverse()
        for name, argv in order:
            m = measure(argv)
            if name == "torch" and m["rc"] != 0:
                raise SystemExit("torch run failed: " + m["err"][-2000:])
            if name == "ckpt" and m["rc"] not in (0, 1):
                raise SystemExit("ckpt smoke failed: " + m["out"][-2000:] + m["err"][-2000:])
            runs[name].append(m)
    rss = {name: peak_rss_of(argv)["maxrss_kb"] for name, argv in (("ckpt", ckpt_argv), ("torch", torch_argv))}
    ckpt_report = json.loads(runs["ckpt"][-1]["out"])
    torch_report = json.loads(runs["torch"][-1]["out"])
    import math
    ckpt_nll = math.log(ckpt_report["perplexity"])
    row = {}
    for name in ("ckpt", "torch"):
        row[name] = {"wall_s": [m["wall"] for m in runs[name]], "cpu_s": [m["cpu"] for m in runs[name]],
                     "peak_rss_mb": rss[name] / 1024}
    results["qwen1.5-0.5b"] = {"tokens": args.tokens, "params": params, "bytes": size, "ckpt_nll": ckpt_nll,
                               "torch_nll": torch_report["nll_mean"], **row}
    print(f"  {args.tokens} tokens, {args.rounds} rounds, median (min-max):")
    for name in ("ckpt", "torch"):
        print(f"  {name:6} wall {spread(row[name]['wall_s'])} s   CPU {spread(row[name]['cpu_s'])} s   "
              f"peak RSS {row[name]['peak_rss_mb']:.0f} MB")
    cw, tw = statistics.median(row["ckpt"]["wall_s"]), statistics.median(row["torch"]["wall_s"])
    cc, tc = statistics.median(row["ckpt"]["cpu_s"]), statistics.median(row["torch"]["cpu_s"])
    print(f"  ckpt / torch: wall {cw / tw:.2f}x, CPU {cc / tc:.2f}x, peak RSS {rss['ckpt'] / rss['torch']:.2f}x")
    print(f"  mean NLL: ckpt {ckpt_nll:.5f}, torch {torch_report['nll_mean']:.5f} "
          f"(torch forward alone {torch_report['forward_s']:.2f} s, its load {torch_report['load_s']:.2f} s)")
    if abs(ckpt_nll - torch_report["nll_mean"]) > 1e-3:
        raise SystemExit("the two sides computed different numbers: the comparison is void")

    if args.seven_b:
        big = os.path.join(args.work, "llama-2-7b")
        cfg, params, size = write_standin("Llama-2-7b-hf", big, sparse=True)
        ids = ids_for(cfg["vocab_size"])
        argv = [ckpt, "smoke", big, "--token-ids", ids, "--threads", "2", "--no-locate", "--no-baseline", "--format", "json"]
        code = ("import resource, subprocess, sys, json, time; t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True); "
                "w = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN); "
                "print(json.dumps({'rc': p.returncode, 'wall': w, 'cpu': u.ru_utime + u.ru_stime, 'maxrss_kb': u.ru_maxrss, 'out': p.stdout.decode()[-400:]}))")
        m = json.loads(subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True, check=True).stdout)
        print(f"stand-in llama-2-7b: {params / 1e9:.2f}B parameters, {size / 1e9:.1f} GB BF16 (sparse zeros), {args.tokens} tokens:")
        print(f"  ckpt   wall {m['wall']:.1f} s   CPU {m['cpu']:.1f} s   peak RSS {m['maxrss_kb'] / 1024:.0f} MB  (exit {m['rc']})")
        results["llama-2-7b"] = {"tokens": args.tokens, "params": params, "bytes": size, "wall_s": m["wall"], "cpu_s": m["cpu"],
                                 "peak_rss_mb": m["maxrss_kb"] / 1024}
        shutil.rmtree(big)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
