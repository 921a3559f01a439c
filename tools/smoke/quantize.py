#!/usr/bin/python3
"""Quantize a smoke checkpoint the way MLX or AutoGPTQ exports it, independently of ckpt's C++, and write
the quantized model's truth beside it.

usage: quantize.py MODEL_DIR OUT_DIR --scheme mlx4|mlx8|gptq4 [--float-copy DIR]

gptq4 (section 3, AutoGPTQ v1 "gptq" format, sym, desc_act false, group 32): only the decoder
layers' linear projections (embeddings, lm_head, norms and routers stay float) become qweight
I32 [I/8, O] (packed along the input dimension, element j of a word at bit 4j), qzeros I32
[I/32, O/8] (packed along the output dimension, storing z-1 = 7), scales F16 [I/32, O] and
g_idx I32 [I] = i // 32, with w = scales * (q - 8); config.json gains quantization_config
{quant_method "gptq", bits, group_size, desc_act, sym, ...} and quantize_config.json its copy.

MLX affine (specs/quantization-layouts.md section 1): every Linear and Embedding whose input
dimension divides by the group size (32 here) becomes weight U32 [O, I*b/32] (packed along the
input dimension, element j of a word at bit j*b, LSB first), scales and biases [O, I/32] in the
model's dtype, with w = scales * q + biases per group; norms and MoE routers stay float (mlx-lm
keeps routers at 8 bits through per-layer entries; here they are simply left unquantized, which
an MLX loader reads the same way: no .scales, no quantized module). config.json gains
"quantization" and its copy "quantization_config" ({"group_size", "bits"}, no quant_method).

The baseline (ckpt-smoke-baseline.json) is the torch reference forward pass over the weights
dequantized here from what was written (the bf16 scales and biases as stored), so it is the
quantized model's truth, not the float model's. --float-copy writes those dequantized weights as
a float checkpoint for tests/smoke/torch_forward.py."""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import families  # noqa: E402
import safetensors_io  # noqa: E402

GROUP = 32
SCHEMES = {"mlx4": 4, "mlx8": 8, "gptq4": 4}
GPTQ_CONFIG = {"bits": 4, "group_size": GROUP, "damp_percent": 0.01, "desc_act": False, "static_groups": False,
               "sym": True, "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model",
               "quant_method": "gptq", "checkpoint_format": "gptq"}
GPTQ_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "gate_proj", "up_proj", "down_proj",
                "gate_up_proj", "w1", "w2", "w3")
# Files a smoke model carries besides its weights and baseline.
SIDE_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "generation_config.json", "smoke_tokens.json")


def is_quantized_module(name, tensor):
    if tensor.dim() != 2 or not name.endswith(".weight") or tensor.shape[-1] % GROUP:
        return False
    if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
        return False  # routers
    return "norm" not in name


def pack_words(q, bits, dim):
    """Unsigned codes q (int64) packed along `dim`, 32/bits per word, LSB first, as int32."""
    per_word = 32 // bits
    q = q.movedim(dim, -1)
    q = q.reshape(*q.shape[:-1], q.shape[-1] // per_word, per_word)
    words = torch.zeros(q.shape[:-1], dtype=torch.int64)
    for j in range(per_word):
        words |= q[..., j] << (j * bits)
    words = torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)
    return words.movedim(-1, dim).contiguous()


