// The static scan of a PyTorch-style file: which container it is (by content, never by name),
// every pickle in it read symbolically, every import recorded with its member and offset, and
// for torch checkpoints the storages and tensors the object pickle names.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "format/pytorch_internal.h"
#include "format/sevenzip.h"
#include "format/zip.h"
#include "io/checked.h"
#include "io/file.h"

namespace ckpt::pt {

namespace {

// pickle 1 of the legacy stream: PROTO 2, LONG1 of 0x1950A86A20F9469CFC6C, STOP.
constexpr std::string_view kLegacyMagicText = "0x1950a86a20f9469cfc6c";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

class Scanner {
 public:
  Scanner(const ScanOptions& o, FileScan& out) : opts_(o), out_(out) {}

  void scan_top(const zip::Source& src) {
    out_.file_size = src.size();
    std::string head;
    src.read(0, 64, head);
    if (zip::looks_like_zip(head)) return scan_zip(src, "", 0, true);
    if (starts_with(head, "\x93NUMPY")) {
      out_.container = Container::Npy;
      return scan_npy(src, 0, src.size(), "");
    }
    if (sevenzip::looks_like_7z(head)) {
      out_.container = Container::SevenZip;
      return scan_7z(src);
    }
    if (starts_with(head, "PYTORCH1")) {
      out_.container = Container::Preview;
      out_.notes.push_back({NoteKind::Unsupported, "", 0,
                            "the PYTORCH1 preview container, which torch itself refuses (\"unsupported archive format from the preview release\")"});
      return;
    }
    if (!pickle::looks_like_pickle(head)) return;
    scan_stream(src, 0, src.size(), "", true);
  }

 private:
  const ScanOptions& opts_;
  FileScan& out_;

  // Reads one pickle at [at, end) of src, growing the window while the reader runs out of
  // bytes: the pickles of a 10 GB legacy file are read without reading its storages.
  pickle::Result read_one(const zip::Source& src, uint64_t at, uint64_t end, uint64_t base) {
    uint64_t window = 64u << 10;
    std::string buf;
    while (true) {
      const uint64_t n = std::min(window, end - at);
      src.read(at, n, buf);
      pickle::Result r = pickle::read(buf, at - base);
      if (r.stopped || !r.ran_out || n == end - at || n >= opts_.max_pickle_bytes) {
        if (!r.stopped && r.ran_out && n < end - at && n >= opts_.max_pickle_bytes) {
          r.limit_hit = true;
          r.error = "pickle longer than the " + std::to_string(opts_.max_pickle_bytes) + "-byte cap";
        }
        out_.pickle_bytes += r.end - (at - base);
        return r;
      }
      window *= 4;
    }
  }

  // Records what a pickle's reading found. Returns true when it counts as a pickle (it reached
  // STOP, or it imported something before failing).
  bool record(const pickle::Result& r, const std::string& member) {
    const bool counts = r.stopped || !r.globals.empty();
    if (!counts) return false;
    for (const auto& g : r.globals)
      out_.imports.push_back({member, g.offset, g.module, g.name, g.resolved, g.how, g.why_unresolved});
    for (const auto& e : r.events)
      if (e.type == pickle::Event::BuildOnGlobal) {
        const auto& g = r.at(e.node);
        out_.notes.push_back({NoteKind::BuildOnImport, member, e.offset,
                              "BUILD sets attributes on the imported " + g.text + "." + g.text2});
      }
    for (uint64_t f : r.frame_mismatches)
      out_.notes.push_back({NoteKind::FrameMismatch, member, f, "a FRAME's length does not end on an opcode boundary"});
    if (!r.stopped)
      out_.notes.push_back({r.limit_hit ? NoteKind::PickleLimit : NoteKind::PickleError, member, r.error_offset, r.error});
    out_.max_protocol = std::max({out_.max_protocol, r.protocol, r.max_opcode_protocol});
    return true;
  }

