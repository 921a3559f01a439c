// The GGUF reader: the 34 crafted corpus files classified as corpus/gguf/README.md says (each
// rejection with the rule that names its defect), the writer's layout read back, and every
// truncation of a valid file rejected without a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "ckpt/gguf.h"
#include "test_support.h"

namespace ckpt::ftest {
namespace {

using gguf::Rule;
using gguf::WriteValue;

std::string rules(const gguf::File& f) {
  std::string s;
  for (const auto& p : f.problems) s += std::string(gguf::rule_name(p.rule)) + " @" + std::to_string(p.offset) + ": " + p.detail + "\n";
  return s;
}

gguf::File parse_bytes(const std::string& b) {
  return gguf::parse(std::as_bytes(std::span(b.data(), b.size())), b.size());
}

// The rule each rejected corpus file must be rejected for (the defect its name describes).
const std::map<std::string, Rule> kExpectedRule{
    {"bad_alignment_not_pow2.gguf", Rule::AlignmentInvalid},
    {"bad_alignment_wrong_type_i32.gguf", Rule::AlignmentType},
    {"bad_alignment_zero.gguf", Rule::AlignmentInvalid},
    {"bad_key_duplicate.gguf", Rule::DuplicateKey},
    {"bad_key_empty.gguf", Rule::EmptyKey},
    {"bad_key_len_exceeds_file.gguf", Rule::Truncated},
    {"bad_kv_array_len_2pow63.gguf", Rule::ArrayTooLong},
    {"bad_kv_array_of_array.gguf", Rule::InvalidValueType},
    {"bad_kv_string_array_len_exceeds_file.gguf", Rule::ArrayTooLong},
    {"bad_kv_type_invalid_13.gguf", Rule::InvalidValueType},
    {"bad_magic.gguf", Rule::BadMagic},
    {"bad_n_kv_huge.gguf", Rule::CountOutOfRange},
    {"bad_n_tensors_negative.gguf", Rule::CountOutOfRange},
    {"bad_tensor_data_truncated.gguf", Rule::TensorDataTruncated},
    {"bad_tensor_name_64_bytes.gguf", Rule::NameTooLong},
    {"bad_tensor_name_duplicate.gguf", Rule::DuplicateTensor},
    {"bad_tensor_nbytes_overflow_f32.gguf", Rule::SizeOverflow},
    {"bad_tensor_ndims_5.gguf", Rule::TooManyDims},
    {"bad_tensor_ne_negative.gguf", Rule::NegativeDim},
    {"bad_tensor_nelements_overflow.gguf", Rule::ElementsOverflow},
    {"bad_tensor_offset_not_contiguous.gguf", Rule::OffsetMismatch},
    {"bad_tensor_offset_overlap.gguf", Rule::OffsetMismatch},
    {"bad_tensor_row_not_multiple_of_block_q4_0.gguf", Rule::RowNotBlockMultiple},
    {"bad_tensor_type_negative.gguf", Rule::InvalidTensorType},
    {"bad_tensor_type_out_of_range.gguf", Rule::InvalidTensorType},
    {"bad_tensor_type_removed_q4_2.gguf", Rule::RemovedTensorType},
    {"bad_truncated_header.gguf", Rule::TruncatedHeader},
    {"bad_version_0.gguf", Rule::UnsupportedVersion},
    {"bad_version_1.gguf", Rule::UnsupportedVersion},
    {"bad_version_4_future.gguf", Rule::UnsupportedVersion},
    {"bad_version_byteswapped_bigendian.gguf", Rule::ByteSwapped},
    {"suspicious_alignment_0x80000000.gguf", Rule::DataPastEof},
};

TEST(gguf_corpus, every_file_classified_as_the_readme_says) {
  CKPT_REQUIRE_CORPUS();
  const auto dir = test::corpus_dir() / "gguf";
  std::ifstream manifest(dir / "MANIFEST.tsv");
  ASSERT_TRUE(manifest) << "MANIFEST.tsv missing";
  std::string line;
  std::getline(manifest, line);  // header
  int accepted = 0, rejected = 0, rows = 0;
  while (std::getline(manifest, line)) {
    std::istringstream cols(line);
    std::string file, bytes, sha, expected;
    std::getline(cols, file, '\t');
    std::getline(cols, bytes, '\t');
    std::getline(cols, sha, '\t');
    std::getline(cols, expected, '\t');
    ++rows;
    const gguf::File f = gguf::read_file(dir / file);
    EXPECT_EQ(f.file_size, std::stoull(bytes)) << file;
    if (expected == "accept") {
      EXPECT_TRUE(f.loadable()) << file << "\n" << rules(f);
      EXPECT_TRUE(f.problems.empty()) << file << "\n" << rules(f);
      ++accepted;
    } else {
      ASSERT_EQ(expected, "reject") << file;
      EXPECT_FALSE(f.loadable()) << file;
      ASSERT_TRUE(kExpectedRule.count(file)) << "no expected rule for " << file;
      EXPECT_TRUE(f.has_problem(kExpectedRule.at(file))) << file << " expected " << gguf::rule_name(kExpectedRule.at(file)) << "\n"
                                                         << rules(f);
      for (const auto& p : f.problems) EXPECT_FALSE(p.detail.empty()) << file;
      ++rejected;
    }
  }
  EXPECT_EQ(rows, 34);
  EXPECT_EQ(accepted, 2);
  EXPECT_EQ(rejected, 32);
}

TEST(gguf_corpus, rejections_are_located) {
  CKPT_REQUIRE_CORPUS();
  const auto dir = test::corpus_dir() / "gguf";
  // The three gguf.cpp gets wrong, each with the tensor it is about.
  for (const char* name : {"bad_tensor_nelements_overflow.gguf", "bad_tensor_nbytes_overflow_f32.gguf", "bad_tensor_data_truncated.gguf"}) {
    const auto f = gguf::read_file(dir / name);
    ASSERT_FALSE(f.problems.empty()) << name;
    EXPECT_FALSE(f.problems.front().tensor.empty()) << name << "\n" << rules(f);
    EXPECT_GT(f.problems.front().offset, 0u) << name;
  }
  const auto dup = gguf::read_file(dir / "bad_key_duplicate.gguf");
  ASSERT_FALSE(dup.problems.empty());
  EXPECT_EQ(dup.problems.front().key, "a.b");
  const auto gap = gguf::read_file(dir / "bad_tensor_offset_not_contiguous.gguf");
  ASSERT_TRUE(gap.has_problem(Rule::OffsetMismatch));
  EXPECT_NE(rules(gap).find("offset 64, expected 32"), std::string::npos) << rules(gap);
  const auto be = gguf::read_file(dir / "bad_version_byteswapped_bigendian.gguf");
  EXPECT_NE(rules(be).find("big-endian"), std::string::npos) << rules(be);
}

TEST(gguf_corpus, accepted_files_read_as_built) {
  CKPT_REQUIRE_CORPUS();
  const auto ok = gguf::read_file(test::corpus_dir() / "gguf" / "ok_minimal_one_f32_tensor.gguf");
  ASSERT_EQ(ok.tensors.size(), 1u);
  EXPECT_EQ(ok.tensors[0].name, "t");
  EXPECT_EQ(ok.tensors[0].ne[0], 4);
  EXPECT_EQ(ok.tensors[0].nbytes, 16u);
  EXPECT_EQ(ok.alignment, 32u);
  EXPECT_EQ(ok.data_start % 32, 0u);
  const auto zero = gguf::read_file(test::corpus_dir() / "gguf" / "edge_tensor_ne_zero_divbyzero_history.gguf");
  ASSERT_EQ(zero.tensors.size(), 1u);
  EXPECT_EQ(zero.tensors[0].elements, 0u);
  EXPECT_EQ(zero.tensors[0].nbytes, 0u);
}

// ---- writer round trip --------------------------------------------------------

std::string small_model() {
  std::vector<std::pair<std::string, WriteValue>> kvs{
      {"general.architecture", WriteValue::string("llama")},
      {"llama.block_count", WriteValue::u32(1)},
      {"llama.rope.freq_base", WriteValue::f32(10000.0f)},
      {"tokenizer.ggml.tokens", WriteValue::string_array({"<unk>", "<s>", "</s>", "a"})},
      {"tokenizer.ggml.scores", WriteValue::f32_array({0, 0, 0, -1.5f})},
      {"tokenizer.ggml.token_type", WriteValue::i32_array({2, 3, 3, 1})},
  };
  std::vector<gguf::WriteTensor> tensors{
      {"token_embd.weight", 8, {32, 4}, {}},   // q8_0: 4 rows of 34 bytes
      {"output_norm.weight", 0, {32}, {}},     // f32
      {"blk.0.ffn_down.weight", 12, {256, 3}, {}},  // q4_k: 3 rows of 144
  };
  std::string err;
  std::string b = gguf::build(kvs, tensors, {}, &err);
  EXPECT_EQ(err, "");
  return b;
}

TEST(gguf_reader, writer_output_reads_back) {
  const std::string b = small_model();
  const auto f = parse_bytes(b);
  ASSERT_TRUE(f.loadable()) << rules(f);
  EXPECT_TRUE(f.problems.empty()) << rules(f);
  EXPECT_EQ(f.version, 3u);
  ASSERT_EQ(f.kvs.size(), 6u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 1u);
  EXPECT_EQ(f.find("llama.rope.freq_base")->value.as_float(), 10000.0);
  const auto* toks = f.find("tokenizer.ggml.tokens");
  ASSERT_TRUE(toks);
  ASSERT_EQ(toks->value.strings.size(), 4u);
  EXPECT_EQ(toks->value.strings[3], "a");
  EXPECT_EQ(f.find("tokenizer.ggml.scores")->value.float_at(3), -1.5);
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->value.int_at(0), 2);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].nbytes, 4u * 34);
  EXPECT_EQ(f.tensors[1].offset, 160u);  // 136 padded to 32
  EXPECT_EQ(f.tensors[2].nbytes, 3u * 144);
  EXPECT_EQ(f.data_start + f.data_size, b.size());
}

