#!/usr/bin/python3
"""Train a tiny smoke model once and reuse it: CACHE_DIR/FAMILY[-DTYPE] is (re)trained when it is
missing or was written by other versions of the training scripts or reference text. Concurrent
callers (CTest runs tests in parallel) wait on a lock instead of training twice. Prints the
model directory.

usage: ensure_model.py CACHE_DIR FAMILY [--dtype bf16|f16|f32]"""
import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# Everything a trained model depends on: change any and the cached models are stale.
INPUTS = [os.path.join(HERE, n) for n in ("train_tiny.py", "families.py", "bpe.py", "safetensors_io.py", "baseline.py")] + [
    os.path.join(REPO, "src", "smoke", "reference.txt"), os.path.join(REPO, "bench", "standin_sidefiles.py")]


def inputs_digest(family, dtype):
    h = hashlib.sha256(f"{family}/{dtype}\n".encode())
    for path in INPUTS:
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir")
    parser.add_argument("family")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"))
    args = parser.parse_args()
    os.makedirs(args.cache_dir, exist_ok=True)
    name = args.family if args.dtype == "bf16" else f"{args.family}-{args.dtype}"
    model_dir = os.path.join(args.cache_dir, name)
    stamp = os.path.join(model_dir, ".trained-from")
    digest = inputs_digest(args.family, args.dtype)
    with open(os.path.join(args.cache_dir, name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(stamp) as f:
                fresh = f.read().strip() == digest
        except OSError:
            fresh = False
        if not fresh:
            partial = model_dir + ".partial"
            shutil.rmtree(partial, ignore_errors=True)
            subprocess.run([sys.executable, os.path.join(HERE, "train_tiny.py"), args.family, partial, "--dtype", args.dtype],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(partial, ".trained-from"), "w") as f:
                f.write(digest + "\n")
            shutil.rmtree(model_dir, ignore_errors=True)
            os.rename(partial, model_dir)  # whole or absent: a killed run leaves only .partial
    print(model_dir)


if __name__ == "__main__":
    main()
