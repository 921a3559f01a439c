// Quantization schemes: the declaration in config.json, the per-module "is this module
// quantized" predicate each loader applies, and the packed weight + companion tensors
// (with exact header shapes and dtypes) that a quantized module carries on disk.
//
//   auto scheme = quant::parse_scheme(config);             // nullopt: not quantized
//   quant::ModuleQuant mq = scheme->for_module("model.layers.0.mlp.down_proj",
//                                               arch::ModuleKind::Linear, in_features);
//   if (mq.quantized)
//     for (auto& t : quant::quantized_tensors("model.layers.0.mlp.down_proj", {}, out, in, mq))
//       ...;   // e.g. MLX affine 4/64: weight U32 [out, in/8], scales/biases [out, in/64]
//
// Facts: specs/quantization-layouts.md (sections cited per scheme in src/quant/).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/json.h"

namespace ckpt::quant {

enum class Method : uint8_t {
  None,
  MLX,                 // "quantization" without quant_method (mlx-lm / mlx-vlm)
  CompressedTensors,   // quant_method "compressed-tensors" (also legacy "compression_config")
  GPTQ,                // quant_method "gptq" (AutoGPTQ, GPTQModel, AutoRound auto_gptq export)
  AWQ,                 // quant_method "awq"
  AutoRound,           // quant_method "auto-round" (native export: GPTQ tensor layout)
  FP8,                 // quant_method "fp8" (block: weight_block_size; else per-tensor)
  BitsAndBytes,        // quant_method "bitsandbytes" (load_in_8bit / load_in_4bit)
  MXFP4,               // quant_method "mxfp4" (gpt-oss expert blocks)
  Unknown,             // a quant_method ckpt does not model (hqq, torchao, modelopt, ...)
};
std::string_view method_name(Method m);

// The on-disk layout of one quantized module.
enum class Format : uint8_t {
  None,             // plain float weight
  MlxAffine,        // weight U32 [O, I*b/32]; scales, biases [O, I/g] (model dtype)
  MlxMxfp4,         // weight U32 [O, I/8]; scales U8 [O, I/32]
  MlxNvfp4,         // weight U32 [O, I/8]; scales U8 [O, I/16]
  MlxMxfp8,         // weight U32 [O, I/4]; scales U8 [O, I/32]
  CtPacked,         // weight_packed I32 [O, ceil(I*b/32)]; weight_scale; weight_shape I64 [2];
                    //   weight_zero_point I32 [ceil(O*b/32), G] iff asymmetric; weight_g_idx
  CtInt,            // int-quantized / naive int: weight I8 [O, I]; weight_scale; [zero point]
  CtFloat,          // float-quantized: weight F8_E4M3 [O, I]; weight_scale
  CtNvfp4,          // weight_packed U8 [O, I/2]; weight_scale F8_E4M3 [O, I/16]; weight_global_scale F32 [1]
  CtMxfp4,          // weight_packed U8 [O, I/2]; weight_scale U8 [O, I/32]
  GPTQ,             // qweight I32 [I*b/32, O]; qzeros I32 [G, O*b/32]; scales [G, O]; g_idx I32 [I]
  AwqGemm,          // qweight I32 [I, O/8]; qzeros I32 [I/g, O/8]; scales [I/g, O]
  AwqGemv,          // qweight I32 [O, I/8]; qzeros I32 [O, Wz]; scales [O, Wz*8]
  Fp8Block,         // weight F8_E4M3 [O, I]; weight_scale_inv F32 [ceil(O/br), ceil(I/bc)]
  Fp8Tensor,        // weight F8_E4M3 [O, I]; weight_scale F32 []/[1]
  BnbInt8,          // weight I8 [O, I]; SCB F32 [O]; weight_format U8 []
  Bnb4bit,          // weight U8 [ceil(O*I/2), 1]; weight.absmax; weight.quant_map; quant_state
  GptOssMxfp4,      // <m>_blocks U8 [E, O, I/32, 16]; <m>_scales U8 [E, O, I/32]
};
std::string_view format_name(Format f);

// The resolved quantization of one module.
struct ModuleQuant {
  bool quantized = false;
  Format format = Format::None;
  int bits = 0;
  int group_size = 0;          // -1 = per channel (one group over I); 0 = n/a
  bool symmetric = true;       // false => zero points are stored
  bool g_idx = false;          // act-order index stored (GPTQ desc_act, CT actorder)
  int block_rows = 0, block_cols = 0;  // FP8 block / CT block strategy
  std::string strategy;        // compressed-tensors strategy (group, channel, tensor, block, ...)
  std::string reason;          // why (not) quantized: "ignore entry \"lm_head\"", "group_0", ...
  bool operator==(const ModuleQuant&) const = default;  // every field, reason included
};

// What the verifier knows about the module on disk when asking the predicate (mlx-lm decides
// by the presence of "<path>.scales"; generation passes Unknown).
enum class Evidence : uint8_t { Unknown, HasScales, NoScales };

// A Python `re` pattern as a config writes it ("re:.*lm_head$" minus the prefix, a GPTQ
// `dynamic` key, a transformers modules_to_not_convert entry), compiled once into an
// equivalent ECMAScript std::regex (src/quant/pyre.cpp lists what is translated and what
// is not). Invalid: Python's re rejects it (the loader raises re.error). Unsupported: valid
// Python that ckpt cannot express (lookbehind, scoped flags, atomic groups, ...). Neither
// ever matches. Copies share the compiled form.
struct PyRegexImpl;
class PyRegex {
 public:
  enum class Status : uint8_t { Ok, Invalid, Unsupported };
  PyRegex() = default;
  explicit PyRegex(std::string_view pattern);
  const std::string& pattern() const;
  Status status() const;
  bool ok() const { return status() == Status::Ok; }
  const std::string& problem() const;           // why not Ok: "nothing to repeat at position 1"
  const std::string& required_literal() const;  // substring every match contains ("" = unknown)
  const std::string& required_suffix() const;   // text every matched name ends with ("" = unknown)
  bool match(std::string_view text) const;      // re.match: anchored at the start, not the end
  bool search(std::string_view text) const;     // re.search
  // Process-wide counters: std::regex objects built, regex searches run (tests use them to
  // show that resolving modules compiles nothing and that required literals skip the engine).
  static size_t compilations();
  static size_t executions();

