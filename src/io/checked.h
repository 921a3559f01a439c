// Checked arithmetic for sizes read from untrusted bytes.
#pragma once
#include <cstdint>
#include <optional>

namespace ckpt::io {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_align_up(uint64_t v, uint64_t align) {
  if (align == 0) return std::nullopt;
  auto r = checked_add(v, align - 1);
  if (!r) return std::nullopt;
  return *r / align * align;
}

}  // namespace ckpt::io
