// libFuzzer: the zip reader (end record, zip64 locator, central directory, local headers,
// stored and deflated members with caps) on arbitrary bytes, then the scan of the archive as
// a PyTorch checkpoint. Invariants: no crash/UB, no read or inflate beyond the caps.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ckpt/pytorch.h"
#include "format/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  zip::Source src(&bytes);
  zip::Archive a = zip::read_archive(src);
  if (a.members.size() > zip::kMaxEntries) std::abort();
  constexpr uint64_t kCap = 1u << 16;
  for (const auto& m : a.members) {
    if (m.local_ok && m.data_offset > size + 65535 + 30) std::abort();
    std::string out;
    bool truncated = false;
    zip::read_member(src, m, kCap, out, &truncated);
    if (out.size() > kCap) std::abort();
  }
  pt::ScanOptions o;
  o.max_member_bytes = kCap;
  o.max_pickle_bytes = kCap;
  pt::FileScan s = pt::scan_bytes(bytes, "x.pt", o);
  if (s.file_size != size) std::abort();
  return 0;
}
