// The safetensors header reader and writer, from the format's rules (specs/bad-inputs.md §1):
// every reader Rule from the smallest violating bytes, the writer's layout, and hostile inputs.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "../checks/builders.h"
#include "ckpt/safetensors.h"

namespace ckpt::ftest {
namespace {

using st::DType;
using st::Rule;

bool has_rule(const st::Header& h, Rule r, const std::string& tensor = {}) {
  for (const auto& p : h.problems)
    if (p.rule == r && (tensor.empty() || p.tensor == tensor)) return true;
  return false;
}

std::string rules(const st::Header& h) {
  std::string s;
  for (const auto& p : h.problems) s += std::to_string(static_cast<int>(p.rule)) + ":" + p.tensor + ":" + p.detail + "\n";
  return s;
}

const char* kI32 = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";

// ---- dtype table ------------------------------------------------------------

TEST(st_dtype, table_matches_the_format_list) {
  // specs/bad-inputs.md §1: the exact dtype list with bits.
  const std::map<std::string, uint32_t> expected{
      {"BOOL", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8}, {"I8", 8}, {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16},
      {"I32", 32}, {"U32", 32}, {"F32", 32}, {"C64", 64}, {"F64", 64}, {"I64", 64}, {"U64", 64}};
  EXPECT_EQ(st::dtype_table().size(), expected.size());
  for (const auto& [name, bits] : expected) {
    auto d = st::dtype_from_name(name);
    ASSERT_TRUE(d) << name;
    EXPECT_EQ(st::dtype_name(*d), name);
    EXPECT_EQ(st::dtype_bits(*d), bits) << name;
  }
  EXPECT_FALSE(st::dtype_from_name("F128"));
  EXPECT_FALSE(st::dtype_from_name("f32"));  // case-sensitive, as the reference enum
  EXPECT_FALSE(st::dtype_from_name(""));
  EXPECT_EQ(st::dtype_bits(DType::Unknown), 0u);
}

TEST(st_dtype, tensor_nbytes_checked) {
  std::vector<uint64_t> s23{2, 3};
  EXPECT_EQ(st::tensor_nbytes(DType::F32, s23), 24u);
  EXPECT_EQ(st::tensor_nbytes(DType::BF16, s23), 12u);
  EXPECT_EQ(st::tensor_nbytes(DType::I32, std::vector<uint64_t>{}), 4u);      // rank 0 = one element
  EXPECT_EQ(st::tensor_nbytes(DType::F32, std::vector<uint64_t>{2, 0}), 0u);  // zero-sized
  EXPECT_EQ(st::tensor_nbytes(DType::F4, std::vector<uint64_t>{4}), 2u);
  EXPECT_EQ(st::tensor_nbytes(DType::F6_E2M3, std::vector<uint64_t>{4}), 3u);
  EXPECT_FALSE(st::tensor_nbytes(DType::F4, std::vector<uint64_t>{3}));  // 12 bits
  EXPECT_FALSE(st::tensor_nbytes(DType::I32, std::vector<uint64_t>{2, 18446744073709551614ull}));
  EXPECT_FALSE(st::tensor_nbytes(DType::U8, std::vector<uint64_t>{2, 9223372036854775807ull}));  // bits overflow
  EXPECT_FALSE(st::tensor_nbytes(DType::Unknown, std::vector<uint64_t>{1}));
}

// ---- the writer --------------------------------------------------------------

TEST(st_writer, header_is_padded_and_length_prefixed) {
  std::vector<st::TensorToWrite> ts{{"x", DType::F32, {3}, {}}};
  uint64_t data = 0;
  std::string h = st::build_header(ts, {}, &data);
  ASSERT_GE(h.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(h[static_cast<size_t>(i)]);
  EXPECT_EQ(n + 8, h.size());
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(data, 12u);
  auto parsed = json::parse(std::string_view(h).substr(8));
  ASSERT_TRUE(parsed.ok()) << h;
  EXPECT_EQ(parsed.value.find("__metadata__")->get_string("format"), "pt");
}

TEST(st_writer, round_trip_with_data_and_sorted_names) {
  TempDir d;
  std::vector<std::byte> bytes(8);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i + 1);
  std::vector<st::TensorToWrite> ts{{"z.last", DType::U8, {8}, bytes}, {"a.first", DType::F16, {2, 2}, {}}};
  ASSERT_EQ(st::write_file(d / "m.safetensors", ts), "");
  auto h = st::read_header(d / "m.safetensors");
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  ASSERT_TRUE(h.parsed);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a.first");  // sorted by name, as the reference writer
  EXPECT_EQ(h.tensors[0].begin, 0u);
  EXPECT_EQ(h.tensors[0].end, 8u);
  EXPECT_EQ(h.tensors[1].name, "z.last");
  EXPECT_EQ(h.tensors[1].begin, 8u);
  EXPECT_EQ(h.tensors[1].end, 16u);
  EXPECT_EQ(h.file_size, h.data_start() + 16);
  ASSERT_EQ(h.metadata.size(), 1u);
  EXPECT_EQ(h.metadata[0], std::make_pair(std::string("format"), std::string("pt")));
  std::string raw = read_text(d / "m.safetensors");
  ASSERT_EQ(raw.size(), h.file_size);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(static_cast<uint8_t>(raw[h.data_start() + 8 + i]), i + 1);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(raw[h.data_start() + i], '\0');  // hole reads as zeros
}

TEST(st_writer, unsorted_when_asked) {
  TempDir d;
  st::WriteOptions o;
  o.sort_by_name = false;
  o.metadata.clear();
  ASSERT_EQ(st::write_file(d / "m.safetensors", {{"b", DType::U8, {1}, {}}, {"a", DType::U8, {2}, {}}}, o), "");
  auto h = st::read_header(d / "m.safetensors");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "b");
  EXPECT_EQ(h.tensors[0].begin, 0u);
  EXPECT_EQ(h.tensors[1].begin, 1u);
  EXPECT_TRUE(h.metadata.empty());
  EXPECT_EQ(read_text(d / "m.safetensors").substr(8, 2), "{\"");  // no __metadata__ when empty
}

TEST(st_writer, sparse_large_tensor_uses_no_disk) {
  TempDir d;
  // 4 GiB of F32 described, none written: the file has full size but almost no blocks.
  ASSERT_EQ(st::write_file(d / "big.safetensors", {{"w", DType::F32, {1024, 1024, 1024}, {}}}), "");
  struct stat s{};
  ASSERT_EQ(::stat((d / "big.safetensors").c_str(), &s), 0);
  auto h = st::read_header(d / "big.safetensors");
  EXPECT_EQ(static_cast<uint64_t>(s.st_size), h.data_start() + (4ull << 30));
  EXPECT_LT(static_cast<uint64_t>(s.st_blocks) * 512, 1u << 20);
  EXPECT_TRUE(h.problems.empty()) << rules(h);
}

TEST(st_writer, rejects_inconsistent_requests) {
  TempDir d;
  std::vector<std::byte> three(3);
  EXPECT_NE(st::write_file(d / "a.safetensors", {{"x", DType::F32, {1}, three}}), "");  // 3 bytes for 4
  EXPECT_NE(st::write_file(d / "b.safetensors", {{"x", DType::F4, {3}, {}}}), "");    // 12 bits
  EXPECT_NE(st::write_file(d / "c.safetensors", {{"x", DType::I32, {2, 18446744073709551614ull}, {}}}), "");
  EXPECT_NE(st::write_file(d / "no/such/dir/x.safetensors", {{"x", DType::F32, {1}, {}}}), "");
}

TEST(st_writer, names_needing_escapes_round_trip) {
  TempDir d;
  std::string name = "a\"b\\c\n\x01\xc3\xa9";
  ASSERT_EQ(st::write_file(d / "m.safetensors", {{name, DType::U8, {1}, {}}}), "");
  auto h = st::read_header(d / "m.safetensors");
  ASSERT_EQ(h.tensors.size(), 1u) << rules(h);
  EXPECT_EQ(h.tensors[0].name, name);
}

// ---- reader: one test per rule, smallest violating bytes ------------------------

TEST(st_header, ok_minimal) {
  auto h = parse_bytes(frame(kI32) + std::string(16, '\0'));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  ASSERT_TRUE(h.framing_ok && h.parsed);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].dtype, DType::I32);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(h.tensors[0].end, 16u);
  EXPECT_EQ(h.header_len, std::strlen(kI32));
}

