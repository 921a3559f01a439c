// Content hashes the hub uses as etags: sha256 (LFS, 64 hex) and the git blob sha1
// (sha1("blob <size>\0" + content), 40 hex).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace ckpt::hub::detail {

enum class EtagKind { sha256, git_sha1, opaque };
EtagKind etag_kind(std::string_view etag);  // by shape: 64 or 40 lowercase hex

class Hasher {
 public:
  // For git_sha1, `size` is the blob size that goes into the "blob <size>\0" prefix.
  Hasher(EtagKind kind, uint64_t size);
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void update(const void* data, size_t n);
  std::string hex_digest();  // finishes the hash

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Feed bytes [from, to) of a file into `h` (not finished). False on a read error (*error set).
bool hash_file_range(const std::filesystem::path& p, Hasher& h, uint64_t from, uint64_t to, std::string* error);

// Hash the first `size` bytes of a file. Returns "" on read error (*error set).
std::string hash_file(const std::filesystem::path& p, EtagKind kind, uint64_t size, std::string* error,
                      uint64_t start_offset = 0, Hasher* continue_from = nullptr);

// Raw 20-byte SHA-1 digest of a string (not hex).
std::string sha1_bytes(std::string_view s);

}  // namespace ckpt::hub::detail
