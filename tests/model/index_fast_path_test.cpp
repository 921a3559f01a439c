// The index reader scans regular indexes in one pass, reading through a 256 KiB buffer chunk by
// chunk, and takes the simdjson path (whole file) for anything else. Same logical index, both
// spellings: identical results.
#include <gtest/gtest.h>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "test_support.h"

namespace ckpt::test {
namespace {

std::string describe_index(const std::string& index_json, std::string* path = nullptr, const LoadOptions& opts = {}) {
  TempDir dir;
  std::vector<st::TensorToWrite> a{{"x.w", st::DType::F32, {2}, {}}, {"y\"q", st::DType::F32, {1}, {}}};
  std::vector<st::TensorToWrite> b{{"z.w", st::DType::U8, {3}, {}}};
  EXPECT_EQ(st::write_file(dir / "model-00001-of-00002.safetensors", a), "");
  EXPECT_EQ(st::write_file(dir / "model-00002-of-00002.safetensors", b), "");
  write_text(dir / "model.safetensors.index.json", index_json);
  auto r = load_checkpoint(dir.path().string(), opts);
  EXPECT_TRUE(r.checkpoint);
  if (!r.checkpoint) return "no checkpoint";
  const Checkpoint& ck = *r.checkpoint;
  std::string s;
  const ShardIndex& idx = *ck.index;
  s += "error=" + std::string(idx.json.error ? idx.json.error->message : "") + " schema=" + idx.schema_error + "\n";
  if (path) *path = idx.general_path ? "general" : "one-pass";
  s += "total=" + (idx.total_size ? std::to_string(*idx.total_size) : std::string("none")) + "\n";
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto [n, f] = idx.entry(k);
    s += std::string(n) + " -> " + std::string(f);
    if (k < ck.index_positions().size())
      s += ck.index_positions()[k] == NameIndex::npos ? " (absent)" : " (found)";
    s += "\n";
  }
  for (const auto& d : idx.json.duplicates) s += "dup " + d.key + "\n";
  s += "weights=" + std::to_string(ck.weights().size()) + "\n";
  return s;
}

TEST(index_fast_path, regular_and_irregular_spellings_agree) {
  const std::string regular =
      R"({"metadata":{"total_size":15,"format":"pt"},"weight_map":{"x.w":"model-00001-of-00002.safetensors",)"
      R"("z.w":"model-00002-of-00002.safetensors","gone":"model-00002-of-00002.safetensors"}})";
  // An escape inside weight_map (the letter w) forces the general path.
  const std::string escaped =
      R"({"metadata":{"total_size":15,"format":"pt"},"weight_map":{"x.\u0077":"model-00001-of-00002.safetensors",)"
      R"("z.w":"model-00002-of-00002.safetensors","gone":"model-00002-of-00002.safetensors"}})";
  std::string want = describe_index(regular);
  EXPECT_NE(want.find("total=15"), std::string::npos) << want;
  EXPECT_NE(want.find("gone -> model-00002-of-00002.safetensors (absent)"), std::string::npos) << want;
  EXPECT_NE(want.find("x.w -> model-00001-of-00002.safetensors (found)"), std::string::npos) << want;
  EXPECT_EQ(describe_index(escaped), want);
}

TEST(index_fast_path, metadata_shapes_and_other_keys) {
  // Nested metadata, other top-level keys, a float total_size: both paths read the same.
  std::string a = describe_index(
      R"({"extra":[1,2.5e3,{"k":[true,false,null]}],"metadata":{"total_size":15.0,"nested":{"a":[]}},)"
      R"("weight_map":{"x.w":"model-00001-of-00002.safetensors"}})");
  EXPECT_NE(a.find("total=15"), std::string::npos) << a;
  EXPECT_NE(a.find("x.w -> model-00001-of-00002.safetensors (found)"), std::string::npos) << a;
  std::string neg = describe_index(R"({"metadata":{"total_size":-3},"weight_map":{}})");
  EXPECT_NE(neg.find("total=none"), std::string::npos) << neg;
}

TEST(index_fast_path, escaped_names_duplicates_and_errors) {
  std::string esc = describe_index(R"({"weight_map":{"y\"q":"model-00001-of-00002.safetensors"}})");
  EXPECT_NE(esc.find("y\"q -> model-00001-of-00002.safetensors (found)"), std::string::npos) << esc;
  std::string dup = describe_index(
      R"({"weight_map":{"x.w":"model-00001-of-00002.safetensors","x.w":"model-00001-of-00002.safetensors"}})");
  EXPECT_NE(dup.find("dup x.w"), std::string::npos) << dup;
  std::string notstr = describe_index(R"({"weight_map":{"x.w":3}})");
  EXPECT_NE(notstr.find("is not a string"), std::string::npos) << notstr;
  std::string nomap = describe_index(R"({"metadata":{}})");
  EXPECT_NE(nomap.find("has no \"weight_map\""), std::string::npos) << nomap;
  std::string broken = describe_index(R"({"weight_map":{"x.w":"model-00001-of-00002.safetensors",}})");
  EXPECT_EQ(broken.find("error= "), std::string::npos) << broken;
  EXPECT_EQ(broken.find("error=\n"), std::string::npos) << broken;
}