TEST(st_header, ST001_header_too_small) {
  for (size_t n : {0, 1, 7}) {
    auto h = parse_bytes(std::string(n, '\0'));
    EXPECT_TRUE(has_rule(h, Rule::HeaderTooSmall)) << n;
    EXPECT_FALSE(h.framing_ok);
    EXPECT_TRUE(contains(h.problems[0].detail, std::to_string(n) + " bytes")) << h.problems[0].detail;
  }
}

TEST(st_header, ST002_header_too_large) {
  for (uint64_t n : {uint64_t{100'000'001}, uint64_t{0xFFFFFF000000003Cull}, ~uint64_t{0}}) {
    auto h = parse_bytes(frame("", n) + std::string(76, ' '));
    EXPECT_TRUE(has_rule(h, Rule::HeaderTooLarge)) << n << rules(h);
    EXPECT_EQ(h.problems.size(), 1u);
    EXPECT_TRUE(contains(h.problems[0].detail, std::to_string(n)));
  }
}

TEST(st_header, ST003_header_length_past_eof) {
  auto h = parse_bytes(frame("", 1000) + std::string(76, ' '));  // 84-byte file
  ASSERT_TRUE(has_rule(h, Rule::HeaderPastEof)) << rules(h);
  EXPECT_TRUE(contains(h.problems[0].detail, "1008")) << h.problems[0].detail;
  EXPECT_TRUE(contains(h.problems[0].detail, "924 missing")) << h.problems[0].detail;
  auto h2 = parse_bytes(frame("", 60));  // N=60, nothing follows
  EXPECT_TRUE(has_rule(h2, Rule::HeaderPastEof));
}

