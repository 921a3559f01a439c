// Architecture registry: config.json -> the tensors a loader will ask for.
//
// One data-driven table per model_type (src/arch/tables.cpp) gives the global, per-layer,
// per-expert and MTP tensors of an architecture with shape formulas over config fields.
// The same table drives the AR/QZ check families (what must be on disk) and `ckpt fixture`
// (what to write): the spec that verifies is the spec that generates.
//
// Typical use (verification or generation):
//
//   const json::Value& cfg = ckpt.config.value;
//   arch::ConfigView view = arch::resolve_config(cfg, [&](std::string_view n) {
//       return ckpt.weight(n) != nullptr; });           // probe picks the key layout; may be {}
//   if (!view.arch) { /* unknown model_type: structural checks only */ }
//   auto scheme = quant::parse_scheme(cfg);            // nullopt when not quantized
//   arch::Plan plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
//
// A generator writes every tensor of `plan` whose presence is Required, and chooses for each
// optional group (see Presence) whether to write all of its members or none.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckpt/json.h"
#include "ckpt/tensor.h"
#include "ckpt/safetensors.h"

namespace ckpt::quant {
struct QuantScheme;  // include/ckpt/quant.h
}

namespace ckpt::arch {

// ---- tensors ---------------------------------------------------------------------------

// What stores a tensor's dtype. `Model` is the checkpoint's float dtype (config `torch_dtype`
// or `dtype`, BF16 when absent); the others are fixed safetensors dtypes.
enum class DTypeRole : uint8_t {
  Model,    // BF16/F16/F32 as the config says; loaders cast, so any float is accepted
  F32,      // always float32 (e.g. DeepSeek e_score_correction_bias, inv_freq)
  U8,       // packed bytes (MXFP4 blocks, E8M0 scales, bnb 4-bit, weight_format)
  I8,       // int8 weights (bnb int8, compressed-tensors int-quantized)
  I32,      // packed int32 words (GPTQ, AWQ, compressed-tensors pack-quantized)
  U32,      // packed uint32 words (MLX)
  I64,      // compressed-tensors weight_shape
  F8_E4M3,  // FP8 weights / NVFP4 scales
};
st::DType resolve_dtype(DTypeRole role, st::DType model_dtype);
std::string_view dtype_role_name(DTypeRole role);

// What kind of module owns the tensor; quantization applies only to Linear and Embedding
// weights (and to the companions they grow).
enum class ModuleKind : uint8_t {
  Linear,      // nn.Linear weight [out, in] (or stacked experts [E, out, in])
  Embedding,   // nn.Embedding weight [rows, dim]
  ScaledLinear,// a Linear-shaped raw parameter the loaders never quantize (gemma3n/gemma4
               // per_layer_model_projection): packed weights for it are a defect
  Norm,        // norm weights/biases (1-D)
  Bias,        // a Linear's .bias
  Param,       // other raw parameters (sinks, A_log, dt_bias, conv1d, router scales, ...)
  Buffer,      // persistent buffers (e_score_correction_bias)
  Quant,       // a quantization companion or packed weight (from quant::quantized_tensors)
};

// Whether a tensor must be present.
enum class Presence : uint8_t {
  Required,
  Optional,   // may be absent: the tied lm_head some checkpoints still ship, MTP layers
  Group,      // member of `group`: all members present, or all absent (kv-shared k/v/k_norm)
};

struct ExpectedTensor {
  // Full checkpoint key, prefix included. Its bytes belong to the Plan the entry came from (a
  // plan of 90k tensors allocated a name each): an entry must not outlive its plan.
  std::string_view name;
  Shape shape;                   // header shape (two dimensions inline: no allocation per tensor)
  DTypeRole dtype = DTypeRole::Model;
  ModuleKind kind = ModuleKind::Param;
  Presence presence = Presence::Required;
  uint32_t group = 0;            // Presence::Group id (unique per expected_tensors() call)
  int32_t layer = -1;            // decoder layer index (MTP layers are >= num_hidden_layers)
  int32_t expert = -1;           // routed expert index for per-expert tensors
  bool mtp = false;              // multi-token-prediction tensor (loaders drop these)
  bool tower = false;            // vision/audio tower tensor (text-only loaders drop these)
  std::string_view why;          // short note on a condition, for messages ("tied", "kv-shared")

