// Exact encoding rules on small in-code tokenizers (expected ids worked out by hand from the
// Hugging Face tokenizers / SentencePiece algorithms).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/encode.h"

namespace {

using ckpt::encode::Encoder;
using Ids = std::vector<uint32_t>;

std::unique_ptr<Encoder> load(const std::string& json) {
  std::string err;
  auto e = ckpt::encode::load_tokenizer_json(json, "", err);
  EXPECT_TRUE(e) << err;
  return e;
}

Ids enc(const Encoder& e, const std::string& text, bool special = false) {
  Ids ids;
  std::string err;
  EXPECT_TRUE(ckpt::encode::encode(e, text, special, ids, err)) << err;
  return ids;
}

// vocab a b c ab bc abc; merges ranked as given.
std::string tiny(const std::string& merges, const std::string& extra_model = "", const std::string& pre = "null",
                 const std::string& norm = "null", const std::string& added = "[]", const std::string& post = "null",
                 const std::string& vocab_extra = "") {
  return R"({"added_tokens":)" + added + R"(,"normalizer":)" + norm + R"(,"pre_tokenizer":)" + pre +
         R"(,"post_processor":)" + post +
         R"(,"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"ab":3,"bc":4,"abc":5," ":6,"d":7)" + vocab_extra +
         R"(},"merges":)" + merges + extra_model + "}}";
}

TEST(EncodeRules, MergePriorityLowestRankFirst) {
  // "b c" ranks before "a b": abc -> a + bc (bc cannot merge with a: no "a bc" merge)
  auto e = load(tiny(R"(["b c","a b"])"));
  EXPECT_EQ(enc(*e, "abc"), (Ids{0, 4}));
  auto f = load(tiny(R"(["a b","b c","ab c"])"));
  EXPECT_EQ(enc(*f, "abc"), (Ids{5}));
  EXPECT_EQ(enc(*f, "abab"), (Ids{3, 3}));
  // pair form of merges
  auto g = load(tiny(R"([["b","c"],["a","b"]])"));
  EXPECT_EQ(enc(*g, "abc"), (Ids{0, 4}));
}

TEST(EncodeRules, TiesGoLeftmost) {
  auto e = load(tiny(R"(["a a"])", "", "null", "null", "[]", "null", R"(,"aa":8)"));
  EXPECT_EQ(enc(*e, "aaa"), (Ids{8, 0}));
  EXPECT_EQ(enc(*e, "aaaa"), (Ids{8, 8}));
}

TEST(EncodeRules, IgnoreMerges) {
  // "abc" is in the vocab but no merge reaches it from "bc" first: with ignore_merges the word is emitted whole
  auto e = load(tiny(R"(["b c"])", R"(,"ignore_merges":true)"));
  EXPECT_EQ(enc(*e, "abc"), (Ids{5}));
  auto f = load(tiny(R"(["b c"])"));
  EXPECT_EQ(enc(*f, "abc"), (Ids{0, 4}));
}

TEST(EncodeRules, AddedTokensSplitFirstLongestMatch) {
  std::string added =
      R"([{"id":10,"content":"<x>","special":true,"normalized":false},{"id":11,"content":"<x><y>","special":true,"normalized":false},{"id":12,"content":"q","special":false,"normalized":false,"lstrip":true,"rstrip":true}])";
  auto e = load(tiny(R"(["a b"])", "", "null", "null", added));
  EXPECT_EQ(enc(*e, "ab<x>ab"), (Ids{3, 10, 3}));
  EXPECT_EQ(enc(*e, "a<x><y>b"), (Ids{0, 11, 1}));
  EXPECT_EQ(enc(*e, "<x>"), (Ids{10}));
  // lstrip / rstrip eat the whitespace beside the token
  EXPECT_EQ(enc(*e, "a  q  b"), (Ids{0, 12, 1}));
}

