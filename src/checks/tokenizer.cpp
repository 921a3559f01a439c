// TK: tokenizer files against themselves, the configs, the embedding and the chat template.
// The checks live in the ckpt_tokenizer module (src/tokenizer/check.cpp); this file lists
// the codes and resolves the embedding rows through the checkpoint's weights.
#include <array>

#include "checks/family.h"
#include "ckpt/arch.h"
#include "ckpt/tokenizer.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 19> kCodes{{
    {"TK001", Severity::warning, "no tokenizer files"},
    {"TK002", Severity::error, "tokenizer.json is not valid JSON"},
    {"TK003", Severity::error, "tokenizer model section is malformed or of an unknown type"},
    {"TK004", Severity::error, "vocabulary ids are not unique"},
    {"TK005", Severity::error, "BPE model without merges"},
    {"TK006", Severity::error, "BPE merge uses a token that is not in the vocabulary"},
    {"TK007", Severity::error, "BPE merge produces a token that is not in the vocabulary"},
    {"TK008", Severity::error, "BPE merge not spelled in the byte-level alphabet"},
    {"TK009", Severity::error, "malformed BPE merge entry"},
    {"TK010", Severity::error, "malformed added_tokens entry"},
    {"TK011", Severity::warning, "added token disagrees with the vocabulary"},
    {"TK012", Severity::error, "special token named in tokenizer_config.json does not exist"},
    {"TK013", Severity::error, "special token id beyond the embedding"},
    {"TK014", Severity::error, "tokenizer larger than the embedding"},
    {"TK015", Severity::error, "chat template literal is not a single token"},
    {"TK016", Severity::info, "Unigram model behind the generic PreTrainedTokenizerFast class"},
    {"TK017", Severity::warning, "special token id that no token has"},
    {"TK018", Severity::warning, "byte-level BPE vocabulary misses byte symbols"},
    {"TK019", Severity::info, "tokenizer checks skipped: a side file they read did not parse"},
}};

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  // A GGUF-only directory: its tokenizer lives in the GGUF metadata (gguf_tokenizer.cpp).
  if ((!ck.gguf_models.empty() || ck.ollama) && ck.shards.empty() && !ck.tokenizer.present && !ck.tokenizer_config.present &&
      !ck.file("tokenizer.model") && !ck.file("vocab.json"))
    return;
  tok::CheckInput in;
  // Prefer the embedding under the text-weights prefix the arch registry resolves
  // ("model.", "language_model.model.", "model.language_model."); suffix match otherwise.
  std::string prefix;
  if (ck.config.ok()) {
    arch::ConfigView view = arch::resolve_config(ck.config.value, [&](std::string_view n) { return ck.weight(n) != nullptr; });
    if (view.arch) prefix = view.prefix;
  }
  in.embedding = tok::find_embedding(ck, prefix);
  tok::check_tokenizer(ck, in, out);
}

}  // namespace

const FamilyDef kTokenizerFamily{"TK", kCodes, run};

}  // namespace ckpt::checks
