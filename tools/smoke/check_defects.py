#!/usr/bin/python3
"""Self-check of the smoke fixtures: for each family, train (or reuse) the tiny model, plant
every applicable defect, run the reference forward pass on each, and print the perplexities.
A defect that does not move perplexity far from clean cannot be caught by `ckpt smoke`.

usage: check_defects.py WORK_DIR [FAMILY...] [--retrain]"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "smoke"))
import torch_forward  # noqa: E402

DEFAULT_FAMILIES = ["llama", "qwen3", "gemma", "mixtral", "qwen3_moe", "phi3", "gemma2", "gemma3", "qwen2", "mistral"]
MOE = ("mixtral", "qwen3_moe")


def defects_for(family):
    defects = ["transpose-square", "bf16-as-f16", "swap-gate-up", "norm-convention"]
    if family in MOE:
        defects.append("expert-wrong-axis")
    return defects


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work_dir")
    parser.add_argument("families", nargs="*", default=DEFAULT_FAMILIES)
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--layer", type=int, default=0, help="layer 0: breaking a later layer of 3 moves perplexity only 1.6-4x")
    args = parser.parse_args()
    python = sys.executable
    rows = []
    for family in args.families:
        model_dir = os.path.join(args.work_dir, family)
        seconds = None
        if args.retrain or not os.path.exists(os.path.join(model_dir, "model.safetensors")):
            started = time.time()
            subprocess.run([python, os.path.join(HERE, "train_tiny.py"), family, model_dir], check=True,
                           stdout=subprocess.DEVNULL)
            seconds = time.time() - started
        with open(os.path.join(model_dir, "smoke_tokens.json")) as f:
            ids = json.load(f)["ids"]
        clean = torch_forward.run(model_dir, ids)["perplexity"]
        results = {}
        for defect in defects_for(family):
            broken = os.path.join(args.work_dir, f"{family}-{defect}")
            command = [python, os.path.join(HERE, "plant_defect.py"), model_dir, broken, defect]
            if defect != "bf16-as-f16":
                command += ["--layer", str(args.layer)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            results[defect] = torch_forward.run(broken, ids)["perplexity"]
        rows.append((family, seconds, clean, results))
        shown = "  ".join(f"{d} {p:.3g} ({p / clean:.3g}x)" for d, p in results.items())
        took = f"{seconds:.1f}s" if seconds is not None else "reused"
        print(f"{family:10s} train {took:7s} clean {clean:.3f}  {shown}", flush=True)
    weak = [(f, d, p / c) for f, _, c, r in rows for d, p in r.items() if p / c < 5]
    for family, defect, ratio in weak:
        print(f"WEAK: {family} {defect} moves perplexity only {ratio:.2f}x")
    return 1 if weak else 0


if __name__ == "__main__":
    sys.exit(main())
