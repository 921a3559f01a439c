#!/usr/bin/env python3
"""A whole cache in one run: `ckpt verify --cache DIR` over N small cached repos against N
separate `ckpt verify org/name` processes (the loop a script would write), in the same run,
alternating, R rounds; medians of wall and CPU time (children's rusage), and their ratio.

The repos are real fixtures, not empty folders: `ckpt fixture ARCH --hf-cache` writes a
Hugging Face cache layout (blobs, snapshot symlinks, refs/main) with config.json,
tokenizer.json, tokenizer_config.json with the family's chat template, generation_config.json
and safetensors weights, so every family runs on every target. A few architectures are
written once and copied (as a cache holds many small models of a few families).

    python3 bench/batch_bench.py BUILD_DIR [--repos 1000] [--rounds 3] [--jobs N] [--keep DIR]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ARCHS = ["llama", "qwen2", "qwen3", "mistral", "gemma3_text", "phi3", "qwen3_moe", "deepseek_v3"]


def timed(fn):
    before = os.times()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--repos", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=0, help="--jobs of the batch run (0: ckpt's default, the CPU count)")
    ap.add_argument("--keep")
    args = ap.parse_args()
    ckpt = os.path.join(args.build_dir, "ckpt")
    work = args.keep or tempfile.mkdtemp(prefix="ckpt-batch-")
    hub = os.path.join(work, "hub")
    repos = []
    if not os.path.isdir(hub):
        seeds = os.path.join(work, "seeds")
        for a in ARCHS:
            r = subprocess.run([ckpt, "fixture", a, seeds, "--hf-cache", "seed/" + a], capture_output=True)
            if r.returncode != 0:
                raise SystemExit("fixture %s failed: %s" % (a, r.stderr.decode()))
        os.makedirs(hub)
        for i in range(args.repos):
            a = ARCHS[i % len(ARCHS)]
            shutil.copytree(os.path.join(seeds, "models--seed--" + a), os.path.join(hub, "models--bench--m%04d-%s" % (i, a)),
                            symlinks=True)
    for name in sorted(os.listdir(hub)):
        if name.startswith("models--"):
            repos.append(name[len("models--"):].replace("--", "/", 1))
    env = dict(os.environ, HF_HUB_CACHE=hub)
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []

    def one_run():
        p = subprocess.run([ckpt, "verify", "--cache", hub, "--format", "jsonl", *jobs], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        lines = p.stdout.decode().splitlines()
        assert p.returncode in (0, 1) and len(lines) == len(repos) + 1, (p.returncode, len(lines))
        one_run.lines = lines

    def separate():
        bad = 0
        for r in repos:
            p = subprocess.run([ckpt, "verify", r, "--format", "json"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            bad += p.returncode not in (0, 1)
        assert bad == 0

    one_run()  # warm the page cache
    errors = sum('"errors":0,' not in l.split('"summary":')[1] for l in one_run.lines[:-1])
    b_wall, b_cpu, s_wall, s_cpu = [], [], [], []
    for _ in range(args.rounds):
        w, c = timed(one_run)
        b_wall.append(w)
        b_cpu.append(c)
        w, c = timed(separate)
        s_wall.append(w)
        s_cpu.append(c)
    med = statistics.median
    print("%d cached repos (%s), %d rounds, %d CPUs, load average %.1f; targets with errors: %d" %
          (len(repos), ", ".join(ARCHS), args.rounds, os.cpu_count(), os.getloadavg()[0], errors))
    print("%-44s %10s %10s" % ("", "wall s", "CPU s"))
    print("%-44s %10.2f %10.2f" % ("ckpt verify --cache (one process%s)" % (", --jobs %d" % args.jobs if args.jobs else ""),
                                   med(b_wall), med(b_cpu)))
    print("%-44s %10.2f %10.2f" % ("%d x ckpt verify org/name (separate)" % len(repos), med(s_wall), med(s_cpu)))
    print("%-44s %10.2f %10.2f" % ("ratio one run / separate (target < 0.5)", med(b_wall) / med(s_wall),
                                   med(b_cpu) / med(s_cpu)))
    print("spread: one run wall %.2f-%.2f s, separate %.2f-%.2f s" % (min(b_wall), max(b_wall), min(s_wall), max(s_wall)))
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
