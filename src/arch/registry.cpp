// Config resolution (nesting, aliases, defaults, prefixes) and expected-tensor generation
// from the tables in tables.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>

#include "arch/tables.h"
#include "ckpt/arch.h"
#include "ckpt/quant.h"

namespace ckpt::arch {

using detail::Rule;
using detail::Scope;
using detail::Table;

// ---- small helpers ------------------------------------------------------------------------

st::DType resolve_dtype(DTypeRole role, st::DType model_dtype) {
  switch (role) {
    case DTypeRole::Model: return model_dtype;
    case DTypeRole::F32: return st::DType::F32;
    case DTypeRole::U8: return st::DType::U8;
    case DTypeRole::I8: return st::DType::I8;
    case DTypeRole::I32: return st::DType::I32;
    case DTypeRole::U32: return st::DType::U32;
    case DTypeRole::I64: return st::DType::I64;
    case DTypeRole::F8_E4M3: return st::DType::F8_E4M3;
  }
  return model_dtype;
}

std::string_view dtype_role_name(DTypeRole role) {
  switch (role) {
    case DTypeRole::Model: return "model float dtype";
    case DTypeRole::F32: return "F32";
    case DTypeRole::U8: return "U8";
    case DTypeRole::I8: return "I8";
    case DTypeRole::I32: return "I32";
    case DTypeRole::U32: return "U32";
    case DTypeRole::I64: return "I64";
    case DTypeRole::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

std::string_view ExpectedTensor::module() const {
  std::string_view n = name;
  if (n.size() > 7 && n.substr(n.size() - 7) == ".weight") return n.substr(0, n.size() - 7);
  return n;
}

std::pair<uint64_t, uint64_t> ExpectedTensor::out_in() const {
  if (shape.size() < 2) return {0, 0};
  return {shape[shape.size() - 2], shape[shape.size() - 1]};
}

std::optional<int64_t> ConfigView::dim(std::string_view name) const {
  for (const auto& [k, v] : dims)
    if (k == name) return v;
  return std::nullopt;
}
int64_t ConfigView::dim_or(std::string_view name, int64_t fallback) const {
  auto d = dim(name);
  return d ? *d : fallback;
}

bool model_type_implies_moe(std::string_view mt) {
  std::string s(mt);
  for (auto& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '-') c = '_';
  }
  for (const char* k : {"moe", "mixtral", "dbrx", "grok"})
    if (s.find(k) != std::string::npos) return true;
  return false;
}

ExpertCount find_expert_count(const json::Value& config) {
  ExpertCount out;
  if (!config.is_object()) return out;
  struct Node {
    const json::Value* v;
    std::string path;
    int64_t inherited_active;
  };
  static const char* kCount[] = {"num_local_experts", "num_experts", "n_routed_experts"};
  static const char* kActive[] = {"num_experts_per_tok", "top_k_experts", "experts_per_token",
                                  "moe_topk"};
  static const char* kOrder[] = {"text_config", "language_config", "thinker_config",
                                 "talker_config", "llm_config"};
  std::deque<Node> q;
  q.push_back({&config, "", 0});
  size_t visited = 0;
  while (!q.empty() && visited < 256) {
    Node n = q.front();
    q.pop_front();
    ++visited;
    int64_t active = n.inherited_active;
    for (auto k : kActive)
      if (auto a = n.v->get_int(k); a && *a > 0) {
        active = *a;
        break;
      }
    for (auto k : kCount) {
      auto c = n.v->get_int(k);
      if (!c) continue;
      std::string field = n.path.empty() ? k : n.path + "." + k;
      if (*c > 1) {
        out.count = *c;
        out.field = field;
        out.active = active;
        return out;
      }
      if (*c == 1) {
        out.count = 1;
        out.explicit_dense = true;
        out.field = field;
        out.active = active;
        return out;
      }
      // 0 (or negative) is a placeholder: keep looking deeper
    }
    // children: the known containers first, in order, then any other *_config object
    std::vector<std::pair<std::string, const json::Value*>> kids;
    for (auto k : kOrder)
      if (const auto* c = n.v->find(k); c && c->is_object()) kids.emplace_back(k, c);
    for (const auto& [k, v] : n.v->as_object()) {
      if (!v.is_object()) continue;
      if (k == "audio_config" || k == "vision_config" || k == "vision_tower_config") continue;
      if (k.size() < 7 || k.substr(k.size() - 7) != "_config") continue;
      if (k == "quantization_config" || k == "rope_scaling" || k == "compression_config") continue;
      if (std::find_if(kids.begin(), kids.end(), [&](auto& p) { return p.first == k; }) !=
          kids.end())
        continue;
      kids.emplace_back(k, &v);
    }
    for (auto& [k, v] : kids) q.push_back({v, n.path.empty() ? k : n.path + "." + k, active});
  }
  return out;
}

// ---- compiled tables ----------------------------------------------------------------------

namespace {

struct FieldSpec {
  std::string var;
  std::vector<std::string> keys;
  std::shared_ptr<const Expr> def;
  std::string def_text;
  bool info = false, boolean = false, null_zero = false;
};

struct CompiledRule {
  const Rule* rule;
  std::vector<std::shared_ptr<const Expr>> shape;
  std::shared_ptr<const Expr> when;
  std::shared_ptr<const Expr> count;
};

struct Compiled {
  const Table* table;
  std::vector<FieldSpec> fields;
  std::vector<CompiledRule> rules;
  std::shared_ptr<const Expr> mtp_count;
};

std::shared_ptr<const Expr> must_compile(std::string_view text) {
  std::string err;
  auto e = compile_expr(text, &err);
  if (!e) e = compile_expr("0");  // a table bug; tests compile every formula
  return e;
}

FieldSpec parse_field(std::string_view spec) {
  FieldSpec f;
  auto eq = spec.find('=');
  f.var = std::string(spec.substr(0, eq));
  std::string_view rest = spec.substr(eq + 1);
  while (!rest.empty() && (rest.back() == '~' || rest.back() == '!' || rest.back() == '^')) {
    if (rest.back() == '~') f.info = true;
    if (rest.back() == '!') f.boolean = true;
    if (rest.back() == '^') f.null_zero = true;
    rest.remove_suffix(1);
  }
  auto q = rest.find('?');
  std::string_view keys = rest.substr(0, q);
  if (q != std::string_view::npos) {
    f.def_text = std::string(rest.substr(q + 1));
    f.def = must_compile(f.def_text);
  }
  while (!keys.empty()) {
    auto bar = keys.find('|');
    f.keys.emplace_back(keys.substr(0, bar));
    if (bar == std::string_view::npos) break;
    keys.remove_prefix(bar + 1);
  }
  return f;
}

const std::vector<Compiled>& compiled() {
  static const std::vector<Compiled> all = [] {
    std::vector<Compiled> v;
    for (const Table* t : detail::tables()) {
      Compiled c;
      c.table = t;
      for (const auto& f : t->fields) c.fields.push_back(parse_field(f.spec));
      for (const auto& r : t->rules) {
        CompiledRule cr{&r, {}, nullptr, nullptr};
        std::string_view s = r.shape;
        while (true) {
          auto comma = s.find(',');
          cr.shape.push_back(must_compile(s.substr(0, comma)));
          if (comma == std::string_view::npos) break;
          s.remove_prefix(comma + 1);
        }
        if (r.when) cr.when = must_compile(r.when);
        if (r.count) cr.count = must_compile(r.count);
        c.rules.push_back(std::move(cr));
      }
      if (t->mtp_count) c.mtp_count = must_compile(t->mtp_count);
      v.push_back(std::move(c));
    }
    return v;
  }();
  return all;
}

const Compiled* compiled_for(const Table* t) {
  for (const auto& c : compiled())
    if (c.table == t) return &c;
  return nullptr;
}

std::vector<ArchSpec> make_specs() {
  std::vector<ArchSpec> v;
  for (const Table* t : detail::tables()) {
    ArchSpec s;
    s.model_type = t->model_type;
    s.aliases = std::span<const std::string_view>(t->aliases.data(), t->aliases.size());
    s.summary = t->summary;
    s.strict_loader_drops_inv_freq = t->mlx_drops_inv_freq;
    s.strict_loader_pops_tied_head = t->mlx_pops_tied_head;
    s.moe = t->moe != detail::MoeRule::None;
    s.impl = t;
    v.push_back(s);
  }
  return v;
}

const std::vector<ArchSpec>& specs() {
  static const std::vector<ArchSpec> s = make_specs();
  return s;
}

st::DType parse_dtype_name(std::string_view s, bool* ok) {
  *ok = true;
  if (s == "bfloat16") return st::DType::BF16;
  if (s == "float16" || s == "half") return st::DType::F16;
  if (s == "float32" || s == "float") return st::DType::F32;
  *ok = false;
  return st::DType::BF16;
}

std::string join_path(const std::string& base, std::string_view key) {
  return base.empty() ? std::string(key) : base + "." + std::string(key);
}

constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxExperts = 65536;
constexpr int64_t kMaxDim = int64_t{1} << 40;

}  // namespace

const ArchSpec* find_arch(std::string_view model_type) {
  const Table* t = detail::find_table(model_type);
  if (!t) return nullptr;
  for (const auto& s : specs())
    if (s.impl == t) return &s;
  return nullptr;
}

std::span<const ArchSpec* const> all_archs() {
  static const std::vector<const ArchSpec*> ptrs = [] {
    std::vector<const ArchSpec*> p;
    for (const auto& s : specs()) p.push_back(&s);
    return p;
  }();
  return ptrs;
}

std::string_view dropped_by_loaders(std::string_view name) {
  for (std::string_view s : {"rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached"})
    if (name.size() >= s.size() && name.substr(name.size() - s.size()) == s)
      return "a non-persistent rotary buffer: transformers never saves it and ignores it on load";
  return {};
}

// ---- resolve_config -----------------------------------------------------------------------

ConfigView resolve_config(const json::Value& config, const NameProbe& has_tensor) {
  ConfigView v;
  v.root = &config;
  v.text = &config;
  if (!config.is_object()) {
    v.issues.push_back({ConfigIssue::WrongType, "", "config.json is not a JSON object", "", true});
    return v;
  }
  if (const auto* mt = config.find("model_type")) {
    if (mt->is_string())
      v.model_type = mt->as_string();
    else
      v.issues.push_back({ConfigIssue::WrongType, "model_type", "model_type is not a string", "", true});
  } else {
    v.issues.push_back({ConfigIssue::MissingRequired, "model_type",
                        "config.json has no model_type: loaders cannot pick an architecture",
                        "add the model_type of the architecture (e.g. \"llama\")"});
  }
  const Table* t = detail::find_table(v.model_type);

  // Nested text config: wrappers keep the text fields under text_config & co.
  for (const char* k : {"text_config", "language_config", "thinker_config", "llm_config"}) {
    const auto* c = config.find(k);
    if (!c) continue;
    if (!c->is_object()) {
      if (!c->is_null())
        v.issues.push_back({ConfigIssue::WrongType, k, std::string(k) + " is not an object", "", true});
      continue;
    }
    bool use = (t && t->nested_text) || !config.find("hidden_size");
    if (!use) continue;
    v.text = c;
    v.text_path = k;
    break;
  }
  v.text_model_type = v.text->get_string("model_type").value_or(v.model_type);
  if (!t && v.text != v.root) t = detail::find_table(v.text_model_type);
  if (t && !t->nested_text && v.text != v.root && t->model_type != v.text_model_type) {
    // an outer alias (qwen3_5) whose text table is the real one
    if (const Table* tt = detail::find_table(v.text_model_type)) t = tt;
  }
  if (t && t->nested_text && v.text == v.root && config.find("hidden_size") == nullptr) {
    // a wrapper without text_config: every text field takes its default
    v.issues.push_back({ConfigIssue::Note, "text_config",
                        "no text_config: the text model takes every default of " +
                            std::string(t->text_model_type ? t->text_model_type : "its text config"),
                        ""});
  }
  const ArchSpec* spec = nullptr;
  if (t)
    for (const auto& s : specs())
      if (s.impl == t) spec = &s;
  v.arch = spec;

  // dtype
  for (const json::Value* o : {v.text, v.root}) {
    bool found = false;
    for (const char* k : {"torch_dtype", "dtype"}) {
      if (auto s = o->get_string(k)) {
        bool ok;
        st::DType d = parse_dtype_name(*s, &ok);
        if (ok) v.model_dtype = d;
        found = true;
        break;
      }
    }
    if (found) break;
  }

  v.experts = find_expert_count(config);

  // layer_types / mlp_only_layers / list-valued intermediate_size
  if (const auto* lt = v.text->find("layer_types"); lt && lt->is_array())
    for (const auto& e : lt->as_array())
      v.layer_types.push_back(e.is_string() ? e.as_string() : std::string());
  if (const auto* ml = v.text->find("mlp_only_layers"); ml && ml->is_array())
    for (const auto& e : ml->as_array())
      if (e.is_int()) v.mlp_only_layers.push_back(e.as_int());

  if (!t) return v;
  const Compiled* c = compiled_for(t);
  std::string tp = v.text_path;

  auto lookup = [&](std::string_view name) -> std::optional<int64_t> { return v.dim(name); };
  for (const auto& f : c->fields) {
    std::optional<int64_t> val;
    std::string where;
    bool present = false;
    if (!f.keys.empty() && f.keys[0] == "@experts") {
      if (v.experts.count > 0) {
        val = v.experts.count;
        where = v.experts.field;
        present = true;
      }
    } else {
      for (const auto& k : f.keys) {
        const json::Value* x = v.text->find(k);
        std::string path = join_path(tp, k);
        if (!x && v.text != v.root && k == "vocab_size") {
          x = v.root->find(k);
          path = k;
        }
        if (!x) continue;
        present = true;
        where = path;
        if (x->is_null()) {
          if (f.null_zero) val = 0;
          else present = false;
          break;
        }
        if (x->is_bool()) {
          val = x->as_bool() ? 1 : 0;
        } else if (x->is_int()) {
          val = x->as_int();
        } else if (x->is_number() && std::floor(x->as_double()) == x->as_double() &&
                   std::fabs(x->as_double()) < 1e15) {
          val = static_cast<int64_t>(x->as_double());
        } else if (x->is_array() && k == "intermediate_size") {
          for (const auto& e : x->as_array()) {
            if (!e.is_int() || e.as_int() <= 0 || e.as_int() > kMaxDim) {
              v.layer_intermediate.clear();
              break;
            }
            v.layer_intermediate.push_back(e.as_int());
          }
          if (!v.layer_intermediate.empty()) val = v.layer_intermediate[0];
        }
        if (!val) {
          v.issues.push_back({ConfigIssue::WrongType, path,
                              path + " has the wrong type (" + x->dump().substr(0, 60) +
                                  "); expected " + (f.boolean ? "a boolean" : "an integer"),
                              "fix the value in config.json", true});
          present = false;
        } else if (!f.boolean && (*val < 0 || *val > kMaxDim)) {
          v.issues.push_back({ConfigIssue::WrongType, path,
                              path + " = " + std::to_string(*val) + " is out of range",
                              "", true});
          val.reset();
          present = false;
        }
        break;
      }
    }
    if (!val && f.def) {
      val = eval_expr(*f.def, lookup);
      if (!f.keys.empty() && !present && val) {
        std::string key = f.keys[0] == "@experts" ? "num_experts" : f.keys[0];
        v.issues.push_back({ConfigIssue::Defaulted, join_path(tp, key),
                            join_path(tp, key) + " is absent; loaders use " + std::to_string(*val) +
                                " (" + f.def_text + ")",
                            "", false, f.var, *val});
      }
    }
    if (!val && !f.def && !present) {
      std::string key = f.keys.empty() ? f.var : f.keys[0];
      v.issues.push_back({ConfigIssue::MissingRequired, join_path(tp, key),
                          join_path(tp, key) + " is required by " + std::string(t->model_type) +
                              " and has no default",
                          "add " + key + " to config.json"});
    }
    if (val) v.dims.emplace_back(f.var, *val);
  }

  // sanity bounds so a hostile config cannot make us plan billions of tensors
  if (auto L = v.dim("L"); L && (*L <= 0 || *L > kMaxLayers)) {
    v.issues.push_back({ConfigIssue::WrongType, join_path(tp, "num_hidden_layers"),
                        "num_hidden_layers = " + std::to_string(*L) + " is implausible", "", true});
  }
  if (auto E = v.dim("E"); E && *E > kMaxExperts) {
    v.issues.push_back({ConfigIssue::WrongType, v.experts.field,
                        "expert count " + std::to_string(*E) + " is implausible", "", true});
  }
  for (const char* must_pos : {"H", "nh", "V"}) {
    if (auto d = v.dim(must_pos); d && *d == 0)
      v.issues.push_back({ConfigIssue::WrongType, must_pos, std::string(must_pos) + " is 0", "", true});
  }
  if (!v.layer_intermediate.empty()) {
    auto L = v.dim_or("L", 0);
    if (static_cast<int64_t>(v.layer_intermediate.size()) != L)
      v.issues.push_back({ConfigIssue::Inconsistent, join_path(tp, "intermediate_size"),
                          "intermediate_size lists " + std::to_string(v.layer_intermediate.size()) +
                              " values for " + std::to_string(L) + " layers",
                          "", true});
  }
  if (!v.layer_types.empty() && static_cast<int64_t>(v.layer_types.size()) != v.dim_or("L", 0)) {
    v.issues.push_back({ConfigIssue::Inconsistent, join_path(tp, "layer_types"),
                        "layer_types has " + std::to_string(v.layer_types.size()) +
                            " entries for num_hidden_layers = " + std::to_string(v.dim_or("L", 0)),
                        "", true});
  }

  // tie_word_embeddings
  const json::Value* tie = v.text->find("tie_word_embeddings");
  if (!tie) tie = v.root->find("tie_word_embeddings");
  if (tie && tie->is_bool()) {
    v.tie_explicit = true;
    v.tied = tie->as_bool();
  } else {
    if (tie && !tie->is_null())
      v.issues.push_back({ConfigIssue::WrongType, "tie_word_embeddings",
                          "tie_word_embeddings is not a boolean", "", true});
    v.tied = t->tie_default_t;
    if (!t->tie_forced && t->tie_default_m >= 0 && (t->tie_default_m != 0) != t->tie_default_t) {
      v.issues.push_back({ConfigIssue::LoadersDisagree, "tie_word_embeddings",
                          "tie_word_embeddings is absent: transformers assumes " +
                              std::string(t->tie_default_t ? "true" : "false") + ", mlx-lm " +
                              std::string(t->tie_default_m ? "true" : "false") + " for " +
                              std::string(t->model_type),
                          "set tie_word_embeddings explicitly"});
    }
  }
  if (t->tie_forced) v.tied = true;

  // key layout
  v.prefix = std::string(t->prefixes.empty() ? "model." : t->prefixes[0]);
  if (has_tensor) {
    for (auto p : t->prefixes) {
      std::string ps(p);
      if (has_tensor(ps + "norm.weight") || has_tensor(ps + "embed_tokens.weight") ||
          has_tensor(ps + "layers.0.input_layernorm.weight")) {
        v.prefix = ps;
        break;
      }
    }
  }
  v.head = v.prefix == "language_model.model." ? "language_model.lm_head.weight" : "lm_head.weight";
  for (auto p : t->tower_prefixes) v.tower_prefixes.emplace_back(p);
  if (t->mtp == detail::MtpKind::RootMtp) v.tower_prefixes.emplace_back("mtp.");

  // gemma3 SigLIP tower dims
  if (t->siglip_tower) {
    if (const auto* vc = config.find("vision_config"); vc && vc->is_object()) {
      auto g = [&](const char* k, int64_t d) {
        auto x = vc->get_int(k);
        return x && *x > 0 && *x < kMaxDim ? *x : d;
      };
      v.dims.emplace_back("vH", g("hidden_size", 1152));
      v.dims.emplace_back("vI", g("intermediate_size", 4304));
      v.dims.emplace_back("vL", std::min<int64_t>(g("num_hidden_layers", 27), kMaxLayers));
      v.dims.emplace_back("vp", g("patch_size", 14));
      v.dims.emplace_back("vimg", g("image_size", 896));
      v.dims.emplace_back("vC", g("num_channels", 3));
    }
  }
  // qwen3_5 vision tower dims
  if (t->qwen_vision_tower) {
    if (const auto* vc = config.find("vision_config"); vc && vc->is_object()) {
      auto g = [&](const char* k, int64_t d) {
        auto x = vc->get_int(k);
        return x && *x > 0 && *x < kMaxDim ? *x : d;
      };
      v.dims.emplace_back("qvH", g("hidden_size", 1152));
      v.dims.emplace_back("qvI", g("intermediate_size", 4304));
      v.dims.emplace_back("qvL", std::min<int64_t>(g("depth", 27), kMaxLayers));
      v.dims.emplace_back("qvp", g("patch_size", 16));
      v.dims.emplace_back("qvt", g("temporal_patch_size", 2));
      v.dims.emplace_back("qvC", g("in_channels", 3));
      v.dims.emplace_back("qvpos", g("num_position_embeddings", 2304));
      v.dims.emplace_back("qvout", g("out_hidden_size", v.dim_or("H", 0)));
      v.dims.emplace_back("qvm", g("spatial_merge_size", 2));
    }
  }
  return v;
}

// ---- expected_tensors ---------------------------------------------------------------------

namespace {

struct LayerVars {
  std::pair<std::string_view, int64_t> v[10];
  size_t n = 0;
  void set(std::string_view k, int64_t x) { v[n++] = {k, x}; }
};

// base + rel with {e} and {j} replaced by the numbers (one allocation; called per expert).
std::string subst(std::string_view base, std::string_view rel, int64_t e, int64_t j) {
  std::string out;
  out.reserve(base.size() + rel.size() + 16);
  out.append(base);
  char num[24];
  for (size_t p = 0; p < rel.size();) {
    const size_t brace = rel.find('{', p);
    if (brace == std::string_view::npos) {
      out.append(rel.substr(p));
      break;
    }
    out.append(rel.substr(p, brace - p));
    const std::string_view rest = rel.substr(brace);
    if (rest.starts_with("{e}") || rest.starts_with("{j}")) {
      const auto r = std::to_chars(num, num + sizeof num, rest[1] == 'e' ? e : j);
      out.append(num, r.ptr);
      p = brace + 3;
    } else {
      out += '{';
      p = brace + 1;
    }
  }
  return out;
}

// base + rel for one expert rule of one layer, for every expert: the text around rel's one
// "{e}" is laid out once, and each name is written into one reused buffer (the plan interns
// it). A rel with no "{e}", several, or a "{j}" goes through subst().
class ExpertName {
 public:
  ExpertName(std::string_view base, std::string_view rel) : base_(base), rel_(rel) {
    const size_t at = rel.find("{e}");
    simple_ = at != std::string_view::npos && rel.find('{', at + 3) == std::string_view::npos &&
              rel.substr(0, at).find('{') == std::string_view::npos;
    if (!simple_) return;
    head_.reserve(base.size() + at);
    head_.append(base).append(rel.substr(0, at));
    tail_ = rel.substr(at + 3);
    out_ = head_;
  }
  // The name of expert e; valid until the next call.
  std::string_view operator()(int64_t e) {
    if (!simple_) return out_ = subst(base_, rel_, e, 0);
    char num[24];
    const auto r = std::to_chars(num, num + sizeof num, e);
    out_.resize(head_.size());  // keeps head_'s bytes, written once
    out_.append(num, size_t(r.ptr - num)).append(tail_);
    return out_;
  }

 private:
  std::string_view base_, rel_;
  bool simple_ = false;
  std::string head_;
  std::string_view tail_;
  std::string out_;
};

}  // namespace

Plan expected_tensors(const ConfigView& view, const quant::QuantScheme* scheme, const ExpectOptions& opts) {
  Plan out;
  if (!view.arch) return out;
  const Table* t = static_cast<const Table*>(view.arch->impl);
  const Compiled* c = compiled_for(t);
  if (!c) return out;
  for (const auto& is : view.issues)
    if (is.kind == ConfigIssue::WrongType && is.error &&
        (is.field.ends_with("num_hidden_layers") || is.message.find("implausible") != std::string::npos))
      return out;

  const int64_t L = view.dim_or("L", 0);
  const int64_t E = std::clamp<int64_t>(view.dim_or("E", 0), 0, kMaxExperts);
  const int64_t n_mtp = c->mtp_count ? std::clamp<int64_t>(view.dim_or("n_mtp", 0), 0, 64) : 0;

  LayerVars lv;
  auto lookup = [&](std::string_view name) -> std::optional<int64_t> {
    for (size_t k = 0; k < lv.n; ++k)
      if (lv.v[k].first == name) return lv.v[k].second;
    return view.dim(name);
  };
  auto eval_shape = [&](const CompiledRule& r, std::vector<uint64_t>& shape) {
    shape.clear();
    for (const auto& e : r.shape) {
      auto x = eval_expr(*e, lookup);
      if (!x || *x < 0) return false;
      shape.push_back(static_cast<uint64_t>(*x));
    }
    return true;
  };
  auto cond = [&](const CompiledRule& r) {
    if (!r.when) return true;
    auto x = eval_expr(*r.when, lookup);
    return x && *x != 0;
  };

  uint32_t next_group = 1;
  uint32_t mtp_group = 0;
  auto emit = [&](std::string_view name, const std::vector<uint64_t>& shape, const Rule& r, int32_t layer,
                  int32_t expert, Presence pres, uint32_t group, bool mtp, bool tower,
                  std::string_view why) {
    ExpectedTensor& x = out.add(name);  // in place: a million-tensor plan moves nothing
    x.shape = shape;
    x.dtype = r.dtype;
    x.kind = r.kind;
    x.presence = pres;
    x.group = group;
    x.layer = layer;
    x.expert = expert;
    x.mtp = mtp;
    x.tower = tower;
    x.why = why;
  };

  const int64_t sparse_step = std::max<int64_t>(1, view.dim_or("sparse_step", 1));
  const int64_t first_k = view.dim_or("first_k", 0);
  const int64_t freq = std::max<int64_t>(1, view.dim_or("freq", 1));
  const int64_t fai = std::max<int64_t>(1, view.dim_or("fai", 4));
  const int64_t swp = std::max<int64_t>(1, view.dim_or("swp", 1));
  const int64_t n_shared_kv = view.dim_or("n_shared_kv", 0);
  const int64_t I = view.dim_or("I", 0);

  auto set_layer = [&](int64_t i, bool mtp) {
    lv.n = 0;
    lv.set("i", i);
    bool moe = false;
    switch (t->moe) {
      case detail::MoeRule::None: break;
      case detail::MoeRule::All: moe = true; break;
      case detail::MoeRule::SparseStep:
        moe = E > 0 && (i + 1) % sparse_step == 0 &&
              std::find(view.mlp_only_layers.begin(), view.mlp_only_layers.end(), i) ==
                  view.mlp_only_layers.end();
        break;
      case detail::MoeRule::FirstKDense: moe = E > 0 && i >= first_k && i % freq == 0; break;
      case detail::MoeRule::EnableBlock: moe = view.dim_or("moe_block", 0) && E > 0; break;
    }
    lv.set("moe", moe);
    bool linear = false;
    if (t->linear_attention && !mtp) {
      if (i < static_cast<int64_t>(view.layer_types.size()))
        linear = view.layer_types[i] == "linear_attention";
      else
        linear = (i + 1) % fai != 0;
    }
    bool full;
    if (t->kv_shared) {  // gemma sliding/full pattern
      if (i < static_cast<int64_t>(view.layer_types.size()))
        full = view.layer_types[i] == "full_attention";
      else
        full = (i + 1) % swp == 0;
    } else {
      full = !linear;
    }
    lv.set("linear", linear);
    lv.set("full", full);
    bool kvshared = t->kv_shared && !mtp && n_shared_kv > 0 && i >= L - n_shared_kv;
    lv.set("kvshared", kvshared);
    int64_t Ii = I;
    if (!view.layer_intermediate.empty() && i < static_cast<int64_t>(view.layer_intermediate.size()))
      Ii = view.layer_intermediate[i];
    if (kvshared && view.dim_or("double_wide", 0)) Ii = 2 * I;
    lv.set("Ii", Ii);
    int64_t hd = view.dim_or("hd", 0);
    lv.set("hdi", full && view.dim("ghd") ? view.dim_or("ghd", hd) : hd);
  };

  std::vector<uint64_t> shape;
  const std::string& P = view.prefix;

  // globals
  lv.n = 0;
  for (const auto& r : c->rules) {
    const Rule& rule = *r.rule;
    if (rule.scope == Scope::Global) {
      if (!cond(r) || !eval_shape(r, shape)) continue;
      emit(P + rule.name, shape, rule, -1, -1, Presence::Required, 0, false, false, {});
    } else if (rule.scope == Scope::Head) {
      if (!eval_shape(r, shape)) continue;
      emit(view.head, shape, rule, -1, -1, view.tied ? Presence::Optional : Presence::Required, 0,
           false, false, view.tied ? "tied" : "");
    } else if (rule.scope == Scope::Index) {
      if (!eval_shape(r, shape)) continue;
      auto n = eval_expr(*r.count, lookup);
      for (int64_t j = 0; n && j < std::min<int64_t>(*n, 1024); ++j)
        emit(subst(P, rule.name, 0, j), shape, rule, -1, -1, Presence::Required, 0, false, false, {});
    }
  }

  // decoder layers (and deepseek-style MTP layers that are decoder layers)
  const int64_t mtp_decoder = t->mtp == detail::MtpKind::DecoderLayers && opts.include_mtp ? n_mtp : 0;
  if (mtp_decoder > 0) mtp_group = next_group++;
  {
    // Room for every layer's entries at once (an upper bound: conditions drop some), so a
    // 90k-entry plan is not grown by doubling, copying its entries each time. Untouched
    // capacity costs address space only; the cap keeps a hostile config from reserving more.
    uint64_t per_layer = 0, per_expert = 0;
    for (const auto& r : c->rules) {
      const Scope sc = r.rule->scope;
      if (sc == Scope::Expert) ++per_expert;
      else if (sc == Scope::Layer || sc == Scope::MtpLayer) ++per_layer;
    }
    const uint64_t layers = static_cast<uint64_t>(std::max<int64_t>(0, std::min<int64_t>(L, kMaxLayers) + mtp_decoder));
    const uint64_t bound = out.size() + layers * (per_layer + per_expert * static_cast<uint64_t>(E));
    out.reserve(static_cast<size_t>(std::min<uint64_t>(bound, 2'000'000)));
  }
  for (int64_t i = 0; i < L + mtp_decoder; ++i) {
    bool mtp = i >= L;
    set_layer(i, mtp);
    std::string base = P + "layers." + std::to_string(i) + ".";
    uint32_t kv_group = 0;
    for (const auto& r : c->rules) {
      const Rule& rule = *r.rule;
      if (rule.scope != Scope::Layer && rule.scope != Scope::Expert &&
          !(mtp && rule.scope == Scope::MtpLayer))
        continue;
      if (!cond(r) || !eval_shape(r, shape)) continue;
      Presence pres = mtp ? Presence::Group : Presence::Required;
      uint32_t group = mtp ? mtp_group : 0;
      std::string_view why = mtp ? "MTP layer" : "";
      if (rule.kv_group && lookup("kvshared").value_or(0)) {
        if (!kv_group) kv_group = next_group++;
        pres = Presence::Group;
        group = kv_group;
        why = "kv-shared layer";
      }
      if (rule.scope == Scope::Expert) {
        ExpertName en(base, rule.name);
        for (int64_t e = 0; e < E; ++e)
          emit(en(e), shape, rule, static_cast<int32_t>(i), static_cast<int32_t>(e), pres, group, mtp, false, why);
      } else {
        emit(base + rule.name, shape, rule, static_cast<int32_t>(i), -1, pres, group, mtp, false, why);
      }
    }
  }

  // other MTP layouts
  if (opts.include_mtp && n_mtp > 0 && t->mtp == detail::MtpKind::MimoLayers) {
    mtp_group = next_group++;
    for (int64_t k = 0; k < n_mtp; ++k) {
      set_layer(k, true);
      std::string base = P + "mtp_layers." + std::to_string(k) + ".";
      for (const auto& r : c->rules) {
        if (r.rule->scope != Scope::MtpLayer || !cond(r) || !eval_shape(r, shape)) continue;
        emit(base + r.rule->name, shape, *r.rule, static_cast<int32_t>(L + k), -1, Presence::Group,
             mtp_group, true, false, "MTP layer");
      }
    }
  }
  if (opts.include_mtp && n_mtp > 0 && t->mtp == detail::MtpKind::RootMtp) {
    mtp_group = next_group++;
    lv.n = 0;
    for (const auto& r : c->rules)
      if (r.rule->scope == Scope::MtpGlobal && cond(r) && eval_shape(r, shape))
        emit(std::string("mtp.") + r.rule->name, shape, *r.rule, -1, -1, Presence::Group, mtp_group,
             true, false, "MTP");
    for (int64_t k = 0; k < n_mtp; ++k) {
      set_layer(k, true);
      std::string base = "mtp.layers." + std::to_string(k) + ".";
      for (const auto& r : c->rules) {
        const Rule& rule = *r.rule;
        if (rule.scope != Scope::Layer && rule.scope != Scope::Expert) continue;
        if (!cond(r) || !eval_shape(r, shape)) continue;
        if (rule.scope == Scope::Expert) {
          ExpertName en(base, rule.name);
          for (int64_t e = 0; e < E; ++e)
            emit(en(e), shape, rule, static_cast<int32_t>(L + k),
                 static_cast<int32_t>(e), Presence::Group, mtp_group, true, false, "MTP");
        } else {
          emit(base + rule.name, shape, rule, static_cast<int32_t>(L + k), -1, Presence::Group,
               mtp_group, true, false, "MTP");
        }
      }
    }
  }

  // gemma3 SigLIP vision tower + projector
  if (opts.include_towers && t->siglip_tower && view.dim("vH")) {
    const bool legacy = P == "language_model.model.";
    const std::string vt = legacy ? "vision_tower.vision_model." : "model.vision_tower.vision_model.";
    const std::string mp = legacy ? "multi_modal_projector." : "model.multi_modal_projector.";
    const uint64_t vH = view.dim_or("vH", 0), vI = view.dim_or("vI", 0), vp = view.dim_or("vp", 1),
                   img = view.dim_or("vimg", 0), C = view.dim_or("vC", 3);
    const int64_t vL = view.dim_or("vL", 0);
    const uint64_t npos = vp ? (img / vp) * (img / vp) : 0;
    const uint64_t H = view.dim_or("H", 0);
    auto tw = [&](const std::string& name, std::vector<uint64_t> s, ModuleKind k) {
      ExpectedTensor& x = out.add(name);
      x.shape = std::move(s);
      x.kind = k;
      x.tower = true;
    };
    tw(vt + "embeddings.patch_embedding.weight", {vH, C, vp, vp}, ModuleKind::Param);
    tw(vt + "embeddings.patch_embedding.bias", {vH}, ModuleKind::Bias);
    tw(vt + "embeddings.position_embedding.weight", {npos, vH}, ModuleKind::Embedding);
    for (int64_t i = 0; i < vL; ++i) {
      std::string b = vt + "encoder.layers." + std::to_string(i) + ".";
      for (const char* n : {"layer_norm1", "layer_norm2"}) {
        tw(b + n + ".weight", {vH}, ModuleKind::Norm);
        tw(b + n + ".bias", {vH}, ModuleKind::Norm);
      }
      for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
        tw(b + "self_attn." + n + ".weight", {vH, vH}, ModuleKind::Linear);
        tw(b + "self_attn." + n + ".bias", {vH}, ModuleKind::Bias);
      }
      tw(b + "mlp.fc1.weight", {vI, vH}, ModuleKind::Linear);
      tw(b + "mlp.fc1.bias", {vI}, ModuleKind::Bias);
      tw(b + "mlp.fc2.weight", {vH, vI}, ModuleKind::Linear);
      tw(b + "mlp.fc2.bias", {vH}, ModuleKind::Bias);
    }
    tw(vt + "post_layernorm.weight", {vH}, ModuleKind::Norm);
    tw(vt + "post_layernorm.bias", {vH}, ModuleKind::Norm);
    tw(mp + "mm_input_projection_weight", {vH, H}, ModuleKind::Param);
    tw(mp + "mm_soft_emb_norm.weight", {vH}, ModuleKind::Norm);
  }

  // qwen3_5 vision tower (model.visual.*): shapes from vision_config
  if (opts.include_towers && t->qwen_vision_tower && view.dim("qvH")) {
    const uint64_t vH = view.dim_or("qvH", 0), vI = view.dim_or("qvI", 0), p = view.dim_or("qvp", 1),
                   tp = view.dim_or("qvt", 1), C = view.dim_or("qvC", 3), npos = view.dim_or("qvpos", 0),
                   vo = view.dim_or("qvout", 0), m = view.dim_or("qvm", 1);
    const int64_t vL = view.dim_or("qvL", 0);
    const uint64_t mH = vH * m * m;
    auto tw = [&](const std::string& name, std::vector<uint64_t> s, ModuleKind k) {
      ExpectedTensor& x = out.add("model.visual." + name);
      x.shape = std::move(s);
      x.kind = k;
      x.tower = true;
    };
    tw("patch_embed.proj.weight", {vH, C, tp, p, p}, ModuleKind::Param);
    tw("patch_embed.proj.bias", {vH}, ModuleKind::Bias);
    tw("pos_embed.weight", {npos, vH}, ModuleKind::Embedding);
    for (int64_t i = 0; i < vL; ++i) {
      std::string b = "blocks." + std::to_string(i) + ".";
      tw(b + "norm1.weight", {vH}, ModuleKind::Norm);
      tw(b + "norm1.bias", {vH}, ModuleKind::Norm);
      tw(b + "norm2.weight", {vH}, ModuleKind::Norm);
      tw(b + "norm2.bias", {vH}, ModuleKind::Norm);
      tw(b + "attn.qkv.weight", {3 * vH, vH}, ModuleKind::Linear);
      tw(b + "attn.qkv.bias", {3 * vH}, ModuleKind::Bias);
      tw(b + "attn.proj.weight", {vH, vH}, ModuleKind::Linear);
      tw(b + "attn.proj.bias", {vH}, ModuleKind::Bias);
      tw(b + "mlp.linear_fc1.weight", {vI, vH}, ModuleKind::Linear);
      tw(b + "mlp.linear_fc1.bias", {vI}, ModuleKind::Bias);
      tw(b + "mlp.linear_fc2.weight", {vH, vI}, ModuleKind::Linear);
      tw(b + "mlp.linear_fc2.bias", {vH}, ModuleKind::Bias);
    }
    tw("merger.norm.weight", {vH}, ModuleKind::Norm);
    tw("merger.norm.bias", {vH}, ModuleKind::Norm);
    tw("merger.linear_fc1.weight", {mH, mH}, ModuleKind::Linear);
    tw("merger.linear_fc1.bias", {mH}, ModuleKind::Bias);
    tw("merger.linear_fc2.weight", {vo, mH}, ModuleKind::Linear);
    tw("merger.linear_fc2.bias", {vo}, ModuleKind::Bias);
  }

  // quantization: replace each quantized module's weight by its packed form + companions
  if (scheme && scheme->method != quant::Method::None) {
    // Entries taken over keep their names' bytes: `q` takes `out`'s storage with them.
    Plan q = std::move(out);
    std::vector<ExpectedTensor> floats = std::move(q.entries());
    q.entries().clear();
    q.reserve(floats.size() * 2);
    for (auto& x : floats) {
      bool weight_like = (x.kind == ModuleKind::Linear || x.kind == ModuleKind::Embedding) &&
                         x.shape.size() >= 2 && !x.tower;
      if (!weight_like) {
        q.entries().push_back(std::move(x));
        continue;
      }
      auto [o, in] = x.out_in();
      quant::ModuleQuant mq = scheme->for_module(x.module(), x.kind, in);
      if (!mq.quantized) {
        q.entries().push_back(std::move(x));
        continue;
      }
      std::vector<uint64_t> lead(x.shape.begin(), x.shape.end() - 2);
      const Plan parts = quant::quantized_tensors(x.module(), lead, o, in, mq);
      for (const auto& p : parts) {
        ExpectedTensor& y = q.entries().emplace_back(p);
        y.name = q.intern(p.name);
        y.layer = x.layer;
        y.expert = x.expert;
        y.presence = x.presence;
        y.group = x.group;
        y.mtp = x.mtp;
        y.why = x.why;
      }
    }
    out = std::move(q);
  }
  return out;
}

}  // namespace ckpt::arch
