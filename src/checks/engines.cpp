// Engine-specific checks: what one engine refuses or does differently, judged from the engine
// profiles (src/engines/). CT011 template an engine's parser refuses (or hangs on), CT012
// template an engine renders differently, CF006 rope_theta absent and engines' defaults
// disagree, CF012 config key an engine requires, QZ012 quantization scheme/mode an engine does
// not load, TK020 tokenizer model an engine cannot build, IX014 indexed shard a glob-based
// loader never opens. Every finding names its engines; apply_verdicts (src/engines/verdicts.cpp)
// sets the portable or per-engine severity.
#include <simdjson.h>

#include <array>
#include <map>
#include <optional>

#include "checks/family.h"
#include "checks/gguf_templates.h"
#include "ckpt/arch.h"
#include "ckpt/engines.h"
#include "ckpt/jinja.h"
#include "ckpt/quant.h"
#include "engines/glob.h"

namespace ckpt::engines {

namespace {

std::string short_name(const Profile& p) {
  if (p.name == "swiftlm") return "SwiftLM";
  if (p.name == "transformers.js") return "transformers.js";
  if (p.name == "mlx-lm") return "mlx-lm";
  if (p.name == "llama.cpp") return "llama.cpp";
  return std::string(p.name);
}

const std::vector<Profile>& universe(const Selection& sel) { return sel.portable() ? all_profiles() : sel.engines; }

// ---- CT011 / CT012 ----

json::Value bare_context(const json::Value* tokenizer_config) {
  json::Value base = json::parse(R"({"messages": [{"role": "user", "content": "Hello"}], "tools": null,
                                     "documents": null, "add_generation_prompt": true})").value;
  return jinja::merge_context(jinja::special_tokens(tokenizer_config), base);
}

std::string escape_snippet(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else o.push_back(c);
  }
  return o;
}

