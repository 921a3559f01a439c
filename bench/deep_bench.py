#!/usr/bin/python3
"""ckpt verify --deep vs sha256sum and a numpy NaN/Inf scan, same files, same run.

Writes real-data safetensors (F16 matrices and F32 norms filled with normally distributed
values, not sparse) into a work directory and lays them out twice:
  - an HF cache repo (blobs named by their sha256, snapshot symlinks), where --deep hashes
    every byte against the etag and scans every float tensor in the same pass;
  - a plain directory of hard links to the same blobs, where there is no etag and --deep
    only scans the float tensors.
Baselines measured in the same run on the same files: `sha256sum` (coreutils; Debian's build
has its own portable SHA-256, no SHA-NI), `openssl dgst -sha256` (OpenSSL 3's SHA-NI code, the
library ckpt hashes with: the "SHA-NI speed" line), both over all the files in one process and
on every core (xargs -P), and numpy (memmap + np.isnan/np.isinf over each F16/F32 tensor in
64 MiB slices, in-process, import time excluded).

Warm cache: every command runs once before timing, and the files fit in RAM. With --cold, the
same commands are also timed after evicting these files' pages (posix_fadvise DONTNEED on each
file; nothing else on the machine is dropped), so they read from the disk.
Rounds rotate the order of the commands; reported: medians, MB/s (10^6 bytes), ratios.

    /usr/bin/python3 bench/deep_bench.py BUILD_DIR [--files N] [--file-mib M] [--rounds R] [--work DIR] [--cold]
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_shard(path, mib, seed):
    """A safetensors file of about `mib` MiB: F16 [4096, k] matrices and F32 [4096] norms."""
    rng = np.random.default_rng(seed)
    rows = 4096
    tensors = []  # (name, dtype, shape, nbytes)
    total, i = 0, 0
    while total < mib << 20:
        cols = min(2048, ((mib << 20) - total) // (rows * 2) or 1)
        tensors.append((f"model.layers.{i}.mlp.up_proj.weight", "F16", [rows, cols], rows * cols * 2))
        tensors.append((f"model.layers.{i}.input_layernorm.weight", "F32", [rows], rows * 4))
        total += rows * cols * 2 + rows * 4
        i += 1
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, n in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    # One 16 MiB block of N(0, 0.02) values, varied per slice so no two slices are equal.
    block = (rng.standard_normal(8 << 20) * 0.02).astype(np.float16)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for k, (name, dt, shape, n) in enumerate(tensors):
            if dt == "F32":
                f.write((1.0 + rng.standard_normal(shape[0]) * 0.05).astype(np.float32).tobytes())
                continue
            left, j = n, 0
            while left:
                take = min(left, block.nbytes)
                part = block.view(np.uint16)[: take // 2] ^ np.uint16((k * 131 + j) & 0x3F)
                f.write(part.tobytes())
                left -= take
                j += 1
    return [(n, dt, shape, 8 + len(hb) + header[n]["data_offsets"][0]) for n, dt, shape, _ in tensors]


def sha256_of(path):
    out = subprocess.run(["sha256sum", path], check=True, stdout=subprocess.PIPE).stdout
    return out.split()[0].decode()


def build(work, files, file_mib):
    layout = os.path.join(work, "layout.json")
    if os.path.exists(layout):
        with open(layout) as f:
            return json.load(f)
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    hub = os.path.join(work, "hub")
    repo = os.path.join(hub, "models--bench--deep")
    snap = os.path.join(repo, "snapshots", COMMIT)
    plain = os.path.join(work, "plain")
    for d in (os.path.join(repo, "blobs"), os.path.join(repo, "refs"), snap, plain):
        os.makedirs(d, exist_ok=True)
    shards = []
    for i in range(files):
        name = f"model-{i + 1:05d}-of-{files:05d}.safetensors"
        p = os.path.join(src, name)
        tensors = write_shard(p, file_mib, seed=i)
        etag = sha256_of(p)
        blob = os.path.join(repo, "blobs", etag)
        os.rename(p, blob)
        os.symlink(f"../../blobs/{etag}", os.path.join(snap, name))
        os.link(blob, os.path.join(plain, name))
        shards.append({"name": name, "blob": blob, "tensors": tensors})
    weight_map = {t[0]: s["name"] for s in shards for t in s["tensors"]}
    total = sum(os.path.getsize(s["blob"]) for s in shards)
    index = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}).encode()
    for d in (snap, plain):
        with open(os.path.join(d, "model.safetensors.index.json"), "wb") as f:
            f.write(index)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(COMMIT)
    info = {"hub": hub, "plain": plain, "shards": shards, "bytes": total}
    with open(layout, "w") as f:
        json.dump(info, f)
    return info


def numpy_scan(shards):
    """NaN/Inf counts per tensor, in 64 MiB slices of a read-only memmap."""
    bad = 0
    for s in shards:
        mm = np.memmap(s["blob"], dtype=np.uint8, mode="r")
        for name, dt, shape, off in s["tensors"]:
            dtype = np.float16 if dt == "F16" else np.float32
            n = int(np.prod(shape))
            a = np.frombuffer(mm, dtype=dtype, count=n, offset=off)
            step = (64 << 20) // a.itemsize
            for k in range(0, n, step):
                part = a[k : k + step]
                bad += int(np.count_nonzero(np.isnan(part))) + int(np.count_nonzero(np.isinf(part)))
        del mm
    return bad


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--file-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", help="keep the generated files here (reused when present)")
    ap.add_argument("--cold", action="store_true",
                    help="also time ckpt and the hashers with these files evicted from the page cache before each run")
    args = ap.parse_args()
    ckpt = os.path.join(args.build_dir, "ckpt")
    work = args.work or tempfile.mkdtemp(prefix="ckpt-deep-bench-", dir="/tmp")
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    info = build(work, args.files, args.file_mib)
    print(f"data: {args.files} shard(s), {info['bytes'] / 1e9:.2f} GB in {work} (written in {time.perf_counter() - t0:.1f} s)")
    blobs = [s["blob"] for s in info["shards"]]
    env = dict(os.environ, HF_HUB_CACHE=info["hub"])
    ncpu = os.cpu_count() or 1

    def run_ckpt(target, expect_clean=True):
        def go():
            p = subprocess.run([ckpt, "verify", "--deep", "--select", "HS", "--format", "json", target], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out = json.loads(p.stdout)
            hs = [f for f in out["findings"] if f["code"].startswith("HS")]
            if expect_clean and (p.returncode != 0 or hs):
                sys.exit(f"ckpt verify --deep {target}: exit {p.returncode}: {hs or out['findings'][:3]}")
        return go

    def sha_seq():
        subprocess.run(["sha256sum"] + blobs, check=True, stdout=subprocess.DEVNULL)

    def sha_par():
        subprocess.run(["xargs", "-0", "-P", str(ncpu), "-n", "1", "sha256sum"], input="\0".join(blobs).encode(),
                       check=True, stdout=subprocess.DEVNULL)

    def ossl_seq():
        subprocess.run(["openssl", "dgst", "-sha256"] + blobs, check=True, stdout=subprocess.DEVNULL)

    def ossl_par():
        subprocess.run(["xargs", "-0", "-P", str(ncpu), "-n", "1", "openssl", "dgst", "-sha256"],
                       input="\0".join(blobs).encode(), check=True, stdout=subprocess.DEVNULL)

    def np_scan():
        if numpy_scan(info["shards"]) != 0:
            sys.exit("numpy found NaN/Inf in the clean data")

    one = info["shards"][0]
    cases = [
        ("ckpt --deep, cache (sha256 + NaN/Inf/zero scan)", run_ckpt("bench/deep"), info["bytes"]),
        ("ckpt --deep, plain dir (scan only, no etag)", run_ckpt(info["plain"]), info["bytes"]),
        ("sha256sum, one process", sha_seq, info["bytes"]),
        (f"sha256sum, xargs -P {ncpu}", sha_par, info["bytes"]),
        ("openssl dgst -sha256, one process", ossl_seq, info["bytes"]),
        (f"openssl dgst -sha256, xargs -P {ncpu}", ossl_par, info["bytes"]),
        ("numpy isnan+isinf (memmap, 64 MiB slices)", np_scan, info["bytes"]),
        ("sha256sum, first shard only", lambda: subprocess.run(["sha256sum", one["blob"]], check=True,
                                                              stdout=subprocess.DEVNULL), os.path.getsize(one["blob"])),
        ("openssl dgst -sha256, first shard only",
         lambda: subprocess.run(["openssl", "dgst", "-sha256", one["blob"]], check=True, stdout=subprocess.DEVNULL),
         os.path.getsize(one["blob"])),
    ]
    # A one-shard cache for the single-stream case (one file cannot be hashed on two cores).
    single_hub = os.path.join(work, "hub1")
    single_repo = os.path.join(single_hub, "models--bench--one")
    if not os.path.isdir(single_repo):
        os.makedirs(os.path.join(single_repo, "blobs"))
        os.makedirs(os.path.join(single_repo, "refs"))
        os.makedirs(os.path.join(single_repo, "snapshots", COMMIT))
        etag = os.path.basename(one["blob"])
        os.link(one["blob"], os.path.join(single_repo, "blobs", etag))
        os.symlink(f"../../blobs/{etag}", os.path.join(single_repo, "snapshots", COMMIT, "model.safetensors"))
        with open(os.path.join(single_repo, "refs", "main"), "w") as f:
            f.write(COMMIT)

    def ckpt_one():
        p = subprocess.run([ckpt, "verify", "--deep", "--select", "HS", "--format", "json", "bench/one"],
                           env=dict(os.environ, HF_HUB_CACHE=single_hub), stdout=subprocess.PIPE)
        if p.returncode != 0:
            sys.exit("single-shard verify failed: " + p.stdout.decode()[:500])

    cases.append(("ckpt --deep, first shard only (cache)", ckpt_one, os.path.getsize(one["blob"])))

    def evict():
        # Cold cache for these files only: drop their clean pages (no root, no global drop_caches).
        for b in blobs:
            fd = os.open(b, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)

    def cold(fn):
        def go():
            evict()
            return fn()
        return go

    cold_cases = []
    if args.cold:
        for name, fn, nbytes in cases:
            if name.startswith("ckpt") and "first shard" not in name or name in (
                    "sha256sum, one process", "openssl dgst -sha256, one process", f"openssl dgst -sha256, xargs -P {ncpu}"):
                cold_cases.append(("cold: " + name, cold(fn), nbytes))

    print("load before:", os.getloadavg())
    times = {}
    # Warm rounds first (a cold case would leave the files evicted), then cold rounds.
    for phase in (cases, cold_cases):
        for _, fn, _ in phase:  # warm the page cache and check every tool's answer
            fn()
        for name, _, _ in phase:
            times[name] = []
        for r in range(args.rounds if phase else 0):
            order = phase[r % len(phase):] + phase[: r % len(phase)]
            for name, fn, _ in order:
                times[name].append(timed(fn))
    cases += cold_cases
    print("load after:", os.getloadavg())
    print(f"{args.rounds} rounds, warm page cache, {ncpu} CPUs")
    med = {k: statistics.median(v) for k, v in times.items()}
    print("| case | median s | MB/s | speed vs sha256sum | speed vs openssl (SHA-NI) |")
    print("|---|---|---|---|---|")
    for name, _, nbytes in cases:
        whole = nbytes == info["bytes"]
        pre = "cold: " if name.startswith("cold: ") else ""
        ref_sha = med.get(pre + ("sha256sum, one process" if whole else "sha256sum, first shard only"))
        ref_ossl = med[pre + ("openssl dgst -sha256, one process" if whole else "openssl dgst -sha256, first shard only")]
        m = med[name]
        vs_sha = f"{ref_sha / m:.2f}x" if ref_sha else "-"
        print(f"| {name} | {m:.3f} | {nbytes / m / 1e6:.0f} | {vs_sha} | {ref_ossl / m:.2f}x |")
    print("runs:", {k: [round(x, 3) for x in v] for k, v in times.items()})
    if not args.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
