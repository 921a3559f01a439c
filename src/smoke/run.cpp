// ckpt smoke over a text: encode it with the checkpoint's own tokenizer, then the pass over ids.
#include "smoke/internal.h"

namespace ckpt::smoke {

Result run(const Checkpoint& ck, const std::string& text, const Options& opts) {
  const std::string& source = text.empty() ? reference_text() : text;
  std::vector<uint32_t> ids;
  std::string kind, error;
  if (!encode_text(ck, source, ids, kind, error)) {
    Result r;
    r.findings.push_back(Finding{"SM012", Severity::warning, "smoke pass not run: the text cannot be encoded: " + error, "", "",
                                 "pass ids with --token-ids, or add a tokenizer.json / tokenizer.model", {}});
    return r;
  }
  Result r = run_tokens(ck, ids, opts);
  r.tokenizer = kind;
  return r;
}

}  // namespace ckpt::smoke