TEST(st_header, ST003_exact_max_header_claimed_but_absent) {
  // N = 100,000,000 exactly is allowed by the cap, but the file is 8 bytes: past EOF, nothing allocated.
  auto h = parse_bytes(frame("", 100'000'000));
  EXPECT_TRUE(has_rule(h, Rule::HeaderPastEof)) << rules(h);
  EXPECT_FALSE(has_rule(h, Rule::HeaderTooLarge));
  TempDir d;
  write_text(d / "m.safetensors", frame("", 100'000'000));
  auto t0 = std::chrono::steady_clock::now();
  auto h2 = st::read_header(d / "m.safetensors");
  EXPECT_TRUE(has_rule(h2, Rule::HeaderPastEof)) << rules(h2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(st_header, ST018_prefix_shorter_than_header_is_read_failure) {
  // file_size says the header is there, but fewer bytes were handed over.
  std::string b = frame(kI32);
  auto h = st::parse_header(std::span<const std::byte>(reinterpret_cast<const std::byte*>(b.data()), 20), b.size() + 16);
  EXPECT_TRUE(has_rule(h, Rule::ReadFailed)) << rules(h);
  EXPECT_FALSE(h.framing_ok);
}

TEST(st_header, ST004_header_not_utf8) {
  auto h = parse_bytes(frame("\xff"));
  EXPECT_TRUE(has_rule(h, Rule::HeaderNotUtf8)) << rules(h);
  // invalid UTF-8 inside a tensor name
  auto h2 = parse_bytes(frame("{\"a\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}") + std::string(1, '\0'));
  EXPECT_TRUE(has_rule(h2, Rule::HeaderNotUtf8)) << rules(h2);
  EXPECT_FALSE(h2.parsed);
}

TEST(st_header, ST005_header_not_json) {
  auto h = parse_bytes(frame("{"));
  ASSERT_TRUE(has_rule(h, Rule::HeaderNotJson)) << rules(h);
  EXPECT_TRUE(contains(h.problems[0].detail, "file offset")) << h.problems[0].detail;
  for (const char* bad : {"", "   ", "{\"a\":}", "{}x", "{\"a\":{\"dtype\":\"U8\",\"shape\":[NaN],\"data_offsets\":[0,1]}}",
                          "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,Infinity]}}", "nul", "{'a':1}"}) {
    auto hb = parse_bytes(frame(bad) + std::string(1, '\0'));
    EXPECT_TRUE(has_rule(hb, Rule::HeaderNotJson)) << bad << "\n" << rules(hb);
    EXPECT_FALSE(hb.parsed) << bad;
  }
}

TEST(st_header, ST006_header_schema) {
  struct Case {
    const char* header;
    const char* tensor;
  };
  const Case cases[] = {
      {"[]", ""},
      {"\"x\"", ""},
      {R"({"t":5})", "t"},
      {R"({"t":{"shape":[1],"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1]}})", "t"},
      {R"({"t":{"dtype":8,"shape":[1],"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":{"a":0}}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0.0,1.0]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1e400]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[null,1]}})", "t"},
      {R"({"t":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})", "t"},
  };
  for (const auto& c : cases) {
    auto h = parse_bytes(frame(c.header) + std::string(1, '\0'));
    bool schema = has_rule(h, Rule::HeaderSchema, c.tensor);
    bool not_json = has_rule(h, Rule::HeaderNotJson);  // simdjson may refuse numbers out of range outright
    EXPECT_TRUE(schema || not_json) << c.header << "\n" << rules(h);
    if (schema && *c.tensor) {
      EXPECT_TRUE(h.tensors.empty()) << c.header;  // a malformed entry is not kept
    }
  }
}

