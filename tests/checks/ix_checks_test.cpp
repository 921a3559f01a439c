// IX: the shard index against the shards on disk — every code from a planted defect,
// the index-paths corpus, and hostile index documents.
#include <gtest/gtest.h>

#include "builders.h"

namespace ckpt::ftest {
namespace {

using st::DType;

const std::string kS1 = "model-00001-of-00002.safetensors";
const std::string kS2 = "model-00002-of-00002.safetensors";
const std::string kIdx = "model.safetensors.index.json";

std::vector<Finding> ix(const fs::path& d) { return only(verify(d), {"IX"}); }

TEST(ix_checks, clean_two_shard_index) {
  TempDir d;
  make_two_shard(d.path());
  auto all = verify(d.path());
  expect_clean(all);
  EXPECT_TRUE(only(all, {"IX"}).empty()) << dump(all);
  Checkpoint ck = load_ok(d.path());
  EXPECT_EQ(ck.weights().size(), 4u);
  ASSERT_TRUE(ck.index);
  EXPECT_EQ(ck.index->total_size, 104u);
}

TEST(ix_checks, single_file_without_index_is_fine) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  EXPECT_TRUE(ix(d.path()).empty());
}

TEST(ix_checks, IX001_index_names_missing_shard) {
  TempDir d;
  make_two_shard(d.path());
  fs::remove(d / kS2);
  auto s = ix(d.path());
  const Finding* f = find(s, "IX001", kIdx);
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "2 tensor(s)") && contains(f->message, kS2)) << f->message;
  EXPECT_EQ(find(s, "IX005"), nullptr) << "tensors of a missing shard are IX001, not IX005:\n" << dump(s);
}

TEST(ix_checks, IX002_stray_shard_without_collision) {
  TempDir d;
  make_two_shard(d.path());
  write_st(d / "extra-not-in-index.safetensors", {{"extra.w"}});
  auto s = ix(d.path());
  const Finding* f = find(s, "IX002", "extra-not-in-index.safetensors");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "none of them indexed")) << f->message;
  EXPECT_EQ(f->tensor, "");
}

TEST(ix_checks, IX002_stray_shard_with_collision) {
  TempDir d;
  make_two_shard(d.path());
  write_st(d / "old.safetensors", {{"lm_head.weight", DType::F32, {3}}, {"other"}});
  auto s = ix(d.path());
  const Finding* f = find(s, "IX002", "old.safetensors");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "1 collide")) << f->message;
  EXPECT_TRUE(contains(f->message, "lm_head.weight")) << f->message;
  EXPECT_EQ(f->tensor, "lm_head.weight");
}

TEST(ix_checks, IX003_tensor_in_two_shards) {
  TempDir d;
  write_st(d / kS1, {{"a"}, {"mtp.w"}});
  write_st(d / kS2, {{"b"}, {"mtp.w"}});
  write_text(d / kIdx, index_json({{"a", kS1}, {"mtp.w", kS1}, {"b", kS2}}, 48));
  auto s = ix(d.path());
  const Finding* f = find(s, "IX003", std::nullopt, "mtp.w");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "2 shards")) << f->message;
  EXPECT_EQ(f->file, kS2) << "the finding names the stale copy";
  // The stale copy is reported once, by IX003, not again as an unlisted tensor.
  EXPECT_EQ(find(s, "IX011", kS2, "mtp.w"), nullptr) << dump(s);
}

TEST(ix_checks, IX004_tensor_in_wrong_shard) {
  TempDir d;
  write_st(d / kS1, {{"a"}});
  write_st(d / kS2, {{"b"}, {"lm_head.weight"}});
  write_text(d / kIdx, index_json({{"a", kS1}, {"b", kS2}, {"lm_head.weight", kS1}}, 48));
  auto s = ix(d.path());
  const Finding* f = find(s, "IX004", std::nullopt, "lm_head.weight");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, kS1) && contains(f->message, kS2)) << f->message;
  EXPECT_EQ(find(s, "IX005"), nullptr) << dump(s);
}

