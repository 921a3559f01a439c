// Quantization declarations and the loaders' per-module predicates
// (specs/quantization-layouts.md §1b/§1c MLX, §2a compressed-tensors, §3 GPTQ, §4 AWQ,
// §5 AutoRound, §6 bitsandbytes, §7 FP8, §8 gpt-oss, §10 predicates).
//
// Each scheme resolves a module the way the library that wrote the format does (the
// "primary" resolution ckpt checks the files against) and, where vLLM's matching rules
// differ, the way vLLM does (Resolution::other, reported as QZ011). The rules, each with its
// source, are tabulated in docs/architectures.md ("How each loader resolves a module").
// Every pattern is compiled once per scheme (QuantScheme::compile); resolving a module runs
// no regex compilation and, thanks to each pattern's required literal, usually no regex.
#include <algorithm>
#include <array>
#include <tuple>

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

// ---- module names --------------------------------------------------------------------------
// A VLM's checkpoint carries its language model under one of several spellings while its
// config may name modules under another (transformers < 4.52 built "language_model.model.*"
// and "language_model.lm_head"; later versions build "model.language_model.*" and
// "lm_head"; a text-only config says "model.*"). Exact names compare by their canonical
// spelling, patterns are tried on every spelling.

constexpr std::array<std::string_view, 2> kLmRoots = {"language_model.model.", "model.language_model."};

std::string canonical(std::string_view m) {
  for (auto p : kLmRoots)
    if (starts_with(m, p)) return "model." + std::string(m.substr(p.size()));
  if (starts_with(m, "language_model.")) return std::string(m.substr(15));
  return std::string(m);
}

// The spellings of one module name: v(0) is the name itself (a view of the caller's
// string), the others are owned; canon() is the canonical spelling.
struct Names {
  std::string_view v0;
  std::array<std::string, 2> extra;
  size_t n = 1;
  std::string canon_own;
  bool canon_is_v0 = true;
  std::string_view v(size_t i) const { return i == 0 ? v0 : std::string_view(extra[i - 1]); }
  std::string_view canon() const { return canon_is_v0 ? v0 : std::string_view(canon_own); }
};

Names names_of(std::string_view m) {
  Names nm;
  nm.v0 = m;
  if (starts_with(m, kLmRoots[0]) || starts_with(m, kLmRoots[1])) {
    std::string_view rest = m.substr(kLmRoots[0].size());
    nm.extra[0] = std::string(starts_with(m, kLmRoots[0]) ? kLmRoots[1] : kLmRoots[0]) + std::string(rest);
    nm.extra[1] = "model." + std::string(rest);
    nm.n = 3;
  } else if (starts_with(m, "language_model.")) {
    nm.extra[0] = std::string(m.substr(15));
    nm.n = 2;
  }
  if (nm.n > 1) {
    nm.canon_own = canonical(m);
    nm.canon_is_v0 = false;
  }
  return nm;
}

bool any_match(const PyRegex& re, const Names& nm) {
  for (size_t i = 0; i < nm.n; ++i)
    if (re.match(nm.v(i))) return true;
  return false;
}
bool any_search(const PyRegex& re, const Names& nm) {
  for (size_t i = 0; i < nm.n; ++i)
    if (re.search(nm.v(i))) return true;
  return false;
}

bool is_head(std::string_view m) { return m == "lm_head" || ends_with(m, ".lm_head"); }
bool is_router(std::string_view m) {
  return ends_with(m, "mlp.gate") || ends_with(m, ".router") || ends_with(m, "shared_expert_gate") ||
         ends_with(m, "block_sparse_moe.gate") || ends_with(m, "router.proj");
}
bool in_experts(std::string_view m) { return m.find(".experts.") != std::string_view::npos; }

// vLLM fuses q/k/v into one qkv_proj and gate/up into one gate_up_proj (the models'
// packed_modules_mapping) and resolves the fused layer under its fused name; stacked experts
// are one FusedMoE layer and are not modelled here.
struct Fused {
  std::string name;                 // "model.layers.0.self_attn.qkv_proj"
  std::vector<std::string> shards;  // the checkpoint modules it is built from
};
std::optional<Fused> vllm_fused(std::string_view m) {
  if (in_experts(m)) return std::nullopt;
  auto dot = m.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string parent(m.substr(0, dot + 1));
  std::string_view last = m.substr(dot + 1);
  if (last == "q_proj" || last == "k_proj" || last == "v_proj")
    return Fused{parent + "qkv_proj", {parent + "q_proj", parent + "k_proj", parent + "v_proj"}};
  if (last == "gate_proj" || last == "up_proj")
    return Fused{parent + "gate_up_proj", {parent + "gate_proj", parent + "up_proj"}};
  return std::nullopt;
}

// ---- config values -------------------------------------------------------------------------

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

