#include "format/sevenzip.h"

#include <lzma.h>

#include "io/checked.h"

namespace ckpt::sevenzip {

namespace {

enum : uint8_t {
  kEnd = 0x00, kHeader = 0x01, kArchiveProperties = 0x02, kAdditionalStreamsInfo = 0x03, kMainStreamsInfo = 0x04,
  kFilesInfo = 0x05, kPackInfo = 0x06, kUnPackInfo = 0x07, kSubStreamsInfo = 0x08, kSize = 0x09, kCRC = 0x0A,
  kFolder = 0x0B, kCodersUnPackSize = 0x0C, kNumUnPackStream = 0x0D, kEncodedHeader = 0x17,
};

struct Bad {
  std::string why;
};

class Bytes {
 public:
  explicit Bytes(const std::string& b) : b_(b) {}
  uint8_t byte() {
    if (at_ >= b_.size()) throw Bad{"header ends early"};
    return static_cast<uint8_t>(b_[at_++]);
  }
  // 7z's variable-length NUMBER: the leading one bits of the first byte count the extra bytes.
  uint64_t number() {
    const uint8_t first = byte();
    uint8_t mask = 0x80;
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) {
      if ((first & mask) == 0) {
        const uint64_t high = first & (mask - 1u);
        return value | (high << (8 * i));
      }
      value |= static_cast<uint64_t>(byte()) << (8 * i);
      mask >>= 1;
    }
    return value;
  }
  void skip(uint64_t n) {
    if (n > b_.size() - at_) throw Bad{"header ends early"};
    at_ += static_cast<size_t>(n);
  }
  std::string take(uint64_t n) {
    if (n > b_.size() - at_) throw Bad{"header ends early"};
    std::string s = b_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return s;
  }
  void bits(uint64_t n, std::vector<bool>& out) {
    out.assign(static_cast<size_t>(n), false);
    uint8_t cur = 0, mask = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (mask == 0) {
        cur = byte();
        mask = 0x80;
      }
      out[static_cast<size_t>(i)] = cur & mask;
      mask >>= 1;
    }
  }

 private:
  const std::string& b_;
  size_t at_ = 0;
};

struct Coder {
  std::string id, props;
  uint64_t in = 1, out = 1;
};
struct Folder {
  std::vector<Coder> coders;
  std::vector<uint64_t> unpack_sizes;
  uint64_t substreams = 1;
  std::vector<uint64_t> substream_sizes;
};
struct StreamsInfo {
  uint64_t pack_pos = 0;
  std::vector<uint64_t> pack_sizes;
  std::vector<Folder> folders;
};

constexpr uint64_t kMaxItems = 1u << 16;

void digests(Bytes& b, uint64_t n) {
  if (n > kMaxItems) throw Bad{"too many digests"};
  const uint8_t all = b.byte();
  std::vector<bool> defined(static_cast<size_t>(n), true);
  if (!all) b.bits(n, defined);
  for (bool d : defined)
    if (d) b.skip(4);
}

void read_streams_info(Bytes& b, StreamsInfo& si) {
  for (uint8_t id = b.byte(); id != kEnd; id = b.byte()) {
    if (id == kPackInfo) {
      si.pack_pos = b.number();
      const uint64_t n = b.number();
      if (n > kMaxItems) throw Bad{"too many pack streams"};
      for (uint8_t p = b.byte(); p != kEnd; p = b.byte()) {
        if (p == kSize)
          for (uint64_t i = 0; i < n; ++i) si.pack_sizes.push_back(b.number());
        else if (p == kCRC) digests(b, n);
        else throw Bad{"unexpected property in PackInfo"};
      }
    } else if (id == kUnPackInfo) {
      if (b.byte() != kFolder) throw Bad{"UnPackInfo without folders"};
      const uint64_t nf = b.number();
      if (nf > kMaxItems) throw Bad{"too many folders"};
      if (b.byte() != 0) throw Bad{"external folders are not supported"};
      si.folders.resize(static_cast<size_t>(nf));
      for (auto& f : si.folders) {
        const uint64_t nc = b.number();
        if (nc == 0 || nc > 64) throw Bad{"folder with " + std::to_string(nc) + " coders"};
        uint64_t total_out = 0, total_in = 0;
        for (uint64_t c = 0; c < nc; ++c) {
          Coder cd;
          const uint8_t flag = b.byte();
          cd.id = b.take(flag & 0x0F);
          if (flag & 0x10) {
            cd.in = b.number();
            cd.out = b.number();
            if (cd.in > 64 || cd.out > 64) throw Bad{"coder stream counts out of range"};
          }
          if (flag & 0x20) cd.props = b.take(b.number());
          total_in += cd.in;
          total_out += cd.out;
          f.coders.push_back(std::move(cd));
        }
        for (uint64_t k = 1; k < total_out; ++k) {  // bind pairs
          b.number();
          b.number();
        }
        const uint64_t packed = total_in - (total_out - 1);
        if (packed > 1)
          for (uint64_t k = 0; k < packed; ++k) b.number();
        f.unpack_sizes.resize(static_cast<size_t>(total_out));
      }
      if (b.byte() != kCodersUnPackSize) throw Bad{"missing unpack sizes"};
      for (auto& f : si.folders)
        for (auto& s : f.unpack_sizes) s = b.number();
      for (uint8_t p = b.byte(); p != kEnd; p = b.byte()) {
        if (p == kCRC) digests(b, nf);
        else throw Bad{"unexpected property in UnPackInfo"};
      }
    } else if (id == kSubStreamsInfo) {
      uint8_t p = b.byte();
      if (p == kNumUnPackStream) {
        for (auto& f : si.folders) {
          f.substreams = b.number();
          if (f.substreams > kMaxItems) throw Bad{"too many substreams"};
        }
        p = b.byte();
      }
      if (p == kSize) {
        for (auto& f : si.folders)
          for (uint64_t k = 1; k < f.substreams; ++k) f.substream_sizes.push_back(b.number());
        p = b.byte();
      }
      uint64_t with_crc = 0;
      for (auto& f : si.folders) with_crc += f.substreams;
      while (p != kEnd) {
        if (p == kCRC) digests(b, with_crc);
        else throw Bad{"unexpected property in SubStreamsInfo"};
        p = b.byte();
      }
    } else {
      throw Bad{"unexpected block in StreamsInfo"};
    }
  }
}