  // Concatenated pickles over [begin, end): every one is read, and junk after them noted.
  // Returns the first pickle's result when `keep_first` (the object of a raw torch pickle).
  void scan_stream(const zip::Source& src, uint64_t begin, uint64_t end, const std::string& member, bool top) {
    uint64_t at = begin;
    size_t count = 0;
    std::string head;
    while (at < end && count < 4096) {
      src.read(at, 2, head);
      if (!pickle::looks_like_pickle(head)) {
        if (count > 0) out_.notes.push_back({NoteKind::TrailingBytes, member, at - begin,
                                             std::to_string(end - at) + " bytes after the last pickle are not a pickle"});
        break;
      }
      pickle::Result r = read_one(src, at, end, begin);
      if (top && count == 0 && r.stopped && is_legacy_magic(r)) return scan_legacy(src, r);
      if (!record(r, member)) {
        if (count > 0) out_.notes.push_back({NoteKind::TrailingBytes, member, at - begin,
                                             std::to_string(end - at) + " bytes after the last pickle are not a pickle"});
        break;
      }
      if (top && count == 0) {
        out_.container = Container::RawPickle;
        // A raw pickle of a state_dict (no torch framing) still names tensors.
        extract_tensors(r, out_);
        out_.weights_read = r.stopped && !out_.tensors.empty();
      }
      ++count;
      if (!r.stopped) break;
      at = begin + (r.end);
    }
  }

  static bool is_legacy_magic(const pickle::Result& r) {
    const auto& v = r.at(r.root);
    return v.kind == pickle::Kind::BigInt && v.text == kLegacyMagicText;
  }

  void structure(std::string detail, uint64_t offset = 0, std::string member = {}) {
    out_.notes.push_back({NoteKind::Structure, std::move(member), offset, std::move(detail)});
  }

  // torch < 1.6: magic, protocol, sys_info, object, sorted keys, then the storages.
  void scan_legacy(const zip::Source& src, const pickle::Result& magic) {
    out_.container = Container::Legacy;
    record(magic, "");
    uint64_t at = magic.end;
    pickle::Result parts[4];
    const char* what[4] = {"protocol version", "sys_info", "object", "storage key list"};
    for (int k = 0; k < 4; ++k) {
      if (at >= src.size()) {
        structure(std::string("the file ends before the legacy ") + what[k] + " pickle", at);
        return;
      }
      parts[k] = read_one(src, at, src.size(), 0);
      record(parts[k], "");
      if (!parts[k].stopped) {
        structure(std::string("the legacy ") + what[k] + " pickle is unreadable: " + parts[k].error, parts[k].error_offset);
        return;
      }
      at = parts[k].end;
    }
    const auto& proto = parts[0].at(parts[0].root);
    out_.version = proto.kind == pickle::Kind::Int ? std::to_string(proto.i) : "?";
    if (proto.kind != pickle::Kind::Int || proto.i != 1001)
      structure("legacy protocol version is " + out_.version + ", torch requires 1001 (\"Invalid protocol version\")", magic.end);
    // The storages of a legacy stream are little-endian whatever sys_info's little_endian says
    // (that is the writing host): THPStorage_writeFileRaw converts to little-endian on write and
    // THPStorage_readFileRaw converts back on a big-endian host (torch/csrc/serialization.cpp).
    out_.byteorder = "little";
    extract_tensors(parts[2], out_);
    out_.weights_read = true;
    // The storages follow in the order of the key list: int64 count, then count x itemsize bytes.
    const auto& keys = parts[3].at(parts[3].root);
    if (keys.kind != pickle::Kind::List) {
      structure("the legacy storage key list is not a list", parts[2].end);
      return;
    }
    for (uint32_t kn : keys.items) {
      const auto& kv = parts[3].at(kn);
      const std::string key = kv.kind == pickle::Kind::Str ? kv.text : "<non-string key>";
      auto it = std::find_if(out_.storages.begin(), out_.storages.end(), [&](const Storage& s) { return s.key == key; });
      if (it == out_.storages.end()) {
        structure("the key list names storage '" + key + "', which no tensor declares (torch asserts on it)", at);
        return;
      }
      std::string cnt;
      if (src.size() - std::min(at, src.size()) < 8) {
        structure("the file ends at " + std::to_string(src.size()) + " before storage '" + key + "' (its element count at offset " +
                      std::to_string(at) + ")",
                  at);
        return;
      }
      src.read(at, 8, cnt);
      uint64_t c = 0;
      for (size_t i = 8; i-- > 0;) c = (c << 8) | static_cast<uint8_t>(cnt[i]);
      it->legacy_count = static_cast<int64_t>(c);
      it->present = true;
      it->data_offset = at + 8;
      const auto bytes = io::checked_mul(c, std::max<uint32_t>(it->itemsize, 1));
      it->bytes = bytes ? *bytes : UINT64_MAX;
      it->available = std::min(it->bytes, src.size() - it->data_offset);
      const auto next = bytes ? io::checked_add(it->data_offset, *bytes) : std::nullopt;
      if (!next || *next > src.size()) return;  // the structural checks report the shortfall
      at = *next;
    }
    if (at < src.size())
      structure(std::to_string(src.size() - at) + " bytes follow the last storage (a legacy file ends right after it)", at);
  }

