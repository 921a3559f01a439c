// TK checks: clean tokenizers pass, every defect is reported by its code, hostile input
// never crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "ckpt/json.h"
#include "ckpt/tokenizer.h"
#include "test_support.h"
#include "tokenizer/json_sections.h"
#include "tokenizer/token_table.h"

using namespace ckpt;

namespace {

JsonFile jf(const std::string& name, const std::string& text) {
  JsonFile f;
  f.file = name;
  f.present = true;
  auto r = json::parse(text);
  f.value = r.value;
  f.error = r.error;
  f.duplicates = r.duplicates;
  return f;
}

struct Fx {
  std::string tokenizer, tokenizer_config, config, generation_config;
  std::vector<std::string> extra_files;
  std::optional<uint64_t> rows;
};

Fx clean() {
  auto g = tok::generate({});
  Fx fx;
  fx.tokenizer = g.tokenizer_json;
  fx.tokenizer_config = g.tokenizer_config_json;
  fx.generation_config = g.generation_config_json;
  fx.config = R"({"model_type":"qwen2","vocab_size":288,"eos_token_id":2,"bos_token_id":0})";
  fx.rows = 288;
  return fx;
}

std::vector<Finding> run(const Fx& fx) {
  Checkpoint ck;
  auto file = [&](const std::string& name, const std::string& text) {
    FileEntry fe;
    fe.rel = name;
    fe.size = text.size();
    ck.files.push_back(fe);
  };
  auto add = [&](const std::string& name, const std::string& text, JsonFile& slot) {
    if (text.empty()) return;
    file(name, text);
    slot = jf(name, text);
  };
  if (!fx.tokenizer.empty()) {  // kept as bytes, as the loader keeps it
    file("tokenizer.json", fx.tokenizer);
    ck.tokenizer.file = "tokenizer.json";
    ck.tokenizer.present = true;
    ck.tokenizer.text = fx.tokenizer;
  }
  add("tokenizer_config.json", fx.tokenizer_config, ck.tokenizer_config);
  add("config.json", fx.config, ck.config);
  add("generation_config.json", fx.generation_config, ck.generation_config);
  for (const auto& f : fx.extra_files) {
    FileEntry fe;
    fe.rel = f;
    fe.size = 10;
    ck.files.push_back(fe);
  }
  tok::CheckInput in;
  if (fx.rows) in.embedding = tok::EmbeddingInfo{*fx.rows, "model.embed_tokens.weight", "model.safetensors"};
  FindingSink sink;
  tok::check_tokenizer(ck, in, sink);
  return sink.findings();
}

std::vector<std::string> codes(const std::vector<Finding>& fs, bool errors_only = false) {
  std::vector<std::string> c;
  for (const auto& f : fs)
    if (!errors_only || f.severity == Severity::error) c.push_back(f.code);
  return c;
}

std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += f.code + " [" + f.file + "] " + f.message + "\n";
  return s;
}

void replace(std::string& s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  ASSERT_NE(p, std::string::npos) << from;
  s.replace(p, from.size(), to);
}

}  // namespace

TEST(TokenizerChecks, GeneratedBpeIsClean) {
  auto fs = run(clean());
  EXPECT_TRUE(fs.empty()) << dump(fs);
}

TEST(TokenizerChecks, GeneratedUnigramOnlyNotesTheGenericClass) {
  Fx fx = clean();
  tok::GenOptions o;
  o.unigram = true;
  fx.tokenizer = tok::generate(o).tokenizer_json;
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK016"}) << dump(fs);
  EXPECT_EQ(fs[0].severity, Severity::info);
}

TEST(TokenizerChecks, SeedFixturesPass) {
  CKPT_REQUIRE_CORPUS();
  auto dir = test::corpus_dir() / "seed-fixtures/SharpAI/SwiftLM/tests/fixtures";
  for (const char* name : {"dense", "stray-shard", "kv-shared-absent", "kv-shared-present", "moe-nested",
                           "unigram-tokenizer"}) {
    Fx fx;
    fx.tokenizer = test::read_text(dir / name / "tokenizer.json");
    fx.tokenizer_config = test::read_text(dir / name / "tokenizer_config.json");
    fx.config = test::read_text(dir / name / "config.json");
    auto fs = run(fx);
    EXPECT_TRUE(codes(fs, true).empty()) << name << "\n" << dump(fs);
    if (std::string(name) == "unigram-tokenizer") {
      EXPECT_EQ(codes(fs), std::vector<std::string>{"TK016"}) << dump(fs);
    }
  }
}