// A branch-converter or delta filter coder, as liblzma names it (0 when not one).
lzma_vli filter_id(const std::string& id) {
  if (id == std::string("\x03\x03\x01\x03", 4)) return LZMA_FILTER_X86;
  if (id == std::string("\x03\x03\x05\x01", 4)) return LZMA_FILTER_ARM;
  if (id == std::string("\x03\x03\x07\x01", 4)) return LZMA_FILTER_ARMTHUMB;
  if (id == std::string("\x03\x03\x02\x05", 4)) return LZMA_FILTER_POWERPC;
  if (id == std::string("\x03\x03\x04\x01", 4)) return LZMA_FILTER_IA64;
  if (id == std::string("\x03\x03\x08\x05", 4)) return LZMA_FILTER_SPARC;
  if (id == "\x03") return LZMA_FILTER_DELTA;
  return 0;
}

// Unpacks one folder from `packed`, at most cap bytes: a copy, LZMA or LZMA2 coder, optionally
// chained with branch-converter / delta filters (7-Zip's BCJ x86 on any file it guesses is code).
std::string unpack(const Folder& f, const std::string& packed, uint64_t cap, std::string& out) {
  const uint64_t want = std::min<uint64_t>(f.unpack_sizes.empty() ? cap : f.unpack_sizes.back(), cap);
  if (f.coders.size() == 1 && f.coders[0].id == std::string(1, '\0')) {
    out = packed.substr(0, static_cast<size_t>(std::min<uint64_t>(want, packed.size())));
    return {};
  }
  if (f.coders.size() > 3) return "folders with more than 3 coders are not decoded";
  lzma_filter filters[4];
  size_t n = 0;
  const Coder* compressor = nullptr;
  for (const auto& c : f.coders) {
    if (c.id == "\x21" || c.id == std::string("\x03\x01\x01", 3)) {
      if (compressor) return "a folder with two compressors is not decoded";
      compressor = &c;
      continue;
    }
    if (c.id == std::string("\x06\xF1\x07\x01", 4)) return "AES-encrypted folder";
    const lzma_vli id = filter_id(c.id);
    if (!id) return "unsupported 7z coder";
    filters[n].id = id;
    filters[n].options = nullptr;
    if (lzma_properties_decode(&filters[n], nullptr, reinterpret_cast<const uint8_t*>(c.props.data()), c.props.size()) != LZMA_OK)
      return "bad filter properties";
    ++n;
  }
  if (!compressor) return "a folder without an LZMA/LZMA2 coder is not decoded";
  filters[n].id = compressor->id == "\x21" ? LZMA_FILTER_LZMA2 : LZMA_FILTER_LZMA1;
  filters[n].options = nullptr;
  auto free_all = [&] {
    for (size_t i = 0; i <= n; ++i) free(filters[i].options);
  };
  if (lzma_properties_decode(&filters[n], nullptr, reinterpret_cast<const uint8_t*>(compressor->props.data()),
                             compressor->props.size()) != LZMA_OK) {
    free_all();
    return "bad coder properties";
  }
  filters[n + 1].id = LZMA_VLI_UNKNOWN;
  lzma_stream z = LZMA_STREAM_INIT;
  const lzma_ret init = lzma_raw_decoder(&z, filters);
  free_all();
  if (init != LZMA_OK) return "liblzma refused the coder chain";
  out.resize(static_cast<size_t>(want));
  z.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  z.avail_in = packed.size();
  z.next_out = reinterpret_cast<uint8_t*>(out.data());
  z.avail_out = out.size();
  lzma_ret rc = LZMA_OK;
  while (rc == LZMA_OK && z.avail_out > 0) {
    rc = lzma_code(&z, z.avail_in ? LZMA_RUN : LZMA_FINISH);
  }
  out.resize(out.size() - z.avail_out);
  lzma_end(&z);
  if (rc != LZMA_OK && rc != LZMA_STREAM_END && rc != LZMA_BUF_ERROR) return "compressed data is invalid";
  return {};
}

