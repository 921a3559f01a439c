// The GPT-2 byte-level alphabet: every byte gets a printable code point so that BPE
// vocabularies and merges never contain raw spaces or control bytes.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "ckpt/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ckpt::tok {

static bool printable_byte(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static const std::array<uint32_t, 256>& byte_code_points() {
  static const std::array<uint32_t, 256> cps = [] {
    std::array<uint32_t, 256> t{};
    uint32_t n = 0;
    for (unsigned b = 0; b < 256; ++b) t[b] = printable_byte(b) ? b : 256 + n++;
    return t;
  }();
  return cps;
}

const std::array<std::string, 256>& byte_level_symbols() {
  static const std::array<std::string, 256> syms = [] {
    std::array<std::string, 256> s;
    for (unsigned b = 0; b < 256; ++b) s[b] = utf8_encode(byte_code_points()[b]);
    return s;
  }();
  return syms;
}

const std::vector<std::string>& byte_level_alphabet_sorted() {
  static const std::vector<std::string> sorted = [] {
    std::vector<uint32_t> cps(byte_code_points().begin(), byte_code_points().end());
    std::sort(cps.begin(), cps.end());
    std::vector<std::string> out;
    out.reserve(256);
    for (uint32_t cp : cps) out.push_back(utf8_encode(cp));
    return out;
  }();
  return sorted;
}

// Code points of the alphabet: 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF, 0x100..0x143.
static bool alphabet_code_point(uint32_t cp) {
  if (cp < 256) return printable_byte(cp);
  return cp <= 0x143;
}

// Called for both parts of every merge (250k merges on a large vocabulary): a byte loop over
// the two encodings the alphabet has (printable ASCII, and two-byte sequences for code points
// 0xA1..0x143), with no general UTF-8 decode.
bool spelled_in_byte_level(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      if (c < 0x21 || c > 0x7E) return false;
      ++i;
      continue;
    }
    // Two-byte sequences C2..C5 cover U+0080..U+017F; the alphabet ends at U+0143.
    if (c < 0xC2 || c > 0xC5 || i + 1 >= n) return false;
    const unsigned d = p[i + 1];
    if ((d & 0xC0) != 0x80) return false;
    const uint32_t cp = ((c & 0x1F) << 6) | (d & 0x3F);
    if (!alphabet_code_point(cp)) return false;
    i += 2;
  }
  return true;
}

std::string to_byte_level(std::string_view raw) {
  std::string out;
  for (unsigned char c : raw) out += byte_level_symbols()[c];
  return out;
}

}  // namespace ckpt::tok