TEST(TokenizerChecks, MissingTokenizer) {
  Fx fx = clean();
  fx.tokenizer.clear();
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK001"}) << dump(fs);
  fx.extra_files = {"vocab.json", "merges.txt"};
  EXPECT_TRUE(run(fx).empty());
}

TEST(TokenizerChecks, InvalidJson) {
  Fx fx = clean();
  fx.tokenizer = fx.tokenizer.substr(0, fx.tokenizer.size() / 2);
  auto fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK002"}) << dump(fs);
  EXPECT_NE(fs[0].message.find(":"), std::string::npos);
}

TEST(TokenizerChecks, UnknownModelType) {
  Fx fx = clean();
  replace(fx.tokenizer, "\"type\": \"BPE\"", "\"type\": \"SuperBPE\"");
  EXPECT_EQ(codes(run(fx)), std::vector<std::string>{"TK003"});
  fx = clean();
  replace(fx.tokenizer, "\"model\": {", "\"model_\": {");
  EXPECT_EQ(codes(run(fx)), std::vector<std::string>{"TK003"});
}

TEST(TokenizerChecks, DuplicateIds) {
  Fx fx = clean();
  replace(fx.tokenizer, "\"te\": 263", "\"te\": 262");
  auto fs = run(fx);
  auto c = codes(fs);
  EXPECT_NE(std::find(c.begin(), c.end(), "TK004"), c.end()) << dump(fs);
}

TEST(TokenizerChecks, MergesMissing) {
  Fx fx = clean();
  tok::GenOptions o;
  o.drop_merges_key = true;
  fx.tokenizer = tok::generate(o).tokenizer_json;
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK005"}) << dump(fs);
}

TEST(TokenizerChecks, MergeOfUnknownToken) {
  Fx fx = clean();
  replace(fx.tokenizer, "[\"he\", \"ll\"]", "[\"hx\", \"ll\"]");
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK006"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("'hx'"), std::string::npos);
}

TEST(TokenizerChecks, MergeProducesUnknownToken) {
  Fx fx = clean();
  replace(fx.tokenizer, "\"hell\": 262", "\"helo\": 262");
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK007"}) << dump(fs);
}

TEST(TokenizerChecks, MergeNotInByteLevelAlphabet) {
  Fx fx = clean();
  // A merge written with a raw space instead of 'Ġ' (U+0120).
  replace(fx.tokenizer, "[\"t\", \"e\"]", "[\" \", \"e\"]");
  replace(fx.tokenizer, "\"te\": 263", "\" e\": 263");
  replace(fx.tokenizer, "\"<pad>\": 3", "\" \": 3");
  auto fs = run(fx);
  auto c = codes(fs, true);
  EXPECT_NE(std::find(c.begin(), c.end(), "TK008"), c.end()) << dump(fs);
  EXPECT_EQ(std::count(c.begin(), c.end(), "TK006"), 0) << dump(fs);
}

