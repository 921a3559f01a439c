// Config <-> tensor conformance: the tensors config.json implies (arch tables) and the
// packed geometry the declared quantization implies (quant schemes), against the headers.
#include "arch/conformance.h"

#include <algorithm>
#include <bit>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "arch/layer_replay.h"
#include "ckpt/name_index.h"
#include "ckpt/quant.h"

namespace ckpt::arch {

namespace {

using quant::Format;
using quant::ModuleQuant;

// Asked of every tensor name several times (suffix tables): the last byte turns most away
// before a compare.
inline bool ends_with(std::string_view s, std::string_view suf) {
  if (s.size() < suf.size()) return false;
  if (suf.empty()) return true;
  const char* tail = s.data() + (s.size() - suf.size());
  return tail[suf.size() - 1] == suf.back() && std::memcmp(tail, suf.data(), suf.size() - 1) == 0;
}
bool starts_with(std::string_view s, std::string_view pre) { return s.substr(0, pre.size()) == pre; }

std::string shape_str(std::span<const uint64_t> s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}
std::string shape_str(const std::vector<uint64_t>& s) { return shape_str(std::span<const uint64_t>(s)); }
std::string shape_str(const Shape& s) { return shape_str(std::span<const uint64_t>(s)); }
bool same_shape(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  // A loop, not std::equal's memcmp call: shapes are one to four dims.
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k] != b[k]) return false;
  return true;
}

bool is_float(st::DType d) {
  return d == st::DType::F16 || d == st::DType::BF16 || d == st::DType::F32 || d == st::DType::F64;
}
bool is_int(st::DType d) {
  return d == st::DType::U8 || d == st::DType::I8 || d == st::DType::I16 || d == st::DType::U16 ||
         d == st::DType::I32 || d == st::DType::U32 || d == st::DType::I64 || d == st::DType::U64;
}

// Generic tower / side-model prefixes recognised for every architecture.
constexpr std::string_view kTowerPrefixes[] = {
    "vision_tower.", "model.vision_tower.", "multi_modal_projector.", "model.multi_modal_projector.",
    "model.visual.", "visual.", "vision_model.", "model.vision_model.", "audio_tower.",
    "model.audio_tower.", "model.embed_vision.", "model.embed_audio.", "embed_vision.",
    "embed_audio.", "mtp.", "audio_model.", "vision_embed_tokens.", "model.mm_projector.",
    "mm_projector.", "model.vision_embed_tokens."};

// Final name segments that mark a quantization companion (module = name minus segment).
struct Companion {
  std::string_view suffix;
};
constexpr std::string_view kCompanionSuffixes[] = {
    ".scales", ".biases", ".weight_packed", ".weight_scale", ".weight_shape", ".weight_zero_point",
    ".weight_g_idx", ".weight_global_scale", ".qweight", ".qzeros", ".g_idx", ".weight_scale_inv",
    ".SCB", ".weight_format", ".weight.absmax", ".weight.quant_map", ".weight.nested_absmax",
    ".weight.nested_quant_map", ".weight.quant_state.bitsandbytes__nf4",
    ".weight.quant_state.bitsandbytes__fp4", ".weight_scale_2", "_blocks", "_scales"};
// Activation-side scales that may accompany any quantized module.
constexpr std::string_view kActivationSuffixes[] = {".input_scale", ".input_zero_point",
                                                    ".input_global_scale", ".output_scale",
                                                    ".k_scale", ".v_scale"};

// name contains ".switch_mlp." (MLX's stacked experts). Asked of every tensor: Horspool's
// search skips up to the needle's length per step, where string_view::find stops at every '.'
// of the name and memmem sets up a general search per call.
bool has_switch_mlp(std::string_view name) {
  static constexpr std::string_view needle = ".switch_mlp.";
  static const std::boyer_moore_horspool_searcher search(needle.begin(), needle.end());
  return std::search(name.begin(), name.end(), search) != name.end();
}

// For each last byte, the companion suffixes ending in it (bit k: kCompanionSuffixes[k]).
static_assert(std::size(kCompanionSuffixes) <= 32);
constexpr std::array<uint32_t, 256> kCompanionsByLastByte = [] {
  std::array<uint32_t, 256> t{};
  for (size_t k = 0; k < std::size(kCompanionSuffixes); ++k)
    t[static_cast<unsigned char>(kCompanionSuffixes[k].back())] |= uint32_t{1} << k;
  return t;
}();

std::optional<std::string_view> companion_module(std::string_view name) {
  if (name.empty() || ends_with(name, ".weight")) return std::nullopt;  // the common case: no suffix ends so
  // Only the suffixes ending in the name's last byte can match: tried in the list's order.
  for (uint32_t m = kCompanionsByLastByte[static_cast<unsigned char>(name.back())]; m; m &= m - 1) {
    const std::string_view s = kCompanionSuffixes[std::countr_zero(m)];
    if (ends_with(name, s)) return name.substr(0, name.size() - s.size());
  }
  return std::nullopt;
}

// Names (views that outlive it) -> dense ids, on ckpt's flat name index: the conformance pass
// looks up several names per expected tensor, so std::hash over every byte and a node per
// entry are most of its cost on a 100k-tensor checkpoint. Keeps the first id of a name.
class ViewIds {
 public:
  static constexpr uint32_t npos = NameIndex::npos;
  void reset(size_t n) {
    index_.reset(n);
    keys_.clear();
    keys_.reserve(n);
  }
  // The id of `name`, adding it when absent (the index grows past the n of reset()).
  uint32_t insert(std::string_view name, uint64_t hash) {
    if (index_.empty() || !NameIndex::fits(keys_.size() + 1, index_.capacity())) grow();
    const auto id = static_cast<uint32_t>(keys_.size());
    const uint32_t got = index_.insert(name, hash, id, key_at());
    if (got == id) keys_.push_back(name);
    return got;
  }
  uint32_t find(std::string_view name) const { return find(name, hash_name(name)); }
  uint32_t find(std::string_view name, uint64_t hash) const { return index_.find(name, hash, key_at()); }
  bool contains(std::string_view name) const { return find(name) != npos; }
  size_t size() const { return keys_.size(); }
  void prefetch_slot(uint64_t hash) const { index_.prefetch(hash); }  // see TensorIds

 private:
  struct KeyAt {
    const std::vector<std::string_view>* keys;
    std::string_view operator()(uint32_t id) const { return (*keys)[id]; }
  };
  KeyAt key_at() const { return KeyAt{&keys_}; }
  void grow() {
    index_.reset(2 * keys_.size() + 16);
    for (uint32_t id = 0; id < keys_.size(); ++id) index_.insert(keys_[id], hash_name(keys_[id]), id, key_at());
  }
  NameIndex index_;
  std::vector<std::string_view> keys_;
};

// Tensor names -> their index in the conformance input (the first of duplicates), on the flat
// name index with the tensors themselves as its keys: no copy of the names' views and no
// second id table (20 MB fewer fresh pages at a million tensors), and the entry a lookup lands
// on is the tensor the caller reads next.
class TensorIds {
 public:
  static constexpr uint32_t npos = NameIndex::npos;
  void build(const std::vector<ActualTensor>& tensors) {
    tensors_ = &tensors;
    index_.reset(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      // The slot an insert a few names ahead will probe (the hashes were computed at load).
      if (i + NameIndex::kPrefetchAhead < tensors.size())
        if (const uint64_t h = tensors[i + NameIndex::kPrefetchAhead].hash) index_.prefetch(h);
      const ActualTensor& t = tensors[i];
      if (index_.insert(t.name, t.hash ? t.hash : hash_name(t.name), static_cast<uint32_t>(i), key_at()) != i)
        unique_ = false;
    }
  }
  // No name is held by two tensors: a tensor found by its name some other way is what find()
  // returns for it.
  bool unique() const { return unique_; }
  uint32_t find(std::string_view name) const { return find(name, hash_name(name)); }
  uint32_t find(std::string_view name, uint64_t hash) const { return index_.find(name, hash, key_at()); }
  bool contains(std::string_view name) const { return find(name) != npos; }
  // A lookup of a million names is a chain of cache misses: slot, tensor, name bytes. A loop
  // that knows its names ahead issues the three steps at three distances (the slot first,
  // then, once it is cached, the tensor its tag points at, then the name's bytes), so each
  // lookup finds them cached.
  void prefetch_slot(uint64_t hash) const { index_.prefetch(hash); }
  void prefetch_tensor(uint64_t hash) const {
    const uint32_t t = index_.first_candidate(hash);
    if (t != npos && t < tensors_->size()) __builtin_prefetch(&(*tensors_)[t]);
  }
  void prefetch_bytes(uint64_t hash) const {
    const uint32_t t = index_.first_candidate(hash);
    if (t != npos && t < tensors_->size()) __builtin_prefetch((*tensors_)[t].name.data());
  }

 private:
  struct KeyAt {
    const std::vector<ActualTensor>* tensors;
    std::string_view operator()(uint32_t t) const { return (*tensors)[t].name; }
  };
  KeyAt key_at() const { return KeyAt{tensors_}; }
  NameIndex index_;
  const std::vector<ActualTensor>* tensors_ = nullptr;
  bool unique_ = true;
};

std::atomic<bool> layer_replay_on{true};
std::atomic<uint64_t> layer_replay_count{0};
std::atomic<uint64_t> layer_replay_position_hit_count{0};

struct Engine {
  const ConformanceInput& in;
  unsigned fam;
  FindingSink& sink;

  ConfigView view;
  std::optional<int64_t> expert_dim;  // view.dim("E"), asked twice per quantized module
  std::optional<quant::QuantScheme> scheme;
  TensorIds by_name;  // tensor names -> index into in.tensors (the first of duplicates)
  std::vector<uint8_t> consumed;
  ViewIds companions;  // modules that have quantization companions on disk
  std::vector<uint32_t> companion_tensor;  // per companions id: the first such companion tensor
  bool any_expert_layout = false;  // MLX switch_mlp or transformers-v5 fused experts on disk

