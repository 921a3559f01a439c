// TK020 reads tokenizer.json's model.type by a scan that skips the rest of the file
// (src/checks/engines.cpp scan_model_type), falling back to a full parse for anything outside
// the plain form. Every spelling of the same tokenizer must give the same verdict.
#include <gtest/gtest.h>

#include "../checks/builders.h"

namespace ckpt::engines {
namespace {

using test::run_ckpt;
using test::TempDir;

bool tk020(const std::string& tokenizer_json) {
  TempDir d;
  auto dir = d.path() / "m";
  EXPECT_EQ(run_ckpt({"fixture", "llama", dir.string()}).exit_code, 0);
  test::write_text(dir / "tokenizer.json", tokenizer_json);
  auto r = run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "TK020"});
  return r.out.find("\"TK020\"") != std::string::npos;
}

const std::string kVocab = R"({"a": 0, "b": 1, "x\"y": 2, "{": 3, "}": 4})";

TEST(tokenizer_model_type, every_spelling_of_a_wordlevel_model_is_found) {
  // The tokenizers library's order: model last, type first.
  EXPECT_TRUE(tk020(R"({"version": "1.0", "added_tokens": [{"id": 0, "content": "}"}], "normalizer": null,
                        "model": {"type": "WordLevel", "vocab": )" + kVocab + R"(, "unk_token": "a"}})"));
  // model first, type after a vocabulary full of brackets and escaped quotes.
  EXPECT_TRUE(tk020(R"({"model": {"vocab": )" + kVocab + R"(, "unk_token": "a", "type": "WordLevel"}, "version": "1.0"})"));
  // Nested arrays and scalars before it.
  EXPECT_TRUE(tk020(R"({"padding": [1, [2, {"k": [3]}], true, null, -1.5e3], "model": {"dropout": null, "type": "WordLevel", "vocab": {}}})"));
  // An escaped key or value: the full parser decides (same answer).
  EXPECT_TRUE(tk020(R"({"mod\u0065l": {"type": "WordLevel", "vocab": )" + kVocab + R"(}})"));
  EXPECT_TRUE(tk020(R"({"model": {"type": "Word\u004cevel", "vocab": )" + kVocab + R"(}})"));
  // Cut short after the type: the type is legible, so TK020 stands beside the TK family's own
  // parse error (the scan does not read the whole file to prove it well-formed).
  EXPECT_TRUE(tk020(R"({"model": {"type": "WordLevel", "vocab": {"a": 0)"));
  // Whitespace everywhere.
  EXPECT_TRUE(tk020("{\r\n \"model\"\t:\n {\n  \"type\" :  \"WordLevel\" ,\"vocab\":{}\n }\n}\n"));
}

TEST(tokenizer_model_type, other_models_and_malformed_files_are_not_wordlevel) {
  EXPECT_FALSE(tk020(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"));
  EXPECT_FALSE(tk020(R"({"model": {"vocab": {"type": "WordLevel"}}})"));  // a token named "type"
  EXPECT_FALSE(tk020(R"({"added_tokens": [{"model": {"type": "WordLevel"}}], "model": {"type": "BPE"}})"));
  EXPECT_FALSE(tk020(R"([{"model": {"type": "WordLevel"}}])"));
}

}  // namespace
}  // namespace ckpt::engines
