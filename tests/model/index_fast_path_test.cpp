// The index reader scans regular indexes in one pass (views into the file's text) and takes the
// simdjson path for anything else. Same logical index, both spellings: identical results.
#include <gtest/gtest.h>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "test_support.h"

namespace ckpt::test {
namespace {

std::string describe_index(const std::string& index_json) {
  TempDir dir;
  std::vector<st::TensorToWrite> a{{"x.w", st::DType::F32, {2}, {}}, {"y\"q", st::DType::F32, {1}, {}}};
  std::vector<st::TensorToWrite> b{{"z.w", st::DType::U8, {3}, {}}};
  EXPECT_EQ(st::write_file(dir / "model-00001-of-00002.safetensors", a), "");
  EXPECT_EQ(st::write_file(dir / "model-00002-of-00002.safetensors", b), "");
  write_text(dir / "model.safetensors.index.json", index_json);
  auto r = load_checkpoint(dir.path().string());
  EXPECT_TRUE(r.checkpoint);
  if (!r.checkpoint) return "no checkpoint";
  const Checkpoint& ck = *r.checkpoint;
  std::string s;
  const ShardIndex& idx = *ck.index;
  s += "error=" + std::string(idx.json.error ? idx.json.error->message : "") + " schema=" + idx.schema_error + "\n";
  s += "total=" + (idx.total_size ? std::to_string(*idx.total_size) : std::string("none")) + "\n";
  for (size_t k = 0; k < idx.weight_map.size(); ++k) {
    const auto& [n, f] = idx.weight_map[k];
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

}  // namespace
}  // namespace ckpt::test