TEST(TokenizerChecks, MergeSpellingCountsEveryMergeOnce) {
  // The byte-level spelling of a part is worked out once per vocabulary entry; every merge
  // naming a misspelled part still counts, whether the part is a token, an entry with a
  // malformed id, or not in the vocabulary at all. The expected count is the test's own.
  std::string vocab = R"("a":0,"b":1,"ab":2,"x\t":3,"q\t":-1)";
  std::string merges = R"(["a","b"])";
  int misspelled = 0;
  for (int k = 0; k < 9; ++k) {
    const char* part = k % 3 == 0 ? "x\\t" : k % 3 == 1 ? "q\\t" : "z\\t";  // token, bad id, absent
    merges += std::string(",[\"") + (k % 2 ? "a" : part) + "\",\"" + (k % 2 ? part : "b") + "\"]";
    ++misspelled;
    merges += R"(,["a","b"])";  // spelled, between them
  }
  Fx fx;
  fx.tokenizer = R"({"pre_tokenizer":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{)" + vocab +
                 R"(},"merges":[)" + merges + "]}}";
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) tok::set_dom_reader_only(true);
    auto fs = run(fx);
    tok::set_dom_reader_only(false);
    auto it = std::find_if(fs.begin(), fs.end(), [](const Finding& f) { return f.code == "TK008"; });
    ASSERT_NE(it, fs.end()) << dump(fs);
    EXPECT_NE(it->message.find("(" + std::to_string(misspelled) + " in all)"), std::string::npos) << it->message;
    EXPECT_NE(it->message.find("#1 'x\t' + 'b'"), std::string::npos) << it->message;
  }
}

TEST(TokenizerChecks, MalformedMerge) {
  Fx fx = clean();
  replace(fx.tokenizer, "[\"t\", \"e\"]", "\"te\"");
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK009"}) << dump(fs);
  fx = clean();
  replace(fx.tokenizer, "[\"t\", \"e\"]", "[\"t\", 5]");
  EXPECT_EQ(codes(run(fx)), std::vector<std::string>{"TK009"});
}

TEST(TokenizerChecks, AddedTokens) {
  Fx fx = clean();
  replace(fx.tokenizer, "{\"id\": 3, \"content\": \"<pad>\"", "{\"id\": -3, \"content\": \"<pad>\"");
  auto c = codes(run(fx));
  EXPECT_NE(std::find(c.begin(), c.end(), "TK010"), c.end());
  fx = clean();
  replace(fx.tokenizer, "{\"id\": 3, \"content\": \"<pad>\"", "{\"id\": 5, \"content\": \"<pad>\"");
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK011"}) << dump(fs);
  EXPECT_EQ(fs[0].severity, Severity::warning);
}

TEST(TokenizerChecks, SpecialTokenMissing) {
  Fx fx = clean();
  replace(fx.tokenizer_config, "\"eos_token\": \"<|im_end|>\"", "\"eos_token\": \"</s>\"");
  auto fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK012"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("'</s>'"), std::string::npos);
  EXPECT_EQ(fs[0].file, "tokenizer_config.json");
  fx = clean();
  replace(fx.tokenizer_config, "\"eos_token\": \"<|im_end|>\"",
          "\"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"<|im_end|>\"}, "
          "\"additional_special_tokens\": [\"<|im_start|>\", \"<|tool|>\"]");
  fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK012"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("<|tool|>"), std::string::npos);
}

TEST(TokenizerChecks, EosIdOutOfRange) {
  Fx fx = clean();
  tok::GenOptions o;
  o.eos_token_id_override = 300;
  fx.generation_config = tok::generate(o).generation_config_json;
  auto fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK013"}) << dump(fs);
  EXPECT_EQ(fs[0].file, "generation_config.json");
  EXPECT_NE(fs[0].message.find("eos_token_id is 300"), std::string::npos);
  // Lists are checked element by element, nested text configs too.
  fx = clean();
  fx.config = R"({"vocab_size":288,"text_config":{"eos_token_id":[2, 1000]}})";
  fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK013"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("text_config.eos_token_id[1]"), std::string::npos);
}

TEST(TokenizerChecks, IdWithoutToken) {
  Fx fx = clean();
  fx.rows = 320;
  fx.config = R"({"vocab_size":320,"pad_token_id":300})";
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK017"}) << dump(fs);
}