TEST(ix_checks, IX005_indexed_tensor_absent) {
  TempDir d;
  write_st(d / kS1, {{"a"}});
  write_st(d / kS2, {{"b"}});
  write_text(d / kIdx, index_json({{"a", kS1}, {"b", kS2}, {"model.norm.weight", kS2}}));
  auto s = ix(d.path());
  const Finding* f = find(s, "IX005", kS2, "model.norm.weight");
  ASSERT_NE(f, nullptr) << dump(s);
}

TEST(ix_checks, IX006_total_size_mismatch) {
  TempDir d;
  make_two_shard(d.path());
  write_text(d / kIdx, index_json({{"a.weight", kS1}, {"b.weight", kS1}, {"c.weight", kS2}, {"lm_head.weight", kS2}}, 8900));
  auto s = ix(d.path());
  const Finding* f = find(s, "IX006", kIdx);
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "8900") && contains(f->message, "104")) << f->message;
  EXPECT_TRUE(contains(f->message, "over")) << f->message;
  write_text(d / kIdx, index_json({{"a.weight", kS1}, {"b.weight", kS1}, {"c.weight", kS2}, {"lm_head.weight", kS2}}, 0));
  s = ix(d.path());
  f = find(s, "IX006", kIdx);
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "under")) << f->message;
}

TEST(ix_checks, IX006_exact_total_and_absent_total_are_fine) {
  TempDir d;
  make_two_shard(d.path());
  EXPECT_EQ(find(ix(d.path()), "IX006"), nullptr);
  write_text(d / kIdx, index_json({{"a.weight", kS1}, {"b.weight", kS1}, {"c.weight", kS2}, {"lm_head.weight", kS2}}));
  EXPECT_EQ(find(ix(d.path()), "IX006"), nullptr);
}

TEST(ix_checks, IX006_bitsandbytes_weight_format_exception) {
  TempDir d;
  // int8 weights + one-byte weight_format tensors, which bitsandbytes leaves out of total_size.
  write_st(d / kS1, {{"l0.weight", DType::I8, {4, 4}}, {"l0.weight_format", DType::U8, {1}}});
  write_st(d / kS2, {{"l1.weight", DType::I8, {4, 4}}, {"l1.weight_format", DType::U8, {1}}});
  auto map = std::vector<std::pair<std::string, std::string>>{
      {"l0.weight", kS1}, {"l0.weight_format", kS1}, {"l1.weight", kS2}, {"l1.weight_format", kS2}};
  write_text(d / kIdx, index_json(map, 32));  // 34 stored, 2 of them weight_format
  EXPECT_EQ(find(ix(d.path()), "IX006"), nullptr) << dump(ix(d.path()));
  write_text(d / kIdx, index_json(map, 34));
  EXPECT_EQ(find(ix(d.path()), "IX006"), nullptr);
  write_text(d / kIdx, index_json(map, 31));  // neither exact nor the exception
  EXPECT_NE(find(ix(d.path()), "IX006"), nullptr);
}

TEST(ix_checks, IX007_several_shards_without_index) {
  TempDir d;
  make_two_shard(d.path());
  fs::remove(d / kIdx);
  auto s = ix(d.path());
  const Finding* f = find(s, "IX007");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, kS1) && contains(f->message, kS2)) << f->message;
}

TEST(ix_checks, IX007_not_for_mistral_consolidated) {
  TempDir d;
  write_st(d / "consolidated.safetensors", {{"tok_embeddings.weight"}});
  write_st(d / "model.safetensors", {{"model.embed_tokens.weight"}});
  write_text(d / "params.json", "{}");
  EXPECT_EQ(find(ix(d.path()), "IX007"), nullptr) << dump(ix(d.path()));
}