// One MLX quantization dict. mlx-lm hands a per-module entry to to_quantized(**entry), so a
// key it lacks takes to_quantized's default for the entry's own mode (mode "affine" when
// absent; affine 64/4, mxfp4 32/4, nvfp4 16/4, mxfp8 32/8), not the model-wide value
// (mlx python/mlx/nn/layers/quantized.py quantize, _defaults_for_mode).
ModuleQuant mlx_entry(const json::Value& o, std::vector<std::string>* problems) {
  ModuleQuant q;
  q.quantized = true;
  std::string mode = o.get_string("mode").value_or("affine");
  if (mode != "affine" && mode != "mxfp4" && mode != "nvfp4" && mode != "mxfp8") {
    if (problems) problems->push_back("mode \"" + mode + "\" is not an MLX quantization mode");
    mode = "affine";
  }
  int gdef = mode == "nvfp4" ? 16 : mode == "mxfp4" || mode == "mxfp8" ? 32 : 64;
  int bdef = mode == "mxfp8" ? 8 : 4;
  q.bits = get_int(o, {"bits"}, bdef, problems);
  q.group_size = get_int(o, {"group_size"}, gdef, problems);
  if (q.bits == 0) q.bits = bdef;  // `bits or default` in _defaults_for_mode
  if (q.group_size == 0) q.group_size = gdef;
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
  s.base = mlx_entry(q, &s.problems);
  for (const auto& [k, v] : q.as_object()) {
    if (k == "group_size" || k == "bits" || k == "mode" || k == "quant_method") continue;
    if (v.is_bool() && !v.as_bool()) {
      s.mlx_overrides.emplace_back(k, std::nullopt);
    } else if (v.is_object()) {
      s.mlx_overrides.emplace_back(k, mlx_entry(v, &s.problems));
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

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool same_quant(const ModuleQuant& a, const ModuleQuant& b) {
  if (a.quantized != b.quantized) return false;
  if (!a.quantized) return true;
  return a.format == b.format && a.bits == b.bits && a.group_size == b.group_size && a.symmetric == b.symmetric &&
         a.g_idx == b.g_idx && a.strategy == b.strategy && a.block_rows == b.block_rows &&
         a.block_cols == b.block_cols;
}

ModuleQuant unquantized(std::string why) {
  ModuleQuant no;
  no.quantized = false;
  no.reason = std::move(why);
  return no;
}

}  // namespace

// ---- compiled rules ------------------------------------------------------------------------

struct QuantScheme::Compiled {
  struct Rule {            // a name that is either exact or a Python regex
    std::string text;      // as written ("re:.*lm_head$" keeps its prefix)
    std::string canon;     // canonical spelling of an exact name
    bool is_re = false;
    PyRegex re;
  };
  struct Target {          // compressed-tensors target_to_scheme entry, in key order
    Rule rule;
    size_t group = 0;      // the last config group listing the target owns it
  };
  std::vector<Target> ct_targets;
  std::vector<Rule> ct_ignore;
  std::vector<PyRegex> dynamic;           // parallel to QuantScheme::dynamic
  std::vector<Rule> extra;                // parallel to extra_config: exact name, or regex (re.search)
  std::vector<PyRegex> not_convert;       // parallel to not_convert, as regexes
  std::vector<PyRegex> in_block;          // AutoRound: modules_in_block_to_quantize as regexes
  std::vector<std::string> not_convert_canon;
  // false for the common single {"targets": ["Linear"]} group with plain ignore names,
  // where vLLM's resolution cannot differ
  bool ct_vllm_may_differ = true;
  std::vector<std::string> errors;        // patterns the Python loader rejects
  std::vector<std::string> warnings;      // patterns ckpt cannot emulate / entries loaders skip
};

namespace {

// A pattern's problem, reported once at parse time: Python's re rejects it (the loader
// raises re.error, error) or ckpt cannot emulate it (treated as matching nothing, warning).
void note_pattern(const PyRegex& re, const std::string& where, QuantScheme::Compiled& c, bool loader_raises = true) {
  if (re.ok()) return;
  if (re.status() == PyRegex::Status::Invalid) {
    std::string m = where + " is not a valid Python regex (" + re.problem() + ")";
    if (loader_raises) c.errors.push_back(m + ": the loader raises re.error");
    else c.warnings.push_back(m + ": the loader skips it");
  } else {
    c.warnings.push_back(where + " uses a regex feature ckpt does not emulate (" + re.problem() +
                         "): ckpt treats it as matching nothing");
  }
}

// An AutoRound extra_config key is a layer name when AutoRound finds a layer of that name;
// ckpt cannot list the model's layers, so a key made of name characters only is taken as a
// layer name and anything else as a regex.
bool looks_like_name(std::string_view k) {
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  return true;
}

}  // namespace

void QuantScheme::compile() {
  auto c = std::make_shared<Compiled>();
  auto rule = [](const std::string& t, bool ct_prefix) {
    Compiled::Rule r;
    r.text = t;
    if (ct_prefix ? starts_with(t, "re:") : false) {
      r.is_re = true;
      r.re = PyRegex(std::string_view(t).substr(3));
    } else {
      r.canon = canonical(t);
    }
    return r;
  };
  if (method == Method::CompressedTensors) {
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (const auto& t : groups[gi].targets) {
        auto it = std::find_if(c->ct_targets.begin(), c->ct_targets.end(),
                               [&](const Compiled::Target& x) { return x.rule.text == t; });
        if (it != c->ct_targets.end()) {
          it->group = gi;  // target_to_scheme[target] = scheme: the later group wins the key
          continue;
        }
        c->ct_targets.push_back({rule(t, true), gi});
        if (c->ct_targets.back().rule.is_re)
          note_pattern(c->ct_targets.back().rule.re, "config_groups." + groups[gi].name + " target " + quote(t), *c);
      }
    bool plain = c->ct_targets.size() == 1 && c->ct_targets[0].rule.text == "Linear";
    for (const auto& ig : ignore) {
      c->ct_ignore.push_back(rule(ig, true));
      if (c->ct_ignore.back().is_re) note_pattern(c->ct_ignore.back().re, "ignore entry " + quote(ig), *c);
      // a class name in ignore is honoured by compressed-tensors only
      plain = plain && ig != "Linear" && ig != "Module" && ig != "Embedding";
    }
    // fused shards: vLLM ignores a fused layer only when all its shards are ignored, which
    // compressed-tensors' per-shard answers show as QZ009; with one "Linear" target the
    // groups cannot differ
    c->ct_vllm_may_differ = !plain;
  }
  for (const auto& [pat, v] : dynamic) {
    c->dynamic.emplace_back(pat);
    note_pattern(c->dynamic.back(), std::string("dynamic rule ") + quote((v ? "+:" : "-:") + pat), *c);
  }
  for (const auto& [k, v] : extra_config) {
    Compiled::Rule r;
    r.text = k;
    r.canon = canonical(k);
    if (!looks_like_name(k)) {
      r.is_re = true;
      r.re = PyRegex(k);
      note_pattern(r.re, "extra_config key " + quote(k), *c, /*loader_raises=*/false);
    }
    c->extra.push_back(std::move(r));
  }
  const char* nc_key = method == Method::BitsAndBytes ? "llm_int8_skip_modules entry " : "modules_to_not_convert entry ";
  for (const auto& s : not_convert) {
    c->not_convert.emplace_back(s);
    c->not_convert_canon.push_back(canonical(s));
    // transformers (and AutoRound) use the entries as regexes; AWQ and vLLM use them as
    // plain strings, where a pattern problem changes nothing
    if (method == Method::BitsAndBytes || method == Method::FP8 || method == Method::MXFP4 ||
        method == Method::AutoRound)
      note_pattern(c->not_convert.back(), nc_key + quote(s), *c);
  }
  if (method == Method::AutoRound)
    for (const auto& s : modules_in_block) {
      c->in_block.emplace_back(s);
      note_pattern(c->in_block.back(), "modules_in_block_to_quantize entry " + quote(s), *c);
    }
  compiled = std::move(c);
}

// ---- resolution ----------------------------------------------------------------------------

namespace {

using Compiled = QuantScheme::Compiled;

bool exact_hit(const Compiled::Rule& r, const Names& nm) { return !r.is_re && (r.text == nm.v0 || r.canon == nm.canon()); }
bool name_hit(const Compiled::Rule& r, const Names& nm) { return r.is_re ? any_match(r.re, nm) : exact_hit(r, nm); }

// compressed-tensors _match_class: a target equal to a class name on the module's MRO in
// the transformers model (nn.Linear -> Linear, Module; nn.Embedding -> Embedding, Module).
bool ct_class_hit(const Compiled::Rule& r, ModuleKind kind) {
  if (r.is_re) return false;
  if (r.text == "Module") return true;
  if (kind == ModuleKind::Linear || kind == ModuleKind::ScaledLinear) return r.text == "Linear";
  if (kind == ModuleKind::Embedding) return r.text == "Embedding";
  return false;
}

// The vLLM layer class a checkpoint Linear becomes (only the class name matters: vLLM
// matches class targets by case-insensitive substring).
std::string_view vllm_class(std::string_view vname) {
  if (ends_with(vname, "qkv_proj")) return "QKVParallelLinear";
  if (ends_with(vname, "gate_up_proj")) return "MergedColumnParallelLinear";
  for (std::string_view s : {"o_proj", "down_proj", "dense", "out_proj", "fc2", "c_proj", "wo", "w2"})
    if (ends_with(vname, s)) return "RowParallelLinear";
  if (is_router(vname)) return "ReplicatedLinear";
  return "ColumnParallelLinear";
}
bool contains_ci(std::string_view hay, std::string_view needle) {
  auto lo = [](char ch) { return static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch); };
  if (needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && lo(hay[i + k]) == lo(needle[k])) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

ModuleQuant group_quant(const QuantScheme& s, const Compiled::Target& t, const std::string& why) {
  const ConfigGroup& g = s.groups[t.group];
  if (!g.weights.quantized)
    return unquantized("config group " + quote(g.name) + " (target " + quote(t.rule.text) +
                       ") has no weight quantization" + why);
  ModuleQuant q = g.weights;
  q.reason = "config group " + quote(g.name) + " (target " + quote(t.rule.text) + ")" + why;
  return q;
}

// compressed-tensors: `ignore` (names, regexes and class names) first; then match_targets
// sorts the targets by ("re:" in t, t), takes the name matches (exact, then regex, each
// alphabetically) before the class matches, and _scheme_from_targets uses the first.
ModuleQuant ct_primary(const QuantScheme& s, const Compiled& c, const Names& nm, ModuleKind kind) {
  for (const auto& ig : c.ct_ignore)
    if (name_hit(ig, nm) || ct_class_hit(ig, kind)) return unquantized("ignore entry " + quote(ig.text));
  // rank 0: exact name, 1: regex name, 2: class name
  std::vector<std::pair<int, const Compiled::Target*>> hits;
  for (const auto& t : c.ct_targets) {
    if (name_hit(t.rule, nm)) hits.emplace_back(t.rule.is_re ? 1 : 0, &t);
    else if (ct_class_hit(t.rule, kind)) hits.emplace_back(2, &t);
  }
  if (hits.empty()) return unquantized("no config group targets it");
  std::stable_sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->rule.text) < std::tie(b.first, b.second->rule.text);
  });
  std::string why;
  if (hits.size() > 1) {
    static constexpr const char* kWhat[] = {"an exact name", "a regex", "a class name"};
    const auto& [wr, w] = hits[0];
    const auto& [lr, l] = hits[1];
    why = "; it outranks target " + quote(l->rule.text) + " of group " + quote(s.groups[l->group].name) + ": " +
          (wr == lr ? std::string("of equally specific targets the alphabetically first wins")
                    : std::string(kWhat[wr]) + " outranks " + kWhat[lr]);
  }
  const Compiled::Target* winner = hits.front().second;
  return group_quant(s, *winner, why);
}

