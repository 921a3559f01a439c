"""A small GGUF reader and writer and the ggml block codecs the smoke tests use, written from
specs/gguf.md (§1 layout, §2 block types), independently of ckpt's C++ (numpy and the stdlib only).

Layout: magic "GGUF", u32 version 3, i64 tensor count, i64 KV count, the KV pairs (key string,
i32 value type, value), the tensor infos (name, u32 n_dims, i64 ne[n_dims] innermost first, i32
type, u64 offset relative to the data section), zero padding to general.alignment (32), then
each tensor's bytes padded to 32. Offsets are the running padded sum.

Blocks (little-endian; `d`, `dmin` are float16):
  Q8_0  32 values, 34 B: d, int8 q[32]; x = d*q
  Q4_0  32 values, 18 B: d, qs[16]; q[j] = qs[j] & 15, q[j+16] = qs[j] >> 4; x = d*(q-8)
  Q5_0  32 values, 22 B: d, u32 qh (bit j = fifth bit of q[j]), qs[16] as Q4_0; x = d*(q-16)
  Q4_K  256 values, 144 B: d, dmin, scales[12] (eight 6-bit scales sc and mins m packed: for
        j<4 sc=s[j]&63, m=s[j+4]&63; for j>=4 sc=(s[j+4]&15)|(s[j-4]>>6)<<4,
        m=(s[j+4]>>4)|(s[j]>>6)<<4), qs[128]: each 32 bytes hold sub-blocks 2i (low nibbles) and
        2i+1 (high nibbles); x = d*sc[j]*q - dmin*m[j]
"""
import struct

import numpy as np

ALIGN = 32
TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q5_0": 6, "Q8_0": 8, "Q4_K": 12, "BF16": 30}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
BLOCK = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q5_0": (32, 22), "Q8_0": (32, 34),
         "Q4_K": (256, 144)}
# KV value types (specs/gguf.md §1.2)
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FORMATS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
                  U64: "<Q", I64: "<q", F64: "<d"}


# ---- writer ----------------------------------------------------------------------------