TEST(ix_checks, IX008_unsafe_paths) {
  for (std::string bad : {"../../outside/model.safetensors", "/etc/passwd", "..\\..\\outside\\model.safetensors",
                          "C:/x.safetensors", "sub/../../x.safetensors", "./../x.safetensors"}) {
    SCOPED_TRACE(bad);
    TempDir d;
    write_st(d / "model.safetensors", {{"a"}});
    write_text(d / kIdx, index_json({{"a", "model.safetensors"}, {"w", bad}}));
    auto s = ix(d.path());
    const Finding* f = find(s, "IX008", kIdx, "w");
    ASSERT_NE(f, nullptr) << dump(s);
    EXPECT_TRUE(contains(f->message, "did not open")) << f->message;
    EXPECT_EQ(find(s, "IX001"), nullptr) << "an unsafe path is not looked up on disk:\n" << dump(s);
  }
}

TEST(ix_checks, IX008_target_outside_is_never_opened) {
  // Plant a real shard where "../outside/model.safetensors" leads: it must not be parsed.
  TempDir top;
  fs::path d = top / "models" / "m";
  fs::create_directories(d);
  write_st(top / "models" / "outside" / "model.safetensors", {{"w"}, {"outside.only"}});
  write_st(d / "model.safetensors", {{"a"}});
  write_text(d / kIdx, index_json({{"a", "model.safetensors"}, {"w", "../outside/model.safetensors"}}));
  Checkpoint ck = load_ok(d);
  EXPECT_EQ(ck.shards.size(), 1u);
  for (const auto& sh : ck.shards) EXPECT_EQ(sh.file.find(".."), std::string::npos) << sh.file;
  EXPECT_EQ(ck.tensors_by_name.count("outside.only"), 0u);
  EXPECT_EQ(ck.tensors_by_name.count("w"), 0u);
  auto all = run_checks(ck);
  EXPECT_NE(find(all, "IX008", kIdx, "w"), nullptr) << dump(all);
  for (const auto& f : all) EXPECT_FALSE(contains(f.message, "outside.only")) << dump(all);
}

TEST(ix_checks, IX009_mixed_totals_in_index) {
  TempDir d;
  write_st(d / "model-00001-of-00002.safetensors", {{"a"}});
  write_st(d / "model-00002-of-00003.safetensors", {{"b"}});
  write_text(d / kIdx, index_json({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00003.safetensors"}}));
  auto s = ix(d.path());
  EXPECT_NE(find(s, "IX009", kIdx), nullptr) << dump(s);
}

TEST(ix_checks, IX009_index_names_other_export_than_disk) {
  TempDir d;
  write_st(d / "model.safetensors", {{"a"}, {"b"}});
  write_text(d / kIdx, index_json({{"a", kS1}, {"b", kS2}}));
  auto s = ix(d.path());
  const Finding* f = find(s, "IX009", kIdx);
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "'-of-00002'") && contains(f->message, "model.safetensors")) << f->message;
}

TEST(ix_checks, IX009_gap_and_beyond_total_on_disk) {
  TempDir d;
  write_st(d / "model-00001-of-00003.safetensors", {{"a"}});
  write_st(d / "model-00003-of-00003.safetensors", {{"c"}});
  write_st(d / "model-00004-of-00003.safetensors", {{"e"}});
  auto s = ix(d.path());  // no index: IX007 plus the numbering
  const Finding* f = find(s, "IX009");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "missing part(s) 2")) << f->message;
  EXPECT_TRUE(contains(f->message, "beyond the total: 4")) << f->message;
}

TEST(ix_checks, IX009_gpt_oss_zero_based_names_accepted) {
  TempDir d;
  std::vector<std::pair<std::string, std::string>> map;
  for (int i = 0; i <= 2; ++i) {
    std::string name = "model-0000" + std::to_string(i) + "-of-00002.safetensors";
    std::string t = "t" + std::to_string(i);
    write_st(d / name, {{t}});
    map.push_back({t, name});
  }
  write_text(d / kIdx, index_json(map, 48));
  auto all = verify(d.path());
  EXPECT_TRUE(only(all, {"IX"}).empty()) << dump(all);
  expect_clean(all);
}