void template_findings(const Checkpoint& ck, const Selection& sel, std::vector<Finding>& out) {
  jinja::DiscoveryInput in;
  for (const auto& t : ck.templates) in.jinja_files.emplace_back(t.file, t.text);
  if (ck.tokenizer_config.ok()) in.tokenizer_config = &ck.tokenizer_config.value;
  if (ck.chat_template_json.ok()) in.chat_template_json = &ck.chat_template_json.value;
  jinja::Discovery disc = jinja::discover_templates(in);
  for (auto& t : checks::gguf_chat_templates(ck)) disc.templates.push_back(std::move(t));  // llama.cpp's dialect for GGUF
  if (disc.templates.empty()) return;
  jinja::Options opts;
  opts.now = 1721995200;  // pinned (2024-07-26 12:00 UTC): both renders must see the same clock
  json::Value ctx;
  bool have_ctx = false;
  for (const auto& src : disc.templates) {
    jinja::Error perr;
    auto parsed = jinja::Template::parse(src.text, src.origin, opts, &perr);
    if (!parsed) continue;  // CT001: Python refuses it, so every engine does
    std::optional<std::string> reference_out;
    for (const Profile& p : universe(sel)) {
      if (p.dialect.kind == DialectKind::python_jinja2) continue;
      DialectPrediction pred = predict_dialect(p.dialect, src.text);
      std::string who = short_name(p) + " (" + p.dialect.label() + ")";
      if (const DialectIssue* r = pred.first_refusal()) {
        std::string where = src.origin + ":" + std::to_string(r->line) + ":" + std::to_string(r->column);
        Finding f;
        f.code = "CT011";
        f.severity = Severity::error;
        f.file = src.file;
        if (r->kind == DialectIssue::Kind::hangs)
          f.message = who + " would hang on the chat template at " + where + ": " + r->what;
        else
          f.message = who + ": " + (r->engine_error.empty() ? std::string("parse error") : r->engine_error) +
                      " at " + where + " — " + r->what;
        size_t more = 0;
        for (const auto& i : pred.issues)
          if (i.kind != DialectIssue::Kind::renders_differently && &i != r) ++more;
        if (more) f.message += " (" + std::to_string(more) + " more construct(s) it refuses)";
        f.hint = "source: " + r->source + "; rewrite the construct in the portable subset, or serve with an engine "
                 "whose parser accepts it";
        f.engines = {std::string(p.name)};
        out.push_back(std::move(f));
        continue;
      }
      // Lexer differences are predicted as a rewritten source; @huggingface/jinja, llama.cpp and
      // swift-jinja also print values differently at run time (jinja::Runtime), so their render
      // is always compared.
      std::optional<jinja::Runtime> runtime;
      const char* runtime_cause = "";
      switch (p.dialect.kind) {
        case DialectKind::hf_jinja:
          runtime = jinja::Runtime::hf_jinja;
          runtime_cause = "its runtime prints values as JavaScript does (true/false, None as \"\", lists "
                          "and dicts as JSON, 1.0|tojson as 1, the sign of %)";
          break;
        case DialectKind::llama_cpp_jinja:
          runtime = jinja::Runtime::llama_cpp;
          runtime_cause = "its runtime (common/jinja) prints None as \"\", a list as its items run together "
                          "and a dict as \"\", drops None from ~, and sorts case-sensitively";
          break;
        case DialectKind::swift_jinja:
          runtime = jinja::Runtime::swift_jinja;
          runtime_cause = "its runtime prints true/false and None as \"\", sorts and compacts tojson "
                          "(ensure_ascii on), truncates // and %, and iterates dict items in sorted key order";
          break;
        default: break;
      }
      const bool hf_runtime = runtime.has_value();
      if (pred.rewritten.empty() && !hf_runtime) continue;
      if (!have_ctx) {
        ctx = bare_context(in.tokenizer_config);
        have_ctx = true;
      }
      if (!reference_out) {
        auto r = parsed->render(ctx, opts);
        if (!r.ok()) break;  // CT002 covers a failing bare probe
        reference_out = r.output;
      }
      jinja::Options engine_opts = opts;
      if (runtime) engine_opts.runtime = *runtime;
      jinja::RenderResult r2;
      if (pred.rewritten.empty()) {
        r2 = parsed->render(ctx, engine_opts);
      } else {
        jinja::Error e2;
        auto rewritten = jinja::Template::parse(pred.rewritten, src.origin, opts, &e2);
        if (!rewritten) continue;
        r2 = rewritten->render(ctx, engine_opts);
      }
      if (!r2.ok() || r2.output == *reference_out) continue;
      const std::string& a = *reference_out;
      const std::string& b = r2.output;
      size_t k = 0;
      while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
      const DialectIssue* cause = nullptr;
      for (const auto& i : pred.issues)
        if (i.kind == DialectIssue::Kind::renders_differently) {
          cause = &i;
          break;
        }
      Finding f;
      f.code = "CT012";
      f.severity = Severity::warning;
      f.file = src.file;
      f.message = who + " renders the bare probe differently from transformers: first difference at byte " +
                  std::to_string(k) + " of the prompt (reference \"" + escape_snippet(a.substr(k, 24)) +
                  "\", engine \"" + escape_snippet(b.substr(k, 24)) + "\")";
      if (cause)
        f.message += "; cause at " + src.origin + ":" + std::to_string(cause->line) + ":" +
                     std::to_string(cause->column) + ": " + cause->what;
      else if (hf_runtime)
        f.message += std::string("; cause: ") + runtime_cause;
      const char* runtime_source = p.dialect.kind == DialectKind::hf_jinja ? " §2"
                                   : p.dialect.kind == DialectKind::swift_jinja
                                       ? " §1b"
                                       : " and the recorded llama.cpp outputs (template-cases/reference)";
      f.hint = "source: " + (cause ? cause->source : std::string("template-dialects.md") + (hf_runtime && !cause ? runtime_source : "")) +
               "; the prompt this engine builds is not the one the model was trained with";
      f.engines = {std::string(p.name)};
      out.push_back(std::move(f));
    }
  }
}

// ---- CF006 (rope_theta defaults) / CF012 ----

bool rule_applies(const ConfigRule& r, const arch::ConfigView& v) {
  return r.model_type == "*" || r.model_type == v.text_model_type || r.model_type == v.model_type;
}

