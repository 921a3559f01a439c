// Hostile inputs give an error string, never a crash, hang or unbounded allocation.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "ckpt/encode.h"

namespace {

TEST(EncodeHostile, GarbageTokenizerJson) {
  std::string err;
  for (std::string s : {"", "{", "[]", "null", "{\"model\":1}", "{\"model\":{\"type\":\"BPE\"}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a\"]}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"unk_token\":\"zz\"}}",
                        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":\"x\"}]}"}) {
    err.clear();
    EXPECT_FALSE(ckpt::encode::load_tokenizer_json(s, "", err)) << s;
    EXPECT_FALSE(err.empty()) << s;
  }
  // deep nesting
  std::string deep(5000, '[');
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(deep, "", err));
  std::string seq = "{\"model\":{\"type\":\"BPE\",\"vocab\":{}},\"normalizer\":";
  for (int i = 0; i < 100; ++i) seq += "{\"type\":\"Sequence\",\"normalizers\":[";
  for (int i = 0; i < 100; ++i) seq += "]}";
  seq += "}";
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(seq, "", err));
  EXPECT_NE(err.find("too deep"), std::string::npos) << err;
}

TEST(EncodeHostile, BadRegexIsAnError) {
  std::string err;
  std::string j =
      R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(unclosed[" },"behavior":"Isolated","invert":false}})";
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(j, "", err));
  EXPECT_NE(err.find("invalid regex"), std::string::npos) << err;
}

TEST(EncodeHostile, CatastrophicRegexGivesUp) {
  std::string err;
  std::string j =
      R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(a*)*b"},"behavior":"Isolated","invert":false}})";
  auto e = ckpt::encode::load_tokenizer_json(j, "", err);
  ASSERT_TRUE(e) << err;
  std::vector<uint32_t> ids;
  // must return (either result) rather than hang
  (void)ckpt::encode::encode(*e, std::string(40, 'a'), false, ids, err);
}

TEST(EncodeHostile, GarbageSentencePiece) {
  std::string err;
  for (std::string s : {std::string(), std::string("\x0a\xff\xff\xff\xff\x0f", 6), std::string("\x0a\x05\x0a\x01", 4),
                        std::string("\xff\xff\xff", 3), std::string("\x0b", 1),
                        std::string("\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12)}) {
    err.clear();
    EXPECT_FALSE(ckpt::encode::load_sentencepiece(s, "", err));
    EXPECT_FALSE(err.empty());
  }
  // random bytes and truncations never crash
  std::mt19937 rng(7);
  for (int k = 0; k < 2000; ++k) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    auto e = ckpt::encode::load_sentencepiece(s, "", err);
    if (e) {
      std::vector<uint32_t> ids;
      (void)ckpt::encode::encode(*e, "hello world 123", true, ids, err);
    }
    auto j = ckpt::encode::load_tokenizer_json(s, "", err);
    (void)j;
  }
}

TEST(EncodeHostile, WordSentencePieceRefused) {
  // one NORMAL piece "a" (score 0), trainer_spec model_type = WORD
  std::string piece = std::string("\x0a\x01" "a" "\x15\x00\x00\x00\x00\x18\x01", 10);
  std::string model = std::string("\x0a", 1) + static_cast<char>(piece.size()) + piece + std::string("\x12\x02\x18\x03", 4);
  std::string err;
  EXPECT_FALSE(ckpt::encode::load_sentencepiece(model, "", err));
  EXPECT_NE(err.find("model type Word is not supported for encoding"), std::string::npos) << err;
}

}  // namespace