TEST(TokenizerChecks, TokenizerLargerThanEmbedding) {
  Fx fx = clean();
  fx.rows = 256;
  auto fs = run(fx);
  ASSERT_EQ(codes(fs, true), std::vector<std::string>{"TK014"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("up to 287"), std::string::npos);
  EXPECT_EQ(fs[0].tensor, "model.embed_tokens.weight");
  // A smaller tokenizer than the embedding is normal (padded vocabularies).
  fx = clean();
  fx.rows = 512;
  EXPECT_TRUE(run(fx).empty());
  // Without weights, config.json vocab_size stands in for the embedding.
  fx = clean();
  fx.rows.reset();
  fx.config = R"({"vocab_size":270})";
  EXPECT_EQ(codes(run(fx), true), std::vector<std::string>{"TK014"});
}

TEST(TokenizerChecks, TemplateLiteralNotASingleToken) {
  Fx fx = clean();
  std::string tmpl = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";
  auto j = json::quoted(tmpl);
  replace(fx.tokenizer_config, fx.tokenizer_config.substr(fx.tokenizer_config.find("\"chat_template\": ") + 17,
                                                          fx.tokenizer_config.rfind('"') + 1 -
                                                              (fx.tokenizer_config.find("\"chat_template\": ") + 17)),
          j);
  auto fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK015"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("'<think>'"), std::string::npos);
}

// Only what the parsed template can print is judged: comments, comparisons and
// raise_exception messages never reach a prompt (gpt-oss-20b's template names <|final|> in a
// comment), and each finding says where the literal is and which probe printed it.
TEST(TokenizerChecks, TemplateLiteralsComeFromTheParsedTemplate) {
  auto with_template = [](const std::string& tmpl) {
    Fx fx = clean();
    const size_t at = fx.tokenizer_config.find("\"chat_template\": ") + 17;
    fx.tokenizer_config.replace(at, fx.tokenizer_config.rfind('"') + 1 - at, json::quoted(tmpl));
    return run(fx);
  };
  const std::string loop = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
  EXPECT_TRUE(with_template(loop + "{#- a later <|final|> message is kept #}").empty());
  EXPECT_TRUE(with_template(loop + "{% if messages[0].content == '<|final|>' %}x{% endif %}").empty());
  EXPECT_TRUE(with_template(loop + "{% if '<|final|>' in messages[0].content %}"
                                   "{{ raise_exception('do not pass <|final|> in content') }}{% endif %}").empty());
  // A literal built into a variable and printed is emitted; the probe that printed it is named.
  auto fs = with_template("{% set marker = '<|final|>' %}" + loop + "{{ marker }}");
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK015"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("'<|final|>'"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].message.find("chat_template:1:18"), std::string::npos) << fs[0].message;  // past the quote
  EXPECT_NE(fs[0].message.find("probe 'bare'"), std::string::npos) << fs[0].message;
  // In a branch no probe reaches: still reported, and said so.
  fs = with_template(loop + "{% if messages|length > 40 %}\n<|final|>{% endif %}");
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK015"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("chat_template:4:1"), std::string::npos) << fs[0].message;
  EXPECT_NE(fs[0].message.find("none of the load-time probes reached"), std::string::npos) << fs[0].message;
  // A template that does not parse is CT001's; no literal guesses from its text.
  EXPECT_TRUE(with_template(loop + "<|final|>{% if %}").empty());
}

TEST(TokenizerChecks, ByteAlphabetGap) {
  Fx fx = clean();
  replace(fx.tokenizer, "\"~\": 97", "\"<|x|>\": 97");
  auto fs = run(fx);
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK018"}) << dump(fs);
}

TEST(TemplateLiterals, FindsSpecialShapesOnly) {
  auto lits = tok::template_literal_tokens(
      "{{ '<|im_start|>' + role }}<|' + x + '|><|{{ r }}|><think></think><tools>[INST]"
      "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>");
  std::vector<std::string> want = {"<|im_start|>", "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>", "<think>", "</think>"};
  EXPECT_EQ(lits, want);
}

TEST(TokenizerChecks, HostileInputsNeverCrash) {
  std::mt19937 rng(7);
  std::string base = clean().tokenizer;
  const std::string junk[] = {"{", "}", "[", "]", "\"", "-1", "1e999", "null", "\"model\"", ",", "99999999999999999"};
  for (int i = 0; i < 300; ++i) {
    Fx fx = clean();
    std::string t = base.substr(0, std::min<size_t>(base.size(), 4000));
    for (int k = 0; k < 5; ++k) {
      size_t pos = rng() % t.size();
      t.insert(pos, junk[rng() % std::size(junk)]);
    }
    fx.tokenizer = t;
    (void)run(fx);
  }
  // Structurally valid but absurd values.
  for (const char* t : {R"({"model":{"type":"BPE","vocab":{"a":9223372036854775807},"merges":[["a","a"]]},"added_tokens":[{"id":9223372036854775807,"content":"x"}]})",
                        R"({"model":{"type":"Unigram","vocab":[[1,2],["a"]],"unk_id":-5}})",
                        R"({"model":{"vocab":[]},"added_tokens":{}})", R"([])", R"({"model":[]})"}) {
    Fx fx = clean();
    fx.tokenizer = t;
    auto fs = run(fx);
    EXPECT_FALSE(codes(fs, true).empty()) << t;
  }
}

// ---- the raw-bytes reader: what tokenizer.json's own parse handles specially ----------------

namespace {

// A small byte-level-free BPE tokenizer.json around a vocabulary and merges written verbatim.
std::string bpe(const std::string& vocab, const std::string& merges, const std::string& extra = "") {
  return R"({"model":{"type":"BPE","vocab":{)" + vocab + R"(},"merges":[)" + merges + "]}" + extra + "}";
}

std::vector<Finding> run_tokenizer(const std::string& tj) {
  Fx fx;
  fx.tokenizer = tj;
  return run(fx);
}

}  // namespace

TEST(TokenizerReader, EscapedKeysMatchTheirUnescapedSpelling) {
  // \" \\ \/ \n \u0120 (Ġ) and a surrogate pair (😀) in vocabulary keys; merges name the same
  // tokens escaped differently, in both merge formats.
  std::string vocab = R"("\"":0,"\\":1,"\"\\":2,"\u0120":3,"a":4,"\u0120a":5,"\ud83d\ude00":6,"\u00e9":7,)"
                      R"("\ud83d\ude00\u00e9":8,"/":9,"a/":10,"\n":11,"\na":12)";
  std::string merges = R"(["\"","\\"],"\u0120 a",["😀","é"],"a \/",["\u000a","a"])";
  auto fs = run_tokenizer(bpe(vocab, merges));
  EXPECT_TRUE(fs.empty()) << dump(fs);
  // The result of a merge is looked up unescaped too: drop "\"\\" and TK007 names it.
  fs = run_tokenizer(bpe(R"("\"":0,"\\":1,"x":2)", R"(["\"","\\"])"));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK007"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("-> '\"\\'"), std::string::npos) << fs[0].message;
  // A NUL inside a token is part of it.
  fs = run_tokenizer(bpe(R"("a\u0000":0,"b":1,"a\u0000b":2)", R"(["a\u0000","b"])"));
  EXPECT_TRUE(fs.empty()) << dump(fs);
}

