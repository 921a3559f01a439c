// Quantization declarations and the loaders' per-module predicates
// (specs/quantization-layouts.md §1b/§1c MLX, §2a compressed-tensors, §3 GPTQ, §4 AWQ,
// §5 AutoRound, §6 bitsandbytes, §7 FP8, §8 gpt-oss, §10 predicates).
#include <algorithm>
#include <map>
#include <mutex>
#include <regex>

#include "ckpt/quant.h"

namespace ckpt::quant {

using arch::ModuleKind;

std::string_view method_name(Method m) {
  switch (m) {
    case Method::None: return "none";
    case Method::MLX: return "mlx";
    case Method::CompressedTensors: return "compressed-tensors";
    case Method::GPTQ: return "gptq";
    case Method::AWQ: return "awq";
    case Method::AutoRound: return "auto-round";
    case Method::FP8: return "fp8";
    case Method::BitsAndBytes: return "bitsandbytes";
    case Method::MXFP4: return "mxfp4";
    case Method::Unknown: return "unknown";
  }
  return "?";
}

namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}
bool starts_with(std::string_view s, std::string_view pre) { return s.substr(0, pre.size()) == pre; }

// Python re.match (anchored at the start, not at the end), with compiled patterns cached.
bool re_match(const std::string& pattern, std::string_view text) {
  static std::mutex mu;
  static std::map<std::string, std::optional<std::regex>> cache;
  const std::regex* re = nullptr;
  {
    std::lock_guard lk(mu);
    auto it = cache.find(pattern);
    if (it == cache.end()) {
      std::optional<std::regex> r;
      try {
        if (pattern.size() < 2000) r.emplace(pattern, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error&) {
      }
      it = cache.emplace(pattern, std::move(r)).first;
    }
    if (!it->second) return false;
    re = &*it->second;
  }
  try {
    return std::regex_search(text.begin(), text.end(), *re, std::regex_constants::match_continuous);
  } catch (const std::regex_error&) {
    return false;
  }
}

// "model.layers.*.self_attn" style globs (gpt-oss modules_to_not_convert)
bool glob_prefix_match(std::string_view pat, std::string_view text) {
  // '*' matches one dotted component or more; the pattern must match a prefix of text
  // ending at a component boundary.
  size_t p = 0, t = 0;
  while (p < pat.size()) {
    if (pat[p] == '*') {
      ++p;
      if (t >= text.size()) return false;
      while (t < text.size() && text[t] != '.') ++t;
      continue;
    }
    if (t >= text.size() || pat[p] != text[t]) return false;
    ++p;
    ++t;
  }
  return t == text.size() || text[t] == '.';
}

std::string strip_prefixes(std::string_view m) {
  for (std::string_view p : {"language_model.model.", "model.language_model.", "language_model."})
    if (starts_with(m, p)) return "model." + std::string(m.substr(p.size()));
  return std::string(m);
}

bool is_head(std::string_view m) { return m == "lm_head" || ends_with(m, ".lm_head"); }
bool is_router(std::string_view m) {
  return ends_with(m, "mlp.gate") || ends_with(m, ".router") || ends_with(m, "shared_expert_gate") ||
         ends_with(m, "block_sparse_moe.gate") || ends_with(m, "router.proj");
}

int get_int(const json::Value& o, std::initializer_list<const char*> keys, int def,
            std::vector<std::string>* problems = nullptr) {
  for (auto k : keys) {
    const auto* v = o.find(k);
    if (!v || v->is_null()) continue;
    if (v->is_int()) return static_cast<int>(std::clamp<int64_t>(v->as_int(), -1, 1 << 20));
    if (problems) problems->push_back(std::string(k) + " is not an integer");
  }
  return def;
}
bool get_bool(const json::Value& o, const char* k, bool def) {
  const auto* v = o.find(k);
  return v && v->is_bool() ? v->as_bool() : def;
}
std::vector<std::string> str_list(const json::Value* v) {
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) out.push_back(v->as_string());
  if (v->is_array())
    for (const auto& e : v->as_array()) {
      if (e.is_string()) out.push_back(e.as_string());
      if (e.is_array())
        for (const auto& f : e.as_array())
          if (f.is_string()) out.push_back(f.as_string());
    }
  return out;
}

