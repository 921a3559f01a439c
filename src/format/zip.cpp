#include "format/zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "io/checked.h"

namespace ckpt::zip {

namespace {

uint16_t u16(const std::string& b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) | (static_cast<uint8_t>(b[at + 1]) << 8));
}
uint32_t u32(const std::string& b, size_t at) {
  return static_cast<uint32_t>(u16(b, at)) | (static_cast<uint32_t>(u16(b, at + 2)) << 16);
}
uint64_t u64(const std::string& b, size_t at) {
  return static_cast<uint64_t>(u32(b, at)) | (static_cast<uint64_t>(u32(b, at + 4)) << 32);
}

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                   kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;

std::string hex_offset(uint64_t v) { return std::to_string(v); }

// Reads the local header of `m` (at m.header_offset) and fills local_name, local_flags,
// data_offset. Returns false (with a problem) when it is not there.
bool read_local(const Source& src, Member& m, std::vector<Problem>& problems) {
  std::string h;
  if (m.header_offset > src.size() || src.size() - m.header_offset < 30 || !src.read(m.header_offset, 30, h) ||
      h.size() < 30 || u32(h, 0) != kLocalSig) {
    problems.push_back({Issue::LocalHeaderBad, m.name,
                        "no local file header at offset " + hex_offset(m.header_offset) +
                            " (the central directory points there)",
                        m.header_offset});
    return false;
  }
  m.local_flags = u16(h, 6);
  const uint16_t nlen = u16(h, 26), xlen = u16(h, 28);
  const uint64_t name_at = m.header_offset + 30;
  if (src.size() - name_at < uint64_t(nlen) + xlen) {
    problems.push_back({Issue::LocalHeaderBad, m.name, "local file header runs past the end of the file", m.header_offset});
    return false;
  }
  if (!src.read(name_at, nlen, m.local_name)) return false;
  m.data_offset = name_at + nlen + xlen;
  m.local_ok = true;
  if (m.local_name != m.name)
    problems.push_back({Issue::NameMismatch, m.name,
                        "local header names it '" + m.local_name + "', the central directory '" + m.name + "'",
                        m.header_offset});
  return true;
}

void check_member(const Source& src, Member& m, std::vector<Problem>& problems) {
  if (m.flags & 0x41 || m.local_flags & 0x41)
    problems.push_back({Issue::Encrypted, m.name, "encryption flag set (general-purpose bits 0x1/0x40)", m.header_offset});
  const uint16_t odd = static_cast<uint16_t>((m.flags | m.local_flags) & ~(0x0001 | 0x0008 | 0x0800 | 0x0040 | 0x0006));
  if (odd)
    problems.push_back({Issue::OddFlags, m.name, "general-purpose flag bits 0x" + [&] {
                          char b[8];
                          std::snprintf(b, sizeof b, "%x", odd);
                          return std::string(b);
                        }() + " set (torch writes only 0x8 and 0x800)", m.header_offset});
  if (m.method != 0 && m.method != 8)
    problems.push_back({Issue::UnsupportedMethod, m.name,
                        "compression method " + std::to_string(m.method) + " (only methods 0, stored, and 8, deflated, are read)",
                        m.header_offset});
  if (m.local_ok) {
    const auto end = io::checked_add(m.data_offset, m.compressed_size);
    if (!end || *end > src.size())
      problems.push_back({Issue::DataPastEnd, m.name,
                          "data needs bytes [" + std::to_string(m.data_offset) + ", " +
                              (end ? std::to_string(*end) : std::string("overflow")) + ") but the file ends at " +
                              std::to_string(src.size()) + ": " +
                              (end ? std::to_string(*end - src.size()) : std::string("?")) + " bytes missing",
                          m.data_offset});
  }
}

// The end-of-central-directory record: the last "PK\5\6" whose comment ends at the file's end
// (or, failing that, any one that parses).
std::optional<uint64_t> find_end_record(const Source& src, std::string& tail, uint64_t& tail_at) {
  const uint64_t window = std::min<uint64_t>(src.size(), 22 + 65535);
  tail_at = src.size() - window;
  if (!src.read(tail_at, window, tail) || tail.size() < 22) return std::nullopt;
  std::optional<uint64_t> loose;
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (u32(tail, i) != kEndSig) continue;
    const uint16_t clen = u16(tail, i + 20);
    if (i + 22 + clen == tail.size()) return tail_at + i;
    if (!loose) loose = tail_at + i;
  }
  return loose;
}