 private:
  bool run(std::string_view text, bool anchored) const;
  std::shared_ptr<const PyRegexImpl> impl_;
};

struct ConfigGroup {           // compressed-tensors config_groups entry
  std::string name;
  std::vector<std::string> targets;
  ModuleQuant weights;         // format/bits/group/symmetric as declared
  bool has_input_activations = false;
};

// How the loaders resolve one module. `quant` is what ckpt checks the files against (the
// library that wrote the format: compressed-tensors / llm-compressor, GPTQModel, AutoRound,
// transformers' quantizers, mlx-lm); `other` is set when another loader (vLLM) resolves the
// same module differently (a different group, bits, or quantized vs float): QZ011.
struct Resolution {
  ModuleQuant quant;
  std::string loaders;                // who resolves it as `quant`: "compressed-tensors"
  std::optional<ModuleQuant> other;   // another loader's different resolution
  std::string other_loaders;          // "vLLM"
  bool operator==(const Resolution&) const = default;
};

struct QuantScheme {
  Method method = Method::None;
  std::string source;          // "quantization_config", "quantization", "compression_config",
                               // "text_config.quantization_config"
  std::string raw_method;      // quant_method as written
  ModuleQuant base;            // the default module quantization (bits, group, format, ...)
  std::vector<std::string> problems;  // declaration errors: wrong types, unknown format, a
                                      // pattern Python rejects (the loader raises): QZ001 error
  std::vector<std::string> limits;    // parts of the declaration no loader or ckpt applies
                                      // (a pattern ckpt cannot emulate, an entry AutoRound
                                      // skips): QZ001 warning