  std::map<std::string, size_t> capped;  // code -> emitted count
  std::map<std::string, size_t> overflow;

  // Findings and fused-shard notes of one trial resolution of a module, while the loaders'
  // resolutions of it are compared against the files (check_module).
  struct ModuleState {
    bool quantized = false;
    int bits = 0, group = 0;
    Format format = Format::None;
  };
  struct Pending {
    const char* code;
    Severity sev;
    std::string msg, file, tensor, hint;
  };
  struct Capture {
    std::vector<Pending> findings;
    std::vector<std::tuple<std::string, ModuleState, std::string>> fused;
    bool error = false;
  };
  Capture* capture = nullptr;
  std::vector<const ActualTensor*> present;  // check_quantized: the tensor of each part
  std::array<std::string, 3> part_suffixes;  // the last quantized module's companion suffixes
  size_t part_suffix_count = 0;
  std::array<bool, std::size(kActivationSuffixes)> activation_suffix_stored{};
  std::string prefetch_name;                 // scratch for the prefetch of module + suffix
  std::string scratch;                       // a name being built for one lookup

  Engine(const ConformanceInput& i, unsigned f, FindingSink& s) : in(i), fam(f), sink(s) {}

  void emit(const char* code, Severity sev, std::string msg, std::string file, std::string_view tensor,
            std::string hint) {
    ++emit_calls;  // a layer that emits anything, shown or not, represents no other (layer replay)
    unsigned need = code[0] == 'C' ? kCF : code[0] == 'A' ? kAR : kQZ;
    if (!(fam & need)) return;
    if (capture) {  // a trial resolution (check_module): kept aside until one is chosen
      capture->error = capture->error || sev == Severity::error;
      capture->findings.push_back({code, sev, std::move(msg), std::move(file), std::string(tensor), std::move(hint)});
      return;
    }
    size_t& n = capped[code];
    if (n >= 25 && sev != Severity::error) {
      ++overflow[code];
      return;
    }
    if (n >= 50) {
      ++overflow[code];
      return;
    }
    ++n;
    sink.add(code, sev, std::move(msg), std::move(file), tensor, std::move(hint));
  }

  // Whether `module` has quantization companions on disk; the answer for the module being
  // checked is kept (check_module, check_module_as and check_quantized each ask). Callers pass
  // views of plan entries' names, which neither move nor change while the pass runs, so the
  // same address and length is the same module.
  std::string_view comp_module;
  bool comp_answer = false;
  bool has_companions(std::string_view module) {
    if (module.data() != comp_module.data() || module.size() != comp_module.size()) {
      comp_module = module;
      comp_answer = companion_lookup(module);
    }
    return comp_answer;
  }

  // ---- layer replay (arch/layer_replay.h) ------------------------------------------------
  struct Recorder {
    std::string base;                       // "<prefix>layers.<i>." of the layer being recorded
    std::vector<replay::Lookup> lookups;    // each distinct lookup, in first-asked order
    std::unordered_set<std::string> seen;   // 't' or 'c' + the name after the base
    bool valid = true;
  };
  static constexpr size_t kMaxRepresentatives = 16;  // layouts per checkpoint (a few in practice)
  Recorder* recorder = nullptr;
  std::vector<replay::Representative> representatives;
  size_t emit_calls = 0;
  bool unmemoized_used = false;  // a module resolved outside the memo (resolve_module)
  std::string replay_names;  // a replayed layer's lookups, written out one after another
  std::vector<size_t> replay_ends;
  std::vector<uint64_t> replay_hashes;
  std::vector<uint32_t> replay_marks;

  void record(bool companion, std::string_view name, uint32_t tensor, bool found) {
    Recorder& r = *recorder;
    if (!name.starts_with(r.base)) {  // a lookup outside the layer: its verdict is not the layer's own
      r.valid = false;
      return;
    }
    std::string key(1, companion ? 'c' : 't');
    key.append(name.substr(r.base.size()));
    if (!r.seen.insert(std::move(key)).second) return;
    if (!companion && tensor != kNone && consumed[tensor]) r.valid = false;  // consumed before the layer
    r.lookups.push_back({companion, std::string(name.substr(r.base.size())), tensor, found, false});
  }

  void prefetch_slot(bool companion, uint64_t hash) const {
    if (companion) companions.prefetch_slot(hash);
    else by_name.prefetch_slot(hash);
  }
  // Judge `run` as its representative was judged, when every recorded lookup finds the same
  // (presence, dtype, shape) under this layer's base; false, with nothing changed, otherwise.
  bool replay_run(const replay::Representative& rep, std::string_view base) {
    // The layer's names are known before the first lookup, so they are written out first.
    // Shards list the layers of a model alike, so this layer's tensors usually sit where the
    // representative's did, shifted by one distance: a tensor lookup tries that position first
    // (no hashing, and a walk through memory the hardware prefetches) and takes it when the
    // tensor there has the name; names being unique, it is what the index would find. Other
    // lookups (companions, a position that does not hold the name) go through the indexes,
    // their cache misses issued ahead in stages as the full checks' loop does (TensorIds).
    const size_t n = rep.lookups.size();
    replay_names.clear();
    replay_ends.clear();
    for (const auto& lk : rep.lookups) {
      replay_names += base;
      replay_names += lk.rest;
      replay_ends.push_back(replay_names.size());
    }
    auto name_at = [&](size_t k) {
      const size_t b = k ? replay_ends[k - 1] : 0;
      return std::string_view(replay_names).substr(b, replay_ends[k] - b);
    };
    const bool guess = by_name.unique();
    const int64_t count = static_cast<int64_t>(in.tensors.size());
    int64_t shift = 0;  // this layer's tensor index minus the representative's
    bool shifted = false;
    // Hashes only for the lookups that may need an index: those the representative found
    // nothing for (or every one, when names repeat). A companion lookup the representative
    // answered with a companion tensor tries that tensor's position too.
    replay_hashes.assign(n, 0);
    for (size_t k = 0; k < n; ++k)
      if (rep.lookups[k].tensor == kNone || !guess) replay_hashes[k] = hash_name(name_at(k));
    constexpr size_t kAhead = NameIndex::kPrefetchAhead / 2;
    auto guessed = [&](size_t j) -> const ActualTensor* {
      const auto& lk = rep.lookups[j];
      if (!shifted || lk.tensor == kNone) return nullptr;
      const int64_t g = static_cast<int64_t>(lk.tensor) + shift;
      return g >= 0 && g < count ? &in.tensors[static_cast<size_t>(g)] : nullptr;
    };
    auto prefetch = [&](size_t k) {
      if (const size_t j = k + 3 * kAhead; j < n && replay_hashes[j])
        prefetch_slot(rep.lookups[j].companion, replay_hashes[j]);
      if (const size_t j = k + 2 * kAhead; j < n) {
        if (const ActualTensor* g = guessed(j)) __builtin_prefetch(g);
        else if (!rep.lookups[j].companion && replay_hashes[j]) by_name.prefetch_tensor(replay_hashes[j]);
      }
      if (const size_t j = k + kAhead; j < n) {
        if (const ActualTensor* g = guessed(j)) __builtin_prefetch(g->name.data());
        else if (!rep.lookups[j].companion && replay_hashes[j]) by_name.prefetch_bytes(replay_hashes[j]);
      }
    };
    for (size_t k = 0; k < std::min(n, 3 * kAhead); ++k)
      if (replay_hashes[k]) prefetch_slot(rep.lookups[k].companion, replay_hashes[k]);
    replay_marks.clear();
    uint64_t position_hits = 0;
    for (size_t k = 0; k < n; ++k) {
      prefetch(k);
      const auto& lk = rep.lookups[k];
      const std::string_view name = name_at(k);
      if (lk.companion) {
        // The guessed tensor, when it is a companion of this module, settles it (found).
        if (const ActualTensor* g = guessed(k); g && companion_module(g->name) == name) {
          ++position_hits;
          continue;
        }
        const uint64_t h = replay_hashes[k] ? replay_hashes[k] : hash_name(name);
        if ((companions.find(name, h) != ViewIds::npos) != lk.found) return false;
        continue;
      }
      uint32_t t = kNone;
      if (const ActualTensor* g = guessed(k); g && g->name == name) {
        t = static_cast<uint32_t>(g - in.tensors.data());
        ++position_hits;
      }
      if (t == kNone) {
        const uint64_t h = replay_hashes[k] ? replay_hashes[k] : hash_name(name);
        t = by_name.find(name, h);  // npos == kNone
        if (t != kNone && lk.tensor != kNone && guess) {
          shift = static_cast<int64_t>(t) - static_cast<int64_t>(lk.tensor);
          shifted = true;
        }
      }
      if ((t == kNone) != (lk.tensor == kNone)) return false;
      if (t == kNone) continue;
      const ActualTensor& a = in.tensors[t];
      const ActualTensor& b = in.tensors[lk.tensor];
      if (a.dtype != b.dtype || !same_shape(a.shape, b.shape) || consumed[t]) return false;
      if (lk.newly_consumed) replay_marks.push_back(t);
    }
    for (uint32_t t : replay_marks) consumed[t] = 1;
    layer_replay_count.fetch_add(1, std::memory_order_relaxed);
    layer_replay_position_hit_count.fetch_add(position_hits, std::memory_order_relaxed);
    return true;
  }

