#pragma once
// Storage for many small strings copied out of a buffer that is about to be reused: blocks
// that never move, so views into them stay valid for the arena's lifetime, and one allocation
// per block instead of one per string.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace ckpt::io {

class StringArena {
 public:
  explicit StringArena(size_t block_bytes = 64u << 10) : block_bytes_(block_bytes) {}

  // n bytes, left uninitialised (the caller writes them: zero-filling would touch every page
  // twice).
  char* allocate(size_t n) {
    if (capacity_ - used_ < n) {
      const size_t size = std::max(n, block_bytes_);
      blocks_.emplace_back(new char[size]);
      used_ = 0;
      capacity_ = size;
    }
    char* out = blocks_.back().get() + used_;
    used_ += n;
    return out;
  }
  // A copy of s. Never a null data() pointer, even for an empty s (memcpy and hashing of
  // views with a null pointer are undefined behaviour).
  std::string_view copy(std::string_view s) {
    if (s.empty()) return std::string_view("", 0);
    char* out = allocate(s.size());
    std::memcpy(out, s.data(), s.size());
    return std::string_view(out, s.size());
  }

 private:
  size_t block_bytes_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t used_ = 0, capacity_ = 0;
};

}  // namespace ckpt::io
