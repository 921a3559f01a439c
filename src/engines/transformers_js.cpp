// transformers.js: ONNX weights, chat templates through @huggingface/jinja. Versioned by that
// library: `transformers.js@0.5.2`. Sources: specs/template-dialects.md §2/§4,
// specs/chat-templates.md §3 (run: @huggingface/jinja 0.5.11).
#include "engines/profiles.h"

namespace ckpt::engines::detail {

namespace {
// The version the corpus recordings and template-dialects.md §2 ran; transformers.js 4.3.2
// depends on ^0.5.10 (template-dialects.md, "Who uses what").
constexpr Version kDefault{0, 5, 11};
constexpr Version kFirst{0, 5, 0}, kLast{0, 5, 11};
}  // namespace

Profile transformers_js_profile(const Version* version, std::string* error) {
  Version v = version ? *version : kDefault;
  if (version && (v < kFirst || v > kLast)) {
    if (error) *error = "@huggingface/jinja " + v.str() + " is not modelled: ckpt knows 0.5.0 to 0.5.11";
    return {};
  }
  Profile p;
  p.name = "transformers.js";
  p.title = "transformers.js (@huggingface/jinja)";
  p.family = "javascript";
  p.version_key = "@huggingface/jinja";
  p.version = v.str();
  p.default_version_note =
      "0.5.11: the release the specs and the corpus recordings ran (transformers.js 4.3.2 depends on ^0.5.10)";
  p.weights_format = "ONNX";
  p.dialect = {DialectKind::hf_jinja, "@huggingface/jinja", v,
               "new Template(text) with trim_blocks and lstrip_blocks as regexes over the source",
               "template-dialects.md §2; chat-templates.md §3"};
  constexpr std::string_view kNa = "transformers.js loads ONNX exports; the specs record nothing about its loader";
  p.loader.unexpected_tensors = {Verdict::unknown, kNa, ""};
  p.loader.missing_tensors = {Verdict::unknown, kNa, ""};
  p.loader.stray_shards = {Verdict::unknown, kNa, ""};
  p.loader.tied_head = {Verdict::unknown, kNa, ""};
  p.loader.rotary_buffers = {Verdict::unknown, kNa, ""};
  p.loader.dtype_casts = {Verdict::unknown, kNa, ""};
  p.notes = {
      "prints true/false and JSON-style lists where Python prints True and repr (chat-templates.md §4.1)",
      "runtime gaps ckpt does not model: filters select/reject/map('f'), methods .format/.find/.join, "
      "iterating a string, undefined|upper (template-dialects.md §2)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
