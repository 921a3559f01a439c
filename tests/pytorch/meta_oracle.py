#!/usr/bin/python3
"""Writes Meta-layout checkpoints (consolidated.NN.pth per model-parallel rank + params.json)
with torch.save, split the way Meta's fairscale layers split them (llama/model.py): wq wk wv w1
w3 output by rows (dim 0), wo w2 by columns (dim 1), tok_embeddings by columns (Llama 1/2) or
rows (Llama 3), norms replicated. As in Meta's own files, each layer's tensors of one rank are
views of one shared storage. Then one directory per planted defect.

usage: meta_oracle.py OUT_DIR -> OUT_DIR/<case>/ and OUT_DIR/expected.json:
  {case: {"defect_codes": [...], "ranks": {file: {name: [dtype, shape]}}}}
where "ranks" is what torch.load(weights_only=True) reads back from every rank file.
"""
import glob
import json
import os
import sys
from collections import OrderedDict

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

PARAMS = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 48,
          "multiple_of": 32, "ffn_dim_multiplier": 1.3, "norm_eps": 1e-05, "rope_theta": 10000.0}


def hidden(p):
    h = 4 * p["dim"]
    h = int(2 * h / 3)
    if p.get("ffn_dim_multiplier") is not None:
        h = int(p["ffn_dim_multiplier"] * h)
    m = p["multiple_of"]
    return m * ((h + m - 1) // m)


def full_model(p):
    dim, hd = p["dim"], p["dim"] // p["n_heads"]
    kv = p.get("n_kv_heads") or p["n_heads"]
    hid = hidden(p)
    sd = OrderedDict()
    sd["tok_embeddings.weight"] = torch.randn(p["vocab_size"], dim).half()
    for i in range(p["n_layers"]):
        pre = f"layers.{i}."
        sd[pre + "attention.wq.weight"] = torch.randn(p["n_heads"] * hd, dim).half()
        sd[pre + "attention.wk.weight"] = torch.randn(kv * hd, dim).half()
        sd[pre + "attention.wv.weight"] = torch.randn(kv * hd, dim).half()
        sd[pre + "attention.wo.weight"] = torch.randn(dim, p["n_heads"] * hd).half()
        sd[pre + "feed_forward.w1.weight"] = torch.randn(hid, dim).half()
        sd[pre + "feed_forward.w2.weight"] = torch.randn(dim, hid).half()
        sd[pre + "feed_forward.w3.weight"] = torch.randn(hid, dim).half()
        sd[pre + "attention_norm.weight"] = torch.ones(dim).half()
        sd[pre + "ffn_norm.weight"] = torch.ones(dim).half()
    sd["norm.weight"] = torch.ones(dim).half()
    sd["output.weight"] = torch.randn(p["vocab_size"], dim).half()
    sd["rope.freqs"] = torch.ones(hd // 2)
    return sd


def split_dim(name, llama3):
    if name == "tok_embeddings.weight":
        return 0 if llama3 else 1
    for s in ("wq", "wk", "wv", "w1", "w3"):
        if name.endswith(f".{s}.weight"):
            return 0
    if name == "output.weight":
        return 0
    if name.endswith(".wo.weight") or name.endswith(".w2.weight"):
        return 1
    return None


def shard(sd, mp, llama3=False):
    """Per-rank state dicts; a layer's tensors on one rank are views of one storage (as Meta's)."""
    ranks = [OrderedDict() for _ in range(mp)]
    for r in range(mp):
        parts = OrderedDict()
        for name, t in sd.items():
            d = split_dim(name, llama3)
            parts[name] = t if d is None else torch.chunk(t, mp, dim=d)[r]
        # one flat storage per layer (and one for the rest), the tensors viewing it
        groups = OrderedDict()
        for name, t in parts.items():
            key = name.split(".")[1] if name.startswith("layers.") else ("rope" if name == "rope.freqs" else "top")
            groups.setdefault(key, []).append(name)
        for key, names in groups.items():
            dtype = parts[names[0]].dtype
            same = all(parts[n].dtype == dtype for n in names)
            if not same:
                for n in names:
                    ranks[r][n] = parts[n].clone()
                continue
            flat = torch.empty(sum(parts[n].numel() for n in names), dtype=dtype)
            off = 0
            for n in names:
                t = parts[n]
                view = flat[off:off + t.numel()].view(t.shape)
                view.copy_(t)
                ranks[r][n] = view
                off += t.numel()
        ranks[r] = OrderedDict((n, ranks[r][n]) for n in sd.keys() if n in ranks[r])
    return ranks


def write(case, ranks, params, codes, rank_names=None):
    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    for i, sd in enumerate(ranks):
        name = rank_names[i] if rank_names else f"consolidated.{i:02d}.pth"
        torch.save(sd, os.path.join(d, name))
    if params is not None:
        with open(os.path.join(d, "params.json"), "w") as f:
            json.dump(params, f)
    read = {}
    for f in sorted(glob.glob(os.path.join(d, "*.pth"))):
        sd = torch.load(f, map_location="cpu", weights_only=True)
        read[os.path.basename(f)] = {k: [str(v.dtype).replace("torch.", ""), list(v.shape)] for k, v in sd.items()}
    expected[case] = {"defect_codes": codes, "ranks": read}


expected = {}
sd = full_model(PARAMS)
write("clean_mp2", shard(sd, 2), PARAMS, [])
write("clean_mp2_llama3", shard(sd, 2, llama3=True), PARAMS, [])
write("clean_mp1", shard(sd, 1), PARAMS, [])
p_nokv = dict(PARAMS, n_kv_heads=None, ffn_dim_multiplier=None)
write("clean_mha_mp4", shard(full_model(p_nokv), 4), p_nokv, [])

r = shard(sd, 4)
write("missing_rank", [r[0], r[2], r[3]], PARAMS, ["PT015"], ["consolidated.00.pth", "consolidated.02.pth", "consolidated.03.pth"])
write("uneven_split", shard(sd, 3), PARAMS, ["PT018"])  # torch.chunk by 3: fairscale never splits unevenly
write("no_params", shard(sd, 2), None, ["PT016"])
write("bad_params", shard(sd, 2), dict(PARAMS, n_heads=0), ["PT016"])
write("params_other_model", shard(sd, 2), dict(PARAMS, n_kv_heads=4), ["PT019"])
write("params_more_layers", shard(sd, 2), dict(PARAMS, n_layers=3), ["PT020"])
write("params_fewer_layers", shard(sd, 2), dict(PARAMS, n_layers=1), ["PT021"])
r = shard(sd, 2)
del r[1]["layers.1.attention.wk.weight"]
write("rank_lacks_tensor", r, PARAMS, ["PT017"])
r = shard(sd, 2)
r[1]["layers.0.attention.wq.weight"] = torch.randn(16, 64).half()
write("rank_shape_differs", r, PARAMS, ["PT018"])
r = shard(sd, 2)
for x in r:
    del x["layers.0.feed_forward.w2.weight"]
write("tensor_missing", r, PARAMS, ["PT020"])
r = shard(sd, 2)
for x in r:
    x["lm_head.weight"] = torch.zeros(4, 4).half()
write("unexpected_tensor", r, PARAMS, ["PT021"])
r = shard(sd, 2)
r[1]["norm.weight"] = r[1]["norm.weight"].float()
write("rank_dtype_differs", r, PARAMS, ["PT017"])

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(len(expected))
