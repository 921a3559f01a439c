#!/usr/bin/env python3
"""Independent reference for `ckpt diff --deep`'s value comparison (numpy only, no ckpt code).

  values_oracle.py compare CKPT A B       run `CKPT diff A B --deep --format json`, dequantize both
                                          sides here from the formats' specs
                                          (specs/quantization-layouts.md, specs/gguf.md), and
                                          require the same weights, metrics and skips
  values_oracle.py make-awq FLOAT OUT     write an AWQ gemm 4-bit g32 export of a float fixture
  values_oracle.py make-gptq-v2 FLOAT OUT write a GPTQ v2 export (raw zeros, asymmetric, act-order
                                          g_idx permutation), 4-bit g32
  values_oracle.py make-stacked MLX OUT   stack an MLX export's per-expert tensors as mlx-lm does
                                          (switch_mlp.* [E, O, I])
  values_oracle.py gguf-facts FILE        print {params, tensor_bytes, layers, kv_bytes_per_token} of a
                                          GGUF as llama.cpp sizes it (f16 K and V, every layer full)
Prints "ok ..." on success, "FAIL ..." and exits 1 otherwise.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixture_matrix"))
from read_fixture import E4M3, load_dir, read_safetensors  # noqa: E402  (the fixture's own numpy reader)


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def f16(u16):
    return np.asarray(u16, dtype=np.uint16).view(np.float16).astype(np.float32)


def f32(x):
    return np.asarray(x).astype(np.float32)


# ---- bit fields -------------------------------------------------------------------------------

def unpack_along_last(words, bits, count):
    """Dense LSB-first bitstream of uint32 words along the last axis -> `count` b-bit values."""
    w = words.astype(np.uint64)
    bitpos = np.arange(count, dtype=np.uint64) * np.uint64(bits)
    idx = (bitpos // 32).astype(np.int64)
    off = bitpos % np.uint64(32)
    lo = w[..., idx] >> off
    nxt = np.minimum(idx + 1, w.shape[-1] - 1)
    hi = np.where(off + np.uint64(bits) > 32, w[..., nxt] << (np.uint64(32) - off), np.uint64(0))
    return ((lo | hi) & np.uint64((1 << bits) - 1)).astype(np.int64)


# ---- safetensors side: logical weights ----------------------------------------------------------

def cfg_of(d):
    p = os.path.join(d, "config.json")
    return json.load(open(p)) if os.path.exists(p) else {}


def st_weights(d):
    """name -> (float32 array as computed with, encoding tag) for one safetensors directory."""
    t = load_dir(d)
    cfg = cfg_of(d)
    qc = cfg.get("quantization_config") or {}
    mlx = cfg.get("quantization")
    out, used = {}, set()

    def arr(n):
        return t[n][1]

    for n in sorted(t):
        if n.endswith(".scales") and mlx is not None and (n[:-7] + ".biases") in t:
            m = n[:-7]
            o = mlx.get(m) if isinstance(mlx.get(m), dict) else mlx
            bits, group = o.get("bits", mlx["bits"]), o.get("group_size", mlx["group_size"])
            w = arr(m + ".weight").view(np.uint32)
            cols = w.shape[-1] * 32 // bits
            q = unpack_along_last(w, bits, cols).astype(np.float32)
            s, b = f32(arr(m + ".scales")), f32(arr(m + ".biases"))
            s, b = np.repeat(s, group, axis=-1), np.repeat(b, group, axis=-1)
            out[m + ".weight"] = (s * q + b, "mlx")
            used |= {m + ".weight", m + ".scales", m + ".biases"}
        elif n.endswith(".weight_packed"):
            m = n[:-14]
            # compressed-tensors matching: a regex target (re.match) beats a class name
            groups = qc["config_groups"].values()
            hit = [g for g in groups for tg in g["targets"] if tg.startswith("re:") and re.match(tg[3:], m)]
            grp = (hit or [g for g in groups if "Linear" in g["targets"]])[0]["weights"]
            bits, group = grp["num_bits"], grp["group_size"]
            shape = arr(m + ".weight_shape")
            I = int(shape[-1])
            q = unpack_along_last(arr(n).view(np.uint32), bits, I).astype(np.float32) - (1 << (bits - 1))
            s = np.repeat(f32(arr(m + ".weight_scale")), group, axis=-1)[..., :I]
            out[m + ".weight"] = (q * s, "ct")
            used |= {n, m + ".weight_scale", m + ".weight_shape"}
        elif n.endswith(".qweight"):
            m = n[:-8]
            bits = qc.get("bits", 4)
            qw = arr(n).view(np.uint32)
            qz = arr(m + ".qzeros").view(np.uint32)
            s = f32(arr(m + ".scales"))
            if qc.get("quant_method") == "awq":  # [I, O/8], nibble k holds output order[k]
                order = [0, 2, 4, 6, 1, 3, 5, 7]
                I, O = qw.shape[0], qw.shape[1] * 8
                q = np.zeros((I, O), np.float32)
                z = np.zeros((qz.shape[0], O), np.float32)
                for k in range(8):
                    q[:, order[k]::8] = (qw >> (4 * k)) & 15
                    z[:, order[k]::8] = (qz >> (4 * k)) & 15
                g = qc["group_size"]
                gi = np.arange(I) // g
                out[m + ".weight"] = (((q - z[gi]) * s[gi]).T.copy(), "awq")
            else:  # GPTQ: qweight [I*b/32, O] packed along dim 0, qzeros [G, O*b/32]
                O = qw.shape[1]
                gidx = arr(m + ".g_idx").astype(np.int64)
                I = gidx.shape[0]
                q = unpack_along_last(qw.T, bits, I).T.astype(np.float32)  # [I, O]
                z = unpack_along_last(qz, bits, O).astype(np.float32)      # [G, O]
                if qc.get("checkpoint_format", "gptq") != "gptq_v2":
                    z = z + 1
                out[m + ".weight"] = (((q - z[gidx]) * s[gidx]).T.copy(), "gptq")
            used |= {n, m + ".qzeros", m + ".scales", m + ".g_idx"}
        elif n.endswith(".weight_scale_inv"):
            m = n[:-17]
            w = f32(arr(m + ".weight"))
            si = f32(arr(n))
            br, bc = qc.get("weight_block_size", [128, 128])
            full = np.repeat(np.repeat(si, br, axis=-2), bc, axis=-1)[..., : w.shape[-2], : w.shape[-1]]
            out[m + ".weight"] = (w * full, "fp8")
            used |= {m + ".weight", n}
    for n in sorted(t):
        if n in used or n in out:
            continue
        dt, a = t[n]
        if dt in ("F32", "F16", "BF16", "F64", "F8_E4M3"):
            out[n] = (f32(a), dt)
    return out


# ---- GGUF side ----------------------------------------------------------------------------------

GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
        6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144),
        13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110)}


def read_gguf(path, facts=None):
    raw = open(path, "rb").read()
    pos = [0]

    def take(fmt):
        v = struct.unpack_from("<" + fmt, raw, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        n = take("Q")
        s = raw[pos[0]:pos[0] + n].decode("utf-8", "replace")
        pos[0] += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    if raw[:4] != b"GGUF":
        fail(f"{path}: not GGUF")
    pos[0] = 4
    take("I")
    nt, nkv = take("Q"), take("Q")
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        typ, off = take("I"), take("Q")
        infos.append((name, ne, typ, off))
    if facts is not None:
        facts["kv"] = kv
        facts["infos"] = infos
        return None
    align = kv.get("general.alignment", 32)
    start = (pos[0] + align - 1) // align * align
    out = {}
    for name, ne, typ, off in infos:
        if typ not in GGML:
            continue
        tname, blk, bsz = GGML[typ]
        n = int(np.prod(ne))
        nbytes = n // blk * bsz
        buf = np.frombuffer(raw, dtype=np.uint8, count=nbytes, offset=start + off)
        shape = list(reversed(ne))
        vals = dequant_gguf(tname, buf, n)
        out[name] = (None if vals is None else vals.reshape(shape), "GGUF " + tname)
    return out


def dequant_gguf(t, buf, n):
    if t == "F32":
        return buf.view(np.float32).copy()
    if t == "F16":
        return f16(buf.view(np.uint16))
    if t == "BF16":
        return (buf.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if t == "Q8_0":
        b = buf.reshape(-1, 34)
        d = f16(b[:, :2].copy().view(np.uint16))
        return (b[:, 2:].view(np.int8).astype(np.float32) * d).reshape(-1)
    if t in ("Q4_0", "Q4_1"):
        size = 18 if t == "Q4_0" else 20
        b = buf.reshape(-1, size)
        d = f16(b[:, :2].copy().view(np.uint16))
        qs = b[:, size - 16:]
        lo, hi = (qs & 15).astype(np.float32), (qs >> 4).astype(np.float32)
        q = np.concatenate([lo, hi], axis=1)
        if t == "Q4_0":
            return ((q - 8) * d).reshape(-1)
        m = f16(b[:, 2:4].copy().view(np.uint16))
        return (q * d + m).reshape(-1)
    if t in ("Q5_0", "Q5_1"):
        size = 22 if t == "Q5_0" else 24
        b = buf.reshape(-1, size)
        d = f16(b[:, :2].copy().view(np.uint16))
        h0 = 2 if t == "Q5_0" else 4
        qh = b[:, h0:h0 + 4].copy().view(np.uint32)[:, 0]
        qs = b[:, h0 + 4:]
        j = np.arange(16, dtype=np.uint32)
        lo = (qs & 15).astype(np.int64) | (((qh[:, None] >> j) & 1) << 4).astype(np.int64)
        hi = (qs >> 4).astype(np.int64) | (((qh[:, None] >> (j + 16)) & 1) << 4).astype(np.int64)
        q = np.concatenate([lo, hi], axis=1).astype(np.float32)
        if t == "Q5_0":
            return ((q - 16) * d).reshape(-1)
        m = f16(b[:, 2:4].copy().view(np.uint16))
        return (q * d + m).reshape(-1)
    if t in ("Q4_K", "Q5_K"):
        size = 144 if t == "Q4_K" else 176
        b = buf.reshape(-1, size)
        d = f16(b[:, 0:2].copy().view(np.uint16))[:, 0]
        dmin = f16(b[:, 2:4].copy().view(np.uint16))[:, 0]
        sc = b[:, 4:16].astype(np.int64)
        # the 6-bit scale and min of each of the 8 sub-blocks of 32
        scale = np.zeros((b.shape[0], 8), np.int64)
        mins = np.zeros((b.shape[0], 8), np.int64)
        for j in range(8):
            if j < 4:
                scale[:, j], mins[:, j] = sc[:, j] & 63, sc[:, j + 4] & 63
            else:
                scale[:, j] = (sc[:, j + 4] & 15) | ((sc[:, j - 4] >> 6) << 4)
                mins[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
        if t == "Q4_K":
            qs = b[:, 16:144]
            qh = None
        else:
            qh = b[:, 16:48]
            qs = b[:, 48:176]
        y = np.zeros((b.shape[0], 256), np.float32)
        for c in range(4):  # 64 values per chunk: low nibbles then high nibbles of 32 bytes
            q = qs[:, 32 * c:32 * c + 32]
            lo, hi = (q & 15).astype(np.float32), (q >> 4).astype(np.float32)
            if qh is not None:
                lo = lo + ((qh >> (2 * c)) & 1) * 16
                hi = hi + ((qh >> (2 * c + 1)) & 1) * 16
            s0, s1 = 2 * c, 2 * c + 1
            y[:, 64 * c:64 * c + 32] = (d * scale[:, s0])[:, None].astype(np.float32) * lo - (dmin * mins[:, s0])[:, None]
            y[:, 64 * c + 32:64 * c + 64] = (d * scale[:, s1])[:, None].astype(np.float32) * hi - (dmin * mins[:, s1])[:, None]
        return y.reshape(-1)
    if t == "Q6_K":
        b = buf.reshape(-1, 210)
        ql, qh = b[:, :128].astype(np.int64), b[:, 128:192].astype(np.int64)
        sc = b[:, 192:208].view(np.int8).astype(np.float32)
        d = f16(b[:, 208:210].copy().view(np.uint16))[:, 0]
        y = np.zeros((b.shape[0], 256), np.float32)
        for half in range(2):
            L = ql[:, 64 * half:64 * half + 64]
            H = qh[:, 32 * half:32 * half + 32]
            q1 = (L[:, :32] & 15) | (((H >> 0) & 3) << 4)
            q2 = (L[:, 32:] & 15) | (((H >> 2) & 3) << 4)
            q3 = (L[:, :32] >> 4) | (((H >> 4) & 3) << 4)
            q4 = (L[:, 32:] >> 4) | (((H >> 6) & 3) << 4)
            for k, q in enumerate((q1, q2, q3, q4)):
                # value l of quarter k uses scale index 8*half + 2*k + l//16
                s = np.repeat(sc[:, 8 * half + 2 * k:8 * half + 2 * k + 2], 16, axis=1)
                y[:, 128 * half + 32 * k:128 * half + 32 * k + 32] = d[:, None] * s * (q - 32).astype(np.float32)
        return y.reshape(-1)
    return None  # not dequantized (Q2_K, Q3_K, ...)


def weights_of(d):
    if os.path.isdir(d):
        gg = [f for f in os.listdir(d) if f.endswith(".gguf")]
        if gg:
            out = {}
            for f in sorted(gg):
                out.update(read_gguf(os.path.join(d, f)))
            return out
        return st_weights(d)
    return read_gguf(d)


def metrics(a, b):
    a, b = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
    fin = np.isfinite(a) & np.isfinite(b)
    a, b = a[fin], b[fin]
    dlt = b - a
    saa, sbb = float(a @ a), float(b @ b)
    rel = float(np.sqrt(dlt @ dlt / saa)) if saa > 0 else (float("inf") if (dlt @ dlt) > 0 else 0.0)
    cos = float(a @ b / np.sqrt(saa * sbb)) if saa > 0 and sbb > 0 else None
    mx = float(np.abs(dlt).max()) if dlt.size else 0.0
    return {"rel_l2": rel, "cosine": cos, "max_abs_diff": mx, "nonfinite": int((~fin).sum())}


def close(x, y, tol):
    if x is None or y is None:
        return x is None and y is None
    return abs(x - y) <= tol * max(abs(x), abs(y), 1e-30) + 1e-12


def cmd_compare(ckpt, A, B):
    r = subprocess.run([ckpt, "diff", A, B, "--deep", "--format", "json"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        fail(f"ckpt diff exited {r.returncode}: {r.stderr}")
    got = json.loads(r.stdout)["values"]
    if got is None:
        fail("no values section with --deep")
    wa, wb = weights_of(A), weights_of(B)
    # per-expert weights against mlx-lm's stacked switch_mlp tensors: expert e is slice [e]
    for mine, other in ((wa, wb), (wb, wa)):
        for n in list(mine):
            mt = re.match(r"^(.*)\.experts\.(\d+)\.(.*\.weight)$", n)
            if n in other or not mt:
                continue
            stacked = other.get(mt.group(1) + ".switch_mlp." + mt.group(3))
            if stacked and stacked[0] is not None and stacked[0].ndim == 3 and int(mt.group(2)) < stacked[0].shape[0]:
                other[n] = (stacked[0][int(mt.group(2))], stacked[1])
    want = {}
    not_here = set()
    for n in sorted(set(wa) & set(wb)):
        (x, ea), (y, eb) = wa[n], wb[n]
        if x is None or y is None:
            not_here.add(n)
            continue
        if x.shape != y.shape:
            not_here.add(n)
            continue
        m = metrics(x, y)
        if m["max_abs_diff"] > 0 or m["nonfinite"]:
            want[n] = m
    have = {e["name"]: e for e in got["differ"]}
    errors = [e for e in got["differ"] if e.get("error")]
    if errors:
        fail(f"ckpt could not read: {errors[:3]}")
    if set(have) != set(want):
        fail(f"weights that differ: ckpt only {sorted(set(have) - set(want))[:5]}, "
             f"oracle only {sorted(set(want) - set(have))[:5]}")
    skipped = {e["name"] for e in got["not_compared"]}
    if skipped != not_here:
        fail(f"not compared: ckpt {sorted(skipped)[:5]}, oracle {sorted(not_here)[:5]}")
    worst = 0.0
    for n, m in want.items():
        h = have[n]
        for k, tol in (("rel_l2", 1e-5), ("cosine", 1e-7), ("max_abs_diff", 1e-5)):
            if not close(h[k], m[k], tol):
                fail(f"{n}: {k} ckpt {h[k]!r} oracle {m[k]!r}")
        if h["nonfinite"] != m["nonfinite"]:
            fail(f"{n}: nonfinite ckpt {h['nonfinite']} oracle {m['nonfinite']}")
        worst = max(worst, m["rel_l2"])
    order = [e["rel_l2"] for e in got["differ"]]
    if order != sorted(order, reverse=True):
        fail("differ list is not worst first")
    print(f"ok {len(want)} weights differ, {len(not_here)} not compared, worst rel L2 {worst:.4g}")


# ---- writers of exports the fixture does not make -------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def to_f16(x):
    return x.astype(np.float16)


def linear_modules(t):
    """2-D float weights of Linear layers inside the decoder blocks (what AWQ/GPTQ quantize)."""
    return [n[:-7] for n, (dt, a) in t.items()
            if n.endswith(".weight") and ".layers." in n and a.ndim == 2 and dt in ("BF16", "F16", "F32")
            and "norm" not in n and a.shape[1] % 32 == 0 and a.shape[0] % 8 == 0]


def copy_side_files(src, dst):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if not f.endswith(".safetensors") and not f.endswith(".index.json") and os.path.isfile(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def cmd_make(kind, src, dst):
    t = load_dir(src)
    copy_side_files(src, dst)
    out = {n: (dt, a) for n, (dt, a) in t.items()}
    rng = np.random.default_rng(7)
    g = 32
    for m in linear_modules(t):
        w = f32(t[m + ".weight"][1])  # [O, I]
        O, I = w.shape
        wg = w.reshape(O, I // g, g)
        mn, mx = wg.min(axis=2), wg.max(axis=2)
        s = to_f16(np.maximum(mx - mn, 1e-5) / 15).astype(np.float32)
        z = np.clip(np.round(-mn / s), 0, 15)
        q = np.clip(np.round(wg / s[..., None]) + z[..., None], 0, 15).astype(np.uint32).reshape(O, I)
        del out[m + ".weight"]
        if kind == "awq":
            order = [0, 2, 4, 6, 1, 3, 5, 7]
            qT, zT = q.T, z.T.astype(np.uint32)  # [I, O], [I/g, O]
            qw = np.zeros((I, O // 8), np.uint32)
            qz = np.zeros((I // g, O // 8), np.uint32)
            for k in range(8):
                qw |= qT[:, order[k]::8] << (4 * k)
                qz |= zT[:, order[k]::8] << (4 * k)
            out[m + ".qweight"] = ("I32", qw.view(np.int32))
            out[m + ".qzeros"] = ("I32", qz.view(np.int32))
            out[m + ".scales"] = ("F16", to_f16(s.T))
        else:  # GPTQ v2 with act-order: input i belongs to group gidx[i] (a permutation of i // g)
            gidx = (rng.permutation(I) // g).astype(np.int32)
            # regroup: the value of input i was quantized with its group's scale and zero
            sc = s[np.arange(O)[:, None], np.arange(I)[None, :] // g]  # [O, I] scale per element before
            qv = np.zeros((O, I), np.uint32)
            ss = np.zeros((I // g, O), np.float32)
            zz = np.zeros((I // g, O), np.uint32)
            for k in range(I // g):
                cols = np.nonzero(gidx == k)[0]
                sub = w[:, cols]
                lo, hi = sub.min(axis=1), sub.max(axis=1)
                sk = to_f16(np.maximum(hi - lo, 1e-5) / 15).astype(np.float32)
                zk = np.clip(np.round(-lo / sk), 0, 15)
                qv[:, cols] = np.clip(np.round(sub / sk[:, None]) + zk[:, None], 0, 15).astype(np.uint32)
                ss[k], zz[k] = sk, zk.astype(np.uint32)
            del sc
            qT = qv.T  # [I, O]
            qw = np.zeros((I // 8, O), np.uint32)
            for e in range(8):
                qw |= qT[e::8] << (4 * e)
            qz = np.zeros((I // g, O // 8), np.uint32)
            for e in range(8):
                qz |= zz[:, e::8] << (4 * e)
            out[m + ".qweight"] = ("I32", qw.view(np.int32))
            out[m + ".qzeros"] = ("I32", qz.view(np.int32))
            out[m + ".scales"] = ("F16", to_f16(ss))
            out[m + ".g_idx"] = ("I32", gidx)
    enc = {}
    for n, (dt, a) in out.items():
        if dt == "BF16":
            enc[n] = ("BF16", a.astype(np.float32).view(np.uint32).__rshift__(16).astype(np.uint16))
        else:
            enc[n] = (dt, a)
    write_safetensors(os.path.join(dst, "model.safetensors"), enc, {"format": "pt"})
    cfg = json.load(open(os.path.join(src, "config.json")))
    if kind == "awq":
        cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": g, "zero_point": True,
                                      "version": "gemm", "modules_to_not_convert": None}
    else:
        cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": g, "desc_act": True,
                                      "sym": False, "checkpoint_format": "gptq_v2"}
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    print(f"ok wrote {kind} export of {len(linear_modules(t))} modules to {dst}")


def cmd_gguf_facts(path):
    f = {}
    read_gguf(path, f)
    kv, infos = f["kv"], f["infos"]
    arch = kv["general.architecture"]
    blk = {2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 12: 144, 13: 176, 14: 210, 10: 84, 11: 110}
    size = {0: 4, 1: 2, 30: 2}
    params = sum(int(np.prod(ne)) for _, ne, _, _ in infos)
    nbytes = 0
    for _, ne, typ, _ in infos:
        n = int(np.prod(ne))
        nbytes += n * size[typ] if typ in size else n // (256 if typ >= 10 else 32) * blk[typ]
    L = kv[arch + ".block_count"]
    heads = kv[arch + ".attention.head_count"]
    nkv = kv.get(arch + ".attention.head_count_kv", heads)
    kd = kv.get(arch + ".attention.key_length", kv[arch + ".embedding_length"] // heads)
    vd = kv.get(arch + ".attention.value_length", kd)
    per_token = sum(((nkv[l] if isinstance(nkv, list) else nkv) * (kd + vd)) * 2 for l in range(L))
    print(json.dumps({"params": params, "tensor_bytes": nbytes, "layers": L, "kv_bytes_per_token": per_token}))


def cmd_stack(src, dst):
    """An MLX export with experts stacked as mlx-lm's sanitize() writes them:
    P.experts.E.X.{weight,scales,biases} -> P.switch_mlp.X.* of shape [E, ...]."""
    t = load_dir(src)
    copy_side_files(src, dst)
    groups, out = {}, {}
    for n, (dt, a) in t.items():
        mt = re.match(r"^(.*)\.experts\.(\d+)\.(\w+)\.(weight|scales|biases)$", n)
        if mt:
            groups.setdefault((mt.group(1), mt.group(3), mt.group(4)), {})[int(mt.group(2))] = (dt, a)
        else:
            out[n] = (dt, a)
    for (p, x, kind), by_e in groups.items():
        dt = by_e[0][0]
        out[f"{p}.switch_mlp.{x}.{kind}"] = (dt, np.stack([by_e[e][1] for e in sorted(by_e)]))
    enc = {n: (dt, a.astype(np.float32).view(np.uint32).__rshift__(16).astype(np.uint16) if dt == "BF16" else a)
           for n, (dt, a) in out.items()}
    write_safetensors(os.path.join(dst, "model.safetensors"), enc, {"format": "mlx"})
    print(f"ok stacked {len(groups)} expert tensors into {dst}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "compare":
        cmd_compare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "make-stacked":
        cmd_stack(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "gguf-facts":
        cmd_gguf_facts(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] in ("make-awq", "make-gptq-v2"):
        cmd_make(sys.argv[1][5:].replace("-v2", ""), sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
