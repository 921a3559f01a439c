// ckpt template render|check: render a chat template exactly as transformers would, or
// find a model's templates and run the load-time probes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "ckpt/jinja.h"
#include "ckpt/json.h"
#include "io/utf8.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace fs = std::filesystem;

namespace ckpt::cli {

namespace {

constexpr uint64_t kMaxInputBytes = 64ull << 20;

bool read_file(const fs::path& p, std::string& out, std::string& err) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) { err = p.string() + ": " + ec.message(); return false; }
  if (size > kMaxInputBytes) { err = p.string() + ": larger than " + std::to_string(kMaxInputBytes) + " bytes"; return false; }
  std::ifstream in(p, std::ios::binary);
  if (!in) { err = p.string() + ": cannot open"; return false; }
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

bool read_json(const fs::path& p, json::Value& out, std::string& err) {
  std::string text;
  if (!read_file(p, text, err)) return false;
  auto r = json::parse(text);
  if (!r.ok()) {
    err = p.string() + ":" + std::to_string(r.error->line) + ":" + std::to_string(r.error->column) + ": " + r.error->message;
    return false;
  }
  out = std::move(r.value);
  return true;
}

// Gathers what discovery needs from a model directory. Unreadable JSON side files are
// reported through `warnings` and skipped.
struct ModelInputs {
  std::vector<std::pair<std::string, std::string>> jinja_files;
  std::optional<json::Value> tokenizer_config, chat_template_json;
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> unusable;  // (file, why): see DiscoveryInput
  jinja::DiscoveryInput view() const {
    jinja::DiscoveryInput in;
    in.jinja_files = jinja_files;
    in.unusable = unusable;
    if (tokenizer_config) in.tokenizer_config = &*tokenizer_config;
    if (chat_template_json) in.chat_template_json = &*chat_template_json;
    return in;
  }
};

ModelInputs load_model_dir(const fs::path& dir) {
  ModelInputs m;
  std::string text, err;
  auto add_jinja = [&](const fs::path& p, const std::string& rel) {
    if (!read_file(p, text, err)) {
      m.warnings.push_back(err);
      m.unusable.emplace_back(rel, "could not be read");
    } else if (auto bad = io::first_invalid_utf8(text)) {
      auto [l, c] = json::line_column(text, *bad);
      m.warnings.push_back(p.string() + ":" + std::to_string(l) + ":" + std::to_string(c) + ": invalid UTF-8 at byte " +
                           std::to_string(*bad) + "; transformers reads templates as UTF-8");
      m.unusable.emplace_back(rel, "is not valid UTF-8");
    } else {
      m.jinja_files.emplace_back(rel, text);
    }
  };
  if (fs::is_regular_file(dir / "chat_template.jinja")) add_jinja(dir / "chat_template.jinja", "chat_template.jinja");
  std::error_code ec;
  if (fs::is_directory(dir / "additional_chat_templates", ec)) {
    for (auto& e : fs::directory_iterator(dir / "additional_chat_templates", ec)) {
      if (e.path().extension() != ".jinja" || !e.is_regular_file()) continue;
      add_jinja(e.path(), "additional_chat_templates/" + e.path().filename().string());
    }
  }
  for (auto [name, slot] : {std::pair{"tokenizer_config.json", &m.tokenizer_config}, std::pair{"chat_template.json", &m.chat_template_json}}) {
    if (!fs::exists(dir / name)) continue;
    json::Value v;
    if (read_json(dir / name, v, err)) {
      *slot = std::move(v);
    } else {
      m.warnings.push_back(err);
      m.unusable.emplace_back(name, "did not parse (" + err + ")");
    }
  }
  return m;
}

int run_render(const std::string& target, const std::string& context_path, const std::string& name) {
  json::Value ctx = json::Object{};
  std::string err;
  if (!context_path.empty() && !read_json(context_path, ctx, err)) {
    std::fprintf(stderr, "ckpt template render: %s\n", err.c_str());
    return 2;
  }
  if (!ctx.is_object()) {
    std::fprintf(stderr, "ckpt template render: %s: the context must be a JSON object\n", context_path.c_str());
    return 2;
  }
  std::string text, origin;
  json::Value tokens = json::Object{};
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    ModelInputs m = load_model_dir(target);
    for (auto& w : m.warnings) std::fprintf(stderr, "ckpt template render: warning: %s\n", w.c_str());
    jinja::Discovery d = jinja::discover_templates(m.view());
    for (auto& p : d.problems) std::fprintf(stderr, "ckpt template render: warning: %s\n", p.c_str());
    if (d.templates.empty()) {
      std::fprintf(stderr, "ckpt template render: %s: no chat template found (chat_template.jinja, additional_chat_templates/, tokenizer_config.json, chat_template.json)\n", target.c_str());
      return 1;
    }
    const jinja::TemplateSource* pick = nullptr;
    std::string want = name.empty() ? "default" : name;
    for (auto& t : d.templates)
      if (t.name == want) pick = &t;
    if (!pick && name.empty() && d.templates.size() == 1) pick = &d.templates[0];
    if (!pick) {
      std::string names;
      for (auto& t : d.templates) names += (names.empty() ? "" : ", ") + t.name;
      std::fprintf(stderr, "ckpt template render: %s: no template named '%s' (available: %s); choose one with --name\n", target.c_str(), want.c_str(), names.c_str());
      return 2;
    }
    text = pick->text;
    origin = pick->origin;
    tokens = jinja::special_tokens(m.tokenizer_config ? &*m.tokenizer_config : nullptr);
  } else {
    if (!read_file(target, text, err)) {
      std::fprintf(stderr, "ckpt template render: %s\n", err.c_str());
      return 2;
    }
    origin = fs::path(target).filename().string();
  }
  jinja::Options opts;
  jinja::Error perr;
  auto tmpl = jinja::Template::parse(text, origin, opts, &perr);
  if (!tmpl) {
    std::fprintf(stderr, "%s\n", perr.format().c_str());
    return 1;
  }
  auto res = tmpl->render(jinja::merge_context(tokens, ctx), opts);
  if (!res.ok()) {
    std::fprintf(stderr, "%s\n", res.error->format().c_str());
    return 1;
  }
  std::fwrite(res.output.data(), 1, res.output.size(), stdout);
  std::fflush(stdout);
  for (auto& w : res.delimiter_warnings) std::fprintf(stderr, "warning: %s\n", w.format(origin).c_str());
  return 0;
}

