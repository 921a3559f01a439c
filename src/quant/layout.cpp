// Packed weight + companion tensors per quantization format
// (specs/quantization-layouts.md §1a MLX, §2b compressed-tensors, §3 GPTQ, §4 AWQ, §6 bnb,
// §7 FP8, §8 gpt-oss MXFP4).
#include <array>
#include <initializer_list>
#include <vector>

#include "ckpt/quant.h"

namespace ckpt::quant {

using arch::DTypeRole;
using arch::ExpectedTensor;
using arch::ModuleKind;
using arch::Presence;

namespace {
uint64_t cdiv(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }
}  // namespace

std::string_view format_name(Format f) {
  switch (f) {
    case Format::None: return "float";
    case Format::MlxAffine: return "MLX affine";
    case Format::MlxMxfp4: return "MLX mxfp4";
    case Format::MlxNvfp4: return "MLX nvfp4";
    case Format::MlxMxfp8: return "MLX mxfp8";
    case Format::CtPacked: return "compressed-tensors pack-quantized";
    case Format::CtInt: return "compressed-tensors int-quantized";
    case Format::CtFloat: return "compressed-tensors float-quantized";
    case Format::CtNvfp4: return "compressed-tensors nvfp4-pack-quantized";
    case Format::CtMxfp4: return "compressed-tensors mxfp4-pack-quantized";
    case Format::GPTQ: return "GPTQ";
    case Format::AwqGemm: return "AWQ gemm";
    case Format::AwqGemv: return "AWQ gemv";
    case Format::Fp8Block: return "FP8 block";
    case Format::Fp8Tensor: return "FP8 per-tensor";
    case Format::BnbInt8: return "bitsandbytes int8";
    case Format::Bnb4bit: return "bitsandbytes 4-bit";
    case Format::GptOssMxfp4: return "gpt-oss MXFP4";
  }
  return "?";
}

namespace {
// A part's trailing dimensions (at most 4), passed without a heap allocation.
struct Dims {
  uint64_t v[4] = {};
  size_t n = 0;
  Dims(std::initializer_list<uint64_t> d) {
    for (uint64_t x : d)
      if (n < 4) v[n++] = x;
  }
  Dims(const std::vector<uint64_t>& d) {  // NOLINT: implicit, like the braced lists
    for (uint64_t x : d)
      if (n < 4) v[n++] = x;
  }
};
}  // namespace

arch::Plan quantized_tensors(std::string_view module, std::span<const uint64_t> lead, uint64_t O, uint64_t I,
                             const ModuleQuant& mq) {
  arch::Plan out;
  out.reserve(4);
  std::string name;
  auto add = [&](std::string_view suffix, Dims tail, DTypeRole d, Presence p = Presence::Required,
                 bool with_lead = true) {
    name.assign(module).append(suffix);
    ExpectedTensor& t = out.add(name);
    t.shape.reserve((with_lead ? lead.size() : 0) + tail.n);
    if (with_lead) t.shape.assign(lead.begin(), lead.end());
    t.shape.insert(t.shape.end(), tail.v, tail.v + tail.n);
    t.dtype = d;
    t.kind = ModuleKind::Quant;
    t.presence = p;
  };
  const uint64_t b = mq.bits > 0 ? static_cast<uint64_t>(mq.bits) : 4;
  const uint64_t g = mq.group_size > 0 ? static_cast<uint64_t>(mq.group_size) : I;
  const uint64_t groups = mq.group_size > 0 ? cdiv(I, g) : 1;
  switch (mq.format) {
    case Format::None: break;
    case Format::MlxAffine:
      add(".weight", {O, I * b / 32}, DTypeRole::U32);
      add(".scales", {O, I / g}, DTypeRole::Model);
      add(".biases", {O, I / g}, DTypeRole::Model);
      break;
    case Format::MlxMxfp4:
      add(".weight", {O, I / 8}, DTypeRole::U32);
      add(".scales", {O, I / 32}, DTypeRole::U8);
      break;
    case Format::MlxNvfp4:
      add(".weight", {O, I / 8}, DTypeRole::U32);
      add(".scales", {O, I / 16}, DTypeRole::U8);
      break;
    case Format::MlxMxfp8:
      add(".weight", {O, I / 4}, DTypeRole::U32);
      add(".scales", {O, I / 32}, DTypeRole::U8);
      break;
    case Format::CtPacked: {
      add(".weight_packed", {O, cdiv(I * b, 32)}, DTypeRole::I32);
      std::vector<uint64_t> sc = {O, groups};
      if (mq.strategy == "channel") sc = {O, 1};
      if (mq.strategy == "tensor") sc = {1};
      add(".weight_scale", sc, DTypeRole::Model);
      add(".weight_shape", {lead.empty() ? 2u : 2u + lead.size()}, DTypeRole::I64, Presence::Required,
          false);
      if (!mq.symmetric)
        add(".weight_zero_point", {cdiv(O * b, 32), mq.strategy == "channel" ? 1 : groups},
            DTypeRole::I32);
      if (mq.g_idx) add(".weight_g_idx", {I}, DTypeRole::I32);
      break;
    }
    case Format::CtInt: {
      add(".weight", {O, I}, DTypeRole::I8);
      std::vector<uint64_t> sc = {O, groups};
      if (mq.strategy == "channel") sc = {O, 1};
      if (mq.strategy == "tensor") sc = {1};
      add(".weight_scale", sc, DTypeRole::Model);
      if (!mq.symmetric) add(".weight_zero_point", sc, DTypeRole::I8);
      if (mq.g_idx) add(".weight_g_idx", {I}, DTypeRole::I32);
      break;
    }
    case Format::CtFloat: {
      add(".weight", {O, I}, DTypeRole::F8_E4M3);
      std::vector<uint64_t> sc = {1};
      if (mq.strategy == "channel") sc = {O, 1};
      if (mq.strategy == "block" && mq.block_rows > 0 && mq.block_cols > 0)
        sc = {cdiv(O, mq.block_rows), cdiv(I, mq.block_cols)};
      if (mq.strategy == "group") sc = {O, groups};
      add(".weight_scale", sc, DTypeRole::Model);
      break;
    }
    case Format::CtNvfp4:
      add(".weight_packed", {O, I / 2}, DTypeRole::U8);
      add(".weight_scale", {O, I / 16}, DTypeRole::F8_E4M3);
      add(".weight_global_scale", {1}, DTypeRole::F32, Presence::Required, false);
      break;
    case Format::CtMxfp4:
      add(".weight_packed", {O, I / 2}, DTypeRole::U8);
      add(".weight_scale", {O, I / 32}, DTypeRole::U8);
      break;
    case Format::GPTQ:
      add(".qweight", {cdiv(I * b, 32), O}, DTypeRole::I32);
      add(".qzeros", {groups, cdiv(O * b, 32)}, DTypeRole::I32);
      add(".scales", {groups, O}, DTypeRole::Model);
      add(".g_idx", {I}, DTypeRole::I32, mq.g_idx ? Presence::Required : Presence::Optional);
      break;
    case Format::AwqGemm:
      add(".qweight", {I, O / 8}, DTypeRole::I32);
      add(".qzeros", {cdiv(I, g), O / 8}, DTypeRole::I32);
      add(".scales", {cdiv(I, g), O}, DTypeRole::Model);
      break;
    case Format::AwqGemv: {
      uint64_t wz = cdiv(I / g, 8);
      uint64_t mult = g >= 128 ? 1 : g == 64 ? 2 : 4;
      wz = cdiv(wz, mult) * mult;
      add(".qweight", {O, I / 8}, DTypeRole::I32);
      add(".qzeros", {O, wz}, DTypeRole::I32);
      add(".scales", {O, wz * 8}, DTypeRole::Model);
      break;
    }
    case Format::Fp8Block:
      add(".weight", {O, I}, DTypeRole::F8_E4M3);
      add(".weight_scale_inv",
          {cdiv(O, mq.block_rows > 0 ? mq.block_rows : 128), cdiv(I, mq.block_cols > 0 ? mq.block_cols : 128)},
          DTypeRole::F32);
      break;
    case Format::Fp8Tensor:
      add(".weight", {O, I}, DTypeRole::F8_E4M3);
      add(".weight_scale", {}, DTypeRole::F32, Presence::Required, false);
      break;
    case Format::BnbInt8:
      add(".weight", {O, I}, DTypeRole::I8);
      add(".SCB", {O}, DTypeRole::F32);
      add(".weight_format", {}, DTypeRole::U8, Presence::Optional, false);
      break;
    case Format::Bnb4bit: {
      uint64_t n = O * I;
      for (auto l : lead) n *= l;
      add(".weight", {cdiv(n, 2), 1}, DTypeRole::U8, Presence::Required, false);
      add(".weight.absmax", {cdiv(n, 64)}, mq.g_idx ? DTypeRole::U8 : DTypeRole::F32,
          Presence::Required, false);
      add(".weight.quant_map", {16}, DTypeRole::F32, Presence::Required, false);
      if (mq.g_idx) {  // g_idx doubles as "double quantization" for bnb
        add(".weight.nested_absmax", {cdiv(cdiv(n, 64), 256)}, DTypeRole::F32, Presence::Required, false);
        add(".weight.nested_quant_map", {256}, DTypeRole::F32, Presence::Required, false);
      }
      break;
    }
    case Format::GptOssMxfp4:
      add("_blocks", {O, I / 32, 16}, DTypeRole::U8);
      add("_scales", {O, I / 32}, DTypeRole::U8);
      break;
  }
  return out;
}

std::span<const std::string_view> companion_suffixes() {
  static constexpr std::array<std::string_view, 30> k = {
      ".scales", ".biases", ".weight_packed", ".weight_scale", ".weight_shape",
      ".weight_zero_point", ".weight_g_idx", ".weight_global_scale", ".input_global_scale",
      ".input_scale", ".input_zero_point", ".qweight", ".qzeros", ".g_idx", ".weight_scale_inv",
      ".SCB", ".weight_format", ".weight.absmax", ".weight.quant_map", ".weight.nested_absmax",
      ".weight.nested_quant_map", ".weight.quant_state.bitsandbytes__nf4",
      ".weight.quant_state.bitsandbytes__fp4", ".weight_scale_2", ".output_scale", "_blocks",
      "_scales", ".k_scale", ".v_scale", ".global_scale"};
  return k;
}

std::optional<int> packed_bits_for(uint64_t stored_cols, uint64_t expected_in, uint32_t word_bits) {
  if (stored_cols == 0 || expected_in == 0) return std::nullopt;
  for (int b : {4, 8, 2, 3, 5, 6}) {
    if (stored_cols * word_bits == expected_in * static_cast<uint64_t>(b)) return b;
  }
  for (int b : {4, 8, 2, 3, 5, 6}) {
    if (cdiv(expected_in * b, word_bits) == stored_cols) return b;
  }
  return std::nullopt;
}

}  // namespace ckpt::quant
