#include <numeric>

#include "ckpt/checkpoint.h"

namespace ckpt {

const FileEntry* Checkpoint::file(std::string_view rel) const {
  for (const auto& f : files)
    if (f.rel == rel) return &f;
  return nullptr;
}

const Shard* Checkpoint::shard(std::string_view rel) const {
  for (const auto& s : shards)
    if (s.file == rel) return &s;
  return nullptr;
}

const st::TensorEntry* Checkpoint::weight(std::string_view name) const {
  auto it = weights_.find(std::string(name));
  return it == weights_.end() ? nullptr : it->second.entry;
}

uint64_t Checkpoint::total_tensors() const {
  uint64_t n = 0;
  for (const auto& s : shards) n += s.header.tensors.size();
  return n;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& s : shards) n += s.header.file_size;
  return n;
}

void Checkpoint::finalize() {
  tensors_by_name.clear();
  size_t total = 0;
  for (const auto& s : shards) total += s.header.tensors.size();
  tensors_by_name.reserve(total);
  for (uint32_t si = 0; si < shards.size(); ++si) {
    const auto& ts = shards[si].header.tensors;
    for (uint32_t ei = 0; ei < ts.size(); ++ei) tensors_by_name[ts[ei].name].push_back({si, ei});
  }
  weights_.clear();
  if (index && index->schema_error.empty() && !index->weight_map.empty()) {
    for (const auto& [name, file] : index->weight_map) {
      auto it = tensors_by_name.find(name);
      if (it == tensors_by_name.end()) continue;
      const TensorLoc* chosen = &it->second.front();
      for (const auto& loc : it->second)
        if (shards[loc.shard].file == file) chosen = &loc;
      weights_.emplace(name, WeightTensor{&entry(*chosen), &shards[chosen->shard]});
    }
  } else {
    for (const auto& [name, locs] : tensors_by_name)
      weights_.emplace(name, WeightTensor{&entry(locs.front()), &shards[locs.front().shard]});
  }
}

}  // namespace ckpt
