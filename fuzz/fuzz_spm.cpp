// libFuzzer: the SentencePiece ModelProto reader behind tokenizer.model (a bounded protobuf
// walk). Invariants: no crash/UB, the piece count agrees with the pieces, and the pieces'
// total length cannot exceed the input (nothing is invented or over-read).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ckpt/tokenizer.h"
#include "tokenizer/sentencepiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto pieces = tok::sentencepiece_pieces(bytes);
  auto count = tok::sentencepiece_piece_count(bytes);
  if (pieces.has_value() != count.has_value()) std::abort();
  if (!pieces) return 0;
  if (pieces->empty() || *count != pieces->size()) std::abort();
  size_t total = 0;
  for (const auto& p : *pieces) total += p.size();
  if (total > size) std::abort();
  return 0;
}
