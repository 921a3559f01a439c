#!/usr/bin/python3
"""Copy a smoke checkpoint and plant one numeric defect that keeps every shape and dtype legal,
so header-only checks pass and only a forward pass can tell. What was done goes to
OUT_DIR/defect.json {defect, tensor, layer}.

usage: plant_defect.py MODEL_DIR OUT_DIR DEFECT [--layer L]

defects:
  transpose-square   layer L's self_attn.o_proj (square here) stored transposed
  bf16-as-f16        BF16 tensors relabelled F16 in the header, bytes untouched (every tensor,
                     or only layer L's with --layer)
  f16-as-bf16        the reverse, for an f16-saved model
  swap-gate-up       gate and up of layer L exchanged (phi3: the halves of gate_up_proj; MoE:
                     in every expert of the layer)
  expert-wrong-axis  layer L's expert weights re-split from the stacked tensor along the wrong axis
  norm-convention    layer L's input_layernorm rewritten to the other convention (w <-> w - 1)
  scales-shifted     layer L's quantization scales (every scale tensor of the layer, a quantized
                     export such as tools/smoke/quantize.py writes) shifted by one group along
                     the input axis: each group is scaled with its neighbour's scale (MLX
                     `.scales` [O, I/g]: the last axis; GPTQ and AWQ `.scales` [I/g, O]: axis 0;
                     compressed-tensors `.weight_scale` [O, I/g]: the last axis; FP8 block
                     `.weight_scale_inv` [O/b0, I/b1]: the last axis, one block column)"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402
import safetensors_io  # noqa: E402

DEFECTS = ("transpose-square", "bf16-as-f16", "f16-as-bf16", "swap-gate-up", "expert-wrong-axis",
           "norm-convention", "scales-shifted")


def layer_prefix(layer):
    return f"model.layers.{layer}."


def relabel_dtype(path, from_dtype, to_dtype, layer):
    header, metadata, data = safetensors_io.read_raw(path)
    changed = []
    for name, entry in header.items():
        if entry["dtype"] == from_dtype and (layer is None or name.startswith(layer_prefix(layer))):
            entry["dtype"] = to_dtype
            changed.append(name)
    if not changed:
        raise SystemExit(f"no {from_dtype} tensor to relabel (was the model saved as {from_dtype}?)")
    safetensors_io.write_raw(path, header, metadata, data)
    return changed


def swap_gate_up(tensors, cfg, layer):
    p = layer_prefix(layer)
    if cfg["model_type"] == "phi3":
        name = p + "mlp.gate_up_proj.weight"
        gate, up = tensors[name].chunk(2, dim=0)
        tensors[name] = torch.cat([up, gate], dim=0).contiguous()
        return [name]
    pairs = []
    if cfg["model_type"] == "mixtral":
        for e in range(cfg["num_local_experts"]):
            pairs.append((f"{p}block_sparse_moe.experts.{e}.w1.weight", f"{p}block_sparse_moe.experts.{e}.w3.weight"))
    elif f"{p}mlp.experts.0.gate_proj.weight" in tensors:
        for e in range(cfg["num_experts"]):
            pairs.append((f"{p}mlp.experts.{e}.gate_proj.weight", f"{p}mlp.experts.{e}.up_proj.weight"))
    else:
        pairs.append((p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"))
    for gate, up in pairs:
        tensors[gate], tensors[up] = tensors[up], tensors[gate]
    return [name for pair in pairs for name in pair]


def expert_wrong_axis(tensors, cfg, layer):
    """A converter that stacks the experts' [out, in] matrices into [E*out, in] (the split axis
    is 0) but splits them back along axis 1 and reshapes each piece to [out, in]."""
    p = layer_prefix(layer)
    if cfg["model_type"] == "mixtral":
        count = cfg["num_local_experts"]
        groups = [[f"{p}block_sparse_moe.experts.{e}.{w}.weight" for e in range(count)] for w in ("w1", "w2", "w3")]
    elif cfg["model_type"] == "qwen3_moe":
        count = cfg["num_experts"]
        groups = [[f"{p}mlp.experts.{e}.{w}.weight" for e in range(count)] for w in ("gate_proj", "up_proj", "down_proj")]
    else:
        raise SystemExit("expert-wrong-axis applies to MoE families (mixtral, qwen3_moe) only")
    changed = []
    for names in groups:
        shape = tensors[names[0]].shape
        stacked = torch.cat([tensors[n] for n in names], dim=0)
        if stacked.shape[1] % count:
            raise SystemExit(f"{names[0]}: in-dimension {shape[1]} is not divisible by {count} experts")
        for name, piece in zip(names, stacked.chunk(count, dim=1)):
            tensors[name] = piece.reshape(shape).contiguous()
            changed.append(name)
    return changed


def norm_convention(tensors, cfg, layer):
    name = layer_prefix(layer) + "input_layernorm.weight"
    weight = tensors[name].float()
    # A gemma checkpoint stores w and applies 1 + w; the others apply w. Written in the other
    # family's convention, the stored value is off by exactly one.
    rewritten = weight + 1.0 if cfg["model_type"] in families.GEMMA_TYPES else weight - 1.0
    tensors[name] = rewritten.to(tensors[name].dtype)
    return [name]


def shift_scales(path, cfg, layer):
    """Rolls each scale tensor of layer L by one group, in place on the raw bytes, so every
    dtype and shape stays as written."""
    header, metadata, data = safetensors_io.read_raw(path)
    qc = cfg.get("quantization_config") or cfg.get("quantization") or {}
    method = "mlx" if "quantization" in cfg and "quant_method" not in qc else qc.get("quant_method")
    # the scale tensor's suffix and its group axis (the input dimension's groups)
    suffix, axis = {"mlx": (".scales", -1), "gptq": (".scales", 0), "awq": (".scales", 0),
                    "compressed-tensors": (".weight_scale", -1), "fp8": (".weight_scale_inv", -1)}.get(method, (None, None))
    if suffix is None:
        raise SystemExit("scales-shifted needs an MLX affine, GPTQ, AWQ, compressed-tensors or FP8 export "
                         "(tools/smoke/quantize.py)")
    data = bytearray(data)
    changed = []
    for name, entry in sorted(header.items()):
        if not (name.startswith(layer_prefix(layer)) and name.endswith(suffix)):
            continue
        begin, end = entry["data_offsets"]
        scale = safetensors_io.tensor_from_bytes(entry["dtype"], entry["shape"], bytes(data[begin:end]))
        if scale.shape[axis] < 2:
            raise SystemExit(f"{name} has one group only; nothing to shift")
        data[begin:end] = safetensors_io.tensor_to_bytes(torch.roll(scale, 1, dims=axis))
        changed.append(name)
    if not changed:
        raise SystemExit(f"layer {layer} has no {suffix} tensors")
    safetensors_io.write_raw(path, header, metadata, bytes(data))
    return changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("out_dir")
    parser.add_argument("defect", choices=DEFECTS)
    parser.add_argument("--layer", type=int, help="the layer to break (default 0; the dtype relabels default to every tensor)")
    args = parser.parse_args()
    if os.path.exists(args.out_dir):
        shutil.rmtree(args.out_dir)
    shutil.copytree(args.model_dir, args.out_dir)
    with open(os.path.join(args.out_dir, "config.json")) as f:
        cfg = json.load(f)
    weights = os.path.join(args.out_dir, "model.safetensors")

    if args.defect == "scales-shifted":
        layer = 0 if args.layer is None else args.layer
        changed = shift_scales(weights, cfg, layer)
    elif args.defect in ("bf16-as-f16", "f16-as-bf16"):
        source, target = ("BF16", "F16") if args.defect == "bf16-as-f16" else ("F16", "BF16")
        changed = relabel_dtype(weights, source, target, args.layer)
        layer = args.layer
    else:
        layer = 0 if args.layer is None else args.layer
        tensors, metadata = safetensors_io.load(weights)
        if args.defect == "transpose-square":
            name = layer_prefix(layer) + "self_attn.o_proj.weight"
            if tensors[name].shape[0] != tensors[name].shape[1]:
                raise SystemExit(f"{name} is not square")
            tensors[name] = tensors[name].t().contiguous()
            changed = [name]
        elif args.defect == "swap-gate-up":
            changed = swap_gate_up(tensors, cfg, layer)
        elif args.defect == "expert-wrong-axis":
            changed = expert_wrong_axis(tensors, cfg, layer)
        else:
            changed = norm_convention(tensors, cfg, layer)
        safetensors_io.save(weights, tensors, metadata)

    record = {"defect": args.defect, "tensor": changed[0] if len(changed) == 1 else changed, "layer": layer}
    with open(os.path.join(args.out_dir, "defect.json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"{args.defect}: {len(changed)} tensor(s) changed, first {changed[0]}")


if __name__ == "__main__":
    main()
