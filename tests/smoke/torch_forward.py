#!/usr/bin/python3
"""The independent reference forward pass for `ckpt smoke`: reads config.json and
model.safetensors with its own reader, runs tools/smoke/families.py in float32 over the given
token ids and writes logits, per-layer hidden-state statistics, perplexity and top-1 accuracy.

usage: torch_forward.py MODEL_DIR --tokens FILE.json [--out FILE.json] [--layer-skip K]"""
import argparse
import hashlib
import json
import os
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools", "smoke"))
import families  # noqa: E402
import safetensors_io  # noqa: E402


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = safetensors_io.load(os.path.join(model_dir, "model.safetensors"))
    model = families.CausalLM(cfg)
    # strict: a missing or extra tensor name is a fixture bug, not something to paper over.
    model.load_state_dict({name: t.float() for name, t in tensors.items()}, strict=True)
    return model


def read_ids(path):
    with open(path) as f:
        value = json.load(f)
    return value["ids"] if isinstance(value, dict) else value


def run(model_dir, ids, layer_skip=None):
    torch.set_num_threads(1)
    model = load_model(model_dir)
    id_tensor = torch.tensor(ids)
    with torch.no_grad():
        logits, layer_outputs = model(id_tensor, skip_layer=layer_skip)
    nll, perplexity, top1 = families.next_token_stats(logits, id_tensor)
    return {
        # sha256 of the float32 little-endian logits, row-major [positions, vocab].
        "logits_sha": hashlib.sha256(logits.contiguous().numpy().astype("<f4").tobytes()).hexdigest(),
        "logits": [[round(v, 6) for v in row] for row in logits.tolist()],
        "hidden_rms": [h.pow(2).mean().sqrt().item() for h in layer_outputs],
        "hidden_max": [h.abs().max().item() for h in layer_outputs],
        "nll_mean": nll, "perplexity": perplexity, "top1_accuracy": top1,
        "layer_skip": layer_skip,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--tokens", required=True, help="a JSON list of ids or {\"ids\": [...]}")
    parser.add_argument("--out", help="write the JSON here instead of stdout")
    parser.add_argument("--layer-skip", type=int, help="run with layer K replaced by the identity")
    args = parser.parse_args()
    result = run(args.model_dir, read_ids(args.tokens), args.layer_skip)
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"perplexity {result['perplexity']:.4f} top-1 {result['top1_accuracy']:.4f}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
