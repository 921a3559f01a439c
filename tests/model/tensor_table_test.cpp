// TensorTable and the weights Checkpoint::finalize() derives from it, checked against a plain
// std::map model on checkpoints built in memory: runs of empty shards (the ordinal -> shard map
// must step over them), one large shard, names stored in up to three shards, and an index that
// maps some names elsewhere, lists one twice and names one no shard holds.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace ckpt::ftest {
namespace {

struct Built {
  Checkpoint ck;
  std::deque<std::string> names;  // what the entries view
  std::map<std::string, std::vector<TensorLoc>> model;  // name -> locations in shard order
};

// shard_sizes[s] entries in shard s; entry e of shard s is named name_of(s, e).
template <class NameOf>
void fill(Built& b, const std::vector<size_t>& shard_sizes, const NameOf& name_of) {
  for (size_t s = 0; s < shard_sizes.size(); ++s) {
    Shard sh;
    sh.file = "shard-" + std::to_string(s) + ".safetensors";
    sh.header.parsed = true;
    for (size_t e = 0; e < shard_sizes[s]; ++e) {
      const std::string& name = b.names.emplace_back(name_of(s, e));
      st::TensorEntry t;
      t.name = name;
      t.name_hash = hash_name(name);
      t.dtype = st::DType::F32;
      t.shape = st::Shape{static_cast<uint64_t>(s), static_cast<uint64_t>(e)};  // tells the copies apart
      sh.header.tensors.push_back(std::move(t));
      b.model[name].push_back(TensorLoc{static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
    }
    b.ck.shards.push_back(std::move(sh));
  }
}

void expect_table_matches_model(const Built& b) {
  const TensorTable& t = b.ck.tensors_by_name;
  EXPECT_EQ(t.size(), b.model.size());
  size_t total = 0;
  for (const auto& sh : b.ck.shards) total += sh.header.tensors.size();
  EXPECT_EQ(t.ordinals(), total);
  for (const auto& [name, locs] : b.model) {
    ASSERT_EQ(t.count(name), 1u) << name;
    const TensorTable::Locations got = t.at(name);
    ASSERT_EQ(got.size(), locs.size()) << name;
    for (size_t i = 0; i < locs.size(); ++i) {
      EXPECT_EQ(got[i].shard, locs[i].shard) << name;
      EXPECT_EQ(got[i].entry, locs[i].entry) << name;
      EXPECT_EQ(b.ck.entry(got[i]).name, name);
    }
  }
  // Every ordinal maps back to its (shard, entry); only first copies are not later copies.
  uint32_t ordinal = 0;
  for (uint32_t s = 0; s < b.ck.shards.size(); ++s)
    for (uint32_t e = 0; e < b.ck.shards[s].header.tensors.size(); ++e, ++ordinal) {
      const TensorLoc l = t.loc_of(ordinal);
      ASSERT_EQ(l.shard, s);
      ASSERT_EQ(l.entry, e);
      const auto& first = b.model.at(b.names[ordinal]).front();
      EXPECT_EQ(t.is_later_copy(ordinal), first.shard != s || first.entry != e) << b.names[ordinal];
    }
  EXPECT_EQ(t.count("no.such.tensor"), 0u);
  EXPECT_THROW(t.at("no.such.tensor"), std::out_of_range);
}

TEST(tensor_table, empty_shard_runs_and_copies_match_a_plain_map) {
  Built b;
  // 300 empty shards, a 1-entry shard, 150 more empty ones, a 500-entry shard, then shards of
  // 1..70 entries separated by empty ones: ordinal blocks begin inside and beyond each run.
  std::vector<size_t> sizes(300, 0);
  sizes.push_back(1);
  sizes.insert(sizes.end(), 150, 0);
  sizes.push_back(500);
  for (size_t n = 1; n <= 70; ++n) {
    sizes.push_back(n);
    sizes.push_back(0);
  }
  // Names repeat across shards: "w<e % 97>" is stored in every shard with that many entries.
  fill(b, sizes, [](size_t s, size_t e) {
    return e % 7 == 3 ? "w" + std::to_string(e % 97) : "s" + std::to_string(s) + ".e" + std::to_string(e);
  });
  b.ck.finalize();
  expect_table_matches_model(b);
  // Without an index, the weights are the first copy of each name, in shard order.
  std::vector<std::string> expected;
  uint32_t ordinal = 0;
  for (uint32_t s = 0; s < b.ck.shards.size(); ++s)
    for (uint32_t e = 0; e < b.ck.shards[s].header.tensors.size(); ++e, ++ordinal) {
      const auto& first = b.model.at(b.names[ordinal]).front();
      if (first.shard == s && first.entry == e) expected.push_back(b.names[ordinal]);
    }
  std::vector<std::string> got;
  for (const auto& [name, w] : b.ck.weights()) got.emplace_back(name);
  EXPECT_EQ(got, expected);
}

TEST(tensor_table, random_checkpoints_match_a_plain_map) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    Built b;
    std::vector<size_t> sizes(1 + rng() % 40);
    for (auto& n : sizes) n = rng() % 3 == 0 ? 0 : rng() % 200;
    const size_t distinct = 1 + rng() % 600;
    fill(b, sizes, [&](size_t, size_t) { return "t" + std::to_string(rng() % distinct); });
    b.ck.finalize();
    expect_table_matches_model(b);
  }
}

TEST(tensor_table, index_entries_take_the_mapped_copy_and_report_repeats) {
  Built b;
  fill(b, {3, 0, 3}, [](size_t s, size_t e) { return e == 0 ? std::string("shared") : "s" + std::to_string(s) + "." + std::to_string(e); });
  ShardIndex idx;
  idx.files = {b.ck.shards[0].file, b.ck.shards[2].file};
  auto add = [&](std::string_view name, uint32_t file) {
    idx.names.push_back(name);
    idx.file_of.push_back(file);
  };
  add("s0.1", 0);
  add("shared", 1);  // stored in shards 0 and 2; the index maps it to shard 2
  add("absent", 0);  // no shard holds it
  add("s2.2", 1);
  add("s0.1", 0);    // listed again
  b.ck.index = std::move(idx);
  b.ck.finalize();
  expect_table_matches_model(b);
  const auto& pos = b.ck.index_positions();
  ASSERT_EQ(pos.size(), 5u);
  EXPECT_EQ(pos[2], NameIndex::npos);
  EXPECT_EQ(pos[0], pos[4]);
  EXPECT_NE(pos[1], NameIndex::npos);
  ASSERT_EQ(b.ck.weights().size(), 3u);
  const auto& shared = b.ck.weights().at("shared");
  EXPECT_EQ(shared.shard, &b.ck.shards[2]) << "the copy in the mapped shard is the one loaders see";
  EXPECT_EQ(shared.entry->shape[0], 2u);
  std::vector<std::string> order;
  for (const auto& [name, w] : b.ck.weights()) order.emplace_back(name);
  EXPECT_EQ(order, (std::vector<std::string>{"s0.1", "shared", "s2.2"}));
  ASSERT_EQ(b.ck.index->json.duplicates.size(), 1u);
  EXPECT_EQ(b.ck.index->json.duplicates[0].key, "s0.1");
}

TEST(tensor_table, no_shards_no_names) {
  Checkpoint ck;
  ck.finalize();
  EXPECT_TRUE(ck.tensors_by_name.empty());
  EXPECT_EQ(ck.tensors_by_name.count("x"), 0u);
  EXPECT_TRUE(ck.weights().empty());
}

}  // namespace
}  // namespace ckpt::ftest