ModuleQuant mlx_entry(const json::Value& o, const ModuleQuant& base) {
  ModuleQuant q = base;
  q.quantized = true;
  std::string mode = o.get_string("mode").value_or("");
  if (mode.empty()) {
    if (base.format == Format::MlxMxfp4) mode = "mxfp4";
    else if (base.format == Format::MlxNvfp4) mode = "nvfp4";
    else if (base.format == Format::MlxMxfp8) mode = "mxfp8";
    else mode = "affine";
  }
  int gdef = mode == "nvfp4" ? 16 : mode == "mxfp4" || mode == "mxfp8" ? 32 : 64;
  int bdef = mode == "mxfp8" ? 8 : 4;
  q.bits = get_int(o, {"bits"}, base.bits > 0 && mode == "affine" ? base.bits : bdef);
  q.group_size = get_int(o, {"group_size"}, base.group_size > 0 && mode == "affine" ? base.group_size : gdef);
  q.format = mode == "mxfp4"   ? Format::MlxMxfp4
             : mode == "nvfp4" ? Format::MlxNvfp4
             : mode == "mxfp8" ? Format::MlxMxfp8
                               : Format::MlxAffine;
  q.symmetric = q.format != Format::MlxAffine;
  return q;
}

Format ct_format(std::string_view fmt, const ModuleQuant& w, bool has_act, bool is_float) {
  if (fmt == "pack-quantized") return Format::CtPacked;
  if (fmt == "int-quantized") return Format::CtInt;
  if (fmt == "naive-quantized") return is_float ? Format::CtFloat : Format::CtInt;
  if (fmt == "float-quantized") return Format::CtFloat;
  if (fmt == "nvfp4-pack-quantized") return Format::CtNvfp4;
  if (fmt == "mxfp4-pack-quantized") return Format::CtMxfp4;
  if (fmt == "mxfp8-quantized") return Format::CtFloat;
  // mixed-precision / absent: infer like llm-compressor does
  if (is_float) {
    if (w.bits == 4) return w.group_size == 16 ? Format::CtNvfp4 : Format::CtMxfp4;
    return Format::CtFloat;
  }
  return has_act ? Format::CtInt : Format::CtPacked;
}

void parse_mlx(const json::Value& q, QuantScheme& s) {
  s.base = mlx_entry(q, ModuleQuant{});
  for (const auto& [k, v] : q.as_object()) {
    if (k == "group_size" || k == "bits" || k == "mode" || k == "quant_method") continue;
    if (v.is_bool() && !v.as_bool()) {
      s.mlx_overrides.emplace_back(k, std::nullopt);
    } else if (v.is_object()) {
      s.mlx_overrides.emplace_back(k, mlx_entry(v, s.base));
    } else {
      s.problems.push_back("quantization." + k + " is neither an object nor false");
    }
  }
}

void parse_ct(const json::Value& q, QuantScheme& s) {
  std::string top = q.get_string("format").value_or("");
  s.ignore = str_list(q.find("ignore"));
  const auto* groups = q.find("config_groups");
  if (!groups || !groups->is_object()) {
    s.problems.push_back("compressed-tensors config has no config_groups object");
    return;
  }
  for (const auto& [name, g] : groups->as_object()) {
    if (!g.is_object()) continue;
    ConfigGroup cg;
    cg.name = name;
    cg.targets = str_list(g.find("targets"));
    const auto* ia = g.find("input_activations");
    cg.has_input_activations = ia && ia->is_object();
    const auto* w = g.find("weights");
    if (!w || !w->is_object()) {
      cg.weights.quantized = false;
      s.groups.push_back(std::move(cg));
      continue;
    }
    ModuleQuant& m = cg.weights;
    m.quantized = true;
    m.bits = get_int(*w, {"num_bits"}, 8, &s.problems);
    m.group_size = get_int(*w, {"group_size"}, 0, &s.problems);
    m.symmetric = get_bool(*w, "symmetric", true);
    bool is_float = w->get_string("type").value_or("int") == "float";
    m.strategy = w->get_string("strategy").value_or("");
    if (m.strategy.empty()) m.strategy = m.group_size > 0 ? "group" : m.group_size == -1 ? "channel" : "tensor";
    if (const auto* bs = w->find("block_structure"); bs && bs->is_array() && bs->as_array().size() == 2 &&
                                                     bs->as_array()[0].is_int() && bs->as_array()[1].is_int()) {
      m.block_rows = static_cast<int>(bs->as_array()[0].as_int());
      m.block_cols = static_cast<int>(bs->as_array()[1].as_int());
    }
    if (const auto* ao = w->find("actorder"))
      m.g_idx = (ao->is_string() && (ao->as_string() == "group" || ao->as_string() == "dynamic")) ||
                (ao->is_bool() && ao->as_bool());
    std::string fmt = g.get_string("format").value_or(top);
    if (fmt == "mixed-precision") fmt.clear();
    m.format = ct_format(fmt, m, cg.has_input_activations, is_float);
    m.reason = "config group \"" + name + "\"";
    s.groups.push_back(std::move(cg));
  }
}