// vLLM (compressed_tensors/utils.py): should_ignore_layer (exact or re:, no class names; a
// fused layer is ignored when its shards are, and they must agree) then find_matched_target
// on the layer's vLLM name: the first target in key order that equals it or re.matches it,
// else the first whose lowercased text is a substring of the layer class name, else (fused
// layers) a target for every shard, the first shard's. nullopt: vLLM raises instead.
std::optional<ModuleQuant> ct_vllm(const QuantScheme& s, const Compiled& c, std::string_view module) {
  auto fused = vllm_fused(module);
  const Names nm = names_of(fused ? std::string_view(fused->name) : module);
  auto ignored = [&](const Names& n) {
    for (const auto& ig : c.ct_ignore)
      if (name_hit(ig, n)) return true;
    return false;
  };
  bool fused_listed = false;
  if (fused)
    for (const auto& ig : c.ct_ignore) fused_listed = fused_listed || exact_hit(ig, nm);
  if (fused && !fused_listed) {
    std::optional<bool> ig;
    for (const auto& sh : fused->shards) {
      bool b = ignored(names_of(sh));
      if (ig && *ig != b) return std::nullopt;  // ValueError: the shards' schemes differ (QZ009)
      ig = b;
    }
    if (*ig) return unquantized("vLLM: every shard of " + fused->name + " is ignored");
  } else if (ignored(nm)) {
    return unquantized("vLLM: ignore entry matches " + std::string(nm.v0));
  }
  const std::string_view vname = nm.v0;
  const std::string at = fused ? " (vLLM resolves the fused layer " + fused->name + ")" : std::string();
  for (const auto& t : c.ct_targets)
    if (name_hit(t.rule, nm))
      return group_quant(s, t, "; vLLM takes the first target in declaration order that names it" + at);
  const std::string_view cls = vllm_class(vname);
  for (const auto& t : c.ct_targets)
    if (t.rule.is_re ? t.rule.re.match(cls) : contains_ci(cls, t.rule.text))
      return group_quant(s, t, "; vLLM matches the class " + std::string(cls) + " by substring" + at);
  if (fused) {
    const Compiled::Target* first = nullptr;
    for (const auto& sh : fused->shards) {
      const Names sn = names_of(sh);
      const Compiled::Target* hit = nullptr;
      for (const auto& t : c.ct_targets)
        if (name_hit(t.rule, sn)) {
          hit = &t;
          break;
        }
      if (!hit) return unquantized("vLLM: no target matches " + fused->name + " or all of its shards");
      if (!first) first = hit;
    }
    return group_quant(s, *first, "; vLLM matches every shard of " + fused->name + " and takes the first");
  }
  return unquantized("vLLM: no target matches " + std::string(vname));
}