  // The module path of a weight: name without the trailing ".weight" (or the name itself).
  std::string_view module() const;
  // Logical [out, in] of a Linear/Embedding weight (last two dims); {0,0} otherwise.
  std::pair<uint64_t, uint64_t> out_in() const;
};

// Expected tensors in order, with the storage of their names. Moving a plan keeps every name
// valid (the bytes stay where they are); so does adding entries. Not copyable: a copy's
// entries would view the original's names.
class Plan {
 public:
  using value_type = ExpectedTensor;
  using iterator = std::vector<ExpectedTensor>::iterator;
  using const_iterator = std::vector<ExpectedTensor>::const_iterator;

  Plan() = default;
  Plan(Plan&&) noexcept = default;
  Plan& operator=(Plan&&) noexcept = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  // A copy of `s` in this plan's storage, for an entry's name.
  std::string_view intern(std::string_view s) {
    if (s.size() > left_) {
      const size_t n = std::max<size_t>(s.size(), kChunk);
      chunks_.emplace_back(new char[n]);  // not zeroed: every byte is written before it is read
      next_ = chunks_.back().get();
      left_ = n;
    }
    char* at = next_;
    if (!s.empty()) std::memcpy(at, s.data(), s.size());
    next_ += s.size();
    left_ -= s.size();
    return {at, s.size()};
  }
  // A new last entry named `name` (interned).
  ExpectedTensor& add(std::string_view name) {
    ExpectedTensor& x = entries_.emplace_back();
    x.name = intern(name);
    return x;
  }