void parse_gptq_like(const json::Value& q, QuantScheme& s) {
  s.base.quantized = true;
  s.base.format = Format::GPTQ;
  s.base.bits = get_int(q, {"bits", "w_bit"}, 4, &s.problems);
  s.base.group_size = get_int(q, {"group_size", "q_group_size"}, 128, &s.problems);
  s.base.symmetric = get_bool(q, "sym", true);
  s.base.g_idx = get_bool(q, "desc_act", false);
  s.lm_head = get_bool(q, "lm_head", false);
  s.modules_in_block = str_list(q.find("modules_in_block_to_quantize"));
  if (const auto* d = q.find("dynamic"); d && d->is_object()) {
    for (const auto& [k, v] : d->as_object()) {
      if (starts_with(k, "-:")) {
        s.dynamic.emplace_back(k.substr(2), std::nullopt);
      } else {
        ModuleQuant m = s.base;
        if (v.is_object()) {
          m.bits = get_int(v, {"bits"}, m.bits);
          m.group_size = get_int(v, {"group_size"}, m.group_size);
          m.symmetric = get_bool(v, "sym", m.symmetric);
          m.g_idx = get_bool(v, "desc_act", m.g_idx);
        }
        s.dynamic.emplace_back(starts_with(k, "+:") ? k.substr(2) : k, m);
      }
    }
  }
}

}  // namespace