TEST(ix_checks, IX009_one_based_missing_part_zero_based_incomplete) {
  TempDir d;
  // 0-based set missing its last part: neither 1..N nor 0..N.
  write_st(d / "model-00000-of-00002.safetensors", {{"a"}});
  write_st(d / "model-00001-of-00002.safetensors", {{"b"}});
  write_text(d / kIdx, index_json({{"a", "model-00000-of-00002.safetensors"}, {"b", "model-00001-of-00002.safetensors"}}));
  auto s = ix(d.path());
  EXPECT_NE(find(s, "IX009"), nullptr) << dump(s);
}

TEST(ix_checks, IX010_malformed_index) {
  struct Case {
    std::string text, needle;
  };
  const Case cases[] = {
      {"{\"weight_map\": {\"a\": \"model.safetensors\",}}", "line 1"},
      {"{\n  \"weight_map\": {\n    \"a\": \"model.safetensors\"\n  ,}\n}", "line 4"},
      {"[1, 2]", "not a JSON object"},
      {"{\"metadata\": {}}", "weight_map"},
      {"{\"weight_map\": [\"model.safetensors\"]}", "weight_map"},
      {"{\"weight_map\": {\"a\": 5}}", "weight_map[\"a\"]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    TempDir d;
    write_st(d / "model.safetensors", {{"a"}});
    write_text(d / kIdx, c.text);
    auto s = ix(d.path());
    const Finding* f = find(s, "IX010", kIdx);
    ASSERT_NE(f, nullptr) << dump(s);
    EXPECT_TRUE(contains(f->message, c.needle)) << f->message;
  }
}

TEST(ix_checks, IX010_deeply_nested_index) {
  TempDir d;
  write_st(d / "model.safetensors", {{"a"}});
  write_text(d / kIdx, "{\"weight_map\": " + std::string(10000, '[') + std::string(10000, ']') + "}");
  auto s = ix(d.path());
  EXPECT_NE(find(s, "IX010", kIdx), nullptr) << dump(s);
}

TEST(ix_checks, IX011_unlisted_tensor) {
  TempDir d;
  make_two_shard(d.path());
  write_st(d / kS2, {{"c.weight", DType::F16, {2, 3}}, {"lm_head.weight", DType::F32, {3}}, {"mtp.hidden"}});
  auto s = ix(d.path());
  const Finding* f = find(s, "IX011", kS2, "mtp.hidden");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "1 tensor(s)")) << f->message;
}

TEST(ix_checks, IX012_consolidated_beside_shards) {
  TempDir d;
  make_two_shard(d.path());
  write_st(d / "consolidated.safetensors", {{"tok_embeddings.weight"}});
  write_text(d / "params.json", "{\"dim\": 4}");
  auto s = ix(d.path());
  const Finding* f = find(s, "IX012", "consolidated.safetensors");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_EQ(f->severity, Severity::warning);
  EXPECT_EQ(find(s, "IX002"), nullptr) << "consolidated is not a stray HF shard:\n" << dump(s);
  fs::remove(d / "params.json");
  s = ix(d.path());
  f = find(s, "IX012", "consolidated.safetensors");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_EQ(f->severity, Severity::error) << "without params.json it is an error";
}

TEST(ix_checks, IX013_duplicate_weight_map_key) {
  TempDir d;
  write_st(d / "model.safetensors", {{"lm_head.weight"}});
  write_text(d / kIdx,
             R"({"weight_map": {"lm_head.weight": "model.safetensors", "lm_head.weight": "model.safetensors"}})");
  auto s = ix(d.path());
  const Finding* f = find(s, "IX013", kIdx, "lm_head.weight");
  ASSERT_NE(f, nullptr) << dump(s);
  // A duplicate key elsewhere (metadata) is not IX013.
  write_text(d / kIdx, R"({"metadata": {"x": 1, "x": 2}, "weight_map": {"lm_head.weight": "model.safetensors"}})");
  EXPECT_EQ(find(ix(d.path()), "IX013"), nullptr);
}