// Walks local headers from offset 0: the archive as a streaming reader sees it.
void scan_locals(const Source& src, Archive& a) {
  uint64_t at = 0;
  std::string h;
  while (a.members.size() < kMaxEntries && src.size() - at >= 30) {
    if (!src.read(at, 30, h) || u32(h, 0) != kLocalSig) break;
    Member m;
    m.header_offset = at;
    m.flags = m.local_flags = u16(h, 6);
    m.method = u16(h, 8);
    m.crc = u32(h, 14);
    m.compressed_size = u32(h, 18);
    m.size = u32(h, 22);
    const uint16_t nlen = u16(h, 26), xlen = u16(h, 28);
    if (src.size() - at - 30 < uint64_t(nlen) + xlen) break;
    src.read(at + 30, nlen, m.name);
    m.local_name = m.name;
    m.data_offset = at + 30 + nlen + xlen;
    m.local_ok = true;
    // Streamed members (bit 3) carry their sizes after the data; without the directory the
    // data's end is unknown, so a reader of a truncated archive gets the rest of the file.
    if ((m.flags & 0x8) && m.compressed_size == 0) {
      m.size_unknown = true;
      m.compressed_size = src.size() - m.data_offset;
      m.size = m.compressed_size;
      a.members.push_back(std::move(m));
      break;
    }
    const auto next = io::checked_add(m.data_offset, m.compressed_size);
    a.members.push_back(std::move(m));
    if (!next || *next > src.size()) break;
    at = *next;
  }
}

}  // namespace

bool Source::read(uint64_t offset, uint64_t n, std::string& out) const {
  out.clear();
  if (offset >= size_) return true;
  n = std::min(n, size_ - offset);
  if (bytes_) {
    out.assign(*bytes_, static_cast<size_t>(offset), static_cast<size_t>(n));
    return true;
  }
  out.resize(static_cast<size_t>(n));
  const int64_t got = file_->read_at(offset, out.data(), n);
  if (got < 0) return false;
  out.resize(static_cast<size_t>(got));
  return true;
}

const Member* Archive::find(std::string_view name) const {
  for (const auto& m : members)
    if (m.name == name) return &m;
  return nullptr;
}

bool looks_like_zip(std::string_view p) {
  return p.size() >= 4 && p[0] == 'P' && p[1] == 'K' &&
         ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6));
}