// Decodes every folder of `si` and splits them into their sub-streams.
std::string decode_all(const zip::Source& src, const StreamsInfo& si, uint64_t cap, std::vector<std::string>& streams) {
  auto pos = io::checked_add(32, si.pack_pos);
  if (!pos) return "pack position overflows";
  uint64_t at = *pos;
  size_t pack = 0;
  for (const auto& f : si.folders) {
    if (pack >= si.pack_sizes.size()) return "a folder has no packed stream";
    const uint64_t size = si.pack_sizes[pack++];
    const auto end = io::checked_add(at, size);
    if (!end || *end > src.size()) return "packed stream lies outside the file";
    std::string packed, out;
    if (size > cap) return "packed stream above the cap";
    src.read(at, size, packed);
    at = *end;
    if (auto e = unpack(f, packed, cap, out); !e.empty()) return e;
    uint64_t off = 0;
    for (uint64_t k = 0; k < f.substreams; ++k) {
      const uint64_t n = k < f.substream_sizes.size() ? f.substream_sizes[k] : out.size() - std::min<uint64_t>(off, out.size());
      if (off >= out.size()) break;
      streams.push_back(out.substr(static_cast<size_t>(off), static_cast<size_t>(std::min<uint64_t>(n, out.size() - off))));
      off += n;
    }
  }
  return {};
}

}  // namespace

bool looks_like_7z(std::string_view p) { return p.substr(0, 6) == std::string_view("7z\xBC\xAF\x27\x1C", 6); }

std::string read_streams(const zip::Source& src, uint64_t cap, std::vector<std::string>& streams) {
  std::string sig;
  src.read(0, 32, sig);
  if (sig.size() < 32 || !looks_like_7z(sig)) return "not a 7z archive";
  uint64_t next_off = 0, next_size = 0;
  for (int i = 7; i >= 0; --i) next_off = (next_off << 8) | static_cast<uint8_t>(sig[12 + i]);
  for (int i = 7; i >= 0; --i) next_size = (next_size << 8) | static_cast<uint8_t>(sig[20 + i]);
  const auto start = io::checked_add(32, next_off);
  const auto end = start ? io::checked_add(*start, next_size) : std::nullopt;
  if (!end || *end > src.size()) return "the 7z header lies outside the file (truncated archive)";
  if (next_size > kMaxHeaderBytes) return "the 7z header is above the size cap";
  std::string header;
  src.read(*start, next_size, header);
  try {
    for (int round = 0; round < 4; ++round) {
      Bytes b(header);
      const uint8_t id = b.byte();
      if (id == kEncodedHeader) {
        StreamsInfo si;
        read_streams_info(b, si);
        std::vector<std::string> decoded;
        if (auto e = decode_all(src, si, kMaxHeaderBytes, decoded); !e.empty()) return "encoded header: " + e;
        if (decoded.empty()) return "encoded header decodes to nothing";
        header = std::move(decoded[0]);
        continue;
      }
      if (id != kHeader) return "unknown 7z header block";
      uint8_t p = b.byte();
      if (p == kArchiveProperties) {
        for (uint8_t t = b.byte(); t != kEnd; t = b.byte()) b.skip(b.number());
        p = b.byte();
      }
      if (p == kAdditionalStreamsInfo) {
        StreamsInfo ignored;
        read_streams_info(b, ignored);
        p = b.byte();
      }
      if (p == kMainStreamsInfo) {
        StreamsInfo si;
        read_streams_info(b, si);
        return decode_all(src, si, cap, streams);
      }
      return {};  // no streams: empty files only
    }
    return "header encoded more than 4 times";
  } catch (const Bad& e) {
    return e.why;
  }
}

}  // namespace ckpt::sevenzip