TEST(EncodeRules, ByteFallbackAndUnk) {
  std::string bytes = R"(,"<0xC3>":20,"<0xA9>":21,"<unk>":22)";
  auto e = load(tiny(R"(["a b"])", R"(,"byte_fallback":true,"unk_token":"<unk>")", "null", "null", "[]", "null", bytes));
  EXPECT_EQ(enc(*e, "ab\xC3\xA9"), (Ids{3, 20, 21}));  // é -> its two byte tokens
  EXPECT_EQ(enc(*e, "a\xC3\xA8"), (Ids{0, 22}));       // è: <0xA8> missing -> unk
  auto f = load(tiny(R"(["a b"])", R"(,"unk_token":"<unk>","fuse_unk":true)", "null", "null", "[]", "null", bytes));
  EXPECT_EQ(enc(*f, "azzb"), (Ids{0, 22, 1}));
  auto g = load(tiny(R"(["a b"])", R"(,"unk_token":"<unk>")", "null", "null", "[]", "null", bytes));
  EXPECT_EQ(enc(*g, "azzb"), (Ids{0, 22, 22, 1}));
  // no fallback, no unk: a clear error
  auto h = load(tiny(R"(["a b"])"));
  Ids ids;
  std::string err;
  EXPECT_FALSE(ckpt::encode::encode(*h, "az", false, ids, err));
  EXPECT_NE(err.find("U+007A"), std::string::npos) << err;
}

TEST(EncodeRules, SplitBehaviours) {
  auto split = [](const std::string& behavior, bool invert) {
    return R"({"type":"Split","pattern":{"String":"b"},"behavior":")" + behavior + R"(","invert":)" +
           (invert ? "true" : "false") + "}";
  };
  // no merges: every character is its own token, so the ids show only the splits through merges "a b"
  // text "abab": matches of "b" at 1 and 3
  auto ids_for = [&](const std::string& b, bool inv) {
    auto e = load(tiny(R"(["a b","b c"])", "", split(b, inv)));
    return enc(*e, "abbc");
  };
  // pieces: Isolated a|b|b|c ; Removed a|c ; MergedWithPrevious ab|b|c ; MergedWithNext a|b|bc ;
  // Contiguous a|bb|c
  EXPECT_EQ(ids_for("Isolated", false), (Ids{0, 1, 1, 2}));
  EXPECT_EQ(ids_for("Removed", false), (Ids{0, 2}));
  EXPECT_EQ(ids_for("MergedWithPrevious", false), (Ids{3, 1, 2}));
  EXPECT_EQ(ids_for("MergedWithNext", false), (Ids{0, 1, 4}));
  EXPECT_EQ(ids_for("Contiguous", false), (Ids{0, 1, 1, 2}));  // "bb" has no merge
  // invert: the non-"b" spans are the matches; Removed then keeps only the b's
  EXPECT_EQ(ids_for("Removed", true), (Ids{1, 1}));
  // regex pattern
  auto e = load(tiny(R"(["a b"])", "", R"({"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Removed","invert":false})"));
  EXPECT_EQ(enc(*e, "ab \t ab"), (Ids{3, 3}));
}

TEST(EncodeRules, Nfc) {
  // e + U+0301 composes to é (C3 A9), which is one token here
  auto e = load(tiny("[]", "", "null", R"({"type":"NFC"})", "[]", "null", R"(,"\u00e9":30,"e":31,"\u0301":32)"));
  EXPECT_EQ(enc(*e, "e\xCC\x81"), (Ids{30}));
  auto f = load(tiny("[]", "", "null", R"({"type":"NFD"})", "[]", "null", R"(,"\u00e9":30,"e":31,"\u0301":32)"));
  EXPECT_EQ(enc(*f, "\xC3\xA9"), (Ids{31, 32}));
  auto g = load(tiny("[]", "", "null",
                     R"({"type":"Sequence","normalizers":[{"type":"Lowercase"},{"type":"Replace","pattern":{"String":"x"},"content":"ab"},{"type":"Prepend","prepend":"d"}]})"));
  EXPECT_EQ(enc(*g, "AXc"), (Ids{7, 0, 0, 1, 2}));
}

TEST(EncodeRules, ByteLevelAlphabet) {
  // ' ' maps to U+0120 "Ġ", '\n' to U+010A "Ċ"
  auto e = load(tiny("[]", "", R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "null", "[]",
                     "null", R"(,"Ġ":40,"Ċ":41)"));
  EXPECT_EQ(enc(*e, "a\nb"), (Ids{40, 0, 41, 1}));
}

TEST(EncodeRules, TemplateProcessingAddsSpecials) {
  std::string post =
      R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[50],"tokens":["<s>"]},"</s>":{"id":"</s>","ids":[51],"tokens":["</s>"]}}})";
  auto e = load(tiny(R"(["a b"])", "", "null", "null", "[]", post));
  EXPECT_EQ(enc(*e, "ab", true), (Ids{50, 3, 51}));
  EXPECT_EQ(enc(*e, "ab", false), (Ids{3}));
}