// GPTQ `dynamic`: the first rule in dict order whose regex re.matches the name decides
// ("-:" = not quantized); GPTQModel quantization/config.py dynamic_get, vLLM
// utils/gptq_utils.py get_dynamic_override. nullptr = no rule matches.
const std::pair<std::string, std::optional<ModuleQuant>>* dynamic_rule(const QuantScheme& s, const Compiled& c,
                                                                       const Names& nm) {
  for (size_t i = 0; i < s.dynamic.size(); ++i)
    if (any_match(c.dynamic[i], nm)) return &s.dynamic[i];
  return nullptr;
}

// transformers quantizers_utils.should_convert_module: an entry skips a module when
// re.match(entry + "\."), re.match(entry) or name.endswith(entry) (the first implies the
// second).
const std::string* transformers_skip(const QuantScheme& s, const Compiled& c, const Names& nm) {
  for (size_t i = 0; i < s.not_convert.size(); ++i) {
    const std::string& e = s.not_convert[i];
    if (e.empty()) continue;
    if (any_match(c.not_convert[i], nm)) return &e;
    for (size_t k = 0; k < nm.n; ++k)
      if (ends_with(nm.v(k), e)) return &e;
  }
  return nullptr;
}

}  // namespace

ModuleQuant QuantScheme::for_module(std::string_view module, ModuleKind kind, uint64_t in_features,
                                    Evidence evidence) const {
  return resolve_impl(module, kind, in_features, evidence, false).quant;
}