TEST(gguf_reader, every_truncation_is_rejected_without_a_crash) {
  const std::string b = small_model();
  const auto whole = parse_bytes(b);
  const auto& last = whole.tensors.back();
  const size_t tensors_end = whole.data_start + last.offset + last.nbytes;
  for (size_t n = 0; n < b.size(); ++n) {
    const auto f = gguf::parse(std::as_bytes(std::span(b.data(), n)), n);
    if (n < tensors_end) {
      EXPECT_FALSE(f.loadable()) << "prefix of " << n << " bytes\n" << rules(f);
    } else {  // only the last tensor's padding is cut: llama.cpp's mmap loader does not need it
      EXPECT_TRUE(f.loadable()) << n;
      EXPECT_TRUE(f.has_problem(Rule::PaddingMissing)) << n;
    }
  }
}

TEST(gguf_reader, a_file_part_read_beyond_its_end_is_truncated_not_valid) {
  const std::string b = small_model();
  // Only the first 64 bytes handed over, but the file is longer: reads past them are truncation.
  const auto f = gguf::parse(std::as_bytes(std::span(b.data(), 64)), b.size());
  EXPECT_FALSE(f.loadable());
}

TEST(gguf_reader, v2_loads_and_trailing_bytes_are_noted) {
  std::string err;
  std::string b = gguf::build({{"general.architecture", WriteValue::string("llama")}}, {{"t", 0, {4}, {}}}, {2, 32}, &err);
  auto f = parse_bytes(b);
  EXPECT_TRUE(f.loadable()) << rules(f);
  EXPECT_EQ(f.version, 2u);
  b += std::string(5, '\0');
  f = parse_bytes(b);
  EXPECT_TRUE(f.loadable());
  EXPECT_TRUE(f.has_problem(Rule::TrailingBytes));
}