TEST(st_header, ST006_rank_above_cap_and_1000_dims) {
  for (size_t rank : {257, 1000}) {
    std::string shape = "[";
    for (size_t i = 0; i < rank; ++i) shape += i ? ",1" : "1";
    shape += "]";
    auto h = parse_bytes(frame(R"({"t":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,1]}})") + std::string(1, '\0'));
    ASSERT_TRUE(has_rule(h, Rule::HeaderSchema, "t")) << rank << rules(h);
    EXPECT_TRUE(contains(h.problems[0].detail, std::to_string(rank))) << h.problems[0].detail;
  }
  // 256 is still accepted
  std::string shape = "[";
  for (size_t i = 0; i < 256; ++i) shape += i ? ",1" : "1";
  auto h = parse_bytes(frame(R"({"t":{"dtype":"U8","shape":)" + shape + R"(],"data_offsets":[0,1]}})") + std::string(1, '\0'));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
}

TEST(st_header, ST007_duplicate_key) {
  auto h = parse_bytes(frame(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})") +
                       std::string(2, '\0'));
  ASSERT_TRUE(has_rule(h, Rule::DuplicateKey, "a")) << rules(h);
  EXPECT_EQ(h.tensors.size(), 1u);
}

TEST(st_header, ST008_unknown_dtype_kept_as_unknown) {
  auto h = parse_bytes(frame(R"({"x":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})") + std::string(16, '\0'));
  ASSERT_TRUE(has_rule(h, Rule::UnknownDType, "x")) << rules(h);
  EXPECT_TRUE(contains(h.problems[0].detail, "F128"));
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].dtype, DType::Unknown);
}

TEST(st_header, ST016_metadata_not_strings) {
  auto h = parse_bytes(frame(R"({"__metadata__":{"format":"pt","epoch":3}})"));
  ASSERT_TRUE(has_rule(h, Rule::MetadataNotStrings)) << rules(h);
  EXPECT_TRUE(contains(h.problems[0].detail, "epoch"));
  auto h2 = parse_bytes(frame(R"({"__metadata__":["pt"]})"));
  EXPECT_TRUE(has_rule(h2, Rule::MetadataNotStrings)) << rules(h2);
  auto h3 = parse_bytes(frame(R"({"__metadata__":{"format":"pt"}})"));
  EXPECT_TRUE(h3.problems.empty()) << rules(h3);
  EXPECT_EQ(h3.metadata.size(), 1u);
  EXPECT_TRUE(h3.tensors.empty());  // __metadata__ is not a tensor
}

TEST(st_header, ST017_leading_whitespace_is_reported_not_fatal) {
  auto h = parse_bytes(frame("\t\n{}"));
  ASSERT_TRUE(has_rule(h, Rule::LeadingWhitespace)) << rules(h);
  EXPECT_EQ(h.problems.size(), 1u);
  EXPECT_TRUE(h.parsed);
  EXPECT_TRUE(contains(h.problems[0].detail, "2 whitespace"));
}

TEST(st_header, trailing_whitespace_padding_is_fine) {
  auto h = parse_bytes(frame("{}\r \t\n"));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  EXPECT_TRUE(h.parsed);
}

TEST(st_header, zero_sized_and_scalar_tensors_are_valid) {
  auto h = parse_bytes(frame(R"({"t":{"dtype":"I32","shape":[2,0],"data_offsets":[0,0]}})"));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  auto h2 = parse_bytes(frame(R"({"t":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})") + std::string(4, '\0'));
  EXPECT_TRUE(h2.problems.empty()) << rules(h2);
  ASSERT_EQ(h2.tensors.size(), 1u);
  EXPECT_TRUE(h2.tensors[0].shape.empty());
}

TEST(st_header, extra_entry_fields_are_ignored_like_the_crate) {
  auto h = parse_bytes(frame(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":true}})") + std::string(1, '\0'));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  EXPECT_EQ(h.tensors.size(), 1u);
}

// ---- hostile inputs: findings, never a crash ------------------------------------------

