// The fixture tokenizer: SwiftLM's 288-token layout, deterministic, byte-level alphabet.
#include <gtest/gtest.h>

#include "ckpt/json.h"
#include "ckpt/tokenizer.h"
#include "tokenizer/utf8.h"
#include "test_support.h"

using namespace ckpt;

TEST(ByteLevel, AlphabetMatchesGpt2) {
  const auto& syms = tok::byte_level_symbols();
  EXPECT_EQ(syms[' '], "\xC4\xA0");   // Ġ
  EXPECT_EQ(syms['\n'], "\xC4\x8A");  // Ċ
  EXPECT_EQ(syms['a'], "a");
  const auto& sorted = tok::byte_level_alphabet_sorted();
  ASSERT_EQ(sorted.size(), 256u);
  EXPECT_EQ(sorted.front(), "!");
  EXPECT_EQ(sorted.back(), "\xC5\x83");  // Ń
  EXPECT_TRUE(tok::spelled_in_byte_level("\xC4\xA0hello"));
  EXPECT_FALSE(tok::spelled_in_byte_level(" hello"));
  EXPECT_FALSE(tok::spelled_in_byte_level("\xFF"));
  EXPECT_EQ(tok::to_byte_level("a b"), "a\xC4\xA0" "b");
}

TEST(Generate, MatchesSwiftLmLayout) {
  auto g = tok::generate({});
  auto r = json::parse(g.tokenizer_json);
  ASSERT_TRUE(r.ok());
  const auto* vocab = r.value.find("model")->find("vocab");
  ASSERT_EQ(vocab->as_object().size(), 288u);
  EXPECT_EQ(vocab->get_int("<|endoftext|>"), 0);
  EXPECT_EQ(vocab->get_int("<pad>"), 3);
  EXPECT_EQ(vocab->get_int("!"), 4);
  EXPECT_EQ(vocab->get_int("hell"), 262);
  EXPECT_EQ(vocab->get_int("<|unused287|>"), 287);
  EXPECT_EQ(r.value.find("model")->find("merges")->as_array().size(), 4u);
  EXPECT_EQ(g, g);
}

TEST(Generate, SameVocabularyAsTheSeedFixture) {
  CKPT_REQUIRE_CORPUS();
  auto seed = json::parse(test::read_text(test::corpus_dir() /
                                          "seed-fixtures/SharpAI/SwiftLM/tests/fixtures/dense/tokenizer.json"));
  auto ours = json::parse(tok::generate({}).tokenizer_json);
  ASSERT_TRUE(seed.ok() && ours.ok());
  EXPECT_EQ(*seed.value.find("model")->find("vocab"), *ours.value.find("model")->find("vocab"));
  EXPECT_EQ(*seed.value.find("model")->find("merges"), *ours.value.find("model")->find("merges"));
  EXPECT_EQ(*seed.value.find("added_tokens"), *ours.value.find("added_tokens"));
  tok::GenOptions o;
  o.unigram = true;
  auto useed = json::parse(test::read_text(
      test::corpus_dir() / "seed-fixtures/SharpAI/SwiftLM/tests/fixtures/unigram-tokenizer/tokenizer.json"));
  auto uours = json::parse(tok::generate(o).tokenizer_json);
  ASSERT_TRUE(useed.ok() && uours.ok());
  EXPECT_EQ(*useed.value.find("model")->find("vocab"), *uours.value.find("model")->find("vocab"));
  EXPECT_EQ(useed.value.find("model")->get_int("unk_id"), uours.value.find("model")->get_int("unk_id"));
}

TEST(Generate, LargeVocabularyIsConsistent) {
  tok::GenOptions o;
  o.vocab_size = 20000;
  o.fill_with_merges = true;
  auto g = tok::generate(o);
  auto r = json::parse(g.tokenizer_json);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value.find("model")->find("vocab")->as_object().size(), 20000u);
  EXPECT_EQ(r.value.find("model")->find("merges")->as_array().size(), 20000u - 260u);
  EXPECT_TRUE(r.duplicates.empty());
}

namespace ckpt::tok {
bool operator==(const Generated& a, const Generated& b) {
  return a.tokenizer_json == b.tokenizer_json && a.tokenizer_config_json == b.tokenizer_config_json &&
         a.generation_config_json == b.generation_config_json;
}
}  // namespace ckpt::tok

// The byte loop of spelled_in_byte_level against a plain decode-then-test reference, over every
// string of one and two bytes and many random longer ones. An overlong encoding (C0 A1 for
// '!') is not a spelling of the alphabet: tokenizers reads only valid UTF-8.
namespace {
bool reference_spelled(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t at = i;
    auto cp = ckpt::tok::utf8_next(s, i);
    if (!cp) return false;
    if (i - at == 2 && *cp < 0x80) return false;  // overlong
    const uint32_t c = *cp;
    const bool ok = c < 256 ? ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))
                            : c <= 0x143;
    if (!ok) return false;
  }
  return true;
}
}  // namespace

TEST(ByteLevelSpelling, MatchesDecodeThenTest) {
  for (unsigned a = 0; a < 256; ++a) {
    std::string one(1, static_cast<char>(a));
    EXPECT_EQ(tok::spelled_in_byte_level(one), reference_spelled(one)) << a;
    for (unsigned b = 0; b < 256; ++b) {
      std::string two{static_cast<char>(a), static_cast<char>(b)};
      ASSERT_EQ(tok::spelled_in_byte_level(two), reference_spelled(two)) << a << " " << b;
    }
  }
  uint64_t x = 88172645463325252ull;
  for (int n = 0; n < 200000; ++n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string s;
    const size_t len = 1 + x % 9;
    for (size_t k = 0; k < len; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      // Mostly bytes the alphabet uses, so long valid strings are common.
      const unsigned pick = x % 4;
      s += static_cast<char>(pick == 0 ? 0xC4 + (x >> 8) % 2 : pick == 1 ? 0x80 + (x >> 8) % 64 : 0x20 + (x >> 8) % 0x60);
    }
    ASSERT_EQ(tok::spelled_in_byte_level(s), reference_spelled(s)) << n;
  }
}