void config_findings(const Checkpoint& ck, const Selection& sel, std::vector<Finding>& out) {
  if (!ck.config.ok() || !ck.config.value.is_object()) return;
  arch::ConfigView view = arch::resolve_config(ck.config.value, [&](std::string_view n) { return ck.weight(n) != nullptr; });
  const json::Value* text = view.text ? view.text : &ck.config.value;
  if (!text->is_object()) return;
  std::string prefix = view.text_path.empty() ? "" : view.text_path + ".";
  auto present = [&](std::string_view key) {
    if (text->find(key)) return true;
    if (key == "rope_theta")  // v5 configs move it under rope_parameters (architectures.md §1)
      if (const json::Value* rp = text->find("rope_parameters"); rp && rp->is_object() && rp->find("rope_theta"))
        return true;
    return false;
  };
  // Keys the architecture registry already reports as required everywhere (CF003).
  auto cf003 = [&](std::string_view key) {
    for (const auto& is : view.issues)
      if (is.kind == arch::ConfigIssue::MissingRequired &&
          (is.field == key || (is.field.size() > key.size() && is.field.ends_with("." + std::string(key)))))
        return true;
    return false;
  };
  for (const Profile& p : universe(sel)) {
    for (const ConfigRule& r : p.config) {
      // Swift's Codable reads the key where the struct declares it; only Python loaders also
      // look under rope_parameters.
      bool here = p.family == "swift" ? text->find(r.key) != nullptr : present(r.key);
      if (!r.required || !rule_applies(r, view) || here || cf003(r.key)) continue;
      Finding f;
      f.code = "CF012";
      f.severity = Severity::error;
      f.file = ck.config.file;
      f.message = short_name(p) + " requires " + prefix + std::string(r.key) + " for " +
                  (view.text_model_type.empty() ? view.model_type : view.text_model_type) +
                  " and has no default for it" +
                  (p.name == "swiftlm" ? ": Codable decoding fails with keyNotFound(\"" + std::string(r.key) + "\")"
                                       : ": loading the config fails");
      f.hint = "add " + std::string(r.key) + " to config.json (transformers' default is what the model was trained "
               "with, if it was trained with transformers); source: " + std::string(r.source);
      f.engines = {std::string(p.name)};
      out.push_back(std::move(f));
    }
  }
  // rope_theta absent: the reference value against each engine's default.
  if (!present("rope_theta") && view.arch) {
    auto value_of = [&](const Profile& p) -> std::optional<std::string> {
      std::optional<std::string> any, exact;
      for (const ConfigRule& r : p.config) {
        if (r.required || r.key != "rope_theta" || !rule_applies(r, view)) continue;
        (r.model_type == "*" ? any : exact) = std::string(r.default_value);
      }
      return exact ? exact : any;
    };
    const Profile& ref = all_profiles().front();  // transformers
    auto ref_value = value_of(ref);
    if (!ref_value) return;
    std::vector<std::string> engines;
    std::string detail;
    for (const Profile& p : universe(sel)) {
      auto v = value_of(p);
      if (!v || *v == *ref_value) continue;
      engines.emplace_back(p.name);
      detail += ", " + short_name(p) + " " + *v;
    }
    if (engines.empty()) return;
    Finding f;
    f.code = "CF006";
    f.severity = Severity::warning;
    f.file = ck.config.file;
    std::string mt = view.text_model_type.empty() ? view.model_type : view.text_model_type;
    f.message = prefix + "rope_theta is absent: transformers uses " + *ref_value + detail + " for " + mt +
                ", so the engines compute different rotary positions";
    f.hint = "set rope_theta explicitly (architectures.md §1 rope_theta row)";
    f.engines = std::move(engines);
    out.push_back(std::move(f));
  }
}

// ---- QZ012 ----

std::string_view mlx_mode(quant::Format f) {
  switch (f) {
    case quant::Format::MlxAffine: return "affine";
    case quant::Format::MlxMxfp4: return "mxfp4";
    case quant::Format::MlxNvfp4: return "nvfp4";
    case quant::Format::MlxMxfp8: return "mxfp8";
    default: return "";
  }
}

void quant_findings(const Checkpoint& ck, const Selection& sel, std::vector<Finding>& out) {
  if (!ck.config.ok()) return;
  auto scheme = quant::parse_scheme(ck.config.value);
  if (!scheme || scheme->method == quant::Method::None) return;
  std::string name = scheme->method == quant::Method::Unknown ? scheme->raw_method
                                                              : std::string(quant::method_name(scheme->method));
  std::string mode = scheme->method == quant::Method::MLX ? std::string(mlx_mode(scheme->base.format)) : "";
  bool g_idx = scheme->base.g_idx;
  int bits = scheme->base.bits;
  std::string what = name + (mode.empty() ? "" : " " + mode) + (bits ? " " + std::to_string(bits) + "-bit" : "") +
                     (g_idx ? " with act-order (g_idx)" : "");
  for (const Profile& p : universe(sel)) {
    const QuantRule* rule = nullptr;
    for (const auto& q : p.quant)
      if (q.scheme == name && q.mode == mode) rule = &q;
    if (!rule)
      for (const auto& q : p.quant)
        if (q.scheme == name && q.mode.empty()) rule = &q;
    if (!rule || rule->verdict == Verdict::unknown) continue;
    std::string why;
    if (rule->verdict == Verdict::breaks) why = std::string(rule->note);
    else if (rule->only_bits && bits && bits != rule->only_bits)
      why = "only " + std::to_string(rule->only_bits) + "-bit " + name + " is loaded (" + std::string(rule->note) + ")";
    else if (rule->rejects_g_idx && g_idx)
      why = "act-order (g_idx) is refused (" + std::string(rule->note) + ")";
    if (why.empty()) continue;
    Finding f;
    f.code = "QZ012";
    f.severity = Severity::error;
    f.file = ck.config.file;
    f.message = short_name(p) + " does not load " + what + " checkpoints: " + why;
    f.hint = "serve it with an engine that loads " + name + ", or re-quantize; source: " + std::string(rule->source);
    f.engines = {std::string(p.name)};
    out.push_back(std::move(f));
  }
}