int run_check(const std::string& target) {
  std::error_code ec;
  if (!fs::is_directory(target, ec)) {
    std::fprintf(stderr, "ckpt template check: %s: not a model directory\n", target.c_str());
    return 2;
  }
  ModelInputs m = load_model_dir(target);
  // A template source that exists but cannot be used fails the load in transformers: an error.
  for (auto& w : m.warnings) std::printf("FS011 error: %s\n", w.c_str());
  jinja::DiscoveryInput in = m.view();
  jinja::Discovery d = jinja::discover_templates(in);
  jinja::Options opts;
  json::Value tokens = jinja::special_tokens(in.tokenizer_config);
  for (auto& rep : jinja::probe_templates(d.templates, tokens, opts)) {
    std::printf("%s (template '%s'):", rep.source.origin.c_str(), rep.source.name.c_str());
    if (rep.parse_error) {
      std::printf(" does not parse\n");
      continue;
    }
    for (auto& p : rep.probes) std::printf(" %s %s;", p.probe.c_str(), p.ok ? "ok" : "FAILS");
    std::printf("\n");
  }
  auto findings = jinja::chat_template_findings(in, opts);
  bool error = !m.warnings.empty();
  for (auto& f : findings) {
    std::printf("%s %s: %s\n", f.code.c_str(), std::string(severity_name(f.severity)).c_str(), f.message.c_str());
    if (!f.hint.empty()) std::printf("    hint: %s\n", f.hint.c_str());
    error |= f.severity == Severity::error;
  }
  if (findings.empty() && !error) std::printf("chat template OK: every probe renders\n");
  return error ? 1 : 0;
}

int run_template(int argc, char** argv) {
  CLI::App app{"Render or check chat templates with Python-jinja2 semantics (as transformers configures it)."};
  app.name(argv[0]);
  app.require_subcommand(1);
  std::string target, context, name;
  auto* render = app.add_subcommand("render", "render TEMPLATE_FILE or MODEL_DIR's template with --context; prints exactly the rendered text");
  render->add_option("TARGET", target, "a template file, or a model directory (special tokens from tokenizer_config.json are merged under the context)")->required();
  render->add_option("--context", context, "JSON object with the template variables (messages, add_generation_prompt, tools, ...)");
  render->add_option("--name", name, "which template of a model directory (default: 'default')");
  auto* check = app.add_subcommand("check", "find MODEL_DIR's chat templates as transformers does and run the load-time probes");
  check->add_option("MODEL_DIR", target, "model directory")->required();
  if (auto code = parse_args(app, argc, argv)) return *code;
  if (render->parsed()) return run_render(target, context, name);
  return run_check(target);
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("template", "render a chat template, or check a model's templates with load-time probes", run_template);

}  // namespace ckpt::cli