TEST(TokenizerReader, DuplicateVocabularyKeys) {
  // Written twice: reported, and the last value wins (as Python's json and json::parse do).
  auto fs = run_tokenizer(bpe(R"("a":0,"b":1,"ab":2,"a":3)", R"("a b")"));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK004"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("key 'a' written twice"), std::string::npos) << fs[0].message;
  // An escaped spelling of the same key is the same key.
  fs = run_tokenizer(bpe(R"("a":0,"b":1,"ab":2,"\u0061":3)", R"("a b")"));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK004"}) << dump(fs);
  // The last value is malformed: the token is gone, so the merge using it is reported too.
  fs = run_tokenizer(bpe(R"("a":0,"b":1,"ab":2,"a":"x")", R"("a b")"));
  ASSERT_EQ(codes(fs), (std::vector<std::string>{"TK003", "TK004", "TK006"})) << dump(fs);
  EXPECT_NE(fs[0].message.find("'a' -> \"x\""), std::string::npos) << fs[0].message;
  // The first value was malformed, the last is fine: only the duplicate is reported.
  fs = run_tokenizer(bpe(R"("a":"x","b":1,"ab":2,"a":0)", R"("a b")"));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK004"}) << dump(fs);
  // Ids shared by two keys, out of order: each pair named once, in id order.
  fs = run_tokenizer(bpe(R"("c":2,"a":0,"b":2,"ab":0)", R"("a b")"));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK004"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("id 0 = 'a' and 'ab', id 2 = 'b' and 'c'"), std::string::npos) << fs[0].message;
}

