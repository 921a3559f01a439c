// Engine profiles: what each inference engine that may load a checkpoint actually does with
// it — its chat-template dialect, how strictly it loads tensors, the quantization schemes it
// loads, the config keys it requires or defaults, the tokenizer models it builds. Profiles are
// data (src/engines/<family>.cpp, every fact with its source); `ckpt verify --engine NAME`
// judges a checkpoint for the named engines, and without --engine the same tables give the
// portable verdict (src/engines/verdicts.cpp, the one place severities depend on engines).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/finding.h"

namespace ckpt::engines {

// How an engine reacts to one kind of defect.
enum class Verdict : uint8_t {
  breaks,          // refuses to load / fails every request / computes garbage
  tolerates,       // loads, maybe with a log line: the finding is a warning for it
  not_applicable,  // the engine never meets this (e.g. a safetensors loader rule for llama.cpp)
  unknown,         // the specs record nothing: ckpt keeps the portable verdict
};
std::string_view verdict_name(Verdict v);

struct Behaviour {
  Verdict verdict = Verdict::unknown;
  std::string_view note;    // what the engine does, one line
  std::string_view source;  // file@commit or spec section the fact comes from
};

struct Version {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Version&) const = default;
  std::string str() const;
};
std::optional<Version> parse_version(std::string_view s);

enum class DialectKind : uint8_t {
  python_jinja2,   // jinja2 3.1 as transformers configures it: ckpt's own engine, the reference
  swift_jinja,     // huggingface/swift-jinja (v2), as swift-transformers compiles it
  hf_jinja,        // @huggingface/jinja (transformers.js)
  llama_cpp_jinja, // llama.cpp common/jinja (replaced minja in PR #18462)
};

struct Dialect {
  DialectKind kind = DialectKind::python_jinja2;
  std::string_view library;  // "swift-jinja", "@huggingface/jinja", ...
  Version version;           // of the library (the profile's version key for swiftlm, transformers.js)
  std::string_view note;
  std::string_view source;
  std::string label() const;  // "swift-jinja 2.3.5"
};

struct Loader {
  Behaviour unexpected_tensors;  // AR002
  Behaviour missing_tensors;     // AR001
  Behaviour stray_shards;        // IX002: a .safetensors the index does not name
  std::string_view shard_glob;   // files opened when globbing ("" = the index decides)
  bool glob_recursive = false;   // the glob also descends into subdirectories
  Behaviour tied_head;           // AR012 at warning severity: tied, yet lm_head.weight stored
  Behaviour rotary_buffers;      // AR003 at warning severity: inv_freq the loader does not drop
  Behaviour dtype_casts;         // AR010: a float tensor in another float dtype
};

// A quantization scheme (quant::method_name spelling: "mlx", "compressed-tensors", "gptq",
// "awq", "auto-round", "fp8", "bitsandbytes", "mxfp4", or a raw quant_method such as "hqq")
// and, for MLX, a mode ("affine", "mxfp4", "nvfp4", "mxfp8"; empty = every mode).
struct QuantRule {
  std::string_view scheme;
  std::string_view mode;
  Verdict verdict = Verdict::unknown;
  int only_bits = 0;           // loads only this bit width (0: any)
  bool rejects_g_idx = false;  // refuses act-order (g_idx / desc_act)
  std::string_view note;
  std::string_view source;
};

// A config key for one model_type ("*" = every model_type): required (decoding fails without
// it) or defaulted to `default_value`.
struct ConfigRule {
  std::string_view model_type;
  std::string_view key;
  bool required = false;
  std::string_view default_value;  // when not required: the value the engine uses
  std::string_view source;
};

// A tokenizer.json model type ("BPE", "Unigram", "WordLevel", "WordPiece") the engine builds or
// refuses.
struct TokenizerRule {
  std::string_view model;
  Verdict verdict = Verdict::unknown;
  std::string_view note;
  std::string_view source;
};

