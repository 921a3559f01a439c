// Chat-template discovery (as transformers finds templates) and the load-time probes, shared
// by `ckpt template check` and the CT check family.
#include <algorithm>

#include "ckpt/finding.h"
#include "jinja/engine.h"

namespace ckpt::jinja {

namespace {

json::Value parse_or_die(const char* text) {
  auto r = json::parse(text);
  return r.value;
}

const char* kProbeTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}])";

const char* kMultiTurn = R"([{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21}"}, {"role": "assistant", "content": "It is 21 degrees in Paris."}, {"role": "user", "content": "Thanks!"}])";

json::Value base_context(const json::Value& messages, bool with_tools) {
  json::Object o;
  o.emplace_back("messages", messages);
  o.emplace_back("tools", with_tools ? parse_or_die(kProbeTools) : json::Value(nullptr));
  o.emplace_back("documents", nullptr);
  o.emplace_back("add_generation_prompt", true);
  return json::Value(std::move(o));
}

// What a broken delimiter does, with the likely fix when the fragment is a whole tag one brace
// short ("{- bos_token -}}" -> "{{- bos_token -}}").
std::string broken_tag_hint(const std::string& fragment) {
  std::string fix;
  if (fragment.size() > 4 && fragment[0] == '{' && (fragment[1] == '-' || fragment[1] == '+')) {
    const std::string_view close = std::string_view(fragment).substr(fragment.size() - 2);
    const char kind = close == "%}" ? '%' : close == "#}" ? '#' : '{';
    fix = "; write '{" + std::string(1, kind) + fragment.substr(1) + "'";
  }
  return "a tag one character short is plain text to Python's jinja2, which pastes it into every prompt "
         "(here instead of what the tag should emit" + fix + "); swift-jinja <= 2.3.6 refuses the template "
         "('Unexpected token type: closeExpression'): SwiftLM answered HTTP 500 to every request on "
         "LiquidAI's LFM2.5 '{- bos_token -}}' (SwiftLM #141)";
}

}  // namespace

json::Value merge_context(const json::Value& base, const json::Value& overrides) {
  json::Object out = base.is_object() ? base.as_object() : json::Object{};
  if (overrides.is_object())
    for (auto& [k, v] : overrides.as_object()) {
      bool set = false;
      for (auto& m : out)
        if (m.first == k) { m.second = v; set = true; }
      if (!set) out.emplace_back(k, v);
    }
  return json::Value(std::move(out));
}

json::Value special_tokens(const json::Value* cfg) {
  json::Object out;
  if (!cfg || !cfg->is_object()) return json::Value(std::move(out));
  auto token_text = [](const json::Value& v) -> std::optional<std::string> {
    if (v.is_string()) return v.as_string();
    if (v.is_object())
      if (auto c = v.get_string("content")) return c;
    return std::nullopt;
  };
  for (const char* k : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (const json::Value* v = cfg->find(k))
      if (auto t = token_text(*v)) out.emplace_back(k, *t);
  }
  if (const json::Value* extra = cfg->find("additional_special_tokens"); extra && extra->is_array()) {
    json::Array list;
    for (auto& e : extra->as_array())
      if (auto t = token_text(e)) list.emplace_back(*t);
    out.emplace_back("additional_special_tokens", json::Value(std::move(list)));
  }
  return json::Value(std::move(out));
}

