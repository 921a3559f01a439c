#!/usr/bin/python3
"""`ckpt diff A B --deep` by value vs a numpy implementation of the same work, in the same run.

Writes two pairs of fixtures of the same weights (`ckpt fixture llama --hidden H --layers L`):
F16 safetensors against its MLX affine 4-bit export, and an f32 GGUF against its Q4_K twin. For
each pair: checks that ckpt and the baseline list the same weights as differing (same metrics to
1e-5, via tests/inspect/values_oracle.py compare), then runs N paired rounds of whole processes
(alternating which goes first): `ckpt diff A B --deep --format json` against the baseline
(tests/inspect/values_oracle.py's numpy readers and dequantizers, every weight of both sides,
the same metrics), plus `cat A B > /dev/null` as the floor of reading the bytes. Reports medians
of wall and CPU time and peak RSS (wait4 of each child). Files are in the page cache (warm).

usage: bench/diff_values_bench.py BUILD_DIR [--rounds N] [--hidden H] [--layers L] [--keep DIR]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "..", "tests", "inspect", "values_oracle.py")

BASELINE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import values_oracle as v
a, b = v.weights_of(sys.argv[2]), v.weights_of(sys.argv[3])
n = 0
for name in sorted(set(a) & set(b)):
    (x, _), (y, _) = a[name], b[name]
    if x is not None and y is not None and x.shape == y.shape:
        v.metrics(x, y)
        n += 1
print(n)
"""


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    return code, wall * 1000, (ru.ru_utime + ru.ru_stime) * 1000, ru.ru_maxrss / 1024, err


def size_of(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith((".safetensors", ".gguf")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--keep")
    a = ap.parse_args()
    ckpt = os.path.join(a.build, "ckpt")
    work = a.keep or tempfile.mkdtemp(prefix="diff-values-bench-")
    dims = ["--hidden", str(a.hidden), "--layers", str(a.layers)]
    pairs = [("F16 vs MLX 4-bit", "st-f16", [], "st-mlx4", ["--quant", "mlx4"]),
             ("GGUF f32 vs Q4_K", "gg-f32", ["--format", "gguf", "--quant", "f32"], "gg-q4k", ["--format", "gguf", "--quant", "q4_k"])]
    py = "/usr/bin/python3"
    for title, na, fa, nb, fb in pairs:
        A, B = os.path.join(work, na), os.path.join(work, nb)
        for d, f in ((A, fa), (B, fb)):
            if not os.path.isdir(d):
                subprocess.run([ckpt, "fixture", "llama", d] + dims + f, check=True, stdout=subprocess.DEVNULL)
        check = subprocess.run([py, ORACLE, "compare", ckpt, A, B], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"{title}: ckpt and the numpy oracle disagree:\n{check.stdout}{check.stderr}")
        files = [os.path.join(d, f) for d in (A, B) for f in os.listdir(d) if f.endswith((".safetensors", ".gguf"))]
        cmds = {
            "ckpt": [ckpt, "diff", A, B, "--deep", "--format", "json", "--quiet"],
            "numpy": [py, "-c", BASELINE, os.path.dirname(ORACLE), A, B],
            "cat": ["sh", "-c", "cat \"$@\" > /dev/null", "cat"] + files,
        }
        res = {k: [] for k in cmds}
        for r in range(a.rounds):
            order = list(cmds) if r % 2 == 0 else list(reversed(list(cmds)))
            for k in order:
                code, wall, cpu, rss, err = run(cmds[k])
                if k == "ckpt" and code != 1:
                    sys.exit(f"ckpt diff exited {code}: {err}")
                if k != "ckpt" and code != 0:
                    sys.exit(f"{k} exited {code}: {err}")
                res[k].append((wall, cpu, rss))
        total = size_of(A) + size_of(B)
        print(f"\n{title}: {total / 1e6:.1f} MB stored ({a.layers} layers, hidden {a.hidden}), {a.rounds} rounds, "
              f"load {os.getloadavg()[0]:.1f}; {check.stdout.strip()}")
        med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in res.items()}
        for k, (wall, cpu, rss) in med.items():
            print(f"  {k:6s} wall {wall:9.1f} ms  cpu {cpu:9.1f} ms  peak RSS {rss:8.1f} MB  "
                  f"{total / 1e6 / (wall / 1000):8.1f} MB/s")
        print(f"  ratio numpy/ckpt: wall {med['numpy'][0] / med['ckpt'][0]:.1f}x, cpu {med['numpy'][1] / med['ckpt'][1]:.1f}x; "
              f"ckpt / cat wall {med['ckpt'][0] / med['cat'][0]:.1f}x")


if __name__ == "__main__":
    main()