Archive read_archive(const Source& src) {
  Archive a;
  std::string tail;
  uint64_t tail_at = 0;
  const auto end_at = find_end_record(src, tail, tail_at);
  if (!end_at) {
    a.problems.push_back({Issue::NoEndRecord, {},
                          "no end-of-central-directory record in the last " +
                              std::to_string(std::min<uint64_t>(src.size(), 22 + 65535)) +
                              " bytes: the archive is truncated or not a zip",
                          src.size()});
    scan_locals(src, a);
    a.from_local_scan = true;
    for (auto& m : a.members) check_member(src, m, a.problems);
    return a;
  }
  const size_t e = static_cast<size_t>(*end_at - tail_at);
  const uint16_t disk = u16(tail, e + 4), cd_disk = u16(tail, e + 6);
  uint64_t entries = u16(tail, e + 10);
  uint64_t cd_size = u32(tail, e + 12), cd_offset = u32(tail, e + 16);
  if (disk != 0 || cd_disk != 0)
    a.problems.push_back({Issue::MultiDisk, {}, "split (multi-disk) archive", *end_at});
  // ZIP64: a locator right before the end record points to the zip64 end record.
  if (*end_at >= 20) {
    std::string loc;
    if (src.read(*end_at - 20, 20, loc) && loc.size() == 20 && u32(loc, 0) == kLocator64Sig) {
      const uint64_t rec_at = u64(loc, 8);
      std::string rec;
      if (rec_at > src.size() || src.size() - rec_at < 56 || !src.read(rec_at, 56, rec) || u32(rec, 0) != kEnd64Sig) {
        a.problems.push_back({Issue::DirectoryOutside, {}, "zip64 locator points to offset " + std::to_string(rec_at) +
                                                               ", where there is no zip64 end record", *end_at - 20});
      } else {
        a.zip64 = true;
        entries = u64(rec, 32);
        cd_size = u64(rec, 40);
        cd_offset = u64(rec, 48);
      }
    }
  }
  a.directory_offset = cd_offset;
  a.directory_size = cd_size;
  const auto cd_end = io::checked_add(cd_offset, cd_size);
  if (!cd_end || *cd_end > src.size()) {
    a.problems.push_back({Issue::DirectoryOutside, {},
                          "central directory [" + std::to_string(cd_offset) + ", +" + std::to_string(cd_size) +
                              ") lies outside the " + std::to_string(src.size()) + "-byte file",
                          *end_at});
    scan_locals(src, a);
    a.from_local_scan = true;
    for (auto& m : a.members) check_member(src, m, a.problems);
    return a;
  }
  if (entries > kMaxEntries || cd_size > kMaxDirectoryBytes) {
    a.problems.push_back({Issue::TooManyEntries, {},
                          std::to_string(entries) + " entries / " + std::to_string(cd_size) +
                              " directory bytes, above the caps (" + std::to_string(kMaxEntries) + " entries)",
                          *end_at});
    return a;
  }
  std::string cd;
  if (!src.read(cd_offset, cd_size, cd)) return a;
  size_t at = 0;
  for (uint64_t k = 0; k < entries; ++k) {
    if (cd.size() - at < 46 || u32(cd, at) != kCentralSig) {
      a.problems.push_back({Issue::DirectoryDamaged, {},
                            "central directory entry " + std::to_string(k) + " of " + std::to_string(entries) +
                                " is missing or damaged",
                            cd_offset + at});
      break;
    }
    Member m;
    m.flags = u16(cd, at + 8);
    m.method = u16(cd, at + 10);
    m.crc = u32(cd, at + 16);
    m.compressed_size = u32(cd, at + 20);
    m.size = u32(cd, at + 24);
    const uint16_t nlen = u16(cd, at + 28), xlen = u16(cd, at + 30), clen = u16(cd, at + 32);
    m.header_offset = u32(cd, at + 42);
    if (cd.size() - at - 46 < size_t(nlen) + xlen + clen) {
      a.problems.push_back({Issue::DirectoryDamaged, {}, "central directory entry " + std::to_string(k) +
                                                             " runs past the directory's end", cd_offset + at});
      break;
    }
    m.name.assign(cd, at + 46, nlen);
    // ZIP64 extended information: the 64-bit values of the fields that hold 0xFFFFFFFF.
    size_t x = at + 46 + nlen;
    const size_t xend = x + xlen;
    while (xend - x >= 4) {
      const uint16_t id = u16(cd, x), len = u16(cd, x + 2);
      if (xend - x - 4 < len) break;
      if (id == 0x0001) {
        size_t p = x + 4;
        const size_t pend = p + len;
        auto take = [&](uint64_t& field) {
          if (field != 0xFFFFFFFFu) return;
          if (pend - p >= 8) {
            field = u64(cd, p);
            p += 8;
          }
        };
        take(m.size);
        take(m.compressed_size);
        take(m.header_offset);
        m.zip64 = true;
      }
      x += 4 + len;
    }
    at = xend + clen;
    read_local(src, m, a.problems);
    check_member(src, m, a.problems);
    a.members.push_back(std::move(m));
  }
  a.directory_ok = true;
  // Overlapping member data (a quine-style bomb, or a forged directory).
  std::vector<const Member*> by_offset;
  for (const auto& m : a.members)
    if (m.local_ok && m.compressed_size > 0) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* l, auto* r) { return l->data_offset < r->data_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const Member& p = *by_offset[i - 1];
    if (p.data_offset + p.compressed_size > by_offset[i]->header_offset && by_offset[i]->header_offset >= p.data_offset)
      a.problems.push_back({Issue::Overlap, by_offset[i]->name, "its local header lies inside the data of '" + p.name + "'",
                            by_offset[i]->header_offset});
  }
  return a;
}

std::string read_member(const Source& src, const Member& m, uint64_t cap, std::string& out, bool* truncated) {
  out.clear();
  if (truncated) *truncated = false;
  if (!m.local_ok) return "its local header could not be read";
  const uint64_t avail = m.data_offset <= src.size() ? src.size() - m.data_offset : 0;
  const uint64_t csize = std::min(m.compressed_size, avail);
  if (m.method == 0) {
    const uint64_t n = std::min(csize, cap);
    if (truncated && csize > cap) *truncated = true;
    if (!src.read(m.data_offset, n, out)) return "read error";
    return {};
  }
  if (m.method != 8) return "compression method " + std::to_string(m.method) + " is not supported";
  // Inflate in chunks, stopping at the cap: a small member may expand to any size.
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return "zlib initialisation failed";
  std::string in;
  uint64_t pos = 0;
  constexpr uint64_t kChunk = 1u << 20;
  int rc = Z_OK;
  char buf[1 << 16];
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      if (pos >= csize) break;
      if (!src.read(m.data_offset + pos, std::min(kChunk, csize - pos), in)) {
        inflateEnd(&z);
        return "read error";
      }
      pos += in.size();
      z.next_in = reinterpret_cast<Bytef*>(in.data());
      z.avail_in = static_cast<uInt>(in.size());
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      inflateEnd(&z);
      return std::string("deflate data is invalid (") + (z.msg ? z.msg : "zlib error") + ")";
    }
    const size_t produced = sizeof buf - z.avail_out;
    if (out.size() + produced > cap) {
      out.append(buf, static_cast<size_t>(cap - out.size()));
      if (truncated) *truncated = true;
      break;
    }
    out.append(buf, produced);
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && pos >= csize) break;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END && !(truncated && *truncated)) return "deflate stream ends early";
  return {};
}

}  // namespace ckpt::zip
