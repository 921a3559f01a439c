#!/usr/bin/env python3
"""ckpt fetch vs the curl command-line tool, from the same loopback hub, in the same run.

Two workloads: one large file (default 1 GiB, sparse-backed on the server side) and a
16-file repo (default 16 x 64 MiB). Runs are paired (curl and ckpt back to back, order
alternating), each into a fresh output directory; the table reports medians and the
throughput ratio ckpt/curl. ckpt's time includes its sha256 verification and atomic publish
(rows with --fsync add the fdatasync of every blob before it is published); curl only writes
the bytes. The load average is printed before and after: on a shared machine
it decides more than the client does.

usage: bench/fetch_bench.py [--build build-hub] [--runs 5] [--big-mib 1024] [--files 16] [--file-mib 64]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start_server(server, repo, data_dir):
    p = subprocess.Popen([server, repo, data_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    if len(line) != 2 or line[0] != "endpoint":
        p.kill()
        sys.exit("server did not start")
    return p, line[1]


def timed(cmd, env=None):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr.decode(errors='replace')}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build-hub"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--file-mib", type=int, default=64)
    args = ap.parse_args()
    ckpt = os.path.join(args.build, "ckpt")
    server = os.path.join(args.build, "bench", "fetch_bench_server")
    curl = shutil.which("curl")
    if not curl:
        sys.exit("curl not found (scripts/setup.sh installs it)")
    work = tempfile.mkdtemp(prefix="ckpt-fetch-bench-")
    try:
        single, multi = os.path.join(work, "single"), os.path.join(work, "multi")
        os.makedirs(single)
        os.makedirs(multi)
        # Sparse-backed files, each with a distinct first 4 KiB: distinct sha256 etags, so
        # no file is deduplicated against another's blob.
        with open(os.path.join(single, "big.bin"), "wb") as f:
            f.write(os.urandom(4096))
            f.truncate(args.big_mib << 20)
        names = []
        for i in range(args.files):
            n = f"model-{i + 1:05d}-of-{args.files:05d}.bin"
            names.append(n)
            with open(os.path.join(multi, n), "wb") as f:
                f.write(os.urandom(4096))
                f.truncate(args.file_mib << 20)
        s1, ep1 = start_server(server, "bench/single", single)
        s2, ep2 = start_server(server, "bench/multi", multi)
        env = dict(os.environ, HF_HUB_OFFLINE="0", CI="1")
        env.pop("HF_TOKEN", None)
        out = os.path.join(work, "out")

        def fresh():
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            return out

        def ckpt_cmd(ep, repo, *extra):
            return [ckpt, "fetch", repo, "--endpoint", ep, "--cache-dir", fresh(), "--quiet", "--no-verify", *extra]

        big_url = f"{ep1}/bench/single/resolve/main/big.bin"
        multi_urls = [f"{ep2}/bench/multi/resolve/main/{n}" for n in names]

        def curl_single():
            return [curl, "-sS", "-f", "-o", os.path.join(fresh(), "big.bin"), big_url]

        def curl_multi(parallel):
            d = fresh()
            cmd = [curl, "-sS", "-f"] + (["-Z", "--parallel-max", "8"] if parallel else [])
            for n, u in zip(names, multi_urls):
                cmd += ["-o", os.path.join(d, n), u]
            return cmd

        cases = {
            "single: curl": lambda: curl_single(),
            "single: ckpt 1 stream": lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "1"),
            "single: ckpt 1 stream --fsync": lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "1", "--fsync"),
            "single: ckpt 4 ranges": lambda: ckpt_cmd(ep1, "bench/single", "--range-parts", "4"),
            "16 files: curl sequential": lambda: curl_multi(False),
            "16 files: curl -Z (8 parallel)": lambda: curl_multi(True),
            "16 files: ckpt --jobs 8": lambda: ckpt_cmd(ep2, "bench/multi", "--jobs", "8", "--range-parts", "1"),
            "16 files: ckpt --jobs 8 --fsync": lambda: ckpt_cmd(ep2, "bench/multi", "--jobs", "8", "--range-parts", "1",
                                                            "--fsync"),
        }
        load_before = os.getloadavg()
        times = {k: [] for k in cases}
        order = list(cases)
        for run in range(args.runs):
            for k in (order if run % 2 == 0 else order[::-1]):
                times[k].append(timed(cases[k](), env))
        s1.stdin.close()
        s2.stdin.close()
        s1.wait()
        s2.wait()
        big = args.big_mib << 20
        total = args.files * (args.file_mib << 20)
        med = {k: statistics.median(v) for k, v in times.items()}
        load_after = os.getloadavg()
        print(f"runs: {args.runs} paired; single file {args.big_mib} MiB; repo {args.files} x {args.file_mib} MiB; "
              f"{os.cpu_count()} cores; load average (1/5/15 min) before {load_before[0]:.1f}/{load_before[1]:.1f}/"
              f"{load_before[2]:.1f}, after {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f}")
        print("| case | median s | MiB/s | ratio vs curl |")
        print("|---|---|---|---|")
        for k in cases:
            size = big if k.startswith("single") else total
            base = med["single: curl"] if k.startswith("single") else med["16 files: curl sequential"]
            print(f"| {k} | {med[k]:.3f} | {size / med[k] / 2**20:.0f} | {base / med[k]:.2f}x |")
        print("all times (s):")
        for k, v in times.items():
            print(f"  {k}: {' '.join(f'{x:.3f}' for x in v)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