  void scan_npy(const zip::Source& src, uint64_t begin, uint64_t end, const std::string& member) {
    std::string h;
    src.read(begin, 12, h);
    if (h.size() < 10) return;
    const uint8_t major = static_cast<uint8_t>(h[6]);
    uint64_t hlen = 0, hstart = 0;
    if (major == 1) {
      hlen = static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8);
      hstart = 10;
    } else if (h.size() >= 12) {
      hlen = static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8) | (static_cast<uint32_t>(static_cast<uint8_t>(h[10])) << 16) |
             (static_cast<uint32_t>(static_cast<uint8_t>(h[11])) << 24);
      hstart = 12;
    }
    if (hlen > 1u << 20 || end - begin < hstart + hlen) {
      out_.notes.push_back({NoteKind::Unsupported, member, 0, ".npy header length " + std::to_string(hlen) + " is not within the file"});
      return;
    }
    std::string header;
    src.read(begin + hstart, hlen, header);
    // An object dtype ('|O', or a structured dtype holding an 'O' field) means a pickle follows.
    if (header.find("'O'") == std::string::npos && header.find("|O") == std::string::npos && header.find("<O") == std::string::npos)
      return;
    const uint64_t at = begin + hstart + hlen;
    std::string head;
    src.read(at, 2, head);
    if (pickle::looks_like_pickle(head)) {
      // offsets inside the .npy member, from its start
      const uint64_t mark = out_.imports.size();
      scan_stream(src, at, end, member, false);
      for (size_t i = mark; i < out_.imports.size(); ++i) out_.imports[i].offset += hstart + hlen;
    }
  }

  // 7z: torch cannot load it, but a scanner that skips it misses the pickle inside.
  void scan_7z(const zip::Source& src) {
    std::vector<std::string> streams;
    const std::string err = sevenzip::read_streams(src, opts_.max_member_bytes, streams);
    for (size_t k = 0; k < streams.size(); ++k) {
      const std::string name = "7z stream " + std::to_string(k);
      const std::string& bytes = streams[k];
      zip::Source inner(&bytes);
      std::string head = bytes.substr(0, 16);
      if (zip::looks_like_zip(head)) scan_zip(inner, name + "!", 1, false);
      else if (starts_with(head, "\x93NUMPY")) scan_npy(inner, 0, bytes.size(), name);
      else if (pickle::looks_like_pickle(head)) scan_stream(inner, 0, bytes.size(), name, false);
    }
    if (!err.empty())
      out_.notes.push_back({NoteKind::Unsupported, "", 0, "7z archive only partly inspected: " + err});
  }

  void zip_problem(const zip::Problem& p, const std::string& prefix) {
    using zip::Issue;
    NoteKind k = NoteKind::ZipLayout;
    switch (p.issue) {
      case Issue::NoEndRecord: case Issue::DirectoryOutside: case Issue::DataPastEnd: case Issue::LocalHeaderBad:
      case Issue::DirectoryDamaged: k = NoteKind::ZipTruncated; break;
      case Issue::Encrypted: return;  // judged per member, once its content is known
      case Issue::UnsupportedMethod: k = NoteKind::Unsupported; break;
      default: k = NoteKind::ZipLayout;
    }
    out_.notes.push_back({k, p.member.empty() ? prefix : prefix + p.member, p.offset, p.detail});
  }

  // Reads a member into memory (deflated ones decompressed up to the cap).
  bool member_bytes(const zip::Source& src, const zip::Member& m, const std::string& name, std::string& out) {
    bool truncated = false;
    const std::string err = zip::read_member(src, m, opts_.max_member_bytes, out, &truncated);
    if (!err.empty()) {
      out_.notes.push_back({m.encrypted() ? NoteKind::Encrypted : NoteKind::Unsupported, name, m.data_offset,
                            m.encrypted() ? "encrypted member: its contents were not inspected (" + err + ")" : err});
      return false;
    }
    if (truncated) {
      out_.notes.push_back({NoteKind::DecompressCap, name, m.data_offset,
                            "holds more than " + std::to_string(opts_.max_member_bytes) + " bytes once decompressed (declared " +
                                std::to_string(m.size) + "); not inspected beyond that"});
      return false;
    }
    return true;
  }