struct Profile {
  std::string_view name;         // "swiftlm" (the id used in --engine and in findings)
  std::string_view title;        // "SwiftLM (mlx-swift-lm + swift-transformers + swift-jinja)"
  std::string_view family;       // "python-reference", "mlx", "swift", "llama.cpp", "javascript"
  bool reference = false;        // one of the Python reference family (transformers, vLLM, SGLang, TGI)
  std::string_view version_key;  // what `name@VERSION` selects ("" = not versioned)
  std::string version;           // the selected version ("" = not versioned)
  std::string_view default_version_note;  // why the default is what it is
  std::string_view weights_format;  // what it loads: "safetensors", "GGUF", "ONNX"
  Dialect dialect;
  Loader loader;
  std::vector<QuantRule> quant;           // schemes not listed: unknown
  std::vector<ConfigRule> config;
  std::vector<TokenizerRule> tokenizers;  // models not listed: unknown
  std::vector<std::string_view> notes;    // other facts and known gaps, each with its source

  std::string id() const;  // "swiftlm@2.3.5" for versioned profiles, else the name
};

// Every engine profile at its default version, in a fixed order (the order of findings'
// `engines` lists and of `ckpt engines`).
const std::vector<Profile>& all_profiles();
// "swiftlm", "swiftlm@2.4.0", "transformers.js@0.5.2", "llama.cpp"; also accepts the aliases
// listed by `ckpt engines` (e.g. "mlx_lm", "sglang", "text-generation-inference"). nullopt and
// *error when the name or the version is unknown.
std::optional<Profile> find_profile(std::string_view spec, std::string* error);

// The engines a verify run judges for. Empty = the portable verdict (every profile).
struct Selection {
  std::vector<Profile> engines;
  bool portable() const { return engines.empty(); }
  bool selects(std::string_view name) const;
};
// Parses repeatable and comma-separated --engine values.
std::optional<Selection> parse_selection(const std::vector<std::string>& args, std::string* error);

// ---- template dialects ------------------------------------------------------------------

// What one engine's template engine does with a template (Python jinja2 = ckpt's own engine
// is the reference; the other dialects are modelled as what they change).
struct DialectIssue {
  enum class Kind : uint8_t { refuses, hangs, renders_differently };
  Kind kind = Kind::refuses;
  uint32_t offset = 0;      // byte offset in the template text
  uint32_t line = 0, column = 0;  // 1-based; column in code points
  std::string engine_error; // the engine's own error text where known ("" otherwise)
  std::string what;         // ckpt's description of the construct
  std::string source;       // where the behaviour is documented
};

struct DialectPrediction {
  std::vector<DialectIssue> issues;  // in document order
  // The first refusal (or hang) in document order: what the engine reports, since its
  // parser stops there. nullptr when the engine parses the template.
  const DialectIssue* first_refusal() const;
  // The template as the engine's preprocessing rewrites it (swift-jinja's global `-}}`
  // rewrite, ...), for rendering with the reference engine; empty when nothing is rewritten.
  std::string rewritten;
};

DialectPrediction predict_dialect(const Dialect& d, std::string_view template_text);

// ---- checks and verdicts ----------------------------------------------------------------

// Engine-specific findings for the selected engines (every profile when portable): CT011 a
// template an engine refuses, CT012 a template that renders differently, CF012 a config key an
// engine requires, QZ012 a quantization scheme an engine does not load, TK020 a tokenizer model
// an engine cannot build, IX014 an indexed shard a glob-based loader never opens. Each finding
// names its engines; severities are those for the engine itself (apply_verdicts adjusts them).
std::vector<Finding> engine_findings(const Checkpoint& ck, const Selection& sel);

// The post-pass: severities and `engines` by profile. Without engines (portable): error for
// what breaks an engine of the Python reference family, or corrupts silently everywhere; a
// warning naming the engines for what breaks only some. With engines: what breaks them is an
// error, what they tolerate a warning, findings for other engines only are dropped.
void apply_verdicts(std::vector<Finding>& findings, const Selection& sel);

// `ckpt engines`
std::string render_profiles_text(const std::vector<Profile>& profiles);
std::string render_profiles_json(const std::vector<Profile>& profiles);

}  // namespace ckpt::engines
