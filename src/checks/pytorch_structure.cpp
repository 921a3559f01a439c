// PT: PyTorch checkpoint structure, from the static scan (never unpickled): the file is a
// checkpoint torch can read, every storage the pickle names is in the archive (or the legacy
// stream) with at least numel x element size bytes, every tensor's strided extent fits its
// storage, and tensors sharing a storage are the same tensor or views of one another.
#include <algorithm>
#include <map>

#include "checks/family.h"
#include "checks/pytorch_twins.h"
#include "checks/util.h"
#include "io/checked.h"
#include "io/file.h"
#include "model/pytorch_shards.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 15> kCodes{{
    {"PT001", Severity::error, "weight file is not a PyTorch checkpoint"},
    {"PT002", Severity::error, "archive truncated or damaged"},
    {"PT003", Severity::error, "torch framing is wrong (version, root folder, legacy header)"},
    {"PT004", Severity::error, "storage record missing"},
    {"PT005", Severity::error, "storage smaller than its declared element count"},
    {"PT006", Severity::error, "storage data cut off by the end of the file"},
    {"PT007", Severity::error, "tensor extends outside its storage"},
    {"PT008", Severity::error, "tensor metadata unreadable (shape, stride, offset, dtype)"},
    {"PT009", Severity::info, "tensors share a storage (tied weights or views)"},
    {"PT010", Severity::error, "tensors partially overlap inside one storage"},
    {"PT011", Severity::warning, "big-endian checkpoint"},
    {"PT012", Severity::info, "compressed storage record (torch cannot mmap it)"},
    {"PT013", Severity::warning, "weight file holds no tensors"},
    {"PT014", Severity::info, "both .bin and .safetensors weights: which one loaders read"},
    {"PT022", Severity::warning, "the .bin and the .safetensors hold different values for a tensor (--deep)"},
}};

std::string dims(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// What a pure "not a checkpoint" file starts with, for the PT001 message.
std::string sniff_kind(const Checkpoint& ck, const std::string& rel) {
  const FileEntry* f = ck.file(rel);
  if (!f || !f->readable()) return "unreadable";
  std::string head;
  io::read_prefix(f->abs, 16, head);
  if (head.rfind("\x89PNG", 0) == 0) return "a PNG image";
  if (head.rfind("<!DOCTYPE", 0) == 0 || head.rfind("<html", 0) == 0 || head.rfind("<!doctype", 0) == 0) return "an HTML page";
  if (head.rfind("version https://git-lfs", 0) == 0) return "a Git LFS pointer";
  if (!head.empty() && head[0] == '{') return "JSON text";
  if (head.rfind("\x1f\x8b", 0) == 0) return "a gzip stream";
  return "neither a torch zip (PK\\x03\\x04), a legacy torch stream (\\x80\\x02\\x8a\\x0a + magic) nor a pickle";
}

struct Extent {
  uint64_t begin = 0, end = 0;  // bytes inside the storage
  bool ok = false;
  std::string why;
};

// computeStorageNbytes (aten EmptyTensor.cpp): itemsize x (offset + 1 + sum stride[i] (size[i]-1)),
// 0 when any size is 0 (then only the offset must lie within the storage).
Extent extent_of(const pt::Tensor& t) {
  Extent e;
  if (t.shape.size() != t.stride.size()) {
    e.why = "size " + dims(t.shape) + " and stride " + dims(t.stride) + " have different lengths";
    return e;
  }
  if (t.storage_offset < 0) {
    e.why = "storage offset " + std::to_string(t.storage_offset) + " is negative";
    return e;
  }
  bool empty = false;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0 || t.stride[i] < 0) {
      e.why = "negative size or stride: size " + dims(t.shape) + ", stride " + dims(t.stride);
      return e;
    }
    if (t.shape[i] == 0) empty = true;
  }
  const uint64_t item = std::max<uint32_t>(t.itemsize, 1);
  auto begin = io::checked_mul(static_cast<uint64_t>(t.storage_offset), item);
  if (!begin) {
    e.why = "storage offset overflows";
    return e;
  }
  e.begin = *begin;
  if (empty) {
    e.end = e.begin;
    e.ok = true;
    return e;
  }
  std::optional<uint64_t> last = static_cast<uint64_t>(t.storage_offset) + 1;
  for (size_t i = 0; i < t.shape.size() && last; ++i) {
    auto step = io::checked_mul(static_cast<uint64_t>(t.stride[i]), static_cast<uint64_t>(t.shape[i] - 1));
    last = step ? io::checked_add(*last, *step) : std::nullopt;
  }
  auto end = last ? io::checked_mul(*last, item) : std::nullopt;
  if (!end || *end > uint64_t(INT64_MAX)) {
    e.why = "size " + dims(t.shape) + " with stride " + dims(t.stride) + " overflows (\"Storage size calculation overflowed\")";
    return e;
  }
  e.end = *end;
  e.ok = true;
  return e;
}