TEST(ix_checks, subdirectory_shards_join_through_the_index) {
  TempDir d;
  write_st(d / "sub" / "part.safetensors", {{"a"}});
  write_st(d / "unindexed" / "x.safetensors", {{"hidden"}});
  write_text(d / kIdx, index_json({{"a", "sub/part.safetensors"}}, 16));
  Checkpoint ck = load_ok(d.path());
  ASSERT_NE(ck.shard("sub/part.safetensors"), nullptr);
  EXPECT_EQ(ck.shard("unindexed/x.safetensors"), nullptr);
  auto all = run_checks(ck);
  // Clean for index-driven loaders; the one IX finding is IX014: mlx-lm globs model*.safetensors
  // at the top level and never opens sub/part.safetensors (a warning naming it, portable).
  auto ix_findings = only(all, {"IX"});
  ASSERT_EQ(ix_findings.size(), 1u) << dump(all);
  EXPECT_EQ(ix_findings[0].code, "IX014");
  EXPECT_EQ(ix_findings[0].severity, Severity::warning);
  EXPECT_EQ(ix_findings[0].engines, std::vector<std::string>{"mlx-lm"});
  expect_clean(all);
}

TEST(ix_hostile, megabyte_shard_name_in_index) {
  // Shard names come from the index: a 1 MB name must not exhaust the stack in name parsing.
  TempDir d;
  write_st(d / "model.safetensors", {{"a"}});
  std::string huge(1 << 20, 'a');
  write_text(d / kIdx, index_json({{"a", "model.safetensors"}, {"w", huge + "-00001-of-00002.safetensors"},
                                   {"x", std::string(1 << 20, '-') + "1-of-2.safetensors"}}));
  auto s = ix(d.path());
  EXPECT_EQ(with_code(s, "IX001").size(), 2u) << dump(s).substr(0, 2000);
}

TEST(ix_hostile, huge_numbers_in_shard_names) {
  TempDir d;
  write_st(d / "model-999999999-of-999999999.safetensors", {{"a"}});
  write_st(d / "model-00001-of-4294967297.safetensors", {{"b"}});
  auto s = ix(d.path());  // no index: IX007, numbering problems, no hang
  EXPECT_NE(find(s, "IX007"), nullptr) << dump(s);
}

// ---- the index-paths corpus ----------------------------------------------------------

TEST(ix_corpus, traversal_cases_are_IX008_and_never_opened) {
  CKPT_REQUIRE_CORPUS();
  for (const char* c : {"dotdot", "absolute", "backslash"}) {
    SCOPED_TRACE(c);
    TempDir top;
    // The dotdot target ../../outside/model.safetensors, relative to top/a/m, is top/outside/...
    fs::path d = top / "a" / "m";
    fs::create_directories(d);
    write_st(top / "outside" / "model.safetensors", {{"w", DType::F32, {4}}, {"planted.outside"}});
    fs::copy_file(test::corpus_dir() / "index-paths" / (kIdx + "." + c), d / kIdx);
    write_st(d / "model.safetensors", {{"local"}});
    Checkpoint ck = load_ok(d);
    ASSERT_TRUE(ck.index);
    ASSERT_EQ(ck.index->size(), 1u);
    EXPECT_EQ(ck.tensors_by_name.count("planted.outside"), 0u);
    EXPECT_EQ(ck.tensors_by_name.count("w"), 0u);
    for (const auto& sh : ck.shards) EXPECT_EQ(sh.file, "model.safetensors");
    EXPECT_EQ(ck.weight("w"), nullptr);
    auto all = run_checks(ck);
    const Finding* f = find(all, "IX008", kIdx, "w");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_TRUE(contains(f->message, std::string(ck.index->entry(0).second))) << f->message;
  }
}

TEST(ix_corpus, subdir_ok_is_accepted) {
  CKPT_REQUIRE_CORPUS();
  TempDir d;
  fs::copy_file(test::corpus_dir() / "index-paths" / (kIdx + ".subdir_ok"), d / kIdx);
  write_st(d / "model-00001-of-00001.safetensors", {{"w", DType::F32, {4}}});  // 16 bytes = total_size
  auto all = verify(d.path());
  EXPECT_TRUE(only(all, {"IX"}).empty()) << dump(all);
  expect_clean(all);
}

}  // namespace
}  // namespace ckpt::ftest
