// A flat, open-addressing index from names to positions in a caller's array. Built for the
// 100k-name tables of large checkpoints: one 8-byte slot per bucket (a hash tag and the
// position), no per-name allocation, one cache line per probe.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace ckpt {

inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xff51afd7ed558ccdull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0x94d049bb133111ebull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
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
