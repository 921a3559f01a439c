#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "ckpt/checkpoint.h"

namespace ckpt {

static_assert(sizeof(TensorLocs) == 16, "one per tensor name: keep it small");

TensorTable::const_iterator TensorTable::find(std::string_view name, uint64_t hash) const {
  uint32_t i = index_.find(name, hash, [this](uint32_t k) { return items_[k].first; });
  return i == NameIndex::npos ? items_.end() : items_.begin() + i;
}

TensorTable::iterator TensorTable::find(std::string_view name, uint64_t hash) {
  uint32_t i = index_.find(name, hash, [this](uint32_t k) { return items_[k].first; });
  return i == NameIndex::npos ? items_.end() : items_.begin() + i;
}

const TensorLocs& TensorTable::at(std::string_view name) const {
  auto it = find(name);
  if (it == end()) throw std::out_of_range("no tensor named " + std::string(name));
  return it->second;
}

void TensorTable::clear() {
  items_.clear();
  index_ = NameIndex();
}

void TensorTable::reserve(size_t n) {
  items_.reserve(n);
  index_.reset(std::max(n, items_.size()));
  auto name_at = [this](uint32_t k) { return items_[k].first; };
  for (uint32_t i = 0; i < items_.size(); ++i) index_.insert(items_[i].first, hash_name(items_[i].first), i, name_at);
}

TensorLocs& TensorTable::insert(std::string_view name, uint64_t hash) {
  if (index_.empty() || !NameIndex::fits(items_.size() + 1, index_.capacity()))
    reserve(std::max<size_t>(16, 2 * items_.size()));
  auto name_at = [this](uint32_t k) { return items_[k].first; };
  uint32_t pos = static_cast<uint32_t>(items_.size());
  uint32_t got = index_.insert(name, hash, pos, name_at);
  if (got == pos) items_.emplace_back(name, TensorLocs{});
  return items_[got].second;
}

const FileEntry* Checkpoint::file(std::string_view rel) const {
  if (file_by_rel_.size() == files.size()) {
    auto it = file_by_rel_.find(rel);
    return it == file_by_rel_.end() ? nullptr : &files[it->second];
  }
  for (const auto& f : files)  // before finalize()
    if (f.rel == rel) return &f;
  return nullptr;
}

const Shard* Checkpoint::shard(std::string_view rel) const {
  if (shard_by_file_.size() == shards.size()) {
    auto it = shard_by_file_.find(rel);
    return it == shard_by_file_.end() ? nullptr : &shards[it->second];
  }
  for (const auto& s : shards)
    if (s.file == rel) return &s;
  return nullptr;
}

uint32_t Checkpoint::WeightMap::position(std::string_view name) const {
  auto name_at = [this](uint32_t i) { return items_[i].entry->name; };
  std::call_once(*index_once_, [&] {
    by_name_.reset(items_.size());
    for (uint32_t i = 0; i < items_.size(); ++i)
      by_name_.insert(items_[i].entry->name, items_[i].entry->name_hash, i, name_at);
  });
  return by_name_.find(name, hash_name(name), name_at);
}

Checkpoint::WeightMap::const_iterator Checkpoint::WeightMap::find(std::string_view name) const {
  const uint32_t i = position(name);
  return i == NameIndex::npos ? end() : const_iterator(items_.data() + i);
}

const Checkpoint::WeightTensor& Checkpoint::WeightMap::at(std::string_view name) const {
  const uint32_t i = position(name);
  if (i == NameIndex::npos) throw std::out_of_range("no weight named " + std::string(name));
  return items_[i];
}

const st::TensorEntry* Checkpoint::weight(std::string_view name) const {
  auto it = weights_.find(name);
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
  file_by_rel_.clear();
  for (uint32_t i = 0; i < files.size(); ++i) file_by_rel_.emplace(files[i].rel, i);
  shard_by_file_.clear();
  for (uint32_t i = 0; i < shards.size(); ++i) shard_by_file_.emplace(shards[i].file, i);
  tensors_by_name.clear();
  size_t total = 0;
  for (const auto& s : shards) total += s.header.tensors.size();
  tensors_by_name.reserve(total);
  // Inserts and lookups below touch a multi-megabyte table at random: each bucket is
  // prefetched kAhead names early so the misses overlap instead of queueing (the table was
  // sized once above, so prefetched buckets stay where they are).
  constexpr size_t kAhead = 16;
  for (uint32_t si = 0; si < shards.size(); ++si) {
    const auto& ts = shards[si].header.tensors;
    for (uint32_t ei = 0; ei < ts.size(); ++ei) {
      if (ei + kAhead < ts.size()) tensors_by_name.prefetch_bucket(ts[ei + kAhead].name_hash);
      tensors_by_name.insert(ts[ei].name, ts[ei].name_hash).push_back({si, ei});
    }
  }
  auto& items = weights_.items_;
  items.clear();
  weights_.by_name_ = NameIndex();
  weights_.index_once_ = std::make_unique<std::once_flag>();
  index_positions_.clear();
  if (index && index->schema_error.empty() && !index->empty()) {
    items.reserve(index->size());
    index_positions_.reserve(index->size());
    const bool hashed = index->name_hashes.size() == index->size();
    // The shard each distinct index file name denotes (npos: not a parsed shard).
    std::vector<uint32_t> shard_of_file(index->files.size(), NameIndex::npos);
    for (size_t f = 0; f < index->files.size(); ++f)
      if (auto it = shard_by_file_.find(index->files[f]); it != shard_by_file_.end()) shard_of_file[f] = it->second;
    const size_t n_entries = index->size();
    std::vector<bool> claimed(tensors_by_name.size());  // an index entry already took this name
    for (size_t k = 0; k < n_entries; ++k) {
      if (hashed && k + 2 * kAhead < n_entries) tensors_by_name.prefetch_bucket(index->name_hashes[k + 2 * kAhead]);
      if (hashed && k + kAhead < n_entries) tensors_by_name.prefetch_entry(index->name_hashes[k + kAhead]);
      const std::string_view name = index->names[k];
      auto it = tensors_by_name.find(name, hashed ? index->name_hashes[k] : hash_name(name));
      index_positions_.push_back(it == tensors_by_name.end() ? NameIndex::npos
                                                             : static_cast<uint32_t>(it - tensors_by_name.begin()));
      if (it == tensors_by_name.end()) continue;
      TensorLocs& locs = it->second;
      std::vector<bool>::reference is_claimed = claimed[static_cast<size_t>(it - tensors_by_name.begin())];
      if (is_claimed) {  // the index lists this name twice (Python's json keeps the last entry)
        index->json.duplicates.push_back({"/weight_map", std::string(name)});
        continue;
      }
      is_claimed = true;
      const uint32_t mapped = shard_of_file[index->file_of[k]];  // the shard the index names (or npos)
      const TensorLoc* chosen = &locs.front();
      for (const auto& loc : locs)
        if (loc.shard == mapped) chosen = &loc;
      items.push_back(WeightTensor{&entry(*chosen), &shards[chosen->shard]});
    }
  } else {
    items.reserve(tensors_by_name.size());
    for (uint32_t si = 0; si < shards.size(); ++si)
      for (uint32_t ei = 0; ei < shards[si].header.tensors.size(); ++ei) {
        const auto& t = shards[si].header.tensors[ei];
        const TensorLocs& locs = tensors_by_name.find(t.name, t.name_hash)->second;
        if (locs.front().shard != si || locs.front().entry != ei) continue;  // first copy wins
        items.push_back(WeightTensor{&t, &shards[si]});
      }
  }
}

}  // namespace ckpt
