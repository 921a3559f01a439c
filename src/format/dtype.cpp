// The format-neutral dtype table (include/ckpt/tensor.h).
#include <array>

#include "ckpt/tensor.h"
#include "io/checked.h"

namespace ckpt {

namespace {
// One row per DType value, in enum order (static_assert below). Block geometry of the ggml
// types: ../shared/specs/gguf.md §2.1 (sizes from ggml-common.h's static_asserts; Q8_1 is 36
// bytes there, not gguf-py's 40).
constexpr std::array<DTypeInfo, kDTypeCount> kDTypes{{
    {DType::BOOL, "BOOL", 8},
    {DType::U8, "U8", 8},
    {DType::I8, "I8", 8},
    {DType::F8_E4M3, "F8_E4M3", 8},
    {DType::F8_E5M2, "F8_E5M2", 8},
    {DType::F8_E8M0, "F8_E8M0", 8},
    {DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {DType::F4, "F4", 4},
    {DType::F6_E2M3, "F6_E2M3", 6},
    {DType::F6_E3M2, "F6_E3M2", 6},
    {DType::I16, "I16", 16},
    {DType::U16, "U16", 16},
    {DType::F16, "F16", 16},
    {DType::BF16, "BF16", 16},
    {DType::I32, "I32", 32},
    {DType::U32, "U32", 32},
    {DType::F32, "F32", 32},
    {DType::I64, "I64", 64},
    {DType::U64, "U64", 64},
    {DType::F64, "F64", 64},
    {DType::C64, "C64", 64},
    {DType::Unknown, "UNKNOWN", 0},
    {DType::Q4_0, "Q4_0", 0, 32, 18},
    {DType::Q4_1, "Q4_1", 0, 32, 20},
    {DType::Q5_0, "Q5_0", 0, 32, 22},
    {DType::Q5_1, "Q5_1", 0, 32, 24},
    {DType::Q8_0, "Q8_0", 0, 32, 34},
    {DType::Q8_1, "Q8_1", 0, 32, 36},
    {DType::Q2_K, "Q2_K", 0, 256, 84},
    {DType::Q3_K, "Q3_K", 0, 256, 110},
    {DType::Q4_K, "Q4_K", 0, 256, 144},
    {DType::Q5_K, "Q5_K", 0, 256, 176},
    {DType::Q6_K, "Q6_K", 0, 256, 210},
    {DType::Q8_K, "Q8_K", 0, 256, 292},
    {DType::IQ2_XXS, "IQ2_XXS", 0, 256, 66},
    {DType::IQ2_XS, "IQ2_XS", 0, 256, 74},
    {DType::IQ3_XXS, "IQ3_XXS", 0, 256, 98},
    {DType::IQ1_S, "IQ1_S", 0, 256, 50},
    {DType::IQ4_NL, "IQ4_NL", 0, 32, 18},
    {DType::IQ3_S, "IQ3_S", 0, 256, 110},
    {DType::IQ2_S, "IQ2_S", 0, 256, 82},
    {DType::IQ4_XS, "IQ4_XS", 0, 256, 136},
    {DType::IQ1_M, "IQ1_M", 0, 256, 56},
    {DType::TQ1_0, "TQ1_0", 0, 256, 54},
    {DType::TQ2_0, "TQ2_0", 0, 256, 66},
    {DType::MXFP4, "MXFP4", 0, 32, 17},
    {DType::NVFP4, "NVFP4", 0, 64, 36},
    {DType::Q1_0, "Q1_0", 0, 128, 18},
    {DType::Q2_0, "Q2_0", 0, 64, 18},
}};

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "one row per DType, in enum order");
}  // namespace

std::string_view format_name(Format f) {
  switch (f) {
    case Format::safetensors: return "safetensors";
    case Format::gguf: return "gguf";
    case Format::pytorch: return "pytorch";
  }
  return "unknown";
}

const DTypeInfo& dtype_info(DType d) {
  const auto i = static_cast<size_t>(d);
  return i < kDTypes.size() ? kDTypes[i] : kDTypes[static_cast<size_t>(DType::Unknown)];
}

std::string_view dtype_name(DType d) { return dtype_info(d).name; }

uint32_t dtype_bits(DType d) { return dtype_info(d).bits; }

std::optional<uint64_t> tensor_nbytes(DType dtype, std::span<const uint64_t> shape) {
  const DTypeInfo& info = dtype_info(dtype);
  uint64_t n = 1;
  for (uint64_t d : shape) {
    auto m = io::checked_mul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  if (info.block_elems > 1) {
    // Blocks run along the innermost dimension: each row must hold whole blocks.
    const uint64_t row = shape.empty() ? 1 : shape.back();
    if (row % info.block_elems != 0) return std::nullopt;
    return io::checked_mul(n / info.block_elems, info.block_bytes);
  }
  if (info.bits == 0) return std::nullopt;
  auto total_bits = io::checked_mul(n, info.bits);
  if (!total_bits || *total_bits % 8 != 0) return std::nullopt;
  return *total_bits / 8;
}

}  // namespace ckpt
