#include "model/gguf_load.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "ckpt/name_index.h"
#include "util/parallel.h"

namespace ckpt::gguf_load {

namespace {
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool five_digits(std::string_view s) {
  return s.size() == 5 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
// The format-neutral rows of a parsed GGUF: shape outermost first (ne reversed), byte range
// relative to the data section (header.data_base), names viewing the GGUF's own storage.
void fill_table(const gguf::File& g, st::Header& h) {
  h.file_size = g.file_size;
  h.framing_ok = g.header_ok;
  h.parsed = g.parsed;
  h.data_base = g.data_start;
  h.storage = g.storage;
  if (!g.parsed) return;
  h.tensors.reserve(g.tensors.size());
  for (const auto& t : g.tensors) {
    TensorEntry e;
    e.name = t.name;
    for (uint32_t d = std::max<uint32_t>(t.n_dims, 1); d-- > 0;) e.shape.push_back(static_cast<uint64_t>(t.ne[d]));
    e.begin = t.offset;
    e.end = t.size_ok ? t.offset + t.nbytes : t.offset;
    e.name_hash = hash_name(e.name);
    e.dtype = gguf::dtype_of(t.type);
    h.tensors.push_back(std::move(e));
  }
}

}  // namespace

std::optional<SplitName> parse_split_name(std::string_view rel) {
  // -00001-of-00003.gguf is 20 characters
  if (rel.size() < 20 || !ends_with(rel, ".gguf")) return std::nullopt;
  std::string_view tail = rel.substr(rel.size() - 20);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || !five_digits(tail.substr(1, 5)) || !five_digits(tail.substr(10, 5)))
    return std::nullopt;
  SplitName n;
  n.prefix = std::string(rel.substr(0, rel.size() - 20));
  n.no = static_cast<uint32_t>(std::stoul(std::string(tail.substr(1, 5))));
  n.count = static_cast<uint32_t>(std::stoul(std::string(tail.substr(10, 5))));
  return n;
}

std::string split_file_name(std::string_view prefix, uint32_t no, uint32_t count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", no, count);
  return std::string(prefix) + buf;
}

void load(Checkpoint& ck, unsigned threads, const std::vector<std::string>* blobs) {
  std::vector<const FileEntry*> files;
  for (const auto& f : ck.files) {
    const bool wanted = blobs ? std::find(blobs->begin(), blobs->end(), f.rel) != blobs->end() : ends_with(f.rel, ".gguf");
    if (wanted && f.readable() && f.size > 0) files.push_back(&f);  // FS004 reports empty files
  }
  if (files.empty()) return;
  ck.gguf_shards.resize(files.size());
  parallel::run(files.size(), std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(files.size()))), [&](size_t i) {
    Shard& sh = ck.gguf_shards[i];
    sh.file = files[i]->rel;
    sh.format = Format::gguf;
    sh.gguf = std::make_shared<const gguf::File>(gguf::read_file(files[i]->abs));
    fill_table(*sh.gguf, sh.header);
  });
  // Group: split names by (prefix, count); every other file is its own model.
  std::map<std::pair<std::string, uint32_t>, std::map<uint32_t, uint32_t>> sets;
  for (uint32_t i = 0; i < ck.gguf_shards.size(); ++i) {
    const auto split = parse_split_name(ck.gguf_shards[i].file);
    if (split && split->count >= 1) {
      sets[{split->prefix, split->count}][split->no] = i;
      continue;
    }
    GgufModel m;
    m.name = ck.gguf_shards[i].file;
    m.shards = {i};
    ck.gguf_models.push_back(std::move(m));
  }
  for (auto& [key, members] : sets) {
    GgufModel m;
    m.name = split_file_name(key.first, 1, key.second);
    m.name.replace(m.name.size() - 20, 6, "-*");
    m.split_count = key.second;
    for (uint32_t no = 1; no <= key.second && no <= 99999; ++no) {
      auto it = members.find(no);
      if (it == members.end()) m.missing.push_back(split_file_name(key.first, no, key.second));
      else m.shards.push_back(it->second);
    }
    for (const auto& [no, idx] : members)  // numbered past the count: listed after, judged by GG
      if (no == 0 || no > key.second) m.shards.push_back(idx);
    ck.gguf_models.push_back(std::move(m));
  }
  std::sort(ck.gguf_models.begin(), ck.gguf_models.end(), [](const GgufModel& a, const GgufModel& b) { return a.name < b.name; });
}

}  // namespace ckpt::gguf_load
