#!/usr/bin/python3
"""picklescan-style baseline: for every .bin/.pt/.pth file of a model directory, open the zip with
the stdlib, read every member ending in .pkl, and walk it with pickletools.genops collecting
GLOBAL / INST / STACK_GLOBAL imports (STACK_GLOBAL resolved from the preceding string opcodes
and the memo, as picklescan does); flag anything outside a small safe list. Exit 1 when
something is flagged. Reads no storage bytes, like ckpt's header-only verify.

usage: pickle_baseline.py MODEL_DIR
"""
import os
import pickletools
import sys
import zipfile

SAFE = {
    ("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"), ("torch", "HalfStorage"),
    ("torch", "FloatStorage"), ("torch", "BFloat16Storage"), ("torch", "LongStorage"), ("torch", "IntStorage"),
}
STRINGS = {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}


def scan_pickle(data):
    found = []
    memo = {}
    ops = list(pickletools.genops(data))
    last_strings = []
    for i, (op, arg, pos) in enumerate(ops):
        name = op.name
        if name in ("GLOBAL", "INST"):
            found.append(tuple(arg.split(" ", 1)))
        elif name in STRINGS:
            last_strings.append(arg)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            if last_strings:
                memo[arg] = last_strings[-1]
        elif name == "MEMOIZE":
            if last_strings:
                memo[len(memo)] = last_strings[-1]
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            last_strings.append(memo.get(arg, "unknown"))
        elif name == "STACK_GLOBAL":
            mod, nm = (last_strings[-2:] + ["unknown", "unknown"])[:2] if len(last_strings) >= 2 else ("unknown", "unknown")
            found.append((mod, nm))
    return found


def main():
    root = sys.argv[1]
    flagged = 0
    globals_seen = 0
    for fn in sorted(os.listdir(root)):
        if not fn.endswith((".bin", ".pt", ".pth")):
            continue
        path = os.path.join(root, fn)
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic != b"PK\x03\x04":
            continue
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.filename.endswith(".pkl"):
                    for g in scan_pickle(z.read(info)):
                        globals_seen += 1
                        if g not in SAFE:
                            flagged += 1
                            print(f"{fn}: {info.filename}: {g[0]}.{g[1]}")
    print(f"{globals_seen} imports, {flagged} flagged")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
