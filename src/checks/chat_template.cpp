// CT: does the chat template parse and render the requests a server will make? The probes
// (a bare user turn, tools, enable_thinking, a multi-turn tool conversation) run in ckpt's
// own Jinja engine with transformers' environment; the logic is shared with
// `ckpt template check` (jinja::chat_template_findings).
#include <array>

#include "checks/family.h"
#include "ckpt/jinja.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 10> kCodes{{
    {"CT001", Severity::error, "chat template does not parse"},
    {"CT002", Severity::error, "chat template fails on the load-time probe"},
    {"CT003", Severity::warning, "chat template fails only when tools are passed"},
    {"CT004", Severity::warning, "chat template fails with enable_thinking set"},
    {"CT005", Severity::warning, "chat template fails on a multi-turn tool conversation"},
    {"CT006", Severity::error, "delimiter-like text reaches the rendered prompt"},
    {"CT007", Severity::info, "no chat template"},
    {"CT008", Severity::warning, "chat_template field is malformed"},
    {"CT009", Severity::error, "chat template contains a sandbox-escape (SSTI) pattern"},
    {"CT010", Severity::warning, "chat template not checked: its source file could not be used"},
}};

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  // A GGUF-only directory: its templates live in the GGUF metadata (gguf_tokenizer.cpp).
  if ((!ck.gguf_models.empty() || ck.ollama) && ck.templates.empty() && !ck.tokenizer_config.present && !ck.chat_template_json.present) return;
  jinja::DiscoveryInput in;
  for (const auto& t : ck.templates) {
    if (t.ok()) in.jinja_files.emplace_back(t.file, t.text);
    else in.unusable.emplace_back(t.file, "could not be read: " + t.error);
  }
  auto side = [&](const JsonFile& jf, const json::Value*& slot) {
    if (jf.ok()) {
      slot = &jf.value;
    } else if (jf.present && jf.error) {
      const auto& e = *jf.error;
      in.unusable.emplace_back(jf.file, std::string("did not parse") +
                                            (e.line ? " (" + std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.message + ")"
                                                    : " (" + e.message + ")"));
    }
  };
  side(ck.tokenizer_config, in.tokenizer_config);
  side(ck.chat_template_json, in.chat_template_json);
  for (auto& f : jinja::chat_template_findings(in)) out.add(std::move(f));
}

}  // namespace

const FamilyDef kChatTemplateFamily{"CT", kCodes, run};

}  // namespace ckpt::checks
