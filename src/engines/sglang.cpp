// SGLang: a member of the Python reference family. The specs record only its template
// dialect; its loader facts are unknown to ckpt (the portable verdict applies).
#include "engines/profiles.h"

namespace ckpt::engines::detail {

Profile sglang_profile() {
  Profile p;
  p.name = "sglang";
  p.title = "SGLang";
  p.family = "python-reference";
  p.reference = true;
  p.weights_format = "safetensors";
  p.dialect = {DialectKind::python_jinja2, "jinja2", {3, 1, 6},
               "chat templates are rendered with Python jinja2 as transformers sets it up",
               "template-dialects.md §4 (Python jinja2: transformers / vLLM / SGLang)"};
  // No loader, quantization or config facts for SGLang are in the specs: every cell stays
  // unknown, so findings keep their portable verdict for it.
  p.notes = {
      "loader strictness, quantization schemes and config handling are not recorded in the specs: ckpt "
      "gives SGLang the portable verdict",
      "CVE-2026-5760: an SGLang path rendered templates unsandboxed, so CT009 (SSTI patterns) matters here "
      "(peers.md, GlyphHound)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
