#!/usr/bin/python3
"""Writes real PyTorch checkpoints with torch.save (the independent writer) and describes what
torch itself reads back from each with torch.load(weights_only=True): names, dtypes, shapes,
strides, storage offsets, which tensors share a storage, and storage sizes. The C++ test reads
the same files without Python and must agree exactly.

usage: torch_oracle.py OUT_DIR   -> writes OUT_DIR/*.bin|*.pt|*.pth and OUT_DIR/expected.json
"""
import json
import os
import sys
from collections import OrderedDict

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


def mixed():
    sd = OrderedDict()
    sd["embed.weight"] = torch.randn(10, 4)
    sd["layers.0.attn.q_proj.weight"] = torch.randn(4, 4).half()
    sd["layers.0.attn.k_proj.weight"] = torch.randn(2, 4).bfloat16()
    sd["layers.0.norm.weight"] = torch.ones(4, dtype=torch.float64)
    sd["position_ids"] = torch.arange(7, dtype=torch.int64)
    sd["mask"] = torch.tensor([True, False, True])
    sd["step"] = torch.tensor(3, dtype=torch.int32)        # 0-dim
    sd["empty"] = torch.empty(0, 5)                          # zero-size
    sd["bytes"] = torch.arange(6, dtype=torch.uint8).reshape(2, 3)
    sd["int8"] = torch.arange(-3, 3, dtype=torch.int8)
    sd["int16"] = torch.arange(5, dtype=torch.int16)
    sd["complex"] = torch.randn(3, dtype=torch.complex64)
    return sd


def tied():
    emb = torch.randn(8, 4)
    sd = OrderedDict()
    sd["model.embed_tokens.weight"] = emb
    sd["model.norm.weight"] = torch.ones(4)
    sd["lm_head.weight"] = emb  # the very same tensor object
    return sd


def views():
    base = torch.randn(3, 4)
    emb = torch.randn(4, 3)
    wide = torch.randn(4, 6)
    sd = OrderedDict()
    sd["base"] = base
    sd["base_t"] = base.t()            # size (4,3) stride (1,4)
    sd["emb"] = emb
    sd["emb_tail"] = emb[1:]           # offset 3 into emb's storage
    sd["wide_even"] = wide[:, ::2]     # stride (6, 2)
    sd["expanded"] = torch.randn(1, 4).expand(3, 4)  # stride 0
    sd["slice_only"] = torch.randn(100)[10:15]        # whole storage written, 5 elements used
    return sd


def params():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    return m.state_dict(keep_vars=True)  # nn.Parameter objects: _rebuild_parameter


def many():
    sd = OrderedDict()
    for i in range(1500):
        sd[f"model.layers.{i}.mlp.weight"] = torch.full((2, 3), float(i))
    return sd


def module_state():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    return m.state_dict()  # OrderedDict with a _metadata BUILD


cases = {
    "mixed_zip.bin": (mixed, True),
    "mixed_legacy.bin": (mixed, False),
    "tied_zip.bin": (tied, True),
    "tied_legacy.bin": (tied, False),
    "views_zip.pt": (views, True),
    "views_legacy.pt": (views, False),
    "params_zip.pth": (params, True),
    "many_zip.bin": (many, True),
    "module_zip.bin": (module_state, True),
    "nested_zip.pt": (lambda: {"state_dict": tied(), "epoch": 3}, True),
}

expected = {}
for fname, (make, zipped) in cases.items():
    path = os.path.join(out, fname)
    torch.save(make(), path, _use_new_zipfile_serialization=zipped)
    loaded = torch.load(path, map_location="cpu", weights_only=True)

    flat = OrderedDict()

    def walk(obj, prefix):
        if isinstance(obj, torch.Tensor):
            flat[prefix] = obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))

    walk(loaded, "")
    storages = {}  # data_ptr of the storage -> ordinal of first tensor
    rows = []
    for i, (name, t) in enumerate(flat.items()):
        st = t.storage()
        key = st.data_ptr() if st.size() > 0 else ("empty", i)
        group = storages.setdefault(key, name)
        rows.append({
            "name": name,
            "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "offset": t.storage_offset(),
            "storage_group": group,
            "storage_numel": st.size(),
            "storage_nbytes": st.size() * st.element_size(),
        })
    expected[fname] = {"zip": zipped, "tensors": rows}

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(len(expected))
