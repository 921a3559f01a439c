// Parameter and byte accounting: every tensor a loader sees, by component and dtype, packed
// quantized weights at their logical element count, quantization companions as bytes only.
#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "ckpt/quant.h"
#include "inspect/internal.h"

namespace ckpt::inspect {

namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}
bool starts_with(std::string_view s, std::string_view pre) { return s.substr(0, pre.size()) == pre; }

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Calls f(component) for each '.'-separated component of a path.
template <class F>
void for_components(std::string_view p, F&& f) {
  size_t start = 0;
  while (start <= p.size()) {
    size_t dot = p.find('.', start);
    if (dot == std::string_view::npos) dot = p.size();
    if (f(p.substr(start, dot - start))) return;
    start = dot + 1;
  }
}

std::string_view last_component(std::string_view module) {
  auto dot = module.rfind('.');
  return dot == std::string_view::npos ? module : module.substr(dot + 1);
}

// The module path of a tensor name (without ".weight"/".bias"): "a.b.q_proj.weight" -> "a.b.q_proj".
std::string_view module_of(std::string_view name) {
  for (std::string_view s : {".weight", ".bias"})
    if (ends_with(name, s)) return name.substr(0, name.size() - s.size());
  return name;
}

bool is_float(st::DType d) {
  return d == st::DType::F16 || d == st::DType::BF16 || d == st::DType::F32 || d == st::DType::F64;
}

uint64_t numel_of(const st::Shape& s, bool* overflow) {
  uint64_t n = 1;
  for (uint64_t d : s) {
    if (d != 0 && n > UINT64_MAX / d) {
      *overflow = true;
      return 0;
    }
    n *= d;
  }
  return n;
}

// Quantization role of a tensor, by the names the schemes give their tensors
// (specs/quantization-layouts.md §1-§8; quant::companion_suffixes()).
struct Role {
  enum Kind : uint8_t { Plain, Main, Companion } kind = Plain;
  std::string_view module;
};

Role quant_role(std::string_view name, st::DType dtype, bool declared) {
  Role r;
  // packed weights named by their scheme
  for (std::string_view s : {".qweight", ".weight_packed"})
    if (ends_with(name, s)) return {Role::Main, name.substr(0, name.size() - s.size())};
  if (ends_with(name, "_blocks") && dtype == st::DType::U8)
    return {Role::Main, name.substr(0, name.size() - 7)};
  if (!declared) return r;
  std::string_view best;
  const char last = name.empty() ? '\0' : name.back();
  for (auto s : quant::companion_suffixes())  // the last byte first: most names end in "weight"
    if (s.back() == last && s != "_blocks" && ends_with(name, s) && s.size() > best.size()) best = s;
  if (!best.empty()) return {Role::Companion, name.substr(0, name.size() - best.size())};
  if (ends_with(name, ".weight") && !is_float(dtype) && dtype != st::DType::Unknown)
    return {Role::Main, name.substr(0, name.size() - 7)};
  return r;
}

std::string pattern_of(std::string_view module) {
  std::string out;
  for_components(module, [&](std::string_view c) {
    if (!out.empty()) out += '.';
    out += all_digits(c) ? std::string("*") : std::string(c);
    return false;
  });
  return out;
}

}  // namespace

std::string_view component_key(Component c) {
  switch (c) {
    case Component::Embedding: return "embedding";
    case Component::OutputHead: return "output_head";
    case Component::Attention: return "attention";
    case Component::Mlp: return "mlp";
    case Component::RoutedExperts: return "routed_experts";
    case Component::SharedExperts: return "shared_experts";
    case Component::Mtp: return "mtp";
    case Component::Towers: return "towers";
    case Component::Norms: return "norms";
    case Component::Other: return "other";
    case Component::Count_: break;
  }
  return "other";
}

