// ST: every code from a planted defect in a checkpoint built in code (load_checkpoint +
// run_checks), plus the safetensors-vectors corpus classified as its README says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "builders.h"

namespace ckpt::ftest {
namespace {

using st::DType;

// A model dir holding model.safetensors with these exact bytes (+ a config).
struct StDir {
  TempDir d;
  explicit StDir(const std::string& bytes) {
    write_text(d / "model.safetensors", bytes);
    write_text(d / "config.json", R"({"model_type": "llama"})");
  }
  std::vector<Finding> st() { return only(verify(d.path()), {"ST"}); }
  std::vector<Finding> all() { return verify(d.path()); }
};

std::string raw(const std::string& header, uint64_t data_len) { return frame(header) + std::string(data_len, '\0'); }

void expect_code(const std::vector<Finding>& fs_, const std::string& code, const std::string& tensor,
                 Severity sev = Severity::error) {
  const Finding* f = find(fs_, code, "model.safetensors", tensor);
  ASSERT_NE(f, nullptr) << "expected " << code << " on model.safetensors tensor '" << tensor << "':\n" << dump(fs_);
  EXPECT_EQ(f->severity, sev) << dump(fs_);
  EXPECT_FALSE(f->message.empty());
}

TEST(st_checks, clean_checkpoint_has_no_st_findings) {
  TempDir d;
  write_st(d / "model.safetensors", {{"a", DType::F32, {4, 4}}, {"b", DType::BF16, {3}}, {"c", DType::F4, {8}},
                                     {"d", DType::I64, {}}, {"e", DType::U8, {0, 5}}});
  write_text(d / "config.json", R"({"model_type": "llama"})");
  auto all = verify(d.path());
  expect_clean(all);
  EXPECT_TRUE(only(all, {"ST"}).empty()) << dump(all);
}

TEST(st_checks, ST001_file_shorter_than_length_prefix) {
  StDir m(std::string(5, '\x01'));
  expect_code(m.st(), "ST001", "");
  EXPECT_TRUE(contains(find(m.st(), "ST001")->message, "5 bytes"));
}

TEST(st_checks, ST001_and_FS004_for_empty_weight_file) {
  StDir m("");
  auto all = m.all();
  EXPECT_NE(find(all, "FS004", "model.safetensors"), nullptr) << dump(all);
}

TEST(st_checks, ST002_header_length_above_limit) {
  StDir m(frame("", 100'000'001) + std::string(76, ' '));
  expect_code(m.st(), "ST002", "");
  EXPECT_EQ(m.st().size(), 1u) << dump(m.st());
}

TEST(st_checks, ST003_header_length_past_eof) {
  StDir m(frame("", 1000) + std::string(76, ' '));
  expect_code(m.st(), "ST003", "");
  EXPECT_TRUE(contains(find(m.st(), "ST003")->message, "924 missing")) << dump(m.st());
}

TEST(st_checks, ST004_header_not_utf8) {
  StDir m(frame("\xff"));
  expect_code(m.st(), "ST004", "");
}

TEST(st_checks, ST005_header_not_json) {
  StDir m(frame("{"));
  expect_code(m.st(), "ST005", "");
  EXPECT_TRUE(contains(find(m.st(), "ST005")->message, "file offset")) << dump(m.st());
}

TEST(st_checks, ST006_entry_missing_data_offsets) {
  StDir m(raw(R"({"lm_head.weight":{"dtype":"F32","shape":[2]}})", 8));
  expect_code(m.st(), "ST006", "lm_head.weight");
  EXPECT_TRUE(contains(find(m.st(), "ST006")->message, "data_offsets"));
}

TEST(st_checks, ST006_negative_and_float_offsets) {
  StDir m(raw(R"({"neg":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]},"flt":{"dtype":"U8","shape":[1],"data_offsets":[0.5,1]}})", 1));
  expect_code(m.st(), "ST006", "neg");
  expect_code(m.st(), "ST006", "flt");
}

TEST(st_checks, ST006_header_not_an_object) {
  StDir m(raw("[1,2]", 0));
  expect_code(m.st(), "ST006", "");
}

TEST(st_checks, ST007_duplicate_key) {
  StDir m(raw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2));
  expect_code(m.st(), "ST007", "a");
}

TEST(st_checks, ST008_unknown_dtype) {
  StDir m(raw(R"({"x":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", 16));
  expect_code(m.st(), "ST008", "x");
  EXPECT_TRUE(contains(find(m.st(), "ST008")->message, "F128"));
  EXPECT_EQ(find(m.st(), "ST010"), nullptr) << "an unknown dtype has no size to compare:\n" << dump(m.st());
}

TEST(st_checks, ST009_size_overflow) {
  StDir m(raw(R"({"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})", 16));
  expect_code(m.st(), "ST009", "test");
  StDir m2(raw(R"({"test":{"dtype":"U8","shape":[2,9223372036854775807],"data_offsets":[0,16]}})", 16));
  expect_code(m2.st(), "ST009", "test");
}

TEST(st_checks, ST010_span_differs_from_shape) {
  StDir m(raw(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,4]}})", 4));
  expect_code(m.st(), "ST010", "test");
  const auto findings = m.st();  // keep the findings alive while `f` points into them
  const auto* f = find(findings, "ST010");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "4 bytes") && contains(f->message, "16")) << f->message;
}