TEST(TokenizerReader, LastOfDuplicateSectionsWins) {
  // Two "model" sections: the second one is the tokenizer.
  std::string t = R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"model":{"type":"WordLevel","vocab":{"a":0,"b":1}}})";
  auto fs = run_tokenizer(t);
  EXPECT_TRUE(codes(fs, true).empty()) << dump(fs);
  // Two "merges" lists: the second is checked.
  fs = run_tokenizer(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"],"merges":["b a"]}})");
  EXPECT_EQ(codes(fs), std::vector<std::string>{"TK007"}) << dump(fs);
}

TEST(TokenizerReader, BothMergeFormatsOnALargeVocabulary) {
  tok::GenOptions o;
  o.vocab_size = 5000;
  o.fill_with_merges = true;
  auto g = tok::generate(o);
  Fx fx = clean();
  fx.rows = 5000;
  fx.config = R"({"vocab_size":5000})";
  fx.tokenizer = g.tokenizer_json;
  auto fs = run(fx);
  EXPECT_TRUE(fs.empty()) << dump(fs);
  // The same merges written as "a b" strings (the older tokenizers format).
  auto r = json::parse(g.tokenizer_json);
  ASSERT_TRUE(r.ok());
  json::Value root = r.value;
  json::Object* found = nullptr;
  for (auto& [key, value] : root.mutable_object())
    if (key == "model") found = &value.mutable_object();
  ASSERT_TRUE(found);
  json::Object& model = *found;
  ASSERT_EQ(model.back().first, "merges");
  json::Array strings;
  for (const auto& m : model.back().second.as_array())
    strings.push_back(m.as_array()[0].as_string() + " " + m.as_array()[1].as_string());
  EXPECT_EQ(strings.size(), 5000u - 260u);
  model.back().second = json::Value(std::move(strings));
  fx.tokenizer = root.dump();
  fs = run(fx);
  EXPECT_TRUE(fs.empty()) << dump(fs);
  EXPECT_NE(fx.tokenizer.find("\"merges\":[\"h e\",\"l l\""), std::string::npos);
}

TEST(TokenizerReader, MalformedJsonIsLocated) {
  Fx fx = clean();
  // A missing comma at the end of line 3: the next key, on line 4, is where it breaks.
  replace(fx.tokenizer, "\"truncation\": null,", "\"truncation\": null");
  auto want = json::locate_error(fx.tokenizer);
  ASSERT_EQ(want.line, 4u);
  ASSERT_EQ(want.column, 3u);
  auto fs = run(fx);
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK002"}) << dump(fs);
  EXPECT_EQ(fs[0].message, "tokenizer.json is not valid JSON at 4:3: " + want.message);
  // An id beyond uint64 is valid JSON (Python reads it as an int), but not a token id: the
  // vocabulary entry is malformed, the file is not "invalid JSON".
  fs = run_tokenizer(bpe(R"("a":18446744073709551616)", ""));
  ASSERT_EQ(codes(fs), std::vector<std::string>{"TK003"}) << dump(fs);
  EXPECT_NE(fs[0].message.find("'a'"), std::string::npos) << fs[0].message;
  // Too deep, invalid UTF-8, an invalid escape, a lone surrogate, trailing bytes.
  for (std::string t : {std::string(json::kDefaultMaxDepth + 1, '[') + std::string(json::kDefaultMaxDepth + 1, ']'), std::string("{\"a\":\"\xff\"}"),
                        std::string(R"({"a":"\x"})"), std::string(R"({"a":"\ud800"})"), bpe("", "") + "x"}) {
    fs = run_tokenizer(t);
    EXPECT_EQ(codes(fs), std::vector<std::string>{"TK002"}) << t.substr(0, 40) << "\n" << dump(fs);
  }
}