  static constexpr uint32_t kNone = UINT32_MAX;
  static_assert(TensorIds::npos == kNone, "a lookup that finds nothing is kNone");
  // Every lookup of a name while a layer is checked goes through these two, so a recorded
  // layer's lookups are all known (layer replay).
  uint32_t tensor_index(std::string_view name) {
    const uint32_t t = by_name.find(name);  // npos == kNone
    if (recorder) record(false, name, t, t != kNone);
    return t;
  }
  bool companion_lookup(std::string_view module) {
    const uint32_t id = companions.find(module);
    const bool found = id != ViewIds::npos;
    if (recorder) record(true, module, found ? companion_tensor[id] : kNone, found);
    return found;
  }
  const ActualTensor* get(std::string_view name) {
    const uint32_t t = tensor_index(name);
    return t == kNone ? nullptr : &in.tensors[t];
  }
  void consume(std::string_view name) {
    const uint32_t t = tensor_index(name);
    if (t != kNone) consumed[t] = 1;
  }
  void consume(const ActualTensor* a) { consumed[static_cast<size_t>(a - in.tensors.data())] = 1; }
  std::string file_of(std::string_view name) {
    const ActualTensor* t = get(name);
    return t ? std::string(t->file) : in.index_file;
  }

  // ---- CF -------------------------------------------------------------------------------
  void config_findings() {
    const std::string& cf = in.config_file;
    for (const auto& is : view.issues) {
      switch (is.kind) {
        case ConfigIssue::MissingRequired:
          emit("CF003", Severity::error, is.message, cf, "", is.hint);
          break;
        case ConfigIssue::WrongType:
          emit("CF004", Severity::error, is.message, cf, "", is.hint);
          break;
        case ConfigIssue::Defaulted:
          emit("CF005", Severity::info, is.message, cf, "", is.hint);
          break;
        case ConfigIssue::LoadersDisagree:
          emit("CF006", Severity::warning, is.message, cf, "", is.hint);
          break;
        case ConfigIssue::Inconsistent:
          emit("CF007", is.error ? Severity::error : Severity::warning, is.message, cf, "", is.hint);
          break;
        case ConfigIssue::Note:
          emit("CF008", Severity::info, is.message, cf, "", is.hint);
          break;
      }
    }
    // MoE detection (incidents §1.6)
    bool type_moe = model_type_implies_moe(view.model_type) || model_type_implies_moe(view.text_model_type);
    if (view.experts.explicit_dense && type_moe)
      emit("CF009", Severity::info,
           view.experts.field + " = 1: an explicit single expert means a dense model, although model_type \"" +
               view.model_type + "\" suggests MoE",
           cf, "", "");
    if (type_moe && view.experts.count == 0 && view.arch && view.arch->moe && !view.dim("E"))
      emit("CF009", Severity::warning,
           "model_type \"" + view.model_type +
               "\" is a mixture of experts but no expert count (num_local_experts / num_experts / "
               "n_routed_experts) was found outside vision/audio configs",
           cf, "", "set the expert count in the text config");
    // phi3 longrope factor lengths (T:phi3 validate_rope)
    if (view.arch && view.arch->model_type == "phi3") {
      const json::Value* rs = view.text->find("rope_scaling");
      if (rs && rs->is_object()) {
        int64_t hd = view.dim_or("hd", 0);
        double prf = view.text->get_number("partial_rotary_factor").value_or(1.0);
        int64_t want = static_cast<int64_t>(static_cast<double>(hd) * prf) / 2;
        for (const char* k : {"long_factor", "short_factor"}) {
          const json::Value* f = rs->find(k);
          if (f && f->is_array() && static_cast<int64_t>(f->as_array().size()) != want)
            emit("CF007", Severity::error,
                 std::string("rope_scaling.") + k + " has " + std::to_string(f->as_array().size()) +
                     " entries; head_dim x partial_rotary_factor / 2 = " + std::to_string(want),
                 cf, "", "transformers rejects the config (Phi3Config rope validation)");
        }
        auto type = rs->get_string("type").value_or(rs->get_string("rope_type").value_or(""));
        if (!type.empty() && type != "longrope" && type != "default" && type != "su" && type != "yarn" &&
            type != "linear" && type != "dynamic")
          emit("CF007", Severity::warning, "rope_scaling type \"" + type + "\" is not one phi3 loaders accept",
               cf, "", "");
      }
    }
  }

  // ---- AR/QZ ----------------------------------------------------------------------------

  // Fused shards (q/k/v -> qkv, gate/up -> gate_up): per fusion kind, the shared prefix of the
  // shards -> the first shard seen and its state. Prefixes and modules are views of expected
  // tensor names (stable for the run) or of `owned_modules` (shards replayed from a Capture).
  struct FusedFirst {
    std::string_view module;
    ModuleState state;
  };
  ViewIds fused_prefixes[2];                 // 0: qkv, 1: gate_up
  std::vector<FusedFirst> fused_firsts[2];   // by ViewIds id
  std::deque<std::string> owned_modules;
  static constexpr const char* kFusedKind[2] = {"qkv", "gate_up"};

  // The fusion a module is a shard of: (kind, prefix shared by its sibling shards).
  static std::optional<std::pair<int, std::string_view>> fused_key(std::string_view module) {
    // Every suffix below ends in one of these last segments: most modules (o_proj, down_proj,
    // experts) are turned away by one compare.
    const size_t dot = module.rfind('.');
    const std::string_view last = dot == std::string_view::npos ? module : module.substr(dot + 1);
    if (last != "q_proj" && last != "k_proj" && last != "v_proj" && last != "gate_proj" && last != "up_proj")
      return std::nullopt;
    for (auto [suf, kind] : {std::pair{"self_attn.q_proj", 0}, std::pair{"self_attn.k_proj", 0},
                             std::pair{"self_attn.v_proj", 0}, std::pair{"mlp.gate_proj", 1},
                             std::pair{"mlp.up_proj", 1}, std::pair{"gate_proj", 1}, std::pair{"up_proj", 1}}) {
      std::string_view s = suf;
      if (ends_with(module, s) && (module.size() == s.size() || module[module.size() - s.size() - 1] == '.'))
        return std::pair{kind, module.substr(0, module.size() - s.size())};
    }
    return std::nullopt;
  }

  void note_fused(std::string_view module, const ModuleState& st, std::string_view file, bool stable = true) {
    if (capture) {
      capture->fused.emplace_back(std::string(module), st, std::string(file));
      return;
    }
    auto k = fused_key(module);
    if (!k) return;
    auto& [kind, prefix] = *k;
    ViewIds& ids = fused_prefixes[kind];
    uint32_t id = ids.find(prefix);
    if (id == ViewIds::npos) {
      if (!stable) {
        module = owned_modules.emplace_back(module);
        prefix = module.substr(0, prefix.size());
      }
      ids.insert(prefix, hash_name(prefix));
      fused_firsts[kind].push_back({module, st});
      return;
    }
    const ModuleState& a = fused_firsts[kind][id].state;
    const std::string_view first_module = fused_firsts[kind][id].module;
    const char* fused_kind = kFusedKind[kind];
    if (a.quantized != st.quantized || (a.quantized && (a.bits != st.bits || a.group != st.group || a.format != st.format))) {
      auto desc = [](const ModuleState& s) {
        if (!s.quantized) return std::string("float");
        return std::string(quant::format_name(s.format)) + " " + std::to_string(s.bits) + "-bit g" +
               std::to_string(s.group);
      };
      emit("QZ009", Severity::error,
           std::string(module) + " is " + desc(st) + " but " + std::string(first_module) + " is " + desc(a) +
               "; loaders that fuse " + fused_kind + " need every shard quantized the same way",
           std::string(file), std::string(module) + ".weight",
           "vLLM raises on fused shards with different schemes; quantize them together");
    }
  }

  // Check one tensor's shape/dtype against an expectation (non-quantized path).
  void check_plain(const ExpectedTensor& x, const ActualTensor& a) {
    const std::span<const uint64_t> s = a.shape;
    if (!same_shape(s, x.shape)) {
      diagnose_shape(x, a);
      return;
    }
    if (x.dtype == DTypeRole::Model) {
      if (!is_float(a.dtype)) {
        emit("QZ008", Severity::error,
             std::string(x.name) + " is stored as " + std::string(st::dtype_name(a.dtype)) + " " + shape_str(s) +
                 "; a float weight was expected (no quantization companions are present)",
             std::string(a.file), x.name,
             scheme ? "the declared scheme does not quantize this module; an integer/FP8 tensor here "
                      "loads as garbage or fails"
                    : "config.json declares no quantization, so loaders expect a float tensor");
      }
    } else if (resolve_dtype(x.dtype, view.model_dtype) != a.dtype && !(is_float(a.dtype) && x.dtype == DTypeRole::F32)) {
      emit("AR010", Severity::warning,
           std::string(x.name) + " has dtype " + std::string(st::dtype_name(a.dtype)) + "; expected " +
               std::string(dtype_role_name(x.dtype)),
           std::string(a.file), x.name, "");
    }
  }

