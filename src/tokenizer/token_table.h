// The TK checks' token table: token text -> id in one flat open-addressing array.
// Built for the merge loop (three lookups per merge: left, right, result; ~450k lookups on a
// 150k-token vocabulary). Each 16-byte slot holds the text's length and first 8 bytes, so a
// lookup of a token of up to 8 bytes (most BPE tokens) touches one cache line; std::unordered_map
// needed three (bucket, node, text). Keys are views: the parsed document (or the owned
// SentencePiece pieces) must outlive the table. Entries keep insertion order, so nothing
// reported depends on hashing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::tok {

// Per-process seed: a document cannot be written to collide in a table it cannot predict.
uint64_t token_hash_seed();

// What the table knows of a text before looking: its hash and its first 8 bytes (zero-padded).
struct TokenKey {
  uint64_t hash;
  uint64_t head;
};

inline TokenKey token_key(std::string_view s, uint64_t seed) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = seed ^ (uint64_t(n) * 0x9E3779B97F4A7C15ull);
  uint64_t head = 0;
  bool first = true;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if (first) head = w, first = false;
    h = (h ^ w) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  if (n) {
    // The last 1..7 bytes, zero-padded, without reading past them: two overlapping 4-byte loads
    // for 4..7 bytes, three single bytes (first, middle, last) for 1..3.
    uint64_t w;
    if (n >= 4) {
      uint32_t lo, hi;
      std::memcpy(&lo, p, 4);
      std::memcpy(&hi, p + n - 4, 4);
      w = uint64_t(lo) | (uint64_t(hi) << (8 * (n - 4)));
    } else {
      const auto* u = reinterpret_cast<const unsigned char*>(p);
      w = uint64_t(u[0]) | (uint64_t(u[n / 2]) << (8 * (n / 2))) | (uint64_t(u[n - 1]) << (8 * (n - 1)));
    }
    if (first) head = w;
    h = (h ^ w) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
  }
  h *= 0x9FB21C651E98DF25ull;
  return {h ^ (h >> 29), head};
}

class TokenTable {
 public:
  static constexpr uint32_t npos = UINT32_MAX;
  struct Entry {
    std::string_view text;
    int64_t id;  // < 0: spelled in the file but not a token (a vocabulary entry with a malformed id)
  };

  TokenTable() : seed_(token_hash_seed()) {}

  TokenKey key(std::string_view s) const { return token_key(s, seed_); }

  void reserve(size_t n) {
    entries_.reserve(n);
    if (slot_count_for(n) > slot_count_) rehash(slot_count_for(n));
  }