bool contiguous(const pt::Tensor& t) {
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.stride[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

void structure(const Checkpoint& ck, const pt::FileScan& s, FindingSink& out) {
  const bool weights_name = pt::is_weights_name(s.file);
  if (s.container == pt::Container::NotPickle || s.container == pt::Container::Preview ||
      s.container == pt::Container::SevenZip || s.container == pt::Container::Npy) {
    if (weights_name)
      out.add("PT001", Severity::error,
              "torch.load cannot read this file: it is " + (s.container == pt::Container::NotPickle ? sniff_kind(ck, s.file)
                                                                                                   : std::string(pt::container_name(s.container))) +
                  " (" + std::to_string(s.file_size) + " bytes)",
              s.file, {}, "an interrupted or redirected download (an HTML login page, an LFS pointer); download the file again");
    return;
  }
  if (s.container == pt::Container::RawPickle && weights_name)
    out.add("PT003", Severity::error,
            "the file is a bare pickle without torch's framing: torch.load reads a non-zip file as the legacy format and "
            "fails with \"Invalid magic number; corrupt file?\"",
            s.file, {}, "it was written with pickle.dump, not torch.save; only pickle.load (which runs it) can read it");
  for (const auto& n : s.notes) {
    const std::string at = (n.member.empty() ? std::string() : " (member " + n.member + ")");
    if (n.kind == pt::NoteKind::ZipTruncated && (weights_name || s.container == pt::Container::TorchZip))
      out.add("PT002", Severity::error, n.detail + at, s.file, {},
              "torch fails with \"PytorchStreamReader failed reading zip archive\"; the download is incomplete or damaged");
    if (n.kind == pt::NoteKind::Structure)
      out.add("PT003", Severity::error, n.detail + at, s.file, {}, "torch.load rejects the file; re-save it with torch.save");
  }
  if (s.byteorder == "big")
    out.add("PT011", Severity::warning, "the checkpoint records big-endian storages (byteorder 'big')", s.file, {},
            "torch byteswaps on load; other readers (safetensors conversion, mmap) take the bytes as little-endian");
  if (!s.weights_read) return;
  if (s.tensors.empty() && weights_name)
    out.add("PT013", Severity::warning, "the pickle holds no tensor (no _rebuild_tensor call)", s.file, {},
            "this is not a state_dict: a weight file with nothing to load");
  // Storages.
  size_t compressed = 0;
  for (const auto& st : s.storages) {
    const std::string what = s.container == pt::Container::Legacy ? "storage '" + st.key + "'" : "record " + st.record;
    if (st.itemsize == 0) {
      out.add("PT008", Severity::error, "storage '" + st.key + "' has the unknown storage type " + st.type, s.file, {},
              "torch maps only its own *Storage classes to dtypes");
      continue;
    }
    if (!st.present) {
      out.add("PT004", Severity::error,
              "the pickle declares storage '" + st.key + "' (" + st.type + ", " + std::to_string(st.numel) + " elements)" +
                  (s.container == pt::Container::Legacy ? " but the legacy stream ends before its block"
                                                        : " but the archive has no record " + st.record),
              s.file, {}, "the archive was assembled by hand or truncated; torch fails with \"failed finding record\"");
      continue;
    }
    const auto need = io::checked_mul(st.numel, st.itemsize);
    if (s.container == pt::Container::Legacy && st.legacy_count >= 0 && static_cast<uint64_t>(st.legacy_count) != st.numel)
      out.add("PT005", Severity::error,
              what + " is declared with " + std::to_string(st.numel) + " elements but its block's count says " +
                  std::to_string(st.legacy_count),
              s.file, {}, "torch fails with \"storage has wrong byte size\"; the file is corrupt");
    else if (need && st.bytes < *need)
      out.add("PT005", Severity::error,
              what + " holds " + std::to_string(st.bytes) + " bytes; its " + std::to_string(st.numel) + " " + st.dtype +
                  " elements need " + std::to_string(*need),
              s.file, {}, "the storage was cut or replaced; the tensors in it read past its end");
    if (st.available < st.bytes)
      out.add("PT006", Severity::error,
              what + " needs " + std::to_string(st.bytes) + " bytes from offset " + std::to_string(st.data_offset) +
                  " but the file ends after " + std::to_string(st.available) + " of them: " +
                  std::to_string(st.bytes - st.available) + " bytes missing",
              s.file, {}, "the file is truncated; download it again");
    if (st.compressed) ++compressed;
  }
  if (compressed)
    out.add("PT012", Severity::info, std::to_string(compressed) + " storage record(s) are deflated", s.file, {},
            "torch.load reads them but cannot mmap them (transformers passes mmap=True for zip checkpoints)");
  // Tensors: metadata, extent, sharing.
  struct Placed {
    const pt::Tensor* t;
    Extent e;
  };
  std::map<int32_t, std::vector<Placed>> by_storage;
  for (const auto& t : s.tensors) {
    if (t.alias_of >= 0) continue;  // the same object under another key: judged once
    const std::string name = t.name.empty() ? "<the saved object>" : t.name;
    if (!t.problem.empty()) {
      out.add("PT008", Severity::error, "tensor " + name + " (" + t.rebuild + "): " + t.problem, s.file, name,
              "not what torch.save writes; the pickle was edited or produced by another tool");
      continue;
    }
    if (t.storage < 0) continue;  // meta tensors
    const pt::Storage& st = s.storages[static_cast<size_t>(t.storage)];
    if (t.itemsize == 0) {
      out.add("PT008", Severity::error, "tensor " + name + " has the unknown dtype " + t.dtype, s.file, name, "");
      continue;
    }
    Extent e = extent_of(t);
    if (!e.ok) {
      out.add("PT008", Severity::error, "tensor " + name + ": " + e.why, s.file, name, "torch.load fails on it");
      continue;
    }
    const auto cap = io::checked_mul(st.numel, st.itemsize);
    if (cap && (e.end > *cap || e.begin > *cap))
      out.add("PT007", Severity::error,
              "tensor " + name + " (size " + dims(t.shape) + ", stride " + dims(t.stride) + ", offset " +
                  std::to_string(t.storage_offset) + ", " + t.dtype + ") needs bytes [" + std::to_string(e.begin) + ", " +
                  std::to_string(e.end) + ") of storage '" + st.key + "', which holds " + std::to_string(*cap),
              s.file, name, "torch fails with \"setStorage: ... out of bounds for storage\"; the pickle and the storage disagree");
    by_storage[t.storage].push_back({&t, e});
  }
  size_t shared = 0, sharing_tensors = 0, tied = 0;
  std::string example;
  for (auto& [sid, list] : by_storage) {
    if (list.size() < 2) continue;
    ++shared;
    sharing_tensors += list.size();
    std::sort(list.begin(), list.end(), [](const Placed& a, const Placed& b) {
      return a.e.begin != b.e.begin ? a.e.begin < b.e.begin : a.e.end > b.e.end;
    });
    if (example.empty()) example = list[0].t->name + " and " + list[1].t->name + " (storage '" + s.storages[static_cast<size_t>(sid)].key + "')";
    // Sweep: a tensor that starts inside the span of an earlier one must lie wholly inside it
    // (a view), or be the very same layout (tied); a partial overlap is two tensors writing one byte range.
    const Placed* outer = &list[0];
    for (size_t i = 1; i < list.size(); ++i) {
      const Placed& p = list[i];
      if (p.e.begin == p.e.end) continue;
      if (p.e.begin >= outer->e.end) {
        outer = &p;
        continue;
      }
      if (p.e.begin == outer->e.begin && p.e.end == outer->e.end && p.t->shape == outer->t->shape && p.t->stride == outer->t->stride) {
        ++tied;
        continue;
      }
      if (p.e.end <= outer->e.end) continue;  // a view inside it
      if (!contiguous(*p.t) || !contiguous(*outer->t)) continue;  // strided views may interleave
      out.add("PT010", Severity::error,
              "tensors " + outer->t->name + " (bytes [" + std::to_string(outer->e.begin) + ", " + std::to_string(outer->e.end) +
                  ")) and " + p.t->name + " (bytes [" + std::to_string(p.e.begin) + ", " + std::to_string(p.e.end) +
                  ")) overlap partially in storage '" + s.storages[static_cast<size_t>(sid)].key + "'",
              s.file, p.t->name, "neither is a view of the other: loading them shares bytes no model expects to share");
      outer = &p;
    }
  }
  size_t aliases = 0;
  for (const auto& t : s.tensors) aliases += t.alias_of >= 0;
  if (shared || aliases)
    out.add("PT009", Severity::info,
            std::to_string(aliases + tied) + " tensor name(s) are the very same tensor as another (tied weights)" +
                (shared ? "; " + std::to_string(shared) + " storage(s) are shared by " + std::to_string(sharing_tensors) +
                              " tensors (views), e.g. " + example
                        : ""),
            s.file, {}, "legitimate for tied embeddings and Meta's per-layer storages; safetensors conversion must clone or drop them");
}

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  for (const auto& s : ck.pickle_scans) structure(ck, s, out);
  both_formats(ck, opts, out);  // pytorch_twins.cpp
}

}  // namespace

const FamilyDef kPyTorchStructureFamily{"PT", kCodes, run};

}  // namespace ckpt::checks
