#!/usr/bin/python3
"""Independent reader for `ckpt fixture` output (no ckpt code involved).

usage: read_fixture.py check DIR                 headers, sizes, offsets, finite values
       read_fixture.py dequant FLOAT_DIR Q_DIR SCHEME   decode one quantized module per scheme
                                                 and compare with the float fixture (same seed)
       read_fixture.py mlp DIR                   run layer 0's MLP matmuls (torch if importable,
                                                 else numpy) to show the shapes compose
Prints one line per fact and exits 1 on the first violation.
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {
    "F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2),
    "I64": (np.int64, 8), "I32": (np.int32, 4), "U32": (np.uint32, 4), "I16": (np.int16, 2),
    "U16": (np.uint16, 2), "I8": (np.int8, 1), "U8": (np.uint8, 1), "BOOL": (np.uint8, 1),
    "F8_E4M3": (None, 1),
}


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for v in range(256):
        s, e, m = v >> 7, (v >> 3) & 15, v & 7
        if e == 15 and m == 7:
            x = np.nan
        elif e == 0:
            x = m * 2.0 ** -9
        else:
            x = (8 + m) * 2.0 ** (e - 10)
        t[v] = -x if s else x
    return t


E4M3 = e4m3_table()


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: shorter than the length prefix")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail(f"{path}: header length {n} past EOF")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    tensors = {}
    spans = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, en) = e["dtype"], e["shape"], e["data_offsets"]
        if dt not in DTYPES:
            fail(f"{path}: {name}: dtype {dt} not handled")
        numel = int(np.prod(shape)) if shape else 1
        if en - b != numel * DTYPES[dt][1]:
            fail(f"{path}: {name}: span {en - b} != {numel} x {DTYPES[dt][1]}")
        spans.append((b, en, name))
        buf = data[b:en]
        if dt == "BF16":
            arr = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dt == "F8_E4M3":
            arr = E4M3[np.frombuffer(buf, dtype=np.uint8)]
        else:
            arr = np.frombuffer(buf, dtype=DTYPES[dt][0])
        tensors[name] = (dt, arr.reshape(shape) if shape else arr)
    spans.sort()
    pos = 0
    for b, en, name in spans:
        if b != pos:
            fail(f"{path}: {name}: data starts at {b}, previous tensor ended at {pos}")
        pos = en
    if pos != len(data):
        fail(f"{path}: data section is {len(data)} bytes, tensors cover {pos}")
    return header.get("__metadata__", {}), tensors


def load_dir(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            _, t = read_safetensors(os.path.join(d, fn))
            for k, v in t.items():
                if k in out:
                    fail(f"{k} in two shards")
                out[k] = v
    return out


def cmd_check(d):
    tensors = load_dir(d)
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = json.load(open(idx))["weight_map"]
        if set(wm) != set(tensors):
            fail("index weight_map names differ from the shards' tensors")
    for name, (dt, arr) in tensors.items():
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            fail(f"{name}: non-finite values")
    cfg = json.load(open(os.path.join(d, "config.json")))
    tok = json.load(open(os.path.join(d, "tokenizer.json")))
    vocab = tok["model"]["vocab"]
    n_tok = len(vocab) if isinstance(vocab, (dict, list)) else 0
    print(f"ok {d}: {len(tensors)} tensors, all finite; tokenizer {tok['model']['type']} {n_tok} tokens; "
          f"model_type {cfg.get('model_type')}")


def f32(x):
    return x.astype(np.float32)


def dequant_mlx(t, m, bits, group):
    w = t[m + ".weight"][1].astype(np.uint64)
    per = 32 // bits
    q = np.stack([(w >> (bits * e)) & ((1 << bits) - 1) for e in range(per)], axis=-1)
    q = q.reshape(*w.shape[:-1], w.shape[-1] * per).astype(np.float32)
    s = f32(t[m + ".scales"][1])
    b = f32(t[m + ".biases"][1])
    g = q.reshape(*q.shape[:-1], -1, group)
    return (g * s[..., None] + b[..., None]).reshape(q.shape), np.repeat(s, group, axis=-1)


def dequant_ct(t, m, bits, group):
    w = t[m + ".weight_packed"][1].view(np.uint32).astype(np.uint64)
    shape = t[m + ".weight_shape"][1]
    O, I = int(shape[-2]), int(shape[-1])
    per = 32 // bits
    q = np.stack([(w >> (bits * e)) & ((1 << bits) - 1) for e in range(per)], axis=-1)
    q = q.reshape(O, -1)[:, :I].astype(np.float32) - (1 << (bits - 1))
    s = np.repeat(f32(t[m + ".weight_scale"][1]), group, axis=-1)[:, :I]
    return q * s, s


def dequant_gptq(t, m, bits, group):
    qw = t[m + ".qweight"][1].view(np.uint32).astype(np.uint64)  # [I*b/32, O]
    per = 32 // bits
    q = np.stack([(qw >> (bits * e)) & ((1 << bits) - 1) for e in range(per)], axis=1)  # [I/per, per, O]
    q = q.reshape(-1, qw.shape[1]).astype(np.float32)  # [I, O]
    qz = t[m + ".qzeros"][1].view(np.uint32).astype(np.uint64)  # [G, O*b/32]
    z = np.stack([(qz >> (bits * e)) & ((1 << bits) - 1) for e in range(per)], axis=-1).reshape(qz.shape[0], -1)
    z = z.astype(np.float32) + 1  # v1 stores z - 1
    s = f32(t[m + ".scales"][1])  # [G, O]
    gidx = t[m + ".g_idx"][1]
    w = (q - z[gidx]) * s[gidx]
    return w.T, s[gidx].T


def dequant_fp8(t, m):
    w = t[m + ".weight"][1]
    si = t[m + ".weight_scale_inv"][1]
    full = np.repeat(np.repeat(si, 128, axis=0), 128, axis=1)[: w.shape[0], : w.shape[1]]
    return w * full, full


def cmd_dequant(fdir, qdir, scheme):
    ft, qt = load_dir(fdir), load_dir(qdir)
    cfg = json.load(open(os.path.join(qdir, "config.json")))
    suffix = {"mlx4": ".scales", "mlx8": ".scales", "ct-int4": ".weight_packed", "gptq4": ".qweight",
              "fp8": ".weight_scale_inv"}[scheme]
    mods = sorted(k[: -len(suffix)] for k in qt if k.endswith(suffix) and ".layers.0." in k + ".")
    mods = [m for m in mods if "mlp" in m] or mods
    if not mods:
        fail(f"{qdir}: no {scheme} module in layer 0")
    m = mods[0]
    ref = f32(ft[m + ".weight"][1])
    if scheme in ("mlx4", "mlx8"):
        q = cfg["quantization"]
        bits, group = q.get(m, q).get("bits", q["bits"]), q["group_size"]
        w, s = dequant_mlx(qt, m, bits, group)
        bound = 0.5 * s + 1e-3 * np.abs(ref) + 1e-6
    elif scheme == "ct-int4":
        g = cfg["quantization_config"]["config_groups"]["group_0"]["weights"]
        w, s = dequant_ct(qt, m, g["num_bits"], g["group_size"])
        bound = 0.5 * s + 1e-3 * np.abs(ref) + 1e-6
    elif scheme == "gptq4":
        q = cfg["quantization_config"]
        w, s = dequant_gptq(qt, m, q["bits"], q["group_size"])
        bound = 0.5 * s + 1e-3 * np.abs(ref) + 1e-6
    else:
        w, s = dequant_fp8(qt, m)
        bound = 2.0 ** -4 * np.abs(ref) + s * 2.0 ** -9 + 1e-6  # e4m3: 3 mantissa bits
    if w.shape != ref.shape:
        fail(f"{m}: dequantized shape {w.shape} != float reference {ref.shape}")
    err = np.abs(w - ref)
    if not np.all(err <= bound):
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        fail(f"{m}: |deq - ref| = {err[i]:.3g} > bound {bound[i]:.3g} at {i}")
    rel = float(np.sqrt(np.mean(err ** 2)) / np.sqrt(np.mean(ref ** 2)))
    print(f"ok {scheme} {m}: shape {list(ref.shape)}, max err {err.max():.3g}, relative rms {rel:.3f}")


def cmd_mlp(d):
    t = load_dir(d)
    names = sorted(k for k in t if ".layers.0." in k and k.endswith("up_proj.weight") and "expert" not in k)
    if not names:
        fail(f"{d}: no dense layer-0 up_proj")
    up = names[0]
    base = up[: -len("up_proj.weight")]
    gate, down = base + "gate_proj.weight", base + "down_proj.weight"
    W = {k: f32(t[k][1]) for k in (gate, up, down)}
    H = W[up].shape[1]
    x = np.random.default_rng(0).standard_normal((3, H)).astype(np.float32)
    try:
        import torch  # noqa: F401
        tx = torch.from_numpy(x)
        g = torch.nn.functional.linear(tx, torch.from_numpy(W[gate]))
        u = torch.nn.functional.linear(tx, torch.from_numpy(W[up]))
        y = torch.nn.functional.linear(torch.nn.functional.silu(g) * u, torch.from_numpy(W[down])).numpy()
        engine = "torch " + torch.__version__
    except ImportError:
        g, u = x @ W[gate].T, x @ W[up].T
        y = ((g / (1 + np.exp(-g))) * u) @ W[down].T
        engine = "numpy (python3-torch not importable)"
    if y.shape != x.shape or not np.all(np.isfinite(y)):
        fail(f"{base}: MLP output {y.shape} (finite={np.all(np.isfinite(y))}) for input {x.shape}")
    print(f"ok mlp {base} via {engine}: {list(x.shape)} -> {list(y.shape)}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        for d in sys.argv[2:]:
            cmd_check(d)
    elif len(sys.argv) == 5 and sys.argv[1] == "dequant":
        cmd_dequant(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 3 and sys.argv[1] == "mlp":
        for d in sys.argv[2:]:
            cmd_mlp(d)
    else:
        print(__doc__)
        sys.exit(2)