  // Index of the entry spelled `s` (whatever its id), or npos. A text of up to 8 bytes is
  // compared in the slot itself; a longer one also reads its entry.
  uint32_t index_of(std::string_view s, TokenKey k) const {
    if (slot_count_ == 0) return npos;
    for (size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.index1 == 0) return npos;
      if (slot.head == k.head && slot.len == uint32_t(s.size()) &&
          (s.size() <= 8 || entries_[slot.index1 - 1].text.substr(8) == s.substr(8)))
        return slot.index1 - 1;
    }
  }
  uint32_t index_of(std::string_view s) const { return index_of(s, key(s)); }

  // Starts loading the slot a lookup of `k` begins at. Lookups in a fresh table miss the cache;
  // issuing several of them ahead overlaps those misses.
  void prefetch(TokenKey k) const {
    if (slot_count_) __builtin_prefetch(&slots_[k.hash & mask_]);
  }

  // The second and third steps of a prefetched lookup (after prefetch(k) has brought the slot
  // in): the entry the first slot matching k's head and length points at, and then, for a text
  // longer than 8 bytes, the rest of that entry's text, which the lookup will compare.
  void prefetch_entry(TokenKey k, size_t len) const {
    const uint32_t e = candidate(k, len);
    if (e != npos) __builtin_prefetch(&entries_[e]);
  }
  void prefetch_text(TokenKey k, size_t len) const {
    if (len <= 8) return;
    const uint32_t e = candidate(k, len);
    if (e != npos) __builtin_prefetch(entries_[e].text.data() + 8);
  }

  // True when entry `index` is a token spelled a + b (checks a guess without hashing).
  bool token_at_is(uint32_t index, std::string_view a, std::string_view b) const {
    if (index >= entries_.size()) return false;
    const Entry& e = entries_[index];
    return e.id >= 0 && e.text.size() == a.size() + b.size() && e.text.substr(0, a.size()) == a &&
           e.text.substr(a.size()) == b;
  }

  // The token spelled `s`, or nullptr.
  const Entry* find(std::string_view s) const {
    uint32_t i = index_of(s);
    return i != npos && entries_[i].id >= 0 ? &entries_[i] : nullptr;
  }
  bool contains(std::string_view s, TokenKey k) const {
    uint32_t i = index_of(s, k);
    return i != npos && entries_[i].id >= 0;
  }
  bool contains(std::string_view s) const { return contains(s, key(s)); }

  // Adds `s` when it is not spelled yet; {index, true} when added, {existing index, false} else.
  std::pair<uint32_t, bool> insert(std::string_view s, TokenKey k, int64_t id) {
    if (slot_count_for(entries_.size() + 1) > slot_count_) rehash(slot_count_for(entries_.size() + 1) * 2);
    size_t i = k.hash & mask_;
    for (;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.index1 == 0) break;
      if (slot.head == k.head && slot.len == uint32_t(s.size()) &&
          (s.size() <= 8 || entries_[slot.index1 - 1].text.substr(8) == s.substr(8)))
        return {slot.index1 - 1, false};
    }
    entries_.push_back({s, id});
    slots_[i] = Slot{k.head, uint32_t(s.size()), uint32_t(entries_.size())};
    if (id >= 0) ++live_;
    return {uint32_t(entries_.size() - 1), true};
  }
  std::pair<uint32_t, bool> insert(std::string_view s, int64_t id) { return insert(s, key(s), id); }

  // Bulk loading of an empty table, for a vocabulary: append() every entry in file order without touching the
  // slots, then index_appended() sizes the slots for the final count once and indexes them in
  // prefetched batches. Texts appended more than once end as insert() leaves them: the first
  // stays, at its position, with the id of the last; each repeat's text is added to `repeated`.
  void reserve_entries(size_t n) { entries_.reserve(n); }
  void append(std::string_view s, int64_t id) { entries_.push_back({s, id}); }
  void index_appended(std::vector<std::string_view>& repeated, size_t headroom) {
    const size_t n = entries_.size();
    allocate_slots(slot_count_for(n + headroom));
    live_ = 0;
    constexpr size_t kBatch = 16;
    TokenKey keys[kBatch];
    size_t kept = 0;
    for (size_t base = 0; base < n; base += kBatch) {
      size_t m = std::min(kBatch, n - base);
      for (size_t k = 0; k < m; ++k) {
        keys[k] = key(entries_[base + k].text);
        prefetch(keys[k]);
      }
      for (size_t k = 0; k < m; ++k) {
        const Entry e = entries_[base + k];
        size_t i = keys[k].hash & mask_;
        for (;; i = (i + 1) & mask_) {
          const Slot& slot = slots_[i];
          if (slot.index1 == 0) break;
          if (slot.head == keys[k].head && slot.len == uint32_t(e.text.size()) &&
              (e.text.size() <= 8 || entries_[slot.index1 - 1].text.substr(8) == e.text.substr(8)))
            break;
        }
        if (slots_[i].index1 != 0) {  // written before: the last id wins, at the first position
          set_id(slots_[i].index1 - 1, e.id);
          repeated.push_back(e.text);
          continue;
        }
        entries_[kept] = e;
        slots_[i] = Slot{keys[k].head, uint32_t(e.text.size()), uint32_t(kept + 1)};
        live_ += e.id >= 0;
        ++kept;
      }
    }
    entries_.resize(kept);
  }

  void set_id(uint32_t index, int64_t id) {
    Entry& e = entries_[index];
    live_ += (id >= 0) - (e.id >= 0);
    e.id = id;
  }

  const Entry& entry(uint32_t index) const { return entries_[index]; }
  const std::vector<Entry>& entries() const { return entries_; }  // insertion order
  size_t size() const { return live_; }  // tokens (entries with an id)

 private:
  struct Slot {
    uint64_t head = 0;    // the text's first 8 bytes, zero-padded
    uint32_t len = 0;     // its length (mod 2^32: texts over 8 bytes compare the rest anyway)
    uint32_t index1 = 0;  // entry index + 1; 0 = empty
  };

  // Load factor at most 2/3: 150k tokens take 2^18 slots (4 MiB). Every page of a fresh table
  // is a page fault, which costs more than the longer probes (slots are 4 to a cache line).
  static size_t slot_count_for(size_t n) {
    size_t c = 64;
    while (c < n + n / 2 + 1) c *= 2;
    return c;
  }
  void allocate_slots(size_t count) {
    // calloc: fresh memory comes zeroed from the kernel, so the slots are not written twice.
    slots_.reset(static_cast<Slot*>(std::calloc(count, sizeof(Slot))));
    if (!slots_) throw std::bad_alloc();
    slot_count_ = count;
    mask_ = count - 1;
  }
  void rehash(size_t count) {
    allocate_slots(count);
    for (size_t k = 0; k < entries_.size(); ++k) {
      const Entry& e = entries_[k];
      TokenKey key = token_key(e.text, seed_);
      size_t i = key.hash & mask_;
      while (slots_[i].index1 != 0) i = (i + 1) & mask_;
      slots_[i] = Slot{key.head, uint32_t(e.text.size()), uint32_t(k + 1)};
    }
  }

  uint32_t candidate(TokenKey k, size_t len) const {
    if (slot_count_ == 0) return npos;
    for (size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.index1 == 0) return npos;
      if (slot.head == k.head && slot.len == uint32_t(len)) return slot.index1 - 1;
    }
  }

  uint64_t seed_;
  struct Free {
    void operator()(Slot* p) const { std::free(p); }
  };
  std::unique_ptr<Slot[], Free> slots_;  // all-zero bytes = an empty slot
  size_t slot_count_ = 0;
  std::vector<Entry> entries_;  // insertion order
  size_t mask_ = 0;
  size_t live_ = 0;
};

}  // namespace ckpt::tok
