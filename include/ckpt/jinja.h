// ckpt's own Jinja engine, reproducing Python jinja2 (3.1.6) as transformers configures it
// for chat templates: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, the `generation` tag, a json.dumps-style `tojson`, `raise_exception` and
// `strftime_now`. Values follow Python semantics (None vs Undefined, int/float printing,
// code-point strings, Markup escaping, lazy select/map). Rendering is bounded by a step,
// output, depth and string-size budget; every error carries a line and a column.
#pragma once
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/finding.h"
#include "ckpt/json.h"

namespace ckpt::jinja {

// Whose runtime semantics a render follows. The parse is always Python's (a template another
// engine's parser refuses is predicted by src/engines/dialect.cpp); `hf_jinja` changes what
// rendering prints where @huggingface/jinja 0.5.x (transformers.js) differs from Python
// (../shared/specs/template-dialects.md §2, measured against its own test expectations):
// true/false and JSON-style lists and dicts when printed, None and undefined as "", an
// integral float through tojson as an integer, and JavaScript's sign of `%`.
// `llama_cpp` follows llama.cpp's common/jinja where its recorded outputs differ from Python
// (template-cases/reference/*.results.json, each rule in the code cites its case ids): None
// and undefined print as "", a list prints as its items concatenated, a dict or namespace as
// "", `~ none` adds nothing, `default` replaces None, sort/dictsort compare case-sensitively,
// upper/lower map ASCII only, and split() without a separator splits on each space.
// `swift_jinja` follows swift-jinja 2.x (swift-transformers) by its source, template-dialects.md
// §1b "differs" rows: true/false and "" for None when printed, a dict as {'k': v}, tojson with
// sorted keys, compact separators and ensure_ascii on by default, `//` and `%` truncating toward
// zero, `~ none` adding nothing, and dict items()/keys()/values() in sorted key order.
enum class Runtime : uint8_t { python, hf_jinja, llama_cpp, swift_jinja };

struct Options {
  Runtime runtime = Runtime::python;
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  uint64_t max_steps = 10'000'000;     // evaluation steps per render
  uint64_t max_output = 64ull << 20;   // bytes of rendered output (and of any one string)
  uint32_t max_depth = 256;            // macro/call recursion and parser nesting
  // Time used by strftime_now (seconds since the epoch, rendered in local time as
  // transformers does). Unset = the real current time.
  std::optional<std::time_t> now;
};

struct Error {
  enum class Phase { parse, render };
  Phase phase = Phase::render;
  std::string type;     // Python-like class: TemplateSyntaxError, UndefinedError, TypeError, ...
  std::string message;
  std::string source;   // "chat_template.jinja", "tokenizer_config.json: chat_template", ...
  uint32_t line = 0;    // 1-based; 0 when unknown
  uint32_t column = 0;  // 1-based, in code points of the (decoded) template text
  // "source:line:column: Type: message"
  std::string format() const;
};

// Text that looks like a broken delimiter (`{-`, `-}}`, `%}`, an unbalanced `}}`, ...) and
// that reached the rendered output as plain text.
struct DelimiterWarning {
  std::string fragment;
  uint32_t line = 0;
  uint32_t column = 0;
  std::string format(std::string_view source) const;
};

struct RenderResult {
  std::string output;
  std::optional<Error> error;
  std::vector<DelimiterWarning> delimiter_warnings;
  bool ok() const { return !error.has_value(); }
};

class Template {
 public:
  // Parses `text` (a UTF-8 template). On failure returns nullptr and fills *error.
  static std::shared_ptr<const Template> parse(std::string_view text, std::string source_name,
                                               const Options& options, Error* error);
  ~Template();

  // Renders with the context's top-level members as variables (a JSON object).
  RenderResult render(const json::Value& context) const;
  RenderResult render(const json::Value& context, const Options& options) const;

  const std::string& source_name() const;
  // Top-level variable names the template reads (used to decide whether to probe
  // `enable_thinking`); over-approximates like jinja2's meta.find_undeclared_variables.
  bool reads_variable(std::string_view name) const;
  // Server-side-template-injection patterns found statically (no rendering): dunder
  // attributes or keys, attr() with a computed or private name, and the lipsum/cycler/joiner
  // globals. Each entry is "line:column: what".
  std::vector<std::string> unsafe_accesses() const;

