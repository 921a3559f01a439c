// A bounded reader for SentencePiece `tokenizer.model` files: walks the protobuf
// ModelProto and collects the `pieces` (field 1, each a SentencePiece whose field 1 is the
// piece text). Anything malformed returns nullopt; nothing is allocated beyond the pieces.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/tokenizer.h"
#include "tokenizer/sentencepiece.h"

namespace ckpt::tok {

static bool read_varint(std::string_view b, size_t& i, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (i >= b.size()) return false;
    uint8_t c = static_cast<uint8_t>(b[i++]);
    v |= uint64_t(c & 0x7F) << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

// Skip one field of wire type `wt`; false when malformed.
static bool skip_field(std::string_view b, size_t& i, uint32_t wt) {
  uint64_t v;
  switch (wt) {
    case 0: return read_varint(b, i, v);
    case 1: if (b.size() - i < 8) return false; i += 8; return true;
    case 2:
      if (!read_varint(b, i, v) || v > b.size() - i) return false;
      i += size_t(v);
      return true;
    case 5: if (b.size() - i < 4) return false; i += 4; return true;
    default: return false;
  }
}

std::optional<std::vector<std::string>> sentencepiece_pieces(std::string_view bytes) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < bytes.size()) {
    uint64_t key;
    if (!read_varint(bytes, i, key)) return std::nullopt;
    uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
    if (field == 0) return std::nullopt;
    if (field == 1 && wt == 2) {
      uint64_t len;
      if (!read_varint(bytes, i, len) || len > bytes.size() - i) return std::nullopt;
      std::string_view msg = bytes.substr(i, size_t(len));
      i += size_t(len);
      std::string piece;
      bool have = false;
      size_t j = 0;
      while (j < msg.size()) {
        uint64_t k2;
        if (!read_varint(msg, j, k2)) return std::nullopt;
        uint32_t f2 = uint32_t(k2 >> 3), w2 = uint32_t(k2 & 7);
        if (f2 == 0) return std::nullopt;
        if (f2 == 1 && w2 == 2) {
          uint64_t l2;
          if (!read_varint(msg, j, l2) || l2 > msg.size() - j) return std::nullopt;
          piece.assign(msg.substr(j, size_t(l2)));
          j += size_t(l2);
          have = true;
        } else if (!skip_field(msg, j, w2)) {
          return std::nullopt;
        }
      }
      if (!have) return std::nullopt;
      pieces.push_back(std::move(piece));
    } else if (!skip_field(bytes, i, wt)) {
      return std::nullopt;
    }
  }
  if (pieces.empty()) return std::nullopt;
  return pieces;
}

std::optional<uint64_t> sentencepiece_piece_count(std::string_view bytes) {
  auto p = sentencepiece_pieces(bytes);
  if (!p) return std::nullopt;
  return p->size();
}

}  // namespace ckpt::tok