TEST(EncodeRules, MetaspaceAndDigits) {
  std::string pre =
      R"({"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}]})";
  auto e = load(tiny("[]", "", pre, "null", "[]", "null", R"(,"▁":60,"1":61,"2":62)"));
  EXPECT_EQ(enc(*e, "a b12"), (Ids{60, 0, 60, 1, 61, 62}));
}

TEST(EncodeRules, MetaspaceSplitRunsOfSpacesAsRust) {
  // tokenizers' Metaspace test: "Hey   friend!" -> "▁Hey" "▁" "▁" "▁friend!"
  std::string pre = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true})";
  auto e = load(tiny(R"(["▁ a"])", "", pre, "null", "[]", "null", R"(,"▁":60,"▁a":61)"));
  EXPECT_EQ(enc(*e, "a   a"), (Ids{61, 60, 60, 61}));
  // split=false keeps one piece; "never" adds no prefix
  std::string pre2 = R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":false})";
  auto f = load(tiny(R"(["▁ a"])", "", pre2, "null", "[]", "null", R"(,"▁":60,"▁a":61)"));
  EXPECT_EQ(enc(*f, "a  a"), (Ids{0, 60, 61}));
}

TEST(EncodeRules, InvalidUtf8IsAnError) {
  auto e = load(tiny("[]"));
  Ids ids;
  std::string err;
  EXPECT_FALSE(ckpt::encode::encode(*e, "a\xFF" "b", false, ids, err));
  EXPECT_NE(err.find("not valid UTF-8 at byte 1"), std::string::npos) << err;
}

TEST(EncodeRules, RefusedClearly) {
  std::string err;
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(R"({"model":{"type":"WordLevel","vocab":{"a":0}}})", "", err));
  EXPECT_NE(err.find("model type WordLevel is not supported for encoding"), std::string::npos) << err;
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(R"({"model":{"type":"WordPiece","vocab":{}}})", "", err));
  EXPECT_NE(err.find("model type WordPiece is not supported"), std::string::npos) << err;
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(tiny("[]", "", "null", R"({"type":"BertNormalizer"})"), "", err));
  EXPECT_NE(err.find("normalizer BertNormalizer is not supported"), std::string::npos) << err;
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(tiny("[]", "", R"({"type":"Punctuation"})"), "", err));
  EXPECT_NE(err.find("pre_tokenizer Punctuation is not supported"), std::string::npos) << err;
  EXPECT_FALSE(ckpt::encode::load_tokenizer_json(tiny("[]", R"(,"continuing_subword_prefix":"##")"), "", err));
  EXPECT_NE(err.find("continuing_subword_prefix"), std::string::npos) << err;
}

TEST(EncodeRules, UnigramViterbi) {
  // scores: "ab" -1 beats "a"+"b" (-1.5 -1.5); "abc": "ab"+"c" = -3 vs "a"+"bc" = -2.5 -> a|bc
  std::string j =
      R"({"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0.0],["a",-1.5],["b",-1.5],["c",-2.0],["ab",-1.0],["bc",-1.0]]}})";
  auto e = load(j);
  EXPECT_EQ(enc(*e, "ab"), (Ids{4}));
  EXPECT_EQ(enc(*e, "abc"), (Ids{1, 5}));
  // unknown characters: unk score = min - 10, consecutive unks fused into one
  EXPECT_EQ(enc(*e, "azzb"), (Ids{1, 0, 2}));
  EXPECT_EQ(ckpt::encode::describe(*e), "tokenizer.json: Unigram, 6 tokens");
  // byte fallback: the fused unknown piece "zz" becomes its bytes
  std::string k =
      R"({"model":{"type":"Unigram","unk_id":0,"byte_fallback":true,"vocab":[["<unk>",0.0],["a",-1.5],["b",-1.5],["<0x7A>",-5.0]]}})";
  auto f = load(k);
  EXPECT_EQ(enc(*f, "azzb"), (Ids{1, 3, 3, 2}));
}

TEST(EncodeRules, Describe) {
  auto e = load(tiny("[]", "", R"({"type":"ByteLevel"})"));
  EXPECT_EQ(ckpt::encode::describe(*e), "tokenizer.json: BPE (byte-level), 8 tokens");
}

}  // namespace
