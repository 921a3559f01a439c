// The data pass behind `ckpt verify --deep` (the HS family): one sequential, read-only pass
// per file that hashes the whole content (when there is a digest to compare with) and scans
// float tensors for NaN / Inf / all-zero values, on a small thread pool with bounded memory.
// Internal to src/checks; hashes.cpp turns the results into findings.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "hub/hash.h"

namespace ckpt::checks::deep {

inline constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

// What a scan found in one tensor (or, while running, in one part of it).
struct ScanResult {
  uint64_t elements = 0;            // complete elements scanned (fewer than numel when the file ends early)
  uint64_t nan = 0, inf = 0;
  uint64_t first_nan = kNone, first_inf = kNone;  // flat element indexes
  bool nonzero = false;             // some element is not ±0
  void merge(const ScanResult& o);
};

// Float dtypes whose NaN/Inf bit patterns the scan knows: F16, BF16, F32, F64, F8_E4M3,
// F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0 (NaN only). Everything else is skipped.
bool scannable(st::DType d);
bool has_zero_value(st::DType d);  // false for F8_E8M0 (exponent-only scales: no zero)

// Reverses the bytes of each of `count` elements of `size` bytes in place.
void byteswap_elements(std::byte* p, uint64_t count, uint32_t size);

// Scan `count` little-endian elements of `d` starting at `p`; `first_index` is the flat index
// of the first one (for first_nan / first_inf). Bit patterns only, never float compares.
void scan_elements(st::DType d, const std::byte* p, uint64_t count, uint64_t first_index, ScanResult& r);

struct TensorSpan {
  st::DType dtype = st::DType::F32;
  uint64_t offset = 0;  // absolute file offset of the first byte
  uint64_t nbytes = 0;  // numel × element size (whole-byte dtypes only)
  bool byteswap = false;  // the elements are stored big-endian (a torch zip with byteorder "big")
};

struct FileJob {
  std::filesystem::path path;      // opened read-only, never through a final symlink
  hub::detail::EtagKind hash = hub::detail::EtagKind::opaque;  // digest to compute over the whole file
  std::vector<TensorSpan> tensors;
};

struct FileResult {
  bool opened = false;
  uint64_t size = 0;         // at open time
  std::string digest;        // hex, when hashed and fully read
  std::string error;         // open/read failure ("" when fine)
  uint64_t error_offset = 0;
  uint64_t bytes_read = 0;
  std::vector<ScanResult> tensors;  // parallel to FileJob::tensors
};

struct Options {
  unsigned threads = 0;            // 0 = hardware concurrency
  size_t read_bytes = 256u << 10;  // one pread, hashed and scanned while it is still in L2
  uint64_t split_bytes = 64u << 20;  // unhashed files are scanned in ranges of about this size
  // For a progress display (ckpt verify --deep): bytes to read, set before the pass, and read.
  std::atomic<uint64_t>* planned = nullptr;
  std::atomic<uint64_t>* done = nullptr;
};

struct Stats {
  uint64_t bytes_read = 0;
  unsigned threads = 0;
  size_t work_items = 0;
};

std::vector<FileResult> run(const std::vector<FileJob>& jobs, const Options& opts = {}, Stats* stats = nullptr);

// True when the whole filesystem blocks inside [offset, offset+len) hold no data (a hole in a
// sparse file); false when the range spans no whole block or the filesystem cannot tell.
bool is_hole(const std::filesystem::path& p, uint64_t offset, uint64_t len);

}  // namespace ckpt::checks::deep
