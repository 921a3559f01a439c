// TK checks: clean tokenizers pass, every defect is reported by its code, hostile input
// never crashes.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "ckpt/json.h"
#include "ckpt/tokenizer.h"
#include "test_support.h"

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
  auto add = [&](const std::string& name, const std::string& text, JsonFile& slot) {
    if (text.empty()) return;
    FileEntry fe;
    fe.rel = name;
    fe.size = text.size();
    ck.files.push_back(fe);
    slot = jf(name, text);
  };
  add("tokenizer.json", fx.tokenizer, ck.tokenizer);
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
    if (std::string(name) == "unigram-tokenizer")
      EXPECT_EQ(codes(fs), std::vector<std::string>{"TK016"}) << dump(fs);
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
