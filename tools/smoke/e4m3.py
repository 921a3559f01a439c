#!/usr/bin/python3
"""FP8 E4M3 (the "fn" variant safetensors calls F8_E4M3, torch float8_e4m3fn) in numpy, for
tools/smoke/quantize.py: torch 1.13 has no float8 dtypes.

The format: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits. Exponent field 0 holds the
subnormals m/8 * 2^-6; fields 1..15 hold (1 + m/8) * 2^(e-7); there is no infinity, and only
S.1111.111 is NaN, so the largest finite value is 1.75 * 2^8 = 448 (0x7E).

encode() rounds to nearest, ties to even, and saturates: a finite value beyond 448 (and an
infinity) becomes +-448, NaN becomes 0x7F. table() is the 256 values read straight from the
definition above, independently of the encoder; self_check() holds one against the other.

usage: e4m3.py [--table OUT.json]   (self-check; --table writes the 256 decoded values, NaN as null)"""
import argparse
import json
import sys

import numpy as np

MAX = 448.0
MIN_NORMAL_EXP = -6  # 2^-6, exponent field 1
MANTISSA_BITS = 3


def table():
    """float64 [256]: the value of every code, from the format definition."""
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> 3) & 0xF
        m = code & 0x7
        if e == 0xF and m == 0x7:
            out[code] = np.nan
        elif e == 0:
            out[code] = sign * (m / 8.0) * 2.0 ** -6
        else:
            out[code] = sign * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return out


def encode(x):
    """float array -> uint8 codes: round to nearest even, saturate at +-448, NaN -> 0x7F."""
    x = np.asarray(x, dtype=np.float64)
    sign = np.signbit(x)
    a = np.abs(x)
    nan = np.isnan(a)
    a = np.where(nan | np.isinf(a), MAX, a)
    # The exponent E with 2^E <= a < 2^(E+1), floored at the subnormal range's -6; the code's
    # quantum there is 2^(E-3). a / quantum is exact (a power-of-two scaling of a float64), and
    # np.rint rounds half to even, which is even in the significand's last bit, i.e. the code's.
    _, k = np.frexp(np.where(a > 0, a, 1.0))  # a = f * 2^k, f in [0.5, 1)
    exp = np.maximum(k - 1, MIN_NORMAL_EXP)
    quantum = np.ldexp(1.0, exp - MANTISSA_BITS)
    r = np.rint(a / quantum)  # in [0, 16]: 16 carries into the next exponent
    v = np.minimum(r * quantum, MAX)  # saturate: 464 and above would round past the largest code
    # v is now exactly a representable magnitude: split it into fields
    _, kv = np.frexp(np.where(v > 0, v, 1.0))
    ev = kv - 1
    normal = v >= 2.0 ** MIN_NORMAL_EXP
    efield = np.where(normal, ev + 7, 0)
    mfield = np.where(normal, np.ldexp(v, -ev) * 8 - 8, v / 2.0 ** (MIN_NORMAL_EXP - MANTISSA_BITS))
    code = (efield.astype(np.int64) << 3) | mfield.astype(np.int64)
    code = np.where(sign, code | 0x80, code)
    code = np.where(nan, 0x7F, code)
    return code.astype(np.uint8)


def decode(codes):
    """uint8 codes -> float32 values (through the definition's table)."""
    return table()[np.asarray(codes, dtype=np.uint8)].astype(np.float32)


def self_check(samples=50000, seed=0):
    """The encoder against the table: every finite code round-trips, and random values (and the
    midpoints between neighbouring codes) land on the nearest code, ties on the even one.
    Raises AssertionError with the first disagreement."""
    t = table()
    finite = [c for c in range(256) if not np.isnan(t[c])]
    got = encode(t[finite])
    for c, g in zip(finite, got):
        assert g == c, f"code {c:#04x} ({t[c]!r}) encodes as {int(g):#04x}"
    positive = np.array(sorted(c for c in finite if c < 0x80), dtype=np.int64)  # ascending values
    values = t[positive]
    # midpoints between neighbours: the tie goes to the code with an even mantissa
    mids = (values[:-1] + values[1:]) / 2
    for i, m in enumerate(mids):
        lo, hi = positive[i], positive[i + 1]
        want = lo if lo % 2 == 0 else hi
        assert encode(m) == want and encode(-m) == (want | 0x80), f"midpoint {m!r} encodes as {int(encode(m)):#04x}, want {want:#04x}"
    # random magnitudes over the whole range and beyond, brute-forced against the table
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(samples) * 10.0 ** rng.uniform(-4, 3, samples),
                        rng.uniform(-520, 520, samples // 10)])
    codes = encode(x)
    a = np.minimum(np.abs(x), MAX)
    dist = np.abs(a[:, None] - values[None, :])
    best = dist.min(axis=1, keepdims=True)
    # among equally near codes the even one
    candidates = np.where(dist == best, positive[None, :], 1 << 20)
    even = np.where(candidates % 2 == 0, candidates, 1 << 20).min(axis=1)
    nearest = np.where(even < (1 << 20), even, candidates.min(axis=1))
    want = np.where(np.signbit(x), nearest | 0x80, nearest)
    bad = np.nonzero(codes != want)[0]
    assert bad.size == 0, f"{x[bad[0]]!r} encodes as {int(codes[bad[0]]):#04x}, nearest-even is {int(want[bad[0]]):#04x}"
    assert encode(np.nan) == 0x7F and encode(np.inf) == 0x7E and encode(-np.inf) == 0xFE and encode(1e6) == 0x7E
    assert t[0x7E] == 448.0 and t[0x01] == 2.0 ** -9 and t[0x08] == 2.0 ** -6 and np.isnan(t[0xFF])
    return len(finite), x.size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", help="write the 256 decoded values (NaN as null) as JSON here")
    args = parser.parse_args()
    codes, samples = self_check()
    if args.table:
        with open(args.table, "w") as f:
            json.dump([None if np.isnan(v) else float(v) for v in table()], f)
            f.write("\n")
    print(f"e4m3: {codes} finite codes round-trip; {samples} values encode to the nearest code (ties even)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
