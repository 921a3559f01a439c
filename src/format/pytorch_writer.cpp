// A torch.save-compatible writer (zip format, protocol-2 pickle, 64-byte aligned stored records)
// for fixtures: the same bytes layout torch writes, so `torch.load(weights_only=True)` reads it.
// Planted defects (a missing record, a short storage, an import of os.system, a cut file) are
// applied here, at the byte level, so the readers meet them exactly as on disk.
#include "ckpt/pytorch_writer.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace ckpt::pt {

namespace {

// The storage class torch pickles for a table dtype.
const char* storage_class(DType d) {
  switch (d) {
    case DType::F32: return "FloatStorage";
    case DType::F16: return "HalfStorage";
    case DType::BF16: return "BFloat16Storage";
    case DType::F64: return "DoubleStorage";
    case DType::I64: return "LongStorage";
    case DType::I32: return "IntStorage";
    case DType::I16: return "ShortStorage";
    case DType::I8: return "CharStorage";
    case DType::U8: return "ByteStorage";
    case DType::BOOL: return "BoolStorage";
    case DType::C64: return "ComplexFloatStorage";
    default: return nullptr;
  }
}

class Pickler {
 public:
  std::string out = std::string("\x80\x02", 2);

  void global(const std::string& module, const std::string& name) {
    const std::string key = module + "\n" + name;
    auto it = memo_globals_.find(key);
    if (it != memo_globals_.end()) return get(it->second);
    out += 'c';
    out += module + "\n" + name + "\n";
    memo_globals_[key] = put();
  }
  void str(const std::string& s) {
    out += 'X';
    le(s.size(), 4);
    out += s;
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      out += 'K';
      le(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      out += 'M';
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out += 'J';
      le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    } else {
      out += '\x8a';
      out += '\x08';
      le(static_cast<uint64_t>(v), 8);
    }
  }
  void mark() { out += '('; }
  void tuple() { out += 't'; }
  void empty_tuple() { out += ')'; }
  void reduce() { out += 'R'; }
  void setitems() { out += 'u'; }
  void binpersid() { out += 'Q'; }
  void newfalse() { out += '\x89'; }
  void newtrue() { out += '\x88'; }
  void none() { out += 'N'; }
  void empty_dict() { out += '}'; }
  void empty_list() { out += ']'; }
  void appends() { out += 'e'; }
  void stop() { out += '.'; }
  uint32_t put() {
    const uint32_t k = next_++;
    if (k < 256) {
      out += 'q';
      le(k, 1);
    } else {
      out += 'r';
      le(k, 4);
    }
    return k;
  }
  void get(uint32_t k) {
    if (k < 256) {
      out += 'h';
      le(k, 1);
    } else {
      out += 'j';
      le(k, 4);
    }
  }

 private:
  uint32_t next_ = 0;
  std::map<std::string, uint32_t> memo_globals_;
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  }
};

struct Record {
  std::string name;
  std::string data;
  uint64_t hole = 0;  // > 0: `hole` bytes of zeros left unwritten (sparse stand-ins); data is empty
  uint64_t size() const { return hole ? hole : data.size(); }
};

// The archive as bytes to write and holes to skip, in order.
struct Segment {
  std::string bytes;
  uint64_t hole = 0;
};

