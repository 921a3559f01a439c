// Parameter and byte accounting: every tensor a loader sees, by component and dtype, packed
// quantized weights at their logical element count, quantization companions as bytes only.
#include <algorithm>
#include <cstring>
#include <unordered_map>

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

bool has_component(std::string_view p, std::initializer_list<std::string_view> names) {
  bool hit = false;
  for_components(p, [&](std::string_view c) {
    for (auto n : names)
      if (c == n) return hit = true;
    return false;
  });
  return hit;
}

// The decoder layer index of "...layers.<n>." (the first such pair), or -1.
int64_t layer_index(std::string_view name) {
  bool next = false;
  int64_t out = -1;
  for_components(name, [&](std::string_view c) {
    if (next) {
      if (all_digits(c) && c.size() < 10) out = std::stoll(std::string(c));
      return true;
    }
    next = c == "layers";
    return false;
  });
  return out;
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
  for (auto s : quant::companion_suffixes())
    if (s != "_blocks" && ends_with(name, s) && s.size() > best.size()) best = s;
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
  if (has_component(name, {"vision_tower", "visual", "vision_model", "audio_tower", "audio_model",
                           "multi_modal_projector", "embed_vision", "embed_audio", "mm_projector",
                           "vision_encoder", "audio_encoder"}))
    return Component::Towers;
  if (starts_with(name, "mtp.") || has_component(name, {"mtp_layers", "mtp"})) return Component::Mtp;
  if (layers > 0) {
    const int64_t li = layer_index(name);
    if (li >= layers) return Component::Mtp;
  }
  if (has_component(name, {"experts", "switch_mlp"})) return Component::RoutedExperts;
  bool shared = false;
  for_components(name, [&](std::string_view c) { return shared = starts_with(c, "shared_expert"); });
  if (shared) return Component::SharedExperts;
  const std::string_view module = module_of(name);
  const std::string_view last = last_component(module);
  if ((!view.head.empty() && module == module_of(view.head)) || last == "lm_head")
    return Component::OutputHead;
  if (last == "embed_tokens" || last == "embed_tokens_per_layer" || last == "wte" ||
      last == "word_embeddings" || last == "tok_embeddings")
    return Component::Embedding;
  if (last.find("norm") != std::string_view::npos || starts_with(last, "ln_")) return Component::Norms;
  if (has_component(name, {"self_attn", "linear_attn", "attn", "attention", "self_attention"}))
    return Component::Attention;
  if (has_component(name, {"mlp", "block_sparse_moe", "feed_forward", "ffn", "router", "moe"}))
    return Component::Mlp;
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
  std::unordered_map<std::string, uint64_t> quantized_module_bytes;  // module -> bytes of its tensors
  uint64_t main_embedding_params = 0;
  const std::string main_embedding = view.prefix.empty() ? std::string() : view.prefix + "embed_tokens";
  bool unknown_bits = false, overflow = false;

  for (const auto& [name, wt] : ck.weights()) {
    const st::TensorEntry& e = *wt.entry;
    TensorCost tc;
    const uint64_t bytes = e.end >= e.begin ? e.end - e.begin : 0;
    const uint64_t numel = numel_of(e.shape, &overflow);
    tc.bytes = bytes;
    Role role = quant_role(name, e.dtype, declared);
    std::string_view module = role.kind == Role::Plain ? module_of(name) : role.module;
    tc.component = classify(role.kind == Role::Plain ? name : module, view, L);

    if (!arch::dropped_by_loaders(name).empty()) tc.loaded = false;
    if (view.arch && view.tied && name == view.head) tc.loaded = false;  // the tie reuses the embedding

    if (role.kind == Role::Companion) {
      tc.companion = true;
      tc.module = std::string(module);
    } else if (role.kind == Role::Main) {
      tc.quantized = true;
      tc.module = std::string(module);
      int bits = 0;
      if (scheme) {
        const bool emb = last_component(module).starts_with("embed");
        auto mq = scheme->for_module(module, emb ? arch::ModuleKind::Embedding : arch::ModuleKind::Linear, 0,
                                     quant::Evidence::HasScales);
        if (mq.quantized) bits = mq.bits;
        if (!bits) bits = scheme->base.bits;
      }
      const uint32_t storage = st::dtype_bits(e.dtype);
      const bool unpacked = e.dtype == st::DType::F4 || e.dtype == st::DType::F8_E4M3 ||
                            e.dtype == st::DType::F8_E5M2 || e.dtype == st::DType::F8_E4M3FNUZ ||
                            e.dtype == st::DType::F8_E5M2FNUZ ||
                            (e.dtype == st::DType::I8 && ends_with(name, ".weight"));
      if (unpacked) {
        tc.params = numel;
        if (!bits) bits = static_cast<int>(storage);
      } else {
        if (bits <= 0 || bits > 16) {
          bits = 4;  // every modelled packed format that declares no width is 4-bit
          unknown_bits = true;
        }
        if (auto exact = plan_numel(name, module, e.shape)) tc.params = *exact;
        else tc.params = static_cast<uint64_t>((static_cast<unsigned __int128>(numel) * storage) / bits);
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
      auto& d = out.params.by_dtype[std::string(st::dtype_name(e.dtype))];
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
      if (tc.quantized || tc.companion) quantized_module_bytes[tc.module] += bytes;
    }
    out.bytes.tensor_data += bytes;
    if (opts.keep_tensors) {
      tc.name = std::string(name);
      out.tensors.push_back(std::move(tc));
    }
  }
  // A companion counts toward the quantized bytes only when its module's weight is packed on
  // disk (an FP8 KV-cache scale beside a float weight is not weight quantization).
  std::unordered_map<std::string_view, bool> is_quantized_module;
  if (!quantized_module_bytes.empty()) {
    for (const auto& [name, wt] : ck.weights()) {
      Role r = quant_role(name, wt.entry->dtype, declared);
      if (r.kind == Role::Main) is_quantized_module[r.module] = true;
    }
    for (const auto& [m, b] : quantized_module_bytes)
      if (is_quantized_module.count(m)) out.quant.quantized_bytes += b;
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
