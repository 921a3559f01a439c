#include <algorithm>
#include <stdexcept>

#include "ckpt/checkpoint.h"

namespace ckpt {

TensorLoc TensorTable::loc_of(uint32_t ordinal) const {
  size_t f = block_start_[ordinal >> kBlockBits];
  while (first_[filled_[f] + 1] <= ordinal) ++f;  // that shard ends before the ordinal
  const uint32_t s = filled_[f];
  return TensorLoc{s, ordinal - first_[s]};
}

TensorTable::Locations TensorTable::locations(uint32_t position) const {
  const auto it = more_.empty() ? more_.end() : more_.find(position);
  return Locations(loc_of(position), it == more_.end() ? nullptr : &it->second);
}

TensorTable::Locations TensorTable::at(std::string_view name) const {
  const uint32_t pos = position(name);
  if (pos == NameIndex::npos) throw std::out_of_range("no tensor named " + std::string(name));
  return locations(pos);
}

bool TensorTable::built_from(const std::vector<Shard>& shards) const {
  if (shards.size() != bases_.size() || first_.empty()) return false;
  for (size_t s = 0; s < shards.size(); ++s)
    if (bases_[s] != shards[s].header.tensors.data() || first_[s + 1] - first_[s] != shards[s].header.tensors.size())
      return false;
  return true;
}

void TensorTable::build(const std::vector<Shard>& shards) {
  clear();
  bases_.reserve(shards.size());
  first_.reserve(shards.size() + 1);
  for (const auto& sh : shards) {
    first_.push_back(static_cast<uint32_t>(total_));
    bases_.push_back(sh.header.tensors.data());
    total_ += sh.header.tensors.size();
  }
  first_.push_back(static_cast<uint32_t>(total_));
  if (total_ >= NameIndex::npos) throw std::length_error("more tensors than a 32-bit position can name");
  for (uint32_t s = 0; s < bases_.size(); ++s)
    if (first_[s + 1] > first_[s]) filled_.push_back(s);
  block_start_.resize((total_ >> kBlockBits) + 1);
  for (size_t b = 0, f = 0; b < block_start_.size(); ++b) {
    const uint64_t start = static_cast<uint64_t>(b) << kBlockBits;
    while (f + 1 < filled_.size() && first_[filled_[f] + 1] <= start) ++f;
    block_start_[b] = static_cast<uint32_t>(f);
  }
  index_.reset(total_);
  const auto name_of = name_at();
  for (uint32_t s = 0; s < bases_.size(); ++s) {
    const st::TensorEntry* es = bases_[s];
    const uint32_t n = first_[s + 1] - first_[s];
    for (uint32_t e = 0; e < n; ++e) {
      // The table is written at random: prefetching a later name's bucket overlaps the misses.
      constexpr size_t kAhead = NameIndex::kPrefetchAhead;
      if (e + kAhead < n) index_.prefetch(es[e + kAhead].name_hash);
      const uint32_t ordinal = first_[s] + e;
      const uint32_t got = index_.insert(es[e].name, es[e].name_hash, ordinal, name_of);
      if (got == ordinal) continue;
      // A later copy of a name: its other locations are kept in shard order.
      if (later_copy_.empty()) later_copy_.assign(total_, false);
      more_[got].push_back(TensorLoc{s, e});
      later_copy_[ordinal] = true;
      ++later_copies_;
    }
  }
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

// Meta's consolidated.NN.pth ranks are not in `shards` (no loader reads them as one table) but
// are weights: the summary counts them.
static bool is_meta_rank(const pt::FileScan& s) {
  return s.weights_read && s.file.find('/') == std::string::npos && s.file.rfind("consolidated.", 0) == 0 &&
         s.file.size() > 4 && s.file.compare(s.file.size() - 4, 4, ".pth") == 0;
}

uint64_t Checkpoint::total_tensors() const {
  uint64_t n = 0;
  for (const auto& s : shards) n += s.header.tensors.size();
  for (const auto& s : gguf_shards) n += s.gguf ? s.gguf->tensors.size() : 0;
  for (const auto& s : pickle_scans) n += is_meta_rank(s) ? s.tensors.size() : 0;
  return n;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& s : shards) n += s.header.file_size;
  for (const auto& s : gguf_shards) n += s.header.file_size;
  for (const auto& s : pickle_scans) n += is_meta_rank(s) ? s.file_size : 0;
  return n;
}

void Checkpoint::finalize() {
  file_by_rel_.clear();
  for (uint32_t i = 0; i < files.size(); ++i) file_by_rel_.emplace(files[i].rel, i);
  shard_by_file_.clear();
  for (uint32_t i = 0; i < shards.size(); ++i) shard_by_file_.emplace(shards[i].file, i);
  // The loader builds the table before reading the index (the index reader resolves names
  // against it); anything built here otherwise, or again if shards were added since.
  const bool rebuilt = !tensors_by_name.built_from(shards);
  if (rebuilt) tensors_by_name.build(shards);
  auto& items = weights_.items_;
  items.clear();
  weights_.by_name_ = NameIndex();
  weights_.index_once_ = std::make_unique<std::once_flag>();
  if (index && index->schema_error.empty() && !index->empty()) {
    const size_t n_entries = index->size();
    // The shard each distinct index file name denotes (npos: not a parsed shard).
    std::vector<uint32_t> shard_of_file(index->files.size(), NameIndex::npos);
    for (size_t f = 0; f < index->files.size(); ++f)
      if (auto it = shard_by_file_.find(index->files[f]); it != shard_by_file_.end()) shard_of_file[f] = it->second;
    // Positions (resolved by the index reader, or looked up here), then which entry claims each
    // tensor: the first entry naming it wins, later ones are duplicates (Python's json keeps
    // the last, so they are reported).
    if (rebuilt || index->positions.size() != n_entries) {
      index->positions.resize(n_entries);
      for (size_t k = 0; k < n_entries; ++k) index->positions[k] = tensors_by_name.position(index->names[k]);
    }
    items.reserve(n_entries);
    std::vector<bool> claimed(tensors_by_name.ordinals());  // by position
    for (size_t k = 0; k < n_entries; ++k) {
      const uint32_t pos = index->positions[k];
      if (pos == NameIndex::npos) continue;
      if (claimed[pos]) {
        index->json.duplicates.push_back({"/weight_map", std::string(index->names[k])});
        continue;
      }
      claimed[pos] = true;
      const uint32_t mapped = shard_of_file[index->file_of[k]];  // the shard the index names (or npos)
      const TensorTable::Locations locs = tensors_by_name.locations(pos);
      const TensorLoc* chosen = &locs.front();
      for (const auto& loc : locs)
        if (loc.shard == mapped) chosen = &loc;
      items.push_back(WeightTensor{&entry(*chosen), &shards[chosen->shard]});
    }
  } else {
    if (index) index->positions.clear();
    items.reserve(tensors_by_name.size());
    uint32_t ordinal = 0;
    for (uint32_t si = 0; si < shards.size(); ++si)
      for (uint32_t ei = 0; ei < shards[si].header.tensors.size(); ++ei, ++ordinal)
        if (!tensors_by_name.is_later_copy(ordinal)) items.push_back(WeightTensor{&shards[si].header.tensors[ei], &shards[si]});
  }
}

}  // namespace ckpt