TEST(gguf_reader, missing_final_padding_is_a_warning_rule) {
  std::string err;
  std::string b = gguf::build({}, {{"t", 0, {3}, {}}}, {}, &err);  // 12 bytes padded to 32
  b.resize(b.size() - 20);
  const auto f = parse_bytes(b);
  EXPECT_TRUE(f.has_problem(Rule::PaddingMissing)) << rules(f);
  EXPECT_TRUE(f.loadable());
}

TEST(gguf_reader, custom_alignment_is_honoured) {
  std::string err;
  const std::string b = gguf::build({}, {{"a", 0, {3}, {}}, {"b", 0, {3}, {}}}, {3, 64}, &err);
  const auto f = parse_bytes(b);
  ASSERT_TRUE(f.loadable()) << rules(f);
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.tensors[1].offset, 64u);
  EXPECT_EQ(f.data_start % 64, 0u);
}

TEST(gguf_reader, type_table_geometry) {
  EXPECT_EQ(gguf::row_bytes(12, 256), 144u);   // q4_k
  EXPECT_EQ(gguf::row_bytes(9, 32), 36u);      // q8_1 from the C struct, not gguf-py's 40
  EXPECT_EQ(gguf::row_bytes(39, 64), 34u);     // mxfp4
  EXPECT_EQ(gguf::row_bytes(40, 64), 36u);     // nvfp4
  EXPECT_FALSE(gguf::row_bytes(4, 32));        // removed q4_2
  EXPECT_FALSE(gguf::row_bytes(2, 31));        // q4_0 row of 31
  EXPECT_FALSE(gguf::ggml_type(43));
  EXPECT_EQ(gguf::ggml_type_from_name("Q4_K"), 12);
  EXPECT_FALSE(gguf::ggml_type_from_name("q4_0_4_4"));  // removed ids are not writable
}

