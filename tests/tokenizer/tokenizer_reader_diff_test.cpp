// Differential test of the two tokenizer.json readers: the fast path (model.vocab and
// model.merges read by the strict scanners, the rest by the DOM) must report exactly what the
// DOM-only reader reports, on generated files and on thousands of mutations of them, valid or
// not. Also checks that the fast path is really taken on the plain files it is meant for.
#include <cstdint>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ckpt/json.h"
#include "ckpt/tokenizer.h"
#include "test_support.h"
#include "tokenizer/json_sections.h"

using namespace ckpt;

namespace {

struct Outcome {
  std::vector<Finding> findings;
  bool sections = false;
};

Outcome run(const std::string& tokenizer, bool dom_only) {
  Checkpoint ck;
  FileEntry fe;
  fe.rel = "tokenizer.json";
  fe.size = tokenizer.size();
  ck.files.push_back(fe);
  ck.tokenizer.file = "tokenizer.json";
  ck.tokenizer.present = true;
  ck.tokenizer.text.reserve(tokenizer.size() + 64);  // as the loader reads it
  ck.tokenizer.text = tokenizer;
  auto cfg = json::parse(R"({"model_type":"qwen2","vocab_size":5000,"eos_token_id":2,"bos_token_id":0})");
  ck.config.file = "config.json";
  ck.config.present = true;
  ck.config.value = cfg.value;
  tok::CheckInput in;
  in.embedding = tok::EmbeddingInfo{5000, "model.embed_tokens.weight", "model.safetensors"};
  tok::set_dom_reader_only(dom_only);
  FindingSink sink;
  tok::check_tokenizer(ck, in, sink);
  Outcome o{sink.findings(), tok::last_read_used_sections()};
  tok::set_dom_reader_only(false);
  return o;
}

std::string text(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs)
    s += f.code + " " + std::to_string(int(f.severity)) + " [" + f.file + "|" + f.tensor + "] " + f.message + " || " +
         f.hint + "\n";
  return s;
}

// Both readers on one file: identical findings. Returns whether the fast path read it.
// The fast path runs twice: with the merges checked on a second thread while they are read
// (forced for every size) and on the reading thread alone.
bool same(const std::string& t, const std::string& what) {
  tok::set_merge_pipeline_min_bytes(0);
  Outcome piped = run(t, false);
  tok::set_merge_pipeline_min_bytes(SIZE_MAX);
  Outcome fast = run(t, false), dom = run(t, true);
  tok::set_merge_pipeline_min_bytes(256u << 10);
  EXPECT_FALSE(dom.sections);
  EXPECT_EQ(text(fast.findings), text(dom.findings)) << what << "\n" << t.substr(0, 300);
  EXPECT_EQ(text(piped.findings), text(fast.findings)) << what << " (merges checked on a second thread)";
  EXPECT_EQ(piped.sections, fast.sections);
  return fast.sections;
}

const std::string& big_generated(const std::vector<std::string>& bases) { return bases[1]; }