  void scan_zip(const zip::Source& src, const std::string& prefix, uint32_t depth, bool top) {
    zip::Archive a = zip::read_archive(src);
    for (const auto& p : a.problems) zip_problem(p, prefix);
    std::string root;
    if (!a.members.empty()) {
      const std::string& first = a.members.front().name;
      root = first.substr(0, first.find('/'));
      if (first.find('/') == std::string::npos) root.clear();
    }
    auto member_named = [&](const std::string& n) -> const zip::Member* {
      for (const auto& m : a.members)
        if (m.name == n || m.local_name == n) return &m;
      return nullptr;
    };
    const zip::Member* data_pkl = root.empty() ? nullptr : member_named(root + "/data.pkl");
    const bool script = !root.empty() && member_named(root + "/constants.pkl");
    if (top) {
      out_.container = script ? Container::TorchScript : data_pkl ? Container::TorchZip : Container::Zip;
      out_.zip_root = root;
      if (script)
        out_.notes.push_back({NoteKind::TorchScript, root + "/constants.pkl", 0,
                              "a TorchScript archive (torch.jit.save): its code/ records are not interpreted; torch.load hands it to torch.jit.load"});
    }
    std::unordered_set<const zip::Member*> done;
    std::unordered_set<std::string> storage_records;
    if (data_pkl) {
      done.insert(data_pkl);
      const std::string name = prefix + data_pkl->name;
      pickle::Result r;
      bool have = false;
      if (data_pkl->method == 0 && data_pkl->local_ok && !data_pkl->encrypted()) {
        const uint64_t end = std::min(src.size(), data_pkl->data_offset + std::min(data_pkl->compressed_size, src.size()));
        r = read_one(src, data_pkl->data_offset, std::max(end, data_pkl->data_offset), data_pkl->data_offset);
        have = true;
      } else {
        std::string bytes;
        if (member_bytes(src, *data_pkl, name, bytes)) {
          r = read_one(zip::Source(&bytes), 0, bytes.size(), 0);
          have = true;
        }
      }
      if (have && record(r, name) && top && !script && r.stopped) {
        extract_tensors(r, out_);
        out_.weights_read = true;
      } else if (have && top && !script && !r.stopped) {
        out_.notes.push_back({NoteKind::Structure, name, r.error_offset, "data.pkl is not a readable pickle: " + r.error});
      }
      if (top && !script) {
        for (auto& s : out_.storages) {
          s.record = root + "/data/" + s.key;
          storage_records.insert(s.record);
          const zip::Member* m = member_named(s.record);
          if (!m) continue;
          s.present = true;
          s.data_offset = m->data_offset;
          s.bytes = m->size;
          s.compressed = m->method != 0;
          s.available = m->method != 0 ? m->size
                        : m->local_ok && m->data_offset <= src.size() ? std::min(m->size, src.size() - m->data_offset)
                                                                      : 0;
        }
      }
    }
    if (top && !root.empty() && (data_pkl || script)) read_records(src, a, root);
    if (top && (data_pkl || script)) {
      for (const auto& m : a.members)
        if (m.name.find('/') == std::string::npos || m.name.substr(0, m.name.find('/')) != root)
          structure("member '" + m.name + "' is not under the archive's root folder '" + root + "/' (torch refuses such archives)", m.header_offset, m.name);
    }
    for (const auto& m : a.members) {
      if (done.count(&m) || storage_records.count(m.name)) continue;
      const std::string name = prefix + m.name;
      if (!m.local_ok) continue;
      std::string head;
      bool readable = true;
      if (m.method == 0) src.read(m.data_offset, 16, head);
      else readable = zip::read_member(src, m, 16, head).empty() || !head.empty();
      if (!readable && m.encrypted()) {
        out_.notes.push_back({NoteKind::Encrypted, name, m.data_offset, "encrypted member: its contents were not inspected"});
        continue;
      }
      const bool is_zip = zip::looks_like_zip(head), is_npy = starts_with(head, "\x93NUMPY"), is_pickle = pickle::looks_like_pickle(head);
      if (!is_zip && !is_npy && !is_pickle) {
        if (m.encrypted()) out_.notes.push_back({NoteKind::Encrypted, name, m.data_offset, "encrypted member: its contents were not inspected"});
        continue;
      }
      const size_t imports_before = out_.imports.size();
      if (is_zip && depth + 1 > opts_.max_depth) {
        out_.notes.push_back({NoteKind::Unsupported, name, m.data_offset, "an archive nested deeper than " + std::to_string(opts_.max_depth) + " levels is not inspected"});
        continue;
      }
      if (m.method == 0 && !is_zip) {
        const uint64_t end = std::min(src.size(), m.data_offset + std::min(m.compressed_size, src.size()));
        if (is_npy) scan_npy(src, m.data_offset, end, name);
        else scan_stream(src, m.data_offset, end, name, false);
      } else {
        std::string bytes;
        if (!member_bytes(src, m, name, bytes)) continue;
        zip::Source inner(&bytes);
        if (is_zip) scan_zip(inner, name + "!", depth + 1, false);
        else if (is_npy) scan_npy(inner, 0, bytes.size(), name);
        else scan_stream(inner, 0, bytes.size(), name, false);
      }
      if (m.encrypted() && out_.imports.size() == imports_before)
        out_.notes.push_back({NoteKind::Encrypted, name, m.data_offset, "encrypted member: its contents were not inspected"});
    }
  }