  // MLX: per-module overrides ("path": {bits, group_size[, mode]} or false).
  std::vector<std::pair<std::string, std::optional<ModuleQuant>>> mlx_overrides;
  // compressed-tensors
  std::vector<ConfigGroup> groups;
  std::vector<std::string> ignore;
  // GPTQ / AutoRound
  bool lm_head = false;                         // gptq "lm_head": true
  std::vector<std::pair<std::string, std::optional<ModuleQuant>>> dynamic;  // "+:re"/"-:re" (prefix stripped)
  std::vector<std::string> modules_in_block;    // modules_in_block_to_quantize (flattened)
  std::vector<std::pair<std::string, ModuleQuant>> extra_config;  // AutoRound per-layer
  std::vector<std::string> block_names;         // AutoRound block_name_to_quantize (split on ",")
  // AWQ / FP8 / bnb / mxfp4 / AutoRound exclusion lists (modules_to_not_convert,
  // llm_int8_skip_modules, ignored_layers)
  std::vector<std::string> not_convert;

  // The rule fields above with every pattern compiled (once: a 92k-tensor checkpoint asks for
  // every module). parse_scheme() compiles; call compile() again after editing the rules.
  struct Compiled;
  std::shared_ptr<const Compiled> compiled;
  void compile();

  // Whether no name rule above (override keys, targets, ignore/exclusion lists, dynamic
  // patterns, modules_in_block, extra_config keys, block names) holds an ASCII digit. Then no
  // rule can tell one digit from another (a regex without digit literals treats every digit
  // alike), so two modules whose names differ only in their digits resolve alike, except for
  // messages that quote the name. A new name-rule field must be added to this test.
  bool name_rules_digit_free() const;

  // The loader's predicate for one module. `module` is the checkpoint path without the
  // ".weight" suffix; `in_features` lets MLX skip non-divisible layers; `evidence` is what
  // the checkpoint says (MLX quantizes exactly the modules that ship "<path>.scales").
  ModuleQuant for_module(std::string_view module, arch::ModuleKind kind,
                         uint64_t in_features = 0, Evidence evidence = Evidence::Unknown) const;
  // The same, with the other loaders' view where it differs (QZ011).
  Resolution resolve(std::string_view module, arch::ModuleKind kind, uint64_t in_features = 0,
                     Evidence evidence = Evidence::Unknown) const;

 private:
  Resolution resolve_impl(std::string_view module, arch::ModuleKind kind, uint64_t in_features,
                          Evidence evidence, bool with_other) const;
};

// Parse the quantization declaration of config.json (top level, then
// text_config.quantization_config, then compression_config). nullopt when there is none.
std::optional<QuantScheme> parse_scheme(const json::Value& config);

// The tensors one quantized module carries: `lead` are leading dims (stacked experts),
// [out, in] the logical float shape. Names are module + suffix (".weight", ".scales", ...;
// gpt-oss: module + "_blocks"). dtypes use DTypeRole::Model for float scales.
arch::Plan quantized_tensors(std::string_view module, std::span<const uint64_t> lead, uint64_t out, uint64_t in,
                             const ModuleQuant& mq);

// Suffixes a quantized module may carry in any scheme (".scales", ".qweight", ...): used to
// recognise companions of modules on disk.
std::span<const std::string_view> companion_suffixes();

// Diagnosis of a packed last dimension: when stored_cols*32/bits == expected_in for some
// bits in {2,3,4,5,6,8}, returns that bit width (e.g. [10752,320] vs in 2560 -> 4).
std::optional<int> packed_bits_for(uint64_t stored_cols, uint64_t expected_in,
                                   uint32_t word_bits = 32);

}  // namespace ckpt::quant
