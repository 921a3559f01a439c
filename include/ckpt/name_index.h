// A flat, open-addressing index from names to positions in a caller's array. Built for the
// 100k-name tables of large checkpoints: one 8-byte slot per bucket (a hash tag and the
// position), no per-name allocation, one cache line per probe.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace ckpt {

// Tensor names are 30-100 bytes and every one is hashed twice per run (header and index): the
// words are mixed in two independent lanes (the multiplies overlap), the last partial word is
// read as the final 8 bytes of the name (no variable-length copy), and a full 64-bit finalizer
// spreads every input bit over the slot bits (low) and the tag bits (high) alike.
inline uint64_t hash_name(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  auto word = [](const char* q) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    return w;
  };
  uint64_t a = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull), b = 0xC2B2AE3D27D4EB4Full;
  if (n >= 8) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      a = (a ^ word(p + i)) * 0xbf58476d1ce4e5b9ull;
      b = (b ^ word(p + i + 8)) * 0x94d049bb133111ebull;
      a ^= a >> 31;
      b ^= b >> 29;
    }
    if (i + 8 <= n) {
      a = (a ^ word(p + i)) * 0xbf58476d1ce4e5b9ull;
      a ^= a >> 31;
      i += 8;
    }
    if (i < n) b = (b ^ word(p + n - 8)) * 0x94d049bb133111ebull;  // overlaps bytes already mixed
  } else {
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    b ^= w * 0x94d049bb133111ebull;
  }
  uint64_t h = a ^ (b + (b << 23) + (b >> 41));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

class NameIndex {
 public:
  static constexpr uint32_t npos = UINT32_MAX;

  // Prepares for up to n names: the load factor stays at or below 3/4. Probing stays short
  // (the tag check settles most slots without a string compare, 8 slots per cache line), and
  // DeepSeek-V3's 92k names fit 128 Ki slots instead of 256 Ki: 1 MB of fresh memory less.
  void reset(size_t n) {
    size_t cap = 16;
    while (!fits(n, cap)) cap <<= 1;
    slots_.assign(cap, Slot{0, npos});
    mask_ = cap - 1;
  }
  // Whether n names keep the load factor of a table of cap slots at or below 3/4.
  static bool fits(size_t n, size_t cap) { return 4 * n <= 3 * cap; }
  bool empty() const { return slots_.empty(); }
  size_t capacity() const { return slots_.size(); }

  // The position stored for `name`, or npos. `name_at(pos)` returns the name at a position.
  template <class NameAt>
  uint32_t find(std::string_view name, uint64_t hash, const NameAt& name_at) const {
    if (slots_.empty()) return npos;
    const uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.pos == npos) return npos;
      if (s.tag == tag && name_at(s.pos) == name) return s.pos;
    }
  }
  // How many names ahead a batch loop prefetches each step: far enough for a miss to land,
  // near enough that the line is still cached when its turn comes.
  static constexpr size_t kPrefetchAhead = 16;
  // Batch helpers for 100k-name loops, whose cost is cache misses: prefetch the bucket a
  // later lookup will probe first, and (once it is cached) the position a matching tag holds.
  void prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
  }
  uint32_t first_candidate(uint64_t hash) const {
    if (slots_.empty()) return npos;
    const uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.pos == npos || s.tag == tag) return s.pos;
    }
  }
  // Inserts `pos` for `name` unless the name is present; returns the position now stored.
  template <class NameAt>
  uint32_t insert(std::string_view name, uint64_t hash, uint32_t pos, const NameAt& name_at) {
    const uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.pos == npos) {
        s = Slot{tag, pos};
        return pos;
      }
      if (s.tag == tag && name_at(s.pos) == name) return s.pos;
    }
  }

 private:
  struct Slot {
    uint32_t tag;
    uint32_t pos;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace ckpt
