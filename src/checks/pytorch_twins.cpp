// PT014 / PT022: a repo shipping PyTorch weights beside safetensors weights. Loaders read the
// safetensors (transformers' use_safetensors default, vLLM, SGLang, TGI, mlx); PT014 says so
// and whether the .bin holds the same tensors (names, dtypes, shapes: header to header). With
// --deep, PT022 compares the bytes of every tensor both hold with the same dtype and shape,
// element by element, in 1 MiB pieces (memory stays at two buffers whatever the model size),
// and names the first tensor and element that differ.
#include "checks/pytorch_twins.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "checks/deep_scan.h"
#include "checks/hashes_plan.h"
#include "checks/util.h"
#include "io/file.h"
#include "model/pytorch_shards.h"

namespace ckpt::checks {

namespace {

struct BinTensor {
  const pt::FileScan* scan;
  const pt::Tensor* t;
};

// Whether the spans of a pickled tensor, read in order, are its elements in row-major order.
bool row_major_order(const hs::Strided& s) {
  uint64_t w = 1;
  for (size_t d = s.map.sizes.size(); d-- > 0;) {
    if (s.map.logical[d] != w) return false;
    w *= s.map.sizes[d];
  }
  return !s.distinct_only;
}

std::string index_of(uint64_t flat, const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shape.empty() ? "the only element" : "element " + shape_str(idx);
}

std::string hex(const std::byte* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = n; i-- > 0;) {  // most significant byte first (little-endian element)
    s += d[static_cast<unsigned>(p[i]) >> 4];
    s += d[static_cast<unsigned>(p[i]) & 15];
  }
  return s;
}

enum class Cmp { Same, Differ, Unreadable };

struct Difference {
  uint64_t element = 0;
  std::string bin_bits, st_bits;
  std::string error;
};

// Compares `st_len` bytes of the safetensors file at `st_off` with the .bin spans in order.
Cmp compare_bytes(const io::ReadOnlyFile& bin, const hs::Strided& sp, bool swap, uint32_t item, const io::ReadOnlyFile& stf,
                  uint64_t st_off, Difference& diff) {
  constexpr uint64_t kPiece = 1u << 20;
  std::vector<std::byte> a, b;
  uint64_t done = 0;  // bytes compared so far (logical order)
  for (const auto& span : sp.spans) {
    for (uint64_t at = 0; at < span.nbytes;) {
      const uint64_t n = std::min<uint64_t>(kPiece / item * item, span.nbytes - at);
      a.resize(n);
      b.resize(n);
      if (bin.read_at(span.offset + at, a.data(), n) != static_cast<int64_t>(n) ||
          stf.read_at(st_off + done, b.data(), n) != static_cast<int64_t>(n)) {
        diff.error = "a read ended early at byte " + std::to_string(done);
        return Cmp::Unreadable;
      }
      if (swap) deep::byteswap_elements(a.data(), n / item, item);
      if (std::memcmp(a.data(), b.data(), n) != 0) {
        uint64_t i = 0;
        while (i < n && std::memcmp(a.data() + i, b.data() + i, item) == 0) i += item;
        diff.element = (done + i) / item;
        diff.bin_bits = hex(a.data() + i, item);
        diff.st_bits = hex(b.data() + i, item);
        return Cmp::Differ;
      }
      at += n;
      done += n;
    }
  }
  return Cmp::Same;
}

void compare_data(const Checkpoint& ck, const std::map<std::string, BinTensor>& bin, FindingSink& out) {
  size_t same = 0, differ = 0, skipped = 0;
  std::vector<std::string> unreadable;
  std::map<std::string, io::ReadOnlyFile> open;  // rel -> file, opened once
  auto file = [&](const std::string& rel) -> const io::ReadOnlyFile* {
    auto it = open.find(rel);
    if (it == open.end()) {
      const FileEntry* f = ck.file(rel);
      io::ReadOnlyFile rf;
      if (f && f->readable() && !f->abs.empty()) rf.open(f->abs, true);
      it = open.emplace(rel, std::move(rf)).first;
    }
    return it->second.is_open() ? &it->second : nullptr;
  };
  for (const auto& sh : ck.shards) {
    if (sh.format != Format::safetensors || !sh.header.parsed) continue;
    for (const auto& e : sh.header.tensors) {
      auto it = bin.find(std::string(e.name));
      if (it == bin.end()) continue;
      const pt::Tensor& t = *it->second.t;
      const pt::FileScan& scan = *it->second.scan;
      std::vector<uint64_t> shape;
      for (int64_t d : t.shape) shape.push_back(static_cast<uint64_t>(std::max<int64_t>(d, 0)));
      if (torch_dtype(t.dtype) != e.dtype || shape != e.shape) continue;  // PT014 counts these
      if (t.storage < 0 || !t.problem.empty()) continue;
      const pt::Storage& s = scan.storages[static_cast<size_t>(t.storage)];
      auto sp = s.present && !s.compressed ? hs::strided_spans(t, s, 4096) : std::nullopt;
      const uint32_t item = t.itemsize;
      uint64_t bin_bytes = 0;
      if (sp)
        for (const auto& x : sp->spans) bin_bytes += x.nbytes;
      if (!sp || !row_major_order(*sp) || item == 0 || bin_bytes != e.end - e.begin) {
        ++skipped;  // strided in another order, deflated, or a layout PT007/ST already report
        continue;
      }
      const io::ReadOnlyFile* bf = file(scan.file);
      const io::ReadOnlyFile* sf = file(sh.file);
      if (!bf || !sf) {
        unreadable.push_back(std::string(e.name));
        continue;
      }
      Difference diff;
      const bool swap = scan.container == pt::Container::TorchZip && scan.byteorder == "big" && item > 1;
      switch (compare_bytes(*bf, *sp, swap, item, *sf, sh.header.data_start() + e.begin, diff)) {
        case Cmp::Same: ++same; break;
        case Cmp::Unreadable: unreadable.push_back(std::string(e.name) + " (" + diff.error + ")"); break;
        case Cmp::Differ:
          if (++differ <= 8)
            out.add("PT022", Severity::warning,
                    "tensor " + std::string(e.name) + " (" + std::string(dtype_name(e.dtype)) + " " + shape_str(e.shape) +
                        ") holds other values in " + scan.file + " than in " + sh.file + ": the first difference is at " +
                        index_of(diff.element, e.shape) + " (flat " + std::to_string(diff.element) + "), bits " + diff.bin_bits +
                        " in the .bin, " + diff.st_bits + " in the safetensors",
                    scan.file, e.name,
                    "the two exports are of different weights (another training step, a re-quantisation, a bad "
                    "conversion); whoever loads the .bin (use_safetensors=False, older tools) gets other results");
          break;
      }
    }
  }
  if (differ > 8)
    out.add("PT022", Severity::warning, std::to_string(differ - 8) + " more tensor(s) hold other values in the .bin than in the safetensors", "", "",
            "the two exports are of different weights");
  if (!unreadable.empty())
    out.add("PT022", Severity::warning, "could not compare the data of " + list_names(unreadable), "", "",
            "a file could not be opened or read to the end; re-run, or download it again");
  out.add("PT014", Severity::info,
          "--deep compared the data of the tensors both formats hold with the same dtype and shape: " + std::to_string(same) +
              " identical, " + std::to_string(differ) + " different" +
              (skipped ? ", " + std::to_string(skipped) + " not compared (a strided view in another element order, or a deflated record)" : ""),
          "", "", differ ? "see PT022" : "");
}

}  // namespace

