// The header reader has a one-pass scanner for regular headers and the simdjson DOM path for
// everything else. These tests feed the same logical header through both (a regular spelling,
// and one made irregular by an escape or an extra field) and require identical results, and
// check that irregular spellings still produce the right entries or problems.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ckpt/name_index.h"
#include "ckpt/safetensors.h"

namespace ckpt::ftest {
namespace {

std::string frame(const std::string& json, uint64_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json + std::string(data_bytes, '\0');
}

st::Header parse(const std::string& json, uint64_t data_bytes) {
  std::string bytes = frame(json, data_bytes);
  return st::parse_header(std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size());
}

std::string describe(const st::Header& h) {
  std::string s = "parsed=" + std::to_string(h.parsed) + "\n";
  for (const auto& t : h.tensors) {
    s += std::string(t.name) + " " + std::string(st::dtype_name(t.dtype)) + " " + std::to_string(static_cast<int>(t.dtype)) + " [";
    for (auto d : t.shape) s += std::to_string(d) + ",";
    s += "] " + std::to_string(t.begin) + ".." + std::to_string(t.end);
    s += t.name_hash == hash_name(t.name) ? " hash-ok\n" : " HASH-WRONG\n";
  }
  for (const auto& [k, v] : h.metadata) s += "meta " + k + "=" + v + "\n";
  for (const auto& p : h.problems) s += "problem " + std::to_string(static_cast<int>(p.rule)) + " " + p.tensor + "\n";
  return s;
}

const char* kRegular =
    R"({"__metadata__":{"format":"pt"},"b.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
    R"("a.bias":{"dtype":"F32","shape":[],"data_offsets":[12,16]},"z":{"dtype":"F4","shape":[0],"data_offsets":[16,16]}})";

TEST(header_fast_path, regular_and_irregular_spellings_agree) {
  const std::string regular = kRegular;
  // Same content: an escaped letter in metadata, whitespace everywhere, reordered fields and an
  // unknown field (ignored by the reference) all force the general path.
  const std::string escaped_meta =
      R"({"__metadata__":{"format":"p\u0074"},"b.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("a.bias":{"dtype":"F32","shape":[],"data_offsets":[12,16]},"z":{"dtype":"F4","shape":[0],"data_offsets":[16,16]}})";
  const std::string spaced =
      " {\n \"__metadata__\" : { \"format\" : \"pt\" } ,\n \"b.weight\" : { \"shape\" : [ 2 , 3 ] , \"data_offsets\" : [ 0 , 12 ] , "
      "\"dtype\" : \"BF16\" } , \"a.bias\":{\"dtype\":\"F32\",\"shape\":[ ],\"data_offsets\":[12,16]},"
      "\"z\":{\"dtype\":\"F4\",\"shape\":[0],\"data_offsets\":[16,16]}\t}\r\n   ";
  const std::string extra_field =
      R"({"__metadata__":{"format":"pt"},"b.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12],"note":[1,{"x":null}]},)"
      R"("a.bias":{"dtype":"F32","shape":[],"data_offsets":[12,16]},"z":{"dtype":"F4","shape":[0],"data_offsets":[16,16]}})";
  const std::string want = describe(parse(regular, 16));
  EXPECT_NE(want.find("b.weight BF16"), std::string::npos) << want;
  EXPECT_EQ(describe(parse(escaped_meta, 16)), want);
  std::string spaced_desc = describe(parse(spaced, 16));
  // The leading space is reported (older readers reject it); everything else is identical.
  EXPECT_NE(spaced_desc.find("problem " + std::to_string(static_cast<int>(st::Rule::LeadingWhitespace))), std::string::npos);
  EXPECT_EQ(spaced_desc.substr(0, want.size()), want);
  EXPECT_EQ(describe(parse(extra_field, 16)), want);
  EXPECT_FALSE(parse(regular, 16).general_path);
  EXPECT_TRUE(parse(escaped_meta, 16).general_path);
  // Entries that match the compact spelling only part of the way (a space late in the entry, a
  // field order that differs after dtype): the scanner gives up on the compact form there and
  // reads the entry field by field, with the same result.
  for (const char* b_weight : {R"({"dtype":"BF16","shape":[2,3],"data_offsets":[0,12] })",
                               R"({"dtype":"BF16","shape":[2,3],"data_offsets":[0, 12]})",
                               R"({"dtype":"BF16","shape":[2, 3],"data_offsets":[0,12]})",
                               R"({"dtype":"BF16","data_offsets":[0,12],"shape":[2,3]})",
                               R"({"dtype": "BF16","shape":[2,3],"data_offsets":[0,12]})"}) {
    const std::string late = R"({"__metadata__":{"format":"pt"},"b.weight":)" + std::string(b_weight) +
                             R"(,"a.bias":{"dtype":"F32","shape":[],"data_offsets":[12,16]},"z":{"dtype":"F4","shape":[0],"data_offsets":[16,16]}})";
    const st::Header h = parse(late, 16);
    EXPECT_EQ(describe(h), want) << b_weight;
    EXPECT_FALSE(h.general_path) << b_weight;
  }
}