std::optional<QuantScheme> parse_scheme(const json::Value& config) {
  if (!config.is_object()) return std::nullopt;
  QuantScheme s;
  const json::Value* q = nullptr;
  // MLX: "quantization" without quant_method (quantization_config is an identical copy)
  if (const auto* mq = config.find("quantization"); mq && mq->is_object() && !mq->find("quant_method")) {
    s.method = Method::MLX;
    s.source = "quantization";
    parse_mlx(*mq, s);
    return s;
  }
  for (auto [key, src] : {std::pair{"quantization_config", "quantization_config"},
                          std::pair{"compression_config", "compression_config"}}) {
    if (const auto* c = config.find(key); c && c->is_object()) {
      q = c;
      s.source = src;
      break;
    }
  }
  if (!q)
    if (const auto* tc = config.find("text_config"); tc && tc->is_object())
      if (const auto* c = tc->find("quantization_config"); c && c->is_object()) {
        q = c;
        s.source = "text_config.quantization_config";
      }
  if (!q) return std::nullopt;
  auto qm = q->get_string("quant_method");
  if (!qm) {
    if (q->find("bits") || q->find("group_size")) {  // an MLX copy without "quantization"
      s.method = Method::MLX;
      parse_mlx(*q, s);
      return s;
    }
    if (s.source == "compression_config" || q->find("config_groups")) {
      s.method = Method::CompressedTensors;
      parse_ct(*q, s);
      return s;
    }
    s.method = Method::Unknown;
    s.problems.push_back(s.source + " has no quant_method");
    return s;
  }
  s.raw_method = *qm;
  const std::string& m = *qm;
  if (m == "compressed-tensors") {
    s.method = Method::CompressedTensors;
    parse_ct(*q, s);
  } else if (m == "gptq") {
    s.method = Method::GPTQ;
    parse_gptq_like(*q, s);
  } else if (m == "auto-round" || m == "autoround" || m == "intel/auto-round") {
    s.method = Method::AutoRound;
    parse_gptq_like(*q, s);
    std::string pf = q->get_string("packing_format").value_or("");
    if (pf == "auto_round:auto_awq") s.base.format = Format::AwqGemm;
    s.block_name = q->get_string("block_name_to_quantize").value_or("");
    if (const auto* ec = q->find("extra_config"); ec && ec->is_object())
      for (const auto& [k, v] : ec->as_object()) {
        if (!v.is_object()) continue;
        ModuleQuant mq = s.base;
        mq.bits = get_int(v, {"bits"}, mq.bits);
        mq.group_size = get_int(v, {"group_size"}, mq.group_size);
        mq.symmetric = get_bool(v, "sym", mq.symmetric);
        mq.quantized = mq.bits < 16;
        s.extra_config.emplace_back(k, mq);
      }
  } else if (m == "awq") {
    s.method = Method::AWQ;
    s.base.quantized = true;
    s.base.bits = get_int(*q, {"bits", "w_bit"}, 4, &s.problems);
    s.base.group_size = get_int(*q, {"group_size", "q_group_size"}, 128, &s.problems);
    s.base.symmetric = !get_bool(*q, "zero_point", true);
    std::string ver = q->get_string("version").value_or("gemm");
    for (auto& c : ver) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s.base.format = ver == "gemv" ? Format::AwqGemv : Format::AwqGemm;
    if (ver != "gemm" && ver != "gemv") s.problems.push_back("AWQ version \"" + ver + "\" is not modelled");
    s.not_convert = str_list(q->find("modules_to_not_convert"));
  } else if (m == "fp8") {
    s.method = Method::FP8;
    s.base.quantized = true;
    s.base.bits = 8;
    s.base.format = Format::Fp8Tensor;
    if (const auto* bs = q->find("weight_block_size"); bs && bs->is_array() && bs->as_array().size() == 2 &&
                                                       bs->as_array()[0].is_int() && bs->as_array()[1].is_int()) {
      s.base.format = Format::Fp8Block;
      s.base.block_rows = static_cast<int>(std::clamp<int64_t>(bs->as_array()[0].as_int(), 1, 1 << 20));
      s.base.block_cols = static_cast<int>(std::clamp<int64_t>(bs->as_array()[1].as_int(), 1, 1 << 20));
    }
    s.not_convert = str_list(q->find("modules_to_not_convert"));
    for (auto& x : str_list(q->find("ignored_layers"))) s.not_convert.push_back(x);
  } else if (m == "bitsandbytes" || m == "bitsandbytes_4bit" || m == "bitsandbytes_8bit") {
    s.method = Method::BitsAndBytes;
    s.base.quantized = true;
    bool b8 = get_bool(*q, "load_in_8bit", m == "bitsandbytes_8bit");
    s.base.format = b8 ? Format::BnbInt8 : Format::Bnb4bit;
    s.base.bits = b8 ? 8 : 4;
    s.base.g_idx = !b8 && get_bool(*q, "bnb_4bit_use_double_quant", false);
    s.not_convert = str_list(q->find("llm_int8_skip_modules"));
  } else if (m == "mxfp4") {
    s.method = Method::MXFP4;
    s.base.quantized = true;
    s.base.bits = 4;
    s.base.group_size = 32;
    s.base.format = Format::GptOssMxfp4;
    s.not_convert = str_list(q->find("modules_to_not_convert"));
  } else {
    s.method = Method::Unknown;
  }
  return s;
}