  // Text the template can emit as written, found statically: its text outside tags and
  // comments (raw blocks included), and the string constants of its {{ }} expressions and
  // {% set %} values, except those only compared or tested (`role == '<|x|>'`). Comments
  // never contribute. Positions are 1-based line:column in the normalized source.
  struct EmittableText {
    std::string text;
    uint32_t line = 0, column = 0;
    bool constant = false;  // a string constant (else template text)
  };
  std::vector<EmittableText> emittable_text() const;

  struct Impl;
  explicit Template(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// One-shot convenience: parse + render.
RenderResult render_string(std::string_view text, const json::Value& context,
                           const Options& options = {}, std::string source_name = "<template>");

// ---- Chat-template discovery and the load-time probes (shared by `ckpt template check`
// and the CT check family). ----

struct TemplateSource {
  std::string name;         // "default", "tool_use", or an additional template's name
  std::string file;         // file it came from, relative to the model root
  std::string origin;       // how errors name it: "chat_template.jinja",
                            // "tokenizer_config.json: chat_template[name=tool_use]", ...
  std::string text;
};

struct DiscoveryInput {
  // (relative path, content) of chat_template.jinja and additional_chat_templates/*.jinja
  std::vector<std::pair<std::string, std::string>> jinja_files;
  const json::Value* tokenizer_config = nullptr;   // parsed tokenizer_config.json, or null
  const json::Value* chat_template_json = nullptr; // parsed legacy chat_template.json, or null
  // (file, why) for template sources that exist but could not be used (a .jinja file that is
  // unreadable or not UTF-8, a tokenizer_config.json or chat_template.json that does not
  // parse): reported as CT010 where discovery would have consulted them, never as "absent".
  std::vector<std::pair<std::string, std::string>> unusable;
};

struct Discovery {
  std::vector<TemplateSource> templates;
  std::vector<std::string> problems;  // e.g. "chat_template in tokenizer_config.json is a number"
};

// Transformers' order: separate .jinja files win over tokenizer_config.json's chat_template
// (a string, or a list of {name, template}); the legacy chat_template.json is used last.
Discovery discover_templates(const DiscoveryInput& in);

// Special tokens from tokenizer_config.json as transformers passes them (strings only,
// AddedToken objects reduced to their content; additional_special_tokens as a list).
json::Value special_tokens(const json::Value* tokenizer_config);

// The context with `overrides`' members placed over `base`'s (both JSON objects).
json::Value merge_context(const json::Value& base, const json::Value& overrides);

struct ProbeOutcome {
  std::string probe;     // "bare", "tools", "thinking=true", "thinking=false", "multi-turn"
  bool ok = true;
  std::optional<Error> error;
  std::vector<DelimiterWarning> delimiter_warnings;
  std::string output;
};

struct TemplateReport {
  TemplateSource source;
  std::optional<Error> parse_error;
  std::vector<std::string> unsafe_attributes;  // Template::unsafe_accesses()
  std::vector<ProbeOutcome> probes;  // empty when the template did not parse
  std::shared_ptr<const Template> parsed;  // null when it did not parse
};

// Parses each template and runs the probes: a bare user turn with add_generation_prompt; the
// same with a tools list; enable_thinking true/false when the template reads it; a multi-turn
// conversation with system, assistant, a tool call and a tool response.
std::vector<TemplateReport> probe_templates(const std::vector<TemplateSource>& templates,
                                            const json::Value& special_tokens,
                                            const Options& options = {});

// Discovery + probes turned into CT findings (used by `ckpt template check` and `ckpt verify`):
// CT001 parse error, CT002 bare-probe failure (errors); CT003 tools-only and CT004
// thinking-only failures, CT005 multi-turn failure, CT006 delimiter-like text in the output,
// CT008 malformed chat_template field (warnings); CT007 no template (info); CT009 SSTI pattern;
// CT010 a template source that could not be read (warning).
std::vector<Finding> chat_template_findings(const DiscoveryInput& in, const Options& options = {});

// The probes' findings (CT001 CT002 CT003 CT004 CT005 CT006 CT009) for templates found some
// other way (a GGUF's tokenizer.chat_template); chat_template_findings ends with this.
std::vector<Finding> template_findings(const std::vector<TemplateSource>& templates, const json::Value& special_tokens,
                                       const Options& options = {});

}  // namespace ckpt::jinja
