#!/usr/bin/env python3
"""Is ckpt verify linear in the tensor count? Synthetic Qwen3-MoE FP8 checkpoints
(bench/make_standin moe: config.json, index, sparse header-only shards of 2,000 tensors, 256
per-expert experts per layer, layers added until the count is reached) of about 10k, 100k and
1M tensors; each verified N times (whole processes); reported: median wall and CPU time, peak
RSS, and the ratio of each 10x step (linear: <= 11x time and <= 11x memory).

    python3 bench/scale_bench.py BUILD_DIR [--rounds N] [--keep DIR] [--sizes 10000,100000,1000000]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return (time.perf_counter() - t0, os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime,
            ru.ru_maxrss / 1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    args = ap.parse_args()
    ckpt = os.path.join(args.build_dir, "ckpt")
    make = os.path.join(args.build_dir, "bench", "make_standin")
    work = args.keep or tempfile.mkdtemp(prefix="ckpt-scale-")
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        d = os.path.join(work, "moe-%d" % n)
        if not os.path.isdir(d):
            subprocess.run([make, "moe", str(n), d], check=True, stdout=subprocess.DEVNULL)
        tensors = sum(1 for _ in open(os.path.join(d, "model.safetensors.index.json"))) - 5
        wall, cpu, rss = [], [], []
        run([ckpt, "verify", d, "--format", "json"])  # warm the page cache
        for _ in range(args.rounds):
            dt, rc, c, m = run([ckpt, "verify", d, "--format", "json"])
            assert rc == 0, "%s: ckpt verify exit %d" % (d, rc)
            wall.append(dt)
            cpu.append(c)
            rss.append(m)
        rows.append((tensors, statistics.median(wall) * 1000, min(wall) * 1000, statistics.median(cpu) * 1000,
                     max(rss)))
    print("\n| tensors | wall (median / best) | CPU (median) | peak RSS | step: time x | step: CPU x | step: RSS x |")
    print("|---|---|---|---|---|---|---|")
    prev = None
    for r in rows:
        step = ("%.1fx | %.1fx | %.1fx" % (r[1] / prev[1], r[3] / prev[3], r[4] / prev[4])) if prev else "- | - | -"
        print("| %d | %.1f / %.1f ms | %.1f ms | %.1f MB | %s |" % (r[0], r[1], r[2], r[3], r[4], step))
        prev = r
    print("\nrounds: %d; host: %d cores; load average %s" % (args.rounds, os.cpu_count(),
                                                           open("/proc/loadavg").read().split()[0]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
