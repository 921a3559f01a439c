// The HS family's plan of the --deep pass (internal to src/checks): which files to read, which
// digest to compare each with, and which byte spans hold which tensor's elements. Safetensors
// and GGUF tensors are one contiguous span each; a pickled tensor (hashes_pytorch.cpp) may be
// several spans (a strided view) and big-endian, and its spans' element order may differ from
// its logical (row-major) order, so each span carries where it starts in storage order and the
// tensor carries the map back to logical indexes.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "checks/deep_scan.h"
#include "ckpt/checkpoint.h"

namespace ckpt::checks::hs {

using hub::detail::EtagKind;

// Where the expected digest of a file comes from.
struct Expected {
  EtagKind kind = EtagKind::opaque;
  std::string digest;
  std::string recorded;  // where it is recorded, as a phrase ending before the digest
  std::string fix;       // how to get the right bytes back
};

// Storage-order flat index -> logical (row-major) flat index of a strided tensor: the scanned
// dims sorted by decreasing stride (`sizes`), and each one's row-major weight in the logical
// shape (`logical`). Empty: the two orders are the same.
struct IndexMap {
  std::vector<uint64_t> sizes, logical;
  uint64_t operator()(uint64_t storage_order) const {
    if (sizes.empty()) return storage_order;
    uint64_t flat = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      flat += (storage_order % sizes[d]) * logical[d];
      storage_order /= sizes[d];
    }
    return flat;
  }
};

struct TensorRef {
  std::string file;   // as reported
  std::string name;
  st::DType dtype = st::DType::F32;
  std::vector<uint64_t> shape;
  uint64_t numel = 0;                // elements the spans hold together
  std::vector<uint32_t> spans;       // into the job's tensors
  std::vector<uint64_t> span_first;  // storage-order index of each span's first element
  IndexMap map;
  bool distinct_only = false;        // stride-0 (expanded) dims: each stored value is scanned once
};

struct Plan {
  std::vector<deep::FileJob> jobs;
  std::vector<std::vector<std::string>> rels;  // snapshot entries sharing the file (first = reported)
  std::vector<Expected> expected;
  std::vector<std::vector<TensorRef>> tensors;  // per job
  std::unordered_map<std::string, size_t> by_path;

  size_t job_for(const FileEntry& f) {
    auto [it, fresh] = by_path.emplace(f.abs.string(), jobs.size());
    if (fresh) {
      jobs.push_back({f.abs, EtagKind::opaque, {}});
      rels.push_back({f.rel});
      expected.emplace_back();
      tensors.emplace_back();
    } else if (std::find(rels[it->second].begin(), rels[it->second].end(), f.rel) == rels[it->second].end()) {
      rels[it->second].push_back(f.rel);
    }
    return it->second;
  }
};

// The byte spans of a pickled tensor's elements, in storage order.
struct Strided {
  struct Span {
    uint64_t offset = 0, nbytes = 0;  // absolute file offset
    uint64_t first = 0;               // storage-order index of its first element
  };
  std::vector<Span> spans;
  IndexMap map;
  uint64_t elements = 0;      // distinct elements addressed
  bool distinct_only = false; // stride-0 dims were dropped
};
// nullopt when the tensor cannot be read in at most `max_spans` spans inside its storage (its
// layout is then reported by PT007/PT008, or it is a many-times-strided view).
std::optional<Strided> strided_spans(const pt::Tensor& t, const pt::Storage& s, size_t max_spans);

// The scannable tensors of the PyTorch weight files loaders read (Format::pytorch shards) and
// of Meta's consolidated.NN.pth ranks, straight from their pickles: strided views are scanned
// element by element as they address the storage, big-endian storages are swapped first.
void plan_pickles(const Checkpoint& ck, Plan& plan);

}  // namespace ckpt::checks::hs