TEST(st_hostile, nesting_10000_deep_is_a_parse_error) {
  std::string deep = "{\"t\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  auto h = parse_bytes(frame(deep));
  EXPECT_TRUE(has_rule(h, Rule::HeaderNotJson) || has_rule(h, Rule::HeaderSchema, "t")) << rules(h).substr(0, 500);
  std::string deep_obj;
  for (int i = 0; i < 10000; ++i) deep_obj += "{\"a\":";
  deep_obj += "1" + std::string(10000, '}');
  auto h2 = parse_bytes(frame(deep_obj));
  EXPECT_FALSE(h2.problems.empty());
}

TEST(st_hostile, megabyte_tensor_name) {
  std::string name(1 << 20, 'n');
  auto h = parse_bytes(frame("{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})") + std::string(1, '\0'));
  EXPECT_TRUE(h.problems.empty()) << rules(h).substr(0, 300);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].name.size(), name.size());
}

TEST(st_hostile, huge_values_do_not_allocate) {
  // Shapes and offsets near 2^64 are recorded as numbers; nothing is sized from them.
  auto h = parse_bytes(frame(R"({"t":{"dtype":"U8","shape":[18446744073709551615,18446744073709551615],"data_offsets":[0,18446744073709551615]}})"));
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].end, 18446744073709551615ull);
}

TEST(st_hostile, many_entries) {
  std::string hdr = "{";
  for (int i = 0; i < 20000; ++i) {
    if (i) hdr += ',';
    hdr += "\"t" + std::to_string(i) + R"(":{"dtype":"U8","shape":[1],"data_offsets":[)" + std::to_string(i) + "," +
           std::to_string(i + 1) + "]}";
  }
  hdr += "}";
  auto h = parse_bytes(frame(hdr) + std::string(20000, '\0'));
  EXPECT_TRUE(h.problems.empty()) << rules(h).substr(0, 300);
  EXPECT_EQ(h.tensors.size(), 20000u);
}

TEST(st_hostile, every_truncation_of_a_valid_file) {
  std::string full = frame(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})") +
                     std::string(8, '\x7f');
  for (size_t n = 0; n < full.size(); ++n) {
    std::string cut = full.substr(0, n);
    auto h = parse_bytes(cut);
    EXPECT_EQ(h.file_size, n);
    if (n < 8) EXPECT_TRUE(has_rule(h, Rule::HeaderTooSmall)) << n;
    else if (n < full.size() - 8) EXPECT_TRUE(has_rule(h, Rule::HeaderPastEof)) << n;
    else EXPECT_TRUE(h.problems.empty()) << n;  // data truncation is judged by the ST checks (ST014)
  }
}

TEST(st_hostile, random_bytes_never_crash) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int iter = 0; iter < 2000; ++iter) {
    size_t len = 8 + (iter % 64);
    std::string b = frame("", len - 8);
    for (size_t i = 8; i < len; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const char alphabet[] = "{}[]\":,0123456789-.eE \"dtypeshapedata_offsetsU8F32\\u\xff\xc3";
      b += alphabet[x % (sizeof alphabet - 1)];
    }
    auto h = parse_bytes(b);
    EXPECT_TRUE(h.parsed || !h.problems.empty());
  }
}

TEST(st_read, special_files_are_read_failures_without_hanging) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo.safetensors").c_str(), 0644), 0);
  fs::create_directory(d / "dir.safetensors");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sp = (d / "sock.safetensors").string();
  ASSERT_LT(sp.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sp.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  for (const char* n : {"fifo.safetensors", "dir.safetensors", "sock.safetensors", "missing.safetensors"}) {
    auto h = st::read_header(d / n);
    EXPECT_TRUE(has_rule(h, Rule::ReadFailed)) << n << rules(h);
    EXPECT_FALSE(h.parsed);
  }
  ::close(s);
}

TEST(st_read, symlink_loop_is_a_read_failure) {
  TempDir d;
  fs::create_symlink("b.safetensors", d / "a.safetensors");
  fs::create_symlink("a.safetensors", d / "b.safetensors");
  auto h = st::read_header(d / "a.safetensors");
  EXPECT_TRUE(has_rule(h, Rule::ReadFailed)) << rules(h);
}

TEST(st_read, reads_only_the_header_of_a_file) {
  TempDir d;
  write_st(d / "m.safetensors", {{"w", DType::F32, {256, 1024, 1024}}});  // 1 GiB sparse
  auto t0 = std::chrono::steady_clock::now();
  auto h = st::read_header(d / "m.safetensors");
  EXPECT_TRUE(h.problems.empty()) << rules(h);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace ckpt::ftest
