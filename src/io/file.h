// Read-only file access. Nothing in ckpt opens a checkpoint file for writing.
#pragma once
#include <algorithm>
#include <atomic>
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

// A whole file read in parts by several threads: copying a large file out of the page cache
// (a 17 MB tokenizer.json: 8 ms) is otherwise the longest single task of a parallel phase.
// open_and_size() (one task, queued before the parts; it never throws) opens the file and
// sizes `out`; read_part(k) (any thread; it waits until open_and_size has returned) copies
// part k; finish(), once every part is read, leaves in `out` what one read_file would: the
// bytes up to where the file ended (a file that shrank while read ends at its first short
// part), or an error text.
class PartedRead {
 public:
  static size_t parts_for(uint64_t size, uint64_t part_bytes) {
    return size <= part_bytes ? 1 : static_cast<size_t>((size + part_bytes - 1) / part_bytes);
  }
  // `parts`: the count the tasks were made for (parts_for of the size seen before); the last
  // part takes whatever the open file holds beyond the others.
  PartedRead(size_t parts, uint64_t part_bytes) : part_bytes_(part_bytes), got_(parts, 0), errors_(parts) {}

  // `spare_capacity`: bytes reserved beyond the file's (simdjson's padding, for parsing in place).
  void open_and_size(const std::filesystem::path& p, uint64_t max_bytes, std::string& out, size_t spare_capacity = 0);
  void wait_sized() const { sized_.wait(false, std::memory_order_acquire); }
  void read_part(size_t k);
  std::string finish();
  size_t parts() const { return got_.size(); }

 private:
  uint64_t begin_of(size_t k) const { return k * part_bytes_; }
  uint64_t end_of(size_t k) const { return k + 1 == got_.size() ? size_ : std::min(size_, (k + 1) * part_bytes_); }

  uint64_t part_bytes_;
  ReadOnlyFile file_;
  std::string* out_ = nullptr;
  uint64_t size_ = 0;
  std::string open_error_;
  std::atomic<bool> sized_{false};
  std::vector<int64_t> got_;  // bytes read per part (-1: an error, in errors_)
  std::vector<std::string> errors_;
};

// "" when size is within max_bytes, else the error text every size-limited reader reports.
std::string size_limit_error(uint64_t size, uint64_t max_bytes);

// Reads up to n leading bytes.
std::string read_prefix(const std::filesystem::path& p, uint64_t n, std::string& out);

}  // namespace ckpt::io