// A large index (several buffer refills): names with 2-, 3- and 4-byte UTF-8 characters,
// pretty-printed, metadata after weight_map. `escape_one` spells one name's 'w' as \u0077,
// which sends the same logical index down the general path.
std::string big_index(size_t entries, size_t pad, bool escape_one, const std::string& tail = "\n") {
  std::string s = "{\n  \"pad\": \"" + std::string(pad, 'p') + "\",\n  \"weight_map\": {\n";
  for (size_t i = 0; i < entries; ++i) {
    std::string name = "model.layers." + std::to_string(i) + ".caf\xC3\xA9.\xE6\x97\xA5\xE6\x9C\xAC.\xF0\x9F\x98\x80.mlp.experts." +
                       std::to_string(i * 7 % 101) + ".down_proj.weight";
    if (i == entries / 2 && escape_one) name += "_\\u0077";
    else if (i == entries / 2) name += "_w";
    s += "    \"" + name + "\": \"model-0000" + std::to_string(1 + i % 2) + "-of-00002.safetensors\"";
    s += i + 1 < entries ? ",\n" : "\n";
  }
  s += "  },\n  \"metadata\": {\"total_size\": 15}\n}" + tail;
  return s;
}

constexpr size_t kFirstRead = 256u << 10;  // the reader's buffer: its first read ends here

TEST(index_fast_path, chunked_reading_agrees_with_the_general_path) {
  // Pads chosen so the first read ends inside a multi-byte character, and so it does not.
  int straddles = 0;
  for (size_t pad = 0; pad < 6; ++pad) {
    const std::string text = big_index(6000, pad, false);
    ASSERT_GT(text.size(), 2 * kFirstRead);
    if ((static_cast<unsigned char>(text[kFirstRead]) & 0xC0) == 0x80) ++straddles;
    std::string path_fast, path_general;
    const std::string fast = describe_index(text, &path_fast);
    EXPECT_EQ(path_fast, "one-pass") << "pad " << pad;
    EXPECT_NE(fast.find("total=15"), std::string::npos) << fast.substr(0, 300);
    EXPECT_EQ(fast.find("error= schema=\n"), 0u) << fast.substr(0, 300);
    EXPECT_NE(fast.find("model.layers.5999.caf\xC3\xA9."), std::string::npos);
    EXPECT_EQ(fast, describe_index(big_index(6000, pad, true), &path_general));
    EXPECT_EQ(path_general, "general");
  }
  EXPECT_GT(straddles, 0) << "no pad put the first read's end inside a UTF-8 sequence";
}

TEST(index_fast_path, empty_names_are_read_on_both_paths) {
  // Found by fuzz_index: an empty name was packed through a null block pointer (UB).
  std::string path;
  const std::string fast = describe_index(R"({"weight_map":{"":"model-00001-of-00002.safetensors","x.w":""}})", &path);
  EXPECT_EQ(path, "one-pass");
  EXPECT_NE(fast.find(" -> model-00001-of-00002.safetensors (absent)"), std::string::npos) << fast;
  EXPECT_NE(fast.find("x.w -> "), std::string::npos) << fast;
  EXPECT_EQ(fast, describe_index(R"({"weight_map":{"":"model-00001-of-00002.safetensors","x.\u0077":""}})"));
}

TEST(index_fast_path, every_buffer_size_reads_the_same_index) {
  // Small buffers put chunk boundaries everywhere: inside names, inside multi-byte
  // characters, between a key and its colon, in the whitespace after the last brace.
  const std::string text = big_index(300, 0, false, std::string(300, ' '));
  std::string path;
  const std::string want = describe_index(big_index(300, 0, true, std::string(300, ' ')), &path);
  ASSERT_EQ(path, "general");
  for (size_t buffer : {64, 65, 97, 128, 200, 256, 257, 1000, 4096, 65536}) {
    LoadOptions opts;
    opts.index_buffer_bytes = buffer;
    EXPECT_EQ(describe_index(text, &path, opts), want) << "buffer " << buffer;
    // Entries are ~110 bytes: from 512 on, every one fits in a quarter of the buffer.
    if (buffer >= 512) EXPECT_EQ(path, "one-pass") << "buffer " << buffer;
  }
}

TEST(index_fast_path, long_entries_long_tails_and_bad_bytes_past_the_first_read) {
  // One name longer than the whole buffer: the general path reads it.
  std::string path;
  std::string long_name = big_index(10, 0, false);
  long_name.insert(long_name.find("model.layers.3."), std::string(300u << 10, 'n'));
  const std::string got = describe_index(long_name, &path);
  EXPECT_EQ(path, "general");
  EXPECT_NE(got.find(std::string(300u << 10, 'n')), std::string::npos);
  EXPECT_NE(got.find("total=15"), std::string::npos);
  // Whitespace after the closing brace spanning several reads is still only whitespace.
  const std::string tail = describe_index(big_index(3000, 0, false, std::string(600u << 10, ' ')), &path);
  EXPECT_EQ(path, "one-pass");
  EXPECT_EQ(tail, describe_index(big_index(3000, 0, true, std::string(600u << 10, ' '))));
  EXPECT_NE(tail.find("total=15"), std::string::npos);
  // A byte that is never valid UTF-8, just past the first read: an error, located.
  std::string bad = big_index(4000, 0, false);
  const size_t at = bad.find(".down_proj", kFirstRead);
  bad[at] = '\xFF';
  const std::string bad_out = describe_index(bad);
  EXPECT_NE(bad_out.find("UTF-8"), std::string::npos) << bad_out.substr(0, 300);
  // Cut short in the second read: an error, not a partial map taken as whole.
  const std::string cut = describe_index(big_index(4000, 0, false).substr(0, kFirstRead + 1000));
  EXPECT_EQ(cut.find("error= "), std::string::npos) << cut.substr(0, 300);
  EXPECT_EQ(cut.find("error=\n"), std::string::npos) << cut.substr(0, 300);
}

}  // namespace
}  // namespace ckpt::test
