// `ckpt fixture`: tiny synthetic checkpoints with the config fields and weight keys of a real
// architecture (from the arch registry: the spec that verifies is the spec that generates),
// seeded random weights, optional real quantization, a byte-level BPE tokenizer, and an
// optional catalogue of planted defects.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/safetensors.h"

namespace ckpt::fixture {

// Quantization schemes the generator really packs.
struct SchemeInfo {
  std::string_view name;     // --quant value
  std::string_view summary;
};
std::vector<SchemeInfo> schemes();

struct DefectInfo {
  std::string_view name;      // --defect value
  std::string_view incident;  // what real failure it reproduces
  std::string_view code;      // the finding code `ckpt verify` must report
  std::string_view detecting_family;  // "FS", "ST", ... (for pending tables in tests)
  bool needs_quant = false;   // only meaningful on a quantized fixture
  bool needs_shards = false;  // only meaningful with an index (forces --shards 2)
  std::string_view needs;     // other precondition ("moe", "kv_shared", "packed_float", ...)
};
const std::vector<DefectInfo>& defects();
// The pickle-checkpoint defects (--format pytorch), listed apart so the safetensors catalogue
// and its recorded findings stay as they are.
const std::vector<DefectInfo>& pytorch_defects();
const DefectInfo* find_defect(std::string_view name);

struct ArchInfo {
  std::string model_type;
  std::string summary;
};
// Every architecture of the registry that the generator can build a config for.
std::vector<ArchInfo> architectures();

struct Options {
  std::string arch;                    // model_type from the registry
  std::filesystem::path out;           // output dir (or the HF cache root with hf_repo)
  std::string quant;                   // "" (float) or a scheme name
  std::vector<std::string> defects;
  uint64_t seed = 0;
  std::optional<int64_t> layers, hidden, experts;
  uint32_t shards = 1;
  st::DType dtype = st::DType::F16;
  std::string hf_repo;                 // "org/name": write a Hugging Face cache layout under `out`
  bool unigram = false;                // Unigram tokenizer variant
  Format format = Format::safetensors; // weights as safetensors, or as torch.save zip checkpoints (.bin)
  bool pytorch_legacy = false;         // with Format::pytorch: the legacy stream (_use_new_zipfile_serialization=False)
};

struct Result {
  std::string error;                   // empty on success
  std::filesystem::path model_dir;     // the directory ckpt verify should be pointed at
  std::vector<std::string> files;      // relative paths written (sorted)
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

// The marker file that identifies a directory as a previous fixture (safe to overwrite).
inline constexpr std::string_view kMarkerFile = ".ckpt-fixture";

Result make_fixture(const Options& opts);

// Helpers shared with tests.
// ---- GGUF fixtures (`ckpt fixture ARCH OUT --format gguf`) ---------------------
// A tiny GGUF in llama.cpp's layout: the real {arch}.* hparam keys, tensor names and shapes
// (src/arch/gguf_tensors.cpp, the table conformance checks against), a tokenizer in the
// metadata (SPM for llama/gemma/phi3/deepseek2, byte-level BPE with merges otherwise) and a
// chat template, seeded weights in the chosen ggml type (rows that do not fit the block fall
// back to f16, as llama-quantize does; norms are f32).
struct GgufOptions {
  std::string arch;                  // a modelled GGUF architecture (gguf_arch::modelled_architectures)
  std::filesystem::path out;         // output directory
  std::string quant = "f16";         // f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k
  std::vector<std::string> defects;  // gguf_defects() names
  uint64_t seed = 0;
  std::optional<int64_t> layers, hidden, experts;
  uint32_t splits = 1;               // >1 writes PREFIX-0000k-of-0000n.gguf
};
const std::vector<DefectInfo>& gguf_defects();
std::vector<std::string_view> gguf_quants();
Result make_gguf_fixture(const GgufOptions& opts);

uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
uint8_t float_to_e4m3(float f);
float e4m3_to_float(uint8_t v);

}  // namespace ckpt::fixture