TEST(TokenizerReader, ParsesInPlaceOrFromACopy) {
  // The loader reserves simdjson's padding after the bytes; a caller that did not gets a copy.
  std::string t = tok::generate({}).tokenizer_json;
  Checkpoint a, b;
  for (Checkpoint* ck : {&a, &b}) {
    FileEntry fe;
    fe.rel = "tokenizer.json";
    fe.size = t.size();
    ck->files.push_back(fe);
    ck->tokenizer.file = "tokenizer.json";
    ck->tokenizer.present = true;
  }
  a.tokenizer.text = t;
  a.tokenizer.text.shrink_to_fit();
  b.tokenizer.text.reserve(t.size() + 64);
  b.tokenizer.text = t;
  ASSERT_GE(b.tokenizer.text.capacity(), t.size() + 64);
  for (Checkpoint* ck : {&a, &b}) {
    ck->finalize();
    FindingSink sink;
    tok::check_tokenizer(*ck, {}, sink);
    EXPECT_TRUE(sink.findings().empty()) << dump(sink.findings());
  }
  // A read error from the loader is reported as it was (TK002 at 0:0), and no parse is tried.
  a.tokenizer.error = json::ParseError{"cannot read: file is 600000000 bytes, above the limit", 0, 0, 0};
  FindingSink sink;
  tok::check_tokenizer(a, {}, sink);
  ASSERT_EQ(codes(sink.findings()), std::vector<std::string>{"TK002"});
  EXPECT_NE(sink.findings()[0].message.find("at 0:0: cannot read"), std::string::npos);
}

TEST(TokenTable, InsertFindGrow) {
  tok::TokenTable t;
  std::vector<std::string> keys = {"", "a", "ab", "abcdefgh", "abcdefghi", "abcdefghj", std::string("a\0", 2),
                                   std::string("\0", 1), std::string("abcdefgh\0", 9), "ÄĠ"};
  for (int i = 0; i < 5000; ++i) keys.push_back("tok" + std::to_string(i) + (i % 3 ? "" : "-long-suffix"));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [index, fresh] = t.insert(keys[i], int64_t(i));
    EXPECT_TRUE(fresh) << i;
    EXPECT_EQ(index, uint32_t(i));
  }
  EXPECT_EQ(t.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto* e = t.find(keys[i]);
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->id, int64_t(i));
    EXPECT_FALSE(t.insert(keys[i], 99).second);
  }
  for (const char* absent : {"b", "abcdefg", "abcdefghk", "tok5000", "tok0-long-suffi"}) EXPECT_FALSE(t.contains(absent)) << absent;
  EXPECT_FALSE(t.contains(std::string("a\0\0", 3)));
  // A negative id spells an entry that is not a token.
  t.set_id(1, -1);
  EXPECT_FALSE(t.contains("a"));
  EXPECT_EQ(t.index_of("a"), 1u);
  EXPECT_EQ(t.size(), keys.size() - 1);
  t.set_id(1, 7);
  EXPECT_EQ(t.find("a")->id, 7);
  EXPECT_EQ(t.size(), keys.size());
}

TEST(SentencePiece, ParsesPiecesAndRejectsJunk) {
  // ModelProto{pieces: [{piece:"<unk>", score:0}, {piece:"a"}]} + trainer_spec (field 2).
  std::string pb;
  auto piece = [&](const std::string& s) {
    std::string inner;
    inner += char(0x0A);
    inner += char(s.size());
    inner += s;
    inner += char(0x15);  // field 2, fixed32 score
    inner += std::string(4, '\0');
    pb += char(0x0A);
    pb += char(inner.size());
    pb += inner;
  };
  piece("<unk>");
  piece("a");
  pb += "\x12\x02\x08\x01";
  auto n = tok::sentencepiece_piece_count(pb);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  EXPECT_FALSE(tok::sentencepiece_piece_count(""));
  EXPECT_FALSE(tok::sentencepiece_piece_count("{\"version\": \"1.0\"}"));
  EXPECT_FALSE(tok::sentencepiece_piece_count(std::string("\x0A\xFF\xFF\xFF\xFF\x0F", 6)));
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::string s = pb;
    s[rng() % s.size()] = char(rng());
    if (rng() % 2) s.resize(rng() % s.size());
    (void)tok::sentencepiece_piece_count(s);
  }
}