def quantize(weight, bits, dtype):
    """weight [O, I] -> (packed int32 [O, I*bits/32] holding the u32 words, scales, biases, dequantized)."""
    w = weight.float()
    rows, cols = w.shape
    groups = w.reshape(rows, cols // GROUP, GROUP)
    lo, hi = groups.min(dim=-1).values, groups.max(dim=-1).values
    levels = (1 << bits) - 1
    scales = ((hi - lo) / levels).clamp(min=1e-8).to(dtype)
    biases = lo.to(dtype)
    s, b = scales.float().unsqueeze(-1), biases.float().unsqueeze(-1)
    q = torch.round((groups - b) / s).clamp(0, levels).to(torch.int64)
    dequantized = (s * q.float() + b).reshape(rows, cols)
    return pack_words(q.reshape(rows, cols), bits, 1), scales, biases, dequantized


def is_gptq_module(name, tensor):
    return (name.startswith("model.layers.") and name.endswith(".weight") and tensor.dim() == 2
            and name[: -len(".weight")].rsplit(".", 1)[-1] in GPTQ_LINEARS and tensor.shape[-1] % GROUP == 0)


def quantize_gptq(weight):
    """weight [O, I] -> (qweight [I/8, O], qzeros [I/g, O/8], scales F16 [I/g, O], g_idx [I], dequantized)."""
    w = weight.float().t()  # [I, O]: GPTQ keeps the input dimension first
    cols_in, rows_out = w.shape
    groups = w.reshape(cols_in // GROUP, GROUP, rows_out)
    # AutoGPTQ's symmetric quantizer: scale = 2 max|w| / 15, zero = (15 + 1) / 2 = 8.
    scales = (2 * groups.abs().max(dim=1).values / 15).clamp(min=1e-8).to(torch.float16)  # [G, O]
    s = scales.float().unsqueeze(1)
    zero = 8
    q = (torch.round(groups / s) + zero).clamp(0, 15).to(torch.int64)
    dequantized = (s * (q - zero).float()).reshape(cols_in, rows_out).t().contiguous()
    qweight = pack_words(q.reshape(cols_in, rows_out), 4, 0)
    qzeros = pack_words(torch.full((cols_in // GROUP, rows_out), zero - 1, dtype=torch.int64), 4, 1)  # v1: z - 1
    g_idx = (torch.arange(cols_in) // GROUP).to(torch.int32)
    return qweight, qzeros, scales, g_idx, dequantized


def write_checkpoint(path, entries):
    """entries: name -> (dtype name, shape, raw bytes), laid out in name order."""
    header, chunks, offset = {}, [], 0
    for name in sorted(entries):
        dtype, shape, raw = entries[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    safetensors_io.write_raw(path, header, {"format": "pt"}, b"".join(chunks))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--scheme", required=True, choices=sorted(SCHEMES))
    parser.add_argument("--float-copy", help="also write the dequantized weights as a float checkpoint here")
    args = parser.parse_args()
    bits = SCHEMES[args.scheme]
    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, _ = safetensors_io.load(os.path.join(args.model_dir, "model.safetensors"))

    entries, truth = {}, {}
    for name, t in tensors.items():
        if args.scheme == "gptq4":
            if is_gptq_module(name, t):
                qweight, qzeros, scales, g_idx, dequantized = quantize_gptq(t)
                module = name[: -len(".weight")]
                entries[module + ".qweight"] = ("I32", qweight.shape, qweight.numpy().tobytes())
                entries[module + ".qzeros"] = ("I32", qzeros.shape, qzeros.numpy().tobytes())
                entries[module + ".scales"] = ("F16", scales.shape, safetensors_io.tensor_to_bytes(scales))
                entries[module + ".g_idx"] = ("I32", g_idx.shape, g_idx.numpy().tobytes())
                truth[name] = dequantized
            else:
                entries[name] = (safetensors_io.DTYPE_NAMES[t.dtype], t.shape, safetensors_io.tensor_to_bytes(t))
                truth[name] = t.float()
        elif is_quantized_module(name, t):
            packed, scales, biases, dequantized = quantize(t, bits, t.dtype)
            module = name[: -len(".weight")]
            entries[name] = ("U32", packed.shape, packed.numpy().tobytes())
            entries[module + ".scales"] = (safetensors_io.DTYPE_NAMES[t.dtype], scales.shape, safetensors_io.tensor_to_bytes(scales))
            entries[module + ".biases"] = (safetensors_io.DTYPE_NAMES[t.dtype], biases.shape, safetensors_io.tensor_to_bytes(biases))
            truth[name] = dequantized
        else:
            entries[name] = (safetensors_io.DTYPE_NAMES[t.dtype], t.shape, safetensors_io.tensor_to_bytes(t))
            truth[name] = t.float()

    if os.path.exists(args.out_dir):
        shutil.rmtree(args.out_dir)
    os.makedirs(args.out_dir)
    for side in SIDE_FILES:
        if os.path.exists(os.path.join(args.model_dir, side)):
            shutil.copy(os.path.join(args.model_dir, side), args.out_dir)
    quant_cfg = dict(cfg)
    if args.scheme == "gptq4":
        quant_cfg["quantization_config"] = dict(GPTQ_CONFIG)
        with open(os.path.join(args.out_dir, "quantize_config.json"), "w") as f:
            json.dump(GPTQ_CONFIG, f, indent=2)
            f.write("\n")
    else:
        quant_cfg["quantization"] = {"group_size": GROUP, "bits": bits}
        quant_cfg["quantization_config"] = {"group_size": GROUP, "bits": bits}
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(quant_cfg, f, indent=2)
        f.write("\n")
    write_checkpoint(os.path.join(args.out_dir, "model.safetensors"), entries)

    model = families.CausalLM(cfg)
    model.load_state_dict(truth, strict=True)
    with open(os.path.join(args.model_dir, "smoke_tokens.json")) as f:
        ids = json.load(f)["ids"]
    torch.set_num_threads(1)
    doc = baseline.compute(model, ids, f"tools/smoke/quantize.py --scheme {args.scheme} (torch reference, dequantized weights)")
    baseline.write(os.path.join(args.out_dir, "ckpt-smoke-baseline.json"), doc)
    if args.float_copy:
        if os.path.exists(args.float_copy):
            shutil.rmtree(args.float_copy)
        os.makedirs(args.float_copy)
        with open(os.path.join(args.float_copy, "config.json"), "w") as f:
            json.dump(dict(cfg, torch_dtype="float32"), f, indent=2)
        safetensors_io.save(os.path.join(args.float_copy, "model.safetensors"), {k: v.contiguous() for k, v in truth.items()})
    print(f"{args.scheme}: {sum(1 for n in entries if n.endswith('.scales'))} modules quantized; "
          f"baseline perplexity {doc['perplexity']:.4f}")


if __name__ == "__main__":
    main()
