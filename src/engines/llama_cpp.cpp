// llama.cpp: loads GGUF (convert_hf_to_gguf.py first), renders chat templates with its own
// C++ engine common/jinja (which replaced minja in PR #18462, January 2026). Sources:
// specs/chat-templates.md (engines measured at llama.cpp ad1de39e0), specs/template-dialects.md §4.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

Profile llama_cpp_profile() {
  Profile p;
  p.name = "llama.cpp";
  p.title = "llama.cpp (llama-server; common/jinja)";
  p.family = "llama.cpp";
  p.weights_format = "GGUF";
  p.dialect = {DialectKind::llama_cpp_jinja, "common/jinja", {0, 0, 0},
               "a C++ port of @huggingface/jinja's lexer and parser; the text run ends only at {%, {{ or {#",
               "chat-templates.md header and §3 (llama.cpp common/jinja @ad1de39e0); template-dialects.md §4 "
               "(common/jinja/lexer.cpp@0f3c5996)"};
  constexpr std::string_view kNa =
      "llama.cpp loads GGUF, not safetensors; how convert_hf_to_gguf.py treats this is not in the specs";
  p.loader.unexpected_tensors = {Verdict::unknown, kNa, "gguf.md"};
  p.loader.missing_tensors = {Verdict::unknown, kNa, "gguf.md"};
  p.loader.stray_shards = {Verdict::unknown, kNa, "gguf.md"};
  p.loader.tied_head = {Verdict::unknown, kNa, "gguf.md"};
  p.loader.rotary_buffers = {Verdict::unknown, kNa, "gguf.md"};
  p.loader.dtype_casts = {Verdict::unknown, kNa, "gguf.md"};
  p.notes = {
      "host variables differ from transformers: tools only when non-empty, add_generation_prompt only when true, "
      "enable_thinking always set (chat-templates.md §1)",
      "uses a mutable sandbox: list.append works where transformers raises (chat-templates.md §3)",
      "the GGUF loader reports \"tensor data is not within the file bounds\" (peers.md, PR #6885)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
