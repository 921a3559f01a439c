#!/usr/bin/python3
"""--deep oracle: a pytorch_model.bin written by torch.save whose NaN / Inf values sit in
non-contiguous views (a transpose, a ::2 slice whose skipped columns are NaN, an expand, a
slice of a larger storage whose unused part is NaN), plus a big-endian twin of the same
archive (torch 1.13 cannot write one: the storages are byte-swapped per element and a
`byteorder` record saying "big" is added, as torch >= 2.1 writes on a big-endian host).

usage: deep_oracle.py OUT_DIR -> OUT_DIR/{le,be}/pytorch_model.bin and OUT_DIR/expected.json:
  {tensor: {"nan": n, "first_nan": [i, j] | null, "inf": n, "first_inf": [...] | null,
            "distinct": bool, "values": n}}
counted by torch over the elements each tensor addresses (stride-0 dims dropped: each stored
value once), the first index being the row-major index of the first hit.
"""
import json
import os
import sys
import zipfile
from collections import OrderedDict

import torch

out = sys.argv[1]
for d in ("le", "be"):
    os.makedirs(os.path.join(out, d), exist_ok=True)
torch.manual_seed(0)
nan, inf = float("nan"), float("inf")

sd = OrderedDict()
base = torch.randn(3, 4)
base[1, 2] = nan
sd["base_t.weight"] = base.t()                      # (4,3) stride (1,4): NaN at [2,1]
wide = torch.randn(4, 6)
wide[:, 1::2] = nan                                 # never addressed by the view below
wide[2, 4] = inf
sd["wide_even.weight"] = wide[:, ::2]               # stride (6,2): one Inf at [2,2], no NaN
row = torch.tensor([[1.0, nan, 3.0, 4.0]])
sd["expanded.weight"] = row.expand(3, 4)            # stride (0,1): 1 distinct NaN, at [0,1]
big = torch.randn(100)
big[50] = nan
sd["slice_only.weight"] = big[10:15]                # offset 10: the NaN is outside the view
h = torch.randn(8, 16).half()
h[5, 3] = inf
h[6, 0] = nan
sd["half_proj.weight"] = h                          # contiguous F16: 2-byte swap in the BE twin
bf = torch.randn(4, 8).bfloat16()
bf[0, 7] = nan
sd["bf16_t.weight"] = bf.t()                        # transposed BF16
sd["clean.weight"] = torch.randn(16, 16).double()   # 8-byte elements, nothing to report

path = os.path.join(out, "le", "pytorch_model.bin")
torch.save(sd, path)

# What torch says each tensor holds, over the elements it addresses.
loaded = torch.load(path, map_location="cpu", weights_only=True)
expected = {}
for name, t in loaded.items():
    keep = [i for i in range(t.dim()) if not (t.stride(i) == 0 and t.size(i) > 1)]
    distinct = len(keep) != t.dim()
    v = torch.as_strided(t, [t.size(i) for i in keep], [t.stride(i) for i in keep], t.storage_offset()).float()

    def first(mask):
        idx = mask.reshape(-1).nonzero()
        if idx.numel() == 0:
            return None
        flat = int(idx[0])
        sub = []
        for size in reversed(v.shape):
            sub.insert(0, flat % size)
            flat //= size
        full = [0] * t.dim()
        for k, i in enumerate(keep):
            full[i] = int(sub[k])
        return full

    expected[name] = {"nan": int(torch.isnan(v).sum()), "first_nan": first(torch.isnan(v)),
                      "inf": int(torch.isinf(v).sum()), "first_inf": first(torch.isinf(v)),
                      "distinct": distinct, "values": v.numel(), "dtype": str(t.dtype).replace("torch.", "")}

# The big-endian twin: every data/<key> record swapped by its element size, plus byteorder.
with zipfile.ZipFile(path) as src:
    names = src.namelist()
    root = names[0].split("/")[0]
    # element size per storage (each storage has one dtype), keyed by its data pointer
    key_size = {}
    for name, t in loaded.items():
        st = t.storage()
        key_size[st.data_ptr()] = t.element_size()
    # torch.save names the storages 0..N in the order the state_dict first reaches them
    order = []
    for name, t in loaded.items():
        p = t.storage().data_ptr()
        if p not in order:
            order.append(p)
    with zipfile.ZipFile(os.path.join(out, "be", "pytorch_model.bin"), "w", zipfile.ZIP_STORED) as dst:
        for n in names:
            data = src.read(n)
            rel = n[len(root) + 1:]
            if rel.startswith("data/"):
                size = key_size[order[int(rel[5:])]]
                data = b"".join(data[i:i + size][::-1] for i in range(0, len(data), size))
            dst.writestr(n, data)
            if rel == "data.pkl":
                dst.writestr(root + "/byteorder", b"big")

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(len(expected))