  // byteorder, version (.data/version) and the records torch checks when loading.
  void read_records(const zip::Source& src, const zip::Archive& a, const std::string& root) {
    auto text = [&](const std::string& n, std::string& out) {
      for (const auto& m : a.members)
        if (m.name == n && m.local_ok && m.size <= 4096) {
          zip::read_member(src, m, 4096, out);
          return true;
        }
      return false;
    };
    std::string v;
    if (text(root + "/byteorder", v)) {
      out_.byteorder = v;
      if (v != "little" && v != "big") structure("byteorder record holds '" + v + "', expected 'little' or 'big'", 0, root + "/byteorder");
    }
    std::string ver;
    const bool has_version = text(root + "/.data/version", ver) || text(root + "/version", ver);
    if (has_version) {
      while (!ver.empty() && (ver.back() == '\n' || ver.back() == '\r')) ver.pop_back();
      out_.version = ver;
      const bool digits = !ver.empty() && ver.size() < 8 && std::all_of(ver.begin(), ver.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || std::stoul(ver) < 1)
        structure("version record holds '" + ver + "', expected a file format version >= 1", 0, root + "/version");
    } else {
      structure("the archive has no version record (" + root + "/version); torch refuses to load it", 0, root + "/version");
    }
  }
};

}  // namespace

std::string_view container_name(Container c) {
  switch (c) {
    case Container::NotPickle: return "not a pickle";
    case Container::RawPickle: return "pickle";
    case Container::Legacy: return "legacy torch.save";
    case Container::TorchZip: return "torch zip";
    case Container::TorchScript: return "TorchScript archive";
    case Container::Zip: return "zip";
    case Container::Npy: return "npy";
    case Container::SevenZip: return "7z";
    case Container::Preview: return "PYTORCH1 preview";
  }
  return "?";
}

FileScan scan_file(const std::filesystem::path& path, std::string rel, const ScanOptions& opts) {
  FileScan out;
  out.file = std::move(rel);
  io::ReadOnlyFile f;
  if (!f.open(path).empty()) return out;
  Scanner(opts, out).scan_top(zip::Source(&f));
  return out;
}

FileScan scan_bytes(const std::string& bytes, std::string rel, const ScanOptions& opts) {
  FileScan out;
  out.file = std::move(rel);
  Scanner(opts, out).scan_top(zip::Source(&bytes));
  return out;
}

}  // namespace ckpt::pt

namespace ckpt::pt {

bool is_weights_name(std::string_view rel) {
  if (rel.find('/') != std::string_view::npos) return false;
  auto ends = [&](std::string_view s) { return rel.size() >= s.size() && rel.substr(rel.size() - s.size()) == s; };
  auto starts = [&](std::string_view s) { return rel.substr(0, s.size()) == s; };
  if (ends(".bin")) return starts("pytorch_model") || starts("adapter_model") || starts("diffusion_pytorch_model");
  if (ends(".pth")) return starts("consolidated.");
  return false;
}

}  // namespace ckpt::pt