  void diagnose_shape(const ExpectedTensor& x, const ActualTensor& a) {
    std::vector<uint64_t> s(a.shape.begin(), a.shape.end());
    const std::string file(a.file);
    std::string base = std::string(x.name) + ": stored " + shape_str(s) + " " + std::string(st::dtype_name(a.dtype)) +
                       ", config implies " + shape_str(x.shape);
    // transposed
    if (s.size() == x.shape.size() && s.size() >= 2) {
      std::vector<uint64_t> r(s.rbegin(), s.rend());
      std::vector<uint64_t> swapped = s;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      if ((swapped == x.shape || r == x.shape) && s != x.shape) {
        emit("AR005", Severity::error, base + " (transposed)", file, x.name,
             "the tensor was saved as [in, out]; Linear weights are [out, in]");
        return;
      }
    }
    // packed integer words for a float module
    if (s.size() == x.shape.size() && !s.empty() && is_int(a.dtype) && x.shape.size() >= 2 &&
        std::equal(s.begin(), s.end() - 1, x.shape.begin())) {
      uint32_t word = static_cast<uint32_t>(st::dtype_bits(a.dtype));
      if (auto b = quant::packed_bits_for(s.back(), x.shape.back(), word)) {
        emit("AR004", Severity::error,
             base + ": stored packed at " + std::to_string(*b) + " bits (" + std::to_string(s.back()) + " x " +
                 std::to_string(word) + " / " + std::to_string(*b) + " = " + std::to_string(x.shape.back()) + ")",
             file, x.name,
             companions.contains(x.module())
                 ? "quantized tensors for a module the loader keeps float"
                 : "a packed quantized weight without its scales or without a quantization declaration "
                   "in config.json");
        return;
      }
    }
    // embedding / head rows vs vocab_size
    if ((x.kind == ModuleKind::Embedding || x.name == view.head) && s.size() == 2 && x.shape.size() == 2 &&
        s[1] == x.shape[1] && s[0] != x.shape[0] && x.shape[0] == static_cast<uint64_t>(view.dim_or("V", -1))) {
      emit("AR006", Severity::error,
           std::string(x.name) + " has " + std::to_string(s[0]) + " rows; vocab_size is " + std::to_string(x.shape[0]), file,
           x.name,
           s[0] > x.shape[0] ? "the embedding was resized (added tokens) but vocab_size was not updated"
                             : "vocab_size is larger than the stored embedding; loaders fail on the shape");
      return;
    }
    // router / score-bias rows follow the expert count
    const int64_t E = view.dim_or("E", 0);
    if (E > 1 && x.expert < 0 && x.shape.size() <= 2 && s.size() == x.shape.size() && !s.empty() &&
        x.shape[0] == static_cast<uint64_t>(E) && s[0] != x.shape[0] &&
        std::equal(s.begin() + 1, s.end(), x.shape.begin() + 1)) {
      if (!expert_mismatch_layers.empty()) return;  // already reported once per layer as AR009
      if (router_reported++ < 3)
        emit("AR009", Severity::error,
             std::string(x.name) + " routes to " + std::to_string(s[0]) + " experts; config.json says " + std::to_string(E) +
                 (view.experts.field.empty() ? "" : " (" + view.experts.field + ")"),
             file, x.name, "the expert count in config.json disagrees with the router");
      return;
    }
    // expert leading dim
    if (x.expert < 0 && x.shape.size() >= 3 && s.size() == x.shape.size() && s[0] != x.shape[0] &&
        std::equal(s.begin() + 1, s.end(), x.shape.begin() + 1)) {
      emit("AR009", Severity::error,
           std::string(x.name) + " stacks " + std::to_string(s[0]) + " experts; the config says " + std::to_string(x.shape[0]) +
               (view.experts.field.empty() ? "" : " (" + view.experts.field + ")"),
           file, x.name, "the expert count in config.json disagrees with the stored experts");
      return;
    }
    // fused gate_up split axis
    if (x.shape.size() == 3 && s.size() == 3 && ends_with(x.name, "gate_up_proj") && s[0] == x.shape[0] &&
        s[1] * 2 == x.shape[1] * 1 && s[2] * 1 == x.shape[2] * 2) {
      emit("AR004", Severity::error, base + ": gate and up are concatenated on the wrong axis (expected [E, 2*I, H])",
           file, x.name, "fuse gate_up_proj along dim 1");
      return;
    }
    auto cause = caused_by.find(std::string(x.name));
    emit("AR004", Severity::error, base, file, x.name,
         cause != caused_by.end() ? cause->second : x.mtp ? "MTP layer (loaders drop it, vLLM's MTP head reads it)" : "");
  }