bool QuantScheme::name_rules_digit_free() const {
  auto digit_free = [](std::string_view s) {
    return std::none_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  auto all_free = [&](const std::vector<std::string>& v) { return std::all_of(v.begin(), v.end(), digit_free); };
  auto keys_free = [&](const auto& pairs) {
    return std::all_of(pairs.begin(), pairs.end(), [&](const auto& kv) { return digit_free(kv.first); });
  };
  for (const auto& g : groups)
    if (!all_free(g.targets)) return false;
  return keys_free(mlx_overrides) && all_free(ignore) && keys_free(dynamic) && all_free(modules_in_block) &&
         keys_free(extra_config) && all_free(block_names) && all_free(not_convert);
}

Resolution QuantScheme::resolve(std::string_view module, ModuleKind kind, uint64_t in_features,
                                Evidence evidence) const {
  return resolve_impl(module, kind, in_features, evidence, true);
}

Resolution QuantScheme::resolve_impl(std::string_view module, ModuleKind kind, uint64_t in_features,
                                     Evidence evidence, bool with_other) const {
  std::shared_ptr<const Compiled> keep = compiled;
  if (!keep) {  // a scheme assembled by hand: compile a private copy
    QuantScheme tmp = *this;
    tmp.compile();
    keep = tmp.compiled;
  }
  const Compiled& c = *keep;
  const bool linear_like = kind == ModuleKind::Linear || kind == ModuleKind::Embedding;
  const Names nm = names_of(module);
  Resolution r;
  auto set_other = [&](std::optional<ModuleQuant> o, const char* who) {
    if (o && !same_quant(*o, r.quant)) {
      r.other = std::move(o);
      r.other_loaders = who;
    }
  };
  switch (method) {
    case Method::None:
    case Method::Unknown:
      r.quant = unquantized("no modelled quantization");
      return r;

    case Method::MLX: {
      // mlx-lm load_model class_predicate: an entry for the path wins (its language_model.
      // twin when the checkpoint and the config spell the path differently); else modules
      // with to_quantized that ship "<path>.scales" (mlx_lm/utils.py)
      r.loaders = "mlx-lm";
      const std::pair<std::string, std::optional<ModuleQuant>>* hit = nullptr;
      for (const auto& e : mlx_overrides)
        if (e.first == module) hit = &e;
      if (!hit)
        for (const auto& e : mlx_overrides)
          if (e.first == "language_model." + std::string(module) ||
              (starts_with(module, "language_model.") && e.first == module.substr(15))) {
            hit = &e;
            break;
          }
      if (hit) {
        if (!hit->second) {
          r.quant = unquantized("quantization[\"" + hit->first + "\"] is false");
        } else if (!linear_like) {
          r.quant = unquantized("the loader's module here has no to_quantized (it holds a bare array)");
        } else {
          r.quant = *hit->second;
          r.quant.reason = "per-module entry quantization[\"" + hit->first + "\"]";
        }
        return r;
      }
      if (!linear_like) {
        r.quant = unquantized(kind == ModuleKind::ScaledLinear
                                  ? "the loader builds this module as a plain array parameter with no "
                                    "to_quantized, so it is never quantized"
                                  : "not a Linear or Embedding");
        return r;
      }
      if (evidence == Evidence::NoScales) {
        r.quant = unquantized("no .scales on disk (mlx-lm quantizes exactly the modules that ship .scales)");
        return r;
      }
      if (evidence == Evidence::Unknown && base.group_size > 0 && in_features % base.group_size != 0) {
        r.quant = unquantized("in_features not divisible by group_size: mlx-lm leaves it float");
        return r;
      }
      r.quant = base;
      r.quant.reason = "quantization defaults";
      return r;
    }

    case Method::CompressedTensors: {
      r.loaders = "compressed-tensors";
      r.quant = ct_primary(*this, c, nm, kind);
      // vLLM's compressed-tensors method resolves LinearBase layers only; heads, embeddings
      // and FusedMoE experts go through other paths not modelled here
      if (with_other && c.ct_vllm_may_differ && kind == ModuleKind::Linear && !is_head(module) && !in_experts(module))
        set_other(ct_vllm(*this, c, module), "vLLM");
      return r;
    }

    case Method::GPTQ: {
      r.loaders = "GPTQModel";
      auto decide = [&](const Names& dn, const std::string& at) -> ModuleQuant {
        if (kind != ModuleKind::Linear) return unquantized("only Linear layers are quantized");
        const bool head = is_head(module);
        if (head && !lm_head) return unquantized("the output head is not quantized (lm_head is not true)");
        std::optional<ModuleQuant> dyn;
        if (const auto* rule = dynamic_rule(*this, c, dn)) {
          if (!rule->second) return unquantized("dynamic rule \"-:" + rule->first + "\"" + at);
          dyn = *rule->second;
          dyn->reason = "dynamic rule \"+:" + rule->first + "\"" + at;
        }
        std::string listed;
        if (!head && !modules_in_block.empty()) {
          auto it = std::find_if(modules_in_block.begin(), modules_in_block.end(), [&](const std::string& s) {
            return module.find(s) != std::string_view::npos;
          });
          if (it == modules_in_block.end()) return unquantized("not listed in modules_in_block_to_quantize");
          listed = "; " + quote(*it) + " in modules_in_block_to_quantize";
        }
        // without modules_in_block_to_quantize, vLLM's GPTQConfig.maybe_update_config builds it
        // from the headers: a module stored float is simply not quantized
        if (evidence == Evidence::NoScales && modules_in_block.empty())
          return unquantized("no qweight on disk (vLLM derives the quantized set from the headers)");
        if (!head && evidence == Evidence::Unknown &&
            (module.find("layers.") == std::string_view::npos || is_router(module)))
          return unquantized("outside the decoder blocks or a router");
        ModuleQuant q = dyn ? *dyn : base;
        if (q.reason.empty()) q.reason = (head ? "lm_head: true" : "quantization_config defaults") + at;
        q.reason += listed;
        return q;
      };
      r.quant = decide(nm, "");
      // vLLM applies `dynamic` to the fused layer's name (qkv_proj, gate_up_proj)
      if (with_other && !dynamic.empty() && kind == ModuleKind::Linear)
        if (auto f = vllm_fused(module))
          set_other(decide(names_of(f->name), " (vLLM matches the fused layer " + f->name + ")"), "vLLM");
      return r;
    }

    case Method::AutoRound: {
      r.loaders = "AutoRound";
      // the part both loaders share: Linear only, then what the headers say
      auto tail = [&](ModuleQuant q, bool explicit_entry) -> ModuleQuant {
        if (!q.quantized) return q;
        if (evidence == Evidence::NoScales && !explicit_entry)
          return unquantized("no qweight on disk (vLLM derives the quantized set from the headers)");
        if (evidence == Evidence::Unknown && !explicit_entry &&
            (module.find("layers.") == std::string_view::npos || is_router(module) || is_head(module)))
          return unquantized("outside the decoder blocks or a router");
        return q;
      };
      auto entry = [&](size_t i, const std::string& why) {
        const auto& [k, v] = extra_config[i];
        if (!v.quantized) return unquantized("extra_config[\"" + k + "\"] has bits >= 16" + why);
        ModuleQuant q = v;
        q.reason = "extra_config[\"" + k + "\"]" + why;
        return q;
      };
      auto in_blocks = [&](const Names& n) {
        if (block_names.empty()) return true;
        for (const auto& b : block_names)
          for (size_t k = 0; k < n.n; ++k)
            if (!b.empty() && starts_with(n.v(k), b)) return true;
        return false;
      };
      if (kind != ModuleKind::Linear) {
        r.quant = unquantized("only Linear layers are quantized");
        return r;
      }
      // AutoRound's loader (auto_round/inference/convert_model.py get_layer_config):
      // modules_to_not_convert (re.search) force 16 bits over everything; an exact
      // extra_config name wins over regex keys; in-block layers missing from
      // modules_in_block_to_quantize are 16 bits; regex keys (re.search, dict order, the
      // first wins); layers outside the blocks only through an extra_config entry
      r.quant = [&]() -> ModuleQuant {
        for (size_t i = 0; i < not_convert.size(); ++i)
          if (any_search(c.not_convert[i], nm))
            return unquantized("modules_to_not_convert entry " + quote(not_convert[i]) + " (re.search)");
        for (size_t i = 0; i < extra_config.size(); ++i)
          if (exact_hit(c.extra[i], nm)) return tail(entry(i, ""), true);
        if (!in_blocks(nm) || is_head(module)) return unquantized("outside block_name_to_quantize and not in extra_config");
        if (!c.in_block.empty()) {
          bool in = false;
          for (const auto& re : c.in_block) in = in || any_search(re, nm);
          if (!in) return unquantized("not listed in modules_in_block_to_quantize");
        }
        for (size_t i = 0; i < extra_config.size(); ++i)
          if (c.extra[i].is_re && any_search(c.extra[i].re, nm)) return tail(entry(i, " (regex key, re.search)"), true);
        ModuleQuant q = base;
        q.reason = "quantization_config defaults";
        return tail(q, false);
      }();
      // vLLM (model_executor/layers/quantization/auto_round.py get_layer_config): only an
      // exact extra_config[name] on the (fused) vLLM name, then the block prefixes, then the
      // fused shards' exact entries (which must agree), else the defaults; regex keys,
      // modules_to_not_convert and modules_in_block_to_quantize are not read
      if (with_other && (!extra_config.empty() || !not_convert.empty() || !modules_in_block.empty())) {
        auto f = vllm_fused(module);
        const Names vn = names_of(f ? std::string_view(f->name) : module);
        std::optional<ModuleQuant> v = [&]() -> std::optional<ModuleQuant> {
          for (size_t i = 0; i < extra_config.size(); ++i)
            if (exact_hit(c.extra[i], vn)) return tail(entry(i, " (vLLM: exact name)"), true);
          const bool quantized = !is_head(module) && in_blocks(vn);
          auto lookup = [&](const Names& n) -> std::optional<size_t> {
            for (size_t i = 0; i < extra_config.size(); ++i)
              if (exact_hit(c.extra[i], n)) return i;
            return std::nullopt;
          };
          if (f) {
            std::optional<std::optional<size_t>> first;
            for (const auto& sh : f->shards) {
              auto hit = lookup(names_of(sh));
              if (first && *first != hit) {
                const auto& a = *first ? extra_config[**first].second : base;
                const auto& b = hit ? extra_config[*hit].second : base;
                if (!same_quant(a, b)) return std::nullopt;  // vLLM raises: QZ009 covers it
              }
              if (!first) first = hit;
            }
            if (*first) return tail(entry(**first, " (vLLM: the shards of " + f->name + ")"), true);
          }
          if (!quantized) return unquantized("vLLM: outside block_name_to_quantize (or the output head)");
          ModuleQuant q = base;
          q.reason = "quantization_config defaults (vLLM reads no regex keys)";
          return tail(q, false);
        }();
        set_other(v, "vLLM");
      }
      return r;
    }

    case Method::AWQ: {
      // AutoAWQ utils/module.py and vLLM is_layer_skipped_awq: an entry skips a module when
      // it is a substring of the name
      r.loaders = "AutoAWQ / vLLM";
      if (kind != ModuleKind::Linear || is_head(module)) {
        r.quant = unquantized("AWQ quantizes the decoder Linear layers only");
        return r;
      }
      for (const auto& s : not_convert)
        if (!s.empty() && module.find(s) != std::string_view::npos) {
          r.quant = unquantized("modules_to_not_convert entry " + quote(s) + " (substring)");
          return r;
        }
      // with an empty modules_to_not_convert, vLLM's AWQConfig.maybe_update_config fills it
      // from the headers (every module without an integer tensor)
      if (evidence == Evidence::NoScales && not_convert.empty())
        r.quant = unquantized("no qweight on disk (vLLM derives modules_to_not_convert from the headers)");
      else if (evidence == Evidence::Unknown && is_router(module)) r.quant = unquantized("router");
      else {
        r.quant = base;
        r.quant.reason = not_convert.empty() ? "AWQ defaults" : "AWQ defaults (no modules_to_not_convert entry is part of the name)";
      }
      return r;
    }

    case Method::FP8: {
      r.loaders = "transformers";
      if (kind != ModuleKind::Linear || is_head(module)) {
        r.quant = unquantized("embeddings and the output head stay in the model dtype");
        return r;
      }
      auto tail = [&](const std::string& who) -> ModuleQuant {
        if (is_router(module) && evidence != Evidence::HasScales)
          return unquantized("the router is a raw parameter, not a quantized Linear");
        // with no exclusion list the files say which modules are FP8; a list claims to name
        // every module left in the model dtype
        if (evidence == Evidence::NoScales && not_convert.empty()) return unquantized("no scale on disk");
        ModuleQuant q = base;
        q.reason = "fp8 defaults" + who + (not_convert.empty() ? "" : ", not excluded by ignored_layers / modules_to_not_convert");
        return q;
      };
      // transformers FineGrainedFP8 (integrations/finegrained_fp8.py replace_with_fp8_linear):
      // should_convert_module over modules_to_not_convert / ignored_layers
      if (const std::string* e = transformers_skip(*this, c, nm))
        r.quant = unquantized("ignored_layers / modules_to_not_convert entry " + quote(*e) +
                              " (transformers: re.match or suffix)");
      else
        r.quant = tail("");
      // vLLM fp8.py is_layer_skipped: exact names; a fused layer's shards must all be listed
      // (or none); a FusedMoE layer is skipped when an entry naming experts contains its prefix
      if (with_other && !not_convert.empty()) {
        auto listed = [&](const Names& n) {
          for (size_t i = 0; i < not_convert.size(); ++i)
            if (not_convert[i] == n.v0 || c.not_convert_canon[i] == n.canon()) return true;
          return false;
        };
        std::optional<ModuleQuant> v;
        if (auto f = vllm_fused(module)) {
          std::optional<bool> sk;
          bool agree = true;
          for (const auto& sh : f->shards) {
            bool b = listed(names_of(sh));
            agree = agree && (!sk || *sk == b);
            sk = b;
          }
          if (agree)
            v = *sk ? unquantized("vLLM: every shard of " + f->name + " is an ignored layer")
                    : tail(" (vLLM: no shard of the fused layer " + f->name + " is an ignored layer)");
        } else if (auto p = module.find(".experts."); p != std::string_view::npos) {
          std::string moe(module.substr(0, p + 8));
          bool sk = false;
          for (const auto& e : not_convert)
            sk = sk || (e.find("experts") != std::string::npos && e.find(moe) != std::string::npos);
          v = sk ? unquantized("vLLM: an ignored layer names the experts of " + moe) : tail(" (vLLM)");
        } else {
          v = listed(nm) ? unquantized("vLLM: ignored layer (exact name)") : tail(" (vLLM)");
        }
        set_other(v, "vLLM");
      }
      return r;
    }

    case Method::BitsAndBytes: {
      r.loaders = "transformers";
      if (kind != ModuleKind::Linear) {
        r.quant = unquantized("bitsandbytes replaces Linear layers only");
        return r;
      }
      if (is_head(module)) {
        r.quant = unquantized("transformers keeps the output head unquantized");
        return r;
      }
      // transformers (integrations/bitsandbytes.py replace_with_bnb_linear):
      // should_convert_module over llm_int8_skip_modules
      if (const std::string* e = transformers_skip(*this, c, nm)) {
        r.quant = unquantized("llm_int8_skip_modules entry " + quote(*e) + " (transformers: re.match or suffix)");
      } else {
        r.quant = base;
        r.quant.reason = "bitsandbytes defaults";
      }
      // vLLM bitsandbytes.py is_layer_skipped_bnb: an entry equal to a dotted component or to
      // a leading dotted prefix of the (fused) vLLM name
      if (with_other && !not_convert.empty()) {
        auto f = vllm_fused(module);
        const std::string vname = f ? f->name : std::string(module);
        const Names vn = names_of(vname);
        const std::string* hit = nullptr;
        for (const auto& e : not_convert) {
          if (e.empty()) continue;
          for (size_t k = 0; k < vn.n; ++k) {
            const std::string_view v = vn.v(k);
            // a component (no dot inside) anywhere, or a dotted prefix from the start
            size_t pos = 0;
            while (!hit && (pos = v.find(e, pos)) != std::string_view::npos) {
              bool left = pos == 0 || v[pos - 1] == '.';
              bool right = pos + e.size() == v.size() || v[pos + e.size()] == '.';
              if (left && right && (pos == 0 || e.find('.') == std::string::npos)) hit = &e;
              ++pos;
            }
          }
          if (hit) break;
        }
        ModuleQuant v;
        if (hit) {
          v = unquantized("vLLM: llm_int8_skip_modules entry " + quote(*hit) + " is a component or prefix of " + vname);
        } else {
          v = base;
          v.reason = "bitsandbytes defaults (vLLM" + (f ? ": no entry names the fused layer " + f->name : std::string()) + ")";
        }
        set_other(v, "vLLM");
      }
      return r;
    }

    case Method::MXFP4: {
      r.loaders = "transformers";
      if (!(ends_with(module, "experts.gate_up_proj") || ends_with(module, "experts.down_proj"))) {
        r.quant = unquantized("gpt-oss MXFP4 packs the expert projections only");
        return r;
      }
      // transformers integrations/mxfp4.py: should_convert_module over modules_to_not_convert
      if (const std::string* e = transformers_skip(*this, c, nm)) {
        r.quant = unquantized("modules_to_not_convert entry " + quote(*e));
        return r;
      }
      r.quant = base;
      r.quant.reason = "mxfp4 expert projection";
      return r;
    }
  }
  return r;
}

std::optional<QuantScheme> parse_scheme(const json::Value& config) {
  if (!config.is_object()) return std::nullopt;
  QuantScheme s;
  auto done = [&]() {
    s.compile();
    for (const auto& e : s.compiled->errors) s.problems.push_back(e);
    for (const auto& w : s.compiled->warnings) s.limits.push_back(w);
    return std::optional<QuantScheme>(std::move(s));
  };
  const json::Value* q = nullptr;
  // MLX: "quantization" without quant_method (quantization_config is an identical copy)
  if (const auto* mq = config.find("quantization"); mq && mq->is_object() && !mq->find("quant_method")) {
    s.method = Method::MLX;
    s.source = "quantization";
    parse_mlx(*mq, s);
    return done();
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
      return done();
    }
    if (s.source == "compression_config" || q->find("config_groups")) {
      s.method = Method::CompressedTensors;
      parse_ct(*q, s);
      return done();
    }
    s.method = Method::Unknown;
    s.problems.push_back(s.source + " has no quant_method");
    return done();
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
    // block_name_to_quantize (or to_quant_block_names): a list, or one string of
    // comma-separated prefixes (vLLM auto_round.py, AutoRound get_layer_config)
    const json::Value* bn = q->find("block_name_to_quantize");
    if (!bn || bn->is_null()) bn = q->find("to_quant_block_names");
    if (bn && bn->is_string()) {
      std::string_view all = bn->as_string();
      for (size_t p = 0; p <= all.size();) {
        size_t e = all.find(',', p);
        if (e == std::string_view::npos) e = all.size();
        if (e > p) s.block_names.emplace_back(all.substr(p, e - p));
        p = e + 1;
      }
    } else if (bn) {
      s.block_names = str_list(bn);
    }
    s.not_convert = str_list(q->find("modules_to_not_convert"));
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
    // vLLM reads ignored_layers, else modules_to_not_convert; transformers accepts either
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
  return done();
}

}  // namespace ckpt::quant