std::vector<std::string> bases() {
  std::vector<std::string> out;
  out.push_back(tok::generate({}).tokenizer_json);
  tok::GenOptions big;
  big.vocab_size = 1200;
  big.fill_with_merges = true;
  out.push_back(tok::generate(big).tokenizer_json);
  tok::GenOptions uni;
  uni.unigram = true;
  out.push_back(tok::generate(uni).tokenizer_json);
  tok::GenOptions nomerges;
  nomerges.drop_merges_key = true;
  out.push_back(tok::generate(nomerges).tokenizer_json);
  // Minified, merges as "a b" strings, escapes in keys and merges, model before the rest.
  out.push_back(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"\u0120":3,"\"":4,"\\":5,"\"\\":6,)"
                R"("\ud83d\ude00":7,"\u00e9":8,"\ud83d\ude00\u00e9":9,"a\nb":10},"merges":["a b",["\"","\\"],)"
                R"(["\ud83d\ude00","\u00e9"],"\u0120 a"]},"pre_tokenizer":{"type":"ByteLevel"},)"
                R"("added_tokens":[{"id":11,"content":"<|x|>"}]})");
  out.push_back(R"({"version":"1.0","model":{"merges":[["a","b"]],"vocab":{"a":0,"b":1,"ab":2}}})");
  // Whitespace the scanners skip in words of eight bytes: CRLF, tabs, indents longer than a
  // word, spaces before ':' and ','; and a file that ends in a run of spaces.
  {
    std::string ws;
    for (char c : big_generated(out)) {
      if (c == '\n') ws += "\r\n\t           \t ";
      else if (c == ':') ws += "          :";  // (inside strings too: still valid JSON)
      else ws += c;
    }
    out.push_back(ws + "             ");
  }
  out.push_back(R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0,"a":1,"##b":2},"max_input_chars_per_word":100}})");
  return out;
}

}  // namespace

TEST(TokenizerReaderDiff, GeneratedFilesTakeTheFastPath) {
  for (const auto& t : bases()) {
    bool sections = same(t, "base");
    // The fast path reads object vocabularies written before their merges (as every writer
    // does); the rest go through the DOM.
    size_t vocab = std::min({t.find("\"vocab\": {"), t.find("\"vocab\":{"), t.find("\"vocab\"          : {")}),
           merges = t.find("\"merges\"");
    bool plain = vocab != std::string::npos && (merges == std::string::npos || vocab < merges);
    EXPECT_EQ(sections, plain) << t.substr(0, 200);
  }
  tok::GenOptions o;
  o.vocab_size = 5000;
  o.fill_with_merges = true;
  EXPECT_TRUE(same(tok::generate(o).tokenizer_json, "5000 tokens"));
}

TEST(TokenizerReaderDiff, FindingsInManyChunksOfThePipeline) {
  // The pipeline checks chunks of 4,096 merges on two threads and appends their tallies in file
  // order: counts and first examples must be those of a serial read when the defects are
  // spread over many chunks (and more of them than the examples kept).
  tok::GenOptions o;
  o.vocab_size = 30000;
  o.fill_with_merges = true;
  std::string t = tok::generate(o).tokenizer_json;
  const size_t begin = t.find("\"merges\"");
  ASSERT_NE(begin, std::string::npos);
  size_t n = 0, edited = 0;
  // One merge per line, written `      ["a", "b"]` (escapes keep newlines out of the tokens).
  for (size_t p = t.find('\n', begin); p != std::string::npos; p = t.find('\n', p + 1)) {
    if (t.compare(p + 1, 8, "      [\"") != 0) continue;
    if (n++ % 1777 == 5) {  // a part that is no token, in every few chunks
      t.insert(p + 9, "\\u0001");
      ++edited;
    }
  }
  ASSERT_GT(n, 4 * 4096u) << n;
  ASSERT_GT(edited, 8u);
  EXPECT_TRUE(same(t, "defects spread over the chunks"));
  tok::set_merge_pipeline_min_bytes(0);
  const Outcome piped = run(t, false);
  tok::set_merge_pipeline_min_bytes(256u << 10);
  const std::string report = text(piped.findings);
  EXPECT_NE(report.find("(" + std::to_string(edited) + " in all)"), std::string::npos) << report;
}