Discovery discover_templates(const DiscoveryInput& in) {
  Discovery d;
  // 1. separate files win
  std::vector<std::pair<std::string, std::string>> files = in.jinja_files;
  std::sort(files.begin(), files.end());
  for (auto& [rel, text] : files) {
    TemplateSource s;
    s.file = rel;
    s.origin = rel;
    s.text = text;
    if (rel == "chat_template.jinja") s.name = "default";
    else {
      std::string base = rel.substr(rel.rfind('/') + 1);
      s.name = base.size() > 6 ? base.substr(0, base.size() - 6) : base;
    }
    d.templates.push_back(std::move(s));
  }
  std::stable_sort(d.templates.begin(), d.templates.end(),
                   [](const TemplateSource& a, const TemplateSource& b) { return a.name == "default" && b.name != "default"; });
  if (!d.templates.empty()) return d;
  // 2. tokenizer_config.json's chat_template (a string or a list of {name, template})
  auto from_field = [&](const json::Value* doc, const std::string& file) {
    if (!doc || !doc->is_object()) return;
    const json::Value* ct = doc->find("chat_template");
    if (!ct || ct->is_null()) return;
    if (ct->is_string()) {
      d.templates.push_back({"default", file, file + ": chat_template", ct->as_string()});
    } else if (ct->is_array()) {
      size_t i = 0;
      for (auto& e : ct->as_array()) {
        auto name = e.get_string("name");
        auto text = e.get_string("template");
        if (!name || !text) {
          d.problems.push_back(file + ": chat_template[" + std::to_string(i) + "] is not a {\"name\", \"template\"} object of strings");
        } else {
          d.templates.push_back({*name, file, file + ": chat_template[name=" + *name + "]", *text});
        }
        ++i;
      }
    } else {
      d.problems.push_back(file + ": chat_template is neither a string nor a list of named templates");
    }
  };
  from_field(in.tokenizer_config, "tokenizer_config.json");
  if (!d.templates.empty()) return d;
  // 3. the legacy processor file
  from_field(in.chat_template_json, "chat_template.json");
  return d;
}

std::vector<TemplateReport> probe_templates(const std::vector<TemplateSource>& templates, const json::Value& tokens,
                                            const Options& options) {
  std::vector<TemplateReport> out;
  json::Value bare_msgs = parse_or_die(R"([{"role": "user", "content": "Hello"}])");
  json::Value multi_msgs = parse_or_die(kMultiTurn);
  for (auto& src : templates) {
    TemplateReport rep;
    rep.source = src;
    Error err;
    auto t = Template::parse(src.text, src.origin, options, &err);
    if (!t) {
      rep.parse_error = err;
      out.push_back(std::move(rep));
      continue;
    }
    rep.unsafe_attributes = t->unsafe_accesses();
    rep.parsed = t;
    struct P {
      std::string name;
      json::Value ctx;
    };
    std::vector<P> probes;
    probes.push_back({"bare", base_context(bare_msgs, false)});
    probes.push_back({"tools", base_context(bare_msgs, true)});
    if (t->reads_variable("enable_thinking")) {
      probes.push_back({"thinking=true", merge_context(base_context(bare_msgs, false), json::Object{{"enable_thinking", true}})});
      probes.push_back({"thinking=false", merge_context(base_context(bare_msgs, false), json::Object{{"enable_thinking", false}})});
    }
    probes.push_back({"multi-turn", base_context(multi_msgs, true)});
    for (auto& p : probes) {
      // special tokens go under the probe's own variables (caller keys win, as in transformers)
      json::Value ctx = merge_context(tokens, p.ctx);
      RenderResult r = t->render(ctx, options);
      ProbeOutcome po;
      po.probe = p.name;
      po.ok = r.ok();
      po.error = r.error;
      po.delimiter_warnings = std::move(r.delimiter_warnings);
      po.output = std::move(r.output);
      rep.probes.push_back(std::move(po));
    }
    out.push_back(std::move(rep));
  }
  return out;
}

