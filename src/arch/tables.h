// Private: the shape of one architecture table (src/arch/tables.cpp holds the data).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/arch.h"

namespace ckpt::arch::detail {

// Where a rule's name is rooted.
enum class Scope : uint8_t {
  Global,    // view.prefix + name                         ("model." + "norm.weight")
  Head,      // the output head (view.head); presence follows tie_word_embeddings
  Layer,     // view.prefix + "layers.{i}." + name, for every decoder layer (and MTP layers
             // when the table says its MTP layers are decoder layers)
  Expert,    // like Layer, for every routed expert e ({e} in the name)
  Index,     // view.prefix + name with {j} for j < count
  MtpGlobal, // mtp_root + name (once)
  MtpLayer,  // mtp layer base + name, for every MTP layer
  Tower,     // vision tower prefix + name
  TowerLayer,// vision tower layer base + name, for every vision layer
  Projector, // projector prefix + name
};

struct Rule {
  Scope scope;
  const char* name;
  const char* shape;   // comma-separated formulas
  const char* when;    // condition formula, nullptr = always
  ModuleKind kind;
  DTypeRole dtype = DTypeRole::Model;
  const char* count = nullptr;   // Index scope: number of items
  bool kv_group = false;         // member of the per-layer kv-shared all-or-nothing group
};

// Field spec: "var=key1|key2?default!" — keys are aliases looked up in the text config;
// `?expr` gives the default (absent => required); a trailing '~' marks a default whose
// absence is only worth info, '!' a bool field. Parsed once at start-up.
struct Field {
  const char* spec;
};

enum class MoeRule : uint8_t { None, All, SparseStep, FirstKDense, EnableBlock };
enum class MtpKind : uint8_t { None, DecoderLayers, MimoLayers, RootMtp };

struct Table {
  std::string_view model_type;
  std::vector<std::string_view> aliases;
  std::string_view summary;
  std::vector<Field> fields;
  std::vector<Rule> rules;
  MoeRule moe = MoeRule::None;
  MtpKind mtp = MtpKind::None;
  const char* mtp_count = nullptr;        // formula
  bool linear_attention = false;          // qwen3_next / qwen3_5 layer types
  bool kv_shared = false;                 // gemma3n / gemma4
  bool nested_text = false;               // wrapper: text fields under text_config
  const char* text_model_type = nullptr;  // defaults table for nested text
  bool siglip_tower = false;              // gemma3 SigLIP vision tower modelled
  bool qwen_vision_tower = false;         // qwen3_5 model.visual.* tower modelled
  // loaders
  bool tie_default_t = false;             // transformers default when the key is absent
  int tie_default_m = -1;                 // mlx-lm default (-1: follows the files / not built)
  bool tie_forced = false;                // always tied (gemma, gemma2: no lm_head module)
  bool mlx_drops_inv_freq = false;
  bool mlx_pops_tied_head = true;
  std::vector<std::string_view> prefixes;       // candidate text prefixes, first = default
  std::vector<std::string_view> tower_prefixes; // recognised, unmodelled towers
};

const std::vector<const Table*>& tables();
const Table* find_table(std::string_view model_type);

}  // namespace ckpt::arch::detail