  // quant::quantized_tensors for one module, from a table of its results per geometry and
  // scheme: the function's names are module + suffix and nothing else depends on the module,
  // so the table keeps each part with its name emptied and the suffix beside it. The result
  // lives in `parts_buf` until the next call.
  struct PartsTemplate {
    std::vector<ExpectedTensor> parts;  // names empty
    std::vector<std::string> suffixes;
  };
  std::unordered_map<std::string, PartsTemplate> parts_by_geometry;
  std::vector<ExpectedTensor> parts_buf;
  std::vector<std::string> parts_names;  // parts_buf's names (kept, with their capacity)
  std::string parts_key;
  const std::vector<ExpectedTensor>& module_parts(std::string_view module, std::span<const uint64_t> lead, uint64_t O,
                                                  uint64_t I, const ModuleQuant& mq) {
    parts_key.clear();
    auto put = [&](uint64_t v) { parts_key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(lead.size());
    for (uint64_t d : lead) put(d);
    put(O);
    put(I);
    put(static_cast<uint64_t>(mq.format));
    put(static_cast<uint64_t>(static_cast<uint32_t>(mq.bits)));
    put(static_cast<uint64_t>(static_cast<uint32_t>(mq.group_size)));
    put((mq.symmetric ? 1u : 0u) | (mq.g_idx ? 2u : 0u) | (mq.quantized ? 4u : 0u));
    put(static_cast<uint64_t>(static_cast<uint32_t>(mq.block_rows)));
    put(static_cast<uint64_t>(static_cast<uint32_t>(mq.block_cols)));
    parts_key.append(mq.strategy);
    auto it = parts_by_geometry.find(parts_key);
    if (it == parts_by_geometry.end()) {
      PartsTemplate t;
      const Plan parts = quant::quantized_tensors("", lead, O, I, mq);
      for (const auto& p : parts) {
        t.suffixes.emplace_back(p.name);
        t.parts.push_back(p);
        t.parts.back().name = {};
      }
      it = parts_by_geometry.emplace(parts_key, std::move(t)).first;
    }
    const PartsTemplate& tmpl = it->second;
    parts_buf.resize(tmpl.parts.size());
    if (parts_names.size() < tmpl.parts.size()) parts_names.resize(tmpl.parts.size());  // before any view of them
    for (size_t k = 0; k < tmpl.parts.size(); ++k) {
      parts_names[k].assign(module).append(tmpl.suffixes[k]);
      parts_buf[k] = tmpl.parts[k];
      parts_buf[k].name = parts_names[k];
    }
    return parts_buf;
  }

  // Quantized module: check packed geometry and companions.
  void check_quantized(const ExpectedTensor& x, const ModuleQuant& mq) {
    auto [O, I] = x.out_in();
    const std::span<const uint64_t> lead(x.shape.data(), x.shape.size() - 2);
    const std::vector<ExpectedTensor>& parts = module_parts(x.module(), lead, O, I, mq);
    const std::string_view mod = x.module();
    const ActualTensor* main_actual = nullptr;
    bool any_present = false;
    // The companions' suffixes, for the main loop's prefetch of the modules ahead (consecutive
    // modules nearly always share a layout).
    {
      size_t n = 0;
      for (const auto& p : parts) {
        if (p.name == x.name || n == part_suffixes.size() || p.name.size() <= mod.size() ||
            std::string_view(p.name).substr(0, mod.size()) != mod)
          continue;
        const std::string_view suf = std::string_view(p.name).substr(mod.size());
        if (part_suffixes[n] != suf) part_suffixes[n].assign(suf);
        ++n;
      }
      part_suffix_count = n;
    }
    // Each part's tensor, looked up once.
    present.clear();
    for (const auto& p : parts) {
      present.push_back(get(p.name));
      any_present |= present.back() != nullptr;
    }
    // the module stored entirely as float although the scheme quantizes it
    const ActualTensor* fw = get(x.name);
    if (!has_companions(x.module()) && fw && is_float(fw->dtype)) {
      const std::span<const uint64_t> s = fw->shape;
      consume(x.name);
      if (!same_shape(s, x.shape)) {
        diagnose_shape(x, *fw);
        return;
      }
      emit("QZ005", Severity::error,
           std::string(x.name) + " is a plain " + std::string(st::dtype_name(fw->dtype)) + " " + shape_str(s) + " but " +
               mq.reason + " declares it quantized (" + std::string(quant::format_name(mq.format)) + ", " +
               std::to_string(mq.bits) + "-bit)",
           std::string(fw->file), x.name,
           "add the module to the scheme's ignore/exclusion list, or quantize it");
      note_fused(x.module(), ModuleState{false, 0, 0, Format::None}, std::string(fw->file));
      return;
    }
    if (!any_present && !fw) {
      emit("AR001", x.presence == Presence::Required ? Severity::error : Severity::warning,
           "missing " + std::string(x.name) + " " + shape_str(x.shape) + " (quantized as " +
               std::string(quant::format_name(mq.format)) + ": expected " + std::string(parts.front().name) + ")",
           in.index_file, x.name, "");
      return;
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      const auto& p = parts[k];
      const ActualTensor* a = present[k];
      if (!a) {
        if (p.presence == Presence::Required) {
          bool zp = ends_with(p.name, "zero_point") || ends_with(p.name, ".qzeros");
          emit(zp ? "QZ006" : "QZ002", Severity::error,
               "missing " + std::string(p.name) + " " + shape_str(p.shape) + ": " + mq.reason + " makes " + std::string(mod) + " " +
                   std::string(quant::format_name(mq.format)) + " " + std::to_string(mq.bits) + "-bit" +
                   (zp ? " asymmetric (zero points required)" : ""),
               in.index_file, p.name,
               zp ? "vLLM does not check missing weights of quantized models: the zero points load as "
                    "uninitialised memory"
                  : "the quantized module is incomplete; the loader fails or dequantizes garbage");
        }
        continue;
      }
      consumed[static_cast<size_t>(a - in.tensors.data())] = 1;
      if (p.name == x.name || ends_with(p.name, ".weight_packed") || ends_with(p.name, ".qweight") ||
          ends_with(p.name, "_blocks"))
        main_actual = a;
      const std::span<const uint64_t> s = a->shape;
      bool shape_ok = same_shape(s, p.shape);
      if (!shape_ok && (p.shape.empty() || (p.shape.size() == 1 && p.shape[0] == 1)) &&
          (s.empty() || (s.size() == 1 && s[0] == 1)))
        shape_ok = true;  // scalar vs [1]
      if (!shape_ok && !lead.empty() && s.size() == p.shape.size() && s[0] != p.shape[0] &&
          p.shape[0] == static_cast<uint64_t>(expert_dim.value_or(-1)) &&
          std::equal(s.begin() + 1, s.end(), p.shape.begin() + 1)) {
        // Stacked quantized experts whose packed rows are right but whose count is not: the
        // expert count is the cause, not the packing (reported once per module).
        if (k == 0 || !present.front())
          emit("AR009", Severity::error,
               std::string(p.name) + " stacks " + std::to_string(s[0]) + " experts; config.json says " + std::to_string(p.shape[0]) +
                   (view.experts.field.empty() ? "" : " (" + view.experts.field + ")") +
                   "; the packed geometry of each expert matches " + std::string(quant::format_name(mq.format)) + " " +
                   std::to_string(mq.bits) + "-bit",
               std::string(a->file), p.name, "the expert count in config.json disagrees with the stored experts");
        continue;
      }
      const int64_t E = expert_dim.value_or(0);
      if (!shape_ok && lead.empty() && E > 1 && O == static_cast<uint64_t>(E) && s.size() == p.shape.size() &&
          !s.empty() && s[0] != p.shape[0] && p.shape[0] == O && std::equal(s.begin() + 1, s.end(), p.shape.begin() + 1)) {
        // A quantized router whose rows disagree with the expert count: the count is the cause.
        if (expert_mismatch_layers.empty() && (k == 0 || !present.front()) && router_reported++ < 3)
          emit("AR009", Severity::error,
               std::string(p.name) + " routes to " + std::to_string(s[0]) + " experts; config.json says " + std::to_string(E) +
                   (view.experts.field.empty() ? "" : " (" + view.experts.field + ")"),
               std::string(a->file), p.name, "the expert count in config.json disagrees with the router");
        continue;
      }
      if (!shape_ok) {
        std::string msg = std::string(p.name) + ": stored " + shape_str(s) + ", but " + std::string(quant::format_name(mq.format)) +
                          " " + std::to_string(mq.bits) + "-bit" +
                          (mq.group_size > 0 ? " group " + std::to_string(mq.group_size) : "") + " over [" +
                          std::to_string(O) + ", " + std::to_string(I) + "] implies " + shape_str(p.shape) +
                          " (declared by " + mq.reason + ")";
        std::string hint;
        // diagnose the width actually stored
        bool packed_main = &p == &parts.front() && (p.dtype == DTypeRole::U32 || p.dtype == DTypeRole::I32 ||
                                                    p.dtype == DTypeRole::U8);
        if (packed_main && s.size() == p.shape.size() && !s.empty()) {
          uint32_t word = static_cast<uint32_t>(st::dtype_bits(a->dtype));
          if (mq.format == Format::GPTQ && s.size() >= 2) {
            if (auto b = quant::packed_bits_for(s[s.size() - 2], I, word))
              hint = "stored packed at " + std::to_string(*b) + " bits (" + std::to_string(s[s.size() - 2]) + " x " +
                     std::to_string(word) + " / " + std::to_string(*b) + " = " + std::to_string(I) +
                     "), declared " + std::to_string(mq.bits);
          } else if (mq.format == Format::AwqGemm && s.size() >= 2) {
            if (auto b = quant::packed_bits_for(s.back(), O, word))
              hint = "stored packed at " + std::to_string(*b) + " bits along out_features";
          } else if (auto b = quant::packed_bits_for(s.back(), I, word)) {
            hint = "stored packed at " + std::to_string(*b) + " bits (" + std::to_string(s.back()) + " x " +
                   std::to_string(word) + " / " + std::to_string(*b) + " = " + std::to_string(I) + "), declared " +
                   std::to_string(mq.bits) + " bits";
          } else if (s.back() == I) {
            hint = "the weight is not packed at all (last dim equals in_features)";
          }
        } else if (!packed_main && s.size() == p.shape.size() && !s.empty() && mq.group_size > 0 &&
                   s.back() != p.shape.back()) {
          hint = std::to_string(s.back()) + " groups stored; in_features / group_size = " +
                 std::to_string(p.shape.back()) + " (group size " + std::to_string(mq.group_size) + ")";
        }
        emit("QZ003", Severity::error, msg, std::string(a->file), p.name, hint);
        continue;
      }
      // dtype
      st::DType want = resolve_dtype(p.dtype, view.model_dtype);
      bool dtype_ok = a->dtype == want || (p.dtype == DTypeRole::Model && is_float(a->dtype)) ||
                      ((want == st::DType::I32 || want == st::DType::U32) &&
                       (a->dtype == st::DType::I32 || a->dtype == st::DType::U32)) ||
                      (p.dtype == DTypeRole::F32 && is_float(a->dtype)) ||
                      ((ends_with(p.name, "zero_point") || ends_with(p.name, "g_idx")) && is_int(a->dtype));
      if (!dtype_ok)
        emit("QZ007", Severity::error,
             std::string(p.name) + " has dtype " + std::string(st::dtype_name(a->dtype)) + "; " +
                 std::string(quant::format_name(mq.format)) + " stores it as " + std::string(dtype_role_name(p.dtype)),
             std::string(a->file), p.name, "");
    }
    // symmetric scheme but zero points present (compressed-tensors)
    if (mq.symmetric && (mq.format == Format::CtPacked || mq.format == Format::CtInt)) {
      std::string zp = std::string(mod) + ".weight_zero_point";
      if (const ActualTensor* a = get(zp)) {
        consume(zp);
        emit("QZ006", Severity::error,
             zp + " is present but " + mq.reason + " is symmetric (weights.symmetric = true)",
             std::string(a->file), zp, "vLLM refuses a symmetric group that carries zero points");
      }
    }
    for (size_t k = 0; k < std::size(kActivationSuffixes); ++k) {
      // Most checkpoints carry none of these: a lookup of an absent name is a cache miss
      // each, six per module, so only suffixes some stored name ends with are looked up.
      if (!activation_suffix_stored[k]) continue;
      scratch.assign(mod);
      scratch += kActivationSuffixes[k];
      consume(scratch);
    }
    note_fused(x.module(), ModuleState{true, mq.bits, mq.group_size, mq.format},
               main_actual ? main_actual->file : std::string_view(in.index_file));
  }

  static std::string quant_desc(const ModuleQuant& q) {
    if (!q.quantized) return "float";
    return std::string(quant::format_name(q.format)) + " " + std::to_string(q.bits) + "-bit" +
           (q.group_size > 0 ? " group " + std::to_string(q.group_size) : std::string());
  }

  // The scheme's resolution of a module, remembered per name pattern: a deep MoE checkpoint
  // asks for ~50k modules that follow a few dozen patterns (layer and expert indices aside).
  // The pattern is the name with every all-digit path segment's digits replaced (same
  // length). When no name rule of the scheme holds a digit, no rule (regex or plain) and none
  // of the loaders' built-in name tests tells one digit from another, so every name of a
  // pattern resolves alike except where a message quotes the name. That is ruled out per
  // pattern by resolving it with all those digits '0' and again with all '1': the pattern is
  // remembered only when the two agree in every field; otherwise each module is resolved on
  // its own.
  std::optional<bool> memo_allowed;
  std::unordered_map<std::string, std::optional<quant::Resolution>> resolution_memo;  // nullopt: per module
  std::string memo_key, memo_probe;
  std::vector<std::pair<size_t, size_t>> index_digits;  // [begin, end) of each all-digit segment
  quant::Resolution unmemoized;
  const quant::Resolution& resolve_module(std::string_view module, ModuleKind kind, uint64_t I, quant::Evidence ev) {
    if (!memo_allowed) memo_allowed = scheme->name_rules_digit_free();
    if (!*memo_allowed) {
      unmemoized_used = true;
      return unmemoized = scheme->resolve(module, kind, I, ev);
    }
    memo_key.assign(module);
    index_digits.clear();
    for (size_t b = 0; b < memo_key.size();) {
      size_t e = memo_key.find('.', b);
      if (e == std::string::npos) e = memo_key.size();
      bool digits = e > b;
      for (size_t k = b; k < e && digits; ++k) digits = memo_key[k] >= '0' && memo_key[k] <= '9';
      if (digits) {
        std::fill(memo_key.begin() + static_cast<std::ptrdiff_t>(b), memo_key.begin() + static_cast<std::ptrdiff_t>(e), '0');
        index_digits.emplace_back(b, e);
      }
      b = e + 1;
    }
    if (index_digits.empty()) {
      unmemoized_used = true;
      return unmemoized = scheme->resolve(module, kind, I, ev);
    }
    const size_t name_len = memo_key.size();
    memo_key.push_back('\0');
    memo_key.push_back(static_cast<char>(kind));
    memo_key.push_back(static_cast<char>(ev));
    memo_key.append(reinterpret_cast<const char*>(&I), sizeof I);
    auto it = resolution_memo.find(memo_key);
    if (it == resolution_memo.end()) {
      const std::string_view zeros(memo_key.data(), name_len);
      quant::Resolution r0 = scheme->resolve(zeros, kind, I, ev);
      memo_probe.assign(zeros);
      for (auto [b, e] : index_digits)
        std::fill(memo_probe.begin() + static_cast<std::ptrdiff_t>(b), memo_probe.begin() + static_cast<std::ptrdiff_t>(e), '1');
      quant::Resolution r1 = scheme->resolve(memo_probe, kind, I, ev);
      std::optional<quant::Resolution> keep;
      if (r0 == r1) keep = std::move(r0);
      it = resolution_memo.emplace(memo_key, std::move(keep)).first;
    }
    if (it->second) return *it->second;
    unmemoized_used = true;
    return unmemoized = scheme->resolve(module, kind, I, ev);
  }

  // A weight-like tensor (Linear / Embedding / ScaledLinear). When the loaders resolve the
  // module differently (quant::Resolution::other), both resolutions are checked against the
  // files; the one the files follow is reported, with a QZ011 warning naming both.
  void check_module(const ExpectedTensor& x) {
    const std::string_view module = x.module();
    if (!scheme) {
      check_module_as(x, ModuleQuant{});
      return;
    }
    const bool has_comp = has_companions(module);
    auto [O, I] = x.out_in();
    const quant::Resolution& r =
        resolve_module(module, x.kind, I, has_comp ? quant::Evidence::HasScales : quant::Evidence::NoScales);
    if (!r.other) {
      check_module_as(x, r.quant);
      return;
    }
    Capture a, b;
    capture = &a;
    check_module_as(x, r.quant);
    capture = &b;
    check_module_as(x, *r.other);
    capture = nullptr;
    const bool follow_other = a.error && !b.error;
    auto first_error = [](const Capture& c) {
      for (const auto& f : c.findings)
        if (f.sev == Severity::error) return std::string(f.code) + " " + f.msg;
      return std::string();
    };
    std::string outcome;
    if (follow_other)
      outcome = "the files follow " + r.other_loaders + ", so " + r.loaders + " fails on them (" + first_error(a) + ")";
    else if (!a.error && b.error)
      outcome = "the files follow " + r.loaders + ", so " + r.other_loaders + " fails on them (" + first_error(b) + ")";
    else if (a.error)
      outcome = "the files follow neither (the errors below are for " + r.loaders + "'s resolution)";
    else
      outcome = "the headers cannot tell which one the files follow";
    emit("QZ011", Severity::warning,
         std::string(module) + ": the loaders resolve its quantization differently: " + r.loaders + " gives " +
             quant_desc(r.quant) + " by " + r.quant.reason + "; " + r.other_loaders + " gives " + quant_desc(*r.other) +
             " by " + r.other->reason + "; " + outcome,
         in.config_file, x.name,
         "make every loader pick the same rule: give the module one matching target, or make the specific "
         "rule come first in declaration order and sort first alphabetically");
    Capture& chosen = follow_other ? b : a;
    for (auto& f : chosen.findings)
      emit(f.code, f.sev, std::move(f.msg), std::move(f.file), std::move(f.tensor), std::move(f.hint));
    for (auto& [m, st, file] : chosen.fused) note_fused(m, st, file, /*stable=*/false);
  }

  // Check the module's tensors against one resolution.
  void check_module_as(const ExpectedTensor& x, const ModuleQuant& mq) {
    const std::string_view module = x.module();
    const bool has_comp = has_companions(module);
    if (mq.quantized) {
      check_quantized(x, mq);
      return;
    }
    // not quantized by the loader's predicate
    if (has_comp) {
      std::vector<std::string> names;
      for (auto suf : kCompanionSuffixes) {
        std::string n = std::string(module) + std::string(suf);
        if (get(n)) {
          names.push_back(n);
          consume(n);
        }
      }
      const ActualTensor* w = get(x.name);
      consume(x.name);
      std::string detail;
      if (w) {
        std::vector<uint64_t> s(w->shape.begin(), w->shape.end());
        detail = " (" + std::string(x.name) + " stored " + shape_str(s) + " " + std::string(st::dtype_name(w->dtype)) +
                 ", the loader expects " + shape_str(x.shape) + " float";
        if (is_int(w->dtype) && !s.empty() && !x.shape.empty())
          if (auto b = quant::packed_bits_for(s.back(), x.shape.back(), st::dtype_bits(w->dtype)))
            detail += ": packed at " + std::to_string(*b) + " bits, " + std::to_string(s.back()) + " x " +
                      std::to_string(st::dtype_bits(w->dtype)) + " / " + std::to_string(*b) + " = " +
                      std::to_string(x.shape.back());
        detail += ")";
      }
      std::string why = scheme ? mq.reason : "config.json declares no quantization";
      emit("QZ004", Severity::error,
           std::string(module) + " ships quantized tensors (" + names.front() +
               (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "") +
               ") but the loader will not quantize it: " + why + detail,
           w ? std::string(w->file) : file_of(names.front()), w ? x.name : names.front(),
           "the loader builds a float module and fails on shape (\"Mismatched parameter ... shape\"); "
           "dequantize this module or make the loader's predicate quantize it");
      note_fused(module, ModuleState{true, 0, 0, Format::None}, in.index_file);
      return;
    }
    const ActualTensor* a = get(x.name);
    if (!a) {
      missing(x);
      return;
    }
    consume(a);
    check_plain(x, *a);
    if (scheme && scheme->method != quant::Method::None && (x.kind == ModuleKind::Linear))
      note_fused(module, ModuleState{false, 0, 0, Format::None}, std::string(a->file));
  }

  void missing(const ExpectedTensor& x) {
    if (x.presence != Presence::Required) return;  // optional/group handled by callers
    emit("AR001", Severity::error,
         "missing " + std::string(x.name) + " " + shape_str(x.shape) + ": " + std::string(view.arch->model_type) +
             " with this config.json needs it" + (x.why.empty() ? "" : " (" + std::string(x.why) + ")"),
         in.index_file, x.name,
         "strict loaders (mlx-lm) fail with \"Missing parameters\"; transformers initialises it randomly");
  }

  // MLX switch_mlp / fused expert layouts: rewrite the per-expert plan where the files use them.
  void adapt_expert_layouts(Plan& plan) {
    if (!any_expert_layout) return;
    const int64_t E = view.dim_or("E", 0);
    std::vector<ExpectedTensor> out;
    out.reserve(plan.size());
    for (auto& x : plan) {
      if (x.expert < 0) {
        out.push_back(std::move(x));
        continue;
      }
      std::string n(x.name);
      auto p = n.find(".experts." + std::to_string(x.expert) + ".");
      if (p == std::string::npos) {
        out.push_back(std::move(x));
        continue;
      }
      std::string cont = n.substr(0, p);
      std::string rest = n.substr(p + 10 + std::to_string(x.expert).size());
      if (rest == "w1.weight") rest = "gate_proj.weight";
      if (rest == "w3.weight") rest = "up_proj.weight";
      if (rest == "w2.weight") rest = "down_proj.weight";
      std::string mlx = cont + ".switch_mlp." + rest;
      bool is_mlx = get(mlx) || companions.contains(std::string_view(mlx).substr(0, mlx.size() - 7));
      bool is_fused = get(cont + ".experts.gate_up_proj") != nullptr;
      if (!is_mlx && !is_fused) {
        out.push_back(std::move(x));
        continue;
      }
      if (x.expert != 0) continue;
      if (is_mlx) {
        x.name = plan.intern(mlx);
        x.shape.insert(x.shape.begin(), static_cast<uint64_t>(E));
      } else {  // transformers v5 fused layout: gate_up [E, 2*I, H], down [E, H, I]
        if (rest == "up_proj.weight") continue;
        if (rest == "gate_proj.weight") {
          x.name = plan.intern(cont + ".experts.gate_up_proj");
          x.shape = {static_cast<uint64_t>(E), 2 * x.shape[0], x.shape[1]};
        } else {
          x.name = plan.intern(cont + ".experts.down_proj");
          x.shape.insert(x.shape.begin(), static_cast<uint64_t>(E));
        }
      }
      x.expert = -1;
      out.push_back(std::move(x));
    }
    plan.entries() = std::move(out);  // the names stay in the plan's storage
  }

  // Expert count from per-expert names, checked before the tensor walk (AR009).
  std::unordered_set<std::string> expert_mismatch_layers;
  size_t router_reported = 0;
  void check_expert_counts(const Plan& plan) {
    const int64_t E = view.dim_or("E", 0);
    // containers: "<...>.experts." prefixes in the plan
    std::unordered_map<std::string, int64_t> want;  // container prefix -> E
    for (const auto& x : plan)
      if (x.expert == 0) {
        auto p = x.name.find(".experts.0.");
        if (p != std::string::npos) want.emplace(x.name.substr(0, p + 9), E);
      }
    if (want.empty()) return;
    std::unordered_map<std::string, int64_t> seen_max;
    std::string_view last_cont;
    int64_t* last_slot = nullptr;
    for (const auto& t : in.tensors) {
      // Names of one container come together: one that starts with the last container (whose
      // ".experts." was the first in its name, so it is the first in this one too) needs no search.
      size_t p;
      const bool in_last = !last_cont.empty() && t.name.starts_with(last_cont);
      if (in_last) p = last_cont.size() - 9;
      else if ((p = t.name.find(".experts.")) == std::string_view::npos) continue;
      const size_t q = p + 9;
      size_t r = q;
      int64_t e = 0;  // at most 9 digits
      while (r < t.name.size() && r - q < 9 && t.name[r] >= '0' && t.name[r] <= '9') e = e * 10 + (t.name[r++] - '0');
      if (r == q || r >= t.name.size() || t.name[r] != '.') continue;
      if (!in_last) {  // another container (in_last: its prefix is last_cont, compared above)
        last_cont = t.name.substr(0, q);
        std::string cont(last_cont);
        last_slot = want.count(cont) ? &seen_max[cont] : nullptr;
      }
      if (!last_slot) continue;
      *last_slot = std::max(*last_slot, e + 1);
    }
    size_t reported = 0;
    for (const auto& [cont, n] : seen_max) {
      if (n == E) continue;
      expert_mismatch_layers.insert(cont);
      if (reported++ < 3)
        emit("AR009", Severity::error,
             cont + "{e}.* holds " + std::to_string(n) + " experts; config.json says " + std::to_string(E) +
                 (view.experts.field.empty() ? "" : " (" + view.experts.field + ")"),
             in.index_file, cont + "0",
             "the expert count in config.json disagrees with the checkpoint: pruned/merged experts "
             "(REAP) need the count updated");
    }
    if (reported > 3)
      emit("AR009", Severity::error,
           std::to_string(reported - 3) + " more MoE layers disagree with the expert count " + std::to_string(E),
           in.index_file, "", "");
  }

  // A field the config lacks, whose default the loader applies, contradicted by the tensors:
  // the cause of what would otherwise read as dozens of unrelated shape errors (gemma3 without
  // hidden_size gets transformers' 2304 against tensors of 1152). Evidence: float tensors whose
  // stored shape differs from the plan exactly where the plan has the default, all by one value.
  std::unordered_map<std::string, std::string> caused_by;  // tensor -> "CF011: field defaulted to v"
  void defaulted_fields_against_tensors(const Plan& plan) {
    for (const auto& is : view.issues) {
      if (is.kind != ConfigIssue::Defaulted || is.var.empty() || is.value <= 1) continue;
      const uint64_t v = static_cast<uint64_t>(is.value);
      std::optional<uint64_t> implied;
      std::vector<const ExpectedTensor*> witnesses;
      bool conflicting = false;
      for (const auto& x : plan) {
        if (x.tower || x.mtp) continue;
        const ActualTensor* a = get(x.name);
        if (!a || !is_float(a->dtype) || a->shape.size() != x.shape.size()) continue;
        bool differs = false, only_at_default = true;
        std::optional<uint64_t> w;
        for (size_t k = 0; k < x.shape.size(); ++k) {
          if (a->shape[k] == x.shape[k]) continue;
          differs = true;
          if (x.shape[k] != v || (w && *w != a->shape[k])) {
            only_at_default = false;
            break;
          }
          w = a->shape[k];
        }
        if (!differs || !only_at_default || !w) continue;
        if (implied && *implied != *w) conflicting = true;
        implied = w;
        witnesses.push_back(&x);
      }
      if (witnesses.empty() || conflicting) continue;
      const ActualTensor* a0 = get(witnesses[0]->name);
      std::vector<uint64_t> s0(a0->shape.begin(), a0->shape.end());
      emit("CF011", Severity::error,
           is.field + " is absent from config.json, so loaders use their default " + std::to_string(v) + ", but " +
               std::string(witnesses[0]->name) + " is stored " + shape_str(s0) + " where that default implies " +
               shape_str(witnesses[0]->shape) +
               (witnesses.size() > 1 ? " (and " + std::to_string(witnesses.size() - 1) + " more tensors agree)" : "") +
               ": the tensors say " + is.field + " = " + std::to_string(*implied),
           in.config_file, witnesses[0]->name,
           "add \"" + is.field.substr(is.field.rfind('.') + 1) + "\": " + std::to_string(*implied) +
               " to config.json; transformers would build the model at the default size and fail on (or "
               "randomly initialise around) every one of these tensors");
      for (const auto* x : witnesses)
        caused_by[std::string(x->name)] = "follows from CF011: " + is.field + " is absent and defaults to " + std::to_string(v);
    }
  }

  bool in_mismatched_expert_layer(std::string_view name) {
    if (expert_mismatch_layers.empty()) return false;
    auto p = name.find(".experts.");
    if (p == std::string_view::npos) return false;
    return expert_mismatch_layers.count(std::string(name.substr(0, p + 9))) > 0;
  }

  void run() {
    const json::Value& cfg = *in.config;
    by_name.build(in.tensors);
    consumed.assign(in.tensors.size(), 0);
    // Sized for the companions there are (often none, or one per module: a fraction of the
    // tensors): every slot of the index is written once, fresh memory at a million tensors.
    size_t companion_count = 0;
    for (const auto& t : in.tensors) companion_count += companion_module(t.name).has_value();
    companions.reset(companion_count);
    for (const auto& t : in.tensors) {
      if (auto m = companion_module(t.name))
        if (companions.insert(*m, hash_name(*m)) == companion_tensor.size())
          companion_tensor.push_back(static_cast<uint32_t>(&t - in.tensors.data()));
      if (!t.name.empty() && !ends_with(t.name, ".weight"))
        for (size_t k = 0; k < std::size(kActivationSuffixes); ++k)
          if (kActivationSuffixes[k].back() == t.name.back() && ends_with(t.name, kActivationSuffixes[k]))
            activation_suffix_stored[k] = true;
      if (!any_expert_layout && (ends_with(t.name, ".experts.gate_up_proj") || has_switch_mlp(t.name)))
        any_expert_layout = true;
    }

    view = resolve_config(cfg, [&](std::string_view n) { return by_name.contains(n); });
    expert_dim = view.dim("E");
    if (fam & kCF) config_findings();
    if (!(fam & (kAR | kQZ))) return;
    scheme = quant::parse_scheme(cfg);

    if (fam & kQZ && scheme) {
      if (scheme->method == quant::Method::Unknown)
        emit("QZ001", Severity::warning,
             "quant_method \"" + scheme->raw_method + "\" (" + scheme->source +
                 ") is not modelled: quantized tensors are not checked",
             in.config_file, "", "");
      for (const auto& p : scheme->problems)
        emit("QZ001", Severity::error, scheme->source + ": " + p, in.config_file, "", "");
      for (const auto& p : scheme->limits)
        emit("QZ001", Severity::warning, scheme->source + ": " + p, in.config_file, "", "");
      if (scheme->method == quant::Method::MLX) {
        const json::Value* a = cfg.find("quantization");
        const json::Value* b = cfg.find("quantization_config");
        if (a && b && b->is_object() && !b->find("quant_method") && !(*a == *b))
          emit("QZ001", Severity::warning,
               "\"quantization\" and \"quantization_config\" differ; mlx-lm reads \"quantization\", other "
               "loaders may read the copy",
               in.config_file, "", "regenerate both from the same recipe");
      }
      if ((scheme->method == quant::Method::GPTQ || scheme->method == quant::Method::AWQ) && scheme->base.bits != 4)
        emit("QZ010", Severity::info,
             std::string(quant::method_name(scheme->method)) + " " + std::to_string(scheme->base.bits) +
                 "-bit: mlx-lm only converts 4-bit GPTQ/AWQ checkpoints (vLLM and transformers accept it)",
             in.config_file, "", "");
      if (scheme->method == quant::Method::GPTQ && scheme->base.g_idx)
        emit("QZ010", Severity::info, "GPTQ desc_act: the checkpoint carries g_idx, which mlx-lm rejects",
             in.config_file, "", "");
    }

    if (!view.arch) {
      if (fam & kAR)
        emit("AR007", Severity::warning,
             view.model_type.empty()
                 ? std::string("config.json has no model_type: only structural checks ran")
                 : "model_type \"" + view.model_type +
                       "\" is not in ckpt's architecture registry: only structural checks ran",
             in.config_file, "", "the tensor names and shapes were not compared with the config");
      return;
    }
    bool fatal = false;
    for (const auto& is : view.issues)
      if (is.kind == ConfigIssue::MissingRequired || (is.kind == ConfigIssue::WrongType && is.error)) fatal = true;
    if (fatal) {
      if (fam & kAR)
        emit("AR007", Severity::info,
             "the tensor conformance check was skipped: config.json lacks or mistypes fields the shape "
             "formulas need (see the CF findings)",
             in.config_file, "", "");
      return;
    }

    Plan plan = expected_tensors(view, nullptr);
    for (auto& ids : fused_prefixes) ids.reset(plan.size() / 2);
    adapt_expert_layouts(plan);
    check_expert_counts(plan);
    defaulted_fields_against_tensors(plan);

    // presence groups (kv-shared, MTP) and towers: judge by how many members are present
    std::unordered_map<uint32_t, std::pair<size_t, size_t>> groups;  // id -> present, total
    size_t tower_present = 0, tower_total = 0;
    auto present_any = [&](const ExpectedTensor& x) {
      if (get(x.name)) return true;
      return companion_lookup(x.module());
    };
    for (const auto& x : plan) {
      if (x.presence == Presence::Group) {
        auto& g = groups[x.group];
        g.second++;
        if (present_any(x)) g.first++;
      }
      if (x.tower) {
        tower_total++;
        if (present_any(x)) tower_present++;
      }
    }
    const bool tower_absent = tower_total > 0 && tower_present == 0;

    // Names of the plan ahead of the one being checked, hashed once each (see TensorIds).
    constexpr size_t kAhead = NameIndex::kPrefetchAhead;
    std::array<uint64_t, 4 * kAhead> ahead{};
    auto prefetch_ahead = [&](size_t k) {
      if (const size_t j = k + 3 * kAhead; j < plan.size()) {
        const uint64_t h = hash_name(plan[j].name);
        ahead[j % ahead.size()] = h;
        by_name.prefetch_slot(h);
        companions.prefetch_slot(hash_name(plan[j].module()));
      }
      if (const size_t j = k + 2 * kAhead; j < plan.size()) {
        const std::string_view m = plan[j].module();
        for (size_t q = 0; q < part_suffix_count; ++q) {
          prefetch_name.assign(m);
          prefetch_name.append(part_suffixes[q]);
          by_name.prefetch_slot(hash_name(prefetch_name));
        }
      }
      if (const size_t j = k + 2 * kAhead; j < plan.size() && j >= 3 * kAhead)
        by_name.prefetch_tensor(ahead[j % ahead.size()]);
      if (const size_t j = k + kAhead; j < plan.size() && j >= 3 * kAhead) by_name.prefetch_bytes(ahead[j % ahead.size()]);
    };
    auto check_entry = [&](size_t k) {
      const ExpectedTensor& x = plan[k];
      if (in_mismatched_expert_layer(x.name)) return;
      if (x.tower && tower_absent) return;
      const bool present = x.presence == Presence::Required || present_any(x);
      if (x.presence == Presence::Group) {
        auto g = groups[x.group];
        if (g.first == 0) return;  // the whole group absent: legitimate
        if (!present) {
          if (x.mtp) {
            emit("AR013", Severity::warning,
                 "MTP layers are partly present: missing " + std::string(x.name) + " " + shape_str(x.shape), in.index_file,
                 x.name, "vLLM's MTP head needs the complete layer; transformers and mlx-lm drop MTP weights");
          } else {
            emit("AR011", Severity::error,
                 "kv-shared layer " + std::to_string(x.layer) + " ships only part of its k/v: missing " + std::string(x.name) +
                     " " + shape_str(x.shape),
                 in.index_file, x.name,
                 "layers >= num_hidden_layers - num_kv_shared_layers may omit k_proj, v_proj and k_norm "
                 "together or ship all three; anything in between is a broken export");
          }
          return;
        }
      }
      if (x.presence == Presence::Optional && !present) return;
      if (x.presence == Presence::Optional && x.name == view.head && present && view.tied) {
        bool strict_fail = view.arch && !view.arch->strict_loader_pops_tied_head;
        emit("AR012", strict_fail ? Severity::warning : Severity::info,
             view.head + " is present although tie_word_embeddings is true" +
                 (strict_fail ? std::string(": mlx-lm's ") + std::string(view.arch->model_type) +
                                    " does not pop it, so strict loading fails (\"Received 1 parameters not in model\")"
                              : std::string(": loaders ignore it and use the embedding")),
             file_of(view.head), view.head, "drop lm_head.weight or set tie_word_embeddings to false");
      }
      const bool weight_like = (x.kind == ModuleKind::Linear || x.kind == ModuleKind::Embedding ||
                                x.kind == ModuleKind::ScaledLinear) &&
                               x.shape.size() >= 2 && !x.tower;
      if (weight_like) {
        check_module(x);
        return;
      }
      const ActualTensor* a = get(x.name);
      if (!a) {
        missing(x);
        return;
      }
      consume(a);
      check_plain(x, *a);
    };
    // Decoder layers that repeat a checked layer's layout are replayed (arch/layer_replay.h).
    const std::vector<replay::Run> runs = expert_mismatch_layers.empty() && layer_replay_on.load()
                                              ? replay::runs_of(plan, view.prefix)
                                              : std::vector<replay::Run>{};
    auto check_range = [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) {
        prefetch_ahead(k);
        check_entry(k);
      }
    };
    size_t next_run = 0;
    for (size_t k = 0; k < plan.size();) {
      if (next_run < runs.size() && runs[next_run].begin == k) {
        const replay::Run& run = runs[next_run++];
        k = run.end;
        if (!run.eligible) {
          check_range(run.begin, run.end);
          continue;
        }
        std::string base = replay::layer_base(view.prefix, run.layer);
        const replay::Representative* match = nullptr;
        for (const auto& rep : representatives)
          if (replay::same_layout(plan, rep, run, base.size())) {
            match = &rep;
            break;
          }
        if (match && replay_run(*match, base)) continue;
        if (match || representatives.size() >= kMaxRepresentatives) {
          check_range(run.begin, run.end);
          continue;
        }
        Recorder r;
        r.base = std::move(base);
        const size_t emits_before = emit_calls;
        unmemoized_used = false;
        recorder = &r;
        check_range(run.begin, run.end);
        recorder = nullptr;
        if (r.valid && emit_calls == emits_before && !unmemoized_used) {
          for (auto& lk : r.lookups)
            if (!lk.companion && lk.tensor != kNone) lk.newly_consumed = consumed[lk.tensor] != 0;
          representatives.push_back({run.begin, run.end, r.base.size(), std::move(r.lookups)});
        }
        continue;
      }
      prefetch_ahead(k);
      check_entry(k);
      ++k;
    }

    if (tower_absent)
      emit("AR008", Severity::info,
           "the vision tower this config describes is absent (" + std::to_string(tower_total) +
               " tensors); text-only loaders do not need it",
           in.index_file, "", "");

    // leftovers
    std::map<std::string, size_t> towers;
    std::vector<size_t> unexpected;
    size_t dropped = 0;
    std::string dropped_example;
    for (size_t i = 0; i < in.tensors.size(); ++i) {
      if (consumed[i]) continue;
      const auto& t = in.tensors[i];
      if (in_mismatched_expert_layer(t.name)) continue;
      if (!dropped_by_loaders(t.name).empty()) {
        if (dropped++ == 0) dropped_example = std::string(t.name);
        continue;
      }
      bool tw = false;
      for (const auto& p : view.tower_prefixes)
        if (starts_with(t.name, p)) {
          towers[p]++;
          tw = true;
          break;
        }
      if (!tw)
        for (auto p : kTowerPrefixes)
          if (starts_with(t.name, p)) {
            towers[std::string(p)]++;
            tw = true;
            break;
          }
      if (tw) continue;
      unexpected.push_back(i);
    }
    if (dropped) {
      bool strict_fail = !view.arch->strict_loader_drops_inv_freq;
      emit("AR003", strict_fail ? Severity::warning : Severity::info,
           std::to_string(dropped) + " tensor(s) such as " + dropped_example + " are " +
               std::string(dropped_by_loaders(dropped_example)) +
               (strict_fail ? std::string("; mlx-lm's ") + std::string(view.arch->model_type) +
                                  " sanitize does not drop them, so its strict load fails"
                            : std::string("; mlx-lm drops them too")),
           file_of(dropped_example), dropped_example, "remove the rotary buffers from the checkpoint");
    }
    for (const auto& [p, n] : towers)
      emit("AR008", Severity::info,
           std::to_string(n) + " tensor(s) under " + p + "* belong to a vision/audio tower or MTP head: "
           "recognised and left unchecked",
           in.index_file, "", "");
    for (size_t i : unexpected) {
      const auto& t = in.tensors[i];
      std::string n(t.name);
      std::string hint = "mlx-lm's strict load rejects it (\"Received parameters not in model\"); transformers ignores "
                         "it with a warning";
      int64_t L = view.dim_or("L", 0);
      std::string lp = view.prefix + "layers." + std::to_string(L) + ".";
      if (starts_with(n, lp)) hint = "layer index = num_hidden_layers: an MTP layer? " + hint;
      if (companion_module(n))
        hint = "a quantization companion of a module the config does not imply; " + hint;
      std::vector<uint64_t> s(t.shape.begin(), t.shape.end());
      emit("AR002", Severity::error,
           "unexpected tensor " + n + " " + shape_str(s) + ": " + std::string(view.arch->model_type) +
               " with this config.json does not use it",
           std::string(t.file), n, hint);
    }
    for (const auto& [code, n] : overflow)
      sink.add(code, Severity::info, std::to_string(n) + " more " + code + " finding(s) not shown", "", "", "");
  }
};

}  // namespace