def _string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _value(vtype, value):
    if vtype == STRING:
        return _string(value)
    if vtype == ARRAY:
        etype, items = value
        out = struct.pack("<iQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(_string(x) for x in items)
        return out + np.asarray(items, dtype=np.dtype(SCALAR_FORMATS[etype])).tobytes()
    return struct.pack(SCALAR_FORMATS[vtype], value)


def write(path, kvs, tensors):
    """kvs: [(key, vtype, value)], value (etype, list) for arrays; tensors: [(name, type name,
    ne (innermost first), bytes)]."""
    out = bytearray(b"GGUF")
    out += struct.pack("<Iqq", 3, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += _string(key) + struct.pack("<i", vtype) + _value(vtype, value)
    offset = 0
    for name, tname, ne, raw in tensors:
        blck, size = BLOCK[tname]
        assert ne[0] % blck == 0, (name, ne)
        expected = size * (ne[0] // blck) * int(np.prod(ne[1:], dtype=np.int64))
        assert len(raw) == expected, (name, len(raw), expected)
        out += _string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", n) for n in ne)
        out += struct.pack("<iQ", TYPES[tname], offset)
        offset += len(raw) + (-len(raw) % ALIGN)
    out += b"\0" * (-len(out) % ALIGN)
    for _, _, _, raw in tensors:
        out += raw + b"\0" * (-len(raw) % ALIGN)
    with open(path, "wb") as f:
        f.write(out)


# ---- reader ----------------------------------------------------------------------------

class Reader:
    """kvs: {key: (vtype, value)}; tensors: [{name, type, ne, offset (absolute), nbytes}]."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.blob = bytearray(f.read())
        b, self.pos = self.blob, 0
        assert bytes(b[:4]) == b"GGUF", "not a GGUF file"
        self.pos = 4
        version, n_tensors, n_kv = self._unpack("<Iqq")
        assert version in (2, 3), version
        self.kvs = {}
        for _ in range(n_kv):
            key = self._str()
            (vtype,) = self._unpack("<i")
            self.kvs[key] = (vtype, self._read_value(vtype))
        self.tensors = []
        for _ in range(n_tensors):
            name = self._str()
            (n_dims,) = self._unpack("<I")
            ne = list(self._unpack("<" + "q" * n_dims))
            tname, offset = self._unpack("<iQ")
            blck, size = BLOCK[TYPE_NAMES[tname]]
            nbytes = size * (ne[0] // blck) * int(np.prod(ne[1:], dtype=np.int64))
            self.tensors.append({"name": name, "type": TYPE_NAMES[tname], "ne": ne, "offset": offset, "nbytes": nbytes})
        align = self.kvs.get("general.alignment", (U32, ALIGN))[1]
        self.data_start = self.pos + (-self.pos % align)
        for t in self.tensors:
            t["offset"] += self.data_start

    def _unpack(self, fmt):
        vals = struct.unpack_from(fmt, self.blob, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals

    def _str(self):
        (n,) = self._unpack("<Q")
        s = bytes(self.blob[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def _read_value(self, vtype):
        if vtype == STRING:
            return self._str()
        if vtype == ARRAY:
            etype, count = self._unpack("<iQ")
            if etype == STRING:
                return (etype, [self._str() for _ in range(count)])
            dt = np.dtype(SCALAR_FORMATS[etype])
            arr = np.frombuffer(bytes(self.blob[self.pos:self.pos + count * dt.itemsize]), dtype=dt)
            self.pos += count * dt.itemsize
            return (etype, arr.tolist())
        (v,) = self._unpack(SCALAR_FORMATS[vtype])
        return v

    def tensor(self, name):
        return next(t for t in self.tensors if t["name"] == name)

    def raw(self, t):
        return self.blob[t["offset"]:t["offset"] + t["nbytes"]]

    def values(self, t):
        """float32 array shaped outermost first (ne reversed)."""
        return dequantize(t["type"], bytes(self.raw(t)), t["ne"])

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.blob)


# ---- block codecs ----------------------------------------------------------------------

def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize(tname, x):
    """x float32 [rows, cols] -> bytes of `tname` rows."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if tname == "F32":
        return x.astype("<f4").tobytes()
    if tname == "F16":
        return x.astype("<f2").tobytes()
    if tname == "BF16":
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
        return bits.astype("<u2").tobytes()
    blck = BLOCK[tname][0]
    b = x.reshape(-1, blck)
    n = b.shape[0]
    if tname == "Q8_0":
        amax = np.abs(b).max(axis=1)
        d = amax / 127.0
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
        q = np.round(b * inv[:, None]).clip(-128, 127).astype(np.int8)
        out = np.zeros((n, 34), dtype=np.uint8)
        out[:, 0:2] = _f16(d).view(np.uint8).reshape(n, 2)
        out[:, 2:] = q.view(np.uint8)
        return out.tobytes()
    if tname in ("Q4_0", "Q5_0"):
        levels = 8 if tname == "Q4_0" else 16
        idx = np.abs(b).argmax(axis=1)
        vmax = b[np.arange(n), idx]  # the value of largest magnitude, with its sign
        d = vmax / -levels
        inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
        q = np.floor(b * inv[:, None] + levels + 0.5).clip(0, 2 * levels - 1).astype(np.uint8)
        lo, hi = q[:, :16], q[:, 16:]
        qs = (lo & 15) | ((hi & 15) << 4)
        if tname == "Q4_0":
            out = np.zeros((n, 18), dtype=np.uint8)
            out[:, 0:2] = _f16(d).view(np.uint8).reshape(n, 2)
            out[:, 2:] = qs
            return out.tobytes()
        qh = np.zeros(n, dtype=np.uint32)
        for j in range(32):
            qh |= ((q[:, j].astype(np.uint32) >> 4) & 1) << j
        out = np.zeros((n, 22), dtype=np.uint8)
        out[:, 0:2] = _f16(d).view(np.uint8).reshape(n, 2)
        out[:, 2:6] = qh.astype("<u4").view(np.uint8).reshape(n, 4)
        out[:, 6:] = qs
        return out.tobytes()
    if tname == "Q4_K":
        sub = b.reshape(n, 8, 32)
        lo = np.minimum(sub.min(axis=2), 0.0)  # the min is stored negated (m >= 0)
        hi = sub.max(axis=2)
        scale = (hi - lo) / 15.0
        mins = -lo
        d = _f16(scale.max(axis=1) / 63.0).astype(np.float32)
        dmin = _f16(mins.max(axis=1) / 63.0).astype(np.float32)
        sc = np.where(d[:, None] > 0, np.round(scale / np.where(d > 0, d, 1)[:, None]), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dmin[:, None] > 0, np.round(mins / np.where(dmin > 0, dmin, 1)[:, None]), 0).clip(0, 63).astype(np.uint8)
        eff_d = d[:, None] * sc
        eff_m = dmin[:, None] * m
        q = np.where(eff_d[:, :, None] > 0, np.round((sub + eff_m[:, :, None]) / np.where(eff_d > 0, eff_d, 1)[:, :, None]), 0)
        q = q.clip(0, 15).astype(np.uint8)
        scales = np.zeros((n, 12), dtype=np.uint8)
        for j in range(4):
            scales[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
            scales[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
            scales[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
        qs = np.zeros((n, 128), dtype=np.uint8)
        for i in range(4):
            qs[:, 32 * i:32 * (i + 1)] = q[:, 2 * i, :] | (q[:, 2 * i + 1, :] << 4)
        out = np.zeros((n, 144), dtype=np.uint8)
        out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(n, 2)
        out[:, 2:4] = dmin.astype(np.float16).view(np.uint8).reshape(n, 2)
        out[:, 4:16] = scales
        out[:, 16:] = qs
        return out.tobytes()
    raise ValueError(tname)


def dequantize(tname, raw, ne):
    shape = list(reversed(ne))
    if tname == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)
    if tname == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape)
    if tname == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    blck, size = BLOCK[tname]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    n = b.shape[0]
    d = b[:, 0:2].copy().view("<f2").astype(np.float32).reshape(n)
    if tname == "Q8_0":
        y = b[:, 2:].view(np.int8).astype(np.float32) * d[:, None]
    elif tname in ("Q4_0", "Q5_0"):
        qs = b[:, 2:18] if tname == "Q4_0" else b[:, 6:22]
        q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32)
        if tname == "Q5_0":
            qh = b[:, 2:6].copy().view("<u4").reshape(n).astype(np.uint64)
            for j in range(32):
                q[:, j] |= (((qh >> j) & 1) << 4).astype(np.int32)
            q -= 16
        else:
            q -= 8
        y = q.astype(np.float32) * d[:, None]
    elif tname == "Q4_K":
        dmin = b[:, 2:4].copy().view("<f2").astype(np.float32).reshape(n)
        s = b[:, 4:16].astype(np.int32)
        sc = np.zeros((n, 8), dtype=np.int32)
        m = np.zeros((n, 8), dtype=np.int32)
        for j in range(4):
            sc[:, j] = s[:, j] & 63
            m[:, j] = s[:, j + 4] & 63
            sc[:, j + 4] = (s[:, j + 8] & 15) | ((s[:, j] >> 6) << 4)
            m[:, j + 4] = (s[:, j + 8] >> 4) | ((s[:, j + 4] >> 6) << 4)
        qs = b[:, 16:]
        q = np.zeros((n, 8, 32), dtype=np.int32)
        for i in range(4):
            q[:, 2 * i, :] = qs[:, 32 * i:32 * (i + 1)] & 15
            q[:, 2 * i + 1, :] = qs[:, 32 * i:32 * (i + 1)] >> 4
        # float32 throughout, as the C decoders compute it: (d*sc)*q - dmin*m
        d1 = d[:, None, None] * sc[:, :, None].astype(np.float32)
        m1 = dmin[:, None, None] * m[:, :, None].astype(np.float32)
        y = (d1 * q.astype(np.float32) - m1).astype(np.float32).reshape(n, 256)
    else:
        raise ValueError(tname)
    return y.astype(np.float32).reshape(shape)