std::vector<Finding> chat_template_findings(const DiscoveryInput& in, const Options& options) {
  std::vector<Finding> out;
  Discovery d = discover_templates(in);
  for (auto& p : d.problems)
    out.push_back({"CT008", Severity::warning, p, p.substr(0, p.find(':')), "", "transformers expects a string or a list of {\"name\": ..., \"template\": ...} objects"});
  // Sources that exist but could not be used, where transformers' order would have read them
  // (separate files first, then tokenizer_config.json, then chat_template.json).
  auto rank = [](const std::string& file) {
    return file == "tokenizer_config.json" ? 1 : file == "chat_template.json" ? 2 : 0;
  };
  const int used = d.templates.empty() ? 3 : rank(d.templates.front().file);
  for (const auto& [file, why] : in.unusable) {
    if (rank(file) > used) continue;
    out.push_back({"CT010", Severity::warning, "chat template not checked: " + file + " " + why, file, "",
                   rank(file) == 0 ? "transformers reads this template file first; fix the file (see FS011/FS010) to have it checked"
                                   : "the chat template a loader would take from this file cannot be found or checked until the file parses (see FS011)"});
  }
  if (d.templates.empty()) {
    if (d.problems.empty() && in.unusable.empty())
      out.push_back({"CT007", Severity::info,
                     "no chat template: neither chat_template.jinja, additional_chat_templates/*.jinja, tokenizer_config.json's chat_template nor chat_template.json provides one",
                     "", "", "base models legitimately have none; an instruct/chat model without one cannot be served with a chat API"});
    return out;
  }
  json::Value tokens = special_tokens(in.tokenizer_config);
  auto more = template_findings(d.templates, tokens, options);
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  return out;
}

std::vector<Finding> template_findings(const std::vector<TemplateSource>& templates, const json::Value& tokens,
                                       const Options& options) {
  std::vector<Finding> out;
  for (auto& rep : probe_templates(templates, tokens, options)) {
    const std::string& file = rep.source.file;
    if (rep.parse_error) {
      out.push_back({"CT001", Severity::error, "chat template does not parse: " + rep.parse_error->format(), file, "",
                     "a server loading this template fails on every chat request; fix the template syntax at the reported line:column"});
      continue;
    }
    for (auto& u : rep.unsafe_attributes)
      out.push_back({"CT009", Severity::error, rep.source.origin + ":" + u, file, "",
                     "chat templates never need dunder attributes or the lipsum/cycler/joiner globals; this is a server-side template injection payload (blocked by the sandbox, but never serve it)"});
    const ProbeOutcome* bare = nullptr;
    for (auto& p : rep.probes)
      if (p.probe == "bare") bare = &p;
    if (bare && !bare->ok) {
      out.push_back({"CT002", Severity::error,
                     "chat template fails on the load-time probe (one user turn, add_generation_prompt=true): " + bare->error->format(),
                     file, "", "every chat request will fail (HTTP 500); the probe passes only special tokens, messages, tools=None and documents=None"});
    }
    for (auto& p : rep.probes) {
      if (p.probe == "bare" || p.ok) continue;
      if (bare && !bare->ok) break;  // already reported as an error
      if (p.probe == "tools")
        out.push_back({"CT003", Severity::warning, "chat template renders the bare probe but fails when tools are passed: " + p.error->format(), file, "",
                       "tool-calling requests will fail; transformers passes tools as a list of {\"type\": \"function\", \"function\": {...}} objects"});
      else if (p.probe.rfind("thinking", 0) == 0)
        out.push_back({"CT004", Severity::warning, "chat template fails with " + p.probe.substr(0, 8) + " enable_thinking=" + p.probe.substr(9) + ": " + p.error->format(), file, "",
                       "requests that toggle thinking will fail"});
      else
        out.push_back({"CT005", Severity::warning,
                       "chat template fails on a multi-turn conversation (system, user, assistant tool call, tool response): " + p.error->format(), file, "",
                       p.error->type == "TemplateError" ? "the template refuses this conversation shape deliberately (raise_exception); check that clients will not send it"
                                                        : "conversations with a system prompt or tool calls will fail"});
    }
    // delimiter-like fragments, deduplicated over every successful probe
    std::vector<std::pair<std::pair<uint32_t, uint32_t>, std::string>> seen;
    for (auto& p : rep.probes) {
      if (!p.ok) continue;
      for (auto& w : p.delimiter_warnings) {
        std::pair<std::pair<uint32_t, uint32_t>, std::string> key{{w.line, w.column}, w.fragment};
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        out.push_back({"CT006", Severity::error, w.format(rep.source.origin) + " (probe '" + p.probe + "')", file, "",
                       broken_tag_hint(w.fragment)});
      }
    }
  }
  return out;
}

}  // namespace ckpt::jinja