void le(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// A stored zip with each record's data 64-byte aligned (torch's "FB" padding extra field).
// ZIP64 where a size or offset does not fit 32 bits, as miniz writes it for torch: the local
// header's sizes move to a zip64 extra field (which the alignment accounts for), the central
// entry's size and offset fields hold 0xFFFFFFFF with their values in a zip64 extra field, and
// a zip64 end record plus its locator precede the end record.
std::vector<Segment> zip_segments(const std::vector<Record>& recs, std::vector<uint64_t>* data_offsets = nullptr) {
  constexpr uint64_t k32 = 0xFFFFFFFFull;
  std::vector<Segment> out(1);
  std::string central;
  uint64_t pos = 0;
  bool any64 = false;
  for (const auto& r : recs) {
    const uint64_t at = pos;
    const uint32_t crc = r.hole ? 0 : static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(r.data.data()), static_cast<uInt>(r.data.size())));
    const bool big = r.size() >= k32, far = at >= k32;
    any64 = any64 || big || far;
    const uint64_t z64_local = big ? 20 : 0;  // id, length, usize, csize
    const uint64_t data_start_min = at + 30 + r.name.size() + z64_local + 4;
    const uint64_t pad = (64 - data_start_min % 64) % 64;
    std::string local;
    le(local, 0x04034b50, 4);
    le(local, big ? 45 : 20, 2);  // version needed (4.5: zip64)
    le(local, 0x0800, 2);  // UTF-8 names
    le(local, 0, 2);       // stored
    le(local, 0, 4);       // time/date
    le(local, crc, 4);
    le(local, big ? k32 : r.size(), 4);
    le(local, big ? k32 : r.size(), 4);
    le(local, r.name.size(), 2);
    le(local, z64_local + 4 + pad, 2);
    local += r.name;
    if (big) {
      le(local, 0x0001, 2);
      le(local, 16, 2);
      le(local, r.size(), 8);
      le(local, r.size(), 8);
    }
    local += "FB";
    le(local, pad, 2);
    local += std::string(static_cast<size_t>(pad), 'Z');
    out.back().bytes += local;
    pos += local.size();
    if (data_offsets) data_offsets->push_back(pos);
    if (r.hole) {
      out.push_back({{}, r.hole});
      out.push_back({});
    } else {
      out.back().bytes += r.data;
    }
    pos += r.size();
    std::string z64;  // central zip64 extra: usize, csize, offset, each only when its field overflows
    if (big) {
      le(z64, r.size(), 8);
      le(z64, r.size(), 8);
    }
    if (far) le(z64, at, 8);
    le(central, 0x02014b50, 4);
    le(central, z64.empty() ? 20 : 45, 2);
    le(central, z64.empty() ? 20 : 45, 2);
    le(central, 0x0800, 2);
    le(central, 0, 2);
    le(central, 0, 4);
    le(central, crc, 4);
    le(central, big ? k32 : r.size(), 4);
    le(central, big ? k32 : r.size(), 4);
    le(central, r.name.size(), 2);
    le(central, z64.empty() ? 0 : 4 + z64.size(), 2);  // extra
    le(central, 0, 2);  // comment
    le(central, 0, 2);  // disk
    le(central, 0, 2);  // internal attrs
    le(central, 0, 4);  // external attrs
    le(central, far ? k32 : at, 4);
    central += r.name;
    if (!z64.empty()) {
      le(central, 0x0001, 2);
      le(central, z64.size(), 2);
      central += z64;
    }
  }
  const uint64_t cd_at = pos;
  std::string& tail = out.back().bytes;
  tail += central;
  const bool zip64 = any64 || cd_at >= k32 || recs.size() >= 0xFFFF;
  if (zip64) {
    const uint64_t rec_at = cd_at + central.size();
    le(tail, 0x06064b50, 4);
    le(tail, 44, 8);  // size of the rest of the record
    le(tail, 45, 2);
    le(tail, 45, 2);
    le(tail, 0, 4);
    le(tail, 0, 4);
    le(tail, recs.size(), 8);
    le(tail, recs.size(), 8);
    le(tail, central.size(), 8);
    le(tail, cd_at, 8);
    le(tail, 0x07064b50, 4);
    le(tail, 0, 4);
    le(tail, rec_at, 8);
    le(tail, 1, 4);
  }
  le(tail, 0x06054b50, 4);
  le(tail, 0, 2);
  le(tail, 0, 2);
  le(tail, zip64 ? 0xFFFF : recs.size(), 2);
  le(tail, zip64 ? 0xFFFF : recs.size(), 2);
  le(tail, zip64 ? k32 : central.size(), 4);
  le(tail, zip64 ? k32 : cd_at, 4);
  le(tail, 0, 2);
  return out;
}

std::string zip_records(const std::vector<Record>& recs, std::vector<uint64_t>* data_offsets = nullptr) {
  std::string file;
  for (const auto& seg : zip_segments(recs, data_offsets)) {
    file += seg.bytes;
    file.append(static_cast<size_t>(seg.hole), '\0');
  }
  return file;
}

}  // namespace

