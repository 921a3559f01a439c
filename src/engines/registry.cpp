// The list of engine profiles, `--engine NAME[@VERSION]` parsing, and `ckpt engines` output.
#include <algorithm>
#include <cstdio>

#include "ckpt/json.h"
#include "engines/profiles.h"

namespace ckpt::engines {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::breaks: return "breaks";
    case Verdict::tolerates: return "tolerates";
    case Verdict::not_applicable: return "not-applicable";
    case Verdict::unknown: return "unknown";
  }
  return "unknown";
}

std::string Version::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::optional<Version> parse_version(std::string_view s) {
  Version v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  size_t i = 0, k = 0;
  while (k < 3) {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return std::nullopt;
    int n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      n = n * 10 + (s[i] - '0');
      if (n > 100000) return std::nullopt;
      ++i;
    }
    *parts[k++] = n;
    if (i == s.size()) break;
    if (s[i] != '.') return std::nullopt;
    ++i;
    if (i == s.size()) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return v;
}

std::string Dialect::label() const {
  std::string s(library);
  if (kind == DialectKind::swift_jinja || kind == DialectKind::hf_jinja) s += " " + version.str();
  return s;
}

std::string Profile::id() const { return version.empty() ? std::string(name) : std::string(name) + "@" + version; }

bool Selection::selects(std::string_view name) const {
  for (const auto& p : engines)
    if (p.name == name) return true;
  return false;
}

namespace {

struct Alias {
  std::string_view alias, name;
};
constexpr Alias kAliases[] = {
    {"transformers", "transformers"}, {"hf", "transformers"},
    {"vllm", "vllm"},
    {"sglang", "sglang"},
    {"tgi", "tgi"}, {"text-generation-inference", "tgi"},
    {"mlx-lm", "mlx-lm"}, {"mlx_lm", "mlx-lm"}, {"mlx", "mlx-lm"},
    {"swiftlm", "swiftlm"}, {"mlx-swift-lm", "swiftlm"}, {"swift", "swiftlm"},
    {"llama.cpp", "llama.cpp"}, {"llamacpp", "llama.cpp"}, {"llama-cpp", "llama.cpp"}, {"llama-server", "llama.cpp"},
    {"transformers.js", "transformers.js"}, {"transformersjs", "transformers.js"}, {"transformers-js", "transformers.js"},
};

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return o;
}

Profile build(std::string_view name, const Version* v, std::string* error) {
  using namespace detail;
  if (name == "transformers") return transformers_profile();
  if (name == "vllm") return vllm_profile();
  if (name == "sglang") return sglang_profile();
  if (name == "tgi") return tgi_profile();
  if (name == "mlx-lm") return mlx_lm_profile();
  if (name == "swiftlm") return swiftlm_profile(v, error);
  if (name == "llama.cpp") return llama_cpp_profile();
  return transformers_js_profile(v, error);
}

constexpr std::string_view kOrder[] = {"transformers", "vllm", "sglang", "tgi", "mlx-lm", "swiftlm", "llama.cpp",
                                       "transformers.js"};

}  // namespace

const std::vector<Profile>& all_profiles() {
  static const std::vector<Profile> all = [] {
    std::vector<Profile> v;
    for (auto n : kOrder) v.push_back(build(n, nullptr, nullptr));
    return v;
  }();
  return all;
}

std::optional<Profile> find_profile(std::string_view spec, std::string* error) {
  std::string_view name = spec, ver;
  if (size_t at = spec.rfind('@'); at != std::string_view::npos) {
    name = spec.substr(0, at);
    ver = spec.substr(at + 1);
  }
  std::string key = lower(name);
  const Alias* hit = nullptr;
  for (const auto& a : kAliases)
    if (a.alias == key) hit = &a;
  if (!hit) {
    if (error) {
      *error = "unknown engine '" + std::string(name) + "'; known:";
      for (auto n : kOrder) *error += " " + std::string(n);
    }
    return std::nullopt;
  }
  std::optional<Version> v;
  if (spec.find('@') != std::string_view::npos) {
    v = parse_version(ver);
    if (!v) {
      if (error) *error = "engine '" + std::string(spec) + "': '" + std::string(ver) + "' is not a version (MAJOR.MINOR.PATCH)";
      return std::nullopt;
    }
    if (hit->name != "swiftlm" && hit->name != "transformers.js") {
      if (error)
        *error = "engine '" + std::string(hit->name) +
                 "' is not versioned in ckpt (versioned: swiftlm@<swift-jinja>, transformers.js@<@huggingface/jinja>)";
      return std::nullopt;
    }
  }
  std::string err;
  Profile p = build(hit->name, v ? &*v : nullptr, &err);
  if (!err.empty()) {
    if (error) *error = "engine '" + std::string(spec) + "': " + err;
    return std::nullopt;
  }
  return p;
}

