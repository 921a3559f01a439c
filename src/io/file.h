// Read-only file access. Nothing in ckpt opens a checkpoint file for writing.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ckpt::io {

// An open read-only descriptor (closed on destruction).
class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
  ReadOnlyFile& operator=(ReadOnlyFile&& o) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  // Opens without following a final symlink when no_follow is set. Returns an error text or "".
  std::string open(const std::filesystem::path& p, bool no_follow = false);
  bool is_open() const { return fd_ >= 0; }
  uint64_t size() const { return size_; }
  // Reads exactly n bytes at offset (fewer only at EOF); returns bytes read or -1 with errno text.
  int64_t read_at(uint64_t offset, void* buf, uint64_t n, std::string* error = nullptr) const;

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Reads a whole (small) file, refusing files larger than max_bytes. Returns error text or "".
std::string read_file(const std::filesystem::path& p, uint64_t max_bytes, std::string& out);

// "" when size is within max_bytes, else the error text every size-limited reader reports.
std::string size_limit_error(uint64_t size, uint64_t max_bytes);

// Reads up to n leading bytes.
std::string read_prefix(const std::filesystem::path& p, uint64_t n, std::string& out);

}  // namespace ckpt::io