TEST(TokenizerReaderDiff, TargetedEdits) {
  const std::string base = R"({"added_tokens":[{"id":3,"content":"<s>"}],"pre_tokenizer":{"type":"ByteLevel"},)"
                           R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}})";
  // Each replaces the vocab, the merges or a key with something the scanners give up on, or
  // that changes where the sections are; the DOM reader must decide every one.
  const std::pair<std::string, std::string> edits[] = {
      {"\"ab\":2", "\"ab\":-1"}, {"\"ab\":2", "\"ab\":\"x\""}, {"\"ab\":2", "\"ab\":2.0"}, {"\"ab\":2", "\"ab\":1e999"},
      {"\"ab\":2", "\"ab\":18446744073709551616"}, {"\"ab\":2", "\"ab\":9223372036854775807"},
      {"\"ab\":2", "\"ab\":1000000000000000000"}, {"\"ab\":2", "\"ab\":02"}, {"\"ab\":2", "\"ab\":-0"},
      {"\"ab\":2", "\"ab\":2,\"a\":5"}, {"\"ab\":2", "\"ab\":2,\"\\u0061\":5"}, {"\"ab\":2", "\"ab\":null"},
      {"\"ab\":2", "\"ab\":2,"}, {"\"a b\"", "[\"a\",\"b\"]"}, {"\"a b\"", "[\"a\",\"\"]"}, {"\"a b\"", "[\"a\"]"},
      {"\"a b\"", "[1,2]"}, {"\"a b\"", "\"a  b\""}, {"\"a b\"", "\"ab\""}, {"\"a b\"", "\"a b\",\"b a\""},
      {"\"a b\"", "\"a\\u0020b\""}, {"\"a b\"", "\"a\\ud800 b\""}, {"\"a b\"", "\"a\\udc00 b\""},
      {"\"a b\"", "\"a\\x b\""}, {"\"a b\"", "\"a\tb\""}, {"\"a b\"", "\"a\xff b\""}, {"\"a\":0", "\"\xc3\":0"},
      {"\"a b\"]", "\"a b\"],\"merges\":[\"b a\"]"}, {"\"vocab\":{", "\"vocab\":{\"z\":9},\"vocab\":{"},
      {"\"model\":{", "\"model\":{\"type\":\"BPE\"},\"model\":{"}, {"\"model\":{", "\"model/vocab\":{\"a\":1,\"a\":2},\"model\":{"},
      {"\"model\":", "\"mod\\u0065l\":"}, {"\"vocab\":", "\"voc\\u0061b\":"}, {"\"merges\":", "\"merg\\u0065s\":"},
      {"\"merges\":[\"a b\"]", "\"merges\":[]"}, {"\"merges\":[\"a b\"]", "\"merges\":{}"},
      {"\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}", "\"vocab\":[[\"a\",0.0]]"}, {"\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}", "\"vocab\":{}"},
      {"\"type\":\"BPE\"", "\"type\":\"Unigram\""}, {"\"type\":\"BPE\"", "\"type\":\"WordPiece\""},
      {"\"type\":\"BPE\"", "\"type\":\"Nope\""}, {"\"type\":\"BPE\",", ""}, {"}}", "}} x"}, {"}}", "}"},
      {"{\"added", "[{\"added"}, {"\"ab\":2}", "\"ab\":2} "}, {"\"b\":1", "\"b\":1 , \"c\" : 3"},
      {"\"a b\"]", "\"a b\" ,\n [ \"b\" , \"a\" ] ]"}, {"\"a b\"]", "\"a b\",\"-8000000000000000001 x\"]"},
      {"\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}", "\"vocab\":-8000000000000000001"},
      {"\"merges\":[\"a b\"]", "\"merges\":-8000000000000000002"},
      // Ids beyond the 5000 embedding rows (TK014 counts distinct ids) and ids no token has.
      {"\"ab\":2", "\"ab\":7000"}, {"\"b\":1", "\"b\":7000,\"c\":7000,\"d\":9000"},
      {"{\"id\":3,", "{\"id\":7000,"}, {"\"a\":0", "\"a\":\"x\""}, {"\"b\":1", "\"b\":\"x\""},
      // Ids with 8 bytes or more after them, which the scanner reads eight digits at a time.
      {"\"a\":0", "\"a\":1234567"}, {"\"a\":0", "\"a\":12345678"}, {"\"a\":0", "\"a\":123456789"},
      {"\"a\":0", "\"a\":4999"}, {"\"a\":0", "\"a\":00"}, {"\"a\":0", "\"a\":01234567"},
      {"\"a\":0", "\"a\":999999999999999999"}, {"\"a\":0", "\"a\":1000000000000000000"},
      {"\"a\":0", "\"a\":12345678.5"}, {"\"a\":0", "\"a\":1234e5"}, {"\"a\":0", "\"a\":4294967296"},
      {"\"a\":0", "\"a\":12345678901234567890123"}, {"\"a\":0", "\"a\":7 "}, {"\"a\":0", "\"a\":-12345678"},
  };
  for (const auto& [from, to] : edits) {
    std::string t = base;
    size_t p = t.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    t.replace(p, from.size(), to);
    same(t, from + " -> " + to);
  }
}