std::optional<Selection> parse_selection(const std::vector<std::string>& args, std::string* error) {
  Selection sel;
  for (const auto& a : args) {
    size_t start = 0;
    while (start <= a.size()) {
      size_t comma = a.find(',', start);
      std::string item = a.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!item.empty() && item.back() == ' ') item.pop_back();
      while (!item.empty() && item.front() == ' ') item.erase(0, 1);
      if (!item.empty()) {
        auto p = find_profile(item, error);
        if (!p) return std::nullopt;
        // One version per engine: a later --engine for the same engine replaces the earlier one.
        auto same = std::find_if(sel.engines.begin(), sel.engines.end(), [&](const Profile& q) { return q.name == p->name; });
        if (same != sel.engines.end()) *same = std::move(*p);
        else sel.engines.push_back(std::move(*p));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  // Profile order, so findings name engines in a stable order.
  auto rank = [](std::string_view n) { return std::find(std::begin(kOrder), std::end(kOrder), n) - std::begin(kOrder); };
  std::stable_sort(sel.engines.begin(), sel.engines.end(),
                   [&](const Profile& a, const Profile& b) { return rank(a.name) < rank(b.name); });
  return sel;
}

// ---- ckpt engines ----

namespace {

void behaviour_line(std::string& out, const char* what, const Behaviour& b) {
  if (b.verdict == Verdict::unknown && b.note.empty()) {
    out += "    " + std::string(what) + ": unknown (not in the specs)\n";
    return;
  }
  out += "    " + std::string(what) + ": " + std::string(verdict_name(b.verdict));
  if (!b.note.empty()) out += " — " + std::string(b.note);
  out += "\n";
  if (!b.source.empty()) out += "        source: " + std::string(b.source) + "\n";
}

}  // namespace

std::string render_profiles_text(const std::vector<Profile>& profiles) {
  std::string out;
  for (const auto& p : profiles) {
    out += p.id() + "  " + std::string(p.title) + "\n";
    out += "  family: " + std::string(p.family) + (p.reference ? " (Python reference family)" : "") +
           "; loads " + std::string(p.weights_format) + "\n";
    if (!p.version_key.empty())
      out += "  version: " + std::string(p.version_key) + " " + p.version + " (default " +
             std::string(p.default_version_note) + ")\n";
    out += "  template dialect: " + p.dialect.label() + " — " + std::string(p.dialect.note) + "\n";
    out += "      source: " + std::string(p.dialect.source) + "\n";
    out += "  loading:\n";
    behaviour_line(out, "unexpected tensors (AR002)", p.loader.unexpected_tensors);
    behaviour_line(out, "missing tensors (AR001)", p.loader.missing_tensors);
    behaviour_line(out, "stray shards (IX002)", p.loader.stray_shards);
    if (!p.loader.shard_glob.empty())
      out += "        files opened: " + std::string(p.loader.shard_glob) + (p.loader.glob_recursive ? " (recursive)" : "") +
             ", index ignored\n";
    behaviour_line(out, "tied head stored (AR012)", p.loader.tied_head);
    behaviour_line(out, "rotary buffers (AR003)", p.loader.rotary_buffers);
    behaviour_line(out, "dtype casts (AR010)", p.loader.dtype_casts);
    out += "  quantization:";
    if (p.quant.empty()) out += " unknown (not in the specs)";
    out += "\n";
    for (const auto& q : p.quant) {
      out += "    " + std::string(q.scheme) + (q.mode.empty() ? "" : ":" + std::string(q.mode)) + ": " +
             (q.verdict == Verdict::tolerates ? "loads" : q.verdict == Verdict::breaks ? "refuses" : "unknown");
      if (q.only_bits) out += " (" + std::to_string(q.only_bits) + "-bit only" + (q.rejects_g_idx ? ", no g_idx" : "") + ")";
      if (!q.note.empty()) out += " — " + std::string(q.note);
      out += "\n        source: " + std::string(q.source) + "\n";
    }
    out += "  config.json:";
    if (p.config.empty()) out += " unknown (not in the specs)";
    out += "\n";
    for (const auto& c : p.config) {
      out += "    " + std::string(c.model_type) + "." + std::string(c.key) + ": " +
             (c.required ? std::string("required (no default)") : "default " + std::string(c.default_value)) + "\n";
      out += "        source: " + std::string(c.source) + "\n";
    }
    out += "  tokenizer models:";
    if (p.tokenizers.empty()) out += " unknown (not in the specs)";
    out += "\n";
    for (const auto& t : p.tokenizers)
      out += "    " + std::string(t.model) + ": " + (t.verdict == Verdict::breaks ? "refuses" : "builds") + " — " +
             std::string(t.note) + "\n        source: " + std::string(t.source) + "\n";
    if (!p.notes.empty()) {
      out += "  notes:\n";
      for (auto n : p.notes) out += "    - " + std::string(n) + "\n";
    }
    out += "\n";
  }
  return out;
}

namespace {

void jfield(std::string& out, const char* k, std::string_view v, bool comma = true) {
  out += '"';
  out += k;
  out += "\":";
  json::append_quoted(out, v);
  if (comma) out += ',';
}

void jbehaviour(std::string& out, const char* k, const Behaviour& b) {
  out += '"';
  out += k;
  out += "\":{";
  jfield(out, "verdict", verdict_name(b.verdict));
  jfield(out, "note", b.note);
  jfield(out, "source", b.source, false);
  out += "},";
}

}  // namespace

std::string render_profiles_json(const std::vector<Profile>& profiles) {
  std::string out = "{\"engines\":[";
  bool first = true;
  for (const auto& p : profiles) {
    out += first ? "{" : ",{";
    first = false;
    jfield(out, "name", p.name);
    jfield(out, "id", p.id());
    jfield(out, "title", p.title);
    jfield(out, "family", p.family);
    out += std::string("\"reference\":") + (p.reference ? "true," : "false,");
    jfield(out, "weights_format", p.weights_format);
    out += "\"version\":";
    if (p.version_key.empty()) out += "null,";
    else {
      out += "{";
      jfield(out, "key", p.version_key);
      jfield(out, "selected", p.version);
      jfield(out, "default", p.default_version_note, false);
      out += "},";
    }
    out += "\"dialect\":{";
    jfield(out, "library", p.dialect.library);
    jfield(out, "label", p.dialect.label());
    jfield(out, "note", p.dialect.note);
    jfield(out, "source", p.dialect.source, false);
    out += "},\"loader\":{";
    jbehaviour(out, "unexpected_tensors", p.loader.unexpected_tensors);
    jbehaviour(out, "missing_tensors", p.loader.missing_tensors);
    jbehaviour(out, "stray_shards", p.loader.stray_shards);
    jbehaviour(out, "tied_head", p.loader.tied_head);
    jbehaviour(out, "rotary_buffers", p.loader.rotary_buffers);
    jbehaviour(out, "dtype_casts", p.loader.dtype_casts);
    out += "\"shard_glob\":";
    if (p.loader.shard_glob.empty()) out += "null";
    else json::append_quoted(out, p.loader.shard_glob);
    out += std::string(",\"glob_recursive\":") + (p.loader.glob_recursive ? "true" : "false") + "},\"quantization\":[";
    for (size_t i = 0; i < p.quant.size(); ++i) {
      const auto& q = p.quant[i];
      out += i ? ",{" : "{";
      jfield(out, "scheme", q.scheme);
      jfield(out, "mode", q.mode);
      jfield(out, "loads", q.verdict == Verdict::tolerates ? "yes" : q.verdict == Verdict::breaks ? "no" : "unknown");
      out += "\"only_bits\":" + std::to_string(q.only_bits) + ",\"rejects_g_idx\":" + (q.rejects_g_idx ? "true," : "false,");
      jfield(out, "note", q.note);
      jfield(out, "source", q.source, false);
      out += "}";
    }
    out += "],\"config\":[";
    for (size_t i = 0; i < p.config.size(); ++i) {
      const auto& c = p.config[i];
      out += i ? ",{" : "{";
      jfield(out, "model_type", c.model_type);
      jfield(out, "key", c.key);
      out += std::string("\"required\":") + (c.required ? "true," : "false,");
      out += "\"default\":";
      if (c.required) out += "null,";
      else {
        json::append_quoted(out, c.default_value);
        out += ",";
      }
      jfield(out, "source", c.source, false);
      out += "}";
    }
    out += "],\"tokenizers\":[";
    for (size_t i = 0; i < p.tokenizers.size(); ++i) {
      const auto& t = p.tokenizers[i];
      out += i ? ",{" : "{";
      jfield(out, "model", t.model);
      jfield(out, "builds", t.verdict == Verdict::breaks ? "no" : t.verdict == Verdict::tolerates ? "yes" : "unknown");
      jfield(out, "note", t.note);
      jfield(out, "source", t.source, false);
      out += "}";
    }
    out += "],\"notes\":[";
    for (size_t i = 0; i < p.notes.size(); ++i) {
      if (i) out += ",";
      json::append_quoted(out, p.notes[i]);
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace ckpt::engines
