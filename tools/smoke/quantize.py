#!/usr/bin/python3
"""Quantize a smoke checkpoint the way MLX, AutoGPTQ, AutoAWQ, llm-compressor or DeepSeek's FP8
export writes it, independently of ckpt's C++, and write the quantized model's truth beside it.

usage: quantize.py MODEL_DIR OUT_DIR --scheme mlx4|mlx8|gptq4|awq4|ct-pack4|fp8-block [--float-copy DIR]

Every scheme but MLX quantizes the decoder layers' linear projections only (q/k/v/o, the MLP's
and each expert's gate/up/down, phi3's fused qkv and gate_up, mixtral's w1/w2/w3); embeddings,
lm_head, norms and MoE routers stay float. Calibration (GPTQ's Hessian updates, AWQ's
activation-aware scaling) is not modelled: the values are plain min/max rounding, the layouts and
configs are the exporters'. Facts: /work/shared/specs/quantization-layouts.md.

awq4 (section 4, AutoAWQ "gemm", group 32, zero_point true): qweight I32 [I, O/8] packed along
the output dimension, output 8c+k of word c in nibble ORDER.index(k) with ORDER 0,2,4,6,1,3,5,7;
qzeros I32 [I/32, O/8] packed the same way (the zero itself, 0..15); scales F16 [I/32, O];
w = (q - z) * scale, with AutoAWQ's asymmetric min/max quantizer. AutoAWQ works in float16, so
every float tensor of the export is F16 and torch_dtype is "float16". quantization_config
{quant_method "awq", bits, group_size, zero_point, version "gemm", modules_to_not_convert} (the
routers of an MoE family, else null).

ct-pack4 (section 2, llm-compressor W4A16 at group 32, symmetric): weight_packed I32 [O, I/8]
(offset binary q + 8, element j at bit 4j of word j // 8), weight_scale [O, I/32] in the model's
dtype, weight_shape I64 [2] = [O, I], no zero point; w = q * scale with scale = max|w| / 7.5.
quantization_config {quant_method "compressed-tensors", format "pack-quantized", config_groups
{group_0: targets ["Linear"], weights {num_bits 4, type int, symmetric, strategy group, ...}},
ignore: lm_head and the MoE routers (the Linear modules left float), ...}.

fp8-block (section 7, DeepSeek-V3 block FP8 with 32 x 32 blocks, so a 64-wide matrix has
several): weight F8_E4M3 [O, I] and weight_scale_inv F32 [cdiv(O, 32), cdiv(I, 32)] with
weight_scale_inv = max|w| / 448 per block and w = e4m3 * weight_scale_inv; the E4M3 encoder
(round to nearest even, saturating at 448, e4m3fn) is tools/smoke/e4m3.py, in numpy because
torch 1.13 has no float8. quantization_config {quant_method "fp8", activation_scheme "dynamic",
fmt "e4m3", weight_block_size [32, 32]} and, for an MoE family, modules_to_not_convert naming
lm_head and the routers (transformers' nn.Linear router would otherwise be converted).

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

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import e4m3  # noqa: E402
import families  # noqa: E402
import safetensors_io  # noqa: E402

GROUP = 32
FP8_BLOCK = (32, 32)  # [rows (out), cols (in)]: 64-wide matrices get 2 x 2 blocks and more
SCHEMES = {"mlx4": 4, "mlx8": 8, "gptq4": 4, "awq4": 4, "ct-pack4": 4, "fp8-block": 8}
# The module the tools leave float in an MoE layer: the router (an nn.Linear in transformers).
ROUTERS = ("mlp.gate", "block_sparse_moe.gate")
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


def awq_order(q):
    """Codes [.., O] reordered so that packing 8 per word LSB first puts output 8c+ORDER[i] in
    nibble i, as AutoAWQ's gemm packer does (order 0,2,4,6,1,3,5,7)."""
    order = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])
    lead, out = q.shape[:-1], q.shape[-1]
    return q.reshape(*lead, out // 8, 8)[..., order].reshape(*lead, out)


def quantize_awq(weight):
    """weight [O, I] -> (qweight [I, O/8], qzeros [I/g, O/8], scales F16 [I/g, O], dequantized).
    AutoAWQ's asymmetric min/max quantizer (pseudo_quantize_tensor): per group of g inputs,
    scale = (max - min) / 15 (at least 1e-5), zero = clamp(-round(min / scale), 0, 15),
    q = clamp(round(w / scale) + zero, 0, 15), w = (q - zero) * scale."""
    w = weight.float().t()  # [I, O]: AWQ gemm keeps the input dimension first
    cols_in, rows_out = w.shape
    groups = w.reshape(cols_in // GROUP, GROUP, rows_out)
    lo, hi = groups.min(dim=1).values, groups.max(dim=1).values  # [G, O]
    scales = ((hi - lo).clamp(min=1e-5) / 15).to(torch.float16)
    s = scales.float()
    zeros = (-torch.round(lo / s)).clamp(0, 15)
    q = (torch.round(groups / s.unsqueeze(1)) + zeros.unsqueeze(1)).clamp(0, 15)
    dequantized = ((q - zeros.unsqueeze(1)) * s.unsqueeze(1)).reshape(cols_in, rows_out).t().contiguous()
    qweight = pack_words(awq_order(q.reshape(cols_in, rows_out).to(torch.int64)), 4, 1)
    qzeros = pack_words(awq_order(zeros.to(torch.int64)), 4, 1)
    return qweight, qzeros, scales, dequantized


def quantize_ct_pack(weight):
    """weight [O, I] -> (weight_packed I32 [O, I/8], weight_scale [O, I/g] in the weight's dtype,
    dequantized). compressed-tensors' symmetric int4 group quantizer: scale = max|w| / (15 / 2)
    per group, q = clamp(round(w / scale), -8, 7), w = q * scale; packed as offset binary q + 8,
    element j of a row at bit 4j of word j // 8."""
    w = weight.float()
    rows, cols = w.shape
    groups = w.reshape(rows, cols // GROUP, GROUP)
    scales = (groups.abs().max(dim=-1).values / 7.5).clamp(min=1e-8).to(weight.dtype)  # [O, G]
    s = scales.float().unsqueeze(-1)
    q = torch.round(groups / s).clamp(-8, 7)
    dequantized = (q * s).reshape(rows, cols)
    packed = pack_words((q + 8).to(torch.int64).reshape(rows, cols), 4, 1)
    return packed, scales, dequantized


def quantize_fp8_block(weight):
    """weight [O, I] -> (E4M3 codes uint8 [O, I], weight_scale_inv F32 [cdiv(O, b0), cdiv(I, b1)],
    dequantized). DeepSeek-V3's block quantizer: per block, s = max|w| / 448, codes = e4m3(w / s)
    (a partial block at the edge is scaled by its own max, as zero padding leaves it), and the
    stored weight_scale_inv is s, so w = e4m3 * s."""
    w = weight.float().numpy()
    rows, cols = w.shape
    b0, b1 = FP8_BLOCK
    grid_rows, grid_cols = -(-rows // b0), -(-cols // b1)
    scale = np.zeros((grid_rows, grid_cols), dtype=np.float32)
    for i in range(grid_rows):
        for j in range(grid_cols):
            block = w[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
            scale[i, j] = np.float32(max(float(np.abs(block).max()), 1e-12)) / np.float32(e4m3.MAX)
    s_full = np.repeat(np.repeat(scale, b0, axis=0), b1, axis=1)[:rows, :cols]
    codes = e4m3.encode((w / s_full).astype(np.float32))
    dequantized = e4m3.decode(codes) * s_full  # float32 x float32, as a reader computes it
    return codes, scale, torch.from_numpy(np.ascontiguousarray(dequantized, dtype=np.float32))


def router_names(tensors):
    return sorted(name[: -len(".weight")] for name in tensors
                  if name.startswith("model.layers.") and any(name.endswith("." + r + ".weight") for r in ROUTERS))


def scheme_config(scheme, bits, tensors):
    """The config.json quantization_config each exporter writes (specs/quantization-layouts.md)."""
    routers = router_names(tensors)
    if scheme == "gptq4":
        return dict(GPTQ_CONFIG)
    if scheme == "awq4":
        # AutoAWQ to_transformers_dict; modules_to_not_convert is the model class's list (None
        # for the dense families), matched as a substring: the routers' own names here
        return {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
                "modules_to_not_convert": routers or None}
    if scheme == "ct-pack4":
        # llm-compressor W4A16 at group 32; from_pretrained lists the targeted-class (Linear)
        # modules it left float in `ignore`: lm_head and the MoE routers
        weights = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": GROUP,
                   "block_structure": None, "actorder": None, "dynamic": False, "observer": "minmax",
                   "observer_kwargs": {}, "scale_dtype": None, "zp_dtype": None}
        return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                              "output_activations": None, "format": "pack-quantized"}},
                "ignore": ["lm_head"] + routers, "kv_cache_scheme": None, "sparsity_config": {},
                "global_compression_ratio": None}
    if scheme == "fp8-block":
        # DeepSeek-V3's keys; an MoE family's router is an nn.Linear in transformers (not a raw
        # parameter as in DeepSeek), so it is named in modules_to_not_convert to stay float
        cfg = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": list(FP8_BLOCK)}
        if routers:
            cfg["modules_to_not_convert"] = ["lm_head"] + routers
        return cfg
    return {"group_size": GROUP, "bits": bits}


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

    if args.scheme == "awq4":
        # AutoAWQ loads and saves the model in float16: every float tensor is F16 on disk
        tensors = {n: t.to(torch.float16) for n, t in tensors.items()}
        cfg = dict(cfg, torch_dtype="float16")
    entries, truth = {}, {}
    for name, t in tensors.items():
        module = name[: -len(".weight")]
        if args.scheme in ("awq4", "ct-pack4", "fp8-block") and is_gptq_module(name, t):
            if args.scheme == "awq4":
                qweight, qzeros, scales, dequantized = quantize_awq(t)
                entries[module + ".qweight"] = ("I32", qweight.shape, qweight.numpy().tobytes())
                entries[module + ".qzeros"] = ("I32", qzeros.shape, qzeros.numpy().tobytes())
                entries[module + ".scales"] = ("F16", scales.shape, safetensors_io.tensor_to_bytes(scales))
            elif args.scheme == "ct-pack4":
                packed, scales, dequantized = quantize_ct_pack(t)
                entries[module + ".weight_packed"] = ("I32", packed.shape, packed.numpy().tobytes())
                entries[module + ".weight_scale"] = (safetensors_io.DTYPE_NAMES[scales.dtype], scales.shape,
                                                     safetensors_io.tensor_to_bytes(scales))
                entries[module + ".weight_shape"] = ("I64", (2,), np.array(t.shape, dtype="<i8").tobytes())
            else:
                codes, scale_inv, dequantized = quantize_fp8_block(t)
                entries[name] = ("F8_E4M3", codes.shape, codes.tobytes())
                entries[module + ".weight_scale_inv"] = ("F32", scale_inv.shape, scale_inv.astype("<f4").tobytes())
            truth[name] = dequantized
        elif args.scheme in ("awq4", "ct-pack4", "fp8-block"):
            entries[name] = (safetensors_io.DTYPE_NAMES[t.dtype], t.shape, safetensors_io.tensor_to_bytes(t))
            truth[name] = t.float()
        elif args.scheme == "gptq4":
            if is_gptq_module(name, t):
                qweight, qzeros, scales, g_idx, dequantized = quantize_gptq(t)
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
    quant_cfg["quantization_config"] = scheme_config(args.scheme, bits, tensors)
    if args.scheme == "gptq4":
        with open(os.path.join(args.out_dir, "quantize_config.json"), "w") as f:
            json.dump(GPTQ_CONFIG, f, indent=2)
            f.write("\n")
    elif args.scheme in ("mlx4", "mlx8"):
        quant_cfg["quantization"] = scheme_config(args.scheme, bits, tensors)
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
    quantized = sum(1 for n in entries if n.endswith((".scales", ".weight_scale", ".weight_scale_inv")))
    print(f"{args.scheme}: {quantized} modules quantized; "
          f"baseline perplexity {doc['perplexity']:.4f}")


if __name__ == "__main__":
    main()