TEST(header_fast_path, escaped_names_are_unescaped) {
  auto h = parse(R"({"a\"b\u00e9":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].name, "a\"b\xc3\xa9");
  EXPECT_EQ(h.tensors[0].name_hash, hash_name(h.tensors[0].name));
  EXPECT_TRUE(h.problems.empty());
}

TEST(header_fast_path, irregular_inputs_still_get_their_problems) {
  auto rule_of = [](const st::Header& h) { return h.problems.empty() ? -1 : static_cast<int>(h.problems[0].rule); };
  // duplicate key: first kept, the second reported
  auto dup = parse(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2);
  EXPECT_EQ(rule_of(dup), static_cast<int>(st::Rule::DuplicateKey));
  ASSERT_EQ(dup.tensors.size(), 1u);
  EXPECT_EQ(dup.tensors[0].begin, 0u);
  // non-integer, negative and oversized numbers
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}})", 1)), static_cast<int>(st::Rule::HeaderSchema));
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1)), static_cast<int>(st::Rule::HeaderSchema));
  EXPECT_NE(rule_of(parse(R"({"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})", 1)), -1);
  // leading zero is not JSON
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})", 1)), static_cast<int>(st::Rule::HeaderNotJson));
  // unknown dtype, missing field, metadata not strings, control character in a name
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1)), static_cast<int>(st::Rule::UnknownDType));
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1)), static_cast<int>(st::Rule::HeaderSchema));
  EXPECT_EQ(rule_of(parse(R"({"__metadata__":{"n":1}})", 0)), static_cast<int>(st::Rule::MetadataNotStrings));
  EXPECT_EQ(rule_of(parse("{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1)),
            static_cast<int>(st::Rule::HeaderNotJson));
  // trailing garbage after the object
  EXPECT_EQ(rule_of(parse(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}} x)", 1)), static_cast<int>(st::Rule::HeaderNotJson));
  // invalid UTF-8
  EXPECT_EQ(rule_of(parse("{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1)),
            static_cast<int>(st::Rule::HeaderNotUtf8));
}

TEST(header_fast_path, names_outlive_copies_of_the_header) {
  st::Header copy;
  {
    auto h = parse(kRegular, 16);
    copy = h;
  }
  ASSERT_EQ(copy.tensors.size(), 3u);
  EXPECT_EQ(copy.tensors[0].name, "b.weight");
  EXPECT_EQ(copy.tensors[2].dtype, st::DType::F4);
}

}  // namespace
}  // namespace ckpt::ftest

namespace ckpt::ftest {
namespace {

// Every length of number from 1 to 21 digits, at every distance from the end of the header:
// the scanner and the general path agree (the general path is forced by an escape).
TEST(header_fast_path, numbers_of_every_length_agree_with_the_general_path) {
  const std::string digits = "18446744073709551615999";
  std::vector<std::string> values = {"0", "7", "10", "18446744073709551615", "18446744073709551616",
                                     "99999999999999999999", "00", "01"};
  for (size_t n = 1; n <= 21; ++n) values.push_back(digits.substr(0, n));
  for (size_t n = 1; n <= 21; ++n) values.push_back("1" + std::string(n - 1, '0'));
  // Every digit in every position of an 8-byte group, and values just short of a group.
  for (size_t n = 1; n <= 20; ++n) values.push_back(std::string("98765432101234567890").substr(0, n));
  for (size_t n = 1; n <= 20; ++n) values.push_back(std::string(n, '9'));
  for (const auto& v : values)
    for (const char* tail : {"]", " ]", ".5]", "e3]", "E+1]"}) {
      std::string body = R"("t":{"dtype":"U8","shape":[)" + v + R"(],"data_offsets":[0,)" + v + tail + "}}";
      std::string fast = "{" + body;
      std::string general = R"({"__metadata__":{"k":"\u0076"},)" + body;
      auto bytes_fast = frame(fast, 0), bytes_general = frame(general, 0);
      const uint64_t big = UINT64_MAX;  // the file size only bounds the framing checks here
      auto a = st::parse_header(std::as_bytes(std::span(bytes_fast.data(), bytes_fast.size())), big);
      auto b = st::parse_header(std::as_bytes(std::span(bytes_general.data(), bytes_general.size())), big);
      b.metadata.clear();
      EXPECT_EQ(describe(a), describe(b)) << v << tail;
    }
}

}  // namespace
}  // namespace ckpt::ftest
