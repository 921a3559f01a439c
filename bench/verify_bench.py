#!/usr/bin/env python3
"""ckpt verify vs a careful Python-stdlib verifier (bench/verify_baseline.py), same inputs,
same run: sparse header-only stand-ins of a 22k-tensor MoE checkpoint (the real
Qwen3.5-25B-REAP-A3B index's names) and of DeepSeek-V3 (~92k tensors in 163 shards).

Before timing, both tools are checked to agree: the clean stand-in passes both, and a
planted defect (a shard 300 MB short; a superseded duplicate tensor) fails both.
Then N paired rounds alternate the two tools; reported: medians and their ratio.

    python3 bench/verify_bench.py BUILD_DIR [--rounds N] [--keep DIR]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus", "configs")


CPU = []  # CPU seconds (user + system) of each run, in order


def run(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return dt, p.returncode, p.stdout.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--keep")
    args = ap.parse_args()
    ckpt = os.path.join(args.build_dir, "ckpt")
    make = os.path.join(args.build_dir, "bench", "make_standin")
    baseline = [sys.executable, os.path.join(HERE, "verify_baseline.py")]
    work = args.keep or tempfile.mkdtemp(prefix="ckpt-bench-")
    cases = []
    reap = os.path.join(CORPUS, "Qwen3.5-25B-REAP-A3B-Coding", "model.safetensors.index.json")
    if os.path.exists(reap):
        cases.append(("moe-22k", ["from-index", reap]))
    else:
        print("note: ../shared/corpus not found; the 22k MoE case is skipped")
    cases.append(("deepseek-v3-92k", ["deepseek-v3"]))

    rows = []
    for name, gen in cases:
        clean = os.path.join(work, name)
        if not os.path.isdir(clean):
            subprocess.run([make] + gen + [clean], check=True, stdout=subprocess.DEVNULL)
        # The answer first: both must pass the clean stand-in and fail each planted defect.
        for defect in ("truncate", "duplicate"):
            bad = os.path.join(work, name + "-" + defect)
            if not os.path.isdir(bad):
                subprocess.run([make] + gen + [bad, "--defect", defect], check=True, stdout=subprocess.DEVNULL)
            _, rc_c, _ = run([ckpt, "verify", bad, "--select", "ST,IX", "--format", "json"])
            _, rc_p, _ = run(baseline + [bad])
            assert rc_c == 1 and rc_p == 1, "%s/%s: ckpt exit %d, baseline exit %d" % (name, defect, rc_c, rc_p)
        _, rc_c, out = run([ckpt, "verify", clean, "--select", "ST,IX", "--format", "json"])
        _, rc_p, _ = run(baseline + [clean])
        assert rc_c == 0 and rc_p == 0, "%s clean: ckpt exit %d, baseline exit %d\n%s" % (name, rc_c, rc_p, out[:2000])
        # Timing: paired rounds, alternating which tool goes first.
        tc, tp, cc, cp = [], [], [], []
        run([ckpt, "verify", clean, "--format", "json"])  # warm the page cache
        for i in range(args.rounds):
            order = [("c", [ckpt, "verify", clean, "--format", "json"]), ("p", baseline + [clean])]
            if i % 2:
                order.reverse()
            for tag, cmd in order:
                dt, _, _ = run(cmd)
                (tc if tag == "c" else tp).append(dt)
                (cc if tag == "c" else cp).append(CPU[-1])
        mc, mp = statistics.median(tc), statistics.median(tp)
        ucc, ucp = statistics.median(cc), statistics.median(cp)
        rows.append((name, mc * 1000, mp * 1000, mp / mc, min(tc) * 1000, ucc * 1000, ucp * 1000, ucp / ucc))
    print("\n| case | ckpt verify wall (median) | Python wall (median) | wall ratio | ckpt best wall "
          "| ckpt CPU (median) | Python CPU (median) | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, c, p, r, best, uc, up, ur in rows:
        print("| %s | %.1f ms | %.1f ms | %.1fx | %.1f ms | %.1f ms | %.1f ms | %.1fx |" % (name, c, p, r, best, uc, up, ur))
    print("\nrounds: %d paired; host: %d cores; load average %s" % (args.rounds, os.cpu_count(),
                                                                   open("/proc/loadavg").read().split()[0]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