TEST(gguf_reader, type_table_agrees_with_the_format_neutral_dtypes) {
  for (int32_t id = 0; id < gguf::kTypeCount; ++id) {
    const auto* t = gguf::ggml_type(id);
    const DType d = gguf::dtype_of(id);
    if (t->block == 0) {
      EXPECT_EQ(d, DType::Unknown) << t->name;
      continue;
    }
    ASSERT_NE(d, DType::Unknown) << t->name;
    const auto& info = dtype_info(d);
    if (t->block == 1) EXPECT_EQ(info.bits, t->block_bytes * 8) << t->name;
    else {
      EXPECT_EQ(info.block_elems, t->block) << t->name;
      EXPECT_EQ(info.block_bytes, t->block_bytes) << t->name;
    }
  }
}

TEST(gguf_reader, bool_other_than_0_or_1_is_noted) {
  std::string err;
  std::vector<std::pair<std::string, WriteValue>> kvs{{"x.flag", WriteValue::boolean(true)}};
  kvs[0].second.bits = 7;
  const auto f = parse_bytes(gguf::build(kvs, {}, {}, &err));
  EXPECT_TRUE(f.has_problem(Rule::BoolNotZeroOne));
  EXPECT_TRUE(f.loadable());
}

}  // namespace
}  // namespace ckpt::ftest

namespace ckpt::ftest {
namespace {

// A deterministic stand-in for the fuzz target where clang/libFuzzer is absent: every single
// byte of a valid file set to 0x00, 0xFF and 0x80 in turn, plus seeded multi-byte damage; the
// reader must never crash and must explain every rejection, and what it accepts must lie
// inside the file.
void check_invariants(const gguf::File& f, uint64_t file_size, const std::string& what) {
  if (!f.loadable()) {
    ASSERT_FALSE(f.problems.empty()) << what;
    return;
  }
  ASSERT_TRUE(f.sizes_ok) << what;
  for (const auto& t : f.tensors) ASSERT_LE(f.data_start + t.offset + t.nbytes, file_size) << what;
}

TEST(gguf_reader, damaged_bytes_never_crash_and_are_explained) {
  const std::string base = small_model();
  size_t rejected = 0, runs = 0;
  for (size_t i = 0; i < base.size(); ++i)
    for (unsigned char v : {0x00, 0xFF, 0x80}) {
      std::string b = base;
      b[i] = static_cast<char>(v);
      const auto f = gguf::parse(std::as_bytes(std::span(b.data(), b.size())), b.size());
      check_invariants(f, b.size(), "byte " + std::to_string(i));
      rejected += !f.loadable();
      ++runs;
    }
  uint64_t s = 12345;
  for (int k = 0; k < 2000; ++k) {
    std::string b = base;
    for (int j = 0; j < 4; ++j) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      b[(s >> 33) % b.size()] = static_cast<char>(s >> 56);
    }
    const auto f = gguf::parse(std::as_bytes(std::span(b.data(), b.size())), b.size());
    check_invariants(f, b.size(), "seeded " + std::to_string(k));
    ++runs;
  }
  EXPECT_GT(rejected, 0u);
  RecordProperty("runs", static_cast<int>(runs));
}

// fuzz_gguf found it (fuzz/corpus/fuzz_gguf/regress-string-array-2e30): a 51-byte prefix of a
// file declared 64 GiB long whose key 'a.b' is an array of 2^30 strings. The count passes the
// "bytes left" bound (the file is large), and the reader reserved 16 bytes per declared string,
// a 16 GiB allocation, before reading any. Now it grows with what it reads and reports truncation.
TEST(gguf_reader, declared_string_array_does_not_allocate_before_reading) {
  std::string b("GGUF", 4);
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3);
  u64(0);  // tensors
  u64(1);  // kv pairs
  u64(3);
  b += "a.b";
  u32(9);  // array
  u32(8);  // of strings
  u64(uint64_t{1} << 30);
  b.append(3, '\0');
  const gguf::File f = gguf::parse(std::as_bytes(std::span(b.data(), b.size())), uint64_t{64} << 30);
  EXPECT_FALSE(f.metadata_ok);
  EXPECT_TRUE(f.has_problem(Rule::Truncated)) << rules(f);
}

}  // namespace
}  // namespace ckpt::ftest