Component classify(std::string_view name, const arch::ConfigView& view, int64_t layers) {
  for (const auto& p : view.tower_prefixes)
    if (p != "mtp." && starts_with(name, p)) return Component::Towers;
  if (starts_with(name, "mtp.")) return Component::Mtp;
  // one pass over the dotted components
  bool experts = false, shared = false, attn = false, mlp = false, after_layers = false;
  int64_t layer = -1;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    const std::string_view c = name.substr(start, dot - start);
    start = dot + 1;
    if (after_layers) {
      after_layers = false;
      if (layer < 0 && all_digits(c) && c.size() < 10) {
        layer = 0;
        for (char ch : c) layer = layer * 10 + (ch - '0');
      }
    }
    switch (c.size() ? c[0] : '\0') {
      case 'a':
        if (c == "attn" || c == "attention") attn = true;
        else if (c == "audio_tower" || c == "audio_model" || c == "audio_encoder") return Component::Towers;
        break;
      case 'b': if (c == "block_sparse_moe") mlp = true; break;
      case 'e':
        if (c == "experts") experts = true;
        else if (c == "embed_vision" || c == "embed_audio") return Component::Towers;
        break;
      case 'f': if (c == "feed_forward" || c == "ffn") mlp = true; break;
      case 'l':
        if (c == "layers") after_layers = true;
        else if (c == "linear_attn") attn = true;
        break;
      case 'm':
        if (c == "mlp" || c == "moe") mlp = true;
        else if (c == "mtp" || c == "mtp_layers") return Component::Mtp;
        else if (c == "multi_modal_projector" || c == "mm_projector") return Component::Towers;
        break;
      case 'r': if (c == "router") mlp = true; break;
      case 's':
        if (c == "self_attn" || c == "self_attention") attn = true;
        else if (c == "switch_mlp") experts = true;
        else if (starts_with(c, "shared_expert")) shared = true;
        break;
      case 'v':
        if (c == "vision_tower" || c == "visual" || c == "vision_model" || c == "vision_encoder")
          return Component::Towers;
        break;
      default: break;
    }
    if (dot == name.size()) break;
  }
  if (layers > 0 && layer >= layers) return Component::Mtp;
  if (experts) return Component::RoutedExperts;
  if (shared) return Component::SharedExperts;
  const std::string_view module = module_of(name);
  const std::string_view last = last_component(module);
  if ((!view.head.empty() && module == module_of(view.head)) || last == "lm_head") return Component::OutputHead;
  if (last == "embed_tokens" || last == "embed_tokens_per_layer" || last == "wte" || last == "word_embeddings" ||
      last == "tok_embeddings")
    return Component::Embedding;
  if (last.find("norm") != std::string_view::npos || starts_with(last, "ln_")) return Component::Norms;
  if (attn) return Component::Attention;
  if (mlp) return Component::Mlp;
  return Component::Other;
}