// ---- TK020 ----

// root.model.type of tokenizer.json by a scan that skips every other value by bracket depth.
// The tokenizers library writes "model" last and "type" first inside it, so this reads a few
// KB of a multi-MB file instead of indexing all of it (a full structural index of a 129k-token
// tokenizer.json is ~10 MB of freshly touched memory). nullopt when the file is not in that
// plain form (escaped keys, anything malformed): the caller then parses it properly.
std::optional<std::string_view> scan_model_type(std::string_view t) {
  size_t i = 0;
  const size_t n = t.size();
  auto ws = [&] {
    while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t')) ++i;
  };
  auto string_end = [&](size_t open) -> size_t {  // index past the closing quote, or npos
    for (size_t j = open + 1; j < n; ++j) {
      if (t[j] == '\\') ++j;
      else if (t[j] == '"') return j + 1;
    }
    return std::string_view::npos;
  };
  auto plain_string = [&](std::string_view& out) {  // a string without escapes
    if (i >= n || t[i] != '"') return false;
    size_t e = string_end(i);
    if (e == std::string_view::npos) return false;
    out = t.substr(i + 1, e - i - 2);
    if (out.find('\\') != std::string_view::npos) return false;
    i = e;
    return true;
  };
  auto skip_value = [&] {
    ws();
    if (i >= n) return false;
    if (t[i] == '"') {
      size_t e = string_end(i);
      if (e == std::string_view::npos) return false;
      i = e;
      return true;
    }
    int depth = 0;
    for (; i < n; ++i) {
      char c = t[i];
      if (c == '"') {
        size_t e = string_end(i);
        if (e == std::string_view::npos) return false;
        i = e - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return true;  // the end of the enclosing container: a scalar ended
        if (--depth == 0) {
          ++i;
          return true;
        }
      } else if (c == ',' && depth == 0) {
        return true;
      }
    }
    return false;
  };
  // Calls `on_key(key)` for each member of the object at i; on_key returns 1 to stop with
  // success (it consumed the value), 0 to skip the value, -1 to fail.
  auto members = [&](auto&& on_key) -> int {
    ws();
    if (i >= n || t[i] != '{') return -1;
    ++i;
    for (;;) {
      ws();
      if (i < n && t[i] == '}') return 0;
      std::string_view key;
      if (!plain_string(key)) return -1;
      ws();
      if (i >= n || t[i] != ':') return -1;
      ++i;
      ws();
      int r = on_key(key);
      if (r != 0) return r;
      if (!skip_value()) return -1;
      ws();
      if (i < n && t[i] == ',') {
        ++i;
        continue;
      }
      if (i < n && t[i] == '}') return 0;
      return -1;
    }
  };
  std::optional<std::string_view> type;
  int r = members([&](std::string_view key) {
    if (key != "model") return 0;
    int inner = members([&](std::string_view k) {
      if (k != "type") return 0;
      std::string_view v;
      if (!plain_string(v)) return -1;
      type = v;
      return 1;
    });
    return inner == 1 ? 1 : -1;  // "model" without a plain "type": let the parser decide
  });
  if (r != 1) return std::nullopt;
  return type;
}