void both_formats(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  std::vector<const pt::FileScan*> bins;
  for (const auto& s : ck.pickle_scans)
    if (s.weights_read && pt::is_weights_name(s.file) && !starts_with(s.file, "consolidated.") &&
        (s.container == pt::Container::TorchZip || s.container == pt::Container::Legacy))
      bins.push_back(&s);
  bool any_st = false;
  for (const auto& sh : ck.shards) any_st |= sh.format == Format::safetensors;
  if (bins.empty() || !any_st) return;
  std::map<std::string, BinTensor> in_bin;
  std::vector<std::string> names;
  for (const auto* s : bins) {
    names.push_back(s->file);
    for (const auto& t : s->tensors) in_bin.insert_or_assign(t.name, BinTensor{s, &t});
  }
  size_t only_bin = 0, only_st = 0, differ = 0, same = 0;
  std::string example;
  std::map<std::string, bool> seen;
  for (const auto& sh : ck.shards) {
    if (sh.format != Format::safetensors) continue;
    for (const auto& e : sh.header.tensors) {
      const std::string n(e.name);
      auto it = in_bin.find(n);
      if (it == in_bin.end()) {
        ++only_st;
        if (example.empty()) example = n + " is only in the safetensors";
        continue;
      }
      seen[n] = true;
      std::vector<uint64_t> shape;
      for (auto d : it->second.t->shape) shape.push_back(static_cast<uint64_t>(std::max<int64_t>(d, 0)));
      if (torch_dtype(it->second.t->dtype) == e.dtype && shape == e.shape) ++same;
      else {
        ++differ;
        if (example.empty()) example = n + " differs in dtype or shape";
      }
    }
  }
  for (const auto& [n, v] : in_bin)
    if (!seen.count(n)) {
      ++only_bin;
      if (example.empty()) example = n + " is only in the .bin";
    }
  const bool identical = !only_bin && !only_st && !differ;
  out.add("PT014", Severity::info,
          list_names(names) + " sit beside safetensors weights: transformers (use_safetensors default), vLLM, SGLang, TGI and "
          "mlx load the safetensors and never the .bin; " +
              (identical ? "the .bin holds the same " + std::to_string(same) + " tensors (names, dtypes, shapes)"
                         : "they differ: " + std::to_string(only_bin) + " tensor(s) only in the .bin, " + std::to_string(only_st) +
                               " only in the safetensors, " + std::to_string(differ) + " with another dtype or shape (" + example + ")"),
          "", "", identical ? "the .bin is redundant; drop it to stop pickle loads of it" : "the two exports disagree; a loader forced to use_safetensors=False gets other weights");
  if (opts.deep) compare_data(ck, in_bin, out);
}

}  // namespace ckpt::checks