void set_layer_replay(bool on) { layer_replay_on.store(on); }
uint64_t layer_replays() { return layer_replay_count.load(); }
uint64_t layer_replay_position_hits() { return layer_replay_position_hit_count.load(); }

void check_conformance(const ConformanceInput& in, unsigned families, FindingSink& sink) {
  if (!in.config) return;
  Engine e(in, families, sink);
  e.run();
}

}  // namespace ckpt::arch

#include "ckpt/checkpoint.h"

namespace ckpt::arch {

ConformanceInput conformance_input(const Checkpoint& ck) {
  ConformanceInput in;
  in.config = ck.config.ok() ? &ck.config.value : nullptr;
  if (!ck.config.file.empty()) in.config_file = ck.config.file;
  if (ck.index) in.index_file = ck.index->json.file;
  in.tensors.reserve(ck.weights().size());
  for (const auto& [name, w] : ck.weights()) {
    if (!w.entry) continue;
    in.tensors.push_back(ActualTensor{name, w.entry->dtype, w.entry->shape,
                                      w.shard ? std::string_view(w.shard->file) : std::string_view(),
                                      w.entry->name_hash});
  }
  return in;
}

namespace {
struct FamilyCache {
  const Checkpoint* ck = nullptr;
  std::string root;
  size_t tensors = 0;
  unsigned remaining = 0;
  std::vector<Finding> pending[3];
};
thread_local FamilyCache g_cache;
int slot(unsigned family) { return family == kCF ? 0 : family == kAR ? 1 : 2; }
}  // namespace

void run_family(const Checkpoint& ck, unsigned family, FindingSink& sink) {
  FamilyCache& c = g_cache;
  if (c.ck == &ck && c.root == ck.root.string() && c.tensors == ck.weights().size() && (c.remaining & family)) {
    for (auto& f : c.pending[slot(family)]) sink.add(std::move(f));
    c.pending[slot(family)].clear();
    c.remaining &= ~family;
    if (!c.remaining) c.ck = nullptr;
    return;
  }
  ConformanceInput in = conformance_input(ck);
  if (!in.config) return;
  unsigned all = kCF | (in.tensors.empty() ? 0u : (kAR | kQZ));
  if (!(all & family)) return;
  FindingSink tmp;
  check_conformance(in, all, tmp);
  c = FamilyCache{};
  for (auto& f : tmp.findings()) {
    unsigned fam = f.code[0] == 'C' ? kCF : f.code[0] == 'A' ? kAR : kQZ;
    if (fam == family) sink.add(std::move(f));
    else c.pending[slot(fam)].push_back(std::move(f));
  }
  c.remaining = all & ~family;
  if (c.remaining) {
    c.ck = &ck;
    c.root = ck.root.string();
    c.tensors = ck.weights().size();
  }
}

}  // namespace ckpt::arch