const char* storage_class_for(DType d) { return storage_class(d); }

namespace {

// The state_dict pickle and its storages (named by key). `legacy`: the persistent ids are the
// legacy stream's 6-tuples (view_metadata None) instead of the zip's 5-tuples.
std::string state_dict_pickle(const std::vector<TensorToSave>& tensors, const WriterDefects& defects, bool sparse, bool legacy,
                              std::vector<Record>& storages, std::string* error) {
  Pickler p;
  p.global("collections", "OrderedDict");
  p.empty_tuple();
  p.reduce();
  p.put();
  size_t batch = 0;
  p.mark();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const char* cls = storage_class(t.dtype);
    if (!cls) {
      if (error) *error = "dtype " + std::string(dtype_name(t.dtype)) + " has no torch storage class";
      return {};
    }
    const uint64_t item = dtype_bits(t.dtype) / 8;
    uint64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    uint64_t declared = numel;
    const bool hole = sparse && t.data.empty();
    std::string bytes = std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    if (!hole) bytes.resize(static_cast<size_t>(numel * item), '\0');
    if (defects.tensor_outside_storage && i == 0 && numel > 0) {
      declared = numel - 1;  // the pickle's storage holds one element fewer than the tensor spans
      bytes.resize(static_cast<size_t>(declared * item));
    }
    if (defects.short_storage && i == 0 && !bytes.empty()) bytes.resize(bytes.size() / 2);  // record shorter than declared
    if (defects.big_endian && !legacy && item > 1)
      for (size_t b = 0; b + item <= bytes.size(); b += item) std::reverse(bytes.begin() + b, bytes.begin() + b + item);
    const std::string key = std::to_string(i);
    p.str(t.name);
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark();
    p.str("storage");
    p.global("torch", cls);
    p.str(key);
    p.str("cpu");
    p.integer(static_cast<int64_t>(declared));
    if (legacy) p.none();  // view_metadata
    p.tuple();
    p.binpersid();
    p.integer(0);
    p.mark();
    for (auto d : t.shape) p.integer(static_cast<int64_t>(d));
    p.tuple();
    p.mark();
    uint64_t stride = 1;
    std::vector<uint64_t> strides(t.shape.size());
    for (size_t k = t.shape.size(); k-- > 0;) {
      strides[k] = stride;
      stride *= t.shape[k];
    }
    for (auto s : strides) p.integer(static_cast<int64_t>(s));
    p.tuple();
    p.newfalse();
    p.global("collections", "OrderedDict");
    p.empty_tuple();
    p.reduce();
    p.tuple();
    p.reduce();
    if (!(defects.missing_record && i == tensors.size() - 1))
      storages.push_back({key, std::move(bytes), hole ? numel * item : 0});
    if (++batch == 1000) {
      p.setitems();
      p.mark();
      batch = 0;
    }
  }
  if (defects.dangerous_global) {
    // What a malicious checkpoint adds: a value whose unpickling calls os.system (never run here).
    p.str("_ckpt_fixture_payload");
    p.global("posix", "system");
    p.mark();
    p.str("echo ckpt-fixture-payload");
    p.tuple();
    p.reduce();
  }
  p.setitems();
  p.stop();
  return p.out;
}

std::vector<Record> torch_records(const std::vector<TensorToSave>& tensors, const std::string& root, const WriterDefects& defects,
                                  bool sparse, std::string* error) {
  std::vector<Record> storages;
  std::string err;
  std::string pkl = state_dict_pickle(tensors, defects, sparse, false, storages, &err);
  if (!err.empty()) {
    if (error) *error = err;
    return {};
  }
  std::vector<Record> recs;
  recs.push_back({root + "/data.pkl", pkl});
  recs.push_back({root + "/byteorder", defects.big_endian ? "big" : "little"});
  for (auto& s : storages) recs.push_back({root + "/data/" + s.name, std::move(s.data), s.hole});
  recs.push_back({root + "/version", "3\n"});
  return recs;
}

}  // namespace