  std::vector<ExpectedTensor>& entries() { return entries_; }
  const std::vector<ExpectedTensor>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void reserve(size_t n) { entries_.reserve(n); }
  ExpectedTensor& operator[](size_t i) { return entries_[i]; }
  const ExpectedTensor& operator[](size_t i) const { return entries_[i]; }
  ExpectedTensor& back() { return entries_.back(); }
  const ExpectedTensor& back() const { return entries_.back(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

 private:
  static constexpr size_t kChunk = 64u << 10;
  std::vector<ExpectedTensor> entries_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* next_ = nullptr;
  size_t left_ = 0;
};

// ---- config view -----------------------------------------------------------------------

// A problem or note found while resolving config.json (the CF family reports these).
struct ConfigIssue {
  enum Kind : uint8_t {
    MissingRequired,   // a field with no default is absent (error)
    WrongType,         // a field has the wrong JSON type or an impossible value (error)
    Defaulted,         // a field a loader fills in was absent (info)
    LoadersDisagree,   // absent field whose default differs between loaders (warning)
    Inconsistent,      // fields contradict each other (error or warning, see `error`)
    Note,              // informational
  };
  Kind kind;
  std::string field;      // dotted path, e.g. "text_config.num_attention_heads"
  std::string message;    // expected vs actual
  std::string hint;
  bool error = false;     // for Inconsistent: error (true) or warning (false)
  // For Defaulted: the shape variable the field sets ("H") and the default applied.
  std::string var;
  int64_t value = 0;
};

// The routed-expert count, found breadth-first through nested configs.
struct ExpertCount {
  int64_t count = 0;            // 0 when the model is dense / no count found
  std::string field;            // where it was found ("text_config.num_experts"), empty if none
  bool explicit_dense = false;  // an explicit 1 was found (beats heuristics and nested counts)
  int64_t active = 0;           // num_experts_per_tok / top_k_experts / experts_per_token
};

struct ArchSpec;

// One resolved text configuration. Field values live in `dims`: every variable the shape
// formulas use, after nesting, aliases and defaults (see docs/architectures.md).
struct ConfigView {
  const json::Value* root = nullptr;   // the whole config.json (not owned)
  const json::Value* text = nullptr;   // the object holding the text fields (== root if flat)
  std::string text_path;               // "" | "text_config" | "language_config" | "thinker_config"
  std::string model_type;              // top-level model_type ("" when missing)
  std::string text_model_type;         // model_type of the text config (may equal model_type)
  const ArchSpec* arch = nullptr;      // nullptr: unknown model_type

  std::string prefix;                  // text weights prefix: "model." | "language_model.model."
                                       // | "model.language_model."
  std::string head;                    // output head key: "lm_head.weight" or
                                       // "language_model.lm_head.weight"
  std::vector<std::string> tower_prefixes;  // vision/audio/MTP key prefixes of this layout

  std::vector<std::pair<std::string, int64_t>> dims;  // resolved variables (H, L, nh, ...)
  std::vector<int64_t> layer_intermediate;            // per-layer I when the config gives a list
  std::vector<std::string> layer_types;               // per-layer attention type when given
  std::vector<int64_t> mlp_only_layers;
  st::DType model_dtype = st::DType::BF16;
  bool tied = false;                   // tie_word_embeddings as the loaders resolve it
  bool tie_explicit = false;           // the key is present in the config
  ExpertCount experts;
  std::vector<ConfigIssue> issues;

  std::optional<int64_t> dim(std::string_view name) const;
  int64_t dim_or(std::string_view name, int64_t fallback) const;
};

// Does the checkpoint hold a tensor of this name? Used to pick a key layout (e.g. gemma3
// legacy `language_model.model.` vs `model.language_model.`). May be empty.
using NameProbe = std::function<bool(std::string_view)>;

// Resolve config.json: nested text configs (decoys skipped), defaults, prefix and dims.
// Never throws; problems go to `issues`. An unknown model_type leaves `arch` null.
ConfigView resolve_config(const json::Value& config, const NameProbe& has_tensor = {});

// The routed-expert count by the SwiftLM rules (incidents.md §1.6): spellings
// num_local_experts / num_experts / n_routed_experts, breadth-first over text_config,
// language_config, thinker_config, talker_config, ...; audio_config/vision_config skipped;
// the outermost count wins; 0 is a placeholder; an explicit 1 means dense.
ExpertCount find_expert_count(const json::Value& config);
// model_type implies MoE (lower-case, '-'→'_', contains moe/mixtral/dbrx/grok).
bool model_type_implies_moe(std::string_view model_type);

// ---- registry --------------------------------------------------------------------------

struct ArchSpec {
  std::string_view model_type;            // canonical name ("llama")
  std::span<const std::string_view> aliases;  // other model_types using this table
  std::string_view summary;               // one line for `ckpt fixture --list`
  bool strict_loader_drops_inv_freq = false;  // mlx-lm sanitize drops rotary_emb.inv_freq
  bool strict_loader_pops_tied_head = true;   // mlx-lm sanitize pops a tied lm_head
  bool moe = false;
  const void* impl = nullptr;             // the table (src/arch/tables.cpp)
};

const ArchSpec* find_arch(std::string_view model_type);
std::span<const ArchSpec* const> all_archs();

struct ExpectOptions {
  bool include_mtp = true;      // MTP layers (Presence::Optional, mtp=true)
  bool include_towers = true;   // modelled vision towers (tower=true), e.g. gemma3 SigLIP
};

// Every tensor the config implies, in a stable order (globals, then layer by layer).
// With a quantization scheme, each module the scheme quantizes is replaced by its packed
// weight and companions (quant::quantized_tensors); without one, all weights are float.
// Empty when view.arch is null.
Plan expected_tensors(const ConfigView& view, const quant::QuantScheme* scheme = nullptr,
                      const ExpectOptions& opts = {});

// Tensors loaders drop when present (non-persistent buffers such as rotary_emb.inv_freq,
// cos_cached, sin_cached). Returns a reason, or empty.
std::string_view dropped_by_loaders(std::string_view name);

// ---- shape formulas --------------------------------------------------------------------

// A tiny integer expression language used by the tables ("nh*hd", "2*I", "(i+1)%4 != 0"):
// integers, variables, + - * / (floor) %, comparisons, && || !, parentheses. Exposed so a
// generator can evaluate the same formulas on custom dims.
struct Expr;
std::shared_ptr<const Expr> compile_expr(std::string_view text, std::string* error = nullptr);
using VarLookup = std::function<std::optional<int64_t>(std::string_view)>;
std::optional<int64_t> eval_expr(const Expr& e, const VarLookup& vars);

}  // namespace ckpt::arch