namespace {

// One to three random edits: junk inserted, bytes erased or overwritten, a line repeated or
// dropped (a duplicate key or element, a missing one).
std::string mutate(std::string t, std::mt19937& rng) {
  static const std::string junk[] = {"{", "}", "[", "]", "\"", "\\", ",", ":", " ", "\n", "-1", "0", "1.5", "1e999",
                                     "null", "\"a\"", "\"model\"", "\"vocab\"", "\"merges\"", "\\u0041", "\\ud83d",
                                     "\xc3", "\xff", "99999999999999999999", "-8000000000000000001", "[\"a\",\"b\"]",
                                     "\"a b\""};
  int edits = 1 + int(rng() % 3);
  for (int k = 0; k < edits; ++k) {
    size_t pos = rng() % t.size();
    switch (rng() % 4) {
      case 0: t.insert(pos, junk[rng() % std::size(junk)]); break;
      case 1: t.erase(pos, 1 + rng() % 8); break;
      case 2: t[pos] = char(rng()); break;
      default: {  // a line twice (a duplicate key or element), or a line dropped
        size_t b = t.rfind('\n', pos), e = t.find('\n', pos);
        if (b == std::string::npos || e == std::string::npos) break;
        std::string line = t.substr(b, e - b);
        if (rng() % 2) t.insert(e, line);
        else t.erase(b, e - b);
      }
    }
    if (t.empty()) t = "{}";
  }
  return t;
}

}  // namespace

TEST(TokenizerReaderDiff, MutatedFilesReportTheSame) {
  std::mt19937 rng(11);
  size_t fast = 0, total = 0;
  for (const auto& base : bases()) {
    for (int i = 0; i < 400; ++i) {
      fast += same(mutate(base, rng), "mutation " + std::to_string(i));
      ++total;
    }
  }
  // Most mutations land in the vocab or merges and many leave the file valid: both paths ran.
  EXPECT_GT(fast, total / 10) << fast << " of " << total;
  EXPECT_LT(fast, total) << fast << " of " << total;
}

TEST(TokenizerReaderDiff, FuzzSeedsAndRealFilesReportTheSame) {
  // The fuzz target's seeds (tokenizer.json is the part before the first 0x1E) and, when the
  // corpus is beside the clone, the real tokenizer.json files of its seed fixtures.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(CKPT_SOURCE_DIR) + "/fuzz/corpus/fuzz_tokenizer")) {
    std::string bytes = test::read_text(e.path());
    files.push_back(bytes.substr(0, bytes.find('\x1e')));
  }
  if (auto dir = test::corpus_dir(); !dir.empty())
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "seed-fixtures"))
      if (e.path().filename() == "tokenizer.json") files.push_back(test::read_text(e.path()));
  ASSERT_FALSE(files.empty());
  std::mt19937 rng(5);
  size_t fast = 0;
  for (const auto& t : files) {
    fast += same(t, "file");
    for (int i = 0; i < 200; ++i) same(mutate(t, rng), "mutation " + std::to_string(i));
  }
  EXPECT_GE(fast, 2u) << "of " << files.size() << " files";  // the BPE ones
  std::printf("fast path on %zu of %zu files\n", fast, files.size());
}
