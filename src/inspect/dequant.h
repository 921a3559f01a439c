// The weights a model computes with, read back from what is stored: a plain float tensor, or a
// quantized module's packed tensors dequantized (MLX affine, compressed-tensors pack/int/float,
// GPTQ, AWQ gemm, FP8 block and per-tensor/channel, bitsandbytes int8, GGUF block types).
// `ckpt diff --deep` compares two checkpoints through this, so a bf16 model against its 4-bit
// export is a quantization-error report. Rows are decoded in bounded tiles by positioned reads
// (never mmap: a file that shrinks while read is an error, not SIGBUS).
//
// Facts: specs/quantization-layouts.md (sections 1-7), specs/gguf.md section 2 (block types).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace ckpt::diff::dequant {

enum class Layout : uint8_t {
  Float,      // F32/F16/BF16/F64/F8 as stored, no scale
  MlxAffine,  // weight U32 [.., O, I*b/32] + scales, biases [.., O, I/g]
  CtPacked,   // weight_packed I32 [.., O, W] offset binary + weight_scale [+ zero point, g_idx]
  IntScaled,  // weight I8 [.., O, I] + weight_scale [+ zero point] (compressed-tensors int)
  FloatScaled,  // weight F8 [.., O, I] x weight_scale / weight_scale_inv (tensor, row or block)
  BnbInt8,    // weight I8 [O, I] x SCB[o] / 127
  GPTQ,       // qweight I32 [P, O] (packed along in) + qzeros [G, Z] + scales [G, O] [+ g_idx]
  AwqGemm,    // qweight I32 [I, O/8] (order 0,2,4,6,1,3,5,7) + qzeros [I/g, O/8] + scales [I/g, O]
  GgufBlocks, // ggml block type, rows of ne0 elements
};

// One stored tensor's bytes.
struct Part {
  std::string name;
  DType dtype = DType::Unknown;
  std::vector<uint64_t> shape;
  std::filesystem::path file;
  uint64_t offset = 0;  // absolute file offset
  uint64_t nbytes = 0;
};

// A weight as the model computes with it: `rows` x `cols` values (leading dims folded into rows).
struct Weight {
  std::string name;                // the float weight's name: "<module>.weight", or as stored
  std::vector<uint64_t> shape;     // logical shape, outermost first
  uint64_t rows = 0, cols = 0;
  uint64_t first_row = 0;          // a view of rows [first_row, first_row + rows) of the stored
                                   // tensors (one expert of a stacked [E, O, I] weight)
  Layout layout = Layout::Float;
  std::string encoding;            // "BF16", "MLX affine 4-bit g64", "GPTQ 4-bit g128", "GGUF Q4_K"
  bool dequantized() const { return layout != Layout::Float; }
  // Parameters of the layout.
  int bits = 0;
  uint64_t group = 0;              // elements per scale group along cols (cols for per-channel)
  uint64_t block_rows = 0, block_cols = 0;  // FloatScaled block scales
  bool zeros_minus_one = false;    // GPTQ v1: stored zero points are z-1
  bool dense_bits = true;          // CtPacked: dense bitstream (>=0.17) or per-word (older)
  // Parts: [0] the data, then companions in the layout's order:
  //   MlxAffine: scales, biases   CtPacked/IntScaled: scale, [zero point], [g_idx]
  //   FloatScaled: scale          BnbInt8: SCB   GPTQ: qzeros, scales, [g_idx]   AwqGemm: qzeros, scales
  std::vector<Part> parts;
  bool has_zero = false, has_gidx = false;
};

// The weights of one side, by name; `skipped` are quantized modules recognised but not
// dequantized (name -> why), `notes` say what was not looked at.
struct Weights {
  std::map<std::string, Weight> by_name;
  std::map<std::string, std::string> skipped;
  std::vector<std::string> notes;
};
Weights weights_of(const Checkpoint& ck);

// Decodes rows of one Weight. Not thread-safe; one per job.
class RowReader {
 public:
  virtual ~RowReader() = default;
  // Rows [r0, r0+n) into out[n * cols]. false with `error` (file, offset, what was expected)
  // when the bytes cannot be read or do not decode.
  virtual bool read(uint64_t r0, uint64_t n, float* out, std::string& error) = 0;
};
std::unique_ptr<RowReader> open_reader(const Weight& w, std::string& error);

bool gguf_block_decodable(DType t);  // Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K
bool float_decodable(DType t);       // F32 F64 F16 BF16 F8_E4M3 F8_E5M2

}  // namespace ckpt::diff::dequant
