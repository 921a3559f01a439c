// A bounded 7z reader, only far enough to scan what a 7z archive holds: the (possibly
// encoded) header, its folders (single-coder copy, LZMA or LZMA2, decoded by liblzma) and
// the sub-streams each folder unpacks to. Scanners have been bypassed by pickles shipped
// inside 7z archives (picklescan extracts them), so ckpt looks inside too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/zip.h"

namespace ckpt::sevenzip {

inline constexpr uint64_t kMaxHeaderBytes = 16ull << 20;

// The unpacked streams (files) of the archive, in order, each capped at `cap` bytes. Returns an
// error text ("" on success); streams decoded before an error are kept.
std::string read_streams(const zip::Source& src, uint64_t cap, std::vector<std::string>& streams);

bool looks_like_7z(std::string_view prefix);

}  // namespace ckpt::sevenzip
