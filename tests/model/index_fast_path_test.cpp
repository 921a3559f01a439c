// The index reader scans regular indexes in one pass, reading through a 256 KiB buffer chunk by
// chunk, and takes the simdjson path (whole file) for anything else. Same logical index, both
// spellings: identical results.
#include <gtest/gtest.h>

#include <algorithm>

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
  if (path) *path = idx.general_path ? "general" : idx.read_in_two ? "one-pass, two threads" : "one-pass";
  s += "files=";
  for (auto f : idx.files) s += std::string(f) + ",";
  s += "\n";
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

// ---- a large index read by two threads (LoadOptions::index_split_min_bytes) ----

LoadOptions split_always() {
  LoadOptions o;
  o.threads = 2;
  o.index_split_min_bytes = 1;
  return o;
}
LoadOptions split_never() {
  LoadOptions o;
  o.index_split_min_bytes = 0;
  return o;
}
// The same index read by one thread and by two: identical; returns how the split read went.
std::string split_agrees(const std::string& text, const std::string& what) {
  std::string path_one, path_two;
  const std::string one = describe_index(text, &path_one, split_never());
  const std::string two = describe_index(text, &path_two, split_always());
  EXPECT_EQ(two, one) << what;
  EXPECT_NE(path_one, "one-pass, two threads") << what;
  return path_two;
}

TEST(index_split_read, halves_meet_inside_weight_map) {
  // Entries grouped by shard with a third shard file first named in the second half (file ids
  // stay in first-mention order), and names repeated across the halves (duplicates found).
  std::string text = big_index(6000, 0, false);
  const size_t second_half = text.find("model.layers.4500.");
  text.insert(text.rfind("\n", second_half) + 1,
              "    \"x.w\": \"model-00003-of-00002.safetensors\",\n    \"z.w\": \"model-00002-of-00002.safetensors\",\n");
  text.insert(text.find("\n", text.find("weight_map")) + 1, "    \"x.w\": \"model-00001-of-00002.safetensors\",\n");
  EXPECT_EQ(split_agrees(text, "regular"), "one-pass, two threads");
  const std::string two = describe_index(text, nullptr, split_always());
  EXPECT_NE(two.find("files=model-00001-of-00002.safetensors,model-00002-of-00002.safetensors,model-00003-of-00002.safetensors,"),
            std::string::npos) << two.substr(0, 300);
  EXPECT_NE(two.find("dup x.w\n"), std::string::npos) << "a name in both halves is listed twice";
  EXPECT_NE(two.find("total=15"), std::string::npos);
  // Grouped by shard, as exports write them: the second half first names a file the first
  // half met second, so its file ids must be renumbered.
  std::string grouped;
  size_t line_no = 0;
  for (size_t b = 0, e; b < text.size(); b = e + 1, ++line_no) {
    e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(b, e - b);
    const size_t f = line.find("\"model-0000");
    if (f != std::string::npos && line.find("x.w") == std::string::npos && line.find("z.w") == std::string::npos)
      line.replace(f, 12, line_no < 2000 ? "\"model-00001" : "\"model-00002");
    grouped += line + (e < text.size() ? "\n" : "");
  }
  EXPECT_EQ(split_agrees(grouped, "grouped by shard"), "one-pass, two threads");
  // The same index through the general path (an escape in the second half): same result.
  std::string path;
  EXPECT_EQ(describe_index(big_index(6000, 0, true), &path, split_always()),
            describe_index(big_index(6000, 0, false), nullptr, split_never()));
  EXPECT_EQ(path, "general");
}

TEST(index_split_read, a_wrong_guess_is_read_by_one_thread) {
  // The middle of the file inside a large pretty-printed metadata object before weight_map:
  // its lines look like entries, but the first scanner never meets the second in weight_map.
  std::string meta = "{\n  \"metadata\": {\n";
  for (int i = 0; i < 8000; ++i) meta += "    \"k" + std::to_string(i) + "\": \"v\",\n";
  meta += "    \"total_size\": 15\n  },\n  \"weight_map\": {\n    \"x.w\": \"model-00001-of-00002.safetensors\"\n  }\n}\n";
  EXPECT_EQ(split_agrees(meta, "metadata in the middle"), "one-pass");
  // Minified: no line to start at.
  std::string flat = big_index(6000, 0, false);
  flat.erase(std::remove(flat.begin(), flat.end(), '\n'), flat.end());
  EXPECT_EQ(split_agrees(flat, "minified"), "one-pass");
}

TEST(index_split_read, faults_in_the_second_half_are_found_as_in_one_pass) {
  const std::string base = big_index(6000, 0, false);
  const size_t late = base.find(".down_proj", base.size() * 3 / 4);
  std::string bad_byte = base;
  bad_byte[late] = '\xFF';
  split_agrees(bad_byte, "invalid UTF-8 late");
  EXPECT_NE(describe_index(bad_byte, nullptr, split_always()).find("UTF-8"), std::string::npos);
  split_agrees(base.substr(0, base.size() * 3 / 4), "cut in the second half");
  split_agrees(base + "x", "garbage after the end");
  std::string trailing_comma = base;
  trailing_comma.insert(trailing_comma.rfind("\n  },"), ",");
  split_agrees(trailing_comma, "trailing comma");
  // "metadata" on both sides of weight_map, and weight_map twice: the general path reports.
  std::string meta_twice = base;
  meta_twice.insert(1, "\n  \"metadata\": {\"total_size\": 3},");
  EXPECT_EQ(split_agrees(meta_twice, "metadata twice"), "general");
  std::string map_twice = base;
  map_twice.insert(map_twice.rfind('}'), ",\n  \"weight_map\": {}\n");
  EXPECT_EQ(split_agrees(map_twice, "weight_map twice"), "general");
  std::string not_string = base;
  not_string.replace(not_string.find("\"model-0000", late), 36, "17");
  EXPECT_EQ(split_agrees(not_string, "a number for a file name"), "general");
}

}  // namespace
}  // namespace ckpt::test