void account(const Checkpoint& ck, const Context& cx, const Options& opts, Inspection& out) {
  const arch::ConfigView& view = cx.view;
  const quant::QuantScheme* scheme = cx.scheme ? &*cx.scheme : nullptr;
  const bool declared = scheme && scheme->method != quant::Method::None;
  const int64_t L = out.model.layers;

  // Formats whose packing rounds (bnb 4-bit flattens, pack-quantized and 3/5/6-bit words use
  // ceil): the registry's plan gives the exact logical shape when its packed shape is the
  // stored one. Built on first need only.
  bool plan_built = false;
  std::unordered_map<std::string, std::vector<uint64_t>> packed_plan;  // tensor name -> shape
  std::unordered_map<std::string, uint64_t> float_plan;                 // module -> numel
  auto plan_numel = [&](std::string_view name, std::string_view module, const st::Shape& stored)
      -> std::optional<uint64_t> {
    if (!view.arch || !scheme) return std::nullopt;
    if (!plan_built) {
      plan_built = true;
      for (auto& t : arch::expected_tensors(view, scheme)) packed_plan.emplace(t.name, std::move(t.shape));
      for (auto& t : arch::expected_tensors(view, nullptr)) {
        if (t.kind != arch::ModuleKind::Linear && t.kind != arch::ModuleKind::Embedding) continue;
        uint64_t n = 1;
        for (auto d : t.shape) n *= d;
        float_plan.emplace(std::string(t.module()), n);
      }
    }
    auto p = packed_plan.find(std::string(name));
    if (p == packed_plan.end() || !(stored == p->second)) return std::nullopt;
    auto f = float_plan.find(std::string(module));
    if (f == float_plan.end()) return std::nullopt;
    return f->second;
  };

  std::map<std::string, FloatModule> float_modules;
  // Companion bytes count toward the quantized bytes when their module's packed weight is on
  // disk. A module's tensors are consecutive in sorted names (MLX: biases, scales, weight), so
  // runs of one module are settled as they end; a run without its weight waits in `orphans`
  // for a weight elsewhere (views into the entries' names, which the checkpoint keeps).
  std::string_view run_module;
  uint64_t run_bytes = 0;
  bool run_main = false;
  std::vector<std::pair<std::string_view, uint64_t>> orphans;
  std::vector<std::string_view> mains;
  auto settle_run = [&] {
    if (run_bytes || run_main) {
      if (run_main) out.quant.quantized_bytes += run_bytes;
      else orphans.emplace_back(run_module, run_bytes);
    }
    run_bytes = 0;
    run_main = false;
  };
  std::array<Tally, kDTypeCount> by_dtype{};
  uint64_t main_embedding_params = 0;
  const std::string main_embedding = view.prefix.empty() ? std::string() : view.prefix + "embed_tokens";
  bool unknown_bits = false, overflow = false;
  const bool rounding_format = scheme && (scheme->base.format == quant::Format::Bnb4bit ||
                                          scheme->base.format == quant::Format::CtPacked);
  const std::string_view head = view.head;

  for (const auto& [name, wt] : ck.weights()) {
    const st::TensorEntry& e = *wt.entry;
    TensorCost tc;
    const uint64_t bytes = e.end >= e.begin ? e.end - e.begin : 0;
    const uint64_t numel = numel_of(e.shape, &overflow);
    tc.bytes = bytes;
    Role role = quant_role(name, e.dtype, declared);
    std::string_view module = role.kind == Role::Plain ? module_of(name) : role.module;
    tc.component = classify(role.kind == Role::Plain ? name : module, view, L);

    if (ends_with(name, "inv_freq") || ends_with(name, "_cached"))
      if (!arch::dropped_by_loaders(name).empty()) tc.loaded = false;
    if (view.arch && view.tied && name == head) tc.loaded = false;  // the tie reuses the embedding

    if (role.kind == Role::Companion) {
      tc.companion = true;
    } else if (role.kind == Role::Main) {
      tc.quantized = true;
      const uint32_t storage = st::dtype_bits(e.dtype);
      const bool unpacked = e.dtype == st::DType::F4 || e.dtype == st::DType::F8_E4M3 ||
                            e.dtype == st::DType::F8_E5M2 || e.dtype == st::DType::F8_E4M3FNUZ ||
                            e.dtype == st::DType::F8_E5M2FNUZ ||
                            (e.dtype == st::DType::I8 && ends_with(name, ".weight"));
      int bits = 0;
      // float8 and float4 elements are stored one per element: their width is the dtype's. Packed
      // integer words (and int8 that may hold fewer bits) take the width the loader resolves.
      if (scheme && !(unpacked && e.dtype != st::DType::I8)) {
        const bool emb = last_component(module).starts_with("embed");
        auto mq = scheme->for_module(module, emb ? arch::ModuleKind::Embedding : arch::ModuleKind::Linear, 0,
                                     quant::Evidence::HasScales);
        if (mq.quantized) bits = mq.bits;
        if (!bits) bits = scheme->base.bits;
      }
      if (unpacked) {
        tc.params = numel;
        if (!bits) bits = static_cast<int>(storage);
      } else {
        if (bits <= 0 || bits > 16) {
          bits = 4;  // every modelled packed format that declares no width is 4-bit
          unknown_bits = true;
        }
        std::optional<uint64_t> exact;
        if (rounding_format || 32 % bits != 0) exact = plan_numel(name, module, e.shape);
        tc.params = exact ? *exact : static_cast<uint64_t>((static_cast<unsigned __int128>(numel) * storage) / bits);
      }
      tc.bits = bits;
    } else {
      tc.params = numel;
      if (declared && is_float(e.dtype) && e.shape.size() >= 2 && ends_with(name, ".weight") &&
          tc.component != Component::Norms && tc.component != Component::Towers) {
        std::string pat = pattern_of(module);
        auto& fm = float_modules[pat];
        fm.pattern = pat;
        fm.count++;
        fm.params += numel;
      }
    }
    if (tc.component == Component::Embedding && tc.loaded && module == main_embedding)
      main_embedding_params += tc.params;

    // tallies
    if (!tc.loaded) {
      out.params.not_loaded.params += tc.params;
      out.params.not_loaded.bytes += bytes;
      out.params.not_loaded.tensors++;
      out.bytes.not_loaded += bytes;
    } else {
      auto& t = out.params.by_component[static_cast<size_t>(tc.component)];
      t.params += tc.params;
      t.bytes += bytes;
      t.tensors++;
      auto& d = by_dtype[std::min(static_cast<size_t>(e.dtype), by_dtype.size() - 1)];
      d.params += tc.params;
      d.bytes += bytes;
      d.tensors++;
      out.params.total += tc.params;
      if (tc.component == Component::Mtp) out.bytes.mtp += bytes;
      else out.bytes.in_memory += bytes;
      if (tc.component == Component::Towers) out.bytes.towers += bytes;
      if (tc.quantized) {
        out.quant.quantized_modules++;
        out.quant.quantized_params += tc.params;
        out.quant.params_by_bits[tc.bits] += tc.params;
      }
      if (tc.quantized || tc.companion) {
        if (module != run_module) {
          settle_run();
          run_module = module;
        }
        run_bytes += bytes;
        if (tc.quantized) {
          run_main = true;
          mains.push_back(module);
        }
      }
    }
    out.bytes.tensor_data += bytes;
    if (opts.keep_tensors) {
      tc.name = std::string(name);
      if (tc.quantized || tc.companion) tc.module = std::string(module);
      out.tensors.push_back(std::move(tc));
    }
  }
  for (size_t i = 0; i < by_dtype.size(); ++i)
    if (by_dtype[i].tensors) out.params.by_dtype[std::string(st::dtype_name(static_cast<st::DType>(i)))] = by_dtype[i];
  settle_run();
  if (!orphans.empty()) {  // unsorted names: look the weights up (a scale beside a float weight stays out)
    std::sort(mains.begin(), mains.end());
    for (const auto& [m, b] : orphans)
      if (std::binary_search(mains.begin(), mains.end(), m)) out.quant.quantized_bytes += b;
  }
  if (out.quant.quantized_params)
    out.quant.effective_bits = static_cast<double>(out.quant.quantized_bytes) * 8.0 /
                               static_cast<double>(out.quant.quantized_params);
  out.quant.quantized = declared || out.quant.quantized_modules > 0;
  for (auto& [p, fm] : float_modules) out.quant.float_modules.push_back(fm);
  if (unknown_bits)
    out.notes.push_back("some packed weights have no declared bit width; they were unpacked as 4-bit");
  if (overflow) out.notes.push_back("a tensor shape overflows 64 bits; it was counted as 0 parameters");

  for (const auto& f : ck.files)
    if (f.readable()) out.bytes.files += f.size;
  for (const auto& s : ck.shards) out.bytes.shards += s.header.file_size;

  // active parameters: routed experts at num_experts_per_tok / E, everything else of the text
  // model in full (MTP layers and towers are not part of a token's text forward pass)
  const auto& C = out.params.by_component;
  auto comp = [&](Component c) { return C[static_cast<size_t>(c)].params; };
  uint64_t dense = 0;
  for (size_t i = 0; i < kComponents; ++i) {
    auto c = static_cast<Component>(i);
    if (c == Component::RoutedExperts || c == Component::Mtp || c == Component::Towers) continue;
    dense += C[i].params;
  }
  const uint64_t routed = comp(Component::RoutedExperts);
  const int64_t E = out.model.experts, k = out.model.experts_per_token;
  uint64_t routed_active = routed;
  if (routed > 0) {
    if (E > 0 && k > 0 && k <= E)
      routed_active = static_cast<uint64_t>(static_cast<unsigned __int128>(routed) * k / E);
    else
      out.notes.push_back("routed experts are on disk but the config gives no usable expert count and "
                          "experts per token; active parameters count every expert");
  }
  out.params.active = dense + routed_active;
  // The input embedding is a row lookup per token; when tied it is also the output head's matmul.
  uint64_t lookup = comp(Component::Embedding);
  if (view.tied) lookup -= std::min(lookup, main_embedding_params);
  out.params.active_excluding_embedding = out.params.active - std::min(out.params.active, lookup);

  // the declaration
  if (scheme && declared) {
    out.quant.method = std::string(quant::method_name(scheme->method));
    out.quant.format = std::string(quant::format_name(scheme->base.format));
    out.quant.bits = scheme->base.bits;
    out.quant.group_size = scheme->base.group_size;
    auto& ex = out.quant.declared_exclusions;
    for (const auto& s : scheme->ignore) ex.push_back(s);
    for (const auto& s : scheme->not_convert) ex.push_back(s);
    for (const auto& [k2, v] : scheme->mlx_overrides)
      if (!v) ex.push_back(k2);
    for (const auto& [k2, v] : scheme->dynamic)
      if (!v) ex.push_back("-:" + k2);
    for (const auto& g : scheme->groups)
      if (!out.quant.bits && g.weights.bits) {
        out.quant.bits = g.weights.bits;
        out.quant.group_size = g.weights.group_size;
        out.quant.format = std::string(quant::format_name(g.weights.format));
      }
  } else if (out.quant.quantized_modules > 0) {
    out.notes.push_back("packed weights are on disk but config.json declares no quantization");
  }
}

}  // namespace ckpt::inspect