ModuleQuant QuantScheme::for_module(std::string_view module, ModuleKind kind, uint64_t in_features,
                                    Evidence evidence) const {
  ModuleQuant no;
  no.quantized = false;
  const bool linear_like = kind == ModuleKind::Linear || kind == ModuleKind::Embedding;
  switch (method) {
    case Method::None:
    case Method::Unknown:
      no.reason = "no modelled quantization";
      return no;

    case Method::MLX: {
      // mlx-lm class_predicate: an entry for the path (or its language_model. twin) wins
      std::string alt1 = "language_model." + std::string(module);
      std::string alt2 = starts_with(module, "language_model.") ? std::string(module.substr(15)) : "";
      for (const auto& [k, v] : mlx_overrides) {
        if (k == module || k == alt1 || (!alt2.empty() && k == alt2)) {
          if (!v) {
            no.reason = "quantization[\"" + k + "\"] is false";
            return no;
          }
          if (!linear_like) {
            no.reason = "the loader's module here has no to_quantized (it holds a bare array)";
            return no;
          }
          ModuleQuant q = *v;
          q.reason = "per-module entry quantization[\"" + k + "\"]";
          return q;
        }
      }
      if (!linear_like) {
        no.reason = kind == ModuleKind::ScaledLinear
                        ? "the loader builds this module as a plain array parameter with no "
                          "to_quantized, so it is never quantized"
                        : "not a Linear or Embedding";
        return no;
      }
      if (evidence == Evidence::NoScales) {
        no.reason = "no .scales on disk (mlx-lm quantizes exactly the modules that ship .scales)";
        return no;
      }
      if (evidence == Evidence::Unknown && base.group_size > 0 && in_features % base.group_size != 0) {
        no.reason = "in_features not divisible by group_size: mlx-lm leaves it float";
        return no;
      }
      ModuleQuant q = base;
      q.reason = "quantization defaults";
      return q;
    }

    case Method::CompressedTensors: {
      std::string name(module);
      for (const auto& ig : ignore) {
        bool hit = starts_with(ig, "re:") ? re_match(ig.substr(3), name) : ig == name;
        if (!hit && !starts_with(ig, "re:")) hit = strip_prefixes(name) == strip_prefixes(ig);
        if (hit) {
          no.reason = "ignore entry \"" + ig + "\"";
          return no;
        }
      }
      for (const auto& g : groups) {
        for (const auto& t : g.targets) {
          bool hit = false;
          if (starts_with(t, "re:")) {
            hit = re_match(t.substr(3), name);
          } else if (t == name) {
            hit = true;
          } else {
            std::string lt = t;
            for (auto& ch : lt) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            if (lt.find("linear") != std::string::npos) hit = kind == ModuleKind::Linear || kind == ModuleKind::ScaledLinear;
            if (lt == "embedding") hit = kind == ModuleKind::Embedding;
          }
          if (hit) {
            if (!g.weights.quantized) {
              no.reason = "config group \"" + g.name + "\" has no weight quantization";
              return no;
            }
            ModuleQuant q = g.weights;
            q.reason = "config group \"" + g.name + "\" (target \"" + t + "\")";
            return q;
          }
        }
      }
      no.reason = "no config group targets it";
      return no;
    }

    case Method::GPTQ:
    case Method::AutoRound: {
      std::string name(module);
      if (method == Method::AutoRound) {
        for (const auto& [k, v] : extra_config) {
          bool hit = k == name || strip_prefixes(k) == strip_prefixes(name);
          if (!hit && k.find_first_of("*^$[(\\") != std::string::npos) hit = re_match(k, name);
          if (hit) {
            if (!v.quantized) {
              no.reason = "extra_config[\"" + k + "\"] has bits >= 16";
              return no;
            }
            ModuleQuant q = v;
            q.reason = "extra_config[\"" + k + "\"]";
            return q;
          }
        }
      }
      if (kind != ModuleKind::Linear) {
        no.reason = "only Linear layers are quantized";
        return no;
      }
      if (is_head(module)) {
        if (lm_head) {
          ModuleQuant q = base;
          q.reason = "lm_head: true";
          return q;
        }
        no.reason = "the output head is not quantized (lm_head is not true)";
        return no;
      }
      std::optional<ModuleQuant> dyn;
      for (const auto& [pat, v] : dynamic) {
        if (re_match(pat, name)) {
          if (!v) {
            no.reason = "dynamic rule \"-:" + pat + "\"";
            return no;
          }
          dyn = *v;
          dyn->reason = "dynamic rule \"+:" + pat + "\"";
          break;
        }
      }
      if (!modules_in_block.empty()) {
        bool in = std::any_of(modules_in_block.begin(), modules_in_block.end(),
                              [&](const std::string& s) { return name.find(s) != std::string::npos; });
        if (!in) {
          no.reason = "not listed in modules_in_block_to_quantize";
          return no;
        }
      }
      if (!block_name.empty() && name.find(block_name) == std::string::npos &&
          strip_prefixes(name).find(block_name) == std::string::npos) {
        no.reason = "outside block_name_to_quantize";
        return no;
      }
      if (evidence == Evidence::NoScales) {
        no.reason = "no qweight on disk (vLLM derives the quantized set from the headers)";
        return no;
      }
      if (evidence == Evidence::Unknown && (name.find("layers.") == std::string::npos || is_router(module))) {
        no.reason = "outside the decoder blocks or a router";
        return no;
      }
      ModuleQuant q = dyn ? *dyn : base;
      if (q.reason.empty()) q.reason = "quantization_config defaults";
      return q;
    }

    case Method::AWQ: {
      if (kind != ModuleKind::Linear || is_head(module)) {
        no.reason = "AWQ quantizes the decoder Linear layers only";
        return no;
      }
      for (const auto& s : not_convert)
        if (!s.empty() && module.find(s) != std::string_view::npos) {
          no.reason = "modules_to_not_convert entry \"" + s + "\"";
          return no;
        }
      if (evidence == Evidence::NoScales) {
        no.reason = "no qweight on disk";
        return no;
      }
      if (evidence == Evidence::Unknown && is_router(module)) {
        no.reason = "router";
        return no;
      }
      ModuleQuant q = base;
      q.reason = "AWQ defaults";
      return q;
    }

    case Method::FP8: {
      if (kind != ModuleKind::Linear || is_head(module)) {
        no.reason = "embeddings and the output head stay in the model dtype";
        return no;
      }
      for (const auto& s : not_convert) {
        std::string_view sv = s;
        if (module == sv || ends_with(module, "." + s) || strip_prefixes(module) == strip_prefixes(sv)) {
          no.reason = "ignored layer \"" + s + "\"";
          return no;
        }
      }
      if (is_router(module) && evidence != Evidence::HasScales) {
        no.reason = "the router is a raw parameter, not a quantized Linear";
        return no;
      }
      if (evidence == Evidence::NoScales) {
        no.reason = "no scale on disk";
        return no;
      }
      ModuleQuant q = base;
      q.reason = "fp8 defaults";
      return q;
    }

    case Method::BitsAndBytes: {
      if (kind != ModuleKind::Linear) {
        no.reason = "bitsandbytes replaces Linear layers only";
        return no;
      }
      if (is_head(module)) {
        no.reason = "transformers keeps the output head unquantized";
        return no;
      }
      for (const auto& s : not_convert) {
        std::string_view sv = s;
        bool hit = false;
        // a skip entry equal to a dotted component, or to a leading dotted prefix
        if (starts_with(module, sv) && (module.size() == sv.size() || module[sv.size()] == '.')) hit = true;
        size_t pos = 0;
        while (!hit && (pos = module.find(sv, pos)) != std::string_view::npos) {
          bool left = pos == 0 || module[pos - 1] == '.';
          bool right = pos + sv.size() == module.size() || module[pos + sv.size()] == '.';
          if (left && right) hit = true;
          ++pos;
        }
        if (hit) {
          no.reason = "llm_int8_skip_modules entry \"" + s + "\"";
          return no;
        }
      }
      ModuleQuant q = base;
      q.reason = "bitsandbytes defaults";
      return q;
    }

    case Method::MXFP4: {
      if (!(ends_with(module, "experts.gate_up_proj") || ends_with(module, "experts.down_proj"))) {
        no.reason = "gpt-oss MXFP4 packs the expert projections only";
        return no;
      }
      for (const auto& s : not_convert)
        if (glob_prefix_match(s, module)) {
          no.reason = "modules_to_not_convert entry \"" + s + "\"";
          return no;
        }
      ModuleQuant q = base;
      q.reason = "mxfp4 expert projection";
      return q;
    }
  }
  return no;
}

}  // namespace ckpt::quant
