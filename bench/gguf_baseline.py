#!/usr/bin/env python3
"""The GGUF baseline ckpt verify is measured against: a careful Python-stdlib reader doing the
same header-only structural work as ckpt's GG family (magic, version, counts against the
bytes left, every KV pair with its type, general.alignment, tensor infos with n_dims, type
range, block divisibility, checked sizes, offsets equal to the running padded sum, data
within the file). Prints one line per problem; exit 1 when there is any, 0 otherwise.

    python3 gguf_baseline.py FILE.gguf
"""
import os
import struct
import sys

# ggml type id -> (block elements, block bytes); 0 = removed (specs/gguf.md §2.1)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 4: (0, 0), 5: (0, 0), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50),
         20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4),
         27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 31: (0, 0), 32: (0, 0), 33: (0, 0),
         34: (256, 54), 35: (256, 66), 36: (0, 0), 37: (0, 0), 38: (0, 0), 39: (32, 17), 40: (64, 36),
         41: (128, 18), 42: (64, 18)}
FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
U64 = 2**64 - 1


class Truncated(Exception):
    pass


class Reader:
    def __init__(self, f, size):
        self.f, self.size, self.pos = f, size, 0

    def take(self, n):
        if n > self.size - self.pos:
            raise Truncated("needs %d bytes at %d, %d left" % (n, self.pos, self.size - self.pos))
        b = self.f.read(n)
        self.pos += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        n = self.u64()
        return self.take(n)

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u32(), self.u64()
            if et == 9 or et not in FIXED and et != 8:
                raise ValueError("invalid array element type %d" % et)
            if et == 8:
                if n * 8 > self.size - self.pos:
                    raise ValueError("string array of %d longer than the file" % n)
                return [self.string() for _ in range(n)]
            size = struct.calcsize(FIXED[et])
            if n * size > self.size - self.pos:
                raise ValueError("array of %d longer than the file" % n)
            return self.take(n * size)
        if t not in FIXED:
            raise ValueError("invalid value type %d" % t)
        return struct.unpack(FIXED[t], self.take(struct.calcsize(FIXED[t])))[0]


def check(path):
    problems = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        r = Reader(f, size)
        try:
            if r.take(4) != b"GGUF":
                return ["bad magic"]
            version = r.u32()
            if version & 0xFFFF == 0 or version not in (2, 3):
                return ["unsupported or byte-swapped version %d" % version]
            n_tensors, n_kv = struct.unpack("<qq", r.take(16))
            if n_tensors < 0 or n_kv < 0 or n_tensors > (size - r.pos) // 8 or n_kv > (size - r.pos) // 8:
                return ["counts out of range"]
            keys, alignment = set(), 32
            for _ in range(n_kv):
                k = r.string()
                if not k or k in keys:
                    problems.append("empty or duplicate key %r" % k)
                keys.add(k)
                t = r.u32()
                v = r.value(t)
                if k == b"general.alignment":
                    if t != 4 or v == 0 or v & (v - 1):
                        problems.append("bad general.alignment")
                    else:
                        alignment = v
            names, infos = set(), []
            for _ in range(n_tensors):
                name = r.string()
                if len(name) >= 64 or name in names:
                    problems.append("bad tensor name %r" % name)
                names.add(name)
                n_dims = r.u32()
                if n_dims > 4:
                    return problems + ["%r: %d dims" % (name, n_dims)]
                ne = struct.unpack("<%dq" % n_dims, r.take(8 * n_dims))
                t, offset = struct.unpack("<iQ", r.take(12))
                infos.append((name, ne, t, offset))
            data_start = -(-r.pos // alignment) * alignment if n_tensors else r.pos
            if data_start > size:
                return problems + ["data section past end of file"]
            expected = 0
            for name, ne, t, offset in infos:
                if any(d < 0 for d in ne) or t not in TYPES or TYPES[t][0] == 0:
                    problems.append("%r: bad dims or type" % name)
                    break
                blck, bb = TYPES[t]
                n = 1
                for d in ne:
                    n *= d
                if n >= 2**63 or (ne and ne[0] % blck):
                    problems.append("%r: bad element count or row" % name)
                    break
                nbytes = n // blck * bb
                padded = -(-nbytes // alignment) * alignment
                if nbytes > U64 or expected + padded > U64:
                    problems.append("%r: size overflow" % name)
                    break
                if offset != expected:
                    problems.append("%r: offset %d, expected %d" % (name, offset, expected))
                    expected = offset
                if data_start + offset + nbytes > size:
                    problems.append("%r: truncated" % name)
                expected += padded
        except (Truncated, ValueError, struct.error) as e:
            problems.append(str(e))
    return problems


def main():
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
