// Shared pieces of the encoders: UTF-8 walking, an Oniguruma regex wrapper, utf8proc normalisers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::encode::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid there.
size_t utf8_len(std::string_view s, size_t i);
// Offset of the first invalid byte, or npos when s is valid UTF-8.
size_t first_invalid_utf8(std::string_view s);
// Decodes the (valid) sequence at s[i], advancing i.
uint32_t decode_utf8(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);
// Unicode White_Space (Rust char::is_whitespace / JS trim set).
bool is_unicode_space(uint32_t cp);
// Rust char::is_numeric: general category Nd, Nl, No.
bool is_numeric(uint32_t cp);
std::string_view trim_start(std::string_view s);
std::string_view trim_end(std::string_view s);

// A compiled Oniguruma regex (UTF-8, Ruby syntax, as the onig crate compiles patterns for HF).
class Regex {
 public:
  static std::unique_ptr<Regex> compile(std::string_view pattern, std::string& error);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // All non-overlapping matches left to right (empty matches included, the search then moves on
  // one character). false + error when the engine gives up (retry limit).
  bool find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out, std::string& error) const;

 private:
  Regex() = default;
  void* reg_ = nullptr;
};

// A byte trie over token strings for common-prefix search (Unigram lattices).
class ByteTrie {
 public:
  void add(std::string_view s, uint32_t value);
  // Calls f(length, value) for every stored string that is a prefix of text[pos:], shortest first.
  template <class F>
  void prefixes(std::string_view text, size_t pos, F&& f) const {
    uint32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node == kNone) return;
      if (values_[node] != kNone) f(i + 1 - pos, values_[node]);
    }
  }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t child(uint32_t node, unsigned char c) const;
  std::vector<uint32_t> values_{kNone};
  std::unordered_map<uint64_t, uint32_t> edges_;
};

// utf8proc normalisation forms; false when utf8proc fails.
enum class Form { NFC, NFD, NFKC, NFKD };
bool unicode_normalize(std::string_view in, Form form, std::string& out);
std::string lowercase(std::string_view in);

}  // namespace ckpt::encode::detail
