// Byte-scanning helpers shared by the one-pass JSON scanners (safetensors headers, the shard
// index). The 100k-entry files of large checkpoints are mostly string bytes, so the scan for
// a string's end goes 16 bytes at a time where SSE2 is available (every x86-64).
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ckpt::io {

// The first byte in [p, end) that ends or interrupts a plain JSON string: '"', '\\' or a
// control character (< 0x20). Returns end when there is none. Never reads outside [p, end).
inline const char* find_string_stop(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), below_space = _mm_set1_epi8(0x1f);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // unsigned c <= 0x1f  <=>  min(c, 0x1f) == c
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                               _mm_cmpeq_epi8(_mm_min_epu8(v, below_space), v));
    if (int mask = _mm_movemask_epi8(hit)) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20) return p;
  }
  return end;
}

// The value of 8 decimal digits, one per byte (0..9), the most significant in the lowest byte.
[[gnu::always_inline]] inline uint64_t eight_digits(uint64_t d) {
  d = d * 10 + (d >> 8);  // bytes 0, 2, 4, 6 now hold two-digit values
  return (((d & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
          (((d >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
}

// The ASCII digits that begin the 8 bytes at p (all 8 must be readable): how many (0..8) and
// their value, from one load and a few multiplications (a loop costs ~10 instructions a
// digit, and the big JSON files hold hundreds of thousands of 5- to 11-digit numbers).
struct LeadingDigits {
  uint64_t value;
  unsigned count;
};
[[gnu::always_inline]] inline LeadingDigits leading_digits8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  const uint64_t d = w - 0x3030303030303030ull;  // each digit byte now holds 0..9
  // A byte is a digit when d's byte is below 10; borrows only travel up from a non-digit, so
  // the lowest flagged byte is the first non-digit.
  const uint64_t stop = (d | (d + 0x7676767676767676ull)) & 0x8080808080808080ull;
  const unsigned n = stop ? static_cast<unsigned>(__builtin_ctzll(stop)) / 8 : 8;
  if (n == 0) return {0, 0};
  return {eight_digits(d << (8 * (8 - n))), n};
}

// The cursor of a one-pass scanner over JSON bytes [p_, end_): the primitives the header and
// index scanners share. Every read is bounds-checked; "false" means "not the plain subset
// here", and the caller falls back to its general parser.
// The first K bytes at p equal those of lit, compared as two overlapping words (K is a small
// constant: the field names of a header, compared hundreds of thousands of times).
template <size_t K>
[[gnu::always_inline]] inline bool same_bytes(const char* p, const char* lit) {
  if constexpr (K >= 8) {
    uint64_t diff = 0;
    for (size_t at = 0;; at += 8) {  // whole words, the last one overlapping the one before
      const size_t o = at + 8 <= K ? at : K - 8;
      uint64_t a, b;
      std::memcpy(&a, p + o, 8);
      std::memcpy(&b, lit + o, 8);
      diff |= a ^ b;
      if (o + 8 >= K) break;
    }
    return diff == 0;
  } else if constexpr (K >= 4 && K < 8) {
    uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, p, 4);
    std::memcpy(&b0, lit, 4);
    std::memcpy(&a1, p + K - 4, 4);
    std::memcpy(&b1, lit + K - 4, 4);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  } else {
    for (size_t i = 0; i < K; ++i)
      if (p[i] != lit[i]) return false;
    return true;
  }
}

class JsonCursor {
 protected:
  JsonCursor(const char* begin, const char* end) : p_(begin), end_(end) {}

  [[gnu::always_inline]] void ws() {
    if (p_ < end_ && static_cast<unsigned char>(*p_) > ' ') return;  // compact JSON: one compare
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool eat(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // A string without escapes or control characters (the caller validated UTF-8).
  bool plain_string(std::string_view& out) {
    if (!eat('"')) return false;
    const char* b = p_;
    p_ = find_string_stop(p_, end_);
    if (p_ == end_ || *p_ != '"') return false;  // an escape or a control character
    out = std::string_view(b, static_cast<size_t>(p_ - b));
    ++p_;
    return true;
  }
  // `lit` (without its terminating NUL) at the cursor: consumed, true. Otherwise nothing is.
  template <size_t N>
  bool literal_here(const char (&lit)[N]) {
    if (static_cast<size_t>(end_ - p_) < N - 1 || !same_bytes<N - 1>(p_, lit)) return false;
    p_ += N - 1;
    return true;
  }
  // `"lit"` at the cursor: consumed, true. Otherwise nothing is consumed.
  template <size_t N>
  bool quoted_literal(const char (&lit)[N]) {
    if (static_cast<size_t>(end_ - p_) < N + 1 || p_[0] != '"' || p_[N] != '"') return false;
    if (!same_bytes<N - 1>(p_ + 1, lit)) return false;
    p_ += N + 1;
    return true;
  }

  const char* p_;
  const char* end_;
};

// s == lit for a string literal, compared inline (no libc call: the per-entry field names of
// a 100k-tensor header are compared hundreds of thousands of times).
template <size_t N>
inline bool equals_literal(std::string_view s, const char (&lit)[N]) {
  if (s.size() != N - 1) return false;
  for (size_t i = 0; i + 1 < N; ++i)  // N is a constant: unrolled into a few compares
    if (s[i] != lit[i]) return false;
  return true;
}

// A string no longer than 16 bytes compared without a libc call (dtype names and the like).
inline bool short_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

}  // namespace ckpt::io