std::string torch_zip_bytes(const std::vector<TensorToSave>& tensors, const std::string& root, const WriterDefects& defects,
                            std::string* error) {
  std::string err;
  std::vector<Record> recs = torch_records(tensors, root, defects, false, &err);
  if (!err.empty()) {
    if (error) *error = err;
    return {};
  }
  std::vector<uint64_t> offsets;
  std::string file = zip_records(recs, &offsets);
  if (defects.truncate_storage && recs.size() >= 4) {
    const size_t last = recs.size() - 2;  // the last data/<key> record (version comes after it)
    file.resize(static_cast<size_t>(offsets[last] + recs[last].data.size() / 2));
  }
  return file;
}

std::string write_torch_zip(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors,
                            const WriterDefects& defects) {
  std::string root = path.stem().string();  // torch: the basename minus its last extension
  if (root.empty()) root = "archive";
  std::string error;
  std::string bytes = torch_zip_bytes(tensors, root, defects, &error);
  if (!error.empty()) return error;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return "cannot write " + path.string();
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return f ? std::string() : "write failed: " + path.string();
}

std::string write_torch_zip_sparse(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors) {
  std::string root = path.stem().string();
  if (root.empty()) root = "archive";
  std::string err;
  std::vector<Record> recs = torch_records(tensors, root, {}, true, &err);
  if (!err.empty()) return err;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return "cannot write " + path.string();
  for (const auto& seg : zip_segments(recs)) {
    f.write(seg.bytes.data(), static_cast<std::streamsize>(seg.bytes.size()));
    if (seg.hole) f.seekp(static_cast<std::streamoff>(seg.hole), std::ios::cur);
  }
  return f ? std::string() : "write failed: " + path.string();
}

std::string torch_legacy_bytes(const std::vector<TensorToSave>& tensors, const WriterDefects& defects, std::string* error) {
  std::vector<Record> storages;
  std::string err;
  const std::string object = state_dict_pickle(tensors, defects, false, true, storages, &err);
  if (!err.empty()) {
    if (error) *error = err;
    return {};
  }
  // _legacy_save: magic number, protocol version, sys_info, the object, the sorted keys, then
  // per key an int64 little-endian element count and the raw little-endian bytes.
  std::string out("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e", 15);
  out += std::string("\x80\x02\x4d\xe9\x03\x2e", 6);
  Pickler info;
  info.empty_dict();
  info.put();
  info.mark();
  info.str("protocol_version");
  info.integer(1001);
  info.str("little_endian");
  info.newtrue();
  info.str("type_sizes");
  info.empty_dict();
  info.put();
  info.mark();
  info.str("short");
  info.integer(2);
  info.str("int");
  info.integer(4);
  info.str("long");
  info.integer(4);
  info.setitems();
  info.setitems();
  info.stop();
  out += info.out;
  out += object;
  std::sort(storages.begin(), storages.end(), [](const Record& a, const Record& b) { return a.name < b.name; });  // sorted as strings
  Pickler keys;
  keys.empty_list();
  keys.put();
  if (!storages.empty()) {
    keys.mark();
    for (const auto& s : storages) keys.str(s.name);
    keys.appends();
  }
  keys.stop();
  out += keys.out;
  size_t last_block = 0;
  for (size_t i = 0; i < storages.size(); ++i) {
    const Record& s = storages[i];
    // The element count: the pickle's numel, except for the short-storage defect, whose block
    // says (and holds) half of it.
    const TensorToSave& t = tensors[std::stoul(s.name)];  // keys are tensor ordinals
    const uint64_t item = dtype_bits(t.dtype) / 8;
    const uint64_t count = s.data.size() / std::max<uint64_t>(item, 1);
    le(out, count, 8);
    last_block = out.size();
    out += s.data;
  }
  if (defects.truncate_storage && !storages.empty()) out.resize(last_block + storages.back().data.size() / 2);
  return out;
}

std::string write_torch_legacy(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors, const WriterDefects& defects) {
  std::string error;
  std::string bytes = torch_legacy_bytes(tensors, defects, &error);
  if (!error.empty()) return error;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return "cannot write " + path.string();
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return f ? std::string() : "write failed: " + path.string();
}

}  // namespace ckpt::pt
