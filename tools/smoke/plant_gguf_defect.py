#!/usr/bin/python3
"""Copy a smoke GGUF (tools/smoke/to_gguf.py output) and plant one numeric defect that keeps
every shape, type and offset legal, so only a forward pass can tell. The clean model's baseline
and smoke_tokens.json are copied beside the output; what was done goes to defect.json there.

usage: plant_gguf_defect.py IN.gguf OUT.gguf DEFECT --layer L

defects:
  scales-shifted    blk.L.attn_q.weight's block scales (d, and dmin for Q4_K) shifted by one
                    block along each row: every block decodes with its neighbour's scale
                    (quantized types only)
  transpose-square  blk.L.attn_output.weight (square here) stored transposed (re-quantized in
                    its own type)"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402

SCALE_BYTES = {"Q8_0": 2, "Q4_0": 2, "Q5_0": 2, "Q4_K": 4}  # d (+ dmin) at the start of each block


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf")
    parser.add_argument("out")
    parser.add_argument("defect", choices=("scales-shifted", "transpose-square"))
    parser.add_argument("--layer", type=int, required=True)
    args = parser.parse_args()
    r = gguf_io.Reader(args.gguf)
    if args.defect == "scales-shifted":
        t = r.tensor(f"blk.{args.layer}.attn_q.weight")
        if t["type"] not in SCALE_BYTES:
            raise SystemExit(f"{t['name']} is {t['type']}: no block scales to shift")
        blck, size = gguf_io.BLOCK[t["type"]]
        blocks = np.frombuffer(bytes(r.raw(t)), dtype=np.uint8).reshape(t["ne"][1], t["ne"][0] // blck, size).copy()
        if blocks.shape[1] < 2:
            raise SystemExit(f"{t['name']} has one block per row: nothing to shift")
        sb = SCALE_BYTES[t["type"]]
        blocks[:, :, :sb] = np.roll(blocks[:, :, :sb], 1, axis=1)
        r.blob[t["offset"]:t["offset"] + t["nbytes"]] = blocks.tobytes()
    else:
        t = r.tensor(f"blk.{args.layer}.attn_output.weight")
        w = r.values(t)
        if w.shape[0] != w.shape[1]:
            raise SystemExit(f"{t['name']} is not square")
        raw = gguf_io.quantize(t["type"], np.ascontiguousarray(w.T))
        assert len(raw) == t["nbytes"]
        r.blob[t["offset"]:t["offset"] + t["nbytes"]] = raw
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    r.save(args.out)
    src_dir = os.path.dirname(os.path.abspath(args.gguf))
    for side in ("ckpt-smoke-baseline.json", "smoke_tokens.json"):
        if os.path.exists(os.path.join(src_dir, side)) and os.path.abspath(src_dir) != os.path.abspath(out_dir):
            shutil.copy(os.path.join(src_dir, side), out_dir)
    with open(os.path.join(out_dir, "defect.json"), "w") as f:
        json.dump({"defect": args.defect, "tensor": t["name"], "layer": args.layer}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
