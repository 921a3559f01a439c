#!/usr/bin/python3
"""PyTorch (.bin) header-only verify vs a picklescan-style Python scan, in the same run.

Builds a sparse stand-in of Llama-2-7B as torch.save zip shards (bench/make_pickle_standin:
291 F16 tensors, 13.5 GB declared, shards of <= 2 GB, real pickles and zip directories, holes for
the storages), checks that both tools pass it and both flag a planted os.system import, then runs
N paired rounds of whole processes (alternating which goes first) and reports medians of wall
and CPU time (user + system of the child, from getrusage).

usage: bench/pickle_bench.py BUILD_DIR [--rounds N] [--keep DIR]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p, wall * 1000, cpu * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--keep")
    a = ap.parse_args()
    ckpt = os.path.join(a.build, "ckpt")
    standin = os.path.join(a.build, "bench", "make_pickle_standin")
    work = a.keep or tempfile.mkdtemp(prefix="pickle-bench-")
    model = os.path.join(work, "llama2-7b-bin")
    if not os.path.isdir(model):
        subprocess.run([standin, model], check=True)
    declared = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))
    on_disk = sum(os.stat(os.path.join(model, f)).st_blocks * 512 for f in os.listdir(model))
    print(f"stand-in: {len(os.listdir(model))} files, {declared / 1e9:.1f} GB declared, {on_disk / 1e6:.1f} MB on disk")
    baseline = [sys.executable, os.path.join(HERE, "pickle_baseline.py"), model]
    verify = [ckpt, "verify", model, "--format", "json"]

    # Both must pass the clean stand-in and flag a planted os.system import.
    p, _, _ = timed(verify)
    summary = json.loads(p.stdout)["summary"]
    assert summary["errors"] == 0, p.stdout[:2000]
    print(f"ckpt: {summary['tensors']} tensors, 0 errors")
    p, _, _ = timed(baseline)
    assert p.returncode == 0, p.stdout
    bad = os.path.join(work, "bad")
    shutil.rmtree(bad, ignore_errors=True)
    subprocess.run([ckpt, "fixture", "llama", bad, "--defect", "pt-dangerous-global"], check=True, stdout=subprocess.DEVNULL)
    p, _, _ = timed([ckpt, "verify", bad, "--format", "json"])
    assert any(f["code"] == "PK001" for f in json.loads(p.stdout)["findings"])
    p, _, _ = timed([sys.executable, os.path.join(HERE, "pickle_baseline.py"), bad])
    assert p.returncode == 1 and b"posix.system" in p.stdout, p.stdout

    walls = {"ckpt": [], "python": []}
    cpus = {"ckpt": [], "python": []}
    for r in range(a.rounds):
        order = [("ckpt", verify), ("python", baseline)]
        if r % 2:
            order.reverse()
        for name, cmd in order:
            _, w, c = timed(cmd)
            walls[name].append(w)
            cpus[name].append(c)
    mc, mp = statistics.median(walls["ckpt"]), statistics.median(walls["python"])
    cc, cp = statistics.median(cpus["ckpt"]), statistics.median(cpus["python"])
    print(f"rounds: {a.rounds}; load average {os.getloadavg()[0]:.1f}")
    print(f"ckpt verify (whole pipeline, every family): wall median {mc:.1f} ms (best {min(walls['ckpt']):.1f}), CPU {cc:.1f} ms")
    print(f"python pickletools scan (imports only):     wall median {mp:.1f} ms (best {min(walls['python']):.1f}), CPU {cp:.1f} ms")
    print(f"ratio: wall {mp / mc:.1f}x, CPU {cp / cc:.1f}x")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