std::optional<std::string> tokenizer_model_type(const Checkpoint& ck) {
  if (!ck.tokenizer.present || ck.tokenizer.error) return std::nullopt;
  const std::string& t = ck.tokenizer.text;
  if (auto fast = scan_model_type(t)) return std::string(*fast);
  // Not the plain form: ckpt's JSON reader, which unescapes keys as Python's json does.
  // (Duplicate keys: both paths take the first; json.loads keeps the last. The TK family
  // reports a tokenizer.json that writes "model" twice.)
  auto parsed = json::parse(t);
  if (!parsed.ok()) return std::nullopt;
  const json::Value* model = parsed.value.find("model");
  if (!model || !model->is_object()) return std::nullopt;
  if (auto type = model->get_string("type")) return std::string(*type);
  return std::nullopt;
}

void tokenizer_findings(const Checkpoint& ck, const Selection& sel, std::vector<Finding>& out) {
  std::optional<std::string> model;
  bool read = false;
  for (const Profile& p : universe(sel)) {
    for (const TokenizerRule& r : p.tokenizers) {
      if (r.verdict != Verdict::breaks) continue;
      if (!read) {
        model = tokenizer_model_type(ck);
        read = true;
      }
      if (!model || *model != r.model) continue;
      Finding f;
      f.code = "TK020";
      f.severity = Severity::error;
      f.file = ck.tokenizer.file;
      f.message = short_name(p) + " cannot build a " + *model + " tokenizer: " + std::string(r.note);
      f.hint = "source: " + std::string(r.source);
      f.engines = {std::string(p.name)};
      out.push_back(std::move(f));
    }
  }
}

// ---- IX014 ----

void index_findings(const Checkpoint& ck, const Selection& sel, std::vector<Finding>& out) {
  if (!ck.index || ck.index->files.empty()) return;
  const ShardIndex& ix = *ck.index;
  std::vector<size_t> per_file(ix.files.size(), 0);
  for (uint32_t k : ix.file_of) ++per_file[k];
  for (const Profile& p : universe(sel)) {
    if (p.loader.shard_glob.empty() || p.loader.stray_shards.verdict != Verdict::breaks) continue;
    std::vector<std::string> missed;
    size_t tensors = 0;
    for (size_t i = 0; i < ix.files.size(); ++i) {
      std::string_view file = ix.files[i];
      bool nested = file.find('/') != std::string_view::npos;
      std::string_view base = file.substr(nested ? file.rfind('/') + 1 : 0);
      if ((!nested || p.loader.glob_recursive) && glob_match(p.loader.shard_glob, base)) continue;
      if (!ck.file(file)) continue;  // IX001 reports a missing shard
      missed.emplace_back(file);
      tensors += per_file[i];
    }
    if (missed.empty()) continue;
    Finding f;
    f.code = "IX014";
    f.severity = Severity::error;
    f.file = ix.json.file;
    std::string list;
    for (size_t i = 0; i < missed.size() && i < 3; ++i) list += (i ? ", " : "") + missed[i];
    if (missed.size() > 3) list += " and " + std::to_string(missed.size() - 3) + " more";
    f.message = short_name(p) + " opens only " + std::string(p.loader.shard_glob) + " and ignores the index: " +
                std::to_string(missed.size()) + " indexed shard(s) holding " + std::to_string(tensors) +
                " tensor(s) are never read (" + list + ")";
    f.hint = "rename the shards to model-0000k-of-0000n.safetensors; source: " + std::string(p.loader.stray_shards.source);
    f.engines = {std::string(p.name)};
    out.push_back(std::move(f));
  }
}

}  // namespace

std::vector<Finding> engine_findings(const Checkpoint& ck, const Selection& sel) {
  std::vector<Finding> out;
  template_findings(ck, sel, out);
  config_findings(ck, sel, out);
  quant_findings(ck, sel, out);
  tokenizer_findings(ck, sel, out);
  index_findings(ck, sel, out);
  return out;
}

}  // namespace ckpt::engines

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 6> kCodes{{
    {"CT011", Severity::error, "an engine's template parser refuses the chat template (or hangs on it)"},
    {"CT012", Severity::warning, "an engine renders the chat template differently"},
    {"CF012", Severity::error, "config key an engine requires without a default"},
    {"QZ012", Severity::error, "quantization scheme or mode an engine does not load"},
    {"TK020", Severity::error, "tokenizer model an engine cannot build"},
    {"IX014", Severity::error, "indexed shard a glob-based loader never opens"},
}};

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  static const engines::Selection portable;
  for (auto& f : engines::engine_findings(ck, opts.engines ? *opts.engines : portable)) out.add(std::move(f));
}

}  // namespace

const FamilyDef kEnginesFamily{"engines", kCodes, run};

}  // namespace ckpt::checks