TEST(st_checks, ST011_sub_byte_not_aligned) {
  StDir m(raw(R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2));
  expect_code(m.st(), "ST011", "q");
  EXPECT_TRUE(contains(find(m.st(), "ST011")->message, "12 bits"));
  StDir ok(raw(R"({"q":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}})", 3));
  EXPECT_EQ(find(ok.st(), "ST011"), nullptr) << dump(ok.st());
  EXPECT_EQ(find(ok.st(), "ST010"), nullptr) << dump(ok.st());
}

TEST(st_checks, ST012_gap_in_data_section) {
  StDir m(raw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})", 3));
  expect_code(m.st(), "ST012", "b");
  EXPECT_TRUE(contains(find(m.st(), "ST012")->message, "(a)")) << dump(m.st());
  StDir first(raw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2));
  expect_code(first.st(), "ST012", "a");  // first tensor not at 0
}

TEST(st_checks, ST013_overlap_and_reversed) {
  std::string h = "{";
  for (int i = 0; i < 10; ++i) h += std::string(i ? "," : "") + "\"t" + std::to_string(i) + R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  StDir m(raw(h + "}", 16));
  auto s = m.st();
  EXPECT_EQ(with_code(s, "ST013").size(), 9u) << dump(s);
  EXPECT_NE(find(s, "ST013", "model.safetensors", "t1"), nullptr) << dump(s);
  StDir rev(raw(R"({"r":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4));
  expect_code(rev.st(), "ST013", "r");
}

TEST(st_checks, ST013_capped_per_file) {
  std::string h = "{";
  for (int i = 0; i < 100; ++i) h += std::string(i ? "," : "") + "\"t" + std::to_string(i) + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  StDir m(raw(h + "}", 1));
  auto s = m.st();
  auto st13 = with_code(s, "ST013");
  EXPECT_LE(st13.size(), 12u) << "findings per code per file are capped";
  EXPECT_TRUE(contains(st13.back()->message, "more")) << dump(s);
}

TEST(st_checks, ST014_truncated_file_names_cut_tensor) {
  TempDir d;
  write_st(d / "model.safetensors", {{"a", DType::F32, {4}}, {"z.cut", DType::F32, {1000}}});
  write_text(d / "config.json", "{}");
  auto size = fs::file_size(d / "model.safetensors");
  fs::resize_file(d / "model.safetensors", size - 300);
  auto s = only(verify(d.path()), {"ST"});
  const Finding* f = find(s, "ST014", "model.safetensors", "z.cut");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_TRUE(contains(f->message, "300 bytes missing")) << f->message;
  EXPECT_TRUE(contains(f->message, "1 of 2 tensors")) << f->message;
}

TEST(st_checks, ST014_two_bytes_short) {
  StDir m(raw(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})", 14));
  expect_code(m.st(), "ST014", "test");
  EXPECT_EQ(find(m.st(), "ST015"), nullptr);
}

TEST(st_checks, ST015_trailing_bytes) {
  StDir m(raw(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})", 16 + 34));
  expect_code(m.st(), "ST015", "");
  EXPECT_TRUE(contains(find(m.st(), "ST015")->message, "34 bytes")) << dump(m.st());
  StDir empty_hdr(raw("{}", 3));  // no tensors, 3 stray bytes
  expect_code(empty_hdr.st(), "ST015", "");
}

TEST(st_checks, ST016_metadata_value_not_string) {
  StDir m(raw(R"({"__metadata__":{"format":"pt","epoch":3},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
  expect_code(m.st(), "ST016", "");
  EXPECT_TRUE(contains(find(m.st(), "ST016")->message, "epoch"));
  EXPECT_EQ(find(m.st(), "ST020"), nullptr) << "ST020 is not piled on a broken __metadata__";
}

TEST(st_checks, ST017_leading_whitespace_is_a_warning) {
  StDir m(raw("\t\n{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1));
  expect_code(m.st(), "ST017", "", Severity::warning);
  for (const auto& f : m.st()) EXPECT_NE(f.severity, Severity::error) << dump(m.st());
}

TEST(st_checks, ST018_read_failure_from_the_model) {
  // As root, permissions cannot make a file unreadable; the check is a pure function of the model.
  Checkpoint ck;
  ck.root = "/nonexistent";
  Shard sh;
  sh.file = "model.safetensors";
  sh.header.problems.push_back({st::Rule::ReadFailed, {}, "cannot open: Permission denied", 0});
  ck.shards.push_back(sh);
  ck.finalize();
  auto s = only(run_checks(ck), {"ST"});
  expect_code(s, "ST018", "");
  EXPECT_TRUE(contains(find(s, "ST018")->message, "Permission denied"));
}

TEST(st_checks, ST018_unreadable_file_on_disk) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: mode 000 does not stop reads";
  TempDir d;
  write_st(d / "model.safetensors", {{"w", DType::F32, {1024}}});
  fs::permissions(d / "model.safetensors", fs::perms::none);
  auto all = verify(d.path());
  EXPECT_TRUE(find(all, "ST018", "model.safetensors") || find(all, "FS010", "model.safetensors")) << dump(all);
}

TEST(st_checks, ST019_unaligned_header_is_info) {
  std::string h = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";  // 51 bytes
  ASSERT_NE(h.size() % 8, 0u);
  StDir m(raw(h, 1));
  expect_code(m.st(), "ST019", "", Severity::info);
  EXPECT_TRUE(contains(find(m.st(), "ST019")->message, std::to_string(h.size())));
  StDir padded(raw(h + std::string(8 - h.size() % 8, ' '), 1));
  EXPECT_EQ(find(padded.st(), "ST019"), nullptr) << dump(padded.st());
}

TEST(st_checks, ST020_metadata_without_accepted_format) {
  TempDir d;
  write_st(d / "nofmt.safetensors", {{"w", DType::F32, {1}}}, {{"source", "x"}});
  write_st(d / "np.safetensors", {{"v", DType::F32, {1}}}, {{"format", "np"}});
  write_st(d / "mlx.safetensors", {{"u", DType::F32, {1}}}, {{"format", "mlx"}});
  write_st(d / "none.safetensors", {{"x", DType::F32, {1}}}, {});
  write_text(d / "model.safetensors.index.json",
             index_json({{"w", "nofmt.safetensors"}, {"v", "np.safetensors"}, {"u", "mlx.safetensors"}, {"x", "none.safetensors"}}, 16));
  auto s = only(verify(d.path()), {"ST"});
  const Finding* f1 = find(s, "ST020", "nofmt.safetensors");
  ASSERT_NE(f1, nullptr) << dump(s);
  EXPECT_EQ(f1->severity, Severity::warning);
  EXPECT_TRUE(contains(f1->message, "no \"format\""));
  const Finding* f2 = find(s, "ST020", "np.safetensors");
  ASSERT_NE(f2, nullptr) << dump(s);
  EXPECT_TRUE(contains(f2->message, "\"np\""));
  EXPECT_EQ(find(s, "ST020", "mlx.safetensors"), nullptr) << dump(s);
  EXPECT_EQ(find(s, "ST020", "none.safetensors"), nullptr) << dump(s);
}

TEST(st_checks, every_st_code_is_registered_and_documented) {
  std::string docs = read_text(fs::path(CKPT_SOURCE_DIR) / "docs/checks.md");
  int n = 0;
  for (const auto& c : all_checks()) {
    std::string code(c.code);
    if (!in_family(Finding{code}, {"FS", "ST", "IX"})) continue;
    ++n;
    EXPECT_TRUE(contains(docs, "## " + code + " — ")) << code << " is not documented in docs/checks.md";
  }
  EXPECT_EQ(n, 13 + 20 + 14);  // FS001-FS013 (FS013 is raised by batch verify); IX014 comes from the engine checks (src/checks/engines.cpp)
}

// Every code of every family, not only the structural ones, has its docs/checks.md entry.
TEST(st_checks, every_registered_code_is_documented) {
  std::string docs = read_text(fs::path(CKPT_SOURCE_DIR) / "docs/checks.md");
  size_t n = 0;
  for (const auto& c : all_checks()) {
    ++n;
    EXPECT_TRUE(contains(docs, "## " + std::string(c.code) + " — ")) << c.code << " is not documented in docs/checks.md";
  }
  EXPECT_GT(n, 100u);
}

// ---- the corpus ---------------------------------------------------------------------

struct Vector {
  std::string file, expected;
};

std::vector<Vector> manifest() {
  std::vector<Vector> out;
  std::istringstream in(read_text(test::corpus_dir() / "safetensors-vectors" / "MANIFEST.tsv"));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto t1 = line.find('\t');
    auto t2 = line.find('\t', t1 + 1);
    auto t3 = line.find('\t', t2 + 1);
    auto t4 = line.find('\t', t3 + 1);
    out.push_back({line.substr(0, t1), line.substr(t3 + 1, t4 - t3 - 1)});
  }
  return out;
}

// The code each bad vector must produce (its README's rule).
const std::map<std::string, std::string> kExpectedCode{
    {"bad_header_too_small_empty.safetensors", "ST001"},
    {"bad_invalid_header_length.safetensors", "ST003"},
    {"bad_header_too_large.safetensors", "ST002"},
    {"bad_invalid_header_non_utf8.safetensors", "ST004"},
    {"bad_invalid_header_not_json.safetensors", "ST005"},
    {"bad_tensor_invalid_info.safetensors", "ST010"},
    {"bad_validation_overflow_shape.safetensors", "ST009"},
    {"bad_validation_overflow_nbytes.safetensors", "ST009"},
    {"bad_metadata_incomplete_buffer_trailing_polyglot.safetensors", "ST015"},
    {"bad_metadata_incomplete_buffer_missing_2_bytes.safetensors", "ST014"},
    {"bad_json_attack_overlapping_offsets.safetensors", "ST013"},
    {"bad_abuse_attempt_1_header_len_past_eof.safetensors", "ST003"},
    {"bad_duplicate_key.safetensors", "ST007"},
    {"bad_metadata_non_string_value.safetensors", "ST016"},
    {"bad_offset_gap.safetensors", "ST012"},
    {"bad_unknown_dtype.safetensors", "ST008"},
};

TEST(st_corpus, every_vector_classified_as_its_readme_says) {
  CKPT_REQUIRE_CORPUS();
  auto vectors = manifest();
  ASSERT_EQ(vectors.size(), 21u);
  int ok = 0, bad = 0;
  for (const auto& v : vectors) {
    SCOPED_TRACE(v.file);
    TempDir d;
    fs::copy_file(test::corpus_dir() / "safetensors-vectors" / v.file, d / "model.safetensors");
    write_text(d / "config.json", R"({"model_type": "llama"})");
    auto all = verify(d.path());
    bool st_or_fs_error = false;
    for (const auto& f : all)
      if (f.severity == Severity::error && in_family(f, {"ST", "FS"})) st_or_fs_error = true;
    if (v.file.rfind("ok_", 0) == 0) {
      EXPECT_EQ(v.expected.rfind("accept", 0), 0u);
      EXPECT_FALSE(st_or_fs_error) << dump(all);
      // Hand-built vectors may carry an unpadded header (ST019, info); nothing above info,
      // except the documented leading-whitespace warning (ST017).
      bool st_above_info = false;
      for (const auto& f : only(all, {"ST"}))
        if (f.severity != Severity::info && f.code != "ST017") st_above_info = true;
      EXPECT_FALSE(st_above_info) << dump(all);
      ++ok;
    } else {
      EXPECT_EQ(v.expected, "reject");
      EXPECT_TRUE(st_or_fs_error) << dump(all);
      auto it = kExpectedCode.find(v.file);
      ASSERT_NE(it, kExpectedCode.end()) << "new vector without an expected code";
      EXPECT_NE(find(all, it->second, "model.safetensors"), nullptr) << "expected " << it->second << "\n" << dump(all);
      ++bad;
    }
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(bad, 16);
}

TEST(st_corpus, leading_whitespace_vector_warns_ST017) {
  CKPT_REQUIRE_CORPUS();
  TempDir d;
  fs::copy_file(test::corpus_dir() / "safetensors-vectors/ok_whitespace_leading_padded.safetensors", d / "model.safetensors");
  auto s = only(verify(d.path()), {"ST"});
  const Finding* f = find(s, "ST017", "model.safetensors");
  ASSERT_NE(f, nullptr) << dump(s);
  EXPECT_EQ(f->severity, Severity::warning);
}

// ---- hostile files through the whole pipeline --------------------------------------------

TEST(st_hostile, pipeline_survives_hostile_headers) {
  std::vector<std::string> files;
  files.push_back(frame("{\"t\":" + std::string(10000, '[') + std::string(10000, ']') + "}"));
  std::string shape1000 = "[";
  for (int i = 0; i < 1000; ++i) shape1000 += i ? ",1" : "1";
  files.push_back(raw(R"({"t":{"dtype":"U8","shape":)" + shape1000 + R"(],"data_offsets":[0,1]}})", 1));
  files.push_back(raw("{\"" + std::string(1 << 20, 'n') + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
  files.push_back(raw(R"({"t":{"dtype":"U8","shape":[18446744073709551615,2],"data_offsets":[0,18446744073709551615]}})", 0));
  files.push_back(raw(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", 0));
  files.push_back(raw("{\"\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1));
  files.push_back(frame("", 100'000'000));
  for (size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(i);
    StDir m(files[i]);
    auto s = m.st();
    bool err = false;
    for (const auto& f : s) err |= f.severity == Severity::error;
    if (i == 2) EXPECT_FALSE(err) << "a 1 MB name is legal";
    else EXPECT_TRUE(err) << dump(s);
  }
}

}  // namespace
}  // namespace ckpt::ftest
