// A read-only zip reader for PyTorch checkpoints (and .npz, nested archives): the central
// directory, each member's local header, stored and deflated members. Every size read from
// the file is checked against the file before it is used; nothing is decompressed beyond a
// caller's cap. Layout oddities (encryption bits, zip64, names that disagree between the
// local header and the directory) are reported as problems, never thrown.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/file.h"

namespace ckpt::zip {

// Where a zip's bytes come from: a file (read on demand) or bytes already in memory (a
// member of another archive).
class Source {
 public:
  explicit Source(const io::ReadOnlyFile* file) : file_(file), size_(file->size()) {}
  explicit Source(const std::string* bytes) : bytes_(bytes), size_(bytes->size()) {}
  uint64_t size() const { return size_; }
  // Reads [offset, offset + n) clipped to the end; false on an I/O error.
  bool read(uint64_t offset, uint64_t n, std::string& out) const;

 private:
  const io::ReadOnlyFile* file_ = nullptr;
  const std::string* bytes_ = nullptr;
  uint64_t size_ = 0;
};

enum class Issue : uint8_t {
  NoEndRecord,        // no end-of-central-directory record: truncated or not a complete zip
  DirectoryOutside,   // central directory (or zip64 record) lies outside the file
  DirectoryDamaged,   // an entry's signature or lengths are wrong
  LocalHeaderBad,     // local header missing / wrong signature / outside the file
  NameMismatch,       // local header name != central directory name
  DataPastEnd,        // member data reaches beyond the end of the file
  Encrypted,          // flag bit 0 (or strong encryption bit 6) set
  OddFlags,           // flag bits torch never writes (0x20, 0x40, ...)
  UnsupportedMethod,  // compression other than stored / deflate
  MultiDisk,          // split archive
  Overlap,            // two members' data overlap
  TooManyEntries,     // above the entry cap
  Count_
};

struct Problem {
  Issue issue;
  std::string member;  // empty when about the archive
  std::string detail;
  uint64_t offset = 0;
};

struct Member {
  std::string name;        // central directory name
  std::string local_name;  // local header name (the one scanned when they disagree)
  uint64_t header_offset = 0;
  uint64_t data_offset = 0;  // first byte of the (compressed) data
  uint64_t compressed_size = 0;
  uint64_t size = 0;         // uncompressed
  uint32_t crc = 0;
  uint16_t method = 0;       // 0 stored, 8 deflate
  uint16_t flags = 0;        // central directory general-purpose flags
  uint16_t local_flags = 0;
  bool zip64 = false;
  bool local_ok = false;     // local header read and data_offset known
  bool size_unknown = false; // local scan of a streamed member: sizes run to the end of the file
  bool encrypted() const { return (flags & 0x1) || (local_flags & 0x1); }
};

struct Archive {
  bool directory_ok = false;  // end record + central directory read
  bool from_local_scan = false;  // no directory: members found by walking local headers
  bool zip64 = false;
  uint64_t directory_offset = 0, directory_size = 0;
  std::vector<Member> members;
  std::vector<Problem> problems;
  const Member* find(std::string_view name) const;
};

inline constexpr uint32_t kMaxEntries = 1u << 20;
inline constexpr uint64_t kMaxDirectoryBytes = 256ull << 20;

bool looks_like_zip(std::string_view prefix);  // "PK\3\4" (or an empty archive's "PK\5\6")

// Reads the central directory and every member's local header. Without an end record, walks
// the local headers from the start (what a scanner must still see of a truncated archive).
Archive read_archive(const Source& src);

// A member's bytes, at most `cap` of them (decompressed for deflate). Sets `truncated` when the
// member holds more than the cap; returns an error text, or "" on success.
std::string read_member(const Source& src, const Member& m, uint64_t cap, std::string& out,
                        bool* truncated = nullptr);

}  // namespace ckpt::zip
